//! What one replica of the graph model is given: the topology as flat arrays indexed
//! by small integers (services, endpoints, steps, call sites, edges), built once per
//! grid point by the experiments layer, which has already resolved every name.

use crate::components::arrivals::ArrivalProcess;
use crate::components::distribution::Distribution;
use crate::components::zipf::Zipf;
use crate::kernel::time::Nanos;
use crate::models::cluster::QueueDiscipline;
use crate::policy::adaptive_timeout::AdaptiveTimeoutConfig;
use crate::policy::autoscale::AutoscaleConfig;
use crate::policy::backoff::Backoff;
use crate::policy::breaker::BreakerConfig;
use crate::policy::health::HealthCheckConfig;
use crate::policy::hedge::HedgeConfig;
use crate::policy::limiter::LimiterKind;
use crate::policy::outlier::OutlierConfig;
use crate::policy::pool::PoolConfig;
use crate::policy::retry_budget::RetryBudget;
use crate::policy::shedder::ShedMarks;

/// Why a call or an attempt failed. The names are the metric suffixes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    /// No answer before the attempt's timeout or the call's deadline.
    Timeout,
    /// The callee would not take it: queue full, limiter, shedder, rate limit, an
    /// instance down, a partition that fails fast, a deadline already past.
    Refused,
    /// The callee answered with an error (an error fault, or its own calls failed).
    Error,
    /// The caller's own breaker refused it (not sent).
    BreakerOpen,
}

impl Failure {
    /// Every failure, in index order.
    pub const ALL: [Failure; 4] = [Failure::Timeout, Failure::Refused, Failure::Error, Failure::BreakerOpen];

    /// Its metric suffix.
    pub fn name(self) -> &'static str {
        match self {
            Failure::Timeout => "timeout",
            Failure::Refused => "refused",
            Failure::Error => "error",
            Failure::BreakerOpen => "breaker_open",
        }
    }

    /// Its index in per-failure arrays.
    pub fn index(self) -> usize {
        self as usize
    }
}

/// Where a failed (or degraded) request's failure was decided: the deepest failure on
/// the path that decided it — the service that refused, erred or did not answer in
/// time (or whose calls a breaker refused), and how its caller saw it. A job whose
/// calls failed passes the deciding call's cause up; a timeout or refusal above a
/// deeper failure is that caller's own.
///
/// It also carries the **culprit**: the service that caused it (see `culprit.rs`) —
/// where it failed is often a caller whose workers were all waiting on a slow service
/// further down; the culprit follows what they waited on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cause {
    /// The service where it happened.
    pub service: u32,
    /// How it failed.
    pub failure: Failure,
    /// The service that caused it: `service` itself, or the one whose saturation,
    /// slowness or fault the failing resource was waiting on.
    pub culprit: u32,
}

impl Cause {
    /// `failure` at `service`, which caused it itself.
    pub fn at(service: u32, failure: Failure) -> Cause {
        Cause { service, failure, culprit: service }
    }

    /// Its index among a graph's `services × 4` causes.
    pub fn index(self) -> usize {
        self.service as usize * Failure::ALL.len() + self.failure.index()
    }
}

/// Why a service refused work. The names are the metric suffixes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Its queue was full.
    QueueFull,
    /// Its concurrency limiter refused.
    Limiter,
    /// Its priority shedder refused.
    Shed,
    /// Its rate limiter refused.
    RateLimit,
    /// The instance is down (crashed) or the edge is partitioned with fail-fast.
    Down,
    /// The request's deadline had passed before its work could start.
    Deadline,
    /// CoDel dropped it at dequeue.
    Codel,
    /// The call chain is deeper than `max_depth` (a cycle ran away).
    Depth,
}

impl Refusal {
    /// Every refusal, in index order.
    pub const ALL: [Refusal; 8] = [
        Refusal::QueueFull,
        Refusal::Limiter,
        Refusal::Shed,
        Refusal::RateLimit,
        Refusal::Down,
        Refusal::Deadline,
        Refusal::Codel,
        Refusal::Depth,
    ];

    /// Its metric suffix.
    pub fn name(self) -> &'static str {
        match self {
            Refusal::QueueFull => "queue_full",
            Refusal::Limiter => "limiter",
            Refusal::Shed => "shed",
            Refusal::RateLimit => "rate_limit",
            Refusal::Down => "down",
            Refusal::Deadline => "deadline",
            Refusal::Codel => "codel",
            Refusal::Depth => "depth",
        }
    }

    /// Its index in per-refusal arrays.
    pub fn index(self) -> usize {
        self as usize
    }
}

/// Which failures a set holds (retried, or answered by a fallback).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FailureSet(pub u8);

impl FailureSet {
    /// No failure.
    pub const NONE: FailureSet = FailureSet(0);

    /// The set of `failures`.
    pub fn of(failures: &[Failure]) -> Self {
        FailureSet(failures.iter().fold(0, |bits, f| bits | 1 << f.index()))
    }

    /// Whether `failure` is in the set.
    pub fn contains(self, failure: Failure) -> bool {
        self.0 & (1 << failure.index()) != 0
    }
}

/// How a caller picks one of the callee's instances.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Balance {
    /// Each instance in turn.
    RoundRobin,
    /// A uniformly random instance.
    Random,
    /// The instance with the fewest requests present (queued, running or waiting on
    /// its own calls), first on ties.
    LeastOutstanding,
    /// Two instances at random, the one with fewer requests present (Mitzenmacher).
    PowerOfTwoChoices,
    /// The request's key on a hash ring of the instances with bounded loads (the
    /// cluster model's router): `vnodes` points per instance, capacity factor `c`.
    ConsistentHash {
        /// Virtual nodes per instance.
        vnodes: u32,
        /// Bounded-load factor c (`f64::INFINITY`: plain consistent hashing).
        capacity_factor: f64,
    },
}

/// One service: identical instances, each with its workers and queue.
#[derive(Clone, Debug)]
pub struct ServiceParams {
    /// Instances of the service.
    pub instances: u32,
    /// Workers (concurrency) per instance.
    pub workers: u32,
    /// Waiting requests per instance at most.
    pub queue_capacity: u32,
    /// The order an instance serves its queue in.
    pub discipline: QueueDiscipline,
    /// When a request's caller gives up (timeout, a hedge won, its own caller gave up),
    /// the work is cancelled: dropped from the queue or its worker freed, and its own
    /// calls cancelled in turn. Off by default: most servers never learn.
    pub cancel_abandoned: bool,
    /// Thread-per-request (the default): a worker is held while the request waits on
    /// its calls. Off (async): a worker runs each piece of local work and is released
    /// while the request waits, as an event loop does.
    pub blocking: bool,
    /// A concurrency limit per instance on the requests present.
    pub limiter: Option<LimiterKind>,
    /// Shed by criticality above these marks of `workers` (requests present, queued included).
    pub shedder: Option<ShedMarks>,
    /// A token bucket per instance: (requests per second, burst).
    pub rate_limit: Option<(f64, u64)>,
    /// Active health checks of its instances (one checker for every caller): the
    /// balancers skip an instance marked unhealthy; `None`: none.
    pub health_check: Option<HealthCheckConfig>,
    /// The work a probe does on a worker (it waits in the queue like any request).
    pub health_check_work: Nanos,
    /// Horizontal autoscaling; `None`: a fixed count. With it, `instances` is the most
    /// there can be (the autoscaler's `max`), and [`Autoscale::initial`] serve at first.
    pub autoscale: Option<Autoscale>,
}

/// What an autoscaled service's instance count follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScaleMetric {
    /// Workers doing work ÷ workers, per ready instance: what a CPU-based HPA reads
    /// (a worker blocked on a downstream call uses no CPU).
    Cpu,
    /// Busy workers ÷ workers, per ready instance, waiting on calls included (the
    /// threads held: occupancy).
    Utilisation,
    /// Requests arriving per second, per ready instance.
    Rps,
    /// Requests present (queued, working, waiting on calls), per ready instance.
    InFlight,
    /// Requests waiting for a worker, per ready instance.
    QueueDepth,
}

/// A service's autoscaler and how its new instances start.
#[derive(Clone, Debug)]
pub struct Autoscale {
    /// The HPA's settings (`target` in the metric's units).
    pub config: AutoscaleConfig,
    /// The metric it follows, time-averaged over each sync period.
    pub metric: ScaleMetric,
    /// Instances serving at the start.
    pub initial: u32,
    /// From the decision to an instance's first request.
    pub provisioning: Distribution,
    /// A new instance's work is slower for this long after it starts serving.
    pub cold_start: Nanos,
    /// By this factor at first, falling linearly to 1 over `cold_start`.
    pub cold_start_factor: f64,
}

impl ServiceParams {
    /// A blocking FIFO service without protection, work kept when its caller gives up.
    pub fn new(instances: u32, workers: u32, queue_capacity: u32) -> Self {
        ServiceParams {
            instances,
            workers,
            queue_capacity,
            discipline: QueueDiscipline::Fifo,
            cancel_abandoned: false,
            blocking: true,
            limiter: None,
            shedder: None,
            rate_limit: None,
            health_check: None,
            health_check_work: 0,
            autoscale: None,
        }
    }
}

/// One endpoint of a service: local work, then its steps in order.
#[derive(Clone, Debug)]
pub struct EndpointParams {
    /// The service that serves it.
    pub service: u32,
    /// Work before its first step, if any.
    pub work: Option<Distribution>,
    /// Its steps are `steps[first_step .. first_step + step_count]`.
    pub first_step: u32,
    /// How many steps it has.
    pub step_count: u32,
    /// A cache in front of its steps (the origin calls): a hit answers after the
    /// endpoint's own work; `None`: none.
    pub cache: Option<CacheParams>,
}

/// A cache endpoint: each instance keeps its own cache of request keys.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CacheParams {
    /// Entries per instance.
    pub capacity: u32,
    /// How long an entry stays fresh (`Nanos::MAX`: for ever).
    pub ttl: Nanos,
    /// Single flight: a miss for a key already being fetched waits for that fetch.
    pub coalesce: bool,
    /// A fetch that fails is answered with the expired entry, if there is one.
    pub serve_stale: bool,
}

/// How a group of calls made together ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wait {
    /// Every call must succeed (degraded counts as success).
    All,
    /// The first `k` successes; the rest are cancelled.
    Quorum(u32),
    /// The first success; the rest are cancelled.
    FirstSuccess,
    /// Nothing: the calls are made and the job goes on at once (fire-and-forget: an
    /// event published, a cache warmed, an audit log written). Their outcomes count on
    /// their edge and call site, never in the caller's answer or latency, and nothing
    /// cancels them when the caller ends.
    Detached,
    /// Exactly one of the calls, chosen by their probabilities (which sum to at most
    /// 1; past the sum, none): alternatives, such as a cache hit's and a miss's
    /// calls, that never happen together. The chosen call is waited for.
    OneOf,
}

/// One step of an endpoint.
#[derive(Clone, Debug)]
pub enum Step {
    /// Local work on the request's worker.
    Work(Distribution),
    /// Calls `call_sites[first_call .. first_call + calls]` made together.
    Calls {
        /// The first call site.
        first_call: u32,
        /// How many call sites.
        calls: u32,
        /// What the step waits for.
        wait: Wait,
    },
    /// One of several step sequences, by their probabilities (`alternatives[
    /// first_alternative ..][.. alternatives]`; past their sum, none): what an endpoint
    /// does in each of its call patterns — a cache hit's short work and a miss's longer
    /// work and call. Each sequence ends with a [`Step::Jump`] to `end` (the last may
    /// fall through to it).
    Branch {
        /// The first alternative in [`GraphParams::alternatives`].
        first_alternative: u32,
        /// How many alternatives.
        alternatives: u32,
        /// The step after the branch.
        end: u32,
    },
    /// Go on at step `to` (the end of a branch's alternative).
    Jump {
        /// The next step.
        to: u32,
    },
}

/// One alternative of a [`Step::Branch`]: taken with `probability`, it starts at step
/// `start`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Alternative {
    /// The chance it is taken.
    pub probability: f64,
    /// Its first step.
    pub start: u32,
}

/// One place where an endpoint calls another.
#[derive(Clone, Copy, Debug)]
pub struct CallSite {
    /// The endpoint called.
    pub endpoint: u32,
    /// The edge the call travels along.
    pub edge: u32,
    /// The call is made with this probability (1 = always).
    pub probability: f64,
}

/// How a caller calls a callee service: the client side of every call along it.
#[derive(Clone, Debug)]
pub struct EdgeParams {
    /// `None`: the workload's clients.
    pub from: Option<u32>,
    /// The callee service.
    pub to: u32,
    /// One way; drawn for the request and again for the answer.
    pub network: Option<Distribution>,
    /// Per attempt.
    pub timeout: Option<Nanos>,
    /// Per attempt, from the callee's running latency quantile (instead of `timeout`).
    pub adaptive_timeout: Option<AdaptiveTimeoutConfig>,
    /// A call gets what is left of its caller's deadline, and work whose deadline has
    /// passed is not started.
    pub propagate_deadline: bool,
    /// Attempts in all, the first included.
    pub max_attempts: u32,
    /// The wait before each retry.
    pub backoff: Backoff,
    /// Which failures are retried.
    pub retry_on: FailureSet,
    /// A template: each replica clones its own.
    pub budget: RetryBudget,
    /// A breaker on the edge; `None`: none.
    pub breaker: Option<BreakerConfig>,
    /// Hedging on the edge; `None`: none.
    pub hedge: Option<HedgeConfig>,
    /// Hedges ask the retry budget, as retries do.
    pub hedge_uses_budget: bool,
    /// How the callee's instance is chosen.
    pub balance: Balance,
    /// Ejects callee instances that fail in a row; `None`: none. The balancer skips
    /// ejected instances (consistent hashing does not: its ring decides).
    pub outlier: Option<OutlierConfig>,
    /// A connection pool per caller instance (one for a workload's clients); `None`:
    /// none. An attempt holds a connection from when it is sent until its caller stops
    /// waiting for it.
    pub pool: Option<PoolConfig>,
    /// Failures answered by a cheap fallback: the call succeeds degraded.
    pub fallback_on: FailureSet,
}

/// Where requests come from.
#[derive(Clone, Debug)]
pub struct WorkloadParams {
    /// The endpoint its requests call.
    pub endpoint: u32,
    /// The edge from the clients to the entry service.
    pub edge: u32,
    /// How its requests arrive.
    pub arrivals: WorkloadArrivals,
    /// The client's deadline for the whole request (`None`: none).
    pub deadline: Option<Nanos>,
    /// Answered requests above it are slow (`None`: above the entry's running p99).
    pub slo: Option<Nanos>,
    /// Shares of the four criticality levels (Criticality order), summing to 1.
    pub criticality: [f64; 4],
    /// Distinct request keys (for consistent hashing and caches), uniform unless `zipf`.
    pub keys: u64,
    /// Keys drawn by popularity: Zipf over `keys` keys.
    pub zipf: Option<Zipf>,
}

#[derive(Clone, Debug)]
/// How a workload's requests arrive.
pub enum WorkloadArrivals {
    /// Open loop: a rate, or a `[load]`-style process.
    Open(ArrivalProcess),
    /// Closed loop: `users` who wait for each answer and think for an exponential time.
    Closed {
        /// Users in the loop.
        users: u32,
        /// The mean think time.
        think: Nanos,
    },
}

/// What a fault does.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum FaultKind {
    /// Local work takes `factor` times longer.
    Slowdown {
        /// What local work is multiplied by.
        factor: f64,
    },
    /// Local work takes this much longer.
    Latency {
        /// What is added to local work.
        added: Nanos,
    },
    /// Each answer is an error with this probability.
    Errors {
        /// The probability.
        rate: f64,
    },
    /// The instances crash: their work is lost and they refuse new work until the end.
    Crash,
    /// The instances' caches are emptied at the start (the duration does not matter).
    Flush,
    /// An edge: calls along it time out (`fail_fast` false) or are refused at once.
    Partition {
        /// Refused at once; false: the calls time out.
        fail_fast: bool,
    },
}

/// Where a fault applies.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum FaultTarget {
    /// Instances `first .. first + count` of a service.
    Instances {
        /// The service.
        service: u32,
        /// The first instance.
        first: u32,
        /// How many instances.
        count: u32,
    },
    /// An edge (its index).
    Edge(u32),
}

#[derive(Clone, Copy, Debug, PartialEq)]
/// A fault on instances or an edge, over a window.
pub struct GraphFault {
    /// What it hits.
    pub target: FaultTarget,
    /// What it does.
    pub kind: FaultKind,
    /// When it starts.
    pub start: Nanos,
    /// How long it lasts.
    pub duration: Nanos,
}

/// The whole graph for one replica.
#[derive(Clone, Debug)]
pub struct GraphParams {
    /// The services, by index.
    pub services: Vec<ServiceParams>,
    /// The endpoints, by index.
    pub endpoints: Vec<EndpointParams>,
    /// Every endpoint's steps.
    pub steps: Vec<Step>,
    /// Every step's call sites.
    pub call_sites: Vec<CallSite>,
    /// Every branch's alternatives.
    pub alternatives: Vec<Alternative>,
    /// The edges, by index.
    pub edges: Vec<EdgeParams>,
    /// The workloads, by index.
    pub workloads: Vec<WorkloadParams>,
    /// The faults, in time order.
    pub faults: Vec<GraphFault>,
    /// Calls nest at most this deep (a cycle needs it; a deeper call fails as refused).
    pub max_depth: u32,
    /// Nothing before this is counted.
    pub warmup: Nanos,
    /// When the replica ends.
    pub horizon: Nanos,
    /// Width of a time-series bucket.
    pub bucket: Nanos,
    /// Recovery needs the queues back in their band for this long.
    pub recovery_hold: Nanos,
}
