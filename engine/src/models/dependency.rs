//! The slow dependency (seed 002): a service with a fixed worker pool calls a
//! dependency whose latency steps from healthy (15 ms) to slow (2,500 ms) and back.
//! Without protection, workers pile up waiting on doomed calls, the pool saturates
//! and every priority suffers. Two policies from the library, alone or together:
//!
//! * a **circuit breaker** on the dependency call: slow (timed-out) calls trip it,
//!   and while open a request gets its fallback in O(1) and frees its worker;
//! * a **priority shedder** at admission: LOW requests are shed once 75% of the
//!   pool is in use, NORMAL at 90%, HIGH only when full; shed requests get a fallback.
//!
//! Requests wait for a worker in a bounded FIFO queue; a request whose client timeout
//! passes before it is answered counts as a timeout (a worker already running it
//! finishes anyway). Invariants (asserted): busy ≤ workers; queue ≤ capacity.

use std::collections::VecDeque;

use crate::components::arrivals::{ArrivalProcess, Arrivals};
use crate::components::distribution::{Distribution, Shape};
use crate::kernel::histogram::LatencyHistogram;
use crate::kernel::rng::{RngStream, StreamPurpose};
use crate::kernel::sim::{Model, Scheduler, Simulation};
use crate::kernel::slab::{Slab, SlabKey};
use crate::kernel::time::round_to_nanos;
use crate::kernel::time::{Nanos, NANOS_PER_SEC};
use crate::measurement::ending::Ending;
use crate::measurement::latency_windows::WindowCounts;
use crate::measurement::request_latencies::{EndingSlots, RequestLatencies};
use crate::measurement::trace::{Trace, TraceKind, Tracer};
use crate::policy::breaker::{BreakerConfig, CircuitBreaker, Permit};
use crate::policy::classify::Outcome;
use crate::policy::shedder::{PriorityShedder, ShedMarks};
use crate::policy::Criticality;

const ARRIVALS: StreamPurpose = StreamPurpose::named("dependency.arrivals");
const PRIORITIES: StreamPurpose = StreamPurpose::named("dependency.priorities");
const LATENCY: StreamPurpose = StreamPurpose::named("dependency.latency");

/// Request priorities, most important first.
pub const PRIORITY_NAMES: [&str; 3] = ["high", "normal", "low"];

/// Parameters of one replica.
#[derive(Clone, Debug)]
pub struct DependencyParams {
    /// Requests per second, a constant-rate Poisson stream, unless `load` is set.
    pub arrival_rate_per_s: f64,
    /// Requests from a rate profile, even spacing or a trace (`[load]`).
    pub load: Option<ArrivalProcess>,
    /// Shares of HIGH, NORMAL and LOW requests (sum 1).
    pub priority_shares: [f64; 3],
    /// Workers in the service's pool.
    pub workers: u32,
    /// Requests that may wait for a worker.
    pub queue_capacity: u32,
    /// The client gives up after this long.
    pub client_timeout: Nanos,
    /// Local work per request besides the dependency call.
    pub local_work: Nanos,
    /// The dependency's median latency while healthy and while slow (lognormal, σ = 0.25).
    pub healthy_latency: Nanos,
    /// The dependency's median latency while slow.
    pub slow_latency: Nanos,
    /// A measured latency distribution for the healthy dependency instead of the
    /// lognormal around `healthy_latency`; while slow, its draws are scaled so that
    /// its median becomes `slow_latency`.
    pub latency: Option<Distribution>,
    /// When the slowdown starts.
    pub slow_start: Nanos,
    /// How long it lasts.
    pub slow_duration: Nanos,
    /// The service's own timeout on the dependency call.
    pub call_timeout: Nanos,
    /// A breaker on the dependency call; `None`: none.
    pub breaker: Option<BreakerConfig>,
    /// Shed by priority above these utilisation marks of the worker pool.
    pub shedder: Option<ShedMarks>,
    /// Nothing before this is counted.
    pub warmup: Nanos,
    /// When the replica ends.
    pub horizon: Nanos,
    /// Width of a time-series bucket.
    pub bucket: Nanos,
    /// Recovery needs the pool back in its band for this long.
    pub recovery_hold: Nanos,
}

/// Scalar results (after warm-up).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct DependencyResults {
    /// Requests offered.
    pub offered: u64,
    /// Answered in time by the real dependency, per priority.
    pub served: [u64; 3],
    /// Answered in time per second, per priority.
    pub goodput_rps: [f64; 3],
    /// Requests answered by the fallback.
    pub fallbacks: u64,
    /// Requests shed by priority.
    pub shed: u64,
    /// Calls the breaker refused.
    pub breaker_refusals: u64,
    /// Dependency calls that hit the service's timeout.
    pub call_timeouts: u64,
    /// Requests whose client gave up.
    pub client_timeouts: u64,
    /// Requests refused by a full queue.
    pub queue_full: u64,
    /// The time-average share of workers busy.
    pub pool_saturation_ratio: f64,
    /// Times the breaker opened.
    pub breaker_trips: u64,
    /// Seconds from the slowdown's end until the pool is back in its band (NaN if never).
    pub recovery_s: f64,
    /// Whether it recovered.
    pub recovered: bool,
    /// Events handled, warm-up included.
    pub events: u64,
}

/// Per-bucket series: Σ busy workers × ns, Σ queued × ns, answers, fallbacks.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DependencySeries {
    /// Σ busy workers × ns, per bucket.
    pub busy_area: Vec<u128>,
    /// Σ queued requests × ns, per bucket.
    pub queued_area: Vec<u128>,
    /// Requests answered by the dependency, per bucket.
    pub served: Vec<u64>,
    /// Requests answered by the fallback, per bucket.
    pub fallbacks: Vec<u64>,
    /// Counted requests' latencies over time, by the window they ended in for their
    /// client (empty unless [`Dependency::with_latency_windows`]).
    pub latency: WindowCounts,
}

/// Events (16 bytes).
#[derive(Clone, Copy, Debug)]
pub enum Event {
    /// A request arrives.
    Arrival,
    /// A request's dependency call ends.
    CallDone {
        /// The request.
        request: SlabKey,
    },
}

#[derive(Clone, Copy, Debug)]
struct Request {
    priority: u8,
    arrived_at: Nanos,
    counted: bool,
    permit: Option<Permit>,
    call_started: Nanos,
    admitted: bool,
}

/// The model.
pub struct Dependency<'h> {
    p: DependencyParams,
    arrivals: RngStream,
    /// `[load]`'s arrivals, with the replay's position.
    load: Option<Arrivals>,
    /// `slow_latency` over the latency distribution's median (1 without one).
    slow_factor: f64,
    priorities: RngStream,
    latency_rng: RngStream,
    breaker: Option<CircuitBreaker>,
    shedder: Option<PriorityShedder>,
    requests: Slab<Request>,
    queue: VecDeque<SlabKey>,
    busy: u32,
    last_change: Nanos,
    /// The series bucket `last_change` falls in.
    cursor: crate::measurement::buckets::BucketCursor,
    busy_window_area: u128,
    series: DependencySeries,
    results: DependencyResults,
    /// Requests' latencies by ending (see [`Dependency::new`]).
    latencies: &'h mut [LatencyHistogram],
    endings: RequestLatencies,
    /// Per-request tracing, off unless [`Dependency::traced`].
    tracer: Option<Box<Tracer>>,
}

fn criticality(priority: u8) -> Criticality {
    [Criticality::CriticalPlus, Criticality::SheddablePlus, Criticality::Sheddable][priority as usize]
}

impl<'h> Dependency<'h> {
    /// Replica `replica` of a run seeded `master_seed`. Request latencies go to
    /// `latencies`: `[ok, degraded, failed, all]` — degraded is a fallback answer, and a
    /// failed request's latency is the time until its client learned it (the client
    /// timeout, or 0 for a full queue) — or `[ok]` alone.
    pub fn new(p: DependencyParams, master_seed: u64, replica: u64, latencies: &'h mut [LatencyHistogram]) -> Self {
        assert!(p.workers > 0 && p.bucket > 0);
        let buckets = p.horizon.div_ceil(p.bucket) as usize;
        Dependency {
            arrivals: RngStream::derive(master_seed, replica, ARRIVALS),
            load: p.load.clone().map(Arrivals::new),
            slow_factor: p
                .latency
                .as_ref()
                .map_or(1.0, |d| p.slow_latency as f64 / NANOS_PER_SEC as f64 / median_s(d).max(f64::MIN_POSITIVE)),
            priorities: RngStream::derive(master_seed, replica, PRIORITIES),
            latency_rng: RngStream::derive(master_seed, replica, LATENCY),
            breaker: p.breaker.map(CircuitBreaker::new),
            // The pool's utilisation marks: shed LOW above 75% of the workers in use, …
            shedder: p.shedder.map(|marks| PriorityShedder::new(p.workers, marks)),
            requests: Slab::with_capacity(1024),
            queue: VecDeque::with_capacity(p.queue_capacity as usize),
            busy: 0,
            last_change: 0,
            cursor: crate::measurement::buckets::BucketCursor::new(p.bucket),
            busy_window_area: 0,
            series: DependencySeries {
                busy_area: vec![0; buckets],
                queued_area: vec![0; buckets],
                served: vec![0; buckets],
                fallbacks: vec![0; buckets],
                latency: WindowCounts::default(),
            },
            results: DependencyResults::default(),
            endings: RequestLatencies::new(EndingSlots::for_len(0, latencies.len(), true)),
            latencies,
            tracer: None,
            p,
        }
    }

    /// Runs to the horizon: the results and the series.
    pub fn run(self) -> (DependencyResults, DependencySeries) {
        let (results, series, _) = self.run_traced();
        (results, series)
    }

    /// Keeps the requests' latencies over time too, in windows of `window` ns.
    pub fn with_latency_windows(mut self, window: Nanos) -> Self {
        self.endings.keep_windows(window, self.p.horizon);
        self
    }

    /// Records a trace of every request (see [`crate::measurement::trace`]): its wait
    /// for a worker, its dependency call (the attempt), refusals; requests still going
    /// at the horizon end there as `in_flight`.
    pub fn traced(mut self) -> Self {
        let mut tracer = Tracer::new();
        let window = (self.p.slow_start, self.p.slow_start.saturating_add(self.p.slow_duration));
        tracer.event(TraceKind::Incident, "", 0, window, "slowdown", "", window.1 > self.p.warmup);
        self.tracer = Some(Box::new(tracer));
        self
    }

    /// Runs to the horizon: the scalars, the series and (if [`Dependency::traced`]) the trace.
    pub fn run_traced(self) -> (DependencyResults, DependencySeries, Option<Trace>) {
        let horizon = self.p.horizon;
        let mut simulation = Simulation::new(self, 1024);
        let first = simulation.model.interarrival(0);
        simulation.scheduler().at(first, Event::Arrival);
        simulation.run_until(horizon);
        let events = simulation.events_handled();
        let (results, series) = simulation.model.finish(horizon, events);
        let trace = simulation.model.tracer.take().map(|t| t.finish(Some(horizon)));
        (results, series, trace)
    }

    /// The gap from `now` to the next request (a long one when `[load]` has no more).
    fn interarrival(&mut self, now: Nanos) -> Nanos {
        if let Some(load) = &mut self.load {
            return load.next_gap(now, 1.0, &mut self.arrivals).unwrap_or(Nanos::MAX / 2);
        }
        round_to_nanos(self.arrivals.exponential(self.p.arrival_rate_per_s) * NANOS_PER_SEC as f64)
    }

    fn advance(&mut self, now: Nanos) {
        let (busy, queued) = (self.busy as u128, self.queue.len() as u128);
        let series = &mut self.series;
        let window = &mut self.busy_window_area;
        self.cursor.for_each_span(
            self.last_change,
            now,
            self.p.bucket,
            self.p.warmup,
            |bucket, after_warmup, dwell| {
                if let Some(area) = series.busy_area.get_mut(bucket) {
                    *area += busy * dwell;
                    series.queued_area[bucket] += queued * dwell;
                }
                if after_warmup {
                    *window += busy * dwell;
                }
            },
        );
        self.last_change = now;
    }

    fn dependency_latency(&mut self, now: Nanos) -> Nanos {
        let slow = now >= self.p.slow_start && now < self.p.slow_start.saturating_add(self.p.slow_duration);
        if let Some(latency) = &self.p.latency {
            let draw = latency.sample_s(&mut self.latency_rng) * if slow { self.slow_factor } else { 1.0 };
            return round_to_nanos(draw * NANOS_PER_SEC as f64);
        }
        let median = if slow { self.p.slow_latency } else { self.p.healthy_latency };
        round_to_nanos(median as f64 * self.latency_rng.lognormal(0.0, 0.25))
    }

    /// A fallback answered a request that arrived at `arrived_at`.
    fn fallback(&mut self, now: Nanos, counted: bool, arrived_at: Nanos) {
        if counted {
            self.results.fallbacks += 1;
            self.endings.record(self.latencies, now, Ending::Degraded, now - arrived_at);
        }
        if let Some(b) = self.series.fallbacks.get_mut((now / self.p.bucket) as usize) {
            *b += 1;
        }
    }

    /// A worker takes `key`: ask the breaker, then call the dependency.
    fn start(&mut self, now: Nanos, key: SlabKey, scheduler: &mut Scheduler<Event>) {
        let request = *self.requests.get(key).expect("live");
        let permit = match self.breaker.as_mut() {
            None => None,
            Some(breaker) => match breaker.try_acquire(now) {
                Some(permit) => Some(permit),
                None => {
                    // Open: the fallback, in microseconds; the worker stays free.
                    if request.counted {
                        self.results.breaker_refusals += 1;
                    }
                    if let Some(tracer) = self.tracer.as_deref_mut() {
                        tracer.refusal(key, now, "breaker_open", "breaker");
                        tracer.call_ended(key, now, "fallback");
                    }
                    self.fallback(now, request.counted, request.arrived_at);
                    self.finish_request(key);
                    return;
                }
            },
        };
        self.busy += 1;
        debug_assert!(self.busy <= self.p.workers);
        let latency = self.dependency_latency(now).min(self.p.call_timeout);
        let request = self.requests.get_mut(key).expect("live");
        request.permit = permit;
        request.call_started = now;
        if let Some(tracer) = self.tracer.as_deref_mut() {
            tracer.attempt_sent(key, now, 0);
        }
        scheduler.after(self.p.local_work + latency, Event::CallDone { request: key });
    }

    fn finish_request(&mut self, key: SlabKey) {
        if let Some(request) = self.requests.remove(key) {
            if request.admitted {
                if let Some(shedder) = self.shedder.as_mut() {
                    shedder.release();
                }
            }
        }
    }

    fn call_done(&mut self, now: Nanos, key: SlabKey, scheduler: &mut Scheduler<Event>) {
        self.busy -= 1;
        let request = *self.requests.get(key).expect("live");
        let elapsed = now - request.call_started - self.p.local_work;
        let timed_out = elapsed >= self.p.call_timeout;
        if let (Some(breaker), Some(permit)) = (self.breaker.as_mut(), request.permit) {
            let outcome = if timed_out { Outcome::Timeout } else { Outcome::Success };
            breaker.record(now, permit, outcome, elapsed);
        }
        let in_time = now - request.arrived_at <= self.p.client_timeout;
        if let Some(tracer) = self.tracer.as_deref_mut() {
            tracer.attempt_ended(key, now, None, if timed_out { "timeout" } else { "200" });
            let outcome = if timed_out {
                "fallback"
            } else if in_time {
                "served"
            } else {
                "client_timeout"
            };
            tracer.call_ended(key, now, outcome);
        }
        if timed_out {
            if request.counted {
                self.results.call_timeouts += 1;
            }
            self.fallback(now, request.counted, request.arrived_at);
        } else if !in_time {
            if request.counted {
                self.results.client_timeouts += 1;
                let learned = request.arrived_at + self.p.client_timeout;
                self.endings.record(self.latencies, learned, Ending::Failed, self.p.client_timeout);
            }
        } else {
            if request.counted {
                self.results.served[request.priority as usize] += 1;
                self.endings.record(self.latencies, now, Ending::Ok, now - request.arrived_at);
            }
            if let Some(b) = self.series.served.get_mut((now / self.p.bucket) as usize) {
                *b += 1;
            }
        }
        self.finish_request(key);
        // The freed worker takes the next waiter still worth serving.
        while let Some(next) = self.queue.pop_front() {
            let waiting = *self.requests.get(next).expect("live");
            if now - waiting.arrived_at > self.p.client_timeout {
                if waiting.counted {
                    self.results.client_timeouts += 1;
                    // The client gave up at its timeout; the pool notices only now.
                    let learned = waiting.arrived_at + self.p.client_timeout;
                    self.endings.record(self.latencies, learned, Ending::Failed, self.p.client_timeout);
                }
                if let Some(tracer) = self.tracer.as_deref_mut() {
                    tracer.wait_ends(next, now);
                    tracer.call_ended(next, now, "client_timeout");
                }
                self.finish_request(next);
                continue;
            }
            self.start(now, next, scheduler);
            if self.busy == self.p.workers {
                break;
            }
        }
    }

    fn arrival(&mut self, now: Nanos, scheduler: &mut Scheduler<Event>) {
        let next = self.interarrival(now);
        scheduler.after(next, Event::Arrival);
        let u = self.priorities.uniform01();
        let shares = self.p.priority_shares;
        let priority = if u < shares[0] {
            0
        } else if u < shares[0] + shares[1] {
            1
        } else {
            2
        };
        let counted = now >= self.p.warmup;
        if counted {
            self.results.offered += 1;
        }
        let admitted = match self.shedder.as_mut() {
            None => false,
            Some(shedder) => {
                if !shedder.try_admit(criticality(priority)) {
                    if counted {
                        self.results.shed += 1;
                    }
                    if let Some(tracer) = self.tracer.as_deref_mut() {
                        tracer.refused_on_arrival(PRIORITY_NAMES[priority as usize], counted, now, "shed", "shedder");
                    }
                    self.fallback(now, counted, now);
                    return;
                }
                true
            }
        };
        let key = self.requests.insert(Request {
            priority,
            arrived_at: now,
            counted,
            permit: None,
            call_started: 0,
            admitted,
        });
        if let Some(tracer) = self.tracer.as_deref_mut() {
            tracer.call_started(key, None, PRIORITY_NAMES[priority as usize], counted, now);
        }
        if self.busy < self.p.workers {
            self.start(now, key, scheduler);
        } else if self.queue.len() < self.p.queue_capacity as usize {
            self.queue.push_back(key);
            if let Some(tracer) = self.tracer.as_deref_mut() {
                tracer.wait_starts(key, now, "queue", "pool");
            }
        } else {
            if counted {
                self.results.queue_full += 1;
                self.endings.record(self.latencies, now, Ending::Failed, 0);
            }
            if let Some(tracer) = self.tracer.as_deref_mut() {
                tracer.refusal(key, now, "queue_full", "pool");
                tracer.call_ended(key, now, "queue_full");
            }
            self.finish_request(key);
        }
        debug_assert!(self.queue.len() <= self.p.queue_capacity as usize);
    }

    fn finish(&mut self, now: Nanos, events: u64) -> (DependencyResults, DependencySeries) {
        self.advance(now);
        let window_ns = now.saturating_sub(self.p.warmup) as f64;
        let r = &mut self.results;
        r.events = events;
        for (goodput, served) in r.goodput_rps.iter_mut().zip(r.served) {
            *goodput = served as f64 / (window_ns / NANOS_PER_SEC as f64);
        }
        r.pool_saturation_ratio = self.busy_window_area as f64 / (window_ns * self.p.workers as f64);
        r.breaker_trips = self.breaker.as_ref().map_or(0, |b| b.counters().trips);
        // A slowdown that starts after the horizon never happened in this run.
        let fault = [(self.p.slow_start, self.p.slow_start.saturating_add(self.p.slow_duration))];
        let faults: &[(Nanos, Nanos)] = if self.p.slow_start < now { &fault } else { &[] };
        let recovery = crate::measurement::recovery::recovery_time(
            &self.series.queued_area,
            self.p.bucket,
            self.p.warmup,
            faults,
            self.p.recovery_hold,
        );
        r.recovered = recovery.is_some();
        r.recovery_s = recovery.map_or(f64::NAN, |ns| ns as f64 / NANOS_PER_SEC as f64);
        self.series.latency = self.endings.take_windows();
        (*r, std::mem::take(&mut self.series))
    }
}

impl Model for Dependency<'_> {
    type Event = Event;

    fn handle(&mut self, now: Nanos, event: Event, scheduler: &mut Scheduler<Event>) {
        self.advance(now);
        match event {
            Event::Arrival => self.arrival(now, scheduler),
            Event::CallDone { request } => self.call_done(now, request, scheduler),
        }
    }
}

/// A distribution's median, in seconds (a table's 0.5 quantile; the parametric
/// shapes' closed forms where they exist, else the mean).
fn median_s(distribution: &Distribution) -> f64 {
    let raw = match &distribution.shape {
        Shape::Table(table) => table.quantile(0.5),
        Shape::Lognormal { mu, .. } => mu.exp(),
        Shape::Exponential { mean_s } => mean_s * std::f64::consts::LN_2,
        Shape::Weibull { shape, scale_s } => scale_s * std::f64::consts::LN_2.powf(1.0 / shape),
        Shape::Constant { value_s } => *value_s,
        _ => return distribution.mean_s(),
    };
    distribution.shift_s + distribution.scale * raw
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::time::secs_to_nanos;
    use crate::policy::breaker::SlidingWindow;

    const MS: Nanos = 1_000_000;

    fn base() -> DependencyParams {
        DependencyParams {
            arrival_rate_per_s: 400.0,
            load: None,
            latency: None,
            priority_shares: [0.2, 0.5, 0.3],
            workers: 50,
            queue_capacity: 200,
            client_timeout: secs_to_nanos(4.0),
            local_work: 2 * MS,
            healthy_latency: 15 * MS,
            slow_latency: 2_500 * MS,
            slow_start: secs_to_nanos(5.0),
            slow_duration: secs_to_nanos(5.0),
            call_timeout: secs_to_nanos(3.0),
            breaker: None,
            shedder: None,
            warmup: secs_to_nanos(1.0),
            horizon: secs_to_nanos(20.0),
            bucket: 10 * MS,
            recovery_hold: 200 * MS,
        }
    }

    fn breaker() -> BreakerConfig {
        BreakerConfig {
            window: SlidingWindow::Time { window: secs_to_nanos(1.0), buckets: 10 },
            minimum_calls: 20,
            failure_rate_threshold: 0.5,
            slow_call_rate_threshold: 0.5,
            slow_call_duration: 500 * MS,
            open_duration: secs_to_nanos(1.0),
            max_open_duration: secs_to_nanos(1.0),
            half_open_probes: 3,
            ..BreakerConfig::default()
        }
    }

    fn run(p: DependencyParams) -> DependencyResults {
        let mut histogram = LatencyHistogram::new();
        Dependency::new(p, 5, 0, std::slice::from_mut(&mut histogram)).run().0
    }

    #[test]
    fn healthy_dependency_serves_everything_with_a_lightly_loaded_pool() {
        let r = run(DependencyParams { slow_start: secs_to_nanos(100.0), ..base() });
        let served: u64 = r.served.iter().sum();
        assert!(served as f64 > 0.995 * r.offered as f64, "only the requests in flight at the horizon are missing");
        // Little's law for the pool: busy workers ≈ λ × (local work + ~15.5 ms lognormal mean).
        let expected = 400.0 * (0.002 + 0.015 * (0.25f64 * 0.25 / 2.0).exp()) / 50.0;
        assert!((r.pool_saturation_ratio / expected - 1.0).abs() < 0.03, "{} vs {expected}", r.pool_saturation_ratio);
        assert!(r.recovered && r.recovery_s == 0.0);
    }

    #[test]
    fn an_unprotected_pool_saturates_and_every_priority_suffers() {
        let r = run(base());
        assert!(r.pool_saturation_ratio > 0.25, "{}", r.pool_saturation_ratio);
        assert!(r.call_timeouts + r.client_timeouts + r.queue_full > 1_000);
        let healthy = run(DependencyParams { slow_start: secs_to_nanos(100.0), ..base() });
        for p in 0..3 {
            assert!(r.served[p] * 10 < healthy.served[p] * 8, "priority {p} loses over 20%");
        }
    }

    #[test]
    fn the_breaker_serves_fallbacks_fast_and_the_shedder_protects_high_priority() {
        let none = run(base());
        let with_breaker = run(DependencyParams { breaker: Some(breaker()), ..base() });
        assert!(with_breaker.breaker_trips > 0 && with_breaker.fallbacks > none.fallbacks);
        assert!(with_breaker.pool_saturation_ratio < none.pool_saturation_ratio * 0.7);
        let shed = run(DependencyParams { shedder: Some(ShedMarks([1.0, 0.9, 0.9, 0.75])), ..base() });
        assert!(shed.shed > 0);
        // HIGH keeps more of its goodput than LOW under the shedder.
        let healthy = run(DependencyParams { slow_start: secs_to_nanos(100.0), ..base() });
        let kept = |r: &DependencyResults, p: usize| r.served[p] as f64 / healthy.served[p] as f64;
        assert!(kept(&shed, 0) > kept(&shed, 2), "high {} vs low {}", kept(&shed, 0), kept(&shed, 2));
        assert!(with_breaker.recovered, "recovers after the dependency heals");
    }

    /// With both policies on and without, the trace tiles every request and adds up to the
    /// results; tracing changes nothing.
    #[test]
    fn a_trace_tiles_every_request_and_adds_up_to_the_results() {
        for (breaker, shedder) in [(None, None), (Some(breaker()), Some(ShedMarks::default()))] {
            let unprotected = breaker.is_none();
            let p = DependencyParams { breaker, shedder, ..base() };
            let mut histogram = LatencyHistogram::new();
            let (results, series, trace) =
                Dependency::new(p.clone(), 3, 0, std::slice::from_mut(&mut histogram)).traced().run_traced();
            let trace = trace.expect("traced");
            assert_eq!((results, series), run_both(p));
            trace.check_tiling().unwrap();
            let count = |kind: TraceKind, outcome: &str| {
                trace
                    .rows
                    .iter()
                    .filter(|r| r.kind == kind && r.counted && (outcome.is_empty() || r.outcome == outcome))
                    .count() as u64
            };
            assert_eq!(count(TraceKind::Call, ""), results.offered);
            assert_eq!(count(TraceKind::Call, "served"), results.served.iter().sum::<u64>());
            assert_eq!(count(TraceKind::Call, "client_timeout"), results.client_timeouts);
            assert_eq!(count(TraceKind::Attempt, "timeout"), results.call_timeouts);
            assert_eq!(count(TraceKind::Refusal, "shed"), results.shed);
            assert_eq!(count(TraceKind::Refusal, "breaker_open"), results.breaker_refusals);
            assert_eq!(count(TraceKind::Refusal, "queue_full"), results.queue_full);
            // Unprotected, the pool saturates and requests queue; protected, refusals happen.
            let (waits, refusals) = (count(TraceKind::Wait, "queue"), count(TraceKind::Refusal, ""));
            assert!(if unprotected { waits > 0 } else { refusals > 0 }, "{waits} waits, {refusals} refusals");
        }
    }

    fn run_both(p: DependencyParams) -> (DependencyResults, DependencySeries) {
        let mut histogram = LatencyHistogram::new();
        Dependency::new(p, 3, 0, std::slice::from_mut(&mut histogram)).run()
    }
}
