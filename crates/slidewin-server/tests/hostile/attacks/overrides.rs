//! Issue 29, finding 1, through the real ports: a request's limit override cannot switch
//! limits off. Counter keys are of a bounded length whatever the descriptor, an override's
//! span is bounded, a bad override is refused for its descriptor alone, the table of override
//! stores never fills for good, and memory is bounded in bytes.

use envoy_types::pb::envoy::r#type::v3::RateLimitUnit as PbUnit;

use super::*;

/// A service on free ports on `backend` and `bounds`: its clock and its metrics.
async fn serving<B: Backend>(backend: B, bounds: Bounds) -> (Served, Arc<ManualClock>, Metrics) {
    let (service, clock, metrics) = service_of(backend, CONFIG, bounds);
    (
        Served::start(service, &data_plane_only()).await,
        clock,
        metrics,
    )
}

/// A descriptor of `entries` with its own limit.
fn overriding(
    entries: &[(&str, &str)],
    requests_per_unit: u32,
    unit: PbUnit,
) -> RateLimitDescriptor {
    RateLimitDescriptor {
        limit: Some(PbOverride {
            requests_per_unit,
            unit: unit as i32,
        }),
        ..descriptor(entries)
    }
}

async fn ask(served: &Served, descriptors: Vec<RateLimitDescriptor>) -> PbResponse {
    let request = PbRequest {
        domain: "api".to_owned(),
        descriptors,
        hits_addend: 0,
    };
    should_rate_limit(served.grpc, request)
        .await
        .expect("an answer")
}

/// Issue 29: an override of 10/YEAR on 16 entries of 1 KB wrote a 35 KB Redis key that lived
/// 378 days; 474 of them filled a 16 MB Redis, and the failure policy then admitted
/// everything. Keys are now a digest, an override lives a day at most, and a year is refused.
#[tokio::test]
async fn hostile_29_overrides_on_redis_write_short_keys_that_live_a_day_at_most() {
    let server = RedisServer::start();
    let (served, _, _) = serving(redis_backend(&server).await, Bounds::default()).await;
    let kilobyte = "x".repeat(1_000);
    let entries: Vec<(String, String)> = (0..16)
        .map(|i| (format!("{i}{kilobyte}"), kilobyte.clone()))
        .collect();
    let entries: Vec<(&str, &str)> = entries
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let answer = ask(&served, vec![overriding(&entries, 10, PbUnit::Day)]).await;
    assert_eq!(answer.overall_code, PbCode::Ok as i32);
    let answer = ask(&served, vec![overriding(&entries, 10, PbUnit::Year)]).await;
    assert_eq!(answer.overall_code, PbCode::OverLimit as i32);
    let refused = answer.statuses[0].current_limit.as_ref().expect("a limit");
    assert!(
        refused.name.contains("max_override_unit"),
        "{}",
        refused.name
    );

    let keys = server.cli(&["KEYS", "*"]);
    let keys: Vec<&str> = keys.lines().collect();
    assert_eq!(keys.len(), 1, "only the day's override wrote: {keys:?}");
    assert!(
        keys[0].len() < 120,
        "a key of {} bytes: {}",
        keys[0].len(),
        keys[0]
    );
    let ttl: u64 = server
        .cli(&["PTTL", keys[0]])
        .trim()
        .parse()
        .expect("a TTL");
    assert!(ttl <= 2 * 86_400_000, "{ttl} ms");
    served.stop().await;
}

/// Issue 29: one descriptor's bad override refused the whole request. Now its descriptor alone
/// is over the limit, its `currentLimit` naming why, on `/json` too; the others are decided.
#[tokio::test]
async fn hostile_29_a_bad_override_is_refused_for_its_descriptor_alone() {
    let (served, _, metrics) = serving(Memory::new(), Bounds::default()).await;
    let body = r#"{"domain":"api","descriptors":[
        {"entries":[{"key":"client","value":"ann"}]},
        {"entries":[{"key":"k","value":"v"}],"limit":{"requestsPerUnit":5,"unit":"YEAR"}}]}"#;
    let (status, body) = post_json(served.http, body).await;
    assert_eq!(status, 429);
    let answer: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(answer["statuses"][0]["code"], "OK", "{answer}");
    assert_eq!(answer["statuses"][0]["limitRemaining"], 2, "{answer}");
    assert_eq!(answer["statuses"][1]["code"], "OVER_LIMIT", "{answer}");
    let name = answer["statuses"][1]["currentLimit"]["name"]
        .as_str()
        .unwrap();
    assert_eq!(
        name,
        "override refused: its unit YEAR is longer than max_override_unit (DAY)"
    );
    assert!(
        metrics
            .encode()
            .contains("slidewin_request_overrides_total{result=\"refused\"} 1")
    );
    served.stop().await;
}

/// Issue 29: after 256 distinct overrides, every request carrying a new one was refused until
/// a restart. Now the table refuses a new one only while every store holds live keys; once
/// they go idle, new overrides are taken.
#[tokio::test]
async fn hostile_29_the_table_of_overrides_never_fills_for_good() {
    let (served, clock, _) = serving(Memory::new(), Bounds::default()).await;
    let per_second = |n: u32| overriding(&[("k", "v")], n, PbUnit::Second);
    for n in 1..=u32::try_from(Bounds::MAX_OVERRIDES).unwrap() {
        let answer = ask(&served, vec![per_second(n)]).await;
        assert_eq!(answer.overall_code, PbCode::Ok as i32);
    }
    let plain = descriptor(&[("client", "bea")]);
    let full = ask(&served, vec![plain.clone(), per_second(100_000)]).await;
    assert_eq!(full.statuses[0].code, PbCode::Ok as i32, "decided");
    assert_eq!(full.statuses[1].code, PbCode::OverLimit as i32);
    let name = &full.statuses[1].current_limit.as_ref().unwrap().name;
    assert!(name.contains("Bounds::MAX_OVERRIDES"), "{name}");
    // A second on, every store's key is idle: the new override is taken.
    clock.advance(std::time::Duration::from_secs(2));
    let taken = ask(&served, vec![plain, per_second(100_000)]).await;
    assert_eq!(taken.overall_code, PbCode::Ok as i32);
    assert_eq!(taken.statuses[1].limit_remaining, 99_999);
    served.stop().await;
}

/// `--request-overrides off`: an override is ignored, and the config decides.
#[tokio::test]
async fn overrides_turned_off_leave_the_config_to_decide() {
    let bounds = Bounds {
        request_overrides: false,
        ..Bounds::default()
    };
    let (served, _, metrics) = serving(Memory::new(), bounds).await;
    // The config's `client` limit is 3 a minute; the override asks a million a second.
    let wide = || overriding(&[("client", "cy")], 1_000_000, PbUnit::Second);
    for remaining in [2, 1, 0] {
        let answer = ask(&served, vec![wide()]).await;
        assert_eq!(answer.statuses[0].limit_remaining, remaining);
    }
    let over = ask(&served, vec![wide()]).await;
    assert_eq!(over.overall_code, PbCode::OverLimit as i32);
    assert!(
        metrics
            .encode()
            .contains("slidewin_request_overrides_total{result=\"ignored\"} 4")
    );
    served.stop().await;
}

/// Issue 29: `--max-keys` counted keys, not bytes. On a memory budget, a flood of new keys is
/// over the limit once it is spent (counted), while a key already held is decided as before.
#[tokio::test]
async fn hostile_29_a_flood_of_keys_stops_at_the_memory_budget() {
    let memory = Memory::new().with_max_memory(64 * 1024);
    let (served, _, metrics) = serving(memory.clone(), Bounds::default()).await;
    let held = ask(&served, vec![descriptor(&[("client", "held")])]).await;
    assert_eq!(held.statuses[0].limit_remaining, 2);
    let mut refused = 0;
    for n in 0..2_000 {
        let value = format!("flood-{n}");
        let answer = ask(&served, vec![descriptor(&[("client", &value)])]).await;
        if answer.overall_code == PbCode::OverLimit as i32 {
            refused += 1;
        }
    }
    assert!(refused > 0, "the budget was spent");
    assert!(
        memory.memory_used() <= 64 * 1024,
        "{}",
        memory.memory_used()
    );
    let again = ask(&served, vec![descriptor(&[("client", "held")])]).await;
    assert_eq!(
        again.statuses[0].limit_remaining, 1,
        "a held key is decided as before"
    );
    assert!(
        metrics
            .encode()
            .contains(&format!("slidewin_memory_refusals_total {refused}"))
    );
    served.stop().await;
}
