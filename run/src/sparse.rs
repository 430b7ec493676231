//! A latency histogram kept sparse: the buckets that hold values and the values
//! clamped to the top. What a grid point keeps per batch of replicas while it runs: a
//! batch touches a few thousand of the 36,000 buckets, so this is tens of kilobytes
//! where a dense histogram is 280 KB — ten batches per latency, every latency of every
//! live grid point.
//!
//! Up to [`SMALL_PAIRS`] buckets it is a sorted list of (bucket, count) pairs (16 bytes
//! each: a big graph's thousands of latencies, most seeing a few requests, stay
//! small); past that, pages of [`PAGE`] buckets taken as values arrive, found through
//! an index of every page. Adding a replica then costs one indexed add per bucket it
//! recorded into, whatever the batch holds: the sorted list alone merged every
//! replica's buckets into a new list as long as the batch's (that merge was a tenth
//! of an `llm-stack` run's time).
//!
//! Invariants: the list is sorted, each bucket once, every count positive; a page is
//! in `pages` only once a count in it is non-zero, and `index` names each page once;
//! [`SparseHistogram::pairs`] gives exactly the non-zero buckets in order either way,
//! so [`SparseHistogram::to_histogram`] gives exactly the histogram the counts were
//! read from (integer counts, so neither order nor split changes a bit), and equality
//! is of those pairs, not of the layout.

use stampede_engine::LatencyHistogram;

/// Buckets per page (256 bytes of counts).
pub const PAGE: usize = 32;

/// Buckets a histogram keeps as a sorted list before it takes pages (8 KB of pairs;
/// the index of pages alone is 2.2 KB).
pub const SMALL_PAIRS: usize = 512;

/// Pages a histogram may hold: every bucket's.
const PAGES: usize = LatencyHistogram::BUCKETS.div_ceil(PAGE);
const _: () = assert!(PAGES < u16::MAX as usize, "a page's number fits the index");

#[derive(Clone, Debug, Default)]
pub struct SparseHistogram {
    counts: Counts,
    saturated: u64,
}

/// The non-zero buckets' counts, in one of two layouts.
#[derive(Clone, Debug)]
enum Counts {
    /// Sorted by bucket, at most [`SMALL_PAIRS`].
    Pairs(Vec<(u32, u64)>),
    Paged {
        /// Per page of buckets, 1 + where its counts sit in `pages`; 0: none yet
        /// ([`PAGES`] long).
        index: Vec<u16>,
        pages: Vec<[u64; PAGE]>,
    },
}

impl Default for Counts {
    fn default() -> Self {
        Counts::Pairs(Vec::new())
    }
}

impl PartialEq for SparseHistogram {
    fn eq(&self, other: &Self) -> bool {
        self.saturated == other.saturated && self.pairs().eq(other.pairs())
    }
}

impl Eq for SparseHistogram {}

impl SparseHistogram {
    /// Adds every value of `histogram`.
    pub fn add(&mut self, histogram: &LatencyHistogram) {
        histogram.for_each_bucket(|bucket, count| self.add_count(bucket, count));
        self.saturated += histogram.saturated();
    }

    /// Adds every value of `other`.
    pub fn add_sparse(&mut self, other: &SparseHistogram) {
        other.pairs().for_each(|(bucket, count)| self.add_count(bucket as usize, count));
        self.saturated += other.saturated;
    }

    /// Adds `count` values in `bucket` (a known bucket; a count of 0 changes nothing).
    fn add_count(&mut self, bucket: usize, count: u64) {
        debug_assert!(bucket < LatencyHistogram::BUCKETS, "bucket {bucket}");
        if count == 0 {
            return;
        }
        match &mut self.counts {
            Counts::Pairs(pairs) => match pairs.binary_search_by_key(&(bucket as u32), |p| p.0) {
                Ok(at) => pairs[at].1 += count,
                Err(_) if pairs.len() == SMALL_PAIRS => {
                    let pairs = std::mem::take(pairs);
                    self.counts = Counts::Paged { index: vec![0; PAGES], pages: Vec::new() };
                    pairs.into_iter().for_each(|(b, c)| self.add_count(b as usize, c));
                    self.add_count(bucket, count);
                }
                Err(at) => pairs.insert(at, (bucket as u32, count)),
            },
            Counts::Paged { index, pages } => {
                let slot = &mut index[bucket / PAGE];
                if *slot == 0 {
                    pages.push([0; PAGE]);
                    *slot = pages.len() as u16;
                }
                pages[*slot as usize - 1][bucket % PAGE] += count;
            }
        }
    }

    /// The non-zero buckets and their counts, in bucket order.
    fn pairs(&self) -> impl Iterator<Item = (u32, u64)> + '_ {
        let (list, paged) = match &self.counts {
            Counts::Pairs(pairs) => (Some(pairs), None),
            Counts::Paged { index, pages } => (None, Some((index, pages))),
        };
        let paged = paged.into_iter().flat_map(|(index, pages)| {
            index.iter().enumerate().filter(|(_, &slot)| slot > 0).flat_map(move |(page, &slot)| {
                let counts = &pages[slot as usize - 1];
                (0..PAGE).filter(move |&b| counts[b] > 0).map(move |b| ((page * PAGE + b) as u32, counts[b]))
            })
        });
        list.into_iter().flatten().copied().chain(paged)
    }

    /// Values that were above the trackable range and clamped.
    pub fn saturated(&self) -> u64 {
        self.saturated
    }

    /// The `q` quantile in nanoseconds as HdrHistogram's `value_at_quantile` gives it
    /// for the same counts (the rank ⌈q·n⌉, at least 1; its bucket's highest
    /// equivalent value), without making the histogram dense; NaN when empty.
    pub fn value_at_quantile(&self, q: f64) -> f64 {
        let total = self.count();
        if total == 0 {
            return f64::NAN;
        }
        let rank = ((q.min(1.0) * total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (bucket, count) in self.pairs() {
            seen += count;
            if seen >= rank {
                return LatencyHistogram::bucket_reported_value(bucket as usize, q == 0.0) as f64;
            }
        }
        unreachable!("rank ≤ total")
    }

    /// The pairs and the clamped count as bytes (little-endian: the clamped count,
    /// then u32 bucket and u64 count per pair, in bucket order): a shard's or a
    /// checkpoint piece's histogram, exact and without the dense layout.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&self.saturated.to_le_bytes());
        for (bucket, count) in self.pairs() {
            bytes.extend_from_slice(&bucket.to_le_bytes());
            bytes.extend_from_slice(&count.to_le_bytes());
        }
        bytes
    }

    /// Reads [`Self::to_bytes`] back; `None` if the bytes are not of that layout
    /// (pairs out of order, a bucket twice, a zero count, an unknown bucket).
    pub fn from_bytes(bytes: &[u8]) -> Option<SparseHistogram> {
        let (saturated, pairs) = bytes.split_first_chunk::<8>()?;
        if !pairs.len().is_multiple_of(12) {
            return None;
        }
        let mut histogram = SparseHistogram { saturated: u64::from_le_bytes(*saturated), ..Self::default() };
        let mut previous: Option<u32> = None;
        for pair in pairs.chunks_exact(12) {
            let (bucket, count) = pair.split_at(4);
            let bucket = u32::from_le_bytes(bucket.try_into().expect("4 bytes"));
            let count = u64::from_le_bytes(count.try_into().expect("8 bytes"));
            let in_order = previous.is_none_or(|p| p < bucket);
            // A constant, not an empty histogram's count: that built 280 KB of zeros
            // per call, 10% of llm-stack's instructions as the CLI ran it.
            if !in_order || count == 0 || bucket as usize >= LatencyHistogram::BUCKETS {
                return None;
            }
            histogram.add_count(bucket as usize, count);
            previous = Some(bucket);
        }
        Some(histogram)
    }

    /// Values held.
    pub fn count(&self) -> u64 {
        match &self.counts {
            Counts::Pairs(pairs) => pairs.iter().map(|(_, count)| count).sum(),
            Counts::Paged { pages, .. } => pages.iter().flatten().sum(),
        }
    }

    /// The dense histogram (280 KB while it lives).
    pub fn to_histogram(&self) -> LatencyHistogram {
        LatencyHistogram::from_buckets(self.pairs().map(|(b, c)| (b as usize, c)), self.saturated)
    }

    /// Bytes held.
    pub fn footprint_bytes(&self) -> usize {
        match &self.counts {
            Counts::Pairs(pairs) => pairs.capacity() * std::mem::size_of::<(u32, u64)>(),
            Counts::Paged { index, pages } => {
                index.capacity() * std::mem::size_of::<u16>() + pages.capacity() * std::mem::size_of::<[u64; PAGE]>()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sparse sums are exactly the dense ones, whatever the order of adding.
    #[test]
    fn sparse_sums_are_the_dense_ones() {
        let (mut a, mut b) = (LatencyHistogram::new(), LatencyHistogram::new());
        for v in [0u64, 1, 5_000, 5_001, 1_000_000, 30_000_000_000] {
            a.record(v);
        }
        b.record(5_000);
        b.record(20_000_000_000_000);
        b.settle();
        b.record(7);
        let mut sparse = SparseHistogram::default();
        sparse.add(&a);
        sparse.add(&b);
        let mut other = SparseHistogram::default();
        other.add(&b);
        other.add(&a);
        assert_eq!(sparse, other);
        let mut dense = a.clone();
        dense.merge(&b);
        assert_eq!(sparse.to_histogram(), dense);
        assert_eq!(sparse.count(), 9);
        assert_eq!(sparse.to_histogram().saturated(), 1);
        let mut twice = sparse.clone();
        twice.add_sparse(&sparse);
        assert_eq!(twice.count(), 18);
        assert!(sparse.footprint_bytes() < 1_000);
        assert_eq!(SparseHistogram::from_bytes(&sparse.to_bytes()), Some(sparse.clone()));
        assert_eq!(SparseHistogram::from_bytes(&[0; 7]), None);
    }

    /// Past [`SMALL_PAIRS`] buckets the paged layout holds the same counts as the
    /// list: sums in any order, bytes, quantiles and the dense histogram all agree with
    /// a dense merge, and a histogram read back from bytes equals the one written.
    #[test]
    fn the_paged_layout_holds_what_the_list_held() {
        use stampede_engine::kernel::rng::{RngStream, StreamPurpose};
        let mut rng = RngStream::derive(5, 0, StreamPurpose::named("test.sparse.paged"));
        let replicas: Vec<LatencyHistogram> = (0..12)
            .map(|_| {
                let mut h = LatencyHistogram::new();
                for _ in 0..300 {
                    h.record(rng.below(1 << 30));
                }
                h
            })
            .collect();
        let (mut forward, mut backward, mut dense) =
            (SparseHistogram::default(), SparseHistogram::default(), LatencyHistogram::new());
        replicas.iter().for_each(|h| forward.add(h));
        replicas.iter().rev().for_each(|h| backward.add(h));
        replicas.iter().for_each(|h| dense.merge(h));
        assert!(matches!(forward.counts, Counts::Paged { .. }), "3,600 values spread over 2^30 pass the list");
        assert_eq!(forward, backward);
        assert_eq!(forward.to_histogram(), dense);
        assert_eq!(forward.count(), 3_600);
        let mut small = SparseHistogram::default();
        small.add(&replicas[0]);
        assert!(matches!(small.counts, Counts::Pairs(_)));
        let mut mixed = small.clone();
        replicas[1..].iter().for_each(|h| mixed.add(h));
        assert_eq!(mixed, forward);
        let back = SparseHistogram::from_bytes(&forward.to_bytes()).expect("round trip");
        assert_eq!((&back, back.to_bytes()), (&forward, forward.to_bytes()));
        let hdr = dense.hdr();
        for q in [0.0, 0.5, 0.99, 1.0] {
            assert_eq!(forward.value_at_quantile(q), hdr.value_at_quantile(q) as f64, "q{q}");
        }
        let pairs: Vec<(u32, u64)> = forward.pairs().collect();
        assert!(pairs.windows(2).all(|w| w[0].0 < w[1].0) && pairs.iter().all(|p| p.1 > 0));
        let bad = [
            &0u64.to_le_bytes()[..],
            &7u32.to_le_bytes(),
            &1u64.to_le_bytes(),
            &3u32.to_le_bytes(),
            &1u64.to_le_bytes(),
        ]
        .concat();
        assert_eq!(SparseHistogram::from_bytes(&bad), None, "pairs out of order");
    }

    /// Quantiles read off the pairs are HdrHistogram's own, to the nanosecond.
    #[test]
    fn sparse_quantiles_are_hdrhistograms() {
        use stampede_engine::kernel::rng::{RngStream, StreamPurpose};
        let mut rng = RngStream::derive(3, 0, StreamPurpose::named("test.sparse"));
        for trial in 0..20 {
            let mut dense = LatencyHistogram::new();
            for _ in 0..(1 + trial * 97) {
                let magnitude = rng.below(44);
                dense.record((1u64 << magnitude) + rng.below(1u64 << magnitude));
            }
            dense.record(0);
            let mut sparse = SparseHistogram::default();
            sparse.add(&dense);
            let hdr = dense.hdr();
            for q in [0.0, 0.001, 0.25, 0.5, 0.9, 0.99, 0.999, 0.9999, 1.0] {
                assert_eq!(sparse.value_at_quantile(q), hdr.value_at_quantile(q) as f64, "trial {trial} q{q}");
            }
        }
    }
}
