//! The dashboard in a real browser: headless Chromium loads the page from `dashboard_router`
//! served over a fake source on a socket, runs its scripts, and its DOM must show the fake's
//! numbers, escaped, and how many of the config's rules it shows. A screenshot goes to `target/dashboard.png`.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use super::dashboard_router;
use crate::snapshot::{
    BackendStatus, ConfigStatus, LimitStats, LoadError, PerSecond, RuleStats, Snapshot,
    SnapshotSource, TopKey, Totals,
};

// The browser the integration tests drive too.
#[path = "../../tests/support/browser.rs"]
mod browser;

/// What the page must escape: it must show it as text, never as markup.
const HOSTILE: &str = "<img src=x onerror=alert(1)>";

/// The rules of the config, of which the fake shows two, as the service shows its busiest.
const RULES_TOTAL: u64 = 4000;

/// Two rules whose counts change with each snapshot, of [`RULES_TOTAL`]; remembers every total
/// it gave, and every total of all rules. `hostile` puts markup into a key and the config
/// error.
#[derive(Default)]
struct Fake {
    hostile: bool,
    calls: AtomicU64,
    given: Mutex<Vec<(String, Totals)>>,
    /// Every rule's last minute and last whole second, as each snapshot gave them.
    given_all: Mutex<Vec<(Totals, Totals)>>,
    /// Every limit's requests over it in the last minute, as each snapshot gave them.
    given_limits: Mutex<Vec<(String, u64)>>,
}

impl Fake {
    /// One rule's last minute at call `call`: a wave of traffic with a burst over the quota,
    /// never zero, one second further on at each call.
    fn rule(call: u64, domain: &str, name: &str, shadow: bool) -> RuleStats {
        // A triangle wave: 0 up to `amp` and back, over `period` seconds.
        let wave = |t: u64, period: u64, amp: u64| {
            let p = t % period;
            amp * p.min(period - p) * 2 / period
        };
        let seconds = (0..60u64).map(|i| i + call);
        let (passed, over): (Vec<u64>, Vec<u64>) = if shadow {
            seconds
                .map(|t| {
                    let burst = if (25..38).contains(&(t % 60)) { 6 } else { 0 };
                    let over = burst + 2 * u64::from(t % 7 == 0);
                    (8 + wave(t + 5, 16, 8), over)
                })
                .unzip()
        } else {
            seconds
                .map(|t| {
                    let burst = match t % 60 {
                        b @ 40..54 => 70 - 5 * b.abs_diff(47),
                        _ => 0,
                    };
                    let demand = 55 + wave(t, 24, 24) + burst;
                    (demand.min(100), demand.saturating_sub(100))
                })
                .unzip()
        };
        let (denied, shadow_denied) = if shadow {
            (vec![0; 60], over)
        } else {
            (over, vec![0; 60])
        };
        let last_minute = Totals {
            passed: passed.iter().sum(),
            denied: denied.iter().sum(),
            shadow_denied: shadow_denied.iter().sum(),
        };
        let limit = |name: &str, quota: &str, over_limit: Vec<u64>| LimitStats {
            name: name.into(),
            quota: quota.into(),
            algorithm: "sliding_log".into(),
            last_minute_over_limit: over_limit.iter().sum(),
            over_limit,
        };
        // The non-shadow rule has two limits: `hourly` finds two thirds of what is over,
        // `burst` the rest.
        let limits = if shadow {
            vec![limit(name, "5 per 1m", shadow_denied.clone())]
        } else {
            let hourly: Vec<u64> = denied.iter().map(|d| d * 2 / 3).collect();
            let burst = denied.iter().zip(&hourly).map(|(d, h)| d - h).collect();
            vec![
                limit("burst", "100 per 1s", burst),
                limit("hourly", "3000 per 1h", hourly),
            ]
        };
        RuleStats {
            domain: domain.into(),
            name: name.into(),
            quota: if shadow {
                "5 per 1m"
            } else {
                "100 per 1s and 3000 per 1h"
            }
            .into(),
            algorithm: if shadow {
                "sliding_counter"
            } else {
                "sliding_log"
            }
            .into(),
            shadow,
            keys: 1200 + call,
            per_second: PerSecond {
                passed,
                denied,
                shadow_denied,
            },
            last_minute,
            limits,
        }
    }
}

impl SnapshotSource for Fake {
    fn snapshot(&self) -> Snapshot {
        let call = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        let rules = vec![
            Self::rule(call, "edge", "per_ip", false),
            Self::rule(call, "auth", "login_attempts", true),
        ];
        let mut given = self.given.lock().unwrap_or_else(PoisonError::into_inner);
        let mut given_limits = self
            .given_limits
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        for rule in &rules {
            given.push((rule.name.clone(), rule.last_minute));
            for limit in &rule.limits {
                given_limits.push((limit.name.clone(), limit.last_minute_over_limit));
            }
        }
        // The rules not shown: a steady 1,000 passed a second between them.
        let mut per_second = PerSecond {
            passed: vec![1000; 60],
            denied: vec![0; 60],
            shadow_denied: vec![0; 60],
        };
        for rule in &rules {
            for (all, one) in [
                (&mut per_second.passed, &rule.per_second.passed),
                (&mut per_second.denied, &rule.per_second.denied),
                (
                    &mut per_second.shadow_denied,
                    &rule.per_second.shadow_denied,
                ),
            ] {
                all.iter_mut().zip(one).for_each(|(a, o)| *a += o);
            }
        }
        let last_minute = Totals {
            passed: per_second.passed.iter().sum(),
            denied: per_second.denied.iter().sum(),
            shadow_denied: per_second.shadow_denied.iter().sum(),
        };
        let last_second = Totals {
            passed: per_second.passed[58],
            denied: per_second.denied[58],
            shadow_denied: per_second.shadow_denied[58],
        };
        self.given_all
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((last_minute, last_second));
        let (bad_value, user) = if self.hostile {
            (HOSTILE, HOSTILE)
        } else {
            ("10/s", "carol")
        };
        Snapshot {
            now_ms: 1_767_225_600_000 + call * 1000,
            config: ConfigStatus {
                version: 3,
                loaded_at: "2025-12-31T23:42:10Z".into(),
                files: vec!["/etc/slidewin/config.yaml".into()],
                last_error: Some(LoadError {
                    at: "2025-12-31T23:58:41Z".into(),
                    message: format!(
                        "/etc/slidewin/config.yaml:12:9: requests_per_unit: not an integer: {bad_value:?}"
                    ),
                }),
                errors_total: 1,
            },
            backend: BackendStatus {
                kind: "redis".into(),
                state: "up".into(),
                failure_policy: Some("open".into()),
                errors_total: 0,
                denied_cache_answers_total: 0,
            },
            rules_total: RULES_TOTAL,
            last_minute,
            last_second,
            rules,
            top_denied: vec![
                TopKey {
                    domain: "edge".into(),
                    rule: "per_ip".into(),
                    limit: "hourly".into(),
                    key: "remote_address=203.0.113.7".into(),
                    denied: 90 + call,
                },
                TopKey {
                    domain: "edge".into(),
                    rule: "per_ip".into(),
                    limit: "burst".into(),
                    key: format!("user={user}"),
                    denied: 31,
                },
            ],
        }
    }
}

/// Serves the dashboard over `source` on 127.0.0.1, on a runtime of its own thread (it lives
/// as long as the test process).
fn serve(source: Arc<dyn SnapshotSource>) -> SocketAddr {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("a port");
            tx.send(listener.local_addr().expect("an address"))
                .expect("the test waits");
            // Never stopped: the sender lives as long as the server's thread.
            let stop = tokio::sync::watch::Sender::new(false);
            axum::serve(listener, dashboard_router(source, stop.subscribe()))
                .await
                .expect("the server runs");
        });
    });
    rx.recv().expect("the server's address")
}

/// The text of the first element whose tag has `attribute` (`name="value"`).
fn attribute_text(dom: &str, attribute: &str) -> Option<String> {
    dom.match_indices('<').find_map(|(start, _)| {
        let tag_end = start + dom[start..].find('>')?;
        if !dom[start..tag_end].contains(attribute) {
            return None;
        }
        let text_end = tag_end + dom[tag_end..].find('<')?;
        Some(dom[tag_end + 1..text_end].to_string())
    })
}

#[test]
fn the_page_shows_each_rules_totals_the_sum_of_all_and_how_many_it_shows() {
    let fake = Arc::new(Fake {
        hostile: true,
        ..Fake::default()
    });
    let addr = serve(fake.clone());
    let dom = browser::dump_dom(&format!("http://{addr}/?updates=3"), 3000);

    assert!(
        fake.calls.load(Ordering::SeqCst) >= 1,
        "no snapshot was asked for"
    );
    let given = fake
        .given
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    for (rule, total, pick) in [
        (
            "per_ip",
            "passed",
            (|t: &Totals| t.passed) as fn(&Totals) -> u64,
        ),
        ("per_ip", "denied", |t| t.denied),
        ("login_attempts", "passed", |t| t.passed),
        ("login_attempts", "shadow_denied", |t| t.shadow_denied),
    ] {
        let text = browser::total_in(&dom, rule, total)
            .unwrap_or_else(|| panic!("no {total} total of {rule} in the DOM:\n{dom}"));
        let shown: u64 = text
            .replace(',', "")
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("the {total} total of {rule} is {text:?}"));
        assert!(shown > 0, "the {total} total of {rule} is zero");
        assert!(
            given
                .iter()
                .any(|(name, t)| name == rule && pick(t) == shown),
            "the {total} total of {rule} shows {shown}, which no snapshot gave"
        );
    }
    // The summary is every rule's, not only the two shown, and the page says how many it shows.
    let given_all = fake
        .given_all
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    let summary = |attribute: &str| -> u64 {
        let text = attribute_text(&dom, attribute)
            .unwrap_or_else(|| panic!("no {attribute} in the DOM:\n{dom}"));
        text.replace(',', "")
            .parse()
            .unwrap_or_else(|_| panic!("the summary's {attribute} is {text:?}"))
    };
    let (passed, rate) = (
        summary("data-total-all=\"passed\""),
        summary("id=\"sum-rate\""),
    );
    assert!(
        given_all
            .iter()
            .any(|(minute, second)| minute.passed == passed
                && second.passed + second.denied + second.shadow_denied == rate),
        "the summary shows {passed} passed and {rate} a second, which no snapshot gave for all \
         rules"
    );
    let shown = attribute_text(&dom, "data-rules-total=\"4000\"")
        .unwrap_or_else(|| panic!("no count of the rules shown in the DOM:\n{dom}"));
    assert_eq!(
        shown,
        "2 of 4,000 rules shown: the busiest in the last minute"
    );
    // A rule of several limits says which found requests over it; a rule of one does not.
    let given_limits = fake
        .given_limits
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    for limit in ["burst", "hourly"] {
        let over: u64 = attribute_text(&dom, &format!("data-limit=\"{limit}\""))
            .unwrap_or_else(|| panic!("no row for the limit {limit} in the DOM:\n{dom}"))
            .replace(',', "")
            .parse()
            .expect("a count");
        assert!(
            given_limits.contains(&(limit.to_owned(), over)),
            "the limit {limit} shows {over} over it, which no snapshot gave"
        );
    }
    assert!(
        !dom.contains("data-limit=\"login_attempts\""),
        "a table of one limit"
    );
    // The most denied keys name the limit that denied them.
    assert!(dom.contains("<td>hourly</td>"), "no limit in the top keys");
    // Times carry their zone: the browser runs in Paris, the snapshot is of 00:00:0x UTC.
    let updated = attribute_text(&dom, "id=\"updated\"").expect("the snapshot's time");
    assert!(
        updated.starts_with("snapshot of 01:00:0") && updated.ends_with(" CET"),
        "{updated}"
    );
    // uPlot drew the charts: one canvas per rule.
    assert!(dom.matches("<canvas").count() >= 2, "no charts:\n{dom}");
    // The header, the config error, the table.
    assert!(dom.contains("v3"), "no config version");
    assert!(dom.contains("open (admit)"), "no failure policy");
    assert!(dom.contains("remote_address=203.0.113.7"), "no top key");
    assert!(!dom.contains("id=\"config-error\" class=\"config-error\" hidden"));
    // What came from the server is text: escaped, never an element.
    assert!(
        dom.contains("user=&lt;img src=x onerror=alert(1)&gt;"),
        "{dom}"
    );
    assert!(
        dom.contains("requests_per_unit: not an integer: \"&lt;img src=x onerror=alert(1)&gt;\""),
        "the config error is missing or not escaped:\n{dom}"
    );
    assert!(!dom.contains(HOSTILE), "unescaped markup in the DOM");
}

#[test]
fn a_screenshot_of_the_page() {
    let fake = Arc::new(Fake::default());
    let addr = serve(fake);
    let out = browser::target_dir().join("dashboard.png");
    browser::screenshot(&format!("http://{addr}/?updates=3"), &out, 3000);

    let png = std::fs::read(&out).expect("the screenshot");
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
    let dimension = |at: usize| u32::from_be_bytes(png[at..at + 4].try_into().expect("4 bytes"));
    assert_eq!(
        (dimension(16), dimension(20)),
        browser::WINDOW_SIZE,
        "the IHDR's size"
    );
    // A blank or error page compresses to a few kilobytes; the dashboard does not.
    assert!(
        png.len() > 30_000,
        "a near-empty screenshot: {} bytes",
        png.len()
    );
}
