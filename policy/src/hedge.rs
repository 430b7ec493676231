//! Hedged requests: when a call has had no answer after a delay, send the same request
//! again (to another instance) and take whichever answer comes first, cancelling the
//! other. After Dean & Barroso, "The Tail at Scale" (CACM 2013: "defer sending a
//! secondary request until the first has been outstanding for more than the 95th
//! percentile expected latency") and gRPC's hedging policy (A6: `hedgingDelay`,
//! `maxAttempts`).
//!
//! The delay is fixed, or a running quantile of this call site's recent successful
//! latencies ([`RunningQuantile`]: a log histogram, refreshed and halved so it follows
//! a latency that changes); until [`HedgeConfig::min_samples`] samples have been seen, a
//! quantile hedge sends none (there is nothing to read the tail from). Whether a hedge
//! may spend the retry budget is the model's business: it asks the budget as for a
//! retry.
//!
//! Invariants (asserted): a hedge is only offered below `max_hedges`; the delay read
//! from the quantile is positive.

use crate::kernel::time::Nanos;
use crate::running_quantile::RunningQuantile;

/// When the next hedge goes out.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum HedgeDelay {
    /// A fixed delay after the call (or the previous hedge) was sent.
    Fixed(Nanos),
    /// The running `q` quantile of recent successful latencies (0 < q < 1).
    Quantile(f64),
}

#[derive(Clone, Copy, Debug, PartialEq)]
/// When to hedge, and how many hedges a call may send.
pub struct HedgeConfig {
    /// How long a call waits before its next hedge.
    pub delay: HedgeDelay,
    /// Hedges per call at most (gRPC's maxAttempts − 1).
    pub max_hedges: u32,
    /// A quantile delay needs this many samples before the first hedge.
    pub min_samples: u32,
}

#[derive(Clone, Debug)]
/// The hedging policy of one client: its delay, and the running quantile it reads.
pub struct HedgePolicy {
    config: HedgeConfig,
    /// The running quantile a quantile delay reads; `None` for a fixed delay.
    quantile: Option<RunningQuantile>,
}

impl HedgePolicy {
    /// A policy with `config`, no samples yet.
    pub fn new(config: HedgeConfig) -> Self {
        let quantile = match config.delay {
            HedgeDelay::Fixed(_) => None,
            HedgeDelay::Quantile(q) => Some(RunningQuantile::new(q, config.min_samples)),
        };
        HedgePolicy { config, quantile }
    }

    /// Learns a successful attempt's latency (a no-op for a fixed delay).
    pub fn observe(&mut self, latency: Nanos) {
        if let Some(quantile) = self.quantile.as_mut() {
            quantile.observe(latency);
        }
    }

    /// How long after sending its last request a call with `hedges_sent` hedges out
    /// sends the next one; `None` when it may send no more (or the quantile is not known yet).
    pub fn delay(&self, hedges_sent: u32) -> Option<Nanos> {
        if hedges_sent >= self.config.max_hedges {
            return None;
        }
        match (self.config.delay, &self.quantile) {
            (HedgeDelay::Fixed(delay), _) => Some(delay),
            (HedgeDelay::Quantile(_), Some(quantile)) => quantile.current(),
            (HedgeDelay::Quantile(_), None) => unreachable!("a quantile delay has its running quantile"),
        }
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
