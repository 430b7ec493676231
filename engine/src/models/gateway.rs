//! The LLM gateway (seed 001): a chat product's turns fan out into LLM calls of five
//! classes across metered model tiers ([`super::provider`]), and every call passes a
//! configurable stack of defences built from [`crate::policy`].
//!
//! **A turn.** guard → rewrite (for its share of turns) → answer, or think for the
//! hard share → title (for its share, fire and forget, after the turn is answered).
//! A turn is answered when its answer path succeeds: answer, think, think's
//! downgrade to an answer call, or — if configured — answer's fallback call on
//! another tier. Without a fallback, a failed guard, rewrite, think or answer call
//! fails the turn.
//!
//! **The stack.** `gates` lists the gates outermost first. Each wraps the ones after
//! it, so a gate above the attempt loop ([`Gate::Retry`]) is passed once per call and
//! sees the call's final outcome, and a gate below it is passed once per attempt and
//! sees each attempt (so a quota gate below the loop takes a fresh reservation per
//! attempt, and a breaker below it refuses retries while open). A refusal inside
//! the loop is an attempt failure the loop may retry; a refusal above it ends the
//! call. The edges of seed 001 are the feedback at release: attempt outcomes minus
//! 429s go to the breaker, client-observed time to first token to the limiter,
//! unused `max_tokens` back to the quota meter, and quota pressure to admission.
//!
//! * ① admission: a product ladder (each class is refused from its own rung;
//!   pressure = max(tightest client meter's used fraction, the busiest tier's
//!   attempts in flight ÷ its classes' bulkhead slots)), deadline feasibility against
//!   the class's observed latency, tenant share.
//! * ② bulkhead per class: slots, a bounded queue (LIFO by default), CoDel, a
//!   deadline sweep every 100 ms.
//! * ③ adaptive concurrency per class (or per tier: the pooling bug), fed the time
//!   to first token the client saw (the whole response for a call that is not
//!   streamed), averaged over windows of samples; calls wait for it FIFO or LIFO
//!   (as the bulkhead), up to the bulkhead's queue size and their deadline. Timeouts and
//!   529s are drops; 429s (quota, not congestion) and 500s feed it nothing.
//! * ④ breaker per class; 429s are not failures unless `count_rate_limited`.
//! * ⑤ client quota meters per tier (one fleet-wide set when coordinated, one per
//!   instance when split): reserve `max_tokens`, reconcile on completion (unless
//!   reconciliation is switched off), wait up to the longest wait.
//! * ⑥ the attempt loop: connect / first-token / inter-token / total timeouts,
//!   classification, full-jitter backoff with retry-after as a floor, a retry budget,
//!   no retry of a stream past the delivered fraction, never past the call deadline.
//! * ⑦ fallback: a failed call of a class with a fallback is served its fallback.
//!
//! The **naive client** has none of that: up to N immediate attempts and one global
//! timeout per call.
//!
//! **Money.** An attempt that reached a server slot is billed its input and the
//! output generated until it ended (a client timeout cancels the generation); 429s,
//! 529s and 500s are not billed. Spend on attempts that succeeded is useful; the
//! rest is wasted.
//!
//! Turns arrive (Poisson) until the horizon; the replica then runs until every call
//! has ended, so every counted turn is either answered or failed, and every counted
//! call is served or failed for exactly one reason (asserted).

use std::collections::VecDeque;

use hdrhistogram::Histogram;

use crate::histogram::LatencyHistogram;
use crate::policy::admission::{Admission, AdmissionController, AdmissionRequest, Ladder};
use crate::policy::backoff::Backoff;
use crate::policy::breaker::{BreakerConfig, CircuitBreaker, Permit};
use crate::policy::bulkhead::{Acquire, Bulkhead, BulkheadConfig, CoDelConfig, Dropped, QueueOrder, Waiter};
use crate::policy::classify::{Outcome, RetryClassifier, RetryDecision};
use crate::policy::limiter::{ConcurrencyLimiter, LimiterKind, SampleWindow, Signal};
use crate::policy::quota::{QuotaConfig, QuotaLimits, QuotaMeter, Reservation, Reserve};
use crate::policy::retry_budget::RatioBudget;
use crate::policy::Criticality;
use crate::rng::{RngStream, StreamPurpose};
use crate::sim::{Model, Scheduler, Simulation};
use crate::slab::{Slab, SlabKey};
use crate::time::{secs_to_nanos, Nanos, NANOS_PER_SEC};

use super::provider::{Arrival, CallSpec, ProviderTier, ServicePlan, TierSpec};

const ARRIVALS: StreamPurpose = StreamPurpose::named("gateway.arrivals");
const TURNS: StreamPurpose = StreamPurpose::named("gateway.turns");
const TOKENS: StreamPurpose = StreamPurpose::named("gateway.tokens");
const PROVIDER: StreamPurpose = StreamPurpose::named("gateway.provider");
const BACKOFF: StreamPurpose = StreamPurpose::named("gateway.backoff");
const LIMITER: StreamPurpose = StreamPurpose::named("gateway.limiter");

/// The call classes, in the order of every per-class array.
pub const CLASS_NAMES: [&str; CLASSES] = ["guard", "rewrite", "answer", "think", "title", "answer_fallback"];
pub const CLASSES: usize = 6;
pub const GUARD: usize = 0;
pub const REWRITE: usize = 1;
pub const ANSWER: usize = 2;
pub const THINK: usize = 3;
pub const TITLE: usize = 4;
/// Answer re-sent to another tier when answer fails (only with a configured fallback tier).
pub const ANSWER_FALLBACK: usize = 5;

/// How often bulkhead queues are swept for expired deadlines.
const SWEEP_PERIOD: Nanos = NANOS_PER_SEC / 10;

/// The defences, in the order a scenario lists them (outermost first).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gate {
    Admission,
    Bulkhead,
    Adaptive,
    Breaker,
    Quota,
    Retry,
    Fallback,
}

/// Per-attempt timeouts. Not streamed: the client sees nothing before the whole
/// response, so "first token" and "total" both bound the response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timeouts {
    /// Until the provider answers or gives the call a server slot.
    pub connect: Nanos,
    pub first_token: Nanos,
    /// The longest gap between streamed tokens.
    pub inter_token: Option<Nanos>,
    pub total: Nanos,
}

/// One call class.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ClassParams {
    /// Index into [`GatewayParams::tiers`].
    pub tier: usize,
    /// Probability that a turn makes this call (rewrite, title; think: the hard share).
    pub share: f64,
    pub input_tokens: (f64, f64),
    pub output_tokens: (f64, f64),
    pub max_tokens: u64,
    pub streamed: bool,
    pub deadline: Nanos,
    pub timeouts: Timeouts,
    pub max_attempts: u32,
    /// The ladder refuses this class from this rung (1..=4; 5: never).
    pub shed_from_rung: u8,
    /// The class has a fallback (serve flagged, raw query, downgrade, batch queue…).
    pub has_fallback: bool,
    pub bulkhead_slots: u32,
    pub bulkhead_queue: u32,
}

/// A tier: the provider's side plus prices.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TierParams {
    pub spec: TierSpec,
    pub usd_per_mtok_in: f64,
    pub usd_per_mtok_out: f64,
    /// Healthy 500 rate (the fixture's 0.002).
    pub error_rate: f64,
}

/// What an incident does to a tier.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum IncidentKind {
    /// Health 0.2, error rate 0.25.
    Brownout,
    /// Health 0.05, error rate 1.0.
    Outage,
    /// Health `scale`, healthy error rate.
    CapacityStep { scale: f64 },
}

/// An incident on one tier over [start, end).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Incident {
    pub tier: usize,
    pub kind: IncidentKind,
    pub start: Nanos,
    pub end: Nanos,
}

/// Who makes the calls.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Client {
    /// The configured gates.
    Stack,
    /// Up to `attempts` immediate attempts on any failure, one `timeout` per call.
    Naive { attempts: u32, timeout: Nanos },
}

/// One limiter per class, or one per tier (the pooling bug).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LimiterScope {
    Class,
    Tier,
}

/// Everything one replica needs.
#[derive(Clone, Debug)]
pub struct GatewayParams {
    pub tiers: Vec<TierParams>,
    /// [`CLASS_NAMES`] order; [`ANSWER_FALLBACK`] is used only when `answer_fallback`.
    pub classes: [ClassParams; CLASSES],
    pub answer_fallback: bool,
    pub turns_per_s: f64,
    pub tenants: u32,
    /// Share of turns from tenant 0 (the rest spread evenly over the others); 0 with
    /// one tenant.
    pub hot_tenant_share: f64,
    /// Gateway instances; turns are spread uniformly (only a split quota notices).
    pub instances: u32,
    pub client: Client,
    pub gates: Vec<Gate>,
    pub ladder: Ladder,
    pub limiter: LimiterKind,
    pub limiter_scope: LimiterScope,
    /// Learn from windows of samples (Netflix's WindowedLimit); `None`: from every sample.
    pub limiter_window: Option<SampleWindow>,
    pub breaker: BreakerConfig,
    pub quota: QuotaConfig,
    pub reconcile: bool,
    /// Ratio retry budget (fraction of successes); `None`: unbudgeted.
    pub retry_budget: Option<f64>,
    pub backoff: Backoff,
    pub classifier: RetryClassifier,
    pub no_retry_past_delivered: f64,
    pub bulkhead_order: QueueOrder,
    pub codel: Option<CoDelConfig>,
    pub incidents: Vec<Incident>,
    pub warmup: Nanos,
    pub horizon: Nanos,
}

/// Why a counted call ended without being served. Exactly one per failed call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Reason {
    AdmissionShed,
    AdmissionInfeasible,
    AdmissionFairShare,
    QueueFull,
    QueueDeadline,
    CoDel,
    Limiter,
    BreakerOpen,
    LocalQuota,
    TimeoutConnect,
    TimeoutFirstToken,
    TimeoutInterToken,
    TimeoutTotal,
    Http429,
    Http529,
    Http500,
}

pub const REASONS: usize = 16;

/// Metric-name suffixes of [`Reason`], in order.
pub const REASON_NAMES: [&str; REASONS] = [
    "admission_shed",
    "admission_infeasible",
    "admission_fair_share",
    "queue_full",
    "queue_deadline",
    "codel_drop",
    "limiter",
    "breaker_open",
    "local_quota",
    "timeout_connect",
    "timeout_first_token",
    "timeout_inter_token",
    "timeout_total",
    "http_429",
    "http_529",
    "http_500",
];

impl Reason {
    /// A refusal by a local gate (as opposed to the provider or a timeout).
    pub fn is_local(self) -> bool {
        (self as u8) <= Reason::LocalQuota as u8
    }

    fn outcome(self) -> Outcome {
        match self {
            Reason::Http429 => Outcome::RateLimited,
            Reason::Http500 => Outcome::ServerError,
            Reason::TimeoutConnect | Reason::TimeoutFirstToken | Reason::TimeoutInterToken | Reason::TimeoutTotal => {
                Outcome::Timeout
            }
            // 529s, and local refusals seen by a loop above the gate: back off and retry.
            _ => Outcome::Overloaded,
        }
    }
}

/// Per-class results (calls counted from the warm-up on).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ClassResults {
    pub offered: u64,
    pub attempts: u64,
    pub retries: u64,
    pub served: u64,
    /// Failed calls that were served their fallback.
    pub fallbacks: u64,
    pub failed: u64,
    /// Failed calls by [`Reason`].
    pub reasons: [u64; REASONS],
    pub retries_denied_by_budget: u64,
    pub useful_usd: f64,
    pub wasted_usd: f64,
    pub tokens_reserved: u64,
    pub tokens_handed_back: u64,
    pub breaker_trips: u64,
    /// Every refusal by the class's breaker — more than the calls it failed when a
    /// loop above it retries into the open circuit.
    pub breaker_refusals: u64,
    pub limit_final: u32,
    pub limit_min: u32,
    pub limit_max: u32,
}

impl ClassResults {
    /// Calls refused by a local gate (admission, queue, limiter, breaker, quota).
    pub fn refused_locally(&self) -> u64 {
        self.reasons[..=Reason::LocalQuota as usize].iter().sum()
    }
}

/// Scalar results of one replica.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GatewayResults {
    pub classes: [ClassResults; CLASSES],
    pub turns_offered: u64,
    pub turns_answered: u64,
    pub turns_failed: u64,
    pub window_s: f64,
    /// p95 of answer's total latency (successful answer calls), seconds; NaN without any.
    pub answer_p95_s: f64,
    /// p95 of every answer call's duration, from entering the stack to its answer or
    /// its failure — what the user waited for either; NaN without any.
    pub answer_call_p95_s: f64,
    pub events: u64,
}

impl GatewayResults {
    pub fn offered_calls(&self) -> u64 {
        self.classes.iter().map(|c| c.offered).sum()
    }
    pub fn attempts(&self) -> u64 {
        self.classes.iter().map(|c| c.attempts).sum()
    }
    pub fn retries(&self) -> u64 {
        self.classes.iter().map(|c| c.retries).sum()
    }
    pub fn useful_usd(&self) -> f64 {
        self.classes.iter().map(|c| c.useful_usd).sum()
    }
    pub fn wasted_usd(&self) -> f64 {
        self.classes.iter().map(|c| c.wasted_usd).sum()
    }
    pub fn reason(&self, reason: Reason) -> u64 {
        self.classes.iter().map(|c| c.reasons[reason as usize]).sum()
    }
}

/// The latency histograms a replica records, in this order.
pub const LATENCY_NAMES: [&str; 11] = [
    "turn_s",
    "guard_ttft_s",
    "guard_total_s",
    "rewrite_ttft_s",
    "rewrite_total_s",
    "answer_ttft_s",
    "answer_total_s",
    "think_ttft_s",
    "think_total_s",
    "title_ttft_s",
    "title_total_s",
];

/// Events (16 bytes).
#[derive(Clone, Copy, Debug)]
pub enum Event {
    TurnArrival,
    /// An attempt's precomputed end (stale unless `ticket` matches).
    AttemptEnd {
        attempt: SlabKey,
        ticket: u32,
    },
    /// A streamed attempt's first token reaches the client.
    FirstToken {
        attempt: SlabKey,
        ticket: u32,
    },
    /// A call resumes its walk down the stack (after a backoff or a quota wait).
    Resume {
        call: SlabKey,
    },
    Sweep,
    Incident {
        index: u16,
        starts: bool,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    Guard,
    Rewrite,
    Main,
}

#[derive(Clone, Copy, Debug)]
struct Turn {
    arrived_at: Nanos,
    stage: Stage,
    hard: bool,
    rewrite: bool,
    title: bool,
    counted: bool,
}

/// How an attempt ends, decided when the provider answers or starts it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ending {
    Success,
    Failed(Reason),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum AttemptState {
    /// Answered at the door (429, 529): never held a slot or a place in the queue.
    Refused,
    /// Waiting for a server slot.
    Queued,
    Started,
    /// The client left while it was queued; the provider will find out when it starts it.
    Abandoned,
}

#[derive(Clone, Copy, Debug)]
struct Attempt {
    call: SlabKey,
    spec: CallSpec,
    tier: u8,
    state: AttemptState,
    ticket: u32,
    sent_at: Nanos,
    /// The client's deadline for this attempt's whole response.
    give_up_at: Nanos,
    ending: Ending,
    retry_after: Option<Nanos>,
    plan: Option<ServicePlan>,
    /// Its time to first token went to the limiter when the token arrived.
    sampled: bool,
}

#[derive(Clone, Copy, Debug)]
struct Call {
    class: u8,
    turn: Option<SlabKey>,
    instance: u16,
    tenant: u16,
    counted: bool,
    started_at: Nanos,
    deadline: Nanos,
    input: u64,
    output: u64,
    /// Next gate to pass.
    pos: u8,
    /// Attempts sent to the provider.
    attempts: u32,
    /// Passes through the attempt loop: attempts sent plus refusals by gates inside
    /// the loop (a retry into an open breaker is a try). `max_attempts` bounds these.
    tries: u32,
    admitted: bool,
    bulkhead: bool,
    limiter: bool,
    permit: Option<Permit>,
    reservation: Option<Reservation>,
    quota_waited: Nanos,
    previous_backoff: Nanos,
    /// The attempt in flight.
    attempt: Option<SlabKey>,
}

/// What an attempt (or a local refusal) tells the gates it passed.
#[derive(Clone, Copy, Debug)]
struct Feedback {
    ending: Ending,
    /// The attempt reached the provider (so it has a latency and an outcome).
    reached_provider: bool,
    /// Client-observed time to first token (the whole response when not streamed).
    sample: Nanos,
    duration: Nanos,
    /// Output tokens the provider generated.
    output_used: u64,
    /// The limiter already learnt this attempt's time to first token.
    sampled: bool,
}

/// The model.
pub struct Gateway<'h> {
    p: GatewayParams,
    arrivals: RngStream,
    turn_rng: RngStream,
    tokens: RngStream,
    provider_rng: RngStream,
    backoff_rng: RngStream,
    limiter_rng: RngStream,
    providers: Vec<ProviderTier>,
    /// `instances × tiers` when split, `tiers` when coordinated.
    meters: Vec<QuotaMeter>,
    admission: AdmissionController,
    bulkheads: Vec<Bulkhead>,
    limiters: Vec<ConcurrencyLimiter>,
    /// Calls waiting for their limiter (its semaphore), with their deadlines.
    limiter_queues: Vec<VecDeque<(SlabKey, Nanos)>>,
    limiter_queue_capacity: Vec<usize>,
    breakers: Vec<CircuitBreaker>,
    budget: Option<RatioBudget>,
    retry_pos: Option<u8>,
    has_fallback_gate: bool,
    turns: Slab<Turn>,
    calls: Slab<Call>,
    attempts: Slab<Attempt>,
    /// Calls handed a bulkhead slot, to continue their walk.
    ready: Vec<SlabKey>,
    /// Waiters the bulkheads dropped.
    dropped: Vec<(SlabKey, Reason)>,
    /// Provider waiters that gave up or were started, to resolve.
    provider_started: Vec<ServicePlan>,
    provider_gave_up: Vec<u64>,
    /// Attempts at the provider, per tier, and the bulkhead slots of the tier's classes.
    in_flight: Vec<u32>,
    tier_slots: Vec<u32>,
    expected_latency: [Nanos; CLASSES],
    sweeping: bool,
    results: GatewayResults,
    /// Per-replica answer latencies for the p95 metrics: 1 µs to 1 h at 1% precision,
    /// 13 KB instead of a full-range latency histogram's 280 KB per replica.
    answer_latency: Histogram<u32>,
    answer_calls: Histogram<u32>,
    histograms: &'h mut [LatencyHistogram],
}

/// The earliest of the timeouts that fire (the first listed wins a tie), or `otherwise`
/// when none fires before it.
fn earliest(candidates: [Option<(Nanos, Reason)>; 3], otherwise: (Nanos, Ending)) -> (Nanos, Ending) {
    let (mut at, mut ending) = otherwise;
    for (time, reason) in candidates.into_iter().flatten() {
        if time < at {
            (at, ending) = (time, Ending::Failed(reason));
        }
    }
    (at, ending)
}

fn replica_histogram() -> Histogram<u32> {
    Histogram::new_with_bounds(1_000, 3_600 * NANOS_PER_SEC, 2).expect("valid bounds")
}

fn tokens(rng: &mut RngStream, (mean, sd): (f64, f64)) -> u64 {
    rng.normal(mean, sd).round().max(1.0) as u64
}

impl<'h> Gateway<'h> {
    /// `histograms` receives [`LATENCY_NAMES`] in order.
    pub fn new(p: GatewayParams, master_seed: u64, replica: u64, histograms: &'h mut [LatencyHistogram]) -> Self {
        assert_eq!(histograms.len(), LATENCY_NAMES.len(), "one histogram per LATENCY_NAMES entry");
        assert!(p.turns_per_s > 0.0 && p.tenants > 0 && p.instances > 0 && !p.tiers.is_empty());
        assert!(p.gates.len() < u8::MAX as usize);
        for (i, gate) in p.gates.iter().enumerate() {
            assert!(!p.gates[..i].contains(gate), "gate {gate:?} listed twice");
        }
        for class in &p.classes {
            assert!(class.tier < p.tiers.len() && class.max_attempts > 0 && class.bulkhead_slots > 0);
        }
        let stack = p.client == Client::Stack;
        let has = |gate| stack && p.gates.contains(&gate);
        let providers = p.tiers.iter().map(|t| ProviderTier::new(t.spec, t.error_rate)).collect();
        let meter_sets = if p.quota.coordinated { 1 } else { p.instances as usize };
        let mut meters = Vec::new();
        if has(Gate::Quota) {
            for _ in 0..meter_sets {
                for tier in &p.tiers {
                    let limits = QuotaLimits {
                        requests_per_minute: tier.spec.rpm,
                        input_tokens_per_minute: tier.spec.itpm,
                        output_tokens_per_minute: tier.spec.otpm,
                    };
                    meters.push(QuotaMeter::new(limits, p.quota));
                }
            }
        }
        let in_flight_capacity: u32 = p.classes.iter().map(|c| c.bulkhead_slots).sum();
        let in_use = if p.answer_fallback { CLASSES } else { ANSWER_FALLBACK };
        let tier_slots = (0..p.tiers.len())
            .map(|tier| p.classes[..in_use].iter().filter(|c| c.tier == tier).map(|c| c.bulkhead_slots).sum())
            .collect();
        let bulkheads = p
            .classes
            .iter()
            .map(|c| {
                Bulkhead::new(BulkheadConfig {
                    slots: c.bulkhead_slots,
                    queue_capacity: c.bulkhead_queue,
                    order: p.bulkhead_order,
                    codel: p.codel,
                })
            })
            .collect();
        let limiter_count = match p.limiter_scope {
            LimiterScope::Class => CLASSES,
            LimiterScope::Tier => p.tiers.len(),
        };
        let limiter_queue_capacity: Vec<usize> = (0..limiter_count)
            .map(|limiter| match p.limiter_scope {
                LimiterScope::Class => p.classes[limiter].bulkhead_queue as usize,
                LimiterScope::Tier => {
                    p.classes.iter().filter(|c| c.tier == limiter).map(|c| c.bulkhead_queue as usize).sum()
                }
            })
            .collect();
        let expected_latency = p.classes.map(|c| {
            let tier = &p.tiers[c.tier].spec;
            secs_to_nanos(
                tier.base_latency_s
                    + c.input_tokens.0 / tier.prefill_tokens_per_s
                    + c.output_tokens.0 / tier.decode_tokens_per_s,
            )
        });
        Gateway {
            arrivals: RngStream::derive(master_seed, replica, ARRIVALS),
            turn_rng: RngStream::derive(master_seed, replica, TURNS),
            tokens: RngStream::derive(master_seed, replica, TOKENS),
            provider_rng: RngStream::derive(master_seed, replica, PROVIDER),
            backoff_rng: RngStream::derive(master_seed, replica, BACKOFF),
            limiter_rng: RngStream::derive(master_seed, replica, LIMITER),
            providers,
            meters,
            admission: AdmissionController::new(p.ladder, p.tenants, in_flight_capacity),
            bulkheads,
            limiters: (0..limiter_count)
                .map(|_| match p.limiter_window {
                    Some(window) => ConcurrencyLimiter::windowed(p.limiter, window),
                    None => ConcurrencyLimiter::new(p.limiter),
                })
                .collect(),
            limiter_queues: limiter_queue_capacity.iter().map(|&n| VecDeque::with_capacity(n)).collect(),
            limiter_queue_capacity,
            breakers: (0..CLASSES).map(|_| CircuitBreaker::new(p.breaker)).collect(),
            budget: p.retry_budget.map(|ratio| RatioBudget::new(ratio, 100.0, 10.0)),
            retry_pos: if stack { p.gates.iter().position(|g| *g == Gate::Retry).map(|i| i as u8) } else { None },
            has_fallback_gate: has(Gate::Fallback),
            turns: Slab::with_capacity(1024),
            calls: Slab::with_capacity(2048),
            attempts: Slab::with_capacity(2048),
            ready: Vec::with_capacity(64),
            dropped: Vec::with_capacity(64),
            provider_started: Vec::with_capacity(16),
            provider_gave_up: Vec::with_capacity(16),
            in_flight: vec![0; p.tiers.len()],
            tier_slots,
            expected_latency,
            sweeping: false,
            results: GatewayResults::default(),
            answer_latency: replica_histogram(),
            answer_calls: replica_histogram(),
            histograms,
            p,
        }
    }

    /// Runs the replica to the end and returns its results.
    pub fn run(self) -> GatewayResults {
        let mut simulation = self.into_simulation();
        // Arrivals stop at the horizon; everything in flight then runs to its end.
        simulation.run_until(Nanos::MAX);
        let events = simulation.events_handled();
        simulation.model.finish(events)
    }

    /// The model in a kernel with its first arrival, incidents and sweeps scheduled.
    pub fn into_simulation(self) -> Simulation<Self> {
        let mut simulation = Simulation::new(self, 4096);
        let first = simulation.model.interarrival();
        simulation.scheduler().at(first, Event::TurnArrival);
        for index in 0..simulation.model.p.incidents.len() {
            let Incident { start, end, .. } = simulation.model.p.incidents[index];
            simulation.scheduler().at(start, Event::Incident { index: index as u16, starts: true });
            simulation.scheduler().at(end, Event::Incident { index: index as u16, starts: false });
        }
        if simulation.model.gate_on(Gate::Bulkhead) {
            simulation.model.sweeping = true;
            simulation.scheduler().at(SWEEP_PERIOD, Event::Sweep);
        }
        simulation
    }

    fn gate_on(&self, gate: Gate) -> bool {
        self.p.client == Client::Stack && self.p.gates.contains(&gate)
    }

    fn interarrival(&mut self) -> Nanos {
        secs_to_nanos(self.arrivals.exponential(self.p.turns_per_s))
    }

    /// The results once the simulation has drained (asserts that it has).
    pub fn finish(mut self, events: u64) -> GatewayResults {
        debug_assert!(self.calls.is_empty() && self.turns.is_empty(), "the replica drained");
        for (class, name) in CLASS_NAMES.iter().enumerate() {
            let limiter = &self.limiters[self.limiter_index(class)];
            let results = &mut self.results.classes[class];
            results.limit_final = limiter.limit();
            results.limit_min = limiter.lowest_limit();
            results.limit_max = limiter.highest_limit();
            results.breaker_trips = self.breakers[class].counters().trips;
            results.breaker_refusals = self.breakers[class].counters().refusals;
            let accounted: u64 = results.reasons.iter().sum();
            assert_eq!(results.failed, accounted, "{name}: every failed call has one reason");
            assert_eq!(results.offered, results.served + results.failed, "{name}: calls drained");
        }
        let r = &mut self.results;
        r.events = events;
        r.window_s = (self.p.horizon - self.p.warmup) as f64 / NANOS_PER_SEC as f64;
        assert_eq!(r.turns_offered, r.turns_answered + r.turns_failed, "turns drained");
        let p95 = |h: &Histogram<u32>| {
            if h.is_empty() {
                f64::NAN
            } else {
                h.value_at_quantile(0.95) as f64 / NANOS_PER_SEC as f64
            }
        };
        r.answer_p95_s = p95(&self.answer_latency);
        r.answer_call_p95_s = p95(&self.answer_calls);
        self.results
    }

    // ---------------------------------------------------------------- turns

    fn turn_arrival(&mut self, now: Nanos, scheduler: &mut Scheduler<Event>) {
        let next = now + self.interarrival();
        if next < self.p.horizon {
            scheduler.at(next, Event::TurnArrival);
        }
        let c = &self.p.classes;
        let (rewrite, hard, title) = (
            self.turn_rng.bernoulli(c[REWRITE].share),
            self.turn_rng.bernoulli(c[THINK].share),
            self.turn_rng.bernoulli(c[TITLE].share),
        );
        let instance = self.turn_rng.below(self.p.instances as u64) as u16;
        // Tenant 0 sends `hot_tenant_share` of the turns; the others share the rest.
        let hot = self.turn_rng.bernoulli(self.p.hot_tenant_share);
        let other = self.turn_rng.below(self.p.tenants as u64);
        let tenant = if hot || self.p.tenants == 1 { 0 } else { 1 + other % (self.p.tenants as u64 - 1) } as u16;
        let counted = now >= self.p.warmup;
        self.results.turns_offered += counted as u64;
        let turn = self.turns.insert(Turn { arrived_at: now, stage: Stage::Guard, hard, rewrite, title, counted });
        self.start_call(now, GUARD, Some(turn), instance, tenant, scheduler);
    }

    /// A turn's call ended: move the turn on.
    fn turn_step(
        &mut self,
        now: Nanos,
        key: SlabKey,
        call: &Call,
        served: bool,
        fallback: bool,
        scheduler: &mut Scheduler<Event>,
    ) {
        let class = call.class as usize;
        let turn = *self.turns.get(key).expect("a live turn");
        let (instance, tenant) = (call.instance, call.tenant);
        let next = match (turn.stage, class) {
            (Stage::Guard, GUARD) | (Stage::Rewrite, REWRITE) if served || fallback => {
                if turn.stage == Stage::Guard && turn.rewrite {
                    Some((Stage::Rewrite, REWRITE))
                } else {
                    Some((Stage::Main, if turn.hard { THINK } else { ANSWER }))
                }
            }
            (Stage::Main, THINK) if !served && fallback => Some((Stage::Main, ANSWER)),
            (Stage::Main, ANSWER) if !served && fallback && self.p.answer_fallback => {
                Some((Stage::Main, ANSWER_FALLBACK))
            }
            (Stage::Main, _) if served => {
                self.end_turn(now, key, true);
                if turn.title {
                    self.start_call(now, TITLE, None, instance, tenant, scheduler);
                }
                return;
            }
            _ => None,
        };
        match next {
            Some((stage, class)) => {
                self.turns.get_mut(key).expect("live").stage = stage;
                self.start_call(now, class, Some(key), instance, tenant, scheduler);
            }
            None => self.end_turn(now, key, false),
        }
    }

    fn end_turn(&mut self, now: Nanos, key: SlabKey, answered: bool) {
        let turn = self.turns.remove(key).expect("a live turn");
        if turn.counted {
            if answered {
                self.results.turns_answered += 1;
                self.histograms[0].record(now - turn.arrived_at);
            } else {
                self.results.turns_failed += 1;
            }
        }
    }

    // ---------------------------------------------------------------- calls

    fn start_call(
        &mut self,
        now: Nanos,
        class: usize,
        turn: Option<SlabKey>,
        instance: u16,
        tenant: u16,
        scheduler: &mut Scheduler<Event>,
    ) {
        let params = self.p.classes[class];
        // Common random numbers: the tokens are the call's, whatever the stack does.
        let input = tokens(&mut self.tokens, params.input_tokens);
        let output = tokens(&mut self.tokens, params.output_tokens).min(params.max_tokens);
        let counted = now >= self.p.warmup;
        self.results.classes[class].offered += counted as u64;
        let deadline = match self.p.client {
            Client::Stack => now + params.deadline,
            Client::Naive { timeout, .. } => now + timeout,
        };
        let call = self.calls.insert(Call {
            class: class as u8,
            turn,
            instance,
            tenant,
            counted,
            started_at: now,
            deadline,
            input,
            output,
            pos: 0,
            attempts: 0,
            tries: 0,
            admitted: false,
            bulkhead: false,
            limiter: false,
            permit: None,
            reservation: None,
            quota_waited: 0,
            previous_backoff: 0,
            attempt: None,
        });
        self.walk(now, call, scheduler);
    }

    fn limiter_index(&self, class: usize) -> usize {
        match self.p.limiter_scope {
            LimiterScope::Class => class,
            LimiterScope::Tier => self.p.classes[class].tier,
        }
    }

    fn meter_index(&self, call: &Call) -> usize {
        let tier = self.p.classes[call.class as usize].tier;
        let set = if self.p.quota.coordinated { 0 } else { call.instance as usize };
        set * self.p.tiers.len() + tier
    }

    /// Pressure: the tightest of the instance's quota meters (used fraction) or the
    /// busiest tier's attempts in flight ÷ its classes' bulkhead slots, whichever is higher.
    fn pressure(&mut self, now: Nanos, instance: u16) -> f64 {
        let in_flight = self
            .in_flight
            .iter()
            .zip(&self.tier_slots)
            .map(|(&n, &slots)| n as f64 / slots.max(1) as f64)
            .fold(0.0, f64::max);
        let tiers = self.p.tiers.len();
        let set = if self.p.quota.coordinated { 0 } else { instance as usize };
        let meters = self.meters.iter_mut().skip(set * tiers).take(tiers);
        meters.fold(in_flight, |pressure, meter| pressure.max(meter.pressure(now)))
    }

    /// Passes the call through the gates from `pos` on; sends an attempt when all are passed.
    fn walk(&mut self, now: Nanos, key: SlabKey, scheduler: &mut Scheduler<Event>) {
        let Client::Stack = self.p.client else {
            return self.send(now, key, scheduler);
        };
        loop {
            let call = *self.calls.get(key).expect("a live call");
            let Some(&gate) = self.p.gates.get(call.pos as usize) else {
                return self.send(now, key, scheduler);
            };
            let class = call.class as usize;
            let refusal = match gate {
                Gate::Admission => {
                    let rung = self.p.classes[class].shed_from_rung;
                    // Pressure only matters to a class on the ladder, or to the tenant share.
                    let needs_pressure = rung <= 4 || self.p.tenants > 1;
                    let pressure = if needs_pressure { self.pressure(now, call.instance) } else { 0.0 };
                    let request = AdmissionRequest {
                        criticality: Criticality::CriticalPlus, // the product ladder decides, by class
                        tenant: call.tenant as u32,
                        deadline: call.deadline,
                        expected_latency: self.expected_latency[class],
                    };
                    match self.admission.admit_from_rung(now, request, pressure, rung) {
                        Admission::Admitted => {
                            self.calls.get_mut(key).expect("live").admitted = true;
                            None
                        }
                        Admission::Shed { .. } => Some(Reason::AdmissionShed),
                        Admission::Infeasible => Some(Reason::AdmissionInfeasible),
                        Admission::OverFairShare => Some(Reason::AdmissionFairShare),
                    }
                }
                Gate::Bulkhead => match self.bulkheads[class].try_acquire(now, key.to_bits(), call.deadline) {
                    Acquire::Granted => {
                        self.calls.get_mut(key).expect("live").bulkhead = true;
                        None
                    }
                    Acquire::Queued => return self.keep_sweeping(now, scheduler), // a release or a sweep ends the wait
                    Acquire::QueueFull => Some(Reason::QueueFull),
                },
                Gate::Adaptive => {
                    let limiter = self.limiter_index(class);
                    if self.limiters[limiter].try_acquire() {
                        self.calls.get_mut(key).expect("live").limiter = true;
                        None
                    } else if self.limiter_queues[limiter].len() < self.limiter_queue_capacity[limiter] {
                        // The limit is a semaphore: wait for a completion to free a place.
                        self.limiter_queues[limiter].push_back((key, call.deadline));
                        return self.keep_sweeping(now, scheduler);
                    } else {
                        Some(Reason::Limiter)
                    }
                }
                Gate::Breaker => match self.breakers[class].try_acquire(now) {
                    Some(permit) => {
                        self.calls.get_mut(key).expect("live").permit = Some(permit);
                        None
                    }
                    None => Some(Reason::BreakerOpen),
                },
                Gate::Quota => {
                    let meter = self.meter_index(&call);
                    let max_tokens = self.p.classes[class].max_tokens;
                    match self.meters[meter].reserve(now, call.input, max_tokens) {
                        Reserve::Granted(reservation) => {
                            if call.counted {
                                self.results.classes[class].tokens_reserved += max_tokens;
                            }
                            self.calls.get_mut(key).expect("live").reservation = Some(reservation);
                            None
                        }
                        Reserve::Wait(wait) if call.quota_waited + wait <= self.p.quota.longest_wait => {
                            self.calls.get_mut(key).expect("live").quota_waited += wait;
                            scheduler.at(now + wait, Event::Resume { call: key });
                            return;
                        }
                        Reserve::Wait(_) | Reserve::Refused { .. } => Some(Reason::LocalQuota),
                    }
                }
                Gate::Retry | Gate::Fallback => None,
            };
            match refusal {
                None => self.calls.get_mut(key).expect("live").pos += 1,
                Some(reason) => return self.refused(now, key, reason, scheduler),
            }
        }
    }

    /// A gate at the call's `pos` refused it.
    fn refused(&mut self, now: Nanos, key: SlabKey, reason: Reason, scheduler: &mut Scheduler<Event>) {
        debug_assert!(reason.is_local());
        let feedback = Feedback {
            ending: Ending::Failed(reason),
            reached_provider: false,
            sample: 0,
            duration: 0,
            output_used: 0,
            sampled: false,
        };
        self.attempt_over(now, key, feedback, None, scheduler);
    }

    /// Sends the call's attempt to its tier.
    fn send(&mut self, now: Nanos, key: SlabKey, scheduler: &mut Scheduler<Event>) {
        let call = self.calls.get_mut(key).expect("a live call");
        call.attempts += 1;
        let (class, counted, attempts) = (call.class as usize, call.counted, call.attempts);
        let params = self.p.classes[class];
        let give_up_at = match self.p.client {
            Client::Naive { .. } => call.deadline,
            // Without the attempt loop there are no attempt timeouts, only the deadline.
            Client::Stack if self.retry_pos.is_none() => call.deadline,
            Client::Stack => (now + params.timeouts.total).min(call.deadline),
        };
        let spec =
            CallSpec { id: 0, input_tokens: call.input, output_tokens: call.output, max_tokens: params.max_tokens };
        let results = &mut self.results.classes[class];
        if counted {
            results.attempts += 1;
            results.retries += (attempts > 1) as u64;
        }
        let tier = params.tier;
        let attempt = self.attempts.insert(Attempt {
            call: key,
            spec,
            tier: tier as u8,
            state: AttemptState::Queued,
            ticket: 0,
            sent_at: now,
            give_up_at,
            ending: Ending::Success,
            retry_after: None,
            plan: None,
            sampled: false,
        });
        let spec = CallSpec { id: attempt.to_bits(), ..spec };
        self.attempts.get_mut(attempt).expect("live").spec = spec;
        self.calls.get_mut(key).expect("live").attempt = Some(attempt);
        self.in_flight[tier] += 1;
        match self.providers[tier].arrive(now, spec, &mut self.provider_rng) {
            Arrival::RateLimited { respond_at, retry_after } => {
                self.attempts.get_mut(attempt).expect("live").state = AttemptState::Refused;
                self.resolve(attempt, Ending::Failed(Reason::Http429), respond_at, Some(retry_after), scheduler)
            }
            Arrival::Overloaded { respond_at, retry_after } => {
                self.attempts.get_mut(attempt).expect("live").state = AttemptState::Refused;
                self.resolve(attempt, Ending::Failed(Reason::Http529), respond_at, Some(retry_after), scheduler)
            }
            Arrival::Started(plan) => self.started(now, plan, scheduler),
            Arrival::Queued { gives_up_at } => {
                let connect = Some((now + params.timeouts.connect, Reason::TimeoutConnect))
                    .filter(|_| self.p.client == Client::Stack && self.retry_pos.is_some());
                // The provider's queue giving up reads as a 529; on a tie it answers first.
                let candidates = [connect, Some((give_up_at, Reason::TimeoutTotal)), None];
                let (at, ending) = earliest(candidates, (gives_up_at, Ending::Failed(Reason::Http529)));
                self.resolve(attempt, ending, at, None, scheduler);
            }
        }
    }

    /// Records how and when an attempt will end and schedules that end.
    fn resolve(
        &mut self,
        key: SlabKey,
        ending: Ending,
        at: Nanos,
        retry_after: Option<Nanos>,
        scheduler: &mut Scheduler<Event>,
    ) {
        let attempt = self.attempts.get_mut(key).expect("a live attempt");
        attempt.ticket = attempt.ticket.wrapping_add(1);
        attempt.ending = ending;
        attempt.retry_after = retry_after;
        scheduler.at(at, Event::AttemptEnd { attempt: key, ticket: attempt.ticket });
    }

    /// The provider gave attempt `plan.id` a server slot: work out how it ends for the client.
    fn started(&mut self, now: Nanos, plan: ServicePlan, scheduler: &mut Scheduler<Event>) {
        let key = SlabKey::from_bits(plan.id);
        let attempt = self.attempts.get_mut(key).expect("a started attempt is live");
        if attempt.state == AttemptState::Abandoned {
            // The client left while it queued: the provider drops it at once.
            let spec = CallSpec { output_tokens: 0, ..attempt.spec };
            let tier = attempt.tier as usize;
            self.attempts.remove(key);
            self.provider_finish(now, tier, spec, false);
            return;
        }
        debug_assert_eq!(attempt.state, AttemptState::Queued);
        attempt.state = AttemptState::Started;
        attempt.plan = Some(plan);
        let call = self.calls.get(attempt.call).expect("an attempt's call is live");
        let params = self.p.classes[call.class as usize];
        let timed = self.p.client == Client::Stack && self.retry_pos.is_some();
        let timeouts = params.timeouts;
        // What the client sees first: the first token of a stream, else the whole response.
        let visible = if params.streamed { plan.first_token_at } else { plan.done_at };
        let first_token = (attempt.sent_at + timeouts.first_token, Reason::TimeoutFirstToken);
        let first_token = Some(first_token).filter(|&(limit, _)| timed && visible > limit);
        let gap = (plan.done_at - plan.first_token_at) / attempt.spec.output_tokens.max(1);
        let inter_token = timeouts
            .inter_token
            .filter(|&limit| timed && params.streamed && gap > limit)
            .map(|limit| (plan.first_token_at + limit, Reason::TimeoutInterToken));
        let total = Some((attempt.give_up_at, Reason::TimeoutTotal)).filter(|_| plan.done_at > attempt.give_up_at);
        // On a tie a stream blames the token it waited for; a whole response, the total.
        let candidates = if params.streamed { [first_token, inter_token, total] } else { [total, first_token, None] };
        let completed =
            (plan.done_at, if plan.server_error { Ending::Failed(Reason::Http500) } else { Ending::Success });
        let (at, ending) = earliest(candidates, completed);
        let at = at.max(now);
        self.resolve(key, ending, at, None, scheduler);
        if params.streamed && plan.first_token_at < at {
            let ticket = self.attempts.get(key).expect("live").ticket;
            scheduler.at(plan.first_token_at, Event::FirstToken { attempt: key, ticket });
        }
    }

    /// The first token of a streamed attempt: the limiter learns its latency now, not
    /// when the stream ends.
    fn first_token(&mut self, now: Nanos, key: SlabKey, ticket: u32) {
        let Some(attempt) = self.attempts.get_mut(key) else { return };
        if attempt.ticket != ticket || attempt.state != AttemptState::Started {
            return;
        }
        let call = *self.calls.get(attempt.call).expect("an attempt's call is live");
        if call.limiter {
            attempt.sampled = true;
            let sample = now - attempt.sent_at;
            let index = self.limiter_index(call.class as usize);
            self.limiters[index].observe(now, sample, Signal::Success, &mut self.limiter_rng);
        }
    }

    /// Frees a server slot on `tier`; starts the waiters it hands slots to.
    fn provider_finish(&mut self, now: Nanos, tier: usize, spec: CallSpec, server_error: bool) {
        let mut gave_up = std::mem::take(&mut self.provider_gave_up);
        if let Some(plan) =
            self.providers[tier].finish(now, spec, server_error, &mut self.provider_rng, |id| gave_up.push(id))
        {
            self.provider_started.push(plan);
        }
        for id in gave_up.drain(..) {
            let key = SlabKey::from_bits(id);
            // An abandoned waiter is forgotten; a live one already has its give-up event.
            if self.attempts.get(key).is_some_and(|a| a.state == AttemptState::Abandoned) {
                self.attempts.remove(key);
            }
        }
        self.provider_gave_up = gave_up;
    }

    fn attempt_end(&mut self, now: Nanos, key: SlabKey, ticket: u32, scheduler: &mut Scheduler<Event>) {
        let Some(attempt) = self.attempts.get(key).copied() else { return };
        if attempt.ticket != ticket || attempt.state == AttemptState::Abandoned {
            return;
        }
        self.in_flight[attempt.tier as usize] -= 1;
        let call = self.calls.get(attempt.call).expect("an attempt's call is live");
        let (class, counted) = (call.class as usize, call.counted);
        let tier = attempt.tier as usize;
        let mut feedback = Feedback {
            ending: attempt.ending,
            reached_provider: true,
            sample: now - attempt.sent_at,
            duration: now - attempt.sent_at,
            output_used: 0,
            sampled: attempt.sampled,
        };
        match (attempt.state, attempt.plan) {
            (AttemptState::Started, Some(plan)) => {
                let generated = if now >= plan.done_at {
                    if plan.server_error {
                        0
                    } else {
                        attempt.spec.output_tokens
                    }
                } else if now <= plan.first_token_at {
                    0
                } else {
                    let fraction = (now - plan.first_token_at) as f64 / (plan.done_at - plan.first_token_at) as f64;
                    (attempt.spec.output_tokens as f64 * fraction) as u64
                };
                feedback.output_used = generated;
                let streamed = self.p.classes[class].streamed;
                feedback.sample = if streamed && now >= plan.first_token_at {
                    plan.first_token_at - attempt.sent_at
                } else {
                    now - attempt.sent_at
                };
                // Billing: input once the server started, output as generated; errors are free.
                if counted && !plan.server_error {
                    let t = &self.p.tiers[tier];
                    let usd = (attempt.spec.input_tokens as f64 * t.usd_per_mtok_in
                        + generated as f64 * t.usd_per_mtok_out)
                        / 1e6;
                    let results = &mut self.results.classes[class];
                    if attempt.ending == Ending::Success {
                        results.useful_usd += usd;
                    } else {
                        results.wasted_usd += usd;
                    }
                }
                if attempt.ending == Ending::Success {
                    let total = now - attempt.sent_at;
                    if class < ANSWER_FALLBACK {
                        self.histograms[1 + 2 * class].record(feedback.sample);
                        self.histograms[2 + 2 * class].record(total);
                    }
                    if class == ANSWER && counted {
                        self.answer_latency.saturating_record(total);
                    }
                    let expected = &mut self.expected_latency[class];
                    *expected = (*expected as f64 * 0.9 + total as f64 * 0.1) as Nanos;
                }
                self.attempts.remove(key);
                let spec = CallSpec { output_tokens: generated, ..attempt.spec };
                self.provider_finish(now, tier, spec, plan.server_error && now >= plan.done_at);
            }
            (AttemptState::Refused, _) => {
                self.attempts.remove(key);
            }
            (AttemptState::Queued, _) => {
                // The client (or the provider's queue) gave up while it waited for a slot:
                // it stays in the provider's queue until the provider gets to it.
                self.attempts.get_mut(key).expect("live").state = AttemptState::Abandoned;
            }
            _ => unreachable!("an attempt ends once"),
        }
        let call = attempt.call;
        self.calls.get_mut(call).expect("live").attempt = None;
        self.attempt_over(now, call, feedback, attempt.retry_after, scheduler);
    }

    /// An attempt ended (or a local gate refused the call at `pos`): release the gates
    /// inside the attempt loop, then retry or end the call.
    fn attempt_over(
        &mut self,
        now: Nanos,
        key: SlabKey,
        feedback: Feedback,
        retry_after: Option<Nanos>,
        scheduler: &mut Scheduler<Event>,
    ) {
        let call = *self.calls.get(key).expect("a live call");
        let inside_loop = self.retry_pos.is_some_and(|r| r < call.pos);
        if let Some(retry_pos) = self.retry_pos.filter(|_| inside_loop) {
            self.calls.get_mut(key).expect("live").tries += 1;
            self.release(now, key, retry_pos as usize + 1, call.pos as usize, feedback);
            if let Some(delay) = self.retry_delay(now, key, feedback, retry_after) {
                let call = self.calls.get_mut(key).expect("live");
                call.pos = retry_pos + 1;
                call.previous_backoff = delay;
                call.quota_waited = 0;
                scheduler.at(now + delay, Event::Resume { call: key });
                return;
            }
            self.release(now, key, 0, retry_pos as usize, feedback);
        } else if let Client::Naive { attempts, .. } = self.p.client {
            if let Ending::Failed(reason) = feedback.ending {
                if call.attempts < attempts && !matches!(reason, Reason::TimeoutTotal) && now < call.deadline {
                    return self.send(now, key, scheduler); // again, at once
                }
            }
        } else {
            self.release(now, key, 0, call.pos as usize, feedback);
        }
        self.end_call(now, key, feedback.ending, scheduler);
    }

    /// The wait before the next attempt, or `None` to stop.
    fn retry_delay(
        &mut self,
        now: Nanos,
        key: SlabKey,
        feedback: Feedback,
        retry_after: Option<Nanos>,
    ) -> Option<Nanos> {
        let Ending::Failed(reason) = feedback.ending else { return None };
        let call = *self.calls.get(key).expect("live");
        let class = call.class as usize;
        let params = self.p.classes[class];
        debug_assert!(call.tries >= call.attempts && call.tries > 0);
        if call.tries >= params.max_attempts {
            return None;
        }
        // A stream past this fraction delivered is not worth starting over.
        if params.streamed && feedback.output_used as f64 >= self.p.no_retry_past_delivered * call.output as f64 {
            return None;
        }
        let honoured = match self.p.classifier.classify(reason.outcome()) {
            RetryDecision::Never => return None,
            RetryDecision::RetryAfterServerDelay => retry_after,
            RetryDecision::Retry => None,
        };
        let delay = self.p.backoff.delay(call.tries - 1, call.previous_backoff, honoured, &mut self.backoff_rng);
        if now + delay >= call.deadline {
            return None;
        }
        if let Some(budget) = &mut self.budget {
            if !budget.try_retry() {
                if call.counted {
                    self.results.classes[class].retries_denied_by_budget += 1;
                }
                return None;
            }
        }
        Some(delay)
    }

    /// Releases the gates at positions [from, to) that the call holds, innermost first,
    /// feeding each what the attempt (or the call) taught.
    fn release(&mut self, now: Nanos, key: SlabKey, from: usize, to: usize, feedback: Feedback) {
        let call = *self.calls.get(key).expect("a live call");
        let class = call.class as usize;
        for pos in (from..to.min(self.p.gates.len())).rev() {
            match self.p.gates[pos] {
                Gate::Admission if call.admitted => {
                    self.admission.finished(call.tenant as u32);
                    self.calls.get_mut(key).expect("live").admitted = false;
                }
                Gate::Bulkhead if call.bulkhead => {
                    self.calls.get_mut(key).expect("live").bulkhead = false;
                    let mut dropped = std::mem::take(&mut self.dropped);
                    let handed = self.bulkheads[class].release(now, |waiter: Waiter, why: Dropped| {
                        let reason = match why {
                            Dropped::DeadlineExpired => Reason::QueueDeadline,
                            Dropped::CoDel => Reason::CoDel,
                        };
                        dropped.push((SlabKey::from_bits(waiter.id), reason));
                    });
                    self.dropped = dropped;
                    if let Some(waiter) = handed {
                        let waiting = SlabKey::from_bits(waiter.id);
                        let w = self.calls.get_mut(waiting).expect("a queued call is live");
                        w.bulkhead = true;
                        w.pos += 1;
                        self.ready.push(waiting);
                    }
                }
                Gate::Adaptive if call.limiter => {
                    self.calls.get_mut(key).expect("live").limiter = false;
                    let index = self.limiter_index(class);
                    let limiter = &mut self.limiters[index];
                    // Netflix's listener: success, dropped (timeouts, overload), or ignored —
                    // a 429 is quota, not congestion, and a 500 is an independent error.
                    let signal = match feedback.ending {
                        Ending::Success => Some(Signal::Success),
                        Ending::Failed(Reason::Http429 | Reason::Http500) => None,
                        Ending::Failed(_) => Some(Signal::Dropped),
                    };
                    match signal.filter(|_| feedback.reached_provider && !feedback.sampled) {
                        Some(signal) => limiter.on_complete(now, feedback.sample, signal, &mut self.limiter_rng),
                        None => limiter.abandon(),
                    }
                    self.wake_limiter_waiters(now, index);
                }
                Gate::Breaker => {
                    if let Some(permit) = call.permit {
                        self.calls.get_mut(key).expect("live").permit = None;
                        let breaker = &mut self.breakers[class];
                        if feedback.reached_provider {
                            let outcome = match feedback.ending {
                                Ending::Success => Outcome::Success,
                                Ending::Failed(reason) => reason.outcome(),
                            };
                            breaker.record(now, permit, outcome, feedback.duration);
                        } else {
                            breaker.abandon(permit);
                        }
                    }
                }
                Gate::Quota => {
                    if let Some(reservation) = call.reservation {
                        self.calls.get_mut(key).expect("live").reservation = None;
                        let meter = self.meter_index(&call);
                        let sent = feedback.reached_provider
                            && !matches!(feedback.ending, Ending::Failed(Reason::Http429 | Reason::Http529));
                        if !sent {
                            self.meters[meter].cancel(now, reservation);
                        } else if self.p.reconcile {
                            self.meters[meter].reconcile(now, reservation, feedback.output_used);
                            if call.counted {
                                self.results.classes[class].tokens_handed_back +=
                                    reservation.max_tokens - feedback.output_used.min(reservation.max_tokens);
                            }
                        }
                    }
                }
                _ => {}
            }
        }
    }

    /// Lets waiters through while the limiter has room (LIFO unless the queue order is FIFO).
    fn wake_limiter_waiters(&mut self, now: Nanos, index: usize) {
        while self.limiters[index].in_flight() < self.limiters[index].limit() {
            let queue = &mut self.limiter_queues[index];
            let next = match self.p.bulkhead_order {
                QueueOrder::Fifo => queue.pop_front(),
                _ => queue.pop_back(),
            };
            let Some((key, deadline)) = next else { return };
            if deadline <= now {
                self.dropped.push((key, Reason::Limiter));
                continue;
            }
            let acquired = self.limiters[index].try_acquire();
            debug_assert!(acquired, "the limiter had room");
            let call = self.calls.get_mut(key).expect("a waiting call is live");
            call.limiter = true;
            call.pos += 1;
            self.ready.push(key);
        }
    }

    fn end_call(&mut self, now: Nanos, key: SlabKey, ending: Ending, scheduler: &mut Scheduler<Event>) {
        let call = self.calls.remove(key).expect("a live call");
        debug_assert!(call.attempt.is_none() && !call.admitted && !call.bulkhead && !call.limiter);
        debug_assert!(call.permit.is_none() && call.reservation.is_none());
        let class = call.class as usize;
        let served = ending == Ending::Success;
        let fallback = !served && self.has_fallback_gate && self.p.classes[class].has_fallback;
        if call.counted && class == ANSWER {
            self.answer_calls.saturating_record(now - call.started_at);
        }
        if call.counted {
            let results = &mut self.results.classes[class];
            match ending {
                Ending::Success => results.served += 1,
                Ending::Failed(reason) => {
                    results.failed += 1;
                    results.reasons[reason as usize] += 1;
                    results.fallbacks += fallback as u64;
                }
            }
        }
        if served {
            if let Some(budget) = &mut self.budget {
                budget.on_success();
            }
        }
        if let Some(turn) = call.turn {
            self.turn_step(now, turn, &call, served, fallback, scheduler);
        }
    }

    /// Continues calls handed a bulkhead slot and fails the ones it dropped.
    fn drain_worklists(&mut self, now: Nanos, scheduler: &mut Scheduler<Event>) {
        loop {
            if let Some((key, reason)) = self.dropped.pop() {
                self.refused(now, key, reason, scheduler);
            } else if let Some(key) = self.ready.pop() {
                self.walk(now, key, scheduler);
            } else if let Some(plan) = self.provider_started.pop() {
                self.started(now, plan, scheduler);
            } else {
                return;
            }
        }
    }

    /// Makes sure a sweep is scheduled while anything waits in a queue.
    fn keep_sweeping(&mut self, now: Nanos, scheduler: &mut Scheduler<Event>) {
        if !self.sweeping {
            self.sweeping = true;
            scheduler.at(now + SWEEP_PERIOD, Event::Sweep);
        }
    }

    fn sweep(&mut self, now: Nanos, scheduler: &mut Scheduler<Event>) {
        let mut dropped = std::mem::take(&mut self.dropped);
        for bulkhead in &mut self.bulkheads {
            bulkhead.sweep(now, |waiter, _| dropped.push((SlabKey::from_bits(waiter.id), Reason::QueueDeadline)));
        }
        for queue in &mut self.limiter_queues {
            queue.retain(|&(key, deadline)| {
                let expired = deadline <= now;
                if expired {
                    dropped.push((key, Reason::Limiter));
                }
                !expired
            });
        }
        self.dropped = dropped;
        let queued = self.bulkheads.iter().any(|b| b.queued() > 0) || self.limiter_queues.iter().any(|q| !q.is_empty());
        if now < self.p.horizon || queued {
            scheduler.at(now + SWEEP_PERIOD, Event::Sweep);
        } else {
            self.sweeping = false;
        }
    }

    fn incident(&mut self, index: usize, starts: bool) {
        let incident = self.p.incidents[index];
        let health = match incident.kind {
            IncidentKind::Brownout => (0.2, 0.25),
            IncidentKind::Outage => (0.05, 1.0),
            IncidentKind::CapacityStep { scale } => (scale, self.p.tiers[incident.tier].error_rate),
        };
        self.providers[incident.tier].set_incident(starts.then_some(health));
    }
}

impl Model for Gateway<'_> {
    type Event = Event;

    fn handle(&mut self, now: Nanos, event: Event, scheduler: &mut Scheduler<Event>) {
        match event {
            Event::TurnArrival => self.turn_arrival(now, scheduler),
            Event::AttemptEnd { attempt, ticket } => self.attempt_end(now, attempt, ticket, scheduler),
            Event::FirstToken { attempt, ticket } => self.first_token(now, attempt, ticket),
            Event::Resume { call } => self.walk(now, call, scheduler),
            Event::Sweep => self.sweep(now, scheduler),
            Event::Incident { index, starts } => self.incident(index as usize, starts),
        }
        self.drain_worklists(now, scheduler);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::limiter::{AimdConfig, GradientConfig};

    const S: Nanos = NANOS_PER_SEC;

    /// One generous tier and five classes with fixed token counts (sd 0), so that
    /// token arithmetic is exact; only guard → answer runs unless a test says so.
    fn params(gates: &[Gate]) -> GatewayParams {
        let spec = TierSpec {
            rpm: 1_000_000,
            itpm: 1_000_000_000,
            otpm: 1_000_000_000,
            prefill_tokens_per_s: 10_000.0,
            decode_tokens_per_s: 100.0,
            base_latency_s: 0.1,
            server_slots: 1_000,
        };
        let class = ClassParams {
            tier: 0,
            share: 0.0,
            input_tokens: (1_000.0, 0.0),
            output_tokens: (50.0, 0.0),
            max_tokens: 200,
            streamed: false,
            deadline: 30 * S,
            timeouts: Timeouts { connect: 2 * S, first_token: 10 * S, inter_token: None, total: 20 * S },
            max_attempts: 2,
            shed_from_rung: 5,
            has_fallback: false,
            bulkhead_slots: 500,
            bulkhead_queue: 500,
        };
        let answer = ClassParams { streamed: true, shed_from_rung: 4, ..class };
        GatewayParams {
            tiers: vec![TierParams { spec, usd_per_mtok_in: 1.0, usd_per_mtok_out: 5.0, error_rate: 0.0 }],
            classes: [class, class, answer, class, ClassParams { shed_from_rung: 1, ..class }, answer],
            answer_fallback: false,
            turns_per_s: 20.0,
            tenants: 1,
            hot_tenant_share: 0.0,
            instances: 1,
            client: Client::Stack,
            gates: gates.to_vec(),
            ladder: Ladder::default(),
            limiter: LimiterKind::Fixed { limit: 1_000 },
            limiter_scope: LimiterScope::Class,
            limiter_window: None,
            breaker: BreakerConfig {
                window: crate::policy::breaker::SlidingWindow::Time { window: 60 * S, buckets: 12 },
                minimum_calls: 20,
                failure_rate_threshold: 0.3,
                slow_call_rate_threshold: 2.0,
                slow_call_duration: 20 * S,
                open_duration: 20 * S,
                open_duration_multiplier: 1.0,
                max_open_duration: 20 * S,
                half_open_probes: 3,
                count_rate_limited: false,
            },
            quota: QuotaConfig { headroom: 1.0, longest_wait: 2 * S, instances: 1, coordinated: true },
            reconcile: true,
            retry_budget: None,
            backoff: Backoff::FullJitter { base: S / 10, cap: S },
            classifier: RetryClassifier::default(),
            no_retry_past_delivered: 0.8,
            bulkhead_order: QueueOrder::Lifo,
            codel: None,
            incidents: Vec::new(),
            warmup: 0,
            horizon: 60 * S,
        }
    }

    fn run(p: GatewayParams) -> GatewayResults {
        let mut histograms: Vec<LatencyHistogram> = LATENCY_NAMES.iter().map(|_| LatencyHistogram::new()).collect();
        Gateway::new(p, 7, 0, &mut histograms).run()
    }

    /// The seed's arithmetic for a naive client: with failure probability p and up to
    /// n immediate attempts, attempts per call = (1 − pⁿ)/(1 − p) and a call still
    /// fails with probability pⁿ.
    #[test]
    fn naive_attempts_follow_the_geometric_series() {
        let mut p = params(&[]);
        p.client = Client::Naive { attempts: 3, timeout: 60 * S };
        p.tiers[0].error_rate = 0.3;
        p.turns_per_s = 100.0;
        p.horizon = 200 * S;
        let r = run(p);
        let calls = r.offered_calls() as f64;
        let attempts_per_call = r.attempts() as f64 / calls;
        let expected = (1.0 - 0.3f64.powi(3)) / (1.0 - 0.3);
        assert!((attempts_per_call - expected).abs() < 0.01, "{attempts_per_call} vs {expected}");
        let failed = r.reason(Reason::Http500) as f64 / calls;
        assert!((failed - 0.027).abs() < 0.004, "{failed} vs 0.027");
        // Without a fallback a failed guard fails its turn.
        assert_eq!(r.turns_offered, r.turns_answered + r.turns_failed);
        assert!(r.turns_failed > 0);
    }

    /// ⑥ → ④ minus 429s: on a healthy tier whose request meter is far too small, the
    /// breaker stays closed unless 429s are counted as failures.
    #[test]
    fn rate_limits_reach_the_breaker_only_when_counted() {
        let mut p = params(&[Gate::Breaker, Gate::Retry]);
        p.tiers[0].spec.rpm = 600; // 10 requests/s against about 40 calls/s
        p.classes[GUARD].max_attempts = 1;
        p.classes[ANSWER].max_attempts = 1;
        let excluded = run(p.clone());
        p.breaker.count_rate_limited = true;
        let counted = run(p);
        for r in [&excluded, &counted] {
            assert!(r.reason(Reason::Http429) > 200, "the meter answers 429s: {}", r.reason(Reason::Http429));
        }
        assert_eq!(excluded.classes[GUARD].breaker_trips, 0);
        assert_eq!(excluded.reason(Reason::BreakerOpen), 0);
        assert!(counted.classes[GUARD].breaker_trips > 0);
        assert!(counted.reason(Reason::BreakerOpen) > 200, "{}", counted.reason(Reason::BreakerOpen));
    }

    /// ⑥ → ③: a streamed call feeds its limiter the time to first token. AIMD counts a
    /// sample slower than 5 s as a drop: answer streams for 20 s after a 0.2 s first
    /// token and its limit grows; the same call not streamed is sampled at 20 s and
    /// its limit falls.
    #[test]
    fn the_limiter_learns_time_to_first_token_for_streams_and_the_whole_call_otherwise() {
        let mut p = params(&[Gate::Adaptive, Gate::Retry]);
        p.limiter = LimiterKind::Aimd(AimdConfig { initial: 20.0, min: 1.0, max: 1_000.0, ..AimdConfig::default() });
        p.classes[ANSWER].output_tokens = (2_000.0, 0.0);
        p.classes[ANSWER].max_tokens = 4_000;
        p.classes[ANSWER].timeouts.total = 60 * S;
        let streamed = run(p.clone());
        assert!(streamed.classes[ANSWER].limit_max > 20, "{:?}", streamed.classes[ANSWER]);
        assert_eq!(streamed.classes[ANSWER].limit_min, 20);
        p.classes[ANSWER].streamed = false;
        let whole = run(p);
        assert_eq!(whole.classes[ANSWER].limit_max, 20);
        assert!(whole.classes[ANSWER].limit_min < 10, "{:?}", whole.classes[ANSWER]);
    }

    /// ⑥ → ⑤: reconciliation hands back exactly max_tokens − output per served call.
    #[test]
    fn reconciliation_hands_back_the_unused_reservation() {
        let p = params(&[Gate::Quota, Gate::Retry]);
        let r = run(p.clone());
        let guard = r.classes[GUARD];
        assert!(guard.served > 1_000 && guard.failed == 0);
        assert_eq!(guard.tokens_reserved, guard.served * 200);
        assert_eq!(guard.tokens_handed_back, guard.served * 150);
        let mut p = p;
        p.reconcile = false;
        let r = run(p);
        assert_eq!(r.classes[GUARD].tokens_handed_back, 0);
    }

    /// Without reconciliation the output meter holds every reservation in full, so it
    /// caps the rate at OTPM / max_tokens instead of OTPM / output.
    #[test]
    fn an_unreconciled_reservation_throttles_to_otpm_over_max_tokens() {
        let mut p = params(&[Gate::Quota, Gate::Retry]);
        p.tiers[0].spec.otpm = 120_000; // 2,000 tokens/s: 10 calls/s of max 200, 40 of output 50
        p.classes[GUARD].deadline = 3 * S;
        p.warmup = 60 * S; // the meter's one-minute burst is spent by then
        p.horizon = 180 * S;
        let reconciled = run(p.clone());
        p.reconcile = false;
        let unreconciled = run(p);
        let window = 120.0;
        let rate = |r: &GatewayResults| (r.classes[GUARD].served + r.classes[ANSWER].served) as f64 / window;
        // Offered: 20 guard + 20 answer calls/s; reconciled, 40/s fits exactly.
        assert!(rate(&reconciled) > 36.0, "{}", rate(&reconciled));
        assert!((rate(&unreconciled) - 10.0).abs() < 0.5, "{}", rate(&unreconciled));
    }

    /// ⑤ → ①: as the quota meter drains, pressure rises and the ladder sheds the class
    /// on its first rung; with quota to spare it sheds nothing.
    #[test]
    fn quota_pressure_drives_the_ladder() {
        let mut p = params(&[Gate::Admission, Gate::Quota, Gate::Retry]);
        p.classes[TITLE].share = 1.0;
        p.tiers[0].spec.rpm = 1_800; // 30 requests/s: about 60 are offered
        p.horizon = 120 * S;
        let pressed = run(p.clone());
        assert!(pressed.classes[TITLE].reasons[Reason::AdmissionShed as usize] > 100, "{:?}", pressed.classes[TITLE]);
        assert_eq!(pressed.classes[GUARD].reasons[Reason::AdmissionShed as usize], 0, "guard has no rung");
        p.tiers[0].spec.rpm = 60_000;
        let relaxed = run(p);
        assert_eq!(relaxed.reason(Reason::AdmissionShed), 0);
    }

    /// Order is semantics: a quota gate below the attempt loop reserves per attempt,
    /// above it once per call.
    #[test]
    fn a_quota_gate_inside_the_attempt_loop_reserves_per_attempt() {
        let mut p = params(&[Gate::Retry, Gate::Quota]);
        p.tiers[0].error_rate = 0.5;
        let per_attempt = run(p.clone());
        let guard = per_attempt.classes[GUARD];
        assert!(guard.retries > 100);
        assert_eq!(guard.tokens_reserved, guard.attempts * 200);
        p.gates = vec![Gate::Quota, Gate::Retry];
        let per_call = run(p).classes[GUARD];
        assert!(per_call.retries > 100);
        assert_eq!(per_call.tokens_reserved, per_call.offered * 200);
    }

    /// ① tenant share: under pressure, a tenant holding more than its share of the
    /// in-flight capacity is refused; without pressure the share is not enforced.
    #[test]
    fn a_hot_tenant_is_held_to_its_fair_share_under_pressure() {
        let mut p = params(&[Gate::Admission, Gate::Retry]);
        p.tenants = 4;
        p.turns_per_s = 40.0;
        // An overloaded tier (20 slots for about 28 calls in service): attempts pile up
        // and the in-flight pressure passes the first rung at 0.8 × 39 slots.
        p.tiers[0].spec.server_slots = 20;
        for class in &mut p.classes {
            class.bulkhead_slots = 1;
        }
        for class in [GUARD, ANSWER, ANSWER_FALLBACK] {
            p.classes[class].bulkhead_slots = 18; // capacity 57: a fair share of 15 in flight
        }
        p.hot_tenant_share = 0.9;
        let pressed = run(p.clone());
        p.turns_per_s = 5.0; // the tier keeps up: no pressure, no share to enforce
        let relaxed = run(p);
        let share = |r: &GatewayResults| r.reason(Reason::AdmissionFairShare);
        assert!(share(&pressed) > 100, "{}", share(&pressed));
        assert_eq!(share(&relaxed), 0);
        assert!(relaxed.turns_offered > 200 && relaxed.turns_answered > 200);
    }

    /// Order is semantics, again: a breaker below the attempt loop is asked on every
    /// try, so during an outage the loop retries into the open circuit and each try is
    /// refused again; a breaker above the loop refuses each call once.
    #[test]
    fn a_loop_above_the_breaker_retries_into_the_open_circuit() {
        let mut p = params(&[Gate::Retry, Gate::Breaker]);
        p.tiers[0].error_rate = 1.0;
        p.classes[GUARD].max_attempts = 3;
        let inside = run(p.clone()).classes[GUARD];
        p.gates = vec![Gate::Breaker, Gate::Retry];
        let outside = run(p).classes[GUARD];
        let refused = |c: &ClassResults| c.reasons[Reason::BreakerOpen as usize];
        assert!(refused(&outside) > 500, "{outside:?}");
        assert_eq!(outside.breaker_refusals, refused(&outside), "one refusal per refused call");
        assert!(inside.breaker_refusals > refused(&inside) + 500, "{inside:?}");
        // Tries, not only attempts sent, are bounded by max_attempts.
        assert!(inside.attempts <= 3 * inside.offered);
    }

    /// Every counted call ends served or failed for exactly one reason, every turn
    /// answered or failed, whatever the stack (asserted inside `finish`); the same
    /// seed gives the same results and another replica different ones.
    #[test]
    fn the_full_stack_drains_and_reproduces() {
        let gates =
            [Gate::Admission, Gate::Bulkhead, Gate::Adaptive, Gate::Breaker, Gate::Quota, Gate::Retry, Gate::Fallback];
        let mut p = params(&gates);
        p.limiter = LimiterKind::Gradient(GradientConfig { initial: 40.0, min: 1.0, ..GradientConfig::default() });
        p.limiter_window = Some(SampleWindow::default());
        p.codel = Some(CoDelConfig { target: S / 20, interval: S });
        p.tiers[0].spec.server_slots = 30;
        p.tiers[0].error_rate = 0.05;
        p.classes[REWRITE].share = 0.5;
        p.classes[TITLE].share = 0.3;
        p.classes[THINK].share = 0.1;
        p.classes[GUARD].has_fallback = true;
        p.retry_budget = Some(0.1);
        p.incidents = vec![Incident { tier: 0, kind: IncidentKind::Brownout, start: 20 * S, end: 35 * S }];
        let a = run(p.clone());
        assert_eq!(a, run(p.clone()));
        let mut histograms: Vec<LatencyHistogram> = LATENCY_NAMES.iter().map(|_| LatencyHistogram::new()).collect();
        let other = Gateway::new(p, 7, 1, &mut histograms).run();
        assert_ne!(a.turns_answered, other.turns_answered);
        assert!(a.turns_failed > 0 && a.turns_answered > 0);
    }
}
