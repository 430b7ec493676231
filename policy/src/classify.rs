//! Call outcomes and which of them are worth retrying.

/// How a call to a dependency ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// Answered.
    Success,
    /// 429: the dependency is healthy and asks us to slow down.
    RateLimited,
    /// 529 (or 503): the dependency's fleet is overloaded.
    Overloaded,
    /// 500: a transient server error.
    ServerError,
    /// No answer in time (connect, first token, inter-token or total).
    Timeout,
    /// Any other 4xx: the request itself is wrong.
    ClientError,
}

impl Outcome {
    /// Every outcome, for per-outcome arrays and tests.
    pub const ALL: [Outcome; 6] = [
        Outcome::Success,
        Outcome::RateLimited,
        Outcome::Overloaded,
        Outcome::ServerError,
        Outcome::Timeout,
        Outcome::ClientError,
    ];

    /// True for everything but success.
    pub fn is_failure(self) -> bool {
        self != Outcome::Success
    }
}

/// What to do after an outcome.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RetryDecision {
    /// Retry, waiting at least the server's retry-after.
    RetryAfterServerDelay,
    /// Retry after the client's own backoff.
    Retry,
    /// Do not retry.
    Never,
}

/// Outcome → retry decision; every entry configurable.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RetryClassifier {
    /// What to do after a 429.
    pub rate_limited: RetryDecision,
    /// What to do after a 529 or 503.
    pub overloaded: RetryDecision,
    /// What to do after a 500.
    pub server_error: RetryDecision,
    /// What to do after a timeout.
    pub timeout: RetryDecision,
    /// What to do after a 4xx other than 429.
    pub client_error: RetryDecision,
}

impl Default for RetryClassifier {
    /// 429 and 529 retry after the server's delay, 500 and timeouts retry, other
    /// 4xx never.
    fn default() -> Self {
        RetryClassifier {
            rate_limited: RetryDecision::RetryAfterServerDelay,
            overloaded: RetryDecision::RetryAfterServerDelay,
            server_error: RetryDecision::Retry,
            timeout: RetryDecision::Retry,
            client_error: RetryDecision::Never,
        }
    }
}

impl RetryClassifier {
    /// Every failure retried at once, whatever the server says, and never a client
    /// error: the naive clients (the gateway's, the cluster's).
    pub const EVERY_FAILURE: RetryClassifier = RetryClassifier {
        rate_limited: RetryDecision::Retry,
        overloaded: RetryDecision::Retry,
        server_error: RetryDecision::Retry,
        timeout: RetryDecision::Retry,
        client_error: RetryDecision::Never,
    };

    /// The decision for `outcome`; success is never retried.
    #[inline]
    pub fn classify(&self, outcome: Outcome) -> RetryDecision {
        match outcome {
            Outcome::Success => RetryDecision::Never,
            Outcome::RateLimited => self.rate_limited,
            Outcome::Overloaded => self.overloaded,
            Outcome::ServerError => self.server_error,
            Outcome::Timeout => self.timeout,
            Outcome::ClientError => self.client_error,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_classification_and_overrides() {
        let c = RetryClassifier::default();
        assert_eq!(c.classify(Outcome::RateLimited), RetryDecision::RetryAfterServerDelay);
        assert_eq!(c.classify(Outcome::Overloaded), RetryDecision::RetryAfterServerDelay);
        assert_eq!(c.classify(Outcome::ServerError), RetryDecision::Retry);
        assert_eq!(c.classify(Outcome::Timeout), RetryDecision::Retry);
        assert_eq!(c.classify(Outcome::ClientError), RetryDecision::Never);
        assert_eq!(c.classify(Outcome::Success), RetryDecision::Never);
        let strict = RetryClassifier { timeout: RetryDecision::Never, ..c };
        assert_eq!(strict.classify(Outcome::Timeout), RetryDecision::Never);
    }
}
