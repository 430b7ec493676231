//! One decision of each policy, in nanoseconds. Target: each ≤ 50 ns, no allocation
//! (the allocation half is proved by `engine/tests/allocation_free.rs`).
//!
//! `cargo bench -p stampede-benches --bench policies`

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use stampede_engine::policy::breaker::{BreakerConfig, CircuitBreaker, SlidingWindow};
use stampede_engine::policy::bulkhead::{Bulkhead, BulkheadConfig, CoDelConfig, QueueOrder};
use stampede_engine::policy::classify::Outcome;
use stampede_engine::policy::limiter::{ConcurrencyLimiter, Gradient2Config, LimiterKind, Signal};
use stampede_engine::policy::quota::{QuotaConfig, QuotaLimits, QuotaMeter, Reserve};
use stampede_engine::policy::retry_budget::{RatioBudget, RetryBudget};
use stampede_engine::policy::shedder::{PriorityShedder, ShedMarks};
use stampede_engine::policy::token_bucket::TokenBucket;
use stampede_engine::policy::Criticality;
use stampede_engine::{Nanos, RngStream, StreamPurpose};

fn policies(c: &mut Criterion) {
    let mut group = c.benchmark_group("policy_decision");
    let mut now: Nanos = 0;

    let mut bucket = TokenBucket::per_minute(600_000);
    group.bench_function("token_bucket_take", |b| {
        b.iter(|| {
            now += 1_000;
            black_box(bucket.try_take(black_box(now), 1))
        })
    });

    let mut budget = RetryBudget::Ratio(RatioBudget::new(0.1, 100.0, 100.0));
    let mut rng = RngStream::derive(1, 0, StreamPurpose::named("bench.policies"));
    group.bench_function("retry_budget_deposit_and_take", |b| {
        b.iter(|| {
            now += 1_000;
            budget.on_outcome(now, true);
            black_box(budget.try_retry(black_box(now), 10, 0, &mut rng))
        })
    });

    let mut breaker = CircuitBreaker::new(BreakerConfig {
        window: SlidingWindow::Time { window: 60_000_000_000, buckets: 60 },
        minimum_calls: 20,
        failure_rate_threshold: 0.3,
        ..BreakerConfig::default()
    });
    let mut call = 0u64;
    group.bench_function("breaker_allow_and_record", |b| {
        b.iter(|| {
            now += 1_000;
            call += 1;
            let outcome = if call.is_multiple_of(10) { Outcome::ServerError } else { Outcome::Success };
            if let Some(permit) = breaker.try_acquire(black_box(now)) {
                breaker.record(now, permit, outcome, 5_000_000);
            }
        })
    });

    let mut shedder = PriorityShedder::new(1000, ShedMarks::default());
    for _ in 0..500 {
        shedder.try_admit(Criticality::Critical);
    }
    group.bench_function("shedder_admit_and_release", |b| {
        b.iter(|| {
            if shedder.try_admit(black_box(Criticality::SheddablePlus)) {
                shedder.release();
            }
        })
    });

    let mut bulkhead = Bulkhead::new(BulkheadConfig {
        slots: 64,
        queue_capacity: 256,
        order: QueueOrder::AdaptiveLifo { standing_after: 50_000_000 },
        codel: Some(CoDelConfig { target: 50_000_000, interval: 1_000_000_000 }),
    });
    for id in 0..64 {
        bulkhead.try_acquire(0, id, u64::MAX);
    }
    let mut id = 64u64;
    group.bench_function("bulkhead_acquire_and_release", |b| {
        b.iter(|| {
            now += 1_000;
            id += 1;
            black_box(bulkhead.try_acquire(black_box(now), id, now + 1_000_000_000));
            black_box(bulkhead.release(now, |_, _| {}));
        })
    });

    let mut limiter = ConcurrencyLimiter::new(LimiterKind::Gradient2(Gradient2Config::default()));
    group.bench_function("limiter_acquire_and_update", |b| {
        b.iter(|| {
            now += 1_000;
            if limiter.try_acquire() {
                limiter.on_complete(now, black_box(20_000_000), Signal::Success, &mut rng);
            }
        })
    });

    let mut quota = QuotaMeter::new(
        QuotaLimits {
            requests_per_minute: 2_000_000,
            input_tokens_per_minute: 8_000_000_000,
            output_tokens_per_minute: 1_000_000_000,
        },
        QuotaConfig::default(),
    );
    group.bench_function("quota_reserve_and_reconcile", |b| {
        b.iter(|| {
            now += 100_000;
            if let Reserve::Granted(reservation) = quota.reserve(black_box(now), 6_200, 2_048) {
                quota.reconcile(now, reservation, 520);
            }
        })
    });
    group.finish();
}

criterion_group!(benches, policies);
criterion_main!(benches);
