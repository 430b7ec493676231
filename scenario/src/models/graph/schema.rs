//! The sections of a `graph` scenario as written: `[services.NAME]` with their
//! `endpoints`, `[edges."A->B"]`, `[[workload]]`, `[[faults]]`, `[series]` and
//! `[graph]`. Serde structs only, unknown fields refused; `build.rs` checks them and
//! turns names into indices.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use stampede_engine::policy::backoff::BackoffKind;

use super::super::cluster::{self, BreakerSection, BudgetName, QueueOrderName};
use super::super::series::SeriesConfig;
use crate::inputs::load::LoadSpec;
use crate::inputs::DistributionSpec;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GraphConfig {
    pub services: BTreeMap<String, ServiceConfig>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub edges: BTreeMap<String, EdgeConfig>,
    pub workload: Vec<WorkloadConfig>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub faults: Vec<FaultConfig>,
    #[serde(default)]
    pub series: SeriesConfig,
    #[serde(default)]
    pub graph: GraphSection,
    /// Names resolved to indices and distributions read, when the point is typed.
    #[serde(skip)]
    pub(super) topology: Option<std::sync::Arc<super::topology::Topology>>,
    /// The metrics named from that topology, with where each value comes from.
    #[serde(skip)]
    pub(super) metric_table: Option<std::sync::Arc<super::metrics::MetricTable>>,
}

/// `[graph]`: settings of the whole graph.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GraphSection {
    /// Calls nest at most this deep. Required when calls form a cycle (a call beyond it
    /// is refused); without a cycle the depth is the graph's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_depth: Option<u32>,
}

stampede_engine::named_enum! {
    /// `services.NAME.threading`.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Threading {
        /// A worker per request, held while it waits on its calls (thread-per-request).
        Blocking = "blocking",
        /// A worker per piece of local work, released while the request waits (an event loop).
        Async = "async",
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServiceConfig {
    #[serde(default = "one")]
    pub instances: u32,
    /// Per instance.
    pub workers: u32,
    #[serde(default)]
    pub queue: QueueConfig,
    /// Work whose caller gave up is cancelled (dropped, its worker freed); by default it runs on.
    #[serde(default)]
    pub cancel_abandoned: bool,
    #[serde(default = "blocking", with = "crate::base::names")]
    pub threading: Threading,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limiter: Option<LimiterConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shedder: Option<ShedderConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_limit: Option<RateLimitConfig>,
    /// Active health checks of its instances.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_check: Option<HealthCheckSection>,
    /// Horizontal autoscaling (`instances` is then the count at the start).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autoscale: Option<AutoscaleSection>,
    pub endpoints: BTreeMap<String, EndpointConfig>,
}

stampede_engine::named_enum! {
    /// `services.NAME.autoscale.metric`.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum ScaleMetricName {
        /// Workers doing work ÷ workers per ready instance: what a CPU-based HPA reads
        /// (a worker blocked on a downstream call uses no CPU). The default.
        Cpu = "cpu",
        /// Busy workers ÷ workers per ready instance, those blocked on calls included
        /// (threads held).
        Occupancy = "occupancy",
        /// The same as `occupancy` (its name before `cpu` existed).
        Utilisation = "utilisation",
        /// Requests arriving per second per ready instance.
        Rps = "rps",
        /// Requests present per ready instance (a custom "in-flight" metric).
        InFlight = "in_flight",
        /// Requests waiting per ready instance (a queue-depth metric, as KEDA scales on).
        QueueDepth = "queue_depth",
    }
}

/// `autoscale = { … }` on a service: the Kubernetes HPA's algorithm and defaults.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AutoscaleSection {
    #[serde(default = "cpu", with = "crate::base::names")]
    pub metric: ScaleMetricName,
    /// The metric's target per ready instance (a fraction for utilisation).
    pub target: f64,
    #[serde(default = "one")]
    pub min: u32,
    pub max: u32,
    /// Between decisions, seconds (the HPA's sync period, 15).
    #[serde(default = "sync_period_s")]
    pub sync_period_s: f64,
    /// A usage ratio this close to 1 changes nothing (0.1).
    #[serde(default = "tolerance")]
    pub tolerance: f64,
    /// A scale-down waits until every recommendation this long was as low (300).
    #[serde(default = "scale_down_stabilization_s")]
    pub scale_down_stabilization_s: f64,
    /// A scale-up waits until every recommendation this long was as high (0).
    #[serde(default)]
    pub scale_up_stabilization_s: f64,
    /// From the decision to a new instance's first request (default: 30 s constant,
    /// written out so `show` prints it).
    #[serde(default = "provisioning")]
    pub provisioning: DistributionSpec,
    /// A new instance serves slower for this long, seconds (0: no cold start).
    #[serde(default)]
    pub cold_start_s: f64,
    /// Its work takes this many times longer at first, falling linearly to 1 (2).
    #[serde(default = "cold_start_factor")]
    pub cold_start_factor: f64,
}

fn provisioning() -> DistributionSpec {
    DistributionSpec { dist: "constant".into(), value_s: Some(30.0), ..DistributionSpec::default() }
}

fn cpu() -> ScaleMetricName {
    ScaleMetricName::Cpu
}
fn sync_period_s() -> f64 {
    15.0
}
fn tolerance() -> f64 {
    0.1
}
fn scale_down_stabilization_s() -> f64 {
    300.0
}
fn cold_start_factor() -> f64 {
    2.0
}

/// `health_check = { … }` on a service: Envoy's `health_checks` fields, with
/// Kubernetes' readiness-probe defaults (Envoy requires them written).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HealthCheckSection {
    /// Between probes of an instance, seconds (Kubernetes `periodSeconds`, 10).
    #[serde(default = "probe_interval_s")]
    pub interval_s: f64,
    /// A probe unanswered this long fails, seconds (`timeoutSeconds`, 1).
    #[serde(default = "probe_timeout_s")]
    pub timeout_s: f64,
    /// Failed probes in a row that mark an instance unhealthy (`failureThreshold`, 3).
    #[serde(default = "unhealthy_threshold")]
    pub unhealthy_threshold: u32,
    /// Passed probes in a row that mark it healthy again (`successThreshold`, 1).
    #[serde(default = "one")]
    pub healthy_threshold: u32,
    /// The work a probe does on a worker, seconds (default 0.001).
    #[serde(default = "probe_work_s")]
    pub work_s: f64,
    /// Below this percentage of healthy instances every one is used (Envoy's
    /// `healthy_panic_threshold`, 50).
    #[serde(default = "panic_threshold_percent")]
    pub panic_threshold_percent: f64,
}

fn probe_interval_s() -> f64 {
    10.0
}
fn probe_timeout_s() -> f64 {
    1.0
}
fn unhealthy_threshold() -> u32 {
    3
}
fn probe_work_s() -> f64 {
    0.001
}
fn panic_threshold_percent() -> f64 {
    50.0
}

fn one() -> u32 {
    1
}

fn blocking() -> Threading {
    Threading::Blocking
}

/// A field left out takes its default (`queue = { order = "lifo" }` keeps 1000 places).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct QueueConfig {
    /// Waiting requests per instance at most.
    pub capacity: u32,
    #[serde(with = "crate::base::names")]
    pub order: QueueOrderName,
    pub codel_target_s: f64,
    pub codel_interval_s: f64,
}

impl Default for QueueConfig {
    fn default() -> Self {
        QueueConfig {
            capacity: 1000,
            order: cluster::default_order(),
            codel_target_s: cluster::default_codel_target(),
            codel_interval_s: cluster::default_codel_interval(),
        }
    }
}

stampede_engine::named_enum! {
    /// `services.NAME.limiter.kind`: the engine's limiters with their reference defaults.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum LimiterName {
        Fixed = "fixed",
        Aimd = "aimd",
        Vegas = "vegas",
        Gradient = "gradient",
        Gradient2 = "gradient2",
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimiterConfig {
    #[serde(with = "crate::base::names")]
    pub kind: LimiterName,
    /// The fixed limit, or an adaptive limiter's starting limit.
    pub initial: u32,
    /// An adaptive limiter's bounds (its reference's defaults when left out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<u32>,
}

/// Shed by criticality once the instance's requests present (queued ones included)
/// reach these shares of its workers; critical requests only when that many are present.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShedderConfig {
    /// Off: the section is kept but sheds nothing (a grid can switch it).
    #[serde(default = "yes")]
    pub enabled: bool,
    #[serde(default = "shed_low")]
    pub shed_low_at: f64,
    #[serde(default = "shed_normal")]
    pub shed_normal_at: f64,
}

fn shed_low() -> f64 {
    0.75
}
fn shed_normal() -> f64 {
    0.9
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateLimitConfig {
    /// Requests per second per instance.
    pub per_s: f64,
    #[serde(default = "burst")]
    pub burst: u64,
}

fn burst() -> u64 {
    1
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EndpointConfig {
    /// Local work before the steps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work: Option<DistributionSpec>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<StepConfig>,
    /// A cache in front of the steps (the origin): a hit answers after the work.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<CacheSection>,
}

/// `cache = { … }` on an endpoint: each instance caches request keys.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CacheSection {
    /// Entries per instance (LRU beyond).
    pub capacity: u32,
    /// Seconds an entry stays fresh (none: for ever).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_s: Option<f64>,
    /// Single flight: a miss for a key being fetched waits for that fetch.
    #[serde(default)]
    pub coalesce: bool,
    /// A failed fetch is answered with the expired entry, if any.
    #[serde(default)]
    pub serve_stale: bool,
}

/// One step: a call, calls in parallel, one of several calls, or local work.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probability: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel: Option<Vec<CallConfig>>,
    /// Exactly one of these alternatives — a call, or steps of its own — by their
    /// probabilities (summing to at most 1; past the sum, none): alternatives that
    /// never happen together.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub one_of: Option<Vec<AlternativeConfig>>,
    /// `all` (default), `first` (the first success), `quorum` with `quorum = k`, or
    /// `none` (fire-and-forget: the caller goes on at once; a single call takes it too).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quorum: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work: Option<DistributionSpec>,
}

/// One alternative of a `one_of`: a call (`call = "db.get"`), or a sequence of steps
/// of its own (`steps = [{ work = … }, { call = … }]`: what the endpoint does in one of
/// its call patterns, its work included).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlternativeConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probability: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steps: Option<Vec<StepConfig>>,
}

/// Every step of an endpoint, those inside `one_of` alternatives included, with its
/// path (`{endpoint_path}.steps[k]`, `….steps[k].one_of[i].steps[j]`), in order. An
/// explicit stack: nesting costs memory, not the thread's stack.
pub fn every_step<'a>(steps: &'a [StepConfig], endpoint_path: &str) -> Vec<(String, &'a StepConfig)> {
    let mut out = Vec::new();
    let mut stack: Vec<(String, &StepConfig)> =
        steps.iter().enumerate().rev().map(|(k, step)| (format!("{endpoint_path}.steps[{k}]"), step)).collect();
    while let Some((path, step)) = stack.pop() {
        for (i, alternative) in step.one_of.as_deref().unwrap_or_default().iter().enumerate().rev() {
            for (k, inner) in alternative.steps.as_deref().unwrap_or_default().iter().enumerate().rev() {
                stack.push((format!("{path}.one_of[{i}].steps[{k}]"), inner));
            }
        }
        out.push((path, step));
    }
    out
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CallConfig {
    pub call: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probability: Option<f64>,
}

stampede_engine::named_enum! {
    /// `edges.E.balance`.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum BalanceName {
        RoundRobin = "round_robin",
        Random = "random",
        LeastOutstanding = "least_outstanding",
        PowerOfTwoChoices = "power_of_two_choices",
        /// The request's key on a ring of the callee's instances, with bounded loads.
        ConsistentHash = "consistent_hash",
    }
}

/// `edges.E.timeout_s`: seconds, or a running quantile (`"p99"`, `"p95 * 2"`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum TimeoutValue {
    Seconds(f64),
    Quantile(String),
}

impl TimeoutValue {
    /// The fixed timeout in seconds, if it is one.
    pub fn seconds(&self) -> Option<f64> {
        match self {
            TimeoutValue::Seconds(s) => Some(*s),
            TimeoutValue::Quantile(_) => None,
        }
    }
}

stampede_engine::named_enum! {
    /// `edges.E.deadline`.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum DeadlineName {
        /// The call gets what is left of its caller's deadline.
        Propagate = "propagate",
        /// The call has no deadline of its own (only its timeouts).
        None = "none",
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EdgeConfig {
    /// One way, drawn for the request and again for its answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<DistributionSpec>,
    /// Per attempt: seconds, or `"p99"` / `"p99.9"` / `"p95 * 2"` — a multiple of the
    /// callee's running latency quantile, between `timeout_min_s` and `timeout_max_s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_s: Option<TimeoutValue>,
    /// An adaptive timeout's floor, seconds (default 0.001).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_min_s: Option<f64>,
    /// An adaptive timeout's ceiling, seconds, and its value until 20 answers are seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_max_s: Option<f64>,
    #[serde(default = "propagate", with = "crate::base::names")]
    pub deadline: DeadlineName,
    #[serde(default)]
    pub retry: EdgeRetryConfig,
    #[serde(default)]
    pub breaker: BreakerSection,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hedge: Option<HedgeConfig>,
    #[serde(default = "round_robin", with = "crate::base::names")]
    pub balance: BalanceName,
    /// consistent_hash: points per instance, and the bounded-load factor c (inf: plain).
    #[serde(default = "vnodes")]
    pub hash_vnodes: u32,
    #[serde(default = "capacity_factor")]
    pub hash_capacity_factor: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback: Option<FallbackConfig>,
    /// Outlier detection: callee instances that fail in a row are ejected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outlier: Option<OutlierSection>,
    /// A connection pool per caller instance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<PoolSection>,
}

impl Default for EdgeConfig {
    fn default() -> Self {
        EdgeConfig {
            network: None,
            timeout_s: None,
            timeout_min_s: None,
            timeout_max_s: None,
            deadline: propagate(),
            retry: EdgeRetryConfig::default(),
            breaker: BreakerSection::default(),
            hedge: None,
            balance: round_robin(),
            hash_vnodes: vnodes(),
            hash_capacity_factor: capacity_factor(),
            fallback: None,
            outlier: None,
            pool: None,
        }
    }
}

/// `outlier = { … }` on an edge: Envoy's consecutive-5xx ejection, by its names and
/// defaults.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutlierSection {
    /// Failures in a row (timeouts, refusals, errors) that eject an instance.
    #[serde(default = "consecutive_5xx")]
    pub consecutive_5xx: u32,
    /// The first ejection's length, seconds; the n-th lasts n times as long.
    #[serde(default = "base_ejection_s")]
    pub base_ejection_s: f64,
    /// The longest ejection, seconds.
    #[serde(default = "max_ejection_s")]
    pub max_ejection_s: f64,
    /// The most instances ejected at once, percent (at least one may always be).
    #[serde(default = "max_ejection_percent")]
    pub max_ejection_percent: f64,
}

/// `pool = { … }` on an edge: each caller instance's connections (HikariCP's
/// `maximumPoolSize`, Envoy's `max_connections`) and the queue of attempts waiting for
/// one (Envoy's `max_pending_requests`, HikariCP's `connectionTimeout`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoolSection {
    /// Connections per caller instance (HikariCP's default, 10).
    #[serde(default = "pool_size")]
    pub size: u32,
    /// Attempts waiting for a connection at most (Envoy's default, 1024); one more is
    /// refused at once (`pool_full`).
    #[serde(default = "max_pending")]
    pub max_pending: u32,
    /// How long an attempt waits for a connection, seconds (HikariCP's default, 30).
    #[serde(default = "wait_timeout_s")]
    pub wait_timeout_s: f64,
}

fn pool_size() -> u32 {
    10
}
fn max_pending() -> u32 {
    1024
}
fn wait_timeout_s() -> f64 {
    30.0
}

fn consecutive_5xx() -> u32 {
    5
}
fn base_ejection_s() -> f64 {
    30.0
}
fn max_ejection_s() -> f64 {
    300.0
}
fn max_ejection_percent() -> f64 {
    10.0
}

fn propagate() -> DeadlineName {
    DeadlineName::Propagate
}
fn round_robin() -> BalanceName {
    BalanceName::RoundRobin
}
fn vnodes() -> u32 {
    100
}
fn capacity_factor() -> f64 {
    1.25
}

/// The edge's retries: the cluster's `[retry]` vocabulary, with `on` naming which
/// failures are retried.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EdgeRetryConfig {
    /// 1 = no retries.
    #[serde(default = "one")]
    pub max_attempts: u32,
    #[serde(default = "crate::models::cluster::default_backoff", with = "crate::base::names")]
    pub backoff: BackoffKind,
    #[serde(default = "crate::models::cluster::default_backoff_base")]
    pub backoff_base_s: f64,
    #[serde(default = "crate::models::cluster::default_backoff_cap")]
    pub backoff_cap_s: f64,
    /// Which failures are retried: timeout, refused, error.
    #[serde(default = "retry_on")]
    pub on: Vec<String>,
    #[serde(default = "crate::models::cluster::default_budget", with = "crate::base::names")]
    pub budget: BudgetName,
    #[serde(default = "crate::models::cluster::default_budget_ratio")]
    pub budget_ratio: f64,
    #[serde(default = "crate::models::cluster::default_budget_cap")]
    pub budget_cap: f64,
    #[serde(default = "crate::models::cluster::default_budget_initial")]
    pub budget_initial: f64,
    #[serde(default = "crate::models::cluster::default_budget_window")]
    pub budget_window_s: f64,
}

impl Default for EdgeRetryConfig {
    fn default() -> Self {
        EdgeRetryConfig {
            max_attempts: 1,
            backoff: cluster::default_backoff(),
            backoff_base_s: cluster::default_backoff_base(),
            backoff_cap_s: cluster::default_backoff_cap(),
            on: retry_on(),
            budget: cluster::default_budget(),
            budget_ratio: cluster::default_budget_ratio(),
            budget_cap: cluster::default_budget_cap(),
            budget_initial: cluster::default_budget_initial(),
            budget_window_s: cluster::default_budget_window(),
        }
    }
}

fn retry_on() -> Vec<String> {
    vec!["timeout".into(), "refused".into(), "error".into()]
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HedgeConfig {
    /// A fixed delay, seconds; or `after = "p95"` (any `pNN`/`pNNN`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
    #[serde(default = "one")]
    pub max: u32,
    /// Answers seen before a quantile delay is trusted.
    #[serde(default = "min_samples")]
    pub min_samples: u32,
    /// A hedge asks the edge's retry budget, as a retry does.
    #[serde(default = "yes")]
    pub uses_budget: bool,
}

fn min_samples() -> u32 {
    20
}
fn yes() -> bool {
    true
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FallbackConfig {
    /// Failures answered by the fallback: timeout, refused, error, breaker_open.
    pub on: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadConfig {
    /// `service.endpoint`.
    pub entry: String,
    /// `poisson` (default) or `even`, at `rate_per_s`; or `load` for schedules and traces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arrivals: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_per_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load: Option<LoadSpec>,
    /// Closed loop: this many users, each waiting for its answer and thinking.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub users: Option<u32>,
    #[serde(default = "think")]
    pub think_time_s: f64,
    /// The client gives up on a request after this long (and it propagates).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline_s: Option<f64>,
    /// Answered requests slower than this are slow, each attributed to the service
    /// that caused most of its time (`ENTRY.slow_caused_by.SERVICE`); without it, those
    /// above the entry's running p99.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo_s: Option<f64>,
    /// Shares of `critical`, `normal` and `low` requests (the shedders read them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub criticality: Option<BTreeMap<String, f64>>,
    /// Distinct request keys (for consistent hashing and caches), uniform unless `zipf_s`.
    #[serde(default = "one_key")]
    pub keys: u64,
    /// Keys by popularity: key k (from 1) drawn in proportion to 1 / k^zipf_s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zipf_s: Option<f64>,
}

fn think() -> f64 {
    1.0
}
fn one_key() -> u64 {
    1
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultConfig {
    /// A service (`cache`), one instance (`cache#1`), or an edge (`api->cache`).
    pub target: String,
    /// slowdown | latency | errors | crash | partition
    pub kind: String,
    pub start_s: f64,
    /// Required for every kind but a flush, which acts at its start.
    #[serde(default)]
    pub duration_s: f64,
    /// slowdown: work × factor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub factor: Option<f64>,
    /// latency: seconds added to each piece of work (on an edge: to each way).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub added_s: Option<f64>,
    /// errors: the share of answers turned into errors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
    /// crash on a service: how many of its instances (the first k); all by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instances: Option<u32>,
    /// partition: `timeout` (calls are lost) or `fail_fast` (refused at once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
}
