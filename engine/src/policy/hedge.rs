//! Hedged requests: when a call has had no answer after a delay, send the same request
//! again (to another instance) and take whichever answer comes first, cancelling the
//! other. After Dean & Barroso, "The Tail at Scale" (CACM 2013: "defer sending a
//! secondary request until the first has been outstanding for more than the 95th
//! percentile expected latency") and gRPC's hedging policy (A6: `hedgingDelay`,
//! `maxAttempts`).
//!
//! The delay is fixed, or a running quantile of this call site's recent successful
//! latencies. The quantile is read from a [`LogHistogram`] (±3.2%), refreshed every
//! [`REFRESH_EVERY`] samples and halved every [`HALF_LIFE`] samples so it follows a
//! latency that changes; until [`HedgeConfig::min_samples`] samples have been seen, a
//! quantile hedge sends none (there is nothing to read the tail from). Whether a hedge
//! may spend the retry budget is the model's business: it asks the budget as for a
//! retry.
//!
//! Invariants (asserted): a hedge is only offered below `max_hedges`; the delay read
//! from the quantile is positive.

use crate::kernel::time::Nanos;
use crate::measurement::log_histogram::LogHistogram;

/// Samples between two readings of the quantile.
pub const REFRESH_EVERY: u32 = 32;
/// Samples after which the histogram is halved (older samples weigh half).
pub const HALF_LIFE: u64 = 4_096;

/// When the next hedge goes out.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum HedgeDelay {
    /// A fixed delay after the call (or the previous hedge) was sent.
    Fixed(Nanos),
    /// The running `q` quantile of recent successful latencies (0 < q < 1).
    Quantile(f64),
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HedgeConfig {
    pub delay: HedgeDelay,
    /// Hedges per call at most (gRPC's maxAttempts − 1).
    pub max_hedges: u32,
    /// A quantile delay needs this many samples before the first hedge.
    pub min_samples: u32,
}

#[derive(Clone, Debug)]
pub struct HedgePolicy {
    config: HedgeConfig,
    latencies: LogHistogram,
    samples: u64,
    since_refresh: u32,
    /// The delay last read from the quantile; `None` until there were enough samples.
    current: Option<Nanos>,
}

impl HedgePolicy {
    pub fn new(config: HedgeConfig) -> Self {
        if let HedgeDelay::Quantile(q) = config.delay {
            assert!(q > 0.0 && q < 1.0, "a hedge quantile is inside (0, 1)");
        }
        let current = match config.delay {
            HedgeDelay::Fixed(delay) => Some(delay),
            HedgeDelay::Quantile(_) => None,
        };
        HedgePolicy { config, latencies: LogHistogram::new(), samples: 0, since_refresh: 0, current }
    }

    /// Learns a successful attempt's latency (a no-op for a fixed delay).
    pub fn observe(&mut self, latency: Nanos) {
        let HedgeDelay::Quantile(q) = self.config.delay else { return };
        self.latencies.record(latency);
        self.samples += 1;
        self.since_refresh += 1;
        if self.latencies.count() >= HALF_LIFE {
            self.latencies.halve();
        }
        let enough = self.samples >= self.config.min_samples as u64;
        if enough && (self.current.is_none() || self.since_refresh >= REFRESH_EVERY) {
            self.since_refresh = 0;
            let delay = (self.latencies.quantile(q).round() as Nanos).max(1);
            debug_assert!(delay > 0);
            self.current = Some(delay);
        }
    }

    /// How long after sending its last request a call with `hedges_sent` hedges out
    /// sends the next one; `None` when it may send no more (or the quantile is not known yet).
    pub fn delay(&self, hedges_sent: u32) -> Option<Nanos> {
        if hedges_sent >= self.config.max_hedges {
            return None;
        }
        self.current
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::rng::{RngStream, StreamPurpose};

    #[test]
    fn a_fixed_delay_is_offered_up_to_max_hedges() {
        let h = HedgePolicy::new(HedgeConfig { delay: HedgeDelay::Fixed(5_000), max_hedges: 2, min_samples: 0 });
        assert_eq!(h.delay(0), Some(5_000));
        assert_eq!(h.delay(1), Some(5_000));
        assert_eq!(h.delay(2), None);
    }

    #[test]
    fn a_quantile_delay_waits_for_samples_then_follows_the_p95() {
        let config = HedgeConfig { delay: HedgeDelay::Quantile(0.95), max_hedges: 1, min_samples: 100 };
        let mut h = HedgePolicy::new(config);
        let mut rng = RngStream::derive(3, 0, StreamPurpose::named("test.hedge"));
        for _ in 0..99 {
            h.observe((rng.exponential(1.0) * 1e6) as Nanos);
        }
        assert_eq!(h.delay(0), None, "not enough samples");
        for _ in 0..20_000 {
            h.observe((rng.exponential(1.0) * 1e6) as Nanos);
        }
        let p95 = -(0.05f64).ln() * 1e6;
        let got = h.delay(0).unwrap() as f64;
        assert!((got / p95 - 1.0).abs() < 0.06, "{got} vs {p95}");
        // The latency doubles: within a few half-lives the delay follows.
        for _ in 0..40_000 {
            h.observe((rng.exponential(0.5) * 1e6) as Nanos);
        }
        let got = h.delay(0).unwrap() as f64;
        assert!((got / (2.0 * p95) - 1.0).abs() < 0.08, "{got} vs {}", 2.0 * p95);
        assert_eq!(h.delay(1), None);
    }
}
