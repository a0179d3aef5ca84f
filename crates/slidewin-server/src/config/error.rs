//! The error a config file is refused with, placed at its line and column where known, and
//! the helpers that place and shorten what a message quotes.

use crate::config::Config;
use std::fmt;

/// A config file that could not be read or was not valid: the file, the line and column where
/// known, and what was wrong.
///
/// ```
/// use slidewin_server::Config;
/// let err = Config::parse("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n", "a.yaml").unwrap_err();
/// assert_eq!((err.line(), err.file()), (Some(4), "a.yaml"));
/// assert!(err.to_string().contains("fortnight"), "{err}");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigFileError {
    file: String,
    line: Option<usize>,
    column: Option<usize>,
    message: String,
}

impl ConfigFileError {
    pub(crate) fn new(file: &str, message: impl Into<String>) -> ConfigFileError {
        ConfigFileError {
            file: file.to_owned(),
            line: None,
            column: None,
            message: message.into(),
        }
    }

    pub(super) fn from_yaml(file: &str, text: &str, err: &yaml_serde::Error) -> ConfigFileError {
        let location = err.location();
        let mut message = err.to_string();
        // yaml_serde ends its message with the place; we print it in front, as compilers do.
        if let Some(at) = message.find(" at line ") {
            message.truncate(at);
        }
        let mut line = location.as_ref().map(|l| l.line());
        let mut column = location.as_ref().map(|l| l.column());
        // A value refused by our own checks is placed by yaml_serde at the start of the mapping
        // holding it; the value itself, which the message quotes, is at or after that place.
        if let (Some(from), Some(quoted)) =
            (location.as_ref().map(|l| l.index()), first_quoted(&message))
            && let Some(found) = text.get(from..).and_then(|rest| rest.find(quoted))
        {
            let (at_line, at_column) = place(text, from + found);
            (line, column) = (Some(at_line), Some(at_column));
        }
        ConfigFileError {
            file: file.to_owned(),
            line,
            column,
            message,
        }
    }

    /// A flow collection nested past [`Config::MAX_FLOW_NESTING`], at byte `at` of `text`.
    pub(super) fn too_deep(file: &str, text: &str, at: usize) -> ConfigFileError {
        let (line, column) = place(text, at);
        ConfigFileError {
            file: file.to_owned(),
            line: Some(line),
            column: Some(column),
            message: format!(
                "flow collections ([...], {{...}}) nested more than {max} deep; \
                 refused before parsing",
                max = Config::MAX_FLOW_NESTING
            ),
        }
    }

    /// The file.
    #[must_use]
    pub fn file(&self) -> &str {
        &self.file
    }

    /// The line, from 1, where the parser knows it.
    #[must_use]
    pub fn line(&self) -> Option<usize> {
        self.line
    }

    /// The column, from 1, where the parser knows it.
    #[must_use]
    pub fn column(&self) -> Option<usize> {
        self.column
    }

    /// What was wrong.
    #[must_use]
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for ConfigFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.line, self.column) {
            (Some(line), Some(column)) => {
                write!(f, "{}:{line}:{column}: {}", self.file, self.message)
            }
            (Some(line), None) => write!(f, "{}:{line}: {}", self.file, self.message),
            _ => write!(f, "{}: {}", self.file, self.message),
        }
    }
}

impl std::error::Error for ConfigFileError {}

/// The line and column, both from 1, of byte `at` of `text`.
pub(super) fn place(text: &str, at: usize) -> (usize, usize) {
    let before = &text[..at];
    let line = before.matches('\n').count() + 1;
    (line, at - before.rfind('\n').map_or(0, |nl| nl + 1) + 1)
}

/// The first text between backticks in `message`, unless it was cut short.
fn first_quoted(message: &str) -> Option<&str> {
    let start = message.find('`')? + 1;
    let len = message[start..].find('`')?;
    let quoted = &message[start..start + len];
    (!quoted.is_empty() && !quoted.ends_with('…')).then_some(quoted)
}

/// A value shown in a message: at most 80 bytes of it.
pub(super) fn shown(text: &str) -> String {
    const MAX: usize = 80;
    if text.len() <= MAX {
        return text.to_owned();
    }
    let mut end = MAX;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}
