//! What the layers decide, told to whoever watches: a process-wide hook for metrics
//! ([`set_event_hook`]), and with the `tracing` feature each decision as a `tracing`
//! event (target `stampede_tower`) and each call through a retry layer as a span.
//!
//! The layers already keep counts a caller can read ([`crate::RetryCounts`],
//! [`crate::FallbackCounts`], the admission's state); the hook is for a service that
//! exports to its own metrics system (Prometheus, OpenTelemetry, the `metrics`
//! facade) without polling each layer. The names are the simulation's: a refusal's
//! reason is the `Rejected` the layer returns, a stream's end is the reason the
//! simulated gateway reports (`timeout_first_token`, …), so a dashboard of live
//! decisions lines up with a run's columns.
//!
//! The hook is process-wide and set once, like `log`'s logger or `metrics`'
//! recorder: layers are built in many places, and a hook per layer would change
//! every layer's type. An [`Event`] is `Copy` and small; emitting one allocates
//! nothing and, with no hook set and no `tracing` subscriber, costs one atomic load.

use std::sync::OnceLock;
use std::time::Duration;

use stampede_policy::classify::Outcome;

use crate::stream_end::StreamTimeout;
use crate::Rejected;

/// One decision of a layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// A layer refused a request without calling the service.
    Refused(Rejected),
    /// The retry layer will send attempt `attempt` (2 for the first retry) after `backoff`.
    Retry {
        /// The attempt about to be sent.
        attempt: u32,
        /// The wait before it.
        backoff: Duration,
    },
    /// The retry layer would have retried, but the budget (or the deadline) denied it.
    RetryDenied {
        /// `true`: the deadline; `false`: the budget.
        by_deadline: bool,
    },
    /// The hedge layer sent a hedge.
    Hedge,
    /// The primary failed and the fallback was called; `answered`: it succeeded (a
    /// degraded answer).
    Fallback {
        /// Whether the fallback's answer succeeded.
        answered: bool,
    },
    /// A circuit breaker changed state.
    Breaker(BreakerChange),
    /// A streamed body ended as the provider finished it, after `frames` frames.
    StreamEnded {
        /// Frames delivered.
        frames: u64,
    },
    /// A streamed call broke a bound after `frames` frames (0: before the first).
    StreamTimedOut {
        /// The bound it broke.
        which: StreamTimeout,
        /// Frames delivered before.
        frames: u64,
    },
    /// The provider sent an error inside a 200 stream after `frames` frames.
    StreamError {
        /// What the error event says.
        outcome: Outcome,
        /// Frames delivered before.
        frames: u64,
    },
}

/// A circuit breaker's new state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BreakerChange {
    /// It opened: calls are refused.
    Opened,
    /// Its open time passed: probes go through.
    HalfOpen,
    /// The probes succeeded: calls pass.
    Closed,
}

impl Event {
    /// The event's name, for a metric's label: `refused`, `retry`, `retry_denied`,
    /// `hedge`, `fallback`, `breaker`, `stream_ended`, `stream_timed_out`, `stream_error`.
    pub fn name(&self) -> &'static str {
        match self {
            Event::Refused(_) => "refused",
            Event::Retry { .. } => "retry",
            Event::RetryDenied { .. } => "retry_denied",
            Event::Hedge => "hedge",
            Event::Fallback { .. } => "fallback",
            Event::Breaker(_) => "breaker",
            Event::StreamEnded { .. } => "stream_ended",
            Event::StreamTimedOut { .. } => "stream_timed_out",
            Event::StreamError { .. } => "stream_error",
        }
    }
}

type Hook = Box<dyn Fn(&Event) + Send + Sync>;

static HOOK: OnceLock<Hook> = OnceLock::new();

/// The hook was set already (it is set once per process).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HookAlreadySet;

impl std::fmt::Display for HookAlreadySet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("stampede-tower's event hook is set once per process, and it was set already")
    }
}

impl std::error::Error for HookAlreadySet {}

/// Calls `hook` with every layer's decisions from now on, on the thread that made
/// the decision (keep it short: a counter's increment). Set once per process.
///
/// ```
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use stampede_tower::events::{set_event_hook, Event};
///
/// static REFUSED: AtomicU64 = AtomicU64::new(0);
/// set_event_hook(|event: &Event| {
///     if let Event::Refused(_) = event {
///         REFUSED.fetch_add(1, Ordering::Relaxed);
///     }
/// })
/// .unwrap();
/// ```
pub fn set_event_hook(hook: impl Fn(&Event) + Send + Sync + 'static) -> Result<(), HookAlreadySet> {
    HOOK.set(Box::new(hook)).map_err(|_| HookAlreadySet)
}

/// Tells the hook and, with the `tracing` feature, the subscriber.
#[inline]
pub(crate) fn emit(event: Event) {
    if let Some(hook) = HOOK.get() {
        hook(&event);
    }
    #[cfg(feature = "tracing")]
    trace(&event);
}

#[cfg(feature = "tracing")]
fn trace(event: &Event) {
    use tracing::{debug, warn};
    const T: &str = "stampede_tower";
    match *event {
        Event::Refused(why) => debug!(target: T, event = "refused", reason = %why),
        Event::Retry { attempt, backoff } => {
            debug!(target: T, event = "retry", attempt, backoff_ms = backoff.as_secs_f64() * 1e3)
        }
        Event::RetryDenied { by_deadline } => {
            debug!(target: T, event = "retry_denied", by = if by_deadline { "deadline" } else { "budget" })
        }
        Event::Hedge => debug!(target: T, event = "hedge"),
        Event::Fallback { answered } => debug!(target: T, event = "fallback", answered),
        Event::Breaker(change) => warn!(target: T, event = "breaker", state = ?change),
        Event::StreamEnded { frames } => debug!(target: T, event = "stream_ended", frames),
        Event::StreamTimedOut { which, frames } => {
            debug!(target: T, event = "stream_timed_out", reason = %which, frames)
        }
        Event::StreamError { outcome, frames } => debug!(target: T, event = "stream_error", outcome = ?outcome, frames),
    }
}

/// A span entered for one poll (nothing without the `tracing` feature).
#[cfg(feature = "tracing")]
pub(crate) type Entered<'a> = tracing::span::Entered<'a>;
/// A span entered for one poll (nothing without the `tracing` feature).
#[cfg(not(feature = "tracing"))]
pub(crate) struct Entered<'a>(std::marker::PhantomData<&'a ()>);

/// The span of one call through a retry layer (`stampede_tower.call`, recording
/// its attempts when it ends); without the `tracing` feature, nothing.
#[derive(Debug)]
pub(crate) struct CallSpan {
    #[cfg(feature = "tracing")]
    span: tracing::Span,
}

impl CallSpan {
    #[inline]
    pub(crate) fn new() -> Self {
        CallSpan {
            #[cfg(feature = "tracing")]
            span: tracing::debug_span!(target: "stampede_tower", "stampede_tower.call", attempts = tracing::field::Empty),
        }
    }

    /// Enters the span for one poll, so the layers' events within nest under the call.
    #[inline]
    pub(crate) fn enter(&self) -> Entered<'_> {
        #[cfg(feature = "tracing")]
        return self.span.enter();
        #[cfg(not(feature = "tracing"))]
        Entered(std::marker::PhantomData)
    }

    /// The call ended after `attempts` attempts.
    #[inline]
    pub(crate) fn ended(&self, attempts: u32) {
        #[cfg(feature = "tracing")]
        self.span.record("attempts", attempts);
        #[cfg(not(feature = "tracing"))]
        let _ = attempts;
    }
}
