//! Latency histograms: HdrHistogram with fixed bounds, recorded in nanoseconds.
//!
//! Bounds are fixed up front (1 ns to about 2.8 hours, 3 significant digits). A value
//! above the top is clamped to it, never dropped, and counted in
//! [`LatencyHistogram::saturated`]. Merging adds integer counts, which is commutative:
//! a grid point's merged histogram is identical whatever order or thread its replicas
//! ran in.
//!
//! Recording goes to a compact layout first: HdrHistogram's own buckets (the same
//! index formula, so the same precision), counted in 32 bits instead of 64, by an
//! inlined index computation. Its 140 KB instead of 280 KB is what a model's hot loop
//! touches on every response, and the call into `hdrhistogram` it replaces was 12% of
//! an M/M/c replica. The 32-bit counts are folded into the 64-bit histogram (exact:
//! each bucket's count is recorded at a value of that bucket) when it is read or
//! merged, and before any of them could overflow. Only the range of buckets touched
//! since the last fold is walked.
//!
//! Memory follows use: a new histogram holds nothing. Its first [`SMALL`] values are
//! kept as bucket numbers (4 KB); the 32-bit counts (140 KB) come with the next, and
//! the 64-bit histogram (280 KB) with the first fold or merge. A graph with thousands
//! of entry points, each seeing a few hundred requests a replica, keeps a few KB per
//! histogram instead of 420 KB.
//!
//! Invariants: `count()` is every value recorded or merged; a fold loses nothing;
//! the values since the last fold are in the kept bucket numbers or in the 32-bit
//! counts, never both; the 32-bit counts are allocated at most once.

use std::borrow::Cow;

use hdrhistogram::Histogram;

use crate::time::Nanos;

/// The largest latency tracked exactly (10^13 ns, about 2.8 hours).
pub const HIGHEST_TRACKABLE_NANOS: u64 = 10_000_000_000_000;
/// Significant decimal digits kept per value.
pub const SIGNIFICANT_DIGITS: u8 = 3;

/// HdrHistogram's layout for a lowest value of 1 and 3 significant digits: 2,048
/// sub-buckets (2^11, the smallest power of two above 2 × 10^3), the top half of each
/// power-of-two bucket distinct from the one below.
const SUB_BUCKET_HALF_COUNT_MAGNITUDE: u32 = 10;
const SUB_BUCKET_HALF_COUNT: usize = 1 << SUB_BUCKET_HALF_COUNT_MAGNITUDE;
const SUB_BUCKET_MASK: u64 = (1 << (SUB_BUCKET_HALF_COUNT_MAGNITUDE + 1)) - 1;
const LEADING_ZERO_COUNT_BASE: u32 = 64 - SUB_BUCKET_HALF_COUNT_MAGNITUDE - 1;

/// The bucket `value` falls in: HdrHistogram's `index_for` for these bounds.
#[inline]
pub(crate) fn bucket_of(value: u64) -> usize {
    let bucket = LEADING_ZERO_COUNT_BASE - (value | SUB_BUCKET_MASK).leading_zeros();
    let sub_bucket = (value >> bucket) as usize;
    ((bucket as usize + 1) << SUB_BUCKET_HALF_COUNT_MAGNITUDE) + sub_bucket - SUB_BUCKET_HALF_COUNT
}

/// The lowest value of bucket `index` (HdrHistogram's `value_for`): recording it lands
/// in the same bucket.
pub(crate) fn lowest_value_of(index: usize) -> u64 {
    let bucket = (index >> SUB_BUCKET_HALF_COUNT_MAGNITUDE) as i64 - 1;
    let sub_bucket = (index & (SUB_BUCKET_HALF_COUNT - 1)) + SUB_BUCKET_HALF_COUNT;
    if bucket < 0 {
        (sub_bucket - SUB_BUCKET_HALF_COUNT) as u64
    } else {
        (sub_bucket as u64) << bucket
    }
}

/// The number of buckets of these bounds (the top value's bucket is the last).
pub(crate) fn bucket_count() -> usize {
    bucket_of(HIGHEST_TRACKABLE_NANOS) + 1
}

/// The counts an HdrHistogram of these bounds holds (its `distinct_values`: the
/// power-of-two buckets needed to reach the top, plus one, × 1,024), checked against
/// `hdrhistogram` in a test.
const DISTINCT_VALUES: usize = (TOP_BUCKET_INDEX + 2) << SUB_BUCKET_HALF_COUNT_MAGNITUDE;
/// How many times 2,048 doubles before it passes the top value.
const TOP_BUCKET_INDEX: usize =
    (64 - ((HIGHEST_TRACKABLE_NANOS >> (SUB_BUCKET_HALF_COUNT_MAGNITUDE + 1)).leading_zeros())) as usize;

/// Values a histogram keeps as bucket numbers before it takes its 32-bit counts.
pub const SMALL: usize = 1_024;

/// A latency histogram in nanoseconds.
#[derive(Clone, Debug)]
pub struct LatencyHistogram {
    /// Everything folded or merged so far (`None` until the first fold or merge).
    histogram: Option<Box<Histogram<u64>>>,
    /// Values recorded since the last fold, per bucket (empty until more than
    /// [`SMALL`] values were recorded).
    recent: Box<[u32]>,
    /// Values recorded since the last fold as bucket numbers, unsorted, while
    /// `recent` is empty (at most [`SMALL`]).
    small: Vec<u32>,
    /// How many values `recent` or `small` holds; a fold happens before it could pass
    /// `u32::MAX`, so no bucket can overflow.
    recent_count: u32,
    /// The range of buckets recorded since the last fold (`low > high` when none).
    recent_low: usize,
    recent_high: usize,
    saturated: u64,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        Self::new()
    }
}

impl PartialEq for LatencyHistogram {
    fn eq(&self, other: &Self) -> bool {
        self.saturated == other.saturated && self.hdr() == other.hdr()
    }
}

/// An empty HdrHistogram of these bounds (about 280 KB of 64-bit counts).
fn empty_hdr() -> Histogram<u64> {
    let histogram = Histogram::new_with_bounds(1, HIGHEST_TRACKABLE_NANOS, SIGNIFICANT_DIGITS).expect("valid bounds");
    debug_assert!(bucket_of(HIGHEST_TRACKABLE_NANOS) < histogram.distinct_values());
    histogram
}

impl LatencyHistogram {
    /// How many buckets (distinct values) a histogram has: a bucket number is below it.
    pub const BUCKETS: usize = DISTINCT_VALUES;
    /// The bytes of a histogram's 64-bit counts, once it has folded or merged.
    pub const FOLDED_BYTES: usize = DISTINCT_VALUES * std::mem::size_of::<u64>();
    /// The bytes of its 32-bit counts, once it has recorded more than [`SMALL`] values.
    pub const RECENT_BYTES: usize = DISTINCT_VALUES * std::mem::size_of::<u32>();

    /// An empty histogram. Allocates nothing.
    pub fn new() -> Self {
        LatencyHistogram {
            histogram: None,
            recent: Box::default(),
            small: Vec::new(),
            recent_count: 0,
            recent_low: usize::MAX,
            recent_high: 0,
            saturated: 0,
        }
    }

    /// An empty histogram with its 32-bit counts allocated now (140 KB): for a model's
    /// few histograms in a hot loop that must allocate nothing once warmed up, where
    /// [`Self::new`]'s growth at its 1,025th value could come after the warm-up.
    pub fn with_counts() -> Self {
        LatencyHistogram { recent: vec![0; DISTINCT_VALUES].into_boxed_slice(), ..Self::new() }
    }

    /// Records one latency. Zero is recorded as zero; values above the top are clamped.
    #[inline]
    pub fn record(&mut self, latency: Nanos) {
        if latency > HIGHEST_TRACKABLE_NANOS {
            self.saturated += 1;
        }
        let index = bucket_of(latency.min(HIGHEST_TRACKABLE_NANOS));
        if (self.recent_count == u32::MAX || self.recent.is_empty()) && self.make_room(index) {
            return;
        }
        self.recent[index] += 1;
        self.recent_count += 1;
        self.recent_low = self.recent_low.min(index);
        self.recent_high = self.recent_high.max(index);
    }

    /// Keeps bucket `index` as a number (returns true: recorded), or allocates the
    /// 32-bit counts (moving the kept numbers into them), or folds them (about to
    /// overflow).
    #[inline(never)]
    fn make_room(&mut self, index: usize) -> bool {
        if !self.recent.is_empty() {
            self.fold();
            return false;
        }
        if self.small.len() < SMALL {
            if self.small.capacity() == 0 {
                self.small.reserve_exact(SMALL);
            }
            self.small.push(index as u32);
            self.recent_count += 1;
            self.recent_low = self.recent_low.min(index);
            self.recent_high = self.recent_high.max(index);
            return true;
        }
        self.recent = vec![0; DISTINCT_VALUES].into_boxed_slice();
        for &kept in &self.small {
            self.recent[kept as usize] += 1;
        }
        self.small = Vec::new();
        false
    }

    /// The 64-bit histogram, made on first use.
    fn folded_mut(&mut self) -> &mut Histogram<u64> {
        self.histogram.get_or_insert_with(|| Box::new(empty_hdr()))
    }

    /// Moves the values recorded since the last fold into the 64-bit histogram.
    fn fold(&mut self) {
        if self.recent_count == 0 {
            return;
        }
        let mut folded = self.histogram.take().unwrap_or_else(|| Box::new(empty_hdr()));
        self.add_recent_to(&mut folded);
        self.histogram = Some(folded);
        self.clear_recent();
    }

    /// Adds the values recorded since the last fold into `into`.
    fn add_recent_to(&self, into: &mut Histogram<u64>) {
        if self.recent_count == 0 {
            return;
        }
        if self.recent.is_empty() {
            for &kept in &self.small {
                into.record(lowest_value_of(kept as usize)).expect("a bucket of the same bounds");
            }
        } else {
            Self::add_recent(into, &self.recent[self.recent_low..=self.recent_high], self.recent_low);
        }
    }

    /// Forgets the values recorded since the last fold (zeroing only the 32-bit
    /// counts they touched).
    fn clear_recent(&mut self) {
        if self.recent_count > 0 && !self.recent.is_empty() {
            self.recent[self.recent_low..=self.recent_high].fill(0);
        }
        self.small.clear();
        (self.recent_count, self.recent_low, self.recent_high) = (0, usize::MAX, 0);
    }

    /// Adds `counts` (buckets from `first` on) into `into`.
    fn add_recent(into: &mut Histogram<u64>, counts: &[u32], first: usize) {
        for (offset, &count) in counts.iter().enumerate() {
            if count > 0 {
                into.record_n(lowest_value_of(first + offset), count as u64).expect("a bucket of the same bounds");
            }
        }
    }

    /// Adds every count of `other` into `self`.
    pub fn merge(&mut self, other: &LatencyHistogram) {
        // A replica's histogram has usually never folded: adding its empty 64-bit
        // counts would walk all 35,000 of them.
        if let Some(folded) = other.histogram.as_deref().filter(|h| !h.is_empty()) {
            self.folded_mut().add(folded).expect("histograms share bounds");
        }
        if other.recent_count > 0 {
            let into = self.histogram.get_or_insert_with(|| Box::new(empty_hdr()));
            other.add_recent_to(into);
        }
        self.saturated += other.saturated;
    }

    /// Adds a histogram read back from its serialised form (a shard's partial), with
    /// the count of values it clamped to the top.
    pub fn merge_hdr(&mut self, other: &Histogram<u64>, saturated: u64) {
        self.folded_mut().add(other).expect("histograms share bounds");
        self.saturated += saturated;
    }

    /// The bytes its counts occupy: the 64-bit histogram, plus the 32-bit counts once
    /// it has recorded (a worker's accumulator; a point's merged total never records).
    pub fn footprint_bytes(&self) -> usize {
        self.histogram.as_ref().map_or(0, |_| Self::FOLDED_BYTES)
            + std::mem::size_of_val(&*self.recent)
            + self.small.capacity() * std::mem::size_of::<u32>()
    }

    /// Number of values recorded.
    pub fn count(&self) -> u64 {
        self.histogram.as_ref().map_or(0, |h| h.len()) + self.recent_count as u64
    }

    /// Number of values that were above the trackable range and clamped.
    pub fn saturated(&self) -> u64 {
        self.saturated
    }

    /// The HdrHistogram of everything recorded, for quantiles and serialisation:
    /// borrowed when nothing is waiting to be folded (after [`Self::settle`], or for a
    /// merged total), else a folded copy (a new empty one for a histogram that never
    /// recorded).
    pub fn hdr(&self) -> Cow<'_, Histogram<u64>> {
        match (&self.histogram, self.recent_count) {
            (Some(folded), 0) => Cow::Borrowed(folded),
            (folded, _) => {
                let mut folded = folded.as_deref().cloned().unwrap_or_else(empty_hdr);
                self.add_recent_to(&mut folded);
                Cow::Owned(folded)
            }
        }
    }

    /// Folds what was recorded into the 64-bit histogram, so that [`Self::hdr`]
    /// borrows instead of copying.
    pub fn settle(&mut self) {
        self.fold();
    }

    /// Calls `f(bucket, count)` for every bucket holding values (a bucket may come
    /// twice: once from the folded counts, once from those recorded since).
    pub fn for_each_bucket(&self, mut f: impl FnMut(usize, u64)) {
        // A replica's histogram has usually never folded: its iterator would still
        // walk all 35,000 empty 64-bit counts.
        if let Some(folded) = self.histogram.as_deref().filter(|h| !h.is_empty()) {
            for bucket in folded.iter_recorded() {
                f(bucket_of(bucket.value_iterated_to()), bucket.count_at_value());
            }
        }
        if self.recent_count > 0 && self.recent.is_empty() {
            // Each kept bucket once, with its count.
            let mut kept = self.small.clone();
            kept.sort_unstable();
            for run in kept.chunk_by(|a, b| a == b) {
                f(run[0] as usize, run.len() as u64);
            }
        } else if self.recent_count > 0 {
            for (offset, &count) in self.recent[self.recent_low..=self.recent_high].iter().enumerate() {
                if count > 0 {
                    f(self.recent_low + offset, count as u64);
                }
            }
        }
    }

    /// The value HdrHistogram reports for a quantile whose rank falls in bucket
    /// `index`: the bucket's highest equivalent value (its lowest for the 0 quantile).
    pub fn bucket_reported_value(index: usize, lowest: bool) -> u64 {
        if lowest {
            lowest_value_of(index)
        } else {
            // The formula holds one past the last bucket too: the top bucket's range.
            lowest_value_of(index + 1) - 1
        }
    }

    /// A histogram of `count` values in each given bucket (as [`Self::for_each_bucket`]
    /// lists them) and `saturated` clamped ones: the exact inverse.
    pub fn from_buckets(buckets: impl IntoIterator<Item = (usize, u64)>, saturated: u64) -> Self {
        let mut histogram = LatencyHistogram::new();
        for (index, count) in buckets {
            histogram.folded_mut().record_n(lowest_value_of(index), count).expect("a bucket of the same bounds");
        }
        histogram.saturated = saturated;
        histogram
    }

    /// Empties the histogram, keeping its memory. Cheap after a replica that never
    /// folded: only the 32-bit counts it touched are zeroed.
    pub fn reset(&mut self) {
        self.clear_recent();
        if let Some(folded) = self.histogram.as_deref_mut().filter(|h| !h.is_empty()) {
            folded.reset();
        }
        self.saturated = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::{RngStream, StreamPurpose};

    /// The counts' length computed here is HdrHistogram's own.
    #[test]
    fn distinct_values_match_hdrhistogram() {
        assert_eq!(empty_hdr().distinct_values(), DISTINCT_VALUES);
        assert!(bucket_count() <= DISTINCT_VALUES);
    }

    /// A histogram allocates as it grows: nothing new, 4 KB of bucket numbers up to
    /// SMALL values, the 32-bit counts past them, the 64-bit ones at a fold; and the
    /// same values read the same at every stage (count, buckets, HdrHistogram, merge).
    #[test]
    fn memory_follows_use_and_every_stage_reads_the_same() {
        let mut rng = RngStream::derive(4, 0, StreamPurpose::named("test.histogram"));
        let values: Vec<u64> = (0..3 * SMALL).map(|_| (rng.exponential(1.0) * 2e7) as u64).collect();
        let mut h = LatencyHistogram::new();
        assert_eq!(h.footprint_bytes(), 0);
        assert!(h.hdr().is_empty());
        let mut reference = empty_hdr();
        for (n, &v) in values.iter().enumerate() {
            h.record(v);
            reference.record(lowest_value_of(bucket_of(v))).unwrap();
            if [1, SMALL, SMALL + 1, 3 * SMALL].contains(&(n + 1)) {
                let expected = if n < SMALL { SMALL * 4 } else { LatencyHistogram::RECENT_BYTES };
                assert_eq!(h.footprint_bytes(), expected, "after {} values", n + 1);
                assert_eq!(h.count(), n as u64 + 1);
                assert_eq!(*h.hdr(), reference, "after {} values", n + 1);
                let mut buckets = Vec::new();
                h.for_each_bucket(|b, c| buckets.push((b, c)));
                assert!(buckets.windows(2).all(|w| w[0].0 < w[1].0), "each bucket once, in order");
                assert_eq!(LatencyHistogram::from_buckets(buckets, 0).hdr(), h.hdr());
                let mut merged = LatencyHistogram::new();
                merged.merge(&h);
                assert_eq!(merged.hdr(), h.hdr());
            }
        }
        h.settle();
        assert_eq!(h.footprint_bytes(), LatencyHistogram::RECENT_BYTES + LatencyHistogram::FOLDED_BYTES);
        assert_eq!(*h.hdr(), reference);
        h.reset();
        assert_eq!((h.count(), h.hdr().is_empty()), (0, true));
    }

    #[test]
    fn merge_is_order_independent_and_clamps_saturate() {
        let mut a = LatencyHistogram::new();
        let mut b = LatencyHistogram::new();
        for v in [1, 10, 1_000_000, 5_000_000_000] {
            a.record(v);
        }
        b.record(HIGHEST_TRACKABLE_NANOS * 2);
        let mut ab = a.clone();
        ab.merge(&b);
        let mut ba = b.clone();
        ba.merge(&a);
        assert_eq!(ab.count(), 5);
        assert_eq!(ab.saturated(), 1);
        assert_eq!(ab.hdr(), ba.hdr());
        assert!(ab.hdr().max() >= HIGHEST_TRACKABLE_NANOS / 1001 * 1000);
    }

    /// The compact layout is HdrHistogram's to the bucket: values from 0 to the top
    /// (every power of two and its neighbours, and random values over every magnitude)
    /// recorded here and straight into an HdrHistogram of the same bounds give equal
    /// histograms and equal V2 bytes, read before a fold, after one, and merged.
    #[test]
    fn the_compact_layout_is_hdrhistograms_to_the_bucket() {
        let mut reference = Histogram::<u64>::new_with_bounds(1, HIGHEST_TRACKABLE_NANOS, SIGNIFICANT_DIGITS).unwrap();
        let mut ours = LatencyHistogram::new();
        let mut values: Vec<u64> = vec![0, 1, 2, 2047, 2048, 2049, 4095, 4096, HIGHEST_TRACKABLE_NANOS];
        for shift in 0..44 {
            let power = 1u64 << shift;
            values.extend([power - 1, power, power + 1, power + power / 3]);
        }
        let mut rng = RngStream::derive(9, 0, StreamPurpose::named("test.histogram"));
        values.extend((0..100_000).map(|_| {
            let magnitude = rng.below(44);
            (1u64 << magnitude) + rng.below(1u64 << magnitude)
        }));
        for &v in values.iter().filter(|&&v| v <= HIGHEST_TRACKABLE_NANOS) {
            assert_eq!(lowest_value_of(bucket_of(v)), reference.lowest_equivalent(v), "value {v}");
            reference.record(v).unwrap();
            ours.record(v);
        }
        let v2 = |h: &Histogram<u64>| {
            let mut bytes = Vec::new();
            use hdrhistogram::serialization::Serializer;
            hdrhistogram::serialization::V2Serializer::new().serialize(h, &mut bytes).unwrap();
            bytes
        };
        assert_eq!(*ours.hdr(), reference, "read before a fold");
        assert_eq!(v2(&ours.hdr()), v2(&reference));
        assert_eq!((ours.hdr().min(), ours.hdr().max()), (reference.min(), reference.max()));
        let mut merged = LatencyHistogram::new();
        merged.merge(&ours);
        ours.settle();
        assert!(matches!(ours.hdr(), Cow::Borrowed(_)), "settled: read without a copy");
        assert_eq!(*ours.hdr(), reference, "after a fold");
        assert_eq!(*merged.hdr(), reference, "merged from the unfolded counts");
        assert_eq!(ours.count(), reference.len());
    }

    /// A fold happens before a 32-bit count could overflow: forced here by starting
    /// the counter near its limit.
    #[test]
    fn counts_fold_before_they_could_overflow() {
        let mut h = LatencyHistogram::new();
        // Past the kept bucket numbers, into the 32-bit counts.
        (0..=SMALL).for_each(|_| h.record(5));
        let real = SMALL as u64 + 1;
        h.recent_count = u32::MAX - 2;
        for _ in 0..5 {
            h.record(5);
        }
        // The fold moved the real records (and two more) and the counter's pretended
        // ones are gone from the 32-bit side: what remains there is the 3 records after
        // the fold.
        assert_eq!(h.recent_count, 3);
        assert_eq!(h.histogram.as_ref().unwrap().count_at(5), real + 2);
        assert_eq!(h.hdr().count_at(5), real + 5);
    }

    #[test]
    fn reset_empties_both_layouts() {
        let mut h = LatencyHistogram::new();
        h.record(1_000);
        h.record(HIGHEST_TRACKABLE_NANOS + 1);
        h.reset();
        assert_eq!((h.count(), h.saturated()), (0, 0));
        h.record(7);
        assert_eq!(h.hdr().count_at(7), 1);
    }
}
