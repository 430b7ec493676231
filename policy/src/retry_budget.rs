//! Retry budgets: limits on how much retrying a client may do, so that retries
//! self-cancel when the dependency is failing instead of multiplying its load.
//!
//! Five flavours, each after its reference:
//! * [`RatioBudget`] — each success deposits `ratio` tokens, each retry spends one,
//!   capped (the seeds' "10% of normal volume").
//! * [`GrpcThrottle`] — gRPC retry throttling (A6): failures −1, successes +ratio,
//!   retries allowed while tokens > max/2.
//! * [`TtlBudget`] — Finagle's `RetryBudget` / tower's `TpsBudget`: deposits expire
//!   after a TTL, a reserve of `min_per_sec × ttl` retries, `percent` per request.
//! * [`EnvoyBudget`] — Envoy's retry budget: active retries ≤
//!   max(min_retry_concurrency, percent × (active + pending) requests).
//! * [`AdaptiveThrottle`] — client-side adaptive throttling (Google SRE book, ch. 21):
//!   reject locally with probability max(0, (requests − K·accepts) / (requests + 1)).
//!
//! Fractional tokens are kept in integer micro-tokens so that "100 successes at 10%
//! buy exactly 10 retries" holds exactly.

use crate::kernel::rng::RngStream;
use crate::kernel::time::Nanos;

const MICRO: u64 = 1_000_000;

fn to_micro(tokens: f64) -> u64 {
    assert!(tokens.is_finite() && tokens >= 0.0, "token amounts must be finite and non-negative: {tokens}");
    (tokens * MICRO as f64).round() as u64
}

/// Each success deposits `ratio` tokens (capped); each retry spends one whole token.
#[derive(Clone, Debug)]
pub struct RatioBudget {
    ratio: u64,
    cap: u64,
    tokens: u64,
}

impl RatioBudget {
    /// `ratio` tokens per success, at most `cap` tokens, starting with `initial`.
    pub fn new(ratio: f64, cap: f64, initial: f64) -> Self {
        let cap = to_micro(cap);
        RatioBudget { ratio: to_micro(ratio), cap, tokens: to_micro(initial).min(cap) }
    }

    /// Tokens now.
    pub fn tokens(&self) -> f64 {
        self.tokens as f64 / MICRO as f64
    }

    /// A success deposits `ratio`.
    #[inline]
    pub fn on_success(&mut self) {
        self.tokens = (self.tokens + self.ratio).min(self.cap);
        debug_assert!(self.tokens <= self.cap);
    }

    /// Spends one token for a retry, if there is one.
    #[inline]
    pub fn try_retry(&mut self) -> bool {
        if self.tokens >= MICRO {
            self.tokens -= MICRO;
            true
        } else {
            false
        }
    }
}

/// gRPC retry throttling: `max_tokens`, `token_ratio`; starts full.
#[derive(Clone, Debug)]
pub struct GrpcThrottle {
    max: u64,
    ratio: u64,
    tokens: u64,
}

impl GrpcThrottle {
    /// gRPC's `retryThrottling { maxTokens, tokenRatio }`.
    pub fn new(max_tokens: f64, token_ratio: f64) -> Self {
        let max = to_micro(max_tokens);
        GrpcThrottle { max, ratio: to_micro(token_ratio), tokens: max }
    }

    /// Tokens now.
    pub fn tokens(&self) -> f64 {
        self.tokens as f64 / MICRO as f64
    }

    /// A success adds `token_ratio`, up to the maximum.
    #[inline]
    pub fn on_success(&mut self) {
        self.tokens = (self.tokens + self.ratio).min(self.max);
    }

    /// A failure takes one token, down to zero.
    #[inline]
    pub fn on_failure(&mut self) {
        self.tokens = self.tokens.saturating_sub(MICRO);
    }

    /// Retries (and hedges) are allowed while tokens exceed half the maximum.
    #[inline]
    pub fn try_retry(&self) -> bool {
        self.tokens * 2 > self.max
    }
}

/// A sum over a sliding time window, kept in `N` slots of `window / N` each.
/// Slots older than the window are evicted by age when touched — never reset on a
/// fixed tick — so the sum covers the last `window` (to one slot's precision).
#[derive(Clone, Debug)]
pub struct WindowedSum<const N: usize> {
    slot_width: Nanos,
    epochs: [u64; N],
    values: [i64; N],
}

impl<const N: usize> WindowedSum<N> {
    /// A window of `window` nanoseconds.
    pub fn new(window: Nanos) -> Self {
        assert!(N > 0 && window >= N as u64, "window too short for {N} slots");
        WindowedSum { slot_width: window / N as u64, epochs: [u64::MAX; N], values: [0; N] }
    }

    #[inline]
    fn slot(&mut self, now: Nanos) -> usize {
        let epoch = now / self.slot_width;
        let index = (epoch % N as u64) as usize;
        if self.epochs[index] != epoch {
            self.epochs[index] = epoch;
            self.values[index] = 0;
        }
        index
    }

    /// Adds `value` at `now`.
    #[inline]
    pub fn add(&mut self, now: Nanos, value: i64) {
        let index = self.slot(now);
        self.values[index] += value;
    }

    /// The sum of the slots within the window ending at `now`.
    #[inline]
    pub fn sum(&self, now: Nanos) -> i64 {
        let current = now / self.slot_width;
        let oldest = current.saturating_sub(N as u64 - 1);
        let mut total = 0;
        for (epoch, value) in self.epochs.iter().zip(&self.values) {
            if *epoch != u64::MAX && *epoch >= oldest && *epoch <= current {
                total += value;
            }
        }
        total
    }
}

/// Finagle's `RetryBudget` / tower's `TpsBudget`.
#[derive(Clone, Debug)]
pub struct TtlBudget {
    window: WindowedSum<10>,
    deposit_amount: i64,
    withdraw_amount: i64,
    reserve: i64,
}

impl TtlBudget {
    /// Deposits live for `ttl`; `min_per_sec` retries per second are always allowed;
    /// beyond that, `percent` (0..=1000) of requests may be retried. Finagle's and
    /// tower's defaults: ttl 10 s, min_per_sec 10, percent 0.2.
    pub fn new(ttl: Nanos, min_per_sec: u32, percent: f64) -> Self {
        assert!((0.0..=1000.0).contains(&percent), "percent out of range: {percent}");
        // tower's integer scaling: a deposit is 1 (or 1000 above 100%), a withdrawal 1/percent.
        let (deposit_amount, withdraw_amount) = if percent == 0.0 {
            (0, 1)
        } else if percent <= 1.0 {
            (1, (1.0 / percent) as i64)
        } else {
            (1000, (1000.0 / percent) as i64)
        };
        let ttl_secs = (ttl / crate::kernel::time::NANOS_PER_SEC) as i64;
        let reserve = (min_per_sec as i64).saturating_mul(ttl_secs).saturating_mul(withdraw_amount);
        TtlBudget { window: WindowedSum::new(ttl), deposit_amount, withdraw_amount, reserve }
    }

    /// Every request (first attempts) deposits.
    #[inline]
    pub fn deposit(&mut self, now: Nanos) {
        self.window.add(now, self.deposit_amount);
    }

    /// A retry withdraws if the balance allows it.
    #[inline]
    pub fn try_withdraw(&mut self, now: Nanos) -> bool {
        if self.balance(now) >= self.withdraw_amount {
            self.window.add(now, -self.withdraw_amount);
            true
        } else {
            false
        }
    }

    /// The balance in tower's units (retries available × withdraw amount).
    pub fn balance(&self, now: Nanos) -> i64 {
        self.window.sum(now) + self.reserve
    }
}

/// Envoy's retry budget: caps concurrent retries relative to active requests.
#[derive(Clone, Debug)]
pub struct EnvoyBudget {
    budget_percent: f64,
    min_retry_concurrency: u32,
    active_retries: u32,
}

impl EnvoyBudget {
    /// Envoy's defaults: 20% of active + pending requests, at least 3 concurrent retries.
    pub fn new(budget_percent: f64, min_retry_concurrency: u32) -> Self {
        assert!((0.0..=100.0).contains(&budget_percent), "budget_percent out of range");
        EnvoyBudget { budget_percent, min_retry_concurrency, active_retries: 0 }
    }

    /// The retry concurrency allowed with `active` requests in flight and `pending` queued.
    pub fn limit(&self, active: u32, pending: u32) -> u32 {
        let share = (self.budget_percent / 100.0 * (active as f64 + pending as f64)) as u32;
        share.max(self.min_retry_concurrency)
    }

    /// Starts a retry if the budget has room; pair with [`Self::retry_finished`].
    #[inline]
    pub fn try_start_retry(&mut self, active: u32, pending: u32) -> bool {
        if self.active_retries < self.limit(active, pending) {
            self.active_retries += 1;
            true
        } else {
            false
        }
    }

    /// A retry ended (any outcome).
    #[inline]
    pub fn retry_finished(&mut self) {
        debug_assert!(self.active_retries > 0, "retry_finished without a retry");
        self.active_retries = self.active_retries.saturating_sub(1);
    }

    /// Retries in flight.
    pub fn active_retries(&self) -> u32 {
        self.active_retries
    }
}

/// Client-side adaptive throttling (Google SRE book): requests and accepts over a
/// sliding window; reject locally with probability max(0, (requests − K·accepts) / (requests + 1)).
#[derive(Clone, Debug)]
pub struct AdaptiveThrottle {
    k: f64,
    requests: WindowedSum<20>,
    accepts: WindowedSum<20>,
}

impl AdaptiveThrottle {
    /// The book's defaults: K = 2, a two-minute window.
    pub fn new(k: f64, window: Nanos) -> Self {
        assert!(k >= 1.0, "K below 1 rejects requests the backend would accept");
        AdaptiveThrottle { k, requests: WindowedSum::new(window), accepts: WindowedSum::new(window) }
    }

    /// The probability that the next request is rejected locally.
    pub fn rejection_probability(&self, now: Nanos) -> f64 {
        let requests = self.requests.sum(now) as f64;
        let accepts = self.accepts.sum(now) as f64;
        ((requests - self.k * accepts) / (requests + 1.0)).max(0.0)
    }

    /// Counts a request and decides whether to send it (true) or reject it locally.
    #[inline]
    pub fn admit(&mut self, now: Nanos, rng: &mut RngStream) -> bool {
        let reject = self.rejection_probability(now);
        self.requests.add(now, 1);
        rng.uniform01() >= reject
    }

    /// The backend accepted a request (anything but an overload or rate-limit answer).
    #[inline]
    pub fn record_accept(&mut self, now: Nanos) {
        self.accepts.add(now, 1);
    }
}

/// Any of the five budgets, behind one interface for models.
#[derive(Clone, Debug)]
pub enum RetryBudget {
    /// No budget: every retry the classifier allows goes.
    Unlimited,
    /// Each success deposits a share of a token; each retry spends one.
    Ratio(RatioBudget),
    /// gRPC's retry throttling (token bucket).
    Grpc(GrpcThrottle),
    /// Finagle's `RetryBudget` / tower's `TpsBudget`: deposits that expire after a TTL.
    Ttl(TtlBudget),
    /// Envoy's retry budget: retries in flight as a share of requests in flight.
    Envoy(EnvoyBudget),
    /// Boxed: its two windows make it ten times larger than the other budgets.
    Adaptive(Box<AdaptiveThrottle>),
}

impl RetryBudget {
    /// A first attempt is sent.
    #[inline]
    pub fn on_request(&mut self, now: Nanos) {
        if let RetryBudget::Ttl(budget) = self {
            budget.deposit(now);
        }
    }

    /// An attempt ended; `success` for an answer the client can use.
    #[inline]
    pub fn on_outcome(&mut self, now: Nanos, success: bool) {
        match self {
            RetryBudget::Ratio(b) if success => b.on_success(),
            RetryBudget::Grpc(b) if success => b.on_success(),
            RetryBudget::Grpc(b) => b.on_failure(),
            RetryBudget::Adaptive(b) if success => b.record_accept(now),
            _ => {}
        }
    }

    /// May a retry go now? `active` and `pending` are the caller's requests in flight
    /// and queued (Envoy's budget needs them). A granted Envoy retry must be ended
    /// with [`Self::retry_finished`].
    #[inline]
    pub fn try_retry(&mut self, now: Nanos, active: u32, pending: u32, rng: &mut RngStream) -> bool {
        match self {
            RetryBudget::Unlimited => true,
            RetryBudget::Ratio(b) => b.try_retry(),
            RetryBudget::Grpc(b) => b.try_retry(),
            RetryBudget::Ttl(b) => b.try_withdraw(now),
            RetryBudget::Envoy(b) => b.try_start_retry(active, pending),
            RetryBudget::Adaptive(b) => b.admit(now, rng),
        }
    }

    /// A retry granted by [`Self::try_retry`] ended.
    #[inline]
    pub fn retry_finished(&mut self) {
        if let RetryBudget::Envoy(b) = self {
            b.retry_finished();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::rng::StreamPurpose;
    use crate::kernel::time::{secs_to_nanos, NANOS_PER_SEC};

    #[test]
    fn an_empty_ratio_budget_grants_almost_nothing() {
        let mut budget = RatioBudget::new(0.1, 10.0, 0.0);
        let granted = (0..100).filter(|_| budget.try_retry()).count();
        assert_eq!(granted, 0);
        // Interleaving 100 retries with failures (no deposits) never refills it.
        let mut seeded = RatioBudget::new(0.1, 10.0, 3.0);
        assert_eq!((0..100).filter(|_| seeded.try_retry()).count(), 3, "a handful: the initial tokens only");
    }

    #[test]
    fn a_ten_percent_budget_grants_ten_after_a_hundred_successes() {
        let mut budget = RatioBudget::new(0.1, 100.0, 0.0);
        (0..100).for_each(|_| budget.on_success());
        assert_eq!(budget.tokens(), 10.0);
        assert_eq!((0..100).filter(|_| budget.try_retry()).count(), 10);
        let mut capped = RatioBudget::new(0.1, 5.0, 0.0);
        (0..100).for_each(|_| capped.on_success());
        assert_eq!((0..100).filter(|_| capped.try_retry()).count(), 5, "the cap binds");
    }

    #[test]
    fn grpc_throttle_stops_retrying_below_half_and_recovers_on_successes() {
        let mut t = GrpcThrottle::new(10.0, 0.1);
        assert!(t.try_retry());
        (0..5).for_each(|_| t.on_failure());
        assert_eq!(t.tokens(), 5.0);
        assert!(!t.try_retry(), "exactly half is not above half");
        t.on_success();
        assert!(t.try_retry());
        (0..100).for_each(|_| t.on_failure());
        assert_eq!(t.tokens(), 0.0);
        (0..51).for_each(|_| t.on_success());
        assert!(t.try_retry(), "5.1 tokens > 5");
    }

    #[test]
    fn ttl_budget_allows_its_reserve_then_a_percentage_and_forgets_after_the_ttl() {
        let ttl = 10 * NANOS_PER_SEC;
        let mut budget = TtlBudget::new(ttl, 1, 0.2);
        // Reserve: 1 retry/s × 10 s.
        let granted = (0..100).filter(|_| budget.try_withdraw(0)).count();
        assert_eq!(granted, 10);
        // 100 requests buy 20% = 20 more.
        (0..100).for_each(|_| budget.deposit(NANOS_PER_SEC));
        assert_eq!((0..100).filter(|_| budget.try_withdraw(NANOS_PER_SEC)).count(), 20);
        // After the TTL both deposits and withdrawals have expired: the reserve is back.
        let later = NANOS_PER_SEC + ttl + NANOS_PER_SEC;
        assert_eq!((0..100).filter(|_| budget.try_withdraw(later)).count(), 10);
    }

    #[test]
    fn envoy_budget_scales_with_active_requests() {
        let mut budget = EnvoyBudget::new(20.0, 3);
        assert_eq!((0..10).filter(|_| budget.try_start_retry(5, 0)).count(), 3, "the minimum concurrency");
        (0..3).for_each(|_| budget.retry_finished());
        assert_eq!((0..100).filter(|_| budget.try_start_retry(80, 20)).count(), 20, "20% of 100");
        assert_eq!(budget.active_retries(), 20);
    }

    #[test]
    fn adaptive_throttle_lets_k_times_the_accepted_rate_through() {
        let mut rng = RngStream::derive(1, 0, StreamPurpose::named("test.adaptive"));
        let mut throttle = AdaptiveThrottle::new(2.0, secs_to_nanos(120.0));
        // A healthy backend accepts everything: no local rejections.
        for i in 0..1000 {
            let now = i * 1_000_000;
            assert!(throttle.admit(now, &mut rng));
            throttle.record_accept(now);
        }
        // Then 200 requests/s meet a backend that accepts only 20 per second. The
        // throttle should send about K × 20 = 40/s and reject the rest locally (80%).
        let start = secs_to_nanos(200.0); // the healthy second has left the window
        let (mut sent, mut rejected) = (0u32, 0u32);
        let mut accepted_this_second = (0u64, 0u32);
        for i in 0..120_000u64 {
            let now = start + i * 5_000_000;
            let second = now / NANOS_PER_SEC;
            if accepted_this_second.0 != second {
                accepted_this_second = (second, 0);
            }
            if throttle.admit(now, &mut rng) {
                sent += 1;
                if accepted_this_second.1 < 20 {
                    accepted_this_second.1 += 1;
                    throttle.record_accept(now);
                }
            } else {
                rejected += 1;
            }
        }
        let rejected_share = rejected as f64 / (sent + rejected) as f64;
        assert!((rejected_share - 0.8).abs() < 0.02, "{rejected_share}");
    }

    #[test]
    fn windowed_sum_evicts_by_age() {
        let mut w: WindowedSum<10> = WindowedSum::new(10 * NANOS_PER_SEC);
        w.add(0, 5);
        w.add(9 * NANOS_PER_SEC, 1);
        assert_eq!(w.sum(9 * NANOS_PER_SEC), 6);
        assert_eq!(w.sum(10 * NANOS_PER_SEC), 1, "the first slot aged out");
        assert_eq!(w.sum(100 * NANOS_PER_SEC), 0);
    }
}
