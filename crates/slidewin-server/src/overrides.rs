//! The limits requests set for their descriptors (envoy's `RateLimitDescriptor.limit`): a store
//! per distinct (domain, limit, unit), made on first use, bounded in number, in span and in
//! memory, and dropped once it holds no live key.
//!
//! A request override comes from the data plane: any client of `POST /json` or of gRPC may send
//! one. So what it can reach is bounded by the operator ([`Bounds`]): its unit is at most
//! [`Bounds::max_override_unit`] (a day by default; a year-long key was the attack), its limit
//! is counted by the exact sliding log only up to [`Config::MAX_LOG_LIMIT`](Config::MAX_LOG_LIMIT) and by `sliding_counter`
//! past it, at most [`Bounds::MAX_OVERRIDES`] stores are held at once, and a store with no live key
//! (and no request using it) is dropped when room is needed, so the table never fills for good.
//! An override that cannot be honoured is refused for its descriptor alone: `OVER_LIMIT`, with
//! the reason as its `current_limit`'s name, never the whole request and never a limit
//! switched off.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use slidewin::Moment;
use slidewin::limit::{Quota, Rule, RuleSet};
use slidewin_http::RateLimitFields;

use crate::config::{Unit, algorithm_for};
use crate::engine::{ActionRt, Bounds, LimitOverride, LimitWindows, RuleRt, RuleWindow};
use crate::metrics::Metrics;
use slidewin_store::Backend;

/// Why a descriptor's override was not honoured: its descriptor is `OVER_LIMIT`, and this,
/// in words, is its `current_limit`'s name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    /// A unit longer than the operator allows.
    UnitTooLong { unit: Unit, max: Unit },
    /// [`Bounds::MAX_OVERRIDES`] stores are held, each with live keys or in use.
    TableFull,
    /// The backend could not make a store for it.
    Store(String),
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::UnitTooLong { unit, max } => write!(
                f,
                "override refused: its unit {} is longer than max_override_unit ({})",
                unit.name().to_ascii_uppercase(),
                max.name().to_ascii_uppercase()
            ),
            Refused::TableFull => write!(
                f,
                "override refused: {max} distinct overrides with live counts are held \
                 (Bounds::MAX_OVERRIDES)",
                max = Bounds::MAX_OVERRIDES
            ),
            Refused::Store(why) => write!(f, "override refused: {why}"),
        }
    }
}

/// The stores, by domain and limit.
type Table<B> = HashMap<(String, LimitOverride), Arc<RuleRt<B>>>;

/// The stores of the limits requests set, by domain and limit.
pub(crate) struct Overrides<B: Backend> {
    table: Mutex<Table<B>>,
}

impl<B: Backend> Overrides<B> {
    pub(crate) fn new() -> Overrides<B> {
        Overrides {
            table: Mutex::new(HashMap::new()),
        }
    }

    /// The store for `limit` in `domain`, made on first use; or why it is refused.
    pub(crate) fn rule(
        &self,
        backend: &B,
        metrics: &Metrics,
        bounds: &Bounds,
        (domain, limit): (&str, LimitOverride),
        now: Moment,
    ) -> Result<Arc<RuleRt<B>>, Refused> {
        if limit.unit.span() > bounds.max_override_unit.span() {
            return Err(Refused::UnitTooLong {
                unit: limit.unit,
                max: bounds.max_override_unit,
            });
        }
        let mut table = self
            .table
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let key = (domain.to_owned(), limit);
        if let Some(rule) = table.get(&key) {
            return Ok(Arc::clone(rule));
        }
        if table.len() >= Bounds::MAX_OVERRIDES {
            drop_idle(&mut table, backend, metrics, now);
        }
        if table.len() >= Bounds::MAX_OVERRIDES {
            return Err(Refused::TableFull);
        }
        let rule = Arc::new(make(backend, metrics, domain, limit, now)?);
        table.insert(key, Arc::clone(&rule));
        Ok(rule)
    }

    /// How many stores are held.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.table
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .len()
    }
}

/// Drops the stores no request holds and that hold no live key at `now`, and their metric
/// series. (A request clones a store's `Arc` under the table's lock, so one held by nobody
/// else here stays so while it is looked at.)
fn drop_idle<B: Backend>(table: &mut Table<B>, backend: &B, metrics: &Metrics, now: Moment) {
    table.retain(|_, rule| {
        let idle = Arc::strong_count(rule) == 1
            && match &rule.action {
                ActionRt::Rules { store, .. } => !backend.holds_keys(store, now),
                ActionRt::Blocked { .. } | ActionRt::Unlimited => true,
            };
        if idle {
            rule.forget_metrics(metrics);
        }
        !idle
    });
}

/// The store of `limit` in `domain`: a sliding log up to [`Config::MAX_LOG_LIMIT`](Config::MAX_LOG_LIMIT), `sliding_counter`
/// past it; a limit of 0 denies every request, as in envoy ratelimit.
fn make<B: Backend>(
    backend: &B,
    metrics: &Metrics,
    domain: &str,
    limit: LimitOverride,
    now: Moment,
) -> Result<RuleRt<B>, Refused> {
    // Its rule's name, `override.5_per_second`, is a valid rule name; its path, which its
    // counter keys hold, is `override:5_per_second`. A config's paths in a domain are all
    // `domain.…`, so none can be this path, which holds no `.`.
    let spelled = format!("{}_per_{}", limit.requests_per_unit, limit.unit.name());
    let (name, path) = (format!("override.{spelled}"), format!("override:{spelled}"));
    let action = if limit.requests_per_unit == 0 {
        ActionRt::Blocked { unit: limit.unit }
    } else {
        let store = |e: String| Refused::Store(e);
        let quota = Quota::new(u64::from(limit.requests_per_unit), limit.unit.span())
            .map_err(|e| store(e.to_string()))?;
        let kind = algorithm_for(None, quota).map_err(store)?;
        let rule = Rule::new(&name, kind, quota).map_err(|e| store(e.to_string()))?;
        let spec = RuleSet::from(rule);
        let made = backend
            .store(spec.clone())
            .map_err(|e| store(e.to_string()))?;
        let fields = RateLimitFields::new(&spec).map_err(|e| store(e.to_string()))?;
        ActionRt::Rules {
            spec,
            units: vec![Some(limit.unit)],
            store: Arc::new(made),
            fields,
        }
    };
    let limit_stats = Arc::new(LimitWindows::new(now, action.limit_names(&name)));
    Ok(RuleRt {
        domain: domain.to_owned(),
        metrics: metrics.lazy_rule(),
        shown: name.clone(),
        path,
        name: None,
        replaces: Vec::new(),
        shadow: false,
        quota_mode: false,
        after_response: false,
        action,
        limit_stats,
        stats: Arc::new(RuleWindow::new(now)),
        detail: None,
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use slidewin::limit::Kind;
    use slidewin_store::Memory;

    use super::*;
    use crate::config::Config;

    fn asked(requests_per_unit: u32, unit: Unit) -> LimitOverride {
        LimitOverride {
            requests_per_unit,
            unit,
        }
    }

    fn kind_of<B: Backend>(rule: &RuleRt<B>) -> Kind {
        match &rule.action {
            ActionRt::Rules { spec, .. } => spec.rules()[0].kind(),
            _ => unreachable!("a limit over 0 has rules"),
        }
    }

    #[test]
    fn a_limit_too_large_for_an_exact_log_gets_the_bounded_algorithm() {
        let first_counted = u32::try_from(Config::MAX_LOG_LIMIT + 1).unwrap();
        let overrides = Overrides::<Memory>::new();
        let (memory, metrics, bounds) = (Memory::new(), Metrics::new(), Bounds::default());
        let now = Moment::from_secs(1);
        let rule = |rpu| {
            overrides
                .rule(
                    &memory,
                    &metrics,
                    &bounds,
                    ("d", asked(rpu, Unit::Hour)),
                    now,
                )
                .unwrap()
        };
        assert_eq!(kind_of(&rule(first_counted - 1)), Kind::SlidingLog);
        assert_eq!(kind_of(&rule(first_counted)), Kind::SlidingCounter);
        assert_eq!(kind_of(&rule(u32::MAX)), Kind::SlidingCounter);
    }

    #[test]
    fn a_unit_past_the_operators_bound_is_refused_by_name() {
        let overrides = Overrides::<Memory>::new();
        let (memory, metrics) = (Memory::new(), Metrics::new());
        let bounds = Bounds::default();
        assert_eq!(bounds.max_override_unit, Unit::Day);
        let err = overrides
            .rule(
                &memory,
                &metrics,
                &bounds,
                ("d", asked(10, Unit::Year)),
                Moment::ZERO,
            )
            .err()
            .expect("refused");
        assert_eq!(
            err.to_string(),
            "override refused: its unit YEAR is longer than max_override_unit (DAY)"
        );
        assert_eq!(overrides.len(), 0, "nothing made");
        let longer = Bounds {
            max_override_unit: Unit::Year,
            ..bounds
        };
        let at = ("d", asked(10, Unit::Year));
        assert!(
            overrides
                .rule(&memory, &metrics, &longer, at, Moment::ZERO)
                .is_ok()
        );
    }

    /// Issue 29: after 256 distinct overrides, every request carrying a new one was refused
    /// until a restart. Stores with no live key make room; those with live keys, or in use, do
    /// not.
    #[tokio::test]
    async fn hostile_29_stores_with_no_live_keys_make_room() {
        use slidewin_store::Backend;
        let overrides = Overrides::<Memory>::new();
        let (memory, metrics, bounds) = (Memory::new(), Metrics::new(), Bounds::default());
        let start = Moment::from_secs(100);
        let limit_of = |i: usize| asked(u32::try_from(i).unwrap() + 1, Unit::Second);
        for i in 0..Bounds::MAX_OVERRIDES {
            let rule = overrides
                .rule(&memory, &metrics, &bounds, ("d", limit_of(i)), start)
                .unwrap();
            if let ActionRt::Rules { store, .. } = &rule.action {
                memory.check(store, "k".into(), start, 1).await.unwrap();
            }
        }
        let one_more = ("d", asked(100_000, Unit::Second));
        // Every store holds a key, live for a second: no room.
        let full = overrides.rule(&memory, &metrics, &bounds, one_more, start);
        assert_eq!(full.err(), Some(Refused::TableFull));
        // One in use by a request stays even when its keys are gone.
        let held = overrides
            .rule(&memory, &metrics, &bounds, ("d", limit_of(7)), start)
            .unwrap();
        let later = start + Duration::from_secs(2);
        assert!(
            overrides
                .rule(&memory, &metrics, &bounds, one_more, later)
                .is_ok()
        );
        assert_eq!(overrides.len(), 2, "the one in use and the new one");
        let again = overrides
            .rule(&memory, &metrics, &bounds, ("d", limit_of(7)), later)
            .unwrap();
        assert!(Arc::ptr_eq(&held, &again), "the store in use was kept");
        assert!(!metrics.encode().contains("override:2_per_second"));
    }
}
