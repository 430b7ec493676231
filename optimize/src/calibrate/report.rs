//! What a calibration says: the terminal text, the JSON document (`--json`), and the
//! calibrated scenario as a file (`--show-toml`, `--write`).

use serde_json::{json, Value};

use super::intervals::{Estimate, Found};
use super::{Calibration, MetricFidelity};

/// The first line of a calibrated scenario file: marks it as stampede's (so a later
/// calibration may replace it) and says where its values came from.
pub const TOML_MARK: &str = "# Calibrated by `stampede calibrate`";

fn percent(value: Option<f64>) -> String {
    value.map_or_else(|| "—".into(), |v| format!("{:.1}%", v * 100.0))
}

fn number(value: Option<f64>) -> Value {
    value.filter(|v| v.is_finite()).map_or(Value::Null, Value::from)
}

/// How the fitted values' intervals were made (said in every output).
pub const INTERVAL_METHOD: &str = "95% intervals per unknown. curvature: Gauss–Newton, covariance 2·D_min/(N − p)·H⁻¹ \
     of a quadratic fitted around the best candidate (the integers at their fitted values), used where it curves \
     upward and explains at least half the design's variation; profile: the values whose least discrepancy, the \
     other unknowns re-optimised on the same random numbers, is within the likelihood-ratio cut 3.84·D_min/(N − p) \
     of the best (always for an integer). Both widened for the lag-1 autocorrelation ρ₁ of the residuals (standard \
     errors by √((1 + ρ₁)/(1 − ρ₁)), the cut by its square); they count production's scatter around the model, \
     not the simulation's noise";

/// Why an unknown has no interval.
fn not_identified(estimate: &Estimate) -> &'static str {
    match estimate.method {
        Some(_) => "not identified: the discrepancy stays within the cut over the whole --fit range",
        None => "not identified: no more compared points than unknowns, so no scatter to measure",
    }
}

/// An interval as text: `95% [lo, hi] method`, and where a profile's walk stopped
/// still inside the cut.
fn interval_text(estimate: &Estimate) -> Option<String> {
    let (lo, hi) = estimate.interval?;
    let mut text = format!("95% [{}, {}] {}", short(lo), short(hi), estimate.method.map_or("", |m| m.name()));
    let mut notes = Vec::new();
    for (side, name) in [(0, "low"), (1, "high")] {
        if estimate.open[side] {
            notes.push(if estimate.at_range_end[side] {
                format!("reaches the --fit range's {name} end")
            } else {
                format!("still inside the cut where the walk stopped ({name})")
            });
        }
    }
    if !notes.is_empty() {
        text.push_str(&format!(" ({})", notes.join("; ")));
    }
    Some(text)
}

impl Calibration {
    /// Each fitted unknown as text: its path, its value, and `95% [lo, hi] METHOD`
    /// or why it has none. Empty without `--fit`.
    pub fn fitted_text(&self) -> Vec<(String, String, Result<String, &'static str>)> {
        let Some(found) = &self.found else { return Vec::new() };
        self.dimensions
            .iter()
            .zip(&found.estimates)
            .map(|(dimension, estimate)| {
                let interval = interval_text(estimate).ok_or_else(|| not_identified(estimate));
                (dimension.path.clone(), short(estimate.value), interval)
            })
            .collect()
    }

    /// Whether `--max-error` holds for every compared metric (true without one).
    pub fn passed(&self) -> bool {
        self.disagreeing().is_empty()
    }

    /// The terminal's account.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let (first, last) = (self.intervals_s[0].0, self.intervals_s[self.intervals_s.len() - 1].1);
        out.push_str(&format!(
            "calibrate {}: {} intervals compared ({first}–{last} s{}), {} metric{}\n",
            self.scenario.name,
            self.intervals_s.len(),
            if self.skipped_rows > 0 {
                format!("; {} before run.warmup_s skipped", self.skipped_rows)
            } else {
                String::new()
            },
            self.metrics.len(),
            if self.metrics.len() == 1 { "" } else { "s" }
        ));
        for load in &self.loads {
            out.push_str(&if load.applied {
                format!("  load: {} drives the run ([load] rate schedule, a step per interval)\n", load.column)
            } else {
                format!("  load: {} not used: the scenario's own [load] sets that stream\n", load.column)
            });
        }
        out.push_str(&self.fitted_section());
        out.push_str(&self.fidelity_table());
        out.push_str(&format!("  discrepancy (weighted mean squared relative error): {:.4}\n", self.discrepancy));
        match (self.max_error, self.worst()) {
            (Some(bound), Some((name, mape))) if mape > bound => {
                let names: Vec<String> =
                    self.disagreeing().iter().map(|(n, m)| format!("{n} ({:.1}%)", m * 100.0)).collect();
                out.push_str(&format!(
                    "\nFAILED: --max-error {:.1}% exceeded; worst {name} at {:.1}%; disagreeing: {}\n",
                    bound * 100.0,
                    mape * 100.0,
                    names.join(", ")
                ));
            }
            (Some(bound), Some((name, mape))) => out.push_str(&format!(
                "\npassed: every metric within --max-error {:.1}% (worst {name} at {:.1}%)\n",
                bound * 100.0,
                mape * 100.0
            )),
            _ => {}
        }
        out
    }

    /// The fitted unknowns with their intervals and how each was measured (nothing
    /// without unknowns).
    fn fitted_section(&self) -> String {
        let mut out = String::new();
        let Some(found) = &self.found else { return out };
        let best = &found.candidates[found.best];
        out.push_str(&format!(
            "\nfitted ({} candidates × {} replicas on common random numbers; discrepancy {:.4} at the best, \
             from its {}):\n",
            found.candidates.len(),
            self.fit_replicas,
            best.discrepancy,
            best.stage
        ));
        for (path, value, interval) in self.fitted_text() {
            let interval = interval.unwrap_or_else(str::to_string);
            out.push_str(&format!("  {path:<40} {value:>12}   {interval}\n"));
        }
        out.push_str(&format!(
            "  (curvature: from the quadratic around the fit; profile: the values whose discrepancy, the others \
             re-optimised, stays within the likelihood-ratio cut{})\n",
            match self.autocorrelation {
                Some(r) if self.widening > 1.0 => {
                    format!(", widened ×{:.2} for the residuals' lag-1 autocorrelation {r:.2}", self.widening)
                }
                _ => String::new(),
            }
        ));
        out
    }

    /// The fidelity of each compared metric to its observations.
    fn fidelity_table(&self) -> String {
        let mut out = String::new();
        out.push_str(&format!(
            "\nfidelity ({} replicas; band = the replicas' 2.5–97.5%; MAPE and bias against the simulated mean):\n",
            self.replicas
        ));
        out.push_str(&format!(
            "  {:<36} {:>7} {:>8} {:>8} {:>12} {:>7}\n",
            "metric", "MAPE", "bias", "corr", "in band", "points"
        ));
        for metric in &self.metrics {
            let f = &metric.fidelity;
            out.push_str(&format!(
                "  {:<36} {:>7} {:>8} {:>8} {:>12} {:>7}\n",
                metric.name,
                percent(f.mape),
                f.bias.map_or("—".into(), |b| format!("{:+.1}%", b * 100.0)),
                f.correlation.map_or("—".into(), |c| format!("{c:.3}")),
                percent(f.inside),
                f.points
            ));
        }
        out
    }

    /// The JSON document.
    pub fn to_json(&self, observed_file: &str, page: Option<&str>, toml_file: Option<&str>) -> Value {
        let fit = self.found.as_ref().map(|found| self.fit_json(found));
        let metrics: Vec<Value> = self.metrics.iter().map(|m| self.metric_json(m)).collect();
        json!({
            "scenario": self.scenario.name,
            "observed": observed_file,
            "intervals": self.intervals_s.len(),
            "skipped_before_warmup": self.skipped_rows,
            "loads": self.loads.iter().map(|l| json!({"column": l.column, "applied": l.applied})).collect::<Vec<_>>(),
            "fit": fit,
            "fidelity": {
                "replicas": self.replicas,
                "band": "the replicas' 2.5th to 97.5th percentiles per interval",
                "discrepancy": self.discrepancy,
                "metrics": metrics,
            },
            "max_error": self.max_error,
            "worst": self.worst().map(|(name, mape)| json!({"metric": name, "mape": mape})),
            "disagreeing": self.disagreeing().iter().map(|(n, m)| json!({"metric": n, "mape": m})).collect::<Vec<_>>(),
            "passed": self.passed(),
            "page": page,
            "calibrated_toml": toml_file,
        })
    }

    /// The JSON of the fit: each unknown's value and interval, the search's size and
    /// every candidate it ran.
    fn fit_json(&self, found: &Found) -> Value {
        let best = &found.candidates[found.best];
        json!({
            "dimensions": self.dimensions.iter().zip(&found.estimates).map(|(d, e)| json!({
                "path": d.path,
                "value": e.value,
                "ci_lo": e.interval.map(|i| i.0),
                "ci_hi": e.interval.map(|i| i.1),
                "sd": e.sd,
                "identified": e.interval.is_some(),
                "method": e.method.map(|m| m.name()),
                "open_low": e.open[0],
                "open_high": e.open[1],
                "range": [d.low, d.high],
            })).collect::<Vec<_>>(),
            "interval_method": INTERVAL_METHOD,
            "candidates": found.candidates.len(),
            "replicas_per_candidate": self.fit_replicas,
            "planned_replicas": self.planned_replicas,
            "ran_replicas": self.ran_replicas(),
            "best_discrepancy": best.discrepancy,
            "best_stage": best.stage,
            "residual_autocorrelation": number(self.autocorrelation),
            "widening": self.widening,
            "search": found.candidates.iter().map(|c| json!({
                "stage": c.stage, "values": c.values, "discrepancy": number(Some(c.discrepancy)),
            })).collect::<Vec<_>>(),
        })
    }

    /// The JSON of one metric's fidelity, with its series over the intervals.
    fn metric_json(&self, m: &MetricFidelity) -> Value {
        let f = &m.fidelity;
        let series: Vec<Value> = self
            .intervals_s
            .iter()
            .enumerate()
            .map(|(i, (start, end))| {
                json!({"start_s": start, "end_s": end, "observed": number(m.observed[i]),
                       "mean": number(f.mean[i]), "low": number(f.low[i]), "high": number(f.high[i])})
            })
            .collect();
        json!({
            "name": m.name, "weight": m.weight, "points": f.points,
            "mape": number(f.mape), "bias": number(f.bias), "correlation": number(f.correlation),
            "inside_band": number(f.inside), "discrepancy": number(f.discrepancy),
            "over_time": series,
        })
    }

    /// The calibrated scenario as a file `stampede run` takes, headed by where its
    /// values came from.
    pub fn to_toml(&self, observed_file: &str) -> String {
        let mut head = format!("{TOML_MARK} from {observed_file}\n");
        for (path, value, interval) in self.fitted_text() {
            head.push_str(&format!("# {path} = {value} ({})\n", interval.unwrap_or_else(|_| "not identified".into())));
        }
        head.push_str(&format!("# discrepancy {:.4} over {} replicas\n", self.discrepancy, self.replicas));
        head + &self.scenario.to_toml()
    }
}

/// Six significant digits without exponent noise.
fn short(value: f64) -> String {
    if value == 0.0 || !value.is_finite() {
        return format!("{value}");
    }
    let digits = (5 - value.abs().log10().floor() as i32).max(0) as usize;
    let text = format!("{value:.digits$}");
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    }
}
