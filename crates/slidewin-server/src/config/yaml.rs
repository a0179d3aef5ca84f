//! The YAML as written, read with serde (envoy ratelimit's fields and ours), checked as it is
//! read, and built into the config's types.

use std::collections::HashSet;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer};

use super::error::shown;
use super::limit_yaml::{RateLimitYaml, build_list};
use super::naming::name_limits;
use super::{Descriptor, DescriptorLimit, Domain, reported};
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
