//! Hedged requests as the graph model sends them: the simulator's [`HedgePolicy`] says
//! how long after an attempt the next one goes out (a fixed delay, or a running
//! quantile of this layer's recent successful latencies) and how many may; the first
//! success wins and the attempts still out are dropped (cancelled); when every
//! attempt has failed, the last failure is the answer, for a retry layer outside to
//! read. A hedge may ask the retry layer's budget first, as a retry does
//! ([`HedgeLayer::with_retry`]); a hedge the budget refused ends the hedging of that
//! try, as in the simulator.
//!
//! Where it sits: inside the retry layer and outside the breaker and the timeout
//! ([`crate::EdgeStack`]'s order), so every hedge is an attempt of its own — the
//! breaker may refuse it, the timeout bounds it — and a try that fails as a whole
//! is retried.
//!
//! Invariants (asserted): at most `1 + max_hedges` attempts of a try are out; a
//! hedge the budget granted is handed back (`retry_finished`) exactly once, when it
//! ends, loses or is dropped with its caller.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use pin_project_lite::pin_project;
use stampede_kernel::Nanos;
use stampede_policy::classify::Outcome;
use stampede_policy::hedge::{HedgeConfig, HedgePolicy};
use tokio::time::{Instant, Sleep};
use tower_layer::Layer;
use tower_service::Service;

use crate::clock::Clock;
use crate::events::{emit, Event};
use crate::outcome::{Classify, ErrorsFail};
use crate::retry::{RetryLayer, RetryState};
use crate::shared::Shared;

/// Hedges per try at most (gRPC caps `maxAttempts` at 5: one attempt and four
/// hedges). The attempts of a try live in the call's future, not on the heap.
pub const MAX_HEDGES: u32 = 4;
const SLOTS: usize = MAX_HEDGES as usize + 1;

/// What the hedge layer has done, for metrics and tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HedgeCounts {
    /// Tries through the layer.
    pub calls: u64,
    /// Hedges sent.
    pub hedges: u64,
    /// Tries answered first by a hedge.
    pub hedge_wins: u64,
    /// Hedges the retry budget refused.
    pub denied_by_budget: u64,
}

/// The state every clone of a hedging service shares.
#[derive(Debug)]
pub struct HedgeState {
    /// When to send a hedge, and the running quantile it reads.
    pub policy: HedgePolicy,
    /// Hedges sent and won, for metrics and tests.
    pub counts: HedgeCounts,
}

/// The retry layer a hedge reports to: every attempt's failure that is not the try's
/// answer goes to its budget's `on_outcome` (the answer's is the retry layer's to
/// report), and when `spend`, a hedge asks the budget first.
#[derive(Clone, Debug)]
struct Budget {
    retry: Shared<RetryState>,
    spend: bool,
}

/// The layer; with no policy (a scenario edge without `[hedge]`) it passes every call
/// through as one attempt.
#[derive(Debug)]
pub struct HedgeLayer<C = ErrorsFail> {
    state: Option<Shared<HedgeState>>,
    budget: Option<Budget>,
    clock: Clock,
    classify: C,
}

impl<C: Clone> Clone for HedgeLayer<C> {
    fn clone(&self) -> Self {
        HedgeLayer {
            state: self.state.clone(),
            budget: self.budget.clone(),
            clock: self.clock,
            classify: self.classify.clone(),
        }
    }
}

/// A hedging layer (`None`: no hedging). Panics if `max_hedges` exceeds
/// [`MAX_HEDGES`]; [`crate::from_scenario`] says so as a configuration error instead.
pub fn hedge(config: Option<HedgeConfig>) -> HedgeLayer {
    let state = config.map(|config| {
        assert!(
            (1..=MAX_HEDGES).contains(&config.max_hedges),
            "a hedge layer sends 1 to {MAX_HEDGES} hedges per try, not {}",
            config.max_hedges
        );
        Shared::new(HedgeState { policy: HedgePolicy::new(config), counts: HedgeCounts::default() })
    });
    HedgeLayer { state, budget: None, clock: Clock::new(), classify: ErrorsFail }
}

impl<C> HedgeLayer<C> {
    /// The shared state (`None` without hedging), to read the policy and the counts.
    pub fn state(&self) -> Option<&Shared<HedgeState>> {
        self.state.as_ref()
    }

    /// The same layer, reporting to `retry`'s budget; when `spend`, a hedge asks that
    /// budget as a retry does (a scenario's `hedge.uses_budget`).
    pub fn with_retry<C2>(mut self, retry: &RetryLayer<C2>, spend: bool) -> Self {
        self.budget = Some(Budget { retry: retry.state().clone(), spend });
        self
    }

    /// The same layer, reading outcomes with `classify`.
    pub fn classify<C2>(self, classify: C2) -> HedgeLayer<C2> {
        HedgeLayer { state: self.state, budget: self.budget, clock: self.clock, classify }
    }
}

impl<S, C: Clone> Layer<S> for HedgeLayer<C> {
    type Service = Hedge<S, C>;

    fn layer(&self, inner: S) -> Hedge<S, C> {
        Hedge {
            inner,
            state: self.state.clone(),
            budget: self.budget.clone(),
            clock: self.clock,
            classify: self.classify.clone(),
        }
    }
}

/// A hedging service. Its inner service is cloned for each call (as the retry layer's
/// is), and the request is cloned for each hedge.
#[derive(Clone, Debug)]
pub struct Hedge<S, C> {
    inner: S,
    state: Option<Shared<HedgeState>>,
    budget: Option<Budget>,
    clock: Clock,
    classify: C,
}

impl<S, C, Req> Service<Req> for Hedge<S, C>
where
    S: Service<Req> + Clone,
    C: Classify<S::Response, S::Error>,
    Req: Clone,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = HedgeFuture<S, Req, C>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Req) -> Self::Future {
        let clone = self.inner.clone();
        let mut service = std::mem::replace(&mut self.inner, clone);
        let mut attempts = Slots::default();
        attempts.slots[0] = Some(service.call(request.clone()));
        let started_at = self.clock.now();
        let first_hedge_at = self.state.as_ref().and_then(|state| {
            let mut state = state.lock();
            state.counts.calls += 1;
            state.policy.delay(0)
        });
        let first_hedge_at = first_hedge_at.map(|delay| Instant::now() + Duration::from_nanos(delay));
        HedgeFuture {
            attempts,
            timer: Timer::Idle,
            first_hedge_at,
            hedge_waiting: false,
            service,
            request,
            grants: Grants { budget: self.budget.clone(), granted: [false; SLOTS + 1] },
            state: self.state.clone(),
            clock: self.clock,
            classify: self.classify.clone(),
            started_at,
            out: 1,
            hedges: 0,
        }
    }
}

/// The attempts of one try, in a fixed array inside the call's future. Structurally
/// pinned: a future in a slot is polled through [`Slots::slot`] and dropped in place
/// (`Pin::set(None)`), never moved.
struct Slots<F> {
    slots: [Option<F>; SLOTS],
}

impl<F> Default for Slots<F> {
    fn default() -> Self {
        Slots { slots: std::array::from_fn(|_| None) }
    }
}

impl<F> Slots<F> {
    fn slot(self: Pin<&mut Self>, index: usize) -> Pin<&mut Option<F>> {
        // SAFETY: `Slots` is only reached through this projection once pinned; a slot's
        // future is never moved out (it is dropped in place by `Pin::set`), and `Slots`
        // has no `Drop` of its own that could move it.
        unsafe { self.map_unchecked_mut(|slots| &mut slots.slots[index]) }
    }
}

/// The hedges a budget granted, by slot, handed back when they end, even when the
/// caller drops the call. Place [`PENDING`] is the hedge granted but not yet sent (the
/// service was not ready): its grant moves to the slot the hedge is sent in.
#[derive(Debug)]
struct Grants {
    budget: Option<Budget>,
    granted: [bool; SLOTS + 1],
}

/// [`Grants`]' place for a granted hedge waiting for the service.
const PENDING: usize = SLOTS;

impl Grants {
    fn finish(&mut self, slot: usize) {
        if std::mem::take(&mut self.granted[slot]) {
            let budget = self.budget.as_ref().expect("only a budget grants");
            budget.retry.lock().budget.retry_finished();
        }
    }
}

impl Grants {
    /// Whether a due hedge may go: `Some(granted)` (granted: the budget lent it), or
    /// `None` when the budget refused it.
    fn hedge_allowed(&self, clock: &Clock) -> Option<bool> {
        match self.budget.as_ref().filter(|budget| budget.spend) {
            None => Some(false),
            Some(budget) => {
                let now = clock.now();
                let mut retry = budget.retry.lock();
                let retry = &mut *retry;
                retry.budget.try_retry(now, retry.active, 0, &mut retry.rng).then_some(true)
            }
        }
    }
}

/// A try succeeded after `latency` (since its first attempt), answered by attempt
/// `index` (0: the first, not a hedge).
fn record_win(state: &Shared<HedgeState>, latency: Nanos, index: usize) {
    let mut state = state.lock();
    // The try's latency since its first attempt, not the winner's own: the losers are
    // never seen, so their own latencies would read the tail short (the graph model's
    // reasoning).
    state.policy.observe(latency);
    if index > 0 {
        state.counts.hedge_wins += 1;
    }
}

/// A hedge went out, the try's `hedges`-th: counted; the delay until the next, if any.
fn hedge_sent(state: &Shared<HedgeState>, hedges: u32) -> Option<Nanos> {
    let mut state = state.lock();
    state.counts.hedges += 1;
    state.policy.delay(hedges)
}

impl Drop for Grants {
    fn drop(&mut self) {
        for slot in 0..=PENDING {
            self.finish(slot);
        }
    }
}

pin_project! {
    /// The next hedge's timer.
    #[project = TimerProj]
    enum Timer {
        Idle,
        Armed { #[pin] sleep: Sleep },
    }
}

pin_project! {
    /// A try through the hedge layer: its attempts, the timer of the next hedge, and
    /// the first success (or the last failure).
    #[project = HedgeProj]
    pub struct HedgeFuture<S: Service<Req>, Req, C> {
        #[pin]
        attempts: Slots<S::Future>,
        #[pin]
        timer: Timer,
        // When the first hedge is due, until a poll arms the timer with it.
        first_hedge_at: Option<Instant>,
        // The timer fired and the hedge waits for the service to be ready.
        hedge_waiting: bool,
        service: S,
        request: Req,
        grants: Grants,
        state: Option<Shared<HedgeState>>,
        clock: Clock,
        classify: C,
        started_at: Nanos,
        // Attempts out.
        out: u32,
        // Hedges sent or refused by the budget (the policy's `hedges_sent`).
        hedges: u32,
    }
}

impl<S, Req, C> Future for HedgeFuture<S, Req, C>
where
    S: Service<Req>,
    C: Classify<S::Response, S::Error>,
    Req: Clone,
{
    type Output = Result<S::Response, S::Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        loop {
            if let Some(answer) = poll_attempts(&mut this, cx) {
                return Poll::Ready(answer);
            }
            debug_assert!(*this.out >= 1, "a try with nothing out has answered");
            poll_timer(&mut this, cx);
            if !*this.hedge_waiting {
                return Poll::Pending;
            }
            match this.service.poll_ready(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(ready) => {
                    *this.hedge_waiting = false;
                    if ready.is_err() {
                        // The service cannot take the hedge; the attempts out go on.
                        this.grants.finish(PENDING);
                        continue;
                    }
                    send_hedge(&mut this);
                }
            }
        }
    }
}

/// Polls the attempts out, in the order they were sent: the try's answer once one
/// succeeds (the others are dropped, which cancels them) or the last one fails.
fn poll_attempts<S, Req, C>(
    this: &mut HedgeProj<'_, S, Req, C>,
    cx: &mut Context<'_>,
) -> Option<Result<S::Response, S::Error>>
where
    S: Service<Req>,
    C: Classify<S::Response, S::Error>,
{
    for index in 0..SLOTS {
        let mut slot = this.attempts.as_mut().slot(index);
        let Some(future) = slot.as_mut().as_pin_mut() else { continue };
        let Poll::Ready(result) = future.poll(cx) else { continue };
        slot.set(None);
        *this.out -= 1;
        this.grants.finish(index);
        let classified = this.classify.classify(result.as_ref());
        let now = this.clock.now();
        if classified.outcome == Outcome::Success {
            if let Some(state) = this.state {
                record_win(state, now.saturating_sub(*this.started_at), index);
            }
            // The others lose: dropped, which cancels them (and a hedge granted
            // but not yet sent is not sent).
            for other in 0..SLOTS {
                this.attempts.as_mut().slot(other).set(None);
                this.grants.finish(other);
            }
            this.grants.finish(PENDING);
            *this.out = 0;
            return Some(result);
        }
        if *this.out == 0 {
            // Every attempt failed: the last failure is the try's answer (a hedge
            // still waiting for the service is not sent).
            this.grants.finish(PENDING);
            return Some(result);
        }
        // Another attempt may still answer; the budget hears this one's failure.
        if let (Some(budget), true) = (this.grants.budget.as_ref(), classified.reached) {
            budget.retry.lock().budget.on_outcome(now, false);
        }
    }
    None
}

/// Polls the next hedge's timer; when it fires, the budget grants the hedge (which
/// then waits for the service to be ready) or refuses it, and this try sends no
/// more, as in the simulator.
fn poll_timer<S, Req, C>(this: &mut HedgeProj<'_, S, Req, C>, cx: &mut Context<'_>)
where
    S: Service<Req>,
{
    // The first hedge's timer is made only when the first attempt did not answer
    // at once (and so inside the runtime that polls it).
    if let Some(due) = this.first_hedge_at.take() {
        this.timer.set(Timer::Armed { sleep: tokio::time::sleep_until(due) });
    }
    let fired = match this.timer.as_mut().project() {
        TimerProj::Armed { sleep } => sleep.poll(cx).is_ready(),
        TimerProj::Idle => false,
    };
    if !fired {
        return;
    }
    this.timer.set(Timer::Idle);
    *this.hedges += 1;
    let state = this.state.as_ref().expect("only a policy arms the timer");
    match this.grants.hedge_allowed(this.clock) {
        None => state.lock().counts.denied_by_budget += 1,
        Some(granted) => {
            *this.hedge_waiting = true;
            this.grants.granted[PENDING] = granted;
        }
    }
}

/// Sends the granted hedge (the service is ready) in a free slot and arms the timer
/// for the one after it, if the policy has one.
fn send_hedge<S, Req, C>(this: &mut HedgeProj<'_, S, Req, C>)
where
    S: Service<Req>,
    Req: Clone,
{
    let free = (0..SLOTS).find(|&slot| this.attempts.as_mut().slot(slot).is_none());
    let free = free.expect("at most 1 + max_hedges attempts are out");
    this.grants.granted[free] = std::mem::take(&mut this.grants.granted[PENDING]);
    this.attempts.as_mut().slot(free).set(Some(this.service.call(this.request.clone())));
    *this.out += 1;
    debug_assert!(*this.out <= MAX_HEDGES + 1);
    let state = this.state.as_ref().expect("only a policy sends hedges");
    let next = hedge_sent(state, *this.hedges);
    emit(Event::Hedge);
    if let Some(delay) = next {
        this.timer.set(Timer::Armed { sleep: tokio::time::sleep(Duration::from_nanos(delay)) });
    }
}
