//! A built-in's grid point run as `stampede run` runs it (the scenario's `run_replica`
//! with the histograms a worker lends), replica after replica on one thread: the time
//! a replica costs, without the runner's gathering and writing — to profile under
//! `perf record` or `valgrind --tool=callgrind`.
//!
//! `cargo run --release -p stampede-benches --example replica_probe -- NAME [POINT [REPLICAS]]`
use stampede_scenario::scenario::builtin::load_scenario_source;
use stampede_scenario::{Overrides, Scenario};
use std::time::Instant;

fn main() {
    let mut args = std::env::args().skip(1);
    let name = args.next().unwrap_or_else(|| "llm-stack".into());
    let index: usize = args.next().map_or(1, |s| s.parse().expect("a grid point index"));
    let replicas: u64 = args.next().map_or(200, |s| s.parse().expect("a replica count"));
    let source = load_scenario_source(&name).expect("a built-in scenario");
    let scenario = Scenario::resolve(source, &Overrides::default()).expect("valid");
    let point = scenario.grid_points().expect("valid").swap_remove(index);
    let mut histograms = stampede_run::runner::lent_histograms(point.model.latencies().len());
    let start = Instant::now();
    let mut metrics = 0;
    for replica in 0..replicas {
        histograms.iter_mut().for_each(|h| h.reset());
        metrics += point.model.run_replica(&point.run, 1, replica, &mut histograms).metrics.len();
    }
    let elapsed = start.elapsed().as_secs_f64();
    println!(
        "{name} point {index}: {:.3} ms a replica over {replicas} ({metrics} metrics)",
        elapsed * 1e3 / replicas as f64
    );
}
