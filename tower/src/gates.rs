//! The simulator's door policies as [`Gate`]s, and the layers that build them. Each gate
//! is the policy struct itself (plus a random stream where it draws); the mapping
//! from a live outcome to what the policy learns is the simulator's.

use stampede_kernel::{Nanos, RngStream};
use stampede_policy::breaker::{BreakerConfig, BreakerState, CircuitBreaker, Permit};
use stampede_policy::classify::Outcome;
use stampede_policy::limiter::{ConcurrencyLimiter, LimiterKind, SampleWindow, Signal};
use stampede_policy::shedder::{PriorityShedder, ShedMarks};
use stampede_policy::token_bucket::TokenBucket;
use stampede_policy::Criticality;

use crate::clock::Clock;
use crate::events::{emit, BreakerChange, Event};
use crate::gate::{AllCritical, FromExtension, Gate, GateLayer};
use crate::outcome::{Classified, ErrorsFail};
use crate::Rejected;

/// The simulator's [`CircuitBreaker`] at the door: refused while open; every outcome
/// recorded with its duration (slow calls count as the config says).
#[derive(Debug)]
pub struct BreakerGate(pub CircuitBreaker);

impl Gate for BreakerGate {
    type Ticket = Permit;

    fn admit(&mut self, now: Nanos, _: Criticality) -> Result<Permit, Rejected> {
        let before = self.0.state();
        let permit = self.0.try_acquire(now).ok_or(Rejected::BreakerOpen);
        tell_change(before, self.0.state());
        permit
    }

    fn finish(&mut self, now: Nanos, permit: Permit, classified: Classified, latency: Nanos) {
        let before = self.0.state();
        self.0.record(now, permit, classified.outcome, latency);
        tell_change(before, self.0.state());
    }

    fn abandon(&mut self, permit: Permit) {
        self.0.abandon(permit);
    }
}

/// Tells the event hook when the breaker moved from `before` to `after` (a half-open
/// breaker's probe count moving is not a change of state).
fn tell_change(before: BreakerState, after: BreakerState) {
    let change = match after {
        _ if std::mem::discriminant(&before) == std::mem::discriminant(&after) => return,
        BreakerState::Closed => BreakerChange::Closed,
        BreakerState::Open { .. } => BreakerChange::Opened,
        BreakerState::HalfOpen { .. } => BreakerChange::HalfOpen,
    };
    emit(Event::Breaker(change));
}

/// A circuit breaker layer (outcomes read by [`ErrorsFail`] until `.classify(…)`).
pub fn circuit_breaker(config: BreakerConfig) -> GateLayer<BreakerGate, ErrorsFail> {
    GateLayer::new(BreakerGate(CircuitBreaker::new(config)), Clock::new(), ErrorsFail, AllCritical)
}

/// The simulator's [`ConcurrencyLimiter`] (fixed or adaptive) at the door: refused at
/// the limit; the adaptive kinds learn each call's latency and whether it dropped.
#[derive(Debug)]
pub struct LimitGate {
    /// The limit and what it learns from.
    pub limiter: ConcurrencyLimiter,
    rng: RngStream,
}

/// What a limiter learns from an outcome: the simulator's gateway and graph listener
/// (Netflix's): a success, or a drop for a timeout or an overloaded answer; a 429, a
/// server error or a client error says nothing about congestion and is ignored.
pub fn limiter_signal(outcome: Outcome) -> Option<Signal> {
    match outcome {
        Outcome::Success => Some(Signal::Success),
        Outcome::Timeout | Outcome::Overloaded => Some(Signal::Dropped),
        Outcome::RateLimited | Outcome::ServerError | Outcome::ClientError => None,
    }
}

impl LimitGate {
    /// `limiter` with a random stream from `seed` (Vegas's probe jitter draws from it).
    pub fn new(limiter: ConcurrencyLimiter, seed: u64) -> Self {
        LimitGate { limiter, rng: crate::stream(seed, "tower.limiter") }
    }
}

impl Gate for LimitGate {
    type Ticket = ();

    fn admit(&mut self, _: Nanos, _: Criticality) -> Result<(), Rejected> {
        self.limiter.try_acquire().then_some(()).ok_or(Rejected::ConcurrencyLimit)
    }

    fn finish(&mut self, now: Nanos, _: (), classified: Classified, latency: Nanos) {
        match limiter_signal(classified.outcome) {
            Some(signal) => self.limiter.on_complete(now, latency, signal, &mut self.rng),
            None => self.limiter.abandon(),
        }
    }

    fn abandon(&mut self, _: ()) {
        self.limiter.abandon();
    }
}

/// A concurrency limit: `LimiterKind::Fixed { limit }` or any adaptive kind (AIMD,
/// Vegas, Gradient, Gradient2, Envoy's gradient), optionally windowed. `seed` feeds
/// the draws some limiters make (Vegas's probe jitter).
pub fn concurrency_limit(
    kind: LimiterKind,
    window: Option<SampleWindow>,
    seed: u64,
) -> GateLayer<LimitGate, ErrorsFail> {
    let limiter = match window {
        Some(window) => ConcurrencyLimiter::windowed(kind, window),
        None => ConcurrencyLimiter::new(kind),
    };
    GateLayer::new(LimitGate::new(limiter, seed), Clock::new(), ErrorsFail, AllCritical)
}

/// The simulator's [`PriorityShedder`] at the door: a request is refused when the pool's
/// utilisation has reached its criticality's mark.
#[derive(Debug)]
pub struct ShedGate(pub PriorityShedder);

impl Gate for ShedGate {
    type Ticket = ();

    fn admit(&mut self, _: Nanos, criticality: Criticality) -> Result<(), Rejected> {
        self.0.try_admit(criticality).then_some(()).ok_or(Rejected::Shed(criticality))
    }

    fn finish(&mut self, _: Nanos, _: (), _: Classified, _: Nanos) {
        self.0.release();
    }

    fn abandon(&mut self, _: ()) {
        self.0.release();
    }
}

/// A priority shedder over `max_in_flight`, reading each `http::Request`'s
/// [`Criticality`] extension (`.criticality(…)` for other request types).
pub fn priority_shedder(max_in_flight: u32, marks: ShedMarks) -> GateLayer<ShedGate, ErrorsFail, FromExtension> {
    GateLayer::new(ShedGate(PriorityShedder::new(max_in_flight, marks)), Clock::new(), ErrorsFail, FromExtension)
}

/// The simulator's [`TokenBucket`] at the door: one token per request, refused when empty.
#[derive(Debug)]
pub struct RateGate(pub TokenBucket);

impl Gate for RateGate {
    type Ticket = ();

    fn admit(&mut self, now: Nanos, _: Criticality) -> Result<(), Rejected> {
        self.0.try_take(now, 1).then_some(()).ok_or(Rejected::RateLimited)
    }

    fn finish(&mut self, _: Nanos, _: (), _: Classified, _: Nanos) {}

    fn abandon(&mut self, _: ()) {}
}

/// A rate limit: `capacity` tokens, refilled by `refill` every `period` nanoseconds.
pub fn rate_limit(capacity: u64, refill: u64, period: Nanos) -> GateLayer<RateGate, ErrorsFail> {
    GateLayer::new(RateGate(TokenBucket::new(capacity, refill, period)), Clock::new(), ErrorsFail, AllCritical)
}
