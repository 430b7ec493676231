//! The M/G/1 queue (`model = "mg1"`): Poisson arrivals, one FIFO server, a general
//! service-time distribution given by its shape, mean and squared coefficient of
//! variation. Validated against Pollaczek–Khinchine; the `mg1` built-in shows the
//! variance effect (same load, different variance, different waits).
//!
//! This model is the proof of the registry: it is this file, the engine's
//! `models/mg1.rs`, one line in [`super::registry`] and its built-in scenario.

use serde::{Deserialize, Serialize};
use stampede_engine::kernel::Named;
use stampede_engine::measurement::theory::pollaczek_khinchine_wait;
use stampede_engine::models::mg1::{Mg1 as Mg1Model, Mg1Params, Mg1Results, ServiceDistribution, ServiceShape};
use stampede_engine::{secs_to_nanos, LatencyHistogram};

use super::metrics::{
    count, defs, fraction, headline, real, values, Direction, Metric, MetricDef, MetricKind, ReplicaOutput,
};
use super::spec::ModelSpec;
use crate::base::checks::{events_within_budget, positive_rate};
use crate::base::error::{Error, Result};
use crate::scenario::RunConfig;

/// The M/G/1 model.
pub struct Mg1;

/// The `[queue]` section of an `mg1` scenario.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mg1Config {
    pub queue: Mg1Queue,
}

/// An M/G/1 queue.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mg1Queue {
    /// λ, arrivals per second.
    pub arrival_rate_per_s: f64,
    /// The service-time distribution's shape.
    #[serde(with = "crate::base::names")]
    pub service: ServiceShape,
    /// E[S], seconds.
    pub service_mean_s: f64,
    /// Var[S]/E[S]² for lognormal (> 0) and hyperexponential (≥ 1); deterministic
    /// and exponential fix it (0 and 1) and refuse another value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_scv: Option<f64>,
}

impl Mg1Queue {
    fn distribution(&self) -> ServiceDistribution {
        ServiceDistribution { shape: self.service, mean_s: self.service_mean_s, scv: self.service_scv.unwrap_or(1.0) }
    }
}

impl ModelSpec for Mg1 {
    type Config = Mg1Config;
    const NAME: &'static str = "mg1";
    const DESCRIPTION: &'static str =
        "M/G/1: Poisson arrivals, one FIFO server, deterministic/exponential/lognormal/hyper-exponential service";
    const SECTIONS: &'static [&'static str] = &["queue"];

    fn validate(config: &Mg1Config, run: &RunConfig) -> Result<()> {
        let q = &config.queue;
        positive_rate("queue.arrival_rate_per_s", q.arrival_rate_per_s)?;
        if !(q.service_mean_s.is_finite() && q.service_mean_s > 0.0) {
            return Err(Error::bad_input(format!(
                "queue.service_mean_s = {}: must be a positive number of seconds",
                q.service_mean_s
            )));
        }
        match (q.service, q.service_scv) {
            (ServiceShape::Deterministic | ServiceShape::Exponential, None) => {}
            (ServiceShape::Deterministic | ServiceShape::Exponential, Some(scv)) => {
                return Err(Error::bad_input(format!(
                    "queue.service_scv = {scv}: a {} service fixes its variance (c² = {}); leave service_scv out",
                    q.service.name(),
                    q.distribution().effective_scv()
                )))
            }
            (ServiceShape::Lognormal, Some(scv)) if scv.is_finite() && scv > 0.0 => {}
            (ServiceShape::HyperExponential, Some(scv)) if scv.is_finite() && scv >= 1.0 => {}
            (shape, scv) => {
                let allowed =
                    if shape == ServiceShape::Lognormal { "a number above 0" } else { "a number of at least 1" };
                return Err(Error::bad_input(format!(
                    "queue.service_scv = {}: a {} service needs {allowed} (the squared coefficient of variation)",
                    scv.map_or("(missing)".to_string(), |v| v.to_string()),
                    shape.name()
                )));
            }
        }
        let rho = q.arrival_rate_per_s * q.service_mean_s;
        if rho >= 1.0 {
            return Err(Error::bad_input(format!(
                "queue.arrival_rate_per_s = {}: with queue.service_mean_s = {} the load ρ = λ·E[S] = {rho:.3} is not \
                 below 1, so the queue grows forever and has no steady state",
                q.arrival_rate_per_s, q.service_mean_s
            )));
        }
        events_within_budget(run.horizon_s, "queue.arrival_rate_per_s", q.arrival_rate_per_s)
    }

    fn metrics(_: &Mg1Config) -> Vec<MetricDef> {
        let mut metrics = defs(MG1_METRICS);
        metrics.push(WAIT_THEORY);
        metrics
    }

    fn latencies(_: &Mg1Config) -> &'static [&'static str] {
        &["response_s"]
    }

    fn run_replica(
        config: &Mg1Config,
        run: &RunConfig,
        master_seed: u64,
        replica: u64,
        histograms: &mut [LatencyHistogram],
    ) -> ReplicaOutput {
        let [response] = histograms else { panic!("mg1 records one histogram") };
        let params = Mg1Params {
            arrival_rate_per_s: config.queue.arrival_rate_per_s,
            service: config.queue.distribution(),
            warmup: secs_to_nanos(run.warmup_s),
            horizon: secs_to_nanos(run.horizon_s),
        };
        let results = Mg1Model::new(params, master_seed, replica, response).run();
        let mut metrics = values(MG1_METRICS, &results);
        // The theory column is the same in every replica: its interval is a point.
        let service = params.service;
        let theory = pollaczek_khinchine_wait(params.arrival_rate_per_s, service.mean_s, service.effective_scv());
        metrics.push(theory.unwrap_or(f64::NAN));
        ReplicaOutput { metrics, ..ReplicaOutput::default() }
    }
}

const MG1_METRICS: &[Metric<Mg1Results>] = &[
    headline(Direction::Lower, real("wait_mean_s", "mean wait in queue (Wq)", |r| r.wait_mean_s)),
    headline(Direction::Lower, real("response_mean_s", "mean time in system (W)", |r| r.response_mean_s)),
    headline(
        Direction::Neither,
        fraction("utilization_ratio", "time-average fraction of time the server is busy (ρ)", |r| r.utilization_ratio),
    ),
    real("queue_length_mean", "time-average number waiting (Lq)", |r| r.queue_length_mean),
    real("throughput_rps", "completions per second", |r| r.throughput_rps),
    count("events", "events handled, warm-up included", |r| r.events as f64),
];

/// The theory beside the measurement, so a reader (and `[[verify]]`) compares them.
const WAIT_THEORY: MetricDef = MetricDef {
    headline: true,
    ..MetricDef::new(
        "wait_theory_s",
        MetricKind::Real,
        "the Pollaczek–Khinchine mean wait for these parameters (theory; the same in every replica)",
        false,
    )
};
