//! The graph's trace: every call, attempt (hedges marked), server-side handling,
//! backoff, queue wait and refusal of one replica as a row with its own span number
//! and its parent's — a call's parent is the attempt whose job made it (none for an
//! entry request), an attempt's is its call, a serve row's (the callee's handling,
//! from a worker taking the job to its answer), a queue wait's and a refusal's is the
//! attempt they happened to — so one recursive query rebuilds a request's whole tree. Rows are written when a
//! span ends; spans still open at the horizon end there as `in_flight`.
//!
//! Off unless the model is built [`Graph::traced`](super::Graph::traced): the model
//! holds it as an `Option<Box<…>>`, one branch per hook when off.

use crate::kernel::slab::SlabKey;
use crate::kernel::time::Nanos;
use crate::measurement::trace::{Trace, TraceKind, TraceRow, NONE};

use super::params::{Cause, Failure};

#[derive(Clone, Copy, Debug)]
struct Open {
    span: u32,
    parent: u32,
    serial: u32,
    start: Nanos,
    class: &'static str,
    place: u32,
    attempt: u32,
    gate: &'static str,
    counted: bool,
}

const CLOSED: Open = Open {
    span: NONE,
    parent: NONE,
    serial: NONE,
    start: 0,
    class: "",
    place: NONE,
    attempt: 0,
    gate: "",
    counted: false,
};

#[derive(Debug, Default)]
pub struct SpanTracer {
    rows: Vec<TraceRow>,
    next_span: u32,
    next_call: u32,
    /// By call slab index: the open call, and its open backoff (start).
    calls: Vec<(Open, Option<Nanos>)>,
    /// By attempt slab index: the open attempt (closed when its caller lets go).
    attempts: Vec<Open>,
    /// By attempt slab index: the attempt's span and whether it is counted, kept after
    /// the caller lets go — its job may still run and make calls, whose parent it stays.
    /// The slab keeps an attempt's key while its job lives, so the entry is not reused
    /// under a running job.
    attempt_spans: Vec<(u32, bool)>,
    /// By job slab index: when it started waiting for a worker, its attempt's span, and
    /// whether that attempt is counted.
    queued: Vec<Option<(Nanos, u32, bool)>>,
    /// By job slab index: the job's open serve span (from its first worker to its end).
    serving: Vec<Open>,
    names: TraceNames,
}

/// What labels a graph's trace rows: endpoints (`service.endpoint`) and services by
/// index, and every root cause (`service.failure`) by [`Cause::index`].
#[derive(Debug, Default)]
pub struct TraceNames {
    endpoints: Vec<&'static str>,
    services: Vec<&'static str>,
    causes: Vec<&'static str>,
}

impl TraceNames {
    /// The causes' names are made once here, kept by `keep` (an interner).
    pub fn new(
        endpoints: Vec<&'static str>,
        services: Vec<&'static str>,
        keep: impl Fn(String) -> &'static str,
    ) -> Self {
        let causes = services
            .iter()
            .flat_map(|s| Failure::ALL.map(|failure| (s, failure)))
            .map(|(s, failure)| keep(format!("{s}.{}", failure.name())))
            .collect();
        TraceNames { endpoints, services, causes }
    }
}

fn slot<T: Copy>(table: &mut Vec<T>, key: SlabKey, vacant: T) -> &mut T {
    if table.len() <= key.index() {
        table.resize(key.index() + 1, vacant);
    }
    &mut table[key.index()]
}

impl SpanTracer {
    pub fn new(names: TraceNames) -> Self {
        SpanTracer { names, ..SpanTracer::default() }
    }

    fn span(&mut self) -> u32 {
        self.next_span += 1;
        self.next_span - 1
    }

    fn row(open: &Open, kind: TraceKind, end: Nanos, outcome: &'static str) -> TraceRow {
        TraceRow {
            kind,
            call: open.serial,
            group: NONE,
            span: open.span,
            parent: open.parent,
            class: open.class,
            place: open.place,
            attempt: open.attempt,
            start: open.start,
            first_token: None,
            end,
            outcome,
            gate: open.gate,
            cause: "",
            counted: open.counted,
            ..TraceRow::NO_BILL
        }
    }

    /// The span of live attempt `attempt` (to parent what its job does), answered or not.
    pub fn attempt_span(&self, attempt: SlabKey) -> u32 {
        self.attempt_spans.get(attempt.index()).map_or(NONE, |a| a.0)
    }

    fn attempt_counted(&self, attempt: SlabKey) -> bool {
        self.attempt_spans.get(attempt.index()).is_some_and(|a| a.1)
    }

    pub fn call_started(&mut self, call: SlabKey, now: Nanos, endpoint: u32, parent: u32, counted: bool) {
        let (span, serial) = (self.span(), self.next_call);
        self.next_call += 1;
        let class = self.names.endpoints.get(endpoint as usize).copied().unwrap_or("");
        let open = Open { span, parent, serial, start: now, class, counted, ..CLOSED };
        *slot(&mut self.calls, call, (CLOSED, None)) = (open, None);
    }

    /// The call ended with `outcome`; a failed or degraded one names its root `cause`
    /// and the service that caused it (its culprit).
    pub fn call_ended(&mut self, call: SlabKey, now: Nanos, outcome: &'static str, cause: Option<Cause>) {
        let (open, backoff) = std::mem::replace(&mut self.calls[call.index()], (CLOSED, None));
        debug_assert_ne!(open.span, NONE, "a traced call is open");
        if let Some(start) = backoff {
            let wait = Open { start, parent: open.span, span: self.span(), ..open };
            self.rows.push(Self::row(&wait, TraceKind::Wait, now, "backoff"));
        }
        let cause_service = cause.and_then(|c| self.names.services.get(c.culprit as usize).copied()).unwrap_or("");
        let cause = cause.and_then(|c| self.names.causes.get(c.index()).copied()).unwrap_or("");
        self.rows.push(TraceRow { cause, cause_service, ..Self::row(&open, TraceKind::Call, now, outcome) });
    }

    pub fn backoff_starts(&mut self, call: SlabKey, now: Nanos) {
        self.calls[call.index()].1 = Some(now);
    }

    pub fn backoff_ends(&mut self, call: SlabKey, now: Nanos) {
        let (open, backoff) = self.calls[call.index()];
        if let Some(start) = backoff {
            self.calls[call.index()].1 = None;
            let wait = Open { start, parent: open.span, span: self.span(), ..open };
            self.rows.push(Self::row(&wait, TraceKind::Wait, now, "backoff"));
        }
    }

    pub fn attempt_sent(
        &mut self,
        attempt: SlabKey,
        call: SlabKey,
        now: Nanos,
        instance: u32,
        number: u32,
        hedge: bool,
    ) {
        let call = self.calls[call.index()].0;
        let span = self.span();
        let open = Open {
            span,
            parent: call.span,
            start: now,
            place: instance,
            attempt: number,
            gate: if hedge { "hedge" } else { "" },
            ..call
        };
        *slot(&mut self.attempts, attempt, CLOSED) = open;
        *slot(&mut self.attempt_spans, attempt, (NONE, false)) = (span, open.counted);
    }

    pub fn attempt_ended(&mut self, attempt: SlabKey, now: Nanos, outcome: &'static str) {
        let open = std::mem::replace(&mut self.attempts[attempt.index()], CLOSED);
        debug_assert_ne!(open.span, NONE, "a traced attempt is open");
        self.rows.push(Self::row(&open, TraceKind::Attempt, now, outcome));
    }

    /// A job of `attempt` starts waiting for a worker (`fresh`: before its first work).
    pub fn queued(&mut self, job: SlabKey, now: Nanos, attempt: SlabKey) {
        let (span, counted) = (self.attempt_span(attempt), self.attempt_counted(attempt));
        *slot(&mut self.queued, job, None) = Some((now, span, counted));
    }

    /// The job leaves the queue (to a worker, or dropped); a wait of no time is no row.
    pub fn dequeued(&mut self, job: SlabKey, now: Nanos, service: u32, outcome: &'static str) {
        let waited = self.queued.get_mut(job.index()).and_then(Option::take);
        if let Some((start, parent, counted)) = waited.filter(|&(start, ..)| start < now || outcome != "queue") {
            let span = self.span();
            let gate = self.names.services.get(service as usize).copied().unwrap_or("");
            let open = Open { span, parent, start, gate, counted, ..CLOSED };
            self.rows.push(Self::row(&open, TraceKind::Wait, now, outcome));
        }
    }

    /// A worker of `instance` (of `service`) takes `attempt`'s job `job` for endpoint
    /// `endpoint`'s first work: the server side of the attempt begins.
    pub fn serve_started(
        &mut self,
        job: SlabKey,
        now: Nanos,
        attempt: SlabKey,
        endpoint: u32,
        service: u32,
        instance: u32,
    ) {
        let (parent, counted) = (self.attempt_span(attempt), self.attempt_counted(attempt));
        let span = self.span();
        let class = self.names.endpoints.get(endpoint as usize).copied().unwrap_or("");
        let gate = self.names.services.get(service as usize).copied().unwrap_or("");
        let open = Open { span, parent, start: now, class, place: instance, gate, counted, ..CLOSED };
        *slot(&mut self.serving, job, CLOSED) = open;
    }

    /// Job `job`'s server side ends with `outcome` (nothing if it never started).
    pub fn serve_ended(&mut self, job: SlabKey, now: Nanos, outcome: &'static str) {
        if let Some(open) = self.serving.get_mut(job.index()).map(|o| std::mem::replace(o, CLOSED)) {
            if open.span != NONE {
                self.rows.push(Self::row(&open, TraceKind::Serve, now, outcome));
            }
        }
    }

    /// `service` refused `attempt` for `reason` (zero length).
    pub fn refused(&mut self, attempt: SlabKey, now: Nanos, service: u32, reason: &'static str) {
        let parent = self.attempt_span(attempt);
        let span = self.span();
        let gate = self.names.services.get(service as usize).copied().unwrap_or("");
        let counted = self.attempt_counted(attempt);
        let open = Open { span, parent, start: now, gate, counted, ..CLOSED };
        self.rows.push(Self::row(&open, TraceKind::Refusal, now, reason));
    }

    /// The rows, with spans still open ending at `horizon` as `in_flight`.
    pub fn finish(mut self, horizon: Nanos) -> Trace {
        for open in std::mem::take(&mut self.attempts) {
            if open.span != NONE {
                self.rows.push(Self::row(&open, TraceKind::Attempt, horizon, "in_flight"));
            }
        }
        for open in std::mem::take(&mut self.serving) {
            if open.span != NONE {
                self.rows.push(Self::row(&open, TraceKind::Serve, horizon, "in_flight"));
            }
        }
        for (open, _) in std::mem::take(&mut self.calls) {
            if open.span != NONE {
                self.rows.push(Self::row(&open, TraceKind::Call, horizon, "in_flight"));
            }
        }
        Trace { rows: self.rows }
    }
}
