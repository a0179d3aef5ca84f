//! The service's config: envoy ratelimit's YAML as it is, and our extensions.
//!
//! A file holds one domain and its tree of descriptors, as in envoyproxy/ratelimit:
//!
//! ```yaml
//! domain: mongo_cps
//! descriptors:
//!   - key: database
//!     value: users
//!     rate_limit:
//!       unit: second
//!       requests_per_unit: 500
//! ```
//!
//! Ours on top: `algorithm` on a limit, `quota: "5 per 10 seconds"` for any span, and a list of
//! `limits` on one descriptor, all of which must admit a request.

mod calendar;
mod error;
mod limit_yaml;
mod naming;
#[cfg(test)]
mod tests;
mod yaml;

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;
use serde::de::{self, Deserializer};
use slidewin::limit::{Kind, Quota, RuleSet};

use crate::config_nesting::too_deep;

pub use self::error::ConfigFileError;
use self::error::shown;
use self::yaml::RootYaml;

/// The algorithm a limit uses when its config names none: the exact sliding log.
///
/// envoy ratelimit and limitador count fixed windows, which admit up to twice the limit across
/// a window's edge; a sliding log admits at most the limit in *every* window of the span. Its
/// cost is memory: one 16-byte stamp per admission still in the window, so at most 16 bytes
/// times the limit for a key at its limit (16 KB for `1000/hour`), and nothing for keys gone
/// idle. For very large limits per key, `sliding_counter` (24 bytes a key, approximate) or
/// `gcra` (8 bytes, smooth) hold less: a limit over [`Config::MAX_LOG_LIMIT`] with no algorithm named
/// gets `sliding_counter`.
pub(crate) const DEFAULT_ALGORITHM: Kind = Kind::SlidingLog;

/// The algorithm of a limit of `limit` whose config names `named`, if any: see
/// [`Config::MAX_LOG_LIMIT`].
///
/// # Errors
///
/// `sliding_log` named for a limit over [`Config::MAX_LOG_LIMIT`], in words.
pub(crate) fn algorithm_for(named: Option<Kind>, quota: Quota) -> Result<Kind, String> {
    let limit = quota.limit();
    match named {
        Some(Kind::SlidingLog) if limit > Config::MAX_LOG_LIMIT => Err(format!(
            "`sliding_log` for a limit of {limit} ({quota}) would keep up to {limit} stamps of 16 \
             bytes a key: an exact log counts at most {max} (Config::MAX_LOG_LIMIT); use \
             `sliding_counter` or `gcra`, which hold a key in a fixed size",
            max = Config::MAX_LOG_LIMIT
        )),
        Some(Kind::Leases) if limit > Config::MAX_LOG_LIMIT => Err(format!(
            "leases for {limit} in flight ({quota}) would keep up to {limit} stamps of 16 bytes \
             a key: at most {max} (Config::MAX_LOG_LIMIT)",
            max = Config::MAX_LOG_LIMIT
        )),
        Some(kind) => Ok(kind),
        None if limit > Config::MAX_LOG_LIMIT => Ok(Kind::SlidingCounter),
        None => Ok(DEFAULT_ALGORITHM),
    }
}

/// envoy ratelimit's units, and the spans it gives them (a month is 30 days, a year 365).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Unit {
    /// One second.
    Second,
    /// 60 seconds.
    Minute,
    /// 3,600 seconds.
    Hour,
    /// 86,400 seconds.
    Day,
    /// 7 days.
    Week,
    /// 30 days.
    Month,
    /// 365 days.
    Year,
}

impl Unit {
    const ALL: [(Unit, &'static str, u64); 7] = [
        (Unit::Second, "second", 1),
        (Unit::Minute, "minute", 60),
        (Unit::Hour, "hour", 3_600),
        (Unit::Day, "day", 86_400),
        (Unit::Week, "week", 7 * 86_400),
        (Unit::Month, "month", 30 * 86_400),
        (Unit::Year, "year", 365 * 86_400),
    ];

    /// Its span.
    ///
    /// ```
    /// use slidewin_server::Unit;
    /// assert_eq!(Unit::Hour.span().as_secs(), 3600);
    /// ```
    #[must_use]
    pub fn span(self) -> Duration {
        Duration::from_secs(Unit::ALL.iter().find(|u| u.0 == self).map_or(1, |u| u.2))
    }

    /// Its name in the config, lower case.
    #[must_use]
    pub fn name(self) -> &'static str {
        Unit::ALL
            .iter()
            .find(|u| u.0 == self)
            .map_or("second", |u| u.1)
    }

    /// The unit named `name`, in any case (`second`, `SECOND`).
    ///
    /// ```
    /// use slidewin_server::Unit;
    /// assert_eq!(Unit::from_name("MINUTE"), Some(Unit::Minute));
    /// assert_eq!(Unit::from_name("fortnight"), None);
    /// ```
    #[must_use]
    pub fn from_name(name: &str) -> Option<Unit> {
        Unit::ALL
            .iter()
            .find(|u| u.1.eq_ignore_ascii_case(name))
            .map(|u| u.0)
    }

    /// The unit whose span is exactly `span`, if one is.
    #[must_use]
    pub fn of_span(span: Duration) -> Option<Unit> {
        Unit::ALL
            .iter()
            .find(|u| Duration::from_secs(u.2) == span)
            .map(|u| u.0)
    }
}

impl<'de> Deserialize<'de> for Unit {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Unit, D::Error> {
        let text = String::deserialize(deserializer)?;
        Unit::ALL
            .iter()
            .find(|u| u.1.eq_ignore_ascii_case(&text))
            .map(|u| u.0)
            .ok_or_else(|| {
                de::Error::custom(format_args!(
                    "invalid rate limit unit `{}`: expected second, minute, hour, day, week, month or year",
                    shown(&text)
                ))
            })
    }
}

/// The whole config: every domain, from every file.
///
/// ```
/// use slidewin_server::Config;
/// let config = Config::parse("domain: api\ndescriptors:\n  - key: client\n    rate_limit: {quota: 5 per 10 seconds}\n", "api.yaml")?;
/// assert_eq!(config.files(), ["api.yaml"]);
/// # Ok::<(), slidewin_server::ConfigFileError>(())
/// ```
#[derive(Clone, Debug)]
pub struct Config {
    domains: Vec<Domain>,
    files: Vec<String>,
}

/// One domain: a tree of descriptors.
#[derive(Clone, Debug)]
pub(crate) struct Domain {
    name: String,
    descriptors: Vec<Descriptor>,
}

/// A node of a domain's tree: what it matches, its limit, and its children.
#[derive(Clone, Debug)]
pub(crate) struct Descriptor {
    key: String,
    value: Option<String>,
    /// `domain.key_value.key`: envoy ratelimit's name for it in its stats.
    path: String,
    limit: Option<DescriptorLimit>,
    shadow: bool,
    quota_mode: bool,
    share_threshold: bool,
    after_response: bool,
    detailed_metric: bool,
    value_to_metric: bool,
    descriptors: Vec<Descriptor>,
}

/// What a descriptor enforces.
#[derive(Clone, Debug)]
pub(crate) struct DescriptorLimit {
    /// The one name it is shown by; see [`DescriptorLimit::name`].
    name: String,
    /// The config's `name`, which `replaces` refers to.
    written: Option<String>,
    /// A `limits` list: each rule keeps the name the config gave it.
    listed: bool,
    replaces: Vec<String>,
    action: Action,
}

/// How a descriptor's limit decides.
#[derive(Clone, Debug)]
pub(crate) enum Action {
    /// `unlimited: true`: always admitted, never counted.
    Unlimited,
    /// `requests_per_unit: 0`: always denied, as envoy ratelimit does.
    Blocked {
        /// The unit configured.
        unit: Unit,
    },
    /// The rules that must all admit.
    Rules {
        /// The rules.
        rules: RuleSet,
        /// Each rule's envoy unit, where its span is exactly one (for `current_limit`).
        units: Vec<Option<Unit>>,
    },
}

impl Config {
    /// The built-in config `slidewin serve` runs with when given none.
    pub const EXAMPLE: &str = include_str!("../../config/example.yaml");

    /// How long a load of the config (reading its files and building it) may take before it is
    /// given up and the config in force stays: 10 s.
    pub const READ_TIMEOUT: Duration = Duration::from_secs(10);

    /// The deepest nesting of flow collections (`[...]`, `{...}`) a config file may have: 128,
    /// the depth past which `yaml_serde` refuses any document. A deeper one is refused before it is
    /// parsed, naming the bracket past the bound, since parsing it would take time quadratic in
    /// its depth.
    ///
    /// ```
    /// use slidewin_server::{Config};
    /// let deep = format!("domain: d\ndescriptors: {}", "[".repeat(Config::MAX_FLOW_NESTING + 1));
    /// let err = Config::parse(&deep, "deep.yaml").unwrap_err();
    /// assert_eq!((err.line(), err.column()), (Some(2), Some(14 + Config::MAX_FLOW_NESTING)));
    /// assert!(err.to_string().contains("128"), "{err}");
    /// ```
    pub const MAX_FLOW_NESTING: usize = 128;

    /// The largest limit an exact sliding log counts: 10,000, so that one key holds at most
    /// 160 KB of stamps (16 bytes each), whatever its clients send. A limit over it with no
    /// `algorithm` named is counted by `sliding_counter` (24 bytes a key, approximate: it assumes
    /// the previous window's requests were spread evenly), and `/api/config` and the dashboard say
    /// so; one that names `sliding_log` is refused, by name. A request's limit override follows the
    /// same rule.
    ///
    /// ```
    /// use slidewin_server::Config;
    /// let named = "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {quota: 20000/hour, algorithm: sliding_log}\n";
    /// assert!(Config::parse(named, "d.yaml").unwrap_err().to_string().contains("Config::MAX_LOG_LIMIT"));
    /// ```
    pub const MAX_LOG_LIMIT: u64 = 10_000;

    /// The longest config file read, in bytes: a config is small, and a huge file is a mistake.
    pub const MAX_FILE_BYTES: u64 = 4 << 20;

    /// One file's text, `file` naming it in errors.
    ///
    /// # Errors
    ///
    /// The first thing wrong, with its line and column.
    pub fn parse(text: &str, file: &str) -> Result<Config, ConfigFileError> {
        if let Some(at) = too_deep(text, Config::MAX_FLOW_NESTING) {
            return Err(ConfigFileError::too_deep(file, text, at));
        }
        let root: RootYaml =
            yaml_serde::from_str(text).map_err(|e| ConfigFileError::from_yaml(file, text, &e))?;
        let domain = root.build(file)?;
        Ok(Config {
            domains: vec![domain],
            files: vec![file.to_owned()],
        })
    }

    /// Reads the files at `paths`; a directory stands for its `.yaml` and `.yml` files (names
    /// starting with `.` skipped, as Kubernetes' `..data` is), in name order. Each must be a
    /// regular file once its links are followed: a FIFO, a device or a directory is refused by
    /// name, without waiting on it. This reads files: the service calls it off its async
    /// workers, within a timeout (`Config::READ_TIMEOUT`).
    ///
    /// # Errors
    ///
    /// A file that cannot be read, is not a regular file or is not valid, a domain in two files,
    /// or no file at all.
    pub fn load(paths: &[PathBuf]) -> Result<Config, ConfigFileError> {
        Config::load_files(paths, false)
    }

    /// As [`load`](Config::load), but a domain may be spread over several files (envoy
    /// ratelimit's `MERGE_DOMAIN_CONFIG`): the top-level descriptors of each file of a domain
    /// join the domain's, in file order, and a descriptor that two files both define (the
    /// same key and value) is refused, naming the second file.
    ///
    /// # Errors
    ///
    /// As [`load`](Config::load), and a descriptor defined in two files.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use slidewin_server::Config;
    /// let dir = std::env::temp_dir().join(format!("slidewin-merge-doc-{}", std::process::id()));
    /// std::fs::create_dir_all(&dir)?;
    /// std::fs::write(dir.join("a.yaml"), "domain: api\ndescriptors:\n  - key: user\n    rate_limit: {quota: 5/s}\n")?;
    /// std::fs::write(dir.join("b.yaml"), "domain: api\ndescriptors:\n  - key: ip\n    rate_limit: {quota: 9/s}\n")?;
    /// assert!(Config::load(&[dir.clone()]).unwrap_err().to_string().contains("duplicate domain `api`"));
    /// let config = Config::load_merging_domains(&[dir.clone()])?;
    /// assert_eq!(config.files().len(), 2);
    /// std::fs::remove_dir_all(&dir)?;
    /// # Ok(()) }
    /// ```
    pub fn load_merging_domains(paths: &[PathBuf]) -> Result<Config, ConfigFileError> {
        Config::load_files(paths, true)
    }

    fn load_files(paths: &[PathBuf], merge_domains: bool) -> Result<Config, ConfigFileError> {
        let mut config = Config {
            domains: Vec::new(),
            files: Vec::new(),
        };
        for file in crate::config_read::config_files(paths)? {
            let shown_file = file.display().to_string();
            let text = crate::config_read::read_file(&file, &shown_file)?;
            let one = Config::parse(&text, &shown_file)?;
            config.merge(one, merge_domains)?;
        }
        Ok(config)
    }

    /// Adds `other`'s domains. A domain already here is refused (in one file only, as envoy
    /// ratelimit has it by default), or with `merge_domains` gets `other`'s descriptors.
    fn merge(&mut self, other: Config, merge_domains: bool) -> Result<(), ConfigFileError> {
        let file = other.files.first().cloned().unwrap_or_default();
        for domain in other.domains {
            let Some(here) = self.domains.iter_mut().find(|d| d.name == domain.name) else {
                self.domains.push(domain);
                continue;
            };
            if !merge_domains {
                return Err(ConfigFileError::new(
                    &file,
                    format!(
                        "duplicate domain `{}`: it is in another file too (merging a domain's \
                         files is an option: MERGE_DOMAIN_CONFIG, --merge-domains)",
                        domain.name
                    ),
                ));
            }
            here.join(domain)
                .map_err(|message| ConfigFileError::new(&file, message))?;
        }
        self.files.extend(other.files);
        Ok(())
    }

    /// Its domains.
    #[must_use]
    pub(crate) fn domains(&self) -> &[Domain] {
        &self.domains
    }

    /// The files it came from.
    #[must_use]
    pub fn files(&self) -> &[String] {
        &self.files
    }
}

impl Domain {
    /// Its name.
    #[must_use]
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// Its top-level descriptors.
    #[must_use]
    pub(crate) fn descriptors(&self) -> &[Descriptor] {
        &self.descriptors
    }

    /// `other`'s descriptors after its own, from another file of the same domain; every
    /// limit named again over the whole, so that names stay unique in the domain.
    fn join(&mut self, other: Domain) -> Result<(), String> {
        for descriptor in &other.descriptors {
            let same = |d: &&Descriptor| d.key == descriptor.key && d.value == descriptor.value;
            if let Some(twice) = self.descriptors.iter().find(same) {
                return Err(format!(
                    "duplicate descriptor `{}` in domain `{}`: another file of the domain \
                     defines it too",
                    shown(&twice.path),
                    self.name
                ));
            }
        }
        self.descriptors.extend(other.descriptors);
        let mut taken = std::collections::HashSet::new();
        naming::name_limits(&mut self.descriptors, &self.name, &mut taken)
    }
}

impl Descriptor {
    /// The entry key it matches.
    #[must_use]
    pub(crate) fn key(&self) -> &str {
        &self.key
    }

    /// The entry value it matches: none for any value (each value counted on its own), or a
    /// value with `*` wildcards.
    #[must_use]
    pub(crate) fn value(&self) -> Option<&str> {
        self.value.as_deref()
    }

    /// `domain.key_value.key`, envoy ratelimit's name for its stats.
    #[must_use]
    pub(crate) fn path(&self) -> &str {
        &self.path
    }

    /// Its limit, if it has one.
    #[must_use]
    pub(crate) fn limit(&self) -> Option<&DescriptorLimit> {
        self.limit.as_ref()
    }

    /// Decides but never denies.
    #[must_use]
    pub(crate) fn shadow(&self) -> bool {
        self.shadow
    }

    /// envoy ratelimit's `quota_mode`: over its limit, it denies the request only when every
    /// quota-mode descriptor of the request is over.
    #[must_use]
    pub(crate) fn quota_mode(&self) -> bool {
        self.quota_mode
    }

    /// Its hits are costs reported after the response: 0 asks whether a unit is left, more
    /// are charged whatever the limit (`after_response: true`).
    #[must_use]
    pub(crate) fn after_response(&self) -> bool {
        self.after_response
    }

    /// envoy ratelimit's `share_threshold`: every value its wildcard matches counts as one.
    #[must_use]
    pub(crate) fn share_threshold(&self) -> bool {
        self.share_threshold
    }

    /// envoy ratelimit's `detailed_metric`: its limit's hits counted per descriptor, every
    /// entry's value in the series.
    #[must_use]
    pub(crate) fn detailed_metric(&self) -> bool {
        self.detailed_metric
    }

    /// envoy ratelimit's `value_to_metric`: the request's value at this level in the series.
    #[must_use]
    pub(crate) fn value_to_metric(&self) -> bool {
        self.value_to_metric
    }

    /// Its children.
    #[must_use]
    pub(crate) fn descriptors(&self) -> &[Descriptor] {
        &self.descriptors
    }
}

impl DescriptorLimit {
    /// The one name it is shown by, in the `RateLimit` fields, `current_limit.name`, the metric
    /// labels, `/api/stats`, the dashboard and the logs: the config's `name` if it has one,
    /// else its descriptor path without the domain, as envoy ratelimit spells paths (`key` or
    /// `key_value` for each level, joined by `.`). Characters a rule name does not allow
    /// (ASCII letters, digits, `_`, `-`, `.`) become `_`, so the entry `path: /search` is
    /// `path__search`; a name past 64 bytes keeps its last 64; a name another limit of the
    /// domain already has (in config order) gets `.2`, `.3` and so on.
    #[must_use]
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// Its `name` as the config wrote it, which `replaces` refers to.
    #[must_use]
    pub(crate) fn written_name(&self) -> Option<&str> {
        self.written.as_deref()
    }

    /// The names of the limits it replaces when both apply to one request.
    #[must_use]
    pub(crate) fn replaces(&self) -> &[String] {
        &self.replaces
    }

    /// How it decides.
    #[must_use]
    pub(crate) fn action(&self) -> &Action {
        &self.action
    }
}

/// Whether `limit` can count costs reported after the response: a limit that counts, by
/// rates or calendar windows (leases are given back, not reported).
pub(super) fn reported(limit: Option<&DescriptorLimit>) -> Result<(), String> {
    let why = match limit.map(DescriptorLimit::action) {
        Some(Action::Rules { rules, .. })
            if rules.rules().iter().any(|r| r.kind() == Kind::Leases) =>
        {
            "a `concurrent` limit's units are given back, not reported"
        }
        Some(Action::Rules { .. }) => return Ok(()),
        Some(Action::Unlimited) => "an unlimited limit counts nothing",
        Some(Action::Blocked { .. }) => "a limit of 0 counts nothing",
        None => "it has no limit",
    };
    Err(format!(
        "`after_response: true` charges the costs reported after the response to its limit, \
         but {why}"
    ))
}
