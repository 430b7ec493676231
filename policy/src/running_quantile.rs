//! A running quantile of recent latencies, for policies that act on "the p95 lately":
//! a [`LogHistogram`] (±3.2%) read every [`REFRESH_EVERY`] samples and halved every
//! [`HALF_LIFE`] samples, so it follows a latency that changes. Until `min_samples`
//! samples have been seen there is no reading (there is nothing to read a tail from).
//! The hedge's delay (`after = "p95"`) and the adaptive timeout (`timeout_s = "p99"`)
//! read it.
//!
//! Invariants (asserted): 0 < q < 1; a reading is at least 1 ns.

use crate::kernel::time::Nanos;
use crate::log_histogram::LogHistogram;

/// Samples between two readings of the quantile.
pub const REFRESH_EVERY: u32 = 32;
/// Samples after which the histogram is halved (older samples weigh half).
pub const HALF_LIFE: u64 = 4_096;

/// The q-quantile of the samples so far, older ones weighing less (halved every
/// [`HALF_LIFE`] samples), from a [`LogHistogram`] (±3.2%).
#[derive(Clone, Debug)]
pub struct RunningQuantile {
    q: f64,
    min_samples: u32,
    latencies: LogHistogram,
    samples: u64,
    since_refresh: u32,
    /// Samples between two readings ([`REFRESH_EVERY`] unless set).
    refresh_every: u32,
    /// The quantile last read; `None` until there were `min_samples` samples.
    current: Option<Nanos>,
}

impl RunningQuantile {
    /// The `q`-quantile, known once `min_samples` samples were recorded.
    pub fn new(q: f64, min_samples: u32) -> Self {
        assert!(q > 0.0 && q < 1.0, "a running quantile is inside (0, 1)");
        RunningQuantile {
            q,
            min_samples,
            latencies: LogHistogram::new(),
            samples: 0,
            since_refresh: 0,
            refresh_every: REFRESH_EVERY,
            current: None,
        }
    }

    /// Read every `samples` samples instead (a reading scans the histogram: a
    /// threshold that may lag a little reads less often).
    pub fn refreshed_every(self, samples: u32) -> Self {
        assert!(samples > 0);
        RunningQuantile { refresh_every: samples, ..self }
    }

    /// Learns one latency.
    pub fn observe(&mut self, latency: Nanos) {
        self.latencies.record(latency);
        self.samples += 1;
        self.since_refresh += 1;
        if self.latencies.count() >= HALF_LIFE {
            self.latencies.halve();
        }
        let enough = self.samples >= self.min_samples as u64;
        if enough && (self.current.is_none() || self.since_refresh >= self.refresh_every) {
            self.since_refresh = 0;
            let reading = (self.latencies.quantile(self.q).round() as Nanos).max(1);
            debug_assert!(reading > 0);
            self.current = Some(reading);
        }
    }

    /// The quantile as last read, once there were enough samples.
    pub fn current(&self) -> Option<Nanos> {
        self.current
    }
}
