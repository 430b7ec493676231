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
