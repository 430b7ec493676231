//! The cluster model with every policy on — bounded-load routing, backoff with full
//! jitter, a 10% retry budget, a breaker per shard, and a surge + brownout fault —
//! in events per second on one core. Target: ≥ 5 million.
//!
//! `cargo bench -p stampede-benches --bench cluster`

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use stampede_engine::models::cluster::{
    Cluster, ClusterParams, Fault, FaultKind, QueueDiscipline, RetryPolicy, ServiceTime,
};
use stampede_engine::policy::backoff::Backoff;
use stampede_engine::policy::breaker::{BreakerConfig, SlidingWindow};
use stampede_engine::policy::retry_budget::{RatioBudget, RetryBudget};
use stampede_engine::ring::RingHash;
use stampede_engine::{secs_to_nanos, LatencyHistogram, Nanos};

const MS: Nanos = 1_000_000;

fn params() -> ClusterParams {
    ClusterParams {
        arrival_rate_per_s: 1_200.0,
        keys: 100_000,
        zipf_s: 0.0,
        hot_share: 0.0,
        closed_loop_users: 0,
        think_time: 0,
        attempt_timeout: 50 * MS,
        shards: 4,
        vnodes: 150,
        capacity_factor: 1.25,
        hash: RingHash::Fast,
        servers: 4,
        service: ServiceTime::Exponential { mean: 10 * MS },
        queue_capacity: 100,
        discipline: QueueDiscipline::Fifo,
        drop_abandoned: false,
        retry: RetryPolicy::Backoff {
            max_attempts: 4,
            backoff: Backoff::FullJitter { base: 10 * MS, cap: 1_000 * MS },
        },
        budget: RetryBudget::Ratio(RatioBudget::new(0.1, 100.0, 10.0)),
        breaker: Some(BreakerConfig {
            window: SlidingWindow::Time { window: 1_000 * MS, buckets: 10 },
            minimum_calls: 20,
            failure_rate_threshold: 0.5,
            open_duration: 500 * MS,
            max_open_duration: 500 * MS,
            half_open_probes: 3,
            ..BreakerConfig::default()
        }),
        faults: vec![
            Fault { kind: FaultKind::Surge { multiplier: 5.0 }, start: 3_000 * MS, duration: 200 * MS },
            Fault { kind: FaultKind::Brownout { shard: 0, slowdown: 10.0 }, start: 3_000 * MS, duration: 500 * MS },
        ],
        warmup: secs_to_nanos(1.0),
        horizon: secs_to_nanos(60.0),
        bucket: 10 * MS,
        recovery_hold: 200 * MS,
    }
}

fn cluster(c: &mut Criterion) {
    let mut histogram = LatencyHistogram::new();
    let events = Cluster::new(params(), 1, 0, &mut histogram).run().0.events;
    let mut group = c.benchmark_group("cluster");
    group.sample_size(20);
    group.throughput(Throughput::Elements(events));
    group.bench_function("every_policy_on", |b| b.iter(|| Cluster::new(params(), 1, 0, &mut histogram).run()));
    group.finish();
}

criterion_group!(benches, cluster);
criterion_main!(benches);
