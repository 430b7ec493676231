//! What the scenario crate's integration tests share: one replica of a grid point,
//! run as the runner runs it, its metrics by name.

use std::collections::BTreeMap;

use stampede_engine::LatencyHistogram;
use stampede_scenario::GridPoint;

/// Replica `replica` of `point` at master seed `seed`: every metric by name.
pub fn replica_metrics(point: &GridPoint, seed: u64, replica: u64) -> BTreeMap<String, f64> {
    let mut histograms: Vec<LatencyHistogram> =
        point.model.latencies().iter().map(|_| LatencyHistogram::new()).collect();
    let output = point.model.run_replica(&point.run, seed, replica, &mut histograms);
    point.model.metrics().iter().map(|m| m.name.to_string()).zip(output.metrics).collect()
}
