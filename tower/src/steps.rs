//! A stack whose order is read at run time, without boxing: the LLM gateway's
//! `stack.gates` lists its defences in any order, so each place in the stack is a
//! [`Step`] — any one of the layers, or none — and the stack is [`STEPS`] places
//! deep whatever the order. A step's service and future are enums over the layers'
//! own, so a request allocates nothing more than the layers themselves do.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use pin_project_lite::pin_project;
use tower_layer::Layer;
use tower_service::Service;

use crate::admission::{AdmissionFuture, AdmissionLayer, Admitted, ApplicantOf};
use crate::bulkhead::{BulkheadFuture, BulkheadLayer, BulkheadService};
use crate::gate::{AllCritical, GateFuture, GateLayer, Gated};
use crate::gates::{BreakerGate, LimitGate};
use crate::outcome::Classify;
use crate::quota::{Quota, QuotaFuture, QuotaLayer, Tokens};
use crate::retry::{Retry, RetryFuture, RetryLayer};
use crate::BoxError;

/// Places in a [`crate::gateway::ClassStack`]: the six gates the gateway's layers
/// stand for, and the per-attempt timeout innermost.
pub const STEPS: usize = 7;

/// One place in a stack: a layer, or nothing.
#[derive(Debug)]
pub enum Step<A, T, C> {
    /// The admission ladder.
    Admission(AdmissionLayer<A, C>),
    /// The bulkhead.
    Bulkhead(BulkheadLayer),
    /// The concurrency limiter.
    Adaptive(GateLayer<LimitGate, C>),
    /// The circuit breaker.
    Breaker(GateLayer<BreakerGate, C>),
    /// The client-side quota.
    Quota(QuotaLayer<T, C>),
    /// Retries.
    Retry(RetryLayer<C>),
    /// The per-attempt timeout.
    Timeout(crate::timeout::TimeoutLayer),
    /// No layer: the request passes.
    Pass,
}

impl<A: Clone, T: Clone, C: Clone> Clone for Step<A, T, C> {
    fn clone(&self) -> Self {
        match self {
            Step::Admission(layer) => Step::Admission(layer.clone()),
            Step::Bulkhead(layer) => Step::Bulkhead(layer.clone()),
            Step::Adaptive(layer) => Step::Adaptive(layer.clone()),
            Step::Breaker(layer) => Step::Breaker(layer.clone()),
            Step::Quota(layer) => Step::Quota(layer.clone()),
            Step::Retry(layer) => Step::Retry(layer.clone()),
            Step::Timeout(layer) => Step::Timeout(*layer),
            Step::Pass => Step::Pass,
        }
    }
}

impl<S, A: Clone, T: Clone, C: Clone> Layer<S> for Step<A, T, C> {
    type Service = StepService<S, A, T, C>;

    fn layer(&self, inner: S) -> StepService<S, A, T, C> {
        match self {
            Step::Admission(layer) => StepService::Admission(layer.layer(inner)),
            Step::Bulkhead(layer) => StepService::Bulkhead(layer.layer(inner)),
            Step::Adaptive(layer) => StepService::Adaptive(layer.layer(inner)),
            Step::Breaker(layer) => StepService::Breaker(layer.layer(inner)),
            Step::Quota(layer) => StepService::Quota(layer.layer(inner)),
            Step::Retry(layer) => StepService::Retry(layer.layer(inner)),
            Step::Timeout(layer) => StepService::Timeout(layer.layer(inner)),
            Step::Pass => StepService::Pass(inner),
        }
    }
}

/// The service of one place.
#[derive(Clone, Debug)]
pub enum StepService<S, A, T, C> {
    /// Behind the admission ladder.
    Admission(Admitted<S, A, C>),
    /// Behind the bulkhead.
    Bulkhead(BulkheadService<S>),
    /// Behind the concurrency limiter.
    Adaptive(Gated<S, LimitGate, C, AllCritical>),
    /// Behind the circuit breaker.
    Breaker(Gated<S, BreakerGate, C, AllCritical>),
    /// Behind the client-side quota.
    Quota(Quota<S, T, C>),
    /// With retries.
    Retry(Retry<S, C>),
    /// With the per-attempt timeout.
    Timeout(crate::timeout::Timeout<S>),
    /// The inner service itself.
    Pass(S),
}

impl<S, A, T, C, Req> Service<Req> for StepService<S, A, T, C>
where
    S: Service<Req> + Clone,
    S::Error: Into<BoxError>,
    A: ApplicantOf<Req>,
    T: Tokens<Req, S::Response>,
    C: Classify<S::Response, S::Error>,
    Req: Clone,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = StepFuture<S, Req, T, C>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        match self {
            StepService::Admission(service) => service.poll_ready(cx),
            StepService::Bulkhead(service) => service.poll_ready(cx),
            StepService::Adaptive(service) => service.poll_ready(cx),
            StepService::Breaker(service) => service.poll_ready(cx),
            StepService::Quota(service) => service.poll_ready(cx),
            StepService::Retry(service) => service.poll_ready(cx),
            StepService::Timeout(service) => service.poll_ready(cx),
            StepService::Pass(service) => service.poll_ready(cx).map_err(Into::into),
        }
    }

    fn call(&mut self, request: Req) -> Self::Future {
        match self {
            StepService::Admission(service) => StepFuture::Admission { future: service.call(request) },
            StepService::Bulkhead(service) => StepFuture::Bulkhead { future: service.call(request) },
            StepService::Adaptive(service) => StepFuture::Adaptive { future: service.call(request) },
            StepService::Breaker(service) => StepFuture::Breaker { future: service.call(request) },
            StepService::Quota(service) => StepFuture::Quota { future: service.call(request) },
            StepService::Retry(service) => StepFuture::Retry { future: service.call(request) },
            StepService::Timeout(service) => StepFuture::Timeout { future: service.call(request) },
            StepService::Pass(service) => StepFuture::Pass { future: service.call(request) },
        }
    }
}

pin_project! {
    /// The future of one place: its layer's own.
    // pin-project-lite takes no doc comment on a variant's field: the fields are
    // each variant's future.
    #[allow(missing_docs)]
    #[project = StepProj]
    pub enum StepFuture<S: Service<Req>, Req, T, C> {
        /// The admission ladder's.
        Admission { #[pin] future: AdmissionFuture<S::Future, C> },
        /// The bulkhead's.
        Bulkhead { #[pin] future: BulkheadFuture<S, Req> },
        /// The concurrency limiter's.
        Adaptive { #[pin] future: GateFuture<S::Future, LimitGate, C> },
        /// The circuit breaker's.
        Breaker { #[pin] future: GateFuture<S::Future, BreakerGate, C> },
        /// The client-side quota's.
        Quota { #[pin] future: QuotaFuture<S, Req, T, C> },
        /// The retry layer's.
        Retry { #[pin] future: RetryFuture<S, Req, C> },
        /// The timeout's.
        Timeout { #[pin] future: crate::timeout::TimeoutFuture<S::Future> },
        /// The inner service's.
        Pass { #[pin] future: S::Future },
    }
}

impl<S, T, C, Req> Future for StepFuture<S, Req, T, C>
where
    S: Service<Req>,
    S::Error: Into<BoxError>,
    T: Tokens<Req, S::Response>,
    C: Classify<S::Response, S::Error>,
    Req: Clone,
{
    type Output = Result<S::Response, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project() {
            StepProj::Admission { future } => future.poll(cx),
            StepProj::Bulkhead { future } => future.poll(cx),
            StepProj::Adaptive { future } => future.poll(cx),
            StepProj::Breaker { future } => future.poll(cx),
            StepProj::Quota { future } => future.poll(cx),
            StepProj::Retry { future } => future.poll(cx),
            StepProj::Timeout { future } => future.poll(cx),
            StepProj::Pass { future } => future.poll(cx).map_err(Into::into),
        }
    }
}

impl<A, T, C> Step<A, T, C> {
    /// The same step, reading outcomes with `classify`.
    pub fn classify<C2: Clone>(self, classify: C2) -> Step<A, T, C2> {
        match self {
            Step::Admission(layer) => Step::Admission(layer.classify(classify)),
            Step::Bulkhead(layer) => Step::Bulkhead(layer),
            Step::Adaptive(layer) => Step::Adaptive(layer.classify(classify)),
            Step::Breaker(layer) => Step::Breaker(layer.classify(classify)),
            Step::Quota(layer) => Step::Quota(layer.classify(classify)),
            Step::Retry(layer) => Step::Retry(layer.classify(classify)),
            Step::Timeout(layer) => Step::Timeout(layer),
            Step::Pass => Step::Pass,
        }
    }

    /// The same step, reading applicants with `applicant` (admission's only).
    pub fn applicant<A2>(self, applicant: A2) -> Step<A2, T, C>
    where
        C: Clone,
    {
        match self {
            Step::Admission(layer) => Step::Admission(layer.applicant(applicant)),
            Step::Bulkhead(layer) => Step::Bulkhead(layer),
            Step::Adaptive(layer) => Step::Adaptive(layer),
            Step::Breaker(layer) => Step::Breaker(layer),
            Step::Quota(layer) => Step::Quota(layer),
            Step::Retry(layer) => Step::Retry(layer),
            Step::Timeout(layer) => Step::Timeout(layer),
            Step::Pass => Step::Pass,
        }
    }

    /// The layer's name in a scenario's `stack.gates` (`timeout` for the attempt's
    /// timeout; `none` for an empty place).
    pub fn name(&self) -> &'static str {
        match self {
            Step::Admission(_) => "admission",
            Step::Bulkhead(_) => "bulkhead",
            Step::Adaptive(_) => "adaptive",
            Step::Breaker(_) => "breaker",
            Step::Quota(_) => "quota",
            Step::Retry(_) => "retry",
            Step::Timeout(_) => "timeout",
            Step::Pass => "none",
        }
    }
}
