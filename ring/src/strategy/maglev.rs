//! Maglev hashing (Eisenbud et al., NSDI 2016): each node walks its own permutation
//! of a prime-size table (offset and skip from two hashes of its name) and the nodes
//! take turns claiming the next free slot until the table is full. Lookup is one
//! table read; balance within about 1% when the table is over 100× the nodes; a change
//! moves slightly more than the ideal share (minimal, not optimal, disruption).

use crate::hash::{derive, HashKind};

/// Envoy's default table size, a prime.
pub const DEFAULT_TABLE_SIZE: u32 = 65_537;

/// Whether `m` is prime (trial division; table sizes are small).
pub fn is_prime(m: u32) -> bool {
    if m < 2 {
        return false;
    }
    (2..).take_while(|d: &u32| (*d as u64) * (*d as u64) <= m as u64).all(|d| !m.is_multiple_of(d))
}

/// The lookup table: slot → node index.
#[derive(Clone, Debug)]
pub struct Maglev {
    table: Vec<u32>,
}

impl Maglev {
    /// Builds the table for `names` (in node order) with `size` slots (a prime > nodes).
    pub fn new(names: &[&str], size: u32, hash: HashKind) -> Maglev {
        debug_assert!(is_prime(size) && size as usize > names.len());
        let m = size as u64;
        let offsets: Vec<u64> = names.iter().map(|n| derive(hash.name(n), 1) % m).collect();
        let skips: Vec<u64> = names.iter().map(|n| derive(hash.name(n), 2) % (m - 1) + 1).collect();
        let mut next = vec![0u64; names.len()];
        let mut table = vec![u32::MAX; size as usize];
        let mut filled = 0u64;
        'fill: loop {
            for node in 0..names.len() {
                let mut slot = (offsets[node] + next[node] * skips[node]) % m;
                while table[slot as usize] != u32::MAX {
                    next[node] += 1;
                    slot = (offsets[node] + next[node] * skips[node]) % m;
                }
                table[slot as usize] = node as u32;
                next[node] += 1;
                filled += 1;
                if filled == m {
                    break 'fill;
                }
            }
        }
        Maglev { table }
    }

    #[inline]
    pub fn lookup(&self, hash: u64) -> u32 {
        self.table[(hash % self.table.len() as u64) as usize]
    }

    /// Each node's share of the table.
    pub fn shares(&self, nodes: usize) -> Vec<f64> {
        let mut shares = vec![0.0; nodes];
        for &owner in &self.table {
            shares[owner as usize] += 1.0 / self.table.len() as f64;
        }
        shares
    }

    pub fn memory_bytes(&self) -> usize {
        self.table.len() * 4
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_balanced_within_one_percent_when_large() {
        assert!(is_prime(65_537) && !is_prime(65_535));
        let names: Vec<String> = (0..100).map(|i| format!("node-{i}")).collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let maglev = Maglev::new(&refs, 65_537, HashKind::Fast);
        let shares = maglev.shares(100);
        let (lo, hi) = shares.iter().fold((1.0f64, 0.0f64), |(lo, hi), &s| (lo.min(s), hi.max(s)));
        // Every node gets ⌊M/n⌋ or ⌈M/n⌉ slots: the paper's near-perfect balance.
        assert!((hi - lo) * 65_537.0 <= 1.0 + 1e-9, "{lo} {hi}");
    }
}
