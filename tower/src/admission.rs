//! The LLM gateway's admission gate as a layer: the simulator's [`AdmissionController`]
//! refuses a request whose class the ladder sheds at the current pressure, one that
//! cannot meet its deadline (now + the expected latency past it), and a tenant over
//! its fair share under pressure — the cheapest "no", before any quota, slot or
//! attempt is spent.
//!
//! Pressure, as the gateway computes it: the larger of the layer's own in-flight
//! requests over its capacity and every attached quota meter's used fraction
//! ([`AdmissionLayer::with_quota`]: the meters of the [`crate::quota_meter`] layers
//! behind it). The expected latency is the gateway's too: per class, an average of
//! successful calls (9:1), starting from the configured estimate.
//!
//! Invariants (asserted in the struct): every admitted request is finished exactly
//! once — when it ends, or when its caller drops it; the in-flight count returns to
//! zero with the requests.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use pin_project_lite::pin_project;
use stampede_kernel::Nanos;
use stampede_policy::admission::{Admission, AdmissionController, AdmissionRequest, Ladder};
use stampede_policy::classify::Outcome;
use stampede_policy::quota::QuotaMeter;
use stampede_policy::Criticality;
use tower_layer::Layer;
use tower_service::Service;

use crate::clock::{nanos, Clock};
use crate::events::{emit, Event};
use crate::outcome::{Classify, ErrorsFail};
use crate::shared::Shared;
use crate::{BoxError, Rejected};

/// A request as admission sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Applicant {
    /// The request's class (an LLM call class): picks its rung on a product ladder and
    /// its expected latency. 0 when there are no classes.
    pub class: u16,
    /// On a ladder by criticality, the rung this criticality is refused from.
    pub criticality: Criticality,
    /// The tenant, for the fair share (below the layer's `tenants`).
    pub tenant: u32,
    /// The time the caller has left; `None`: no deadline.
    pub time_left: Option<Duration>,
}

/// Reads a request's [`Applicant`].
pub trait ApplicantOf<Req>: Clone {
    /// The applicant `request` is.
    fn applicant(&self, request: &Req) -> Applicant;
}

/// A request extension naming its class (an index into the layer's classes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Class(pub u16);
/// A request extension naming its tenant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tenant(pub u32);
/// A request extension: the time its caller has left (a propagated deadline).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimeLeft(pub Duration);

/// An `http::Request`'s [`Class`], [`Criticality`], [`Tenant`] and [`TimeLeft`]
/// extensions (class 0, `Critical`, tenant 0, no deadline when absent).
#[derive(Clone, Copy, Debug, Default)]
pub struct FromExtensions;

impl<B> ApplicantOf<http::Request<B>> for FromExtensions {
    fn applicant(&self, request: &http::Request<B>) -> Applicant {
        let extensions = request.extensions();
        Applicant {
            class: extensions.get::<Class>().map_or(0, |class| class.0),
            criticality: extensions.get::<Criticality>().copied().unwrap_or(Criticality::Critical),
            tenant: extensions.get::<Tenant>().map_or(0, |tenant| tenant.0),
            time_left: extensions.get::<TimeLeft>().map(|left| left.0),
        }
    }
}

/// A closure as the reader: `applicant_with(|request| Applicant { … })`.
#[derive(Clone, Copy, Debug)]
pub struct ApplicantWith<F>(pub F);

/// Reads applicants with `f`.
pub fn applicant_with<F>(f: F) -> ApplicantWith<F> {
    ApplicantWith(f)
}

impl<Req, F: Fn(&Req) -> Applicant + Clone> ApplicantOf<Req> for ApplicantWith<F> {
    fn applicant(&self, request: &Req) -> Applicant {
        (self.0)(request)
    }
}

/// How admission is configured.
#[derive(Clone, Debug, PartialEq)]
pub struct AdmissionConfig {
    /// The rungs and the pressure that climbs them.
    pub ladder: Ladder,
    /// Tenants sharing the capacity (≥ 1).
    pub tenants: u32,
    /// Requests in flight at full pressure, and the share the tenants divide (≥ 1).
    pub capacity: u32,
    /// Per class, the first rung (1..=4; 5: never) that refuses it — a product ladder
    /// by feature, as the gateway's classes have. Empty: the ladder's by criticality.
    pub class_rungs: Vec<u8>,
    /// Per class, the expected latency before any call ended (an unloaded estimate).
    /// At least one entry; a class past the end uses the last.
    pub expected: Vec<Duration>,
}

/// What every clone of an admission service shares.
#[derive(Debug)]
pub struct AdmissionState {
    /// The simulator's controller: the rung, the tenants' shares, the decisions.
    pub controller: AdmissionController,
    /// Per class, the expected latency now.
    pub expected: Vec<Nanos>,
    /// Requests admitted and not yet finished.
    pub in_flight: u32,
    capacity: u32,
    class_rungs: Vec<u8>,
    meters: Vec<std::sync::Arc<dyn crate::quota::QuotaStore>>,
}

impl AdmissionState {
    /// The pressure the ladder reads now.
    pub fn pressure(&self, now: Nanos) -> f64 {
        let in_flight = self.in_flight as f64 / self.capacity as f64;
        self.meters.iter().fold(in_flight, |pressure, meter| meter.pressure_at_least(now, pressure))
    }

    fn expected_of(&self, class: u16) -> Nanos {
        self.expected[(class as usize).min(self.expected.len() - 1)]
    }
}

/// The layer.
#[derive(Debug)]
pub struct AdmissionLayer<A, C = ErrorsFail> {
    state: Shared<AdmissionState>,
    clock: Clock,
    applicant: A,
    classify: C,
}

impl<A: Clone, C: Clone> Clone for AdmissionLayer<A, C> {
    fn clone(&self) -> Self {
        AdmissionLayer {
            state: self.state.clone(),
            clock: self.clock,
            applicant: self.applicant.clone(),
            classify: self.classify.clone(),
        }
    }
}

/// An admission layer reading each request's [`Applicant`] with `applicant`
/// ([`FromExtensions`] for `http::Request`s).
pub fn admission<A>(config: AdmissionConfig, applicant: A) -> AdmissionLayer<A> {
    assert!(config.tenants >= 1 && config.capacity >= 1, "admission needs a tenant and a capacity");
    assert!(!config.expected.is_empty(), "admission needs an expected latency");
    let state = AdmissionState {
        controller: AdmissionController::new(config.ladder, config.tenants, config.capacity),
        expected: config.expected.iter().map(|&d| nanos(d)).collect(),
        in_flight: 0,
        capacity: config.capacity,
        class_rungs: config.class_rungs,
        meters: Vec::new(),
    };
    AdmissionLayer { state: Shared::new(state), clock: Clock::new(), applicant, classify: ErrorsFail }
}

impl<A, C> AdmissionLayer<A, C> {
    /// The shared state, to read the controller's refusals and the pressure.
    pub fn state(&self) -> &Shared<AdmissionState> {
        &self.state
    }

    /// The same layer, with `meter`'s used fraction in its pressure (a quota layer's
    /// [`crate::QuotaLayer::meter`]).
    pub fn with_quota(self, meter: &Shared<QuotaMeter>) -> Self {
        self.with_quota_store(std::sync::Arc::new(meter.clone()))
    }

    /// [`Self::with_quota`] for a quota whose buckets live in a [`QuotaStore`](crate::quota::QuotaStore).
    pub fn with_quota_store(self, store: std::sync::Arc<dyn crate::quota::QuotaStore>) -> Self {
        self.state.lock().meters.push(store);
        self
    }

    /// Replaces the quota stores whose pressure admission reads (a gateway whose
    /// meters moved to shared stores).
    #[cfg(feature = "scenario")]
    pub(crate) fn replace_quota_stores(&self, stores: Vec<std::sync::Arc<dyn crate::quota::QuotaStore>>) {
        self.state.lock().meters = stores;
    }

    /// The same admission (one controller, one pressure), reading applicants with
    /// `applicant`: a layer per class in front of one shared admission.
    pub fn applicant<A2>(&self, applicant: A2) -> AdmissionLayer<A2, C>
    where
        C: Clone,
    {
        AdmissionLayer { state: self.state.clone(), clock: self.clock, applicant, classify: self.classify.clone() }
    }

    /// The same layer, reading outcomes with `classify`.
    pub fn classify<C2>(self, classify: C2) -> AdmissionLayer<A, C2> {
        AdmissionLayer { state: self.state, clock: self.clock, applicant: self.applicant, classify }
    }
}

impl<S, A: Clone, C: Clone> Layer<S> for AdmissionLayer<A, C> {
    type Service = Admitted<S, A, C>;

    fn layer(&self, inner: S) -> Admitted<S, A, C> {
        Admitted {
            inner,
            state: self.state.clone(),
            clock: self.clock,
            applicant: self.applicant.clone(),
            classify: self.classify.clone(),
        }
    }
}

/// A service behind admission.
#[derive(Clone, Debug)]
pub struct Admitted<S, A, C> {
    inner: S,
    state: Shared<AdmissionState>,
    clock: Clock,
    applicant: A,
    classify: C,
}

impl<S, A, C, Req> Service<Req> for Admitted<S, A, C>
where
    S: Service<Req>,
    S::Error: Into<BoxError>,
    A: ApplicantOf<Req>,
    C: Classify<S::Response, S::Error>,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = AdmissionFuture<S::Future, C>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Req) -> Self::Future {
        let applicant = self.applicant.applicant(&request);
        let now = self.clock.now();
        let decision = {
            let mut state = self.state.lock();
            let state = &mut *state;
            let pressure = state.pressure(now);
            let admission_request = AdmissionRequest {
                criticality: applicant.criticality,
                tenant: applicant.tenant,
                deadline: applicant.time_left.map_or(Nanos::MAX, |left| now.saturating_add(nanos(left))),
                expected_latency: state.expected_of(applicant.class),
            };
            let decision = match state.class_rungs.get(applicant.class as usize) {
                Some(&rung) => state.controller.admit_from_rung(now, admission_request, pressure, rung),
                None => state.controller.admit(now, admission_request, pressure),
            };
            if decision == Admission::Admitted {
                state.in_flight += 1;
            }
            decision
        };
        let refused = match decision {
            Admission::Admitted => None,
            Admission::Shed { rung } => Some(Rejected::AdmissionShed { rung }),
            Admission::Infeasible => Some(Rejected::AdmissionInfeasible),
            Admission::OverFairShare => Some(Rejected::AdmissionFairShare),
        };
        match refused {
            Some(rejected) => {
                emit(Event::Refused(rejected));
                AdmissionFuture { kind: Kind::Refused { rejected: Some(rejected) }, held: None }
            }
            None => AdmissionFuture {
                kind: Kind::Admitted { future: self.inner.call(request), classify: self.classify.clone() },
                held: Some(Held {
                    state: self.state.clone(),
                    clock: self.clock,
                    class: applicant.class,
                    tenant: applicant.tenant,
                    admitted_at: now,
                    ended: false,
                }),
            },
        }
    }
}

/// An admitted request's place: finished when it ends, or when its caller drops it.
#[derive(Debug)]
struct Held {
    state: Shared<AdmissionState>,
    clock: Clock,
    class: u16,
    tenant: u32,
    admitted_at: Nanos,
    ended: bool,
}

impl Held {
    /// Ends the request; a success teaches its class's expected latency.
    fn finish(&mut self, success: bool) {
        debug_assert!(!self.ended, "an admitted request ends once");
        self.ended = true;
        let mut state = self.state.lock();
        state.controller.finished(self.tenant);
        debug_assert!(state.in_flight > 0, "an admitted request ends once");
        state.in_flight -= 1;
        if success {
            let took = self.clock.now().saturating_sub(self.admitted_at);
            let index = (self.class as usize).min(state.expected.len() - 1);
            let expected = &mut state.expected[index];
            *expected = (*expected as f64 * 0.9 + took as f64 * 0.1) as Nanos;
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        // The caller dropped the request before it ended.
        if !self.ended {
            self.finish(false);
        }
    }
}

pin_project! {
    #[project = KindProj]
    enum Kind<F, C> {
        Admitted { #[pin] future: F, classify: C },
        Refused { rejected: Option<Rejected> },
    }
}

pin_project! {
    /// A request through admission: refused at once, or the service's answer.
    pub struct AdmissionFuture<F, C> {
        #[pin]
        kind: Kind<F, C>,
        held: Option<Held>,
    }
}

impl<F, C, Res, E> Future for AdmissionFuture<F, C>
where
    F: Future<Output = Result<Res, E>>,
    E: Into<BoxError>,
    C: Classify<Res, E>,
{
    type Output = Result<Res, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        match this.kind.project() {
            KindProj::Refused { rejected } => {
                Poll::Ready(Err(Box::new(rejected.take().expect("polled after it answered"))))
            }
            KindProj::Admitted { future, classify } => {
                let result = std::task::ready!(future.poll(cx));
                if let Some(mut held) = this.held.take() {
                    held.finish(classify.classify(result.as_ref()).outcome == Outcome::Success);
                }
                Poll::Ready(result.map_err(Into::into))
            }
        }
    }
}
