//! Latency histograms: HdrHistogram with fixed bounds, recorded in nanoseconds.
//!
//! Bounds are fixed up front (1 ns to about 2.8 hours, 3 significant digits) so
//! that recording never allocates: a value above the top is clamped to it, never
//! dropped, and counted in [`LatencyHistogram::saturated`]. Merging adds integer
//! counts, which is commutative: a grid point's merged histogram is identical
//! whatever order or thread its replicas ran in.

use hdrhistogram::Histogram;

use crate::time::Nanos;

/// The largest latency tracked exactly (10^13 ns, about 2.8 hours).
pub const HIGHEST_TRACKABLE_NANOS: u64 = 10_000_000_000_000;
/// Significant decimal digits kept per value.
pub const SIGNIFICANT_DIGITS: u8 = 3;

/// A latency histogram in nanoseconds.
#[derive(Clone, Debug)]
pub struct LatencyHistogram {
    histogram: Histogram<u64>,
    saturated: u64,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        Self::new()
    }
}

impl LatencyHistogram {
    /// An empty histogram. Allocates its full counts array (about 280 KB) now.
    pub fn new() -> Self {
        let histogram =
            Histogram::new_with_bounds(1, HIGHEST_TRACKABLE_NANOS, SIGNIFICANT_DIGITS).expect("valid bounds");
        LatencyHistogram { histogram, saturated: 0 }
    }

    /// Records one latency. Zero is recorded as zero; values above the top are clamped.
    #[inline]
    pub fn record(&mut self, latency: Nanos) {
        if latency > HIGHEST_TRACKABLE_NANOS {
            self.saturated += 1;
        }
        self.histogram.saturating_record(latency.min(HIGHEST_TRACKABLE_NANOS));
    }

    /// Adds every count of `other` into `self`.
    pub fn merge(&mut self, other: &LatencyHistogram) {
        self.histogram.add(&other.histogram).expect("histograms share bounds");
        self.saturated += other.saturated;
    }

    /// Adds a histogram read back from its serialised form (a shard's partial), with
    /// the count of values it clamped to the top.
    pub fn merge_hdr(&mut self, other: &Histogram<u64>, saturated: u64) {
        self.histogram.add(other).expect("histograms share bounds");
        self.saturated += saturated;
    }

    /// The bytes its counts array occupies (fixed by the bounds).
    pub fn footprint_bytes(&self) -> usize {
        self.histogram.distinct_values() * std::mem::size_of::<u64>()
    }

    /// Number of values recorded.
    pub fn count(&self) -> u64 {
        self.histogram.len()
    }

    /// Number of values that were above the trackable range and clamped.
    pub fn saturated(&self) -> u64 {
        self.saturated
    }

    /// The underlying HdrHistogram, for quantiles and serialisation.
    pub fn hdr(&self) -> &Histogram<u64> {
        &self.histogram
    }

    /// Empties the histogram, keeping its memory.
    pub fn reset(&mut self) {
        self.histogram.reset();
        self.saturated = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_is_order_independent_and_clamps_saturate() {
        let mut a = LatencyHistogram::new();
        let mut b = LatencyHistogram::new();
        for v in [1, 10, 1_000_000, 5_000_000_000] {
            a.record(v);
        }
        b.record(HIGHEST_TRACKABLE_NANOS * 2);
        let mut ab = a.clone();
        ab.merge(&b);
        let mut ba = b.clone();
        ba.merge(&a);
        assert_eq!(ab.count(), 5);
        assert_eq!(ab.saturated(), 1);
        assert_eq!(ab.hdr(), ba.hdr());
        assert!(ab.hdr().max() >= HIGHEST_TRACKABLE_NANOS / 1001 * 1000);
    }
}
