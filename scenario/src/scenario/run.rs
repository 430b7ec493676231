//! The `[run]` section: horizon, warm-up, replicas and the master seed, with its
//! validation. Every model reads it; no model owns it.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::base::error::{Error, Result};

/// The `[run]` section.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunConfig {
    /// Simulated seconds per replica.
    pub horizon_s: f64,
    /// Simulated seconds discarded at the start of each replica.
    #[serde(default)]
    pub warmup_s: f64,
    /// Independent replicas per grid point.
    pub replicas: u32,
    /// Master seed. TOML integers stop at 2^63 - 1; larger seeds are written as strings.
    #[serde(default = "default_seed", serialize_with = "serialize_seed", deserialize_with = "deserialize_seed")]
    pub seed: u64,
}

fn default_seed() -> u64 {
    1
}

fn serialize_seed<S: Serializer>(seed: &u64, serializer: S) -> std::result::Result<S::Ok, S::Error> {
    match i64::try_from(*seed) {
        Ok(small) => serializer.serialize_i64(small),
        Err(_) => serializer.serialize_str(&seed.to_string()),
    }
}

fn deserialize_seed<'de, D: Deserializer<'de>>(deserializer: D) -> std::result::Result<u64, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Seed {
        Integer(i64),
        Text(String),
    }
    let invalid = |shown: String| {
        serde::de::Error::custom(format!("invalid seed {shown}, expected an integer from 0 to 18446744073709551615"))
    };
    match Seed::deserialize(deserializer)? {
        Seed::Integer(value) => u64::try_from(value).map_err(|_| invalid(value.to_string())),
        Seed::Text(text) => text.parse().map_err(|_| invalid(format!("{text:?}"))),
    }
}

impl RunConfig {
    pub fn validate(&self) -> Result<()> {
        if !(self.horizon_s.is_finite() && self.horizon_s > 0.0 && self.horizon_s < 1.8e10) {
            return Err(Error::bad_input(format!(
                "run.horizon_s = {}: must be a positive number of seconds (below 1.8e10)",
                self.horizon_s
            )));
        }
        if !(self.warmup_s.is_finite() && self.warmup_s >= 0.0 && self.warmup_s < self.horizon_s) {
            return Err(Error::bad_input(format!(
                "run.warmup_s = {}: must be at least 0 and below run.horizon_s ({})",
                self.warmup_s, self.horizon_s
            )));
        }
        if self.replicas == 0 {
            return Err(Error::bad_input("run.replicas = 0: must be at least 1"));
        }
        Ok(())
    }
}
