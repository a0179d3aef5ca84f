//! [`BackendKind`] and [`BackendState`]: what a backend is, and whether it answers.

use std::fmt;

/// What a [`Backend`](crate::Backend) keeps its counts in. Its text (`memory`, `redis`,
/// `redis-cluster`) is the one name it has in the service's `--backend` flag, its status,
/// dashboard and logs.
///
/// ```
/// use slidewin_store::BackendKind;
/// assert_eq!(BackendKind::RedisCluster.to_string(), "redis-cluster");
/// assert_eq!(BackendKind::Memory.as_str(), "memory");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BackendKind {
    /// This process's memory.
    Memory,
    /// One Redis server.
    Redis,
    /// A Redis Cluster.
    RedisCluster,
}

impl BackendKind {
    /// Its name.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            BackendKind::Memory => "memory",
            BackendKind::Redis => "redis",
            BackendKind::RedisCluster => "redis-cluster",
        }
    }
}

impl fmt::Display for BackendKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Whether a [`Backend`](crate::Backend) answers now. Its text (`up`, `probing`, `down`) is
/// its one name in the service's status, metrics and logs.
///
/// ```
/// use slidewin_store::BackendState;
/// assert_eq!(BackendState::Probing.to_string(), "probing");
/// assert!(BackendState::Up.is_up() && !BackendState::Down.is_up());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BackendState {
    /// It answers: decisions are its own.
    Up,
    /// It did not answer, and one probe is out to see whether it answers again (a circuit
    /// half-open): checks are answered by the failure policy meanwhile.
    Probing,
    /// It does not answer (a circuit open): checks are answered by the failure policy, if one
    /// is set, or fail.
    Down,
}

impl BackendState {
    /// Its name.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            BackendState::Up => "up",
            BackendState::Probing => "probing",
            BackendState::Down => "down",
        }
    }

    /// Whether decisions are the backend's own.
    #[must_use]
    pub const fn is_up(self) -> bool {
        matches!(self, BackendState::Up)
    }
}

impl fmt::Display for BackendState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
