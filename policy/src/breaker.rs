//! A circuit breaker with the state machine of Resilience4j.
//!
//! CLOSED records outcomes in a sliding window (the last N calls, or the last T
//! nanoseconds in buckets evicted by age — never reset on a fixed tick) and trips to
//! OPEN when, with at least `minimum_calls` recorded, the failure rate or the
//! slow-call rate reaches its threshold (≥). OPEN refuses in O(1) and records nothing;
//! the first request after the open time moves it to HALF_OPEN, which admits at most
//! `half_open_probes` probes at a time, closes after that many good probes and reopens
//! on any failed one. Each consecutive trip multiplies the open time, up to a maximum.
//!
//! A 429 is the dependency working correctly and asking us to slow down; with
//! `count_rate_limited = false` (the default) it is neither a success nor a failure.
//!
//! Permits carry the breaker's transition epoch: an answer to a call admitted before
//! the last transition is ignored, so a slow call from CLOSED cannot close or reopen
//! a later HALF_OPEN.
//!
//! Invariants (asserted): probes out ≤ `half_open_probes`; good probes < `half_open_probes`
//! while half-open; window counts ≤ window calls.

use crate::classify::Outcome;
use crate::kernel::time::{duration_to_nanos as nanos, Nanos};

/// Which calls the failure rate is computed over.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SlidingWindow {
    /// The last `size` recorded calls.
    Count {
        /// How many calls.
        size: u32,
    },
    /// Calls in the last `window` nanoseconds, in `buckets` equal buckets.
    Time {
        /// How long the window is.
        window: Nanos,
        /// How many buckets it is kept in.
        buckets: u32,
    },
}

/// Breaker parameters. Rates are fractions in (0, 1]; a threshold above 1 disables that trigger.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BreakerConfig {
    /// Which recent calls the rates are over.
    pub window: SlidingWindow,
    /// Calls the window must hold before the breaker may trip.
    pub minimum_calls: u32,
    /// The failure rate at which it trips.
    pub failure_rate_threshold: f64,
    /// The slow-call rate at which it trips.
    pub slow_call_rate_threshold: f64,
    /// A call at least this long is slow.
    pub slow_call_duration: Nanos,
    /// Open time after the first trip.
    pub open_duration: Nanos,
    /// Each further consecutive trip multiplies the open time by this.
    pub open_duration_multiplier: f64,
    /// The longest open time repeated trips grow to.
    pub max_open_duration: Nanos,
    /// Probes let through while half open; all must succeed to close.
    pub half_open_probes: u32,
    /// Count 429s as failures (off by default: they are the dependency being healthy).
    pub count_rate_limited: bool,
}

impl Default for BreakerConfig {
    /// Resilience4j's defaults: a count window of 100, minimum 100 calls, 50% failure
    /// rate, slow calls disabled (threshold 100% of calls ≥ 60 s), 60 s open, 10 probes.
    fn default() -> Self {
        BreakerConfig {
            window: SlidingWindow::Count { size: 100 },
            minimum_calls: 100,
            failure_rate_threshold: 0.5,
            slow_call_rate_threshold: 1.0,
            slow_call_duration: 60 * crate::kernel::time::NANOS_PER_SEC,
            open_duration: 60 * crate::kernel::time::NANOS_PER_SEC,
            open_duration_multiplier: 1.0,
            max_open_duration: 60 * crate::kernel::time::NANOS_PER_SEC,
            half_open_probes: 10,
            count_rate_limited: false,
        }
    }
}

/// Durations as production code writes them. The fields are the engine's clock,
/// integer nanoseconds (`open_duration: 30_000_000_000` is 30 s and easy to get
/// wrong by 10³); these take a [`Duration`](std::time::Duration), saturating at
/// ~584 years.
impl BreakerConfig {
    /// Calls in the last `window`, kept in `buckets` equal buckets.
    pub fn over_the_last(mut self, window: std::time::Duration, buckets: u32) -> Self {
        self.window = SlidingWindow::Time { window: nanos(window), buckets };
        self
    }

    /// A call at least `duration` long is slow; `rate` of slow calls trips it.
    pub fn slow_calls(mut self, duration: std::time::Duration, rate: f64) -> Self {
        self.slow_call_duration = nanos(duration);
        self.slow_call_rate_threshold = rate;
        self
    }

    /// Open for `first` after a trip, each further consecutive trip `multiplier` times
    /// longer, up to `longest`.
    pub fn open_for(mut self, first: std::time::Duration, multiplier: f64, longest: std::time::Duration) -> Self {
        self.open_duration = nanos(first);
        self.open_duration_multiplier = multiplier;
        self.max_open_duration = nanos(longest);
        self
    }
}

/// The breaker's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BreakerState {
    /// Calls pass; outcomes are counted.
    Closed,
    /// Calls are refused until `until`.
    Open {
        /// When it lets probes through.
        until: Nanos,
    },
    /// Probes are out; their outcomes close or reopen it.
    HalfOpen {
        /// Probes let through and not yet recorded.
        probes_out: u32,
        /// Probes that succeeded.
        good_probes: u32,
    },
}

/// Permission to call; hand it back with [`CircuitBreaker::record`] or [`CircuitBreaker::abandon`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Permit {
    epoch: u32,
    probe: bool,
}

impl Permit {
    /// True for a half-open probe.
    pub fn is_probe(self) -> bool {
        self.probe
    }
}

/// Counters over the breaker's life.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BreakerCounters {
    /// Times it opened.
    pub trips: u64,
    /// Calls it refused.
    pub refusals: u64,
    /// Time spent open, up to the last transition (see [`CircuitBreaker::time_open`]).
    pub time_open: Nanos,
}

const FAILED: u8 = 1;
const SLOW: u8 = 2;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Counts {
    calls: u32,
    failures: u32,
    slow: u32,
}

impl Counts {
    fn add(&mut self, flags: u8) {
        self.calls += 1;
        self.failures += (flags & FAILED != 0) as u32;
        self.slow += (flags & SLOW != 0) as u32;
    }

    fn subtract(&mut self, other: Counts) {
        self.calls -= other.calls;
        self.failures -= other.failures;
        self.slow -= other.slow;
    }
}

/// The sliding window with running totals, so a decision is O(1): the count window
/// is a ring of outcome flags; the time window is a ring of buckets, and moving to a
/// new bucket evicts (subtracts) the buckets that aged out. The time window keeps the
/// head bucket's end and ring slot, so a record inside the head bucket (nearly all of
/// them) costs a compare, not a division.
#[derive(Clone, Debug)]
enum Window {
    Count {
        flags: Box<[u8]>,
        next: usize,
        totals: Counts,
    },
    Time {
        buckets: Box<[Counts]>,
        width: Nanos,
        /// The head bucket's epoch (`now / width`), where it ends, and its ring slot
        /// (`head_epoch % buckets.len()`).
        head_epoch: u64,
        head_end: Nanos,
        head_slot: usize,
        totals: Counts,
    },
}

impl Window {
    fn new(kind: SlidingWindow) -> Self {
        match kind {
            SlidingWindow::Count { size } => {
                assert!(size > 0, "count window size must be positive");
                Window::Count { flags: vec![0; size as usize].into_boxed_slice(), next: 0, totals: Counts::default() }
            }
            SlidingWindow::Time { window, buckets } => {
                assert!(buckets > 0 && window >= buckets as u64, "time window needs ≥ 1 ns per bucket");
                let width = window / buckets as u64;
                Window::Time {
                    buckets: vec![Counts::default(); buckets as usize].into_boxed_slice(),
                    width,
                    head_epoch: 0,
                    head_end: width,
                    head_slot: 0,
                    totals: Counts::default(),
                }
            }
        }
    }

    /// Moves a time window's head to `now`, evicting buckets older than the window.
    #[inline]
    fn advance(&mut self, now: Nanos) {
        if let Window::Time { buckets, width, head_epoch, head_end, head_slot, totals } = self {
            if now < *head_end {
                return;
            }
            let epoch = now / *width;
            debug_assert!(epoch > *head_epoch, "now {now} is past the head bucket's end {head_end}");
            let n = buckets.len();
            if epoch - *head_epoch >= n as u64 {
                buckets.fill(Counts::default());
                *totals = Counts::default();
                *head_slot = (epoch % n as u64) as usize;
            } else {
                for _ in *head_epoch..epoch {
                    *head_slot = if *head_slot + 1 == n { 0 } else { *head_slot + 1 };
                    let bucket = &mut buckets[*head_slot];
                    totals.subtract(*bucket);
                    *bucket = Counts::default();
                }
            }
            *head_epoch = epoch;
            *head_end = (epoch + 1).saturating_mul(*width);
            debug_assert_eq!(*head_slot as u64, epoch % n as u64);
        }
    }

    #[inline]
    fn record(&mut self, now: Nanos, flags_in: u8) {
        self.advance(now);
        match self {
            Window::Count { flags, next, totals } => {
                if (totals.calls as usize) == flags.len() {
                    let old = flags[*next];
                    totals.subtract(Counts {
                        calls: 1,
                        failures: (old & FAILED != 0) as u32,
                        slow: (old & SLOW != 0) as u32,
                    });
                }
                flags[*next] = flags_in;
                totals.add(flags_in);
                *next = if *next + 1 == flags.len() { 0 } else { *next + 1 };
            }
            Window::Time { buckets, head_slot, totals, .. } => {
                buckets[*head_slot].add(flags_in);
                totals.add(flags_in);
            }
        }
    }

    /// (calls, failures, slow) currently in the window.
    #[inline]
    fn totals(&mut self, now: Nanos) -> (u32, u32, u32) {
        self.advance(now);
        let totals = match self {
            Window::Count { totals, .. } | Window::Time { totals, .. } => *totals,
        };
        debug_assert!(totals.failures <= totals.calls && totals.slow <= totals.calls);
        (totals.calls, totals.failures, totals.slow)
    }

    fn clear(&mut self) {
        match self {
            Window::Count { flags, next, totals } => {
                flags.fill(0);
                *next = 0;
                *totals = Counts::default();
            }
            Window::Time { buckets, totals, .. } => {
                buckets.fill(Counts::default());
                *totals = Counts::default();
            }
        }
    }
}

/// The circuit breaker.
#[derive(Clone, Debug)]
pub struct CircuitBreaker {
    config: BreakerConfig,
    state: BreakerState,
    window: Window,
    epoch: u32,
    consecutive_trips: u32,
    opened_at: Nanos,
    counters: BreakerCounters,
}

impl CircuitBreaker {
    /// A closed breaker.
    pub fn new(config: BreakerConfig) -> Self {
        assert!(config.half_open_probes > 0, "half_open_probes must be at least 1");
        assert!(config.failure_rate_threshold > 0.0, "failure_rate_threshold must be positive");
        assert!(config.open_duration_multiplier >= 1.0, "open_duration_multiplier must be at least 1");
        CircuitBreaker {
            window: Window::new(config.window),
            config,
            state: BreakerState::Closed,
            epoch: 0,
            consecutive_trips: 0,
            opened_at: 0,
            counters: BreakerCounters::default(),
        }
    }

    /// The current state (OPEN may already be due to turn HALF_OPEN on the next request).
    pub fn state(&self) -> BreakerState {
        self.state
    }

    /// Trips, refusals, time open up to the last transition.
    pub fn counters(&self) -> BreakerCounters {
        self.counters
    }

    /// Total time open, including the current open period up to `now`.
    pub fn time_open(&self, now: Nanos) -> Nanos {
        match self.state {
            BreakerState::Open { .. } => self.counters.time_open + now.saturating_sub(self.opened_at),
            _ => self.counters.time_open,
        }
    }

    /// Asks to call the dependency. `None` is a refusal (counted, nothing recorded).
    #[inline]
    pub fn try_acquire(&mut self, now: Nanos) -> Option<Permit> {
        match self.state {
            BreakerState::Closed => Some(Permit { epoch: self.epoch, probe: false }),
            BreakerState::Open { until } if now >= until => {
                self.counters.time_open += now - self.opened_at;
                self.transition(BreakerState::HalfOpen { probes_out: 0, good_probes: 0 });
                self.try_acquire(now)
            }
            BreakerState::Open { .. } => {
                self.counters.refusals += 1;
                None
            }
            BreakerState::HalfOpen { probes_out, good_probes } => {
                if probes_out + good_probes < self.config.half_open_probes {
                    self.state = BreakerState::HalfOpen { probes_out: probes_out + 1, good_probes };
                    self.check();
                    Some(Permit { epoch: self.epoch, probe: true })
                } else {
                    self.counters.refusals += 1;
                    None
                }
            }
        }
    }

    /// Records the answer to a permitted call that took `duration`.
    #[inline]
    pub fn record(&mut self, now: Nanos, permit: Permit, outcome: Outcome, duration: Nanos) {
        if permit.epoch != self.epoch {
            return; // admitted before the last transition: stale
        }
        if outcome == Outcome::RateLimited && !self.config.count_rate_limited {
            self.abandon(permit);
            return;
        }
        let failed = outcome.is_failure();
        let slow = duration >= self.config.slow_call_duration && self.config.slow_call_rate_threshold <= 1.0;
        match self.state {
            BreakerState::Closed => {
                self.window.record(now, (failed as u8 * FAILED) | (slow as u8 * SLOW));
                let (calls, failures, slows) = self.window.totals(now);
                if calls >= self.config.minimum_calls.max(1) {
                    let failure_rate = failures as f64 / calls as f64;
                    let slow_rate = slows as f64 / calls as f64;
                    if failure_rate >= self.config.failure_rate_threshold
                        || slow_rate >= self.config.slow_call_rate_threshold
                    {
                        self.trip(now);
                    }
                }
            }
            BreakerState::HalfOpen { probes_out, good_probes } => {
                debug_assert!(permit.probe && probes_out > 0);
                if failed || slow {
                    self.trip(now);
                } else if good_probes + 1 >= self.config.half_open_probes {
                    self.consecutive_trips = 0;
                    self.window.clear();
                    self.transition(BreakerState::Closed);
                } else {
                    self.state = BreakerState::HalfOpen { probes_out: probes_out - 1, good_probes: good_probes + 1 };
                    self.check();
                }
            }
            BreakerState::Open { .. } => unreachable!("permits from an open breaker do not exist"),
        }
    }

    /// Hands back a permit whose call never reached the dependency (or whose
    /// outcome is ignored), freeing a probe slot.
    #[inline]
    pub fn abandon(&mut self, permit: Permit) {
        if permit.epoch != self.epoch {
            return;
        }
        if let BreakerState::HalfOpen { probes_out, good_probes } = self.state {
            debug_assert!(probes_out > 0, "abandoned a probe that was not out");
            self.state = BreakerState::HalfOpen { probes_out: probes_out.saturating_sub(1), good_probes };
            self.check();
        }
    }

    fn trip(&mut self, now: Nanos) {
        self.consecutive_trips += 1;
        self.counters.trips += 1;
        let factor = self.config.open_duration_multiplier.powi(self.consecutive_trips as i32 - 1);
        let open_for = ((self.config.open_duration as f64 * factor) as Nanos)
            .min(self.config.max_open_duration.max(self.config.open_duration));
        self.opened_at = now;
        self.window.clear();
        self.transition(BreakerState::Open { until: now.saturating_add(open_for) });
    }

    fn transition(&mut self, to: BreakerState) {
        debug_assert!(
            matches!(
                (self.state, to),
                (BreakerState::Closed, BreakerState::Open { .. })
                    | (BreakerState::Open { .. }, BreakerState::HalfOpen { .. })
                    | (BreakerState::HalfOpen { .. }, BreakerState::Open { .. } | BreakerState::Closed)
            ),
            "illegal breaker transition {:?} → {to:?}",
            self.state
        );
        self.state = to;
        self.epoch = self.epoch.wrapping_add(1);
        self.check();
    }

    #[inline]
    fn check(&self) {
        if let BreakerState::HalfOpen { probes_out, good_probes } = self.state {
            debug_assert!(probes_out + good_probes <= self.config.half_open_probes, "too many probes");
            debug_assert!(good_probes < self.config.half_open_probes);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Production code sets durations as `Duration`s (issue 72: raw nanoseconds are
    /// 10⁹ apart from what a reader expects); the fields get the engine's nanoseconds.
    #[test]
    fn durations_are_set_as_durations() {
        use std::time::Duration;
        let config = BreakerConfig::default()
            .over_the_last(Duration::from_secs(10), 5)
            .slow_calls(Duration::from_millis(250), 0.5)
            .open_for(Duration::from_secs(30), 2.0, Duration::from_secs(300));
        assert_eq!(config.window, SlidingWindow::Time { window: 10 * NANOS_PER_SEC, buckets: 5 });
        assert_eq!((config.slow_call_duration, config.slow_call_rate_threshold), (250_000_000, 0.5));
        assert_eq!(config.open_duration, 30 * NANOS_PER_SEC);
        assert_eq!((config.open_duration_multiplier, config.max_open_duration), (2.0, 300 * NANOS_PER_SEC));
        let quota = crate::quota::QuotaConfig::default().waiting_at_most(Duration::from_millis(500));
        assert_eq!(quota.longest_wait, 500_000_000);
        assert_eq!(BreakerConfig::default().slow_calls(Duration::MAX, 1.0).slow_call_duration, Nanos::MAX, "saturates");
    }
    use crate::kernel::time::{secs_to_nanos, NANOS_PER_SEC};
    use proptest::prelude::*;

    const MS: Nanos = 1_000_000;

    fn config(size: u32, minimum: u32, threshold: f64) -> BreakerConfig {
        BreakerConfig {
            window: SlidingWindow::Count { size },
            minimum_calls: minimum,
            failure_rate_threshold: threshold,
            open_duration: 10 * NANOS_PER_SEC,
            open_duration_multiplier: 2.0,
            max_open_duration: 30 * NANOS_PER_SEC,
            half_open_probes: 3,
            ..BreakerConfig::default()
        }
    }

    fn call(breaker: &mut CircuitBreaker, now: Nanos, outcome: Outcome) -> bool {
        match breaker.try_acquire(now) {
            Some(permit) => {
                breaker.record(now, permit, outcome, MS);
                true
            }
            None => false,
        }
    }

    #[test]
    fn opens_exactly_at_the_threshold_once_the_minimum_is_reached() {
        let mut b = CircuitBreaker::new(config(10, 10, 0.5));
        for _ in 0..9 {
            call(&mut b, 0, Outcome::ServerError);
        }
        assert_eq!(b.state(), BreakerState::Closed, "9 failures are below the minimum of 10 calls");
        call(&mut b, 0, Outcome::Success);
        assert!(matches!(b.state(), BreakerState::Open { .. }), "90% ≥ 50% with 10 calls");

        let mut b = CircuitBreaker::new(config(10, 10, 0.5));
        (0..5).for_each(|_| assert!(call(&mut b, 0, Outcome::Success)));
        (0..4).for_each(|_| assert!(call(&mut b, 0, Outcome::ServerError)));
        call(&mut b, 0, Outcome::Success);
        assert_eq!(b.state(), BreakerState::Closed, "40% < 50%");
        // The window slides: the oldest success leaves, a failure enters → 5/10 = 50%.
        call(&mut b, 0, Outcome::ServerError);
        assert!(matches!(b.state(), BreakerState::Open { .. }), "exactly 50% trips (≥)");
        assert_eq!(b.counters().trips, 1);
    }

    #[test]
    fn open_refuses_then_half_opens_only_after_the_wait() {
        let mut b = CircuitBreaker::new(config(4, 4, 0.5));
        (0..4).for_each(|_| {
            call(&mut b, 0, Outcome::Timeout);
        });
        assert_eq!(b.state(), BreakerState::Open { until: 10 * NANOS_PER_SEC });
        assert!(b.try_acquire(10 * NANOS_PER_SEC - 1).is_none(), "still open 1 ns before the wait ends");
        assert_eq!(b.counters().refusals, 1);
        let probe = b.try_acquire(10 * NANOS_PER_SEC).expect("half-open admits a probe");
        assert!(probe.is_probe());
        assert_eq!(b.time_open(10 * NANOS_PER_SEC), 10 * NANOS_PER_SEC);
        // Three probes at a time, then refusals.
        let p2 = b.try_acquire(10 * NANOS_PER_SEC).unwrap();
        let p3 = b.try_acquire(10 * NANOS_PER_SEC).unwrap();
        assert!(b.try_acquire(10 * NANOS_PER_SEC).is_none());
        // A probe that never reached the dependency is handed back.
        b.abandon(p3);
        let p3 = b.try_acquire(10 * NANOS_PER_SEC).expect("the abandoned slot is free again");
        for p in [probe, p2, p3] {
            b.record(11 * NANOS_PER_SEC, p, Outcome::Success, MS);
        }
        assert_eq!(b.state(), BreakerState::Closed, "three good probes close it");
    }

    #[test]
    fn a_failed_probe_reopens_for_longer_up_to_the_maximum() {
        let mut b = CircuitBreaker::new(config(4, 4, 0.5));
        let mut now = 0;
        (0..4).for_each(|_| {
            call(&mut b, now, Outcome::ServerError);
        });
        for expected_open in [20, 30, 30] {
            // Wait out the current open period, fail the first probe.
            let BreakerState::Open { until } = b.state() else { panic!("open") };
            now = until;
            let probe = b.try_acquire(now).unwrap();
            b.record(now, probe, Outcome::ServerError, MS);
            assert_eq!(b.state(), BreakerState::Open { until: now + expected_open * NANOS_PER_SEC });
        }
        assert_eq!(b.counters().trips, 4);
        // A success after closing resets the growth.
        let BreakerState::Open { until } = b.state() else { panic!("open") };
        now = until;
        for _ in 0..3 {
            let p = b.try_acquire(now).unwrap();
            b.record(now, p, Outcome::Success, MS);
        }
        assert_eq!(b.state(), BreakerState::Closed);
        (0..4).for_each(|_| {
            call(&mut b, now, Outcome::ServerError);
        });
        assert_eq!(b.state(), BreakerState::Open { until: now + 10 * NANOS_PER_SEC });
    }

    #[test]
    fn late_answers_from_before_a_transition_are_ignored() {
        let mut b = CircuitBreaker::new(config(4, 4, 0.5));
        let early = b.try_acquire(0).unwrap();
        (0..4).for_each(|_| {
            call(&mut b, 0, Outcome::ServerError);
        });
        let probe = b.try_acquire(10 * NANOS_PER_SEC).unwrap();
        // The slow call admitted while closed fails now: it must not reopen the breaker.
        b.record(10 * NANOS_PER_SEC, early, Outcome::ServerError, MS);
        assert!(matches!(b.state(), BreakerState::HalfOpen { probes_out: 1, .. }));
        b.record(10 * NANOS_PER_SEC, probe, Outcome::Success, MS);
    }

    #[test]
    fn slow_calls_trip_at_their_own_threshold() {
        let mut b = CircuitBreaker::new(BreakerConfig {
            slow_call_rate_threshold: 0.5,
            slow_call_duration: 100 * MS,
            ..config(4, 4, 0.9)
        });
        for duration in [10 * MS, 10 * MS, 100 * MS, 200 * MS] {
            let p = b.try_acquire(0).unwrap();
            b.record(0, p, Outcome::Success, duration);
        }
        assert!(matches!(b.state(), BreakerState::Open { .. }), "2 of 4 calls slow: 50% ≥ 50%");
    }

    /// The seed's case: a healthy but rate-limited API. 100 calls, 40% of them 429.
    fn rate_limited_run(count_rate_limited: bool) -> CircuitBreaker {
        let mut b = CircuitBreaker::new(BreakerConfig {
            window: SlidingWindow::Time { window: secs_to_nanos(60.0), buckets: 60 },
            minimum_calls: 20,
            failure_rate_threshold: 0.3,
            open_duration: secs_to_nanos(20.0),
            half_open_probes: 3,
            count_rate_limited,
            ..BreakerConfig::default()
        });
        for i in 0..100u64 {
            let outcome = if i % 5 < 2 { Outcome::RateLimited } else { Outcome::Success };
            call(&mut b, i * 100 * MS, outcome);
        }
        b
    }

    #[test]
    fn rate_limits_do_not_trip_the_breaker_unless_counted() {
        let excluded = rate_limited_run(false);
        assert_eq!(excluded.state(), BreakerState::Closed);
        assert_eq!(excluded.counters().trips, 0);
        let counted = rate_limited_run(true);
        assert!(counted.counters().trips >= 1, "40% ≥ 30% once 20 calls are in");
        assert!(counted.counters().refusals > 0, "and then it refuses calls that had quota");
    }

    #[test]
    fn time_window_forgets_old_failures_by_age() {
        let mut b = CircuitBreaker::new(BreakerConfig {
            window: SlidingWindow::Time { window: secs_to_nanos(10.0), buckets: 10 },
            minimum_calls: 10,
            failure_rate_threshold: 0.5,
            ..BreakerConfig::default()
        });
        (0..5).for_each(|_| {
            call(&mut b, 0, Outcome::ServerError);
        });
        // Eleven seconds later those failures have aged out: 5 more failures and
        // 5 successes would be 50%, but only the new ones count.
        let later = secs_to_nanos(11.0);
        (0..6).for_each(|_| {
            call(&mut b, later, Outcome::Success);
        });
        (0..4).for_each(|_| {
            call(&mut b, later, Outcome::ServerError);
        });
        assert_eq!(b.state(), BreakerState::Closed, "4 of 10 recent calls failed");
    }

    proptest! {
        /// The time window's running totals (kept with a precomputed bucket end and
        /// ring slot) equal a recount of the records in the buckets still in the window,
        /// through gaps inside a bucket, across one, several, or the whole ring.
        #[test]
        fn the_time_window_counts_what_a_recount_counts(
            steps in proptest::collection::vec((0u64..5_000, 0u8..4), 1..300),
            buckets in 1u32..8,
        ) {
            const WIDTH: Nanos = 1_000;
            let mut window = Window::new(SlidingWindow::Time { window: WIDTH * buckets as u64, buckets });
            let (mut now, mut log) = (0, Vec::new());
            for (gap, flags) in steps {
                now += gap;
                window.record(now, flags);
                log.push((now / WIDTH, flags));
                let live: Vec<u8> =
                    log.iter().filter(|(epoch, _)| epoch + buckets as u64 > now / WIDTH).map(|&(_, f)| f).collect();
                let failures = live.iter().filter(|&&f| f & FAILED != 0).count() as u32;
                let slow = live.iter().filter(|&&f| f & SLOW != 0).count() as u32;
                prop_assert_eq!(window.totals(now), (live.len() as u32, failures, slow));
            }
        }

        #[test]
        fn never_more_than_n_probes_out(ops in proptest::collection::vec((0u64..3_000_000_000, 0u8..4, 0usize..4), 1..400)) {
            let mut b = CircuitBreaker::new(config(8, 4, 0.5));
            let mut now = 0;
            let mut held: Vec<Permit> = Vec::new();
            for (dt, op, pick) in ops {
                now += dt;
                match op {
                    0 => if let Some(p) = b.try_acquire(now) { held.push(p) },
                    1 | 2 if !held.is_empty() => {
                        let p = held.swap_remove(pick % held.len());
                        let outcome = if op == 1 { Outcome::Success } else { Outcome::ServerError };
                        b.record(now, p, outcome, MS);
                    }
                    3 if !held.is_empty() => { let p = held.swap_remove(pick % held.len()); b.abandon(p); }
                    _ => {}
                }
                if let BreakerState::HalfOpen { probes_out, good_probes } = b.state() {
                    prop_assert!(probes_out + good_probes <= 3);
                }
            }
        }
    }
}
