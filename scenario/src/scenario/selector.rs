//! Which grid point a claim is about, and how it follows that point when the command
//! line narrows the grid.
//!
//! A claim names a point of the **file's** grid: by its row-major index
//! (`grid_point = 1`), or by its case label and axis values (`case = "breaker"`,
//! `point = { "faults.0.duration_s" = 2 }`). `--grid`, `--case` and `--set` may
//! replace, filter or add axes, so the same point can have another index in the run's
//! grid, or be absent. The claim follows the point by its axis values: it is checked
//! at the one run point with the same values (an axis the command line added must then
//! have a single value), and skipped, saying why, when there is none or more than one.
//! A file without a grid has nothing to follow: its claims name the run's points.
//!
//! Invariant: a followed claim's `grid_point` indexes the run's grid.

use crate::base::error::{Error, Result};
use crate::base::typing::describe;

use super::grid::{shown, GridView, Wanted, CASE_AXIS};

/// `case = "breaker", faults.0.duration_s = 2`, for messages.
pub fn describe_wanted(wanted: &[(String, toml::Value)]) -> String {
    if wanted.is_empty() {
        return "the only point".into();
    }
    wanted.iter().map(|(path, value)| format!("{path} = {}", describe(value))).collect::<Vec<_>>().join(", ")
}

/// The values a claim's `case` and `point` name, checked against the file's grid:
/// each a path of one of its axes, the case one of its labels.
pub fn wanted_by_name(path: &str, case: Option<&str>, point: Option<&toml::Table>, file: GridView) -> Result<Wanted> {
    let mut wanted = Vec::new();
    if let Some(label) = case {
        let Some(axis) = file.axes.iter().find(|axis| axis.path == CASE_AXIS) else {
            return Err(Error::bad_input(format!("{path}.case = {label:?}: the scenario's grid has no [[grid.case]]")));
        };
        let labels: Vec<String> = axis.values.iter().map(|v| describe(&shown(CASE_AXIS, v))).collect();
        if !axis.values.iter().any(|v| shown(CASE_AXIS, v).as_str() == Some(label)) {
            return Err(Error::bad_input(format!(
                "{path}.case = {label:?}: no such case; the cases: {}",
                labels.join(", ")
            )));
        }
        wanted.push((CASE_AXIS.to_string(), toml::Value::String(label.to_string())));
    }
    for (key, value) in point.into_iter().flatten() {
        let key = super::overrides::normalize_path(key);
        if key == CASE_AXIS {
            return Err(Error::bad_input(format!("{path}.point: name the case with case = \"…\", beside point")));
        }
        if !file.axes.iter().any(|axis| axis.path == key) {
            let axes: Vec<&str> = file.axes.iter().map(|axis| axis.path.as_str()).collect();
            return Err(Error::bad_input(format!(
                "{path}.point: {key:?} is not an axis of the scenario's grid; its axes: {}",
                if axes.is_empty() { "none".to_string() } else { axes.join(", ") }
            )));
        }
        wanted.push((key, value.clone()));
    }
    Ok(wanted)
}

#[cfg(test)]
mod tests {
    use super::super::grid::Found;
    use super::super::overrides::GridAxis;
    use super::*;

    fn axis(path: &str, values: &str) -> GridAxis {
        let table: toml::Table = format!("v = {values}").parse().unwrap();
        GridAxis { path: path.into(), values: table["v"].as_array().unwrap().clone() }
    }

    #[test]
    fn a_point_is_found_by_its_values_in_a_narrowed_or_crossed_grid() {
        let file = [axis("case", "[{ label = \"a\" }, { label = \"b\" }]"), axis("x.n", "[1, 2, 3]")];
        let view = GridView { axes: &file, points: None };
        assert_eq!(view.values(4), vec![("case".into(), "b".into()), ("x.n".into(), toml::Value::Integer(2))]);
        assert_eq!(view.find(&view.values(4)), Found::At(4));
        let narrowed = [axis("case", "[{ label = \"b\" }]"), axis("x.n", "[2.0]")];
        let run = GridView { axes: &narrowed, points: None };
        assert_eq!(run.find(&view.values(4)), Found::At(0), "2 is 2.0, b is the case b");
        assert_eq!(run.find(&view.values(0)), Found::Nowhere);
        let crossed =
            [axis("case", "[{ label = \"a\" }, { label = \"b\" }]"), axis("x.n", "[1, 2, 3]"), axis("y", "[5, 6]")];
        let run = GridView { axes: &crossed, points: None };
        assert_eq!(run.find(&view.values(4)), Found::Several(2), "an added axis with two values");
        let mut wanted = view.values(4);
        wanted.push(("y".into(), toml::Value::Integer(6)));
        assert_eq!(run.find(&wanted), Found::At(4 * 2 + 1));
        let listed = vec![vec![1, 2, 0], vec![1, 1, 1]];
        let run = GridView { axes: &crossed, points: Some(&listed) };
        assert_eq!(run.find(&wanted), Found::At(1), "a listed grid is searched by its combinations");
        let wanted = wanted_by_name("verify[0]", Some("b"), None, view).unwrap();
        assert_eq!(view.find(&wanted), Found::Several(3));
        let error = wanted_by_name("verify[0]", Some("c"), None, view).unwrap_err().to_string();
        assert!(error.contains("no such case; the cases: \"a\", \"b\""), "{error}");
        let point: toml::Table = "\"x[0]\" = 1".parse().unwrap();
        let error = wanted_by_name("verify[0]", None, Some(&point), view).unwrap_err().to_string();
        assert!(error.contains("\"x.0\" is not an axis of the scenario's grid; its axes: case, x.n"), "{error}");
    }
}
