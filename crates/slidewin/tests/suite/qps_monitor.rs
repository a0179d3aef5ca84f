//! The `qps_monitor` example: its report is the same on every run, and shows what the docs
//! claim: `WindowMetrics` within one bucket of the exact QPS, Sentinel's formula at half of it on
//! a boundary.

#[path = "../../examples/qps_monitor/monitor.rs"]
mod monitor;

#[test]
fn the_report_reads_the_truth_where_sentinel_reads_half() {
    let report = monitor::render();
    assert_eq!(report, monitor::render(), "deterministic");
    let rows: Vec<Vec<&str>> = report
        .lines()
        .skip(1)
        .take_while(|line| !line.is_empty())
        .map(|line| line.split_whitespace().collect())
        .collect();
    assert_eq!(rows.len(), 10, "{report}");
    for row in &rows {
        let exact: f64 = row[1].parse().unwrap();
        let ours: f64 = row[2].parse().unwrap();
        let sentinel: f64 = row[3].parse().unwrap();
        assert!((ours - exact).abs() <= exact * 0.01, "{report}");
        assert!((sentinel - exact / 2.0).abs() <= exact * 0.01, "{report}");
    }
    // The failing dependency shows in the RTs and the exception ratio.
    let failing = &rows[7];
    assert!(
        failing[5].trim_end_matches("ms").parse::<u64>().unwrap() >= 200,
        "{report}"
    );
    assert!(
        failing[8].trim_end_matches('%').parse::<f64>().unwrap() > 20.0,
        "{report}"
    );
}
