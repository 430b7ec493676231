//! A bulkhead: a fixed number of slots for one class of work, and a bounded wait
//! queue in front of it with FIFO, LIFO or adaptive-LIFO order, CoDel, and a deadline
//! sweep.
//!
//! * Adaptive LIFO (Facebook's): FIFO while the queue drains quickly, LIFO while a
//!   queue stands (its oldest waiter has waited longer than the standing threshold),
//!   so that under overload the freshest requests — whose callers are still waiting —
//!   are served first.
//! * CoDel (RFC 8289): when the sojourn time of dequeued waiters stays above
//!   `target` for an `interval`, drop waiters at dequeue, spaced `interval/√count`.
//! * Deadline sweep: a waiter whose deadline has passed is dropped, never served.
//!
//! The queue's storage is allocated once (its capacity) and never grows.
//! Invariants (asserted): in use ≤ slots; queued ≤ queue capacity; waiters queue
//! only while every slot is taken.

use std::collections::VecDeque;

use crate::codel::CoDel;
pub use crate::codel::CoDelConfig;
use crate::kernel::time::Nanos;

/// Which waiter a freed slot goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueueOrder {
    /// First come, first served.
    Fifo,
    /// Last come, first served: under a standing queue the freshest request is served.
    Lifo,
    /// LIFO only while a queue stands, FIFO otherwise.
    AdaptiveLifo {
        /// How long the oldest waiter must have waited for the queue to count as standing.
        standing_after: Nanos,
    },
}

/// Bulkhead parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BulkheadConfig {
    /// Requests served at once.
    pub slots: u32,
    /// Requests that may wait for a slot.
    pub queue_capacity: u32,
    /// Which waiter a freed slot goes to.
    pub order: QueueOrder,
    /// Drop waiters by CoDel's rule; `None`: only deadlines drop them.
    pub codel: Option<CoDelConfig>,
}

/// A queued request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Waiter {
    /// The caller's handle for the request (a slab key's bits, say).
    pub id: u64,
    /// When it joined the queue.
    pub enqueued_at: Nanos,
    /// Absolute deadline; the waiter is dropped once it has passed.
    pub deadline: Nanos,
}

/// The answer to an acquire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Acquire {
    /// A slot is yours now.
    Granted,
    /// You wait; a later `release` hands you the slot or drops you.
    Queued,
    /// No slot and no room to wait.
    QueueFull,
}

/// Why a waiter was dropped without being served.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dropped {
    /// Its deadline passed while it waited.
    DeadlineExpired,
    /// CoDel dropped it: the queue had stood above its target for an interval.
    CoDel,
}

/// A bulkhead with its wait queue.
#[derive(Clone, Debug)]
pub struct Bulkhead {
    config: BulkheadConfig,
    in_use: u32,
    queue: VecDeque<Waiter>,
    codel: Option<CoDel>,
    /// A lower bound of the waiters' deadlines (`Nanos::MAX` when none): a sweep
    /// with nothing due does not walk the queue.
    earliest_deadline: Nanos,
}

impl Bulkhead {
    /// A bulkhead with `config`, every slot free.
    pub fn new(config: BulkheadConfig) -> Self {
        assert!(config.slots > 0, "a bulkhead needs at least one slot");
        Bulkhead {
            config,
            in_use: 0,
            queue: VecDeque::with_capacity(config.queue_capacity as usize),
            codel: config.codel.map(CoDel::new),
            earliest_deadline: Nanos::MAX,
        }
    }

    /// Slots in use.
    pub fn in_use(&self) -> u32 {
        self.in_use
    }

    /// Waiters queued.
    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    /// Asks for a slot for request `id`, which gives up at `deadline`.
    #[inline]
    pub fn try_acquire(&mut self, now: Nanos, id: u64, deadline: Nanos) -> Acquire {
        let outcome = if self.in_use < self.config.slots {
            debug_assert!(self.queue.is_empty(), "a waiter queued beside a free slot");
            self.in_use += 1;
            Acquire::Granted
        } else if self.queue.len() < self.config.queue_capacity as usize {
            self.queue.push_back(Waiter { id, enqueued_at: now, deadline });
            self.earliest_deadline = self.earliest_deadline.min(deadline);
            Acquire::Queued
        } else {
            Acquire::QueueFull
        };
        self.check();
        outcome
    }

    /// Frees a slot. If a waiter is eligible, the slot passes to it and it is
    /// returned (it now holds the slot); waiters dropped on the way are reported
    /// to `on_drop`.
    #[inline]
    pub fn release(&mut self, now: Nanos, mut on_drop: impl FnMut(Waiter, Dropped)) -> Option<Waiter> {
        debug_assert!(self.in_use > 0, "release without acquire");
        while let Some(waiter) = self.pop_next(now) {
            if waiter.deadline <= now {
                on_drop(waiter, Dropped::DeadlineExpired);
                continue;
            }
            if self.codel_drops(now, waiter) {
                on_drop(waiter, Dropped::CoDel);
                continue;
            }
            self.check();
            return Some(waiter); // the slot passes straight to the waiter
        }
        self.in_use -= 1;
        self.check();
        None
    }

    /// Drops every waiter whose deadline has passed (call it from a timer so that
    /// expired waiters leave even when no slot frees up).
    pub fn sweep(&mut self, now: Nanos, mut on_drop: impl FnMut(Waiter, Dropped)) {
        debug_assert!(self.queue.iter().all(|w| w.deadline >= self.earliest_deadline), "a lower bound");
        if now < self.earliest_deadline {
            return; // nothing is due: the queue is not walked
        }
        let mut next = Nanos::MAX;
        self.queue.retain(|waiter| {
            let expired = waiter.deadline <= now;
            if expired {
                on_drop(*waiter, Dropped::DeadlineExpired);
            } else {
                next = next.min(waiter.deadline);
            }
            !expired
        });
        self.earliest_deadline = next;
    }

    fn pop_next(&mut self, now: Nanos) -> Option<Waiter> {
        let lifo = match self.config.order {
            QueueOrder::Fifo => false,
            QueueOrder::Lifo => true,
            QueueOrder::AdaptiveLifo { standing_after } => {
                self.queue.front().is_some_and(|oldest| now - oldest.enqueued_at > standing_after)
            }
        };
        if lifo {
            self.queue.pop_back()
        } else {
            self.queue.pop_front()
        }
    }

    /// CoDel's verdict on the waiter about to be served.
    fn codel_drops(&mut self, now: Nanos, waiter: Waiter) -> bool {
        let queue_empty_after = self.queue.is_empty();
        self.codel.as_mut().is_some_and(|codel| codel.should_drop(now, now - waiter.enqueued_at, queue_empty_after))
    }

    #[inline]
    fn check(&self) {
        debug_assert!(self.in_use <= self.config.slots, "more slots in use than exist");
        debug_assert!(self.queue.len() <= self.config.queue_capacity as usize, "queue over capacity");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MS: Nanos = 1_000_000;
    const FAR: Nanos = u64::MAX;

    fn bulkhead(order: QueueOrder, codel: Option<CoDelConfig>) -> Bulkhead {
        Bulkhead::new(BulkheadConfig { slots: 2, queue_capacity: 3, order, codel })
    }

    #[test]
    fn grants_up_to_capacity_then_queues_then_rejects() {
        let mut b = bulkhead(QueueOrder::Fifo, None);
        assert_eq!(b.try_acquire(0, 1, FAR), Acquire::Granted);
        assert_eq!(b.try_acquire(0, 2, FAR), Acquire::Granted);
        for id in 3..6 {
            assert_eq!(b.try_acquire(0, id, FAR), Acquire::Queued);
        }
        assert_eq!(b.try_acquire(0, 6, FAR), Acquire::QueueFull);
        assert_eq!(b.release(MS, |_, _| panic!("nothing expires")).map(|w| w.id), Some(3), "FIFO serves the oldest");
        assert_eq!(b.in_use(), 2, "the slot passed to the waiter");
    }

    #[test]
    fn lifo_serves_the_newest_and_adaptive_lifo_only_when_a_queue_stands() {
        let mut b = bulkhead(QueueOrder::Lifo, None);
        (1..=5).for_each(|id| {
            b.try_acquire(0, id, FAR);
        });
        assert_eq!(b.release(MS, |_, _| {}).map(|w| w.id), Some(5));

        let mut b = bulkhead(QueueOrder::AdaptiveLifo { standing_after: 10 * MS }, None);
        (1..=5).for_each(|id| {
            b.try_acquire(0, id, FAR);
        });
        assert_eq!(b.release(5 * MS, |_, _| {}).map(|w| w.id), Some(3), "short wait: FIFO");
        assert_eq!(b.release(50 * MS, |_, _| {}).map(|w| w.id), Some(5), "standing queue: LIFO");
    }

    #[test]
    fn an_expired_waiter_is_dropped_never_served() {
        let mut b = bulkhead(QueueOrder::Fifo, None);
        b.try_acquire(0, 1, FAR);
        b.try_acquire(0, 2, FAR);
        b.try_acquire(0, 3, 5 * MS);
        b.try_acquire(0, 4, FAR);
        let mut dropped = Vec::new();
        let next = b.release(5 * MS, |w, why| dropped.push((w.id, why)));
        assert_eq!(dropped, vec![(3, Dropped::DeadlineExpired)]);
        assert_eq!(next.map(|w| w.id), Some(4));
        // The sweep removes expired waiters even when no slot frees.
        b.try_acquire(6 * MS, 5, 7 * MS);
        let mut swept = Vec::new();
        b.sweep(8 * MS, |w, why| swept.push((w.id, why)));
        assert_eq!(swept, vec![(5, Dropped::DeadlineExpired)]);
        assert_eq!(b.queued(), 0);
    }

    #[test]
    fn codel_drops_under_a_standing_queue_with_shrinking_spacing() {
        let codel = CoDelConfig { target: 5 * MS, interval: 100 * MS };
        let mut b = Bulkhead::new(BulkheadConfig {
            slots: 1,
            queue_capacity: 10_000,
            order: QueueOrder::Fifo,
            codel: Some(codel),
        });
        b.try_acquire(0, 0, FAR);
        // Arrivals every 1 ms, service every 2 ms: the queue stands and grows.
        let mut drops = Vec::new();
        let mut served = 0;
        for ms in 1..=2000u64 {
            let now = ms * MS;
            b.try_acquire(now, ms, FAR);
            if ms % 2 == 0 && b.release(now, |_, why| drops.push((now, why))).is_some() {
                served += 1;
            }
        }
        assert!(served > 900);
        assert!(!drops.is_empty(), "CoDel dropped from the standing queue");
        assert!(drops.iter().all(|(_, why)| *why == Dropped::CoDel));
        // The first drop comes one interval after the sojourn first exceeded the target.
        assert!(drops[0].0 >= 100 * MS, "first drop at {} ms", drops[0].0 / MS);
        // Drop spacing shrinks as interval/√count.
        let gaps: Vec<Nanos> = drops.windows(2).map(|w| w[1].0 - w[0].0).take(6).collect();
        assert!(gaps.windows(2).all(|g| g[1] <= g[0]), "{gaps:?}");
        assert!(gaps[0] >= 70 * MS && gaps[0] <= 102 * MS, "first gap ≈ 100/√2 ms: {gaps:?}");
    }

    proptest! {
        #[test]
        fn never_exceeds_its_slots(ops in proptest::collection::vec((0u64..5_000_000, any::<bool>(), 0u64..20_000_000), 1..400)) {
            let mut b = Bulkhead::new(BulkheadConfig {
                slots: 3,
                queue_capacity: 4,
                order: QueueOrder::AdaptiveLifo { standing_after: MS },
                codel: Some(CoDelConfig { target: MS, interval: 10 * MS }),
            });
            let mut now = 0;
            let mut held = 0u32;
            for (i, (dt, acquire, patience)) in ops.into_iter().enumerate() {
                now += dt;
                if acquire {
                    if b.try_acquire(now, i as u64, now + patience) == Acquire::Granted { held += 1; }
                } else if held > 0 && b.release(now, |_, _| {}).is_none() {
                    held -= 1;
                }
                prop_assert!(b.in_use() <= 3);
                prop_assert_eq!(b.in_use(), held);
                prop_assert!(b.queued() <= 4);
            }
        }
    }
}
