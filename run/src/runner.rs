//! The parallel replica runner: grid points × replicas on a rayon pool.
//!
//! Work is the flat list of tasks (grid point, replica), grid-point major, cut into
//! chunks of at most [`CHUNK_TASKS`] tasks spanning at most [`CHUNK_POINTS`] grid
//! points (both fixed, never derived from the thread count). A chunk runs in
//! parallel, each point's replicas batch by batch (see `batch_major`), and its
//! per-replica records are put back in task order; they are then consumed
//! sequentially: the statistics fold them in replica order and the record
//! sink streams them to `replicas.parquet`. Latencies go into a histogram set owned
//! by the worker thread that runs the replica, which after the replica is added into
//! its grid point's histograms of the replica's batch (see [`super::batches`]: ten
//! batches by replica residue, for the pooled quantiles' intervals) and emptied;
//! series and counts go into the worker's sums for the point. When every replica of
//! a grid point is done, the workers' sums for it are merged (integer addition, so
//! the order does not matter), handed to the point sink with the point's statistics
//! and batches, and freed. Grid points are typed when their first chunk starts and
//! dropped when they are finished. Hence:
//!
//! * every number is identical for any thread count (the fold order is fixed,
//!   histogram merging is exact, and the chunking changes no output byte);
//! * memory is one chunk of records, the batch histograms of the grid points of one
//!   chunk, one replica's histograms per thread and time-series sums for the grid
//!   points of one chunk per thread — flat in the number of replicas *and* in the
//!   number of grid points.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use rayon::prelude::*;
use stampede_engine::kernel::rng::replica_seed;
use stampede_engine::LatencyHistogram;

use super::batches::{batch_of, BatchedLatency, BATCHES};
use super::moments::Moments;
use super::plan::Plan;
use super::sparse::SparseHistogram;
use super::stats::{t_quantile_975, Summary};
use super::windows::BatchedWindows;
use stampede_scenario::base::error::{Error, Result};
use stampede_scenario::resolved::{GridPoint, Scenario};

/// The most tasks per chunk.
pub const CHUNK_TASKS: u64 = 2048;

/// The most grid points one chunk spans: bounds the histograms alive at once when
/// grid points have few replicas.
pub const CHUNK_POINTS: u64 = 16;

/// What one replica reported.
#[derive(Clone, Debug, PartialEq)]
pub struct ReplicaRecord {
    pub grid_point: u32,
    pub replica: u32,
    /// The replica's seed (derived from the master seed and the replica index).
    pub seed: u64,
    /// Metric values in the model's metric order.
    pub metrics: Vec<f64>,
    /// Wall-clock nanoseconds the replica took on its worker (for the cost figures of
    /// the manifest and the terminal; never written to a table, which stay byte-identical).
    pub compute_ns: u64,
    /// What an [`Extract`] kept of the replica's whole output (empty without one).
    pub extracted: Vec<f64>,
}

/// Reads what a caller keeps of each replica's whole output — its series and latency
/// windows, which the runner otherwise only sums — on the worker that ran it (so
/// nothing per replica outlives its task but these values). `calibrate` keeps each
/// replica's values per observed interval this way.
pub type Extract<'a> = &'a (dyn Fn(&GridPoint, &stampede_scenario::models::ReplicaOutput) -> Vec<f64> + Sync);

/// A grid point's aggregated results.
#[derive(Clone, Debug)]
pub struct PointResult {
    /// One per metric, in the model's order: each summary is made from these.
    pub summaries: Vec<Summary>,
    /// One per metric: exact count, Σx and Σx² over the replicas run.
    pub moments: Vec<Moments>,
    /// The replicas this result holds (all of the point's, or a shard's or a piece's share).
    pub replicas: std::ops::Range<u32>,
    /// One per latency histogram, per batch of replicas (kept sparse; see
    /// [`PointResult::pooled_latency`] for their sum).
    pub latency_batches: Vec<BatchedLatency>,
    /// Per timed request kind, its latency over time per batch (empty for models
    /// without).
    pub latency_windows: Vec<BatchedWindows>,
    /// Per-bucket sums of the model's time series (empty for models without).
    pub series: SeriesSums,
    /// Summed count histogram (empty for models without).
    pub counts: Vec<u64>,
    /// Wall-clock seconds its replicas took on their workers, summed.
    pub compute_s: f64,
}

impl PointResult {
    /// Latency `i` over every replica (the sum of its batches), made when asked: a
    /// point keeps its latencies sparse, as dense histograms are 280 KB each (287 MB
    /// for the 1,000 latencies of a 1,000-service graph, held until the point is
    /// written).
    pub fn pooled_latency(&self, i: usize) -> LatencyHistogram {
        self.latency_batches[i].pooled()
    }
}

fn add_counts(total: &mut Vec<u64>, part: &[u64]) {
    if total.len() < part.len() {
        total.resize(part.len(), 0);
    }
    total.iter_mut().zip(part).for_each(|(t, p)| *t += p);
}

/// Exact per-bucket sums and sums of squares of replicas' integer time series.
/// Integer addition is associative, so the totals do not depend on which worker
/// summed which replica.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SeriesSums {
    pub replicas: u64,
    /// [series][bucket]
    pub sum: Vec<Vec<u128>>,
    pub sum_squares: Vec<Vec<u128>>,
}

impl SeriesSums {
    /// Series `index` as bytes: per bucket its sum and sum of squares, little-endian u128.
    pub fn to_bytes(&self, index: usize) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(self.buckets() * 32);
        for (s, q) in self.sum[index].iter().zip(&self.sum_squares[index]) {
            bytes.extend_from_slice(&s.to_le_bytes());
            bytes.extend_from_slice(&q.to_le_bytes());
        }
        bytes
    }

    /// Adds series `index` of `replicas` replicas read back from [`Self::to_bytes`];
    /// `series` is how many series the model has.
    pub fn add_bytes(&mut self, index: usize, series: usize, replicas: u64, bytes: &[u8]) -> Result<()> {
        if !bytes.len().is_multiple_of(32) {
            return Err(Error::bad_input("a shard's series sums are truncated"));
        }
        let buckets = bytes.len() / 32;
        if self.sum.is_empty() {
            self.sum = vec![vec![0; buckets]; series];
            self.sum_squares = self.sum.clone();
        }
        if self.sum[index].len() != buckets {
            return Err(Error::bad_input("shards disagree on the number of time-series buckets"));
        }
        for (b, pair) in bytes.chunks_exact(32).enumerate() {
            self.sum[index][b] += u128::from_le_bytes(pair[..16].try_into().expect("16 bytes"));
            self.sum_squares[index][b] += u128::from_le_bytes(pair[16..].try_into().expect("16 bytes"));
        }
        if index == 0 {
            self.replicas += replicas;
        }
        Ok(())
    }

    fn add(&mut self, series: &[Vec<u128>]) {
        if series.is_empty() {
            return;
        }
        if self.sum.is_empty() {
            self.sum = series.iter().map(|s| vec![0; s.len()]).collect();
            self.sum_squares = self.sum.clone();
        }
        self.replicas += 1;
        for ((sum, squares), values) in self.sum.iter_mut().zip(&mut self.sum_squares).zip(series) {
            debug_assert_eq!(sum.len(), values.len(), "replicas of a grid point share their buckets");
            for ((s, q), &v) in sum.iter_mut().zip(squares.iter_mut()).zip(values) {
                *s += v;
                *q += v * v;
            }
        }
    }

    fn merge(&mut self, other: &SeriesSums) {
        if other.replicas == 0 {
            return;
        }
        if self.sum.is_empty() {
            *self = other.clone();
            return;
        }
        self.replicas += other.replicas;
        for (mine, theirs) in
            self.sum.iter_mut().zip(&other.sum).chain(self.sum_squares.iter_mut().zip(&other.sum_squares))
        {
            mine.iter_mut().zip(theirs).for_each(|(a, b)| *a += b);
        }
    }

    /// Mean and 95% Student-t interval of series `series` at `bucket`, each replica's
    /// integer multiplied by `scale` (1/bucket ns for levels, 1/bucket s for rates).
    pub fn summary(&self, series: usize, bucket: usize, scale: f64) -> Summary {
        let n = self.replicas as f64;
        let sum = self.sum[series][bucket] as f64;
        let squares = self.sum_squares[series][bucket] as f64;
        let mean = sum / n;
        if self.replicas < 2 {
            return Summary { mean: mean * scale, sd: f64::NAN, ci_lo: f64::NAN, ci_hi: f64::NAN };
        }
        let variance = ((squares - sum * sum / n) / (n - 1.0)).max(0.0);
        let sd = variance.sqrt();
        let half = t_quantile_975(self.replicas - 1) * sd / n.sqrt();
        // Levels and rates are never negative: the interval is clipped at 0.
        let ci_lo = ((mean - half) * scale).max(0.0);
        Summary { mean: mean * scale, sd: sd * scale, ci_lo, ci_hi: (mean + half) * scale }
    }

    /// Buckets per series.
    pub fn buckets(&self) -> usize {
        self.sum.first().map_or(0, Vec::len)
    }
}

/// What one worker thread accumulates for a grid point it has touched.
struct PointAccumulator {
    grid_point: u32,
    series: SeriesSums,
    counts: Vec<u64>,
}

/// A model with at most this many latency histograms gets their 32-bit counts up front
/// on each worker (see `LatencyHistogram::with_counts`).
const EAGER_LATENCIES: usize = 64;

/// The `count` latency histograms a worker lends each replica it runs: their counts up
/// front when they are few (they record on every response), else grown as they fill.
/// The instruction benchmarks lend a replica the same.
pub fn lent_histograms(count: usize) -> Vec<LatencyHistogram> {
    (0..count)
        .map(|_| match count <= EAGER_LATENCIES {
            true => LatencyHistogram::with_counts(),
            false => LatencyHistogram::new(),
        })
        .collect()
}

/// One worker thread's accumulators for grid points not finished yet, and the
/// histograms its replica in progress records into.
#[derive(Default)]
struct WorkerAccumulators {
    by_point: Vec<PointAccumulator>,
    /// Empty between replicas (reset after each: only touched buckets are zeroed).
    replica: Vec<LatencyHistogram>,
}

impl WorkerAccumulators {
    fn for_point(&mut self, grid_point: u32) -> &mut PointAccumulator {
        let position = match self.by_point.iter().position(|a| a.grid_point == grid_point) {
            Some(position) => position,
            None => {
                self.by_point.push(PointAccumulator { grid_point, series: SeriesSums::default(), counts: Vec::new() });
                self.by_point.len() - 1
            }
        };
        &mut self.by_point[position]
    }

    /// Merges every grid point below `finished_below` into `live` and frees it here.
    fn drain_finished(&mut self, finished_below: u32, live: &mut BTreeMap<u32, LivePoint>) {
        self.by_point.retain(|accumulator| {
            if accumulator.grid_point >= finished_below {
                return true;
            }
            let point = live.get_mut(&accumulator.grid_point).expect("a point is live until finished");
            point.series.merge(&accumulator.series);
            add_counts(&mut point.counts, &accumulator.counts);
            false
        });
    }
}

/// A grid point between its first task and its last: the typed point and its totals.
struct LivePoint {
    point: GridPoint,
    moments: Vec<Moments>,
    /// The replicas folded so far (contiguous, in order).
    replicas: std::ops::Range<u32>,
    /// Per batch ([`BATCHES`]), one histogram per latency (empty until a replica of
    /// the batch ran; `None` until one of them recorded a value of it, so a latency
    /// that stays empty — failures at a healthy point — costs no memory): workers add
    /// their replicas here, each batch behind its own lock.
    batches: Vec<Mutex<Vec<Option<SparseHistogram>>>>,
    /// Per timed request kind, its latency windows per batch.
    windows: Mutex<Vec<BatchedWindows>>,
    series: SeriesSums,
    counts: Vec<u64>,
    compute_ns: u64,
}

impl LivePoint {
    /// A finished point: its summaries of `metric_defs` and its folded results.
    fn finish(
        self,
        metric_defs: &[stampede_scenario::models::MetricDef],
        latency_count: usize,
    ) -> (GridPoint, PointResult) {
        let result = PointResult {
            summaries: summaries(&self.moments, metric_defs),
            moments: self.moments,
            replicas: self.replicas,
            latency_batches: LivePoint::latencies(self.batches, latency_count),
            latency_windows: self.windows.into_inner().expect("no worker panicked"),
            series: self.series,
            counts: self.counts,
            compute_s: self.compute_ns as f64 / 1e9,
        };
        (self.point, result)
    }

    /// Its latencies per batch.
    fn latencies(batches: Vec<Mutex<Vec<Option<SparseHistogram>>>>, count: usize) -> Vec<BatchedLatency> {
        let mut batched = vec![BatchedLatency::default(); count];
        for (b, histograms) in batches.into_iter().enumerate() {
            for (latency, histogram) in batched.iter_mut().zip(histograms.into_inner().expect("no worker panicked")) {
                if let Some(histogram) = histogram {
                    latency.set(b, histogram);
                }
            }
        }
        batched
    }
}

/// What every task of one chunk shares.
struct Work<'a> {
    /// The chunk's grid points, from `first_point` on (`None`: no task of it here).
    points: Vec<Option<&'a LivePoint>>,
    first_point: u32,
    /// The chunk's tasks as (grid point, replica), in order.
    tasks: &'a [(u32, u32)],
    master_seed: u64,
    workers: &'a [Mutex<WorkerAccumulators>],
    latency_count: usize,
    metric_count: usize,
    progress: &'a (dyn Fn() + Sync),
    extract: Option<Extract<'a>>,
}

impl Work<'_> {
    /// Runs task `task` (grid point major) on the current worker thread, recording its
    /// latencies, series and counts into that worker's accumulators.
    fn run(&self, task: usize) -> ReplicaRecord {
        let (grid_point, replica) = self.tasks[task];
        let live = self.points[(grid_point - self.first_point) as usize].expect("a task's point is live");
        let point = &live.point;
        let worker = rayon::current_thread_index().expect("runs on the pool");
        // Each worker locks only its own slot: never contended.
        let mut accumulators = self.workers[worker].lock().expect("no worker panicked");
        if accumulators.replica.len() != self.latency_count {
            // A model with a few latencies records into them on every response: their
            // counts now. Thousands (a big graph's entry points) grow as they fill.
            accumulators.replica = lent_histograms(self.latency_count);
        }
        let started = std::time::Instant::now();
        let output = point.model.run_replica(&point.run, self.master_seed, replica as u64, &mut accumulators.replica);
        let compute_ns = started.elapsed().as_nanos() as u64;
        {
            // Batches by residue: two workers rarely want one batch at once.
            let mut batch = live.batches[batch_of(replica)].lock().expect("no worker panicked");
            if batch.is_empty() {
                *batch = vec![None; self.latency_count];
            }
            for (total, part) in batch.iter_mut().zip(accumulators.replica.iter_mut()) {
                if part.count() > 0 {
                    total.get_or_insert_with(SparseHistogram::default).add(part);
                    part.reset();
                }
            }
        }
        if !output.latency_windows.is_empty() {
            let mut windows = live.windows.lock().expect("no worker panicked");
            windows.resize_with(output.latency_windows.len(), BatchedWindows::default);
            for (kind, counts) in windows.iter_mut().zip(&output.latency_windows) {
                kind.add(batch_of(replica), counts);
            }
        }
        let extracted = self.extract.map_or_else(Vec::new, |extract| extract(point, &output));
        let accumulator = accumulators.for_point(grid_point);
        accumulator.series.add(&output.series);
        add_counts(&mut accumulator.counts, &output.counts);
        let metrics = output.metrics;
        debug_assert_eq!(metrics.len(), self.metric_count);
        (self.progress)();
        let seed = replica_seed(self.master_seed, replica as u64);
        ReplicaRecord { grid_point, replica, seed, metrics, compute_ns, extracted }
    }
}

/// Each metric's mean and interval from its fold, the interval clipped to the
/// metric's domain: the one way a summary is made (a run, and a merge of shards).
pub fn summaries(moments: &[Moments], defs: &[stampede_scenario::models::MetricDef]) -> Vec<Summary> {
    moments
        .iter()
        .zip(defs)
        .map(|(moments, def)| {
            let summary = moments.summary();
            let (ci_lo, ci_hi) = def.clip(summary.ci_lo, summary.ci_hi);
            Summary { ci_lo, ci_hi, ..summary }
        })
        .collect()
}

/// Where a run's results go, in order: every replica's record, and every grid point
/// once all its replicas are done.
pub struct Sinks<'a> {
    pub records: &'a mut dyn FnMut(&[ReplicaRecord]) -> Result<()>,
    pub point: &'a mut dyn FnMut(&GridPoint, PointResult) -> Result<()>,
}

/// Runs the tasks of `plan` (every replica of every grid point, or a shard's share)
/// on `threads` threads.
///
/// `progress` is called once per finished replica (from worker threads); the sinks
/// receive every record exactly once, in (grid point, replica) order, and every grid
/// point exactly once, in order, as soon as its last planned replica is folded. A
/// shard's point results cover its replicas only: partial sums to be merged.
pub fn run_grid(
    scenario: &Scenario,
    plan: &Plan,
    threads: usize,
    progress: &(dyn Fn() + Sync),
    sinks: Sinks,
) -> Result<()> {
    run_grid_cancellable(scenario, plan, threads, progress, &AtomicBool::new(false), sinks)
}

/// [`run_grid`] that stops soon after `cancel` is set: the replicas not started yet
/// are skipped, and it returns an error (the sinks may have seen part of the run).
pub fn run_grid_cancellable(
    scenario: &Scenario,
    plan: &Plan,
    threads: usize,
    progress: &(dyn Fn() + Sync),
    cancel: &AtomicBool,
    sinks: Sinks,
) -> Result<()> {
    let (points, replicas) = (scenario.point_count(), scenario.run.replicas);
    assert!(points > 0 && replicas > 0 && threads > 0);
    debug_assert_eq!((plan.points, plan.replicas), (points, replicas));
    let chunk = CHUNK_TASKS.min(CHUNK_POINTS * replicas as u64) as usize;
    run_tasks(scenario, &mut plan.tasks(), chunk, threads, Hooks { progress, cancel, extract: None }, sinks)
}

/// Runs replicas `ranges[p]` of every grid point `p` (an empty range: none of it) —
/// what `optimize` gives each candidate in a round. Each replica is the one a full
/// run would make (same seed, same streams), so results of several calls over
/// adjoining ranges fold into what one run over their union gives; the sinks see
/// partial results of points, as a shard's.
pub fn run_ranges(
    scenario: &Scenario,
    ranges: &[std::ops::Range<u32>],
    threads: usize,
    progress: &(dyn Fn() + Sync),
    sinks: Sinks,
) -> Result<()> {
    run_ranges_extracting(scenario, ranges, threads, progress, None, sinks)
}

/// [`run_ranges`] with each record's `extracted` filled by `extract`.
pub fn run_ranges_extracting(
    scenario: &Scenario,
    ranges: &[std::ops::Range<u32>],
    threads: usize,
    progress: &(dyn Fn() + Sync),
    extract: Option<Extract>,
    sinks: Sinks,
) -> Result<()> {
    assert_eq!(ranges.len(), scenario.point_count() as usize, "a range per grid point");
    let widest = ranges.iter().map(|r| r.len() as u64).max().unwrap_or(0);
    if widest == 0 {
        return Ok(());
    }
    let chunk = CHUNK_TASKS.min(CHUNK_POINTS * widest) as usize;
    let mut tasks = ranges.iter().enumerate().flat_map(|(p, r)| r.clone().map(move |replica| (p as u32, replica)));
    let hooks = Hooks { progress, cancel: &AtomicBool::new(false), extract };
    run_tasks(scenario, &mut tasks, chunk, threads, hooks, sinks)
}

thread_local! {
    /// The flag of the innermost [`cancellable_scope`] on this thread.
    static SCOPED_CANCEL: RefCell<Option<Arc<AtomicBool>>> = const { RefCell::new(None) };
}

/// Runs `f` with every grid this thread runs meanwhile — [`run_grid`], [`run_ranges`],
/// a command's pilots, stages and rounds — stopping soon after `cancel` is set, as
/// [`run_grid_cancellable`] does: a whole command becomes cancellable without each
/// layer between it and the runner taking a flag (the Python package's Ctrl-C).
pub fn cancellable_scope<T>(cancel: Arc<AtomicBool>, f: impl FnOnce() -> T) -> T {
    let outer = SCOPED_CANCEL.with(|scoped| scoped.replace(Some(cancel)));
    // Restored even if `f` panics, so a later run on this thread is not cancelled by it.
    struct Restore(Option<Arc<AtomicBool>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            SCOPED_CANCEL.with(|scoped| *scoped.borrow_mut() = self.0.take());
        }
    }
    let _restore = Restore(outer);
    f()
}

/// Whether the innermost [`cancellable_scope`] on this thread has been cancelled: for
/// work that does not go through the runner (`stampede rare`'s splitting runs).
pub fn scope_cancelled() -> impl Fn() -> bool + Sync {
    let scoped = SCOPED_CANCEL.with(|scoped| scoped.borrow().clone());
    move || scoped.as_ref().is_some_and(|flag| flag.load(Ordering::Relaxed))
}

/// What a run calls besides its sinks: per finished replica, when to stop, what to
/// keep of each replica's output.
struct Hooks<'a> {
    progress: &'a (dyn Fn() + Sync),
    cancel: &'a AtomicBool,
    extract: Option<Extract<'a>>,
}

/// Runs `tasks` ((grid point, replica), grid point major, each point's replicas
/// contiguous) in chunks of at most `chunk` tasks.
fn run_tasks(
    scenario: &Scenario,
    tasks: &mut dyn Iterator<Item = (u32, u32)>,
    chunk: usize,
    threads: usize,
    hooks: Hooks,
    sinks: Sinks,
) -> Result<()> {
    let Hooks { progress, cancel, extract } = hooks;
    let scoped = SCOPED_CANCEL.with(|scoped| scoped.borrow().clone());
    let cancelled = || cancel.load(Ordering::Relaxed) || scoped.as_ref().is_some_and(|s| s.load(Ordering::Relaxed));
    let metric_count = scenario.schema.metrics.len();
    let latency_count = scenario.schema.latencies.len();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|error| Error::io(format!("cannot start {threads} worker threads: {error}")))?;
    let workers: Vec<Mutex<WorkerAccumulators>> = (0..threads).map(|_| Mutex::default()).collect();
    let mut live: BTreeMap<u32, LivePoint> = BTreeMap::new();
    let mut records = Vec::with_capacity(chunk);
    let mut cancellable: Vec<Option<ReplicaRecord>> = Vec::with_capacity(chunk);
    let mut pending = tasks.peekable();
    let mut tasks: Vec<(u32, u32)> = Vec::with_capacity(chunk);
    let mut order: Vec<usize> = Vec::with_capacity(chunk);
    while pending.peek().is_some() {
        next_chunk(&mut pending, chunk, &mut tasks);
        let (first, last) = (tasks[0].0, tasks[tasks.len() - 1].0);
        open_points(scenario, &tasks, &mut live)?;
        let work = Work {
            points: (first..=last).map(|i| live.get(&i)).collect(),
            first_point: first,
            tasks: &tasks,
            master_seed: scenario.run.seed,
            workers: &workers,
            latency_count,
            metric_count,
            progress,
            extract,
        };
        batch_major(&tasks, &mut order);
        pool.install(|| {
            order
                .par_iter()
                .map(|&task| if cancelled() { None } else { Some(work.run(task)) })
                .collect_into_vec(&mut cancellable)
        });
        drop(work);
        if cancelled() {
            return Err(Error::io("the run was cancelled"));
        }
        records.clear();
        records.extend(cancellable.drain(..).map(|record| record.expect("not cancelled")));
        records.sort_unstable_by_key(|record| (record.grid_point, record.replica));
        debug_assert!(records.windows(2).all(|w| (w[0].grid_point, w[0].replica) < (w[1].grid_point, w[1].replica)));
        fold_records(&records, &mut live);
        (sinks.records)(&records)?;
        // Grid points wholly before the next task are finished on every worker (a
        // point's planned replicas are contiguous in the task order).
        let finished_below = pending.peek().map_or(u32::MAX, |&(point, _)| point);
        for worker in &workers {
            worker.lock().expect("no worker panicked").drain_finished(finished_below, &mut live);
        }
        while let Some(entry) = live.first_entry().filter(|e| *e.key() < finished_below) {
            let (point, result) = entry.remove().finish(&scenario.schema.metrics, latency_count);
            (sinks.point)(&point, result)?;
        }
    }
    debug_assert!(live.is_empty());
    Ok(())
}

/// The order a chunk's `tasks` run in, as indices into it: each grid point's replicas
/// batch by batch ([`batch_of`]), so the replicas a worker runs one after another fold
/// into the same batch's histograms, warmer than in replica order, where each fold
/// landed on another of the ten batches (`SparseHistogram::add_count` went from 6.8%
/// to 5.0% of an llm-stack run under `perf`, and the run's wall time at 400 replicas
/// from 1.98 s to 1.90 s, medians of ten alternated runs). Which worker
/// runs a replica changes no output byte (histograms and window counts merge by
/// integer addition); the records are put back in task order before anything reads
/// them.
fn batch_major(tasks: &[(u32, u32)], order: &mut Vec<usize>) {
    order.clear();
    order.extend(0..tasks.len());
    // Keys are unique (a task is one replica of one point): the unstable sort gives the
    // one order there is, without the stable sort's buffer.
    order.sort_unstable_by_key(|&task| {
        let (grid_point, replica) = tasks[task];
        (grid_point, batch_of(replica), replica)
    });
}

/// The next chunk of `pending` into `tasks`: at most `chunk` tasks, over fewer than
/// `CHUNK_POINTS` grid points.
fn next_chunk(
    pending: &mut std::iter::Peekable<&mut dyn Iterator<Item = (u32, u32)>>,
    chunk: usize,
    tasks: &mut Vec<(u32, u32)>,
) {
    tasks.clear();
    while let Some(&(point, replica)) = pending.peek() {
        let span = tasks.first().map_or(0, |first| point - first.0);
        if tasks.len() == chunk || span as u64 >= CHUNK_POINTS {
            break;
        }
        tasks.push((point, replica));
        pending.next();
    }
}

/// Opens the grid points the chunk's `tasks` reach that are not live yet (only points
/// with planned tasks: a shard may have none of a point).
fn open_points(scenario: &Scenario, tasks: &[(u32, u32)], live: &mut BTreeMap<u32, LivePoint>) -> Result<()> {
    let mut chunk_points: Vec<u32> = tasks.iter().map(|t| t.0).collect();
    chunk_points.dedup();
    for &index in &chunk_points {
        if let std::collections::btree_map::Entry::Vacant(slot) = live.entry(index) {
            let point = scenario.grid_point(index)?;
            slot.insert(LivePoint {
                point,
                moments: vec![Moments::default(); scenario.schema.metrics.len()],
                replicas: 0..0,
                batches: (0..BATCHES).map(|_| Mutex::new(Vec::new())).collect(),
                windows: Mutex::new(Vec::new()),
                series: SeriesSums::default(),
                counts: Vec::new(),
                compute_ns: 0,
            });
        }
    }
    Ok(())
}

/// Folds a chunk's records, in (grid point, replica) order, into their points'
/// moments, replica ranges and compute time.
fn fold_records(records: &[ReplicaRecord], live: &mut BTreeMap<u32, LivePoint>) {
    for record in records {
        let point = live.get_mut(&record.grid_point).expect("live");
        for (moments, &value) in point.moments.iter_mut().zip(&record.metrics) {
            moments.push(value);
        }
        if point.replicas.is_empty() {
            point.replicas = record.replica..record.replica;
        }
        debug_assert_eq!(point.replicas.end, record.replica, "a point's replicas arrive in order, each once");
        point.replicas.end = record.replica + 1;
        point.compute_ns += record.compute_ns;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every task once, each point's replicas grouped by batch and ascending within
    /// it, the points in order.
    #[test]
    fn a_chunk_runs_batch_by_batch_and_every_task_once() {
        let tasks: Vec<(u32, u32)> = (5..30).map(|r| (3, r)).chain((0..12).map(|r| (4, r))).collect();
        let mut order = vec![99];
        batch_major(&tasks, &mut order);
        let mut seen = order.clone();
        seen.sort_unstable();
        assert_eq!(seen, (0..tasks.len()).collect::<Vec<_>>(), "a permutation of the chunk");
        let ran: Vec<(u32, u32)> = order.iter().map(|&t| tasks[t]).collect();
        assert_eq!(&ran[..3], [(3, 10), (3, 20), (3, 11)], "batch 0 of point 3 first (5..30 has 10 and 20)");
        let key = |&(point, replica): &(u32, u32)| (point, batch_of(replica), replica);
        assert!(ran.windows(2).all(|w| key(&w[0]) < key(&w[1])));
        assert_eq!(ran.last(), Some(&(4, 9)));
    }
}
