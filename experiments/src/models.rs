//! The bridge between scenario files and engine models.
//!
//! Each model contributes: its typed configuration sections (serde, unknown fields
//! refused), validation with field-path messages, the list of scalar metrics and
//! latency histograms it reports, and a function that runs one replica. Adding a
//! model means adding a variant to [`ModelConfig`] and filling in each `match`.

use serde::{Deserialize, Serialize};
use stampede_engine::models::cluster::{Cluster, ClusterResults};
use stampede_engine::models::dependency::{Dependency, DependencyResults};
use stampede_engine::models::gateway::{Gateway, LATENCY_NAMES};
use stampede_engine::models::mmc::{Mmc, MmcParams, MmcResults};
use stampede_engine::{secs_to_nanos, LatencyHistogram};

use crate::cluster_config::ClusterConfig;
use crate::dependency_config::DependencyConfig;
use crate::error::{Error, Result};
use crate::gateway_config::{GatewayConfig, GATEWAY_METRICS};
use crate::scenario::{typed, RunConfig};

/// Whether a metric is a count (written as an unsigned integer per replica) or a real.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetricKind {
    Real,
    Count,
}

/// A scalar metric a model reports per replica.
#[derive(Clone, Copy, Debug)]
pub struct MetricDef {
    /// snake_case, ending in its unit where it has one.
    pub name: &'static str,
    pub kind: MetricKind,
    /// One line for the README and `--help`-style listings.
    pub description: &'static str,
}

/// How a time series' per-bucket integers become a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SeriesKind {
    /// Σ level × ns: divided by the bucket's nanoseconds it is the bucket's mean level.
    Area,
    /// A count: divided by the bucket's seconds it is a rate per second.
    Count,
}

/// A per-bucket time series a model reports.
#[derive(Clone, Copy, Debug)]
pub struct SeriesDef {
    pub name: &'static str,
    pub kind: SeriesKind,
}

/// What one replica produced.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ReplicaOutput {
    /// In [`ModelConfig::metrics`] order.
    pub metrics: Vec<f64>,
    /// In [`ModelConfig::series`] order, one integer per bucket (empty without series).
    pub series: Vec<Vec<u128>>,
    /// Counts of a small-integer quantity (see [`ModelConfig::count_histogram`]); empty without.
    pub counts: Vec<u64>,
}

/// A model's histogram of a small-integer quantity, written to its own file.
#[derive(Clone, Copy, Debug)]
pub struct CountHistogramDef {
    /// The file, e.g. `hops.parquet`.
    pub file: &'static str,
    /// The value column, e.g. `hops`; the last index means "this many or more".
    pub column: &'static str,
}

/// A metric together with how to read it off a model's results: one table per model,
/// so names, kinds and values cannot drift out of step.
pub(crate) struct Metric<R> {
    pub(crate) def: MetricDef,
    value: fn(&R) -> f64,
}

impl<R> Clone for Metric<R> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<R> Copy for Metric<R> {}

pub(crate) const fn real<R>(name: &'static str, description: &'static str, value: fn(&R) -> f64) -> Metric<R> {
    Metric { def: MetricDef { name, kind: MetricKind::Real, description }, value }
}

pub(crate) const fn count<R>(name: &'static str, description: &'static str, value: fn(&R) -> f64) -> Metric<R> {
    Metric { def: MetricDef { name, kind: MetricKind::Count, description }, value }
}

fn defs<R>(table: &[Metric<R>]) -> Vec<MetricDef> {
    table.iter().map(|m| m.def).collect()
}

fn values<R>(table: &[Metric<R>], results: &R) -> Vec<f64> {
    table.iter().map(|m| (m.value)(results)).collect()
}

/// Every model's configuration; the scenario's `model = "…"` picks the variant.
#[derive(Clone, Debug, PartialEq)]
pub enum ModelConfig {
    Mmc(MmcConfig),
    Cluster(Box<ClusterConfig>),
    Dependency(Box<DependencyConfig>),
    Gateway(Box<GatewayConfig>),
}

/// Names accepted by `model = "…"`.
pub const MODEL_NAMES: &[&str] = &["mmc", "cluster", "dependency", "gateway"];

impl ModelConfig {
    /// The model's name as written in scenarios.
    pub fn name(&self) -> &'static str {
        match self {
            ModelConfig::Mmc(_) => "mmc",
            ModelConfig::Cluster(_) => "cluster",
            ModelConfig::Dependency(_) => "dependency",
            ModelConfig::Gateway(_) => "gateway",
        }
    }

    /// The top-level sections this model reads.
    pub fn section_names(model: &str) -> &'static [&'static str] {
        match model {
            "mmc" => &["queue"],
            "cluster" => &["clients", "router", "shards", "retry", "faults", "series"],
            "dependency" => &["service", "dependency", "protection", "series"],
            "gateway" => &["workload", "stack", "gateway", "incidents", "tiers", "classes"],
            _ => &[],
        }
    }

    /// Builds the configuration of `model` from the scenario's model sections.
    pub fn from_sections(model: &str, sections: toml::Table) -> Result<Self> {
        match model {
            "mmc" => Ok(ModelConfig::Mmc(typed(toml::Value::Table(sections))?)),
            "cluster" => Ok(ModelConfig::Cluster(Box::new(typed(toml::Value::Table(sections))?))),
            "dependency" => Ok(ModelConfig::Dependency(Box::new(typed(toml::Value::Table(sections))?))),
            "gateway" => {
                let config: GatewayConfig = typed(toml::Value::Table(sections))?;
                Ok(ModelConfig::Gateway(Box::new(config.resolve()?)))
            }
            other => Err(Error::bad_input(format!(
                "model = {other:?}: unknown model; known models: {}",
                MODEL_NAMES.join(", ")
            ))),
        }
    }

    /// The model sections as TOML, for `stampede show`.
    pub fn to_sections(&self) -> toml::Table {
        let value = match self {
            ModelConfig::Mmc(config) => toml::Value::try_from(config),
            ModelConfig::Cluster(config) => toml::Value::try_from(config.as_ref()),
            ModelConfig::Dependency(config) => toml::Value::try_from(config.as_ref()),
            ModelConfig::Gateway(config) => toml::Value::try_from(config.as_ref()),
        };
        match value.expect("model configs serialise") {
            toml::Value::Table(table) => table,
            _ => unreachable!("a struct serialises to a table"),
        }
    }

    /// Checks ranges and cross-field constraints.
    pub fn validate(&self, run: &RunConfig) -> Result<()> {
        match self {
            ModelConfig::Mmc(config) => config.validate(run),
            ModelConfig::Cluster(config) => config.validate(run),
            ModelConfig::Dependency(config) => config.validate(run),
            ModelConfig::Gateway(config) => config.validate(run),
        }
    }

    /// The scalar metrics, in output column order.
    pub fn metrics(&self) -> Vec<MetricDef> {
        match self {
            ModelConfig::Mmc(_) => defs(MMC_METRICS),
            ModelConfig::Cluster(_) => defs(CLUSTER_METRICS),
            ModelConfig::Dependency(_) => defs(DEPENDENCY_METRICS),
            ModelConfig::Gateway(_) => defs(&GATEWAY_METRICS),
        }
    }

    /// The per-bucket time series, in output order (empty for models without).
    pub fn series(&self) -> &'static [SeriesDef] {
        match self {
            ModelConfig::Mmc(_) | ModelConfig::Gateway(_) => &[],
            ModelConfig::Cluster(_) => CLUSTER_SERIES,
            ModelConfig::Dependency(_) => DEPENDENCY_SERIES,
        }
    }

    /// The model's count histogram, if it has one.
    pub fn count_histogram(&self) -> Option<CountHistogramDef> {
        match self {
            ModelConfig::Cluster(_) => Some(CountHistogramDef { file: "hops.parquet", column: "hops" }),
            _ => None,
        }
    }

    /// The width of a time-series bucket in seconds (models with series only).
    pub fn series_bucket_s(&self) -> f64 {
        match self {
            ModelConfig::Mmc(_) | ModelConfig::Gateway(_) => 0.0,
            ModelConfig::Cluster(config) => config.series.bucket_s,
            ModelConfig::Dependency(config) => config.series.bucket_s,
        }
    }

    /// The latency histograms, in output order.
    pub fn latencies(&self) -> &'static [&'static str] {
        match self {
            ModelConfig::Mmc(_) | ModelConfig::Cluster(_) | ModelConfig::Dependency(_) => &["response_s"],
            ModelConfig::Gateway(_) => &LATENCY_NAMES,
        }
    }

    /// Runs replica `replica` and returns its metrics in [`Self::metrics`] order;
    /// latencies are recorded into `histograms` (one per [`Self::latencies`] entry).
    pub fn run_replica(
        &self,
        run: &RunConfig,
        master_seed: u64,
        replica: u64,
        histograms: &mut [LatencyHistogram],
    ) -> ReplicaOutput {
        match self {
            ModelConfig::Mmc(config) => {
                let [response] = histograms else { panic!("mmc records one histogram") };
                let results = Mmc::new(config.params(run), master_seed, replica, response).run();
                ReplicaOutput { metrics: values(MMC_METRICS, &results), ..ReplicaOutput::default() }
            }
            ModelConfig::Cluster(config) => {
                let [response] = histograms else { panic!("cluster records one histogram") };
                let (results, series) = Cluster::new(config.params(run), master_seed, replica, response).run();
                let counts = |v: Vec<u64>| v.into_iter().map(u128::from).collect();
                ReplicaOutput {
                    metrics: values(CLUSTER_METRICS, &results),
                    series: vec![
                        series.queued_area,
                        series.in_flight_area,
                        counts(series.attempts),
                        counts(series.successes),
                    ],
                    counts: series.hops,
                }
            }
            ModelConfig::Dependency(config) => {
                let [response] = histograms else { panic!("dependency records one histogram") };
                let (results, series) = Dependency::new(config.params(run), master_seed, replica, response).run();
                let counts = |v: Vec<u64>| v.into_iter().map(u128::from).collect();
                ReplicaOutput {
                    metrics: values(DEPENDENCY_METRICS, &results),
                    series: vec![series.busy_area, series.queued_area, counts(series.served), counts(series.fallbacks)],
                    counts: Vec::new(),
                }
            }
            ModelConfig::Gateway(config) => {
                let results = Gateway::new(config.params(run), master_seed, replica, histograms).run();
                ReplicaOutput { metrics: values(&GATEWAY_METRICS, &results), ..ReplicaOutput::default() }
            }
        }
    }
}

/// The `[queue]` section of an `mmc` scenario.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MmcConfig {
    pub queue: QueueConfig,
}

/// An M/M/c(/K) queue.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueueConfig {
    /// λ, arrivals per second.
    pub arrival_rate_per_s: f64,
    /// μ, services per second per server.
    pub service_rate_per_s: f64,
    /// c, number of servers.
    pub servers: u32,
    /// K, the most customers in the system; absent = unbounded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<u32>,
}

impl MmcConfig {
    fn params(&self, run: &RunConfig) -> MmcParams {
        MmcParams {
            arrival_rate_per_s: self.queue.arrival_rate_per_s,
            service_rate_per_s: self.queue.service_rate_per_s,
            servers: self.queue.servers,
            capacity: self.queue.capacity,
            warmup: secs_to_nanos(run.warmup_s),
            horizon: secs_to_nanos(run.horizon_s),
        }
    }

    fn validate(&self, run: &RunConfig) -> Result<()> {
        let q = &self.queue;
        positive_rate("queue.arrival_rate_per_s", q.arrival_rate_per_s)?;
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
        } else {
            let rho = q.arrival_rate_per_s / (q.servers as f64 * q.service_rate_per_s);
            if rho >= 1.0 {
                return Err(Error::bad_input(format!(
                    "queue.arrival_rate_per_s = {}: with queue.servers = {} and queue.service_rate_per_s = {} the load \
                     ρ = λ/(c·μ) = {rho:.3} is not below 1, so an unbounded queue grows forever and has no steady state",
                    q.arrival_rate_per_s, q.servers, q.service_rate_per_s
                ))
                .with_hint("set queue.capacity to study an overloaded M/M/c/K queue, or lower the arrival rate"));
            }
        }
        // A replica's events are about 2 × λ × horizon; refuse runs that cannot finish.
        let events = 2.0 * q.arrival_rate_per_s * run.horizon_s;
        if events > 1e12 {
            return Err(Error::bad_input(format!(
                "run.horizon_s = {}: with queue.arrival_rate_per_s = {} a replica would need about {events:.1e} events; \
                 at most 1e12 are allowed",
                run.horizon_s, q.arrival_rate_per_s
            )));
        }
        Ok(())
    }
}

fn positive_rate(path: &str, value: f64) -> Result<()> {
    if value.is_finite() && value > 0.0 && value <= 1e12 {
        Ok(())
    } else {
        Err(Error::bad_input(format!("{path} = {value}: must be a positive rate per second, at most 1e12")))
    }
}

const MMC_METRICS: &[Metric<MmcResults>] = &[
    real("wait_mean_s", "mean wait in queue (Wq)", |r| r.wait_mean_s),
    real("response_mean_s", "mean time in system (W)", |r| r.response_mean_s),
    real("wait_probability_ratio", "fraction of admitted customers that waited at all (Erlang C's P(wait > 0))", |r| {
        r.wait_probability_ratio
    }),
    real("utilization_ratio", "time-average fraction of servers busy", |r| r.utilization_ratio),
    real("queue_length_mean", "time-average number waiting (Lq)", |r| r.queue_length_mean),
    real("in_system_mean", "time-average number in the system (L)", |r| r.in_system_mean),
    real("throughput_rps", "completions per second", |r| r.throughput_rps),
    real("rejected_ratio", "fraction of arrivals refused (M/M/c/K)", |r| r.rejected_ratio),
    count("events", "events handled, warm-up included", |r| r.events as f64),
];

const CLUSTER_METRICS: &[Metric<ClusterResults>] = &[
    count("offered", "requests the clients made (after warm-up)", |r| r.offered as f64),
    count("attempts", "attempts sent, retries included", |r| r.attempts as f64),
    real("amplification_ratio", "attempts ÷ offered", |r| r.amplification_ratio),
    count("successes", "requests answered within an attempt's timeout", |r| r.successes as f64),
    real("success_ratio", "successes ÷ offered", |r| r.success_ratio),
    real("goodput_rps", "successes per second", |r| r.goodput_rps),
    count("failed", "requests that gave up (attempts or budget exhausted)", |r| r.failed as f64),
    count("timeouts", "attempts the client timed out", |r| r.timeouts as f64),
    count("refused_queue_full", "attempts refused by a full shard queue", |r| r.refused_queue_full as f64),
    count("refused_breaker", "attempts refused by an open breaker", |r| r.refused_breaker as f64),
    count("refused_no_shard", "attempts with no healthy shard (or lost with a failed shard)", |r| {
        r.refused_no_shard as f64
    }),
    count("dropped_codel", "attempts CoDel dropped at dequeue (an error to a waiting client)", |r| {
        r.dropped_codel as f64
    }),
    count("retries_denied_by_budget", "retries the budget refused", |r| r.retries_denied_by_budget as f64),
    real("wasted_work_s", "server seconds spent on attempts nobody waited for", |r| r.wasted_work_s),
    real("wasted_work_ratio", "wasted ÷ busy server time", |r| r.wasted_work_ratio),
    real("hops_mean", "virtual nodes walked past full shards, per routed attempt", |r| r.hops_mean),
    count("hops_max", "the longest walk", |r| r.hops_max as f64),
    real("peak_shard_load_ratio", "busiest shard's time-average load ÷ the mean", |r| r.peak_shard_load_ratio),
    count("breaker_trips", "breaker trips over all shards", |r| r.breaker_trips as f64),
    real("recovered_ratio", "1 if the queue returned to its band after the last fault, else 0", |r| {
        if r.recovered {
            1.0
        } else {
            0.0
        }
    }),
    real(
        "recovery_s",
        "seconds from the last fault's end to recovery; NaN (excluded from the mean) when not recovered",
        |r| r.recovery_s,
    ),
    count("events", "events handled, warm-up included", |r| r.events as f64),
];

const CLUSTER_SERIES: &[SeriesDef] = &[
    SeriesDef { name: "queue_depth", kind: SeriesKind::Area },
    SeriesDef { name: "in_flight", kind: SeriesKind::Area },
    SeriesDef { name: "attempt_rps", kind: SeriesKind::Count },
    SeriesDef { name: "goodput_rps", kind: SeriesKind::Count },
];

const DEPENDENCY_METRICS: &[Metric<DependencyResults>] = &[
    count("offered", "requests that arrived (after warm-up)", |r| r.offered as f64),
    count("served_high", "HIGH requests answered by the dependency in time", |r| r.served[0] as f64),
    count("served_normal", "NORMAL requests answered in time", |r| r.served[1] as f64),
    count("served_low", "LOW requests answered in time", |r| r.served[2] as f64),
    real("goodput_high_rps", "HIGH answers per second", |r| r.goodput_rps[0]),
    real("goodput_normal_rps", "NORMAL answers per second", |r| r.goodput_rps[1]),
    real("goodput_low_rps", "LOW answers per second", |r| r.goodput_rps[2]),
    count("fallbacks", "degraded answers: shed, breaker open, or call timed out", |r| r.fallbacks as f64),
    count("shed", "requests the priority shedder refused", |r| r.shed as f64),
    count("breaker_refusals", "calls the open breaker refused", |r| r.breaker_refusals as f64),
    count("call_timeouts", "dependency calls that hit the call timeout", |r| r.call_timeouts as f64),
    count("client_timeouts", "requests answered after their client left", |r| r.client_timeouts as f64),
    count("queue_full", "requests refused by a full worker queue", |r| r.queue_full as f64),
    real("pool_saturation_ratio", "time-average busy workers ÷ workers", |r| r.pool_saturation_ratio),
    count("breaker_trips", "breaker trips", |r| r.breaker_trips as f64),
    real("recovered_ratio", "1 if the queue returned to its band after the dependency healed", |r| {
        if r.recovered {
            1.0
        } else {
            0.0
        }
    }),
    real("recovery_s", "seconds from healing to recovery; NaN when not recovered", |r| r.recovery_s),
    count("events", "events handled, warm-up included", |r| r.events as f64),
];

const DEPENDENCY_SERIES: &[SeriesDef] = &[
    SeriesDef { name: "pool_busy", kind: SeriesKind::Area },
    SeriesDef { name: "queue_depth", kind: SeriesKind::Area },
    SeriesDef { name: "goodput_rps", kind: SeriesKind::Count },
    SeriesDef { name: "fallback_rps", kind: SeriesKind::Count },
];

#[cfg(test)]
mod tests {
    use crate::builtin::{load_scenario_source, BUILTINS};
    use crate::scenario::{Overrides, Scenario};
    use stampede_engine::LatencyHistogram;

    /// Every built-in scenario's model reports exactly the metrics and series it declares.
    #[test]
    fn models_report_what_they_declare() {
        for (name, _) in BUILTINS {
            let overrides = Overrides { sets: vec![("run.horizon_s".into(), toml::Value::Float(6.0))], grids: vec![] };
            let mut source = load_scenario_source(name).unwrap();
            if let Some(toml::Value::Table(run)) = source.get_mut("run") {
                run.insert("warmup_s".into(), toml::Value::Float(0.5));
            }
            let scenario = Scenario::resolve(source, &overrides).unwrap();
            let point = &scenario.grid_points().unwrap()[0];
            let mut histograms: Vec<LatencyHistogram> =
                point.model.latencies().iter().map(|_| LatencyHistogram::new()).collect();
            let output = point.model.run_replica(&point.run, 1, 0, &mut histograms);
            assert_eq!(output.metrics.len(), point.model.metrics().len(), "{name}: metrics");
            assert_eq!(output.series.len(), point.model.series().len(), "{name}: series");
            let names: std::collections::HashSet<&str> = point.model.metrics().iter().map(|m| m.name).collect();
            assert_eq!(names.len(), point.model.metrics().len(), "{name}: duplicate metric names");
        }
    }
}
