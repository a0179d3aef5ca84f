//! The memory backend's key cap, and a `sliding_log` limit against an obviously right model.

use super::semantics::FIVE_PER_SECOND;
use super::*;

/// The memory backend's key cap: a new key past it is over the limit (no limited key is pushed
/// out) and counted in the metrics; once the keys held go idle, new keys are admitted.
#[tokio::test]
async fn memory_key_cap_refuses_new_keys() {
    let e = build(
        Memory::new().with_max_keys(2),
        parse(FIVE_PER_SECOND),
        Bounds::default(),
    );
    e.admit("edge", &[("client", "a")], 1).await;
    e.admit("edge", &[("client", "b")], 1).await;
    let refused = e.deny("edge", &[("client", "c")]).await;
    assert_eq!(limit(&refused), (5, Some(Unit::Second)));
    assert_eq!(refused.limit_remaining, 0);
    let metrics = e.metrics();
    assert!(
        metrics.contains("slidewin_key_cap_refusals_total 1"),
        "{metrics}"
    );
    // The keys held keep their counts.
    assert_eq!(e.one("edge", &[("client", "a")]).await.limit_remaining, 3);
    assert_eq!(e.one("edge", &[("client", "b")]).await.limit_remaining, 3);
    // Idle a window on, they make room.
    e.advance_ms(2_000);
    assert_eq!(e.one("edge", &[("client", "c")]).await.limit_remaining, 4);
}

/// A step of the model test: milliseconds to move on, hits, which client.
fn step() -> impl Strategy<Value = (u64, u64, usize)> {
    let advance = prop_oneof![Just(0u64), Just(1), Just(999), Just(1_000), 0u64..1_500];
    (advance, 1u64..=3, 0usize..2)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 300,
        failure_persistence: None,
        rng_seed: RngSeed::Fixed(0x0005_11de_3143),
        ..ProptestConfig::default()
    })]

    /// A `sliding_log` limit against an obviously right model: admit iff the hits admitted in
    /// `(now - span, now]` plus this request's are at most the limit; the remaining and the
    /// time until reset follow from the same list.
    #[test]
    fn sliding_log_matches_a_list_of_admissions(
        limit in 1u64..=5,
        steps in proptest::collection::vec(step(), 1..60),
    ) {
        against_the_model(limit, &steps)?;
    }
}

/// `steps` on one `sliding_log` limit of `limit` a second, on two clients, each decision
/// checked against a list of each client's admissions.
fn against_the_model(limit: u64, steps: &[(u64, u64, usize)]) -> Result<(), TestCaseError> {
    let yaml = format!(
        "domain: p
descriptors:
  - key: k
    rate_limit: {{unit: second, requests_per_unit: {limit}, algorithm: sliding_log}}
"
    );
    let e = build(Memory::new(), parse(&yaml), Bounds::default());
    let span = 1_000_000_000u64;
    let mut now = START.as_nanos();
    let mut admitted: [Vec<(u64, u64)>; 2] = [Vec::new(), Vec::new()];
    for &(advance, hits, who) in steps {
        e.advance_ms(advance);
        now += advance * 1_000_000;
        let mut req = request("p", &[&[("k", ["ann", "bob"][who])]]);
        req.hits_addend = hits;
        let response = e
            .engine
            .should_rate_limit(&req)
            .now_or_never()
            .expect("memory decides at once")
            .expect("a valid request");
        let status = &response.statuses[0];
        let log = &mut admitted[who];
        let window: Vec<(u64, u64)> = log
            .iter()
            .copied()
            .filter(|(t, _)| *t > now - span)
            .collect();
        let used: u64 = window.iter().map(|(_, h)| h).sum();
        let admit = used + hits <= limit;
        prop_assert_eq!(
            status.code == Code::Ok,
            admit,
            "at {} ns: {} used, {} hits",
            now,
            used,
            hits
        );
        prop_assert_eq!(response.overall_code, status.code);
        if admit {
            log.push((now, hits));
            prop_assert_eq!(u64::from(status.limit_remaining), limit - used - hits);
            prop_assert_eq!(
                status.duration_until_reset,
                Some(Duration::from_nanos(span))
            );
        } else if hits > limit {
            // A cost the limit never admits: over it, nothing counted, no reset to wait for.
            prop_assert_eq!(status.limit_remaining, 0);
            prop_assert_eq!(status.duration_until_reset, None);
        } else {
            let newest = window
                .iter()
                .map(|(t, _)| *t)
                .max()
                .expect("something in the window");
            prop_assert_eq!(u64::from(status.limit_remaining), limit - used);
            prop_assert_eq!(
                status.duration_until_reset,
                Some(Duration::from_nanos(newest + span - now))
            );
        }
    }
    Ok(())
}
