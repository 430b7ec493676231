//! What one cluster replica reports: scalar results, per-bucket integer series and
//! the hops histogram, and recovery after the last fault.

use super::params::ClusterParams;
use crate::kernel::time::Nanos;
use crate::measurement::latency_windows::WindowCounts;

/// Time series of one replica, per bucket, in exact integers.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClusterSeries {
    /// Σ (queued attempts × ns) per bucket.
    pub queued_area: Vec<u128>,
    /// Σ (attempts at shards, queued or in service × ns) per bucket.
    pub in_flight_area: Vec<u128>,
    /// Attempts sent per bucket.
    pub attempts: Vec<u64>,
    /// Successful requests per bucket.
    pub successes: Vec<u64>,
    /// Routed attempts (after warm-up) by hops walked: index h for h < 64, index 64 for 64 or more.
    pub hops: Vec<u64>,
    /// Counted requests' latencies over time, by the window they ended in (empty
    /// unless [`super::Cluster::with_latency_windows`]).
    pub latency: WindowCounts,
}

/// Exact hop counts are kept below this; longer walks share the last slot.
pub const HOPS_TRACKED: usize = 64;

/// Scalar results of one replica (after warm-up).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ClusterResults {
    pub offered: u64,
    pub attempts: u64,
    pub amplification_ratio: f64,
    pub successes: u64,
    pub success_ratio: f64,
    pub goodput_rps: f64,
    pub failed: u64,
    pub timeouts: u64,
    pub refused_queue_full: u64,
    pub refused_breaker: u64,
    pub refused_no_shard: u64,
    pub dropped_codel: u64,
    pub retries_denied_by_budget: u64,
    pub wasted_work_s: f64,
    pub wasted_work_ratio: f64,
    pub hops_mean: f64,
    pub hops_max: u64,
    pub peak_shard_load_ratio: f64,
    pub breaker_trips: u64,
    /// Seconds from the end of the last fault until the queue is back in its band (NaN if never).
    pub recovery_s: f64,
    pub recovered: bool,
    pub events: u64,
}

/// Recovery after the cluster's last fault (see [`crate::measurement::recovery::recovery_time`]).
pub fn recovery_time(queued_area: &[u128], p: &ClusterParams) -> Option<Nanos> {
    let windows: Vec<(Nanos, Nanos)> = p.faults.iter().map(|f| (f.start, f.start.saturating_add(f.duration))).collect();
    crate::measurement::recovery::recovery_time(queued_area, p.bucket, p.warmup, &windows, p.recovery_hold)
}
