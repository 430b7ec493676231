//! Time integrals per time-series bucket.
//!
//! A model integrates levels (queue depth, busy workers) over time. Between two
//! events the level is constant; [`for_each_span`] cuts that stretch at every bucket
//! boundary and at the end of warm-up, so each piece belongs to exactly one bucket
//! and lies wholly before or after warm-up. A [`BucketCursor`] does the same without
//! a division while the spans stay inside one bucket.

use crate::kernel::time::Nanos;

/// Calls `f(bucket, after_warmup, dwell_ns)` for each piece of `[from, to)`.
#[inline]
pub fn for_each_span(from: Nanos, to: Nanos, bucket: Nanos, warmup: Nanos, mut f: impl FnMut(usize, bool, u128)) {
    debug_assert!(bucket > 0);
    let mut t = from;
    while t < to {
        let index = t / bucket;
        let mut end = ((index + 1) * bucket).min(to);
        if t < warmup && end > warmup {
            end = warmup;
        }
        f(index as usize, t >= warmup, (end - t) as u128);
        t = end;
    }
}

/// The bucket a model's last change fell in, remembered so that the next span's
/// bucket needs no division while it stays inside that bucket (most spans: events are
/// microseconds apart, buckets tens of milliseconds). Starts at time 0's bucket.
#[derive(Clone, Copy, Debug)]
pub struct BucketCursor {
    index: usize,
    end: Nanos,
}

impl BucketCursor {
    /// A cursor over buckets `bucket` nanoseconds wide.
    pub fn new(bucket: Nanos) -> BucketCursor {
        debug_assert!(bucket > 0);
        BucketCursor { index: 0, end: bucket }
    }

    /// [`for_each_span`] of `[from, to)`, where `from` is the `to` of the cursor's
    /// previous span (or 0): the same pieces, in the same order (a span of length zero
    /// gives none).
    #[inline]
    pub fn for_each_span(
        &mut self,
        from: Nanos,
        to: Nanos,
        bucket: Nanos,
        warmup: Nanos,
        mut f: impl FnMut(usize, bool, u128),
    ) {
        // `from` may be the bucket's end: a span that ended exactly there left the cursor.
        debug_assert!(from <= self.end && from + bucket >= self.end, "the cursor is at from's bucket");
        if to <= self.end && !(from < warmup && to > warmup) {
            if to > from {
                f(self.index, from >= warmup, (to - from) as u128);
            }
            return;
        }
        self.across(from, to, bucket, warmup, f);
    }

    /// The span crosses a bucket's end or the warm-up's: cut it, and move to `to`'s
    /// bucket. Kept out of line so that the common case inlines small.
    #[inline(never)]
    fn across(&mut self, from: Nanos, to: Nanos, bucket: Nanos, warmup: Nanos, f: impl FnMut(usize, bool, u128)) {
        for_each_span(from, to, bucket, warmup, f);
        let index = to / bucket;
        *self = BucketCursor { index: index as usize, end: (index + 1) * bucket };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The cursor cuts every span as `for_each_span` does, across buckets and warm-up.
        #[test]
        fn the_cursor_cuts_spans_as_the_division_does(
            steps in proptest::collection::vec(0u64..40, 1..200),
            bucket in 1u64..25,
            warmup in 0u64..300,
        ) {
            let mut cursor = BucketCursor::new(bucket);
            let mut now = 0;
            for step in steps {
                let (mut want, mut got) = (Vec::new(), Vec::new());
                for_each_span(now, now + step, bucket, warmup, |b, after, dwell| want.push((b, after, dwell)));
                cursor.for_each_span(now, now + step, bucket, warmup, |b, after, dwell| got.push((b, after, dwell)));
                prop_assert_eq!(got, want);
                now += step;
            }
        }
    }

    #[test]
    fn spans_split_at_buckets_and_warmup_and_add_up() {
        let mut pieces = Vec::new();
        for_each_span(5, 37, 10, 23, |b, after, dwell| pieces.push((b, after, dwell)));
        assert_eq!(pieces, vec![(0, false, 5), (1, false, 10), (2, false, 3), (2, true, 7), (3, true, 7)]);
        assert_eq!(pieces.iter().map(|p| p.2).sum::<u128>(), 32);
    }
}
