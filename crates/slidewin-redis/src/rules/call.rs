//! The script call: each request's checks ([`Call`]) under the rules of a [`Rules`], and one
//! `EVALSHA` carrying a batch of them, its arguments as `lua/check.lua` reads them.

use super::{Rules, SCRIPT};

/// One request, as the script takes it: `cost` for one key under every rule of some [`Rules`].
#[derive(Clone, Debug)]
pub(crate) struct Call {
    /// A rule alone: its Redis key. Several: the hash tag `{prefix:key}` their keys start with.
    pub(super) key: String,
    /// The length of the hash tag at the start of `key`.
    pub(super) tag_len: usize,
    pub(super) what: What,
    /// Every rule's numbers with its calendar window dated, for several rules one of which is
    /// a calendar rule (one rule's are in `what`).
    pub(super) dated: Option<Box<[[u64; 5]]>>,
    /// The client's time that dated the calendar windows of a check at the server's time.
    pub(super) dated_by: Option<u64>,
    /// In microseconds; the server's time when `None`.
    pub(super) now: Option<u64>,
    pub(crate) cost: u64,
    pub(super) commit: bool,
    /// A release of `cost` units (leases give them back), rather than a check.
    pub(super) release: bool,
}

#[derive(Clone, Debug)]
pub(super) enum What {
    /// One rule, the common case: its numbers and its decision's limit, copied, so that a
    /// check touches no count shared with other threads.
    One { params: [u64; 5], limit: u64 },
    /// Several rules.
    Many(Rules),
}

impl Call {
    /// `cost` for `key` under `prefix` and `rules`, at `now` (microseconds of Unix time; the
    /// server's when `None`), consuming when `commit`.
    pub(crate) fn new(
        rules: &Rules,
        prefix: &str,
        key: &str,
        now: Option<u64>,
        cost: u64,
        commit: bool,
    ) -> Call {
        let tag_len = prefix.len() + key.len() + 3;
        let (key, what) = match &*rules.inner.each {
            [one] => {
                let mut redis_key = String::with_capacity(tag_len + one.suffix.len());
                push_tag(&mut redis_key, prefix, key);
                redis_key.push_str(&one.suffix);
                let what = What::One {
                    params: one.params,
                    limit: one.limit,
                };
                (redis_key, what)
            }
            _ => {
                let mut tag = String::with_capacity(tag_len);
                push_tag(&mut tag, prefix, key);
                (tag, What::Many(rules.clone()))
            }
        };
        let mut call = Call {
            key,
            tag_len,
            what,
            dated: None,
            dated_by: None,
            now,
            cost,
            commit,
            release: false,
        };
        call.date_windows(rules);
        call
    }

    /// The same call as a release of its cost: each [`Kind::Leases`] rule, and each sliding
    /// log that refunds, gives back up to that many units it holds, the other rates nothing.
    pub(crate) fn releasing(mut self) -> Call {
        self.release = true;
        self
    }

    /// The cost as the script takes it: negative for a release (of at most 2^53 units, what
    /// Lua counts exactly: no log holds more).
    fn signed_cost(&self) -> i64 {
        let cost = i64::try_from(self.cost.min(1 << 53)).unwrap_or(i64::MAX);
        if self.release { -cost } else { cost }
    }

    /// `{prefix:key}`: what places it on a cluster, and orders a batch.
    pub(crate) fn tag(&self) -> &str {
        &self.key[..self.tag_len]
    }

    /// How many rules, each a check in the script.
    pub(crate) fn len(&self) -> usize {
        match &self.what {
            What::One { .. } => 1,
            What::Many(rules) => rules.len(),
        }
    }

    /// Rule `index`'s decision limit.
    pub(crate) fn limit(&self, index: usize) -> u64 {
        match &self.what {
            What::One { limit, .. } => *limit,
            What::Many(rules) => rules.limit(index),
        }
    }

    /// Rule `index`'s numbers.
    pub(super) fn params(&self, index: usize) -> &[u64; 5] {
        if let Some(dated) = &self.dated {
            return &dated[index];
        }
        match &self.what {
            What::One { params, .. } => params,
            What::Many(rules) => &rules.inner.each[index].params,
        }
    }

    /// Adds rule `index`'s Redis key to `cmd`.
    fn key_arg(&self, index: usize, cmd: &mut redis::Cmd, buffer: &mut String) {
        match &self.what {
            What::One { .. } => cmd.arg(&self.key),
            What::Many(rules) => {
                buffer.clear();
                buffer.push_str(&self.key);
                buffer.push_str(&rules.inner.each[index].suffix);
                cmd.arg(buffer.as_str())
            }
        };
    }
}

/// How a script call names its keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Keys {
    /// As `KEYS`, as Redis asks of scripts: all of one slot on a cluster.
    Declared,
    /// In `ARGV`, for a call carrying the checks of one cluster node, whose keys are of many
    /// slots; a check whose key is not on that node comes back as not answered.
    Undeclared,
}

/// One `EVALSHA` running `calls` in order, each a check per rule (see `lua/check.lua` for the
/// arguments). Built with as few allocations as it takes: the client's work shares the
/// machine with Redis's.
pub(crate) fn script_call(calls: &[&Call], keys: Keys) -> redis::Cmd {
    let mut cmd = redis::cmd("EVALSHA");
    cmd.arg(SCRIPT.get_hash());
    let checks: usize = calls.iter().map(|c| c.len()).sum();
    match keys {
        Keys::Declared => cmd.arg(checks),
        Keys::Undeclared => cmd.arg(0).arg(checks),
    };
    let mut buffer = String::new();
    for call in calls {
        for index in 0..call.len() {
            call.key_arg(index, &mut cmd, &mut buffer);
        }
    }
    let (rules, each) = rule_indices(calls, checks);
    let timed = calls.iter().any(|c| c.now.is_some());
    let shared = match each.split_first() {
        Some((first, rest)) if rest.iter().all(|check| check == first) => Some(*first),
        _ => None,
    };
    cmd.arg(match (shared.is_some(), timed) {
        (true, false) => 0,
        (true, true) => 1,
        (false, false) => 2,
        (false, true) => 3,
    });
    if let Some((cost, index)) = shared {
        cmd.arg(cost).arg(index);
    }
    let mut each = each.into_iter();
    for call in calls {
        for _ in 0..call.len() {
            let (cost, index) = each.next().unwrap_or_default();
            if shared.is_none() {
                cmd.arg(cost).arg(index);
            }
            if timed {
                match call.now {
                    Some(micros) => cmd.arg(micros),
                    None => cmd.arg(""),
                };
            }
        }
    }
    push_groups(&mut cmd, calls);
    cmd.arg(5);
    for rule in rules {
        for param in rule {
            cmd.arg(*param);
        }
    }
    cmd
}

/// The distinct rules of `calls` (`checks` checks in all), in order of first use, and each
/// check's cost and rule: the rule's place among them from 1, negative for a peek. A batch
/// has few rules: a linear search is cheapest.
fn rule_indices<'a>(calls: &[&'a Call], checks: usize) -> (Vec<&'a [u64; 5]>, Vec<(i64, i64)>) {
    let mut rules: Vec<&[u64; 5]> = Vec::new();
    let mut each: Vec<(i64, i64)> = Vec::with_capacity(checks);
    for call in calls {
        for index in 0..call.len() {
            let params = call.params(index);
            let index = match rules.iter().position(|r| *r == params) {
                Some(found) => found + 1,
                None => {
                    rules.push(params);
                    rules.len()
                }
            };
            // At most a batch's length: far below i64::MAX.
            let index = i64::try_from(index).unwrap_or(i64::MAX);
            each.push((call.signed_cost(), if call.commit { index } else { -index }));
        }
    }
    (rules, each)
}

/// The groups: none when every call has one rule, else each check's group size (0 after the
/// first of its group). A release's rules are each alone: nothing is all or nothing there.
fn push_groups(cmd: &mut redis::Cmd, calls: &[&Call]) {
    if calls.iter().all(|c| c.len() == 1) {
        cmd.arg(0);
    } else {
        cmd.arg(1);
        for call in calls {
            if call.release {
                for _ in 0..call.len() {
                    cmd.arg(1);
                }
                continue;
            }
            cmd.arg(call.len());
            for _ in 1..call.len() {
                cmd.arg(0);
            }
        }
    }
}

/// Writes `{prefix:key}`.
fn push_tag(into: &mut String, prefix: &str, key: &str) {
    into.push('{');
    into.push_str(prefix);
    into.push(':');
    into.push_str(key);
    into.push('}');
}

/// `{prefix:key}`.
pub(crate) fn tag_of(prefix: &str, key: &str) -> String {
    let mut tag = String::with_capacity(prefix.len() + key.len() + 3);
    push_tag(&mut tag, prefix, key);
    tag
}
