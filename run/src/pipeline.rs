//! One `stampede run`, end to end: the runner's results → the output folder.
//!
//! The output folder is one unit ([`stampede_output::StagedFolder`]): files are
//! written into a hidden staging folder beside it, under an advisory lock on the
//! folder, and swapped in with one atomic rename once all of them are complete. A
//! reader sees the previous run or the new one, never a mix; a failed or killed run
//! leaves the previous output untouched (the next run cleans what a killed one left).
//!
//! Memory is flat in the size of the grid: every table is written as the rows
//! arrive — a replica's row when its chunk is done, a grid point's summary,
//! histograms, series and counts when its last replica is — and only a few numbers
//! per grid point stay for the report.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

use stampede_output::hdr::serialize_v2;
use stampede_output::{
    ColumnSpec, ColumnType, ColumnValues, FolderLock, LockError, Melt, OutputErrorKind, Replace, StagedFile,
    StagedFolder, StagedSet, TableWriter,
};

use super::budget;
use super::checkpoint::Checkpoint;
use super::latency::{LatencyStats, QUANTILES};
pub use super::layout::{ReplicaRows, Shape};
use super::over_time;
use super::plan::Plan;
use super::report::{PointReport, RunReport};
use super::rows::replica_values_columns;
use super::runner::{PointResult, ReplicaRecord, Sinks};
use super::windows::{Counted, WindowQuantile};
use stampede_scenario::base::error::{Error, Result};
use stampede_scenario::base::typing::describe;
use stampede_scenario::models::{CountHistogramDef, SeriesKind};
use stampede_scenario::resolved::{GridPoint, Scenario};
use stampede_scenario::scenario::CASE_AXIS;
use stampede_scenario::schema::columns::{leaf_value, LeafColumn};

/// Fields a manifest gains from the finished run: (name, value) pairs.
pub type ManifestFields<'a> = dyn Fn(&RunReport) -> Vec<(&'static str, serde_json::Value)> + 'a;

/// Documents made from a finished run and written into its folder before the folder
/// appears (the HTML report, `verify`'s claims): they read the complete tables and
/// manifest in the staging folder, the manifest lists them, and they appear — or
/// not — with the rest of the folder, atomically.
pub struct Documents<'a> {
    /// Their file names, as the manifest lists them.
    pub files: Vec<&'static str>,
    /// Writes them into the staging folder (the path given), the run's report at hand.
    pub write: &'a dyn Fn(&RunReport, &Path) -> Result<()>,
    /// What they will take on disk, estimated before the run (the free-space check
    /// counts it with the tables; [`budget::report_bytes`], `trace::estimate_bytes`).
    pub disk_bytes: f64,
    /// Fields the manifest gains, made from the finished run (`precision`).
    pub manifest_fields: Option<&'a ManifestFields<'a>>,
}

/// Runs `scenario` with `threads` workers and writes `out_root/<name>/` (tables and
/// manifest only).
pub fn execute(
    scenario: &Scenario,
    out_root: &Path,
    threads: usize,
    progress: &(dyn Fn() + Sync),
) -> Result<RunReport> {
    execute_with(scenario, out_root, threads, progress, None, Writing::default())
}

/// How a run treats what it finds where it writes, and what it writes.
#[derive(Clone, Copy, Debug, Default)]
pub struct Writing {
    /// Keep the pieces of an interrupted run of the same scenario and run only the rest.
    pub resume: bool,
    /// Replace the output folder whatever it holds (`--force`); by default only a
    /// folder stampede wrote is replaced ([`stampede_output::folder::foreign_entries`]).
    pub force: bool,
    /// Which replica rows are written, and where.
    pub shape: Shape,
}

impl Writing {
    pub fn replace(self) -> Replace {
        if self.force {
            Replace::Anything
        } else {
            Replace::OnlyStampedeOutput
        }
    }
}

/// Runs `scenario` with `threads` workers and writes `out_root/<name>/`, with
/// `documents`. The work is checkpointed in `out_root/.NAME.checkpoint/` as it goes
/// ([`super::checkpoint`]); `writing.resume` keeps the pieces an interrupted run of the
/// same scenario left there and runs only the rest. The checkpoint is removed once the
/// folder is in place. A destination holding anything stampede did not write is
/// refused before any work starts, unless `writing.force`.
pub fn execute_with(
    scenario: &Scenario,
    out_root: &Path,
    threads: usize,
    progress: &(dyn Fn() + Sync),
    documents: Option<&Documents>,
    writing: Writing,
) -> Result<RunReport> {
    let resume = writing.resume;
    let mut estimate = budget::estimate(scenario, threads);
    estimate.disk_bytes += documents.map_or(0.0, |d| d.disk_bytes);
    budget::check(estimate, out_root)?;
    let plan = Plan::new(scenario.point_count(), scenario.run.replicas, None);
    let checkpoint_dir = out_root.join(format!(".{}.checkpoint", scenario.name));
    let checkpoint = std::cell::RefCell::new(None);
    // Whether this run got as far as its checkpoint (a run refused at the lock did not).
    let started = std::cell::Cell::new(false);
    // Opened inside the producer: under the folder's lock, so two runs never share it.
    let produce = |sinks: Sinks| {
        // The pieces keep the rows written, and every row while a claim reads replica values.
        let keep = if scenario.replica_metrics().is_empty() { writing.shape.replica_rows } else { ReplicaRows::All };
        let mut opened =
            Checkpoint::open(&checkpoint_dir, &super::partial::fingerprint(scenario), scenario.inputs(), keep, resume)?;
        started.set(true);
        for _ in 0..opened.resumed_tasks {
            progress();
        }
        opened.run(scenario, &plan, threads, progress)?;
        opened.produce(scenario, &plan, sinks)?;
        *checkpoint.borrow_mut() = Some(opened);
        Ok(())
    };
    let report = write_run(scenario, out_root, threads, &produce, documents, writing).map_err(|error| {
        if started.get() && checkpoint_dir.join("checkpoint.json").exists() {
            error.with_hint(format!(
                "the work done so far is kept in {}; the same command with --resume finishes it",
                checkpoint_dir.display()
            ))
        } else {
            error
        }
    })?;
    if let Some(done) = checkpoint.into_inner() {
        done.remove()?;
    }
    Ok(report)
}

/// Writes `out_root/<name>/` from whatever `produce` feeds the sinks — a run's
/// replicas, or shards read back — so a merged folder is written by exactly the code
/// that writes a single run's, byte for byte.
pub fn write_run(
    scenario: &Scenario,
    out_root: &Path,
    threads: usize,
    produce: &dyn Fn(Sinks) -> Result<()>,
    documents: Option<&Documents>,
    writing: Writing,
) -> Result<RunReport> {
    let started = Instant::now();
    let shape = writing.shape;
    let folder = begin_folder(out_root, &scenario.name, writing.replace())?;
    let dir = folder.path();
    let mut replicas_table = ReplicaTable::create(dir, scenario, shape)?;
    let mut tables = Tables::create(dir, scenario, shape)?;
    let kept = scenario.replica_metrics();
    let mut replica_values: BTreeMap<u32, BTreeMap<usize, Vec<f64>>> = BTreeMap::new();
    let mut reports = Vec::new();
    let mut records = |records: &[ReplicaRecord]| -> Result<()> {
        for record in records {
            for &(point, metric) in kept.iter().filter(|(point, _)| *point == record.grid_point) {
                let values = replica_values.entry(point).or_default().entry(metric).or_default();
                values.push(record.metrics[metric]);
            }
        }
        replicas_table.write(scenario, records)
    };
    let mut points = |point: &GridPoint, result: PointResult| -> Result<()> {
        // Once per point: the tables and the report read the same numbers.
        let latencies = PooledLatencies::of(&result);
        tables.write_point(scenario, point, &result, &latencies)?;
        let claimed = latency_claims(scenario, point.index, &result);
        reports.push(PointReport {
            index: point.index,
            params: point.params.clone(),
            covered: result.moments.iter().map(super::moments::Moments::count).collect(),
            replicas: result.replicas.len() as u32,
            latencies: latencies.stats,
            summaries: result.summaries,
            replica_values: BTreeMap::new(),
            latency_claims: claimed,
            compute_s: result.compute_s,
        });
        Ok(())
    };
    produce(Sinks { records: &mut records, point: &mut points })?;
    for report in &mut reports {
        report.replica_values = replica_values.remove(&report.index).unwrap_or_default();
    }
    let mut staged = StagedSet::default();
    let mut written = replicas_table.finish(&mut staged)?;
    written.extend(tables.finish(&mut staged)?);
    let report = RunReport {
        scenario: scenario.clone(),
        points: reports,
        output_dir: folder.destination().to_path_buf(),
        wall_time_s: started.elapsed().as_secs_f64(),
        threads,
    };
    let manifest = manifest(&report, documents, shape, &written);
    let manifest = serde_json::to_vec_pretty(&manifest).expect("JSON serialises");
    staged.push(StagedFile::with_contents(dir, "manifest.json", &manifest)?);
    staged.commit()?;
    if let Some(documents) = documents {
        (documents.write)(&report, dir)?;
    }
    folder.commit()?;
    Ok(report)
}

/// The run's manifest: the report's, with the tables written (in commit order) and
/// how when the output shape is not the default, and the documents' own fields.
fn manifest(report: &RunReport, documents: Option<&Documents>, shape: Shape, written: &[String]) -> serde_json::Value {
    let files = documents.map(|d| d.files.as_slice()).unwrap_or_default();
    let mut manifest = report.manifest(files);
    if shape != Shape::default() {
        // The tables actually written, in commit order, and how.
        let object = manifest.as_object_mut().expect("a manifest is an object");
        let mut listed: Vec<serde_json::Value> = written.iter().map(|f| serde_json::json!(f)).collect();
        listed.push(serde_json::json!("manifest.json"));
        listed.extend(files.iter().map(|f| serde_json::json!(f)));
        object.insert("files".into(), serde_json::Value::Array(listed));
        object.insert(
            "output".into(),
            serde_json::json!({
                "replica_rows": shape.replica_rows.name(),
                "partition_by": if shape.partition_by_point { "grid_point" } else { "none" },
            }),
        );
    }
    if let Some(fields) = documents.and_then(|d| d.manifest_fields) {
        let object = manifest.as_object_mut().expect("a manifest is an object");
        for (name, value) in fields(report) {
            object.insert(name.into(), value);
        }
    }
    manifest
}

/// Locks `root/name` and starts its staging folder; refuses (bad input) a destination
/// `replace` does not allow.
pub fn begin_folder(root: &Path, name: &str, replace: Replace) -> Result<StagedFolder> {
    let destination = root.join(name);
    let cannot = |error: stampede_output::OutputError| match error.kind {
        OutputErrorKind::Foreign | OutputErrorKind::NotAFolder => Error::from(error),
        OutputErrorKind::Io => {
            Error::io(format!("cannot create output folder {}: {}", destination.display(), error.reason))
                .with_hint("choose another folder with --out")
        }
    };
    let lock = match FolderLock::acquire(root, name) {
        Ok(lock) => lock,
        Err(LockError::Busy(pid)) => {
            let who =
                pid.map_or("another stampede run".to_string(), |pid| format!("another stampede run (process {pid})"));
            return Err(Error::io(format!(
                "{who} is writing {} right now; nothing was written",
                destination.display()
            ))
            .with_hint("wait for it to finish, or choose another folder with --out"));
        }
        Err(LockError::Io(error)) => return Err(cannot(error)),
    };
    StagedFolder::begin(root, name, lock, replace).map_err(cannot)
}

/// Every per-point table of one run, written as points finish.
struct Tables {
    summary: TableWriter,
    /// How each grid axis is typed, and the leaf columns: fixed by the grid, worked
    /// out once rather than per row.
    axis_types: Vec<ColumnType>,
    leaves: Vec<LeafColumn>,
    histograms: TableWriter,
    timeseries: Option<Series>,
    counts: Option<(CountHistogramDef, TableWriter)>,
    /// `attribution.parquet` (see [`super::layout::writes_attribution`]).
    attribution: Option<TableWriter>,
}

impl Tables {
    fn create(dir: &Path, scenario: &Scenario, shape: Shape) -> Result<Tables> {
        Ok(Tables {
            summary: create_table(dir, "summary.parquet", &scenario.columns.summary, long_summary(scenario))?,
            axis_types: scenario.columns.axis_types.clone(),
            leaves: scenario.columns.leaves.clone(),
            histograms: TableWriter::create(dir, "histograms.parquet", &scenario.columns.histograms)?,
            timeseries: match (scenario.schema.series.is_empty(), shape.partition_by_point) {
                (true, _) => None,
                (false, false) => Some(Series::Whole(Box::new(create_table(
                    dir,
                    "timeseries.parquet",
                    &scenario.columns.timeseries,
                    scenario.columns.long.as_ref().map(|long| &long.timeseries),
                )?))),
                (false, true) => Some(Series::Partitioned { dir: dir.to_path_buf(), files: Vec::new() }),
            },
            counts: match &scenario.columns.counts {
                None => None,
                Some((def, columns)) => Some((*def, TableWriter::create(dir, def.file, columns)?)),
            },
            attribution: match super::layout::writes_attribution(scenario) {
                false => None,
                true => Some(TableWriter::create_long(dir, "attribution.parquet", &attribution_columns())?),
            },
        })
    }

    /// Writes a finished grid point's rows to every per-point table.
    fn write_point(
        &mut self,
        scenario: &Scenario,
        point: &GridPoint,
        result: &PointResult,
        latencies: &PooledLatencies,
    ) -> Result<()> {
        // Which point the rows are of: the summary's and the time series' first columns.
        let grid = self.grid_values(scenario, point);
        let row = summary_row(grid.clone(), point, result);
        write_shaped(&mut self.summary, long_summary(scenario), row)?;
        self.histograms.write(histogram_rows(scenario, point, latencies))?;
        match &mut self.timeseries {
            None => {}
            Some(Series::Whole(table)) => {
                let melt = scenario.columns.long.as_ref().map(|long| &long.timeseries);
                write_shaped(table, melt, timeseries_rows(scenario, point, &grid, result))?
            }
            Some(Series::Partitioned { dir, files }) => {
                // The grid point is in the path: the file leaves its column out.
                let name = partition_file("timeseries", point.index);
                let columns = &scenario.columns.timeseries[1..];
                let melt = scenario.columns.long.as_ref().map(|long| &long.timeseries_partitioned);
                let mut table = partition_writer(dir, &name, columns, melt)?;
                write_shaped(&mut table, melt, timeseries_rows(scenario, point, &grid, result).split_off(1))?;
                files.push((name, table.finish()?));
            }
        }
        if let Some((_, table)) = &mut self.counts {
            table.write(count_rows(point, result))?;
        }
        if let Some(table) = &mut self.attribution {
            table.write(attribution_rows(scenario, point, result))?;
        }
        Ok(())
    }

    /// The columns that say which grid point a row is of (`grid_point`, the axes,
    /// the leaves), one value each.
    fn grid_values(&self, scenario: &Scenario, point: &GridPoint) -> Vec<ColumnValues> {
        let mut columns = vec![ColumnValues::U32(vec![point.index])];
        for (&kind, (_, value)) in self.axis_types.iter().zip(&point.params) {
            columns.push(axis_value(kind, value));
        }
        columns.extend(self.leaves.iter().flat_map(|leaf| leaf_column_values(scenario, leaf, point)));
        columns
    }

    /// Closes every table, in the order they are committed; returns their names.
    fn finish(self, staged: &mut StagedSet) -> Result<Vec<String>> {
        let mut names = vec!["summary.parquet".to_string(), "histograms.parquet".to_string()];
        staged.push(self.summary.finish()?);
        staged.push(self.histograms.finish()?);
        match self.timeseries {
            None => {}
            Some(Series::Whole(table)) => {
                names.push("timeseries.parquet".into());
                staged.push(table.finish()?);
            }
            Some(Series::Partitioned { files, .. }) => {
                for (name, file) in files {
                    names.push(name);
                    staged.push(file);
                }
            }
        }
        if let Some((def, table)) = self.counts {
            names.push(def.file.to_string());
            staged.push(table.finish()?);
        }
        if let Some(table) = self.attribution {
            names.push("attribution.parquet".to_string());
            staged.push(table.finish()?);
        }
        Ok(names)
    }
}

/// Where the time series go: one table, or one file per grid point.
enum Series {
    /// Boxed: a writer is ten times the size of the list of partitions.
    Whole(Box<TableWriter>),
    Partitioned {
        dir: std::path::PathBuf,
        files: Vec<(String, StagedFile)>,
    },
}

/// `TABLE/grid_point=K/part-0.parquet`: a hive partition's file.
fn partition_file(table: &str, point: u32) -> String {
    format!("{table}/grid_point={point}/part-0.parquet")
}

/// A table in a partition folder under `dir`, created first (long with `melt`).
fn partition_writer(dir: &Path, name: &str, columns: &[ColumnSpec], melt: Option<&Melt>) -> Result<TableWriter> {
    let (folder, file) = name.rsplit_once('/').expect("a partition file is in a folder");
    let folder = dir.join(folder);
    std::fs::create_dir_all(&folder).map_err(|e| Error::io(format!("cannot create {}: {e}", folder.display())))?;
    create_table(&folder, file, columns, melt)
}

/// Table `name` of the wide `columns`, or of their long form with `melt`.
fn create_table(dir: &Path, name: &str, columns: &[ColumnSpec], melt: Option<&Melt>) -> Result<TableWriter> {
    Ok(match melt {
        None => TableWriter::create(dir, name, columns)?,
        Some(melt) => TableWriter::create_long(dir, name, &melt.columns())?,
    })
}

/// `attribution.parquet`: per grid point, entry point and the service that caused its
/// failures (or degradations) and how, the requests per replica — mean, sd, interval
/// and replicas, as the summary has them.
fn attribution_columns() -> Vec<ColumnSpec> {
    let mut columns = vec![ColumnSpec::new("grid_point", ColumnType::U32)];
    columns.extend(["entry", "service", "reason"].map(|name| ColumnSpec::new(name, ColumnType::Utf8)));
    columns.extend(["mean", "sd", "ci_lo", "ci_hi"].map(|name| ColumnSpec::new(name, ColumnType::F64)));
    columns.push(ColumnSpec::new("n", ColumnType::U32));
    columns
}

/// One point's rows of `attribution.parquet`: the (entry, service, reason) that
/// occurred in some replica — a pair that never did is not a row.
fn attribution_rows(scenario: &Scenario, point: &GridPoint, result: &PointResult) -> Vec<ColumnValues> {
    let occurred: Vec<&(usize, stampede_scenario::models::metrics::Attribution)> =
        scenario.schema.attribution.iter().filter(|(metric, _)| result.summaries[*metric].mean > 0.0).collect();
    let text = |pick: fn(&stampede_scenario::models::metrics::Attribution) -> &'static str| {
        ColumnValues::Utf8(occurred.iter().map(|(_, a)| pick(a).to_string()).collect())
    };
    let summary = |pick: fn(&super::stats::Summary) -> f64| {
        ColumnValues::F64(occurred.iter().map(|(metric, _)| pick(&result.summaries[*metric])).collect())
    };
    vec![
        ColumnValues::U32(vec![point.index; occurred.len()]),
        text(|a| a.entry),
        text(|a| a.service),
        text(|a| a.reason),
        summary(|s| s.mean),
        summary(|s| s.sd),
        summary(|s| s.ci_lo),
        summary(|s| s.ci_hi),
        ColumnValues::U32(occurred.iter().map(|(metric, _)| result.moments[*metric].count() as u32).collect()),
    ]
}

/// Writes wide rows to `table` as it is written: as they are, or melted long (block
/// by block).
fn write_shaped(table: &mut TableWriter, melt: Option<&Melt>, wide: Vec<ColumnValues>) -> Result<()> {
    match melt {
        None => table.write(wide)?,
        Some(melt) => {
            for block in melt.blocks(wide) {
                table.write(block)?;
            }
        }
    }
    Ok(())
}

/// The summary's melt, when the scenario is written long.
fn long_summary(scenario: &Scenario) -> Option<&Melt> {
    scenario.columns.long.as_ref().map(|long| &long.summary)
}

/// The per-replica rows: one table, one per grid point, or none, keeping the rows
/// [`ReplicaRows`] keeps.
struct ReplicaTable {
    dir: std::path::PathBuf,
    shape: Shape,
    whole: Option<TableWriter>,
    /// The open partition: its grid point and table.
    open: Option<(u32, String, TableWriter)>,
    files: Vec<(String, StagedFile)>,
}

impl ReplicaTable {
    fn create(dir: &Path, scenario: &Scenario, shape: Shape) -> Result<ReplicaTable> {
        let whole = match (shape.replica_rows, shape.partition_by_point) {
            (ReplicaRows::None, _) | (_, true) => None,
            _ => Some(create_table(
                dir,
                "replicas.parquet",
                &scenario.columns.replicas,
                scenario.columns.long.as_ref().map(|long| &long.replicas),
            )?),
        };
        Ok(ReplicaTable { dir: dir.to_path_buf(), shape, whole, open: None, files: Vec::new() })
    }

    fn write(&mut self, scenario: &Scenario, records: &[ReplicaRecord]) -> Result<()> {
        let records = &*self.shape.replica_rows.filter(records);
        if records.is_empty() {
            return Ok(());
        }
        if let Some(table) = &mut self.whole {
            let melt = scenario.columns.long.as_ref().map(|long| &long.replicas);
            return write_shaped(table, melt, replica_values_columns(scenario, records));
        }
        // Partitioned: records come point after point, a batch may end one and begin the next.
        for run in records.chunk_by(|a, b| a.grid_point == b.grid_point) {
            let point = run[0].grid_point;
            if let Some(open) = self.open.as_ref().map(|(open, ..)| *open).filter(|open| *open != point) {
                self.point_done(open)?;
            }
            let columns = &scenario.columns.replicas[1..];
            let melt = scenario.columns.long.as_ref().map(|long| &long.replicas_partitioned);
            if self.open.is_none() {
                let name = partition_file("replicas", point);
                let table = partition_writer(&self.dir, &name, columns, melt)?;
                self.open = Some((point, name, table));
            }
            let (_, _, table) = self.open.as_mut().expect("opened");
            write_shaped(table, melt, replica_values_columns(scenario, run).split_off(1))?;
        }
        Ok(())
    }

    /// Grid point `point` is complete: its partition is closed.
    fn point_done(&mut self, point: u32) -> Result<()> {
        if let Some((open, ..)) = &self.open {
            if *open == point {
                let (_, name, table) = self.open.take().expect("open");
                self.files.push((name, table.finish()?));
            }
        }
        Ok(())
    }

    /// Closes the rows; returns the files' names, staged in `staged`.
    fn finish(mut self, staged: &mut StagedSet) -> Result<Vec<String>> {
        if let Some((point, ..)) = &self.open {
            let point = *point;
            self.point_done(point)?;
        }
        let mut names = Vec::new();
        if let Some(table) = self.whole {
            names.push("replicas.parquet".to_string());
            staged.push(table.finish()?);
        }
        for (name, file) in self.files {
            names.push(name);
            staged.push(file);
        }
        Ok(names)
    }
}

/// Each latency of a finished point: its headline numbers and its pooled histogram's
/// V2 serialisation, from one pooled histogram made at a time (a dense one is 280 KB).
struct PooledLatencies {
    stats: Vec<LatencyStats>,
    hdr_v2: Vec<Vec<u8>>,
}

impl PooledLatencies {
    fn of(result: &PointResult) -> Self {
        let (mut stats, mut hdr_v2) = (Vec::new(), Vec::new());
        for (i, batched) in result.latency_batches.iter().enumerate() {
            let pooled = result.pooled_latency(i);
            stats.push(LatencyStats::of(&pooled, batched));
            hdr_v2.push(serialize_v2(&pooled.hdr()));
        }
        PooledLatencies { stats, hdr_v2 }
    }
}

/// `histograms.parquet` rows of one point: per latency, the count, the batches of
/// replicas that recorded, each quantile with its sectioning interval, the maximum
/// and the whole HDR histogram (V2 serialisation).
fn histogram_rows(scenario: &Scenario, point: &GridPoint, latencies: &PooledLatencies) -> Vec<ColumnValues> {
    let names = scenario.schema.latencies;
    let stats = &latencies.stats;
    let mut columns = vec![
        ColumnValues::U32(vec![point.index; names.len()]),
        ColumnValues::Utf8(names.iter().map(|n| n.to_string()).collect()),
        ColumnValues::U64(stats.iter().map(|s| s.count).collect()),
        ColumnValues::U32(stats.iter().map(|s| s.batches).collect()),
    ];
    for q in 0..QUANTILES.len() {
        columns.push(ColumnValues::F64(stats.iter().map(|s| s.quantiles_s[q]).collect()));
        columns.push(ColumnValues::F64(stats.iter().map(|s| s.intervals_s[q].0).collect()));
        columns.push(ColumnValues::F64(stats.iter().map(|s| s.intervals_s[q].1).collect()));
    }
    columns.push(ColumnValues::F64(stats.iter().map(|s| s.max_s).collect()));
    columns.push(ColumnValues::Binary(latencies.hdr_v2.clone()));
    columns
}

/// The model's histogram of a small-integer quantity (e.g. `hops.parquet`): exact
/// counts summed over replicas, and each value's share.
fn count_rows(point: &GridPoint, result: &PointResult) -> Vec<ColumnValues> {
    let total: u64 = result.counts.iter().sum();
    let share = |c: &u64| if total == 0 { 0.0 } else { *c as f64 / total as f64 };
    vec![
        ColumnValues::U32(vec![point.index; result.counts.len()]),
        ColumnValues::U32((0..result.counts.len() as u32).collect()),
        ColumnValues::U64(result.counts.clone()),
        ColumnValues::F64(result.counts.iter().map(share).collect()),
    ]
}

fn axis_value(kind: ColumnType, value: &toml::Value) -> ColumnValues {
    match kind {
        ColumnType::I64 => ColumnValues::I64(vec![Some(value.as_integer().expect("typed axis"))]),
        ColumnType::F64 => ColumnValues::F64(vec![value
            .as_float()
            .or_else(|| value.as_integer().map(|i| i as f64))
            .expect("typed axis")]),
        ColumnType::Bool => ColumnValues::Bool(vec![Some(value.as_bool().expect("typed axis"))]),
        _ => ColumnValues::Utf8(vec![value.as_str().map_or_else(|| describe(value), str::to_string)]),
    }
}

/// A leaf's columns at `point`: the value the point sets (NULL where it sets none)
/// and, when the leaf has a `_used` column, the value it ran with.
fn leaf_column_values(scenario: &Scenario, leaf: &LeafColumn, point: &GridPoint) -> Vec<ColumnValues> {
    let axis = &scenario.grid[leaf.axis];
    let chosen = &point.params[leaf.axis].1;
    // A case's column value is its label: find the case it names.
    let value =
        if axis.path == CASE_AXIS { axis.values.iter().find(|v| v.get("label") == Some(chosen)) } else { Some(chosen) };
    let set = value.and_then(|v| leaf_value(v, &leaf.path));
    let mut columns = vec![typed_leaf(leaf.kind, set)];
    if leaf.with_used {
        let used = match set {
            Some(set) => typed_leaf(leaf.kind, Some(set)),
            None => {
                // The resolved sections hold every field's value, defaults included;
                // a section that is off altogether (no breaker) leaves its flag out,
                // which is a `false`.
                let resolved = toml::Value::Table(point.model.to_sections());
                let path: Vec<String> = leaf.name.split('.').map(String::from).collect();
                match (leaf.kind, leaf_value(&resolved, &path)) {
                    (ColumnType::Bool, None) => ColumnValues::Bool(vec![Some(false)]),
                    (kind, found) => typed_leaf(kind, found),
                }
            }
        };
        columns.push(used);
    }
    columns
}

/// One value of a leaf column of type `kind`; NULL when absent or of another type.
fn typed_leaf(kind: ColumnType, value: Option<&toml::Value>) -> ColumnValues {
    let integer =
        |v: &toml::Value| v.as_integer().or_else(|| v.as_float().filter(|f| f.fract() == 0.0).map(|f| f as i64));
    match kind {
        ColumnType::Bool => ColumnValues::Bool(vec![value.and_then(toml::Value::as_bool)]),
        ColumnType::I64 => ColumnValues::I64(vec![value.and_then(integer)]),
        ColumnType::F64 => ColumnValues::F64(vec![value
            .and_then(|v| v.as_float().or_else(|| v.as_integer().map(|i| i as f64)))
            .unwrap_or(f64::NAN)]),
        _ => ColumnValues::NullableUtf8(vec![value.map(|v| v.as_str().map_or_else(|| describe(v), str::to_string))]),
    }
}

/// The pooled quantile each latency claim about grid point `point` bounds, with its
/// sectioning interval: from the whole run's histogram, or from the latency windows
/// its `window` covers. `verify` refuses a claim it cannot check before running; a
/// plain `run` checks no claim, so one it could not check is left out here, never an
/// error.
fn latency_claims(scenario: &Scenario, point: u32, result: &PointResult) -> BTreeMap<usize, WindowQuantile> {
    let mut values = BTreeMap::new();
    let claims = scenario.verify.iter().enumerate().filter(|(_, c)| c.grid_point == point && c.not_here.is_none());
    for (index, claim) in claims {
        let (Some(latency), Some(percent)) = (&claim.latency, claim.quantile) else { continue };
        let q = percent / 100.0;
        let Ok(windows) = scenario.latency_claim_windows(index, claim) else { continue };
        let value = match windows {
            None => {
                let i = scenario.schema.latencies.iter().position(|l| l == latency).expect("a checked latency");
                let pooled = result.pooled_latency(i);
                let pooled = pooled.hdr();
                let nanos = if pooled.is_empty() { f64::NAN } else { pooled.value_at_quantile(q) as f64 };
                let (lo, hi) = result.latency_batches[i].interval(q, nanos);
                WindowQuantile { value_s: nanos / 1e9, ci_lo_s: lo / 1e9, ci_hi_s: hi / 1e9 }
            }
            Some(windows) => {
                let all = latency.ends_with("_all_s");
                let kind = scenario
                    .schema
                    .timed
                    .iter()
                    .position(|t| t.histogram == latency || t.all_histogram() == *latency)
                    .expect("a checked window's latency is kept over time");
                let counted = if all { Counted::All } else { Counted::Ok };
                match result.latency_windows.get(kind) {
                    Some(batched) => batched.quantile(windows, counted, q),
                    None => WindowQuantile { value_s: f64::NAN, ci_lo_s: f64::NAN, ci_hi_s: f64::NAN },
                }
            }
        };
        values.insert(index, value);
    }
    values
}

/// One point's row of `summary.parquet`: its `grid` columns, then its replicas and
/// every metric's mean, sd, interval and count.
fn summary_row(grid: Vec<ColumnValues>, point: &GridPoint, result: &PointResult) -> Vec<ColumnValues> {
    let mut columns = grid;
    // The point's own count: `optimize` gives its candidates different numbers.
    columns.push(ColumnValues::U32(vec![point.run.replicas]));
    for (s, moments) in result.summaries.iter().zip(&result.moments) {
        columns.extend([s.mean, s.sd, s.ci_lo, s.ci_hi].map(|v| ColumnValues::F64(vec![v])));
        columns.push(ColumnValues::U32(vec![moments.count() as u32]));
    }
    columns
}

/// One point's rows of `timeseries.parquet`: its `grid` columns (one value each,
/// repeated on every row), then per bucket each series' mean and 95% interval over
/// replicas, from the exact integer sums.
fn timeseries_rows(
    scenario: &Scenario,
    point: &GridPoint,
    grid: &[ColumnValues],
    result: &PointResult,
) -> Vec<ColumnValues> {
    let series = scenario.schema.series;
    let bucket_s = scenario.schema.series_bucket_s;
    let bucket_ns = stampede_engine::secs_to_nanos(bucket_s);
    let buckets = result.series.buckets();
    let mut values: Vec<Vec<f64>> = vec![Vec::with_capacity(buckets); series.len() * 3];
    for bucket in 0..buckets {
        for (index, def) in series.iter().enumerate() {
            let scale = match def.kind {
                SeriesKind::Area => 1.0 / (bucket_s * 1e9),
                SeriesKind::Count => 1.0 / bucket_s,
            };
            let summary = result.series.summary(index, bucket, scale);
            values[3 * index].push(summary.mean);
            values[3 * index + 1].push(summary.ci_lo);
            values[3 * index + 2].push(summary.ci_hi);
        }
    }
    let every_bucket = vec![0; buckets];
    let mut batch: Vec<ColumnValues> = grid.iter().map(|value| value.pick(&every_bucket)).collect();
    batch.extend([
        ColumnValues::U32((0..buckets as u32).collect()),
        // From integer nanoseconds, so that bucket 301 of 10 ms starts at 3.01, not 3.0100000000000002.
        ColumnValues::F64((0..buckets).map(|b| (b as u64 * bucket_ns) as f64 / 1e9).collect()),
    ]);
    batch.extend(values.into_iter().map(ColumnValues::F64));
    batch.extend(over_time::columns(scenario, point, result, buckets, bucket_ns));
    batch
}
