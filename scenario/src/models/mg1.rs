//! The M/G/1 queue (`model = "mg1"`): Poisson arrivals, one FIFO server, a general
//! service-time distribution given by its shape, mean and squared coefficient of
//! variation. Validated against Pollaczek–Khinchine; the `mg1` built-in shows the
//! variance effect (same load, different variance, different waits).
//!
//! This model is the proof of the registry: it is this file, the engine's
//! `models/mg1.rs`, one line in [`super::registry`] and its built-in scenario.

use serde::{Deserialize, Serialize};
use stampede_engine::components::distribution::Distribution;
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
use crate::inputs::load::LoadSpec;
use crate::inputs::ShapeOrValue;
use crate::scenario::RunConfig;
use stampede_engine::components::arrivals::{ArrivalProcess, RateProfile};

/// The M/G/1 model.
pub struct Mg1;

/// The `[queue]` and `[load]` sections of an `mg1` scenario.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mg1Config {
    pub queue: Mg1Queue,
    /// How customers arrive, when not at the constant rate `queue.arrival_rate_per_s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load: Option<LoadSpec>,
    /// The arrival process, resolved (its files read) when the grid point is typed.
    #[serde(skip)]
    arrivals: Option<ArrivalProcess>,
}

impl Mg1Config {
    /// Whether customers arrive as a constant-rate Poisson stream (Pollaczek–Khinchine
    /// applies and the load must be below 1).
    fn steady(&self) -> bool {
        self.load.as_ref().is_none_or(LoadSpec::is_constant_poisson)
    }
}

/// An M/G/1 queue.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mg1Queue {
    /// λ, arrivals per second (unless `[load]` sets the rate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arrival_rate_per_s: Option<f64>,
    /// The service-time distribution: a shape name with `service_mean_s` (and
    /// `service_scv`), or a distribution value (`{ dist = "empirical", file = … }`).
    pub service: ShapeOrValue<ServiceShape>,
    /// E[S], seconds (with a shape name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_mean_s: Option<f64>,
    /// Var[S]/E[S]² for lognormal (> 0) and hyperexponential (≥ 1); deterministic
    /// and exponential fix it (0 and 1) and refuse another value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_scv: Option<f64>,
    /// The distribution value resolved (its file read) when the grid point is typed.
    #[serde(skip)]
    resolved: Option<Distribution>,
}

impl Mg1Queue {
    /// The parametric shape, when `service` names one.
    fn shape(&self) -> Option<ServiceDistribution> {
        match self.service {
            ShapeOrValue::Shape(shape) => Some(ServiceDistribution {
                shape,
                mean_s: self.service_mean_s.unwrap_or(f64::NAN),
                scv: self.service_scv.unwrap_or(1.0),
            }),
            ShapeOrValue::Value(_) => None,
        }
    }

    /// The service-time distribution (a value resolved in `prepare`).
    fn distribution(&self) -> Distribution {
        match (self.shape(), &self.resolved) {
            (Some(shape), _) => shape.to_distribution(),
            (None, Some(resolved)) => resolved.clone(),
            (None, None) => unreachable!("prepare resolves a distribution value"),
        }
    }

    /// (E[S], scv) of the service time, for the load check and Pollaczek–Khinchine.
    /// The shapes keep their closed forms (as before distribution values existed).
    fn moments(&self) -> (f64, f64) {
        match self.shape() {
            Some(shape) => (shape.mean_s, shape.effective_scv()),
            None => {
                let distribution = self.distribution();
                (distribution.mean_s(), distribution.scv())
            }
        }
    }
}

impl ModelSpec for Mg1 {
    type Config = Mg1Config;
    const NAME: &'static str = "mg1";
    const DESCRIPTION: &'static str =
        "M/G/1: Poisson arrivals, one FIFO server, deterministic/exponential/lognormal/hyper-exponential service";
    const SECTIONS: &'static [&'static str] = &["queue", "load"];

    fn inputs(config: &Mg1Config) -> Vec<(String, String)> {
        let service = config.queue.service.value().map(|spec| ("queue.service", spec));
        crate::inputs::input_files(service, config.load.as_ref())
    }

    fn prepare(mut config: Mg1Config) -> Result<Mg1Config> {
        config.queue.resolved = config.queue.service.resolve("queue.service")?;
        let rate = config.queue.arrival_rate_per_s;
        if let Some(rate) = rate {
            positive_rate("queue.arrival_rate_per_s", rate)?;
        }
        let load =
            crate::inputs::load::model_arrivals(config.load.as_ref(), rate, "queue.arrival_rate_per_s", Some("mg1"))?;
        config.arrivals =
            Some(load.unwrap_or_else(|| ArrivalProcess::Poisson(RateProfile::constant(rate.unwrap_or(f64::NAN)))));
        Ok(config)
    }

    fn validate(config: &Mg1Config, run: &RunConfig) -> Result<()> {
        let q = &config.queue;
        let ShapeOrValue::Shape(shape) = q.service else {
            for field in [("service_mean_s", q.service_mean_s), ("service_scv", q.service_scv)] {
                if let (name, Some(value)) = field {
                    return Err(Error::bad_input(format!(
                        "queue.{name} = {value}: a distribution value in queue.service carries its own parameters; leave {name} out"
                    )));
                }
            }
            return check_load(config, run);
        };
        let mean = q.service_mean_s.unwrap_or(f64::NAN);
        if !(mean.is_finite() && mean > 0.0) {
            return Err(Error::bad_input(format!(
                "queue.service_mean_s = {}: must be a positive number of seconds (the mean of the {} service)",
                q.service_mean_s.map_or("(missing)".to_string(), |v| v.to_string()),
                shape.name()
            )));
        }
        match (shape, q.service_scv) {
            (ServiceShape::Deterministic | ServiceShape::Exponential, None) => {}
            (ServiceShape::Deterministic | ServiceShape::Exponential, Some(scv)) => {
                return Err(Error::bad_input(format!(
                    "queue.service_scv = {scv}: a {} service fixes its variance (c² = {}); leave service_scv out",
                    shape.name(),
                    q.moments().1
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
        check_load(config, run)
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
            arrivals: config.arrivals.clone().expect("prepare resolves the arrivals"),
            service: config.queue.distribution(),
            warmup: secs_to_nanos(run.warmup_s),
            horizon: secs_to_nanos(run.horizon_s),
        };
        let results = Mg1Model::new(params, master_seed, replica, response).run();
        let mut metrics = values(MG1_METRICS, &results);
        // The theory column is the same in every replica: its interval is a point.
        // It holds for a constant-rate Poisson stream only.
        let (mean_s, scv) = config.queue.moments();
        let theory = match (config.steady(), config.queue.arrival_rate_per_s) {
            (true, Some(rate)) => pollaczek_khinchine_wait(rate, mean_s, scv),
            _ => None,
        };
        metrics.push(theory.unwrap_or(f64::NAN));
        ReplicaOutput { metrics, ..ReplicaOutput::default() }
    }
}

/// With a constant rate, the load ρ = λ·E[S] must be below 1 (a varying load may
/// overload the server for a while: that is what it is for); either way the replica
/// must fit the event budget at its mean rate.
fn check_load(config: &Mg1Config, run: &RunConfig) -> Result<()> {
    let q = &config.queue;
    let (mean_s, _) = q.moments();
    if let (true, Some(rate)) = (config.steady(), q.arrival_rate_per_s) {
        let rho = rate * mean_s;
        if rho >= 1.0 {
            return Err(Error::overloaded(format!(
                "queue.arrival_rate_per_s = {rate}: with a mean service time of {mean_s:.4} s the load ρ = λ·E[S] = {rho:.3} \
                 is not below 1, so the queue grows forever and has no steady state"
            )));
        }
    }
    let arrivals = config.arrivals.as_ref().expect("prepare resolves the arrivals");
    let (rate_path, mean_rate) = (
        if q.arrival_rate_per_s.is_some() { "queue.arrival_rate_per_s" } else { "load" },
        crate::inputs::load::mean_rate(arrivals, run.horizon_s),
    );
    events_within_budget(run.horizon_s, rate_path, mean_rate)
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
