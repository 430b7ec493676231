//! A latency histogram kept sparse: the buckets that hold values, as sorted (bucket,
//! count) pairs, and the values clamped to the top. What a grid point keeps per batch
//! of replicas while it runs: a batch touches a few thousand of the 36,000 buckets, so
//! this is tens of kilobytes where a dense histogram is 280 KB — ten batches per
//! latency, every latency of every live grid point.
//!
//! Invariants: pairs are sorted by bucket, each bucket once, every count positive;
//! [`SparseHistogram::to_histogram`] gives exactly the histogram the pairs were read
//! from (integer counts, so neither order nor split changes a bit).

use stampede_engine::LatencyHistogram;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SparseHistogram {
    buckets: Vec<(u32, u64)>,
    saturated: u64,
}

impl SparseHistogram {
    /// Adds every value of `histogram`.
    pub fn add(&mut self, histogram: &LatencyHistogram) {
        let mut incoming = Vec::new();
        histogram.for_each_bucket(|bucket, count| incoming.push((bucket as u32, count)));
        incoming.sort_unstable_by_key(|(bucket, _)| *bucket);
        self.merge_sorted(&incoming);
        self.saturated += histogram.saturated();
    }

    /// Adds every value of `other`.
    pub fn add_sparse(&mut self, other: &SparseHistogram) {
        self.merge_sorted(&other.buckets);
        self.saturated += other.saturated;
    }

    /// Merges sorted pairs (a bucket may repeat in `incoming`) into the own: in place
    /// for buckets already held (most, once a batch has seen a few replicas), and by
    /// one merge of the rest.
    fn merge_sorted(&mut self, incoming: &[(u32, u64)]) {
        let mut new: Vec<(u32, u64)> = Vec::new();
        let mut at = 0;
        for &(bucket, count) in incoming {
            // Both sorted: one cursor walks the own pairs once.
            while at < self.buckets.len() && self.buckets[at].0 < bucket {
                at += 1;
            }
            if at < self.buckets.len() && self.buckets[at].0 == bucket {
                self.buckets[at].1 += count;
            } else {
                match new.last_mut() {
                    Some((last, total)) if *last == bucket => *total += count,
                    _ => new.push((bucket, count)),
                }
            }
        }
        if new.is_empty() {
            return;
        }
        let incoming = new.as_slice();
        let mut merged = Vec::with_capacity(self.buckets.len() + incoming.len());
        let (mut mine, mut theirs) = (self.buckets.iter().peekable(), incoming.iter().peekable());
        loop {
            let next = match (mine.peek(), theirs.peek()) {
                (Some(a), Some(b)) if a.0 <= b.0 => *mine.next().expect("peeked"),
                (_, Some(_)) => *theirs.next().expect("peeked"),
                (Some(_), None) => *mine.next().expect("peeked"),
                (None, None) => break,
            };
            match merged.last_mut() {
                Some((bucket, count)) if *bucket == next.0 => *count += next.1,
                _ => merged.push(next),
            }
        }
        debug_assert!(merged.windows(2).all(|w| w[0].0 < w[1].0) && merged.iter().all(|(_, c)| *c > 0));
        self.buckets = merged;
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
        for &(bucket, count) in &self.buckets {
            seen += count;
            if seen >= rank {
                return LatencyHistogram::bucket_reported_value(bucket as usize, q == 0.0) as f64;
            }
        }
        unreachable!("rank ≤ total")
    }

    /// The pairs and the clamped count as bytes (little-endian: the clamped count,
    /// then u32 bucket and u64 count per pair): a shard's or a checkpoint piece's
    /// histogram, exact and without the dense layout.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(8 + 12 * self.buckets.len());
        bytes.extend_from_slice(&self.saturated.to_le_bytes());
        for (bucket, count) in &self.buckets {
            bytes.extend_from_slice(&bucket.to_le_bytes());
            bytes.extend_from_slice(&count.to_le_bytes());
        }
        bytes
    }

    /// Reads [`Self::to_bytes`] back; `None` if the bytes are not of that layout.
    pub fn from_bytes(bytes: &[u8]) -> Option<SparseHistogram> {
        let (saturated, pairs) = bytes.split_first_chunk::<8>()?;
        if !pairs.len().is_multiple_of(12) {
            return None;
        }
        let buckets: Vec<(u32, u64)> = pairs
            .chunks_exact(12)
            .map(|pair| {
                let (bucket, count) = pair.split_at(4);
                (
                    u32::from_le_bytes(bucket.try_into().expect("4 bytes")),
                    u64::from_le_bytes(count.try_into().expect("8 bytes")),
                )
            })
            .collect();
        let sorted = buckets.windows(2).all(|w| w[0].0 < w[1].0) && buckets.iter().all(|(_, c)| *c > 0);
        // A constant, not an empty histogram's count: that built 280 KB of zeros per
        // call, 10% of llm-stack's instructions as the CLI ran it.
        let known = buckets.last().is_none_or(|(b, _)| (*b as usize) < LatencyHistogram::BUCKETS);
        (sorted && known).then_some(SparseHistogram { buckets, saturated: u64::from_le_bytes(*saturated) })
    }

    /// Values held.
    pub fn count(&self) -> u64 {
        self.buckets.iter().map(|(_, count)| count).sum()
    }

    /// The dense histogram (280 KB while it lives).
    pub fn to_histogram(&self) -> LatencyHistogram {
        LatencyHistogram::from_buckets(self.buckets.iter().map(|&(b, c)| (b as usize, c)), self.saturated)
    }

    /// Bytes held.
    pub fn footprint_bytes(&self) -> usize {
        self.buckets.capacity() * std::mem::size_of::<(u32, u64)>()
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
