//! A limit as the YAML writes it (`rate_limit`, or each of `limits`): envoy ratelimit's `unit`
//! and `requests_per_unit`, or our `quota` (a rate, `N concurrent` with a `lease`, or a
//! calendar quota with its `zone`, `anchor` and `month_end`), `algorithm` and `refunds`; read
//! with serde, checked, and built into a [`DescriptorLimit`].

use serde::Deserialize;
use serde::de::{self, Deserializer};
use slidewin::limit::{CalendarQuota, Kind, Quota, Rule, RuleSet};

use super::calendar::{AnchorYaml, MonthEndYaml, ZoneYaml, placed};
use super::error::shown;
use super::naming::rule_name;
use super::{Action, DescriptorLimit, Unit, algorithm_for};

#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RateLimitYaml {
    #[serde(default)]
    unit: Option<Unit>,
    #[serde(default)]
    requests_per_unit: Option<RequestsPerUnitYaml>,
    #[serde(default)]
    unlimited: bool,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    replaces: Vec<ReplacesYaml>,
    #[serde(default)]
    algorithm: Option<AlgorithmYaml>,
    #[serde(default)]
    quota: Option<QuotaYaml>,
    /// With a `N concurrent` quota: the longest a request holds its unit.
    #[serde(default)]
    lease: Option<LeaseYaml>,
    /// With a calendar quota: the time zone of its calendar (UTC by default).
    #[serde(default)]
    zone: Option<ZoneYaml>,
    /// With a calendar quota: a date (or a date and time) its windows start on.
    #[serde(default)]
    anchor: Option<AnchorYaml>,
    /// With a calendar month or year: `clamp` or `strict`, for an anchor some months lack.
    #[serde(default)]
    month_end: Option<MonthEndYaml>,
    /// Negative hits give back the key's oldest units in the window (a `sliding_log`).
    #[serde(default)]
    refunds: bool,
}

#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReplacesYaml {
    name: String,
}

#[derive(Clone)]
struct AlgorithmYaml(Kind);

impl<'de> Deserialize<'de> for AlgorithmYaml {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<AlgorithmYaml, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse::<Kind>().map(AlgorithmYaml).map_err(|_| {
            de::Error::custom(format_args!(
                "unknown algorithm `{}`: expected sliding_log, sliding_counter, fixed_window, gcra, leases or calendar",
                shown(&text)
            ))
        })
    }
}

/// A quota (`100/minute`), `N concurrent` (at most N in flight, each for its `lease`), or a
/// calendar quota (`10000 per calendar month`, in its `zone`, from its `anchor`).
#[derive(Clone)]
enum QuotaYaml {
    Rate(Quota),
    Concurrent(u64),
    Calendar(CalendarQuota),
}

impl<'de> Deserialize<'de> for QuotaYaml {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<QuotaYaml, D::Error> {
        let text = String::deserialize(deserializer)?;
        if let Some(count) = concurrent(&text) {
            return count.map(QuotaYaml::Concurrent).map_err(|why| {
                de::Error::custom(format_args!("invalid quota `{}`: {why}", shown(&text)))
            });
        }
        let calendar = text
            .split(|c: char| !c.is_ascii_alphabetic())
            .any(|word| word.eq_ignore_ascii_case("calendar"));
        if calendar {
            return text
                .parse::<CalendarQuota>()
                .map(QuotaYaml::Calendar)
                .map_err(|e| {
                    de::Error::custom(format_args!(
                        "invalid quota `{}`: {}",
                        shown(&text),
                        e.reason()
                    ))
                });
        }
        text.parse::<Quota>().map(QuotaYaml::Rate).map_err(|e| {
            de::Error::custom(format_args!(
                "invalid quota `{}`: {}",
                shown(&text),
                e.reason()
            ))
        })
    }
}

/// `N concurrent` (any case, any spaces around): `None` for another form, else N (at least 1).
fn concurrent(text: &str) -> Option<Result<u64, &'static str>> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let [count, word] = words.as_slice() else {
        return None;
    };
    if !word.eq_ignore_ascii_case("concurrent") {
        return None;
    }
    Some(match count.parse::<u64>() {
        Ok(0) => Err("a limit of 0 in flight admits nothing; write at least 1"),
        Ok(n) => Ok(n),
        Err(_) => Err("expected a whole number before `concurrent`"),
    })
}

/// A lease: a span in the quota grammar (`30 seconds`, `1m 30s`, `PT90S`).
#[derive(Clone, Copy)]
struct LeaseYaml(std::time::Duration);

impl<'de> Deserialize<'de> for LeaseYaml {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<LeaseYaml, D::Error> {
        let text = String::deserialize(deserializer)?;
        Quota::parse_span(&text).map(LeaseYaml).map_err(|e| {
            de::Error::custom(format_args!(
                "invalid lease `{}`: {}",
                shown(&text),
                e.reason()
            ))
        })
    }
}

/// envoy's `requests_per_unit`: 32 bits, refused at its place in the file when larger.
#[derive(Clone, Copy)]
struct RequestsPerUnitYaml(u32);

impl<'de> Deserialize<'de> for RequestsPerUnitYaml {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<RequestsPerUnitYaml, D::Error> {
        let rpu = u64::deserialize(deserializer)?;
        u32::try_from(rpu).map(RequestsPerUnitYaml).map_err(|_| {
            de::Error::custom(format_args!(
                "requests_per_unit `{rpu}` is more than envoy's 32 bits hold; use `quota` for larger limits"
            ))
        })
    }
}

impl RateLimitYaml {
    /// One limit; `index` is its place in a `limits` list.
    pub(super) fn build(
        mut self,
        path: &str,
        index: Option<usize>,
    ) -> Result<DescriptorLimit, String> {
        let replaces = self.replaces()?;
        self.check_refunds()?;
        let at = (path, index);
        if self.unlimited {
            if self.unit.is_some() || self.quota.is_some() || self.requests_per_unit.is_some() {
                return Err(
                    "an unlimited limit takes no unit, requests_per_unit or quota".to_owned(),
                );
            }
            return Ok(self.without_rules(replaces, Action::Unlimited));
        }
        if let Some(QuotaYaml::Calendar(quota)) = self.quota.clone() {
            return self.calendar(quota, replaces, at);
        }
        if self.zone.is_some() || self.anchor.is_some() || self.month_end.is_some() {
            return Err("`zone`, `anchor` and `month_end` go with a calendar quota \
                        (`10000 per calendar month`)"
                .to_owned());
        }
        let both = || "give either `quota` or `unit` with `requests_per_unit`, not both".to_owned();
        let (quota, unit) = match (self.quota.clone(), self.unit, self.requests_per_unit) {
            (Some(QuotaYaml::Concurrent(n)), None, None) => {
                return self.concurrent(n, replaces, at);
            }
            (Some(QuotaYaml::Concurrent(_) | QuotaYaml::Calendar(_)), _, _) => return Err(both()),
            (_, _, _) if self.lease.is_some() => {
                return Err("a `lease` goes with a `N concurrent` quota".to_owned());
            }
            (Some(QuotaYaml::Rate(quota)), None, None) => (quota, Unit::of_span(quota.span())),
            (Some(_), Some(_), _) | (Some(_), _, Some(_)) => return Err(both()),
            (None, None, _) => {
                return Err(
                    "a limit needs a `unit` and `requests_per_unit`, or a `quota`".to_owned(),
                );
            }
            (None, Some(unit), rpu) => {
                // envoy ratelimit reads a missing requests_per_unit as 0, which denies all.
                let rpu = rpu.map_or(0, |r| u64::from(r.0));
                if rpu == 0 {
                    return Ok(self.without_rules(replaces, Action::Blocked { unit }));
                }
                // Over 32 bits: refused as it is read (`RequestsPerUnitYaml`).
                let quota = Quota::new(rpu, unit.span()).map_err(|e| e.to_string())?;
                (quota, Some(unit))
            }
        };
        let (rule, refunds) = (counted(self.algorithm, quota), self.refunds);
        let rule = |name: &str| match rule(name)? {
            rule if refunds => rule.with_refunds().map_err(|e| e.to_string()),
            rule => Ok(rule),
        };
        rules_limit(self.name, replaces, at, rule, unit)
    }

    /// The names it `replaces`, taken out of it: none empty, and not its own.
    fn replaces(&mut self) -> Result<Vec<String>, String> {
        let replaces = std::mem::take(&mut self.replaces)
            .into_iter()
            .map(|r| r.name)
            .collect::<Vec<_>>();
        if let Some(empty) = replaces.iter().position(String::is_empty) {
            return Err(format!("replaces entry {} has an empty name", empty + 1));
        }
        if let Some(name) = &self.name
            && replaces.contains(name)
        {
            return Err(format!("limit `{}` replaces itself", shown(name)));
        }
        Ok(replaces)
    }

    /// `refunds: true` goes with a rate that counts (its algorithm is checked as the rule is
    /// built).
    fn check_refunds(&self) -> Result<(), String> {
        if !self.refunds {
            return Ok(());
        }
        // envoy ratelimit reads a missing requests_per_unit as 0, which denies all.
        let zero = self.requests_per_unit.is_none_or(|r| r.0 == 0);
        if self.quota.is_none() && self.unit.is_some() && zero {
            return Err(
                "`refunds: true` gives back what a rate counted, and a limit of 0 \
                        counts nothing"
                    .to_owned(),
            );
        }
        let a_rate = matches!(self.quota, Some(QuotaYaml::Rate(_))) || self.unit.is_some();
        if self.unlimited || !a_rate {
            return Err(
                "`refunds: true` gives back what a rate counted (negative hits): it \
                        goes with a rate counted by `sliding_log`; a `concurrent` limit's \
                        units always come back, and a calendar quota cannot refund"
                    .to_owned(),
            );
        }
        Ok(())
    }

    /// A limit that counts nothing: `unlimited`, or a limit of 0.
    fn without_rules(self, replaces: Vec<String>, action: Action) -> DescriptorLimit {
        DescriptorLimit {
            name: String::new(),
            written: self.name,
            listed: false,
            replaces,
            action,
        }
    }

    /// `n concurrent`, with its `lease`: a limit of leases.
    fn concurrent(
        self,
        n: u64,
        replaces: Vec<String>,
        at: (&str, Option<usize>),
    ) -> Result<DescriptorLimit, String> {
        let Some(LeaseYaml(lease)) = self.lease else {
            return Err(format!(
                "`{n} concurrent` needs a `lease`: the longest a request holds its unit \
                 (`lease: 30 seconds`), after which it comes back by itself"
            ));
        };
        if self.algorithm.as_ref().is_some_and(|a| a.0 != Kind::Leases) {
            return Err("a `concurrent` quota is counted by leases alone".to_owned());
        }
        let quota = Quota::new(n, lease).map_err(|e| e.to_string())?;
        let rule = counted(Some(AlgorithmYaml(Kind::Leases)), quota);
        rules_limit(self.name, replaces, at, rule, None)
    }

    /// One limit of a calendar quota: its `zone` and `anchor` applied, and no field of the
    /// other forms.
    fn calendar(
        self,
        quota: CalendarQuota,
        replaces: Vec<String>,
        at: (&str, Option<usize>),
    ) -> Result<DescriptorLimit, String> {
        if self.lease.is_some() {
            return Err("a `lease` goes with a `N concurrent` quota".to_owned());
        }
        if self.unit.is_some() || self.requests_per_unit.is_some() {
            return Err(
                "give either `quota` or `unit` with `requests_per_unit`, not both".to_owned(),
            );
        }
        if self
            .algorithm
            .as_ref()
            .is_some_and(|a| a.0 != Kind::Calendar)
        {
            return Err("a calendar quota is counted by `calendar` alone".to_owned());
        }
        let (quota, unit) = placed(quota, self.zone, self.anchor, self.month_end)?;
        let rule = |name: &str| Rule::calendar(name, quota).map_err(|e| e.to_string());
        rules_limit(self.name, replaces, at, rule, Some(unit))
    }
}

/// A rule of `quota` by the algorithm named (or the default for it), once it has its name.
fn counted(
    algorithm: Option<AlgorithmYaml>,
    quota: Quota,
) -> impl FnOnce(&str) -> Result<Rule, String> {
    move |name| {
        let kind = algorithm_for(algorithm.map(|a| a.0), quota)?;
        if kind == Kind::Calendar {
            return Err(
                "`calendar` counts a calendar quota (`10000 per calendar month`), \
                        not a span"
                    .to_owned(),
            );
        }
        Rule::new(name, kind, quota).map_err(|e| e.to_string())
    }
}

/// A limit of one rule, built by `rule` under its name: the one written, or one after its place
/// (`path`, and its index in a list).
fn rules_limit(
    written: Option<String>,
    replaces: Vec<String>,
    (path, index): (&str, Option<usize>),
    rule: impl FnOnce(&str) -> Result<Rule, String>,
    unit: Option<Unit>,
) -> Result<DescriptorLimit, String> {
    let default_name = match index {
        Some(i) => format!("{path}.{i}"),
        None => path.to_owned(),
    };
    let name = rule_name(written.as_deref().unwrap_or(&default_name));
    let rules = RuleSet::new([rule(&name)?]).map_err(|e| e.to_string())?;
    Ok(DescriptorLimit {
        name: String::new(),
        written,
        listed: false,
        replaces,
        action: Action::Rules {
            rules,
            units: vec![unit],
        },
    })
}

pub(super) fn build_list(list: Vec<RateLimitYaml>, path: &str) -> Result<DescriptorLimit, String> {
    if list.is_empty() {
        return Err("`limits` is empty".to_owned());
    }
    let mut rules = Vec::with_capacity(list.len());
    let mut units = Vec::with_capacity(list.len());
    for (i, yaml) in list.into_iter().enumerate() {
        if yaml.unlimited {
            return Err(format!(
                "limit {} of `limits` is unlimited; a list holds limits only",
                i + 1
            ));
        }
        if !yaml.replaces.is_empty() {
            return Err(format!(
                "limit {} of `limits` has `replaces`; put it on a `rate_limit`",
                i + 1
            ));
        }
        if yaml.name.is_none() {
            return Err(format!(
                "limit {} of `limits` has no `name`: each needs one (the headers and the metrics show it)",
                i + 1
            ));
        }
        let one = yaml.build(path, Some(i))?;
        match one.action {
            Action::Rules {
                rules: set,
                units: mut u,
            } => {
                rules.extend(set.rules().iter().cloned());
                units.append(&mut u);
            }
            Action::Blocked { .. } => {
                return Err(format!(
                    "limit {} of `limits` has requests_per_unit 0; a list holds limits that admit something",
                    i + 1
                ));
            }
            Action::Unlimited => unreachable!("refused above"),
        }
    }
    let rules = RuleSet::new(rules).map_err(|e| e.to_string())?;
    Ok(DescriptorLimit {
        name: String::new(),
        written: None,
        listed: true,
        replaces: Vec::new(),
        action: Action::Rules { rules, units },
    })
}
