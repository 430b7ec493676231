//! A scenario resolved: the [`Document`] typed by its model, every grid point's
//! configuration validated. Bad input anywhere fails here, before any file exists.
//! This is what `run`, `verify` and `show` work from.

use crate::base::error::{Error, Result};
use crate::base::typing::typed_at;
use std::sync::Arc;

use crate::models::registry;
use crate::models::ModelConfig;
use crate::scenario::claims::{Assertion, Skipped};
use crate::scenario::document::POINTS_KEY;
use crate::scenario::{Document, GridAxis, Overrides, RunConfig};
use crate::schema::{OutputSchema, TableColumns};

/// A `[[verify]]` claim with its position in the list.
pub type NumberedClaim<'a> = (usize, &'a Assertion);

/// A fully resolved, validated scenario.
#[derive(Clone, Debug)]
pub struct Scenario {
    pub name: String,
    pub description: String,
    /// The base configuration (after `--set`, before grid values).
    pub model: ModelConfig,
    /// What the run writes, from the base model; every grid point's is the same.
    pub schema: Arc<OutputSchema>,
    /// Every output table's columns, names and types, computed once from the schema
    /// and the grid: the pipeline, partials, checkpoint pieces and the merge write
    /// with these.
    pub columns: Arc<TableColumns>,
    pub run: RunConfig,
    pub grid: Vec<GridAxis>,
    /// `[[verify]]` assertions for `stampede verify`.
    pub verify: Vec<Assertion>,
    /// See [`Scenario::warnings`].
    warnings: Vec<String>,
    document: Document,
    /// The scenario file's folder: relative input files of distribution values are
    /// read from it (`None`: the current folder).
    base_dir: Option<std::path::PathBuf>,
    /// Every file any grid point reads, sealed when the scenario was resolved.
    inputs: Vec<InputFile>,
    /// The union of every point's [`ModelConfig::optional_columns`]: the base and
    /// every point report them all.
    optional_columns: Vec<&'static str>,
    /// Metric expressions computed per replica as columns of their own (from claims
    /// and from commands; see [`crate::models::expression`]), normalised, in order.
    derived: Vec<String>,
}

/// A file the scenario reads, as sealed for this process ([`crate::inputs::sealed`]):
/// the run uses exactly these bytes, and the manifest, the checkpoint and the shards
/// record this hash.
#[derive(Clone, Debug)]
pub struct InputFile {
    /// The field that names it (`queue.service.file`).
    pub field: String,
    /// The path as the scenario writes it.
    pub file: String,
    pub sealed: Arc<crate::inputs::sealed::Sealed>,
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

/// Refuses what no model can use, once for every model: NaN anywhere, and a duration
/// simulated time cannot hold — any number under a key ending in `_s` (not `_per_s`, a
/// rate), or inside a table so named (`timeouts_s = {…}`), must be 0 or from one
/// nanosecond to [`crate::base::checks::MAX_SECONDS`]. Each model checks its own tighter bounds; these
/// hold for every field a model might turn into nanoseconds, used or not.
fn check_numbers(value: &toml::Value, path: &str, seconds: bool) -> Result<()> {
    let limit = crate::base::checks::MAX_SECONDS;
    match value {
        toml::Value::Float(x) if x.is_nan() => Err(Error::bad_input(format!("{path} = nan: must be a number"))),
        toml::Value::Float(x) if seconds && !(0.0..=limit).contains(x) => {
            Err(Error::bad_input(format!("{path} = {x}: a duration must be from 0 to {limit:e} seconds")))
        }
        // Simulated time is whole nanoseconds: a positive duration below one would
        // become 0 (an incident ending where it starts).
        toml::Value::Float(x) if seconds && *x > 0.0 && *x < 1e-9 => Err(Error::bad_input(format!(
            "{path} = {x}: a duration must be 0 or at least 1e-9 seconds (simulated time counts whole nanoseconds)"
        ))),
        toml::Value::Integer(i) if seconds && !(0.0..=limit).contains(&(*i as f64)) => {
            Err(Error::bad_input(format!("{path} = {i}: a duration must be from 0 to {limit:e} seconds")))
        }
        toml::Value::Table(table) => check_table(table, path, seconds),
        toml::Value::Array(items) => {
            items.iter().enumerate().try_for_each(|(i, item)| check_numbers(item, &format!("{path}[{i}]"), seconds))
        }
        _ => Ok(()),
    }
}

/// [`check_numbers`] on every field of `table` (at `path`; a document's top is "").
fn check_table(table: &toml::Table, path: &str, seconds: bool) -> Result<()> {
    for (key, inner) in table {
        let named = key.ends_with("_s") && !key.ends_with("_per_s");
        let inner_path = if path.is_empty() { key.clone() } else { format!("{path}.{key}") };
        check_numbers(inner, &inner_path, seconds || named)?;
    }
    Ok(())
}

/// Types `[run]` and the model's sections of one table, validating them if `validate`;
/// relative input files are read from `base_dir`.
fn typed_body(
    model_name: &str,
    mut body: toml::Table,
    validate: bool,
    base_dir: Option<&std::path::Path>,
) -> Result<(ModelConfig, RunConfig)> {
    check_table(&body, "", false)?;
    let run_value = body
        .remove("run")
        .ok_or_else(|| Error::bad_input("scenario field run: missing; every scenario needs a [run] section"))?;
    let run: RunConfig = typed_at("run", run_value)?;
    if validate {
        run.validate()?;
    }
    let model = registry::model(model_name).expect("the document checked the model name");
    let config = crate::inputs::with_base_dir(base_dir, || model.configure(body, &run, validate))?;
    Ok((config, run))
}

/// Where the input `file` named by `field` of a `model` scenario is read from: a
/// path field (a gateway's `workload.fixture`) was already rewritten relative to the
/// scenario's folder when the scenario was resolved; a distribution value's or a
/// `[load]` file, kept as written, is read from `base_dir`.
pub fn input_location(model: &str, base_dir: Option<&std::path::Path>, field: &str, file: &str) -> std::path::PathBuf {
    let rewritten = registry::model(model).is_some_and(|m| m.path_fields().contains(&field));
    if rewritten {
        return std::path::PathBuf::from(file);
    }
    crate::inputs::with_base_dir(base_dir, || crate::inputs::locate(file))
}

impl Scenario {
    /// Resolves a parsed scenario file with command-line overrides and validates
    /// every grid point and every claim.
    pub fn resolve(source: toml::Table, overrides: &Overrides) -> Result<Scenario> {
        Self::resolve_with(source, overrides, None)
    }

    fn resolve_with(
        source: toml::Table,
        overrides: &Overrides,
        base_dir: Option<&std::path::Path>,
    ) -> Result<Scenario> {
        let document = Document::parse(source, overrides, &registry::sections())?;
        // With a grid, only the points' values are validated: the base may hold values
        // that every point overrides.
        let (model, run) = typed_body(&document.model, document.body.clone(), document.grid.is_empty(), base_dir)?;
        if run.replicas == 0 {
            // A run setting, never a grid axis: said as such, not against grid point 0.
            return Err(Error::bad_input("run.replicas = 0: must be at least 1 (the replicas of every grid point)"));
        }
        let mut scenario = Scenario {
            warnings: Vec::new(),
            name: document.name.clone(),
            description: document.description.clone(),
            columns: Arc::new(TableColumns::of(&document.grid, &OutputSchema::of(&model))),
            schema: Arc::new(OutputSchema::of(&model)),
            model,
            run,
            grid: document.grid.clone(),
            verify: document.verify.clone(),
            document,
            base_dir: base_dir.map(std::path::Path::to_path_buf),
            inputs: Vec::new(),
            optional_columns: Vec::new(),
            derived: Vec::new(),
        };
        let warned = scenario.validate_points()?;
        let mut scenario = scenario.with_claims_checked()?;
        let all = scenario.point_count() as usize;
        scenario.warnings = warned
            .into_iter()
            .map(|(warning, points)| {
                if points.len() == all {
                    return warning;
                }
                let list: Vec<String> = points.iter().map(u32::to_string).collect();
                format!("grid point{} {}: {warning}", if points.len() == 1 { "" } else { "s" }, list.join(", "))
            })
            .collect();
        Ok(scenario)
    }

    /// Validates every point now: bad input must fail before anything is written.
    /// Points are typed one at a time and dropped: memory stays flat in the grid. Every
    /// point writes the base's columns: a point whose model reports other metrics,
    /// histograms or series (a graph grid that renames a service) cannot. A
    /// mechanism's columns are written when any point turns it on: the base and every
    /// point are widened to the union, and compared again. Reads the input files the
    /// points name; returns each warning with the points that gave it.
    fn validate_points(&mut self) -> Result<Vec<(String, Vec<u32>)>> {
        let mut warned: Vec<(String, Vec<u32>)> = Vec::new();
        let mut optional = self.model.optional_columns();
        let mut mismatch = None;
        for index in 0..self.point_count() {
            let point = self.grid_point(index)?;
            if point.run.warmup_auto != self.run.warmup_auto {
                return Err(Error::bad_input(format!(
                    "grid point {index}: run.warmup_s = {}: \"auto\" is chosen once for the whole grid, as [run] \
                     warmup_s itself, never as a grid value",
                    if point.run.warmup_auto { "\"auto\"".to_string() } else { point.run.warmup_s.to_string() }
                )));
            }
            for group in point.model.optional_columns() {
                if !optional.contains(&group) {
                    optional.push(group);
                }
            }
            for (field, file) in point.model.inputs() {
                if !self.inputs.iter().any(|input| input.field == field && input.file == file) {
                    // Sealed while the point was typed; read now if the model reads it later.
                    let location = input_location(self.model.name(), self.base_dir(), &field, &file);
                    let sealed =
                        crate::inputs::sealed::read(&location).map_err(|e| e.context(format!("{field} = {file:?}")))?;
                    self.inputs.push(InputFile { field, file, sealed });
                }
            }
            for warning in point.model.warnings(&point.run) {
                match warned.iter_mut().find(|(w, _)| *w == warning) {
                    Some((_, points)) => points.push(index),
                    None => warned.push((warning, vec![index])),
                }
            }
            if mismatch.is_none() && !OutputSchema::of(&point.model).same_columns(&self.schema) {
                mismatch = Some(point);
            }
        }
        if !optional.is_empty() {
            self.model = self.model.with_optional_columns(&optional);
            self.schema = Arc::new(OutputSchema::of(&self.model));
            self.columns = Arc::new(TableColumns::of(&self.grid, &self.schema));
            self.optional_columns = optional;
            mismatch = None;
            for index in 0..self.point_count() {
                let point = self.grid_point(index)?;
                if !OutputSchema::of(&point.model).same_columns(&self.schema) {
                    mismatch = Some(point);
                    break;
                }
            }
        }
        if let Some(point) = mismatch {
            return Err(Error::bad_input(format!(
                "grid point {} ({}): its model reports other outputs than the scenario's base; a grid may vary \
                 settings, not what is measured (a graph's services, endpoints, edges or workloads)",
                point.index,
                point
                    .params
                    .iter()
                    .map(|(k, v)| format!("{k} = {}", crate::base::typing::describe(v)))
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        Ok(warned)
    }

    /// Checks every claim against the metrics and latencies; a claim that names an
    /// expression of metrics gets a column of its own.
    fn with_claims_checked(self) -> Result<Scenario> {
        let expressions: Vec<(String, String)> = self
            .verify
            .iter()
            .enumerate()
            .filter(|(_, claim)| crate::models::expression::is_expression(&claim.metric))
            .map(|(i, claim)| (claim.metric.clone(), format!("verify[{i}].metric")))
            .collect();
        let mut scenario = self.with_metrics(&expressions)?;
        for claim in &mut scenario.verify {
            if crate::models::expression::is_expression(&claim.metric) {
                claim.metric = crate::models::expression::normalise(&claim.metric);
            }
        }
        let metrics = scenario.schema.metric_names();
        let latencies = scenario.schema.latency_names();
        let points = scenario.point_count();
        for (i, assertion) in scenario.verify.iter_mut().enumerate() {
            assertion.name_the_point(&format!("verify[{i}]"), points)?;
            assertion.check(&format!("verify[{i}]"), &metrics, &latencies, scenario.model.name())?;
        }
        Ok(scenario)
    }

    /// The metric expressions added by [`Self::with_metrics`], as normalised text.
    pub fn derived_metrics(&self) -> &[String] {
        &self.derived
    }

    /// This scenario with each of `expressions` (text, the field that named it) that is
    /// an expression of metrics (not a plain name) computed per replica as a column of
    /// its own, after the model's metrics and any derived before.
    pub fn with_metrics(mut self, expressions: &[(String, String)]) -> Result<Scenario> {
        let names = self.schema.metric_names();
        let mut added = false;
        for (text, field) in expressions.iter().filter(|(text, _)| crate::models::expression::is_expression(text)) {
            let own: Vec<&str> = names.iter().copied().filter(|n| !self.derived.iter().any(|d| d == n)).collect();
            let expr = crate::models::expression::MetricExpr::parse(text, &own, field)?;
            if !self.derived.contains(&expr.text) {
                self.derived.push(expr.text);
                added = true;
            }
        }
        if added {
            self.model = self.model.with_derived(&self.derived)?;
            self.schema = Arc::new(OutputSchema::of(&self.model));
            self.columns = Arc::new(TableColumns::of(&self.grid, &self.schema));
        }
        Ok(self)
    }

    /// What the model warns about, over every grid point (gathered once, when the
    /// scenario was resolved): each warning once, prefixed with the points it holds
    /// for when that is not all of them.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Every grid point, typed and validated, in row-major order.
    pub fn grid_points(&self) -> Result<Vec<GridPoint>> {
        (0..self.point_count()).map(|index| self.grid_point(index)).collect()
    }

    /// `[grid] points`: the combinations of the axes' values this grid takes, when
    /// it lists them rather than taking every one.
    pub fn grid_combinations(&self) -> Option<&[Vec<u32>]> {
        self.document.points.as_deref()
    }

    /// How many grid points there are.
    pub fn point_count(&self) -> u32 {
        self.document.point_count() as u32
    }

    /// Like [`Self::resolve`] for a scenario read from a file in `dir`: relative file
    /// paths are read from `dir`, not from the current folder. A gateway's
    /// `workload.fixture` is rewritten to that path (paths given with `--set` stay as
    /// given); a distribution value's `file` stays as written (`show` prints it back)
    /// and is read from `dir` when the scenario is typed.
    pub fn resolve_in(mut source: toml::Table, overrides: &Overrides, dir: &std::path::Path) -> Result<Scenario> {
        let model = source.get("model").and_then(toml::Value::as_str).and_then(registry::model);
        for field in model.map(|m| m.path_fields()).unwrap_or_default() {
            let mut parts: Vec<&str> = field.split('.').collect();
            let last = parts.pop().expect("a dotted path");
            let section = parts.iter().try_fold(&mut source, |table, key| table.get_mut(*key)?.as_table_mut());
            if let Some(toml::Value::String(path)) = section.and_then(|table| table.get_mut(last)) {
                if std::path::Path::new(path.as_str()).is_relative() {
                    *path = dir.join(&*path).to_string_lossy().into_owned();
                }
            }
        }
        Self::resolve_with(source, overrides, Some(dir))
    }

    /// Every file a grid point reads (in the order first met), each with the hash of
    /// the bytes the run uses.
    pub fn inputs(&self) -> &[InputFile] {
        &self.inputs
    }

    /// The scenario file's folder, which relative input files are read from (`None`
    /// for a built-in or a scenario given as text).
    pub fn base_dir(&self) -> Option<&std::path::Path> {
        self.base_dir.as_deref()
    }

    /// Resolves the scenario a manifest recorded (`scenario_toml`), reading relative
    /// input files from the folder the manifest names (`scenario_dir`), as the run did.
    pub fn from_manifest(scenario_toml: &str, scenario_dir: Option<&str>) -> Result<Scenario> {
        let source: toml::Table = toml::from_str(scenario_toml)
            .map_err(|e| Error::bad_input(format!("the recorded scenario does not parse: {e}")))?;
        Self::resolve_with(source, &Overrides::default(), scenario_dir.map(std::path::Path::new))
    }

    /// Whether the base scenario (no grid value applied) fails validation with the
    /// same message as a grid point did: then the value at fault is the base's,
    /// which every point that does not override it shares, and the error is said
    /// as the scenario's — not against the first point, which may be a case that
    /// never uses the field (a fallback tier blamed on a client that never falls
    /// back).
    fn base_fails_alike(&self, error: &Error) -> bool {
        match typed_body(&self.document.model, self.document.body.clone(), true, self.base_dir.as_deref()) {
            Err(base) => base.message == error.message,
            Ok(_) => false,
        }
    }

    /// Grid point `index`, typed and validated.
    pub fn grid_point(&self, index: u32) -> Result<GridPoint> {
        let point = self.document.point(index as usize)?;
        let (model, run) =
            typed_body(&self.document.model, point.body.clone(), true, self.base_dir.as_deref()).map_err(|e| {
                if self.grid.is_empty() || self.base_fails_alike(&e) {
                    e
                } else {
                    e.context(point.context())
                }
            })?;
        let model =
            if self.optional_columns.is_empty() { model } else { model.with_optional_columns(&self.optional_columns) };
        let model = if self.derived.is_empty() { model } else { model.with_derived(&self.derived)? };
        Ok(GridPoint { index: point.index, params: point.params, model, run })
    }

    /// [`Scenario::claims_to_check`] for a command that checks claims (`verify`,
    /// `merge --verify`): an error, prefixed with `command`, when the scenario declares
    /// none or none applies to this run (naming each skipped claim and why).
    pub fn claims_that_apply(&self, command: &str) -> Result<(Vec<NumberedClaim<'_>>, Vec<Skipped>)> {
        let name = &self.name;
        if self.verify.is_empty() {
            return Err(Error::bad_input(format!("{command}scenario {name} declares no [[verify]] assertions")));
        }
        let (claims, skipped) = self.claims_to_check()?;
        if claims.is_empty() {
            return Err(Error::bad_input(format!(
                "{command}none of the {} [[verify]] claims of {name} applies to this run: {}",
                skipped.len(),
                skipped.iter().map(|s| format!("verify[{}]: {}", s.index, s.why)).collect::<Vec<_>>().join("; ")
            )));
        }
        Ok((claims, skipped))
    }

    /// The claims `verify` checks on this run, and the ones it skips with the reason
    /// (a grid point a narrowed grid no longer has). An error if a claim can never
    /// hold on this run (an interval with one replica). Each checked claim comes with
    /// its position in `[[verify]]`.
    pub fn claims_to_check(&self) -> Result<(Vec<NumberedClaim<'_>>, Vec<Skipped>)> {
        let (mut checked, mut skipped) = (Vec::new(), Vec::new());
        for (index, claim) in self.verify.iter().enumerate() {
            let path = format!("verify[{index}]");
            match claim.check_for_run(&path, self.point_count() as usize, self.run.replicas)? {
                None => {
                    self.latency_claim_windows(index, claim)?;
                    checked.push((index, claim))
                }
                Some(why) => skipped.push(Skipped { index, why }),
            }
        }
        Ok((checked, skipped))
    }

    /// A checked latency claim's `window` as a range of its grid point's latency
    /// windows (`None` without a window); bad input when the window leaves the
    /// measured run or does not fall on the point's windows.
    pub fn latency_claim_windows(&self, index: usize, claim: &Assertion) -> Result<Option<std::ops::Range<usize>>> {
        if claim.window.is_none() {
            return Ok(None);
        }
        let point = self.grid_point(claim.grid_point)?;
        let width_s = point.model.latency_window_s(&point.run);
        let windows =
            claim.windows_of(&format!("verify[{index}]"), width_s, point.run.warmup_s, point.run.horizon_s)?;
        Ok(windows.map(|(from, to)| from..to))
    }

    /// The (grid point, metric index) pairs whose every replica's value a checked
    /// claim reads (a quantile or a fraction over replicas), sorted.
    pub fn replica_metrics(&self) -> Vec<(u32, usize)> {
        let Ok((claims, _)) = self.claims_to_check() else { return Vec::new() };
        let mut pairs: Vec<(u32, usize)> = claims
            .into_iter()
            .map(|(_, claim)| claim)
            .filter(|claim| claim.statistic.reads_replicas())
            .filter_map(|claim| Some((claim.grid_point, self.schema.metric_index(&claim.metric)?)))
            .collect();
        pairs.sort_unstable();
        pairs.dedup();
        pairs
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
        // A TOML writer puts a list of tables (`[[grid.case]]`) after the plain keys, so
        // an axis of tables before a plain one would come back second: its grid
        // points renumbered, and `points`' indices pointing at other combinations.
        // Such a grid is written inline, in order, after everything else.
        let of_tables = |axis: &GridAxis| axis.values.iter().all(toml::Value::is_table);
        let reordered = self.grid.windows(2).any(|pair| of_tables(&pair[0]) && !of_tables(&pair[1]));
        if !self.grid.is_empty() && !reordered {
            let mut axes: toml::Table =
                self.grid.iter().map(|axis| (axis.path.clone(), toml::Value::Array(axis.values.clone()))).collect();
            if let Some(points) = &self.document.points {
                axes.insert(POINTS_KEY.into(), toml::Value::try_from(points).expect("indices serialise"));
            }
            table.insert("grid".into(), toml::Value::Table(axes));
        }
        // The claims this grid can check, naming its points (a claim it cannot is left
        // out: the point it is about is not in this grid).
        let here: Vec<&Assertion> = self.verify.iter().filter(|a| a.not_here.is_none()).collect();
        if !here.is_empty() {
            let entries = here.iter().map(|a| toml::Value::try_from(a).expect("assertions serialise")).collect();
            table.insert("verify".into(), toml::Value::Array(entries));
        }
        if !self.document.optimize.is_empty() {
            let section = toml::Value::try_from(&self.document.optimize).expect("the section serialises");
            table.insert("optimize".into(), section);
        }
        if !self.document.rare.is_empty() {
            let section = toml::Value::try_from(&self.document.rare).expect("the section serialises");
            table.insert("rare".into(), section);
        }
        let mut text = toml::to_string(&table).expect("a table serialises");
        if reordered {
            text.push_str(&self.grid_inline());
        }
        text
    }

    /// The `[grid]` section with every axis inline, in axis order: a list of tables
    /// one element per line, any other list on one.
    fn grid_inline(&self) -> String {
        let bare = |path: &str| path.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        let key = |path: &str| {
            if bare(path) {
                path.to_string()
            } else {
                toml::Value::String(path.to_string()).to_string()
            }
        };
        let mut text = String::from("\n[grid]\n");
        for axis in &self.grid {
            if axis.values.iter().all(toml::Value::is_table) {
                text.push_str(&format!("{} = [\n", key(&axis.path)));
                for value in &axis.values {
                    text.push_str(&format!("    {value},\n"));
                }
                text.push_str("]\n");
            } else {
                text.push_str(&format!("{} = {}\n", key(&axis.path), toml::Value::Array(axis.values.clone())));
            }
        }
        if let Some(points) = &self.document.points {
            let points = toml::Value::try_from(points).expect("indices serialise");
            text.push_str(&format!("{POINTS_KEY} = {points}\n"));
        }
        text
    }

    /// The file's `[optimize]` section: `stampede optimize`'s defaults (its command
    /// line wins).
    pub fn optimize_section(&self) -> &crate::scenario::optimize::OptimizeSection {
        &self.document.optimize
    }

    /// The file's `[rare]` section: `stampede rare`'s question (its command line wins).
    pub fn rare_section(&self) -> &crate::scenario::RareSection {
        &self.document.rare
    }
}
