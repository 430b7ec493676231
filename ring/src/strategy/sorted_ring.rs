//! A sorted ring of 32-bit points, each owned by a node: the seed's ring (one point
//! per node), the ring with virtual nodes, and the base of bounded loads and
//! multi-probe. A key goes to the first point at or after its position, wrapping.
//!
//! Lookup is a bucket index (the top bits of a position → the first point in that
//! bucket) followed by a short scan, so it costs a couple of cache lines rather than
//! a binary search's ~17 dependent probes at 150,000 points.
//!
//! Collisions (two points at one position — likely beyond ~77,000 points on a 32-bit
//! ring) are ordered by node name, then virtual-node number: the first owns the
//! position and the others own empty arcs. Deterministic, and said in docs/src/ring.md.

/// The sorted points and their owners (indexes into the node list).
#[derive(Clone, Debug)]
pub struct SortedRing {
    positions: Vec<u32>,
    owners: Vec<u32>,
    /// `index[b]` = the first point whose position's top `bits` bits are ≥ b.
    index: Vec<u32>,
    shift: u32,
}

impl SortedRing {
    /// `points` as (position, owner, tie-break rank); sorted here.
    pub fn new(mut points: Vec<(u32, u32, u64)>) -> SortedRing {
        points.sort_unstable_by_key(|&(position, _, rank)| (position, rank));
        let bits = (usize::BITS - points.len().max(1).leading_zeros()).clamp(4, 16);
        let shift = 32 - bits;
        let mut index = vec![0u32; (1usize << bits) + 1];
        let mut p = 0usize;
        for (b, slot) in index.iter_mut().enumerate() {
            while p < points.len() && ((points[p].0 >> shift) as usize) < b {
                p += 1;
            }
            *slot = p as u32;
        }
        SortedRing {
            positions: points.iter().map(|p| p.0).collect(),
            owners: points.iter().map(|p| p.1).collect(),
            index,
            shift,
        }
    }

    pub fn len(&self) -> usize {
        self.positions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.positions.is_empty()
    }

    /// The index of the first point at or after `position`, wrapping to 0.
    #[inline]
    pub fn successor(&self, position: u32) -> usize {
        let b = (position >> self.shift) as usize;
        let mut i = self.index[b] as usize;
        let end = self.index[b + 1] as usize;
        while i < end && self.positions[i] < position {
            i += 1;
        }
        if i == self.positions.len() {
            0
        } else {
            i
        }
    }

    #[inline]
    pub fn owner_at(&self, point: usize) -> u32 {
        self.owners[point]
    }

    #[inline]
    pub fn position_at(&self, point: usize) -> u32 {
        self.positions[point]
    }

    /// The owner of `position`.
    #[inline]
    pub fn lookup(&self, position: u32) -> u32 {
        self.owners[self.successor(position)]
    }

    /// The arc a position falls in: (the previous point, the owning point], as positions.
    pub fn arc(&self, position: u32) -> (u32, u32) {
        let i = self.successor(position);
        let previous = if i == 0 { self.positions[self.len() - 1] } else { self.positions[i - 1] };
        (previous, self.positions[i])
    }

    /// Each owner's share of the ring (`owners` of them).
    pub fn shares(&self, owners: usize) -> Vec<f64> {
        let mut shares = vec![0.0; owners];
        let n = self.len();
        for i in 0..n {
            let previous = if i == 0 { self.positions[n - 1] } else { self.positions[i - 1] };
            let arc = if n == 1 { 4_294_967_296.0 } else { self.positions[i].wrapping_sub(previous) as f64 };
            shares[self.owners[i] as usize] += arc / 4_294_967_296.0;
        }
        shares
    }

    /// The arcs `owner` holds, as (previous point, its point] pairs.
    pub fn arcs_of(&self, owner: u32) -> Vec<(u32, u32)> {
        let n = self.len();
        (0..n)
            .filter(|&i| self.owners[i] == owner)
            .map(|i| (if i == 0 { self.positions[n - 1] } else { self.positions[i - 1] }, self.positions[i]))
            .collect()
    }

    /// Points as (position, owner).
    pub fn points(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        self.positions.iter().copied().zip(self.owners.iter().copied())
    }

    pub fn memory_bytes(&self) -> usize {
        (self.positions.len() + self.owners.len() + self.index.len()) * 4
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bucket index answers exactly as a binary search over the sorted points.
    #[test]
    fn the_index_agrees_with_a_binary_search() {
        let mut state = 1u64;
        let mut next = || {
            state = stampede_kernel::rng::mix64(state);
            state
        };
        for size in [1usize, 2, 7, 100, 5000] {
            let points: Vec<(u32, u32, u64)> = (0..size).map(|i| ((next() >> 32) as u32, i as u32, i as u64)).collect();
            let ring = SortedRing::new(points);
            for probe in (0..2000).map(|_| (next() >> 32) as u32).chain([0, u32::MAX]) {
                let expected = ring.positions.partition_point(|&p| p < probe) % ring.len();
                assert_eq!(ring.successor(probe), expected, "size {size} probe {probe}");
            }
        }
    }

    #[test]
    fn shares_cover_the_ring() {
        let ring = SortedRing::new(vec![(10, 0, 0), (1 << 31, 1, 1)]);
        let shares = ring.shares(2);
        assert!((shares.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        assert_eq!(ring.lookup(11), 1);
        assert_eq!(ring.lookup(u32::MAX), 0, "wraps");
        assert_eq!(ring.arc(11), (10, 1 << 31));
    }
}
