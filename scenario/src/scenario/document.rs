//! Scenarios: TOML files naming a model, its sections, a run section and a grid.
//!
//! ```toml
//! name = "mmc"
//! description = "…"
//! model = "mmc"
//! [run]
//! horizon_s = 20000.0
//! warmup_s = 1000.0
//! replicas = 40
//! seed = 1
//! [queue]
//! arrival_rate_per_s = 1.6
//! service_rate_per_s = 1.0
//! servers = 2
//! [grid]
//! "queue.servers" = [2, 3, 4]
//! ```
//!
//! This layer knows no model: the caller says which sections each model reads
//! ([`ModelSections`]), and types each grid point's table ([`PointBody`]) itself.
//!
//! Resolution order: the file, then every `--set PATH=VALUE`, then the grid (the
//! file's axes, replaced or extended by `--grid PATH=V1,V2`). Every grid point is
//! typed and validated before anything runs, so a bad value anywhere is reported
//! up front with its field path. Grid points are numbered row-major: the first axis
//! varies slowest.

use crate::base::error::{Error, Result};
use crate::base::typing::{describe, typed};

use super::claims::{Assertion, Assertions};
use super::grid::GridView;
use super::optimize::OptimizeSection;
use super::overrides::{check_path, merge_path, GridAxis, Overrides};

pub use super::grid::{Combinations, CASE_AXIS};

/// The most grid points one run may have.
pub(crate) const MAX_GRID_POINTS: usize = 1_000_000;

/// The `[grid]` key that lists combinations instead of taking every one (never an
/// axis: a field path always starts with a section name).
pub const POINTS_KEY: &str = "points";

const TOP_LEVEL: &[&str] = &["name", "description", "model", "run", "grid", "verify", "optimize", "rare"];

/// Every model's name, its one-line description and the top-level sections it reads,
/// in listing order.
pub(crate) type ModelSections<'a> = &'a [(&'static str, &'static str, &'static [&'static str])];

/// A scenario file with the command line's overrides applied, not yet typed.
#[derive(Clone, Debug)]
pub struct Document {
    pub name: String,
    pub description: String,
    /// `model = "…"`, one of the known models.
    pub model: String,
    pub grid: Vec<GridAxis>,
    /// `[grid] points = [[0, 2], [1, 0], …]`: only these combinations of the axes'
    /// values (an index per axis, in axis order), in this order, instead of every
    /// combination. `stampede optimize` writes its candidates so.
    pub points: Option<Combinations>,
    /// `[[verify]]` claims.
    pub verify: Vec<Assertion>,
    /// `[optimize]`: `stampede optimize`'s defaults for this scenario.
    pub optimize: OptimizeSection,
    /// `[rare]`: `stampede rare`'s question for this scenario.
    pub rare: super::rare::RareSection,
    /// `[run]` and the model's sections after `--set`, before grid values are applied.
    pub body: toml::Table,
}

/// One grid point's `[run]` and model sections, with the axis values that made it.
#[derive(Clone, Debug)]
pub struct PointBody {
    pub index: u32,
    /// (axis path, value) in axis order; a case's value is its label.
    pub params: Vec<(String, toml::Value)>,
    pub body: toml::Table,
}

impl PointBody {
    /// `grid point 3 (queue.servers = 4)`, to prefix this point's errors with.
    pub fn context(&self) -> String {
        let shown: Vec<String> = self.params.iter().map(|(p, v)| format!("{p} = {}", describe(v))).collect();
        format!("grid point {} ({})", self.index, shown.join(", "))
    }
}

fn take_string(table: &mut toml::Table, key: &str, required: bool) -> Result<Option<String>> {
    match table.remove(key) {
        None if required => Err(Error::bad_input(format!("scenario field {key}: missing; every scenario needs one"))),
        None => Ok(None),
        Some(toml::Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(Error::bad_input(format!("scenario field {key} = {}: must be a string", describe(&other)))),
    }
}

/// Flattens a `[grid]` table: quoted dotted keys and nested tables both name paths.
fn collect_axes(prefix: &str, table: toml::Table, axes: &mut Vec<GridAxis>) -> Result<()> {
    for (key, value) in table {
        let path = super::overrides::normalize_path(&if prefix.is_empty() { key } else { format!("{prefix}.{key}") });
        match value {
            toml::Value::Array(values) if !values.is_empty() => axes.push(GridAxis { path, values }),
            toml::Value::Array(_) => {
                return Err(Error::bad_input(format!("grid.\"{path}\" = []: a grid axis needs at least one value")))
            }
            toml::Value::Table(inner) => collect_axes(&path, inner, axes)?,
            other => {
                return Err(Error::bad_input(format!(
                    "grid.\"{path}\" = {}: a grid axis must be a list of values, e.g. [1, 2, 3]",
                    describe(&other)
                )))
            }
        }
    }
    Ok(())
}

fn check_axis(axis: &GridAxis) -> Result<()> {
    check_path(&axis.path, "grid")?;
    let root = axis.path.split('.').next().unwrap_or_default();
    let forbidden = ["name", "description", "model", "grid", "verify", "optimize", "rare"].contains(&root)
        || axis.path == "run.replicas"
        || axis.path == "run.seed";
    if forbidden {
        return Err(Error::bad_input(format!(
            "grid axis {}: cannot be varied; a grid varies model fields and run.horizon_s / run.warmup_s",
            axis.path
        ))
        .with_hint("use --replicas and --seed for the replica count and the master seed"));
    }
    Ok(())
}

/// A scenario's name names its output folder: at most 100 letters, digits, '-' or '_'.
fn check_name(name: &str) -> Result<()> {
    if name.chars().count() > 100 {
        return Err(Error::bad_input(format!(
            "scenario field name = \"{}…\" ({} characters): must be at most 100 (it names the output folder)",
            name.chars().take(20).collect::<String>(),
            name.chars().count()
        )));
    }
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
        return Err(Error::bad_input(format!(
            "scenario field name = {name:?}: must be letters, digits, '-' or '_' (it names the output folder)"
        )));
    }
    Ok(())
}

/// The sections model `model` takes; an unknown model is refused with the models
/// there are (and the nearest names).
fn model_sections(model: &str, models: ModelSections) -> Result<&'static [&'static str]> {
    if let Some(&(_, _, sections)) = models.iter().find(|(known, _, _)| *known == model) {
        return Ok(sections);
    }
    let width = models.iter().map(|(known, _, _)| known.len()).max().unwrap_or(0);
    let known: String =
        models.iter().map(|(known, description, _)| format!("\n  {known:width$}  {description}")).collect();
    let names: Vec<&str> = models.iter().map(|(known, _, _)| *known).collect();
    let near = crate::base::suggest::nearest(model, &names, 2);
    let hint = if near.is_empty() { ".".to_string() } else { format!("; did you mean {}?", near.join(", ")) };
    Err(Error::bad_input(format!("scenario field model = {model:?}: unknown model{hint} The models:{known}")))
}

impl Document {
    /// Applies `overrides` to a parsed scenario file and checks its shape: the name,
    /// the model (one of `models`), which sections it may have, the grid and the claims.
    pub fn parse(mut source: toml::Table, overrides: &Overrides, models: ModelSections) -> Result<Document> {
        for (path, value) in &overrides.sets {
            if path == "grid" || path.starts_with("grid.") {
                return Err(Error::bad_input(format!("--set {path}: grid axes are changed with --grid, not --set")));
            }
            // A table merges into the section, as a grid axis over a section does.
            merge_path(&mut source, path, value.clone())?;
        }
        let name = take_string(&mut source, "name", true)?.expect("required");
        check_name(&name)?;
        let description = take_string(&mut source, "description", false)?.unwrap_or_default();
        let model = take_string(&mut source, "model", true)?.expect("required");
        // The model name first: its sections decide which other fields are allowed.
        let sections = model_sections(&model, models)?;
        for key in source.keys() {
            if !TOP_LEVEL.contains(&key.as_str()) && !sections.contains(&key.as_str()) {
                let mut allowed: Vec<&str> = TOP_LEVEL.to_vec();
                allowed.extend_from_slice(sections);
                return Err(Error::bad_input(format!(
                    "scenario field {key}: unknown field for model {model:?}; expected one of: {}",
                    allowed.join(", ")
                )));
            }
        }
        let (file_grid, file_points) = Self::take_grid(&mut source)?;
        let (grid, points) = Self::override_grid(file_grid.clone(), file_points.clone(), overrides)?;
        let mut verify = match source.remove("verify") {
            None => Vec::new(),
            Some(value) => {
                let mut wrapper = toml::Table::new();
                wrapper.insert("verify".into(), value);
                typed::<Assertions>(toml::Value::Table(wrapper))?.verify
            }
        };
        let optimize = match source.remove("optimize") {
            None => OptimizeSection::default(),
            Some(value) => OptimizeSection::parse(value, &grid)?,
        };
        let rare = match source.remove("rare") {
            None => super::rare::RareSection::default(),
            Some(value) => super::rare::RareSection::parse(value)?,
        };
        let file = GridView { axes: &file_grid, points: file_points.as_ref() };
        let run = GridView { axes: &grid, points: points.as_ref() };
        for (i, claim) in verify.iter_mut().enumerate() {
            claim.follow(&format!("verify[{i}]"), file, run)?;
        }
        let count: usize = match &points {
            Some(points) => points.len(),
            None => grid
                .iter()
                .map(|axis| axis.values.len())
                .try_fold(1usize, |acc, n| acc.checked_mul(n))
                .unwrap_or(usize::MAX),
        };
        if count > MAX_GRID_POINTS {
            return Err(Error::bad_input(format!("grid: {count} points; at most {MAX_GRID_POINTS} are allowed")));
        }
        Ok(Document { name, description, model, grid, points, verify, optimize, rare, body: source })
    }

    /// The file's `[grid]` axes and its `points`.
    fn take_grid(source: &mut toml::Table) -> Result<(Vec<GridAxis>, Option<Combinations>)> {
        let mut grid = Vec::new();
        let mut points = None;
        match source.remove("grid") {
            None => {}
            Some(toml::Value::Table(mut table)) => {
                if let Some(value) = table.remove(POINTS_KEY) {
                    points = Some(typed::<Vec<Vec<u32>>>(value).map_err(|e| {
                        Error::bad_input(format!(
                            "grid.points: {e}; expected a list of combinations, each an index per axis, e.g. [[0, 2], [1, 0]]"
                        ))
                    })?);
                }
                collect_axes("", table, &mut grid)?
            }
            Some(other) => {
                return Err(Error::bad_input(format!(
                    "scenario field grid = {}: must be a table of axes, e.g. [grid] \"queue.servers\" = [1, 2]",
                    describe(&other)
                )))
            }
        }
        check_points(&grid, points.as_ref())?;
        Ok((grid, points))
    }

    /// The file's grid as the command line changes it: `--grid` replaces or adds an
    /// axis, `--set` on an axis's path leaves it that one value, `--case` keeps the
    /// cases it names. Then checked: the axes, and `points` against them.
    fn override_grid(
        mut grid: Vec<GridAxis>,
        points: Option<Combinations>,
        overrides: &Overrides,
    ) -> Result<(Vec<GridAxis>, Option<Combinations>)> {
        for axis in &overrides.grids {
            match grid.iter_mut().find(|existing| existing.path == axis.path) {
                Some(existing) => existing.values = axis.values.clone(),
                None => grid.push(axis.clone()),
            }
        }
        for (path, value) in &overrides.sets {
            if let Some(axis) = grid.iter_mut().find(|axis| axis.path == *path) {
                axis.values = vec![value.clone()];
            }
        }
        if !overrides.cases.is_empty() {
            keep_cases(&mut grid, points.is_some(), &overrides.cases)?;
        }
        check_points(&grid, points.as_ref())?;
        Ok((grid, points))
    }

    /// How many grid points there are.
    pub fn point_count(&self) -> usize {
        match &self.points {
            Some(points) => points.len(),
            None => self.grid.iter().map(|axis| axis.values.len()).product(),
        }
    }

    /// Grid point `index`'s table: the body with its axis values merged in (a case
    /// patches several sections). Row-major: the first axis varies slowest.
    pub fn point(&self, index: usize) -> Result<PointBody> {
        let choice = GridView { axes: &self.grid, points: self.points.as_ref() }.choice(index);
        let mut body = self.body.clone();
        let mut params = Vec::with_capacity(self.grid.len());
        for (axis, &i) in self.grid.iter().zip(&choice) {
            let (path, value) = (&axis.path, &axis.values[i]);
            if path == CASE_AXIS {
                let label = merge_case(&mut body, value, index)?;
                params.push((path.clone(), toml::Value::String(label)));
            } else {
                merge_path(&mut body, path, value.clone())
                    .map_err(|e| e.context(format!("grid point {index} ({path} = {})", describe(value))))?;
                params.push((path.clone(), value.clone()));
            }
        }
        Ok(PointBody { index: index as u32, params, body })
    }
}

/// The axes are valid, and `points` index them: one index per axis, each below its
/// number of values.
fn check_points(grid: &[GridAxis], points: Option<&Combinations>) -> Result<()> {
    for axis in grid {
        check_axis(axis)?;
    }
    for (i, point) in points.into_iter().flatten().enumerate() {
        let fits = point.len() == grid.len() && point.iter().zip(grid).all(|(&v, a)| (v as usize) < a.values.len());
        if !fits {
            let sizes: Vec<String> = grid.iter().map(|a| format!("{} ({} values)", a.path, a.values.len())).collect();
            return Err(Error::bad_input(format!(
                "grid.points[{i}] = {point:?}: needs one index per axis, each below its axis's number of values; \
                 the axes, in order: {}",
                if sizes.is_empty() { "none".to_string() } else { sizes.join(", ") }
            )));
        }
    }
    Ok(())
}

/// `--case LABEL…`: keeps the cases named, in the file's order; every label must be
/// one of the grid's.
fn keep_cases(grid: &mut [GridAxis], listed: bool, labels: &[String]) -> Result<()> {
    let Some(axis) = grid.iter_mut().find(|axis| axis.path == CASE_AXIS) else {
        return Err(Error::bad_input(format!(
            "--case {:?}: the scenario's grid has no [[grid.case]] to choose from",
            labels[0]
        )));
    };
    if listed {
        return Err(Error::bad_input("--case: the grid lists its points (grid.points); choose them there"));
    }
    let label_of = |value: &toml::Value| value.get("label").and_then(toml::Value::as_str).map(str::to_string);
    let known: Vec<String> = axis.values.iter().filter_map(label_of).collect();
    for label in labels {
        if !known.contains(label) {
            return Err(Error::bad_input(format!(
                "--case {label:?}: no such case; the cases: {}",
                known.iter().map(|k| format!("{k:?}")).collect::<Vec<_>>().join(", ")
            )));
        }
    }
    axis.values.retain(|value| label_of(value).is_some_and(|label| labels.contains(&label)));
    Ok(())
}

/// Merges a case's sections into `body` and returns its label (its column value).
fn merge_case(body: &mut toml::Table, case: &toml::Value, index: usize) -> Result<String> {
    let toml::Value::Table(patch) = case else {
        return Err(Error::bad_input(format!(
            "grid.case: each case must be a table with a label, e.g. {{ label = \"naive\", stack = {{ client = \"naive\" }} }}; got {}",
            describe(case)
        )));
    };
    let mut patch = patch.clone();
    let Some(toml::Value::String(label)) = patch.remove("label") else {
        return Err(Error::bad_input("grid.case: every case needs label = \"…\" (it names the grid point)"));
    };
    for (key, inner) in patch {
        merge_path(body, &key, inner).map_err(|e| e.context(format!("grid point {index} (case {label:?})")))?;
    }
    Ok(label)
}
