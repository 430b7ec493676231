//! Timeouts of one fixed length, kept off the event heap.
//!
//! Most requests set a timeout and most timeouts never fire: the answer comes first.
//! As heap events they cost a push, a pop and a stale check each, and they made the
//! heap about twice as deep as the events that happen. When every timeout of a
//! family has the same length, they expire in the order they were armed: a FIFO holds
//! them in due order for O(1) each, and the heap holds one wake-up per family, at the
//! front entry's due time. Entries whose owner no longer waits (answered, cancelled)
//! are dropped from the front as the FIFO is walked, so it stays as long as the
//! requests actually waiting.
//!
//! A model arms with [`TimeoutFifo::arm`] and schedules the wake-up it returns; when
//! a wake-up event pops it calls [`TimeoutFifo::woken`], then [`TimeoutFifo::pop_due`]
//! until it returns `None` (firing each item), then schedules what
//! [`TimeoutFifo::rearm`] returns. At most one wake-up is live: a newer one makes an
//! older one stale (its [`TimerTicket`] no longer matches), as with [`TimerSlot`].
//!
//! Invariants (asserted): dues never decrease from front to back, so each timeout
//! fires exactly at its due time, timeouts due at the same time fire in the order
//! they were armed, and the live wake-up is never later than the front entry's due.

use std::collections::VecDeque;

use crate::time::Nanos;
use crate::timer::{TimerSlot, TimerTicket};

/// A wake-up to schedule: at `at`, an event carrying `ticket`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WakeUp {
    /// When to wake up.
    pub at: Nanos,
    /// What the event carries, to tell a current wake-up from a stale one.
    pub ticket: TimerTicket,
}

/// Timeouts of one length for items of type `T` (typically a slab key and the
/// owner's timer ticket), due in the order they were armed.
#[derive(Clone, Debug)]
pub struct TimeoutFifo<T> {
    entries: VecDeque<(Nanos, T)>,
    wake: TimerSlot,
    /// When the live wake-up is due (meaningful while `wake` is armed).
    wake_at: Nanos,
}

impl<T: Copy> TimeoutFifo<T> {
    /// An empty FIFO with room for `capacity` waiting timeouts before it grows.
    pub fn with_capacity(capacity: usize) -> Self {
        TimeoutFifo { entries: VecDeque::with_capacity(capacity), wake: TimerSlot::default(), wake_at: 0 }
    }

    /// Arms a timeout for `item` at `due`, which must not be earlier than any timeout
    /// armed before (one length, armed at a clock that never goes back). Returns the
    /// wake-up to schedule when none is live.
    #[inline]
    pub fn arm(&mut self, due: Nanos, item: T) -> Option<WakeUp> {
        debug_assert!(self.entries.back().is_none_or(|&(last, _)| last <= due), "timeouts are armed in due order");
        self.entries.push_back((due, item));
        if self.wake.is_armed() {
            debug_assert!(self.wake_at <= due);
            return None;
        }
        Some(self.arm_wake(due))
    }

    /// A wake-up event popped: true if it is the live one, and then the caller walks
    /// [`Self::pop_due`] and [`Self::rearm`]; false for a stale one, to ignore.
    #[inline]
    pub fn woken(&mut self, ticket: TimerTicket) -> bool {
        self.wake.fire(ticket)
    }

    /// The next item due by `now` whose owner still waits (`waiting(item)`), removed
    /// from the FIFO; entries at the front whose owner stopped waiting are dropped on
    /// the way, due or not. `None` when the front is not due yet (or nothing is left).
    #[inline]
    pub fn pop_due(&mut self, now: Nanos, mut waiting: impl FnMut(&T) -> bool) -> Option<T> {
        while let Some(&(due, item)) = self.entries.front() {
            if !waiting(&item) {
                self.entries.pop_front();
                continue;
            }
            if due > now {
                return None;
            }
            debug_assert!(due == now || !self.wake.is_armed(), "a live wake-up was late: due {due}, now {now}");
            self.entries.pop_front();
            return Some(item);
        }
        None
    }

    /// After [`Self::pop_due`] returned `None`: the wake-up to schedule for the front
    /// entry, unless one as early is live already (one armed while firing is later:
    /// a timeout armed now is due after every waiting one).
    #[inline]
    pub fn rearm(&mut self) -> Option<WakeUp> {
        let &(due, _) = self.entries.front()?;
        if self.wake.is_armed() && self.wake_at <= due {
            return None;
        }
        Some(self.arm_wake(due))
    }

    /// Timeouts held, waiting or not yet dropped.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when no timeout is held.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn arm_wake(&mut self, due: Nanos) -> WakeUp {
        self.wake_at = due;
        WakeUp { at: due, ticket: self.wake.arm() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::{RngStream, StreamPurpose};
    use std::collections::{BTreeMap, HashMap};

    /// The FIFO driven as a model drives it, its wake-ups in a map ordered by (time,
    /// sequence) as the kernel orders events, checked against the plain rule: every
    /// armed timeout fires exactly at arm time + length unless it was cancelled before
    /// then, and timeouts due at the same time fire in the order they were armed.
    fn drive(seed: u64, length: Nanos, steps: u32) {
        let mut rng = RngStream::derive(seed, 0, StreamPurpose::named("test.timeout_fifo"));
        let mut fifo = TimeoutFifo::<u32>::with_capacity(4);
        let mut wakeups: BTreeMap<(Nanos, u64), TimerTicket> = BTreeMap::new();
        let mut sequence = 0u64;
        let mut schedule = |wake: Option<WakeUp>, wakeups: &mut BTreeMap<(Nanos, u64), TimerTicket>| {
            if let Some(w) = wake {
                sequence += 1;
                wakeups.insert((w.at, sequence), w.ticket);
            }
        };
        let mut cancelled_at: HashMap<u32, Nanos> = HashMap::new();
        let mut armed: Vec<(Nanos, u32)> = Vec::new();
        let mut fired: Vec<(Nanos, u32)> = Vec::new();
        let mut now: Nanos = 0;
        for id in 0..=steps {
            // Time moves by 0 (ties), a little, or past several dues; the last step drains.
            now += match (id == steps, rng.below(4)) {
                (true, _) => 10 * length,
                (_, 0) => 0,
                (_, 1) => rng.below(length / 4 + 1),
                (_, 2) => rng.below(length),
                _ => rng.below(3 * length),
            };
            while let Some((&(at, key), &ticket)) = wakeups.first_key_value() {
                if at > now {
                    break;
                }
                wakeups.remove(&(at, key));
                if !fifo.woken(ticket) {
                    continue;
                }
                while let Some(item) = fifo.pop_due(at, |item| !cancelled_at.contains_key(item)) {
                    fired.push((at, item));
                    // Firing sometimes arms another timeout at once (a retry without backoff).
                    if item % 5 == 0 && item < 1_000_000 {
                        armed.push((at + length, item + 1_000_000));
                        schedule(fifo.arm(at + length, item + 1_000_000), &mut wakeups);
                    }
                }
                schedule(fifo.rearm(), &mut wakeups);
            }
            if id == steps {
                break;
            }
            armed.push((now + length, id));
            schedule(fifo.arm(now + length, id), &mut wakeups);
            if rng.bernoulli(0.6) {
                // Most are answered: cancel an earlier one (if it is still waiting).
                cancelled_at.entry(rng.below(id as u64 + 1) as u32).or_insert(now);
            }
        }
        let expected: Vec<(Nanos, u32)> =
            armed.iter().copied().filter(|(due, item)| cancelled_at.get(item).is_none_or(|&at| *due <= at)).collect();
        assert!(expected.len() > steps as usize / 4, "the test fires a good share: {}", expected.len());
        assert_eq!(fired, expected, "seed {seed}");
        assert!(fifo.is_empty() && wakeups.is_empty());
    }

    #[test]
    fn every_live_timeout_fires_exactly_at_its_due_in_arm_order() {
        for seed in 0..50 {
            drive(seed, 1_000 + seed * 37, 500);
        }
    }

    #[test]
    fn a_stale_wakeup_is_ignored_and_an_earlier_one_replaces_a_later_one() {
        let mut fifo = TimeoutFifo::with_capacity(2);
        let first = fifo.arm(100, 'a').expect("the first arm schedules a wake-up");
        assert_eq!(first.at, 100);
        assert_eq!(fifo.arm(150, 'b'), None, "one wake-up is live");
        assert!(fifo.woken(first.ticket));
        assert_eq!(fifo.pop_due(100, |_| true), Some('a'));
        // Firing 'a' arms 'c' at 200: a wake-up at 200 is scheduled...
        let late = fifo.arm(200, 'c').expect("no wake-up was live");
        assert_eq!(fifo.pop_due(100, |_| true), None);
        // ...but 'b' is due at 150: rearm replaces it, and the one at 200 goes stale.
        let early = fifo.rearm().expect("an earlier wake-up");
        assert_eq!(early.at, 150);
        assert!(fifo.woken(early.ticket));
        assert!(!fifo.woken(late.ticket), "the replaced wake-up is stale");
        // 'b' was answered meanwhile: it is dropped, 'c' waits for 200.
        assert_eq!(fifo.pop_due(150, |&c| c != 'b'), None);
        assert_eq!(fifo.len(), 1);
        assert_eq!(fifo.rearm().map(|w| w.at), Some(200));
    }
}
