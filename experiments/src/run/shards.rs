//! Sharded runs and their exact merge.
//!
//! `stampede run … --shard K/N` runs shard K's tasks ([`super::plan`]) and writes a
//! shard folder, `OUT/NAME/shards/shard=K/`: `replicas.parquet` (its rows, columns as
//! a full run's), `partials.parquet` (per grid point its histograms, the exact
//! integer sums behind the time series, the count histogram) and `manifest.json` with
//! the run's fingerprint and the shard's index. DuckDB reads every shard at once
//! with `read_parquet('OUT/NAME/shards/*/replicas.parquet', hive_partitioning = true)`.
//!
//! `stampede merge` checks the shards belong together and are all there, then feeds
//! the pipeline's sinks exactly what a single run would: each point's records in
//! replica order (so the Welford fold is the same fold) and its partials summed
//! (integer addition, exact). The folder is then written by the single-run code, so
//! the merged tables are byte-identical to a run in one process for any split.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use stampede_engine::LatencyHistogram;
use stampede_output::hdr::{deserialize_v2, serialize_v2};
use stampede_output::{ColumnSpec, ColumnType, ColumnValues, StagedFile, StagedSet, Table, TableWriter};

use super::plan::{Plan, Shard};
use super::report::{RunReport, MANIFEST_FORMAT};
use super::runner::{run_grid, summaries, PointResult, ReplicaRecord, SeriesSums, Sinks};
use super::stats::Welford;
use super::{budget, pipeline};
use crate::base::error::{Error, Result};
use crate::resolved::Scenario;
use crate::scenario::Overrides;

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

/// Runs shard `shard` of `scenario` and writes `out_root/NAME/shards/shard=K/`.
pub fn execute_shard(
    scenario: &Scenario,
    shard: Shard,
    out_root: &Path,
    threads: usize,
    progress: &(dyn Fn() + Sync),
) -> Result<PathBuf> {
    budget::check(budget::estimate(scenario, threads), out_root)?;
    let root = out_root.join(&scenario.name).join("shards");
    std::fs::create_dir_all(&root).map_err(|e| Error::io(format!("cannot create {}: {e}", root.display())))?;
    let folder = pipeline::begin_folder(&root, &format!("shard={}", shard.index))?;
    let dir = folder.path();
    let mut replicas = TableWriter::create(dir, "replicas.parquet", &pipeline::replica_columns(scenario))?;
    let mut partials = TableWriter::create(dir, "partials.parquet", &partial_columns())?;
    let mut compute = Vec::new();
    let plan = Plan { points: scenario.point_count(), replicas: scenario.run.replicas, shard: Some(shard) };
    let mut records = |records: &[ReplicaRecord]| -> Result<()> {
        Ok(replicas.write(pipeline::replica_values_columns(scenario, records))?)
    };
    let mut points = |point: &crate::resolved::GridPoint, result: PointResult| -> Result<()> {
        compute.push((point.index, result.compute_s));
        Ok(partials.write(partial_rows(scenario, point.index, &result))?)
    };
    run_grid(scenario, &plan, threads, progress, Sinks { records: &mut records, point: &mut points })?;
    let mut staged = StagedSet::default();
    staged.push(replicas.finish()?);
    staged.push(partials.finish()?);
    let report = RunReport {
        scenario: scenario.clone(),
        points: Vec::new(),
        output_dir: folder.destination().to_path_buf(),
        wall_time_s: 0.0,
        threads,
    };
    let mut manifest = report.manifest(&[]);
    let object = manifest.as_object_mut().expect("a manifest is an object");
    object.insert("files".into(), json!(["replicas.parquet", "partials.parquet", "manifest.json"]));
    object.insert("fingerprint".into(), json!(fingerprint(scenario)));
    object.insert("shard".into(), json!({"index": shard.index, "count": shard.count, "tasks": plan.task_count()}));
    let bytes = serde_json::to_vec_pretty(&manifest).expect("JSON serialises");
    staged.push(StagedFile::with_contents(dir, "manifest.json", &bytes)?);
    staged.commit()?;
    let destination = folder.destination().to_path_buf();
    folder.commit()?;
    Ok(destination)
}

/// One shard folder read back.
struct ShardData {
    dir: PathBuf,
    replicas: Table,
    partials: Table,
    /// Row ranges of each grid point in `replicas` and `partials` (rows are point-major).
    replica_rows: BTreeMap<u32, std::ops::Range<usize>>,
    partial_rows: BTreeMap<u32, std::ops::Range<usize>>,
}

fn row_ranges(table: &Table) -> Result<BTreeMap<u32, std::ops::Range<usize>>> {
    let points = table.numbers("grid_point").map_err(|e| Error::bad_input(e.to_string()))?;
    let mut ranges: BTreeMap<u32, std::ops::Range<usize>> = BTreeMap::new();
    for (row, &p) in points.iter().enumerate() {
        ranges.entry(p as u32).and_modify(|r| r.end = row + 1).or_insert(row..row + 1);
    }
    Ok(ranges)
}

/// Shards that belong together, checked.
pub struct Shards {
    pub scenario: Scenario,
    list: Vec<ShardData>,
}

fn manifest_of(dir: &Path) -> Result<Value> {
    let path = dir.join("manifest.json");
    let text = std::fs::read_to_string(&path).map_err(|e| {
        Error::bad_input(format!("{}: {e}; is it a shard folder (OUT/NAME/shards/shard=K)?", path.display()))
    })?;
    serde_json::from_str(&text).map_err(|e| Error::bad_input(format!("{}: not JSON: {e}", path.display())))
}

impl Shards {
    /// Reads and checks `dirs`: one fingerprint, one shard count, every index once.
    pub fn read(dirs: &[PathBuf]) -> Result<Shards> {
        if dirs.is_empty() {
            return Err(Error::bad_input("merge: name the shard folders (e.g. out/NAME/shards/*)"));
        }
        let mut manifests = Vec::new();
        for dir in dirs {
            let manifest = manifest_of(dir)?;
            let index = manifest.pointer("/shard/index").and_then(Value::as_u64);
            let count = manifest.pointer("/shard/count").and_then(Value::as_u64);
            let print = manifest.get("fingerprint").and_then(Value::as_str).map(str::to_string);
            let (Some(index), Some(count), Some(print)) = (index, count, print) else {
                return Err(Error::bad_input(format!(
                    "{}: not a shard folder (its manifest has no shard and fingerprint)",
                    dir.display()
                )));
            };
            manifests.push((dir.clone(), index, count, print, manifest));
        }
        let (_, _, count, print, first) = &manifests[0];
        let strangers: Vec<String> = manifests
            .iter()
            .filter(|m| &m.3 != print || m.2 != *count)
            .map(|m| format!("{} (fingerprint {}…, {} shards)", m.0.display(), &m.3[..12.min(m.3.len())], m.2))
            .collect();
        if !strangers.is_empty() {
            return Err(Error::bad_input(format!(
                "merge: these shards are of another run than {} (fingerprint {}…, {count} shards): {}; nothing was written",
                manifests[0].0.display(),
                &print[..12.min(print.len())],
                strangers.join(", ")
            )));
        }
        let mut seen: BTreeMap<u64, Vec<&PathBuf>> = BTreeMap::new();
        for m in &manifests {
            seen.entry(m.1).or_default().push(&m.0);
        }
        let missing: Vec<String> = (0..*count).filter(|i| !seen.contains_key(i)).map(|i| i.to_string()).collect();
        let duplicated: Vec<String> = seen
            .iter()
            .filter(|(_, dirs)| dirs.len() > 1)
            .map(|(i, dirs)| {
                format!("{i} ({})", dirs.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(", "))
            })
            .collect();
        if !missing.is_empty() || !duplicated.is_empty() {
            let mut why = Vec::new();
            if !missing.is_empty() {
                why.push(format!("missing shard(s) {} of {count}", missing.join(", ")));
            }
            if !duplicated.is_empty() {
                why.push(format!("shard(s) given twice: {}", duplicated.join("; ")));
            }
            return Err(Error::bad_input(format!("merge: {}; nothing was written", why.join("; "))));
        }
        let toml_text = first.get("scenario_toml").and_then(Value::as_str).unwrap_or_default();
        let source: toml::Table = toml::from_str(toml_text)
            .map_err(|e| Error::bad_input(format!("merge: the shards' scenario does not parse: {e}")))?;
        let scenario = Scenario::resolve(source, &Overrides::default())?;
        if fingerprint(&scenario) != *print {
            return Err(Error::bad_input(
                "merge: the shards were written by another stampede version or output format; merge them with that one",
            ));
        }
        let mut list = Vec::new();
        for (dir, ..) in &manifests {
            let read = |name: &str| Table::read(&dir.join(name)).map_err(|e| Error::bad_input(format!("merge: {e}")));
            let replicas = read("replicas.parquet")?;
            let partials = read("partials.parquet")?;
            list.push(ShardData {
                replica_rows: row_ranges(&replicas)?,
                partial_rows: row_ranges(&partials)?,
                dir: dir.clone(),
                replicas,
                partials,
            });
        }
        Ok(Shards { scenario, list })
    }

    /// Feeds `sinks` as `run_grid` would for the whole run.
    pub fn produce(&self, sinks: Sinks) -> Result<()> {
        let scenario = &self.scenario;
        let defs = scenario.model.metrics();
        let latencies = scenario.model.latencies();
        let series = scenario.model.series();
        for index in 0..scenario.point_count() {
            let point = scenario.grid_point(index)?;
            let mut records = Vec::new();
            let mut histograms: Vec<LatencyHistogram> = latencies.iter().map(|_| LatencyHistogram::new()).collect();
            let mut sums = SeriesSums::default();
            let mut counts: Vec<u64> = Vec::new();
            let mut compute_ns = 0u64;
            for shard in &self.list {
                let bad = |what: String| Error::bad_input(format!("merge: {}: {what}", shard.dir.display()));
                if let Some(rows) = shard.replica_rows.get(&index) {
                    let table = &shard.replicas;
                    let column = |name: &str| table.numbers(name).map_err(|e| bad(e.to_string()));
                    let (replica, seed) = (column("replica")?, column("seed")?);
                    let metric_columns: Vec<Vec<f64>> = defs.iter().map(|d| column(d.name)).collect::<Result<_>>()?;
                    // Seeds are u64: read them exactly, not through f64.
                    let seeds: Vec<u64> = match table.column("seed").map_err(|e| bad(e.to_string()))? {
                        ColumnValues::U64(v) => v.clone(),
                        _ => seed.iter().map(|&s| s as u64).collect(),
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
                if let Some(rows) = shard.partial_rows.get(&index) {
                    let t = &shard.partials;
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
                            let part: Vec<u64> = data[row]
                                .chunks_exact(8)
                                .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
                                .collect();
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
            let expected = scenario.run.replicas as usize;
            if records.len() != expected || records.iter().enumerate().any(|(i, r)| r.replica as usize != i) {
                return Err(Error::bad_input(format!(
                    "merge: the shards hold {} of the {expected} replicas of grid point {index}; nothing was written",
                    records.len()
                )));
            }
            let mut welfords = vec![Welford::default(); defs.len()];
            for record in &records {
                for (welford, &value) in welfords.iter_mut().zip(&record.metrics) {
                    welford.push(value);
                }
            }
            (sinks.records)(&records)?;
            let result = PointResult {
                summaries: summaries(&welfords, &defs),
                latencies: histograms,
                series: sums,
                counts,
                compute_s: compute_ns as f64 / 1e9,
            };
            (sinks.point)(&point, result)?;
        }
        Ok(())
    }
}

/// Merges `shards` into `out_root/NAME/`, with `documents`; refuses to replace a
/// folder that holds any of the shards.
pub fn execute_merge(shards: &Shards, out_root: &Path, documents: Option<&pipeline::Documents>) -> Result<RunReport> {
    let destination = out_root.join(&shards.scenario.name);
    let canonical = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let destination_full = canonical(&destination);
    if let Some(inside) = shards.list.iter().find(|s| canonical(&s.dir).starts_with(&destination_full)) {
        return Err(Error::bad_input(format!(
            "merge --out {}: the merged run would replace {}, which holds shard {}; choose another --out",
            out_root.display(),
            destination.display(),
            inside.dir.display()
        )));
    }
    pipeline::write_run(&shards.scenario, out_root, 1, &|sinks| shards.produce(sinks), documents)
}
