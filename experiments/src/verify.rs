//! `stampede verify`: checks a run against the scenario's `[[verify]]` claims —
//! bounds on a metric's mean or interval end, on a quantile across replicas, or on
//! the fraction of replicas meeting a bound (with its Wilson interval), at a grid
//! point, fixed or relative to another grid point's — for nightly CI jobs. Claims
//! whose grid points a narrowed grid no longer has are skipped and reported.

use serde_json::{json, Value};

use crate::run::report::{json_number, PointReport, RunReport};
use crate::scenario::claims::{Assertion, Relative, Skipped, Statistic};

/// The 0.975 quantile of the standard normal, for Wilson intervals.
const Z_975: f64 = 1.959_963_984_540_054;

/// One claim's outcome.
#[derive(Clone, Debug, PartialEq)]
pub struct Check {
    pub assertion: Assertion,
    /// The statistic's value (NaN when undefined, which fails).
    pub value: f64,
    pub mean: f64,
    pub ci_lo: f64,
    pub ci_hi: f64,
    pub passed: bool,
    /// The relative bounds, spelt out with the other point's value.
    pub relative_bounds: Vec<String>,
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

/// The Wilson score interval (95%) of `successes` out of `n`.
pub fn wilson(successes: usize, n: usize) -> (f64, f64) {
    if n == 0 {
        return (f64::NAN, f64::NAN);
    }
    let (n, p) = (n as f64, successes as f64 / n as f64);
    let z2 = Z_975 * Z_975;
    let centre = (p + z2 / (2.0 * n)) / (1.0 + z2 / n);
    let half = Z_975 / (1.0 + z2 / n) * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt();
    ((centre - half).max(0.0), (centre + half).min(1.0))
}

/// The value of `statistic` of metric `index` at `point`, for `claim`'s per-replica bounds.
fn pick(point: &PointReport, index: usize, statistic: Statistic, claim: &Assertion) -> f64 {
    let summary = &point.summaries[index];
    let replicas = || point.replica_values.get(&index).map(Vec::as_slice).unwrap_or_default();
    match statistic {
        Statistic::Mean => summary.mean,
        Statistic::CiLo => summary.ci_lo,
        Statistic::CiHi => summary.ci_hi,
        Statistic::Fraction | Statistic::FractionCiLo | Statistic::FractionCiHi => {
            let values = replicas();
            let meets = |v: &&f64| {
                claim.replica_at_least.is_none_or(|b| **v >= b) && claim.replica_at_most.is_none_or(|b| **v <= b)
            };
            let successes = values.iter().filter(meets).count();
            let (lo, hi) = wilson(successes, values.len());
            match statistic {
                Statistic::Fraction => successes as f64 / values.len() as f64,
                Statistic::FractionCiLo => lo,
                _ => hi,
            }
        }
        quantile => replica_quantile(replicas(), quantile.quantile().expect("the other statistics are quantiles")),
    }
}

/// Evaluates every claim the run can check (see [`crate::Scenario::claims_to_check`]).
pub fn check(report: &RunReport) -> Vec<Check> {
    let metrics = report.scenario.model.metrics();
    let (claims, _) = report.scenario.claims_to_check().unwrap_or_default();
    claims
        .into_iter()
        .map(|assertion| {
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
                && assertion.above.as_ref().is_none_or(|relative| value > other(relative))
                && assertion.below.as_ref().is_none_or(|relative| value < other(relative))
                && !value.is_nan();
            let relative_bounds = [("above", &assertion.above), ("below", &assertion.below)]
                .into_iter()
                .filter_map(|(side, relative)| relative.as_ref().map(|r| (side, r, other(r))))
                .map(|(side, r, bound)| {
                    let times = if r.factor == 1.0 { String::new() } else { format!("{} × ", r.factor) };
                    let sign = if side == "above" { ">" } else { "<" };
                    format!("{sign} {times}grid point {} {} ({bound:.4})", r.grid_point, r.statistic.name())
                })
                .collect();
            Check {
                assertion: assertion.clone(),
                value,
                mean: summary.mean,
                ci_lo: summary.ci_lo,
                ci_hi: summary.ci_hi,
                passed,
                relative_bounds,
            }
        })
        .collect()
}

/// What a per-replica statistic counts, in words: `fraction of replicas with value ≤ 1.5`.
fn per_replica(a: &Assertion) -> String {
    let mut bounds = Vec::new();
    if let Some(b) = a.replica_at_least {
        bounds.push(format!("≥ {b}"));
    }
    if let Some(b) = a.replica_at_most {
        bounds.push(format!("≤ {b}"));
    }
    if bounds.is_empty() {
        String::new()
    } else {
        format!(" (replicas with {} {})", a.metric, bounds.join(" and "))
    }
}

/// One line per check and per skipped claim, for the terminal.
pub fn render(checks: &[Check], skipped: &[Skipped]) -> String {
    let mut out = String::new();
    for c in checks {
        let a = &c.assertion;
        let mut bounds = Vec::new();
        if let Some(bound) = a.at_least {
            bounds.push(format!("≥ {bound}"));
        }
        if let Some(bound) = a.at_most {
            bounds.push(format!("≤ {bound}"));
        }
        bounds.extend(c.relative_bounds.iter().cloned());
        out.push_str(&format!(
            "{}  grid point {} {} {}{} = {:.4} {}   (mean {:.4}, 95% interval [{:.4}, {:.4}])",
            if c.passed { "PASS" } else { "FAIL" },
            a.grid_point,
            a.metric,
            a.statistic.name(),
            per_replica(a),
            c.value,
            bounds.join(" and "),
            c.mean,
            c.ci_lo,
            c.ci_hi
        ));
        if !a.note.is_empty() {
            out.push_str(&format!("  — {}", a.note));
        }
        if c.value.is_nan() {
            out.push_str("  (undefined: no replica had a value)");
        }
        out.push('\n');
    }
    for s in skipped {
        out.push_str(&format!("SKIP  verify[{}]: {}\n", s.index, s.why));
    }
    let failed = checks.iter().filter(|c| !c.passed).count();
    out.push_str(&format!("{} passed, {} failed", checks.len() - failed, failed));
    if !skipped.is_empty() {
        out.push_str(&format!(", {} skipped", skipped.len()));
    }
    out.push('\n');
    out
}

/// Every field of every check, for `verify --json`.
pub fn to_json(checks: &[Check], skipped: &[Skipped]) -> Value {
    let checks: Vec<Value> = checks
        .iter()
        .map(|c| {
            let mut claim = serde_json::to_value(&c.assertion).expect("claims serialise");
            let object = claim.as_object_mut().expect("a claim is an object");
            object.insert("statistic".into(), json!(c.assertion.statistic.name()));
            object.insert("value".into(), json_number(c.value));
            object.insert("mean".into(), json_number(c.mean));
            object.insert("ci_lo".into(), json_number(c.ci_lo));
            object.insert("ci_hi".into(), json_number(c.ci_hi));
            object.insert("relative_bounds".into(), json!(c.relative_bounds));
            object.insert("passed".into(), json!(c.passed));
            claim
        })
        .collect();
    let skipped: Vec<Value> = skipped.iter().map(|s| json!({"claim": s.index, "why": s.why})).collect();
    json!({"checks": checks, "skipped": skipped})
}

/// Writes `verify.json` (the [`to_json`] document) into the output folder `dir`,
/// atomically, for the report to show.
pub fn write(dir: &std::path::Path, json: &Value) -> crate::Result<()> {
    let bytes = serde_json::to_vec_pretty(json).expect("JSON serialises");
    stampede_output::StagedFile::with_contents(dir, "verify.json", &bytes)
        .and_then(|f| f.commit())
        .map(|_| ())
        .map_err(|e| crate::Error::io(format!("cannot write verify.json: {e}")))
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

    /// Wilson's interval against published values (Newcombe 1998, table I: 15 of 148).
    #[test]
    fn wilson_matches_the_literature() {
        let (lo, hi) = wilson(15, 148);
        assert!((lo - 0.0624).abs() < 5e-4 && (hi - 0.1605).abs() < 5e-4, "{lo} {hi}");
        assert!((wilson(10, 10).1 - 1.0).abs() < 1e-12);
        assert!(wilson(10, 10).0 > 0.69 && wilson(10, 10).0 < 0.73);
    }
}
