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

/// A folder of partial results read back: a shard, or a checkpoint piece. Its
/// columns are extracted once, so gathering many grid points costs one pass.
pub(crate) struct Part {
    pub(crate) dir: PathBuf,
    replica: Vec<u32>,
    seed: Vec<u64>,
    /// By metric, in the model's order.
    metrics: Vec<Vec<f64>>,
    item: Vec<String>,
    replicas: Vec<f64>,
    extra: Vec<f64>,
    data: Vec<Vec<u8>>,
    /// Row ranges of each grid point in its replica rows and its partial rows (both point-major).
    replica_rows: BTreeMap<u32, std::ops::Range<usize>>,
    partial_rows: BTreeMap<u32, std::ops::Range<usize>>,
}

impl Part {
    pub(crate) fn read(dir: &Path, scenario: &Scenario) -> Result<Part> {
        let bad = |what: String| Error::bad_input(format!("merge: {}: {what}", dir.display()));
        let read = |name: &str| Table::read(&dir.join(name)).map_err(|e| Error::bad_input(format!("merge: {e}")));
        let (replicas_table, partials) = (read("replicas.parquet")?, read("partials.parquet")?);
        let numbers = |t: &Table, name: &str| t.numbers(name).map_err(|e| bad(e.to_string()));
        // Seeds are u64: read exactly, not through f64.
        let ColumnValues::U64(seed) = replicas_table.column("seed").map_err(|e| bad(e.to_string()))?.clone() else {
            return Err(bad("its seed column is not u64".into()));
        };
        let ColumnValues::Binary(data) = partials.column("data").map_err(|e| bad(e.to_string()))?.clone() else {
            return Err(bad("its data column is not binary".into()));
        };
        Ok(Part {
            dir: dir.to_path_buf(),
            replica: numbers(&replicas_table, "replica")?.into_iter().map(|r| r as u32).collect(),
            seed,
            metrics: scenario
                .model
                .metrics()
                .iter()
                .map(|d| numbers(&replicas_table, d.name))
                .collect::<Result<_>>()?,
            item: partials.strings("item").map_err(|e| bad(e.to_string()))?.to_vec(),
            replicas: numbers(&partials, "replicas")?,
            extra: numbers(&partials, "extra")?,
            data,
            replica_rows: row_ranges(&replicas_table)?,
            partial_rows: row_ranges(&partials)?,
        })
    }
}

impl Part {
    /// Grid point `point`'s values of metric `metric` (model order), in replica order.
    pub(crate) fn metric_values(&self, point: u32, metric: usize) -> &[f64] {
        self.replica_rows.get(&point).map_or(&[], |rows| &self.metrics[metric][rows.clone()])
    }
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
        part.replica_rows.get(&index).map(|rows| part.replica[rows.start])
    }

    /// Adds `part`'s rows and partials of this point, streaming its records to `emit`.
    pub(crate) fn add(&mut self, part: &Part, emit: &mut dyn FnMut(&[ReplicaRecord]) -> Result<()>) -> Result<()> {
        const BATCH: usize = 2048;
        let index = self.index;
        if let Some(rows) = part.replica_rows.get(&index) {
            let mut batch = Vec::with_capacity(BATCH.min(rows.len()));
            for row in rows.clone() {
                if part.replica[row] != self.next || self.next >= self.expected.end {
                    return Err(self.incomplete());
                }
                let metrics: Vec<f64> = part.metrics.iter().map(|column| column[row]).collect();
                for (welford, &value) in self.welfords.iter_mut().zip(&metrics) {
                    welford.push(value);
                }
                batch.push(ReplicaRecord {
                    grid_point: index,
                    replica: self.next,
                    seed: part.seed[row],
                    metrics,
                    compute_ns: 0,
                });
                self.next += 1;
                if batch.len() == BATCH {
                    emit(&batch)?;
                    batch.clear();
                }
            }
            if !batch.is_empty() {
                emit(&batch)?;
            }
        }
        let latencies = self.scenario.schema.latencies;
        let series = self.scenario.schema.series;
        let bad = |what: String| Error::bad_input(format!("merge: {}: {what}", part.dir.display()));
        let Some(rows) = part.partial_rows.get(&index) else { return Ok(()) };
        for row in rows.clone() {
            let item = part.item[row].as_str();
            let data = &part.data[row];
            if let Some(name) = item.strip_prefix("hdr:") {
                let i = latencies
                    .iter()
                    .position(|l| *l == name)
                    .ok_or_else(|| bad(format!("unknown histogram {name}")))?;
                let hdr = deserialize_v2(data).map_err(bad)?;
                self.histograms[i].merge_hdr(&hdr, part.extra[row] as u64);
            } else if let Some(name) = item.strip_prefix("series:") {
                let i =
                    series.iter().position(|s| s.name == name).ok_or_else(|| bad(format!("unknown series {name}")))?;
                self.sums.add_bytes(i, series.len(), part.replicas[row] as u64, data)?;
            } else if item == "counts" {
                let values: Vec<u64> =
                    data.chunks_exact(8).map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes"))).collect();
                if self.counts.len() < values.len() {
                    self.counts.resize(values.len(), 0);
                }
                self.counts.iter_mut().zip(&values).for_each(|(t, v)| *t += v);
            } else if item == "compute" {
                self.compute_ns += part.extra[row] as u64;
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
