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
    _guard: tracing::subscriber::DefaultGuard,
}

impl CapturedLog {
    pub(crate) fn text(&self) -> String {
        String::from_utf8(self.bytes.lock().unwrap().clone()).unwrap()
    }
}

/// Captures the log, as a test of what a server tells its operator reads it.
pub(crate) fn capture_log() -> CapturedLog {
    #[derive(Clone, Default)]
    struct Writer(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);
    impl std::io::Write for Writer {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let writer = Writer::default();
    let bytes = std::sync::Arc::clone(&writer.0);
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    CapturedLog {
        bytes,
        _guard: tracing::subscriber::set_default(subscriber),
    }
}
