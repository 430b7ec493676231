//! The scenario sections of the `gateway` model (seed 001): `[workload]`, `[stack]`,
//! `[gateway]` (overrides of the fixture's gateway knobs), `[[incidents]]`, `[tiers]`
//! and `[classes]` (overrides of fixture entries) and `[load]` (turns from data), the
//! gateway's warnings and its metric table.
//!
//! The fixture (the shipped one, or `workload.fixture`) supplies tiers, classes, the
//! turn plan and gateway defaults; it is read once when the scenario is loaded, and
//! the engine's classes, plan and metric names are built from it then. The engine's
//! classes are the fixture's, in its order, then `NAME_fallback` for each class whose
//! failed calls can be re-sent to another tier ([`Fixture::resendable`]).

pub mod capacity;
pub mod fixture;
mod metrics;
mod presentation;

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use stampede_engine::components::arrivals::ArrivalProcess;
use stampede_engine::components::provider::TierSpec;
use stampede_engine::kernel::Named;
use stampede_engine::models::gateway::{
    Arrivals, ClassParams, Client, Gate, Gateway as GatewayModel, GatewayParams, GatewayResults, GatewaySeries,
    Incident, IncidentKind, LimiterScope, PlannedCall, TierParams, Timeouts, TurnPlan,
};
use stampede_engine::policy::admission::Ladder;
use stampede_engine::policy::breaker::{BreakerConfig, SlidingWindow};
use stampede_engine::policy::bulkhead::{CoDelConfig, QueueOrder};
use stampede_engine::policy::classify::{RetryClassifier, RetryDecision};
use stampede_engine::policy::limiter::{AimdConfig, Gradient2Config, GradientConfig, LimiterKind, SampleWindow};
use stampede_engine::policy::quota::QuotaConfig;
use stampede_engine::policy::Criticality;
use stampede_engine::secs_to_nanos;
use stampede_engine::LatencyHistogram;

use self::fixture::{Fixture, Gateway as GatewayKnobs};
use super::metrics::{
    defs, intern, intern_names, values, Metric, MetricDef, ReplicaOutput, SeriesDef, SeriesKind, TimedLatency,
    TracedReplica,
};
use super::spec::ModelSpec;
use crate::base::error::{Error, Result};
use crate::base::typing::typed_at;
use crate::scenario::RunConfig;

/// The LLM gateway model (seed 001).
pub struct Gateway;

impl ModelSpec for Gateway {
    type Config = GatewayConfig;
    const NAME: &'static str = "gateway";
    const DESCRIPTION: &'static str =
        "LLM gateway: turns follow your fixture's plan of LLM calls over metered tiers, through a reorderable stack of defences";
    const SECTIONS: &'static [&'static str] =
        &["workload", "stack", "gateway", "incidents", "tiers", "classes", "turn", "load"];
    const PATH_FIELDS: &'static [&'static str] = &["workload.fixture"];

    fn inputs(config: &GatewayConfig) -> Vec<(String, String)> {
        let mut files: Vec<(String, String)> =
            config.workload.fixture.iter().map(|path| ("workload.fixture".into(), path.clone())).collect();
        files.extend(crate::inputs::input_files(None, config.load.as_ref()));
        if let Some(resolved) = &config.resolved {
            for (name, tier) in &resolved.fixture.tiers {
                if let Some(spec) = &tier.ttft_s {
                    files.extend(crate::inputs::input_files(Some((&format!("tiers.{name}.ttft_s"), spec)), None));
                }
            }
        }
        files
    }

    fn prepare(config: GatewayConfig) -> Result<GatewayConfig> {
        config.resolve()
    }

    fn validate(config: &GatewayConfig, run: &RunConfig) -> Result<()> {
        config.validate(run)
    }

    fn metrics(config: &GatewayConfig) -> Vec<MetricDef> {
        defs(&config.resolved().table.0)
    }

    fn latencies(config: &GatewayConfig) -> &'static [&'static str] {
        config.resolved().latencies
    }

    fn warnings(config: &GatewayConfig, run: &RunConfig) -> Vec<String> {
        config.warnings(run)
    }

    fn presentation(config: &GatewayConfig, _: &RunConfig) -> super::presentation::Presentation {
        presentation::presentation(&config.resolved().class_names(), &config.incidents)
    }

    fn series(_: &GatewayConfig) -> &'static [SeriesDef] {
        GATEWAY_SERIES
    }

    fn series_bucket_s(_: &GatewayConfig) -> f64 {
        SERIES_BUCKET_S
    }

    /// Turns, then each class's calls (the classes with latency histograms).
    fn timed_latencies(config: &GatewayConfig) -> Vec<TimedLatency> {
        let turn = TimedLatency { name: "turn", histogram: "turn_s", degraded: false };
        let classes = config.resolved().classes.iter().filter(|c| !c.resent).map(|c| TimedLatency {
            name: intern(format!("{}_call", c.name)),
            histogram: intern(format!("{}_call_s", c.name)),
            degraded: false,
        });
        std::iter::once(turn).chain(classes).collect()
    }

    fn latency_window_s(_: &GatewayConfig, run: &RunConfig) -> f64 {
        latency_window_s(run)
    }

    fn run_replica(
        config: &GatewayConfig,
        run: &RunConfig,
        master_seed: u64,
        replica: u64,
        histograms: &mut [LatencyHistogram],
    ) -> ReplicaOutput {
        let window = secs_to_nanos(latency_window_s(run));
        let model = GatewayModel::new(config.params(run), master_seed, replica, histograms);
        let (results, series, _) = model.with_latency_windows(window).run_all();
        output(config, &results, series)
    }

    const TRACES: bool = true;

    fn trace_replica(config: &GatewayConfig, run: &RunConfig, master_seed: u64, replica: u64) -> Option<TracedReplica> {
        let mut histograms: Vec<_> = config.resolved().latencies.iter().map(|_| LatencyHistogram::new()).collect();
        let window = secs_to_nanos(latency_window_s(run));
        let model = GatewayModel::new(config.params(run), master_seed, replica, &mut histograms);
        let model = model.with_latency_windows(window).traced();
        let (results, series, trace) = model.run_all();
        Some(TracedReplica { output: output(config, &results, series), trace: trace.expect("traced") })
    }
}

/// The width of the gateway's time-series buckets.
const SERIES_BUCKET_S: f64 = 1.0;

/// The gateway's latency windows: round, at most 60 of them, in whole 1 s buckets.
fn latency_window_s(run: &RunConfig) -> f64 {
    super::series::default_latency_window_s(run.horizon_s, SERIES_BUCKET_S)
}

const GATEWAY_SERIES: &[SeriesDef] = &[
    SeriesDef { name: "attempt_rps", kind: SeriesKind::Count },
    SeriesDef { name: "goodput_tps", kind: SeriesKind::Count },
];

fn output(config: &GatewayConfig, results: &GatewayResults, series: GatewaySeries) -> ReplicaOutput {
    let counts = |v: Vec<u64>| v.into_iter().map(u128::from).collect();
    ReplicaOutput {
        metrics: values(&config.resolved().table.0, results),
        series: vec![counts(series.attempts), counts(series.answered)],
        latency_windows: series.latency,
        ..ReplicaOutput::default()
    }
}

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
    resolved: Option<Resolved>,
}

/// The fixture with the scenario's overrides applied, each class's Little's-law pool
/// (the default bulkhead size), and what is named from the fixture: the engine's
/// classes, the metric table and the latency histograms.
#[derive(Clone, Debug, PartialEq)]
struct Resolved {
    fixture: Fixture,
    knobs: GatewayKnobs,
    pools: BTreeMap<String, f64>,
    /// `[load]`'s turns, read once.
    load: Option<stampede_engine::components::arrivals::ArrivalProcess>,
    /// Calls replayed by class (a trace with a class column), in the fixture's class order.
    call_loads: Vec<(String, stampede_engine::components::arrivals::ArrivalProcess)>,
    /// The engine's classes, in its order.
    classes: Vec<EngineClass>,
    table: Arc<MetricTable>,
    latencies: &'static [&'static str],
}

/// One of the engine's classes: a fixture class, or the re-sent copy of one.
#[derive(Clone, Debug, PartialEq)]
struct EngineClass {
    name: &'static str,
    /// The fixture class it is (or copies).
    source: String,
    resent: bool,
}

/// The metric table, built once per scenario.
#[derive(Clone)]
struct MetricTable(Vec<Metric<GatewayResults>>);

impl std::fmt::Debug for MetricTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.0.iter().map(|m| m.def.name)).finish()
    }
}

/// Derived from the classes, which are compared in their own right.
impl PartialEq for MetricTable {
    fn eq(&self, other: &Self) -> bool {
        self.0.iter().map(|m| m.def.name).eq(other.0.iter().map(|m| m.def.name))
    }
}

impl Resolved {
    fn class_names(&self) -> Vec<&'static str> {
        self.classes.iter().map(|c| c.name).collect()
    }

    fn class_index(&self, name: &str) -> usize {
        self.classes.iter().position(|c| c.name == name && !c.resent).expect("a validated class")
    }
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

fn poisson() -> Arrivals {
    Arrivals::Poisson
}

fn is_poisson(arrivals: &Arrivals) -> bool {
    *arrivals == Arrivals::Poisson
}

fn is_zero(value: &f64) -> bool {
    *value == 0.0
}

fn one() -> u32 {
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
    /// Bulkhead slots per class; absent classes get their Little's-law pool from
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

fn default_client() -> ClientName {
    ClientName::Stack
}
fn default_gates() -> Vec<Gate> {
    Gate::ALL.to_vec()
}
fn default_naive_attempts() -> u32 {
    3
}
fn default_naive_timeout() -> f64 {
    60.0
}
fn default_window_samples() -> u32 {
    10
}
fn default_scope() -> LimiterScope {
    LimiterScope::Class
}
fn yes() -> bool {
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
    fn brownout(&self) -> (f64, f64, f64) {
        (self.health.unwrap_or(0.2), self.error_rate.unwrap_or(0.25), self.latency_factor.unwrap_or(1.0))
    }

    /// A rate_limit_step's scales of (requests, input, output) per minute.
    fn quota_scales(&self) -> [f64; 3] {
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

impl GatewayConfig {
    /// Reads the fixture and checks everything that does not depend on `[run]`.
    pub fn resolve(mut self) -> Result<Self> {
        let mut fixture = Fixture::load(self.workload.fixture.as_deref())?;
        override_entries(&mut fixture.tiers, &self.tiers, "tiers")?;
        override_entries(&mut fixture.classes, &self.classes, "classes")?;
        if let Some(turn) = &self.turn {
            fixture.turn = Some(turn.clone());
        }
        fixture.read_inputs()?;
        fixture.validate()?;
        let knobs = overridden(&fixture.gateway, &self.gateway, "gateway")?;
        let pools = capacity::analyse(&fixture, 1.0).classes.into_iter().map(|c| (c.class, c.pool_size)).collect();
        if self.load.is_some() && self.workload.arrivals == Arrivals::Even {
            return Err(Error::bad_input(
                "workload.arrivals = \"even\": with [load], say how turns arrive in load.arrivals",
            ));
        }
        let (load, call_loads) = self.arrivals(&fixture)?;
        let mut classes: Vec<EngineClass> = fixture
            .classes
            .keys()
            .map(|name| EngineClass { name: intern(name.clone()), source: name.clone(), resent: false })
            .collect();
        for name in fixture.resendable() {
            let copy = intern(format!("{name}_fallback"));
            classes.push(EngineClass { name: copy, source: name.into(), resent: true });
        }
        let names: Vec<&str> = classes.iter().map(|c| c.name).collect();
        let main = main_class(&fixture).map(|main| names.iter().position(|n| *n == main).expect("a fixture class"));
        let table = Arc::new(MetricTable(metrics::metric_table(&names, main)));
        let mut latencies = vec!["turn_s", "turn_failed_s", "turn_all_s"];
        for class in classes.iter().filter(|c| !c.resent) {
            for kind in ["ttft", "total", "call", "call_failed", "call_all"] {
                latencies.push(intern(format!("{}_{kind}_s", class.name)));
            }
        }
        let latencies = intern_names(latencies);
        self.resolved = Some(Resolved { fixture, knobs, pools, load, call_loads, classes, table, latencies });
        Ok(self)
    }

    /// Turns from the rate or `[load]`; or, from a trace with a `class_column`, calls
    /// replayed by class (each row one call of its class, outside any turn).
    #[allow(clippy::type_complexity)]
    fn arrivals(&self, fixture: &Fixture) -> Result<(Option<ArrivalProcess>, Vec<(String, ArrivalProcess)>)> {
        use crate::inputs::load::{entry_arrivals, model_arrivals, ArrivalsField, Pick};
        let rate_path = "workload.turns_per_s";
        let trace = match self.load.as_ref().and_then(|l| l.arrivals.as_ref()) {
            Some(ArrivalsField::Trace(trace)) if trace.class_column.is_some() => trace,
            _ => {
                let load = model_arrivals(self.load.as_ref(), self.workload.turns_per_s, rate_path, Some("gateway"))?;
                return Ok((load, Vec::new()));
            }
        };
        let labels = trace.labels("class_column")?;
        if let Some(unknown) = labels.iter().find(|label| !fixture.classes.contains_key(*label)) {
            return Err(Error::bad_input(format!(
                "load.arrivals.class_column: the trace names class {unknown:?}, which the fixture does not have; \
                 classes: {}",
                fixture.classes.keys().map(String::as_str).collect::<Vec<_>>().join(", ")
            )));
        }
        let mut streams = Vec::new();
        for class in fixture.classes.keys().filter(|class| labels.contains(class)) {
            let pick = Pick { field: "class_column", value: class };
            let process =
                entry_arrivals(self.load.as_ref(), self.workload.turns_per_s, rate_path, Some("gateway"), Some(pick))?;
            streams.push((class.clone(), process.expect("a replayed trace")));
        }
        Ok((None, streams))
    }

    fn resolved(&self) -> &Resolved {
        self.resolved.as_ref().expect("resolve() ran when the scenario was loaded")
    }

    /// The fixture with the scenario's overrides applied.
    pub fn fixture(&self) -> &Fixture {
        &self.resolved().fixture
    }

    /// The engine's classes by name: the fixture's, in its order, then each re-sent
    /// copy (`NAME_fallback`). Metric names start with these.
    pub fn class_names(&self) -> Vec<&'static str> {
        self.resolved().class_names()
    }

    /// Checks every section, in order, each error naming its field path.
    pub fn validate(&self, run: &RunConfig) -> Result<()> {
        self.validate_workload()?;
        self.validate_stack()?;
        self.validate_incidents()?;
        self.validate_knobs()?;
        if run.horizon_s <= run.warmup_s {
            return Err(Error::bad_input(format!(
                "run.horizon_s = {}: must exceed run.warmup_s ({})",
                run.horizon_s, run.warmup_s
            )));
        }
        Ok(())
    }

    fn validate_workload(&self) -> Result<()> {
        let w = &self.workload;
        if let Some(turns) = w.turns_per_s.filter(|t| !(t.is_finite() && *t >= 1e-6 && *t <= 1e5)) {
            return Err(Error::bad_input(format!(
                "workload.turns_per_s = {turns}: must be a rate from 1e-6 (one turn in about 12 days) to 100000"
            )));
        }
        if w.tenants == 0 || w.tenants > u16::MAX as u32 {
            return Err(Error::bad_input(format!("workload.tenants = {}: must be from 1 to 65535", w.tenants)));
        }
        if !(0.0..=1.0).contains(&w.hot_tenant_share) {
            return Err(Error::bad_input(format!(
                "workload.hot_tenant_share = {}: must be a fraction from 0 to 1",
                w.hot_tenant_share
            )));
        }
        Ok(())
    }

    fn validate_stack(&self) -> Result<()> {
        let s = &self.stack;
        for (i, gate) in s.gates.iter().enumerate() {
            if s.gates[..i].contains(gate) {
                return Err(Error::bad_input(format!("stack.gates: {:?} is listed twice", gate.name())));
            }
        }
        if s.naive_attempts == 0 {
            return Err(Error::bad_input("stack.naive_attempts = 0: must be at least 1"));
        }
        if !(s.naive_timeout_s.is_finite() && s.naive_timeout_s > 0.0) {
            return Err(Error::bad_input(format!("stack.naive_timeout_s = {}: must be positive", s.naive_timeout_s)));
        }
        if s.limiter_window_samples == 0 {
            return Err(Error::bad_input(
                "stack.limiter_window_samples = 0: must be at least 1 (1 learns from every sample)",
            ));
        }
        if s.max_attempts == Some(0) {
            return Err(Error::bad_input("stack.max_attempts = 0: must be at least 1"));
        }
        let fixture = &self.resolved().fixture;
        let tier_names = || fixture.tiers.keys().map(String::as_str).collect::<Vec<_>>().join(", ");
        let class_names = || fixture.classes.keys().map(String::as_str).collect::<Vec<_>>().join(", ");
        for (class, slots) in &s.bulkhead_slots {
            if !fixture.classes.contains_key(class) || *slots == 0 {
                return Err(Error::bad_input(format!(
                    "stack.bulkhead_slots.{class} = {slots}: needs one of the classes ({}) and at least 1 slot",
                    class_names()
                )));
            }
        }
        let resendable = fixture.resendable();
        for (class, tier) in self.fallback_tiers() {
            let field = if s.fallback_tiers.contains_key(class) {
                format!("stack.fallback_tiers.{class}")
            } else {
                "stack.answer_fallback_tier".into()
            };
            if !fixture.classes.contains_key(class) {
                return Err(Error::bad_input(format!("{field}: no class {class:?}; classes: {}", class_names())));
            }
            if !resendable.contains(&class) {
                return Err(Error::bad_input(format!(
                    "{field}: class {class}'s failed calls are answered otherwise (its fallback or on_failure), \
                     so they are not re-sent; classes that can be: {}",
                    if resendable.is_empty() { "none".into() } else { resendable.join(", ") }
                )));
            }
            if !fixture.tiers.contains_key(tier) {
                return Err(Error::bad_input(format!("{field} = {tier:?}: no such tier; tiers: {}", tier_names())));
            }
        }
        Ok(())
    }

    /// The scenario's re-send tiers by class: `stack.fallback_tiers`, and the seed's
    /// `stack.answer_fallback_tier` for answer.
    fn fallback_tiers(&self) -> Vec<(&str, &str)> {
        let mut tiers: Vec<(&str, &str)> =
            self.stack.fallback_tiers.iter().map(|(class, tier)| (class.as_str(), tier.as_str())).collect();
        if let Some(tier) = &self.stack.answer_fallback_tier {
            if !self.stack.fallback_tiers.contains_key("answer") {
                tiers.push(("answer", tier));
            }
        }
        tiers
    }

    /// The tier class `name`'s failed calls are re-sent to, if any: the scenario's, or
    /// the fixture's `fallback_tier`.
    fn fallback_tier(&self, name: &str) -> Option<&str> {
        let scenario = self.fallback_tiers().into_iter().find(|(class, _)| *class == name).map(|(_, tier)| tier);
        scenario.or(self.resolved().fixture.classes[name].fallback_tier.as_deref())
    }

    fn validate_incidents(&self) -> Result<()> {
        let fixture = &self.resolved().fixture;
        let tier_names = || fixture.tiers.keys().map(String::as_str).collect::<Vec<_>>().join(", ");
        for (i, incident) in self.incidents.iter().enumerate() {
            let coordinator = incident.kind == IncidentName::CoordinatorOutage;
            if coordinator && !incident.tier.is_empty() {
                return Err(Error::bad_input(format!(
                    "incidents[{i}].tier = {:?}: a coordinator_outage strikes the quota coordinator, not a tier",
                    incident.tier
                )));
            }
            if !coordinator && !fixture.tiers.contains_key(&incident.tier) {
                return Err(Error::bad_input(format!(
                    "incidents[{i}].tier = {:?}: no such tier; tiers: {}",
                    incident.tier,
                    tier_names()
                )));
            }
            if !(incident.start_s >= 0.0 && incident.duration_s > 0.0 && incident.start_s.is_finite()) {
                return Err(Error::bad_input(format!(
                    "incidents[{i}]: start_s = {} and duration_s = {} must be a non-negative start and a positive duration",
                    incident.start_s, incident.duration_s
                )));
            }
            match (incident.kind, incident.scale) {
                (IncidentName::CapacityStep, Some(scale)) if scale > 0.0 && scale.is_finite() => {}
                (IncidentName::CapacityStep, scale) => {
                    return Err(Error::bad_input(format!(
                        "incidents[{i}].scale = {scale:?}: a capacity_step needs a positive scale (0.5 halves the tier's slots)"
                    )))
                }
                (_, Some(_)) => {
                    return Err(Error::bad_input(format!(
                        "incidents[{i}].scale: only a capacity_step takes a scale (a brownout's severity is health, error_rate and latency_factor)"
                    )))
                }
                _ => {}
            }
            let brownout = [
                ("health", incident.health),
                ("error_rate", incident.error_rate),
                ("latency_factor", incident.latency_factor),
            ];
            let quota = [
                ("rpm_scale", incident.rpm_scale),
                ("itpm_scale", incident.itpm_scale),
                ("otpm_scale", incident.otpm_scale),
            ];
            let only = |fields: &[(&str, Option<f64>)], kind: IncidentName, what: &str| -> Result<()> {
                match fields.iter().find(|(_, value)| value.is_some()) {
                    Some((field, _)) if incident.kind != kind => Err(Error::bad_input(format!(
                        "incidents[{i}].{field}: only a {} takes it ({what}); this one is {} {}",
                        kind.name(),
                        if incident.kind.name().starts_with(['a', 'e', 'i', 'o', 'u']) { "an" } else { "a" },
                        incident.kind.name()
                    ))),
                    _ => Ok(()),
                }
            };
            only(&brownout, IncidentName::Brownout, "its severity")?;
            only(&quota, IncidentName::RateLimitStep, "the provider's new limits")?;
            let (health, errors, latency) = incident.brownout();
            if !(health > 0.0 && health <= 1.0) {
                return Err(Error::bad_input(format!(
                    "incidents[{i}].health = {health}: the share of the tier's slots left, above 0 and at most 1"
                )));
            }
            if !(0.0..=1.0).contains(&errors) {
                return Err(Error::bad_input(format!(
                    "incidents[{i}].error_rate = {errors}: a share of calls, from 0 to 1"
                )));
            }
            if !(latency > 0.0 && latency.is_finite()) {
                return Err(Error::bad_input(format!(
                    "incidents[{i}].latency_factor = {latency}: a positive multiplier (5 makes answers 5 times slower)"
                )));
            }
            for ((field, _), scale) in quota.iter().zip(incident.quota_scales()) {
                if !(scale > 0.0 && scale.is_finite()) {
                    return Err(Error::bad_input(format!(
                        "incidents[{i}].{field} = {scale}: a positive multiplier of the published limit (0.5 halves it)"
                    )));
                }
            }
            if incident.kind == IncidentName::RateLimitStep && quota.iter().all(|(_, value)| value.is_none()) {
                return Err(Error::bad_input(format!(
                    "incidents[{i}]: a rate_limit_step needs rpm_scale, itpm_scale or otpm_scale (0.5 halves that limit)"
                )));
            }
        }
        Ok(())
    }

    fn validate_knobs(&self) -> Result<()> {
        let knobs = &self.resolved().knobs;
        let ratio = knobs.retry_budget_ratio;
        if !(0.0..=1.0).contains(&ratio) {
            return Err(Error::bad_input(format!(
                "gateway.retry_budget_ratio = {ratio}: must be in [0, 1] (0 funds no retries; stack.retry_budget = false removes the budget)"
            )));
        }
        for (path, value) in [
            ("gateway.no_retry_past_delivered", knobs.no_retry_past_delivered),
            ("gateway.breaker_failure_ratio", knobs.breaker_failure_ratio),
            ("gateway.limiter_headroom", knobs.limiter_headroom),
        ] {
            if !(value > 0.0 && value <= 1.0) {
                return Err(Error::bad_input(format!("{path} = {value}: must be in (0, 1]")));
            }
        }
        for (path, value) in [
            ("gateway.backoff_base_s", knobs.backoff_base_s),
            ("gateway.backoff_cap_s", knobs.backoff_cap_s),
            ("gateway.breaker_window_s", knobs.breaker_window_s),
            ("gateway.breaker_open_s", knobs.breaker_open_s),
            ("gateway.codel_target_s", knobs.codel_target_s),
            ("gateway.codel_interval_s", knobs.codel_interval_s),
        ] {
            if !(value.is_finite() && value > 0.0) {
                return Err(Error::bad_input(format!("{path} = {value}: must be a positive number of seconds")));
            }
        }
        if !(knobs.breaker_open_multiplier >= 1.0 && knobs.breaker_open_multiplier.is_finite()) {
            return Err(Error::bad_input(format!(
                "gateway.breaker_open_multiplier = {}: must be at least 1 (1 keeps the open time constant)",
                knobs.breaker_open_multiplier
            )));
        }
        if knobs.breaker_max_open_s.is_nan() || knobs.breaker_max_open_s < knobs.breaker_open_s {
            return Err(Error::bad_input(format!(
                "gateway.breaker_max_open_s = {}: must be at least gateway.breaker_open_s ({})",
                knobs.breaker_max_open_s, knobs.breaker_open_s
            )));
        }
        if !(0.0..=1.0).contains(&knobs.cache_read_price_weight) {
            return Err(Error::bad_input(format!(
                "gateway.cache_read_price_weight = {}: must be a share of the input price from 0 to 1",
                knobs.cache_read_price_weight
            )));
        }
        if knobs.breaker_half_open_probes == 0 || knobs.fleet_instances == 0 || knobs.adaptive_initial_limit == 0 {
            return Err(Error::bad_input(
                "gateway.breaker_half_open_probes, gateway.fleet_instances and gateway.adaptive_initial_limit must be at least 1",
            ));
        }
        if !knobs.ladder_rungs.windows(2).all(|w| w[0] <= w[1]) {
            return Err(Error::bad_input(format!("gateway.ladder_rungs = {:?}: must ascend", knobs.ladder_rungs)));
        }
        fixture::check_ladder(&knobs.ladder_classes, &self.resolved().fixture.classes)?;
        queue_order(&knobs.bulkhead_queue)?;
        limiter_name(&knobs.adaptive_kind)?;
        Ok(())
    }

    /// Valid input that would mislead: a quota burst still being spent in the measured
    /// window, a ladder that sheds a class the turn cannot do without before the cap.
    pub fn warnings(&self, run: &RunConfig) -> Vec<String> {
        let Resolved { fixture, knobs, .. } = self.resolved();
        let turns = self.turns_per_s(run);
        let mut warnings = Vec::new();
        // Per tier, the meter whose starting burst lasts longest.
        let mut drains = capacity::burst_drains(fixture, turns);
        drains.sort_by(|a, b| a.tier.cmp(&b.tier).then(b.drain_s.total_cmp(&a.drain_s)));
        drains.dedup_by(|a, b| a.tier == b.tier);
        for drain in drains.into_iter().filter(|d| run.warmup_s < d.drain_s) {
            let burst_s = fixture.tiers[&drain.tier].burst_s;
            warnings.push(format!(
                "tier {}: {turns} turns/s ask its {} meter for {:.0} a minute, more than its {:.0} refill, and the \
                 meter starts full (burst_s = {burst_s} s of refill), which lasts about {:.0} s at that load; with \
                 run.warmup_s = {} the measured window still spends the burst and shows more throughput than the \
                 quota sustains: set run.warmup_s to at least {:.0} (the burst ÷ what the load takes beyond the refill)",
                drain.tier,
                drain.meter.name(),
                drain.asked_per_minute,
                drain.limit_per_minute,
                drain.drain_s.ceil(),
                run.warmup_s,
                drain.drain_s.ceil()
            ));
        }
        // A class the turn cannot do without (its failure fails the turn, or it is
        // marked critical_plus) shed before the cap fails turns while capacity is left.
        let fails_turn = fixture.resendable();
        let ladder_on = self.stack.client == ClientName::Stack && self.stack.gates.contains(&Gate::Admission);
        for (rung, critical) in knobs.ladder_classes.iter().enumerate().filter(|(rung, _)| rung + 1 < 4 && ladder_on) {
            let class = &fixture.classes[critical];
            let why = if fails_turn.contains(&critical.as_str()) {
                format!("a turn fails when its {critical} call is refused")
            } else if class.criticality == Criticality::CriticalPlus {
                format!("{critical} is critical_plus")
            } else {
                continue;
            };
            warnings.push(format!(
                "gateway.ladder_classes puts {critical} on rung {} (pressure ≥ {}): {why}, so the ladder will fail \
                 turns before the cap; put it last (the shipped ladder is {:?})",
                rung + 1,
                knobs.ladder_rungs[rung],
                ["title", "rewrite", "think", "answer"]
            ));
        }
        warnings
    }

    /// Turns per second: `workload.turns_per_s`, or `[load]`'s mean over the run; 0
    /// when `[load]` replays calls, not turns.
    pub fn turns_per_s(&self, run: &RunConfig) -> f64 {
        if !self.resolved().call_loads.is_empty() {
            return 0.0;
        }
        match (self.workload.turns_per_s, &self.resolved().load) {
            (Some(turns), _) => turns,
            (None, Some(load)) => crate::inputs::load::mean_rate(load, run.horizon_s),
            (None, None) => unreachable!("resolve() refuses a workload without a rate"),
        }
    }

    /// The engine's parameters for one replica.
    pub fn params(&self, run: &RunConfig) -> GatewayParams {
        let knobs = &self.resolved().knobs;
        GatewayParams {
            tiers: self.tiers(),
            classes: self.classes(),
            class_names: self.resolved().class_names(),
            plan: self.plan(),
            turns_per_s: self.turns_per_s(run),
            arrivals: self.workload.arrivals,
            load: self.resolved().load.clone(),
            call_arrivals: self
                .resolved()
                .call_loads
                .iter()
                .map(|(class, process)| (self.resolved().class_index(class), process.clone()))
                .collect(),
            tenants: self.workload.tenants,
            hot_tenant_share: if self.workload.tenants > 1 { self.workload.hot_tenant_share } else { 0.0 },
            instances: knobs.fleet_instances,
            client: match self.stack.client {
                ClientName::Stack => Client::Stack,
                ClientName::Naive => Client::Naive {
                    attempts: self.stack.naive_attempts,
                    timeout: secs_to_nanos(self.stack.naive_timeout_s),
                },
            },
            gates: self.stack.gates.clone(),
            ladder: Ladder { rungs: knobs.ladder_rungs, ..Ladder::default() },
            limiter: self.limiter(),
            limiter_scope: self.stack.limiter_scope,
            limiter_window: (self.stack.limiter_window_samples > 1)
                .then_some(SampleWindow { min_samples: self.stack.limiter_window_samples, ..SampleWindow::default() }),
            breaker: self.breaker(),
            quota: QuotaConfig {
                headroom: knobs.limiter_headroom,
                longest_wait: secs_to_nanos(knobs.limiter_longest_wait_s),
                instances: knobs.fleet_instances,
                coordinated: knobs.coordinated_quota,
            },
            reconcile: self.stack.reconcile,
            retry_budget: self.stack.retry_budget.then_some(knobs.retry_budget_ratio),
            classifier: if knobs.honour_retry_after {
                RetryClassifier::default()
            } else {
                RetryClassifier {
                    rate_limited: RetryDecision::Retry,
                    overloaded: RetryDecision::Retry,
                    ..RetryClassifier::default()
                }
            },
            no_retry_past_delivered: knobs.no_retry_past_delivered,
            bulkhead_order: queue_order(&knobs.bulkhead_queue).expect("validated"),
            codel: Some(CoDelConfig {
                target: secs_to_nanos(knobs.codel_target_s),
                interval: secs_to_nanos(knobs.codel_interval_s),
            }),
            incidents: self.incidents(),
            cache_itpm_weight: knobs.cache_read_itpm_weight,
            cache_price_weight: knobs.cache_read_price_weight,
            warmup: secs_to_nanos(run.warmup_s),
            horizon: secs_to_nanos(run.horizon_s),
            series_bucket: secs_to_nanos(SERIES_BUCKET_S),
        }
    }

    /// The index of tier `name` in the fixture's (sorted) tier order.
    fn tier_index(&self, name: &str) -> usize {
        self.resolved().fixture.tiers.keys().position(|t| t == name).expect("validated tier")
    }

    fn tiers(&self) -> Vec<TierParams> {
        let fixture = &self.resolved().fixture;
        fixture
            .tiers
            .values()
            .map(|t| TierParams {
                spec: TierSpec {
                    rpm: t.rpm,
                    itpm: t.itpm,
                    otpm: t.otpm,
                    prefill_tokens_per_s: t.prefill_tokens_per_s,
                    decode_tokens_per_s: t.decode_tokens_per_s,
                    base_latency_s: t.base_latency_s,
                    server_slots: t.server_slots,
                    burst_s: t.burst_s,
                },
                usd_per_mtok_in: t.usd_per_mtok_in,
                usd_per_mtok_out: t.usd_per_mtok_out,
                error_rate: t.error_rate,
                ttft: t.ttft.clone(),
            })
            .collect()
    }

    /// One class's parameters from the fixture, the ladder and the bulkhead pools.
    fn class(&self, name: &str) -> ClassParams {
        let Resolved { fixture, knobs, pools, .. } = self.resolved();
        let c = &fixture.classes[name];
        let shed_from_rung = knobs.ladder_classes.iter().position(|n| n == name).map_or(5, |rung| rung as u8 + 1);
        let computed = pools.get(name).copied().unwrap_or(1.0);
        let slots = self.stack.bulkhead_slots.get(name).copied().unwrap_or(computed.ceil().max(4.0) as u32);
        ClassParams {
            tier: self.tier_index(&c.tier),
            share: c.calls_per_turn.min(1.0),
            input_tokens: (c.input_tokens.mean, c.input_tokens.sd),
            output_tokens: (c.output_tokens.mean, c.output_tokens.sd),
            max_tokens: c.max_tokens(),
            streamed: c.streamed,
            deadline: secs_to_nanos(c.deadline_s),
            timeouts: Timeouts {
                connect: secs_to_nanos(c.timeouts_s.connect),
                first_token: secs_to_nanos(c.timeouts_s.first_token),
                inter_token: c.timeouts_s.inter_token.map(secs_to_nanos),
                total: secs_to_nanos(c.timeouts_s.total),
            },
            max_attempts: self.stack.max_attempts.map_or(c.max_attempts, |cap| cap.min(c.max_attempts)),
            shed_from_rung,
            has_fallback: c.has_fallback(),
            fallback: None,
            latency: true,
            bulkhead_slots: slots,
            bulkhead_queue: slots,
            backoff: c.backoff.with(secs_to_nanos(knobs.backoff_base_s), secs_to_nanos(knobs.backoff_cap_s)),
            cache_hit_ratio: c.cache_hit_ratio,
            cacheable_prefix: c.cacheable_prefix,
        }
    }

    /// The engine's classes: the fixture's, each with its fallback class, then the
    /// re-sent copies (on their fallback tier, when one is set).
    fn classes(&self) -> Vec<ClassParams> {
        let resolved = self.resolved();
        let mut classes: Vec<ClassParams> = resolved.classes.iter().map(|c| self.class(&c.source)).collect();
        for (i, engine) in resolved.classes.iter().enumerate() {
            let fixture_class = &resolved.fixture.classes[&engine.source];
            if engine.resent {
                classes[i].latency = false;
                classes[i].has_fallback = false;
                let source = resolved.class_index(&engine.source);
                match self.fallback_tier(&engine.source) {
                    Some(tier) => {
                        classes[i].tier = self.tier_index(tier);
                        classes[source].has_fallback = true;
                        classes[source].fallback = Some(i);
                    }
                    // Unused: the class's failures are not re-sent.
                    None => classes[source].has_fallback = fixture_class.has_fallback(),
                }
            } else if let Some(next) = fixture_class.fallback_class() {
                classes[i].fallback = Some(resolved.class_index(next));
            }
        }
        classes
    }

    /// The turn plan, names turned into class indexes.
    fn plan(&self) -> TurnPlan {
        let resolved = self.resolved();
        let steps = resolved.fixture.steps();
        let mut slots: Vec<(String, Option<String>)> = Vec::new();
        let mut plan = Vec::new();
        for (calls, background) in steps {
            let mut planned = Vec::new();
            for call in &calls {
                let needs = call.needs.as_ref().map(|needs| {
                    slots.iter().position(|(c, o)| c == needs || o.as_ref() == Some(needs)).expect("validated")
                });
                planned.push(PlannedCall {
                    class: resolved.class_index(&call.call),
                    probability: call.probability,
                    otherwise: call.otherwise.as_ref().map(|o| resolved.class_index(o)),
                    required: call.required.unwrap_or(true),
                    needs,
                });
            }
            slots.extend(calls.into_iter().map(|c| (c.call, c.otherwise)));
            plan.push((planned, background));
        }
        TurnPlan::new(plan)
    }

    fn limiter(&self) -> LimiterKind {
        let knobs = &self.resolved().knobs;
        let initial = knobs.adaptive_initial_limit as f64;
        match self.stack.limiter.unwrap_or_else(|| limiter_name(&knobs.adaptive_kind).expect("validated")) {
            LimiterName::Fixed => LimiterKind::Fixed { limit: knobs.adaptive_initial_limit },
            LimiterName::Aimd => {
                LimiterKind::Aimd(AimdConfig { initial, min: 1.0, max: 1000.0, ..AimdConfig::default() })
            }
            LimiterName::Gradient => {
                LimiterKind::Gradient(GradientConfig { initial, min: 1.0, max: 1000.0, ..GradientConfig::default() })
            }
            LimiterName::Gradient2 => {
                LimiterKind::Gradient2(Gradient2Config { initial, min: 1.0, max: 1000.0, ..Gradient2Config::default() })
            }
        }
    }

    fn breaker(&self) -> BreakerConfig {
        let knobs = &self.resolved().knobs;
        let open = secs_to_nanos(knobs.breaker_open_s);
        BreakerConfig {
            window: SlidingWindow::Time { window: secs_to_nanos(knobs.breaker_window_s), buckets: 12 },
            minimum_calls: knobs.breaker_minimum_calls,
            failure_rate_threshold: knobs.breaker_failure_ratio,
            slow_call_rate_threshold: 2.0, // slow calls are the timeouts' business
            slow_call_duration: open,
            open_duration: open,
            open_duration_multiplier: knobs.breaker_open_multiplier,
            max_open_duration: secs_to_nanos(knobs.breaker_max_open_s),
            half_open_probes: knobs.breaker_half_open_probes,
            count_rate_limited: knobs.breaker_counts_429,
        }
    }

    fn incidents(&self) -> Vec<Incident> {
        self.incidents
            .iter()
            .map(|i| Incident {
                tier: if i.kind == IncidentName::CoordinatorOutage { 0 } else { self.tier_index(&i.tier) },
                kind: match i.kind {
                    IncidentName::Brownout => {
                        let (health, error_rate, latency_factor) = i.brownout();
                        IncidentKind::Brownout { health, error_rate, latency_factor }
                    }
                    IncidentName::RateLimitStep => IncidentKind::RateLimitStep { scales: i.quota_scales() },
                    IncidentName::Outage => IncidentKind::Outage,
                    IncidentName::CapacityStep => IncidentKind::CapacityStep { scale: i.scale.expect("validated") },
                    IncidentName::CoordinatorOutage => IncidentKind::CoordinatorOutage,
                },
                start: secs_to_nanos(i.start_s),
                end: secs_to_nanos(i.start_s + i.duration_s),
            })
            .collect()
    }
}

/// `base` with `overrides` (field → value) merged over it, re-typed so that a wrong
/// field is named with its path (`section`).
fn overridden<T>(base: &T, overrides: &toml::Table, section: &str) -> Result<T>
where
    T: Serialize + serde::de::DeserializeOwned,
{
    let toml::Value::Table(mut merged) = toml::Value::try_from(base).expect("fixture entries serialise") else {
        unreachable!("a struct serialises to a table")
    };
    merged.extend(overrides.iter().map(|(key, value)| (key.clone(), value.clone())));
    typed_at(section, toml::Value::Table(merged))
}

/// A fixture's named entries: its tiers (sorted) or its classes (in order).
trait Entries<T> {
    fn get(&self, name: &str) -> Option<&T>;
    /// Replaces an entry in place.
    fn put(&mut self, name: String, entry: T);
    fn names(&self) -> Vec<&str>;
}

impl<T> Entries<T> for BTreeMap<String, T> {
    fn get(&self, name: &str) -> Option<&T> {
        BTreeMap::get(self, name)
    }
    fn put(&mut self, name: String, entry: T) {
        self.insert(name, entry);
    }
    fn names(&self) -> Vec<&str> {
        self.keys().map(String::as_str).collect()
    }
}

impl<T> Entries<T> for indexmap::IndexMap<String, T> {
    fn get(&self, name: &str) -> Option<&T> {
        indexmap::IndexMap::get(self, name)
    }
    fn put(&mut self, name: String, entry: T) {
        self.insert(name, entry); // an existing key keeps its place
    }
    fn names(&self) -> Vec<&str> {
        self.keys().map(String::as_str).collect()
    }
}

/// Applies `overrides` (`name → {field = value}`) to the fixture's `entries`.
fn override_entries<T>(entries: &mut impl Entries<T>, overrides: &toml::Table, section: &str) -> Result<()>
where
    T: Serialize + serde::de::DeserializeOwned,
{
    for (name, fields) in overrides {
        let Some(entry) = entries.get(name) else {
            return Err(Error::bad_input(format!(
                "{section}.{name}: the fixture has no such entry; it has: {}",
                entries.names().join(", ")
            )));
        };
        let toml::Value::Table(fields) = fields else {
            return Err(Error::bad_input(format!("{section}.{name}: must be a table of fields")));
        };
        let entry = overridden(entry, fields, &format!("{section}.{name}"))?;
        entries.put(name.clone(), entry);
    }
    Ok(())
}

/// The class most turns end on: the likelier call of the last step the turn waits
/// for (the first call of a parallel group). Its call p95 is a headline.
fn main_class(fixture: &Fixture) -> Option<&str> {
    let steps = fixture.steps();
    let (calls, _) = steps.iter().rev().find(|(_, background)| !background)?;
    let call = calls.first()?;
    let probability = call.probability.unwrap_or(fixture.classes[&call.call].calls_per_turn.min(1.0));
    let name = match &call.otherwise {
        Some(otherwise) if probability < 0.5 => otherwise,
        _ => &call.call,
    };
    Some(fixture.classes.get_key_value(name).expect("validated").0.as_str())
}

fn queue_order(name: &str) -> Result<QueueOrder> {
    match name {
        "fifo" => Ok(QueueOrder::Fifo),
        "lifo" => Ok(QueueOrder::Lifo),
        "adaptive_lifo" => Ok(QueueOrder::AdaptiveLifo { standing_after: secs_to_nanos(0.1) }),
        other => Err(Error::bad_input(format!(
            "gateway.bulkhead_queue = {other:?}: unknown queue order; use fifo, lifo or adaptive_lifo"
        ))),
    }
}

fn limiter_name(name: &str) -> Result<LimiterName> {
    LimiterName::from_name(name).ok_or_else(|| {
        Error::bad_input(format!(
            "gateway.adaptive_kind = {name:?}: unknown limiter; use fixed, aimd, gradient or gradient2"
        ))
    })
}
