//! `warmup_s = "auto"`: the warm-up chosen from a pilot by MSER-5.
//!
//! A pilot of [`PILOT_REPLICAS`] replicas a grid point runs with no warm-up; one of the
//! model's time series (`run.warmup_series`, else its first) is averaged over the
//! pilot's replicas bucket by bucket — averaging first is what makes MSER work on a
//! noisy queue (White, Cobb & Spratt 2000; Hoad, Robinson & Davies 2010 chose MSER-5 as
//! the most reliable automatic method of 42 they compared) — and MSER-5 picks, per
//! point, the truncation that minimises the standard error of what is left: the
//! series cut into batches of 5 buckets, `d` batches dropped where
//! Σ_{j>d}(b_j − b̄_d)² / (m − d)² is least, `d` at most half the batches (beyond
//! that the rule is known to chase noise at the end of the run).
//!
//! The run then measures every point from the *largest* of the points' truncations:
//! one window for the whole grid, so points (and claims that compare them) are
//! measured over the same stretch of time, and no point keeps any of its transient.
//! A point whose truncation reaches the half-horizon limit has not settled in the run:
//! it is said ("run longer"), never hidden.
//!
//! The pilot's replicas are ones the run never uses (indices from 2³² − 1024, seeds
//! derived as every replica's), so the choice is a function of the scenario and its
//! seed only, and independent of the data the run then measures.

use serde_json::{json, Value};
use stampede_scenario::base::error::{Error, Result};
use stampede_scenario::resolved::{GridPoint, Scenario};

use super::runner::{run_ranges, PointResult, ReplicaRecord, SeriesSums, Sinks};

/// Replicas a point the pilot runs.
pub const PILOT_REPLICAS: u32 = 30;

/// The pilot's first replica index: replicas no run reaches (the budget refuses a run
/// of billions of replicas a point long before), so
/// the truncation is chosen on data independent of what the run then measures. Chosen
/// on the run's own replicas, MSER cuts where those replicas happen to dip or peak, and
/// the intervals lose their coverage (an M/M/1 at ρ = 0.9: 24 of 30 seeds instead of 28).
const PILOT_FIRST_REPLICA: u32 = u32::MAX - 1024;

/// Buckets a batch of MSER-5.
const BATCH: usize = 5;

/// The truncation MSER-5 picks in `series` (one value per bucket, in time order), as
/// a count of buckets dropped, and whether it sits at the limit (half the batches).
/// Fewer than two batches: nothing is dropped.
pub fn mser5(series: &[f64]) -> (usize, bool) {
    let batches: Vec<f64> = series.chunks_exact(BATCH).map(|c| c.iter().sum::<f64>() / BATCH as f64).collect();
    let m = batches.len();
    if m < 2 {
        return (0, false);
    }
    // Suffix sums: Σ b and Σ b² over batches d.. for every d.
    let (mut sum, mut squares) = (vec![0.0; m + 1], vec![0.0; m + 1]);
    for d in (0..m).rev() {
        sum[d] = sum[d + 1] + batches[d];
        squares[d] = squares[d + 1] + batches[d] * batches[d];
    }
    let limit = m / 2;
    let mut best = (f64::INFINITY, 0);
    for d in 0..=limit {
        let n = (m - d) as f64;
        let spread = (squares[d] - sum[d] * sum[d] / n).max(0.0);
        let statistic = spread / (n * n);
        if statistic < best.0 {
            best = (statistic, d);
        }
    }
    debug_assert!(best.1 <= limit);
    (best.1 * BATCH, best.1 == limit && limit > 0)
}

/// What the pilot chose.
#[derive(Clone, Debug, PartialEq)]
pub struct Choice {
    pub series: String,
    pub pilot_replicas: u32,
    pub bucket_s: f64,
    /// MSER-5's truncation at each grid point, seconds.
    pub per_point_s: Vec<f64>,
    /// The warm-up the run uses: the largest of them.
    pub chosen_s: f64,
    /// Points whose truncation reached half the horizon: not settled within the run.
    pub unsettled: Vec<u32>,
    pub horizon_s: f64,
    /// The fewest buckets a point's series had, when below [`MIN_BUCKETS`].
    pub too_coarse: Option<usize>,
}

/// The series the automatic warm-up reads: `run.warmup_series`, else the model's first.
fn series_index(scenario: &Scenario) -> Result<usize> {
    let names = scenario.schema.series_names();
    if names.is_empty() {
        return Err(Error::bad_input(format!(
            "run.warmup_s = \"auto\": model {} keeps no time series, which the automatic warm-up reads; \
             give the warm-up in seconds (models with series: graph, cluster, dependency, gateway)",
            scenario.model.name()
        )));
    }
    match &scenario.run.warmup_series {
        None => Ok(0),
        Some(name) => names.iter().position(|n| n == name).ok_or_else(|| {
            Error::bad_input(format!(
                "run.warmup_series = {name:?}: not a series of model {}; its series: {}",
                scenario.model.name(),
                names.join(", ")
            ))
        }),
    }
}

/// Checks that `scenario`'s automatic warm-up can be chosen (a series to read, no grid
/// over `run.warmup_s`), before anything runs; returns the series' index.
pub fn check(scenario: &Scenario) -> Result<usize> {
    debug_assert!(scenario.run.warmup_auto);
    let series = series_index(scenario)?;
    if scenario.grid.iter().any(|axis| axis.path == "run.warmup_s") {
        return Err(Error::bad_input(
            "run.warmup_s = \"auto\" with a grid over run.warmup_s: the warm-up is either chosen or varied; drop one",
        ));
    }
    Ok(series)
}

/// Runs the pilot of `scenario` (whose warm-up is `"auto"`, so 0 while it runs) and
/// chooses the warm-up.
pub fn choose(scenario: &Scenario, threads: usize, progress: &(dyn Fn() + Sync)) -> Result<Choice> {
    let series = check(scenario)?;
    let pilot = PILOT_REPLICAS;
    let bucket_s = scenario.schema.series_bucket_s;
    let points = scenario.point_count() as usize;
    let mut sums: Vec<SeriesSums> = vec![SeriesSums::default(); points];
    let mut records = |_: &[ReplicaRecord]| Ok(());
    let mut fold = |point: &GridPoint, result: PointResult| {
        sums[point.index as usize] = result.series;
        Ok(())
    };
    let replicas = PILOT_FIRST_REPLICA..PILOT_FIRST_REPLICA + pilot;
    run_ranges(
        scenario,
        &vec![replicas; points],
        threads,
        progress,
        Sinks { records: &mut records, point: &mut fold },
    )?;
    let mut per_point_s = Vec::with_capacity(points);
    let mut unsettled = Vec::new();
    let mut fewest_buckets = usize::MAX;
    for (index, sum) in sums.iter().enumerate() {
        let mean: Vec<f64> = sum
            .sum
            .get(series)
            .map_or_else(Vec::new, |buckets| buckets.iter().map(|&b| b as f64 / sum.replicas.max(1) as f64).collect());
        fewest_buckets = fewest_buckets.min(mean.len());
        let (dropped, at_limit) = mser5(&mean);
        // Whole nanoseconds: the warm-up becomes simulated time.
        per_point_s.push((dropped as f64 * bucket_s * 1e9).round() / 1e9);
        if at_limit {
            unsettled.push(index as u32);
        }
    }
    let chosen_s = per_point_s.iter().copied().fold(0.0, f64::max);
    Ok(Choice {
        series: scenario.schema.series_names()[series].to_string(),
        pilot_replicas: pilot,
        bucket_s,
        per_point_s,
        chosen_s,
        unsettled,
        horizon_s: scenario.run.horizon_s,
        too_coarse: (fewest_buckets < MIN_BUCKETS).then_some(fewest_buckets),
    })
}

/// The fewest buckets a series needs for MSER-5 to tell a transient from the level
/// (four batches of five): with fewer it can only answer 0 s, which says nothing.
pub const MIN_BUCKETS: usize = 4 * BATCH;

impl Choice {
    /// What the terminal and the report say.
    pub fn sentence(&self) -> String {
        let spread = if self.per_point_s.len() > 1 {
            let shown: Vec<String> = self.per_point_s.iter().map(|s| format!("{s}")).collect();
            format!(" (per grid point {} s; the run measures every point from the largest)", shown.join(", "))
        } else {
            String::new()
        };
        format!(
            "warm-up {} s, chosen by MSER-5 on series {} averaged over {} pilot replicas{spread}",
            self.chosen_s, self.series, self.pilot_replicas
        )
    }

    /// The warning a run prints when a point has not settled, or when the series is
    /// too coarse for the choice to mean anything.
    pub fn warning(&self) -> Option<String> {
        if let Some(buckets) = self.too_coarse {
            return Some(format!(
                "the automatic warm-up cannot tell: series {} has {buckets} bucket(s) of {} s over run.horizon_s = {} \
                 s, and MSER-5 needs at least {MIN_BUCKETS}; it chose {} s, which says nothing — set series.bucket_s \
                 to at most {} s (horizon / {MIN_BUCKETS}), or set run.warmup_s yourself",
                self.series,
                self.bucket_s,
                self.horizon_s,
                self.chosen_s,
                self.horizon_s / MIN_BUCKETS as f64
            ));
        }
        if self.unsettled.is_empty() {
            return None;
        }
        let points: Vec<String> = self.unsettled.iter().map(u32::to_string).collect();
        Some(format!(
            "the automatic warm-up reached its limit, half the horizon ({} s), at grid point(s) {}: series {} has not \
             settled within run.horizon_s = {} s — run longer",
            self.horizon_s / 2.0,
            points.join(", "),
            self.series,
            self.horizon_s
        ))
    }

    /// The manifest's `warmup` object.
    pub fn to_json(&self) -> Value {
        json!({
            "method": "MSER-5",
            "series": self.series,
            "pilot_replicas": self.pilot_replicas,
            "bucket_s": self.bucket_s,
            "per_point_s": self.per_point_s,
            "chosen_s": self.chosen_s,
            "unsettled_points": self.unsettled,
            "too_coarse_buckets": self.too_coarse,
            "sentence": self.sentence(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mser5_drops_a_ramp_and_nothing_from_a_level_series() {
        // A transient rising to a level over 100 buckets, then the level with noise.
        let mut state = 7u64;
        let mut noise = || {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((state >> 11) as f64 / (1u64 << 53) as f64) - 0.5
        };
        let ramp: Vec<f64> = (0..1000).map(|i| 10.0 * (1.0 - (-(i as f64) / 25.0).exp()) + noise()).collect();
        let (dropped, at_limit) = mser5(&ramp);
        assert!((60..=200).contains(&dropped), "dropped {dropped}");
        assert_eq!(dropped % BATCH, 0);
        assert!(!at_limit);
        let level: Vec<f64> = (0..1000).map(|_| 10.0 + noise()).collect();
        assert!(mser5(&level).0 <= 100, "a settled series keeps (nearly) everything: {:?}", mser5(&level));
        // A series still climbing at the end: the limit, said.
        let climbing: Vec<f64> = (0..1000).map(|i| i as f64).collect();
        assert_eq!(mser5(&climbing), (500, true));
        // Too short to batch twice: nothing.
        assert_eq!(mser5(&[1.0, 2.0, 3.0]), (0, false));
    }

    #[test]
    fn mser5_matches_the_statistic_computed_directly() {
        let series: Vec<f64> =
            (0..200).map(|i| if i < 40 { i as f64 / 4.0 } else { 10.0 + ((i * 7) % 5) as f64 }).collect();
        let batches: Vec<f64> = series.chunks_exact(5).map(|c| c.iter().sum::<f64>() / 5.0).collect();
        let direct = |d: usize| {
            let rest = &batches[d..];
            let mean = rest.iter().sum::<f64>() / rest.len() as f64;
            rest.iter().map(|b| (b - mean).powi(2)).sum::<f64>() / (rest.len() as f64).powi(2)
        };
        let best = (0..=batches.len() / 2).min_by(|&a, &b| direct(a).partial_cmp(&direct(b)).unwrap()).unwrap();
        assert_eq!(mser5(&series).0, best * 5);
    }

    /// An M/M/1 at ρ = 0.9 started empty, as a one-service graph (the graph model is
    /// the one with a queue-depth series); its mean wait Wq = Lq/λ against Erlang C's
    /// 9 s, over `seeds` seeds of 50 replicas × 4,000 s each (about ten relaxation
    /// times of the queue, 1/(1 − √ρ)² ≈ 380 s): the transient is then 2–3% of the mean,
    /// enough to see and small enough that the intervals are still meaningful.
    fn mean_waits(warmup: &str, seeds: u64) -> Vec<(f64, f64, f64)> {
        let text = format!(
            "name = \"mm1\"\nmodel = \"graph\"\n[run]\nhorizon_s = 4000.0\nwarmup_s = {warmup}\nreplicas = 50\n\
             [services.api]\nworkers = 1\nqueue = {{ capacity = 1000000 }}\n\
             [services.api.endpoints.get]\nwork = {{ dist = \"exponential\", mean_s = 1.0 }}\n\
             [[workload]]\nentry = \"api.get\"\nrate_per_s = 0.9\n[series]\nbucket_s = 10.0\n"
        );
        let resolve = |sets: Vec<(String, toml::Value)>| {
            let source = stampede_scenario::base::typing::parse_text(&text, "mm1").unwrap();
            let overrides = stampede_scenario::Overrides { sets, grids: vec![], cases: vec![] };
            Scenario::resolve(source, &overrides).unwrap()
        };
        (1..=seeds)
            .map(|seed| {
                let seed_set = ("run.seed".to_string(), toml::Value::Integer(seed as i64));
                let mut scenario = resolve(vec![seed_set.clone()]);
                if scenario.run.warmup_auto {
                    let choice = choose(&scenario, 2, &|| {}).unwrap();
                    scenario = resolve(vec![seed_set, ("run.warmup_s".into(), toml::Value::Float(choice.chosen_s))]);
                }
                let column = scenario.schema.metric_index("api.queue_depth_mean").unwrap();
                let mut summary = None;
                let mut records = |_: &[ReplicaRecord]| Ok(());
                let mut fold = |_: &GridPoint, result: PointResult| {
                    summary = Some(result.summaries[column]);
                    Ok(())
                };
                let sinks = Sinks { records: &mut records, point: &mut fold };
                let replicas = vec![0..50; 1]; // replicas 0..50 of the one grid point
                run_ranges(&scenario, &replicas, 2, &|| {}, sinks).unwrap();
                let s = summary.unwrap();
                (s.mean / 0.9, s.ci_lo / 0.9, s.ci_hi / 0.9)
            })
            .collect()
    }

    #[test]
    fn an_mm1_started_empty_measured_after_the_automatic_warm_up_has_no_visible_bias() {
        let theory = stampede_engine::measurement::theory::erlang_c(0.9, 1.0, 1).unwrap().wait_mean_s;
        assert!((theory - 9.0).abs() < 1e-12);
        // The 100 seeds (about 20 s): fixed seeds, so the verdict is too.
        let seeds = 100;
        let grand = |waits: &[(f64, f64, f64)]| {
            let mean = waits.iter().map(|w| w.0).sum::<f64>() / waits.len() as f64;
            let sd = (waits.iter().map(|w| (w.0 - mean).powi(2)).sum::<f64>() / (waits.len() - 1) as f64).sqrt();
            (mean, sd / (waits.len() as f64).sqrt())
        };
        let auto = mean_waits("\"auto\"", seeds);
        let (mean, se) = grand(&auto);
        let bias = (mean - theory) / theory;
        let covered = auto.iter().filter(|w| w.1 <= theory && theory <= w.2).count();
        eprintln!("auto: mean wait {mean:.4} s ± {se:.4} (bias {:+.2}%), covered {covered}/{seeds}", 100.0 * bias);
        assert!(bias.abs() < 0.02, "bias {:+.2}% of Erlang C's {theory} s", 100.0 * bias);
        // The test can see a 2% bias: the grand mean's standard error is well under it.
        assert!(se < 0.01 * theory, "standard error {se}");
        assert!(covered as f64 >= 0.9 * seeds as f64, "the interval covered Erlang C in {covered} of {seeds} seeds");
        let none = mean_waits("0.0", seeds);
        let (mean0, se0) = grand(&none);
        let bias0 = (mean0 - theory) / theory;
        eprintln!("no warm-up: mean wait {mean0:.4} s ± {se0:.4} (bias {:+.2}%)", 100.0 * bias0);
        // Started empty, the run without a warm-up waits less: visible against the
        // theory, and — on the same replicas, so without their noise — against the run
        // that dropped its warm-up.
        let differences: Vec<(f64, f64, f64)> = none.iter().zip(&auto).map(|(n, a)| (n.0 - a.0, 0.0, 0.0)).collect();
        let (difference, difference_se) = grand(&differences);
        eprintln!("no warm-up − auto, same replicas: {difference:.4} s ± {difference_se:.4}");
        assert!(mean0 < theory - 2.0 * se0, "no warm-up: {mean0} ± {se0}");
        assert!(difference < -3.0 * difference_se, "no warm-up − auto: {difference} ± {difference_se}");
    }
}
