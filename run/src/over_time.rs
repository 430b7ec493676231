//! Latency over time as `timeseries.parquet` lays it out: per timed request kind, the
//! columns of its windows' quantiles (answered and every request, each with its
//! sectioning interval), the requests that ended per second and each ending's share;
//! each series bucket's row carries the values of the latency window it starts in.

use stampede_output::ColumnValues;

use super::runner::PointResult;
use super::windows::{BatchedWindows, Counted};
use stampede_scenario::models::TimedLatency;
use stampede_scenario::resolved::{GridPoint, Scenario};
use stampede_scenario::schema::columns::{timed_column_names, WINDOW_QUANTILES};

/// One timed kind's values for one latency window, in [`timed_column_names`] order.
fn window_values(timed: &TimedLatency, windows: &BatchedWindows, w: usize, replicas: f64, width_s: f64) -> Vec<f64> {
    let mut values = Vec::new();
    for counted in [Counted::Ok, Counted::All] {
        for (_, q) in WINDOW_QUANTILES {
            let quantile = windows.quantile(w..w + 1, counted, q);
            values.extend([quantile.value_s, quantile.ci_lo_s, quantile.ci_hi_s]);
        }
    }
    let endings = windows.endings(w..w + 1);
    let ended: u64 = endings.iter().sum();
    values.push(ended as f64 / replicas / width_s);
    for (ending, count) in ["ok", "degraded", "failed"].into_iter().zip(endings) {
        if timed.degraded || ending != "degraded" {
            values.push(if ended == 0 { f64::NAN } else { count as f64 / ended as f64 });
        }
    }
    values
}

/// Latency over time on the rows of the series' buckets: each row carries the values
/// of the latency window it starts in (a window spans a whole number of buckets).
pub fn columns(
    scenario: &Scenario,
    point: &GridPoint,
    result: &PointResult,
    buckets: usize,
    bucket_ns: u64,
) -> Vec<ColumnValues> {
    let timed = &scenario.schema.timed;
    if timed.is_empty() {
        return Vec::new();
    }
    let width_s = point.model.latency_window_s(&point.run);
    let width_ns = stampede_engine::secs_to_nanos(width_s).max(1);
    let window_of = |bucket: usize| (bucket as u64 * bucket_ns / width_ns) as usize;
    let replicas = result.replicas.len().max(1) as f64;
    let mut columns =
        vec![ColumnValues::F64((0..buckets).map(|b| (window_of(b) as u64 * width_ns) as f64 / 1e9).collect())];
    let empty = BatchedWindows::default();
    for (i, kind) in timed.iter().enumerate() {
        let windows = result.latency_windows.get(i).unwrap_or(&empty);
        let count = windows.windows();
        let per_window: Vec<Vec<f64>> =
            (0..count).map(|w| window_values(kind, windows, w, replicas, width_s)).collect();
        for column in 0..timed_column_names(kind).len() {
            let value = |bucket: usize| per_window.get(window_of(bucket)).map_or(f64::NAN, |v| v[column]);
            columns.push(ColumnValues::F64((0..buckets).map(value).collect()));
        }
    }
    columns
}
