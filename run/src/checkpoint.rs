//! Checkpoints: a run is executed as pieces — windows of its task list, each written
//! as a partial folder (its replicas' rows and its points' partial sums) the moment it
//! is done — and the output is then assembled from the pieces by the same gathering
//! that merges shards. A run killed at any moment loses at most the piece in flight
//! (pieces last about `STAMPEDE_CHECKPOINT_S` seconds, 2 by default); `--resume` runs
//! only the missing windows. Since the assembly folds records in replica order and
//! sums exact partials, the output is byte-identical however the work was cut.
//!
//! Layout: `DIR/checkpoint.json` (what run it belongs to) and `DIR/piece-FROM-TO/`
//! (`replicas.parquet`, `partials.parquet`, `piece.json` written last, then the
//! folder renamed into place: a piece exists whole or not at all).

use std::path::{Path, PathBuf};
use std::time::Instant;

use serde_json::{json, Value};
use stampede_output::{StagedFile, StagedSet};

use super::layout::ReplicaRows;
use super::partial::{Gather, Part, PartWriter};
use super::plan::Plan;
use super::runner::{run_grid, PointResult, ReplicaRecord, Sinks};
use stampede_scenario::base::error::{Error, Result};
use stampede_scenario::resolved::{GridPoint, InputFile, Scenario};

/// One finished piece: tasks `from..to`, grid points `first..=last`.
#[derive(Clone, Debug)]
struct Piece {
    from: u64,
    to: u64,
    first: u32,
    last: u32,
    dir: PathBuf,
}

/// A run's checkpoint folder.
pub struct Checkpoint {
    dir: PathBuf,
    /// The replica rows its pieces keep (part of the identity: a resume keeps them alike).
    keep: ReplicaRows,
    pieces: Vec<Piece>,
    /// Tasks already done when it was opened (for the progress bar).
    pub resumed_tasks: u64,
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> Error + '_ {
    move |e| Error::io(format!("checkpoint {}: {e}", path.display()))
}

/// "lat.csv changed (sha256 0123abcd… then, 4567cdef… now)" for every input whose
/// hash differs from the one `recorded` (a checkpoint.json) kept, or `None`.
fn changed_inputs(recorded: &Value, inputs: &[InputFile]) -> Option<String> {
    let then = recorded.get("inputs")?.as_array()?;
    let changed: Vec<String> = inputs
        .iter()
        .filter_map(|input| {
            let old = then.iter().find(|r| {
                r.get("field").and_then(Value::as_str) == Some(&input.field)
                    && r.get("path").and_then(Value::as_str) == Some(&input.file)
            })?;
            let old = old.get("sha256").and_then(Value::as_str)?;
            (old != input.sealed.sha256).then(|| {
                format!(
                    "{} ({}) changed (sha256 {}… then, {}… now)",
                    input.file,
                    input.field,
                    &old[..12.min(old.len())],
                    &input.sealed.sha256[..12]
                )
            })
        })
        .collect();
    (!changed.is_empty()).then(|| changed.join("; "))
}

/// The most tasks in one piece: a piece's rows are held in memory while assembling
/// (4,096: one million one-point replicas peak at 24 MB).
const MAX_PIECE_TASKS: u64 = 4_096;

/// Seconds of work per piece.
fn piece_seconds() -> f64 {
    std::env::var("STAMPEDE_CHECKPOINT_S").ok().and_then(|v| v.parse().ok()).filter(|s: &f64| *s > 0.0).unwrap_or(2.0)
}

/// Refuses to delete `dir` unless it holds only what a checkpoint holds
/// (`checkpoint.json`, its temporary, `piece-*` and `.piece-*` folders): a user's
/// folder with a checkpoint's name is not stampede's to delete.
fn refuse_unless_checkpoint(dir: &Path) -> Result<()> {
    let mut foreign = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io(dir))? {
        let entry = entry.map_err(io(dir))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let is_dir = entry.file_type().map_err(io(dir))?.is_dir();
        let ours = if is_dir {
            name.starts_with("piece-") || name.starts_with(".piece-")
        } else {
            name == "checkpoint.json" || name.starts_with(".checkpoint.json.tmp-")
        };
        if !ours {
            foreign.push(name);
        }
    }
    if foreign.is_empty() {
        return Ok(());
    }
    foreign.sort();
    Err(Error::bad_input(format!(
        "{} is where this run keeps its checkpoint, but it holds {}, which stampede did not write; nothing was \
         written",
        dir.display(),
        foreign.join(", ")
    ))
    .with_hint("move that folder away, or choose another folder with --out"))
}

/// The pieces of the run `identity` kept in `dir`, in order, after checking that its
/// checkpoint is that run's and that its input files did not change. Half-written
/// pieces (`.piece-…`, or without a readable `piece.json`) are removed.
fn resumable_pieces(dir: &Path, identity: &str, inputs: &[InputFile]) -> Result<Vec<Piece>> {
    let e = io(dir);
    let mut pieces = Vec::new();
    let text = std::fs::read_to_string(dir.join("checkpoint.json")).unwrap_or_default();
    let recorded: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    if let Some(changed) = changed_inputs(&recorded, inputs) {
        return Err(Error::bad_input(format!(
            "--resume: {changed} since the checkpoint in {} was written; its pieces used the old content, so \
             nothing was resumed",
            dir.display()
        ))
        .with_hint("restore the file as it was to resume, or run without --resume to start over"));
    }
    if recorded.get("identity").and_then(Value::as_str) != Some(identity) {
        return Err(Error::bad_input(format!(
            "--resume: the checkpoint in {} belongs to another run (another scenario, seed, replicas, shard, \
             --replica-rows or stampede version); run without --resume to start over",
            dir.display()
        )));
    }
    for entry in std::fs::read_dir(dir).map_err(&e)? {
        let path = entry.map_err(&e)?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("").to_string();
        if name.starts_with(".piece-") {
            std::fs::remove_dir_all(&path).map_err(&e)?;
            continue;
        }
        if !name.starts_with("piece-") {
            continue;
        }
        let info: Value = std::fs::read_to_string(path.join("piece.json"))
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or(Value::Null);
        let field = |k: &str| info.get(k).and_then(Value::as_u64);
        match (field("from"), field("to"), field("first"), field("last")) {
            (Some(from), Some(to), Some(first), Some(last)) => {
                pieces.push(Piece { from, to, first: first as u32, last: last as u32, dir: path })
            }
            _ => std::fs::remove_dir_all(&path).map_err(&e)?,
        }
    }
    pieces.sort_by_key(|p| p.from);
    Ok(pieces)
}

impl Checkpoint {
    /// Opens `dir` for the run `identity` whose pieces keep the replica rows `keep`:
    /// with `resume`, keeps the pieces of that run (refusing another run's); without,
    /// starts over.
    pub fn open(
        dir: &Path,
        identity: &str,
        inputs: &[InputFile],
        keep: ReplicaRows,
        resume: bool,
    ) -> Result<Checkpoint> {
        let identity = &format!("{identity} rows {}", keep.name());
        let input_hashes: Vec<Value> =
            inputs.iter().map(|i| json!({"field": i.field, "path": i.file, "sha256": i.sealed.sha256})).collect();
        let e = io(dir);
        let mut pieces = Vec::new();
        if resume && !dir.exists() {
            // Not an error: a Slurm task requeued before its first piece, or a script that
            // always passes --resume, has nothing to resume and should simply run.
            eprintln!(
                "stampede: --resume: no checkpoint in {} (no run of this command was interrupted there); running \
                 from the start",
                dir.display()
            );
        }
        if dir.exists() && resume {
            pieces = resumable_pieces(dir, identity, inputs)?;
        } else if dir.exists() {
            refuse_unless_checkpoint(dir)?;
            std::fs::remove_dir_all(dir).map_err(&e)?;
        }
        std::fs::create_dir_all(dir).map_err(&e)?;
        let bytes =
            serde_json::to_vec_pretty(&json!({"identity": identity, "inputs": input_hashes})).expect("JSON serialises");
        StagedFile::with_contents(dir, "checkpoint.json", &bytes)?.commit()?;
        let resumed_tasks = pieces.iter().map(|p| p.to - p.from).sum();
        Ok(Checkpoint { dir: dir.to_path_buf(), keep, pieces, resumed_tasks })
    }

    /// Runs every task of `plan` not in a piece yet, a piece at a time.
    pub fn run(
        &mut self,
        scenario: &Scenario,
        plan: &Plan,
        threads: usize,
        progress: &(dyn Fn() + Sync),
    ) -> Result<()> {
        let total = plan.task_count();
        let mut gaps = Vec::new();
        let mut at = 0;
        for piece in &self.pieces {
            if piece.from > at {
                gaps.push((at, piece.from));
            }
            at = at.max(piece.to);
        }
        if at < total {
            gaps.push((at, total));
        }
        let target = piece_seconds();
        let mut size = (threads as u64 * 4).max(16);
        for (start, end) in gaps {
            let mut from = start;
            while from < end {
                let to = (from + size).min(end);
                // Bounded in tasks too: the assembly holds a piece's rows in memory.
                let started = Instant::now();
                self.run_piece(scenario, plan, threads, progress, from, to)?;
                let elapsed = started.elapsed().as_secs_f64().max(1e-3);
                size = ((size as f64 * target / elapsed) as u64).clamp(threads as u64, MAX_PIECE_TASKS);
                from = to;
            }
        }
        self.pieces.sort_by_key(|p| p.from);
        Ok(())
    }

    fn run_piece(
        &mut self,
        scenario: &Scenario,
        plan: &Plan,
        threads: usize,
        progress: &(dyn Fn() + Sync),
        from: u64,
        to: u64,
    ) -> Result<()> {
        let e = io(&self.dir);
        let temporary = self.dir.join(format!(".piece-{from:012}-{}", std::process::id()));
        std::fs::create_dir_all(&temporary).map_err(&e)?;
        let writer = std::cell::RefCell::new(PartWriter::create_scratch(&temporary, scenario, self.keep)?);
        let (mut first, mut last) = (u32::MAX, 0u32);
        let window = plan.window(from, to);
        let mut records = |records: &[ReplicaRecord]| -> Result<()> {
            for r in records {
                first = first.min(r.grid_point);
                last = last.max(r.grid_point);
            }
            writer.borrow_mut().records(scenario, records)
        };
        // Written as each point finishes: a piece may span thousands of points.
        let mut points = |point: &GridPoint, result: PointResult| -> Result<()> {
            writer.borrow_mut().point(scenario, point.index, &result)
        };
        run_grid(scenario, &window, threads, progress, Sinks { records: &mut records, point: &mut points })?;
        let writer = writer.into_inner();
        let mut staged = StagedSet::default();
        writer.finish(&mut staged)?;
        staged.commit()?;
        let info = json!({"from": from, "to": to, "first": first, "last": last});
        StagedFile::with_contents(&temporary, "piece.json", info.to_string().as_bytes())?.commit()?;
        let dir = self.dir.join(format!("piece-{from:012}-{to:012}"));
        std::fs::rename(&temporary, &dir).map_err(&e)?;
        self.pieces.push(Piece { from, to, first, last, dir });
        Ok(())
    }

    /// Feeds `sinks` from the pieces, point by point, as `run_grid` would have for
    /// `plan` — holding one piece in memory at a time (and the last one of a point,
    /// which may begin the next).
    pub fn produce(&self, scenario: &Scenario, plan: &Plan, sinks: Sinks) -> Result<()> {
        let mut carried: Option<(usize, Part)> = None;
        for index in 0..plan.points {
            let expected = plan.replicas_of(index);
            if expected.is_empty() {
                continue;
            }
            let mut gather = Gather::new(scenario, index, expected);
            for (i, piece) in self.pieces.iter().enumerate().filter(|(_, p)| p.first <= index && index <= p.last) {
                let part = match carried.take() {
                    Some((j, part)) if j == i => part,
                    _ => Part::read(&piece.dir)?,
                };
                gather.add(&part, sinks.records)?;
                if piece.last > index {
                    carried = Some((i, part));
                }
            }
            (sinks.point)(&scenario.grid_point(index)?, gather.finish()?)?;
        }
        Ok(())
    }

    /// Removes the folder once its run's output is in place.
    pub fn remove(self) -> Result<()> {
        // Markers first: a removal killed half way leaves no piece that looks finished.
        stampede_output::remove_marked_parts(&self.dir, "piece.json").map_err(io(&self.dir))
    }
}
