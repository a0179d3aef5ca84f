//! Our own semantics beside envoy ratelimit's (a sliding window's edge, lists, hits, quotas,
//! headers, bounds), on memory and on Redis.

use super::*;

pub(super) const FIVE_PER_SECOND: &str = "domain: edge
descriptors:
  - key: client
    rate_limit:
      unit: second
      requests_per_unit: 5
  - key: fixed
    rate_limit:
      unit: second
      requests_per_unit: 5
      algorithm: fixed_window
";

const LISTS: &str = "domain: lists
descriptors:
  - key: client
    limits:
      - {name: burst, unit: second, requests_per_unit: 2}
      - {name: hourly, unit: hour, requests_per_unit: 5}
";

const TEN_PER_MINUTE: &str = "domain: hits
descriptors:
  - key: client
    rate_limit: {unit: minute, requests_per_unit: 10}
";

const QUOTAS: &str = r#"domain: quotas
descriptors:
  - key: client
    rate_limit:
      quota: "5 per 10 seconds"
  - key: route
    rate_limit:
      quota: "7 per 60 seconds"
"#;

const HEADERS: &str = "domain: hdr
descriptors:
  - key: client
    rate_limit: {unit: second, requests_per_unit: 3}
  - key: route
    rate_limit: {unit: minute, requests_per_unit: 10}
";

const BOUNDED: &str = "domain: b
descriptors:
  - key: k
    rate_limit: {unit: minute, requests_per_unit: 100}
";

const CRAFTED: &str = "domain: crafted
descriptors:
  - key: k
    rate_limit: {unit: minute, requests_per_unit: 1}
    descriptors:
      - key: j
        rate_limit: {unit: minute, requests_per_unit: 1}
";

const REPLACED_UNLIMITED: &str = "domain: r
descriptors:
  - key: internal
    rate_limit:
      name: free
      unlimited: true
  - key: client
    rate_limit:
      replaces:
        - name: free
      unit: second
      requests_per_unit: 5
";

const SHADOW_AND_ENFORCED: &str = "domain: sh
descriptors:
  - key: watch
    shadow_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: client
    rate_limit: {unit: second, requests_per_unit: 1}
";

const UNQUOTED_VALUES: &str = "domain: unquoted
descriptors:
  - key: to_number
    value: 2061111111
    rate_limit: {unit: day, requests_per_unit: 5}
  - key: status
    value: 429
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: internal
    value: true
    rate_limit: {unit: minute, requests_per_unit: 2}
";

on_both_backends! {
    sliding_window_edge,
    fixed_window_admits_twice_the_limit_across_its_edge,
    limits_list_is_all_or_nothing,
    hits_addend,
    quota_of_any_span,
    unknown_domain_and_unmatched_descriptors,
    headers_name_the_policies_and_the_tightest,
    request_bounds,
    crafted_values_keep_to_their_own_counts,
    replaced_unlimited_limit_stays_unlimited,
    retry_after_comes_from_an_enforcing_limit,
    unquoted_scalar_values_load_as_text,
}

/// The window is `(now - span, now]`: 5 per second admitted at t, the 6th denied at
/// t + 999 ms, admitted at t + 1 s exactly.
async fn sliding_window_edge<S: Setup>(s: S) {
    let e = env(&s, FIVE_PER_SECOND).await;
    e.advance_ms(250);
    let ann = [("client", "ann")];
    for left in (0..5).rev() {
        let status = e.one("edge", &ann).await;
        assert_eq!((status.code, status.limit_remaining), (Code::Ok, left));
        assert_eq!(status.duration_until_reset, Some(Duration::from_secs(1)));
    }
    e.advance_ms(999);
    let denied = e.deny("edge", &ann).await;
    assert_eq!(denied.limit_remaining, 0);
    assert_eq!(denied.duration_until_reset, Some(Duration::from_millis(1)));
    e.advance_ms(1);
    let admitted = e.one("edge", &ann).await;
    assert_eq!((admitted.code, admitted.limit_remaining), (Code::Ok, 4));
}

/// A fixed window admits twice the limit across its boundary; the sliding window, on the
/// same requests, admits the limit only.
async fn fixed_window_admits_twice_the_limit_across_its_edge<S: Setup>(s: S) {
    let e = env(&s, FIVE_PER_SECOND).await;
    let fixed = [("fixed", "ann")];
    let sliding = [("client", "ann")];
    // The last millisecond of the window [START, START + 1 s).
    e.advance_ms(999);
    e.admit("edge", &fixed, 5).await;
    e.admit("edge", &sliding, 5).await;
    // One millisecond on, in the next fixed window: 10 in 2 ms for the fixed window.
    e.advance_ms(1);
    e.admit("edge", &fixed, 5).await;
    e.deny("edge", &fixed).await;
    let denied = e.deny("edge", &sliding).await;
    assert_eq!(
        denied.duration_until_reset,
        Some(Duration::from_millis(999))
    );
    e.advance_ms(998);
    e.deny("edge", &sliding).await;
    e.advance_ms(1);
    e.admit("edge", &sliding, 5).await;
    e.deny("edge", &sliding).await;
}

/// A `limits` list is all-or-nothing: a request one limit denies is counted by none.
async fn limits_list_is_all_or_nothing<S: Setup>(s: S) {
    let e = env(&s, LISTS).await;
    let ann = [("client", "ann")];
    let first = e.one("lists", &ann).await;
    assert_eq!((limit_name(&first), first.limit_remaining), ("burst", 1));
    e.admit("lists", &ann, 1).await;
    // Denied by the burst three times: had they counted in the hourly limit, it would be
    // full (2 + 3 = 5) and deny everything below.
    for _ in 0..3 {
        let denied = e.deny("lists", &ann).await;
        assert_eq!(limit_name(&denied), "burst");
        assert_eq!(limit(&denied), (2, Some(Unit::Second)));
    }
    e.advance_ms(1_000);
    e.admit("lists", &ann, 2).await;
    e.advance_ms(1_000);
    let last = e.one("lists", &ann).await;
    assert_eq!(
        (last.code, limit_name(&last), last.limit_remaining),
        (Code::Ok, "hourly", 0)
    );
    let hourly = e.deny("lists", &ann).await;
    assert_eq!(limit_name(&hourly), "hourly");
    assert_eq!(limit(&hourly), (5, Some(Unit::Hour)));
    // Both limits are in the policy, in one field.
    let r = e.hit("lists", &[&[("client", "bob")]]).await;
    let policy = fields(header(&r, "ratelimit-policy").expect("a policy"));
    assert_eq!(
        policy,
        vec![
            member("burst", &[("q", 2), ("w", 1)]),
            member("hourly", &[("q", 5), ("w", 3_600)])
        ]
    );
}

/// `hits_addend`: the request's (0 means 1), a descriptor's own over it, `Some(0)` checks
/// without counting, and a cost the limit cannot admit is over it with nothing counted.
async fn hits_addend<S: Setup>(s: S) {
    let e = env(&s, TEN_PER_MINUTE).await;
    let remaining = |r: &RateLimitResponse| (r.overall_code, r.statuses[0].limit_remaining);
    let mut req = request("hits", &[&[("client", "ann")]]);
    req.hits_addend = 3;
    assert_eq!(remaining(&e.ask(&req).await), (Code::Ok, 7));
    req.hits_addend = 0;
    assert_eq!(remaining(&e.ask(&req).await), (Code::Ok, 6));
    // The descriptor's own wins over the request's.
    req.hits_addend = 3;
    req.descriptors[0].hits_addend = Some(4);
    assert_eq!(remaining(&e.ask(&req).await), (Code::Ok, 2));
    // Some(0): a look, twice, counting nothing.
    req.descriptors[0].hits_addend = Some(0);
    assert_eq!(remaining(&e.ask(&req).await), (Code::Ok, 2));
    assert_eq!(remaining(&e.ask(&req).await), (Code::Ok, 2));
    // More than is left, then more than the limit: over, and nothing counted.
    req.descriptors[0].hits_addend = Some(3);
    assert_eq!(e.ask(&req).await.overall_code, Code::OverLimit);
    req.descriptors[0].hits_addend = Some(11);
    let too_much = e.ask(&req).await;
    assert_eq!(too_much.overall_code, Code::OverLimit);
    assert_eq!(limit(&too_much.statuses[0]), (10, Some(Unit::Minute)));
    req.descriptors[0].hits_addend = Some(0);
    assert_eq!(remaining(&e.ask(&req).await), (Code::Ok, 2));
    // Exactly what is left: admitted; then a look at a full limit is OK with 0 left, as
    // in envoy ratelimit (the count after adding 0 is not over the limit).
    req.descriptors[0].hits_addend = Some(2);
    assert_eq!(remaining(&e.ask(&req).await), (Code::Ok, 0));
    req.descriptors[0].hits_addend = Some(0);
    assert_eq!(remaining(&e.ask(&req).await), (Code::Ok, 0));
    req.descriptors[0].hits_addend = None;
    assert_eq!(e.ask(&req).await.overall_code, Code::OverLimit);

    // Two descriptors of one request, each with its own cost.
    let mut two = request("hits", &[&[("client", "bob")], &[("client", "cat")]]);
    two.hits_addend = 2;
    two.descriptors[1].hits_addend = Some(5);
    let r = e.ask(&two).await;
    assert_eq!(
        (r.statuses[0].limit_remaining, r.statuses[1].limit_remaining),
        (8, 5)
    );
}

/// `quota: "5 per 10 seconds"`: any span; no envoy unit when the span is none.
async fn quota_of_any_span<S: Setup>(s: S) {
    let e = env(&s, QUOTAS).await;
    let ann = [("client", "ann")];
    let r = e.hit("quotas", &[&ann]).await;
    let current = r.statuses[0].current_limit.clone().expect("a limit");
    assert_eq!((current.requests_per_unit, current.unit), (5, None));
    assert_eq!(current.name, "client");
    assert_eq!(
        fields(header(&r, "ratelimit-policy").expect("a policy")),
        vec![member("client", &[("q", 5), ("w", 10)])]
    );
    e.admit("quotas", &ann, 4).await;
    let denied = e.deny("quotas", &ann).await;
    assert_eq!(denied.duration_until_reset, Some(Duration::from_secs(10)));
    e.advance_ms(9_999);
    e.deny("quotas", &ann).await;
    e.advance_ms(1);
    e.admit("quotas", &ann, 5).await;
    // A span that is a unit gets the unit.
    assert_eq!(
        limit(&e.one("quotas", &[("route", "/a")]).await),
        (7, Some(Unit::Minute))
    );
}

/// An unknown domain limits nothing; nor does a descriptor that matches nothing.
async fn unknown_domain_and_unmatched_descriptors<S: Setup>(s: S) {
    let e = env(&s, FIVE_PER_SECOND).await;
    let r = e
        .hit("nowhere", &[&[("client", "ann")], &[("other", "x")]])
        .await;
    assert_eq!(r.overall_code, Code::Ok);
    assert_eq!(r.statuses.len(), 2);
    r.statuses.iter().for_each(no_limit);
    assert!(r.headers.is_empty(), "{:?}", r.headers);

    let r = e
        .hit(
            "edge",
            &[
                &[("other", "x")],
                &[("client", "ann")],
                &[("client", "ann"), ("deeper", "y")],
            ],
        )
        .await;
    assert_eq!(r.overall_code, Code::Ok);
    no_limit(&r.statuses[0]);
    assert_eq!(limit(&r.statuses[1]), (5, Some(Unit::Second)));
    no_limit(&r.statuses[2]);
    let only_unmatched = e.hit("edge", &[&[("other", "x")]]).await;
    assert!(
        only_unmatched.headers.is_empty(),
        "{:?}",
        only_unmatched.headers
    );
}

/// `RateLimit-Policy` lists every matched policy, `RateLimit` names the tightest, and
/// `Retry-After` comes only with a denial; both `RateLimit` fields parse as structured Lists.
async fn headers_name_the_policies_and_the_tightest<S: Setup>(s: S) {
    let e = env(&s, HEADERS).await;
    let client: &[(&str, &str)] = &[("client", "ann")];
    let route: &[(&str, &str)] = &[("route", "/a")];
    let policies = vec![
        member("client", &[("q", 3), ("w", 1)]),
        member("route", &[("q", 10), ("w", 60)]),
    ];

    let r = e.hit("hdr", &[client, route]).await;
    assert_eq!(
        fields(header(&r, "ratelimit-policy").expect("a policy")),
        policies
    );
    assert_eq!(
        fields(header(&r, "ratelimit").expect("a RateLimit")),
        vec![member("client", &[("r", 2), ("t", 1)])]
    );
    assert_eq!(header(&r, "retry-after"), None);

    // The route alone, to 1 left: then it is the tightest.
    e.admit("hdr", route, 8).await;
    let r = e.hit("hdr", &[client, route]).await;
    assert_eq!(r.overall_code, Code::Ok);
    assert_eq!(
        fields(header(&r, "ratelimit-policy").expect("a policy")),
        policies
    );
    assert_eq!(
        fields(header(&r, "ratelimit").expect("a RateLimit")),
        vec![member("route", &[("r", 0), ("t", 60)])]
    );
    assert_eq!(header(&r, "retry-after"), None);

    // Over the route's limit: Retry-After, in seconds until it admits.
    e.advance_ms(30_000);
    let r = e.hit("hdr", &[client, route]).await;
    assert_eq!(r.overall_code, Code::OverLimit);
    assert_eq!(
        fields(header(&r, "ratelimit").expect("a RateLimit")),
        vec![member("route", &[("r", 0), ("t", 30)])]
    );
    assert_eq!(header(&r, "retry-after"), Some("30"));

    // One descriptor: its policy only.
    let r = e.hit("hdr", &[client]).await;
    assert_eq!(
        fields(header(&r, "ratelimit-policy").expect("a policy")),
        vec![policies[0].clone()]
    );
}

/// Each bound exceeded is refused with its error, whose message names the bound; at the
/// bounds, a request is decided; a refused request counts nothing.
async fn request_bounds<S: Setup>(s: S) {
    let bounds = Bounds {
        max_descriptors: 2,
        max_entries: 2,
        max_text_len: 8,
        ..Bounds::default()
    };
    let e = env_with(&s, BOUNDED, bounds).await;
    let at_bounds = request(
        "b",
        &[&[("k", "12345678")], &[("12345678", "v"), ("j", "w")]],
    );
    assert_eq!(e.ask(&at_bounds).await.statuses[0].limit_remaining, 99);

    let refuse = async |request: RateLimitRequest| {
        let err = e
            .engine
            .should_rate_limit(&request)
            .await
            .expect_err("refused");
        assert!(err.is_invalid_argument(), "{err}");
        err
    };
    let err = refuse(request("b", &[&[("k", "x")], &[("k", "x")], &[("k", "x")]])).await;
    assert_eq!(err, RequestError::TooManyDescriptors { count: 3, max: 2 });
    assert!(err.to_string().contains("max_descriptors"), "{err}");
    let err = refuse(request("b", &[&[("k", "x"), ("j", "y"), ("i", "z")]])).await;
    assert_eq!(
        err,
        RequestError::TooManyEntries {
            descriptor: 0,
            count: 3,
            max: 2
        }
    );
    assert!(err.to_string().contains("max_entries"), "{err}");
    let err = refuse(request("b", &[&[("k", "x")], &[("k", "123456789")]])).await;
    assert_eq!(
        err,
        RequestError::TextTooLong {
            descriptor: 1,
            what: "value",
            len: 9,
            max: 8
        }
    );
    assert!(err.to_string().contains("max_text_len"), "{err}");
    let err = refuse(request("b", &[&[("123456789", "x")]])).await;
    assert_eq!(
        err,
        RequestError::TextTooLong {
            descriptor: 0,
            what: "key",
            len: 9,
            max: 8
        }
    );
    assert!(err.to_string().contains("max_text_len"), "{err}");
    let err = refuse(request("123456789", &[&[("k", "x")]])).await;
    assert_eq!(err, RequestError::DomainTooLong { len: 9, max: 8 });
    assert!(err.to_string().contains("max_text_len"), "{err}");
    assert_eq!(
        refuse(request("", &[&[("k", "x")]])).await,
        RequestError::EmptyDomain
    );
    assert_eq!(refuse(request("b", &[])).await, RequestError::NoDescriptors);
    assert_eq!(
        refuse(request("b", &[&[("k", "x")], &[]])).await,
        RequestError::EmptyDescriptor { descriptor: 1 }
    );

    // Every refused request above carried ("k", "x"): none of them counted it.
    assert_eq!(e.one("b", &[("k", "x")]).await.limit_remaining, 99);
}

/// No crafted value reaches another descriptor's counts: entries are kept apart however
/// their values spell separators, lengths or another entry.
async fn crafted_values_keep_to_their_own_counts<S: Setup>(s: S) {
    let e = env(&s, CRAFTED).await;
    let pairs: &[(Entries<'_>, Entries<'_>)] = &[
        (&[("k", "a1:b")], &[("k", "a"), ("j", "b")]),
        (&[("k", "a1:j1:b")], &[("k", "a"), ("j", "b")]),
        (&[("k", "a"), ("j", "b_j_c")], &[("k", "a_j_b"), ("j", "c")]),
        (&[("k", "a:j:b"), ("j", "c")], &[("k", "a"), ("j", "b:j:c")]),
        (&[("k", "a1:b"), ("j", "")], &[("k", "a"), ("j", "1:b0:")]),
        (&[("k", "{x}"), ("j", "y")], &[("k", "{x"), ("j", "}y")]),
        (&[("k", "x\ny")], &[("k", "x"), ("j", "y")]),
        (&[("k", "é")], &[("k", "e\u{301}")]),
    ];
    for (i, (one, other)) in pairs.iter().enumerate() {
        e.clock.advance(Duration::from_secs(120));
        e.admit("crafted", one, 1).await;
        e.deny("crafted", one).await;
        let status = e.one("crafted", other).await;
        assert_eq!(
            (status.code, status.limit_remaining),
            (Code::Ok, 0),
            "pair {i}: {other:?} after {one:?}"
        );
    }
}

/// An unlimited limit named in another's `replaces` is still unlimited: envoy ratelimit
/// takes unlimited limits out before it drops the replaced ones, and answers them OK with
/// `LimitRemaining` at `MaxUint32`.
async fn replaced_unlimited_limit_stays_unlimited<S: Setup>(s: S) {
    let e = env(&s, REPLACED_UNLIMITED).await;
    let r = e
        .hit("r", &[&[("internal", "x")], &[("client", "ann")]])
        .await;
    assert_eq!(r.overall_code, Code::Ok);
    assert_eq!(r.statuses[0].current_limit, None);
    assert_eq!(r.statuses[0].limit_remaining, u32::MAX);
    assert_eq!(limit(&r.statuses[1]), (5, Some(Unit::Second)));
}

/// A shadow-mode limit never denies, so it must not set the wait either: with a shadow limit
/// denying for an hour and an enforced one denying for a second, `Retry-After` is the second
/// (envoy ratelimit's headers, too, come from the enforced descriptor that failed).
async fn retry_after_comes_from_an_enforcing_limit<S: Setup>(s: S) {
    let e = env(&s, SHADOW_AND_ENFORCED).await;
    let both: [&[(&str, &str)]; 2] = [&[("watch", "x")], &[("client", "ann")]];
    let first = e.hit("sh", &both).await;
    assert_eq!(first.overall_code, Code::Ok);
    let second = e.hit("sh", &both).await;
    assert_eq!(second.overall_code, Code::OverLimit);
    assert_eq!(second.statuses[0].code, Code::Ok, "shadow mode admits");
    assert_eq!(second.statuses[1].code, Code::OverLimit);
    assert_eq!(header(&second, "retry-after"), Some("1"));
    assert_eq!(
        fields(header(&second, "ratelimit").expect("a RateLimit")),
        vec![member("client", &[("r", 0), ("t", 1)])]
    );
    // And it is true: a second on, the request is admitted.
    e.advance_ms(1_000);
    assert_eq!(e.hit("sh", &both).await.overall_code, Code::Ok);
}

/// envoy ratelimit reads a descriptor's `value` as text whatever its YAML scalar looks like
/// (go-yaml sets a string field from the scalar's text): a phone number, a status code or
/// `true` unquoted name the value they spell.
async fn unquoted_scalar_values_load_as_text<S: Setup>(s: S) {
    let e = env(&s, UNQUOTED_VALUES).await;
    let number = e.one("unquoted", &[("to_number", "2061111111")]).await;
    assert_eq!(limit(&number), (5, Some(Unit::Day)));
    let status = e.one("unquoted", &[("status", "429")]).await;
    assert_eq!(limit(&status), (3, Some(Unit::Minute)));
    let internal = e.one("unquoted", &[("internal", "true")]).await;
    assert_eq!(limit(&internal), (2, Some(Unit::Minute)));
}
