//! Crafted keys that must not reach another rule's, domain's or descriptor's counts, on
//! memory and on Redis.

use super::*;

// ---- crafted keys ----

/// Three domains whose paths and names invite confusion: a nested `k.j` and a top-level
/// `k.j` (the same path, `a.k.j`), a domain `a.k` whose `j` has that path too, and a domain
/// `override` whose descriptor has the path a request's limit override of 5 per second is
/// counted under. Every limit is 1 a minute.
const CRAFTED_DOMAINS: [(&str, &str); 3] = [
    (
        "a.yaml",
        "domain: a
descriptors:
  - key: k
    rate_limit: {unit: minute, requests_per_unit: 1}
    descriptors:
      - key: j
        rate_limit: {unit: minute, requests_per_unit: 1}
  - key: k.j
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: k_j
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: m
    limits:
      - {name: burst, quota: 1 per minute}
      - {name: hourly, quota: 10 per hour}
",
    ),
    (
        "a.k.yaml",
        "domain: a.k
descriptors:
  - key: j
    rate_limit: {unit: minute, requests_per_unit: 1}
",
    ),
    (
        "override.yaml",
        "domain: override
descriptors:
  - key: '5'
    value: per_second
    rate_limit: {unit: minute, requests_per_unit: 1}
",
    ),
];

/// A config of several domains, from files of a directory of its own.
fn multi_domain_config(files: &[(&str, &str)]) -> Config {
    static DIRS: AtomicU64 = AtomicU64::new(0);
    let dir = std::env::temp_dir().join(format!(
        "slidewin-hostile-{}-{}",
        std::process::id(),
        DIRS.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    for (name, text) in files {
        std::fs::write(dir.join(name), text).unwrap();
    }
    let config = Config::load(std::slice::from_ref(&dir)).expect("the test's config is valid");
    std::fs::remove_dir_all(&dir).unwrap();
    config
}

/// One request of one descriptor.
fn probe(domain: &str, entries: &[(&str, &str)], limit: Option<LimitOverride>) -> RateLimitRequest {
    let mut descriptor =
        RequestDescriptor::new(entries.iter().map(|(k, v)| Entry::new(k, v)).collect());
    descriptor.limit = limit;
    RateLimitRequest::new(domain, vec![descriptor])
}

const FIVE_PER_SECOND: Option<LimitOverride> = Some(LimitOverride {
    requests_per_unit: 5,
    unit: Unit::Second,
});

/// Requests that each must count alone. In order, each is the first to touch its counts: so
/// the first of each is admitted with its whole limit less one, whatever came before it.
fn crafted_probes() -> Vec<(RateLimitRequest, u32)> {
    // The counter key of `a`'s `k` for `x`, and its Redis key's tail: values that spell them.
    let spelled = "1:a3:a.k1:k1:x";
    let mut probes = vec![
        (probe("a", &[("k", "x")], None), 1),
        (probe("a", &[("k", "x"), ("j", "y")], None), 1),
        (probe("a", &[("k.j", "y")], None), 1),
        (probe("a", &[("k_j", "y")], None), 1),
        (probe("a.k", &[("j", "y")], None), 1),
        (probe("a.k", &[("j", "x")], None), 1),
        // The separators of our keys, and of Redis's: in keys and values.
        (probe("a", &[("k", "1:x")], None), 1),
        (probe("a", &[("k", "x:")], None), 1),
        (probe("a", &[("k", "x_j")], None), 1),
        (probe("a", &[("k", "x.j")], None), 1),
        (probe("a", &[("k", "x"), ("j", "1:y")], None), 1),
        (probe("a", &[("k", "x1:j1:y")], None), 1),
        (probe("a", &[("k", spelled)], None), 1),
        (
            probe("a", &[("k", &format!("{spelled}}}:a.k:stamps"))], None),
            1,
        ),
        (probe("a", &[("k", "x}:a.k.j:stamps")], None), 1),
        (probe("a.k", &[("j", &format!("{spelled}}}"))], None), 1),
        // Hash tags: braces anywhere.
        (probe("a", &[("k", "{x}")], None), 1),
        (probe("a", &[("k", "}x{")], None), 1),
        (probe("a", &[("k", "{")], None), 1),
        (probe("a", &[("k", "}")], None), 1),
        (probe("a", &[("k", "{slidewin:a}")], None), 1),
        (probe("a", &[("k", "x"), ("j", "}{")], None), 1),
        // A limit of two rules, two Redis keys for one tag: values spelling a rule's tail.
        (probe("a", &[("m", "x")], None), 1),
        (probe("a", &[("m", "x}:burst:stamps")], None), 1),
        (probe("a", &[("m", "x}:hourly")], None), 1),
        (probe("a", &[("m", "{x}:burst")], None), 1),
        // Control bytes.
        (probe("a", &[("k", "x\n")], None), 1),
        (probe("a", &[("k", "x\0")], None), 1),
        (probe("a", &[("k", "\0")], None), 1),
        (probe("a", &[("k", "")], None), 1),
        (probe("a", &[("k", "x\r\nDEL *")], None), 1),
        // Values that are another domain's, or another rule's, path.
        (probe("a", &[("k", "a.k.j")], None), 1),
        (probe("a", &[("k", "a.k")], None), 1),
        (probe("a.k", &[("j", "a.k.j")], None), 1),
        // A limit override beside the config's limit of the same path, and in another domain.
        (probe("override", &[("5", "per_second")], None), 1),
        (
            probe("override", &[("5", "per_second")], FIVE_PER_SECOND),
            5,
        ),
        (probe("a", &[("5", "per_second")], FIVE_PER_SECOND), 5),
        (probe("a", &[("k", "x")], FIVE_PER_SECOND), 5),
    ];
    // Long values: the length prefix, not a terminator, keeps them apart.
    let long = "9".repeat(1_000);
    probes.push((probe("a", &[("k", &long)], None), 1));
    probes.push((probe("a", &[("k", &long[..999])], None), 1));
    probes
}

async fn crafted_keys_keep_to_their_own_counts<B: Backend>(backend: B) {
    let config = multi_domain_config(&CRAFTED_DOMAINS);
    let clock = Arc::new(ManualClock::new(Moment::from_secs(1_000)));
    let engine = Engine::new(backend, config, clock, Bounds::default(), Metrics::new()).unwrap();
    let probes = crafted_probes();
    for (i, (request, limit)) in probes.iter().enumerate() {
        let first = engine.should_rate_limit(request).await.unwrap();
        let status = &first.statuses[0];
        assert_eq!(
            (status.code, status.limit_remaining),
            (Code::Ok, limit - 1),
            "probe {i} was touched by another: {request:?}"
        );
        // Spend the rest: the next probes must not see it.
        for _ in 1..*limit {
            engine.should_rate_limit(request).await.unwrap();
        }
        let denied = engine.should_rate_limit(request).await.unwrap();
        assert_eq!(
            denied.overall_code,
            Code::OverLimit,
            "probe {i}: {request:?}"
        );
    }
}

#[tokio::test]
async fn crafted_keys_memory() {
    crafted_keys_keep_to_their_own_counts(Memory::new()).await;
}

/// On Redis, too, and each probe's counts under a Redis key of its own: as many keys as
/// probes, each `{slidewin:…}:name:stamps`, its hash tag holding the whole counter key.
#[tokio::test]
async fn crafted_keys_redis() {
    let server = RedisServer::start();
    crafted_keys_keep_to_their_own_counts(redis_backend(&server).await).await;
    // One key per probe and rule (two for each of the four probes of `m`): no two probes'
    // counts met in one Redis key.
    let expected = crafted_probes().len() + 4;
    let size = server.cli(&["DBSIZE"]);
    assert_eq!(size.trim(), expected.to_string());
    // Each `{slidewin:counter_key}:name:stamps`, the counter key a SHA-256 in hex (issue 29: a
    // key's length is bounded whatever the descriptor).
    let listed = server.cli(&["--no-raw", "KEYS", "*"]);
    let keys: Vec<&str> = listed
        .lines()
        .map(|key| key.split_once(") ").map_or(key, |(_, k)| k))
        .collect();
    assert_eq!(keys.len(), expected, "{listed}");
    let mut burst_tags = Vec::new();
    for key in &keys {
        let rest = key.strip_prefix("\"{slidewin:").expect(key);
        let (digest, tail) = rest.split_once('}').expect(key);
        assert_eq!(digest.len(), 64, "{key}");
        assert!(digest.bytes().all(|b| b.is_ascii_hexdigit()), "{key}");
        assert!(tail.ends_with(":stamps\""), "{key}");
        if tail == ":burst:stamps\"" {
            burst_tags.push(digest);
        }
    }
    // The two rules of one descriptor share its tag: each `burst` key has its `hourly` one.
    assert_eq!(burst_tags.len(), 4, "{listed}");
    for tag in burst_tags {
        let hourly = format!("\"{{slidewin:{tag}}}:hourly:stamps\"");
        assert!(keys.contains(&hourly.as_str()), "{hourly} in {listed}");
    }
}
