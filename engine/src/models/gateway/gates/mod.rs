//! The gateway's gates, one file each. A gate owns two moments of a call:
//!
//! * **entering** — [`Entry::Pass`] (the call moves to the next gate), [`Entry::Refuse`]
//!   with a [`Reason`] (a local failure the attempt loop may retry), or
//!   [`Entry::Park`] (the call waits in the gate's queue; a release, a sweep or a
//!   `Resume` event continues it);
//! * **release** — when the attempt (inside the loop) or the call (above it) is over,
//!   innermost first, with the [`Feedback`] the gate learns from: the breaker records
//!   the outcome, the limiter the latency, the quota meter the tokens used.
//!
//! Dispatch is a `match` over [`Gate`] (the data enum, in [`super::gate`]), so a call
//! never goes through `dyn`. Adding a gate: a variant there (with its name), a file with its `enter_…`/`release_…`,
//! one arm in each `match` below, and the reasons it refuses with in
//! [`super::reason`].

mod adaptive;
mod admission;
mod breaker;
mod bulkhead;
mod fallback;
mod quota;
mod retry;

use crate::kernel::sim::Scheduler;
use crate::kernel::slab::SlabKey;
use crate::kernel::time::Nanos;

use super::gate::Gate;
use super::model::Gateway;
use super::reason::Reason;
use super::state::{Event, Feedback};

/// What a gate does with a call that reaches it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Entry {
    Pass,
    Refuse(Reason),
    /// The gate holds the call and will continue it; the walk stops here.
    Park,
}

impl Gateway<'_> {
    /// The call at `key` reaches `gate`. Gates read the few fields they need from the
    /// slab: a copy of the whole call per gate was 5% of an `llm-stack` replica.
    pub(super) fn enter(&mut self, gate: Gate, now: Nanos, key: SlabKey, scheduler: &mut Scheduler<Event>) -> Entry {
        match gate {
            Gate::Admission => self.enter_admission(now, key),
            Gate::Bulkhead => self.enter_bulkhead(now, key, scheduler),
            Gate::Adaptive => self.enter_adaptive(now, key, scheduler),
            Gate::Breaker => self.enter_breaker(now, key),
            Gate::Quota => self.enter_quota(now, key, scheduler),
            // The loop and the fallback act when an attempt or a call ends.
            Gate::Retry | Gate::Fallback => Entry::Pass,
        }
    }

    /// A gate that parked the call lets it through (after marking what it now
    /// holds): the call moves past the gate and continues its walk from the worklist.
    pub(super) fn pass_parked(&mut self, key: SlabKey) {
        self.call_mut(key).pos += 1;
        self.ready.push(key);
    }

    /// Releases what the call holds of `gate`, teaching it `feedback`.
    pub(super) fn release_gate(&mut self, gate: Gate, now: Nanos, key: SlabKey, feedback: Feedback) {
        match gate {
            Gate::Admission => self.release_admission(key),
            Gate::Bulkhead => self.release_bulkhead(now, key),
            Gate::Adaptive => self.release_adaptive(now, key, feedback),
            Gate::Breaker => self.release_breaker(now, key, feedback),
            Gate::Quota => self.release_quota(now, key, feedback),
            Gate::Retry | Gate::Fallback => {}
        }
    }
}
