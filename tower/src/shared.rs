//! The guard around a policy shared by every clone of a service: one mutex per policy.
//!
//! A policy struct's decision is tens of nanoseconds (the README's policy-decision
//! row) and touches a few cache lines, so a mutex held for exactly one decision is
//! short; per-core shards would split a limit or a budget into pieces that each see
//! a fraction of the traffic and decide differently from the simulated policy. The
//! invariant the guard keeps: every `debug_assert!` of the policy holds, because no
//! two decisions interleave. A poisoned lock (a panic inside a decision, which is a
//! bug the debug assertions caught) is taken over: the state it guards was left by
//! a completed or an asserted transition.

use std::sync::{Arc, Mutex, MutexGuard};

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
    pub fn new(policy: P) -> Self {
        Shared { inner: Arc::new(Mutex::new(policy)) }
    }

    /// The policy, locked for one decision.
    #[inline]
    pub fn lock(&self) -> MutexGuard<'_, P> {
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Reads the policy (a limit, a breaker's state) under the lock.
    pub fn read<T>(&self, f: impl FnOnce(&P) -> T) -> T {
        f(&self.lock())
    }
}
