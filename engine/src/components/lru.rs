//! A cache of keys with a capacity in entries, least-recently-used eviction and a time
//! to live: the state of one cache instance (an in-process cache, a Redis or CDN node).
//! Only keys are kept — the model needs to know whether a value is there, not what it
//! is. An expired entry stays until evicted or refilled, so a caller may serve it stale
//! when the origin fails.
//!
//! Entries live in a slab of fixed size (`capacity`) linked in recency order, found
//! through a map preallocated for `capacity` keys with a multiplicative hash of the key:
//! once warm, nothing allocates.
//!
//! Invariants (asserted): the map and the recency list hold the same entries; at most
//! `capacity` entries; the list runs from most to least recently used.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use crate::kernel::time::Nanos;

const NONE: u32 = u32::MAX;

/// What a lookup found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lookup {
    /// There and fresh (now the most recently used).
    Hit,
    /// There but expired: a miss that could be served stale.
    Stale,
    /// Not there.
    Miss,
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    key: u64,
    expires: Nanos,
    newer: u32,
    older: u32,
}

/// A u64 key's hash: Fibonacci multiplication (keys are already numbers; SipHash's
/// protection against chosen keys buys nothing here).
#[derive(Default)]
pub struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ b as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u64(&mut self, key: u64) {
        self.0 = (key ^ (key >> 29)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// One cache: LRU over `capacity` entries, each fresh for `ttl` after it was stored.
#[derive(Clone, Debug)]
pub struct LruCache {
    capacity: u32,
    ttl: Nanos,
    index: HashMap<u64, u32, BuildHasherDefault<KeyHasher>>,
    entries: Vec<Entry>,
    free: Vec<u32>,
    newest: u32,
    oldest: u32,
    evictions: u64,
}

impl LruCache {
    /// An empty cache (`ttl = Nanos::MAX`: entries never expire).
    pub fn new(capacity: u32, ttl: Nanos) -> Self {
        assert!(capacity > 0, "a cache of 0 entries is refused when the scenario is read");
        let mut index = HashMap::with_capacity_and_hasher(capacity as usize, BuildHasherDefault::default());
        index.shrink_to(capacity as usize);
        LruCache {
            capacity,
            ttl,
            index,
            entries: Vec::with_capacity(capacity as usize),
            free: Vec::with_capacity(capacity as usize),
            newest: NONE,
            oldest: NONE,
            evictions: 0,
        }
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// Whether it holds nothing.
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// Entries evicted to make room so far.
    pub fn evictions(&self) -> u64 {
        self.evictions
    }

    /// Looks `key` up at `now`; a fresh hit becomes the most recently used.
    pub fn lookup(&mut self, now: Nanos, key: u64) -> Lookup {
        let Some(&slot) = self.index.get(&key) else { return Lookup::Miss };
        if now >= self.entries[slot as usize].expires {
            return Lookup::Stale;
        }
        self.unlink(slot);
        self.push_newest(slot);
        Lookup::Hit
    }

    /// Stores `key` at `now` (fresh for the TTL from now), evicting the least recently
    /// used entry when full.
    pub fn insert(&mut self, now: Nanos, key: u64) {
        let expires = now.saturating_add(self.ttl);
        if let Some(&slot) = self.index.get(&key) {
            self.entries[slot as usize].expires = expires;
            self.unlink(slot);
            self.push_newest(slot);
            return;
        }
        if self.index.len() == self.capacity as usize {
            let victim = self.oldest;
            let old_key = self.entries[victim as usize].key;
            self.unlink(victim);
            self.index.remove(&old_key);
            self.free.push(victim);
            self.evictions += 1;
        }
        let entry = Entry { key, expires, newer: NONE, older: NONE };
        let slot = match self.free.pop() {
            Some(slot) => {
                self.entries[slot as usize] = entry;
                slot
            }
            None => {
                self.entries.push(entry);
                self.entries.len() as u32 - 1
            }
        };
        self.index.insert(key, slot);
        self.push_newest(slot);
        debug_assert!(self.index.len() <= self.capacity as usize);
        debug_assert_eq!(self.index.len() + self.free.len(), self.entries.len());
    }

    /// Empties it (a flush or a restart).
    pub fn clear(&mut self) {
        self.index.clear();
        self.free.clear();
        self.free.extend((0..self.entries.len() as u32).rev());
        self.newest = NONE;
        self.oldest = NONE;
    }

    fn unlink(&mut self, slot: u32) {
        let Entry { newer, older, .. } = self.entries[slot as usize];
        match newer {
            NONE => self.newest = older,
            n => self.entries[n as usize].older = older,
        }
        match older {
            NONE => self.oldest = newer,
            o => self.entries[o as usize].newer = newer,
        }
    }

    fn push_newest(&mut self, slot: u32) {
        let entry = &mut self.entries[slot as usize];
        entry.newer = NONE;
        entry.older = self.newest;
        if self.newest != NONE {
            self.entries[self.newest as usize].newer = slot;
        }
        self.newest = slot;
        if self.oldest == NONE {
            self.oldest = slot;
        }
    }

    /// The keys from most to least recently used (tests).
    #[cfg(test)]
    fn order(&self) -> Vec<u64> {
        let mut keys = Vec::new();
        let mut cursor = self.newest;
        while cursor != NONE {
            keys.push(self.entries[cursor as usize].key);
            cursor = self.entries[cursor as usize].older;
        }
        keys
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evicts_the_least_recently_used() {
        let mut c = LruCache::new(3, Nanos::MAX);
        for key in [1, 2, 3] {
            c.insert(0, key);
        }
        assert_eq!(c.lookup(1, 1), Lookup::Hit, "1 becomes the newest");
        c.insert(2, 4);
        assert_eq!(c.order(), [4, 1, 3], "2 was the oldest");
        assert_eq!(c.lookup(3, 2), Lookup::Miss);
        assert_eq!(c.evictions(), 1);
    }

    #[test]
    fn entries_expire_but_stay_for_serving_stale() {
        let mut c = LruCache::new(2, 10);
        c.insert(0, 7);
        assert_eq!(c.lookup(9, 7), Lookup::Hit);
        assert_eq!(c.lookup(10, 7), Lookup::Stale);
        c.insert(10, 7);
        assert_eq!(c.lookup(19, 7), Lookup::Hit, "a refill is fresh again");
        assert_eq!(c.len(), 1);
    }

    #[test]
    fn clear_empties_and_reuses_the_slots() {
        let mut c = LruCache::new(2, Nanos::MAX);
        c.insert(0, 1);
        c.insert(0, 2);
        c.clear();
        assert!(c.is_empty() && c.lookup(1, 1) == Lookup::Miss);
        c.insert(1, 3);
        c.insert(1, 4);
        c.insert(1, 5);
        assert_eq!(c.order(), [5, 4]);
        assert_eq!(c.entries.len(), 2, "no slot beyond the capacity");
    }
}
