//! One replica's latencies for its own quantiles (a per-replica `p99_s` metric),
//! within 0.1% of the sample's order statistic.
//!
//! The buckets are HdrHistogram's at 3 significant digits (the layout of
//! [`crate::LatencyHistogram`], so a bucket is at most 1/1024 of its value wide); each
//! keeps a 32-bit count and the sum of its values' offsets from its low edge. A
//! quantile is the order statistic of rank ⌈q·n⌉: located in its bucket, and placed
//! by its rank among the bucket's values, spread evenly around their mean. It lies in
//! the same bucket as the true order statistic, so within one bucket width — under
//! 0.1% — of it; it is exact where the bucket holds one value (the far tail), and it
//! follows the data inside a bucket, so replicas do not snap to shared bucket edges
//! (the coarse 1/16-octave histogram this replaced gave a 30-replica point three
//! distinct p99s; bucket middles alone still tied a third of a point's p99.9s).
//!
//! Cost: a histogram's first [`SMALL`] values are kept as they are (in a list of
//! [`FIRST_SMALL`] values, 512 bytes, then of [`SMALL`], 16 KB; each from a
//! per-thread spare list: a 2,000-service graph's 9,000 call sites and entry points,
//! most seeing a few requests a replica, kept 294 MB of 16 KB lists); a quantile of
//! those sorts a copy and reads the same bucket figures (count, offsets' sum, values
//! below) the counters would hold, so the answer is bit for bit the counters' — a graph with thousands of entry points and
//! call sites, most seeing a few hundred to two thousand requests a replica, keeps
//! 16 KB for each instead of 420 KB (at 512 values, the 300 entry points and call
//! sites of a 300-service graph took 163 MB of counters a replica). Past [`SMALL`] values the histogram moves to its counters:
//! 420 KB of counts and sums, of which a replica touches only the buckets its
//! latencies fall in; a quantile walks the touched range once. The counters are taken
//! on the first record from a per-thread spare list and given back, with only the
//! touched range zeroed, when the histogram is dropped: a worker thread running
//! replica after replica allocates them once, not per replica (zeroing 420 KB per
//! histogram per replica would cost more than a short replica's events). The spare
//! list never affects a value, so results stay independent of threads.
//!
//! Invariants (asserted): `total` is the sum of the counts; the touched range holds
//! every non-zero count; a spare buffer is all zeros.

use std::cell::RefCell;

use crate::histogram::{bucket_count, bucket_of, lowest_value_of, HIGHEST_TRACKABLE_NANOS};
use crate::time::Nanos;

/// Spare buffers kept per thread at most: what a replica of a usual model keeps alive
/// at once (a gateway's classes × 2, a graph's entry points and call sites), while a
/// server with many short-lived threads (the web app's) holds at most 6.7 MB per
/// thread; a model with more frees and takes the rest anew each replica.
pub const SPARES_KEPT: usize = 16;

/// Values kept as they are before a histogram takes its counters: at 8 bytes each,
/// 16 KB.
pub const SMALL: usize = 2_048;

/// Spare value lists kept per thread at most (16 MB): one per histogram of a replica
/// of a graph with a thousand entry points and call sites.
const SMALL_SPARES_KEPT: usize = 1_024;

/// A histogram's first value list holds this many (512 bytes); the [`SMALL`] list
/// takes over when it is full.
pub const FIRST_SMALL: usize = 64;

/// Spare first lists kept per thread at most (8 MB).
const FIRST_SPARES_KEPT: usize = 16_384;

/// Buckets per group: a quantile walks the groups' counts, then one group's buckets,
/// and a drop zeroes only the groups that hold values — a replica whose latencies
/// run from 0 (an instant refusal) to a minute touches 36,000 buckets' range but
/// a few hundred groups.
const GROUP: usize = 64;

/// Per bucket, its count and the sum of its values' offsets from the bucket's low
/// edge; per group of [`GROUP`] buckets, its count.
#[derive(Clone, Debug)]
struct Buckets {
    counts: Box<[u32]>,
    offset_sums: Box<[u64]>,
    group_counts: Box<[u32]>,
}

impl Buckets {
    fn take() -> Buckets {
        SPARES.with(|spares| spares.borrow_mut().pop()).unwrap_or_else(|| Buckets {
            counts: vec![0; bucket_count()].into_boxed_slice(),
            offset_sums: vec![0; bucket_count()].into_boxed_slice(),
            group_counts: vec![0; bucket_count().div_ceil(GROUP)].into_boxed_slice(),
        })
    }
}

thread_local! {
    /// Zeroed buffers given back by dropped histograms.
    static SPARES: RefCell<Vec<Buckets>> = const { RefCell::new(Vec::new()) };
    /// Empty value lists of capacity [`SMALL`] given back by dropped histograms.
    static SMALL_SPARES: RefCell<Vec<Vec<u64>>> = const { RefCell::new(Vec::new()) };
    /// Empty value lists of capacity [`FIRST_SMALL`].
    static FIRST_SPARES: RefCell<Vec<Vec<u64>>> = const { RefCell::new(Vec::new()) };
}

/// An empty list of capacity `capacity` ([`FIRST_SMALL`] or [`SMALL`]): a spare, or a
/// new one.
fn take_small(capacity: usize) -> Vec<u64> {
    debug_assert!(capacity == FIRST_SMALL || capacity == SMALL);
    let pool = if capacity == SMALL { &SMALL_SPARES } else { &FIRST_SPARES };
    pool.with(|spares| spares.borrow_mut().pop()).unwrap_or_else(|| Vec::with_capacity(capacity))
}

/// Gives `values` back to the thread's spares (emptied), if it has one of their
/// capacities.
fn give_small(mut values: Vec<u64>) {
    let (pool, kept) = match values.capacity() {
        SMALL => (&SMALL_SPARES, SMALL_SPARES_KEPT),
        FIRST_SMALL => (&FIRST_SPARES, FIRST_SPARES_KEPT),
        _ => return,
    };
    values.clear();
    // `try_with`: see `Drop`.
    let _ = pool.try_with(|spares| {
        let mut spares = spares.borrow_mut();
        if spares.len() < kept {
            spares.push(values);
        }
    });
}

/// One replica's latency quantiles: a histogram of its records, its buckets taken
/// from (and given back to) the thread's spares.
#[derive(Clone, Debug)]
pub struct ReplicaQuantiles {
    /// The values themselves while there are at most [`SMALL`] (and `buckets` is
    /// `None`); empty once the counters hold them.
    small: Vec<u64>,
    /// `None` until the [`SMALL`]+1-th record.
    buckets: Option<Buckets>,
    total: u64,
    /// The buckets recorded into (`low > high` when none).
    low: usize,
    high: usize,
}

impl Default for ReplicaQuantiles {
    fn default() -> Self {
        Self::new()
    }
}

impl ReplicaQuantiles {
    /// Empty, with nothing allocated.
    pub fn new() -> Self {
        ReplicaQuantiles { small: Vec::new(), buckets: None, total: 0, low: usize::MAX, high: 0 }
    }

    /// Empty, with its counters taken now (a spare, or 420 KB): for a model's few
    /// histograms in a hot loop that must allocate nothing once warmed up, where
    /// [`Self::new`]'s move to the counters could come after the warm-up.
    pub fn with_counters() -> Self {
        ReplicaQuantiles { small: Vec::new(), buckets: Some(Buckets::take()), total: 0, low: usize::MAX, high: 0 }
    }

    /// Records one latency (clamped to [`HIGHEST_TRACKABLE_NANOS`]).
    #[inline]
    pub fn record(&mut self, latency: Nanos) {
        let value = latency.min(HIGHEST_TRACKABLE_NANOS);
        match self.buckets.as_mut() {
            Some(_) => self.count_in_buckets(value),
            None => self.record_small(value),
        }
    }

    /// Keeps `value` as it is, or moves every value to the counters when [`SMALL`]
    /// are kept already.
    #[inline(never)]
    fn record_small(&mut self, value: u64) {
        debug_assert!(self.buckets.is_none() && self.small.len() as u64 == self.total);
        if self.small.len() < SMALL {
            if self.small.len() == self.small.capacity() {
                // The first list, or the full first list moved to the big one.
                let mut list = take_small(if self.small.capacity() == 0 { FIRST_SMALL } else { SMALL });
                list.extend_from_slice(&self.small);
                give_small(std::mem::replace(&mut self.small, list));
            }
            self.small.push(value);
            self.total += 1;
            return;
        }
        let taken = Buckets::take();
        // The groups' counts only: walking all 105,000 entries per histogram per
        // replica would slow every debug build's short replicas several-fold.
        debug_assert!(taken.group_counts.iter().all(|&c| c == 0), "a spare buffer is zeroed");
        self.buckets = Some(taken);
        let kept = std::mem::take(&mut self.small);
        self.total = 0;
        kept.iter().for_each(|&v| self.count_in_buckets(v));
        give_small(kept);
        self.count_in_buckets(value);
    }

    /// Counts `value` (clamped) in the counters.
    #[inline]
    fn count_in_buckets(&mut self, value: u64) {
        let buckets = self.buckets.as_mut().expect("the counters are taken");
        let index = bucket_of(value);
        // A bucket would need 4 billion values of one replica to overflow.
        buckets.counts[index] = buckets.counts[index].saturating_add(1);
        buckets.group_counts[index / GROUP] = buckets.group_counts[index / GROUP].saturating_add(1);
        buckets.offset_sums[index] = buckets.offset_sums[index].saturating_add(value - lowest_value_of(index));
        self.total += 1;
        self.low = self.low.min(index);
        self.high = self.high.max(index);
    }

    /// Values recorded.
    pub fn count(&self) -> u64 {
        self.total
    }

    /// The `q` quantile (0 ≤ q ≤ 1) in nanoseconds: the order statistic of rank
    /// ⌈q·n⌉ (at least 1), within 0.1% (exact below 2,048 ns and where its bucket
    /// holds one value); NaN when empty.
    pub fn quantile(&self, q: f64) -> f64 {
        debug_assert!((0.0..=1.0).contains(&q), "quantile {q}");
        if self.buckets.is_none() && self.total > 0 {
            return self.quantile_of_small(q);
        }
        let Some(buckets) = self.buckets.as_ref().filter(|_| self.total > 0) else {
            return f64::NAN;
        };
        let groups = &buckets.group_counts[self.low / GROUP..=self.high / GROUP];
        debug_assert_eq!(self.total, groups.iter().map(|&c| u64::from(c)).sum::<u64>());
        let rank = ((q * self.total as f64).ceil() as u64).clamp(1, self.total);
        let mut before = 0u64;
        for (group_offset, &group_count) in groups.iter().enumerate() {
            if before + u64::from(group_count) < rank {
                before += u64::from(group_count);
                continue;
            }
            let first = (self.low / GROUP + group_offset) * GROUP;
            for index in first..(first + GROUP).min(buckets.counts.len()) {
                let count = u64::from(buckets.counts[index]);
                if before + count >= rank {
                    let low = lowest_value_of(index);
                    let width = (lowest_value_of(index + 1) - low) as f64;
                    let mean = buckets.offset_sums[index] as f64 / count as f64;
                    return low as f64 + spread(rank - before, count, mean, width);
                }
                before += count;
            }
            unreachable!("the group holds the rank");
        }
        unreachable!("rank ≤ total")
    }
}

impl ReplicaQuantiles {
    /// The quantile the counters would give, from the values kept: the rank's bucket,
    /// the values below it, and its values' count and offsets' sum.
    fn quantile_of_small(&self, q: f64) -> f64 {
        debug_assert_eq!(self.total, self.small.len() as u64);
        let mut values = self.small.clone();
        values.sort_unstable();
        let rank = ((q * self.total as f64).ceil() as u64).clamp(1, self.total);
        let index = bucket_of(values[rank as usize - 1]);
        // Sorted by value is sorted by bucket.
        let before = values.partition_point(|&v| bucket_of(v) < index);
        let end = values.partition_point(|&v| bucket_of(v) <= index);
        let low = lowest_value_of(index);
        let width = (lowest_value_of(index + 1) - low) as f64;
        let offsets: u64 = values[before..end].iter().map(|&v| v - low).sum();
        let count = (end - before) as u64;
        low as f64 + spread(rank - before as u64, count, offsets as f64 / count as f64, width)
    }
}

/// Where the k-th smallest (1-based) of `count` values with mean offset `mean` in a
/// bucket `width` wide lies: evenly spaced around the mean, as widely as the bucket
/// allows on the nearer side. One value is its mean (exact); values all at one point
/// (a timeout's) are that point.
fn spread(k: u64, count: u64, mean: f64, width: f64) -> f64 {
    debug_assert!((1..=count).contains(&k) && (0.0..width).contains(&mean), "k {k} of {count}, mean {mean} of {width}");
    let half = mean.min(width - 1.0 - mean).max(0.0);
    mean + half * ((2 * k - 1) as f64 / count as f64 - 1.0)
}

impl Drop for ReplicaQuantiles {
    fn drop(&mut self) {
        give_small(std::mem::take(&mut self.small));
        let Some(mut buckets) = self.buckets.take() else {
            return;
        };
        if self.total > 0 {
            for group in self.low / GROUP..=self.high / GROUP {
                if buckets.group_counts[group] > 0 {
                    let range = group * GROUP..((group + 1) * GROUP).min(buckets.counts.len());
                    buckets.counts[range.clone()].fill(0);
                    buckets.offset_sums[range].fill(0);
                    buckets.group_counts[group] = 0;
                }
            }
        }
        // `try_with`: a histogram dropped while its thread is being torn down frees
        // its buffers instead.
        let _ = SPARES.try_with(|spares| {
            let mut spares = spares.borrow_mut();
            if spares.len() < SPARES_KEPT {
                spares.push(buckets);
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::{RngStream, StreamPurpose};

    /// The order statistic of rank ⌈q·n⌉ of `values`.
    fn order_statistic(values: &mut [u64], q: f64) -> f64 {
        let rank = ((q * values.len() as f64).ceil() as usize).clamp(1, values.len());
        *values.select_nth_unstable(rank - 1).1 as f64
    }

    /// Within 0.1% of the sample's own order statistic, at every quantile stampede
    /// reports, for samples from microseconds to minutes and small to large n.
    #[test]
    fn quantiles_are_within_a_thousandth_of_the_order_statistic() {
        let mut rng = RngStream::derive(3, 0, StreamPurpose::named("test.replica_quantiles"));
        for (n, scale_ns) in [(7usize, 1e3), (100, 5e6), (1_000, 2e7), (50_000, 3e9), (200_000, 1e11)] {
            let mut h = ReplicaQuantiles::new();
            let mut values: Vec<u64> = (0..n).map(|_| (rng.exponential(1.0) * scale_ns) as u64 + 2_048).collect();
            values.iter().for_each(|&v| h.record(v));
            assert_eq!(h.count(), n as u64);
            for q in [0.0, 0.5, 0.9, 0.95, 0.99, 0.999, 1.0] {
                let exact = order_statistic(&mut values, q);
                let got = h.quantile(q);
                assert!((got / exact - 1.0).abs() <= 1e-3, "n {n} q {q}: {got} vs {exact}");
            }
        }
    }

    /// Small values are exact; an empty histogram has no quantile; the top clamps.
    #[test]
    fn small_values_are_exact_and_the_top_clamps() {
        let mut h = ReplicaQuantiles::new();
        assert!(h.quantile(0.5).is_nan());
        for v in [3, 5, 5, 9, 2_000] {
            h.record(v);
        }
        assert_eq!((h.quantile(0.0), h.quantile(0.5), h.quantile(0.8), h.quantile(1.0)), (3.0, 5.0, 9.0, 2_000.0));
        h.record(u64::MAX);
        assert!((h.quantile(1.0) / HIGHEST_TRACKABLE_NANOS as f64 - 1.0).abs() <= 1e-3);
    }

    /// Replicas of one distribution give distinct quantiles: no snapping to buckets.
    #[test]
    fn replicas_do_not_share_quantiles() {
        let mut p99s: Vec<u64> = (0..30)
            .map(|replica| {
                let mut rng = RngStream::derive(5, replica, StreamPurpose::named("test.replica_quantiles"));
                let mut h = ReplicaQuantiles::new();
                for _ in 0..5_000 {
                    h.record((rng.lognormal(0.0, 1.0) * 5e6) as u64);
                }
                h.quantile(0.99).to_bits()
            })
            .collect();
        p99s.sort_unstable();
        p99s.dedup();
        assert!(p99s.len() >= 28, "{} distinct p99s of 30", p99s.len());
    }

    /// The values kept as they are give bit for bit the quantiles the counters give,
    /// at every quantile, for ties, one-value buckets and values spread over octaves;
    /// and a histogram moves to its counters at value SMALL + 1 without changing them.
    #[test]
    fn kept_values_answer_as_the_counters_do() {
        let mut rng = RngStream::derive(9, 0, StreamPurpose::named("test.replica_quantiles"));
        for (n, scale_ns) in [(1usize, 1e6), (5, 1e3), (64, 5e6), (300, 2e9), (SMALL, 3e7)] {
            let values: Vec<u64> = (0..n)
                .map(|i| if i % 7 == 0 { 50_000_000 } else { (rng.exponential(1.0) * scale_ns) as u64 })
                .collect();
            let mut kept = ReplicaQuantiles::new();
            let mut counted = ReplicaQuantiles::new();
            counted.buckets = Some(Buckets::take());
            for &v in &values {
                kept.record(v);
                counted.count_in_buckets(v);
            }
            assert!(kept.buckets.is_none(), "{n} values are kept as they are");
            for q in [0.0, 0.1, 0.5, 0.9, 0.95, 0.99, 0.999, 1.0] {
                assert_eq!(kept.quantile(q).to_bits(), counted.quantile(q).to_bits(), "n {n} q {q}");
            }
            if n == SMALL {
                kept.record(values[0]);
                counted.count_in_buckets(values[0]);
                assert!(kept.buckets.is_some() && kept.small.is_empty(), "moved to the counters");
                assert_eq!(kept.count(), SMALL as u64 + 1);
                for q in [0.0, 0.5, 0.99, 1.0] {
                    assert_eq!(kept.quantile(q).to_bits(), counted.quantile(q).to_bits(), "after the move, q {q}");
                }
            }
        }
    }

    /// A dropped histogram's counters come back zeroed to the next one on the thread.
    #[test]
    fn buffers_are_reused_zeroed() {
        let mut first = ReplicaQuantiles::new();
        (0..=SMALL as u64).for_each(|i| first.record(1_000_000 + i));
        first.record(7_000_000_000);
        let address = first.buckets.as_ref().unwrap().counts.as_ptr();
        drop(first);
        let mut second = ReplicaQuantiles::new();
        (0..=SMALL).for_each(|_| second.record(1_000));
        assert_eq!(second.buckets.as_ref().unwrap().counts.as_ptr(), address, "the spare was taken");
        assert_eq!((second.count(), second.quantile(1.0)), (SMALL as u64 + 1, 1_000.0));
    }
}
