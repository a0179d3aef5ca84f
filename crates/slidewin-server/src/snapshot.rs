//! What the service shows of itself: the body of `GET /api/stats` and of each server-sent
//! event the dashboard draws.

use serde::Serialize;

/// The service at one moment: its config, its backend, and each rule's last minute.
///
/// ```
/// use slidewin_server::Snapshot;
/// let empty = Snapshot::default();
/// assert!(empty.rules.is_empty());
/// assert!(serde_json::to_string(&empty).unwrap().contains("\"rules\":[]"));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Snapshot {
    /// When it was taken: Unix time in milliseconds.
    pub now_ms: u64,
    /// The config in force.
    pub config: ConfigStatus,
    /// The store the counts are in.
    pub backend: BackendStatus,
    /// Each rule's last minute, in the config's order.
    pub rules: Vec<RuleStats>,
    /// The keys denied most in the last minute, most first (a few at most).
    pub top_denied: Vec<TopKey>,
}

/// The config in force and the last failed load.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ConfigStatus {
    /// Counts loads that took effect, from 1 (the first).
    pub version: u64,
    /// When the config in force was loaded (RFC 3339, UTC).
    pub loaded_at: String,
    /// The files it came from.
    pub files: Vec<String>,
    /// The last load that failed and left the config in force, until a load succeeds.
    pub last_error: Option<LoadError>,
    /// Loads that failed since the service started.
    pub errors_total: u64,
}

/// A failed load: when, and why (the file, line and column, and the bad value).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct LoadError {
    /// When it failed (RFC 3339, UTC).
    pub at: String,
    /// What was wrong.
    pub message: String,
}

/// The store and its health.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct BackendStatus {
    /// `memory`, `redis` or `redis-cluster`.
    pub kind: String,
    /// `up`, or for Redis `down` (the circuit is open) or `probing` (half-open).
    pub state: String,
    /// For Redis: `open` (admit) or `closed` (deny) while it is down.
    pub failure_policy: Option<String>,
    /// Checks the store failed since the service started.
    pub errors_total: u64,
}

/// One rule: what it allows, and what it did in each of the last 60 seconds.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct RuleStats {
    /// The domain it belongs to.
    pub domain: String,
    /// Its name: the config's `name`, or its descriptor path.
    pub name: String,
    /// Its quota, as `10 per 1s`.
    pub quota: String,
    /// `sliding_log`, `sliding_counter`, `fixed_window` or `gcra`.
    pub algorithm: String,
    /// Decides but never denies.
    pub shadow: bool,
    /// Keys it holds counts for now (memory; 0 on Redis, which keeps them).
    pub keys: u64,
    /// Requests per second over the last minute, oldest first, the current second last.
    pub per_second: PerSecond,
    /// The sums of `per_second`.
    pub last_minute: Totals,
}

/// Sixty one-second counts of each outcome, oldest first. The outcomes never overlap: a
/// request shadow mode let through over its limit is shadow-denied, not passed.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct PerSecond {
    /// Admitted.
    pub passed: Vec<u64>,
    /// Denied.
    pub denied: Vec<u64>,
    /// Would have been denied, in shadow mode.
    pub shadow_denied: Vec<u64>,
}

/// Counts of each outcome.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Totals {
    /// Admitted.
    pub passed: u64,
    /// Denied.
    pub denied: u64,
    /// Would have been denied, in shadow mode.
    pub shadow_denied: u64,
}

/// A key denied often in the last minute.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct TopKey {
    /// The domain of the rule that denied it.
    pub domain: String,
    /// The rule that denied it.
    pub rule: String,
    /// The descriptor's entries, as `key=value, key=value`.
    pub key: String,
    /// Denials in the last minute (a heavy-hitters estimate: never less than the truth).
    pub denied: u64,
}

/// Anything that can say what the service is doing now: the service itself, or a test's fake.
pub trait SnapshotSource: Send + Sync + 'static {
    /// The service now.
    fn snapshot(&self) -> Snapshot;
}
