//! The pending-event set: a binary min-heap over a flat `Vec` of small `Copy` entries.
//!
//! Entries are ordered by (time, insertion sequence), so events scheduled for the
//! same nanosecond pop in the order they were pushed (FIFO ties). That makes a run a
//! pure function of its seeds: no tie is ever broken by memory layout or hashing.
//!
//! The kernel's loop uses the heap the way a discrete-event "hold" does: it
//! [`EventQueue::take_root`]s the earliest event (a copy; the entry stays at the
//! root), the model handles it, and the first event the model schedules meanwhile
//! *replaces* the root — one walk down the heap instead of a pop's walk down plus a
//! push's walk up. [`EventQueue::settle`] removes a root that nothing replaced. The
//! order events come out in is the same either way: it is fixed by the unique keys,
//! not by the heap's layout.
//!
//! Invariants: for every index `i > 0`, `key(heap[(i - 1) / 2]) < key(heap[i])`
//! (keys are unique because sequence numbers are); `next_sequence` is larger than
//! every sequence number in the heap; while `root_taken`, the root is an event already
//! handed out and not pending. Once the `Vec` has grown to the largest number of
//! simultaneously pending events, push and pop never allocate.

use crate::time::Nanos;

/// A pending event. The key packs (time, sequence) into one `u128` so that ordering
/// is a single integer comparison.
#[derive(Clone, Copy, Debug)]
struct Entry<E> {
    key: u128,
    event: E,
}

impl<E> Entry<E> {
    #[inline(always)]
    fn new(time: Nanos, sequence: u64, event: E) -> Self {
        Entry { key: ((time as u128) << 64) | sequence as u128, event }
    }

    #[inline(always)]
    fn time(&self) -> Nanos {
        (self.key >> 64) as Nanos
    }

    #[inline(always)]
    fn sequence(&self) -> u64 {
        self.key as u64
    }
}

/// A min-heap of timed events with FIFO tie-breaking.
#[derive(Clone, Debug)]
pub struct EventQueue<E: Copy> {
    heap: Vec<Entry<E>>,
    next_sequence: u64,
    /// The root was handed out by `take_root`: the next push replaces it, or `settle`
    /// removes it.
    root_taken: bool,
}

impl<E: Copy> Default for EventQueue<E> {
    fn default() -> Self {
        Self::with_capacity(0)
    }
}

impl<E: Copy> EventQueue<E> {
    /// An empty queue with room for `capacity` pending events before it grows.
    pub fn with_capacity(capacity: usize) -> Self {
        EventQueue { heap: Vec::with_capacity(capacity), next_sequence: 0, root_taken: false }
    }

    /// Number of pending events.
    #[inline]
    pub fn len(&self) -> usize {
        self.heap.len() - self.root_taken as usize
    }

    /// True when nothing is pending.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The time of the earliest pending event. Not while a taken root is unsettled.
    #[inline]
    pub fn peek_time(&self) -> Option<Nanos> {
        debug_assert!(!self.root_taken, "peek_time before settle");
        self.heap.first().map(Entry::time)
    }

    /// Schedules `event` at `time`.
    #[inline]
    pub fn push(&mut self, time: Nanos, event: E) {
        let entry = Entry::new(time, self.next_sequence, event);
        self.next_sequence += 1;
        if self.root_taken {
            self.root_taken = false;
            let end = self.heap.len();
            // SAFETY: a taken root means the heap holds at least that root (end ≥ 1).
            unsafe { self.fill_root_hole::<true>(end, entry) };
            self.debug_check_root();
            return;
        }
        let position = self.heap.len();
        self.heap.push(entry);
        // SAFETY: `position` is the index of the entry just pushed.
        unsafe { self.sift_up(position, entry) };
    }

    /// Removes and returns the earliest event (FIFO among equal times).
    #[inline]
    pub fn pop(&mut self) -> Option<(Nanos, E)> {
        debug_assert!(!self.root_taken, "pop before settle");
        let top = *self.heap.first()?;
        self.remove_root();
        Some((top.time(), top.event))
    }

    /// The earliest event, left at the root as taken: the next [`EventQueue::push`]
    /// replaces it, and [`EventQueue::settle`] removes it if nothing did. Between the
    /// two the queue behaves as if it had been popped.
    #[inline]
    pub fn take_root(&mut self) -> Option<(Nanos, E)> {
        debug_assert!(!self.root_taken, "take_root before settle");
        let top = *self.heap.first()?;
        self.root_taken = true;
        Some((top.time(), top.event))
    }

    /// Removes a taken root that no push replaced.
    #[inline]
    pub fn settle(&mut self) {
        if self.root_taken {
            self.root_taken = false;
            self.remove_root();
        }
    }

    #[inline(always)]
    fn remove_root(&mut self) {
        let Some(last) = self.heap.pop() else { return };
        let end = self.heap.len();
        if end > 0 {
            // SAFETY: `end ≥ 1` entries remain and the root is the hole to fill.
            unsafe { self.fill_root_hole::<false>(end, last) };
        }
        self.debug_check_root();
    }

    /// Fills the hole at the root with `entry`, among the heap's first `end` entries:
    /// the hole walks down along the smaller children, and `entry` goes where it belongs.
    ///
    /// How far down is the choice. `STOP_WHERE_IT_BELONGS` is the classic sift-down: it
    /// stops as soon as `entry` is below both children — for the event a handler
    /// schedules, often among the earliest pending (a microsecond network hop among
    /// millisecond work), where a walk to a leaf and back up would cost two heights.
    /// Without it, Floyd's trick (std's `BinaryHeap`'s): walk to a leaf without looking
    /// at `entry`, then sift it up — one comparison less per level, for an entry that
    /// belongs near the bottom (the heap's last entry, after a removal).
    ///
    /// # Safety
    /// `1 ≤ end ≤ self.heap.len()`.
    #[inline(always)]
    unsafe fn fill_root_hole<const STOP_WHERE_IT_BELONGS: bool>(&mut self, end: usize, entry: Entry<E>) {
        debug_assert!(end >= 1 && end <= self.heap.len());
        let heap = self.heap.as_mut_ptr();
        let mut hole = 0;
        let mut child = 1;
        // SAFETY: every index read or written is below `end`, the heap's length: the
        // loop reads `child` and `child + 1` only while `child + 1 < end`, the tail
        // reads `child` only when `child == end - 1`, and `hole` is always a former
        // `child` (or 0 < end).
        unsafe {
            while child + 1 < end {
                child += ((*heap.add(child + 1)).key < (*heap.add(child)).key) as usize;
                if STOP_WHERE_IT_BELONGS && entry.key < (*heap.add(child)).key {
                    *heap.add(hole) = entry;
                    return;
                }
                *heap.add(hole) = *heap.add(child);
                hole = child;
                child = 2 * hole + 1;
            }
            if child == end - 1 && !(STOP_WHERE_IT_BELONGS && entry.key < (*heap.add(child)).key) {
                *heap.add(hole) = *heap.add(child);
                hole = child;
            }
            if STOP_WHERE_IT_BELONGS {
                // Every entry moved up was below `entry`, and `entry` is below what
                // stays under the hole (or nothing does): it belongs here.
                *heap.add(hole) = entry;
            } else {
                self.sift_up(hole, entry);
            }
        }
    }

    /// Removes every pending event. Capacity is kept.
    pub fn clear(&mut self) {
        self.heap.clear();
        self.root_taken = false;
    }

    /// Moves `entry` from the hole at `hole` towards the root to its place.
    ///
    /// # Safety
    /// `hole < self.heap.len()`.
    #[inline(always)]
    unsafe fn sift_up(&mut self, mut hole: usize, entry: Entry<E>) {
        debug_assert!(hole < self.heap.len());
        let heap = self.heap.as_mut_ptr();
        // SAFETY: `parent < hole < len` on every step.
        unsafe {
            while hole > 0 {
                let parent = (hole - 1) / 2;
                if entry.key >= (*heap.add(parent)).key {
                    break;
                }
                *heap.add(hole) = *heap.add(parent);
                hole = parent;
            }
            *heap.add(hole) = entry;
        }
    }

    #[inline(always)]
    fn debug_check_root(&self) {
        debug_assert!(self.heap.len() < 2 || self.heap[0].key < self.heap[1].key, "heap order violated at the root");
        debug_assert!(self.heap.len() < 3 || self.heap[0].key < self.heap[2].key, "heap order violated at the root");
    }

    /// Checks the full heap invariant. O(n); for tests.
    pub fn check_invariants(&self) {
        assert!(!self.root_taken || !self.heap.is_empty(), "a taken root is in the heap");
        for i in 1..self.heap.len() {
            assert!(self.heap[(i - 1) / 2].key < self.heap[i].key, "heap order violated at {i}");
            assert!(self.heap[i].sequence() < self.next_sequence);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn equal_times_pop_in_push_order() {
        let mut queue = EventQueue::with_capacity(4);
        for label in 0..10u32 {
            queue.push(5, label);
        }
        queue.push(1, 100);
        assert_eq!(queue.pop(), Some((1, 100)));
        for label in 0..10u32 {
            assert_eq!(queue.pop(), Some((5, label)));
        }
        assert_eq!(queue.pop(), None);
    }

    proptest! {
        /// A hold (take the root, push what handling it schedules, settle) gives the
        /// same events in the same order as pop-then-push, against a stable sort,
        /// whether the handler pushes nothing, one event or several.
        #[test]
        fn holds_match_a_stable_sort(
            seed in proptest::collection::vec(0u64..50, 1..50),
            steps in proptest::collection::vec(proptest::collection::vec(0u64..30, 0..4), 1..300),
        ) {
            let mut queue = EventQueue::default();
            let mut model: Vec<(u64, usize)> = Vec::new();
            let mut label = 0;
            for time in seed {
                queue.push(time, label);
                model.push((time, label));
                label += 1;
            }
            for pushes in steps {
                let want = model.iter().enumerate().min_by_key(|(_, entry)| **entry).map(|(i, entry)| (i, *entry));
                let got = queue.take_root();
                let Some((position, entry)) = want else {
                    prop_assert_eq!(got, None);
                    break;
                };
                model.remove(position);
                prop_assert_eq!(got, Some(entry));
                prop_assert_eq!(queue.len(), model.len(), "a taken root is not pending");
                for delay in pushes {
                    queue.push(entry.0 + delay, label);
                    model.push((entry.0 + delay, label));
                    label += 1;
                    prop_assert_eq!(queue.len(), model.len());
                }
                queue.settle();
                queue.check_invariants();
                prop_assert_eq!(queue.len(), model.len());
            }
        }

        /// Against a stable sort: any interleaving of pushes and pops returns events
        /// in (time, push order).
        #[test]
        fn matches_a_stable_sort(ops in proptest::collection::vec((0u64..50, any::<bool>()), 1..400)) {
            let mut queue = EventQueue::default();
            let mut model: Vec<(u64, usize)> = Vec::new();
            for (index, (time, pop)) in ops.into_iter().enumerate() {
                if pop {
                    let want = model
                        .iter()
                        .enumerate()
                        .min_by_key(|(_, entry)| **entry)
                        .map(|(position, entry)| (position, *entry));
                    let got = queue.pop();
                    match want {
                        None => prop_assert_eq!(got, None),
                        Some((position, entry)) => {
                            model.remove(position);
                            prop_assert_eq!(got, Some(entry));
                        }
                    }
                } else {
                    queue.push(time, index);
                    model.push((time, index));
                }
                queue.check_invariants();
                prop_assert_eq!(queue.len(), model.len());
            }
        }
    }
}
