//! The window check: from the clients' own records, how many admissions of one key some window
//! of the rule's span certainly held.
//!
//! The server decides a check at a moment `s` of its own that the client never sees, but which
//! lies between the client's send time and its answer time (`send <= s <= answer`), whatever
//! the two clocks are. A sliding log admits in the server's order: the promise is that for every
//! admission at `s`, the admissions at server times in `(s - span, s]` number at most `limit`.
//!
//! For an admission `a` answered at `A`, take the admissions `b` with `answer_b <= A` and
//! `send_b > A - span`. Each of them was decided at some `s_b` in `(A - span, A]`: after its
//! send, so after `A - span`, and before its answer, so at or before `A`. They all lie in the
//! window `(now - span, now]` at `now = max s_b` (`now <= A`, so `now - span <= A - span <
//! s_b`). So that window held at least that many: if it is above the limit, the limiter
//! over-admitted, certainly. This is the `certain` count, and the promise is checked on it.
//!
//! Counting by answer times alone (`answer_b` in `(A - span, A]`, the `loose` count) would also
//! count the admissions that were in flight across the window's start edge (sent before `A -
//! span`, answered after it): the server may have decided those before the window began. The
//! difference, `loose - certain`, is exactly that ambiguity of in-flight overlaps, and nothing
//! else is tolerated. A client-side check cannot prove a window was over the limit for those,
//! and it reports how many there were.

/// One admission of one key: the client's send and answer times, in nanoseconds from the run's
/// start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Admission {
    /// When the client sent the check.
    pub(crate) send: u64,
    /// When the client had the answer.
    pub(crate) answer: u64,
}

/// The fullest window found for one key.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Window {
    /// Admissions certainly decided inside one window of the span.
    pub(crate) certain: usize,
    /// Admissions answered inside that window, the in-flight ones at its start edge included.
    pub(crate) loose: usize,
    /// The answer time the window ends at, in nanoseconds from the run's start.
    pub(crate) at: u64,
}

/// The window with the most certain admissions among `admissions` (one key, one backend
/// epoch), for a rule of span `span` nanoseconds. Sorts `admissions` by answer time.
pub(crate) fn worst_window(admissions: &mut [Admission], span: u64) -> Window {
    admissions.sort_unstable_by_key(|a| (a.answer, a.send));
    let mut worst = Window::default();
    let (mut lo, mut hi) = (0, 0);
    for i in 0..admissions.len() {
        let end = admissions[i].answer;
        // Answered inside (end - span, end].
        while admissions[lo].answer.saturating_add(span) <= end {
            lo += 1;
        }
        while hi < admissions.len() && admissions[hi].answer <= end {
            hi += 1;
        }
        let inside = &admissions[lo..hi];
        let certain = inside
            .iter()
            .filter(|b| b.send.saturating_add(span) > end)
            .count();
        if (certain, inside.len()) > (worst.certain, worst.loose) {
            worst = Window {
                certain,
                loose: inside.len(),
                at: end,
            };
        }
    }
    worst
}

#[cfg(test)]
mod tests {
    use super::{Admission, worst_window};

    fn at(send: u64, answer: u64) -> Admission {
        Admission { send, answer }
    }

    #[test]
    fn admissions_a_span_apart_share_no_window() {
        // 2 per 10: the third comes exactly one span after the first, which has left.
        let mut log = vec![at(0, 1), at(1, 2), at(11, 11)];
        let worst = worst_window(&mut log, 10);
        assert_eq!((worst.certain, worst.loose), (2, 2));
    }

    #[test]
    fn three_inside_one_span_are_certain() {
        let mut log = vec![at(0, 1), at(2, 3), at(5, 9)];
        assert_eq!(worst_window(&mut log, 10).certain, 3);
    }

    #[test]
    fn an_admission_in_flight_across_the_edge_is_only_loose() {
        // Sent at 0 and answered at 5: the server may have decided it at 0, one span before 10.
        let mut log = vec![at(0, 5), at(8, 9), at(10, 10)];
        let worst = worst_window(&mut log, 10);
        assert_eq!((worst.certain, worst.loose, worst.at), (2, 3, 10));
    }

    #[test]
    fn ties_in_answer_time_count_together() {
        let mut log = vec![at(4, 5), at(3, 5), at(5, 5)];
        let worst = worst_window(&mut log, 10);
        assert_eq!((worst.certain, worst.loose), (3, 3));
    }

    #[test]
    fn nothing_admitted_is_an_empty_window() {
        assert_eq!(worst_window(&mut [], 10).certain, 0);
    }
}
