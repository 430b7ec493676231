//! A latency histogram's headline numbers: the quantiles every output reports
//! (the `histograms.parquet` columns, the JSON and the table) and the maximum.

use stampede_engine::LatencyHistogram;

/// Latency quantiles reported per histogram, with their column names.
pub const QUANTILES: &[(&str, f64)] = &[("p50_s", 0.5), ("p90_s", 0.9), ("p99_s", 0.99), ("p999_s", 0.999)];

/// A histogram's headline numbers, in seconds.
#[derive(Clone, Debug, PartialEq)]
pub struct LatencyStats {
    pub count: u64,
    /// In [`QUANTILES`] order; NaN when nothing was recorded.
    pub quantiles_s: Vec<f64>,
    pub max_s: f64,
}

impl LatencyStats {
    pub fn of(histogram: &LatencyHistogram) -> Self {
        let hdr = histogram.hdr();
        let empty = hdr.is_empty();
        let seconds = |nanos: u64| if empty { f64::NAN } else { nanos as f64 / 1e9 };
        LatencyStats {
            count: hdr.len(),
            quantiles_s: QUANTILES.iter().map(|(_, q)| seconds(hdr.value_at_quantile(*q))).collect(),
            max_s: seconds(hdr.max()),
        }
    }
}
