//! [`State`], and the one word that holds it with the half-open probes' counters.

use std::fmt;

use super::CallStats;

/// A circuit breaker's state, as resilience4j names them.
///
/// # Example
///
/// ```
/// use slidewin::breaker::State;
/// assert_eq!(State::HalfOpen.to_string(), "half-open");
/// assert!(State::ForcedOpen.is_open());
/// assert!(!State::Disabled.is_open());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum State {
    /// Calls pass, and their outcomes are counted in the window.
    Closed,
    /// Calls are refused until the wait has passed; the next call is then a probe.
    Open,
    /// A bounded number of probe calls pass; when they have all completed, their failure and
    /// slow-call rates decide between [`Closed`](State::Closed) and [`Open`](State::Open).
    HalfOpen,
    /// Calls are refused until an operator resets the breaker; nothing is counted.
    ForcedOpen,
    /// Calls pass and nothing is counted, until an operator resets the breaker.
    Disabled,
}

impl State {
    /// Whether a call would be refused in this state without being a probe: `Open` and
    /// `ForcedOpen`.
    ///
    /// ```
    /// use slidewin::breaker::State;
    /// assert!(State::Open.is_open());
    /// assert!(!State::HalfOpen.is_open());
    /// ```
    #[must_use]
    pub fn is_open(self) -> bool {
        matches!(self, State::Open | State::ForcedOpen)
    }

    const ALL: [State; 5] = [
        State::Closed,
        State::Open,
        State::HalfOpen,
        State::ForcedOpen,
        State::Disabled,
    ];
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            State::Closed => "closed",
            State::Open => "open",
            State::HalfOpen => "half-open",
            State::ForcedOpen => "forced-open",
            State::Disabled => "disabled",
        })
    }
}

/// The half-open probes: handed out, completed, and of those the failed and the slow ones.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Probes {
    pub(super) issued: u64,
    pub(super) done: u64,
    pub(super) failed: u64,
    pub(super) slow: u64,
}

impl Probes {
    /// The completed probes as call statistics.
    pub(super) fn stats(self) -> CallStats {
        CallStats {
            calls: self.done,
            errors: self.failed,
            slow: self.slow,
        }
    }

    /// These probes with one more completed.
    pub(super) fn complete(self, error: bool, slow: bool) -> Probes {
        Probes {
            done: self.done + 1,
            failed: self.failed + u64::from(error),
            slow: self.slow + u64::from(slow),
            ..self
        }
    }
}

/// Bits per probe counter: [`MAX_PROBES`] fits.
const PROBE_BITS: u32 = 11;
const PROBE_MASK: u64 = (1 << PROBE_BITS) - 1;
/// The most probes a half-open state may permit.
pub(super) const MAX_PROBES: u32 = 1 << 10;
const _: () = assert!(MAX_PROBES == 1 << 10 && PROBE_MASK >= 1 << 10);

/// The low bit: a transition has moved the word but not yet written its time and floor.
const SETTLING: u64 = 1;
const STATE_SHIFT: u32 = 1;
const STATE_MASK: u64 = 0b111;
const PROBES_SHIFT: u32 = 4;
const GENERATION_SHIFT: u32 = PROBES_SHIFT + 4 * PROBE_BITS;
const _: () = assert!(GENERATION_SHIFT <= 48);

/// The breaker's state in one `u64`: `generation (16) | slow | failed | done | issued (11
/// each) | state (3) | settling (1)`. Every transition adds one to the generation, so a
/// reader can tell that what it read beside the word belongs to the state it saw.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Word(pub(super) u64);

impl Word {
    /// The first word: closed, generation 0, settled.
    pub(super) fn closed() -> Word {
        Word(0)
    }

    pub(super) fn state(self) -> State {
        // Only `next` writes the state bits, from a `State`.
        #[allow(clippy::cast_possible_truncation, reason = "three bits")]
        let index = (self.0 >> STATE_SHIFT & STATE_MASK) as usize;
        State::ALL[index.min(State::ALL.len() - 1)]
    }

    pub(super) fn generation(self) -> u64 {
        self.0 >> GENERATION_SHIFT
    }

    pub(super) fn is_settling(self) -> bool {
        self.0 & SETTLING != 0
    }

    pub(super) fn settled(self) -> Word {
        Word(self.0 & !SETTLING)
    }

    pub(super) fn probes(self) -> Probes {
        let field = |i: u32| self.0 >> (PROBES_SHIFT + i * PROBE_BITS) & PROBE_MASK;
        Probes {
            issued: field(0),
            done: field(1),
            failed: field(2),
            slow: field(3),
        }
    }

    /// This word with other probe counters (each at most [`MAX_PROBES`]).
    pub(super) fn with_probes(self, p: Probes) -> Word {
        let fields = [p.issued, p.done, p.failed, p.slow];
        let mut word = self.0 & !(((1 << (4 * PROBE_BITS)) - 1) << PROBES_SHIFT);
        for (i, value) in (0_u32..).zip(fields) {
            word |= (value & PROBE_MASK) << (PROBES_SHIFT + i * PROBE_BITS);
        }
        Word(word)
    }

    /// The word of a transition to `to`: the next generation (wrapping), no probes, settling.
    pub(super) fn next(self, to: State) -> Word {
        let generation = (self.generation() + 1) & ((1 << (64 - GENERATION_SHIFT)) - 1);
        Word(generation << GENERATION_SHIFT | (to as u64) << STATE_SHIFT | SETTLING)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_word_keeps_each_field() {
        let word = Word::closed().next(State::HalfOpen);
        assert!(word.is_settling());
        let probes = Probes {
            issued: u64::from(MAX_PROBES),
            done: 1_023,
            failed: 7,
            slow: 1_000,
        };
        let word = word.settled().with_probes(probes);
        assert_eq!(word.state(), State::HalfOpen);
        assert_eq!(word.generation(), 1);
        assert_eq!(word.probes(), probes);
        assert!(!word.is_settling());
    }

    #[test]
    fn every_state_round_trips_and_the_generation_wraps() {
        let mut word = Word::closed();
        for _ in 0..(1 << 16) {
            for state in State::ALL {
                assert_eq!(word.next(state).state(), state);
            }
            word = word.next(State::Open).settled();
        }
        assert_eq!(word.generation(), 0);
        assert_eq!(word.probes(), Probes::default());
    }
}
