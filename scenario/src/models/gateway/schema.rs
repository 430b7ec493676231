//! The gateway's scenario sections as written: `[workload]`, `[stack]`, `[gateway]`
//! (overrides of the fixture's knobs), `[[incidents]]`, `[tiers]` and `[classes]`
//! (overrides of fixture entries), `[turn]` and `[load]`, with their defaults.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use stampede_engine::kernel::Named;
use stampede_engine::models::gateway::{Arrivals, Gate, LimiterScope};

use super::fixture;
use super::resolved::Resolved;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GatewayConfig {
    pub workload: WorkloadSection,
    #[serde(default)]
    pub stack: StackSection,
    /// Overrides of the fixture's `[gateway]` knobs, by the same names.
    #[serde(default, skip_serializing_if = "toml::Table::is_empty")]
    pub gateway: toml::Table,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub incidents: Vec<IncidentSection>,
    /// Overrides of the fixture's tiers: `[tiers.sonnet] server_slots = 1000`.
    #[serde(default, skip_serializing_if = "toml::Table::is_empty")]
    pub tiers: toml::Table,
    /// Overrides of the fixture's call classes: `[classes.guard] tier = "sonnet"`.
    #[serde(default, skip_serializing_if = "toml::Table::is_empty")]
    pub classes: toml::Table,
    /// A turn plan that replaces the fixture's (`[turn] steps = [...]`, as in a fixture).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<fixture::TurnSection>,
    /// Turns from a rate schedule, a sine, bursts or a replayed trace (`[load]`, as
    /// every model takes it) instead of `workload.turns_per_s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load: Option<crate::inputs::load::LoadSpec>,
    /// Worked out once when the scenario is loaded, not per replica.
    #[serde(skip)]
    pub(super) resolved: Option<Resolved>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadSection {
    /// Turns per second (unless `[load]` sets the rate or replays a trace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turns_per_s: Option<f64>,
    /// How turns arrive: `poisson` (the default) or `even` (evenly spaced).
    #[serde(default = "poisson", with = "crate::base::names", skip_serializing_if = "is_poisson")]
    pub arrivals: Arrivals,
    /// A fixture file; absent: the shipped fixture.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fixture: Option<String>,
    #[serde(default = "one")]
    pub tenants: u32,
    /// Share of turns from tenant 0; the rest spread evenly over the other tenants.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub hot_tenant_share: f64,
}

pub(super) fn poisson() -> Arrivals {
    Arrivals::Poisson
}

pub(super) fn is_poisson(arrivals: &Arrivals) -> bool {
    *arrivals == Arrivals::Poisson
}

pub(super) fn is_zero(value: &f64) -> bool {
    *value == 0.0
}

pub(super) fn one() -> u32 {
    1
}

stampede_engine::named_enum! {
    /// `stack.client`. An adapter, not a copy of the engine's `Client`: that one carries the
    /// naive client's attempts and timeout, which TOML gives as separate fields.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum ClientName {
        Stack = "stack",
        Naive = "naive",
    }
}

stampede_engine::named_enum! {
    /// `stack.limiter` and the fixture's `adaptive_kind`. An adapter: the engine's `LimiterKind`
    /// carries each algorithm's configuration, which the gateway derives from the fixture.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum LimiterName {
        Fixed = "fixed",
        Aimd = "aimd",
        Gradient = "gradient",
        Gradient2 = "gradient2",
    }
}

/// The defence stack and the client.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StackSection {
    #[serde(default = "default_client", with = "crate::base::names")]
    pub client: ClientName,
    /// Gates, outermost first; a gate left out is off.
    #[serde(default = "default_gates", with = "crate::base::names::list")]
    pub gates: Vec<Gate>,
    #[serde(default = "default_naive_attempts")]
    pub naive_attempts: u32,
    #[serde(default = "default_naive_timeout")]
    pub naive_timeout_s: f64,
    /// Overrides the fixture's `adaptive_kind`.
    #[serde(default, skip_serializing_if = "Option::is_none", with = "crate::base::names::optional")]
    pub limiter: Option<LimiterName>,
    #[serde(default = "default_scope", with = "crate::base::names")]
    pub limiter_scope: LimiterScope,
    /// Samples per limiter update (Netflix's WindowedLimit, windows of at least 1 s);
    /// 1: learn from every sample.
    #[serde(default = "default_window_samples")]
    pub limiter_window_samples: u32,
    /// Hand unused `max_tokens` back to the client meter when a call ends.
    #[serde(default = "yes")]
    pub reconcile: bool,
    /// The fixture's ratio retry budget; false: retries are unbudgeted.
    #[serde(default = "yes")]
    pub retry_budget: bool,
    /// Caps every class's attempts (1: no retries at all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_attempts: Option<u32>,
    /// Re-send a class's failed calls to another tier (with the fallback gate):
    /// `{ answer = "haiku" }`. Overrides the fixture's `fallback_tier`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub fallback_tiers: BTreeMap<String, String>,
    /// The seed's spelling of `fallback_tiers = { answer = TIER }`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer_fallback_tier: Option<String>,
    /// Bulkhead slots per class; absent classes get their p99 pool (calls in flight at the sustainable rate) from
    /// the capacity arithmetic (rate limit × service time).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub bulkhead_slots: BTreeMap<String, u32>,
}

impl Default for StackSection {
    fn default() -> Self {
        StackSection {
            client: default_client(),
            gates: default_gates(),
            naive_attempts: default_naive_attempts(),
            naive_timeout_s: default_naive_timeout(),
            limiter: None,
            limiter_scope: default_scope(),
            limiter_window_samples: default_window_samples(),
            reconcile: true,
            retry_budget: true,
            max_attempts: None,
            fallback_tiers: BTreeMap::new(),
            answer_fallback_tier: None,
            bulkhead_slots: BTreeMap::new(),
        }
    }
}

pub(super) fn default_client() -> ClientName {
    ClientName::Stack
}
pub(super) fn default_gates() -> Vec<Gate> {
    Gate::ALL.to_vec()
}
pub(super) fn default_naive_attempts() -> u32 {
    3
}
pub(super) fn default_naive_timeout() -> f64 {
    60.0
}
pub(super) fn default_window_samples() -> u32 {
    10
}
pub(super) fn default_scope() -> LimiterScope {
    LimiterScope::Class
}
pub(super) fn yes() -> bool {
    true
}

stampede_engine::named_enum! {
    /// `incidents[].kind`. An adapter: the engine's `IncidentKind::CapacityStep` carries the
    /// scale, which TOML gives as its own field.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum IncidentName {
        Brownout = "brownout",
        Outage = "outage",
        CapacityStep = "capacity_step",
        RateLimitStep = "rate_limit_step",
        CoordinatorOutage = "coordinator_outage",
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IncidentSection {
    /// The tier it strikes (not for a coordinator outage).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub tier: String,
    #[serde(with = "crate::base::names")]
    pub kind: IncidentName,
    pub start_s: f64,
    pub duration_s: f64,
    /// The health scale of a capacity step (0 < scale ≤ 1… or above 1 for a step up).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale: Option<f64>,
    /// A brownout's severity: slots × `health` (0.2), `error_rate` (0.25), time to
    /// first token and decode × `latency_factor` (1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_rate: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_factor: Option<f64>,
    /// A rate_limit_step's new limits: requests, input tokens and output tokens per
    /// minute × these (1 each by default; at least one given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rpm_scale: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub itpm_scale: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub otpm_scale: Option<f64>,
}

impl IncidentSection {
    /// An incident of `kind` on `tier` over [start_s, start_s + duration_s), every
    /// severity at its default.
    pub fn new(tier: &str, kind: IncidentName, start_s: f64, duration_s: f64) -> IncidentSection {
        IncidentSection {
            tier: tier.into(),
            kind,
            start_s,
            duration_s,
            scale: None,
            health: None,
            error_rate: None,
            latency_factor: None,
            rpm_scale: None,
            itpm_scale: None,
            otpm_scale: None,
        }
    }

    /// A brownout's (health, error rate, latency factor), the seed's where not given.
    pub(super) fn brownout(&self) -> (f64, f64, f64) {
        (self.health.unwrap_or(0.2), self.error_rate.unwrap_or(0.25), self.latency_factor.unwrap_or(1.0))
    }

    /// A rate_limit_step's scales of (requests, input, output) per minute.
    pub(super) fn quota_scales(&self) -> [f64; 3] {
        [self.rpm_scale, self.itpm_scale, self.otpm_scale].map(|s| s.unwrap_or(1.0))
    }

    /// What it does, in a few words (the report's fault window, the trace).
    pub fn label(&self) -> String {
        match self.kind {
            IncidentName::Brownout => {
                let (health, errors, latency) = self.brownout();
                let mut parts = vec![format!("slots ×{health}"), format!("errors {:.0}%", errors * 100.0)];
                if latency != 1.0 {
                    parts.push(format!("latency ×{latency}"));
                }
                format!("brownout ({})", parts.join(", "))
            }
            IncidentName::RateLimitStep => {
                let named = ["rpm", "itpm", "otpm"];
                let parts: Vec<String> = self
                    .quota_scales()
                    .iter()
                    .zip(named)
                    .filter(|(s, _)| **s != 1.0)
                    .map(|(s, n)| format!("{n} ×{s}"))
                    .collect();
                format!("rate limit step ({})", parts.join(", "))
            }
            IncidentName::CapacityStep => format!("capacity step ×{}", self.scale.unwrap_or(1.0)),
            IncidentName::Outage => "outage".into(),
            IncidentName::CoordinatorOutage => "coordinator outage".into(),
        }
    }
}
