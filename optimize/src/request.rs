//! What the user asked `optimize`, checked before anything runs: the objective, the
//! constraints, the ranges, the budget and the statistical settings — and what
//! identifies the search, so that `--resume` continues only the same one.

use super::across::Across;
use super::goal::Objective;
use super::race::Constraint;
use super::search::Shape;
use super::space::{Dimension, MAX_DIMENSIONS};
use stampede_run::partial::fingerprint;
use stampede_scenario::base::error::{Error, Result};
use stampede_scenario::resolved::Scenario;

/// What the user asked `optimize`.
#[derive(Clone, Debug)]
pub struct Request {
    pub objective: Objective,
    pub constraints: Vec<Constraint>,
    pub dimensions: Vec<Dimension>,
    /// The most replicas in all (default: every first-stage candidate × `run.replicas`,
    /// what `run` would spend on the same grid).
    pub budget: Option<u64>,
    /// δ (default: 1% of the first stage's mean objective, in magnitude).
    pub indifference: Option<f64>,
    pub confidence: f64,
    pub first_stage: u32,
    /// Halton points in the first stage with `--range` (default 8 × (dimensions + 1)).
    pub samples: Option<usize>,
    pub refinements: u32,
    /// `--max-time`: no round starts after this much wall time.
    pub max_time: Option<std::time::Duration>,
    /// `--across AXIS`: a grid axis to be robust against, not to choose.
    pub across: Option<Across>,
}

/// The most replicas `--budget-replicas` may ask for: more than any machine runs in a
/// search, and small enough that every count stays exact in a double (10¹²).
pub const MAX_BUDGET_REPLICAS: u64 = 1_000_000_000_000;

impl Request {
    /// Checks what can be checked before anything runs.
    pub fn check(&self, scenario: &Scenario) -> Result<()> {
        if !(self.confidence > 0.5 && self.confidence < 1.0) {
            return Err(Error::bad_input(format!("--confidence {}: must be above 0.5 and below 1", self.confidence)));
        }
        if let Some(delta) = self.indifference {
            if !(delta.is_finite() && delta > 0.0) {
                return Err(Error::bad_input(format!(
                    "--indifference {delta}: must be a positive number (in the objective's unit)"
                )));
            }
        }
        if self.first_stage < 2 {
            return Err(Error::bad_input(format!(
                "--first-stage {}: must be at least 2 (each pair's variance comes from it)",
                self.first_stage
            )));
        }
        if self.dimensions.len() > MAX_DIMENSIONS {
            return Err(Error::bad_input(format!("--range: at most {MAX_DIMENSIONS} ranges")));
        }
        for (i, d) in self.dimensions.iter().enumerate() {
            if scenario.grid.iter().any(|axis| axis.path == d.path) {
                return Err(Error::bad_input(format!(
                    "--range {}: is also a grid axis; search it as a range or as the grid's values, not both",
                    d.path
                )));
            }
            if self.dimensions[..i].iter().any(|e| e.path == d.path) {
                return Err(Error::bad_input(format!("--range {}: given twice", d.path)));
            }
        }
        // Refused before anything is timed or warned about (issue 71: a one-point
        // scenario timed a replica and warned about its budget first).
        if self.dimensions.is_empty() && self.shape(scenario).grid_points < 2 {
            let why = match &self.across {
                Some(across) => format!("every grid point differs only in --across {}", across.path),
                None => "the scenario has one grid point and no --range".to_string(),
            };
            return Err(Error::bad_input(format!(
                "optimize: nothing to choose from: {why}; give a grid (in the file or with --grid) or a --range"
            )));
        }
        if self.budget == Some(0) {
            return Err(Error::bad_input("--budget-replicas 0: must be at least 1"));
        }
        if let Some(budget) = self.budget.filter(|b| *b > MAX_BUDGET_REPLICAS) {
            return Err(Error::bad_input(format!(
                "--budget-replicas {budget}: at most {MAX_BUDGET_REPLICAS}; bound a long search with --max-time instead"
            )));
        }
        if let Some(limit) = self.max_time.filter(|t| t.is_zero()) {
            return Err(Error::bad_input(format!("--max-time {}: must be more than 0 seconds", limit.as_secs_f64())));
        }
        Ok(())
    }

    /// Simulated replicas per candidate replica: the across axis's values (1 without).
    pub(crate) fn replicas_per_candidate_replica(&self) -> u64 {
        self.across.as_ref().map_or(1, |a| a.values() as u64)
    }

    /// The search's shape for `scenario` (with `--across`, a candidate replica runs once
    /// per value of the axis; the budget counts replicas run).
    pub(crate) fn shape(&self, scenario: &Scenario) -> Shape {
        let dims = self.dimensions.len();
        let samples = if dims == 0 { 1 } else { self.samples.unwrap_or(8 * (dims + 1)) };
        let grid_points = match &self.across {
            Some(across) => across.candidate_grid_points(scenario.point_count()),
            None => scenario.point_count(),
        };
        let initial = grid_points as u64 * samples as u64;
        let per = self.replicas_per_candidate_replica();
        Shape {
            grid_points,
            dimensions: self.dimensions.clone(),
            samples,
            refinements: self.refinements,
            budget: self.budget.unwrap_or(initial * scenario.run.replicas as u64 * per),
            replica_cost: per,
            max_time: self.max_time,
        }
    }

    /// The replica budget for `scenario` (replicas simulated): `--budget-replicas`, or
    /// its default.
    pub fn budget_for(&self, scenario: &Scenario) -> u64 {
        self.shape(scenario).budget
    }

    /// A sentence when the budget pays for the first stage and little more (under twice
    /// its cost), so the race will likely end undecided: said before it starts.
    pub fn budget_warning(&self, scenario: &Scenario) -> Option<String> {
        let shape = self.shape(scenario);
        let per = self.replicas_per_candidate_replica();
        let first = shape.grid_points as u64 * shape.samples as u64 * u64::from(self.first_stage) * per;
        (shape.budget < 2 * first).then(|| {
            format!(
                "the budget of {} replicas pays for the first stage ({first}: every first candidate × \
                 --first-stage {}{}) and little more, so the race will likely end undecided; give \
                 --budget-replicas {} or more",
                shape.budget,
                self.first_stage,
                if per > 1 { format!(" × {per} values of the --across axis") } else { String::new() },
                4 * first
            )
        })
    }

    /// What identifies this search (its rounds resume only into the same search).
    pub(crate) fn identity(&self, scenario: &Scenario) -> String {
        format!(
            "{}|{:?}|{:?}|{:?}|{:?}|{:?}|{}|{}|{:?}|{}|{:?}",
            fingerprint(scenario),
            self.objective,
            self.constraints,
            self.dimensions,
            self.budget,
            self.indifference,
            self.confidence,
            self.first_stage,
            self.samples,
            self.refinements,
            self.across
        )
    }
}
