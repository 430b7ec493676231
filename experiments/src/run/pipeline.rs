//! One `stampede run`, end to end: grid points → runner → the output folder.
//!
//! Files are staged under temporary names while the run goes on and renamed into
//! `OUT/<scenario>/` only once all of them are complete, so a reader never sees a
//! half-written file and a failed run leaves the previous output untouched.

use std::path::Path;
use std::time::Instant;

use stampede_output::hdr::serialize_v2;
use stampede_output::{ColumnSpec, ColumnType, ColumnValues, StagedFile, StagedSet, TableWriter};

use super::latency::{LatencyStats, QUANTILES};
use super::report::RunReport;
use super::runner::{run_grid, PointResult, ReplicaRecord};
use crate::base::error::{Error, Result};
use crate::base::typing::describe;
use crate::models::{CountHistogramDef, MetricKind, SeriesKind};
use crate::resolved::{GridPoint, Scenario};
use crate::scenario::GridAxis;

/// Runs `scenario` with `threads` workers and writes `out_root/<name>/`.
pub fn execute(
    scenario: &Scenario,
    out_root: &Path,
    threads: usize,
    progress: &(dyn Fn() + Sync),
) -> Result<RunReport> {
    let started = Instant::now();
    let points = scenario.grid_points()?;
    let dir = out_root.join(&scenario.name);
    std::fs::create_dir_all(&dir).map_err(|error| {
        Error::io(format!("cannot create output folder {}: {error}", dir.display()))
            .with_hint("choose another folder with --out")
    })?;
    let model = &scenario.model;
    let mut replicas_table = TableWriter::create(&dir, "replicas.parquet", &replica_columns(scenario))?;
    let mut write_error = None;
    let mut sink = |records: &[ReplicaRecord]| -> Result<()> {
        replicas_table.write(replica_values(scenario, records)).map_err(|error| {
            let error = Error::from(error);
            write_error = Some(error.clone());
            error
        })
    };
    let results = run_grid(&points, scenario.run.replicas, scenario.run.seed, threads, progress, &mut sink)?;
    if let Some(error) = write_error {
        return Err(error);
    }
    let mut staged = StagedSet::default();
    staged.push(replicas_table.finish()?);

    let mut summary = TableWriter::create(&dir, "summary.parquet", &summary_columns(scenario))?;
    summary.write(summary_values(scenario, &points, &results))?;
    staged.push(summary.finish()?);

    staged.push(histograms_table(&dir, scenario, &points, &results)?);

    if !model.series().is_empty() {
        staged.push(timeseries_table(&dir, scenario, &points, &results)?);
    }
    if let Some(def) = model.count_histogram() {
        staged.push(count_histogram_table(&dir, def, &points, &results)?);
    }

    let report = RunReport {
        scenario: scenario.clone(),
        points,
        results,
        output_dir: dir.clone(),
        wall_time_s: started.elapsed().as_secs_f64(),
        threads,
    };
    let manifest = serde_json::to_vec_pretty(&report.manifest()).expect("JSON serialises");
    staged.push(StagedFile::with_contents(&dir, "manifest.json", &manifest)?);
    staged.commit()?;
    Ok(report)
}

/// `histograms.parquet`: per grid point and latency, the count, the quantiles, the
/// maximum and the whole HDR histogram (V2 serialisation).
fn histograms_table(
    dir: &Path,
    scenario: &Scenario,
    points: &[GridPoint],
    results: &[PointResult],
) -> Result<StagedFile> {
    let latency_names = scenario.model.latencies();
    let mut histograms = TableWriter::create(dir, "histograms.parquet", &histogram_columns())?;
    let mut grid_point = Vec::new();
    let mut metric = Vec::new();
    let mut count = Vec::new();
    let mut quantiles: Vec<Vec<f64>> = vec![Vec::new(); QUANTILES.len()];
    let mut max = Vec::new();
    let mut hdr = Vec::new();
    for (point, result) in points.iter().zip(results) {
        for (name, histogram) in latency_names.iter().zip(&result.latencies) {
            let stats = LatencyStats::of(histogram);
            grid_point.push(point.index);
            metric.push(name.to_string());
            count.push(stats.count);
            quantiles.iter_mut().zip(&stats.quantiles_s).for_each(|(column, &q)| column.push(q));
            max.push(stats.max_s);
            hdr.push(serialize_v2(histogram.hdr()));
        }
    }
    let mut columns = vec![ColumnValues::U32(grid_point), ColumnValues::Utf8(metric), ColumnValues::U64(count)];
    columns.extend(quantiles.into_iter().map(ColumnValues::F64));
    columns.push(ColumnValues::F64(max));
    columns.push(ColumnValues::Binary(hdr));
    histograms.write(columns)?;
    Ok(histograms.finish()?)
}

/// The model's histogram of a small-integer quantity (e.g. `hops.parquet`): exact
/// counts summed over replicas, and each value's share.
fn count_histogram_table(
    dir: &Path,
    def: CountHistogramDef,
    points: &[GridPoint],
    results: &[PointResult],
) -> Result<StagedFile> {
    let columns = [
        ColumnSpec::new("grid_point", ColumnType::U32),
        ColumnSpec::new(def.column, ColumnType::U32),
        ColumnSpec::new("count", ColumnType::U64),
        ColumnSpec::new("share", ColumnType::F64),
    ];
    let mut table = TableWriter::create(dir, def.file, &columns)?;
    for (point, result) in points.iter().zip(results) {
        let total: u64 = result.counts.iter().sum();
        let share = |c: &u64| if total == 0 { 0.0 } else { *c as f64 / total as f64 };
        table.write(vec![
            ColumnValues::U32(vec![point.index; result.counts.len()]),
            ColumnValues::U32((0..result.counts.len() as u32).collect()),
            ColumnValues::U64(result.counts.clone()),
            ColumnValues::F64(result.counts.iter().map(share).collect()),
        ])?;
    }
    Ok(table.finish()?)
}

fn metric_column_type(kind: MetricKind) -> ColumnType {
    match kind {
        MetricKind::Real => ColumnType::F64,
        MetricKind::Count => ColumnType::U64,
    }
}

fn replica_columns(scenario: &Scenario) -> Vec<ColumnSpec> {
    let mut columns = vec![
        ColumnSpec::new("grid_point", ColumnType::U32),
        ColumnSpec::new("replica", ColumnType::U32),
        ColumnSpec::new("seed", ColumnType::U64),
    ];
    columns.extend(scenario.model.metrics().iter().map(|m| ColumnSpec::new(m.name, metric_column_type(m.kind))));
    columns
}

fn replica_values(scenario: &Scenario, records: &[ReplicaRecord]) -> Vec<ColumnValues> {
    let mut columns = vec![
        ColumnValues::U32(records.iter().map(|r| r.grid_point).collect()),
        ColumnValues::U32(records.iter().map(|r| r.replica).collect()),
        ColumnValues::U64(records.iter().map(|r| r.seed).collect()),
    ];
    for (i, metric) in scenario.model.metrics().iter().enumerate() {
        columns.push(match metric.kind {
            MetricKind::Real => ColumnValues::F64(records.iter().map(|r| r.metrics[i]).collect()),
            MetricKind::Count => ColumnValues::U64(records.iter().map(|r| r.metrics[i] as u64).collect()),
        });
    }
    columns
}

/// How a grid axis is typed in `summary.parquet`: integers stay integers, numbers
/// become floats, booleans stay booleans, anything else is its TOML text.
fn axis_column_type(axis: &GridAxis) -> ColumnType {
    use toml::Value::*;
    if axis.values.iter().all(|v| matches!(v, Integer(_))) {
        ColumnType::I64
    } else if axis.values.iter().all(|v| matches!(v, Integer(_) | Float(_))) {
        ColumnType::F64
    } else if axis.values.iter().all(|v| matches!(v, Boolean(_))) {
        ColumnType::Bool
    } else {
        ColumnType::Utf8
    }
}

fn axis_values(axis_index: usize, kind: ColumnType, points: &[GridPoint]) -> ColumnValues {
    let values = points.iter().map(|p| &p.params[axis_index].1);
    match kind {
        ColumnType::I64 => ColumnValues::I64(values.map(|v| v.as_integer().expect("typed axis")).collect()),
        ColumnType::F64 => ColumnValues::F64(
            values.map(|v| v.as_float().or_else(|| v.as_integer().map(|i| i as f64)).expect("typed axis")).collect(),
        ),
        ColumnType::Bool => ColumnValues::Bool(values.map(|v| v.as_bool().expect("typed axis")).collect()),
        _ => ColumnValues::Utf8(values.map(|v| v.as_str().map_or_else(|| describe(v), str::to_string)).collect()),
    }
}

fn summary_columns(scenario: &Scenario) -> Vec<ColumnSpec> {
    let mut columns = vec![ColumnSpec::new("grid_point", ColumnType::U32)];
    columns.extend(scenario.grid.iter().map(|axis| ColumnSpec::new(&axis.path, axis_column_type(axis))));
    columns.push(ColumnSpec::new("replicas", ColumnType::U32));
    for metric in scenario.model.metrics() {
        for suffix in ["mean", "sd", "ci_lo", "ci_hi"] {
            columns.push(ColumnSpec::new(format!("{}_{suffix}", metric.name), ColumnType::F64));
        }
    }
    columns
}

fn summary_values(scenario: &Scenario, points: &[GridPoint], results: &[PointResult]) -> Vec<ColumnValues> {
    let mut columns = vec![ColumnValues::U32(points.iter().map(|p| p.index).collect())];
    for (i, axis) in scenario.grid.iter().enumerate() {
        columns.push(axis_values(i, axis_column_type(axis), points));
    }
    columns.push(ColumnValues::U32(vec![scenario.run.replicas; points.len()]));
    for m in 0..scenario.model.metrics().len() {
        columns.push(ColumnValues::F64(results.iter().map(|r| r.summaries[m].mean).collect()));
        columns.push(ColumnValues::F64(results.iter().map(|r| r.summaries[m].sd).collect()));
        columns.push(ColumnValues::F64(results.iter().map(|r| r.summaries[m].ci_lo).collect()));
        columns.push(ColumnValues::F64(results.iter().map(|r| r.summaries[m].ci_hi).collect()));
    }
    columns
}

fn histogram_columns() -> Vec<ColumnSpec> {
    let mut columns = vec![
        ColumnSpec::new("grid_point", ColumnType::U32),
        ColumnSpec::new("metric", ColumnType::Utf8),
        ColumnSpec::new("count", ColumnType::U64),
    ];
    columns.extend(QUANTILES.iter().map(|(name, _)| ColumnSpec::new(*name, ColumnType::F64)));
    columns.push(ColumnSpec::new("max_s", ColumnType::F64));
    columns.push(ColumnSpec::new("hdr", ColumnType::Binary));
    columns
}

fn timeseries_table(
    dir: &Path,
    scenario: &Scenario,
    points: &[GridPoint],
    results: &[PointResult],
) -> Result<StagedFile> {
    let series = scenario.model.series();
    let mut columns = vec![
        ColumnSpec::new("grid_point", ColumnType::U32),
        ColumnSpec::new("bucket", ColumnType::U32),
        ColumnSpec::new("t_s", ColumnType::F64),
    ];
    for def in series {
        for suffix in ["mean", "ci_lo", "ci_hi"] {
            columns.push(ColumnSpec::new(format!("{}_{suffix}", def.name), ColumnType::F64));
        }
    }
    let mut table = TableWriter::create(dir, "timeseries.parquet", &columns)?;
    let bucket_s = scenario.model.series_bucket_s();
    let bucket_ns = stampede_engine::secs_to_nanos(bucket_s);
    for (point, result) in points.iter().zip(results) {
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
        let mut batch = vec![
            ColumnValues::U32(vec![point.index; buckets]),
            ColumnValues::U32((0..buckets as u32).collect()),
            // From integer nanoseconds, so that bucket 301 of 10 ms starts at 3.01, not 3.0100000000000002.
            ColumnValues::F64((0..buckets).map(|b| (b as u64 * bucket_ns) as f64 / 1e9).collect()),
        ];
        batch.extend(values.into_iter().map(ColumnValues::F64));
        table.write(batch)?;
    }
    Ok(table.finish()?)
}
