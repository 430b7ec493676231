//! The models as the run layer sees them: [`spec::ModelSpec`] (one trait a model
//! implements once), [`registry::MODELS`] (the one list), what a model reports
//! ([`metrics`]), and one module per model with its scenario sections, validation
//! with field paths, translation into the engine's parameters and metric table.
//! The gateway's fixture and capacity arithmetic live in its folder.

pub mod cluster;
pub mod dependency;
pub mod expression;
pub mod gateway;
pub mod graph;
pub mod metrics;
pub mod mg1;
pub mod mmc;
pub mod presentation;
pub mod registry;
pub mod series;
pub mod spec;

pub use metrics::{
    CountHistogramDef, MetricDef, MetricKind, ReplicaOutput, SeriesDef, SeriesKind, TimedLatency, TracedReplica,
};
pub use presentation::Presentation;
pub use spec::{ModelConfig, ModelSpec};
