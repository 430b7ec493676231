//! The `[series]` section shared by the models that report time series: the
//! bucket width and how long a queue must stay in its band to count as recovered.

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeriesConfig {
    pub bucket_s: f64,
    pub recovery_hold_s: f64,
}

impl Default for SeriesConfig {
    fn default() -> Self {
        SeriesConfig { bucket_s: 0.01, recovery_hold_s: 0.2 }
    }
}
