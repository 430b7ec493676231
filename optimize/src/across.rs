//! `optimize --across AXIS`: a grid axis that is a scenario to be robust against (the
//! faults a policy must survive), not a choice. The candidates are the other axes'
//! combinations (and the ranges); each is run at every value of the across axis on
//! the same replicas (common random numbers: a replica's seed does not depend on its
//! grid point), and what the race sees per replica is the worst value over them
//! (`--robust worst`, the default: the policy best in its worst scenario) or their mean
//! (`--robust mean`).
//!
//! Grid indices: the base grid's point for candidate grid `g` (the grid without the
//! across axis, mixed radix with the last axis fastest, as the base's) and value `k`
//! is `g`'s digits with `k` inserted at the axis; a candidate's `K` points are
//! consecutive in the written folder (candidate `c` is grid points `c·K .. c·K + K`).
//!
//! Invariants (asserted): the base grid is every combination of its axes (not `[grid]
//! points`), and the axis has at least two values.

use super::race::{Bound, Requirement, Sense};
use stampede_scenario::base::error::{Error, Result};
use stampede_scenario::resolved::Scenario;

/// How a candidate's values across the axis become the one the race compares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Robust {
    /// The worst value over the axis, per replica.
    Worst,
    /// The mean over the axis, per replica.
    Mean,
}

impl Robust {
    /// `worst` or `mean`.
    pub fn parse(text: &str) -> Result<Robust> {
        match text {
            "worst" => Ok(Robust::Worst),
            "mean" => Ok(Robust::Mean),
            other => Err(Error::bad_input(format!("--robust {other}: allowed: worst, mean"))),
        }
    }
}

/// The across axis of a base scenario.
#[derive(Clone, Debug, PartialEq)]
pub struct Across {
    /// Its path, as the grid names it (`faults`).
    pub path: String,
    /// Its position among the base grid's axes.
    axis: usize,
    /// Values per axis of the base grid.
    radices: Vec<u32>,
    pub robust: Robust,
}

impl Across {
    /// The across axis `path` of `scenario`'s grid, checked; `named` says where it
    /// was given (`--across`, or `optimize.across =` from the scenario file), for
    /// the errors.
    pub fn new(scenario: &Scenario, path: &str, robust: Robust, named: &str) -> Result<Across> {
        let axes: Vec<&str> = scenario.grid.iter().map(|a| a.path.as_str()).collect();
        let Some(axis) = axes.iter().position(|a| *a == path) else {
            return Err(Error::bad_input(format!(
                "{named} {path}: not a grid axis of scenario {}; its axes: {}",
                scenario.name,
                if axes.is_empty() { "none".to_string() } else { axes.join(", ") }
            ))
            .with_hint("add the scenarios to be robust against as a grid axis: --grid 'faults=[[...], [...]]'"));
        };
        if scenario.grid_combinations().is_some() {
            return Err(Error::bad_input(format!(
                "{named} {path}: the grid lists its points ([grid] points); --across needs every combination"
            )));
        }
        let radices: Vec<u32> = scenario.grid.iter().map(|a| a.values.len() as u32).collect();
        if radices[axis] < 2 {
            return Err(Error::bad_input(format!(
                "{named} {path}: the axis has one value; there is nothing to be robust across"
            )));
        }
        Ok(Across { path: path.to_string(), axis, radices, robust })
    }

    /// Values of the axis: grid points per candidate.
    pub fn values(&self) -> u32 {
        self.radices[self.axis]
    }

    /// Base grid points per candidate grid point, `K`.
    pub fn candidate_grid_points(&self, base_points: u32) -> u32 {
        debug_assert_eq!(base_points % self.values(), 0);
        base_points / self.values()
    }

    /// The base grid's point for candidate grid point `g` at the axis's value `k`.
    pub fn base_point(&self, g: u32, k: u32) -> u32 {
        assert!(k < self.values());
        let mut digits = vec![0u32; self.radices.len()];
        let mut rest = g;
        for (a, &radix) in self.radices.iter().enumerate().rev() {
            if a == self.axis {
                continue;
            }
            digits[a] = rest % radix;
            rest /= radix;
        }
        debug_assert_eq!(rest, 0, "a candidate grid point of the grid without the axis");
        digits[self.axis] = k;
        digits.iter().zip(&self.radices).fold(0, |index, (&digit, &radix)| index * radix + digit)
    }

    /// One replica's values of a tracked metric at every value of the axis, as the race
    /// sees it: for `worse_is_higher` metrics the worst is the largest. NaN (undefined)
    /// at any value is NaN for the worst; the mean leaves it out (NaN only if all are).
    pub fn combine(&self, values: &[f64], worse_is_higher: bool) -> f64 {
        match self.robust {
            Robust::Worst => {
                if values.iter().any(|v| v.is_nan()) {
                    return f64::NAN;
                }
                let pick = if worse_is_higher { f64::max } else { f64::min };
                values.iter().copied().reduce(pick).unwrap_or(f64::NAN)
            }
            Robust::Mean => {
                let defined: Vec<f64> = values.iter().copied().filter(|v| !v.is_nan()).collect();
                if defined.is_empty() {
                    f64::NAN
                } else {
                    defined.iter().sum::<f64>() / defined.len() as f64
                }
            }
        }
    }
}

/// Whether a larger value is worse: for the objective by its sense, for a constraint
/// by its bound (`<= x`: larger is worse).
pub fn worse_is_higher_objective(sense: Sense) -> bool {
    matches!(sense, Sense::Minimize)
}

/// See [`worse_is_higher_objective`].
pub fn worse_is_higher_requirement(requirement: &Requirement) -> bool {
    let bound = match requirement {
        Requirement::Mean(bound) => bound,
        Requirement::Fraction { each, .. } => each,
    };
    matches!(bound, Bound::AtMost(_))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn across(radices: Vec<u32>, axis: usize, robust: Robust) -> Across {
        Across { path: "faults".into(), axis, radices, robust }
    }

    /// Every base point is reached exactly once, with the axis's digit at k.
    #[test]
    fn base_points_insert_the_axis_digit() {
        let a = across(vec![3, 2, 4], 1, Robust::Worst);
        assert_eq!(a.candidate_grid_points(24), 12);
        let mut seen = [false; 24];
        for g in 0..12 {
            for k in 0..2 {
                let p = a.base_point(g, k);
                assert!(!seen[p as usize]);
                seen[p as usize] = true;
                assert_eq!((p / 4) % 2, k, "the middle digit is the axis");
            }
        }
        assert!(seen.iter().all(|&s| s));
        // Candidate 5 = digits (1, 1) of (3, 4): base (1, k, 1).
        assert_eq!(a.base_point(5, 1), 4 * 2 + 4 + 1);
    }

    #[test]
    fn the_worst_is_by_direction_and_the_mean_skips_undefined_values() {
        let worst = across(vec![2], 0, Robust::Worst);
        assert_eq!(worst.combine(&[0.2, 0.9], true), 0.9);
        assert_eq!(worst.combine(&[0.2, 0.9], false), 0.2);
        assert!(worst.combine(&[0.2, f64::NAN], true).is_nan());
        let mean = across(vec![2], 0, Robust::Mean);
        assert_eq!(mean.combine(&[0.2, 0.6], true), 0.4);
        assert_eq!(mean.combine(&[0.2, f64::NAN], true), 0.2);
    }
}
