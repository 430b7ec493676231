//! The simulator's [`Bulkhead`] as a layer: a fixed number of slots, and a bounded wait
//! queue in front of them in FIFO, LIFO or adaptive-LIFO order, with CoDel and a
//! deadline (the longest a request may wait). A request that finds no slot waits in
//! the struct's own queue; a finishing request's `release` hands its slot to the
//! waiter the struct chooses, and the waiters it drops (CoDel, expired) are refused.
//!
//! Invariants: every waiter the struct knows has one cell in `waiters` until its
//! future has read the verdict (or was dropped and the verdict was settled for it);
//! a slot handed to a waiter whose caller had gone is released again at once; every
//! slot taken is released exactly once, by the request's `SlotHold`.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use pin_project_lite::pin_project;
use stampede_kernel::{Nanos, Slab, SlabKey};
use stampede_policy::bulkhead::{Acquire, Bulkhead, BulkheadConfig, Dropped, Waiter};
use tokio::time::Sleep;
use tower_layer::Layer;
use tower_service::Service;

use crate::clock::Clock;
use crate::events::{emit, Event};
use crate::shared::Shared;
use crate::{BoxError, Rejected};

/// What became of a queued request.
#[derive(Debug)]
enum Verdict {
    Waiting(Option<Waker>),
    /// A slot is the request's now.
    Granted,
    Dropped(Dropped),
    /// Its caller went away while it waited; the struct still has it queued.
    Cancelled,
}

/// The struct and the verdicts of the requests it has queued.
#[derive(Debug)]
pub struct BulkheadState {
    /// The simulator's bulkhead: slots, the queue and its CoDel.
    pub bulkhead: Bulkhead,
    waiters: Slab<Verdict>,
    /// How long a request may wait (its deadline in the queue).
    max_wait: Nanos,
}

impl BulkheadState {
    /// Frees a slot: hands it to the next waiter (again, while the chosen one's caller
    /// has gone) and settles the ones the struct dropped on the way.
    fn release(&mut self, now: Nanos) {
        loop {
            let waiters = &mut self.waiters;
            let handed = self.bulkhead.release(now, |waiter, why| settle_dropped(waiters, waiter, why));
            let Some(waiter) = handed else { return };
            let key = SlabKey::from_bits(waiter.id);
            let cell = self.waiters.get_mut(key).expect("a queued waiter has a cell");
            match std::mem::replace(cell, Verdict::Granted) {
                Verdict::Waiting(waker) => {
                    if let Some(waker) = waker {
                        waker.wake();
                    }
                    return;
                }
                Verdict::Cancelled => {
                    // Nobody will use it: the slot is released again, to the next waiter.
                    self.waiters.remove(key);
                }
                other => unreachable!("a waiter handed a slot was waiting, not {other:?}"),
            }
        }
    }

    /// Drops the waiters whose time in the queue is up.
    fn sweep(&mut self, now: Nanos) {
        let waiters = &mut self.waiters;
        self.bulkhead.sweep(now, |waiter, why| settle_dropped(waiters, waiter, why));
    }
}

fn settle_dropped(waiters: &mut Slab<Verdict>, waiter: Waiter, why: Dropped) {
    let key = SlabKey::from_bits(waiter.id);
    let cell = waiters.get_mut(key).expect("a queued waiter has a cell");
    match std::mem::replace(cell, Verdict::Dropped(why)) {
        Verdict::Waiting(Some(waker)) => waker.wake(),
        Verdict::Waiting(None) => {}
        Verdict::Cancelled => {
            waiters.remove(key);
        }
        other => unreachable!("a dropped waiter was waiting, not {other:?}"),
    }
}

/// The layer.
#[derive(Clone, Debug)]
pub struct BulkheadLayer {
    state: Shared<BulkheadState>,
    clock: Clock,
}

/// A bulkhead of `config.slots` slots and a queue of `config.queue_capacity`, where
/// a request waits at most `max_wait`.
pub fn bulkhead(config: BulkheadConfig, max_wait: Duration) -> BulkheadLayer {
    let state = BulkheadState {
        bulkhead: Bulkhead::new(config),
        waiters: Slab::with_capacity(config.queue_capacity as usize),
        max_wait: crate::clock::nanos(max_wait),
    };
    BulkheadLayer { state: Shared::new(state), clock: Clock::new() }
}

impl BulkheadLayer {
    /// The shared state, to read the slots in use and the queue.
    pub fn state(&self) -> &Shared<BulkheadState> {
        &self.state
    }
}

impl<S> Layer<S> for BulkheadLayer {
    type Service = BulkheadService<S>;

    fn layer(&self, inner: S) -> BulkheadService<S> {
        BulkheadService { inner, state: self.state.clone(), clock: self.clock }
    }
}

/// A service behind a bulkhead. A queued request calls its own clone of the inner
/// service once it has a slot.
#[derive(Clone, Debug)]
pub struct BulkheadService<S> {
    inner: S,
    state: Shared<BulkheadState>,
    clock: Clock,
}

/// A slot held by a request; released (to the next waiter) when dropped.
#[derive(Debug)]
struct SlotHold {
    state: Shared<BulkheadState>,
    clock: Clock,
}

impl Drop for SlotHold {
    fn drop(&mut self) {
        let now = self.clock.now();
        self.state.lock().release(now);
    }
}

/// A queued request's place; settles its verdict if the caller goes away first.
#[derive(Debug)]
struct Place {
    state: Shared<BulkheadState>,
    clock: Clock,
    key: Option<SlabKey>,
}

impl Drop for Place {
    fn drop(&mut self) {
        let Some(key) = self.key.take() else { return };
        let now = self.clock.now();
        let mut state = self.state.lock();
        let cell = state.waiters.get_mut(key).expect("a place has a cell");
        match cell {
            Verdict::Waiting(_) => *cell = Verdict::Cancelled,
            Verdict::Granted => {
                state.waiters.remove(key);
                state.release(now);
            }
            Verdict::Dropped(_) => {
                state.waiters.remove(key);
            }
            Verdict::Cancelled => unreachable!("a place is cancelled once"),
        }
    }
}

impl<S, Req> Service<Req> for BulkheadService<S>
where
    S: Service<Req> + Clone,
    S::Error: Into<BoxError>,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = BulkheadFuture<S, Req>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Req) -> Self::Future {
        let now = self.clock.now();
        let mut state = self.state.lock();
        let deadline = now.saturating_add(state.max_wait);
        let key = state.waiters.insert(Verdict::Waiting(None));
        let acquired = state.bulkhead.try_acquire(now, key.to_bits(), deadline);
        if !matches!(acquired, Acquire::Queued) {
            state.waiters.remove(key);
        }
        drop(state);
        let hold = || SlotHold { state: self.state.clone(), clock: self.clock };
        match acquired {
            Acquire::Granted => {
                let hold = hold();
                BulkheadFuture {
                    state: Stage::Running { future: self.inner.call(request), hold },
                    service: None,
                    request: None,
                }
            }
            Acquire::QueueFull => {
                emit(Event::Refused(Rejected::BulkheadFull));
                BulkheadFuture {
                    state: Stage::Refused { why: Some(Rejected::BulkheadFull) },
                    service: None,
                    request: None,
                }
            }
            Acquire::Queued => {
                // The ready service stays for the next call; the queued one calls a clone.
                let clone = self.inner.clone();
                let place = Place { state: self.state.clone(), clock: self.clock, key: Some(key) };
                let wait = Duration::from_nanos(deadline - now);
                BulkheadFuture {
                    state: Stage::Queued { place, sleep: tokio::time::sleep(wait) },
                    service: Some(clone),
                    request: Some(request),
                }
            }
        }
    }
}

pin_project! {
    #[project = StageProj]
    enum Stage<F> {
        Refused { why: Option<Rejected> },
        Queued { place: Place, #[pin] sleep: Sleep },
        Ready { hold: Option<SlotHold> },
        Running { #[pin] future: F, hold: SlotHold },
    }
}

pin_project! {
    /// A request through the bulkhead: refused, queued, or holding a slot.
    pub struct BulkheadFuture<S: Service<Req>, Req> {
        #[pin]
        state: Stage<S::Future>,
        service: Option<S>,
        request: Option<Req>,
    }
}

impl<S, Req> Future for BulkheadFuture<S, Req>
where
    S: Service<Req>,
    S::Error: Into<BoxError>,
{
    type Output = Result<S::Response, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        loop {
            match this.state.as_mut().project() {
                StageProj::Refused { why } => {
                    return Poll::Ready(Err(Box::new(why.take().expect("polled once after a refusal"))));
                }
                StageProj::Queued { place, sleep } => {
                    let timed_out = sleep.poll(cx).is_ready();
                    let key = place.key.expect("a queued request has its place");
                    let mut state = place.state.lock();
                    if timed_out {
                        let now = place.clock.now();
                        state.sweep(now);
                    }
                    let cell = state.waiters.get_mut(key).expect("a place has a cell");
                    match cell {
                        Verdict::Waiting(waker) => {
                            if !waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                                *waker = Some(cx.waker().clone());
                            }
                            return Poll::Pending;
                        }
                        Verdict::Granted => {
                            state.waiters.remove(key);
                            drop(state);
                            place.key = None;
                            let hold = SlotHold { state: place.state.clone(), clock: place.clock };
                            this.state.set(Stage::Ready { hold: Some(hold) });
                        }
                        Verdict::Dropped(why) => {
                            let why = *why;
                            state.waiters.remove(key);
                            place.key = None;
                            emit(Event::Refused(Rejected::BulkheadDropped(why)));
                            return Poll::Ready(Err(Box::new(Rejected::BulkheadDropped(why))));
                        }
                        Verdict::Cancelled => unreachable!("only a dropped place cancels"),
                    }
                }
                StageProj::Ready { hold } => {
                    let service = this.service.as_mut().expect("a queued request keeps its service");
                    if let Err(error) = std::task::ready!(service.poll_ready(cx)) {
                        return Poll::Ready(Err(error.into()));
                    }
                    let request = this.request.take().expect("called once");
                    let future = service.call(request);
                    let hold = hold.take().expect("held until called");
                    this.state.set(Stage::Running { future, hold });
                }
                StageProj::Running { future, .. } => {
                    return future.poll(cx).map_err(Into::into);
                }
            }
        }
    }
}
