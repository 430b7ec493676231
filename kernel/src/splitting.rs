//! Importance splitting: the probability of a rare event, estimated by cloning the
//! trajectories that get closer to it.
//!
//! A *score* (a state quantity that rises toward the event, such as a queue's depth)
//! and increasing *levels* L₁ < L₂ < … < Lₘ cut the way to the event into stages.
//! Stage k starts `trajectories` (N) trajectories — fresh ones at stage 0, clones of
//! the states in which stage k−1's trajectories first reached Lₖ₋₁ after — and runs
//! each until the event holds (a *hit*), its score reaches Lₖ (it *crosses*: its state
//! is an entrance to stage k+1, and it stops), or it ends (the horizon, the stop
//! condition, no events left: a *miss*). The last stage has no level. With w₀ = 1 and
//! wₖ₊₁ = wₖ · crossedₖ / N, one run's estimate is
//!
//! ```text
//! p̂ = Σₖ wₖ · hitsₖ / N
//! ```
//!
//! which is **unbiased for any score and any levels** (fixed-effort splitting): each
//! natural trajectory's event falls in exactly one stage, the one it was in when the
//! event happened, and clones are allotted so that every entrance gets N / entrances
//! clones in expectation (⌊N / entrances⌋ each, the remainder to entrances drawn
//! without replacement). A poor score costs variance, never bias. Independent runs
//! give the interval (see `stampede-run`'s `rare`).
//!
//! **Clones are replayed, not copied.** A trajectory is a [`Path`]: the replica it
//! started as and the points (events handled so far, salt) at which its random
//! streams were forked. Rebuilding it runs the replica from time zero, forking at
//! those points; the same path is the same trajectory, byte for byte. That needs
//! nothing of a model but to fork its streams ([`Trajectory::fork`]): no model has to
//! be `Clone`, and memory stays one trajectory per thread. The price is the prefix,
//! re-run once per clone; it is counted in the events a run reports.
//!
//! **Levels** come from a [`pilot`]: adaptive multilevel splitting that runs N
//! trajectories to their end, sets the next level where a fraction `target` of their
//! best scores reach, and clones the states where they first reached it, until the
//! event is hit often enough. Fixed levels then keep every run unbiased (the pilot's
//! own figure is adaptive and slightly biased, so it is only a guide).
//!
//! Determinism: every origin, salt and allotment is a function of (master seed, run,
//! stage, clone), never of a thread; a run is a pure function of its index.

use crate::histogram::LatencyHistogram;
use crate::rng::{mix64, RngStream, StreamPurpose};
use crate::sim::{Model, Simulation};
use crate::time::Nanos;

/// What a model's state says at one instant, for the splitting driver.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Observation {
    /// The importance score: higher is closer to the event.
    pub score: f64,
    /// The rare event holds.
    pub event: bool,
    /// The stop condition holds: the trajectory ends here as a miss.
    pub stopped: bool,
}

/// How a leg of a trajectory ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LegEnd {
    /// The event held (or, for an event judged at the end, held when the run ended).
    Hit,
    /// The score reached the leg's level first.
    Crossed,
    /// The horizon passed, the stop condition held, or nothing was left to happen.
    Miss,
}

/// One trajectory of some model, as the driver steers it. A model implements it
/// with [`leg`] and [`replay`] over its [`Simulation`], so the per-event loop is
/// monomorphised; the driver makes one dynamic call per leg.
pub trait Trajectory {
    /// Runs until the event, the score reaching `level`, or the end (see [`leg`]).
    /// A leg that ends the run may finish the model: nothing runs it afterwards.
    fn leg(&mut self, horizon: Nanos, level: f64, records: Option<&mut Vec<Record>>) -> LegEnd;
    /// Handles events until `events` have been handled since time zero.
    fn replay(&mut self, events: u64);
    /// Forks every random stream the model draws from (see [`RngStream::fork`]).
    fn fork(&mut self, salt: u64);
    /// Events handled since time zero.
    fn events(&self) -> u64;
    /// The state's observation now.
    fn observe(&self) -> Observation;
}

/// A model whose random streams can be forked: what splitting needs of it. A stream
/// left unforked makes clones share its draws — still unbiased, less diverse.
pub trait Forkable {
    /// Forks every random stream the model owns with `salt` ([`RngStream::fork`]).
    fn fork_streams(&mut self, salt: u64);
}

/// A model configured for splitting: it starts trajectories.
pub trait Splittable: Sync {
    /// The histograms a trajectory records into (it needs them; their contents are
    /// never read).
    fn scratch(&self) -> Vec<LatencyHistogram>;
    /// Replica `origin` of the model at time zero, its first events scheduled.
    fn start<'a>(&self, scratch: &'a mut [LatencyHistogram], origin: u64) -> Box<dyn Trajectory + 'a>;
}

/// A score's new best and when it was reached (events handled since time zero).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Record {
    /// The score.
    pub score: f64,
    /// Events handled when the score first reached it.
    pub events: u64,
}

/// The loop of one leg over a concrete simulation. The state it starts in is only
/// checked against the level (a clone starts where its parent crossed; a fresh
/// trajectory's empty state is neither an event nor a stop); after each event it is
/// checked in the order event (a hit), stop condition (a miss), level (crossed). With
/// `records`, every new best score is appended, the start's included.
///
/// When the run ends (the horizon passes or nothing is left to happen), `at_end`
/// judges an event that only the finished run can tell (a metric such as
/// `recovered == false`): `true` is a hit. It is called at most once, so it may
/// finish the model; an event of the state alone passes `|_| false`. Fixed-effort
/// splitting stays unbiased for such an event: each natural trajectory ends in
/// exactly one stage, and that is where its end is counted.
pub fn leg<M: Model>(
    simulation: &mut Simulation<M>,
    horizon: Nanos,
    level: f64,
    mut records: Option<&mut Vec<Record>>,
    observe: impl Fn(&M) -> Observation,
    at_end: impl FnOnce(&mut Simulation<M>) -> bool,
) -> LegEnd {
    let mut best = f64::NEG_INFINITY;
    let mut seen = observe(&simulation.model);
    loop {
        if seen.score >= level {
            return LegEnd::Crossed;
        }
        if seen.score > best {
            best = seen.score;
            if let Some(records) = records.as_deref_mut() {
                records.push(Record { score: seen.score, events: simulation.events_handled() });
            }
        }
        if !simulation.step_within(horizon) {
            return if at_end(simulation) { LegEnd::Hit } else { LegEnd::Miss };
        }
        seen = observe(&simulation.model);
        if seen.event {
            return LegEnd::Hit;
        }
        if seen.stopped {
            return LegEnd::Miss;
        }
    }
}

/// Handles events until `events` have been handled in all.
pub fn replay<M: Model>(simulation: &mut Simulation<M>, events: u64) {
    debug_assert!(simulation.events_handled() <= events, "a replay cannot go back");
    while simulation.events_handled() < events {
        let stepped = simulation.step();
        debug_assert!(stepped.is_some(), "a replay ran out of events: the path is not this model's");
    }
}

/// A trajectory as its origin and the forks that made it: rebuilding it from these
/// gives the same trajectory (module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Path {
    /// The replica index the trajectory started as.
    pub origin: u64,
    /// (events handled, salt): where its streams were forked, in order.
    pub forks: Vec<(u64, u64)>,
}

impl Path {
    /// Rebuilds the trajectory (its events so far are the replay's cost).
    fn build<'a>(&self, model: &dyn Splittable, scratch: &'a mut [LatencyHistogram]) -> Box<dyn Trajectory + 'a> {
        let mut trajectory = model.start(scratch, self.origin);
        for &(events, salt) in &self.forks {
            trajectory.replay(events);
            trajectory.fork(salt);
        }
        trajectory
    }

    /// The path of a clone of this path's state after `events`, forked with `salt`.
    fn clone_at(&self, events: u64, salt: u64) -> Path {
        debug_assert!(self.forks.last().is_none_or(|&(at, _)| at <= events));
        let mut forks = Vec::with_capacity(self.forks.len() + 1);
        forks.extend_from_slice(&self.forks);
        forks.push((events, salt));
        Path { origin: self.origin, forks }
    }
}

/// An entrance to the next stage: a trajectory's path and when it crossed.
#[derive(Clone, Debug)]
struct Entrance {
    path: Path,
    events: u64,
}

/// What runs share: the horizon, the levels and the effort per stage.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// Trajectories end at this instant (the event must happen by then).
    pub horizon: Nanos,
    /// L₁ < … < Lₘ (may be empty: plain Monte Carlo with N trajectories).
    pub levels: Vec<f64>,
    /// N, trajectories per stage.
    pub trajectories: u32,
    /// The master seed every origin and salt derives from.
    pub master_seed: u64,
}

/// One stage of one run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stage {
    /// The level this stage's trajectories try to reach (∞ for the last stage).
    pub level: f64,
    /// Trajectories started.
    pub trajectories: u32,
    /// Trajectories that hit the event.
    pub hits: u32,
    /// Trajectories that reached the level (the next stage's entrances).
    pub crossed: u32,
    /// wₖ: the probability of reaching this stage, as the run estimates it.
    pub weight: f64,
    /// Events handled in this stage, replays included.
    pub events: u64,
}

/// One run: its unbiased estimate and its stages (fewer than the levels + 1 when a
/// stage had no entrance).
#[derive(Clone, Debug, PartialEq)]
pub struct RunRecord {
    /// The run's index: its origins and salts derive from it.
    pub run: u64,
    /// p̂ of this run.
    pub estimate: f64,
    /// The stages run, in order.
    pub stages: Vec<Stage>,
}

impl RunRecord {
    /// Events handled over the run, replays included.
    pub fn events(&self) -> u64 {
        self.stages.iter().map(|stage| stage.events).sum()
    }
}

const RUN_ORIGINS: u64 = 0x5241_5245_5255_4e53; // "RARERUNS"
const PILOT_ORIGINS: u64 = 0x5241_5245_5049_4c54; // "RAREPILT"
const ALLOTMENT: StreamPurpose = StreamPurpose::named("splitting.allotment");

/// The replica index of trajectory `index` of stage 0 in run `run` (`family` keeps
/// the pilot's apart from the runs').
fn origin(family: u64, master_seed: u64, run: u64, index: u64) -> u64 {
    mix64(mix64(family ^ master_seed) ^ mix64(run.wrapping_add(0x9e37_79b9_7f4a_7c15))) ^ index
}

/// The salt of clone `clone` in stage `stage` of run `run`.
fn salt(family: u64, run: u64, stage: usize, clone: u64) -> u64 {
    mix64(mix64(mix64(family ^ run) ^ stage as u64) ^ clone)
}

/// N clones over `entrances`: ⌊N / E⌋ each, and the remainder to entrances drawn
/// without replacement, so each entrance gets N / E clones in expectation.
fn allot(entrances: &[Entrance], trajectories: u32, rng: &mut RngStream) -> Vec<usize> {
    let count = entrances.len();
    assert!(count > 0, "clones need an entrance");
    let each = trajectories as usize / count;
    let mut allotted: Vec<usize> = (0..count).flat_map(|entrance| std::iter::repeat_n(entrance, each)).collect();
    let mut order: Vec<usize> = (0..count).collect();
    for drawn in 0..trajectories as usize % count {
        let pick = drawn + rng.below((count - drawn) as u64) as usize;
        order.swap(drawn, pick);
        allotted.push(order[drawn]);
    }
    allotted.sort_unstable();
    debug_assert_eq!(allotted.len(), trajectories as usize);
    allotted
}

/// The next stage's starts: N clones allotted over `entrances` ([`allot`]), clone `i`
/// forked with the salt of (`family`, `run`, `stage`, `i`).
fn clones(
    entrances: &[Entrance],
    trajectories: u32,
    rng: &mut RngStream,
    family: u64,
    run: u64,
    stage: usize,
) -> Vec<Path> {
    allot(entrances, trajectories, rng)
        .into_iter()
        .enumerate()
        .map(|(clone, entrance)| {
            let entrance = &entrances[entrance];
            entrance.path.clone_at(entrance.events, salt(family, run, stage, clone as u64))
        })
        .collect()
}

/// Asked after every trajectory's leg with the events that leg spent, its replay
/// included: `false` stops the run or the pilot (a budget, a cancellation).
pub type GoOn<'a> = &'a (dyn Fn(u64) -> bool + Sync);

/// Runs one independent splitting run `run` of `plan`, or `None` when `go_on` stopped
/// it.
pub fn run_once(model: &dyn Splittable, plan: &Plan, run: u64, go_on: GoOn) -> Option<RunRecord> {
    assert!(plan.trajectories >= 1, "a stage needs a trajectory");
    assert!(plan.levels.windows(2).all(|pair| pair[0] < pair[1]), "levels must increase: {:?}", plan.levels);
    let n = plan.trajectories;
    let mut scratch = model.scratch();
    let mut allotment = RngStream::derive(plan.master_seed, run, ALLOTMENT);
    let mut starts: Vec<Path> = (0..u64::from(n))
        .map(|index| Path { origin: origin(RUN_ORIGINS, plan.master_seed, run, index), forks: Vec::new() })
        .collect();
    let mut weight = 1.0;
    let mut estimate = 0.0;
    let mut stages = Vec::with_capacity(plan.levels.len() + 1);
    for stage in 0..=plan.levels.len() {
        let level = plan.levels.get(stage).copied().unwrap_or(f64::INFINITY);
        let (mut hits, mut events) = (0u32, 0u64);
        let mut entrances = Vec::new();
        for path in &starts {
            let mut trajectory = path.build(model, &mut scratch);
            let end = trajectory.leg(plan.horizon, level, None);
            events += trajectory.events();
            if !go_on(trajectory.events()) {
                return None;
            }
            match end {
                LegEnd::Hit => hits += 1,
                LegEnd::Crossed => entrances.push(Entrance { path: path.clone(), events: trajectory.events() }),
                LegEnd::Miss => {}
            }
        }
        let crossed = entrances.len() as u32;
        estimate += weight * f64::from(hits) / f64::from(n);
        stages.push(Stage { level, trajectories: n, hits, crossed, weight, events });
        if entrances.is_empty() {
            break;
        }
        weight *= f64::from(crossed) / f64::from(n);
        starts = clones(&entrances, n, &mut allotment, RUN_ORIGINS ^ plan.master_seed, run, stage);
    }
    debug_assert!((0.0..=1.0).contains(&estimate), "an estimate is a probability: {estimate}");
    Some(RunRecord { run, estimate, stages })
}

/// What the pilot found.
#[derive(Clone, Debug, PartialEq)]
pub struct Pilot {
    /// The levels it placed.
    pub levels: Vec<f64>,
    /// Its own (adaptive, slightly biased) estimate: a guide, not a result.
    pub estimate: f64,
    /// Mean events of a whole plain trajectory (stage 0 runs them to their end): what
    /// plain Monte Carlo pays per replica.
    pub plain_events_mean: f64,
    /// Events the pilot handled, replays included.
    pub events: u64,
    /// `Some(score)` when the levels stalled and no trajectory ever hit the event: no
    /// trajectory's score rose above it.
    pub stalled_at: Option<f64>,
}

/// A pilot stage's trajectories: each one's path and, unless it hit the event, the
/// records of its best scores.
type StageRuns = [(Path, Option<Vec<Record>>)];

/// The next level: the score about `target` of the stage's trajectories reached (a hit
/// counts as reaching every level), above `floor` — the lowest score above it when
/// fewer rose higher; `None` when none did (the score stalled).
fn next_level(runs: &StageRuns, target: f64, floor: f64) -> Option<f64> {
    let n = runs.len();
    let best = |records: &Option<Vec<Record>>| {
        records.as_ref().map_or(f64::INFINITY, |records| records.last().map_or(f64::NEG_INFINITY, |r| r.score))
    };
    let mut bests: Vec<f64> = runs.iter().map(|(_, records)| best(records)).collect();
    bests.sort_by(f64::total_cmp);
    let reaching = ((target * n as f64).ceil() as usize).clamp(1, n);
    let level = bests[n - reaching];
    if level > floor {
        return Some(level);
    }
    bests.iter().find(|&&score| score > floor).copied().filter(|above| above.is_finite())
}

/// Where each trajectory that did not hit the event first reached `level`.
fn entrances(runs: &StageRuns, level: f64) -> Vec<Entrance> {
    runs.iter()
        .filter_map(|(path, records)| match records {
            Some(records) => records
                .iter()
                .find(|record| record.score >= level)
                .map(|record| Entrance { path: path.clone(), events: record.events }),
            None => None,
        })
        .collect()
}

/// Places levels by adaptive multilevel splitting (module docs): each stage's level
/// is reached by about `target` of its trajectories; stops when at least `target` of
/// a stage hit the event, at `max_levels`, or when the score stops rising; `Err`
/// with the levels placed so far when `go_on` stopped it.
pub fn pilot(
    model: &dyn Splittable,
    horizon: Nanos,
    trajectories: u32,
    master_seed: u64,
    target: f64,
    max_levels: usize,
    go_on: GoOn,
) -> Result<Pilot, Vec<f64>> {
    assert!(trajectories >= 2 && (0.0..1.0).contains(&target) && target > 0.0);
    let n = trajectories as usize;
    let mut scratch = model.scratch();
    let mut allotment = RngStream::derive(master_seed, u64::MAX, ALLOTMENT);
    let mut starts: Vec<Path> = (0..n as u64)
        .map(|index| Path { origin: origin(PILOT_ORIGINS, master_seed, 0, index), forks: Vec::new() })
        .collect();
    let (mut levels, mut weight, mut estimate, mut events) = (Vec::new(), 1.0, 0.0, 0u64);
    let mut plain_events_mean = 0.0;
    let mut floor = f64::NEG_INFINITY;
    let mut stalled_at = None;
    for stage in 0.. {
        // Each trajectory's best scores, or None when it hit the event.
        let mut runs: Vec<(Path, Option<Vec<Record>>)> = Vec::with_capacity(n);
        let mut stage_events = 0u64;
        for path in starts.drain(..) {
            let mut trajectory = path.build(model, &mut scratch);
            let replayed = trajectory.events();
            let mut records = Vec::new();
            let end = trajectory.leg(horizon, f64::INFINITY, Some(&mut records));
            stage_events += trajectory.events() - replayed;
            events += trajectory.events();
            if !go_on(trajectory.events()) {
                return Err(levels);
            }
            if stage == 0 {
                floor = floor.max(records.first().map_or(f64::NEG_INFINITY, |record| record.score));
            }
            runs.push((path, (end != LegEnd::Hit).then_some(records)));
        }
        if stage == 0 {
            plain_events_mean = stage_events as f64 / n as f64;
        }
        let hits = runs.iter().filter(|(_, records)| records.is_none()).count();
        estimate += weight * hits as f64 / n as f64;
        if hits as f64 >= target * n as f64 || levels.len() >= max_levels {
            break;
        }
        let Some(level) = next_level(&runs, target, floor) else {
            stalled_at = Some(floor);
            break;
        };
        debug_assert!(level.is_finite() && level > floor);
        let entrances = entrances(&runs, level);
        if entrances.is_empty() {
            stalled_at = Some(floor);
            break;
        }
        weight *= entrances.len() as f64 / n as f64;
        levels.push(level);
        floor = level;
        starts = clones(&entrances, trajectories, &mut allotment, PILOT_ORIGINS ^ master_seed, 0, stage);
    }
    // A pilot that hit the event found a way to it — only hits rose above the last
    // level, or the rest ran out of time there: the score is not what stalled.
    let stalled_at = stalled_at.filter(|_| estimate == 0.0);
    Ok(Pilot { levels, estimate, plain_events_mean, events, stalled_at })
}
