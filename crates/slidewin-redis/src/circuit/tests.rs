//! The circuits under failures, probes and recoveries, on tokio's paused clock.

use super::*;
use tokio::sync::mpsc;

const URL: &str = "redis://127.0.0.1:6379/";
const KEY: &str = "{p:k}:gcra";

fn refused() -> RedisError {
    RedisError::Unavailable {
        at: URL.to_string(),
        detail: "Connection refused (os error 111)".to_string(),
    }
}

/// A fake Redis for the probes: each probe is noted (when it went, its key and timeout)
/// and answered with the next outcome the test sends, waiting for it.
struct Fake {
    probes: Arc<Mutex<Vec<(Instant, String, Duration)>>>,
    outcomes: mpsc::UnboundedSender<Result<(), RedisError>>,
}

impl Fake {
    fn times(&self) -> Vec<Instant> {
        let probes = self.probes.lock().unwrap();
        for (_, key, timeout) in probes.iter() {
            assert_eq!((key.as_str(), *timeout), (KEY, Duration::from_secs(1)));
        }
        probes.iter().map(|(at, ..)| *at).collect()
    }

    fn answer(&self, outcome: Result<(), RedisError>) {
        self.outcomes.send(outcome).unwrap();
    }
}

fn circuits(first: Duration, longest: Duration) -> (Arc<Circuits>, Fake) {
    let probes = Arc::new(Mutex::new(Vec::new()));
    let (outcomes, answers) = mpsc::unbounded_channel();
    let answers = Arc::new(tokio::sync::Mutex::new(answers));
    let noted = Arc::clone(&probes);
    let probe: Box<ProbeFn> = Box::new(move |key, timeout| {
        noted.lock().unwrap().push((Instant::now(), key, timeout));
        let answers = Arc::clone(&answers);
        Box::pin(async move { answers.lock().await.recv().await.unwrap_or(Ok(())) })
    });
    (
        Circuits::new(first, longest, probe),
        Fake { probes, outcomes },
    )
}

fn fail(circuits: &Arc<Circuits>, err: &RedisError) {
    circuits.failed(err, || KEY.to_string(), Duration::from_secs(1));
}

fn gate(circuits: &Circuits) -> Result<(), RedisError> {
    circuits.gate(|| Arc::from(URL))
}

/// Lets the probe task run as far as it can without time passing.
async fn settle() {
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
}

#[tokio::test(start_paused = true)]
async fn the_first_failure_opens_it_and_a_reply_error_does_not() {
    let (circuits, fake) = circuits(FIRST_WAIT, LONGEST_WAIT);
    let bad_script = RedisError::Reply {
        at: URL.to_string(),
        detail: "ERR bad script".to_string(),
    };
    fail(&circuits, &bad_script);
    assert_eq!(gate(&circuits), Ok(()));
    assert_eq!(circuits.state(), CircuitState::Closed);
    fail(&circuits, &refused());
    assert_eq!(circuits.state(), CircuitState::Open);
    assert_eq!(
        gate(&circuits).unwrap_err().to_string(),
        "Redis at redis://127.0.0.1:6379/ is unavailable: not asked: the circuit is open \
         since Connection refused (os error 111); next try in 50ms"
    );
    // Another place's circuit is its own.
    assert_eq!(circuits.gate(|| Arc::from("127.0.0.1:7001")), Ok(()));
    // Nothing probed before the first wait is over.
    settle().await;
    assert!(fake.times().is_empty());
}

#[tokio::test(start_paused = true)]
async fn while_open_the_answer_says_when_the_next_try_is() {
    let (circuits, _fake) = circuits(FIRST_WAIT, LONGEST_WAIT);
    let timeout = RedisError::Timeout {
        at: URL.to_string(),
        after: Duration::from_secs(1),
    };
    fail(&circuits, &timeout);
    tokio::time::advance(Duration::from_micros(20_500)).await;
    assert_eq!(
        gate(&circuits).unwrap_err(),
        RedisError::Unavailable {
            at: URL.to_string(),
            detail: "not asked: the circuit is open since no answer within 1s; \
                     next try in 30ms"
                .to_string()
        }
    );
    // Failures of the calls that were on their way do not move the next try.
    fail(&circuits, &refused());
    let err = gate(&circuits).unwrap_err().to_string();
    assert!(
        err.ends_with("since no answer within 1s; next try in 30ms"),
        "{err}"
    );
}

#[tokio::test(start_paused = true)]
async fn one_probe_at_a_time_however_many_callers() {
    let (circuits, fake) = circuits(FIRST_WAIT, LONGEST_WAIT);
    fail(&circuits, &refused());
    tokio::time::advance(FIRST_WAIT).await;
    settle().await;
    // The probe is on its way (the fake holds its answer): a thousand callers answer at
    // once, and none of them probes.
    assert_eq!(circuits.state(), CircuitState::HalfOpen);
    for _ in 0..1_000 {
        let err = gate(&circuits).unwrap_err();
        assert!(err.to_string().ends_with("a probe is on its way"), "{err}");
    }
    // Nor do failures while it is on its way, however long it takes.
    for _ in 0..100 {
        fail(&circuits, &refused());
    }
    tokio::time::advance(LONGEST_WAIT * 10).await;
    settle().await;
    assert_eq!(fake.times().len(), 1);
    assert_eq!(circuits.state(), CircuitState::HalfOpen);
}

/// Waits for the next probe, answers it with `outcome`, and returns when it went.
async fn next_probe(circuits: &Circuits, fake: &Fake, outcome: Result<(), RedisError>) -> Instant {
    assert_eq!(
        circuits.changed(CircuitState::Open).await,
        CircuitState::HalfOpen
    );
    let went = Instant::now();
    fake.answer(outcome);
    went
}

#[tokio::test(start_paused = true)]
async fn the_wait_doubles_after_each_failed_probe_up_to_the_longest() {
    let (circuits, fake) = circuits(Duration::from_millis(50), Duration::from_millis(500));
    let mut went = vec![Instant::now()];
    fail(&circuits, &refused());
    for _ in 0..8 {
        went.push(next_probe(&circuits, &fake, Err(refused())).await);
        assert_eq!(
            circuits.changed(CircuitState::HalfOpen).await,
            CircuitState::Open
        );
    }
    let waits: Vec<u128> = went
        .windows(2)
        .map(|pair| (pair[1] - pair[0]).as_millis())
        .collect();
    assert_eq!(waits, [50, 100, 200, 400, 500, 500, 500, 500]);
    assert_eq!(fake.times(), went[1..]);
}

#[tokio::test(start_paused = true)]
async fn the_first_probe_redis_answers_closes_it() {
    let (circuits, fake) = circuits(FIRST_WAIT, LONGEST_WAIT);
    fail(&circuits, &refused());
    // The first probe fails: open again, the next try after twice the wait.
    next_probe(&circuits, &fake, Err(refused())).await;
    assert_eq!(
        circuits.changed(CircuitState::HalfOpen).await,
        CircuitState::Open
    );
    let err = gate(&circuits).unwrap_err().to_string();
    assert!(err.ends_with("next try in 100ms"), "{err}");
    // The second finds Redis: closed, and checks go to it again.
    next_probe(&circuits, &fake, Ok(())).await;
    assert_eq!(
        circuits.changed(CircuitState::HalfOpen).await,
        CircuitState::Closed
    );
    assert_eq!(gate(&circuits), Ok(()));
    assert_eq!(circuits.open.load(Ordering::Relaxed), 0);
    assert_eq!(fake.times().len(), 2);
    // A later failure opens it again, from the first wait.
    fail(&circuits, &refused());
    let err = gate(&circuits).unwrap_err().to_string();
    assert!(err.ends_with("next try in 50ms"), "{err}");
}

#[tokio::test(start_paused = true)]
async fn a_probe_answered_with_a_reply_error_closes_it_too() {
    let (circuits, fake) = circuits(FIRST_WAIT, LONGEST_WAIT);
    fail(&circuits, &refused());
    let loading = RedisError::Reply {
        at: URL.to_string(),
        detail: "LOADING Redis is loading the dataset in memory".to_string(),
    };
    next_probe(&circuits, &fake, Err(loading)).await;
    assert_eq!(
        circuits.changed(CircuitState::HalfOpen).await,
        CircuitState::Closed
    );
}

#[tokio::test(start_paused = true)]
async fn a_cluster_node_s_circuit_is_its_own() {
    let (circuits, fake) = circuits(FIRST_WAIT, LONGEST_WAIT);
    let node = |port: u16| -> Arc<str> { Arc::from(format!("127.0.0.1:{port}")) };
    let lost = RedisError::Unavailable {
        at: "127.0.0.1:7001".to_string(),
        detail: "Connection refused (os error 111)".to_string(),
    };
    fail(&circuits, &lost);
    assert!(circuits.gate(|| node(7001)).is_err());
    assert_eq!(circuits.gate(|| node(7000)), Ok(()));
    assert_eq!(circuits.gate(|| node(7002)), Ok(()));
    // A second node's failure: two open, one probe each.
    let other = RedisError::Cluster {
        at: "127.0.0.1:7002".to_string(),
        detail: "CLUSTERDOWN".to_string(),
    };
    fail(&circuits, &other);
    assert!(circuits.gate(|| node(7002)).is_err());
    tokio::time::advance(FIRST_WAIT).await;
    settle().await;
    assert_eq!(fake.times().len(), 2);
    assert_eq!(circuits.state(), CircuitState::HalfOpen);
    fake.answer(Ok(()));
    fake.answer(Err(other));
    // One closes; the other is open again.
    assert_eq!(
        circuits.changed(CircuitState::HalfOpen).await,
        CircuitState::Open
    );
    settle().await;
    let open: Vec<bool> = [7000, 7001, 7002]
        .map(|port| circuits.gate(|| node(port)).is_err())
        .to_vec();
    assert_eq!(open.iter().filter(|o| **o).count(), 1);
}

#[tokio::test(start_paused = true)]
async fn circuits_made_anew_keep_what_the_old_knew_was_down() {
    let (old, _old_fake) = circuits(FIRST_WAIT, LONGEST_WAIT);
    fail(&old, &refused());
    let (new, fake) = circuits(Duration::from_millis(10), Duration::from_millis(20));
    new.open_as(&old, Duration::from_secs(1));
    assert_eq!(new.state(), CircuitState::Open);
    assert_eq!(new.cause(), Some(refused()));
    assert_eq!(
        gate(&new).unwrap_err().to_string(),
        "Redis at redis://127.0.0.1:6379/ is unavailable: not asked: the circuit is open \
         since Connection refused (os error 111); next try in 10ms"
    );
    // Its own probe, after its own first wait, of the key the old one probed.
    next_probe(&new, &fake, Ok(())).await;
    assert_eq!(
        new.changed(CircuitState::HalfOpen).await,
        CircuitState::Closed
    );
    assert_eq!(fake.times().len(), 1);
    assert_eq!(new.cause(), None);
    // Nothing open: nothing to take over.
    let (closed, _) = circuits(FIRST_WAIT, LONGEST_WAIT);
    closed.open_as(&new, Duration::from_secs(1));
    assert_eq!(closed.state(), CircuitState::Closed);
}

#[tokio::test(start_paused = true)]
async fn the_probe_ends_with_the_limiter() {
    let (circuits, fake) = circuits(FIRST_WAIT, LONGEST_WAIT);
    fail(&circuits, &refused());
    drop(circuits);
    tokio::time::advance(Duration::from_secs(10)).await;
    settle().await;
    assert!(fake.times().is_empty());
}

#[test]
fn bad_waits_are_config_errors_naming_the_value() {
    let ms = Duration::from_millis;
    assert_eq!(
        Circuits::check_waits(Duration::ZERO, ms(10))
            .unwrap_err()
            .to_string(),
        "cannot set up the Redis limiter: the circuit's first wait must be longer than \
         zero, got 0ns"
    );
    assert_eq!(
        Circuits::check_waits(ms(50), ms(10))
            .unwrap_err()
            .to_string(),
        "cannot set up the Redis limiter: the circuit's longest wait must be at least its \
         first (50ms), got 10ms"
    );
    assert_eq!(
        Circuits::check_waits(ms(50), Duration::from_secs(7200))
            .unwrap_err()
            .to_string(),
        "cannot set up the Redis limiter: the circuit's longest wait must be at most \
         3600s, got 7200s"
    );
    assert_eq!(Circuits::check_waits(ms(50), ms(50)), Ok(()));
    assert_eq!(
        Circuits::check_waits(Duration::from_nanos(1), MOST_WAIT),
        Ok(())
    );
}
