//! Each layer driven through tower with a scripted inner service and tokio's paused
//! clock, so every time is exact and every run the same; the policy's decisions are
//! checked against the same struct driven directly with the same times.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use stampede_kernel::Named;
use stampede_kernel::{RngStream, StreamPurpose, NANOS_PER_SEC};
use stampede_policy::admission::{Admission, AdmissionController, AdmissionRequest, Ladder};
use stampede_policy::backoff::Backoff;
use stampede_policy::breaker::{BreakerConfig, BreakerState, CircuitBreaker, SlidingWindow};
use stampede_policy::classify::{Outcome, RetryClassifier};
use stampede_policy::hedge::{HedgeConfig, HedgeDelay, HedgePolicy};
use stampede_policy::limiter::{AimdConfig, ConcurrencyLimiter, LimiterKind, Signal};
use stampede_policy::quota::{QuotaConfig, QuotaLimits, Reserve};
use stampede_policy::retry_budget::{EnvoyBudget, RatioBudget, RetryBudget};
use stampede_policy::shedder::ShedMarks;
use stampede_policy::Criticality;
use stampede_tower::{admission, applicant_with, quota_meter, AdmissionConfig, Applicant, TokensWith};
use stampede_tower::{
    circuit_breaker, classify_with, concurrency_limit, hedge, priority_shedder, rate_limit, retry, BoxError,
    Classified, HedgeCounts, HttpStatus, Rejected, RetryConfig,
};
use tower_layer::Layer;
use tower_service::Service;

const MS: u64 = 1_000_000;

/// What the scripted service answers to its n-th call (0-based): after how long, and
/// with which outcome.
type Script = Arc<dyn Fn(u32) -> (Duration, Outcome) + Send + Sync>;

/// An inner service that answers as its script says and counts its calls.
#[derive(Clone)]
struct Scripted {
    calls: Arc<AtomicU32>,
    /// Calls whose future ran to its end (not dropped, as a lost hedge is).
    finished: Arc<AtomicU32>,
    script: Script,
}

/// The scripted service's error: the outcome it stands for.
#[derive(Debug)]
struct Failed(Outcome);

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.0)
    }
}
impl std::error::Error for Failed {}

impl Scripted {
    fn new(script: impl Fn(u32) -> (Duration, Outcome) + Send + Sync + 'static) -> Self {
        Scripted { calls: Arc::new(AtomicU32::new(0)), finished: Arc::new(AtomicU32::new(0)), script: Arc::new(script) }
    }

    fn calls(&self) -> u32 {
        self.calls.load(Ordering::SeqCst)
    }

    fn finished(&self) -> u32 {
        self.finished.load(Ordering::SeqCst)
    }
}

impl<Req> Service<Req> for Scripted {
    type Response = u32;
    type Error = Failed;
    type Future = Pin<Box<dyn Future<Output = Result<u32, Failed>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Failed>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: Req) -> Self::Future {
        let n = self.calls.fetch_add(1, Ordering::SeqCst);
        let (after, outcome) = (self.script)(n);
        let finished = Arc::clone(&self.finished);
        Box::pin(async move {
            tokio::time::sleep(after).await;
            finished.fetch_add(1, Ordering::SeqCst);
            match outcome {
                Outcome::Success => Ok(n),
                outcome => Err(Failed(outcome)),
            }
        })
    }
}

/// Reads the scripted service's error as its outcome.
fn scripted_outcomes() -> impl stampede_tower::Classify<u32, Failed> {
    classify_with(|result: Result<&u32, &Failed>| match result {
        Ok(_) => Classified::of(Outcome::Success),
        Err(Failed(outcome)) => Classified::of(*outcome),
    })
}

fn rejection(error: &BoxError) -> Option<Rejected> {
    error.downcast_ref::<Rejected>().copied()
}

async fn call<S: Service<u32, Response = u32, Error = BoxError>>(service: &mut S) -> Result<u32, BoxError> {
    std::future::poll_fn(|cx| service.poll_ready(cx)).await?;
    service.call(0).await
}

#[tokio::test(start_paused = true)]
async fn the_breaker_opens_refuses_without_calling_the_service_and_probes_after_its_open_time() {
    let config = BreakerConfig {
        window: SlidingWindow::Count { size: 10 },
        minimum_calls: 10,
        failure_rate_threshold: 0.5,
        open_duration: 5 * NANOS_PER_SEC,
        max_open_duration: 5 * NANOS_PER_SEC,
        half_open_probes: 2,
        ..BreakerConfig::default()
    };
    // Six failures in the first ten calls, then a healthy service.
    let inner = Scripted::new(|n| {
        (Duration::from_millis(10), if n < 10 && n % 5 < 3 { Outcome::ServerError } else { Outcome::Success })
    });
    let layer = circuit_breaker(config).classify(scripted_outcomes());
    let mut service = layer.layer(inner.clone());
    let mut direct = CircuitBreaker::new(config);
    for n in 0..10u64 {
        let now = n * 10 * MS;
        let permit = direct.try_acquire(now).expect("closed");
        let result = call(&mut service).await;
        let outcome = if result.is_ok() { Outcome::Success } else { Outcome::ServerError };
        direct.record(now + 10 * MS, permit, outcome, 10 * MS);
    }
    assert!(matches!(direct.state(), BreakerState::Open { .. }), "the struct driven directly trips at 6 of 10");
    assert!(matches!(layer.policy().read(|b| b.0.state()), BreakerState::Open { .. }), "and so does the layer's");
    let before = inner.calls();
    for _ in 0..20 {
        let error = call(&mut service).await.expect_err("open");
        assert_eq!(rejection(&error), Some(Rejected::BreakerOpen));
    }
    assert_eq!(inner.calls(), before, "an open breaker never calls the service");
    tokio::time::advance(Duration::from_secs(5)).await;
    assert_eq!(call(&mut service).await.expect("a probe goes through"), 10);
    assert_eq!(call(&mut service).await.expect("the second probe"), 11);
    assert_eq!(layer.policy().read(|b| b.0.state()), BreakerState::Closed, "two good probes close it");
}

#[tokio::test(start_paused = true)]
async fn a_fixed_limit_refuses_past_its_limit_and_a_dropped_call_gives_its_place_back() {
    let inner = Scripted::new(|_| (Duration::from_secs(1), Outcome::Success));
    let layer = concurrency_limit(LimiterKind::Fixed { limit: 2 }, None, 1).classify(scripted_outcomes());
    let mut service = layer.layer(inner.clone());
    let first = tokio::spawn(service.call(0));
    let second = service.call(0);
    let error = service.call(0).await.expect_err("a third is over the limit");
    assert_eq!(rejection(&error), Some(Rejected::ConcurrencyLimit));
    assert_eq!(inner.calls(), 2);
    drop(second); // the caller gave up
    assert_eq!(layer.policy().read(|g| g.limiter.in_flight()), 1, "a dropped call is abandoned");
    let third = tokio::spawn(service.call(0));
    assert_eq!(first.await.unwrap().unwrap(), 0);
    assert_eq!(third.await.unwrap().unwrap(), 2);
    assert_eq!(layer.policy().read(|g| g.limiter.in_flight()), 0);
}

#[tokio::test(start_paused = true)]
async fn an_adaptive_limit_learns_what_the_struct_learns_from_the_same_outcomes() {
    let aimd = AimdConfig { initial: 10.0, min: 2.0, max: 50.0, timeout: 5 * NANOS_PER_SEC, ..AimdConfig::default() };
    let kind = LimiterKind::Aimd(aimd);
    // Successes, then timeouts (drops), then 500s (ignored), in turn.
    let outcome = |n: u32| match n % 3 {
        0 => Outcome::Success,
        1 => Outcome::Timeout,
        _ => Outcome::ServerError,
    };
    let inner = Scripted::new(move |n| (Duration::from_millis(20), outcome(n)));
    let layer = concurrency_limit(kind, None, 3).classify(scripted_outcomes());
    let mut service = layer.layer(inner);
    let mut direct = ConcurrencyLimiter::new(kind);
    let mut rng = RngStream::derive(3, 0, StreamPurpose::named("tower.limiter"));
    for n in 0..30u32 {
        let _ = call(&mut service).await;
        assert!(direct.try_acquire());
        let now = (n as u64 + 1) * 20 * MS;
        match stampede_tower::gates::limiter_signal(outcome(n)) {
            Some(signal) => direct.on_complete(now, 20 * MS, signal, &mut rng),
            None => direct.abandon(),
        }
        assert_eq!(layer.policy().read(|g| g.limiter.limit()), direct.limit(), "after call {n}");
    }
    assert!(direct.limit() < 10, "ten drops lowered the limit: {}", direct.limit());
    assert_eq!(stampede_tower::gates::limiter_signal(Outcome::Timeout), Some(Signal::Dropped));
}

#[tokio::test(start_paused = true)]
async fn the_shedder_reads_criticality_from_the_request_and_sheds_the_least_critical_first() {
    #[derive(Clone)]
    struct Slow;
    impl Service<http::Request<()>> for Slow {
        type Response = http::Response<()>;
        type Error = std::convert::Infallible;
        type Future = Pin<Box<dyn Future<Output = Result<http::Response<()>, std::convert::Infallible>> + Send>>;
        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
            Poll::Ready(Ok(()))
        }
        fn call(&mut self, _: http::Request<()>) -> Self::Future {
            Box::pin(async {
                tokio::time::sleep(Duration::from_secs(1)).await;
                Ok(http::Response::new(()))
            })
        }
    }
    let request = |criticality: Criticality| {
        let mut request = http::Request::new(());
        request.extensions_mut().insert(criticality);
        request
    };
    // Sheddable requests stop at half the pool, critical ones at all of it.
    let layer = priority_shedder(4, ShedMarks([1.0, 1.0, 0.75, 0.5])).classify(HttpStatus);
    let mut service = layer.layer(Slow);
    let held: Vec<_> = (0..2).map(|_| tokio::spawn(service.call(request(Criticality::Sheddable)))).collect();
    tokio::task::yield_now().await;
    let error = service.call(request(Criticality::Sheddable)).await.expect_err("the pool is half full");
    assert_eq!(rejection(&error), Some(Rejected::Shed(Criticality::Sheddable)));
    let critical: Vec<_> = (0..2).map(|_| tokio::spawn(service.call(request(Criticality::Critical)))).collect();
    tokio::task::yield_now().await;
    let error = service.call(http::Request::new(())).await.expect_err("no extension reads as critical; full");
    assert_eq!(rejection(&error), Some(Rejected::Shed(Criticality::Critical)));
    for task in held.into_iter().chain(critical) {
        assert_eq!(task.await.unwrap().unwrap().status(), 200);
    }
    assert_eq!(layer.policy().read(|g| g.0.in_flight()), 0);
    assert_eq!(layer.policy().read(|g| g.0.shed()), [0, 1, 0, 1]);
}

#[tokio::test(start_paused = true)]
async fn the_rate_limit_refuses_an_empty_bucket_and_refills_with_time() {
    let inner = Scripted::new(|_| (Duration::ZERO, Outcome::Success));
    let mut service = rate_limit(5, 5, NANOS_PER_SEC).classify(scripted_outcomes()).layer(inner.clone());
    for _ in 0..5 {
        call(&mut service).await.expect("a full bucket");
    }
    let error = call(&mut service).await.expect_err("empty");
    assert_eq!(rejection(&error), Some(Rejected::RateLimited));
    tokio::time::advance(Duration::from_millis(199)).await;
    assert!(call(&mut service).await.is_err(), "not yet a whole token");
    tokio::time::advance(Duration::from_millis(1)).await;
    call(&mut service).await.expect("one token refilled in 200 ms");
    assert_eq!(inner.calls(), 6, "refusals never reached the service");
}

fn retry_config(max_attempts: u32, deadline: Option<Duration>) -> RetryConfig {
    RetryConfig {
        max_attempts,
        backoff: Backoff::Exponential { base: 100 * MS, cap: NANOS_PER_SEC },
        classifier: RetryClassifier::default(),
        deadline,
    }
}

#[tokio::test(start_paused = true)]
async fn retries_wait_the_backoff_and_stop_at_max_attempts() {
    // Two 500s, then a success.
    let inner =
        Scripted::new(|n| (Duration::from_millis(10), if n < 2 { Outcome::ServerError } else { Outcome::Success }));
    let layer = retry(retry_config(3, None), RetryBudget::Unlimited, 1).classify(scripted_outcomes());
    let mut service = layer.layer(inner.clone());
    let start = tokio::time::Instant::now();
    assert_eq!(call(&mut service).await.expect("the third attempt succeeds"), 2);
    // 10 ms, 100 ms back-off, 10 ms, 200 ms, 10 ms.
    assert_eq!(start.elapsed(), Duration::from_millis(330));
    let counts = layer.state().read(|s| s.counts);
    assert_eq!((counts.calls, counts.attempts, counts.retries), (1, 3, 2));
    // Always failing: three attempts, then the last error.
    let failing = Scripted::new(|_| (Duration::from_millis(10), Outcome::Timeout));
    let mut service = layer.layer(failing.clone());
    let error = call(&mut service).await.expect_err("every attempt times out");
    assert!(error.downcast_ref::<Failed>().is_some_and(|f| f.0 == Outcome::Timeout));
    assert_eq!(failing.calls(), 3);
    // A client error is never retried.
    let wrong = Scripted::new(|_| (Duration::ZERO, Outcome::ClientError));
    assert!(call(&mut layer.layer(wrong.clone())).await.is_err());
    assert_eq!(wrong.calls(), 1);
    assert_eq!(layer.state().read(|s| s.active), 0);
}

#[tokio::test(start_paused = true)]
async fn a_retry_that_cannot_meet_the_deadline_and_one_the_budget_refuses_are_not_made() {
    // The deadline: successes take 300 ms, so after one a retry needs 100 ms + 300 ms.
    let inner =
        Scripted::new(|n| (Duration::from_millis(300), if n == 0 { Outcome::Success } else { Outcome::ServerError }));
    let layer = retry(retry_config(5, Some(Duration::from_millis(600))), RetryBudget::Unlimited, 1)
        .classify(scripted_outcomes());
    let mut service = layer.layer(inner.clone());
    call(&mut service).await.expect("the first call succeeds and sets the expected attempt");
    assert!(call(&mut service).await.is_err());
    // At 300 ms: 300 + 100 + 300 > 600, so no retry.
    assert_eq!(inner.calls(), 2);
    assert_eq!(layer.state().read(|s| s.counts.denied_by_deadline), 1);

    // The budget: a ratio budget with 2 tokens, a retry costs 1.
    let failing = Scripted::new(|_| (Duration::from_millis(1), Outcome::ServerError));
    let layer = retry(retry_config(5, None), RetryBudget::Ratio(RatioBudget::new(0.1, 2.0, 2.0)), 1)
        .classify(scripted_outcomes());
    let mut service = layer.layer(failing.clone());
    assert!(call(&mut service).await.is_err());
    assert_eq!(failing.calls(), 3, "the first attempt and the two retries the budget held");
    assert!(call(&mut service).await.is_err());
    assert_eq!(failing.calls(), 4, "an empty budget: no retry");
    let counts = layer.state().read(|s| s.counts);
    assert_eq!((counts.retries, counts.denied_by_budget), (2, 2));
}

#[tokio::test(start_paused = true)]
async fn a_429_waits_at_least_the_servers_retry_after() {
    #[derive(Clone)]
    struct Limited(Arc<Mutex<u32>>);
    impl Service<()> for Limited {
        type Response = http::Response<()>;
        type Error = std::convert::Infallible;
        type Future = std::future::Ready<Result<http::Response<()>, std::convert::Infallible>>;
        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
            Poll::Ready(Ok(()))
        }
        fn call(&mut self, _: ()) -> Self::Future {
            let mut n = self.0.lock().unwrap();
            *n += 1;
            let response = if *n == 1 {
                http::Response::builder().status(429).header("retry-after", "2").body(()).unwrap()
            } else {
                http::Response::new(())
            };
            std::future::ready(Ok(response))
        }
    }
    let layer = retry(retry_config(2, None), RetryBudget::Unlimited, 1).classify(HttpStatus);
    let mut service = layer.layer(Limited(Arc::new(Mutex::new(0))));
    let start = tokio::time::Instant::now();
    std::future::poll_fn(|cx| service.poll_ready(cx)).await.unwrap();
    let response = service.call(()).await.expect("answered");
    assert_eq!(response.status(), 200);
    assert_eq!(start.elapsed(), Duration::from_secs(2), "the 100 ms back-off is raised to the retry-after");
}

/// Calls `service` once when it is ready, whatever its error type.
async fn call_once<S: Service<u32>>(service: &mut S) -> Result<S::Response, S::Error> {
    std::future::poll_fn(|cx| service.poll_ready(cx)).await?;
    service.call(0).await
}

fn fixed_hedge(after: Duration, max_hedges: u32) -> HedgeConfig {
    HedgeConfig { delay: HedgeDelay::Fixed(after.as_nanos() as u64), max_hedges, min_samples: 0 }
}

#[tokio::test(start_paused = true)]
async fn a_hedge_goes_out_after_its_delay_the_first_success_wins_and_the_loser_is_cancelled() {
    // The first attempt is slow (100 ms), the hedge quick (10 ms).
    let inner = Scripted::new(|n| (Duration::from_millis(if n == 0 { 100 } else { 10 }), Outcome::Success));
    let layer = hedge(Some(fixed_hedge(Duration::from_millis(20), 1))).classify(scripted_outcomes());
    let mut service = layer.layer(inner.clone());
    let start = tokio::time::Instant::now();
    assert_eq!(call_once(&mut service).await.expect("the hedge answers"), 1);
    assert_eq!(start.elapsed(), Duration::from_millis(30), "sent at 20 ms, answered 10 ms later");
    let counts = layer.state().expect("a policy").read(|s| s.counts);
    assert_eq!(counts, HedgeCounts { calls: 1, hedges: 1, hedge_wins: 1, denied_by_budget: 0 });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!((inner.calls(), inner.finished()), (2, 1), "the losing first attempt was dropped, not finished");

    // An answer before the delay sends no hedge.
    let quick = Scripted::new(|_| (Duration::from_millis(10), Outcome::Success));
    let layer = hedge(Some(fixed_hedge(Duration::from_millis(20), 1))).classify(scripted_outcomes());
    let mut service = layer.layer(quick.clone());
    for _ in 0..5 {
        call_once(&mut service).await.expect("answers");
    }
    assert_eq!(quick.calls(), 5);
    assert_eq!(layer.state().unwrap().read(|s| s.counts.hedges), 0);
}

#[tokio::test(start_paused = true)]
async fn hedges_go_out_one_delay_apart_up_to_max_and_a_failed_one_waits_for_the_others() {
    // Attempt 0 answers at 100 ms; hedge 1 (sent at 20 ms) fails at 25 ms; hedge 2
    // (sent at 40 ms) succeeds at 50 ms. A third hedge is never sent (max 2).
    let inner = Scripted::new(|n| match n {
        0 => (Duration::from_millis(100), Outcome::Success),
        1 => (Duration::from_millis(5), Outcome::ServerError),
        _ => (Duration::from_millis(10), Outcome::Success),
    });
    let layer = hedge(Some(fixed_hedge(Duration::from_millis(20), 2))).classify(scripted_outcomes());
    let mut service = layer.layer(inner.clone());
    let start = tokio::time::Instant::now();
    assert_eq!(call_once(&mut service).await.expect("the second hedge answers"), 2);
    assert_eq!(start.elapsed(), Duration::from_millis(50));
    assert_eq!(inner.calls(), 3);
    assert_eq!(layer.state().unwrap().read(|s| (s.counts.hedges, s.counts.hedge_wins)), (2, 1));
}

#[tokio::test(start_paused = true)]
async fn a_try_whose_attempts_all_fail_answers_the_last_failure_and_the_retry_layer_retries_it() {
    // Attempt 0 fails at 50 ms, its hedge (sent at 20 ms) at 40 ms: the try fails at
    // 50 ms; the retry (after a 100 ms backoff) succeeds at once.
    let inner = Scripted::new(|n| match n {
        0 => (Duration::from_millis(50), Outcome::Timeout),
        1 => (Duration::from_millis(20), Outcome::ServerError),
        _ => (Duration::from_millis(5), Outcome::Success),
    });
    let retries = retry(retry_config(2, None), RetryBudget::Unlimited, 1).classify(scripted_outcomes());
    let hedges = hedge(Some(fixed_hedge(Duration::from_millis(20), 1))).with_retry(&retries, true);
    let hedges = hedges.classify(scripted_outcomes());
    let mut service = retries.layer(hedges.layer(inner.clone()));
    let start = tokio::time::Instant::now();
    assert_eq!(call(&mut service).await.expect("the retry succeeds"), 2);
    // The retry's own hedge would go out at 20 ms; it answered in 5.
    assert_eq!(start.elapsed(), Duration::from_millis(50 + 100 + 5));
    assert_eq!(retries.state().read(|s| s.counts.retries), 1);
    assert_eq!(inner.calls(), 3);
}

#[tokio::test(start_paused = true)]
async fn a_hedge_asks_the_retry_budget_which_may_refuse_it_and_gets_back_what_it_lent() {
    let slow_then_quick =
        |n: u32| (Duration::from_millis(if n.is_multiple_of(2) { 100 } else { 10 }), Outcome::Success);
    // An empty ratio budget refuses the hedge: the call waits for its first attempt.
    let inner = Scripted::new(slow_then_quick);
    let retries = retry(retry_config(3, None), RetryBudget::Ratio(RatioBudget::new(0.1, 10.0, 0.0)), 1);
    let hedges = hedge(Some(fixed_hedge(Duration::from_millis(20), 2))).with_retry(&retries, true);
    let mut service = retries.layer(hedges.clone().classify(scripted_outcomes()).layer(inner.clone()));
    let start = tokio::time::Instant::now();
    assert_eq!(call(&mut service).await.expect("answers"), 0);
    assert_eq!(start.elapsed(), Duration::from_millis(100));
    assert_eq!(inner.calls(), 1, "a refused hedge ends the hedging of the try");
    assert_eq!(
        hedges.state().unwrap().read(|s| s.counts),
        HedgeCounts { calls: 1, hedges: 0, hedge_wins: 0, denied_by_budget: 1 }
    );
    // Envoy's budget lends one concurrent retry: the hedge holds it while out, and
    // gives it back when it wins — and when it loses or its caller goes away.
    let inner = Scripted::new(slow_then_quick);
    let retries = retry(retry_config(3, None), RetryBudget::Envoy(EnvoyBudget::new(0.0, 1)), 1);
    let hedges = hedge(Some(fixed_hedge(Duration::from_millis(20), 1))).with_retry(&retries, true);
    let mut service = retries.layer(hedges.clone().classify(scripted_outcomes()).layer(inner.clone()));
    let lent = || match &retries.state().lock().budget {
        RetryBudget::Envoy(budget) => budget.active_retries(),
        _ => unreachable!(),
    };
    let pending = tokio::spawn(service.call(0));
    tokio::time::sleep(Duration::from_millis(25)).await;
    assert_eq!(lent(), 1, "the hedge is out");
    assert_eq!(pending.await.unwrap().expect("the hedge wins"), 1);
    assert_eq!(lent(), 0, "and gave back what it was lent");
    let dropped = service.call(0);
    let dropped = tokio::spawn(async move { tokio::time::timeout(Duration::from_millis(25), dropped).await });
    assert!(dropped.await.unwrap().is_err(), "the caller gave up at 25 ms, with the hedge out");
    assert_eq!(lent(), 0, "a dropped call gives back its hedge's loan");
}

#[tokio::test(start_paused = true)]
async fn a_quantile_delay_is_the_structs_read_from_each_tries_latency_since_its_first_attempt() {
    // Latencies 1–60 ms in a fixed shuffle; the p90 after 20 tries.
    let latency = |n: u32| Duration::from_millis(1 + (n as u64 * 37) % 60);
    let config = HedgeConfig { delay: HedgeDelay::Quantile(0.9), max_hedges: 1, min_samples: 20 };
    let inner = Scripted::new(move |n| (latency(n), Outcome::Success));
    let layer = hedge(Some(config)).classify(scripted_outcomes());
    let mut service = layer.layer(inner.clone());
    let mut direct = HedgePolicy::new(config);
    let tries = 400;
    for _ in 0..tries {
        let start = tokio::time::Instant::now();
        call_once(&mut service).await.expect("answers");
        direct.observe(start.elapsed().as_nanos() as u64);
        let read = layer.state().unwrap().read(|s| s.policy.delay(0));
        assert_eq!(read, direct.delay(0), "the layer's policy learned what the struct learned");
    }
    let hedged = layer.state().unwrap().read(|s| s.counts.hedges);
    // The first 20 tries send none; at the fixed point about 1 − q of the rest hedge.
    assert!((20..=60).contains(&hedged), "{hedged} of {tries} tries hedged at the p90");
    assert_eq!(inner.calls() as u64, tries + hedged);
}

fn admission_config(capacity: u32, tenants: u32, expected: Duration) -> AdmissionConfig {
    AdmissionConfig { ladder: Ladder::default(), tenants, capacity, class_rungs: Vec::new(), expected: vec![expected] }
}

/// Reads the request number as the applicant: `n / 100` its tenant, `n % 10` its
/// criticality (0 CRITICAL_PLUS … 3 SHEDDABLE), and `(n / 10) % 10` its time left in
/// tens of milliseconds (0: no deadline).
fn numbered(n: &u32) -> Applicant {
    let left = (n / 10) % 10;
    Applicant {
        class: 0,
        criticality: Criticality::ALL[(n % 10) as usize],
        tenant: n / 100,
        time_left: (left > 0).then(|| Duration::from_millis(left as u64 * 10)),
    }
}

type Pending = Pin<Box<dyn Future<Output = Result<u32, BoxError>> + Send>>;

/// Calls once and polls once: `Err(refusal)` when refused at once, else the pending call.
async fn try_admit<S>(service: &mut S, n: u32) -> Result<Pending, Option<Rejected>>
where
    S: Service<u32, Response = u32, Error = BoxError>,
    S::Future: Send + 'static,
{
    let mut future: Pending = Box::pin(service.call(n));
    match std::future::poll_fn(|cx| Poll::Ready(future.as_mut().poll(cx))).await {
        Poll::Pending => Ok(future),
        Poll::Ready(Err(error)) => Err(rejection(&error)),
        Poll::Ready(Ok(_)) => unreachable!("the scripted service answers later"),
    }
}

#[tokio::test(start_paused = true)]
async fn admission_sheds_by_the_ladder_under_in_flight_pressure_as_the_controller_does() {
    let inner = Scripted::new(|_| (Duration::from_secs(1), Outcome::Success));
    let layer = admission(admission_config(10, 1, Duration::from_millis(1)), applicant_with(numbered))
        .classify(scripted_outcomes());
    let mut service = layer.layer(inner.clone());
    let mut direct = AdmissionController::new(Ladder::default(), 1, 10);
    let request = |criticality| AdmissionRequest { criticality, tenant: 0, deadline: u64::MAX, expected_latency: MS };
    let mut held = Vec::new();
    // Eight CRITICAL_PLUS requests in flight: pressure 0.8, rung L1.
    for in_flight in 0..8u32 {
        held.push(try_admit(&mut service, 0).await.expect("admitted"));
        assert_eq!(direct.admit(0, request(Criticality::CriticalPlus), in_flight as f64 / 10.0), Admission::Admitted);
    }
    assert_eq!(layer.state().read(|s| s.pressure(0)), 0.8);
    // At L1 only SHEDDABLE is refused; at 0.9 (L2) SHEDDABLE_PLUS too.
    for pressure_in_flight in [8u32, 9] {
        for &criticality in Criticality::ALL {
            let pressure = layer.state().read(|s| s.pressure(0));
            assert_eq!(pressure, pressure_in_flight as f64 / 10.0);
            let expected = direct.admit(0, request(criticality), pressure);
            match try_admit(&mut service, criticality.index() as u32).await {
                Err(Some(Rejected::AdmissionShed { rung })) => assert_eq!(expected, Admission::Shed { rung }),
                Err(other) => panic!("{other:?}"),
                Ok(call) => {
                    assert_eq!(expected, Admission::Admitted, "{criticality:?}");
                    drop(call); // the caller gives up: the place is given back
                    direct.finished(0);
                }
            }
        }
        held.push(try_admit(&mut service, 0).await.expect("CRITICAL_PLUS is admitted"));
        direct.admit(0, request(Criticality::CriticalPlus), pressure_in_flight as f64 / 10.0);
    }
    assert_eq!(layer.state().read(|s| s.controller.refusals()), direct.refusals());
    assert_eq!(direct.refusals().0, 3, "SHEDDABLE at L1; SHEDDABLE and SHEDDABLE_PLUS at L2");
    for call in held {
        call.await.expect("answered");
    }
    assert_eq!(layer.state().read(|s| s.in_flight), 0);
}

#[tokio::test(start_paused = true)]
async fn admission_refuses_a_deadline_it_cannot_meet_and_learns_the_expected_latency() {
    let inner = Scripted::new(|_| (Duration::from_millis(10), Outcome::Success));
    let layer = admission(admission_config(100, 1, Duration::from_millis(45)), applicant_with(numbered))
        .classify(scripted_outcomes());
    let mut service = layer.layer(inner.clone());
    // 40 ms left (n = 41: CRITICAL) against an expected 45 ms: refused; 50 ms left: admitted.
    assert_eq!(try_admit(&mut service, 41).await.err(), Some(Some(Rejected::AdmissionInfeasible)));
    assert_eq!(inner.calls(), 0, "refused before the service");
    let mut expected = 45.0 * MS as f64;
    for _ in 0..20 {
        try_admit(&mut service, 51).await.expect("admitted").await.expect("answered");
        expected = (expected as u64 as f64) * 0.9 + 10.0 * MS as f64 * 0.1;
    }
    assert_eq!(layer.state().read(|s| s.expected[0]), expected as u64, "nine parts old, one part the 10 ms answer");
    // Now about 15 ms: 20 ms left is enough.
    try_admit(&mut service, 21).await.expect("admitted").await.expect("answered");
}

#[tokio::test(start_paused = true)]
async fn admission_holds_a_tenant_to_its_fair_share_under_pressure() {
    let inner = Scripted::new(|_| (Duration::from_secs(1), Outcome::Success));
    let layer =
        admission(admission_config(5, 2, Duration::ZERO), applicant_with(numbered)).classify(scripted_outcomes());
    let mut service = layer.layer(inner.clone());
    // Tenant 0 takes three places (pressure 0.6: no fair share yet), tenant 1 one.
    let mut held = Vec::new();
    for n in [1, 1, 1, 101] {
        held.push(try_admit(&mut service, n).await.expect("admitted"));
    }
    // Pressure 0.8: tenant 0 holds ceil(5 / 2) = 3, its share; tenant 1 may go on.
    assert_eq!(try_admit(&mut service, 1).await.err(), Some(Some(Rejected::AdmissionFairShare)));
    held.push(try_admit(&mut service, 101).await.expect("tenant 1 is under its share"));
    held.truncate(2);
    assert_eq!(layer.state().read(|s| s.in_flight), 2, "three callers gave up; their places came back");
    held.push(try_admit(&mut service, 1).await.expect("pressure 0.4: tenant 0 again"));
}

#[tokio::test(start_paused = true)]
async fn admission_reads_an_attached_quota_meters_pressure() {
    let limits =
        QuotaLimits { requests_per_minute: 10, input_tokens_per_minute: 1_000, output_tokens_per_minute: 1_000 };
    let config = QuotaConfig { headroom: 1.0, longest_wait: 0, instances: 1, coordinated: true };
    let quota = quota_meter(limits, config, TokensWith(|_: &u32| (0, 0), |_: &u32| 0));
    let layer = admission(admission_config(100, 1, Duration::ZERO), applicant_with(numbered))
        .with_quota(quota.meter())
        .classify(scripted_outcomes());
    let mut service = layer.layer(Scripted::new(|_| (Duration::from_millis(1), Outcome::Success)));
    // Nine of ten requests a minute used: pressure 0.9 (L2) sheds SHEDDABLE_PLUS.
    for _ in 0..9 {
        assert!(matches!(quota.meter().lock().reserve(0, 0, 0), Reserve::Granted(_)));
    }
    let read = layer.state().read(|s| s.pressure(0));
    assert_eq!(read, quota.meter().lock().pressure(0));
    assert!((read - 0.9).abs() < 1e-9, "{read}");
    assert_eq!(try_admit(&mut service, 2).await.err(), Some(Some(Rejected::AdmissionShed { rung: 2 })));
    try_admit(&mut service, 1).await.expect("CRITICAL goes").await.expect("answered");
}

/// Answers like [`Scripted`], but is ready only while its switch is on.
#[derive(Clone)]
struct Switched {
    inner: Scripted,
    on: Arc<Mutex<(bool, Option<std::task::Waker>)>>,
}

impl Switched {
    fn set(&self, on: bool) {
        let mut state = self.on.lock().unwrap();
        state.0 = on;
        if let Some(waker) = state.1.take().filter(|_| on) {
            waker.wake();
        }
    }
}

impl Service<u32> for Switched {
    type Response = u32;
    type Error = Failed;
    type Future = Pin<Box<dyn Future<Output = Result<u32, Failed>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Failed>> {
        let mut state = self.on.lock().unwrap();
        if state.0 {
            Poll::Ready(Ok(()))
        } else {
            state.1 = Some(cx.waker().clone());
            Poll::Pending
        }
    }

    fn call(&mut self, request: u32) -> Self::Future {
        <Scripted as Service<u32>>::call(&mut self.inner, request)
    }
}

#[tokio::test(start_paused = true)]
async fn a_hedge_granted_while_the_service_is_not_ready_is_sent_when_it_is_or_handed_back() {
    let retries = retry(retry_config(1, None), RetryBudget::Envoy(EnvoyBudget::new(0.0, 2)), 1);
    let lent = || match &retries.state().lock().budget {
        RetryBudget::Envoy(budget) => budget.active_retries(),
        _ => unreachable!(),
    };
    let hedges = hedge(Some(fixed_hedge(Duration::from_millis(20), 1))).with_retry(&retries, true);
    let switched = Switched {
        // Each call's first attempt takes 100 ms, a hedge 10 ms.
        inner: Scripted::new(|n| (Duration::from_millis(if n.is_multiple_of(2) { 100 } else { 10 }), Outcome::Success)),
        on: Arc::new(Mutex::new((true, None))),
    };
    let mut service = hedges.clone().classify(scripted_outcomes()).layer(switched.clone());
    // The first attempt goes; the service then stops being ready: the hedge granted at
    // 20 ms waits, and goes at 25 ms when the service is ready again; it wins at 35 ms.
    let call = service.call(0);
    switched.set(false);
    let pending = tokio::spawn(call);
    tokio::time::sleep(Duration::from_millis(25)).await;
    assert_eq!(lent(), 1, "the hedge was granted and waits");
    switched.set(true);
    let start = tokio::time::Instant::now();
    assert_eq!(pending.await.unwrap().expect("the hedge wins"), 1);
    assert_eq!(start.elapsed(), Duration::from_millis(10), "sent at 25 ms, answered 10 ms later");
    assert_eq!(lent(), 0);
    // Never ready again: the first attempt answers, and the waiting hedge's loan is given back.
    let call = service.call(0);
    switched.set(false);
    let pending = tokio::spawn(call);
    tokio::time::sleep(Duration::from_millis(25)).await;
    assert_eq!(lent(), 1);
    assert_eq!(pending.await.unwrap().expect("the first attempt answers"), 2);
    assert_eq!(lent(), 0, "a hedge never sent gives back its loan");
    assert_eq!(switched.inner.calls(), 3);
}
