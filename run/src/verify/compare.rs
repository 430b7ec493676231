//! The statistics of `stampede compare`: did a change alter the simulated behaviour?
//! For one metric at one grid point of two runs, the difference of the means with its
//! 95% interval — paired on replica indices when both runs used the same seed (common
//! random numbers: the same replica index draws the same streams), Welch's otherwise —
//! with its p-value, a Mann–Whitney rank test on the per-replica values, and the Holm
//! correction that keeps the chance of any false alarm across every (point, metric)
//! pair at `alpha`.
//!
//! Pure functions of the values: the report crate reads the folders and draws the page.

use statrs::distribution::{ContinuousCDF, Normal, StudentsT};

/// Two runs' per-replica values of one metric at one grid point, by replica index.
#[derive(Clone, Debug, Default)]
pub struct Pair {
    pub a: Vec<(u64, f64)>,
    pub b: Vec<(u64, f64)>,
}

/// How the means of A and B differ.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Difference {
    /// Replicas with a defined value on each side, of `replicas_a` and `replicas_b`.
    pub n_a: usize,
    pub n_b: usize,
    pub replicas_a: usize,
    pub replicas_b: usize,
    pub mean_a: f64,
    pub mean_b: f64,
    /// `mean_b − mean_a`, and its 95% interval.
    pub diff: f64,
    pub lo: f64,
    pub hi: f64,
    /// Paired on replica indices (both runs drew the same streams per index).
    pub paired: bool,
    /// Two-sided p-value of "the means are equal" (paired t or Welch t); NaN when untestable.
    pub p_mean: f64,
    /// Two-sided p-value of the Mann–Whitney rank test on the per-replica values.
    pub p_rank: f64,
}

fn mean(values: &[f64]) -> f64 {
    values.iter().sum::<f64>() / values.len() as f64
}

fn variance(values: &[f64], mean: f64) -> f64 {
    values.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / (values.len() as f64 - 1.0)
}

impl Difference {
    /// Either side's metric is defined in under half of its replicas.
    pub fn partial(&self) -> bool {
        self.n_a * 2 < self.replicas_a || self.n_b * 2 < self.replicas_b
    }
}

/// Two-sided p-value and 97.5% quantile of Student's t with `df` degrees of freedom
/// for the statistic `t`.
fn t_test(t: f64, df: f64) -> (f64, f64) {
    let dist = StudentsT::new(0.0, 1.0, df.max(1.0)).expect("positive degrees of freedom");
    (2.0 * (1.0 - dist.cdf(t.abs())), dist.inverse_cdf(0.975))
}

/// A statistic of spread zero: equal means are certainly equal, different ones certainly not.
fn degenerate(diff: f64) -> f64 {
    if diff == 0.0 {
        1.0
    } else {
        0.0
    }
}

impl Pair {
    /// The difference of B from A. Paired when `paired` and both runs hold the same
    /// replica indices; NaN values (an undefined metric) are left out (a pair with one
    /// NaN side entirely).
    pub fn difference(&self, paired: bool) -> Difference {
        let finite = |side: &[(u64, f64)]| side.iter().filter(|(_, v)| !v.is_nan()).copied().collect::<Vec<_>>();
        let (a, b) = (finite(&self.a), finite(&self.b));
        let same_indices = self.a.len() == self.b.len() && self.a.iter().zip(&self.b).all(|(x, y)| x.0 == y.0);
        let values = |side: &[(u64, f64)]| side.iter().map(|(_, v)| *v).collect::<Vec<f64>>();
        let (va, vb) = (values(&a), values(&b));
        let p_rank = mann_whitney(&va, &vb);
        let (mean_a, mean_b) = (mean(&va), mean(&vb));
        let mut d = Difference {
            n_a: va.len(),
            n_b: vb.len(),
            replicas_a: self.a.len(),
            replicas_b: self.b.len(),
            mean_a,
            mean_b,
            diff: mean_b - mean_a,
            lo: f64::NAN,
            hi: f64::NAN,
            paired: paired && same_indices,
            p_mean: f64::NAN,
            p_rank,
        };
        if d.partial() {
            // A metric defined in under half the replicas (a recovery time where most
            // never recovered) says little about the rest: not tested.
            d.p_rank = f64::NAN;
            return d;
        }
        if d.paired {
            let diffs: Vec<f64> = self
                .a
                .iter()
                .zip(&self.b)
                .filter(|((_, x), (_, y))| !x.is_nan() && !y.is_nan())
                .map(|((_, x), (_, y))| y - x)
                .collect();
            if diffs.len() < 2 {
                return d;
            }
            let m = mean(&diffs);
            let se = (variance(&diffs, m) / diffs.len() as f64).sqrt();
            d.diff = m;
            if se == 0.0 {
                (d.lo, d.hi, d.p_mean) = (m, m, degenerate(m));
            } else {
                let (p, q) = t_test(m / se, diffs.len() as f64 - 1.0);
                (d.lo, d.hi, d.p_mean) = (m - q * se, m + q * se, p);
            }
            return d;
        }
        if va.len() < 2 || vb.len() < 2 {
            return d;
        }
        let (sa, sb) = (variance(&va, mean_a) / va.len() as f64, variance(&vb, mean_b) / vb.len() as f64);
        let se = (sa + sb).sqrt();
        if se == 0.0 {
            (d.lo, d.hi, d.p_mean) = (d.diff, d.diff, degenerate(d.diff));
            return d;
        }
        // Welch–Satterthwaite degrees of freedom.
        let df = (sa + sb).powi(2)
            / (sa * sa / (va.len() as f64 - 1.0) + sb * sb / (vb.len() as f64 - 1.0)).max(f64::MIN_POSITIVE);
        let (p, q) = t_test(d.diff / se, df);
        (d.lo, d.hi, d.p_mean) = (d.diff - q * se, d.diff + q * se, p);
        d
    }
}

/// Two-sided p-value of the Mann–Whitney U test (normal approximation with the tie
/// correction and a continuity correction); NaN with an empty side, 1 when every value
/// is tied.
pub fn mann_whitney(a: &[f64], b: &[f64]) -> f64 {
    let (n1, n2) = (a.len() as f64, b.len() as f64);
    if a.is_empty() || b.is_empty() {
        return f64::NAN;
    }
    let mut all: Vec<(f64, bool)> = a.iter().map(|&v| (v, true)).chain(b.iter().map(|&v| (v, false))).collect();
    all.sort_by(|x, y| x.0.total_cmp(&y.0));
    let (mut rank_sum_a, mut ties) = (0.0, 0.0);
    let mut i = 0;
    while i < all.len() {
        let mut j = i;
        while j + 1 < all.len() && all[j + 1].0 == all[i].0 {
            j += 1;
        }
        let tied = (j - i + 1) as f64;
        let rank = (i + j) as f64 / 2.0 + 1.0;
        rank_sum_a += rank * all[i..=j].iter().filter(|(_, from_a)| *from_a).count() as f64;
        ties += tied * tied * tied - tied;
        i = j + 1;
    }
    let u = rank_sum_a - n1 * (n1 + 1.0) / 2.0;
    let n = n1 + n2;
    let variance = n1 * n2 / 12.0 * ((n + 1.0) - ties / (n * (n - 1.0)));
    if variance <= 0.0 {
        return 1.0;
    }
    let z = ((u - n1 * n2 / 2.0).abs() - 0.5).max(0.0) / variance.sqrt();
    2.0 * (1.0 - Normal::new(0.0, 1.0).expect("the standard normal").cdf(z))
}

/// Holm's step-down correction: which of `p_values` are significant with the chance of
/// any false alarm among them at most `alpha`. NaN p-values are never significant.
pub fn holm(p_values: &[f64], alpha: f64) -> Vec<bool> {
    let mut order: Vec<usize> = (0..p_values.len()).filter(|&i| !p_values[i].is_nan()).collect();
    order.sort_by(|&x, &y| p_values[x].total_cmp(&p_values[y]));
    let m = order.len();
    let mut significant = vec![false; p_values.len()];
    for (rank, &i) in order.iter().enumerate() {
        if p_values[i] > alpha / (m - rank) as f64 {
            break;
        }
        significant[i] = true;
    }
    significant
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A metric defined in under half of a side's replicas is not tested (a recovery
    /// time where 1 of 10 replicas recovered); at half or more it is.
    #[test]
    fn a_metric_defined_in_under_half_the_replicas_is_not_compared() {
        let side = |defined: u64, value: f64| -> Vec<(u64, f64)> {
            (0..10).map(|i| (i, if i < defined { value + i as f64 * 0.01 } else { f64::NAN })).collect()
        };
        let d = Pair { a: side(10, 1.0), b: side(1, 5.0) }.difference(true);
        assert!(d.partial() && d.p_mean.is_nan() && d.p_rank.is_nan(), "{d:?}");
        assert_eq!((d.n_a, d.n_b, d.replicas_a, d.replicas_b), (10, 1, 10, 10));
        let d = Pair { a: side(10, 1.0), b: side(5, 5.0) }.difference(true);
        assert!(!d.partial() && d.p_mean < 0.01, "{d:?}");
    }

    fn indexed(values: &[f64]) -> Vec<(u64, f64)> {
        values.iter().enumerate().map(|(i, v)| (i as u64, *v)).collect()
    }

    /// Welch's interval and p against a hand computation: A = 1..5 (mean 3, var 2.5),
    /// B = 2..6 + 1 (mean 5, var 2.5): se = 1, df = 8, t = 2, p = 0.0805.
    #[test]
    fn welch_matches_a_hand_computation() {
        let pair = Pair { a: indexed(&[1.0, 2.0, 3.0, 4.0, 5.0]), b: indexed(&[3.0, 4.0, 5.0, 6.0, 7.0]) };
        let d = pair.difference(false);
        assert_eq!((d.diff, d.paired), (2.0, false));
        assert!((d.p_mean - 0.080_516).abs() < 1e-5, "{}", d.p_mean);
        let q = 2.306_004; // t(0.975, 8)
        assert!((d.lo - (2.0 - q)).abs() < 1e-5 && (d.hi - (2.0 + q)).abs() < 1e-5, "{d:?}");
    }

    /// Paired on the same indices, a constant shift is certain however noisy the values.
    #[test]
    fn a_paired_constant_shift_is_certain_and_identical_runs_are_not_different() {
        let a = [10.0, 3.0, 7.0, 1.0, 9.0];
        let b: Vec<f64> = a.iter().map(|v| v + 0.5).collect();
        let pair = Pair { a: indexed(&a), b: indexed(&b) };
        let paired = pair.difference(true);
        assert_eq!((paired.diff, paired.p_mean, paired.paired), (0.5, 0.0, true));
        assert!(pair.difference(false).p_mean > 0.5, "unpaired, the shift is lost in the noise");
        let same = Pair { a: indexed(&a), b: indexed(&a) };
        assert_eq!(same.difference(true).p_mean, 1.0);
        assert_eq!(same.difference(false).p_rank, mann_whitney(&a, &a));
    }

    /// Mann–Whitney: fully separated samples of 10 and 10 give U = 0, z = (50 − 0.5) /
    /// √175 = 3.742, p = 1.83e-4; all values tied give 1.
    #[test]
    fn mann_whitney_matches_the_normal_approximation() {
        let a: Vec<f64> = (0..10).map(f64::from).collect();
        let b: Vec<f64> = (10..20).map(f64::from).collect();
        assert!((mann_whitney(&a, &b) - 1.826e-4).abs() < 2e-6, "{}", mann_whitney(&a, &b));
        assert_eq!(mann_whitney(&[1.0; 4], &[1.0; 5]), 1.0);
    }

    #[test]
    fn holm_steps_down() {
        // m = 4 at alpha 0.05: 0.01 ≤ 0.0125, 0.015 ≤ 0.0167, 0.03 > 0.025 stops.
        assert_eq!(holm(&[0.03, 0.01, 0.5, 0.015], 0.05), vec![false, true, false, true]);
        // 0.02 > 0.0167 stops at the second.
        assert_eq!(holm(&[0.03, 0.01, 0.5, 0.02], 0.05), vec![false, true, false, false]);
        assert_eq!(holm(&[f64::NAN, 0.001], 0.05), vec![false, true]);
    }
}
