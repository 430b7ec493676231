//! ② Bulkhead per class: slots and a bounded queue (LIFO by default), CoDel at
//! dequeue, a deadline sweep every 100 ms (`policy::bulkhead`). A release hands the
//! slot to a waiter, which continues its walk from the worklist.

use crate::kernel::sim::Scheduler;
use crate::kernel::slab::SlabKey;
use crate::kernel::time::Nanos;

use crate::policy::bulkhead::{Acquire, Dropped, Waiter};

use super::Entry;
use crate::models::gateway::model::Gateway;
use crate::models::gateway::reason::Reason;
use crate::models::gateway::state::{Call, Event};

impl Gateway<'_> {
    pub(in crate::models::gateway) fn enter_bulkhead(
        &mut self,
        now: Nanos,
        key: SlabKey,
        scheduler: &mut Scheduler<Event>,
    ) -> Entry {
        let &Call { class, deadline, .. } = self.call(key);
        match self.bulkheads[class as usize].try_acquire(now, key.to_bits(), deadline) {
            Acquire::Granted => {
                self.call_mut(key).bulkhead = true;
                Entry::Pass
            }
            Acquire::Queued => {
                self.keep_sweeping(now, scheduler); // a release or a sweep ends the wait
                Entry::Park
            }
            Acquire::QueueFull => Entry::Refuse(Reason::QueueFull),
        }
    }

    pub(in crate::models::gateway) fn release_bulkhead(&mut self, now: Nanos, key: SlabKey) {
        let call = self.call_mut(key);
        if !call.bulkhead {
            return;
        }
        call.bulkhead = false;
        let class = call.class as usize;
        let mut dropped = std::mem::take(&mut self.dropped);
        let handed = self.bulkheads[class].release(now, |waiter: Waiter, why: Dropped| {
            let reason = match why {
                Dropped::DeadlineExpired => Reason::QueueDeadline,
                Dropped::CoDel => Reason::CoDel,
            };
            dropped.push((SlabKey::from_bits(waiter.id), reason));
        });
        self.dropped = dropped;
        if let Some(waiter) = handed {
            let waiting = SlabKey::from_bits(waiter.id);
            self.call_mut(waiting).bulkhead = true;
            self.pass_parked(waiting);
        }
    }

    /// Fails the queued calls whose deadline passed (the periodic sweep).
    pub(in crate::models::gateway) fn sweep_bulkheads(&mut self, now: Nanos) {
        let dropped = &mut self.dropped;
        for bulkhead in &mut self.bulkheads {
            bulkhead.sweep(now, |waiter, _| dropped.push((SlabKey::from_bits(waiter.id), Reason::QueueDeadline)));
        }
    }
}
