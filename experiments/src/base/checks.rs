//! Range checks that name the field: `path = value: must be …`.

use super::error::{Error, Result};

pub fn positive(path: &str, value: f64, what: &str) -> Result<()> {
    if value.is_finite() && value > 0.0 {
        Ok(())
    } else {
        Err(Error::bad_input(format!("{path} = {value}: must be {what}")))
    }
}

pub fn at_least_one(path: &str, value: u32) -> Result<()> {
    if value >= 1 {
        Ok(())
    } else {
        Err(Error::bad_input(format!("{path} = {value}: must be at least 1")))
    }
}
