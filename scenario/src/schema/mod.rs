//! What a run writes, fixed once when the scenario is resolved: the [`OutputSchema`]
//! (metrics, latency histograms, series, the latency kept over time — from the model)
//! and, from it and the grid, every output table's columns with their names and types
//! ([`columns::TableColumns`]). The run layer writes with these and never derives a
//! column again, so a run, a shard, a checkpoint piece and a merge write the same
//! columns by construction.

pub mod columns;

use crate::models::metrics::Attribution;
use crate::models::{CountHistogramDef, MetricDef, ModelConfig, SeriesDef, TimedLatency};
use crate::scenario::claims::LatencyNames;

pub use columns::TableColumns;

/// What every grid point of a run writes, fixed once when the scenario is resolved:
/// the replica table's and the summary's metric columns, the latency histograms and
/// the series. The pipeline, checkpoint pieces, shards, the merge, `verify` and the
/// report read this; none asks the model again. Every grid point has this schema
/// (`resolve` refuses a grid that would change it).
#[derive(Clone, Debug)]
pub struct OutputSchema {
    pub metrics: Vec<MetricDef>,
    pub latencies: &'static [&'static str],
    pub series: &'static [SeriesDef],
    /// The series' bucket width, seconds.
    pub series_bucket_s: f64,
    /// The model's small-integer histogram file, if it writes one.
    pub count_histogram: Option<CountHistogramDef>,
    /// The request kinds whose latency is kept over time (their windows' width may
    /// differ between grid points: it follows each point's horizon).
    pub timed: Vec<TimedLatency>,
    /// The metrics that attribute failures to services (a graph's), by metric index.
    pub attribution: Vec<(usize, Attribution)>,
}

impl OutputSchema {
    /// The schema `model` writes.
    pub fn of(model: &ModelConfig) -> OutputSchema {
        let metrics = model.metrics();
        let index: std::collections::HashMap<&str, usize> =
            metrics.iter().enumerate().map(|(i, m)| (m.name, i)).collect();
        let attribution = model.attribution().into_iter().filter_map(|a| Some((*index.get(a.metric)?, a))).collect();
        OutputSchema {
            timed: model.timed_latencies(),
            metrics,
            latencies: model.latencies(),
            series: model.series(),
            series_bucket_s: model.series_bucket_s(),
            count_histogram: model.count_histogram(),
            attribution,
        }
    }

    /// The index of metric `name`.
    pub fn metric_index(&self, name: &str) -> Option<usize> {
        self.metrics.iter().position(|m| m.name == name)
    }

    /// The metric names, in column order.
    pub fn metric_names(&self) -> Vec<&'static str> {
        self.metrics.iter().map(|m| m.name).collect()
    }

    /// The latencies a claim may name: every histogram, and (for `window`) the
    /// answered-in-full and all-requests histograms of the kinds kept over time.
    pub(crate) fn latency_names(&self) -> LatencyNames<'_> {
        let over_time = self.timed.iter().flat_map(|t| [t.histogram.to_string(), t.all_histogram()]).collect();
        LatencyNames { histograms: self.latencies, over_time }
    }

    /// The series names, in column order.
    pub fn series_names(&self) -> Vec<&'static str> {
        self.series.iter().map(|s| s.name).collect()
    }

    /// Whether `other` writes the same columns (a grid may not change them).
    pub(crate) fn same_columns(&self, other: &OutputSchema) -> bool {
        self.metric_names() == other.metric_names()
            && self.latencies == other.latencies
            && self.series_names() == other.series_names()
            && self.series_bucket_s == other.series_bucket_s
            && self.count_histogram.map(|c| (c.file, c.column)) == other.count_histogram.map(|c| (c.file, c.column))
            && self.timed == other.timed
    }
}
