//! A grid point's latency histograms kept per batch of replicas, so that a pooled
//! quantile gets an interval.
//!
//! Replica r belongs to batch r mod [`BATCHES`]. A pooled quantile (over every
//! replica of the point) is given with a *sectioning* interval (Asmussen and Glynn,
//! *Stochastic Simulation*, III.5a; Nakayama 2014): the quantile of each batch's
//! pooled histogram is one estimate from independent replicas, and the interval is the
//! whole point's quantile ± t(m−1) × sd(batch quantiles) / √m over the m batches that
//! ran. Replicas, not requests, are the independent unit (a replica's requests are
//! correlated through its queues), and sectioning centres on the whole point's
//! quantile, whose bias is that of n·m values, not of one batch. Batches by residue,
//! not by range, so a batch never depends on the replica count: a shard, a resume and
//! a longer run keep every batch the same.
//!
//! A batch is kept sparse ([`SparseHistogram`]: the buckets it touched); its
//! quantiles are read off the pairs as HdrHistogram reads them.
//!
//! Invariants: a batch holds exactly the replicas of its residue that ran; the pooled
//! histogram is the sum of the batches (both exact integer merges, so neither depends
//! on thread, order or split).

use stampede_engine::LatencyHistogram;

use super::sparse::SparseHistogram;
use super::stats::t_quantile_975;

/// Batches of replicas per grid point: ten sections give a t interval with nine
/// degrees of freedom (t = 2.26, against 1.96 for infinitely many) while each batch
/// still pools a tenth of the replicas, so its quantile is close to unbiased.
pub const BATCHES: usize = 10;

/// The batch replica `replica` belongs to.
pub fn batch_of(replica: u32) -> usize {
    replica as usize % BATCHES
}

/// One latency of one grid point, per batch (`None` until a replica of it ran).
#[derive(Clone, Debug)]
pub struct BatchedLatency {
    batches: Vec<Option<SparseHistogram>>,
}

impl Default for BatchedLatency {
    fn default() -> Self {
        BatchedLatency { batches: vec![None; BATCHES] }
    }
}

impl BatchedLatency {
    /// The histogram of batch `batch`, made empty on first use.
    pub fn batch_mut(&mut self, batch: usize) -> &mut SparseHistogram {
        self.batches[batch].get_or_insert_with(SparseHistogram::default)
    }

    /// Sets batch `batch` to `histogram` (what the runner gathered for it).
    pub fn set(&mut self, batch: usize, histogram: SparseHistogram) {
        self.batches[batch] = Some(histogram);
    }

    /// The batches that ran, with their index.
    pub fn batches(&self) -> impl Iterator<Item = (usize, &SparseHistogram)> {
        self.batches.iter().enumerate().filter_map(|(b, h)| Some((b, h.as_ref()?)))
    }

    /// Adds every batch of `other` into the same batch here.
    pub fn merge(&mut self, other: &BatchedLatency) {
        for (b, histogram) in other.batches() {
            self.batch_mut(b).add_sparse(histogram);
        }
    }

    /// Every replica's latencies: the sum of the batches.
    pub fn pooled(&self) -> LatencyHistogram {
        let mut total = SparseHistogram::default();
        for (_, histogram) in self.batches() {
            total.add_sparse(histogram);
        }
        total.to_histogram()
    }

    /// The sectioning interval around `pooled_nanos` (the pooled `q` quantile): NaN
    /// bounds with fewer than two batches holding values.
    pub fn interval(&self, q: f64, pooled_nanos: f64) -> (f64, f64) {
        self.intervals(&[(q, pooled_nanos)])[0]
    }

    /// [`Self::interval`] of several (q, pooled quantile in ns).
    pub fn intervals(&self, quantiles: &[(f64, f64)]) -> Vec<(f64, f64)> {
        let mut estimates = vec![Vec::new(); quantiles.len()];
        for (_, batch) in self.batches().filter(|(_, h)| h.count() > 0) {
            for (estimate, (q, _)) in estimates.iter_mut().zip(quantiles) {
                estimate.push(batch.value_at_quantile(*q));
            }
        }
        estimates.iter().zip(quantiles).map(|(estimates, (_, pooled))| sectioning(estimates, *pooled)).collect()
    }
}

/// The sectioning interval around `pooled` from the batches' own `estimates` of the
/// same quantity: pooled ± t(m−1) × sd / √m, floored at 0; NaN bounds with fewer than
/// two estimates or no pooled value.
pub fn sectioning(estimates: &[f64], pooled: f64) -> (f64, f64) {
    let m = estimates.len();
    if m < 2 || pooled.is_nan() {
        return (f64::NAN, f64::NAN);
    }
    let mean = estimates.iter().sum::<f64>() / m as f64;
    let variance = estimates.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (m - 1) as f64;
    let half = t_quantile_975(m as u64 - 1) * (variance / m as f64).sqrt();
    ((pooled - half).max(0.0), pooled + half)
}

#[cfg(test)]
mod tests {
    use super::*;
    use stampede_engine::kernel::rng::{RngStream, StreamPurpose};

    /// One value, as a replica's histogram holds it.
    fn one(value: u64) -> LatencyHistogram {
        let mut histogram = LatencyHistogram::new();
        histogram.record(value);
        histogram
    }

    /// Batches by residue; the pooled histogram is their sum; one batch has no interval.
    #[test]
    fn batches_sum_to_the_pool_and_one_batch_has_no_interval() {
        assert_eq!((batch_of(0), batch_of(9), batch_of(10), batch_of(23)), (0, 9, 0, 3));
        let mut latency = BatchedLatency::default();
        latency.batch_mut(3).add(&one(1_000));
        let pooled = latency.pooled();
        let p50 = pooled.hdr().value_at_quantile(0.5) as f64;
        assert!(latency.interval(0.5, p50).0.is_nan());
        latency.batch_mut(4).add(&one(3_000));
        let (lo, hi) = latency.interval(0.5, p50);
        assert!(lo <= p50 && p50 <= hi && hi > lo, "{lo} {p50} {hi}");
        assert_eq!(latency.pooled().count(), 2);
        let mut twice = latency.clone();
        twice.merge(&latency);
        assert_eq!(twice.pooled().count(), 4);
        assert_eq!(twice.batches().map(|(b, _)| b).collect::<Vec<_>>(), [3, 4]);
    }

    /// Ten batches of exponential latencies: the interval of the median covers the
    /// true median in about 95% of 200 independent trials (it would fail if the
    /// spread were taken from requests instead of batches, or were missing the √m).
    #[test]
    fn the_interval_covers_a_known_quantile() {
        let true_median = 2f64.ln() * 1e6;
        let mut covered = 0;
        for trial in 0..200 {
            let mut rng = RngStream::derive(11, trial, StreamPurpose::named("test.batches"));
            let mut latency = BatchedLatency::default();
            for replica in 0..40u32 {
                let mut histogram = LatencyHistogram::new();
                for _ in 0..200 {
                    histogram.record((rng.exponential(1.0) * 1e6) as u64);
                }
                latency.batch_mut(batch_of(replica)).add(&histogram);
            }
            let pooled = latency.pooled().hdr().value_at_quantile(0.5) as f64;
            let (lo, hi) = latency.interval(0.5, pooled);
            covered += usize::from(lo <= true_median && true_median <= hi);
        }
        assert!((180..=199).contains(&covered), "covered {covered} of 200");
    }
}
