//! An output folder read back: the manifest (its format checked), the tables the
//! report draws from, `verify.json` when `verify` wrote one, and the scenario
//! re-resolved from the manifest's `scenario_toml` so that the model can say what
//! its metrics mean and what it wants drawn.
//!
//! A folder whose scenario no longer resolves (written by an older version whose
//! fields have since changed) still gets a report from its tables alone; the report
//! says what it could not show and why.

use std::path::{Path, PathBuf};

use serde_json::Value;
use stampede_output::Table;
use stampede_run::report::MANIFEST_FORMAT;
use stampede_scenario::models::MetricDef;
use stampede_scenario::{Error, Result, Scenario};

/// The fields of `manifest.json` the report uses.
#[derive(Clone, Debug)]
pub struct Manifest {
    pub scenario: String,
    pub model: String,
    pub version: String,
    pub seed: String,
    pub replicas: u64,
    pub grid_points: u32,
    /// Axis paths, in grid order.
    pub axes: Vec<String>,
    pub metrics: Vec<String>,
    pub latencies: Vec<String>,
    pub series: Vec<String>,
    /// The request kinds whose latency is in timeseries.parquet (none in folders
    /// written before it existed).
    pub timed: Vec<String>,
    pub files: Vec<String>,
    pub command_line: Vec<String>,
    pub wall_time_s: f64,
    pub scenario_toml: String,
    /// The folder relative input files of the scenario are read from.
    pub scenario_dir: Option<String>,
    pub threads: u64,
    /// How `--precision` chose the replicas (or `merge --precision` judged them): its sentence.
    pub precision: Option<String>,
    /// How `warmup_s = "auto"` chose the warm-up: its sentence.
    pub warmup: Option<String>,
    /// The summary, replica rows and series are written long (one row per metric or
    /// series; `stampede_output::long`); [`Folder::read`] pivots them back wide.
    pub long: bool,
}

/// Everything the report reads from a folder.
pub struct Folder {
    pub dir: PathBuf,
    /// The folder as the page names it (a staging folder is named as its destination).
    pub shown: PathBuf,
    pub manifest: Manifest,
    pub summary: Table,
    pub histograms: Table,
    pub timeseries: Option<Table>,
    /// Extra tables by file name (the model's count histogram).
    pub extra: Vec<(String, Table)>,
    /// `verify.json`, when `stampede verify` wrote the folder.
    pub verify: Option<Value>,
    /// The scenario as recorded, resolved again; `Err` says why it could not be.
    pub scenario: std::result::Result<Scenario, String>,
}

fn field<'a>(manifest: &'a Value, name: &str, path: &Path) -> Result<&'a Value> {
    manifest.get(name).ok_or_else(|| Error::bad_input(format!("{}: manifest has no field {name:?}", path.display())))
}

fn strings(value: &Value) -> Vec<String> {
    value.as_array().map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_string)).collect()).unwrap_or_default()
}

impl Manifest {
    /// Parses `manifest.json`; a format other than this version's is an error.
    pub fn read(path: &Path) -> Result<Manifest> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            Error::bad_input(format!("{}: {e}; is this an output folder of `stampede run`?", path.display()))
        })?;
        let json: Value = serde_json::from_str(&text)
            .map_err(|e| Error::bad_input(format!("{}: not a JSON manifest: {e}", path.display())))?;
        if json.get("tool").and_then(Value::as_str) != Some("stampede") {
            return Err(Error::bad_input(format!(
                "{}: not a stampede manifest (no \"tool\": \"stampede\")",
                path.display()
            )));
        }
        // Folders written before the field existed are format 1.
        let format = json.get("format").map_or(Some(1), Value::as_u64);
        if format != Some(u64::from(MANIFEST_FORMAT)) {
            let written = json.get("format").map_or_else(|| "1".to_string(), Value::to_string);
            let version = json.get("version").and_then(Value::as_str).unwrap_or("an unknown version");
            return Err(Error::bad_input(format!(
                "{}: output format {written} (written by stampede {version}); this stampede {} reads format {MANIFEST_FORMAT}; \
                 run the scenario again, or use the stampede that wrote it",
                path.display(),
                env!("CARGO_PKG_VERSION")
            )));
        }
        let text_of =
            |name: &str| -> Result<String> { Ok(field(&json, name, path)?.as_str().unwrap_or_default().to_string()) };
        Ok(Manifest {
            scenario: text_of("scenario")?,
            model: text_of("model")?,
            version: text_of("version")?,
            seed: field(&json, "seed", path)?.to_string().trim_matches('"').to_string(),
            replicas: field(&json, "replicas", path)?.as_u64().unwrap_or(0),
            grid_points: field(&json, "grid_points", path)?.as_u64().unwrap_or(0) as u32,
            axes: field(&json, "grid", path)?
                .as_array()
                .map(|axes| axes.iter().filter_map(|a| a.get("path")?.as_str().map(str::to_string)).collect())
                .unwrap_or_default(),
            metrics: strings(field(&json, "metrics", path)?),
            latencies: strings(field(&json, "latencies", path)?),
            series: json.get("series").map(strings).unwrap_or_default(),
            timed: json.get("latency_over_time").map(strings).unwrap_or_default(),
            files: strings(field(&json, "files", path)?),
            command_line: json.get("command_line").map(strings).unwrap_or_default(),
            wall_time_s: json.get("wall_time_s").and_then(Value::as_f64).unwrap_or(f64::NAN),
            scenario_toml: text_of("scenario_toml")?,
            scenario_dir: json.get("scenario_dir").and_then(Value::as_str).map(str::to_string),
            threads: json.pointer("/host/threads").and_then(Value::as_u64).unwrap_or(0),
            precision: json.pointer("/precision/sentence").and_then(Value::as_str).map(str::to_string),
            warmup: json.pointer("/warmup/sentence").and_then(Value::as_str).map(str::to_string),
            long: json.get("layout").and_then(|layout| layout.get("long")).is_some(),
        })
    }
}

impl Manifest {
    /// `table` as every reader expects it: wide (pivoted back on its `name_column` when
    /// the folder was written long).
    pub fn wide(&self, table: Table, name_column: &str) -> Result<Table> {
        if !self.long {
            return Ok(table);
        }
        stampede_output::pivot(&table, name_column)
            .map_err(|e| Error::bad_input(format!("cannot read the output folder: {e}")))
    }
}

impl Folder {
    /// Reads the output folder `dir`.
    pub fn read(dir: &Path) -> Result<Folder> {
        let mut folder = Folder::read_but_series(dir)?;
        folder.read_series(None)?;
        Ok(folder)
    }

    /// Reads `timeseries.parquet` (pivoted back wide when written long); with `keep`,
    /// a long table's rows of the columns `keep` passes only (a big graph's report
    /// draws a few of its thousands of series: see `big`).
    pub fn read_series(&mut self, keep: Option<&dyn Fn(&str) -> bool>) -> Result<()> {
        let files = &self.manifest.files;
        let read = match keep {
            Some(keep) if self.manifest.long => {
                stampede_output::read::read_output_table_where(&self.dir, "timeseries", files, "series", keep)
            }
            _ => stampede_output::read::read_output_table(&self.dir, "timeseries", files),
        };
        self.timeseries = read
            .map_err(|e| Error::bad_input(format!("cannot read the output folder: {e}")))?
            .map(|table| self.manifest.wide(table, "series"))
            .transpose()?;
        Ok(())
    }

    /// Reads the output folder `dir` but its time series (see [`Folder::read_series`]).
    pub fn read_but_series(dir: &Path) -> Result<Folder> {
        if !dir.is_dir() {
            return Err(Error::bad_input(format!("{}: no such output folder", dir.display())));
        }
        let manifest = Manifest::read(&dir.join("manifest.json"))?;
        let table = |name: &str| -> Result<Table> {
            Table::read(&dir.join(name)).map_err(|e| Error::bad_input(format!("cannot read the output folder: {e}")))
        };
        let summary = manifest.wide(table("summary.parquet")?, "metric")?;
        let histograms = table("histograms.parquet")?;
        let standard = ["replicas.parquet", "summary.parquet", "histograms.parquet", "timeseries.parquet"];
        let partitioned = |f: &str| f.starts_with("replicas/") || f.starts_with("timeseries/");
        let mut extra = Vec::new();
        for file in manifest
            .files
            .iter()
            .filter(|f| f.ends_with(".parquet") && !standard.contains(&f.as_str()) && !partitioned(f))
        {
            extra.push((file.clone(), table(file)?));
        }
        let verify_path = dir.join("verify.json");
        let verify = match std::fs::read_to_string(&verify_path) {
            Ok(text) => Some(
                serde_json::from_str(&text)
                    .map_err(|e| Error::bad_input(format!("{}: not JSON: {e}", verify_path.display())))?,
            ),
            Err(_) => None,
        };
        let scenario = Scenario::from_manifest(&manifest.scenario_toml, manifest.scenario_dir.as_deref())
            .map_err(|e| e.to_string());
        let scenario = scenario.and_then(|s| {
            if s.point_count() == manifest.grid_points {
                Ok(s)
            } else {
                Err(format!("it now has {} grid points, the folder {}", s.point_count(), manifest.grid_points))
            }
        });
        Ok(Folder {
            dir: dir.to_path_buf(),
            shown: dir.to_path_buf(),
            manifest,
            summary,
            histograms,
            timeseries: None,
            extra,
            verify,
            scenario,
        })
    }

    /// The model's metric definitions (headline, direction, unit), or plain ones named
    /// after the manifest's metrics when the scenario could not be resolved.
    pub fn metric_defs(&self) -> Vec<MetricDef> {
        match &self.scenario {
            Ok(scenario) => scenario.schema.metrics.clone(),
            Err(_) => self
                .manifest
                .metrics
                .iter()
                .map(|name| {
                    let name: &'static str = Box::leak(name.clone().into_boxed_str());
                    MetricDef::new(name, stampede_scenario::models::MetricKind::Real, "", false)
                })
                .collect(),
        }
    }
}
