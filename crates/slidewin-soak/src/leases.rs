//! The leases' load (issue 33): clients that take a unit of a concurrency limit, work, and give
//! it back with envoy's `is_negative_hits`, or die holding it, each exchange recorded
//! ([`LeaseRecord`]). Their promise is checked in `lease_check`.
//!
//! Each client loops on one of [`LEASE_KEYS`] keys: it acquires (a plain check), works for a
//! few milliseconds when admitted, then releases, except that
//! - one acquisition in [`DIE_PERCENT`] is never released: its holder died (a proxy killed
//!   mid-request), and its unit must leave by itself one lease after it was taken;
//! - one in [`RETRY_PERCENT`] is sent twice, as a proxy retries a call whose answer it lost:
//!   the client believes the second answer, so a unit the first took leaks to its expiry;
//! - one release in [`LATE_PERCENT`] comes after the lease ended, so it gives back a newer unit
//!   than its own (the documented rule: the oldest held goes), and one in [`RETRY_PERCENT`] is
//!   sent twice (a retried release gives back one unit more).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use tonic::transport::Channel;

use crate::SECOND;
use crate::client::{
    Decision, Http, Record, Rng, Via, grpc_check, grpc_connect, http_call, http_client, nanos,
};

/// The rule: descriptor key, units in flight, lease in seconds. The lease is short so that
/// the dead clients' units expire many times within a run.
pub(crate) const LEASE: (&str, usize, u64) = ("lease", 3, 2);
/// Few keys and more clients than units, so that keys are often full.
pub(crate) const LEASE_KEYS: u32 = 2;
/// Half by gRPC, half by HTTP `/json`.
pub(crate) const LEASE_CLIENTS: usize = 12;
pub(crate) const DIE_PERCENT: u64 = 20;
pub(crate) const RETRY_PERCENT: u64 = 10;
pub(crate) const LATE_PERCENT: u64 = 10;

/// Whether an exchange took a unit or gave one back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Acquire,
    Release,
}

/// One exchange of a lease client, as it saw it.
#[derive(Clone, Debug)]
pub(crate) struct LeaseRecord {
    pub(crate) send: u64,
    pub(crate) answer: u64,
    /// The key's index, `0..LEASE_KEYS`.
    pub(crate) key: u32,
    pub(crate) kind: Kind,
    pub(crate) decision: Decision,
    pub(crate) degraded: bool,
    /// An admitted acquisition whose client then died (figures only: the check does not trust
    /// the clients' intentions, only the exchanges).
    pub(crate) dead: bool,
    /// A release sent after its own unit's lease ended (figures only).
    pub(crate) late: bool,
    /// The second of a retried pair (figures only).
    pub(crate) retry: bool,
}

impl LeaseRecord {
    /// As the soak's other rows see a check: keyed apart from every other rule's keys (the
    /// failure policy row tells keys apart), and `Via::Lease` keeps it out of the windows.
    pub(crate) fn as_record(&self) -> Record {
        Record {
            send: self.send,
            answer: self.answer,
            key: u32::MAX - 1 - self.key,
            via: Via::Lease,
            decision: self.decision.clone(),
            degraded: self.degraded,
        }
    }
}

/// A client's connection: a gRPC stream or an HTTP client of `/json`.
enum Conn {
    Grpc(RateLimitServiceClient<Channel>),
    Http(Http, String),
}

impl Conn {
    /// One check of `key`; a release when `release` (`is_negative_hits`, one unit).
    async fn call(&mut self, key: u32, release: bool) -> (Decision, bool) {
        let value = format!("l{key}");
        match self {
            Conn::Grpc(client) => {
                let request = RateLimitRequest {
                    domain: "soak".to_owned(),
                    descriptors: vec![RateLimitDescriptor {
                        entries: vec![Entry {
                            key: LEASE.0.to_owned(),
                            value,
                        }],
                        is_negative_hits: release,
                        ..Default::default()
                    }],
                    hits_addend: 0,
                };
                grpc_check(client, request).await
            }
            Conn::Http(client, url) => {
                let body = serde_json::json!({
                    "domain": "soak",
                    "descriptors": [{
                        "entries": [{"key": LEASE.0, "value": value}],
                        "is_negative_hits": release,
                    }],
                })
                .to_string();
                match http_call(client, hyper::Method::POST, url, body).await {
                    Ok((200, degraded, _)) => (Decision::Ok, degraded),
                    Ok((429, degraded, _)) => (Decision::Over, degraded),
                    Ok((status, degraded, body)) => (
                        Decision::Error(format!("http {status}"), body.chars().take(160).collect()),
                        degraded,
                    ),
                    Err(e) if e == "timeout" => (Decision::Timeout, false),
                    Err(e) => (Decision::Error("http transport".to_owned(), e), false),
                }
            }
        }
    }
}

/// One lease client, by gRPC when `grpc` is `Some`, else by HTTP at `http`.
pub(crate) async fn lease_client(
    grpc: Option<String>,
    http: String,
    base: Instant,
    stop: Arc<AtomicBool>,
    seed: u64,
) -> Vec<LeaseRecord> {
    let mut conn = match grpc {
        Some(grpc) => match grpc_connect(&grpc) {
            Some(client) => Conn::Grpc(client),
            None => return Vec::new(),
        },
        None => Conn::Http(http_client(), format!("http://{http}/json")),
    };
    let mut client = Client {
        conn: &mut conn,
        base,
        rng: Rng(seed | 1),
        records: Vec::new(),
    };
    while !stop.load(Ordering::Relaxed) {
        client.one_request().await;
    }
    client.records
}

struct Client<'a> {
    conn: &'a mut Conn,
    base: Instant,
    rng: Rng,
    records: Vec<LeaseRecord>,
}

impl Client<'_> {
    async fn exchange(&mut self, key: u32, kind: Kind) -> Decision {
        let send = nanos(self.base);
        let (decision, degraded) = self.conn.call(key, kind == Kind::Release).await;
        self.records.push(LeaseRecord {
            send,
            answer: nanos(self.base),
            key,
            kind,
            decision: decision.clone(),
            degraded,
            dead: false,
            late: false,
            retry: false,
        });
        decision
    }

    fn last(&mut self) -> Option<&mut LeaseRecord> {
        self.records.last_mut()
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.rng.below(100) < percent
    }

    async fn pause(&mut self, least_ms: u64, most_ms: u64) {
        let ms = least_ms + self.rng.below(most_ms - least_ms + 1);
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }

    /// One request's life: acquire (perhaps twice), work, then release (perhaps late or twice)
    /// or die.
    async fn one_request(&mut self) {
        let key = u32::try_from(self.rng.below(u64::from(LEASE_KEYS))).unwrap_or(0);
        let mut decision = self.exchange(key, Kind::Acquire).await;
        if self.chance(RETRY_PERCENT) {
            // The first answer is lost to the client; what the first took, it never gives back.
            decision = self.exchange(key, Kind::Acquire).await;
            if let Some(record) = self.last() {
                record.retry = true;
            }
        }
        match decision {
            Decision::Ok => {}
            Decision::Over => return self.pause(5, 50).await,
            // A refused connection answers at once: the client must not spin on it.
            _ => return self.pause(5, 5).await,
        }
        self.pause(5, 150).await;
        if self.chance(DIE_PERCENT) {
            if let Some(record) = self.last() {
                record.dead = true;
            }
            return;
        }
        let late = self.chance(LATE_PERCENT);
        if late {
            let lease_ms = LEASE.2 * SECOND / 1_000_000;
            self.pause(lease_ms, lease_ms + 500).await;
        }
        self.exchange(key, Kind::Release).await;
        if let Some(record) = self.last() {
            record.late = late;
        }
        if self.chance(RETRY_PERCENT) {
            self.exchange(key, Kind::Release).await;
            if let Some(record) = self.last() {
                record.retry = true;
            }
        }
    }
}
