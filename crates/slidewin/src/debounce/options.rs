//! [`DebounceOptions`] and [`ThrottleOptions`], as a user writes them, and [`Debounce`], the
//! same checked.

use std::fmt;
use std::time::Duration;

use crate::ConfigError;

/// The builders and getters that [`DebounceOptions`] and [`ThrottleOptions`] share (`wait`,
/// `leading`, `trailing`), written once for both: the two stay types of their own, each with
/// its defaults, and only a debounce has a max wait. `leading:` is the type's default for the
/// leading edge (its examples say it); the trailing edge runs by default in both.
macro_rules! edges {
    ($Options:ident, leading: $leading:literal) => {
        impl $Options {
            /// Whether a call on a quiet key runs at once.
            ///
            /// ```
            #[doc = concat!("use slidewin::debounce::", stringify!($Options), " as Options;")]
            /// use std::time::Duration;
            ///
            /// let opts = Options::new(Duration::from_millis(1)).leading(true);
            /// assert!(opts.get_leading());
            /// ```
            #[must_use]
            pub const fn leading(mut self, leading: bool) -> $Options {
                self.leading = leading;
                self
            }

            /// Whether the last call of a window runs when the window closes. With `leading`
            /// on too, a window's only call runs once, at the leading edge.
            ///
            /// ```
            #[doc = concat!("use slidewin::debounce::", stringify!($Options), " as Options;")]
            /// use std::time::Duration;
            ///
            /// let opts = Options::new(Duration::from_millis(1)).trailing(false);
            /// assert!(!opts.get_trailing());
            /// ```
            #[must_use]
            pub const fn trailing(mut self, trailing: bool) -> $Options {
                self.trailing = trailing;
                self
            }

            /// The wait.
            ///
            /// ```
            #[doc = concat!("use slidewin::debounce::", stringify!($Options), " as Options;")]
            /// use std::time::Duration;
            ///
            /// let opts = Options::new(Duration::from_millis(3));
            /// assert_eq!(opts.get_wait(), Duration::from_millis(3));
            /// ```
            #[must_use]
            pub const fn get_wait(&self) -> Duration {
                self.wait
            }

            /// Whether the leading edge runs.
            ///
            /// ```
            #[doc = concat!("use slidewin::debounce::", stringify!($Options), " as Options;")]
            /// use std::time::Duration;
            ///
            /// let opts = Options::new(Duration::from_millis(3));
            #[doc = concat!("assert_eq!(opts.get_leading(), ", stringify!($leading), ");")]
            /// ```
            #[must_use]
            pub const fn get_leading(&self) -> bool {
                self.leading
            }

            /// Whether the trailing edge runs.
            ///
            /// ```
            #[doc = concat!("use slidewin::debounce::", stringify!($Options), " as Options;")]
            /// use std::time::Duration;
            ///
            /// assert!(Options::new(Duration::from_millis(3)).get_trailing());
            /// ```
            #[must_use]
            pub const fn get_trailing(&self) -> bool {
                self.trailing
            }
        }
    };
}

/// Lodash's `debounce` options: `wait`, `leading` (default false), `trailing` (default true)
/// and `maxWait` (default none). Checked when a [`Debounce`] is made from them.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use slidewin::debounce::DebounceOptions;
///
/// let opts = DebounceOptions::new(Duration::from_millis(300))
///     .leading(true)
///     .max_wait(Duration::from_secs(1));
/// assert_eq!(opts.get_max_wait(), Some(Duration::from_secs(1)));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DebounceOptions {
    wait: Duration,
    leading: bool,
    trailing: bool,
    max_wait: Option<Duration>,
}

impl DebounceOptions {
    /// A window of `wait`, trailing edge only, no max wait.
    ///
    /// ```
    /// use std::time::Duration;
    /// let opts = slidewin::debounce::DebounceOptions::new(Duration::from_millis(300));
    /// assert_eq!((opts.get_leading(), opts.get_trailing()), (false, true));
    /// ```
    #[must_use]
    pub const fn new(wait: Duration) -> DebounceOptions {
        DebounceOptions {
            wait,
            leading: false,
            trailing: true,
            max_wait: None,
        }
    }

    /// The longest calls may be put off while they keep coming: a run is forced once
    /// `max_wait` has passed since the last run. At least `wait`.
    ///
    /// ```
    /// use std::time::Duration;
    /// let opts = slidewin::debounce::DebounceOptions::new(Duration::from_millis(1))
    ///     .max_wait(Duration::from_millis(5));
    /// assert_eq!(opts.get_max_wait(), Some(Duration::from_millis(5)));
    /// ```
    #[must_use]
    pub const fn max_wait(mut self, max_wait: Duration) -> DebounceOptions {
        self.max_wait = Some(max_wait);
        self
    }

    /// The max wait, if any.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::debounce::DebounceOptions;
    /// assert_eq!(DebounceOptions::new(Duration::from_millis(3)).get_max_wait(), None);
    /// ```
    #[must_use]
    pub const fn get_max_wait(&self) -> Option<Duration> {
        self.max_wait
    }
}

edges!(DebounceOptions, leading: false);

/// Lodash's `throttle` options: `wait`, `leading` and `trailing` (both default true). A
/// throttle is a debounce whose max wait is its wait, as lodash defines it: see the
/// `From<ThrottleOptions>` conversion to [`DebounceOptions`].
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use slidewin::debounce::{DebounceOptions, ThrottleOptions};
///
/// let opts = ThrottleOptions::new(Duration::from_millis(100)).trailing(false);
/// assert_eq!((opts.get_leading(), opts.get_trailing()), (true, false));
/// let same = DebounceOptions::new(Duration::from_millis(100))
///     .leading(true)
///     .trailing(false)
///     .max_wait(Duration::from_millis(100));
/// assert_eq!(DebounceOptions::from(opts), same);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ThrottleOptions {
    wait: Duration,
    leading: bool,
    trailing: bool,
}

impl ThrottleOptions {
    /// At most one run per `wait`, at both edges.
    ///
    /// ```
    /// use std::time::Duration;
    /// let opts = slidewin::debounce::ThrottleOptions::new(Duration::from_millis(100));
    /// assert_eq!(opts.get_wait(), Duration::from_millis(100));
    /// ```
    #[must_use]
    pub const fn new(wait: Duration) -> ThrottleOptions {
        ThrottleOptions {
            wait,
            leading: true,
            trailing: true,
        }
    }
}

edges!(ThrottleOptions, leading: true);

/// A throttle is a debounce with `max_wait = wait` (lodash's `throttle` calls its `debounce`
/// so).
impl From<ThrottleOptions> for DebounceOptions {
    fn from(t: ThrottleOptions) -> DebounceOptions {
        DebounceOptions::new(t.wait)
            .leading(t.leading)
            .trailing(t.trailing)
            .max_wait(t.wait)
    }
}

/// Lodash's `debounce` timing, checked: the rules a [`Debounced`](crate::debounce::Debounced)
/// state follows. Small and `Copy`: one serves any number of keys.
///
/// Made from [`DebounceOptions`] or [`ThrottleOptions`]. Values are refused, never clamped:
/// lodash silently raises a `maxWait` below `wait` to `wait`.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use slidewin::ConfigError;
/// use slidewin::debounce::{Debounce, DebounceOptions, ThrottleOptions};
///
/// let throttle = Debounce::new(ThrottleOptions::new(Duration::from_millis(100)))?;
/// assert_eq!(throttle.max_wait(), Some(Duration::from_millis(100)));
///
/// let short = DebounceOptions::new(Duration::from_millis(60)).max_wait(Duration::from_millis(30));
/// assert_eq!(
///     Debounce::new(short).unwrap_err().to_string(),
///     "max_wait must be at least wait: got max_wait 30ms and wait 60ms"
/// );
/// # Ok::<(), ConfigError>(())
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Debounce {
    /// In nanoseconds, above zero.
    pub(super) wait: u64,
    /// In nanoseconds, at least `wait`.
    pub(super) max_wait: Option<u64>,
    pub(super) leading: bool,
    /// Or `leading`, or both.
    pub(super) trailing: bool,
}

impl Debounce {
    /// The rules `options` describe: [`DebounceOptions`], or [`ThrottleOptions`] (a debounce
    /// with `max_wait = wait`).
    ///
    /// # Errors
    ///
    /// [`ConfigError::ZeroWait`], [`ConfigError::WaitTooLong`] (the wait or the max wait),
    /// [`ConfigError::MaxWaitShorterThanWait`], [`ConfigError::NoEdge`].
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::ConfigError;
    /// use slidewin::debounce::{Debounce, DebounceOptions};
    ///
    /// let search = Debounce::new(DebounceOptions::new(Duration::from_millis(300)))?;
    /// assert_eq!(search.wait(), Duration::from_millis(300));
    /// let never = DebounceOptions::new(Duration::from_millis(300)).trailing(false);
    /// assert_eq!(Debounce::new(never), Err(ConfigError::NoEdge));
    /// # Ok::<(), ConfigError>(())
    /// ```
    pub fn new(options: impl Into<DebounceOptions>) -> Result<Debounce, ConfigError> {
        let options = options.into();
        let nanos = |wait: Duration| {
            u64::try_from(wait.as_nanos()).map_err(|_| ConfigError::WaitTooLong { wait })
        };
        let wait = nanos(options.wait)?;
        if wait == 0 {
            return Err(ConfigError::ZeroWait);
        }
        let max_wait = match options.max_wait {
            Some(max_wait) if max_wait < options.wait => {
                return Err(ConfigError::MaxWaitShorterThanWait {
                    max_wait,
                    wait: options.wait,
                });
            }
            Some(max_wait) => Some(nanos(max_wait)?),
            None => None,
        };
        if !options.leading && !options.trailing {
            return Err(ConfigError::NoEdge);
        }
        Ok(Debounce {
            wait,
            max_wait,
            leading: options.leading,
            trailing: options.trailing,
        })
    }

    /// How long a window stays open after a call.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::debounce::{Debounce, DebounceOptions};
    /// let d = Debounce::new(DebounceOptions::new(Duration::from_millis(300)))?;
    /// assert_eq!(d.wait(), Duration::from_millis(300));
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    #[must_use]
    pub const fn wait(&self) -> Duration {
        Duration::from_nanos(self.wait)
    }

    /// The longest calls may be put off while they keep coming, if any.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::debounce::{Debounce, DebounceOptions};
    /// let d = Debounce::new(DebounceOptions::new(Duration::from_millis(300)))?;
    /// assert_eq!(d.max_wait(), None);
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    #[must_use]
    pub const fn max_wait(&self) -> Option<Duration> {
        match self.max_wait {
            Some(nanos) => Some(Duration::from_nanos(nanos)),
            None => None,
        }
    }

    /// Whether a call on a quiet key runs at once.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::debounce::{Debounce, ThrottleOptions};
    /// assert!(Debounce::new(ThrottleOptions::new(Duration::from_millis(100)))?.leading());
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    #[must_use]
    pub const fn leading(&self) -> bool {
        self.leading
    }

    /// Whether the last call of a window runs when the window closes.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::debounce::{Debounce, DebounceOptions};
    /// assert!(Debounce::new(DebounceOptions::new(Duration::from_millis(300)))?.trailing());
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    #[must_use]
    pub const fn trailing(&self) -> bool {
        self.trailing
    }
}

impl fmt::Debug for Debounce {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Debounce")
            .field("wait", &self.wait())
            .field("max_wait", &self.max_wait())
            .field("leading", &self.leading)
            .field("trailing", &self.trailing)
            .finish()
    }
}
