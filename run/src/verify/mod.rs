//! `stampede verify`: checks a run against the scenario's `[[verify]]` claims —
//! bounds on a metric's mean or interval end, on a quantile across replicas, or on
//! the fraction of replicas meeting a bound (with its Wilson interval), at a grid
//! point, fixed or relative to another grid point's — for nightly CI jobs. Claims
//! whose grid points a narrowed grid no longer has are skipped and reported.
//!
//! This module decides the verdicts and owns the statistics; [`verdicts`] writes them
//! for people (PASS/FAIL lines), for programs (`verify.json`) and for CI (JUnit XML,
//! GitHub annotations).

pub mod compare;
pub mod verdicts;

use crate::report::{PointReport, RunReport};
use stampede_scenario::scenario::claims::{Assertion, Relative, Statistic};

/// The 0.975 quantile of the standard normal, for Wilson intervals.
const Z_975: f64 = 1.959_963_984_540_054;

/// One claim's outcome.
#[derive(Clone, Debug, PartialEq)]
pub struct Check {
    /// The claim's position in the scenario's `[[verify]]` list.
    pub claim: usize,
    pub assertion: Assertion,
    /// The grid point the claim is about, named by its axis values: `#0 (retry.policy = "naive")`.
    pub point: String,
    /// The statistic's value (NaN when undefined, which fails).
    pub value: f64,
    pub mean: f64,
    pub ci_lo: f64,
    pub ci_hi: f64,
    pub passed: bool,
    /// The relative bounds, spelt out with the other point's value.
    pub relative_bounds: Vec<String>,
    /// What was measured for the claimed statistic, with its own interval.
    pub measured: Measured,
    /// (defined, replicas) when the metric is undefined in some replicas: the mean
    /// and its interval are over the defined ones.
    pub covered: Option<(u64, u32)>,
}

/// The claimed statistic as measured: for a fraction, the fraction itself and its
/// Wilson interval; for a quantile across replicas, its distribution-free
/// order-statistic interval; for the mean and its interval ends, the Student-t
/// interval of the mean.
#[derive(Clone, Debug, PartialEq)]
pub enum Measured {
    Mean,
    Fraction {
        successes: usize,
        replicas: usize,
        fraction: f64,
        lo: f64,
        hi: f64,
    },
    /// `lo`/`hi` are NaN where the replicas are too few for that side of a 95% interval.
    Quantile {
        replicas: usize,
        lo: f64,
        hi: f64,
    },
    /// A latency quantile pooled over replicas, with its sectioning interval over ten
    /// batches of replicas (NaN with fewer than two batches holding values).
    Pooled {
        lo: f64,
        hi: f64,
    },
}

/// The `q` quantile of `values` (nearest rank; NaN ranks above every number).
pub fn replica_quantile(values: &[f64], q: f64) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(|a, b| match (a.is_nan(), b.is_nan()) {
        (true, true) => std::cmp::Ordering::Equal,
        (true, false) => std::cmp::Ordering::Greater,
        (false, true) => std::cmp::Ordering::Less,
        (false, false) => a.total_cmp(b),
    });
    let rank = ((q * values.len() as f64).ceil() as usize).clamp(1, values.len());
    sorted[rank - 1]
}

/// The Wilson score interval (95%) of `successes` out of `n` ((0, 1) with none).
pub fn wilson(successes: usize, n: usize) -> (f64, f64) {
    crate::stats::wilson(successes, n, Z_975)
}

/// The replicas' values of metric `index` at `point` (those a claim reads).
fn replica_values(point: &PointReport, index: usize) -> &[f64] {
    point.replica_values.get(&index).map(Vec::as_slice).unwrap_or_default()
}

/// How many of `values` meet `claim`'s per-replica bounds.
fn successes(values: &[f64], claim: &Assertion) -> usize {
    let meets =
        |v: &&f64| claim.replica_at_least.is_none_or(|b| **v >= b) && claim.replica_at_most.is_none_or(|b| **v <= b);
    values.iter().filter(meets).count()
}

/// The value of `statistic` of metric `index` at `point`, for `claim`'s per-replica bounds.
fn pick(point: &PointReport, index: usize, statistic: Statistic, claim: &Assertion) -> f64 {
    let summary = &point.summaries[index];
    match statistic {
        Statistic::Mean => summary.mean,
        Statistic::CiLo => summary.ci_lo,
        Statistic::CiHi => summary.ci_hi,
        Statistic::Fraction | Statistic::FractionCiLo | Statistic::FractionCiHi => {
            let values = replica_values(point, index);
            let successes = successes(values, claim);
            let (lo, hi) = wilson(successes, values.len());
            match statistic {
                Statistic::Fraction => successes as f64 / values.len() as f64,
                Statistic::FractionCiLo => lo,
                _ => hi,
            }
        }
        quantile => replica_quantile(
            replica_values(point, index),
            quantile.quantile().expect("the other statistics are quantiles"),
        ),
    }
}

/// What `claim`'s statistic measured at `point`, with its own interval.
fn measured(point: &PointReport, index: usize, claim: &Assertion) -> Measured {
    let values = replica_values(point, index);
    if claim.statistic.is_fraction() {
        let successes = successes(values, claim);
        let (lo, hi) = wilson(successes, values.len());
        let fraction = successes as f64 / values.len() as f64;
        Measured::Fraction { successes, replicas: values.len(), fraction, lo, hi }
    } else if let Some(q) = claim.statistic.quantile() {
        let (lo, hi) = quantile_interval(values, q);
        Measured::Quantile { replicas: values.len(), lo, hi }
    } else {
        Measured::Mean
    }
}

/// The distribution-free 95% interval of the `q` quantile of `values`: the order
/// statistics X(l) ≤ X(u) with P(l ≤ B < u) ≥ 95% for B ~ Binomial(n, q), the number
/// of replicas below the true quantile (the usual construction, e.g. Hahn & Meeker,
/// *Statistical Intervals*, §5.2), taking 2.5% from each side. A side the replicas are
/// too few for is NaN (with n = 20, no upper bound exists for p95).
pub fn quantile_interval(values: &[f64], q: f64) -> (f64, f64) {
    let n = values.len();
    if n == 0 {
        return (f64::NAN, f64::NAN);
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(|a, b| a.total_cmp(b));
    let cdf = binomial_cdf(n, q);
    // cdf[k] = P(B ≤ k). Lower rank l (1-based): the largest with P(B ≤ l − 1) ≤ 0.025.
    let lower = (1..=n).rev().find(|&l| cdf[l - 1] <= 0.025);
    // Upper rank u: the smallest with P(B ≤ u − 1) ≥ 0.975.
    let upper = (1..=n).find(|&u| cdf[u - 1] >= 0.975);
    let at = |rank: Option<usize>| rank.map_or(f64::NAN, |r| sorted[r - 1]);
    (at(lower), at(upper))
}

/// P(B ≤ k) for k = 0..n, B ~ Binomial(n, q), through log-factorials (no underflow
/// of (1 − q)^n at thousands of replicas).
fn binomial_cdf(n: usize, q: f64) -> Vec<f64> {
    let mut ln_factorial = vec![0.0f64; n + 1];
    for k in 1..=n {
        ln_factorial[k] = ln_factorial[k - 1] + (k as f64).ln();
    }
    let mut cdf = Vec::with_capacity(n + 1);
    let mut total = 0.0;
    for k in 0..=n {
        let pmf = match q {
            q if q <= 0.0 => f64::from(k == 0),
            q if q >= 1.0 => f64::from(k == n),
            q => (ln_factorial[n] - ln_factorial[k] - ln_factorial[n - k]
                + k as f64 * q.ln()
                + (n - k) as f64 * (1.0 - q).ln())
            .exp(),
        };
        total += pmf;
        cdf.push(total.min(1.0));
    }
    cdf
}

/// Longest grid-point label a verdict line prints; longer axis values are cut with "…".
const POINT_LABEL_CHARS: usize = 100;

/// `#0 (retry.policy = "naive")`: a grid point by its index and the axis values that
/// make it, so that a verdict line says which policy it judged. A case's label comes
/// first and whole (`#1 "breaker" (faults.0.duration_s = 45)`); only the other axis
/// values may be cut.
pub fn point_label(point: &PointReport) -> String {
    let case = point.params.iter().find(|(path, _)| path == stampede_scenario::scenario::CASE_AXIS);
    let mut label = format!("#{}", point.index);
    if let Some((_, value)) = case {
        label = format!("{label} {}", stampede_scenario::base::typing::describe(value));
    }
    let values: Vec<String> = point
        .params
        .iter()
        .filter(|(path, _)| path != stampede_scenario::scenario::CASE_AXIS)
        .map(|(path, value)| format!("{path} = {}", stampede_scenario::base::typing::describe(value)))
        .collect();
    if values.is_empty() {
        return label;
    }
    let mut values = values.join(", ");
    if values.chars().count() > POINT_LABEL_CHARS {
        values = values.chars().take(POINT_LABEL_CHARS - 1).collect::<String>() + "…";
    }
    format!("{label} ({values})")
}

/// Evaluates every claim the run can check (see [`stampede_scenario::Scenario::claims_to_check`]).
pub fn check(report: &RunReport) -> Vec<Check> {
    let metrics = &report.scenario.schema.metrics;
    let (claims, _) = report.scenario.claims_to_check().unwrap_or_default();
    claims
        .into_iter()
        .map(|(claim, assertion)| {
            if assertion.latency.is_some() {
                return latency_check(report, claim, assertion);
            }
            let index = metrics.iter().position(|m| m.name == assertion.metric).expect("validated metric");
            let point = &report.points[assertion.grid_point as usize];
            let summary = point.summaries[index];
            let value = pick(point, index, assertion.statistic, assertion);
            let other = |relative: &Relative| {
                let other_point = &report.points[relative.grid_point as usize];
                relative.factor * pick(other_point, index, relative.statistic, assertion)
            };
            // NaN compares false: an undefined statistic never passes.
            let passed = assertion.at_least.is_none_or(|bound| value >= bound)
                && assertion.at_most.is_none_or(|bound| value <= bound)
                && assertion.band().is_none_or(|(lo, hi)| summary.ci_lo <= hi && summary.ci_hi >= lo)
                && assertion.above.as_ref().is_none_or(|relative| value > other(relative))
                && assertion.below.as_ref().is_none_or(|relative| value < other(relative))
                && !value.is_nan();
            let relative_bounds = [("above", &assertion.above), ("below", &assertion.below)]
                .into_iter()
                .filter_map(|(side, relative)| relative.as_ref().map(|r| (side, r, other(r))))
                .map(|(side, r, bound)| {
                    let times = if r.factor == 1.0 { String::new() } else { format!("{} × ", r.factor) };
                    let sign = if side == "above" { ">" } else { "<" };
                    format!("{sign} {times}#{} {} ({bound:.4})", r.grid_point, r.statistic.name())
                })
                .collect();
            Check {
                claim,
                assertion: assertion.clone(),
                point: point_label(point),
                value,
                mean: summary.mean,
                ci_lo: summary.ci_lo,
                ci_hi: summary.ci_hi,
                passed,
                relative_bounds,
                measured: measured(point, index, assertion),
                covered: point.partial(index),
            }
        })
        .collect()
}

/// A latency claim's outcome: its pooled quantile (computed as its point finished)
/// against fixed bounds, or its interval against the `near` band.
fn latency_check(report: &RunReport, claim: usize, assertion: &Assertion) -> Check {
    let point = &report.points[assertion.grid_point as usize];
    let nan = crate::windows::WindowQuantile { value_s: f64::NAN, ci_lo_s: f64::NAN, ci_hi_s: f64::NAN };
    let measured = point.latency_claims.get(&claim).copied().unwrap_or(nan);
    let value = measured.value_s;
    let passed = !value.is_nan()
        && assertion.at_least.is_none_or(|bound| value >= bound)
        && assertion.at_most.is_none_or(|bound| value <= bound)
        && assertion.band().is_none_or(|(lo, hi)| measured.ci_lo_s <= hi && measured.ci_hi_s >= lo);
    Check {
        claim,
        assertion: assertion.clone(),
        point: point_label(point),
        value,
        mean: value,
        ci_lo: measured.ci_lo_s,
        ci_hi: measured.ci_hi_s,
        passed,
        relative_bounds: Vec::new(),
        measured: Measured::Pooled { lo: measured.ci_lo_s, hi: measured.ci_hi_s },
        covered: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_rank_undefined_values_last() {
        let values = [3.0, f64::NAN, 1.0, 2.0];
        assert_eq!(replica_quantile(&values, 0.0), 1.0);
        assert_eq!(replica_quantile(&values, 0.5), 2.0);
        assert_eq!(replica_quantile(&values, 0.75), 3.0);
        assert!(replica_quantile(&values, 1.0).is_nan());
    }

    /// The order-statistic interval against its definition: each tail holds at most
    /// 2.5% and moving either rank inwards breaks that (n = 100, q = 0.5 gives ranks 40
    /// and 61, Conover's table values); too few replicas leave a side unbounded.
    #[test]
    fn quantile_intervals_are_the_order_statistics_that_cover_95_percent() {
        let values: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(quantile_interval(&values, 0.5), (40.0, 61.0));
        let cdf = binomial_cdf(100, 0.5);
        assert!(cdf[60] - cdf[39] >= 0.95, "coverage {}", cdf[60] - cdf[39]);
        assert!(cdf[39] <= 0.025 && 1.0 - cdf[60] <= 0.025, "each tail at most 2.5%");
        assert!(cdf[40] > 0.025 && 1.0 - cdf[59] > 0.025, "moving either rank inwards breaks its tail");
        let (lo, hi) = quantile_interval(&values, 0.95);
        assert!(lo < 95.0 && hi > 95.0 && hi <= 100.0, "{lo} {hi}");
        let twenty: Vec<f64> = (1..=20).map(f64::from).collect();
        let (lo, hi) = quantile_interval(&twenty, 0.95);
        assert!(lo.is_finite() && hi.is_nan(), "20 replicas bound p95 from below only: {lo} {hi}");
        // Thousands of replicas: no underflow, and the interval closes around the quantile.
        let many: Vec<f64> = (0..10_000).map(|i| f64::from(i) / 10_000.0).collect();
        let (lo, hi) = quantile_interval(&many, 0.99);
        assert!((0.987..0.99).contains(&lo) && (0.99..0.993).contains(&hi), "{lo} {hi}");
    }

    /// Wilson's interval against published values (Newcombe 1998, table I: 15 of 148).
    #[test]
    fn wilson_matches_the_literature() {
        let (lo, hi) = wilson(15, 148);
        assert!((lo - 0.0624).abs() < 5e-4 && (hi - 0.1605).abs() < 5e-4, "{lo} {hi}");
        assert!((wilson(10, 10).1 - 1.0).abs() < 1e-12);
        assert!(wilson(10, 10).0 > 0.69 && wilson(10, 10).0 < 0.73);
    }
}
