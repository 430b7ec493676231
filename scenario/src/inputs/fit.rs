//! Fitting distribution families to data: to a few quantiles (the `quantiles` kind's
//! `fit`), and to a whole sample or histogram (`stampede fit`), with each candidate's
//! Kolmogorov–Smirnov distance to the data so that a user sees how good each fit is.
//!
//! Candidates: exponential (the mean), lognormal (maximum likelihood on the logs for a
//! sample, least squares on the quantiles for a histogram), gamma (moments for a sample,
//! quantiles for a histogram), Weibull (mean and scv, the shape by bisection), and the
//! balanced two-phase hyperexponential (moments, scv ≥ 1).

use stampede_engine::components::distribution::{gamma_function, Distribution, QuantileTable, Shape};
use statrs::distribution::{ContinuousCDF, Exp, Gamma, LogNormal, Normal, Weibull};

/// (μ, σ) of the lognormal whose log-quantiles best match (least squares):
/// ln q = μ + σ·z_p.
pub(crate) fn lognormal_from_quantiles(points: &[(f64, f64)]) -> Option<(f64, f64)> {
    let normal = Normal::new(0.0, 1.0).expect("the standard normal");
    let xy: Vec<(f64, f64)> = points.iter().map(|(p, v)| (normal.inverse_cdf(*p), v.ln())).collect();
    if xy.len() == 1 {
        return None;
    }
    let n = xy.len() as f64;
    let (mx, my) = (xy.iter().map(|p| p.0).sum::<f64>() / n, xy.iter().map(|p| p.1).sum::<f64>() / n);
    let sxx: f64 = xy.iter().map(|(x, _)| (x - mx) * (x - mx)).sum();
    let sxy: f64 = xy.iter().map(|(x, y)| (x - mx) * (y - my)).sum();
    if sxx <= 0.0 {
        return None;
    }
    let sigma = sxy / sxx;
    (sigma > 0.0).then_some((my - sigma * mx, sigma))
}

/// (shape k, scale θ) of the gamma whose log-quantiles best match: for each k the
/// best ln θ is the mean gap, and k is searched on a log grid then refined.
pub(crate) fn gamma_from_quantiles(points: &[(f64, f64)]) -> Option<(f64, f64)> {
    if points.len() < 2 || points.windows(2).all(|w| w[0].1 == w[1].1) {
        return None;
    }
    let cost = |k: f64| -> (f64, f64) {
        let unit = Gamma::new(k, 1.0).expect("a positive shape");
        let gaps: Vec<f64> = points.iter().map(|(p, v)| v.ln() - unit.inverse_cdf(*p).max(1e-300).ln()).collect();
        let ln_theta = gaps.iter().sum::<f64>() / gaps.len() as f64;
        (gaps.iter().map(|g| (g - ln_theta).powi(2)).sum(), ln_theta)
    };
    let (mut low, mut high) = (-4.0f64, 5.0f64); // ln k from about 0.02 to 150
    for _ in 0..80 {
        let (a, b) = (low + (high - low) / 3.0, high - (high - low) / 3.0);
        if cost(a.exp()).0 <= cost(b.exp()).0 {
            high = b;
        } else {
            low = a;
        }
    }
    let k = ((low + high) / 2.0).exp();
    Some((k, cost(k).1.exp()))
}

/// One family fitted to the data.
#[derive(Clone, Debug)]
pub struct Candidate {
    pub family: &'static str,
    /// The fitted distribution, as the engine samples it.
    pub distribution: Distribution,
    /// The TOML distribution value, ready to paste.
    pub toml: String,
    /// Kolmogorov–Smirnov distance: the largest gap between the data's CDF and the fit's.
    pub ks: f64,
    /// The fit's p50, p99 and p99.9.
    pub quantiles: [f64; 3],
}

/// What `stampede fit` reports of the data and every candidate, best (smallest KS
/// distance) first.
#[derive(Clone, Debug)]
pub struct FitReport {
    pub count: f64,
    pub mean: f64,
    pub scv: f64,
    /// min, p50, p90, p99, p99.9, max of the data.
    pub quantiles: [f64; 6],
    pub candidates: Vec<Candidate>,
    /// (x, F(x)) of the data's CDF, for plotting.
    pub cdf: Vec<(f64, f64)>,
    /// What the user should know about the data (all zeros, say).
    pub notes: Vec<String>,
}

impl FitReport {
    /// `stampede fit --json`: the data, every candidate, the best and the data's value.
    pub fn to_json(&self, file: &str, data_toml: &str, page: Option<&str>) -> serde_json::Value {
        let candidates: Vec<serde_json::Value> = self
            .candidates
            .iter()
            .map(|c| {
                serde_json::json!({
                    "family": c.family, "ks": c.ks, "toml": c.toml,
                    "mean_s": c.distribution.mean_s(), "scv": c.distribution.scv(),
                    "p50_s": c.quantiles[0], "p99_s": c.quantiles[1], "p999_s": c.quantiles[2],
                })
            })
            .collect();
        let names = ["min_s", "p50_s", "p90_s", "p99_s", "p999_s", "max_s"];
        let quantiles: serde_json::Map<String, serde_json::Value> =
            names.iter().zip(self.quantiles).map(|(k, v)| (k.to_string(), serde_json::json!(v))).collect();
        let best = self.candidates.first();
        serde_json::json!({
            "file": file, "count": self.count, "mean_s": self.mean, "scv": self.scv,
            "quantiles": quantiles, "candidates": candidates, "best": best.map(|c| c.family),
            "best_toml": best.map(|c| c.toml.clone()), "data_toml": data_toml, "page": page,
            "notes": self.notes,
            "fields": DISTRIBUTION_FIELDS.iter().map(|(model, field)| serde_json::json!({ "model": model, "field": field })).collect::<Vec<_>>(),
        })
    }

    /// `stampede fit`'s text: the data, a table of candidates, the values to paste and
    /// the field each model reads them from.
    pub fn render(&self, file: &str, data_toml: &str, page: Option<&str>) -> String {
        use std::fmt::Write as _;
        let q = self.quantiles;
        let mut out = format!("stampede fit {file}: {} observations\n", self.count);
        let _ = writeln!(
            out,
            "  mean {:.4} s · scv {:.3} · min {:.4} · p50 {:.4} · p90 {:.4} · p99 {:.4} · p99.9 {:.4} · max {:.4} s\n",
            self.mean, self.scv, q[0], q[1], q[2], q[3], q[4], q[5]
        );
        let _ =
            writeln!(out, "{:<18} {:>8} {:>10} {:>10} {:>10}  value", "family", "KS D", "p50 s", "p99 s", "p99.9 s");
        for c in &self.candidates {
            let [p50, p99, p999] = c.quantiles;
            let _ = writeln!(out, "{:<18} {:>8.4} {p50:>10.4} {p99:>10.4} {p999:>10.4}  {}", c.family, c.ks, c.toml);
        }
        if let Some(best) = self.candidates.first() {
            let _ = writeln!(out, "\nbest: {} (the smallest Kolmogorov–Smirnov distance, {:.4})", best.family, best.ks);
            let _ = writeln!(out, "  {}", best.toml);
        }
        for note in &self.notes {
            let _ = writeln!(out, "note: {note}");
        }
        let _ = writeln!(out, "the data itself:\n  {data_toml}");
        let _ = writeln!(out, "paste either as the field that takes a distribution value:");
        for (model, field) in DISTRIBUTION_FIELDS {
            let _ = writeln!(out, "  {model:<11} {field}");
        }
        match page {
            Some(page) => drop(writeln!(out, "page: {page}")),
            None => drop(writeln!(out, "page: none written (--out FILE.html writes the CDFs' page)")),
        }
        out
    }
}

/// The probabilities of [`FitReport::quantiles`].
/// Where each model reads a distribution value (`stampede fit` prints them; the
/// fit-fields test checks each against a scenario that uses it).
pub const DISTRIBUTION_FIELDS: [(&str, &str); 5] = [
    ("mg1", "queue.service"),
    ("cluster", "shards.service (service_s and service_sigma left out)"),
    ("dependency", "dependency.latency (healthy_latency_s left out)"),
    ("graph", "services.S.endpoints.E.work (or a step's work = …, an edge's network = …)"),
    ("gateway", "tiers.NAME.ttft_s"),
];

pub const DATA_QUANTILES: [f64; 6] = [0.0, 0.5, 0.9, 0.99, 0.999, 1.0];

/// A fitted distribution's CDF at `x` seconds.
pub fn cdf_of(distribution: &Distribution, x: f64) -> f64 {
    let raw = (x - distribution.shift_s) / distribution.scale;
    cdf(&distribution.shape, raw)
}

/// A fitted family's CDF.
fn cdf(shape: &Shape, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    match shape {
        Shape::Exponential { mean_s } => 1.0 - (-x / mean_s).exp(),
        Shape::Lognormal { mu, sigma } => LogNormal::new(*mu, *sigma).map_or(f64::NAN, |d| d.cdf(x)),
        Shape::Gamma { shape, scale_s } => Gamma::new(*shape, 1.0 / scale_s).map_or(f64::NAN, |d| d.cdf(x)),
        Shape::Weibull { shape, scale_s } => Weibull::new(*shape, *scale_s).map_or(f64::NAN, |d| d.cdf(x)),
        Shape::HyperExponential { p1, rate1, rate2 } => 1.0 - p1 * (-rate1 * x).exp() - (1.0 - p1) * (-rate2 * x).exp(),
        Shape::Constant { value_s } => f64::from(x >= *value_s),
        Shape::Table(table) => {
            let values = table.values();
            let below = values.partition_point(|v| *v <= x);
            below as f64 / values.len() as f64
        }
    }
}

/// A fitted family's `p` quantile.
fn quantile(shape: &Shape, p: f64) -> f64 {
    match shape {
        Shape::Exponential { mean_s } => Exp::new(1.0 / mean_s).map_or(f64::NAN, |d| d.inverse_cdf(p)),
        Shape::Lognormal { mu, sigma } => LogNormal::new(*mu, *sigma).map_or(f64::NAN, |d| d.inverse_cdf(p)),
        Shape::Weibull { shape, scale_s } => scale_s * (-(1.0 - p).ln()).powf(1.0 / shape),
        _ => {
            // Bisection on the CDF (the hyperexponential has no closed-form inverse, and
            // statrs' gamma inverse gave NaN for fitted shapes: issue 44, item 10).
            let (mut low, mut high) = (0.0, 1.0);
            while cdf(shape, high) < p && high < 1e15 {
                high *= 2.0;
            }
            for _ in 0..200 {
                let mid = (low + high) / 2.0;
                if cdf(shape, mid) < p {
                    low = mid;
                } else {
                    high = mid;
                }
            }
            high
        }
    }
}

/// A histogram's quantiles at p = 0.05, 0.10, …, 0.95 and 0.99 (positive ones), for
/// fitting by quantiles.
fn histogram_quantiles(table: &QuantileTable) -> Vec<(f64, f64)> {
    (1..20)
        .map(|k| f64::from(k) / 20.0)
        .chain([0.99])
        .map(|p| (p, table.quantile(p)))
        .filter(|(_, v)| *v > 0.0)
        .collect()
}

/// Fits every candidate family to `table`, the data's own distribution (a sample's
/// empirical distribution, or a histogram's CDF), `count` observations.
pub fn fit(table: &QuantileTable, count: f64) -> FitReport {
    let mean = table.mean();
    let scv = ((table.second_moment() - mean * mean) / (mean * mean)).max(0.0);
    let values = table.values();
    let cdf_points = data_cdf(table);
    let mut candidates: Vec<(&'static str, Distribution, String)> = Vec::new();
    let mut notes = Vec::new();
    if values.first() == values.last() {
        // One value: no family with a spread fits it (a lognormal's sigma would be 0,
        // which `run` refuses); the value itself does, exactly.
        let value = values.first().copied().unwrap_or(0.0);
        if value == 0.0 {
            notes.push(
                "every observation is 0 s: as a service time that is free work; check the unit and the column".into(),
            );
        }
        candidates.push((
            "constant",
            Distribution::new(Shape::Constant { value_s: value }),
            format!("{{ dist = \"constant\", value_s = {} }}", short(value)),
        ));
    } else {
        push_families(&mut candidates, table, mean, scv);
    }
    let mut fitted: Vec<Candidate> = candidates
        .into_iter()
        .map(|(family, distribution, toml)| {
            let ks = ks_distance(&distribution, &cdf_points);
            let quantiles = [0.5, 0.99, 0.999].map(|p| quantile(&distribution.shape, p));
            Candidate { family, distribution, toml, ks, quantiles }
        })
        .collect();
    fitted.sort_by(|a, b| a.ks.total_cmp(&b.ks));
    if let Some(best) = fitted.first().filter(|best| best.ks > ks_critical_1pct(count)) {
        notes.push(format!(
            "even the best family ({}, KS distance {:.3}) is farther from the data than sampling explains (the KS \
             critical value at 1% for {} observations is {:.4}); its tail is not the data's (p99 {:.4} s against \
             the data's {:.4} s, p99.9 {:.4} s against {:.4} s): use the data itself, below",
            best.family,
            best.ks,
            count,
            ks_critical_1pct(count),
            best.quantiles[1],
            table.quantile(0.99),
            best.quantiles[2],
            table.quantile(0.999)
        ));
    }
    FitReport {
        count,
        mean,
        scv,
        quantiles: DATA_QUANTILES.map(|p| table.quantile(p)),
        candidates: fitted,
        cdf: cdf_points.iter().map(|(x, _, after)| (*x, *after)).collect(),
        notes,
    }
}

/// The data's CDF at its own points as (value, CDF just before, CDF at it): a sample
/// steps by 1/n at each value; a histogram's table is on an even probability grid.
fn data_cdf(table: &QuantileTable) -> Vec<(f64, f64, f64)> {
    let values = table.values();
    if table.is_discrete() {
        let n = values.len() as f64;
        values.iter().enumerate().map(|(i, x)| (*x, i as f64 / n, (i + 1) as f64 / n)).collect()
    } else {
        let last = (values.len() - 1) as f64;
        values.iter().enumerate().map(|(i, x)| (*x, i as f64 / last, i as f64 / last)).collect()
    }
}

/// The Kolmogorov–Smirnov distance between `distribution` and the data's CDF: the
/// largest gap on either side of each of the data's steps.
fn ks_distance(distribution: &Distribution, cdf_points: &[(f64, f64, f64)]) -> f64 {
    cdf_points
        .iter()
        .map(|(x, before, after)| {
            let f = cdf(&distribution.shape, *x);
            (f - before).abs().max((f - after).abs())
        })
        .fold(0.0, f64::max)
}

/// The families with a spread, fitted to data whose values are not all one.
fn push_families(
    candidates: &mut Vec<(&'static str, Distribution, String)>,
    table: &QuantileTable,
    mean: f64,
    scv: f64,
) {
    let values = table.values();
    candidates.push((
        "exponential",
        Distribution::new(Shape::Exponential { mean_s: mean }),
        format!("{{ dist = \"exponential\", mean_s = {} }}", short(mean)),
    ));
    let lognormal = if table.is_discrete() && values.iter().all(|v| *v > 0.0) {
        let logs: Vec<f64> = values.iter().map(|v| v.ln()).collect();
        let m = logs.iter().sum::<f64>() / logs.len() as f64;
        let sd = (logs.iter().map(|l| (l - m) * (l - m)).sum::<f64>() / (logs.len() as f64 - 1.0)).sqrt();
        Distribution::new(Shape::Lognormal { mu: m, sigma: sd })
    } else {
        // A histogram's moments are at the mercy of its coarsest buckets and its tail:
        // fit its quantiles instead.
        lognormal_from_quantiles(&histogram_quantiles(table))
            .map(|(mu, sigma)| Distribution::new(Shape::Lognormal { mu, sigma }))
            .unwrap_or_else(|| Distribution::lognormal_mean_scv(mean, scv.max(1e-9)))
    };
    if let Shape::Lognormal { mu, sigma } = lognormal.shape {
        candidates.push((
            "lognormal",
            lognormal,
            format!("{{ dist = \"lognormal\", median_s = {}, sigma = {} }}", short(mu.exp()), short(sigma)),
        ));
    }
    if scv > 0.0 {
        let gamma = match table.is_discrete() {
            true => Distribution::gamma_mean_scv(mean, scv),
            false => gamma_from_quantiles(&histogram_quantiles(table))
                .map(|(shape, scale_s)| Distribution::new(Shape::Gamma { shape, scale_s }))
                .unwrap_or_else(|| Distribution::gamma_mean_scv(mean, scv)),
        };
        let (g_mean, g_scv) = (gamma.mean_s(), gamma.scv());
        candidates.push((
            "gamma",
            gamma,
            format!("{{ dist = \"gamma\", mean_s = {}, scv = {} }}", short(g_mean), short(g_scv)),
        ));
        let k = weibull_shape(scv);
        let scale = mean / gamma_function(1.0 + 1.0 / k);
        candidates.push((
            "weibull",
            Distribution::new(Shape::Weibull { shape: k, scale_s: scale }),
            format!("{{ dist = \"weibull\", shape = {}, scale_s = {} }}", short(k), short(scale)),
        ));
    }
    if scv > 1.0 {
        candidates.push((
            "hyperexponential",
            Distribution::hyperexponential_mean_scv(mean, scv),
            format!("{{ dist = \"hyperexponential\", mean_s = {}, scv = {} }}", short(mean), short(scv)),
        ));
    }
}

/// The Kolmogorov–Smirnov critical value at 1% for `n` observations (the asymptotic
/// 1.628/√n): a fit farther than this from the data is rejected at 1%.
pub(crate) fn ks_critical_1pct(n: f64) -> f64 {
    1.628 / n.max(1.0).sqrt()
}

/// The Weibull shape k whose scv, Γ(1 + 2/k)/Γ(1 + 1/k)² − 1, is `scv` (it falls as k
/// grows), by bisection on ln k.
fn weibull_shape(scv: f64) -> f64 {
    let scv_of = |k: f64| gamma_function(1.0 + 2.0 / k) / gamma_function(1.0 + 1.0 / k).powi(2) - 1.0;
    let (mut low, mut high) = (-2.5f64, 4.6f64); // k from 0.08 to 100
    for _ in 0..100 {
        let mid = (low + high) / 2.0;
        if scv_of(mid.exp()) > scv {
            low = mid;
        } else {
            high = mid;
        }
    }
    ((low + high) / 2.0).exp()
}

/// Four significant digits, as a TOML number.
fn short(value: f64) -> String {
    let text = format!("{value:.3e}");
    let parsed: f64 = text.parse().unwrap_or(value);
    let plain = format!("{parsed}");
    if plain.contains('.') || plain.contains('e') {
        plain
    } else {
        format!("{plain}.0")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stampede_engine::kernel::rng::{RngStream, StreamPurpose};

    fn sample(distribution: &Distribution, n: usize, seed: u64) -> QuantileTable {
        let mut rng = RngStream::derive(seed, 0, StreamPurpose::named("test.fit"));
        let values: Vec<f64> = (0..n).map(|_| distribution.sample_s(&mut rng)).collect();
        QuantileTable::from_sample(&values).unwrap()
    }

    /// Synthetic samples (4,000; 16,000 of the hyperexponential): the true family ranks first, and its parameters come
    /// back within stated tolerances (lognormal σ and median within 5%, gamma's scv
    /// within 10%, the hyperexponential's scv within 20%, the mean within four of the
    /// sample mean's standard errors).
    #[test]
    fn fit_recovers_the_family_and_its_parameters() {
        let cases = [
            ("lognormal", Distribution::new(Shape::Lognormal { mu: (0.05f64).ln(), sigma: 0.8 }), 4_000),
            ("gamma", Distribution::gamma_mean_scv(0.2, 0.25), 4_000),
            // The hyperexponential is fitted by its moments, and a sample's scv of 6 is
            // itself noisy (4,000 draws gave 4.8 once): 16,000 draws.
            ("hyperexponential", Distribution::hyperexponential_mean_scv(0.1, 6.0), 16_000),
        ];
        for (family, truth, draws) in cases {
            let n = draws as f64;
            for seed in 0..3 {
                let report = fit(&sample(&truth, draws, seed), n);
                let best = &report.candidates[0];
                let ranking: Vec<(&str, f64)> = report.candidates.iter().map(|c| (c.family, c.ks)).collect();
                assert_eq!(best.family, family, "seed {seed}: ranking {ranking:?}");
                // The sample mean's own standard error is √(scv / n) of the mean (3.9%
                // for the hyperexponential's scv 6): four of them.
                let mean_error = best.distribution.mean_s() / truth.mean_s() - 1.0;
                let bound = 4.0 * (truth.scv() / n).sqrt();
                assert!(mean_error.abs() < bound, "{family} mean off by {mean_error:.3}, bound {bound:.3}");
                match (&best.distribution.shape, &truth.shape) {
                    (Shape::Lognormal { mu, sigma }, Shape::Lognormal { mu: m0, sigma: s0 }) => {
                        assert!(
                            (sigma / s0 - 1.0).abs() < 0.05 && (mu.exp() / m0.exp() - 1.0).abs() < 0.05,
                            "{mu} {sigma}"
                        );
                    }
                    (Shape::Gamma { .. }, Shape::Gamma { .. }) => {
                        assert!(
                            (best.distribution.scv() / truth.scv() - 1.0).abs() < 0.10,
                            "gamma scv {}",
                            best.distribution.scv()
                        );
                    }
                    (Shape::HyperExponential { .. }, Shape::HyperExponential { .. }) => {
                        assert!(
                            (best.distribution.scv() / truth.scv() - 1.0).abs() < 0.20,
                            "H2 scv {}",
                            best.distribution.scv()
                        );
                    }
                    other => panic!("{other:?}"),
                }
                // Its KS distance is within sampling error (1.36/√n at 5%); the worst is not.
                assert!(best.ks < 1.36 / n.sqrt(), "{family}: D = {}", best.ks);
                assert!(report.candidates.last().unwrap().ks > 1.36 / n.sqrt(), "{ranking:?}");
            }
        }
    }

    #[test]
    fn weibull_shape_inverts_its_scv() {
        for k in [0.5, 1.0, 2.0, 5.0] {
            let scv = gamma_function(1.0 + 2.0 / k) / gamma_function(1.0 + 1.0 / k).powi(2) - 1.0;
            assert!((weibull_shape(scv) / k - 1.0).abs() < 1e-6, "{k}");
        }
        assert_eq!(short(0.123456), "0.1235");
        assert_eq!(short(2.0), "2.0");
    }

    /// Every candidate's quantiles are numbers (gamma's p50 was NaN), and a sample no
    /// family fits — two far-apart modes — gets a note naming the KS critical value,
    /// while a sample drawn from a family gets none (issue 44, item 10).
    #[test]
    fn quantiles_are_numbers_and_a_bad_best_fit_is_said() {
        let gamma = Distribution::gamma_mean_scv(0.05, 2.0);
        let report = fit(&sample(&gamma, 3000, 11), 3000.0);
        for candidate in &report.candidates {
            assert!(
                candidate.quantiles.iter().all(|q| q.is_finite() && *q > 0.0),
                "{}: {:?}",
                candidate.family,
                candidate.quantiles
            );
        }
        let g = report.candidates.iter().find(|c| c.family == "gamma").unwrap();
        assert!((cdf(&g.distribution.shape, g.quantiles[0]) - 0.5).abs() < 1e-6, "p50 inverts the CDF");
        assert!(report.notes.is_empty(), "{:?}", report.notes);
        let bimodal: Vec<f64> =
            (0..3000).map(|i| if i % 2 == 0 { 0.01 + 1e-6 * i as f64 } else { 1.0 + 1e-6 * i as f64 }).collect();
        let report = fit(&QuantileTable::from_sample(&bimodal).unwrap(), 3000.0);
        assert!(report.candidates[0].ks > ks_critical_1pct(3000.0));
        assert!(
            report.notes.iter().any(|n| n.contains("farther from the data than sampling explains")),
            "{:?}",
            report.notes
        );
    }
}
