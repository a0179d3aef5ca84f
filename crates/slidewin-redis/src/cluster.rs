//! Which node of a cluster serves which slot, so that the checks of one node's keys go to it
//! together: one script call, many slots in it (the keys undeclared, see `lua/check.lua`),
//! all nodes at once.
//!
//! The map is only a guess about where keys are: a node that no longer serves a key answers
//! "elsewhere" for that check without touching anything, and the check goes again alone,
//! routed by its key as every unbatched call is; the map is then read again. A stale map costs
//! round trips, never a wrong answer.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

use redis::Value;
use redis::cluster_async::ClusterConnection;

use crate::error::RedisError;

/// A cluster's hash slots.
const SLOTS: u16 = 16_384;

/// Where each slot is served, as far as this client knows.
pub(crate) struct Nodes {
    map: RwLock<Arc<SlotMap>>,
    /// The URLs the client was given (passwords hidden), for messages about a node not known.
    seeds: Arc<str>,
    /// Whether a refresh is on its way (one at a time).
    refreshing: AtomicBool,
}

/// Slot to node, and the nodes' addresses.
pub(crate) struct SlotMap {
    /// Slot to node (an index into `names`); empty while unknown, `u16::MAX` for a slot no
    /// node serves.
    slots: Box<[u16]>,
    /// Each node's `host:port`.
    names: Box<[Arc<str>]>,
}

impl Nodes {
    /// A map that knows nothing yet: each slot its own group until it is read. `seeds` names
    /// the cluster in messages until then.
    pub(crate) fn unknown(seeds: &str) -> Nodes {
        Nodes {
            map: RwLock::new(Arc::new(SlotMap {
                slots: Box::new([]),
                names: Box::new([]),
            })),
            seeds: Arc::from(seeds),
            refreshing: AtomicBool::new(false),
        }
    }

    /// The map as it is now.
    pub(crate) fn map(&self) -> Arc<SlotMap> {
        // Nothing panics while holding the lock; a poisoned map is still a good guess.
        Arc::clone(&self.map.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// The group of the checks of `key`: its node's, or its slot's while nodes are unknown.
    pub(crate) fn group(map: &SlotMap, key: &str) -> u32 {
        let slot = slot_of(key.as_bytes());
        match map.slots.get(usize::from(slot)) {
            Some(&node) if node != u16::MAX => u32::from(node),
            _ => u32::from(SLOTS) + u32::from(slot),
        }
    }

    /// The place of a group of checks (see [`Nodes::group`]), as [`Nodes::place`] names it.
    pub(crate) fn place_of_group(&self, group: u32) -> Arc<str> {
        let map = self.map();
        usize::try_from(group)
            .ok()
            .and_then(|node| map.names.get(node))
            .map_or_else(|| Arc::clone(&self.seeds), Arc::clone)
    }

    /// Where `key` is served, for messages and for the circuit of its node: the node's
    /// `host:port`, or the cluster's URLs while the node is not known.
    pub(crate) fn place(&self, key: &str) -> Arc<str> {
        let map = self.map();
        let slot = slot_of(key.as_bytes());
        match map.slots.get(usize::from(slot)) {
            Some(&node) => map
                .names
                .get(usize::from(node))
                .map_or_else(|| Arc::clone(&self.seeds), Arc::clone),
            None => Arc::clone(&self.seeds),
        }
    }

    /// Reads the map again (`CLUSTER SLOTS`).
    ///
    /// # Errors
    ///
    /// When the cluster cannot be asked, or answers something that is not a slot map; the
    /// old map stays.
    pub(crate) async fn refresh(
        &self,
        connection: &mut ClusterConnection,
    ) -> Result<(), RedisError> {
        let reply: Value = redis::cmd("CLUSTER")
            .arg("SLOTS")
            .query_async(connection)
            .await
            .map_err(|e| RedisError::from_redis(&e, self.seeds.to_string()))?;
        let map = parse_slots(&reply).ok_or_else(|| RedisError::Reply {
            at: self.seeds.to_string(),
            detail: format!("expected CLUSTER SLOTS' ranges, got {reply:?}"),
        })?;
        *self.map.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(map);
        Ok(())
    }

    /// Reads the map again in the background, unless a read is already on its way.
    pub(crate) fn refresh_soon(self: &Arc<Self>, mut connection: ClusterConnection) {
        if self.refreshing.swap(true, Ordering::AcqRel) {
            return;
        }
        let nodes = Arc::clone(self);
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            self.refreshing.store(false, Ordering::Release);
            return;
        };
        runtime.spawn(async move {
            // A failed read leaves the old map: the checks it misroutes still go alone.
            let _ = nodes.refresh(&mut connection).await;
            nodes.refreshing.store(false, Ordering::Release);
        });
    }
}

/// `CLUSTER SLOTS`' ranges as a slot-to-node map; `u16::MAX` for a slot no node serves.
fn parse_slots(reply: &Value) -> Option<SlotMap> {
    let Value::Array(ranges) = reply else {
        return None;
    };
    let mut map = vec![u16::MAX; usize::from(SLOTS)];
    let mut nodes: Vec<String> = Vec::new();
    for range in ranges {
        let Value::Array(range) = range else {
            return None;
        };
        let (Some(Value::Int(start)), Some(Value::Int(end)), Some(Value::Array(primary))) =
            (range.first(), range.get(1), range.get(2))
        else {
            return None;
        };
        // A node is its address and port (its id when given would do as well).
        let mut name = String::new();
        for (i, part) in primary.iter().take(2).enumerate() {
            if i > 0 {
                name.push(':');
            }
            match part {
                Value::BulkString(bytes) => name.push_str(&String::from_utf8_lossy(bytes)),
                Value::SimpleString(text) => name.push_str(text),
                Value::Int(port) => name.push_str(&port.to_string()),
                _ => return None,
            }
        }
        let node = match nodes.iter().position(|known| *known == name) {
            Some(found) => found,
            None => {
                nodes.push(name);
                nodes.len() - 1
            }
        };
        let node = u16::try_from(node).ok()?;
        let start = usize::try_from(*start).ok()?;
        let end = usize::try_from(*end).ok()?;
        map.get_mut(start..=end)?.fill(node);
    }
    Some(SlotMap {
        slots: map.into_boxed_slice(),
        names: nodes.into_iter().map(Arc::from).collect(),
    })
}

/// The hash slot of `key`, as Redis computes it: CRC16 of its hash tag (what is between the
/// first `{` and the next `}`, when not empty), else of the whole key.
pub(crate) fn slot_of(key: &[u8]) -> u16 {
    let tagged = key
        .iter()
        .position(|&b| b == b'{')
        .and_then(|open| {
            let rest = &key[open + 1..];
            rest.iter()
                .position(|&b| b == b'}')
                .map(|close| &rest[..close])
        })
        .filter(|tag| !tag.is_empty())
        .unwrap_or(key);
    crc16::State::<crc16::XMODEM>::calculate(tagged) % SLOTS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_redis_own() {
        // `CLUSTER KEYSLOT` of a Redis 7.0 server.
        assert_eq!(slot_of(b"a"), 15_495);
        assert_eq!(slot_of(b"b"), 3_300);
        assert_eq!(slot_of(b"{b}:x"), 3_300);
        assert_eq!(slot_of(b"x{b}y{a}"), 3_300);
        // An empty tag is no tag: the whole key counts.
        assert_eq!(slot_of(b"{}b"), 6_680);
        assert_eq!(slot_of(b"foo{}{bar}"), 8_363);
    }

    #[test]
    fn a_slot_map_is_read_from_its_ranges() {
        let node = |port: i64| {
            Value::Array(vec![
                Value::BulkString(b"127.0.0.1".to_vec()),
                Value::Int(port),
                Value::BulkString(b"id".to_vec()),
            ])
        };
        let reply = Value::Array(vec![
            Value::Array(vec![Value::Int(0), Value::Int(5460), node(7000)]),
            Value::Array(vec![Value::Int(5461), Value::Int(16_383), node(7001)]),
        ]);
        let map = parse_slots(&reply).expect("a map");
        let slots = &map.slots;
        assert_eq!(
            (slots[0], slots[5460], slots[5461], slots[16_383]),
            (0, 0, 1, 1)
        );
        assert_eq!(Nodes::group(&map, "b"), 0);
        assert_eq!(Nodes::group(&map, "a"), 1);
        // Unknown nodes: each slot is its own group, the cluster named by its URLs.
        let nodes = Nodes::unknown("redis://127.0.0.1:7000/");
        assert_eq!(Nodes::group(&nodes.map(), "b"), 16_384 + 3_300);
        assert_eq!(&*nodes.place("b"), "redis://127.0.0.1:7000/");
        *nodes.map.write().unwrap() = Arc::new(map);
        assert_eq!(&*nodes.place("b"), "127.0.0.1:7000");
        assert_eq!(&*nodes.place("a"), "127.0.0.1:7001");
        assert!(parse_slots(&Value::Int(3)).is_none());
        let past_the_end = Value::Array(vec![Value::Array(vec![
            Value::Int(0),
            Value::Int(16_384),
            node(7000),
        ])]);
        assert!(parse_slots(&past_the_end).is_none());
    }
}
