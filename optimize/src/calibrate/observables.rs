//! What production can be compared with: the metrics a model reports over time, by
//! the names `calibrate --observed` columns use, and how each is read off one
//! replica's whole output for each observed interval.
//!
//! A model's observable metrics are its `timeseries.parquet` series (by their column
//! name without `_mean`: `api.busy`, `web.page.goodput_rps`, `queue_depth`) — a mean
//! level or a rate over the interval — and, per request kind kept over time
//! (`web.page`, `turn`, `answer_call`, `response`), the figures of its latency windows
//! over the interval: `KIND.pNN_s` (requests answered in full) and `KIND.pNN_all_s`
//! (every request that ended) for p50, p90, p95, p99 and p999, `KIND.ended_rps`, and
//! `KIND.ok_share` / `degraded_share` / `failed_share`. A replica's quantile is read
//! from its own windows over the interval, so the band is where one production
//! interval should fall.
//!
//! Invariants: every interval is a whole number of series buckets and of latency
//! windows (checked by [`Extraction::new`] before anything runs), so no value mixes
//! two intervals; the values come out metric-major, one per interval, NaN where the
//! replica had nothing to measure (no request ended then).

use stampede_engine::measurement::latency_windows::{quantile_of, WindowCounts, BUCKETS};
use stampede_scenario::base::error::{Error, Result};
use stampede_scenario::models::{ReplicaOutput, SeriesKind};
use stampede_scenario::resolved::{GridPoint, Scenario};

/// Quantiles a latency window can be asked for, as (label, q).
const QUANTILES: [(&str, f64); 5] = [("p50", 0.5), ("p90", 0.9), ("p95", 0.95), ("p99", 0.99), ("p999", 0.999)];

/// A figure of a request kind's latency windows.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum WindowFigure {
    /// A quantile in seconds, of requests answered in full or of every ending (`all`).
    Quantile { q: f64, all: bool },
    /// Requests that ended per second.
    EndedRate,
    /// The share of endings that were ok (0), degraded (1) or failed (2).
    Share(usize),
}

/// How one observable metric is read.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Observable {
    /// The model's series `index`: its mean level (an area) or rate (a count).
    Series { index: usize, kind: SeriesKind },
    /// Timed request kind `kind`'s windows.
    Window { kind: usize, figure: WindowFigure },
}

/// Every metric `scenario`'s model can be compared on, by name, in a stable order.
pub fn catalogue(scenario: &Scenario) -> Vec<(String, Observable)> {
    let mut names = Vec::new();
    for (index, def) in scenario.schema.series.iter().enumerate() {
        names.push((def.name.to_string(), Observable::Series { index, kind: def.kind }));
    }
    for (kind, timed) in scenario.schema.timed.iter().enumerate() {
        let mut add = |suffix: String, figure| {
            names.push((format!("{}.{suffix}", timed.name), Observable::Window { kind, figure }))
        };
        for all in [false, true] {
            for (label, q) in QUANTILES {
                add(format!("{label}{}_s", if all { "_all" } else { "" }), WindowFigure::Quantile { q, all });
            }
        }
        add("ended_rps".into(), WindowFigure::EndedRate);
        for (i, ending) in ["ok", "degraded", "failed"].into_iter().enumerate() {
            if timed.degraded || ending != "degraded" {
                add(format!("{ending}_share"), WindowFigure::Share(i));
            }
        }
    }
    names
}

/// An observed interval of simulated time, in nanoseconds: `[start, end)`.
pub type Interval = (u64, u64);

/// What to keep of each replica: the chosen metrics over the compared intervals.
#[derive(Clone, Debug)]
pub struct Extraction {
    pub metrics: Vec<Observable>,
    pub intervals: Vec<Interval>,
    bucket_ns: u64,
}

/// Whether `at` is a whole number of `width`s (to a nanosecond).
fn aligned(at: u64, width: u64) -> bool {
    let rest = at % width;
    rest <= 1 || width - rest <= 1
}

impl Extraction {
    /// Checks that every interval is whole buckets (and whole latency windows, for a
    /// metric of windows) at `point`.
    pub fn new(
        scenario: &Scenario,
        point: &GridPoint,
        metrics: Vec<(String, Observable)>,
        intervals: Vec<Interval>,
    ) -> Result<Extraction> {
        let bucket_ns = stampede_engine::secs_to_nanos(scenario.schema.series_bucket_s).max(1);
        let window_ns = stampede_engine::secs_to_nanos(point.model.latency_window_s(&point.run)).max(1);
        let seconds = |ns: u64| ns as f64 / 1e9;
        for &(start, end) in &intervals {
            for (name, observable) in &metrics {
                let (width, what) = match observable {
                    Observable::Series { .. } => (bucket_ns, "series buckets (series.bucket_s)"),
                    Observable::Window { .. } => (window_ns, "latency windows (series.latency_window_s)"),
                };
                if !(aligned(start, width) && aligned(end, width)) {
                    return Err(Error::bad_input(format!(
                        "--observed: metric {name}: the interval {}..{} s is not a whole number of the model's {what} of {} s",
                        seconds(start),
                        seconds(end),
                        seconds(width)
                    ))
                    .with_hint("observe at a step that is a multiple of the model's, or set the model's width to divide the step"));
                }
            }
        }
        Ok(Extraction { metrics: metrics.into_iter().map(|(_, o)| o).collect(), intervals, bucket_ns })
    }

    /// The replica's values, metric-major: `[metric][interval]`, NaN where there was
    /// nothing to measure.
    pub fn extract(&self, point: &GridPoint, output: &ReplicaOutput) -> Vec<f64> {
        let window_ns = stampede_engine::secs_to_nanos(point.model.latency_window_s(&point.run)).max(1);
        let mut values = Vec::with_capacity(self.metrics.len() * self.intervals.len());
        let quantiles =
            self.metrics.iter().any(|m| matches!(m, Observable::Window { figure: WindowFigure::Quantile { .. }, .. }));
        let mut scratch = if quantiles { vec![0u64; BUCKETS] } else { Vec::new() };
        for metric in &self.metrics {
            for &(start, end) in &self.intervals {
                let value = match *metric {
                    Observable::Series { index, kind } => {
                        series_value(&output.series[index], kind, self.bucket_ns, start, end)
                    }
                    Observable::Window { kind, figure } => {
                        let first = ((start + window_ns / 2) / window_ns) as usize;
                        let last = ((end + window_ns / 2) / window_ns) as usize;
                        output.latency_windows.get(kind).map_or(f64::NAN, |counts| {
                            window_value(counts, first..last, figure, (end - start) as f64 / 1e9, &mut scratch)
                        })
                    }
                };
                values.push(value);
            }
        }
        values
    }
}

/// A series' mean level (area / ns) or rate (count / s) over `[start, end)`.
fn series_value(buckets: &[u128], kind: SeriesKind, bucket_ns: u64, start: u64, end: u64) -> f64 {
    let first = ((start + bucket_ns / 2) / bucket_ns) as usize;
    let last = (((end + bucket_ns / 2) / bucket_ns) as usize).min(buckets.len());
    if first >= last {
        return f64::NAN;
    }
    let total: u128 = buckets[first..last].iter().sum();
    let span_ns = ((last - first) as u64 * bucket_ns) as f64;
    match kind {
        SeriesKind::Area => total as f64 / span_ns,
        SeriesKind::Count => total as f64 / (span_ns / 1e9),
    }
}

/// A window figure over windows `range`, lasting `seconds`.
fn window_value(
    counts: &WindowCounts,
    range: std::ops::Range<usize>,
    figure: WindowFigure,
    seconds: f64,
    scratch: &mut [u64],
) -> f64 {
    let range = range.start.min(counts.windows())..range.end.min(counts.windows());
    let endings = range.clone().fold([0u64; 3], |mut total, w| {
        total.iter_mut().zip(counts.endings[w]).for_each(|(t, e)| *t += u64::from(e));
        total
    });
    let ended: u64 = endings.iter().sum();
    match figure {
        WindowFigure::EndedRate => ended as f64 / seconds,
        WindowFigure::Share(i) => {
            if ended == 0 {
                f64::NAN
            } else {
                endings[i] as f64 / ended as f64
            }
        }
        WindowFigure::Quantile { q, all } => {
            scratch.fill(0);
            for w in range {
                let histogram = if all { counts.all(w) } else { counts.ok(w) };
                scratch.iter_mut().zip(histogram).for_each(|(s, &c)| *s += u64::from(c));
            }
            quantile_of(scratch, q) / 1e9
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stampede_engine::measurement::ending::Ending;

    #[test]
    fn a_series_is_a_mean_level_or_a_rate_over_whole_buckets() {
        // Buckets of 0.5 s: areas (level × ns) and counts.
        let bucket_ns = 500_000_000;
        let areas = [2 * 500_000_000u128, 4 * 500_000_000, 6 * 500_000_000, 0];
        assert_eq!(series_value(&areas, SeriesKind::Area, bucket_ns, 0, 1_000_000_000), 3.0);
        assert_eq!(series_value(&areas, SeriesKind::Area, bucket_ns, 500_000_000, 2_000_000_000), 10.0 / 3.0);
        let counts = [10u128, 20, 30, 40];
        assert_eq!(series_value(&counts, SeriesKind::Count, bucket_ns, 1_000_000_000, 2_000_000_000), 70.0);
        // Past the series' end: nothing measured.
        assert!(series_value(&counts, SeriesKind::Count, bucket_ns, 2_000_000_000, 3_000_000_000).is_nan());
    }

    #[test]
    fn window_figures_pool_the_windows_of_the_interval() {
        let mut counts = WindowCounts::new(3);
        // Window 0: 3 ok of 1 ms; window 1: 1 failure of 1 s (in `all` only); window 2: nothing.
        counts.count(0, Ending::Ok, 1_000_000, 3);
        counts.count(1, Ending::Failed, 1_000_000_000, 1);
        let mut scratch = vec![0; BUCKETS];
        let rate = window_value(&counts, 0..2, WindowFigure::EndedRate, 2.0, &mut scratch);
        assert_eq!(rate, 2.0);
        assert_eq!(window_value(&counts, 0..2, WindowFigure::Share(2), 2.0, &mut scratch), 0.25);
        let ok_p99 = window_value(&counts, 0..2, WindowFigure::Quantile { q: 0.99, all: false }, 2.0, &mut scratch);
        assert!((ok_p99 - 1e-3).abs() < 1e-4, "{ok_p99}");
        let all_p99 = window_value(&counts, 0..2, WindowFigure::Quantile { q: 0.99, all: true }, 2.0, &mut scratch);
        assert!((all_p99 - 1.0).abs() < 0.05, "{all_p99}");
        assert!(window_value(&counts, 2..3, WindowFigure::Share(0), 1.0, &mut scratch).is_nan());
        assert!(window_value(&counts, 2..3, WindowFigure::Quantile { q: 0.5, all: true }, 1.0, &mut scratch).is_nan());
    }
}
