//! One replica of `llm-stack` — the LLM gateway at 20 turns/s for a 60 s window
//! after a 10 s warm-up, the seven-gate stack against three metered tiers — and, side
//! by side, the same load through the naive client. Target: ≤ 3 ms per stack replica
//! on one core (the reference Python lab takes about 0.6 s for this run).
//!
//! `cargo bench -p stampede-benches --bench gateway`

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use stampede_engine::models::gateway::{Gateway, GatewayParams};
use stampede_engine::LatencyHistogram;
use stampede_scenario::models::gateway::Gateway as GatewayModel;
use stampede_scenario::scenario::builtin::load_scenario_source;
use stampede_scenario::{Overrides, Scenario};

/// The parameters of `llm-stack`'s grid points (0: naive, 1: stack).
fn llm_stack() -> Vec<GatewayParams> {
    let source = load_scenario_source("llm-stack").expect("built-in");
    let scenario = Scenario::resolve(source, &Overrides::default()).expect("valid");
    scenario
        .grid_points()
        .expect("valid")
        .iter()
        .map(|point| {
            point.model.downcast::<GatewayModel>().expect("llm-stack is a gateway scenario").params(&point.run)
        })
        .collect()
}

fn gateway(c: &mut Criterion) {
    let points = llm_stack();
    let mut histograms: Vec<LatencyHistogram> =
        (0..points[0].latency_histograms()).map(|_| LatencyHistogram::new()).collect();
    let mut group = c.benchmark_group("gateway");
    group.sample_size(50);
    for (name, params) in [("llm_stack_replica", &points[1]), ("llm_naive_replica", &points[0])] {
        let events = Gateway::new(params.clone(), 1, 0, &mut histograms).run().events;
        group.throughput(Throughput::Elements(events));
        group.bench_function(name, |b| b.iter(|| Gateway::new(params.clone(), 1, 0, &mut histograms).run()));
    }
    group.finish();
}

criterion_group!(benches, gateway);
criterion_main!(benches);
