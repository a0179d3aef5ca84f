//! The `joined` example: its report for the fixed "now", line by line.

#[path = "../../examples/joined.rs"]
#[allow(dead_code)] // the example's `main`
mod joined;

#[test]
fn the_report_for_a_fixed_now() {
    let report = joined::report();
    assert_eq!(report, joined::report(), "deterministic");
    let lines: Vec<&str> = report.lines().collect();
    assert_eq!(lines.len(), 5);
    assert!(
        lines[0].contains("Đã tham gia 3 năm 2 tháng trước"),
        "{report}"
    );
    assert!(lines[1].contains("Joined 2 years 9 months ago"), "{report}");
    // October 31 + 1 month is November 30 (clamped): a whole month; strictly, 30 days.
    assert!(
        lines[2].contains("Joined 1 month ago") && lines[2].contains("(strict: 30 days 3 hours)"),
        "{report}"
    );
    assert!(
        lines[3].contains("Joined 5 years 10 months ago")
            && lines[3].contains("(strict: 5 years 9 months)"),
        "{report}"
    );
    assert!(lines[4].contains("Đã tham gia 1 ngày trước"), "{report}");
}
