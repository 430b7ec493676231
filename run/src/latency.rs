//! A latency histogram's headline numbers: the quantiles every output reports
//! (the `histograms.parquet` columns, the JSON and the table), each with its
//! sectioning interval over batches of replicas, and the maximum.

use stampede_engine::LatencyHistogram;

use super::batches::BatchedLatency;

/// Latency quantiles reported per histogram, with their column names.
pub use stampede_scenario::schema::columns::QUANTILES;

/// A histogram's headline numbers, in seconds.
#[derive(Clone, Debug, PartialEq)]
pub struct LatencyStats {
    pub count: u64,
    /// In [`QUANTILES`] order; NaN when nothing was recorded.
    pub quantiles_s: Vec<f64>,
    /// Each quantile's 95% sectioning interval (see [`super::batches`]); NaN with
    /// fewer than two batches holding values.
    pub intervals_s: Vec<(f64, f64)>,
    /// The batches of replicas that recorded a value (the interval's m).
    pub batches: u32,
    pub max_s: f64,
}

impl LatencyStats {
    /// The numbers of `pooled`, whose batches are `batched`.
    pub fn of(pooled: &LatencyHistogram, batched: &BatchedLatency) -> Self {
        let hdr = pooled.hdr();
        let empty = hdr.is_empty();
        let seconds = |nanos: u64| if empty { f64::NAN } else { nanos as f64 / 1e9 };
        let quantiles_s: Vec<f64> = QUANTILES.iter().map(|(_, q)| seconds(hdr.value_at_quantile(*q))).collect();
        let asked: Vec<(f64, f64)> = QUANTILES.iter().zip(&quantiles_s).map(|((_, q), s)| (*q, s * 1e9)).collect();
        let intervals_s = batched.intervals(&asked).into_iter().map(|(lo, hi)| (lo / 1e9, hi / 1e9)).collect();
        let batches = batched.batches().filter(|(_, h)| h.count() > 0).count() as u32;
        LatencyStats { count: hdr.len(), quantiles_s, intervals_s, batches, max_s: seconds(hdr.max()) }
    }
}

/// The `q` quantile of `histogram` in nanoseconds, interpolated linearly inside the
/// bucket the rank falls in (not the bucket's top, and not the value at index
/// ⌊q·n⌋ of a sorted list); `None` when nothing was recorded.
pub fn interpolated_quantile(histogram: &LatencyHistogram, q: f64) -> Option<f64> {
    let hdr = histogram.hdr();
    if hdr.is_empty() {
        return None;
    }
    let rank = q.clamp(0.0, 1.0) * hdr.len() as f64;
    let mut before = 0u64;
    for bucket in hdr.iter_recorded() {
        let count = bucket.count_at_value();
        if (before + count) as f64 >= rank {
            let value = bucket.value_iterated_to();
            let low = hdr.lowest_equivalent(value) as f64;
            let high = hdr.highest_equivalent(value) as f64 + 1.0;
            let within = ((rank - before as f64) / count as f64).clamp(0.0, 1.0);
            return Some(low + within * (high - low));
        }
        before += count;
    }
    Some(hdr.max() as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 1, 2, … 100,000 µs once each: the interpolated quantiles are the true ones to
    /// within the histogram's precision, and move smoothly where bucket tops jump.
    #[test]
    fn quantiles_are_interpolated_inside_buckets() {
        let mut histogram = LatencyHistogram::new();
        for micros in 1..=100_000u64 {
            histogram.record(micros * 1_000);
        }
        for q in [0.5, 0.9, 0.95, 0.99] {
            let exact = q * 100_000.0 * 1_000.0;
            let got = interpolated_quantile(&histogram, q).unwrap();
            assert!((got - exact).abs() / exact < 2e-3, "q {q}: {got} vs {exact}");
        }
        let (a, b) =
            (interpolated_quantile(&histogram, 0.5).unwrap(), interpolated_quantile(&histogram, 0.5001).unwrap());
        assert!(b > a && b - a < 50_000.0, "neighbouring quantiles are close: {a} {b}");
        assert_eq!(interpolated_quantile(&LatencyHistogram::new(), 0.5), None);
    }
}
