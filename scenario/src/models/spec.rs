//! What a model is to the layers above: [`ModelSpec`], implemented once per model
//! on a unit struct and listed once in [`super::registry::MODELS`], and
//! [`ModelConfig`], a typed, validated configuration of some model at one grid point.
//!
//! The run layer never names a model: it asks a [`ModelConfig`] for its metrics,
//! series and histograms and to run a replica. Dispatch through `dyn` happens once
//! per replica, never per event (the engine's models are monomorphised).

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::Serialize;
use stampede_engine::kernel::splitting::Splittable;
use stampede_engine::LatencyHistogram;

use super::expression::MetricExpr;
use super::metrics::{CountHistogramDef, MetricDef, MetricKind, ReplicaOutput, SeriesDef, TimedLatency, TracedReplica};
use super::presentation::Presentation;
use super::rare::{Offered, Probe};
use crate::base::error::Result;
use crate::base::typing::{to_table, typed};
use crate::scenario::RunConfig;

/// One model: its name and sections, how its configuration is typed and
/// validated, what it reports, and how one replica runs.
pub trait ModelSpec: Send + Sync + 'static {
    /// The model's sections, typed (serde, unknown fields refused).
    type Config: Serialize + DeserializeOwned + Clone + fmt::Debug + Send + Sync + 'static;

    /// `model = "…"` in scenarios.
    const NAME: &'static str;
    /// One line for listings.
    const DESCRIPTION: &'static str;
    /// The top-level sections the model reads.
    const SECTIONS: &'static [&'static str];

    /// Dotted paths of fields that name files; a relative one in a scenario file is
    /// read from the scenario file's folder.
    const PATH_FIELDS: &'static [&'static str] = &[];

    /// Files the configuration reads, as (field path, file as written), for the
    /// manifest, which records each one's hash and (up to 1 MB of text) its content:
    /// one manifest then reproduces the run.
    fn inputs(_config: &Self::Config) -> Vec<(String, String)> {
        Vec::new()
    }

    /// Work done once when a grid point is typed, before validation (reading a
    /// fixture, say); the default does nothing.
    fn prepare(config: Self::Config) -> Result<Self::Config> {
        Ok(config)
    }

    /// Column groups this configuration reports only because a mechanism is on (a graph
    /// edge's outlier detection, say), by name. A scenario writes the union over its
    /// grid points (see [`Self::with_optional_columns`]), so a grid may turn a
    /// mechanism on at some points while a scenario that never does keeps its tables.
    fn optional_columns(_config: &Self::Config) -> Vec<&'static str> {
        Vec::new()
    }

    /// The configuration reporting `groups` (from any grid point's
    /// [`Self::optional_columns`]) as well as its own; the model reads 0 for a group
    /// whose mechanism is off here.
    fn with_optional_columns(config: Self::Config, _groups: &[&'static str]) -> Self::Config {
        config
    }

    /// Ranges and cross-field constraints, each error naming its field path.
    fn validate(config: &Self::Config, run: &RunConfig) -> Result<()>;

    /// The scalar metrics, in output column order.
    fn metrics(config: &Self::Config) -> Vec<MetricDef>;

    /// The latency histograms, in output order.
    fn latencies(config: &Self::Config) -> &'static [&'static str];

    /// The per-bucket time series, in output order (none by default).
    fn series(_config: &Self::Config) -> &'static [SeriesDef] {
        &[]
    }

    /// The width of a time-series bucket in seconds (models with series only).
    fn series_bucket_s(_config: &Self::Config) -> f64 {
        0.0
    }

    /// A histogram of a small-integer quantity written to its own file (none by default).
    fn count_histogram(_config: &Self::Config) -> Option<CountHistogramDef> {
        None
    }

    /// The metrics that attribute failures to the services that caused them (none by
    /// default).
    fn attribution(_config: &Self::Config) -> Vec<super::metrics::Attribution> {
        Vec::new()
    }

    /// The request kinds whose latencies are kept over time, in
    /// [`ReplicaOutput::latency_windows`] order (none by default).
    fn timed_latencies(_config: &Self::Config) -> Vec<TimedLatency> {
        Vec::new()
    }

    /// The width of their windows in seconds (models with timed latencies only).
    fn latency_window_s(_config: &Self::Config, _run: &RunConfig) -> f64 {
        0.0
    }

    /// What the HTML report draws for this model beyond the shared sections (none by default).
    fn presentation(_config: &Self::Config, _run: &RunConfig) -> Presentation {
        Presentation::default()
    }

    /// Valid input that would likely mislead: each a sentence saying what and what to
    /// do instead (`run` and `verify` print them and the manifest keeps them).
    fn warnings(_config: &Self::Config, _run: &RunConfig) -> Vec<String> {
        Vec::new()
    }

    /// Runs replica `replica`: metrics in [`Self::metrics`] order; latencies recorded
    /// into `histograms` (one per [`Self::latencies`] entry).
    fn run_replica(
        config: &Self::Config,
        run: &RunConfig,
        master_seed: u64,
        replica: u64,
        histograms: &mut [LatencyHistogram],
    ) -> ReplicaOutput;

    /// The state quantities `stampede rare` can observe, in the order a [`Probe`]
    /// indexes them (none: the model cannot be split yet).
    fn quantities(_config: &Self::Config) -> Vec<String> {
        Vec::new()
    }

    /// The score of a `rare` event judged at the end of the run (a metric) when the
    /// user names none: a state quantity that rises toward such events.
    fn end_score(_config: &Self::Config) -> Option<&'static str> {
        None
    }

    /// The model set up for importance splitting with `probe` (`None` when
    /// [`Self::quantities`] is empty).
    fn splittable(
        _config: &Self::Config,
        _run: &RunConfig,
        _master_seed: u64,
        _probe: Probe,
    ) -> Option<Box<dyn Splittable>> {
        None
    }

    /// Whether [`Self::trace_replica`] gives traces.
    const TRACES: bool = false;

    /// Runs replica `replica` again with its per-call trace on (`None`: the model
    /// does not trace). The output equals [`Self::run_replica`]'s.
    fn trace_replica(
        _config: &Self::Config,
        _run: &RunConfig,
        _master_seed: u64,
        _replica: u64,
    ) -> Option<TracedReplica> {
        None
    }
}

/// A [`ModelSpec`] with its types erased, so models of different configuration
/// types can sit in one list. Implemented for every model by [`Registered`].
pub trait DynModel: Send + Sync {
    fn name(&self) -> &'static str;
    fn description(&self) -> &'static str;
    fn sections(&self) -> &'static [&'static str];
    fn path_fields(&self) -> &'static [&'static str];
    fn inputs(&self, config: &dyn Any) -> Vec<(String, String)>;
    /// Types the model's sections (after [`ModelSpec::prepare`]) and, if `validate`,
    /// checks them against `run`. A scenario with a grid validates only its points:
    /// the base may hold values that every point overrides.
    fn configure(&'static self, sections: toml::Table, run: &RunConfig, validate: bool) -> Result<ModelConfig>;
    fn to_sections(&self, config: &dyn Any) -> toml::Table;
    fn optional_columns(&self, config: &dyn Any) -> Vec<&'static str>;
    fn with_optional_columns(&self, config: &dyn Any, groups: &[&'static str]) -> Arc<dyn Any + Send + Sync>;
    fn metrics(&self, config: &dyn Any) -> Vec<MetricDef>;
    fn latencies(&self, config: &dyn Any) -> &'static [&'static str];
    fn series(&self, config: &dyn Any) -> &'static [SeriesDef];
    fn series_bucket_s(&self, config: &dyn Any) -> f64;
    fn count_histogram(&self, config: &dyn Any) -> Option<CountHistogramDef>;
    fn attribution(&self, config: &dyn Any) -> Vec<super::metrics::Attribution>;
    fn timed_latencies(&self, config: &dyn Any) -> Vec<TimedLatency>;
    fn latency_window_s(&self, config: &dyn Any, run: &RunConfig) -> f64;
    fn presentation(&self, config: &dyn Any, run: &RunConfig) -> Presentation;
    fn warnings(&self, config: &dyn Any, run: &RunConfig) -> Vec<String>;
    fn run_replica(
        &self,
        config: &dyn Any,
        run: &RunConfig,
        master_seed: u64,
        replica: u64,
        histograms: &mut [LatencyHistogram],
    ) -> ReplicaOutput;
    fn trace_replica(&self, config: &dyn Any, run: &RunConfig, master_seed: u64, replica: u64)
        -> Option<TracedReplica>;
    fn traces(&self) -> bool;
    fn quantities(&self, config: &dyn Any) -> Vec<String>;
    fn end_score(&self, config: &dyn Any) -> Option<&'static str>;
    fn splittable(
        &self,
        config: &dyn Any,
        run: &RunConfig,
        master_seed: u64,
        probe: Probe,
    ) -> Option<Box<dyn Splittable>>;
}

/// The erased form of model `M`, as listed in the registry.
pub struct Registered<M>(std::marker::PhantomData<M>);

impl<M> Registered<M> {
    pub const MODEL: Registered<M> = Registered(std::marker::PhantomData);
}

fn config<M: ModelSpec>(config: &dyn Any) -> &M::Config {
    config.downcast_ref().expect("a ModelConfig holds its own model's configuration")
}

impl<M: ModelSpec> DynModel for Registered<M> {
    fn name(&self) -> &'static str {
        M::NAME
    }
    fn description(&self) -> &'static str {
        M::DESCRIPTION
    }
    fn sections(&self) -> &'static [&'static str] {
        M::SECTIONS
    }
    fn path_fields(&self) -> &'static [&'static str] {
        M::PATH_FIELDS
    }
    fn inputs(&self, c: &dyn Any) -> Vec<(String, String)> {
        M::inputs(config::<M>(c))
    }
    fn configure(&'static self, sections: toml::Table, run: &RunConfig, validate: bool) -> Result<ModelConfig> {
        let config = M::prepare(typed(toml::Value::Table(sections))?)?;
        if validate {
            M::validate(&config, run)?;
        }
        Ok(ModelConfig { model: self, config: Arc::new(config), derived: Arc::default() })
    }
    fn to_sections(&self, c: &dyn Any) -> toml::Table {
        to_table(config::<M>(c))
    }
    fn optional_columns(&self, c: &dyn Any) -> Vec<&'static str> {
        M::optional_columns(config::<M>(c))
    }
    fn with_optional_columns(&self, c: &dyn Any, groups: &[&'static str]) -> Arc<dyn Any + Send + Sync> {
        Arc::new(M::with_optional_columns(config::<M>(c).clone(), groups))
    }
    fn metrics(&self, c: &dyn Any) -> Vec<MetricDef> {
        M::metrics(config::<M>(c))
    }
    fn latencies(&self, c: &dyn Any) -> &'static [&'static str] {
        M::latencies(config::<M>(c))
    }
    fn series(&self, c: &dyn Any) -> &'static [SeriesDef] {
        M::series(config::<M>(c))
    }
    fn series_bucket_s(&self, c: &dyn Any) -> f64 {
        M::series_bucket_s(config::<M>(c))
    }
    fn count_histogram(&self, c: &dyn Any) -> Option<CountHistogramDef> {
        M::count_histogram(config::<M>(c))
    }
    fn attribution(&self, c: &dyn Any) -> Vec<super::metrics::Attribution> {
        M::attribution(config::<M>(c))
    }
    fn timed_latencies(&self, c: &dyn Any) -> Vec<TimedLatency> {
        M::timed_latencies(config::<M>(c))
    }
    fn latency_window_s(&self, c: &dyn Any, run: &RunConfig) -> f64 {
        M::latency_window_s(config::<M>(c), run)
    }
    fn presentation(&self, c: &dyn Any, run: &RunConfig) -> Presentation {
        M::presentation(config::<M>(c), run)
    }
    fn warnings(&self, c: &dyn Any, run: &RunConfig) -> Vec<String> {
        M::warnings(config::<M>(c), run)
    }
    fn run_replica(
        &self,
        c: &dyn Any,
        run: &RunConfig,
        master_seed: u64,
        replica: u64,
        histograms: &mut [LatencyHistogram],
    ) -> ReplicaOutput {
        M::run_replica(config::<M>(c), run, master_seed, replica, histograms)
    }
    fn trace_replica(&self, c: &dyn Any, run: &RunConfig, master_seed: u64, replica: u64) -> Option<TracedReplica> {
        M::trace_replica(config::<M>(c), run, master_seed, replica)
    }
    fn traces(&self) -> bool {
        M::TRACES
    }
    fn quantities(&self, c: &dyn Any) -> Vec<String> {
        M::quantities(config::<M>(c))
    }
    fn end_score(&self, c: &dyn Any) -> Option<&'static str> {
        M::end_score(config::<M>(c))
    }
    fn splittable(&self, c: &dyn Any, run: &RunConfig, master_seed: u64, probe: Probe) -> Option<Box<dyn Splittable>> {
        M::splittable(config::<M>(c), run, master_seed, probe)
    }
}

/// A typed, validated configuration of one model (at one grid point, or the
/// scenario's base). Cheap to clone.
#[derive(Clone)]
pub struct ModelConfig {
    model: &'static dyn DynModel,
    config: Arc<dyn Any + Send + Sync>,
    /// Metric expressions computed per replica after the model's metrics (see
    /// [`super::expression`]), each with its column's definition.
    derived: Arc<Vec<(MetricDef, MetricExpr)>>,
}

impl fmt::Debug for ModelConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ModelConfig").field("model", &self.name()).field("sections", &self.to_sections()).finish()
    }
}

impl ModelConfig {
    /// The model's name as written in scenarios.
    pub fn name(&self) -> &'static str {
        self.model.name()
    }

    /// The configuration of model `M`, or `None` if this is another model's.
    pub fn downcast<M: ModelSpec>(&self) -> Option<&M::Config> {
        self.config.downcast_ref()
    }

    /// The scenario sections the model reads (`services`, `series`, …).
    pub fn sections(&self) -> &'static [&'static str] {
        self.model.sections()
    }

    /// Files the configuration reads, as (field path, file as written).
    pub fn inputs(&self) -> Vec<(String, String)> {
        self.model.inputs(self.config.as_ref())
    }

    /// The model sections as TOML, for `stampede show`.
    pub fn to_sections(&self) -> toml::Table {
        self.model.to_sections(self.config.as_ref())
    }

    /// See [`ModelSpec::optional_columns`].
    pub fn optional_columns(&self) -> Vec<&'static str> {
        self.model.optional_columns(self.config.as_ref())
    }

    /// See [`ModelSpec::with_optional_columns`].
    pub fn with_optional_columns(&self, groups: &[&'static str]) -> ModelConfig {
        ModelConfig {
            model: self.model,
            config: self.model.with_optional_columns(self.config.as_ref(), groups),
            derived: self.derived.clone(),
        }
    }

    /// This configuration with `expressions` (normalised texts; see
    /// [`super::expression`]) as derived metrics after the model's own, in order.
    pub fn with_derived(&self, expressions: &[String]) -> Result<ModelConfig> {
        let names: Vec<&str> = self.model.metrics(self.config.as_ref()).iter().map(|m| m.name).collect();
        let derived = expressions
            .iter()
            .map(|text| {
                let expr = MetricExpr::parse(text, &names, "a metric expression")?;
                let description = "a metric expression, computed per replica from the model's metrics";
                let mut def =
                    MetricDef::new(super::metrics::intern(expr.text.clone()), MetricKind::Real, description, false);
                // A difference may be negative: its interval is not clipped at 0.
                def.signed = expr.can_be_negative();
                Ok((def, expr))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(ModelConfig { model: self.model, config: self.config.clone(), derived: Arc::new(derived) })
    }

    /// The scalar metrics, in output column order.
    pub fn metrics(&self) -> Vec<MetricDef> {
        let mut metrics = self.model.metrics(self.config.as_ref());
        metrics.extend(self.derived.iter().map(|(def, _)| *def));
        metrics
    }

    /// The per-bucket time series, in output order (empty for models without).
    pub fn series(&self) -> &'static [SeriesDef] {
        self.model.series(self.config.as_ref())
    }

    /// The width of a time-series bucket in seconds (models with series only).
    pub fn series_bucket_s(&self) -> f64 {
        self.model.series_bucket_s(self.config.as_ref())
    }

    /// The model's count histogram, if it has one.
    pub fn count_histogram(&self) -> Option<CountHistogramDef> {
        self.model.count_histogram(self.config.as_ref())
    }

    /// See [`ModelSpec::attribution`].
    pub fn attribution(&self) -> Vec<super::metrics::Attribution> {
        self.model.attribution(self.config.as_ref())
    }

    /// See [`ModelSpec::timed_latencies`].
    pub fn timed_latencies(&self) -> Vec<TimedLatency> {
        self.model.timed_latencies(self.config.as_ref())
    }

    /// See [`ModelSpec::latency_window_s`].
    pub fn latency_window_s(&self, run: &RunConfig) -> f64 {
        self.model.latency_window_s(self.config.as_ref(), run)
    }

    /// What the HTML report draws for this model beyond the shared sections.
    pub fn presentation(&self, run: &RunConfig) -> Presentation {
        self.model.presentation(self.config.as_ref(), run)
    }

    /// See [`ModelSpec::warnings`].
    pub fn warnings(&self, run: &RunConfig) -> Vec<String> {
        self.model.warnings(self.config.as_ref(), run)
    }

    /// The latency histograms, in output order.
    pub fn latencies(&self) -> &'static [&'static str] {
        self.model.latencies(self.config.as_ref())
    }

    /// Runs replica `replica` and returns its metrics in [`Self::metrics`] order;
    /// latencies are recorded into `histograms` (one per [`Self::latencies`] entry).
    pub fn run_replica(
        &self,
        run: &RunConfig,
        master_seed: u64,
        replica: u64,
        histograms: &mut [LatencyHistogram],
    ) -> ReplicaOutput {
        let mut output = self.model.run_replica(self.config.as_ref(), run, master_seed, replica, histograms);
        let derived: Vec<f64> = self.derived.iter().map(|(_, expr)| expr.eval(&output.metrics)).collect();
        output.metrics.extend(derived);
        output
    }

    /// Whether the model traces its requests (`stampede run --trace`).
    pub fn traces(&self) -> bool {
        self.model.traces()
    }

    /// Runs replica `replica` again with its trace on; `None` if the model does not trace.
    pub fn trace_replica(&self, run: &RunConfig, master_seed: u64, replica: u64) -> Option<TracedReplica> {
        self.model.trace_replica(self.config.as_ref(), run, master_seed, replica)
    }

    /// The state quantities `stampede rare` can observe (see [`ModelSpec::quantities`]).
    pub fn quantities(&self) -> Vec<String> {
        self.model.quantities(self.config.as_ref())
    }

    /// `rare`'s `--event`, `--score` and `--until` parsed against this point: its
    /// state quantities, its metrics (derived ones included) and its request kinds
    /// kept over time, for trajectories that run to `run.horizon_s`.
    pub fn probe(&self, run: &RunConfig, event: &str, score: Option<&str>, until: Option<&str>) -> Result<Probe> {
        let quantities = self.quantities();
        let metrics: Vec<String> = self.metrics().iter().map(|m| m.name.to_string()).collect();
        let derived: Vec<MetricExpr> = self.derived.iter().map(|(_, expr)| expr.clone()).collect();
        let timed: Vec<String> = self.timed_latencies().iter().map(|t| t.name.to_string()).collect();
        let offered = Offered {
            quantities: &quantities,
            metrics: &metrics,
            derived: &derived,
            timed: &timed,
            end_score: self.model.end_score(self.config.as_ref()),
            horizon: stampede_engine::secs_to_nanos(run.horizon_s),
        };
        Probe::parse_offered(&offered, event, score, until)
    }

    /// This point's model set up for importance splitting with `probe`.
    pub fn splittable(&self, run: &RunConfig, master_seed: u64, probe: Probe) -> Option<Box<dyn Splittable>> {
        self.model.splittable(self.config.as_ref(), run, master_seed, probe)
    }
}
