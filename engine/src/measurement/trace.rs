//! Per-request traces of one replica: every call (or request), each attempt it made,
//! every wait between them and every local refusal, plus the state changes (a
//! breaker opening) and the incident windows that explain them — the rows a request
//! timeline is drawn from and `trace.parquet` is written from.
//!
//! Tracing is off unless a model is built with a [`Tracer`]; a model keeps it as an
//! `Option<Box<…>>`, so with tracing off a hook is one predictable branch and nothing
//! is allocated (the counting-allocator tests and the instruction benches run with it
//! off).
//!
//! Invariant (checked by [`Trace::check_tiling`] in the models' tests): the attempt,
//! wait and refusal rows of a call tile its lifetime — the first starts when the call
//! does, each starts where the previous ended, the last ends when the call does.

use std::collections::BTreeMap;

use crate::kernel::slab::SlabKey;
use crate::kernel::time::Nanos;
use crate::kernel::Named;

stampede_kernel::named_enum! {
    /// What a trace row is.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum TraceKind {
        /// A call's whole life, from entering the client to its end (served or failed).
        Call = "call",
        /// One attempt sent to the provider (or the server behind the client).
        Attempt = "attempt",
        /// Time a call spent waiting: a retry backoff, a bulkhead or limiter queue, a quota wait.
        Wait = "wait",
        /// A local gate refused the call (zero length).
        Refusal = "refusal",
        /// The server side of an attempt (the graph): from a worker taking it to its
        /// answer, on the callee's instance.
        Serve = "serve",
        /// A policy changed state: a breaker opened (an interval), closed or half-opened.
        State = "state",
        /// A fault window on a tier, shard or dependency.
        Incident = "incident",
    }
}

/// "No such entity" in the integer columns.
pub const NONE: u32 = u32::MAX;

/// One row of a trace. Times are simulated nanoseconds from the replica's start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceRow {
    /// What the row is: a call, an attempt, a wait, a refusal.
    pub kind: TraceKind,
    /// The call's serial number in the replica ([`NONE`] for state and incident rows).
    pub call: u32,
    /// The enclosing unit's serial (the gateway's turn), or [`NONE`].
    pub group: u32,
    /// The row's own span number and its parent's, for models whose requests are trees
    /// (the graph: a call's parent is the attempt whose server made it, an attempt's
    /// its call); [`NONE`] elsewhere.
    pub span: u32,
    /// The parent's span number ([`NONE`] for a root, and outside trees).
    pub parent: u32,
    /// The call class (or request kind) name.
    pub class: &'static str,
    /// Where it went: the tier, shard or dependency index, or [`NONE`].
    pub place: u32,
    /// The attempt's number within its call (1, 2, …); 0 for other rows.
    pub attempt: u32,
    /// When it started.
    pub start: Nanos,
    /// When the first token reached the client (streamed attempts that got one).
    pub first_token: Option<Nanos>,
    /// When it ended.
    pub end: Nanos,
    /// An attempt's outcome (`200`, `429`, `529`, `500`, a timeout's name), a call's
    /// (`served` or its failure reason), a wait's kind, a refusal's reason, a state's
    /// new state, an incident's kind.
    pub outcome: &'static str,
    /// The gate that refused or held the call, or that changed state; empty otherwise.
    pub gate: &'static str,
    /// A failed or degraded call's root cause (the graph: `service.failure`, the
    /// deepest failure that decided it); empty otherwise.
    pub cause: &'static str,
    /// The service that caused a failed or degraded graph call (what the failing
    /// resource was waiting on, see the graph's `culprit.rs`); empty otherwise.
    pub cause_service: &'static str,
    /// Counted in the replica's metrics (it started after the warm-up).
    pub counted: bool,
    /// Whose call it is (the gateway's tenant), or [`NONE`].
    pub tenant: u32,
    /// A call's prompt tokens (an attempt's: the same prompt, sent again), or 0.
    pub input_tokens: u32,
    /// Tokens an attempt generated (a call's: every attempt's), or 0.
    pub output_tokens: u32,
    /// What an attempt was billed (a call's: every attempt's), in billionths of a dollar
    /// (an integer, so rows compare exactly); 0 outside the gateway.
    pub nano_usd: u64,
}

impl TraceRow {
    /// The columns a row outside the gateway leaves empty: no tenant, no tokens, no
    /// bill (the rest of it is a placeholder to be overwritten).
    pub const NO_BILL: TraceRow = TraceRow {
        kind: TraceKind::Call,
        call: NONE,
        group: NONE,
        span: NONE,
        parent: NONE,
        class: "",
        place: NONE,
        attempt: 0,
        start: 0,
        first_token: None,
        end: 0,
        outcome: "",
        gate: "",
        cause: "",
        cause_service: "",
        counted: false,
        tenant: NONE,
        input_tokens: 0,
        output_tokens: 0,
        nano_usd: 0,
    };
}

/// The rows of one traced replica, in the order they were completed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Trace {
    /// The rows, in the order they ended.
    pub rows: Vec<TraceRow>,
}

impl Trace {
    /// Checks that every call's attempt, wait and refusal rows tile its lifetime
    /// without gap or overlap; returns the first call that does not, described.
    pub fn check_tiling(&self) -> Result<(), String> {
        let mut calls: BTreeMap<u32, (Option<&TraceRow>, Vec<&TraceRow>)> = BTreeMap::new();
        for row in &self.rows {
            match row.kind {
                TraceKind::Call => calls.entry(row.call).or_default().0 = Some(row),
                TraceKind::Attempt | TraceKind::Wait | TraceKind::Refusal => {
                    calls.entry(row.call).or_default().1.push(row)
                }
                TraceKind::Serve | TraceKind::State | TraceKind::Incident => {}
            }
        }
        for (id, (call, mut parts)) in calls {
            let call = call.ok_or_else(|| format!("call {id} has parts but no call row"))?;
            // Ties: a zero-length refusal sorts before the wait or attempt that starts with it.
            parts.sort_by_key(|row| (row.start, row.end, row.kind != TraceKind::Refusal));
            let mut at = call.start;
            for part in &parts {
                if part.start != at || part.end < part.start {
                    return Err(format!(
                        "call {id}: its {} row [{}, {}] does not start where the previous part ended ({at})",
                        part.kind.name(),
                        part.start,
                        part.end
                    ));
                }
                at = part.end;
            }
            if at != call.end {
                return Err(format!("call {id}: its parts end at {at}, the call at {}", call.end));
            }
        }
        Ok(())
    }
}

/// Gives slab-keyed entities (whose keys are reused) serial numbers, and remembers
/// per live call what its rows need: serial, group, class, whether it is counted, an
/// open wait and an attempt in flight.
#[derive(Clone, Debug, Default)]
pub struct Tracer {
    /// What was recorded so far.
    pub trace: Trace,
    live: Vec<LiveCall>,
    groups: Vec<u32>,
    next_call: u32,
    next_group: u32,
}

#[derive(Clone, Copy, Debug)]
struct LiveCall {
    serial: u32,
    group: u32,
    class: &'static str,
    counted: bool,
    started: Nanos,
    attempts: u32,
    wait: Option<(Nanos, &'static str, &'static str)>,
    /// An attempt sent and not yet ended: (sent, place).
    attempt: Option<(Nanos, u32)>,
    tenant: u32,
    input_tokens: u32,
    /// The attempt in flight's bill, once known: (output tokens, nano-USD).
    billed: (u32, u64),
    /// The call's bills so far: (output tokens, nano-USD).
    total: (u32, u64),
}

const VACANT: LiveCall = LiveCall {
    serial: NONE,
    group: NONE,
    class: "",
    counted: false,
    started: 0,
    attempts: 0,
    wait: None,
    attempt: None,
    tenant: NONE,
    input_tokens: 0,
    billed: (0, 0),
    total: (0, 0),
};

impl Tracer {
    /// An empty tracer.
    pub fn new() -> Self {
        Tracer::default()
    }

    /// A group (a turn) starts under slab key `key`.
    pub fn group_started(&mut self, key: SlabKey) {
        if self.groups.len() <= key.index() {
            self.groups.resize(key.index() + 1, NONE);
        }
        self.groups[key.index()] = self.next_group;
        self.next_group += 1;
    }

    /// A call of `class` starts at `now` under slab key `key`, in group `group` (a live group's key).
    pub fn call_started(
        &mut self,
        key: SlabKey,
        group: Option<SlabKey>,
        class: &'static str,
        counted: bool,
        now: Nanos,
    ) {
        let group = group.map_or(NONE, |g| self.groups[g.index()]);
        if self.live.len() <= key.index() {
            self.live.resize(key.index() + 1, VACANT);
        }
        debug_assert_eq!(self.live[key.index()].serial, NONE, "a slab key is live once");
        self.live[key.index()] = LiveCall { serial: self.next_call, group, class, counted, started: now, ..VACANT };
        self.next_call += 1;
    }

    fn live(&mut self, key: SlabKey) -> &mut LiveCall {
        let live = &mut self.live[key.index()];
        debug_assert_ne!(live.serial, NONE, "a traced call is live");
        live
    }

    fn part(live: &LiveCall, kind: TraceKind, (start, end): (Nanos, Nanos), outcome: &'static str) -> TraceRow {
        TraceRow {
            kind,
            call: live.serial,
            group: live.group,
            span: NONE,
            parent: NONE,
            class: live.class,
            place: NONE,
            attempt: 0,
            start,
            first_token: None,
            end,
            outcome,
            gate: "",
            cause: "",
            cause_service: "",
            counted: live.counted,
            tenant: live.tenant,
            input_tokens: live.input_tokens,
            output_tokens: 0,
            nano_usd: 0,
        }
    }

    /// The live call `key` belongs to `tenant` and sends a prompt of `input_tokens`.
    pub fn call_tokens(&mut self, key: SlabKey, tenant: u32, input_tokens: u32) {
        let live = self.live(key);
        (live.tenant, live.input_tokens) = (tenant, input_tokens);
    }

    /// The call's attempt in flight generated `output_tokens` and was billed
    /// `nano_usd` (before [`Tracer::attempt_ended`]).
    pub fn attempt_billed(&mut self, key: SlabKey, output_tokens: u32, nano_usd: u64) {
        let live = self.live(key);
        live.billed = (output_tokens, nano_usd);
        live.total = (live.total.0 + output_tokens, live.total.1 + nano_usd);
    }

    /// The call starts waiting at `now` (`kind`: backoff, bulkhead, limiter, quota; `gate`
    /// the gate that holds it, or empty).
    pub fn wait_starts(&mut self, key: SlabKey, now: Nanos, kind: &'static str, gate: &'static str) {
        let live = self.live(key);
        debug_assert!(live.wait.is_none() && live.attempt.is_none(), "one thing at a time");
        live.wait = Some((now, kind, gate));
    }

    /// The call's wait (if any) ends at `now`.
    pub fn wait_ends(&mut self, key: SlabKey, now: Nanos) {
        let live = self.live(key);
        let Some((start, kind, gate)) = live.wait.take() else { return };
        let row = TraceRow { gate, ..Self::part(live, TraceKind::Wait, (start, now), kind) };
        self.trace.rows.push(row);
    }

    /// A local gate refused the call at `now` (ending any wait).
    pub fn refusal(&mut self, key: SlabKey, now: Nanos, reason: &'static str, gate: &'static str) {
        self.wait_ends(key, now);
        let live = self.live(key);
        let row = TraceRow { gate, ..Self::part(live, TraceKind::Refusal, (now, now), reason) };
        self.trace.rows.push(row);
    }

    /// The call sends an attempt to `place` at `now` (ending any wait).
    pub fn attempt_sent(&mut self, key: SlabKey, now: Nanos, place: u32) {
        self.wait_ends(key, now);
        let live = self.live(key);
        debug_assert!(live.attempt.is_none(), "one attempt at a time");
        live.attempt = Some((now, place));
    }

    /// The call's attempt in flight ended at `now` with `outcome`.
    pub fn attempt_ended(&mut self, key: SlabKey, now: Nanos, first_token: Option<Nanos>, outcome: &'static str) {
        let live = self.live(key);
        let (start, place) = live.attempt.take().expect("an attempt in flight");
        live.attempts += 1;
        let (output_tokens, nano_usd) = std::mem::take(&mut live.billed);
        let row = TraceRow {
            place,
            attempt: live.attempts,
            first_token,
            output_tokens,
            nano_usd,
            ..Self::part(live, TraceKind::Attempt, (start, now), outcome)
        };
        self.trace.rows.push(row);
    }

    /// The call ended at `now` with `outcome`.
    pub fn call_ended(&mut self, key: SlabKey, now: Nanos, outcome: &'static str) {
        let live = self.live(key);
        debug_assert!(live.wait.is_none() && live.attempt.is_none(), "a call ends after its waits and attempts");
        let (output_tokens, nano_usd) = live.total;
        let row =
            TraceRow { output_tokens, nano_usd, ..Self::part(live, TraceKind::Call, (live.started, now), outcome) };
        self.trace.rows.push(row);
        self.live[key.index()] = VACANT;
    }

    /// A call of `class` that a gate refused as it arrived at `now`, before it was
    /// given a slab key: its refusal and its call row, both of zero length.
    pub fn refused_on_arrival(
        &mut self,
        class: &'static str,
        counted: bool,
        now: Nanos,
        reason: &'static str,
        gate: &'static str,
    ) {
        let live = LiveCall { serial: self.next_call, class, counted, started: now, ..VACANT };
        self.next_call += 1;
        self.trace.rows.push(TraceRow { gate, ..Self::part(&live, TraceKind::Refusal, (now, now), reason) });
        self.trace.rows.push(Self::part(&live, TraceKind::Call, (now, now), reason));
    }

    /// A row that belongs to no call: a state change or an incident window.
    #[allow(clippy::too_many_arguments)]
    pub fn event(
        &mut self,
        kind: TraceKind,
        class: &'static str,
        place: u32,
        (start, end): (Nanos, Nanos),
        outcome: &'static str,
        gate: &'static str,
        counted: bool,
    ) {
        debug_assert!(matches!(kind, TraceKind::State | TraceKind::Incident));
        self.trace.rows.push(TraceRow {
            kind,
            call: NONE,
            group: NONE,
            span: NONE,
            parent: NONE,
            class,
            place,
            attempt: 0,
            start,
            first_token: None,
            end,
            outcome,
            gate,
            cause: "",
            counted,
            ..TraceRow::NO_BILL
        });
    }

    /// The finished trace. A model that stops at its horizon with calls still going
    /// passes `stopped_at`: their open waits and attempts, and the calls, end there
    /// with the outcome `in_flight`. A model that drains passes `None`.
    pub fn finish(mut self, stopped_at: Option<Nanos>) -> Trace {
        match stopped_at {
            None => debug_assert!(self.live.iter().all(|l| l.serial == NONE), "every traced call ended"),
            Some(now) => {
                for index in 0..self.live.len() {
                    if self.live[index].serial == NONE {
                        continue;
                    }
                    let key = SlabKey::from_bits(index as u64);
                    self.wait_ends(key, now);
                    if self.live[index].attempt.is_some() {
                        self.attempt_ended(key, now, None, "in_flight");
                    }
                    self.call_ended(key, now, "in_flight");
                }
            }
        }
        self.trace
    }
}
