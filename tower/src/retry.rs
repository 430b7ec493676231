//! Retries as the simulator makes them: the simulator's [`RetryClassifier`] decides which
//! outcomes are retried (429 and 529 after the server's retry-after), its [`Backoff`]
//! draws the wait with the configured jitter, any of the five [`RetryBudget`]s may
//! refuse the retry, and a retry that could not finish before the call's deadline
//! (its backoff plus the expected attempt time, an average of recent successes) is
//! not made. The decision is the simulator's own (`policy::retry::decide`), the one the
//! gateway's attempt loop makes: the same checks in the same order, one implementation.
//!
//! Invariants: at most `max_attempts` attempts per call; the budget hears every
//! first attempt (`on_request`), every attempt's end (`on_outcome`) and the end of
//! every retry it granted (`retry_finished`), also when the caller drops the call.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use pin_project_lite::pin_project;
use stampede_kernel::{Nanos, RngStream};
use stampede_policy::backoff::Backoff;
use stampede_policy::classify::{Outcome, RetryClassifier};
use stampede_policy::retry::{decide, FailedAttempt, RetryVerdict};
use stampede_policy::retry_budget::RetryBudget;
use tokio::time::Sleep;
use tower_layer::Layer;
use tower_service::Service;

use crate::clock::{nanos, Clock};
use crate::events::{emit, CallSpan, Event};
use crate::outcome::{Classified, Classify, ErrorsFail};
use crate::shared::Shared;
use crate::BoxError;

/// A backoff of `kind` from `base` (the first retry's delay; the constant delay) to
/// `cap`, as `Duration`s: the simulator's [`Backoff`](stampede_policy::backoff::Backoff)
/// counts nanoseconds, which a service's configuration should not have to.
pub fn backoff(
    kind: stampede_policy::backoff::BackoffKind,
    base: std::time::Duration,
    cap: std::time::Duration,
) -> stampede_policy::backoff::Backoff {
    kind.with(crate::clock::nanos(base), crate::clock::nanos(cap))
}

/// How a call is retried.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RetryConfig {
    /// Attempts in all, the first included (≥ 1).
    pub max_attempts: u32,
    /// The wait before each retry.
    pub backoff: Backoff,
    /// Which outcomes are worth a retry.
    pub classifier: RetryClassifier,
    /// The call's deadline from its start: a retry that could not end before it is
    /// not made. `None`: no deadline.
    pub deadline: Option<Duration>,
}

/// What the retry layer has done, for metrics and tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RetryCounts {
    /// Calls that entered the layer.
    pub calls: u64,
    /// Attempts sent, first attempts included.
    pub attempts: u64,
    /// Attempts after the first.
    pub retries: u64,
    /// Retries the budget refused.
    pub denied_by_budget: u64,
    /// Retries not made because they could not end before the deadline.
    pub denied_by_deadline: u64,
}

/// The state every clone of a retrying service shares.
#[derive(Debug)]
pub struct RetryState {
    /// The retry budget every clone draws from.
    pub budget: RetryBudget,
    pub(crate) rng: RngStream,
    /// An average of successful attempts' durations (0 until the first).
    pub expected_attempt: Nanos,
    /// Calls in flight through the layer (Envoy's budget reads it).
    pub active: u32,
    /// What the layer has done.
    pub counts: RetryCounts,
}

/// The layer.
#[derive(Debug)]
pub struct RetryLayer<C = ErrorsFail> {
    state: Shared<RetryState>,
    config: RetryConfig,
    clock: Clock,
    classify: C,
}

impl<C: Clone> Clone for RetryLayer<C> {
    fn clone(&self) -> Self {
        RetryLayer {
            state: self.state.clone(),
            config: self.config,
            clock: self.clock,
            classify: self.classify.clone(),
        }
    }
}

/// A retry layer; `seed` feeds the jitter and the adaptive throttle's draws.
pub fn retry(config: RetryConfig, budget: RetryBudget, seed: u64) -> RetryLayer<ErrorsFail> {
    assert!(config.max_attempts >= 1, "max_attempts counts the first attempt, so it is at least 1");
    let state = RetryState {
        budget,
        rng: crate::stream(seed, "tower.retry"),
        expected_attempt: 0,
        active: 0,
        counts: RetryCounts::default(),
    };
    RetryLayer { state: Shared::new(state), config, clock: Clock::new(), classify: ErrorsFail }
}

impl<C> RetryLayer<C> {
    /// The shared state, to read the budget and the counts.
    pub fn state(&self) -> &Shared<RetryState> {
        &self.state
    }

    /// Retries configured by `config` on this layer's budget (and counts): another
    /// call site, or call class, sharing one retry budget.
    pub fn sharing_budget(&self, config: RetryConfig) -> RetryLayer<C>
    where
        C: Clone,
    {
        assert!(config.max_attempts >= 1, "max_attempts counts the first attempt, so it is at least 1");
        RetryLayer { state: self.state.clone(), config, clock: self.clock, classify: self.classify.clone() }
    }

    /// The same layer, reading outcomes with `classify`.
    pub fn classify<C2>(self, classify: C2) -> RetryLayer<C2> {
        RetryLayer { state: self.state, config: self.config, clock: self.clock, classify }
    }
}

impl<S, C: Clone> Layer<S> for RetryLayer<C> {
    type Service = Retry<S, C>;

    fn layer(&self, inner: S) -> Retry<S, C> {
        Retry {
            inner,
            state: self.state.clone(),
            config: self.config,
            clock: self.clock,
            classify: self.classify.clone(),
        }
    }
}

/// A retrying service. Its inner service is cloned for each call (as tower's
/// `Retry` does), and the request is cloned for each attempt.
#[derive(Clone, Debug)]
pub struct Retry<S, C> {
    inner: S,
    state: Shared<RetryState>,
    config: RetryConfig,
    clock: Clock,
    classify: C,
}

impl<S, C, Req> Service<Req> for Retry<S, C>
where
    S: Service<Req> + Clone,
    S::Error: Into<BoxError>,
    C: Classify<S::Response, S::Error>,
    Req: Clone,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = RetryFuture<S, Req, C>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Req) -> Self::Future {
        let now = self.clock.now();
        {
            let mut state = self.state.lock();
            state.budget.on_request(now);
            state.active += 1;
            state.counts.calls += 1;
            state.counts.attempts += 1;
        }
        // The ready service takes this call; the clone stays for the next one.
        let clone = self.inner.clone();
        let mut service = std::mem::replace(&mut self.inner, clone);
        let future = service.call(request.clone());
        RetryFuture {
            state: State::Calling { future },
            service,
            request,
            call: CallHold { shared: self.state.clone(), retry_outstanding: false },
            config: self.config,
            clock: self.clock,
            classify: self.classify.clone(),
            attempts: 1,
            span: CallSpan::new(),
            started_at: now,
            attempt_started_at: now,
            previous_backoff: 0,
        }
    }
}

/// A call's place in the shared state: ends it (and a granted retry) even when the
/// caller drops the future.
#[derive(Debug)]
struct CallHold {
    shared: Shared<RetryState>,
    retry_outstanding: bool,
}

impl Drop for CallHold {
    fn drop(&mut self) {
        let mut state = self.shared.lock();
        debug_assert!(state.active > 0, "a call ends once");
        state.active -= 1;
        if self.retry_outstanding {
            state.budget.retry_finished();
        }
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F> {
        Calling { #[pin] future: F },
        Backing { #[pin] sleep: Sleep },
        Ready,
    }
}

pin_project! {
    /// A call through the retry layer: attempts, backoffs, and the answer of the last attempt.
    pub struct RetryFuture<S: Service<Req>, Req, C> {
        #[pin]
        state: State<S::Future>,
        service: S,
        request: Req,
        call: CallHold,
        config: RetryConfig,
        clock: Clock,
        classify: C,
        attempts: u32,
        span: CallSpan,
        started_at: Nanos,
        attempt_started_at: Nanos,
        previous_backoff: Nanos,
    }
}

impl<S, Req, C> Future for RetryFuture<S, Req, C>
where
    S: Service<Req>,
    S::Error: Into<BoxError>,
    C: Classify<S::Response, S::Error>,
    Req: Clone,
{
    type Output = Result<S::Response, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        let _entered = this.span.enter();
        loop {
            match this.state.as_mut().project() {
                StateProj::Calling { future } => {
                    let result = std::task::ready!(future.poll(cx));
                    let now = this.clock.now();
                    let classified = this.classify.classify(result.as_ref());
                    let (decision, event) = {
                        let mut state = this.call.shared.lock();
                        let state = &mut *state;
                        let success = classified.outcome == Outcome::Success;
                        state.budget.on_outcome(now, success);
                        if std::mem::take(&mut this.call.retry_outstanding) {
                            state.budget.retry_finished();
                        }
                        if success {
                            let took = now.saturating_sub(*this.attempt_started_at);
                            state.expected_attempt = if state.expected_attempt == 0 {
                                took
                            } else {
                                (state.expected_attempt as f64 * 0.9 + took as f64 * 0.1) as Nanos
                            };
                            (None, None)
                        } else {
                            let call = CallSoFar {
                                now,
                                attempts: *this.attempts,
                                started_at: *this.started_at,
                                previous_backoff: *this.previous_backoff,
                            };
                            retry_delay(this.config, state, call, classified)
                        }
                    };
                    if let Some(event) = event {
                        emit(event);
                    }
                    let Some(delay) = decision else {
                        this.span.ended(*this.attempts);
                        return Poll::Ready(result.map_err(Into::into));
                    };
                    this.call.retry_outstanding = true;
                    *this.previous_backoff = delay;
                    this.state.set(State::Backing { sleep: tokio::time::sleep(Duration::from_nanos(delay)) });
                }
                StateProj::Backing { sleep } => {
                    std::task::ready!(sleep.poll(cx));
                    this.state.set(State::Ready);
                }
                StateProj::Ready => {
                    if let Err(error) = std::task::ready!(this.service.poll_ready(cx)) {
                        return Poll::Ready(Err(error.into()));
                    }
                    *this.attempts += 1;
                    *this.attempt_started_at = this.clock.now();
                    this.call.shared.lock().counts.attempts += 1;
                    let future = this.service.call(this.request.clone());
                    this.state.set(State::Calling { future });
                }
            }
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct CallSoFar {
    now: Nanos,
    attempts: u32,
    started_at: Nanos,
    previous_backoff: Nanos,
}

/// The wait before the next attempt, or `None` to give up: the simulator's decision
/// (`policy::retry::decide`), the one the gateway's attempt loop makes; and what to
/// tell the event hook once the lock is released.
fn retry_delay(
    config: &RetryConfig,
    state: &mut RetryState,
    call: CallSoFar,
    classified: Classified,
) -> (Option<Nanos>, Option<Event>) {
    let attempt = FailedAttempt {
        now: call.now,
        tries: call.attempts,
        outcome: classified.outcome,
        retry_after: classified.retry_after,
        previous_backoff: call.previous_backoff,
        deadline: config.deadline.map(|deadline| call.started_at.saturating_add(nanos(deadline))),
        expected_attempt: state.expected_attempt,
    };
    let (budget, active) = (&mut state.budget, state.active);
    let verdict = decide(attempt, config.max_attempts, &config.classifier, &config.backoff, &mut state.rng, |rng| {
        budget.try_retry(call.now, active, 0, rng)
    });
    let counts = &mut state.counts;
    match verdict {
        RetryVerdict::After(delay) => {
            counts.retries += 1;
            let event = Event::Retry { attempt: call.attempts + 1, backoff: Duration::from_nanos(delay) };
            (Some(delay), Some(event))
        }
        RetryVerdict::GiveUp => (None, None),
        RetryVerdict::DeniedByDeadline => {
            counts.denied_by_deadline += 1;
            (None, Some(Event::RetryDenied { by_deadline: true }))
        }
        RetryVerdict::DeniedByBudget => {
            counts.denied_by_budget += 1;
            (None, Some(Event::RetryDenied { by_deadline: false }))
        }
    }
}
