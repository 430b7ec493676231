//! No allocation per request beyond what tower itself does: a request that passes
//! every layer (retry, hedge, breaker, timeout, rate limit, shedder, adaptive limit, bulkhead) around a
//! service that answers at once allocates nothing once the stack is built. Refusals
//! box a `Rejected`, as tower's own `LoadShed` boxes its `Overloaded`; that is
//! counted too, so the cost is stated, not guessed.

use std::convert::Infallible;
use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use stampede_engine::testing::{allocations, CountingAllocator};
use stampede_kernel::NANOS_PER_SEC;
use stampede_policy::backoff::Backoff;
use stampede_policy::breaker::BreakerConfig;
use stampede_policy::bulkhead::{BulkheadConfig, QueueOrder};
use stampede_policy::classify::RetryClassifier;
use stampede_policy::hedge::{HedgeConfig, HedgeDelay};
use stampede_policy::limiter::{Gradient2Config, LimiterKind};
use stampede_policy::retry_budget::{RatioBudget, RetryBudget};
use stampede_policy::shedder::ShedMarks;
use stampede_tower::{
    bulkhead, circuit_breaker, concurrency_limit, hedge, priority_shedder, rate_limit, retry, timeout, AllCritical,
    RetryConfig,
};
use tower_layer::Layer;
use tower_service::Service;

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

/// Answers at once.
#[derive(Clone, Copy)]
struct Instant;

impl Service<u32> for Instant {
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

/// Polls a future that is ready at once, without a runtime.
fn now<F: Future>(future: F) -> F::Output {
    let mut cx = Context::from_waker(Waker::noop());
    match pin!(future).poll(&mut cx) {
        Poll::Ready(output) => output,
        Poll::Pending => panic!("the stack answered later than at once"),
    }
}

#[test]
fn a_request_through_every_layer_allocates_nothing() {
    let retry_config = RetryConfig {
        max_attempts: 3,
        backoff: Backoff::FullJitter { base: NANOS_PER_SEC / 100, cap: NANOS_PER_SEC },
        classifier: RetryClassifier::default(),
        deadline: None,
    };
    let retries = retry(retry_config, RetryBudget::Ratio(RatioBudget::new(0.1, 10.0, 10.0)), 1);
    let hedges = hedge(Some(HedgeConfig { delay: HedgeDelay::Quantile(0.95), max_hedges: 1, min_samples: 20 }));
    let stack = retries.layer(
        hedges.with_retry(&retries, true).layer(
            circuit_breaker(BreakerConfig::default()).layer(
                timeout(None).layer(
                    rate_limit(1_000_000, 1_000_000, NANOS_PER_SEC).layer(
                        priority_shedder(64, ShedMarks::default()).criticality(AllCritical).layer(
                            concurrency_limit(LimiterKind::Gradient2(Gradient2Config::default()), None, 1).layer(
                                bulkhead(
                                    BulkheadConfig {
                                        slots: 8,
                                        queue_capacity: 8,
                                        order: QueueOrder::Fifo,
                                        codel: None,
                                    },
                                    Duration::from_secs(1),
                                )
                                .layer(Instant),
                            ),
                        ),
                    ),
                ),
            ),
        ),
    );
    let mut service = stack;
    let mut cx = Context::from_waker(Waker::noop());
    for i in 0..1_000 {
        assert!(service.poll_ready(&mut cx).is_ready());
        assert_eq!(now(service.call(i)).expect("answered"), i);
    }
    let before = allocations();
    for i in 0..100_000 {
        let _ = service.poll_ready(&mut cx);
        assert_eq!(now(service.call(i)).expect("answered"), i);
    }
    assert_eq!(allocations() - before, 0, "allocations in 100,000 requests through eight layers");
}

#[test]
fn a_refusal_allocates_its_one_boxed_error() {
    let mut service = rate_limit(1, 1, 3_600 * NANOS_PER_SEC).layer(Instant);
    now(service.call(0)).expect("the one token");
    let before = allocations();
    for i in 0..1_000 {
        assert!(now(service.call(i)).is_err());
    }
    assert_eq!(allocations() - before, 1_000, "one Box<Rejected> per refusal, as tower's LoadShed");
}

/// Answers after a delay that depends on the request: a slow first attempt, a quick
/// hedge. Its future is a tokio sleep in place, so it allocates nothing itself.
#[derive(Clone, Copy)]
struct Later;

pin_project_lite::pin_project! {
    struct LaterFuture {
        #[pin]
        sleep: tokio::time::Sleep,
        value: u32,
    }
}

impl Future for LaterFuture {
    type Output = Result<u32, Infallible>;
    fn poll(self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        std::task::ready!(this.sleep.poll(cx));
        Poll::Ready(Ok(*this.value))
    }
}

impl Service<u32> for Later {
    type Response = u32;
    type Error = Infallible;
    type Future = LaterFuture;
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }
    fn call(&mut self, request: u32) -> LaterFuture {
        // Every third call takes 30 ms, the others 5 ms.
        static CALLS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let slow = n.is_multiple_of(3);
        let after = Duration::from_millis(if slow { 30 } else { 5 });
        LaterFuture { sleep: tokio::time::sleep(after), value: request }
    }
}

#[test]
fn hedges_that_fire_win_and_cancel_allocate_nothing() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap();
    let hedges = hedge(Some(HedgeConfig { delay: HedgeDelay::Fixed(10_000_000), max_hedges: 2, min_samples: 0 }));
    let mut service = hedges.layer(Later);
    runtime.block_on(async {
        for i in 0..100 {
            std::future::poll_fn(|cx| service.poll_ready(cx)).await.unwrap();
            service.call(i).await.unwrap();
        }
        let before = allocations();
        for i in 0..3_000 {
            std::future::poll_fn(|cx| service.poll_ready(cx)).await.unwrap();
            assert_eq!(service.call(i).await.unwrap(), i);
        }
        assert_eq!(allocations() - before, 0, "allocations in 3,000 hedged calls");
    });
    let counts = hedges.state().unwrap().read(|s| s.counts);
    assert!(counts.hedges >= 1_000 && counts.hedge_wins >= 1_000, "hedges went out and won: {counts:?}");
}

#[cfg(feature = "scenario")]
#[test]
fn a_request_through_a_gateway_class_stack_allocates_nothing() {
    use stampede_tower::{gateway_from_scenario, GatewayStacks, TokensWith};
    // llm-stack's seven gates, with meters too large to refuse (a refusal boxes its error).
    let mut params = gateway_from_scenario("llm-stack", Some(1), 1).expect("point 1").params().clone();
    for tier in &mut params.tiers {
        (tier.spec.rpm, tier.spec.itpm, tier.spec.otpm) = (u64::MAX / 4, u64::MAX / 4, u64::MAX / 4);
    }
    let stacks = GatewayStacks::new(params, 1);
    let stack = stacks.class("answer", TokensWith(|_: &u32| (100, 100), |_: &u32| 50)).expect("a class");
    assert_eq!(stack.order().len(), 7, "{:?}", stack.order());
    let mut service = stack.layer(Instant);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
    runtime.block_on(async {
        for i in 0..1_000 {
            std::future::poll_fn(|cx| service.poll_ready(cx)).await.unwrap();
            assert_eq!(service.call(i).await.expect("answered"), i);
        }
        let before = allocations();
        for i in 0..20_000 {
            std::future::poll_fn(|cx| service.poll_ready(cx)).await.unwrap();
            assert_eq!(service.call(i).await.expect("answered"), i);
        }
        assert_eq!(allocations() - before, 0, "allocations in 20,000 requests through a class's seven layers");
    });
}
