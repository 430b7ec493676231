//! The models as the run layer sees them: [`spec::ModelSpec`] (one trait a model
//! implements once), [`registry::MODELS`] (the one list), what a model reports
//! ([`metrics`]), and one module per model with its scenario sections, validation
//! with field paths, translation into the engine's parameters and metric table.
//! The gateway's fixture and capacity arithmetic live in its folder.

pub mod cluster;
pub(crate) mod dependency;
pub mod expression;
pub mod gateway;
pub mod graph;
pub mod metrics;
pub(crate) mod mg1;
pub(crate) mod mmc;
pub mod presentation;
pub mod rare;
pub(crate) mod registry;
pub(crate) mod series;
pub(crate) mod spec;

pub(crate) use metrics::SeriesDef;
pub use metrics::{CountHistogramDef, MetricDef, MetricKind, ReplicaOutput, SeriesKind, TimedLatency};
pub use presentation::Presentation;
pub use spec::{ModelConfig, ModelSpec};
