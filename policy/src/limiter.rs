//! Adaptive concurrency limiters, after Netflix's concurrency-limits (Fixed, AIMD,
//! Vegas, Gradient, Gradient2) and Envoy's adaptive-concurrency gradient controller.
//!
//! A [`ConcurrencyLimiter`] admits a request while in-flight < limit, and learns the
//! limit from one latency sample per completion. The caller chooses the sample
//! (time to first token for a streamed LLM call, total latency otherwise) and the
//! signal: a success, a rate limit (429: AIMD backs off gently) or a drop (500,
//! timeout, 529: full back-off). Update rules and defaults are those of the
//! references; `docs/src/policies.md` lists the deliberate differences (Envoy's periodic
//! updates happen on the first sample after each interval, as there are no timers
//! inside a policy).
//!
//! Invariants (asserted): min ≤ limit ≤ max; in-flight never exceeds what was admitted.

use crate::kernel::rng::RngStream;
use crate::kernel::time::Nanos;

/// What a completion tells the limiter besides its latency.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signal {
    /// Answered.
    Success,
    /// The dependency asked us to slow down (429).
    RateLimited,
    /// A drop: 5xx, overload, timeout.
    Dropped,
}

/// Netflix `AIMDLimit`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AimdConfig {
    /// The limit before anything was learnt.
    pub initial: f64,
    /// The lowest the limit goes.
    pub min: f64,
    /// The highest the limit goes.
    pub max: f64,
    /// Multiplier on a drop or a timeout.
    pub backoff_ratio: f64,
    /// Multiplier on a rate limit (gentler; stampede's extension).
    pub rate_limited_backoff_ratio: f64,
    /// A sample slower than this counts as a drop.
    pub timeout: Nanos,
}

impl Default for AimdConfig {
    fn default() -> Self {
        AimdConfig {
            initial: 20.0,
            min: 20.0,
            max: 200.0,
            backoff_ratio: 0.9,
            rate_limited_backoff_ratio: 0.95,
            timeout: 5 * crate::kernel::time::NANOS_PER_SEC,
        }
    }
}

/// Netflix `VegasLimit`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct VegasConfig {
    /// The limit before anything was learnt.
    pub initial: f64,
    /// The highest the limit goes.
    pub max: f64,
    /// How much of each new estimate the limit takes (exponential smoothing, 0..1].
    pub smoothing: f64,
    /// How much headroom probing adds (Vegas's probe multiplier).
    pub probe_multiplier: f64,
}

impl Default for VegasConfig {
    fn default() -> Self {
        VegasConfig { initial: 20.0, max: 1000.0, smoothing: 1.0, probe_multiplier: 30.0 }
    }
}

/// Netflix `GradientLimit`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GradientConfig {
    /// The limit before anything was learnt.
    pub initial: f64,
    /// The lowest the limit goes.
    pub min: f64,
    /// The highest the limit goes.
    pub max: f64,
    /// How much of each new estimate the limit takes (exponential smoothing, 0..1].
    pub smoothing: f64,
    /// How much the latency may exceed the no-load latency before the limit shrinks (a ratio ≥ 1).
    pub rtt_tolerance: f64,
    /// Samples between resets of the no-load RTT (jittered ×[1, 2)).
    pub probe_interval: u32,
}

impl Default for GradientConfig {
    fn default() -> Self {
        GradientConfig {
            initial: 50.0,
            min: 1.0,
            max: 1000.0,
            smoothing: 0.2,
            rtt_tolerance: 2.0,
            probe_interval: 1000,
        }
    }
}

/// Netflix `Gradient2Limit`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Gradient2Config {
    /// The limit before anything was learnt.
    pub initial: f64,
    /// The lowest the limit goes.
    pub min: f64,
    /// The highest the limit goes.
    pub max: f64,
    /// How much of each new estimate the limit takes (exponential smoothing, 0..1].
    pub smoothing: f64,
    /// How much the latency may exceed the no-load latency before the limit shrinks (a ratio ≥ 1).
    pub rtt_tolerance: f64,
    /// Samples in the long-term RTT's exponential average.
    pub long_window: u32,
    /// Headroom added to the limit so a queue can form (Netflix's queueSize).
    pub queue_size: f64,
}

impl Default for Gradient2Config {
    fn default() -> Self {
        Gradient2Config {
            initial: 20.0,
            min: 20.0,
            max: 200.0,
            smoothing: 0.2,
            // The current Gradient2Limit has no tolerance (gradient = long/short); older
            // releases used 1.5. Kept as a parameter, neutral by default.
            rtt_tolerance: 1.0,
            long_window: 600,
            queue_size: 4.0,
        }
    }
}

/// Envoy's adaptive-concurrency gradient controller.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EnvoyGradientConfig {
    /// The limit before anything was learnt.
    pub initial: f64,
    /// The limit is pinned here while the minimum RTT is measured.
    pub min_concurrency: f64,
    /// The highest the limit goes.
    pub max: f64,
    /// Percentile of the samples that summarises an interval (0..1).
    pub sample_percentile: f64,
    /// How often the limit is recomputed.
    pub concurrency_update_interval: Nanos,
    /// How often the minimum RTT is measured again.
    pub min_rtt_calc_interval: Nanos,
    /// Samples collected to measure the minimum RTT.
    pub min_rtt_request_count: u32,
    /// Fraction of the minimum RTT added as buffer.
    pub min_rtt_buffer: f64,
    /// Random extra delay of the next minimum-RTT window, as a fraction of its interval.
    pub jitter: f64,
}

impl Default for EnvoyGradientConfig {
    fn default() -> Self {
        EnvoyGradientConfig {
            initial: 50.0,
            min_concurrency: 3.0,
            max: 1000.0,
            sample_percentile: 0.5,
            concurrency_update_interval: 100_000_000,
            min_rtt_calc_interval: 60 * crate::kernel::time::NANOS_PER_SEC,
            min_rtt_request_count: 50,
            min_rtt_buffer: 0.25,
            jitter: 0.10,
        }
    }
}

/// Which algorithm sets the limit.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum LimiterKind {
    /// A fixed limit.
    Fixed {
        /// The limit.
        limit: u32,
    },
    /// Additive increase, multiplicative decrease.
    Aimd(AimdConfig),
    /// Netflix Vegas: queue estimated from the RTT over its minimum.
    Vegas(VegasConfig),
    /// Netflix Gradient: the limit scaled by the no-load RTT over the RTT.
    Gradient(GradientConfig),
    /// Netflix Gradient2: a long-term RTT average instead of the minimum.
    Gradient2(Gradient2Config),
    /// Envoy's adaptive concurrency gradient controller.
    EnvoyGradient(EnvoyGradientConfig),
}

const SAMPLE_CAPACITY: usize = 4096;

#[derive(Clone, Debug)]
enum State {
    Fixed,
    Aimd(AimdConfig),
    Vegas(VegasState),
    Gradient(GradientState),
    Gradient2(Gradient2State),
    Envoy(EnvoyState),
}

/// What one update learns from: when, the round-trip time, how it ended, and the
/// calls in flight (for the app-limited checks).
#[derive(Clone, Copy, Debug)]
struct Sample {
    now: Nanos,
    rtt: Nanos,
    signal: Signal,
    in_flight: f64,
}

#[derive(Clone, Debug)]
struct VegasState {
    config: VegasConfig,
    rtt_noload: Nanos,
    probe_count: u64,
    probe_jitter: f64,
}

#[derive(Clone, Debug)]
struct GradientState {
    config: GradientConfig,
    rtt_noload: Nanos,
    countdown: i64,
}

#[derive(Clone, Debug)]
struct Gradient2State {
    config: Gradient2Config,
    long_rtt: f64,
    samples: u32,
}

#[derive(Clone, Debug)]
struct EnvoyState {
    config: EnvoyGradientConfig,
    samples: Box<[Nanos]>,
    count: usize,
    min_rtt: Nanos,
    measuring: bool,
    next_update: Nanos,
    next_min_rtt: Nanos,
    saved_limit: f64,
}

/// Netflix `WindowedLimit`: instead of one update per completion, the limiter
/// updates once per window of at least `min_samples` samples spanning at least
/// `min_time`, with the window's latency, its largest in-flight count, and a drop if
/// any sample dropped. Windowing keeps per-request noise (an LLM call's latency
/// varies by ±25%) from reading as congestion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SampleWindow {
    /// The shortest window.
    pub min_time: Nanos,
    /// The fewest samples in a window.
    pub min_samples: u32,
}

impl Default for SampleWindow {
    /// Netflix's defaults: 1 s and 10 samples, averaged.
    fn default() -> Self {
        SampleWindow { min_time: crate::kernel::time::NANOS_PER_SEC, min_samples: 10 }
    }
}

#[derive(Clone, Copy, Debug, Default)]
struct Window {
    started: Nanos,
    samples: u32,
    /// Samples with a latency (every one but drops).
    timed: u32,
    latency_sum: u128,
    max_in_flight: u32,
    dropped: bool,
    rate_limited: bool,
}

/// An adaptive concurrency limiter.
#[derive(Clone, Debug)]
pub struct ConcurrencyLimiter {
    limit: f64,
    min: f64,
    max: f64,
    in_flight: u32,
    lowest_limit: f64,
    highest_limit: f64,
    state: State,
    window: Option<(SampleWindow, Window)>,
}

fn log10_floor_at_least_1(limit: f64) -> f64 {
    limit.max(1.0).log10().floor().max(1.0)
}

impl ConcurrencyLimiter {
    /// A limiter of the given kind. Randomness (Vegas's and Gradient's probe jitter)
    /// comes from the `rng` passed to each update.
    pub fn new(kind: LimiterKind) -> Self {
        let (limit, min, max, state) = match kind {
            LimiterKind::Fixed { limit } => (limit as f64, limit as f64, limit as f64, State::Fixed),
            LimiterKind::Aimd(c) => (c.initial, c.min, c.max, State::Aimd(c)),
            LimiterKind::Vegas(c) => (
                c.initial,
                1.0,
                c.max,
                State::Vegas(VegasState { config: c, rtt_noload: 0, probe_count: 0, probe_jitter: 0.75 }),
            ),
            LimiterKind::Gradient(c) => (
                c.initial,
                c.min,
                c.max,
                State::Gradient(GradientState { config: c, rtt_noload: 0, countdown: c.probe_interval as i64 }),
            ),
            LimiterKind::Gradient2(c) => {
                (c.initial, c.min, c.max, State::Gradient2(Gradient2State { config: c, long_rtt: 0.0, samples: 0 }))
            }
            LimiterKind::EnvoyGradient(c) => (
                c.min_concurrency,
                c.min_concurrency,
                c.max,
                State::Envoy(EnvoyState {
                    config: c,
                    samples: vec![0; SAMPLE_CAPACITY].into_boxed_slice(),
                    count: 0,
                    min_rtt: 0,
                    measuring: true,
                    next_update: 0,
                    next_min_rtt: 0,
                    saved_limit: c.initial,
                }),
            ),
        };
        assert!(min >= 1.0 && min <= max && (min..=max).contains(&limit), "need 1 ≤ min ≤ initial ≤ max");
        ConcurrencyLimiter {
            limit,
            min,
            max,
            in_flight: 0,
            lowest_limit: limit,
            highest_limit: limit,
            state,
            window: None,
        }
    }

    /// A limiter that learns from windows of samples (see [`SampleWindow`]).
    pub fn windowed(kind: LimiterKind, window: SampleWindow) -> Self {
        assert!(window.min_samples > 0, "a window needs at least one sample");
        ConcurrencyLimiter { window: Some((window, Window::default())), ..Self::new(kind) }
    }

    /// The current limit (whole requests).
    pub fn limit(&self) -> u32 {
        self.limit as u32
    }

    /// The lowest limit so far.
    pub fn lowest_limit(&self) -> u32 {
        self.lowest_limit as u32
    }

    /// The highest limit so far.
    pub fn highest_limit(&self) -> u32 {
        self.highest_limit as u32
    }

    /// Requests admitted and not yet completed.
    pub fn in_flight(&self) -> u32 {
        self.in_flight
    }

    /// Admits a request if in-flight is below the limit.
    #[inline]
    pub fn try_acquire(&mut self) -> bool {
        if self.in_flight < self.limit() {
            self.in_flight += 1;
            true
        } else {
            false
        }
    }

    /// A request that never reached the dependency: frees its place, learns nothing.
    #[inline]
    pub fn abandon(&mut self) {
        debug_assert!(self.in_flight > 0, "abandon without acquire");
        self.in_flight = self.in_flight.saturating_sub(1);
    }

    /// A request completed after `latency` with `signal`: update the limit, then release.
    #[inline]
    pub fn on_complete(&mut self, now: Nanos, latency: Nanos, signal: Signal, rng: &mut RngStream) {
        debug_assert!(self.in_flight > 0, "completion without acquire");
        self.observe(now, latency, signal, rng);
        self.in_flight = self.in_flight.saturating_sub(1);
    }

    /// Learns from a sample of a request still in flight — a streamed call's time to
    /// first token, reported when the first token arrives rather than when the stream
    /// ends many seconds later. Release the request with [`Self::abandon`] when it ends.
    #[inline]
    pub fn observe(&mut self, now: Nanos, latency: Nanos, signal: Signal, rng: &mut RngStream) {
        debug_assert!(self.in_flight > 0, "a sample from a request that was not admitted");
        let in_flight = self.in_flight;
        let sample = match &mut self.window {
            None => Some((latency.max(1), signal, in_flight as f64)),
            Some((config, window)) => {
                if window.samples == 0 {
                    window.started = now;
                }
                window.samples += 1;
                // A drop's latency is not a service time (a 529 at the door answers
                // in 50 ms): it marks the window dropped but joins no latency statistic,
                // or it would become the no-load baseline and read every healthy
                // window as congestion ever after.
                if signal != Signal::Dropped {
                    window.timed += 1;
                    window.latency_sum += latency as u128;
                }
                window.max_in_flight = window.max_in_flight.max(in_flight);
                window.dropped |= signal == Signal::Dropped;
                window.rate_limited |= signal == Signal::RateLimited;
                if window.samples >= config.min_samples && now - window.started >= config.min_time {
                    // Only drops: no latency to learn; the drop still counts.
                    let average = (window.latency_sum / window.timed.max(1) as u128) as Nanos;
                    let signal = if window.dropped {
                        Signal::Dropped
                    } else if window.rate_limited {
                        Signal::RateLimited
                    } else {
                        Signal::Success
                    };
                    let max_in_flight = window.max_in_flight as f64;
                    *window = Window::default();
                    Some((average.max(1), signal, max_in_flight))
                } else {
                    None
                }
            }
        };
        let Some((latency, signal, in_flight)) = sample else { return };
        self.update(now, latency, signal, in_flight, rng);
        debug_assert!(
            self.min <= self.limit && self.limit <= self.max,
            "limit {} outside [{}, {}]",
            self.limit,
            self.min,
            self.max
        );
        self.lowest_limit = self.lowest_limit.min(self.limit);
        self.highest_limit = self.highest_limit.max(self.limit);
    }

    fn update(&mut self, now: Nanos, rtt: Nanos, signal: Signal, in_flight: f64, rng: &mut RngStream) {
        let limit = self.limit;
        let sample = Sample { now, rtt, signal, in_flight };
        let new_limit = match &mut self.state {
            State::Fixed => limit,
            State::Aimd(config) => aimd(config, limit, sample),
            State::Vegas(state) => state.next_limit(limit, sample, rng),
            State::Gradient(state) => state.next_limit(limit, sample, rng),
            State::Gradient2(state) => state.next_limit(limit, sample),
            State::Envoy(state) => state.next_limit(limit, sample, rng),
        };
        self.limit = new_limit.clamp(self.min, self.max);
    }
}

/// Netflix's AIMD: a back-off takes the integer floor and at least one off.
fn aimd(c: &AimdConfig, limit: f64, Sample { rtt, signal, in_flight, .. }: Sample) -> f64 {
    let back_off = |ratio: f64| (limit * ratio).floor().min(limit - 1.0);
    if signal == Signal::Dropped || rtt > c.timeout {
        back_off(c.backoff_ratio)
    } else if signal == Signal::RateLimited {
        back_off(c.rate_limited_backoff_ratio)
    } else if in_flight * 2.0 >= limit {
        limit + 1.0
    } else {
        limit
    }
}

impl VegasState {
    /// Netflix's Vegas: compare the queue estimate limit·(1 − rtt_noload/rtt) with
    /// thresholds that scale with log10(limit); probe the no-load RTT now and then.
    fn next_limit(&mut self, limit: f64, Sample { rtt, signal, in_flight, .. }: Sample, rng: &mut RngStream) -> f64 {
        let config = &self.config;
        self.probe_count += 1;
        if signal == Signal::Success && self.probe_jitter * config.probe_multiplier * limit <= self.probe_count as f64 {
            // Probe: forget the no-load RTT so that a faster dependency is noticed.
            self.probe_jitter = rng.uniform(0.5, 1.0);
            self.probe_count = 0;
            self.rtt_noload = rtt;
            return limit;
        }
        if signal == Signal::Success && (self.rtt_noload == 0 || rtt < self.rtt_noload) {
            self.rtt_noload = rtt;
            return limit;
        }
        let queue = (limit * (1.0 - self.rtt_noload as f64 / rtt as f64)).ceil();
        let log = log10_floor_at_least_1(limit);
        let (alpha, beta, threshold) = (3.0 * log, 6.0 * log, log);
        let target = if signal != Signal::Success {
            Some(limit - log)
        } else if in_flight * 2.0 < limit {
            None // app-limited: no evidence either way
        } else if queue <= threshold {
            Some(limit + beta)
        } else if queue < alpha {
            Some(limit + log)
        } else if queue > beta {
            Some(limit - log)
        } else {
            None
        };
        match target {
            Some(target) => {
                let target = target.clamp(1.0, config.max);
                (1.0 - config.smoothing) * limit + config.smoothing * target
            }
            None => limit,
        }
    }
}

impl GradientState {
    /// Netflix's Gradient: limit × clamp(tolerance · rtt_noload / rtt) + √limit, with
    /// the no-load RTT reset every probe interval (jittered).
    fn next_limit(&mut self, limit: f64, Sample { rtt, signal, in_flight, .. }: Sample, rng: &mut RngStream) -> f64 {
        let config = &self.config;
        let queue = limit.sqrt();
        self.countdown -= 1;
        if self.countdown <= 0 {
            self.countdown = (config.probe_interval as f64 * rng.uniform(1.0, 2.0)) as i64;
            self.rtt_noload = 0;
            return queue.max(config.min);
        }
        // The no-load RTT learns from successes only: a fast rejection is no baseline.
        if signal == Signal::Success && (self.rtt_noload == 0 || rtt < self.rtt_noload) {
            self.rtt_noload = rtt;
        }
        let candidate = if signal != Signal::Success {
            Some(limit / 2.0)
        } else if in_flight < limit / 2.0 {
            None
        } else {
            let gradient = (config.rtt_tolerance * self.rtt_noload as f64 / rtt as f64).clamp(0.5, 1.0);
            Some(limit * gradient + queue)
        };
        match candidate {
            None => limit,
            Some(mut candidate) => {
                if candidate < limit {
                    candidate = (limit * (1.0 - config.smoothing) + config.smoothing * candidate).max(config.min);
                }
                candidate.min(config.max).max(queue)
            }
        }
    }
}

impl Gradient2State {
    /// Netflix's Gradient2: the short RTT against a long-term exponential average.
    fn next_limit(&mut self, limit: f64, Sample { rtt, in_flight, signal, .. }: Sample) -> f64 {
        let config = &self.config;
        let short = rtt as f64;
        if signal == Signal::Dropped {
            // A drop's latency is no service time; Netflix's Gradient2 ignores drops too.
            return limit;
        }
        // Long-term RTT: a plain mean while warming up (10 samples), then an
        // exponential average over `long_window` samples.
        self.samples += 1;
        if self.samples <= 10 {
            self.long_rtt += (short - self.long_rtt) / self.samples as f64;
        } else {
            let factor = 2.0 / (config.long_window as f64 + 1.0);
            self.long_rtt = self.long_rtt * (1.0 - factor) + short * factor;
        }
        if self.long_rtt / short > 2.0 {
            self.long_rtt *= 0.9; // drift back down after a latency spike
        }
        if in_flight < limit / 2.0 {
            limit
        } else {
            let gradient = (config.rtt_tolerance * self.long_rtt / short).clamp(0.5, 1.0);
            let candidate = limit * gradient + config.queue_size;
            limit * (1.0 - config.smoothing) + candidate * config.smoothing
        }
    }
}

impl EnvoyState {
    /// Envoy's adaptive concurrency: measure min RTT at minimum concurrency every
    /// interval (jittered), then update from a percentile of the samples each period.
    fn next_limit(&mut self, limit: f64, Sample { now, rtt, .. }: Sample, rng: &mut RngStream) -> f64 {
        let config = self.config;
        self.samples[self.count % SAMPLE_CAPACITY] = rtt;
        self.count += 1;
        let percentile = |samples: &mut [Nanos], n: usize, q: f64| -> Nanos {
            let n = n.min(SAMPLE_CAPACITY);
            let k = ((n as f64 * q).ceil() as usize).clamp(1, n) - 1;
            *samples[..n].select_nth_unstable(k).1
        };
        if self.measuring {
            if self.count >= config.min_rtt_request_count as usize {
                self.min_rtt = percentile(&mut self.samples, self.count, config.sample_percentile);
                self.measuring = false;
                self.count = 0;
                self.next_update = now + config.concurrency_update_interval;
                let jitter = rng.uniform(0.0, config.jitter);
                self.next_min_rtt = now + (config.min_rtt_calc_interval as f64 * (1.0 + jitter)) as Nanos;
                self.saved_limit
            } else {
                config.min_concurrency
            }
        } else if now >= self.next_min_rtt {
            self.saved_limit = limit;
            self.measuring = true;
            self.count = 0;
            config.min_concurrency
        } else if now >= self.next_update {
            let sample_rtt = percentile(&mut self.samples, self.count, config.sample_percentile) as f64;
            self.count = 0;
            self.next_update = now + config.concurrency_update_interval;
            let buffered = self.min_rtt as f64 * (1.0 + config.min_rtt_buffer);
            let gradient = (buffered / sample_rtt).clamp(0.5, 2.0);
            (gradient * limit + limit.sqrt()).ceil()
        } else {
            limit
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::rng::StreamPurpose;
    use proptest::prelude::*;

    const MS: Nanos = 1_000_000;

    fn rng() -> RngStream {
        RngStream::derive(1, 0, StreamPurpose::named("test.limiter"))
    }

    /// Keeps the limiter saturated (in-flight = limit) and completes one request per
    /// call with a lognormal latency around `median`.
    fn run(
        limiter: &mut ConcurrencyLimiter,
        rng: &mut RngStream,
        now: &mut Nanos,
        steps: u32,
        median: Nanos,
        saturate: bool,
    ) {
        for _ in 0..steps {
            let target = if saturate { limiter.limit() } else { (limiter.limit() / 4).max(1) };
            while limiter.in_flight() < target && limiter.try_acquire() {}
            while limiter.in_flight() > target {
                limiter.abandon();
            }
            let latency = (median as f64 * rng.lognormal(0.0, 0.25)) as Nanos;
            *now += MS;
            limiter.on_complete(*now, latency, Signal::Success, rng);
        }
    }

    /// A windowed limiter learns once per window, from the window's average latency,
    /// its largest in-flight count and whether anything dropped: exactly what a
    /// per-sample limiter learns from that one summary sample.
    #[test]
    fn a_window_is_one_sample_of_its_average() {
        let kind = LimiterKind::Gradient(GradientConfig { initial: 40.0, min: 1.0, ..GradientConfig::default() });
        let window = SampleWindow { min_time: 3 * MS, min_samples: 4 };
        let mut windowed = ConcurrencyLimiter::windowed(kind, window);
        let mut single = ConcurrencyLimiter::new(kind);
        let mut rng_w = rng();
        let mut rng_s = rng();
        // Two windows: the first all successes, the second with one drop.
        let mut after_first = 0;
        for (round, latencies) in [[100, 300, 200, 400], [150, 150, 250, 250]].iter().enumerate() {
            while windowed.try_acquire() {}
            for (i, latency) in latencies.iter().enumerate() {
                let signal = if round == 1 && i == 2 { Signal::Dropped } else { Signal::Success };
                let before = windowed.limit();
                windowed.on_complete((round as u64 * 10 + i as u64 + 2) * MS, latency * MS, signal, &mut rng_w);
                if i < 3 {
                    assert_eq!(windowed.limit(), before, "no update before the window fills");
                }
            }
            while single.try_acquire() {}
            let average = latencies.iter().sum::<u64>() / 4 * MS;
            let signal = if round == 1 { Signal::Dropped } else { Signal::Success };
            single.on_complete((round as u64 * 10 + 5) * MS, average, signal, &mut rng_s);
            assert_eq!(windowed.limit(), single.limit(), "round {round}");
            if round == 0 {
                after_first = windowed.limit();
            }
            // Drain both before the next window.
            while windowed.in_flight() > 0 {
                windowed.abandon();
            }
            while single.in_flight() > 0 {
                single.abandon();
            }
        }
        assert_eq!(windowed.limit(), single.limit());
        assert!(windowed.limit() < after_first, "the drop cut it: {} → {}", after_first, windowed.limit());
    }

    #[test]
    fn aimd_cuts_on_failure_and_regrows_slowly() {
        let mut rng = rng();
        let mut l = ConcurrencyLimiter::new(LimiterKind::Aimd(AimdConfig {
            initial: 100.0,
            min: 1.0,
            ..AimdConfig::default()
        }));
        for _ in 0..100 {
            assert!(l.try_acquire());
        }
        l.on_complete(0, MS, Signal::Dropped, &mut rng);
        assert_eq!(l.limit(), 90, "×0.9 on a drop");
        l.on_complete(0, MS, Signal::RateLimited, &mut rng);
        assert_eq!(l.limit(), 85, "×0.95 on a 429: gentler than a drop");
        // Regrowth is +1 per busy success.
        let before = l.limit();
        for _ in 0..10 {
            l.on_complete(0, MS, Signal::Success, &mut rng);
        }
        assert_eq!(l.limit(), before + 10);
        // A timeout-length sample counts as a drop.
        l.on_complete(0, 6_000 * MS, Signal::Success, &mut rng);
        assert!(l.limit() < before + 10);
    }

    fn gradient_kinds() -> [LimiterKind; 2] {
        [
            LimiterKind::Gradient(GradientConfig {
                initial: 100.0,
                probe_interval: 100_000,
                ..GradientConfig::default()
            }),
            LimiterKind::Gradient2(Gradient2Config {
                initial: 100.0,
                min: 1.0,
                max: 400.0,
                ..Gradient2Config::default()
            }),
        ]
    }

    #[test]
    fn vegas_grows_without_queueing_and_backs_off_when_rtt_rises() {
        let mut rng = rng();
        let mut l =
            ConcurrencyLimiter::new(LimiterKind::Vegas(VegasConfig { initial: 20.0, ..VegasConfig::default() }));
        let mut now = 0;
        let mut complete = |l: &mut ConcurrencyLimiter, latency: Nanos, steps: u32| {
            for _ in 0..steps {
                while l.try_acquire() {}
                now += MS;
                l.on_complete(now, latency, Signal::Success, &mut rng);
            }
        };
        complete(&mut l, 20 * MS, 200);
        let grown = l.limit();
        assert!(grown > 200, "no queueing: grows by β per sample: {grown}");
        complete(&mut l, 200 * MS, 400);
        assert!(l.limit() < grown / 2, "{} vs {grown}", l.limit());
        // App-limited (in-flight < limit/2): no evidence, no change.
        let mut idle = ConcurrencyLimiter::new(LimiterKind::Vegas(VegasConfig::default()));
        idle.try_acquire();
        idle.on_complete(0, 20 * MS, Signal::Success, &mut rng);
        idle.try_acquire();
        idle.on_complete(0, 200 * MS, Signal::Success, &mut rng);
        assert_eq!(idle.limit(), 20);
    }

    #[test]
    fn gradient_limiters_hold_on_a_healthy_dependency_at_low_in_flight() {
        let vegas =
            LimiterKind::Vegas(VegasConfig { initial: 100.0, probe_multiplier: 1000.0, ..VegasConfig::default() });
        for kind in gradient_kinds().into_iter().chain([vegas]) {
            let mut rng = rng();
            let mut l = ConcurrencyLimiter::new(kind);
            let mut now = 0;
            run(&mut l, &mut rng, &mut now, 5_000, 20 * MS, false);
            assert!(l.lowest_limit() >= 90, "{kind:?}: lowest {}", l.lowest_limit());
        }
    }

    #[test]
    fn gradient_limiters_shrink_when_latency_rises_tenfold_under_load() {
        for kind in gradient_kinds() {
            let mut rng = rng();
            let mut l = ConcurrencyLimiter::new(kind);
            let mut now = 0;
            run(&mut l, &mut rng, &mut now, 2_000, 20 * MS, true);
            let baseline = l.limit();
            run(&mut l, &mut rng, &mut now, 300, 200 * MS, true);
            assert!(l.limit() < baseline / 2, "{kind:?}: {} not well below {baseline}", l.limit());
        }
    }

    #[test]
    fn envoy_gradient_measures_min_rtt_then_tracks_latency() {
        let mut rng = rng();
        let mut l = ConcurrencyLimiter::new(LimiterKind::EnvoyGradient(EnvoyGradientConfig::default()));
        assert_eq!(l.limit(), 3, "pinned to min_concurrency while measuring the minimum RTT");
        let mut now = 0;
        run(&mut l, &mut rng, &mut now, 3_000, 20 * MS, true);
        let healthy = l.limit();
        assert!(healthy > 50, "grows while sampleRTT ≤ minRTT × 1.25: {healthy}");
        run(&mut l, &mut rng, &mut now, 3_000, 200 * MS, true);
        assert!(l.limit() < healthy / 2, "{} vs {healthy}", l.limit());
    }

    #[test]
    fn fixed_never_moves() {
        let mut rng = rng();
        let mut l = ConcurrencyLimiter::new(LimiterKind::Fixed { limit: 7 });
        for _ in 0..7 {
            assert!(l.try_acquire());
        }
        assert!(!l.try_acquire());
        l.on_complete(0, 10_000 * MS, Signal::Dropped, &mut rng);
        assert_eq!(l.limit(), 7);
    }

    proptest! {
        #[test]
        fn limits_stay_within_bounds(ops in proptest::collection::vec((0u64..500, 0u8..4), 1..300), kind in 0usize..6) {
            let kinds = [
                LimiterKind::Fixed { limit: 10 },
                LimiterKind::Aimd(AimdConfig { min: 2.0, initial: 10.0, max: 50.0, ..AimdConfig::default() }),
                LimiterKind::Vegas(VegasConfig { max: 50.0, initial: 10.0, ..VegasConfig::default() }),
                LimiterKind::Gradient(GradientConfig { min: 2.0, max: 50.0, initial: 10.0, probe_interval: 20, ..GradientConfig::default() }),
                LimiterKind::Gradient2(Gradient2Config { min: 2.0, max: 50.0, initial: 10.0, ..Gradient2Config::default() }),
                LimiterKind::EnvoyGradient(EnvoyGradientConfig { max: 50.0, min_rtt_request_count: 5, ..EnvoyGradientConfig::default() }),
            ];
            let mut l = ConcurrencyLimiter::new(kinds[kind]);
            let (lo, hi) = (l.min, l.max);
            let mut rng = rng();
            let mut now = 0;
            for (latency_ms, op) in ops {
                now += 7 * MS;
                if op == 0 || l.in_flight() == 0 { l.try_acquire(); continue; }
                let signal = [Signal::Success, Signal::RateLimited, Signal::Dropped][(op - 1) as usize];
                l.on_complete(now, (latency_ms + 1) * MS, signal, &mut rng);
                prop_assert!(lo <= l.limit && l.limit <= hi);
            }
        }
    }
}
