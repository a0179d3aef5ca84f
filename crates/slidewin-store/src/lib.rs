//! Where slidewin's limits keep their counts: the one seam that the HTTP layer
//! (`slidewin-http`) and the rate-limit service (`slidewin-server`) both decide through.
//!
//! - [`Backend`]: makes a **store** for a rule set, **checks** a key of it (every rule admits
//!   and all are charged, or none is), **reserves** an estimated cost and **settles** it at the
//!   actual one once the work is done, and **carries** a retired store's counts into the one
//!   replacing it after a reload. It also says what it is ([`BackendKind`]), whether it
//!   answers ([`BackendState`]) and what it holds.
//! - [`Memory`]: counts in this process, with a cap on live keys and an optional budget of
//!   bytes. [`Redis`] (the `redis` feature): counts on Redis or a Redis Cluster, shared by every
//!   process on the same prefix.
//! - [`Checked`]: a check's answer, each rule's decision and whether a failure policy made it
//!   (**degraded**); [`BackendError`]: a check no one could decide.
//!
//! ```
//! use slidewin::Moment;
//! use slidewin::limit::{Kind, Rule, RuleSet};
//! use slidewin_store::{Backend, BackendKind, BackendState, Memory};
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let memory = Memory::new();
//! let store = memory.store(RuleSet::from(Rule::new("api", Kind::SlidingLog, "1/s".parse()?)?))?;
//! assert!(memory.check(&store, "ann".into(), Moment::ZERO, 1).await?.allowed());
//! assert!(!memory.check(&store, "ann".into(), Moment::ZERO, 1).await?.allowed());
//! assert_eq!((memory.kind(), memory.state()), (BackendKind::Memory, BackendState::Up));
//! # Ok(()) }
//! ```

mod checked;
#[cfg(feature = "redis")]
mod denials;
mod error;
mod key;
mod memory;
#[cfg(feature = "redis")]
mod redis;
mod state;

use std::future::Future;

use slidewin::limit::{Reservation, RuleSet};
use slidewin::{ConfigError, Moment};

pub use self::checked::Checked;
pub use self::error::BackendError;
pub use self::key::RequestKey;
pub use self::memory::{Memory, MemoryStore};
#[cfg(feature = "redis")]
pub use self::redis::Redis;
pub use self::state::{BackendKind, BackendState};

/// Where counts are kept: one trait over [`Memory`] and [`Redis`], so one layer type, one
/// service and one test serve both.
///
/// A backend makes a **store** for each rule set its caller holds, and checks a key of a
/// store (a [`RequestKey`]: an address or text): every rule of the set admits, and then all
/// are charged, or none is (all-or-nothing).
///
/// # Example
///
/// ```
/// use slidewin::Moment;
/// use slidewin::limit::{Kind, Rule, RuleSet};
/// use slidewin_store::{Backend, Memory};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let memory = Memory::new();
/// let store = memory.store(RuleSet::from(Rule::new("api", Kind::SlidingLog, "1/s".parse()?)?))?;
/// assert!(memory.check(&store, "ann".into(), Moment::ZERO, 1).await?.allowed());
/// assert!(!memory.check(&store, "ann".into(), Moment::ZERO, 1).await?.allowed());
/// # Ok(()) }
/// ```
pub trait Backend: Send + Sync + 'static {
    /// The counts of one rule set, for every key.
    type Store: Send + Sync + 'static;

    /// A store for `rules`.
    ///
    /// # Errors
    ///
    /// What the backend cannot hold, named (a cap of zero keys, a rule Redis cannot count).
    fn store(&self, rules: RuleSet) -> Result<Self::Store, ConfigError>;

    /// Decides about `cost` for `key` in `store` at `now` (the caller's clock; a backend may
    /// keep time of its own, as Redis does by default), and charges it when every rule admits.
    fn check<'a>(
        &'a self,
        store: &'a Self::Store,
        key: RequestKey<'a>,
        now: Moment,
        cost: u64,
    ) -> impl Future<Output = Result<Checked, BackendError>> + Send + 'a;

    /// Decides about `cost` for `key` in `store` at `now` as [`check`](Backend::check) would,
    /// charging nothing and making no key: a question (is a unit left?).
    ///
    /// ```
    /// use slidewin::Moment;
    /// use slidewin::limit::{Kind, Rule, RuleSet};
    /// use slidewin_store::{Backend, Memory};
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let memory = Memory::new();
    /// let store = memory.store(RuleSet::from(Rule::new("r", Kind::Gcra, "2/s".parse()?)?))?;
    /// memory.check(&store, "ann".into(), Moment::ZERO, 2).await?;
    /// assert!(!memory.peek(&store, "ann".into(), Moment::ZERO, 1).await?.allowed());
    /// assert!(memory.peek(&store, "bob".into(), Moment::ZERO, 2).await?.allowed());
    /// # Ok(()) }
    /// ```
    fn peek<'a>(
        &'a self,
        store: &'a Self::Store,
        key: RequestKey<'a>,
        now: Moment,
        cost: u64,
    ) -> impl Future<Output = Result<Checked, BackendError>> + Send + 'a;

    /// Gives back up to `units` that `key` holds under `store`'s
    /// [`Leases`](slidewin::limit::Leases) rules at `now` (a request in flight that ended),
    /// the oldest first; the most any rule gave back. Rates give back nothing. The default
    /// gives back nothing, for a backend without leases.
    ///
    /// ```
    /// use slidewin::Moment;
    /// use slidewin::limit::{Kind, Rule, RuleSet};
    /// use slidewin_store::{Backend, Memory};
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let memory = Memory::new();
    /// let in_flight = Rule::new("in_flight", Kind::Leases, "1 per 30s".parse()?)?;
    /// let store = memory.store(RuleSet::from(in_flight))?;
    /// assert!(memory.check(&store, "ann".into(), Moment::ZERO, 1).await?.allowed());
    /// assert!(!memory.check(&store, "ann".into(), Moment::ZERO, 1).await?.allowed());
    /// assert_eq!(memory.release(&store, "ann".into(), Moment::ZERO, 1).await?, 1);
    /// assert!(memory.check(&store, "ann".into(), Moment::ZERO, 1).await?.allowed());
    /// # Ok(()) }
    /// ```
    fn release<'a>(
        &'a self,
        store: &'a Self::Store,
        key: RequestKey<'a>,
        now: Moment,
        units: u64,
    ) -> impl Future<Output = Result<u64, BackendError>> + Send + 'a {
        let _ = (store, key, now, units);
        std::future::ready(Ok(0))
    }

    /// [`check`](Backend::check)s an `estimate` of a cost known only after the work (tokens a
    /// model will use, bytes a response will hold) and, when every rule admits it, answers the
    /// [`Reservation`] that [`settle`](Backend::settle) changes to the actual cost. The
    /// reservation is a plain `Copy` value (the time counted at and the units): a layer keeps
    /// it in the response's extensions or its future, beside the key, and settles when the
    /// cost is known; one never settled keeps its estimate.
    ///
    /// `None` when nothing was recorded to settle: a denial, an estimate of 0, or an answer a
    /// failure policy made while the store was away ([`Checked::degraded`]). The default
    /// checks and reserves nothing, for a backend that cannot settle.
    ///
    /// ```
    /// use slidewin::Moment;
    /// use slidewin::limit::{Kind, Rule, RuleSet};
    /// use slidewin_store::{Backend, Memory};
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let memory = Memory::new();
    /// let tokens = memory.store(RuleSet::new([
    ///     Rule::new("minute", Kind::SlidingLog, "10000/minute".parse()?)?,
    ///     Rule::new("day", Kind::SlidingLog, "100000/day".parse()?)?,
    /// ])?)?;
    /// let (checked, reserved) = memory.reserve(&tokens, "ann".into(), Moment::ZERO, 1_000).await?;
    /// assert!(checked.allowed());
    /// // The upstream answered with its count: 4,000 tokens.
    /// assert!(memory.settle(&tokens, "ann".into(), reserved.unwrap(), 4_000).await?);
    /// let later = memory.check(&tokens, "ann".into(), Moment::from_secs(1), 0).await?;
    /// assert_eq!(later.decision().remaining(), 6_000);
    /// # Ok(()) }
    /// ```
    fn reserve<'a>(
        &'a self,
        store: &'a Self::Store,
        key: RequestKey<'a>,
        now: Moment,
        estimate: u64,
    ) -> impl Future<Output = Result<(Checked, Option<Reservation>), BackendError>> + Send + 'a
    {
        let checked = self.check(store, key, now, estimate);
        async move { Ok((checked.await?, None)) }
    }

    /// Changes the cost of the admission `reservation` made for `key` under `store` to
    /// `actual`, in the windows it was admitted in (see
    /// [`Limiter::settle`](slidewin::Limiter::settle)): more than the room left is debt that
    /// later requests wait out, less gives units back. Whether anything held it still (`false`
    /// once its windows have passed, or for a key never reserved). The default changes
    /// nothing.
    ///
    /// An [`unreserved`](Reservation::unreserved) reservation is a charge: `actual` counted
    /// at its time whatever the limit, the key made if need be, as a check makes it (`true`
    /// when `actual` is more than 0).
    ///
    /// # Errors
    ///
    /// [`BackendError::Unavailable`] while the store is away: a settle has no failure
    /// policy (the reservation keeps its estimate, as one never settled does). A charge of a
    /// new key: [`BackendError::KeysFull`] and [`BackendError::MemoryFull`], as a check's.
    ///
    /// ```
    /// use slidewin::Moment;
    /// use slidewin::limit::{Kind, Rule, RuleSet};
    /// use slidewin_store::{Backend, Memory};
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let memory = Memory::new();
    /// let bytes = memory.store(RuleSet::from(Rule::new("bytes", Kind::Gcra, "1000/s".parse()?)?))?;
    /// let (_, reserved) = memory.reserve(&bytes, "ann".into(), Moment::ZERO, 800).await?;
    /// assert!(memory.settle(&bytes, "ann".into(), reserved.unwrap(), 100).await?);
    /// assert!(memory.check(&bytes, "ann".into(), Moment::ZERO, 900).await?.allowed());
    /// # Ok(()) }
    /// ```
    fn settle<'a>(
        &'a self,
        store: &'a Self::Store,
        key: RequestKey<'a>,
        reservation: Reservation,
        actual: u64,
    ) -> impl Future<Output = Result<bool, BackendError>> + Send + 'a {
        let _ = (store, key, reservation, actual);
        std::future::ready(Ok(false))
    }

    /// [`check`](Backend::check), answered at once by a backend that never waits (memory), or
    /// by one that knows the answer already (a denial Redis gave that still holds): the caller
    /// then needs no boxed future for the request. `None`, the default, means the backend did
    /// nothing and must be asked with `check`.
    fn check_at_once(
        &self,
        store: &Self::Store,
        key: RequestKey<'_>,
        now: Moment,
        cost: u64,
    ) -> Option<Result<Checked, BackendError>> {
        let _ = (store, key, now, cost);
        None
    }

    /// How many checks it answered from what it knew without asking its store (Redis's
    /// denials kept until they end); 0 for a backend that keeps none.
    fn denials_answered(&self) -> u64 {
        0
    }

    /// Moves the counts of `from`, a store being retired (its rule set changed by a reload),
    /// into `to`, the store replacing it, converted to `to`'s quotas at `now`; returns how
    /// many keys were carried. So a limit kept by name across a reload keeps its counts, and
    /// every answer afterwards is against the new quota.
    ///
    /// The default carries nothing and answers 0: for a backend whose counts do not live in
    /// the store, which has nothing to move. [`Redis`] is one: it keeps a rule's counts in
    /// Redis under `{prefix:key}:name:kind`, a key without the quota in it, so a quota changed
    /// under the same name and kind is read from the same counts by the new store. [`Memory`]
    /// moves its keys, converted as [`Keyed::carry_from`](slidewin::Keyed::carry_from) says.
    ///
    /// # Example
    ///
    /// ```
    /// use slidewin::Moment;
    /// use slidewin::limit::{Kind, Rule, RuleSet};
    /// use slidewin_store::{Backend, Memory};
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let memory = Memory::new();
    /// let api = |quota: &str| Rule::new("api", Kind::SlidingLog, quota.parse().unwrap());
    /// let old = memory.store(RuleSet::from(api("2/minute")?))?;
    /// assert!(memory.check(&old, "ann".into(), Moment::ZERO, 2).await?.allowed());
    ///
    /// // The reload raises the limit to 3: ann has used 2 of them.
    /// let new = memory.store(RuleSet::from(api("3/minute")?))?;
    /// assert_eq!(memory.carry(&new, &old, Moment::ZERO), 1);
    /// let checked = memory.check(&new, "ann".into(), Moment::ZERO, 1).await?;
    /// assert!(checked.allowed());
    /// assert_eq!((checked.decision().limit(), checked.decision().remaining()), (3, 0));
    /// # Ok(()) }
    /// ```
    fn carry(&self, to: &Self::Store, from: &Self::Store, now: Moment) -> usize {
        let _ = (to, from, now);
        0
    }

    /// What it keeps its counts in.
    fn kind(&self) -> BackendKind;

    /// Whether it answers now. The default: always [`Up`](BackendState::Up), for a backend
    /// that cannot fail.
    fn state(&self) -> BackendState {
        BackendState::Up
    }

    /// Waits until its [`state`](Backend::state) is other than `from`, and answers the new
    /// one (at once if it already is): for a caller that reports health as it changes. The
    /// default never completes, for a backend that is always up.
    ///
    /// ```
    /// use std::future::Future;
    /// use std::pin::pin;
    /// use std::task::{Context, Poll, Waker};
    /// use slidewin_store::{Backend, BackendState, Memory};
    ///
    /// let memory = Memory::new();
    /// let mut changed = pin!(memory.state_changed(BackendState::Up));
    /// assert!(changed.as_mut().poll(&mut Context::from_waker(Waker::noop())).is_pending());
    /// let mut now = pin!(memory.state_changed(BackendState::Down));
    /// assert_eq!(now.as_mut().poll(&mut Context::from_waker(Waker::noop())), Poll::Ready(BackendState::Up));
    /// ```
    fn state_changed(&self, from: BackendState) -> impl Future<Output = BackendState> + Send {
        let now = self.state();
        async move {
            if now == from {
                std::future::pending::<()>().await;
            }
            now
        }
    }

    /// What answers while it is not up, if anything: checks fail without one.
    #[cfg(feature = "redis")]
    fn failure_policy(&self) -> Option<slidewin_redis::FailurePolicy> {
        None
    }

    /// The keys `store` holds, where the backend counts them (memory); `None` where the store
    /// is elsewhere (Redis).
    fn keys(&self, store: &Self::Store) -> Option<u64> {
        let _ = store;
        None
    }

    /// The bytes its keys hold on its memory budget, and the budget: `None` where it keeps no
    /// budget.
    fn memory(&self) -> Option<(usize, usize)> {
        None
    }

    /// Whether `store` holds a key still live at `now` (those gone idle are dropped first):
    /// a store that holds none may be dropped and made again without losing a count. The
    /// default, `true`, never lets one go; Redis, whose stores hold nothing, answers `false`.
    fn holds_keys(&self, store: &Self::Store, now: Moment) -> bool {
        let _ = (store, now);
        true
    }
}
