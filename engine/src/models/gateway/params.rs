//! What one gateway replica is given: tiers, call classes, the client and its
//! stack, the policies' configurations, incidents, warm-up and horizon. Built by the
//! experiments layer from a scenario and the fixture; read-only during a replica.

use crate::components::distribution::Distribution;
use crate::components::provider::TierSpec;
use crate::kernel::time::Nanos;
use crate::policy::admission::Ladder;
use crate::policy::backoff::Backoff;
use crate::policy::breaker::BreakerConfig;
use crate::policy::bulkhead::{Bulkhead, BulkheadConfig, CoDelConfig, QueueOrder};
use crate::policy::classify::RetryClassifier;
use crate::policy::limiter::{ConcurrencyLimiter, LimiterKind, SampleWindow};
use crate::policy::quota::{QuotaConfig, QuotaLimits, QuotaMeter};
use crate::policy::retry_budget::RatioBudget;

use super::gate::Gate;

/// Per-attempt timeouts. Not streamed: the client sees nothing before the whole
/// response, so "first token" and "total" both bound the response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timeouts {
    /// Until the provider answers or gives the call a server slot.
    pub connect: Nanos,
    /// Until the first token (a streamed call) or the whole answer.
    pub first_token: Nanos,
    /// The longest gap between streamed tokens.
    pub inter_token: Option<Nanos>,
    /// The whole call, from sending to the last token.
    pub total: Nanos,
}

/// One call class: a kind of LLM call the turn plan makes (the fixture's classes, plus
/// a copy of each class whose failed calls are re-sent to another tier).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ClassParams {
    /// Index into [`GatewayParams::tiers`].
    pub tier: usize,
    /// The share of turns that make this call, where the plan gives no probability of
    /// its own (the fixture's `calls_per_turn`, at most 1).
    pub share: f64,
    /// Input tokens per call: (mean, standard deviation).
    pub input_tokens: (f64, f64),
    /// Output tokens per call: (mean, standard deviation).
    pub output_tokens: (f64, f64),
    /// The most a call may write (what quota meters reserve).
    pub max_tokens: u64,
    /// The answer is streamed: the first token ends the first-token timeout.
    pub streamed: bool,
    /// The call's deadline from its start; no retry is sent that could not end before it.
    pub deadline: Nanos,
    /// The per-attempt timeouts.
    pub timeouts: Timeouts,
    /// Attempts in all, the first included.
    pub max_attempts: u32,
    /// The ladder refuses this class from this rung (1..=4; 5: never).
    pub shed_from_rung: u8,
    /// A failed call is served a fallback when the stack has the fallback gate: the
    /// class in `fallback` is called instead, or (without one) the product answers it
    /// locally — a flagged answer, the raw query, a batch queue.
    pub has_fallback: bool,
    /// The class called in this call's place when it fails (a think call downgraded
    /// to an answer; an answer re-sent to another tier). Only with `has_fallback`.
    pub fallback: Option<usize>,
    /// Records its time-to-first-token and total latency histograms (a re-sent copy
    /// of another class does not).
    pub latency: bool,
    /// The class's bulkhead slots.
    pub bulkhead_slots: u32,
    /// The calls in flight the admission ladder and the tenants' fair share measure
    /// pressure against: the class's mean concurrency at its sustainable rate when the
    /// bulkhead is the default (its slots are that concurrency's p99, room for swings
    /// that are not pressure), its slots when the scenario sets them.
    pub pressure_slots: u32,
    /// Calls that may wait for one.
    pub bulkhead_queue: u32,
    /// How this class waits between attempts (none, equal, full or decorrelated jitter).
    pub backoff: Backoff,
    /// Share of calls whose cacheable prefix is a prompt-cache hit.
    pub cache_hit_ratio: f64,
    /// Share of the input that is a cacheable prefix.
    pub cacheable_prefix: f64,
}

/// A tier: the provider's side plus prices.
#[derive(Clone, Debug, PartialEq)]
pub struct TierParams {
    /// Limits, speeds and slots.
    pub spec: TierSpec,
    /// Price per million input tokens, USD.
    pub usd_per_mtok_in: f64,
    /// Price per million output tokens, USD.
    pub usd_per_mtok_out: f64,
    /// Healthy 500 rate (the fixture's 0.002).
    pub error_rate: f64,
    /// The unloaded time to first token as measured, instead of `base_latency_s +
    /// input ÷ prefill` × jitter (see [`ProviderTier::with_ttft`]).
    ///
    /// [`ProviderTier::with_ttft`]: crate::components::provider::ProviderTier::with_ttft
    pub ttft: Option<Distribution>,
}

/// What an incident does to a tier.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum IncidentKind {
    /// Fewer slots (`health`), more 500s (`error_rate`), slower answers
    /// (`latency_factor` × time to first token and decode); [`IncidentKind::BROWNOUT`]
    /// is the seed's 0.2 / 0.25 / ×1.
    Brownout {
        /// The share of server slots left.
        health: f64,
        /// The share of calls that end in a 500.
        error_rate: f64,
        /// What the time to first token and the decode time are multiplied by.
        latency_factor: f64,
    },
    /// Health 0.05, error rate 1.0.
    Outage,
    /// Health `scale`, healthy error rate.
    CapacityStep {
        /// The share of server slots left.
        scale: f64,
    },
    /// The provider's quota changes: requests, input and output tokens per minute are
    /// `scales` × the published limits (the client's own meters do not know).
    RateLimitStep {
        /// Requests, input and output tokens per minute, as shares of the published limits.
        scales: [f64; 3],
    },
    /// The quota coordinator fails: a coordinated quota falls back to per-instance
    /// meters of 1/N each until it returns (the tier is not used).
    CoordinatorOutage,
}

impl IncidentKind {
    /// The seed's brownout: health 0.2, error rate 0.25, latency unchanged.
    pub const BROWNOUT: IncidentKind = IncidentKind::Brownout { health: 0.2, error_rate: 0.25, latency_factor: 1.0 };
}

/// An incident on one tier over [start, end).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Incident {
    /// The tier (its index).
    pub tier: usize,
    /// What happens.
    pub kind: IncidentKind,
    /// When it starts.
    pub start: Nanos,
    /// When it ends.
    pub end: Nanos,
}

/// One call a turn may make.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PlannedCall {
    /// Index into [`GatewayParams::classes`].
    pub class: usize,
    /// The share of turns that make it; `None`: the class's `share`. Below 1 it is
    /// drawn when the turn arrives (one uniform, in plan order).
    pub probability: Option<f64>,
    /// The class called instead for the turns the draw misses (the seed's think for
    /// the hard share, answer otherwise).
    pub otherwise: Option<usize>,
    /// A failure (after its fallback) fails the turn; `false`: the turn goes on.
    pub required: bool,
    /// Made only if this earlier planned call (an index into [`TurnPlan::calls`])
    /// succeeded or was served its fallback.
    pub needs: Option<usize>,
}

/// A step of the turn: its calls (more than one: a parallel group, the turn waits
/// for all of them), or calls in the background, which the turn does not wait for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Step {
    /// The step's calls: `TurnPlan::calls[first..end]`.
    pub first: usize,
    /// One past the step's last call.
    pub end: usize,
    /// The turn does not wait for it: a background step's latency is never the turn's.
    pub background: bool,
}

/// What a turn does: steps in order, each started when the one before has ended.
/// A turn is answered when its last foreground step ends with no required call
/// failed; background steps after it start once it is answered, so the turn's
/// latency never includes them.
#[derive(Clone, Debug, PartialEq)]
pub struct TurnPlan {
    /// Every planned call, steps in order.
    pub calls: Vec<PlannedCall>,
    /// The steps, in order.
    pub steps: Vec<Step>,
}

impl TurnPlan {
    /// The most calls a plan may have (the turn keeps one bit per planned call).
    pub const MAX_CALLS: usize = 32;

    /// A plan from its steps, each a list of calls and whether it runs in the background.
    pub fn new(steps: Vec<(Vec<PlannedCall>, bool)>) -> TurnPlan {
        let mut plan = TurnPlan { calls: Vec::new(), steps: Vec::new() };
        for (calls, background) in steps {
            let first = plan.calls.len();
            plan.calls.extend(calls);
            plan.steps.push(Step { first, end: plan.calls.len(), background });
        }
        plan
    }

    /// The first step from which every step is in the background (`steps.len()` if
    /// the last is not): the turn is answered when it reaches it.
    pub fn answered_at(&self) -> usize {
        self.steps.iter().rposition(|s| !s.background).map_or(0, |i| i + 1)
    }

    /// Which classes a turn can call: named by the plan, or the fallback of a class
    /// that can be called.
    pub fn reachable(&self, classes: &[ClassParams]) -> Vec<bool> {
        let mut reached: Vec<bool> = vec![false; classes.len()];
        for call in &self.calls {
            reached[call.class] = true;
            if let Some(other) = call.otherwise {
                reached[other] = true;
            }
        }
        // Fallback chains are acyclic (checked), so classes.len() rounds reach every link.
        for _ in 0..classes.len() {
            for (c, params) in classes.iter().enumerate() {
                if let Some(next) = params.fallback.filter(|_| reached[c] && params.has_fallback) {
                    reached[next] = true;
                }
            }
        }
        reached
    }
}

/// Who makes the calls.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Client {
    /// The configured gates.
    Stack,
    /// Up to `attempts` immediate attempts on any failure, one `timeout` per call.
    Naive {
        /// Attempts in all, the first included.
        attempts: u32,
        /// The timeout of each call.
        timeout: Nanos,
    },
}

stampede_kernel::named_enum! {
    /// One limiter per class, or one per tier (the pooling bug).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum LimiterScope {
        /// One limiter per call class.
        Class = "class",
        /// One limiter per tier, shared by its classes.
        Tier = "tier",
    }
}

stampede_kernel::named_enum! {
    /// How turns arrive: a Poisson process, or evenly spaced at the rate.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Arrivals {
        /// Exponential gaps.
        Poisson = "poisson",
        /// Equal gaps.
        Even = "even",
    }
}

/// Everything one replica needs.
#[derive(Clone, Debug)]
pub struct GatewayParams {
    /// The model tiers, by index.
    pub tiers: Vec<TierParams>,
    /// The call classes; per-class results and limiters, bulkheads and breakers follow
    /// this order.
    pub classes: Vec<ClassParams>,
    /// Each class's name (traces and messages).
    pub class_names: Vec<&'static str>,
    /// What a turn calls, in which steps.
    pub plan: TurnPlan,
    /// Turns per second at `arrivals` spacing, unless `load` is set (then its mean).
    pub turns_per_s: f64,
    /// How turns are spaced.
    pub arrivals: Arrivals,
    /// Turns from `[load]`: a rate profile (schedules, sines, bursts) or a replayed
    /// trace; `None`: `turns_per_s` at `arrivals` spacing.
    pub load: Option<crate::components::arrivals::ArrivalProcess>,
    /// Calls replayed from a trace, per class (`[load]` with a class column): each
    /// arrival is one call of that class outside any turn. When there are any, no
    /// turns arrive.
    pub call_arrivals: Vec<(usize, crate::components::arrivals::ArrivalProcess)>,
    /// Tenants turns are spread over (admission's fair shares).
    pub tenants: u32,
    /// Share of turns from tenant 0 (the rest spread evenly over the others); 0 with
    /// one tenant.
    pub hot_tenant_share: f64,
    /// Gateway instances; turns are spread uniformly (only a split quota notices).
    pub instances: u32,
    /// The stack of gates, or the naive client.
    pub client: Client,
    /// The gates in order, outermost first.
    pub gates: Vec<Gate>,
    /// The admission ladder.
    pub ladder: Ladder,
    /// The concurrency limiter's algorithm.
    pub limiter: LimiterKind,
    /// One limiter per class, or one per tier (the pooling bug).
    pub limiter_scope: LimiterScope,
    /// Learn from windows of samples (Netflix's WindowedLimit); `None`: from every sample.
    pub limiter_window: Option<SampleWindow>,
    /// The breaker per class.
    pub breaker: BreakerConfig,
    /// The client-side quota meters.
    pub quota: QuotaConfig,
    /// Hand unused `max_tokens` back to the client meter when a call ends.
    pub reconcile: bool,
    /// Ratio retry budget (fraction of successes); `None`: unbudgeted.
    pub retry_budget: Option<f64>,
    /// Which failures are retried.
    pub classifier: RetryClassifier,
    /// A stream is not retried once this share of its output arrived.
    pub no_retry_past_delivered: f64,
    /// Which waiter a freed bulkhead slot goes to.
    pub bulkhead_order: QueueOrder,
    /// CoDel on the bulkhead queues; `None`: none.
    pub codel: Option<CoDelConfig>,
    /// The incidents, in time order.
    pub incidents: Vec<Incident>,
    /// A cached input token counts this much against input-token meters (ITPM).
    pub cache_itpm_weight: f64,
    /// A cached input token is billed this share of the input price.
    pub cache_price_weight: f64,
    /// Nothing before this is counted.
    pub warmup: Nanos,
    /// When the replica ends.
    pub horizon: Nanos,
    /// The width of a time-series bucket (attempts and answered turns per bucket).
    pub series_bucket: Nanos,
}

impl GatewayParams {
    /// One limiter per class, or one per tier (the pooling bug).
    pub(super) fn limiters(&self) -> Vec<ConcurrencyLimiter> {
        let count = match self.limiter_scope {
            LimiterScope::Class => self.classes.len(),
            LimiterScope::Tier => self.tiers.len(),
        };
        (0..count).map(|_| self.limiter()).collect()
    }

    /// How many calls may wait for each limiter: its classes' bulkhead queues.
    pub(super) fn limiter_queue_capacity(&self) -> Vec<usize> {
        match self.limiter_scope {
            LimiterScope::Class => self.classes.iter().map(|c| c.bulkhead_queue as usize).collect(),
            LimiterScope::Tier => (0..self.tiers.len())
                .map(|tier| self.classes.iter().filter(|c| c.tier == tier).map(|c| c.bulkhead_queue as usize).sum())
                .collect(),
        }
    }

    /// One bulkhead per class, sized by the class.
    pub(super) fn bulkheads(&self) -> Vec<Bulkhead> {
        (0..self.classes.len()).map(|class| Bulkhead::new(self.bulkhead_config(class))).collect()
    }

    /// The client meters: one set of tiers fleet-wide when coordinated, one per instance
    /// when split (`instances × tiers`, instance-major). A coordinated quota that may lose
    /// its coordinator also gets the per-instance sets it falls back to, after its own.
    pub(super) fn quota_meters(&self) -> Vec<QuotaMeter> {
        let tiers = 0..self.tiers.len();
        let split = QuotaConfig { coordinated: false, ..self.quota };
        let per_instance = || {
            let tiers = tiers.clone();
            (0..self.instances).flat_map(move |_| tiers.clone().map(move |tier| self.quota_meter(tier, split)))
        };
        let can_fail = self.incidents.iter().any(|i| i.kind == IncidentKind::CoordinatorOutage);
        match (self.quota.coordinated, can_fail) {
            (true, false) => tiers.clone().map(|tier| self.quota_meter(tier, self.quota)).collect(),
            (true, true) => {
                tiers.clone().map(|tier| self.quota_meter(tier, self.quota)).chain(per_instance()).collect()
            }
            (false, _) => per_instance().collect(),
        }
    }

    /// One concurrency limiter of the adaptive gate (per class or per tier).
    pub fn limiter(&self) -> ConcurrencyLimiter {
        match self.limiter_window {
            Some(window) => ConcurrencyLimiter::windowed(self.limiter, window),
            None => ConcurrencyLimiter::new(self.limiter),
        }
    }

    /// Class `class`'s bulkhead: its slots and queue, the gateway's order and CoDel.
    pub fn bulkhead_config(&self, class: usize) -> BulkheadConfig {
        let c = &self.classes[class];
        BulkheadConfig {
            slots: c.bulkhead_slots,
            queue_capacity: c.bulkhead_queue,
            order: self.bulkhead_order,
            codel: self.codel,
        }
    }

    /// A client meter of `tier` under `config`: its buckets hold what the provider's do
    /// (the tier's bursts), so the client cannot admit a burst the provider would
    /// refuse. stampede-tower builds its meters with this too.
    pub fn quota_meter(&self, tier: usize, config: QuotaConfig) -> QuotaMeter {
        let burst = self.tiers[tier].spec.burst_s.map(crate::kernel::time::secs_to_nanos);
        QuotaMeter::with_burst(self.quota_limits(tier), config, burst)
    }

    /// Whether a stream broken after `delivered` of its `output` tokens is worth
    /// starting over: less than `no_retry_past_delivered` of it arrived. The
    /// simulated retry loop asks this; stampede-tower's callers ask it too.
    #[inline]
    pub fn worth_restarting(&self, delivered: u64, output: u64) -> bool {
        (delivered as f64) < self.no_retry_past_delivered * output as f64
    }

    /// Tier `tier`'s quota: its requests, input and output tokens per minute.
    pub fn quota_limits(&self, tier: usize) -> QuotaLimits {
        let spec = &self.tiers[tier].spec;
        QuotaLimits {
            requests_per_minute: spec.rpm,
            input_tokens_per_minute: spec.itpm,
            output_tokens_per_minute: spec.otpm,
        }
    }

    /// The gateway's one retry budget: a ratio of successes, 100 tokens at most, a
    /// full window's worth to start; `None` when retries are unbudgeted.
    pub fn ratio_budget(&self) -> Option<RatioBudget> {
        self.retry_budget.map(|ratio| RatioBudget::new(ratio, 100.0, 100.0 * ratio))
    }

    /// A call of `class`'s latency on an idle tier (its mean first token plus the
    /// mean output's decode): admission's expected latency before any call ended.
    pub fn unloaded_latency(&self, class: usize) -> Nanos {
        let c = &self.classes[class];
        let tier = &self.tiers[c.tier];
        let spec = &tier.spec;
        let first_token = match &tier.ttft {
            Some(ttft) => ttft.mean_s(),
            None => spec.base_latency_s + c.input_tokens.0 / spec.prefill_tokens_per_s,
        };
        crate::kernel::time::secs_to_nanos(first_token + c.output_tokens.0 / spec.decode_tokens_per_s)
    }

    /// Panics on parameters the experiments layer should never produce.
    pub(super) fn check(&self) {
        assert!(
            (self.load.is_some() || self.turns_per_s > 0.0 || !self.call_arrivals.is_empty())
                && self.tenants > 0
                && self.instances > 0
                && !self.tiers.is_empty()
        );
        assert!(self.gates.len() < u8::MAX as usize && self.series_bucket > 0);
        for (i, gate) in self.gates.iter().enumerate() {
            assert!(!self.gates[..i].contains(gate), "gate {gate:?} listed twice");
        }
        assert!(!self.classes.is_empty() && self.class_names.len() == self.classes.len());
        assert!(self.classes.len() <= u8::MAX as usize && self.call_arrivals.len() < u16::MAX as usize);
        assert!(self.call_arrivals.iter().all(|(class, _)| *class < self.classes.len()));
        for class in &self.classes {
            assert!(class.tier < self.tiers.len() && class.max_attempts > 0 && class.bulkhead_slots > 0);
            assert!(class.fallback.is_none_or(|f| f < self.classes.len()));
        }
        let plan = &self.plan;
        assert!(plan.calls.len() <= TurnPlan::MAX_CALLS && plan.steps.len() < u8::MAX as usize);
        for (i, call) in plan.calls.iter().enumerate() {
            assert!(call.class < self.classes.len() && call.otherwise.is_none_or(|o| o < self.classes.len()));
            assert!(call.needs.is_none_or(|n| n < i), "a call needs an earlier one");
        }
        let mut next = 0;
        for step in &plan.steps {
            assert!(step.first == next && step.end > step.first, "steps tile the calls");
            next = step.end;
        }
        assert_eq!(next, plan.calls.len());
    }

    /// How many latency histograms a replica records: the turn's three (answered,
    /// failed, all), then each class's (with `latency`) five: time to first token and
    /// total of successful attempts, and its calls served, failed and all.
    pub fn latency_histograms(&self) -> usize {
        super::results::TURN_ENDINGS.count()
            + super::results::ClassHistograms::LEN * self.classes.iter().filter(|c| c.latency).count()
    }
}
