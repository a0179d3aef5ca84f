//! The descriptor trees: a config's domains built into [`Node`]s (keeping the counts of limits
//! a reload keeps), and a request descriptor's entries matched against them.

use std::collections::HashMap;
use std::sync::Arc;

use slidewin::Moment;
use slidewin_http::RateLimitFields;

use super::detailed::{DetailedPlan, MetricLevel};
use super::request::Entry;
use super::stats::{LimitWindows, RuleWindow};
use super::{ActionRt, Loaded, Matched, RuleRt};
use crate::config::{Action, Config, Descriptor, DescriptorLimit};
use crate::metrics::Metrics;
use slidewin_store::Backend;

/// A domain's tree of descriptors, ready for matching.
pub(super) struct Node<B: Backend> {
    children: HashMap<String, Node<B>>,
    /// `key_pattern` of children whose value has a `*`, in config order.
    wildcards: Vec<(String, Vec<String>)>,
    rule: Option<Arc<RuleRt<B>>>,
    /// For a `share_threshold` node: the value every match counts as.
    shared_value: Option<String>,
}

impl<B: Backend> Node<B> {
    fn empty() -> Node<B> {
        Node {
            children: HashMap::new(),
            wildcards: Vec::new(),
            rule: None,
            shared_value: None,
        }
    }
}

/// The limit for `entries` under `root`, as envoy ratelimit finds it: each entry in turn
/// matches a child by `key_value`, else by a wildcard value, else by `key` alone; the limit is
/// the one of the node the last entry reaches. Also, for each entry that reached a
/// `share_threshold` node, the pattern it counts under instead of its value.
pub(super) fn find<B: Backend>(root: &Node<B>, entries: &[Entry]) -> Option<Matched<B>> {
    let mut node = root;
    let mut shared = Vec::new();
    let mut composite = String::new();
    for (i, entry) in entries.iter().enumerate() {
        composite.clear();
        composite.push_str(&entry.key);
        composite.push('_');
        composite.push_str(&entry.value);
        let next = node.children.get(&composite).or_else(|| {
            node.wildcards
                .iter()
                .find(|(_, parts)| wildcard_match(parts, &composite))
                .and_then(|(pattern, _)| node.children.get(pattern))
                .or_else(|| node.children.get(&entry.key))
        })?;
        if let Some(pattern) = &next.shared_value {
            shared.push((i, pattern.clone()));
        }
        if i == entries.len() - 1 {
            return next.rule.as_ref().map(|rule| (Arc::clone(rule), shared));
        }
        if next.children.is_empty() {
            return None;
        }
        node = next;
    }
    None
}

/// A value against a pattern split at its `*`s: each `*` stands for any text.
pub(super) fn wildcard_match(parts: &[String], value: &str) -> bool {
    let (Some(first), Some(last)) = (parts.first(), parts.last()) else {
        return false;
    };
    if parts.len() == 1 {
        return first == value;
    }
    let fixed: usize = parts.iter().map(String::len).sum();
    if value.len() < fixed || !value.starts_with(first.as_str()) || !value.ends_with(last.as_str())
    {
        return false;
    }
    let mut rest = &value[first.len()..value.len() - last.len()];
    for part in &parts[1..parts.len() - 1] {
        match rest.find(part.as_str()) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    true
}

/// `config` built for `backend`: its domains' trees and its limits, version `version`. Limits
/// `old` had at the same domain and path keep their counts and statistics.
pub(super) fn build<B: Backend>(
    backend: &B,
    config: Config,
    old: Option<&Loaded<B>>,
    version: u64,
    now: Moment,
    metrics: &Metrics,
) -> Result<Loaded<B>, String> {
    let mut kept: HashMap<(&str, &str), &Arc<RuleRt<B>>> = HashMap::new();
    if let Some(old) = old {
        for rule in &old.rules {
            kept.insert((rule.domain.as_str(), rule.path.as_str()), rule);
        }
    }
    let mut rules = Vec::new();
    let mut domains = HashMap::new();
    for domain in config.domains() {
        let mut root = Node::empty();
        let mut level = Level {
            backend,
            domain: domain.name(),
            kept: &kept,
            rules: &mut rules,
            now,
            metrics,
            trail: Vec::new(),
        };
        level.build(domain.descriptors(), &mut root)?;
        domains.insert(domain.name().to_owned(), root);
    }
    if let Some(old) = old {
        // Limits gone: their metric series go too (their counts went with the old config).
        for rule in &old.rules {
            let kept = rules
                .iter()
                .find(|r: &&Arc<RuleRt<B>>| r.domain == rule.domain && r.shown == rule.shown);
            match kept {
                None => rule.forget_metrics(metrics),
                Some(new) => regauge(rule, new, metrics),
            }
        }
    }
    Ok(Loaded {
        config,
        version,
        loaded_at: jiff::Timestamp::now(),
        domains,
        rules,
    })
}

/// A kept limit's gauges: those of rules it no longer has removed, and where it had been hit,
/// its new quotas shown at once (a limit not yet hit shows them at its first hit).
fn regauge<B: Backend>(old: &RuleRt<B>, new: &RuleRt<B>, metrics: &Metrics) {
    let now = new.limits_shown();
    let gone = old.limits_shown();
    let gone = gone
        .iter()
        .filter(|o| !now.iter().any(|n| n.name == o.name))
        .map(|o| o.name.as_str());
    metrics.forget_limits(&old.domain, &old.shown, gone);
    if old.metrics.is_made() {
        metrics.set_limits(&new.domain, &new.shown, &now);
    }
}

/// What building one domain's tree needs at every level: the backend that makes stores, the
/// limits kept from the config before (by domain and path), and the limits made so far.
struct Level<'a, B: Backend> {
    backend: &'a B,
    domain: &'a str,
    kept: &'a HashMap<(&'a str, &'a str), &'a Arc<RuleRt<B>>>,
    rules: &'a mut Vec<Arc<RuleRt<B>>>,
    now: Moment,
    metrics: &'a Metrics,
    /// The levels above and at the descriptor being built, as its metrics name them.
    trail: Vec<MetricLevel>,
}

impl<B: Backend> Level<'_, B> {
    /// `descriptors` built as `parent`'s children, and theirs in turn.
    fn build(&mut self, descriptors: &[Descriptor], parent: &mut Node<B>) -> Result<(), String> {
        for descriptor in descriptors {
            let mut node = Node::empty();
            let composite = match descriptor.value() {
                Some(value) => format!("{}_{value}", descriptor.key()),
                None => descriptor.key().to_owned(),
            };
            if descriptor.share_threshold() {
                node.shared_value = descriptor.value().map(str::to_owned);
            }
            self.trail.push(MetricLevel {
                key: descriptor.key().to_owned(),
                value: descriptor.value().map(str::to_owned),
                to_metric: descriptor.value_to_metric(),
                shared: descriptor.share_threshold(),
            });
            if let Some(limit) = descriptor.limit() {
                let rule = self.rule(descriptor, limit)?;
                self.rules.push(Arc::clone(&rule));
                node.rule = Some(rule);
            }
            self.build(descriptor.descriptors(), &mut node)?;
            self.trail.pop();
            if descriptor.value().is_some_and(|v| v.contains('*')) {
                let parts = composite.split('*').map(str::to_owned).collect();
                parent.wildcards.push((composite.clone(), parts));
            }
            parent.children.insert(composite, node);
        }
        Ok(())
    }

    /// The limit in force for `descriptor`'s `rate_limit`: the kept one's store and statistics
    /// where it had the same rules, else a new store carrying what the old one counted.
    fn rule(
        &self,
        descriptor: &Descriptor,
        limit: &DescriptorLimit,
    ) -> Result<Arc<RuleRt<B>>, String> {
        let old = self.kept.get(&(self.domain, descriptor.path())).copied();
        let action = match limit.action() {
            Action::Unlimited => ActionRt::Unlimited,
            Action::Blocked { unit } => ActionRt::Blocked { unit: *unit },
            Action::Rules { rules: spec, units } => ActionRt::Rules {
                spec: spec.clone(),
                units: units.clone(),
                store: self.store(descriptor, old, spec)?,
                fields: RateLimitFields::new(spec)
                    .map_err(|e| format!("{}: {e}", descriptor.path()))?,
            },
        };
        let names = action.limit_names(limit.name());
        let limit_stats = match old {
            Some(old) if old.limit_stats.are_of(&names) => Arc::clone(&old.limit_stats),
            _ => Arc::new(LimitWindows::new(self.now, names)),
        };
        Ok(Arc::new(RuleRt {
            domain: self.domain.to_owned(),
            path: descriptor.path().to_owned(),
            shown: limit.name().to_owned(),
            name: limit.written_name().map(str::to_owned),
            replaces: limit.replaces().to_vec(),
            shadow: descriptor.shadow(),
            quota_mode: descriptor.quota_mode(),
            after_response: descriptor.after_response(),
            action,
            stats: old.map_or_else(
                || Arc::new(RuleWindow::new(self.now)),
                |o| Arc::clone(&o.stats),
            ),
            limit_stats,
            metrics: self.metrics.lazy_rule(),
            detail: self.detail(descriptor, old),
        }))
    }

    /// The per-descriptor metrics `descriptor`'s flags ask for, going on with the kept
    /// limit's series; a kept limit's series that are no longer asked for are removed.
    fn detail(
        &self,
        descriptor: &Descriptor,
        old: Option<&Arc<RuleRt<B>>>,
    ) -> Option<DetailedPlan> {
        let kept = old.and_then(|old| old.detail.as_ref());
        let plan = DetailedPlan::new(&self.trail, descriptor.detailed_metric(), kept);
        if let (None, Some(old), Some(kept)) = (&plan, old, kept) {
            kept.forget(self.metrics, &old.domain, &old.shown);
        }
        plan
    }

    /// The store for `spec`: the kept limit's where its rules are the same, else a new one
    /// carrying what the kept limit's store counted.
    fn store(
        &self,
        descriptor: &Descriptor,
        old: Option<&Arc<RuleRt<B>>>,
        spec: &slidewin::limit::RuleSet,
    ) -> Result<Arc<B::Store>, String> {
        let same = old.and_then(|old| match &old.action {
            ActionRt::Rules {
                spec: old_spec,
                store,
                ..
            } if same_rules(old_spec, spec) => Some(Arc::clone(store)),
            _ => None,
        });
        if let Some(store) = same {
            return Ok(store);
        }
        let store = self
            .backend
            .store(spec.clone())
            .map_err(|e| format!("{}: {e}", descriptor.path()))?;
        if let Some(ActionRt::Rules {
            store: old_store, ..
        }) = old.map(|o| &o.action)
        {
            self.backend.carry(&store, old_store, self.now);
        }
        Ok(Arc::new(store))
    }
}

/// The same rules: names, kinds and quotas (a calendar quota's zone and anchor too), in order.
fn same_rules(a: &slidewin::limit::RuleSet, b: &slidewin::limit::RuleSet) -> bool {
    a.rules() == b.rules()
}
