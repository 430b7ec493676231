//! The verdicts of `stampede verify`, written three ways from the same checks:
//! PASS/FAIL lines for people, `verify.json` for programs (every claim with its
//! verdict, expected bound and measured value with its interval, and what identifies
//! the run: scenario, seed, replicas, version, commit), and for CI JUnit XML (one test
//! case per claim) and GitHub Actions `::error` annotations.
//!
//! Every form says the same thing of a claim: what was expected, what was measured,
//! and at which grid point — named by its policy, not only by its index.

use std::fmt::Write as _;

use serde_json::{json, Value};

use super::{Check, Measured};
use crate::report::{json_number, RunReport};
use stampede_scenario::base::provenance;
use stampede_scenario::scenario::claims::{Assertion, Skipped};

/// A run's claims as checked, with the run they were checked on.
pub struct Verdicts<'a> {
    pub report: &'a RunReport,
    pub checks: Vec<Check>,
    pub skipped: Vec<Skipped>,
}

impl<'a> Verdicts<'a> {
    /// Checks every claim of `report`'s scenario; `skipped` are the claims this run
    /// cannot check (see [`stampede_scenario::Scenario::claims_to_check`]).
    pub fn new(report: &'a RunReport, skipped: Vec<Skipped>) -> Self {
        Verdicts { report, checks: super::check(report), skipped }
    }

    pub fn failed(&self) -> usize {
        self.checks.iter().filter(|c| !c.passed).count()
    }

    pub fn all_passed(&self) -> bool {
        self.failed() == 0
    }

    fn scenario(&self) -> &str {
        &self.report.scenario.name
    }

    /// One line per check and per skipped claim, then the count, for the terminal:
    /// `FAIL  retry-storm #0 (retry.policy = "naive") amplification_ratio: expected
    /// ci_lo ≥ 3.5, got 1.8533 (mean 1.8536, 95% [1.8533, 1.8539]) — naive retries …`.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for c in &self.checks {
            let _ = writeln!(out, "{}  {} {}", if c.passed { "PASS" } else { "FAIL" }, self.scenario(), sentence(c));
        }
        for s in &self.skipped {
            let _ = writeln!(out, "SKIP  {} verify[{}]: {}", self.scenario(), s.index, s.why);
        }
        let _ = write!(out, "{} passed, {} failed", self.checks.len() - self.failed(), self.failed());
        if !self.skipped.is_empty() {
            let _ = write!(out, ", {} skipped", self.skipped.len());
        }
        out.push('\n');
        out
    }

    /// The `verify --json` document, also written as `verify.json`.
    pub fn to_json(&self) -> Value {
        let scenario = &self.report.scenario;
        let checks: Vec<Value> = self.checks.iter().map(|c| self.check_json(c)).collect();
        let skipped: Vec<Value> = self.skipped.iter().map(|s| json!({"claim": s.index, "why": s.why})).collect();
        json!({
            "tool": "stampede",
            "scenario": scenario.name,
            "model": scenario.model.name(),
            "seed": scenario.run.seed,
            "replicas": scenario.run.replicas,
            "grid_points": self.report.points.len(),
            "version": provenance::VERSION,
            "commit": provenance::commit(),
            "verdict": if self.all_passed() { "pass" } else { "fail" },
            "counts": {
                "passed": self.checks.len() - self.failed(),
                "failed": self.failed(),
                "skipped": self.skipped.len(),
            },
            "checks": checks,
            "skipped": skipped,
        })
    }

    fn check_json(&self, c: &Check) -> Value {
        let mut claim = serde_json::to_value(&c.assertion).expect("claims serialise");
        let object = claim.as_object_mut().expect("a claim is an object");
        let point = &self.report.points[c.assertion.grid_point as usize];
        let params: serde_json::Map<String, Value> =
            point.params.iter().map(|(path, value)| (path.clone(), crate::report::toml_to_json(value))).collect();
        object.insert("claim".into(), json!(c.claim));
        object.insert("verdict".into(), json!(if c.passed { "pass" } else { "fail" }));
        object.insert("passed".into(), json!(c.passed));
        object.insert("point".into(), json!(c.point));
        object.insert("params".into(), Value::Object(params));
        object.insert("statistic".into(), json!(c.assertion.statistic.name()));
        object.insert("expected".into(), json!(expected(c)));
        object.insert("value".into(), json_number(c.value));
        object.insert("mean".into(), json_number(c.mean));
        object.insert("ci_lo".into(), json_number(c.ci_lo));
        object.insert("ci_hi".into(), json_number(c.ci_hi));
        object.insert("relative_bounds".into(), json!(c.relative_bounds));
        // The claimed statistic's own interval (the mean's for mean, ci_lo and ci_hi).
        let (kind, lo, hi) = match c.measured {
            Measured::Mean => {
                if let Some((defined, replicas)) = c.covered {
                    object.insert("defined".into(), json!(defined));
                    object.insert("replicas".into(), json!(replicas));
                }
                ("student_t_mean", c.ci_lo, c.ci_hi)
            }
            Measured::Fraction { successes, replicas, fraction, lo, hi } => {
                object.insert("fraction".into(), json_number(fraction));
                object.insert("successes".into(), json!(successes));
                object.insert("replicas".into(), json!(replicas));
                ("wilson", lo, hi)
            }
            Measured::Quantile { replicas, lo, hi } => {
                object.insert("replicas".into(), json!(replicas));
                ("order_statistic", lo, hi)
            }
            Measured::Pooled { lo, hi } => {
                object.insert("metric".into(), json!(subject(&c.assertion)));
                object.insert("replicas".into(), json!(point.replicas));
                ("sectioning", lo, hi)
            }
        };
        object.insert("interval".into(), json!(kind));
        object.insert("interval_lo".into(), json_number(lo));
        object.insert("interval_hi".into(), json_number(hi));
        object.insert("message".into(), json!(sentence(c)));
        claim
    }

    /// JUnit XML for CI dashboards: one `<testsuite>` for the scenario, one
    /// `<testcase>` per claim (a failed claim has a `<failure>`, a skipped one
    /// `<skipped>`), and the run's identity as `<properties>`.
    pub fn to_junit(&self) -> String {
        let scenario = &self.report.scenario;
        let mut xml = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
        let total = self.checks.len() + self.skipped.len();
        let suite = format!(
            "name=\"{}\" tests=\"{total}\" failures=\"{}\" errors=\"0\" skipped=\"{}\" time=\"{:.3}\"",
            escape(&format!("stampede verify {}", scenario.name)),
            self.failed(),
            self.skipped.len(),
            self.report.wall_time_s,
        );
        let _ = writeln!(xml, "<testsuites {suite}>");
        let _ = writeln!(xml, "  <testsuite {suite}>");
        xml.push_str("    <properties>\n");
        let commit = provenance::commit().unwrap_or("");
        for (name, value) in [
            ("scenario", scenario.name.clone()),
            ("model", scenario.model.name().to_string()),
            ("seed", scenario.run.seed.to_string()),
            ("replicas", scenario.run.replicas.to_string()),
            ("version", provenance::VERSION.to_string()),
            ("commit", commit.to_string()),
        ] {
            let _ = writeln!(xml, "      <property name=\"{name}\" value=\"{}\"/>", escape(&value));
        }
        xml.push_str("    </properties>\n");
        let classname = escape(&format!("stampede.verify.{}", scenario.name));
        let claims = &self.report.scenario.verify;
        for c in &self.checks {
            let name = escape(&identity(c.claim, &c.assertion));
            let _ = write!(xml, "    <testcase classname=\"{classname}\" name=\"{name}\"");
            if c.passed {
                // The measurement in the output, never in the name.
                let _ = writeln!(xml, ">\n      <system-out>{}</system-out>\n    </testcase>", escape(&sentence(c)));
            } else {
                let _ = writeln!(
                    xml,
                    ">\n      <failure message=\"{}\" type=\"claim\">{}</failure>\n    </testcase>",
                    escape(&format!("expected {}, got {}", expected(c), number(c.value))),
                    escape(&sentence(c))
                );
            }
        }
        for s in &self.skipped {
            let name = escape(&identity(s.index, &claims[s.index]));
            let _ = writeln!(
                xml,
                "    <testcase classname=\"{classname}\" name=\"{name}\">\n      <skipped message=\"{}\"/>\n    </testcase>",
                escape(&s.why)
            );
        }
        xml.push_str("  </testsuite>\n</testsuites>\n");
        xml
    }

    /// GitHub Actions workflow commands, one `::error` per failed claim, so that a
    /// failing night shows its claims in the run's summary.
    pub fn github_annotations(&self) -> String {
        let mut out = String::new();
        for c in self.checks.iter().filter(|c| !c.passed) {
            let title = format!("stampede verify {}: verify[{}] failed", self.scenario(), c.claim);
            let _ = writeln!(out, "::error title={}::{}", annotation(&title, true), annotation(&sentence(c), false));
        }
        out
    }
}

/// `#0 (retry.policy = "naive") amplification_ratio: expected ci_lo ≥ 3.5, got 1.8533
/// (mean 1.8536, 95% [1.8533, 1.8539]) — naive retries amplify load about 4x`.
fn sentence(c: &Check) -> String {
    let mut line = format!(
        "{} {}: expected {}, got {} ({})",
        c.point,
        subject(&c.assertion),
        expected(c),
        number(c.value),
        measured_text(c)
    );
    if !c.assertion.note.is_empty() {
        let _ = write!(line, " — {}", c.assertion.note);
    }
    if c.value.is_nan() {
        line.push_str(" (undefined: no replica had a value)");
    }
    line
}

/// What the claim expects of its statistic: `ci_lo ≥ 3.5`, `fraction_ci_lo (replicas
/// with recovery_s ≤ 1.5) ≥ 0.85`, `ci_lo > #0 ci_hi (0.6500)`.
/// A claim's identity, as JUnit names its testcase: the point as the file names it, the
/// metric, the statistic and the claimed bound (another point by its name, never its
/// measured value) — the same every night, whatever was measured or skipped:
/// `verify[3] case "breaker" success_ratio ci_lo ≥ 0.9`.
pub fn identity(index: usize, a: &Assertion) -> String {
    let mut bounds = Vec::new();
    if let (Some(near), Some(within)) = (a.near, a.within) {
        bounds.push(format!("≈ {near} ± {}%", 100.0 * within));
    }
    if let Some(bound) = a.at_least {
        bounds.push(format!("≥ {bound}"));
    }
    if let Some(bound) = a.at_most {
        bounds.push(format!("≤ {bound}"));
    }
    for (sign, relative) in [(">", &a.above), ("<", &a.below)] {
        if let Some(r) = relative {
            let times = if r.factor == 1.0 { String::new() } else { format!("{} × ", r.factor) };
            let other = if r.written.is_empty() { "the point".to_string() } else { r.written.clone() };
            bounds.push(format!("{sign} {times}{other} {}", r.statistic.name()));
        }
    }
    let point = if a.written.is_empty() { String::new() } else { format!(" {}", a.written) };
    if a.latency.is_some() {
        return format!("verify[{index}]{point} {} {}", subject(a), bounds.join(" and "));
    }
    format!("verify[{index}]{point} {} {}{} {}", a.metric, a.statistic.name(), per_replica(a), bounds.join(" and "))
}

/// What a claim bounds, in words: its metric, or a latency's pooled quantile and the
/// seconds its requests ended in (`front.read.latency_all_s p99 of requests ended in
/// [10, 55) s`).
pub fn subject(a: &Assertion) -> String {
    match (&a.latency, a.quantile) {
        (Some(latency), Some(q)) => {
            let window = a.window.map_or(String::new(), |[from, to]| format!(" of requests ended in [{from}, {to}) s"));
            format!("{latency} p{q}{window}")
        }
        _ => a.metric.clone(),
    }
}

fn expected(c: &Check) -> String {
    let a = &c.assertion;
    let mut bounds = Vec::new();
    if let (Some(near), Some((lo, hi))) = (a.near, a.band()) {
        bounds.push(format!("≈ {near} ± {}% (its 95% interval meets [{lo}, {hi}])", 100.0 * a.within.unwrap_or(0.0)));
    }
    if let Some(bound) = a.at_least {
        bounds.push(format!("≥ {bound}"));
    }
    if let Some(bound) = a.at_most {
        bounds.push(format!("≤ {bound}"));
    }
    bounds.extend(c.relative_bounds.iter().cloned());
    if a.latency.is_some() {
        return format!("pooled p{} {}", a.quantile.unwrap_or(f64::NAN), bounds.join(" and "));
    }
    format!("{}{} {}", a.statistic.name(), per_replica(a), bounds.join(" and "))
}

/// What a per-replica statistic counts, in words: ` (replicas with recovery_s ≤ 1.5)`.
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

/// A statistic as printed: four decimals, or `undefined`.
fn number(value: f64) -> String {
    if value.is_nan() {
        "undefined".to_string()
    } else {
        format!("{value:.4}")
    }
}

/// The claimed statistic as measured, with its own interval, in words.
fn measured_text(c: &Check) -> String {
    let end = |v: f64| if v.is_nan() { "unbounded".to_string() } else { format!("{v:.4}") };
    match c.measured {
        Measured::Mean => {
            let over =
                c.covered.map_or(String::new(), |(k, n)| format!(" over the {k} of {n} replicas where it is defined"));
            format!("mean {}, 95% [{}, {}]{over}", number(c.mean), number(c.ci_lo), number(c.ci_hi))
        }
        Measured::Fraction { successes, replicas, fraction, lo, hi } => format!(
            "fraction {:.1}% = {successes} of {replicas} replicas, Wilson 95% [{:.1}%, {:.1}%]",
            100.0 * fraction,
            100.0 * lo,
            100.0 * hi
        ),
        Measured::Quantile { replicas, lo, hi } => format!(
            "{} across {replicas} replicas, order-statistic 95% [{}, {}]; mean {}",
            c.assertion.statistic.name(),
            end(lo),
            end(hi),
            number(c.mean)
        ),
        Measured::Pooled { lo, hi } => {
            let precision = if c.assertion.window.is_some() { "within 3.1%" } else { "within 0.1%" };
            format!(
                "pooled over every replica ({precision}), sectioning 95% [{}, {}] over ten batches of replicas",
                end(lo),
                end(hi)
            )
        }
    }
}

/// `text` safe inside an XML attribute or element (the five predefined entities;
/// control characters XML 1.0 cannot hold become spaces).
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for ch in text.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\n' | '\t' => out.push(ch),
            c if (c as u32) < 0x20 => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// `text` as a workflow-command value: `%`, CR and LF always escaped, and in a
/// property (`title=`) also `:` and `,` (GitHub's documented escaping).
fn annotation(text: &str, property: bool) -> String {
    let mut out = text.replace('%', "%25").replace('\r', "%0D").replace('\n', "%0A");
    if property {
        out = out.replace(':', "%3A").replace(',', "%2C");
    }
    out
}

/// Writes `verify.json` (the [`Verdicts::to_json`] document) into the output folder
/// `dir`, atomically, for the report to show.
pub fn write_json(dir: &std::path::Path, json: &Value) -> stampede_scenario::Result<()> {
    let bytes = serde_json::to_vec_pretty(json).expect("JSON serialises");
    stampede_output::StagedFile::with_contents(dir, "verify.json", &bytes)
        .and_then(|f| f.commit())
        .map(|_| ())
        .map_err(|e| stampede_scenario::Error::io(format!("cannot write verify.json: {e}")))
}

/// The JUnit file of a `verify` that could not run (bad input, exit 2): one errored
/// testcase carrying the error, so a test report never shows green for it.
pub fn junit_error(scenario: &str, message: &str) -> String {
    let suite = format!(
        "name=\"{}\" tests=\"1\" failures=\"0\" errors=\"1\" skipped=\"0\" time=\"0\"",
        escape(&format!("stampede verify {scenario}"))
    );
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites {suite}>\n  <testsuite {suite}>\n    <testcase \
         classname=\"{}\" name=\"the scenario runs\">\n      <error message=\"{}\" type=\"bad_input\"/>\n    \
         </testcase>\n  </testsuite>\n</testsuites>\n",
        escape(&format!("stampede.verify.{scenario}")),
        escape(message)
    )
}

/// The `::error` line of a `verify` that could not run.
pub fn annotation_error(scenario: &str, message: &str) -> String {
    let title = format!("stampede verify {scenario}: could not run");
    format!("::error title={}::{}\n", annotation(&title, true), annotation(message, false))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xml_and_annotations_escape_what_their_formats_reserve() {
        assert_eq!(escape(r#"a < b & "c" > 'd'"#), "a &lt; b &amp; &quot;c&quot; &gt; &apos;d&apos;");
        assert_eq!(escape("bell\u{7}"), "bell ");
        assert_eq!(annotation("50%: a, b\nc", true), "50%25%3A a%2C b%0Ac");
        assert_eq!(annotation("50%: a, b\nc", false), "50%25: a, b%0Ac");
    }
}
