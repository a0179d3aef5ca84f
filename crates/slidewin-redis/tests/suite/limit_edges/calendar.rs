//! Issue 33: calendar quotas at their edges, the same on memory, a Redis and a Redis Cluster:
//! the boundary instant, days of 23 and 25 hours in Paris, a monthly cycle from the 31st, a
//! clock gone back, and reserve then settle. The windows are the client's, sent with each
//! call: Redis must count in them as memory does.

use super::*;

use jiff::Timestamp;
use jiff::civil::date;
use jiff::tz::TimeZone;
use slidewin::limit::CalendarQuota;

/// `quota` (`2 per calendar day`) in `zone`, alone, as the rule `name`.
fn calendar(name: &str, quota: &str, zone: &str) -> Rules {
    let quota: CalendarQuota = quota.parse().unwrap();
    let quota = quota.in_zone(TimeZone::get(zone).unwrap());
    Rules::try_from(Rule::calendar(name, quota).unwrap()).unwrap()
}

fn at(text: &str) -> Moment {
    Moment::try_from(text.parse::<Timestamp>().unwrap()).unwrap()
}

fn hours(n: u64) -> Duration {
    Duration::from_secs(n * 3_600)
}

on_every_backend! {
    /// Each window is `[start, end)`: a check a microsecond before midnight counts in the day
    /// ending then, one at midnight exactly in the next day, which resets at its own end.
    async fn calendar_a_check_at_the_window_end_counts_in_the_next(b) {
        let r = calendar("daily", "2 per calendar day", "UTC");
        let last = at("2026-03-10T23:59:59.999999Z");
        let full = b.check(&r, "k", last, 2).await.unwrap();
        assert_eq!(summary(&full), (true, 0, Duration::from_micros(1), None));
        let denied = b.check(&r, "k", last, 1).await.unwrap();
        let micro = Some(Duration::from_micros(1));
        assert_eq!(summary(&denied), (false, 0, Duration::from_micros(1), micro));
        let next = b.check(&r, "k", at("2026-03-11T00:00:00Z"), 2).await.unwrap();
        assert_eq!(summary(&next), (true, 0, hours(24), None));
        // A peek of nothing in an empty window waits for nothing.
        let empty = b.peek(&r, "other", last, 0).await.unwrap();
        assert_eq!(summary(&empty), (true, 2, Duration::ZERO, None));
    }

    /// Paris's days across daylight saving: 23 hours on 2026-03-29, 25 on 2026-10-25; the
    /// reset is the real midnight there.
    async fn calendar_days_in_paris_across_daylight_saving(b) {
        let r = calendar("daily", "1 per calendar day", "Europe/Paris");
        // 2026-03-29 in Paris: 2026-03-28T23:00Z to 2026-03-29T22:00Z.
        let spring = b.check(&r, "k", at("2026-03-28T23:00:00Z"), 1).await.unwrap();
        assert_eq!(summary(&spring), (true, 0, hours(23), None));
        let denied = b.check(&r, "k", at("2026-03-29T21:00:00Z"), 1).await.unwrap();
        assert_eq!(summary(&denied), (false, 0, hours(1), Some(hours(1))));
        let next = b.check(&r, "k", at("2026-03-29T22:00:00Z"), 1).await.unwrap();
        assert_eq!(summary(&next), (true, 0, hours(24), None));
        // 2026-10-25 in Paris: 2026-10-24T22:00Z to 2026-10-25T23:00Z.
        let autumn = b.check(&r, "k", at("2026-10-24T22:00:00Z"), 1).await.unwrap();
        assert_eq!(summary(&autumn), (true, 0, hours(25), None));
        let late = b.check(&r, "k", at("2026-10-25T22:30:00Z"), 1).await.unwrap();
        let half = Duration::from_secs(30 * 60);
        assert_eq!(summary(&late), (false, 0, half, Some(half)));
        assert!(b.check(&r, "k", at("2026-10-25T23:00:00Z"), 1).await.unwrap().allowed());
    }

    /// A monthly cycle from the 31st: February's starts on the 28th (no 31st), March's on the
    /// 31st; each check counts in its own cycle.
    async fn calendar_a_monthly_cycle_from_the_31st(b) {
        let quota: CalendarQuota = "1 per calendar month".parse().unwrap();
        let cycle = quota.anchored(date(2026, 1, 31).at(0, 0, 0, 0));
        let r = Rules::try_from(Rule::calendar("cycle", cycle).unwrap()).unwrap();
        let jan = b.check(&r, "k", at("2026-02-27T00:00:00Z"), 1).await.unwrap();
        assert_eq!(summary(&jan), (true, 0, hours(24), None));
        let feb = b.check(&r, "k", at("2026-02-28T00:00:00Z"), 1).await.unwrap();
        assert_eq!(summary(&feb), (true, 0, hours(31 * 24), None));
        let denied = b.check(&r, "k", at("2026-03-30T23:00:00Z"), 1).await.unwrap();
        assert_eq!(summary(&denied), (false, 0, hours(1), Some(hours(1))));
        let mar = b.check(&r, "k", at("2026-03-31T00:00:00Z"), 1).await.unwrap();
        assert_eq!(summary(&mar), (true, 0, hours(30 * 24), None)); // to April 30th
    }

    /// A clock gone back to an earlier day counts in the later day the key holds, and a
    /// reservation made then settles in that day.
    async fn calendar_a_clock_gone_back_counts_in_the_later_window(b) {
        let r = calendar("daily", "3 per calendar day", "UTC");
        assert!(b.check(&r, "k", at("2026-05-02T01:00:00Z"), 1).await.unwrap().allowed());
        let back = at("2026-05-01T23:00:00Z");
        let (decided, reserved) = b.reserve(&r, "k", back, 1).await;
        assert_eq!(summary(&decided), (true, 1, hours(25), None));
        let reserved = reserved.expect("admitted");
        assert_eq!(reserved.at(), at("2026-05-02T00:00:00Z"));
        assert!(b.settle(&r, "k", reserved, 2).await);
        let left = b.peek(&r, "k", at("2026-05-02T02:00:00Z"), 0).await.unwrap();
        assert_eq!(left.remaining(), 0);
    }

    /// Reserve, then settle in the same window: down, up (never past the limit), and a
    /// reservation of a window that has ended changes nothing.
    async fn calendar_reserve_then_settle(b) {
        let r = calendar("tokens", "10 per calendar day", "Europe/Paris");
        let noon = at("2026-10-25T11:00:00Z");
        let (decided, reserved) = b.reserve(&r, "k", noon, 6).await;
        assert_eq!(summary(&decided), (true, 4, hours(12), None));
        let reserved = reserved.expect("admitted");
        assert_eq!(reserved.at(), noon);
        assert!(b.settle(&r, "k", reserved, 2).await);
        assert_eq!(b.peek(&r, "k", noon, 0).await.unwrap().remaining(), 8);
        assert!(b.settle(&r, "k", reserved, 30).await);
        assert_eq!(b.peek(&r, "k", noon, 0).await.unwrap().remaining(), 0);
        let tomorrow = at("2026-10-25T23:00:00Z");
        assert!(b.check(&r, "k", tomorrow, 1).await.unwrap().allowed());
        assert!(!b.settle(&r, "k", reserved, 0).await);
        assert_eq!(b.peek(&r, "k", tomorrow, 0).await.unwrap().remaining(), 9);
    }

    /// A calendar rule beside a rate, all or nothing: a denial by either consumes from none.
    async fn calendar_beside_a_rate_is_all_or_nothing(b) {
        let daily: CalendarQuota = "3 per calendar day".parse().unwrap();
        let rate = Rule::new("rate", Kind::SlidingLog, "2/minute".parse().unwrap()).unwrap();
        let both = RuleSet::new([Rule::calendar("daily", daily).unwrap(), rate]).unwrap();
        let r = Rules::new(both).unwrap();
        let t = at("2026-01-01T12:00:00Z");
        assert!(b.check(&r, "k", t, 2).await.unwrap().allowed());
        let denied = b.check(&r, "k", t, 1).await.unwrap();
        assert!(!denied.allowed());
        assert_eq!(denied.binding(), 1);
        let later = t + Duration::from_secs(60);
        let last = b.check(&r, "k", later, 1).await.unwrap();
        assert_eq!(last.as_slice()[0].remaining(), 0);
        assert!(!b.check(&r, "k", later + Duration::from_secs(60), 1).await.unwrap().allowed());
    }
}

/// A batch whose checks of one key straddle a boundary, forward then back, on `redis`: each
/// counts in its own window as in memory (a clock gone back, in the later one).
async fn a_batch_across_a_boundary(redis: &RedisLimiter) {
    use slidewin_redis::Check;
    let r = calendar("daily", "2 per calendar day", "Europe/Paris");
    let times = [
        at("2026-03-29T21:59:59Z"),
        at("2026-03-29T21:59:59Z"),
        at("2026-03-29T22:00:00Z"),
        at("2026-03-29T21:00:00Z"),
        at("2026-03-29T22:00:01Z"),
    ];
    let checks: Vec<Check<'_>> = times
        .iter()
        .map(|&t| Check::new(&r, "k", 1).at(t))
        .chain([Check::new(&r, "j", 2).at(times[0])])
        .collect();
    let answers = redis.check_many(&checks).await;
    let mut memory = Memory::default();
    for (check, answer) in times
        .iter()
        .map(|&t| ("k", t, 1))
        .chain([("j", times[0], 2)])
        .zip(answers)
    {
        let (key, t, cost) = check;
        let expected = memory.check(&r, key, t, cost).await.unwrap();
        assert_eq!(answer.unwrap().decisions(), &expected, "{key} at {t:?}");
    }
}

#[tokio::test]
async fn calendar_a_batch_across_a_boundary_on_redis() {
    let server = RedisServer::start();
    let redis = RedisLimiter::connect(&server.url()).await.unwrap();
    a_batch_across_a_boundary(&redis).await;
}

#[tokio::test]
async fn calendar_a_batch_across_a_boundary_on_a_cluster() {
    let cluster = RedisCluster::shared();
    let urls = cluster.urls();
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    let redis = RedisLimiter::connect_cluster(&urls)
        .await
        .unwrap()
        .with_prefix("calendar_batch");
    a_batch_across_a_boundary(&redis).await;
}

/// The key expires at its window's end (a minute later), not after a span: 21:00Z, an hour
/// before midnight in Paris.
#[tokio::test]
async fn calendar_a_key_expires_at_its_windows_end() {
    let server = RedisServer::start();
    let redis = RedisLimiter::connect(&server.url()).await.unwrap();
    let r = calendar("daily", "2 per calendar day", "Europe/Paris");
    redis
        .check(&r, "k", at("2026-03-29T21:00:00Z"), 1)
        .await
        .unwrap();
    let ttl = server.cli(&["PTTL", "{slidewin:k}:daily:calendar"]);
    let ttl: u64 = ttl.trim().parse().unwrap();
    assert!((3_000_000..=3_660_000).contains(&ttl), "{ttl} ms");
}

/// At the server's time, the window is dated by this client's clock (and once more by Redis's
/// if they disagree): the check counts in the window of Redis's time, and the key expires at
/// its end and a minute.
#[tokio::test]
async fn calendar_at_redis_time_counts_in_its_window() {
    let server = RedisServer::start();
    let redis = RedisLimiter::connect(&server.url()).await.unwrap();
    let r = calendar("yearly", "2 per calendar year", "UTC");
    let first = redis.check_now(&r, "k", 2).await.unwrap();
    assert_eq!(first.remaining(), 0);
    assert!(!redis.check_now(&r, "k", 1).await.unwrap().allowed());
    let reset = u64::try_from(first.reset_after().as_millis()).unwrap();
    let ttl = server.cli(&["PTTL", "{slidewin:k}:yearly:calendar"]);
    let ttl: u64 = ttl.trim().parse().unwrap();
    assert!(ttl <= reset + 60_000, "{ttl} ms, reset {reset} ms");
}

/// The script refuses a check at Redis's time outside the window sent, counting nothing: it
/// answers `0, -2` and Redis's time, which the limiter turns into a
/// [`RedisError::ClockSkew`] after asking once more in Redis's window.
#[test]
fn calendar_a_window_that_does_not_hold_redis_time_is_refused() {
    let server = RedisServer::start();
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let script = std::fs::read_to_string(dir.join("src/lua/check.lua")).unwrap();
    // One check: cost 1 under rule 1, at the server's time; no groups; the rule: calendar, a
    // window in 2001, limit 5.
    let eval = |start: &str, end: &str| {
        let args = [
            "EVAL", &script, "1", "k", "1", "1", "1", "", "0", "5", "6", start, end, "5", "0",
        ];
        server.cli(&args)
    };
    let said = eval("978307200000000", "978393600000000");
    let lines: Vec<&str> = said.lines().collect();
    assert_eq!(lines[..2], ["0", "-2"], "{said}");
    let redis_now: u64 = lines[2].parse().unwrap();
    assert!(redis_now > 1_700_000_000_000_000, "{said}");
    assert_eq!(server.cli(&["EXISTS", "k"]).trim(), "0", "nothing counted");
    // A window that holds Redis's time counts.
    let said = eval("0", "9007199254740991");
    assert_eq!(said.lines().next(), Some("4"), "{said}");
}
