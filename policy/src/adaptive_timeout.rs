//! A per-attempt timeout that follows the callee's latency: `timeout_s = "p99"` (or
//! `"p99.9"`, `"p95 * 2"`) — a multiple of a running quantile of the attempts' recent
//! latencies, kept between a floor and a ceiling. Finagle's and gRPC's users build
//! this by hand from their p99; Envoy's outlier machinery reads the same signal.
//!
//! **Censoring.** Only attempts that answer have a latency; one cut off by its timeout
//! `T` took *at least* `T`. Observing answers alone reads the tail short, shortens the
//! timeout, cuts more, and spirals down; observing a cut-off attempt *at* `T` makes
//! every `T` below the true quantile a fixed point (the censored mass reads back as
//! `T`). So a cut-off attempt is observed at [`CUT_OFF_WEIGHT`] × `T`: while more than
//! 1 − q of attempts are cut off the reading lands there and the timeout grows; once
//! fewer are, the reading comes from real answers. It settles near the true quantile.
//!
//! **Warm-up.** Until `min_samples` attempts have been observed, the timeout is the
//! ceiling.
//!
//! Invariants (asserted): floor ≤ timeout ≤ ceiling; 0 < q < 1; a positive multiple.

use crate::kernel::time::Nanos;
use crate::running_quantile::RunningQuantile;

/// A cut-off attempt is observed at this multiple of its timeout (see the module doc).
pub const CUT_OFF_WEIGHT: f64 = 2.0;

#[derive(Clone, Copy, Debug, PartialEq)]
/// An adaptive timeout: a multiple of a running latency quantile, between a floor and a ceiling.
pub struct AdaptiveTimeoutConfig {
    /// The quantile read (0.99 for `"p99"`).
    pub quantile: f64,
    /// The timeout is this multiple of it (2 for `"p95 * 2"`).
    pub multiple: f64,
    /// The shortest timeout.
    pub floor: Nanos,
    /// The longest timeout, and the timeout before `min_samples` observations.
    pub ceiling: Nanos,
    /// Observations before the quantile is read (the ceiling until then).
    pub min_samples: u32,
}

#[derive(Clone, Debug)]
/// A timeout that follows the latency its attempts see.
pub struct AdaptiveTimeout {
    config: AdaptiveTimeoutConfig,
    latencies: RunningQuantile,
}

impl AdaptiveTimeout {
    /// A timeout with `config`, at its ceiling until it has seen enough attempts.
    pub fn new(config: AdaptiveTimeoutConfig) -> Self {
        assert!(config.multiple > 0.0 && config.multiple.is_finite(), "a positive multiple");
        assert!(0 < config.floor && config.floor <= config.ceiling, "0 < floor ≤ ceiling");
        AdaptiveTimeout { config, latencies: RunningQuantile::new(config.quantile, config.min_samples) }
    }

    /// The timeout for an attempt sent now.
    pub fn timeout(&self) -> Nanos {
        let c = &self.config;
        let timeout = match self.latencies.current() {
            None => c.ceiling,
            Some(q) => ((q as f64 * c.multiple).round() as Nanos).clamp(c.floor, c.ceiling),
        };
        debug_assert!(c.floor <= timeout && timeout <= c.ceiling);
        timeout
    }

    /// An attempt answered after `latency`.
    pub fn answered(&mut self, latency: Nanos) {
        self.latencies.observe(latency);
    }

    /// An attempt was cut off by its timeout of `timeout`: its latency is at least that.
    pub fn timed_out(&mut self, timeout: Nanos) {
        self.latencies.observe((timeout as f64 * CUT_OFF_WEIGHT).round() as Nanos);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::rng::{RngStream, StreamPurpose};

    const MS: Nanos = 1_000_000;

    fn config(quantile: f64, multiple: f64) -> AdaptiveTimeoutConfig {
        AdaptiveTimeoutConfig { quantile, multiple, floor: MS, ceiling: 2_000 * MS, min_samples: 20 }
    }

    /// The ceiling until enough samples; then the multiple of the running quantile of
    /// an exponential latency (p99 = ln 100 × mean), within the histogram's ±3.2%.
    #[test]
    fn it_starts_at_the_ceiling_then_follows_the_quantile() {
        let mut timeout = AdaptiveTimeout::new(config(0.99, 2.0));
        let mut rng = RngStream::derive(5, 0, StreamPurpose::named("test.timeout"));
        for _ in 0..19 {
            timeout.answered((rng.exponential(1.0) * 10.0 * MS as f64) as Nanos);
        }
        assert_eq!(timeout.timeout(), 2_000 * MS, "warm-up: the ceiling");
        for _ in 0..20_000 {
            timeout.answered((rng.exponential(1.0) * 10.0 * MS as f64) as Nanos);
        }
        let expected = 2.0 * (100f64).ln() * 10.0 * MS as f64;
        let got = timeout.timeout() as f64;
        assert!((got / expected - 1.0).abs() < 0.06, "{got} vs {expected}");
    }

    /// Floor and ceiling hold, and a timeout below the callee's latency grows back:
    /// the callee slows from 0.1 ms to 50 ms, every attempt is cut off at first, and
    /// the timeout climbs to the new p99.
    #[test]
    fn cut_off_attempts_make_a_short_timeout_grow_and_the_bounds_hold() {
        let mut timeout = AdaptiveTimeout::new(config(0.99, 1.0));
        for _ in 0..1_000 {
            timeout.answered(MS / 10);
        }
        assert_eq!(timeout.timeout(), MS, "the floor");
        for _ in 0..20_000 {
            let t = timeout.timeout();
            if 50 * MS > t {
                timeout.timed_out(t);
            } else {
                timeout.answered(50 * MS);
            }
        }
        let settled = timeout.timeout();
        assert!((50 * MS..=110 * MS).contains(&settled), "{settled}");
        let mut slow = AdaptiveTimeout::new(config(0.5, 10.0));
        for _ in 0..100 {
            slow.answered(1_000 * MS);
        }
        assert_eq!(slow.timeout(), 2_000 * MS, "the ceiling");
    }
}
