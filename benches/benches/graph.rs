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
//! `graph_size` runs generated graphs of 10, 100, 1,000 and 5,000 services
//! (`GraphParams::pairs`: entry points = services / 2, each calling one service, 2,000
//! requests per second in total) side by side: the same events whatever the size, so
//! events per second must stay flat — within 1.5× of the 10-service figure (issue 69).
//! A replica's setup and end (O(services)) are inside the figure, as in a real run.
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

fn sizes(c: &mut Criterion) {
    let mut group = c.benchmark_group("graph_size");
    group.sample_size(10);
    for services in [10u32, 100, 1_000, 5_000] {
        let params = GraphParams::pairs(services, 2_000.0, secs_to_nanos(30.0));
        let mut histograms: Vec<LatencyHistogram> = params.workloads.iter().map(|_| LatencyHistogram::new()).collect();
        let events = Graph::new(params.clone(), 1, 0, &mut histograms).run().0.events;
        group.throughput(Throughput::Elements(events));
        group.bench_with_input(BenchmarkId::from_parameter(services), &params, |b, params| {
            b.iter(|| {
                histograms.iter_mut().for_each(LatencyHistogram::reset);
                Graph::new(params.clone(), 1, 0, &mut histograms).run()
            })
        });
    }
    group.finish();
}

criterion_group!(benches, graph, mechanisms, sizes);
criterion_main!(benches);
