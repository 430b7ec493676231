//! What a model asks the HTML report to draw beyond what every model gets (the
//! headline table, latency curves, grid plots): fault windows to shade on its time
//! series, the series its recovery time is measured on, and model-specific sections.
//!
//! Declarations only — metric and table names with labels. The report crate draws
//! them, so a model never knows how a plot is made and the report never names a model.

/// A stretch of simulated time the model disturbs (a fault, an incident).
#[derive(Clone, Debug, PartialEq)]
pub struct Window {
    /// What happens, in a few words: "surge ×5", "brownout of shard 0 ×10".
    pub label: String,
    pub start_s: f64,
    pub end_s: f64,
}

/// How the recovery metric is measured, so the report can draw the band a series
/// must hold within (see `stampede_engine::measurement::recovery`).
#[derive(Clone, Debug, PartialEq)]
pub struct Recovery {
    /// The time series the recovery is measured on (a `timeseries.parquet` column stem).
    pub series: &'static str,
    /// The metric holding each replica's recovery time in seconds.
    pub metric: &'static str,
    /// The band is `baseline × band_factor + band_offset`, the baseline being the mean
    /// between warm-up and the first fault.
    pub band_factor: f64,
    pub band_offset: f64,
    pub warmup_s: f64,
}

/// One segment of a stacked outcome bar: a metric (a count per replica) and its label.
#[derive(Clone, Debug, PartialEq)]
pub struct Segment {
    pub metric: String,
    pub label: String,
    /// Segments of one stage share a hue family ("served", "admission", "timeout", …).
    pub stage: String,
}

/// A model-specific section of the report.
#[derive(Clone, Debug, PartialEq)]
pub enum Section {
    /// Bars with 95% whiskers of `metrics` (label, metric) for every grid point.
    MetricBars { title: String, y_label: String, metrics: Vec<(String, String)> },
    /// The model's count histogram (`file`, value column `column`) per grid point.
    CountHistogram { title: String, file: &'static str, column: &'static str, x_label: String },
    /// Per group (a call class, say), a stacked bar per grid point of `segments`.
    Outcomes { title: String, groups: Vec<(String, Vec<Segment>)> },
    /// Where work stopped, summed over groups: a 100% stacked bar per grid point with
    /// one segment per (stage, reason); each segment sums its metrics.
    Funnel { title: String, total_label: String, segments: Vec<(Segment, Vec<String>)> },
    /// A service graph drawn per grid point: services as boxes coloured by a metric, the
    /// calls between them as arrows labelled with attempts per entry request and the
    /// share of calls that failed.
    Topology { title: String, services: Vec<TopologyService>, edges: Vec<TopologyEdge>, entries: Vec<String> },
    /// A section of the report of its own for one part of the system (a graph's
    /// service): a table of `metrics` per grid point, a stacked bar of `refusals`
    /// (what turned its work away), and its `series` (drawn here instead of among the
    /// common time series).
    Part { name: String, detail: String, metrics: Vec<String>, refusals: Vec<Segment>, series: Vec<String> },
}

/// A box of a [`Section::Topology`].
#[derive(Clone, Debug, PartialEq)]
pub struct TopologyService {
    pub name: String,
    /// A second line ("4 × 16 workers").
    pub detail: String,
    /// The metric (a share from 0 to 1) the box is coloured by.
    pub colour_by: String,
    /// A fault targets it (or one of its instances).
    pub faulted: bool,
}

/// An arrow of a [`Section::Topology`]; `entries` of the section are the metrics whose
/// sum is the entry requests the attempts are counted per.
#[derive(Clone, Debug, PartialEq)]
pub struct TopologyEdge {
    /// `None`: the workload's clients.
    pub from: Option<String>,
    pub to: String,
    /// A call site's own edge (`checkout → read`); empty for a service edge.
    pub call_site: String,
    pub attempts: String,
    pub calls: String,
    pub failed: String,
    pub faulted: bool,
}

/// Everything a model adds to its report.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Presentation {
    pub windows: Vec<Window>,
    pub recovery: Option<Recovery>,
    pub sections: Vec<Section>,
    /// Advice that applies where a grid point's means cross a line (a default that is
    /// hurting): printed after the run's table and shown under the report's funnel.
    pub hints: Vec<Hint>,
}

/// Advice for a grid point whose mean `numerators` ÷ mean `denominator` is above
/// `above`: `text`, with `{share}` replaced by that share in percent.
#[derive(Clone, Debug, PartialEq)]
pub struct Hint {
    pub numerators: Vec<String>,
    pub denominator: String,
    pub above: f64,
    pub text: String,
}

impl Hint {
    /// The advice for one grid point, given its metric means (`None`: not written).
    pub fn fired(&self, mean: impl Fn(&str) -> Option<f64>) -> Option<String> {
        let denominator = mean(&self.denominator).filter(|d| *d > 0.0)?;
        let share = self.numerators.iter().filter_map(|m| mean(m)).filter(|v| v.is_finite()).sum::<f64>() / denominator;
        (share > self.above).then(|| self.text.replace("{share}", &format!("{:.0}%", share * 100.0)))
    }
}

impl Recovery {
    /// Recovery measured on the `queue_depth` series into the `recovery_s` metric, with
    /// the engine's band (the cluster and the dependency models).
    pub(crate) fn of_queue_depth(warmup_s: f64) -> Recovery {
        use stampede_engine::measurement::recovery::{BAND_FACTOR, BAND_OFFSET};
        Recovery {
            series: "queue_depth",
            metric: "recovery_s",
            band_factor: BAND_FACTOR,
            band_offset: BAND_OFFSET,
            warmup_s,
        }
    }
}

/// `(label, metric)` pairs from `(metric, label)` literals.
pub fn labelled(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs.iter().map(|(metric, label)| (label.to_string(), metric.to_string())).collect()
}
