//! Outlier detection on a graph edge, in the SRE's case: one of four `inventory`
//! instances crashes and the balancer picks the least outstanding instance — the dead
//! one refuses at once, so it always has the fewest requests and attracts nearly every
//! call. Without detection most requests fail; with Envoy's `consecutive_5xx = 5` the
//! instance is ejected after five failures (tens of milliseconds at 200 requests/s) and
//! ≥ 99% of requests succeed. Bad settings are refused naming the field.

mod common;

use common::{mean, per_replica, replica_metrics, resolve, sre_crash};

const REPLICAS: u64 = 12;
const CRASH_S: f64 = common::CRASH_AT_S;
const HORIZON_S: f64 = common::CRASH_HORIZON_S;

/// The crash case, with `outlier` on the edge.
fn scenario(outlier: &str) -> String {
    sre_crash(0.0, 1, "", outlier)
}

/// Per replica, the metrics named.
fn figures(text: &str, metrics: &[&str]) -> Vec<Vec<f64>> {
    per_replica(text, REPLICAS, metrics)
}

#[test]
fn a_crashed_instance_is_ejected_after_five_failures_and_requests_succeed_again() {
    let without = figures(&scenario(""), &["api.get.success_ratio"]);
    let success_without = mean(without.iter().map(|r| r[0]));
    assert!(success_without < 0.5, "least outstanding sends most calls to the dead instance: {success_without}");

    let with = figures(
        &scenario("outlier = { consecutive_5xx = 5 }"),
        &["api.get.success_ratio", "api->inventory.ejections", "api->inventory.ejected_s"],
    );
    let success_with = mean(with.iter().map(|r| r[0]));
    assert!(success_with >= 0.99, "ejected, the dead instance gets no more calls: {success_with}");
    for replica in &with {
        assert_eq!(replica[1], 1.0, "one ejection (30 s outlasts the run): {replica:?}");
        // Ejected from detection to the end: detection came after five failures, at
        // 200 requests/s nearly all sent to the dead instance (~25 ms; 0.1 s is five
        // standard deviations beyond).
        let detection_s = HORIZON_S - CRASH_S - replica[2];
        assert!(detection_s > 0.0 && detection_s < 0.1, "ejected {detection_s} s after the crash");
    }
}

#[test]
fn outlier_settings_outside_their_range_are_refused_by_field() {
    for (setting, field) in [
        ("outlier = { max_ejection_percent = 150 }", "outlier.max_ejection_percent = 150: a percentage, 0 to 100"),
        ("outlier = { consecutive_5xx = 0 }", "outlier.consecutive_5xx"),
        ("outlier = { base_ejection_s = -1 }", "outlier.base_ejection_s = -1"),
        (
            "outlier = { base_ejection_s = 60, max_ejection_s = 30 }",
            "outlier.max_ejection_s = 30: at least base_ejection_s",
        ),
    ] {
        let error = resolve(&scenario(setting)).unwrap_err();
        assert_eq!(error.exit_code(), 2);
        let message = error.to_string();
        assert!(message.contains("api->inventory") && message.contains(field), "{setting}: {message}");
    }
}

/// An edge writes the ejection columns where some grid point detects on it, so a grid
/// may turn detection on at some points — "does ejection save us?" is one run — and
/// a scenario that never detects keeps its tables as they were.
#[test]
fn a_grid_may_turn_detection_on_at_some_points() {
    let text = scenario("")
        + "[[grid.case]]\nlabel = \"no detection\"\n[[grid.case]]\nlabel = \"consecutive 5xx\"\n\
           edges = { \"api->inventory\" = { outlier = { consecutive_5xx = 5 } } }\n";
    let resolved = resolve(&text).unwrap();
    assert!(resolved.schema.metric_index("api->inventory.ejections").is_some());
    let points = resolved.grid_points().unwrap();
    let without = replica_metrics(&points[0], resolved.run.seed, 0);
    let (with, series) = common::replica_output(&points[1], resolved.run.seed, 0);
    // The series of instances ejected integrates to the ejected time (no warm-up here).
    let area: u128 = series["api->inventory.ejected"].iter().sum();
    assert!((area as f64 / 1e9 - with["api->inventory.ejected_s"]).abs() < 1e-6, "{area}");
    // 10% of 4 instances: one may be out at a time (a 10 ms bucket holds 10^7 ns of it).
    assert!(series["api->inventory.ejected"].iter().all(|&a| a <= 10_000_000), "one instance out at most");
    assert_eq!(without["api->inventory.ejections"], 0.0, "the point without detection reads 0");
    assert!(with["api->inventory.ejections"] >= 1.0, "the crashed instance is ejected");
    let plain = resolve(&scenario("")).unwrap();
    assert!(plain.schema.metric_index("api->inventory.ejections").is_none(), "no detection anywhere: no columns");
    assert!(plain.schema.metric_index("api->inventory.retries").is_some());
}
