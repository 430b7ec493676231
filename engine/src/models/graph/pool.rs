//! Connection pools on edges: an attempt takes a connection from its caller
//! instance's pool before it is sent (a workload's clients share one pool), waits in
//! the pool's queue when none is free, and is refused when the queue is full or its
//! wait times out. The connection goes back when the caller stops waiting for the
//! attempt; a waiter then gets it in an event of its own, so a hand-over never runs
//! inside another call's bookkeeping.
//!
//! Invariants: a call waits for at most one connection (`waiting_for_connection`, its
//! wait timed by its `hedge_timer`, which is free then: no hedge goes before the
//! primary); hedges never wait (sent only when a connection is free); every attempt on
//! an edge with a pool holds a connection of its call's pool while its caller waits.

use crate::kernel::sim::Scheduler;
use crate::kernel::slab::SlabKey;
use crate::kernel::time::{Nanos, NANOS_PER_SEC};
use crate::kernel::timer::TimerTicket;
use crate::policy::pool::Acquire;

use super::model::Graph;
use super::params::Failure;
use super::state::{Call, Event, PoolWaiter, NO_POOL};

/// What asking the pool gave a send.
pub(super) enum Connection {
    /// Send, holding this pool's connection (`NO_POOL`: the edge has no pool).
    Held(u32),
    /// Not now: the call waits in the queue, or the attempt was refused (already
    /// handled).
    NotNow,
}

impl Graph<'_> {
    /// The pool a call on edge `e` draws from: its caller instance's (the workload
    /// clients' one for an entry request), or `None` without a pool.
    pub(super) fn pool_of(&self, e: usize, call: &Call) -> Option<usize> {
        let first = self.edges[e].first_pool;
        if first == NO_POOL {
            return None;
        }
        let local = match (call.parent, self.p.edges[e].from) {
            (Some(job), Some(from)) => {
                let instance = self.jobs.get(job).expect("a live call's job is live").instance;
                instance - self.services[from as usize].first_instance
            }
            _ => 0,
        };
        Some((first + local) as usize)
    }

    /// Asks `call`'s pool on edge `e` for a connection for an attempt (a hedge only
    /// takes a free one; the rest wait or are refused as the pool says).
    pub(super) fn connect(
        &mut self,
        now: Nanos,
        call: SlabKey,
        hedge: bool,
        granted: bool,
        scheduler: &mut Scheduler<Event>,
    ) -> Connection {
        let c = *self.calls.get(call).expect("live call");
        let e = c.edge as usize;
        let Some(pool) = self.pool_of(e, &c) else { return Connection::Held(NO_POOL) };
        if hedge {
            if self.pools[pool].try_acquire_now() {
                self.pool_level(now, pool, 1, 0);
                self.count_acquired(&c, 0);
                return Connection::Held(pool as u32);
            }
            if granted {
                self.edges[e].budget.retry_finished();
            }
            return Connection::NotNow;
        }
        debug_assert!(
            c.outstanding == 0 && !c.waiting_for_connection && !c.hedge_timer.is_armed(),
            "a primary send waits on nothing else"
        );
        let ticket = self.calls.get_mut(call).expect("live call").hedge_timer.arm();
        match self.pools[pool].acquire(PoolWaiter { call, ticket, granted, since: now }) {
            Acquire::Granted => {
                self.pool_level(now, pool, 1, 0);
                self.calls.get_mut(call).expect("live call").hedge_timer.cancel();
                self.count_acquired(&c, 0);
                Connection::Held(pool as u32)
            }
            Acquire::Queued => {
                self.pool_level(now, pool, 0, 1);
                self.calls.get_mut(call).expect("live call").waiting_for_connection = true;
                let wait = self.pools[pool].config().wait_timeout.min(c.deadline.saturating_sub(now));
                scheduler.after(wait, Event::PoolExpiry { call, ticket });
                Connection::NotNow
            }
            Acquire::Full => {
                self.calls.get_mut(call).expect("live call").hedge_timer.cancel();
                if c.counted {
                    self.edges[e].results.pool_full += 1;
                }
                if granted {
                    self.edges[e].budget.retry_finished();
                }
                self.refused_before_sending(now, call, Failure::Refused, scheduler);
                Connection::NotNow
            }
        }
    }

    fn count_acquired(&mut self, c: &Call, waited: Nanos) {
        if c.counted {
            let results = &mut self.edges[c.edge as usize].results;
            results.pool_acquired += 1;
            if waited > 0 {
                results.pool_waited += 1;
                results.pool_wait_s += waited as f64 / NANOS_PER_SEC as f64;
            }
        }
    }

    /// Connections in use and attempts waiting on `pool`'s edge change at `now`.
    fn pool_level(&mut self, now: Nanos, pool: usize, in_use: i64, waiting: i64) {
        let edge = &mut self.edges[self.pool_edges[pool] as usize];
        if in_use != 0 {
            edge.pool_in_use.as_mut().expect("a pool's edge has its levels").change(now, in_use);
        }
        if waiting != 0 {
            edge.pool_waiting.as_mut().expect("a pool's edge has its levels").change(now, waiting);
        }
    }

    /// Gives back a connection (`NO_POOL`: none held); a waiter gets it in an event.
    pub(super) fn release_connection(&mut self, now: Nanos, pool: u32, scheduler: &mut Scheduler<Event>) {
        if pool == NO_POOL {
            return;
        }
        self.pool_level(now, pool as usize, -1, 0);
        if self.pools[pool as usize].release() {
            scheduler.after(0, Event::PoolHandOver { pool });
        }
    }

    /// Hands pool `pool`'s free connections to its longest waiters, whose attempts go.
    pub(super) fn pool_hand_over(&mut self, now: Nanos, pool: usize, scheduler: &mut Scheduler<Event>) {
        loop {
            let calls = &self.calls;
            let waiting = |w: &PoolWaiter| {
                calls.get(w.call).is_some_and(|c| c.waiting_for_connection && c.hedge_timer.is_live(w.ticket))
            };
            let Some(waiter) = self.pools[pool].hand_over(waiting) else { break };
            self.pool_level(now, pool, 1, -1);
            let c = self.calls.get_mut(waiter.call).expect("a waiter's call is live");
            c.hedge_timer.cancel();
            c.waiting_for_connection = false;
            let c = *c;
            self.count_acquired(&c, now - waiter.since);
            self.send_attempt(now, waiter.call, false, waiter.granted, Some(pool as u32), scheduler);
        }
    }

    /// `call` stops waiting for a connection: past its deadline it timed out, else the
    /// pool's wait timeout refused it; either may be retried.
    pub(super) fn pool_expiry(
        &mut self,
        now: Nanos,
        call: SlabKey,
        ticket: TimerTicket,
        scheduler: &mut Scheduler<Event>,
    ) {
        let Some(c) = self.calls.get_mut(call) else { return };
        if !c.waiting_for_connection || !c.hedge_timer.fire(ticket) {
            return;
        }
        c.waiting_for_connection = false;
        let c = *c;
        let e = c.edge as usize;
        let pool = self.pool_of(e, &c).expect("a waiter has a pool");
        self.pools[pool].leave();
        self.pool_level(now, pool, 0, -1);
        let failure = if now >= c.deadline {
            Failure::Timeout
        } else {
            if c.counted {
                self.edges[e].results.pool_timeouts += 1;
            }
            Failure::Refused
        };
        self.refused_before_sending(now, call, failure, scheduler);
    }

    /// The attempt the pool would not send counts as one (the retry policy's
    /// `max_attempts` bounds how often a full pool is asked); it failed for `failure`.
    fn refused_before_sending(
        &mut self,
        now: Nanos,
        call: SlabKey,
        failure: Failure,
        scheduler: &mut Scheduler<Event>,
    ) {
        let cause = self.callee(self.calls.get(call).expect("live call").edge as usize, failure);
        let c = self.calls.get_mut(call).expect("live call");
        c.tries += 1;
        (c.last_failure, c.last_cause) = (failure, cause);
        self.attempts_exhausted(now, call, failure, scheduler);
    }

    /// `call` ends while waiting for a connection: it leaves the queue.
    pub(super) fn leave_pool(&mut self, now: Nanos, call: SlabKey) {
        let c = *self.calls.get(call).expect("live call");
        debug_assert!(c.waiting_for_connection);
        let pool = self.pool_of(c.edge as usize, &c).expect("a waiter has a pool");
        self.pools[pool].leave();
        self.pool_level(now, pool, 0, -1);
        let c = self.calls.get_mut(call).expect("live call");
        c.waiting_for_connection = false;
        c.hedge_timer.cancel();
    }
}
