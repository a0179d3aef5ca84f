//! The `reconnect_backoff` example: the client backs off as soon as its closes come at 1 per
//! second over the time the stat has covered (close #4, at 3.65 s), where Facebook's formula
//! (over the whole 30 s window) read 0.13/s; and it spares the server most of its retries.

#[path = "../../examples/reconnect_backoff/simulation.rs"]
mod simulation;

#[test]
fn the_client_backs_off_at_the_fourth_close_and_spares_the_server() {
    let run = simulation::run();
    assert_eq!(run.report, simulation::run().report, "deterministic");
    assert_eq!(run.first_backoff, Some(4), "{}", run.report);
    let fourth = run.report.lines().nth(3).unwrap();
    assert!(
        fourth.contains("close #4") && fourth.contains("back off"),
        "{fourth}"
    );
    assert!(fourth.contains("Facebook's: 0.13/s"), "{fourth}");
    assert_eq!(run.attempts, 36, "{}", run.report);
    assert!(
        run.report.contains("106 without the throttle"),
        "{}",
        run.report
    );
}
