//! The scenario sections of the `cluster` model and their translation into
//! `ClusterParams`: `[clients]`, `[router]`, `[shards]`, `[retry]` (with
//! `[retry.breaker]`), `[[faults]]`, `[series]`. Every field is validated with its dotted path.

use serde::{Deserialize, Serialize};
use stampede_engine::components::ring::RingHash;
use stampede_engine::kernel::Named;
use stampede_engine::models::cluster::{ClusterParams, Fault, FaultKind, QueueDiscipline, RetryPolicy, ServiceTime};
use stampede_engine::policy::backoff::BackoffKind;
use stampede_engine::policy::breaker::{BreakerConfig, SlidingWindow};
use stampede_engine::policy::codel::CoDelConfig;
use stampede_engine::policy::retry_budget::{AdaptiveThrottle, GrpcThrottle, RatioBudget, RetryBudget, TtlBudget};
use stampede_engine::{secs_to_nanos, Nanos};

use stampede_engine::models::cluster::{Cluster as ClusterModel, ClusterResults, ClusterSeries};
use stampede_engine::LatencyHistogram;

use super::metrics::{
    count, defs, flag, fraction, headline, real, values, CountHistogramDef, Direction, Metric, MetricDef,
    ReplicaOutput, SeriesDef, SeriesKind,
};
use super::metrics::{TimedLatency, TracedReplica};
use super::presentation::{labelled, Presentation, Recovery, Section, Window};
use super::series::SeriesConfig;
use super::spec::ModelSpec;
use crate::base::checks::{at_least_one, positive};
use crate::base::error::{Error, Result};
use crate::inputs::load::LoadSpec;
use crate::inputs::ShapeOrValue;
use crate::scenario::RunConfig;

/// The sharded cluster model.
pub struct Cluster;

impl ModelSpec for Cluster {
    type Config = ClusterConfig;
    const NAME: &'static str = "cluster";
    const DESCRIPTION: &'static str =
        "sharded cluster: keyed clients, a hash ring with bounded loads, shards with queues, retries, breakers, faults";
    const SECTIONS: &'static [&'static str] = &["clients", "router", "shards", "retry", "faults", "series", "load"];

    fn inputs(config: &ClusterConfig) -> Vec<(String, String)> {
        let service = config.shards.service.value().map(|spec| ("shards.service", spec));
        crate::inputs::input_files(service, config.load.as_ref())
    }

    fn prepare(mut config: ClusterConfig) -> Result<ClusterConfig> {
        config.shards.resolved_service = config.shards.service.resolve("shards.service")?;
        let rate = config.clients.arrival_rate_per_s;
        config.arrivals =
            crate::inputs::load::model_arrivals(config.load.as_ref(), rate, "clients.arrival_rate_per_s", None)?;
        Ok(config)
    }

    fn validate(config: &ClusterConfig, run: &RunConfig) -> Result<()> {
        config.validate(run)
    }

    fn metrics(_: &ClusterConfig) -> Vec<MetricDef> {
        defs(CLUSTER_METRICS)
    }

    fn latencies(_: &ClusterConfig) -> &'static [&'static str] {
        &["response_s", "response_failed_s", "response_all_s"]
    }

    fn series(_: &ClusterConfig) -> &'static [SeriesDef] {
        CLUSTER_SERIES
    }

    fn series_bucket_s(config: &ClusterConfig) -> f64 {
        config.series.bucket_s()
    }

    fn timed_latencies(_: &ClusterConfig) -> Vec<TimedLatency> {
        vec![TimedLatency { name: "response", histogram: "response_s", degraded: false }]
    }

    fn latency_window_s(config: &ClusterConfig, run: &RunConfig) -> f64 {
        config.series.latency_window_s(run.horizon_s, 1)
    }

    fn count_histogram(_: &ClusterConfig) -> Option<CountHistogramDef> {
        Some(CountHistogramDef { file: "hops.parquet", column: "hops" })
    }

    fn presentation(config: &ClusterConfig, run: &RunConfig) -> Presentation {
        Presentation {
            windows: config.faults.iter().map(FaultConfig::window).collect(),
            recovery: Some(Recovery::of_queue_depth(run.warmup_s)),
            sections: vec![
                Section::CountHistogram {
                    title: "Hops: virtual nodes walked past full shards per routed attempt".into(),
                    file: "hops.parquet",
                    column: "hops",
                    x_label: "hops (the last bar: this many or more)".into(),
                },
                Section::MetricBars {
                    title: "Peak shard load: the busiest shard's attempts ÷ the mean shard's".into(),
                    y_label: "peak ÷ mean".into(),
                    metrics: labelled(&[("peak_shard_load_ratio", "peak shard load")]),
                },
            ],
            hints: Vec::new(),
        }
    }

    fn run_replica(
        config: &ClusterConfig,
        run: &RunConfig,
        master_seed: u64,
        replica: u64,
        histograms: &mut [LatencyHistogram],
    ) -> ReplicaOutput {
        let window = secs_to_nanos(config.series.latency_window_s(run.horizon_s, 1));
        let model = ClusterModel::new(config.params(run), master_seed, replica, histograms);
        let (results, series) = model.with_latency_windows(window).run();
        output(&results, series)
    }

    const TRACES: bool = true;

    fn trace_replica(config: &ClusterConfig, run: &RunConfig, master_seed: u64, replica: u64) -> Option<TracedReplica> {
        let mut response = LatencyHistogram::new();
        let window = secs_to_nanos(config.series.latency_window_s(run.horizon_s, 1));
        let model = ClusterModel::new(config.params(run), master_seed, replica, std::slice::from_mut(&mut response));
        let model = model.with_latency_windows(window).traced();
        let (results, series, trace) = model.run_traced();
        Some(TracedReplica { output: output(&results, series), trace: trace.expect("traced") })
    }
}

/// All sections of a `cluster` scenario.
fn output(results: &ClusterResults, series: ClusterSeries) -> ReplicaOutput {
    let counts = |v: Vec<u64>| v.into_iter().map(u128::from).collect();
    ReplicaOutput {
        metrics: values(CLUSTER_METRICS, results),
        latency_windows: vec![series.latency],
        series: vec![series.queued_area, series.in_flight_area, counts(series.attempts), counts(series.successes)],
        counts: series.hops,
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterConfig {
    pub clients: ClientsConfig,
    pub router: RouterConfig,
    pub shards: ShardsConfig,
    pub retry: RetryConfig,
    #[serde(default)]
    pub faults: Vec<FaultConfig>,
    #[serde(default)]
    pub series: SeriesConfig,
    /// How open-loop requests arrive, when not at the constant `clients.arrival_rate_per_s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load: Option<LoadSpec>,
    /// The arrival process of `[load]`, resolved (its files read) when the point is typed.
    #[serde(skip)]
    arrivals: Option<stampede_engine::components::arrivals::ArrivalProcess>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientsConfig {
    /// Open-loop requests per second (unless `[load]` sets the rate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arrival_rate_per_s: Option<f64>,
    pub keys: u64,
    /// Zipf skew of key popularity; 0 = uniform.
    #[serde(default)]
    pub zipf_s: f64,
    /// Share of requests carrying one hot key (a hot tenant); 0 = none.
    #[serde(default)]
    pub hot_share: f64,
    /// Users that wait for each answer, think, and ask again, beside the open-loop arrivals.
    #[serde(default)]
    pub closed_loop_users: u32,
    /// Mean think time of a closed-loop user (exponential).
    #[serde(default = "default_think")]
    pub think_time_s: f64,
    /// Each attempt's client-side timeout.
    pub timeout_s: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouterConfig {
    pub shards: u32,
    #[serde(default = "default_vnodes")]
    pub vnodes: u32,
    /// Bounded-load factor c (≥ 1); `inf` = plain consistent hashing.
    #[serde(default = "default_capacity_factor")]
    pub capacity_factor: f64,
    #[serde(default = "default_hash", with = "crate::base::names")]
    pub hash: RingHash,
}

fn default_think() -> f64 {
    1.0
}

fn default_vnodes() -> u32 {
    150
}
fn default_capacity_factor() -> f64 {
    1.25
}
fn default_hash() -> RingHash {
    RingHash::Fast
}

stampede_engine::named_enum! {
    /// `shards.service`. An adapter: the engine's `ServiceTime` carries the mean, median or
    /// value and σ, which TOML gives as `service_s` and `service_sigma`.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum ServiceName {
        Exponential = "exponential",
        Lognormal = "lognormal",
        Constant = "constant",
    }
}

stampede_engine::named_enum! {
    /// `shards.queue_order`. An adapter: the engine's `QueueDiscipline::CoDel` carries its
    /// target and interval, which TOML gives as their own fields.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum QueueOrderName {
        Fifo = "fifo",
        Lifo = "lifo",
        /// FIFO with CoDel drops at dequeue.
        Codel = "codel",
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShardsConfig {
    pub servers: u32,
    /// A shape name with `service_s` (and `service_sigma`), or a distribution value.
    pub service: ShapeOrValue<ServiceName>,
    /// Mean (exponential), median (lognormal) or value (constant), seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_s: Option<f64>,
    /// Lognormal σ of the log.
    #[serde(default)]
    pub service_sigma: f64,
    pub queue_capacity: u32,
    #[serde(default = "default_order", with = "crate::base::names")]
    pub queue_order: QueueOrderName,
    #[serde(default)]
    pub drop_abandoned: bool,
    /// CoDel's target sojourn (queue_order = "codel").
    #[serde(default = "default_codel_target")]
    pub codel_target_s: f64,
    /// CoDel's interval (queue_order = "codel").
    #[serde(default = "default_codel_interval")]
    pub codel_interval_s: f64,
    /// `service` as a distribution value, resolved (its file read) when the grid point
    /// is typed.
    #[serde(skip)]
    resolved_service: Option<stampede_engine::components::distribution::Distribution>,
}

pub(crate) fn default_codel_target() -> f64 {
    0.005
}

pub(crate) fn default_codel_interval() -> f64 {
    0.1
}

pub(crate) fn default_order() -> QueueOrderName {
    QueueOrderName::Fifo
}

stampede_engine::named_enum! {
    /// `retry.policy`. An adapter: the engine's `RetryPolicy` carries the attempts and the
    /// backoff, which TOML gives as their own fields.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum RetryName {
        None = "none",
        Naive = "naive",
        Backoff = "backoff",
    }
}

stampede_engine::named_enum! {
    /// `retry.budget`. An adapter: the engine's `RetryBudget` holds a constructed budget
    /// whose parameters TOML gives as `budget_ratio`, `budget_cap`, ….
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum BudgetName {
        None = "none",
        Ratio = "ratio",
        Grpc = "grpc",
        Ttl = "ttl",
        Adaptive = "adaptive",
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetryConfig {
    #[serde(with = "crate::base::names")]
    pub policy: RetryName,
    #[serde(default = "default_attempts")]
    pub max_attempts: u32,
    #[serde(default = "default_backoff", with = "crate::base::names")]
    pub backoff: BackoffKind,
    #[serde(default = "default_backoff_base")]
    pub backoff_base_s: f64,
    #[serde(default = "default_backoff_cap")]
    pub backoff_cap_s: f64,
    #[serde(default = "default_budget", with = "crate::base::names")]
    pub budget: BudgetName,
    /// ratio: tokens per success · grpc: token ratio · ttl: percent (0..1) · adaptive: K.
    #[serde(default = "default_budget_ratio")]
    pub budget_ratio: f64,
    /// ratio: cap · grpc: max tokens · ttl: minimum retries per second.
    #[serde(default = "default_budget_cap")]
    pub budget_cap: f64,
    /// ratio: initial tokens.
    #[serde(default = "default_budget_initial")]
    pub budget_initial: f64,
    /// ttl: deposit lifetime · adaptive: window.
    #[serde(default = "default_budget_window")]
    pub budget_window_s: f64,
    /// A circuit breaker per shard, on the client side.
    #[serde(default)]
    pub breaker: BreakerSection,
}

fn default_attempts() -> u32 {
    3
}
pub(crate) fn default_backoff() -> BackoffKind {
    BackoffKind::FullJitter
}
pub(crate) fn default_backoff_base() -> f64 {
    0.01
}
pub(crate) fn default_backoff_cap() -> f64 {
    1.0
}
pub(crate) fn default_budget() -> BudgetName {
    BudgetName::None
}
pub(crate) fn default_budget_ratio() -> f64 {
    0.1
}
pub(crate) fn default_budget_cap() -> f64 {
    100.0
}
pub(crate) fn default_budget_initial() -> f64 {
    10.0
}
pub(crate) fn default_budget_window() -> f64 {
    10.0
}

/// A field left out takes its default (`breaker = { enabled = true }` is a breaker with
/// the documented settings).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BreakerSection {
    pub enabled: bool,
    pub failure_rate_threshold: f64,
    pub minimum_calls: u32,
    pub window_s: f64,
    pub open_s: f64,
    pub half_open_probes: u32,
    /// A call at least this slow counts as slow (off when left out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slow_call_s: Option<f64>,
    /// The breaker also opens when this share of calls in the window is slow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slow_call_rate_threshold: Option<f64>,
}

impl Default for BreakerSection {
    fn default() -> Self {
        BreakerSection {
            enabled: false,
            failure_rate_threshold: 0.5,
            minimum_calls: 20,
            window_s: 1.0,
            open_s: 0.5,
            half_open_probes: 3,
            slow_call_s: None,
            slow_call_rate_threshold: None,
        }
    }
}

stampede_engine::named_enum! {
    /// `faults[].kind`. An adapter: the engine's `FaultKind` carries each fault's factor and
    /// shard, and has no stall (a brownout with an infinite slowdown).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum FaultName {
        Surge = "surge",
        Brownout = "brownout",
        Stall = "stall",
        ShardFailure = "shard_failure",
        LatencySpike = "latency_spike",
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultConfig {
    #[serde(with = "crate::base::names")]
    pub kind: FaultName,
    pub start_s: f64,
    pub duration_s: f64,
    /// surge: arrival multiplier · brownout: service slowdown · latency_spike: service factor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub factor: Option<f64>,
    /// brownout, stall, shard_failure: which shard.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<u32>,
}

impl ClusterConfig {
    /// Checks every section, in order, each error naming its field path.
    pub fn validate(&self, run: &RunConfig) -> Result<()> {
        self.validate_clients()?;
        self.validate_router_and_shards()?;
        self.validate_retry()?;
        self.validate_faults(run)?;
        self.series.validate(run)
    }

    fn validate_clients(&self) -> Result<()> {
        // Without a rate here, [load] gives it (prepare has checked one of them does).
        let rate = self.clients.arrival_rate_per_s.unwrap_or(1.0);
        if !(rate.is_finite() && rate >= 0.0) || (rate == 0.0 && self.clients.closed_loop_users == 0) {
            return Err(Error::bad_input(format!(
                "clients.arrival_rate_per_s = {rate}: must be a positive rate per second (0 only with closed_loop_users)"
            )));
        }
        if self.clients.keys == 0 || self.clients.keys > 10_000_000 {
            return Err(Error::bad_input(format!("clients.keys = {}: must be from 1 to 10000000", self.clients.keys)));
        }
        if !(self.clients.zipf_s.is_finite() && self.clients.zipf_s >= 0.0) {
            return Err(Error::bad_input(format!(
                "clients.zipf_s = {}: must be 0 (uniform) or a positive skew",
                self.clients.zipf_s
            )));
        }
        positive("clients.timeout_s", self.clients.timeout_s, "a positive number of seconds")?;
        if !(0.0..=1.0).contains(&self.clients.hot_share) {
            return Err(Error::bad_input(format!(
                "clients.hot_share = {}: must be from 0 to 1",
                self.clients.hot_share
            )));
        }
        if self.clients.closed_loop_users > 0 {
            positive("clients.think_time_s", self.clients.think_time_s, "a positive number of seconds")?;
        }
        Ok(())
    }

    fn validate_router_and_shards(&self) -> Result<()> {
        at_least_one("router.shards", self.router.shards)?;
        at_least_one("router.vnodes", self.router.vnodes)?;
        if self.router.shards as u64 * self.router.vnodes as u64 > 10_000_000 {
            return Err(Error::bad_input("router.vnodes: shards × vnodes must stay below 10000000"));
        }
        if self.router.capacity_factor.is_nan() || self.router.capacity_factor < 1.0 {
            return Err(Error::bad_input(format!(
                "router.capacity_factor = {}: must be at least 1 (inf = plain consistent hashing)",
                self.router.capacity_factor
            )));
        }
        if self.router.hash == RingHash::Sha256 && self.clients.keys > 1_000_000 {
            return Err(Error::bad_input(format!(
                "clients.keys = {}: with router.hash = \"sha256\" at most 1000000 keys (their hashes are precomputed)",
                self.clients.keys
            )));
        }
        at_least_one("shards.servers", self.shards.servers)?;
        if self.shards.queue_order == QueueOrderName::Codel {
            positive("shards.codel_target_s", self.shards.codel_target_s, "a positive number of seconds")?;
            positive("shards.codel_interval_s", self.shards.codel_interval_s, "a positive number of seconds")?;
        }
        match &self.shards.service {
            ShapeOrValue::Shape(shape) => {
                let service_s = self.shards.service_s.unwrap_or(f64::NAN);
                positive("shards.service_s", service_s, "a positive number of seconds")?;
                if *shape == ServiceName::Lognormal {
                    positive("shards.service_sigma", self.shards.service_sigma, "positive for a lognormal service")?;
                }
            }
            ShapeOrValue::Value(_) => {
                if let Some(value) = self.shards.service_s {
                    return Err(Error::bad_input(format!(
                        "shards.service_s = {value}: a distribution value in shards.service carries its own parameters; leave service_s out"
                    )));
                }
            }
        }
        Ok(())
    }

    fn validate_retry(&self) -> Result<()> {
        at_least_one("retry.max_attempts", self.retry.max_attempts)?;
        if self.retry.policy == RetryName::Backoff {
            positive("retry.backoff_base_s", self.retry.backoff_base_s, "a positive number of seconds")?;
            if self.retry.backoff_cap_s.is_nan() || self.retry.backoff_cap_s < self.retry.backoff_base_s {
                return Err(Error::bad_input(format!(
                    "retry.backoff_cap_s = {}: must be at least retry.backoff_base_s ({})",
                    self.retry.backoff_cap_s, self.retry.backoff_base_s
                )));
            }
        }
        let r = &self.retry;
        validate_budget("retry", r.budget, r.budget_ratio, r.budget_cap, r.budget_window_s)?;
        self.retry.breaker.validate("retry.breaker")
    }

    fn validate_faults(&self, run: &RunConfig) -> Result<()> {
        for (i, fault) in self.faults.iter().enumerate() {
            let path = format!("faults[{i}]");
            if !(fault.start_s.is_finite() && fault.start_s >= 0.0 && fault.start_s < run.horizon_s) {
                return Err(Error::bad_input(format!(
                    "{path}.start_s = {}: must be within the run (0 to run.horizon_s = {})",
                    fault.start_s, run.horizon_s
                )));
            }
            positive(&format!("{path}.duration_s"), fault.duration_s, "a positive number of seconds")?;
            let needs_factor = matches!(fault.kind, FaultName::Surge | FaultName::Brownout | FaultName::LatencySpike);
            match (needs_factor, fault.factor) {
                (true, None) => {
                    return Err(Error::bad_input(format!(
                        "{path}.factor: missing; a {:?} fault needs its factor",
                        fault.kind
                    )))
                }
                (true, Some(f)) if !(f.is_finite() && f > 0.0) => {
                    return Err(Error::bad_input(format!("{path}.factor = {f}: must be a positive number")))
                }
                (false, Some(_)) => {
                    return Err(Error::bad_input(format!("{path}.factor: a {:?} fault takes no factor", fault.kind)))
                }
                _ => {}
            }
            let needs_shard = matches!(fault.kind, FaultName::Brownout | FaultName::Stall | FaultName::ShardFailure);
            match (needs_shard, fault.shard) {
                (true, None) => {
                    return Err(Error::bad_input(format!(
                        "{path}.shard: missing; a {:?} fault needs a shard",
                        fault.kind
                    )))
                }
                (true, Some(s)) if s >= self.router.shards => {
                    return Err(Error::bad_input(format!(
                        "{path}.shard = {s}: must be below router.shards ({})",
                        self.router.shards
                    )))
                }
                (false, Some(_)) => {
                    return Err(Error::bad_input(format!("{path}.shard: a {:?} fault takes no shard", fault.kind)))
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// The engine parameters for one replica.
    pub fn params(&self, run: &RunConfig) -> ClusterParams {
        ClusterParams {
            arrival_rate_per_s: self.clients.arrival_rate_per_s.unwrap_or(0.0),
            load: self.arrivals.clone(),
            keys: self.clients.keys,
            zipf_s: self.clients.zipf_s,
            hot_share: self.clients.hot_share,
            closed_loop_users: self.clients.closed_loop_users,
            think_time: secs_to_nanos(self.clients.think_time_s),
            attempt_timeout: secs_to_nanos(self.clients.timeout_s),
            shards: self.router.shards,
            vnodes: self.router.vnodes,
            capacity_factor: self.router.capacity_factor,
            hash: self.router.hash,
            servers: self.shards.servers,
            service: self.shards.service_time(),
            queue_capacity: self.shards.queue_capacity,
            discipline: self.shards.discipline(),
            drop_abandoned: self.shards.drop_abandoned,
            retry: self.retry.policy(),
            budget: self.retry.budget(),
            breaker: self.retry.breaker.config(),
            faults: self.faults.iter().map(FaultConfig::fault).collect(),
            warmup: secs_to_nanos(run.warmup_s),
            horizon: secs_to_nanos(run.horizon_s),
            bucket: secs_to_nanos(self.series.bucket_s()).max(1),
            recovery_hold: secs_to_nanos(self.series.recovery_hold_s),
        }
    }
}

impl ShardsConfig {
    fn service_time(&self) -> ServiceTime {
        let service_s = secs_to_nanos(self.service_s.unwrap_or_default());
        match &self.service {
            ShapeOrValue::Shape(ServiceName::Exponential) => ServiceTime::Exponential { mean: service_s },
            ShapeOrValue::Shape(ServiceName::Lognormal) => {
                ServiceTime::Lognormal { median: service_s, sigma: self.service_sigma }
            }
            ShapeOrValue::Shape(ServiceName::Constant) => ServiceTime::Constant { value: service_s },
            ShapeOrValue::Value(_) => {
                ServiceTime::Distribution(self.resolved_service.clone().expect("prepare resolves a distribution value"))
            }
        }
    }

    fn discipline(&self) -> QueueDiscipline {
        match self.queue_order {
            QueueOrderName::Fifo => QueueDiscipline::Fifo,
            QueueOrderName::Lifo => QueueDiscipline::Lifo,
            QueueOrderName::Codel => QueueDiscipline::CoDel(CoDelConfig {
                target: secs_to_nanos(self.codel_target_s),
                interval: secs_to_nanos(self.codel_interval_s).max(1),
            }),
        }
    }
}

impl RetryConfig {
    fn policy(&self) -> RetryPolicy {
        let backoff = self.backoff.with(secs_to_nanos(self.backoff_base_s), secs_to_nanos(self.backoff_cap_s));
        match self.policy {
            RetryName::None => RetryPolicy::None,
            RetryName::Naive => RetryPolicy::Naive { max_attempts: self.max_attempts },
            RetryName::Backoff => RetryPolicy::Backoff { max_attempts: self.max_attempts, backoff },
        }
    }

    fn budget(&self) -> RetryBudget {
        retry_budget(self.budget, self.budget_ratio, self.budget_cap, self.budget_initial, self.budget_window_s)
    }
}

/// The retry budget `kind` with the `[retry]` vocabulary's parameters (shared with the
/// graph's edges): ratio — tokens per success, cap, initial tokens; grpc — token ratio,
/// max tokens; ttl — percent, minimum per second, deposit lifetime; adaptive — K, window.
pub(crate) fn retry_budget(kind: BudgetName, ratio: f64, cap: f64, initial: f64, window_s: f64) -> RetryBudget {
    let window: Nanos = secs_to_nanos(window_s);
    match kind {
        BudgetName::None => RetryBudget::Unlimited,
        BudgetName::Ratio => RetryBudget::Ratio(RatioBudget::new(ratio, cap, initial)),
        BudgetName::Grpc => RetryBudget::Grpc(GrpcThrottle::new(cap, ratio)),
        BudgetName::Ttl => RetryBudget::Ttl(TtlBudget::new(window, cap as u32, ratio)),
        BudgetName::Adaptive => RetryBudget::Adaptive(Box::new(AdaptiveThrottle::new(ratio, window))),
    }
}

/// Checks a retry budget's parameters; `path` is the section (`retry`, `edges."a->b".retry`).
pub(crate) fn validate_budget(path: &str, kind: BudgetName, ratio: f64, cap: f64, window_s: f64) -> Result<()> {
    if kind == BudgetName::None {
        return Ok(());
    }
    positive(&format!("{path}.budget_ratio"), ratio, "positive")?;
    positive(&format!("{path}.budget_cap"), cap, "positive")?;
    positive(&format!("{path}.budget_window_s"), window_s, "a positive number of seconds")?;
    if kind == BudgetName::Adaptive && ratio < 1.0 {
        return Err(Error::bad_input(format!(
            "{path}.budget_ratio = {ratio}: with {path}.budget = \"adaptive\", budget_ratio is the throttle's K \
             (requests are rejected locally once they exceed K × accepts), and K must be at least 1; the \
             default 0.1 is the ratio budget's 10%, not a K"
        ))
        .with_hint(format!("set {path}.budget_ratio = 2 (the SRE book's K) with budget = \"adaptive\"")));
    }
    if kind == BudgetName::Ttl && ratio > 1000.0 {
        return Err(Error::bad_input(format!("{path}.budget_ratio: the TTL budget's percent must be at most 1000")));
    }
    Ok(())
}

impl BreakerSection {
    /// Checks an enabled breaker's fields; `path` is the section.
    pub(crate) fn validate(&self, path: &str) -> Result<()> {
        if !self.enabled {
            return Ok(());
        }
        if !(self.failure_rate_threshold > 0.0 && self.failure_rate_threshold <= 1.0) {
            return Err(Error::bad_input(format!(
                "{path}.failure_rate_threshold = {}: must be in (0, 1]",
                self.failure_rate_threshold
            )));
        }
        positive(&format!("{path}.window_s"), self.window_s, "a positive number of seconds")?;
        positive(&format!("{path}.open_s"), self.open_s, "a positive number of seconds")?;
        match (self.slow_call_s, self.slow_call_rate_threshold) {
            (None, None) => {}
            (Some(slow), Some(rate)) => {
                positive(&format!("{path}.slow_call_s"), slow, "a positive number of seconds")?;
                if !(rate > 0.0 && rate <= 1.0) {
                    return Err(Error::bad_input(format!("{path}.slow_call_rate_threshold = {rate}: must be in (0, 1]")));
                }
            }
            _ => {
                return Err(Error::bad_input(format!(
                    "{path}: slow_call_s and slow_call_rate_threshold go together (a call this slow, and the share of them that opens the breaker)"
                )))
            }
        }
        at_least_one(&format!("{path}.half_open_probes"), self.half_open_probes)
    }

    pub(crate) fn config(&self) -> Option<BreakerConfig> {
        self.enabled.then(|| BreakerConfig {
            window: SlidingWindow::Time { window: secs_to_nanos(self.window_s).max(10), buckets: 10 },
            minimum_calls: self.minimum_calls,
            failure_rate_threshold: self.failure_rate_threshold,
            open_duration: secs_to_nanos(self.open_s),
            max_open_duration: secs_to_nanos(self.open_s),
            half_open_probes: self.half_open_probes,
            slow_call_duration: self.slow_call_s.map_or(BreakerConfig::default().slow_call_duration, secs_to_nanos),
            slow_call_rate_threshold: self.slow_call_rate_threshold.unwrap_or(1.0),
            ..BreakerConfig::default()
        })
    }
}

impl FaultConfig {
    /// The fault as a window the report shades.
    fn window(&self) -> Window {
        let factor = self.factor.map(|f| format!(" ×{f}")).unwrap_or_default();
        let shard = self.shard.map(|s| format!(" of shard {s}")).unwrap_or_default();
        Window {
            label: format!("{}{shard}{factor}", self.kind.name().replace('_', " ")),
            start_s: self.start_s,
            end_s: self.start_s + self.duration_s,
        }
    }

    fn fault(&self) -> Fault {
        let (shard, factor) = (self.shard.unwrap_or(0), self.factor.unwrap_or(1.0));
        let kind = match self.kind {
            FaultName::Surge => FaultKind::Surge { multiplier: factor },
            FaultName::Brownout => FaultKind::Brownout { shard, slowdown: factor },
            FaultName::Stall => FaultKind::Brownout { shard, slowdown: f64::INFINITY },
            FaultName::ShardFailure => FaultKind::ShardFailure { shard },
            FaultName::LatencySpike => FaultKind::LatencySpike { factor },
        };
        Fault { kind, start: secs_to_nanos(self.start_s), duration: secs_to_nanos(self.duration_s) }
    }
}

const CLUSTER_METRICS: &[Metric<ClusterResults>] = &[
    count("offered", "requests the clients made (after warm-up)", |r| r.offered as f64),
    count("attempts", "attempts sent, retries included", |r| r.attempts as f64),
    headline(Direction::Lower, real("amplification_ratio", "attempts ÷ offered", |r| r.amplification_ratio)),
    count("successes", "requests answered within an attempt's timeout", |r| r.successes as f64),
    headline(Direction::Higher, fraction("success_ratio", "successes ÷ offered", |r| r.success_ratio)),
    headline(Direction::Higher, real("goodput_rps", "successes per second", |r| r.goodput_rps)),
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
    headline(Direction::Lower, fraction("wasted_work_ratio", "wasted ÷ busy server time", |r| r.wasted_work_ratio)),
    real("hops_mean", "virtual nodes walked past full shards, per routed attempt", |r| r.hops_mean),
    count("hops_max", "the longest walk", |r| r.hops_max as f64),
    real("peak_shard_load_ratio", "busiest shard's time-average load ÷ the mean", |r| r.peak_shard_load_ratio),
    count("breaker_trips", "breaker trips over all shards", |r| r.breaker_trips as f64),
    headline(
        Direction::Higher,
        fraction("recovered_ratio", "1 if the queue returned to its band after the last fault, else 0", |r| {
            flag(r.recovered)
        }),
    ),
    headline(
        Direction::Lower,
        real(
            "recovery_s",
            "seconds from the last fault's end to recovery; NaN (excluded from the mean) when not recovered",
            |r| r.recovery_s,
        ),
    ),
    count("events", "events handled, warm-up included", |r| r.events as f64),
];

const CLUSTER_SERIES: &[SeriesDef] = &[
    SeriesDef { name: "queue_depth", kind: SeriesKind::Area },
    SeriesDef { name: "in_flight", kind: SeriesKind::Area },
    SeriesDef { name: "attempt_rps", kind: SeriesKind::Count },
    SeriesDef { name: "goodput_rps", kind: SeriesKind::Count },
];

/// The breaker's defaults as the docs state them (issue 71: they were documented
/// nowhere, and policies.md listed only the library's): the graph chapter's schema line
/// and the policies chapter both give `BreakerSection::default()`'s values.
#[cfg(test)]
#[test]
fn the_breaker_defaults_are_the_documented_ones() {
    let d = BreakerSection::default();
    let graph = include_str!("../../../docs/src/models/graph.md");
    let policies = include_str!("../../../docs/src/policies.md");
    for (field, value) in [
        ("failure_rate_threshold", d.failure_rate_threshold),
        ("minimum_calls", d.minimum_calls as f64),
        ("window_s", d.window_s),
        ("open_s", d.open_s),
        ("half_open_probes", d.half_open_probes as f64),
    ] {
        let text = if value.fract() == 0.0 && field != "window_s" { format!("{value}") } else { format!("{value:?}") };
        assert!(graph.contains(&format!("{field} ({text})")), "graph.md: {field} ({text})");
        assert!(policies.contains(&format!("`{field}` {text}")), "policies.md: `{field}` {text}");
    }
}
