//! A random duration, one value every model shares for a service time or a latency:
//! a parametric shape (constant, exponential, lognormal, gamma, Weibull, balanced
//! two-phase hyperexponential) or a [`QuantileTable`] built from data (a sample, a
//! histogram, a few quantiles), then `scale × X + shift` ("what if it were 50% slower").
//!
//! Invariants: every draw is finite and at least `shift_s` (never negative); a table
//! is non-decreasing, non-negative, and holds 2 to [`QuantileTable::MAX_POINTS`]
//! values; drawing allocates nothing and takes a fixed number of uniforms for a
//! table (one), so a table-driven replica's streams stay aligned across grid points.
//! The formulas are stampede's own (the kernel's samplers plus Marsaglia–Tsang for
//! gamma), so values stay the same across dependency upgrades.

use std::sync::Arc;

use crate::kernel::rng::RngStream;
use crate::kernel::time::{round_to_nanos, Nanos, NANOS_PER_SEC};

/// An inverse CDF in a table, drawn with one uniform whatever the data's size. Two
/// kinds:
/// - *continuous* (from a histogram or a CDF): `values[k]` is the quantile at
///   p = k / (n − 1), and a draw interpolates linearly between neighbours;
/// - *discrete* (from a sample): each of the n values is drawn with probability 1/n,
///   the empirical distribution itself, so its moments are the sample's.
#[derive(Clone, Debug, PartialEq)]
pub struct QuantileTable {
    values: Box<[f64]>,
    discrete: bool,
    /// What a uniform is multiplied by to index the table: n for a sample, n − 1 for
    /// a grid (kept as a float, so a draw converts no integer).
    span: f64,
}

impl QuantileTable {
    /// The most values a table holds; larger inputs are reduced to this many quantiles
    /// (the minimum and maximum kept exactly).
    pub const MAX_POINTS: usize = 4097;

    /// From a sample: its empirical distribution, each value drawn with probability
    /// 1/n (resampling the observations, as Ciw's and SimPy users' `Empirical` does), so
    /// the draws have the sample's own mean and variance. A sample of more than
    /// [`Self::MAX_POINTS`] values is reduced to that many equally likely values, the
    /// midpoint quantiles of equal-probability bins.
    pub fn from_sample(values: &[f64]) -> Result<Self, String> {
        if values.len() < 2 {
            return Err(format!("a sample needs at least 2 values, not {}", values.len()));
        }
        if let Some(bad) = values.iter().find(|v| !v.is_finite() || **v < 0.0) {
            return Err(format!("every value must be a non-negative number, not {bad}"));
        }
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        if sorted.len() <= Self::MAX_POINTS {
            return Self::new(sorted, true);
        }
        let points = Self::MAX_POINTS;
        let last = (sorted.len() - 1) as f64;
        let reduced = (0..points)
            .map(|k| {
                let h = last * (k as f64 + 0.5) / points as f64;
                let low = h.floor() as usize;
                let high = (low + 1).min(sorted.len() - 1);
                sorted[low] + (h - low as f64) * (sorted[high] - sorted[low])
            })
            .collect();
        Self::new(reduced, true)
    }

    /// From a piecewise-linear CDF through `knots` (value, cumulative probability):
    /// values and probabilities non-decreasing, from probability 0 to 1 — a histogram
    /// with linear interpolation inside each bucket, or a few quantiles.
    pub fn from_cdf(knots: &[(f64, f64)]) -> Result<Self, String> {
        if knots.len() < 2 {
            return Err("a CDF needs at least two points".into());
        }
        for pair in knots.windows(2) {
            let ((v0, p0), (v1, p1)) = (pair[0], pair[1]);
            if v1 < v0 || p1 < p0 {
                return Err(format!("the CDF must not decrease: ({v0}, {p0}) is followed by ({v1}, {p1})"));
            }
        }
        let (first, last) = (knots[0], knots[knots.len() - 1]);
        if first.1 != 0.0 || (last.1 - 1.0).abs() > 1e-12 || first.0 < 0.0 || !last.0.is_finite() {
            return Err(format!(
                "a CDF must run from probability 0 to 1 over finite non-negative values, not {first:?} to {last:?}"
            ));
        }
        let points = Self::MAX_POINTS;
        let mut values = Vec::with_capacity(points);
        let mut segment = 0;
        for k in 0..points {
            let p = k as f64 / (points - 1) as f64;
            // The first knot whose probability reaches p ends the segment holding p.
            while segment + 1 < knots.len() - 1 && knots[segment + 1].1 < p {
                segment += 1;
            }
            let ((v0, p0), (v1, p1)) = (knots[segment], knots[segment + 1]);
            let value = if p1 > p0 { v0 + (v1 - v0) * ((p - p0) / (p1 - p0)).clamp(0.0, 1.0) } else { v1 };
            values.push(value);
        }
        Self::new(values, false)
    }

    fn new(values: Vec<f64>, discrete: bool) -> Result<Self, String> {
        debug_assert!(values.windows(2).all(|w| w[0] <= w[1]), "a quantile table is sorted");
        debug_assert!((2..=Self::MAX_POINTS).contains(&values.len()));
        debug_assert!(values.iter().all(|v| v.is_finite() && *v >= 0.0));
        let span = if discrete { values.len() } else { values.len() - 1 } as f64;
        Ok(QuantileTable { values: values.into_boxed_slice(), discrete, span })
    }

    /// The values on the probability grid.
    pub fn values(&self) -> &[f64] {
        &self.values
    }

    /// Whether the table is a sample's empirical distribution (drawn value by value).
    pub fn is_discrete(&self) -> bool {
        self.discrete
    }

    /// The `p` quantile (0 ≤ p ≤ 1): for a sample the smallest value with at least
    /// that share at or below it (type 1), else interpolated.
    pub fn quantile(&self, p: f64) -> f64 {
        let n = self.values.len();
        if self.discrete {
            let rank = (p.clamp(0.0, 1.0) * n as f64).ceil() as usize;
            return self.values[rank.clamp(1, n) - 1];
        }
        let x = p.clamp(0.0, 1.0) * (self.values.len() - 1) as f64;
        let low = (x as usize).min(self.values.len() - 2);
        let fraction = x - low as f64;
        self.values[low] + fraction * (self.values[low + 1] - self.values[low])
    }

    /// E[X]: the sample mean, or for the piecewise-linear inverse CDF each segment's
    /// midpoint.
    pub fn mean(&self) -> f64 {
        if self.discrete {
            return self.values.iter().sum::<f64>() / self.values.len() as f64;
        }
        let segments = (self.values.len() - 1) as f64;
        self.values.windows(2).map(|w| (w[0] + w[1]) / 2.0).sum::<f64>() / segments
    }

    /// E[X²]: on a segment from a to b, the mean of x² for x uniform is (a² + ab + b²)/3.
    pub fn second_moment(&self) -> f64 {
        if self.discrete {
            return self.values.iter().map(|v| v * v).sum::<f64>() / self.values.len() as f64;
        }
        let segments = (self.values.len() - 1) as f64;
        self.values.windows(2).map(|w| (w[0] * w[0] + w[0] * w[1] + w[1] * w[1]) / 3.0).sum::<f64>() / segments
    }

    #[inline]
    fn sample(&self, rng: &mut RngStream) -> f64 {
        let x = rng.uniform01() * self.span;
        // uniform01 < 1: for a sample the index is below n; on a grid below n − 1.
        let low = x as usize;
        if self.discrete {
            return self.values[low];
        }
        let fraction = x - x.floor();
        let pair = &self.values[low..low + 2];
        pair[0] + fraction * (pair[1] - pair[0])
    }
}

/// The shape of a duration before scale and shift.
#[derive(Clone, Debug, PartialEq)]
pub enum Shape {
    /// Always `value_s`.
    Constant {
        /// The value, seconds.
        value_s: f64,
    },
    /// Exponential: memoryless, scv 1.
    Exponential {
        /// The mean, seconds.
        mean_s: f64,
    },
    /// exp(N(mu, sigma²)), seconds.
    Lognormal {
        /// The mean of the logarithm (of seconds).
        mu: f64,
        /// The standard deviation of the logarithm.
        sigma: f64,
    },
    /// Gamma with shape k and scale θ (mean kθ, scv 1/k).
    Gamma {
        /// k.
        shape: f64,
        /// θ, seconds.
        scale_s: f64,
    },
    /// Weibull with shape k and scale λ: λ·(−ln U)^(1/k).
    Weibull {
        /// k.
        shape: f64,
        /// λ, seconds.
        scale_s: f64,
    },
    /// Two exponential phases chosen with probabilities p₁ and 1 − p₁, by their rates
    /// (per second).
    HyperExponential {
        /// The probability of the first phase.
        p1: f64,
        /// The first phase's rate, per second.
        rate1: f64,
        /// The second phase's rate, per second.
        rate2: f64,
    },
    /// A distribution from data, shared read-only by every replica.
    Table(Arc<QuantileTable>),
}

/// A random duration: `scale × shape + shift_s`.
#[derive(Clone, Debug, PartialEq)]
pub struct Distribution {
    /// The shape drawn from.
    pub shape: Shape,
    /// What a draw is multiplied by.
    pub scale: f64,
    /// What is added after scaling, seconds.
    pub shift_s: f64,
}

impl Distribution {
    /// `shape` unscaled and unshifted.
    pub fn new(shape: Shape) -> Self {
        Distribution { shape, scale: 1.0, shift_s: 0.0 }
    }

    /// With `scale` and `shift_s` applied on top of any already set.
    pub fn adjusted(mut self, scale: f64, shift_s: f64) -> Self {
        debug_assert!(scale > 0.0 && scale.is_finite() && shift_s >= 0.0 && shift_s.is_finite());
        self.shift_s = self.shift_s * scale + shift_s;
        self.scale *= scale;
        self
    }

    /// A lognormal with this mean and squared coefficient of variation.
    pub fn lognormal_mean_scv(mean_s: f64, scv: f64) -> Self {
        let sigma2 = (1.0 + scv).ln();
        Self::new(Shape::Lognormal { mu: mean_s.ln() - sigma2 / 2.0, sigma: sigma2.sqrt() })
    }

    /// A gamma with this mean and squared coefficient of variation (shape 1/scv).
    pub fn gamma_mean_scv(mean_s: f64, scv: f64) -> Self {
        Self::new(Shape::Gamma { shape: 1.0 / scv, scale_s: mean_s * scv })
    }

    /// A balanced-means two-phase hyperexponential (p₁/μ₁ = p₂/μ₂) with this mean and
    /// scv ≥ 1.
    pub fn hyperexponential_mean_scv(mean_s: f64, scv: f64) -> Self {
        let p1 = 0.5 * (1.0 + ((scv - 1.0) / (scv + 1.0)).sqrt());
        // Phase i has mean mean / (2pᵢ): both phases contribute half the mean.
        Self::new(Shape::HyperExponential { p1, rate1: 2.0 * p1 / mean_s, rate2: 2.0 * (1.0 - p1) / mean_s })
    }

    /// One draw, in seconds.
    #[inline]
    pub fn sample_s(&self, rng: &mut RngStream) -> f64 {
        let x = match &self.shape {
            Shape::Constant { value_s } => *value_s,
            // The same arithmetic as the models had before this type, draw for draw.
            Shape::Exponential { mean_s } => mean_s * rng.standard_exponential(),
            Shape::Lognormal { mu, sigma } => rng.lognormal(*mu, *sigma),
            Shape::Gamma { shape, scale_s } => scale_s * standard_gamma(rng, *shape),
            Shape::Weibull { shape, scale_s } => scale_s * (-rng.uniform_open01().ln()).powf(1.0 / shape),
            Shape::HyperExponential { p1, rate1, rate2 } => {
                let rate = if rng.bernoulli(*p1) { *rate1 } else { *rate2 };
                rng.exponential(rate)
            }
            Shape::Table(table) => table.sample(rng),
        };
        let value = self.shift_s + self.scale * x;
        debug_assert!(value.is_finite() && value >= self.shift_s, "a duration draw {value}");
        value
    }

    /// The value every draw gives, in integer nanoseconds, when the distribution is a
    /// constant (its draws read no random number): a hot loop can take it once instead
    /// of drawing per event.
    pub fn fixed_nanos(&self) -> Option<Nanos> {
        match self.shape {
            Shape::Constant { value_s } => {
                Some(round_to_nanos((self.shift_s + self.scale * value_s) * NANOS_PER_SEC as f64))
            }
            _ => None,
        }
    }

    /// One draw, in integer nanoseconds.
    #[inline]
    pub fn sample(&self, rng: &mut RngStream) -> Nanos {
        round_to_nanos(self.sample_s(rng) * NANOS_PER_SEC as f64)
    }

    /// E[X] in seconds.
    pub fn mean_s(&self) -> f64 {
        let raw = match &self.shape {
            Shape::Constant { value_s } => *value_s,
            Shape::Exponential { mean_s } => *mean_s,
            Shape::Lognormal { mu, sigma } => (mu + sigma * sigma / 2.0).exp(),
            Shape::Gamma { shape, scale_s } => shape * scale_s,
            Shape::Weibull { shape, scale_s } => scale_s * gamma_function(1.0 + 1.0 / shape),
            Shape::HyperExponential { p1, rate1, rate2 } => p1 / rate1 + (1.0 - p1) / rate2,
            Shape::Table(table) => table.mean(),
        };
        self.shift_s + self.scale * raw
    }

    /// E[X²] in seconds².
    pub fn second_moment_s2(&self) -> f64 {
        let raw2 = match &self.shape {
            Shape::Constant { value_s } => value_s * value_s,
            Shape::Exponential { mean_s } => 2.0 * mean_s * mean_s,
            Shape::Lognormal { mu, sigma } => (2.0 * mu + 2.0 * sigma * sigma).exp(),
            Shape::Gamma { shape, scale_s } => shape * (shape + 1.0) * scale_s * scale_s,
            Shape::Weibull { shape, scale_s } => scale_s * scale_s * gamma_function(1.0 + 2.0 / shape),
            Shape::HyperExponential { p1, rate1, rate2 } => 2.0 * (p1 / (rate1 * rate1) + (1.0 - p1) / (rate2 * rate2)),
            Shape::Table(table) => table.second_moment(),
        };
        let (mean, a, b) = (self.mean_s(), self.shift_s, self.scale);
        // E[(a + bX)²] = a² + 2ab·E[X] + b²·E[X²], with E[X] = (mean − a)/b.
        let raw_mean = if b > 0.0 { (mean - a) / b } else { 0.0 };
        a * a + 2.0 * a * b * raw_mean + b * b * raw2
    }

    /// Var[X] / E[X]².
    pub fn scv(&self) -> f64 {
        let mean = self.mean_s();
        (self.second_moment_s2() - mean * mean).max(0.0) / (mean * mean)
    }
}

/// Gamma(k, 1) by Marsaglia & Tsang (2000), "A simple method for generating gamma
/// variables"; for k < 1, Gamma(k + 1)·U^(1/k).
#[inline]
fn standard_gamma(rng: &mut RngStream, k: f64) -> f64 {
    debug_assert!(k > 0.0 && k.is_finite(), "gamma shape {k}");
    if k < 1.0 {
        let boost = rng.uniform_open01().powf(1.0 / k);
        return standard_gamma(rng, k + 1.0) * boost;
    }
    let d = k - 1.0 / 3.0;
    let c = 1.0 / (9.0 * d).sqrt();
    loop {
        let x = rng.standard_normal();
        let v = 1.0 + c * x;
        if v <= 0.0 {
            continue;
        }
        let v = v * v * v;
        let u = rng.uniform_open01();
        if u.ln() < 0.5 * x * x + d - d * v + d * v.ln() {
            return d * v;
        }
    }
}

/// Γ(x) for x > 0 by the Lanczos approximation (g = 7, 9 terms; relative error below
/// 1e-13), for the Weibull's moments.
pub fn gamma_function(x: f64) -> f64 {
    const G: f64 = 7.0;
    const C: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        return std::f64::consts::PI / ((std::f64::consts::PI * x).sin() * gamma_function(1.0 - x));
    }
    let x = x - 1.0;
    let mut sum = C[0];
    for (i, c) in C.iter().enumerate().skip(1) {
        sum += c / (x + i as f64);
    }
    let t = x + G + 0.5;
    (2.0 * std::f64::consts::PI).sqrt() * t.powf(x + 0.5) * (-t).exp() * sum
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::rng::StreamPurpose;

    const TEST: StreamPurpose = StreamPurpose::named("test.distribution");

    fn draws(distribution: &Distribution, n: usize, seed: u64) -> Vec<f64> {
        let mut rng = RngStream::derive(seed, 0, TEST);
        (0..n).map(|_| distribution.sample_s(&mut rng)).collect()
    }

    fn mean_and_scv(values: &[f64]) -> (f64, f64) {
        let n = values.len() as f64;
        let mean = values.iter().sum::<f64>() / n;
        let var = values.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / (n - 1.0);
        (mean, var / (mean * mean))
    }

    /// Every parametric shape: the sample's mean and scv match the closed forms the
    /// models are validated with (200,000 draws: the mean within 1%, scv within 4%).
    #[test]
    fn parametric_draws_match_their_moments() {
        let weibull = Distribution::new(Shape::Weibull { shape: 0.8, scale_s: 0.1 });
        let cases = [
            ("exponential", Distribution::new(Shape::Exponential { mean_s: 0.2 })),
            ("lognormal", Distribution::lognormal_mean_scv(0.2, 4.0)),
            ("gamma k=4", Distribution::gamma_mean_scv(0.2, 0.25)),
            ("gamma k=0.5", Distribution::gamma_mean_scv(0.2, 2.0)),
            ("weibull", weibull),
            ("hyperexponential", Distribution::hyperexponential_mean_scv(0.2, 4.0)),
        ];
        for (name, distribution) in cases {
            let values = draws(&distribution, 200_000, 11);
            let (mean, scv) = mean_and_scv(&values);
            let (want_mean, want_scv) = (distribution.mean_s(), distribution.scv());
            assert!((mean / want_mean - 1.0).abs() < 0.01, "{name}: mean {mean} vs {want_mean}");
            // The lognormal's sample variance converges slowly (heavy tail): 10%.
            let tolerance = if name == "lognormal" { 0.10 } else { 0.04 };
            assert!((scv / want_scv - 1.0).abs() < tolerance, "{name}: scv {scv} vs {want_scv}");
            assert!(values.iter().all(|v| v.is_finite() && *v >= 0.0), "{name}");
        }
        // Weibull with shape 1 is the exponential; Γ(1 + 2) = 2.
        let exp = Distribution::new(Shape::Weibull { shape: 1.0, scale_s: 0.5 });
        assert!((exp.mean_s() - 0.5).abs() < 1e-12 && (exp.scv() - 1.0).abs() < 1e-12);
        assert!(
            (gamma_function(5.0) - 24.0).abs() < 1e-10
                && (gamma_function(0.5) - std::f64::consts::PI.sqrt()).abs() < 1e-12
        );
    }

    /// A constant's fixed value is what every draw gives, scale and shift included, and
    /// taking it reads no random number; a random shape has none.
    #[test]
    fn a_constant_s_fixed_value_is_its_draw() {
        for (value_s, scale, shift_s) in [(0.0001, 1.0, 0.0), (0.0, 1.0, 0.0), (0.25, 1.5, 0.01), (1e-10, 3.0, 0.0)] {
            let constant = Distribution::new(Shape::Constant { value_s }).adjusted(scale, shift_s);
            let mut rng = RngStream::derive(5, 0, TEST);
            let drawn = constant.sample(&mut rng);
            assert_eq!(constant.fixed_nanos(), Some(drawn), "{value_s}·{scale} + {shift_s}");
            // No number was consumed: the stream is where a fresh one starts.
            assert_eq!(rng.next_u64(), RngStream::derive(5, 0, TEST).next_u64());
        }
        assert_eq!(Distribution::new(Shape::Exponential { mean_s: 0.1 }).fixed_nanos(), None);
    }

    /// Scale and shift: X·1.5 + 0.01 has mean 1.5·E[X] + 0.01 and the draws say so.
    #[test]
    fn scale_and_shift_move_the_draws_and_the_moments() {
        let base = Distribution::new(Shape::Exponential { mean_s: 0.1 });
        let slower = base.clone().adjusted(1.5, 0.01);
        assert!((slower.mean_s() - 0.16).abs() < 1e-12);
        let want_second = 0.01 * 0.01 + 2.0 * 0.01 * 1.5 * 0.1 + 1.5 * 1.5 * 0.02;
        assert!((slower.second_moment_s2() - want_second).abs() < 1e-12);
        let (a, b) = (draws(&base, 1000, 3), draws(&slower, 1000, 3));
        for (x, y) in a.iter().zip(&b) {
            assert!((y - (0.01 + 1.5 * x)).abs() < 1e-12, "same uniforms, transformed");
        }
    }

    /// A table from a sample is the sample's empirical distribution: its quantiles
    /// are the sample's (type 1), its moments the sample's, and draws hit every value
    /// equally often (a chi-square test over 1,000 values at 20 expected draws each,
    /// for each of five seeds, within four standard deviations of its mean 999); a
    /// sample larger than the table keeps its ends and quantiles.
    #[test]
    fn tables_from_samples_reproduce_their_quantiles() {
        let sample: Vec<f64> = (0..1000).rev().map(|i| (f64::from(i) / 999.0).powi(3)).collect();
        let table = QuantileTable::from_sample(&sample).unwrap();
        assert!(table.is_discrete() && table.values().len() == 1000);
        assert_eq!((table.quantile(0.0), table.quantile(1.0)), (0.0, 1.0));
        assert_eq!(table.quantile(0.5), (499.0f64 / 999.0).powi(3), "the 500th smallest");
        let mean = sample.iter().sum::<f64>() / 1000.0;
        assert!((table.mean() - mean).abs() < 1e-15);
        let distribution = Distribution::new(Shape::Table(Arc::new(table.clone())));
        for seed in 0..5 {
            let mut counts = std::collections::BTreeMap::new();
            for value in draws(&distribution, 20_000, seed) {
                *counts.entry(value.to_bits()).or_insert(0u32) += 1;
            }
            assert_eq!(counts.len(), 1000, "seed {seed}: every value drawn");
            let chi2: f64 = counts.values().map(|&c| (f64::from(c) - 20.0).powi(2) / 20.0).sum();
            assert!((chi2 - 999.0).abs() < 4.0 * 44.7, "seed {seed}: chi-square {chi2} with 999 degrees of freedom");
        }
        let big: Vec<f64> = (0..100_000).map(|i| f64::from(i) * 1e-6).collect();
        let reduced = QuantileTable::from_sample(&big).unwrap();
        assert_eq!(reduced.values().len(), QuantileTable::MAX_POINTS);
        assert!(reduced.quantile(0.0) < 2e-5 && reduced.quantile(1.0) > 0.09998, "the ends stay");
        assert!((reduced.quantile(0.9) - 0.09).abs() < 1e-4);
        assert!((reduced.mean() - 0.05).abs() < 1e-6);
    }

    /// A CDF table (a histogram, linear inside each bucket) puts each bucket's share
    /// of the draws into the bucket.
    #[test]
    fn tables_from_a_cdf_keep_each_buckets_share() {
        // 50% in [0, 0.1], 40% in (0.1, 0.5], 10% in (0.5, 2].
        let table = QuantileTable::from_cdf(&[(0.0, 0.0), (0.1, 0.5), (0.5, 0.9), (2.0, 1.0)]).unwrap();
        assert!((table.quantile(0.5) - 0.1).abs() < 1e-9 && (table.quantile(0.95) - 1.25).abs() < 1e-3);
        let distribution = Distribution::new(Shape::Table(Arc::new(table)));
        let values = draws(&distribution, 100_000, 5);
        let share = |lo: f64, hi: f64| values.iter().filter(|v| **v > lo && **v <= hi).count() as f64 / 1e5;
        // Three standard errors of a share of 100,000 draws are below 0.005.
        for (lo, hi, want) in [(-1.0, 0.1, 0.5), (0.1, 0.5, 0.4), (0.5, 2.0, 0.1)] {
            assert!((share(lo, hi) - want).abs() < 0.005, "({lo}, {hi}]: {}", share(lo, hi));
        }
        assert!(QuantileTable::from_cdf(&[(0.0, 0.0), (0.2, 0.6), (0.1, 1.0)])
            .unwrap_err()
            .contains("must not decrease"));
        assert!(QuantileTable::from_cdf(&[(0.0, 0.1), (0.2, 1.0)]).is_err(), "must start at probability 0");
        assert!(QuantileTable::from_sample(&[1.0, f64::NAN]).unwrap_err().contains("non-negative number"));
    }
}
