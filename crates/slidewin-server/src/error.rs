//! [`Error`]: why the service could not start, load a config or take a setting. One type for
//! every public function that can fail so, each variant naming the kind of failure; its text
//! names what failed.

use std::fmt;
use std::io;

/// Why [`run`](crate::run), [`Engine::new`](crate::Engine::new),
/// [`Engine::reload`](crate::Engine::reload), [`Endpoints::reload`](crate::Endpoints::reload),
/// [`watch_config`](crate::watch_config) or
/// [`ConnectionLimits::validate`](crate::ConnectionLimits::validate) failed. Its `Display` is the message for a person (the
/// CLI prints it); its variant is what a program branches on.
///
/// ```
/// use slidewin_server::{ConnectionLimits, Error};
///
/// let zero = ConnectionLimits { max_connections: 0, ..ConnectionLimits::default() };
/// let err = zero.validate().unwrap_err();
/// assert!(matches!(err, Error::Setting { name: "max_connections", .. }));
/// assert_eq!(err.to_string(), "max_connections is 0: a listener must take at least one");
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// A config that was not loaded: a file that could not be read in time or parsed (named
    /// by file, line and column), or a limit the store cannot hold. The config in force, if
    /// any, stays.
    Config(String),
    /// A limit the store cannot hold, named by its descriptor path.
    Store(String),
    /// A reload asked of a service that runs the built-in config, which has no file.
    NoConfigFile,
    /// A setting that bounds nothing or contradicts another.
    Setting {
        /// The setting, as [`ConnectionLimits`](crate::ConnectionLimits) or the CLI names it.
        name: &'static str,
        /// Why, for a person.
        message: String,
    },
    /// The store could not be set up at start (a bad Redis URL, a cluster that refuses).
    Backend(String),
    /// A listener, the file watcher or the signal handler failed, with what failed.
    Io {
        /// What failed.
        what: String,
        /// The system's error.
        source: io::Error,
    },
}

impl Error {
    pub(crate) fn setting(name: &'static str, message: impl Into<String>) -> Error {
        Error::Setting {
            name,
            message: message.into(),
        }
    }

    pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(io::Error) -> Error {
        let what = what.into();
        move |source| Error::Io { what, source }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Config(message) | Error::Store(message) | Error::Backend(message) => {
                f.write_str(message)
            }
            Error::NoConfigFile => f.write_str("the built-in config has no file to reload"),
            Error::Setting { message, .. } => f.write_str(message),
            Error::Io { what, source } if what.is_empty() => write!(f, "{source}"),
            Error::Io { what, source } => write!(f, "{what}: {source}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}
