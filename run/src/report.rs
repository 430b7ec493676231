//! What a finished run tells its user: the `--json` document, the manifest and the
//! table printed on stdout. All three are built from one [`RunReport`].

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::{json, Map, Value};

use super::latency::{LatencyStats, QUANTILES};
use super::layout::output_files;
use super::stats::Summary;
use super::windows::WindowQuantile;
use stampede_scenario::models::MetricKind;
use stampede_scenario::resolved::Scenario;

/// What a finished run keeps of one grid point: a few numbers per metric, not its
/// histograms or series (those are written and freed as the point finishes).
#[derive(Clone, Debug)]
pub struct PointReport {
    pub index: u32,
    /// (axis path, value) in axis order.
    pub params: Vec<(String, toml::Value)>,
    /// One per metric, in the model's order.
    pub summaries: Vec<Summary>,
    /// One per metric: the replicas whose value is defined (a recovery time only
    /// where the replica recovered), of `replicas`.
    pub covered: Vec<u64>,
    pub replicas: u32,
    /// One per latency histogram, in the model's order.
    pub latencies: Vec<LatencyStats>,
    /// Every replica's value of the metrics that claims over replicas read, by
    /// metric index, in replica order.
    pub replica_values: BTreeMap<usize, Vec<f64>>,
    /// The pooled quantile (and its interval) each latency claim about this point
    /// bounds, by claim index.
    pub latency_claims: BTreeMap<usize, WindowQuantile>,
    /// Wall-clock seconds its replicas took on their workers, summed.
    pub compute_s: f64,
}

impl RunReport {
    /// The model's advice for each grid point whose means call for it (a default that
    /// is hurting, say), each line naming the point: what `run` prints after its table.
    pub fn hints(&self) -> Vec<String> {
        let metrics = &self.scenario.schema.metrics;
        let mut lines = Vec::new();
        for point in &self.points {
            let Ok(grid_point) = self.scenario.grid_point(point.index) else { continue };
            let mean = |name: &str| {
                let m = metrics.iter().position(|m| m.name == name)?;
                point.summaries.get(m).map(|s| s.mean)
            };
            for hint in grid_point.model.presentation(&grid_point.run).hints {
                if let Some(text) = hint.fired(mean) {
                    lines.push(format!("grid point {}: {text}", point.index));
                }
            }
        }
        lines
    }
}

impl PointReport {
    /// Metric `m` is defined in fewer than all replicas: (covered, replicas).
    pub fn partial(&self, m: usize) -> Option<(u64, u32)> {
        let covered = *self.covered.get(m)?;
        (covered < u64::from(self.replicas)).then_some((covered, self.replicas))
    }

    /// Metric `m` is defined in under half the replicas: never marked best or compared.
    pub fn too_partial(&self, m: usize) -> bool {
        self.partial(m).is_some_and(|(covered, replicas)| covered * 2 < u64::from(replicas))
    }

    /// Events per second of one core and nanoseconds per event, from the model's
    /// `events` metric (mean per replica) and the replicas' compute time.
    pub fn cost(&self, events_index: Option<usize>, replicas: u32) -> Option<(f64, f64)> {
        let events = self.summaries.get(events_index?)?.mean * replicas as f64;
        (events > 0.0 && self.compute_s > 0.0).then(|| (events / self.compute_s, self.compute_s * 1e9 / events))
    }
}

/// A finished run.
#[derive(Clone, Debug)]
pub struct RunReport {
    pub scenario: Scenario,
    pub points: Vec<PointReport>,
    pub output_dir: PathBuf,
    pub wall_time_s: f64,
    pub threads: usize,
}

/// A TOML value as JSON (datetimes become strings).
pub fn toml_to_json(value: &toml::Value) -> Value {
    match value {
        toml::Value::String(s) => Value::String(s.clone()),
        toml::Value::Integer(i) => json!(i),
        toml::Value::Float(f) if f.is_nan() => Value::String("nan".into()),
        toml::Value::Float(f) => json_number(*f),
        toml::Value::Boolean(b) => json!(b),
        toml::Value::Datetime(d) => Value::String(d.to_string()),
        toml::Value::Array(values) => Value::Array(values.iter().map(toml_to_json).collect()),
        toml::Value::Table(table) => Value::Object(table.iter().map(|(k, v)| (k.clone(), toml_to_json(v))).collect()),
    }
}

/// A metric's summary, with `n`: the replicas whose value is defined (all of them
/// unless the metric is undefined in some, as a recovery time of a replica that never
/// recovered), over which the mean and interval are taken.
fn summary_json(summary: &Summary, covered: u64) -> Value {
    // serde_json writes non-finite floats as null.
    json!({
        "mean": json_number(summary.mean),
        "sd": json_number(summary.sd),
        "ci_lo": json_number(summary.ci_lo),
        "ci_hi": json_number(summary.ci_hi),
        "n": covered,
    })
}

fn latency_json(stats: &LatencyStats) -> Value {
    let mut object = Map::new();
    object.insert("count".into(), json!(stats.count));
    object.insert("batches".into(), json!(stats.batches));
    for ((name, _), (value, (lo, hi))) in QUANTILES.iter().zip(stats.quantiles_s.iter().zip(&stats.intervals_s)) {
        object.insert((*name).into(), json_number(*value));
        object.insert(format!("{name}_ci_lo"), json_number(*lo));
        object.insert(format!("{name}_ci_hi"), json_number(*hi));
    }
    object.insert("max_s".into(), json_number(stats.max_s));
    Value::Object(object)
}

impl RunReport {
    /// The `--json` document of the command-line contract.
    pub fn to_json(&self) -> Value {
        let schema = &self.scenario.schema;
        let grid: Vec<Value> = self
            .points
            .iter()
            .map(|point| {
                let params: Map<String, Value> =
                    point.params.iter().map(|(path, value)| (path.clone(), toml_to_json(value))).collect();
                let metrics: Map<String, Value> = schema
                    .metrics
                    .iter()
                    .zip(point.summaries.iter().zip(&point.covered))
                    .map(|(metric, (summary, &n))| (metric.name.to_string(), summary_json(summary, n)))
                    .collect();
                let latency: Map<String, Value> = schema
                    .latencies
                    .iter()
                    .zip(&point.latencies)
                    .map(|(name, stats)| (name.to_string(), latency_json(stats)))
                    .collect();
                json!({"grid_point": point.index, "params": params, "metrics": metrics, "latency": latency})
            })
            .collect();
        json!({
            "scenario": self.scenario.name,
            "seed": self.scenario.run.seed,
            "replicas": self.scenario.run.replicas,
            "output_dir": self.output_dir.display().to_string(),
            "grid": grid,
        })
    }

    /// `manifest.json`: everything needed to reproduce and identify the run.
    /// Only `wall_time_s`, `host` and `command_line` differ between runs with the same inputs.
    /// `documents` are the files written from the finished run (report.html, verify.json).
    pub fn manifest(&self, documents: &[&str]) -> Value {
        let events = self.scenario.schema.metric_index("events");
        let grid: Vec<Value> = self
            .scenario
            .grid
            .iter()
            .map(|axis| json!({"path": axis.path, "values": axis.values.iter().map(toml_to_json).collect::<Vec<_>>()}))
            .collect();
        let hostname = std::fs::read_to_string("/etc/hostname")
            .map(|s| s.trim().to_string())
            .or_else(|_| std::env::var("HOSTNAME"))
            .unwrap_or_default();
        let mut manifest = json!({
            "tool": "stampede",
            "format": MANIFEST_FORMAT,
            "version": stampede_scenario::base::provenance::VERSION,
            "commit": stampede_scenario::base::provenance::commit(),
            "scenario": self.scenario.name,
            "model": self.scenario.model.name(),
            "scenario_toml": self.scenario.to_toml(),
            // Relative input files in scenario_toml are read from here (merge, report).
            "scenario_dir": self.scenario.base_dir().map(|d| d.display().to_string()),
            "inputs": self.scenario.inputs().iter().map(input_json).collect::<Vec<_>>(),
            "command_line": stampede_scenario::base::provenance::command_line(),
            "seed": self.scenario.run.seed,
            "replicas": self.scenario.run.replicas,
            "grid": grid,
            "grid_points": self.points.len(),
            "metrics": self.scenario.schema.metric_names(),
            "latencies": self.scenario.schema.latencies,
            "files": output_files(&self.scenario).into_iter().chain(documents.iter().copied()).collect::<Vec<_>>(),
            "series": self.scenario.schema.series_names(),
            "latency_over_time": self.scenario.schema.timed.iter().map(|t| t.name).collect::<Vec<_>>(),
            "warnings": self.scenario.warnings(),
            "wall_time_s": self.wall_time_s,
            "host": {
                "hostname": hostname,
                "threads": self.threads,
                "os": std::env::consts::OS,
                "arch": std::env::consts::ARCH,
                "peak_rss_bytes": super::budget::peak_rss_bytes(),
                // What the run was checked against before it started (an upper bound).
                "estimated_memory_bytes": super::budget::estimate(&self.scenario, self.threads).memory_bytes.round(),
                "estimate_terms": super::budget::memory_terms(&self.scenario, self.threads).into_iter().map(|(n, b)| (n.to_string(), json!(b.round()))).collect::<Map<String, Value>>(),
                // What each grid point cost: events per second of one core, ns per event.
                "throughput": self.points.iter().filter_map(|p| {
                    let (per_s, ns) = p.cost(events, self.scenario.run.replicas)?;
                    Some(json!({"grid_point": p.index, "compute_s": p.compute_s, "events_per_s": per_s, "ns_per_event": ns}))
                }).collect::<Vec<_>>(),
            },
        });
        if self.scenario.columns.long.is_some() {
            // Readers pivot these tables back (stampede_output::long).
            manifest["layout"] = json!({
                "long": ["summary.parquet", "replicas.parquet", "timeseries.parquet"],
                "above_metrics": stampede_scenario::schema::columns::LONG_ABOVE_METRICS,
            });
        }
        manifest
    }
}

/// Files up to this size are embedded in the manifest (when they are text); larger
/// ones are recorded by path, size and hash only.
const EMBEDDED_INPUT_BYTES: usize = 1 << 20;

/// A file the run read, for the manifest: its field, its path as written, its size and
/// the SHA-256 of the bytes the run used (sealed: never read again for the manifest),
/// and its content when it is at most 1 MB — `content` for UTF-8 text,
/// `content_base64` otherwise — else `content_omitted` says why (reproducing the run,
/// or merging its shards, then needs the file itself, which the hash identifies).
fn input_json(input: &stampede_scenario::resolved::InputFile) -> Value {
    let bytes = &input.sealed.bytes;
    let mut entry =
        json!({"field": input.field, "path": input.file, "bytes": bytes.len(), "sha256": input.sealed.sha256});
    if bytes.len() > EMBEDDED_INPUT_BYTES {
        entry["content_omitted"] = json!("larger than 1 MB: the path and hash identify it");
        return entry;
    }
    match std::str::from_utf8(bytes) {
        Ok(text) => entry["content"] = json!(text),
        Err(_) => {
            use base64::Engine as _;
            entry["content_base64"] = json!(base64::engine::general_purpose::STANDARD.encode(bytes));
        }
    }
    entry
}

/// The layout version of an output folder: the manifest's `format`. It changes when a
/// file, column or manifest field that readers (the report, `merge`) rely on changes.
/// Folders written before the field existed (0.4.0 and earlier) are format 1.
pub const MANIFEST_FORMAT: u32 = 1;

/// Compact number formatting for the table: a count's whole values as integers
/// (its means with one decimal), reals with four significant digits.
pub fn number(value: f64, kind: MetricKind) -> String {
    if !value.is_finite() {
        return "–".to_string();
    }
    if value == 0.0 {
        return "0".to_string();
    }
    let magnitude = value.abs();
    match kind {
        MetricKind::Count if magnitude >= 1e12 => format!("{value:.3e}"),
        MetricKind::Count if value.fract() == 0.0 => format!("{value:.0}"),
        MetricKind::Count if magnitude >= 100.0 => format!("{value:.0}"),
        MetricKind::Count => format!("{value:.1}"),
        MetricKind::Real if !(1e-3..1e6).contains(&magnitude) => format!("{value:.3e}"),
        MetricKind::Real => {
            let decimals = (3 - magnitude.log10().floor() as i32).clamp(0, 6) as usize;
            format!("{value:.decimals$}")
        }
    }
}

/// A number as JSON: an undefined value (NaN) is `null`; an infinite one is the
/// string `"inf"` or `"-inf"`, as TOML writes it (JSON has no infinity).
pub fn json_number(value: f64) -> Value {
    if value.is_nan() {
        Value::Null
    } else if value.is_infinite() {
        Value::String(if value > 0.0 { "inf" } else { "-inf" }.into())
    } else {
        json!(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_print_as_integers_and_reals_with_four_significant_digits() {
        assert_eq!(number(1234.0, MetricKind::Count), "1234");
        assert_eq!(number(12.25, MetricKind::Count), "12.2");
        assert_eq!(number(0.123456, MetricKind::Real), "0.1235");
        assert_eq!(number(123.456, MetricKind::Real), "123.5");
        assert_eq!(number(2.5e-5, MetricKind::Real), "2.500e-5");
        assert_eq!(number(f64::NAN, MetricKind::Real), "–");
        assert_eq!(json_number(f64::INFINITY), json!("inf"));
        assert_eq!(json_number(f64::NAN), Value::Null);
        assert_eq!(toml_to_json(&toml::Value::Float(f64::INFINITY)), json!("inf"));
    }
}
