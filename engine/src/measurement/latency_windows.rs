//! Latency over time: per time window, a compact histogram of the latencies of the
//! requests that ended in it (every ending, and those answered in full apart) and the
//! count of each ending — what "p99 during the incident, failures counted" is read from.
//!
//! A window's histogram has [`BUCKETS`] 32-bit counters: one for everything under
//! 1 µs, then 32 per power of two up to 2^44 ns (4.9 hours; longer latencies go in the
//! top bucket). A bucket is at most 1/32 of its lower edge wide. A quantile is the
//! bucket holding its rank and, inside it, the rank's place among the bucket's values
//! spread evenly: it lies in the same bucket as the sample's order statistic, so
//! within 3.1% of it (placing by rank rather than snapping to a bucket's middle keeps
//! batches of replicas from tying on one value and making a zero-width interval).
//! 4,356 bytes per histogram, two per window. [`WindowCounts`] is the layout, shared with the
//! run layer that sums replicas' windows.
//!
//! A model holds one [`LatencyWindows`] per request kind, off (recording nothing, one
//! branch) unless given a window width. Recording allocates nothing: the counters are
//! taken when the model is built, from a per-thread list of spares that dropped
//! counters return to with only their non-zero counters zeroed — a worker running replica
//! after replica reuses them instead of zeroing fresh pages (hundreds of KB per request
//! kind) each time. The spare list never affects a value.
//!
//! The counters also keep the list of those that are non-zero (a replica's few
//! thousand requests touch a few thousand of its half a million counters): clearing,
//! adding a replica into its batch and the compact serialisation walk that list only.
//! Walking the dense windows instead took a third of the time an `llm-stack` replica
//! spends outside its simulation.
//!
//! Invariants (checked by the tests): a window's `all` histogram counts exactly the
//! sum of its ending counts; `ok` counts exactly its `Ok` endings; `nonzero` holds
//! each non-zero counter's index exactly once, and no other.

use std::cell::RefCell;

use crate::kernel::time::Nanos;

use super::ending::Ending;

/// Spare counters kept per thread at most (a replica of a usual model holds one per
/// request kind: the gateway's turns and classes, a graph's entry points).
const SPARES_KEPT: usize = 16;

thread_local! {
    /// Zeroed counters given back by dropped ones.
    static SPARES: RefCell<Vec<WindowCounts>> = const { RefCell::new(Vec::new()) };
}

/// Buckets per power of two, as a shift.
const SUB_BITS: u32 = 5;
/// The lowest octave with its own buckets: 2^10 ns ≈ 1 µs.
const LOW_OCTAVE: u32 = 10;
/// The highest octave: 2^44 ns ≈ 4.9 hours (higher values share its top bucket).
const HIGH_OCTAVE: u32 = 44;
/// Counters per histogram: one under 1 µs, then 32 per octave.
pub const BUCKETS: usize = 1 + (((HIGH_OCTAVE - LOW_OCTAVE) as usize) << SUB_BITS);

/// The bucket of `latency`.
#[inline]
pub fn bucket_of(latency: Nanos) -> usize {
    if latency < 1 << LOW_OCTAVE {
        return 0;
    }
    let octave = (63 - latency.leading_zeros()).min(HIGH_OCTAVE - 1);
    let sub = if octave == HIGH_OCTAVE - 1 && latency >> HIGH_OCTAVE > 0 {
        (1 << SUB_BITS) - 1
    } else {
        (latency >> (octave - SUB_BITS)) as usize & ((1 << SUB_BITS) - 1)
    };
    1 + (((octave - LOW_OCTAVE) as usize) << SUB_BITS) + sub
}

/// The [low, high) nanoseconds of bucket `index` (the first bucket is [0, 1024)).
pub fn bucket_range(index: usize) -> (f64, f64) {
    if index == 0 {
        return (0.0, (1u64 << LOW_OCTAVE) as f64);
    }
    let octave = LOW_OCTAVE + ((index - 1) >> SUB_BITS) as u32;
    let sub = ((index - 1) & ((1 << SUB_BITS) - 1)) as u64;
    let width = 1u64 << (octave - SUB_BITS);
    let low = (1u64 << octave) + sub * width;
    (low as f64, (low + width) as f64)
}

/// The `q` quantile (0 < q ≤ 1) of a histogram of [`BUCKETS`] counts, in nanoseconds:
/// the bucket holding rank ⌈q·n⌉, and inside it the rank's place among the bucket's
/// values spread evenly over its width. NaN when empty.
pub fn quantile_of<C: Copy + Into<u64>>(counts: &[C], q: f64) -> f64 {
    let total: u64 = counts.iter().map(|&c| c.into()).sum();
    if total == 0 {
        return f64::NAN;
    }
    let rank = ((q * total as f64).ceil() as u64).clamp(1, total);
    let mut seen = 0u64;
    for (index, &count) in counts.iter().enumerate() {
        let count: u64 = count.into();
        if seen + count >= rank {
            let (low, high) = bucket_range(index);
            let place = (rank - seen) as f64 - 0.5;
            return low + (high - low) * place / count as f64;
        }
        seen += count;
    }
    unreachable!("rank ≤ total")
}

/// What each window holds, by position: the `all` histogram, the `ok` histogram.
pub const HISTOGRAMS_PER_WINDOW: usize = 2;

/// The counters of `windows` windows: per window its `all` then its `ok` histogram,
/// and per window the count of each ending (`[ok, degraded, failed]`).
#[derive(Clone, Debug, Default)]
pub struct WindowCounts {
    /// Per window, its histograms' counters, window-major (written only here, so
    /// `nonzero` stays exact).
    histograms: Vec<u32>,
    /// Per window, the requests that ended ok, degraded and failed.
    pub endings: Vec<[u32; 3]>,
    /// The index in `histograms` of every non-zero counter, in the order they became
    /// non-zero.
    nonzero: Vec<u32>,
}

/// Equal counts (whatever order their counters became non-zero in).
impl PartialEq for WindowCounts {
    fn eq(&self, other: &Self) -> bool {
        self.endings == other.endings && self.histograms == other.histograms
    }
}

impl Eq for WindowCounts {}

impl WindowCounts {
    /// Zeroed counters of `windows` windows: a spare of this thread's if one fits.
    pub fn new(windows: usize) -> Self {
        let spare = SPARES
            .try_with(|spares| {
                let mut spares = spares.try_borrow_mut().ok()?;
                let at = spares.iter().position(|s| s.windows() == windows)?;
                Some(spares.swap_remove(at))
            })
            .ok()
            .flatten();
        if let Some(spare) = spare {
            debug_assert!(
                spare.endings.iter().all(|e| *e == [0; 3])
                    && spare.nonzero.is_empty()
                    && spare.histograms.iter().all(|c| *c == 0)
            );
            return spare;
        }
        WindowCounts {
            histograms: vec![0; windows * HISTOGRAMS_PER_WINDOW * BUCKETS],
            endings: vec![[0; 3]; windows],
            nonzero: Vec::new(),
        }
    }

    /// Where window `w`'s histogram `h` (0: all, 1: ok) starts in `histograms`.
    fn start(w: usize, h: usize) -> usize {
        (w * HISTOGRAMS_PER_WINDOW + h) * BUCKETS
    }

    /// Counts `requests` (positive) requests of `ending` after `latency` in window `w`.
    #[inline]
    pub fn count(&mut self, w: usize, ending: Ending, latency: Nanos, requests: u32) {
        let index = Self::start(w, 0) + bucket_of(latency);
        self.bump(index, requests);
        if ending == Ending::Ok {
            self.bump(index + BUCKETS, requests);
        }
        self.endings[w][ending.index()] += requests;
    }

    /// Adds `by` (positive) to counter `index`, listing it if it was zero. Panics if
    /// the counter would pass `u32::MAX` (4.3 billion requests in one bucket of one
    /// window of one batch of replicas).
    #[inline]
    fn bump(&mut self, index: usize, by: u32) {
        debug_assert!(by > 0);
        let counter = &mut self.histograms[index];
        if *counter == 0 {
            self.nonzero.push(index as u32);
        }
        *counter = counter.checked_add(by).expect("a bucket's count fits in 32 bits");
    }

    /// How many windows the counts hold.
    pub fn windows(&self) -> usize {
        self.endings.len()
    }

    /// Window `w`'s histogram of every ending.
    pub fn all(&self, w: usize) -> &[u32] {
        let start = Self::start(w, 0);
        &self.histograms[start..start + BUCKETS]
    }

    /// Window `w`'s histogram of requests answered in full.
    pub fn ok(&self, w: usize) -> &[u32] {
        let start = Self::start(w, 1);
        &self.histograms[start..start + BUCKETS]
    }

    /// Adds `other` (of as many windows), skipping its empty windows. Panics if a
    /// counter would pass `u32::MAX` (4.3 billion requests in one bucket of one window
    /// of one batch of replicas).
    pub fn add(&mut self, other: &WindowCounts) {
        assert_eq!(self.windows(), other.windows(), "windows of one layout");
        for (mine, theirs) in self.endings.iter_mut().zip(&other.endings).filter(|(_, e)| **e != [0; 3]) {
            for (mine, theirs) in mine.iter_mut().zip(theirs) {
                *mine = mine.checked_add(*theirs).expect("a window's count fits in 32 bits");
            }
        }
        for &index in &other.nonzero {
            self.bump(index as usize, other.histograms[index as usize]);
        }
    }

    /// Zeroes the counters that hold anything.
    pub fn clear(&mut self) {
        self.endings.fill([0; 3]);
        for &index in &self.nonzero {
            self.histograms[index as usize] = 0;
        }
        self.nonzero.clear();
    }

    /// The non-zero counters as (index, count) pairs, then the endings: a compact,
    /// exact serialisation (little-endian u32s) for shards and checkpoints.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&(self.windows() as u32).to_le_bytes());
        for counts in &self.endings {
            counts.iter().for_each(|c| bytes.extend_from_slice(&c.to_le_bytes()));
        }
        let mut nonzero = self.nonzero.clone();
        nonzero.sort_unstable();
        for index in nonzero {
            bytes.extend_from_slice(&index.to_le_bytes());
            bytes.extend_from_slice(&self.histograms[index as usize].to_le_bytes());
        }
        bytes
    }

    /// Reads [`Self::to_bytes`] back; `None` if the bytes are not of that layout.
    pub fn from_bytes(bytes: &[u8]) -> Option<WindowCounts> {
        let words: Vec<u32> =
            bytes.chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().expect("four bytes"))).collect();
        if !bytes.len().is_multiple_of(4) || words.is_empty() {
            return None;
        }
        let windows = words[0] as usize;
        let ending_words = windows.checked_mul(3)?;
        let pairs = words.get(1 + ending_words..)?;
        if !pairs.len().is_multiple_of(2) {
            return None;
        }
        let mut counts = WindowCounts::new(windows);
        for (w, chunk) in words[1..1 + ending_words].chunks_exact(3).enumerate() {
            counts.endings[w] = [chunk[0], chunk[1], chunk[2]];
        }
        for pair in pairs.chunks_exact(2) {
            let (index, count) = (pair[0] as usize, pair[1]);
            // Each counter once, non-zero: what `to_bytes` writes.
            if index >= counts.histograms.len() || count == 0 || counts.histograms[index] > 0 {
                return None;
            }
            counts.bump(index, count);
        }
        Some(counts)
    }
}

impl Drop for WindowCounts {
    /// Gives the counters back to this thread's spares, touched windows zeroed.
    fn drop(&mut self) {
        if self.endings.is_empty() {
            return;
        }
        self.clear();
        let (histograms, endings, nonzero) = (
            std::mem::take(&mut self.histograms),
            std::mem::take(&mut self.endings),
            std::mem::take(&mut self.nonzero),
        );
        // At thread exit the list may be gone, and a full list takes no more: the plain
        // vectors are then freed (never a WindowCounts, whose drop would come here again).
        let _ = SPARES.try_with(|spares| {
            if let Ok(mut spares) = spares.try_borrow_mut() {
                if spares.len() < SPARES_KEPT {
                    spares.push(WindowCounts { histograms, endings, nonzero });
                }
            }
        });
    }
}

/// One request kind's latencies over time in one replica.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LatencyWindows {
    /// Window width (0: off).
    window: Nanos,
    counts: WindowCounts,
}

impl LatencyWindows {
    /// Off: records nothing.
    pub fn off() -> Self {
        LatencyWindows::default()
    }

    /// Windows of `window` ns from time 0 to `horizon` (the last may be cut short).
    pub fn new(window: Nanos, horizon: Nanos) -> Self {
        assert!(window > 0, "a window has a width");
        LatencyWindows { window, counts: WindowCounts::new(horizon.div_ceil(window).max(1) as usize) }
    }

    /// Records a request that ended at `now` after `latency`, as `ending` (one that
    /// ended after the horizon — a model that drains — goes in the last window).
    #[inline]
    pub fn record(&mut self, now: Nanos, ending: Ending, latency: Nanos) {
        if self.window == 0 {
            return;
        }
        let w = ((now / self.window) as usize).min(self.counts.windows() - 1);
        self.counts.count(w, ending, latency, 1);
    }

    /// The counters (empty when off).
    pub fn counts(&self) -> &WindowCounts {
        &self.counts
    }

    /// The counts recorded, for the run layer to sum.
    pub fn into_counts(self) -> WindowCounts {
        self.counts
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::rng::{RngStream, StreamPurpose};

    #[test]
    fn buckets_are_ordered_and_at_most_a_32nd_wide() {
        let mut previous = 0;
        let values = (0..200_000u64).step_by(7).chain((0..64).map(|k| 1u64 << k)).chain([u64::MAX, (1 << 44) - 1]);
        let mut values: Vec<u64> = values.collect();
        values.sort_unstable();
        for value in values {
            let index = bucket_of(value);
            assert!(index >= previous && index < BUCKETS, "monotone and in range at {value}");
            previous = index;
            let (low, high) = bucket_range(index);
            if value < 1 << HIGH_OCTAVE {
                assert!(low <= value as f64 && (value as f64) < high, "{value} in [{low}, {high})");
            }
            if index > 0 {
                assert!((high - low) / low <= 1.0 / 32.0 + 1e-12, "bucket {index} is {low}..{high}");
            }
        }
        assert_eq!(bucket_of(u64::MAX), BUCKETS - 1);
    }

    /// Quantiles of an exponential sample are within one bucket (3.1%) of its own order
    /// statistics.
    #[test]
    fn quantiles_are_within_the_stated_precision_of_the_sample() {
        let mut rng = RngStream::derive(1, 0, StreamPurpose::named("test.latency_windows"));
        let mut windows = LatencyWindows::new(10, 20);
        let mut sample = Vec::new();
        for i in 0..100_000u64 {
            let latency = (rng.exponential(1.0) * 1e7) as Nanos + 2_000;
            let ending = if i % 10 == 0 { Ending::Failed } else { Ending::Ok };
            windows.record(i % 20, ending, latency);
            sample.push((i % 20 >= 10, ending, latency));
        }
        let counts = windows.counts();
        assert_eq!(counts.windows(), 2);
        for w in 0..2 {
            let mut all: Vec<u64> = sample.iter().filter(|s| s.0 == (w == 1)).map(|s| s.2).collect();
            all.sort_unstable();
            assert_eq!(counts.all(w).iter().map(|&c| c as u64).sum::<u64>(), all.len() as u64);
            assert_eq!(counts.endings[w][0] + counts.endings[w][2], all.len() as u32);
            assert_eq!(counts.ok(w).iter().map(|&c| c as u64).sum::<u64>(), counts.endings[w][0] as u64);
            for q in [0.5, 0.9, 0.99, 0.999] {
                let exact = all[((q * all.len() as f64).ceil() as usize).clamp(1, all.len()) - 1] as f64;
                let got = quantile_of(counts.all(w), q);
                assert!((got / exact - 1.0).abs() <= 1.0 / 32.0, "window {w} q{q}: {got} vs {exact}");
            }
        }
        let back = WindowCounts::from_bytes(&counts.to_bytes()).expect("round trip");
        assert_eq!(&back, counts);
        let mut twice = back.clone();
        twice.add(&back);
        assert_eq!(twice.endings[1][0], 2 * back.endings[1][0]);
        twice.clear();
        assert_eq!(twice, WindowCounts::new(2));
        assert!(quantile_of(twice.all(0), 0.5).is_nan());
        assert_eq!(WindowCounts::from_bytes(&[1, 2, 3]), None);
    }

    /// Dropped counters come back zeroed for the next replica of this thread, and a
    /// full spare list frees the rest.
    #[test]
    fn dropped_counters_are_reused_zeroed() {
        let mut windows = LatencyWindows::new(10, 30);
        windows.record(15, Ending::Failed, 5_000);
        let pointer = windows.counts().histograms.as_ptr();
        drop(windows);
        let again = WindowCounts::new(3);
        assert_eq!(again.histograms.as_ptr(), pointer, "the spare is reused");
        assert_eq!(
            again,
            WindowCounts {
                histograms: vec![0; 3 * HISTOGRAMS_PER_WINDOW * BUCKETS],
                endings: vec![[0; 3]; 3],
                nonzero: Vec::new()
            }
        );
        let many: Vec<WindowCounts> = (0..SPARES_KEPT + 4).map(|_| WindowCounts::new(2)).collect();
        drop(many);
        assert_eq!(SPARES.with(|s| s.borrow().len()), SPARES_KEPT);
    }

    /// The list of non-zero counters is exact after records, a sum and a round trip;
    /// the sum and the bytes are the dense layout's, walked in full; and a clear leaves
    /// every counter zero.
    #[test]
    fn the_nonzero_list_is_exact_and_sums_and_bytes_match_a_dense_walk() {
        let mut rng = RngStream::derive(1, 0, StreamPurpose::named("test.latency_windows.masks"));
        let mut parts = Vec::new();
        for _ in 0..2 {
            let mut windows = LatencyWindows::new(10, 40);
            for _ in 0..300 {
                let latency = (rng.exponential(1.0) * 10f64.powf(rng.uniform01() * 12.0)) as Nanos;
                let ending = [Ending::Ok, Ending::Degraded, Ending::Failed][(rng.uniform01() * 3.0) as usize];
                windows.record((rng.uniform01() * 40.0) as Nanos, ending, latency);
            }
            parts.push(windows.into_counts());
        }
        let mut sum = parts[0].clone();
        sum.add(&parts[1]);
        let dense: Vec<u32> = parts[0].histograms.iter().zip(&parts[1].histograms).map(|(a, b)| a + b).collect();
        assert_eq!(sum.histograms, dense);
        let mut dense_bytes = Vec::new();
        for (index, &count) in dense.iter().enumerate().filter(|(_, &c)| c > 0) {
            dense_bytes.extend_from_slice(&(index as u32).to_le_bytes());
            dense_bytes.extend_from_slice(&count.to_le_bytes());
        }
        let bytes = sum.to_bytes();
        assert_eq!(bytes[4 + 12 * sum.windows()..], dense_bytes[..]);
        for counts in [&parts[0], &parts[1], &sum, &WindowCounts::from_bytes(&bytes).expect("round trip")] {
            let mut listed = counts.nonzero.clone();
            listed.sort_unstable();
            let held: Vec<u32> =
                (0..counts.histograms.len() as u32).filter(|&i| counts.histograms[i as usize] > 0).collect();
            assert_eq!(listed, held);
        }
        assert!(sum.nonzero.len() > 300, "the test touches many counters");
        sum.clear();
        assert!(sum.histograms.iter().all(|&c| c == 0) && sum.nonzero.is_empty());
        let twice = [&bytes[..], &bytes[bytes.len() - 8..]].concat();
        assert_eq!(WindowCounts::from_bytes(&twice), None, "a counter written twice");
    }

    #[test]
    fn off_records_nothing() {
        let mut off = LatencyWindows::off();
        off.record(5, Ending::Ok, 5);
        assert_eq!(off.counts().windows(), 0);
    }
}
