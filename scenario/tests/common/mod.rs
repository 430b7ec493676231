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
