//! M/M/c and M/M/c/K: Poisson arrivals, exponential service, `c` FIFO servers and an
//! optional limit on customers in the system.
//!
//! The simplest model whose answers theory knows exactly; it validates the whole
//! pipeline (kernel, streams, runner, statistics, output) against Erlang C.
//!
//! Common random numbers: customer `n` of replica `r` arrives at the same instant and
//! brings the same service demand under every parameter set, because inter-arrival
//! times and service demands come from two streams drawn in arrival order (a refused
//! customer still consumes its service draw).
//!
//! Warm-up deletion: time-weighted statistics integrate over `[warmup, horizon]`;
//! per-customer statistics count customers that arrived at or after `warmup`.
//!
//! Invariants (asserted on every transition): `busy ≤ servers`; a customer waits only
//! while every server is busy; customers in the system never exceed the capacity.

use std::collections::VecDeque;

use crate::components::arrivals::{ArrivalProcess, Arrivals};
use crate::kernel::histogram::LatencyHistogram;
use crate::kernel::rng::{RngStream, StreamPurpose};
use crate::kernel::sim::{Model, Scheduler, Simulation};
use crate::kernel::splitting::Forkable;
use crate::kernel::time::round_to_nanos;
use crate::kernel::time::{nanos_to_secs, Nanos, NANOS_PER_SEC};

/// Stream of inter-arrival times.
pub const ARRIVALS: StreamPurpose = StreamPurpose::named("mmc.arrivals");
/// Stream of service demands.
pub const SERVICE: StreamPurpose = StreamPurpose::named("mmc.service");

/// Parameters of one M/M/c(/K) replica.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MmcParams {
    /// λ, arrivals per second.
    pub arrival_rate_per_s: f64,
    /// μ, completions per second per busy server.
    pub service_rate_per_s: f64,
    /// c.
    pub servers: u32,
    /// K, the most customers in the system (waiting plus in service); `None` = unbounded.
    pub capacity: Option<u32>,
    /// Statistics ignore everything before this instant.
    pub warmup: Nanos,
    /// The replica ends here.
    pub horizon: Nanos,
}

/// What one replica measured (after warm-up).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct MmcResults {
    /// Mean wait in queue of customers that started service.
    pub wait_mean_s: f64,
    /// Mean time in system of customers that completed.
    pub response_mean_s: f64,
    /// Fraction of customers that started service after a non-zero wait.
    pub wait_probability_ratio: f64,
    /// Time-average fraction of servers busy.
    pub utilization_ratio: f64,
    /// Time-average number of customers waiting (Lq).
    pub queue_length_mean: f64,
    /// Time-average number of customers in the system (L).
    pub in_system_mean: f64,
    /// Completions per second.
    pub throughput_rps: f64,
    /// Fraction of arrivals refused because the system was full.
    pub rejected_ratio: f64,
    /// Arrivals refused because the system was full (after warm-up): each learned it
    /// at once, so its latency is 0.
    pub rejected: u64,
    /// Events handled over the whole replica, warm-up included.
    pub events: u64,
}

/// Events of the M/M/c model: 16 bytes.
#[derive(Clone, Copy, Debug)]
pub enum MmcEvent {
    /// The next customer arrives.
    Arrival,
    /// A service ends; the customer had arrived at `arrived_at`.
    Departure {
        /// When the customer arrived.
        arrived_at: Nanos,
    },
}

#[derive(Clone, Copy, Debug)]
struct Waiting {
    arrived_at: Nanos,
    service: Nanos,
}

/// The M/M/c(/K) model state.
pub struct Mmc<'h> {
    params: MmcParams,
    /// 10^9 / λ and 10^9 / μ: a draw is one multiply of a unit exponential.
    mean_interarrival_ns: f64,
    mean_service_ns: f64,
    arrivals: RngStream,
    /// Arrivals from a `[load]` profile or trace instead of Poisson at λ.
    load: Option<Arrivals>,
    service: RngStream,
    busy: u32,
    waiting: VecDeque<Waiting>,
    // Time integrals over [warmup, horizon], exact in integer nanoseconds.
    last_change: Nanos,
    busy_area: u128,
    waiting_area: u128,
    // Per-customer counters, for customers arriving at or after warmup.
    arrivals_counted: u64,
    rejected: u64,
    // Every rejection since time zero, warm-up or not: what `stampede rare` observes.
    rejected_since_start: u64,
    started: u64,
    started_after_wait: u64,
    wait_total: u128,
    completed: u64,
    response_total: u128,
    // Departures at or after warmup, whoever they were.
    completions_in_window: u64,
    response_histogram: &'h mut LatencyHistogram,
}

impl<'h> Mmc<'h> {
    /// A model for replica `replica` of a run seeded `master_seed`, recording
    /// response times into `response_histogram`.
    pub fn new(
        params: MmcParams,
        master_seed: u64,
        replica: u64,
        response_histogram: &'h mut LatencyHistogram,
    ) -> Self {
        assert!(params.servers >= 1, "servers must be at least 1");
        assert!(params.capacity.is_none_or(|k| k >= params.servers), "capacity below servers");
        assert!(params.warmup <= params.horizon, "warm-up past the horizon");
        // Reserve for a queue far longer than any stable run reaches, so that the
        // warmed-up replica does not allocate.
        let reserve = params.capacity.map_or(4096, |k| (k - params.servers) as usize + 1);
        Mmc {
            mean_interarrival_ns: NANOS_PER_SEC as f64 / params.arrival_rate_per_s,
            mean_service_ns: NANOS_PER_SEC as f64 / params.service_rate_per_s,
            params,
            arrivals: RngStream::derive(master_seed, replica, ARRIVALS),
            load: None,
            service: RngStream::derive(master_seed, replica, SERVICE),
            busy: 0,
            waiting: VecDeque::with_capacity(reserve),
            last_change: 0,
            busy_area: 0,
            waiting_area: 0,
            arrivals_counted: 0,
            rejected: 0,
            rejected_since_start: 0,
            started: 0,
            started_after_wait: 0,
            wait_total: 0,
            completed: 0,
            response_total: 0,
            completions_in_window: 0,
            response_histogram,
        }
    }

    /// Runs one replica to its horizon and returns its measurements.
    pub fn run(self) -> MmcResults {
        let horizon = self.params.horizon;
        let mut simulation = self.into_simulation();
        simulation.run_until(horizon);
        let events = simulation.events_handled();
        simulation.model.finish(horizon, events)
    }

    /// Customers arrive as `load` says (a rate profile, even spacing or a trace)
    /// instead of as a Poisson stream at `arrival_rate_per_s`.
    pub fn with_load(mut self, load: ArrivalProcess) -> Self {
        self.load = Some(Arrivals::new(load));
        self
    }

    /// The model inside a kernel with its first arrival scheduled; for callers that
    /// drive the run themselves (benchmarks, the allocation test).
    pub fn into_simulation(mut self) -> Simulation<Self> {
        let first = self.interarrival(0);
        let mut simulation = Simulation::new(self, 64);
        if let Some(first) = first {
            simulation.scheduler().at(first, MmcEvent::Arrival);
        }
        simulation
    }

    /// Customers in the system now (waiting and in service).
    pub fn in_system(&self) -> u64 {
        u64::from(self.busy) + self.waiting.len() as u64
    }

    /// Customers turned away at the capacity since time zero, warm-up included.
    pub fn rejected_since_start(&self) -> u64 {
        self.rejected_since_start
    }

    /// Customers waiting now.
    pub fn waiting(&self) -> u64 {
        self.waiting.len() as u64
    }

    /// Servers busy now.
    pub fn busy(&self) -> u32 {
        self.busy
    }

    /// Closes the time integrals at `now` and computes the results.
    pub fn finish(&mut self, now: Nanos, events: u64) -> MmcResults {
        self.advance_integrals(now);
        let window = nanos_to_secs(now.saturating_sub(self.params.warmup));
        let window_ns = (now.saturating_sub(self.params.warmup)) as f64;
        let ratio = |part: u64, whole: u64| {
            if whole == 0 {
                0.0
            } else {
                part as f64 / whole as f64
            }
        };
        let mean_s = |total: u128, n: u64| {
            if n == 0 {
                0.0
            } else {
                total as f64 / n as f64 / NANOS_PER_SEC as f64
            }
        };
        let time_average = |area: u128| {
            if window_ns > 0.0 {
                area as f64 / window_ns
            } else {
                0.0
            }
        };
        let queue_length_mean = time_average(self.waiting_area);
        let busy_mean = time_average(self.busy_area);
        MmcResults {
            wait_mean_s: mean_s(self.wait_total, self.started),
            response_mean_s: mean_s(self.response_total, self.completed),
            wait_probability_ratio: ratio(self.started_after_wait, self.started),
            utilization_ratio: busy_mean / self.params.servers as f64,
            queue_length_mean,
            in_system_mean: queue_length_mean + busy_mean,
            throughput_rps: if window > 0.0 { self.completions_in_window as f64 / window } else { 0.0 },
            rejected_ratio: ratio(self.rejected, self.arrivals_counted),
            rejected: self.rejected,
            events,
        }
    }

    /// The gap from `now` to the next arrival (`None`: a trace replayed to its end).
    #[inline]
    fn interarrival(&mut self, now: Nanos) -> Option<Nanos> {
        if let Some(load) = &mut self.load {
            return load.next_gap(now, 1.0, &mut self.arrivals);
        }
        Some(round_to_nanos(self.arrivals.standard_exponential() * self.mean_interarrival_ns))
    }

    fn service_demand(&mut self) -> Nanos {
        round_to_nanos(self.service.standard_exponential() * self.mean_service_ns)
    }

    /// Adds the state held since the last change to the integrals (warm-up excluded).
    #[inline]
    fn advance_integrals(&mut self, now: Nanos) {
        let from = self.last_change.max(self.params.warmup);
        if now > from {
            let dwell = (now - from) as u128;
            self.busy_area += self.busy as u128 * dwell;
            self.waiting_area += self.waiting.len() as u128 * dwell;
        }
        self.last_change = now;
    }

    #[inline]
    fn start_service(&mut self, now: Nanos, arrived_at: Nanos, service: Nanos, scheduler: &mut Scheduler<MmcEvent>) {
        if arrived_at >= self.params.warmup {
            let wait = now - arrived_at;
            self.started += 1;
            self.started_after_wait += (wait > 0) as u64;
            self.wait_total += wait as u128;
        }
        scheduler.after(service, MmcEvent::Departure { arrived_at });
    }

    #[inline]
    fn check_invariants(&self) {
        debug_assert!(self.busy <= self.params.servers, "more busy servers than servers");
        debug_assert!(
            self.waiting.is_empty() || self.busy == self.params.servers,
            "a customer waits beside an idle server"
        );
        debug_assert!(
            self.params.capacity.is_none_or(|k| self.busy as usize + self.waiting.len() <= k as usize),
            "capacity exceeded"
        );
    }
}

impl Forkable for Mmc<'_> {
    fn fork_streams(&mut self, salt: u64) {
        self.arrivals.fork(salt);
        self.service.fork(salt ^ 1);
    }
}

impl Model for Mmc<'_> {
    type Event = MmcEvent;

    #[inline]
    fn handle(&mut self, now: Nanos, event: MmcEvent, scheduler: &mut Scheduler<MmcEvent>) {
        self.advance_integrals(now);
        match event {
            MmcEvent::Arrival => {
                if let Some(next) = self.interarrival(now) {
                    scheduler.after(next, MmcEvent::Arrival);
                }
                let service = self.service_demand();
                let counted = now >= self.params.warmup;
                self.arrivals_counted += counted as u64;
                let in_system = self.busy + self.waiting.len() as u32;
                if self.params.capacity.is_some_and(|k| in_system >= k) {
                    self.rejected += counted as u64;
                    self.rejected_since_start += 1;
                } else if self.busy < self.params.servers {
                    self.busy += 1;
                    self.start_service(now, now, service, scheduler);
                } else {
                    self.waiting.push_back(Waiting { arrived_at: now, service });
                }
            }
            MmcEvent::Departure { arrived_at } => {
                if arrived_at >= self.params.warmup {
                    let response = now - arrived_at;
                    self.completed += 1;
                    self.response_total += response as u128;
                    self.response_histogram.record(response);
                }
                self.completions_in_window += (now >= self.params.warmup) as u64;
                match self.waiting.pop_front() {
                    Some(next) => self.start_service(now, next.arrived_at, next.service, scheduler),
                    None => self.busy -= 1,
                }
            }
        }
        self.check_invariants();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::time::secs_to_nanos;
    use crate::measurement::theory::{erlang_c, mmck, QueueMeasures};

    /// Mean and standard error over replicas of each measure.
    fn simulate(params: MmcParams, replicas: u64) -> Vec<(f64, f64)> {
        let mut histogram = LatencyHistogram::new();
        let runs: Vec<MmcResults> = (0..replicas).map(|r| Mmc::new(params, 2024, r, &mut histogram).run()).collect();
        let pick: [fn(&MmcResults) -> f64; 8] = [
            |r| r.wait_probability_ratio,
            |r| r.wait_mean_s,
            |r| r.response_mean_s,
            |r| r.queue_length_mean,
            |r| r.in_system_mean,
            |r| r.utilization_ratio,
            |r| r.throughput_rps,
            |r| r.rejected_ratio,
        ];
        pick.iter()
            .map(|f| {
                let xs: Vec<f64> = runs.iter().map(f).collect();
                let n = xs.len() as f64;
                let mean = xs.iter().sum::<f64>() / n;
                let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
                (mean, (var / n).sqrt())
            })
            .collect()
    }

    fn theory_values(m: &QueueMeasures) -> [f64; 8] {
        [
            m.wait_probability,
            m.wait_mean_s,
            m.response_mean_s,
            m.queue_length_mean,
            m.in_system_mean,
            m.utilization,
            m.throughput_rps,
            m.rejected_ratio,
        ]
    }

    const NAMES: [&str; 8] = [
        "wait_probability",
        "wait_mean_s",
        "response_mean_s",
        "queue_length_mean",
        "in_system_mean",
        "utilization",
        "throughput_rps",
        "rejected_ratio",
    ];

    /// Each estimate must sit within 4 standard errors of theory *and* within
    /// `relative` of it (an absolute floor of 0.002 for values near zero). A model
    /// with a wrong server count, service order or warm-up cut misses by far more.
    fn assert_matches(params: MmcParams, replicas: u64, theory: QueueMeasures, relative: f64) {
        let estimates = simulate(params, replicas);
        for ((name, (mean, se)), want) in NAMES.iter().zip(estimates).zip(theory_values(&theory)) {
            let error = (mean - want).abs();
            assert!(
                error <= 4.0 * se + 1e-12 && error <= (relative * want.abs()).max(0.002),
                "{name}: simulated {mean:.5} ± {se:.5}, theory {want:.5} ({params:?})"
            );
        }
    }

    fn params(lambda: f64, mu: f64, servers: u32, capacity: Option<u32>) -> MmcParams {
        // Time scaled so that each replica sees about 200,000 customers.
        let horizon_s = 200_000.0 / lambda;
        MmcParams {
            arrival_rate_per_s: lambda,
            service_rate_per_s: mu,
            servers,
            capacity,
            warmup: secs_to_nanos(horizon_s * 0.05),
            horizon: secs_to_nanos(horizon_s),
        }
    }

    #[test]
    fn mm1_at_half_load_matches_erlang_c() {
        let p = params(500.0, 1000.0, 1, None);
        assert_matches(p, 16, erlang_c(500.0, 1000.0, 1).unwrap(), 0.02);
    }

    #[test]
    fn mm2_at_eighty_percent_matches_erlang_c() {
        let p = params(1600.0, 1000.0, 2, None);
        assert_matches(p, 24, erlang_c(1600.0, 1000.0, 2).unwrap(), 0.03);
    }

    #[test]
    fn mm8_at_ninety_percent_matches_erlang_c() {
        let p = params(7200.0, 1000.0, 8, None);
        assert_matches(p, 24, erlang_c(7200.0, 1000.0, 8).unwrap(), 0.04);
    }

    #[test]
    fn overloaded_mmck_matches_its_formula() {
        // ρ = 1.5 with room for 6: heavy blocking, still a steady state.
        let p = params(3000.0, 500.0, 4, Some(6));
        assert_matches(p, 16, mmck(3000.0, 500.0, 4, 6), 0.02);
    }

    #[test]
    fn erlang_b_loss_system_matches() {
        let p = params(2000.0, 1000.0, 3, Some(3));
        assert_matches(p, 16, mmck(2000.0, 1000.0, 3, 3), 0.02);
    }

    #[test]
    fn littles_law_holds_within_each_replica() {
        let mut histogram = LatencyHistogram::new();
        for (lambda, servers, capacity) in [(1600.0, 2, None), (3000.0, 2, Some(5))] {
            let r = Mmc::new(params(lambda, 1000.0, servers, capacity), 9, 0, &mut histogram).run();
            // L = λ_eff · W and Lq = λ_eff · Wq, measured independently.
            let l = r.throughput_rps * r.response_mean_s;
            let lq = r.throughput_rps * r.wait_mean_s;
            assert!((l - r.in_system_mean).abs() < 0.01 * r.in_system_mean, "L {l} vs {}", r.in_system_mean);
            assert!(
                (lq - r.queue_length_mean).abs() < 0.015 * r.queue_length_mean,
                "Lq {lq} vs {}",
                r.queue_length_mean
            );
        }
    }

    #[test]
    fn same_replica_sees_the_same_arrivals_under_different_server_counts() {
        // Common random numbers: with c = 50 nobody waits, so response = service; the
        // first customers' response times must then be identical for c = 50 and c = 60.
        let mut a = LatencyHistogram::new();
        let mut b = LatencyHistogram::new();
        let base = MmcParams {
            arrival_rate_per_s: 10.0,
            service_rate_per_s: 1.0,
            servers: 50,
            capacity: None,
            warmup: 0,
            horizon: secs_to_nanos(100.0),
        };
        let ra = Mmc::new(base, 5, 3, &mut a).run();
        let rb = Mmc::new(MmcParams { servers: 60, ..base }, 5, 3, &mut b).run();
        assert_eq!(ra.wait_mean_s, 0.0);
        assert_eq!(ra.response_mean_s, rb.response_mean_s);
        assert_eq!(a.hdr(), b.hdr());
    }
}
