//! The M/M/c(/K) queue (`model = "mmc"`): Poisson arrivals, exponential service, c
//! servers, an optional bound K on customers in the system. The model theory knows
//! exactly (Erlang C, M/M/c/K), which validates the whole pipeline.

use serde::{Deserialize, Serialize};
use stampede_engine::kernel::splitting::{Splittable, Trajectory};
use stampede_engine::models::mmc::{Mmc as MmcModel, MmcParams, MmcResults};
use stampede_engine::{secs_to_nanos, LatencyHistogram};

use super::metrics::{count, defs, fraction, headline, real, values, Direction, Metric, MetricDef, ReplicaOutput};
use super::rare::{Observed, Probe};
use super::spec::ModelSpec;
use crate::base::checks::{events_within_budget, positive_rate};
use crate::base::error::{Error, Result};
use crate::inputs::load::LoadSpec;
use crate::scenario::RunConfig;
use stampede_engine::components::arrivals::ArrivalProcess;

/// The M/M/c(/K) model.
pub struct Mmc;

impl ModelSpec for Mmc {
    type Config = MmcConfig;
    const NAME: &'static str = "mmc";
    const DESCRIPTION: &'static str =
        "M/M/c(/K): Poisson arrivals, exponential service, c servers, optional capacity K";
    const SECTIONS: &'static [&'static str] = &["queue", "load"];

    fn inputs(config: &MmcConfig) -> Vec<(String, String)> {
        crate::inputs::input_files(None, config.load.as_ref())
    }

    fn prepare(mut config: MmcConfig) -> Result<MmcConfig> {
        let rate = config.queue.arrival_rate_per_s;
        config.arrivals =
            crate::inputs::load::model_arrivals(config.load.as_ref(), rate, "queue.arrival_rate_per_s", Some("mmc"))?;
        Ok(config)
    }

    fn validate(config: &MmcConfig, run: &RunConfig) -> Result<()> {
        config.validate(run)
    }

    fn metrics(_: &MmcConfig) -> Vec<MetricDef> {
        defs(MMC_METRICS)
    }

    /// With a capacity K, a refused arrival fails at once (latency 0): its latencies
    /// are split by ending; without one every customer is served.
    fn latencies(config: &MmcConfig) -> &'static [&'static str] {
        match config.queue.capacity {
            Some(_) => &["response_s", "response_failed_s", "response_all_s"],
            None => &["response_s"],
        }
    }

    fn run_replica(
        config: &MmcConfig,
        run: &RunConfig,
        master_seed: u64,
        replica: u64,
        histograms: &mut [LatencyHistogram],
    ) -> ReplicaOutput {
        let (response, refused) = histograms.split_first_mut().expect("mmc records its response times");
        let mut model = MmcModel::new(config.params(run), master_seed, replica, response);
        if let Some(arrivals) = &config.arrivals {
            model = model.with_load(arrivals.clone());
        }
        let results = model.run();
        if let [failed, all] = refused {
            for _ in 0..results.rejected {
                failed.record(0);
            }
            all.merge(response);
            all.merge(failed);
        }
        ReplicaOutput { metrics: values(MMC_METRICS, &results), ..ReplicaOutput::default() }
    }

    fn quantities(_: &MmcConfig) -> Vec<String> {
        MMC_QUANTITIES.iter().map(|name| name.to_string()).collect()
    }

    fn end_score(_: &MmcConfig) -> Option<&'static str> {
        Some("in_system")
    }

    fn splittable(config: &MmcConfig, run: &RunConfig, master_seed: u64, probe: Probe) -> Option<Box<dyn Splittable>> {
        Some(Box::new(MmcSplitting {
            params: config.params(run),
            arrivals: config.arrivals.clone(),
            master_seed,
            probe,
        }))
    }
}

/// What `stampede rare` can observe of an M/M/c queue, in [`Probe`] index order.
const MMC_QUANTITIES: [&str; 4] = ["in_system", "queue_depth", "busy", "rejected"];

/// An M/M/c point set up for splitting.
struct MmcSplitting {
    params: MmcParams,
    arrivals: Option<ArrivalProcess>,
    master_seed: u64,
    probe: Probe,
}

impl Splittable for MmcSplitting {
    fn scratch(&self) -> Vec<LatencyHistogram> {
        vec![LatencyHistogram::new()]
    }

    fn start<'a>(&self, scratch: &'a mut [LatencyHistogram], origin: u64) -> Box<dyn Trajectory + 'a> {
        let mut model = MmcModel::new(self.params, self.master_seed, origin, &mut scratch[0]);
        if let Some(arrivals) = &self.arrivals {
            model = model.with_load(arrivals.clone());
        }
        let read = |model: &MmcModel<'_>, quantity: usize| match quantity {
            0 => model.in_system() as f64,
            1 => model.waiting() as f64,
            2 => f64::from(model.busy()),
            _ => model.rejected_since_start() as f64,
        };
        let finish = |model: &mut MmcModel<'_>, now, events| ReplicaOutput {
            metrics: values(MMC_METRICS, &model.finish(now, events)),
            ..ReplicaOutput::default()
        };
        Box::new(Observed { simulation: model.into_simulation(), probe: self.probe.clone(), read, finish })
    }
}

/// The `[queue]` section of an `mmc` scenario.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MmcConfig {
    pub queue: QueueConfig,
    /// How customers arrive, when not at the constant rate `queue.arrival_rate_per_s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load: Option<LoadSpec>,
    /// `[load]`'s arrival process, resolved (its files read) when the point is typed.
    #[serde(skip)]
    arrivals: Option<ArrivalProcess>,
}

/// An M/M/c(/K) queue.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueueConfig {
    /// λ, arrivals per second (unless `[load]` sets the rate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arrival_rate_per_s: Option<f64>,
    /// μ, services per second per server.
    pub service_rate_per_s: f64,
    /// c, number of servers.
    pub servers: u32,
    /// K, the most customers in the system; absent = unbounded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<u32>,
}

impl MmcConfig {
    pub fn params(&self, run: &RunConfig) -> MmcParams {
        MmcParams {
            arrival_rate_per_s: self.queue.arrival_rate_per_s.unwrap_or(0.0),
            service_rate_per_s: self.queue.service_rate_per_s,
            servers: self.queue.servers,
            capacity: self.queue.capacity,
            warmup: secs_to_nanos(run.warmup_s),
            horizon: secs_to_nanos(run.horizon_s),
        }
    }

    fn validate(&self, run: &RunConfig) -> Result<()> {
        let q = &self.queue;
        let steady = self.load.as_ref().is_none_or(LoadSpec::is_constant_poisson);
        let rate = match (q.arrival_rate_per_s, &self.arrivals) {
            (Some(rate), _) => {
                positive_rate("queue.arrival_rate_per_s", rate)?;
                rate
            }
            (None, Some(arrivals)) => crate::inputs::load::mean_rate(arrivals, run.horizon_s),
            (None, None) => unreachable!("prepare requires a rate"),
        };
        positive_rate("queue.service_rate_per_s", q.service_rate_per_s)?;
        if q.servers == 0 {
            return Err(Error::bad_input("queue.servers = 0: must be at least 1"));
        }
        if let Some(capacity) = q.capacity {
            if capacity < q.servers {
                return Err(Error::bad_input(format!(
                    "queue.capacity = {capacity}: must be at least queue.servers ({}); it counts customers in service too",
                    q.servers
                )));
            }
        } else if steady {
            let rho = rate / (q.servers as f64 * q.service_rate_per_s);
            if rho >= 1.0 {
                return Err(Error::overloaded(format!(
                    "queue.arrival_rate_per_s = {}: with queue.servers = {} and queue.service_rate_per_s = {} the load \
                     ρ = λ/(c·μ) = {rho:.3} is not below 1, so an unbounded queue grows forever and has no steady state",
                    rate, q.servers, q.service_rate_per_s
                ))
                .with_hint("set queue.capacity to study an overloaded M/M/c/K queue, or lower the arrival rate"));
            }
        }
        let rate_path = if q.arrival_rate_per_s.is_some() { "queue.arrival_rate_per_s" } else { "load" };
        events_within_budget(run.horizon_s, rate_path, rate)
    }
}

const MMC_METRICS: &[Metric<MmcResults>] = &[
    headline(Direction::Lower, real("wait_mean_s", "mean wait in queue (Wq)", |r| r.wait_mean_s)),
    headline(Direction::Lower, real("response_mean_s", "mean time in system (W)", |r| r.response_mean_s)),
    fraction(
        "wait_probability_ratio",
        "fraction of admitted customers that waited at all (Erlang C's P(wait > 0))",
        |r| r.wait_probability_ratio,
    ),
    headline(
        Direction::Neither,
        fraction("utilization_ratio", "time-average fraction of servers busy", |r| r.utilization_ratio),
    ),
    real("queue_length_mean", "time-average number waiting (Lq)", |r| r.queue_length_mean),
    real("in_system_mean", "time-average number in the system (L)", |r| r.in_system_mean),
    headline(Direction::Higher, real("throughput_rps", "completions per second", |r| r.throughput_rps)),
    headline(
        Direction::Lower,
        fraction("rejected_ratio", "fraction of arrivals refused (M/M/c/K)", |r| r.rejected_ratio),
    ),
    count("events", "events handled, warm-up included", |r| r.events as f64),
];
