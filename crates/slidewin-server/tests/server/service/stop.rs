//! The stop: the checks in flight finish, new connections are refused.

use super::*;

/// A backend whose checks wait for a gate: a check in flight, for as long as the test wants.
struct Gated {
    memory: Memory,
    gate: Arc<tokio::sync::Semaphore>,
    entered: Arc<tokio::sync::Notify>,
}

impl Backend for Gated {
    type Store = <Memory as Backend>::Store;

    fn store(&self, rules: slidewin::limit::RuleSet) -> Result<Self::Store, slidewin::ConfigError> {
        self.memory.store(rules)
    }

    async fn check(
        &self,
        store: &Self::Store,
        key: slidewin_store::RequestKey<'_>,
        now: Moment,
        cost: u64,
    ) -> Result<slidewin_store::Checked, slidewin_store::BackendError> {
        self.entered.notify_one();
        let _permit = self.gate.acquire().await.expect("the gate stays open");
        self.memory.check(store, key, now, cost).await
    }

    async fn peek(
        &self,
        store: &Self::Store,
        key: slidewin_store::RequestKey<'_>,
        now: Moment,
        cost: u64,
    ) -> Result<slidewin_store::Checked, slidewin_store::BackendError> {
        self.memory.peek(store, key, now, cost).await
    }

    fn kind(&self) -> BackendKind {
        BackendKind::Memory
    }

    fn keys(&self, store: &Self::Store) -> Option<u64> {
        self.memory.keys(store)
    }

    fn carry(&self, to: &Self::Store, from: &Self::Store, now: Moment) -> usize {
        self.memory.carry(to, from, now)
    }
}

#[tokio::test]
async fn a_stop_finishes_the_checks_in_flight_and_refuses_new_connections() {
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let entered = Arc::new(tokio::sync::Notify::new());
    let backend = Gated {
        memory: Memory::new(),
        gate: gate.clone(),
        entered: entered.clone(),
    };
    let mut running = start(backend, CONFIG, true).await;
    let grpc = running.grpc;
    let in_flight = tokio::spawn(async move {
        let mut client = RateLimitServiceClient::connect(format!("http://{grpc}"))
            .await
            .unwrap();
        client
            .should_rate_limit(PbRequest {
                domain: "api".into(),
                descriptors: vec![RateLimitDescriptor {
                    entries: vec![PbEntry {
                        key: "client".into(),
                        value: "ann".into(),
                    }],
                    ..Default::default()
                }],
                hits_addend: 0,
            })
            .await
    });
    entered.notified().await;
    running.served.signal_stop();
    // The listeners close: a new connection is refused (bounded wait for the stop to land).
    let refused = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            if tokio::net::TcpStream::connect(running.http).await.is_err() {
                break;
            }
            tokio::task::yield_now().await;
        }
    })
    .await;
    assert!(refused.is_ok(), "the HTTP listener closed");
    assert!(!running.served.is_finished(), "a check is still in flight");
    gate.add_permits(1);
    let answer = in_flight
        .await
        .unwrap()
        .expect("the check in flight is answered");
    assert_eq!(answer.into_inner().overall_code, PbCode::Ok as i32);
    running.served.stop().await;
}
