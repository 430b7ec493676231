//! The fallback layer: a call the primary fails (by the classifier: a 529, a 500, a
//! timeout, a refusal further in) is sent once, as it was, to the fallback; a success
//! is not; both failing is the caller's error. Outside a retry loop, the fallback is
//! reached once the attempts are spent, as in the simulated stack.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use stampede_policy::backoff::BackoffKind;
use stampede_policy::classify::RetryClassifier;
use stampede_policy::retry_budget::RetryBudget;
use stampede_tower::{backoff, fallback, retry, BoxError, HttpStatus, RetryConfig};
use tower_layer::Layer;
use tower_service::Service;

/// Answers `status` to every call (after 10 ms), counting its calls.
#[derive(Clone)]
struct Answers {
    status: u16,
    calls: Arc<AtomicU32>,
}

impl Answers {
    fn new(status: u16) -> Self {
        Answers { status, calls: Arc::default() }
    }
}

impl Service<&'static str> for Answers {
    type Response = http::Response<&'static str>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: &'static str) -> Self::Future {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let status = self.status;
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(10)).await;
            Ok(http::Response::builder().status(status).body(request).unwrap())
        })
    }
}

async fn status_of<S>(service: &mut S) -> u16
where
    S: Service<&'static str, Response = http::Response<&'static str>>,
    S::Error: std::fmt::Debug,
{
    std::future::poll_fn(|cx| service.poll_ready(cx)).await.unwrap();
    service.call("hello").await.unwrap().status().as_u16()
}

#[tokio::test(start_paused = true)]
async fn a_failed_call_is_served_by_the_fallback_once_and_counted_as_degraded() {
    let (primary, smaller) = (Answers::new(529), Answers::new(200));
    let layer = fallback(smaller.clone(), HttpStatus);
    let counts = layer.counts();
    let mut service = layer.layer(primary.clone());
    assert_eq!(status_of(&mut service).await, 200, "the fallback's answer");
    assert_eq!((primary.calls.load(Ordering::SeqCst), smaller.calls.load(Ordering::SeqCst)), (1, 1));
    assert_eq!(counts.degraded.load(Ordering::SeqCst), 1);
    // A success stays the primary's.
    let healthy = Answers::new(200);
    let mut service = fallback(smaller.clone(), HttpStatus).layer(healthy.clone());
    assert_eq!(status_of(&mut service).await, 200);
    assert_eq!(smaller.calls.load(Ordering::SeqCst), 1, "not called for a success");
    // Both failing: the fallback's answer reaches the caller, counted as failed.
    let layer = fallback(Answers::new(500), HttpStatus);
    let counts = layer.counts();
    let mut service = layer.layer(Answers::new(503));
    assert_eq!(status_of(&mut service).await, 500);
    assert_eq!(counts.failed.load(Ordering::SeqCst), 1);
}

/// As the simulated stack orders them (`[..., "retry", "fallback"]`): the class's
/// attempts are spent first, then one fallback call.
#[tokio::test(start_paused = true)]
async fn outside_the_retry_loop_the_fallback_comes_after_the_attempts() {
    let (primary, smaller) = (Answers::new(529), Answers::new(200));
    let retries = retry(
        RetryConfig {
            max_attempts: 3,
            backoff: backoff(BackoffKind::Constant, Duration::from_millis(100), Duration::from_millis(100)),
            classifier: RetryClassifier::default(),
            deadline: None,
        },
        RetryBudget::Unlimited,
        7,
    )
    .classify(HttpStatus);
    let mut service = fallback(smaller.clone(), HttpStatus).layer(retries.layer(primary.clone()));
    let started = tokio::time::Instant::now();
    assert_eq!(status_of(&mut service).await, 200);
    assert_eq!((primary.calls.load(Ordering::SeqCst), smaller.calls.load(Ordering::SeqCst)), (3, 1));
    // Three attempts of 10 ms, two waits of at least 100 ms (a 529's own retry-after
    // would be longer: none is sent here), then the fallback's 10 ms.
    assert!(started.elapsed() >= Duration::from_millis(3 * 10 + 2 * 100 + 10), "{:?}", started.elapsed());
}
