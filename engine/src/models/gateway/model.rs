//! The [`Gateway`] model: its state (policies per class, tier and instance; slabs of
//! turns, calls and attempts; worklists), construction from [`GatewayParams`], the
//! event dispatch, bulkhead and limiter sweeps, incidents, and the results once the
//! replica has drained.
//!
//! Invariants: every counted call ends served or failed for exactly one reason, and
//! every counted turn answered or failed (asserted in [`Gateway::finish`]); worklists
//! keep their capacity, so the hot loop allocates nothing after warm-up.

use std::collections::VecDeque;

use crate::components::provider::{ProviderTier, ServicePlan, TierIncident};
use crate::kernel::histogram::LatencyHistogram;
use crate::kernel::replica_quantiles::ReplicaQuantiles;
use crate::kernel::rng::{RngStream, StreamPurpose};
use crate::kernel::sim::{Model, Scheduler, Simulation};
use crate::kernel::slab::{Slab, SlabKey};
use crate::kernel::time::{secs_to_nanos, Nanos, NANOS_PER_SEC};
use crate::measurement::latency_windows::WindowCounts;
use crate::measurement::request_latencies::RequestLatencies;
use crate::measurement::trace::{Trace, TraceKind, Tracer};
use crate::policy::admission::AdmissionController;
use crate::policy::breaker::BreakerState;
use crate::policy::breaker::CircuitBreaker;
use crate::policy::bulkhead::Bulkhead;
use crate::policy::limiter::ConcurrencyLimiter;
use crate::policy::quota::QuotaMeter;
use crate::policy::retry_budget::RatioBudget;

use super::gate::Gate;
use super::params::{Arrivals, Client, GatewayParams, Incident, IncidentKind, LimiterScope};
use super::reason::Reason;
use super::results::{ClassHistograms, ClassResults, GatewayResults, TenantResults, MAX_TENANT_RESULTS, TURN_ENDINGS};
use super::state::GatewayTrace;
use super::state::{Attempt, Call, Ending, Event, Turn};

const ARRIVALS: StreamPurpose = StreamPurpose::named("gateway.arrivals");
const TURNS: StreamPurpose = StreamPurpose::named("gateway.turns");
const TOKENS: StreamPurpose = StreamPurpose::named("gateway.tokens");
const PROVIDER: StreamPurpose = StreamPurpose::named("gateway.provider");
const BACKOFF: StreamPurpose = StreamPurpose::named("gateway.backoff");
const LIMITER: StreamPurpose = StreamPurpose::named("gateway.limiter");
/// Prompt-cache hits: its own stream, drawn only for classes with a hit ratio, so a
/// scenario without caching draws exactly what it drew before caching existed.
const CACHE: StreamPurpose = StreamPurpose::named("gateway.cache");

/// How often bulkhead queues are swept for expired deadlines.
const SWEEP_PERIOD: Nanos = NANOS_PER_SEC / 10;

/// The model.
pub struct Gateway<'h> {
    pub(super) p: GatewayParams,
    pub(super) arrivals: RngStream,
    /// `[load]`'s turns, with a replay's position.
    load: Option<crate::components::arrivals::Arrivals>,
    /// Replayed calls: each stream's class and its replay's position.
    call_streams: Vec<(usize, crate::components::arrivals::Arrivals)>,
    pub(super) turn_rng: RngStream,
    pub(super) tokens: RngStream,
    pub(super) provider_rng: RngStream,
    pub(super) backoff_rng: RngStream,
    pub(super) limiter_rng: RngStream,
    pub(super) providers: Vec<ProviderTier>,
    /// `instances × tiers` when split, `tiers` when coordinated.
    pub(super) meters: Vec<QuotaMeter>,
    pub(super) admission: AdmissionController,
    pub(super) bulkheads: Vec<Bulkhead>,
    pub(super) limiters: Vec<ConcurrencyLimiter>,
    /// Calls waiting for their limiter (its semaphore), with their deadlines.
    pub(super) limiter_queues: Vec<VecDeque<(SlabKey, Nanos)>>,
    pub(super) limiter_queue_capacity: Vec<usize>,
    /// A lower bound of each limiter queue's deadlines (`Nanos::MAX` when empty): the
    /// sweep skips a queue with nothing due.
    pub(super) limiter_earliest_deadline: Vec<Nanos>,
    pub(super) breakers: Vec<CircuitBreaker>,
    pub(super) budget: Option<RatioBudget>,
    pub(super) retry_pos: Option<u8>,
    pub(super) has_fallback_gate: bool,
    pub(super) turns: Slab<Turn>,
    pub(super) calls: Slab<Call>,
    pub(super) attempts: Slab<Attempt>,
    /// Calls handed a bulkhead slot, to continue their walk.
    pub(super) ready: Vec<SlabKey>,
    /// Waiters the bulkheads dropped.
    pub(super) dropped: Vec<(SlabKey, Reason)>,
    /// Provider waiters that gave up or were started, to resolve.
    pub(super) provider_started: Vec<ServicePlan>,
    pub(super) provider_gave_up: Vec<u64>,
    /// Attempts at the provider, per tier, and the bulkhead slots of the tier's classes.
    pub(super) in_flight: Vec<u32>,
    pub(super) tier_slots: Vec<u32>,
    pub(super) expected_latency: Vec<Nanos>,
    /// Each class's histograms in `histograms` (classes with `latency`).
    pub(super) class_histograms: Vec<Option<ClassHistograms>>,
    /// Turns' latencies by ending (and over time, when on).
    pub(super) turn_latencies: RequestLatencies,
    /// The plan's first step at which a turn is answered ([`super::TurnPlan::answered_at`]).
    pub(super) answered_at: usize,
    pub(super) sweeping: bool,
    pub(super) results: GatewayResults,
    /// Per-replica, per-class latencies for the p95 metrics (successful attempts, and
    /// whole calls), within 0.1% of the replica's own order statistic.
    pub(super) attempt_latency: Vec<ReplicaQuantiles>,
    pub(super) call_latency: Vec<ReplicaQuantiles>,
    /// Answered turns' latencies, for the turn quantile metrics.
    pub(super) turn_latency: ReplicaQuantiles,
    pub(super) cache_rng: RngStream,
    /// The quota coordinator is down: a coordinated quota uses the per-instance meters.
    pub(super) coordinator_down: bool,
    pub(super) histograms: &'h mut [LatencyHistogram],
    pub(super) series: GatewaySeries,
    /// Per-call tracing, off unless [`Gateway::traced`]: one branch per hook when off.
    pub(super) tracer: Option<Box<GatewayTrace>>,
}

/// Per-bucket counts of one replica, from time 0 to the horizon.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GatewaySeries {
    /// Attempts sent to the provider (every attempt, warm-up included).
    pub attempts: Vec<u64>,
    /// The same, per tier: `[tier][bucket]` (what a provider's dashboard shows per model).
    pub tier_attempts: Vec<Vec<u64>>,
    /// Turns answered.
    pub answered: Vec<u64>,
    /// Counted turns' latencies over time, then each class's (with `latency`) calls',
    /// by the window they ended in (empty unless [`Gateway::with_latency_windows`]).
    pub latency: Vec<WindowCounts>,
}

impl GatewaySeries {
    fn new(p: &GatewayParams) -> Self {
        let buckets = p.horizon.div_ceil(p.series_bucket) as usize;
        GatewaySeries {
            attempts: vec![0; buckets],
            tier_attempts: vec![vec![0; buckets]; p.tiers.len()],
            answered: vec![0; buckets],
            latency: Vec::new(),
        }
    }
}

/// Adds one to the bucket of `now`; nothing past the horizon.
#[inline]
pub(super) fn count_in_bucket(series: &mut [u64], bucket: Nanos, now: Nanos) {
    if let Some(count) = series.get_mut((now / bucket) as usize) {
        *count += 1;
    }
}

/// The earliest of the timeouts that fire (the first listed wins a tie), or `otherwise`
/// when none fires before it.
pub(super) fn earliest(candidates: [Option<(Nanos, Reason)>; 3], otherwise: (Nanos, Ending)) -> (Nanos, Ending) {
    let (mut at, mut ending) = otherwise;
    for (time, reason) in candidates.into_iter().flatten() {
        if time < at {
            (at, ending) = (time, Ending::Failed(reason));
        }
    }
    (at, ending)
}

pub(super) fn tokens(rng: &mut RngStream, (mean, sd): (f64, f64)) -> u64 {
    crate::kernel::float::round_to_count(rng.normal(mean, sd))
}

/// Per tier, the pressure slots of the classes on it that a turn can call: pressure
/// compares a tier's attempts with them.
fn tier_slots(p: &GatewayParams) -> Vec<u32> {
    let reached = p.plan.reachable(&p.classes);
    (0..p.tiers.len())
        .map(|tier| {
            let on_tier = p.classes.iter().zip(&reached).filter(|(c, &reached)| reached && c.tier == tier);
            on_tier.map(|(c, _)| c.pressure_slots).sum()
        })
        .collect()
}

/// Each class's latency histograms (those with `latency`), after the turn's, in class order.
fn class_histograms(p: &GatewayParams) -> Vec<Option<ClassHistograms>> {
    let mut next_histogram = TURN_ENDINGS.end();
    p.classes
        .iter()
        .map(|c| {
            c.latency.then(|| {
                next_histogram += ClassHistograms::LEN;
                ClassHistograms::from(next_histogram - ClassHistograms::LEN)
            })
        })
        .collect()
}

/// How many tenants have results of their own: none with one tenant, else up to
/// [`MAX_TENANT_RESULTS`].
fn tenant_results(p: &GatewayParams) -> usize {
    (if p.tenants > 1 { p.tenants.min(MAX_TENANT_RESULTS) } else { 0 }) as usize
}

impl<'h> Gateway<'h> {
    /// `histograms` receives the turn's latencies, then each class's with `latency`
    /// (time to first token, total): [`GatewayParams::latency_histograms`] of them.
    pub fn new(p: GatewayParams, master_seed: u64, replica: u64, histograms: &'h mut [LatencyHistogram]) -> Self {
        p.check();
        assert_eq!(histograms.len(), p.latency_histograms(), "one histogram per latency the replica records");
        let stack = p.client == Client::Stack;
        let has = |gate| stack && p.gates.contains(&gate);
        let providers =
            p.tiers.iter().map(|t| ProviderTier::new(t.spec, t.error_rate).with_ttft(t.ttft.clone())).collect();
        let meters = if has(Gate::Quota) { p.quota_meters() } else { Vec::new() };
        let in_flight_capacity: u32 = p.classes.iter().map(|c| c.pressure_slots).sum();
        let limiter_queue_capacity = p.limiter_queue_capacity();
        let expected_latency = (0..p.classes.len()).map(|class| p.unloaded_latency(class)).collect();
        let classes = p.classes.len();
        Gateway {
            arrivals: RngStream::derive(master_seed, replica, ARRIVALS),
            load: p.load.clone().map(crate::components::arrivals::Arrivals::new),
            call_streams: p
                .call_arrivals
                .iter()
                .map(|(class, process)| (*class, crate::components::arrivals::Arrivals::new(process.clone())))
                .collect(),
            turn_rng: RngStream::derive(master_seed, replica, TURNS),
            tokens: RngStream::derive(master_seed, replica, TOKENS),
            provider_rng: RngStream::derive(master_seed, replica, PROVIDER),
            backoff_rng: RngStream::derive(master_seed, replica, BACKOFF),
            limiter_rng: RngStream::derive(master_seed, replica, LIMITER),
            cache_rng: RngStream::derive(master_seed, replica, CACHE),
            coordinator_down: false,
            providers,
            meters,
            admission: AdmissionController::new(p.ladder, p.tenants, in_flight_capacity),
            bulkheads: p.bulkheads(),
            limiters: p.limiters(),
            limiter_queues: limiter_queue_capacity.iter().map(|&n| VecDeque::with_capacity(n)).collect(),
            limiter_earliest_deadline: vec![Nanos::MAX; limiter_queue_capacity.len()],
            limiter_queue_capacity,
            breakers: (0..classes).map(|_| CircuitBreaker::new(p.breaker)).collect(),
            // Starts as if 100 calls had succeeded: a ratio of 0 funds no retry at all.
            budget: p.ratio_budget(),
            retry_pos: if stack { p.gates.iter().position(|g| *g == Gate::Retry).map(|i| i as u8) } else { None },
            has_fallback_gate: has(Gate::Fallback),
            turns: Slab::with_capacity(1024),
            calls: Slab::with_capacity(2048),
            attempts: Slab::with_capacity(2048),
            ready: Vec::with_capacity(64),
            dropped: Vec::with_capacity(64),
            provider_started: Vec::with_capacity(16),
            provider_gave_up: Vec::with_capacity(16),
            in_flight: vec![0; p.tiers.len()],
            tier_slots: tier_slots(&p),
            expected_latency,
            class_histograms: class_histograms(&p),
            turn_latencies: RequestLatencies::new(TURN_ENDINGS),
            answered_at: p.plan.answered_at(),
            sweeping: false,
            results: GatewayResults {
                classes: vec![ClassResults::default(); classes],
                tenants: vec![TenantResults::default(); tenant_results(&p)],
                ..GatewayResults::default()
            },
            // A few per replica, hot: counters now, never a growth after warm-up.
            turn_latency: ReplicaQuantiles::with_counters(),
            attempt_latency: (0..classes).map(|_| ReplicaQuantiles::with_counters()).collect(),
            call_latency: (0..classes).map(|_| ReplicaQuantiles::with_counters()).collect(),
            histograms,
            series: GatewaySeries::new(&p),
            tracer: None,
            p,
        }
    }

    /// Runs the replica to the end and returns its results.
    pub fn run(self) -> GatewayResults {
        self.run_all().0
    }

    /// Runs the replica to the end: its results, time series and (if [`Gateway::traced`]) trace.
    pub fn run_all(self) -> (GatewayResults, GatewaySeries, Option<Trace>) {
        let mut simulation = self.into_simulation();
        // Arrivals stop at the horizon; everything in flight then runs to its end.
        simulation.run_until(Nanos::MAX);
        let events = simulation.events_handled();
        let mut model = simulation.model;
        let mut series = std::mem::take(&mut model.series);
        series.latency = std::iter::once(model.turn_latencies.take_windows())
            .chain(model.class_histograms.iter_mut().flatten().map(|h| h.calls.take_windows()))
            .collect();
        let tracer = model.tracer.take();
        (model.finish(events), series, tracer.map(|t| t.rows.finish(None)))
    }

    /// Records a trace of every call (see [`crate::measurement::trace`]).
    /// Keeps turns' and calls' latencies over time too, in windows of `window` ns.
    pub fn with_latency_windows(mut self, window: Nanos) -> Self {
        let horizon = self.p.horizon;
        self.turn_latencies.keep_windows(window, horizon);
        for histograms in self.class_histograms.iter_mut().flatten() {
            histograms.calls.keep_windows(window, horizon);
        }
        self
    }

    /// Records a trace of every turn, call, attempt, wait and refusal, and the
    /// breakers' state changes (see [`crate::measurement::trace`]).
    pub fn traced(mut self) -> Self {
        let mut tracer = Tracer::new();
        for incident in &self.p.incidents {
            let (kind, place) = match incident.kind {
                IncidentKind::Brownout { .. } => ("brownout", incident.tier as u32),
                IncidentKind::RateLimitStep { .. } => ("rate_limit_step", incident.tier as u32),
                IncidentKind::Outage => ("outage", incident.tier as u32),
                IncidentKind::CapacityStep { .. } => ("capacity_step", incident.tier as u32),
                IncidentKind::CoordinatorOutage => ("coordinator_outage", crate::measurement::trace::NONE),
            };
            let window = (incident.start, incident.end);
            tracer.event(TraceKind::Incident, "", place, window, kind, "", incident.end > self.p.warmup);
        }
        let breakers = vec![BreakerState::Closed; self.p.classes.len()];
        self.tracer = Some(Box::new(GatewayTrace { rows: tracer, breakers }));
        self
    }

    /// The model in a kernel with its first arrival, incidents and sweeps scheduled.
    pub fn into_simulation(self) -> Simulation<Self> {
        let mut simulation = Simulation::new(self, 4096);
        if simulation.model.call_streams.is_empty() {
            if let Some(first) = simulation.model.interarrival(0) {
                simulation.scheduler().at(first, Event::TurnArrival);
            }
        }
        for stream in 0..simulation.model.call_streams.len() {
            if let Some(first) = simulation.model.next_call_gap(stream, 0) {
                simulation.scheduler().at(first, Event::CallArrival { stream: stream as u16 });
            }
        }
        for index in 0..simulation.model.p.incidents.len() {
            let Incident { start, end, .. } = simulation.model.p.incidents[index];
            simulation.scheduler().at(start, Event::Incident { index: index as u16, starts: true });
            simulation.scheduler().at(end, Event::Incident { index: index as u16, starts: false });
        }
        if simulation.model.gate_on(Gate::Bulkhead) {
            simulation.model.sweeping = true;
            simulation.scheduler().at(SWEEP_PERIOD, Event::Sweep);
        }
        simulation
    }

    pub(super) fn gate_on(&self, gate: Gate) -> bool {
        self.p.client == Client::Stack && self.p.gates.contains(&gate)
    }

    /// The gap from `now` to the next turn; `None` when `[load]` has no more.
    pub(super) fn interarrival(&mut self, now: Nanos) -> Option<Nanos> {
        if let Some(load) = &mut self.load {
            return load.next_gap(now, 1.0, &mut self.arrivals);
        }
        Some(match self.p.arrivals {
            Arrivals::Poisson => secs_to_nanos(self.arrivals.exponential(self.p.turns_per_s)),
            Arrivals::Even => secs_to_nanos(1.0 / self.p.turns_per_s),
        })
    }

    /// The gap from `now` to replayed call stream `stream`'s next call; `None` when it has no more.
    pub(super) fn next_call_gap(&mut self, stream: usize, now: Nanos) -> Option<Nanos> {
        self.call_streams[stream].1.next_gap(now, 1.0, &mut self.arrivals)
    }

    /// A replayed call arrives: the next is scheduled, and this one starts outside any turn.
    pub(super) fn call_arrival(&mut self, now: Nanos, stream: usize, scheduler: &mut Scheduler<Event>) {
        if let Some(next) = self.next_call_gap(stream, now).map(|gap| now.saturating_add(gap)) {
            if next < self.p.horizon {
                scheduler.at(next, Event::CallArrival { stream: stream as u16 });
            }
        }
        let (instance, tenant) = self.draw_instance_and_tenant();
        let class = self.call_streams[stream].0;
        self.start_call(now, class, super::state::Origin { turn: None, slot: 0, instance, tenant }, scheduler);
    }

    /// The results once the simulation has drained (asserts that it has).
    pub fn finish(mut self, events: u64) -> GatewayResults {
        let p95 = |h: &ReplicaQuantiles| h.quantile(0.95) / NANOS_PER_SEC as f64;
        debug_assert!(self.calls.is_empty() && self.turns.is_empty(), "the replica drained");
        let limited = matches!(self.p.client, Client::Stack) && self.p.gates.contains(&Gate::Adaptive);
        for (class, name) in self.p.class_names.iter().enumerate() {
            let limiter = &self.limiters[self.limiter_index(class)];
            let results = &mut self.results.classes[class];
            if limited {
                results.limit_final = Some(limiter.limit());
                results.limit_min = Some(limiter.lowest_limit());
                results.limit_max = Some(limiter.highest_limit());
            }
            results.breaker_trips = self.breakers[class].counters().trips;
            results.breaker_refusals = self.breakers[class].counters().refusals;
            results.attempt_p95_s = p95(&self.attempt_latency[class]);
            results.call_p95_s = p95(&self.call_latency[class]);
            let accounted: u64 = results.reasons.iter().sum();
            assert_eq!(results.failed, accounted, "{name}: every failed call has one reason");
            assert_eq!(results.offered, results.served + results.failed, "{name}: calls drained");
        }
        let r = &mut self.results;
        r.turn_quantiles_s = [0.5, 0.95, 0.99].map(|q| self.turn_latency.quantile(q) / NANOS_PER_SEC as f64);
        r.events = events;
        r.window_s = (self.p.horizon - self.p.warmup) as f64 / NANOS_PER_SEC as f64;
        assert_eq!(r.turns_offered, r.turns_answered + r.turns_failed, "turns drained");
        self.results
    }

    /// The live call `key` (a key held by the model is live by construction).
    #[inline]
    pub(super) fn call(&self, key: SlabKey) -> &Call {
        self.calls.get(key).expect("a call key held by the model is live")
    }

    #[inline]
    pub(super) fn call_mut(&mut self, key: SlabKey) -> &mut Call {
        self.calls.get_mut(key).expect("a call key held by the model is live")
    }

    #[inline]
    pub(super) fn attempt_mut(&mut self, key: SlabKey) -> &mut Attempt {
        self.attempts.get_mut(key).expect("an attempt key held by the model is live")
    }

    pub(super) fn limiter_index(&self, class: usize) -> usize {
        match self.p.limiter_scope {
            LimiterScope::Class => class,
            LimiterScope::Tier => self.p.classes[class].tier,
        }
    }

    /// The first of the `tiers` meters serving `instance` now: the fleet-wide set of a
    /// coordinated quota, or the instance's own (when split, or while the coordinator
    /// is down — the per-instance sets then follow the coordinated one).
    fn meter_set(&self, instance: u16) -> usize {
        let tiers = self.p.tiers.len();
        match (self.p.quota.coordinated, self.coordinator_down) {
            (true, false) => 0,
            (true, true) => tiers + instance as usize * tiers,
            (false, _) => instance as usize * tiers,
        }
    }

    pub(super) fn meter_index(&self, call: &Call) -> usize {
        self.meter_set(call.instance) + self.p.classes[call.class as usize].tier
    }

    /// Input tokens as the meters count them: a cached token weighs `cache_itpm_weight`.
    pub(super) fn metered_input(&self, call: &Call) -> u64 {
        let cached = call.cached as f64 * self.p.cache_itpm_weight;
        call.input - call.cached + crate::kernel::float::round(cached) as u64
    }

    /// Pressure: the tightest of the instance's quota meters (used fraction) or the
    /// busiest tier's attempts in flight ÷ its classes' bulkhead slots, whichever is higher.
    pub(super) fn pressure(&mut self, now: Nanos, instance: u16) -> f64 {
        let in_flight = self
            .in_flight
            .iter()
            .zip(&self.tier_slots)
            .map(|(&n, &slots)| n as f64 / slots.max(1) as f64)
            .fold(0.0, f64::max);
        let tiers = self.p.tiers.len();
        let set = self.meter_set(instance);
        let meters = self.meters.iter_mut().skip(set).take(tiers);
        meters.fold(in_flight, |pressure, meter| meter.pressure_at_least(now, pressure))
    }

    /// Continues calls handed a bulkhead slot and fails the ones it dropped.
    pub(super) fn drain_worklists(&mut self, now: Nanos, scheduler: &mut Scheduler<Event>) {
        loop {
            if let Some((key, reason)) = self.dropped.pop() {
                self.refused(now, key, reason, scheduler);
            } else if let Some(key) = self.ready.pop() {
                self.walk(now, key, scheduler);
            } else if let Some(plan) = self.provider_started.pop() {
                self.started(now, plan, scheduler);
            } else {
                return;
            }
        }
    }

    /// Makes sure a sweep is scheduled while anything waits in a queue.
    pub(super) fn keep_sweeping(&mut self, now: Nanos, scheduler: &mut Scheduler<Event>) {
        if !self.sweeping {
            self.sweeping = true;
            scheduler.at(now + SWEEP_PERIOD, Event::Sweep);
        }
    }

    pub(super) fn sweep(&mut self, now: Nanos, scheduler: &mut Scheduler<Event>) {
        self.sweep_bulkheads(now);
        self.sweep_limiter_queues(now);
        let queued = self.bulkheads.iter().any(|b| b.queued() > 0) || self.limiter_queues.iter().any(|q| !q.is_empty());
        if now < self.p.horizon || queued {
            scheduler.at(now + SWEEP_PERIOD, Event::Sweep);
        } else {
            self.sweeping = false;
        }
    }

    /// Incident `index` starts or ends: the tier's condition is recomputed from every
    /// incident on at `now` (windows are half-open, so the one ending is off), so
    /// overlapping incidents compose — health and latency factors multiply, error
    /// rates combine as 1 − Π(1 − r), quota scales multiply, the coordinator is down
    /// while any outage of it is on, and a tier is out (health 0.05, every answer an
    /// error) while any outage of it is on. One incident alone gives what it always gave.
    pub(super) fn incident(&mut self, now: Nanos, index: usize, starts: bool) {
        let tier = self.p.incidents[index].tier;
        let on = |incident: &Incident| incident.start <= now && now < incident.end;
        debug_assert_eq!(on(&self.p.incidents[index]), starts, "an incident is on from its start to its end");
        let (mut health, mut latency_factor, mut scales) = (1.0, 1.0, [1.0; 3]);
        // None: no incident sets the error rate (the healthy one holds); one alone keeps
        // its own rate to the bit.
        let (mut errors, mut condition_set): (Option<f64>, bool) = (None, false);
        let combine =
            |errors: Option<f64>, rate: f64| Some(errors.map_or(rate, |e: f64| 1.0 - (1.0 - e) * (1.0 - rate)));
        let (mut coordinator_down, mut outage) = (false, false);
        for incident in self.p.incidents.iter().filter(|i| on(i)) {
            if let IncidentKind::CoordinatorOutage = incident.kind {
                coordinator_down = true;
            }
            if incident.tier != tier {
                continue;
            }
            match incident.kind {
                IncidentKind::Brownout { health: h, error_rate, latency_factor: f } => {
                    (health, latency_factor) = (health * h, latency_factor * f);
                    errors = combine(errors, error_rate);
                    condition_set = true;
                }
                // A state, not a factor: two outages are one outage.
                IncidentKind::Outage => outage = true,
                IncidentKind::CapacityStep { scale } => {
                    health *= scale;
                    condition_set = true;
                }
                IncidentKind::RateLimitStep { scales: s } => {
                    for (total, one) in scales.iter_mut().zip(s) {
                        *total *= one;
                    }
                }
                IncidentKind::CoordinatorOutage => {}
            }
        }
        if outage {
            health *= 0.05;
            errors = combine(errors, 1.0);
            condition_set = true;
        }
        match self.p.incidents[index].kind {
            IncidentKind::RateLimitStep { .. } => self.providers[tier].scale_quota(now, scales),
            IncidentKind::CoordinatorOutage => self.coordinator_down = coordinator_down,
            _ => {
                let healthy_errors = self.p.tiers[tier].error_rate;
                let error_rate = errors.unwrap_or(healthy_errors);
                let condition = TierIncident { health, error_rate, latency_factor };
                self.providers[tier].set_incident(condition_set.then_some(condition));
            }
        }
    }
}

impl Model for Gateway<'_> {
    type Event = Event;

    fn handle(&mut self, now: Nanos, event: Event, scheduler: &mut Scheduler<Event>) {
        match event {
            Event::TurnArrival => self.turn_arrival(now, scheduler),
            Event::CallArrival { stream } => self.call_arrival(now, stream as usize, scheduler),
            Event::AttemptEnd { attempt, stamp } => self.attempt_end(now, attempt, stamp, scheduler),
            Event::FirstToken { attempt, stamp } => self.first_token(now, attempt, stamp),
            Event::Resume { call } => self.walk(now, call, scheduler),
            Event::Sweep => self.sweep(now, scheduler),
            Event::Incident { index, starts } => self.incident(now, index as usize, starts),
        }
        self.drain_worklists(now, scheduler);
    }
}
