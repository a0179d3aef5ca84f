//! The keys denied most in the last minute, in bounded memory: a Space-Saving sketch (Metwally,
//! Agrawal and El Abbadi) per ten seconds, six of them, summed when read.

use std::sync::Mutex;

use slidewin::Moment;

use crate::engine::request::Entry;
use crate::snapshot::TopKey;

/// Counters per sketch: the sketch keeps the `CAPACITY` heaviest keys, each count never less
/// than the truth and at most the smallest count more.
const CAPACITY: usize = 32;
const SLOT_NANOS: u64 = 10_000_000_000;
const SLOTS: usize = 6;
/// The longest key text kept, in bytes.
const MAX_KEY: usize = 200;

pub(crate) struct TopKeys {
    slots: Mutex<[Slot; SLOTS]>,
}

#[derive(Default)]
struct Slot {
    epoch: u64,
    counts: Vec<(Counted, u64)>,
}

#[derive(Clone, PartialEq, Eq)]
struct Counted {
    domain: String,
    rule: String,
    limit: String,
    key: String,
}

/// What denied a key: a limit of a rule of a domain.
pub(crate) struct Denier<'a> {
    pub(crate) domain: &'a str,
    pub(crate) rule: &'a str,
    /// The limit's name: the rule's own when it has one limit.
    pub(crate) limit: &'a str,
}

impl TopKeys {
    pub(crate) fn new() -> TopKeys {
        TopKeys {
            slots: Mutex::new(Default::default()),
        }
    }

    /// Counts a denial of the key `entries` spell, by `denier`, at `now`.
    pub(crate) fn deny(&self, now: Moment, denier: &Denier<'_>, entries: &[Entry]) {
        let epoch = now.as_nanos() / SLOT_NANOS;
        let mut key = String::new();
        for (i, entry) in entries.iter().enumerate() {
            if i > 0 {
                key.push_str(", ");
            }
            key.push_str(&entry.key);
            key.push('=');
            key.push_str(&entry.value);
        }
        if key.len() > MAX_KEY {
            let mut end = MAX_KEY;
            while !key.is_char_boundary(end) {
                end -= 1;
            }
            key.truncate(end);
            key.push('…');
        }
        let counted = Counted {
            domain: denier.domain.to_owned(),
            rule: denier.rule.to_owned(),
            limit: denier.limit.to_owned(),
            key,
        };
        let mut slots = self
            .slots
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let slot = &mut slots[usize::try_from(epoch % SLOTS as u64).unwrap_or(0)];
        if slot.epoch != epoch {
            slot.epoch = epoch;
            slot.counts.clear();
        }
        if let Some(held) = slot.counts.iter_mut().find(|(c, _)| *c == counted) {
            held.1 += 1;
        } else if slot.counts.len() < CAPACITY {
            slot.counts.push((counted, 1));
        } else if let Some(least) = slot.counts.iter_mut().min_by_key(|(_, n)| *n) {
            // Space-Saving: the newcomer takes the least counted place, and its count.
            *least = (counted, least.1 + 1);
        }
    }

    pub(crate) fn top(&self, now: Moment, n: usize) -> Vec<TopKey> {
        let epoch = now.as_nanos() / SLOT_NANOS;
        let slots = self
            .slots
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut sums: Vec<(Counted, u64)> = Vec::new();
        for slot in slots.iter() {
            if epoch.saturating_sub(slot.epoch) >= SLOTS as u64 || slot.epoch > epoch {
                continue;
            }
            for (counted, count) in &slot.counts {
                match sums.iter_mut().find(|(c, _)| c == counted) {
                    Some(sum) => sum.1 += count,
                    None => sums.push((counted.clone(), *count)),
                }
            }
        }
        sums.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.key.cmp(&b.0.key)));
        sums.truncate(n);
        sums.into_iter()
            .map(|(c, denied)| TopKey {
                domain: c.domain,
                rule: c.rule,
                limit: c.limit,
                key: c.key,
                denied,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deny(top: &TopKeys, secs: u64, key: &str) {
        let denier = Denier {
            domain: "d",
            rule: "r",
            limit: "l",
        };
        top.deny(Moment::from_secs(secs), &denier, &[Entry::new("k", key)]);
    }

    #[test]
    fn heavy_keys_rise_and_old_slots_leave() {
        let top = TopKeys::new();
        for _ in 0..5 {
            deny(&top, 100, "heavy");
        }
        for i in 0..100 {
            deny(&top, 101, &format!("light{i}"));
        }
        let now = top.top(Moment::from_secs(105), 3);
        assert_eq!(now[0].key, "k=heavy");
        assert!(now[0].denied >= 5);
        assert!(top.top(Moment::from_secs(100 + 70), 3).is_empty());
    }

    #[test]
    fn memory_is_bounded_by_the_capacity() {
        let top = TopKeys::new();
        for i in 0..10_000 {
            deny(&top, 7, &format!("key{i}"));
        }
        let slots = top.slots.lock().unwrap();
        assert!(slots.iter().all(|s| s.counts.len() <= CAPACITY));
    }
}
