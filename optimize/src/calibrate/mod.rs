//! `stampede calibrate`: is the model right? A scenario's unknowns fitted to what
//! production measured over time, and the fidelity report of the result (issue 50).
//!
//! 1. The observed columns are checked against the scenario ([`observables`]): each
//!    is a metric the model reports over time, or a load column ([`load`]) whose
//!    arrivals per second become the run's `[load]` schedule.
//! 2. With `--fit`, [`fit::search`] looks for the values minimising the discrepancy
//!    (the weighted mean over metrics of each metric's mean squared relative error,
//!    see `stampede_run::fidelity`): every candidate runs the same replica indices
//!    (common random numbers), so differences between candidates are the model's,
//!    not the dice's. The candidates are grid points of one scenario, as `optimize`'s.
//! 3. The calibrated scenario (load and fitted values set) runs `replicas` replicas,
//!    and each compared metric gets its fidelity: production against the simulated
//!    mean and the replicas' 95% band per interval, MAPE, bias, correlation, and the
//!    share of production inside the band.
//!
//! Intervals compared: every observed row starting at or after `run.warmup_s` (the
//! simulation starts empty; production does not), each `[time, next time)`, the last
//! as long as the one before. A replica that measured nothing where production did (no
//! request ended in the interval) counts as a relative error of 1 in the discrepancy.

pub mod fit;
pub mod intervals;
pub mod load;
pub mod observables;
pub mod report;

use std::collections::BTreeMap;

use super::driver::Candidates;
use super::search::Point;
use super::space::{self, Dimension};
use observables::{catalogue, Extraction, Interval, Observable};
use stampede_run::fidelity::{fidelity, Fidelity};
use stampede_run::runner::{run_ranges_extracting, PointResult, ReplicaRecord, Sinks};
use stampede_scenario::base::error::{Error, Result};
use stampede_scenario::inputs::observed::Observed;
use stampede_scenario::resolved::{GridPoint, Scenario};
use stampede_scenario::scenario::Overrides;

/// What the user asked.
#[derive(Clone, Debug)]
pub struct Request {
    pub observed: Observed,
    /// The unknowns (none: `--check`, the fidelity of the scenario as it is).
    pub dimensions: Vec<Dimension>,
    /// `--metric NAME[:weight]`; empty: every observed metric, weight 1.
    pub metrics: Vec<(String, f64)>,
    /// Replicas per candidate in the search.
    pub fit_replicas: u32,
    /// Replicas of the calibrated scenario for the fidelity report.
    pub replicas: u32,
    pub shape: Option<fit::Shape>,
    /// `--max-error`: the largest MAPE any compared metric may have.
    pub max_error: Option<f64>,
}

/// A load column and whether it drove the run.
#[derive(Clone, Debug, PartialEq)]
pub struct LoadUse {
    pub column: String,
    /// False: the scenario's own `[load]` sets that stream's rate (the column is unused).
    pub applied: bool,
}

/// One compared metric's agreement.
#[derive(Clone, Debug)]
pub struct MetricFidelity {
    pub name: String,
    pub weight: f64,
    /// Production's values over the compared intervals.
    pub observed: Vec<Option<f64>>,
    pub fidelity: Fidelity,
}

/// A finished calibration.
#[derive(Clone, Debug)]
pub struct Calibration {
    /// The scenario with the observed load and the fitted values.
    pub scenario: Scenario,
    pub loads: Vec<LoadUse>,
    pub dimensions: Vec<Dimension>,
    /// The search, with `--fit`.
    pub found: Option<intervals::Found>,
    /// The compared intervals, seconds.
    pub intervals_s: Vec<(f64, f64)>,
    /// Observed rows before `run.warmup_s`, not compared.
    pub skipped_rows: usize,
    pub metrics: Vec<MetricFidelity>,
    /// The calibrated scenario's discrepancy over the report's replicas.
    pub discrepancy: f64,
    /// The lag-1 autocorrelation of the relative residuals (simulated mean − observed),
    /// pooled over metrics: neighbouring intervals of a queue are not independent.
    pub autocorrelation: Option<f64>,
    /// What the fitted values' standard errors were multiplied by for it:
    /// √((1 + ρ₁)/(1 − ρ₁)), the AR(1) variance inflation (1 when ρ₁ ≤ 0).
    pub widening: f64,
    pub replicas: u32,
    pub fit_replicas: u32,
    pub max_error: Option<f64>,
    /// The replicas [`planned_replicas`] expected before it started.
    pub planned_replicas: u64,
}

impl Calibration {
    /// The replicas it ran: every candidate's, then the report's.
    pub fn ran_replicas(&self) -> u64 {
        let candidates = self.found.as_ref().map_or(0, |found| found.candidates.len() as u64);
        candidates * u64::from(self.fit_replicas) + u64::from(self.replicas)
    }

    /// The metric with the largest MAPE, and it.
    pub fn worst(&self) -> Option<(&str, f64)> {
        self.metrics.iter().filter_map(|m| Some((m.name.as_str(), m.fidelity.mape?))).max_by(|a, b| a.1.total_cmp(&b.1))
    }

    /// The metrics whose MAPE exceeds `--max-error` (worst first).
    pub fn disagreeing(&self) -> Vec<(&str, f64)> {
        let Some(bound) = self.max_error else { return Vec::new() };
        let mut over: Vec<(&str, f64)> = self
            .metrics
            .iter()
            .filter_map(|m| Some((m.name.as_str(), m.fidelity.mape?)))
            .filter(|(_, mape)| *mape > bound)
            .collect();
        over.sort_by(|a, b| b.1.total_cmp(&a.1));
        over
    }
}

/// The observed intervals: each row from its time to the next, the last as long as
/// the one before. Refused: fewer than two rows, a negative time, an interval past
/// the horizon.
fn intervals(observed: &Observed, horizon_s: f64) -> Result<Vec<(f64, f64)>> {
    let times = &observed.times_s;
    if times.len() < 2 {
        return Err(Error::bad_input(format!(
            "--observed: {} row{}; calibrate compares metrics over time and needs at least two intervals",
            times.len(),
            if times.len() == 1 { "" } else { "s" }
        )));
    }
    if times[0] < 0.0 {
        return Err(Error::bad_input(format!("--observed: time {} s is before the run starts (0 s)", times[0])));
    }
    let last_step = times[times.len() - 1] - times[times.len() - 2];
    let ends = times[1..].iter().copied().chain(std::iter::once(times[times.len() - 1] + last_step));
    let spans: Vec<(f64, f64)> = times.iter().copied().zip(ends).collect();
    if let Some(&(start, end)) = spans.iter().find(|(_, end)| *end > horizon_s * (1.0 + 1e-9)) {
        return Err(Error::bad_input(format!(
            "--observed: the interval {start}..{end} s ends after run.horizon_s = {horizon_s}: production and \
             simulation must cover the same time"
        ))
        .with_hint(format!("--set run.horizon_s={}", spans[spans.len() - 1].1)));
    }
    Ok(spans)
}

/// The names a scenario compares, for messages: load columns first.
fn allowed_names(loads: &[load::LoadSlot], names: &[(String, Observable)]) -> String {
    let all: Vec<&str> = loads.iter().map(|l| l.column.as_str()).chain(names.iter().map(|n| n.0.as_str())).collect();
    all.join(", ")
}

/// `metric:weight` or `metric`, checked against the catalogue.
pub fn parse_metric(text: &str) -> Result<(String, f64)> {
    let (name, weight) = match text.rsplit_once(':') {
        Some((name, weight)) => {
            let weight = weight.trim().parse::<f64>().ok().filter(|w| w.is_finite() && *w > 0.0).ok_or_else(|| {
                Error::bad_input(format!("--metric {text:?}: the weight {weight:?} must be a positive number"))
            })?;
            (name, weight)
        }
        None => (text, 1.0),
    };
    Ok((name.trim().to_string(), weight))
}

/// The resolved scenario as a TOML table, to edit and resolve again.
fn source_of(scenario: &Scenario) -> Result<toml::Table> {
    toml::from_str(&scenario.to_toml())
        .map_err(|e| Error::bad_input(format!("the resolved scenario does not parse back: {e}")))
}

/// `source` resolved with `overrides`, its relative files read from `scenario`'s folder.
fn resolve_beside(scenario: &Scenario, source: toml::Table, overrides: &Overrides) -> Result<Scenario> {
    match scenario.base_dir() {
        Some(dir) => Scenario::resolve_in(source, overrides, dir),
        None => Scenario::resolve(source, overrides),
    }
}

/// The base scenario with the observed load in place and latency windows one
/// observed step wide (where the model lets them be set and the step is even).
fn with_observed_load(base: &Scenario, observed: &Observed, spans: &[(f64, f64)]) -> Result<(Scenario, Vec<LoadUse>)> {
    let mut source = source_of(base)?;
    let model = base.model.name();
    let mut loads = Vec::new();
    for slot in load::slots(model, &source) {
        if let Some(rates) = observed.metrics.get(&slot.column) {
            let applied = load::apply(&mut source, &slot, &observed.times_s, rates)?;
            loads.push(LoadUse { column: slot.column, applied });
        }
    }
    let step = spans[0].1 - spans[0].0;
    let even = spans.iter().all(|(a, b)| ((b - a) - step).abs() <= 1e-9 * step);
    let has_series = base.model.sections().contains(&"series");
    let series = source.get("series").and_then(toml::Value::as_table);
    let bucket = base.schema.series_bucket_s;
    let whole_buckets = ((step / bucket) - (step / bucket).round()).abs() < 1e-9 * (step / bucket).max(1.0);
    let few_enough = base.run.horizon_s / step <= 1_000.0;
    if has_series && even && whole_buckets && few_enough && series.is_none_or(|s| !s.contains_key("latency_window_s")) {
        let mut series = series.cloned().unwrap_or_default();
        series.insert("latency_window_s".into(), toml::Value::Float(step));
        source.insert("series".into(), toml::Value::Table(series));
    }
    Ok((resolve_beside(base, source, &Overrides::default())?, loads))
}

/// The scenario with `values` set at the dimensions' paths.
fn with_values(scenario: &Scenario, dimensions: &[Dimension], values: &[f64]) -> Result<Scenario> {
    let overrides = Overrides {
        sets: dimensions.iter().zip(values).map(|(d, &v)| (d.path.clone(), d.toml(v))).collect(),
        ..Overrides::default()
    };
    resolve_beside(scenario, source_of(scenario)?, &overrides)
}

/// Checks each `--fit` path before anything runs: it resolves at both ends of its
/// range, and its current value, where it has one, is a number.
fn check_dimensions(scenario: &Scenario, dimensions: &[Dimension]) -> Result<()> {
    let source = toml::Value::Table(source_of(scenario)?);
    for (i, dimension) in dimensions.iter().enumerate() {
        if dimensions[..i].iter().any(|d| d.path == dimension.path) {
            return Err(Error::bad_input(format!("--fit {}: given twice", dimension.path)));
        }
        if scenario.grid.iter().any(|axis| axis.path == dimension.path) {
            return Err(Error::bad_input(format!(
                "--fit {}: is a grid axis; calibrate fits one configuration (set the axis with --set)",
                dimension.path
            )));
        }
        let current = dimension.path.split('.').try_fold(&source, |value, part| match value {
            toml::Value::Table(t) => t.get(part),
            toml::Value::Array(a) => part.parse::<usize>().ok().and_then(|i| a.get(i)),
            _ => None,
        });
        if let Some(value) = current.filter(|v| !matches!(v, toml::Value::Integer(_) | toml::Value::Float(_))) {
            return Err(Error::bad_input(format!(
                "--fit {}: is not a number (it is {} = {value}); fit a numeric field",
                dimension.path, dimension.path
            )));
        }
        for end in [dimension.low, dimension.high] {
            with_values(scenario, std::slice::from_ref(dimension), &[end])
                .map_err(|e| Error::bad_input(format!("--fit {}={end}: {e}", dimension.path)))?;
        }
    }
    Ok(())
}

/// What the runs compare: names, weights, observed values and the extraction.
struct Comparison {
    names: Vec<String>,
    weights: Vec<f64>,
    /// Per metric, production's values over the compared intervals.
    observed: Vec<Vec<Option<f64>>>,
    extraction: Extraction,
    intervals: usize,
}

impl Comparison {
    /// Per metric, each replica's values (`replicas`: each replica's extracted values,
    /// in replica order).
    fn per_metric(&self, replicas: &[Vec<f64>]) -> Vec<Vec<Vec<Option<f64>>>> {
        (0..self.names.len())
            .map(|m| {
                replicas
                    .iter()
                    .map(|r| {
                        r[m * self.intervals..(m + 1) * self.intervals]
                            .iter()
                            .map(|&v| v.is_finite().then_some(v))
                            .collect()
                    })
                    .collect()
            })
            .collect()
    }

    /// Each metric's fidelity over `records`, and the weighted discrepancy.
    fn judge(&self, replicas: &[Vec<f64>]) -> (Vec<Fidelity>, f64) {
        let fidelities: Vec<Fidelity> =
            self.per_metric(replicas).iter().zip(&self.observed).map(|(replicas, o)| fidelity(o, replicas)).collect();
        let mut total = 0.0;
        for ((f, o), w) in fidelities.iter().zip(&self.observed).zip(&self.weights) {
            let measured = o.iter().filter(|v| v.is_some()).count();
            // Intervals production measured and no replica did: a relative error of 1.
            let missing = measured - f.points;
            let sum = f.discrepancy.unwrap_or(0.0) * f.points as f64 + missing as f64;
            total += w * sum / measured.max(1) as f64;
        }
        (fidelities, total / self.weights.iter().sum::<f64>())
    }

    /// The discrepancy over `replicas`, and with each left out in turn.
    fn discrepancy(&self, replicas: &[Vec<f64>]) -> fit::Discrepancy {
        let leave_one_out = (0..replicas.len())
            .map(|i| {
                let rest: Vec<Vec<f64>> =
                    replicas.iter().enumerate().filter(|(k, _)| *k != i).map(|(_, r)| r.clone()).collect();
                self.judge(&rest).1
            })
            .collect();
        fit::Discrepancy { value: self.judge(replicas).1, leave_one_out }
    }

    /// Compared (metric, interval) points production measured.
    fn observations(&self) -> usize {
        self.observed.iter().flatten().filter(|v| v.is_some()).count()
    }
}

/// Runs replicas `0..replicas` of each grid point of `scenario` listed in `points`;
/// returns, per listed point, each replica's extracted values in replica order.
fn run_points(
    scenario: &Scenario,
    points: &[u32],
    replicas: u32,
    comparison: &Comparison,
    threads: usize,
    progress: &(dyn Fn() + Sync),
) -> Result<Vec<Vec<Vec<f64>>>> {
    let mut ranges = vec![0..0; scenario.point_count() as usize];
    for &p in points {
        ranges[p as usize] = 0..replicas;
    }
    let mut kept: BTreeMap<u32, Vec<Vec<f64>>> = BTreeMap::new();
    let mut records = |batch: &[ReplicaRecord]| {
        for record in batch {
            kept.entry(record.grid_point).or_default().push(record.extracted.clone());
        }
        Ok(())
    };
    let mut point_sink = |_: &GridPoint, _: PointResult| Ok(());
    let extract = |point: &GridPoint, output: &stampede_scenario::models::ReplicaOutput| {
        comparison.extraction.extract(point, output)
    };
    run_ranges_extracting(
        scenario,
        &ranges,
        threads,
        progress,
        Some(&extract),
        Sinks { records: &mut records, point: &mut point_sink },
    )?;
    Ok(points.iter().map(|p| kept.remove(p).unwrap_or_default()).collect())
}

/// The lag-1 autocorrelation of the relative residuals (simulated mean − observed) /
/// |observed|, each metric centred on its own mean, pooled over metrics; `None`
/// with fewer than three neighbouring pairs or no variation.
fn residual_autocorrelation(metrics: &[MetricFidelity]) -> Option<f64> {
    let (mut lagged, mut squares, mut pairs) = (0.0, 0.0, 0);
    for metric in metrics {
        let residuals: Vec<Option<f64>> = metric
            .observed
            .iter()
            .zip(&metric.fidelity.mean)
            .map(|(&o, &m)| Some((m? - o?) / o?.abs()).filter(|r| r.is_finite()))
            .collect();
        let present: Vec<f64> = residuals.iter().flatten().copied().collect();
        if present.len() < 2 {
            continue;
        }
        let centre = present.iter().sum::<f64>() / present.len() as f64;
        squares += present.iter().map(|r| (r - centre).powi(2)).sum::<f64>();
        for pair in residuals.windows(2) {
            if let (Some(a), Some(b)) = (pair[0], pair[1]) {
                lagged += (a - centre) * (b - centre);
                pairs += 1;
            }
        }
    }
    (pairs >= 3 && squares > 0.0).then(|| lagged / squares)
}

/// Replicas a calibration is expected to run (for a progress bar and the cost said
/// before it starts) — an expectation, not a bound: the design, each step's composite
/// design and two model points (with half as many rounds again as asked, which a
/// search still gaining takes), the curvature's (measured up to three times), each
/// continuous unknown's check of the curvature at its interval's two ends (the others
/// re-optimised at each), each integer's profile (three values a side, each
/// re-optimising the others), then the report. Points evaluated before are not run
/// again; a search that keeps gaining, a curvature re-measured up to five times, or a
/// profile that walks far (a continuous unknown whose curvature fails its ends check)
/// runs more.
pub fn planned_replicas(request: &Request) -> u64 {
    let d = request.dimensions.len();
    let searched = if d == 0 {
        0
    } else {
        let shape = request.shape.unwrap_or_else(|| fit::Shape::default_for(d));
        let composite = |d: usize| 1 + 2 * d + 2 * d * d.saturating_sub(1);
        let rounds = shape.refinements as usize * 3 / 2;
        let integers = request.dimensions.iter().filter(|dim| dim.scale == space::Scale::Integer).count();
        let continuous = d - integers;
        // One value held, the others re-optimised by PROFILE_ROUNDS trust-region rounds.
        let conditional_minimum = 1 + intervals::PROFILE_ROUNDS * (composite(d - 1) + 1);
        let curvature = if continuous > 0 { 3 * composite(continuous) } else { 0 };
        (shape.samples
            + rounds * (composite(d) + 2)
            + curvature
            + continuous * 2 * conditional_minimum
            + integers * 6 * conditional_minimum) as u64
            * u64::from(request.fit_replicas)
    };
    searched + u64::from(request.replicas)
}

/// The largest magnitude an observation may have: beyond it relative errors overflow
/// (an observed 1e308 gave a discrepancy of NaN).
const MAX_OBSERVED: f64 = 1e15;

/// Refuses observations no system can produce, before anything runs: every quantity a
/// model reports over time (busy workers, queue depths, rates, latencies, shares) is at
/// least 0, a share at most 1, an entry's goodput at most what was offered to it.
fn check_possible(observed: &Observed, chosen: &[(String, f64)], slots: &[load::LoadSlot]) -> Result<()> {
    let columns = chosen.iter().map(|(n, _)| n.as_str()).chain(slots.iter().map(|s| s.column.as_str()));
    for name in columns {
        let Some(values) = observed.metrics.get(name) else { continue };
        for (i, value) in values.iter().enumerate() {
            let Some(v) = *value else { continue };
            let time = observed.times_s.get(i).copied().unwrap_or(f64::NAN);
            let impossible = if v < 0.0 {
                Some("is negative; every quantity a model reports over time is 0 or more")
            } else if v > MAX_OBSERVED {
                Some("is beyond 1e15, which no comparison can use")
            } else if name.ends_with("_share") && v > 1.0 {
                Some("is a share above 1")
            } else {
                None
            };
            if let Some(why) = impossible {
                return Err(Error::bad_input(format!("--observed: {name} at {time} s = {v}: {why}")));
            }
        }
        if let Some(entry) = name.strip_suffix(".goodput_rps") {
            // Over the whole window, not per interval: a request offered in one interval
            // may be answered in the next, but no more can be answered than were sent
            // (1% allowed for what was in flight when the first interval began).
            let offered = format!("{entry}.offered_rps");
            let Some(offered_values) = observed.metrics.get(&offered) else { continue };
            // Rates × each interval's width: requests (the last interval as wide as the one before).
            let times = &observed.times_s;
            let width = |i: usize| match (times.get(i), times.get(i + 1), i.checked_sub(1).and_then(|p| times.get(p))) {
                (Some(t), Some(next), _) => next - t,
                (Some(t), None, Some(previous)) => t - previous,
                _ => 1.0,
            };
            let (mut good, mut sent) = (0.0, 0.0);
            for (i, (g, o)) in values.iter().zip(offered_values).enumerate() {
                if let (Some(g), Some(o)) = (g, o) {
                    good += g * width(i);
                    sent += o * width(i);
                }
            }
            if good > sent * 1.01 + 1e-9 {
                return Err(Error::bad_input(format!(
                    "--observed: {name} adds up to {good:.0} requests over the intervals where both are measured, \
                     above the {sent:.0} of {offered}: more requests answered than were sent"
                )));
            }
        }
    }
    Ok(())
}

/// Refuses a search shape no fit can use (`--samples 0`), before anything runs.
pub fn check_shape(request: &Request) -> Result<()> {
    if let Some(shape) = request.shape.filter(|s| !(1..=fit::MAX_SAMPLES).contains(&s.samples)) {
        return Err(Error::bad_input(format!(
            "--samples {}: the first design needs from 1 to {} candidates ({} is the default for {} unknowns)",
            shape.samples,
            fit::MAX_SAMPLES,
            fit::Shape::default_for(request.dimensions.len()).samples,
            request.dimensions.len()
        )));
    }
    Ok(())
}

/// What is compared: the chosen metrics' observations over the intervals that start
/// after the warm-up (their indices), and how the model's are extracted over them.
fn compare_after_warmup(
    loaded: &Scenario,
    request: &Request,
    spans: &[(f64, f64)],
    chosen: &[(String, f64)],
    names: &[(String, Observable)],
) -> Result<(Comparison, Vec<usize>)> {
    let warmup = loaded.run.warmup_s;
    let compared: Vec<usize> = (0..spans.len()).filter(|&i| spans[i].0 >= warmup - 1e-9).collect();
    if compared.is_empty() {
        return Err(Error::bad_input(format!(
            "--observed: every interval starts before run.warmup_s = {warmup}; nothing is compared"
        )));
    }
    let nanos = |s: f64| stampede_engine::secs_to_nanos(s);
    let ns_spans: Vec<Interval> = compared.iter().map(|&i| (nanos(spans[i].0), nanos(spans[i].1))).collect();
    let catalogue_of = |name: &str| names.iter().find(|(n, _)| n == name).expect("checked").1;
    let metric_list: Vec<(String, Observable)> = chosen.iter().map(|(n, _)| (n.clone(), catalogue_of(n))).collect();
    let extraction = Extraction::new(loaded, &loaded.grid_point(0)?, metric_list, ns_spans)?;
    let comparison = Comparison {
        names: chosen.iter().map(|(n, _)| n.clone()).collect(),
        weights: chosen.iter().map(|(_, w)| *w).collect(),
        observed: chosen
            .iter()
            .map(|(n, _)| compared.iter().map(|&i| request.observed.metrics[n][i]).collect())
            .collect(),
        extraction,
        intervals: compared.len(),
    };
    Ok((comparison, compared))
}

/// Each compared metric's fidelity to its observations in `records`, and the
/// weighted discrepancy (refused when it is not a number).
fn judged(comparison: &Comparison, records: &[Vec<f64>]) -> Result<(Vec<MetricFidelity>, f64)> {
    let (fidelities, discrepancy) = comparison.judge(records);
    if !discrepancy.is_finite() {
        return Err(Error::bad_input(format!(
            "--observed: the model's discrepancy from the observations is {discrepancy} (not a number): an observed \
             value too large or too small to compare relatively; nothing was written"
        ))
        .with_hint("check the observed columns' units (seconds, requests per second, workers)"));
    }
    let metrics: Vec<MetricFidelity> = comparison
        .names
        .iter()
        .zip(&comparison.weights)
        .zip(fidelities)
        .zip(&comparison.observed)
        .map(|(((name, &weight), fidelity), observed)| MetricFidelity {
            name: name.clone(),
            weight,
            observed: observed.clone(),
            fidelity,
        })
        .collect();
    Ok((metrics, discrepancy))
}

/// Calibrates `base` (one configuration: no grid) to `request.observed`.
pub fn calibrate(
    base: &Scenario,
    request: &Request,
    threads: usize,
    progress: &(dyn Fn() + Sync),
) -> Result<Calibration> {
    check_request(base, request)?;
    let spans = intervals(&request.observed, base.run.horizon_s)?;
    let slots = load::slots(base.model.name(), &source_of(base)?);
    let names = catalogue(base);
    if names.is_empty() {
        return Err(Error::bad_input(format!(
            "scenario {}: the {} model reports nothing over time, so there is nothing to compare production with",
            base.name,
            base.model.name()
        )));
    }
    let chosen = chosen_metrics(base, request, &slots, &names)?;
    check_possible(&request.observed, &chosen, &slots)?;
    let (loaded, loads) = with_observed_load(base, &request.observed, &spans)?;
    check_dimensions(&loaded, &request.dimensions)?;
    let (comparison, compared) = compare_after_warmup(&loaded, request, &spans, &chosen, &names)?;
    if comparison.observations() == 0 {
        return Err(Error::bad_input("--observed: the compared metrics have no values after run.warmup_s"));
    }
    let (mut found, calibrated) = match request.dimensions.is_empty() {
        true => (None, loaded.clone()),
        false => {
            let found = fit_unknowns(&loaded, request, &comparison, threads, progress)?;
            let values = found.candidates[found.best].values.clone();
            (Some(found), with_values(&loaded, &request.dimensions, &values)?)
        }
    };
    let records = run_points(&calibrated, &[0], request.replicas, &comparison, threads, progress)?.remove(0);
    let (metrics, discrepancy) = judged(&comparison, &records)?;
    let autocorrelation = residual_autocorrelation(&metrics);
    let widening =
        autocorrelation.filter(|r| *r > 0.0).map_or(1.0, |r| ((1.0 + r.min(0.9)) / (1.0 - r.min(0.9))).sqrt());
    if let Some(found) = &mut found {
        found.widen(widening);
    }
    Ok(Calibration {
        scenario: calibrated,
        loads,
        dimensions: request.dimensions.clone(),
        found,
        intervals_s: compared.iter().map(|&i| spans[i]).collect(),
        skipped_rows: spans.len() - compared.len(),
        metrics,
        discrepancy,
        autocorrelation,
        widening,
        replicas: request.replicas,
        fit_replicas: request.fit_replicas,
        max_error: request.max_error,
        planned_replicas: planned_replicas(request),
    })
}

/// What `calibrate` refuses before reading anything: a grid, too few replicas, a
/// bound that is not a fraction, too many unknowns, a search shape no fit can use.
fn check_request(base: &Scenario, request: &Request) -> Result<()> {
    if base.point_count() != 1 {
        return Err(Error::bad_input(format!(
            "scenario {}: has {} grid points; calibrate fits one configuration",
            base.name,
            base.point_count()
        ))
        .with_hint("choose one with --case LABEL, or fix each axis with --set PATH=VALUE"));
    }
    if request.fit_replicas < 2 || request.replicas < 2 {
        return Err(Error::bad_input("--replicas and --fit-replicas: at least 2 each (a band needs replicas)"));
    }
    if let Some(bound) = request.max_error.filter(|b| !(b.is_finite() && *b > 0.0)) {
        return Err(Error::bad_input(format!("--max-error {bound}: a positive fraction (0.05, or 5%)")));
    }
    if request.dimensions.len() > super::space::MAX_DIMENSIONS {
        return Err(Error::bad_input(format!("--fit: at most {} unknowns", super::space::MAX_DIMENSIONS)));
    }
    check_shape(request)?;
    Ok(())
}

/// The metrics compared, with their weights: `--metric`'s, or else every observed
/// column that is not a load. Each must be a metric of the scenario over time, not a
/// load, given once, and observed.
fn chosen_metrics(
    base: &Scenario,
    request: &Request,
    slots: &[load::LoadSlot],
    names: &[(String, Observable)],
) -> Result<Vec<(String, f64)>> {
    for column in request.observed.metrics.keys() {
        if !slots.iter().any(|s| &s.column == column) && !names.iter().any(|(n, _)| n == column) {
            return Err(Error::bad_input(format!(
                "--observed: column {column:?} is not a metric of scenario {} over time; allowed: {}",
                base.name,
                allowed_names(slots, names)
            )));
        }
    }
    let chosen: Vec<(String, f64)> = if request.metrics.is_empty() {
        request
            .observed
            .metrics
            .keys()
            .filter(|c| !slots.iter().any(|s| &s.column == *c))
            .map(|c| (c.clone(), 1.0))
            .collect()
    } else {
        request.metrics.clone()
    };
    if chosen.is_empty() {
        return Err(Error::bad_input(
            "--observed: holds only load columns; give at least one metric to compare (e.g. a goodput or a p99)",
        ));
    }
    for (i, (name, _)) in chosen.iter().enumerate() {
        if chosen[..i].iter().any(|(n, _)| n == name) {
            return Err(Error::bad_input(format!("--metric {name}: given twice")));
        }
        if slots.iter().any(|s| &s.column == name) {
            return Err(Error::bad_input(format!("--metric {name}: is the load that drives the run, not compared")));
        }
        if !names.iter().any(|(n, _)| n == name) {
            return Err(Error::bad_input(format!(
                "--metric {name}: is not a metric of scenario {} over time; allowed: {}",
                base.name,
                allowed_names(&[], names)
            )));
        }
        if !request.observed.metrics.contains_key(name) {
            return Err(Error::bad_input(format!("--metric {name}: --observed has no column of it")));
        }
    }
    Ok(chosen)
}

/// The unknowns fitted: candidates run `request.fit_replicas` each and judged by
/// `comparison`, the search shaped by `request.shape` (or the default for as many
/// unknowns).
fn fit_unknowns(
    loaded: &Scenario,
    request: &Request,
    comparison: &Comparison,
    threads: usize,
    progress: &(dyn Fn() + Sync),
) -> Result<intervals::Found> {
    let mut candidates = Candidates::new(loaded, &request.dimensions)?.without_claims();
    let mut points: Vec<Point> = Vec::new();
    let mut evaluate = |values: &[Vec<f64>]| -> Result<Vec<fit::Discrepancy>> {
        let first = points.len() as u32;
        points.extend(values.iter().map(|v| Point { grid: 0, unit: Vec::new(), values: v.clone() }));
        let scenario = candidates.scenario(&points)?;
        let listed: Vec<u32> = (first..points.len() as u32).collect();
        let records = run_points(&scenario, &listed, request.fit_replicas, comparison, threads, progress)?;
        Ok(records.iter().map(|replicas| comparison.discrepancy(replicas)).collect())
    };
    let shape = request.shape.unwrap_or_else(|| fit::Shape::default_for(request.dimensions.len()));
    intervals::fit(&request.dimensions, shape, comparison.observations(), &mut evaluate)
}

#[cfg(test)]
mod tests;
