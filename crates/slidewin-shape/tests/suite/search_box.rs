//! The search box example, run as a test: its exact output under paused time.

#[allow(dead_code)] // its `main` is the example's
#[path = "../../examples/search_box.rs"]
mod search_box;

#[tokio::test(start_paused = true)]
async fn search_box_prints_exactly_this() {
    let lines = search_box::search_box().await;
    assert_eq!(
        lines.join("\n"),
        r#"     0 ms  typed "r"
   100 ms  typed "ru"
   100 ms  "r" merged into a later keystroke, never sent
   200 ms  typed "rus"
   200 ms  "ru" merged into a later keystroke, never sent
   500 ms  sent #1 "rus"
   600 ms  typed "rust"
   900 ms  sent #2 "rust"
   900 ms  request #1 "rus" cancelled: a newer search restarted it
  1100 ms  shown #2 "rust": 8 hits
  1200 ms  discarded #1 "rus": older than what is shown
  1300 ms  typed "rust a"
  1400 ms  typed "rust as"
  1400 ms  "rust a" merged into a later keystroke, never sent
  1450 ms  typed "rust asy"
  1450 ms  "rust as" merged into a later keystroke, never sent
  1750 ms  sent #3 "rust asy"
  1850 ms  shown #3 "rust asy": 4 hits
  1850 ms  7 keystrokes, 6 tasks registered (a debounced keystroke and a request per search)"#
    );
}
