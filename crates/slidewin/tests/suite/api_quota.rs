//! The `api_quota` example: its chart is the same on every run, and shows what the docs claim.

#[path = "../../examples/api_quota/chart.rs"]
mod chart;

#[test]
fn the_chart_shows_each_algorithms_guarantee() {
    let chart = chart::render();
    assert_eq!(chart, chart::render(), "deterministic");
    // The summary lines are indented: "  NAME  WORST  note".
    let worst = |name: &str| -> u64 {
        let line = chart
            .lines()
            .filter(|line| line.starts_with("  "))
            .find(|line| line.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("no summary for {name} in\n{chart}"));
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    };
    assert_eq!(worst("SlidingLog"), 5, "{chart}");
    assert_eq!(worst("FixedWindow"), 10, "{chart}");
    assert!(worst("SlidingCounter") > 5, "{chart}");
    assert!(worst("Gcra") > 5 && worst("Gcra") < 10, "{chart}");
}
