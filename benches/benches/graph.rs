//! The service graph with every client policy on — an entry service, two services,
//! two leaves; retries with jittered backoff and ratio budgets, breakers, a hedge at the
//! p95, a limiter, a shedder, four balancers and a brownout
//! (`GraphParams::three_tier_every_policy`) — in events per second on one core.
//! Target: ≥ 8 million.
//!
//! `cargo bench -p stampede-benches --bench graph`

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use stampede_engine::models::graph::{Graph, GraphParams};
use stampede_engine::{secs_to_nanos, LatencyHistogram};

fn params() -> GraphParams {
    GraphParams::three_tier_every_policy(2_000.0, secs_to_nanos(10.0), secs_to_nanos(4.0))
}

fn graph(c: &mut Criterion) {
    let mut histograms = [LatencyHistogram::new()];
    let events = Graph::new(params(), 1, 0, &mut histograms).run().0.events;
    let mut group = c.benchmark_group("graph");
    group.sample_size(20);
    group.throughput(Throughput::Elements(events));
    group.bench_function("three_tier_every_policy", |b| b.iter(|| Graph::new(params(), 1, 0, &mut histograms).run()));
    group.finish();
}

criterion_group!(benches, graph);
criterion_main!(benches);
