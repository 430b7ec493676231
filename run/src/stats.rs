//! Replica statistics: a metric's [`Summary`] (mean, sd, 95% Student-t interval) and
//! the t and normal quantiles behind it. The mean and variance themselves are folded
//! exactly by `moments.rs`, so every float of a summary is identical whatever thread ran
//! which replica and however the run was split. The t quantile comes from `statrs` (its
//! inverse CDF is accurate to ~1e-9), checked here against published table values.

use statrs::distribution::{ContinuousCDF, StudentsT};

/// The `p` quantile (0 < p < 1) of Student's t with `degrees_of_freedom` (≥ 1): the
/// one-sided and two-sided intervals at any confidence (`optimize`'s).
pub fn t_quantile(p: f64, degrees_of_freedom: u64) -> f64 {
    assert!(p > 0.0 && p < 1.0 && degrees_of_freedom >= 1, "t quantile of p = {p} with {degrees_of_freedom} df");
    if degrees_of_freedom >= 1000 {
        // statrs' inversion drifts for huge ν (see t_quantile_975); the normal is within 1e-3 there.
        return normal_quantile(p) * (1.0 + 1.0 / (4.0 * degrees_of_freedom as f64));
    }
    StudentsT::new(0.0, 1.0, degrees_of_freedom as f64).expect("valid parameters").inverse_cdf(p)
}

/// The `p` quantile (0 < p < 1) of the standard normal.
pub fn normal_quantile(p: f64) -> f64 {
    assert!(p > 0.0 && p < 1.0, "normal quantile of p = {p}");
    statrs::distribution::Normal::new(0.0, 1.0).expect("valid parameters").inverse_cdf(p)
}

/// A metric summarised over replicas.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Summary {
    pub mean: f64,
    pub sd: f64,
    pub ci_lo: f64,
    pub ci_hi: f64,
}

impl Summary {
    /// `mean` and `sd` of `count` ≥ 2 values with the 95% Student-t interval of the mean.
    pub fn with_interval(mean: f64, sd: f64, count: u64) -> Summary {
        debug_assert!(count >= 2);
        let half_width = t_quantile_975(count - 1) * sd / (count as f64).sqrt();
        Summary { mean, sd, ci_lo: mean - half_width, ci_hi: mean + half_width }
    }
}

/// The 0.975 quantile of the standard normal.
const Z_975: f64 = 1.959_963_984_540_054;

/// The Wilson score bounds of `successes` out of `n` at normal quantile `z` (1.96
/// for a two-sided 95% interval; `normal_quantile(level)` for one-sided bounds at
/// `level`): (lower, upper), within [0, 1]. With no trials nothing is known: (0, 1).
pub fn wilson(successes: usize, n: usize, z: f64) -> (f64, f64) {
    debug_assert!(successes <= n, "{successes} successes of {n}");
    if n == 0 {
        return (0.0, 1.0);
    }
    let (n, p) = (n as f64, successes as f64 / n as f64);
    let z2 = z * z;
    let centre = (p + z2 / (2.0 * n)) / (1.0 + z2 / n);
    let half = z / (1.0 + z2 / n) * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt();
    ((centre - half).max(0.0), (centre + half).min(1.0))
}

/// The 0.975 quantile of Student's t with `degrees_of_freedom` (≥ 1).
///
/// Below 1,000 degrees of freedom it is statrs' inverse CDF. From 1,000 on it is the
/// Cornish–Fisher expansion around the normal quantile (error below 1e-11 there),
/// because statrs' numerical inversion loses accuracy for very large ν (it returns
/// 1.83 instead of 1.96 at ν = 10^7).
pub fn t_quantile_975(degrees_of_freedom: u64) -> f64 {
    assert!(degrees_of_freedom >= 1, "t quantile needs at least one degree of freedom");
    if degrees_of_freedom < 1000 {
        return StudentsT::new(0.0, 1.0, degrees_of_freedom as f64).expect("valid parameters").inverse_cdf(0.975);
    }
    let nu = degrees_of_freedom as f64;
    let z = Z_975;
    let (z3, z5, z7) = (z.powi(3), z.powi(5), z.powi(7));
    z + (z3 + z) / (4.0 * nu)
        + (5.0 * z5 + 16.0 * z3 + 3.0 * z) / (96.0 * nu * nu)
        + (3.0 * z7 + 19.0 * z5 + 17.0 * z3 - 15.0 * z) / (384.0 * nu * nu * nu)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::moments::Moments;

    #[test]
    fn quantiles_at_any_level_match_published_tables() {
        // t(0.95, 10) = 1.812, t(0.99, 20) = 2.528, t(0.975, 5) = 2.571; z(0.95) = 1.645.
        for (p, df, table) in [(0.95, 10, 1.812), (0.99, 20, 2.528), (0.975, 5, 2.571), (0.95, 5000, 1.645)] {
            assert!((t_quantile(p, df) - table).abs() < 1e-3, "t({p}, {df}) = {}", t_quantile(p, df));
        }
        assert!((normal_quantile(0.95) - 1.644_854).abs() < 1e-6);
        assert!((t_quantile(0.975, 40) - t_quantile_975(40)).abs() < 1e-9);
    }

    #[test]
    fn t_quantiles_match_published_tables() {
        for (df, want) in [(1, 12.7062), (2, 4.3027), (5, 2.5706), (10, 2.2281), (30, 2.0423), (120, 1.9799)] {
            let got = t_quantile_975(df);
            assert!((got - want).abs() < 5e-4, "df {df}: {got} vs {want}");
        }
        // Both sides of the switch to the expansion agree with the table to 1e-6.
        assert!((t_quantile_975(999) - 1.962_341).abs() < 1e-6, "{}", t_quantile_975(999));
        assert!((t_quantile_975(1000) - 1.962_339).abs() < 1e-6, "{}", t_quantile_975(1000));
        assert!((t_quantile_975(1_000_000) - 1.959_966_357).abs() < 1e-9);
        assert!((t_quantile_975(u32::MAX as u64) - super::Z_975).abs() < 1e-9);
    }

    #[test]
    fn moments_match_the_two_pass_formula() {
        let xs = [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0];
        let mut w = Moments::default();
        xs.iter().for_each(|&x| w.push(x));
        let s = w.summary();
        assert_eq!(s.mean, 5.0);
        let sd = (32.0f64 / 7.0).sqrt();
        assert!((s.sd - sd).abs() < 1e-12);
        let half = 2.364624 * sd / 8f64.sqrt(); // t(0.975, 7)
        assert!((s.ci_hi - 5.0 - half).abs() < 1e-5, "{s:?}");
        assert!((5.0 - s.ci_lo - half).abs() < 1e-5);
    }

    #[test]
    fn one_observation_has_no_interval() {
        let mut w = Moments::default();
        w.push(3.0);
        let s = w.summary();
        assert_eq!(s.mean, 3.0);
        assert!(s.sd.is_nan() && s.ci_lo.is_nan() && s.ci_hi.is_nan());
    }

    #[test]
    fn coverage_of_the_interval_is_95_percent() {
        // 2,000 intervals from samples of 5 standard normals: about 1,900 should
        // cover zero (binomial sd ≈ 9.7, so ±40 is over 4 sd).
        let mut rng = stampede_engine::RngStream::derive(1, 0, stampede_engine::StreamPurpose::named("test.ci"));
        let covered = (0..2000)
            .filter(|_| {
                let mut w = Moments::default();
                (0..5).for_each(|_| w.push(rng.standard_normal()));
                let s = w.summary();
                s.ci_lo <= 0.0 && 0.0 <= s.ci_hi
            })
            .count();
        assert!((1860..=1940).contains(&covered), "{covered}");
    }
}
