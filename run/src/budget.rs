//! What a run will need, estimated before it starts, and a refusal (exit 2, with
//! the estimate and the limit) when it cannot fit, instead of letting the kernel
//! kill it half way. Estimates are upper bounds from the shapes involved — the
//! tables before compression, the histograms and series the runner holds for one
//! chunk (per batch of replicas, and per thread), and a few numbers per grid point for the report.

use std::path::Path;

use stampede_engine::LatencyHistogram;

use super::batches::BATCHES;
use super::runner::{CHUNK_POINTS, CHUNK_TASKS};
use stampede_engine::measurement::latency_windows::{BUCKETS as WINDOW_BUCKETS, HISTOGRAMS_PER_WINDOW};
use stampede_output::table::{ROW_GROUP_MAX_BYTES, ROW_GROUP_ROWS};
use stampede_scenario::base::error::{Error, Result};
use stampede_scenario::resolved::Scenario;

/// A run's estimated needs, in bytes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Estimate {
    pub memory_bytes: f64,
    pub disk_bytes: f64,
}

/// The estimate for `scenario` on `threads` threads.
pub fn estimate(scenario: &Scenario, threads: usize) -> Estimate {
    let schema = &scenario.schema;
    let (metrics, latencies, series) =
        (schema.metrics.len() as f64, schema.latencies.len() as f64, schema.series.len() as f64);
    let points = scenario.point_count() as f64;
    let replicas = scenario.run.replicas as f64;
    let buckets = if series > 0.0 { (scenario.run.horizon_s / schema.series_bucket_s).ceil() } else { 0.0 };
    let total_histogram = LatencyHistogram::FOLDED_BYTES as f64;
    // A worker's copy records into its 32-bit counts (once past its first values).
    let recording_histogram = LatencyHistogram::RECENT_BYTES as f64;
    let live_points = (CHUNK_POINTS as f64).min(points) + 1.0;
    // Latency over time: per timed request kind, its windows (two histograms each).
    let windows_bytes = {
        let width = scenario.model.latency_window_s(&scenario.run);
        let windows = if width > 0.0 { (scenario.run.horizon_s / width).ceil() } else { 0.0 };
        let per_window = (HISTOGRAMS_PER_WINDOW * WINDOW_BUCKETS * 4 + 12) as f64;
        schema.timed.len() as f64 * windows * per_window
    };
    // Each live point: a histogram per batch of replicas and their pooled sum, its
    // latency windows per batch, and its series sums plus one copy per worker.
    let per_live_point = latencies * (BATCHES as f64 + 1.0) * total_histogram
        + BATCHES as f64 * windows_bytes
        + (threads as f64 + 1.0) * series * buckets * 32.0;
    // Each worker: the histograms its replica in progress records into, its replica's
    // latency windows, and its spare per-replica quantile buffers
    // (kernel::replica_quantiles, 420 KB each).
    let spares = stampede_engine::kernel::replica_quantiles::SPARES_KEPT as f64;
    let per_worker = latencies * recording_histogram + windows_bytes + spares * 430_080.0;
    let chunk_records = (CHUNK_TASKS as f64) * (metrics * 8.0 + 64.0);
    // The Parquet writers hold a row group in progress of every table: at most
    // ROW_GROUP_ROWS rows or ROW_GROUP_MAX_BYTES encoded, plus a page (64 KB) being
    // filled per column. The replica table and the time series are the long ones.
    let group = |row_bytes: f64, columns: f64| {
        (ROW_GROUP_ROWS as f64 * row_bytes).min(ROW_GROUP_MAX_BYTES as f64) + columns * 65_536.0
    };
    let row_groups = match &scenario.columns.long {
        None => {
            group(16.0 + metrics * 8.0, metrics + 3.0)
                + group(16.0 + series * 8.0, series + 2.0)
                + 2.0 * group(metrics * 32.0 + 64.0, 4.0 * metrics)
        }
        // A handful of columns, a row per metric or series (its name, dictionary-
        // encoded, and its values), and one block of melted rows at a time.
        Some(_) => {
            group(64.0, 5.0)
                + group(64.0, 5.0)
                + group(96.0, 10.0)
                + 3.0 * stampede_output::long::BLOCK_ROWS as f64 * 96.0
        }
    };
    // The report keeps a mean, sd and interval per metric and a few quantiles per latency.
    let per_point_report = metrics * 32.0 + latencies * 64.0 + 128.0;
    let memory_bytes = live_points * per_live_point
        + threads as f64 * per_worker
        + chunk_records
        + row_groups
        + points * per_point_report
        + 64e6;
    // Replica rows are written twice (checkpoint pieces, then the table) and so are
    // the histograms (a piece's partials, then histograms.parquet).
    let disk_bytes = 2.0 * points * replicas * (16.0 + metrics * 8.0)
        + points * (metrics * 32.0 + 2.0 * latencies * 8_192.0)
        + points * buckets * (12.0 + series * 24.0 + schema.timed.len() as f64 * 16.0 * 8.0);
    Estimate { memory_bytes, disk_bytes }
}

/// Seconds one replica of grid point 0 takes on one core, measured now (a pilot, its
/// result thrown away), for the estimates printed before long work starts.
pub fn seconds_per_replica(scenario: &Scenario) -> Result<f64> {
    let point = scenario.grid_point(0)?;
    let mut histograms: Vec<LatencyHistogram> =
        point.model.latencies().iter().map(|_| LatencyHistogram::new()).collect();
    let started = std::time::Instant::now();
    let _ = point.model.run_replica(&point.run, scenario.run.seed, 0, &mut histograms);
    Ok(started.elapsed().as_secs_f64())
}

/// The HTML report's size, at most: its script and style (about 200 KB), and per
/// grid point a row of every metric, the latency charts and the series' charts.
pub fn report_bytes(scenario: &Scenario) -> f64 {
    let schema = &scenario.schema;
    let (metrics, latencies, series) =
        (schema.metrics.len() as f64, schema.latencies.len() as f64, schema.series.len() as f64);
    let buckets =
        if series > 0.0 { (scenario.run.horizon_s / schema.series_bucket_s).ceil().min(2_000.0) } else { 0.0 };
    // Latency over time: per request kind up to two charts of a line per point, a few
    // hundred bytes per window.
    let windows = {
        let width = scenario.model.latency_window_s(&scenario.run);
        if width > 0.0 {
            (scenario.run.horizon_s / width).ceil()
        } else {
            0.0
        }
    };
    let timed = schema.timed.len() as f64;
    let per_point =
        metrics * 400.0 + latencies * 12_000.0 + series * buckets * 40.0 + 2.0 * timed * windows * 300.0 + 2_000.0;
    200e3 + f64::from(scenario.point_count()) * per_point
}

/// Refuses a run that cannot fit in the memory available now or on the disk of `out_root`.
pub fn check(estimate: Estimate, out_root: &Path) -> Result<()> {
    if let Some(available) = available_memory() {
        if estimate.memory_bytes > available as f64 {
            return Err(Error::bad_input(format!(
                "this run needs about {} of memory and {} is available; nothing was run",
                bytes(estimate.memory_bytes),
                bytes(available as f64)
            ))
            .with_hint("use fewer threads (--threads), or split the grid over several runs"));
        }
    }
    let existing = out_root.ancestors().find(|p| p.exists()).unwrap_or(Path::new("."));
    if let Some(free) = stampede_output::free_space(existing) {
        if estimate.disk_bytes > free as f64 {
            return Err(Error::bad_input(format!(
                "this run writes up to {} (before compression) and {} has {} free; nothing was run",
                bytes(estimate.disk_bytes),
                existing.display(),
                bytes(free as f64)
            ))
            .with_hint("choose another folder with --out, or run fewer replicas or grid points"));
        }
    }
    Ok(())
}

/// `MemAvailable` from `/proc/meminfo`, where there is one.
fn available_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// This process's peak resident memory (`VmHWM`), where the system reports it.
pub fn peak_rss_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = text.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// `1.5 GB`, `340 MB`, `12 KB`.
pub fn bytes(value: f64) -> String {
    let units = [("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3)];
    match units.iter().find(|(_, size)| value >= *size) {
        Some((unit, size)) => format!("{:.1} {unit}", value / size),
        None => format!("{value:.0} B"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stampede_scenario::scenario::builtin::load_scenario_source;
    use stampede_scenario::Overrides;

    #[test]
    fn memory_does_not_grow_with_points_beyond_the_report_and_disk_grows_with_rows() {
        let resolve = |grid: &str| {
            let overrides = Overrides {
                sets: vec![("run.replicas".into(), toml::Value::Integer(10))],
                grids: vec![stampede_scenario::scenario::overrides::parse_grid(grid).unwrap()],
                cases: vec![],
            };
            Scenario::resolve(load_scenario_source("mmc").unwrap(), &overrides).unwrap()
        };
        let grid = |points: u32| {
            let values: Vec<String> = (2..2 + points).map(|s| s.to_string()).collect();
            estimate(&resolve(&format!("queue.servers={}", values.join(","))), 2)
        };
        let (small, large) = (grid(100), grid(1_000));
        // 10× the points: memory grows by the report's few hundred bytes per point only.
        assert!(large.memory_bytes - small.memory_bytes < 900.0 * 1024.0, "{small:?} {large:?}");
        assert!(large.disk_bytes > 9.0 * small.disk_bytes, "{small:?} {large:?}");
        assert_eq!(bytes(1.5e9), "1.5 GB");
        assert_eq!(bytes(999.0), "999 B");
    }
}
