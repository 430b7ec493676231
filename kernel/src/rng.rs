//! Named, seeded random streams and the distribution samplers stampede owns.
//!
//! Every random draw in a replica comes from a stream derived from
//! (master seed, replica index, purpose) — never from the grid point, the thread or
//! the clock. Replica `r` therefore sees the same arrivals under every policy of a
//! grid (common random numbers), and results do not depend on scheduling.
//!
//! The generator is Xoshiro256++ (`rand_xoshiro`). Its 256-bit state is filled by
//! SplitMix64 from a mixed seed, as the xoshiro authors recommend. The samplers
//! (uniform, exponential, normal, lognormal, bounded integers) are written here on
//! purpose: their formulas are fixed by this file (and the exponential's tables by
//! [`crate::ziggurat`]), so a value drawn today is the value drawn after any dependency
//! upgrade. Golden values in the tests pin them.

use rand_xoshiro::rand_core::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::ziggurat::{
    LAYER_HEIGHT, LAYER_WIDTH, NORMAL_LAYER_HEIGHT, NORMAL_LAYER_WIDTH, NORMAL_TAIL_START, TAIL_START,
};

/// What a stream is for. Two streams of one replica with different purposes are
/// independent; the same purpose in the same replica is the same stream in every
/// grid point.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct StreamPurpose(u64);

impl StreamPurpose {
    /// A purpose named by a string, hashed (FNV-1a, 64 bit) at compile time when
    /// used in a `const`. Names are dotted by convention: `"mmc.arrivals"`.
    pub const fn named(name: &str) -> Self {
        let bytes = name.as_bytes();
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        let mut i = 0;
        while i < bytes.len() {
            hash ^= bytes[i] as u64;
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
            i += 1;
        }
        StreamPurpose(hash)
    }

    /// A purpose indexed within a family, e.g. one stream per shard: the family's
    /// purpose mixed with `index`.
    pub const fn indexed(self, index: u64) -> Self {
        StreamPurpose(mix64(self.0 ^ mix64(index.wrapping_add(0x9e37_79b9_7f4a_7c15))))
    }

    /// The raw 64-bit value.
    pub const fn value(self) -> u64 {
        self.0
    }
}

/// SplitMix64's output function: a bijective avalanche mix of 64 bits.
pub const fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// One step of SplitMix64: advances `state` and returns the next output.
pub fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    mix64(*state)
}

/// The seed identifying replica `replica` of a run with `master_seed`. It is what
/// `replicas.parquet` reports in its `seed` column; every stream of the replica is
/// derived from it and a purpose.
pub fn replica_seed(master_seed: u64, replica: u64) -> u64 {
    mix64(mix64(master_seed ^ 0x5354_414d_5045_4445) ^ replica.wrapping_mul(0x9e37_79b9_7f4a_7c15))
}

/// An independent random stream: Xoshiro256++ plus stampede's own samplers.
#[derive(Clone, Debug)]
pub struct RngStream {
    generator: Xoshiro256PlusPlus,
}

/// 2^-53: the spacing of the 53-bit uniform grid.
const UNIT_53: f64 = 1.0 / (1u64 << 53) as f64;

/// What the ziggurat's slow path decided about a point.
enum Edge {
    /// Under the curve: the point's x is the draw.
    Accept,
    /// In the tail beyond R: the draw is R plus a fresh draw.
    Tail,
    /// Above the curve: draw again.
    Reject,
}

impl RngStream {
    /// The stream for `purpose` in replica `replica` of a run seeded `master_seed`.
    pub fn derive(master_seed: u64, replica: u64, purpose: StreamPurpose) -> Self {
        Self::from_replica_seed(replica_seed(master_seed, replica), purpose)
    }

    /// The stream for `purpose` of the replica whose seed is `replica_seed`.
    pub fn from_replica_seed(replica_seed: u64, purpose: StreamPurpose) -> Self {
        let mut state = mix64(replica_seed ^ mix64(purpose.value()));
        let mut seed = [0u8; 32];
        for word in seed.chunks_exact_mut(8) {
            word.copy_from_slice(&splitmix64(&mut state).to_le_bytes());
        }
        // SplitMix64 is a bijection of a counter, so four consecutive outputs are
        // never all zero: the xoshiro state is valid.
        debug_assert!(seed.iter().any(|&b| b != 0));
        RngStream { generator: Xoshiro256PlusPlus::from_seed(seed) }
    }

    /// Turns this stream into a new one that depends on where it was and on `salt`:
    /// how importance splitting makes the clones of one trajectory diverge. Two forks
    /// of equal streams with different salts are independent; the same fork of the
    /// same stream is the same stream (so a clone is replayable).
    pub fn fork(&mut self, salt: u64) {
        let position = self.next_u64();
        *self = RngStream::from_replica_seed(mix64(position ^ mix64(salt ^ 0x464f_524b)), StreamPurpose(0));
    }

    /// The next raw 64 bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.generator.next_u64()
    }

    /// Uniform on [0, 1), on a grid of 2^-53.
    #[inline]
    pub fn uniform01(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * UNIT_53
    }

    /// Uniform on the open interval (0, 1): safe to take a logarithm of.
    #[inline]
    pub fn uniform_open01(&mut self) -> f64 {
        ((self.next_u64() >> 11) as f64 + 0.5) * UNIT_53
    }

    /// Uniform on [low, high).
    #[inline]
    pub fn uniform(&mut self, low: f64, high: f64) -> f64 {
        debug_assert!(low <= high, "uniform({low}, {high})");
        low + (high - low) * self.uniform01()
    }

    /// Uniform integer in [0, n) without modulo bias (Lemire's multiply-and-reject).
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        debug_assert!(n > 0, "below(0)");
        let mut product = (self.next_u64() as u128) * (n as u128);
        let mut low = product as u64;
        if low < n {
            let threshold = n.wrapping_neg() % n;
            while low < threshold {
                product = (self.next_u64() as u128) * (n as u128);
                low = product as u64;
            }
        }
        (product >> 64) as u64
    }

    /// True with probability `p`.
    #[inline]
    pub fn bernoulli(&mut self, p: f64) -> bool {
        debug_assert!((0.0..=1.0).contains(&p), "bernoulli({p})");
        self.uniform01() < p
    }

    /// Exponential with the given rate (mean 1/rate).
    #[inline]
    pub fn exponential(&mut self, rate: f64) -> f64 {
        debug_assert!(rate > 0.0 && rate.is_finite(), "exponential({rate})");
        self.standard_exponential() / rate
    }

    /// Exponential with mean 1, by Marsaglia and Tsang's ziggurat (tables in
    /// [`crate::ziggurat`]). One 64-bit draw gives the layer (its low 8 bits) and a
    /// point across it (its high 53 bits); 97.8% of draws land inside the layer's
    /// rectangle and cost a multiply and a compare. The rest go to
    /// [`Self::exponential_edge`]. Inversion (`-ln U`) spent 18% of an M/M/c replica
    /// in the platform's `ln`; this draws the same distribution (tested against it).
    #[inline]
    pub fn standard_exponential(&mut self) -> f64 {
        let mut offset = 0.0;
        loop {
            let bits = self.next_u64();
            let layer = (bits & 0xff) as usize;
            let x = (bits >> 11) as f64 * UNIT_53 * LAYER_WIDTH[layer];
            if x < LAYER_WIDTH[layer + 1] {
                return offset + x;
            }
            match self.exponential_edge(layer, x) {
                Edge::Accept => return offset + x,
                Edge::Tail => offset += TAIL_START,
                Edge::Reject => {}
            }
        }
    }

    /// The ziggurat's slow path: `x` fell in layer `layer` beyond the next layer's
    /// width. In the base layer that is the tail beyond R, which is R plus a fresh
    /// exponential (memorylessness); elsewhere a uniform height decides whether the
    /// point is under exp(-x).
    #[cold]
    fn exponential_edge(&mut self, layer: usize, x: f64) -> Edge {
        if layer == 0 {
            debug_assert!(x >= TAIL_START);
            return Edge::Tail;
        }
        let (low, high) = (LAYER_HEIGHT[layer], LAYER_HEIGHT[layer + 1]);
        debug_assert!(low < high && x >= LAYER_WIDTH[layer + 1] && x < LAYER_WIDTH[layer]);
        if low + self.uniform01() * (high - low) < (-x).exp() {
            Edge::Accept
        } else {
            Edge::Reject
        }
    }

    /// Standard normal by Marsaglia and Tsang's ziggurat over the half-normal (tables
    /// in [`crate::ziggurat`]). One 64-bit draw gives the layer (its low 8 bits), the
    /// sign (bit 8) and a point across the layer (its high 53 bits); 98.5% of draws
    /// land inside the layer's rectangle and cost a multiply and a compare. The rest
    /// go to [`Self::normal_edge`]. The polar method it replaced spent an `ln` and a
    /// `sqrt` on every draw (3.8% of an llm-stack replica in `ln` alone); this draws
    /// the same distribution (tested against it).
    #[inline]
    pub fn standard_normal(&mut self) -> f64 {
        loop {
            let bits = self.next_u64();
            let layer = (bits & 0xff) as usize;
            let sign = if bits & 0x100 == 0 { 1.0 } else { -1.0 };
            let x = (bits >> 11) as f64 * UNIT_53 * NORMAL_LAYER_WIDTH[layer];
            if x < NORMAL_LAYER_WIDTH[layer + 1] {
                return sign * x;
            }
            if let Some(x) = self.normal_edge(layer, x) {
                return sign * x;
            }
        }
    }

    /// The normal ziggurat's slow path: `x` fell in layer `layer` beyond the next
    /// layer's width. In the base layer that is the tail beyond R, drawn by
    /// Marsaglia's method (two exponentials, accepted with the tail's density);
    /// elsewhere a uniform height decides whether the point is under exp(-x²/2).
    #[cold]
    fn normal_edge(&mut self, layer: usize, x: f64) -> Option<f64> {
        if layer == 0 {
            loop {
                let a = self.standard_exponential() / NORMAL_TAIL_START;
                let b = self.standard_exponential();
                if 2.0 * b > a * a {
                    return Some(NORMAL_TAIL_START + a);
                }
            }
        }
        let (low, high) = (NORMAL_LAYER_HEIGHT[layer], NORMAL_LAYER_HEIGHT[layer + 1]);
        debug_assert!(low < high && x >= NORMAL_LAYER_WIDTH[layer + 1] && x < NORMAL_LAYER_WIDTH[layer]);
        (low + self.uniform01() * (high - low) < (-0.5 * x * x).exp()).then_some(x)
    }

    /// Normal with the given mean and standard deviation.
    #[inline]
    pub fn normal(&mut self, mean: f64, sd: f64) -> f64 {
        debug_assert!(sd >= 0.0, "normal sd {sd}");
        mean + sd * self.standard_normal()
    }

    /// Lognormal: exp of a normal with parameters `mu` and `sigma` (of the log).
    #[inline]
    pub fn lognormal(&mut self, mu: f64, sigma: f64) -> f64 {
        self.normal(mu, sigma).exp()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEST: StreamPurpose = StreamPurpose::named("test.stream");

    #[test]
    fn purposes_are_distinct_and_stable() {
        assert_eq!(StreamPurpose::named("").value(), 0xcbf2_9ce4_8422_2325);
        // FNV-1a of "a", the published test vector.
        assert_eq!(StreamPurpose::named("a").value(), 0xaf63_dc4c_8601_ec8c);
        assert_ne!(TEST.indexed(0), TEST.indexed(1));
    }

    /// Golden values: if any of these change, every published result changes.
    /// Only update them on purpose, with a changelog entry.
    #[test]
    fn golden_values_for_a_fixed_seed() {
        assert_eq!(replica_seed(42, 0), GOLDEN_REPLICA_SEED);
        let mut rng = RngStream::derive(42, 7, TEST);
        let raw: Vec<u64> = (0..3).map(|_| rng.next_u64()).collect();
        assert_eq!(raw, GOLDEN_RAW);
        let mut rng = RngStream::derive(42, 7, TEST);
        let draws = [
            rng.uniform01(),
            rng.exponential(2.0),
            rng.standard_normal(),
            rng.lognormal(0.0, 0.25),
            rng.below(1000) as f64,
        ];
        for (got, want) in draws.iter().zip(GOLDEN_DRAWS) {
            assert_eq!(got.to_bits(), want.to_bits(), "got {got}, want {want}");
        }
    }

    const GOLDEN_REPLICA_SEED: u64 = 6068411677750704925;
    const GOLDEN_RAW: [u64; 3] = [4538619994205397595, 11089195454893048493, 8034749940243040877];
    const GOLDEN_DRAWS: [f64; 5] =
        [0.24603908289018195, 0.3466948469387542, 0.7260123829422788, 0.956477743823404, 474.0];

    #[test]
    fn streams_differ_by_replica_and_purpose_but_not_by_anything_else() {
        let a: Vec<u64> = {
            let mut r = RngStream::derive(1, 0, TEST);
            (0..4).map(|_| r.next_u64()).collect()
        };
        let same: Vec<u64> = {
            let mut r = RngStream::derive(1, 0, TEST);
            (0..4).map(|_| r.next_u64()).collect()
        };
        let other_replica: Vec<u64> = {
            let mut r = RngStream::derive(1, 1, TEST);
            (0..4).map(|_| r.next_u64()).collect()
        };
        let other_purpose: Vec<u64> = {
            let mut r = RngStream::derive(1, 0, StreamPurpose::named("other"));
            (0..4).map(|_| r.next_u64()).collect()
        };
        assert_eq!(a, same);
        assert_ne!(a, other_replica);
        assert_ne!(a, other_purpose);
    }

    fn mean_and_variance(xs: &[f64]) -> (f64, f64) {
        let n = xs.len() as f64;
        let mean = xs.iter().sum::<f64>() / n;
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
        (mean, var)
    }

    // Sample sizes of 10^6 give standard errors of about 0.1% of the scale, so the
    // bounds below (about 4 standard errors) fail for any wrong formula.
    const N: usize = 1_000_000;

    #[test]
    fn uniform_moments() {
        let mut rng = RngStream::derive(3, 0, TEST);
        let xs: Vec<f64> = (0..N).map(|_| rng.uniform01()).collect();
        assert!(xs.iter().all(|&x| (0.0..1.0).contains(&x)));
        let (mean, var) = mean_and_variance(&xs);
        assert!((mean - 0.5).abs() < 4.0 * (1.0f64 / 12.0 / N as f64).sqrt(), "{mean}");
        assert!((var - 1.0 / 12.0).abs() < 0.0005, "{var}");
    }

    #[test]
    fn exponential_moments() {
        let mut rng = RngStream::derive(3, 1, TEST);
        let rate = 4.0;
        let xs: Vec<f64> = (0..N).map(|_| rng.exponential(rate)).collect();
        let (mean, var) = mean_and_variance(&xs);
        assert!((mean - 0.25).abs() < 4.0 * 0.25 / (N as f64).sqrt(), "{mean}");
        assert!((var - 0.0625).abs() < 0.0625 * 0.01, "{var}");
        // P(X > mean) = e^-1
        let tail = xs.iter().filter(|&&x| x > 0.25).count() as f64 / N as f64;
        assert!((tail - (-1.0f64).exp()).abs() < 0.002, "{tail}");
    }

    /// The sampler `exponential` replaced (inversion), kept to test the ziggurat against.
    fn exponential_by_inversion(rng: &mut RngStream) -> f64 {
        -rng.uniform_open01().ln()
    }

    /// Checks 10^7 unit-exponential draws: Kolmogorov-Smirnov against the exact CDF,
    /// mean and variance, the share beyond R (the ziggurat's tail path) with the mean
    /// excess there, and the count beyond the 1 - 10^-6 quantile. Every bound is about
    /// five standard errors (KS: the 0.1% critical value), so each fails for a sampler
    /// that is off by more than a few parts in 10^4 where it is tested.
    fn check_unit_exponential(name: &str, mut draw: impl FnMut() -> f64) {
        const DRAWS: usize = 10_000_000;
        let n = DRAWS as f64;
        let mut xs: Vec<f64> = (0..DRAWS).map(|_| draw()).collect();
        assert!(xs.iter().all(|&x| x >= 0.0 && x.is_finite()), "{name}: a negative or infinite draw");
        let (mean, var) = mean_and_variance(&xs);
        assert!((mean - 1.0).abs() < 5.0 / n.sqrt(), "{name}: mean {mean}");
        // Var(s^2) = (mu_4 - sigma^4) / n = 8 / n for the unit exponential.
        assert!((var - 1.0).abs() < 5.0 * (8.0 / n).sqrt(), "{name}: variance {var}");
        let beyond_r: Vec<f64> = xs.iter().filter(|&&x| x >= TAIL_START).map(|x| x - TAIL_START).collect();
        let expected = n * (-TAIL_START).exp();
        assert!(
            (beyond_r.len() as f64 - expected).abs() < 5.0 * expected.sqrt(),
            "{name}: {} beyond R, want {expected}",
            beyond_r.len()
        );
        let excess = beyond_r.iter().sum::<f64>() / beyond_r.len() as f64;
        assert!((excess - 1.0).abs() < 5.0 / expected.sqrt(), "{name}: mean excess beyond R {excess}");
        // 10 expected beyond the 1 - 10^-6 quantile, ln 10^6: Poisson(10) is outside
        // [1, 28] with probability 5e-5.
        check_extremes_and_ks(name, &mut xs, 1e6f64.ln(), |x| -(-x).exp_m1());
    }

    /// 10^7 draws: about 10 beyond the 1 - 10^-6 quantile `extreme` (Poisson(10) is
    /// outside [1, 28] with probability 5e-5), and the Kolmogorov-Smirnov distance to
    /// `cdf` within its 0.1% critical value.
    fn check_extremes_and_ks(name: &str, xs: &mut [f64], extreme: f64, cdf: impl Fn(f64) -> f64) {
        let n = xs.len() as f64;
        let beyond = xs.iter().filter(|&&x| x > extreme).count();
        assert!((1..=28).contains(&beyond), "{name}: {beyond} draws beyond the 10^-6 quantile, want about 10");
        xs.sort_unstable_by(f64::total_cmp);
        let ks = xs
            .iter()
            .enumerate()
            .map(|(i, &x)| {
                let cdf = cdf(x);
                (cdf - i as f64 / n).abs().max(((i + 1) as f64 / n - cdf).abs())
            })
            .fold(0.0, f64::max);
        assert!(ks < 1.9496 / n.sqrt(), "{name}: Kolmogorov-Smirnov D = {ks}");
    }

    #[test]
    fn the_ziggurat_draws_the_exponential_as_inversion_did() {
        let mut rng = RngStream::derive(5, 0, TEST);
        check_unit_exponential("ziggurat", || rng.standard_exponential());
        let mut rng = RngStream::derive(5, 0, TEST);
        check_unit_exponential("inversion", || exponential_by_inversion(&mut rng));
    }

    #[test]
    fn ziggurat_tables_hold_their_invariants() {
        use crate::ziggurat::{LAYERS, LAYER_AREA};
        assert_eq!(LAYER_WIDTH[LAYERS], 0.0);
        assert_eq!(LAYER_HEIGHT[LAYERS], 1.0);
        assert_eq!(LAYER_WIDTH[1], TAIL_START);
        assert!(LAYER_WIDTH.windows(2).all(|w| w[0] > w[1]), "widths fall strictly");
        assert!(LAYER_HEIGHT.windows(2).all(|w| w[0] < w[1]), "heights rise strictly");
        for (i, (&x, &f)) in LAYER_WIDTH.iter().zip(&LAYER_HEIGHT).enumerate() {
            assert!((f - (-x).exp()).abs() <= 4.0 * f64::EPSILON * f, "height {i}: {f} vs exp(-{x})");
        }
        // The base layer: its rectangle up to R plus the tail, e^-R (R + 1).
        let base = (-TAIL_START).exp() * (TAIL_START + 1.0);
        assert!((base - LAYER_AREA).abs() < 1e-14 * LAYER_AREA, "base area {base}");
        assert!((LAYER_WIDTH[0] * LAYER_HEIGHT[1] - LAYER_AREA).abs() < 1e-14 * LAYER_AREA);
        for i in 1..LAYERS {
            let area = LAYER_WIDTH[i] * (LAYER_HEIGHT[i + 1] - LAYER_HEIGHT[i]);
            assert!((area - LAYER_AREA).abs() < 1e-12 * LAYER_AREA, "layer {i}'s area {area}");
        }
    }

    /// The sampler `standard_normal` replaced (Marsaglia's polar method), kept to test
    /// the ziggurat against.
    fn normal_by_polar_method(rng: &mut RngStream) -> f64 {
        loop {
            let u = 2.0 * rng.uniform01() - 1.0;
            let v = 2.0 * rng.uniform01() - 1.0;
            let s = u * u + v * v;
            if s > 0.0 && s < 1.0 {
                return u * (-2.0 * s.ln() / s).sqrt();
            }
        }
    }

    /// The standard normal CDF by Abramowitz and Stegun 7.1.26 (|error| < 1.5e-7, four
    /// thousand times below the KS bound at 10^7 draws).
    fn normal_cdf(x: f64) -> f64 {
        let z = x.abs() / std::f64::consts::SQRT_2;
        let t = 1.0 / (1.0 + 0.327_591_1 * z);
        let poly =
            t * (0.254_829_592 + t * (-0.284_496_736 + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
        let erf = 1.0 - poly * (-z * z).exp();
        0.5 * (1.0 + erf.copysign(x))
    }

    /// P(Z > x) for x ≥ 2 by Laplace's continued fraction φ(x) / (x + 1/(x + 2/(x + …))),
    /// evaluated from 200 levels down: accurate to a few ulps there.
    fn normal_upper_tail(x: f64) -> f64 {
        assert!(x >= 2.0);
        let fraction = (1..=200).rev().fold(x, |inner, k| x + k as f64 / inner);
        let density = (-0.5 * x * x).exp() / (2.0 * std::f64::consts::PI).sqrt();
        density / fraction
    }

    /// Checks 10^7 standard-normal draws as `check_unit_exponential` does the
    /// exponential's: KS against the CDF, mean, variance and symmetry, the share beyond
    /// ±R (the tail path) with the mean excess there, and the count beyond the
    /// 1 - 10^-6 quantile; every bound about five standard errors.
    fn check_standard_normal(name: &str, mut draw: impl FnMut() -> f64) {
        const DRAWS: usize = 10_000_000;
        let n = DRAWS as f64;
        let mut xs: Vec<f64> = (0..DRAWS).map(|_| draw()).collect();
        assert!(xs.iter().all(|x| x.is_finite()), "{name}: an infinite draw");
        let (mean, var) = mean_and_variance(&xs);
        assert!(mean.abs() < 5.0 / n.sqrt(), "{name}: mean {mean}");
        // Var(s^2) = (mu_4 - sigma^4) / n = 2 / n for the standard normal.
        assert!((var - 1.0).abs() < 5.0 * (2.0 / n).sqrt(), "{name}: variance {var}");
        let negative = xs.iter().filter(|&&x| x < 0.0).count() as f64;
        assert!((negative - n / 2.0).abs() < 5.0 * (n / 4.0).sqrt(), "{name}: {negative} negative draws");
        let r = NORMAL_TAIL_START;
        let beyond_r: Vec<f64> = xs.iter().filter(|&&x| x.abs() >= r).map(|x| x.abs() - r).collect();
        let tail = normal_upper_tail(r); // 1.29e-4
        let expected = n * 2.0 * tail;
        assert!(
            (beyond_r.len() as f64 - expected).abs() < 5.0 * expected.sqrt(),
            "{name}: {} beyond ±R, want {expected}",
            beyond_r.len()
        );
        // E[X − R | X > R] = φ(R) / Q(R) − R; its sd there is below 0.3.
        let density = (-0.5 * r * r).exp() / (2.0 * std::f64::consts::PI).sqrt();
        let want_excess = density / tail - r;
        let excess = beyond_r.iter().sum::<f64>() / beyond_r.len() as f64;
        assert!(
            (excess - want_excess).abs() < 5.0 * 0.3 / expected.sqrt(),
            "{name}: mean excess beyond R {excess}, want {want_excess}"
        );
        check_extremes_and_ks(name, &mut xs, 4.753_424_308_822_899, normal_cdf);
    }

    #[test]
    fn the_normal_ziggurat_draws_the_normal_as_the_polar_method_did() {
        let mut rng = RngStream::derive(6, 0, TEST);
        check_standard_normal("ziggurat", || rng.standard_normal());
        let mut rng = RngStream::derive(6, 0, TEST);
        check_standard_normal("polar", || normal_by_polar_method(&mut rng));
    }

    #[test]
    fn normal_ziggurat_tables_hold_their_invariants() {
        use crate::ziggurat::{LAYERS, NORMAL_LAYER_AREA};
        let (width, height, r) = (NORMAL_LAYER_WIDTH, NORMAL_LAYER_HEIGHT, NORMAL_TAIL_START);
        assert_eq!((width[LAYERS], height[LAYERS], width[1]), (0.0, 1.0, r));
        assert!(width.windows(2).all(|w| w[0] > w[1]), "widths fall strictly");
        assert!(height.windows(2).all(|w| w[0] < w[1]), "heights rise strictly");
        for (i, (&x, &f)) in width.iter().zip(&height).enumerate() {
            assert!((f - (-0.5 * x * x).exp()).abs() <= 16.0 * f64::EPSILON * f, "height {i}: {f} vs exp(-{x}²/2)");
        }
        // The base layer: its rectangle up to R plus the tail, R f(R) + √(π/2) erfc(R/√2).
        let tail = (2.0 * std::f64::consts::PI).sqrt() * normal_upper_tail(r);
        let base = r * height[1] + tail;
        assert!((base - NORMAL_LAYER_AREA).abs() < 1e-14 * NORMAL_LAYER_AREA, "base area {base}");
        assert!((width[0] * height[1] - NORMAL_LAYER_AREA).abs() < 1e-14 * NORMAL_LAYER_AREA);
        for i in 1..LAYERS {
            let area = width[i] * (height[i + 1] - height[i]);
            assert!((area - NORMAL_LAYER_AREA).abs() < 1e-12 * NORMAL_LAYER_AREA, "layer {i}'s area {area}");
        }
        // The share of draws that take the fast path, as the sampler's doc says (and the exponential's).
        let fast = |widths: &[f64]| widths.windows(2).map(|w| w[1] / w[0]).sum::<f64>() / LAYERS as f64;
        assert!((fast(&width) - 0.985).abs() < 5e-4 && (fast(&LAYER_WIDTH) - 0.978).abs() < 5e-4);
        // Marsaglia and Tsang's published R and V.
        assert!((r - 3.654_152_885_361_009).abs() < 1e-14 && (NORMAL_LAYER_AREA - 0.004_928_673_233_99).abs() < 1e-13);
    }

    #[test]
    fn normal_moments_and_tails() {
        let mut rng = RngStream::derive(3, 2, TEST);
        let xs: Vec<f64> = (0..N).map(|_| rng.normal(10.0, 2.0)).collect();
        let (mean, var) = mean_and_variance(&xs);
        assert!((mean - 10.0).abs() < 4.0 * 2.0 / (N as f64).sqrt(), "{mean}");
        assert!((var - 4.0).abs() < 4.0 * 0.006, "{var}");
        // P(Z > 1.96) = 0.025
        let tail = xs.iter().filter(|&&x| x > 10.0 + 2.0 * 1.96).count() as f64 / N as f64;
        assert!((tail - 0.025).abs() < 0.0007, "{tail}");
    }

    #[test]
    fn lognormal_mean_and_median() {
        let mut rng = RngStream::derive(3, 3, TEST);
        let (mu, sigma) = (0.5, 0.25);
        let mut xs: Vec<f64> = (0..N).map(|_| rng.lognormal(mu, sigma)).collect();
        let (mean, _) = mean_and_variance(&xs);
        let want = (mu + sigma * sigma / 2.0).exp();
        assert!((mean - want).abs() < want * 0.001, "{mean} vs {want}");
        xs.sort_by(f64::total_cmp);
        let median = xs[N / 2];
        assert!((median - mu.exp()).abs() < mu.exp() * 0.001, "{median}");
    }

    #[test]
    fn below_is_unbiased_and_in_range() {
        let mut rng = RngStream::derive(3, 4, TEST);
        let mut counts = [0u32; 7];
        for _ in 0..700_000 {
            counts[rng.below(7) as usize] += 1;
        }
        // Chi-square with 6 degrees of freedom: the 99.9th percentile is 22.46.
        let expected = 100_000.0;
        let chi2: f64 = counts.iter().map(|&c| (c as f64 - expected).powi(2) / expected).sum();
        assert!(chi2 < 22.46, "chi2 {chi2}, counts {counts:?}");
    }
}
