//! What a model reports, declared next to how it is read: scalar metrics per
//! replica (each a count or a real, named with its unit), per-bucket time series,
//! latency histograms by name, and a histogram of a small-integer quantity.
//!
//! A model keeps one table of [`Metric`]s — name, kind, description and the
//! function that reads the value off its results — so names and values cannot drift
//! out of step.

use stampede_engine::measurement::latency_windows::WindowCounts;

/// Whether a metric is a count (written as an unsigned integer per replica) or a real.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetricKind {
    Real,
    Count,
}

/// A scalar metric a model reports per replica.
#[derive(Clone, Copy, Debug)]
pub struct MetricDef {
    /// snake_case, ending in its unit where it has one.
    pub name: &'static str,
    pub kind: MetricKind,
    /// One line for the README and `--help`-style listings.
    pub description: &'static str,
    /// A share from 0 to 1; otherwise the value is only known to be at least 0
    /// (every metric stampede reports is non-negative). Intervals are clipped to this.
    pub fraction: bool,
    /// Shown first, and by default the only ones, in the terminal summary.
    pub headline: bool,
    /// Whether more is better, less is better, or neither (a description).
    pub direction: Direction,
    /// May be below 0 (a metric expression with a subtraction): its interval is not
    /// clipped at 0.
    pub signed: bool,
}

/// Which way a metric is better.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    Higher,
    Lower,
    Neither,
}

impl MetricDef {
    /// A metric that is no headline and has no direction.
    pub const fn new(name: &'static str, kind: MetricKind, description: &'static str, fraction: bool) -> Self {
        MetricDef { name, kind, description, fraction, headline: false, direction: Direction::Neither, signed: false }
    }

    /// The interval `[lo, hi]` clipped to the metric's domain.
    pub fn clip(&self, lo: f64, hi: f64) -> (f64, f64) {
        let top = if self.fraction { 1.0 } else { f64::INFINITY };
        let bottom = if self.signed { f64::NEG_INFINITY } else { 0.0 };
        // NaN stays NaN: max/min would turn it into the bound.
        let clip = |v: f64| if v.is_nan() { v } else { v.clamp(bottom, top) };
        (clip(lo), clip(hi))
    }
}

/// How a time series' per-bucket integers become a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SeriesKind {
    /// Σ level × ns: divided by the bucket's nanoseconds it is the bucket's mean level.
    Area,
    /// A count: divided by the bucket's seconds it is a rate per second.
    Count,
}

/// A per-bucket time series a model reports.
#[derive(Clone, Copy, Debug)]
pub struct SeriesDef {
    pub name: &'static str,
    pub kind: SeriesKind,
}

/// A request kind whose latency is also kept over time (in windows, see
/// `engine::measurement::latency_windows`): its name in `timeseries.parquet`'s
/// columns (`NAME.p99_all_s`), its answered-in-full histogram (whose `_all_s`
/// sibling the windows' every-ending quantiles refine in time), and whether it can
/// end degraded.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TimedLatency {
    pub name: &'static str,
    pub histogram: &'static str,
    pub degraded: bool,
}

impl TimedLatency {
    /// Its every-request histogram: `response_s` → `response_all_s`.
    pub fn all_histogram(&self) -> String {
        format!("{}_all_s", self.histogram.trim_end_matches("_s"))
    }
}

/// What one replica produced.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ReplicaOutput {
    /// In the model's metric order.
    pub metrics: Vec<f64>,
    /// In the model's [`TimedLatency`] order, each kind's latencies over time (empty
    /// for a model without).
    pub latency_windows: Vec<WindowCounts>,
    /// In the model's series order, one integer per bucket (empty without series).
    pub series: Vec<Vec<u128>>,
    /// Counts of a small-integer quantity (the model's count histogram); empty without.
    pub counts: Vec<u64>,
}

/// A replica run with its trace (the same replica, the same numbers, plus every call).
#[derive(Clone, Debug)]
pub struct TracedReplica {
    pub output: ReplicaOutput,
    pub trace: stampede_engine::measurement::trace::Trace,
}

/// A model's histogram of a small-integer quantity, written to its own file.
#[derive(Clone, Copy, Debug)]
pub struct CountHistogramDef {
    /// The file, e.g. `hops.parquet`.
    pub file: &'static str,
    /// The value column, e.g. `hops`; the last index means "this many or more".
    pub column: &'static str,
}

/// A metric that counts requests of one entry point by the service that caused their
/// failure (or degradation): one row of `attribution.parquet`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Attribution {
    /// The metric, e.g. `web.page.failed_by.db.timeout`.
    pub metric: &'static str,
    /// The entry point, e.g. `web.page`.
    pub entry: &'static str,
    /// The service that caused it, e.g. `db`.
    pub service: &'static str,
    /// How: where a failure was decided (`timeout`, `refused`, `error`, `breaker_open`:
    /// the deepest failure), `degraded` (a fallback answered for it), `caused` (failed
    /// requests it caused, wherever they failed) or `slow` (slow requests most of whose
    /// time it caused).
    pub reason: &'static str,
}

/// A metric together with how to read it off a model's results: one table per model,
/// so names, kinds and values cannot drift out of step.
pub struct Metric<R> {
    pub def: MetricDef,
    read: Read<R>,
}

/// How a metric's value is read: a plain function, or one applied to an index (a
/// class, a reason) so that per-variant metrics are built by iterating an enum.
enum Read<R> {
    Value(fn(&R) -> f64),
    Indexed(fn(&R, usize) -> f64, usize),
}

impl<R> Clone for Read<R> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<R> Copy for Read<R> {}

impl<R> Clone for Metric<R> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<R> Copy for Metric<R> {}

/// Marks `metric` as a headline, better in `direction`.
pub const fn headline<R>(direction: Direction, mut metric: Metric<R>) -> Metric<R> {
    metric.def.headline = true;
    metric.def.direction = direction;
    metric
}

impl<R> Metric<R> {
    /// A metric read by `value(results, index)`.
    pub const fn indexed(def: MetricDef, value: fn(&R, usize) -> f64, index: usize) -> Metric<R> {
        Metric { def, read: Read::Indexed(value, index) }
    }

    /// The metric's value in `results`.
    pub fn value(&self, results: &R) -> f64 {
        match self.read {
            Read::Value(value) => value(results),
            Read::Indexed(value, index) => value(results, index),
        }
    }
}

pub const fn real<R>(name: &'static str, description: &'static str, value: fn(&R) -> f64) -> Metric<R> {
    Metric { def: MetricDef::new(name, MetricKind::Real, description, false), read: Read::Value(value) }
}

/// A real metric that is a share from 0 to 1.
pub const fn fraction<R>(name: &'static str, description: &'static str, value: fn(&R) -> f64) -> Metric<R> {
    Metric { def: MetricDef::new(name, MetricKind::Real, description, true), read: Read::Value(value) }
}

pub const fn count<R>(name: &'static str, description: &'static str, value: fn(&R) -> f64) -> Metric<R> {
    Metric { def: MetricDef::new(name, MetricKind::Count, description, false), read: Read::Value(value) }
}

/// The definitions of a table, in order.
pub fn defs<R>(table: &[Metric<R>]) -> Vec<MetricDef> {
    table.iter().map(|m| m.def).collect()
}

/// The values of a table read off `results`, in order.
pub fn values<R>(table: &[Metric<R>], results: &R) -> Vec<f64> {
    table.iter().map(|m| m.value(results)).collect()
}

/// 1 for true, 0 for false: a flag's share over replicas.
pub fn flag(value: bool) -> f64 {
    if value {
        1.0
    } else {
        0.0
    }
}

/// Interns a name or description built from a scenario (the graph model's
/// `api.checkout.p99_s`), so it can sit in a [`MetricDef`] beside the static ones. Each
/// distinct text is stored once for the life of the process: memory grows with the
/// distinct names of the scenarios resolved, not with runs or grid points.
pub fn intern(text: String) -> &'static str {
    use std::collections::BTreeSet;
    use std::sync::Mutex;
    static TEXTS: Mutex<BTreeSet<&'static str>> = Mutex::new(BTreeSet::new());
    let mut texts = TEXTS.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(&text) = texts.get(text.as_str()) {
        return text;
    }
    let text: &'static str = Box::leak(text.into_boxed_str());
    texts.insert(text);
    text
}

/// Interns a list of names (a model's latency histograms), once per distinct list.
pub(crate) fn intern_names(names: Vec<&'static str>) -> &'static [&'static str] {
    use std::collections::BTreeSet;
    use std::sync::Mutex;
    static LISTS: Mutex<BTreeSet<&'static [&'static str]>> = Mutex::new(BTreeSet::new());
    let mut lists = LISTS.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(&list) = lists.get(names.as_slice()) {
        return list;
    }
    let list: &'static [&'static str] = Box::leak(names.into_boxed_slice());
    lists.insert(list);
    list
}

/// Interns a list of series declarations, once per distinct list.
pub(crate) fn intern_series(series: Vec<SeriesDef>) -> &'static [SeriesDef] {
    use std::sync::Mutex;
    static LISTS: Mutex<Vec<&'static [SeriesDef]>> = Mutex::new(Vec::new());
    let mut lists = LISTS.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let same = |list: &[SeriesDef]| {
        list.len() == series.len() && list.iter().zip(&series).all(|(a, b)| a.name == b.name && a.kind == b.kind)
    };
    if let Some(&list) = lists.iter().find(|list| same(list)) {
        return list;
    }
    let list: &'static [SeriesDef] = Box::leak(series.into_boxed_slice());
    lists.push(list);
    list
}
