//! Issue 29, finding 8: a config's rules cost 28 KB each before any traffic, so a config of
//! 4 MiB took 2 GiB before its first check. A rule that has seen no key now holds its config,
//! its name, its metric series and an empty limiter: under 2 KB.

use slidewin_test_support::counting_alloc::held_after;

use super::*;

/// A config of `rules` descriptors, each its own limit.
fn config_of(rules: usize) -> Config {
    let mut yaml = String::from("domain: api\ndescriptors:\n");
    for i in 0..rules {
        yaml.push_str(&format!(
            "  - key: key{i}\n    rate_limit: {{unit: minute, requests_per_unit: 100}}\n"
        ));
    }
    Config::parse(&yaml, "rules.yaml").expect("a valid config")
}

/// The bytes an engine of `rules` rules holds, built on this thread, its config included.
fn engine_bytes(rules: usize) -> isize {
    let config = config_of(rules);
    let clock = Arc::new(ManualClock::new(Moment::from_secs(1_000)));
    let (engine, bytes) = held_after(|| {
        Engine::new(
            Memory::new(),
            config,
            clock,
            Bounds::default(),
            Metrics::new(),
        )
        .expect("the backend holds the rules")
    });
    drop(engine);
    bytes
}

#[test]
fn hostile_29_an_idle_rule_holds_under_2_kb() {
    const RULES: usize = 2_000;
    let (one, many) = (engine_bytes(1), engine_bytes(RULES + 1));
    let per_rule = (many - one) / RULES as isize;
    println!("an idle rule: {per_rule} bytes, config included ({one} for an engine of one)");
    assert!(per_rule < 2_048, "{per_rule} bytes a rule");
}
