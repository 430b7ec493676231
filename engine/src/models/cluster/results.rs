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
    /// Requests offered by the clients.
    pub offered: u64,
    /// Attempts sent, retries included.
    pub attempts: u64,
    /// Attempts ÷ requests.
    pub amplification_ratio: f64,
    /// Requests answered.
    pub successes: u64,
    /// Answered ÷ offered.
    pub success_ratio: f64,
    /// Requests answered per second.
    pub goodput_rps: f64,
    /// Requests that failed after their last attempt.
    pub failed: u64,
    /// Attempts that timed out.
    pub timeouts: u64,
    /// Attempts refused by a full queue.
    pub refused_queue_full: u64,
    /// Attempts refused by the client's breaker.
    pub refused_breaker: u64,
    /// Attempts with no shard to go to.
    pub refused_no_shard: u64,
    /// Attempts CoDel dropped at dequeue.
    pub dropped_codel: u64,
    /// Retries the budget refused.
    pub retries_denied_by_budget: u64,
    /// Server time spent on attempts whose client had given up, seconds.
    pub wasted_work_s: f64,
    /// Wasted server time ÷ busy server time.
    pub wasted_work_ratio: f64,
    /// Virtual nodes walked past full shards, per request.
    pub hops_mean: f64,
    /// The most virtual nodes one request walked.
    pub hops_max: u64,
    /// The busiest shard's load ÷ the mean shard load.
    pub peak_shard_load_ratio: f64,
    /// Times a breaker opened.
    pub breaker_trips: u64,
    /// Seconds from the end of the last fault until the queue is back in its band (NaN if never).
    pub recovery_s: f64,
    /// Whether the queues returned to their band after the last fault.
    pub recovered: bool,
    /// Events handled, warm-up included.
    pub events: u64,
}

/// Recovery after the cluster's last fault (see [`crate::measurement::recovery::recovery_time`]).
pub fn recovery_time(queued_area: &[u128], p: &ClusterParams) -> Option<Nanos> {
    let windows: Vec<(Nanos, Nanos)> = p.faults.iter().map(|f| (f.start, f.start.saturating_add(f.duration))).collect();
    crate::measurement::recovery::recovery_time(queued_area, p.bucket, p.warmup, &windows, p.recovery_hold)
}
