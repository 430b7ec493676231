//! A scenario file's `[rare]` section: the question `stampede rare` asks of this
//! scenario when the command line does not (`event`, `within`, `score`, `until`,
//! `per`), so a scenario can carry its rare event with it. `run`, `verify` and every
//! other command ignore the section; `show` keeps it.
//!
//! Invariant (checked at parse): `within` and `per` are durations ([`seconds`]) and
//! `per` is at least `within`. The conditions are checked against the model's state
//! quantities when `rare` runs (the document layer knows no model).

use serde::{Deserialize, Serialize};

use crate::base::error::{Error, Result};
use crate::base::typing::typed_at;

/// `[rare]`: defaults for `stampede rare` on this scenario.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RareSection {
    /// `--event`: `QUANTITY OP NUMBER`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event: Option<String>,
    /// `--within`: a duration (`60s`, `10m`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub within: Option<String>,
    /// `--score`: a quantity's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score: Option<String>,
    /// `--until`: `QUANTITY OP NUMBER`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<String>,
    /// `--per`: a duration (`1d`) to give the probability per.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per: Option<String>,
}

impl RareSection {
    /// The section `value`, checked.
    pub fn parse(value: toml::Value) -> Result<RareSection> {
        let section: RareSection = typed_at("rare", value)?;
        let within = section.within.as_deref().map(|text| seconds("rare.within", text)).transpose()?;
        let per = section.per.as_deref().map(|text| seconds("rare.per", text)).transpose()?;
        if let (Some(within), Some(per)) = (within, per) {
            if per < within {
                return Err(Error::bad_input(format!(
                    "scenario field rare.per = {:?}: shorter than rare.within = {:?}; the probability per a period \
                     counts its windows of `within`",
                    section.per.as_deref().unwrap_or_default(),
                    section.within.as_deref().unwrap_or_default()
                )));
            }
        }
        Ok(section)
    }

    /// Whether the section says anything (`show` leaves an empty one out).
    pub fn is_empty(&self) -> bool {
        *self == RareSection::default()
    }
}

/// A duration given as `field` (`--within`, `rare.per`), read by
/// [`duration_s`](crate::base::numbers::duration_s), at most the longest simulated time.
pub fn seconds(field: &str, text: &str) -> Result<f64> {
    crate::base::numbers::duration_s(text).filter(|value| *value <= crate::base::checks::MAX_SECONDS).ok_or_else(|| {
        Error::bad_input(format!("{field} {text:?}: a positive duration, seconds or with s, m, h or d (60s, 10m, 1d)"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<RareSection> {
        RareSection::parse(toml::Value::Table(text.parse().unwrap()))
    }

    #[test]
    fn durations_read_with_units_and_say_what_they_want() {
        assert_eq!(seconds("--within", "90").unwrap(), 90.0);
        assert_eq!(seconds("--within", "10m").unwrap(), 600.0);
        assert_eq!(seconds("--per", "1d").unwrap(), 86_400.0);
        let wrong = seconds("--within", "-1h").unwrap_err().to_string();
        assert!(wrong.contains("--within \"-1h\": a positive duration"), "{wrong}");
    }

    #[test]
    fn the_section_reads_its_fields_and_names_a_wrong_one() {
        let section = parse("event = \"api.queue_depth >= 150\"\nwithin = \"60s\"\nper = \"1d\"").unwrap();
        assert_eq!(section.event.as_deref(), Some("api.queue_depth >= 150"));
        assert!(parse("").unwrap().is_empty());
        let short = parse("within = \"1h\"\nper = \"1m\"").unwrap_err().to_string();
        assert!(short.contains("rare.per = \"1m\": shorter than rare.within"), "{short}");
        let bad = parse("within = \"soon\"").unwrap_err().to_string();
        assert!(bad.contains("rare.within \"soon\""), "{bad}");
        let unknown = parse("evnt = \"x >= 1\"").unwrap_err().to_string();
        assert!(unknown.contains("rare") && unknown.contains("evnt"), "{unknown}");
    }
}
