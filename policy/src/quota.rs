//! Client-side quota meters: the three buckets a metered LLM API enforces (requests,
//! input tokens and output tokens per minute), kept on the client so that a request
//! that would come back as a 429 is never sent.
//!
//! The output meter is charged the request's `max_tokens` at reservation (the API
//! does the same) and [`QuotaMeter::reconcile`] hands back the slack once the real
//! output is known. Forgetting to reconcile throttles a client to a fraction of the
//! quota it pays for. A fleet of N instances either shares one coordinated meter or
//! splits the quota 1/N each; `headroom` keeps a safety margin below the published
//! limits.
//!
//! Invariants: every bucket stays within [0, capacity] (see `TokenBucket`), and
//! `used_bounds[i]` is at least bucket i's used fraction now and at any later time
//! until the meter next takes tokens or changes limits (refill and refunds only lower
//! a used fraction), which lets [`QuotaMeter::pressure_at_least`] skip buckets.

use crate::kernel::time::{Nanos, NANOS_PER_SEC};
use crate::token_bucket::TokenBucket;

/// Published per-minute limits of one model tier.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QuotaLimits {
    /// Requests per minute.
    pub requests_per_minute: u64,
    /// Input tokens per minute.
    pub input_tokens_per_minute: u64,
    /// Output tokens per minute.
    pub output_tokens_per_minute: u64,
}

/// How the client uses the limits.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct QuotaConfig {
    /// Fraction of each limit the client allows itself (0..=1).
    pub headroom: f64,
    /// A reservation that would have to wait longer than this is refused.
    pub longest_wait: Nanos,
    /// Client instances sharing the quota.
    pub instances: u32,
    /// One shared meter (true) or 1/N of the quota per instance (false).
    pub coordinated: bool,
}

impl QuotaConfig {
    /// Refuse a reservation that would wait longer than `longest`: the field as a
    /// [`Duration`](std::time::Duration) (it is the engine's integer nanoseconds).
    pub fn waiting_at_most(mut self, longest: std::time::Duration) -> Self {
        self.longest_wait = crate::kernel::time::duration_to_nanos(longest);
        self
    }
}

impl Default for QuotaConfig {
    /// The LLM-gateway fixture's defaults: 0.90 headroom, 2 s longest wait, 12 instances, coordinated.
    fn default() -> Self {
        QuotaConfig { headroom: 0.9, longest_wait: 2 * NANOS_PER_SEC, instances: 12, coordinated: true }
    }
}

/// One client bucket for a published per-minute `limit`: (the tokens it holds when full,
/// its refill per minute) — the limit × `headroom`, ÷ the instances when not coordinated,
/// holding `burst` of that refill (at least 1).
pub fn client_bucket(limit: u64, config: &QuotaConfig, burst: Nanos) -> (u64, u64) {
    let share = if config.coordinated { 1 } else { config.instances as u64 };
    let minute = 60 * crate::kernel::time::NANOS_PER_SEC;
    let per_minute = (limit as f64 * config.headroom) as u64 / share;
    (((per_minute as u128 * burst as u128 / minute as u128) as u64).max(1), per_minute)
}

/// Proof of a reservation; reconcile it when the call ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use = "a reservation's unused output tokens are only returned by reconcile"]
pub struct Reservation {
    /// The input tokens taken.
    pub input_tokens: u64,
    /// The output tokens held until the call reconciles what it wrote.
    pub max_tokens: u64,
}

/// The answer to a reservation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reserve {
    /// Taken now.
    Granted(Reservation),
    /// Not now; enough will be there after this long (≤ the longest wait).
    Wait(Nanos),
    /// Not within the longest wait (`Some(wait)`), or never (`None`: more than a bucket holds).
    Refused {
        /// How long it would take (`None`: never).
        wait: Option<Nanos>,
    },
}

/// One client's view of a tier's quota.
#[derive(Clone, Debug)]
pub struct QuotaMeter {
    requests: TokenBucket,
    input: TokenBucket,
    output: TokenBucket,
    longest_wait: Nanos,
    reserved: u64,
    handed_back: u64,
    /// Each bucket's (capacity, refill per minute) as built: what `scale_limits` scales.
    built: [(u64, u64); 3],
    /// Upper bounds on the buckets' used fractions (requests, input, output): the last
    /// value read, or +∞ after a take or a change of limits (see the module's invariants).
    used_bounds: [f64; 3],
}

impl QuotaMeter {
    /// The meter one instance uses: the whole (headroomed) quota when coordinated,
    /// 1/N of it otherwise.
    pub fn new(limits: QuotaLimits, config: QuotaConfig) -> Self {
        Self::with_burst(limits, config, [60 * crate::kernel::time::NANOS_PER_SEC; 3])
    }

    /// [`QuotaMeter::new`] whose buckets hold `burst` worth of their refill (requests,
    /// input, output; a minute's in `new`, the providers' rule): a smaller burst makes
    /// a limit bind sooner.
    pub fn with_burst(limits: QuotaLimits, config: QuotaConfig, burst: [Nanos; 3]) -> Self {
        assert!((0.0..=1.0).contains(&config.headroom), "headroom must be in [0, 1]");
        assert!(config.instances > 0, "instances must be at least 1");
        assert!(burst.iter().all(|b| *b > 0), "a bucket holds something");
        let minute = 60 * crate::kernel::time::NANOS_PER_SEC;
        let bucket = |limit: u64, burst: Nanos| {
            let (capacity, per_minute) = client_bucket(limit, &config, burst);
            TokenBucket::new(capacity, per_minute, minute)
        };
        let (requests, input, output) = (
            bucket(limits.requests_per_minute, burst[0]),
            bucket(limits.input_tokens_per_minute, burst[1]),
            bucket(limits.output_tokens_per_minute, burst[2]),
        );
        let built = [&requests, &input, &output].map(|b| (b.capacity(), b.refill()));
        QuotaMeter {
            requests,
            input,
            output,
            longest_wait: config.longest_wait,
            reserved: 0,
            handed_back: 0,
            built,
            used_bounds: [f64::INFINITY; 3],
        }
    }

    /// Reserves one request, its input tokens and `max_tokens` of output.
    #[inline]
    pub fn reserve(&mut self, now: Nanos, input_tokens: u64, max_tokens: u64) -> Reserve {
        let waits = [
            self.requests.wait_time(now, 1),
            self.input.wait_time(now, input_tokens),
            self.output.wait_time(now, max_tokens),
        ];
        let mut longest = 0;
        for wait in waits {
            match wait {
                None => return Reserve::Refused { wait: None },
                Some(wait) => longest = longest.max(wait),
            }
        }
        if longest == 0 {
            let taken = self.requests.try_take(now, 1)
                & self.input.try_take(now, input_tokens)
                & self.output.try_take(now, max_tokens);
            debug_assert!(taken, "every bucket had room");
            self.used_bounds = [f64::INFINITY; 3];
            self.reserved += max_tokens;
            Reserve::Granted(Reservation { input_tokens, max_tokens })
        } else if longest <= self.longest_wait {
            Reserve::Wait(longest)
        } else {
            Reserve::Refused { wait: Some(longest) }
        }
    }

    /// The call produced `actual_output` tokens: hand back the rest of `max_tokens`.
    #[inline]
    pub fn reconcile(&mut self, now: Nanos, reservation: Reservation, actual_output: u64) {
        let slack = reservation.max_tokens.saturating_sub(actual_output);
        self.output.refund(now, slack);
        self.handed_back += slack;
    }

    /// The reservation was never used (the call was not sent): return everything.
    pub fn cancel(&mut self, now: Nanos, reservation: Reservation) {
        self.requests.refund(now, 1);
        self.input.refund(now, reservation.input_tokens);
        self.reconcile(now, reservation, 0);
    }

    /// The tightest meter's used fraction (0 = all quota free, 1 = exhausted): the
    /// pressure signal an admission ladder reads.
    pub fn pressure(&mut self, now: Nanos) -> f64 {
        self.pressure_at_least(now, 0.0)
    }

    /// `floor.max(self.pressure(now))`, exactly, reading only the buckets that could
    /// exceed `floor`: a bucket whose used fraction was at most `floor` when last read,
    /// and which has only refilled since, still is. An admission ladder reads the
    /// pressure of three meters (nine buckets) per call; most of them are skipped.
    #[inline]
    pub fn pressure_at_least(&mut self, now: Nanos, floor: f64) -> f64 {
        let buckets = [&mut self.requests, &mut self.input, &mut self.output];
        let mut pressure = floor;
        for (bucket, bound) in buckets.into_iter().zip(&mut self.used_bounds) {
            if *bound > pressure {
                let used = 1.0 - bucket.level(now) / bucket.capacity().max(1) as f64;
                debug_assert!(used <= *bound, "refill only lowers a used fraction");
                *bound = used;
                pressure = pressure.max(used);
            }
        }
        pressure
    }

    /// From `now` on, each limit (requests, input, output) is `scales[i]` × the one it
    /// was built with; `[1.0; 3]` restores them. A bucket keeps what it held, down to
    /// its new capacity (at least one token).
    pub fn scale_limits(&mut self, now: Nanos, scales: [f64; 3]) {
        let buckets = [&mut self.requests, &mut self.input, &mut self.output];
        for ((bucket, &(capacity, refill)), scale) in buckets.into_iter().zip(&self.built).zip(scales) {
            assert!(scale > 0.0 && scale.is_finite(), "a quota scale is positive");
            let scaled = |x: u64| ((x as f64 * scale).round() as u64).max(1);
            bucket.set_limits(now, scaled(capacity), scaled(refill));
        }
        self.used_bounds = [f64::INFINITY; 3];
    }

    /// Output tokens available now.
    pub fn output_available(&mut self, now: Nanos) -> u64 {
        self.output.whole_tokens(now)
    }

    /// Output tokens reserved and handed back so far.
    pub fn output_totals(&self) -> (u64, u64) {
        (self.reserved, self.handed_back)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::time::secs_to_nanos;

    /// The fixture's sonnet tier.
    const SONNET: QuotaLimits = QuotaLimits {
        requests_per_minute: 2_000,
        input_tokens_per_minute: 8_000_000,
        output_tokens_per_minute: 1_000_000,
    };

    fn exact() -> QuotaConfig {
        QuotaConfig { headroom: 1.0, longest_wait: 0, instances: 1, coordinated: true }
    }

    #[test]
    fn a_reservation_charges_max_tokens_and_reconciling_keeps_only_the_real_output() {
        let mut meter = QuotaMeter::new(SONNET, exact());
        let Reserve::Granted(r) = meter.reserve(0, 6_200, 2_048) else { panic!("the quota is full") };
        assert_eq!(meter.output_available(0), 1_000_000 - 2_048, "charged exactly max_tokens");
        meter.reconcile(0, r, 520);
        assert_eq!(meter.output_available(0), 1_000_000 - 520, "520 of 2,048 stay charged");
        assert_eq!(meter.output_totals(), (2_048, 1_528));
    }

    fn served_in_second_minute(reconcile: bool) -> u32 {
        let mut meter = QuotaMeter::new(SONNET, exact());
        let mut served = 0;
        for step in 0..12_000u64 {
            let now = step * 10_000_000; // every 10 ms for two minutes
            if let Reserve::Granted(r) = meter.reserve(now, 6_200, 2_048) {
                if reconcile {
                    meter.reconcile(now, r, 520);
                }
                served += (now >= secs_to_nanos(60.0)) as u32;
            }
        }
        served
    }

    #[test]
    fn reconciling_serves_far_more_than_not() {
        let with = served_in_second_minute(true);
        let without = served_in_second_minute(false);
        // Reconciled, input tokens bind: 8,000,000 / 6,200 ≈ 1,290 a minute.
        // Unreconciled, the output reservations bind: 1,000,000 / 2,048 ≈ 488.
        assert!((1_280..=1_292).contains(&with), "{with}");
        assert!((484..=490).contains(&without), "{without}");
    }

    #[test]
    fn split_times_n_equals_coordinated() {
        let config = QuotaConfig { headroom: 0.9, longest_wait: 0, instances: 4, coordinated: false };
        let served = |meter: &mut QuotaMeter| {
            (0..10_000).filter(|_| matches!(meter.reserve(0, 4_000, 64), Reserve::Granted(_))).count()
        };
        let mut split = QuotaMeter::new(SONNET, config);
        let mut coordinated = QuotaMeter::new(SONNET, QuotaConfig { coordinated: true, ..config });
        assert_eq!(served(&mut split) * 4, served(&mut coordinated));
        assert_eq!(
            served(&mut QuotaMeter::new(SONNET, QuotaConfig { coordinated: true, ..config })),
            1_800,
            "RPM × headroom"
        );
    }

    #[test]
    fn waits_within_the_longest_wait_and_refuses_beyond() {
        let tiny = QuotaLimits {
            requests_per_minute: 60,
            input_tokens_per_minute: 1_000_000,
            output_tokens_per_minute: 1_000_000,
        };
        let mut meter = QuotaMeter::new(
            tiny,
            QuotaConfig { headroom: 1.0, longest_wait: 2 * NANOS_PER_SEC, instances: 1, coordinated: true },
        );
        for _ in 0..60 {
            assert!(matches!(meter.reserve(0, 1, 1), Reserve::Granted(_)));
        }
        assert_eq!(meter.reserve(0, 1, 1), Reserve::Wait(NANOS_PER_SEC), "one request per second refills");
        assert_eq!(meter.reserve(0, 1, 2_000_000), Reserve::Refused { wait: None }, "more than the bucket holds");
        assert!((meter.pressure(0) - 1.0).abs() < 1e-12);
        let Reserve::Granted(r) = meter.reserve(NANOS_PER_SEC, 1, 1) else { panic!() };
        meter.cancel(NANOS_PER_SEC, r);
        assert!(
            matches!(meter.reserve(NANOS_PER_SEC, 1, 1), Reserve::Granted(_)),
            "a cancelled reservation is returned"
        );
    }

    /// What `pressure_at_least` must equal: every bucket read, none skipped.
    fn every_bucket(meter: &QuotaMeter, now: Nanos, floor: f64) -> f64 {
        let mut meter = meter.clone();
        [&mut meter.requests, &mut meter.input, &mut meter.output]
            .into_iter()
            .map(|bucket| 1.0 - bucket.level(now) / bucket.capacity().max(1) as f64)
            .fold(floor, f64::max)
    }

    proptest::proptest! {
        /// Skipping the buckets whose bound cannot beat the floor never changes the
        /// answer, to the bit, through reservations, refunds, cancellations, new
        /// limits and time (a bound that was not an upper bound would show here).
        #[test]
        fn pressure_skipping_buckets_equals_reading_every_bucket(
            steps in proptest::collection::vec((0u8..4, 0u64..3_000_000_000, 1u64..40_000, 1u64..4_000, 0.0f64..1.0), 1..200)
        ) {
            let limits = QuotaLimits {
                requests_per_minute: 120,
                input_tokens_per_minute: 400_000,
                output_tokens_per_minute: 60_000,
            };
            let config = QuotaConfig { headroom: 1.0, longest_wait: 0, instances: 1, coordinated: true };
            let mut meter = QuotaMeter::with_burst(limits, config, [10 * NANOS_PER_SEC; 3]);
            let (mut now, mut held) = (0, Vec::new());
            for (op, dt, input, output, floor) in steps {
                now += dt;
                match op {
                    0 | 1 => {
                        if let Reserve::Granted(r) = meter.reserve(now, input, output) {
                            held.push(r);
                        }
                    }
                    2 => {
                        if let Some(r) = held.pop() {
                            if output % 2 == 0 { meter.reconcile(now, r, output / 3) } else { meter.cancel(now, r) }
                        }
                    }
                    _ => meter.scale_limits(now, [0.25 + floor, 1.0, 1.5 - floor]),
                }
                let expected = every_bucket(&meter, now, floor);
                proptest::prop_assert_eq!(meter.pressure_at_least(now, floor).to_bits(), expected.to_bits());
                let expected = every_bucket(&meter, now, 0.0);
                proptest::prop_assert_eq!(meter.pressure(now).to_bits(), expected.to_bits());
            }
        }
    }
}
