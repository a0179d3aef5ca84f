//! What the service's load benches share: settings from the environment, a runtime, a gRPC
//! connection, and nearest-rank quantiles and medians.

use std::net::SocketAddr;

use tokio::runtime::Runtime;
use tonic::transport::{Channel, Endpoint};

/// The value of the environment variable `name`, if it is set; a value that does not parse
/// stops the bench, naming it.
pub(crate) fn env<T: std::str::FromStr>(name: &str) -> Option<T> {
    let value = std::env::var(name).ok()?;
    Some(
        value
            .parse()
            .unwrap_or_else(|_| panic!("{name}={value}: not a valid value")),
    )
}

/// A multi-threaded runtime of `threads` workers named `name`.
pub(crate) fn runtime(threads: usize, name: &str) -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads.max(1))
        .thread_name(name)
        .enable_all()
        .build()
        .unwrap()
}

/// A gRPC connection of its own to `addr`.
pub(crate) async fn connect(addr: SocketAddr) -> Channel {
    Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .tcp_nodelay(true)
        .connect()
        .await
        .unwrap()
}

/// The `p`th quantile of `sorted`, nearest rank; NaN for none.
pub(crate) fn quantile(sorted: &[u32], p: f64) -> f64 {
    let n = sorted.len();
    if n == 0 {
        return f64::NAN;
    }
    #[allow(
        clippy::cast_precision_loss,
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss
    )]
    let rank = ((p * n as f64).ceil() as usize).clamp(1, n);
    f64::from(sorted[rank - 1])
}

/// The median of `values` (the upper one of an even count).
pub(crate) fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}
