//! Running a gateway scenario for a page, and shaping what comes back as JSON.
//!
//! * [`traced_run`] (Learn): every replica of the scenario's single point is run
//!   with its trace on; a page-supplied function turns each replica's trace into
//!   figures, and each figure gets its mean and 95% Student-t interval over the
//!   replicas (exact moments, as `stampede run` folds its summaries: the same bits
//!   for any thread count).
//! * [`summarised_run`] (Sandbox): the run layer's own [`run_grid_cancellable`], so the
//!   means and intervals are those `stampede run` writes for the same TOML; plus the
//!   latency quantiles, interpolated inside histogram buckets, and the time series.
//! * [`timeline`]: one replica's trace cut to the calls around its fault, and its
//!   attempts in quarter-second bins.

use std::sync::atomic::{AtomicBool, Ordering};

use rayon::prelude::*;
use serde_json::{json, Map, Value};
use stampede_engine::kernel::Named;
use stampede_engine::measurement::trace::{Trace, TraceKind, TraceRow};
use stampede_engine::{nanos_to_secs, secs_to_nanos, Nanos};
use stampede_run::latency::interpolated_quantile;
use stampede_run::moments::Moments;
use stampede_run::plan::Plan;
use stampede_run::runner::{run_grid_cancellable, PointResult, ReplicaRecord, Sinks};
use stampede_run::stats::Summary;
use stampede_scenario::base::typing::parse_text;
use stampede_scenario::{Overrides, Scenario};

use super::RunError;

/// Resolves scenario text as `stampede run` would a file.
pub fn scenario(text: &str) -> Result<Scenario, RunError> {
    let table = parse_text(text, "the scenario")?;
    Ok(Scenario::resolve(table, &Overrides::default())?)
}

/// A mean, its 95% interval and its standard error as `[mean, lo, hi, se]` over
/// `replicas` (JSON has no NaN: null). The page tests differences with the standard errors.
pub fn interval(summary: &Summary, replicas: u32) -> Value {
    let se = summary.sd / (replicas as f64).sqrt();
    json!([finite(summary.mean), finite(summary.ci_lo), finite(summary.ci_hi), finite(se)])
}

/// `x` as JSON, or null when it is NaN or infinite (JSON has neither).
pub fn finite(x: f64) -> Value {
    if x.is_finite() {
        json!(x)
    } else {
        Value::Null
    }
}

/// The 2-thread pool every page run uses: the machine's cores, whatever asked.
fn threads() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

/// Runs every replica of `scenario`'s first point traced; `measure` gives each
/// replica's figures (NaN: not defined for this replica, left out of its mean).
/// Returns each figure's summary and replica 0's trace.
pub fn traced_run(
    scenario: &Scenario,
    cancel: &AtomicBool,
    measure: &(dyn Fn(&Trace) -> Vec<f64> + Sync),
) -> Result<(Vec<Summary>, Trace), RunError> {
    let point = scenario.grid_point(0)?;
    let (seed, replicas) = (scenario.run.seed, scenario.run.replicas);
    let pool =
        rayon::ThreadPoolBuilder::new().num_threads(threads()).build().map_err(|e| RunError::Failed(e.to_string()))?;
    let run = |replica: u32| -> Option<(Vec<f64>, Option<Trace>)> {
        if cancel.load(Ordering::Relaxed) {
            return None;
        }
        let traced = point.model.trace_replica(&point.run, seed, replica as u64).expect("the gateway traces");
        let figures = measure(&traced.trace);
        Some((figures, (replica == 0).then_some(traced.trace)))
    };
    let results: Vec<_> = pool.install(|| (0..replicas).into_par_iter().map(run).collect());
    if cancel.load(Ordering::Relaxed) {
        return Err(RunError::Cancelled);
    }
    let mut moments: Vec<Moments> = Vec::new();
    let mut first = None;
    for (figures, trace) in results.into_iter().map(|r| r.expect("not cancelled")) {
        moments.resize(figures.len(), Moments::default());
        for (moment, value) in moments.iter_mut().zip(figures) {
            if value.is_finite() {
                moment.push(value);
            }
        }
        first = first.or(trace);
    }
    Ok((moments.iter().map(Moments::summary).collect(), first.expect("replica 0 ran")))
}

/// What [`summarised_run`] gives back: every metric, latency and series of the first point.
pub struct Summarised {
    pub metrics: Vec<(&'static str, Summary)>,
    /// The summaries of the figures `derive` made of each replica's metrics.
    pub derived: Vec<Summary>,
    pub replicas: u32,
    pub point: PointResult,
    pub bucket_s: f64,
    pub series: Vec<&'static str>,
}

/// Runs `scenario` (one point) through the run layer, cancellably; `derive` makes
/// further figures of each replica's metrics (summarised in replica order).
pub fn summarised_run(
    scenario: &Scenario,
    cancel: &AtomicBool,
    derive: &dyn Fn(&[f64]) -> Vec<f64>,
) -> Result<Summarised, RunError> {
    let plan = Plan::new(scenario.point_count(), scenario.run.replicas, None);
    let mut first: Option<PointResult> = None;
    let mut derived: Vec<Moments> = Vec::new();
    let mut records = |records: &[ReplicaRecord]| {
        for record in records.iter().filter(|r| r.grid_point == 0) {
            let figures = derive(&record.metrics);
            derived.resize(figures.len(), Moments::default());
            derived.iter_mut().zip(figures).for_each(|(w, v)| w.push(v));
        }
        Ok(())
    };
    let mut point = |_: &_, result: PointResult| {
        first.get_or_insert(result);
        Ok(())
    };
    let outcome = run_grid_cancellable(
        scenario,
        &plan,
        threads(),
        &|| {},
        cancel,
        Sinks { records: &mut records, point: &mut point },
    );
    if cancel.load(Ordering::Relaxed) {
        return Err(RunError::Cancelled);
    }
    outcome?;
    let point = first.expect("one point ran");
    let names: Vec<&'static str> = scenario.schema.metric_names();
    Ok(Summarised {
        metrics: names.into_iter().zip(point.summaries.iter().cloned()).collect(),
        derived: derived.iter().map(Moments::summary).collect(),
        replicas: scenario.run.replicas,
        bucket_s: scenario.schema.series_bucket_s,
        series: scenario.schema.series_names(),
        point,
    })
}

impl Summarised {
    pub fn metric(&self, name: &str) -> &Summary {
        &self.metrics.iter().find(|(n, _)| *n == name).unwrap_or_else(|| panic!("no metric {name}")).1
    }

    /// `{name: [mean, lo, hi]}` for every metric.
    pub fn metrics_json(&self) -> Value {
        Value::Object(self.metrics.iter().map(|(name, s)| (name.to_string(), interval(s, self.replicas))).collect())
    }

    /// `{histogram: {count, p50, p95, p99}}` in seconds, interpolated inside buckets.
    pub fn latency_json(&self, names: &[&str]) -> Value {
        let mut out = Map::new();
        for (i, name) in names.iter().enumerate() {
            let histogram = &self.point.pooled_latency(i);
            let q = |q: f64| interpolated_quantile(histogram, q).map_or(Value::Null, |n| json!(n / 1e9));
            out.insert(
                name.to_string(),
                json!({"count": histogram.count(), "p50": q(0.5), "p95": q(0.95), "p99": q(0.99)}),
            );
        }
        Value::Object(out)
    }

    /// `{bucket_s, series: {name: [[mean, lo, hi] per bucket]}}`, counts per second.
    pub fn series_json(&self) -> Value {
        let sums = &self.point.series;
        let mut series = Map::new();
        for (index, name) in self.series.iter().enumerate() {
            let buckets: Vec<Value> = (0..sums.buckets())
                .map(|b| interval(&sums.summary(index, b, 1.0 / self.bucket_s), self.replicas))
                .collect();
            series.insert(name.to_string(), Value::Array(buckets));
        }
        json!({"bucket_s": self.bucket_s, "series": series})
    }
}

/// A trace row for the page: `[kind, call, turn, class, tier, attempt, start, first_token, end, outcome, gate]`.
fn row_json(row: &TraceRow) -> Value {
    let id = |v: u32| if v == u32::MAX { Value::Null } else { json!(v) };
    json!([
        row.kind.name(),
        id(row.call),
        id(row.group),
        row.class,
        id(row.place),
        row.attempt,
        nanos_to_secs(row.start),
        row.first_token.map_or(Value::Null, |t| json!(nanos_to_secs(t))),
        nanos_to_secs(row.end),
        row.outcome,
        row.gate
    ])
}

/// The width of the attempts histogram's bins.
pub const BIN_S: f64 = 0.25;

/// Replica `trace` for the timeline: at most `shown` calls, starting a fifth of them
/// before `anchor` (the fault), with all their rows; the fault and breaker bands; and
/// every attempt in [`BIN_S`] bins (ok and failed), with the peak.
pub fn timeline(trace: &Trace, anchor: Nanos, shown: usize) -> Value {
    let mut calls: Vec<&TraceRow> = trace.rows.iter().filter(|r| r.kind == TraceKind::Call).collect();
    calls.sort_by_key(|r| (r.start, r.call));
    let at = calls.partition_point(|r| r.start < anchor);
    let from = at.saturating_sub(shown / 5).min(calls.len().saturating_sub(shown));
    let chosen: Vec<u32> = calls[from..(from + shown).min(calls.len())].iter().map(|r| r.call).collect();
    let selected: std::collections::HashSet<u32> = chosen.iter().copied().collect();
    let rows: Vec<Value> = trace
        .rows
        .iter()
        .filter(|r| match r.kind {
            TraceKind::State | TraceKind::Incident => true,
            _ => selected.contains(&r.call),
        })
        .map(row_json)
        .collect();
    let attempts = trace.rows.iter().filter(|r| r.kind == TraceKind::Attempt);
    // The bins span the attempts, not every row: an incident's window may reach far
    // past the run (an incident written to last 1e9 s), and the bins are memory.
    let last = attempts.clone().map(|r| r.end.max(r.start)).max().unwrap_or(0);
    let bins = (nanos_to_secs(last) / BIN_S).floor() as usize + 1;
    let (mut ok, mut failed) = (vec![0u32; bins], vec![0u32; bins]);
    for attempt in attempts {
        let bin = (nanos_to_secs(attempt.start) / BIN_S) as usize;
        if attempt.outcome == "200" {
            ok[bin] += 1;
        } else {
            failed[bin] += 1;
        }
    }
    let (peak_bin, peak) = ok
        .iter()
        .zip(&failed)
        .map(|(a, b)| a + b)
        .enumerate()
        .max_by_key(|&(i, n)| (n, usize::MAX - i))
        .unwrap_or((0, 0));
    json!({
        "calls_total": calls.len(),
        "calls_shown": chosen.len(),
        "order": chosen,
        "rows": rows,
        "bin_s": BIN_S,
        "ok": ok,
        "failed": failed,
        "peak": peak,
        "peak_at_s": peak_bin as f64 * BIN_S,
    })
}

/// The first fault of a trace: its first incident's start, else the first breaker
/// opening, else `otherwise`.
pub fn anchor(trace: &Trace, otherwise: f64) -> Nanos {
    let first = |kind: TraceKind| trace.rows.iter().filter(|r| r.kind == kind).map(|r| r.start).min();
    first(TraceKind::Incident).or_else(|| first(TraceKind::State)).unwrap_or(secs_to_nanos(otherwise))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::sandbox::Config;

    /// A cancelled run stops before its replicas and says so; the same run uncancelled
    /// answers.
    #[test]
    fn a_cancelled_run_stops_and_says_so() {
        let config = Config { replicas: 4, duration_s: 10.0, ..Config::default() };
        let scenario = scenario(&config.toml().unwrap()).unwrap();
        let none = |_: &[f64]| Vec::new();
        let cancelled = summarised_run(&scenario, &AtomicBool::new(true), &none);
        assert!(matches!(cancelled, Err(RunError::Cancelled)), "{:?}", cancelled.err());
        let traced = traced_run(&scenario, &AtomicBool::new(true), &|_| Vec::new());
        assert!(matches!(traced, Err(RunError::Cancelled)));
        let run = summarised_run(&scenario, &AtomicBool::new(false), &none).unwrap();
        assert!(run.metric("turns_offered").mean > 0.0);
    }
}
