//! Issue 33: what comes back and what is corrected, the same on memory, a Redis and a Redis
//! Cluster: leases released or left to their lease, a log's refunds, and reservations settled
//! up and down on every algorithm.

use super::*;

on_every_backend! {
    /// Issue 33: leases beside a rate. An acquisition takes from both, a release gives back
    /// the oldest unit held and leaves the rate spent, a holder that never releases leaks
    /// nothing past its lease, and a release of more than is held gives back what is.
    async fn leases_come_back_by_release_or_at_their_lease_end(b) {
        let both = set(&[("in_flight", Kind::Leases, "2 per 10s"), ("rate", Kind::SlidingLog, "5/minute")]);
        assert!(b.check(&both, "k", secs(100), 1).await.unwrap().allowed());
        assert!(b.check(&both, "k", secs(101), 1).await.unwrap().allowed());
        let full = b.check(&both, "k", secs(102), 1).await.unwrap();
        assert_eq!((full.allowed(), full.binding()), (false, 0));
        assert_eq!(full[0].retry_after(), Some(Duration::from_secs(8)));
        // The request of 100 s ends: its unit comes back, the rate's stays spent.
        assert_eq!(b.release(&both, "k", secs(102), 1).await, 1);
        let again = b.check(&both, "k", secs(102), 1).await.unwrap();
        assert!(again.allowed());
        assert_eq!((again[0].remaining(), again[1].remaining()), (0, 2));
        // Both holders die: at 111 s the lease of 101 s has ended, that of 102 s not yet.
        let one_back = b.check(&both, "k", secs(111), 1).await.unwrap();
        assert!(one_back.allowed());
        assert_eq!(one_back[0].remaining(), 0);
        assert_eq!(b.release(&both, "k", secs(111), 5).await, 2);
        assert_eq!(b.release(&both, "k", secs(111), 1).await, 0);
        let rate_left = b.check(&both, "k", secs(111), 1).await.unwrap();
        assert_eq!((rate_left[0].remaining(), rate_left[1].remaining()), (1, 0));
    }

    /// Issue 33: a minute that refunds beside a day that does not (Envoy's negative hits on
    /// a token budget). A release gives back the minute's oldest units in the window, leaves
    /// the day spent, gives back nothing of what has left the window, and never more than
    /// is held.
    async fn a_log_that_refunds_gives_back_its_oldest_units(b) {
        let minute = Rule::new("minute", Kind::SlidingLog, "10/minute".parse().unwrap()).unwrap();
        let day = Rule::new("day", Kind::SlidingLog, "100/day".parse().unwrap()).unwrap();
        let tokens = Rules::new(RuleSet::new([minute.with_refunds().unwrap(), day]).unwrap()).unwrap();
        assert!(b.check(&tokens, "k", secs(100), 4).await.unwrap().allowed());
        assert!(b.check(&tokens, "k", secs(130), 6).await.unwrap().allowed());
        assert_eq!(b.release(&tokens, "k", secs(131), 6).await, 6);
        let back = b.check(&tokens, "k", secs(131), 0).await.unwrap();
        assert_eq!((back[0].remaining(), back[1].remaining()), (6, 90));
        // The oldest went: at 160 s the 4 of 130 s still count.
        let later = b.check(&tokens, "k", secs(160), 0).await.unwrap();
        assert_eq!(later[0].remaining(), 6);
        assert_eq!(b.release(&tokens, "k", secs(160), 100).await, 4);
        assert_eq!(b.release(&tokens, "k", secs(160), 1).await, 0);
        assert!(b.check(&tokens, "k", secs(200), 10).await.unwrap().allowed());
        assert_eq!(b.release(&tokens, "k", secs(260), 10).await, 0, "it left the window");
        let spent = b.check(&tokens, "k", secs(260), 0).await.unwrap();
        assert_eq!((spent[0].remaining(), spent[1].remaining()), (10, 80));
    }

    /// Issue 33: a token budget a minute AND a day, reserved on an estimate and settled on
    /// the actual count: over-use is debt on both rules, in the windows it was admitted in;
    /// a settle down gives back; a reservation whose windows have passed changes nothing.
    async fn a_minute_and_day_budget_settles_in_the_windows_it_reserved_in(b) {
        let tokens = set(&[("minute", Kind::SlidingLog, "1000/minute"), ("day", Kind::SlidingLog, "5000/day")]);
        let (first, reserved) = b.reserve(&tokens, "k", secs(86_400), 300).await;
        assert_eq!((first[0].remaining(), first[1].remaining()), (700, 4_700));
        let reserved = reserved.unwrap();
        assert_eq!(reserved, Reservation::new(secs(86_400), 300));
        assert!(b.settle(&tokens, "k", reserved, 1_500).await); // debt: 500 past the minute
        let denied = b.check(&tokens, "k", secs(86_430), 1).await.unwrap();
        assert_eq!((denied.allowed(), denied[0].retry_after()), (false, Some(Duration::from_secs(30))));
        let later = b.check(&tokens, "k", secs(86_460), 0).await.unwrap();
        assert_eq!((later[0].remaining(), later[1].remaining()), (1_000, 3_500));
        // The minute has passed, the day holds it: settling down gives the day back (from
        // what it was settled at, not from the estimate).
        assert!(b.settle(&tokens, "k", reserved.settled(1_500), 100).await);
        let back = b.check(&tokens, "k", secs(86_460), 0).await.unwrap();
        assert_eq!(back[1].remaining(), 4_900);
    }

    /// Issue 33 on each algorithm alone: a settle up, down and to 0, two reservations at one
    /// instant, a clock gone back, and a reservation of a window that has passed.
    async fn every_algorithm_settles_in_place(b) {
        for rules in each_kind("10/minute") {
            let (_, a) = b.reserve(&rules, "k", secs(600), 4).await;
            let (_, c) = b.reserve(&rules, "k", ms(599_000), 3).await; // the clock went back
            let (a, c) = (a.unwrap(), c.unwrap());
            assert!(b.settle(&rules, "k", a, 6).await);
            assert_eq!(b.check(&rules, "k", secs(600), 0).await.unwrap().remaining(), 1);
            assert!(b.settle(&rules, "k", c, 0).await);
            assert!(b.settle(&rules, "k", a.settled(6), 0).await);
            assert_eq!(b.check(&rules, "k", secs(600), 0).await.unwrap().remaining(), 10);
            // Three windows later: nothing holds it (and the bucket's debt is past its bound).
            assert!(b.check(&rules, "k", secs(800), 1).await.unwrap().allowed());
            assert!(!b.settle(&rules, "k", a, 9).await);
        }
    }

    /// Issue 33: a settle that empties the log's newest instant moves its newest time back;
    /// a clock gone back below it must not count again what had left the window (Redis keeps
    /// such times in its string until it compacts it; memory dropped them).
    async fn emptying_the_newest_instant_never_counts_what_had_left(b) {
        let tokens = rule("tokens", Kind::SlidingLog, "10 per 10s");
        let (_, old) = b.reserve(&tokens, "k", ms(100_000), 4).await;
        let (_, newest) = b.reserve(&tokens, "k", ms(110_500), 1).await;
        assert!(old.is_some());
        assert!(b.settle(&tokens, "k", newest.unwrap(), 0).await);
        let back = b.check(&tokens, "k", ms(109_900), 0).await.unwrap();
        assert_eq!(summary(&back), (true, 10, Duration::ZERO, None));
    }
}
