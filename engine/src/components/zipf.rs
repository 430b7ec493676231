//! Zipf-distributed keys: key `k` (0-based) of `n` is drawn with probability
//! proportional to `1 / (k + 1)^s` — the popularity law of cache workloads (web objects,
//! video, key-value stores). Drawn by inverting a cumulative table built once (one
//! uniform draw and a binary search per key), so values stay portable across crate
//! versions.
//!
//! Invariants: the table rises strictly to exactly 1.

use std::sync::Arc;

use crate::kernel::rng::RngStream;

/// Zipf(`s`) over `n` keys.
#[derive(Clone, Debug, PartialEq)]
pub struct Zipf {
    cdf: Arc<[f64]>,
    exponent: f64,
}

impl Zipf {
    /// The table for `n ≥ 1` keys and exponent `s ≥ 0` (0: uniform).
    pub fn new(n: u64, s: f64) -> Self {
        assert!(n >= 1 && s >= 0.0 && s.is_finite());
        let weights: Vec<f64> = (1..=n).map(|k| (k as f64).powf(-s)).collect();
        let total: f64 = weights.iter().sum();
        let mut running = 0.0;
        let mut cdf: Vec<f64> = weights
            .iter()
            .map(|w| {
                running += w;
                running / total
            })
            .collect();
        *cdf.last_mut().expect("n >= 1") = 1.0;
        Zipf { cdf: cdf.into(), exponent: s }
    }

    /// Keys.
    pub fn keys(&self) -> u64 {
        self.cdf.len() as u64
    }

    /// The exponent.
    pub fn exponent(&self) -> f64 {
        self.exponent
    }

    /// The probability of key `k`.
    pub fn probability(&self, k: u64) -> f64 {
        let k = k as usize;
        self.cdf[k] - if k == 0 { 0.0 } else { self.cdf[k - 1] }
    }

    /// One key.
    #[inline]
    pub fn sample(&self, rng: &mut RngStream) -> u64 {
        let u = rng.uniform01();
        self.cdf.partition_point(|&c| c <= u).min(self.cdf.len() - 1) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_follow_the_law() {
        let zipf = Zipf::new(100, 1.0);
        let mut rng = RngStream::derive(1, 0, crate::kernel::rng::StreamPurpose::named("test.zipf"));
        let mut counts = [0u64; 100];
        let draws = 400_000;
        for _ in 0..draws {
            counts[zipf.sample(&mut rng) as usize] += 1;
        }
        for k in [0, 1, 9, 99] {
            let expected = zipf.probability(k) * draws as f64;
            let sd = expected.sqrt();
            assert!(
                (counts[k as usize] as f64 - expected).abs() < 4.0 * sd,
                "key {k}: {} vs {expected}",
                counts[k as usize]
            );
        }
        assert!((zipf.probability(0) / zipf.probability(1) - 2.0).abs() < 1e-12, "1/1 against 1/2");
    }

    #[test]
    fn exponent_zero_is_uniform() {
        let zipf = Zipf::new(4, 0.0);
        assert!((0..4).all(|k| (zipf.probability(k) - 0.25).abs() < 1e-12));
    }
}
