//! Issue 29, finding 4: 32 dashboard event streams on a config of 4,000 rules each built a
//! 1.1 MB snapshot every second, and a checking client got 4 answers in 3 s. Through the real
//! ports: the streams' snapshot is bounded (the busiest 50 rules, and the count of all), and
//! checks are answered while the streams are open.

use std::time::Duration;

use hyper::body::Incoming;

use super::*;

/// Rules in the config.
const RULES: usize = 4_000;

/// Event streams open at once: the most the service allows.
const STREAMS: usize = 32;

/// What one snapshot event may weigh here: the busiest 50 rules of 4,000, with a little
/// traffic. The unbounded snapshot of 4,000 rules was 1.1 MB.
const MAX_EVENT_BYTES: usize = 64 * 1024;

/// A bound on each wait against a hang, not a timing claim.
const PATIENCE: Duration = Duration::from_secs(30);

fn many_rules() -> String {
    let mut yaml = String::from("domain: api\ndescriptors:\n");
    for i in 0..RULES {
        yaml.push_str(&format!(
            "  - key: r{i}\n    rate_limit: {{unit: minute, requests_per_unit: 1000}}\n"
        ));
    }
    yaml
}

/// An event stream of `GET /api/events`: its body, and what was read of it.
struct Stream {
    body: Incoming,
    read: Vec<u8>,
}

impl Stream {
    async fn open(http: SocketAddr) -> Stream {
        let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
        let request = http::Request::get(format!("http://{http}/api/events"))
            .body(Full::new(Bytes::new()))
            .expect("a request");
        let response = client.request(request).await.expect("HTTP answers");
        assert_eq!(response.status(), 200, "a stream of the 32 allowed");
        Stream {
            body: response.into_body(),
            read: Vec::new(),
        }
    }

    /// The next event's data, as JSON; panics on anything else.
    async fn next_snapshot(&mut self) -> serde_json::Value {
        loop {
            if let Some(end) = self.read.windows(2).position(|w| w == b"\n\n") {
                let event: Vec<u8> = self.read.drain(..end + 2).collect();
                if event.starts_with(b":") {
                    continue; // a keep-alive comment
                }
                assert!(
                    event.len() <= MAX_EVENT_BYTES,
                    "an event of {} bytes: the snapshot is not bounded",
                    event.len()
                );
                let data = event.strip_prefix(b"data: ").unwrap_or_else(|| {
                    panic!("not a data event: {:?}", &event[..event.len().min(80)])
                });
                return serde_json::from_slice(data).expect("the data is JSON");
            }
            let frame = tokio::time::timeout(PATIENCE, self.body.frame())
                .await
                .expect("the stream sends")
                .expect("the stream is open")
                .expect("a frame, not an error");
            if let Ok(data) = frame.into_data() {
                self.read.extend_from_slice(&data);
            }
        }
    }
}

/// The names of the rules a snapshot shows, and its count of all.
fn shown(snapshot: &serde_json::Value) -> (Vec<String>, u64) {
    let rules = snapshot["rules"].as_array().expect("rules");
    let names = rules
        .iter()
        .map(|rule| rule["name"].as_str().expect("a name").to_owned())
        .collect();
    (
        names,
        snapshot["rules_total"].as_u64().expect("rules_total"),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_29_thirty_two_dashboards_on_4000_rules_get_a_bounded_snapshot_and_checks_are_answered()
 {
    let config = Config::parse(&many_rules(), "many.yaml").expect("a valid config");
    let clock = Arc::new(ManualClock::new(Moment::from_secs(1_000)));
    let engine = Engine::new(
        Memory::new(),
        config,
        clock,
        Bounds::default(),
        Metrics::new(),
    )
    .expect("memory holds the rules");
    let served = Served::start(Endpoints::new(engine, vec![]), &server::local()).await;
    let mut client = RateLimitServiceClient::connect(format!("http://{}", served.grpc))
        .await
        .expect("gRPC connects");
    // The last rule in the config is the busiest: it is shown, ahead of idle ones before it.
    let last = format!("r{}", RULES - 1);
    for _ in 0..3 {
        client
            .should_rate_limit(request("api", &[(last.as_str(), "x")]))
            .await
            .expect("answered");
    }

    let mut streams = Vec::new();
    for _ in 0..STREAMS {
        streams.push(Stream::open(served.http).await);
    }
    for stream in &mut streams {
        let snapshot = stream.next_snapshot().await;
        let (names, total) = shown(&snapshot);
        assert_eq!(total, RULES as u64, "the count of every rule");
        assert_eq!(names.len(), 50, "50 of 4,000 rules shown");
        assert_eq!(names.last(), Some(&last), "the busiest is shown: {names:?}");
        assert_eq!(snapshot["last_minute"]["passed"], 3, "the totals of all");
    }

    // While the 32 streams are open, every check is answered, on rules all over the config.
    for i in 0..200 {
        let rule = format!("r{}", i * 19 % RULES);
        let answer = tokio::time::timeout(
            PATIENCE,
            client.should_rate_limit(request("api", &[(rule.as_str(), "y")])),
        )
        .await
        .expect("a check is answered while 32 dashboards watch")
        .expect("answered")
        .into_inner();
        assert_eq!(answer.overall_code, PbCode::Ok as i32, "{rule}");
    }
    // And the streams go on: each comes to a snapshot that counts those checks (after those
    // it sent while they ran, if any).
    for stream in &mut streams {
        let mut passed = 0;
        while passed < 203 {
            let snapshot = stream.next_snapshot().await;
            assert_eq!(shown(&snapshot).1, RULES as u64);
            passed = snapshot["last_minute"]["passed"].as_u64().expect("a count");
        }
        assert_eq!(passed, 203);
    }
    // `/api/stats` is the same bounded snapshot.
    let http = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let stats = http
        .request(
            http::Request::get(format!("http://{}/api/stats", served.http))
                .body(Full::new(Bytes::new()))
                .expect("a request"),
        )
        .await
        .expect("HTTP answers");
    assert_eq!(stats.status(), 200);
    let body = stats
        .into_body()
        .collect()
        .await
        .expect("a body")
        .to_bytes();
    assert!(body.len() <= MAX_EVENT_BYTES, "{} bytes", body.len());
    let stats: serde_json::Value = serde_json::from_slice(&body).expect("JSON");
    assert_eq!(shown(&stats).0.len(), 50);
    drop(streams);
    served.stop().await;
}
