//! The `[run]` section: horizon, warm-up (seconds, or `"auto"` for `run` and `verify` to
//! choose), replicas and the master seed, with its
//! validation. Every model reads it; no model owns it.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::base::error::{Error, Result};

/// The `[run]` section.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "RunDocument", into = "RunDocument")]
pub struct RunConfig {
    /// Simulated seconds per replica.
    pub horizon_s: f64,
    /// Simulated seconds discarded at the start of each replica (0 while an automatic
    /// warm-up is still to be chosen).
    pub warmup_s: f64,
    /// Independent replicas per grid point.
    pub replicas: u32,
    /// Master seed. TOML integers stop at 2^63 - 1; larger seeds are written as strings.
    pub seed: u64,
    /// `warmup_s = "auto"`: `run` and `verify` choose the warm-up from a pilot
    /// (`stampede_run::warmup`) and run with it in seconds.
    pub warmup_auto: bool,
    /// The time series the automatic warm-up reads (default: the model's first).
    pub warmup_series: Option<String>,
}

/// `[run]` as written: `warmup_s` is seconds or `"auto"`.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RunDocument {
    horizon_s: f64,
    #[serde(default)]
    warmup_s: WarmupValue,
    replicas: u32,
    #[serde(default = "default_seed", serialize_with = "serialize_seed", deserialize_with = "deserialize_seed")]
    seed: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    warmup_series: Option<String>,
}

/// Seconds, or the word `auto`.
#[derive(Clone, Debug, PartialEq)]
enum WarmupValue {
    Seconds(f64),
    Auto,
}

impl Default for WarmupValue {
    fn default() -> Self {
        WarmupValue::Seconds(0.0)
    }
}

impl Serialize for WarmupValue {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        match self {
            WarmupValue::Seconds(seconds) => serializer.serialize_f64(*seconds),
            WarmupValue::Auto => serializer.serialize_str("auto"),
        }
    }
}

impl<'de> Deserialize<'de> for WarmupValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = WarmupValue;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a number of seconds or \"auto\"")
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> std::result::Result<WarmupValue, E> {
                Ok(WarmupValue::Seconds(v))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> std::result::Result<WarmupValue, E> {
                Ok(WarmupValue::Seconds(v as f64))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> std::result::Result<WarmupValue, E> {
                Ok(WarmupValue::Seconds(v as f64))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> std::result::Result<WarmupValue, E> {
                if v == "auto" {
                    Ok(WarmupValue::Auto)
                } else {
                    Err(E::custom(format!("{v:?}: a number of seconds or \"auto\" (chosen from a pilot by MSER-5)")))
                }
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

impl TryFrom<RunDocument> for RunConfig {
    type Error = String;
    fn try_from(doc: RunDocument) -> std::result::Result<RunConfig, String> {
        let (warmup_s, warmup_auto) = match doc.warmup_s {
            WarmupValue::Seconds(seconds) => (seconds, false),
            WarmupValue::Auto => (0.0, true),
        };
        if let (Some(series), false) = (&doc.warmup_series, warmup_auto) {
            return Err(format!(
                "warmup_series = {series:?}: names the series an automatic warm-up reads; set warmup_s = \"auto\" too, or drop it"
            ));
        }
        Ok(RunConfig {
            horizon_s: doc.horizon_s,
            warmup_s,
            replicas: doc.replicas,
            seed: doc.seed,
            warmup_auto,
            warmup_series: doc.warmup_series,
        })
    }
}

impl From<RunConfig> for RunDocument {
    fn from(run: RunConfig) -> RunDocument {
        RunDocument {
            horizon_s: run.horizon_s,
            warmup_s: if run.warmup_auto { WarmupValue::Auto } else { WarmupValue::Seconds(run.warmup_s) },
            replicas: run.replicas,
            seed: run.seed,
            warmup_series: run.warmup_series,
        }
    }
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
