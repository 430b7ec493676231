//! What a replica of the graph model reports: per entry point, per service, per edge,
//! plus recovery; and its time series. Counters only count requests whose tree began
//! after warm-up.

use crate::kernel::replica_quantiles::ReplicaQuantiles;
use crate::measurement::latency_windows::WindowCounts;
use crate::measurement::sparse_counts::SparseCounts;

use super::params::{Cause, Failure, Refusal};

/// One workload's entry point.
#[derive(Clone, Debug, Default)]
pub struct EntryResults {
    /// Requests offered.
    pub offered: u64,
    /// Requests answered in full.
    pub successes: u64,
    /// Requests answered with a fallback somewhere in the tree.
    pub degraded: u64,
    /// By [`Failure`].
    pub failed: [u64; 4],
    /// Whether it counts root causes (an entry point does; a call site does not).
    pub keeps_causes: bool,
    /// Failed requests by root cause ([`Cause::index`]: service × failure), for the
    /// causes that occurred.
    pub failed_by_cause: SparseCounts,
    /// Degraded requests by the service whose failure a fallback answered for, for
    /// the services that occurred.
    pub degraded_by_service: SparseCounts,
    /// Failed requests by the service that caused them (the culprit of their root
    /// cause, see `culprit.rs`), for the services that occurred.
    pub caused_by: SparseCounts,
    /// Requests answered (in full or degraded) above the entry's SLO, or above its
    /// running p99 without one.
    pub slow: u64,
    /// Slow requests by the service that caused most of their time.
    pub slow_caused_by: SparseCounts,
    /// Successful requests' latency (degraded answers excluded), for this replica's
    /// quantiles within 0.1%, and its sum.
    pub latency: ReplicaQuantiles,
    /// The sum of those latencies, seconds.
    pub latency_sum_s: f64,
    /// Every ended request's latency (answered, degraded or failed; a failure's is the
    /// time until its caller learned it).
    pub latency_all: ReplicaQuantiles,
    /// Requests answered in full per second.
    pub goodput_rps: f64,
}

impl EntryResults {
    /// Requests that failed, every failure.
    pub fn failed_total(&self) -> u64 {
        self.failed.iter().sum()
    }

    /// Mean latency of successful requests, seconds (NaN without any).
    pub fn latency_mean_s(&self) -> f64 {
        if self.successes == 0 {
            f64::NAN
        } else {
            self.latency_sum_s / self.successes as f64
        }
    }

    /// Requests that failed by `failure`.
    pub fn failed_by(&self, failure: Failure) -> u64 {
        self.failed[failure.index()]
    }

    /// Failed requests whose root cause was `cause`.
    pub fn failed_by_cause(&self, cause: Cause) -> u64 {
        self.failed_by_cause.get(cause.index() as u32)
    }

    /// Degraded requests whose fallback answered for a failure of `service`.
    pub fn degraded_by_service(&self, service: u32) -> u64 {
        self.degraded_by_service.get(service)
    }

    /// Failed requests that `service` caused.
    pub fn caused_by(&self, service: u32) -> u64 {
        self.caused_by.get(service)
    }

    /// Slow requests most of whose time `service` caused.
    pub fn slow_caused_by(&self, service: u32) -> u64 {
        self.slow_caused_by.get(service)
    }
}

/// One service, summed over its instances.
#[derive(Clone, Debug, Default)]
pub struct ServiceResults {
    /// Attempts that reached one of its instances.
    pub arrivals: u64,
    /// By [`Refusal`].
    pub refused: [u64; 8],
    /// Mean busy workers ÷ workers, after warm-up.
    pub utilisation: f64,
    /// Workers doing work (not blocked on a call) ÷ workers, time-averaged: what a
    /// CPU-based autoscaler reads.
    pub cpu_utilisation: f64,
    /// Requests waiting for a worker, time-averaged over its instances.
    pub queue_mean: f64,
    /// Mean requests present (queued, working, waiting on calls).
    pub present_mean: f64,
    /// Worker-seconds spent on counted jobs, and on those whose caller had given up.
    pub busy_s: f64,
    /// Of those, worker-seconds on jobs whose caller had given up.
    pub wasted_s: f64,
    /// Jobs cancelled because their caller gave up.
    pub cancelled: u64,
    /// The limiter's limit at the end, summed over instances (0 without a limiter).
    pub limit_final: f64,
    /// Health-check probes sent after warm-up.
    pub health_checks: u64,
    /// Of those, probes that failed (refused, errored or unanswered in time).
    pub health_check_failures: u64,
    /// Times an instance was marked unhealthy after warm-up.
    pub unhealthy_marks: u64,
    /// Instance-seconds marked unhealthy inside the measured window.
    pub unhealthy_s: f64,
    /// Instances serving, time-averaged (its count when not autoscaled).
    pub instances_mean: f64,
    /// Autoscaling decisions that added instances, after warm-up.
    pub scale_ups: u64,
    /// Autoscaling decisions that removed instances, after warm-up.
    pub scale_downs: u64,
}

impl ServiceResults {
    /// Attempts it refused for `refusal`.
    pub fn refused_by(&self, refusal: Refusal) -> u64 {
        self.refused[refusal.index()]
    }
}

/// One edge: the client side of the calls along it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct EdgeResults {
    /// Calls made.
    pub calls: u64,
    /// Attempts sent, retries and hedges included.
    pub attempts: u64,
    /// Retries sent.
    pub retries: u64,
    /// Hedges sent.
    pub hedges: u64,
    /// Calls answered first by a hedge.
    pub hedge_wins: u64,
    /// Attempts timed out.
    pub timeouts: u64,
    /// Retries and hedges the budget refused.
    pub budget_denials: u64,
    /// Attempts the breaker refused.
    pub breaker_refusals: u64,
    /// Times the breaker opened.
    pub breaker_trips: u64,
    /// Calls that failed (fallbacks excluded), and those answered by a fallback.
    pub failed: u64,
    /// Calls answered by the fallback.
    pub fallbacks: u64,
    /// Callee instances ejected by outlier detection (ejections that started after
    /// warm-up).
    pub ejections: u64,
    /// Instance-seconds spent ejected inside the measured window.
    pub ejected_s: f64,
    /// Attempts that got a connection from the pool (at once or after waiting).
    pub pool_acquired: u64,
    /// Of those, attempts that waited for it.
    pub pool_waited: u64,
    /// Their waits summed, seconds.
    pub pool_wait_s: f64,
    /// Attempts refused because the pool's queue was full.
    pub pool_full: u64,
    /// Attempts that gave up waiting for a connection (the pool's wait timeout).
    pub pool_timeouts: u64,
    /// Connections in use over the edge's pools, time-averaged after warm-up.
    pub pool_in_use_mean: f64,
}

/// One cache endpoint, summed over its instances' caches.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CacheResults {
    /// Lookups (requests that reached the endpoint and did its work).
    pub lookups: u64,
    /// Lookups that found a fresh entry.
    pub hits: u64,
    /// Misses that waited for another request's fetch of the same key (single flight).
    pub coalesced: u64,
    /// Fetches that failed and were answered with an expired entry.
    pub stale_served: u64,
    /// Entries stored after a fetch.
    pub fills: u64,
    /// Entries evicted to make room.
    pub evictions: u64,
}

#[derive(Clone, Debug, Default)]
/// Scalar results of one replica (after warm-up).
pub struct GraphResults {
    /// Per entry point (workload).
    pub entries: Vec<EntryResults>,
    /// Per call site (in the call sites' order), the same figures for the calls it made:
    /// `offered` counts every call made, the outcomes those that ended (a call whose
    /// group was decided without it, or whose caller gave up, is in no outcome).
    pub sites: Vec<EntryResults>,
    /// Per service.
    pub services: Vec<ServiceResults>,
    /// Per edge.
    pub edges: Vec<EdgeResults>,
    /// Per endpoint (zero for one without a cache).
    pub caches: Vec<CacheResults>,
    /// From the whole graph's queue depth, as the cluster measures it.
    pub recovery_s: f64,
    /// Whether it recovered.
    pub recovered: bool,
    /// Events handled, warm-up included.
    pub events: u64,
}

/// Per bucket: per service Σ queued × ns and Σ busy workers × ns; per entry, successes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GraphSeries {
    /// Per service, Σ queued × ns per bucket.
    pub queued_area: Vec<Vec<u128>>,
    /// Per service, Σ busy workers × ns per bucket.
    pub busy_area: Vec<Vec<u128>>,
    /// Per service, Σ serving instances × ns per bucket (empty unless autoscaled).
    pub instances_area: Vec<Vec<u128>>,
    /// Per service, Σ instances its autoscaler last asked for × ns per bucket, and
    /// Σ the metric it last read per ready instance × 1,000 × ns (empty unless
    /// autoscaled).
    pub desired_area: Vec<Vec<u128>>,
    /// See `desired_area`.
    pub scale_read_milli_area: Vec<Vec<u128>>,
    /// Per endpoint, cache hits and misses per bucket (empty without a cache).
    pub cache_hits: Vec<Vec<u64>>,
    /// See `cache_hits`.
    pub cache_misses: Vec<Vec<u64>>,
    /// Per edge, Σ instances ejected × ns per bucket (empty without outlier detection).
    pub ejected_area: Vec<Vec<u128>>,
    /// Per edge, Σ pool connections in use × ns and Σ attempts waiting × ns per bucket
    /// (empty without a pool).
    pub pool_in_use_area: Vec<Vec<u128>>,
    /// See `pool_in_use_area`.
    pub pool_waiting_area: Vec<Vec<u128>>,
    /// Per service, Σ instances marked unhealthy × ns per bucket (empty without checks).
    pub unhealthy_area: Vec<Vec<u128>>,
    /// Per entry point, requests answered in full per bucket.
    pub successes: Vec<Vec<u64>>,
    /// Per entry point, counted requests' latencies over time by the window they ended
    /// in (empty unless [`super::Graph::with_latency_windows`]).
    pub latency: Vec<WindowCounts>,
}
