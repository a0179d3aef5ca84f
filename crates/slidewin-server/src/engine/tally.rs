//! What a request's descriptors were answered so far, as each is checked: their statuses,
//! the binding limit, the policies, and whether the request is over.

use http::HeaderValue;
use slidewin::limit::Binding;

use super::check::DescriptorCheck;
use super::request::{Code, DescriptorStatus};
use super::{ActionRt, RuleRt};
use slidewin_store::Backend;

/// What a request's descriptors were answered so far.
pub(super) struct Tally {
    pub(super) statuses: Vec<DescriptorStatus>,
    /// The descriptor whose limit binds the `RateLimit` field: its index, its binding rule's
    /// index in the set, and that rule's decision.
    pub(super) binding: Binding<(usize, usize)>,
    /// Every checked limit's `RateLimit-Policy`.
    pub(super) policies: Vec<HeaderValue>,
    /// Whether a failure policy answered for a failed store.
    pub(super) degraded: bool,
    /// Descriptors over a rate limit (not a quota).
    pub(super) failed_rate: usize,
    /// Descriptors under a quota, and those of them over it.
    pub(super) quota_total: usize,
    pub(super) quota_failed: usize,
}

impl Tally {
    #[inline]
    pub(super) fn new(descriptors: usize) -> Tally {
        Tally {
            statuses: Vec::with_capacity(descriptors),
            binding: Binding::new(),
            policies: Vec::new(),
            degraded: false,
            failed_rate: 0,
            quota_total: 0,
            quota_failed: 0,
        }
    }

    /// Counts descriptor `i`'s check against `rule`.
    #[inline]
    pub(super) fn add<B: Backend>(&mut self, i: usize, rule: &RuleRt<B>, checked: DescriptorCheck) {
        self.degraded |= checked.without_store;
        if let ActionRt::Rules { fields, .. } = &rule.action {
            self.policies.push(fields.policy().clone());
        }
        if checked.status.code == Code::OverLimit {
            if rule.quota_mode {
                self.quota_failed += 1;
            } else {
                self.failed_rate += 1;
            }
        }
        if rule.quota_mode {
            self.quota_total += 1;
        }
        if let Some((rule_at, decision)) = checked.decided {
            if rule.shadow {
                self.binding.offer_shadow(decision, (i, rule_at));
            } else {
                self.binding.offer(decision, (i, rule_at));
            }
        }
        self.statuses.push(checked.status);
    }

    /// Whether the request is over the limit: a descriptor over a rate limit, or every
    /// descriptor under a quota over it.
    pub(super) fn over(&self) -> bool {
        self.failed_rate > 0 || (self.quota_total > 0 && self.quota_total == self.quota_failed)
    }
}
