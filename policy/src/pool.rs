//! A client's connection pool: `size` connections and a bounded queue of requests
//! waiting for one, as HikariCP's `maximumPoolSize` / `connectionTimeout` and Envoy's
//! `max_connections` / `max_pending_requests` bound them. A request takes a free
//! connection only when nobody waits (first come, first served); otherwise it waits
//! if the queue has room, and is refused at once (`pool_full`) when it has none.
//! A waiter leaves when a connection is handed to it, or when it gives up (the wait
//! timeout, its deadline, its caller) — the pool is told with [`ConnectionPool::leave`]
//! and skips its entry later (`T` carries what the owner needs to tell a live waiter
//! from one that left).
//!
//! Invariants (asserted): connections in use ≤ size; waiters counted ≤ max_pending;
//! a connection is free only while nobody waits or a hand-over is due.

use std::collections::VecDeque;

use crate::kernel::time::Nanos;

/// How a pool is sized.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PoolConfig {
    /// Connections.
    pub size: u32,
    /// Requests waiting for a connection at most.
    pub max_pending: u32,
    /// How long a request waits for a connection before it gives up.
    pub wait_timeout: Nanos,
}

/// What a request asking for a connection got.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Acquire {
    /// A connection: send now.
    Granted,
    /// It waits in the queue.
    Queued,
    /// The queue is full: refused at once.
    Full,
}

/// One pool (one caller instance's, on one edge).
#[derive(Clone, Debug)]
pub struct ConnectionPool<T> {
    config: PoolConfig,
    in_use: u32,
    /// Waiters that have not left (the queue may also hold entries of ones that have).
    pending: u32,
    queue: VecDeque<T>,
}

impl<T: Copy> ConnectionPool<T> {
    /// An idle pool.
    pub fn new(config: PoolConfig) -> Self {
        assert!(config.size > 0, "a pool of 0 connections is refused when the scenario is read");
        ConnectionPool { config, in_use: 0, pending: 0, queue: VecDeque::new() }
    }

    /// Its configuration.
    pub fn config(&self) -> PoolConfig {
        self.config
    }

    /// Connections in use.
    pub fn in_use(&self) -> u32 {
        self.in_use
    }

    /// Requests waiting (those that left not counted).
    pub fn pending(&self) -> u32 {
        self.pending
    }

    /// A request asks for a connection; if it must wait, `waiter` is queued.
    pub fn acquire(&mut self, waiter: T) -> Acquire {
        if self.in_use < self.config.size && self.pending == 0 {
            self.in_use += 1;
            return Acquire::Granted;
        }
        if self.pending >= self.config.max_pending {
            return Acquire::Full;
        }
        self.pending += 1;
        self.queue.push_back(waiter);
        debug_assert!(self.pending <= self.config.max_pending);
        Acquire::Queued
    }

    /// A request asks for a connection only if one is free now (a hedge: it does not wait).
    pub fn try_acquire_now(&mut self) -> bool {
        let free = self.in_use < self.config.size && self.pending == 0;
        self.in_use += free as u32;
        free
    }

    /// A connection comes back. Returns whether someone waits: the owner then hands it
    /// over with [`Self::hand_over`] (at once or in an event of its own).
    pub fn release(&mut self) -> bool {
        debug_assert!(self.in_use > 0, "released a connection that was not in use");
        self.in_use -= 1;
        self.pending > 0
    }

    /// A waiter gave up (its timeout, deadline or caller): it no longer counts; its entry
    /// is skipped when reached.
    pub fn leave(&mut self) {
        debug_assert!(self.pending > 0, "left a queue nobody waits in");
        self.pending -= 1;
    }

    /// Hands a free connection to the longest waiter still waiting (`waiting` tells a
    /// live entry from one that left), or `None` if no connection is free or nobody waits.
    pub fn hand_over(&mut self, waiting: impl Fn(&T) -> bool) -> Option<T> {
        if self.in_use >= self.config.size || self.pending == 0 {
            return None;
        }
        while let Some(waiter) = self.queue.pop_front() {
            if waiting(&waiter) {
                self.pending -= 1;
                self.in_use += 1;
                debug_assert!(self.in_use <= self.config.size);
                return Some(waiter);
            }
        }
        debug_assert!(false, "{} waiters counted but none in the queue", self.pending);
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(size: u32, max_pending: u32) -> ConnectionPool<u32> {
        ConnectionPool::new(PoolConfig { size, max_pending, wait_timeout: 1 })
    }

    #[test]
    fn grants_until_full_then_queues_then_refuses() {
        let mut p = pool(2, 1);
        assert_eq!(p.acquire(1), Acquire::Granted);
        assert_eq!(p.acquire(2), Acquire::Granted);
        assert_eq!(p.acquire(3), Acquire::Queued);
        assert_eq!(p.acquire(4), Acquire::Full);
        assert_eq!((p.in_use(), p.pending()), (2, 1));
        assert!(!p.try_acquire_now(), "a hedge does not wait");
    }

    #[test]
    fn a_released_connection_goes_to_the_longest_waiter_first() {
        let mut p = pool(1, 10);
        assert_eq!(p.acquire(0), Acquire::Granted);
        for w in 1..=3 {
            assert_eq!(p.acquire(w), Acquire::Queued);
        }
        assert!(p.release());
        assert_eq!(p.hand_over(|_| true), Some(1));
        assert_eq!(p.hand_over(|_| true), None, "one connection, in use again");
        // A newcomer queues behind the waiters even when a connection is free.
        assert!(p.release());
        assert_eq!(p.acquire(9), Acquire::Queued);
        assert_eq!(p.hand_over(|_| true), Some(2));
    }

    #[test]
    fn waiters_that_left_are_skipped_and_not_counted() {
        let mut p = pool(1, 2);
        assert_eq!(p.acquire(0), Acquire::Granted);
        assert_eq!(p.acquire(1), Acquire::Queued);
        assert_eq!(p.acquire(2), Acquire::Queued);
        p.leave(); // waiter 1 timed out
        assert_eq!(p.pending(), 1);
        assert_eq!(p.acquire(3), Acquire::Queued, "room again for one");
        assert!(p.release());
        assert_eq!(p.hand_over(|&w| w != 1), Some(2));
        assert_eq!(p.pending(), 1);
    }
}
