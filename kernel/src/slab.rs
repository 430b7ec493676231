//! Entity storage: a slab of values addressed by small generational keys.
//!
//! Requests, connections and calls live here instead of in individual heap
//! allocations. A removed slot goes on a free list and is reused by the next insert,
//! so a model that has warmed up stops allocating. Each slot carries a generation
//! that is bumped on removal: a key held by a stale event (say, the timeout of a
//! request that already completed) no longer resolves, which is how cancellation
//! stays lazy and O(1).
//!
//! Invariants: `len` equals the number of occupied slots; the free list threads
//! exactly the vacant slots; an occupied slot's generation equals the generation of
//! the one key that was handed out for it.

/// A handle to a value in a [`Slab`]: an index plus the generation it was issued at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SlabKey {
    index: u32,
    generation: u32,
}

impl SlabKey {
    /// The slot index; stable while the value lives. Useful for per-entity side arrays.
    pub fn index(self) -> usize {
        self.index as usize
    }

    /// The key as one integer, for handles that cross into components that know
    /// nothing of slabs (a provider's call id, say).
    pub fn to_bits(self) -> u64 {
        (self.generation as u64) << 32 | self.index as u64
    }

    /// The key [`Self::to_bits`] packed.
    pub const fn from_bits(bits: u64) -> Self {
        SlabKey { index: bits as u32, generation: (bits >> 32) as u32 }
    }
}

const NO_SLOT: u32 = u32::MAX;

#[derive(Clone, Debug)]
enum Slot<T> {
    Occupied { generation: u32, value: T },
    Vacant { generation: u32, next_free: u32 },
}

/// A generational slab with a free list.
#[derive(Clone, Debug)]
pub struct Slab<T> {
    slots: Vec<Slot<T>>,
    free_head: u32,
    len: u32,
}

impl<T> Default for Slab<T> {
    fn default() -> Self {
        Self::with_capacity(0)
    }
}

impl<T> Slab<T> {
    /// An empty slab with room for `capacity` values before it grows.
    pub fn with_capacity(capacity: usize) -> Self {
        Slab { slots: Vec::with_capacity(capacity), free_head: NO_SLOT, len: 0 }
    }

    /// Number of live values.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// True when no value is live.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Stores `value` and returns its key. Reuses a free slot when there is one.
    ///
    /// Inlined, and one path whatever the slab's state (a full slab first grows by a
    /// vacant slot), so that the caller's struct literal can be built in the slot
    /// itself: a call kept `value` in its own frame and copied it in (`memmove` of the
    /// graph's 176-byte jobs, with the copy in `remove`, was a tenth of a graph run).
    #[inline]
    pub fn insert(&mut self, value: T) -> SlabKey {
        if self.free_head == NO_SLOT {
            self.grow();
        }
        self.len += 1;
        let index = self.free_head;
        let slot = &mut self.slots[index as usize];
        let Slot::Vacant { generation, next_free } = *slot else {
            unreachable!("free list points at an occupied slot {index}");
        };
        self.free_head = next_free;
        *slot = Slot::Occupied { generation, value };
        SlabKey { index, generation }
    }

    /// Adds a vacant slot at the head of the (empty) free list: the slab grows, only
    /// while it warms up.
    #[cold]
    #[inline(never)]
    fn grow(&mut self) {
        debug_assert_eq!(self.free_head, NO_SLOT);
        let index = u32::try_from(self.slots.len()).expect("slab holds at most 2^32 - 1 values");
        assert!(index != NO_SLOT, "slab holds at most 2^32 - 1 values");
        self.slots.push(Slot::Vacant { generation: 0, next_free: NO_SLOT });
        self.free_head = index;
    }

    /// Removes and returns the value for `key`; `None` if the key is stale.
    ///
    /// The value is read out and only the slot's vacancy written, not the whole slot
    /// swapped through a temporary: inlined, a caller that reads a few fields of what it
    /// removed loads those fields and copies nothing else.
    #[inline]
    pub fn remove(&mut self, key: SlabKey) -> Option<T> {
        let free_head = self.free_head;
        let slot = self.slots.get_mut(key.index as usize)?;
        let Slot::Occupied { generation, value } = slot else { return None };
        if *generation != key.generation {
            return None;
        }
        let vacant = Slot::Vacant { generation: generation.wrapping_add(1), next_free: free_head };
        // SAFETY: `value` is a live, initialised `T` in an occupied slot; it is read
        // out once here, and the next line overwrites the slot without dropping it.
        let value = unsafe { std::ptr::read(value) };
        // SAFETY: `slot` is valid for writes (a `&mut`); what it held was moved out by
        // the read above, so it must not be dropped (a write drops nothing) and is
        // neither dropped twice nor leaked. Nothing can panic between the two.
        unsafe { std::ptr::write(slot, vacant) };
        self.free_head = key.index;
        debug_assert!(self.len > 0);
        self.len -= 1;
        Some(value)
    }

    /// The value for `key`, unless it was removed since.
    #[inline]
    pub fn get(&self, key: SlabKey) -> Option<&T> {
        match self.slots.get(key.index as usize)? {
            Slot::Occupied { generation, value } if *generation == key.generation => Some(value),
            _ => None,
        }
    }

    /// The value for `key`, mutably, unless it was removed since.
    #[inline]
    pub fn get_mut(&mut self, key: SlabKey) -> Option<&mut T> {
        match self.slots.get_mut(key.index as usize)? {
            Slot::Occupied { generation, value } if *generation == key.generation => Some(value),
            _ => None,
        }
    }

    /// True if `key` still resolves.
    pub fn contains(&self, key: SlabKey) -> bool {
        self.get(key).is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn stale_keys_do_not_resolve_after_reuse() {
        let mut slab = Slab::with_capacity(2);
        let a = slab.insert("a");
        assert_eq!(slab.remove(a), Some("a"));
        let b = slab.insert("b");
        assert_eq!(a.index(), b.index(), "the slot is reused");
        assert_eq!(slab.get(a), None, "the old key is stale");
        assert_eq!(slab.remove(a), None);
        assert_eq!(slab.get(b), Some(&"b"));
        assert_eq!(slab.len(), 1);
    }

    proptest! {
        #[test]
        fn behaves_like_a_map(ops in proptest::collection::vec((any::<bool>(), 0usize..16), 1..300)) {
            let mut slab = Slab::default();
            let mut live: Vec<(SlabKey, usize)> = Vec::new();
            let mut dead: Vec<SlabKey> = Vec::new();
            for (step, (insert, pick)) in ops.into_iter().enumerate() {
                if insert || live.is_empty() {
                    live.push((slab.insert(step), step));
                } else {
                    let (key, value) = live.swap_remove(pick % live.len());
                    prop_assert_eq!(slab.remove(key), Some(value));
                    dead.push(key);
                }
                prop_assert_eq!(slab.len(), live.len());
                for (key, value) in &live {
                    prop_assert_eq!(slab.get(*key), Some(value));
                }
                for key in &dead {
                    prop_assert!(!slab.contains(*key));
                }
            }
        }
    }
}
