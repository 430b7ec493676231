//! ④ A circuit breaker per class (`policy::breaker`): an open breaker refuses; a
//! permit's outcome is recorded on release. 429s are not failures unless
//! `count_rate_limited`; a call that never reached the provider gives its permit back.

use crate::kernel::slab::SlabKey;
use crate::kernel::time::Nanos;
use crate::policy::classify::Outcome;

use super::Entry;
use crate::models::gateway::model::Gateway;
use crate::models::gateway::reason::Reason;
use crate::models::gateway::state::{Ending, Feedback};

impl Gateway<'_> {
    pub(in crate::models::gateway) fn enter_breaker(&mut self, now: Nanos, key: SlabKey) -> Entry {
        let class = self.call(key).class as usize;
        let acquired = self.breakers[class].try_acquire(now);
        self.trace_breaker(now, class);
        match acquired {
            Some(permit) => {
                self.call_mut(key).permit = Some(permit);
                Entry::Pass
            }
            None => Entry::Refuse(Reason::BreakerOpen),
        }
    }

    pub(in crate::models::gateway) fn release_breaker(&mut self, now: Nanos, key: SlabKey, feedback: Feedback) {
        let call = self.call_mut(key);
        let Some(permit) = call.permit.take() else { return };
        let class = call.class as usize;
        let breaker = &mut self.breakers[class];
        let callers_deadline = matches!(feedback.ending, Ending::Failed(reason) if reason.is_callers_deadline());
        if feedback.reached_provider && !callers_deadline {
            let outcome = match feedback.ending {
                Ending::Success => Outcome::Success,
                Ending::Failed(reason) => reason.outcome(),
            };
            breaker.record(now, permit, outcome, feedback.duration);
        } else {
            breaker.abandon(permit);
        }
        self.trace_breaker(now, class);
    }
}
