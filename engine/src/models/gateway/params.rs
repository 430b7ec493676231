//! What one gateway replica is given: tiers, call classes, the client and its
//! stack, the policies' configurations, incidents, warm-up and horizon. Built by the
//! experiments layer from a scenario and the fixture; read-only during a replica.

use crate::components::distribution::Distribution;
use crate::components::provider::TierSpec;
use crate::kernel::time::Nanos;
use crate::kernel::Named;
use crate::policy::admission::Ladder;
use crate::policy::backoff::Backoff;
use crate::policy::breaker::BreakerConfig;
use crate::policy::bulkhead::{CoDelConfig, QueueOrder};
use crate::policy::classify::RetryClassifier;
use crate::policy::limiter::{LimiterKind, SampleWindow};
use crate::policy::quota::QuotaConfig;

use super::gates::Gate;

stampede_kernel::named_enum! {
    /// The call classes, in the order of every per-class array. A turn makes guard,
    /// maybe rewrite, answer or think, maybe title; answer_fallback is answer re-sent
    /// to another tier (only with a configured fallback tier).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum CallClass {
        Guard = "guard",
        Rewrite = "rewrite",
        Answer = "answer",
        Think = "think",
        Title = "title",
        AnswerFallback = "answer_fallback",
    }
}

/// [`CallClass`]'s names, in order.
pub const CLASS_NAMES: &[&str] = <CallClass as Named>::NAMES;
pub const CLASSES: usize = <CallClass as Named>::ALL.len();
// Per-class arrays are indexed by these (the enum's discriminants).
pub const GUARD: usize = CallClass::Guard as usize;
pub const REWRITE: usize = CallClass::Rewrite as usize;
pub const ANSWER: usize = CallClass::Answer as usize;
pub const THINK: usize = CallClass::Think as usize;
pub const TITLE: usize = CallClass::Title as usize;
pub const ANSWER_FALLBACK: usize = CallClass::AnswerFallback as usize;

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
    pub spec: TierSpec,
    pub usd_per_mtok_in: f64,
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
    Brownout { health: f64, error_rate: f64, latency_factor: f64 },
    /// Health 0.05, error rate 1.0.
    Outage,
    /// Health `scale`, healthy error rate.
    CapacityStep { scale: f64 },
    /// The provider's quota changes: requests, input and output tokens per minute are
    /// `scales` × the published limits (the client's own meters do not know).
    RateLimitStep { scales: [f64; 3] },
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

stampede_kernel::named_enum! {
    /// One limiter per class, or one per tier (the pooling bug).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum LimiterScope {
        Class = "class",
        Tier = "tier",
    }
}

stampede_kernel::named_enum! {
    /// How turns arrive: a Poisson process, or evenly spaced at the rate.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Arrivals {
        Poisson = "poisson",
        Even = "even",
    }
}

/// Everything one replica needs.
#[derive(Clone, Debug)]
pub struct GatewayParams {
    pub tiers: Vec<TierParams>,
    /// [`CLASS_NAMES`] order; [`ANSWER_FALLBACK`] is used only when `answer_fallback`.
    pub classes: [ClassParams; CLASSES],
    pub answer_fallback: bool,
    /// Turns per second at `arrivals` spacing, unless `load` is set (then its mean).
    pub turns_per_s: f64,
    pub arrivals: Arrivals,
    /// Turns from `[load]`: a rate profile (schedules, sines, bursts) or a replayed
    /// trace; `None`: `turns_per_s` at `arrivals` spacing.
    pub load: Option<crate::components::arrivals::ArrivalProcess>,
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
    pub classifier: RetryClassifier,
    pub no_retry_past_delivered: f64,
    pub bulkhead_order: QueueOrder,
    pub codel: Option<CoDelConfig>,
    pub incidents: Vec<Incident>,
    /// A cached input token counts this much against input-token meters (ITPM).
    pub cache_itpm_weight: f64,
    /// A cached input token is billed this share of the input price.
    pub cache_price_weight: f64,
    pub warmup: Nanos,
    pub horizon: Nanos,
    /// The width of a time-series bucket (attempts and answered turns per bucket).
    pub series_bucket: Nanos,
}

impl GatewayParams {
    /// Panics on parameters the experiments layer should never produce.
    pub(super) fn check(&self) {
        assert!(
            (self.load.is_some() || self.turns_per_s > 0.0)
                && self.tenants > 0
                && self.instances > 0
                && !self.tiers.is_empty()
        );
        assert!(self.gates.len() < u8::MAX as usize && self.series_bucket > 0);
        for (i, gate) in self.gates.iter().enumerate() {
            assert!(!self.gates[..i].contains(gate), "gate {gate:?} listed twice");
        }
        for class in &self.classes {
            assert!(class.tier < self.tiers.len() && class.max_attempts > 0 && class.bulkhead_slots > 0);
        }
    }
}
