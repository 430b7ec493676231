//! `[[verify]]` claims as written: a bound on one statistic of one metric at one
//! grid point, fixed or relative to another point. The statistic is either about the
//! mean over replicas (`mean`, `ci_lo`, `ci_hi`: the mean and its 95% Student-t
//! interval) or about the replicas themselves: a quantile across replicas (`min`,
//! `p05` … `p99`, `max`), or the fraction of replicas whose value lies within
//! `replica_at_least`/`replica_at_most` (`fraction`, and its 95% Wilson interval
//! `fraction_ci_lo`/`fraction_ci_hi`). A replica whose value is undefined (NaN, such as
//! the recovery time of a replica that never recovered) ranks above every value and
//! never meets a bound.
//!
//! A claim may bound a latency quantile instead of a metric: `latency` names a
//! histogram of `histograms.parquet` (`front.read.latency_all_s`: every request,
//! failures counted), `quantile` the percentile, and `window = [a, b]` optionally the
//! seconds the requests ended in (read from the latency windows of
//! `timeseries.parquet`); the quantile is pooled over the point's replicas, with its
//! sectioning interval over batches of replicas.
//!
//! Their shape is checked when the scenario is resolved; whether their grid points
//! exist and intervals can exist is checked by `verify` before it runs
//! ([`Assertion::check_for_run`]); the run crate's `verify` evaluates them.

use serde::{Deserialize, Serialize};

use crate::base::error::{Error, Result};

use super::grid::{Found, GridView};
use super::selector::{describe_wanted, wanted_by_name};

/// Which statistic of a metric an assertion bounds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Statistic {
    Mean,
    CiLo,
    CiHi,
    Min,
    P05,
    P10,
    P50,
    P90,
    P95,
    P99,
    Max,
    Fraction,
    FractionCiLo,
    FractionCiHi,
    /// Not written: a latency claim's pooled quantile (and, in a metric claim, the
    /// mark that `statistic` is missing).
    #[default]
    Pooled,
}

fn is_pooled(statistic: &Statistic) -> bool {
    *statistic == Statistic::Pooled
}

impl Statistic {
    /// The name as written in scenarios.
    pub fn name(self) -> &'static str {
        match self {
            Statistic::Mean => "mean",
            Statistic::CiLo => "ci_lo",
            Statistic::CiHi => "ci_hi",
            Statistic::Min => "min",
            Statistic::P05 => "p05",
            Statistic::P10 => "p10",
            Statistic::P50 => "p50",
            Statistic::P90 => "p90",
            Statistic::P95 => "p95",
            Statistic::P99 => "p99",
            Statistic::Max => "max",
            Statistic::Fraction => "fraction",
            Statistic::FractionCiLo => "fraction_ci_lo",
            Statistic::FractionCiHi => "fraction_ci_hi",
            Statistic::Pooled => "pooled",
        }
    }

    /// The quantile across replicas this statistic is, if it is one.
    pub fn quantile(self) -> Option<f64> {
        match self {
            Statistic::Min => Some(0.0),
            Statistic::P05 => Some(0.05),
            Statistic::P10 => Some(0.10),
            Statistic::P50 => Some(0.50),
            Statistic::P90 => Some(0.90),
            Statistic::P95 => Some(0.95),
            Statistic::P99 => Some(0.99),
            Statistic::Max => Some(1.0),
            _ => None,
        }
    }

    /// A fraction of replicas meeting a per-replica bound.
    pub fn is_fraction(self) -> bool {
        matches!(self, Statistic::Fraction | Statistic::FractionCiLo | Statistic::FractionCiHi)
    }

    /// An interval end: needs at least two replicas.
    pub(crate) fn is_interval(self) -> bool {
        matches!(self, Statistic::CiLo | Statistic::CiHi | Statistic::FractionCiLo | Statistic::FractionCiHi)
    }

    /// Computed from every replica's value rather than from the summary.
    pub fn reads_replicas(self) -> bool {
        self.quantile().is_some() || self.is_fraction()
    }
}

/// What a parsed claim without `grid_point` holds until the scenario is resolved, which
/// makes it 0 when the grid has one point and refuses it otherwise.
pub(crate) const UNNAMED_POINT: u32 = u32::MAX;

fn unnamed_point() -> u32 {
    UNNAMED_POINT
}

/// A `[[verify]]` entry: a bound on one statistic of one metric at one grid point.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Assertion {
    /// May be left out when the grid has one point (see [`Assertion::name_the_point`]).
    /// Written, a point of the file's grid; once resolved, of the run's (see
    /// [`super::selector`]).
    #[serde(default = "unnamed_point", skip_serializing_if = "is_unnamed")]
    pub grid_point: u32,
    /// The point by its case label instead of its index.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub case: Option<String>,
    /// The point by axis values (beside `case`, or alone): `{ "faults.0.duration_s" = 2 }`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub point: Option<toml::Table>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub metric: String,
    #[serde(default, skip_serializing_if = "is_pooled")]
    pub statistic: Statistic,
    /// Instead of `metric`: a latency histogram, bounded by its `quantile` (a
    /// percentage) pooled over replicas, of the requests that ended in `window`
    /// (seconds; the whole run after warm-up without one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quantile: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<[f64; 2]>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_least: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_most: Option<f64>,
    /// The statistic must exceed `factor` × a statistic of the same metric at another point.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub above: Option<Relative>,
    /// The statistic must stay below `factor` × a statistic of the same metric at another point.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub below: Option<Relative>,
    /// For `fraction…`: a replica counts if its value is at least this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica_at_least: Option<f64>,
    /// For `fraction…`: a replica counts if its value is at most this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica_at_most: Option<f64>,
    /// With `within`, for `statistic = "mean"`: the mean's 95% interval must meet the
    /// band `near × (1 ± within)` — "the model agrees with theory to within 5%", a claim
    /// that fails when the model is off, not on 5% of seeds as "the interval covers the
    /// value" does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub near: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub within: Option<f64>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub note: String,
    /// Why this run cannot check the claim: a point it names is not in the run's
    /// grid, or is several of its points (set when the claim follows its point).
    #[serde(skip)]
    pub not_here: Option<String>,
    /// The point as the file names it (`case "breaker"`, `grid point 1`; empty for the
    /// only point): the claim's identity whatever the run's grid (JUnit names it so).
    #[serde(skip)]
    pub written: String,
}

fn is_unnamed(point: &u32) -> bool {
    *point == UNNAMED_POINT
}

/// The latencies a model writes, as claims may name them: every histogram, and those
/// kept over time too (a `window` can read only these).
#[derive(Clone, Debug, Default)]
pub struct LatencyNames<'a> {
    pub histograms: &'a [&'a str],
    pub over_time: Vec<String>,
}

/// Another grid point's statistic of the same metric, times `factor` — for claims
/// that are differences (`statistic = "ci_lo"`, `above = { grid_point = 0,
/// statistic = "ci_hi" }` says the two intervals do not overlap).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Relative {
    #[serde(default = "unnamed_point", skip_serializing_if = "is_unnamed")]
    pub grid_point: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub case: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub point: Option<toml::Table>,
    pub statistic: Statistic,
    /// The other point as the file names it (see [`Assertion::written`]).
    #[serde(skip)]
    pub written: String,
    #[serde(default = "unit_factor")]
    pub factor: f64,
}

fn unit_factor() -> f64 {
    1.0
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Assertions {
    pub(crate) verify: Vec<Assertion>,
}

/// Why `verify` leaves a claim out on this run.
#[derive(Clone, Debug, PartialEq)]
pub struct Skipped {
    /// Its position in `[[verify]]`.
    pub index: usize,
    pub why: String,
}

impl Assertion {
    /// Checks the claim's shape against a model's `metrics` (of model `model`):
    /// a known metric, at least one bound, bounds that can hold. `path` names it in
    /// messages (`verify[2]`).
    /// A claim that names no grid point is about the only one; with several, which one
    /// it is about must be said.
    pub(crate) fn name_the_point(&mut self, path: &str, points: u32) -> Result<()> {
        if self.grid_point != UNNAMED_POINT || self.not_here.is_some() {
            return Ok(());
        }
        if points != 1 {
            return Err(Error::bad_input(format!(
                "{path}: no grid_point, and this run's grid has {points} points (0 to {}): say which one the claim \
                 is about (grid_point = 0, …)",
                points - 1
            )));
        }
        self.grid_point = 0;
        Ok(())
    }

    pub fn check(&self, path: &str, metrics: &[&str], latencies: &LatencyNames, model: &str) -> Result<()> {
        if let Some(latency) = &self.latency {
            return self.check_latency(path, latency, latencies, model);
        } else if self.metric.is_empty() {
            return Err(Error::bad_input(format!(
                "{path}: name a metric (metric = \"…\" with statistic = \"mean\", …) or a latency (latency = \"…\" \
                 with quantile = 99)"
            )));
        } else if self.statistic == Statistic::Pooled {
            return Err(Error::bad_input(format!(
                "{path}: metric = {:?} needs a statistic: mean, ci_lo, ci_hi, min, p05 … p99, max, fraction, \
                 fraction_ci_lo or fraction_ci_hi",
                self.metric
            )));
        } else if let Some(field) = [("quantile", self.quantile.is_some()), ("window", self.window.is_some())]
            .into_iter()
            .find_map(|(field, set)| set.then_some(field))
        {
            return Err(Error::bad_input(format!(
                "{path}.{field}: belongs to a latency claim (latency = \"…\"); a metric claim's statistic says \
                 what it bounds"
            )));
        }
        self.check_metric_known(path, metrics, model)?;
        self.check_bounds(path)?;
        for (side, relative) in [("above", &self.above), ("below", &self.below)] {
            if let Some(relative) = relative {
                if !(relative.factor.is_finite() && relative.factor > 0.0) {
                    return Err(Error::bad_input(format!(
                        "{path}.{side}.factor = {}: must be a positive number",
                        relative.factor
                    )));
                }
            }
        }
        Ok(())
    }

    /// The claim's metric is one of the model's (a renamed edge metric says its new name).
    fn check_metric_known(&self, path: &str, metrics: &[&str], model: &str) -> Result<()> {
        if metrics.contains(&self.metric.as_str()) {
            return Ok(());
        }
        // A graph's edge metrics were `edge.A->B.…` in 0.6; the arrow alone marks an edge now.
        if let Some(renamed) = self.metric.strip_prefix("edge.").filter(|m| m.contains("->") && metrics.contains(m)) {
            return Err(Error::bad_input(format!(
                "{path}.metric = {:?}: edge metrics are named without `edge.` now: {renamed:?}",
                self.metric
            )));
        }
        Err(Error::bad_input(format!(
            "{path}.metric = {:?}: not a metric of model {model}; its metrics: {}",
            self.metric,
            metrics.join(", ")
        )))
    }

    /// A metric claim's bounds: at least one; near with within on the mean; each pair
    /// of bounds in order; per-replica bounds exactly with a fraction statistic.
    fn check_bounds(&self, path: &str) -> Result<()> {
        if self.at_least.is_none()
            && self.at_most.is_none()
            && self.above.is_none()
            && self.below.is_none()
            && self.near.is_none()
        {
            return Err(Error::bad_input(format!(
                "{path}: needs at least one of at_least, at_most, above, below, near (with within)"
            )));
        }
        match (self.near, self.within) {
            (None, None) => {}
            (Some(near), Some(within)) => {
                if !near.is_finite() || !(0.0..1.0).contains(&within) {
                    return Err(Error::bad_input(format!(
                        "{path}: near = {near}, within = {within}: a finite value and a share from 0 to below 1 \
                         (within = 0.05: the mean's interval meets near ± 5%)"
                    )));
                }
                if self.statistic != Statistic::Mean {
                    return Err(Error::bad_input(format!(
                        "{path}.statistic = {:?}: near/within judge the mean's 95% interval; use statistic = \"mean\"",
                        self.statistic.name()
                    )));
                }
            }
            _ => {
                return Err(Error::bad_input(format!(
                    "{path}: near and within go together (near = 10.0, within = 0.05: the mean is 10 within 5%)"
                )))
            }
        }
        bounds(path, "at_least", self.at_least, "at_most", self.at_most)?;
        bounds(path, "replica_at_least", self.replica_at_least, "replica_at_most", self.replica_at_most)?;
        let per_replica = self.replica_at_least.is_some() || self.replica_at_most.is_some();
        if self.statistic.is_fraction() && !per_replica {
            return Err(Error::bad_input(format!(
                "{path}.statistic = {:?}: a fraction of replicas needs replica_at_least and/or replica_at_most \
                 (the bound each replica must meet)",
                self.statistic.name()
            )));
        }
        if per_replica && !self.statistic.is_fraction() {
            return Err(Error::bad_input(format!(
                "{path}: replica_at_least/replica_at_most only apply to statistic = \"fraction\", \
                 \"fraction_ci_lo\" or \"fraction_ci_hi\" (here {:?})",
                self.statistic.name()
            )));
        }
        Ok(())
    }

    /// A latency claim's own shape: a histogram the model writes (an ending its
    /// requests can have), a percentage strictly between 0 and 100, fixed bounds, and
    /// a window of seconds on a request kind kept over time.
    fn check_latency(&self, path: &str, latency: &str, names: &LatencyNames, model: &str) -> Result<()> {
        let bad = |message: String| Err(Error::bad_input(message));
        if !self.metric.is_empty() {
            return bad(format!(
                "{path}: metric = {:?} and latency = {latency:?}: a claim bounds one or the other",
                self.metric
            ));
        }
        if self.statistic != Statistic::Pooled {
            return bad(format!(
                "{path}.statistic = {:?}: a latency claim bounds its quantile pooled over replicas (quantile = 99); \
                 statistic is for metrics",
                self.statistic.name()
            ));
        }
        known_latency(path, latency, names, model)?;
        let Some(quantile) = self.quantile else {
            return bad(format!(
                "{path}: latency = {latency:?} needs quantile, a percentage (99 for p99, 99.9 for p99.9)"
            ));
        };
        if !(quantile > 0.0 && quantile < 100.0) {
            return bad(format!(
                "{path}.quantile = {quantile}: a percentage strictly between 0 and 100 (99 for p99, 99.9 for p99.9)"
            ));
        }
        self.check_latency_bounds(path)?;
        if let Some([from, to]) = self.window {
            if !(from.is_finite() && to.is_finite() && 0.0 <= from && from < to) {
                return bad(format!(
                    "{path}.window = [{from}, {to}]: seconds from the run's start, the first below the second"
                ));
            }
            if !names.over_time.iter().any(|name| name == latency) {
                return bad(format!(
                    "{path}.window: {latency:?} is not kept over time; model {model} keeps over time: {}",
                    if names.over_time.is_empty() { "nothing".to_string() } else { names.over_time.join(", ") }
                ));
            }
        }
        Ok(())
    }

    /// A latency claim's bounds: at_least, at_most, or near with within — not the
    /// fields that compare points or count replicas, which are for metrics.
    fn check_latency_bounds(&self, path: &str) -> Result<()> {
        let bad = |message: String| Err(Error::bad_input(message));
        let set = [
            ("above", self.above.is_some()),
            ("below", self.below.is_some()),
            ("replica_at_least", self.replica_at_least.is_some()),
            ("replica_at_most", self.replica_at_most.is_some()),
        ];
        if let Some((field, _)) = set.iter().find(|(_, set)| *set) {
            return bad(format!(
                "{path}.{field}: not for a latency claim, which takes at_least, at_most, or near with within (its \
                 pooled quantile's 95% interval meets near ± within); compare two points' latencies with \
                 `stampede compare`"
            ));
        }
        if self.at_least.is_none() && self.at_most.is_none() && self.near.is_none() {
            return bad(format!("{path}: needs at least one of at_least, at_most, near (with within)"));
        }
        if let (Some(near), Some(within)) = (self.near, self.within) {
            if !near.is_finite() || !(0.0..1.0).contains(&within) {
                return bad(format!(
                    "{path}: near = {near}, within = {within}: a finite value and a share from 0 to below 1"
                ));
            }
        } else if self.near.is_some() || self.within.is_some() {
            return bad(format!("{path}: near and within go together (near = 0.2, within = 0.05)"));
        }
        bounds(path, "at_least", self.at_least, "at_most", self.at_most)
    }

    /// A latency claim's window as whole latency windows of `width_s` within a run of
    /// `horizon_s` (after its warm-up): the range of window indices, or why not.
    pub(crate) fn windows_of(
        &self,
        path: &str,
        width_s: f64,
        warmup_s: f64,
        horizon_s: f64,
    ) -> Result<Option<(usize, usize)>> {
        let Some([from, to]) = self.window else { return Ok(None) };
        if to > horizon_s || from < warmup_s {
            return Err(Error::bad_input(format!(
                "{path}.window = [{from}, {to}]: outside the measured run, from the warm-up ({warmup_s} s) to \
                 run.horizon_s ({horizon_s} s)"
            )));
        }
        let whole = |t: f64| {
            let k = t / width_s;
            ((k - k.round()).abs() < 1e-9 * k.abs().max(1.0)).then_some(k.round() as usize)
        };
        match (whole(from), whole(to)) {
            (Some(a), Some(b)) => Ok(Some((a, b))),
            _ => Err(Error::bad_input(format!(
                "{path}.window = [{from}, {to}]: the bounds must fall on the latency windows, every {width_s} s \
                 here (e.g. [{}, {}]); set [series] latency_window_s to choose them",
                (from / width_s).floor() * width_s,
                (to / width_s).ceil() * width_s
            ))),
        }
    }

    /// Whether `verify` can check the claim on a run of `points` grid points ×
    /// `replicas`: `Ok(None)` if it can, `Ok(Some(why))` if a grid point it names is
    /// not in this (narrowed) grid, an error if it can never hold here.
    pub(crate) fn check_for_run(&self, path: &str, points: usize, replicas: u32) -> Result<Option<String>> {
        if let Some(why) = &self.not_here {
            return Ok(Some(why.clone()));
        }
        let relatives = [&self.above, &self.below].into_iter().flatten();
        let missing =
            std::iter::once(self.grid_point).chain(relatives.map(|r| r.grid_point)).find(|&p| p as usize >= points);
        if let Some(point) = missing {
            return Ok(Some(format!("grid point {point} is not in this run's grid of {points} point(s)")));
        }
        let statistics = std::iter::once(self.statistic)
            .chain([&self.above, &self.below].into_iter().flatten().map(|r| r.statistic));
        if replicas < 2 {
            if let Some(statistic) = statistics.into_iter().find(|s| s.is_interval()) {
                return Err(Error::bad_input(format!(
                    "{path}.statistic = {:?}: a 95% interval needs at least 2 replicas, and this run has 1",
                    statistic.name()
                ))
                .with_hint("run with --replicas 2 or more"));
            }
        }
        Ok(None)
    }
}

impl Assertion {
    /// The band `near × (1 ± within)` a `near` claim's interval must meet.
    pub fn band(&self) -> Option<(f64, f64)> {
        let (near, within) = (self.near?, self.within?);
        let half = near.abs() * within;
        Some((near - half, near + half))
    }

    /// Follows the points the claim names from the file's grid into the run's (see
    /// [`super::selector`]): `grid_point`s become the run's indices, `case` and
    /// `point` are resolved to one; a point the run lacks (or has several of) leaves
    /// the claim `not_here`, saying why. Errors are the file's own: a point beyond its
    /// grid, a case or axis it does not have, a name that fits several of its points.
    pub fn follow(&mut self, path: &str, file: GridView, run: GridView) -> Result<()> {
        let mut why = None;
        let own = (self.grid_point, self.case.take(), self.point.take());
        self.written = written(&own);
        self.grid_point = follow_one(path, own, file, run, &mut why)?;
        for (side, relative) in [("above", &mut self.above), ("below", &mut self.below)] {
            if let Some(r) = relative {
                if r.grid_point == UNNAMED_POINT && r.case.is_none() && r.point.is_none() {
                    return Err(Error::bad_input(format!(
                        "{path}.{side}: name the other point, with grid_point = N or case = \"…\""
                    )));
                }
                let named = (r.grid_point, r.case.take(), r.point.take());
                r.written = written(&named);
                r.grid_point = follow_one(&format!("{path}.{side}"), named, file, run, &mut why)?;
            }
        }
        self.not_here = why;
        Ok(())
    }
}

/// A point as the file names it: `case "b", x.n = 2`, `grid point 1`, or empty.
fn written((index, case, point): &(u32, Option<String>, Option<toml::Table>)) -> String {
    let mut parts: Vec<String> = case.iter().map(|label| format!("case {label:?}")).collect();
    parts.extend(point.iter().flatten().map(|(k, v)| format!("{k} = {}", crate::base::typing::describe(v))));
    if parts.is_empty() && *index != UNNAMED_POINT {
        parts.push(format!("grid point {index}"));
    }
    parts.join(", ")
}

/// One named point, followed: its index in the run's grid (`why` set when none).
fn follow_one(
    path: &str,
    (index, case, point): (u32, Option<String>, Option<toml::Table>),
    file: GridView,
    run: GridView,
    why: &mut Option<String>,
) -> Result<u32> {
    let by_name = case.is_some() || point.is_some();
    if by_name && index != UNNAMED_POINT {
        return Err(Error::bad_input(format!(
            "{path}: grid_point = {index} and case/point name the point twice; keep one"
        )));
    }
    let file_count = file.point_count();
    let wanted = if by_name {
        let wanted = wanted_by_name(path, case.as_deref(), point.as_ref(), file)?;
        match file.find(&wanted) {
            Found::At(_) => wanted,
            Found::Nowhere => {
                return Err(Error::bad_input(format!(
                    "{path}: no point of the scenario's grid has {}",
                    describe_wanted(&wanted)
                )))
            }
            Found::Several(n) => {
                let free: Vec<String> = file
                    .axes
                    .iter()
                    .filter(|a| a.values.len() > 1 && !wanted.iter().any(|(p, _)| *p == a.path))
                    .map(|a| format!("\"{}\" = …", a.path))
                    .collect();
                return Err(Error::bad_input(format!(
                    "{path}: {} is {n} points of the scenario's grid; name the other axes' values too: point = {{ {} }}",
                    describe_wanted(&wanted),
                    free.join(", ")
                )));
            }
        }
    } else if index == UNNAMED_POINT || file.axes.is_empty() {
        // Nothing to follow: the only point, or a file without a grid naming the run's.
        return Ok(index);
    } else if index as usize >= file_count {
        return Err(Error::bad_input(format!(
            "{path}.grid_point = {index}: the scenario's grid has {file_count} point(s) (0 to {})",
            file_count - 1
        )));
    } else {
        file.values(index as usize)
    };
    match run.find(&wanted) {
        Found::At(at) => Ok(at),
        Found::Nowhere => {
            why.get_or_insert_with(|| format!("{} is not in this run's grid", named(index, &wanted)));
            Ok(UNNAMED_POINT)
        }
        Found::Several(n) => {
            why.get_or_insert_with(|| {
                format!(
                    "{} is {n} points of this run's grid (an axis the command line added); name it with point = {{ … }}",
                    named(index, &wanted)
                )
            });
            Ok(UNNAMED_POINT)
        }
    }
}

/// `grid point 1 of the scenario (case = "b")`, or the values alone for a point named by them.
fn named(index: u32, wanted: &[(String, toml::Value)]) -> String {
    match index {
        UNNAMED_POINT => format!("the point {}", describe_wanted(wanted)),
        i => format!("grid point {i} of the scenario ({})", describe_wanted(wanted)),
    }
}

/// Both bounds are numbers (not NaN) and the lower is not above the upper.
/// `latency` is a histogram model `model` writes; if not, the error says whether its
/// requests never end that way (`read_failed_s` of a model whose reads never fail) or
/// the name is unknown, and lists the model's latencies.
fn known_latency(path: &str, latency: &str, names: &LatencyNames, model: &str) -> Result<()> {
    if names.histograms.contains(&latency) {
        return Ok(());
    }
    let list = names.histograms.join(", ");
    for ending in ["degraded", "failed", "all"] {
        let base = latency.strip_suffix(&format!("_{ending}_s"));
        if let Some(base) = base.filter(|b| names.histograms.contains(&format!("{b}_s").as_str())) {
            return Err(Error::bad_input(format!(
                "{path}.latency = {latency:?}: model {model}'s {base} requests never end {ending}; its latencies: {list}"
            )));
        }
    }
    Err(Error::bad_input(format!(
        "{path}.latency = {latency:?}: not a latency of model {model}; its latencies: {list}"
    )))
}

fn bounds(path: &str, low_name: &str, low: Option<f64>, high_name: &str, high: Option<f64>) -> Result<()> {
    for (name, value) in [(low_name, low), (high_name, high)] {
        if value.is_some_and(f64::is_nan) {
            return Err(Error::bad_input(format!("{path}.{name} = nan: a bound must be a number")));
        }
    }
    if let (Some(low), Some(high)) = (low, high) {
        if low > high {
            return Err(Error::bad_input(format!(
                "{path}: {low_name} = {low} is above {high_name} = {high}, so the claim could never hold"
            )));
        }
    }
    Ok(())
}
