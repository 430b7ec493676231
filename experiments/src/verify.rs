//! `stampede verify`: checks a run against the scenario's `[[verify]]` assertions —
//! bounds on a metric's mean or confidence-interval end at a grid point — for
//! nightly CI jobs.

use crate::report::RunReport;
use crate::scenario::{Assertion, Statistic};

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
            let value = match assertion.statistic {
                Statistic::Mean => summary.mean,
                Statistic::CiLo => summary.ci_lo,
                Statistic::CiHi => summary.ci_hi,
            };
            // NaN compares false: an undefined statistic never passes.
            let passed = assertion.at_least.is_none_or(|bound| value >= bound)
                && assertion.at_most.is_none_or(|bound| value <= bound)
                && !value.is_nan();
            Check {
                assertion: assertion.clone(),
                value,
                mean: summary.mean,
                ci_lo: summary.ci_lo,
                ci_hi: summary.ci_hi,
                passed,
            }
        })
        .collect()
}

/// One line per check, for the terminal.
pub fn render(checks: &[Check]) -> String {
    let mut out = String::new();
    for c in checks {
        let a = &c.assertion;
        let statistic = match a.statistic {
            Statistic::Mean => "mean",
            Statistic::CiLo => "ci_lo",
            Statistic::CiHi => "ci_hi",
        };
        let mut bounds = Vec::new();
        if let Some(bound) = a.at_least {
            bounds.push(format!("≥ {bound}"));
        }
        if let Some(bound) = a.at_most {
            bounds.push(format!("≤ {bound}"));
        }
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
