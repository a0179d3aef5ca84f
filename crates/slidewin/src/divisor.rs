//! [`Divisor`] (private): division by a divisor fixed at construction, as two multiplications.

/// Division of any `u64` by a fixed divisor `d >= 2` as a multiplication: `t / d` is the top
/// 64 bits of `t * m / 2^64` with `m = floor((2^128 - 1) / d) + 1` (128 bits). `m` is
/// `2^128 / d` plus less than one, so `t * m / 2^128` is `t / d` plus less than `2^-64`: never
/// enough to pass the next integer, since the fraction of `t / d` is at most `1 - 1 / d`. Two
/// multiplications instead of a 64-bit division, which takes 40 to 90 cycles on older x86 and
/// sits on hot paths: the slot of a `WindowMetrics` event, the units a `Gcra` check leaves.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Divisor {
    high: u64,
    low: u64,
}

impl Divisor {
    /// The divisor `d`; `None` for 0 and 1 (`2^128 / 1` does not fit, and needs no division).
    pub(crate) fn new(d: u64) -> Option<Divisor> {
        if d < 2 {
            return None;
        }
        let m = u128::MAX / u128::from(d) + 1;
        #[allow(clippy::cast_possible_truncation, reason = "the two halves of m")]
        Some(Divisor {
            high: (m >> 64) as u64,
            low: m as u64,
        })
    }

    /// `t / d`, rounded down.
    #[inline]
    pub(crate) fn divide(self, t: u64) -> u64 {
        let t = u128::from(t);
        let carry = (t * u128::from(self.low)) >> 64;
        #[allow(clippy::cast_possible_truncation, reason = "below 2^64: the quotient")]
        let q = ((t * u128::from(self.high) + carry) >> 64) as u64;
        q
    }
}

#[cfg(test)]
mod tests {
    use super::Divisor;
    use proptest::prelude::*;

    #[test]
    fn divides_as_the_division_does_at_the_edges() {
        let divisors = [
            2,
            3,
            7,
            1_000,
            500_000_000,
            1 << 32,
            (1 << 63) + 1,
            u64::MAX - 1,
            u64::MAX,
        ];
        let times = [
            0,
            1,
            2,
            999,
            1_000,
            1 << 32,
            (1 << 63) - 1,
            1 << 63,
            u64::MAX - 1,
            u64::MAX,
        ];
        for d in divisors {
            let divisor = Divisor::new(d).unwrap();
            for t in times
                .iter()
                .copied()
                .chain(times.iter().map(|t| t.wrapping_mul(d)))
            {
                for t in [t.saturating_sub(1), t, t.saturating_add(1)] {
                    assert_eq!(divisor.divide(t), t / d, "{t} / {d}");
                }
            }
        }
        // A walk through many quotients of a few divisors.
        for d in [3, 10, 1_000_003] {
            let divisor = Divisor::new(d).unwrap();
            let mut t: u64 = 1;
            while let Some(next) = t.checked_mul(3) {
                for t in [t, next - 1, next / 2 + 7] {
                    assert_eq!(divisor.divide(t), t / d, "{t} / {d}");
                }
                t = next;
            }
        }
        assert!(Divisor::new(0).is_none() && Divisor::new(1).is_none());
    }

    proptest! {
        #[test]
        fn divides_as_the_division_does(d in 2..=u64::MAX, t: u64, near in 0..3u64) {
            let divisor = Divisor::new(d).unwrap();
            prop_assert_eq!(divisor.divide(t), t / d);
            // Just below and at multiples of d, where a quotient would be off by one.
            let k = t / d;
            let at = k.saturating_mul(d).saturating_sub(near);
            prop_assert_eq!(divisor.divide(at), at / d);
        }
    }
}
