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
//! Resolution order: the file, then every `--set PATH=VALUE`, then the grid (the
//! file's axes, replaced or extended by `--grid PATH=V1,V2`). Every grid point is
//! typed and validated before anything runs, so a bad value anywhere is reported
//! up front with its field path. Grid points are numbered row-major: the first axis
//! varies slowest.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::{Error, Result};
use crate::models::ModelConfig;

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
    fn validate(&self) -> Result<()> {
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

/// One axis of a policy grid: a dotted field path and the values it takes.
#[derive(Clone, Debug, PartialEq)]
pub struct GridAxis {
    pub path: String,
    pub values: Vec<toml::Value>,
}

/// Command-line changes to a scenario.
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    /// `--set PATH=VALUE`, in order (later wins).
    pub sets: Vec<(String, toml::Value)>,
    /// `--grid PATH=V1,V2,…`: replaces the file's axis of the same path, or adds one.
    pub grids: Vec<GridAxis>,
}

/// A fully resolved, validated scenario.
#[derive(Clone, Debug)]
pub struct Scenario {
    pub name: String,
    pub description: String,
    pub model: ModelConfig,
    pub run: RunConfig,
    pub grid: Vec<GridAxis>,
    /// `[[verify]]` assertions for `stampede verify`.
    pub verify: Vec<Assertion>,
    /// The run and model sections after `--set`, before grid values are applied.
    body: toml::Table,
}

/// One point of the grid, typed and validated.
#[derive(Clone, Debug)]
pub struct GridPoint {
    pub index: u32,
    /// (axis path, value) in axis order.
    pub params: Vec<(String, toml::Value)>,
    pub model: ModelConfig,
    pub run: RunConfig,
}

/// The grid axis whose values are labelled patches of several sections:
/// `case = [{ label = "naive", stack = { client = "naive" } }, { label = "brownout", incidents = [...] }]`.
pub const CASE_AXIS: &str = "case";

const TOP_LEVEL: &[&str] = &["name", "description", "model", "run", "grid", "verify"];

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
struct Assertions {
    verify: Vec<Assertion>,
}
/// The most grid points one run may have.
pub const MAX_GRID_POINTS: usize = 1_000_000;

/// Deserialises `value` into `T`, reporting the failing field by its dotted path.
pub fn typed<T: DeserializeOwned>(value: toml::Value) -> Result<T> {
    typed_at("", value)
}

/// Like [`typed`] for a section found at `prefix`.
pub fn typed_at<T: DeserializeOwned>(prefix: &str, value: toml::Value) -> Result<T> {
    serde_path_to_error::deserialize(value).map_err(|error| {
        let inner = error.path().to_string();
        let path = match (prefix.is_empty(), inner.as_str()) {
            (true, _) => inner.clone(),
            (false, ".") => prefix.to_string(),
            (false, _) => format!("{prefix}.{inner}"),
        };
        let path = if path == "." { "top level".to_string() } else { path };
        // toml's message ends with its own "in `key`" line; the path above says it better.
        let message = error.into_inner().to_string();
        let message = message.split("\nin `").next().unwrap_or_default().trim_end();
        Error::bad_input(format!("scenario field {path}: {message}"))
    })
}

/// Parses scenario text. `origin` names it in messages (a path or `built-in x`).
pub fn parse_text(text: &str, origin: &str) -> Result<toml::Table> {
    text.parse::<toml::Table>()
        .map_err(|error| Error::bad_input(format!("{origin} is not valid TOML: {}", error.to_string().trim_end())))
}

/// Checks a dotted path: non-empty parts of letters, digits, `_` and `-`.
fn check_path(path: &str, flag: &str) -> Result<()> {
    let valid = !path.is_empty()
        && path
            .split('.')
            .all(|part| !part.is_empty() && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'));
    if valid {
        Ok(())
    } else {
        Err(Error::bad_input(format!("{flag} path {path:?}: expected a dotted field path such as queue.servers")))
    }
}

/// Parses a command-line value as TOML (`3`, `1.5`, `true`, `"x"`, `[1, 2]`); a bare
/// word that is not TOML is taken as a string (`fifo`).
pub fn parse_cli_value(text: &str) -> toml::Value {
    let text = text.trim();
    match format!("v = {text}").parse::<toml::Table>() {
        Ok(mut table) => table.remove("v").expect("parsed key"),
        Err(_) => toml::Value::String(text.to_string()),
    }
}

/// Parses `--set PATH=VALUE`.
pub fn parse_set(argument: &str) -> Result<(String, toml::Value)> {
    let Some((path, value)) = argument.split_once('=') else {
        return Err(Error::bad_input(format!("--set {argument:?}: expected PATH=VALUE, e.g. --set queue.servers=3")));
    };
    let path = path.trim();
    check_path(path, "--set")?;
    if value.trim().is_empty() {
        return Err(Error::bad_input(format!("--set {argument:?}: the value after '=' is empty")));
    }
    Ok((path.to_string(), parse_cli_value(value)))
}

/// Parses `--grid PATH=V1,V2,…`.
pub fn parse_grid(argument: &str) -> Result<GridAxis> {
    let Some((path, values)) = argument.split_once('=') else {
        return Err(Error::bad_input(format!(
            "--grid {argument:?}: expected PATH=V1,V2,…, e.g. --grid queue.servers=2,3,4"
        )));
    };
    let path = path.trim();
    check_path(path, "--grid")?;
    let parts: Vec<&str> = values.split(',').map(str::trim).collect();
    if parts.iter().any(|part| part.is_empty()) {
        return Err(Error::bad_input(format!("--grid {argument:?}: every value between commas must be non-empty")));
    }
    Ok(GridAxis { path: path.to_string(), values: parts.into_iter().map(parse_cli_value).collect() })
}

/// Sets `value` at dotted `path` inside `table`, creating intermediate tables.
fn set_path(table: &mut toml::Table, path: &str, value: toml::Value) -> Result<()> {
    let mut parts: Vec<&str> = path.split('.').collect();
    let last = parts.pop().expect("paths are non-empty");
    let mut current = table;
    let mut walked = String::new();
    for part in parts {
        if !walked.is_empty() {
            walked.push('.');
        }
        walked.push_str(part);
        let entry = current.entry(part.to_string()).or_insert_with(|| toml::Value::Table(toml::Table::new()));
        current = match entry {
            toml::Value::Table(inner) => inner,
            other => {
                return Err(Error::bad_input(format!(
                    "cannot set {path}: {walked} is {}, not a section",
                    describe(other)
                )))
            }
        };
    }
    current.insert(last.to_string(), value);
    Ok(())
}

/// Like [`set_path`], but a table value is merged key by key into the table already
/// at `path` (recursively), so a grid axis over a section can change several of its
/// fields together: `"retry" = [{policy = "naive"}, {policy = "backoff", budget = "ratio"}]`.
fn merge_path(table: &mut toml::Table, path: &str, value: toml::Value) -> Result<()> {
    match value {
        toml::Value::Table(fields) => {
            for (key, inner) in fields {
                merge_path(table, &format!("{path}.{key}"), inner)?;
            }
            Ok(())
        }
        other => set_path(table, path, other),
    }
}

/// A value as it would be written in TOML, for messages and column values.
pub fn describe(value: &toml::Value) -> String {
    match value {
        toml::Value::String(s) => format!("{s:?}"),
        other => other.to_string(),
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
        let path = if prefix.is_empty() { key } else { format!("{prefix}.{key}") };
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
    let forbidden = ["name", "description", "model", "grid", "verify"].contains(&root)
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

impl Scenario {
    /// Resolves a parsed scenario file with command-line overrides and validates
    /// every grid point.
    pub fn resolve(mut source: toml::Table, overrides: &Overrides) -> Result<Scenario> {
        for (path, value) in &overrides.sets {
            if path == "grid" || path.starts_with("grid.") {
                return Err(Error::bad_input(format!("--set {path}: grid axes are changed with --grid, not --set")));
            }
            set_path(&mut source, path, value.clone())?;
        }
        let name = take_string(&mut source, "name", true)?.expect("required");
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
            return Err(Error::bad_input(format!(
                "scenario field name = {name:?}: must be letters, digits, '-' or '_' (it names the output folder)"
            )));
        }
        let description = take_string(&mut source, "description", false)?.unwrap_or_default();
        let model_name = take_string(&mut source, "model", true)?.expect("required");
        // The model name first: its sections decide which other fields are allowed.
        if !crate::models::MODEL_NAMES.contains(&model_name.as_str()) {
            return Err(Error::bad_input(format!(
                "scenario field model = {model_name:?}: unknown model; known models: {}",
                crate::models::MODEL_NAMES.join(", ")
            )));
        }
        let sections = ModelConfig::section_names(&model_name);
        for key in source.keys() {
            if !TOP_LEVEL.contains(&key.as_str()) && !sections.contains(&key.as_str()) {
                let mut allowed: Vec<&str> = TOP_LEVEL.to_vec();
                allowed.extend_from_slice(sections);
                return Err(Error::bad_input(format!(
                    "scenario field {key}: unknown field for model {model_name:?}; expected one of: {}",
                    allowed.join(", ")
                )));
            }
        }
        let mut grid = Vec::new();
        match source.remove("grid") {
            None => {}
            Some(toml::Value::Table(table)) => collect_axes("", table, &mut grid)?,
            Some(other) => {
                return Err(Error::bad_input(format!(
                    "scenario field grid = {}: must be a table of axes, e.g. [grid] \"queue.servers\" = [1, 2]",
                    describe(&other)
                )))
            }
        }
        for axis in &overrides.grids {
            match grid.iter_mut().find(|existing| existing.path == axis.path) {
                Some(existing) => existing.values = axis.values.clone(),
                None => grid.push(axis.clone()),
            }
        }
        for axis in &grid {
            check_axis(axis)?;
        }
        let verify = match source.remove("verify") {
            None => Vec::new(),
            Some(value) => {
                let mut wrapper = toml::Table::new();
                wrapper.insert("verify".into(), value);
                typed::<Assertions>(toml::Value::Table(wrapper))?.verify
            }
        };
        let points: usize = grid
            .iter()
            .map(|axis| axis.values.len())
            .try_fold(1usize, |acc, n| acc.checked_mul(n))
            .unwrap_or(usize::MAX);
        if points > MAX_GRID_POINTS {
            return Err(Error::bad_input(format!("grid: {points} points; at most {MAX_GRID_POINTS} are allowed")));
        }
        let (model, run) = Self::typed_body(&model_name, source.clone())?;
        let scenario = Scenario { name, description, model, run, grid, verify, body: source };
        // Validate every point now: bad input must fail before anything is written.
        let points = scenario.grid_points()?.len();
        for (i, assertion) in scenario.verify.iter().enumerate() {
            let path = format!("verify[{i}]");
            if assertion.grid_point as usize >= points {
                return Err(Error::bad_input(format!(
                    "{path}.grid_point = {}: the grid has {points} point(s), numbered from 0",
                    assertion.grid_point
                )));
            }
            if !scenario.model.metrics().iter().any(|m| m.name == assertion.metric) {
                let names: Vec<&str> = scenario.model.metrics().iter().map(|m| m.name).collect();
                return Err(Error::bad_input(format!(
                    "{path}.metric = {:?}: not a metric of model {}; its metrics: {}",
                    assertion.metric,
                    scenario.model.name(),
                    names.join(", ")
                )));
            }
            for (side, relative) in [("above", &assertion.above), ("below", &assertion.below)] {
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
            if assertion.at_least.is_none()
                && assertion.at_most.is_none()
                && assertion.above.is_none()
                && assertion.below.is_none()
            {
                return Err(Error::bad_input(format!("{path}: needs at least one of at_least, at_most, above, below")));
            }
        }
        Ok(scenario)
    }

    fn typed_body(model_name: &str, mut body: toml::Table) -> Result<(ModelConfig, RunConfig)> {
        let run_value = body
            .remove("run")
            .ok_or_else(|| Error::bad_input("scenario field run: missing; every scenario needs a [run] section"))?;
        let run: RunConfig = typed_at("run", run_value)?;
        run.validate()?;
        let model = ModelConfig::from_sections(model_name, body)?;
        model.validate(&run)?;
        Ok((model, run))
    }

    /// Every grid point, typed and validated, in row-major order.
    pub fn grid_points(&self) -> Result<Vec<GridPoint>> {
        let count: usize = self.grid.iter().map(|axis| axis.values.len()).product();
        let mut points = Vec::with_capacity(count);
        for index in 0..count {
            let mut rest = index;
            let mut choice = vec![0; self.grid.len()];
            for (slot, axis) in choice.iter_mut().zip(&self.grid).rev() {
                *slot = rest % axis.values.len();
                rest /= axis.values.len();
            }
            let chosen: Vec<(String, toml::Value)> =
                self.grid.iter().zip(&choice).map(|(axis, &i)| (axis.path.clone(), axis.values[i].clone())).collect();
            let mut body = self.body.clone();
            let mut params = Vec::with_capacity(chosen.len());
            for (path, value) in chosen {
                if path == CASE_AXIS {
                    // A case patches several sections at once; its label is its column value.
                    let toml::Value::Table(mut patch) = value else {
                        return Err(Error::bad_input(format!(
                            "grid.case: each case must be a table with a label, e.g. {{ label = \"naive\", stack = {{ client = \"naive\" }} }}; got {}",
                            describe(&value)
                        )));
                    };
                    let Some(toml::Value::String(label)) = patch.remove("label") else {
                        return Err(Error::bad_input(
                            "grid.case: every case needs label = \"…\" (it names the grid point)",
                        ));
                    };
                    for (key, inner) in patch {
                        merge_path(&mut body, &key, inner)
                            .map_err(|e| e.context(format!("grid point {index} (case {label:?})")))?;
                    }
                    params.push((path, toml::Value::String(label)));
                } else {
                    merge_path(&mut body, &path, value.clone())
                        .map_err(|e| e.context(format!("grid point {index} ({path} = {})", describe(&value))))?;
                    params.push((path, value));
                }
            }
            let context = || {
                let shown: Vec<String> = params.iter().map(|(p, v)| format!("{p} = {}", describe(v))).collect();
                format!("grid point {index} ({})", shown.join(", "))
            };
            let (model, run) = Self::typed_body(self.model.name(), body).map_err(|e| {
                if self.grid.is_empty() {
                    e
                } else {
                    e.context(context())
                }
            })?;
            points.push(GridPoint { index: index as u32, params, model, run });
        }
        Ok(points)
    }

    /// The resolved scenario as a complete TOML file; `run` gives the same results from it.
    pub fn to_toml(&self) -> String {
        let mut table = toml::Table::new();
        table.insert("name".into(), toml::Value::String(self.name.clone()));
        table.insert("description".into(), toml::Value::String(self.description.clone()));
        table.insert("model".into(), toml::Value::String(self.model.name().into()));
        table.insert("run".into(), toml::Value::try_from(&self.run).expect("run serialises"));
        for (key, value) in self.model.to_sections() {
            table.insert(key, value);
        }
        if !self.grid.is_empty() {
            let axes: toml::Table =
                self.grid.iter().map(|axis| (axis.path.clone(), toml::Value::Array(axis.values.clone()))).collect();
            table.insert("grid".into(), toml::Value::Table(axes));
        }
        if !self.verify.is_empty() {
            let entries = self.verify.iter().map(|a| toml::Value::try_from(a).expect("assertions serialise")).collect();
            table.insert("verify".into(), toml::Value::Array(entries));
        }
        toml::to_string(&table).expect("a table serialises")
    }
}
