//! The config as `GET /api/config` shows it.

use serde_json::{Value, json};

use crate::config::{Action, Config, Descriptor};

pub(crate) fn domains(config: &Config) -> Value {
    Value::Array(
        config
            .domains()
            .iter()
            .map(|d| json!({ "domain": d.name(), "descriptors": descriptors(d.descriptors()) }))
            .collect(),
    )
}

fn descriptors(list: &[Descriptor]) -> Value {
    Value::Array(list.iter().map(descriptor).collect())
}

fn descriptor(d: &Descriptor) -> Value {
    let limit = d.limit().map(|limit| {
        let rules = match limit.action() {
            Action::Unlimited => json!("unlimited"),
            Action::Blocked { unit } => json!(format!("0 per {}", unit.name())),
            Action::Rules { rules, .. } => Value::Array(
                rules
                    .rules()
                    .iter()
                    .map(|r| json!({ "name": r.name(), "quota": r.quota_text(), "algorithm": r.kind().name(), "refunds": r.refunds() }))
                    .collect(),
            ),
        };
        json!({ "name": limit.name(), "replaces": limit.replaces(), "limits": rules })
    });
    json!({
        "key": d.key(),
        "value": d.value(),
        "path": d.path(),
        "limit": limit,
        "shadow_mode": d.shadow(),
        "quota_mode": d.quota_mode(),
        "share_threshold": d.share_threshold(),
        "after_response": d.after_response(),
        "descriptors": descriptors(d.descriptors()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 33: what a descriptor counts after the response, and which rules refund, are
    /// shown as the config says them.
    #[test]
    fn the_config_shows_after_response_and_each_rules_refunds() {
        let yaml = "domain: ai\ndescriptors:\n  - key: api_key\n    after_response: true\n    limits:\n      - {name: minute, quota: 10/minute, refunds: true}\n      - {name: day, quota: 100/day}\n";
        let shown = domains(&Config::parse(yaml, "t.yaml").unwrap());
        let descriptor = &shown[0]["descriptors"][0];
        assert_eq!(descriptor["after_response"], true);
        let rules = &descriptor["limit"]["limits"];
        assert_eq!(rules[0]["refunds"], true);
        assert_eq!(rules[1]["refunds"], false);
        assert_eq!(rules[0]["algorithm"], "sliding_log");
    }
}
