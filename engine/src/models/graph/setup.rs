//! A replica's starting state, built from its parameters: each service's, instance's,
//! edge's and workload's state, the connection pools and caches, and the series sized
//! to the run ([`super::Graph::new`] puts them together).
//!
//! Invariant: every random stream is derived from (master seed, replica, purpose,
//! entity index), so the order things are built in changes no draw.

use crate::components::arrivals::Arrivals;
use crate::components::distribution::{Distribution, Shape};
use crate::components::ring::{BoundedLoadRouter, HashRing, RingHash};
use crate::kernel::rng::{RngStream, StreamPurpose};
use crate::kernel::time::{Nanos, NANOS_PER_SEC};
use crate::kernel::timeout_fifo::TimeoutFifo;
use crate::measurement::buckets::BucketCursor;
use crate::measurement::level_series::LevelSeries;
use crate::measurement::running_quantile::RunningQuantile;
use crate::policy::adaptive_timeout::AdaptiveTimeout;
use crate::policy::autoscale::Autoscaler;
use crate::policy::breaker::CircuitBreaker;
use crate::policy::health::HealthChecker;
use crate::policy::hedge::HedgePolicy;
use crate::policy::outlier::OutlierDetector;
use crate::policy::pool::ConnectionPool;

use super::entities::{EdgeState, Instance, Lifecycle, ScalerState, ServiceState, WorkloadState};
use super::params::{Autoscale, Balance, EdgeParams, EndpointParams, GraphParams, ServiceParams, WorkloadArrivals};
use super::results::{EdgeResults, EntryResults, GraphSeries, ServiceResults};
use super::state::{CacheState, PoolWaiter, NO_POOL};

// The replica's random streams, by purpose (an entity's index picks its own).
pub(super) const ARRIVALS: StreamPurpose = StreamPurpose::named("graph.arrivals");
pub(super) const MIX: StreamPurpose = StreamPurpose::named("graph.mix");
pub(super) const WORK: StreamPurpose = StreamPurpose::named("graph.work");
pub(super) const NETWORK: StreamPurpose = StreamPurpose::named("graph.network");
pub(super) const CLIENT: StreamPurpose = StreamPurpose::named("graph.client");
pub(super) const ROUTING: StreamPurpose = StreamPurpose::named("graph.routing");
pub(super) const ERRORS: StreamPurpose = StreamPurpose::named("graph.errors");
pub(super) const LIMITS: StreamPurpose = StreamPurpose::named("graph.limits");
pub(super) const PROVISIONING: StreamPurpose = StreamPurpose::named("graph.provisioning");
pub(super) const BRANCHES: StreamPurpose = StreamPurpose::named("graph.branches");

/// Answered requests an entry's running p99 needs before a request can be called slow,
/// and between two readings of it.
const SLOW_MIN_SAMPLES: u32 = 200;

/// Where a replica's random streams come from.
pub(super) struct Streams {
    pub master_seed: u64,
    pub replica: u64,
}

impl Streams {
    /// The stream for `purpose` of entity `index`.
    pub fn stream(&self, purpose: StreamPurpose, index: usize) -> RngStream {
        RngStream::derive(self.master_seed, self.replica, purpose.indexed(index as u64))
    }
}

/// Gives each health-checked service an endpoint of its own for the probes (its
/// check's work, no steps); returns each service's probe endpoint, `u32::MAX` for none.
pub(super) fn add_probe_endpoints(p: &mut GraphParams) -> Vec<u32> {
    (0..p.services.len())
        .map(|s| match p.services[s].health_check {
            None => u32::MAX,
            Some(_) => {
                let work = p.services[s].health_check_work;
                p.endpoints.push(EndpointParams {
                    cache: None,
                    service: s as u32,
                    work: (work > 0).then(|| {
                        let value_s = work as f64 / NANOS_PER_SEC as f64;
                        Distribution::new(Shape::Constant { value_s })
                    }),
                    first_step: 0,
                    step_count: 0,
                });
                p.endpoints.len() as u32 - 1
            }
        })
        .collect()
}

/// Every service's state and, service after service, its instances (an autoscaled
/// service's beyond its initial count start off).
pub(super) fn services(
    p: &GraphParams,
    streams: &Streams,
    probe_endpoints: &[u32],
    buckets: usize,
) -> (Vec<ServiceState>, Vec<Instance>) {
    let mut instances = Vec::new();
    let mut services = Vec::with_capacity(p.services.len());
    for (s, service) in p.services.iter().enumerate() {
        assert!(service.instances > 0 && service.workers > 0, "validated");
        let first_instance = instances.len() as u32;
        services.push(service_state(p, s, service, first_instance, streams, probe_endpoints[s], buckets));
        for k in 0..service.instances {
            let mut instance = Instance::fresh(p, s as u32, 0);
            if service.autoscale.as_ref().is_some_and(|a| k >= a.initial) {
                instance.lifecycle = Lifecycle::Off;
            }
            instances.push(instance);
        }
    }
    (services, instances)
}

fn service_state(
    p: &GraphParams,
    s: usize,
    service: &ServiceParams,
    first_instance: u32,
    streams: &Streams,
    probe_endpoint: u32,
    buckets: usize,
) -> ServiceState {
    let level = || level_series(p, buckets);
    ServiceState {
        first_instance,
        busy: 0,
        queued: 0,
        present: 0,
        awaiting: 0,
        blocked: 0,
        faulted: 0,
        last_change: 0,
        cursor: BucketCursor::new(p.bucket),
        busy_window: 0,
        queued_window: 0,
        present_window: 0,
        blocked_total: 0,
        blocked_window: 0,
        blocked_since: 0,
        serving: service.autoscale.as_ref().map(|a| {
            let mut serving = Vec::with_capacity(service.instances as usize);
            serving.extend(0..a.initial);
            serving
        }),
        scaler: service.autoscale.as_ref().map(|a| scaler_state(a, s, streams, level)),
        results: ServiceResults::default(),
        work_rng: streams.stream(WORK, s),
        error_rng: streams.stream(ERRORS, s),
        limit_rng: streams.stream(LIMITS, s),
        health: service.health_check.map(|config| HealthChecker::new(config, service.instances)),
        probe_endpoint,
        unhealthy_since: vec![Nanos::MAX; service.instances as usize],
        unhealthy: service.health_check.map(|_| level()),
    }
}

/// A level over the run's `buckets` series buckets, measured from the warm-up.
fn level_series(p: &GraphParams, buckets: usize) -> LevelSeries {
    LevelSeries::new(buckets, p.bucket, p.warmup)
}

/// An autoscaled service's scaler: `initial` instances desired and serving at time 0.
fn scaler_state(a: &Autoscale, s: usize, streams: &Streams, level: impl Fn() -> LevelSeries) -> ScalerState {
    let starting = |mut series: LevelSeries| {
        series.change(0, a.initial as i64);
        series
    };
    ScalerState {
        autoscaler: Autoscaler::new(a.config),
        provisioning: 0,
        totals: (0, 0, 0),
        totals_then: (0, 0, 0),
        blocked_then: 0,
        arrivals: 0,
        arrivals_then: 0,
        desired: starting(level()),
        read_milli: level(),
        serving: starting(level()),
        last_sync: 0,
        provision_rng: streams.stream(PROVISIONING, s),
    }
}

/// Every edge's state, and the connection pools of the edges that have one (one per
/// calling instance, or one for a workload's edge) with the edge each belongs to.
pub(super) fn edges(
    p: &GraphParams,
    streams: &Streams,
    buckets: usize,
) -> (Vec<EdgeState>, Vec<ConnectionPool<PoolWaiter>>, Vec<u32>) {
    let mut pools = Vec::new();
    let mut pool_edges = Vec::new();
    let edges = p
        .edges
        .iter()
        .enumerate()
        .map(|(e, edge)| {
            let first_pool = match edge.pool {
                None => NO_POOL,
                Some(config) => {
                    let callers = edge.from.map_or(1, |s| p.services[s as usize].instances);
                    pools.extend((0..callers).map(|_| ConnectionPool::new(config)));
                    pool_edges.extend((0..callers).map(|_| e as u32));
                    (pools.len() - callers as usize) as u32
                }
            };
            edge_state(p, e, edge, first_pool, streams, buckets)
        })
        .collect();
    (edges, pools, pool_edges)
}

fn edge_state(
    p: &GraphParams,
    e: usize,
    edge: &EdgeParams,
    first_pool: u32,
    streams: &Streams,
    buckets: usize,
) -> EdgeState {
    let callee = &p.services[edge.to as usize];
    let level = || level_series(p, buckets);
    let ring = matches!(edge.balance, Balance::ConsistentHash { .. });
    EdgeState {
        first_pool,
        filters_callee: !ring && (callee.autoscale.is_some() || callee.health_check.is_some()),
        budget: edge.budget.clone(),
        breaker: edge.breaker.map(CircuitBreaker::new),
        hedge: edge.hedge.map(HedgePolicy::new),
        outlier: edge.outlier.map(|config| OutlierDetector::new(config, callee.instances)),
        ejected: edge.outlier.map(|_| level()),
        pool_in_use: edge.pool.map(|_| level()),
        pool_waiting: edge.pool.map(|_| level()),
        adaptive_timeout: edge.adaptive_timeout.map(AdaptiveTimeout::new),
        ring: match edge.balance {
            Balance::ConsistentHash { vnodes, capacity_factor } => Some((
                HashRing::new(callee.instances, vnodes, RingHash::Fast, e as u64),
                BoundedLoadRouter::new(callee.instances, capacity_factor),
            )),
            _ => None,
        },
        round_robin: 0,
        active: 0,
        outstanding_calls: 0,
        expiries: TimeoutFifo::with_capacity(64),
        network_rng: streams.stream(NETWORK, e),
        network_fixed: edge.network.as_ref().map_or(Some(0), Distribution::fixed_nanos),
        client_rng: streams.stream(CLIENT, e),
        routing_rng: streams.stream(ROUTING, e),
        partition: None,
        added: 0,
        slowdown: 1.0,
        error_rate: 0.0,
        results: EdgeResults::default(),
    }
}

/// Every workload's arrivals (an open one's; a closed one's users start elsewhere),
/// streams and results.
pub(super) fn workloads(p: &GraphParams, streams: &Streams) -> Vec<WorkloadState> {
    p.workloads
        .iter()
        .enumerate()
        .map(|(w, workload)| WorkloadState {
            load: match &workload.arrivals {
                WorkloadArrivals::Open(process) => Some(Arrivals::new(process.clone())),
                WorkloadArrivals::Closed { .. } => None,
            },
            arrival_rng: streams.stream(ARRIVALS, w),
            mix_rng: streams.stream(MIX, w),
            results: EntryResults { keeps_causes: true, ..EntryResults::default() },
            slow_p99: RunningQuantile::new(0.99, SLOW_MIN_SAMPLES).refreshed_every(SLOW_MIN_SAMPLES),
        })
        .collect()
}

/// The series a run fills as it goes, `buckets` long; the edges' and services' levels
/// are taken at the end.
pub(super) fn series(p: &GraphParams, buckets: usize) -> GraphSeries {
    let cached = || -> Vec<Vec<u64>> {
        p.endpoints.iter().map(|e| if e.cache.is_some() { vec![0; buckets] } else { Vec::new() }).collect()
    };
    GraphSeries {
        queued_area: vec![vec![0; buckets]; p.services.len()],
        busy_area: vec![vec![0; buckets]; p.services.len()],
        cache_hits: cached(),
        cache_misses: cached(),
        instances_area: vec![Vec::new(); p.services.len()],
        desired_area: vec![Vec::new(); p.services.len()],
        scale_read_milli_area: vec![Vec::new(); p.services.len()],
        successes: vec![vec![0; buckets]; p.workloads.len()],
        ..GraphSeries::default()
    }
}

/// The caches of the endpoints that have one (one per instance of its service), and
/// each endpoint's first cache (`u32::MAX` for none).
pub(super) fn caches(p: &GraphParams) -> (Vec<CacheState>, Vec<u32>) {
    let mut caches = Vec::new();
    let first_cache = p
        .endpoints
        .iter()
        .map(|endpoint| match endpoint.cache {
            None => u32::MAX,
            Some(cache) => {
                let count = p.services[endpoint.service as usize].instances;
                caches.extend((0..count).map(|_| CacheState::new(cache)));
                (caches.len() - count as usize) as u32
            }
        })
        .collect();
    (caches, first_cache)
}
