//! Every limit's one name, derived once from its config's name or path, made unique within
//! its domain.

use std::collections::HashSet;

use slidewin::limit::{Rule, RuleSet};

use super::error::shown;
use super::{Action, Descriptor};

/// Names every limit of a domain's tree, in config order (see [`DescriptorLimit::name`]): the one name
/// is derived here, once, and a single rule takes it as its own.
pub(super) fn name_limits(
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
            if let Action::Rules { rules, .. } = &mut limit.action
                && !limit.listed
                && let [one] = rules.rules()
                && one.name() != name
            {
                let renamed = one
                    .renamed(&name)
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

/// A rule's name from a config's name or path: the characters a rule name allows, at most its
/// length (the last part kept: it is the distinctive one).
pub(super) fn rule_name(text: &str) -> String {
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
