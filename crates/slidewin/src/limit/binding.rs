//! The binding decision: of several decisions about one request, the one a client must heed.
//! One rule, used by [`Decisions`](super::Decisions), the tower layer and the rate-limit
//! service, so that all of them name the same limit in the `RateLimit` field.

use super::Decision;

impl Decision {
    /// Whether this decision binds before `other`, so that a client must heed it rather than
    /// `other`:
    ///
    /// - a denial binds before an admission;
    /// - of two denials, the one with the longer `retry_after` (when it has passed, every rule
    ///   admits, if nothing else was admitted meanwhile);
    /// - of two admissions, the one with the least `remaining` for its `limit` (the one
    ///   closest to its limit).
    ///
    /// On a tie neither binds before the other, and the first one offered stays binding.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::Decision;
    ///
    /// let burst = Decision::allow(10, 1, Duration::from_secs(1)); // 10% left
    /// let hourly = Decision::allow(1000, 50, Duration::from_secs(3600)); // 5% left
    /// assert!(hourly.binds_before(&burst));
    /// let denied = Decision::deny(10, 0, Duration::from_secs(1), Duration::from_secs(1));
    /// assert!(denied.binds_before(&hourly));
    /// assert!(!burst.binds_before(&burst));
    /// ```
    #[must_use]
    pub fn binds_before(&self, other: &Decision) -> bool {
        match (self.allowed(), other.allowed()) {
            (false, true) => true,
            (true, false) => false,
            (false, false) => self.retry_after_nanos() > other.retry_after_nanos(),
            // remaining / limit < other.remaining / other.limit, without a division.
            (true, true) => {
                u128::from(self.remaining()) * u128::from(other.limit())
                    < u128::from(other.remaining()) * u128::from(self.limit())
            }
        }
    }
}

/// The binding decision among decisions offered one at a time, each with a tag of yours (an
/// index, a rule): enforced decisions bind before shadow ones (a shadow rule never denies, so
/// it binds only when no enforced rule decided), and among either the rule of
/// [`Decision::binds_before`] applies; the first offered wins a tie.
///
/// ```
/// use std::time::Duration;
/// use slidewin::Decision;
/// use slidewin::limit::Binding;
///
/// let mut binding = Binding::new();
/// binding.offer_shadow(Decision::deny(5, 0, Duration::ZERO, Duration::from_secs(9)), "watched");
/// binding.offer(Decision::allow(100, 99, Duration::from_secs(60)), "enforced");
/// let (decision, tag) = binding.get().unwrap();
/// assert_eq!(*tag, "enforced"); // an enforced admission binds before a shadow denial
/// assert!(decision.allowed());
/// ```
#[derive(Clone, Debug)]
pub struct Binding<T> {
    held: Option<Held<T>>,
}

#[derive(Clone, Debug)]
struct Held<T> {
    decision: Decision,
    shadow: bool,
    tag: T,
}

impl<T> Default for Binding<T> {
    fn default() -> Binding<T> {
        Binding::new()
    }
}

impl<T> Binding<T> {
    /// Nothing offered yet.
    ///
    /// ```
    /// use slidewin::limit::Binding;
    /// assert!(Binding::<usize>::new().get().is_none());
    /// ```
    #[must_use]
    pub const fn new() -> Binding<T> {
        Binding { held: None }
    }

    /// Offers an enforced rule's `decision`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::Decision;
    /// use slidewin::limit::Binding;
    ///
    /// let mut binding = Binding::new();
    /// binding.offer(Decision::allow(10, 5, Duration::ZERO), 0);
    /// binding.offer(Decision::allow(10, 2, Duration::ZERO), 1);
    /// assert_eq!(binding.get().map(|(_, at)| *at), Some(1)); // 2 of 10 left
    /// ```
    pub fn offer(&mut self, decision: Decision, tag: T) {
        self.offer_as(decision, false, tag);
    }

    /// Offers a shadow rule's `decision`: it binds only if no enforced decision is offered.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::Decision;
    /// use slidewin::limit::Binding;
    ///
    /// let mut binding = Binding::new();
    /// binding.offer_shadow(Decision::allow(10, 5, Duration::ZERO), "shadow");
    /// assert_eq!(binding.get().map(|(_, tag)| *tag), Some("shadow"));
    /// ```
    pub fn offer_shadow(&mut self, decision: Decision, tag: T) {
        self.offer_as(decision, true, tag);
    }

    fn offer_as(&mut self, decision: Decision, shadow: bool, tag: T) {
        let binds = match &self.held {
            None => true,
            Some(held) => match (shadow, held.shadow) {
                (false, true) => true,
                (true, false) => false,
                _ => decision.binds_before(&held.decision),
            },
        };
        if binds {
            self.held = Some(Held {
                decision,
                shadow,
                tag,
            });
        }
    }

    /// The binding decision and its tag, if any was offered.
    ///
    /// ```
    /// use slidewin::limit::Binding;
    /// assert_eq!(Binding::<()>::default().get(), None);
    /// ```
    #[must_use]
    pub fn get(&self) -> Option<(&Decision, &T)> {
        self.held.as_ref().map(|held| (&held.decision, &held.tag))
    }

    /// The binding decision and its tag, if any was offered.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::Decision;
    /// use slidewin::limit::Binding;
    ///
    /// let mut binding = Binding::new();
    /// binding.offer(Decision::allow(1, 0, Duration::ZERO), 7);
    /// assert_eq!(binding.into_inner().map(|(_, tag)| tag), Some(7));
    /// ```
    #[must_use]
    pub fn into_inner(self) -> Option<(Decision, T)> {
        self.held.map(|held| (held.decision, held.tag))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn allow(limit: u64, remaining: u64) -> Decision {
        Decision::allow(limit, remaining, Duration::ZERO)
    }

    fn deny(retry_secs: u64) -> Decision {
        Decision::deny(5, 0, Duration::ZERO, Duration::from_secs(retry_secs))
    }

    #[test]
    fn the_first_offered_wins_a_tie() {
        let mut binding = Binding::new();
        binding.offer(allow(10, 5), 0);
        binding.offer(allow(20, 10), 1); // the same share left
        binding.offer(allow(10, 5), 2);
        assert_eq!(binding.get().map(|(_, at)| *at), Some(0));
    }

    #[test]
    fn the_longest_wait_binds_among_denials() {
        let mut binding = Binding::new();
        binding.offer(deny(3), 0);
        binding.offer(allow(10, 0), 1);
        binding.offer(deny(9), 2);
        binding.offer(deny(4), 3);
        assert_eq!(binding.get().map(|(_, at)| *at), Some(2));
    }

    #[test]
    fn a_never_denial_binds_before_any_wait() {
        let never = Decision::deny(5, 0, Duration::ZERO, Duration::MAX);
        assert!(never.binds_before(&deny(1_000_000)));
        assert!(!deny(1_000_000).binds_before(&never));
    }

    #[test]
    fn enforced_binds_before_shadow_whatever_either_says() {
        let mut binding = Binding::new();
        binding.offer_shadow(deny(60), "shadow denial");
        binding.offer(allow(10, 9), "enforced");
        binding.offer_shadow(deny(90), "later shadow denial");
        assert_eq!(binding.get().map(|(_, tag)| *tag), Some("enforced"));
    }

    #[test]
    fn a_zero_limit_admission_compares_without_dividing() {
        // 0 of 0 left and 1 of 2 left: 0 * 2 < 1 * 0 is false, so neither binds before.
        assert!(!allow(0, 0).binds_before(&allow(2, 1)));
        assert!(!allow(2, 1).binds_before(&allow(0, 0)));
        assert!(allow(u64::MAX, 0).binds_before(&allow(u64::MAX, 1)));
    }
}
