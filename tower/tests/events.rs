//! What the layers tell the event hook and a `tracing` subscriber, for a streamed
//! call. Its own test binary: `tracing` caches each call site's interest process-wide,
//! so a test on another thread without the subscriber would hide events from this one.

mod streams;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use stampede_tower::{fallback, stream_timeouts, HttpStatus, StreamTimeout};
use streams::{read, streams, two_attempts, BOUNDS};
use tower_layer::Layer;

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
