//! Active health checks of a graph service, in the SRE's case: one of four `inventory`
//! instances crashes and the balancer picks the least outstanding instance. Without
//! checks most requests fail; with checks every second the dead instance is marked
//! unhealthy at its third failed probe — a time the configuration fixes exactly — and
//! afterwards ≥ 99% succeed. Probes cost work; panic mode keeps every instance in use
//! when too few are healthy; bad settings are refused naming the field.

mod common;

use common::{mean, per_replica, resolve, sre_crash};

const REPLICAS: u64 = 8;
const CRASH_S: f64 = common::CRASH_AT_S;
const HORIZON_S: f64 = common::CRASH_HORIZON_S;

/// The crash case (`crashed` instances; 0: none) with `health_check` on inventory.
fn scenario(warmup_s: f64, crashed: u32, health_check: &str) -> String {
    sre_crash(warmup_s, crashed, health_check, "")
}

/// Per replica, the metrics named.
fn figures(text: &str, metrics: &[&str]) -> Vec<Vec<f64>> {
    per_replica(text, REPLICAS, metrics)
}

const CHECKS: &str = "health_check = { interval_s = 1.0, timeout_s = 0.2, unhealthy_threshold = 3 }";

#[test]
fn a_crashed_instance_is_marked_unhealthy_at_its_third_failed_probe() {
    // Instance 0 of 4 is first probed at 1/4 of the interval, then every second: its
    // probes at 1.25, 2.25 and 3.25 s fail (a crashed instance refuses at once), so it
    // is marked at 3.25 s and stays unhealthy to the end.
    let marked_s = CRASH_S + 2.25;
    let rows = figures(
        &scenario(0.0, 1, CHECKS),
        &[
            "inventory.unhealthy_marks",
            "inventory.unhealthy_s",
            "inventory.health_checks",
            "inventory.health_check_failures",
        ],
    );
    for replica in &rows {
        assert_eq!(replica[0], 1.0, "{replica:?}");
        assert!((replica[1] - (HORIZON_S - marked_s)).abs() < 1e-6, "unhealthy from 3.25 s: {replica:?}");
        assert_eq!(replica[2], 4.0 * HORIZON_S, "one probe per instance per second");
        // Every probe of the dead instance from 1.25 s fails (11 of them); live ones pass.
        assert_eq!(replica[3], 11.0, "{replica:?}");
    }
}

#[test]
fn after_the_mark_the_dead_instance_gets_no_traffic() {
    // Counted from 3.5 s, after the mark.
    let without = figures(&scenario(3.5, 1, ""), &["api.get.success_ratio"]);
    let success_without = mean(without.iter().map(|r| r[0]));
    assert!(success_without < 0.5, "least outstanding sends most calls to the dead instance: {success_without}");
    let with = figures(&scenario(3.5, 1, CHECKS), &["api.get.success_ratio"]);
    let success_with = mean(with.iter().map(|r| r[0]));
    assert!(success_with >= 0.99, "unhealthy, the dead instance gets no calls: {success_with}");
}

#[test]
fn probes_cost_work() {
    // 4 instances × 8 workers; a probe of 10 ms every 100 ms is 0.1 worker per instance:
    // utilisation rises by 0.1 / 8 = 0.0125 (the workload's draws are the same).
    let heavy = "health_check = { interval_s = 0.1, timeout_s = 1.0, work_s = 0.01 }";
    let util = |checks: &str| mean(figures(&scenario(0.0, 0, checks), &["inventory.utilisation"]).iter().map(|r| r[0]));
    let added = util(heavy) - util("");
    assert!((added / 0.0125 - 1.0).abs() < 0.05, "probes add {added:.5} of utilisation, not 0.0125");
}

#[test]
fn panic_mode_uses_every_instance_when_too_few_are_healthy() {
    // Three of four crash: one healthy of four is under Envoy's 50% panic threshold, so
    // every instance is used again (most calls go to dead ones); with the threshold at
    // 0 the one survivor takes every call.
    let success = |threshold: f64| {
        let checks =
            format!("health_check = {{ interval_s = 1.0, timeout_s = 0.2, panic_threshold_percent = {threshold} }}");
        mean(figures(&scenario(4.0, 3, &checks), &["api.get.success_ratio"]).iter().map(|r| r[0]))
    };
    let (panicking, strict) = (success(50.0), success(0.0));
    assert!(panicking < 0.5, "in panic mode the dead instances take calls again: {panicking}");
    assert!(strict > 0.95, "the survivor (8 workers, 5 ms) serves 200/s alone: {strict}");
}

#[test]
fn bad_health_check_settings_are_refused_naming_the_field() {
    for (setting, field) in [
        ("{ interval_s = 0 }", "health_check.interval_s = 0"),
        ("{ timeout_s = -1 }", "health_check.timeout_s = -1"),
        ("{ unhealthy_threshold = 0 }", "health_check.unhealthy_threshold = 0: must be at least 1"),
        ("{ healthy_threshold = 0 }", "health_check.healthy_threshold = 0: must be at least 1"),
        ("{ panic_threshold_percent = 150 }", "health_check.panic_threshold_percent = 150: a percentage, 0 to 100"),
        ("{ work_s = -0.5 }", "health_check.work_s = -0.5"),
    ] {
        let error = resolve(&scenario(0.0, 1, &format!("health_check = {setting}"))).unwrap_err();
        assert_eq!(error.exit_code(), 2);
        let message = error.to_string();
        assert!(message.contains("services.inventory") && message.contains(field), "{setting}: {message}");
    }
}
