//! The parallel replica runner: grid points × replicas on a rayon pool.
//!
//! Work is the flat list of tasks (grid point, replica), grid-point major, cut into
//! fixed chunks of [`CHUNK_TASKS`]. A chunk runs in parallel and its per-replica
//! records come back in task order; they are then consumed sequentially: the
//! statistics fold them in replica order and the sink streams them to
//! `replicas.parquet`. Latencies go straight into histograms owned by the worker
//! thread that ran the replica, one set per grid point; when every replica of a grid
//! point is done, the workers' histograms for it are merged (integer addition, so the
//! order does not matter) and freed. Hence:
//!
//! * every number is identical for any thread count (the chunking is fixed, the
//!   fold order is fixed, histogram merging is exact);
//! * memory is one chunk of records plus histograms for grid points × threads — it
//!   does not grow with the number of replicas.

use std::sync::Mutex;

use rayon::prelude::*;
use stampede_engine::rng::replica_seed;
use stampede_engine::LatencyHistogram;

use crate::error::{Error, Result};
use crate::scenario::GridPoint;
use crate::stats::{Summary, Welford};

/// Tasks per chunk. Fixed (never derived from the thread count) so that results and
/// output bytes do not depend on it.
pub const CHUNK_TASKS: u64 = 2048;

/// What one replica reported.
#[derive(Clone, Debug, PartialEq)]
pub struct ReplicaRecord {
    pub grid_point: u32,
    pub replica: u32,
    /// The replica's seed (derived from the master seed and the replica index).
    pub seed: u64,
    /// Metric values in the model's metric order.
    pub metrics: Vec<f64>,
}

/// A grid point's aggregated results.
#[derive(Clone, Debug)]
pub struct PointResult {
    /// One per metric, in the model's order.
    pub summaries: Vec<Summary>,
    /// One per latency histogram, merged over replicas.
    pub latencies: Vec<LatencyHistogram>,
}

/// One worker thread's histograms for the grid points it has touched and that are
/// not finished yet.
#[derive(Default)]
struct WorkerHistograms {
    by_point: Vec<(u32, Vec<LatencyHistogram>)>,
}

impl WorkerHistograms {
    fn for_point(&mut self, grid_point: u32, count: usize) -> &mut [LatencyHistogram] {
        let position = match self.by_point.iter().position(|(g, _)| *g == grid_point) {
            Some(position) => position,
            None => {
                self.by_point.push((grid_point, (0..count).map(|_| LatencyHistogram::new()).collect()));
                self.by_point.len() - 1
            }
        };
        &mut self.by_point[position].1
    }

    /// Merges into `totals` and frees every grid point below `finished_below`.
    fn drain_finished(&mut self, finished_below: u32, totals: &mut [Vec<LatencyHistogram>]) {
        self.by_point.retain(|(grid_point, histograms)| {
            if *grid_point >= finished_below {
                return true;
            }
            for (total, part) in totals[*grid_point as usize].iter_mut().zip(histograms) {
                total.merge(part);
            }
            false
        });
    }
}

/// Runs `replicas` replicas of every point on `threads` threads.
///
/// `progress` is called once per finished replica (from worker threads); `sink`
/// receives every record exactly once, in (grid point, replica) order.
pub fn run_grid(
    points: &[GridPoint],
    replicas: u32,
    master_seed: u64,
    threads: usize,
    progress: &(dyn Fn() + Sync),
    sink: &mut dyn FnMut(&[ReplicaRecord]) -> Result<()>,
) -> Result<Vec<PointResult>> {
    assert!(!points.is_empty() && replicas > 0 && threads > 0);
    let metric_count = points[0].model.metrics().len();
    let latency_count = points[0].model.latencies().len();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|error| Error::io(format!("cannot start {threads} worker threads: {error}")))?;
    let workers: Vec<Mutex<WorkerHistograms>> = (0..threads).map(|_| Mutex::default()).collect();
    let mut welfords = vec![vec![Welford::default(); metric_count]; points.len()];
    let mut latencies: Vec<Vec<LatencyHistogram>> =
        points.iter().map(|_| (0..latency_count).map(|_| LatencyHistogram::new()).collect()).collect();
    let total = points.len() as u64 * replicas as u64;
    let mut start = 0;
    let mut records = Vec::with_capacity(CHUNK_TASKS as usize);
    while start < total {
        let end = (start + CHUNK_TASKS).min(total);
        pool.install(|| {
            // usize, because rayon's u64 ranges are not indexed (no ordered collect).
            (start as usize..end as usize)
                .into_par_iter()
                .map(|task| {
                    let task = task as u64;
                    let grid_point = (task / replicas as u64) as u32;
                    let replica = (task % replicas as u64) as u32;
                    let point = &points[grid_point as usize];
                    let worker = rayon::current_thread_index().expect("runs on the pool");
                    // Each worker locks only its own slot: never contended.
                    let mut histograms = workers[worker].lock().expect("no worker panicked");
                    let histograms = histograms.for_point(grid_point, latency_count);
                    let metrics = point.model.run_replica(&point.run, master_seed, replica as u64, histograms);
                    debug_assert_eq!(metrics.len(), metric_count);
                    progress();
                    ReplicaRecord { grid_point, replica, seed: replica_seed(master_seed, replica as u64), metrics }
                })
                .collect_into_vec(&mut records)
        });
        debug_assert!(records.windows(2).all(|w| (w[0].grid_point, w[0].replica) < (w[1].grid_point, w[1].replica)));
        for record in &records {
            let point_welfords = &mut welfords[record.grid_point as usize];
            for (welford, &value) in point_welfords.iter_mut().zip(&record.metrics) {
                welford.push(value);
            }
        }
        sink(&records)?;
        // Grid points wholly before the next task are finished on every worker.
        let finished_below = if end == total { u32::MAX } else { (end / replicas as u64) as u32 };
        for worker in &workers {
            worker.lock().expect("no worker panicked").drain_finished(finished_below, &mut latencies);
        }
        start = end;
    }
    Ok(welfords
        .into_iter()
        .zip(latencies)
        .map(|(point_welfords, latencies)| PointResult {
            summaries: point_welfords.iter().map(Welford::summary).collect(),
            latencies,
        })
        .collect())
}
