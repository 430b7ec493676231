//! What one cluster replica is given: clients, router, shards, retries, breaker,
//! faults, series and recovery settings. Read-only during a replica.

use crate::components::arrivals::ArrivalProcess;
use crate::components::distribution::Distribution;
use crate::components::ring::RingHash;
use crate::kernel::time::{Nanos, NANOS_PER_SEC};
use crate::policy::backoff::Backoff;
use crate::policy::breaker::BreakerConfig;
use crate::policy::codel::CoDelConfig;
use crate::policy::retry_budget::RetryBudget;

/// Service-time distribution of one request on an unloaded server.
#[derive(Clone, Debug, PartialEq)]
pub enum ServiceTime {
    /// Exponential with mean `mean`.
    Exponential {
        /// The mean.
        mean: Nanos,
    },
    /// Lognormal with median `median` and log-standard deviation `sigma`.
    Lognormal {
        /// The median.
        median: Nanos,
        /// The standard deviation of the logarithm.
        sigma: f64,
    },
    /// Always `value`.
    Constant {
        /// The service time.
        value: Nanos,
    },
    /// Any distribution value (a table from data, gamma, Weibull, …), in seconds.
    Distribution(Distribution),
}

/// The order in which a shard serves its queue.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum QueueDiscipline {
    /// Oldest first.
    Fifo,
    /// Newest first.
    Lifo,
    /// FIFO with CoDel drops at dequeue; a dropped attempt is an error to its client.
    CoDel(CoDelConfig),
}

/// The client's retry rule.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RetryPolicy {
    /// One attempt.
    None,
    /// Up to `max_attempts`, each retry immediately.
    Naive {
        /// Attempts in all, the first included.
        max_attempts: u32,
    },
    /// Up to `max_attempts`, waiting by `backoff` between them.
    Backoff {
        /// Attempts in all, the first included.
        max_attempts: u32,
        /// The wait before each retry.
        backoff: Backoff,
    },
}

/// What a fault does while it is active.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum FaultKind {
    /// Client arrivals × `multiplier`.
    Surge {
        /// What the arrival rate is multiplied by.
        multiplier: f64,
    },
    /// One shard's service times × `slowdown` (`f64::INFINITY` stalls it: no service starts).
    Brownout {
        /// The shard that slows.
        shard: u32,
        /// What its service times are multiplied by.
        slowdown: f64,
    },
    /// One shard leaves the ring; its queue fails and its keys fail over.
    ShardFailure {
        /// The shard that fails.
        shard: u32,
    },
    /// Every shard's service times × `factor`.
    LatencySpike {
        /// What every service time is multiplied by.
        factor: f64,
    },
}

/// A fault and its window.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Fault {
    /// What it does.
    pub kind: FaultKind,
    /// When it starts.
    pub start: Nanos,
    /// How long it lasts.
    pub duration: Nanos,
}

/// Parameters of one cluster replica.
#[derive(Clone, Debug)]
pub struct ClusterParams {
    /// Open-loop arrivals per second (a constant-rate Poisson stream) unless `load` is set.
    pub arrival_rate_per_s: f64,
    /// Open-loop arrivals from a rate profile, even spacing or a trace (`[load]`); a
    /// surge multiplies the profile's rate (a trace is replayed as recorded).
    pub load: Option<ArrivalProcess>,
    /// Key space; keys are drawn uniformly or Zipf(s) when `zipf_s > 0`.
    pub keys: u64,
    /// The Zipf exponent of key popularity (0: uniform).
    pub zipf_s: f64,
    /// Share of requests that carry the single hot key 0 (a hot tenant); 0 = none.
    pub hot_share: f64,
    /// A closed-loop population: users that wait for their answer, think, ask again (0 = none).
    pub closed_loop_users: u32,
    /// Mean think time of a closed-loop user (exponential).
    pub think_time: Nanos,
    /// Each attempt's client-side timeout.
    pub attempt_timeout: Nanos,
    /// Shards on the ring.
    pub shards: u32,
    /// Virtual nodes per shard.
    pub vnodes: u32,
    /// Bounded-load factor c; `f64::INFINITY` = plain consistent hashing.
    pub capacity_factor: f64,
    /// How keys and nodes are hashed onto the ring.
    pub hash: RingHash,
    /// Servers per shard.
    pub servers: u32,
    /// A request's service time on an unloaded server.
    pub service: ServiceTime,
    /// Waiting room per shard.
    pub queue_capacity: u32,
    /// The order a shard serves its queue in.
    pub discipline: QueueDiscipline,
    /// Drop, at dequeue, attempts whose client already gave up.
    pub drop_abandoned: bool,
    /// The client's retry rule.
    pub retry: RetryPolicy,
    /// Any budget but Envoy's (which needs retry completions the model does not track).
    pub budget: RetryBudget,
    /// A circuit breaker per shard on the client; `None`: none.
    pub breaker: Option<BreakerConfig>,
    /// The faults, in time order.
    pub faults: Vec<Fault>,
    /// Nothing before this is counted.
    pub warmup: Nanos,
    /// When the replica ends.
    pub horizon: Nanos,
    /// Width of a time-series bucket.
    pub bucket: Nanos,
    /// Recovery needs the queue back in its band for this long.
    pub recovery_hold: Nanos,
}

impl ClusterParams {
    /// The seed's harness cluster with every policy on: 4 shards × 4 servers (10 ms
    /// exponential service) at 1,200 requests/s with 50 ms timeouts, bounded loads
    /// (c = 1.25), full-jitter backoff (4 attempts), a 10% retry budget, a breaker per
    /// shard, and a 5× surge plus a 10× single-shard brownout at 3 s; 60 s long. The
    /// reference workload of the benchmark and the allocation test.
    pub fn every_policy_on() -> Self {
        const MS: Nanos = 1_000_000;
        ClusterParams {
            arrival_rate_per_s: 1_200.0,
            load: None,
            keys: 100_000,
            zipf_s: 0.0,
            hot_share: 0.0,
            closed_loop_users: 0,
            think_time: 0,
            attempt_timeout: 50 * MS,
            shards: 4,
            vnodes: 150,
            capacity_factor: 1.25,
            hash: RingHash::Fast,
            servers: 4,
            service: ServiceTime::Exponential { mean: 10 * MS },
            queue_capacity: 100,
            discipline: QueueDiscipline::Fifo,
            drop_abandoned: false,
            retry: RetryPolicy::Backoff {
                max_attempts: 4,
                backoff: Backoff::FullJitter { base: 10 * MS, cap: 1_000 * MS },
            },
            budget: RetryBudget::Ratio(crate::policy::retry_budget::RatioBudget::new(0.1, 100.0, 10.0)),
            breaker: Some(BreakerConfig {
                window: crate::policy::breaker::SlidingWindow::Time { window: 1_000 * MS, buckets: 10 },
                minimum_calls: 20,
                failure_rate_threshold: 0.5,
                open_duration: 500 * MS,
                max_open_duration: 500 * MS,
                half_open_probes: 3,
                ..BreakerConfig::default()
            }),
            faults: vec![
                Fault { kind: FaultKind::Surge { multiplier: 5.0 }, start: 3_000 * MS, duration: 200 * MS },
                Fault { kind: FaultKind::Brownout { shard: 0, slowdown: 10.0 }, start: 3_000 * MS, duration: 500 * MS },
            ],
            warmup: NANOS_PER_SEC,
            horizon: 60 * NANOS_PER_SEC,
            bucket: 10 * MS,
            recovery_hold: 200 * MS,
        }
    }
}
