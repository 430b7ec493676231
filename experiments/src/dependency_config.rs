//! The scenario sections of the `dependency` model (seed 002): `[service]`,
//! `[dependency]`, `[protection]`, `[series]`.

use serde::{Deserialize, Serialize};
use stampede_engine::models::dependency::DependencyParams;
use stampede_engine::policy::breaker::{BreakerConfig, SlidingWindow};
use stampede_engine::policy::shedder::ShedMarks;
use stampede_engine::secs_to_nanos;

use crate::cluster_config::SeriesConfig;
use crate::error::{Error, Result};
use crate::scenario::RunConfig;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DependencyConfig {
    pub service: ServiceSection,
    pub dependency: DependencySection,
    pub protection: ProtectionSection,
    #[serde(default)]
    pub series: SeriesConfig,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServiceSection {
    pub arrival_rate_per_s: f64,
    /// Shares of high, normal and low priority requests; they must add up to 1.
    pub priority_shares: [f64; 3],
    pub workers: u32,
    pub queue_capacity: u32,
    pub client_timeout_s: f64,
    pub local_work_s: f64,
    /// The service's timeout on each dependency call.
    pub call_timeout_s: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DependencySection {
    pub healthy_latency_s: f64,
    pub slow_latency_s: f64,
    pub slow_start_s: f64,
    pub slow_duration_s: f64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProtectionName {
    None,
    Breaker,
    Shedder,
    Both,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProtectionSection {
    pub policy: ProtectionName,
    /// Pool utilisation above which LOW (and NORMAL) requests are shed; HIGH only when full.
    #[serde(default = "default_shed_low")]
    pub shed_low_at: f64,
    #[serde(default = "default_shed_normal")]
    pub shed_normal_at: f64,
    #[serde(default = "default_half")]
    pub breaker_failure_rate_threshold: f64,
    #[serde(default = "default_slow_call")]
    pub breaker_slow_call_s: f64,
    #[serde(default = "default_half")]
    pub breaker_slow_call_rate_threshold: f64,
    #[serde(default = "default_minimum_calls")]
    pub breaker_minimum_calls: u32,
    #[serde(default = "default_one")]
    pub breaker_window_s: f64,
    #[serde(default = "default_one")]
    pub breaker_open_s: f64,
    #[serde(default = "default_probes")]
    pub breaker_half_open_probes: u32,
}

fn default_shed_low() -> f64 {
    0.75
}
fn default_shed_normal() -> f64 {
    0.9
}
fn default_half() -> f64 {
    0.5
}
fn default_slow_call() -> f64 {
    0.5
}
fn default_minimum_calls() -> u32 {
    20
}
fn default_one() -> f64 {
    1.0
}
fn default_probes() -> u32 {
    3
}

fn positive(path: &str, value: f64) -> Result<()> {
    if value.is_finite() && value > 0.0 {
        Ok(())
    } else {
        Err(Error::bad_input(format!("{path} = {value}: must be a positive number")))
    }
}

fn fraction(path: &str, value: f64) -> Result<()> {
    if value > 0.0 && value <= 1.0 {
        Ok(())
    } else {
        Err(Error::bad_input(format!("{path} = {value}: must be in (0, 1]")))
    }
}

impl DependencyConfig {
    pub fn validate(&self, run: &RunConfig) -> Result<()> {
        let s = &self.service;
        positive("service.arrival_rate_per_s", s.arrival_rate_per_s)?;
        if s.priority_shares.iter().any(|x| !(x.is_finite() && *x >= 0.0))
            || (s.priority_shares.iter().sum::<f64>() - 1.0).abs() > 1e-9
        {
            return Err(Error::bad_input(format!(
                "service.priority_shares = {:?}: must be three non-negative shares adding up to 1",
                s.priority_shares
            )));
        }
        if s.workers == 0 {
            return Err(Error::bad_input("service.workers = 0: must be at least 1"));
        }
        positive("service.client_timeout_s", s.client_timeout_s)?;
        positive("service.local_work_s", s.local_work_s)?;
        positive("service.call_timeout_s", s.call_timeout_s)?;
        let d = &self.dependency;
        positive("dependency.healthy_latency_s", d.healthy_latency_s)?;
        positive("dependency.slow_latency_s", d.slow_latency_s)?;
        positive("dependency.slow_duration_s", d.slow_duration_s)?;
        if !(d.slow_start_s.is_finite() && d.slow_start_s >= 0.0 && d.slow_start_s < run.horizon_s) {
            return Err(Error::bad_input(format!(
                "dependency.slow_start_s = {}: must be within the run (0 to run.horizon_s = {})",
                d.slow_start_s, run.horizon_s
            )));
        }
        let p = &self.protection;
        fraction("protection.shed_low_at", p.shed_low_at)?;
        fraction("protection.shed_normal_at", p.shed_normal_at)?;
        fraction("protection.breaker_failure_rate_threshold", p.breaker_failure_rate_threshold)?;
        positive("protection.breaker_slow_call_s", p.breaker_slow_call_s)?;
        positive("protection.breaker_window_s", p.breaker_window_s)?;
        positive("protection.breaker_open_s", p.breaker_open_s)?;
        if p.breaker_half_open_probes == 0 {
            return Err(Error::bad_input("protection.breaker_half_open_probes = 0: must be at least 1"));
        }
        positive("series.bucket_s", self.series.bucket_s)?;
        if run.horizon_s / self.series.bucket_s > 1_000_000.0 {
            return Err(Error::bad_input(format!(
                "series.bucket_s = {}: gives more than 1000000 buckets over run.horizon_s",
                self.series.bucket_s
            )));
        }
        Ok(())
    }

    pub fn params(&self, run: &RunConfig) -> DependencyParams {
        let s = &self.service;
        let d = &self.dependency;
        let p = &self.protection;
        let breaker_on = matches!(p.policy, ProtectionName::Breaker | ProtectionName::Both);
        let shedder_on = matches!(p.policy, ProtectionName::Shedder | ProtectionName::Both);
        DependencyParams {
            arrival_rate_per_s: s.arrival_rate_per_s,
            priority_shares: s.priority_shares,
            workers: s.workers,
            queue_capacity: s.queue_capacity,
            client_timeout: secs_to_nanos(s.client_timeout_s),
            local_work: secs_to_nanos(s.local_work_s),
            healthy_latency: secs_to_nanos(d.healthy_latency_s),
            slow_latency: secs_to_nanos(d.slow_latency_s),
            slow_start: secs_to_nanos(d.slow_start_s),
            slow_duration: secs_to_nanos(d.slow_duration_s),
            call_timeout: secs_to_nanos(s.call_timeout_s),
            breaker: breaker_on.then(|| BreakerConfig {
                window: SlidingWindow::Time { window: secs_to_nanos(p.breaker_window_s).max(10), buckets: 10 },
                minimum_calls: p.breaker_minimum_calls,
                failure_rate_threshold: p.breaker_failure_rate_threshold,
                slow_call_rate_threshold: p.breaker_slow_call_rate_threshold,
                slow_call_duration: secs_to_nanos(p.breaker_slow_call_s),
                open_duration: secs_to_nanos(p.breaker_open_s),
                max_open_duration: secs_to_nanos(p.breaker_open_s),
                half_open_probes: p.breaker_half_open_probes,
                ..BreakerConfig::default()
            }),
            // Marks per criticality: HIGH → CRITICAL_PLUS (only when full), NORMAL →
            // SHEDDABLE_PLUS, LOW → SHEDDABLE.
            shedder: shedder_on.then_some(ShedMarks([1.0, 1.0, p.shed_normal_at, p.shed_low_at])),
            warmup: secs_to_nanos(run.warmup_s),
            horizon: secs_to_nanos(run.horizon_s),
            bucket: secs_to_nanos(self.series.bucket_s).max(1),
            recovery_hold: secs_to_nanos(self.series.recovery_hold_s),
        }
    }
}
