//! `stampede rare`'s estimate: independent splitting runs ([`splitting::run_once`])
//! of one model, their mean with a Student-t interval, and the cost next to what
//! plain Monte Carlo would pay for the same relative error.
//!
//! Runs are added in batches until the relative error — the standard error of the
//! mean over the estimate — is at most the target or the budget of runs is spent.
//! Every batch's size follows from the runs before it, and each run is a pure function
//! of its index, so the answer is the same for any thread count.
//!
//! What the estimate counts: each run's estimate is unbiased for P(the event holds
//! after some event at or before the horizon, before the stop condition); runs are
//! independent, so their mean is too, and its interval is the usual one over runs.

use rayon::prelude::*;
use stampede_engine::kernel::splitting::{self, Pilot, Plan, RunRecord, Splittable};
use stampede_engine::kernel::time::Nanos;

use stampede_scenario::{Error, Result};

use crate::plan::Shard;
use crate::stats::t_quantile_975;

/// How the levels are placed.
#[derive(Clone, Debug, PartialEq)]
pub enum Levels {
    /// By a pilot (adaptive multilevel splitting), each reached by about `target` of
    /// the trajectories before it.
    Auto { target: f64, max_levels: usize },
    /// As given, increasing.
    Fixed(Vec<f64>),
}

/// What to estimate and how hard to try.
#[derive(Clone, Debug, PartialEq)]
pub struct RareRequest {
    pub horizon: Nanos,
    /// N, trajectories per stage.
    pub trajectories: u32,
    pub levels: Levels,
    /// Stop once the relative error (standard error / estimate) is at most this.
    pub relative_error: f64,
    /// Runs before the first look at the relative error (at least 2).
    pub min_runs: u32,
    /// The budget: never more runs than this.
    pub max_runs: u32,
    /// The budget in events, replays included. Batches after the first are sized to
    /// what the budget left pays for at the runs' mean cost; a batch that overruns it
    /// anyway is dropped whole and the estimate rests on the runs before it, so the
    /// answer stays a function of the seed. The pilot, the plain sample and the first
    /// batch overrunning it is an error (the event is too rare for this budget, or
    /// the score does not lead to it).
    pub max_events: u64,
    pub master_seed: u64,
    /// Run only this shard's share of exactly `max_runs` runs (those whose index is
    /// the shard's modulo the count); [`combine`] joins the shards' estimates into
    /// the one a single process would have made.
    pub shard: Option<Shard>,
}

/// The estimate and what it cost.
#[derive(Clone, Debug, PartialEq)]
pub struct RareEstimate {
    /// The mean of the runs' estimates.
    pub probability: f64,
    /// The 95% Student-t interval over runs (the low end clamped at 0).
    pub low: f64,
    pub high: f64,
    /// Standard error / probability (∞ when the probability is 0).
    pub relative_error: f64,
    pub levels: Vec<f64>,
    pub runs: Vec<RunRecord>,
    /// The pilot that placed the levels (`Levels::Auto`).
    pub pilot: Option<Pilot>,
    /// Mean events of a plain replica (a trajectory with no level, run to its end).
    pub plain_events_mean: f64,
    /// Events spent: the runs, the pilot and the plain sample, replays included.
    pub events: u64,
    /// The runs stopped short of the target relative error because `max_events` was
    /// spent (not `max_runs`).
    pub budget_spent: bool,
}

impl RareEstimate {
    /// Events the runs handled (replays included), without the pilot and plain sample.
    pub fn run_events(&self) -> u64 {
        self.runs.iter().map(RunRecord::events).sum()
    }

    /// Trajectories that hit the event, over all runs and stages.
    pub fn hits(&self) -> u64 {
        self.runs.iter().flat_map(|run| &run.stages).map(|stage| u64::from(stage.hits)).sum()
    }

    /// Events plain Monte Carlo would need for this relative error at this
    /// probability: (1 − p) / (p · RE²) replicas of `plain_events_mean` events.
    pub fn plain_events_needed(&self) -> f64 {
        let p = self.probability;
        if p <= 0.0 || !self.relative_error.is_finite() || self.relative_error <= 0.0 {
            return f64::INFINITY;
        }
        (1.0 - p) / (p * self.relative_error * self.relative_error) * self.plain_events_mean
    }

    /// How many times fewer events splitting spent than plain Monte Carlo would.
    pub fn speedup(&self) -> f64 {
        self.plain_events_needed() / self.events.max(1) as f64
    }

    /// The ladder: each level with the probability of reaching it before the end,
    /// the mean over runs of the weight of the stage it opens (0 for a run that
    /// stopped short of it) — unbiased like the estimate.
    pub fn ladder(&self) -> Vec<(f64, f64)> {
        let runs = self.runs.len().max(1) as f64;
        self.levels
            .iter()
            .enumerate()
            .map(|(index, &level)| {
                let reach: f64 = self.runs.iter().filter_map(|run| run.stages.get(index + 1)).map(|s| s.weight).sum();
                (level, reach / runs)
            })
            .collect()
    }

    /// The largest share of the estimate one run carries (1 when a single run found
    /// every hit: the interval then rests on one run).
    pub fn largest_run_share(&self) -> f64 {
        let total: f64 = self.runs.iter().map(|run| run.estimate).sum();
        if total <= 0.0 {
            return 0.0;
        }
        self.runs.iter().map(|run| run.estimate).fold(0.0, f64::max) / total
    }
}

/// The probability of at least one event in `windows` windows that each hold it
/// independently with probability `p`: 1 − (1 − p)^windows, computed as
/// −expm1(windows · ln1p(−p)), which keeps p = 1e-12 over 1,440 windows exact where
/// the plain formula rounds. Increasing in `p`, so an interval maps end to end.
pub fn at_least_once(p: f64, windows: f64) -> f64 {
    debug_assert!((0.0..=1.0).contains(&p) && windows >= 1.0, "p {p}, windows {windows}");
    -(windows * (-p).ln_1p()).exp_m1()
}

/// Mean, interval and relative error of the runs' estimates.
fn summarise(runs: &[RunRecord]) -> (f64, f64, f64, f64) {
    let n = runs.len() as f64;
    let mean = runs.iter().map(|run| run.estimate).sum::<f64>() / n;
    if runs.len() < 2 {
        return (mean, 0.0, 1.0, f64::INFINITY);
    }
    let variance = runs.iter().map(|run| (run.estimate - mean).powi(2)).sum::<f64>() / (n - 1.0);
    let standard_error = (variance / n).sqrt();
    let half = t_quantile_975(runs.len() as u64 - 1) * standard_error;
    // Johnson's (1978) correction of the t interval for a skewed population: runs'
    // estimates are right-skewed (most runs see few hits, a few see many), and the
    // plain interval then falls short above.
    let third = runs.iter().map(|run| (run.estimate - mean).powi(3)).sum::<f64>() / n;
    let shift = if variance > 0.0 { third / (6.0 * variance * n) } else { 0.0 };
    let relative = if mean > 0.0 { standard_error / mean } else { f64::INFINITY };
    (mean, (mean + shift - half).max(0.0), (mean + shift + half).min(1.0), relative)
}

/// The estimate of shards' runs together: every run of every part in the order of
/// its index, the pilot and the plain sample counted once (each shard ran the same).
/// Equal to what one process would have found with all the runs (`max_runs` fixed).
pub fn combine(parts: Vec<RareEstimate>) -> Result<RareEstimate> {
    let first = parts.first().cloned().ok_or_else(|| Error::bad_input("no shards to combine"))?;
    if let Some(other) = parts.iter().find(|part| part.levels != first.levels) {
        return Err(Error::bad_input(format!(
            "the shards split at different levels ({:?} and {:?}): they are not of one estimate",
            first.levels, other.levels
        )));
    }
    let before_runs = first.events - first.run_events();
    let mut runs: Vec<RunRecord> = parts.into_iter().flat_map(|part| part.runs).collect();
    runs.sort_by_key(|run| run.run);
    if let Some(pair) = runs.windows(2).find(|pair| pair[0].run == pair[1].run) {
        return Err(Error::bad_input(format!("run {} is in two shards: a shard was given twice", pair[0].run)));
    }
    if runs.len() < 2 {
        return Err(Error::bad_input(format!("{} splitting runs: an interval needs at least 2", runs.len())));
    }
    let (probability, low, high, relative_error) = summarise(&runs);
    let events = before_runs + runs.iter().map(RunRecord::events).sum::<u64>();
    Ok(RareEstimate { probability, low, high, relative_error, runs, events, budget_spent: false, ..first })
}

/// How many runs the next batch adds: enough for the target if the relative error
/// shrinks as 1/√runs (with a tenth more), at most three times the runs so far.
fn next_batch(runs: u32, relative_error: f64, target: f64, max_runs: u32) -> u32 {
    let room = max_runs.saturating_sub(runs);
    let wanted = if relative_error.is_finite() {
        (f64::from(runs) * (relative_error / target).powi(2) * 1.1).ceil() as u64
    } else {
        u64::from(runs) * 4
    };
    let more = wanted.saturating_sub(u64::from(runs)).clamp(1, u64::from(runs) * 3);
    (more.min(u64::from(room))) as u32
}

/// The work an estimate may still do: every leg adds its events to one total, so
/// whether it ever passes `--max-events` depends only on the sum of the work, not on
/// the order threads do it in.
struct Budget<'a> {
    max_events: u64,
    total: std::sync::atomic::AtomicU64,
    cancelled: &'a (dyn Fn() -> bool + Sync),
}

impl Budget<'_> {
    /// Adds a leg of `events`; whether the estimate may go on.
    fn go_on(&self, events: u64) -> bool {
        use std::sync::atomic::Ordering::Relaxed;
        self.total.fetch_add(events, Relaxed).saturating_add(events) <= self.max_events && !(self.cancelled)()
    }

    /// Events left once every leg so far has finished (then the total is their sum:
    /// deterministic).
    fn left(&self) -> u64 {
        self.max_events.saturating_sub(self.total.load(std::sync::atomic::Ordering::Relaxed))
    }

    /// The error for `what` stopping the estimate: cancelled, or over the budget.
    fn stopped(&self, what: String) -> Error {
        if (self.cancelled)() {
            Error::io("the estimate was cancelled")
        } else {
            let budget = self.max_events;
            Error::overloaded(format!("{what} spent the budget of --max-events {budget}")).with_hint(
                "raise --max-events, make the event less rare (a shorter --within, a lower threshold) to see how the \
                 estimate scales, or check that --score leads to the event",
            )
        }
    }
}

/// Estimates the probability: a pilot (with `Levels::Auto`), a plain sample for the
/// comparison, then batches of independent runs on `threads` workers, calling
/// `progress` after each run.
pub fn estimate(
    model: &dyn Splittable,
    request: &RareRequest,
    threads: usize,
    progress: &(dyn Fn() + Sync),
) -> Result<RareEstimate> {
    assert!(request.min_runs >= 2 && request.min_runs <= request.max_runs, "runs: {request:?}");
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|error| Error::io(format!("cannot start {threads} worker threads: {error}")))?;
    let cancelled = crate::runner::scope_cancelled();
    let budget =
        Budget { max_events: request.max_events, total: std::sync::atomic::AtomicU64::new(0), cancelled: &cancelled };
    let go_on = |leg: u64| budget.go_on(leg);
    let (levels, pilot) = match &request.levels {
        Levels::Fixed(levels) => (levels.clone(), None),
        Levels::Auto { target, max_levels } => {
            let pilot = splitting::pilot(
                model,
                request.horizon,
                request.trajectories.max(2),
                request.master_seed,
                *target,
                *max_levels,
                &go_on,
            )
            .map_err(|placed| {
                budget.stopped(format!("the pilot placing the levels ({} placed: {placed:?})", placed.len()))
            })?;
            (pilot.levels.clone(), Some(pilot))
        }
    };
    let plain_plan = Plan {
        horizon: request.horizon,
        levels: Vec::new(),
        trajectories: request.trajectories,
        master_seed: request.master_seed,
    };
    let plain = splitting::run_once(model, &plain_plan, u64::MAX, &go_on)
        .ok_or_else(|| budget.stopped(format!("{} plain replicas", request.trajectories)))?;
    let plain_events_mean = plain.events() as f64 / f64::from(request.trajectories);
    let plan = Plan { levels: levels.clone(), ..plain_plan };
    let (runs, budget_spent) = run_batches(model, request, &plan, &pool, &budget, progress)?;
    let (probability, low, high, relative_error) = summarise(&runs);
    let spent =
        runs.iter().map(RunRecord::events).sum::<u64>() + plain.events() + pilot.as_ref().map_or(0, |p| p.events);
    Ok(RareEstimate {
        probability,
        low,
        high,
        relative_error,
        levels,
        runs,
        pilot,
        plain_events_mean,
        events: spent,
        budget_spent,
    })
}

/// The splitting runs, batch after batch (a shard's in one), until the relative error
/// is reached, `--max-runs` are done or the budget pays for no more; with whether the
/// budget stopped them.
fn run_batches(
    model: &dyn Splittable,
    request: &RareRequest,
    plan: &Plan,
    pool: &rayon::ThreadPool,
    budget: &Budget,
    progress: &(dyn Fn() + Sync),
) -> Result<(Vec<RunRecord>, bool)> {
    let go_on = |leg: u64| budget.go_on(leg);
    let mut runs: Vec<RunRecord> = Vec::new();
    let mut batch = request.min_runs;
    loop {
        let start = runs.len() as u64;
        let indices: Vec<u64> = match request.shard {
            // A shard's runs, in one batch: how many there are is fixed in advance.
            Some(shard) => (0..u64::from(request.max_runs))
                .filter(|run| run % u64::from(shard.count) == u64::from(shard.index))
                .collect(),
            None => (start..start + u64::from(batch)).collect(),
        };
        let more: Vec<Option<RunRecord>> = pool.install(|| {
            indices
                .into_par_iter()
                .map(|run| {
                    let record = splitting::run_once(model, plan, run, &go_on);
                    progress();
                    record
                })
                .collect()
        });
        let Some(more) = more.into_iter().collect::<Option<Vec<RunRecord>>>() else {
            if (budget.cancelled)() || runs.is_empty() || request.shard.is_some() {
                return Err(budget.stopped(format!("the first {batch} splitting runs (--min-runs)")));
            }
            return Ok((runs, true));
        };
        runs.extend(more);
        if request.shard.is_some() {
            return Ok((runs, false));
        }
        let (_, _, _, relative) = summarise(&runs);
        batch = next_batch(runs.len() as u32, relative, request.relative_error, request.max_runs);
        // What the budget left pays for at the mean cost of a run so far.
        let run_cost = (runs.iter().map(RunRecord::events).sum::<u64>() as f64 / runs.len() as f64).max(1.0);
        let affordable = (budget.left() as f64 / run_cost).floor() as u32;
        if relative <= request.relative_error || batch == 0 {
            return Ok((runs, false));
        }
        if affordable == 0 {
            return Ok((runs, true));
        }
        batch = batch.min(affordable);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_least_once_in_a_day_of_minutes_does_not_round() {
        assert!((at_least_once(1e-12, 1440.0) / 1.44e-9 - 1.0).abs() < 1e-6, "{}", at_least_once(1e-12, 1440.0));
        assert!((at_least_once(0.01, 1440.0) - (1.0 - 0.99f64.powf(1440.0))).abs() < 1e-12);
        assert_eq!(at_least_once(0.0, 1440.0), 0.0);
        assert_eq!(at_least_once(0.3, 1.0), 0.3);
    }

    #[test]
    fn batches_aim_at_the_target_and_stay_in_the_budget() {
        assert_eq!(next_batch(10, 0.2, 0.1, 1000), 30, "4.4× the runs wanted, at most 3× more");
        assert_eq!(next_batch(10, 0.11, 0.1, 1000), 4);
        assert_eq!(next_batch(10, f64::INFINITY, 0.1, 25), 15);
        assert_eq!(next_batch(25, 0.5, 0.1, 25), 0);
    }
}
