//! Redis Sentinel: the primary its sentinels name, connected to and multiplexed as one server
//! is, and asked for again after a failover. A connection that fails (refused, dropped, no
//! answer) or a primary that has become a replica (`READONLY`) is let go: the next command
//! asks the sentinels which server is the primary now.

use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager};
use redis::sentinel::{SentinelClient, SentinelNodeConnectionInfo, SentinelServerType};
use redis::{Cmd, ErrorKind, Pipeline, RedisResult, ServerErrorKind, Value};

use crate::error::{RedisError, quote, redact};

/// How long a command to the primary may go unanswered before the primary is let go: a
/// little less than the limiter's default timeout, so that a primary that went silent (a
/// partition) is asked for again before the next call.
const SILENT: Duration = Duration::from_millis(900);

/// The primary of one sentinel-watched service, and the sentinels that name it.
pub(crate) struct SentinelPrimary {
    sentinels: tokio::sync::Mutex<SentinelClient>,
    /// The primary's connection, and how many have been made (so that one failure lets go
    /// of the connection it failed on, never of a newer one).
    current: RwLock<Option<(ConnectionManager, u64)>>,
    /// `sentinel master NAME at [seeds]`, for messages.
    pub(crate) shown: Arc<str>,
}

impl SentinelPrimary {
    /// The service `master` as `sentinels` (URLs) name it; `auth` (`password` or
    /// `user:password`) for the primary itself. Nothing is connected yet.
    pub(crate) fn new(
        master: &str,
        sentinels: &[&str],
        auth: Option<&str>,
    ) -> Result<SentinelPrimary, RedisError> {
        let shown = shown(master, sentinels)?;
        let node =
            SentinelNodeConnectionInfo::default().set_redis_connection_info(primary_auth(auth));
        // Owned: without redis-rs's TLS (our `tls` feature) the name must be a `String`.
        #[allow(clippy::unnecessary_to_owned)]
        let client = SentinelClient::build(
            sentinels.to_vec(),
            master.to_owned(),
            Some(node),
            SentinelServerType::Master,
        )
        .map_err(|e| RedisError::Config {
            detail: format!("{shown}: {e}"),
        })?;
        Ok(SentinelPrimary::with_client(client, shown))
    }

    /// The primary that `client` asks its sentinels for, `shown` in messages.
    pub(crate) fn with_client(client: SentinelClient, shown: String) -> SentinelPrimary {
        SentinelPrimary {
            sentinels: tokio::sync::Mutex::new(client),
            current: RwLock::new(None),
            shown: Arc::from(shown),
        }
    }

    /// The connection in use, if any.
    fn in_use(&self) -> Option<(ConnectionManager, u64)> {
        self.current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The primary's connection: the one in use, or one to the server the sentinels name now.
    async fn primary(&self) -> RedisResult<(ConnectionManager, u64)> {
        if let Some(current) = self.in_use() {
            return Ok(current);
        }
        // One asks the sentinels at a time; the others then find its answer.
        let mut sentinels = self.sentinels.lock().await;
        if let Some(current) = self.in_use() {
            return Ok(current);
        }
        let client = sentinels.async_get_client().await?;
        let manager =
            ConnectionManager::new_lazy_with_config(client, crate::connect::manager_config())?;
        let mut current = self.current.write().unwrap_or_else(PoisonError::into_inner);
        let made = current.as_ref().map_or(0, |(_, made)| made + 1);
        *current = Some((manager.clone(), made));
        Ok((manager, made))
    }

    /// Lets go of connection `made`, so that the next command asks the sentinels again.
    fn forget(&self, made: u64) {
        let mut current = self.current.write().unwrap_or_else(PoisonError::into_inner);
        if current.as_ref().is_some_and(|(_, now)| *now == made) {
            *current = None;
        }
    }

    pub(crate) async fn command(&self, cmd: &Cmd) -> RedisResult<Value> {
        let (mut manager, made) = self.primary().await?;
        let answer = silent_after(manager.req_packed_command(cmd)).await;
        if answer.as_ref().is_err_and(moved) {
            self.forget(made);
        }
        answer
    }

    pub(crate) async fn commands(
        &self,
        pipeline: &Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisResult<Vec<Value>> {
        let (mut manager, made) = self.primary().await?;
        let answer = silent_after(manager.req_packed_commands(pipeline, offset, count)).await;
        let replica = |values: &Vec<Value>| {
            values.iter().any(
                |v| matches!(v, Value::ServerError(e) if e.kind() == Some(ServerErrorKind::ReadOnly)),
            )
        };
        if answer.as_ref().is_err_and(moved) || answer.as_ref().is_ok_and(replica) {
            self.forget(made);
        }
        answer
    }
}

/// `sentinel master NAME at [seeds]` (passwords hidden), for messages; an error without a
/// master name or a sentinel.
pub(crate) fn shown(master: &str, sentinels: &[&str]) -> Result<String, RedisError> {
    let seeds = sentinels
        .iter()
        .map(|url| redact(url))
        .collect::<Vec<_>>()
        .join(", ");
    let shown = quote(&format!("sentinel master {master} at [{seeds}]"));
    if sentinels.is_empty() || master.is_empty() {
        return Err(RedisError::Config {
            detail: format!("{shown}: Sentinel needs a master name and a sentinel"),
        });
    }
    Ok(shown)
}

/// The primary's own credentials, as the user (if any) and the password of `password` or
/// `user:password`.
pub(crate) fn credentials(auth: Option<&str>) -> Option<(Option<&str>, &str)> {
    let auth = auth?;
    let (user, password) = auth.split_once(':').unwrap_or(("", auth));
    Some(((!user.is_empty()).then_some(user), password))
}

/// The primary's own credentials: `password` or `user:password`.
fn primary_auth(auth: Option<&str>) -> redis::RedisConnectionInfo {
    let info = redis::RedisConnectionInfo::default();
    match credentials(auth) {
        Some((None, password)) => info.set_password(password),
        Some((Some(user), password)) => info.set_username(user).set_password(password),
        None => info,
    }
}

/// `attempt`, or a timeout error after [`SILENT`].
async fn silent_after<T>(attempt: impl Future<Output = RedisResult<T>>) -> RedisResult<T> {
    tokio::time::timeout(SILENT, attempt)
        .await
        .unwrap_or_else(|_| {
            Err(redis::RedisError::from(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the primary did not answer",
            )))
        })
}

/// Whether `err` says the primary is no longer there: the connection failed, or the server is
/// a replica now.
fn moved(err: &redis::RedisError) -> bool {
    err.is_io_error()
        || err.is_connection_dropped()
        || err.is_connection_refusal()
        || err.is_timeout()
        || err.kind() == ErrorKind::Server(ServerErrorKind::ReadOnly)
        || err.to_string().contains("READONLY")
}
