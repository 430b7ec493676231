//! `[[verify]]` claims as written: a bound on one statistic of one metric at one
//! grid point, fixed or relative to another point. Checked against a run by
//! [`crate::verify`]; their grid points and metrics are checked against the typed
//! scenario when it is resolved.

use serde::{Deserialize, Serialize};

use crate::base::error::{Error, Result};

/// Which statistic of a metric an assertion bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Statistic {
    Mean,
    CiLo,
    CiHi,
}

/// A `[[verify]]` entry: a bound on one statistic of one metric at one grid point.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Assertion {
    pub grid_point: u32,
    pub metric: String,
    pub statistic: Statistic,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_least: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_most: Option<f64>,
    /// The statistic must exceed `factor` × a statistic of the same metric at another point.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub above: Option<Relative>,
    /// The statistic must stay below `factor` × a statistic of the same metric at another point.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub below: Option<Relative>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub note: String,
}

/// Another grid point's statistic of the same metric, times `factor` — for claims
/// that are differences (`statistic = "ci_lo"`, `above = { grid_point = 0,
/// statistic = "ci_hi" }` says the two intervals do not overlap).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Relative {
    pub grid_point: u32,
    pub statistic: Statistic,
    #[serde(default = "unit_factor")]
    pub factor: f64,
}

fn unit_factor() -> f64 {
    1.0
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Assertions {
    pub(crate) verify: Vec<Assertion>,
}

impl Assertion {
    /// Checks the claim against a scenario with `points` grid points and these
    /// `metrics` (of model `model`); `path` names it in messages (`verify[2]`).
    pub fn check(&self, path: &str, points: usize, metrics: &[&str], model: &str) -> Result<()> {
        if self.grid_point as usize >= points {
            return Err(Error::bad_input(format!(
                "{path}.grid_point = {}: the grid has {points} point(s), numbered from 0",
                self.grid_point
            )));
        }
        if !metrics.contains(&self.metric.as_str()) {
            return Err(Error::bad_input(format!(
                "{path}.metric = {:?}: not a metric of model {model}; its metrics: {}",
                self.metric,
                metrics.join(", ")
            )));
        }
        for (side, relative) in [("above", &self.above), ("below", &self.below)] {
            if let Some(relative) = relative {
                if relative.grid_point as usize >= points {
                    return Err(Error::bad_input(format!(
                        "{path}.{side}.grid_point = {}: the grid has {points} point(s), numbered from 0",
                        relative.grid_point
                    )));
                }
                if !(relative.factor.is_finite() && relative.factor > 0.0) {
                    return Err(Error::bad_input(format!(
                        "{path}.{side}.factor = {}: must be a positive number",
                        relative.factor
                    )));
                }
            }
        }
        if self.at_least.is_none() && self.at_most.is_none() && self.above.is_none() && self.below.is_none() {
            return Err(Error::bad_input(format!("{path}: needs at least one of at_least, at_most, above, below")));
        }
        Ok(())
    }
}
