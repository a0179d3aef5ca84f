//! What the tests share: the `RateLimit` fields parsed back with sfv, as a client would.

use sfv::{BareItem, List, ListEntry, Parser};

/// Each member's name and its integer parameters, in order, of a structured List field.
pub(crate) fn members(field: &str) -> Vec<(String, Vec<(String, i64)>)> {
    let list: List = Parser::new(field).parse().expect("a structured List");
    list.iter()
        .map(|entry| {
            let ListEntry::Item(item) = entry else {
                panic!("an inner list in {field}")
            };
            let BareItem::String(name) = &item.bare_item else {
                panic!("a name that is not a String in {field}")
            };
            let params = item
                .params
                .iter()
                .filter_map(|(key, value)| {
                    let n = match value {
                        BareItem::Integer(n) => i64::from(*n),
                        // A lease's quota unit, checked as text where it is made.
                        BareItem::String(unit) if key.as_str() == "qu" => {
                            assert_eq!(unit.as_str(), "concurrent-requests", "{field}");
                            return None;
                        }
                        _ => panic!("a parameter that is not an Integer in {field}"),
                    };
                    Some((key.as_str().to_string(), n))
                })
                .collect();
            (name.as_str().to_string(), params)
        })
        .collect()
}

/// What `tracing` writes on this thread while it lives, as text without colour codes.
pub(crate) struct CapturedLog {
    bytes: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
}

impl CapturedLog {
    pub(crate) fn text(&self) -> String {
        String::from_utf8(self.bytes.lock().unwrap().clone()).unwrap()
    }
}

impl Drop for CapturedLog {
    fn drop(&mut self) {
        CAPTURE.with(|capture| capture.borrow_mut().take());
    }
}

std::thread_local! {
    /// Where this thread's events go while a test captures them.
    static CAPTURE: std::cell::RefCell<Option<std::sync::Arc<std::sync::Mutex<Vec<u8>>>>> =
        const { std::cell::RefCell::new(None) };
}

/// Writes an event to its thread's capture, if it has one.
struct ThreadWriter;

impl std::io::Write for ThreadWriter {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        CAPTURE.with(|capture| {
            if let Some(into) = &*capture.borrow() {
                into.lock().unwrap().extend_from_slice(bytes);
            }
        });
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Captures this thread's log, as a test of what a server tells its operator reads it (the
/// tests' runtimes are current-thread: their events are emitted on the test's thread).
///
/// One subscriber for the whole binary, global, writing each thread's events to its own
/// capture: a scoped subscriber per test (`set_default`) lost events now and then, since
/// tracing caches each callsite's interest globally and tests in parallel registered the
/// same callsites while no subscriber wanted them.
pub(crate) fn capture_log() -> CapturedLog {
    static INSTALL: std::sync::Once = std::sync::Once::new();
    INSTALL.call_once(|| {
        let subscriber = tracing_subscriber::fmt()
            .with_writer(|| ThreadWriter)
            .with_ansi(false)
            .finish();
        tracing::subscriber::set_global_default(subscriber).expect("the only global subscriber");
    });
    let bytes = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    CAPTURE.with(|capture| *capture.borrow_mut() = Some(std::sync::Arc::clone(&bytes)));
    CapturedLog { bytes }
}
