//! Reading a [`WindowMetrics`]: the window's figures summed from its valid buckets, its sums and
//! rates, and its buckets one by one.

use std::time::Duration;

use super::slot::SlotRead;
use super::{MetricEvent, MetricStats, WindowMetrics};
use crate::time::{Clock, Moment};

impl WindowMetrics {
    /// The slot of `epoch`, if it holds that epoch.
    fn read_epoch(&self, epoch: u64) -> Option<SlotRead> {
        self.slot(epoch).read_if(|e| e == epoch)
    }

    /// The figures of the window at `now`: the valid buckets summed, and the time they cover.
    /// O(`buckets`).
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::stats::MetricEvent;
    /// use slidewin::{Moment, WindowMetrics};
    ///
    /// let metrics = WindowMetrics::new(Duration::from_secs(10), 10, Moment::ZERO)?;
    /// for s in 0..20 {
    ///     metrics.add(Moment::from_secs(s), MetricEvent::Success, 9);
    ///     metrics.add(Moment::from_secs(s), MetricEvent::Exception, 1);
    /// }
    /// let stats = metrics.stats(Moment::from_millis(19_500));
    /// assert_eq!(stats.start(), Moment::from_secs(10));
    /// assert_eq!(stats.covered(), Duration::from_millis(9_500));
    /// assert_eq!(stats.count(MetricEvent::Success), 90);
    /// assert_eq!(stats.exception_ratio(), Some(0.1));
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    #[must_use]
    pub fn stats(&self, now: Moment) -> MetricStats {
        let (top, now) = self.read_at(now);
        let bottom = top.saturating_sub(self.bucket_count - 1);
        let from = self.start.max(Moment::from_nanos(bottom * self.bucket));
        let covered = (now - from).max(Duration::from_nanos(self.bucket));
        let mut stats = MetricStats::empty(from, covered);
        for (i, slot) in (0_u64..).zip(self.slots.iter()) {
            if let Some(read) = slot.read_if(|e| (bottom..=top).contains(&e) && e & self.mask == i)
            {
                stats.merge(&read);
            }
        }
        stats
    }

    /// [`stats`](WindowMetrics::stats) at `clock.now()`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::stats::MetricEvent;
    /// use slidewin::time::ManualClock;
    /// use slidewin::{Moment, WindowMetrics};
    /// let clock = ManualClock::new(Moment::ZERO);
    /// let metrics = WindowMetrics::new(Duration::from_secs(1), 2, Moment::ZERO)?;
    /// metrics.add_now(&clock, MetricEvent::Pass, 2);
    /// clock.advance(Duration::from_secs(1));
    /// assert_eq!(metrics.stats_now(&clock).count(MetricEvent::Pass), 0);
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    #[must_use]
    pub fn stats_now(&self, clock: &impl Clock) -> MetricStats {
        self.stats(clock.now())
    }

    /// How many `event`s in the window at `now`: [`stats`](WindowMetrics::stats)`(now).count(event)`,
    /// reading only that counter.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::stats::MetricEvent;
    /// use slidewin::{Moment, WindowMetrics};
    /// let metrics = WindowMetrics::new(Duration::from_secs(1), 2, Moment::ZERO)?;
    /// metrics.add(Moment::from_millis(100), MetricEvent::Block, 2);
    /// metrics.add(Moment::from_millis(700), MetricEvent::Block, 3);
    /// assert_eq!(metrics.sum(Moment::from_millis(900), MetricEvent::Block), 5);
    /// assert_eq!(metrics.sum(Moment::from_millis(1_000), MetricEvent::Block), 3);
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    #[must_use]
    pub fn sum(&self, now: Moment, event: MetricEvent) -> u64 {
        self.window_count(now, event).0
    }

    /// [`sum`](WindowMetrics::sum) at `clock.now()`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::stats::MetricEvent;
    /// use slidewin::time::ManualClock;
    /// use slidewin::{Moment, WindowMetrics};
    /// let clock = ManualClock::new(Moment::from_millis(100));
    /// let metrics = WindowMetrics::new(Duration::from_secs(1), 2, Moment::ZERO)?;
    /// metrics.add_now(&clock, MetricEvent::Block, 2);
    /// assert_eq!(metrics.sum_now(&clock, MetricEvent::Block), 2);
    /// clock.advance(Duration::from_secs(1));
    /// assert_eq!(metrics.sum_now(&clock, MetricEvent::Block), 0);
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    #[must_use]
    pub fn sum_now(&self, clock: &impl Clock, event: MetricEvent) -> u64 {
        self.sum(clock.now(), event)
    }

    /// `event`s per second in the window at `now`, over the time the window covers:
    /// [`stats`](WindowMetrics::stats)`(now).rate(event)`, reading only that counter.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::stats::MetricEvent;
    /// use slidewin::{Moment, WindowMetrics};
    /// let metrics = WindowMetrics::new(Duration::from_secs(1), 2, Moment::ZERO)?;
    /// for ms in (0..1_000).step_by(10) {
    ///     metrics.add(Moment::from_millis(ms), MetricEvent::Pass, 1);
    /// }
    /// assert_eq!(metrics.rate(Moment::from_millis(990), MetricEvent::Pass), 100.0 / 0.99);
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    #[must_use]
    pub fn rate(&self, now: Moment, event: MetricEvent) -> f64 {
        let (count, covered) = self.window_count(now, event);
        #[allow(
            clippy::cast_precision_loss,
            reason = "a rate needs no more than 53 bits"
        )]
        let count = count as f64;
        count / covered.as_secs_f64()
    }

    /// [`rate`](WindowMetrics::rate) at `clock.now()`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::stats::MetricEvent;
    /// use slidewin::time::ManualClock;
    /// use slidewin::{Moment, WindowMetrics};
    /// let clock = ManualClock::new(Moment::from_millis(250));
    /// let metrics = WindowMetrics::new(Duration::from_secs(1), 2, Moment::ZERO)?;
    /// metrics.add_now(&clock, MetricEvent::Pass, 50);
    /// assert_eq!(metrics.rate_now(&clock, MetricEvent::Pass), 100.0); // 50 over one bucket, 500 ms
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    #[must_use]
    pub fn rate_now(&self, clock: &impl Clock, event: MetricEvent) -> f64 {
        self.rate(clock.now(), event)
    }

    fn window_count(&self, now: Moment, event: MetricEvent) -> (u64, Duration) {
        let (top, now) = self.read_at(now);
        let bottom = top.saturating_sub(self.bucket_count - 1);
        let from = self.start.max(Moment::from_nanos(bottom * self.bucket));
        let covered = (now - from).max(Duration::from_nanos(self.bucket));
        let mut count = 0_u64;
        for (i, slot) in (0_u64..).zip(self.slots.iter()) {
            let valid = |e: u64| (bottom..=top).contains(&e) && e & self.mask == i;
            if let Some(n) = slot.read_counter_if(event.index(), valid) {
                count = count.saturating_add(n);
            }
        }
        (count, covered)
    }

    /// The bucket holding `now` (or the newest recorded, if later), if it has been recorded in.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::stats::MetricEvent;
    /// use slidewin::{Moment, WindowMetrics};
    /// let metrics = WindowMetrics::new(Duration::from_secs(1), 2, Moment::ZERO)?;
    /// metrics.add(Moment::from_millis(700), MetricEvent::Pass, 4);
    /// let bucket = metrics.current_bucket(Moment::from_millis(900)).unwrap();
    /// assert_eq!(bucket.start(), Moment::from_millis(500));
    /// assert_eq!(bucket.count(MetricEvent::Pass), 4);
    /// assert!(metrics.current_bucket(Moment::from_millis(1_000)).is_none());
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    #[must_use]
    pub fn current_bucket(&self, now: Moment) -> Option<MetricStats> {
        let (top, _) = self.read_at(now);
        self.bucket_stats(top)
    }

    /// [`current_bucket`](WindowMetrics::current_bucket) at `clock.now()`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::stats::MetricEvent;
    /// use slidewin::time::ManualClock;
    /// use slidewin::{Moment, WindowMetrics};
    /// let clock = ManualClock::new(Moment::from_millis(700));
    /// let metrics = WindowMetrics::new(Duration::from_secs(1), 2, Moment::ZERO)?;
    /// metrics.add_now(&clock, MetricEvent::Pass, 4);
    /// let bucket = metrics.current_bucket_now(&clock).unwrap();
    /// assert_eq!((bucket.start(), bucket.count(MetricEvent::Pass)), (Moment::from_millis(500), 4));
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    #[must_use]
    pub fn current_bucket_now(&self, clock: &impl Clock) -> Option<MetricStats> {
        self.current_bucket(clock.now())
    }

    /// The bucket before the one holding `now`, if the ring still holds it. With one bucket it
    /// is outside the window, and it is gone as soon as the current bucket is recorded in
    /// (never the current bucket passed off as the previous one: Sentinel #3309).
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::stats::MetricEvent;
    /// use slidewin::{Moment, WindowMetrics};
    /// let metrics = WindowMetrics::new(Duration::from_secs(1), 2, Moment::ZERO)?;
    /// metrics.add(Moment::from_millis(300), MetricEvent::Pass, 6);
    /// let previous = metrics.previous_bucket(Moment::from_millis(800)).unwrap();
    /// assert_eq!(previous.count(MetricEvent::Pass), 6);
    /// assert!(metrics.previous_bucket(Moment::from_millis(1_200)).is_none()); // nothing in [500 ms, 1 s)
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    #[must_use]
    pub fn previous_bucket(&self, now: Moment) -> Option<MetricStats> {
        let (top, _) = self.read_at(now);
        self.bucket_stats(top.checked_sub(1)?)
    }

    /// [`previous_bucket`](WindowMetrics::previous_bucket) at `clock.now()`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::stats::MetricEvent;
    /// use slidewin::time::ManualClock;
    /// use slidewin::{Moment, WindowMetrics};
    /// let clock = ManualClock::new(Moment::from_millis(300));
    /// let metrics = WindowMetrics::new(Duration::from_secs(1), 2, Moment::ZERO)?;
    /// metrics.add_now(&clock, MetricEvent::Pass, 6);
    /// clock.set(Moment::from_millis(800));
    /// let previous = metrics.previous_bucket_now(&clock).unwrap();
    /// assert_eq!(previous.count(MetricEvent::Pass), 6);
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    #[must_use]
    pub fn previous_bucket_now(&self, clock: &impl Clock) -> Option<MetricStats> {
        self.previous_bucket(clock.now())
    }

    /// Every valid bucket at `now` that has been recorded in, oldest first: the snapshot the
    /// window's figures are summed from.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::stats::MetricEvent;
    /// use slidewin::{Moment, WindowMetrics};
    /// let metrics = WindowMetrics::new(Duration::from_secs(3), 3, Moment::ZERO)?;
    /// for s in [0, 2, 3] {
    ///     metrics.add(Moment::from_secs(s), MetricEvent::Pass, s + 1);
    /// }
    /// let buckets = metrics.buckets(Moment::from_secs(3));
    /// let starts: Vec<_> = buckets.iter().map(|b| b.start().as_nanos() / 1_000_000_000).collect();
    /// assert_eq!(starts, [2, 3]); // [0 s, 1 s) has left; nothing was recorded in [1 s, 2 s)
    /// assert_eq!(buckets[1].count(MetricEvent::Pass), 4);
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    #[must_use]
    pub fn buckets(&self, now: Moment) -> Vec<MetricStats> {
        let (top, _) = self.read_at(now);
        let bottom = top.saturating_sub(self.bucket_count - 1);
        (bottom..=top)
            .filter_map(|e| self.bucket_stats(e))
            .collect()
    }

    /// [`buckets`](WindowMetrics::buckets) at `clock.now()`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::stats::MetricEvent;
    /// use slidewin::time::ManualClock;
    /// use slidewin::{Moment, WindowMetrics};
    /// let clock = ManualClock::new(Moment::ZERO);
    /// let metrics = WindowMetrics::new(Duration::from_secs(3), 3, Moment::ZERO)?;
    /// for n in 1..=4 {
    ///     metrics.add_now(&clock, MetricEvent::Pass, n);
    ///     clock.advance(Duration::from_secs(1));
    /// }
    /// // At 4 s the window holds [2 s, 3 s) and [3 s, 4 s); [4 s, 5 s) has no event yet.
    /// let counts: Vec<u64> = metrics.buckets_now(&clock).iter().map(|b| b.count(MetricEvent::Pass)).collect();
    /// assert_eq!(counts, [3, 4]);
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    #[must_use]
    pub fn buckets_now(&self, clock: &impl Clock) -> Vec<MetricStats> {
        self.buckets(clock.now())
    }

    /// The four event counts of the window at `now`, from bucket `floor` on (the circuit
    /// breaker's window, which restarts when it closes), and whether bucket `floor` is one of
    /// those summed. O(`buckets`).
    pub(crate) fn counts_since(&self, now: Moment, floor: u64) -> ([u64; 4], bool) {
        let (top, _) = self.read_at(now);
        let bottom = top.saturating_sub(self.bucket_count - 1);
        let from = bottom.max(floor);
        let mut counts = [0_u64; 4];
        for (i, slot) in (0_u64..).zip(self.slots.iter()) {
            if let Some(read) = slot.read_if(|e| (from..=top).contains(&e) && e & self.mask == i) {
                for (sum, n) in counts.iter_mut().zip(read.counts) {
                    *sum = sum.saturating_add(n);
                }
            }
        }
        (counts, (bottom..=top).contains(&floor))
    }

    /// The bucket a read at `now` ends in (its epoch), and its four event counts so far.
    pub(crate) fn newest_counts(&self, now: Moment) -> (u64, [u64; 4]) {
        let (top, _) = self.read_at(now);
        let mut counts = [0_u64; 4];
        if let Some(read) = self.read_epoch(top) {
            counts.copy_from_slice(&read.counts[..4]);
        }
        (top, counts)
    }

    fn bucket_stats(&self, epoch: u64) -> Option<MetricStats> {
        let read = self.read_epoch(epoch)?;
        let mut stats = MetricStats::empty(
            Moment::from_nanos(epoch * self.bucket),
            Duration::from_nanos(self.bucket),
        );
        stats.merge(&read);
        Some(stats)
    }
}
