//! A token bucket with continuous refill, in exact integer arithmetic.
//!
//! The level is kept in "units" of 1/period tokens: refilling for `dt` nanoseconds
//! adds exactly `dt × refill` units and a token costs exactly `period` units, so
//! "600 per minute, wait for 100 tokens" is exactly 10 s — no float drift.
//!
//! Invariant: 0 ≤ level ≤ capacity (asserted after every change).

use crate::kernel::time::Nanos;

/// A token bucket: `capacity` tokens, refilled by `refill` tokens every `period`
/// nanoseconds, continuously. Starts full.
#[derive(Clone, Debug)]
pub struct TokenBucket {
    capacity: u64,
    refill: u64,
    period: Nanos,
    /// Level in units of 1/period tokens.
    level_units: u128,
    updated_at: Nanos,
    /// `capacity × period`, the full level in units.
    max_units: u128,
    /// [`TokenBucket::level`] of a full bucket, computed once by the same expression:
    /// a full bucket (most of a healthy run's) skips a u128 → f64 conversion.
    full_level: f64,
}

impl TokenBucket {
    /// A bucket holding up to `capacity` tokens, refilled by `refill` tokens per `period`.
    pub fn new(capacity: u64, refill: u64, period: Nanos) -> Self {
        assert!(period > 0, "token bucket period must be positive");
        let max_units = capacity as u128 * period as u128;
        let full_level = max_units as f64 / period as f64;
        TokenBucket { capacity, refill, period, level_units: max_units, updated_at: 0, max_units, full_level }
    }

    /// `per_s` tokens a second, one every 1/`per_s` seconds (to the nanosecond), up to
    /// `burst` (at least one): a service's rate limit in the graph model and in
    /// `stampede-tower`.
    pub fn per_second(per_s: f64, burst: u64) -> Self {
        assert!(per_s > 0.0 && per_s.is_finite(), "a rate is positive");
        let period = ((crate::kernel::time::NANOS_PER_SEC as f64 / per_s).round() as Nanos).max(1);
        Self::new(burst.max(1), 1, period)
    }

    /// The usual rate limit: `limit` per minute, bursting up to `limit`.
    pub fn per_minute(limit: u64) -> Self {
        Self::new(limit, limit, 60 * crate::kernel::time::NANOS_PER_SEC)
    }

    /// Capacity in tokens.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Tokens added per period.
    pub fn refill(&self) -> u64 {
        self.refill
    }

    fn max_units(&self) -> u128 {
        self.max_units
    }

    #[inline]
    fn refill_to(&mut self, now: Nanos) {
        if now > self.updated_at {
            let added = (now - self.updated_at) as u128 * self.refill as u128;
            self.level_units = (self.level_units + added).min(self.max_units());
            self.updated_at = now;
        }
        debug_assert!(self.level_units <= self.max_units());
    }

    /// Tokens available at `now` (fractional).
    #[inline]
    pub fn level(&mut self, now: Nanos) -> f64 {
        self.refill_to(now);
        if self.level_units == self.max_units {
            return self.full_level;
        }
        units_as_f64(self.level_units) / self.period as f64
    }

    /// Whole tokens available at `now`.
    pub fn whole_tokens(&mut self, now: Nanos) -> u64 {
        self.refill_to(now);
        (self.level_units / self.period as u128) as u64
    }

    /// Takes `n` tokens if they are there.
    #[inline]
    pub fn try_take(&mut self, now: Nanos, n: u64) -> bool {
        self.refill_to(now);
        let cost = n as u128 * self.period as u128;
        if cost <= self.level_units {
            self.level_units -= cost;
            true
        } else {
            false
        }
    }

    /// How long until `n` tokens are available: `Some(0)` if they are now, `None` if
    /// never (more than the capacity, or no refill).
    pub fn wait_time(&mut self, now: Nanos, n: u64) -> Option<Nanos> {
        self.refill_to(now);
        if n > self.capacity {
            return None;
        }
        let cost = n as u128 * self.period as u128;
        if cost <= self.level_units {
            return Some(0);
        }
        if self.refill == 0 {
            return None;
        }
        let missing = cost - self.level_units;
        Some(missing.div_ceil(self.refill as u128) as Nanos)
    }

    /// From `now` on, holds up to `capacity` tokens refilled by `refill` per period (a
    /// provider changing its quota mid-run). What the bucket held is kept, down to the
    /// new capacity.
    pub fn set_limits(&mut self, now: Nanos, capacity: u64, refill: u64) {
        self.refill_to(now);
        self.capacity = capacity;
        self.refill = refill;
        self.max_units = capacity as u128 * self.period as u128;
        self.full_level = self.max_units as f64 / self.period as f64;
        self.level_units = self.level_units.min(self.max_units);
        debug_assert!(self.level_units <= self.max_units);
    }

    /// Gives back `n` tokens (say, an unused reservation), never above capacity.
    pub fn refund(&mut self, now: Nanos, n: u64) {
        self.refill_to(now);
        self.level_units = (self.level_units + n as u128 * self.period as u128).min(self.max_units());
    }
}

/// `units as f64`, with the same rounding: a u128 → f64 conversion is a library call
/// (2% of an `llm-stack` replica, reading nine buckets' levels per admission), a u64 →
/// f64 one instruction, and a level fits 64 bits unless a bucket holds more than
/// 2⁶⁴ / period tokens (300 million a minute). Both round to nearest, so the value is
/// the same either way.
#[inline]
fn units_as_f64(units: u128) -> f64 {
    match u64::try_from(units) {
        Ok(units) => units as f64,
        Err(_) => units as f64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::time::secs_to_nanos;
    use proptest::prelude::*;

    #[test]
    fn a_level_converts_to_the_same_float_on_either_side_of_64_bits() {
        for units in [0u128, 1, (1 << 53) + 1, u64::MAX as u128 - 1, u64::MAX as u128, u64::MAX as u128 + 1, u128::MAX]
        {
            assert_eq!(units_as_f64(units).to_bits(), (units as f64).to_bits(), "{units}");
        }
        let minute = 60_000_000_000;
        // 400 million tokens a minute: the level takes more than 64 bits.
        let mut big = TokenBucket::new(400_000_000, 400_000_000, minute);
        assert!(big.try_take(0, 123_456_789));
        assert_eq!(big.level(0), 276_543_211.0);
        let level = big.level(minute / 4);
        assert!(big.level_units > u64::MAX as u128);
        assert_eq!(level.to_bits(), (big.level_units as f64 / minute as f64).to_bits(), "the u128 conversion's value");
        assert!((level - 376_543_211.0).abs() < 1e-6, "a quarter minute refills 100 million: {level}");
        assert_eq!(big.level(minute), 400_000_000.0, "full again");
    }

    #[test]
    fn new_limits_apply_from_now_and_keep_what_the_bucket_held() {
        let mut bucket = TokenBucket::per_minute(600);
        assert!(bucket.try_take(0, 500));
        // Halved at 6 s: 100 + 60 refilled at 600/min, then 300/min into a 300 bucket.
        bucket.set_limits(secs_to_nanos(6.0), 300, 300);
        assert_eq!(bucket.whole_tokens(secs_to_nanos(6.0)), 160);
        assert_eq!(bucket.whole_tokens(secs_to_nanos(12.0)), 190);
        assert_eq!(bucket.wait_time(secs_to_nanos(12.0), 200), Some(secs_to_nanos(2.0)));
        assert_eq!(bucket.whole_tokens(secs_to_nanos(600.0)), 300, "full at the new capacity");
        bucket.set_limits(secs_to_nanos(600.0), 100, 100);
        assert_eq!(bucket.whole_tokens(secs_to_nanos(600.0)), 100, "cut to the smaller capacity");
    }

    #[test]
    fn six_hundred_per_minute_is_exact() {
        let mut bucket = TokenBucket::per_minute(600);
        assert_eq!(bucket.level(0), 600.0, "starts full");
        assert!(bucket.try_take(0, 100));
        assert_eq!(bucket.level(0), 500.0);
        assert_eq!(bucket.level(secs_to_nanos(10.0)), 600.0, "full again 10 s later");
        let t = secs_to_nanos(10.0);
        assert!(bucket.try_take(t, 600));
        assert_eq!(bucket.level(t), 0.0, "empty after taking all");
        assert!(!bucket.try_take(t, 1));
        assert_eq!(bucket.wait_time(t, 100), Some(secs_to_nanos(10.0)), "100 tokens take exactly 10 s");
        assert_eq!(bucket.wait_time(t, 601), None, "more than the capacity never comes");
        bucket.refund(t, 250);
        assert_eq!(bucket.level(t), 250.0, "refunding restores");
        bucket.refund(t, 10_000);
        assert_eq!(bucket.level(t), 600.0, "refunds are capped at capacity");
        assert!(bucket.try_take(t + secs_to_nanos(10.0), 600));
    }

    proptest! {
        #[test]
        fn level_stays_within_capacity(ops in proptest::collection::vec((0u64..2_000_000_000, 0u8..3, 0u64..800), 1..200)) {
            let mut bucket = TokenBucket::per_minute(600);
            let mut now = 0;
            for (dt, op, n) in ops {
                now += dt;
                match op {
                    0 => { bucket.try_take(now, n); }
                    1 => bucket.refund(now, n),
                    _ => { let wait = bucket.wait_time(now, n); prop_assert_eq!(wait.is_none(), n > 600); }
                }
                let level = bucket.level(now);
                prop_assert!((0.0..=600.0).contains(&level));
            }
        }
    }
}
