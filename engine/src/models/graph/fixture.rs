//! A three-tier graph with every client policy on — an entry service, two services,
//! two leaves; retries with jittered backoff and ratio budgets, breakers, a hedge at the
//! p95, a limiter, a shedder, four balancers and a brownout. The benchmarks, the
//! instruction gate and the allocation-free proof all run this one, so their figures
//! describe the same work. Built by hand (the engine reads no scenarios); the
//! `graph-three-tier` built-in is the scenario-file way to write a graph.

use crate::components::arrivals::{ArrivalProcess, RateProfile};
use crate::components::distribution::{Distribution, Shape};
use crate::kernel::time::{secs_to_nanos, Nanos};
use crate::models::cluster::QueueDiscipline;
use crate::policy::backoff::Backoff;
use crate::policy::breaker::{BreakerConfig, SlidingWindow};
use crate::policy::hedge::{HedgeConfig, HedgeDelay};
use crate::policy::limiter::{GradientConfig, LimiterKind};
use crate::policy::retry_budget::{RatioBudget, RetryBudget};
use crate::policy::shedder::ShedMarks;

use super::params::*;

const MS: Nanos = 1_000_000;

fn exp(mean_s: f64) -> Option<Distribution> {
    Some(Distribution::new(Shape::Exponential { mean_s }))
}

fn service(instances: u32, workers: u32) -> ServiceParams {
    ServiceParams::new(instances, workers, 256)
}

fn edge(from: Option<u32>, to: u32, timeout: Nanos, balance: Balance) -> EdgeParams {
    EdgeParams {
        from,
        to,
        network: Some(Distribution::new(Shape::Constant { value_s: 0.0001 })),
        timeout: Some(timeout),
        adaptive_timeout: None,
        propagate_deadline: true,
        max_attempts: 3,
        backoff: Backoff::FullJitter { base: 2 * MS, cap: 50 * MS },
        retry_on: FailureSet::of(&[Failure::Timeout, Failure::Refused, Failure::Error]),
        budget: RetryBudget::Ratio(RatioBudget::new(0.1, 100.0, 10.0)),
        breaker: Some(BreakerConfig {
            window: SlidingWindow::Time { window: secs_to_nanos(1.0), buckets: 10 },
            minimum_calls: 20,
            open_duration: 500 * MS,
            max_open_duration: 500 * MS,
            half_open_probes: 3,
            ..BreakerConfig::default()
        }),
        hedge: None,
        outlier: None,
        pool: None,
        hedge_uses_budget: true,
        balance,
        fallback_on: FailureSet::NONE,
    }
}

impl GraphParams {
    /// `rate` requests per second into `front.home`, which calls `a.read` and `b.query`
    /// in parallel; `a` reads leaf `c` (hedged at the p95), `b` reads leaf `d`. A 2 s
    /// brownout of `d` (×8) starts at `brownout_at`.
    pub fn three_tier_every_policy(rate: f64, horizon: Nanos, brownout_at: Nanos) -> GraphParams {
        let mut a = service(4, 16);
        a.limiter = Some(LimiterKind::Gradient(GradientConfig { initial: 16.0, ..GradientConfig::default() }));
        let mut b = service(4, 16);
        b.shedder = Some(ShedMarks([1.0, 1.0, 0.9, 0.75]));
        b.discipline = QueueDiscipline::Lifo;
        let mut c_edge = edge(Some(1), 3, 50 * MS, Balance::LeastOutstanding);
        c_edge.hedge = Some(HedgeConfig { delay: HedgeDelay::Quantile(0.95), max_hedges: 1, min_samples: 20 });
        let lognormal = Distribution::new(Shape::Lognormal { mu: (0.002f64).ln(), sigma: 0.8 });
        GraphParams {
            services: vec![service(2, 64), a, b, service(2, 32), service(2, 32)],
            endpoints: vec![
                EndpointParams { service: 0, work: exp(0.0005), first_step: 0, step_count: 1, cache: None },
                EndpointParams { service: 1, work: exp(0.001), first_step: 1, step_count: 1, cache: None },
                EndpointParams { service: 2, work: exp(0.001), first_step: 2, step_count: 1, cache: None },
                EndpointParams { service: 3, work: Some(lognormal), first_step: 3, step_count: 0, cache: None },
                EndpointParams { service: 4, work: exp(0.002), first_step: 3, step_count: 0, cache: None },
            ],
            steps: vec![
                Step::Calls { first_call: 0, calls: 2, wait: Wait::All },
                Step::Calls { first_call: 2, calls: 1, wait: Wait::All },
                Step::Calls { first_call: 3, calls: 1, wait: Wait::All },
            ],
            call_sites: vec![
                CallSite { endpoint: 1, edge: 1, probability: 1.0 },
                CallSite { endpoint: 2, edge: 2, probability: 1.0 },
                CallSite { endpoint: 3, edge: 3, probability: 1.0 },
                CallSite { endpoint: 4, edge: 4, probability: 1.0 },
            ],
            alternatives: Vec::new(),
            edges: vec![
                EdgeParams { max_attempts: 1, breaker: None, ..edge(None, 0, secs_to_nanos(1.0), Balance::RoundRobin) },
                edge(Some(0), 1, 200 * MS, Balance::PowerOfTwoChoices),
                edge(Some(0), 2, 200 * MS, Balance::Random),
                c_edge,
                edge(Some(2), 4, 50 * MS, Balance::RoundRobin),
            ],
            workloads: vec![WorkloadParams {
                endpoint: 0,
                edge: 0,
                arrivals: WorkloadArrivals::Open(ArrivalProcess::Poisson(RateProfile::constant(rate))),
                deadline: Some(secs_to_nanos(1.0)),
                slo: None,
                criticality: [0.2, 0.0, 0.5, 0.3],
                keys: 1,
                zipf: None,
            }],
            faults: vec![GraphFault {
                target: FaultTarget::Instances { service: 4, first: 0, count: 2 },
                kind: FaultKind::Slowdown { factor: 8.0 },
                start: brownout_at,
                duration: secs_to_nanos(2.0),
            }],
            max_depth: 8,
            warmup: secs_to_nanos(1.0),
            horizon,
            bucket: 100 * MS,
            recovery_hold: 500 * MS,
        }
    }
}

/// The outage mechanisms the graph can add to [`GraphParams::three_tier_every_policy`],
/// one at a time (benchmarks: the cost of each) or all together (the allocation proof).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mechanism {
    /// Outlier ejection on a → c, the hedged edge.
    Outlier,
    /// A pool of 12 connections (256 waiting, 50 ms) on b → d, whose leaf browns out.
    Pool,
    /// Health checks of d every 0.5 s (1 ms of work each).
    HealthChecks,
    /// c autoscaled on requests in flight (1 s syncs, 2 to 6 instances, cold starts).
    Autoscale,
    /// a.read caches c's answers over 1,000 Zipf(0.9) keys (single flight, serve stale).
    Cache,
}

impl Mechanism {
    /// Every mechanism.
    pub const ALL: [Mechanism; 5] =
        [Mechanism::Outlier, Mechanism::Pool, Mechanism::HealthChecks, Mechanism::Autoscale, Mechanism::Cache];

    /// Its name in benchmark ids.
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Outlier => "outlier",
            Mechanism::Pool => "pool",
            Mechanism::HealthChecks => "health_checks",
            Mechanism::Autoscale => "autoscale",
            Mechanism::Cache => "cache",
        }
    }
}

impl GraphParams {
    /// The three-tier graph with `mechanism` on as well.
    pub fn with_mechanism(mut self, mechanism: Mechanism) -> GraphParams {
        use crate::components::zipf::Zipf;
        use crate::policy::autoscale::AutoscaleConfig;
        use crate::policy::health::HealthCheckConfig;
        use crate::policy::outlier::OutlierConfig;
        use crate::policy::pool::PoolConfig;
        match mechanism {
            Mechanism::Outlier => {
                self.edges[3].outlier = Some(OutlierConfig {
                    consecutive_failures: 5,
                    base_ejection: secs_to_nanos(1.0),
                    max_ejection: secs_to_nanos(10.0),
                    max_ejection_percent: 50.0,
                })
            }
            Mechanism::Pool => {
                self.edges[4].pool = Some(PoolConfig { size: 12, max_pending: 256, wait_timeout: 50 * MS })
            }
            Mechanism::HealthChecks => {
                self.services[4].health_check = Some(HealthCheckConfig {
                    interval: 500 * MS,
                    timeout: 50 * MS,
                    unhealthy_threshold: 2,
                    healthy_threshold: 1,
                    panic_threshold_percent: 50.0,
                });
                self.services[4].health_check_work = MS;
            }
            Mechanism::Autoscale => {
                self.services[3].instances = 6;
                self.services[3].autoscale = Some(Autoscale {
                    config: AutoscaleConfig {
                        target: 1.2,
                        min: 1,
                        max: 6,
                        sync_period: secs_to_nanos(1.0),
                        tolerance: 0.0,
                        scale_down_window: secs_to_nanos(3.0),
                        scale_up_window: 0,
                    },
                    metric: ScaleMetric::InFlight,
                    initial: 2,
                    provisioning: Distribution::new(Shape::Exponential { mean_s: 0.5 }),
                    cold_start: secs_to_nanos(1.0),
                    cold_start_factor: 2.0,
                });
            }
            Mechanism::Cache => {
                self.endpoints[1].cache =
                    Some(CacheParams { capacity: 200, ttl: secs_to_nanos(2.0), coalesce: true, serve_stale: true });
                self.workloads[0].keys = 1000;
                self.workloads[0].zipf = Some(Zipf::new(1000, 0.9));
            }
        }
        self
    }
}

impl GraphParams {
    /// A generated graph of `services` services (an even number) in pairs: service
    /// `2k` serves entry point `k`, whose work (exponential, 10 ms) is followed by a
    /// call to service `2k + 1` (the same work). Every service has one instance of 8
    /// workers; `rate` requests per second in total are split evenly over the
    /// `services / 2` entry points, so the events per second stay the same whatever
    /// the size — what the size benchmark (`benches/benches/graph.rs`) and the
    /// memory tests need to show that an event's cost does not grow with the graph.
    pub fn pairs(services: u32, rate: f64, horizon: Nanos) -> GraphParams {
        assert!(services >= 2 && services.is_multiple_of(2), "pairs of services");
        let entries = services / 2;
        let plain_edge = |from: Option<u32>, to: u32| EdgeParams {
            network: None,
            timeout: Some(secs_to_nanos(1.0)),
            max_attempts: 1,
            breaker: None,
            budget: RetryBudget::Unlimited,
            ..edge(from, to, secs_to_nanos(1.0), Balance::RoundRobin)
        };
        let mut params = GraphParams {
            services: (0..services).map(|_| ServiceParams::new(1, 8, 100)).collect(),
            endpoints: Vec::with_capacity(services as usize),
            steps: Vec::with_capacity(entries as usize),
            call_sites: Vec::with_capacity(entries as usize),
            alternatives: Vec::new(),
            edges: Vec::with_capacity(services as usize),
            workloads: Vec::with_capacity(entries as usize),
            faults: Vec::new(),
            max_depth: 8,
            warmup: secs_to_nanos(1.0),
            horizon,
            bucket: secs_to_nanos(1.0),
            recovery_hold: 500 * MS,
        };
        for k in 0..entries {
            let (front, back) = (2 * k, 2 * k + 1);
            params.endpoints.push(EndpointParams {
                service: front,
                work: exp(0.01),
                first_step: k,
                step_count: 1,
                cache: None,
            });
            params.endpoints.push(EndpointParams {
                service: back,
                work: exp(0.01),
                first_step: 0,
                step_count: 0,
                cache: None,
            });
            params.steps.push(Step::Calls { first_call: k, calls: 1, wait: Wait::All });
            // Edges: the entry's client edge, then front → back.
            params.edges.push(plain_edge(None, front));
            params.edges.push(plain_edge(Some(front), back));
            params.call_sites.push(CallSite { endpoint: back, edge: 2 * k + 1, probability: 1.0 });
            params.workloads.push(WorkloadParams {
                endpoint: front,
                edge: 2 * k,
                arrivals: WorkloadArrivals::Open(ArrivalProcess::Poisson(RateProfile::constant(rate / entries as f64))),
                deadline: None,
                slo: None,
                criticality: [0.0, 0.0, 1.0, 0.0],
                keys: 1,
                zipf: None,
            });
        }
        params
    }
}
