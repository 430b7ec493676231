//! The search for the unknowns' values that make a model match production, and their
//! intervals. It knows nothing of simulation: an evaluator turns candidates (values
//! of the `--fit` dimensions) into discrepancies, on common random numbers.
//!
//! 1. **Design**: a Halton sample of the `--fit` box (as `optimize`'s first stage).
//! 2. **Refinement**: rounds of a Halton sample of a box around the best so far, half
//!    as wide each round (as `optimize`'s local refinement).
//! 3. **Curvature**: around the best, a central composite design (each dimension ± h,
//!    each pair at (± h, ± h)); a full quadratic is fitted to the discrepancies by
//!    least squares. If it curves upward everywhere, its minimum is tried too.
//! 4. **Intervals** ([`super::intervals`]): per unknown, from the curvature of a
//!    quadratic fitted around the best where one describes the discrepancy
//!    (Gauss–Newton: covariance 2·D_min/(N − p)·H⁻¹), else from its profile (the
//!    values whose least discrepancy, the others re-optimised, is within the
//!    likelihood-ratio cut of the best) — always the profile for an integer. The
//!    caller widens them for the residuals' autocorrelation (`intervals::Found::widen`).
//!
//! Invariant: every decision reads only the evaluator's numbers and the fixed Halton
//! stretches, so a fit is the same for a seed on any machine and thread count.

use super::super::space::{halton, Dimension, Scale};
use stampede_scenario::base::error::Result;

/// The most candidates a first design may have (`--samples`).
pub const MAX_SAMPLES: usize = 10_000;

/// At most this many times `refinements` rounds, while rounds still gain more than
/// [`CONVERGED`] of the intervals' cut.
pub const MORE_ROUNDS: u32 = 3;
pub const CONVERGED: f64 = 0.1;

/// How the search is sized.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    /// Halton points of the first design.
    pub samples: usize,
    /// Rounds of refinement.
    pub refinements: u32,
}

impl Shape {
    /// The default for `dimensions` unknowns: 6 per dimension plus 4, six steps.
    pub fn default_for(dimensions: usize) -> Shape {
        Shape { samples: 6 * dimensions + 4, refinements: 6 }
    }
}

/// One evaluated candidate.
#[derive(Clone, Debug, PartialEq)]
pub struct Candidate {
    pub unit: Vec<f64>,
    pub values: Vec<f64>,
    pub discrepancy: f64,
    /// The discrepancy with each replica left out in turn (empty: no simulation noise).
    pub leave_one_out: Vec<f64>,
    /// Which stage proposed it: `design`, `refine N`, `curvature`, `quadratic minimum`.
    pub stage: String,
}

/// What the search found: every candidate, and the design's steps at its end (the
/// intervals' designs start from them).
#[derive(Clone, Debug)]
pub struct Searched {
    pub candidates: Vec<Candidate>,
    pub steps: Vec<f64>,
}

/// Turns candidates' values into their discrepancies (one each, in order).
pub type Evaluate<'a> = dyn FnMut(&[Vec<f64>]) -> Result<Vec<Discrepancy>> + 'a;

/// A candidate's discrepancy over the replicas, and with each replica left out in turn
/// (empty for an exact evaluator): the simulation's own noise in it, by the jackknife.
#[derive(Clone, Debug, PartialEq)]
pub struct Discrepancy {
    pub value: f64,
    pub leave_one_out: Vec<f64>,
}

impl From<f64> for Discrepancy {
    fn from(value: f64) -> Discrepancy {
        Discrepancy { value, leave_one_out: Vec::new() }
    }
}

impl Candidate {
    /// The jackknife standard error of `self.discrepancy − other.discrepancy`, both
    /// over the same replicas (common random numbers); 0 without replicas to leave out.
    pub fn noise_against(&self, other: &Candidate) -> f64 {
        let (a, b) = (&self.leave_one_out, &other.leave_one_out);
        if a.len() < 2 || a.len() != b.len() {
            return 0.0;
        }
        let n = a.len() as f64;
        let differences: Vec<f64> = a.iter().zip(b).map(|(a, b)| a - b).collect();
        let mean = differences.iter().sum::<f64>() / n;
        ((n - 1.0) / n * differences.iter().map(|d| (d - mean).powi(2)).sum::<f64>()).sqrt()
    }
}

/// The candidates so far and how to evaluate more.
pub(super) struct Evaluator<'e, 'f> {
    pub(super) dimensions: &'e [Dimension],
    evaluate: &'e mut Evaluate<'f>,
    pub(super) candidates: Vec<Candidate>,
}

impl<'e, 'f> Evaluator<'e, 'f> {
    pub(super) fn new(dimensions: &'e [Dimension], evaluate: &'e mut Evaluate<'f>) -> Self {
        Evaluator { dimensions, evaluate, candidates: Vec::new() }
    }

    /// Goes on from `candidates` already evaluated.
    pub(super) fn resume(
        dimensions: &'e [Dimension],
        evaluate: &'e mut Evaluate<'f>,
        candidates: Vec<Candidate>,
    ) -> Self {
        Evaluator { dimensions, evaluate, candidates }
    }

    /// Evaluates the unit points not evaluated before, as stage `stage`.
    pub(super) fn run(&mut self, units: Vec<Vec<f64>>, stage: &str) -> Result<()> {
        let mut fresh: Vec<Vec<f64>> = Vec::new();
        for unit in units {
            if !self.candidates.iter().any(|c| c.unit == unit) && !fresh.contains(&unit) {
                fresh.push(unit);
            }
        }
        if fresh.is_empty() {
            return Ok(());
        }
        let values: Vec<Vec<f64>> =
            fresh.iter().map(|u| self.dimensions.iter().zip(u).map(|(dim, &x)| dim.value(x)).collect()).collect();
        let discrepancies = (self.evaluate)(&values)?;
        assert_eq!(discrepancies.len(), values.len(), "one discrepancy per candidate");
        for ((unit, values), discrepancy) in fresh.into_iter().zip(values).zip(discrepancies) {
            self.candidates.push(Candidate {
                unit,
                values,
                discrepancy: discrepancy.value,
                leave_one_out: discrepancy.leave_one_out,
                stage: stage.to_string(),
            });
        }
        Ok(())
    }

    /// The best candidate (the first of equals).
    pub(super) fn best(&self) -> usize {
        best_among(&self.candidates, |_| true).expect("candidates")
    }

    /// The best candidate whose unknown `j` has the value `value`.
    pub(super) fn best_with(&self, j: usize, value: f64) -> Option<usize> {
        best_among(&self.candidates, |c| c.values[j] == value)
    }

    /// The candidate at `unit` (evaluated).
    pub(super) fn at_unit(&self, unit: &[f64]) -> &Candidate {
        self.candidates.iter().find(|c| c.unit == unit).expect("evaluated")
    }

    /// Evaluates the composite design over the unknowns `free` around `centre` (the
    /// others held; points already evaluated reused) and fits the quadratic to it,
    /// in step units of the free unknowns.
    pub(super) fn composite_round(
        &mut self,
        centre: &[f64],
        steps: &[f64],
        free: &[usize],
        stage: &str,
    ) -> Result<Option<Quadratic>> {
        let design = composite(free.len());
        let units: Vec<Vec<f64>> = design.iter().map(|z| at_free(centre, steps, free, z)).collect();
        self.run(units, stage)?;
        Ok(self.composite_fit(centre, steps, free, |c| c.discrepancy))
    }

    /// The quadratic over the free unknowns fitted to `value` of the composite design's
    /// candidates around `centre` (all evaluated), in step units.
    pub(super) fn composite_fit(
        &self,
        centre: &[f64],
        steps: &[f64],
        free: &[usize],
        value: impl Fn(&Candidate) -> f64,
    ) -> Option<Quadratic> {
        let design = composite(free.len());
        let mut seen = std::collections::BTreeSet::new();
        let (mut zs, mut ys) = (Vec::new(), Vec::new());
        for z in &design {
            let unit = at_free(centre, steps, free, z);
            // Clamping at the cube's edge can land two design points on one.
            if seen.insert(unit.iter().map(|u| u.to_bits()).collect::<Vec<u64>>()) {
                zs.push(free.iter().map(|&k| (unit[k] - centre[k]) / steps[k]).collect());
                ys.push(value(self.at_unit(&unit)));
            }
        }
        Quadratic::fit(free.len(), &zs, &ys)
    }
}

/// The best of the candidates `keep` accepts (the first of equals).
fn best_among(candidates: &[Candidate], keep: impl Fn(&Candidate) -> bool) -> Option<usize> {
    (0..candidates.len())
        .filter(|&i| keep(&candidates[i]))
        .min_by(|&a, &b| candidates[a].discrepancy.total_cmp(&candidates[b].discrepancy).then(a.cmp(&b)))
}

/// The step a quadratic proposes, in step units (at most two steps each way): its
/// minimum where it curves upward everywhere, else each unknown's own Newton step
/// where it curves upward and two steps downhill where it does not. The flag: the
/// step reached the two-step limit.
pub(super) fn proposal(quadratic: &Quadratic) -> (Vec<f64>, bool) {
    let direction: Vec<f64> = quadratic.minimum().unwrap_or_else(|| {
        (0..quadratic.gradient.len())
            .map(|j| match quadratic.hessian[j][j] {
                h if h > 0.0 => -quadratic.gradient[j] / h,
                _ => -2.0 * quadratic.gradient[j].signum(),
            })
            .collect()
    });
    let z: Vec<f64> = direction.iter().map(|v| if v.is_finite() { v.clamp(-2.0, 2.0) } else { 0.0 }).collect();
    let at_edge = z.iter().any(|v| v.abs() >= 2.0);
    (z, at_edge)
}

/// The search: `observations` is N, the number of compared (metric, interval) points.
pub fn search(
    dimensions: &[Dimension],
    shape: Shape,
    observations: usize,
    evaluate: &mut Evaluate,
) -> Result<Searched> {
    let d = dimensions.len();
    assert!(d > 0, "a fit has unknowns");
    let all: Vec<usize> = (0..d).collect();
    // The unknowns a quadratic models: the continuous ones with the integers held, when
    // there are both (an integer's cliff — too few workers — bends a quadratic through
    // it out of shape for every unknown, and the search stalled short of the minimum);
    // the integers move as the composite design's neighbours win.
    let continuous: Vec<usize> = all.iter().copied().filter(|&j| dimensions[j].scale != Scale::Integer).collect();
    let modelled = if continuous.is_empty() { all.clone() } else { continuous };
    let mut ev = Evaluator::new(dimensions, evaluate);
    ev.run((1..=shape.samples as u64).map(|i| halton(i, d)).collect(), "design")?;
    // Trust-region steps: a composite design of side `width` around the best, its
    // quadratic's minimum tried within twice the side; the side halves when the best
    // did not move.
    let mut width = 1.0 / 8.0;
    for round in 1..=shape.refinements * MORE_ROUNDS {
        let centre = ev.candidates[ev.best()].unit.clone();
        let before = ev.candidates[ev.best()].discrepancy;
        let steps = steps_of(dimensions, width);
        // Two models when there are integers: the whole quadratic's step (which can
        // move an integer several at once) and the continuous unknowns' own.
        let whole = ev.composite_round(&centre, &steps, &all, &format!("step {round}"))?;
        let continuous = if modelled.len() < d {
            ev.composite_round(&centre, &steps, &modelled, &format!("step {round}"))?
        } else {
            None
        };
        let mut proposals = Vec::new();
        if let Some((z, at_edge)) = whole.as_ref().map(proposal) {
            proposals.push((at(&centre, &steps, &z), at_edge));
        }
        if let Some((z, at_edge)) = continuous.as_ref().map(proposal) {
            proposals.push((at_free(&centre, &steps, &modelled, &z), at_edge));
        }
        ev.run(proposals.iter().map(|p| p.0.clone()).collect(), &format!("step {round} model"))?;
        // What the modelled quadratic says is still to gain: ½·gᵀH⁻¹g at its minimum.
        let modelled_quadratic = if modelled.len() < d { continuous.as_ref() } else { whole.as_ref() };
        let to_gain = modelled_quadratic.and_then(|q| {
            let z = q.minimum()?;
            Some(-0.5 * q.gradient.iter().zip(&z).map(|(g, z)| g * z).sum::<f64>())
        });
        let best = &ev.candidates[ev.best()].unit;
        let stretched = proposals.iter().any(|(unit, at_edge)| *at_edge && unit == best);
        if stretched {
            width = (width * 2.0).min(0.5);
        } else if ev.candidates[ev.best()].unit == centre {
            width /= 2.0;
        }
        // Past the rounds asked, only while a round gained, or its quadratic says it
        // could gain, a share of what the data can tell apart (the intervals' cut): the
        // intervals are measured at the minimum.
        let after = ev.candidates[ev.best()].discrepancy;
        let resolution = CONVERGED * 3.84 * after / observations.saturating_sub(d).max(1) as f64;
        if round >= shape.refinements && before - after <= resolution && to_gain.is_some_and(|g| g <= resolution) {
            break;
        }
    }
    let steps = steps_of(dimensions, width);
    measure_curvature(&mut ev, &steps, &all, &modelled)?;
    Ok(Searched { candidates: ev.candidates, steps })
}

/// The curvature at the best, on `steps`: its quadratics' minima (over `all` unknowns
/// and over the `modelled` ones) are tried too, and where one is better the curvature
/// is measured again there (three times at most).
fn measure_curvature(ev: &mut Evaluator, steps: &[f64], all: &[usize], modelled: &[usize]) -> Result<()> {
    let mut centre = ev.candidates[ev.best()].unit.clone();
    for _ in 0..3 {
        let mut tries = Vec::new();
        let whole = ev.composite_round(&centre, steps, all, "curvature")?;
        let continuous =
            if modelled.len() < all.len() { ev.composite_round(&centre, steps, modelled, "curvature")? } else { None };
        for (quadratic, free) in [(whole, all), (continuous, modelled)] {
            if let Some(z) =
                quadratic.as_ref().and_then(Quadratic::minimum).filter(|z| z.iter().all(|v| v.abs() <= 1.0))
            {
                tries.push(at_free(&centre, steps, free, &z));
            }
        }
        ev.run(tries, "curvature model")?;
        let best = ev.candidates[ev.best()].unit.clone();
        if best == centre {
            break;
        }
        centre = best;
    }
    Ok(())
}

/// Each dimension's step for a design of side `width` (an integer's at least one integer).
pub(super) fn steps_of(dimensions: &[Dimension], width: f64) -> Vec<f64> {
    dimensions
        .iter()
        .map(|dim| match dim.scale {
            Scale::Integer => (width / 2.0).max(1.0 / (dim.high - dim.low + 1.0)),
            _ => width / 2.0,
        })
        .collect()
}

/// The unit point `z` steps from `centre` (clamped to the cube).
fn at(centre: &[f64], steps: &[f64], z: &[f64]) -> Vec<f64> {
    centre.iter().zip(z).zip(steps).map(|((c, z), h)| (c + z * h).clamp(0.0, 1.0)).collect()
}

/// The unit point `z` steps from `centre` along the unknowns `free` (`z` in their
/// order; the others held), clamped to the cube.
pub(super) fn at_free(centre: &[f64], steps: &[f64], free: &[usize], z: &[f64]) -> Vec<f64> {
    let mut unit = centre.to_vec();
    for (&k, z) in free.iter().zip(z) {
        unit[k] = (centre[k] + z * steps[k]).clamp(0.0, 1.0);
    }
    unit
}

/// The central composite design in d dimensions, in units of the step: the centre,
/// each axis at ±1, each pair at (±1, ±1).
fn composite(d: usize) -> Vec<Vec<f64>> {
    let mut points = vec![vec![0.0; d]];
    for j in 0..d {
        for sign in [-1.0, 1.0] {
            let mut z = vec![0.0; d];
            z[j] = sign;
            points.push(z);
        }
    }
    for j in 0..d {
        for k in j + 1..d {
            for (a, b) in [(-1.0, -1.0), (-1.0, 1.0), (1.0, -1.0), (1.0, 1.0)] {
                let mut z = vec![0.0; d];
                z[j] = a;
                z[k] = b;
                points.push(z);
            }
        }
    }
    points
}

/// D(z) ≈ a + gᵀz + ½ zᵀHz.
#[derive(Clone, Debug)]
pub(super) struct Quadratic {
    pub(super) gradient: Vec<f64>,
    pub(super) hessian: Vec<Vec<f64>>,
    /// The share of the points' variation the quadratic explains; `None` when the
    /// points leave no degree of freedom to judge it by (or do not vary).
    pub(super) r_squared: Option<f64>,
}

impl Quadratic {
    /// Least squares over the points; `None` when they do not determine it.
    fn fit(d: usize, zs: &[Vec<f64>], ys: &[f64]) -> Option<Quadratic> {
        // Terms: 1, z_j, then z_j z_k for j ≤ k.
        let pairs: Vec<(usize, usize)> = (0..d).flat_map(|j| (j..d).map(move |k| (j, k))).collect();
        let terms = 1 + d + pairs.len();
        let row = |z: &[f64]| -> Vec<f64> {
            let mut row = vec![1.0];
            row.extend_from_slice(z);
            row.extend(pairs.iter().map(|&(j, k)| z[j] * z[k]));
            row
        };
        let mut normal = vec![vec![0.0; terms]; terms];
        let mut right = vec![0.0; terms];
        for (z, &y) in zs.iter().zip(ys) {
            if !y.is_finite() {
                return None;
            }
            let x = row(z);
            for a in 0..terms {
                right[a] += x[a] * y;
                for b in 0..terms {
                    normal[a][b] += x[a] * x[b];
                }
            }
        }
        let beta = solve(normal, right)?;
        let r_squared = (zs.len() > terms).then(|| {
            let mean = ys.iter().sum::<f64>() / ys.len() as f64;
            let total: f64 = ys.iter().map(|y| (y - mean).powi(2)).sum();
            let residual: f64 = zs
                .iter()
                .zip(ys)
                .map(|(z, y)| (y - row(z).iter().zip(&beta).map(|(x, b)| x * b).sum::<f64>()).powi(2))
                .sum();
            (total > 0.0).then(|| 1.0 - residual / total)
        });
        let r_squared = r_squared.flatten();
        let gradient = beta[1..=d].to_vec();
        let mut hessian = vec![vec![0.0; d]; d];
        for (&(j, k), &c) in pairs.iter().zip(&beta[1 + d..]) {
            if j == k {
                hessian[j][j] = 2.0 * c;
            } else {
                hessian[j][k] = c;
                hessian[k][j] = c;
            }
        }
        Some(Quadratic { gradient, hessian, r_squared })
    }

    /// The stationary point −H⁻¹g when H is positive definite.
    pub(super) fn minimum(&self) -> Option<Vec<f64>> {
        cholesky(&self.hessian)?;
        let step = solve(self.hessian.clone(), self.gradient.clone())?;
        Some(step.into_iter().map(|s| -s).collect())
    }
}

/// The lower Cholesky factor, `None` unless positive definite.
pub(super) fn cholesky(a: &[Vec<f64>]) -> Option<Vec<Vec<f64>>> {
    let n = a.len();
    // Curvature this far below the largest is rounding, not information.
    let tolerance = 1e-9 * (0..n).map(|i| a[i][i].abs()).fold(0.0, f64::max);
    let mut l = vec![vec![0.0; n]; n];
    for i in 0..n {
        for j in 0..=i {
            let sum: f64 = (0..j).map(|k| l[i][k] * l[j][k]).sum();
            if i == j {
                let diagonal = a[i][i] - sum;
                if !(diagonal > tolerance && diagonal.is_finite()) {
                    return None;
                }
                l[i][i] = diagonal.sqrt();
            } else {
                l[i][j] = (a[i][j] - sum) / l[j][j];
            }
        }
    }
    Some(l)
}

/// Solves `a x = b` by Gaussian elimination with partial pivoting; `None` if singular.
fn solve(mut a: Vec<Vec<f64>>, mut b: Vec<f64>) -> Option<Vec<f64>> {
    let n = b.len();
    let scale = a.iter().flatten().fold(0.0f64, |m, v| m.max(v.abs())).max(f64::MIN_POSITIVE);
    for col in 0..n {
        let pivot = (col..n).max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs()))?;
        if a[pivot][col].abs() <= 1e-12 * scale {
            return None;
        }
        a.swap(col, pivot);
        b.swap(col, pivot);
        let (above, below) = a.split_at_mut(col + 1);
        let pivot_row = &above[col];
        for (offset, row) in below.iter_mut().enumerate() {
            let factor = row[col] / pivot_row[col];
            row[col..].iter_mut().zip(&pivot_row[col..]).for_each(|(r, p)| *r -= factor * p);
            b[col + 1 + offset] -= factor * b[col];
        }
    }
    let mut x = vec![0.0; n];
    for row in (0..n).rev() {
        let sum: f64 = (row + 1..n).map(|k| a[row][k] * x[k]).sum();
        x[row] = (b[row] - sum) / a[row][row];
    }
    Some(x)
}

pub(super) fn invert(a: &[Vec<f64>]) -> Option<Vec<Vec<f64>>> {
    let n = a.len();
    let columns: Option<Vec<Vec<f64>>> = (0..n)
        .map(|j| {
            let mut e = vec![0.0; n];
            e[j] = 1.0;
            solve(a.to_vec(), e)
        })
        .collect();
    let columns = columns?;
    Some((0..n).map(|i| (0..n).map(|j| columns[j][i]).collect()).collect())
}

#[cfg(test)]
mod tests {
    use super::super::intervals::{fit as search, Method};
    use super::*;

    fn dim(text: &str) -> Dimension {
        Dimension::parse(text).unwrap()
    }

    /// A least-squares problem with a known answer: N residuals r_k = (a − a₀)·x_k +
    /// (b − b₀)·y_k + e_k with noise e of sd σ, D = mean r². The search lands on the
    /// exact least-squares solution (â, b̂), to within a standard error, and its standard errors match the textbook
    /// σ·√((XᵀX)⁻¹)ⱼⱼ (within 15%: D_min estimates σ²).
    #[test]
    fn finds_the_least_squares_answer_and_its_textbook_interval() {
        use stampede_engine::{RngStream, StreamPurpose};
        let n = 400;
        let mut rng = RngStream::derive(3, 0, StreamPurpose::named("calibrate.fit.test"));
        let xs: Vec<f64> = (0..n).map(|k| 1.0 + (k % 7) as f64 / 7.0).collect();
        let ys: Vec<f64> = (0..n).map(|k| 3.0 * (k as f64).sin()).collect();
        let noise: Vec<f64> = (0..n)
            .map(|_| {
                let (u, v) = (rng.uniform_open01(), rng.uniform01());
                0.1 * (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
            })
            .collect();
        let truth = [1.3, 0.15];
        let dims = [dim("a=0.5..2.5"), dim("b=0.01..1:log")];
        let d = |values: &[f64]| -> f64 {
            (0..n)
                .map(|k| ((values[0] - truth[0]) * xs[k] + (values[1] - truth[1]) * ys[k] + noise[k]).powi(2))
                .sum::<f64>()
                / n as f64
        };
        // The exact answer: the normal equations of (x, y) against −e.
        let (mut sxx, mut sxy, mut syy, mut sxe, mut sye) = (0.0, 0.0, 0.0, 0.0, 0.0);
        for k in 0..n {
            sxx += xs[k] * xs[k];
            sxy += xs[k] * ys[k];
            syy += ys[k] * ys[k];
            sxe -= xs[k] * noise[k];
            sye -= ys[k] * noise[k];
        }
        let det = sxx * syy - sxy * sxy;
        let exact = [truth[0] + (syy * sxe - sxy * sye) / det, truth[1] + (sxx * sye - sxy * sxe) / det];
        let textbook = [0.1 * (syy / det).sqrt(), 0.1 * (sxx / det).sqrt()];
        let mut evaluate = |candidates: &[Vec<f64>]| Ok(candidates.iter().map(|v| d(v).into()).collect());
        let found = search(&dims, Shape::default_for(2), n, &mut evaluate).unwrap();
        let best = &found.candidates[found.best];
        for j in 0..2 {
            // Within one standard error (a trapped search missed b by 14 of them; the
            // rest is the quadratic's error over a log dimension's step).
            assert!((best.values[j] - exact[j]).abs() < textbook[j], "{:?} against {exact:?}", best.values);
            let sd = found.estimates[j].sd.unwrap();
            assert!((sd / textbook[j] - 1.0).abs() < 0.15, "sd {sd} against {}", textbook[j]);
            let (lo, hi) = found.estimates[j].interval.unwrap();
            assert!(lo < exact[j] && exact[j] < hi);
        }
    }

    /// A discrepancy flat in one dimension: that one is reported as not identified.
    #[test]
    fn a_flat_dimension_is_not_identified() {
        let dims = [dim("a=0..2"), dim("b=0..1")];
        let mut evaluate =
            |candidates: &[Vec<f64>]| Ok(candidates.iter().map(|v| (0.01 + (v[0] - 1.0).powi(2)).into()).collect());
        let found = search(&dims, Shape::default_for(2), 100, &mut evaluate).unwrap();
        assert!(found.estimates[0].interval.is_some());
        assert!(found.estimates[1].interval.is_none(), "{:?}", found.estimates[1]);
    }

    /// Integers: the fit lands on its integer, and the interval is the profile's set —
    /// the integers within the cut 3.84·D_min/(N − p) of the best: {12} where a step
    /// of one costs far more than the cut, 11..13 where it costs a quarter of it
    /// (the Gauss–Newton interval of that quadratic is 12 ± 1.98).
    #[test]
    fn an_integer_dimension_lands_on_its_integer_and_its_interval_is_a_profile_set() {
        let dims = [dim("workers=4..32:int")];
        for (slope, expected) in [(0.01, (12.0, 12.0)), (0.00002, (11.0, 13.0))] {
            let mut evaluate = |candidates: &[Vec<f64>]| {
                Ok(candidates.iter().map(|v| (0.001 + slope * (v[0] - 12.0).powi(2)).into()).collect())
            };
            let found = search(&dims, Shape::default_for(1), 50, &mut evaluate).unwrap();
            assert_eq!(found.candidates[found.best].values, vec![12.0]);
            let estimate = &found.estimates[0];
            assert_eq!(estimate.interval, Some(expected), "{estimate:?}");
            assert_eq!(estimate.method, Some(Method::Profile));
            assert_eq!(estimate.open, [false, false]);
        }
    }

    #[test]
    fn linear_algebra() {
        let a = vec![vec![4.0, 1.0], vec![1.0, 3.0]];
        let x = solve(a.clone(), vec![1.0, 2.0]).unwrap();
        assert!((4.0 * x[0] + x[1] - 1.0).abs() < 1e-12 && (x[0] + 3.0 * x[1] - 2.0).abs() < 1e-12);
        let inv = invert(&a).unwrap();
        assert!((inv[0][0] - 3.0 / 11.0).abs() < 1e-12 && (inv[0][1] + 1.0 / 11.0).abs() < 1e-12);
        assert!(cholesky(&a).is_some());
        assert!(cholesky(&[vec![1.0, 2.0], vec![2.0, 1.0]]).is_none());
        assert!(solve(vec![vec![1.0, 2.0], vec![2.0, 4.0]], vec![1.0, 2.0]).is_none());
        assert_eq!(composite(3).len(), 1 + 6 + 12);
    }
}
