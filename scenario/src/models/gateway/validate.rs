//! The gateway's checks: every refusal names its field, the value and what is allowed;
//! and its warnings, valid input that would likely mislead.

use stampede_engine::kernel::Named;
use stampede_engine::models::gateway::Gate;
use stampede_engine::policy::quota::{client_bucket, QuotaConfig};
use stampede_engine::policy::Criticality;
use stampede_engine::secs_to_nanos;

use super::build::*;
use super::resolved::Resolved;
use super::schema::*;
use super::{capacity, fixture};
use crate::base::error::{Error, Result};
use crate::scenario::RunConfig;

/// A quota burst still spent in the measured window is warned of when it adds at
/// least this share to the window's throughput (below it, the run's figures are
/// within their noise of the quota's steady state).
pub const BURST_INFLATION_WARNED: f64 = 0.01;

impl GatewayConfig {
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

    pub(super) fn validate_workload(&self) -> Result<()> {
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

    pub(super) fn validate_stack(&self) -> Result<()> {
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
        // Every class the engine runs has a bulkhead: the fixture's, and the re-sent
        // copies (`reply_fallback`) of those whose failures go to another tier.
        let engine_classes: Vec<&str> = self.resolved().classes.iter().map(|c| c.name).collect();
        for (class, slots) in &s.bulkhead_slots {
            if !engine_classes.contains(&class.as_str()) || *slots == 0 {
                return Err(Error::bad_input(format!(
                    "stack.bulkhead_slots.{class} = {slots}: needs one of the classes ({}) and at least 1 slot",
                    engine_classes.join(", ")
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
            fixture::check_fits(class, &fixture.classes[class], tier, &fixture.tiers[tier], &field)
                .map_err(|e| Error::bad_input(format!("{field} = {tier:?}: {}", e.message)))?;
        }
        Ok(())
    }

    /// The scenario's re-send tiers by class: `stack.fallback_tiers`, and the seed's
    /// `stack.answer_fallback_tier` for answer.
    pub(super) fn fallback_tiers(&self) -> Vec<(&str, &str)> {
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
    pub(super) fn fallback_tier(&self, name: &str) -> Option<&str> {
        let scenario = self.fallback_tiers().into_iter().find(|(class, _)| *class == name).map(|(_, tier)| tier);
        scenario.or(self.resolved().fixture.classes[name].fallback_tier.as_deref())
    }

    pub(super) fn validate_incidents(&self) -> Result<()> {
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
            incident.check_kind_fields(i)?;
            incident.check_severity(i)?;
        }
        Ok(())
    }

    pub(super) fn validate_knobs(&self) -> Result<()> {
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
        self.validate_client_quota()
    }

    /// With the quota gate, the client's own output bucket (the provider's × the
    /// headroom, ÷ the fleet when not coordinated) must hold each class's `max_tokens`
    /// on every tier it is sent to: otherwise the gate refuses every such call locally,
    /// and the provider, which would take it, never sees one.
    fn validate_client_quota(&self) -> Result<()> {
        if self.stack.client != ClientName::Stack || !self.stack.gates.contains(&Gate::Quota) {
            return Ok(());
        }
        let Resolved { fixture, knobs, .. } = self.resolved();
        let config = QuotaConfig {
            headroom: knobs.limiter_headroom,
            longest_wait: 0,
            instances: knobs.fleet_instances,
            coordinated: knobs.coordinated_quota,
        };
        let share = if config.coordinated { 1 } else { config.instances };
        for (name, class) in &fixture.classes {
            let tiers = std::iter::once(class.tier.as_str()).chain(self.fallback_tier(name));
            for tier_name in tiers {
                let tier = &fixture.tiers[tier_name];
                let (bucket, _) = client_bucket(tier.otpm, &config, secs_to_nanos(tier.bursts_s()[2]));
                let max_tokens = class.max_tokens();
                if max_tokens > bucket {
                    let fleet = if share > 1 { format!(" ÷ {share} instances") } else { String::new() };
                    return Err(Error::bad_input(format!(
                        "classes.{name}.{}: more than the client quota's output bucket holds on \
                         tier {tier_name} (otpm {} × gateway.limiter_headroom {}{fleet} × {} s of burst ÷ 60 = {bucket} \
                         tokens), so the quota gate refuses every {name} call there; lower max_tokens, raise \
                         gateway.limiter_headroom or tiers.{tier_name}.output_burst_s",
                        class.max_tokens_quoted(),
                        tier.otpm,
                        knobs.limiter_headroom,
                        tier.bursts_s()[2]
                    )));
                }
            }
        }
        Ok(())
    }

    /// Valid input that would mislead: a quota burst still being spent in the measured
    /// window (when it adds at least [`BURST_INFLATION_WARNED`] to the measured
    /// throughput), a ladder that sheds a class the turn cannot do without before the cap.
    pub fn warnings(&self, run: &RunConfig) -> Vec<String> {
        let Resolved { fixture, knobs, .. } = self.resolved();
        let turns = self.turns_per_s(run);
        let mut warnings = capacity::warnings(fixture);
        // Per tier, the meter whose starting burst lasts longest.
        let mut drains = capacity::burst_drains(fixture, turns);
        drains.sort_by(|a, b| a.tier.cmp(&b.tier).then(b.drain_s.total_cmp(&a.drain_s)));
        drains.dedup_by(|a, b| a.tier == b.tier);
        let measured_s = run.horizon_s - run.warmup_s;
        for drain in drains.into_iter().filter(|d| run.warmup_s < d.drain_s) {
            // What the burst left at the warm-up's end adds to the measured window's
            // throughput, as a share of what the quota sustains: a load just above
            // the refill (902 a minute against 900) drains the burst over hours but
            // adds at most 0.2% — not worth a warning, nor a warm-up of 30,001 s.
            let (limit_per_s, excess_per_s) =
                (drain.limit_per_minute / 60.0, (drain.asked_per_minute - drain.limit_per_minute) / 60.0);
            let left = (drain.burst_s * limit_per_s - excess_per_s * run.warmup_s).max(0.0);
            let inflation = left.min(excess_per_s * measured_s) / (limit_per_s * measured_s);
            if inflation < BURST_INFLATION_WARNED {
                continue;
            }
            let burst_s = drain.burst_s;
            warnings.push(format!(
                "tier {}: {turns} turns/s ask its {} meter for {:.0} a minute, more than its {:.0} refill, and the \
                 meter starts full (burst_s = {burst_s} s of refill), which lasts about {:.0} s at that load; with \
                 run.warmup_s = {} the measured window still spends the burst and shows up to {:.0}% more throughput \
                 than the quota sustains: set run.warmup_s to at least {:.0} (the burst ÷ what the load takes beyond \
                 the refill)",
                drain.tier,
                drain.meter.name(),
                drain.asked_per_minute,
                drain.limit_per_minute,
                drain.drain_s.ceil(),
                run.warmup_s,
                (100.0 * inflation).ceil(),
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
}

/// An incident's brownout fields.
fn brownout_fields(incident: &IncidentSection) -> [(&'static str, Option<f64>); 3] {
    [("health", incident.health), ("error_rate", incident.error_rate), ("latency_factor", incident.latency_factor)]
}

/// An incident's quota fields.
fn quota_fields(incident: &IncidentSection) -> [(&'static str, Option<f64>); 3] {
    [("rpm_scale", incident.rpm_scale), ("itpm_scale", incident.itpm_scale), ("otpm_scale", incident.otpm_scale)]
}

impl IncidentSection {
    /// Only a capacity step takes a scale (positive), only a brownout its severity, only
    /// a rate-limit step the provider's new limits.
    fn check_kind_fields(&self, i: usize) -> Result<()> {
        match (self.kind, self.scale) {
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
        let (brownout, quota) = (brownout_fields(self), quota_fields(self));
        let only = |fields: &[(&str, Option<f64>)], kind: IncidentName, what: &str| -> Result<()> {
            match fields.iter().find(|(_, value)| value.is_some()) {
                Some((field, _)) if self.kind != kind => Err(Error::bad_input(format!(
                    "incidents[{i}].{field}: only a {} takes it ({what}); this one is {} {}",
                    kind.name(),
                    if self.kind.name().starts_with(['a', 'e', 'i', 'o', 'u']) { "an" } else { "a" },
                    self.kind.name()
                ))),
                _ => Ok(()),
            }
        };
        only(&brownout, IncidentName::Brownout, "its severity")?;
        only(&quota, IncidentName::RateLimitStep, "the provider's new limits")?;
        Ok(())
    }

    /// A brownout's health, error rate and latency factor, and a rate-limit step's
    /// scales, in range (the defaults of the fields not given are).
    fn check_severity(&self, i: usize) -> Result<()> {
        let quota = quota_fields(self);
        let (health, errors, latency) = self.brownout();
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
        for ((field, _), scale) in quota.iter().zip(self.quota_scales()) {
            if !(scale > 0.0 && scale.is_finite()) {
                return Err(Error::bad_input(format!(
                    "incidents[{i}].{field} = {scale}: a positive multiplier of the published limit (0.5 halves it)"
                )));
            }
        }
        if self.kind == IncidentName::RateLimitStep && quota.iter().all(|(_, value)| value.is_none()) {
            return Err(Error::bad_input(format!(
                "incidents[{i}]: a rate_limit_step needs rpm_scale, itpm_scale or otpm_scale (0.5 halves that limit)"
            )));
        }
        Ok(())
    }
}
