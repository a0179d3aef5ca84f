//! The leases' promise, from the clients' own records: no key ever held more than its `N` units
//! (no acquisition admitted while `N` were certainly held), and no unit outlived its lease (no
//! acquisition refused that only units past their lease could explain).
//!
//! The service keeps each key's units as a queue in the order they were taken: a unit leaves
//! one lease after it was taken (the half-open convention: at exactly `s + lease` it is gone),
//! and a release gives back the oldest unit held (if any). Every unit has the same lease, so
//! expiry also takes the oldest first. As in `check`, the service decides each exchange at a
//! moment of its own between the client's send and answer times; nothing else is assumed.
//!
//! **Certainly held** (a lower bound). For any `u` with `u >= s - lease`, the units taken in
//! `(u, s]` have not expired at `s`, and only releases in `(u, s]` can have given them back, one
//! each, whichever unit each release took: so at least `taken(u, s] - releases(u, s]` units are
//! held at `s`, and the bound is the best such `u`. Just before an admission decided somewhere
//! in `[send, answer]`: units certainly taken in `(u, s)` (`send_b > u`, `answer_b < send`) less
//! releases possibly in it (`answer_r > u`, `send_r < answer`; a release whose fate the client
//! does not know counts as possible forever), for `u >= answer - lease`. If that reaches `N`,
//! the service admitted over its limit, certainly.
//!
//! **Possibly held** (an upper bound). The units gone by `s` are at least those taken by `v -
//! lease` (expired at `v`) plus the releases in `(v, s]` that found a unit to give back, for any
//! `v <= s`; so at most `taken(v - lease, s] - popped(v, s]` are held. A release certainly found
//! one when at least one was certainly held just before it. Every acquisition that may have
//! taken a unit counts (admitted, degraded or not, or with its fate unknown); only releases
//! certainly decided in `(v, send)` pop. A refusal with fewer than `N` possibly held was
//! explained only by units past their lease (or gone otherwise): the service kept a unit too
//! long.
//!
//! With Redis, a restart empties the store and a failover may lose the last writes: the
//! certain side counts only units taken, and pops only releases decided, inside the refused or
//! admitted exchange's own backend epoch (between two outages), and checks only exchanges
//! inside one. The possible side counts units from every epoch, which only loosens it.

use crate::client::Decision;
use crate::leases::{Kind, LeaseRecord};

/// The clocks' play: the service stamps a unit with a clock read inside the exchange, but
/// Redis's `TIME` is in microseconds; a unit is taken as certainly live, or certainly gone,
/// only this far from its lease's end.
const SLACK: u64 = 1_000_000;

/// One exchange's send and answer times, in nanoseconds from the run's start; an answer of
/// `u64::MAX` for an exchange whose fate the client does not know (an error, a timeout).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Span {
    pub(crate) send: u64,
    pub(crate) answer: u64,
}

/// Units certainly held just before an exchange decided within `at`: `held` are acquisitions
/// that certainly took a unit, `releases` every release that may have given one back; `own`
/// when the exchange is itself one of `releases` (it is not counted before itself).
pub(crate) fn certainly_held(
    held: &[Span],
    releases: &[Span],
    own: bool,
    at: Span,
    lease: u64,
) -> usize {
    let floor = at.answer.saturating_add(SLACK).saturating_sub(lease);
    let mut sends: Vec<u64> = held
        .iter()
        .filter(|b| b.answer < at.send && b.send > floor)
        .map(|b| b.send)
        .collect();
    let mut answers: Vec<u64> = releases
        .iter()
        .filter(|r| r.send < at.answer && r.answer > floor)
        .map(|r| r.answer)
        .collect();
    if own && let Some(i) = answers.iter().position(|&a| a == at.answer) {
        answers.swap_remove(i);
    }
    sends.sort_unstable();
    answers.sort_unstable();
    // taken(u) - released(u) only steps up where a release leaves the count: try those.
    std::iter::once(floor)
        .chain(answers.iter().copied())
        .map(|u| {
            let taken = sends.len() - sends.partition_point(|&s| s <= u);
            let released = answers.len() - answers.partition_point(|&a| a <= u);
            taken.saturating_sub(released)
        })
        .max()
        .unwrap_or(0)
}

/// Units possibly held just before an exchange decided within `at`: `maybe` are the
/// acquisitions that may have taken a unit, `pops` the releases certainly decided that
/// certainly gave one back. `v` is tried back to `horizon` before `at.send` (a shorter search
/// only loosens the bound).
pub(crate) fn possibly_held(
    maybe: &[Span],
    pops: &[Span],
    at: Span,
    lease: u64,
    horizon: u64,
) -> usize {
    let mut ends: Vec<u64> = maybe
        .iter()
        .filter(|b| b.send < at.answer)
        .map(|b| b.answer.saturating_add(lease + SLACK))
        .collect();
    let mut sends: Vec<u64> = pops
        .iter()
        .filter(|r| r.answer < at.send)
        .map(|r| r.send)
        .collect();
    ends.sort_unstable();
    sends.sort_unstable();
    let earliest = at.send.saturating_sub(horizon);
    // taken(v) - popped(v) only steps down where a pop joins: just before each send.
    std::iter::once(at.send)
        .chain(sends.iter().map(|&s| s.saturating_sub(1)))
        .filter(|&v| v >= earliest && v <= at.send)
        .map(|v| {
            let taken = ends.len() - ends.partition_point(|&e| e <= v);
            let popped = sends.len() - sends.partition_point(|&s| s <= v);
            taken.saturating_sub(popped)
        })
        .min()
        .unwrap_or(0)
}

/// The leases' figures.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Leases {
    pub(crate) acquisitions: usize,
    pub(crate) admitted: usize,
    pub(crate) releases: usize,
    pub(crate) late: usize,
    pub(crate) retried: usize,
    pub(crate) dead: usize,
    /// The most units held, an admission's own included: certain, and by answer times.
    pub(crate) worst_certain: usize,
    pub(crate) worst_by_answer: usize,
    /// Refusals checked (non-degraded, inside one epoch), those that only units past their
    /// lease could explain, and those with exactly `N` possibly held (one unit kept a moment
    /// too long would have made them unexplained).
    pub(crate) refusals: usize,
    pub(crate) unexplained: usize,
    pub(crate) tight: usize,
    /// Releases answered with an error saying the store could not answer: with Redis down,
    /// the service answers a release so rather than by its failure policy.
    pub(crate) unstored: usize,
}

/// The backend epoch an exchange lies wholly inside, if any: epoch `k` runs from the end of
/// outage `k - 1` (or the start) to the kill of outage `k` (or the end).
fn epoch(outages: &[(u64, u64)], at: Span) -> Option<usize> {
    let k = outages.iter().filter(|o| o.1 <= at.send).count();
    let end = outages.get(k).map_or(u64::MAX, |o| o.0);
    (at.answer < end && k.checked_sub(1).is_none_or(|p| outages[p].1 <= at.send)).then_some(k)
}

fn span(rec: &LeaseRecord) -> Span {
    let decided = matches!(rec.decision, Decision::Ok | Decision::Over);
    Span {
        send: rec.send,
        answer: if decided { rec.answer } else { u64::MAX },
    }
}

/// Checks the leases of every key in `records` for a limit of `limit` units and a lease of
/// `lease` nanoseconds.
pub(crate) fn check_leases(
    records: &[LeaseRecord],
    outages: &[(u64, u64)],
    limit: usize,
    lease: u64,
) -> Leases {
    let mut leases = Leases::default();
    let mut keys: Vec<u32> = records.iter().map(|r| r.key).collect();
    keys.sort_unstable();
    keys.dedup();
    for key in keys {
        let mine: Vec<&LeaseRecord> = records.iter().filter(|r| r.key == key).collect();
        check_key(&mine, outages, limit, lease, &mut leases);
    }
    for rec in records {
        let ok = rec.decision == Decision::Ok;
        match rec.kind {
            Kind::Acquire => {
                leases.acquisitions += 1;
                leases.admitted += usize::from(ok);
                leases.dead += usize::from(rec.dead);
            }
            Kind::Release => {
                leases.releases += 1;
                leases.late += usize::from(rec.late);
                leases.unstored += usize::from(matches!(&rec.decision,
                    Decision::Error(_, said) if said.contains("store could not answer")));
            }
        }
        leases.retried += usize::from(rec.retry);
    }
    leases
}

/// Spans sorted by send, to search those that may overlap a stretch of time.
struct Sorted {
    known: Vec<Span>,
    /// Those whose fate the client does not know: every search keeps them.
    unknown: Vec<Span>,
    /// The longest known exchange: a span answered after `t` was sent after `t - longest`.
    longest: u64,
}

impl Sorted {
    fn new(spans: impl Iterator<Item = Span>) -> Sorted {
        let (mut known, unknown): (Vec<Span>, Vec<Span>) =
            spans.partition(|s| s.answer != u64::MAX);
        known.sort_unstable_by_key(|s| s.send);
        let longest = known.iter().map(|s| s.answer - s.send).max().unwrap_or(0);
        Sorted {
            known,
            unknown,
            longest,
        }
    }

    /// Every span that may be answered after `after` and was sent before `before` (and some
    /// more: the bounds filter them exactly).
    fn around(&self, after: u64, before: u64) -> Vec<Span> {
        let from = after.saturating_sub(self.longest);
        let lo = self.known.partition_point(|s| s.send < from);
        let hi = self.known.partition_point(|s| s.send < before);
        let unknown = self.unknown.iter().filter(|s| s.send < before);
        self.known[lo..hi.max(lo)]
            .iter()
            .chain(unknown)
            .copied()
            .collect()
    }
}

/// One key's exchanges, checked epoch by epoch.
fn check_key(
    mine: &[&LeaseRecord],
    outages: &[(u64, u64)],
    limit: usize,
    lease: u64,
    leases: &mut Leases,
) {
    let of = |kind: Kind| mine.iter().filter(move |r| r.kind == kind);
    let releases = Sorted::new(of(Kind::Release).map(|r| span(r)));
    let maybe = Sorted::new(
        of(Kind::Acquire)
            .filter(|r| r.decision != Decision::Over)
            .map(|r| span(r)),
    );
    for k in 0..=outages.len() {
        // Decided by the store (not degraded) inside epoch `k`.
        let inside = |rec: &&&LeaseRecord| {
            !rec.degraded
                && matches!(rec.decision, Decision::Ok | Decision::Over)
                && epoch(outages, span(rec)) == Some(k)
        };
        let held = Sorted::new(
            of(Kind::Acquire)
                .filter(|r| r.decision == Decision::Ok && inside(r))
                .map(|r| span(r)),
        );
        let certain = |at: Span, own: bool| {
            let floor = at.answer.saturating_sub(lease);
            certainly_held(
                &held.around(floor, at.send),
                &releases.around(floor, at.answer),
                own,
                at,
                lease,
            )
        };
        for &a in &held.known {
            leases.worst_certain = leases.worst_certain.max(certain(a, false) + 1);
        }
        // A release of this epoch pops when a unit was certainly there to give back.
        let pops = Sorted::new(
            of(Kind::Release)
                .filter(|r| inside(r) && certain(span(r), true) >= 1)
                .map(|r| span(r)),
        );
        for o in of(Kind::Acquire).filter(|r| r.decision == Decision::Over && inside(r)) {
            let at = span(o);
            let earliest = at.send.saturating_sub(2 * lease);
            let at_most = possibly_held(
                &maybe.around(earliest.saturating_sub(lease + SLACK), at.answer),
                &pops.around(earliest, at.send),
                at,
                lease,
                2 * lease,
            );
            leases.refusals += 1;
            leases.unexplained += usize::from(at_most < limit);
            leases.tight += usize::from(at_most == limit);
        }
    }
    leases.worst_by_answer = leases
        .worst_by_answer
        .max(worst_by_answer(mine, outages, lease));
}

/// The most units held after an admission, were every exchange decided at its answer time
/// (the store emptied at each kill): a figure, not a proof, as in `check`'s `loose` count.
fn worst_by_answer(mine: &[&LeaseRecord], outages: &[(u64, u64)], lease: u64) -> usize {
    let mut events: Vec<&LeaseRecord> = mine
        .iter()
        .copied()
        .filter(|r| !r.degraded && matches!(r.decision, Decision::Ok))
        .collect();
    events.sort_unstable_by_key(|r| r.answer);
    let mut queue = std::collections::VecDeque::<u64>::new();
    let (mut worst, mut kills) = (0, outages.iter().map(|o| o.0).peekable());
    for rec in events {
        while kills.next_if(|&kill| kill <= rec.answer).is_some() {
            queue.clear();
        }
        while queue.front().is_some_and(|&t| t + lease <= rec.answer) {
            queue.pop_front();
        }
        match rec.kind {
            Kind::Acquire => {
                queue.push_back(rec.answer);
                worst = worst.max(queue.len());
            }
            Kind::Release => {
                queue.pop_front();
            }
        }
    }
    worst
}

#[cfg(test)]
mod tests {
    use super::{Leases, Span, certainly_held, check_leases, epoch, possibly_held};
    use crate::client::Decision;
    use crate::leases::{Kind, LeaseRecord};

    const MS: u64 = 1_000_000;
    const LEASE: u64 = 2000 * MS;

    /// An exchange sent and answered at these milliseconds (of a run 10 s old).
    fn at(send: u64, answer: u64) -> Span {
        Span {
            send: (10_000 + send) * MS,
            answer: (10_000 + answer) * MS,
        }
    }

    fn record(kind: Kind, span: Span, decision: Decision) -> LeaseRecord {
        LeaseRecord {
            send: span.send,
            answer: span.answer,
            key: 0,
            kind,
            decision,
            degraded: false,
            dead: false,
            late: false,
            retry: false,
        }
    }

    #[test]
    fn units_taken_inside_the_lease_are_certainly_held() {
        let held = [at(0, 1), at(10, 11), at(20, 21)];
        assert_eq!(certainly_held(&held, &[], false, at(30, 31), LEASE), 3);
        // Still in flight when the fourth was sent: perhaps decided after it.
        assert_eq!(certainly_held(&held, &[], false, at(15, 31), LEASE), 2);
    }

    #[test]
    fn a_unit_leaves_exactly_one_lease_after_it_was_taken() {
        let held = [at(0, 1), at(10, 11), at(20, 21)];
        // The first was taken by 1 ms: gone by 2001 ms, perhaps already at 2000.
        assert_eq!(certainly_held(&held, &[], false, at(2001, 2002), LEASE), 2);
        assert_eq!(certainly_held(&held, &[], false, at(1990, 1995), LEASE), 3);
    }

    #[test]
    fn each_release_that_may_come_before_gives_back_one() {
        let held = [at(0, 1), at(10, 11), at(20, 21)];
        let releases = [at(12, 13), at(29, 40)];
        // The second release is in flight at the check: it may have been decided first.
        assert_eq!(
            certainly_held(&held, &releases, false, at(30, 31), LEASE),
            1
        );
        // A release whose fate is unknown counts as possible forever.
        let lost = [Span {
            answer: u64::MAX,
            ..at(5, 5)
        }];
        assert_eq!(certainly_held(&held, &lost, false, at(30, 31), LEASE), 2);
        // A release is not counted before itself.
        assert_eq!(certainly_held(&held, &releases, true, at(29, 40), LEASE), 2);
    }

    #[test]
    fn a_release_before_units_were_taken_does_not_count_against_them() {
        // Released at 5 (nothing held, or an older unit): the two taken after stay held.
        let held = [at(10, 11), at(20, 21)];
        assert_eq!(
            certainly_held(&held, &[at(4, 5)], false, at(30, 31), LEASE),
            2
        );
    }

    #[test]
    fn expired_units_cannot_explain_a_refusal() {
        // Three dead holders at 0..21 ms: refused at 2100 ms, nothing may be held.
        let maybe = [at(0, 1), at(10, 11), at(20, 21)];
        assert_eq!(
            possibly_held(&maybe, &[], at(2100, 2101), LEASE, 2 * LEASE),
            0
        );
        assert_eq!(
            possibly_held(&maybe, &[], at(1000, 1001), LEASE, 2 * LEASE),
            3
        );
        // Within the slack of the lease's end, a unit may still be there.
        assert_eq!(
            possibly_held(&maybe, &[], at(2021, 2022), LEASE, 2 * LEASE),
            1
        );
    }

    #[test]
    fn a_release_that_gave_back_the_oldest_leaves_the_newer_held() {
        // W dead at 0, X at 1500, a release at 1900 gives back W: X is held at 3000.
        let maybe = [at(0, 1), at(1500, 1501)];
        let pops = [at(1900, 1901)];
        assert_eq!(
            possibly_held(&maybe, &pops, at(3000, 3001), LEASE, 2 * LEASE),
            1
        );
        // Had it come after W's lease (2100), it gave back X: nothing is held at 3000.
        let pops = [at(2100, 2101)];
        assert_eq!(
            possibly_held(&maybe, &pops, at(3000, 3001), LEASE, 2 * LEASE),
            0
        );
    }

    #[test]
    fn an_exchange_across_an_outage_is_in_no_epoch() {
        let outages = [(at(1000, 0).send, at(4000, 0).send)];
        assert_eq!(epoch(&outages, at(0, 10)), Some(0));
        assert_eq!(epoch(&outages, at(990, 1010)), None);
        assert_eq!(epoch(&outages, at(2000, 2001)), None);
        assert_eq!(epoch(&outages, at(4000, 4001)), Some(1));
    }

    /// Releases named no unit: a late one gives back a newer holder's, a dead holder's unit
    /// expires, and the limit is met exactly. Nothing is broken.
    #[test]
    fn a_run_that_kept_the_rule_passes() {
        use Decision::{Ok, Over};
        let log = [
            record(Kind::Acquire, at(0, 1), Ok),     // A, dies
            record(Kind::Acquire, at(10, 11), Ok),   // B
            record(Kind::Acquire, at(20, 21), Ok),   // C
            record(Kind::Acquire, at(30, 31), Over), // full
            record(Kind::Release, at(100, 101), Ok), // B's, gives back A's
            record(Kind::Acquire, at(110, 111), Ok), // D
            record(Kind::Acquire, at(120, 121), Over),
            record(Kind::Release, at(2050, 2051), Ok), // C's, late: gives back D's... or B's
            record(Kind::Acquire, at(2200, 2201), Ok),
        ];
        let l = check_leases(&log, &[], 3, LEASE);
        let Leases {
            worst_certain,
            refusals,
            unexplained,
            ..
        } = l;
        assert_eq!((worst_certain, refusals, unexplained), (3, 2, 0));
    }

    #[test]
    fn an_admission_over_the_limit_and_a_refusal_of_nothing_are_seen() {
        use Decision::{Ok, Over};
        let log = [
            record(Kind::Acquire, at(0, 1), Ok),
            record(Kind::Acquire, at(10, 11), Ok),
            record(Kind::Acquire, at(20, 21), Ok),
            record(Kind::Acquire, at(30, 31), Ok), // a fourth: over-admitted
            record(Kind::Acquire, at(2100, 2101), Over), // all four gone by then
        ];
        let l = check_leases(&log, &[], 3, LEASE);
        assert_eq!((l.worst_certain, l.unexplained), (4, 1));
    }
}
