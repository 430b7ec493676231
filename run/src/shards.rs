//! Sharded runs and their exact merge.
//!
//! `stampede run … --shard K/N` runs shard K's tasks ([`super::plan`]) and writes a
//! shard folder, `OUT/NAME/shards/shard=K/`: `replicas.parquet` (the rows it keeps,
//! columns as a full run's: all by default, none or a sample with `--replica-rows`),
//! `partials.parquet` (per grid point the replicas it holds, their metrics' exact
//! moments, histograms, the exact integer sums behind the time series, the count
//! histogram) and `manifest.json` with the run's fingerprint, the shard's index and
//! the rows it kept. DuckDB reads every shard at once with
//! `read_parquet('OUT/NAME/shards/*/replicas.parquet', hive_partitioning = true)`.
//!
//! `stampede merge` checks the shards belong together and are all there, then feeds
//! the pipeline's sinks exactly what a single run would: each point's kept records in
//! replica order and its partials summed (every sum exact: integers and
//! [`super::moments::Moments`]). The folder is then written by the single-run code,
//! so the merged tables are byte-identical to a run in one process for any split —
//! and a shard that keeps no rows loses nothing the summary needs.
//!
//! The merge streams: each shard is opened for where its rows lie (from the plan:
//! shard K holds a slice of every point), and each point is gathered by reading every
//! shard's slice of it in replica order, a batch at a time, while the output is
//! written as it goes. Memory holds one batch, one point's histograms and series, and
//! per shard its points' partial-row ranges — not the shards' rows.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use stampede_output::{StagedFile, StagedSet};

use super::checkpoint::Checkpoint;
use super::layout::ReplicaRows;
use super::partial::{fingerprint, Gather, Part, PartWriter};
use super::plan::{Plan, Shard};
use super::report::RunReport;
use super::runner::{PointResult, ReplicaRecord, Sinks};
use super::{budget, pipeline};
use stampede_scenario::base::error::{Error, Result};
use stampede_scenario::resolved::Scenario;
use stampede_scenario::scenario::claims::Skipped;

/// Runs shard `shard` of `scenario` and writes `out_root/NAME/shards/shard=K/`,
/// checkpointed (see [`super::checkpoint`]); `resume` keeps an earlier attempt's pieces.
pub fn execute_shard(
    scenario: &Scenario,
    shard: Shard,
    out_root: &Path,
    threads: usize,
    progress: &(dyn Fn() + Sync),
    writing: pipeline::Writing,
) -> Result<PathBuf> {
    budget::check(budget::estimate(scenario, threads), out_root)?;
    let root = out_root.join(&scenario.name).join("shards");
    std::fs::create_dir_all(&root).map_err(|e| Error::io(format!("cannot create {}: {e}", root.display())))?;
    let folder = pipeline::begin_folder(&root, &format!("shard={}", shard.index), writing.replace())?;
    let dir = folder.path();
    let plan = Plan::new(scenario.point_count(), scenario.run.replicas, Some(shard));
    let identity = format!("{} shard {}/{}", fingerprint(scenario), shard.index, shard.count);
    let keep = writing.shape.replica_rows;
    let mut checkpoint = Checkpoint::open(
        &root.join(format!(".shard={}.checkpoint", shard.index)),
        &identity,
        scenario.inputs(),
        keep,
        writing.resume,
    )?;
    for _ in 0..checkpoint.resumed_tasks {
        progress();
    }
    checkpoint.run(scenario, &plan, threads, progress)?;
    let mut writer = PartWriter::create(dir, scenario, keep)?;
    {
        let writer = std::cell::RefCell::new(&mut writer);
        let mut records = |records: &[ReplicaRecord]| writer.borrow_mut().records(scenario, records);
        let mut points = |point: &stampede_scenario::resolved::GridPoint, result: PointResult| {
            writer.borrow_mut().point(scenario, point.index, &result)
        };
        checkpoint.produce(scenario, &plan, Sinks { records: &mut records, point: &mut points })?;
    }
    let mut staged = StagedSet::default();
    writer.finish(&mut staged)?;
    let checksums = file_checksums(&staged)?;
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
    object.insert("replica_rows".into(), json!(keep.name()));
    object.insert("file_checksums".into(), checksums);
    let bytes = serde_json::to_vec_pretty(&manifest).expect("JSON serialises");
    staged.push(StagedFile::with_contents(dir, "manifest.json", &bytes)?);
    staged.commit()?;
    let destination = folder.destination().to_path_buf();
    folder.commit()?;
    checkpoint.remove()?;
    Ok(destination)
}

/// The files of a shard folder whose size and SHA-256 its manifest records.
const CHECKSUMMED: &[&str] = &["replicas.parquet", "partials.parquet"];

/// `{"replicas.parquet": {"bytes": …, "sha256": …}, …}` of the shard folder's staged
/// files, for its manifest (the files are hashed as written, before they appear).
fn file_checksums(staged: &StagedSet) -> Result<Value> {
    let mut files = serde_json::Map::new();
    for name in CHECKSUMMED {
        let path = staged.staged_path(name).ok_or_else(|| Error::io(format!("{name} was not written")))?;
        let (bytes, sha256) = hash_file(path).map_err(|e| Error::io(format!("cannot read {}: {e}", path.display())))?;
        files.insert((*name).into(), json!({"bytes": bytes, "sha256": sha256}));
    }
    Ok(Value::Object(files))
}

/// A file's size and SHA-256, read in pieces (a shard's rows can be large).
fn hash_file(path: &Path) -> std::io::Result<(u64, String)> {
    use sha2::{Digest, Sha256};
    use std::io::Read;
    let mut file = std::fs::File::open(path)?;
    let mut hash = Sha256::new();
    let mut buffer = vec![0u8; 1 << 16];
    let mut total = 0u64;
    loop {
        let read = file.read(&mut buffer)?;
        if read == 0 {
            break;
        }
        total += read as u64;
        hash.update(&buffer[..read]);
    }
    Ok((total, stampede_scenario::inputs::sealed::hex(&hash.finalize())))
}

/// Refuses a shard whose files are not, byte for byte, the ones its manifest
/// recorded (a flipped bit, a truncated copy, a file from another shard), and one
/// whose manifest records no checksums at all (lost in a copy, or edited away) unless
/// `allow_unchecked` — then its files are taken as they are.
fn verify_files(dir: &Path, manifest: &Value, allow_unchecked: bool) -> Result<()> {
    let Some(recorded) = manifest.get("file_checksums").and_then(Value::as_object) else {
        if allow_unchecked {
            return Ok(());
        }
        return Err(Error::bad_input(format!(
            "merge: {}: its manifest has no file_checksums, so a damaged table could not be told from a good one; \
             nothing was written",
            dir.display()
        ))
        .with_hint("copy the shard again with its manifest.json, or pass --allow-unchecked to merge it unchecked"));
    };
    for (name, want) in recorded {
        let path = dir.join(name);
        let (bytes, sha256) = hash_file(&path).map_err(|e| {
            Error::bad_input(format!("merge: {}: cannot read it: {e}; nothing was written", path.display()))
        })?;
        let want_bytes = want.get("bytes").and_then(Value::as_u64);
        let want_sha = want.get("sha256").and_then(Value::as_str);
        if want_bytes != Some(bytes) || want_sha != Some(sha256.as_str()) {
            return Err(Error::bad_input(format!(
                "merge: {} is damaged: {bytes} bytes with sha256 {}…, but the shard's manifest recorded {} bytes with \
                 sha256 {}…; nothing was written",
                path.display(),
                &sha256[..12],
                want_bytes.map_or("no".to_string(), |b| b.to_string()),
                &want_sha.unwrap_or("?")[..12.min(want_sha.unwrap_or("?").len())]
            ))
            .with_hint("copy the shard again from where it was written, or run that shard again"));
        }
    }
    Ok(())
}

/// (field, path) → sha256 of the inputs a shard's manifest lists.
fn inputs_of(manifest: &Value) -> BTreeMap<(String, String), String> {
    let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
    manifest
        .get("inputs")
        .and_then(Value::as_array)
        .map(|list| list.iter().map(|i| ((text(i, "field"), text(i, "path")), text(i, "sha256"))).collect())
        .unwrap_or_default()
}

/// Refuses shards that read different content for an input (each shard's manifest
/// records the hash of what it used), naming the file and the shards.
fn check_same_inputs(manifests: &[(&Path, &Value)]) -> Result<()> {
    let (first_dir, first) = manifests[0];
    let want = inputs_of(first);
    for (dir, manifest) in &manifests[1..] {
        let got = inputs_of(manifest);
        for key in want.keys().chain(got.keys()) {
            let (a, b) = (want.get(key), got.get(key));
            if a != b {
                let short = |h: Option<&String>| {
                    h.map_or("absent".to_string(), |h| format!("sha256 {}…", &h[..12.min(h.len())]))
                };
                return Err(Error::bad_input(format!(
                    "merge: the shards read different content for {} ({}): {} in {}, {} in {}; nothing was written",
                    key.1,
                    key.0,
                    short(a),
                    first_dir.display(),
                    short(b),
                    dir.display()
                ))
                .with_hint("run every shard with the same input files"));
            }
        }
    }
    Ok(())
}

/// Seeds the process's sealed inputs ([`stampede_scenario::inputs::sealed`]) with the contents the
/// shards recorded, so the merge types the scenario from what the shards used and
/// never reads the files (which need not exist on the merging machine). An input too
/// large to have been recorded (over 1 MB) is read from its path and must have the
/// recorded hash.
fn seed_inputs(manifest: &Value, scenario_dir: Option<&str>) -> Result<()> {
    use base64::Engine as _;
    let Some(inputs) = manifest.get("inputs").and_then(Value::as_array) else { return Ok(()) };
    let model = manifest.get("model").and_then(Value::as_str).unwrap_or_default();
    for input in inputs {
        let file = input.get("path").and_then(Value::as_str).unwrap_or_default();
        let field = input.get("field").and_then(Value::as_str).unwrap_or_default();
        let located = stampede_scenario::resolved::input_location(model, scenario_dir.map(Path::new), field, file);
        let content = match (input.get("content").and_then(Value::as_str), input.get("content_base64")) {
            (Some(text), _) => Some(text.as_bytes().to_vec()),
            (None, Some(Value::String(encoded))) => base64::engine::general_purpose::STANDARD.decode(encoded).ok(),
            _ => None,
        };
        let want = input.get("sha256").and_then(Value::as_str).unwrap_or_default();
        let sealed = match content {
            Some(bytes) => stampede_scenario::inputs::sealed::seed(&located, bytes),
            None => stampede_scenario::inputs::sealed::read(&located).map_err(|e| {
                e.context(
                    "merge: the shards recorded this input's hash but not its content (over 1 MB); the merge \
                           needs the same file where the shards read it",
                )
            })?,
        };
        if sealed.sha256 != want {
            return Err(Error::bad_input(format!(
                "merge: {file} has sha256 {}…, but the shards read a file with sha256 {}…; nothing was written",
                &sealed.sha256[..12],
                &want[..12.min(want.len())]
            ))
            .with_hint("merge with the file the shards used"));
        }
    }
    Ok(())
}

/// Shards that belong together, checked.
pub struct Shards {
    pub scenario: Scenario,
    list: Vec<Part>,
    /// The replica rows every shard kept (`--replica-rows` of `run --shard`).
    pub kept: ReplicaRows,
}

fn manifest_of(dir: &Path) -> Result<Value> {
    let path = dir.join("manifest.json");
    let text = std::fs::read_to_string(&path).map_err(|e| {
        Error::bad_input(format!("{}: {e}; is it a shard folder (OUT/NAME/shards/shard=K)?", path.display()))
    })?;
    serde_json::from_str(&text).map_err(|e| Error::bad_input(format!("{}: not JSON: {e}", path.display())))
}

/// The shard folders `paths` name: a folder with a manifest is one; a folder holding
/// `shard=K` folders (`OUT/NAME/shards`) stands for all of them, in name order. An
/// error names a folder that is neither.
pub fn shard_folders(paths: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut dirs = Vec::new();
    for dir in paths {
        if dir.join("manifest.json").exists() || !dir.is_dir() {
            dirs.push(dir.clone());
            continue;
        }
        let mut inside: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(|e| Error::bad_input(format!("{}: {e}", dir.display())))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("shard=")))
            .collect();
        inside.sort();
        if inside.is_empty() {
            return Err(Error::bad_input(format!(
                "merge: {}: not a shard folder, and it holds none (shard=K folders, from `stampede run --shard`)",
                dir.display()
            )));
        }
        dirs.extend(inside);
    }
    Ok(dirs)
}

/// The claims `merge --verify` can check on shards that kept `kept` replica rows: an
/// error when the scenario has none that apply, or when one reads every replica's value
/// and the shards did not keep every row (a verdict over some replicas would not be
/// the run's). The skipped claims otherwise.
pub fn claims_a_merge_can_check(scenario: &Scenario, kept: ReplicaRows) -> Result<Vec<Skipped>> {
    let (claims, skipped) = scenario.claims_that_apply("merge --verify: ")?;
    if kept != ReplicaRows::All {
        let over_replicas: Vec<String> = claims
            .iter()
            .filter(|(_, claim)| claim.statistic.reads_replicas())
            .map(|(index, claim)| format!("verify[{index}] ({} of {})", claim.statistic.name(), claim.metric))
            .collect();
        if !over_replicas.is_empty() {
            return Err(Error::bad_input(format!(
                "merge --verify: {} read every replica's value, and the shards were run with --replica-rows {}; \
                 run them with --replica-rows all (the merge can still write fewer with its own --replica-rows)",
                over_replicas.join(", "),
                kept.name()
            )));
        }
    }
    Ok(skipped)
}

/// A shard folder's manifest with what a merge checks first: its index of how many
/// shards, and its run's fingerprint.
struct ShardManifest {
    dir: PathBuf,
    index: u64,
    count: u64,
    print: String,
    manifest: Value,
}

impl ShardManifest {
    fn read(dir: &Path) -> Result<ShardManifest> {
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
        Ok(ShardManifest { dir: dir.to_path_buf(), index, count, print, manifest })
    }

    /// The replica rows it kept (written before shards recorded it: every row).
    fn kept(&self) -> Result<ReplicaRows> {
        ReplicaRows::parse(self.kept_name())
    }

    fn kept_name(&self) -> &str {
        self.manifest.get("replica_rows").and_then(Value::as_str).unwrap_or("all")
    }
}

/// The replica rows every shard kept: one `--replica-rows` for all, or refused.
fn one_replica_rows(manifests: &[ShardManifest]) -> Result<ReplicaRows> {
    let kept = manifests[0].kept()?;
    let unlike: Vec<String> = manifests
        .iter()
        .filter(|m| m.kept().ok() != Some(kept))
        .map(|m| format!("{} ({})", m.dir.display(), m.kept_name()))
        .collect();
    if !unlike.is_empty() {
        return Err(Error::bad_input(format!(
            "merge: {} kept --replica-rows {}, but {}; run every shard with the same --replica-rows; nothing \
             was written",
            manifests[0].dir.display(),
            kept.name(),
            unlike.join(", ")
        )));
    }
    Ok(kept)
}

/// Every shard of one run (one fingerprint, one count), and each index of it once.
fn one_run_every_shard_once(manifests: &[ShardManifest]) -> Result<()> {
    let (count, print) = (manifests[0].count, &manifests[0].print);
    let strangers: Vec<String> = manifests
        .iter()
        .filter(|m| &m.print != print || m.count != count)
        .map(|m| {
            format!("{} (fingerprint {}…, {} shards)", m.dir.display(), &m.print[..12.min(m.print.len())], m.count)
        })
        .collect();
    if !strangers.is_empty() {
        return Err(Error::bad_input(format!(
            "merge: these shards are of another run than {} (fingerprint {}…, {count} shards): {}; nothing was written",
            manifests[0].dir.display(),
            &print[..12.min(print.len())],
            strangers.join(", ")
        )));
    }
    let mut seen: BTreeMap<u64, Vec<&PathBuf>> = BTreeMap::new();
    for m in manifests {
        seen.entry(m.index).or_default().push(&m.dir);
    }
    let missing: Vec<String> = (0..count).filter(|i| !seen.contains_key(i)).map(|i| i.to_string()).collect();
    let duplicated: Vec<String> = seen
        .iter()
        .filter(|(_, dirs)| dirs.len() > 1)
        .map(|(i, dirs)| {
            format!("{i} ({})", dirs.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(", "))
        })
        .collect();
    let mut why = Vec::new();
    if !missing.is_empty() {
        why.push(format!("missing shard(s) {} of {count}", missing.join(", ")));
    }
    if !duplicated.is_empty() {
        why.push(format!("shard(s) given twice: {}", duplicated.join("; ")));
    }
    if !why.is_empty() {
        return Err(Error::bad_input(format!("merge: {}; nothing was written", why.join("; "))));
    }
    Ok(())
}

impl Shards {
    /// The claims a merge of these shards can check ([`claims_a_merge_can_check`]).
    pub fn claims_a_merge_can_check(&self) -> Result<Vec<Skipped>> {
        claims_a_merge_can_check(&self.scenario, self.kept)
    }

    /// Reads and checks `dirs`: one fingerprint, one shard count, every index once,
    /// every file as its manifest recorded it (`allow_unchecked`: a manifest without
    /// checksums is taken as it is).
    pub fn read(dirs: &[PathBuf], allow_unchecked: bool) -> Result<Shards> {
        if dirs.is_empty() {
            return Err(Error::bad_input("merge: name the shard folders (e.g. out/NAME/shards/*)"));
        }
        let manifests = dirs.iter().map(|dir| ShardManifest::read(dir)).collect::<Result<Vec<_>>>()?;
        let kept = one_replica_rows(&manifests)?;
        for m in &manifests {
            verify_files(&m.dir, &m.manifest, allow_unchecked)?;
        }
        // Of one scenario and seed but of other input content: said as such.
        let first = &manifests[0];
        let same_run =
            |m: &Value| ["scenario_toml", "seed", "replicas"].iter().all(|k| m.get(k) == first.manifest.get(k));
        check_same_inputs(
            &manifests
                .iter()
                .filter(|m| same_run(&m.manifest))
                .map(|m| (m.dir.as_path(), &m.manifest))
                .collect::<Vec<_>>(),
        )?;
        one_run_every_shard_once(&manifests)?;
        let toml_text = first.manifest.get("scenario_toml").and_then(Value::as_str).unwrap_or_default();
        let scenario_dir = first.manifest.get("scenario_dir").and_then(Value::as_str);
        seed_inputs(&first.manifest, scenario_dir)?;
        let scenario =
            Scenario::from_manifest(toml_text, scenario_dir).map_err(|e| e.context("merge: the shards' scenario"))?;
        if fingerprint(&scenario) != first.print {
            return Err(Error::bad_input(
                "merge: the shards were written by another stampede version or output format; merge them with that one",
            ));
        }
        // Only where each point's rows lie is kept: the rows are read point by point.
        let list = manifests
            .iter()
            .map(|m| {
                let shard = Shard { index: m.index as u32, count: m.count as u32 };
                Part::of_shard(
                    &m.dir,
                    &scenario,
                    &Plan::new(scenario.point_count(), scenario.run.replicas, Some(shard)),
                    kept,
                )
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Shards { scenario, list, kept })
    }

    /// Feeds `sinks` as `run_grid` would for the whole run.
    pub fn produce(&self, sinks: Sinks) -> Result<()> {
        for index in 0..self.scenario.point_count() {
            let mut gather = Gather::new(&self.scenario, index, 0..self.scenario.run.replicas);
            // In the order of the replicas they hold of this point.
            let mut parts: Vec<&Part> = self.list.iter().collect();
            parts.sort_by_key(|part| Gather::first_replica(part, index));
            for part in parts {
                gather.add(part, sinks.records)?;
            }
            (sinks.point)(&self.scenario.grid_point(index)?, gather.finish()?)?;
        }
        Ok(())
    }
}

/// Merges `shards` into `out_root/NAME/`, with `documents`; refuses to replace a
/// folder that holds any of the shards, or (unless `writing.force`) anything stampede
/// did not write.
pub fn execute_merge(
    shards: &Shards,
    out_root: &Path,
    documents: Option<&pipeline::Documents>,
    writing: pipeline::Writing,
) -> Result<RunReport> {
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
    let (asked, kept) = (writing.shape.replica_rows, shards.kept);
    let covered = match (asked, kept) {
        (_, ReplicaRows::All) | (ReplicaRows::None, _) => true,
        (ReplicaRows::Sample(asked), ReplicaRows::Sample(kept)) => asked <= kept,
        _ => false,
    };
    if !covered {
        return Err(Error::bad_input(format!(
            "merge --replica-rows {}: the shards kept only --replica-rows {}; merge with that (the default) or \
             less, or run the shards again; nothing was written",
            asked.name(),
            kept.name()
        )));
    }
    pipeline::write_run(&shards.scenario, out_root, 1, &|sinks| shards.produce(sinks), documents, writing)
}

#[cfg(test)]
mod tests {
    use super::*;
    use stampede_scenario::base::typing::parse_text;
    use stampede_scenario::Overrides;

    fn mmc(claims: &str) -> Scenario {
        let text = format!(
            "name = \"t\"\nmodel = \"mmc\"\n[run]\nhorizon_s = 100.0\nreplicas = 2\n\
             [queue]\narrival_rate_per_s = 1.0\nservice_rate_per_s = 1.5\nservers = 1\n{claims}"
        );
        Scenario::resolve(parse_text(&text, "t").unwrap(), &Overrides::default()).unwrap()
    }

    const MEAN: &str =
        "[[verify]]\ngrid_point = 0\nmetric = \"utilization_ratio\"\nstatistic = \"mean\"\nat_most = 1.0\n";
    const P95: &str =
        "[[verify]]\ngrid_point = 0\nmetric = \"utilization_ratio\"\nstatistic = \"p95\"\nat_most = 1.0\n";

    #[test]
    fn a_folder_of_shards_stands_for_them_in_name_order() {
        let root = tempfile::tempdir().unwrap();
        let shards = root.path().join("shards");
        for name in ["shard=1", "shard=0", "notes"] {
            std::fs::create_dir_all(shards.join(name)).unwrap();
        }
        let one = root.path().join("one");
        std::fs::create_dir_all(&one).unwrap();
        std::fs::write(one.join("manifest.json"), "{}").unwrap();
        let found = shard_folders(&[shards.clone(), one.clone()]).unwrap();
        assert_eq!(found, [shards.join("shard=0"), shards.join("shard=1"), one]);

        let empty = root.path().join("empty");
        std::fs::create_dir_all(&empty).unwrap();
        let error = shard_folders(&[empty]).unwrap_err().to_string();
        assert!(error.contains("empty: not a shard folder, and it holds none (shard=K folders"), "{error}");
    }

    #[test]
    fn a_merge_checks_claims_over_replicas_only_when_every_row_was_kept() {
        assert!(claims_a_merge_can_check(&mmc(MEAN), ReplicaRows::None).unwrap().is_empty());
        assert!(claims_a_merge_can_check(&mmc(P95), ReplicaRows::All).is_ok());
        let error = claims_a_merge_can_check(&mmc(&format!("{MEAN}{P95}")), ReplicaRows::Sample(3)).unwrap_err();
        let message = error.to_string();
        assert!(message.contains("verify[1] (p95 of utilization_ratio) read every replica's value"), "{message}");
        assert!(message.contains("--replica-rows sample:3; run them with --replica-rows all"), "{message}");
        assert_eq!(error.exit_code(), 2);
        let none = claims_a_merge_can_check(&mmc(""), ReplicaRows::All).unwrap_err().to_string();
        assert_eq!(none, "merge --verify: scenario t declares no [[verify]] assertions");
    }
}
