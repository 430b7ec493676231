//! A level that changes at events (connections in use, requests waiting), integrated
//! over time: per time-series bucket (Σ level × ns) and over the measured window, for
//! a mean. Also spans added whole (an instance ejected from `from` to `until`).
//!
//! Invariants: the level never goes below zero; integrals only grow.

use crate::kernel::time::Nanos;

use super::buckets::{for_each_span, BucketCursor};

/// One level's integrals.
#[derive(Clone, Debug)]
pub struct LevelSeries {
    level: u64,
    last: Nanos,
    cursor: BucketCursor,
    bucket: Nanos,
    warmup: Nanos,
    /// Σ level × ns per bucket.
    pub area: Vec<u128>,
    /// Σ level × ns after warm-up.
    pub window: u128,
}

impl LevelSeries {
    /// Level 0 from time 0, over `buckets` buckets `bucket` ns wide.
    pub fn new(buckets: usize, bucket: Nanos, warmup: Nanos) -> Self {
        LevelSeries {
            level: 0,
            last: 0,
            cursor: BucketCursor::new(bucket),
            bucket,
            warmup,
            area: vec![0; buckets],
            window: 0,
        }
    }

    /// The level now.
    pub fn level(&self) -> u64 {
        self.level
    }

    /// The level changes by `delta` at `now`.
    #[inline]
    pub fn change(&mut self, now: Nanos, delta: i64) {
        self.advance(now);
        debug_assert!(delta >= 0 || self.level >= delta.unsigned_abs(), "a level below zero");
        self.level = self.level.wrapping_add_signed(delta);
    }

    /// Closes the integrals up to `now` (before reading them).
    pub fn advance(&mut self, now: Nanos) {
        if now == self.last {
            return;
        }
        let (level, area, mut window) = (self.level as u128, &mut self.area, 0u128);
        self.cursor.for_each_span(self.last, now, self.bucket, self.warmup, |b, after, dwell| {
            if let Some(a) = area.get_mut(b) {
                *a += level * dwell;
            }
            if after {
                window += level * dwell;
            }
        });
        self.window += window;
        self.last = now;
    }

    /// Adds 1 over `[from, until)`, whole (a span known when it starts).
    pub fn add_span(&mut self, from: Nanos, until: Nanos) {
        let (area, mut window) = (&mut self.area, 0u128);
        for_each_span(from, until, self.bucket, self.warmup, |b, after, dwell| {
            if let Some(a) = area.get_mut(b) {
                *a += dwell;
            }
            if after {
                window += dwell;
            }
        });
        self.window += window;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integrates_a_level_per_bucket_and_after_warmup() {
        let mut s = LevelSeries::new(3, 10, 5);
        s.change(2, 2); // 2 from t = 2
        s.change(12, -1); // 1 from t = 12
        s.advance(30);
        assert_eq!(s.area, [16, 2 * 2 + 8, 10]);
        assert_eq!(s.window, 2 * 7 + 18);
        assert_eq!(s.level(), 1);
    }

    #[test]
    fn spans_add_whole() {
        let mut s = LevelSeries::new(2, 10, 0);
        s.add_span(5, 15);
        s.add_span(8, 40);
        assert_eq!(s.area, [5 + 2, 5 + 10]);
        assert_eq!(s.window, 10 + 32);
    }
}
