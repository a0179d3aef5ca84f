//! envoy ratelimit's `detailed_metric` and `value_to_metric`: a limit's hits counted per
//! descriptor as well, its values in the series, within bounds a client cannot lift.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};

use super::request::Entry;
use crate::metrics::Metrics;

/// One level of a limit's descriptor path, as its metrics name it.
#[derive(Clone, Debug)]
pub(crate) struct MetricLevel {
    pub(crate) key: String,
    /// The config's value, if it gives one (a wildcard's pattern included).
    pub(crate) value: Option<String>,
    /// `value_to_metric`: the request's value goes into the series.
    pub(crate) to_metric: bool,
    /// `share_threshold`: the wildcard's prefix stands for every value it matches.
    pub(crate) shared: bool,
}

/// How a limit's hits are counted per descriptor, and the series made so far.
#[derive(Debug)]
pub(crate) struct DetailedPlan {
    levels: Vec<MetricLevel>,
    /// `detailed_metric` on the limit's descriptor: every entry's key and value.
    whole: bool,
    /// Shared with the plan of the same limit after a reload, so that reloads never add
    /// series past the bound.
    seen: Arc<Mutex<HashSet<String>>>,
}

impl DetailedPlan {
    /// The most series one limit makes; the hits of descriptors past them are counted as
    /// [`DetailedPlan::OTHER`]. Clients choose the values, so the bound is the limit's, not
    /// theirs.
    pub(crate) const MAX_SERIES: usize = 100;

    /// Where the descriptors past [`DetailedPlan::MAX_SERIES`] are counted.
    pub(crate) const OTHER: &'static str = "_other";

    /// The most bytes of one value in a series; a longer one is cut (at a character).
    const MAX_VALUE_BYTES: usize = 64;

    /// A plan for the limit at the end of `levels`, going on with the series of `kept` (the
    /// same limit's before a reload); none when neither flag asks for one.
    pub(crate) fn new(
        levels: &[MetricLevel],
        whole: bool,
        kept: Option<&DetailedPlan>,
    ) -> Option<DetailedPlan> {
        (whole || levels.iter().any(|l| l.to_metric)).then(|| DetailedPlan {
            levels: levels.to_vec(),
            whole,
            seen: kept.map_or_else(Arc::default, |kept| Arc::clone(&kept.seen)),
        })
    }

    /// The series of `entries` (the request's, one per level): envoy ratelimit's metric key,
    /// `key_value` per level joined by `.`, or [`DetailedPlan::OTHER`] past the bound.
    pub(crate) fn series(&self, entries: &[Entry]) -> String {
        let name = if self.whole {
            entries
                .iter()
                .map(|e| format!("{}_{}", e.key, cut(&e.value)))
                .collect::<Vec<_>>()
                .join(".")
        } else {
            self.levels
                .iter()
                .zip(entries)
                .map(|(level, entry)| level.name(&entry.value))
                .collect::<Vec<_>>()
                .join(".")
        };
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        if seen.contains(&name) {
            return name;
        }
        if seen.len() >= Self::MAX_SERIES {
            return Self::OTHER.to_owned();
        }
        seen.insert(name.clone());
        name
    }

    /// Removes every series it made from `metrics` (the limit is gone).
    pub(crate) fn forget(&self, metrics: &Metrics, domain: &str, rule: &str) {
        let seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        for name in seen.iter().map(String::as_str).chain([Self::OTHER]) {
            metrics.forget_descriptor(domain, rule, name);
        }
    }
}

impl MetricLevel {
    /// This level's part of a series: `key_value` where a value belongs, else `key`.
    fn name(&self, runtime: &str) -> String {
        match (&self.value, self.to_metric) {
            (Some(pattern), true) if self.shared => {
                format!(
                    "{}_{}",
                    self.key,
                    pattern.split('*').next().unwrap_or_default()
                )
            }
            (Some(value), false) => format!("{}_{value}", self.key),
            (Some(value), true) if !value.contains('*') => format!("{}_{value}", self.key),
            (_, true) => format!("{}_{}", self.key, cut(runtime)),
            (None, false) => self.key.clone(),
        }
    }
}

/// `value`, at most [`DetailedPlan::MAX_VALUE_BYTES`] of it.
fn cut(value: &str) -> &str {
    let mut end = value.len().min(DetailedPlan::MAX_VALUE_BYTES);
    while !value.is_char_boundary(end) {
        end -= 1;
    }
    &value[..end]
}
