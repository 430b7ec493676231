//! The scenario sections of the `dependency` model (seed 002): `[service]`,
//! `[dependency]`, `[protection]`, `[series]`.

use serde::{Deserialize, Serialize};
use stampede_engine::models::dependency::DependencyParams;
use stampede_engine::policy::breaker::{BreakerConfig, SlidingWindow};
use stampede_engine::policy::shedder::ShedMarks;
use stampede_engine::secs_to_nanos;

use stampede_engine::models::dependency::{Dependency as DependencyModel, DependencyResults, DependencySeries};
use stampede_engine::LatencyHistogram;

use super::metrics::{
    count, defs, flag, fraction, headline, real, values, Direction, Metric, MetricDef, ReplicaOutput, SeriesDef,
    SeriesKind,
};
use super::metrics::{TimedLatency, TracedReplica};
use super::presentation::{labelled, Presentation, Recovery, Section, Window};
use super::series::SeriesConfig;
use super::spec::ModelSpec;
use crate::base::error::{Error, Result};
use crate::inputs::load::LoadSpec;
use crate::inputs::DistributionSpec;
use crate::scenario::RunConfig;

/// The slow-dependency model.
pub struct Dependency;

impl ModelSpec for Dependency {
    type Config = DependencyConfig;
    const NAME: &'static str = "dependency";
    const DESCRIPTION: &'static str =
        "worker pool in front of a dependency that slows down, defended by a breaker and a priority shedder";
    const SECTIONS: &'static [&'static str] = &["service", "dependency", "protection", "series", "load"];

    fn inputs(config: &DependencyConfig) -> Vec<(String, String)> {
        let latency = config.dependency.latency.as_ref().map(|spec| ("dependency.latency", spec));
        crate::inputs::input_files(latency, config.load.as_ref())
    }

    fn prepare(mut config: DependencyConfig) -> Result<DependencyConfig> {
        let d = &config.dependency;
        match (&d.latency, d.healthy_latency_s) {
            (Some(_), Some(value)) => {
                return Err(Error::bad_input(format!(
                    "dependency.healthy_latency_s = {value}: dependency.latency gives the healthy latency too; keep one"
                )))
            }
            (None, None) => {
                return Err(Error::bad_input(
                    "dependency.healthy_latency_s: missing; give the healthy median latency, or a distribution value in dependency.latency",
                ))
            }
            (Some(spec), None) => config.resolved_latency = Some(spec.resolve("dependency.latency")?),
            (None, Some(_)) => {}
        }
        let rate = config.service.arrival_rate_per_s;
        config.arrivals = crate::inputs::load::model_arrivals(
            config.load.as_ref(),
            rate,
            "service.arrival_rate_per_s",
            Some("dependency"),
        )?;
        Ok(config)
    }

    fn validate(config: &DependencyConfig, run: &RunConfig) -> Result<()> {
        config.validate(run)
    }

    fn metrics(_: &DependencyConfig) -> Vec<MetricDef> {
        defs(DEPENDENCY_METRICS)
    }

    fn latencies(_: &DependencyConfig) -> &'static [&'static str] {
        &["response_s", "response_degraded_s", "response_failed_s", "response_all_s"]
    }

    fn series(_: &DependencyConfig) -> &'static [SeriesDef] {
        DEPENDENCY_SERIES
    }

    fn timed_latencies(_: &DependencyConfig) -> Vec<TimedLatency> {
        vec![TimedLatency { name: "response", histogram: "response_s", degraded: true }]
    }

    fn latency_window_s(config: &DependencyConfig, run: &RunConfig) -> f64 {
        config.series.latency_window_s(run.horizon_s, 1)
    }

    fn series_bucket_s(config: &DependencyConfig) -> f64 {
        config.series.bucket_s()
    }

    fn presentation(config: &DependencyConfig, run: &RunConfig) -> Presentation {
        let slow = &config.dependency;
        Presentation {
            windows: vec![Window {
                label: format!("dependency slow ({} s per call)", slow.slow_latency_s),
                start_s: slow.slow_start_s,
                end_s: slow.slow_start_s + slow.slow_duration_s,
            }],
            recovery: Some(Recovery::of_queue_depth(run.warmup_s)),
            sections: vec![
                Section::MetricBars {
                    title: "Worker pool saturation: time-average busy workers ÷ workers".into(),
                    y_label: "share of the pool busy".into(),
                    metrics: labelled(&[("pool_saturation_ratio", "pool saturation")]),
                },
                Section::MetricBars {
                    title: "Goodput by priority: answers per second".into(),
                    y_label: "answers per second".into(),
                    metrics: labelled(&[
                        ("goodput_high_rps", "HIGH"),
                        ("goodput_normal_rps", "NORMAL"),
                        ("goodput_low_rps", "LOW"),
                    ]),
                },
            ],
            hints: Vec::new(),
        }
    }

    fn run_replica(
        config: &DependencyConfig,
        run: &RunConfig,
        master_seed: u64,
        replica: u64,
        histograms: &mut [LatencyHistogram],
    ) -> ReplicaOutput {
        let window = secs_to_nanos(config.series.latency_window_s(run.horizon_s, 1));
        let model = DependencyModel::new(config.params(run), master_seed, replica, histograms);
        let (results, series) = model.with_latency_windows(window).run();
        output(&results, series)
    }

    const TRACES: bool = true;

    fn trace_replica(
        config: &DependencyConfig,
        run: &RunConfig,
        master_seed: u64,
        replica: u64,
    ) -> Option<TracedReplica> {
        let mut response = LatencyHistogram::new();
        let window = secs_to_nanos(config.series.latency_window_s(run.horizon_s, 1));
        let model = DependencyModel::new(config.params(run), master_seed, replica, std::slice::from_mut(&mut response));
        let model = model.with_latency_windows(window).traced();
        let (results, series, trace) = model.run_traced();
        Some(TracedReplica { output: output(&results, series), trace: trace.expect("traced") })
    }
}

fn output(results: &DependencyResults, series: DependencySeries) -> ReplicaOutput {
    let counts = |v: Vec<u64>| v.into_iter().map(u128::from).collect();
    ReplicaOutput {
        metrics: values(DEPENDENCY_METRICS, results),
        latency_windows: vec![series.latency],
        series: vec![series.busy_area, series.queued_area, counts(series.served), counts(series.fallbacks)],
        counts: Vec::new(),
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DependencyConfig {
    pub service: ServiceSection,
    pub dependency: DependencySection,
    pub protection: ProtectionSection,
    #[serde(default)]
    pub series: SeriesConfig,
    /// How requests arrive, when not at the constant `service.arrival_rate_per_s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load: Option<LoadSpec>,
    /// `[load]`'s arrivals and `dependency.latency`, resolved when the point is typed.
    #[serde(skip)]
    arrivals: Option<stampede_engine::components::arrivals::ArrivalProcess>,
    #[serde(skip)]
    resolved_latency: Option<stampede_engine::components::distribution::Distribution>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServiceSection {
    /// Requests per second (unless `[load]` sets the rate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arrival_rate_per_s: Option<f64>,
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
    /// The healthy median latency (a lognormal with σ = 0.25 around it), unless
    /// `latency` gives a measured distribution.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub healthy_latency_s: Option<f64>,
    /// A distribution value for the healthy latency; while slow, its draws are scaled
    /// so that its median becomes `slow_latency_s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<DistributionSpec>,
    pub slow_latency_s: f64,
    pub slow_start_s: f64,
    pub slow_duration_s: f64,
}

stampede_engine::named_enum! {
    /// `protection.policy`: which defences are on. Configuration only — the engine
    /// takes an optional breaker and an optional shedder.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum ProtectionName {
        None = "none",
        Breaker = "breaker",
        Shedder = "shedder",
        Both = "both",
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProtectionSection {
    #[serde(with = "crate::base::names")]
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

fn share(path: &str, value: f64) -> Result<()> {
    if value > 0.0 && value <= 1.0 {
        Ok(())
    } else {
        Err(Error::bad_input(format!("{path} = {value}: must be in (0, 1]")))
    }
}

impl DependencyConfig {
    pub fn validate(&self, run: &RunConfig) -> Result<()> {
        let s = &self.service;
        if let Some(rate) = s.arrival_rate_per_s {
            positive("service.arrival_rate_per_s", rate)?;
        }
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
        if let Some(latency) = d.healthy_latency_s {
            positive("dependency.healthy_latency_s", latency)?;
        }
        positive("dependency.slow_latency_s", d.slow_latency_s)?;
        positive("dependency.slow_duration_s", d.slow_duration_s)?;
        if !(d.slow_start_s.is_finite() && d.slow_start_s >= 0.0 && d.slow_start_s < run.horizon_s) {
            return Err(Error::bad_input(format!(
                "dependency.slow_start_s = {}: must be within the run (0 to run.horizon_s = {})",
                d.slow_start_s, run.horizon_s
            )));
        }
        let p = &self.protection;
        share("protection.shed_low_at", p.shed_low_at)?;
        share("protection.shed_normal_at", p.shed_normal_at)?;
        share("protection.breaker_failure_rate_threshold", p.breaker_failure_rate_threshold)?;
        positive("protection.breaker_slow_call_s", p.breaker_slow_call_s)?;
        positive("protection.breaker_window_s", p.breaker_window_s)?;
        positive("protection.breaker_open_s", p.breaker_open_s)?;
        if p.breaker_half_open_probes == 0 {
            return Err(Error::bad_input("protection.breaker_half_open_probes = 0: must be at least 1"));
        }
        self.series.validate(run)
    }

    pub fn params(&self, run: &RunConfig) -> DependencyParams {
        let s = &self.service;
        let d = &self.dependency;
        let p = &self.protection;
        let breaker_on = matches!(p.policy, ProtectionName::Breaker | ProtectionName::Both);
        let shedder_on = matches!(p.policy, ProtectionName::Shedder | ProtectionName::Both);
        DependencyParams {
            arrival_rate_per_s: s.arrival_rate_per_s.unwrap_or(0.0),
            load: self.arrivals.clone(),
            latency: self.resolved_latency.clone(),
            priority_shares: s.priority_shares,
            workers: s.workers,
            queue_capacity: s.queue_capacity,
            client_timeout: secs_to_nanos(s.client_timeout_s),
            local_work: secs_to_nanos(s.local_work_s),
            healthy_latency: secs_to_nanos(d.healthy_latency_s.unwrap_or(0.0)),
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
            bucket: secs_to_nanos(self.series.bucket_s()).max(1),
            recovery_hold: secs_to_nanos(self.series.recovery_hold_s),
        }
    }
}

const DEPENDENCY_METRICS: &[Metric<DependencyResults>] = &[
    count("offered", "requests that arrived (after warm-up)", |r| r.offered as f64),
    count("served_high", "HIGH requests answered by the dependency in time", |r| r.served[0] as f64),
    count("served_normal", "NORMAL requests answered in time", |r| r.served[1] as f64),
    count("served_low", "LOW requests answered in time", |r| r.served[2] as f64),
    headline(Direction::Higher, real("goodput_high_rps", "HIGH answers per second", |r| r.goodput_rps[0])),
    real("goodput_normal_rps", "NORMAL answers per second", |r| r.goodput_rps[1]),
    headline(Direction::Higher, real("goodput_low_rps", "LOW answers per second", |r| r.goodput_rps[2])),
    headline(
        Direction::Lower,
        count("fallbacks", "degraded answers: shed, breaker open, or call timed out", |r| r.fallbacks as f64),
    ),
    count("shed", "requests the priority shedder refused", |r| r.shed as f64),
    count("breaker_refusals", "calls the open breaker refused", |r| r.breaker_refusals as f64),
    count("call_timeouts", "dependency calls that hit the call timeout", |r| r.call_timeouts as f64),
    count("client_timeouts", "requests answered after their client left", |r| r.client_timeouts as f64),
    count("queue_full", "requests refused by a full worker queue", |r| r.queue_full as f64),
    headline(
        Direction::Lower,
        fraction("pool_saturation_ratio", "time-average busy workers ÷ workers", |r| r.pool_saturation_ratio),
    ),
    count("breaker_trips", "breaker trips", |r| r.breaker_trips as f64),
    headline(
        Direction::Higher,
        fraction("recovered_ratio", "1 if the queue returned to its band after the dependency healed", |r| {
            flag(r.recovered)
        }),
    ),
    headline(
        Direction::Lower,
        real("recovery_s", "seconds from healing to recovery; NaN when not recovered", |r| r.recovery_s),
    ),
    count("events", "events handled, warm-up included", |r| r.events as f64),
];

const DEPENDENCY_SERIES: &[SeriesDef] = &[
    SeriesDef { name: "pool_busy", kind: SeriesKind::Area },
    SeriesDef { name: "queue_depth", kind: SeriesKind::Area },
    SeriesDef { name: "goodput_rps", kind: SeriesKind::Count },
    SeriesDef { name: "fallback_rps", kind: SeriesKind::Count },
];
