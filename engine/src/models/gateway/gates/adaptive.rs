//! ③ Adaptive concurrency per class (or per tier: the pooling bug), fed the time to
//! first token the client saw (`policy::limiter`). The limit is a semaphore: a call
//! over it waits (FIFO or LIFO, as the bulkhead) up to the bulkhead's queue size and
//! its deadline. Timeouts and 529s are drops; 429s (quota, not congestion) and 500s
//! teach it nothing.

use crate::kernel::sim::Scheduler;
use crate::kernel::slab::SlabKey;
use crate::kernel::time::Nanos;

use crate::policy::bulkhead::QueueOrder;

use crate::policy::limiter::Signal;

use super::Entry;
use crate::models::gateway::model::Gateway;
use crate::models::gateway::reason::Reason;
use crate::models::gateway::state::{Call, Ending, Event, Feedback};

impl Gateway<'_> {
    pub(in crate::models::gateway) fn enter_adaptive(
        &mut self,
        now: Nanos,
        key: SlabKey,
        scheduler: &mut Scheduler<Event>,
    ) -> Entry {
        let &Call { class, deadline, .. } = self.call(key);
        let limiter = self.limiter_index(class as usize);
        if self.limiters[limiter].try_acquire() {
            self.call_mut(key).limiter = true;
            Entry::Pass
        } else if self.limiter_queues[limiter].len() < self.limiter_queue_capacity[limiter] {
            // Wait for a completion to free a place.
            self.limiter_queues[limiter].push_back((key, deadline));
            let earliest = &mut self.limiter_earliest_deadline[limiter];
            *earliest = (*earliest).min(deadline);
            self.keep_sweeping(now, scheduler);
            Entry::Park
        } else {
            Entry::Refuse(Reason::Limiter)
        }
    }

    pub(in crate::models::gateway) fn release_adaptive(&mut self, now: Nanos, key: SlabKey, feedback: Feedback) {
        let call = self.call_mut(key);
        if !call.limiter {
            return;
        }
        call.limiter = false;
        let class = call.class as usize;
        let index = self.limiter_index(class);
        let limiter = &mut self.limiters[index];
        // Netflix's listener: success, dropped (timeouts, overload), or ignored —
        // a 429 is quota, not congestion, and a 500 is an independent error.
        let signal = match feedback.ending {
            Ending::Success => Some(Signal::Success),
            Ending::Failed(Reason::Http429 | Reason::Http500) => None,
            // The caller's deadline says nothing about the provider.
            Ending::Failed(reason) if reason.is_callers_deadline() => None,
            Ending::Failed(_) => Some(Signal::Dropped),
        };
        match signal.filter(|_| feedback.reached_provider && !feedback.sampled) {
            Some(signal) => limiter.on_complete(now, feedback.sample, signal, &mut self.limiter_rng),
            None => limiter.abandon(),
        }
        self.wake_limiter_waiters(now, index);
    }

    /// Lets waiters through while the limiter has room (LIFO unless the queue order is FIFO).
    fn wake_limiter_waiters(&mut self, now: Nanos, index: usize) {
        while self.limiters[index].in_flight() < self.limiters[index].limit() {
            let queue = &mut self.limiter_queues[index];
            let next = match self.p.bulkhead_order {
                QueueOrder::Fifo => queue.pop_front(),
                _ => queue.pop_back(),
            };
            let Some((key, deadline)) = next else { return };
            if deadline <= now {
                self.dropped.push((key, Reason::Limiter));
                continue;
            }
            let acquired = self.limiters[index].try_acquire();
            debug_assert!(acquired, "the limiter had room");
            self.call_mut(key).limiter = true;
            self.pass_parked(key);
        }
    }

    /// Fails the waiting calls whose deadline passed (the periodic sweep). A queue
    /// whose earliest deadline is still ahead is not walked: the sweep runs ten times
    /// a second and most of the time drops nothing (it was 8% of an llm-stack replica).
    pub(in crate::models::gateway) fn sweep_limiter_queues(&mut self, now: Nanos) {
        let dropped = &mut self.dropped;
        for (queue, earliest) in self.limiter_queues.iter_mut().zip(&mut self.limiter_earliest_deadline) {
            debug_assert!(queue.iter().all(|&(_, deadline)| deadline >= *earliest), "a lower bound of the deadlines");
            if now < *earliest {
                continue;
            }
            let mut next = Nanos::MAX;
            queue.retain(|&(key, deadline)| {
                let expired = deadline <= now;
                if expired {
                    dropped.push((key, Reason::Limiter));
                } else {
                    next = next.min(deadline);
                }
                !expired
            });
            *earliest = next;
        }
    }

    /// The first token of a streamed attempt: the limiter learns its latency now, not
    /// when the stream ends.
    pub(in crate::models::gateway) fn limiter_learns_first_token(&mut self, now: Nanos, class: usize, sample: Nanos) {
        let index = self.limiter_index(class);
        self.limiters[index].observe(now, sample, Signal::Success, &mut self.limiter_rng);
    }
}
