//! What `optimize` is asked: the objective (`--minimize`/`--maximize METRIC`) and the
//! constraints (`--require`, and the scenario's `[[verify]]` claims with fixed bounds),
//! parsed and checked against the model's metrics.
//!
//! Constraint forms:
//! - `METRIC <= V`, `METRIC >= V`: the mean over replicas;
//! - `pQQ(METRIC) <= V` (or `>=`): the QQth percentile across replicas — said as a
//!   fraction: at least QQ% of replicas have METRIC ≤ V (at most V, for `>=`: at
//!   least (100 − QQ)% have METRIC ≥ V);
//! - `fraction(METRIC <= V) >= F` (or `<= F`): the share of replicas meeting a bound.

use super::race::{Bound, Constraint, Requirement, Sense};
use stampede_scenario::base::error::{Error, Result};
use stampede_scenario::models::expression::{is_expression, normalise};
use stampede_scenario::scenario::claims::{Assertion, Statistic};

/// The objective: a metric's mean over replicas, to maximize or minimize.
#[derive(Clone, Debug, PartialEq)]
pub struct Objective {
    pub sense: Sense,
    pub metric: String,
}

/// A metric the model writes, or an expression of them (checked when the scenario
/// takes it as a column: [`stampede_scenario::Scenario::with_metrics`]).
fn known(metric: &str, metrics: &[&str], flag: &str) -> Result<()> {
    if metrics.contains(&metric) || is_expression(metric) {
        return Ok(());
    }
    // The nearest few, not every metric: a graph's are hundreds (issue 71: ~250 names).
    Err(Error::bad_input(format!(
        "{flag}: {metric:?} is not a metric of this model{}",
        stampede_scenario::base::suggest::did_you_mean(metric, metrics, "metrics", "a run's manifest.json")
    )))
}

impl Objective {
    /// From `--minimize`/`--maximize` (exactly one).
    pub fn new(minimize: Option<&str>, maximize: Option<&str>, metrics: &[&str]) -> Result<Objective> {
        let (sense, metric, flag) = match (minimize, maximize) {
            (Some(m), None) => (Sense::Minimize, m, "--minimize"),
            (None, Some(m)) => (Sense::Maximize, m, "--maximize"),
            (None, None) => {
                return Err(Error::bad_input("optimize needs an objective: --minimize METRIC or --maximize METRIC"))
            }
            (Some(_), Some(_)) => return Err(Error::bad_input("--minimize and --maximize: give one objective")),
        };
        let metric = normalise(metric);
        known(&metric, metrics, flag)?;
        Ok(Objective { sense, metric })
    }
}

fn bound(operator: &str, value: f64) -> Bound {
    if operator.starts_with('<') {
        Bound::AtMost(value)
    } else {
        Bound::AtLeast(value)
    }
}

/// Splits `LEFT op RIGHT` at the first `<=`, `>=`, `<` or `>`.
fn split_comparison(text: &str) -> Option<(&str, &'static str, &str)> {
    // The `>` of an edge's arrow (`web->api.retries`) is part of the metric's name.
    let bytes = text.as_bytes();
    let at = (0..bytes.len()).find(|&i| bytes[i] == b'<' || (bytes[i] == b'>' && (i == 0 || bytes[i - 1] != b'-')))?;
    let operator = match (&text[at..at + 1], text[at + 1..].starts_with('=')) {
        ("<", true) => "<=",
        (">", true) => ">=",
        ("<", false) => "<",
        _ => ">",
    };
    Some((text[..at].trim(), operator, text[at + operator.len()..].trim()))
}

/// Parses one `--require`.
pub fn parse_requirement(text: &str, metrics: &[&str]) -> Result<Constraint> {
    let bad = |why: String| {
        Error::bad_input(format!("--require {text:?}: {why}")).with_hint(
            "forms: 'recovery_s <= 1.5' (the mean), 'p95(latency_p99_s) <= 0.2' (a percentile across replicas), \
             'fraction(recovery_s <= 1.5) >= 0.9'",
        )
    };
    let number = |s: &str| s.parse::<f64>().ok().filter(|v| v.is_finite());
    let constraint = |metric: &str, requirement| -> Result<Constraint> {
        let metric = normalise(metric);
        known(&metric, metrics, &format!("--require {text:?}"))?;
        Ok(Constraint { text: text.trim().to_string(), metric, requirement })
    };
    // fraction(METRIC op V) op F: the inner comparison is inside the parentheses.
    if let Some(inner) = text.trim().strip_prefix("fraction(") {
        let (inside, outside) = inner.split_once(')').ok_or_else(|| bad("unclosed fraction(".into()))?;
        let (metric, each_op, each_value) = split_comparison(inside)
            .ok_or_else(|| bad("fraction(…) needs a bound inside: fraction(METRIC <= V)".into()))?;
        let each = number(each_value).ok_or_else(|| bad(format!("{each_value:?} is not a number")))?;
        let (_, share_op, share_value) =
            split_comparison(outside).ok_or_else(|| bad("fraction(…) needs a share after it: >= 0.9".into()))?;
        let share = number(share_value)
            .filter(|s| (0.0..=1.0).contains(s))
            .ok_or_else(|| bad(format!("the share {share_value:?} must be a number from 0 to 1")))?;
        return constraint(metric, Requirement::Fraction { each: bound(each_op, each), share: bound(share_op, share) });
    }
    let (left, operator, right) =
        split_comparison(text).ok_or_else(|| bad("expected METRIC <= VALUE or METRIC >= VALUE".into()))?;
    let value = number(right).ok_or_else(|| bad(format!("{right:?} is not a number")))?;
    if let Some((name, metric)) = left.strip_suffix(')').and_then(|l| l.split_once('(')) {
        let percent = name
            .strip_prefix('p')
            .and_then(|p| p.parse::<f64>().ok())
            .filter(|p| *p > 0.0 && *p < 100.0)
            .ok_or_else(|| bad(format!("{name:?}: a percentile across replicas is p1 … p99, e.g. p95(METRIC)")))?;
        let share = percent / 100.0;
        let (each, share) = match bound(operator, value) {
            each @ Bound::AtMost(_) => (each, Bound::AtLeast(share)),
            each @ Bound::AtLeast(_) => (each, Bound::AtLeast(1.0 - share)),
        };
        return constraint(metric.trim(), Requirement::Fraction { each, share });
    }
    constraint(left, Requirement::Mean(bound(operator, value)))
}

/// The scenario's `[[verify]]` claims as constraints on every candidate (their
/// `grid_point` is not read: every candidate must meet them), and a note for each
/// claim that cannot be one (relative to another point, or on min/max, which no
/// finite number of replicas establishes).
pub fn claims_as_constraints(claims: &[Assertion]) -> (Vec<Constraint>, Vec<String>) {
    let (mut constraints, mut notes) = (Vec::new(), Vec::new());
    for (index, claim) in claims.iter().enumerate() {
        if claim.above.is_some() || claim.below.is_some() {
            notes.push(format!("verify[{index}] compares two grid points; not a constraint on each candidate"));
            continue;
        }
        let statistic = claim.statistic;
        let bounds = [claim.at_most.map(Bound::AtMost), claim.at_least.map(Bound::AtLeast)];
        for bound in bounds.into_iter().flatten() {
            let text = format!(
                "verify[{index}]: {} of {} {} {}",
                statistic.name(),
                claim.metric,
                bound.operator(),
                bound.value()
            );
            let requirement = match statistic {
                Statistic::Mean | Statistic::CiLo | Statistic::CiHi => Requirement::Mean(bound),
                Statistic::Fraction | Statistic::FractionCiLo | Statistic::FractionCiHi => {
                    let each = match (claim.replica_at_least, claim.replica_at_most) {
                        (Some(low), None) => Bound::AtLeast(low),
                        (None, Some(high)) => Bound::AtMost(high),
                        _ => {
                            notes.push(format!(
                                "verify[{index}] bounds each replica on both sides; not supported as a constraint"
                            ));
                            continue;
                        }
                    };
                    Requirement::Fraction { each, share: bound }
                }
                Statistic::Min | Statistic::Max => {
                    notes.push(format!(
                        "verify[{index}] bounds the {} over replicas, which no number of replicas establishes",
                        statistic.name()
                    ));
                    continue;
                }
                quantile => {
                    let q = quantile.quantile().expect("the rest are quantiles");
                    match bound {
                        Bound::AtMost(_) => Requirement::Fraction { each: bound, share: Bound::AtLeast(q) },
                        Bound::AtLeast(_) => Requirement::Fraction { each: bound, share: Bound::AtLeast(1.0 - q) },
                    }
                }
            };
            constraints.push(Constraint { text, metric: claim.metric.clone(), requirement });
        }
    }
    (constraints, notes)
}

#[cfg(test)]
mod tests {
    use super::*;

    const METRICS: &[&str] = &["recovery_s", "wasted_work_ratio", "goodput_rps"];

    /// An unknown metric's error names the nearest few (at most 8), not every metric
    /// (issue 71: an unknown --minimize printed ~250 names).
    #[test]
    fn an_unknown_metric_suggests_the_nearest_few() {
        let names: Vec<String> = (0..250).map(|i| format!("svc{i}.p99_s")).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let error = Objective::new(Some("svc17.p99"), None, &names).unwrap_err().to_string();
        assert!(error.contains("did you mean svc17.p99_s"), "{error}");
        assert!(error.matches(".p99_s").count() <= 8, "{error}");
    }

    /// An edge's or a call site's metric keeps its arrow (`--require 'web->api.retries
    /// <= 100'` split at the `>` of `->`: "api.retries <= 100" is not a number).
    #[test]
    fn an_edge_metric_keeps_its_arrow() {
        let metrics = &["web->api.retries", "web.page->api.read.offered"];
        let edge = parse_requirement("web->api.retries <= 100", metrics).unwrap();
        assert_eq!(
            (edge.metric.as_str(), edge.requirement),
            ("web->api.retries", Requirement::Mean(Bound::AtMost(100.0)))
        );
        let site = parse_requirement("fraction(web.page->api.read.offered >= 5) >= 0.9", metrics).unwrap();
        assert_eq!(site.metric, "web.page->api.read.offered");
    }

    #[test]
    fn requirements_parse_in_every_form() {
        let mean = parse_requirement("recovery_s <= 1.5", METRICS).unwrap();
        assert_eq!(mean.requirement, Requirement::Mean(Bound::AtMost(1.5)));
        assert_eq!(
            parse_requirement("goodput_rps>=900", METRICS).unwrap().requirement,
            Requirement::Mean(Bound::AtLeast(900.0))
        );
        assert_eq!(
            parse_requirement("p95(recovery_s) <= 2", METRICS).unwrap().requirement,
            Requirement::Fraction { each: Bound::AtMost(2.0), share: Bound::AtLeast(0.95) }
        );
        let low = parse_requirement("p10(goodput_rps) >= 800", METRICS).unwrap().requirement;
        let Requirement::Fraction { each: Bound::AtLeast(800.0), share: Bound::AtLeast(share) } = low else {
            panic!("{low:?}")
        };
        assert!((share - 0.9).abs() < 1e-12);
        assert_eq!(
            parse_requirement("fraction(recovery_s <= 1.5) >= 0.9", METRICS).unwrap().requirement,
            Requirement::Fraction { each: Bound::AtMost(1.5), share: Bound::AtLeast(0.9) }
        );
    }

    #[test]
    fn bad_requirements_say_what_is_wrong() {
        for (text, says) in [
            ("latency <= 1", "not a metric"),
            ("recovery_s == 1", "expected METRIC"),
            ("recovery_s <= fast", "not a number"),
            ("q95(recovery_s) <= 1", "percentile"),
            ("fraction(recovery_s <= 1) >= 2", "from 0 to 1"),
        ] {
            let error = parse_requirement(text, METRICS).unwrap_err();
            assert!(error.to_string().contains(says), "{text}: {error}");
        }
        assert!(Objective::new(Some("nope"), None, METRICS).unwrap_err().to_string().contains("its metrics"));
        assert!(
            Objective::new(None, None, METRICS).is_err()
                && Objective::new(Some("recovery_s"), Some("recovery_s"), METRICS).is_err()
        );
    }

    /// `[[verify]]` claims become constraints on every candidate; claims no replica
    /// count can establish, or relative to another point, are left out with a note.
    #[test]
    fn claims_become_constraints() {
        let claims: Vec<Assertion> = toml::from_str::<toml::Table>(
            r#"
            verify = [
              { grid_point = 1, metric = "recovery_s", statistic = "ci_hi", at_most = 1.5 },
              { grid_point = 0, metric = "recovery_s", statistic = "p90", at_most = 2.0 },
              { grid_point = 0, metric = "goodput_rps", statistic = "fraction", replica_at_least = 900.0, at_least = 0.8 },
              { grid_point = 0, metric = "goodput_rps", statistic = "max", at_most = 5000.0 },
              { grid_point = 0, metric = "goodput_rps", statistic = "mean", above = { grid_point = 1, statistic = "mean" } },
            ]
            "#,
        )
        .unwrap()["verify"]
            .clone()
            .try_into()
            .unwrap();
        let (constraints, notes) = claims_as_constraints(&claims);
        let requirements: Vec<Requirement> = constraints.iter().map(|c| c.requirement).collect();
        assert_eq!(
            requirements,
            vec![
                Requirement::Mean(Bound::AtMost(1.5)),
                Requirement::Fraction { each: Bound::AtMost(2.0), share: Bound::AtLeast(0.9) },
                Requirement::Fraction { each: Bound::AtLeast(900.0), share: Bound::AtLeast(0.8) },
            ]
        );
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert!(notes[0].contains("verify[3]") && notes[1].contains("verify[4]"), "{notes:?}");
    }
}
