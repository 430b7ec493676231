//! Prometheus buckets as a CDF whose mean is the histogram's own (`_sum / _count`).
//!
//! A bucket says how many observations fell in `(a, b]`, not where. Spreading them
//! evenly (linear interpolation) puts each bucket's mean at its middle; latency
//! densities fall inside most buckets, so that overstates the mean — by 7% on a
//! realistic export (0.025 s to 10 s buckets), enough that an exponential tail fitted
//! to the remainder of `_sum` had no room left. Here a bucket's observations are spread
//! in log time (buckets grow geometrically and a latency's density is smooth in log
//! time; the first bucket, from 0, linearly), each bucket tilted by the slope of the
//! log density across its neighbours (rising left of the mode, falling right of it),
//! and every tilt then shifted by one amount `s` chosen so that the whole mean is
//! `_sum / _count` (a tilt `t` makes the density over a bucket's relative position
//! fall by `e^-t`):
//! - the share above the last finite bound (`+Inf`) is, with `tail = "cap"`, put at
//!   that bound; with `tail = "exponential"`, an exponential beyond it whose density
//!   continues the last bucket's at the bound (a density without a jump), so its mean
//!   follows from `s`;
//! - without `_sum`, or when no shift in [−30, 30] reaches the mean (a `_sum` that
//!   contradicts the buckets), `s = 0` (the neighbours' tilts alone) and the tail, if
//!   exponential, takes the rest of `_sum`.
//!
//! Invariants: knots rise in value and probability from (0, 0) to probability 1; with
//! a tilt found, the knots' piecewise-linear CDF has the mean `_sum / _count` within
//! the interpolation's own error (the tests bound it).

use super::sources::Buckets;

/// Knots inside each bucket (the quantile table interpolates between them linearly;
/// 8 keep the tests' lognormals within 1% in mean and quantiles).
const KNOTS_PER_BUCKET: u32 = 8;

/// The tilts searched.
const TILT: (f64, f64) = (-30.0, 30.0);

/// The relative mean of a bucket of tilt `s`: where, from 0 to 1, its mass's mean is.
fn relative_mean(s: f64) -> f64 {
    if s.abs() < 1e-6 {
        0.5 - s / 12.0
    } else {
        1.0 / s - 1.0 / s.exp_m1()
    }
}

/// The CDF within a bucket of tilt `s` at relative position `u` ∈ [0, 1].
fn relative_cdf(s: f64, u: f64) -> f64 {
    if s.abs() < 1e-6 {
        u
    } else {
        (-s * u).exp_m1() / (-s).exp_m1()
    }
}

/// The density at the top of a bucket of tilt `s`, per unit of probability and width.
fn relative_top_density(s: f64) -> f64 {
    if s.abs() < 1e-6 {
        1.0 - s / 2.0
    } else {
        s * (-s).exp() / -(-s).exp_m1()
    }
}

/// A finite bucket: (low, high], its probability, and the tilt its neighbours give
/// its density (see [`local_tilts`]).
#[derive(Clone, Copy, Debug)]
struct Part {
    a: f64,
    b: f64,
    p: f64,
    local: f64,
}

/// The finite buckets, the share above the last bound, and that bound.
fn finite(buckets: &Buckets) -> (Vec<Part>, f64, f64) {
    let total = buckets.bounds.last().expect("checked: a +Inf bucket").1;
    let mut parts = Vec::new();
    let (mut low, mut below) = (0.0, 0.0);
    for &(le, count) in buckets.bounds.iter().filter(|(le, _)| le.is_finite()) {
        parts.push(Part { a: low, b: le, p: (count - below) / total, local: 0.0 });
        (low, below) = (le, count);
    }
    local_tilts(&mut parts);
    (parts, (total - below) / total, low)
}

/// Each log-spaced bucket's tilt from the slope of the log density across its
/// neighbours (in log time): a bucket left of the mode rises, one right of it falls.
/// The first bucket (from 0) and buckets without non-empty neighbours keep 0.
fn local_tilts(parts: &mut [Part]) {
    let point = |part: &Part| {
        (part.a > 0.0 && part.p > 0.0).then(|| {
            let width = (part.b / part.a).ln();
            ((part.a.ln() + part.b.ln()) / 2.0, (part.p / width).ln())
        })
    };
    let points: Vec<Option<(f64, f64)>> = parts.iter().map(point).collect();
    for i in 0..parts.len() {
        let Some(here) = points[i] else { continue };
        let before = i.checked_sub(1).and_then(|j| points[j]);
        let after = points.get(i + 1).copied().flatten();
        let (left, right) = match (before, after) {
            (Some(l), Some(r)) => (l, r),
            (Some(l), None) => (l, here),
            (None, Some(r)) => (here, r),
            (None, None) => continue,
        };
        let slope = (right.1 - left.1) / (right.0 - left.0);
        let width = (parts[i].b / parts[i].a).ln();
        parts[i].local = (-slope * width).clamp(-8.0, 8.0);
    }
}

/// Where relative position `u` of bucket (a, b] is: in log space when a > 0 (latency
/// buckets grow geometrically, and a latency's density is smooth in log time), linearly
/// in the first bucket, which starts at 0.
fn position(a: f64, b: f64, u: f64) -> f64 {
    if a > 0.0 {
        a * (b / a).powf(u)
    } else {
        b * u
    }
}

/// The mean of bucket (a, b] at tilt `s` (the tilt applies to the relative position).
fn bucket_mean(a: f64, b: f64, s: f64) -> f64 {
    if a <= 0.0 {
        return b * relative_mean(s);
    }
    // E[a r^U] with U of density s e^{-su} / (1 − e^{-s}) on [0, 1], r = b / a.
    let k = (b / a).ln() - s;
    let growth = if k.abs() < 1e-9 { 1.0 } else { k.exp_m1() / k };
    let scale = if s.abs() < 1e-9 { 1.0 } else { s / -(-s).exp_m1() };
    a * scale * growth
}

/// The density at `b`, the top of bucket (a, b] holding probability `p`, at tilt `s`.
fn top_density(a: f64, b: f64, p: f64, s: f64) -> f64 {
    let per_position = p * relative_top_density(s);
    if a > 0.0 {
        per_position / (b * (b / a).ln())
    } else {
        per_position / b
    }
}

/// The mean of the buckets with every tilt moved by `shift`, with the tail's mean
/// beyond the last bound `beyond` (or, for an exponential tail, `None`: continued from
/// the last bucket).
fn mean_at(parts: &[Part], tail: f64, last: f64, shift: f64, beyond: Option<f64>) -> f64 {
    let inside: f64 = parts.iter().map(|part| part.p * bucket_mean(part.a, part.b, part.local + shift)).sum();
    let beyond = beyond.unwrap_or_else(|| continued_tail_mean(parts, tail, shift));
    inside + tail * (last + beyond)
}

/// An exponential tail's mean beyond the last bound whose density there equals the
/// last non-empty bucket's top density (its tilt moved by `shift`).
fn continued_tail_mean(parts: &[Part], tail: f64, shift: f64) -> f64 {
    let Some(part) = parts.iter().rev().find(|part| part.p > 0.0) else { return f64::NAN };
    tail / top_density(part.a, part.b, part.p, part.local + shift)
}

/// The tilt in [`TILT`] at which `mean(s)` equals `target`, by a scan for a sign
/// change then bisection; `None` when there is none.
fn solve(mean: impl Fn(f64) -> f64, target: f64) -> Option<f64> {
    let steps = 240;
    let at = |i: u32| TILT.0 + (TILT.1 - TILT.0) * f64::from(i) / f64::from(steps);
    let gap = |s: f64| mean(s) - target;
    // The root nearest even (s = 0) when there are several.
    let mut best: Option<(f64, f64)> = None;
    for i in 0..steps {
        let (lo, hi) = (at(i), at(i + 1));
        let (glo, ghi) = (gap(lo), gap(hi));
        if !(glo.is_finite() && ghi.is_finite()) || glo.signum() == ghi.signum() && glo != 0.0 {
            continue;
        }
        let (mut lo, mut hi, mut glo) = (lo, hi, glo);
        for _ in 0..60 {
            let mid = (lo + hi) / 2.0;
            let gmid = gap(mid);
            if gmid.signum() == glo.signum() && gmid != 0.0 {
                (lo, glo) = (mid, gmid);
            } else {
                hi = mid;
            }
        }
        let root = (lo + hi) / 2.0;
        if best.is_none_or(|(b, _)| root.abs() < b.abs()) {
            best = Some((root, gap(root)));
        }
    }
    best.map(|(root, _)| root)
}

/// CDF knots from Prometheus buckets (see the module doc); `tail` is `cap` or
/// `exponential`.
pub fn bucket_knots(buckets: &Buckets, tail: &str) -> std::result::Result<Vec<(f64, f64)>, String> {
    let knots = knots(buckets, tail)?;
    debug_assert!(knots.first() == Some(&(0.0, 0.0)) && knots.last().is_some_and(|k| k.1 == 1.0));
    debug_assert!(knots.windows(2).all(|w| w[1].0 >= w[0].0 && w[1].1 >= w[0].1), "knots rise");
    Ok(knots)
}

fn knots(buckets: &Buckets, tail: &str) -> std::result::Result<Vec<(f64, f64)>, String> {
    if !matches!(tail, "cap" | "exponential") {
        return Err(format!("tail = {tail:?}: allowed: \"cap\", \"exponential\""));
    }
    let (parts, tail_share, last) = finite(buckets);
    let exponential = tail == "exponential" && tail_share > 0.0;
    let target = buckets.sum.map(|sum| sum / buckets.bounds.last().expect("a +Inf bucket").1);
    if exponential && target.is_none() {
        return Err(
            "tail = \"exponential\" needs the histogram's _sum (to set the tail's mean); the file has none: use tail = \"cap\""
                .into(),
        );
    }
    let capped = (!exponential).then_some(0.0);
    let tilt = target.and_then(|target| solve(|s| mean_at(&parts, tail_share, last, s, capped), target));
    let s = tilt.unwrap_or(0.0);
    let beyond = match (exponential, tilt, target) {
        (false, ..) => 0.0,
        (true, Some(_), _) => continued_tail_mean(&parts, tail_share, s),
        // No tilt fits: even buckets, and the tail takes what is left of the mean.
        (true, None, Some(target)) => {
            let beyond = (target - mean_at(&parts, tail_share, last, 0.0, Some(0.0))) / tail_share;
            if !(beyond > 0.0 && beyond.is_finite()) {
                return Err(format!(
                    "tail = \"exponential\": _sum / _count = {target:.6} leaves no positive mean for the {:.2}% beyond \
                     le={last}; use tail = \"cap\"",
                    100.0 * tail_share
                ));
            }
            beyond
        }
        (true, None, None) => unreachable!("checked: an exponential tail has a _sum"),
    };
    let mut knots = vec![(0.0, 0.0)];
    let mut below = 0.0;
    for &Part { a, b, p, local } in &parts {
        let tilt = local + s;
        if p > 0.0 && (tilt != 0.0 || a > 0.0) {
            for k in 1..KNOTS_PER_BUCKET {
                let u = f64::from(k) / f64::from(KNOTS_PER_BUCKET);
                knots.push((position(a, b, u), below + p * relative_cdf(tilt, u)));
            }
        }
        below += p;
        knots.push((b, below));
    }
    if tail_share <= 0.0 {
        knots.last_mut().expect("a knot").1 = 1.0;
        return Ok(knots);
    }
    if !exponential {
        knots.push((last, 1.0));
        return Ok(knots);
    }
    // Knots along the exponential's CDF up to where the table's even probability grid
    // can still resolve it: half a grid cell of the whole distribution short of 1 (a
    // point further out would be drawn with a whole cell's probability).
    let cell = 1.0 / (stampede_engine::components::distribution::QuantileTable::MAX_POINTS - 1) as f64;
    let end = (1.0 - cell / (2.0 * tail_share)).clamp(0.5, 1.0 - 1e-6);
    let base = 1.0 - tail_share;
    for k in 1..=64 {
        let q = 1.0 - (1.0 - end).powf(f64::from(k) / 64.0);
        knots.push((last - beyond * (1.0 - q).ln(), base + tail_share * q));
    }
    knots.last_mut().expect("a knot").1 = 1.0;
    Ok(knots)
}

#[cfg(test)]
mod tests {
    use super::*;
    use stampede_engine::components::distribution::QuantileTable;
    use statrs::distribution::{ContinuousCDF, LogNormal};

    /// Prometheus' default buckets and a realistic latency export's.
    const DEFAULT: [f64; 11] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];

    /// The expected buckets of a million observations of `dist`, with its exact `_sum`.
    fn bucketed(dist: &LogNormal, mean: f64, bounds: &[f64]) -> Buckets {
        let n = 1e6;
        let mut counts: Vec<(f64, f64)> = bounds.iter().map(|&le| (le, n * dist.cdf(le))).collect();
        counts.push((f64::INFINITY, n));
        Buckets { bounds: counts, sum: Some(n * mean) }
    }

    /// The even spread (linear inside buckets, the tail capped): what was done before.
    fn even_knots(buckets: &Buckets) -> Vec<(f64, f64)> {
        let total = buckets.bounds.last().unwrap().1;
        let mut knots = vec![(0.0, 0.0)];
        knots.extend(buckets.bounds.iter().filter(|(le, _)| le.is_finite()).map(|&(le, c)| (le, c / total)));
        let last = knots.last().unwrap().0;
        knots.push((last, 1.0));
        knots
    }

    fn lognormal(median: f64, sigma: f64) -> (LogNormal, f64) {
        (LogNormal::new(median.ln(), sigma).unwrap(), median * (sigma * sigma / 2.0).exp())
    }

    /// On a known distribution (a lognormal latency, median 80 ms, σ = 1, in the default
    /// buckets): the mean is `_sum / _count` (the even spread overstates it, the
    /// reported defect), and the quantiles a claim reads are closer to the truth than
    /// the even spread's. The figures the README quotes.
    #[test]
    fn the_mean_is_the_histograms_own_and_quantiles_improve_on_a_known_lognormal() {
        let (dist, mean) = lognormal(0.08, 1.0);
        let buckets = bucketed(&dist, mean, &DEFAULT);
        let even = QuantileTable::from_cdf(&even_knots(&buckets)).unwrap();
        for tail in ["cap", "exponential"] {
            let table = QuantileTable::from_cdf(&bucket_knots(&buckets, tail).unwrap()).unwrap();
            let error = |q: f64, t: &QuantileTable| t.quantile(q) / dist.inverse_cdf(q) - 1.0;
            assert!((table.mean() / mean - 1.0).abs() < 0.01, "{tail}: mean {} vs {mean}", table.mean());
            for q in [0.5, 0.9, 0.99] {
                assert!(error(q, &table).abs() < 0.01, "{tail}: p{q} off by {:.4}", error(q, &table));
            }
        }
        // The even spread this replaces: the mean 11% high, p90 and p99 12–13% high.
        let error = |q: f64| even.quantile(q) / dist.inverse_cdf(q) - 1.0;
        assert!(even.mean() / mean - 1.0 > 0.1 && error(0.9) > 0.1 && error(0.99) > 0.1, "{}", even.mean() / mean);
    }

    /// An export like the report's: buckets 0.025 s to 10 s, a lognormal (median 0.1 s,
    /// σ = 1.5) with 0.1% above 10 s: the even spread left no positive mean for an
    /// exponential tail; the shapes do, and p99.9 lands near the truth.
    #[test]
    fn an_exponential_tail_fits_where_the_even_spread_refused() {
        let (dist, mean) = lognormal(0.1, 1.5);
        let bounds = [0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];
        let buckets = bucketed(&dist, mean, &bounds);
        let tail_share = 1.0 - dist.cdf(10.0);
        assert!(tail_share > 0.001, "{tail_share}");
        // The even spread put each bucket's mass at its middle: no mean left for a tail.
        let (parts, _, last) = finite(&buckets);
        let even_inside: f64 = parts.iter().map(|part| part.p * (part.a + part.b) / 2.0).sum();
        assert!((mean - even_inside) / tail_share - last <= 0.0, "the even spread refused this export");
        let knots = bucket_knots(&buckets, "exponential").expect("a tail fits");
        assert!(knots.windows(2).all(|w| w[1].0 >= w[0].0 && w[1].1 >= w[0].1), "knots rise");
        let table = QuantileTable::from_cdf(&knots).unwrap();
        assert!((table.mean() / mean - 1.0).abs() < 0.005, "mean {} vs {mean}", table.mean());
        let p999 = table.quantile(0.999) / dist.inverse_cdf(0.999);
        assert!((p999 - 1.0).abs() < 0.02, "p99.9 ratio {p999}");
    }

    #[test]
    fn cap_or_fit_the_tail_and_refuse_without_a_sum() {
        let buckets = Buckets { bounds: vec![(0.1, 50.0), (0.5, 90.0), (f64::INFINITY, 100.0)], sum: None };
        let plain = bucket_knots(&buckets, "cap").unwrap();
        assert_eq!(plain[..2], [(0.0, 0.0), (0.1, 0.5)], "the first bucket, from 0, is linear");
        assert_eq!(plain.last(), Some(&(0.5, 1.0)), "the share above 0.5 s capped at it");
        assert!(plain.windows(2).all(|w| w[1].0 >= w[0].0 && w[1].1 >= w[0].1), "knots rise: {plain:?}");
        let mid = plain.iter().find(|(_, p)| (p - 0.7).abs() < 1e-9).unwrap().0;
        assert!((mid - (0.1f64 * 0.5).sqrt()).abs() < 1e-9, "the middle of (0.1, 0.5] in log time: {mid}");
        assert!(bucket_knots(&buckets, "exponential").unwrap_err().contains("needs the histogram's _sum"));
        assert!(bucket_knots(&buckets, "pareto").unwrap_err().contains("allowed: \"cap\", \"exponential\""));
        // A _sum that no tilt reaches (beyond every bucket's top): the shapes as without one.
        let impossible = Buckets { sum: Some(60.0), ..buckets.clone() };
        assert_eq!(bucket_knots(&impossible, "cap").unwrap(), plain);
        // With _sum, the tilt is found and the mean is _sum / _count.
        let with_sum = Buckets { sum: Some(15.0), ..buckets };
        let table = QuantileTable::from_cdf(&bucket_knots(&with_sum, "cap").unwrap()).unwrap();
        assert!((table.mean() - 0.15).abs() < 0.003, "{}", table.mean());
    }
}
