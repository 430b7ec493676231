//! What a run will need, estimated before it starts, and a refusal (exit 2, with
//! the estimate and the limit) when it cannot fit, instead of letting the kernel
//! kill it half way. Disk is an upper bound (the tables before compression); memory
//! is what a run holds, from the shapes involved — the sparse histograms and series
//! sums of the live grid points (per batch of replicas, and per worker), the Parquet
//! writers' groups, pages and compression contexts, a checkpoint piece, and a few
//! numbers per grid point for the report — and tracks the measured peak within 25%.

use std::path::Path;

use stampede_engine::LatencyHistogram;

use super::batches::BATCHES;
use super::runner::{CHUNK_POINTS, CHUNK_TASKS};
use stampede_engine::measurement::latency_windows::{BUCKETS as WINDOW_BUCKETS, HISTOGRAMS_PER_WINDOW};
use stampede_output::table::{ROW_GROUP_MAX_BYTES, ROW_GROUP_ROWS, ZSTD_MAX_COLUMNS};
use stampede_scenario::base::error::{Error, Result};
use stampede_scenario::resolved::Scenario;

/// A run's estimated needs, in bytes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Estimate {
    pub memory_bytes: f64,
    pub disk_bytes: f64,
}

/// What a grid point's latency holds per batch of replicas, kept sparse
/// ([`super::sparse`]): 16 bytes per bucket touched up to 512, then 256-byte pages of
/// 32 buckets — a few thousand buckets for a latency spread over three decades.
const SPARSE_BATCH_BYTES: f64 = 32_768.0;

/// A model of this many latencies or fewer records each into 32-bit counts from the
/// start (`LatencyHistogram::with_counts`); one of more keeps most of them as a few
/// values (a graph's thousand entries and call sites see a few hundred each).
const DENSE_RECORDING_LATENCIES: f64 = 64.0;

/// A column chunk being written with zstd holds a compression context: 660 KB
/// allocated, of which pages of 64 KB touch about 200 KB (measured: 160 columns of a
/// 10-service graph's time series).
const ZSTD_COLUMN_BYTES: f64 = 200_000.0;

/// A Parquet page being filled, per column.
const PAGE_BYTES: f64 = 65_536.0;

/// The process before any run: its code, allocator arenas, threads' stacks. Measured:
/// a one-replica `mmc` peaks at 18.0 MB (release) to 19.5 MB (debug), on one thread or
/// two. It was 64 MB, which put the estimate 1.24–1.29× over the peak of generated
/// graphs of 100 to 1,000 services and 1.8× at 10 (one thread, 10 s; release); at 24 MB
/// they are 0.98×, 1.01×, 1.05× (400 services) and 1.15× (1,000), 1.20× at 10 on two
/// threads.
const BASE_BYTES: f64 = 24e6;

/// The estimate for `scenario` on `threads` threads. Checked against the peak a
/// run reaches (`host.peak_rss_bytes` beside `host.estimated_memory_bytes` in the
/// manifest): within 25% on generated graphs of 10 to 5,000 services (measured; a
/// 400-service one in tests/cli/big_sweeps.rs).
pub fn estimate(scenario: &Scenario, threads: usize) -> Estimate {
    let terms = memory_terms(scenario, threads);
    let memory_bytes = terms.iter().map(|(_, bytes)| bytes).sum();
    Estimate { memory_bytes, disk_bytes: disk_bytes(scenario) }
}

/// A run's dimensions, which every estimate multiplies.
struct Sizes {
    metrics: f64,
    latencies: f64,
    series: f64,
    /// Requests kinds timed over the run (the latency windows).
    timed: f64,
    points: f64,
    replicas: f64,
    /// A series' buckets over the horizon (0 without series).
    buckets: f64,
    /// The latency windows over the horizon (0 when they are off).
    windows: f64,
}

impl Sizes {
    fn of(scenario: &Scenario) -> Sizes {
        let schema = &scenario.schema;
        let series = schema.series.len() as f64;
        let width = scenario.model.latency_window_s(&scenario.run);
        Sizes {
            metrics: schema.metrics.len() as f64,
            latencies: schema.latencies.len() as f64,
            series,
            timed: schema.timed.len() as f64,
            points: f64::from(scenario.point_count()),
            replicas: scenario.run.replicas as f64,
            buckets: if series > 0.0 { (scenario.run.horizon_s / schema.series_bucket_s).ceil() } else { 0.0 },
            windows: if width > 0.0 { (scenario.run.horizon_s / width).ceil() } else { 0.0 },
        }
    }
}

/// The memory estimate's parts, named (the manifest's `host.estimate_terms`).
pub fn memory_terms(scenario: &Scenario, threads: usize) -> Vec<(&'static str, f64)> {
    let size = Sizes::of(scenario);
    let Sizes { metrics, latencies, series, points, replicas, buckets, .. } = size;
    let threads = threads as f64;
    let live_points = (CHUNK_POINTS as f64).min(points);
    // A point's batches that hold replicas: replica r is in batch r mod 10.
    let batches = (BATCHES as f64).min(replicas);
    // Latency over time: per timed request kind, its windows (two histograms each).
    let windows_bytes = size.timed * size.windows * (HISTOGRAMS_PER_WINDOW * WINDOW_BUCKETS * 4 + 12) as f64;
    // Each live point: its latencies and windows per batch, its series sums (u128 sum
    // and sum of squares) plus one copy per worker.
    // Its metrics' exact moments: 64 bytes each, and two 560-byte sums for a metric
    // that is not zero (at a graph's size most are: failures caused by one service of
    // hundreds; a tenth is taken).
    let per_live_point = latencies * batches * SPARSE_BATCH_BYTES
        + batches * windows_bytes
        + (threads + 1.0) * series * buckets * 32.0
        + metrics * (64.0 + 0.1 * 1_120.0);
    // Each worker: the histograms its replica in progress records into, its replica's
    // latency windows and series (u128 per bucket), and its spare per-replica quantile
    // buffers (kernel::replica_quantiles, 420 KB each).
    let recording = if latencies <= DENSE_RECORDING_LATENCIES {
        latencies * LatencyHistogram::RECENT_BYTES as f64
    } else {
        latencies * 4_096.0
    };
    let spares = stampede_engine::kernel::replica_quantiles::SPARES_KEPT as f64;
    let per_worker = recording + windows_bytes + series * buckets * 16.0 + spares * 430_080.0;
    let chunk_records = (CHUNK_TASKS as f64).min(points * replicas) * (metrics * 8.0 + 64.0);
    // The report keeps a mean, sd and interval per metric and a few quantiles per latency.
    let per_point_report = metrics * 32.0 + latencies * 64.0 + 128.0;
    vec![
        ("base", BASE_BYTES),
        ("live points", live_points * per_live_point),
        ("workers", threads * per_worker),
        ("replica rows", chunk_records),
        ("writing", writing_bytes(scenario, &size)),
        ("report", points * per_point_report),
    ]
}

/// What the output's writers hold at once: a finished point's rows and the tables'
/// row groups in progress, or a checkpoint piece (written between points, not while
/// one is).
fn writing_bytes(scenario: &Scenario, size: &Sizes) -> f64 {
    let Sizes { metrics, series, points, replicas, buckets, .. } = *size;
    // A finished point's rows before they are written: its series' mean and interval
    // (three f64 per bucket), and its summary.
    let point_rows = series * buckets * 24.0 + metrics * 64.0;
    // The Parquet writers hold a row group in progress of every table: at most
    // ROW_GROUP_ROWS rows or ROW_GROUP_MAX_BYTES encoded, plus a page (64 KB) being
    // filled per column. A zstd table (up to ZSTD_MAX_COLUMNS columns) holds a
    // compression context for each column that has compressed a page before its row
    // group closes — a column of more than a page of rows (8,192 values): the wide
    // time series of 10 ms buckets, the replica rows of many replicas (a summary's
    // columns compress one at a time as its one row group closes).
    let group = |rows: f64, row_bytes: f64, columns: f64| {
        let rows = rows.min(ROW_GROUP_ROWS as f64);
        let paged = rows * 8.0 > PAGE_BYTES && columns <= ZSTD_MAX_COLUMNS as f64;
        let contexts = if paged { columns * ZSTD_COLUMN_BYTES } else { 0.0 };
        (rows * row_bytes).min(ROW_GROUP_MAX_BYTES as f64) + columns * PAGE_BYTES.min(rows * 8.0) + contexts
    };
    let columns = &scenario.columns;
    let block_rows = stampede_output::long::BLOCK_ROWS as f64;
    let row_groups = match &columns.long {
        None => {
            let timeseries = columns.timeseries.len() as f64;
            group(points * replicas, 16.0 + metrics * 8.0, columns.replicas.len() as f64)
                + group(points * buckets, 8.0 * timeseries, timeseries)
                + 2.0 * group(points, metrics * 32.0 + 64.0, 4.0 * metrics)
        }
        // A handful of columns, a row per metric or series (its name, dictionary-
        // encoded, and its values), and one block of melted rows at a time.
        Some(_) => {
            group(block_rows, 64.0, 5.0)
                + group(block_rows, 64.0, 5.0)
                + group(block_rows, 96.0, 10.0)
                + 3.0 * block_rows * 96.0
        }
    };
    // A checkpoint piece's replica rows are a table of a column per metric, whose
    // writer holds about 3.3 KB per column (measured: 750 MB for the 232,500 columns of
    // a 5,000-service graph), or long as the output is: a block of melted rows.
    let piece = match &columns.long {
        None => columns.replicas.len() as f64 * 3_300.0,
        Some(_) => group(block_rows, 64.0, 5.0),
    };
    (point_rows + row_groups).max(piece)
}

/// The bytes a run writes, before compression.
fn disk_bytes(scenario: &Scenario) -> f64 {
    let Sizes { metrics, latencies, series, timed, points, replicas, buckets, .. } = Sizes::of(scenario);
    // Replica rows are written twice (checkpoint pieces, then the table) and so are
    // the histograms (a piece's partials, then histograms.parquet).
    2.0 * points * replicas * (16.0 + metrics * 8.0)
        + points * (metrics * 32.0 + 2.0 * latencies * 8_192.0)
        + points * buckets * (12.0 + series * 24.0 + timed * 16.0 * 8.0)
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
    let Sizes { metrics, latencies, series, timed, points, buckets, windows, .. } = Sizes::of(scenario);
    // A series chart draws at most 2,000 buckets. Latency over time: per request kind
    // up to two charts of a line per point, a few hundred bytes per window.
    let per_point = metrics * 400.0
        + latencies * 12_000.0
        + series * buckets.min(2_000.0) * 40.0
        + 2.0 * timed * windows * 300.0
        + 2_000.0;
    200e3 + points * per_point
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
                // 2,000 replicas: a point's rows fill a row group in progress (122,880
                // rows) at 100 points already, so only the report grows with more.
                sets: vec![("run.replicas".into(), toml::Value::Integer(2_000))],
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
        // 10× the points: memory grows by the report's couple of KB per point only
        // (below a full row group, the replica table's group in progress grows too).
        assert!(large.memory_bytes - small.memory_bytes < 900.0 * 2048.0, "{small:?} {large:?}");
        assert!(large.disk_bytes > 9.0 * small.disk_bytes, "{small:?} {large:?}");
        assert_eq!(bytes(1.5e9), "1.5 GB");
        assert_eq!(bytes(999.0), "999 B");
    }
}
