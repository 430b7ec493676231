//! A grid point's latency over time: each timed request kind's windows (see
//! `engine::measurement::latency_windows`) kept per batch of replicas, read as pooled
//! quantiles and shares per window or over a span of windows, each quantile with the
//! sectioning interval over the batches (as [`super::batches`] gives the whole run's).
//!
//! Invariants: a batch holds exactly the replicas of its residue that ran (integer
//! sums, so neither thread, order nor split changes a bit); every batch of one kind
//! has the same number of windows.

use std::ops::Range;

use stampede_engine::measurement::latency_windows::{quantile_of, WindowCounts, BUCKETS};

use super::batches::{sectioning, BATCHES};

/// Which of a window's histograms a quantile reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counted {
    /// Every request that ended (answered, degraded or failed).
    All,
    /// Requests answered in full.
    Ok,
}

/// A pooled quantile in seconds with its 95% sectioning interval.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WindowQuantile {
    pub value_s: f64,
    pub ci_lo_s: f64,
    pub ci_hi_s: f64,
}

/// One timed request kind of one grid point, per batch (`None` until a replica of
/// the batch ran).
#[derive(Clone, Debug)]
pub struct BatchedWindows {
    batches: Vec<Option<WindowCounts>>,
}

impl Default for BatchedWindows {
    fn default() -> Self {
        BatchedWindows { batches: vec![None; BATCHES] }
    }
}

impl BatchedWindows {
    /// Adds one replica's (or one part's) windows into batch `batch`.
    pub fn add(&mut self, batch: usize, counts: &WindowCounts) {
        match &mut self.batches[batch] {
            Some(total) => total.add(counts),
            slot => *slot = Some(counts.clone()),
        }
    }

    /// The batches that ran, with their index.
    pub fn batches(&self) -> impl Iterator<Item = (usize, &WindowCounts)> {
        self.batches.iter().enumerate().filter_map(|(b, c)| Some((b, c.as_ref()?)))
    }

    /// Adds every batch of `other` into the same batch here.
    pub fn merge(&mut self, other: &BatchedWindows) {
        for (b, counts) in other.batches() {
            self.add(b, counts);
        }
    }

    /// Windows per replica (0 before any replica ran).
    pub fn windows(&self) -> usize {
        self.batches().next().map_or(0, |(_, c)| c.windows())
    }

    /// One batch's histogram over `windows`, summed.
    fn histogram(counts: &WindowCounts, windows: Range<usize>, counted: Counted) -> Vec<u64> {
        let mut total = vec![0u64; BUCKETS];
        for w in windows {
            let histogram = match counted {
                Counted::All => counts.all(w),
                Counted::Ok => counts.ok(w),
            };
            total.iter_mut().zip(histogram).for_each(|(t, &c)| *t += c as u64);
        }
        total
    }

    /// The `q` quantile of the requests (of `counted`) that ended in `windows`, pooled
    /// over every replica, with its sectioning interval over the batches; NaN where
    /// none ended.
    pub fn quantile(&self, windows: Range<usize>, counted: Counted, q: f64) -> WindowQuantile {
        let per_batch: Vec<Vec<u64>> =
            self.batches().map(|(_, c)| Self::histogram(c, windows.clone(), counted)).collect();
        let mut pooled = vec![0u64; BUCKETS];
        for histogram in &per_batch {
            pooled.iter_mut().zip(histogram).for_each(|(p, &c)| *p += c);
        }
        let value = quantile_of(&pooled, q);
        let estimates: Vec<f64> = per_batch.iter().map(|h| quantile_of(h, q)).filter(|v| !v.is_nan()).collect();
        let (lo, hi) = sectioning(&estimates, value);
        WindowQuantile { value_s: value / 1e9, ci_lo_s: lo / 1e9, ci_hi_s: hi / 1e9 }
    }

    /// The requests that ended in `windows`, pooled over replicas, by ending
    /// (`[ok, degraded, failed]`).
    pub fn endings(&self, windows: Range<usize>) -> [u64; 3] {
        let mut total = [0u64; 3];
        for (_, counts) in self.batches() {
            for w in windows.clone() {
                for (t, c) in total.iter_mut().zip(counts.endings[w]) {
                    *t += c as u64;
                }
            }
        }
        total
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stampede_engine::measurement::ending::Ending;
    use stampede_engine::measurement::latency_windows::LatencyWindows;

    /// Two batches of one window each: the pooled quantile, its interval from the two
    /// batches' quantiles, the ok-only histogram and the ending counts.
    #[test]
    fn pooled_quantiles_and_endings_add_up_over_batches_and_windows() {
        let mut batched = BatchedWindows::default();
        for (batch, latency) in [(0, 10_000_000u64), (1, 20_000_000)] {
            let mut windows = LatencyWindows::new(1_000, 2_000);
            for _ in 0..100 {
                windows.record(10, Ending::Ok, latency);
                windows.record(1_500, Ending::Failed, 2 * latency);
            }
            batched.add(batch, windows.counts());
        }
        assert_eq!(batched.windows(), 2);
        assert_eq!(batched.endings(0..2), [200, 0, 200]);
        let first = batched.quantile(0..1, Counted::All, 0.5);
        assert!((first.value_s / 0.010 - 1.0).abs() <= 1.0 / 32.0, "{first:?}");
        assert!(first.ci_lo_s < first.value_s && first.ci_hi_s > 0.02, "{first:?}");
        let ok = batched.quantile(0..2, Counted::Ok, 0.99);
        assert!((ok.value_s / 0.020 - 1.0).abs() <= 1.0 / 32.0, "{ok:?}");
        let all = batched.quantile(0..2, Counted::All, 0.99);
        assert!((all.value_s / 0.040 - 1.0).abs() <= 1.0 / 32.0, "{all:?}");
        assert!(BatchedWindows::default().quantile(0..0, Counted::All, 0.5).value_s.is_nan());
    }
}
