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
                .map(|(key, value)| {
                    let BareItem::Integer(n) = value else {
                        panic!("a parameter that is not an Integer in {field}")
                    };
                    (key.as_str().to_string(), i64::from(*n))
                })
                .collect();
            (name.as_str().to_string(), params)
        })
        .collect()
}
