//! Exact moments: a metric's count, Σx and Σx² over replicas, kept exactly, so that a
//! summary does not depend on the order replicas were added or on how they were split.
//!
//! Why exact: a shard that keeps no replica rows (`--replica-rows none`) hands the
//! merge its sums, not its values. Floating-point sums depend on the order of
//! addition; a merge of 7 shards and a run in one process would differ in the last
//! bits. An [`ExactSum`] is a fixed-point integer wide enough for every finite f64
//! (a Kulisch accumulator: 2^-1088 to 2^1152 in 32-bit digits held in i64 limbs, so
//! two billion additions fit before a carry pass), and x² is added exactly as the two
//! doubles `hi = x·x` and `lo = fma(x, x, −hi)`. Addition of integers is associative:
//! any split, any order, the same bits.
//!
//! The summary is then computed once from the exact sums: the mean is Σx rounded to
//! the nearest double, divided by n; the variance's numerator n·Σx² − (Σx)² is formed
//! exactly in integers and rounded once. Both are at least as accurate as Welford's
//! update, which rounds at every replica.
//!
//! Invariants: limbs are normalised (every limb but the top in [0, 2^32)) before they
//! are serialised, merged or read; `pending` additions since the last normalisation
//! stay below 2^30, so no limb overflows.

use super::stats::Summary;

/// Limbs of 32 bits: limb k weighs 2^(32·(k − LOW_LIMBS)).
const LIMBS: usize = 70;
/// Limbs below 2^0: the lowest weighs 2^-1088, below the smallest subnormal (2^-1074).
const LOW_LIMBS: i64 = 34;
/// Additions between carry passes: each adds under 2^32 to a limb, an i64 holds 2^63.
const PENDING_LIMIT: u32 = 1 << 30;

/// An exact sum of finite doubles (equal when their values are). Its limbs are
/// allocated at the first non-zero value: most of a big graph's metrics (a failure
/// caused by one service of thousands) stay zero, and 280,000 metrics' two sums held
/// 313 MB of zero limbs.
#[derive(Clone, Debug, Default)]
pub struct ExactSum {
    limbs: Option<Box<[i64; LIMBS]>>,
    pending: u32,
}

/// The limbs of a sum that has seen no non-zero value.
const ZERO_LIMBS: [i64; LIMBS] = [0; LIMBS];

impl PartialEq for ExactSum {
    fn eq(&self, other: &ExactSum) -> bool {
        let (mut a, mut b) = (self.clone(), other.clone());
        a.normalise();
        b.normalise();
        a.limbs() == b.limbs()
    }
}

impl Eq for ExactSum {}

impl ExactSum {
    fn limbs(&self) -> &[i64; LIMBS] {
        self.limbs.as_deref().unwrap_or(&ZERO_LIMBS)
    }

    fn limbs_mut(&mut self) -> &mut [i64; LIMBS] {
        self.limbs.get_or_insert_with(|| Box::new(ZERO_LIMBS))
    }

    /// Adds finite `x` exactly.
    pub fn add(&mut self, x: f64) {
        debug_assert!(x.is_finite(), "only finite values are summed: {x}");
        if x == 0.0 {
            return;
        }
        let bits = x.to_bits();
        let exponent_field = ((bits >> 52) & 0x7ff) as i64;
        let fraction = bits & ((1 << 52) - 1);
        // x = mantissa · 2^exponent, with an integer mantissa below 2^53.
        let (mantissa, exponent) =
            if exponent_field == 0 { (fraction, -1074) } else { (fraction | (1 << 52), exponent_field - 1075) };
        let shift = exponent + 32 * LOW_LIMBS; // bits above the accumulator's lowest
        debug_assert!(shift >= 0);
        let (limb, offset) = ((shift / 32) as usize, (shift % 32) as u32);
        let spread = (mantissa as u128) << offset; // at most 84 bits: three limbs
        let sign = if x < 0.0 { -1 } else { 1 };
        let limbs = self.limbs_mut();
        for i in 0..3 {
            let digit = ((spread >> (32 * i)) & 0xffff_ffff) as i64;
            if digit != 0 {
                limbs[limb + i] += sign * digit;
            }
        }
        self.pending += 1;
        if self.pending == PENDING_LIMIT {
            self.normalise();
        }
    }

    /// Adds another exact sum.
    pub fn merge(&mut self, other: &ExactSum) {
        let Some(other_limbs) = other.limbs.as_deref() else { return };
        let mut other = ExactSum { limbs: Some(Box::new(*other_limbs)), pending: other.pending };
        other.normalise();
        self.normalise();
        for (limb, add) in self.limbs_mut().iter_mut().zip(other.limbs()) {
            *limb += add;
        }
        self.normalise();
    }

    /// Carries every limb's excess up, leaving each limb but the top in [0, 2^32).
    fn normalise(&mut self) {
        self.pending = 0;
        let Some(limbs) = self.limbs.as_deref_mut() else { return };
        for k in 0..LIMBS - 1 {
            let carry = limbs[k] >> 32; // floor division: negative limbs borrow
            limbs[k] -= carry << 32;
            limbs[k + 1] += carry;
        }
    }

    /// The sum's digits (base 2^32, digit k weighing 2^(32·(k − LOW_LIMBS))) as a sign
    /// and a magnitude.
    fn magnitude(&self) -> (bool, Vec<i128>) {
        let mut sum = self.clone();
        sum.normalise();
        let negative = sum.limbs()[LIMBS - 1] < 0;
        let mut digits: Vec<i128> =
            sum.limbs().iter().map(|&l| if negative { -(l as i128) } else { l as i128 }).collect();
        carry(&mut digits);
        (negative, digits)
    }

    /// The sum rounded to the nearest double (ties to even).
    pub fn to_f64(&self) -> f64 {
        let (negative, digits) = self.magnitude();
        let value = digits_to_f64(&digits, -32 * LOW_LIMBS);
        if negative {
            -value
        } else {
            value
        }
    }

    /// Compact bytes: the lowest non-zero limb's index (u16), the number of limbs
    /// (u16), then those limbs (i64 LE), normalised.
    pub fn to_bytes(&self, out: &mut Vec<u8>) {
        let mut sum = self.clone();
        sum.normalise();
        let limbs = sum.limbs();
        let first = limbs.iter().position(|&l| l != 0).unwrap_or(0);
        let last = limbs.iter().rposition(|&l| l != 0).map_or(0, |l| l + 1);
        out.extend((first as u16).to_le_bytes());
        out.extend(((last.max(first) - first) as u16).to_le_bytes());
        for limb in &limbs[first..last.max(first)] {
            out.extend(limb.to_le_bytes());
        }
    }

    /// Reads what [`ExactSum::to_bytes`] wrote from the front of `bytes`, advancing it.
    pub fn from_bytes(bytes: &mut &[u8]) -> Result<ExactSum, String> {
        let first = take::<2>(bytes).map(u16::from_le_bytes)? as usize;
        let count = take::<2>(bytes).map(u16::from_le_bytes)? as usize;
        if first + count > LIMBS {
            return Err(format!("an exact sum of limbs {first}..{} (at most {LIMBS})", first + count));
        }
        let mut sum = ExactSum::default();
        for k in first..first + count {
            sum.limbs_mut()[k] = take::<8>(bytes).map(i64::from_le_bytes)?;
        }
        Ok(sum)
    }
}

fn take<const N: usize>(bytes: &mut &[u8]) -> Result<[u8; N], String> {
    if bytes.len() < N {
        return Err("exact moments cut short".into());
    }
    let (head, rest) = bytes.split_at(N);
    *bytes = rest;
    Ok(head.try_into().expect("N bytes"))
}

/// Propagates carries through base-2^32 digits (signed), leaving every digit but the
/// top in [0, 2^32).
fn carry(digits: &mut [i128]) {
    for k in 0..digits.len() - 1 {
        let carry = digits[k] >> 32;
        digits[k] -= carry << 32;
        digits[k + 1] += carry;
    }
}

/// Σ digits[k]·2^(32k + exponent) for non-negative normalised digits, rounded once to
/// the nearest double.
fn digits_to_f64(digits: &[i128], exponent: i64) -> f64 {
    debug_assert!(digits.iter().all(|&d| d >= 0));
    let Some(top) = digits.iter().rposition(|&d| d != 0) else { return 0.0 };
    // The top three digits hold at least 65 significant bits; the rest only decide ties.
    let mut window: u128 = 0;
    for k in (top.saturating_sub(2)..=top).rev() {
        window = (window << 32) | digits[k] as u128;
    }
    let below = top.saturating_sub(2); // digits under the window
    let sticky = digits[..below].iter().any(|&d| d != 0);
    let width = 128 - window.leading_zeros() as i64; // significant bits in the window
    let drop = (width - 64).max(0);
    let mut top64 = (window >> drop) as u64;
    if sticky || (drop > 0 && window & ((1u128 << drop) - 1) != 0) {
        top64 |= 1; // below the rounding bit: breaks ties away from an exact half
    }
    let scale = exponent + 32 * below as i64 + drop;
    scale_by_power_of_two(top64 as f64, scale)
}

/// x·2^e without overflow or underflow in the steps (at most one final rounding).
fn scale_by_power_of_two(mut x: f64, mut e: i64) -> f64 {
    let step = |e: i64| f64::from_bits(((e + 1023) as u64) << 52);
    while e > 1000 {
        x *= step(1000);
        e -= 1000;
    }
    while e < -1000 {
        x *= step(-1000);
        e += 1000;
        if x == 0.0 {
            return 0.0;
        }
    }
    x * step(e)
}

/// Count, Σx and Σx² of one metric's replica values, exactly. NaN means "undefined
/// for this replica" and is skipped (as it always was); infinities are counted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Moments {
    count: u64,
    sum: ExactSum,
    squares: ExactSum,
    positive_infinities: u64,
    negative_infinities: u64,
    /// Values whose square overflows (|x| > 1.3e154): their spread is infinite.
    huge: u64,
}

impl Moments {
    /// Adds one replica's value.
    pub fn push(&mut self, x: f64) {
        if x.is_nan() {
            return;
        }
        self.count += 1;
        if x.is_infinite() {
            if x > 0.0 {
                self.positive_infinities += 1;
            } else {
                self.negative_infinities += 1;
            }
            return;
        }
        self.sum.add(x);
        let hi = x * x;
        if hi.is_infinite() {
            self.huge += 1;
            return;
        }
        self.squares.add(hi);
        self.squares.add(x.mul_add(x, -hi)); // exact: x² = hi + lo
    }

    /// Adds another set of replicas' moments.
    pub fn merge(&mut self, other: &Moments) {
        self.count += other.count;
        self.sum.merge(&other.sum);
        self.squares.merge(&other.squares);
        self.positive_infinities += other.positive_infinities;
        self.negative_infinities += other.negative_infinities;
        self.huge += other.huge;
    }

    /// Values added (NaN excluded).
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Mean, sample standard deviation and the 95% Student-t interval of the mean. With
    /// fewer than two values the spread is unknown: sd and the bounds are NaN.
    pub fn summary(&self) -> Summary {
        let nan = Summary { mean: f64::NAN, sd: f64::NAN, ci_lo: f64::NAN, ci_hi: f64::NAN };
        if self.count == 0 {
            return nan;
        }
        let mean = match (self.positive_infinities > 0, self.negative_infinities > 0) {
            (true, true) => return nan,
            (true, false) => return Summary { mean: f64::INFINITY, ..nan },
            (false, true) => return Summary { mean: f64::NEG_INFINITY, ..nan },
            (false, false) => self.sum.to_f64() / self.count as f64,
        };
        if self.count < 2 {
            return Summary { mean, ..nan };
        }
        let n = self.count as f64;
        let sd = if self.huge > 0 { f64::INFINITY } else { (self.variance_numerator() / (n * (n - 1.0))).sqrt() };
        Summary::with_interval(mean, sd, self.count)
    }

    /// n·Σx² − (Σx)² (that is n·Σ(x − mean)²), formed exactly and rounded once.
    fn variance_numerator(&self) -> f64 {
        let (_, a) = self.sum.magnitude();
        let (squares_negative, b) = self.squares.magnitude();
        // Digit k weighs 2^(32k − 2·32·LOW_LIMBS): the unit of (Σx)².
        let mut d = vec![0i128; 2 * LIMBS + 2];
        let (n_low, n_high) = ((self.count & 0xffff_ffff) as i128, (self.count >> 32) as i128);
        let sign = if squares_negative { -1 } else { 1 };
        for (k, &digit) in b.iter().enumerate().filter(|(_, &d)| d != 0) {
            d[k + LOW_LIMBS as usize] += sign * digit * n_low;
            d[k + LOW_LIMBS as usize + 1] += sign * digit * n_high;
        }
        carry(&mut d);
        let nonzero: Vec<usize> = (0..a.len()).filter(|&i| a[i] != 0).collect();
        for &i in &nonzero {
            for &j in &nonzero {
                d[i + j] -= a[i] * a[j];
            }
            carry(&mut d); // each row subtracts under 2^70 per digit: no overflow
        }
        if d[d.len() - 1] < 0 {
            return 0.0; // only when x² had a tail below 2^-1074 (values near 1e-154)
        }
        digits_to_f64(&d, -64 * LOW_LIMBS)
    }

    /// Compact bytes: count, the infinities and huge values (u64 LE), Σx, Σx².
    pub fn to_bytes(&self, out: &mut Vec<u8>) {
        for n in [self.count, self.positive_infinities, self.negative_infinities, self.huge] {
            out.extend(n.to_le_bytes());
        }
        self.sum.to_bytes(out);
        self.squares.to_bytes(out);
    }

    /// Reads what [`Moments::to_bytes`] wrote from the front of `bytes`, advancing it.
    pub fn from_bytes(bytes: &mut &[u8]) -> Result<Moments, String> {
        let mut counts = [0u64; 4];
        for count in &mut counts {
            *count = take::<8>(bytes).map(u64::from_le_bytes)?;
        }
        let [count, positive_infinities, negative_infinities, huge] = counts;
        Ok(Moments {
            count,
            sum: ExactSum::from_bytes(bytes)?,
            squares: ExactSum::from_bytes(bytes)?,
            positive_infinities,
            negative_infinities,
            huge,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::Summary;
    use stampede_engine::{RngStream, StreamPurpose};

    /// Welford's running mean and sum of squared deviations: what summaries were folded
    /// with before the exact moments, kept as the reference they are compared against.
    #[derive(Clone, Copy, Debug, Default, PartialEq)]
    struct Welford {
        count: u64,
        mean: f64,
        squared_deviations: f64,
    }

    impl Welford {
        /// Adds one observation. NaN means "undefined for this replica" (say, the
        /// recovery time of a replica that never recovered) and is skipped.
        fn push(&mut self, value: f64) {
            if value.is_nan() {
                return;
            }
            self.count += 1;
            let delta = value - self.mean;
            self.mean += delta / self.count as f64;
            self.squared_deviations += delta * (value - self.mean);
        }

        /// Mean, sample standard deviation and the 95% Student-t interval for the mean.
        /// With fewer than two observations the spread is unknown: sd and the
        /// interval bounds are NaN.
        fn summary(&self) -> Summary {
            if self.count < 2 {
                let mean = if self.count == 1 { self.mean } else { f64::NAN };
                return Summary { mean, sd: f64::NAN, ci_lo: f64::NAN, ci_hi: f64::NAN };
            }
            let n = self.count as f64;
            let sd = (self.squared_deviations / (n - 1.0)).max(0.0).sqrt();
            Summary::with_interval(self.mean, sd, self.count)
        }
    }

    fn values(seed: u64, n: usize) -> Vec<f64> {
        let mut rng = RngStream::derive(seed, 0, StreamPurpose::named("test.moments"));
        // Spread over many binades, both signs, some exact integers.
        (0..n)
            .map(|i| match i % 4 {
                0 => rng.standard_normal() * 1e-3,
                1 => rng.uniform01() * 1e6,
                2 => -(rng.uniform01().powi(7)),
                _ => (i % 97) as f64,
            })
            .collect()
    }

    fn moments(xs: &[f64]) -> Moments {
        let mut m = Moments::default();
        xs.iter().for_each(|&x| m.push(x));
        m
    }

    #[test]
    fn any_order_and_any_split_give_the_same_bits() {
        let xs = values(1, 5_000);
        let whole = moments(&xs);
        let mut reversed: Vec<f64> = xs.clone();
        reversed.reverse();
        assert_eq!(moments(&reversed).summary(), whole.summary());
        let mut shuffled = xs.clone();
        let mut rng = RngStream::derive(2, 0, StreamPurpose::named("test.shuffle"));
        for i in (1..shuffled.len()).rev() {
            shuffled.swap(i, rng.below(i as u64 + 1) as usize);
        }
        assert_eq!(moments(&shuffled).summary(), whole.summary());
        for parts in [2, 7, 200] {
            let mut merged = Moments::default();
            for chunk in xs.chunks(xs.len().div_ceil(parts)) {
                merged.merge(&moments(chunk));
            }
            assert_eq!(merged, whole, "{parts} parts");
            assert_eq!(merged.summary().sd.to_bits(), whole.summary().sd.to_bits());
        }
        // A float sum in two orders differs: that is what this is for.
        let forward: f64 = xs.iter().sum();
        let backward: f64 = reversed.iter().sum();
        assert_ne!(forward, backward, "the test values should expose float order dependence");
    }

    #[test]
    fn sums_are_exact_and_correctly_rounded() {
        // 1 + 2^-60 + 2^-60 ... : a float sum loses every small term, the exact sum none.
        let mut sum = ExactSum::default();
        sum.add(1.0);
        for _ in 0..(1 << 12) {
            sum.add(2f64.powi(-60));
        }
        assert_eq!(sum.to_f64(), 1.0 + 2f64.powi(-48));
        // Cancellation: 1e300 + 1 − 1e300 is exactly 1.
        let mut sum = ExactSum::default();
        [1e300, 1.0, -1e300].iter().for_each(|&x| sum.add(x));
        assert_eq!(sum.to_f64(), 1.0);
        // Ties to even: 1 + 2^-53 is halfway between 1 and 1 + 2^-52: rounds to 1; a
        // further 2^-1074 tips it up.
        let mut sum = ExactSum::default();
        [1.0, 2f64.powi(-53)].iter().for_each(|&x| sum.add(x));
        assert_eq!(sum.to_f64(), 1.0);
        sum.add(f64::from_bits(1));
        assert_eq!(sum.to_f64(), 1.0 + f64::EPSILON);
        // Subnormals and the largest double.
        let mut sum = ExactSum::default();
        sum.add(f64::from_bits(3));
        sum.add(-f64::from_bits(1));
        assert_eq!(sum.to_f64(), f64::from_bits(2));
        let mut sum = ExactSum::default();
        sum.add(f64::MAX);
        assert_eq!(sum.to_f64(), f64::MAX);
        sum.add(-f64::MAX);
        sum.add(-2.5);
        assert_eq!(sum.to_f64(), -2.5);
    }

    #[test]
    fn the_summary_is_the_exact_mean_and_variance_of_integers() {
        // Integers: mean and variance are exact rationals, computed here in integers.
        let xs: Vec<f64> = (0..1001).map(|i| ((i * 7919) % 1000) as f64 - 300.0).collect();
        let n = xs.len() as i128;
        let s1: i128 = xs.iter().map(|&x| x as i128).sum();
        let s2: i128 = xs.iter().map(|&x| (x as i128) * (x as i128)).sum();
        let variance = (n * s2 - s1 * s1) as f64 / (n * (n - 1)) as f64;
        let summary = moments(&xs).summary();
        assert_eq!(summary.mean, s1 as f64 / n as f64);
        assert_eq!(summary.sd, variance.sqrt());
    }

    #[test]
    fn it_agrees_with_welford_where_welford_is_accurate_and_beats_it_where_it_is_not() {
        let xs = values(3, 10_000);
        let mut welford = Welford::default();
        xs.iter().for_each(|&x| welford.push(x));
        let (exact, folded) = (moments(&xs).summary(), welford.summary());
        assert!((exact.mean - folded.mean).abs() <= 1e-12 * folded.mean.abs(), "{exact:?} {folded:?}");
        assert!((exact.sd - folded.sd).abs() <= 1e-12 * folded.sd, "{exact:?} {folded:?}");
        assert!((exact.ci_hi - folded.ci_hi).abs() <= 1e-9 * folded.ci_hi.abs());
        // A huge offset with a tiny spread: x = 1e9 + {0, 1, 2} repeated.
        let xs: Vec<f64> = (0..3000).map(|i| 1e9 + (i % 3) as f64).collect();
        let summary = moments(&xs).summary();
        assert_eq!(summary.mean, 1e9 + 1.0);
        // Population variance 2/3; sample variance 2/3 · n/(n−1).
        let want = (2.0 / 3.0 * 3000.0 / 2999.0f64).sqrt();
        assert!((summary.sd - want).abs() <= 1e-15 * want, "{} vs {want}", summary.sd);
    }

    #[test]
    fn nan_is_skipped_and_infinities_and_small_counts_are_spelt_out() {
        let summary = moments(&[1.0, f64::NAN, 3.0]).summary();
        assert_eq!((summary.mean, summary.sd), (2.0, 2f64.sqrt()));
        let one = moments(&[4.0]).summary();
        assert!(one.mean == 4.0 && one.sd.is_nan() && one.ci_lo.is_nan());
        assert!(moments(&[]).summary().mean.is_nan());
        assert_eq!(moments(&[1.0, f64::INFINITY]).summary().mean, f64::INFINITY);
        assert!(moments(&[f64::NEG_INFINITY, f64::INFINITY]).summary().mean.is_nan());
        let huge = moments(&[1e200, 1e200]).summary();
        assert_eq!((huge.mean, huge.sd), (1e200, f64::INFINITY));
        let same = moments(&[0.1; 100]).summary();
        assert_eq!((same.mean, same.sd), (0.1, 0.0), "no spread is exactly zero, not a rounding residue");
    }

    #[test]
    fn bytes_round_trip_compactly() {
        let m = moments(&values(4, 1000));
        let mut bytes = Vec::new();
        m.to_bytes(&mut bytes);
        let mut reader = bytes.as_slice();
        assert_eq!(Moments::from_bytes(&mut reader).unwrap(), m);
        assert!(reader.is_empty());
        assert!(bytes.len() < 32 + 2 * (4 + 8 * 40), "{} bytes", bytes.len());
        assert!(Moments::from_bytes(&mut &bytes[..bytes.len() - 1]).is_err());
    }
}
