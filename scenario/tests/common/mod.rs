//! What the scenario crate's integration tests share: one replica of a grid point,
//! run as the runner runs it, its metrics (and series) by name.

use std::collections::BTreeMap;

use stampede_engine::LatencyHistogram;
use stampede_scenario::GridPoint;

/// Replica `replica` of `point` at master seed `seed`: every metric by name.
#[allow(dead_code)] // not every test file reads metrics alone
pub fn replica_metrics(point: &GridPoint, seed: u64, replica: u64) -> BTreeMap<String, f64> {
    replica_output(point, seed, replica).0
}

/// Replica `replica` of `point` at master seed `seed`: every metric and every series
/// (its per-bucket values as the model reports them) by name.
pub fn replica_output(
    point: &GridPoint,
    seed: u64,
    replica: u64,
) -> (BTreeMap<String, f64>, BTreeMap<String, Vec<u128>>) {
    let mut histograms: Vec<LatencyHistogram> =
        point.model.latencies().iter().map(|_| LatencyHistogram::new()).collect();
    let output = point.model.run_replica(&point.run, seed, replica, &mut histograms);
    let metrics = point.model.metrics().iter().map(|m| m.name.to_string()).zip(output.metrics).collect();
    let series = point.model.series().iter().map(|s| s.name.to_string()).zip(output.series).collect();
    (metrics, series)
}

/// A scenario from its text, resolved as the CLI would (no overrides).
#[allow(dead_code)] // not every test file resolves text
pub fn resolve(text: &str) -> stampede_scenario::Result<stampede_scenario::Scenario> {
    let source = stampede_scenario::base::typing::parse_text(text, "test").unwrap();
    stampede_scenario::Scenario::resolve(source, &stampede_scenario::Overrides::default())
}

/// Grid point 0 of `text`: per replica (of the first `replicas`), the metrics named.
#[allow(dead_code)]
pub fn per_replica(text: &str, replicas: u64, metrics: &[&str]) -> Vec<Vec<f64>> {
    let scenario = resolve(text).unwrap();
    let point = scenario.grid_point(0).unwrap();
    (0..replicas)
        .map(|replica| {
            let values = replica_metrics(&point, scenario.run.seed, replica);
            metrics.iter().map(|m| *values.get(*m).unwrap_or_else(|| panic!("{m}"))).collect()
        })
        .collect()
}

/// The mean of `values`.
#[allow(dead_code)]
pub fn mean(values: impl Iterator<Item = f64>) -> f64 {
    let values: Vec<f64> = values.collect();
    values.iter().sum::<f64>() / values.len() as f64
}

/// The SRE's crash case's horizon and crash instant, seconds.
#[allow(dead_code)]
pub const CRASH_HORIZON_S: f64 = 12.0;
#[allow(dead_code)]
pub const CRASH_AT_S: f64 = 1.0;

/// The SRE's crash case: `api` calls four `inventory` instances by least outstanding
/// requests at 200/s; the first `crashed` of them crash at [`CRASH_AT_S`] for good (none
/// with 0). `inventory` and `edge` are extra lines for the service's and the edge's
/// sections (health checks, outlier detection).
#[allow(dead_code)]
pub fn sre_crash(warmup_s: f64, crashed: u32, inventory: &str, edge: &str) -> String {
    let fault = if crashed == 0 {
        String::new()
    } else {
        format!(
            "[[faults]]\ntarget = \"inventory\"\nkind = \"crash\"\ninstances = {crashed}\nstart_s = {CRASH_AT_S}\nduration_s = 100.0\n"
        )
    };
    format!(
        r#"name = "crash"
model = "graph"
[run]
horizon_s = {CRASH_HORIZON_S}
warmup_s = {warmup_s}
replicas = 20
seed = 3
[services.api]
instances = 1
workers = 200
[services.api.endpoints.get]
steps = [{{ call = "inventory.read" }}]
[services.inventory]
instances = 4
workers = 8
{inventory}
[services.inventory.endpoints.read]
work = {{ dist = "exponential", mean_s = 0.005 }}
[edges."api->inventory"]
timeout_s = 0.1
balance = "least_outstanding"
{edge}
[[workload]]
entry = "api.get"
rate_per_s = 200.0
deadline_s = 1.0
{fault}"#
    )
}
