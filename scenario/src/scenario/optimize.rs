//! A scenario file's `[optimize]` section: how `stampede optimize` treats this
//! scenario when the command line does not say. Today one field pair: `across`, the
//! grid axis the scenario's users want a policy robust against (its faults), and
//! `robust`, how a candidate's values over that axis become one (`worst`, `mean`).
//! `run`, `verify` and every other command ignore the section; `show` keeps it.
//!
//! Invariant (checked at parse): `across` names an axis of the scenario's grid, and
//! `robust` is set only beside it.

use serde::{Deserialize, Serialize};

use crate::base::error::{Error, Result};
use crate::base::typing::typed_at;

use super::overrides::GridAxis;

/// The values `robust` takes.
pub const ROBUST: [&str; 2] = ["worst", "mean"];

/// `[optimize]`: defaults for `stampede optimize` on this scenario.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct OptimizeSection {
    /// A grid axis to be robust against (`--across`): `"faults"`, or `["faults"]`.
    #[serde(default, deserialize_with = "one_axis", skip_serializing_if = "Option::is_none")]
    pub across: Option<String>,
    /// `--robust`: `worst` (default) or `mean`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub robust: Option<String>,
}

/// `across = "faults"` or `across = ["faults"]` (the list form reads as the issue
/// and the CLI's help write it; one axis at a time).
fn one_axis<'de, D: serde::Deserializer<'de>>(deserializer: D) -> std::result::Result<Option<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrList {
        One(String),
        List(Vec<String>),
    }
    match OneOrList::deserialize(deserializer) {
        Ok(OneOrList::One(axis)) => Ok(Some(axis)),
        Ok(OneOrList::List(axes)) if axes.len() == 1 => Ok(axes.into_iter().next()),
        Ok(OneOrList::List(axes)) => Err(serde::de::Error::custom(format!(
            "{} axes given; optimize is robust across one axis: make the scenarios one axis of cases \
             ([[grid.case]] with the faults and the load of each)",
            axes.len()
        ))),
        Err(_) => Err(serde::de::Error::custom("expected a grid axis's path, e.g. \"faults\"")),
    }
}

impl OptimizeSection {
    /// The section `value` of a scenario whose grid is `grid`, checked.
    pub fn parse(value: toml::Value, grid: &[GridAxis]) -> Result<OptimizeSection> {
        let section: OptimizeSection = typed_at("optimize", value)?;
        if let Some(robust) = &section.robust {
            if !ROBUST.contains(&robust.as_str()) {
                return Err(Error::bad_input(format!(
                    "scenario field optimize.robust = {robust:?}: allowed: {}",
                    ROBUST.join(", ")
                )));
            }
            if section.across.is_none() {
                return Err(Error::bad_input(format!(
                    "scenario field optimize.robust = {robust:?}: needs optimize.across, the axis to be robust against"
                )));
            }
        }
        if let Some(across) = &section.across {
            if !grid.iter().any(|axis| axis.path == *across) {
                let axes: Vec<&str> = grid.iter().map(|axis| axis.path.as_str()).collect();
                return Err(Error::bad_input(format!(
                    "scenario field optimize.across = {across:?}: not a grid axis; the grid's axes: {}",
                    if axes.is_empty() { "none".to_string() } else { axes.join(", ") }
                )));
            }
        }
        Ok(section)
    }

    /// Whether the section says anything (`show` leaves an empty one out).
    pub fn is_empty(&self) -> bool {
        self.across.is_none() && self.robust.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grid() -> Vec<GridAxis> {
        vec![GridAxis { path: "faults".into(), values: vec![toml::Value::Integer(0), toml::Value::Integer(1)] }]
    }

    fn parse(text: &str) -> Result<OptimizeSection> {
        let table: toml::Table = text.parse().unwrap();
        OptimizeSection::parse(toml::Value::Table(table), &grid())
    }

    #[test]
    fn an_axis_is_a_path_or_a_list_of_one() {
        let one = parse("across = \"faults\"").unwrap();
        assert_eq!(one.across.as_deref(), Some("faults"));
        assert_eq!(parse("across = [\"faults\"]\nrobust = \"mean\"").unwrap().robust.as_deref(), Some("mean"));
        assert!(parse("").unwrap().is_empty());
    }

    #[test]
    fn a_wrong_field_names_itself_the_value_and_what_is_allowed() {
        let message = |text: &str| parse(text).unwrap_err().to_string();
        assert!(message("across = \"faultz\"")
            .contains("optimize.across = \"faultz\": not a grid axis; the grid's axes: faults"));
        assert!(message("across = \"faults\"\nrobust = \"best\"")
            .contains("optimize.robust = \"best\": allowed: worst, mean"));
        assert!(message("robust = \"mean\"").contains("needs optimize.across"));
        assert!(
            message("across = [\"faults\", \"load\"]").contains("2 axes given"),
            "{}",
            message("across = [\"faults\", \"load\"]")
        );
        assert!(message("acros = \"faults\"").contains("optimize"), "{}", message("acros = \"faults\""));
    }
}
