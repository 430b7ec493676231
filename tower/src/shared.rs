//! The guard around a policy shared by every clone of a service: one mutex per policy.
//!
//! A policy struct's decision is tens of nanoseconds (the README's policy-decision
//! row) and touches a few cache lines, so a mutex held for exactly one decision is
//! short. Per-core shards would split a limit or a budget into pieces that each see
//! a fraction of the traffic and decide differently from the simulated policy, and a
//! breaker's window must see every call; so one lock, and the lock chosen by
//! measurement (`benches/benches/tower.rs`, eight tokio tasks sharing one layer on a
//! worker per core): parking_lot's mutex, which spins briefly before it parks, took
//! 240-390 ns per request per layer where std's took 560-1,240 ns in the same quick
//! runs, and the same on one thread (95-160 ns).
//!
//! The invariant the guard keeps: every `debug_assert!` of the policy holds, because
//! no two decisions interleave. parking_lot does not poison: a panic inside a
//! decision (a bug a debug assertion caught) leaves the state of a completed or an
//! asserted transition, and the next request goes on from it.

use std::sync::Arc;

use parking_lot::{Mutex, MutexGuard};

/// A policy (with its random stream) shared by a layer and every service it builds.
#[derive(Debug)]
pub struct Shared<P> {
    inner: Arc<Mutex<P>>,
}

impl<P> Clone for Shared<P> {
    fn clone(&self) -> Self {
        Shared { inner: Arc::clone(&self.inner) }
    }
}

impl<P> Shared<P> {
    /// `policy`, shared by every clone.
    pub fn new(policy: P) -> Self {
        Shared { inner: Arc::new(Mutex::new(policy)) }
    }

    /// The policy, locked for one decision.
    #[inline]
    pub fn lock(&self) -> MutexGuard<'_, P> {
        self.inner.lock()
    }

    /// Reads the policy (a limit, a breaker's state) under the lock.
    pub fn read<T>(&self, f: impl FnOnce(&P) -> T) -> T {
        f(&self.lock())
    }
}
