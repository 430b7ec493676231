//! The fallback gate: a call the primary service fails is sent, as it was, to a second
//! service — another tier or model, a cache, a canned answer — the way the simulator's
//! `fallback` gate serves a failed call of a class its fallback (the class's
//! `fallback` class, or the same call on its `fallback_tier`: the `NAME_fallback`
//! copy). What counts as failed is the classifier's: anything but a success, so a 429,
//! a 529, a 500, a timeout or a refusal by a layer further in (a breaker, a bulkhead)
//! all fall back, as they do in the simulation.
//!
//! Place it where the simulation's stack has it: outside the retry loop (`gates =
//! [..., "retry", "fallback"]` lists it innermost-last, and the fallback is reached
//! only after the class's attempts are spent), so a fallback is one more call, not one
//! per attempt. The fallback's answer is degraded: [`FallbackCounts`] keeps how many
//! answers came from it, the number the simulation reports as `turns_degraded`.
//!
//! Each call of the fallback path boxes its future (one allocation per call that
//! falls back is the price of waiting for the primary first); the primary's path
//! allocates only when the primary fails.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use stampede_policy::classify::Outcome;
use tower_layer::Layer;
use tower_service::Service;

use crate::events::{emit, Event};
use crate::outcome::Classify;
use crate::BoxError;

/// How the calls through one fallback ended.
#[derive(Debug, Default)]
pub struct FallbackCounts {
    /// Answered by the primary.
    pub primary: AtomicU64,
    /// The primary failed and the fallback answered: a degraded answer.
    pub degraded: AtomicU64,
    /// Both failed: the caller gets the fallback's error (or its failing answer).
    pub failed: AtomicU64,
}

/// The layer: wraps a primary service with `fallback`, judged by `classify`.
#[derive(Clone, Debug)]
pub struct FallbackLayer<F, C> {
    fallback: F,
    classify: C,
    counts: Arc<FallbackCounts>,
}

/// Sends each call the primary fails to `fallback` (a clone per call); `classify`
/// reads the primary's result (`HttpStatus` for HTTP).
pub fn fallback<F, C>(fallback: F, classify: C) -> FallbackLayer<F, C> {
    FallbackLayer { fallback, classify, counts: Arc::default() }
}

impl<F, C> FallbackLayer<F, C> {
    /// The counts every service this layer builds adds to.
    pub fn counts(&self) -> Arc<FallbackCounts> {
        self.counts.clone()
    }
}

impl<S, F: Clone, C: Clone> Layer<S> for FallbackLayer<F, C> {
    type Service = Fallback<S, F, C>;

    fn layer(&self, primary: S) -> Fallback<S, F, C> {
        Fallback {
            primary,
            fallback: self.fallback.clone(),
            classify: self.classify.clone(),
            counts: self.counts.clone(),
        }
    }
}

/// A primary service with its fallback.
#[derive(Clone, Debug)]
pub struct Fallback<S, F, C> {
    primary: S,
    fallback: F,
    classify: C,
    counts: Arc<FallbackCounts>,
}

impl<S, F, C, Req> Service<Req> for Fallback<S, F, C>
where
    Req: Clone + Send + 'static,
    S: Service<Req>,
    S::Future: Send + 'static,
    S::Response: Send + 'static,
    S::Error: Into<BoxError> + std::fmt::Debug + Send + 'static,
    F: Service<Req, Response = S::Response> + Clone + Send + 'static,
    F::Future: Send + 'static,
    F::Error: Into<BoxError>,
    C: Classify<S::Response, S::Error> + Send + 'static,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.primary.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Req) -> Self::Future {
        let again = request.clone();
        let primary = self.primary.call(request);
        // The clone answers the fallback: the one this service holds stays ready for the next.
        let mut fallback = self.fallback.clone();
        let (classify, counts) = (self.classify.clone(), self.counts.clone());
        Box::pin(async move {
            let result = primary.await;
            if classify.classify(result.as_ref()).outcome == Outcome::Success {
                counts.primary.fetch_add(1, Ordering::Relaxed);
                return result.map_err(Into::into);
            }
            std::future::poll_fn(|cx| fallback.poll_ready(cx)).await.map_err(Into::into)?;
            let answer = fallback.call(again).await.map_err(Into::into);
            let served =
                answer.as_ref().is_ok_and(|r| classify.classify(Ok::<_, &S::Error>(r)).outcome == Outcome::Success);
            let counter = if served { &counts.degraded } else { &counts.failed };
            counter.fetch_add(1, Ordering::Relaxed);
            emit(Event::Fallback { answered: served });
            answer
        })
    }
}
