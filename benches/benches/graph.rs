//! The service graph with every client policy on — an entry service, two services,
//! two leaves; retries with jittered backoff and ratio budgets, breakers, a hedge at the
//! p95, a limiter, a shedder, four balancers and a brownout
//! (`GraphParams::three_tier_every_policy`) — in events per second on one core.
//! Target: ≥ 8 million.
//!
//! `graph_mechanisms` runs the same graph side by side with each outage mechanism on
//! (`Mechanism`: outlier ejection, a connection pool, health checks, an autoscaler, a
//! cache) and with all of them: the cost of each, per replica and per event.
//!
//! `cargo bench -p stampede-benches --bench graph`

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use stampede_engine::models::graph::{Graph, GraphParams, Mechanism};
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

fn mechanisms(c: &mut Criterion) {
    let mut histograms = [LatencyHistogram::new()];
    let mut group = c.benchmark_group("graph_mechanisms");
    group.sample_size(20);
    let variants: Vec<(&str, GraphParams)> = std::iter::once(("none", params()))
        .chain(Mechanism::ALL.map(|m| (m.name(), params().with_mechanism(m))))
        .chain(std::iter::once(("all", Mechanism::ALL.into_iter().fold(params(), GraphParams::with_mechanism))))
        .collect();
    for (name, variant) in variants {
        let events = Graph::new(variant.clone(), 1, 0, &mut histograms).run().0.events;
        group.throughput(Throughput::Elements(events));
        group.bench_with_input(BenchmarkId::from_parameter(name), &variant, |b, variant| {
            b.iter(|| Graph::new(variant.clone(), 1, 0, &mut histograms).run())
        });
    }
    group.finish();
}

criterion_group!(benches, graph, mechanisms);
criterion_main!(benches);
