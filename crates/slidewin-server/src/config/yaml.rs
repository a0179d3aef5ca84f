//! The YAML as written, read with serde (envoy ratelimit's fields and ours), checked as it is
//! read, and built into the config's types.

use std::collections::HashSet;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer};
use slidewin::limit::{CalendarQuota, Kind, Quota, Rule, RuleSet};

use super::calendar::{AnchorYaml, MonthEndYaml, ZoneYaml, placed};
use super::error::shown;
use super::naming::{name_limits, rule_name};
use super::{Action, Descriptor, DescriptorLimit, Domain, Unit, algorithm_for, reported};
use crate::config::ConfigFileError;

// ---- The YAML, as written ----

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RootYaml {
    domain: DomainYaml,
    #[serde(default)]
    descriptors: LevelYaml,
}

// Every check that can be made as the YAML is read is made then, in the types' `Deserialize`:
// yaml_serde places an error found while reading at the value (or the mapping) it came from,
// so the error names the line and column. Checks made after reading would know no place.

/// A domain's name: not empty.
struct DomainYaml(String);

impl<'de> Deserialize<'de> for DomainYaml {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<DomainYaml, D::Error> {
        let name = String::deserialize(deserializer)?;
        if name.is_empty() {
            return Err(de::Error::custom("the domain is empty"));
        }
        Ok(DomainYaml(name))
    }
}

/// The descriptors of one level, each checked as it is read, and no two alike.
#[derive(Default)]
struct LevelYaml(Vec<DescriptorYaml>);

// The checks run inside the visitors, not after them (as `#[serde(try_from)]` would): only an
// error raised while yaml_serde reads a sequence or mapping is placed at it.
impl<'de> Deserialize<'de> for LevelYaml {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<LevelYaml, D::Error> {
        struct Level;
        impl<'de> de::Visitor<'de> for Level {
            type Value = LevelYaml;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a list of descriptors")
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<LevelYaml, A::Error> {
                let mut seen = HashSet::new();
                let mut level = Vec::new();
                while let Some(CheckedDescriptorYaml(descriptor)) = seq.next_element()? {
                    let composite = descriptor.composite();
                    if !seen.insert(composite) {
                        return Err(de::Error::custom(format_args!(
                            "duplicate descriptor `{}`",
                            shown(&descriptor.composite())
                        )));
                    }
                    level.push(descriptor);
                }
                Ok(LevelYaml(level))
            }
        }
        deserializer.deserialize_seq(Level)
    }
}

/// A descriptor whose own fields (its children aside) were checked as it was read.
struct CheckedDescriptorYaml(DescriptorYaml);

impl<'de> Deserialize<'de> for CheckedDescriptorYaml {
    fn deserialize<D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<CheckedDescriptorYaml, D::Error> {
        struct Checked;
        impl<'de> de::Visitor<'de> for Checked {
            type Value = CheckedDescriptorYaml;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a descriptor")
            }
            fn visit_map<A: de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<CheckedDescriptorYaml, A::Error> {
                let descriptor =
                    DescriptorYaml::deserialize(de::value::MapAccessDeserializer::new(map))?;
                // Its path is not known yet (its parents are read after it): the error names
                // the descriptor by its own key and value, and its place in the file.
                let composite = descriptor.composite();
                descriptor
                    .checked_limit(&composite)
                    .map_err(|e| match composite.as_str() {
                        "" => de::Error::custom(e),
                        _ => de::Error::custom(format_args!(
                            "{e} (descriptor `{}`)",
                            shown(&composite)
                        )),
                    })?;
                Ok(CheckedDescriptorYaml(descriptor))
            }
        }
        deserializer.deserialize_map(Checked)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DescriptorYaml {
    key: String,
    #[serde(default)]
    value: Option<String>,
    #[serde(default)]
    rate_limit: Option<RateLimitYaml>,
    #[serde(default)]
    limits: Option<Vec<RateLimitYaml>>,
    #[serde(default)]
    descriptors: LevelYaml,
    #[serde(default)]
    shadow_mode: bool,
    #[serde(default)]
    quota_mode: bool,
    #[serde(default)]
    share_threshold: bool,
    /// Its hits are costs reported after the response (envoy's `apply_on_stream_done`): 0
    /// asks whether a unit is left, more are charged whatever the limit.
    #[serde(default)]
    after_response: bool,
    // envoy ratelimit's stats options: a limit's hits per descriptor, bounded
    // (`engine::detailed`).
    #[serde(default)]
    detailed_metric: bool,
    #[serde(default)]
    value_to_metric: bool,
    // Passed through as dynamic metadata by envoy ratelimit; accepted, unused.
    #[serde(default, rename = "metadata")]
    _metadata: Option<de::IgnoredAny>,
}

#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RateLimitYaml {
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

impl RootYaml {
    pub(super) fn build(self, file: &str) -> Result<Domain, ConfigFileError> {
        let name = self.domain.0;
        let mut descriptors = build_level(self.descriptors.0, &name, file)?;
        let mut taken = HashSet::new();
        name_limits(&mut descriptors, &name, &mut taken)
            .map_err(|message| ConfigFileError::new(file, message))?;
        Ok(Domain { name, descriptors })
    }
}

fn build_level(
    level: Vec<DescriptorYaml>,
    parent: &str,
    file: &str,
) -> Result<Vec<Descriptor>, ConfigFileError> {
    // No two alike: checked as the level was read (`LevelYaml`).
    level
        .into_iter()
        .map(|yaml| yaml.build(parent, file))
        .collect()
}

impl DescriptorYaml {
    /// `key_value`, or `key`: what it matches, as envoy ratelimit composes it.
    fn composite(&self) -> String {
        match self.value.as_deref().filter(|v| !v.is_empty()) {
            Some(value) => format!("{}_{value}", self.key),
            None => self.key.clone(),
        }
    }

    /// Its limit, for the limit at `path`, and every check of its own fields.
    fn checked_limit(&self, path: &str) -> Result<Option<DescriptorLimit>, String> {
        if self.key.is_empty() {
            return Err("a descriptor has an empty key".to_owned());
        }
        let wildcard = self
            .value
            .as_deref()
            .is_some_and(|v| !v.is_empty() && v.contains('*'));
        if self.share_threshold && !wildcard {
            return Err("share_threshold needs a value with a `*` wildcard".to_owned());
        }
        let limit = match (&self.rate_limit, &self.limits) {
            (Some(_), Some(_)) => {
                Err("has both `rate_limit` and `limits`; put every limit in `limits`".to_owned())
            }
            (Some(one), None) => one.clone().build(path, None).map(Some),
            (None, Some(list)) => build_list(list.clone(), path).map(Some),
            (None, None) => Ok(None),
        }?;
        if self.after_response {
            reported(limit.as_ref())?;
        }
        Ok(limit)
    }

    fn build(self, parent: &str, file: &str) -> Result<Descriptor, ConfigFileError> {
        let value = self.value.clone().filter(|v| !v.is_empty());
        let path = format!("{parent}.{}", self.composite());
        // Checked as it was read, with its place in the file; built again here with its path,
        // which names its rules.
        let limit = self.checked_limit(&path).map_err(|message| {
            ConfigFileError::new(file, format!("`{}`: {message}", shown(&path)))
        })?;
        let descriptors = build_level(self.descriptors.0, &path, file)?;
        Ok(Descriptor {
            key: self.key,
            value,
            path,
            limit,
            shadow: self.shadow_mode,
            quota_mode: self.quota_mode,
            share_threshold: self.share_threshold,
            after_response: self.after_response,
            detailed_metric: self.detailed_metric,
            value_to_metric: self.value_to_metric,
            descriptors,
        })
    }
}

impl RateLimitYaml {
    /// One limit; `index` is its place in a `limits` list.
    fn build(mut self, path: &str, index: Option<usize>) -> Result<DescriptorLimit, String> {
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
        let refunds = self.refunds;
        let a_rate = matches!(self.quota, Some(QuotaYaml::Rate(_))) || self.unit.is_some();
        if refunds && (self.unlimited || !a_rate) {
            return Err(
                "`refunds: true` gives back what a rate counted (negative hits): it \
                        goes with a rate counted by `sliding_log`; a `concurrent` limit's \
                        units always come back, and a calendar quota cannot refund"
                    .to_owned(),
            );
        }
        if self.unlimited {
            if self.unit.is_some() || self.quota.is_some() || self.requests_per_unit.is_some() {
                return Err(
                    "an unlimited limit takes no unit, requests_per_unit or quota".to_owned(),
                );
            }
            return Ok(DescriptorLimit {
                name: String::new(),
                written: self.name,
                listed: false,
                replaces,
                action: Action::Unlimited,
            });
        }
        if let Some(QuotaYaml::Calendar(quota)) = self.quota.clone() {
            return self.calendar(quota, replaces, (path, index));
        }
        if self.zone.is_some() || self.anchor.is_some() || self.month_end.is_some() {
            return Err("`zone`, `anchor` and `month_end` go with a calendar quota \
                        (`10000 per calendar month`)"
                .to_owned());
        }
        let (quota, lease) = (self.quota, self.lease);
        let (quota, unit) = match (quota, self.unit, self.requests_per_unit) {
            (Some(QuotaYaml::Concurrent(n)), None, None) => {
                let Some(LeaseYaml(lease)) = lease else {
                    return Err(format!(
                        "`{n} concurrent` needs a `lease`: the longest a request holds its unit \
                         (`lease: 30 seconds`), after which it comes back by itself"
                    ));
                };
                if self.algorithm.as_ref().is_some_and(|a| a.0 != Kind::Leases) {
                    return Err("a `concurrent` quota is counted by leases alone".to_owned());
                }
                let quota = Quota::new(n, lease).map_err(|e| e.to_string())?;
                let leases = Some(AlgorithmYaml(Kind::Leases));
                let rule = counted(leases, quota);
                return rules_limit(self.name, replaces, (path, index), rule, None);
            }
            (Some(QuotaYaml::Concurrent(_) | QuotaYaml::Calendar(_)), _, _) => {
                return Err(
                    "give either `quota` or `unit` with `requests_per_unit`, not both".to_owned(),
                );
            }
            (_, _, _) if lease.is_some() => {
                return Err("a `lease` goes with a `N concurrent` quota".to_owned());
            }
            (Some(QuotaYaml::Rate(quota)), None, None) => {
                let unit = Unit::of_span(quota.span());
                (quota, unit)
            }
            (Some(_), Some(_), _) | (Some(_), _, Some(_)) => {
                return Err(
                    "give either `quota` or `unit` with `requests_per_unit`, not both".to_owned(),
                );
            }
            (None, None, _) => {
                return Err(
                    "a limit needs a `unit` and `requests_per_unit`, or a `quota`".to_owned(),
                );
            }
            (None, Some(unit), rpu) => {
                // envoy ratelimit reads a missing requests_per_unit as 0, which denies all.
                let rpu = rpu.map_or(0, |r| u64::from(r.0));
                if rpu == 0 && refunds {
                    return Err(
                        "`refunds: true` gives back what a rate counted, and a limit \
                                of 0 counts nothing"
                            .to_owned(),
                    );
                }
                if rpu == 0 {
                    return Ok(DescriptorLimit {
                        name: String::new(),
                        written: self.name,
                        listed: false,
                        replaces,
                        action: Action::Blocked { unit },
                    });
                }
                // Over 32 bits: refused as it is read (`RequestsPerUnitYaml`).
                let quota = Quota::new(rpu, unit.span()).map_err(|e| e.to_string())?;
                (quota, Some(unit))
            }
        };
        let rule = counted(self.algorithm, quota);
        let rule = |name: &str| match rule(name)? {
            rule if refunds => rule.with_refunds().map_err(|e| e.to_string()),
            rule => Ok(rule),
        };
        rules_limit(self.name, replaces, (path, index), rule, unit)
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

fn build_list(list: Vec<RateLimitYaml>, path: &str) -> Result<DescriptorLimit, String> {
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
