//! The fitted unknowns' 95% intervals: from the curvature of the discrepancy where a
//! quadratic describes it, from its profile where none does (issue 73).
//!
//! **The cut.** The discrepancy D is a mean of N squared relative errors, so with
//! σ̂² = N·D_min/(N − p) (production's scatter around the model, read off the
//! residuals at the best fit; p unknowns), N·(D(θ) − D_min)/σ̂² is a likelihood-ratio
//! statistic, χ²₁ for one unknown at its true value. An unknown's 95% set is where its
//! *profile* — the least D with that unknown held at a value and the others
//! re-optimised, on the same common random numbers — is within
//! CUT = 3.84·D_min/(N − p) of the best. For a quadratic D this is the Gauss–Newton
//! interval ±1.96·√(2·D_min/(N − p)·(H⁻¹)ⱼⱼ) exactly, so the two methods agree where
//! both apply. Widening for autocorrelated residuals multiplies a standard error by
//! the factor and the cut by its square.
//!
//! **Which method, per unknown:**
//! - An *integer* (workers, pool sizes, instances) always gets its profile: held at
//!   each integer outward from the fit, one at a time, the others re-optimised from
//!   the previous integer's optimum, until the profile passes
//!   [`WALK_CUTS`] cuts or the `--fit` range ends. A worker count is a one-sided
//!   cliff (too few explode D, more change little), which no quadratic describes; the
//!   set is printed as a range, `6 [5, 7]`, open where it reaches the walk's end.
//! - A *continuous* unknown gets the curvature of the quadratic fitted, with the
//!   integers at their fitted values, to the composite design around the best — when
//!   that quadratic curves upward and describes the design (R² ≥ [`MIN_R_SQUARED`]);
//!   an unknown that curves upward on its own gets its own curvature; any other gets
//!   its profile, walked in growing steps and bisected to the cut. The curvature is
//!   measured with steps of about one standard error (a design much wider than the
//!   interval averages a steepening surface's curvature over it: too narrow), and
//!   kept only where the profile at the interval's two ends agrees (a rise of at
//!   least [`EDGE_SHARE`] of the cut, beyond the noise's): a surface rough at the
//!   design's scale makes the quadratic far too steep, and the profile then gives
//!   the interval.
//!
//! Invariant: each unknown's interval is made alone, so one that cannot be identified
//! never removes another's; only N ≤ p leaves every unknown without one.

use super::fit::{at_free, cholesky, invert, proposal, search, Candidate, Evaluate, Evaluator, Quadratic, Shape};
use crate::space::{Dimension, Scale};
use stampede_scenario::base::error::Result;

/// χ²₁'s 95th percentile: the cut in units of σ̂²/N.
const CHI2_95: f64 = 3.841_458_820_694_124;

/// How many cuts past the best a profile walk goes before it stops: far enough that
/// the widest widening the residuals' autocorrelation gives (×2 at ρ₁ = 0.6) still
/// finds its crossing inside what was walked.
pub const WALK_CUTS: f64 = 4.0;

/// The most integers a profile walks on each side of the fit.
pub const MAX_INTEGER_STEPS: usize = 12;

/// A continuous profile's walk: steps growing fourfold from the design's step, at most
/// [`MAX_WIDENINGS`] of them on each side (enough to reach the range's end from a
/// step of 10⁻⁹), then the stretch holding the cut's crossing bisected
/// [`BISECTIONS`] times.
const GROWTH: f64 = 4.0;
const MAX_WIDENINGS: usize = 16;
const BISECTIONS: usize = 4;

/// Trust-region rounds that re-optimise the other unknowns at each profile value.
pub const PROFILE_ROUNDS: usize = 3;

/// The least share of the composite design's variation a quadratic must explain to
/// give curvature intervals (a cliff inside the design fails it).
pub const MIN_R_SQUARED: f64 = 0.5;

/// What a fit found: the search's candidates, the best, and each unknown's interval.
#[derive(Clone, Debug)]
pub struct Found {
    pub candidates: Vec<super::fit::Candidate>,
    /// The index of the best candidate.
    pub best: usize,
    /// Each unknown's value and 95% interval ([`Found::widen`] remakes them).
    pub estimates: Vec<Estimate>,
    /// What each unknown's interval is made from.
    bases: Vec<Basis>,
    /// N, the compared (metric, interval) points.
    observations: usize,
    dimensions: Vec<Dimension>,
}

impl Found {
    /// Remakes the intervals for residuals whose scatter is `factor` (≥ 1) times what
    /// independent intervals would give: a curvature interval's standard error × factor,
    /// a profile's cut × factor².
    pub fn widen(&mut self, factor: f64) {
        debug_assert!(factor >= 1.0);
        self.estimates =
            estimates(&self.dimensions, &self.candidates, self.best, &self.bases, self.observations, factor);
    }
}

/// The fit: [`search`] for the best, then each unknown's interval around it.
pub fn fit(dimensions: &[Dimension], shape: Shape, observations: usize, evaluate: &mut Evaluate) -> Result<Found> {
    let searched = search(dimensions, shape, observations, evaluate)?;
    let mut ev = Evaluator::resume(dimensions, evaluate, searched.candidates);
    let bases = measure(&mut ev, observations, &searched.steps)?;
    let best = ev.best();
    let candidates = ev.candidates;
    let estimates = estimates(dimensions, &candidates, best, &bases, observations, 1.0);
    Ok(Found { candidates, best, estimates, bases, observations, dimensions: dimensions.to_vec() })
}

/// How an unknown's interval was made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    Curvature,
    Profile,
}

impl Method {
    pub fn name(self) -> &'static str {
        match self {
            Method::Curvature => "curvature",
            Method::Profile => "profile",
        }
    }
}

/// A fitted value and its interval.
#[derive(Clone, Debug, PartialEq)]
pub struct Estimate {
    pub value: f64,
    /// The 95% interval, `None` when the data do not pin the value down.
    pub interval: Option<(f64, f64)>,
    /// The standard error, for a curvature interval.
    pub sd: Option<f64>,
    /// How the interval was made (`None`: not identified).
    pub method: Option<Method>,
    /// Per end (low, high): the profile was still within the cut where its walk
    /// stopped, so the interval may reach further.
    pub open: [bool; 2],
    /// The end of the `--fit` range the walk stopped at, per end, if it did.
    pub at_range_end: [bool; 2],
}

impl Estimate {
    fn unidentified(value: f64) -> Estimate {
        Estimate { value, interval: None, sd: None, method: None, open: [false; 2], at_range_end: [false; 2] }
    }
}

/// What one unknown's interval is made from.
#[derive(Clone, Debug)]
pub(super) enum Basis {
    /// (H⁻¹)ⱼⱼ of the quadratic in step units, the step in unit-cube units, and the
    /// jackknife variance of the minimum from the simulation's noise (step units²).
    Curvature { inverse: f64, step: f64, noise: f64 },
    /// The unit points walked (with the fit's own), each with the profile's D.
    Profile { walked: Vec<(f64, f64)> },
    /// N ≤ p: nothing to estimate σ̂² from.
    None,
}

/// The least share of the cut a curvature interval's ends must reach on the profile:
/// a quadratic's reach exactly the cut; half of it means the interval is about 0.7 of
/// the profile's width or narrower.
const EDGE_SHARE: f64 = 0.5;

/// How far the simulation's own noise may raise a candidate's discrepancy over the
/// best's, in jackknife standard errors of the difference (both on the same replicas).
const NOISE_ALLOWANCE: f64 = 1.96;

/// A candidate's discrepancy above the best's, less what the simulation's noise in
/// that difference could account for ([`NOISE_ALLOWANCE`] jackknife standard errors,
/// estimated from the replicas): with few replicas a candidate's D jumps by more than
/// the cut from the dice alone (a call probability's change reroutes requests and
/// reshuffles what follows), and the profile would exclude the truth.
fn excess(candidate: &Candidate, best: &Candidate) -> f64 {
    candidate.discrepancy - best.discrepancy - NOISE_ALLOWANCE * candidate.noise_against(best)
}

/// The cut for a best discrepancy `d_min` over N = `observations` and p unknowns.
fn cut(d_min: f64, observations: usize, unknowns: usize) -> f64 {
    debug_assert!(observations > unknowns);
    CHI2_95 * d_min / (observations - unknowns) as f64
}

/// Measures what each unknown's interval needs around the best candidate: walks the
/// integers' profiles, then the continuous unknowns' curvature (or profile).
pub(super) fn measure(ev: &mut Evaluator, observations: usize, steps: &[f64]) -> Result<Vec<Basis>> {
    let d = ev.dimensions.len();
    if observations <= d {
        return Ok(vec![Basis::None; d]);
    }
    let integers: Vec<usize> = (0..d).filter(|&j| ev.dimensions[j].scale == Scale::Integer).collect();
    let continuous: Vec<usize> = (0..d).filter(|&j| ev.dimensions[j].scale != Scale::Integer).collect();
    let mut bases = vec![Basis::None; d];
    for &j in &integers {
        bases[j] = Basis::Profile { walked: walk_integer(ev, j, observations, steps)? };
    }
    if continuous.is_empty() {
        return Ok(bases);
    }
    let (centre, steps, quadratic) = settle_curvature(ev, observations, steps, &continuous)?;
    let d_min = ev.candidates[ev.best()].discrepancy;
    let scatter = 2.0 * d_min / (observations - d) as f64;
    let still_best = ev.candidates[ev.best()].unit == centre;
    // The quadratic describes the design and its interval stays inside the range (a
    // near-flat dimension's rounding curvature would give one wider than the range).
    let describes = quadratic.as_ref().filter(|q| still_best && q.r_squared.is_none_or(|r| r >= MIN_R_SQUARED));
    let inside = |variance_steps: f64, j: usize| 1.96 * variance_steps.max(0.0).sqrt() * steps[j] <= 1.0;
    let inverse = describes.filter(|q| cholesky(&q.hessian).is_some()).and_then(|q| invert(&q.hessian));
    let noise = jackknife_noise(ev, &centre, &steps, &continuous);
    let largest = describes.map_or(0.0, |q| (0..continuous.len()).map(|k| q.hessian[k][k]).fold(0.0, f64::max));
    for (i, &j) in continuous.iter().enumerate() {
        let own = describes.map(|q| q.hessian[i][i]).filter(|&h| h > 1e-9 * largest);
        let noise_j = noise.as_ref().map(|n| n[i]);
        let curvature = match (&inverse, own, noise_j) {
            (Some(inverse), _, Some(noise)) if inside(scatter * inverse[i][i] + noise, j) => {
                Some(Basis::Curvature { inverse: inverse[i][i], step: steps[j], noise })
            }
            (None, Some(h), Some(noise)) if inside(scatter / h + noise, j) => {
                Some(Basis::Curvature { inverse: 1.0 / h, step: steps[j], noise })
            }
            _ => None,
        };
        bases[j] = match curvature {
            Some(Basis::Curvature { inverse, step, noise })
                if holds_to_its_edges(
                    ev,
                    j,
                    1.96 * (scatter * inverse + noise).sqrt() * step,
                    observations,
                    &steps,
                )? =>
            {
                Basis::Curvature { inverse, step, noise }
            }
            _ => Basis::Profile { walked: walk_continuous(ev, j, observations, &steps)? },
        };
    }
    Ok(bases)
}

/// The curvature of the continuous unknowns, the integers at their fitted values,
/// around the best (which a walk, or a design here, may move: measured again there),
/// with steps of about one standard error (re-measured where the design is over twice
/// the interval's width). Returns the design's centre, its steps and the quadratic.
fn settle_curvature(
    ev: &mut Evaluator,
    observations: usize,
    steps: &[f64],
    continuous: &[usize],
) -> Result<(Vec<f64>, Vec<f64>, Option<Quadratic>)> {
    let d = ev.dimensions.len();
    let mut centre = ev.candidates[ev.best()].unit.clone();
    let mut steps = steps.to_vec();
    let mut quadratic = ev.composite_round(&centre, &steps, continuous, "curvature")?;
    for _ in 0..4 {
        let best = ev.candidates[ev.best()].unit.clone();
        if best != centre {
            centre = best;
        } else {
            let d_min = ev.candidates[ev.best()].discrepancy;
            let scatter = 2.0 * d_min / (observations - d) as f64;
            let Some(inverse) =
                quadratic.as_ref().filter(|q| cholesky(&q.hessian).is_some()).and_then(|q| invert(&q.hessian))
            else {
                break;
            };
            let sds: Vec<f64> = (0..continuous.len()).map(|i| (scatter * inverse[i][i]).max(0.0).sqrt()).collect();
            if sds.iter().all(|&sd| sd >= 0.5) {
                break;
            }
            for (i, &j) in continuous.iter().enumerate() {
                steps[j] *= sds[i].clamp(1.0 / 64.0, 1.0);
            }
        }
        quadratic = ev.composite_round(&centre, &steps, continuous, "curvature")?;
    }
    Ok((centre, steps, quadratic))
}

/// The simulation's noise in where the minimum lies, per continuous unknown: the
/// quadratic refitted to the design's discrepancies with each replica left out, its
/// minimum's jackknife variance (step units). `None`: some refit has no minimum
/// (noise the quadratic cannot describe) — the profile then.
fn jackknife_noise(ev: &Evaluator, centre: &[f64], steps: &[f64], continuous: &[usize]) -> Option<Vec<f64>> {
    let replicas = ev.candidates[ev.best()].leave_one_out.len();
    if replicas < 2 {
        Some(vec![0.0; continuous.len()])
    } else {
        let minima: Option<Vec<Vec<f64>>> = (0..replicas)
            .map(|r| {
                let value = |c: &Candidate| c.leave_one_out.get(r).copied().unwrap_or(f64::NAN);
                ev.composite_fit(centre, steps, continuous, value).and_then(|q| stationary(&q))
            })
            .collect();
        minima.map(|minima| {
            let n = replicas as f64;
            (0..continuous.len())
                .map(|i| {
                    let mean = minima.iter().map(|m| m[i]).sum::<f64>() / n;
                    (n - 1.0) / n * minima.iter().map(|m| (m[i] - mean).powi(2)).sum::<f64>()
                })
                .collect()
        })
    }
}

/// Whether the curvature interval of unknown `j` (half-width `half_width` in unit-cube
/// units) is what the profile says at its ends: the least D there, the others
/// re-optimised, must rise at least [`EDGE_SHARE`] of the cut above the best, and by
/// more than the simulation's noise could ([`excess`] above 0). Where the quadratic
/// was measured on a surface rougher than it looks — a call probability under common random numbers jumps as requests are
/// rerouted, and a design shrunk to the interval's width sees the jumps as steep
/// curvature — the interval comes out several times too narrow (on the simulated
/// chain it covered the truth in 17 of 30 productions); its ends then fall well inside
/// the profile's set, and the profile is used instead.
fn holds_to_its_edges(
    ev: &mut Evaluator,
    j: usize,
    half_width: f64,
    observations: usize,
    steps: &[f64],
) -> Result<bool> {
    let start = ev.candidates[ev.best()].unit.clone();
    let d = start.len();
    for direction in [-1.0, 1.0] {
        let unit = (start[j] + direction * half_width).clamp(0.0, 1.0);
        if unit == start[j] {
            continue;
        }
        let from = conditional_minimum(ev, j, unit, &start, steps)?;
        // Against the best now (the walk there may have found a better one, which the
        // interval is then centred on: its width is the curvature's still).
        let (best, there) = (&ev.candidates[ev.best()], ev.at_unit(&from));
        let rise = there.discrepancy - best.discrepancy;
        if rise < EDGE_SHARE * cut(best.discrepancy, observations, d) || excess(there, best) <= 0.0 {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Where a quadratic is least: its minimum where it curves upward everywhere, else
/// each unknown's own (−gⱼ/Hⱼⱼ) where every one curves upward alone.
fn stationary(quadratic: &Quadratic) -> Option<Vec<f64>> {
    quadratic.minimum().or_else(|| {
        (0..quadratic.gradient.len())
            .map(|j| (quadratic.hessian[j][j] > 0.0).then(|| -quadratic.gradient[j] / quadratic.hessian[j][j]))
            .collect()
    })
}

/// The least D with unknown `j` at unit `unit_j`: the others re-optimised from
/// `start` by [`PROFILE_ROUNDS`] trust-region rounds. Returns the optimum's unit point.
fn conditional_minimum(ev: &mut Evaluator, j: usize, unit_j: f64, start: &[f64], steps: &[f64]) -> Result<Vec<f64>> {
    let free: Vec<usize> = (0..start.len()).filter(|&k| k != j).collect();
    let mut centre = start.to_vec();
    centre[j] = unit_j;
    let value_j = ev.dimensions[j].value(unit_j);
    let stage = format!("profile {}", ev.dimensions[j].path);
    ev.run(vec![centre.clone()], &stage)?;
    if free.is_empty() {
        return Ok(centre);
    }
    // Trust-region rounds as the search's: the side doubles when the quadratic's step
    // reached its limit and won, halves when the centre stayed best.
    let mut steps = steps.to_vec();
    for _ in 0..PROFILE_ROUNDS {
        let mut stretched = false;
        if let Some((z, at_edge)) = ev.composite_round(&centre, &steps, &free, &stage)?.as_ref().map(proposal) {
            let unit = at_free(&centre, &steps, &free, &z);
            ev.run(vec![unit.clone()], &stage)?;
            stretched = at_edge && ev.candidates[ev.best_with(j, value_j).expect("evaluated")].unit == unit;
        }
        let best = ev.best_with(j, value_j).expect("the centre has the value");
        let factor = if stretched {
            2.0
        } else if ev.candidates[best].unit == centre {
            0.5
        } else {
            1.0
        };
        for &k in &free {
            let dim = &ev.dimensions[k];
            steps[k] = match dim.scale {
                Scale::Integer => (steps[k] * factor).max(1.0 / (dim.high - dim.low + 1.0)),
                _ => steps[k] * factor,
            }
            .min(0.5);
        }
        centre = ev.candidates[best].unit.clone();
    }
    Ok(centre)
}

/// The integer unknown `j`'s profile, walked outward from the best one integer at a
/// time on each side. Returns the unit points walked, the best's own first.
fn walk_integer(ev: &mut Evaluator, j: usize, observations: usize, steps: &[f64]) -> Result<Vec<(f64, f64)>> {
    let d = ev.dimensions.len();
    let start = ev.candidates[ev.best()].unit.clone();
    let dim = ev.dimensions[j].clone();
    let fitted = dim.value(start[j]);
    let mut walked = vec![(start[j], ev.candidates[ev.best()].discrepancy)];
    for direction in [-1.0, 1.0] {
        let mut from = start.clone();
        for k in 1..=MAX_INTEGER_STEPS {
            let value = fitted + direction * k as f64;
            if value < dim.low || value > dim.high {
                break;
            }
            let unit = dim.unit(value);
            from = conditional_minimum(ev, j, unit, &from, steps)?;
            let profile = ev.at_unit(&from);
            walked.push((unit, profile.discrepancy));
            let best = &ev.candidates[ev.best()];
            if excess(profile, best) > WALK_CUTS * cut(best.discrepancy, observations, d) {
                break;
            }
        }
    }
    Ok(walked)
}

/// The continuous unknown `j`'s profile: steps of 1, 4, 16, … design steps on each
/// side until past [`WALK_CUTS`] cuts or the range's end, then the stretch holding the
/// cut's crossing bisected [`BISECTIONS`] times.
fn walk_continuous(ev: &mut Evaluator, j: usize, observations: usize, steps: &[f64]) -> Result<Vec<(f64, f64)>> {
    let d = ev.dimensions.len();
    let start = ev.candidates[ev.best()].unit.clone();
    let centre = start[j];
    let mut walked = vec![(centre, ev.candidates[ev.best()].discrepancy)];
    for direction in [-1.0, 1.0] {
        // (unit, D, the optimum of the others there) along this side, nearest first.
        let mut side: Vec<(f64, f64, Vec<f64>)> = vec![(centre, walked[0].1, start.clone())];
        let mut offset = steps[j];
        for _ in 0..MAX_WIDENINGS {
            let unit = (centre + direction * offset).clamp(0.0, 1.0);
            if unit == side[side.len() - 1].0 {
                break;
            }
            let from = conditional_minimum(ev, j, unit, &side[side.len() - 1].2, steps)?;
            let profile = ev.at_unit(&from).discrepancy;
            let beyond = {
                let best = &ev.candidates[ev.best()];
                excess(ev.at_unit(&from), best) > WALK_CUTS * cut(best.discrepancy, observations, d)
            };
            side.push((unit, profile, from));
            if beyond {
                break;
            }
            offset *= GROWTH;
        }
        for _ in 0..BISECTIONS {
            let best = &ev.candidates[ev.best()];
            let level = cut(best.discrepancy, observations, d);
            let Some(k) = (1..side.len()).find(|&k| excess(ev.at_unit(&side[k].2), best) > level) else { break };
            let (inside, outside) = (&side[k - 1], &side[k]);
            let unit = (inside.0 + outside.0) / 2.0;
            let from = conditional_minimum(ev, j, unit, &inside.2, steps)?;
            let profile = ev.at_unit(&from).discrepancy;
            side.insert(k, (unit, profile, from));
        }
        walked.extend(side.into_iter().skip(1).map(|(unit, profile, _)| (unit, profile)));
    }
    Ok(walked)
}

/// Each unknown's estimate at the best candidate, the residuals' scatter taken as
/// `widening` times that of independent intervals.
pub(super) fn estimates(
    dimensions: &[Dimension],
    candidates: &[Candidate],
    best: usize,
    bases: &[Basis],
    observations: usize,
    widening: f64,
) -> Vec<Estimate> {
    let best = &candidates[best];
    let d = dimensions.len();
    bases
        .iter()
        .zip(dimensions)
        .enumerate()
        .map(|(j, (basis, dim))| {
            let value = best.values[j];
            match basis {
                Basis::None => Estimate::unidentified(value),
                Basis::Curvature { inverse, step, noise } => {
                    // Production's scatter (widened for autocorrelation) and the simulation's.
                    let variance =
                        2.0 * best.discrepancy / (observations - d) as f64 * inverse * widening * widening + noise;
                    let per_unit = match dim.scale {
                        Scale::Linear => dim.high - dim.low,
                        Scale::Log => value * (dim.high / dim.low).ln(),
                        Scale::Integer => dim.high - dim.low + 1.0,
                    };
                    let sd = variance.max(0.0).sqrt() * step * per_unit;
                    Estimate {
                        interval: Some((value - 1.96 * sd, value + 1.96 * sd)),
                        sd: Some(sd),
                        method: Some(Method::Curvature),
                        ..Estimate::unidentified(value)
                    }
                }
                Basis::Profile { walked } => {
                    let level = cut(best.discrepancy, observations, d) * widening * widening;
                    profile_interval(dim, candidates, j, best, walked, level)
                }
            }
        })
        .collect()
}

/// Unknown `j`'s profile interval: from the best outward over the walked points (each
/// at the least D any candidate with its value has, as its [`excess`] over the best),
/// to where the profile passes `level` — an integer's last value inside, a continuous
/// unknown's crossing interpolated between the points either side.
fn profile_interval(
    dim: &Dimension,
    candidates: &[Candidate],
    j: usize,
    best: &Candidate,
    walked: &[(f64, f64)],
    level: f64,
) -> Estimate {
    // Each value's least discrepancy, as its excess over the best's.
    let profile_at = |unit: f64| {
        let value = dim.value(unit);
        let least = candidates
            .iter()
            .filter(|c| c.values[j] == value)
            .min_by(|a, b| a.discrepancy.total_cmp(&b.discrepancy))
            .expect("a walked value was evaluated");
        excess(least, best)
    };
    let mut units: Vec<f64> = walked.iter().map(|w| w.0).chain(std::iter::once(best.unit[j])).collect();
    units.sort_by(f64::total_cmp);
    units.dedup_by(|a, b| dim.value(*a) == dim.value(*b));
    let points: Vec<(f64, f64)> = units.iter().map(|&u| (u, profile_at(u))).collect();
    let fitted = points.iter().position(|p| dim.value(p.0) == best.values[j]).expect("the best is a point");
    let mut ends = [best.values[j]; 2];
    let (mut open, mut at_range_end) = ([false; 2], [false; 2]);
    for (side, order) in [(0, -1isize), (1, 1)] {
        let mut inside = fitted;
        loop {
            let next = inside as isize + order;
            if next < 0 || next >= points.len() as isize {
                open[side] = true;
                at_range_end[side] = if side == 0 {
                    dim.value(points[inside].0) <= dim.low
                } else {
                    dim.value(points[inside].0) >= dim.high
                };
                ends[side] = dim.value(points[inside].0);
                break;
            }
            let next = next as usize;
            if points[next].1 > level {
                ends[side] = if dim.scale == Scale::Integer {
                    dim.value(points[inside].0)
                } else {
                    let (a, b) = (points[inside], points[next]);
                    let t = ((level - a.1) / (b.1 - a.1)).clamp(0.0, 1.0);
                    dim.value(a.0 + t * (b.0 - a.0))
                };
                break;
            }
            inside = next;
        }
    }
    let flat = at_range_end[0] && at_range_end[1];
    Estimate {
        value: best.values[j],
        interval: (!flat).then_some((ends[0], ends[1])),
        sd: None,
        method: Some(Method::Profile),
        open,
        at_range_end,
    }
}

#[cfg(test)]
mod tests {
    use super::fit as search;
    use super::*;
    use stampede_engine::{RngStream, StreamPurpose};

    fn dim(text: &str) -> Dimension {
        Dimension::parse(text).unwrap()
    }

    /// A chain seen over 16 intervals at loads from 100 to 300 requests/s: an api
    /// (10 ms × scale of work a request) calling a db (40 ms a call) with some
    /// probability; per interval the api's busy workers, the db's busy workers
    /// (saturating at its worker count) and the db's mean latency (work/(1 − ρ),
    /// exploding as ρ nears 1: the cliff of too few workers). Unknowns: the api's
    /// scale, the db's workers (an integer), the call probability.
    fn predict(theta: &[f64], load: f64) -> [f64; 3] {
        let (scale, workers, probability) = (theta[0], theta[1], theta[2]);
        let db_load = load * probability * 0.04;
        let rho = db_load / workers;
        let latency = if rho < 0.98 { 0.04 / (1.0 - rho) } else { 0.04 * 50.0 * rho };
        [load * 0.01 * scale, db_load.min(workers), latency]
    }

    const LOADS: [f64; 16] = [
        100.0, 150.0, 200.0, 250.0, 300.0, 120.0, 180.0, 240.0, 290.0, 130.0, 210.0, 270.0, 110.0, 160.0, 230.0, 280.0,
    ];
    const TRUTH: [f64; 3] = [0.7, 6.0, 0.4];

    /// One seed's fit: production is the truth with 3% relative normal noise.
    fn fit_seed(seed: u64) -> Vec<Estimate> {
        let mut rng = RngStream::derive(seed, 0, StreamPurpose::named("calibrate.intervals.test"));
        let mut normal = || {
            let (u, v) = (rng.uniform_open01(), rng.uniform01());
            (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
        };
        let observed: Vec<[f64; 3]> =
            LOADS.iter().map(|&load| predict(&TRUTH, load).map(|m| m * (1.0 + 0.03 * normal()))).collect();
        let dims = [dim("scale=0.3..2"), dim("workers=2..16:int"), dim("p=0.05..0.9")];
        let mut evaluate = |candidates: &[Vec<f64>]| {
            Ok(candidates
                .iter()
                .map(|theta| {
                    let mut sum = 0.0;
                    for (&load, o) in LOADS.iter().zip(&observed) {
                        for (m, o) in predict(theta, load).iter().zip(o) {
                            sum += ((m - o) / o).powi(2);
                        }
                    }
                    (sum / (3 * LOADS.len()) as f64).into()
                })
                .collect())
        };
        search(&dims, Shape::default_for(3), 3 * LOADS.len(), &mut evaluate).unwrap().estimates
    }

    /// The defect: with an integer among the unknowns every unknown lost its
    /// interval. Over 200 seeds of a hidden truth, every unknown has one every time,
    /// the integer's by its profile and the others' by their curvature (by their profile
    /// in 19 of 400, and 70 of 2,000, where it disagreed at the curvature's ends), and each
    /// covers the truth in 88–99% of seeds (measured: 186 and 179 of 200, and 929 and
    /// 929 of 1,000; a cut half as wide could cover at most 83%, ±1.39 standard
    /// errors); the integer's set is at most three workers wide (so it does not cover
    /// by being the whole range).
    #[test]
    fn an_integer_unknown_keeps_every_interval_and_each_covers_the_truth() {
        let seeds = 200;
        let mut covered = [0usize; 3];
        let mut methods = [0usize; 2];
        for seed in 0..seeds {
            let estimates = fit_seed(seed);
            for (j, estimate) in estimates.iter().enumerate() {
                let (lo, hi) = estimate.interval.unwrap_or_else(|| panic!("seed {seed}: {j} {estimate:?}"));
                // A continuous unknown's is its curvature unless the profile at the
                // curvature interval's ends disagrees (here: where the workers may move).
                if j == 1 {
                    assert_eq!(estimate.method, Some(Method::Profile), "seed {seed}: {estimate:?}");
                } else {
                    methods[usize::from(estimate.method == Some(Method::Profile))] += 1;
                }
                if lo <= TRUTH[j] && TRUTH[j] <= hi {
                    covered[j] += 1;
                }
            }
            let (lo, hi) = estimates[1].interval.unwrap();
            assert!(hi - lo <= 2.0, "seed {seed}: workers [{lo}, {hi}]");
        }
        eprintln!("covered {covered:?} of {seeds}; continuous by curvature {}, by profile {}", methods[0], methods[1]);
        // A smooth surface keeps its curvature: the check at the ends is not a profile for all.
        assert!(methods[0] >= 9 * methods[1], "curvature {}, profile {}", methods[0], methods[1]);
        for (j, &c) in covered.iter().enumerate() {
            let share = c as f64 / seeds as f64;
            assert!((0.88..=0.99).contains(&share) || (j == 1 && share > 0.99), "unknown {j}: covered {c} of {seeds}");
        }
    }

    /// Where a quadratic describes the discrepancy the profile's cut gives the
    /// curvature's interval: the same 1-D quadratic, its profile walked and bisected,
    /// lands within a tenth of a standard error of ±1.96 standard errors.
    #[test]
    fn the_profile_of_a_quadratic_is_its_curvature_interval() {
        let dims = [dim("a=0..2")];
        let (observations, d_min, curvature) = (100, 0.01, 0.5);
        let mut evaluate = |candidates: &[Vec<f64>]| {
            Ok(candidates.iter().map(|v| (d_min + curvature * (v[0] - 1.2).powi(2)).into()).collect())
        };
        let mut ev = Evaluator::new(&dims, &mut evaluate);
        ev.run(vec![vec![0.6]], "design").unwrap();
        let walked = walk_continuous(&mut ev, 0, observations, &[0.01]).unwrap();
        let best = ev.best();
        let bases = [Basis::Profile { walked }];
        let profile = &estimates(&dims, &ev.candidates, best, &bases, observations, 1.0)[0];
        // D = D_min + c·(a − 1.2)²: the Hessian 2c in a's units; sd² = 2·D_min/(N − 1)/(2c).
        let sd = (2.0 * d_min / (observations - 1) as f64 / (2.0 * curvature)).sqrt();
        let (lo, hi) = profile.interval.unwrap();
        assert!(
            (lo - (1.2 - 1.96 * sd)).abs() < 0.1 * sd && (hi - (1.2 + 1.96 * sd)).abs() < 0.1 * sd,
            "{lo}..{hi} sd {sd}"
        );
        // Widening by 2 quadruples the cut: the interval doubles (to the
        // interpolation's error between walked points, which were bisected near the cut).
        let wide = &estimates(&dims, &ev.candidates, best, &bases, observations, 2.0)[0];
        let (wlo, whi) = wide.interval.unwrap();
        assert!(((whi - wlo) / (hi - lo) - 2.0).abs() < 0.15, "{wlo}..{whi} against {lo}..{hi}");
    }

    /// A continuous unknown the discrepancy ignores, beside an integer: it is flat
    /// to both ends of its range (not identified), and the integer keeps its set.
    #[test]
    fn an_unidentified_unknown_leaves_the_others_intervals() {
        let dims = [dim("a=0..1"), dim("workers=1..20:int")];
        let mut evaluate = |candidates: &[Vec<f64>]| {
            Ok(candidates.iter().map(|v| (0.01 + if v[1] < 7.0 { 1.0 } else { 0.002 * (v[1] - 7.0) }).into()).collect())
        };
        let found = search(&dims, Shape::default_for(2), 60, &mut evaluate).unwrap();
        assert_eq!(found.estimates[0].interval, None, "{:?}", found.estimates[0]);
        assert_eq!(found.estimates[0].at_range_end, [true, true]);
        // The cliff below 7; above it 0.002 a worker against a cut of 3.84·0.01/58 ≈ 0.00066.
        assert_eq!(found.estimates[1].value, 7.0);
        assert_eq!(found.estimates[1].interval, Some((7.0, 7.0)), "{:?}", found.estimates[1]);
    }
}
