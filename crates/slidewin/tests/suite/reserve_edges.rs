//! Issue 33's edges on every algorithm and holder: settles to 0 and to `u64::MAX`, after the
//! window passed, with the clock gone back, two reservations at one instant, and a keyed map
//! on a memory budget.

use std::sync::Arc;
use std::time::Duration;

use slidewin::limit::{
    CalendarQuota, CalendarUnit, Gcra, Kind, Leases, MemoryBudget, Reservation, Rule, RuleSet,
};
use slidewin::{Keyed, Limiter, Moment, Quota, SharedLimiter};

const SPAN: u64 = 10_000_000_000;
const T: u64 = 1_000 * SPAN;

fn at(nanos: u64) -> Moment {
    Moment::from_nanos(nanos)
}

/// One rule of `kind`, 10 per span, as a set: every kind through one type.
fn one(kind: Kind) -> Limiter<RuleSet> {
    if kind == Kind::Calendar {
        // 10 a calendar day: the span's edges below fall inside one day.
        let quota = CalendarQuota::new(10, CalendarUnit::Day).unwrap();
        return Limiter::new(RuleSet::from(Rule::calendar("r", quota).unwrap()));
    }
    let quota = Quota::new(10, Duration::from_nanos(SPAN)).unwrap();
    Limiter::new(RuleSet::from(Rule::new("r", kind, quota).unwrap()))
}

#[test]
fn a_settle_to_0_gives_the_whole_estimate_back_on_every_kind() {
    for kind in Kind::ALL {
        let mut limiter = one(kind);
        let (_, reserved) = limiter.reserve(at(T), 10).unwrap();
        assert!(limiter.settle(reserved.unwrap(), 0), "{kind}");
        assert!(limiter.check(at(T), 10).unwrap().allowed(), "{kind}");
    }
}

#[test]
fn a_settle_to_u64_max_is_debt_that_never_wraps_on_every_kind() {
    for kind in Kind::ALL {
        let mut limiter = one(kind);
        let (_, first) = limiter.reserve(at(T), 5).unwrap();
        let (_, second) = limiter.reserve(at(T + 1), 5).unwrap();
        assert!(limiter.settle(first.unwrap(), u64::MAX), "{kind}");
        limiter.settle(second.unwrap(), u64::MAX);
        let denied = limiter.check(at(T + 2), 1).unwrap();
        assert!(!denied.allowed(), "{kind}");
        assert_eq!(denied.remaining(), 0, "{kind}");
        // The debt is bounded: the windows' leaves with them (the calendar's at the next
        // day), the bucket's within a span and a full bucket of the reservation.
        let still = limiter.check(at(T + 3 * SPAN), 1).unwrap();
        assert_eq!(still.allowed(), kind != Kind::Calendar, "{kind}");
        let next_day = limiter.check(at(86_400 * 1_000_000_000), 1).unwrap();
        assert!(next_day.allowed(), "{kind}");
    }
}

#[test]
fn a_settle_after_the_window_passed_changes_nothing_on_the_windows() {
    for kind in [
        Kind::SlidingLog,
        Kind::Leases,
        Kind::FixedWindow,
        Kind::SlidingCounter,
    ] {
        let mut limiter = one(kind);
        let (_, reserved) = limiter.reserve(at(T), 4).unwrap();
        assert!(
            limiter.check(at(T + 2 * SPAN), 1).unwrap().allowed(),
            "{kind}"
        );
        assert!(!limiter.settle(reserved.unwrap(), 10), "{kind}");
        assert_eq!(limiter.peek(at(T + 2 * SPAN), 0).unwrap().remaining(), 9);
    }
}

#[test]
fn a_bucket_settled_after_it_refilled_owes_only_what_is_still_ahead() {
    // 10 per span: one unit every span / 10.
    let mut bucket =
        Limiter::new(Gcra::new(Quota::new(10, Duration::from_nanos(SPAN)).unwrap()).unwrap());
    let (_, reserved) = bucket.reserve(at(T), 2).unwrap();
    // Two spans later the bucket is full; 3 more units used, owed from T: paid long ago.
    assert!(bucket.settle(reserved.unwrap(), 5));
    assert_eq!(bucket.peek(at(T + 2 * SPAN), 0).unwrap().remaining(), 10);
    // Settling down never moves the TAT before the reservation's time plus what it used.
    let (_, again) = bucket.reserve(at(T + 3 * SPAN), 10).unwrap();
    assert!(bucket.settle(again.unwrap(), 0));
    assert_eq!(bucket.peek(at(T + 3 * SPAN), 0).unwrap().remaining(), 10);
}

#[test]
fn a_clock_gone_back_counts_the_reservation_where_every_rule_finds_it() {
    let quota = |limit| Quota::new(limit, Duration::from_nanos(SPAN)).unwrap();
    let set = RuleSet::new([
        Rule::new("log", Kind::SlidingLog, quota(100)).unwrap(),
        Rule::new("fixed", Kind::FixedWindow, quota(100)).unwrap(),
        Rule::new("counter", Kind::SlidingCounter, quota(100)).unwrap(),
    ])
    .unwrap();
    let mut tokens = Limiter::new(set);
    tokens.check(at(T + 5), 1).unwrap();
    let (_, reserved) = tokens.reserve(at(T + 2), 10).unwrap(); // the clock went back
    let reserved = reserved.unwrap();
    assert_eq!(reserved.at(), at(T + 5)); // the log's newest admission
    assert!(tokens.settle(reserved, 30));
    let each: Vec<u64> = tokens
        .peek(at(T + 5), 0)
        .unwrap()
        .iter()
        .map(|d| d.remaining())
        .collect();
    assert_eq!(each, [69, 69, 69]);
}

#[test]
fn two_reservations_at_one_instant_settle_apart_and_never_below_nothing() {
    for kind in Kind::ALL {
        let mut limiter = one(kind);
        let (_, a) = limiter.reserve(at(T), 3).unwrap();
        let (_, b) = limiter.reserve(at(T), 4).unwrap();
        assert_eq!(a.unwrap().at(), b.unwrap().at());
        limiter.settle(a.unwrap(), 0);
        assert_eq!(limiter.peek(at(T), 0).unwrap().remaining(), 6, "{kind}");
        limiter.settle(b.unwrap(), 1);
        assert_eq!(limiter.peek(at(T), 0).unwrap().remaining(), 9, "{kind}");
        // Settled again from its estimate: what is left at the instant is the floor.
        limiter.settle(a.unwrap(), 0);
        assert!(limiter.peek(at(T), 0).unwrap().remaining() <= 10, "{kind}");
    }
}

#[test]
fn an_estimate_of_0_or_a_denial_reserves_nothing() {
    let mut limiter = one(Kind::SlidingCounter);
    assert_eq!(limiter.reserve(at(T), 0).unwrap().1, None);
    limiter.check(at(T), 10).unwrap();
    let (denied, none) = limiter.reserve(at(T), 1).unwrap();
    assert!(!denied.allowed());
    assert_eq!(none, None);
    assert!(limiter.reserve(at(T), 11).is_err()); // more than the limit: refused as a check is
}

#[test]
fn a_reservation_from_nowhere_changes_an_empty_log_nothing() {
    let mut limiter = one(Kind::SlidingLog);
    assert!(!limiter.settle(Reservation::new(at(T), 5), 500));
    assert!(limiter.check(at(T), 10).unwrap().allowed());
}

#[test]
fn shared_one_word_limiters_settle_with_their_compare_and_swap() {
    let fixed =
        SharedLimiter::new(slidewin::limit::FixedWindow::new("10/s".parse().unwrap()).unwrap());
    let (_, r) = fixed.reserve(Moment::ZERO, 6).unwrap();
    assert!(fixed.settle(r.unwrap(), 50)); // capped at a full window
    assert_eq!(fixed.peek(Moment::ZERO, 0).unwrap().remaining(), 0);
    assert!(fixed.check(Moment::from_secs(1), 10).unwrap().allowed());
    assert!(!fixed.settle(r.unwrap(), 0)); // its window ended
}

#[test]
fn leases_settle_as_their_log_and_release_what_is_held() {
    let mut in_flight = Limiter::new(Leases::new(10, Duration::from_secs(30)).unwrap());
    let (_, r) = in_flight.reserve(Moment::ZERO, 2).unwrap();
    assert!(in_flight.settle(r.unwrap(), 5));
    assert_eq!(in_flight.release(Moment::from_secs(1), 10), 5);
    assert!(!in_flight.settle(r.unwrap(), 1)); // released: nothing holds it
}

#[test]
fn a_keyed_map_settles_by_key_and_keeps_its_budget_true() {
    let budget = Arc::new(MemoryBudget::new(1 << 20));
    let set = RuleSet::new([
        Rule::new("minute", Kind::SlidingLog, "1000/minute".parse().unwrap()).unwrap(),
        Rule::new("day", Kind::SlidingLog, "10000/day".parse().unwrap()).unwrap(),
    ])
    .unwrap();
    let tokens = Keyed::<String, _>::new(set)
        .with_max_keys(100)
        .unwrap()
        .with_memory_budget(Arc::clone(&budget), |k| k.capacity());
    let (_, r) = tokens.reserve("ann", Moment::from_secs(1), 200).unwrap();
    let used = budget.used_bytes();
    assert!(used > 0);
    assert!(!tokens.settle("bob", r.unwrap(), 900));
    assert!(tokens.settle("ann", r.unwrap(), 900));
    assert_eq!(budget.used_bytes(), used);
    let left = tokens.peek("ann", Moment::from_secs(2), 0).unwrap();
    assert_eq!(
        left.iter().map(|d| d.remaining()).collect::<Vec<_>>(),
        [100, 9100]
    );
    // A key gone idle and swept holds nothing to settle.
    tokens.sweep(Moment::from_secs(2 * 86_400));
    assert!(!tokens.settle("ann", r.unwrap(), 0));
    assert_eq!(budget.used_bytes(), 0);
}

/// A calendar window settles as a fixed window does: in the month it was admitted in, and not
/// once the month has ended.
#[test]
fn a_calendar_month_settles_in_its_month_only() {
    let quota = CalendarQuota::new(1_000, CalendarUnit::Month).unwrap();
    let mut limiter = Limiter::new(RuleSet::from(Rule::calendar("month", quota).unwrap()));
    let secs = |text: &str| Moment::try_from(text.parse::<jiff::Timestamp>().unwrap()).unwrap();
    let (_, reserved) = limiter.reserve(secs("2026-11-30T23:00:00Z"), 300).unwrap();
    let reserved = reserved.unwrap();
    assert!(limiter.settle(reserved, 900));
    let left = limiter.peek(secs("2026-11-30T23:30:00Z"), 0).unwrap();
    assert_eq!(left.decision().remaining(), 100);
    assert!(limiter.settle(reserved.settled(900), 200));
    let left = limiter.peek(secs("2026-11-30T23:30:00Z"), 0).unwrap();
    assert_eq!(left.decision().remaining(), 800);
    // December: November's reservation holds nothing now.
    assert!(
        limiter
            .check(secs("2026-12-01T00:00:00Z"), 1)
            .unwrap()
            .allowed()
    );
    assert!(!limiter.settle(reserved.settled(200), 1_000));
    let left = limiter.peek(secs("2026-12-01T00:00:01Z"), 0).unwrap();
    assert_eq!(left.decision().remaining(), 999);
}

/// Issue 33, costs reported after the response: an unreserved settle charges past the limit
/// on every kind, as debt each kind bounds its way, and a charge of 0 changes nothing.
#[test]
fn issue_33_an_unreserved_settle_charges_past_the_limit_on_every_kind() {
    for kind in Kind::ALL {
        let mut limiter = one(kind);
        assert!(!limiter.settle(Reservation::unreserved(at(T)), 0), "{kind}");
        assert!(limiter.peek(at(T), 10).unwrap().allowed(), "{kind}");
        assert!(limiter.settle(Reservation::unreserved(at(T)), 25), "{kind}");
        let owed = limiter.check(at(T + 1), 0).unwrap();
        assert_eq!(owed.remaining(), 0, "{kind}");
        // Only the logs deny a question of 0 in debt; the others answer it yes, nothing left.
        let logs = matches!(kind, Kind::SlidingLog | Kind::Leases);
        assert_eq!(owed.allowed(), !logs, "{kind}");
        assert!(!limiter.check(at(T + 1), 1).unwrap().allowed(), "{kind}");
        let later = limiter.check(at(T + 3 * SPAN), 1).unwrap();
        assert_eq!(later.allowed(), kind != Kind::Calendar, "{kind}");
        assert!(
            limiter
                .check(at(86_400 * 1_000_000_000), 1)
                .unwrap()
                .allowed()
        );
    }
}

/// A sliding log's charge counts at its newest stamp when the clock went back, and the log
/// holds at most twice its limit however much is charged.
#[test]
fn a_charge_with_the_clock_gone_back_counts_at_the_newest_admission() {
    let mut log = one(Kind::SlidingLog);
    log.check(at(T), 4).unwrap();
    assert!(log.settle(Reservation::unreserved(at(T - SPAN / 2)), 3));
    // All 7 leave together, a span after T: none was counted before it.
    assert!(!log.check(at(T + SPAN - 1), 4).unwrap().allowed());
    assert!(log.check(at(T + SPAN), 10).unwrap().allowed());
    assert!(log.settle(Reservation::unreserved(at(T + SPAN)), u64::MAX));
    let owed = log.check(at(T + SPAN + 1), 0).unwrap();
    assert_eq!(owed.retry_after(), Some(Duration::from_nanos(SPAN - 1)));
}

/// A token bucket idle long enough to be full charges from the report's time, not from the
/// old TAT; its debt stops a span and a full bucket after it.
#[test]
fn a_bucket_charges_from_the_reports_time() {
    let quota = Quota::new(10, Duration::from_nanos(SPAN)).unwrap();
    let mut bucket = Limiter::new(Gcra::new(quota).unwrap());
    bucket.check(at(T), 10).unwrap();
    assert!(bucket.settle(Reservation::unreserved(at(T + 5 * SPAN)), 4));
    assert_eq!(bucket.peek(at(T + 5 * SPAN), 0).unwrap().remaining(), 6);
    assert!(bucket.settle(Reservation::unreserved(at(T + 5 * SPAN)), u64::MAX));
    // Full again at T + 7 spans: one unit fits 9 intervals before it.
    assert!(!bucket.check(at(T + 6 * SPAN), 1).unwrap().allowed());
    assert!(bucket.check(at(T + 7 * SPAN), 1).unwrap().allowed());
}

/// A charge makes its key, as a check does, within the cap; at the cap it counts nothing.
#[test]
fn a_keyed_charge_makes_its_key_within_the_cap() {
    let tokens = Keyed::<String, _>::new(Gcra::new("100/minute".parse().unwrap()).unwrap())
        .with_max_keys(1)
        .unwrap();
    let left = tokens.charge_equivalent("ann", Moment::ZERO, 30).unwrap();
    assert_eq!(left.remaining(), 70);
    assert!(tokens.charge_equivalent("bob", Moment::ZERO, 30).is_err());
    assert_eq!(tokens.len(), 1);
    assert_eq!(tokens.peek("ann", Moment::ZERO, 0).unwrap().remaining(), 70);
}

/// Found by the Redis property test: a charge of nothing in a later window rolled memory's
/// windows (Redis writes nothing), so a reservation of the window before was no longer held
/// in memory. A charge of 0 now changes nothing on every kind.
#[test]
fn a_charge_of_nothing_leaves_every_kind_as_it_was() {
    for kind in Kind::ALL {
        let mut limiter = one(kind);
        let (_, reserved) = limiter.reserve(at(T), 3).unwrap();
        assert!(
            !limiter.settle(Reservation::unreserved(at(T + 2 * SPAN)), 0),
            "{kind}"
        );
        assert!(limiter.settle(reserved.unwrap(), 1), "{kind}");
    }
}
