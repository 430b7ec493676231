//! `stampede rare --shard K/N --runs R`: one shard's share of the splitting runs
//! (those whose index is K modulo N), written as
//! `OUT/NAME-rare/shards/shard=K/rare-shard.json`; and `stampede merge` of such
//! folders into `OUT/NAME-rare/`, the folder one process running all R runs writes.
//!
//! Invariant: a merge is exact. Every float is stored as its IEEE bits, the runs
//! are joined in index order ([`stampede_run::rare::combine`]), and the pilot and
//! the plain sample — the same in every shard, as they derive from the seed alone —
//! are counted once, so the merged tables equal the single process's byte for byte.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use stampede_engine::kernel::splitting::{Pilot, RunRecord, Stage};
use stampede_output::{Replace, StagedFile, StagedSet};
use stampede_run::plan::Shard;
use stampede_run::rare::{combine, Levels, RareEstimate, RareRequest};
use stampede_scenario::{Error, Result};

use super::{diagnose, finish, Answer, Per, PointEstimate, Show};

/// The file that makes a folder a `rare` shard.
const FILE: &str = "rare-shard.json";

/// Where shard `shard` of `OUT/NAME/` is written.
pub(super) fn folder(out: &Path, name: &str, shard: Shard) -> PathBuf {
    out.join(name).join("shards").join(format!("shard={}", shard.index))
}

/// Whether `dir` is a `rare` shard (so `merge` combines estimates, not replicas).
pub(in crate::cli) fn is_rare_shard(dir: &Path) -> bool {
    dir.join(FILE).is_file()
}

/// rare-shard.json.
#[derive(Serialize, Deserialize, PartialEq)]
struct ShardFile {
    scenario: String,
    question: String,
    shard_index: u32,
    shard_count: u32,
    /// `--per`'s text and windows (bits).
    per: Option<(String, u64)>,
    request: RequestFile,
    points: Vec<PointFile>,
}

/// What the output needs of the request; floats as bits.
#[derive(Serialize, Deserialize, PartialEq, Clone, Copy)]
struct RequestFile {
    horizon_ns: u64,
    trajectories: u32,
    relative_error: u64,
    min_runs: u32,
    max_runs: u32,
    max_events: u64,
    seed: u64,
}

/// A pilot: (levels, estimate, plain events mean, events, stalled at), floats as bits.
type PilotBits = (Vec<u64>, u64, u64, u64, Option<u64>);
/// A stage: (level, trajectories, hits, crossed, weight, events), floats as bits.
type StageBits = (u64, u32, u32, u32, u64, u64);
/// A run: (index, estimate as bits, stages).
type RunBits = (u64, u64, Vec<StageBits>);

#[derive(Serialize, Deserialize, PartialEq)]
struct PointFile {
    label: String,
    levels: Vec<u64>,
    pilot: Option<PilotBits>,
    plain_events_mean: u64,
    /// Events before the runs: the pilot's and the plain sample's.
    events_before_runs: u64,
    runs: Vec<RunBits>,
}

fn bits(values: &[f64]) -> Vec<u64> {
    values.iter().map(|v| v.to_bits()).collect()
}

fn floats(values: &[u64]) -> Vec<f64> {
    values.iter().map(|&v| f64::from_bits(v)).collect()
}

impl PointFile {
    fn new(point: &PointEstimate) -> PointFile {
        let found = &point.found;
        PointFile {
            label: point.label.clone(),
            levels: bits(&found.levels),
            pilot: found.pilot.as_ref().map(|pilot| {
                (
                    bits(&pilot.levels),
                    pilot.estimate.to_bits(),
                    pilot.plain_events_mean.to_bits(),
                    pilot.events,
                    pilot.stalled_at.map(f64::to_bits),
                )
            }),
            plain_events_mean: found.plain_events_mean.to_bits(),
            events_before_runs: found.events - found.run_events(),
            runs: found
                .runs
                .iter()
                .map(|run| {
                    let stages = run
                        .stages
                        .iter()
                        .map(|s| (s.level.to_bits(), s.trajectories, s.hits, s.crossed, s.weight.to_bits(), s.events))
                        .collect();
                    (run.run, run.estimate.to_bits(), stages)
                })
                .collect(),
        }
    }

    /// The shard's estimate as it was: its runs, the pilot, what came before them.
    fn estimate(&self) -> RareEstimate {
        let runs: Vec<RunRecord> = self
            .runs
            .iter()
            .map(|(run, estimate, stages)| RunRecord {
                run: *run,
                estimate: f64::from_bits(*estimate),
                stages: stages
                    .iter()
                    .map(|&(level, trajectories, hits, crossed, weight, events)| Stage {
                        level: f64::from_bits(level),
                        trajectories,
                        hits,
                        crossed,
                        weight: f64::from_bits(weight),
                        events,
                    })
                    .collect(),
            })
            .collect();
        let run_events: u64 = runs.iter().map(RunRecord::events).sum();
        RareEstimate {
            // Recomputed by `combine` over every shard's runs.
            probability: 0.0,
            low: 0.0,
            high: 0.0,
            relative_error: f64::INFINITY,
            levels: floats(&self.levels),
            runs,
            pilot: self.pilot.as_ref().map(|(levels, estimate, plain, events, stalled)| Pilot {
                levels: floats(levels),
                estimate: f64::from_bits(*estimate),
                plain_events_mean: f64::from_bits(*plain),
                events: *events,
                stalled_at: stalled.map(f64::from_bits),
            }),
            plain_events_mean: f64::from_bits(self.plain_events_mean),
            events: self.events_before_runs + run_events,
            budget_spent: false,
        }
    }
}

/// Writes shard `shard` of the answer, atomically.
pub(super) fn write(
    out: &Path,
    name: &str,
    shard: Shard,
    answer: &Answer,
    replace: Replace,
    show: Show,
    seconds: f64,
) -> Result<()> {
    let request = &answer.request;
    let file = ShardFile {
        scenario: answer.scenario.clone(),
        question: answer.condition.clone(),
        shard_index: shard.index,
        shard_count: shard.count,
        per: answer.per.as_ref().map(|per| (per.text.clone(), per.windows.to_bits())),
        request: RequestFile {
            horizon_ns: request.horizon,
            trajectories: request.trajectories,
            relative_error: request.relative_error.to_bits(),
            min_runs: request.min_runs,
            max_runs: request.max_runs,
            max_events: request.max_events,
            seed: request.master_seed,
        },
        points: answer.estimates.iter().map(PointFile::new).collect(),
    };
    let root = out.join(name).join("shards");
    std::fs::create_dir_all(&root).map_err(|e| Error::io(format!("cannot create {}: {e}", root.display())))?;
    let staged_folder = stampede_run::pipeline::begin_folder(&root, &format!("shard={}", shard.index), replace)?;
    let dir = staged_folder.path().to_path_buf();
    let mut staged = StagedSet::default();
    let json = serde_json::to_vec_pretty(&file).expect("JSON serialises");
    staged.push(StagedFile::with_contents(&dir, FILE, &json)?);
    let manifest = serde_json::json!({
        "tool": "stampede",
        "kind": "rare-shard",
        "version": stampede_scenario::base::provenance::VERSION,
        "scenario": answer.scenario,
        "command_line": stampede_scenario::base::provenance::command_line(),
        "files": [FILE],
        "shard": { "index": shard.index, "count": shard.count },
    });
    let manifest = serde_json::to_vec_pretty(&manifest).expect("JSON serialises");
    staged.push(StagedFile::with_contents(&dir, "manifest.json", &manifest)?);
    staged.commit()?;
    let written = staged_folder.commit()?;
    if show.json {
        super::super::print_json(&serde_json::json!({
            "shard": { "index": shard.index, "count": shard.count },
            "folder": written.display().to_string(),
            "runs": answer.estimates.iter().map(|point| point.found.runs.len()).sum::<usize>(),
            "merge": format!("stampede merge {} --out {}", root.display(), out.display()),
        }));
    } else if !show.quiet {
        let runs: usize = answer.estimates.iter().map(|point| point.found.runs.len()).sum();
        eprintln!(
            "stampede: shard {} of {}: {runs} splitting runs over {} grid points in {seconds:.1} s; wrote {}",
            shard.index,
            shard.count,
            answer.estimates.len(),
            written.display()
        );
        eprintln!("stampede: when every shard is done: stampede merge {} --out {}", root.display(), out.display());
    }
    Ok(())
}

/// Merges `rare` shard folders into the folder one process writes.
pub(in crate::cli) fn merge(dirs: &[PathBuf], out: &Path, force: bool, json: bool, quiet: bool) -> Result<()> {
    let started = std::time::Instant::now();
    let mut files = Vec::with_capacity(dirs.len());
    for dir in dirs {
        let path = dir.join(FILE);
        let text = std::fs::read_to_string(&path).map_err(|e| {
            Error::bad_input(format!("merge: {}: {e} (every folder must be a `rare --shard` folder)", path.display()))
        })?;
        let file: ShardFile = serde_json::from_str(&text)
            .map_err(|e| Error::bad_input(format!("merge: {}: not a rare shard's file: {e}", path.display())))?;
        files.push((dir, file));
    }
    let (first_dir, first) = &files[0];
    for (dir, file) in &files[1..] {
        let same = file.scenario == first.scenario
            && file.question == first.question
            && file.shard_count == first.shard_count
            && file.per == first.per
            && file.request == first.request
            && file.points.iter().map(|p| &p.label).eq(first.points.iter().map(|p| &p.label));
        if !same {
            return Err(Error::bad_input(format!(
                "merge: {} and {} are shards of different questions (scenario, event, seed, effort or grid differ)",
                first_dir.display(),
                dir.display()
            )));
        }
    }
    let mut indices: Vec<u32> = files.iter().map(|(_, file)| file.shard_index).collect();
    indices.sort_unstable();
    let missing: Vec<String> =
        (0..first.shard_count).filter(|k| indices.binary_search(k).is_err()).map(|k| k.to_string()).collect();
    if !missing.is_empty() {
        return Err(Error::bad_input(format!(
            "merge: shards {} of {} are missing; run them (`rare … --shard K/{}`) and merge again",
            missing.join(", "),
            first.shard_count,
            first.shard_count
        )));
    }
    let r = first.request;
    let request = RareRequest {
        horizon: r.horizon_ns,
        trajectories: r.trajectories,
        levels: Levels::Fixed(Vec::new()),
        relative_error: f64::from_bits(r.relative_error),
        min_runs: r.min_runs,
        max_runs: r.max_runs,
        max_events: r.max_events,
        master_seed: r.seed,
        shard: None,
    };
    let mut estimates = Vec::with_capacity(first.points.len());
    for (index, point) in first.points.iter().enumerate() {
        let parts = files.iter().map(|(_, file)| file.points[index].estimate()).collect();
        let found = combine(parts).map_err(|e| e.context("merge"))?;
        let warnings = diagnose(&found, &request);
        estimates.push(PointEstimate { label: point.label.clone(), found, warnings });
    }
    let per = first.per.as_ref().map(|(text, windows)| Per { text: text.clone(), windows: f64::from_bits(*windows) });
    let answer =
        Answer { scenario: first.scenario.clone(), condition: first.question.clone(), per, request, estimates };
    let replace = stampede_run::pipeline::Writing { force, ..Default::default() }.replace();
    finish(&answer, out, replace, Show { json, quiet }, started.elapsed().as_secs_f64())
}
