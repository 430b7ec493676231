//! ⑥ The attempt loop's decision: after a failed attempt (or a refusal by a gate
//! inside the loop), whether to try again and after how long — at most
//! `max_attempts` tries, no retry of a stream past the delivered fraction, the retry
//! classifier (429 honours retry-after as a floor), backoff, never past the call's
//! deadline, and the ratio retry budget. Gates after `retry` in the stack are passed
//! once per attempt; gates before it once per call.

use crate::kernel::slab::SlabKey;
use crate::kernel::time::Nanos;
use crate::policy::retry::{decide, FailedAttempt, RetryVerdict};

use crate::models::gateway::model::Gateway;
use crate::models::gateway::state::{Call, Ending, Feedback};

impl Gateway<'_> {
    /// The wait before the next attempt, or `None` to stop.
    pub(in crate::models::gateway) fn retry_delay(
        &mut self,
        now: Nanos,
        key: SlabKey,
        feedback: Feedback,
        retry_after: Option<Nanos>,
    ) -> Option<Nanos> {
        let Ending::Failed(reason) = feedback.ending else { return None };
        // The fields read, not a copy of the whole call (the gates' rule).
        let &Call { class, tries, attempts, output, previous_backoff, deadline, counted, .. } = self.call(key);
        let class = class as usize;
        let params = &self.p.classes[class];
        debug_assert!(tries >= attempts && tries > 0);
        // A stream past this fraction delivered is not worth starting over.
        if params.streamed && !self.p.worth_restarting(feedback.output_used, output) {
            return None;
        }
        // The rest is the library's decision (tower's retry layer makes the same). The
        // deadline counts the class's expected call time, an average of its recent successes.
        let attempt = FailedAttempt {
            now,
            tries,
            outcome: reason.outcome(),
            retry_after,
            previous_backoff,
            deadline: Some(deadline),
            expected_attempt: self.expected_latency[class],
        };
        let budget = &mut self.budget;
        let verdict =
            decide(attempt, params.max_attempts, &self.p.classifier, &params.backoff, &mut self.backoff_rng, |_| {
                budget.as_mut().is_none_or(|budget| budget.try_retry())
            });
        let results = &mut self.results.classes[class];
        match verdict {
            RetryVerdict::After(delay) => return Some(delay),
            RetryVerdict::GiveUp => {}
            RetryVerdict::DeniedByDeadline if counted => results.retries_denied_by_deadline += 1,
            RetryVerdict::DeniedByBudget if counted => results.retries_denied_by_budget += 1,
            RetryVerdict::DeniedByDeadline | RetryVerdict::DeniedByBudget => {}
        }
        None
    }
}
