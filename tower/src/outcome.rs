//! How a response or an error reads to the policies: one of the simulator's
//! [`Outcome`]s, plus the server's retry-after when it gave one. The simulator's
//! models classify the same way, so a breaker or a limiter learns the same lesson
//! from a live 503 as from a simulated one.

use stampede_kernel::Nanos;
use stampede_policy::classify::Outcome;

use crate::clock::nanos;

/// What a policy learns from one attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Classified {
    /// Success, or which kind of failure.
    pub outcome: Outcome,
    /// The server's retry-after, a floor under the next backoff (429 and 503).
    pub retry_after: Option<Nanos>,
    /// The request reached the service. A layer further in that refused it (a
    /// [`crate::Rejected`]) says nothing about the service: a breaker or a limiter
    /// outside it abandons the call instead of learning from it, as the simulator's
    /// gates do with a local refusal.
    pub reached: bool,
}

impl Classified {
    /// An outcome from the service itself.
    pub fn of(outcome: Outcome) -> Self {
        Classified { outcome, retry_after: None, reached: true }
    }
}

/// Reads an attempt's result as an [`Outcome`].
pub trait Classify<Res, E>: Clone {
    /// What one attempt's result says.
    fn classify(&self, result: Result<&Res, &E>) -> Classified;
}

/// Any response is a success; an error is a timeout if it is tokio's `Elapsed` (a
/// `tokio::time::timeout` or a timeout layer), a server error otherwise.
#[derive(Clone, Copy, Debug, Default)]
pub struct ErrorsFail;

impl<Res, E: std::fmt::Debug + 'static> Classify<Res, E> for ErrorsFail {
    fn classify(&self, result: Result<&Res, &E>) -> Classified {
        match result {
            Ok(_) => Classified::of(Outcome::Success),
            Err(error) => error_outcome(error),
        }
    }
}

/// HTTP responses by status, as the simulator's gateway and graph read them: 429 is
/// rate limited, 503 and 529 overloaded, other 5xx a server error, other 4xx a client
/// error (never retried by default), everything else a success; the wait the server
/// asked for is kept in every form providers send it ([`crate::retry_after`]). Errors
/// as [`ErrorsFail`] reads them.
#[derive(Clone, Copy, Debug, Default)]
pub struct HttpStatus;

impl<B, E: std::fmt::Debug + 'static> Classify<http::Response<B>, E> for HttpStatus {
    fn classify(&self, result: Result<&http::Response<B>, &E>) -> Classified {
        let response = match result {
            Ok(response) => response,
            Err(error) => return error_outcome(error),
        };
        let status = response.status().as_u16();
        let outcome = match status {
            429 => Outcome::RateLimited,
            503 | 529 => Outcome::Overloaded,
            500..=599 => Outcome::ServerError,
            400..=499 => Outcome::ClientError,
            _ => Outcome::Success,
        };
        let retry_after = matches!(outcome, Outcome::RateLimited | Outcome::Overloaded)
            .then(|| crate::retry_after::retry_after(response.headers(), std::time::SystemTime::now()))
            .flatten()
            .map(nanos);
        Classified { outcome, retry_after, reached: true }
    }
}

/// A closure as a classifier: `classify_with(|result| …)`.
#[derive(Clone, Copy, Debug)]
pub struct ClassifyWith<F>(pub F);

/// Classifies with `f`, which maps an attempt's result to a [`Classified`].
pub fn classify_with<F>(f: F) -> ClassifyWith<F> {
    ClassifyWith(f)
}

impl<Res, E, F: Fn(Result<&Res, &E>) -> Classified + Clone> Classify<Res, E> for ClassifyWith<F> {
    fn classify(&self, result: Result<&Res, &E>) -> Classified {
        (self.0)(result)
    }
}

/// An error as an outcome: tokio's `Elapsed` and a stream's [`StreamTimeout`](crate::StreamTimeout) are a timeout, a [`crate::Rejected`] a
/// refusal by a layer further in (overloaded, not reached), anything else a server
/// error.
fn error_outcome<E: std::fmt::Debug + 'static>(error: &E) -> Classified {
    let any: &dyn std::any::Any = error;
    let boxed = any.downcast_ref::<crate::BoxError>();
    let is = |check: &dyn Fn(&(dyn std::error::Error + 'static)) -> bool| boxed.is_some_and(|b| check(b.as_ref()));
    if let Some(stream) = boxed.and_then(|b| b.downcast_ref::<crate::stream_end::StreamError>()) {
        // An error event inside a 200 stream says what the provider meant.
        Classified::of(stream.0)
    } else if any.is::<crate::Rejected>() || is(&|e| e.is::<crate::Rejected>()) {
        Classified { outcome: Outcome::Overloaded, retry_after: None, reached: false }
    } else if any.is::<tokio::time::error::Elapsed>()
        || is(&|e| e.is::<tokio::time::error::Elapsed>() || e.is::<crate::stream_end::StreamTimeout>())
    {
        Classified::of(Outcome::Timeout)
    } else {
        Classified::of(Outcome::ServerError)
    }
}
