//! From the sections to the engine: the fixture with the scenario's overrides applied
//! and what is named from it ([`Resolved`], worked out once when the scenario is
//! loaded), then a replica's [`GatewayParams`] — tiers, classes, the turn plan, the
//! limiter, the breaker and the incidents.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;
use stampede_engine::components::arrivals::ArrivalProcess;
use stampede_engine::components::provider::TierSpec;
use stampede_engine::kernel::Named;
use stampede_engine::models::gateway::{
    Arrivals, ClassParams, Client, GatewayParams, Incident, IncidentKind, PlannedCall, TierParams, Timeouts, TurnPlan,
};
use stampede_engine::policy::admission::Ladder;
use stampede_engine::policy::breaker::{BreakerConfig, SlidingWindow};
use stampede_engine::policy::bulkhead::{CoDelConfig, QueueOrder};
use stampede_engine::policy::classify::{RetryClassifier, RetryDecision};
use stampede_engine::policy::limiter::{AimdConfig, Gradient2Config, GradientConfig, LimiterKind, SampleWindow};
use stampede_engine::policy::quota::QuotaConfig;
use stampede_engine::secs_to_nanos;

use super::fixture::Fixture;
use super::resolved::{EngineClass, MetricTable, Resolved};
use super::schema::*;
use super::SERIES_BUCKET_S;
use super::{capacity, metrics};
use crate::base::error::{Error, Result};
use crate::base::typing::typed_at;
use crate::models::metrics::{intern, intern_names};
use crate::scenario::RunConfig;

/// The fewest slots a default bulkhead has: a class the capacity arithmetic sees almost
/// no calls of still gets room for a few at once.
pub const MIN_BULKHEAD_SLOTS: u32 = 4;

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
        // Pools for the re-sent copies on the tiers the scenario sends them to
        // (`stack.fallback_tiers`), not only the fixture's `fallback_tier`s.
        let mut sized = fixture.clone();
        for (class, tier) in self.fallback_tiers() {
            if let Some(class) = sized.classes.get_mut(class).filter(|_| sized.tiers.contains_key(tier)) {
                class.fallback_tier = Some(tier.to_string());
            }
        }
        let pools = capacity::pools(&sized);
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
        let table = Arc::new(MetricTable(metrics::metric_table(&names, main, self.workload.tenants)));
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
    pub(super) fn arrivals(
        &self,
        fixture: &Fixture,
    ) -> Result<(Option<ArrivalProcess>, Vec<(String, ArrivalProcess)>)> {
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

    pub(super) fn resolved(&self) -> &Resolved {
        self.resolved.as_ref().expect("resolve() ran when the scenario was loaded")
    }

    /// The fixture with the scenario's overrides applied.
    pub fn fixture(&self) -> &Fixture {
        &self.resolved().fixture
    }

    /// The gateway's knobs: the fixture's `[gateway]` with the scenario's overrides.
    pub fn knobs(&self) -> &super::fixture::Gateway {
        &self.resolved().knobs
    }

    /// The engine's classes by name: the fixture's, in its order, then each re-sent
    /// copy (`NAME_fallback`). Metric names start with these.
    pub fn class_names(&self) -> Vec<&'static str> {
        self.resolved().class_names()
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
    pub(super) fn tier_index(&self, name: &str) -> usize {
        self.resolved().fixture.tiers.keys().position(|t| t == name).expect("validated tier")
    }

    pub(super) fn tiers(&self) -> Vec<TierParams> {
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
                    burst_s: t.bursts_s(),
                },
                usd_per_mtok_in: t.usd_per_mtok_in,
                usd_per_mtok_out: t.usd_per_mtok_out,
                error_rate: t.error_rate,
                ttft: t.ttft.clone(),
            })
            .collect()
    }

    /// One class's parameters from the fixture, the ladder and the bulkhead pools:
    /// `engine_name` is the class's own or its re-sent copy's (`reply_fallback`), whose
    /// bulkhead is its own (`stack.bulkhead_slots.reply_fallback`).
    pub(super) fn class(&self, name: &str, engine_name: &str) -> ClassParams {
        let Resolved { fixture, knobs, pools, .. } = self.resolved();
        let c = &fixture.classes[name];
        let shed_from_rung = knobs.ladder_classes.iter().position(|n| n == name).map_or(5, |rung| rung as u8 + 1);
        let (slots, pressure_slots) = self.bulkhead_slots(engine_name, pools);
        ClassParams {
            tier: self.tier_index(&c.tier),
            share: c.share(),
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
            pressure_slots,
            bulkhead_queue: slots,
            backoff: c.backoff.with(secs_to_nanos(knobs.backoff_base_s), secs_to_nanos(knobs.backoff_cap_s)),
            cache_hit_ratio: c.cache_hit_ratio,
            cacheable_prefix: c.cacheable_prefix,
        }
    }

    /// A class's bulkhead slots and the slots its pressure is measured against: the
    /// scenario's (both), or the default, capacity's pool for it (the p99 of its calls
    /// in flight at its sustainable rate, and their mean), at least
    /// [`MIN_BULKHEAD_SLOTS`]; `tower`'s gateway is built from the same parameters.
    pub(super) fn bulkhead_slots(&self, engine_name: &str, pools: &BTreeMap<String, capacity::Pool>) -> (u32, u32) {
        if let Some(&given) = self.stack.bulkhead_slots.get(engine_name) {
            return (given, given);
        }
        let pool = pools.get(engine_name).copied().unwrap_or(capacity::Pool { slots: 1.0, mean_in_flight: 1.0 });
        let at_least = |x: f64| (x.ceil() as u32).max(MIN_BULKHEAD_SLOTS);
        (at_least(pool.slots), at_least(pool.mean_in_flight))
    }

    /// The engine's classes: the fixture's, each with its fallback class, then the
    /// re-sent copies (on their fallback tier, when one is set).
    pub(super) fn classes(&self) -> Vec<ClassParams> {
        let resolved = self.resolved();
        let mut classes: Vec<ClassParams> = resolved.classes.iter().map(|c| self.class(&c.source, c.name)).collect();
        for (i, engine) in resolved.classes.iter().enumerate() {
            let fixture_class = &resolved.fixture.classes[&engine.source];
            if engine.resent {
                classes[i].latency = false;
                classes[i].has_fallback = false;
                // Another model's prompt cache has not seen this prefix.
                classes[i].cache_hit_ratio = fixture_class.fallback_cache_hit_ratio;
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
    pub(super) fn plan(&self) -> TurnPlan {
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

    pub(super) fn limiter(&self) -> LimiterKind {
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

    pub(super) fn breaker(&self) -> BreakerConfig {
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

    pub(super) fn incidents(&self) -> Vec<Incident> {
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
pub(super) fn overridden<T>(base: &T, overrides: &toml::Table, section: &str) -> Result<T>
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
pub(super) trait Entries<T> {
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
pub(super) fn override_entries<T>(entries: &mut impl Entries<T>, overrides: &toml::Table, section: &str) -> Result<()>
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
pub(super) fn main_class(fixture: &Fixture) -> Option<&str> {
    let steps = fixture.steps();
    let (calls, _) = steps.iter().rev().find(|(_, background)| !background)?;
    let call = calls.first()?;
    let probability = call.probability.unwrap_or(fixture.classes[&call.call].share());
    let name = match &call.otherwise {
        Some(otherwise) if probability < 0.5 => otherwise,
        _ => &call.call,
    };
    Some(fixture.classes.get_key_value(name).expect("validated").0.as_str())
}

pub(super) fn queue_order(name: &str) -> Result<QueueOrder> {
    match name {
        "fifo" => Ok(QueueOrder::Fifo),
        "lifo" => Ok(QueueOrder::Lifo),
        "adaptive_lifo" => Ok(QueueOrder::AdaptiveLifo { standing_after: secs_to_nanos(0.1) }),
        other => Err(Error::bad_input(format!(
            "gateway.bulkhead_queue = {other:?}: unknown queue order; use fifo, lifo or adaptive_lifo"
        ))),
    }
}

pub(super) fn limiter_name(name: &str) -> Result<LimiterName> {
    LimiterName::from_name(name).ok_or_else(|| {
        Error::bad_input(format!(
            "gateway.adaptive_kind = {name:?}: unknown limiter; use fixed, aimd, gradient or gradient2"
        ))
    })
}
