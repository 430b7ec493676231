//! One tower service for every policy that decides at the door and learns when the
//! call ends: the circuit breaker, the concurrency limiters, the priority shedder
//! and the token bucket. A [`Gate`] wraps the simulator's policy struct; [`Gated`] asks
//! it before calling the service, and its future tells it how the call ended.
//!
//! Invariants: every admitted request is finished or abandoned exactly once — on
//! completion by the future, or by its `Pass` when the future is dropped first (a
//! caller that gave up); a refused request never reaches the inner service.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use pin_project_lite::pin_project;
use stampede_kernel::Nanos;
use stampede_policy::Criticality;
use tower_layer::Layer;
use tower_service::Service;

use crate::clock::Clock;
use crate::events::{emit, Event};
use crate::outcome::{Classified, Classify};
use crate::shared::Shared;
use crate::{BoxError, Rejected};

/// A policy at the door: admits or refuses a request, then learns how it ended.
pub trait Gate {
    /// What an admitted request holds until it ends (a breaker's permit).
    type Ticket;
    /// Admits a request of `criticality` at `now`, or says why not.
    fn admit(&mut self, now: Nanos, criticality: Criticality) -> Result<Self::Ticket, Rejected>;
    /// The request ended at `now`, `latency` after it was admitted.
    fn finish(&mut self, now: Nanos, ticket: Self::Ticket, classified: Classified, latency: Nanos);
    /// The caller dropped the request before it ended: nothing was learnt.
    fn abandon(&mut self, ticket: Self::Ticket);
}

/// An optional gate: `None` admits everything and learns nothing (a scenario edge
/// without a breaker), so a stack keeps one type whichever policies it has.
impl<G: Gate> Gate for Option<G> {
    type Ticket = Option<G::Ticket>;

    fn admit(&mut self, now: Nanos, criticality: Criticality) -> Result<Self::Ticket, Rejected> {
        match self {
            Some(gate) => gate.admit(now, criticality).map(Some),
            None => Ok(None),
        }
    }

    fn finish(&mut self, now: Nanos, ticket: Self::Ticket, classified: Classified, latency: Nanos) {
        if let (Some(gate), Some(ticket)) = (self, ticket) {
            gate.finish(now, ticket, classified, latency);
        }
    }

    fn abandon(&mut self, ticket: Self::Ticket) {
        if let (Some(gate), Some(ticket)) = (self, ticket) {
            gate.abandon(ticket);
        }
    }
}

/// How important a request is, for the priority shedder.
pub trait CriticalityOf<Req>: Clone {
    /// How important `request` is.
    fn criticality(&self, request: &Req) -> Criticality;
}

/// Every request is `Critical` (the gates that do not shed ignore it anyway).
#[derive(Clone, Copy, Debug, Default)]
pub struct AllCritical;

impl<Req> CriticalityOf<Req> for AllCritical {
    fn criticality(&self, _: &Req) -> Criticality {
        Criticality::Critical
    }
}

/// An `http::Request`'s `Criticality` extension (`Critical` when it has none).
#[derive(Clone, Copy, Debug, Default)]
pub struct FromExtension;

impl<B> CriticalityOf<http::Request<B>> for FromExtension {
    fn criticality(&self, request: &http::Request<B>) -> Criticality {
        request.extensions().get::<Criticality>().copied().unwrap_or(Criticality::Critical)
    }
}

/// The layer: one policy shared by every service it builds.
#[derive(Debug)]
pub struct GateLayer<G, C, K = AllCritical> {
    policy: Shared<G>,
    clock: Clock,
    classify: C,
    criticality: K,
}

impl<G, C: Clone, K: Clone> Clone for GateLayer<G, C, K> {
    fn clone(&self) -> Self {
        GateLayer {
            policy: self.policy.clone(),
            clock: self.clock,
            classify: self.classify.clone(),
            criticality: self.criticality.clone(),
        }
    }
}

impl<G, C, K> GateLayer<G, C, K> {
    pub(crate) fn new(policy: G, clock: Clock, classify: C, criticality: K) -> Self {
        GateLayer { policy: Shared::new(policy), clock, classify, criticality }
    }

    /// The shared policy, to read its state (a breaker's, a limit) for metrics.
    pub fn policy(&self) -> &Shared<G> {
        &self.policy
    }

    /// The same policy, reading outcomes with `classify`.
    pub fn classify<C2>(self, classify: C2) -> GateLayer<G, C2, K> {
        GateLayer { policy: self.policy, clock: self.clock, classify, criticality: self.criticality }
    }

    /// The same policy, reading each request's criticality with `criticality`.
    pub fn criticality<K2>(self, criticality: K2) -> GateLayer<G, C, K2> {
        GateLayer { policy: self.policy, clock: self.clock, classify: self.classify, criticality }
    }
}

impl<S, G, C: Clone, K: Clone> Layer<S> for GateLayer<G, C, K> {
    type Service = Gated<S, G, C, K>;

    fn layer(&self, inner: S) -> Self::Service {
        Gated {
            inner,
            policy: self.policy.clone(),
            clock: self.clock,
            classify: self.classify.clone(),
            criticality: self.criticality.clone(),
        }
    }
}

/// A service behind a gate.
#[derive(Debug)]
pub struct Gated<S, G, C, K> {
    inner: S,
    policy: Shared<G>,
    clock: Clock,
    classify: C,
    criticality: K,
}

impl<S: Clone, G, C: Clone, K: Clone> Clone for Gated<S, G, C, K> {
    fn clone(&self) -> Self {
        Gated {
            inner: self.inner.clone(),
            policy: self.policy.clone(),
            clock: self.clock,
            classify: self.classify.clone(),
            criticality: self.criticality.clone(),
        }
    }
}

impl<S, G, C, K, Req> Service<Req> for Gated<S, G, C, K>
where
    S: Service<Req>,
    S::Error: Into<BoxError>,
    G: Gate,
    C: Classify<S::Response, S::Error>,
    K: CriticalityOf<Req>,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = GateFuture<S::Future, G, C>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Req) -> Self::Future {
        let now = self.clock.now();
        let criticality = self.criticality.criticality(&request);
        let admitted = self.policy.lock().admit(now, criticality);
        match admitted {
            Err(rejected) => {
                emit(Event::Refused(rejected));
                GateFuture { inner: None, rejected: Some(rejected), pass: None, classify: self.classify.clone() }
            }
            Ok(ticket) => {
                let pass =
                    Pass { policy: self.policy.clone(), clock: self.clock, ticket: Some(ticket), admitted_at: now };
                GateFuture {
                    inner: Some(self.inner.call(request)),
                    rejected: None,
                    pass: Some(pass),
                    classify: self.classify.clone(),
                }
            }
        }
    }
}

/// An admitted request's hold on the gate; abandons it if dropped unfinished.
struct Pass<G: Gate> {
    policy: Shared<G>,
    clock: Clock,
    ticket: Option<G::Ticket>,
    admitted_at: Nanos,
}

impl<G: Gate> Pass<G> {
    fn finish(mut self, classified: Classified) {
        let now = self.clock.now();
        if let Some(ticket) = self.ticket.take() {
            let mut policy = self.policy.lock();
            if classified.reached {
                policy.finish(now, ticket, classified, now.saturating_sub(self.admitted_at));
            } else {
                policy.abandon(ticket);
            }
        }
    }
}

impl<G: Gate> Drop for Pass<G> {
    fn drop(&mut self) {
        if let Some(ticket) = self.ticket.take() {
            self.policy.lock().abandon(ticket);
        }
    }
}

pin_project! {
    /// The response of a gated service: a refusal, or the inner call's response
    /// once the gate has learnt from it.
    pub struct GateFuture<F, G: Gate, C> {
        #[pin]
        inner: Option<F>,
        rejected: Option<Rejected>,
        pass: Option<Pass<G>>,
        classify: C,
    }
}

impl<F, G, C, Res, E> Future for GateFuture<F, G, C>
where
    F: Future<Output = Result<Res, E>>,
    E: Into<BoxError>,
    G: Gate,
    C: Classify<Res, E>,
{
    type Output = Result<Res, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if let Some(rejected) = this.rejected.take() {
            return Poll::Ready(Err(Box::new(rejected)));
        }
        let inner = this.inner.as_pin_mut().expect("a gated future is polled after it completed");
        let result = std::task::ready!(inner.poll(cx));
        if let Some(pass) = this.pass.take() {
            pass.finish(this.classify.classify(result.as_ref()));
        }
        Poll::Ready(result.map_err(Into::into))
    }
}
