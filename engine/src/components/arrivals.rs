//! When open-loop requests arrive: a Poisson process (or evenly spaced arrivals)
//! whose rate follows a [`RateProfile`] — constant, a piecewise schedule (steps or
//! linear ramps), a sine (a daily shape) — times bursts, or a recorded trace replayed.
//!
//! A varying rate is sampled exactly as a non-homogeneous Poisson process, by thinning
//! against a piecewise-constant bound (Lewis & Shedler, 1979): within a piece the
//! candidate gaps are exponential at the bound and a candidate at t is kept with
//! probability rate(t)/bound; a candidate past the piece's end restarts at the end
//! (the exponential forgets). On a step schedule the bound is the rate, so nothing is
//! thinned: it is exact inversion. A constant rate takes one exponential per arrival,
//! with the arithmetic the models used before this component (their goldens hold).
//!
//! Invariants: gaps are non-negative; the profile's rate is never negative and its
//! bound is never below it (asserted in debug builds); a trace's times are sorted.

use std::sync::Arc;

use crate::kernel::rng::RngStream;
use crate::kernel::time::{round_to_nanos, Nanos, NANOS_PER_SEC};

/// The base rate before bursts, arrivals per second.
#[derive(Clone, Debug, PartialEq)]
pub enum RateShape {
    /// The same rate all the time.
    Constant(f64),
    /// (from time s, rate) points, times increasing from 0; before the first point the
    /// first rate, after the last the last. `linear`: ramps between points; else steps.
    Schedule {
        /// (from time s, rate) points.
        points: Arc<[(f64, f64)]>,
        /// Ramp linearly between points; false: step at each.
        linear: bool,
    },
    /// mean + amplitude·sin(2π t / period): amplitude ≤ mean.
    Sine {
        /// The average rate.
        mean: f64,
        /// How far the rate swings above and below the mean.
        amplitude: f64,
        /// The length of one cycle, seconds.
        period_s: f64,
    },
}

/// A window in which the rate is multiplied by `factor`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Burst {
    /// When the burst starts, seconds.
    pub at_s: f64,
    /// How long it lasts, seconds.
    pub duration_s: f64,
    /// What it multiplies the rate by.
    pub factor: f64,
}

/// The rate over time: a shape times the bursts active at that time.
#[derive(Clone, Debug, PartialEq)]
pub struct RateProfile {
    /// The base rate.
    pub shape: RateShape,
    /// Windows that multiply it.
    pub bursts: Arc<[Burst]>,
}

/// Pieces a sine period is cut into for its thinning bound (at most 1 − cos(π/16) ≈ 2%
/// of candidates are thinned beyond the rate's own variation).
const SINE_PIECES: f64 = 16.0;

impl RateProfile {
    /// `rate` arrivals per second, no bursts.
    pub fn constant(rate: f64) -> Self {
        RateProfile { shape: RateShape::Constant(rate), bursts: Arc::from([]) }
    }

    /// The rate at time `t` (seconds), bursts included.
    pub fn rate(&self, t: f64) -> f64 {
        let base = match &self.shape {
            RateShape::Constant(rate) => *rate,
            RateShape::Schedule { points, linear } => schedule_rate(points, *linear, t),
            RateShape::Sine { mean, amplitude, period_s } => {
                mean + amplitude * (std::f64::consts::TAU * t / period_s).sin()
            }
        };
        base * self.burst_factor(t)
    }

    fn burst_factor(&self, t: f64) -> f64 {
        self.bursts.iter().filter(|b| t >= b.at_s && t < b.at_s + b.duration_s).map(|b| b.factor).product()
    }

    /// An upper bound of the rate from `t` until the returned end (> t, or infinity).
    fn bound(&self, t: f64) -> (f64, f64) {
        let (base, mut until) = match &self.shape {
            RateShape::Constant(rate) => (*rate, f64::INFINITY),
            RateShape::Schedule { points, linear } => {
                // Binary search: a rate file may hold a point a second for days, and this
                // runs for every candidate arrival.
                let after = points.partition_point(|(from, _)| *from <= t);
                let next = (after < points.len()).then_some(after);
                let until = next.map_or(f64::INFINITY, |i| points[i].0);
                let here = schedule_rate(points, *linear, t);
                let bound = match (linear, next) {
                    (true, Some(i)) => here.max(points[i].1),
                    _ => here,
                };
                (bound, until)
            }
            RateShape::Sine { mean, amplitude, period_s } => {
                let piece = period_s / SINE_PIECES;
                let mut start = (t / piece).floor() * piece;
                if start + piece <= t {
                    start += piece; // floor's rounding at a piece's edge
                }
                let end = start + piece;
                // The sine's maximum over [start, end]: an end, or its peak if inside.
                let at = |x: f64| mean + amplitude * (std::f64::consts::TAU * x / period_s).sin();
                let cycles = (start / period_s).floor();
                let peak = (cycles + 0.25) * period_s;
                let peak_next = peak + period_s;
                let inside = (peak >= start && peak <= end) || (peak_next >= start && peak_next <= end);
                let bound = if inside { mean + amplitude } else { at(start).max(at(end)) };
                (bound, end)
            }
        };
        let mut factor = 1.0;
        for burst in self.bursts.iter() {
            let end = burst.at_s + burst.duration_s;
            if t >= burst.at_s && t < end {
                factor *= burst.factor;
                until = until.min(end);
            } else if burst.at_s > t {
                until = until.min(burst.at_s);
            }
        }
        (base * factor, until)
    }

    /// The expected arrivals in [from, to) (seconds): the rate's integral, in closed
    /// form piece by piece (between burst edges; a schedule's points; the sine's
    /// antiderivative).
    pub fn expected_arrivals(&self, from: f64, to: f64) -> f64 {
        let mut edges: Vec<f64> = vec![from, to];
        for burst in self.bursts.iter() {
            edges.extend([burst.at_s, burst.at_s + burst.duration_s].into_iter().filter(|e| *e > from && *e < to));
        }
        edges.sort_by(f64::total_cmp);
        edges.windows(2).map(|w| self.burst_factor(w[0]) * self.base_integral(w[0], w[1])).sum()
    }

    /// ∫ base rate over [a, b).
    fn base_integral(&self, a: f64, b: f64) -> f64 {
        match &self.shape {
            RateShape::Constant(rate) => rate * (b - a),
            RateShape::Sine { mean, amplitude, period_s } => {
                let w = std::f64::consts::TAU / period_s;
                mean * (b - a) + amplitude / w * ((w * a).cos() - (w * b).cos())
            }
            RateShape::Schedule { points, linear } => {
                let mut edges: Vec<f64> = vec![a, b];
                edges.extend(points.iter().map(|(t, _)| *t).filter(|t| *t > a && *t < b));
                edges.sort_by(f64::total_cmp);
                edges
                    .windows(2)
                    .map(|w| {
                        let (x, y) = (w[0], w[1]);
                        if *linear {
                            // Continuous and linear within a piece: the trapezoid is exact.
                            (schedule_rate(points, true, x) + schedule_rate(points, true, y)) / 2.0 * (y - x)
                        } else {
                            schedule_rate(points, false, x) * (y - x)
                        }
                    })
                    .sum()
            }
        }
    }
}

fn schedule_rate(points: &[(f64, f64)], linear: bool, t: f64) -> f64 {
    let after = points.partition_point(|(from, _)| *from <= t);
    if after == 0 {
        return points[0].1;
    }
    let (t0, r0) = points[after - 1];
    match points.get(after) {
        Some(&(t1, r1)) if linear => r0 + (r1 - r0) * (t - t0) / (t1 - t0),
        _ => r0,
    }
}

/// How arrivals are spaced.
#[derive(Clone, Debug, PartialEq)]
pub enum ArrivalProcess {
    /// A (non-homogeneous) Poisson process at the profile's rate.
    Poisson(RateProfile),
    /// One arrival every 1/rate seconds, the rate read at each arrival.
    Even(RateProfile),
    /// A recorded trace: arrival instants (nanoseconds from the start), sorted, and
    /// optionally each arrival's key (for a model whose requests have keys).
    Trace(Arc<[Nanos]>, Option<Arc<[u64]>>),
}

/// A replica's arrival stream: the process and where the replay has got to.
#[derive(Clone, Debug)]
pub struct Arrivals {
    process: ArrivalProcess,
    /// The next trace instant to replay.
    next_in_trace: usize,
}

impl Arrivals {
    /// Arrivals of `process`, starting at time zero.
    pub fn new(process: ArrivalProcess) -> Self {
        if let ArrivalProcess::Trace(times, keys) = &process {
            debug_assert!(times.windows(2).all(|w| w[0] <= w[1]), "a trace is sorted");
            debug_assert!(keys.as_ref().is_none_or(|k| k.len() == times.len()), "a key per instant");
        }
        Arrivals { process, next_in_trace: 0 }
    }

    /// The key recorded with the trace instant replayed last (`None` without keys).
    #[inline]
    pub fn replayed_key(&self) -> Option<u64> {
        match &self.process {
            ArrivalProcess::Trace(_, Some(keys)) => keys.get(self.next_in_trace.checked_sub(1)?).copied(),
            _ => None,
        }
    }

    /// The gap from `now` to the next arrival, or `None` when there are no more (a
    /// trace replayed to its end, or a rate that is zero from now on). `factor`
    /// multiplies the rate (a surge fault); a trace ignores it.
    #[inline]
    pub fn next_gap(&mut self, now: Nanos, factor: f64, rng: &mut RngStream) -> Option<Nanos> {
        debug_assert!(factor >= 0.0);
        match &self.process {
            ArrivalProcess::Poisson(profile) => {
                if let RateShape::Constant(rate) = profile.shape {
                    if profile.bursts.is_empty() {
                        // The models' own arithmetic before this component, draw for draw.
                        let rate = rate * factor;
                        return (rate > 0.0).then(|| round_to_nanos(rng.exponential(rate) * NANOS_PER_SEC as f64));
                    }
                }
                let start = now as f64 / NANOS_PER_SEC as f64;
                let mut t = start;
                loop {
                    let (bound, until) = profile.bound(t);
                    let bound = bound * factor;
                    debug_assert!(bound >= profile.rate(t) * factor * (1.0 - 1e-9), "the bound is below the rate");
                    if bound <= 0.0 {
                        if until.is_infinite() {
                            return None;
                        }
                        t = until;
                        continue;
                    }
                    let candidate = t + rng.exponential(bound);
                    if candidate >= until {
                        t = until;
                        continue;
                    }
                    t = candidate;
                    if rng.uniform01() * bound < profile.rate(t) * factor {
                        return Some(round_to_nanos((t - start) * NANOS_PER_SEC as f64));
                    }
                }
            }
            ArrivalProcess::Even(profile) => {
                let start = now as f64 / NANOS_PER_SEC as f64;
                let mut t = start;
                loop {
                    let rate = profile.rate(t) * factor;
                    if rate > 0.0 {
                        return Some(round_to_nanos((t - start + 1.0 / rate) * NANOS_PER_SEC as f64));
                    }
                    let (_, until) = profile.bound(t);
                    if until.is_infinite() {
                        return None;
                    }
                    t = until;
                }
            }
            ArrivalProcess::Trace(times, _) => {
                let at = *times.get(self.next_in_trace)?;
                self.next_in_trace += 1;
                Some(at.saturating_sub(now))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::rng::StreamPurpose;

    fn arrival_times(process: ArrivalProcess, horizon_s: f64, seed: u64) -> Vec<f64> {
        let mut arrivals = Arrivals::new(process);
        let mut rng = RngStream::derive(seed, 0, StreamPurpose::named("test.arrivals"));
        let (mut now, mut times) = (0u64, Vec::new());
        while let Some(gap) = arrivals.next_gap(now, 1.0, &mut rng) {
            now += gap;
            if now as f64 / 1e9 >= horizon_s {
                break;
            }
            times.push(now as f64 / 1e9);
        }
        times
    }

    /// Arrivals per interval match the rate's integral within Poisson error (four
    /// standard deviations of the count) for steps, ramps, a sine and a burst.
    #[test]
    fn arrivals_per_interval_follow_the_rates_integral() {
        let schedule = |linear| RateShape::Schedule {
            points: Arc::from([(0.0, 50.0), (100.0, 400.0), (200.0, 0.0), (250.0, 100.0)]),
            linear,
        };
        let profiles = [
            ("steps", RateProfile { shape: schedule(false), bursts: Arc::from([]) }),
            ("ramps", RateProfile { shape: schedule(true), bursts: Arc::from([]) }),
            (
                "sine",
                RateProfile {
                    shape: RateShape::Sine { mean: 200.0, amplitude: 150.0, period_s: 120.0 },
                    bursts: Arc::from([]),
                },
            ),
            (
                "burst",
                RateProfile {
                    shape: RateShape::Constant(100.0),
                    bursts: Arc::from([Burst { at_s: 40.0, duration_s: 10.0, factor: 5.0 }]),
                },
            ),
        ];
        for (name, profile) in profiles {
            let times = arrival_times(ArrivalProcess::Poisson(profile.clone()), 300.0, 7);
            for window in 0..30 {
                let (from, to) = (window as f64 * 10.0, window as f64 * 10.0 + 10.0);
                let expected = profile.expected_arrivals(from, to);
                let got = times.iter().filter(|t| **t >= from && **t < to).count() as f64;
                assert!(
                    (got - expected).abs() <= 4.0 * expected.sqrt().max(1.0),
                    "{name} [{from}, {to}): {got} vs {expected}"
                );
            }
            let total = profile.expected_arrivals(0.0, 300.0);
            assert!((times.len() as f64 - total).abs() < 4.0 * total.sqrt(), "{name}: {} vs {total}", times.len());
        }
        // A zero rate from 200 s to 250 s: nothing arrives there.
        let steps = RateProfile { shape: schedule(false), bursts: Arc::from([]) };
        let times = arrival_times(ArrivalProcess::Poisson(steps), 300.0, 8);
        assert!(!times.iter().any(|t| (200.0..250.0).contains(t)));
        assert!((RateProfile::constant(3.0).expected_arrivals(0.0, 10.0) - 30.0).abs() < 1e-9);
    }

    /// A trace arrives exactly at its instants; even arrivals are evenly spaced at the
    /// current rate; a constant Poisson rate keeps the models' former arithmetic.
    #[test]
    fn traces_replay_exactly_and_even_arrivals_are_even() {
        let instants: Arc<[Nanos]> = Arc::from([5u64, 1_000, 1_000, 2_500_000_000]);
        let mut arrivals = Arrivals::new(ArrivalProcess::Trace(instants.clone(), Some(Arc::from([7u64, 8, 9, 10]))));
        let mut rng = RngStream::derive(1, 0, StreamPurpose::named("test.arrivals"));
        let mut now = 0;
        for (i, instant) in instants.iter().enumerate() {
            now += arrivals.next_gap(now, 1.0, &mut rng).unwrap();
            assert_eq!(now, *instant);
            assert_eq!(arrivals.replayed_key(), Some(7 + i as u64), "the key of the instant just replayed");
        }
        assert_eq!(arrivals.next_gap(now, 1.0, &mut rng), None, "the trace ends");
        let even = arrival_times(ArrivalProcess::Even(RateProfile::constant(4.0)), 2.0, 1);
        assert_eq!(even, [0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75]);
        let mut a = RngStream::derive(9, 0, StreamPurpose::named("test.arrivals"));
        let mut b = a.clone();
        let mut constant = Arrivals::new(ArrivalProcess::Poisson(RateProfile::constant(2.5)));
        for _ in 0..100 {
            let want = round_to_nanos(b.exponential(2.5) * NANOS_PER_SEC as f64);
            assert_eq!(constant.next_gap(0, 1.0, &mut a), Some(want));
        }
    }
}
