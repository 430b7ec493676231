//! `stampede verify`: checks a run against the scenario's `[[verify]]` assertions —
//! bounds on a metric's mean or confidence-interval end at a grid point, fixed or
//! relative to another grid point's — for nightly CI jobs.

use crate::run::report::RunReport;
use crate::run::stats::Summary;
use crate::scenario::claims::{Assertion, Relative, Statistic};

fn pick(summary: &Summary, statistic: Statistic) -> f64 {
    match statistic {
        Statistic::Mean => summary.mean,
        Statistic::CiLo => summary.ci_lo,
        Statistic::CiHi => summary.ci_hi,
    }
}

fn statistic_name(statistic: Statistic) -> &'static str {
    match statistic {
        Statistic::Mean => "mean",
        Statistic::CiLo => "ci_lo",
        Statistic::CiHi => "ci_hi",
    }
}

/// One assertion's outcome.
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

/// Evaluates every assertion of the report's scenario.
pub fn check(report: &RunReport) -> Vec<Check> {
    let metrics = report.scenario.model.metrics();
    report
        .scenario
        .verify
        .iter()
        .map(|assertion| {
            let index = metrics.iter().position(|m| m.name == assertion.metric).expect("validated metric");
            let summary = report.results[assertion.grid_point as usize].summaries[index];
            let value = pick(&summary, assertion.statistic);
            let other = |relative: &Relative| {
                relative.factor
                    * pick(&report.results[relative.grid_point as usize].summaries[index], relative.statistic)
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
                    format!("{sign} {times}grid point {} {} ({bound:.4})", r.grid_point, statistic_name(r.statistic))
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

/// One line per check, for the terminal.
pub fn render(checks: &[Check]) -> String {
    let mut out = String::new();
    for c in checks {
        let a = &c.assertion;
        let statistic = statistic_name(a.statistic);
        let mut bounds = Vec::new();
        if let Some(bound) = a.at_least {
            bounds.push(format!("≥ {bound}"));
        }
        if let Some(bound) = a.at_most {
            bounds.push(format!("≤ {bound}"));
        }
        bounds.extend(c.relative_bounds.iter().cloned());
        out.push_str(&format!(
            "{}  grid point {} {} {statistic} = {:.4} {}   (mean {:.4}, 95% interval [{:.4}, {:.4}])",
            if c.passed { "PASS" } else { "FAIL" },
            a.grid_point,
            a.metric,
            c.value,
            bounds.join(" and "),
            c.mean,
            c.ci_lo,
            c.ci_hi
        ));
        if !a.note.is_empty() {
            out.push_str(&format!("  — {}", a.note));
        }
        out.push('\n');
    }
    let failed = checks.iter().filter(|c| !c.passed).count();
    out.push_str(&format!("{} passed, {} failed\n", checks.len() - failed, failed));
    out
}
