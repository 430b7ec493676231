//! The cluster model with every policy on — bounded-load routing, backoff with full
//! jitter, a 10% retry budget, a breaker per shard, and a surge + brownout fault
//! (`ClusterParams::every_policy_on`) — in events per second on one core.
//! Target: ≥ 5 million.
//!
//! `cargo bench -p stampede-benches --bench cluster`

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use stampede_engine::models::cluster::{Cluster, ClusterParams};
use stampede_engine::LatencyHistogram;

fn cluster(c: &mut Criterion) {
    let mut histogram = LatencyHistogram::new();
    let events =
        Cluster::new(ClusterParams::every_policy_on(), 1, 0, std::slice::from_mut(&mut histogram)).run().0.events;
    let mut group = c.benchmark_group("cluster");
    group.sample_size(20);
    group.throughput(Throughput::Elements(events));
    group.bench_function("every_policy_on", |b| {
        b.iter(|| Cluster::new(ClusterParams::every_policy_on(), 1, 0, std::slice::from_mut(&mut histogram)).run())
    });
    group.finish();
}

criterion_group!(benches, cluster);
criterion_main!(benches);
