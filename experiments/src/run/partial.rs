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
    for (name, histogram) in scenario.model.latencies().iter().zip(&result.latencies) {
        items.push((format!("hdr:{name}"), 0, histogram.saturated(), serialize_v2(histogram.hdr())));
    }
    if result.series.buckets() > 0 {
        for (index, def) in scenario.model.series().iter().enumerate() {
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

/// A folder of partial results read back: a shard, or a checkpoint piece.
pub(crate) struct Part {
    pub(crate) dir: PathBuf,
    replicas: Table,
    partials: Table,
    /// Row ranges of each grid point in `replicas` and `partials` (rows are point-major).
    replica_rows: BTreeMap<u32, std::ops::Range<usize>>,
    partial_rows: BTreeMap<u32, std::ops::Range<usize>>,
}

impl Part {
    pub(crate) fn read(dir: &Path) -> Result<Part> {
        let read = |name: &str| Table::read(&dir.join(name)).map_err(|e| Error::bad_input(format!("merge: {e}")));
        let replicas = read("replicas.parquet")?;
        let partials = read("partials.parquet")?;
        Ok(Part {
            replica_rows: row_ranges(&replicas)?,
            partial_rows: row_ranges(&partials)?,
            dir: dir.to_path_buf(),
            replicas,
            partials,
        })
    }
}

/// Writes a partial folder's two tables into `dir` (staged; the caller commits).
pub(crate) struct PartWriter {
    replicas: TableWriter,
    partials: TableWriter,
}

impl PartWriter {
    pub(crate) fn create(dir: &Path, scenario: &Scenario) -> Result<PartWriter> {
        Ok(PartWriter {
            replicas: TableWriter::create(dir, "replicas.parquet", &replica_columns(scenario))?,
            partials: TableWriter::create(dir, "partials.parquet", &partial_columns())?,
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

/// Grid point `index` gathered from `parts`: its records in replica order (checked to
/// be exactly `expected`) and its partials summed — what `run_grid` would have handed on.
pub(crate) fn gather(
    scenario: &Scenario,
    parts: &[&Part],
    index: u32,
    expected: std::ops::Range<u32>,
) -> Result<(Vec<ReplicaRecord>, PointResult)> {
    let defs = scenario.model.metrics();
    let latencies = scenario.model.latencies();
    let series = scenario.model.series();
    let mut records = Vec::new();
    let mut histograms: Vec<LatencyHistogram> = latencies.iter().map(|_| LatencyHistogram::new()).collect();
    let mut sums = SeriesSums::default();
    let mut counts: Vec<u64> = Vec::new();
    let mut compute_ns = 0u64;
    for part in parts {
        let bad = |what: String| Error::bad_input(format!("merge: {}: {what}", part.dir.display()));
        if let Some(rows) = part.replica_rows.get(&index) {
            let table = &part.replicas;
            let column = |name: &str| table.numbers(name).map_err(|e| bad(e.to_string()));
            let replica = column("replica")?;
            let metric_columns: Vec<Vec<f64>> = defs.iter().map(|d| column(d.name)).collect::<Result<_>>()?;
            // Seeds are u64: read them exactly, not through f64.
            let ColumnValues::U64(seeds) = table.column("seed").map_err(|e| bad(e.to_string()))? else {
                return Err(bad("its seed column is not u64".into()));
            };
            for row in rows.clone() {
                records.push(ReplicaRecord {
                    grid_point: index,
                    replica: replica[row] as u32,
                    seed: seeds[row],
                    metrics: metric_columns.iter().map(|c| c[row]).collect(),
                    compute_ns: 0,
                });
            }
        }
        if let Some(rows) = part.partial_rows.get(&index) {
            let t = &part.partials;
            let items = t.strings("item").map_err(|e| bad(e.to_string()))?;
            let replicas = t.numbers("replicas").map_err(|e| bad(e.to_string()))?;
            let extra = t.numbers("extra").map_err(|e| bad(e.to_string()))?;
            let data = t.binaries("data").map_err(|e| bad(e.to_string()))?;
            for row in rows.clone() {
                let item = items[row].as_str();
                if let Some(name) = item.strip_prefix("hdr:") {
                    let i = latencies
                        .iter()
                        .position(|l| *l == name)
                        .ok_or_else(|| bad(format!("unknown histogram {name}")))?;
                    let hdr = deserialize_v2(&data[row]).map_err(bad)?;
                    histograms[i].merge_hdr(&hdr, extra[row] as u64);
                } else if let Some(name) = item.strip_prefix("series:") {
                    let i = series
                        .iter()
                        .position(|s| s.name == name)
                        .ok_or_else(|| bad(format!("unknown series {name}")))?;
                    sums.add_bytes(i, series.len(), replicas[row] as u64, &data[row])?;
                } else if item == "counts" {
                    let part: Vec<u64> =
                        data[row].chunks_exact(8).map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes"))).collect();
                    if counts.len() < part.len() {
                        counts.resize(part.len(), 0);
                    }
                    counts.iter_mut().zip(&part).for_each(|(t, p)| *t += p);
                } else if item == "compute" {
                    compute_ns += extra[row] as u64;
                }
            }
        }
    }
    records.sort_by_key(|r| r.replica);
    let complete = records.len() == expected.len() && records.iter().zip(expected.clone()).all(|(r, e)| r.replica == e);
    if !complete {
        return Err(Error::bad_input(format!(
            "merge: the parts hold {} of the {} replicas of grid point {index} expected; nothing was written",
            records.len(),
            expected.len()
        )));
    }
    let mut welfords = vec![Welford::default(); defs.len()];
    for record in &records {
        for (welford, &value) in welfords.iter_mut().zip(&record.metrics) {
            welford.push(value);
        }
    }
    let result = PointResult {
        summaries: summaries(&welfords, &defs),
        latencies: histograms,
        series: sums,
        counts,
        compute_s: compute_ns as f64 / 1e9,
    };
    Ok((records, result))
}

fn row_ranges(table: &Table) -> Result<BTreeMap<u32, std::ops::Range<usize>>> {
    let points = table.numbers("grid_point").map_err(|e| Error::bad_input(e.to_string()))?;
    let mut ranges: BTreeMap<u32, std::ops::Range<usize>> = BTreeMap::new();
    for (row, &p) in points.iter().enumerate() {
        ranges.entry(p as u32).and_modify(|r| r.end = row + 1).or_insert(row..row + 1);
    }
    Ok(ranges)
}
