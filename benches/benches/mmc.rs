//! M/M/c events per second on one core (one replica of 3.2 million events).
//! Target: ≥ 15 million events per second.
//!
//! `cargo bench -p stampede-benches --bench mmc`

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use stampede_engine::models::mmc::{Mmc, MmcParams};
use stampede_engine::{secs_to_nanos, LatencyHistogram};

fn mmc(c: &mut Criterion) {
    let params = MmcParams {
        arrival_rate_per_s: 1_600.0,
        service_rate_per_s: 1_000.0,
        servers: 2,
        capacity: None,
        warmup: secs_to_nanos(50.0),
        horizon: secs_to_nanos(1_000.0),
    };
    let mut histogram = LatencyHistogram::new();
    let events = Mmc::new(params, 1, 0, &mut histogram).run().events;
    let mut group = c.benchmark_group("mmc");
    group.sample_size(20);
    group.throughput(Throughput::Elements(events));
    group.bench_function("replica_events", |b| {
        b.iter(|| Mmc::new(params, 1, 0, &mut histogram).run());
    });
    group.finish();
}

criterion_group!(benches, mmc);
criterion_main!(benches);
