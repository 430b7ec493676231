//! The `[load]` section: how open-loop requests arrive, for every model that has an
//! arrival rate. Without it a model's own rate is a constant-rate Poisson stream, as
//! before. With it:
//!
//! ```toml
//! [load]
//! arrivals = "poisson"                     # or "even", or { trace = "arrivals.parquet", column = "t_s", time_scale = 0.5, sort = false }
//! rate = [[0, 100], [60, 400], [120, 100]] # arrivals per second from each time (s); or
//! rate = { shape = "sine", mean = 100, amplitude = 50, period_s = 86400 }
//! rate_file = "load.csv"                   # time_s,rate_per_s (MiSim's profiles), instead of rate
//! interpolate = "step"                     # or "linear" (ramps between the points)
//! bursts = [{ at_s = 30, duration_s = 5, factor = 3 }]
//! scale = 0.3                              # every rate × 0.3 (two workloads sharing one file)
//! ```
//!
//! [`LoadSpec::resolve`] checks it, reads its files (relative to the scenario's
//! folder) and builds the engine's [`ArrivalProcess`].

use std::path::Path;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use stampede_engine::components::arrivals::{ArrivalProcess, Burst, RateProfile, RateShape};
use stampede_engine::Nanos;

use crate::base::error::{Error, Result};

/// The `[load]` section as written.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoadSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arrivals: Option<ArrivalsField>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<RateField>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_file: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interpolate: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bursts: Vec<BurstSpec>,
    /// Multiplies every rate of the profile (so two workloads can share one file, each
    /// its share of it); not for a replayed trace, whose pace is `time_scale`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale: Option<f64>,
}

/// `arrivals`: a spacing name or a trace to replay.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ArrivalsField {
    Name(String),
    Trace(TraceSpec),
}

/// A recorded trace of arrival instants.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TraceSpec {
    /// A CSV (one instant a line, or a header row and `column`) or a Parquet column.
    pub trace: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub column: Option<String>,
    /// Multiplies every instant: 0.5 replays twice as fast.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_scale: Option<f64>,
    /// Accept instants out of order (they are sorted); otherwise going back is refused.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sort: bool,
    /// A column of each arrival's key (a whole number; the cluster's requests take it,
    /// modulo `clients.keys`), from the same file, row for row.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_column: Option<String>,
    /// A column naming each arrival's entry (`service.endpoint`), from the same file,
    /// row for row: a graph workload replays only the rows of its own entry, so one
    /// access log drives every entry point.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint_column: Option<String>,
    /// A column naming each row's call class (the gateway), from the same file, row for
    /// row: each row is then one call of that class, replayed as your gateway saw it,
    /// outside any turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class_column: Option<String>,
}

/// Which rows of a labelled trace a stream replays: those whose label column (the
/// [`TraceSpec`] field `field`: `endpoint_column` or `class_column`) names `value`.
#[derive(Clone, Copy, Debug)]
pub struct Pick<'a> {
    pub field: &'static str,
    pub value: &'a str,
}

impl TraceSpec {
    /// The label columns a trace may carry, by field, with what reads them.
    fn label_columns(&self) -> [(&'static str, Option<&String>, &'static str); 2] {
        [
            (
                "endpoint_column",
                self.endpoint_column.as_ref(),
                "only a graph workload's trace has entry points to choose between",
            ),
            ("class_column", self.class_column.as_ref(), "only the gateway's trace names call classes"),
        ]
    }

    /// The distinct values of `field`'s column (sorted), read from the trace file.
    pub fn labels(&self, field: &str) -> Result<Vec<String>> {
        let Some((_, Some(column), _)) = self.label_columns().into_iter().find(|(f, ..)| *f == field) else {
            return Ok(Vec::new());
        };
        let path = super::locate(&self.trace);
        let mut labels =
            super::sources::labels(&path, column).map_err(|e| e.context(format!("load.arrivals.{field}")))?;
        labels.sort_unstable();
        labels.dedup();
        Ok(labels)
    }
}

/// `rate`: a schedule of `[time_s, rate]` points or a shape.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RateField {
    Points(Vec<[f64; 2]>),
    Shape(ShapeSpec),
}

/// `rate = { shape = "sine", mean, amplitude, period_s }`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShapeSpec {
    pub shape: String,
    pub mean: f64,
    pub amplitude: f64,
    pub period_s: f64,
}

/// A window in which the rate is multiplied.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BurstSpec {
    pub at_s: f64,
    pub duration_s: f64,
    pub factor: f64,
}

impl LoadSpec {
    /// The files this section reads (as written), with their field paths.
    pub fn files(&self) -> Vec<(String, String)> {
        let mut files = Vec::new();
        if let Some(file) = &self.rate_file {
            files.push(("load.rate_file".to_string(), file.clone()));
        }
        if let Some(ArrivalsField::Trace(trace)) = &self.arrivals {
            files.push(("load.arrivals.trace".to_string(), trace.trace.clone()));
        }
        files
    }

    /// Whether the section sets the rate itself (a schedule, a shape, a file or a trace).
    pub fn sets_rate(&self) -> bool {
        self.rate.is_some() || self.rate_file.is_some() || matches!(self.arrivals, Some(ArrivalsField::Trace(_)))
    }

    /// Whether arrivals come at a constant rate, so that steady-state theory applies.
    pub fn is_constant_poisson(&self) -> bool {
        let poisson = match &self.arrivals {
            None => true,
            Some(ArrivalsField::Name(name)) => name == "poisson",
            Some(ArrivalsField::Trace(_)) => false,
        };
        poisson && self.rate.is_none() && self.rate_file.is_none() && self.bursts.is_empty()
    }

    /// The arrival process, given the model's own rate (`rate_path` names it) for
    /// when the section sets no rate.
    pub fn resolve(&self, base_rate: f64, rate_path: &str) -> Result<ArrivalProcess> {
        self.resolve_for(base_rate, rate_path, None)
    }

    /// [`Self::resolve`] for one stream of a labelled trace: `pick` keeps its rows (a
    /// graph workload's entry in `endpoint_column`, a gateway class in `class_column`).
    pub fn resolve_for(&self, base_rate: f64, rate_path: &str, pick: Option<Pick>) -> Result<ArrivalProcess> {
        if let Some(ArrivalsField::Trace(trace)) = &self.arrivals {
            if self.rate.is_some() || self.rate_file.is_some() || !self.bursts.is_empty() || self.scale.is_some() {
                return Err(Error::bad_input(
                    "load.arrivals: a replayed trace sets the arrivals itself; leave out load.rate, load.rate_file, \
                     load.bursts and load.scale (a trace's pace is load.arrivals.time_scale)",
                ));
            }
            return trace_instants(trace, pick);
        }
        let shape = match (&self.rate, &self.rate_file) {
            (Some(_), Some(_)) => {
                return Err(Error::bad_input("load.rate_file: load.rate is set too; give the rate one way"))
            }
            (None, None) => RateShape::Constant(base_rate),
            (Some(RateField::Shape(spec)), None) => sine(spec)?,
            (Some(RateField::Points(points)), None) => {
                let points: Vec<(f64, f64)> = points.iter().map(|[t, r]| (*t, *r)).collect();
                self.schedule(points, "load.rate")?
            }
            (None, Some(file)) => {
                let points = rate_file(&super::locate(file))?;
                self.schedule(points, "load.rate_file")?
            }
        };
        let shape = match self.scale {
            None => shape,
            Some(scale) if scale.is_finite() && scale > 0.0 => scaled(shape, scale),
            Some(scale) => {
                return Err(Error::bad_input(format!(
                    "load.scale = {scale}: must be a positive factor (0.3: 30% of the profile's rate)"
                )))
            }
        };
        if self.interpolate.is_some() && !matches!(shape, RateShape::Schedule { .. }) {
            return Err(Error::bad_input(
                "load.interpolate: applies to a schedule of points (load.rate = [[t, r], …] or load.rate_file)",
            ));
        }
        let bursts = self.checked_bursts()?;
        if matches!(shape, RateShape::Constant(r) if !(r.is_finite() && r > 0.0)) {
            return Err(Error::bad_input(format!("{rate_path} = {base_rate}: must be a positive rate per second")));
        }
        let profile = RateProfile { shape, bursts: Arc::from(bursts) };
        let peak = peak_rate(&profile);
        if peak.is_nan() || peak > crate::base::limits::MAX_RATE_PER_S {
            return Err(Error::bad_input(format!(
                "load: the rate reaches {peak:e} per second (its points or shape × load.scale × the bursts' factors); \
                 at most {:e} are allowed",
                crate::base::limits::MAX_RATE_PER_S
            )));
        }
        match &self.arrivals {
            None => Ok(ArrivalProcess::Poisson(profile)),
            Some(ArrivalsField::Name(name)) if name == "poisson" => Ok(ArrivalProcess::Poisson(profile)),
            Some(ArrivalsField::Name(name)) if name == "even" => Ok(ArrivalProcess::Even(profile)),
            Some(ArrivalsField::Name(name)) => Err(Error::bad_input(format!(
                "load.arrivals = {name:?}: allowed: \"poisson\", \"even\", or {{ trace = \"file\", column = … }}"
            ))),
            Some(ArrivalsField::Trace(_)) => unreachable!("handled above"),
        }
    }

    /// `load.bursts`, each starting at or after 0 s, lasting a positive time, with a
    /// finite factor of 0 or more.
    fn checked_bursts(&self) -> Result<Vec<Burst>> {
        let mut bursts = Vec::with_capacity(self.bursts.len());
        for (i, burst) in self.bursts.iter().enumerate() {
            if !(burst.at_s >= 0.0 && burst.duration_s > 0.0 && burst.factor >= 0.0 && burst.factor.is_finite()) {
                return Err(Error::bad_input(format!(
                    "load.bursts[{i}] = {{ at_s = {}, duration_s = {}, factor = {} }}: needs at_s ≥ 0, duration_s > 0 \
                     and a factor ≥ 0",
                    burst.at_s, burst.duration_s, burst.factor
                )));
            }
            bursts.push(Burst { at_s: burst.at_s, duration_s: burst.duration_s, factor: burst.factor });
        }
        Ok(bursts)
    }

    fn schedule(&self, points: Vec<(f64, f64)>, path: &str) -> Result<RateShape> {
        if points.is_empty() {
            return Err(Error::bad_input(format!("{path}: needs at least one [time_s, rate] point")));
        }
        for (i, (t, r)) in points.iter().enumerate() {
            if !(t.is_finite() && *t >= 0.0) {
                return Err(Error::bad_input(format!("{path}[{i}] = [{t}, {r}]: the time must be 0 or more seconds")));
            }
            if !(r.is_finite() && *r >= 0.0) {
                return Err(Error::bad_input(format!("{path}[{i}] = [{t}, {r}]: a rate must be 0 or more per second")));
            }
            if i > 0 && *t <= points[i - 1].0 {
                return Err(Error::bad_input(format!(
                    "{path}[{i}] = [{t}, {r}]: times must increase (the point before is at {} s)",
                    points[i - 1].0
                )));
            }
        }
        if points.iter().all(|(_, r)| *r == 0.0) {
            return Err(Error::bad_input(format!("{path}: every rate is 0, so nothing would ever arrive")));
        }
        let linear = match self.interpolate.as_deref() {
            None | Some("step") => false,
            Some("linear") => true,
            Some(other) => {
                return Err(Error::bad_input(format!("load.interpolate = {other:?}: allowed: \"step\", \"linear\"")))
            }
        };
        Ok(RateShape::Schedule { points: Arc::from(points), linear })
    }
}

/// An upper bound of `profile`'s rate at any time: its highest point (or the sine's
/// peak) times every burst factor above 1, as if all overlapped.
pub fn peak_rate(profile: &RateProfile) -> f64 {
    let base = match &profile.shape {
        RateShape::Constant(rate) => *rate,
        RateShape::Schedule { points, .. } => points.iter().map(|p| p.1).fold(0.0, f64::max),
        RateShape::Sine { mean, amplitude, .. } => mean + amplitude,
    };
    base * profile.bursts.iter().map(|b| b.factor.max(1.0)).product::<f64>()
}

/// `shape` with every rate multiplied by `scale`.
fn scaled(shape: RateShape, scale: f64) -> RateShape {
    match shape {
        RateShape::Constant(rate) => RateShape::Constant(rate * scale),
        RateShape::Sine { mean, amplitude, period_s } => {
            RateShape::Sine { mean: mean * scale, amplitude: amplitude * scale, period_s }
        }
        RateShape::Schedule { points, linear } => {
            RateShape::Schedule { points: points.iter().map(|&(t, r)| (t, r * scale)).collect(), linear }
        }
    }
}

fn sine(spec: &ShapeSpec) -> Result<RateShape> {
    if spec.shape != "sine" {
        return Err(Error::bad_input(format!(
            "load.rate.shape = {:?}: allowed: \"sine\" (bursts are load.bursts; steps and ramps are a list of [time_s, rate] points)",
            spec.shape
        )));
    }
    if !(spec.mean > 0.0 && spec.amplitude >= 0.0 && spec.amplitude <= spec.mean && spec.period_s > 0.0) {
        return Err(Error::bad_input(format!(
            "load.rate = {{ shape = \"sine\", mean = {}, amplitude = {}, period_s = {} }}: needs mean > 0, 0 ≤ amplitude ≤ mean (a rate below 0 is not one) and period_s > 0",
            spec.mean, spec.amplitude, spec.period_s
        )));
    }
    Ok(RateShape::Sine { mean: spec.mean, amplitude: spec.amplitude, period_s: spec.period_s })
}

/// `time_s,rate_per_s` lines (a header row is skipped).
fn rate_file(path: &Path) -> Result<Vec<(f64, f64)>> {
    let refuse = |what: String| Error::bad_input(format!("load.rate_file: {}: {what}", path.display()));
    let sealed = super::sealed::read(path).map_err(|e| e.context("load.rate_file"))?;
    let text = sealed.text().ok_or_else(|| refuse("not UTF-8 text".into()))?;
    let mut points = Vec::new();
    for (index, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let cells: Vec<&str> = line.split(',').map(str::trim).collect();
        let numbers: Vec<Option<f64>> = cells.iter().map(|c| c.parse().ok()).collect();
        match numbers.as_slice() {
            [Some(t), Some(r)] => points.push((*t, *r)),
            _ if points.is_empty() && index == 0 => continue, // the header
            _ => return Err(refuse(format!("line {}: {line:?} is not time_s,rate_per_s", index + 1))),
        }
    }
    if points.is_empty() {
        return Err(refuse("the file is empty".into()));
    }
    Ok(points)
}

fn trace_instants(trace: &TraceSpec, pick: Option<Pick>) -> Result<ArrivalProcess> {
    let path = super::locate(&trace.trace);
    let at = |e: Error| e.context("load.arrivals.trace");
    let values = super::sources::sample(&path, trace.column.as_deref()).map_err(at)?;
    let scale = trace.time_scale.unwrap_or(1.0);
    if !(scale.is_finite() && scale > 0.0) {
        return Err(Error::bad_input(format!("load.arrivals.time_scale = {scale}: must be a positive factor")));
    }
    let instants: Vec<Nanos> = values.iter().map(|t| stampede_engine::secs_to_nanos(t * scale)).collect();
    if !trace.sort {
        if let Some(i) = instants.windows(2).position(|w| w[1] < w[0]) {
            return Err(Error::bad_input(format!(
                "load.arrivals.trace: {}: instant {} ({} s) comes before the one above it ({} s); sort the trace, or set sort = true",
                path.display(),
                i + 2,
                values[i + 1],
                values[i]
            )));
        }
    }
    let keys = trace_keys(trace, &path, instants.len())?;
    // The rows `pick` names (all rows without its label column).
    for (field, column, readers) in trace.label_columns() {
        if column.is_some() && pick.map(|p| p.field) != Some(field) {
            return Err(Error::bad_input(format!("load.arrivals.{field}: {readers}")));
        }
    }
    let rows = picked_rows(trace, &path, pick, instants.len())?;
    // Sorting keeps each key with its instant.
    let mut order: Vec<usize> = rows;
    order.sort_by_key(|&i| instants[i]);
    let sorted: Vec<Nanos> = order.iter().map(|&i| instants[i]).collect();
    let keys = keys.map(|keys| Arc::from(order.iter().map(|&i| keys[i]).collect::<Vec<u64>>()));
    Ok(ArrivalProcess::Trace(Arc::from(sorted), keys))
}

/// A trace's keys (its `key_column`), row for row with its `instants`: whole numbers.
fn trace_keys(trace: &TraceSpec, path: &std::path::Path, instants: usize) -> Result<Option<Vec<u64>>> {
    Ok(match &trace.key_column {
        None => None,
        Some(column) => {
            let keys = super::sources::sample(path, Some(column)).map_err(|e| e.context("load.arrivals.key_column"))?;
            if keys.len() != instants {
                return Err(Error::bad_input(format!(
                    "load.arrivals.key_column: {} keys for {} instants; the columns must be row for row",
                    keys.len(),
                    instants
                )));
            }
            if let Some((i, bad)) = keys.iter().enumerate().find(|(_, k)| k.fract() != 0.0 || **k > 9.0e15) {
                return Err(Error::bad_input(format!(
                    "load.arrivals.key_column: key {} is {bad}; keys are whole numbers",
                    i + 1
                )));
            }
            Some(keys.iter().map(|k| *k as u64).collect::<Vec<u64>>())
        }
    })
}

/// The rows of a trace of `instants` rows that `pick` names (all rows without its
/// label column): at least one.
fn picked_rows(trace: &TraceSpec, path: &std::path::Path, pick: Option<Pick>, instants: usize) -> Result<Vec<usize>> {
    let picked = pick.and_then(|p| trace.label_columns().into_iter().find(|(f, ..)| *f == p.field)?.1.map(|c| (p, c)));
    Ok(match picked {
        None => (0..instants).collect(),
        Some((pick, column)) => {
            let field = pick.field;
            let labels =
                super::sources::labels(path, column).map_err(|e| e.context(format!("load.arrivals.{field}")))?;
            if labels.len() != instants {
                return Err(Error::bad_input(format!(
                    "load.arrivals.{field}: {} labels for {} instants; the columns must be row for row",
                    labels.len(),
                    instants
                )));
            }
            let rows: Vec<usize> = (0..labels.len()).filter(|&i| labels[i] == pick.value).collect();
            if rows.is_empty() {
                let mut seen: Vec<&str> = labels.iter().map(String::as_str).collect();
                seen.sort_unstable();
                seen.dedup();
                return Err(Error::bad_input(format!(
                    "load.arrivals.{field}: no row of {column:?} in {} names {:?}; it names {}",
                    path.display(),
                    pick.value,
                    seen.iter().take(12).copied().collect::<Vec<_>>().join(", ")
                )));
            }
            rows
        }
    })
}

/// A model's arrivals: its own constant rate at `rate_path` (`rate`), or its `[load]`
/// section. The rate must be given one way: both, or neither, is refused. `None` when
/// there is no `[load]` (the model draws Poisson gaps at its rate, as it always did).
/// `keyless` names a model whose requests have no keys: it refuses a trace's key column.
pub fn model_arrivals(
    load: Option<&LoadSpec>,
    rate: Option<f64>,
    rate_path: &str,
    keyless: Option<&str>,
) -> Result<Option<ArrivalProcess>> {
    entry_arrivals(load, rate, rate_path, keyless, None)
}

/// [`model_arrivals`] for one stream of a labelled trace (`pick`: a graph workload's
/// entry, a gateway class).
pub fn entry_arrivals(
    load: Option<&LoadSpec>,
    rate: Option<f64>,
    rate_path: &str,
    keyless: Option<&str>,
    pick: Option<Pick>,
) -> Result<Option<ArrivalProcess>> {
    let keyed =
        matches!(load.and_then(|l| l.arrivals.as_ref()), Some(ArrivalsField::Trace(t)) if t.key_column.is_some());
    if let (Some(model), true) = (keyless, keyed) {
        return Err(Error::bad_input(format!(
            "load.arrivals.key_column: the {model} model's requests have no keys (the cluster's do)"
        )));
    }
    match (rate, load.is_some_and(LoadSpec::sets_rate)) {
        (Some(rate), true) => {
            Err(Error::bad_input(format!("{rate_path} = {rate}: [load] sets the arrivals too; give the rate one way")))
        }
        (None, false) => Err(Error::bad_input(format!(
            "{rate_path}: missing; give the arrival rate here, or a rate or trace in [load]"
        ))),
        _ => load.map(|load| load.resolve_for(rate.unwrap_or(f64::NAN), rate_path, pick)).transpose(),
    }
}

/// The mean arrival rate over `[0, horizon_s)`: the rate's integral over the horizon,
/// or a trace's instants in it, per second.
pub fn mean_rate(process: &ArrivalProcess, horizon_s: f64) -> f64 {
    match process {
        ArrivalProcess::Poisson(profile) | ArrivalProcess::Even(profile) => {
            profile.expected_arrivals(0.0, horizon_s) / horizon_s
        }
        ArrivalProcess::Trace(instants, _) => {
            let horizon = stampede_engine::secs_to_nanos(horizon_s);
            instants.iter().filter(|t| **t < horizon).count() as f64 / horizon_s
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape_of(process: ArrivalProcess) -> RateProfile {
        match process {
            ArrivalProcess::Poisson(profile) | ArrivalProcess::Even(profile) => profile,
            other => panic!("a rate profile: {other:?}"),
        }
    }

    /// `scale` multiplies every rate of every form (so two workloads can share one
    /// file), and is refused for a trace and when not a positive factor.
    #[test]
    fn scale_multiplies_every_form_of_rate() {
        let points =
            LoadSpec { rate: Some(RateField::Points(vec![[0.0, 100.0], [10.0, 300.0]])), ..LoadSpec::default() };
        let sine = LoadSpec {
            rate: Some(RateField::Shape(ShapeSpec {
                shape: "sine".into(),
                mean: 100.0,
                amplitude: 50.0,
                period_s: 8.0,
            })),
            ..LoadSpec::default()
        };
        for spec in [points, sine, LoadSpec::default()] {
            let plain = shape_of(spec.resolve(100.0, "rate").unwrap());
            let scaled = shape_of(LoadSpec { scale: Some(0.3), ..spec.clone() }.resolve(100.0, "rate").unwrap());
            for t in [0.0, 2.0, 5.0, 12.0] {
                assert!((scaled.rate(t) - 0.3 * plain.rate(t)).abs() < 1e-9, "{spec:?} at {t}");
            }
        }
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let error = LoadSpec { scale: Some(bad), ..LoadSpec::default() }.resolve(10.0, "rate").unwrap_err();
            assert!(error.to_string().contains("load.scale"), "{error}");
        }
        let trace = TraceSpec {
            trace: "t.csv".into(),
            column: None,
            time_scale: None,
            sort: false,
            key_column: None,
            endpoint_column: None,
            class_column: None,
        };
        let spec = LoadSpec { arrivals: Some(ArrivalsField::Trace(trace)), scale: Some(2.0), ..LoadSpec::default() };
        let error = spec.resolve(10.0, "rate").unwrap_err().to_string();
        assert!(error.contains("load.scale") && error.contains("time_scale"), "{error}");
    }
}
