//! ⑤ Client quota meters per tier — one fleet-wide set when coordinated, one per
//! instance when split (`policy::quota`): reserve `max_tokens`, wait up to the
//! longest wait, and reconcile the unused reservation when the attempt ends (a 429 or
//! 529 never reached a server, so its reservation is cancelled).

use crate::kernel::sim::Scheduler;
use crate::kernel::slab::SlabKey;
use crate::kernel::time::Nanos;

use crate::policy::quota::Reserve;

use super::Entry;
use crate::models::gateway::model::Gateway;
use crate::models::gateway::reason::Reason;
use crate::models::gateway::state::{Ending, Event, Feedback};

impl Gateway<'_> {
    pub(in crate::models::gateway) fn enter_quota(
        &mut self,
        now: Nanos,
        key: SlabKey,
        scheduler: &mut Scheduler<Event>,
    ) -> Entry {
        let call = self.call(key);
        let (class, counted, quota_waited) = (call.class as usize, call.counted, call.quota_waited);
        let meter = self.meter_index(call);
        let input = self.metered_input(call);
        let max_tokens = self.p.classes[class].max_tokens;
        match self.meters[meter].reserve(now, input, max_tokens) {
            Reserve::Granted(reservation) => {
                if counted {
                    self.results.classes[class].tokens_reserved += max_tokens;
                }
                let call = self.call_mut(key);
                call.reservation = Some(reservation);
                call.meter = meter as u16;
                Entry::Pass
            }
            Reserve::Wait(wait) if quota_waited + wait <= self.p.quota.longest_wait => {
                self.call_mut(key).quota_waited += wait;
                scheduler.at(now + wait, Event::Resume { call: key });
                Entry::Park
            }
            Reserve::Wait(_) | Reserve::Refused { .. } => Entry::Refuse(Reason::LocalQuota),
        }
    }

    pub(in crate::models::gateway) fn release_quota(&mut self, now: Nanos, key: SlabKey, feedback: Feedback) {
        let call = self.call_mut(key);
        let Some(reservation) = call.reservation.take() else { return };
        let (class, counted) = (call.class as usize, call.counted);
        // The meter that granted it, even if a coordinator outage began or ended since.
        let meter = call.meter as usize;
        let sent =
            feedback.reached_provider && !matches!(feedback.ending, Ending::Failed(Reason::Http429 | Reason::Http529));
        if !sent {
            self.meters[meter].cancel(now, reservation);
        } else if self.p.reconcile {
            self.meters[meter].reconcile(now, reservation, feedback.output_used);
            if counted {
                self.results.classes[class].tokens_handed_back +=
                    reservation.max_tokens - feedback.output_used.min(reservation.max_tokens);
            }
        }
    }
}
