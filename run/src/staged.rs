//! A run whose replicas `--precision` chooses, each replica simulated once.
//!
//! Every stage of the search ([`super::precision::search`]) is written as it finishes
//! as a partial folder — the stage's replicas `from..to` of every grid point, rows and
//! exact partial sums, exactly what a shard or a checkpoint piece holds — in
//! `OUT/.NAME.precision-PID/stage-K/`. When the search stops at N replicas, the output
//! folder is written from those parts by the same gathering that assembles a run from
//! its checkpoint pieces or a merge from its shards: replica order, integer and exact
//! sums. So the folder is byte for byte the plain run with N replicas — at the cost of
//! the search alone, not the search and then the run again.
//!
//! The stage folder is removed when the run's folder is in place, or when it fails; an
//! interrupted search starts over (its stages are not a checkpoint `--resume` reads).

use std::path::{Path, PathBuf};

use stampede_output::StagedSet;
use stampede_scenario::base::error::{Error, Result};
use stampede_scenario::resolved::{GridPoint, Scenario};

use super::budget;
use super::layout::ReplicaRows;
use super::partial::{Gather, Part, PartWriter};
use super::pipeline::{write_run, Documents, Writing};
use super::precision::{search, Goal, Outcome, Reached, StageEvent, Stages, FIRST_STAGE};
use super::report::RunReport;
use super::runner::{PointResult, ReplicaRecord, Sinks};

/// Writes each stage as a partial folder, and tells the caller.
struct StageWriter<'a> {
    scenario: &'a Scenario,
    dir: PathBuf,
    keep: ReplicaRows,
    open: Option<(PathBuf, PartWriter)>,
    written: Vec<PathBuf>,
    tell: &'a mut dyn FnMut(StageEvent),
}

impl Stages for StageWriter<'_> {
    fn starting(&mut self, from: u32, to: u32) -> Result<()> {
        let dir = self.dir.join(format!("stage-{}", self.written.len()));
        std::fs::create_dir_all(&dir).map_err(|e| Error::io(format!("cannot create {}: {e}", dir.display())))?;
        self.open = Some((dir.clone(), PartWriter::create_scratch(&dir, self.scenario, self.keep)?));
        (self.tell)(StageEvent::Starting { from, to });
        Ok(())
    }

    fn records(&mut self, records: &[ReplicaRecord]) -> Result<()> {
        let (_, writer) = self.open.as_mut().expect("a stage is open");
        writer.records(self.scenario, records)
    }

    fn point(&mut self, point: &GridPoint, result: &PointResult) -> Result<()> {
        let (_, writer) = self.open.as_mut().expect("a stage is open");
        writer.point(self.scenario, point.index, result)
    }

    fn finished(&mut self, replicas: u32, reached: &[Reached]) -> Result<()> {
        let (dir, writer) = self.open.take().expect("a stage is open");
        let mut staged = StagedSet::default();
        writer.finish(&mut staged)?;
        staged.commit()?;
        self.written.push(dir);
        (self.tell)(StageEvent::Finished { replicas, reached });
        Ok(())
    }
}

/// Removes the stage folder however the run ends.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Searches `scenario` (resolved; its replica count is not used) for the replicas
/// `goal` needs, then writes `out_root/NAME/` as the run of `with_replicas(N)` —
/// the scenario resolved again with N replicas, which must have the same columns.
#[allow(clippy::too_many_arguments)]
pub fn execute_precise(
    scenario: &Scenario,
    goal: &Goal,
    with_replicas: &dyn Fn(u32) -> Result<Scenario>,
    out_root: &Path,
    threads: usize,
    progress: &(dyn Fn() + Sync),
    tell: &mut dyn FnMut(StageEvent),
    documents: Option<&Documents>,
    writing: Writing,
) -> Result<(RunReport, Outcome)> {
    // A destination that is not stampede's is refused before anything runs.
    stampede_output::check_replaceable(&out_root.join(&scenario.name), writing.replace())?;
    // What killed `--precision` runs of this name left behind goes first.
    stampede_output::folder::remove_dead_scratch(out_root, &scenario.name, "precision");
    let dir = out_root.join(format!(".{}.precision-{}", scenario.name, std::process::id()));
    let scratch = Scratch(dir.clone());
    // The parts keep the rows written, and every row while a claim reads replica values.
    let keep = if scenario.replica_metrics().is_empty() { writing.shape.replica_rows } else { ReplicaRows::All };
    let mut stages = StageWriter { scenario, dir, keep, open: None, written: Vec::new(), tell };
    let outcome = search(scenario, goal, FIRST_STAGE, threads, progress, &mut stages)?;
    let chosen = with_replicas(outcome.replicas)?;
    debug_assert_eq!(
        chosen.schema.metric_names(),
        scenario.schema.metric_names(),
        "resolved alike but for the replicas"
    );
    debug_assert_eq!(chosen.run.seed, scenario.run.seed);
    let mut estimate = budget::estimate(&chosen, threads);
    estimate.disk_bytes += documents.map_or(0.0, |d| d.disk_bytes);
    budget::check(estimate, out_root)?;
    let parts = stages.written.iter().map(|dir| Part::read(dir)).collect::<Result<Vec<_>>>()?;
    let produce = |sinks: Sinks| {
        for index in 0..chosen.point_count() {
            let mut gather = Gather::new(&chosen, index, 0..outcome.replicas);
            for part in &parts {
                gather.add(part, sinks.records)?;
            }
            (sinks.point)(&chosen.grid_point(index)?, gather.finish()?)?;
        }
        Ok(())
    };
    let report = write_run(&chosen, out_root, threads, &produce, documents, writing)?;
    drop(scratch);
    Ok((report, outcome))
}
