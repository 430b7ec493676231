//! The engine's client-side [`QuotaMeter`] as a layer, for a client of a metered API
//! (requests, input tokens and output tokens per minute): each request reserves one
//! request, its input tokens and its `max_tokens` of output before it is sent; waits
//! (a sleep) when the meter says so, up to the meter's longest wait in all; is
//! refused beyond it; and when the answer comes, hands back the output it did not
//! use — or the whole reservation when the API refused it at the door (429, 529:
//! nothing was served), as the simulated gateway's quota gate does.
//!
//! Invariant: every reservation granted is reconciled or cancelled exactly once, also
//! when the caller drops the request (then it is cancelled: nothing is known to have
//! been served).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use pin_project_lite::pin_project;
use stampede_engine::policy::classify::Outcome;
use stampede_engine::policy::quota::{QuotaConfig, QuotaLimits, QuotaMeter, Reservation, Reserve};
use stampede_engine::Nanos;
use tokio::time::Sleep;
use tower_layer::Layer;
use tower_service::Service;

use crate::clock::Clock;
use crate::outcome::{Classify, ErrorsFail};
use crate::shared::Shared;
use crate::{BoxError, Rejected};

/// What the meter needs to know of a request and of its answer.
pub trait Tokens<Req, Res>: Clone {
    /// The request's input tokens and its `max_tokens`.
    fn request(&self, request: &Req) -> (u64, u64);
    /// The output tokens the answer used.
    fn response(&self, response: &Res) -> u64;
}

/// Token counts from two closures.
#[derive(Clone, Copy, Debug)]
pub struct TokensWith<F, G>(pub F, pub G);

impl<Req, Res, F, G> Tokens<Req, Res> for TokensWith<F, G>
where
    F: Fn(&Req) -> (u64, u64) + Clone,
    G: Fn(&Res) -> u64 + Clone,
{
    fn request(&self, request: &Req) -> (u64, u64) {
        (self.0)(request)
    }
    fn response(&self, response: &Res) -> u64 {
        (self.1)(response)
    }
}

/// The layer.
#[derive(Debug)]
pub struct QuotaLayer<T, C = ErrorsFail> {
    meter: Shared<QuotaMeter>,
    clock: Clock,
    longest_wait: Nanos,
    tokens: T,
    classify: C,
}

impl<T: Clone, C: Clone> Clone for QuotaLayer<T, C> {
    fn clone(&self) -> Self {
        QuotaLayer {
            meter: self.meter.clone(),
            clock: self.clock,
            longest_wait: self.longest_wait,
            tokens: self.tokens.clone(),
            classify: self.classify.clone(),
        }
    }
}

/// A client-side quota meter for `limits` (as `config` takes them: headroom, longest
/// wait, instances sharing it or not), reading token counts with `tokens`.
pub fn quota_meter<T>(limits: QuotaLimits, config: QuotaConfig, tokens: T) -> QuotaLayer<T> {
    QuotaLayer {
        meter: Shared::new(QuotaMeter::new(limits, config)),
        clock: Clock::new(),
        longest_wait: config.longest_wait,
        tokens,
        classify: ErrorsFail,
    }
}

impl<T, C> QuotaLayer<T, C> {
    /// The shared meter, to read what is reserved and handed back.
    pub fn meter(&self) -> &Shared<QuotaMeter> {
        &self.meter
    }

    /// The same meter, reading token counts with `tokens`: a layer per call class in
    /// front of one tier's meter.
    pub fn tokens<T2>(&self, tokens: T2) -> QuotaLayer<T2, C>
    where
        C: Clone,
    {
        QuotaLayer {
            meter: self.meter.clone(),
            clock: self.clock,
            longest_wait: self.longest_wait,
            tokens,
            classify: self.classify.clone(),
        }
    }

    /// The same layer, reading outcomes with `classify` (a 429 or 529 cancels).
    pub fn classify<C2>(self, classify: C2) -> QuotaLayer<T, C2> {
        QuotaLayer {
            meter: self.meter,
            clock: self.clock,
            longest_wait: self.longest_wait,
            tokens: self.tokens,
            classify,
        }
    }
}

impl<S, T: Clone, C: Clone> Layer<S> for QuotaLayer<T, C> {
    type Service = Quota<S, T, C>;

    fn layer(&self, inner: S) -> Quota<S, T, C> {
        Quota { inner, layer: self.clone() }
    }
}

/// A service whose requests are metered.
#[derive(Clone, Debug)]
pub struct Quota<S, T, C> {
    inner: S,
    layer: QuotaLayer<T, C>,
}

/// A granted reservation; cancelled if dropped before the answer.
#[derive(Debug)]
struct Held {
    meter: Shared<QuotaMeter>,
    clock: Clock,
    reservation: Option<Reservation>,
}

impl Held {
    fn settle(&mut self, used: Option<u64>) {
        let Some(reservation) = self.reservation.take() else { return };
        let now = self.clock.now();
        let mut meter = self.meter.lock();
        match used {
            Some(output) => meter.reconcile(now, reservation, output),
            None => meter.cancel(now, reservation),
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.settle(None);
    }
}

impl<S, T, C, Req> Service<Req> for Quota<S, T, C>
where
    S: Service<Req> + Clone,
    S::Error: Into<BoxError>,
    T: Tokens<Req, S::Response>,
    C: Classify<S::Response, S::Error>,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = QuotaFuture<S, Req, T, C>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Req) -> Self::Future {
        let (input, max_tokens) = self.layer.tokens.request(&request);
        let clone = self.inner.clone();
        let service = std::mem::replace(&mut self.inner, clone);
        QuotaFuture {
            stage: Stage::Reserving,
            service,
            request: Some(request),
            layer: self.layer.clone(),
            asked: (input, max_tokens),
            waited: 0,
            held: None,
        }
    }
}

pin_project! {
    #[project = StageProj]
    enum Stage<F> {
        Reserving,
        Waiting { #[pin] sleep: Sleep },
        Ready,
        Calling { #[pin] future: F },
    }
}

pin_project! {
    /// A metered request: reserving (and perhaps waiting), then calling.
    pub struct QuotaFuture<S: Service<Req>, Req, T, C> {
        #[pin]
        stage: Stage<S::Future>,
        service: S,
        request: Option<Req>,
        layer: QuotaLayer<T, C>,
        asked: (u64, u64),
        waited: Nanos,
        held: Option<Held>,
    }
}

impl<S, Req, T, C> Future for QuotaFuture<S, Req, T, C>
where
    S: Service<Req>,
    S::Error: Into<BoxError>,
    T: Tokens<Req, S::Response>,
    C: Classify<S::Response, S::Error>,
{
    type Output = Result<S::Response, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        loop {
            match this.stage.as_mut().project() {
                StageProj::Reserving => {
                    let now = this.layer.clock.now();
                    let (input, max_tokens) = *this.asked;
                    let answer = this.layer.meter.lock().reserve(now, input, max_tokens);
                    match answer {
                        Reserve::Granted(reservation) => {
                            let (meter, clock) = (this.layer.meter.clone(), this.layer.clock);
                            *this.held = Some(Held { meter, clock, reservation: Some(reservation) });
                            this.stage.set(Stage::Ready);
                        }
                        Reserve::Wait(wait) if *this.waited + wait <= this.layer.longest_wait => {
                            *this.waited += wait;
                            this.stage.set(Stage::Waiting { sleep: tokio::time::sleep(Duration::from_nanos(wait)) });
                        }
                        Reserve::Wait(_) | Reserve::Refused { .. } => {
                            return Poll::Ready(Err(Box::new(Rejected::Quota)));
                        }
                    }
                }
                StageProj::Waiting { sleep } => {
                    std::task::ready!(sleep.poll(cx));
                    this.stage.set(Stage::Reserving);
                }
                StageProj::Ready => {
                    if let Err(error) = std::task::ready!(this.service.poll_ready(cx)) {
                        return Poll::Ready(Err(error.into()));
                    }
                    let request = this.request.take().expect("sent once");
                    let future = this.service.call(request);
                    this.stage.set(Stage::Calling { future });
                }
                StageProj::Calling { future } => {
                    let result = std::task::ready!(future.poll(cx));
                    let classified = this.layer.classify.classify(result.as_ref());
                    // Refused at the door (or by a layer further in): nothing was served.
                    let served =
                        classified.reached && !matches!(classified.outcome, Outcome::RateLimited | Outcome::Overloaded);
                    let used = match &result {
                        Ok(response) if served => Some(this.layer.tokens.response(response)),
                        _ if served => Some(0),
                        _ => None,
                    };
                    if let Some(held) = this.held.as_mut() {
                        held.settle(used);
                    }
                    return Poll::Ready(result.map_err(Into::into));
                }
            }
        }
    }
}
