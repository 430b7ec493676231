//! Recovery time after faults, from a per-bucket queue-depth series.
//!
//! * **Baseline**: the mean depth over the buckets between warm-up and the first fault.
//! * **Band**: baseline × 1.5 + 2 (the +2 keeps a near-empty queue from failing on noise).
//! * **Hold**: the depth must stay within the band for `hold` consecutive time.
//!
//! Recovered at the start of the first bucket after the last fault ends from which
//! the depth holds within the band; the result is that instant minus the fault's end.
//! `Some(0)` without faults; `None` if the series never holds within the band before
//! it ends — never a made-up number.

use crate::kernel::time::Nanos;

/// The band is `baseline × BAND_FACTOR + BAND_OFFSET` (the report draws it too).
pub const BAND_FACTOR: f64 = 1.5;
/// Keeps a near-empty queue from failing on noise.
pub const BAND_OFFSET: f64 = 2.0;

/// `area[b]` is Σ depth × ns over bucket `b` of width `bucket`; `faults` are (start, end).
pub fn recovery_time(
    area: &[u128],
    bucket: Nanos,
    warmup: Nanos,
    faults: &[(Nanos, Nanos)],
    hold: Nanos,
) -> Option<Nanos> {
    let Some(first_start) = faults.iter().map(|f| f.0).min() else { return Some(0) };
    let last_end = faults.iter().map(|f| f.1).max().expect("faults exist");
    let depth = |b: usize| area[b] as f64 / bucket as f64;
    let from = warmup.div_ceil(bucket) as usize;
    let to = ((first_start / bucket) as usize).min(area.len());
    let baseline = if to > from { (from..to).map(depth).sum::<f64>() / (to - from) as f64 } else { 0.0 };
    let band = baseline * BAND_FACTOR + BAND_OFFSET;
    let hold_buckets = hold.div_ceil(bucket).max(1) as usize;
    let start = last_end.div_ceil(bucket) as usize;
    let mut run = 0;
    for b in start..area.len() {
        if depth(b) <= band {
            run += 1;
            if run == hold_buckets {
                let recovered_at = (b + 1 - hold_buckets) as u64 * bucket;
                return Some(recovered_at.saturating_sub(last_end));
            }
        } else {
            run = 0;
        }
    }
    None
}
