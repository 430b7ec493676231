//! The shared-state guard under contention: eight tasks on four worker threads call
//! through one stack at once. The policies' own debug assertions run on every
//! transition (tests build with them), and the test checks what they cannot see from
//! inside: the service never holds more calls than the limit, and every admitted call
//! is given back.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use stampede_policy::breaker::BreakerConfig;
use stampede_policy::limiter::LimiterKind;
use stampede_policy::shedder::ShedMarks;
use stampede_tower::{circuit_breaker, concurrency_limit, priority_shedder, AllCritical, BoxError, Rejected};
use tower_layer::Layer;
use tower_service::Service;

const LIMIT: u32 = 4;
const TASKS: u32 = 8;
const CALLS_PER_TASK: u32 = 2_000;

/// Counts the calls inside it and the most at once; every seventh call fails.
#[derive(Clone, Default)]
struct Counting {
    inside: Arc<AtomicU32>,
    most: Arc<AtomicU32>,
    calls: Arc<AtomicU32>,
}

impl Service<u32> for Counting {
    type Response = ();
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<(), BoxError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, n: u32) -> Self::Future {
        let inside = self.inside.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(inside, Ordering::SeqCst);
        self.calls.fetch_add(1, Ordering::SeqCst);
        let this = self.clone();
        Box::pin(async move {
            tokio::task::yield_now().await;
            this.inside.fetch_sub(1, Ordering::SeqCst);
            if n.is_multiple_of(7) {
                Err("the seventh fails".into())
            } else {
                Ok(())
            }
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn eight_tasks_through_one_stack_keep_every_policy_consistent() {
    let inner = Counting::default();
    let limit = concurrency_limit(LimiterKind::Fixed { limit: LIMIT }, None, 1);
    let shedder = priority_shedder(LIMIT + 2, ShedMarks::default()).criticality(AllCritical);
    // A breaker that records every call the service answers.
    let breaker =
        circuit_breaker(BreakerConfig { failure_rate_threshold: 0.9, minimum_calls: 10, ..BreakerConfig::default() });
    let service = shedder.layer(breaker.layer(limit.layer(inner.clone())));
    let tasks: Vec<_> = (0..TASKS)
        .map(|task| {
            let mut service = service.clone();
            tokio::spawn(async move {
                let (mut answered, mut limited) = (0u32, 0u32);
                for i in 0..CALLS_PER_TASK {
                    std::future::poll_fn(|cx| service.poll_ready(cx)).await.unwrap();
                    match service.call(task * CALLS_PER_TASK + i).await {
                        Ok(()) => answered += 1,
                        Err(error) => limited += (error.downcast_ref() == Some(&Rejected::ConcurrencyLimit)) as u32,
                    }
                }
                (answered, limited)
            })
        })
        .collect();
    let (mut answered, mut limited) = (0, 0);
    for task in tasks {
        let (a, l) = task.await.expect("no task panicked (a debug assertion would)");
        (answered, limited) = (answered + a, limited + l);
    }
    assert!(limited > 0, "the tasks contended: some calls found the limit reached");
    assert!(inner.most.load(Ordering::SeqCst) <= LIMIT, "the service held more calls than the limit");
    assert_eq!(inner.inside.load(Ordering::SeqCst), 0);
    assert_eq!(limit.policy().read(|g| g.limiter.in_flight()), 0, "every admitted call was given back");
    assert_eq!(shedder.policy().read(|g| g.0.in_flight()), 0);
    let calls = inner.calls.load(Ordering::SeqCst);
    assert!(calls > 0 && answered <= calls, "{answered} answered of {calls} calls");
    // The limit's refusals are not failures of the service: the breaker outside it
    // abandons them (a 1-in-7 failure rate never reaches its 90%).
    let counters = breaker.policy().read(|g| g.0.counters());
    assert_eq!((counters.trips, counters.refusals), (0, 0), "the breaker never opened: {counters:?}");
}

/// Answers after 0–3 ms (by the request's number); every fifth call fails.
#[derive(Clone, Default)]
struct Jittery {
    calls: Arc<AtomicU32>,
}

impl Service<u32> for Jittery {
    type Response = ();
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<(), BoxError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, n: u32) -> Self::Future {
        let call = self.calls.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move {
            tokio::time::sleep(std::time::Duration::from_millis(((n ^ call) % 4) as u64)).await;
            if call.is_multiple_of(5) {
                Err("the fifth fails".into())
            } else {
                Ok(())
            }
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn eight_tasks_retrying_and_hedging_on_one_budget_give_back_every_loan() {
    use stampede_policy::backoff::Backoff;
    use stampede_policy::classify::RetryClassifier;
    use stampede_policy::hedge::{HedgeConfig, HedgeDelay};
    use stampede_policy::retry_budget::{EnvoyBudget, RetryBudget};
    use stampede_tower::{hedge, retry, RetryConfig};
    let config = RetryConfig {
        max_attempts: 3,
        backoff: Backoff::Constant { delay: 0 },
        classifier: RetryClassifier::default(),
        deadline: None,
    };
    // Envoy's budget lends at most three concurrent retries or hedges.
    let retries = retry(config, RetryBudget::Envoy(EnvoyBudget::new(0.0, 3)), 1);
    let hedges = hedge(Some(HedgeConfig { delay: HedgeDelay::Fixed(1_000_000), max_hedges: 2, min_samples: 0 }))
        .with_retry(&retries, true);
    let inner = Jittery::default();
    let service = retries.layer(hedges.layer(inner.clone()));
    let tasks: Vec<_> = (0..TASKS)
        .map(|task| {
            let mut service = service.clone();
            tokio::spawn(async move {
                let mut answered = 0u32;
                for i in 0..200 {
                    std::future::poll_fn(|cx| service.poll_ready(cx)).await.unwrap();
                    answered += service.call(task * 200 + i).await.is_ok() as u32;
                }
                answered
            })
        })
        .collect();
    let mut answered = 0;
    for task in tasks {
        answered += task.await.expect("no task panicked (a debug assertion would)");
    }
    let state = retries.state().lock();
    let lent = match &state.budget {
        RetryBudget::Envoy(budget) => budget.active_retries(),
        _ => unreachable!(),
    };
    assert_eq!((state.active, lent), (0, 0), "every call ended and every retry or hedge gave back its loan");
    let counts = hedges.state().unwrap().read(|s| s.counts);
    assert!(counts.hedges > 0 && counts.denied_by_budget > 0, "hedges went out and the budget ran dry: {counts:?}");
    assert!(state.counts.retries > 0, "{:?}", state.counts);
    assert_eq!(counts.calls, state.counts.attempts, "every try of every call went through the hedge layer");
    assert!(answered > 1_400, "{answered} of 1,600 answered");
}
