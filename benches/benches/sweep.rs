//! A 1,000-replica sweep through the full runner at 1 and at 2 threads.
//! Target: 2 threads ≥ 1.8× the throughput of 1 thread.
//!
//! `cargo bench -p stampede-benches --bench sweep`

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use stampede_run::plan::Plan;
use stampede_run::runner::{run_grid, Sinks};
use stampede_scenario::scenario::builtin::load_scenario_source;
use stampede_scenario::{Overrides, Scenario};

fn sweep(c: &mut Criterion) {
    let overrides = Overrides {
        sets: vec![
            ("run.horizon_s".into(), toml::Value::Float(20.0)),
            ("run.warmup_s".into(), toml::Value::Float(1.0)),
            ("run.replicas".into(), toml::Value::Integer(1000)),
        ],
        grids: vec![],
        cases: vec![],
    };
    let mut source = load_scenario_source("mmc").expect("built-in");
    source.remove("grid");
    let scenario = Scenario::resolve(source, &overrides).expect("valid");
    let mut group = c.benchmark_group("sweep_1000_replicas");
    group.sample_size(10);
    group.throughput(Throughput::Elements(1000));
    for threads in [1usize, 2] {
        group.bench_with_input(BenchmarkId::new("threads", threads), &threads, |b, &threads| {
            b.iter(|| {
                let sinks = Sinks { records: &mut |_| Ok(()), point: &mut |_, _| Ok(()) };
                let plan = Plan::new(scenario.point_count(), scenario.run.replicas, None);
                run_grid(&scenario, &plan, threads, &|| {}, sinks).expect("runs")
            });
        });
    }
    group.finish();
}

criterion_group!(benches, sweep);
criterion_main!(benches);
