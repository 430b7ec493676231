//! `stampede compare DIR_A DIR_B`: did a change alter the simulated behaviour? Two
//! output folders of the same scenario are compared grid point by grid point and metric
//! by metric: the difference of the means with its 95% interval (paired on replica
//! indices when both runs used the same seed, Welch's otherwise), a Mann–Whitney rank
//! test on the per-replica values, Holm's correction over every test, and what moved by
//! more than a relative tolerance; latency quantiles side by side. Rendered for the
//! terminal, as JSON and as a self-contained HTML page.
//!
//! The statistics are [`stampede_run::verify::compare`]'s; this module reads
//! the folders and shapes the answer.

use stampede_scenario::models::expression::MetricExpr;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use stampede_output::Table;
use stampede_run::report::json_number;
use stampede_run::verify::compare::{holm, Difference, Pair};
use stampede_scenario::{Error, Result};

use crate::blocks::{escape, points};
use crate::folder::{Folder, Manifest};

/// One metric at one grid point.
#[derive(Clone, Debug)]
pub struct Row {
    pub point: u32,
    pub label: String,
    pub metric: String,
    pub difference: Difference,
    /// Significant after Holm's correction at `alpha`.
    pub significant: bool,
    /// |B − A| above `tolerance` × |A| (false without a tolerance).
    pub beyond_tolerance: bool,
}

/// A latency's quantiles in both runs at one grid point.
#[derive(Clone, Debug)]
pub struct LatencyRow {
    pub point: u32,
    pub latency: String,
    /// p50, p99, p99.9 (seconds) in A and in B.
    pub a: [f64; 3],
    pub b: [f64; 3],
    /// Each quantile's 95% sectioning interval in A and in B (NaN where the folder
    /// has none: fewer than two batches, or written before intervals existed).
    pub a_ci: [(f64, f64); 3],
    pub b_ci: [(f64, f64); 3],
}

impl LatencyRow {
    /// Quantile `k`'s difference B − A with a 95% interval: the half-widths combine as
    /// independent (√(hA² + hB²)); with common seeds the runs are positively
    /// correlated, so this errs wide. NaN bounds without both intervals.
    pub fn difference(&self, k: usize) -> (f64, f64, f64) {
        let d = self.b[k] - self.a[k];
        // The upper half-width: the lower bound may be clipped at 0.
        let (ha, hb) = (self.a_ci[k].1 - self.a[k], self.b_ci[k].1 - self.b[k]);
        let half = (ha * ha + hb * hb).sqrt();
        (d, d - half, d + half)
    }
}

/// The whole comparison.
#[derive(Clone, Debug)]
pub struct Comparison {
    pub a: PathBuf,
    pub b: PathBuf,
    pub scenario: String,
    /// Both runs used the same seed: each replica index is paired with its twin.
    pub paired: bool,
    pub alpha: f64,
    pub tolerance: Option<f64>,
    pub rows: Vec<Row>,
    pub latencies: Vec<LatencyRow>,
    /// With `--window FROM,TO`: per grid point, request kind kept over time and latency
    /// window starting in [FROM, TO), every request's p50 and p99 in that window (p99.9
    /// NaN), named `KIND all @ T s`.
    pub windows: Vec<LatencyRow>,
    pub window: Option<(f64, f64)>,
    /// What differs between A's and B's scenarios, a field a line (`queue.servers 2 → 3`).
    pub differences: Vec<String>,
}

/// The fields in which scenario `b` differs from `a` (both TOML as the manifests keep
/// them), as `path a → b`, in path order; a field only one has reads `(absent)`.
fn scenario_differences(a: &str, b: &str) -> Vec<String> {
    fn flatten(prefix: &str, value: &toml::Value, out: &mut std::collections::BTreeMap<String, String>) {
        match value {
            toml::Value::Table(table) => {
                for (key, inner) in table {
                    let path = if prefix.is_empty() { key.clone() } else { format!("{prefix}.{key}") };
                    flatten(&path, inner, out);
                }
            }
            other => {
                out.insert(prefix.to_string(), other.to_string());
            }
        }
    }
    let fields = |text: &str| {
        let mut out = std::collections::BTreeMap::new();
        if let Ok(table) = text.parse::<toml::Table>() {
            flatten("", &toml::Value::Table(table), &mut out);
        }
        out
    };
    let (a, b) = (fields(a), fields(b));
    let absent = "(absent)".to_string();
    let mut paths: Vec<&String> = a.keys().chain(b.keys()).collect();
    paths.sort();
    paths.dedup();
    paths
        .into_iter()
        .filter(|path| a.get(*path) != b.get(*path))
        .map(|path| format!("{path} {} → {}", a.get(path).unwrap_or(&absent), b.get(path).unwrap_or(&absent)))
        .collect()
}

/// Reads `dir`'s folder and its per-replica rows.
fn read(dir: &Path) -> Result<(Folder, Table)> {
    let folder = Folder::read(dir)?;
    let replicas = stampede_output::read::read_output_table(dir, "replicas", &folder.manifest.files)
        .map_err(|e| {
            Error::bad_input(format!("{}: compare needs the per-replica rows (replicas.parquet): {e}", dir.display()))
        })?
        .ok_or_else(|| {
            Error::bad_input(format!(
                "{}: compare needs the per-replica rows, and this run kept none (--replica-rows none)",
                dir.display()
            ))
            .with_hint("run both with --replica-rows all (the default) or sample:N")
        })?;
    let replicas = folder.manifest.wide(replicas, "metric")?;
    Ok((folder, replicas))
}

/// Compares folder `b` with folder `a`: Holm-corrected at `alpha`; `tolerance` (a share
/// of A's mean) marks what moved by more. Two folders of different scenarios, models,
/// grids or metrics are refused (bad input).
/// Metrics that measure the run itself: shown, never tested.
pub const RUN_METRICS: &[&str] = &["events"];

pub fn compare(
    a: &Path,
    b: &Path,
    alpha: f64,
    tolerance: Option<f64>,
    window: Option<(f64, f64)>,
) -> Result<Comparison> {
    compare_with(a, b, alpha, tolerance, window, &[])
}

/// [`compare`], also comparing each of `expressions` (metrics joined by `+ - * /`, see
/// [`stampede_scenario::models::expression`]) computed per replica on each side.
pub fn compare_with(
    a: &Path,
    b: &Path,
    alpha: f64,
    tolerance: Option<f64>,
    window: Option<(f64, f64)>,
    expressions: &[String],
) -> Result<Comparison> {
    check_arguments(alpha, tolerance, window)?;
    let ((fa, ra), (fb, rb)) = (read(a)?, read(b)?);
    let (ma, mb) = (&fa.manifest, &fb.manifest);
    check_comparable((a, ma), (b, mb))?;
    let paired = ma.seed == mb.seed;
    let (infos, _) = points(&fa, &fa.metric_defs(), &crate::data::SummaryIndex::of(&fa.summary));
    // Every compared column read once a side: the metrics, then the expressions.
    let mut columns: Vec<(String, [Vec<f64>; 2])> = ma
        .metrics
        .iter()
        .map(|m| Ok((m.clone(), [ra.numbers(m).map_err(io)?, rb.numbers(m).map_err(io)?])))
        .collect::<Result<_>>()?;
    let expressions = expression_values(&columns, expressions)?;
    columns.extend(expressions);
    let places = [ReplicaPlaces::of(&ra)?, ReplicaPlaces::of(&rb)?];
    let mut rows = Vec::new();
    for info in &infos {
        for (metric, values) in &columns {
            let pair =
                Pair { a: places[0].of_point(info.index, &values[0]), b: places[1].of_point(info.index, &values[1]) };
            let difference = pair.difference(paired);
            let beyond = tolerance.is_some_and(|t| difference.diff.abs() > t * difference.mean_a.abs());
            rows.push(Row {
                point: info.index,
                label: info.label.clone(),
                metric: metric.clone(),
                difference,
                significant: false,
                beyond_tolerance: beyond,
            });
        }
    }
    mark_significant(&mut rows, alpha)?;
    let latencies = latency_rows(&fa, &fb, &infos);
    let windows = match window {
        Some((from, to)) => window_rows(&fa, &fb, &infos, from, to)?,
        None => Vec::new(),
    };
    Ok(Comparison {
        a: a.into(),
        b: b.into(),
        scenario: ma.scenario.clone(),
        paired,
        alpha,
        tolerance,
        rows,
        latencies,
        windows,
        window,
        differences: scenario_differences(&ma.scenario_toml, &mb.scenario_toml),
    })
}

/// A table that cannot be read, worded as bad input.
fn io(e: stampede_output::OutputError) -> Error {
    Error::bad_input(format!("{e}"))
}

/// `--window`, `--alpha` and `--tolerance` checked before any folder is read.
fn check_arguments(alpha: f64, tolerance: Option<f64>, window: Option<(f64, f64)>) -> Result<()> {
    if let Some((from, to)) = window.filter(|(from, to)| !(from.is_finite() && to.is_finite() && from < to)) {
        return Err(Error::bad_input(format!(
            "--window {from},{to}: two times in seconds from the run's start, the first below the second"
        )));
    }
    if !(alpha > 0.0 && alpha < 1.0) {
        return Err(Error::bad_input(format!("--alpha {alpha}: a false-alarm rate between 0 and 1, e.g. 0.05")));
    }
    if let Some(t) = tolerance.filter(|t| !(t.is_finite() && *t >= 0.0)) {
        return Err(Error::bad_input(format!("--tolerance {t}: a share of A's mean, 0 or more (0.02 is 2%)")));
    }
    Ok(())
}

/// Two runs compare when they ran one scenario over one grid with the same metrics,
/// each with at least two replicas a point (a difference's interval needs each
/// side's spread).
fn check_comparable((a, ma): (&Path, &Manifest), (b, mb): (&Path, &Manifest)) -> Result<()> {
    if (&ma.scenario, &ma.model) != (&mb.scenario, &mb.model) {
        return Err(Error::bad_input(format!(
            "different scenarios: {} ran {} ({}), {} ran {} ({}); compare two runs of one scenario",
            a.display(),
            ma.scenario,
            ma.model,
            b.display(),
            mb.scenario,
            mb.model
        )));
    }
    if ma.grid_points != mb.grid_points || ma.axes != mb.axes {
        return Err(Error::bad_input(format!(
            "different grids: {} has {} grid points over {:?}, {} has {} over {:?}",
            a.display(),
            ma.grid_points,
            ma.axes,
            b.display(),
            mb.grid_points,
            mb.axes
        )));
    }
    if ma.metrics != mb.metrics {
        let only = |x: &[String], y: &[String]| x.iter().filter(|m| !y.contains(m)).cloned().collect::<Vec<_>>();
        return Err(Error::bad_input(format!(
            "different metrics: only in {}: {:?}; only in {}: {:?}",
            a.display(),
            only(&ma.metrics, &mb.metrics),
            b.display(),
            only(&mb.metrics, &ma.metrics)
        )));
    }
    let few: Vec<String> = [(a, ma.replicas), (b, mb.replicas)]
        .iter()
        .filter(|(_, n)| *n < 2)
        .map(|(dir, n)| format!("{} has {n} replica{} a grid point", dir.display(), if *n == 1 { "" } else { "s" }))
        .collect();
    if !few.is_empty() {
        return Err(Error::bad_input(format!(
            "compare: {}; a test needs at least 2 replicas a point on each side, so nothing could be tested (a gate \
             that tests nothing does not pass)",
            few.join(" and ")
        ))
        .with_hint("run both sides with --replicas 2 or more (30 or more gives useful power)"));
    }
    Ok(())
}

/// Each of `expressions` as (its text, its value per replica row of A and of B),
/// computed from `metrics` (each metric's column on each side, in the runs' order).
/// An expression the runs already wrote as a column (`run --metric 'a / b'`), or one
/// given twice, is compared once: a second row would be listed twice and counted
/// twice by Holm's correction (issue 72).
fn expression_values(
    metrics: &[(String, [Vec<f64>; 2])],
    expressions: &[String],
) -> Result<Vec<(String, [Vec<f64>; 2])>> {
    let names: Vec<&str> = metrics.iter().map(|(name, _)| name.as_str()).collect();
    let mut parsed = expressions
        .iter()
        .map(|text| MetricExpr::parse(text, &names, "--metric"))
        .collect::<stampede_scenario::Result<Vec<_>>>()?;
    let mut seen: Vec<String> = Vec::new();
    parsed.retain(|expr| {
        let new = !names.contains(&expr.text.as_str()) && !seen.contains(&expr.text);
        seen.push(expr.text.clone());
        new
    });
    // An expression's value per replica row: every metric's column, row by row.
    let computed = |side: usize, expr: &MetricExpr| -> Vec<f64> {
        let rows = metrics.first().map_or(0, |(_, values)| values[side].len());
        (0..rows).map(|row| expr.eval(&metrics.iter().map(|(_, c)| c[side][row]).collect::<Vec<f64>>())).collect()
    };
    Ok(parsed.iter().map(|expr| (expr.text.clone(), [computed(0, expr), computed(1, expr)])).collect())
}

/// Where a replica table's rows lie: each row's grid point and replica.
struct ReplicaPlaces {
    points: Vec<f64>,
    replicas: Vec<f64>,
}

impl ReplicaPlaces {
    fn of(table: &Table) -> Result<ReplicaPlaces> {
        Ok(ReplicaPlaces {
            points: table.numbers("grid_point").map_err(io)?,
            replicas: table.numbers("replica").map_err(io)?,
        })
    }

    /// Grid point `point`'s (replica, value) pairs, whose values by row are `values`,
    /// in replica order.
    fn of_point(&self, point: u32, values: &[f64]) -> Vec<(u64, f64)> {
        let mut rows: Vec<(u64, f64)> = (0..self.points.len())
            .filter(|&i| self.points[i] == f64::from(point))
            .map(|i| (self.replicas[i] as u64, values[i]))
            .collect();
        rows.sort_by_key(|(replica, _)| *replica);
        rows
    }
}

/// Holm's correction over every tested row. A metric that measures the run rather
/// than the system (`events`: how much work the simulation did) is listed, not tested:
/// it changes with the code, not the behaviour. Refused when nothing could be tested.
fn mark_significant(rows: &mut [Row], alpha: f64) -> Result<()> {
    let p: Vec<f64> = rows
        .iter()
        .map(|r| if RUN_METRICS.contains(&r.metric.as_str()) { f64::NAN } else { r.difference.p_mean })
        .collect();
    if !rows.is_empty() && p.iter().all(|p| p.is_nan()) {
        return Err(Error::bad_input(format!(
            "compare: none of the {} (grid point, metric) pairs could be tested (each has fewer than 2 defined \
             values on a side); a gate that tests nothing does not pass",
            rows.len()
        )));
    }
    for (row, significant) in rows.iter_mut().zip(holm(&p, alpha)) {
        row.significant = significant;
    }
    Ok(())
}

/// Per point and latency, its p50, p99 and p99.9 with their intervals in A and in B.
fn latency_rows(fa: &Folder, fb: &Folder, infos: &[crate::blocks::PointInfo]) -> Vec<LatencyRow> {
    let mut latencies = Vec::new();
    for info in infos {
        for latency in &fa.manifest.latencies {
            let column = |folder: &Folder, suffix: &str| -> [f64; 3] {
                let table = &folder.histograms;
                let (Ok(points), Ok(names)) = (table.numbers("grid_point"), table.strings("metric")) else {
                    return [f64::NAN; 3];
                };
                let row = (0..points.len()).find(|&i| points[i] == f64::from(info.index) && names[i] == *latency);
                ["p50_s", "p99_s", "p999_s"].map(|c| {
                    row.and_then(|i| table.numbers(&format!("{c}{suffix}")).ok().map(|v| v[i])).unwrap_or(f64::NAN)
                })
            };
            let interval = |folder: &Folder| -> [(f64, f64); 3] {
                let (lo, hi) = (column(folder, "_ci_lo"), column(folder, "_ci_hi"));
                [0, 1, 2].map(|k| (lo[k], hi[k]))
            };
            latencies.push(LatencyRow {
                point: info.index,
                latency: latency.clone(),
                a: column(fa, ""),
                b: column(fb, ""),
                a_ci: interval(fa),
                b_ci: interval(fb),
            });
        }
    }
    latencies
}

/// Latency over time in [from, to): per point and timed request kind, each latency
/// window starting there, every request's p50 and p99 in A and in B with their
/// intervals (from `timeseries.parquet`). Bad input when neither run has such a window.
fn window_rows(
    fa: &Folder,
    fb: &Folder,
    infos: &[crate::blocks::PointInfo],
    from: f64,
    to: f64,
) -> Result<Vec<LatencyRow>> {
    let kinds = &fa.manifest.timed;
    let (Some(ta), Some(tb)) = (fa.timeseries.as_ref(), fb.timeseries.as_ref()) else {
        return Err(Error::bad_input("--window: these runs keep no latency over time (a model without time series, or folders written before 0.7)"));
    };
    if kinds.is_empty() {
        return Err(Error::bad_input("--window: these runs keep no latency over time"));
    }
    let mut rows = Vec::new();
    for info in infos {
        let (sa, sb) = (window_starts(ta, info.index), window_starts(tb, info.index));
        let inside: Vec<(f64, usize)> = sa.iter().copied().filter(|(t, _)| *t >= from && *t < to).collect();
        if inside.is_empty() {
            return Err(no_window_in(from, to, info.index, &sa));
        }
        for kind in kinds {
            for &(start, row_a) in &inside {
                let Some(&(_, row_b)) = sb.iter().find(|(t, _)| *t == start) else { continue };
                let ((a, a_ci), (b, b_ci)) = (window_side(ta, kind, row_a), window_side(tb, kind, row_b));
                rows.push(LatencyRow {
                    point: info.index,
                    latency: format!("{kind} all @ {} s", short(start)),
                    a,
                    b,
                    a_ci,
                    b_ci,
                });
            }
        }
    }
    Ok(rows)
}

/// A grid point's latency windows in a timeseries table: each window's start and
/// its first row, in order.
fn window_starts(table: &Table, point: u32) -> Vec<(f64, usize)> {
    let (Ok(points), Ok(t)) = (table.numbers("grid_point"), table.numbers("latency_window_t_s")) else {
        return Vec::new();
    };
    let mut found: Vec<(f64, usize)> = Vec::new();
    for row in (0..points.len()).filter(|&r| points[r] == f64::from(point)) {
        if found.last().is_none_or(|(start, _)| *start != t[row]) {
            found.push((t[row], row));
        }
    }
    found
}

/// `--window FROM,TO` holds no window of grid point `point`: where its windows start.
fn no_window_in(from: f64, to: f64, point: u32, starts: &[(f64, usize)]) -> Error {
    let starts = match starts {
        [] => "nowhere".to_string(),
        [only] => format!("{} s", short(only.0)),
        [first, second, .., last] => format!("{}, {}, …, {} s", short(first.0), short(second.0), short(last.0)),
        [first, last] => format!("{} and {} s", short(first.0), short(last.0)),
    };
    Error::bad_input(format!(
        "--window {from},{to}: no latency window of grid point {point} starts in it; its windows start at {starts}"
    ))
}

/// One side's p50 and p99 of `kind` in the window at `row`, with their intervals
/// (the third quantile of a [`LatencyRow`] is not kept per window: NaN).
fn window_side(table: &Table, kind: &str, row: usize) -> ([f64; 3], [(f64, f64); 3]) {
    let read = |column: &str| table.numbers(column).map_or(f64::NAN, |v| v[row]);
    let q = ["p50_all", "p99_all"].map(|p| crate::data::window_quantile_column(table, kind, p));
    let value = [read(&q[0]), read(&q[1]), f64::NAN];
    let ci = [0, 1, 2].map(|k| match q.get(k) {
        Some(c) => (read(&format!("{c}_ci_lo")), read(&format!("{c}_ci_hi"))),
        None => (f64::NAN, f64::NAN),
    });
    (value, ci)
}

/// A window row's p99 difference B − A with its interval, as JSON.
fn window_difference(l: &LatencyRow) -> Value {
    let (d, lo, hi) = l.difference(1);
    json!({"b_minus_a": json_number(d), "ci_lo": json_number(lo), "ci_hi": json_number(hi)})
}

/// A number in a few significant digits.
fn short(x: f64) -> String {
    if x.is_nan() {
        "n/a".into()
    } else if x == 0.0 || (x.abs() >= 1e-3 && x.abs() < 1e6) {
        format!("{:.4}", x).trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        format!("{x:.3e}")
    }
}

/// A p-value: below what a double can tell from 0, say so.
fn p_value(p: f64) -> String {
    if p.is_nan() {
        "n/a".into()
    } else if p < 1e-15 {
        "< 1e-15".into()
    } else {
        format!("{p:.2e}")
    }
}

/// Three quantiles as `p50 / p99 / p99.9`.
fn quantiles(q: [f64; 3]) -> String {
    q.map(short).join(" / ")
}

fn signed(x: f64) -> String {
    if x > 0.0 {
        format!("+{}", short(x))
    } else {
        short(x)
    }
}

/// See [`Row::heading`].
fn numbered(point: u32, label: &str) -> String {
    let number = format!("#{point}");
    // A label that is the number, or starts with it (`#0 b-nearest · db errors`), says it once.
    let starts_with_number =
        label.strip_prefix(number.as_str()).is_some_and(|rest| rest.is_empty() || rest.starts_with(' '));
    if label.is_empty() {
        number
    } else if starts_with_number {
        label.to_string()
    } else {
        format!("{number} {label}")
    }
}

#[cfg(test)]
#[test]
fn a_row_says_its_number_once() {
    assert_eq!(numbered(3, "naive"), "#3 naive");
    assert_eq!(numbered(0, "#0"), "#0");
    assert_eq!(numbered(0, "#0 b-nearest · db errors"), "#0 b-nearest · db errors", "issue 71: not #0 #0 b-nearest");
    assert_eq!(numbered(1, "#10 x"), "#1 #10 x", "another number is part of the label");
}

impl Row {
    /// "#3 naive" — the point's number and its label, the number once when the label
    /// is only the number or starts with it (`#0`, not `#0 #0`; `#0 b-nearest · db
    /// errors`, not `#0 #0 b-nearest…`).
    fn heading(&self) -> String {
        numbered(self.point, &self.label)
    }

    /// Tested: not a metric of the run itself, and enough defined values on each side.
    fn tested(&self) -> bool {
        !RUN_METRICS.contains(&self.metric.as_str()) && !self.difference.p_mean.is_nan()
    }

    /// A change: significant, and beyond the tolerance when one is given.
    fn is_change(&self, tolerance: Option<f64>) -> bool {
        self.significant && (tolerance.is_none() || self.beyond_tolerance)
    }

    /// `  (defined in 1 of 1000 replicas of A: not compared)` when a side's metric is
    /// partial; empty otherwise.
    fn coverage(&self) -> String {
        let d = &self.difference;
        let mut sides = Vec::new();
        if d.n_a < d.replicas_a {
            sides.push(format!("{} of {} replicas of A", d.n_a, d.replicas_a));
        }
        if d.n_b < d.replicas_b {
            sides.push(format!("{} of {} of B", d.n_b, d.replicas_b));
        }
        match (sides.is_empty(), d.partial()) {
            (true, _) => String::new(),
            (false, true) => format!("  (defined in {}: not compared)", sides.join(", ")),
            (false, false) => format!("  (defined in {})", sides.join(", ")),
        }
    }

    /// A, B, B − A, its interval's ends, p and the rank test's p, as shown.
    fn figures(&self) -> [String; 7] {
        let d = &self.difference;
        [
            short(d.mean_a),
            short(d.mean_b),
            signed(d.diff),
            signed(d.lo),
            signed(d.hi),
            p_value(d.p_mean),
            p_value(d.p_rank),
        ]
    }
}

impl Comparison {
    /// The rows that count as a change: significant, and beyond the tolerance when one is given.
    pub fn changes(&self) -> impl Iterator<Item = &Row> {
        self.rows.iter().filter(|r| r.is_change(self.tolerance))
    }

    /// True when anything changed (the command exits 1).
    pub fn changed(&self) -> bool {
        self.changes().next().is_some()
    }

    fn tests(&self) -> usize {
        self.rows.iter().filter(|r| r.tested()).count()
    }

    /// GitHub Actions workflow commands: an `::error` per change, so a changed night
    /// shows what moved on the run's summary.
    pub fn github_annotations(&self) -> String {
        self.changes()
            .map(|r| {
                let [a, b, diff, lo, hi, p, _] = r.figures();
                format!(
                    "::error title=stampede compare {}: {} {} changed::{a} → {b}, B − A = {diff} [{lo}, {hi}], p = {p}\n",
                    self.scenario,
                    r.heading(),
                    r.metric
                )
            })
            .collect()
    }

    /// JUnit XML: a testcase per (grid point, metric) tested, named by the pair (never
    /// a measured value), a `<failure>` for each change.
    pub fn to_junit(&self) -> String {
        let tested: Vec<&Row> = self.rows.iter().filter(|r| r.tested()).collect();
        let failures = tested.iter().filter(|r| r.is_change(self.tolerance)).count();
        let suite = format!(
            "name=\"{}\" tests=\"{}\" failures=\"{failures}\" errors=\"0\" skipped=\"0\"",
            escape(&format!("stampede compare {}", self.scenario)),
            tested.len()
        );
        let mut xml =
            format!("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites {suite}>\n  <testsuite {suite}>\n");
        let classname = escape(&format!("stampede.compare.{}", self.scenario));
        for r in tested {
            let [a, b, diff, lo, hi, p, _] = r.figures();
            let measured = format!("{a} → {b}, B − A = {diff} [{lo}, {hi}], p = {p}");
            let name = escape(&format!("{} {}", r.heading(), r.metric));
            if r.is_change(self.tolerance) {
                xml.push_str(&format!(
                    "    <testcase classname=\"{classname}\" name=\"{name}\">\n      <failure message=\"changed: {}\" type=\"change\"/>\n    </testcase>\n",
                    escape(&measured)
                ));
            } else {
                xml.push_str(&format!(
                    "    <testcase classname=\"{classname}\" name=\"{name}\">\n      <system-out>{}</system-out>\n    </testcase>\n",
                    escape(&measured)
                ));
            }
        }
        xml.push_str("  </testsuite>\n</testsuites>\n");
        xml
    }

    /// "27 tests", or "25 tests (2 untested: defined in under half of a side's
    /// replicas, or fewer than 2 values)".
    fn tests_said(&self) -> String {
        let untested = self.rows.len() - self.tests();
        if untested == 0 {
            format!("{} tests", self.tests())
        } else {
            format!(
                "{} tests ({untested} untested: defined in under half of a side's replicas, or in fewer than 2)",
                self.tests()
            )
        }
    }

    fn method(&self) -> String {
        if self.paired {
            "paired on replica index (same seed: common random numbers)".into()
        } else {
            "Welch's two-sample t (different seeds)".into()
        }
    }

    /// The terminal answer: what changed, then (with `all`) every row, then latencies.
    pub fn render(&self, all: bool) -> String {
        let mut out = format!(
            "compare {} → {}: scenario {}; differences of the means B − A, {}; Holm-corrected at α = {} over {}{}\n",
            self.a.display(),
            self.b.display(),
            self.scenario,
            self.method(),
            self.alpha,
            self.tests_said(),
            self.tolerance.map_or(String::new(), |t| format!("; a change must also exceed {}% of A's mean", t * 100.0))
        );
        if self.differences.is_empty() {
            out.push_str("the two scenarios are identical\n");
        } else {
            out.push_str(&format!("the scenarios differ in: {}\n", self.differences.join("; ")));
        }
        // Columns as wide as their longest entry, so long labels keep the figures aligned.
        let heading_width = self.rows.iter().map(|r| r.heading().chars().count()).max().unwrap_or(0);
        let metric_width = self.rows.iter().map(|r| r.metric.chars().count()).max().unwrap_or(0);
        let line = |r: &Row| {
            let [a, b, diff, lo, hi, p, p_rank] = r.figures();
            format!(
                "  {:<heading_width$} {:<metric_width$} {a} → {b}   {diff} [{lo}, {hi}]   p = {p} (rank test p = {p_rank}){}{}{}{}\n",
                r.heading(),
                r.metric,
                if r.significant { "  significant" } else { "" },
                if r.beyond_tolerance { "  beyond tolerance" } else { "" },
                r.coverage(),
                if RUN_METRICS.contains(&r.metric.as_str()) { "  (measures the run: not tested)" } else { "" }
            )
        };
        let changes: Vec<&Row> = self.changes().collect();
        if changes.is_empty() {
            out.push_str("no significant change\n");
        } else {
            out.push_str(&format!("changed ({}):\n", changes.len()));
            changes.iter().for_each(|r| out.push_str(&line(r)));
        }
        if all {
            out.push_str("every metric:\n");
            self.rows.iter().for_each(|r| out.push_str(&line(r)));
        }
        out.push_str(&self.render_latencies());
        out.push_str(if self.changed() { "verdict: changed (exit 1)\n" } else { "verdict: no change (exit 0)\n" });
        out
    }

    /// The latency quantiles A → B, then (with a window) latency over time in it.
    fn render_latencies(&self) -> String {
        let mut out = String::new();
        if !self.latencies.is_empty() {
            out.push_str(
                "latency quantiles A → B (p50 / p99 / p99.9, seconds, pooled over replicas; the p99's B − A with its 95% interval):\n",
            );
            let width = self.latencies.iter().map(|l| l.latency.chars().count()).max().unwrap_or(0);
            for l in &self.latencies {
                let (d, lo, hi) = l.difference(1);
                out.push_str(&format!(
                    "  #{} {:<width$} {}  →  {}   p99 {} [{}, {}]\n",
                    l.point,
                    l.latency,
                    quantiles(l.a),
                    quantiles(l.b),
                    signed(d),
                    signed(lo),
                    signed(hi)
                ));
            }
        }
        if let Some((from, to)) = self.window {
            out.push_str(&format!(
                "latency over time in [{}, {}) s, every request (p50 / p99 per window A → B, seconds, pooled over \
                 replicas; the p99's B − A with its 95% interval):\n",
                short(from),
                short(to)
            ));
            let width = self.windows.iter().map(|l| l.latency.chars().count()).max().unwrap_or(0);
            for l in &self.windows {
                let (d, lo, hi) = l.difference(1);
                out.push_str(&format!(
                    "  #{} {:<width$} {} / {}  →  {} / {}   p99 {} [{}, {}]\n",
                    l.point,
                    l.latency,
                    short(l.a[0]),
                    short(l.a[1]),
                    short(l.b[0]),
                    short(l.b[1]),
                    signed(d),
                    signed(lo),
                    signed(hi)
                ));
            }
        }
        out
    }

    /// The `--json` document.
    pub fn to_json(&self) -> Value {
        json!({
            "a": self.a.display().to_string(),
            "b": self.b.display().to_string(),
            "scenario": self.scenario,
            "paired": self.paired,
            "method": self.method(),
            "correction": "holm",
            "alpha": self.alpha,
            "tolerance": self.tolerance,
            "tests": self.tests(),
            "changed": self.changed(),
            "scenario_differences": self.differences,
            "rows": self.rows.iter().map(|r| {
                let d = &r.difference;
                json!({
                    "grid_point": r.point, "label": r.label, "metric": r.metric,
                    "n_a": d.n_a, "n_b": d.n_b, "replicas_a": d.replicas_a, "replicas_b": d.replicas_b,
                    "mean_a": json_number(d.mean_a), "mean_b": json_number(d.mean_b),
                    "diff": json_number(d.diff), "ci_lo": json_number(d.lo), "ci_hi": json_number(d.hi),
                    "paired": d.paired, "p_mean": json_number(d.p_mean), "p_rank": json_number(d.p_rank),
                    "significant": r.significant, "beyond_tolerance": r.beyond_tolerance,
                })
            }).collect::<Vec<_>>(),
            "windows": self.windows.iter().map(|l| json!({
                "grid_point": l.point, "latency": l.latency,
                "a": [json_number(l.a[0]), json_number(l.a[1])], "b": [json_number(l.b[0]), json_number(l.b[1])],
                "p99_difference": window_difference(l),
            })).collect::<Vec<_>>(),
            "latencies": self.latencies.iter().map(|l| json!({
                "grid_point": l.point, "latency": l.latency,
                "a": l.a.map(json_number), "b": l.b.map(json_number),
                "a_ci": l.a_ci.map(|(lo, hi)| [json_number(lo), json_number(hi)]),
                "b_ci": l.b_ci.map(|(lo, hi)| [json_number(lo), json_number(hi)]),
                "difference": (0..3).map(|k| {
                    let (d, lo, hi) = l.difference(k);
                    json!({"b_minus_a": json_number(d), "ci_lo": json_number(lo), "ci_hi": json_number(hi)})
                }).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
        })
    }

    /// A self-contained HTML page of the differences (nothing is loaded from anywhere).
    pub fn html(&self) -> String {
        let rows: String = self
            .rows
            .iter()
            .map(|r| {
                let class = if r.is_change(self.tolerance) { " class=\"changed\"" } else { "" };
                let [a, b, diff, lo, hi, p, p_rank] = r.figures();
                format!(
                    "<tr{class}><td>{}</td><td>{}</td><td>{a}</td><td>{b}</td><td>{diff} [{lo}, {hi}]</td><td>{p}</td><td>{p_rank}</td><td>{}{}</td></tr>",
                    escape(&r.heading()),
                    escape(&r.metric),
                    match (r.significant, r.beyond_tolerance) {
                        (true, true) => "significant, beyond tolerance",
                        (true, false) => "significant",
                        (false, true) => "beyond tolerance (not significant)",
                        (false, false) => "",
                    },
                    escape(r.coverage().trim())
                )
            })
            .collect();
        let latencies: String = self
            .latencies
            .iter()
            .map(|l| {
                let (d, lo, hi) = l.difference(1);
                format!(
                    "<tr><td>#{}</td><td>{}</td><td>{}</td><td>{}</td><td>{} [{}, {}]</td></tr>",
                    l.point,
                    escape(&l.latency),
                    quantiles(l.a),
                    quantiles(l.b),
                    signed(d),
                    signed(lo),
                    signed(hi)
                )
            })
            .collect();
        format!(
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n\
             <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">\n\
             <meta name=\"generator\" content=\"stampede {}\">\n<title>stampede compare: {}</title><style>body{{font:15px/1.45 system-ui,sans-serif;max-width:1200px;margin:2em auto;padding:0 1em}}\
             table{{border-collapse:collapse}}td,th{{border-bottom:1px solid #ddd;padding:.25em .6em;text-align:left}}\
             tr.changed td{{background:#fde8e4;font-weight:600}}</style></head>\n\
             <body><h1>stampede compare: {}</h1><p>A = <code>{}</code><br>B = <code>{}</code></p>\
             <p><strong>{}</strong>. Differences of the means B − A with 95% intervals, {}; Holm-corrected at α = {} over {}{}. \
             The rank test is Mann–Whitney's on the per-replica values.</p><p>{}</p>\
             <table><tr><th>grid point</th><th>metric</th><th>A</th><th>B</th><th>B − A [95%]</th><th>p</th><th>rank p</th><th></th></tr>{rows}</table>\
             <h2>Latency quantiles (p50 / p99 / p99.9, seconds)</h2>\
             <table><tr><th>grid point</th><th>latency</th><th>A</th><th>B</th><th>p99 B − A [95%]</th></tr>{latencies}</table></body></html>\n",
            env!("CARGO_PKG_VERSION"),
            escape(&self.scenario),
            escape(&self.scenario),
            escape(&self.a.display().to_string()),
            escape(&self.b.display().to_string()),
            if self.changed() { "Changed" } else { "No significant change" },
            self.method(),
            self.alpha,
            escape(&self.tests_said()),
            self.tolerance.map_or(String::new(), |t| format!("; a change must also exceed {}% of A's mean", t * 100.0)),
            if self.differences.is_empty() {
                "The two scenarios are identical.".to_string()
            } else {
                format!("The scenarios differ in: {}.", escape(&self.differences.join("; ")))
            },
        )
    }
}
