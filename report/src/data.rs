//! The numbers behind each plot, taken from the folder's tables: a grid point's
//! interval from `summary.parquet`, a time series with its band from
//! `timeseries.parquet`, a percentile curve and a CDF from a histogram in
//! `histograms.parquet`. Kept apart from drawing so each is tested against the
//! Parquet it came from.

use hdrhistogram::Histogram;
use stampede_output::Table;

use crate::chart::{BarValue, Point};

/// The `timeseries.parquet` column of request kind `kind`'s latency-window quantile
/// `quantile` (`p99_all`): `K.window_p99_all_s`, or `K.p99_all_s` in a folder written
/// before the windows' columns were named apart from the summary's.
pub fn window_quantile_column(table: &Table, kind: &str, quantile: &str) -> String {
    match format!("{kind}.window_{quantile}_s") {
        current if table.has(&current) => current,
        _ => format!("{kind}.{quantile}_s"),
    }
}

/// Rows of `table` belonging to grid point `point` (the `grid_point` column).
pub fn rows_of(table: &Table, point: u32) -> Vec<usize> {
    let points = table.numbers("grid_point").unwrap_or_default();
    points.iter().enumerate().filter(|(_, &p)| p == point as f64).map(|(i, _)| i).collect()
}

/// Where a summary's columns and grid points are: the report looks a value up for
/// every cell of every table, and a 1,000-service graph's summary has 230,000
/// columns (a scan and a copy of a column per lookup took minutes).
pub struct SummaryIndex<'t> {
    summary: &'t Table,
    columns: std::collections::HashMap<&'t str, usize>,
    /// Each grid point's first row.
    rows: std::collections::HashMap<u32, usize>,
}

impl<'t> SummaryIndex<'t> {
    pub fn of(summary: &'t Table) -> Self {
        let columns = summary.columns.iter().enumerate().map(|(i, (name, _))| (name.as_str(), i)).collect();
        let mut rows = std::collections::HashMap::new();
        for (row, point) in summary.numbers("grid_point").unwrap_or_default().into_iter().enumerate() {
            rows.entry(point as u32).or_insert(row);
        }
        SummaryIndex { summary, columns, rows }
    }

    /// Column `name`'s number at `row` (NaN for a NULL; `None` for no such column or
    /// a column of text).
    fn number(&self, name: &str, row: usize) -> Option<f64> {
        use stampede_output::table::ColumnValues;
        Some(match &self.summary.columns[*self.columns.get(name)?].1 {
            ColumnValues::U32(v) => v[row] as f64,
            ColumnValues::U64(v) => v[row] as f64,
            ColumnValues::I64(v) => v[row].map_or(f64::NAN, |x| x as f64),
            ColumnValues::F64(v) => v[row],
            _ => return None,
        })
    }

    /// The grid points the summary holds, in order.
    pub fn points(&self) -> Vec<u32> {
        let mut points: Vec<u32> = self.rows.keys().copied().collect();
        points.sort_unstable();
        points
    }

    /// [`interval`], looked up.
    pub fn interval(&self, point: u32, metric: &str) -> Option<BarValue> {
        let row = *self.rows.get(&point)?;
        let column = |name: &str| self.number(name, row);
        interval_of(column, metric)
    }
}

/// The mean of `metric` at `point` with its 95% interval (`_mean`, `_ci_lo`, `_ci_hi`),
/// and how many of the point's `replicas` it covers when not all (`_n`; a folder
/// written before `_n` existed covers all).
pub fn interval(summary: &Table, point: u32, metric: &str) -> Option<BarValue> {
    let row = *rows_of(summary, point).first()?;
    let column = |name: &str| summary.numbers(name).ok().map(|v| v[row]);
    interval_of(column, metric)
}

fn interval_of(column: impl Fn(&str) -> Option<f64>, metric: &str) -> Option<BarValue> {
    let value = column(&format!("{metric}_mean"))?;
    let interval = column(&format!("{metric}_ci_lo")).zip(column(&format!("{metric}_ci_hi")));
    let covered = column(&format!("{metric}_n"))
        .zip(column("replicas"))
        .map(|(k, n)| (k as u64, n as u64))
        .filter(|(k, n)| k < n);
    Some(BarValue { value, interval, covered })
}

/// Time series `series` at `point` as (t, mean, [lo, hi]) points, thinned to at most
/// `max_points` by merging neighbouring buckets into their envelope: the mean of the
/// means, the lowest low and the highest high — a band never drawn narrower than
/// any bucket's own.
pub fn time_series(timeseries: &Table, series: &str, point: u32, max_points: usize) -> Vec<Point> {
    let [mean, lo, hi] = ["mean", "ci_lo", "ci_hi"].map(|suffix| format!("{series}_{suffix}"));
    time_series_of(timeseries, [&mean, &lo, &hi], point, max_points, None)
}

/// [`time_series`] of any value column and its interval's columns, as
/// `[value, ci_lo, ci_hi]`; rows with a NULL value (a window nothing ended in) are
/// left out, and with `once_per` only the first row of each run of equal values of
/// that column is kept (latency over time repeats its window's values on every
/// bucket of it).
pub fn time_series_of(
    timeseries: &Table,
    columns: [&str; 3],
    point: u32,
    max_points: usize,
    once_per: Option<&str>,
) -> Vec<Point> {
    let mut rows: Vec<usize> = rows_of(timeseries, point);
    if let Some(Ok(keys)) = once_per.map(|column| timeseries.numbers(column)) {
        rows.dedup_by_key(|r| keys[*r].to_bits());
    }
    let (Ok(t), Ok(mean), Ok(lo), Ok(hi)) = (
        timeseries.numbers("t_s"),
        timeseries.numbers(columns[0]),
        timeseries.numbers(columns[1]),
        timeseries.numbers(columns[2]),
    ) else {
        return Vec::new();
    };
    let rows: Vec<usize> = rows.into_iter().filter(|&r| mean[r].is_finite()).collect();
    let step = rows.len().div_ceil(max_points.max(1)).max(1);
    rows.chunks(step)
        .map(|chunk| {
            let n = chunk.len() as f64;
            let finite_or = |v: f64, other: f64| if v.is_finite() { v } else { other };
            Point {
                x: chunk.iter().map(|&r| t[r]).sum::<f64>() / n,
                y: chunk.iter().map(|&r| mean[r]).sum::<f64>() / n,
                interval: Some((
                    chunk.iter().map(|&r| finite_or(lo[r], mean[r])).fold(f64::INFINITY, f64::min),
                    chunk.iter().map(|&r| finite_or(hi[r], mean[r])).fold(f64::NEG_INFINITY, f64::max),
                )),
            }
        })
        .collect()
}

/// The histogram of `latency` at `point`, decoded; `None` if absent or empty.
pub fn histogram(histograms: &Table, point: u32, latency: &str) -> Option<Histogram<u64>> {
    let metrics = histograms.strings("metric").ok()?;
    let blobs = histograms.binaries("hdr").ok()?;
    let row = rows_of(histograms, point).into_iter().find(|&r| metrics[r] == latency)?;
    let histogram = stampede_output::hdr::deserialize_v2(&blobs[row]).ok()?;
    (!histogram.is_empty()).then_some(histogram)
}

/// `x = 1/(1−q)` from p1 and then at 20 steps per decade to p99.99: the percentile
/// axis. (p0, the single fastest request, would stretch a log axis over decades that
/// say nothing.)
pub fn percentile_positions() -> Vec<f64> {
    std::iter::once(1.0 / 0.99).chain((1..=80).map(|k| 10f64.powf(k as f64 / 20.0))).collect()
}

/// The latency (seconds) at each percentile position, as `x = 1/(1−q)`, computed as
/// `histograms.parquet`'s quantile columns are (HdrHistogram's `value_at_quantile`).
pub fn percentile_curve(histogram: &Histogram<u64>) -> Vec<Point> {
    percentile_positions()
        .into_iter()
        .map(|x| {
            let q = 1.0 - 1.0 / x;
            Point { x, y: histogram.value_at_quantile(q) as f64 / 1e9, interval: None }
        })
        .collect()
}

/// The CDF: (latency in seconds, share of requests at or below it) at 100 even steps
/// of the share, from 1%: the minimum (share 0) is often a lone answer decades
/// faster than the rest (a refusal), and would leave most of a log axis empty.
pub fn cdf(histogram: &Histogram<u64>) -> Vec<Point> {
    (1..=100)
        .map(|k| {
            let q = k as f64 / 100.0;
            Point { x: histogram.value_at_quantile(q) as f64 / 1e9, y: q, interval: None }
        })
        .collect()
}

/// Rows of a count-histogram table at `point`: (value, share).
pub fn counts(table: &Table, column: &str, point: u32) -> Vec<(f64, f64)> {
    let (Ok(values), Ok(shares)) = (table.numbers(column), table.numbers("share")) else { return Vec::new() };
    rows_of(table, point).into_iter().map(|r| (values[r], shares[r])).collect()
}
