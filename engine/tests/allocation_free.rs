//! Proves the hot loop allocates nothing once a replica has warmed up.
//!
//! A counting global allocator wraps the system one. Each model runs through a
//! warm-up stretch (queues, slabs and the event heap reach their working size), then
//! runs for millions more events while the allocation counter must not move.

use stampede_engine::kernel::Named;
use stampede_engine::testing::{allocations, CountingAllocator};

use stampede_engine::models::mmc::{Mmc, MmcParams};
use stampede_engine::{
    secs_to_nanos, LatencyHistogram, Model, Nanos, RngStream, Scheduler, Simulation, Slab, SlabKey, StreamPurpose,
    TimerSlot, TimerTicket,
};

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

#[test]
fn mmc_allocates_nothing_per_event_after_warmup() {
    let mut histogram = LatencyHistogram::new();
    let params = MmcParams {
        arrival_rate_per_s: 1_800.0,
        service_rate_per_s: 1_000.0,
        servers: 2,
        capacity: None,
        warmup: secs_to_nanos(10.0),
        horizon: secs_to_nanos(3_000.0),
    };
    let mut simulation = Mmc::new(params, 11, 0, &mut histogram).into_simulation();
    // Past the model's warm-up: its first recorded response allocates the histogram's
    // 32-bit counts, once.
    simulation.run_until(secs_to_nanos(11.0));
    let before = allocations();
    let events = simulation.run_until(params.horizon);
    let allocated = allocations() - before;
    assert!(events > 10_000_000, "the measured stretch is long: {events} events");
    assert_eq!(allocated, 0, "{allocated} allocations over {events} events");
    let results = simulation.model.finish(params.horizon, simulation.events_handled());
    assert!(results.utilization_ratio > 0.85, "the queue was genuinely busy: {results:?}");
}

/// A request/timeout model in the shape later models take: every request lives in
/// a slab, arms a timeout and is usually answered before it fires, so most timer
/// events are stale when they pop.
struct TimeoutHeavy {
    requests: Slab<Request>,
    rng: RngStream,
    timeouts_fired: u64,
    answered: u64,
}

struct Request {
    timeout: TimerSlot,
}

#[derive(Clone, Copy)]
enum Event {
    Send,
    Answer(SlabKey),
    Timeout(SlabKey, TimerTicket),
}

impl Model for TimeoutHeavy {
    type Event = Event;
    fn handle(&mut self, _now: Nanos, event: Event, scheduler: &mut Scheduler<Event>) {
        match event {
            Event::Send => {
                scheduler.after((self.rng.exponential(10_000.0) * 1e9) as u64, Event::Send);
                let key = self.requests.insert(Request { timeout: TimerSlot::default() });
                let ticket = self.requests.get_mut(key).expect("just inserted").timeout.arm();
                scheduler.after(50_000_000, Event::Timeout(key, ticket));
                let latency = (self.rng.lognormal(-5.0, 1.0) * 1e9) as u64;
                scheduler.after(latency, Event::Answer(key));
            }
            Event::Answer(key) => {
                if let Some(mut request) = self.requests.remove(key) {
                    request.timeout.cancel();
                    self.answered += 1;
                }
            }
            Event::Timeout(key, ticket) => {
                let fired = self.requests.get_mut(key).is_some_and(|request| request.timeout.fire(ticket));
                if fired {
                    self.requests.remove(key);
                    self.timeouts_fired += 1;
                }
            }
        }
    }
}

#[test]
fn slab_and_timer_model_allocates_nothing_after_warmup() {
    let model = TimeoutHeavy {
        requests: Slab::with_capacity(16),
        rng: RngStream::derive(5, 0, StreamPurpose::named("test.timeouts")),
        timeouts_fired: 0,
        answered: 0,
    };
    let mut simulation = Simulation::new(model, 16);
    simulation.scheduler().at(0, Event::Send);
    simulation.run_until(secs_to_nanos(20.0));
    let before = allocations();
    let events = simulation.run_until(secs_to_nanos(400.0));
    let allocated = allocations() - before;
    assert!(events > 5_000_000, "{events}");
    assert_eq!(allocated, 0, "{allocated} allocations over {events} events");
    let model = &simulation.model;
    assert!(model.timeouts_fired > 0 && model.answered > 20 * model.timeouts_fired);
}

/// Every policy decision, many times over, after one warm-up pass: no allocation.
#[test]
fn policy_decisions_allocate_nothing() {
    use stampede_engine::policy::admission::{AdmissionController, AdmissionRequest, Ladder};
    use stampede_engine::policy::backoff::Backoff;
    use stampede_engine::policy::breaker::{BreakerConfig, CircuitBreaker, SlidingWindow};
    use stampede_engine::policy::bulkhead::{Bulkhead, BulkheadConfig, CoDelConfig, QueueOrder};
    use stampede_engine::policy::classify::{Outcome, RetryClassifier};
    use stampede_engine::policy::limiter::{ConcurrencyLimiter, EnvoyGradientConfig, LimiterKind, Signal};
    use stampede_engine::policy::quota::{QuotaConfig, QuotaLimits, QuotaMeter, Reserve};
    use stampede_engine::policy::retry_budget::{AdaptiveThrottle, RetryBudget, TtlBudget};
    use stampede_engine::policy::shedder::{PriorityShedder, ShedMarks};
    use stampede_engine::policy::token_bucket::TokenBucket;
    use stampede_engine::policy::Criticality;

    let mut rng = RngStream::derive(1, 0, StreamPurpose::named("test.policy-alloc"));
    let mut bucket = TokenBucket::per_minute(6_000);
    let mut budgets = [
        RetryBudget::Ttl(TtlBudget::new(secs_to_nanos(10.0), 10, 0.2)),
        RetryBudget::Adaptive(Box::new(AdaptiveThrottle::new(2.0, secs_to_nanos(120.0)))),
    ];
    let backoff = Backoff::Decorrelated { base: 1_000_000, cap: 1_000_000_000 };
    let classifier = RetryClassifier::default();
    let mut breaker = CircuitBreaker::new(BreakerConfig {
        window: SlidingWindow::Time { window: secs_to_nanos(10.0), buckets: 10 },
        minimum_calls: 20,
        failure_rate_threshold: 0.3,
        open_duration: secs_to_nanos(1.0),
        half_open_probes: 3,
        ..BreakerConfig::default()
    });
    let mut shedder = PriorityShedder::new(50, ShedMarks::default());
    let mut bulkhead = Bulkhead::new(BulkheadConfig {
        slots: 4,
        queue_capacity: 16,
        order: QueueOrder::AdaptiveLifo { standing_after: 5_000_000 },
        codel: Some(CoDelConfig { target: 5_000_000, interval: 100_000_000 }),
    });
    let mut limiter = ConcurrencyLimiter::new(LimiterKind::EnvoyGradient(EnvoyGradientConfig::default()));
    let mut admission = AdmissionController::new(Ladder::default(), 4, 100);
    let limits = QuotaLimits {
        requests_per_minute: 4_000,
        input_tokens_per_minute: 4_000_000,
        output_tokens_per_minute: 800_000,
    };
    let mut quota = QuotaMeter::new(limits, QuotaConfig::default());

    let mut exercise = |round: u64, now: Nanos, rng: &mut RngStream| {
        bucket.try_take(now, 1);
        let _ = bucket.wait_time(now, 10);
        let outcome = Outcome::ALL[(round % 6) as usize];
        for budget in budgets.iter_mut() {
            budget.on_request(now);
            budget.on_outcome(now, outcome == Outcome::Success);
            budget.try_retry(now, 10, 2, rng);
        }
        let _ = classifier.classify(outcome);
        let _ = backoff.delay((round % 8) as u32, 5_000_000, Some(1_000), rng);
        if let Some(permit) = breaker.try_acquire(now) {
            breaker.record(now, permit, outcome, 1_000_000);
        }
        let criticality = Criticality::ALL[(round % 4) as usize];
        if shedder.try_admit(criticality) && !round.is_multiple_of(3) {
            shedder.release();
        }
        if shedder.in_flight() > 40 {
            (0..20).for_each(|_| shedder.release());
        }
        bulkhead.try_acquire(now, round, now + 50_000_000);
        if round.is_multiple_of(2) && bulkhead.in_use() > 0 {
            bulkhead.release(now, |_, _| {});
        }
        bulkhead.sweep(now, |_, _| {});
        if limiter.try_acquire() {
            limiter.on_complete(now, 20_000_000 + (round % 7) * 1_000_000, Signal::Success, rng);
        }
        let request = AdmissionRequest {
            criticality,
            tenant: (round % 4) as u32,
            deadline: now + 2_000_000_000,
            expected_latency: 1_000_000_000,
        };
        if admission.admit(now, request, (round % 100) as f64 / 100.0)
            == stampede_engine::policy::admission::Admission::Admitted
        {
            admission.finished(request.tenant);
        }
        if let Reserve::Granted(reservation) = quota.reserve(now, 900, 256) {
            quota.reconcile(now, reservation, 70);
        }
        let _ = quota.pressure(now);
    };
    let step = 3_000_000; // 3 ms
    for round in 0..50_000u64 {
        exercise(round, round * step, &mut rng);
    }
    let before = allocations();
    for round in 50_000..1_050_000u64 {
        exercise(round, round * step, &mut rng);
    }
    let allocated = allocations() - before;
    assert_eq!(allocated, 0, "{allocated} allocations in 1,000,000 rounds of policy decisions");
}

/// The cluster model with every policy on (bounded loads, backoff with jitter, a
/// retry budget, a breaker per shard, a fault): no allocation once warmed up.
#[test]
fn cluster_allocates_nothing_per_event_after_warmup() {
    use stampede_engine::models::cluster::{Cluster, ClusterParams, Fault, FaultKind, ServiceTime};

    const MS: Nanos = 1_000_000;
    // Every policy on, plus skewed keys, a hot tenant and a closed-loop population.
    let params = ClusterParams {
        load: None,
        keys: 10_000,
        zipf_s: 0.8,
        hot_share: 0.05,
        closed_loop_users: 50,
        think_time: 100 * MS,
        service: ServiceTime::Lognormal { median: 8 * MS, sigma: 0.5 },
        // The spike comes during warm-up, so every structure reaches its peak size first.
        faults: vec![Fault { kind: FaultKind::LatencySpike { factor: 3.0 }, start: 2_000 * MS, duration: 500 * MS }],
        horizon: secs_to_nanos(300.0),
        ..ClusterParams::every_policy_on()
    };
    let mut histogram = LatencyHistogram::new();
    let mut simulation = Cluster::new(params, 3, 0, std::slice::from_mut(&mut histogram)).into_simulation();
    simulation.run_until(secs_to_nanos(20.0));
    let before = allocations();
    let events = simulation.run_until(secs_to_nanos(300.0));
    let allocated = allocations() - before;
    // (About 930 k heap events: attempt timeouts wait in a FIFO, not as events.)
    assert!(events > 800_000, "{events}");
    assert_eq!(allocated, 0, "{allocated} allocations over {events} events");
}

/// Drawing a service time from data (a sample's table, a histogram's) and the next
/// arrival of a varying rate (thinning against a sine with a burst) or a replayed
/// trace allocates nothing: the tables and profiles are built once and only read.
#[test]
fn distribution_draws_and_arrivals_allocate_nothing() {
    use stampede_engine::components::arrivals::{ArrivalProcess, Arrivals, Burst, RateProfile, RateShape};
    use stampede_engine::components::distribution::{Distribution, QuantileTable, Shape};
    use std::sync::Arc;
    let sample: Vec<f64> = (1..=10_000).map(|i| f64::from(i) * 1e-5).collect();
    let empirical = Distribution::new(Shape::Table(Arc::new(QuantileTable::from_sample(&sample).unwrap())));
    let knots = [(0.0, 0.0), (0.01, 0.5), (0.1, 0.99), (1.0, 1.0)];
    let histogram = Distribution::new(Shape::Table(Arc::new(QuantileTable::from_cdf(&knots).unwrap())));
    let gamma = Distribution::gamma_mean_scv(0.05, 0.5);
    let profile = RateProfile {
        shape: RateShape::Sine { mean: 100.0, amplitude: 60.0, period_s: 30.0 },
        bursts: Arc::from([Burst { at_s: 5.0, duration_s: 2.0, factor: 3.0 }]),
    };
    let mut poisson = Arrivals::new(ArrivalProcess::Poisson(profile));
    let mut trace =
        Arrivals::new(ArrivalProcess::Trace((0..100_000u64).map(|i| i * 1_000_000).collect::<Vec<_>>().into(), None));
    let mut rng = RngStream::derive(3, 0, StreamPurpose::named("test.inputs"));
    let (mut total, mut now, mut replayed) = (0.0, 0u64, 0u64);
    let before = allocations();
    for _ in 0..100_000 {
        total += empirical.sample_s(&mut rng) + histogram.sample_s(&mut rng) + gamma.sample_s(&mut rng);
        now += poisson.next_gap(now, 1.0, &mut rng).unwrap();
        replayed += trace.next_gap(replayed, 1.0, &mut rng).unwrap();
    }
    let allocated = allocations() - before;
    assert_eq!(allocated, 0, "{allocated} allocations over 100,000 draws of each");
    assert!(total > 0.0 && now > 0 && replayed == 99_999 * 1_000_000);
}

/// The service graph with every client policy on (retries, budgets, breakers, a hedge,
/// a limiter, a shedder, four balancers, outlier detection, a connection pool, health
/// checks, an autoscaler with cold starts, a cache) through a brownout during warm-up: no
/// allocation once its slabs, queues and heap have grown.
#[test]
fn graph_allocates_nothing_per_event_after_warmup() {
    use stampede_engine::models::graph::{Graph, GraphParams, Mechanism};

    let horizon = secs_to_nanos(120.0);
    let base = GraphParams::three_tier_every_policy(2_000.0, horizon, secs_to_nanos(4.0));
    let params = Mechanism::ALL.into_iter().fold(base, GraphParams::with_mechanism);
    let mut histograms = [LatencyHistogram::new()];
    let mut simulation = Graph::new(params, 5, 0, &mut histograms).into_simulation();
    // Twenty seconds: every per-edge timeout FIFO reaches the high-water mark of its
    // doubling growth (with the ziggurat's draws one edge's FIFO still doubled at 10 s).
    simulation.run_until(secs_to_nanos(20.0));
    let before = allocations();
    let events = simulation.run_until(horizon);
    let allocated = allocations() - before;
    assert!(events > 2_000_000, "{events}");
    assert_eq!(allocated, 0, "{allocated} allocations over {events} events");
    let (results, _) = simulation.model.finish(horizon, simulation.events_handled());
    assert!(results.edges[3].hedges > 0 && results.edges[1].attempts > 0, "{:?}", results.edges);
    assert!(results.edges[4].pool_waited > 0, "the pool was used: {:?}", results.edges[4]);
    assert!(results.services[4].health_checks > 0, "the leaves were probed");
    let cache = &results.caches[1];
    assert!(cache.hits > 0 && cache.fills > 0 && cache.coalesced > 0, "a.read's cache worked: {cache:?}");
    let c = &results.services[3];
    assert!(c.scale_ups > 0 && c.scale_downs > 0, "c was scaled both ways: {c:?}");
    assert!(results.services[4].utilisation > 0.05, "the leaves were busy");
}
