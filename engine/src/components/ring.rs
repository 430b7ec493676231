//! Consistent hashing on a flat sorted ring, with bounded loads.
//!
//! The ring is a sorted `Vec` of (u32 position, shard) pairs, `vnodes` per shard; a
//! key goes to the first position at or after its hash, wrapping around (binary
//! search). A failed shard is marked down rather than removed, and lookups skip its
//! positions — the same mapping as removing it (only its keys move, each to the next
//! healthy shard clockwise) without allocating during a run.
//!
//! [`BoundedLoadRouter`] adds Mirrokni, Thorup and Zadimoghaddam's bounded loads: with
//! L requests in flight over M healthy shards and capacity factor c, no shard takes
//! more than ⌈c·(L+1)/M⌉; a full shard passes the request clockwise to the next
//! shard with room, counting hops; if every shard is full the request is refused.
//!
//! Invariants: positions are sorted; under a finite c every shard's load ≤ the cap
//! at the moment it accepted (asserted).

use sha2::{Digest, Sha256};

use crate::kernel::rng::mix64;

stampede_kernel::named_enum! {
    /// How keys and virtual nodes are hashed onto the 32-bit ring.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum RingHash {
        /// SplitMix64's finaliser, upper 32 bits: fast and well mixed (the default).
        Fast = "fast",
        /// The first 32 bits (big-endian) of SHA-256, as in the consistent-hashing seed.
        /// Compute key hashes once per key, not per event.
        Sha256 = "sha256",
    }
}

impl RingHash {
    /// The ring position of `key`.
    #[inline]
    pub fn key(self, key: u64) -> u32 {
        match self {
            RingHash::Fast => (mix64(key ^ 0x6b65_7973) >> 32) as u32,
            RingHash::Sha256 => sha256_prefix(&key.to_be_bytes()),
        }
    }

    fn vnode(self, seed: u64, shard: u32, vnode: u32) -> u32 {
        match self {
            RingHash::Fast => (mix64(mix64(seed ^ ((shard as u64) << 32 | vnode as u64))) >> 32) as u32,
            RingHash::Sha256 => {
                let mut bytes = [0u8; 16];
                bytes[..8].copy_from_slice(&seed.to_be_bytes());
                bytes[8..12].copy_from_slice(&shard.to_be_bytes());
                bytes[12..].copy_from_slice(&vnode.to_be_bytes());
                sha256_prefix(&bytes)
            }
        }
    }
}

fn sha256_prefix(bytes: &[u8]) -> u32 {
    let digest = Sha256::digest(bytes);
    u32::from_be_bytes([digest[0], digest[1], digest[2], digest[3]])
}

/// A consistent-hash ring.
#[derive(Clone, Debug)]
pub struct HashRing {
    positions: Vec<u32>,
    owners: Vec<u32>,
    healthy: Vec<bool>,
    healthy_count: u32,
}

impl HashRing {
    /// `shards` shards with `vnodes` virtual nodes each, placed by `hash` salted with `seed`.
    pub fn new(shards: u32, vnodes: u32, hash: RingHash, seed: u64) -> Self {
        assert!(shards > 0 && vnodes > 0, "a ring needs shards and virtual nodes");
        let mut points: Vec<(u32, u32)> =
            (0..shards).flat_map(|s| (0..vnodes).map(move |v| (hash.vnode(seed, s, v), s))).collect();
        // Ties (a 32-bit collision) are broken by shard so the ring is deterministic.
        points.sort_unstable();
        HashRing {
            positions: points.iter().map(|p| p.0).collect(),
            owners: points.iter().map(|p| p.1).collect(),
            healthy: vec![true; shards as usize],
            healthy_count: shards,
        }
    }

    /// Number of shards (healthy or not).
    pub fn shards(&self) -> u32 {
        self.healthy.len() as u32
    }

    /// Number of healthy shards.
    pub fn healthy_shards(&self) -> u32 {
        self.healthy_count
    }

    /// Virtual nodes on the ring.
    pub fn len(&self) -> usize {
        self.positions.len()
    }

    /// Always false: a ring has at least one virtual node.
    pub fn is_empty(&self) -> bool {
        self.positions.is_empty()
    }

    /// Marks a shard down (its keys fail over clockwise) or up again.
    pub fn set_healthy(&mut self, shard: u32, healthy: bool) {
        let slot = &mut self.healthy[shard as usize];
        if *slot != healthy {
            *slot = healthy;
            if healthy {
                self.healthy_count += 1;
            } else {
                self.healthy_count -= 1;
            }
        }
    }

    /// True if `shard` is up.
    pub fn is_healthy(&self, shard: u32) -> bool {
        self.healthy[shard as usize]
    }

    /// Index of the first virtual node at or after `hash`, wrapping to 0.
    #[inline]
    pub fn successor(&self, hash: u32) -> usize {
        let index = self.positions.partition_point(|&p| p < hash);
        if index == self.positions.len() {
            0
        } else {
            index
        }
    }

    /// The shard owning the virtual node at `index`.
    #[inline]
    pub fn owner(&self, index: usize) -> u32 {
        self.owners[index]
    }

    /// The healthy shard for `hash` (plain consistent hashing); `None` if all are down.
    #[inline]
    pub fn shard_for(&self, hash: u32) -> Option<u32> {
        let start = self.successor(hash);
        (0..self.len()).map(|step| self.owners[(start + step) % self.len()]).find(|&s| self.healthy[s as usize])
    }

    /// Each shard's share of the ring (the fraction of uniformly hashed keys it owns).
    pub fn shares(&self) -> Vec<f64> {
        let mut shares = vec![0.0; self.healthy.len()];
        let n = self.positions.len();
        for i in 0..n {
            // The arc (previous position, this position] belongs to this vnode's owner.
            let previous = if i == 0 { self.positions[n - 1] } else { self.positions[i - 1] };
            let arc = self.positions[i].wrapping_sub(previous) as f64;
            let arc = if n == 1 { 4_294_967_296.0 } else { arc };
            shares[self.owners[i] as usize] += arc / 4_294_967_296.0;
        }
        shares
    }
}

/// Where a request went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// Accepted by `shard` after walking `hops` virtual nodes past full shards.
    Shard {
        /// The shard that takes the key.
        shard: u32,
        /// Virtual nodes walked past full shards.
        hops: u32,
    },
    /// No healthy shard has room. With c ≥ 1 the caps add up to more than the load,
    /// so in practice this means no shard is healthy.
    Refused,
}

/// Consistent hashing with bounded loads over a [`HashRing`].
#[derive(Clone, Debug)]
pub struct BoundedLoadRouter {
    capacity_factor: f64,
    loads: Box<[u32]>,
    total: u32,
}

impl BoundedLoadRouter {
    /// A router for `shards` shards with capacity factor `c` (> 1; `f64::INFINITY`
    /// gives plain consistent hashing).
    pub fn new(shards: u32, capacity_factor: f64) -> Self {
        assert!(capacity_factor >= 1.0, "capacity factor must be at least 1");
        BoundedLoadRouter { capacity_factor, loads: vec![0; shards as usize].into_boxed_slice(), total: 0 }
    }

    /// The cap a shard may not exceed when one more request arrives.
    #[inline]
    pub fn cap(&self, healthy_shards: u32) -> u32 {
        if self.capacity_factor.is_infinite() || healthy_shards == 0 {
            return u32::MAX;
        }
        let cap = (self.capacity_factor * (self.total as f64 + 1.0) / healthy_shards as f64).ceil();
        (cap as u32).max(1)
    }

    /// Routes a request whose key hashes to `hash`, counting it in flight on success.
    #[inline]
    pub fn route(&mut self, ring: &HashRing, hash: u32) -> Route {
        let cap = self.cap(ring.healthy_shards());
        let start = ring.successor(hash);
        let n = ring.len();
        for step in 0..n {
            let index = start + step;
            let shard = ring.owner(if index >= n { index - n } else { index });
            if ring.is_healthy(shard) && self.loads[shard as usize] < cap {
                self.loads[shard as usize] += 1;
                self.total += 1;
                debug_assert!(self.loads[shard as usize] <= cap, "bounded-load cap exceeded");
                return Route::Shard { shard, hops: step as u32 };
            }
        }
        Route::Refused
    }

    /// A request on `shard` finished.
    #[inline]
    pub fn release(&mut self, shard: u32) {
        let load = &mut self.loads[shard as usize];
        debug_assert!(*load > 0, "release on an idle shard");
        *load = load.saturating_sub(1);
        self.total = self.total.saturating_sub(1);
    }

    /// In-flight requests per shard.
    pub fn loads(&self) -> &[u32] {
        &self.loads
    }

    /// In-flight requests in total.
    pub fn total(&self) -> u32 {
        self.total
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn successor_wraps_around() {
        let ring = HashRing::new(3, 4, RingHash::Fast, 1);
        let first = ring.positions[0];
        let last = *ring.positions.last().unwrap();
        assert_eq!(ring.successor(first), 0);
        assert_eq!(ring.successor(first.wrapping_sub(1).min(first)), 0);
        assert_eq!(ring.successor(last), ring.len() - 1);
        assert_eq!(ring.successor(last.saturating_add(1)), if last == u32::MAX { ring.len() - 1 } else { 0 });
        assert!(ring.positions.windows(2).all(|w| w[0] <= w[1]));
    }

    #[test]
    fn sha256_matches_the_seed_convention() {
        // First 32 bits of SHA-256("abc") = 0xba7816bf (FIPS 180-2 test vector).
        assert_eq!(sha256_prefix(b"abc"), 0xba78_16bf);
        let ring = HashRing::new(4, 150, RingHash::Sha256, 0);
        assert_eq!(ring.len(), 600);
        let share: f64 = ring.shares().iter().sum();
        assert!((share - 1.0).abs() < 1e-9);
    }

    #[test]
    fn the_bounded_load_cap_holds_exactly_under_adversarial_skew() {
        let ring = HashRing::new(10, 150, RingHash::Fast, 7);
        let mut router = BoundedLoadRouter::new(10, 1.25);
        let hot = RingHash::Fast.key(42);
        // Every request carries the same key. While nothing finishes, every shard stays
        // within ⌈c·L/M⌉ after every arrival.
        let mut in_flight = Vec::new();
        for _ in 0..10_000 {
            let Route::Shard { shard, .. } = router.route(&ring, hot) else { panic!("refused with room") };
            in_flight.push(shard);
            let bound = (1.25 * router.total() as f64 / 10.0).ceil() as u32;
            assert!(router.loads().iter().all(|&l| l <= bound), "cap ⌈c·L/M⌉ = {bound} broken: {:?}", router.loads());
        }
        assert_eq!(*router.loads().iter().max().unwrap(), 1250, "the hot key fills shards exactly to the cap");
        // With departures the cap binds at admission: the accepting shard is never
        // above ⌈c·(L+1)/M⌉ for the L it saw.
        for i in 0..20_000usize {
            if i % 2 == 0 {
                let done = in_flight.swap_remove((i * 7919) % in_flight.len());
                router.release(done);
            }
            let cap = router.cap(10);
            let Route::Shard { shard, .. } = router.route(&ring, hot) else { panic!("refused with room") };
            assert!(router.loads()[shard as usize] <= cap);
            in_flight.push(shard);
        }
    }

    #[test]
    fn infinite_capacity_is_plain_consistent_hashing() {
        let ring = HashRing::new(10, 150, RingHash::Fast, 7);
        let mut router = BoundedLoadRouter::new(10, f64::INFINITY);
        let hot = RingHash::Fast.key(42);
        let owner = ring.shard_for(hot).unwrap();
        for _ in 0..1000 {
            assert_eq!(router.route(&ring, hot), Route::Shard { shard: owner, hops: 0 });
        }
        assert_eq!(router.loads()[owner as usize], 1000);
    }

    #[test]
    fn refuses_only_without_a_healthy_shard() {
        // Σ caps = M·⌈c(L+1)/M⌉ ≥ L+1 > L: some healthy shard always has room.

        let ring = HashRing::new(2, 3, RingHash::Fast, 1);
        let mut router = BoundedLoadRouter::new(2, 1.0);
        let mut routed = 0;
        let mut ring_down = ring.clone();
        ring_down.set_healthy(0, false);
        ring_down.set_healthy(1, false);
        assert_eq!(router.route(&ring_down, 5), Route::Refused, "no healthy shard");
        for key in 0..10u64 {
            if matches!(router.route(&ring, RingHash::Fast.key(key)), Route::Shard { .. }) {
                routed += 1;
            }
        }
        assert_eq!(routed, 10, "c = 1 still admits: the cap grows with L");
    }

    #[test]
    fn removing_a_shard_moves_only_its_keys() {
        let mut ring = HashRing::new(8, 150, RingHash::Fast, 3);
        let before: Vec<u32> = (0..100_000u64).map(|k| ring.shard_for(RingHash::Fast.key(k)).unwrap()).collect();
        ring.set_healthy(3, false);
        let mut moved = 0;
        for (k, &was) in before.iter().enumerate() {
            let now = ring.shard_for(RingHash::Fast.key(k as u64)).unwrap();
            if was == 3 {
                assert_ne!(now, 3);
                moved += 1;
            } else {
                assert_eq!(now, was, "key {k} moved though its shard is up");
            }
        }
        let expected = 100_000.0 / 8.0;
        assert!((moved as f64 - expected).abs() < 0.15 * expected, "{moved} keys moved");
        ring.set_healthy(3, true);
        let back: Vec<u32> = (0..100_000u64).map(|k| ring.shard_for(RingHash::Fast.key(k)).unwrap()).collect();
        assert_eq!(back, before, "recovery restores the mapping");
    }

    /// Coefficient of variation of the shard shares, averaged over ring seeds.
    fn share_cv(shards: u32, vnodes: u32) -> f64 {
        let seeds = 10;
        (0..seeds)
            .map(|seed| {
                let shares = HashRing::new(shards, vnodes, RingHash::Fast, seed).shares();
                let mean = 1.0 / shards as f64;
                let var = shares.iter().map(|s| (s - mean).powi(2)).sum::<f64>() / (shards as f64 - 1.0);
                var.sqrt() / mean
            })
            .sum::<f64>()
            / seeds as f64
    }

    #[test]
    fn imbalance_falls_as_one_over_root_v() {
        // Each shard's share is a sum of V spacings of M·V uniform points, so its
        // coefficient of variation is about 1/√V (exactly √((M−1)/(MV+1))).
        for vnodes in [10u32, 150, 1000] {
            let shards = 100;
            let theory = ((shards as f64 - 1.0) / (shards as f64 * vnodes as f64 + 1.0)).sqrt();
            let measured = share_cv(shards, vnodes);
            assert!((measured / theory - 1.0).abs() < 0.08, "V = {vnodes}: cv {measured:.4} vs theory {theory:.4}");
        }
    }
}
