//! ⑥ The attempt loop's decision: after a failed attempt (or a refusal by a gate
//! inside the loop), whether to try again and after how long — at most
//! `max_attempts` tries, no retry of a stream past the delivered fraction, the retry
//! classifier (429 honours retry-after as a floor), backoff, never past the call's
//! deadline, and the ratio retry budget. Gates after `retry` in the stack are passed
//! once per attempt; gates before it once per call.

use crate::kernel::slab::SlabKey;
use crate::kernel::time::Nanos;
use crate::policy::classify::RetryDecision;

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
        if tries >= params.max_attempts {
            return None;
        }
        // A stream past this fraction delivered is not worth starting over.
        if params.streamed && feedback.output_used as f64 >= self.p.no_retry_past_delivered * output as f64 {
            return None;
        }
        let honoured = match self.p.classifier.classify(reason.outcome()) {
            RetryDecision::Never => return None,
            RetryDecision::RetryAfterServerDelay => retry_after,
            RetryDecision::Retry => None,
        };
        let delay = params.backoff.delay(tries - 1, previous_backoff, honoured, &mut self.backoff_rng);
        // The retry must fit the deadline with the call it makes: the backoff plus the
        // class's expected call time (an average of its recent successes).
        if now + delay + self.expected_latency[class] > deadline {
            if counted {
                self.results.classes[class].retries_denied_by_deadline += 1;
            }
            return None;
        }
        if let Some(budget) = &mut self.budget {
            if !budget.try_retry() {
                if counted {
                    self.results.classes[class].retries_denied_by_budget += 1;
                }
                return None;
            }
        }
        Some(delay)
    }
}
