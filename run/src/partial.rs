//! Partial results: what a shard or a checkpoint piece holds, written and read back.
//!
//! A partial folder is `replicas.parquet` (the replica rows it keeps, columns as a
//! full run's: every row, or none, or a sample — see [`ReplicaRows`]; written long,
//! a row per metric, when the scenario's tables are long, as a full run's are: a wide
//! piece of a 2,000-service graph held 1.3 GB of Parquet column writers) and
//! `partials.parquet` (per grid point the replicas it holds, their metrics' exact
//! moments, latency histograms, the exact integer sums behind its time series, its
//! count histogram and its compute time). [`Gather`] rebuilds one grid point from any
//! set of partials: its kept records in replica order and its partials summed —
//! exactly what the runner hands on. Every sum is exact (integers, and
//! [`Moments`]), so a merge, a resume and a single run give the same bits whatever
//! the split, and a part needs no rows for the summary to be exact.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use stampede_output::{pivot, ColumnValues, Melt, StagedSet, Table, TableWriter};

use super::batches::{BatchedLatency, BATCHES};
use super::layout::ReplicaRows;
use super::moments::Moments;
use super::report::MANIFEST_FORMAT;
use super::rows::replica_values_columns;
use super::runner::{summaries, PointResult, ReplicaRecord, SeriesSums};
use super::sparse::SparseHistogram;
use super::windows::BatchedWindows;
use stampede_engine::measurement::latency_windows::WindowCounts;
use stampede_scenario::base::error::{Error, Result};
use stampede_scenario::resolved::Scenario;

/// The partial folders' layout: 2 since each point carries its replicas' exact
/// moments, 3 since its histograms are kept per batch of replicas, 4 since it
/// carries latency over time.
const PARTIAL_FORMAT: &str = "partials 4";

/// What identifies a run: shards with the same fingerprint merge into it.
pub fn fingerprint(scenario: &Scenario) -> String {
    let mut hash = Sha256::new();
    for part in [
        scenario.to_toml(),
        scenario.run.seed.to_string(),
        scenario.run.replicas.to_string(),
        MANIFEST_FORMAT.to_string(),
        PARTIAL_FORMAT.to_string(),
        env!("CARGO_PKG_VERSION").to_string(),
    ] {
        hash.update(part.as_bytes());
        hash.update([0]);
    }
    // The inputs' content, by hash: shards or a checkpoint that read another version
    // of a file are of another run.
    for input in scenario.inputs() {
        for part in [&input.field, &input.file, &input.sealed.sha256] {
            hash.update(part.as_bytes());
            hash.update([0]);
        }
    }
    stampede_scenario::inputs::sealed::hex(&hash.finalize())
}

/// The partial row that says which replicas a part holds of a point (replicas = how
/// many, extra = the first) and carries their metrics' moments.
const MOMENTS: &str = "moments";

/// One point's partial rows: `moments` (the replicas held; every metric's
/// [`Moments`] in the model's order), `sparse:NAME@B` (batch B's histogram,
/// [`SparseHistogram::to_bytes`]; only batches that ran), `windows:KIND@B`
/// (batch B's latency windows of a timed request kind, [`WindowCounts::to_bytes`]),
/// `series:NAME` (per bucket sum and sum of squares, u128 LE), `counts` (u64 LE),
/// `compute` (extra = wall-clock ns of its replicas).
fn partial_rows(scenario: &Scenario, point: u32, result: &PointResult) -> Vec<ColumnValues> {
    let replicas = result.series.replicas;
    let mut moments = Vec::new();
    result.moments.iter().for_each(|m| m.to_bytes(&mut moments));
    let held = &result.replicas;
    let mut items: Vec<(String, u64, u64, Vec<u8>)> =
        vec![(MOMENTS.into(), held.len() as u64, held.start as u64, moments)];
    for (name, batched) in scenario.schema.latencies.iter().zip(&result.latency_batches) {
        for (b, histogram) in batched.batches() {
            items.push((format!("sparse:{name}@{b}"), 0, histogram.saturated(), histogram.to_bytes()));
        }
    }
    for (timed, batched) in scenario.schema.timed.iter().zip(&result.latency_windows) {
        for (b, counts) in batched.batches() {
            items.push((format!("windows:{}@{b}", timed.name), 0, 0, counts.to_bytes()));
        }
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
pub struct Part {
    pub dir: PathBuf,
    /// Row ranges of each grid point in its replica rows and its partial rows (both point-major).
    replica_rows: BTreeMap<u32, std::ops::Range<usize>>,
    partial_rows: BTreeMap<u32, std::ops::Range<usize>>,
    /// The replicas the part holds of each grid point (its rows keep some or all of them).
    held: BTreeMap<u32, std::ops::Range<u32>>,
    /// Its replica rows are long: a row per metric of each replica.
    long: bool,
}

/// A grid point's rows of one part: replica numbers, seeds, and the metrics in the
/// model's order.
pub struct PointRows {
    pub replica: Vec<u32>,
    pub seed: Vec<u64>,
    pub metrics: Vec<Vec<f64>>,
}

/// Rows a gather reads at a time.
const READ_BATCH: usize = 8192;

impl Part {
    /// Opens a partial folder, finding each point's rows by reading its `grid_point`
    /// column (a checkpoint piece or an optimizer's round: small).
    pub fn read(dir: &Path) -> Result<Part> {
        let bad = |what: String| Error::bad_input(format!("merge: {}: {what}", dir.display()));
        let path = dir.join("replicas.parquet");
        let rows = Table::row_count(&path).map_err(|e| bad(e.to_string()))?;
        // The grid points' rows, a batch at a time (a long piece has a row per metric).
        let mut replica_rows: BTreeMap<u32, std::ops::Range<usize>> = BTreeMap::new();
        let mut first = 0usize;
        let mut add = |table: Table| -> Result<()> {
            let points = table.numbers("grid_point").map_err(|e| bad(e.to_string()))?;
            extend_row_ranges(&mut replica_rows, first, &points);
            first += points.len();
            Ok(())
        };
        Table::stream_rows(&path, &["grid_point"], 0..rows, 1 << 16, &|e| bad(e.reason), &mut add)?;
        let (partial_rows, held) = partial_index(dir)?;
        let long = is_long(&path).map_err(bad)?;
        Ok(Part { dir: dir.to_path_buf(), replica_rows, partial_rows, held, long })
    }

    /// Opens shard `plan.shard`'s folder, which kept the rows `kept` keeps: where its
    /// rows lie follows from the plan (a point's replicas in order, point after point),
    /// so nothing is read but the footers and the partials' index columns; the rows
    /// are checked as they are gathered.
    pub fn of_shard(dir: &Path, scenario: &Scenario, plan: &super::plan::Plan, kept: ReplicaRows) -> Result<Part> {
        let bad = |what: String| Error::bad_input(format!("merge: {}: {what}", dir.display()));
        let path = dir.join("replicas.parquet");
        let rows = Table::row_count(&path).map_err(|e| bad(e.to_string()))?;
        let long = is_long(&path).map_err(bad)?;
        let per_replica = if long { scenario.model.metrics().len() } else { 1 };
        let (mut replica_rows, mut start) = (BTreeMap::new(), 0usize);
        for point in 0..plan.points {
            let count = kept.kept(plan.replicas_of(point)).len() * per_replica;
            if count > 0 {
                replica_rows.insert(point, start..start + count);
                start += count;
            }
        }
        if rows != start {
            return Err(bad(format!(
                "its replicas.parquet has {rows} rows; the shard kept {start} (--replica-rows {})",
                kept.name()
            )));
        }
        let (partial_rows, held) = partial_index(dir)?;
        Ok(Part { dir: dir.to_path_buf(), replica_rows, partial_rows, held, long })
    }

    /// Streams grid point `point`'s rows to `each`, a batch at a time.
    pub fn stream_point(
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
            // Long rows come whole replicas at a time (the batch below): wide again.
            let table = if self.long { pivot(&table, "metric").map_err(|e| bad(e.to_string()))? } else { table };
            // Seeds are u64: read exactly, not through f64.
            let ColumnValues::U64(seed) = table.column("seed").map_err(|e| bad(e.to_string()))?.clone() else {
                return Err(bad("its seed column is not u64".into()));
            };
            let replica = table.numbers("replica").map_err(|e| bad(e.to_string()))?;
            let positions = table.positions();
            let column = |name: &&str| {
                let position = positions.get(name).ok_or_else(|| bad(format!("no column {name:?}")))?;
                table.numbers_at(*position).map_err(|e| bad(e.to_string()))
            };
            let metrics = names.iter().map(column).collect::<Result<_>>()?;
            each(PointRows { replica: replica.into_iter().map(|r| r as u32).collect(), seed, metrics })
        };
        // A long part's batch is whole replicas (a row per metric each).
        let batch = if self.long { names.len() * (READ_BATCH / names.len()).max(1) } else { READ_BATCH };
        Table::stream_rows(&path, &[], rows.clone(), batch, &|e| bad(e.reason), &mut read)
    }

    /// Grid point `point`'s partial rows (histograms, series sums, counts, compute).
    fn partials(&self, point: u32) -> Result<Option<Table>> {
        let Some(rows) = self.partial_rows.get(&point) else { return Ok(None) };
        Table::read_rows(&self.dir.join("partials.parquet"), &[], rows.clone())
            .map(Some)
            .map_err(|e| Error::bad_input(format!("merge: {e}")))
    }
}

/// Each grid point's rows in a partial folder's partials.parquet, and the replicas
/// it holds of each point.
type PartialIndex = (BTreeMap<u32, std::ops::Range<usize>>, BTreeMap<u32, std::ops::Range<u32>>);

fn partial_index(dir: &Path) -> Result<PartialIndex> {
    let path = dir.join("partials.parquet");
    let bad = |e: stampede_output::OutputError| Error::bad_input(format!("merge: {e}"));
    let rows = Table::row_count(&path).map_err(bad)?;
    let table = Table::read_rows(&path, &["grid_point", "item", "replicas", "extra"], 0..rows).map_err(bad)?;
    let (points, items) = (table.numbers("grid_point").map_err(bad)?, table.strings("item").map_err(bad)?);
    let (counts, firsts) = (table.numbers("replicas").map_err(bad)?, table.numbers("extra").map_err(bad)?);
    let mut held = BTreeMap::new();
    for row in (0..items.len()).filter(|&row| items[row] == MOMENTS) {
        let first = firsts[row] as u32;
        held.insert(points[row] as u32, first..first + counts[row] as u32);
    }
    Ok((row_ranges(&table)?, held))
}

/// Writes a partial folder's two tables into `dir` (staged; the caller commits).
pub struct PartWriter {
    replicas: TableWriter,
    partials: TableWriter,
    /// The replica rows written (the partials hold every replica's moments either way).
    keep: ReplicaRows,
    /// How the replica rows are written long, for a long scenario.
    melt: Option<Melt>,
}

impl PartWriter {
    /// A shard's tables (compressed: they are kept, and read by DuckDB).
    pub fn create(dir: &Path, scenario: &Scenario, keep: ReplicaRows) -> Result<PartWriter> {
        Self::create_with(dir, scenario, keep, false)
    }

    /// A checkpoint piece's tables (uncompressed scratch: written once, read once; a
    /// long scenario's replica rows long, compressed, as every long table is).
    pub fn create_scratch(dir: &Path, scenario: &Scenario, keep: ReplicaRows) -> Result<PartWriter> {
        Self::create_with(dir, scenario, keep, true)
    }

    fn create_with(dir: &Path, scenario: &Scenario, keep: ReplicaRows, scratch: bool) -> Result<PartWriter> {
        let melt = scenario.columns.long.as_ref().map(|long| long.replicas.clone());
        let table = |name: &str, columns: &[stampede_output::ColumnSpec]| match scratch {
            true => TableWriter::create_scratch(dir, name, columns),
            false => TableWriter::create(dir, name, columns),
        };
        let replicas = match &melt {
            Some(melt) => TableWriter::create_long(dir, "replicas.parquet", &melt.columns())?,
            None => table("replicas.parquet", &scenario.columns.replicas)?,
        };
        Ok(PartWriter { replicas, partials: table("partials.parquet", &scenario.columns.partials)?, keep, melt })
    }

    pub fn records(&mut self, scenario: &Scenario, records: &[ReplicaRecord]) -> Result<()> {
        let kept = self.keep.filter(records);
        if kept.is_empty() {
            return Ok(());
        }
        let wide = replica_values_columns(scenario, &kept);
        match &self.melt {
            Some(melt) => melt.blocks(wide).try_for_each(|block| self.replicas.write(block)).map_err(Into::into),
            None => Ok(self.replicas.write(wide)?),
        }
    }

    pub fn point(&mut self, scenario: &Scenario, point: u32, result: &PointResult) -> Result<()> {
        Ok(self.partials.write(partial_rows(scenario, point, result))?)
    }

    pub fn finish(self, staged: &mut StagedSet) -> Result<()> {
        staged.push(self.replicas.finish()?);
        staged.push(self.partials.finish()?);
        Ok(())
    }
}

/// One grid point being gathered from partial folders, one part at a time: its
/// records are streamed on in replica order (checked to be exactly `expected`, each
/// once) and folded as they pass, its partials summed — what `run_grid` would have
/// handed on. Memory holds one batch of records, never the point's all.
pub struct Gather<'s> {
    scenario: &'s Scenario,
    index: u32,
    expected: std::ops::Range<u32>,
    next: u32,
    moments: Vec<Moments>,
    histograms: Vec<BatchedLatency>,
    windows: Vec<BatchedWindows>,
    sums: SeriesSums,
    counts: Vec<u64>,
    compute_ns: u64,
}

/// "NAME@BATCH", a histogram's or latency windows' partial: the name and the batch.
fn named_batch(named: &str) -> Option<(&str, usize)> {
    let (name, batch) = named.rsplit_once('@')?;
    Some((name, batch.parse::<usize>().ok().filter(|b| *b < BATCHES)?))
}

impl<'s> Gather<'s> {
    pub fn new(scenario: &'s Scenario, index: u32, expected: std::ops::Range<u32>) -> Gather<'s> {
        Gather {
            scenario,
            index,
            next: expected.start,
            expected,
            moments: vec![Moments::default(); scenario.schema.metrics.len()],
            histograms: scenario.schema.latencies.iter().map(|_| BatchedLatency::default()).collect(),
            windows: Vec::new(),
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
    pub fn first_replica(part: &Part, index: u32) -> Option<u32> {
        part.held.get(&index).map(|held| held.start)
    }

    /// Adds `part`'s partials and kept rows of this point, streaming its records to
    /// `emit`. The part must hold the replicas that come next; its rows, replicas it
    /// holds, in order.
    pub fn add(&mut self, part: &Part, emit: &mut dyn FnMut(&[ReplicaRecord]) -> Result<()>) -> Result<()> {
        let index = self.index;
        let Some(held) = part.held.get(&index).cloned() else {
            return match part.replica_rows.contains_key(&index) {
                true => Err(Error::bad_input(format!(
                    "merge: {}: rows of grid point {index} without its moments",
                    part.dir.display()
                ))),
                false => Ok(()),
            };
        };
        if held.start != self.next || held.end > self.expected.end {
            return Err(self.incomplete());
        }
        self.stream_rows(part, &held, emit)?;
        self.next = held.end;
        let Some(partials) = part.partials(index)? else { return Ok(()) };
        let bad = |what: String| Error::bad_input(format!("merge: {}: {what}", part.dir.display()));
        let item = partials.strings("item").map_err(|e| bad(e.to_string()))?;
        let replicas = partials.numbers("replicas").map_err(|e| bad(e.to_string()))?;
        let extra = partials.numbers("extra").map_err(|e| bad(e.to_string()))?;
        let data = partials.binaries("data").map_err(|e| bad(e.to_string()))?;
        for row in 0..item.len() {
            self.add_partial(item[row].as_str(), &data[row], (replicas[row], extra[row]), &bad)?;
        }
        Ok(())
    }

    /// Streams `part`'s kept rows of this point to `emit` as records, checking each is
    /// a replica it holds (`held`), in order, once.
    fn stream_rows(
        &self,
        part: &Part,
        held: &std::ops::Range<u32>,
        emit: &mut dyn FnMut(&[ReplicaRecord]) -> Result<()>,
    ) -> Result<()> {
        let index = self.index;
        let mut batch = Vec::new();
        let mut last: Option<u32> = None;
        part.stream_point(self.scenario, index, &mut |rows| {
            batch.clear();
            for (row, &replica) in rows.replica.iter().enumerate() {
                if !held.contains(&replica) || last.is_some_and(|last| replica <= last) {
                    return Err(Error::bad_input(format!(
                        "merge: {}: a row of replica {replica} of grid point {index}, which it does not hold \
                         (replicas {}..{}) or holds twice",
                        part.dir.display(),
                        held.start,
                        held.end
                    )));
                }
                last = Some(replica);
                let metrics: Vec<f64> = rows.metrics.iter().map(|column| column[row]).collect();
                let seed = rows.seed[row];
                batch.push(ReplicaRecord {
                    grid_point: index,
                    replica,
                    seed,
                    metrics,
                    compute_ns: 0,
                    extracted: Vec::new(),
                });
            }
            emit(&batch)
        })
    }

    /// Adds one partial row: `item` names what `data` holds (moments, a histogram's or
    /// latency windows' batch, a series, counts, compute time); `(replicas, extra)`
    /// are its numbers.
    fn add_partial(
        &mut self,
        item: &str,
        data: &[u8],
        (replicas, extra): (f64, f64),
        bad: &dyn Fn(String) -> Error,
    ) -> Result<()> {
        let index = self.index;
        if item == MOMENTS {
            let mut bytes = data;
            for moments in &mut self.moments {
                moments.merge(&Moments::from_bytes(&mut bytes).map_err(bad)?);
            }
            if !bytes.is_empty() {
                return Err(bad(format!("grid point {index}'s moments: {} bytes too many", bytes.len())));
            }
        } else if let Some(named) = item.strip_prefix("sparse:") {
            let (name, batch) = named_batch(named).ok_or_else(|| bad(format!("histogram {named:?} names no batch")))?;
            let latencies = self.scenario.schema.latencies;
            let i =
                latencies.iter().position(|l| *l == name).ok_or_else(|| bad(format!("unknown histogram {name}")))?;
            let sparse =
                SparseHistogram::from_bytes(data).ok_or_else(|| bad(format!("histogram {named:?} is damaged")))?;
            self.histograms[i].batch_mut(batch).add_sparse(&sparse);
        } else if let Some(named) = item.strip_prefix("windows:") {
            let (name, batch) =
                named_batch(named).ok_or_else(|| bad(format!("latency windows {named:?} name no batch")))?;
            let timed = &self.scenario.schema.timed;
            let i = timed
                .iter()
                .position(|t| t.name == name)
                .ok_or_else(|| bad(format!("unknown latency over time {name}")))?;
            let counts =
                WindowCounts::from_bytes(data).ok_or_else(|| bad(format!("latency windows {named:?} are damaged")))?;
            self.windows.resize_with(timed.len(), BatchedWindows::default);
            if ![0, counts.windows()].contains(&self.windows[i].windows()) {
                return Err(bad(format!("latency windows {named:?} have another number of windows")));
            }
            self.windows[i].add(batch, &counts);
        } else if let Some(name) = item.strip_prefix("series:") {
            let series = self.scenario.schema.series;
            let i = series.iter().position(|s| s.name == name).ok_or_else(|| bad(format!("unknown series {name}")))?;
            self.sums.add_bytes(i, series.len(), replicas as u64, data)?;
        } else if item == "counts" {
            let values: Vec<u64> =
                data.chunks_exact(8).map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes"))).collect();
            if self.counts.len() < values.len() {
                self.counts.resize(values.len(), 0);
            }
            self.counts.iter_mut().zip(&values).for_each(|(t, v)| *t += v);
        } else if item == "compute" {
            self.compute_ns += extra as u64;
        }
        Ok(())
    }

    /// The point's result, once every part holding it was added.
    pub fn finish(self) -> Result<PointResult> {
        if self.next != self.expected.end {
            return Err(self.incomplete());
        }
        Ok(PointResult {
            summaries: summaries(&self.moments, &self.scenario.schema.metrics),
            moments: self.moments,
            replicas: self.expected,
            latency_batches: self.histograms,
            latency_windows: self.windows,
            series: self.sums,
            counts: self.counts,
            compute_s: self.compute_ns as f64 / 1e9,
        })
    }
}

fn row_ranges(table: &Table) -> Result<BTreeMap<u32, std::ops::Range<usize>>> {
    let points = table.numbers("grid_point").map_err(|e| Error::bad_input(e.to_string()))?;
    let mut ranges: BTreeMap<u32, std::ops::Range<usize>> = BTreeMap::new();
    extend_row_ranges(&mut ranges, 0, &points);
    Ok(ranges)
}

/// Adds each grid point's rows among `points` (the grid point of rows `first…`) to
/// `ranges`: a point's rows are contiguous.
fn extend_row_ranges(ranges: &mut BTreeMap<u32, std::ops::Range<usize>>, first: usize, points: &[f64]) {
    for (row, &p) in points.iter().enumerate() {
        let row = first + row;
        ranges.entry(p as u32).and_modify(|r| r.end = row + 1).or_insert(row..row + 1);
    }
}

/// Whether a partial folder's replica rows are long (a `metric` column).
fn is_long(path: &Path) -> std::result::Result<bool, String> {
    Table::read_rows(path, &[], 0..0).map(|table| table.has("metric")).map_err(|e| e.to_string())
}
