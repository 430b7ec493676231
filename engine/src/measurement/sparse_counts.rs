//! Counts by key kept only for the keys that occur: sorted (key, count) pairs. What
//! a graph's entry point counts its failures by root cause in (service × failure, or
//! service): with thousands of services an entry point sees a handful of causes, and
//! a dense table per entry point would be entries × services — 500 MB a replica at
//! 5,000 services.
//!
//! Cost: a binary search per count; a new key inserts once (so after warm-up, only a
//! cause never seen before allocates).
//!
//! Invariants (asserted in debug builds): keys are strictly ascending; every count
//! is positive.

/// Counts by `u32` key, sparse.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SparseCounts {
    pairs: Vec<(u32, u64)>,
}

impl SparseCounts {
    /// Counts one more of `key`.
    #[inline]
    pub fn add(&mut self, key: u32) {
        match self.pairs.binary_search_by_key(&key, |&(k, _)| k) {
            Ok(at) => self.pairs[at].1 += 1,
            Err(at) => self.pairs.insert(at, (key, 1)),
        }
        debug_assert!(self.pairs.windows(2).all(|w| w[0].0 < w[1].0));
    }

    /// The count of `key` (0 if it never occurred).
    pub fn get(&self, key: u32) -> u64 {
        self.pairs.binary_search_by_key(&key, |&(k, _)| k).map_or(0, |at| self.pairs[at].1)
    }

    /// Every (key, count) that occurred, by ascending key.
    pub fn iter(&self) -> impl Iterator<Item = (u32, u64)> + '_ {
        self.pairs.iter().copied()
    }

    /// The sum of every count.
    pub fn total(&self) -> u64 {
        self.pairs.iter().map(|&(_, count)| count).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counts land on their keys in any order; keys never counted read 0; the pairs
    /// stay sorted and hold only keys that occurred.
    #[test]
    fn counts_only_keys_that_occur() {
        let mut counts = SparseCounts::default();
        for key in [40_000, 3, 3, 17, 40_000, 3, 0] {
            counts.add(key);
        }
        assert_eq!((counts.get(3), counts.get(40_000), counts.get(0), counts.get(17)), (3, 2, 1, 1));
        assert_eq!(counts.get(4), 0);
        assert_eq!(counts.iter().collect::<Vec<_>>(), vec![(0, 1), (3, 3), (17, 1), (40_000, 2)]);
        assert_eq!(counts.total(), 7);
    }
}
