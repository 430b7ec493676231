//! What a stampede-tower layer adds to a request, against tower's own layers and
//! governor: each layer around a service that answers at once, on one thread, and
//! with eight tokio tasks sharing one layer on a worker per core. Target: ≤ 1 µs added
//! at p50 per layer (the medians here, less the bare service's).
//!
//! `cargo bench -p stampede-benches --bench tower`

use std::convert::Infallible;
use std::future::Future;
use std::num::NonZeroU32;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use stampede_engine::policy::admission::Ladder;
use stampede_engine::policy::backoff::Backoff;
use stampede_engine::policy::breaker::BreakerConfig;
use stampede_engine::policy::classify::RetryClassifier;
use stampede_engine::policy::hedge::{HedgeConfig, HedgeDelay};
use stampede_engine::policy::limiter::{Gradient2Config, LimiterKind};
use stampede_engine::policy::retry_budget::{RatioBudget, RetryBudget};
use stampede_engine::policy::shedder::ShedMarks;
use stampede_engine::policy::Criticality;
use stampede_engine::NANOS_PER_SEC;
use stampede_tower::{
    admission, applicant_with, circuit_breaker, concurrency_limit, hedge, priority_shedder, rate_limit, retry,
    AdmissionConfig, AllCritical, Applicant, RetryConfig,
};
use tower::layer::Layer;
use tower::Service;

const TASKS: usize = 8;

/// One request through a service: `true` when it was answered.
type Requester = Box<dyn FnMut(u32) -> bool + Send>;
/// Builds a requester; for the eight-task runs, one per task over a shared layer.
type Build = Box<dyn Fn() -> Requester + Send + Sync>;

/// Answers at once: what is measured is the layer.
#[derive(Clone, Copy)]
struct Answer;

impl Service<u32> for Answer {
    type Response = u32;
    type Error = Infallible;
    type Future = std::future::Ready<Result<u32, Infallible>>;
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }
    fn call(&mut self, request: u32) -> Self::Future {
        std::future::ready(Ok(request))
    }
}

/// One request: ready, call, and the answer (ready at once; no runtime needed).
#[inline]
fn request<S: Service<u32>>(service: &mut S, n: u32) -> bool {
    let mut cx = Context::from_waker(Waker::noop());
    if !matches!(service.poll_ready(&mut cx), Poll::Ready(Ok(()))) {
        return false;
    }
    matches!(pin!(service.call(n)).poll(&mut cx), Poll::Ready(Ok(_)))
}

/// tower's retry with a policy that retries nothing: its cost on the success path.
#[derive(Clone, Copy)]
struct NeverRetry;

impl tower::retry::Policy<u32, u32, Infallible> for NeverRetry {
    type Future = std::future::Ready<()>;
    fn retry(&mut self, _: &mut u32, _: &mut Result<u32, Infallible>) -> Option<Self::Future> {
        None
    }
    fn clone_request(&mut self, request: &u32) -> Option<u32> {
        Some(*request)
    }
}

/// governor's direct rate limiter as a gate in front of the service.
#[derive(Clone)]
struct Governed {
    limiter: std::sync::Arc<governor::DefaultDirectRateLimiter>,
}

impl Service<u32> for Governed {
    type Response = u32;
    type Error = Infallible;
    type Future = std::future::Ready<Result<u32, Infallible>>;
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }
    fn call(&mut self, request: u32) -> Self::Future {
        let _ = self.limiter.check();
        std::future::ready(Ok(request))
    }
}

fn retry_config() -> RetryConfig {
    RetryConfig {
        max_attempts: 3,
        backoff: Backoff::FullJitter { base: NANOS_PER_SEC / 100, cap: NANOS_PER_SEC },
        classifier: RetryClassifier::default(),
        deadline: None,
    }
}

fn boxed<S: Service<u32> + Send + 'static>(mut service: S) -> Requester {
    Box::new(move |n| request(&mut service, n))
}

/// Every service measured, by name: each builds requesters over one layer (so the
/// eight tasks share its policy), and says whether the eight-task group runs it.
fn services() -> Vec<(&'static str, Build, bool)> {
    let breaker = circuit_breaker(BreakerConfig::default());
    let fixed = concurrency_limit(LimiterKind::Fixed { limit: 1_000 }, None, 1);
    let gradient2 = concurrency_limit(LimiterKind::Gradient2(Gradient2Config::default()), None, 1);
    let shedder = priority_shedder(1_000, ShedMarks::default()).criticality(AllCritical);
    let rate = rate_limit(1 << 40, 1 << 40, NANOS_PER_SEC);
    let retries = retry(retry_config(), RetryBudget::Ratio(RatioBudget::new(0.1, 10.0, 10.0)), 1);
    // A p95 hedge on a service that answers at once: what every call pays (the policy
    // learns each latency; no timer is made for an answer that came at once).
    // Admission with a deadline every request meets, one tenant, no pressure.
    let admitted = admission(
        AdmissionConfig {
            ladder: Ladder::default(),
            tenants: 1,
            capacity: 1_000,
            class_rungs: Vec::new(),
            expected: vec![Duration::from_millis(1)],
        },
        applicant_with(|_: &u32| Applicant {
            class: 0,
            criticality: Criticality::Critical,
            tenant: 0,
            time_left: Some(Duration::from_secs(1)),
        }),
    );
    let hedges = hedge(Some(HedgeConfig { delay: HedgeDelay::Quantile(0.95), max_hedges: 1, min_samples: 20 }));
    let tower_limit = tower::limit::ConcurrencyLimitLayer::new(1_000);
    let tower_retry = tower::retry::RetryLayer::new(NeverRetry);
    let per_second = NonZeroU32::new(u32::MAX).expect("nonzero");
    let governed = std::sync::Arc::new(governor::RateLimiter::direct(governor::Quota::per_second(per_second)));
    vec![
        ("bare service", Box::new(|| boxed(Answer)), true),
        ("stampede breaker", Box::new(move || boxed(breaker.layer(Answer))), true),
        ("stampede limit (fixed)", Box::new(move || boxed(fixed.layer(Answer))), false),
        ("stampede limit (gradient2)", Box::new(move || boxed(gradient2.layer(Answer))), true),
        ("stampede shedder", Box::new(move || boxed(shedder.layer(Answer))), true),
        ("stampede rate limit", Box::new(move || boxed(rate.layer(Answer))), true),
        ("stampede retry (ratio budget)", Box::new(move || boxed(retries.layer(Answer))), true),
        ("stampede admission", Box::new(move || boxed(admitted.layer(Answer))), true),
        ("stampede hedge (p95)", Box::new(move || boxed(hedges.layer(Answer))), true),
        ("tower concurrency limit", Box::new(move || boxed(tower_limit.layer(Answer))), true),
        ("tower retry", Box::new(move || boxed(tower_retry.layer(Answer))), false),
        ("governor rate limit", Box::new(move || boxed(Governed { limiter: governed.clone() })), true),
    ]
}

fn one_thread(c: &mut Criterion) {
    let mut group = c.benchmark_group("tower/one_thread");
    for (name, build, _) in services() {
        let mut service = build();
        let mut n = 0u32;
        group.bench_function(name, |b| {
            b.iter(|| {
                n = n.wrapping_add(1);
                assert!(service(std::hint::black_box(n)));
            })
        });
    }
    group.finish();
}

/// Eight tasks on a tokio runtime with one worker thread per core, each with its own
/// clone of one layer (so they share its policy), yielding every 64 requests so that
/// they interleave: the time a worker spends per request (wall time × workers ÷
/// requests). The OS threads are the cores, as in a server, so a lock holder is
/// rarely descheduled; eight OS threads on two cores would measure the scheduler.
fn eight_tasks(c: &mut Criterion) {
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get());
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(workers).build().expect("a runtime");
    let mut group = c.benchmark_group("tower/eight_tasks");
    group.sample_size(20).measurement_time(Duration::from_secs(3));
    for (name, build, _) in services().into_iter().filter(|(_, _, eight)| *eight) {
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let tasks: Vec<_> = (0..TASKS).map(|_| build()).collect();
                runtime.block_on(async {
                    let start = Instant::now();
                    let handles: Vec<_> = tasks
                        .into_iter()
                        .map(|mut service| {
                            tokio::spawn(async move {
                                for n in 0..iters {
                                    assert!(service(n as u32));
                                    if n % 64 == 63 {
                                        tokio::task::yield_now().await;
                                    }
                                }
                            })
                        })
                        .collect();
                    for handle in handles {
                        handle.await.expect("no panic");
                    }
                    start.elapsed() * workers as u32 / TASKS as u32
                })
            })
        });
    }
    group.finish();
}

criterion_group!(benches, one_thread, eight_tasks);
criterion_main!(benches);
