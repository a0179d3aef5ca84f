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

use std::collections::HashSet;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;
use serde::de::{self, Deserializer};
use slidewin::limit::{Kind, Quota, Rule, RuleSet};

use crate::config_nesting::{MAX_FLOW_NESTING, too_deep};

/// The algorithm a limit uses when its config names none: the exact sliding log.
///
/// envoy ratelimit and limitador count fixed windows, which admit up to twice the limit across
/// a window's edge; a sliding log admits at most the limit in *every* window of the span. Its
/// cost is memory: one 16-byte stamp per admission still in the window, so at most 16 bytes
/// times the limit for a key at its limit (16 KB for `1000/hour`), and nothing for keys gone
/// idle. For very large limits per key, `sliding_counter` (24 bytes a key, approximate) or
/// `gcra` (8 bytes, smooth) hold less: a limit over [`MAX_LOG_LIMIT`] with no algorithm named
/// gets `sliding_counter`.
pub const DEFAULT_ALGORITHM: Kind = Kind::SlidingLog;

/// The largest limit an exact sliding log counts: 10,000, so that one key holds at most
/// 160 KB of stamps (16 bytes each), whatever its clients send. A limit over it with no
/// `algorithm` named is counted by `sliding_counter` (24 bytes a key, approximate: it assumes
/// the previous window's requests were spread evenly), and `/api/config` and the dashboard say
/// so; one that names `sliding_log` is refused, by name. A request's limit override follows the
/// same rule.
///
/// ```
/// use slidewin::limit::Kind;
/// use slidewin_server::{Config, Enforce, MAX_LOG_LIMIT};
/// let kind = |rpu: u64| {
///     let yaml = format!("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {{unit: hour, requests_per_unit: {rpu}}}\n");
///     let config = Config::parse(&yaml, "d.yaml").unwrap();
///     match config.domains()[0].descriptors()[0].limit().unwrap().enforce() {
///         Enforce::Rules { rules, .. } => rules.rules()[0].kind(),
///         _ => unreachable!(),
///     }
/// };
/// assert_eq!(kind(MAX_LOG_LIMIT), Kind::SlidingLog);
/// assert_eq!(kind(MAX_LOG_LIMIT + 1), Kind::SlidingCounter);
/// let named = "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {quota: 20000/hour, algorithm: sliding_log}\n";
/// assert!(Config::parse(named, "d.yaml").unwrap_err().to_string().contains("MAX_LOG_LIMIT"));
/// ```
pub const MAX_LOG_LIMIT: u64 = 10_000;

/// The algorithm of a limit of `limit` whose config names `named`, if any: see
/// [`MAX_LOG_LIMIT`].
///
/// # Errors
///
/// `sliding_log` named for a limit over [`MAX_LOG_LIMIT`], in words.
pub(crate) fn algorithm_for(named: Option<Kind>, quota: Quota) -> Result<Kind, String> {
    let limit = quota.limit();
    match named {
        Some(Kind::SlidingLog) if limit > MAX_LOG_LIMIT => Err(format!(
            "`sliding_log` for a limit of {limit} ({quota}) would keep up to {limit} stamps of 16 \
             bytes a key: an exact log counts at most {MAX_LOG_LIMIT} (MAX_LOG_LIMIT); use \
             `sliding_counter` or `gcra`, which hold a key in a fixed size"
        )),
        Some(kind) => Ok(kind),
        None if limit > MAX_LOG_LIMIT => Ok(Kind::SlidingCounter),
        None => Ok(DEFAULT_ALGORITHM),
    }
}

/// The longest config file read, in bytes: a config is small, and a huge file is a mistake.
pub const MAX_FILE_BYTES: u64 = 4 << 20;

/// A config file that could not be read or was not valid: the file, the line and column where
/// known, and what was wrong.
///
/// ```
/// use slidewin_server::Config;
/// let err = Config::parse("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n", "a.yaml").unwrap_err();
/// assert_eq!((err.line(), err.file()), (Some(4), "a.yaml"));
/// assert!(err.to_string().contains("fortnight"), "{err}");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigFileError {
    file: String,
    line: Option<usize>,
    column: Option<usize>,
    message: String,
}

impl ConfigFileError {
    pub(crate) fn new(file: &str, message: impl Into<String>) -> ConfigFileError {
        ConfigFileError {
            file: file.to_owned(),
            line: None,
            column: None,
            message: message.into(),
        }
    }

    fn from_yaml(file: &str, text: &str, err: &yaml_serde::Error) -> ConfigFileError {
        let location = err.location();
        let mut message = err.to_string();
        // yaml_serde ends its message with the place; we print it in front, as compilers do.
        if let Some(at) = message.find(" at line ") {
            message.truncate(at);
        }
        let mut line = location.as_ref().map(|l| l.line());
        let mut column = location.as_ref().map(|l| l.column());
        // A value refused by our own checks is placed by yaml_serde at the start of the mapping
        // holding it; the value itself, which the message quotes, is at or after that place.
        if let (Some(from), Some(quoted)) =
            (location.as_ref().map(|l| l.index()), first_quoted(&message))
            && let Some(found) = text.get(from..).and_then(|rest| rest.find(quoted))
        {
            let (at_line, at_column) = place(text, from + found);
            (line, column) = (Some(at_line), Some(at_column));
        }
        ConfigFileError {
            file: file.to_owned(),
            line,
            column,
            message,
        }
    }

    /// A flow collection nested past [`MAX_FLOW_NESTING`], at byte `at` of `text`.
    fn too_deep(file: &str, text: &str, at: usize) -> ConfigFileError {
        let (line, column) = place(text, at);
        ConfigFileError {
            file: file.to_owned(),
            line: Some(line),
            column: Some(column),
            message: format!(
                "flow collections ([...], {{...}}) nested more than {MAX_FLOW_NESTING} deep; \
                 refused before parsing"
            ),
        }
    }

    /// The file.
    #[must_use]
    pub fn file(&self) -> &str {
        &self.file
    }

    /// The line, from 1, where the parser knows it.
    #[must_use]
    pub fn line(&self) -> Option<usize> {
        self.line
    }

    /// The column, from 1, where the parser knows it.
    #[must_use]
    pub fn column(&self) -> Option<usize> {
        self.column
    }

    /// What was wrong.
    #[must_use]
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for ConfigFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.line, self.column) {
            (Some(line), Some(column)) => {
                write!(f, "{}:{line}:{column}: {}", self.file, self.message)
            }
            (Some(line), None) => write!(f, "{}:{line}: {}", self.file, self.message),
            _ => write!(f, "{}: {}", self.file, self.message),
        }
    }
}

impl std::error::Error for ConfigFileError {}

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
/// assert_eq!(config.domains()[0].name(), "api");
/// # Ok::<(), slidewin_server::ConfigFileError>(())
/// ```
#[derive(Clone, Debug)]
pub struct Config {
    domains: Vec<Domain>,
    files: Vec<String>,
}

/// One domain: a tree of descriptors.
#[derive(Clone, Debug)]
pub struct Domain {
    name: String,
    descriptors: Vec<Descriptor>,
}

/// A node of a domain's tree: what it matches, its limit, and its children.
#[derive(Clone, Debug)]
pub struct Descriptor {
    key: String,
    value: Option<String>,
    /// `domain.key_value.key`: envoy ratelimit's name for it in its stats.
    path: String,
    limit: Option<Limit>,
    shadow: bool,
    quota_mode: bool,
    share_threshold: bool,
    descriptors: Vec<Descriptor>,
}

/// What a descriptor enforces.
#[derive(Clone, Debug)]
pub struct Limit {
    /// The one name it is shown by; see [`Limit::name`].
    name: String,
    /// The config's `name`, which `replaces` refers to.
    written: Option<String>,
    /// A `limits` list: each rule keeps the name the config gave it.
    listed: bool,
    replaces: Vec<String>,
    enforce: Enforce,
}

/// How a descriptor's limit decides.
#[derive(Clone, Debug)]
pub enum Enforce {
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
    /// One file's text, `file` naming it in errors.
    ///
    /// # Errors
    ///
    /// The first thing wrong, with its line and column.
    pub fn parse(text: &str, file: &str) -> Result<Config, ConfigFileError> {
        if let Some(at) = too_deep(text, MAX_FLOW_NESTING) {
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
    /// workers, within a timeout (`CONFIG_READ_TIMEOUT`).
    ///
    /// # Errors
    ///
    /// A file that cannot be read, is not a regular file or is not valid, a domain in two files,
    /// or no file at all.
    pub fn load(paths: &[PathBuf]) -> Result<Config, ConfigFileError> {
        let mut config = Config {
            domains: Vec::new(),
            files: Vec::new(),
        };
        for file in crate::config_read::config_files(paths)? {
            let shown_file = file.display().to_string();
            let text = crate::config_read::read_file(&file, &shown_file)?;
            let one = Config::parse(&text, &shown_file)?;
            config.merge(one)?;
        }
        Ok(config)
    }

    /// Adds `other`'s domains; a domain may be in one file only, as in envoy ratelimit.
    fn merge(&mut self, other: Config) -> Result<(), ConfigFileError> {
        let file = other.files.first().cloned().unwrap_or_default();
        for domain in other.domains {
            if self.domains.iter().any(|d| d.name == domain.name) {
                return Err(ConfigFileError::new(
                    &file,
                    format!(
                        "duplicate domain `{}`: it is in another file too",
                        domain.name
                    ),
                ));
            }
            self.domains.push(domain);
        }
        self.files.extend(other.files);
        Ok(())
    }

    /// Its domains.
    #[must_use]
    pub fn domains(&self) -> &[Domain] {
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
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its top-level descriptors.
    #[must_use]
    pub fn descriptors(&self) -> &[Descriptor] {
        &self.descriptors
    }
}

impl Descriptor {
    /// The entry key it matches.
    #[must_use]
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The entry value it matches: none for any value (each value counted on its own), or a
    /// value with `*` wildcards.
    #[must_use]
    pub fn value(&self) -> Option<&str> {
        self.value.as_deref()
    }

    /// `domain.key_value.key`, envoy ratelimit's name for its stats.
    #[must_use]
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Its limit, if it has one.
    #[must_use]
    pub fn limit(&self) -> Option<&Limit> {
        self.limit.as_ref()
    }

    /// Decides but never denies.
    #[must_use]
    pub fn shadow(&self) -> bool {
        self.shadow
    }

    /// envoy ratelimit's `quota_mode`: over its limit, it denies the request only when every
    /// quota-mode descriptor of the request is over.
    #[must_use]
    pub fn quota_mode(&self) -> bool {
        self.quota_mode
    }

    /// envoy ratelimit's `share_threshold`: every value its wildcard matches counts as one.
    #[must_use]
    pub fn share_threshold(&self) -> bool {
        self.share_threshold
    }

    /// Its children.
    #[must_use]
    pub fn descriptors(&self) -> &[Descriptor] {
        &self.descriptors
    }
}

impl Limit {
    /// The one name it is shown by, in the `RateLimit` fields, `current_limit.name`, the metric
    /// labels, `/api/stats`, the dashboard and the logs: the config's `name` if it has one,
    /// else its descriptor path without the domain, as envoy ratelimit spells paths (`key` or
    /// `key_value` for each level, joined by `.`). Characters a rule name does not allow
    /// (ASCII letters, digits, `_`, `-`, `.`) become `_`, so the entry `path: /search` is
    /// `path__search`; a name past 64 bytes keeps its last 64; a name another limit of the
    /// domain already has (in config order) gets `.2`, `.3` and so on.
    ///
    /// ```
    /// use slidewin_server::Config;
    /// let config = Config::parse("domain: api\ndescriptors:\n  - key: path\n    value: /search\n    rate_limit: {quota: 5/s}\n  - key: user\n    rate_limit: {name: per-user, quota: 9/s}\n", "api.yaml")?;
    /// let names: Vec<&str> = config.domains()[0]
    ///     .descriptors()
    ///     .iter()
    ///     .filter_map(|d| d.limit())
    ///     .map(|l| l.name())
    ///     .collect();
    /// assert_eq!(names, ["path__search", "per-user"]);
    /// # Ok::<(), slidewin_server::ConfigFileError>(())
    /// ```
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its `name` as the config wrote it, which `replaces` refers to.
    #[must_use]
    pub fn written_name(&self) -> Option<&str> {
        self.written.as_deref()
    }

    /// The names of the limits it replaces when both apply to one request.
    #[must_use]
    pub fn replaces(&self) -> &[String] {
        &self.replaces
    }

    /// How it decides.
    #[must_use]
    pub fn enforce(&self) -> &Enforce {
        &self.enforce
    }
}

// ---- The YAML, as written ----

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RootYaml {
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
    // Stats options of envoy ratelimit: accepted; our metrics never label by value (a
    // label per value is unbounded), so they change nothing here.
    #[serde(default, rename = "detailed_metric")]
    _detailed_metric: bool,
    #[serde(default, rename = "value_to_metric")]
    _value_to_metric: bool,
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
                "unknown algorithm `{}`: expected sliding_log, sliding_counter, fixed_window or gcra",
                shown(&text)
            ))
        })
    }
}

#[derive(Clone)]
struct QuotaYaml(Quota);

impl<'de> Deserialize<'de> for QuotaYaml {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<QuotaYaml, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse::<Quota>().map(QuotaYaml).map_err(|e| {
            de::Error::custom(format_args!(
                "invalid quota `{}`: {}",
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

/// The line and column, both from 1, of byte `at` of `text`.
fn place(text: &str, at: usize) -> (usize, usize) {
    let before = &text[..at];
    let line = before.matches('\n').count() + 1;
    (line, at - before.rfind('\n').map_or(0, |nl| nl + 1) + 1)
}

/// The first text between backticks in `message`, unless it was cut short.
fn first_quoted(message: &str) -> Option<&str> {
    let start = message.find('`')? + 1;
    let len = message[start..].find('`')?;
    let quoted = &message[start..start + len];
    (!quoted.is_empty() && !quoted.ends_with('…')).then_some(quoted)
}

/// A value shown in a message: at most 80 bytes of it.
fn shown(text: &str) -> String {
    const MAX: usize = 80;
    if text.len() <= MAX {
        return text.to_owned();
    }
    let mut end = MAX;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

impl RootYaml {
    fn build(self, file: &str) -> Result<Domain, ConfigFileError> {
        let name = self.domain.0;
        let mut descriptors = build_level(self.descriptors.0, &name, file)?;
        let mut taken = HashSet::new();
        name_limits(&mut descriptors, &name, &mut taken)
            .map_err(|message| ConfigFileError::new(file, message))?;
        Ok(Domain { name, descriptors })
    }
}

/// Names every limit of a domain's tree, in config order (see [`Limit::name`]): the one name
/// is derived here, once, and a single rule takes it as its own.
fn name_limits(
    level: &mut [Descriptor],
    domain: &str,
    taken: &mut HashSet<String>,
) -> Result<(), String> {
    for descriptor in level {
        if let Some(limit) = &mut descriptor.limit {
            let path = descriptor.path.as_str();
            let written = limit.written.as_deref();
            let base = rule_name(written.unwrap_or_else(|| {
                path.strip_prefix(domain)
                    .and_then(|p| p.strip_prefix('.'))
                    .unwrap_or(path)
            }));
            let name = unique_name(&base, taken);
            if let Enforce::Rules { rules, .. } = &mut limit.enforce
                && !limit.listed
                && let [one] = rules.rules()
                && one.name() != name
            {
                let renamed = Rule::new(&name, one.kind(), one.quota())
                    .and_then(|rule| RuleSet::new([rule]))
                    .map_err(|e| format!("`{}`: {e}", shown(path)))?;
                *rules = renamed;
            }
            limit.name = name;
        }
        name_limits(&mut descriptor.descriptors, domain, taken)?;
    }
    Ok(())
}

/// `base`, or when it is taken `base.2`, `base.3`…, within a rule name's length; now taken.
fn unique_name(base: &str, taken: &mut HashSet<String>) -> String {
    let mut name = base.to_owned();
    let mut n = 1u32;
    while taken.contains(&name) {
        n += 1;
        let suffix = format!(".{n}");
        let keep = Rule::MAX_NAME_LEN - suffix.len();
        let start = base.len().saturating_sub(keep);
        name = format!("{}{suffix}", &base[start..]);
    }
    taken.insert(name.clone());
    name
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
    fn checked_limit(&self, path: &str) -> Result<Option<Limit>, String> {
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
        match (&self.rate_limit, &self.limits) {
            (Some(_), Some(_)) => {
                Err("has both `rate_limit` and `limits`; put every limit in `limits`".to_owned())
            }
            (Some(one), None) => one.clone().build(path, None).map(Some),
            (None, Some(list)) => build_list(list.clone(), path).map(Some),
            (None, None) => Ok(None),
        }
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
            descriptors,
        })
    }
}

/// A rule's name from a config's name or path: the characters a rule name allows, at most its
/// length (the last part kept: it is the distinctive one).
fn rule_name(text: &str) -> String {
    let cleaned: String = text
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect();
    let start = cleaned.len().saturating_sub(Rule::MAX_NAME_LEN);
    cleaned[start..].to_owned()
}

impl RateLimitYaml {
    /// One limit; `index` is its place in a `limits` list.
    fn build(self, path: &str, index: Option<usize>) -> Result<Limit, String> {
        let replaces = self
            .replaces
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
        if self.unlimited {
            if self.unit.is_some() || self.quota.is_some() || self.requests_per_unit.is_some() {
                return Err(
                    "an unlimited limit takes no unit, requests_per_unit or quota".to_owned(),
                );
            }
            return Ok(Limit {
                name: String::new(),
                written: self.name,
                listed: false,
                replaces,
                enforce: Enforce::Unlimited,
            });
        }
        let (quota, unit) = match (self.quota, self.unit, self.requests_per_unit) {
            (Some(_), Some(_), _) | (Some(_), _, Some(_)) => {
                return Err(
                    "give either `quota` or `unit` with `requests_per_unit`, not both".to_owned(),
                );
            }
            (Some(quota), None, None) => {
                let unit = Unit::of_span(quota.0.span());
                (quota.0, unit)
            }
            (None, None, _) => {
                return Err(
                    "a limit needs a `unit` and `requests_per_unit`, or a `quota`".to_owned(),
                );
            }
            (None, Some(unit), rpu) => {
                // envoy ratelimit reads a missing requests_per_unit as 0, which denies all.
                let rpu = rpu.map_or(0, |r| u64::from(r.0));
                if rpu == 0 {
                    return Ok(Limit {
                        name: String::new(),
                        written: self.name,
                        listed: false,
                        replaces,
                        enforce: Enforce::Blocked { unit },
                    });
                }
                // Over 32 bits: refused as it is read (`RequestsPerUnitYaml`).
                let quota = Quota::new(rpu, unit.span()).map_err(|e| e.to_string())?;
                (quota, Some(unit))
            }
        };
        let default_name = match index {
            Some(i) => format!("{path}.{i}"),
            None => path.to_owned(),
        };
        let name = rule_name(self.name.as_deref().unwrap_or(&default_name));
        let kind = algorithm_for(self.algorithm.map(|a| a.0), quota)?;
        let rule = Rule::new(&name, kind, quota).map_err(|e| e.to_string())?;
        let rules = RuleSet::new([rule]).map_err(|e| e.to_string())?;
        Ok(Limit {
            name: String::new(),
            written: self.name,
            listed: false,
            replaces,
            enforce: Enforce::Rules {
                rules,
                units: vec![unit],
            },
        })
    }
}

fn build_list(list: Vec<RateLimitYaml>, path: &str) -> Result<Limit, String> {
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
        match one.enforce {
            Enforce::Rules {
                rules: set,
                units: mut u,
            } => {
                rules.extend(set.rules().iter().cloned());
                units.append(&mut u);
            }
            Enforce::Blocked { .. } => {
                return Err(format!(
                    "limit {} of `limits` has requests_per_unit 0; a list holds limits that admit something",
                    i + 1
                ));
            }
            Enforce::Unlimited => unreachable!("refused above"),
        }
    }
    let rules = RuleSet::new(rules).map_err(|e| e.to_string())?;
    Ok(Limit {
        name: String::new(),
        written: None,
        listed: true,
        replaces: Vec::new(),
        enforce: Enforce::Rules { rules, units },
    })
}

#[cfg(test)]
mod tests {
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
                .nth(MAX_FLOW_NESTING)
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

        let e =
            err("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {quota: 5 per fortnight}\n");
        assert_eq!(e.line(), Some(4), "{e}");
        assert!(e.to_string().contains("fortnight"), "{e}");

        let e = err("domain: d\ndescriptors:\n  - key: k\n    rate_limt: {unit: second}\n");
        assert_eq!(e.line(), Some(4), "{e}");
        assert!(e.to_string().contains("rate_limt"), "{e}");
    }

    #[test]
    fn semantic_errors_name_the_descriptor() {
        let e =
            err("domain: d\ndescriptors:\n  - key: k\n    value: v\n  - key: k\n    value: v\n");
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
        let Enforce::Rules { rules, units } = d[0].limit().unwrap().enforce() else {
            panic!("rules");
        };
        assert_eq!(rules.rules().len(), 2);
        assert_eq!(units, &[Some(Unit::Second), Some(Unit::Hour)]);
        assert_eq!(rules.rules()[1].kind(), Kind::SlidingCounter);
        let Enforce::Rules { rules, units } = d[1].limit().unwrap().enforce() else {
            panic!("rules");
        };
        assert_eq!(rules.rules()[0].quota().span(), Duration::from_secs(10));
        assert_eq!(units, &[None]);
        assert!(matches!(
            d[2].limit().unwrap().enforce(),
            Enforce::Blocked { unit: Unit::Minute }
        ));
    }
}
