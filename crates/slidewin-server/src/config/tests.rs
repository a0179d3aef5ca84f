//! The config's unit tests: reading, refusing and naming.

use super::*;

fn err(text: &str) -> ConfigFileError {
    Config::parse(text, "t.yaml").unwrap_err()
}

/// 50,000 levels of flow nesting, which the YAML parser would take half a minute over
/// (release build), are refused at the 129th, by place; a config in flow style, a few
/// levels deep, still loads.
#[test]
fn deep_flow_nesting_is_refused_before_parsing_at_its_place() {
    let deep = 50_000;
    for (open, close) in [("{key: a, descriptors: [", "]}"), ("{a: ", "}"), ("[", "]")] {
        let text = format!(
            "domain: d\n# nested\ndescriptors: {}{}\n",
            open.repeat(deep),
            close.repeat(deep)
        );
        let e = err(&text);
        let at = text
            .match_indices(['[', '{'])
            .nth(Config::MAX_FLOW_NESTING)
            .unwrap()
            .0;
        let column = at - text[..at].rfind('\n').unwrap();
        assert_eq!((e.line(), e.column()), (Some(3), Some(column)), "{e}");
        assert!(
            e.to_string().starts_with(&format!("t.yaml:3:{column}: ")),
            "{e}"
        );
        assert!(e.message().contains("nested more than 128 deep"), "{e}");
    }
    let flow = "domain: d\ndescriptors: [{key: a, descriptors: [{key: b, \
                rate_limit: {unit: second, requests_per_unit: 5}}]}]\n";
    let config = Config::parse(flow, "t.yaml").unwrap();
    assert_eq!(config.domains()[0].descriptors()[0].path(), "d.a");
}

#[test]
fn envoy_readme_example_loads() {
    let config = Config::parse(
        "domain: mongo_cps\ndescriptors:\n  - key: database\n    value: users\n    rate_limit:\n      unit: second\n      requests_per_unit: 500\n\n  - key: database\n    value: default\n    rate_limit:\n      unit: second\n      requests_per_unit: 500\n",
        "t.yaml",
    )
    .unwrap();
    let domain = &config.domains()[0];
    assert_eq!(domain.descriptors().len(), 2);
    assert_eq!(domain.descriptors()[0].path(), "mongo_cps.database_users");
}

#[test]
fn errors_name_the_line_the_column_and_the_value() {
    let e = err(
        "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 5\n      algorithm: leaky\n",
    );
    assert_eq!(e.line(), Some(7), "{e}");
    assert!(e.column().is_some());
    assert!(e.to_string().contains("leaky"), "{e}");
    assert!(e.to_string().starts_with("t.yaml:7:"), "{e}");

    let e = err("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {quota: 5 per fortnight}\n");
    assert_eq!(e.line(), Some(4), "{e}");
    assert!(e.to_string().contains("fortnight"), "{e}");

    let e = err("domain: d\ndescriptors:\n  - key: k\n    rate_limt: {unit: second}\n");
    assert_eq!(e.line(), Some(4), "{e}");
    assert!(e.to_string().contains("rate_limt"), "{e}");
}

#[test]
fn semantic_errors_name_the_descriptor() {
    let e = err("domain: d\ndescriptors:\n  - key: k\n    value: v\n  - key: k\n    value: v\n");
    assert!(e.to_string().contains("duplicate descriptor `k_v`"), "{e}");
    assert!(e.line().is_some(), "{e}");
    let e = err(
        "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unlimited: true, unit: second}\n",
    );
    assert!(e.to_string().contains("descriptor `k`"), "{e}");
    assert_eq!(e.line(), Some(3), "{e}");
    let e = err("domain: ''\n");
    assert!(e.to_string().contains("empty"), "{e}");
    assert_eq!(e.line(), Some(1), "{e}");
    let e = err("domain: d\ndescriptors:\n  - key: k\n    limits:\n      - {quota: 1/s}\n");
    assert!(e.to_string().contains("no `name`"), "{e}");
    let e = err(
        "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 5000000000}\n",
    );
    assert!(e.to_string().contains("5000000000"), "{e}");
    assert_eq!((e.line(), e.column()), (Some(4), Some(51)), "{e}");
}

#[test]
fn extensions_build_rule_sets() {
    let config = Config::parse(
        "domain: d\ndescriptors:\n  - key: client\n    limits:\n      - {name: burst, quota: 10/s}\n      - {name: hourly, unit: hour, requests_per_unit: 1000, algorithm: sliding_counter}\n  - key: odd\n    rate_limit: {quota: 5 per 10 seconds, algorithm: gcra}\n  - key: zero\n    rate_limit: {unit: minute, requests_per_unit: 0}\n",
        "t.yaml",
    )
    .unwrap();
    let d = config.domains()[0].descriptors();
    let Action::Rules { rules, units } = d[0].limit().unwrap().action() else {
        panic!("rules");
    };
    assert_eq!(rules.rules().len(), 2);
    assert_eq!(units, &[Some(Unit::Second), Some(Unit::Hour)]);
    assert_eq!(rules.rules()[1].kind(), Kind::SlidingCounter);
    let Action::Rules { rules, units } = d[1].limit().unwrap().action() else {
        panic!("rules");
    };
    assert_eq!(rules.rules()[0].quota().span(), Duration::from_secs(10));
    assert_eq!(units, &[None]);
    assert!(matches!(
        d[2].limit().unwrap().action(),
        Action::Blocked { unit: Unit::Minute }
    ));
}

/// A limit up to `MAX_LOG_LIMIT` with no algorithm named is an exact sliding log; one over it
/// is counted by the sliding counter, which holds a key in a fixed size.
#[test]
fn a_limit_over_max_log_limit_is_counted_by_the_sliding_counter() {
    let kind = |rpu: u64| {
        let yaml = format!(
            "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {{unit: hour, requests_per_unit: {rpu}}}\n"
        );
        let config = Config::parse(&yaml, "d.yaml").unwrap();
        match config.domains()[0].descriptors()[0]
            .limit()
            .unwrap()
            .action()
        {
            Action::Rules { rules, .. } => rules.rules()[0].kind(),
            other => panic!("rules, got {other:?}"),
        }
    };
    assert_eq!(kind(Config::MAX_LOG_LIMIT), DEFAULT_ALGORITHM);
    assert_eq!(kind(Config::MAX_LOG_LIMIT + 1), Kind::SlidingCounter);
}

/// A limit's one name: the config's `name`, else its path without the domain, with the
/// characters a rule name does not allow as `_`.
#[test]
fn a_limit_is_named_by_its_name_or_its_path() {
    let config = Config::parse(
        "domain: api\ndescriptors:\n  - key: path\n    value: /search\n    rate_limit: {quota: 5/s}\n  - key: user\n    rate_limit: {name: per-user, quota: 9/s}\n",
        "api.yaml",
    )
    .unwrap();
    let names: Vec<&str> = config.domains()[0]
        .descriptors()
        .iter()
        .filter_map(|d| d.limit())
        .map(|l| l.name())
        .collect();
    assert_eq!(names, ["path__search", "per-user"]);
}

/// Files of one directory, for the loads below: `(name, text)` each.
fn files(test: &str, each: &[(&str, &str)]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("slidewin-config-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for (name, text) in each {
        std::fs::write(dir.join(name), text).unwrap();
    }
    dir
}

/// envoy ratelimit's `MERGE_DOMAIN_CONFIG` (issue 31): without it a domain is in one file only;
/// with it the files' top-level descriptors join, every limit keeps one name unique in the
/// domain, and a descriptor two files define is refused, naming the second.
#[test]
fn issue_31_a_domain_spread_over_files_is_merged_when_asked() {
    let dir = files(
        "merge",
        &[
            (
                "a.yaml",
                "domain: api\ndescriptors:\n  - key: user\n    rate_limit: {name: search, quota: 5/s}\n",
            ),
            (
                "b.yaml",
                "domain: api\ndescriptors:\n  - key: ip\n    rate_limit: {name: search, quota: 9/s}\n",
            ),
        ],
    );
    let strict = Config::load(std::slice::from_ref(&dir))
        .unwrap_err()
        .to_string();
    assert!(
        strict.contains("b.yaml") && strict.contains("duplicate domain `api`"),
        "{strict}"
    );
    assert!(strict.contains("MERGE_DOMAIN_CONFIG"), "{strict}");

    let merged = Config::load_merging_domains(std::slice::from_ref(&dir)).unwrap();
    assert_eq!(merged.domains().len(), 1);
    let names: Vec<(&str, &str)> = merged.domains()[0]
        .descriptors()
        .iter()
        .map(|d| (d.key(), d.limit().unwrap().name()))
        .collect();
    assert_eq!(names, [("user", "search"), ("ip", "search.2")]);

    std::fs::write(
        dir.join("c.yaml"),
        "domain: api\ndescriptors:\n  - key: user\n    rate_limit: {quota: 1/s}\n",
    )
    .unwrap();
    let twice = Config::load_merging_domains(std::slice::from_ref(&dir))
        .unwrap_err()
        .to_string();
    assert!(
        twice.contains("c.yaml") && twice.contains("duplicate descriptor `api.user`"),
        "{twice}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The rules of the first descriptor's limit of the first domain.
fn first_rules(config: &Config) -> &RuleSet {
    match config.domains()[0].descriptors()[0]
        .limit()
        .unwrap()
        .action()
    {
        Action::Rules { rules, .. } => rules,
        _ => panic!("a limit of rules"),
    }
}

/// Issue 33: `quota: N concurrent` with a `lease` is a limit of leases; each half alone, a
/// count of 0, another algorithm or a bad lease is refused, saying what to write.
#[test]
fn a_concurrent_quota_with_its_lease_is_counted_by_leases() {
    let limit = |fields: &str| {
        format!(
            "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {{name: in_flight, {fields}}}\n"
        )
    };
    let config = Config::parse(&limit("quota: 2 concurrent, lease: 1m 30s"), "d.yaml").unwrap();
    let rule = &first_rules(&config).rules()[0];
    assert_eq!(rule.kind(), Kind::Leases);
    assert_eq!(
        (rule.quota().limit(), rule.quota().span()),
        (2, Duration::from_secs(90))
    );
    let named = limit("quota: 2 concurrent, lease: 30 seconds, algorithm: leases");
    assert!(Config::parse(&named, "d.yaml").is_ok());
    for (fields, said) in [
        ("quota: 2 concurrent", "needs a `lease`"),
        (
            "quota: 2/s, lease: 30 seconds",
            "a `lease` goes with a `N concurrent` quota",
        ),
        (
            "quota: 0 concurrent, lease: 30 seconds",
            "a limit of 0 in flight",
        ),
        (
            "quota: two concurrent, lease: 30 seconds",
            "a whole number before `concurrent`",
        ),
        (
            "quota: 2 concurrent, lease: 30 seconds, algorithm: gcra",
            "counted by leases alone",
        ),
        (
            "quota: 2 concurrent, lease: 1 month",
            "invalid lease `1 month`",
        ),
        ("quota: 2 concurrent, lease: 30s, unit: second", "not both"),
        (
            "quota: 20000 concurrent, lease: 30s",
            "Config::MAX_LOG_LIMIT",
        ),
    ] {
        let e = err(&limit(fields));
        assert!(e.to_string().contains(said), "{fields}: {e}");
    }
}

/// Issue 33: `refunds: true` opts a sliding log into giving units back on negative hits, by a
/// quota or envoy's unit; it is refused, saying why, where nothing could refund exactly.
#[test]
fn refunds_go_with_a_sliding_log_alone() {
    let limit = |fields: &str| {
        format!("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {{name: tokens, {fields}}}\n")
    };
    for fields in [
        "quota: 100/minute, refunds: true",
        "unit: minute, requests_per_unit: 100, refunds: true",
        "quota: 100/minute, algorithm: sliding_log, refunds: true",
    ] {
        let config = Config::parse(&limit(fields), "d.yaml").unwrap();
        assert!(first_rules(&config).rules()[0].refunds(), "{fields}");
    }
    for (fields, said) in [
        (
            "quota: 100/minute, algorithm: fixed_window, refunds: true",
            "fixed_window cannot give units back",
        ),
        (
            "quota: 10/s burst 20, algorithm: gcra, refunds: true",
            "gcra cannot give units back",
        ),
        (
            "quota: 20000/minute, refunds: true",
            "sliding_counter cannot give units back",
        ),
        (
            "quota: 2 concurrent, lease: 30s, refunds: true",
            "units always come back",
        ),
        (
            "quota: 5 per calendar month, refunds: true",
            "a calendar quota cannot refund",
        ),
        ("unlimited: true, refunds: true", "goes with a rate"),
        (
            "unit: minute, requests_per_unit: 0, refunds: true",
            "a limit of 0 counts nothing",
        ),
        ("quota: 5/s, refunds: yes please", "refunds"),
    ] {
        let e = err(&limit(fields));
        assert!(e.to_string().contains(said), "{fields}: {e}");
    }
}
