//! The retry decision after a failed attempt, written once for the gateway's attempt
//! loop and `stampede-tower`'s retry layer, so that the library a service ships makes
//! the decision the simulator measured: at most `max_attempts` tries; the classifier
//! (a 429 or 529 may wait at least the server's retry-after); the backoff drawn; no
//! retry that could not end before the deadline (its backoff plus the expected attempt
//! time); then the budget. In that order, and the backoff is drawn whenever the
//! classifier allows a retry, so the random stream advances the same way for every
//! caller. (The graph model's edges decide with their own `retry.on` set and no
//! expected time: see `models/graph/client.rs`.)

use crate::kernel::rng::RngStream;
use crate::kernel::time::Nanos;

use crate::backoff::Backoff;
use crate::classify::{Outcome, RetryClassifier, RetryDecision};

/// A call whose last attempt failed, as the decision reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FailedAttempt {
    /// When it failed.
    pub now: Nanos,
    /// Attempts made so far, the failed one included (≥ 1).
    pub tries: u32,
    /// How the attempt failed, and the server's retry-after if it sent one.
    pub outcome: Outcome,
    /// The server's retry-after, if any: a floor under the next backoff.
    pub retry_after: Option<Nanos>,
    /// The wait before the last retry (decorrelated jitter grows from it; 0 before).
    pub previous_backoff: Nanos,
    /// When the call must be over (absolute), if it has a deadline.
    pub deadline: Option<Nanos>,
    /// What an attempt is expected to take (a running average of successes; 0 unknown).
    pub expected_attempt: Nanos,
}

/// What to do after a failed attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RetryVerdict {
    /// Retry after this wait.
    After(Nanos),
    /// Out of attempts, or the classifier never retries this outcome.
    GiveUp,
    /// The retry could not end before the deadline.
    DeniedByDeadline,
    /// The budget refused it.
    DeniedByBudget,
}

/// The decision. `budget` is asked last, only for a retry that passed every other
/// check, with the same random stream (an adaptive budget draws from it).
pub fn decide(
    attempt: FailedAttempt,
    max_attempts: u32,
    classifier: &RetryClassifier,
    backoff: &Backoff,
    rng: &mut RngStream,
    budget: impl FnOnce(&mut RngStream) -> bool,
) -> RetryVerdict {
    debug_assert!(attempt.tries >= 1, "a failed attempt was made");
    if attempt.tries >= max_attempts {
        return RetryVerdict::GiveUp;
    }
    let honoured = match classifier.classify(attempt.outcome) {
        RetryDecision::Never => return RetryVerdict::GiveUp,
        RetryDecision::RetryAfterServerDelay => attempt.retry_after,
        RetryDecision::Retry => None,
    };
    let delay = backoff.delay(attempt.tries - 1, attempt.previous_backoff, honoured, rng);
    if attempt.deadline.is_some_and(|deadline| attempt.now + delay + attempt.expected_attempt > deadline) {
        return RetryVerdict::DeniedByDeadline;
    }
    if !budget(rng) {
        return RetryVerdict::DeniedByBudget;
    }
    RetryVerdict::After(delay)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::rng::StreamPurpose;

    const MS: Nanos = 1_000_000;

    fn failed(tries: u32, outcome: Outcome) -> FailedAttempt {
        FailedAttempt {
            now: 100 * MS,
            tries,
            outcome,
            retry_after: None,
            previous_backoff: 0,
            deadline: None,
            expected_attempt: 0,
        }
    }

    fn rng() -> RngStream {
        RngStream::derive(1, 0, StreamPurpose::named("test.retry"))
    }

    /// Each check in its order: attempts, classifier, deadline, budget — and the
    /// budget is not asked when an earlier check said no.
    #[test]
    fn every_check_in_its_order() {
        let classifier = RetryClassifier::default();
        let backoff = Backoff::Constant { delay: 10 * MS };
        let decide = |attempt: FailedAttempt, budget: bool| {
            let mut asked = false;
            let verdict = decide(attempt, 3, &classifier, &backoff, &mut rng(), |_| {
                asked = true;
                budget
            });
            (verdict, asked)
        };
        assert_eq!(decide(failed(1, Outcome::ServerError), true), (RetryVerdict::After(10 * MS), true));
        assert_eq!(decide(failed(3, Outcome::ServerError), true), (RetryVerdict::GiveUp, false));
        assert_eq!(decide(failed(1, Outcome::Success), true), (RetryVerdict::GiveUp, false));
        let tight = FailedAttempt {
            deadline: Some(100 * MS + 14 * MS),
            expected_attempt: 5 * MS,
            ..failed(1, Outcome::ServerError)
        };
        assert_eq!(decide(tight, true), (RetryVerdict::DeniedByDeadline, false));
        let enough = FailedAttempt { deadline: Some(100 * MS + 15 * MS), ..tight };
        assert_eq!(decide(enough, true), (RetryVerdict::After(10 * MS), true));
        assert_eq!(decide(failed(1, Outcome::ServerError), false), (RetryVerdict::DeniedByBudget, true));
    }

    /// A 429's retry-after is a floor under the client's own backoff.
    #[test]
    fn a_rate_limit_waits_at_least_the_servers_retry_after() {
        let classifier = RetryClassifier::default();
        assert_eq!(classifier.classify(Outcome::RateLimited), RetryDecision::RetryAfterServerDelay);
        let backoff = Backoff::Constant { delay: 10 * MS };
        let limited = FailedAttempt { retry_after: Some(30 * MS), ..failed(1, Outcome::RateLimited) };
        assert_eq!(decide(limited, 3, &classifier, &backoff, &mut rng(), |_| true), RetryVerdict::After(30 * MS));
    }

    /// The jitter is drawn before the deadline and budget checks: a refused retry
    /// moves the stream as an accepted one does.
    #[test]
    fn the_backoff_is_drawn_whatever_follows() {
        let classifier = RetryClassifier::default();
        let backoff = Backoff::FullJitter { base: 10 * MS, cap: 100 * MS };
        let (mut accepted, mut refused) = (rng(), rng());
        decide(failed(1, Outcome::ServerError), 3, &classifier, &backoff, &mut accepted, |_| true);
        decide(failed(1, Outcome::ServerError), 3, &classifier, &backoff, &mut refused, |_| false);
        assert_eq!(accepted.next_u64(), refused.next_u64());
    }
}
