//! M/G/1: Poisson arrivals, one FIFO server, service times from a general
//! distribution given by its mean and squared coefficient of variation c² —
//! deterministic (c² = 0), exponential (c² = 1), lognormal (any c²), or a balanced
//! two-phase hyper-exponential (c² ≥ 1).
//!
//! The Pollaczek–Khinchine formula gives its mean wait exactly,
//! Wq = λ·E[S²] / (2(1 − ρ)) with E[S²] = E[S]²(1 + c²): at the same load ρ, the
//! wait grows linearly with the service time's variance. The tests check that
//! within the replicas' confidence interval, for each distribution.
//!
//! Common random numbers: customer `n` of replica `r` arrives at the same instant
//! under every distribution; its service draw comes from its own stream.
//!
//! Warm-up deletion: time averages integrate over `[warmup, horizon]`; per-customer
//! statistics count customers that arrived at or after `warmup`.
//!
//! Invariants (asserted on every transition): a customer waits only while the server
//! is busy; the server is busy exactly while someone is in service.

use std::collections::VecDeque;

use crate::components::arrivals::{ArrivalProcess, Arrivals};
use crate::components::distribution::{Distribution, Shape};
use crate::kernel::histogram::LatencyHistogram;
use crate::kernel::rng::{RngStream, StreamPurpose};
use crate::kernel::sim::{Model, Scheduler, Simulation};
use crate::kernel::time::round_to_nanos;
use crate::kernel::time::{Nanos, NANOS_PER_SEC};

/// Stream of inter-arrival times.
pub const ARRIVALS: StreamPurpose = StreamPurpose::named("mg1.arrivals");
/// Stream of service times.
pub const SERVICE: StreamPurpose = StreamPurpose::named("mg1.service");

stampede_kernel::named_enum! {
    /// The shape of the service-time distribution.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum ServiceShape {
        /// Every service takes the mean: c² = 0.
        Deterministic = "deterministic",
        /// c² = 1.
        Exponential = "exponential",
        /// exp(N(μ, σ²)) with σ² = ln(1 + c²) and μ = ln(mean) − σ²/2.
        Lognormal = "lognormal",
        /// Two exponential phases with balanced means (p₁/μ₁ = p₂/μ₂): c² ≥ 1.
        HyperExponential = "hyperexponential",
    }
}

/// A service-time distribution.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ServiceDistribution {
    /// Which family.
    pub shape: ServiceShape,
    /// E[S], seconds.
    pub mean_s: f64,
    /// Var[S] / E[S]²; fixed by the shape for deterministic (0) and exponential (1).
    pub scv: f64,
}

impl ServiceDistribution {
    /// The squared coefficient of variation this distribution actually has.
    pub fn effective_scv(&self) -> f64 {
        match self.shape {
            ServiceShape::Deterministic => 0.0,
            ServiceShape::Exponential => 1.0,
            ServiceShape::Lognormal | ServiceShape::HyperExponential => self.scv,
        }
    }

    /// E[S²] in seconds².
    pub fn second_moment_s2(&self) -> f64 {
        self.mean_s * self.mean_s * (1.0 + self.effective_scv())
    }

    /// The same distribution as the engine's shared [`Distribution`], draw for draw
    /// (the arithmetic the model used before it existed).
    pub fn to_distribution(&self) -> Distribution {
        match self.shape {
            ServiceShape::Deterministic => Distribution::new(Shape::Constant { value_s: self.mean_s }),
            ServiceShape::Exponential => Distribution::new(Shape::Exponential { mean_s: self.mean_s }),
            ServiceShape::Lognormal => Distribution::lognormal_mean_scv(self.mean_s, self.scv),
            ServiceShape::HyperExponential => Distribution::hyperexponential_mean_scv(self.mean_s, self.scv),
        }
    }
}

/// Parameters of one M/G/1 replica.
#[derive(Clone, Debug, PartialEq)]
pub struct Mg1Params {
    /// When customers arrive: Poisson at λ per second (`Poisson(RateProfile::constant(λ))`),
    /// or any rate profile, even spacing or a replayed trace.
    pub arrivals: ArrivalProcess,
    /// Any service-time distribution: a parametric shape or a table from data.
    pub service: Distribution,
    /// Statistics ignore everything before this instant.
    pub warmup: Nanos,
    /// The replica ends here.
    pub horizon: Nanos,
}

/// What one replica measured (after warm-up).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Mg1Results {
    /// Mean wait in queue of customers that started service (Wq).
    pub wait_mean_s: f64,
    /// Mean time in system of customers that completed (W).
    pub response_mean_s: f64,
    /// Time-average fraction of time the server was busy (ρ).
    pub utilization_ratio: f64,
    /// Time-average number waiting (Lq).
    pub queue_length_mean: f64,
    /// Completions per second.
    pub throughput_rps: f64,
    /// Events handled over the whole replica, warm-up included.
    pub events: u64,
}

/// Events of the M/G/1 model.
#[derive(Clone, Copy, Debug)]
pub enum Mg1Event {
    /// The next customer arrives.
    Arrival,
    /// The customer in service, who arrived at `arrived_at`, leaves.
    Departure {
        /// When the customer arrived.
        arrived_at: Nanos,
    },
}

/// The M/G/1 model state.
pub struct Mg1<'h> {
    params: Mg1Params,
    arrival_stream: Arrivals,
    arrivals: RngStream,
    service: RngStream,
    busy: bool,
    /// (arrived at, service time) of each waiting customer, oldest first.
    waiting: VecDeque<(Nanos, Nanos)>,
    last_change: Nanos,
    busy_area: u128,
    waiting_area: u128,
    started: u64,
    wait_total: u128,
    completed: u64,
    response_total: u128,
    completions_in_window: u64,
    response_histogram: &'h mut LatencyHistogram,
}

fn nanos(seconds: f64) -> Nanos {
    round_to_nanos(seconds * NANOS_PER_SEC as f64)
}

impl<'h> Mg1<'h> {
    /// A model for replica `replica` of a run seeded `master_seed`.
    pub fn new(
        params: Mg1Params,
        master_seed: u64,
        replica: u64,
        response_histogram: &'h mut LatencyHistogram,
    ) -> Self {
        assert!(params.service.mean_s() > 0.0);
        assert!(params.warmup <= params.horizon, "warm-up past the horizon");
        Mg1 {
            arrival_stream: Arrivals::new(params.arrivals.clone()),
            params,
            arrivals: RngStream::derive(master_seed, replica, ARRIVALS),
            service: RngStream::derive(master_seed, replica, SERVICE),
            busy: false,
            waiting: VecDeque::with_capacity(4096),
            last_change: 0,
            busy_area: 0,
            waiting_area: 0,
            started: 0,
            wait_total: 0,
            completed: 0,
            response_total: 0,
            completions_in_window: 0,
            response_histogram,
        }
    }

    /// Runs one replica to its horizon.
    pub fn run(self) -> Mg1Results {
        let horizon = self.params.horizon;
        let mut simulation = self.into_simulation();
        simulation.run_until(horizon);
        let events = simulation.events_handled();
        simulation.model.finish(horizon, events)
    }

    /// The model inside a kernel with its first arrival scheduled.
    pub fn into_simulation(mut self) -> Simulation<Self> {
        let first = self.arrival_stream.next_gap(0, 1.0, &mut self.arrivals);
        let mut simulation = Simulation::new(self, 64);
        if let Some(first) = first {
            simulation.scheduler().at(first, Mg1Event::Arrival);
        }
        simulation
    }

    /// Closes the time integrals at `now` and computes the results.
    pub fn finish(&mut self, now: Nanos, events: u64) -> Mg1Results {
        self.advance_integrals(now);
        let window_ns = now.saturating_sub(self.params.warmup) as f64;
        let per_window = |x: f64| if window_ns > 0.0 { x / window_ns } else { 0.0 };
        let mean_s = |total: u128, n: u64| if n == 0 { 0.0 } else { total as f64 / n as f64 / NANOS_PER_SEC as f64 };
        Mg1Results {
            wait_mean_s: mean_s(self.wait_total, self.started),
            response_mean_s: mean_s(self.response_total, self.completed),
            utilization_ratio: per_window(self.busy_area as f64),
            queue_length_mean: per_window(self.waiting_area as f64),
            throughput_rps: per_window(self.completions_in_window as f64 * NANOS_PER_SEC as f64),
            events,
        }
    }

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
    fn start_service(&mut self, now: Nanos, arrived_at: Nanos, service: Nanos, scheduler: &mut Scheduler<Mg1Event>) {
        if arrived_at >= self.params.warmup {
            self.started += 1;
            self.wait_total += (now - arrived_at) as u128;
        }
        scheduler.after(service, Mg1Event::Departure { arrived_at });
    }
}

impl Model for Mg1<'_> {
    type Event = Mg1Event;

    #[inline]
    fn handle(&mut self, now: Nanos, event: Mg1Event, scheduler: &mut Scheduler<Mg1Event>) {
        self.advance_integrals(now);
        match event {
            Mg1Event::Arrival => {
                if let Some(gap) = self.arrival_stream.next_gap(now, 1.0, &mut self.arrivals) {
                    scheduler.after(gap, Mg1Event::Arrival);
                }
                let service = nanos(self.params.service.sample_s(&mut self.service));
                if self.busy {
                    self.waiting.push_back((now, service));
                } else {
                    self.busy = true;
                    self.start_service(now, now, service, scheduler);
                }
            }
            Mg1Event::Departure { arrived_at } => {
                if arrived_at >= self.params.warmup {
                    let response = now - arrived_at;
                    self.completed += 1;
                    self.response_total += response as u128;
                    self.response_histogram.record(response);
                }
                self.completions_in_window += (now >= self.params.warmup) as u64;
                match self.waiting.pop_front() {
                    Some((arrived, service)) => self.start_service(now, arrived, service, scheduler),
                    None => self.busy = false,
                }
            }
        }
        debug_assert!(self.busy || self.waiting.is_empty(), "a customer waits beside an idle server");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::components::arrivals::RateProfile;
    use crate::kernel::time::secs_to_nanos;
    use crate::measurement::theory::pollaczek_khinchine_wait;

    fn params(shape: ServiceShape, scv: f64) -> Mg1Params {
        Mg1Params {
            arrivals: ArrivalProcess::Poisson(RateProfile::constant(0.7)),
            service: ServiceDistribution { shape, mean_s: 1.0, scv }.to_distribution(),
            warmup: secs_to_nanos(2_000.0),
            horizon: secs_to_nanos(40_000.0),
        }
    }

    /// Mean and 99.9% half-width over replicas of the mean wait.
    fn wait(params: Mg1Params, replicas: u64) -> (f64, f64) {
        let mut histogram = LatencyHistogram::new();
        let waits: Vec<f64> =
            (0..replicas).map(|r| Mg1::new(params.clone(), 11, r, &mut histogram).run().wait_mean_s).collect();
        let n = waits.len() as f64;
        let mean = waits.iter().sum::<f64>() / n;
        let var = waits.iter().map(|w| (w - mean).powi(2)).sum::<f64>() / (n - 1.0);
        (mean, 3.29 * (var / n).sqrt())
    }

    /// Pollaczek–Khinchine, distribution by distribution, within the replicas' 99.9%
    /// interval — and that interval is narrow enough to tell the shapes apart. Four
    /// shapes at 99% failed one seed in 25 by chance (the ziggurat's new draws met one:
    /// Wq 2.384 ± 0.042 over 40 replicas, 2.334 ± 0.003 over 2,000); 160 replicas at
    /// 99.9% keep the interval as narrow and the chance failure 40 times rarer.
    #[test]
    fn the_mean_wait_follows_pollaczek_khinchine() {
        for (shape, scv) in [
            (ServiceShape::Deterministic, 0.0),
            (ServiceShape::Exponential, 1.0),
            (ServiceShape::Lognormal, 2.0),
            (ServiceShape::HyperExponential, 4.0),
        ] {
            let p = params(shape, scv);
            let scv = ServiceDistribution { shape, mean_s: 1.0, scv }.effective_scv();
            let expected = pollaczek_khinchine_wait(0.7, 1.0, scv).unwrap();
            let (mean, half) = wait(p, 160);
            assert!((mean - expected).abs() <= half, "{shape:?}: Wq {mean:.3} ± {half:.3}, P-K says {expected:.3}");
            assert!(half < 0.1 * expected, "{shape:?}: the interval ±{half:.3} is too wide to test anything");
        }
    }

    /// A service time from data (a table built from 2,000 gamma draws with scv 2.5):
    /// the mean wait is Pollaczek–Khinchine's for the table's own first two moments.
    #[test]
    fn a_table_service_time_follows_pollaczek_khinchine_for_its_own_moments() {
        use crate::components::distribution::QuantileTable;
        let gamma = Distribution::gamma_mean_scv(1.0, 2.5);
        let mut rng = RngStream::derive(99, 0, SERVICE);
        let sample: Vec<f64> = (0..2000).map(|_| gamma.sample_s(&mut rng)).collect();
        let table = Distribution::new(Shape::Table(std::sync::Arc::new(QuantileTable::from_sample(&sample).unwrap())));
        let (mean_s, scv) = (table.mean_s(), table.scv());
        let rate = 0.7 / mean_s;
        let p = Mg1Params {
            arrivals: ArrivalProcess::Poisson(RateProfile::constant(rate)),
            service: table,
            ..params(ServiceShape::Exponential, 1.0)
        };
        let expected = pollaczek_khinchine_wait(rate, mean_s, scv).unwrap();
        let (mean, half) = wait(p, 160);
        assert!((mean - expected).abs() <= half, "table: Wq {mean:.3} ± {half:.3}, P-K says {expected:.3}");
        assert!(half < 0.1 * expected, "the interval ±{half:.3} is too wide to test anything");
        // The exponential's P-K value differs by more than the interval: the test can fail.
        let exponential = pollaczek_khinchine_wait(rate, mean_s, 1.0).unwrap();
        assert!((exponential - expected).abs() > 3.0 * half, "{exponential} vs {expected}");
    }

    /// The samplers have the mean and variance they claim (the premise of the test above).
    #[test]
    fn service_samplers_have_their_mean_and_scv() {
        for (shape, scv) in [(ServiceShape::Lognormal, 2.0), (ServiceShape::HyperExponential, 4.0)] {
            let d = ServiceDistribution { shape, mean_s: 0.5, scv }.to_distribution();
            let mut rng = RngStream::derive(3, 0, SERVICE);
            let n = 400_000;
            let xs: Vec<f64> = (0..n).map(|_| d.sample_s(&mut rng)).collect();
            let mean = xs.iter().sum::<f64>() / n as f64;
            let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64;
            assert!((mean - 0.5).abs() < 0.01, "{shape:?} mean {mean}");
            assert!((var / (mean * mean) - scv).abs() < 0.15 * scv, "{shape:?} scv {}", var / (mean * mean));
        }
    }

    #[test]
    fn utilisation_is_the_load_and_littles_law_holds() {
        let mut histogram = LatencyHistogram::new();
        let r = Mg1::new(params(ServiceShape::Lognormal, 2.0), 5, 0, &mut histogram).run();
        assert!((r.utilization_ratio - 0.7).abs() < 0.02, "ρ = {}", r.utilization_ratio);
        // Lq = λ·Wq (Little), on one long replica.
        assert!((r.queue_length_mean - r.throughput_rps * r.wait_mean_s).abs() < 0.05 * r.queue_length_mean);
    }
}
