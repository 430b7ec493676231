//! The parallel replica runner: grid points × replicas on a rayon pool.
//!
//! Work is the flat list of tasks (grid point, replica), grid-point major, cut into
//! fixed chunks of [`CHUNK_TASKS`]. A chunk runs in parallel; each rayon piece keeps
//! its own latency histograms per grid point (merging adds integer counts, so order
//! does not matter) and a list of small per-replica records. When the chunk is done
//! its records are sorted into task order and consumed sequentially: the statistics
//! fold them in replica order and the sink streams them to `replicas.parquet`.
//! Hence:
//!
//! * every number is identical for any thread count (the chunking is fixed, the
//!   fold order is fixed, histogram merging is exact);
//! * memory is bounded by one chunk of records plus histograms per grid point and
//!   per piece in flight — it does not grow with the number of replicas.

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

/// A chunk's partial results from one rayon piece.
#[derive(Default)]
struct Partial {
    records: Vec<ReplicaRecord>,
    histograms: Vec<(u32, Vec<LatencyHistogram>)>,
}

impl Partial {
    fn histograms_for(&mut self, grid_point: u32, count: usize) -> &mut [LatencyHistogram] {
        let position = match self.histograms.iter().position(|(g, _)| *g == grid_point) {
            Some(position) => position,
            None => {
                self.histograms.push((
                    grid_point,
                    (0..count).map(|_| LatencyHistogram::new()).collect(),
                ));
                self.histograms.len() - 1
            }
        };
        &mut self.histograms[position].1
    }

    fn merge(mut self, other: Partial) -> Partial {
        self.records.extend(other.records);
        for (grid_point, histograms) in other.histograms {
            match self.histograms.iter_mut().find(|(g, _)| *g == grid_point) {
                Some((_, mine)) => mine
                    .iter_mut()
                    .zip(&histograms)
                    .for_each(|(a, b)| a.merge(b)),
                None => self.histograms.push((grid_point, histograms)),
            }
        }
        self
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
    let mut welfords = vec![vec![Welford::default(); metric_count]; points.len()];
    let mut latencies: Vec<Vec<LatencyHistogram>> = points
        .iter()
        .map(|_| {
            (0..latency_count)
                .map(|_| LatencyHistogram::new())
                .collect()
        })
        .collect();
    let total = points.len() as u64 * replicas as u64;
    let mut start = 0;
    while start < total {
        let end = (start + CHUNK_TASKS).min(total);
        let partial = pool.install(|| {
            (start..end)
                .into_par_iter()
                .fold(Partial::default, |mut partial, task| {
                    let grid_point = (task / replicas as u64) as u32;
                    let replica = (task % replicas as u64) as u32;
                    let point = &points[grid_point as usize];
                    let histograms = partial.histograms_for(grid_point, latency_count);
                    let metrics = point.model.run_replica(
                        &point.run,
                        master_seed,
                        replica as u64,
                        histograms,
                    );
                    debug_assert_eq!(metrics.len(), metric_count);
                    partial.records.push(ReplicaRecord {
                        grid_point,
                        replica,
                        seed: replica_seed(master_seed, replica as u64),
                        metrics,
                    });
                    progress();
                    partial
                })
                .reduce(Partial::default, Partial::merge)
        });
        let Partial {
            mut records,
            histograms,
        } = partial;
        records.sort_unstable_by_key(|record| (record.grid_point, record.replica));
        debug_assert_eq!(records.len() as u64, end - start);
        for record in &records {
            let point_welfords = &mut welfords[record.grid_point as usize];
            for (welford, &value) in point_welfords.iter_mut().zip(&record.metrics) {
                welford.push(value);
            }
        }
        sink(&records)?;
        for (grid_point, histograms) in histograms {
            for (total, part) in latencies[grid_point as usize].iter_mut().zip(&histograms) {
                total.merge(part);
            }
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
