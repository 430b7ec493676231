//! The client-side quota layer on a paused clock, against the engine's meter driven
//! directly: reservations of `max_tokens`, reconciling to the real output, waiting up
//! to the longest wait, and cancelling what a 429 or a dropped request never used.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use stampede_kernel::NANOS_PER_SEC;
use stampede_policy::quota::{QuotaConfig, QuotaLimits, QuotaMeter, Reserve};
use stampede_tower::{quota_meter, BoxError, HttpStatus, Rejected, TokensWith};
use tower_layer::Layer;
use tower_service::Service;

/// A request: (input tokens, max_tokens).
type Ask = (u64, u64);

/// Answers with `output` tokens used (in a header), or with `status`, after `after`.
#[derive(Clone)]
struct Api {
    status: u16,
    output: u64,
    after: Duration,
    calls: Arc<AtomicU32>,
}

impl Service<Ask> for Api {
    type Response = http::Response<u64>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<http::Response<u64>, BoxError>> + Send>>;
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }
    fn call(&mut self, _: Ask) -> Self::Future {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let (status, output, after) = (self.status, self.output, self.after);
        Box::pin(async move {
            tokio::time::sleep(after).await;
            Ok(http::Response::builder().status(status).body(output)?)
        })
    }
}

fn api(status: u16, output: u64) -> Api {
    Api { status, output, after: Duration::ZERO, calls: Arc::new(AtomicU32::new(0)) }
}

const LIMITS: QuotaLimits =
    QuotaLimits { requests_per_minute: 60, input_tokens_per_minute: 1_000_000, output_tokens_per_minute: 100_000 };

fn config(longest_wait_s: u64) -> QuotaConfig {
    QuotaConfig { headroom: 1.0, longest_wait: longest_wait_s * NANOS_PER_SEC, instances: 1, coordinated: true }
}

/// Reads a request's tokens and an answer's output.
type Counts = TokensWith<fn(&Ask) -> (u64, u64), fn(&http::Response<u64>) -> u64>;

fn tokens() -> Counts {
    TokensWith(|ask: &Ask| *ask, |response: &http::Response<u64>| *response.body())
}

#[tokio::test(start_paused = true)]
async fn a_request_reserves_max_tokens_and_keeps_only_the_output_it_used() {
    let layer = quota_meter(LIMITS, config(2), tokens()).classify(HttpStatus);
    let mut service = layer.layer(api(200, 300));
    service.call((5_000, 2_000)).await.expect("room");
    let mut direct = QuotaMeter::new(LIMITS, config(2));
    let Reserve::Granted(r) = direct.reserve(0, 5_000, 2_000) else { panic!("room") };
    direct.reconcile(0, r, 300);
    assert_eq!(layer.meter().lock().output_available(0), 100_000 - 300, "2,000 reserved, 1,700 handed back");
    assert_eq!(layer.meter().lock().output_totals(), direct.output_totals());
}

#[tokio::test(start_paused = true)]
async fn a_request_waits_for_room_within_the_longest_wait_and_is_refused_beyond() {
    let inner = api(200, 0);
    let mut service = quota_meter(LIMITS, config(2), tokens()).classify(HttpStatus).layer(inner.clone());
    // A minute's burst: 60 requests at once.
    for _ in 0..60 {
        service.call((1, 1)).await.expect("the burst");
    }
    let start = tokio::time::Instant::now();
    service.call((1, 1)).await.expect("one request a second refills");
    assert_eq!(start.elapsed(), Duration::from_secs(1), "it waited for the next request token");
    let mut impatient = quota_meter(LIMITS, config(0), tokens()).classify(HttpStatus).layer(inner.clone());
    for _ in 0..60 {
        impatient.call((1, 1)).await.expect("its own burst");
    }
    let error = impatient.call((1, 1)).await.expect_err("no wait allowed");
    assert_eq!(error.downcast_ref::<Rejected>(), Some(&Rejected::Quota));
    assert_eq!(inner.calls.load(Ordering::SeqCst), 121, "the refused one never reached the API");
}

#[tokio::test(start_paused = true)]
async fn a_429_and_a_dropped_request_give_everything_back() {
    let layer = quota_meter(LIMITS, config(2), tokens()).classify(HttpStatus);
    let mut service = layer.layer(api(429, 0));
    let response = service.call((5_000, 2_000)).await.expect("an answer");
    assert_eq!(response.status(), 429);
    assert_eq!(layer.meter().lock().output_available(0), 100_000, "a 429 served nothing: cancelled");
    let mut slow = layer.layer(Api { after: Duration::from_secs(5), ..api(200, 10) });
    let call = tokio::spawn(slow.call((5_000, 2_000)));
    tokio::task::yield_now().await;
    assert_eq!(layer.meter().lock().output_available(0), 98_000, "held while in flight");
    call.abort();
    let _ = call.await;
    assert_eq!(layer.meter().lock().output_available(0), 100_000, "a dropped request is cancelled");
}

/// Two processes sharing one store are one coordinated meter (the simulation's
/// default): between them they get the quota's 60 requests a minute, where two
/// processes each with its own meter would get 120. The store here is the in-memory
/// one behind a trait object, as a Redis-backed one would be.
#[tokio::test(start_paused = true)]
async fn processes_sharing_a_store_share_one_quota() {
    use stampede_tower::{quota_store, QuotaStore};
    let tokens: Counts = TokensWith(|ask| *ask, |response| *response.body());
    let shared: Arc<dyn QuotaStore> = Arc::new(stampede_tower::Shared::new(QuotaMeter::new(LIMITS, config(0))));
    let served = |layers: [stampede_tower::QuotaLayer<Counts, HttpStatus>; 2]| async move {
        let mut granted = 0;
        for i in 0..100 {
            let mut service = layers[i % 2].layer(api(200, 10));
            std::future::poll_fn(|cx| service.poll_ready(cx)).await.unwrap();
            granted += service.call((100, 100)).await.is_ok() as u32;
        }
        granted
    };
    let one = || quota_store(shared.clone(), Duration::ZERO, tokens).classify(HttpStatus);
    assert_eq!(served([one(), one()]).await, 60, "one quota between them");
    let own = || quota_meter(LIMITS, config(0), tokens).classify(HttpStatus);
    assert_eq!(served([own(), own()]).await, 100, "each its own: up to 120");
}

/// A streamed answer's output is settled when its stream ends, as the simulation
/// reconciles at the last token: the reservation rides in the response as a
/// `QuotaGuard`; settled, it hands back what was not used; left unsettled, nothing.
#[tokio::test(start_paused = true)]
async fn a_streamed_answer_is_reconciled_when_its_stream_ends() {
    use stampede_tower::{QuotaGuard, StreamTokens};
    let layer = quota_meter(LIMITS, config(2), StreamTokens(|ask: &Ask| *ask)).classify(HttpStatus);
    let mut service = layer.layer(api(200, 300));
    let response = service.call((5_000, 2_000)).await.expect("room");
    // At the first token (the response): all of max_tokens still held.
    assert_eq!(layer.meter().lock().output_available(0), 100_000 - 2_000);
    let guard = response.extensions().get::<QuotaGuard>().expect("the reservation rides along").clone();
    guard.settle(300);
    assert_eq!(layer.meter().lock().output_available(0), 100_000 - 300, "1,700 handed back at the end");
    guard.settle(10);
    assert_eq!(layer.meter().lock().output_available(0), 100_000 - 300, "once");
    // A stream nobody saw end hands back nothing.
    let response = service.call((5_000, 2_000)).await.expect("room");
    drop(response);
    assert_eq!(layer.meter().lock().output_available(0), 100_000 - 300 - 2_000);
    // A 429 is cancelled as before: nothing rides along.
    let mut refused = layer.layer(api(429, 0));
    let response = refused.call((5_000, 2_000)).await.expect("an answer");
    assert!(response.extensions().get::<QuotaGuard>().is_none());
    assert_eq!(layer.meter().lock().output_available(0), 100_000 - 300 - 2_000);
}

/// Layers over one store built minutes apart read one clock (issue 72 item 5): each
/// layer kept its own epoch, so the store's time jumped back by the minutes between
/// them, and a layer built 60 s after the first was granted none of 30 s of refill.
/// Here the first spends the minute's 60 requests at 60 s; 30 s later the second is
/// granted the 30 that refilled.
#[tokio::test(start_paused = true)]
async fn layers_built_minutes_apart_share_the_stores_clock() {
    use stampede_tower::{quota_store, QuotaStore};
    let tokens: Counts = TokensWith(|ask| *ask, |response| *response.body());
    let shared: Arc<dyn QuotaStore> = Arc::new(stampede_tower::Shared::new(QuotaMeter::new(LIMITS, config(0))));
    let first = quota_store(shared.clone(), Duration::ZERO, tokens).classify(HttpStatus);
    tokio::time::advance(Duration::from_secs(60)).await;
    let second = quota_store(shared.clone(), Duration::ZERO, tokens).classify(HttpStatus);
    let granted = |layer: stampede_tower::QuotaLayer<Counts, HttpStatus>| async move {
        let mut service = layer.layer(api(200, 10));
        let mut granted = 0;
        for _ in 0..100 {
            std::future::poll_fn(|cx| service.poll_ready(cx)).await.unwrap();
            granted += service.call((100, 100)).await.is_ok() as u32;
        }
        granted
    };
    assert_eq!(granted(first).await, 60, "the minute's requests");
    tokio::time::advance(Duration::from_secs(30)).await;
    assert_eq!(granted(second).await, 30, "half a minute of refill, on the store's one clock");
}
