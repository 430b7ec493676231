//! How well a model's runs match what production measured over time, one metric at a
//! time (issue 50's fidelity report): the simulated mean and the replicas' band per
//! interval, and four figures over the intervals — MAPE, bias, correlation, and the
//! share of observed points inside the band — plus the discrepancy `calibrate`
//! minimises.
//!
//! Definitions (each counts only the intervals with both an observed value and at
//! least one replica's value):
//! * **band**: the replicas' 2.5th to 97.5th percentiles (linear interpolation between
//!   order statistics) — where one production interval should fall if the model is
//!   right, so about 95% of observed points lie inside it for a right model (a mean's
//!   confidence interval would shrink with replicas and flag every right model);
//! * **MAPE**: the mean of |simulated mean − observed| / |observed| over intervals
//!   whose observed value is not zero;
//! * **bias**: Σ (simulated mean − observed) / Σ |observed|: the signed share by which
//!   the model over- (positive) or under-states the metric;
//! * **correlation**: Pearson's, of simulated means and observed values (none with
//!   fewer than three intervals or a constant side);
//! * **discrepancy**: the mean of squared relative errors, (simulated mean −
//!   observed)² / scale², the scale being |observed| but at least 1% of the metric's
//!   mean |observed| — so an interval that measured 0 (an error rate) weighs as a
//!   small value, not as infinity. Squared, so one large miss costs more than several
//!   small ones; relative, so metrics in requests per second and in seconds weigh
//!   alike.

/// One metric's agreement.
#[derive(Clone, Debug, PartialEq)]
pub struct Fidelity {
    /// Intervals compared.
    pub points: usize,
    /// Per interval: the replicas' mean, band low and band high (`None`: no replica
    /// had a value then).
    pub mean: Vec<Option<f64>>,
    /// The band's low end, per interval.
    pub low: Vec<Option<f64>>,
    /// The band's high end, per interval.
    pub high: Vec<Option<f64>>,
    /// Mean absolute percentage error, as a fraction (0.05 = 5%).
    pub mape: Option<f64>,
    /// Signed relative bias, as a fraction.
    pub bias: Option<f64>,
    /// Pearson correlation of simulated means and observed values.
    pub correlation: Option<f64>,
    /// Share of compared intervals whose observed value lies inside the band.
    pub inside: Option<f64>,
    /// Mean squared relative error (the fit's objective for this metric).
    pub discrepancy: Option<f64>,
}

/// The `q` quantile of sorted `values` (linear interpolation between order statistics).
fn quantile(sorted: &[f64], q: f64) -> f64 {
    debug_assert!(!sorted.is_empty() && (0.0..=1.0).contains(&q));
    let rank = q * (sorted.len() - 1) as f64;
    let (below, above) = (rank.floor() as usize, rank.ceil() as usize);
    sorted[below] + (sorted[above] - sorted[below]) * (rank - below as f64)
}

/// Compares `observed` (one value per interval) with `replicas` (per replica, one
/// value per interval, aligned with `observed`).
pub fn fidelity(observed: &[Option<f64>], replicas: &[Vec<Option<f64>>]) -> Fidelity {
    debug_assert!(replicas.iter().all(|r| r.len() == observed.len()), "replicas aligned with the observed intervals");
    let intervals = observed.len();
    let (mut mean, mut low, mut high) = (vec![None; intervals], vec![None; intervals], vec![None; intervals]);
    let mut values = Vec::with_capacity(replicas.len());
    for t in 0..intervals {
        values.clear();
        values.extend(replicas.iter().filter_map(|r| r[t]));
        if values.is_empty() {
            continue;
        }
        values.sort_by(f64::total_cmp);
        mean[t] = Some(values.iter().sum::<f64>() / values.len() as f64);
        low[t] = Some(quantile(&values, 0.025));
        high[t] = Some(quantile(&values, 0.975));
    }
    // (observed, simulated mean, inside the band) of each compared interval.
    let pairs: Vec<(f64, f64, bool)> = (0..intervals)
        .filter_map(|t| {
            let (o, m) = (observed[t]?, mean[t]?);
            Some((o, m, (low[t]?..=high[t]?).contains(&o)))
        })
        .collect();
    let points = pairs.len();
    let n = points as f64;
    let nonzero: Vec<f64> = pairs.iter().filter(|p| p.0 != 0.0).map(|&(o, m, _)| (m - o).abs() / o.abs()).collect();
    let mape = (!nonzero.is_empty()).then(|| nonzero.iter().sum::<f64>() / nonzero.len() as f64);
    let observed_size: f64 = pairs.iter().map(|p| p.0.abs()).sum();
    let bias = (observed_size > 0.0).then(|| pairs.iter().map(|&(o, m, _)| m - o).sum::<f64>() / observed_size);
    let correlation = (points >= 3).then(|| pearson(&pairs)).flatten();
    let inside = (points > 0).then(|| pairs.iter().filter(|p| p.2).count() as f64 / n);
    let discrepancy = (points > 0).then(|| {
        let floor = 0.01 * observed_size / n;
        let squared = |&(o, m, _): &(f64, f64, bool)| {
            let scale = o.abs().max(floor);
            // A metric measured as zero throughout: absolute error.
            let scale = if scale > 0.0 { scale } else { 1.0 };
            ((m - o) / scale).powi(2)
        };
        pairs.iter().map(squared).sum::<f64>() / n
    });
    Fidelity { points, mean, low, high, mape, bias, correlation, inside, discrepancy }
}

fn pearson(pairs: &[(f64, f64, bool)]) -> Option<f64> {
    let n = pairs.len() as f64;
    let (mo, mm) = (pairs.iter().map(|p| p.0).sum::<f64>() / n, pairs.iter().map(|p| p.1).sum::<f64>() / n);
    let (mut cov, mut vo, mut vm) = (0.0, 0.0, 0.0);
    for &(o, m, _) in pairs {
        cov += (o - mo) * (m - mm);
        vo += (o - mo).powi(2);
        vm += (m - mm).powi(2);
    }
    (vo > 0.0 && vm > 0.0).then(|| cov / (vo * vm).sqrt())
}

#[cfg(test)]
mod tests {
    use super::*;
    use stampede_engine::{RngStream, StreamPurpose};

    /// `replicas` series of `intervals` normal values around `level(t)` (sd 1).
    fn normal_series(
        seed: u64,
        replicas: u64,
        intervals: usize,
        level: impl Fn(usize) -> f64,
    ) -> Vec<Vec<Option<f64>>> {
        (0..replicas)
            .map(|r| {
                let mut rng = RngStream::derive(seed, r, StreamPurpose::named("fidelity.test"));
                (0..intervals)
                    .map(|t| {
                        // Box–Muller from two uniforms.
                        let (u, v) = (rng.uniform_open01(), rng.uniform01());
                        Some(level(t) + (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos())
                    })
                    .collect()
            })
            .collect()
    }

    #[test]
    fn a_right_model_holds_about_95_percent_of_production_in_its_band_and_a_wrong_one_does_not() {
        let level = |t: usize| 10.0 + (t % 7) as f64;
        let replicas = normal_series(1, 200, 400, level);
        let production = normal_series(2, 1, 400, level).remove(0);
        let right = fidelity(&production, &replicas);
        assert_eq!(right.points, 400);
        let inside = right.inside.unwrap();
        // 400 Bernoulli(0.95) points: sd 1.1%; 0.90..0.99 is over three sds each way (this
        // seed: 0.9475). The correlation's expectation is √(4/5) ≈ 0.894 (the levels'
        // variance 4 against the noise's 1); the shifted production's share inside,
        // P(|Z + 3| < 1.96) ≈ 0.15, and its bias −3/16.
        assert!((0.90..=0.99).contains(&inside), "inside {inside}");
        assert!(right.correlation.unwrap() > 0.8, "{:?}", right.correlation);
        assert!(right.bias.unwrap().abs() < 0.02, "{:?}", right.bias);
        // Production running 3 sd above the model: few points inside, bias positive the other way.
        let shifted = normal_series(2, 1, 400, |t| level(t) + 3.0).remove(0);
        let wrong = fidelity(&shifted, &replicas);
        assert!(wrong.inside.unwrap() < 0.25, "inside {:?}", wrong.inside);
        assert!(wrong.bias.unwrap() < -0.15, "the model understates: {:?}", wrong.bias);
        // Expected squared relative errors: noise alone, 1/13² ≈ 0.006, against a 3 sd shift
        // plus noise, 10/16² ≈ 0.039 (6.6×; this seed: 0.0067 and 0.038).
        assert!(
            wrong.discrepancy.unwrap() > 3.0 * right.discrepancy.unwrap(),
            "{:?} {:?}",
            wrong.discrepancy,
            right.discrepancy
        );
    }

    #[test]
    fn the_figures_are_what_their_definitions_say() {
        let observed = [Some(10.0), Some(20.0), None, Some(0.0), Some(40.0)];
        // Two replicas: means 11, 18, 5, 1, 40.
        let replicas = vec![
            vec![Some(10.0), Some(16.0), Some(5.0), Some(0.0), Some(40.0)],
            vec![Some(12.0), Some(20.0), Some(5.0), Some(2.0), None],
        ];
        let f = fidelity(&observed, &replicas);
        assert_eq!(f.points, 4, "the interval without an observed value is not compared");
        assert_eq!(f.mean, [Some(11.0), Some(18.0), Some(5.0), Some(1.0), Some(40.0)]);
        assert_eq!((f.low[0], f.high[0]), (Some(10.05), Some(11.95)));
        // MAPE over the non-zero observed: (0.1 + 0.1 + 0) / 3.
        assert!((f.mape.unwrap() - 0.2 / 3.0).abs() < 1e-12);
        // Bias: (1 − 2 + 1 + 0) / 70.
        assert!(f.bias.unwrap().abs() < 1e-12);
        // Inside [10.05, 11.95]? 10: no. [16.1, 19.9]? 20: no. [0.05, 1.95]? 0: no. [40, 40]: yes.
        assert_eq!(f.inside, Some(0.25));
        // Discrepancy: floor 0.01 × 70/4; (0.1² + 0.1² + (1/0.175)² + 0) / 4.
        let expected = (0.01 + 0.01 + (1.0f64 / 0.175).powi(2)) / 4.0;
        assert!((f.discrepancy.unwrap() - expected).abs() < 1e-9);
        let flat = fidelity(&[Some(1.0); 3], &[vec![Some(1.0); 3]]);
        assert_eq!((flat.correlation, flat.mape, flat.discrepancy), (None, Some(0.0), Some(0.0)));
        let none = fidelity(&[None, None], &[vec![Some(1.0), Some(2.0)]]);
        assert_eq!((none.points, none.inside, none.mape), (0, None, None));
    }
}
