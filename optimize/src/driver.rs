//! `stampede optimize`, end to end: the search's replicas run as simulation, each
//! round kept as a partial folder (the checkpoint `--resume` replays), and the output
//! folder written from the rounds by the same code that writes a run's.
//!
//! The candidates are written as one scenario whose grid lists exactly them
//! (`[grid] points`: the scenario's axes, one axis per `--range` holding the values
//! sampled so far, and per candidate an index into each): candidate `c` is grid point
//! `c` of that scenario, in every round (candidates are only ever appended), in the
//! output tables and in `optimize.parquet`. The folder is what `stampede run` of that
//! scenario would write, except that each grid point has its own replica count
//! (`summary.parquet`'s `replicas` column).
//!
//! Layout while it runs: `OUT/.NAME.optimize/optimize.json` (which search it
//! belongs to) and `round-NNNN/` per round (`replicas.parquet`, `partials.parquet`,
//! `round.json` with the ranges it ran; renamed into place whole). Removed once the
//! output folder is in place.

use std::ops::Range;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use stampede_output::{StagedFile, StagedSet};

use super::across::{worse_is_higher_objective, worse_is_higher_requirement, Across};
use super::race::Settings;
use super::request::Request;
use super::search::{search, Evaluator, Outcome, Point};
use super::space::Dimension;
use stampede_run::layout::ReplicaRows;
use stampede_run::partial::{Gather, Part, PartWriter};
use stampede_run::pipeline::{write_run, Documents, Writing};
use stampede_run::report::RunReport;
use stampede_run::runner::{run_ranges, PointResult, ReplicaRecord, Sinks};
use stampede_scenario::base::error::{Error, Result};
use stampede_scenario::resolved::{GridPoint, Scenario};
use stampede_scenario::scenario::document::POINTS_KEY;
use stampede_scenario::scenario::Overrides;

/// A finished search and the folder written from it.
pub struct Optimized {
    /// What the terminal, `--json` and `optimize.json` say.
    pub answer: super::answer::Answer,
    pub outcome: Outcome,
    /// The scenario of every candidate (candidate c is its grid point c).
    pub candidates: Scenario,
    pub report: RunReport,
}

/// Writes the candidates of a search as one scenario: the base's axes, one axis per
/// range (the values sampled so far), and `[grid] points` listing the candidates.
pub(crate) struct Candidates<'a> {
    base: &'a Scenario,
    source: toml::Table,
    dimensions: &'a [Dimension],
    /// Per dimension, the distinct values in first-use order (indices stay put).
    values: Vec<Vec<f64>>,
}

impl<'a> Candidates<'a> {
    pub(crate) fn new(base: &'a Scenario, dimensions: &'a [Dimension]) -> Result<Candidates<'a>> {
        let source: toml::Table = toml::from_str(&base.to_toml())
            .map_err(|e| Error::bad_input(format!("the resolved scenario does not parse back: {e}")))?;
        Ok(Candidates { base, source, dimensions, values: vec![Vec::new(); dimensions.len()] })
    }

    /// The candidates without the scenario's `[[verify]]` claims: for a search that
    /// only reads metrics (`map`, `calibrate`). A claim names grid points of the base
    /// grid (`grid_point = 1`), which mean nothing in a round's grid of candidates — a
    /// round of one candidate would refuse the claim as naming a point it lacks.
    pub(crate) fn without_claims(mut self) -> Candidates<'a> {
        self.source.remove("verify");
        self
    }

    /// The base grid's index per axis of grid point `grid`.
    fn base_choice(&self, grid: u32) -> Vec<u32> {
        if let Some(points) = self.base.grid_combinations() {
            return points[grid as usize].clone();
        }
        let mut rest = grid as usize;
        let mut choice = vec![0u32; self.base.grid.len()];
        for (slot, axis) in choice.iter_mut().zip(&self.base.grid).rev() {
            *slot = (rest % axis.values.len()) as u32;
            rest /= axis.values.len();
        }
        choice
    }

    /// The scenario with `points` as its grid.
    pub(crate) fn scenario(&mut self, points: &[Point]) -> Result<Scenario> {
        let mut combos = Vec::with_capacity(points.len());
        for point in points {
            let mut choice = self.base_choice(point.grid);
            for (d, &value) in point.values.iter().enumerate() {
                let index = match self.values[d].iter().position(|&v| v == value) {
                    Some(index) => index,
                    None => {
                        self.values[d].push(value);
                        self.values[d].len() - 1
                    }
                };
                choice.push(index as u32);
            }
            combos.push(choice);
        }
        let mut grid = toml::Table::new();
        for axis in &self.base.grid {
            grid.insert(axis.path.clone(), toml::Value::Array(axis.values.clone()));
        }
        for (d, dimension) in self.dimensions.iter().enumerate() {
            let values = self.values[d].iter().map(|&v| dimension.toml(v)).collect();
            grid.insert(dimension.path.clone(), toml::Value::Array(values));
        }
        grid.insert(POINTS_KEY.into(), toml::Value::try_from(&combos).expect("indices serialise"));
        let mut source = self.source.clone();
        source.insert("grid".into(), toml::Value::Table(grid));
        let overrides = Overrides::default();
        let resolved = match self.base.base_dir() {
            Some(dir) => Scenario::resolve_in(source, &overrides, dir),
            None => Scenario::resolve(source, &overrides),
        }?;
        // The metric expressions the base gained (`--minimize 'a + b'`, `--require`)
        // are columns of every candidate too: the search reads them by the base's
        // column index (without them, the index ran past the candidates' table).
        let expressions: Vec<(String, String)> = self
            .base
            .derived_metrics()
            .iter()
            .map(|text| (text.clone(), "the search's metric expressions".to_string()))
            .collect();
        let resolved = resolved.with_metrics(&expressions)?;
        // The search reads every candidate's values by the base's column index: the
        // columns must be the base's, in its order, or an index runs past the table
        // (checked in every build, once per round: a wrong answer is worse than a refusal).
        if resolved.schema.metric_names() != self.base.schema.metric_names() {
            return Err(Error::bad_input(format!(
                "optimize: the candidates measure other metrics than the scenario ({} columns against {}); a \
                 --range may vary settings, not what is measured",
                resolved.schema.metric_names().len(),
                self.base.schema.metric_names().len()
            )));
        }
        Ok(resolved)
    }
}

/// The rounds kept on disk.
struct Rounds {
    dir: PathBuf,
    identity: String,
    resume: bool,
    opened: bool,
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> Error + '_ {
    move |e| Error::io(format!("optimize checkpoint {}: {e}", path.display()))
}

impl Rounds {
    /// Opens the folder at the first round (a search refused before it writes nothing).
    fn open(&mut self) -> Result<()> {
        if self.opened {
            return Ok(());
        }
        self.opened = true;
        let (dir, e) = (&self.dir, io(&self.dir));
        if dir.exists() {
            let recorded: Value = std::fs::read_to_string(dir.join("optimize.json"))
                .ok()
                .and_then(|t| serde_json::from_str(&t).ok())
                .unwrap_or(Value::Null);
            let ours = std::fs::read_dir(dir).map_err(&e)?.all(|entry| {
                entry.is_ok_and(|entry| {
                    let name = entry.file_name().to_string_lossy().into_owned();
                    name.starts_with("round-")
                        || name.starts_with(".round-")
                        || name.starts_with("optimize.json")
                        || name.starts_with(".optimize.json")
                })
            });
            if !ours {
                return Err(Error::bad_input(format!(
                    "{} is where optimize keeps its rounds, but it holds files stampede did not write; nothing was \
                     written",
                    dir.display()
                ))
                .with_hint("move that folder away, or choose another folder with --out"));
            }
            let same = recorded.get("identity").and_then(Value::as_str) == Some(self.identity.as_str());
            if self.resume && !same {
                return Err(Error::bad_input(format!(
                    "--resume: the rounds in {} belong to another search (another scenario, objective, constraint, \
                     range, budget or seed); run without --resume to start over",
                    dir.display()
                )));
            }
            if !self.resume {
                std::fs::remove_dir_all(dir).map_err(&e)?;
            }
        } else if self.resume {
            eprintln!("stampede: --resume: no rounds in {}; searching from the start", dir.display());
        }
        std::fs::create_dir_all(dir).map_err(&e)?;
        let bytes = serde_json::to_vec_pretty(&json!({"identity": self.identity})).expect("JSON serialises");
        StagedFile::with_contents(dir, "optimize.json", &bytes)?.commit()?;
        Ok(())
    }

    fn round_dir(&self, round: u32) -> PathBuf {
        self.dir.join(format!("round-{round:04}"))
    }

    /// Round `round`'s folder, if a previous run of this search finished it with these
    /// ranges (its marker, `round.json`, is written last and removed first).
    fn finished(&self, round: u32, ranges: &[Range<u32>]) -> Option<PathBuf> {
        let dir = self.round_dir(round);
        if !["replicas.parquet", "partials.parquet"].iter().all(|f| dir.join(f).is_file()) {
            return None;
        }
        let text = std::fs::read_to_string(dir.join("round.json")).ok()?;
        let info: Value = serde_json::from_str(&text).ok()?;
        (info.get("ranges")? == &ranges_json(ranges)).then_some(dir)
    }
}

fn ranges_json(ranges: &[Range<u32>]) -> Value {
    Value::Array(ranges.iter().map(|r| json!([r.start, r.end])).collect())
}

/// The simulation as the search's evaluator.
struct Simulation<'a> {
    candidates: Candidates<'a>,
    rounds: Rounds,
    /// The model's metric index of each tracked value (objective, then constraints).
    tracked: Vec<usize>,
    /// `--across`: each candidate runs at every value of this axis, and whether a
    /// higher value of each tracked metric is worse (how the worst is taken).
    across: Option<Across>,
    worse_is_higher: Vec<bool>,
    threads: usize,
    progress: &'a (dyn Fn() + Sync),
    /// Rounds played, in order (their folders).
    played: Vec<PathBuf>,
}

impl Evaluator for Simulation<'_> {
    fn evaluate(&mut self, round: u32, points: &[Point], ranges: &[Range<u32>]) -> Result<Vec<Vec<Vec<f64>>>> {
        let Some(across) = self.across.clone() else { return self.evaluate_grid(round, points, ranges) };
        // Each candidate at every value of the axis, on the same replicas; the race sees
        // their worst (or mean) per replica.
        let per = across.values() as usize;
        let expanded = expand(&across, points);
        let expanded_ranges: Vec<Range<u32>> = ranges.iter().flat_map(|r| vec![r.clone(); per]).collect();
        let values = self.evaluate_grid(round, &expanded, &expanded_ranges)?;
        let combined = values
            .chunks(per)
            .map(|at_each| {
                let replicas = at_each[0].len();
                debug_assert!(at_each.iter().all(|v| v.len() == replicas), "the same replicas at every value");
                (0..replicas)
                    .map(|j| {
                        (0..self.tracked.len())
                            .map(|t| {
                                let each: Vec<f64> = at_each.iter().map(|v| v[j][t]).collect();
                                across.combine(&each, self.worse_is_higher[t])
                            })
                            .collect()
                    })
                    .collect()
            })
            .collect();
        Ok(combined)
    }
}

/// Candidate points at every value of the axis: candidate `c` at value `k` is
/// `c · K + k`, at the base grid's point for its grid point and `k`.
fn expand(across: &Across, points: &[Point]) -> Vec<Point> {
    points
        .iter()
        .flat_map(|p| (0..across.values()).map(move |k| Point { grid: across.base_point(p.grid, k), ..p.clone() }))
        .collect()
}

impl Simulation<'_> {
    /// Runs `ranges[c]` of grid point `c` of the candidates' scenario for `points`.
    fn evaluate_grid(&mut self, round: u32, points: &[Point], ranges: &[Range<u32>]) -> Result<Vec<Vec<Vec<f64>>>> {
        self.rounds.open()?;
        let scenario = self.candidates.scenario(points)?;
        let dir = match self.rounds.finished(round, ranges) {
            Some(dir) => {
                for _ in 0..ranges.iter().map(|r| r.len()).sum::<usize>() {
                    (self.progress)();
                }
                dir
            }
            None => self.run_round(&scenario, round, ranges)?,
        };
        let part = Part::read(&dir)?;
        self.played.push(dir);
        // Per candidate, per replica, the tracked metrics' values (one read of its rows).
        let values = (0..points.len() as u32)
            .map(|c| {
                let mut replicas: Vec<Vec<f64>> = Vec::new();
                part.stream_point(&scenario, c, &mut |rows| {
                    let each =
                        (0..rows.replica.len()).map(|j| self.tracked.iter().map(|&m| rows.metrics[m][j]).collect());
                    replicas.extend(each);
                    Ok(())
                })?;
                Ok(replicas)
            })
            .collect::<Result<_>>()?;
        Ok(values)
    }
}

impl Simulation<'_> {
    fn run_round(&self, scenario: &Scenario, round: u32, ranges: &[Range<u32>]) -> Result<PathBuf> {
        let e = io(&self.rounds.dir);
        let temporary = self.rounds.dir.join(format!(".round-{round:04}-{}", std::process::id()));
        if temporary.exists() {
            std::fs::remove_dir_all(&temporary).map_err(&e)?;
        }
        std::fs::create_dir_all(&temporary).map_err(&e)?;
        let writer = std::cell::RefCell::new(PartWriter::create_scratch(&temporary, scenario, ReplicaRows::All)?);
        let mut records = |records: &[ReplicaRecord]| writer.borrow_mut().records(scenario, records);
        let mut points =
            |point: &GridPoint, result: PointResult| writer.borrow_mut().point(scenario, point.index, &result);
        run_ranges(scenario, ranges, self.threads, self.progress, Sinks { records: &mut records, point: &mut points })?;
        let mut staged = StagedSet::default();
        writer.into_inner().finish(&mut staged)?;
        staged.commit()?;
        let info = json!({"round": round, "ranges": ranges_json(ranges)});
        StagedFile::with_contents(&temporary, "round.json", info.to_string().as_bytes())?.commit()?;
        let dir = self.rounds.round_dir(round);
        if dir.exists() {
            stampede_output::remove_marked_parts(&dir, "round.json").map_err(&e)?;
        }
        std::fs::rename(&temporary, &dir).map_err(&e)?;
        Ok(dir)
    }
}

impl<'a> Simulation<'a> {
    /// The evaluator for `request` on `base`: its candidates, the metrics it tracks
    /// (objective, then constraints) and which way each is worse, its rounds' folder.
    fn new(
        base: &'a Scenario,
        request: &'a Request,
        rounds_dir: PathBuf,
        resume: bool,
        (threads, progress): (usize, &'a (dyn Fn() + Sync)),
    ) -> Result<Self> {
        let metrics = base.schema.metric_names();
        let index = |name: &str| metrics.iter().position(|m| *m == name).expect("checked when parsed");
        let mut tracked = vec![index(&request.objective.metric)];
        tracked.extend(request.constraints.iter().map(|c| index(&c.metric)));
        let mut worse_is_higher = vec![worse_is_higher_objective(request.objective.sense)];
        worse_is_higher.extend(request.constraints.iter().map(|c| worse_is_higher_requirement(&c.requirement)));
        Ok(Simulation {
            candidates: Candidates::new(base, &request.dimensions)?,
            rounds: Rounds { dir: rounds_dir, identity: request.identity(base), resume, opened: false },
            tracked,
            across: request.across.clone(),
            worse_is_higher,
            threads,
            progress,
            played: Vec::new(),
        })
    }
}

/// Hands the records and result of each of the written candidates' grid `points` to
/// `sinks`, gathered from the rounds `played`: grid point g is candidate g / `per`
/// (with --across, `per` points a candidate), with as many replicas as the race gave it.
fn gather_candidates(
    played: &[PathBuf],
    (candidates, points): (&Scenario, Range<u32>),
    outcome: &Outcome,
    per: u32,
    sinks: Sinks,
) -> Result<()> {
    let parts: Vec<Part> = played.iter().map(|dir| Part::read(dir)).collect::<Result<_>>()?;
    for g in points {
        let replicas = outcome.race.replicas((g / per) as usize);
        let mut gather = Gather::new(candidates, g, 0..replicas);
        for part in &parts {
            gather.add(part, sinks.records)?;
        }
        let mut point = candidates.grid_point(g)?;
        point.run.replicas = replicas;
        (sinks.point)(&point, gather.finish()?)?;
    }
    Ok(())
}

/// Runs the search for `request` on `base` and writes `out_root/<name>/`: the usual
/// tables of every candidate, `optimize.parquet`, `optimize.json` and `documents`
/// (written after those, so a report can read them).
pub fn execute(
    base: &Scenario,
    request: &Request,
    out_root: &Path,
    threads: usize,
    progress: &(dyn Fn() + Sync),
    documents: &Documents,
    writing: Writing,
) -> Result<Optimized> {
    request.check(base)?;
    // The output folder is checked before the search, not after it: a refusal then
    // costs nothing (the write checks again under the folder's lock).
    stampede_output::check_replaceable(&out_root.join(&base.name), writing.replace()).map_err(Error::from)?;
    let shape = request.shape(base);
    let settings = Settings {
        sense: request.objective.sense,
        indifference: request.indifference.unwrap_or(f64::NAN),
        confidence: request.confidence,
        first_stage: request.first_stage,
        planned_candidates: 0,
    };
    let rounds_dir = out_root.join(format!(".{}.optimize", base.name));
    let mut simulation = Simulation::new(base, request, rounds_dir, writing.resume, (threads, progress))?;
    let outcome = match search(settings, request.constraints.clone(), &shape, &mut simulation) {
        Ok(outcome) => outcome,
        Err(error) => {
            // Bad input found mid-search (a candidate's values refused) leaves nothing
            // behind; an I/O failure keeps the rounds for --resume.
            if error.kind == stampede_scenario::base::error::ErrorKind::BadInput
                && simulation.rounds.opened
                && !writing.resume
            {
                let _ = std::fs::remove_dir_all(&simulation.rounds.dir);
            }
            return Err(error);
        }
    };
    // With --across, candidate c is grid points c·K .. c·K + K of the folder.
    let per = request.replicas_per_candidate_replica() as u32;
    let written = match &request.across {
        Some(across) => expand(across, &outcome.points),
        None => outcome.points.clone(),
    };
    let candidates = simulation.candidates.scenario(&written)?;
    let points = 0..written.len() as u32;
    let produce =
        |sinks: Sinks| gather_candidates(&simulation.played, (&candidates, points.clone()), &outcome, per, sinks);
    let mut files = vec![super::answer::TABLE, super::answer::JSON];
    files.extend(documents.files.iter().copied());
    let answer = super::answer::Answer::new(&outcome, &candidates, request, shape.budget);
    let write = |report: &RunReport, staging: &Path| -> Result<()> {
        super::answer::write_table(staging, &outcome, &candidates, request)?;
        let json = serde_json::to_vec_pretty(&answer.to_json()).expect("JSON serialises");
        StagedFile::with_contents(staging, super::answer::JSON, &json)?.commit()?;
        (documents.write)(report, staging)
    };
    let report = write_run(
        &candidates,
        out_root,
        threads,
        &produce,
        Some(&Documents { files, write: &write, disk_bytes: documents.disk_bytes, manifest_fields: None }),
        writing,
    )?;
    // Markers first: a removal killed half way leaves no round that looks finished (a
    // kill there once left round-0000/round.json beside its deleted tables).
    stampede_output::remove_marked_parts(&simulation.rounds.dir, "round.json").map_err(io(&simulation.rounds.dir))?;
    Ok(Optimized { answer, outcome, candidates, report })
}

#[cfg(test)]
mod tests {
    use super::*;
    use stampede_scenario::base::typing::parse_text;
    use stampede_scenario::scenario::builtin::builtin_text;

    fn base(name: &str) -> Scenario {
        let source = parse_text(builtin_text(name).unwrap(), name).unwrap();
        Scenario::resolve(source, &Overrides::default()).unwrap()
    }

    /// A fixed pseudo-random sequence (SplitMix64): the cases are the same every run.
    struct Cases(u64);

    impl Cases {
        fn below(&mut self, n: usize) -> usize {
            (stampede_engine::kernel::rng::splitmix64(&mut self.0) % n as u64) as usize
        }
    }

    /// Fuzz-style (issue 72, item 3: `optimize` panicked with "the len is 347 but the
    /// index is 347"): random lists of metric expressions over a built-in's metrics, in
    /// the search's order, on a grid and with a --range, with and without the claims;
    /// every candidate scenario has exactly the base's columns, so every tracked index
    /// (a plain metric's or an expression's) is inside every candidate's table.
    #[test]
    fn every_tracked_index_is_inside_every_candidates_table() {
        let mut cases = Cases(72);
        for (name, range) in
            [("mmc", "queue.service_rate_per_s=100..300"), ("llm-ladder", "gateway.retry_budget_ratio=0.01..0.5")]
        {
            let plain = base(name);
            let names: Vec<String> = plain.schema.metric_names().iter().map(|m| m.to_string()).collect();
            for case in 0..12 {
                let operators = [" + ", " - ", " * ", " / "];
                let expressions: Vec<(String, String)> = (0..1 + cases.below(4))
                    .map(|_| {
                        let mut text = names[cases.below(names.len())].clone();
                        for _ in 0..cases.below(3) {
                            text.push_str(operators[cases.below(4)]);
                            text.push_str(&names[cases.below(names.len())]);
                        }
                        (text, "--require".to_string())
                    })
                    .collect();
                let Ok(with) = plain.clone().with_metrics(&expressions) else { continue };
                let columns = with.schema.metric_names().len();
                let tracked: Vec<usize> = expressions
                    .iter()
                    .filter_map(|(text, _)| {
                        let normalised = stampede_scenario::models::expression::normalise(text);
                        with.schema.metric_names().iter().position(|m| *m == normalised || *m == text.as_str())
                    })
                    .collect();
                assert!(!tracked.is_empty() && tracked.iter().all(|&t| t < columns), "{name} case {case}");
                let dimensions = if case % 2 == 0 { vec![Dimension::parse(range).unwrap()] } else { Vec::new() };
                let mut candidates = Candidates::new(&with, &dimensions).unwrap();
                // A search's first round holds every grid point (candidates are only
                // appended), so a claim's grid point is always one; without claims
                // (map, calibrate) a round may hold any few.
                let first = if case % 3 == 0 {
                    candidates = candidates.without_claims();
                    1
                } else {
                    with.point_count() as usize
                };
                let points: Vec<Point> = (0..first + cases.below(5))
                    .map(|k| {
                        let unit: Vec<f64> = dimensions.iter().map(|_| (k as f64 + 0.5) / 40.0).collect();
                        let values = dimensions.iter().zip(&unit).map(|(d, &u)| d.value(u)).collect();
                        Point { grid: cases.below(with.point_count() as usize) as u32, unit, values }
                    })
                    .collect();
                let scenario = candidates.scenario(&points).unwrap();
                assert_eq!(scenario.schema.metric_names(), with.schema.metric_names(), "{name} case {case}");
                assert_eq!(scenario.point_count() as usize, points.len());
            }
        }
    }
}
