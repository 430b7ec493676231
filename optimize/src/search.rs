//! The search: which candidates get how many replicas, round after round, until the
//! race is settled or the budget is spent. It knows nothing of simulation: an
//! [`Evaluator`] runs the replicas (the simulation in [`super::driver`], a synthetic
//! problem in the tests).
//!
//! 1. **First stage.** Every candidate — each grid point, crossed with a Halton
//!    sample of the `--range` box when there is one — gets replicas 0..n0.
//! 2. **Successive halving** (with `--range` only; K. Jamieson and A. Talwalkar,
//!    "Non-stochastic best arm identification and hyperparameter optimization",
//!    AISTATS 2016): while more than four candidates are alive, the worse half by
//!    mean leaves and the rest get their replicas doubled.
//! 3. **Local refinement** (with `--range`): around the two leaders, a box half as
//!    wide as the last is sampled; the new candidates run their first stage on the
//!    same replica indices, and the race goes on.
//! 4. **The race** ([`super::race`]): every candidate whose standing is still in doubt
//!    is brought to a common replica count that grows by a quarter (at least n0/2) per
//!    round; KN eliminates, constraints settle. It ends when nothing is in doubt
//!    (the answer is certain at the confidence and indifference asked) or when the
//!    budget cannot pay for another round.
//!
//! Every decision reads only the replicas' values, and replica j of every candidate
//! is the same replica index: the search is deterministic for a seed.

use std::ops::Range;

use super::race::{Answer, Constraint, ConstraintEstimate, Estimate, Race, Settings, Status};
use super::space::{halton, sample_box, Dimension};
use stampede_scenario::base::error::{Error, Result};

/// A candidate: a grid point of the scenario and a value for each `--range`.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    pub grid: u32,
    /// Coordinates in the unit cube (one per dimension).
    pub unit: Vec<f64>,
    /// The dimensions' values there.
    pub values: Vec<f64>,
}

/// Runs replicas for the search.
pub trait Evaluator {
    /// Runs replicas `ranges[c]` of candidate `c` (every candidate so far is in
    /// `points`; an empty range: none of it) and returns, for each candidate, its new
    /// replicas' tracked values in replica order (`[candidate][replica][tracked]`).
    fn evaluate(&mut self, round: u32, points: &[Point], ranges: &[Range<u32>]) -> Result<Vec<Vec<Vec<f64>>>>;
}

/// The shape of the search.
#[derive(Clone, Debug)]
pub struct Shape {
    /// The scenario's grid points (1 without a grid).
    pub grid_points: u32,
    pub dimensions: Vec<Dimension>,
    /// Halton points in the first stage (with dimensions).
    pub samples: usize,
    /// Rounds of local refinement (with dimensions).
    pub refinements: u32,
    /// The most replicas the search may run in all.
    pub budget: u64,
    /// Replicas run per replica of a candidate (`--across`: one per value of its axis;
    /// else 1). The race counts candidate replicas; budgets and spending are said in
    /// replicas run.
    pub replica_cost: u64,
    /// `--max-time`: no round starts after this much wall time (the answer then says
    /// the search stopped on time; where it stops depends on the machine).
    pub max_time: Option<std::time::Duration>,
}

/// Candidates around each leader per refinement, and how many leaders.
const CENTRES: usize = 2;
fn per_centre(dimensions: usize) -> usize {
    (2 * dimensions + 2).max(4)
}

/// Alive candidates successive halving stops at.
const HALVING_STOPS_AT: usize = 4;

/// One candidate's standing after a round.
#[derive(Clone, Debug)]
pub struct Row {
    pub candidate: usize,
    pub replicas: u32,
    pub objective: Estimate,
    pub constraints: Vec<ConstraintEstimate>,
    pub status: Status,
}

/// A round: what it ran and everyone's standing after it.
#[derive(Clone, Debug)]
pub struct Round {
    pub round: u32,
    pub phase: String,
    /// Replicas spent by the end of this round, in all.
    pub spent: u64,
    pub rows: Vec<Row>,
}

/// How the search ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ending {
    /// Nothing left in doubt: the choice holds at the confidence and indifference asked.
    Certain,
    /// The budget could not pay for another round while something was still in doubt.
    BudgetSpent,
    /// `--max-time` passed while something was still in doubt.
    TimeSpent,
    /// Every candidate failed a constraint.
    Infeasible,
}

/// What the search found.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub race: Race,
    pub points: Vec<Point>,
    pub rounds: Vec<Round>,
    pub spent: u64,
    pub ending: Ending,
    pub answer: Answer,
}

struct Search<'e> {
    race: Race,
    points: Vec<Point>,
    rounds: Vec<Round>,
    /// Candidate replicas spent, and the most that may be (the budget ÷ replica cost).
    spent: u64,
    budget: u64,
    replica_cost: u64,
    /// When no further round may start (`--max-time`).
    deadline: Option<std::time::Instant>,
    evaluator: &'e mut dyn Evaluator,
}

/// Whether the race ran out of budget or time, or settled.
enum Settled {
    Yes,
    BudgetSpent,
    TimeSpent,
}

impl Search<'_> {
    /// Successive halving: the alive half goes on with twice the replicas, until few
    /// are left, the next round costs more than is left, or time is up.
    fn halve(&mut self, n0: u32) -> Result<Settled> {
        while self.race.alive().len() > HALVING_STOPS_AT {
            let keep = self.race.alive().len().div_ceil(2).max(HALVING_STOPS_AT);
            let round = self.rounds.len() as u32;
            self.race.halve(keep, round);
            let alive = self.race.alive();
            let top = alive.iter().map(|&c| self.race.replicas(c)).max().unwrap_or(n0);
            let ranges = self.ranges_to(&alive, 2 * top);
            if Search::cost(&ranges) > self.remaining() {
                break;
            }
            if self.out_of_time() {
                return Ok(Settled::TimeSpent);
            }
            self.play("successive halving", ranges)?;
        }
        Ok(Settled::Yes)
    }

    /// Local refinement: `refinements` generations of candidates in shrinking boxes
    /// around the leaders, each raced after its first stage.
    fn refine(&mut self, shape: &Shape, refinements: usize, n0: u32) -> Result<Settled> {
        let dims = shape.dimensions.len();
        for generation in 1..=refinements as u64 {
            let width = 0.5f64.powi(generation as i32);
            let mut new = Vec::new();
            for &leader in self.race.leaders().iter().take(CENTRES) {
                let centre = self.points[leader].clone();
                for unit in sample_box(&centre.unit, width, per_centre(dims), generation) {
                    new.push(point(centre.grid, unit, &shape.dimensions));
                }
            }
            let entered = self.add(new);
            if entered.is_empty() {
                continue;
            }
            let ranges = self.ranges_to(&entered, n0);
            if Search::cost(&ranges) > self.remaining() {
                return Ok(Settled::BudgetSpent);
            }
            if self.out_of_time() {
                return Ok(Settled::TimeSpent);
            }
            self.play(&format!("refinement {generation}"), ranges)?;
            match self.race()? {
                Settled::Yes => {}
                other => return Ok(other),
            }
        }
        Ok(Settled::Yes)
    }

    fn remaining(&self) -> u64 {
        self.budget - self.spent
    }

    fn out_of_time(&self) -> bool {
        self.deadline.is_some_and(|deadline| std::time::Instant::now() >= deadline)
    }

    /// Runs one round: each candidate's range, then judgement and the log.
    fn play(&mut self, phase: &str, ranges: Vec<Range<u32>>) -> Result<()> {
        let round = self.rounds.len() as u32;
        let cost: u64 = ranges.iter().map(|r| r.len() as u64).sum();
        debug_assert!(cost > 0 && cost <= self.remaining(), "a round costs something within the budget");
        for (c, range) in ranges.iter().enumerate() {
            debug_assert!(range.is_empty() || range.start == self.race.replicas(c), "replicas are run in order");
        }
        let values = self.evaluator.evaluate(round, &self.points, &ranges)?;
        for (c, replicas) in values.iter().enumerate() {
            assert_eq!(replicas.len(), ranges[c].len(), "the evaluator ran what was asked");
            for tracked in replicas {
                self.race.record(c, tracked);
            }
        }
        self.spent += cost;
        // The most one candidate of the last pair in doubt could get: half the budget.
        let per_candidate = self.budget as f64 / 2.0;
        self.race.settle_indifference(per_candidate);
        self.race.judge(round);
        let rows = (0..self.points.len())
            .map(|c| Row {
                candidate: c,
                replicas: self.race.replicas(c),
                objective: self.race.objective(c),
                constraints: (0..self.race.constraints.len()).map(|k| self.race.constraint_estimate(c, k)).collect(),
                status: self.race.entrants[c].status.clone(),
            })
            .collect();
        self.rounds.push(Round { round, phase: phase.to_string(), spent: self.spent * self.replica_cost, rows });
        Ok(())
    }

    /// Adds candidates (unless one with the same grid point and values exists);
    /// returns the new ones' numbers.
    fn add(&mut self, points: Vec<Point>) -> Vec<usize> {
        let mut added = Vec::new();
        for point in points {
            if self.points.iter().any(|p| p.grid == point.grid && p.values == point.values) {
                continue;
            }
            self.points.push(point);
            added.push(self.race.enter());
        }
        added
    }

    /// Ranges bringing each of `candidates` to `target` replicas.
    fn ranges_to(&self, candidates: &[usize], target: u32) -> Vec<Range<u32>> {
        let mut ranges = vec![0..0; self.points.len()];
        for &c in candidates {
            let have = self.race.replicas(c);
            if have < target {
                ranges[c] = have..target;
            }
        }
        ranges
    }

    fn cost(ranges: &[Range<u32>]) -> u64 {
        ranges.iter().map(|r| r.len() as u64).sum()
    }

    /// The race proper: the doubtful candidates to a common, growing count.
    fn race(&mut self) -> Result<Settled> {
        let n0 = self.race.settings.first_stage;
        loop {
            let doubtful = self.race.doubtful();
            if doubtful.is_empty() {
                return Ok(Settled::Yes);
            }
            let top = doubtful.iter().map(|&c| self.race.replicas(c)).max().expect("not empty");
            let mut target = top + (n0 / 2).max(top / 4).max(1);
            while Self::cost(&self.ranges_to(&doubtful, target)) > self.remaining() {
                target -= 1;
            }
            let ranges = self.ranges_to(&doubtful, target);
            if Self::cost(&ranges) == 0 {
                return Ok(Settled::BudgetSpent);
            }
            if self.out_of_time() {
                return Ok(Settled::TimeSpent);
            }
            self.play("race", ranges)?;
        }
    }
}

/// The candidate at `unit` of grid point `grid`.
fn point(grid: u32, unit: Vec<f64>, dimensions: &[Dimension]) -> Point {
    let values: Vec<f64> = dimensions.iter().zip(&unit).map(|(d, &u)| d.value(u)).collect();
    // Integers snap: the unit coordinate is the value's, so boxes centre on it.
    let unit = dimensions.iter().zip(&values).map(|(d, &v)| d.unit(v)).collect();
    Point { grid, unit, values }
}

/// Runs the search: `settings` without KN's k (computed here from the shape).
pub fn search(
    mut settings: Settings,
    constraints: Vec<Constraint>,
    shape: &Shape,
    evaluator: &mut dyn Evaluator,
) -> Result<Outcome> {
    let dims = shape.dimensions.len();
    let samples = if dims == 0 { 1 } else { shape.samples.max(1) };
    let initial = shape.grid_points as usize * samples;
    let refinements = if dims == 0 { 0 } else { shape.refinements as usize };
    settings.planned_candidates = initial + refinements * CENTRES * per_centre(dims);
    if initial < 2 && refinements == 0 {
        return Err(Error::bad_input(
            "optimize: nothing to choose from: the scenario has one grid point and no --range; give a grid \
             (in the file or with --grid) or a --range",
        ));
    }
    let n0 = settings.first_stage;
    let cost = shape.replica_cost.max(1);
    check_first_stage_fits(shape.budget, initial, n0, cost)?;
    let mut search = Search {
        race: Race::new(settings, constraints),
        points: Vec::new(),
        rounds: Vec::new(),
        spent: 0,
        budget: shape.budget / cost,
        replica_cost: cost,
        deadline: shape.max_time.map(|limit| std::time::Instant::now() + limit),
        evaluator,
    };
    let entered = search.add(first_stage(shape, samples));
    search.play("first stage", search.ranges_to(&entered, n0))?;
    let mut settled = Settled::Yes;
    if dims > 0 {
        settled = search.halve(n0)?;
        // Refinement follows halving whatever its ending: its own checks of the budget
        // and the time stop it.
        if let other @ (Settled::BudgetSpent | Settled::TimeSpent) = search.refine(shape, refinements, n0)? {
            settled = other;
        }
    }
    if let Settled::Yes = settled {
        settled = search.race()?;
    }
    let answer = search.race.answer();
    let ending = match (answer.chosen, settled) {
        (None, _) => Ending::Infeasible,
        (Some(_), Settled::Yes) => Ending::Certain,
        (Some(_), Settled::BudgetSpent) => Ending::BudgetSpent,
        (Some(_), Settled::TimeSpent) => Ending::TimeSpent,
    };
    debug_assert!(search.spent <= search.budget);
    let spent = search.spent * cost;
    Ok(Outcome { race: search.race, points: search.points, rounds: search.rounds, spent, ending, answer })
}

/// The first stage's candidates: `samples` Halton points in the box of every grid
/// point (the grid point alone when there is no --range).
fn first_stage(shape: &Shape, samples: usize) -> Vec<Point> {
    let dims = shape.dimensions.len();
    let mut first = Vec::new();
    for grid in 0..shape.grid_points {
        for s in 0..samples {
            let unit = if dims == 0 { Vec::new() } else { halton(1 + s as u64, dims) };
            first.push(point(grid, unit, &shape.dimensions));
        }
    }
    first
}

/// The budget covers at least the first stage: `initial` candidates × `n0` replicas ×
/// `cost` (the --across axis's values).
fn check_first_stage_fits(budget: u64, initial: usize, n0: u32, cost: u64) -> Result<()> {
    let first_cost = initial as u64 * n0 as u64 * cost;
    if budget >= first_cost {
        return Ok(());
    }
    let across = if cost > 1 { format!(" × {cost} values of the --across axis") } else { String::new() };
    Err(Error::bad_input(format!(
        "--budget-replicas {budget}: too small to start; the first stage alone needs {initial} candidate(s) × {n0} \
         replicas{across} = {first_cost}"
    ))
    .with_hint("raise --budget-replicas, lower --first-stage, or search fewer candidates"))
}

#[cfg(test)]
mod tests {
    use super::super::race::{Bound, Requirement, Sense};
    use super::*;
    use stampede_engine::kernel::rng::splitmix64;

    /// A standard normal from `key` (Box–Muller on two splitmix64 draws).
    fn normal(key: u64) -> f64 {
        let mut state = key;
        let u1 = ((splitmix64(&mut state) >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
        let u2 = (splitmix64(&mut state) >> 11) as f64 / (1u64 << 53) as f64;
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }

    fn key(seed: u64, replica: u32, candidate: u64) -> u64 {
        seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ ((replica as u64) << 20) ^ candidate
    }

    /// A synthetic problem: candidate c's tracked values at replica j from a function
    /// of (c's grid point and values, a noise common to every candidate at replica j,
    /// its own noise) — common random numbers, as the simulation's.
    struct Synthetic<F: Fn(&Point, f64, f64) -> Vec<f64>> {
        seed: u64,
        value: F,
        spent: u64,
    }

    impl<F: Fn(&Point, f64, f64) -> Vec<f64>> Evaluator for Synthetic<F> {
        fn evaluate(&mut self, _: u32, points: &[Point], ranges: &[Range<u32>]) -> Result<Vec<Vec<Vec<f64>>>> {
            Ok(points
                .iter()
                .zip(ranges)
                .enumerate()
                .map(|(c, (point, range))| {
                    self.spent += range.len() as u64;
                    range
                        .clone()
                        .map(|j| {
                            let common = normal(key(self.seed, j, u64::MAX));
                            let own = normal(key(self.seed, j, c as u64 + 1));
                            (self.value)(point, common, own)
                        })
                        .collect()
                })
                .collect())
        }
    }

    fn settings(sense: Sense, indifference: f64) -> Settings {
        Settings { sense, indifference, confidence: 0.95, first_stage: 20, planned_candidates: 0 }
    }

    fn grid(points: u32, budget: u64) -> Shape {
        Shape {
            grid_points: points,
            dimensions: Vec::new(),
            samples: 1,
            refinements: 0,
            budget,
            replica_cost: 1,
            max_time: None,
        }
    }

    /// KN's guarantee in its least favourable configuration: ten candidates, the best
    /// exactly δ better than the nine others, paired noise. Over 200 seeds of the
    /// search it must pick the best at least 95% of the time; it does far more often,
    /// and spends less than the full grid would at the replicas it needed.
    #[test]
    fn kn_picks_the_best_at_the_requested_confidence_over_200_seeds() {
        let delta = 0.2;
        let (mut correct, mut spent, mut full) = (0, 0u64, 0u64);
        for seed in 0..200 {
            let mut problem = Synthetic {
                seed,
                value: |p: &Point, common: f64, own: f64| {
                    let mean = if p.grid == 3 { 0.0 } else { delta };
                    vec![mean + common + 0.5 * own]
                },
                spent: 0,
            };
            let outcome =
                search(settings(Sense::Minimize, delta), Vec::new(), &grid(10, 100_000), &mut problem).unwrap();
            assert_eq!(outcome.spent, problem.spent, "the search counts what it ran");
            assert_eq!(outcome.ending, Ending::Certain, "seed {seed}: settled well within the budget");
            correct += usize::from(outcome.answer.chosen == Some(3));
            spent += outcome.spent;
            full += 10 * outcome.race.replicas(outcome.answer.chosen.unwrap()) as u64;
        }
        eprintln!("KN slippage: best picked in {correct} of 200 seeds; spent {spent} of the full grid's {full}");
        assert!(correct >= 190, "picked the best in {correct} of 200 seeds");
        assert!(spent < full * 3 / 4, "elimination spends less than the full grid: {spent} of {full}");
    }

    /// Erlang C with λ = 4, μ = 1: Wq(5) = 0.554 s, Wq(6) = 0.142 s, Wq(7) = 0.045 s,
    /// and c ≤ 4 is unstable. The cheapest c with Wq ≤ 0.3 s is 6. Each replica
    /// measures Wq with 30% noise (half of it common to every c); over 200 seeds the
    /// search must find c = 6 and prove it feasible.
    #[test]
    fn the_cheapest_erlang_c_staffing_that_meets_a_wait_slo_over_200_seeds() {
        fn erlang_c_wait(servers: u32, lambda: f64, mu: f64) -> f64 {
            let a = lambda / mu;
            if a >= servers as f64 {
                return f64::INFINITY;
            }
            let mut term = 1.0;
            let mut sum = 0.0;
            for k in 0..servers {
                sum += term;
                term *= a / (k + 1) as f64;
            }
            let tail = term / (1.0 - a / servers as f64);
            tail / (sum + tail) / (servers as f64 * mu - lambda)
        }
        assert!(
            (erlang_c_wait(5, 4.0, 1.0) - 0.5541).abs() < 1e-3 && (erlang_c_wait(6, 4.0, 1.0) - 0.1424).abs() < 1e-3
        );
        let slo = Constraint {
            text: "wait_mean_s <= 0.3".into(),
            metric: "wait_mean_s".into(),
            requirement: Requirement::Mean(Bound::AtMost(0.3)),
        };
        let truth = (1..=8).find(|&c| erlang_c_wait(c, 4.0, 1.0) <= 0.3).unwrap();
        assert_eq!(truth, 6);
        let mut correct = 0;
        for seed in 0..200 {
            let mut problem = Synthetic {
                seed,
                value: |p: &Point, common: f64, own: f64| {
                    let servers = p.grid + 1;
                    let wait = erlang_c_wait(servers, 4.0, 1.0).min(1e3);
                    vec![servers as f64, wait * (1.0 + 0.15 * common + 0.15 * own).max(0.0)]
                },
                spent: 0,
            };
            let outcome =
                search(settings(Sense::Minimize, 0.5), vec![slo.clone()], &grid(8, 100_000), &mut problem).unwrap();
            let chosen = outcome.answer.chosen.unwrap();
            if chosen as u32 + 1 == truth && outcome.ending == Ending::Certain {
                correct += 1;
            }
        }
        eprintln!("Erlang C staffing: c = 6 found and proven in {correct} of 200 seeds");
        assert!(correct >= 190, "found c = 6 in {correct} of 200 seeds");
    }

    /// No candidate can meet the constraint: the answer says so and names the closest.
    #[test]
    fn an_impossible_constraint_is_reported_with_the_closest_candidate() {
        let constraint = Constraint {
            text: "m <= 0.5".into(),
            metric: "m".into(),
            requirement: Requirement::Mean(Bound::AtMost(0.5)),
        };
        let mut problem = Synthetic {
            seed: 1,
            value: |p: &Point, common: f64, _: f64| vec![p.grid as f64, 3.0 - p.grid as f64 * 0.5 + 0.1 * common],
            spent: 0,
        };
        let outcome = search(settings(Sense::Minimize, 0.1), vec![constraint], &grid(4, 10_000), &mut problem).unwrap();
        assert_eq!(outcome.ending, Ending::Infeasible);
        assert_eq!((outcome.answer.chosen, outcome.answer.closest), (None, Some(3)));
    }

    /// A budget below the first stage is refused before anything runs; a budget that
    /// runs out mid-race gives the best so far, marked uncertain.
    #[test]
    fn budgets_too_small_to_start_or_to_finish() {
        let mut problem =
            Synthetic { seed: 1, value: |p: &Point, c: f64, o: f64| vec![p.grid as f64 * 0.01 + c + o], spent: 0 };
        let error = search(settings(Sense::Minimize, 0.001), Vec::new(), &grid(5, 99), &mut problem).unwrap_err();
        assert!(error.to_string().contains("5 candidate(s) × 20 replicas = 100"), "{error}");
        assert_eq!(problem.spent, 0);
        // δ = 0.4 is about what 150 replicas a candidate can resolve (√(h²S²/150) for
        // these pairs' variance of 2; raised a little where a seed's S² is larger), but
        // five candidates within δ of each other need about h²S²/δ² replicas each, more
        // than 300 in all: over 20 seeds some races end decided early (a lucky lead),
        // the others run out of budget, undecided.
        let mut ran_out = 0;
        for seed in 1..=20 {
            problem.seed = seed;
            let outcome = search(settings(Sense::Minimize, 0.4), Vec::new(), &grid(5, 300), &mut problem).unwrap();
            assert!(outcome.spent <= 300, "seed {seed}: spent {}", outcome.spent);
            if outcome.ending == Ending::BudgetSpent {
                ran_out += 1;
                assert!(outcome.spent > 250, "seed {seed}: spent {}", outcome.spent);
                assert!(!outcome.answer.doubtful.is_empty(), "seed {seed}");
            }
        }
        assert!(ran_out >= 3, "only {ran_out} of 20 races ran out of budget");
    }

    /// A δ far below the noise the budget can resolve is raised to what it can (and the
    /// outcome says from what), so a search never spends its budget on noise: with
    /// δ = 0.001 and a budget of 10⁶ it stops after a few hundred replicas.
    #[test]
    fn an_unresolvable_indifference_is_raised_to_what_the_budget_resolves() {
        let mut problem =
            Synthetic { seed: 2, value: |p: &Point, c: f64, o: f64| vec![p.grid as f64 * 0.0001 + c + o], spent: 0 };
        let outcome = search(settings(Sense::Minimize, 0.001), Vec::new(), &grid(3, 1_000_000), &mut problem).unwrap();
        assert_eq!(outcome.race.indifference_raised_from, Some(0.001));
        let delta = outcome.race.settings.indifference;
        // h² for k = 3, n0 = 20, α = 0.05 is about 7.0; S² about 2; half the budget each.
        let expected = (7.0 * 2.0 / 500_000.0f64).sqrt();
        assert!(delta > 0.5 * expected && delta < 2.0 * expected, "δ {delta} vs about {expected}");
        assert_eq!(outcome.ending, Ending::Certain);
        assert!(outcome.spent < 1_000_000, "spent {}", outcome.spent);
    }

    /// A continuous range: minimise (x − 0.3)² + noise over x ∈ [0, 1]. The search
    /// samples, halves, refines around the leaders and ends within δ of 0.3's value.
    #[test]
    fn a_range_is_sampled_halved_and_refined_towards_the_optimum() {
        let dimension = Dimension::parse("x.y=0..1").unwrap();
        for seed in 0..20 {
            let mut problem = Synthetic {
                seed,
                value: |p: &Point, common: f64, own: f64| {
                    vec![(p.values[0] - 0.3).powi(2) + 0.05 * common + 0.02 * own]
                },
                spent: 0,
            };
            let shape = Shape {
                grid_points: 1,
                dimensions: vec![dimension.clone()],
                samples: 16,
                refinements: 3,
                budget: 20_000,
                replica_cost: 1,
                max_time: None,
            };
            let outcome = search(settings(Sense::Minimize, 0.005), Vec::new(), &shape, &mut problem).unwrap();
            let phases: Vec<&str> = outcome.rounds.iter().map(|r| r.phase.as_str()).collect();
            assert!(phases.contains(&"successive halving") && phases.contains(&"refinement 1"), "{phases:?}");
            let x = outcome.points[outcome.answer.chosen.unwrap()].values[0];
            assert!((x - 0.3).powi(2) <= 0.005 + 1e-9, "seed {seed}: chose x = {x}");
            assert!(outcome.points.len() > 16, "refinement added candidates");
        }
    }

    /// The same seed gives the same search, round for round.
    #[test]
    fn the_search_is_deterministic() {
        let run = || {
            let mut problem =
                Synthetic { seed: 7, value: |p: &Point, c: f64, o: f64| vec![p.grid as f64 * 0.1 + c + o], spent: 0 };
            let outcome = search(settings(Sense::Maximize, 0.05), Vec::new(), &grid(6, 50_000), &mut problem).unwrap();
            (outcome.answer, outcome.spent, outcome.rounds.iter().map(|r| r.spent).collect::<Vec<_>>())
        };
        assert_eq!(run(), run());
    }
}
