//! `stampede rare`'s efficiency against plain replicas, on a real model near 1e-6:
//! the built-in `mmc` on 2 servers at 80% load, P(80 waiting within 10 s). It runs
//! the estimate to 10% relative error and prints the events it spent beside what
//! plain replicas would need for the same relative error ((1 − p) / (p · RE²)
//! replicas of a plain replica's mean events) and their ratio. The goal is
//! ≥ 100×; 2026-12-06: p = 7.6e-7, 1.8e9 events against 6.0e11, 334×.
//!
//! `cargo run --release -p stampede-benches --example rare_efficiency [-- THREADS]`
use stampede_engine::kernel::time::secs_to_nanos;
use stampede_run::rare::{estimate, Levels, RareRequest};
use stampede_scenario::models::rare::Probe;
use stampede_scenario::scenario::builtin::load_scenario_source;
use stampede_scenario::{Overrides, Scenario};
use std::time::Instant;

fn main() {
    let threads: usize = std::env::args().nth(1).map_or(2, |s| s.parse().expect("a thread count"));
    let overrides = Overrides {
        sets: vec![
            ("run.warmup_s".into(), toml::Value::Float(0.0)),
            ("run.horizon_s".into(), toml::Value::Float(10.0)),
        ],
        grids: vec![stampede_scenario::scenario::GridAxis {
            path: "queue.servers".into(),
            values: vec![toml::Value::Integer(2)],
        }],
        cases: vec![],
    };
    let scenario = Scenario::resolve(load_scenario_source("mmc").expect("built in"), &overrides).expect("valid");
    let point = scenario.grid_points().expect("valid").swap_remove(0);
    let probe = Probe::parse(&point.model.quantities(), "queue_depth >= 80", None, None).expect("a probe");
    let model = point.model.splittable(&point.run, scenario.run.seed, probe).expect("mmc splits");
    let request = RareRequest {
        horizon: secs_to_nanos(point.run.horizon_s),
        trajectories: 100,
        levels: Levels::Auto { target: 0.2, max_levels: 100 },
        relative_error: 0.1,
        min_runs: 20,
        max_runs: 5000,
        max_events: u64::MAX,
        master_seed: scenario.run.seed,
        shard: None,
    };
    let start = Instant::now();
    let found = estimate(&*model, &request, threads, &|| {}).expect("an estimate");
    println!(
        "mmc, 2 servers at 80% load: P(queue_depth >= 80 within 10 s) = {:.3e} [{:.3e}, {:.3e}], relative error {:.1}%, \
         {} runs over {} levels",
        found.probability,
        found.low,
        found.high,
        found.relative_error * 100.0,
        found.runs.len(),
        found.levels.len()
    );
    println!(
        "events: splitting {:.3e}, plain replicas {:.3e} for the same relative error: {:.0}× fewer ({:.1} s on {threads} threads)",
        found.events as f64,
        found.plain_events_needed(),
        found.speedup(),
        start.elapsed().as_secs_f64()
    );
}
