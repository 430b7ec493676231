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
//! 4. **Intervals from the curvature** (Gauss–Newton, as nonlinear least squares
//!    gives them): the discrepancy D is a mean of N squared relative errors, so the
//!    fitted values' covariance is 2·D_min / (N − p) · H⁻¹, H the quadratic's Hessian
//!    and p the number of unknowns. This counts production's own scatter around the
//!    model (the residuals), treating intervals as independent — the caller widens
//!    them for the residuals' autocorrelation ([`widen`]); the simulation's noise in D
//!    is held down by common random numbers and not counted. A dimension along which
//!    the quadratic does not curve upward is reported as not identified.
//!
//! Invariant: every decision reads only the evaluator's numbers and the fixed Halton
//! stretches, so a fit is the same for a seed on any machine and thread count.

use super::super::space::{halton, Dimension, Scale};
use stampede_scenario::base::error::Result;

/// The most candidates a first design may have (`--samples`).
pub const MAX_SAMPLES: usize = 10_000;

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
    /// Which stage proposed it: `design`, `refine N`, `curvature`, `quadratic minimum`.
    pub stage: String,
}

/// A fitted value and its interval.
#[derive(Clone, Debug, PartialEq)]
pub struct Estimate {
    pub value: f64,
    /// The 95% interval, `None` when the data do not pin the value down.
    pub interval: Option<(f64, f64)>,
    /// The standard error, when identified.
    pub sd: Option<f64>,
}

/// What the search found.
#[derive(Clone, Debug)]
pub struct Found {
    pub candidates: Vec<Candidate>,
    /// The index of the best candidate.
    pub best: usize,
    pub estimates: Vec<Estimate>,
}

/// Turns candidates' values into their discrepancies (one each, in order).
pub type Evaluate<'a> = dyn FnMut(&[Vec<f64>]) -> Result<Vec<f64>> + 'a;

/// The search: `observations` is N, the number of compared (metric, interval) points.
pub fn search(dimensions: &[Dimension], shape: Shape, observations: usize, evaluate: &mut Evaluate) -> Result<Found> {
    let d = dimensions.len();
    assert!(d > 0, "a fit has unknowns");
    let mut candidates: Vec<Candidate> = Vec::new();
    let mut run = |units: Vec<Vec<f64>>, stage: &str, candidates: &mut Vec<Candidate>| -> Result<()> {
        let units: Vec<Vec<f64>> = units.into_iter().filter(|u| !candidates.iter().any(|c| &c.unit == u)).collect();
        if units.is_empty() {
            return Ok(());
        }
        let values: Vec<Vec<f64>> =
            units.iter().map(|u| dimensions.iter().zip(u).map(|(dim, &x)| dim.value(x)).collect()).collect();
        let discrepancies = evaluate(&values)?;
        for ((unit, values), discrepancy) in units.into_iter().zip(values).zip(discrepancies) {
            candidates.push(Candidate { unit, values, discrepancy, stage: stage.to_string() });
        }
        Ok(())
    };
    let best_of = |candidates: &[Candidate]| {
        (0..candidates.len())
            .min_by(|&a, &b| candidates[a].discrepancy.total_cmp(&candidates[b].discrepancy).then(a.cmp(&b)))
            .expect("candidates")
    };
    run((1..=shape.samples as u64).map(|i| halton(i, d)).collect(), "design", &mut candidates)?;
    // Trust-region steps: a composite design of side `width` around the best, its
    // quadratic's minimum tried within twice the side; the side halves when the best
    // did not move.
    let mut width = 1.0 / 8.0;
    let design = composite(d);
    for round in 1..=shape.refinements {
        let centre = candidates[best_of(&candidates)].unit.clone();
        let steps = steps_of(dimensions, width);
        let quadratic = composite_round(&design, &centre, &steps, &format!("step {round}"), &mut candidates, &mut run)?;
        // The quadratic's minimum; where it does not curve upward everywhere (a log
        // dimension far below its answer), each dimension's own Newton step where it
        // curves upward and two steps downhill where it does not. At most two steps.
        let proposal = quadratic.as_ref().map(|q| {
            let newton = q.minimum();
            let direction: Vec<f64> = newton.clone().unwrap_or_else(|| {
                (0..d)
                    .map(|j| match q.hessian[j][j] {
                        h if h > 0.0 => -q.gradient[j] / h,
                        _ => -2.0 * q.gradient[j].signum(),
                    })
                    .collect()
            });
            let z: Vec<f64> = direction.iter().map(|v| if v.is_finite() { v.clamp(-2.0, 2.0) } else { 0.0 }).collect();
            let at_edge = z.iter().any(|v| v.abs() >= 2.0);
            (z, at_edge)
        });
        let mut stretched = false;
        if let Some((z, at_edge)) = proposal {
            let unit = at(&centre, &steps, &z);
            run(vec![unit.clone()], &format!("step {round} model"), &mut candidates)?;
            stretched = at_edge && candidates[best_of(&candidates)].unit == unit;
        }
        if stretched {
            width = (width * 2.0).min(0.5);
        } else if candidates[best_of(&candidates)].unit == centre {
            width /= 2.0;
        }
    }
    // The curvature at the best, for the intervals; its quadratic's minimum is tried
    // too, and if that is better the curvature is measured again there.
    let mut centre = candidates[best_of(&candidates)].unit.clone();
    let steps = steps_of(dimensions, width);
    let mut quadratic = composite_round(&design, &centre, &steps, "curvature", &mut candidates, &mut run)?;
    for _ in 0..2 {
        if let Some(z) = quadratic.as_ref().and_then(Quadratic::minimum).filter(|z| z.iter().all(|v| v.abs() <= 1.0)) {
            run(vec![at(&centre, &steps, &z)], "curvature model", &mut candidates)?;
        }
        let best = candidates[best_of(&candidates)].unit.clone();
        if best == centre {
            break;
        }
        centre = best;
        quadratic = composite_round(&design, &centre, &steps, "curvature", &mut candidates, &mut run)?;
    }
    let best = best_of(&candidates);
    let estimates = if candidates[best].unit == centre {
        estimates(dimensions, &candidates[best], &steps, quadratic.as_ref(), observations)
    } else {
        candidates[best].values.iter().map(|&value| Estimate { value, interval: None, sd: None }).collect()
    };
    Ok(Found { candidates, best, estimates })
}

/// Each dimension's step for a design of side `width` (an integer's at least one integer).
fn steps_of(dimensions: &[Dimension], width: f64) -> Vec<f64> {
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

type Run<'r> = dyn FnMut(Vec<Vec<f64>>, &str, &mut Vec<Candidate>) -> Result<()> + 'r;

/// Evaluates the composite design around `centre` (points already evaluated are
/// reused) and fits the quadratic to it, in step units.
fn composite_round(
    design: &[Vec<f64>],
    centre: &[f64],
    steps: &[f64],
    stage: &str,
    candidates: &mut Vec<Candidate>,
    run: &mut Run,
) -> Result<Option<Quadratic>> {
    let units: Vec<Vec<f64>> = design.iter().map(|z| at(centre, steps, z)).collect();
    run(units.clone(), stage, candidates)?;
    let indices: Vec<usize> =
        units.iter().map(|u| candidates.iter().position(|c| &c.unit == u).expect("evaluated")).collect();
    let mut seen = std::collections::BTreeSet::new();
    let (mut zs, mut ys) = (Vec::new(), Vec::new());
    for &i in &indices {
        // Clamping at the cube's edge can land two design points on one.
        if seen.insert(i) {
            zs.push(candidates[i].unit.iter().zip(centre).zip(steps).map(|((u, c), h)| (u - c) / h).collect());
            ys.push(candidates[i].discrepancy);
        }
    }
    Ok(Quadratic::fit(centre.len(), &zs, &ys))
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
struct Quadratic {
    gradient: Vec<f64>,
    hessian: Vec<Vec<f64>>,
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
        Some(Quadratic { gradient, hessian })
    }

    /// The stationary point −H⁻¹g when H is positive definite.
    fn minimum(&self) -> Option<Vec<f64>> {
        cholesky(&self.hessian)?;
        let step = solve(self.hessian.clone(), self.gradient.clone())?;
        Some(step.into_iter().map(|s| -s).collect())
    }
}

/// The estimates at `best`: intervals from the quadratic's Hessian (in step units).
fn estimates(
    dimensions: &[Dimension],
    best: &Candidate,
    steps: &[f64],
    quadratic: Option<&Quadratic>,
    observations: usize,
) -> Vec<Estimate> {
    let d = dimensions.len();
    let unidentified = || best.values.iter().map(|&value| Estimate { value, interval: None, sd: None }).collect();
    let Some(quadratic) = quadratic else { return unidentified() };
    if observations <= d || cholesky(&quadratic.hessian).is_none() {
        // A Hessian that is not positive definite: look for the dimensions that still
        // curve upward on their own (the rest are not identified).
        return dimensions
            .iter()
            .enumerate()
            .map(|(j, dim)| {
                let curvature = quadratic.hessian[j][j];
                let value = best.values[j];
                let largest = (0..d).map(|k| quadratic.hessian[k][k]).fold(0.0, f64::max);
                if observations <= d || curvature <= 1e-9 * largest {
                    return Estimate { value, interval: None, sd: None };
                }
                let variance = 2.0 * best.discrepancy / (observations - d) as f64 / curvature;
                interval(dim, value, steps[j], variance)
            })
            .collect();
    }
    let Some(inverse) = invert(&quadratic.hessian) else { return unidentified() };
    let factor = 2.0 * best.discrepancy / (observations - d) as f64;
    dimensions
        .iter()
        .enumerate()
        .map(|(j, dim)| interval(dim, best.values[j], steps[j], factor * inverse[j][j]))
        .collect()
}

/// Multiplies each identified estimate's standard error by `factor` (≥ 1), its
/// interval following.
pub fn widen(estimates: &mut [Estimate], factor: f64) {
    debug_assert!(factor >= 1.0);
    for estimate in estimates {
        if let Some(sd) = estimate.sd {
            let sd = sd * factor;
            estimate.sd = Some(sd);
            estimate.interval = Some((estimate.value - 1.96 * sd, estimate.value + 1.96 * sd));
        }
    }
}

/// The 95% interval of a value whose variance is `variance` in step units.
fn interval(dim: &Dimension, value: f64, step: f64, variance: f64) -> Estimate {
    let per_unit = match dim.scale {
        Scale::Linear => dim.high - dim.low,
        Scale::Log => value * (dim.high / dim.low).ln(),
        Scale::Integer => dim.high - dim.low + 1.0,
    };
    let sd = variance.max(0.0).sqrt() * step * per_unit;
    Estimate { value, interval: Some((value - 1.96 * sd, value + 1.96 * sd)), sd: Some(sd) }
}

/// The lower Cholesky factor, `None` unless positive definite.
fn cholesky(a: &[Vec<f64>]) -> Option<Vec<Vec<f64>>> {
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

fn invert(a: &[Vec<f64>]) -> Option<Vec<Vec<f64>>> {
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
        let mut evaluate = |candidates: &[Vec<f64>]| Ok(candidates.iter().map(|v| d(v)).collect());
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
            |candidates: &[Vec<f64>]| Ok(candidates.iter().map(|v| 0.01 + (v[0] - 1.0).powi(2)).collect());
        let found = search(&dims, Shape::default_for(2), 100, &mut evaluate).unwrap();
        assert!(found.estimates[0].interval.is_some());
        assert!(found.estimates[1].interval.is_none(), "{:?}", found.estimates[1]);
    }

    /// Integers: the curvature steps are at least one integer apart.
    #[test]
    fn an_integer_dimension_lands_on_its_integer() {
        let dims = [dim("workers=4..32:int")];
        let mut evaluate =
            |candidates: &[Vec<f64>]| Ok(candidates.iter().map(|v| 0.001 + 0.01 * (v[0] - 12.0).powi(2)).collect());
        let found = search(&dims, Shape::default_for(1), 50, &mut evaluate).unwrap();
        assert_eq!(found.candidates[found.best].values, vec![12.0]);
        let (lo, hi) = found.estimates[0].interval.unwrap();
        assert!(lo < 12.0 && 12.0 < hi && hi - lo < 4.0, "{lo}..{hi}");
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
