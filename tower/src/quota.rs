//! The simulator's client-side [`QuotaMeter`] as a layer, for a client of a metered API
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
//!
//! **Where the buckets live** is a [`QuotaStore`]: this process's meter (what
//! [`quota_meter`] builds: a fleet of N processes each holding 1/N is the simulation's
//! `coordinated_quota = false`), or one every process shares ([`quota_store`]: the
//! simulation's default, one coordinated meter for the fleet). The trait is
//! synchronous on purpose: a decision must not wait on the network. A store shared
//! through Redis (or etcd, or a quota service) keeps a local lease of each bucket — a
//! few seconds of this process's expected use, taken from the shared bucket by a
//! background task with an atomic script (Redis `EVAL` of a token-bucket take) and
//! returned when unused — and answers `reserve` from the lease; a lease that cannot be
//! refilled (the store is down) is the simulation's `coordinator_outage`, where each
//! process falls back to its 1/N share.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use pin_project_lite::pin_project;
use stampede_kernel::Nanos;
use stampede_policy::classify::Outcome;
use stampede_policy::quota::{QuotaConfig, QuotaLimits, QuotaMeter, Reservation, Reserve};
use tokio::time::Sleep;
use tower_layer::Layer;
use tower_service::Service;

use crate::clock::Clock;
use crate::events::{emit, Event};
use crate::outcome::{Classify, ErrorsFail};
use crate::shared::Shared;
use crate::{BoxError, Rejected};

/// What the meter needs to know of a request and of its answer.
pub trait Tokens<Req, Res>: Clone {
    /// The request's input tokens and its `max_tokens`.
    fn request(&self, request: &Req) -> (u64, u64);
    /// The output tokens the answer used.
    fn response(&self, response: &Res) -> u64;
    /// The answer's output is known only when its stream ends: the reservation is
    /// then given to [`Tokens::carry`] instead of settled with [`Tokens::response`].
    /// Default: no (settled at the response, with no allocation).
    fn settles_at_stream_end(&self) -> bool {
        false
    }
    /// Puts `guard` in the response (its extensions, say) for the reader to
    /// [`QuotaGuard::settle`] when the stream ends (with `settles_at_stream_end` only).
    fn carry(&self, _response: &mut Res, _guard: QuotaGuard) {}
}

/// A reservation held past the response, until its stream ends: in the response's
/// extensions when the layer's tokens are [`StreamTokens`]. `settle(output)` hands
/// back what the stream did not use, as the simulation reconciles at the last token;
/// left unsettled, it hands back nothing (all of `max_tokens` counted as used: the safe
/// side for a stream whose end nobody saw). Cloned, it is still one reservation.
#[derive(Clone, Debug)]
pub struct QuotaGuard(Arc<Deferred>);

/// The reservation and its `max_tokens`, until settled; settled with all of them used
/// when the last [`QuotaGuard`] goes.
#[derive(Debug)]
struct Deferred(parking_lot::Mutex<Option<(Held, u64)>>);

impl Drop for Deferred {
    fn drop(&mut self) {
        if let Some((mut held, max_tokens)) = self.0.get_mut().take() {
            held.settle(Some(max_tokens));
        }
    }
}

impl QuotaGuard {
    fn new(held: Held, max_tokens: u64) -> Self {
        QuotaGuard(Arc::new(Deferred(parking_lot::Mutex::new(Some((held, max_tokens))))))
    }

    /// The stream ended having used `output_used` tokens: hand back the rest (once;
    /// a second call does nothing).
    pub fn settle(&self, output_used: u64) {
        if let Some((mut held, _)) = self.0 .0.lock().take() {
            held.settle(Some(output_used));
        }
    }
}

/// Token counts for a streamed HTTP answer: the request's from `F`, the output settled
/// when the stream ends — the reservation rides in the response's extensions as a
/// [`QuotaGuard`] for whoever reads the stream to settle with what it counted.
#[derive(Clone, Copy, Debug)]
pub struct StreamTokens<F>(pub F);

impl<Req, B, F: Fn(&Req) -> (u64, u64) + Clone> Tokens<Req, http::Response<B>> for StreamTokens<F> {
    fn request(&self, request: &Req) -> (u64, u64) {
        (self.0)(request)
    }
    fn response(&self, _: &http::Response<B>) -> u64 {
        0 // not read: the output is settled by the guard
    }
    fn settles_at_stream_end(&self) -> bool {
        true
    }
    fn carry(&self, response: &mut http::Response<B>, guard: QuotaGuard) {
        response.extensions_mut().insert(guard);
    }
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

/// Where a quota's buckets live (see the module's notes). `now` is the caller's
/// monotonic clock in nanoseconds (this process's [`Clock`]); a store shared by
/// processes keeps its own time and may ignore it.
pub trait QuotaStore: Send + Sync + std::fmt::Debug + 'static {
    /// Reserve one request, `input_tokens` and `max_tokens` of output.
    fn reserve(&self, now: Nanos, input_tokens: u64, max_tokens: u64) -> Reserve;
    /// The call was served and used `output_used` tokens: hand the rest back.
    fn reconcile(&self, now: Nanos, reservation: Reservation, output_used: u64);
    /// Nothing was served (a 429, a 529, a dropped request): hand it all back.
    fn cancel(&self, now: Nanos, reservation: Reservation);
    /// The used share of the fullest bucket, or `floor` if that is higher (the
    /// admission gate's pressure).
    fn pressure_at_least(&self, now: Nanos, floor: f64) -> f64;
}

/// This process's meter: the simulator's [`QuotaMeter`] behind its lock.
impl QuotaStore for Shared<QuotaMeter> {
    fn reserve(&self, now: Nanos, input_tokens: u64, max_tokens: u64) -> Reserve {
        self.lock().reserve(now, input_tokens, max_tokens)
    }
    fn reconcile(&self, now: Nanos, reservation: Reservation, output_used: u64) {
        self.lock().reconcile(now, reservation, output_used)
    }
    fn cancel(&self, now: Nanos, reservation: Reservation) {
        self.lock().cancel(now, reservation)
    }
    fn pressure_at_least(&self, now: Nanos, floor: f64) -> f64 {
        self.lock().pressure_at_least(now, floor)
    }
}

/// The clock of every layer over `store`: the first layer built over a store fixes
/// its epoch, and every later one — built a minute after, or by `share_quota` for
/// another gateway — reads the same `now`. Each layer keeping its own epoch made a
/// store's time jump back by the minutes between them: a layer built 60 s after the
/// first was granted none of 30 s of refill (issue 72 item 5). Keyed by the store's
/// address while it lives (a dead store's entry is replaced).
fn clock_of(store: &Arc<dyn QuotaStore>) -> Clock {
    type Epochs = std::collections::HashMap<usize, (std::sync::Weak<dyn QuotaStore>, Clock)>;
    static EPOCHS: std::sync::OnceLock<parking_lot::Mutex<Epochs>> = std::sync::OnceLock::new();
    let key = Arc::as_ptr(store) as *const () as usize;
    let mut epochs = EPOCHS.get_or_init(Default::default).lock();
    if let Some((weak, clock)) = epochs.get(&key) {
        if weak.upgrade().is_some_and(|live| Arc::ptr_eq(&live, store)) {
            return *clock;
        }
    }
    epochs.retain(|_, (weak, _)| weak.strong_count() > 0);
    let clock = Clock::new();
    epochs.insert(key, (Arc::downgrade(store), clock));
    clock
}

/// The layer.
pub struct QuotaLayer<T, C = ErrorsFail> {
    store: Arc<dyn QuotaStore>,
    /// The in-memory meter behind `store`, when [`quota_meter`] built it.
    local: Option<Shared<QuotaMeter>>,
    clock: Clock,
    longest_wait: Nanos,
    tokens: T,
    classify: C,
}

impl<T, C> std::fmt::Debug for QuotaLayer<T, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QuotaLayer").field("local", &self.local.is_some()).finish_non_exhaustive()
    }
}

impl<T: Clone, C: Clone> Clone for QuotaLayer<T, C> {
    fn clone(&self) -> Self {
        QuotaLayer {
            store: self.store.clone(),
            local: self.local.clone(),
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
    quota_over(QuotaMeter::new(limits, config), std::time::Duration::from_nanos(config.longest_wait), tokens)
}

/// A quota over `meter` as built (e.g. with the provider's bursts,
/// `QuotaMeter::with_burst`), refusing what would wait longer than `longest_wait`.
pub fn quota_over<T>(meter: QuotaMeter, longest_wait: std::time::Duration, tokens: T) -> QuotaLayer<T> {
    let meter = Shared::new(meter);
    let store: Arc<dyn QuotaStore> = Arc::new(meter.clone());
    QuotaLayer {
        clock: clock_of(&store),
        store,
        local: Some(meter),
        longest_wait: crate::clock::nanos(longest_wait),
        tokens,
        classify: ErrorsFail,
    }
}

/// A quota whose buckets live in `store` (shared by every process that holds one like
/// it), waiting up to `longest_wait` in all, reading token counts with `tokens`.
pub fn quota_store<T>(store: Arc<dyn QuotaStore>, longest_wait: std::time::Duration, tokens: T) -> QuotaLayer<T> {
    QuotaLayer {
        clock: clock_of(&store),
        store,
        local: None,
        longest_wait: crate::clock::nanos(longest_wait),
        tokens,
        classify: ErrorsFail,
    }
}

impl<T, C> QuotaLayer<T, C> {
    /// The in-memory meter, to read what is reserved and handed back.
    ///
    /// # Panics
    /// For a layer over a [`QuotaStore`] of your own ([`quota_store`]): read your store.
    pub fn meter(&self) -> &Shared<QuotaMeter> {
        self.local.as_ref().expect("a quota_meter layer (quota_store's buckets are the store's)")
    }

    /// Where the buckets live.
    pub fn store(&self) -> Arc<dyn QuotaStore> {
        self.store.clone()
    }

    /// The same meter, reading token counts with `tokens`: a layer per call class in
    /// front of one tier's meter.
    pub fn tokens<T2>(&self, tokens: T2) -> QuotaLayer<T2, C>
    where
        C: Clone,
    {
        QuotaLayer {
            store: self.store.clone(),
            local: self.local.clone(),
            clock: self.clock,
            longest_wait: self.longest_wait,
            tokens,
            classify: self.classify.clone(),
        }
    }

    /// The same layer, reading outcomes with `classify` (a 429 or 529 cancels).
    pub fn classify<C2>(self, classify: C2) -> QuotaLayer<T, C2> {
        QuotaLayer {
            store: self.store,
            local: self.local,
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
pub(crate) struct Held {
    store: Arc<dyn QuotaStore>,
    clock: Clock,
    reservation: Option<Reservation>,
}

impl Held {
    fn settle(&mut self, used: Option<u64>) {
        let Some(reservation) = self.reservation.take() else { return };
        let now = self.clock.now();
        match used {
            Some(output) => self.store.reconcile(now, reservation, output),
            None => self.store.cancel(now, reservation),
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
                    let answer = this.layer.store.reserve(now, input, max_tokens);
                    match answer {
                        Reserve::Granted(reservation) => {
                            let (store, clock) = (this.layer.store.clone(), this.layer.clock);
                            *this.held = Some(Held { store, clock, reservation: Some(reservation) });
                            this.stage.set(Stage::Ready);
                        }
                        Reserve::Wait(wait) if *this.waited + wait <= this.layer.longest_wait => {
                            *this.waited += wait;
                            this.stage.set(Stage::Waiting { sleep: tokio::time::sleep(Duration::from_nanos(wait)) });
                        }
                        Reserve::Wait(_) | Reserve::Refused { .. } => {
                            emit(Event::Refused(Rejected::Quota));
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
                    let mut result = result;
                    if let (Ok(response), true) = (&mut result, served) {
                        // Settled now, or by the reader at the stream's end.
                        let tokens = &this.layer.tokens;
                        if tokens.settles_at_stream_end() {
                            if let Some(held) = this.held.take() {
                                tokens.carry(response, QuotaGuard::new(held, this.asked.1));
                            }
                        } else if let Some(held) = this.held.as_mut() {
                            held.settle(Some(tokens.response(response)));
                        }
                    }
                    let used = served.then_some(0);
                    if let Some(held) = this.held.as_mut() {
                        held.settle(used);
                    }
                    return Poll::Ready(result.map_err(Into::into));
                }
            }
        }
    }
}
