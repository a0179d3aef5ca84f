//! Issue 33: a calendar quota behind the layer answers as a rate does, on memory, a Redis and
//! a cluster alike: its window is the calendar's day, and a denial waits for its end.

use super::*;
use slidewin::limit::{CalendarQuota, CalendarUnit};

on_every_backend! {
    /// 2 a calendar day (UTC): START is 22:13:20, so the third request waits 6,400 s, until
    /// midnight, and the policy names no window length (a day has none on the calendar).
    async fn a_calendar_day_denies_until_midnight(h) {
        let day = CalendarQuota::new(2, CalendarUnit::Day).unwrap();
        let layer = h
            .builder()
            .limit(Limit::new(RuleSet::from(Rule::calendar("daily", day).unwrap())))
            .build()
            .unwrap();
        let app = app(layer);
        for left in [1, 0] {
            let response = call(&app, get_from("/", CLIENT)).await;
            assert_eq!(response.status(), StatusCode::OK);
            assert_eq!(
                members(header(&response, "ratelimit-policy").unwrap()),
                [("daily".into(), vec![("q".into(), 2)])]
            );
            assert_eq!(rate_limit(&response), ("daily".into(), left, 6_400));
        }
        let denied = call(&app, get_from("/", CLIENT)).await;
        assert_eq!(denied.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(header(&denied, "retry-after"), Some("6400"));
        h.advance(Duration::from_secs(6_399));
        assert_eq!(status(&app, "/").await, StatusCode::TOO_MANY_REQUESTS);
        h.advance(Duration::from_secs(1)); // midnight: the new day's first
        assert_eq!(status(&app, "/").await, StatusCode::OK);
    }
}
