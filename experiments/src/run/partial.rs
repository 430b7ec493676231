//! Partial results: what a shard or a checkpoint piece holds, written and read back.
//!
//! A partial folder is `replicas.parquet` (its replicas' rows, columns as a full
//! run's) and `partials.parquet` (per grid point its latency histograms, the exact
//! integer sums behind its time series, its count histogram and its compute time).
//! [`gather`] rebuilds one grid point from any set of partials: its records in
//! replica order and its partials summed — exactly what the runner hands on — so a
//! merge, a resume and a single run fold the same numbers in the same order.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use stampede_engine::LatencyHistogram;
use stampede_output::hdr::{deserialize_v2, serialize_v2};
use stampede_output::{ColumnSpec, ColumnType, ColumnValues, StagedSet, Table, TableWriter};

use super::report::MANIFEST_FORMAT;
use super::rows::{replica_columns, replica_values_columns};
use super::runner::{summaries, PointResult, ReplicaRecord, SeriesSums};
use super::stats::Welford;
use crate::base::error::{Error, Result};
use crate::resolved::Scenario;

/// What identifies a run: shards with the same fingerprint merge into it.
pub fn fingerprint(scenario: &Scenario) -> String {
    let mut hash = Sha256::new();
    for part in [
        scenario.to_toml(),
        scenario.run.seed.to_string(),
        scenario.run.replicas.to_string(),
        MANIFEST_FORMAT.to_string(),
        env!("CARGO_PKG_VERSION").to_string(),
    ] {
        hash.update(part.as_bytes());
        hash.update([0]);
    }
    hash.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

fn partial_columns() -> Vec<ColumnSpec> {
    vec![
        ColumnSpec::new("grid_point", ColumnType::U32),
        ColumnSpec::new("item", ColumnType::Utf8),
        ColumnSpec::new("replicas", ColumnType::U64),
        ColumnSpec::new("extra", ColumnType::U64),
        ColumnSpec::new("data", ColumnType::Binary),
    ]
}

/// One point's partial rows: `hdr:NAME` (V2 bytes; extra = values clamped to the
/// top), `series:NAME` (per bucket sum and sum of squares, u128 LE), `counts`
/// (u64 LE), `compute` (extra = wall-clock ns of its replicas).
fn partial_rows(scenario: &Scenario, point: u32, result: &PointResult) -> Vec<ColumnValues> {
    let replicas = result.series.replicas;
    let mut items: Vec<(String, u64, u64, Vec<u8>)> = Vec::new();
    for (name, histogram) in scenario.schema.latencies.iter().zip(&result.latencies) {
        items.push((format!("hdr:{name}"), 0, histogram.saturated(), serialize_v2(&histogram.hdr())));
    }
    if result.series.buckets() > 0 {
        for (index, def) in scenario.schema.series.iter().enumerate() {
            items.push((format!("series:{}", def.name), replicas, 0, result.series.to_bytes(index)));
        }
    }
    if !result.counts.is_empty() {
        items.push(("counts".into(), 0, 0, result.counts.iter().flat_map(|c| c.to_le_bytes()).collect()));
    }
    items.push(("compute".into(), 0, (result.compute_s * 1e9) as u64, Vec::new()));
    vec![
        ColumnValues::U32(vec![point; items.len()]),
        ColumnValues::Utf8(items.iter().map(|i| i.0.clone()).collect()),
        ColumnValues::U64(items.iter().map(|i| i.1).collect()),
        ColumnValues::U64(items.iter().map(|i| i.2).collect()),
        ColumnValues::Binary(items.into_iter().map(|i| i.3).collect()),
    ]
}

/// A folder of partial results, opened: a shard, or a checkpoint piece. Only where
/// each grid point's rows lie is kept; a point's rows are read from the files when it
/// is gathered, so a merge of many shards holds one shard's slice of one point at a
/// time, not the shards.
pub(crate) struct Part {
    pub(crate) dir: PathBuf,
    /// Row ranges of each grid point in its replica rows and its partial rows (both point-major).
    replica_rows: BTreeMap<u32, std::ops::Range<usize>>,
    partial_rows: BTreeMap<u32, std::ops::Range<usize>>,
    /// The first replica each grid point's rows hold.
    first_replicas: BTreeMap<u32, u32>,
}

/// A grid point's rows of one part: replica numbers, seeds, and the metrics in the
/// model's order.
pub(crate) struct PointRows {
    pub(crate) replica: Vec<u32>,
    pub(crate) seed: Vec<u64>,
    pub(crate) metrics: Vec<Vec<f64>>,
}

/// Rows a gather reads at a time.
const READ_BATCH: usize = 8192;

impl Part {
    /// Opens a partial folder, finding each point's rows by reading its `grid_point`
    /// and `replica` columns (a checkpoint piece or an optimizer's round: small).
    pub(crate) fn read(dir: &Path) -> Result<Part> {
        let bad = |what: String| Error::bad_input(format!("merge: {}: {what}", dir.display()));
        let replicas = Table::read_rows(
            &dir.join("replicas.parquet"),
            &["grid_point", "replica"],
            0..Table::row_count(&dir.join("replicas.parquet")).map_err(|e| bad(e.to_string()))?,
        )
        .map_err(|e| bad(e.to_string()))?;
        let replica_rows = row_ranges(&replicas)?;
        let replica = replicas.numbers("replica").map_err(|e| bad(e.to_string()))?;
        let first_replicas = replica_rows.iter().map(|(&p, rows)| (p, replica[rows.start] as u32)).collect();
        Ok(Part { dir: dir.to_path_buf(), replica_rows, partial_rows: partial_ranges(dir)?, first_replicas })
    }

    /// Opens shard `plan.shard`'s folder: where its rows lie follows from the plan (a
    /// point's replicas in order, point after point), so nothing is read but the
    /// footers and the partials' `grid_point` column; the rows are checked as they are
    /// gathered.
    pub(crate) fn of_shard(dir: &Path, plan: &super::plan::Plan) -> Result<Part> {
        let bad = |what: String| Error::bad_input(format!("merge: {}: {what}", dir.display()));
        let rows = Table::row_count(&dir.join("replicas.parquet")).map_err(|e| bad(e.to_string()))?;
        if rows as u64 != plan.task_count() {
            return Err(bad(format!("its replicas.parquet has {rows} rows; the shard ran {}", plan.task_count())));
        }
        let (mut replica_rows, mut first_replicas, mut start) = (BTreeMap::new(), BTreeMap::new(), 0usize);
        for point in 0..plan.points {
            let replicas = plan.replicas_of(point);
            if !replicas.is_empty() {
                replica_rows.insert(point, start..start + replicas.len());
                first_replicas.insert(point, replicas.start);
                start += replicas.len();
            }
        }
        Ok(Part { dir: dir.to_path_buf(), replica_rows, partial_rows: partial_ranges(dir)?, first_replicas })
    }

    /// Streams grid point `point`'s rows to `each`, a batch at a time.
    pub(crate) fn stream_point(
        &self,
        scenario: &Scenario,
        point: u32,
        each: &mut dyn FnMut(PointRows) -> Result<()>,
    ) -> Result<()> {
        let Some(rows) = self.replica_rows.get(&point) else { return Ok(()) };
        let bad = |what: String| Error::bad_input(format!("merge: {}: {what}", self.dir.display()));
        let names: Vec<&str> = scenario.model.metrics().iter().map(|d| d.name).collect();
        let path = self.dir.join("replicas.parquet");
        let mut read = |table: Table| -> Result<()> {
            // Seeds are u64: read exactly, not through f64.
            let ColumnValues::U64(seed) = table.column("seed").map_err(|e| bad(e.to_string()))?.clone() else {
                return Err(bad("its seed column is not u64".into()));
            };
            let replica = table.numbers("replica").map_err(|e| bad(e.to_string()))?;
            let metrics =
                names.iter().map(|name| table.numbers(name).map_err(|e| bad(e.to_string()))).collect::<Result<_>>()?;
            each(PointRows { replica: replica.into_iter().map(|r| r as u32).collect(), seed, metrics })
        };
        Table::stream_rows(&path, &[], rows.clone(), READ_BATCH, &|e| bad(e.reason), &mut read)
    }

    /// Grid point `point`'s partial rows (histograms, series sums, counts, compute).
    fn partials(&self, point: u32) -> Result<Option<Table>> {
        let Some(rows) = self.partial_rows.get(&point) else { return Ok(None) };
        Table::read_rows(&self.dir.join("partials.parquet"), &[], rows.clone())
            .map(Some)
            .map_err(|e| Error::bad_input(format!("merge: {e}")))
    }
}

/// Each grid point's rows in a partial folder's partials.parquet.
fn partial_ranges(dir: &Path) -> Result<BTreeMap<u32, std::ops::Range<usize>>> {
    let path = dir.join("partials.parquet");
    let bad = |e: stampede_output::OutputError| Error::bad_input(format!("merge: {e}"));
    let rows = Table::row_count(&path).map_err(bad)?;
    row_ranges(&Table::read_rows(&path, &["grid_point"], 0..rows).map_err(bad)?)
}

/// Writes a partial folder's two tables into `dir` (staged; the caller commits).
pub(crate) struct PartWriter {
    replicas: TableWriter,
    partials: TableWriter,
}

impl PartWriter {
    /// A shard's tables (compressed: they are kept, and read by DuckDB).
    pub(crate) fn create(dir: &Path, scenario: &Scenario) -> Result<PartWriter> {
        Ok(PartWriter {
            replicas: TableWriter::create(dir, "replicas.parquet", &replica_columns(scenario))?,
            partials: TableWriter::create(dir, "partials.parquet", &partial_columns())?,
        })
    }

    /// A checkpoint piece's tables (uncompressed scratch: written once, read once).
    pub(crate) fn create_scratch(dir: &Path, scenario: &Scenario) -> Result<PartWriter> {
        Ok(PartWriter {
            replicas: TableWriter::create_scratch(dir, "replicas.parquet", &replica_columns(scenario))?,
            partials: TableWriter::create_scratch(dir, "partials.parquet", &partial_columns())?,
        })
    }

    pub(crate) fn records(&mut self, scenario: &Scenario, records: &[ReplicaRecord]) -> Result<()> {
        Ok(self.replicas.write(replica_values_columns(scenario, records))?)
    }

    pub(crate) fn point(&mut self, scenario: &Scenario, point: u32, result: &PointResult) -> Result<()> {
        Ok(self.partials.write(partial_rows(scenario, point, result))?)
    }

    pub(crate) fn finish(self, staged: &mut StagedSet) -> Result<()> {
        staged.push(self.replicas.finish()?);
        staged.push(self.partials.finish()?);
        Ok(())
    }
}

/// One grid point being gathered from partial folders, one part at a time: its
/// records are streamed on in replica order (checked to be exactly `expected`, each
/// once) and folded as they pass, its partials summed — what `run_grid` would have
/// handed on. Memory holds one batch of records, never the point's all.
pub(crate) struct Gather<'s> {
    scenario: &'s Scenario,
    index: u32,
    expected: std::ops::Range<u32>,
    next: u32,
    welfords: Vec<Welford>,
    histograms: Vec<LatencyHistogram>,
    sums: SeriesSums,
    counts: Vec<u64>,
    compute_ns: u64,
}

impl<'s> Gather<'s> {
    pub(crate) fn new(scenario: &'s Scenario, index: u32, expected: std::ops::Range<u32>) -> Gather<'s> {
        Gather {
            scenario,
            index,
            next: expected.start,
            expected,
            welfords: vec![Welford::default(); scenario.schema.metrics.len()],
            histograms: scenario.schema.latencies.iter().map(|_| LatencyHistogram::new()).collect(),
            sums: SeriesSums::default(),
            counts: Vec::new(),
            compute_ns: 0,
        }
    }

    fn incomplete(&self) -> Error {
        Error::bad_input(format!(
            "merge: the parts hold {} of the {} replicas of grid point {} expected, or hold some twice; nothing was written",
            self.next - self.expected.start,
            self.expected.len(),
            self.index
        ))
    }

    /// The first replica `part` holds of this point (parts are added in this order).
    pub(crate) fn first_replica(part: &Part, index: u32) -> Option<u32> {
        part.first_replicas.get(&index).copied()
    }

    /// Adds `part`'s rows and partials of this point, streaming its records to `emit`.
    pub(crate) fn add(&mut self, part: &Part, emit: &mut dyn FnMut(&[ReplicaRecord]) -> Result<()>) -> Result<()> {
        let index = self.index;
        let mut batch = Vec::new();
        part.stream_point(self.scenario, index, &mut |rows| {
            batch.clear();
            for (row, &replica) in rows.replica.iter().enumerate() {
                if replica != self.next || self.next >= self.expected.end {
                    return Err(self.incomplete());
                }
                let metrics: Vec<f64> = rows.metrics.iter().map(|column| column[row]).collect();
                for (welford, &value) in self.welfords.iter_mut().zip(&metrics) {
                    welford.push(value);
                }
                batch.push(ReplicaRecord { grid_point: index, replica, seed: rows.seed[row], metrics, compute_ns: 0 });
                self.next += 1;
            }
            emit(&batch)
        })?;
        let Some(partials) = part.partials(index)? else { return Ok(()) };
        let bad = |what: String| Error::bad_input(format!("merge: {}: {what}", part.dir.display()));
        let item = partials.strings("item").map_err(|e| bad(e.to_string()))?;
        let replicas = partials.numbers("replicas").map_err(|e| bad(e.to_string()))?;
        let extra = partials.numbers("extra").map_err(|e| bad(e.to_string()))?;
        let data = partials.binaries("data").map_err(|e| bad(e.to_string()))?;
        let latencies = self.scenario.schema.latencies;
        let series = self.scenario.schema.series;
        for row in 0..item.len() {
            let item = item[row].as_str();
            let data = &data[row];
            if let Some(name) = item.strip_prefix("hdr:") {
                let i = latencies
                    .iter()
                    .position(|l| *l == name)
                    .ok_or_else(|| bad(format!("unknown histogram {name}")))?;
                let hdr = deserialize_v2(data).map_err(bad)?;
                self.histograms[i].merge_hdr(&hdr, extra[row] as u64);
            } else if let Some(name) = item.strip_prefix("series:") {
                let i =
                    series.iter().position(|s| s.name == name).ok_or_else(|| bad(format!("unknown series {name}")))?;
                self.sums.add_bytes(i, series.len(), replicas[row] as u64, data)?;
            } else if item == "counts" {
                let values: Vec<u64> =
                    data.chunks_exact(8).map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes"))).collect();
                if self.counts.len() < values.len() {
                    self.counts.resize(values.len(), 0);
                }
                self.counts.iter_mut().zip(&values).for_each(|(t, v)| *t += v);
            } else if item == "compute" {
                self.compute_ns += extra[row] as u64;
            }
        }
        Ok(())
    }

    /// The point's result, once every part holding it was added.
    pub(crate) fn finish(self) -> Result<PointResult> {
        if self.next != self.expected.end {
            return Err(self.incomplete());
        }
        Ok(PointResult {
            summaries: summaries(&self.welfords, &self.scenario.schema.metrics),
            latencies: self.histograms,
            series: self.sums,
            counts: self.counts,
            compute_s: self.compute_ns as f64 / 1e9,
        })
    }
}

fn row_ranges(table: &Table) -> Result<BTreeMap<u32, std::ops::Range<usize>>> {
    let points = table.numbers("grid_point").map_err(|e| Error::bad_input(e.to_string()))?;
    let mut ranges: BTreeMap<u32, std::ops::Range<usize>> = BTreeMap::new();
    for (row, &p) in points.iter().enumerate() {
        ranges.entry(p as u32).and_modify(|r| r.end = row + 1).or_insert(row..row + 1);
    }
    Ok(ranges)
}
