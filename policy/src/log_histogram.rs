//! `LogHistogram`: a small log-bucketed histogram of nanosecond durations — 16
//! buckets per power of two (a bucket is at most 1/16 = 6.25% wide, so a quantile read
//! at the bucket's middle is within ±3.2%), 1,024 `u32` counters (4 KB), allocated
//! once. It is what a policy or a replica keeps when the run's 280 KB
//! [`LatencyHistogram`](stampede_kernel::histogram::LatencyHistogram) would be too big to hold per edge or per entry point:
//! the hedging policy's running quantile and each graph entry point's per-replica
//! p50/p99/p99.9.
//!
//! Invariants (asserted): `total` is the sum of the counters; halving keeps it so.

use crate::kernel::time::Nanos;

/// Sub-buckets per power of two, as a shift.
const SUB_BITS: u32 = 4;
const SUB: u64 = 1 << SUB_BITS;
/// Buckets: values below 16 one each, then 16 per octave for octaves 4..63.
const BUCKETS: usize = (SUB as usize) * (64 - SUB_BITS as usize + 1);

/// A log-bucketed histogram of 4 KB: quantiles within ±3.2%, for the running
/// quantiles a policy reads.
#[derive(Clone, Debug)]
pub struct LogHistogram {
    counts: Box<[u32]>,
    total: u64,
}

impl Default for LogHistogram {
    fn default() -> Self {
        LogHistogram::new()
    }
}

/// The bucket of `value`.
#[inline]
fn bucket(value: Nanos) -> usize {
    if value < SUB {
        return value as usize;
    }
    let octave = 63 - value.leading_zeros();
    let sub = (value >> (octave - SUB_BITS)) & (SUB - 1);
    ((octave - SUB_BITS + 1) as u64 * SUB + sub) as usize
}

/// The middle of bucket `index`, in nanoseconds.
fn middle(index: usize) -> f64 {
    let index = index as u64;
    if index < SUB {
        return index as f64;
    }
    let octave = index / SUB + SUB_BITS as u64 - 1;
    let sub = index % SUB;
    let width = 1u64 << (octave - SUB_BITS as u64);
    let low = (1u64 << octave) + sub * width;
    low as f64 + width as f64 / 2.0
}

impl LogHistogram {
    /// An empty histogram.
    pub fn new() -> Self {
        LogHistogram { counts: vec![0; BUCKETS].into_boxed_slice(), total: 0 }
    }

    /// Records one duration.
    #[inline]
    pub fn record(&mut self, value: Nanos) {
        self.counts[bucket(value)] = self.counts[bucket(value)].saturating_add(1);
        self.total += 1;
    }

    /// Values recorded (after halvings, what is left of them).
    pub fn count(&self) -> u64 {
        self.total
    }

    /// Halves every counter (rounding down): old samples weigh half as much as new ones,
    /// so a running quantile follows a changing latency.
    pub fn halve(&mut self) {
        self.total = 0;
        for count in self.counts.iter_mut() {
            *count /= 2;
            self.total += *count as u64;
        }
    }

    /// Forgets every sample.
    pub fn clear(&mut self) {
        self.counts.fill(0);
        self.total = 0;
    }

    /// The `q` quantile (0 ≤ q ≤ 1), the middle of the bucket holding the value of rank
    /// ⌈q·n⌉; NaN when empty.
    pub fn quantile(&self, q: f64) -> f64 {
        debug_assert!((0.0..=1.0).contains(&q));
        debug_assert_eq!(self.total, self.counts.iter().map(|&c| c as u64).sum::<u64>());
        if self.total == 0 {
            return f64::NAN;
        }
        let rank = ((q * self.total as f64).ceil() as u64).clamp(1, self.total);
        let mut seen = 0u64;
        for (index, &count) in self.counts.iter().enumerate() {
            seen += count as u64;
            if seen >= rank {
                return middle(index);
            }
        }
        unreachable!("rank ≤ total")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::rng::{RngStream, StreamPurpose};

    #[test]
    fn buckets_are_ordered_and_narrow() {
        let mut previous = 0;
        for value in 0..5_000u64 {
            assert!(bucket(value) >= previous, "monotone at {value}");
            previous = bucket(value);
        }
        for value in (0..5_000u64).chain((0..60).map(|k| 1u64 << k)).chain([u64::MAX]) {
            let index = bucket(value);
            assert!(index < BUCKETS);
            let mid = middle(index);
            assert!((mid - value as f64).abs() <= value as f64 / 32.0 + 0.5, "{value}: middle {mid}");
        }
    }

    #[test]
    fn quantiles_of_an_exponential_are_within_the_bucket_precision() {
        let mut rng = RngStream::derive(1, 0, StreamPurpose::named("test.log_histogram"));
        let mut h = LogHistogram::new();
        for _ in 0..200_000 {
            h.record((rng.exponential(1.0) * 1e6) as Nanos);
        }
        for q in [0.5f64, 0.9, 0.99, 0.999] {
            let exact = -(1.0 - q).ln() * 1e6;
            let got = h.quantile(q);
            assert!((got / exact - 1.0).abs() < 0.045, "q{q}: {got} vs {exact}");
        }
        h.halve();
        assert!((h.count() as f64 - 100_000.0).abs() < 600.0, "{}", h.count());
        assert!((h.quantile(0.5) / (std::f64::consts::LN_2 * 1e6) - 1.0).abs() < 0.045);
        h.clear();
        assert!(h.quantile(0.5).is_nan());
    }
}
