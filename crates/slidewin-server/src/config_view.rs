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
