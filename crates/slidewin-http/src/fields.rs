//! [`RateLimitFields`]: the IETF `RateLimit-Policy` and `RateLimit` header fields of a
//! [`RuleSet`], `Retry-After`, and the legacy `X-RateLimit-*` headers.

use std::time::Duration;

use http::header::{HeaderMap, HeaderName, HeaderValue, RETRY_AFTER};
use sfv::{Integer, KeyRef, ListSerializer};
use slidewin::Decision;
use slidewin::limit::{Decisions, Kind, RuleSet};

use slidewin_store::RequestKey;

use crate::error::HttpConfigError;
use crate::partition::PartitionKeys;

/// `RateLimit-Policy`: the policies, the same on every response.
pub const RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
/// `RateLimit`: the policy closest to its limit, now.
pub const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");
/// The legacy `X-RateLimit-Limit`, for clients that read only the old headers.
pub const X_RATELIMIT_LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
/// The legacy `X-RateLimit-Remaining`.
pub const X_RATELIMIT_REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");
/// The legacy `X-RateLimit-Reset`: seconds until the window resets, a delay as
/// `tower_governor` and the IETF draft's `t` send it (GitHub's API sends a Unix time instead).
pub const X_RATELIMIT_RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");

/// The header fields of the IETF draft "`RateLimit` header fields for HTTP"
/// (draft-ietf-httpapi-ratelimit-headers, the two-field form of draft-10 and later) for the
/// rules of a [`RuleSet`], each rule a quota policy named after it:
///
/// - `RateLimit-Policy: "burst";q=10;w=1, "hourly";q=1000;w=3600`: each rule's quota (`q`,
///   its limit) and window (`w`, its span in seconds), the same on every response. A span that
///   is not whole seconds has no `w`, which the draft makes optional, rather than a rounded one.
/// - `RateLimit: "burst";r=3;t=1`: the binding rule's units left (`r`) and the seconds until
///   its window resets (`t`, rounded up), from a check's [`Decisions`]: the rule that denied,
///   or else the one closest to its limit, as the draft asks (the rule is
///   [`Decision::binds_before`]).
/// - `Retry-After` on a denial: the whole seconds until every rule admits, rounded up. On a
///   denial `t` is that same number, so the two never disagree.
///
/// The values are built with the `sfv` crate (structured field values, RFC 9651), and the
/// policy once, when the fields are.
///
/// # Example
///
/// ```
/// use http::HeaderMap;
/// use slidewin::{Limiter, Moment};
/// use slidewin::limit::{Kind, Rule, RuleSet};
/// use slidewin_http::RateLimitFields;
///
/// let rules = RuleSet::new([
///     Rule::new("burst", Kind::Gcra, "10/s".parse()?)?,
///     Rule::new("hourly", Kind::SlidingLog, "1000/hour".parse()?)?,
/// ])?;
/// let fields = RateLimitFields::new(&rules)?;
/// let mut limiter = Limiter::new(rules);
///
/// let mut headers = HeaderMap::new();
/// fields.insert(&limiter.check(Moment::ZERO, 7)?, &mut headers);
/// assert_eq!(headers["ratelimit-policy"], r#""burst";q=10;w=1, "hourly";q=1000;w=3600"#);
/// assert_eq!(headers["ratelimit"], r#""burst";r=3;t=1"#);
/// assert!(headers.get("retry-after").is_none());
///
/// let mut headers = HeaderMap::new();
/// fields.insert(&limiter.check(Moment::ZERO, 5)?, &mut headers);
/// assert_eq!(headers["ratelimit"], r#""burst";r=3;t=1"#);
/// assert_eq!(headers["retry-after"], "1"); // 200 ms, rounded up
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct RateLimitFields {
    policy: HeaderValue,
    /// Each rule's `RateLimit` member up to its first parameter's value, `"name";r=`, rendered
    /// by sfv once: a request then only appends two Integers, whose serialization is their
    /// decimal digits (RFC 9651, 4.1.4).
    members: Box<[Box<[u8]>]>,
}

impl RateLimitFields {
    /// The largest number a structured field's Integer holds (RFC 9651: fifteen digits).
    ///
    /// ```
    /// assert_eq!(slidewin_http::RateLimitFields::MAX_NUMBER, 999_999_999_999_999);
    /// ```
    pub const MAX_NUMBER: u64 = 999_999_999_999_999;

    /// The fields of `rules`.
    ///
    /// # Errors
    ///
    /// [`HttpConfigError::NotRepresentable`] for a rule whose limit or burst is above
    /// [`MAX_NUMBER`](RateLimitFields::MAX_NUMBER), which no field could carry.
    ///
    /// # Example
    ///
    /// ```
    /// use slidewin::limit::{Kind, Rule, RuleSet};
    /// use slidewin_http::RateLimitFields;
    ///
    /// let huge = Rule::new("huge", Kind::SlidingCounter, "1000000000000000/s".parse()?)?;
    /// let err = RateLimitFields::new(&RuleSet::from(huge)).unwrap_err();
    /// assert!(err.to_string().contains("1000000000000000"), "{err}");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new(rules: &RuleSet) -> Result<RateLimitFields, HttpConfigError> {
        RateLimitFields::with_unit(rules, QuotaUnit::Requests)
    }

    /// The fields of `rules`, whose costs count `unit`: `RateLimit-Policy` names it (`qu`)
    /// when it is not the draft's default, requests. A [`Kind::Leases`] rule is counted in
    /// `concurrent-requests` whatever `unit` says, unless it says another unit.
    ///
    /// # Errors
    ///
    /// As [`new`](RateLimitFields::new); [`HttpConfigError::QuotaUnit`] for
    /// [`QuotaUnit::ConcurrentRequests`] on a rate, or [`QuotaUnit::ContentBytes`] on leases.
    ///
    /// ```
    /// use slidewin::limit::{Kind, Rule, RuleSet};
    /// use slidewin_http::{QuotaUnit, RateLimitFields};
    ///
    /// let kib = RuleSet::from(Rule::new("upload", Kind::SlidingLog, "1000000/hour".parse()?)?);
    /// let fields = RateLimitFields::with_unit(&kib, QuotaUnit::ContentBytes)?;
    /// assert_eq!(fields.policy(), r#""upload";q=1000000;w=3600;qu="content-bytes""#);
    /// assert!(RateLimitFields::with_unit(&kib, QuotaUnit::ConcurrentRequests).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_unit(rules: &RuleSet, unit: QuotaUnit) -> Result<RateLimitFields, HttpConfigError> {
        let mut policy = String::new();
        let mut list = ListSerializer::with_buffer(&mut policy);
        let mut members = Vec::with_capacity(rules.rules().len());
        for rule in rules.rules() {
            let quota = rule.quota();
            let refuse = |what: &'static str, value: u64| HttpConfigError::NotRepresentable {
                rule: rule.name().to_string(),
                what,
                value,
            };
            let q = Integer::try_from(quota.limit()).map_err(|_| refuse("limit", quota.limit()))?;
            // The units left can reach the burst: it must fit too.
            Integer::try_from(quota.burst()).map_err(|_| refuse("burst", quota.burst()))?;
            // A rule's name is ASCII letters, digits, `_`, `-` and `.`: always a valid String.
            let name = sfv::String::from_string(rule.name().to_string()).map_err(|_| {
                refuse("name", 0) // unreachable for a Rule's name; kept an error, not a panic
            })?;
            let unit = unit
                .of(rule.kind())
                .ok_or_else(|| HttpConfigError::QuotaUnit {
                    rule: rule.name().to_string(),
                    unit: unit.as_str(),
                })?;
            let mut item = list.bare_item(&name).parameter(key("q"), q);
            // Leases are in flight, not in a window: no window to name. A calendar window (a
            // month of 28 to 31 days, a day of 23 to 25 hours) has no one length to name either;
            // `RateLimit`'s `t` gives the real reset.
            let windowless = matches!(rule.kind(), Kind::Leases | Kind::Calendar);
            let span = quota.span();
            let whole = (span.subsec_nanos() == 0).then(|| Integer::try_from(span.as_secs()));
            if let (false, Some(Ok(w))) = (windowless, whole) {
                item = item.parameter(key("w"), w);
            }
            if unit != QuotaUnit::Requests {
                let _ = item.parameter(key("qu"), sfv::StringRef::constant(unit.as_str()));
            }
            members.push(member(&name));
        }
        let _ = list.finish();
        Ok(RateLimitFields {
            policy: value(policy),
            members: members.into_boxed_slice(),
        })
    }

    /// `RateLimit-Policy`'s value.
    ///
    /// ```
    /// use slidewin::limit::{Kind, Rule, RuleSet};
    /// use slidewin_http::RateLimitFields;
    /// let rule = Rule::new("fast", Kind::SlidingLog, "5 per 500ms".parse()?)?;
    /// let fields = RateLimitFields::new(&RuleSet::from(rule))?;
    /// assert_eq!(fields.policy(), r#""fast";q=5"#); // no whole seconds: no `w`
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn policy(&self) -> &HeaderValue {
        &self.policy
    }

    /// `RateLimit`'s value for a check's `decisions`: the binding rule's units left and the
    /// seconds until its window resets.
    ///
    /// ```
    /// use slidewin::{Keyed, Moment};
    /// use slidewin::limit::{Kind, Rule, RuleSet};
    /// use slidewin_http::RateLimitFields;
    ///
    /// let rules = RuleSet::from(Rule::new("api", Kind::SlidingLog, "3/minute".parse()?)?);
    /// let fields = RateLimitFields::new(&rules)?;
    /// let limiter = Keyed::<String, _>::new(rules);
    /// let decisions = limiter.check("ann", Moment::from_secs(1), 1)?;
    /// assert_eq!(fields.rate_limit(&decisions), r#""api";r=2;t=60"#);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn rate_limit(&self, decisions: &Decisions) -> HeaderValue {
        self.rate_limit_at(decisions.binding(), &decisions.decision())
    }

    /// `RateLimit`'s value for the rule at `index` of the set and its `decision`: what
    /// [`rate_limit`](RateLimitFields::rate_limit) says of a set's binding decision, for a
    /// caller that kept only that decision and its index.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::Decision;
    /// use slidewin::limit::{Kind, Rule, RuleSet};
    /// use slidewin_http::RateLimitFields;
    ///
    /// let rules = RuleSet::new([
    ///     Rule::new("burst", Kind::SlidingLog, "10/s".parse()?)?,
    ///     Rule::new("hourly", Kind::SlidingLog, "1000/hour".parse()?)?,
    /// ])?;
    /// let fields = RateLimitFields::new(&rules)?;
    /// let hourly = Decision::allow(1000, 3, Duration::from_secs(90));
    /// assert_eq!(fields.rate_limit_at(1, &hourly), r#""hourly";r=3;t=90"#);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn rate_limit_at(&self, index: usize, decision: &Decision) -> HeaderValue {
        self.rate_limit_in(index, decision, None)
    }

    /// `RateLimit`'s value for the rule at `index` and its `decision`, naming the partition
    /// `key` was counted in with the `pk` parameter ([`PartitionKeys`]).
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::Decision;
    /// use slidewin::limit::{Kind, Rule, RuleSet};
    /// use slidewin_http::{PartitionKeys, RateLimitFields};
    ///
    /// let rules = RuleSet::from(Rule::new("api", Kind::SlidingLog, "100/minute".parse()?)?);
    /// let fields = RateLimitFields::new(&rules)?;
    /// let keys = PartitionKeys::new(b"the fleet's secret, 16+ bytes")?;
    /// let decision = Decision::allow(100, 99, Duration::from_secs(60));
    /// let value = fields.rate_limit_keyed(0, &decision, &keys, "alice".into());
    /// let value = value.to_str()?;
    /// assert!(value.starts_with(r#""api";r=99;t=60;pk=:"#), "{value}");
    /// assert!(!value.contains("alice"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn rate_limit_keyed(
        &self,
        index: usize,
        decision: &Decision,
        keys: &PartitionKeys,
        key: RequestKey<'_>,
    ) -> HeaderValue {
        self.rate_limit_in(index, decision, Some(&keys.parameter(key)))
    }

    /// `RateLimit`'s value, with `pk`'s parameter (`;pk=:…:`) when there is one.
    pub(crate) fn rate_limit_in(
        &self,
        index: usize,
        decision: &Decision,
        pk: Option<&[u8]>,
    ) -> HeaderValue {
        let pk = pk.unwrap_or_default();
        // Decisions of a set other than these fields' (a caller's mistake) past their last rule
        // get an empty name rather than a panic.
        let member = self.members.get(index).map_or(&br#""";r="#[..], |m| &m[..]);
        let mut remaining = itoa::Buffer::new();
        let remaining = remaining.format(number(decision.remaining())).as_bytes();
        let mut reset = itoa::Buffer::new();
        let reset = reset.format(number(reset_seconds(decision))).as_bytes();
        // Exactly the value's length: a `Vec` with room to spare would cost the header value
        // a second allocation, for the shared buffer `Bytes` makes of it.
        let mut out =
            Vec::with_capacity(member.len() + remaining.len() + 3 + reset.len() + pk.len());
        out.extend_from_slice(member);
        out.extend_from_slice(remaining);
        out.extend_from_slice(b";t=");
        out.extend_from_slice(reset);
        out.extend_from_slice(pk);
        HeaderValue::try_from(out).unwrap_or_else(|_| HeaderValue::from_static(""))
    }

    /// Inserts `RateLimit-Policy`, `RateLimit` and, on a denial, `Retry-After` into
    /// `headers`, replacing any there.
    ///
    /// ```
    /// use http::HeaderMap;
    /// use slidewin::{Limiter, Moment};
    /// use slidewin::limit::{Kind, Rule, RuleSet};
    /// use slidewin_http::RateLimitFields;
    ///
    /// let rules = RuleSet::from(Rule::new("login", Kind::SlidingLog, "1/minute".parse()?)?);
    /// let fields = RateLimitFields::new(&rules)?;
    /// let mut limiter = Limiter::new(rules);
    /// limiter.check(Moment::ZERO, 1)?;
    /// let mut headers = HeaderMap::new();
    /// fields.insert(&limiter.check(Moment::from_secs(20), 1)?, &mut headers);
    /// assert_eq!(headers["retry-after"], "40");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn insert(&self, decisions: &Decisions, headers: &mut HeaderMap) {
        headers.insert(RATELIMIT_POLICY, self.policy.clone());
        headers.insert(RATELIMIT, self.rate_limit(decisions));
        match retry_after(&decisions.decision()) {
            Some(wait) => headers.insert(RETRY_AFTER, wait),
            None => headers.remove(RETRY_AFTER),
        };
    }

    /// Inserts the legacy `X-RateLimit-Limit`, `X-RateLimit-Remaining` and
    /// `X-RateLimit-Reset` (seconds, rounded up) of the binding rule into `headers`, for
    /// clients that read only those.
    ///
    /// ```
    /// use http::HeaderMap;
    /// use slidewin::{Limiter, Moment};
    /// use slidewin::limit::{Kind, Rule, RuleSet};
    /// use slidewin_http::RateLimitFields;
    ///
    /// let rules = RuleSet::from(Rule::new("api", Kind::FixedWindow, "100/minute".parse()?)?);
    /// let mut limiter = Limiter::new(rules);
    /// let mut headers = HeaderMap::new();
    /// RateLimitFields::insert_legacy(&limiter.check(Moment::from_secs(15), 1)?, &mut headers);
    /// assert_eq!(headers["x-ratelimit-limit"], "100");
    /// assert_eq!(headers["x-ratelimit-remaining"], "99");
    /// assert_eq!(headers["x-ratelimit-reset"], "45");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn insert_legacy(decisions: &Decisions, headers: &mut HeaderMap) {
        RateLimitFields::insert_legacy_one(&decisions.decision(), headers);
    }

    /// The legacy headers of one rule's `decision`.
    pub(crate) fn insert_legacy_one(decision: &Decision, headers: &mut HeaderMap) {
        headers.insert(X_RATELIMIT_LIMIT, HeaderValue::from(decision.limit()));
        headers.insert(
            X_RATELIMIT_REMAINING,
            HeaderValue::from(decision.remaining()),
        );
        headers.insert(
            X_RATELIMIT_RESET,
            HeaderValue::from(reset_seconds(decision)),
        );
    }
}

/// What a limit's costs count, as the draft's `qu` parameter of `RateLimit-Policy` names it.
///
/// ```
/// use slidewin_http::QuotaUnit;
/// assert_eq!(QuotaUnit::ContentBytes.as_str(), "content-bytes");
/// assert_eq!(QuotaUnit::default(), QuotaUnit::Requests);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum QuotaUnit {
    /// Requests (`request`, the draft's default, so never named): a cost of 1 a request, or
    /// whatever weight a [`Limit::cost_fn`](crate::Limit::cost_fn) gives.
    #[default]
    Requests,
    /// Bytes of content (`content-bytes`): a cost that is a body's length.
    ContentBytes,
    /// Requests in flight (`concurrent-requests`): the unit of
    /// [`Kind::Leases`](slidewin::limit::Kind::Leases), named for them whatever is asked.
    ConcurrentRequests,
}

impl QuotaUnit {
    /// Its name in the draft's registry of quota units.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            QuotaUnit::Requests => "request",
            QuotaUnit::ContentBytes => "content-bytes",
            QuotaUnit::ConcurrentRequests => "concurrent-requests",
        }
    }

    /// The unit a rule of `kind` counts in when its limit asks for this one: leases count
    /// requests in flight, rates anything but; `None` when they cannot.
    fn of(self, kind: Kind) -> Option<QuotaUnit> {
        match (kind == Kind::Leases, self) {
            (true, QuotaUnit::Requests | QuotaUnit::ConcurrentRequests) => {
                Some(QuotaUnit::ConcurrentRequests)
            }
            (false, QuotaUnit::Requests | QuotaUnit::ContentBytes) => Some(self),
            _ => None,
        }
    }
}

/// `Retry-After` for a denied `decision`: its `retry_after` in whole seconds, rounded up (a
/// client that waits that long finds the room there); `None` when it was admitted.
///
/// ```
/// use std::time::Duration;
/// use slidewin::Decision;
/// use slidewin_http::retry_after;
///
/// let denied = Decision::deny(5, 0, Duration::from_secs(3), Duration::from_millis(1_200));
/// assert_eq!(retry_after(&denied).unwrap(), "2");
/// assert!(retry_after(&Decision::allow(5, 4, Duration::from_secs(1))).is_none());
/// ```
#[must_use]
pub fn retry_after(decision: &Decision) -> Option<HeaderValue> {
    decision
        .retry_after()
        .map(|wait| HeaderValue::from(whole_seconds(wait)))
}

/// `RateLimit`'s `t`: on a denial, the seconds until the cost is admitted, the same number as
/// `Retry-After` (the draft has `Retry-After` no earlier than `t`: a window that resets later
/// than the units come back would tell a client to wait longer than it must); otherwise, or
/// when the cost is never admitted, the seconds until the window resets.
fn reset_seconds(decision: &Decision) -> u64 {
    whole_seconds(decision.retry_after().unwrap_or(decision.reset_after()))
}

/// `duration` in whole seconds, rounded up.
pub(crate) fn whole_seconds(duration: Duration) -> u64 {
    duration
        .as_secs()
        .saturating_add(u64::from(duration.subsec_nanos() > 0))
}

/// A number a field's Integer holds. Units left are at most a rule's burst, checked to fit
/// when the fields were built, and a reset is at most two spans (under 1.2 × 10^12 seconds).
fn number(n: u64) -> u64 {
    n.min(RateLimitFields::MAX_NUMBER)
}

/// `"name";r=`: the member sfv renders for `name` with `r=0`, less the `0`.
fn member(name: &sfv::String) -> Box<[u8]> {
    let mut text = String::new();
    let mut list = ListSerializer::with_buffer(&mut text);
    let _ = list
        .bare_item(name)
        .parameter(key("r"), Integer::constant(0));
    let _ = list.finish();
    text.pop(); // the `0`
    text.into_bytes().into_boxed_slice()
}

fn key(name: &'static str) -> &'static KeyRef {
    KeyRef::constant(name)
}

/// A serialized field as a header value: RFC 9651's output is printable ASCII.
fn value(text: String) -> HeaderValue {
    HeaderValue::try_from(text).unwrap_or_else(|_| HeaderValue::from_static(""))
}
