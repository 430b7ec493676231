//! Inputs from the real system: the distribution value a scenario gives wherever a
//! model takes a service time or a latency — `{ dist = "gamma", mean_s = 0.05, scv = 2 }`,
//! `{ dist = "empirical", file = "lat.parquet", column = "latency_s" }`,
//! `{ dist = "hdr", file = "lat.hlog", unit = "us" }`,
//! `{ dist = "prometheus", file = "metrics.txt", metric = "…", labels = { … } }`,
//! `{ dist = "quantiles", p50_s = …, p99_s = …, max_s = … }` — each with an optional
//! `scale` and `shift_s`.
//!
//! [`DistributionSpec`] is the TOML form, kept as written (so `show` prints it back);
//! [`DistributionSpec::resolve`] checks it, reads its file and builds the engine's
//! [`Distribution`]. A table built from a file is made once per process for each (file,
//! content, spec) and shared read-only by every grid point and replica.

pub(crate) mod buckets;
pub mod fit;
pub(crate) mod load;
pub mod observed;
pub mod sealed;
pub(crate) mod sources;

#[cfg(test)]
mod fuzz;

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use serde::{Deserialize, Serialize};
use stampede_engine::components::distribution::{Distribution, QuantileTable, Shape};
use stampede_engine::kernel::Named;

use crate::base::error::{Error, Result};

thread_local! {
    /// The folder relative `file`s are read from while a scenario is being typed.
    static BASE_DIR: RefCell<Option<PathBuf>> = const { RefCell::new(None) };
}

/// Runs `f` with relative input files read from `dir` (the scenario file's folder;
/// `None`: the current folder). The scenario keeps its paths as written, so `show`
/// prints them back unchanged.
pub fn with_base_dir<R>(dir: Option<&Path>, f: impl FnOnce() -> R) -> R {
    let previous = BASE_DIR.with(|base| base.replace(dir.map(Path::to_path_buf)));
    let result = f();
    BASE_DIR.with(|base| *base.borrow_mut() = previous);
    result
}

/// Where `file` (as written) is read from.
pub fn locate(file: &str) -> PathBuf {
    let path = Path::new(file);
    match BASE_DIR.with(|base| base.borrow().clone()) {
        Some(dir) if path.is_relative() => dir.join(path),
        _ => path.to_path_buf(),
    }
}

/// A distribution as a scenario writes it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DistributionSpec {
    /// constant | exponential | lognormal | gamma | weibull | hyperexponential |
    /// empirical | hdr | prometheus | quantiles
    pub dist: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scv: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub median_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sigma: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shape: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub column: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metric: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tail: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p50_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p75_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p90_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p95_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p999_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fit: Option<String>,
    /// Multiplies every draw ("what if it were 50% slower": 1.5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale: Option<f64>,
    /// Added to every draw, after the scale.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shift_s: Option<f64>,
}

/// The kinds, with the fields each requires and the ones it also accepts.
const KINDS: &[(&str, &[&str], &[&str])] = &[
    ("constant", &["value_s"], &[]),
    ("exponential", &["mean_s"], &[]),
    ("lognormal", &[], &["mean_s", "scv", "median_s", "sigma"]),
    ("gamma", &[], &["mean_s", "scv", "shape", "scale_s"]),
    ("weibull", &["shape", "scale_s"], &[]),
    ("hyperexponential", &["mean_s", "scv"], &[]),
    ("empirical", &["file"], &["column"]),
    ("hdr", &["file", "unit"], &["start_s", "end_s"]),
    ("prometheus", &["file", "metric"], &["labels", "tail"]),
    ("quantiles", &[], &["min_s", "p50_s", "p75_s", "p90_s", "p95_s", "p99_s", "p999_s", "max_s", "fit"]),
];

/// Fields every kind accepts.
const COMMON: &[&str] = &["dist", "scale", "shift_s"];

/// The quantile fields and their probabilities, in order.
const QUANTILES: &[(&str, f64)] =
    &[("p50_s", 0.5), ("p75_s", 0.75), ("p90_s", 0.9), ("p95_s", 0.95), ("p99_s", 0.99), ("p999_s", 0.999)];

impl DistributionSpec {
    /// The fields this spec sets, by name.
    fn present(&self) -> Vec<&'static str> {
        let table = crate::base::typing::to_table(self);
        let mut names: Vec<&'static str> = KINDS
            .iter()
            .flat_map(|(_, required, optional)| required.iter().chain(optional.iter()))
            .chain(COMMON.iter())
            .copied()
            .filter(|name| table.contains_key(*name))
            .collect();
        names.sort_unstable();
        names.dedup();
        names
    }

    /// The file this spec reads, if any.
    pub fn file(&self) -> Option<&str> {
        self.file.as_deref()
    }

    /// Checks the spec at field path `path` (`queue.service`), reads its file, and
    /// builds the distribution. Every refusal names the field, the value and what is
    /// allowed.
    pub fn resolve(&self, path: &str) -> Result<Distribution> {
        let Some((kind, required, optional)) = KINDS.iter().find(|(kind, ..)| *kind == self.dist) else {
            let names: Vec<&str> = KINDS.iter().map(|(k, ..)| *k).collect();
            return Err(Error::bad_input(format!(
                "{path}.dist = {:?}: not a distribution; allowed: {}",
                self.dist,
                names.join(", ")
            )));
        };
        let present = self.present();
        for field in &present {
            if !COMMON.contains(field) && !required.contains(field) && !optional.contains(field) {
                let takes: Vec<&str> = required.iter().chain(optional.iter()).chain(&COMMON[1..]).copied().collect();
                return Err(Error::bad_input(format!(
                    "{path}.{field}: dist = {kind:?} does not take {field}; it takes {}",
                    takes.join(", ")
                )));
            }
        }
        for field in *required {
            if !present.contains(field) {
                return Err(Error::bad_input(format!(
                    "{path}: dist = {kind:?} needs {field} ({})",
                    required.join(", ")
                )));
            }
        }
        let scale = self.scale.unwrap_or(1.0);
        if !(scale.is_finite() && scale > 0.0) {
            return Err(Error::bad_input(format!("{path}.scale = {scale}: must be a positive factor")));
        }
        let shift = self.shift_s.unwrap_or(0.0);
        if !(shift.is_finite() && shift >= 0.0) {
            return Err(Error::bad_input(format!("{path}.shift_s = {shift}: must be 0 or more seconds")));
        }
        Ok(self.shaped(path, kind)?.adjusted(scale, shift))
    }

    /// The distribution of kind `kind` (known, its fields checked against the kind)
    /// from this spec's parameters, before scale and shift.
    fn shaped(&self, path: &str, kind: &str) -> Result<Distribution> {
        Ok(match kind {
            "constant" => Distribution::new(Shape::Constant { value_s: non_negative(path, "value_s", self.value_s)? }),
            "exponential" => Distribution::new(Shape::Exponential { mean_s: positive(path, "mean_s", self.mean_s)? }),
            "lognormal" => match (self.mean_s, self.scv, self.median_s, self.sigma) {
                (Some(_), Some(_), None, None) => Distribution::lognormal_mean_scv(
                    positive(path, "mean_s", self.mean_s)?,
                    positive(path, "scv", self.scv)?,
                ),
                (None, None, Some(_), Some(_)) => Distribution::new(Shape::Lognormal {
                    mu: positive(path, "median_s", self.median_s)?.ln(),
                    sigma: positive(path, "sigma", self.sigma)?,
                }),
                _ => return Err(pair_error(path, "lognormal", "mean_s and scv", "median_s and sigma")),
            },
            "gamma" => match (self.mean_s, self.scv, self.shape, self.scale_s) {
                (Some(_), Some(_), None, None) => Distribution::gamma_mean_scv(
                    positive(path, "mean_s", self.mean_s)?,
                    positive(path, "scv", self.scv)?,
                ),
                (None, None, Some(_), Some(_)) => Distribution::new(Shape::Gamma {
                    shape: positive(path, "shape", self.shape)?,
                    scale_s: positive(path, "scale_s", self.scale_s)?,
                }),
                _ => return Err(pair_error(path, "gamma", "mean_s and scv", "shape and scale_s")),
            },
            "weibull" => Distribution::new(Shape::Weibull {
                shape: positive(path, "shape", self.shape)?,
                scale_s: positive(path, "scale_s", self.scale_s)?,
            }),
            "hyperexponential" => {
                let scv = positive(path, "scv", self.scv)?;
                if scv < 1.0 {
                    return Err(Error::bad_input(format!(
                        "{path}.scv = {scv}: a two-phase hyperexponential has scv ≥ 1 (use gamma or lognormal below 1)"
                    )));
                }
                Distribution::hyperexponential_mean_scv(positive(path, "mean_s", self.mean_s)?, scv)
            }
            "quantiles" if self.fit.is_some() => self.fitted_quantiles(path)?,
            _ => Distribution::new(Shape::Table(self.table(path)?)),
        })
    }

    /// The data's own distribution and how many observations it holds, for `stampede
    /// fit`: a sample's values, or a histogram's total count.
    pub fn data(&self, path: &str) -> Result<(Arc<QuantileTable>, f64)> {
        let table = match self.resolve(path)?.shape {
            Shape::Table(table) => table,
            _ => return Err(Error::bad_input(format!("{path}: dist = {:?} is not data", self.dist))),
        };
        let located = self.file.as_deref().map(locate).unwrap_or_default();
        let count = match self.dist.as_str() {
            "empirical" => sources::sample(&located, self.column.as_deref())?.len() as f64,
            "hdr" => sources::hdr(&located, (self.start_s, self.end_s))?.len() as f64,
            "prometheus" => {
                let labels = self.labels.clone().unwrap_or_default();
                let buckets = sources::prometheus(&located, self.metric.as_deref().unwrap_or_default(), &labels)?;
                buckets.bounds.last().map_or(0.0, |b| b.1)
            }
            _ => f64::NAN,
        };
        Ok((table, count))
    }

    /// The spec as an inline TOML table, ready to paste after `service = `.
    pub fn inline_toml(&self) -> String {
        toml::Value::try_from(self).map(|v| v.to_string()).unwrap_or_default()
    }

    /// The table of a data-driven kind, from the process-wide cache or built now.
    fn table(&self, path: &str) -> Result<Arc<QuantileTable>> {
        static CACHE: OnceLock<Mutex<BTreeMap<String, Arc<QuantileTable>>>> = OnceLock::new();
        // The key holds the spec and the hash of the file's sealed bytes (a file is
        // read once per process: see `sealed`).
        let located = self.file.as_deref().map(locate);
        let sealed = located.as_deref().map(sealed::read).transpose().map_err(|e| e.context(format!("{path}.file")))?;
        let key = format!("{self:?}{located:?}{:?}", sealed.map(|s| s.sha256.clone()));
        let cache = CACHE.get_or_init(Default::default);
        if let Some(table) = cache.lock().expect("the cache lock").get(&key) {
            return Ok(Arc::clone(table));
        }
        let table = Arc::new(self.build_table(path)?);
        cache.lock().expect("the cache lock").insert(key, Arc::clone(&table));
        Ok(table)
    }

    fn build_table(&self, path: &str) -> Result<QuantileTable> {
        let located = self.file.as_deref().map(locate);
        let file = || located.as_deref().expect("checked: file is required");
        let at = |e: Error| e.context(format!("{path}.file"));
        let table = match self.dist.as_str() {
            "empirical" => QuantileTable::from_sample(&sources::sample(file(), self.column.as_deref()).map_err(at)?),
            "hdr" => {
                let unit = self.unit.as_deref().expect("checked: unit is required");
                let seconds = sources::unit_seconds(unit).ok_or_else(|| {
                    Error::bad_input(format!("{path}.unit = {unit:?}: allowed: \"ns\", \"us\", \"ms\", \"s\" (the unit the histogram's values were recorded in)"))
                })?;
                let window = (self.start_s, self.end_s);
                if let (Some(from), Some(to)) = window {
                    if !(from >= 0.0 && to > from) {
                        return Err(Error::bad_input(format!(
                            "{path}: start_s = {from}, end_s = {to}: need 0 ≤ start_s < end_s"
                        )));
                    }
                }
                let histogram = sources::hdr(file(), window).map_err(at)?;
                let knots: Vec<(f64, f64)> =
                    sources::hdr_knots(&histogram).into_iter().map(|(v, p)| (v * seconds, p)).collect();
                QuantileTable::from_cdf(&knots)
            }
            "prometheus" => {
                let metric = self.metric.as_deref().expect("checked: metric is required");
                let labels = self.labels.clone().unwrap_or_default();
                let buckets = sources::prometheus(file(), metric, &labels).map_err(at)?;
                let tail = self.tail.as_deref().unwrap_or("cap");
                let knots = buckets::bucket_knots(&buckets, tail)
                    .map_err(|why| Error::bad_input(format!("{path}.tail: {why}")))?;
                QuantileTable::from_cdf(&knots)
            }
            "quantiles" => QuantileTable::from_cdf(&self.quantile_knots(path)?),
            other => unreachable!("{other} has no table"),
        };
        table.map_err(|why| Error::bad_input(format!("{path}: {why}")))
    }

    /// (value, probability) of each quantile given, in order, each checked.
    fn given_quantiles(&self, path: &str) -> Result<Vec<(f64, f64, &'static str)>> {
        let table = crate::base::typing::to_table(self);
        let mut given = Vec::new();
        for (field, p) in QUANTILES {
            if let Some(value) = table.get(*field).and_then(toml::Value::as_float) {
                given.push((non_negative(path, field, Some(value))?, *p, *field));
            }
        }
        if given.is_empty() {
            return Err(Error::bad_input(format!(
                "{path}: dist = \"quantiles\" needs at least one of p50_s, p75_s, p90_s, p95_s, p99_s, p999_s"
            )));
        }
        for pair in given.windows(2) {
            if pair[1].0 < pair[0].0 {
                return Err(Error::bad_input(format!(
                    "{path}.{} = {}: below {} = {}; quantiles must not decrease",
                    pair[1].2, pair[1].0, pair[0].2, pair[0].0
                )));
            }
        }
        Ok(given)
    }

    /// A piecewise-linear CDF through min_s (default 0) at 0, each quantile, and max_s at 1.
    fn quantile_knots(&self, path: &str) -> Result<Vec<(f64, f64)>> {
        let given = self.given_quantiles(path)?;
        let max = self.max_s.ok_or_else(|| {
            Error::bad_input(format!(
                "{path}: dist = \"quantiles\" needs max_s (where the distribution ends), or fit = \"lognormal\" or \"gamma\" to fit one through the quantiles"
            ))
        })?;
        let min = non_negative(path, "min_s", Some(self.min_s.unwrap_or(0.0)))?;
        let mut knots = vec![(min, 0.0)];
        knots.extend(given.iter().map(|(v, p, _)| (*v, *p)));
        knots.push((non_negative(path, "max_s", Some(max))?, 1.0));
        for pair in knots.windows(2) {
            if pair[1].0 < pair[0].0 {
                return Err(Error::bad_input(format!(
                    "{path}: the quantiles must not decrease from min_s through max_s; {} comes after {}",
                    pair[1].0, pair[0].0
                )));
            }
        }
        Ok(knots)
    }

    /// The lognormal or gamma closest to the given quantiles (least squares on the
    /// logarithms of the quantiles).
    fn fitted_quantiles(&self, path: &str) -> Result<Distribution> {
        let given = self.given_quantiles(path)?;
        let points: Vec<(f64, f64)> = given.iter().map(|(v, p, _)| (*p, *v)).collect();
        if points.iter().any(|(_, v)| *v <= 0.0) {
            return Err(Error::bad_input(format!("{path}: fitting needs quantiles above 0")));
        }
        match self.fit.as_deref() {
            Some("lognormal") => fit::lognormal_from_quantiles(&points)
                .map(|(mu, sigma)| Distribution::new(Shape::Lognormal { mu, sigma }))
                .ok_or_else(|| Error::bad_input(format!("{path}: a lognormal fit needs two distinct quantiles"))),
            Some("gamma") => fit::gamma_from_quantiles(&points)
                .map(|(shape, scale_s)| Distribution::new(Shape::Gamma { shape, scale_s }))
                .ok_or_else(|| Error::bad_input(format!("{path}: a gamma fit needs two distinct quantiles"))),
            other => Err(Error::bad_input(format!(
                "{path}.fit = {:?}: allowed: \"lognormal\", \"gamma\"",
                other.unwrap_or_default()
            ))),
        }
    }
}

/// A model field that takes either one of the model's shape names (the parameters in
/// sibling fields, as before distribution values existed) or a distribution value:
/// `service = "lognormal"` or `service = { dist = "empirical", file = "lat.csv" }`.
#[derive(Clone, Debug, PartialEq)]
pub enum ShapeOrValue<T> {
    Shape(T),
    Value(Box<DistributionSpec>),
}

impl<T> ShapeOrValue<T> {
    /// The distribution value, when the field holds one.
    pub fn value(&self) -> Option<&DistributionSpec> {
        match self {
            ShapeOrValue::Shape(_) => None,
            ShapeOrValue::Value(spec) => Some(spec),
        }
    }

    /// The distribution value resolved (its file read), for `ModelSpec::prepare`;
    /// `None` for a shape name, which the model turns into its own parameters.
    pub fn resolve(&self, path: &str) -> Result<Option<Distribution>> {
        self.value().map(|spec| spec.resolve(path)).transpose()
    }
}

/// The files a model's configuration reads, for the manifest: a distribution value's
/// file (at field `path`) and the `[load]` section's.
pub fn input_files(value: Option<(&str, &DistributionSpec)>, load: Option<&load::LoadSpec>) -> Vec<(String, String)> {
    let file = value.and_then(|(path, spec)| Some((format!("{path}.file"), spec.file()?.to_string())));
    file.into_iter().chain(load.into_iter().flat_map(load::LoadSpec::files)).collect()
}

impl<T: Named> Serialize for ShapeOrValue<T> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        match self {
            ShapeOrValue::Shape(shape) => serializer.serialize_str(shape.name()),
            ShapeOrValue::Value(spec) => spec.serialize(serializer),
        }
    }
}

impl<'de, T: Named> Deserialize<'de> for ShapeOrValue<T> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        use serde::de::Error as _;
        match toml::Value::deserialize(deserializer)? {
            toml::Value::String(name) => T::from_name(&name).map(ShapeOrValue::Shape).ok_or_else(|| {
                D::Error::custom(format!(
                    "{name:?} is not a service shape; allowed: {}, or a distribution value such as {{ dist = \"empirical\", file = \"lat.csv\" }}",
                    T::NAMES.join(", ")
                ))
            }),
            table @ toml::Value::Table(_) => DistributionSpec::deserialize(table)
                .map(|spec| ShapeOrValue::Value(Box::new(spec)))
                .map_err(|e| D::Error::custom(e.to_string().trim_end())),
            other => Err(D::Error::custom(format!("{other}: a shape name or a distribution value {{ dist = … }}"))),
        }
    }
}

fn pair_error(path: &str, kind: &str, one: &str, other: &str) -> Error {
    Error::bad_input(format!("{path}: dist = {kind:?} takes either {one}, or {other}"))
}

fn positive(path: &str, field: &str, value: Option<f64>) -> Result<f64> {
    match value {
        Some(v) if v.is_finite() && v > 0.0 => Ok(v),
        Some(v) => Err(Error::bad_input(format!("{path}.{field} = {v}: must be a positive number"))),
        None => Err(Error::bad_input(format!("{path}: needs {field}"))),
    }
}

fn non_negative(path: &str, field: &str, value: Option<f64>) -> Result<f64> {
    match value {
        Some(v) if v.is_finite() && v >= 0.0 => Ok(v),
        Some(v) => Err(Error::bad_input(format!("{path}.{field} = {v}: must be 0 or more seconds"))),
        None => Err(Error::bad_input(format!("{path}: needs {field}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hdrhistogram::serialization::interval_log::IntervalLogWriterBuilder;
    use hdrhistogram::serialization::{Serializer, V2DeflateSerializer, V2Serializer};
    use hdrhistogram::Histogram;
    use stampede_engine::kernel::rng::{RngStream, StreamPurpose};

    fn spec(text: &str) -> DistributionSpec {
        toml::from_str(text).unwrap()
    }

    /// An HdrHistogram read three ways (V2, V2 + DEFLATE, an interval log of two
    /// intervals) gives the quantiles the `hdrhistogram` crate itself gives, within the
    /// histogram's own precision (3 significant digits), and a window keeps one interval.
    #[test]
    fn hdr_files_agree_with_the_crates_own_quantiles() {
        let dir = tempfile::tempdir().unwrap();
        let mut first = Histogram::<u64>::new_with_bounds(1, 10_000_000, 3).unwrap();
        let mut second = first.clone();
        for i in 1..=20_000u64 {
            first.record(100 + (i * i) % 50_000).unwrap();
            second.record(1_000_000 + i).unwrap();
        }
        let mut v2 = Vec::new();
        V2Serializer::new().serialize(&first, &mut v2).unwrap();
        let mut deflated = Vec::new();
        V2DeflateSerializer::new().serialize(&first, &mut deflated).unwrap();
        std::fs::write(dir.path().join("a.hdr"), &v2).unwrap();
        std::fs::write(dir.path().join("a.hdrz"), &deflated).unwrap();
        let mut log = Vec::new();
        {
            let mut serializer = V2DeflateSerializer::new();
            let mut writer = IntervalLogWriterBuilder::new().begin_log_with(&mut log, &mut serializer).unwrap();
            writer
                .write_histogram(&first, std::time::Duration::from_secs(100), std::time::Duration::from_secs(10), None)
                .unwrap();
            writer
                .write_histogram(&second, std::time::Duration::from_secs(110), std::time::Duration::from_secs(10), None)
                .unwrap();
        }
        std::fs::write(dir.path().join("a.hlog"), &log).unwrap();
        let file = |name: &str| dir.path().join(name).display().to_string();
        for name in ["a.hdr", "a.hdrz"] {
            let table = match spec(&format!("dist = \"hdr\"\nfile = {:?}\nunit = \"us\"", file(name)))
                .resolve("x")
                .unwrap()
                .shape
            {
                Shape::Table(table) => table,
                other => panic!("{other:?}"),
            };
            for q in [0.1, 0.5, 0.9, 0.99, 0.999] {
                let want = first.value_at_quantile(q) as f64 * 1e-6;
                let got = table.quantile(q);
                assert!((got / want - 1.0).abs() < 2e-3, "{name} q{q}: {got} vs {want}");
            }
        }
        let merged = spec(&format!("dist = \"hdr\"\nfile = {:?}\nunit = \"ns\"", file("a.hlog"))).resolve("x").unwrap();
        let mut both = first.clone();
        both.add(&second).unwrap();
        assert!((merged.mean_s() / (both.mean() * 1e-9) - 1.0).abs() < 2e-3, "all intervals merged");
        let window = spec(&format!("dist = \"hdr\"\nfile = {:?}\nunit = \"ns\"\nstart_s = 5.0", file("a.hlog")))
            .resolve("x")
            .unwrap();
        assert!((window.mean_s() / (second.mean() * 1e-9) - 1.0).abs() < 2e-3, "only the interval from 10 s");
    }

    /// Writes `scenario/fixtures/checkout-latency.hlog`, the README's worked
    /// example: three one-minute intervals of a checkout service's latencies in
    /// microseconds (lognormal, median 18 ms, σ 0.6, the last minute 40% slower).
    /// `cargo test -p stampede-scenario -- --ignored write_the_hlog_fixture`.
    #[test]
    #[ignore = "writes a fixture; run by hand when it should change"]
    fn write_the_hlog_fixture() {
        let mut rng = RngStream::derive(2026, 0, StreamPurpose::named("fixture.hlog"));
        let mut log = Vec::new();
        let mut serializer = V2DeflateSerializer::new();
        let mut writer = IntervalLogWriterBuilder::new()
            .with_base_time(std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_764_547_200))
            .begin_log_with(&mut log, &mut serializer)
            .unwrap();
        for minute in 0..3u64 {
            let mut histogram = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).unwrap();
            let slower = if minute == 2 { 1.4 } else { 1.0 };
            for _ in 0..20_000 {
                let seconds = slower * rng.lognormal((0.018f64).ln(), 0.6);
                histogram.record((seconds * 1e6).round().max(1.0) as u64).unwrap();
            }
            let start = std::time::Duration::from_secs(60 * minute);
            writer.write_histogram(&histogram, start, std::time::Duration::from_secs(60), None).unwrap();
        }
        drop(writer);
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/checkout-latency.hlog");
        std::fs::write(path, log).unwrap();
    }

    /// A hand-written Prometheus exposition: draws fall into each bucket in the
    /// bucket's share (within three standard errors of 100,000 draws).
    #[test]
    fn prometheus_buckets_keep_their_shares() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.txt");
        std::fs::write(
            &path,
            "# TYPE rpc_seconds histogram\nrpc_seconds_bucket{le=\"0.01\"} 200\nrpc_seconds_bucket{le=\"0.05\"} 700\n\
             rpc_seconds_bucket{le=\"0.2\"} 950\nrpc_seconds_bucket{le=\"+Inf\"} 1000\nrpc_seconds_sum 60\nrpc_seconds_count 1000\n",
        )
        .unwrap();
        let text = format!(
            "dist = \"prometheus\"\nfile = {:?}\nmetric = \"rpc_seconds\"\ntail = \"exponential\"",
            path.display().to_string()
        );
        let distribution = spec(&text).resolve("x").unwrap();
        let mut rng = RngStream::derive(1, 0, StreamPurpose::named("test.prometheus"));
        let draws: Vec<f64> = (0..100_000).map(|_| distribution.sample_s(&mut rng)).collect();
        let share = |lo: f64, hi: f64| draws.iter().filter(|v| **v > lo && **v <= hi).count() as f64 / 1e5;
        for (lo, hi, want) in [(-1.0, 0.01, 0.2), (0.01, 0.05, 0.5), (0.05, 0.2, 0.25), (0.2, f64::INFINITY, 0.05)] {
            let se = (want * (1.0 - want) / 1e5f64).sqrt();
            assert!((share(lo, hi) - want).abs() < 3.0 * se + 1e-3, "({lo}, {hi}]: {} vs {want}", share(lo, hi));
        }
        // The exponential tail makes the mean _sum/_count.
        assert!((distribution.mean_s() - 0.06).abs() < 1e-3, "{}", distribution.mean_s());
    }
}
