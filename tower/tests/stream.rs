//! Streamed answers under the simulated gateway's four timeouts: connect (headers),
//! first token, inter-token and total, on tokio's paused clock so every time is exact;
//! and the stack issue 53 asked for — a streamed call whose first token is too slow is
//! retried and then served by the fallback, as the simulated stack does it.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use http_body::{Body, Frame};
use stampede_engine::policy::backoff::BackoffKind;
use stampede_engine::policy::classify::RetryClassifier;
use stampede_engine::policy::retry_budget::RetryBudget;
use stampede_tower::{
    backoff, fallback, retry, stream_timeouts, BoxError, HttpStatus, RetryConfig, StreamTimeout, StreamTimeouts,
};
use tokio::time::{Instant, Sleep};
use tower_layer::Layer;
use tower_service::Service;

/// A body whose frames come after the given gaps (the first gap from the headers).
struct Scripted {
    gaps: VecDeque<Duration>,
    sleep: Option<Pin<Box<Sleep>>>,
    /// What frame `n` says (past the end: a token).
    says: Vec<&'static [u8]>,
    sent: usize,
}

impl Body for Scripted {
    type Data = &'static [u8];
    type Error = BoxError;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Self::Data>, BoxError>>> {
        let Some(gap) = self.gaps.front().copied() else { return Poll::Ready(None) };
        let sleep = self.sleep.get_or_insert_with(|| Box::pin(tokio::time::sleep(gap)));
        if sleep.as_mut().poll(cx).is_pending() {
            return Poll::Pending;
        }
        self.sleep = None;
        self.gaps.pop_front();
        let said = self.says.get(self.sent).copied().unwrap_or(&b"event: content_block_delta\ndata: {}\n\n"[..]);
        self.sent += 1;
        Poll::Ready(Some(Ok(Frame::data(said))))
    }
}

/// Answers 200 after `headers`, then frames after `gaps`; counts its calls.
#[derive(Clone)]
struct Streams {
    headers: Duration,
    gaps: Vec<Duration>,
    says: Vec<&'static [u8]>,
    calls: Arc<AtomicU32>,
}

fn streams(headers_ms: u64, gaps_ms: &[u64]) -> Streams {
    Streams {
        headers: Duration::from_millis(headers_ms),
        gaps: gaps_ms.iter().map(|g| Duration::from_millis(*g)).collect(),
        says: Vec::new(),
        calls: Arc::default(),
    }
}

impl Service<&'static str> for Streams {
    type Response = http::Response<Scripted>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: &'static str) -> Self::Future {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let (headers, gaps, says) = (self.headers, self.gaps.clone(), self.says.clone());
        Box::pin(async move {
            tokio::time::sleep(headers).await;
            Ok(http::Response::new(Scripted { gaps: gaps.into(), sleep: None, says, sent: 0 }))
        })
    }
}

/// The retry loop of the stacks here: two attempts, 0.25 s apart, reading HTTP.
fn two_attempts() -> stampede_tower::RetryLayer<HttpStatus> {
    retry(
        RetryConfig {
            max_attempts: 2,
            backoff: backoff(BackoffKind::Constant, Duration::from_millis(250), Duration::from_millis(250)),
            classifier: RetryClassifier::default(),
            deadline: None,
        },
        RetryBudget::Unlimited,
        3,
    )
    .classify(HttpStatus)
}

const BOUNDS: StreamTimeouts = StreamTimeouts {
    connect: Some(Duration::from_secs(1)),
    first_token: Some(Duration::from_secs(2)),
    inter_token: Some(Duration::from_millis(500)),
    total: Some(Duration::from_secs(4)),
};

/// Calls `service` and reads its whole body: the frames read, and the error that
/// ended it (`None`: it ended well), with when it ended since the call.
async fn read<S, B>(service: &mut S) -> (u64, Option<String>, Duration)
where
    S: Service<&'static str, Response = http::Response<B>, Error = BoxError>,
    B: Body<Error = BoxError>,
{
    let started = Instant::now();
    std::future::poll_fn(|cx| service.poll_ready(cx)).await.unwrap();
    let mut body = match service.call("hi").await {
        Ok(response) => Box::pin(response.into_body()),
        Err(error) => return (0, Some(error.to_string()), started.elapsed()),
    };
    let mut frames = 0;
    while let Some(frame) = std::future::poll_fn(|cx| body.as_mut().poll_frame(cx)).await {
        match frame {
            Ok(_) => frames += 1,
            Err(error) => return (frames, Some(error.to_string()), started.elapsed()),
        }
    }
    (frames, None, started.elapsed())
}

#[tokio::test(start_paused = true)]
async fn each_bound_ends_the_stream_with_its_own_reason_at_its_own_time() {
    let ms = Duration::from_millis;
    let mut within = stream_timeouts(BOUNDS).layer(streams(200, &[300, 400, 400, 100]));
    assert_eq!(read(&mut within).await, (4, None, ms(1400)), "every bound kept");
    let mut late_headers = stream_timeouts(BOUNDS).layer(streams(1500, &[10]));
    assert_eq!(read(&mut late_headers).await, (0, Some(StreamTimeout::Connect.to_string()), ms(1000)));
    // Headers at 0.5 s, the first token at 2.6 s: the response fails at 2 s, as an attempt.
    let mut slow_first = stream_timeouts(BOUNDS).layer(streams(500, &[2100]));
    assert_eq!(read(&mut slow_first).await, (0, Some("timeout_first_token".into()), ms(2000)));
    // Two tokens, then a gap of 0.8 s: broken 0.5 s after the second.
    let mut gap = stream_timeouts(BOUNDS).layer(streams(100, &[100, 200, 800]));
    assert_eq!(read(&mut gap).await, (2, Some("timeout_inter_token".into()), ms(900)));
    // Tokens every 0.4 s go on past the 4 s total: the 9th (at 3.7 s) is the last.
    let mut long = stream_timeouts(BOUNDS).layer(streams(100, &[400; 20]));
    assert_eq!(read(&mut long).await, (9, Some("timeout_total".into()), ms(4000)));
    // No bounds: nothing is armed.
    let mut free = stream_timeouts(StreamTimeouts::default()).layer(streams(5000, &[9000]));
    assert_eq!(read(&mut free).await, (1, None, ms(14000)));
}

/// Issue 53's production twin of the simulated stack `[..., "retry", "fallback"]`
/// for a streamed class: the first token is too slow on both attempts (each given up
/// at the 2 s first-token bound, a timeout to the retry loop), then the fallback tier
/// streams the answer.
#[tokio::test(start_paused = true)]
async fn a_first_token_timeout_is_retried_then_served_by_the_fallback() {
    let (primary, smaller) = (streams(300, &[5000]), streams(100, &[200, 200]));
    let retries = two_attempts();
    let timed = stream_timeouts(BOUNDS);
    let mut stack =
        fallback(timed.layer(smaller.clone()), HttpStatus).layer(retries.layer(timed.layer(primary.clone())));
    let (frames, error, took) = read(&mut stack).await;
    assert_eq!((frames, error), (2, None), "the fallback's two tokens");
    assert_eq!((primary.calls.load(Ordering::SeqCst), smaller.calls.load(Ordering::SeqCst)), (2, 1));
    // Two attempts of 2 s, a 0.25 s wait, the fallback's first token at 0.3 s and its second at 0.5 s.
    assert_eq!(took, Duration::from_millis(2000 + 250 + 2000 + 500));
}

const OVERLOADED: &[u8] =
    b"event: error\ndata: {\"type\": \"error\", \"error\": {\"type\": \"overloaded_error\", \"message\": \"Overloaded\"}}\n\n";

/// A 200 whose stream carries an overload is not a success: in the first frame it
/// fails the attempt (retried, then served by the fallback, as a 529 would be); later
/// it ends the body with the event's outcome. Without the reader, both read as answers.
#[tokio::test(start_paused = true)]
async fn an_overload_inside_a_200_stream_is_an_overload() {
    use stampede_engine::policy::classify::Outcome;
    use stampede_tower::{provider_stream_error, StreamError};
    assert_eq!(provider_stream_error(OVERLOADED), Some(Outcome::Overloaded));
    assert_eq!(
        provider_stream_error(b"data: {\"error\": {\"type\": \"server_error\"}}\n\n"),
        Some(Outcome::ServerError)
    );
    assert_eq!(provider_stream_error(b"event: content_block_delta\ndata: {\"type\": \"text\"}\n\n"), None);
    let at_once = Streams { says: vec![OVERLOADED], ..streams(100, &[100, 100]) };
    let reading = stream_timeouts(BOUNDS).errors_in_stream(provider_stream_error);
    let (frames, error, _) = read(&mut reading.layer(at_once.clone())).await;
    assert_eq!((frames, error), (0, Some(StreamError(Outcome::Overloaded).to_string())));
    let (frames, error, _) = read(&mut stream_timeouts(BOUNDS).layer(at_once.clone())).await;
    assert_eq!((frames, error), (2, None), "not read: a 200 and two frames, a success");
    // Later in the stream: the body ends with it, after what was delivered.
    let later = Streams { says: vec![b"data: {}\n\n", OVERLOADED], ..streams(100, &[100, 100, 100]) };
    let (frames, error, _) = read(&mut reading.layer(later)).await;
    assert_eq!((frames, error), (1, Some(StreamError(Outcome::Overloaded).to_string())));
    // In the stack: both attempts overloaded at their first frame, then the fallback.
    let smaller = streams(100, &[200]);
    let retries = two_attempts();
    let primary = Streams { says: vec![OVERLOADED], ..streams(100, &[100, 100]) };
    let mut stack =
        fallback(reading.layer(smaller.clone()), HttpStatus).layer(retries.layer(reading.layer(primary.clone())));
    let (frames, error, _) = read(&mut stack).await;
    assert_eq!((frames, error), (1, None));
    assert_eq!((primary.calls.load(Ordering::SeqCst), smaller.calls.load(Ordering::SeqCst)), (2, 1));
}

thread_local! {
    /// The events the hook saw on this thread (each test runs on its own thread,
    /// its tokio runtime on the same one).
    static SEEN: std::cell::RefCell<Vec<stampede_tower::events::Event>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// What the `tracing` feature told a subscriber: spans opened, fields recorded, events.
#[derive(Clone, Default)]
struct Recorder {
    lines: Arc<std::sync::Mutex<Vec<String>>>,
    spans: Arc<std::sync::atomic::AtomicU64>,
}

struct Fields<'a>(&'a mut Vec<String>);

impl tracing::field::Visit for Fields<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0.push(format!("{}={value:?}", field.name()));
    }
}

impl tracing::Subscriber for Recorder {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, span: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        self.lines.lock().unwrap().push(format!("span {}", span.metadata().name()));
        tracing::span::Id::from_u64(self.spans.fetch_add(1, Ordering::SeqCst) + 1)
    }
    fn record(&self, _: &tracing::span::Id, values: &tracing::span::Record<'_>) {
        let mut fields = Vec::new();
        values.record(&mut Fields(&mut fields));
        self.lines.lock().unwrap().push(format!("record {}", fields.join(" ")));
    }
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let mut fields = Vec::new();
        event.record(&mut Fields(&mut fields));
        let target = event.metadata().target();
        self.lines.lock().unwrap().push(format!("{target}: {}", fields.join(" ")));
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

/// The hook and a `tracing` subscriber see the stack's decisions, in order, with
/// the simulation's names: each first-token timeout, the retry between them, the
/// fallback's answer and the end of its stream; the retry layer's call is a span
/// that records its attempts.
#[tokio::test(start_paused = true)]
async fn the_event_hook_and_tracing_see_each_decision_of_a_streamed_call() {
    use stampede_tower::events::{set_event_hook, Event};
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| set_event_hook(|event| SEEN.with(|seen| seen.borrow_mut().push(*event))).unwrap());
    let again = set_event_hook(|_| {}).expect_err("set once per process");
    assert!(again.to_string().contains("set once"), "{again}");
    let recorder = Recorder::default();
    let _default = tracing::subscriber::set_default(recorder.clone());

    let (primary, smaller) = (streams(300, &[5000]), streams(100, &[200, 200]));
    let timed = stream_timeouts(BOUNDS);
    let mut stack = fallback(timed.layer(smaller), HttpStatus).layer(two_attempts().layer(timed.layer(primary)));
    assert_eq!(read(&mut stack).await.0, 2);

    let first_token = Event::StreamTimedOut { which: StreamTimeout::FirstToken, frames: 0 };
    let seen = SEEN.with(|seen| seen.borrow().clone());
    assert_eq!(
        seen,
        [
            first_token,
            Event::Retry { attempt: 2, backoff: Duration::from_millis(250) },
            first_token,
            Event::Fallback { answered: true },
            Event::StreamEnded { frames: 2 },
        ]
    );
    let names: Vec<&str> = seen.iter().map(Event::name).collect();
    assert_eq!(names, ["stream_timed_out", "retry", "stream_timed_out", "fallback", "stream_ended"]);
    let lines = recorder.lines.lock().unwrap().clone();
    let expected = [
        "span stampede_tower.call",
        "stampede_tower: event=\"stream_timed_out\" reason=timeout_first_token frames=0",
        "stampede_tower: event=\"retry\" attempt=2 backoff_ms=250.0",
        "stampede_tower: event=\"stream_timed_out\" reason=timeout_first_token frames=0",
        "record attempts=2",
        "stampede_tower: event=\"fallback\" answered=true",
        "stampede_tower: event=\"stream_ended\" frames=2",
    ];
    assert_eq!(lines, expected);
}
