//! The gateway's trace hooks ([`crate::measurement::trace`]): each is one branch on
//! `tracer` when tracing is off. What they record: a call's start and end, each
//! attempt (tier, sent, first token, end, outcome), each wait (the gate that held
//! the call, or the retry backoff), each local refusal, and the breakers' openings.

use crate::kernel::slab::SlabKey;
use crate::kernel::time::Nanos;
use crate::kernel::Named;
use crate::measurement::trace::TraceKind;
use crate::policy::breaker::BreakerState;

use super::gate::Gate;
use super::model::Gateway;
use super::reason::{Reason, Source};
use super::state::{Attempt, AttemptState, Ending};

/// An attempt's outcome as the client saw it: an HTTP status or the timeout's name.
fn attempt_outcome(ending: Ending) -> &'static str {
    match ending {
        Ending::Success => "200",
        Ending::Failed(Reason::Http429) => "429",
        Ending::Failed(Reason::Http529) => "529",
        Ending::Failed(Reason::Http500) => "500",
        Ending::Failed(reason) => reason.name(),
    }
}

/// What a call waits for in `gate`.
fn wait_kind(gate: Gate) -> &'static str {
    match gate {
        Gate::Retry => "backoff",
        Gate::Adaptive => "limiter",
        other => other.name(),
    }
}

impl Gateway<'_> {
    #[inline]
    pub(super) fn trace_wait_starts(&mut self, now: Nanos, key: SlabKey, gate: Gate) {
        if let Some(trace) = self.tracer.as_deref_mut() {
            trace.rows.wait_starts(key, now, wait_kind(gate), gate.name());
        }
    }

    #[inline]
    pub(super) fn trace_wait_ends(&mut self, now: Nanos, key: SlabKey) {
        if let Some(trace) = self.tracer.as_deref_mut() {
            trace.rows.wait_ends(key, now);
        }
    }

    #[inline]
    pub(super) fn trace_refusal(&mut self, now: Nanos, key: SlabKey, reason: Reason) {
        if let Some(trace) = self.tracer.as_deref_mut() {
            let gate = match reason.source() {
                Source::Gate(gate) => gate.name(),
                Source::Timeout | Source::Provider => "",
            };
            trace.rows.refusal(key, now, reason.name(), gate);
        }
    }

    /// The attempt's end as the client saw it (its first token if one arrived).
    #[inline]
    pub(super) fn trace_attempt(&mut self, now: Nanos, attempt: &Attempt) {
        if self.tracer.is_some() {
            let streamed = self.p.classes[self.calls.get(attempt.call).expect("live").class as usize].streamed;
            let first_token = attempt
                .plan
                .filter(|plan| streamed && attempt.state == AttemptState::Started && plan.first_token_at <= now)
                .map(|plan| plan.first_token_at);
            let trace = self.tracer.as_deref_mut().expect("tracing");
            trace.rows.attempt_ended(attempt.call, now, first_token, attempt_outcome(attempt.ending));
        }
    }

    #[inline]
    pub(super) fn trace_call_ended(&mut self, now: Nanos, key: SlabKey, ending: Ending) {
        if let Some(trace) = self.tracer.as_deref_mut() {
            let outcome = match ending {
                Ending::Success => "served",
                Ending::Failed(reason) => reason.name(),
            };
            trace.rows.call_ended(key, now, outcome);
        }
    }

    /// Records class `class`'s breaker state if it changed: an opening as the
    /// interval it will stay open, half-open and closed as instants.
    #[inline]
    pub(super) fn trace_breaker(&mut self, now: Nanos, class: usize) {
        let Some(trace) = self.tracer.as_deref_mut() else { return };
        let state = self.breakers[class].state();
        let before = std::mem::replace(&mut trace.breakers[class], state);
        if std::mem::discriminant(&before) == std::mem::discriminant(&state) {
            return;
        }
        let (window, name) = match state {
            BreakerState::Open { until } => ((now, until), "open"),
            BreakerState::HalfOpen { .. } => ((now, now), "half_open"),
            BreakerState::Closed => ((now, now), "closed"),
        };
        let (counted, tier) = (now >= self.p.warmup, self.p.classes[class].tier as u32);
        trace.rows.event(TraceKind::State, self.p.class_names[class], tier, window, name, "breaker", counted);
    }
}
