//! An LLM gateway's class stack in an axum service: the production twin of a
//! simulated class with `gates = ["breaker", "adaptive", "quota", "retry", "fallback"]`
//! — here in the order tower composes them, outermost first: the fallback to the fast
//! tier, the retry loop, the breaker, the adaptive limit, the quota meter, and the
//! streamed answer's four timeouts with the providers' in-stream errors read.
//!
//! The providers are stand-ins (a tower service streaming SSE frames) so the example
//! runs anywhere: `cargo run -p stampede-tower --example llm_gateway`, then
//! `curl -N localhost:3000/reply`; `curl localhost:3000/metrics` counts the layers'
//! decisions (the event hook) in Prometheus' text format. Replace `Provider` with your HTTP client's service
//! (hyper's, reqwest's through a tower adapter) and the token counts with your
//! request's and response's. Built by `cargo test`, so it cannot rot.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::response::Response;
use axum::routing::get;
use axum::Router;
use http_body::Frame;
use stampede_policy::backoff::BackoffKind;
use stampede_policy::breaker::BreakerConfig;
use stampede_policy::classify::RetryClassifier;
use stampede_policy::limiter::{GradientConfig, LimiterKind};
use stampede_policy::quota::{QuotaConfig, QuotaLimits};
use stampede_policy::retry_budget::{RatioBudget, RetryBudget};
use stampede_tower::events::{set_event_hook, Event};
use stampede_tower::{
    backoff, circuit_breaker, concurrency_limit, fallback, provider_stream_error, quota_meter, retry, stream_timeouts,
    BoxError, HttpStatus, QuotaGuard, RetryConfig, StreamTimeouts, StreamTokens,
};
use tower_layer::Layer;
use tower_service::Service;

/// A prompt: its input tokens and its `max_tokens`.
#[derive(Clone, Copy, Debug)]
struct Prompt {
    input_tokens: u64,
    max_tokens: u64,
}

/// A stand-in provider: streams `tokens` SSE frames, one every `gap`.
#[derive(Clone)]
struct Provider {
    name: &'static str,
    tokens: u32,
    gap: Duration,
}

type Sse = http_body_util_free::Stream;
type Streamed = http::Response<Sse>;

impl Service<Prompt> for Provider {
    type Response = Streamed;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Streamed, BoxError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: Prompt) -> Self::Future {
        let (name, tokens, gap) = (self.name, self.tokens, self.gap);
        Box::pin(async move { Ok(http::Response::new(http_body_util_free::Stream::new(name, tokens, gap))) })
    }
}

/// A body of SSE frames without a helper crate: what an HTTP client's body would be.
mod http_body_util_free {
    use super::*;

    pub struct Stream {
        name: &'static str,
        left: u32,
        gap: Duration,
        sleep: Option<Pin<Box<tokio::time::Sleep>>>,
    }

    impl Stream {
        pub fn new(name: &'static str, tokens: u32, gap: Duration) -> Self {
            Stream { name, left: tokens, gap, sleep: None }
        }
    }

    impl http_body::Body for Stream {
        type Data = bytes::Bytes;
        type Error = BoxError;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<bytes::Bytes>, BoxError>>> {
            if self.left == 0 {
                return Poll::Ready(None);
            }
            let gap = self.gap;
            let sleep = self.sleep.get_or_insert_with(|| Box::pin(tokio::time::sleep(gap)));
            std::task::ready!(sleep.as_mut().poll(cx));
            self.sleep = None;
            self.left -= 1;
            let frame = format!("event: content_block_delta\ndata: {{\"from\": \"{}\"}}\n\n", self.name);
            Poll::Ready(Some(Ok(Frame::data(bytes::Bytes::from(frame)))))
        }
    }
}

/// A streamed answer that settles its quota reservation with the tokens it carried
/// when it ends — or when the client hangs up (what was streamed was generated). Each
/// stand-in frame is one token; a real client counts from the provider's `usage`
/// event or its deltas.
struct Settling<B> {
    inner: Pin<Box<B>>,
    guard: Option<QuotaGuard>,
    tokens: u64,
}

impl<B: http_body::Body> http_body::Body for Settling<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        let frame = std::task::ready!(self.inner.as_mut().poll_frame(cx));
        match &frame {
            Some(Ok(frame)) if frame.is_data() => self.tokens += 1,
            Some(Ok(_)) => {}
            // Ended, or broken: what the stream carried is what was used.
            None | Some(Err(_)) => self.settle(),
        }
        Poll::Ready(frame)
    }
}

impl<B> Settling<B> {
    fn settle(&mut self) {
        if let Some(guard) = self.guard.take() {
            guard.settle(self.tokens);
        }
    }
}

impl<B> Drop for Settling<B> {
    fn drop(&mut self) {
        self.settle();
    }
}

/// Counts per event kind, in `Event::name`'s order.
static EVENTS: [AtomicU64; 9] = [const { AtomicU64::new(0) }; 9];
const EVENT_NAMES: [&str; 9] = [
    "refused",
    "retry",
    "retry_denied",
    "hedge",
    "fallback",
    "breaker",
    "stream_ended",
    "stream_timed_out",
    "stream_error",
];

fn event_index(event: &Event) -> usize {
    EVENT_NAMES.iter().position(|name| *name == event.name()).expect("every event is named")
}

/// The counts in Prometheus' text format.
async fn metrics() -> String {
    let line = |(name, count): (&&str, &AtomicU64)| {
        format!("stampede_tower_events_total{{event=\"{name}\"}} {}\n", count.load(Ordering::Relaxed))
    };
    EVENT_NAMES.iter().zip(&EVENTS).map(line).collect()
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    // The class's timeouts_s, as the fixture gives them.
    let bounds = StreamTimeouts {
        connect: Some(Duration::from_secs(2)),
        first_token: Some(Duration::from_secs(8)),
        inter_token: Some(Duration::from_millis(2500)),
        total: Some(Duration::from_secs(45)),
    };
    let timed = stream_timeouts(bounds).errors_in_stream(provider_stream_error);
    let smart = Provider { name: "smart", tokens: 20, gap: Duration::from_millis(50) };
    let fast = Provider { name: "fast", tokens: 20, gap: Duration::from_millis(10) };
    // The output is settled when the stream ends, with the tokens it carried: the
    // reservation of max_tokens rides in the response as a QuotaGuard (see `Settling`).
    let tokens = StreamTokens(|p: &Prompt| (p.input_tokens, p.max_tokens));
    let limits =
        QuotaLimits { requests_per_minute: 900, input_tokens_per_minute: 2_000_000, output_tokens_per_minute: 400_000 };
    let quota = quota_meter(limits, QuotaConfig::default().waiting_at_most(Duration::from_secs(2)), tokens)
        .classify(HttpStatus);
    let limiter = concurrency_limit(LimiterKind::Gradient(GradientConfig::default()), None, 7).classify(HttpStatus);
    let breaker = circuit_breaker(BreakerConfig::default()).classify(HttpStatus);
    let retries = retry(
        RetryConfig {
            max_attempts: 2,
            backoff: backoff(BackoffKind::FullJitter, Duration::from_secs(1), Duration::from_secs(20)),
            classifier: RetryClassifier::default(),
            deadline: Some(Duration::from_secs(40)),
        },
        RetryBudget::Ratio(RatioBudget::new(0.1, 100.0, 10.0)),
        7,
    )
    .classify(HttpStatus);
    let primary = retries.layer(breaker.layer(limiter.layer(quota.layer(timed.layer(smart)))));
    let degraded = fallback(timed.layer(fast), HttpStatus);
    let answered = Arc::new(degraded.counts());
    let stack = degraded.layer(primary);

    // Every layer's decisions, counted by the simulation's names, for a metrics endpoint.
    set_event_hook(|event: &Event| {
        EVENTS[event_index(event)].fetch_add(1, Ordering::Relaxed);
    })?;

    let app = Router::new().route("/metrics", get(metrics)).route(
        "/reply",
        get(move || {
            let mut stack = stack.clone();
            let answered = answered.clone();
            async move {
                let prompt = Prompt { input_tokens: 4000, max_tokens: 1200 };
                let result = async {
                    std::future::poll_fn(|cx| stack.poll_ready(cx)).await?;
                    stack.call(prompt).await
                }
                .await;
                let degraded = answered.degraded.load(Ordering::Relaxed);
                Ok::<_, Infallible>(match result {
                    Ok(response) => {
                        // The smart tier's answer carries its quota reservation; the fast
                        // tier's (the fallback) went through no quota layer.
                        let guard = response.extensions().get::<QuotaGuard>().cloned();
                        let body = Settling { inner: Box::pin(response.into_body()), guard, tokens: 0 };
                        let mut reply = Response::new(Body::new(body));
                        reply.headers_mut().insert("x-degraded-so-far", degraded.into());
                        reply
                    }
                    Err(error) => Response::builder().status(503).body(Body::from(error.to_string())).unwrap(),
                })
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
    println!("serving the reply class on http://127.0.0.1:3000/reply");
    axum::serve(listener, app).await?;
    Ok(())
}
