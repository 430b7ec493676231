//! The `[series]` section shared by the models that report time series: the
//! bucket width, how long a queue must stay in its band to count as recovered, and
//! the width of the windows latency over time is kept in.
//!
//! The bucket left out is [`DEFAULT_BUCKET_S`], except for a model of many series
//! (a graph of hundreds of services), whose default widens so that a second of the
//! run holds at most [`SERIES_BUCKETS_PER_S`] series-buckets: a replica's series,
//! their sums over replicas and `timeseries.parquet` grow with the graph, not with
//! the graph times a hundred buckets a second (2,501 series of a 1,000-service graph
//! over 100 s were 25 M cells, 800 MB of sums alone). Once typed, the width is
//! always written out, so `stampede show` and the manifest say which was used.

use serde::{Deserialize, Serialize};

use crate::base::checks::positive;
use crate::base::error::{Error, Result};
use crate::scenario::RunConfig;

/// A field left out takes its default (the section may be written in part).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SeriesConfig {
    /// Unset, [`DEFAULT_BUCKET_S`] or, for a model of many series, see
    /// [`SeriesConfig::widen_default_bucket`]; read it with [`SeriesConfig::bucket_s`].
    #[serde(serialize_with = "bucket_or_default")]
    pub bucket_s: Option<f64>,
    pub recovery_hold_s: f64,
    /// Latency over time is kept per window of this many seconds, a whole number of
    /// buckets; unset, see [`default_latency_window_s`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency_window_s: Option<f64>,
}

/// The bucket width left out, seconds.
pub const DEFAULT_BUCKET_S: f64 = 0.01;

/// Series times buckets per simulated second that a default bucket keeps at most:
/// 300 series in 10 ms buckets (a 150-service graph keeps the 10 ms).
pub const SERIES_BUCKETS_PER_S: f64 = 30_000.0;

/// The default bucket for a model of `series` series: [`DEFAULT_BUCKET_S`], or the
/// narrowest round width (1, 2 or 5 × a power of ten) that keeps a second of the run
/// within [`SERIES_BUCKETS_PER_S`] series-buckets (0.1 s for 2,501 series).
pub fn default_bucket_s(series: usize) -> f64 {
    let wanted = series as f64 / SERIES_BUCKETS_PER_S;
    if wanted <= DEFAULT_BUCKET_S {
        return DEFAULT_BUCKET_S;
    }
    let decade = 10f64.powf(wanted.log10().floor());
    let round = [1.0, 2.0, 5.0, 10.0].into_iter().map(|m| m * decade).find(|w| *w >= wanted * (1.0 - 1e-12));
    // Whole microseconds, so the width reads as written (0.2, not 0.20000000000000004).
    (round.unwrap_or(wanted) * 1e6).round() / 1e6
}

fn bucket_or_default<S: serde::Serializer>(
    bucket: &Option<f64>,
    serializer: S,
) -> std::result::Result<S::Ok, S::Error> {
    serializer.serialize_f64(bucket.unwrap_or(DEFAULT_BUCKET_S))
}

/// Windows of latency over time by default at most (each costs 8.7 KB per request
/// kind per replica, and eleven copies per grid point: see the Output chapter).
pub const LATENCY_WINDOWS: f64 = 60.0;

/// Request kinds × windows by default at most: a graph of hundreds of entry points
/// keeps fewer, wider windows (each window of each kind is two histograms, 8.7 KB per
/// replica and per batch of replicas: 500 entries × 60 windows were 218 MB a replica).
pub const LATENCY_WINDOW_CELLS: f64 = 3_000.0;

/// Most windows a run may ask for.
const MAX_LATENCY_WINDOWS: f64 = 1_000.0;

/// The width of latency windows over `horizon_s` with buckets of `bucket_s`: the
/// narrowest round width (1, 2, 2.5 or 5 × a power of ten, so windows start at
/// readable times) that makes at most [`LATENCY_WINDOWS`] windows, rounded up to a
/// whole number of buckets.
pub fn default_latency_window_s(horizon_s: f64, bucket_s: f64) -> f64 {
    default_latency_window_for_kinds_s(horizon_s, bucket_s, 1)
}

/// [`default_latency_window_s`] for `kinds` request kinds kept over time: at most
/// [`LATENCY_WINDOW_CELLS`] windows of all kinds together (at least one window each).
pub fn default_latency_window_for_kinds_s(horizon_s: f64, bucket_s: f64, kinds: usize) -> f64 {
    let windows = (LATENCY_WINDOW_CELLS / kinds.max(1) as f64).floor().clamp(1.0, LATENCY_WINDOWS);
    let wanted = horizon_s / windows;
    let decade = 10f64.powf(wanted.log10().floor());
    let round = [1.0, 2.0, 2.5, 5.0, 10.0].into_iter().map(|m| m * decade).find(|w| *w >= wanted * (1.0 - 1e-12));
    let width = round.unwrap_or(wanted);
    bucket_s * ((width / bucket_s) * (1.0 - 1e-12)).ceil().max(1.0)
}

impl Default for SeriesConfig {
    fn default() -> Self {
        SeriesConfig { bucket_s: None, recovery_hold_s: 0.2, latency_window_s: None }
    }
}

impl SeriesConfig {
    /// The bucket width, seconds: as written, or the default.
    pub fn bucket_s(&self) -> f64 {
        self.bucket_s.unwrap_or(DEFAULT_BUCKET_S)
    }

    /// A bucket left out becomes [`default_bucket_s`] of a model with `series` series
    /// (one written is kept).
    pub fn widen_default_bucket(&mut self, series: usize) {
        self.bucket_s.get_or_insert_with(|| default_bucket_s(series));
    }

    /// The latency windows' width for a run of `horizon_s` keeping `kinds` request
    /// kinds over time.
    pub fn latency_window_s(&self, horizon_s: f64, kinds: usize) -> f64 {
        self.latency_window_s.unwrap_or_else(|| default_latency_window_for_kinds_s(horizon_s, self.bucket_s(), kinds))
    }

    /// A positive bucket, at most a million buckets over the run, a non-negative hold.
    pub fn validate(&self, run: &RunConfig) -> Result<()> {
        let bucket_s = self.bucket_s();
        positive("series.bucket_s", bucket_s, "a positive number of seconds")?;
        if run.horizon_s / bucket_s > 1_000_000.0 {
            return Err(Error::bad_input(format!(
                "series.bucket_s = {bucket_s}: gives more than 1000000 buckets over run.horizon_s"
            )));
        }
        if let Some(window) = self.latency_window_s {
            let buckets = window / bucket_s;
            if !(window.is_finite() && window > 0.0) || (buckets - buckets.round()).abs() > 1e-9 * buckets.max(1.0) {
                return Err(Error::bad_input(format!(
                    "series.latency_window_s = {window}: must be a whole number of series.bucket_s ({bucket_s}) seconds"
                )));
            }
            if run.horizon_s / window > MAX_LATENCY_WINDOWS {
                return Err(Error::bad_input(format!(
                    "series.latency_window_s = {window}: gives more than {MAX_LATENCY_WINDOWS} windows over \
                     run.horizon_s = {} (each costs memory per request kind; widen it)",
                    run.horizon_s
                )));
            }
        }
        if !(self.recovery_hold_s.is_finite() && self.recovery_hold_s >= 0.0) {
            return Err(Error::bad_input(format!(
                "series.recovery_hold_s = {}: must be a non-negative number of seconds",
                self.recovery_hold_s
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A section written in part keeps the documented defaults of the rest (issue 44,
    /// item 4: `[series] bucket_s = 0.5` was "missing field recovery_hold_s").
    /// Default windows are round, a whole number of buckets, and at most 60.
    #[test]
    fn default_latency_windows_are_round_and_few() {
        for (horizon, bucket, width) in [
            (10.0, 0.01, 0.2),
            (15.0, 0.01, 0.25),
            (190.0, 1.0, 5.0),
            (60.0, 0.01, 1.0),
            (1.0, 0.05, 0.05),
            (6.0, 0.5, 0.5),
        ] {
            let got = default_latency_window_s(horizon, bucket);
            assert!((got - width).abs() < 1e-9, "{horizon} s in {bucket} s buckets: {got}");
            assert!(horizon / got <= LATENCY_WINDOWS + 1e-9 || got == bucket);
            let buckets = got / bucket;
            assert!((buckets - buckets.round()).abs() < 1e-9);
        }
    }

    #[test]
    fn a_partly_written_section_takes_the_other_defaults() {
        let series: SeriesConfig = toml::from_str("bucket_s = 0.5").unwrap();
        assert_eq!(series, SeriesConfig { bucket_s: Some(0.5), ..SeriesConfig::default() });
        let series: SeriesConfig = toml::from_str("recovery_hold_s = 1.0").unwrap();
        assert_eq!(series, SeriesConfig { recovery_hold_s: 1.0, ..SeriesConfig::default() });
        let breaker: crate::models::cluster::BreakerSection = toml::from_str("enabled = true").unwrap();
        assert_eq!(breaker, crate::models::cluster::BreakerSection { enabled: true, ..Default::default() });
    }
}
