//! Each service's, instance's, edge's and workload's state between events: the
//! queues and levels, the policies' state, the random streams and the results they
//! accumulate. [`super::setup`] builds them; the model's events change them.
//!
//! Invariants (asserted where they change): an instance's `busy` ≤ its service's
//! workers; a service's levels are the sums over its instances.

use std::collections::VecDeque;

use crate::components::arrivals::Arrivals;
use crate::components::ring::{BoundedLoadRouter, HashRing};
use crate::kernel::rng::RngStream;
use crate::kernel::slab::SlabKey;
use crate::kernel::time::Nanos;
use crate::kernel::timeout_fifo::TimeoutFifo;
use crate::kernel::timer::TimerTicket;
use crate::measurement::buckets::BucketCursor;
use crate::measurement::level_series::LevelSeries;
use crate::measurement::running_quantile::RunningQuantile;
use crate::models::cluster::QueueDiscipline;
use crate::policy::adaptive_timeout::AdaptiveTimeout;
use crate::policy::breaker::CircuitBreaker;
use crate::policy::codel::CoDel;
use crate::policy::health::HealthChecker;
use crate::policy::hedge::HedgePolicy;
use crate::policy::limiter::ConcurrencyLimiter;
use crate::policy::outlier::OutlierDetector;
use crate::policy::retry_budget::RetryBudget;
use crate::policy::shedder::PriorityShedder;
use crate::policy::token_bucket::TokenBucket;

use super::params::GraphParams;
use super::results::{EdgeResults, EntryResults, ServiceResults};

/// One instance of a service.
pub(super) struct Instance {
    pub service: u32,
    pub busy: u32,
    pub queue: VecDeque<crate::kernel::slab::SlabKey>,
    /// Jobs present: queued, working or waiting on calls.
    pub present: u32,
    /// Jobs waiting on a group of calls, and those of them holding a worker (`culprit.rs`).
    pub awaiting: u32,
    pub blocked: u32,
    pub up: bool,
    pub epoch: u32,
    pub codel: Option<CoDel>,
    pub shedder: Option<PriorityShedder>,
    pub limiter: Option<ConcurrencyLimiter>,
    pub bucket: Option<TokenBucket>,
    /// Where it is in an autoscaled life (always `Serving` without autoscaling).
    pub lifecycle: Lifecycle,
    /// Its current provisioning's number (a cancelled one's `InstanceReady` is stale).
    pub provision_epoch: u32,
    /// A cold start: work is slower from `cold_from` until `cold_until`.
    pub cold_from: Nanos,
    pub cold_until: Nanos,
    /// Work takes its drawn time: no slowdown and no cold start (the hot path's one test;
    /// a cold start that has ended is noticed on the slow path, which sets it back).
    pub plain: bool,
    /// Active faults, recomputed at every fault transition.
    pub slowdown: f64,
    pub added: Nanos,
    pub error_rate: f64,
}

/// Where an instance of an autoscaled service is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Lifecycle {
    /// Balancers send it requests.
    Serving,
    /// Started, not ready yet.
    Provisioning,
    /// Not running, or draining: no new requests (work it holds finishes).
    Off,
}

/// An autoscaled service's scaler and what it last measured.
pub(super) struct ScalerState {
    pub autoscaler: crate::policy::autoscale::Autoscaler,
    /// Instances provisioning (decided, not ready).
    pub provisioning: u32,
    /// The levels' integrals since the start (busy, present, queued) × ns, and their
    /// values at the last decision; and the service's `blocked_total` then.
    pub totals: (u128, u128, u128),
    pub totals_then: (u128, u128, u128),
    pub blocked_then: u128,
    /// Attempts that arrived, and their count at the last decision.
    pub arrivals: u64,
    pub arrivals_then: u64,
    /// The count the autoscaler asked for, and the metric it read (× 1,000), over
    /// time: every decision can be audited.
    pub desired: LevelSeries,
    pub read_milli: LevelSeries,
    /// Instances serving over time.
    pub serving: LevelSeries,
    pub last_sync: Nanos,
    pub provision_rng: RngStream,
}

/// Per-service state beside its instances: the levels the time integrals read.
pub(super) struct ServiceState {
    pub first_instance: u32,
    pub busy: u64,
    pub queued: u64,
    pub present: u64,
    /// Its instances' jobs waiting on calls, those of them holding a worker, and its
    /// instances with an active fault of their own (`culprit.rs`).
    pub awaiting: u64,
    pub blocked: u64,
    pub faulted: u32,
    pub last_change: Nanos,
    /// The series bucket `last_change` falls in.
    pub cursor: BucketCursor,
    pub busy_window: u128,
    pub queued_window: u128,
    pub present_window: u128,
    /// Σ workers blocked on calls × ns: since the start, and after warm-up; closed up
    /// to `blocked_since` (its own, light integral: the level changes per group of
    /// calls, and the series' per-bucket walk is not needed for it).
    pub blocked_total: u128,
    pub blocked_window: u128,
    pub blocked_since: Nanos,
    /// Local indices of the instances serving, ascending (`None`: all, not autoscaled).
    pub serving: Option<Vec<u32>>,
    pub scaler: Option<ScalerState>,
    pub results: ServiceResults,
    pub work_rng: RngStream,
    pub error_rng: RngStream,
    pub limit_rng: RngStream,
    /// Active health checks of its instances (by local index), if on.
    pub health: Option<HealthChecker>,
    /// The endpoint its probes call (appended to the graph's; `u32::MAX` without checks).
    pub probe_endpoint: u32,
    /// Per instance, since when it has been marked unhealthy (`Nanos::MAX`: healthy).
    pub unhealthy_since: Vec<Nanos>,
    /// With health checks: instances marked unhealthy over time.
    pub unhealthy: Option<LevelSeries>,
}

/// Per-edge client state.
pub(super) struct EdgeState {
    pub budget: RetryBudget,
    pub breaker: Option<CircuitBreaker>,
    pub hedge: Option<HedgePolicy>,
    /// Ejection of the callee's failing instances, by local index.
    pub outlier: Option<OutlierDetector>,
    /// With outlier detection: instances ejected over time.
    pub ejected: Option<LevelSeries>,
    /// With a pool: connections in use and attempts waiting, over all its pools.
    pub pool_in_use: Option<LevelSeries>,
    pub pool_waiting: Option<LevelSeries>,
    pub adaptive_timeout: Option<AdaptiveTimeout>,
    /// Its caller instances' pools are `pools[first_pool ..]` (`NO_POOL`: none).
    pub first_pool: u32,
    /// The balancer picks among the callee's serving (autoscaled) or healthy
    /// (health-checked) instances, not all of them (consistent hashing never: its ring).
    pub filters_callee: bool,
    pub ring: Option<(HashRing, BoundedLoadRouter)>,
    pub round_robin: u32,
    /// Attempts in flight on the edge (Envoy's budget reads them).
    pub active: u32,
    /// Calls along it that a job waits for (`culprit.rs`).
    pub outstanding_calls: u32,
    /// Timeouts of the edge's own length, due in the order armed: (attempt, ticket).
    pub expiries: TimeoutFifo<(SlabKey, TimerTicket)>,
    pub network_rng: RngStream,
    /// The one-way delay when every draw gives the same (no distribution, or a
    /// constant): taken instead of drawn.
    pub network_fixed: Option<Nanos>,
    pub client_rng: RngStream,
    pub routing_rng: RngStream,
    /// An active partition: `Some(fail_fast)`.
    pub partition: Option<bool>,
    pub added: Nanos,
    pub slowdown: f64,
    pub error_rate: f64,
    pub results: EdgeResults,
}

/// Per-workload state: its arrivals, random streams, results and slow-answer quantile.
pub(super) struct WorkloadState {
    pub load: Option<Arrivals>,
    pub arrival_rng: RngStream,
    pub mix_rng: RngStream,
    pub results: EntryResults,
    /// Its entry's running p99 of answered requests: above it (or above its SLO) a
    /// request is slow.
    pub slow_p99: RunningQuantile,
}

impl Instance {
    /// An instance as it starts (or restarts after a crash: empty, its policies reset).
    pub(super) fn fresh(p: &GraphParams, service: u32, epoch: u32) -> Instance {
        let params = &p.services[service as usize];
        Instance {
            service,
            busy: 0,
            queue: VecDeque::with_capacity(params.queue_capacity.min(4096) as usize),
            present: 0,
            awaiting: 0,
            blocked: 0,
            up: true,
            epoch,
            codel: match params.discipline {
                QueueDiscipline::CoDel(config) => Some(CoDel::new(config)),
                _ => None,
            },
            shedder: params.shedder.map(|marks| PriorityShedder::new(params.workers, marks)),
            limiter: params.limiter.map(ConcurrencyLimiter::new),
            bucket: params.rate_limit.map(|(per_s, burst)| TokenBucket::per_second(per_s, burst)),
            lifecycle: Lifecycle::Serving,
            provision_epoch: 0,
            cold_from: 0,
            cold_until: 0,
            plain: true,
            slowdown: 1.0,
            added: 0,
            error_rate: 0.0,
        }
    }
}
