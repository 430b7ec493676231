//! Range checks that name the field: `path = value: must be …`.

use super::error::{Error, Result};

pub fn positive(path: &str, value: f64, what: &str) -> Result<()> {
    if value.is_finite() && value > 0.0 {
        Ok(())
    } else {
        Err(Error::bad_input(format!("{path} = {value}: must be {what}")))
    }
}

pub(crate) use super::limits::MAX_SECONDS;
use super::limits::{MAX_EVENTS_PER_REPLICA, MAX_RATE_PER_S};

pub fn at_least_one(path: &str, value: u32) -> Result<()> {
    if value >= 1 {
        Ok(())
    } else {
        Err(Error::bad_input(format!("{path} = {value}: must be at least 1")))
    }
}

/// A queue replica handles about 2 × λ × horizon events (an arrival and a
/// departure per customer); refuse runs that could not finish (over 1e12).
pub fn events_within_budget(horizon_s: f64, rate_path: &str, rate_per_s: f64) -> Result<()> {
    let events = 2.0 * rate_per_s * horizon_s;
    if events.is_nan() || events > MAX_EVENTS_PER_REPLICA {
        return Err(Error::overloaded(format!(
            "run.horizon_s = {horizon_s}: with {rate_path} = {rate_per_s} a replica would need about {events:.1e} \
             events; at most {MAX_EVENTS_PER_REPLICA:e} are allowed"
        )));
    }
    Ok(())
}

/// A positive rate per second, at most 1e12.
pub fn positive_rate(path: &str, value: f64) -> Result<()> {
    if value.is_finite() && value > 0.0 && value <= MAX_RATE_PER_S {
        Ok(())
    } else {
        Err(Error::bad_input(format!(
            "{path} = {value}: must be a positive rate per second, at most {MAX_RATE_PER_S:e}"
        )))
    }
}
