//! Time integrals per time-series bucket.
//!
//! A model integrates levels (queue depth, busy workers) over time. Between two
//! events the level is constant; [`for_each_span`] cuts that stretch at every bucket
//! boundary and at the end of warm-up, so each piece belongs to exactly one bucket
//! and lies wholly before or after warm-up.

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_split_at_buckets_and_warmup_and_add_up() {
        let mut pieces = Vec::new();
        for_each_span(5, 37, 10, 23, |b, after, dwell| pieces.push((b, after, dwell)));
        assert_eq!(pieces, vec![(0, false, 5), (1, false, 10), (2, false, 3), (2, true, 7), (3, true, 7)]);
        assert_eq!(pieces.iter().map(|p| p.2).sum::<u128>(), 32);
    }
}
