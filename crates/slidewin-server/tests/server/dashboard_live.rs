//! The dashboard of the real service, in headless Chromium, while a load runs: the page must
//! show the counts the service made. A screenshot goes to `target/dashboard-live.png`.

use crate::support;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use slidewin::time::MonotonicClock;
use slidewin_server::{Bounds, Config, Endpoints, Engine, Listeners, Metrics, ServeOptions, serve};
use slidewin_store::Memory;
use support::browser;

/// The built-in example served on free ports of 127.0.0.1, on a runtime of its own thread, with
/// a load of `POST /json` from one client (over its 10/s burst: some admitted, most denied)
/// until `stop` is set. Answers the HTTP address.
fn serve_under_load(stop: Arc<AtomicBool>, sent: Arc<AtomicU64>) -> SocketAddr {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a runtime");
        runtime.block_on(async move {
            let config = Config::parse(Config::EXAMPLE, "example.yaml").expect("the example loads");
            let engine = Engine::new(
                Memory::new(),
                config,
                Arc::new(MonotonicClock),
                Bounds::default(),
                Metrics::new(),
            )
            .expect("memory holds the rules");
            let service = Endpoints::new(engine, vec![]);
            let options = ServeOptions {
                grpc_addr: SocketAddr::from(([127, 0, 0, 1], 0)),
                http_addr: SocketAddr::from(([127, 0, 0, 1], 0)),
                admin: true,
                ..ServeOptions::default()
            };
            let listeners = Listeners::bind(&options).await.expect("free ports");
            let http = listeners.http_addr().expect("an address");
            let served = tokio::spawn(serve(service, listeners, true, std::future::pending()));
            tx.send(http).expect("the test waits");
            let load = tokio::spawn(async move {
                let body = r#"{"domain":"example","descriptors":[{"entries":[{"key":"client","value":"load"}]}]}"#;
                while !stop.load(Ordering::Relaxed) {
                    if post(http, body).await {
                        sent.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
            let _ = load.await;
            served.abort();
        });
    });
    rx.recv().expect("the server's address")
}

/// One `POST /json` on a connection of its own; whether an answer came.
async fn post(addr: SocketAddr, body: &str) -> bool {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let Ok(mut stream) = tokio::net::TcpStream::connect(addr).await else {
        return false;
    };
    let request = format!(
        "POST /json HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    if stream.write_all(request.as_bytes()).await.is_err() {
        return false;
    }
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.is_ok() && answer.starts_with(b"HTTP/1.1 ")
}

#[test]
fn the_live_service_shows_its_counts_under_load() {
    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicU64::new(0));
    let addr = serve_under_load(stop.clone(), sent.clone());
    // The page reads three snapshots of the live service (`updates=3` ends its event stream,
    // so that Chromium's virtual time can run out), then the DOM is dumped.
    let dom = browser::dump_dom(&format!("http://{addr}/?updates=3"), 3000);
    browser::screenshot(
        &format!("http://{addr}/?updates=3"),
        &browser::target_dir().join("dashboard-live.png"),
        3000,
    );
    stop.store(true, Ordering::Relaxed);
    assert!(sent.load(Ordering::Relaxed) > 0, "the load ran");
    let number = |total: &str| -> u64 {
        let text = browser::total_in(&dom, "client", total).expect("the client rule's totals");
        text.chars()
            .filter(char::is_ascii_digit)
            .collect::<String>()
            .parse()
            .expect("a number")
    };
    let (passed, denied) = (number("passed"), number("denied"));
    assert!(passed > 0 && denied > 0, "passed {passed}, denied {denied}");
    assert!(
        dom.contains("client=load"),
        "the denied key is among the top keys"
    );
}
