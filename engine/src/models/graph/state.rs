//! The graph model's entities and events. A request is a tree: an entry **call**
//! makes **attempts** (retries, hedges); an attempt that reaches an instance becomes a
//! **job**, which runs its endpoint's steps and makes child calls. Each lives in a
//! slab and points at its parent, and that one relation carries deadlines,
//! cancellation and wasted-work accounting. Siblings are linked through the slabs
//! (a job's child calls, a call's attempts), so nothing allocates per request.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;

use crate::components::lru::{KeyHasher, LruCache};
use crate::kernel::slab::SlabKey;
use crate::kernel::time::Nanos;
use crate::kernel::timer::{Ticket, TicketStamp, TimerSlot, TimerTicket};
use crate::policy::breaker::Permit;

use super::params::{CacheParams, Cause, Failure};

/// [`Call::site`] of an entry request.
pub(super) const NO_SITE: u32 = u32::MAX;

/// [`Attempt::edge`] of a health-check probe (sent by the service's checker, along no edge).
pub(super) const PROBE_EDGE: u32 = u32::MAX;

/// [`Attempt::call`] of a health-check probe: a key no call ever has.
pub(super) const PROBE_CALL: SlabKey = SlabKey::from_bits(u64::MAX);

/// No pool: an edge without one ([`super::entities::EdgeState::first_pool`]), an attempt
/// sent without a connection.
pub(super) const NO_POOL: u32 = u32::MAX;

/// Where a request's time went: the service that caused the largest part of it, and
/// how long that part was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lag {
    /// The service.
    pub culprit: u32,
    /// The part it caused.
    pub span: Nanos,
}

impl Lag {
    /// `span` caused by `culprit`.
    pub fn of(culprit: u32, span: Nanos) -> Lag {
        Lag { culprit, span }
    }

    /// The larger of two.
    pub fn max(self, other: Lag) -> Lag {
        if other.span > self.span {
            other
        } else {
            self
        }
    }
}

/// Per service, the edges it calls along: `edges[start[s]..start[s + 1]]` (a graph's
/// adjacency, built once).
pub(super) struct OutEdges {
    start: Vec<u32>,
    edges: Vec<u32>,
}

impl OutEdges {
    /// The out-edges of `services` services; `from[e]` is edge e's caller (`None`: clients).
    pub fn new(services: usize, from: impl Iterator<Item = Option<u32>> + Clone) -> OutEdges {
        let mut start = vec![0u32; services + 1];
        for s in from.clone().flatten() {
            start[s as usize + 1] += 1;
        }
        for s in 0..services {
            start[s + 1] += start[s];
        }
        let mut next = start.clone();
        let mut edges = vec![0u32; start[services] as usize];
        for (e, s) in from.enumerate() {
            if let Some(s) = s {
                edges[next[s as usize] as usize] = e as u32;
                next[s as usize] += 1;
            }
        }
        OutEdges { start, edges }
    }

    pub fn of(&self, s: usize) -> &[u32] {
        &self.edges[self.start[s] as usize..self.start[s + 1] as usize]
    }
}

/// An attempt waiting for a connection: its call, the ticket of the call's wait (a
/// stale one: it left), whether it is a retry the budget granted, and since when it
/// waits. Every attempt on an edge with a pool holds a connection of its call's pool
/// while its caller waits for it.
#[derive(Clone, Copy, Debug)]
pub(super) struct PoolWaiter {
    pub call: SlabKey,
    pub ticket: TimerTicket,
    pub granted: bool,
    pub since: Nanos,
}

/// A caller's logical call: one entry request, or one call a job makes.
#[derive(Clone, Copy, Debug)]
pub(super) struct Call {
    /// The job that made it; `None` for an entry request.
    pub parent: Option<SlabKey>,
    /// The workload the request tree belongs to.
    pub workload: u32,
    /// The call site that made it (an index into the call sites); `NO_SITE` for an
    /// entry request.
    pub site: u32,
    pub edge: u32,
    pub endpoint: u32,
    /// Absolute; `Nanos::MAX` without one.
    pub deadline: Nanos,
    pub started: Nanos,
    /// When the latest attempt that is not a hedge was sent.
    pub primary_sent: Nanos,
    /// Attempts sent, hedges excluded (the retry count is this − 1).
    pub tries: u32,
    pub hedges: u32,
    /// Attempts whose answer the call still waits for.
    pub outstanding: u32,
    pub first_attempt: Option<SlabKey>,
    /// The job's other child calls (a doubly linked list, spliced when a call ends).
    pub next_sibling: Option<SlabKey>,
    pub prev_sibling: Option<SlabKey>,
    pub last_backoff: Nanos,
    pub last_failure: Failure,
    /// The root cause of the latest failed attempt (see [`Cause`]).
    pub last_cause: Cause,
    pub hedge_timer: TimerSlot,
    /// A retry is scheduled (the call waits on no attempt).
    pub backing_off: bool,
    /// An attempt waits for a connection from the edge's pool; `hedge_timer` (free then:
    /// a call sends no hedge before its primary) times the wait.
    pub waiting_for_connection: bool,
    pub criticality: u8,
    pub depth: u32,
    pub key: u64,
    pub counted: bool,
    /// Made by a job that does not wait for it ([`super::params::Wait::Detached`]):
    /// no parent, and not an entry request either; its end tells no one.
    pub detached: bool,
}

impl Call {
    /// A call starting at `now` (no attempt sent yet).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        parent: Option<SlabKey>,
        workload: u32,
        edge: u32,
        endpoint: u32,
        deadline: Nanos,
        now: Nanos,
        criticality: u8,
        depth: u32,
        key: u64,
        counted: bool,
    ) -> Call {
        Call {
            parent,
            workload,
            site: NO_SITE,
            edge,
            endpoint,
            deadline,
            started: now,
            primary_sent: now,
            tries: 0,
            hedges: 0,
            outstanding: 0,
            first_attempt: None,
            next_sibling: None,
            prev_sibling: None,
            last_backoff: 0,
            last_failure: Failure::Timeout,
            last_cause: Cause::at(0, Failure::Timeout),
            hedge_timer: TimerSlot::default(),
            waiting_for_connection: false,
            backing_off: false,
            criticality,
            depth,
            key,
            counted,
            detached: false,
        }
    }
}

/// One request sent to one instance.
#[derive(Clone, Copy, Debug)]
pub(super) struct Attempt {
    pub call: SlabKey,
    pub edge: u32,
    pub instance: u32,
    pub endpoint: u32,
    pub sent: Nanos,
    pub deadline: Nanos,
    pub criticality: u8,
    pub depth: u32,
    pub key: u64,
    pub counted: bool,
    pub hedge: bool,
    /// Sent as a retry or hedge the budget granted (Envoy's budget counts them active).
    pub granted: bool,
    pub timer: TimerSlot,
    pub permit: Option<Permit>,
    /// The bounded-load router counts this attempt on `instance`.
    pub routed: bool,
    /// Its job, once it reached the instance and was admitted.
    pub job: Option<SlabKey>,
    /// The caller still waits for its answer.
    pub caller_waiting: bool,
    /// An event or a job still refers to it (in the network, at the server, or its
    /// answer on the way back). The attempt is removed once neither side needs it.
    pub in_flight: bool,
    pub next: Option<SlabKey>,
    /// Why its answer is not a plain success (set with a refused, error or degraded
    /// answer; `None` lets the caller name the callee).
    pub cause: Option<Cause>,
    /// The service that caused most of its job's time (set with its answer; see
    /// `culprit.rs`).
    pub time_culprit: u32,
}

/// Where a job is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum JobState {
    /// Waiting for a worker; `fresh` until its first piece of work starts.
    Queued { since: Nanos, fresh: bool },
    /// On a worker until its `WorkDone`.
    Working,
    /// Waiting for its child calls (holding its worker only if the service blocks).
    Waiting,
}

/// One instance's cache of one endpoint.
pub(super) struct CacheState {
    pub lru: LruCache,
    /// Keys being fetched (single flight only), each with its first waiting job.
    pub filling: HashMap<u64, Option<SlabKey>, BuildHasherDefault<KeyHasher>>,
}

impl CacheState {
    pub fn new(params: CacheParams) -> Self {
        CacheState {
            lru: LruCache::new(params.capacity, params.ttl),
            filling: HashMap::with_capacity_and_hasher(if params.coalesce { 256 } else { 0 }, Default::default()),
        }
    }
}

/// A job's part in its cache endpoint's lookup.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum CacheRole {
    /// Not looked up (or not a cache endpoint, or a hit).
    None,
    /// It missed and fetches from the origin (its steps); it fills the cache.
    Fetch,
    /// It missed while another job fetches the key: it waits for that answer.
    Waiting,
}

/// A request being served by an instance.
#[derive(Clone, Copy, Debug)]
pub(super) struct Job {
    pub attempt: SlabKey,
    pub endpoint: u32,
    pub instance: u32,
    /// The instance's life when the job arrived: a crash starts a new one and strands
    /// every job of the old.
    pub epoch: u32,
    /// The next step (absolute index into the steps); the endpoint's own work is step
    /// "before the first".
    pub next_step: u32,
    pub did_work: bool,
    /// The work waiting for a worker: a step index, or `u32::MAX` for the endpoint's own.
    pub pending_work: u32,
    pub state: JobState,
    pub ticket: Ticket,
    pub holds_worker: bool,
    pub busy_since: Nanos,
    pub busy_ns: Nanos,
    pub arrived: Nanos,
    pub deadline: Nanos,
    pub criticality: u8,
    pub depth: u32,
    pub key: u64,
    pub counted: bool,
    pub degraded: bool,
    pub shed_held: bool,
    pub limit_held: bool,
    /// The current group of calls.
    pub first_child: Option<SlabKey>,
    pub group_launched: u32,
    pub group_needed: u32,
    pub group_pending: u32,
    pub group_ok: u32,
    pub group_failed: u32,
    /// The caller gave up and the service cancels abandoned work.
    pub cancelled: bool,
    /// Its part in a cache endpoint's lookup.
    pub cache_role: CacheRole,
    /// The root cause its answer carries: the first fallback's below it (it is
    /// degraded), replaced by the failing call's that decided a group's failure.
    pub cause: Option<Cause>,
    /// It waits on a group of calls, counted in its instance's and service's
    /// `awaiting` (and `blocked`, holding a worker meanwhile): see `culprit.rs`.
    pub awaiting: bool,
    pub blocked: bool,
    /// When its current group of calls started.
    pub group_started: Nanos,
    /// Its time its own service caused: its work, and queue waits for workers busy
    /// with their own work.
    pub own_ns: Nanos,
    /// The longest wait another service caused (a group of calls, a queue behind
    /// workers blocked downstream): that service, and the wait (a [`Lag`], flat).
    pub lag_culprit: u32,
    pub lag_span: Nanos,
}

/// What an instance answers (or the network, for a partition that fails fast).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    Success,
    /// A success some of whose calls were answered by fallbacks.
    Degraded,
    Refused,
    Error,
}

/// Events (16 bytes).
#[derive(Clone, Copy, Debug)]
pub enum Event {
    /// A workload's request arrives.
    Arrival {
        /// The workload.
        workload: u32,
    },
    /// An attempt reaches its instance.
    Arrives {
        /// The attempt.
        attempt: SlabKey,
    },
    /// An attempt's answer reaches its caller.
    Answered {
        /// The attempt.
        attempt: SlabKey,
        /// What it answered.
        answer: Answer,
    },
    /// The wake-up of an edge's timeout FIFO: its front is due (a stale ticket is ignored).
    EdgeTimeouts {
        /// The edge.
        edge: u32,
        /// Tells a current wake-up from a stale one.
        ticket: TimerTicket,
    },
    /// An attempt's own timeout (an adaptive one, which the edge's FIFO cannot hold).
    AttemptTimeout {
        /// The attempt.
        attempt: SlabKey,
        /// Tells a current timeout from a stale one.
        ticket: TimerTicket,
    },
    /// A job's local work ends.
    WorkDone {
        /// The job.
        job: SlabKey,
        /// Its ticket's stamp when scheduled.
        stamp: TicketStamp,
    },
    /// A call's backoff is over: its next attempt goes.
    RetryDue {
        /// The call.
        call: SlabKey,
    },
    /// A call's hedge delay is over.
    HedgeDue {
        /// The call.
        call: SlabKey,
        /// Tells a current hedge from a stale one.
        ticket: TimerTicket,
    },
    /// A call stops waiting for a connection: the pool's wait timeout or its deadline.
    PoolExpiry {
        /// The call.
        call: SlabKey,
        /// Tells a current wait from a stale one.
        ticket: TimerTicket,
    },
    /// A pool's connection came back while attempts wait: hand it over.
    PoolHandOver {
        /// The pool.
        pool: u32,
    },
    /// An autoscaled service's autoscaler decides.
    AutoscaleSync {
        /// The service.
        service: u32,
    },
    /// A provisioned instance is ready to serve.
    InstanceReady {
        /// The instance (its index among all instances).
        instance: u32,
        /// Its provisioning's number: a provisioning cancelled since is ignored.
        epoch: u32,
    },
    /// A health-check probe of an instance is due.
    ProbeDue {
        /// The instance (its index among all instances).
        instance: u32,
    },
    /// A fault begins.
    FaultStarts {
        /// Its index.
        fault: u32,
    },
    /// A fault ends.
    FaultEnds {
        /// Its index.
        fault: u32,
    },
}

const _: () = assert!(std::mem::size_of::<Event>() <= 16);
