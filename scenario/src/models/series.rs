//! The `[series]` section shared by the models that report time series: the
//! bucket width, how long a queue must stay in its band to count as recovered, and
//! the width of the windows latency over time is kept in.

use serde::{Deserialize, Serialize};

use crate::base::checks::positive;
use crate::base::error::{Error, Result};
use crate::scenario::RunConfig;

/// A field left out takes its default (the section may be written in part).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SeriesConfig {
    pub bucket_s: f64,
    pub recovery_hold_s: f64,
    /// Latency over time is kept per window of this many seconds, a whole number of
    /// buckets; unset, see [`default_latency_window_s`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency_window_s: Option<f64>,
}

/// Windows of latency over time by default at most (each costs 8.7 KB per request
/// kind per replica, and eleven copies per grid point: see the Output chapter).
pub const LATENCY_WINDOWS: f64 = 60.0;

/// Most windows a run may ask for.
const MAX_LATENCY_WINDOWS: f64 = 1_000.0;

/// The width of latency windows over `horizon_s` with buckets of `bucket_s`: the
/// narrowest round width (1, 2, 2.5 or 5 × a power of ten, so windows start at
/// readable times) that makes at most [`LATENCY_WINDOWS`] windows, rounded up to a
/// whole number of buckets.
pub fn default_latency_window_s(horizon_s: f64, bucket_s: f64) -> f64 {
    let wanted = horizon_s / LATENCY_WINDOWS;
    let decade = 10f64.powf(wanted.log10().floor());
    let round = [1.0, 2.0, 2.5, 5.0, 10.0].into_iter().map(|m| m * decade).find(|w| *w >= wanted * (1.0 - 1e-12));
    let width = round.unwrap_or(wanted);
    bucket_s * ((width / bucket_s) * (1.0 - 1e-12)).ceil().max(1.0)
}

impl Default for SeriesConfig {
    fn default() -> Self {
        SeriesConfig { bucket_s: 0.01, recovery_hold_s: 0.2, latency_window_s: None }
    }
}

impl SeriesConfig {
    /// A positive bucket, at most a million buckets over the run, a non-negative hold.
    /// The latency windows' width for a run of `horizon_s`.
    pub fn latency_window_s(&self, horizon_s: f64) -> f64 {
        self.latency_window_s.unwrap_or_else(|| default_latency_window_s(horizon_s, self.bucket_s))
    }

    pub fn validate(&self, run: &RunConfig) -> Result<()> {
        positive("series.bucket_s", self.bucket_s, "a positive number of seconds")?;
        if run.horizon_s / self.bucket_s > 1_000_000.0 {
            return Err(Error::bad_input(format!(
                "series.bucket_s = {}: gives more than 1000000 buckets over run.horizon_s",
                self.bucket_s
            )));
        }
        if let Some(window) = self.latency_window_s {
            let buckets = window / self.bucket_s;
            if !(window.is_finite() && window > 0.0) || (buckets - buckets.round()).abs() > 1e-9 * buckets.max(1.0) {
                return Err(Error::bad_input(format!(
                    "series.latency_window_s = {window}: must be a whole number of series.bucket_s ({}) seconds",
                    self.bucket_s
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
        assert_eq!(series, SeriesConfig { bucket_s: 0.5, ..SeriesConfig::default() });
        let series: SeriesConfig = toml::from_str("recovery_hold_s = 1.0").unwrap();
        assert_eq!(series, SeriesConfig { recovery_hold_s: 1.0, ..SeriesConfig::default() });
        let breaker: crate::models::cluster::BreakerSection = toml::from_str("enabled = true").unwrap();
        assert_eq!(breaker, crate::models::cluster::BreakerSection { enabled: true, ..Default::default() });
    }
}
