//! The label sets of the metrics' families.

use prometheus_client::encoding::EncodeLabelSet;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct RuleLabels {
    pub(super) domain: String,
    pub(super) rule: String,
}

/// A limit's hits for one descriptor (`detailed_metric`, `value_to_metric`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct DescriptorLabels {
    pub(super) domain: String,
    pub(super) rule: String,
    pub(super) descriptor: String,
    pub(super) result: &'static str,
}

/// One rule of a limit (a `limits` list has several; a `rate_limit` one, named as its limit).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct LimitLabels {
    pub(super) domain: String,
    pub(super) rule: String,
    pub(super) limit: String,
}

/// One of the keys denied most: its rank (1 the most), and what it is.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct TopLabels {
    pub(super) rank: u8,
    pub(super) domain: String,
    pub(super) rule: String,
    pub(super) limit: String,
    pub(super) key: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ResultLabels {
    pub(super) result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct StateLabels {
    pub(super) state: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ListenerLabels {
    pub(super) listener: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct UnmatchedLabels {
    /// A configured domain's name, or empty for one the config does not have: a client
    /// chooses the domain it sends, so its text is never a label.
    pub(super) domain: String,
    pub(super) reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ReasonLabels {
    pub(super) reason: &'static str,
}
