//! Autoscaling a graph service by the HPA's rule. A service of 4 workers per instance
//! and 0.1 s of work, targeting 50% utilisation: 50 requests/s need ceil(50 × 0.1 /
//! (4 × 0.5)) = 3 instances, 90/s need 5. A step from 50 to 90/s is answered after a
//! sync period and the provisioning delay and settles at 5; a steady load with noise
//! never changes the count (while without tolerance and stabilisation the same noise
//! flaps it); a spike shorter than the provisioning delay is not helped — the instances
//! arrive after it. Bad settings are refused naming the field.

mod common;

use common::{replica_output, resolve};
use stampede_scenario::GridPoint;

const WORKERS: f64 = 4.0;
const WORK_S: f64 = 0.1;
const TARGET: f64 = 0.5;
const SYNC_S: f64 = 15.0;
const PROVISIONING_S: f64 = 30.0;
const REPLICAS: u64 = 6;

/// `rate` is a `[load]` rate schedule; `autoscale` the section's fields after the target.
fn scenario(horizon_s: f64, instances: u32, rate: &str, autoscale: &str) -> String {
    format!(
        r#"name = "scale"
model = "graph"
[run]
horizon_s = {horizon_s}
warmup_s = 0.0
replicas = 6
seed = 11
[services.app]
instances = {instances}
workers = {WORKERS}
{autoscale}
[services.app.endpoints.get]
work = {{ dist = "exponential", mean_s = {WORK_S} }}
[[workload]]
entry = "app.get"
load = {{ rate = {rate} }}
deadline_s = 1.0
[series]
bucket_s = 1.0
"#
    )
}

fn hpa(extra: &str) -> String {
    format!(
        "autoscale = {{ target = {TARGET}, max = 20, provisioning = {{ dist = \"constant\", value_s = {PROVISIONING_S} }}{extra} }}"
    )
}

/// One replica: the named metrics and the instances serving in each 1 s bucket (none
/// when the service is not autoscaled).
fn replica(point: &GridPoint, seed: u64, replica: u64, metrics: &[&str]) -> (Vec<f64>, Vec<f64>) {
    let (values, series) = replica_output(point, seed, replica);
    let values = metrics.iter().map(|m| *values.get(*m).unwrap_or_else(|| panic!("{m}"))).collect();
    let instances =
        series.get("app.instances").map_or(Vec::new(), |areas| areas.iter().map(|&a| a as f64 / 1e9).collect());
    (values, instances)
}

fn needed(rate: f64) -> f64 {
    (rate * WORK_S / (WORKERS * TARGET)).ceil()
}

#[test]
fn a_load_step_is_answered_after_a_sync_and_the_provisioning_delay() {
    let (step_s, horizon_s) = (120.0, 400.0);
    let text = scenario(horizon_s, 3, &format!("[[0, 50], [{step_s}, 90]]"), &hpa(""));
    let scenario = resolve(&text).unwrap();
    let point = scenario.grid_point(0).unwrap();
    assert_eq!((needed(50.0), needed(90.0)), (3.0, 5.0));
    for r in 0..REPLICAS {
        let (values, instances) = replica(&point, scenario.run.seed, r, &["app.scale_ups", "app.scale_downs"]);
        let at = |t: f64| instances[t as usize];
        assert!(instances[..step_s as usize].iter().all(|&n| n == 3.0), "replica {r}: 3 before the step");
        // No new instance before the provisioning delay has passed since the step.
        assert_eq!(at(step_s + PROVISIONING_S - 1.0), 3.0, "replica {r}");
        // Two syncs see the new load in full (the first may see part of it) and the
        // instances then take 30 s: settled at 5 by step + 2 syncs + provisioning.
        let settled = (step_s + 2.0 * SYNC_S + PROVISIONING_S + 1.0) as usize;
        let after: Vec<f64> = instances[settled..].to_vec();
        assert!(after.iter().all(|&n| n == 5.0), "replica {r} settles at 5: {:?}", &after[..20]);
        assert!(values[0] >= 1.0 && values[0] <= 2.0, "one or two scale-ups: {values:?}");
        assert_eq!(values[1], 0.0, "never down: {values:?}");
    }
}

#[test]
fn a_steady_load_with_noise_does_not_flap() {
    // At 5 instances 90/s reads 0.45 of utilisation ± a few percent per 15 s sync: a
    // change needs 11% of noise either way. Without the tolerance and the scale-down
    // window, at 100/s (on the edge between 5 and 6) the same noise flaps the count.
    let changes = |rate: f64, extra: &str| {
        let scenario = resolve(&scenario(1800.0, 5, &format!("[[0, {rate}]]"), &hpa(extra))).unwrap();
        let point = scenario.grid_point(0).unwrap();
        (0..REPLICAS)
            .map(|r| {
                let (values, _) = replica(&point, scenario.run.seed, r, &["app.scale_ups", "app.scale_downs"]);
                values[0] + values[1]
            })
            .collect::<Vec<f64>>()
    };
    let steady = changes(90.0, "");
    assert!(steady.iter().all(|&n| n == 0.0), "the count never changed: {steady:?}");
    let nervous = changes(100.0, ", tolerance = 0, scale_down_stabilization_s = 0");
    assert!(nervous.iter().all(|&n| n >= 10.0), "without damping the count flaps: {nervous:?}");
}

#[test]
fn a_spike_shorter_than_the_provisioning_delay_is_not_helped() {
    // 150/s for 20 s on 3 instances (120/s of capacity): the autoscaler decides within
    // a sync, but the instances arrive 30 s later, after the spike.
    let (spike_s, length_s) = (100.0, 20.0);
    let rate = format!("[[0, 50], [{spike_s}, 150], [{}, 50]]", spike_s + length_s);
    let run = |autoscale: &str, metrics: &[&str]| {
        let scenario = resolve(&scenario(400.0, 3, &rate, autoscale)).unwrap();
        let point = scenario.grid_point(0).unwrap();
        (0..REPLICAS).map(|r| replica(&point, scenario.run.seed, r, metrics)).collect::<Vec<_>>()
    };
    let scaled = run(&hpa(""), &["app.get.failed_ratio", "app.scale_ups"]);
    let fixed = run("", &["app.get.failed_ratio"]);
    for ((scaled, instances), (fixed, _)) in scaled.iter().zip(&fixed) {
        assert!(fixed[0] > 0.01, "the spike overloads 3 instances: {fixed:?}");
        assert!(scaled[1] >= 1.0, "the autoscaler reacted: {scaled:?}");
        let during = &instances[spike_s as usize..(spike_s + length_s) as usize];
        assert!(during.iter().all(|&n| n == 3.0), "no instance arrived during the spike: {during:?}");
        assert!(instances.iter().any(|&n| n > 3.0), "they arrived after it");
        // The same requests failed: the draws are the same and help came too late.
        assert!(
            (scaled[0] / fixed[0] - 1.0).abs() < 0.05,
            "failed {} with autoscaling, {} without",
            scaled[0],
            fixed[0]
        );
    }
}

#[test]
fn bad_autoscale_settings_are_refused_naming_the_field() {
    for (instances, setting, field) in [
        (3, "autoscale = { target = 0.5, min = 5, max = 4 }", "autoscale.max = 4: at least min (5)"),
        (3, "autoscale = { target = 1.5, max = 4 }", "autoscale.target = 1.5: a utilisation"),
        (3, "autoscale = { target = 0.5, min = 0, max = 4 }", "autoscale.min = 0: must be at least 1"),
        (9, "autoscale = { target = 0.5, max = 4 }", "instances = 9 (the count at the start) must be within"),
        (3, "autoscale = { target = 0.5, max = 4, sync_period_s = 0 }", "autoscale.sync_period_s = 0"),
        (3, "autoscale = { target = 0.5, max = 4, tolerance = 1.5 }", "autoscale.tolerance = 1.5"),
        (3, "autoscale = { target = 0.5, max = 4, cold_start_factor = 0.5 }", "autoscale.cold_start_factor = 0.5"),
        (
            3,
            "autoscale = { target = 0.5, max = 4, provisioning = { dist = \"constant\", value_s = -1 } }",
            "autoscale.provisioning",
        ),
        (3, "autoscale = { max = 4 }", "missing field `target`"),
    ] {
        let error = resolve(&scenario(60.0, instances, "[[0, 10]]", setting)).unwrap_err();
        assert_eq!(error.exit_code(), 2, "{setting}");
        let message = error.to_string();
        assert!(message.contains("services.app") && message.contains(field), "{setting}: {message}");
    }
}

#[test]
fn a_cold_start_slows_the_new_instances_first_requests() {
    // The step's new instances serve 3× slower at first, back to normal over 60 s: the
    // mean latency of the run rises against the same run without a cold start.
    let rate = "[[0, 50], [120, 90]]";
    let mean = |extra: &str| {
        let scenario = resolve(&scenario(400.0, 3, rate, &hpa(extra))).unwrap();
        let point = scenario.grid_point(0).unwrap();
        let means: Vec<f64> =
            (0..REPLICAS).map(|r| replica(&point, scenario.run.seed, r, &["app.get.mean_s"]).0[0]).collect();
        means.iter().sum::<f64>() / means.len() as f64
    };
    let (warm, cold) = (mean(""), mean(", cold_start_s = 60, cold_start_factor = 3"));
    // 2 of 5 instances take ~2/5 of 90/s; over their 60 s their work is on average 2×:
    // about 0.4 × 90 × 60 × 0.1 s more work in a run of ~17,000 requests.
    assert!(cold > warm * 1.05, "cold starts show in the mean latency: {cold} against {warm}");
}

#[test]
fn the_autoscaler_can_follow_requests_in_flight() {
    // Requests present per instance: 50/s × ~0.1 s is ~5 in flight; a target of 1 per
    // instance asks for at least 5 instances, from 2.
    let scenario =
        resolve(&scenario(120.0, 2, "[[0, 50]]", &hpa(", metric = \"in_flight\"").replace("0.5", "1.0"))).unwrap();
    let point = scenario.grid_point(0).unwrap();
    let (values, instances) = replica(&point, scenario.run.seed, 0, &["app.scale_ups"]);
    assert!(values[0] >= 1.0 && *instances.last().unwrap() >= 5.0, "{values:?}, ended with {:?}", instances.last());
}
