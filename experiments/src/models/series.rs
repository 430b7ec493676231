//! The `[series]` section shared by the models that report time series: the
//! bucket width and how long a queue must stay in its band to count as recovered.

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
}

impl Default for SeriesConfig {
    fn default() -> Self {
        SeriesConfig { bucket_s: 0.01, recovery_hold_s: 0.2 }
    }
}

impl SeriesConfig {
    /// A positive bucket, at most a million buckets over the run, a non-negative hold.
    pub fn validate(&self, run: &RunConfig) -> Result<()> {
        positive("series.bucket_s", self.bucket_s, "a positive number of seconds")?;
        if run.horizon_s / self.bucket_s > 1_000_000.0 {
            return Err(Error::bad_input(format!(
                "series.bucket_s = {}: gives more than 1000000 buckets over run.horizon_s",
                self.bucket_s
            )));
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
