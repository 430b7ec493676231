//! `--precision`: how many replicas a run needs for its figures' 95% intervals to be
//! as narrow as asked.
//!
//! Replicas run in stages (20 a point first, then as many as the stage's own
//! variances say are needed, 5% over, at least 1.1× and at most 8× the replicas
//! already run) until every checked metric's half-width is at most the asked share of
//! its |mean| at *every* grid point, or the most replicas allowed are run. Each stage
//! runs only the replicas not run yet (replica `r` is the same simulation whatever the
//! stage), and every point is taken to the same count, so the moments of the last stage
//! are — exactly, the sums being exact — those of a plain run with that many replicas:
//! the figure reached here is the figure the run then writes. The search is a function
//! of the scenario and its seed only (never of threads or timing), so the count it
//! stops at is the same on every machine.
//!
//! The half-width is the one every summary carries: t(0.975, n−1)·sd/√n over the
//! replicas where the metric is defined. A metric whose interval has zero width (every
//! replica gave the same value) is precise whatever its mean; one whose mean is zero
//! with replicas that differ can never be (its relative precision is infinite), and is
//! reported as such.

use serde_json::{json, Value};
use stampede_scenario::base::error::{Error, Result};
use stampede_scenario::resolved::{GridPoint, Scenario};

use super::moments::Moments;
use super::report::RunReport;
use super::runner::{run_ranges, PointResult, ReplicaRecord, Sinks};
use super::stats::{t_quantile_975, Summary};

/// Replicas of every point in the first stage (fewer when the limit is lower): enough
/// for a standard deviation known to about ±16%, so the next stage's size is not a guess.
pub const FIRST_STAGE: u32 = 20;

/// The most replicas a point gets unless `--max-replicas` says otherwise.
pub const DEFAULT_MAX_REPLICAS: u32 = 100_000;

/// What one `--precision` argument asks: `REL` for every headline metric, or
/// `METRIC=REL` for one.
#[derive(Clone, Debug, PartialEq)]
pub struct Target {
    pub metric: Option<String>,
    /// The largest half-width allowed, as a share of |mean| (0 < relative < 1).
    pub relative: f64,
}

impl Target {
    /// `1%`, `0.01`, `p99_s=2%` or `p99_s=0.02`.
    pub fn parse(text: &str) -> Result<Target> {
        let (metric, value) = match text.rsplit_once('=') {
            Some((metric, value)) if !metric.trim().is_empty() => (Some(metric.trim().to_string()), value.trim()),
            Some(_) => {
                return Err(Error::bad_input(format!(
                    "--precision {text:?}: no metric before '='; write METRIC=REL, e.g. p99_s=2%"
                )))
            }
            None => (None, text.trim()),
        };
        let parsed = match value.strip_suffix('%') {
            Some(percent) => percent.trim().parse::<f64>().map(|p| p / 100.0),
            None => value.parse::<f64>(),
        };
        match parsed {
            Ok(relative) if relative > 0.0 && relative < 1.0 => Ok(Target { metric, relative }),
            Ok(_) => Err(Error::bad_input(format!(
                "--precision {text:?}: the half-width must be a share of the mean above 0 and below 1 (e.g. 1% or 0.01)"
            ))),
            Err(_) => Err(Error::bad_input(format!(
                "--precision {text:?}: {value:?} is not a number; write REL (1% or 0.01) or METRIC=REL"
            ))),
        }
    }

    /// As a user writes it: `1%`, `p99_s=2%`.
    pub fn text(&self) -> String {
        let share = percent(self.relative);
        match &self.metric {
            Some(metric) => format!("{metric}={share}"),
            None => share,
        }
    }
}

/// `0.01` → `1%`, `0.005` → `0.5%`.
pub fn percent(share: f64) -> String {
    if !share.is_finite() {
        return "∞".to_string();
    }
    let value = 100.0 * share;
    if value != 0.0 && value.abs() < 0.001 {
        // Three decimals would print `0%`, which `--precision` refuses: keep the digits.
        return format!("{}%", stampede_scenario::base::numbers::scientific(value, 4));
    }
    let text = if value >= 10.0 { format!("{value:.1}") } else { format!("{value:.3}") };
    let text = text.trim_end_matches('0').trim_end_matches('.');
    format!("{text}%")
}

/// `scenario` with the metric expressions `targets` name (`--precision 'a + b=2%'`) as
/// columns of their own, as `--metric` adds them.
pub fn with_target_metrics(scenario: Scenario, targets: &[Target]) -> Result<Scenario> {
    let named: Vec<(String, String)> = targets
        .iter()
        .filter_map(|t| t.metric.as_ref().map(|m| (m.clone(), format!("--precision {:?}", t.text()))))
        .collect();
    scenario.with_metrics(&named)
}

/// The asked precision, resolved against a scenario: which metric columns are checked
/// and how narrow each must be.
#[derive(Clone, Debug)]
pub struct Goal {
    pub targets: Vec<Target>,
    /// (metric column, relative half-width), in the schema's order.
    pub checks: Vec<(usize, f64)>,
    pub max_replicas: u32,
}

impl Goal {
    /// Every headline metric gets a bare `REL`; a named metric gets its own. Each name
    /// must be a metric of the scenario (commands add metric expressions first).
    pub fn new(scenario: &Scenario, targets: &[Target], max_replicas: u32) -> Result<Goal> {
        if targets.is_empty() {
            return Err(Error::bad_input("--precision: say how narrow, e.g. --precision 1%"));
        }
        if max_replicas < 2 {
            return Err(Error::bad_input(format!(
                "--max-replicas {max_replicas}: an interval needs at least 2 replicas a point"
            )));
        }
        let schema = &scenario.schema;
        let mut checks: Vec<(usize, f64)> = Vec::new();
        for target in targets.iter().filter(|t| t.metric.is_some()) {
            let name = target.metric.as_deref().unwrap_or_default();
            let normalised = stampede_scenario::models::expression::normalise(name);
            let index = schema.metric_index(&normalised).ok_or_else(|| {
                let names = schema.metric_names();
                let near: Vec<&str> =
                    names.iter().copied().filter(|n| n.contains(normalised.as_str())).take(8).collect();
                Error::bad_input(format!(
                    "--precision {}: {name:?} is not a metric of model {}{}",
                    target.text(),
                    scenario.model.name(),
                    if near.is_empty() { String::new() } else { format!("; did you mean {}?", near.join(", ")) }
                ))
            })?;
            checks.retain(|(i, _)| *i != index); // a later argument wins
            checks.push((index, target.relative));
        }
        if let Some(every) = targets.iter().rev().find(|t| t.metric.is_none()) {
            for (index, _) in schema.metrics.iter().enumerate().filter(|(_, d)| d.headline) {
                if !checks.iter().any(|(i, _)| *i == index) {
                    checks.push((index, every.relative));
                }
            }
        }
        checks.sort_by_key(|(i, _)| *i);
        if checks.is_empty() {
            return Err(Error::bad_input(format!(
                "--precision {}: model {} has no headline metric to hold to it; name one: --precision METRIC=REL",
                targets[0].text(),
                scenario.model.name()
            )));
        }
        Ok(Goal { targets: targets.to_vec(), checks, max_replicas })
    }

    /// The arguments as written: `1%, p99_s=2%`.
    pub fn asked(&self) -> String {
        self.targets.iter().map(Target::text).collect::<Vec<_>>().join(", ")
    }
}

/// One checked metric at its least precise grid point.
#[derive(Clone, Debug, PartialEq)]
pub struct Reached {
    pub metric: String,
    pub grid_point: u32,
    pub mean: f64,
    pub half_width: f64,
    /// half_width / |mean| (0 for an interval of zero width; ∞ for a zero mean with
    /// spread; NaN when the metric is undefined or has fewer than 2 values).
    pub relative: f64,
    pub asked: f64,
    /// The replicas it would need at that point, from its own spread (the count run if met).
    pub needed: f64,
    /// A share (0 to 1): `relative` is the half-width itself, a share of its range.
    pub of_range: bool,
    /// Defined in under half the replicas at every point: not held to the precision
    /// (its mean is over a few replicas, which the summary never ranks either).
    pub sparse: bool,
}

impl Reached {
    /// Within the asked width, or not held to it (sparse).
    pub fn met(&self) -> bool {
        self.sparse || self.relative <= self.asked
    }

    /// `0.84% of its mean` or `0.03% of its range` (a share).
    fn shown(&self) -> String {
        format!("{} of its {}", percent(self.relative), if self.of_range { "range" } else { "mean" })
    }
}

/// The half-width of a summary over `n` defined values.
fn half_width(summary: &Summary, n: u64) -> f64 {
    if n < 2 || !summary.sd.is_finite() {
        return f64::NAN;
    }
    t_quantile_975(n - 1) * summary.sd / (n as f64).sqrt()
}

fn relative(mean: f64, half_width: f64) -> f64 {
    if half_width == 0.0 {
        0.0
    } else if mean == 0.0 && half_width.is_finite() {
        f64::INFINITY
    } else {
        half_width / mean.abs()
    }
}

/// Each checked metric at its least precise point, from each point's summaries and
/// the count of replicas where each metric is defined; `run` is the replicas a point
/// ran. A point where the metric is defined in under half its replicas (a recovery
/// time where almost no replica recovered) is not held to it, as the summary never
/// ranks such a mean; a metric so sparse at every point is not held to it at all.
pub fn reached(goal: &Goal, scenario: &Scenario, points: &[(u32, Vec<Summary>, Vec<u64>)], run: u32) -> Vec<Reached> {
    goal.checks
        .iter()
        .map(|&(metric, asked)| {
            let def = &scenario.schema.metrics[metric];
            let candidates: Vec<Reached> = points
                .iter()
                .map(|(grid_point, summaries, counts)| {
                    at_point(def.name, def.fraction, *grid_point, &summaries[metric], counts[metric], run, asked)
                })
                .collect();
            // The points where it is defined decide; sparse everywhere, any stands for all.
            let dense = candidates.iter().any(|c| !c.sparse);
            candidates
                .into_iter()
                .filter(|c| !dense || !c.sparse)
                .reduce(|worst, c| if less_precise(&c, &worst) { c } else { worst })
                .expect("a scenario has at least one grid point")
        })
        .collect()
}

/// One checked metric at one grid point: its summary over the `defined` replicas (of
/// `run`) where it has a value, held to `asked` of its |mean|, or of its range for a
/// share (`of_range`).
fn at_point(
    metric: &str,
    of_range: bool,
    grid_point: u32,
    summary: &Summary,
    defined: u64,
    run: u32,
    asked: f64,
) -> Reached {
    let sparse = 2 * defined < u64::from(run);
    let hw = if sparse { f64::NAN } else { half_width(summary, defined) };
    // A share is held to REL of its range: near 0 or 1 no relative width is useful.
    let rel = if of_range { hw } else { relative(summary.mean, hw) };
    let needed = if sparse || rel <= asked { f64::from(run) } else { f64::from(run) * (rel / asked).powi(2) };
    Reached {
        metric: metric.to_string(),
        grid_point,
        mean: summary.mean,
        half_width: hw,
        relative: rel,
        asked,
        needed,
        of_range,
        sparse,
    }
}

/// Whether `a` is further from its goal than `b`: undefined (NaN) first, then by the
/// replicas it needs, then by its relative half-width (among the met, who need what ran).
fn less_precise(a: &Reached, b: &Reached) -> bool {
    let key = |r: &Reached| {
        let finite_or_max = |x: f64| if x.is_nan() { f64::INFINITY } else { x };
        (r.relative.is_nan() && !r.sparse, finite_or_max(r.needed), finite_or_max(r.relative))
    };
    key(a).partial_cmp(&key(b)) == Some(std::cmp::Ordering::Greater)
}

/// The replicas `r` needs, an undefined need counted as infinite.
fn need(r: &Reached) -> f64 {
    if r.needed.is_nan() {
        f64::INFINITY
    } else {
        r.needed
    }
}

/// [`reached`] in a finished run (or a merge of shards).
pub fn reached_in(goal: &Goal, report: &RunReport) -> Vec<Reached> {
    let points: Vec<(u32, Vec<Summary>, Vec<u64>)> =
        report.points.iter().map(|p| (p.index, p.summaries.clone(), p.covered.clone())).collect();
    reached(goal, &report.scenario, &points, report.scenario.run.replicas)
}

/// The replicas of the next stage after `run`, or `None` when the search stops.
fn next_stage(reached: &[Reached], run: u32, max: u32) -> Option<u32> {
    if reached.iter().all(Reached::met) || run >= max {
        return None;
    }
    let needed = reached.iter().filter(|r| !r.met()).map(need).fold(0.0f64, f64::max);
    let grow = |factor: f64| (f64::from(run) * factor).ceil();
    // NaN (an undefined metric) and ∞ grow as far as a stage may.
    let wanted = if needed.is_finite() { (needed * 1.05).ceil() } else { grow(8.0) };
    Some(wanted.clamp(grow(1.1), grow(8.0)).min(f64::from(max)) as u32)
}

/// Where the search stopped.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// Replicas a point: what the run is then made with.
    pub replicas: u32,
    /// The cumulative replicas a point after each stage.
    pub stages: Vec<u32>,
    pub reached: Vec<Reached>,
    /// Seconds of one core the search's replicas took (the run then costs about as much again).
    pub compute_s: f64,
}

/// Runs `scenario` in stages — `first` replicas a point, then as the estimates say —
/// until `goal` is met at every grid point or its `max_replicas` are run. `stage` is told each stage's replicas before it runs and
/// what it reached after; `progress` is called per replica.
pub fn search(
    scenario: &Scenario,
    goal: &Goal,
    first: u32,
    threads: usize,
    progress: &(dyn Fn() + Sync),
    stages: &mut dyn Stages,
) -> Result<Outcome> {
    let points = scenario.grid_points()?;
    let mut moments: Vec<Vec<Moments>> = vec![vec![Moments::default(); scenario.schema.metrics.len()]; points.len()];
    let mut run = 0u32;
    let mut next = first.clamp(2, goal.max_replicas);
    let mut done = Vec::new();
    let mut compute_s = 0.0;
    loop {
        stages.starting(run, next)?;
        let ranges = vec![run..next; points.len()];
        // Both sinks hand on to `stages`, as the runner calls them (records, then each point).
        let shared = std::cell::RefCell::new(&mut *stages);
        let mut records = |records: &[ReplicaRecord]| shared.borrow_mut().records(records);
        let mut point = |point: &GridPoint, result: PointResult| {
            for (total, part) in moments[point.index as usize].iter_mut().zip(&result.moments) {
                total.merge(part);
            }
            compute_s += result.compute_s;
            shared.borrow_mut().point(point, &result)
        };
        run_ranges(scenario, &ranges, threads, progress, Sinks { records: &mut records, point: &mut point })?;
        run = next;
        done.push(run);
        let summaries: Vec<(u32, Vec<Summary>, Vec<u64>)> = moments
            .iter()
            .enumerate()
            .map(|(p, m)| (p as u32, m.iter().map(Moments::summary).collect(), m.iter().map(Moments::count).collect()))
            .collect();
        // A named target no replica of any point gave a value for (`a / 0`) could
        // only ever be "met" vacuously: refused, after the pilot and before more.
        for &(metric, _) in &goal.checks {
            let named = goal.targets.iter().any(|t| t.metric.is_some());
            if named && summaries.iter().all(|(_, _, counts)| counts[metric] == 0) {
                let name = scenario.schema.metrics[metric].name;
                return Err(Error::bad_input(format!(
                    "--precision: {name} has no value in any of the {run} replicas of any grid point (a division by \
                     zero, or a quantity no replica reaches): a precision on it would be met vacuously; nothing was \
                     written"
                )));
            }
        }
        let reached = reached(goal, scenario, &summaries, run);
        stages.finished(run, &reached)?;
        match next_stage(&reached, run, goal.max_replicas) {
            Some(more) => next = more,
            None => return Ok(Outcome { replicas: run, stages: done, reached, compute_s }),
        }
    }
}

/// What [`search`] tells its caller as it goes, and where each stage's results go:
/// every stage starts, hands on its replicas' records (in order) and its points'
/// results (each a partial of replicas `from..to`), and finishes with what it reached.
pub trait Stages {
    fn starting(&mut self, _from: u32, _to: u32) -> Result<()> {
        Ok(())
    }
    fn records(&mut self, _records: &[ReplicaRecord]) -> Result<()> {
        Ok(())
    }
    fn point(&mut self, _point: &GridPoint, _result: &PointResult) -> Result<()> {
        Ok(())
    }
    fn finished(&mut self, _replicas: u32, _reached: &[Reached]) -> Result<()> {
        Ok(())
    }
}

/// A search that keeps nothing but its moments.
impl Stages for () {}

/// What a stage tells a person watching (the command's progress lines).
pub enum StageEvent<'a> {
    Starting { from: u32, to: u32 },
    Finished { replicas: u32, reached: &'a [Reached] },
}

/// The replicas a sharded run would need, estimated from a pilot of `pilot` replicas a
/// point: for each checked metric at each point, the replicas its pilot spread says,
/// with the spread taken at its 90% upper confidence bound (σ² ≤ s²·df/χ²₀.₁₀(df): a
/// pilot's standard deviation is itself uncertain, ±16% at 20 replicas), the most of
/// them, at least the pilot and at most the goal's limit. Returns the estimate, what
/// the pilot reached and its compute seconds.
pub fn estimate(
    scenario: &Scenario,
    goal: &Goal,
    pilot: u32,
    threads: usize,
    progress: &(dyn Fn() + Sync),
) -> Result<(u32, Vec<Reached>, f64)> {
    use statrs::distribution::{ChiSquared, ContinuousCDF};
    let limited = Goal { max_replicas: pilot, ..goal.clone() };
    let outcome = search(scenario, &limited, pilot, threads, progress, &mut ())?;
    debug_assert_eq!(outcome.replicas, pilot);
    let df = f64::from(pilot - 1);
    let upper = df / ChiSquared::new(df).expect("df ≥ 1").inverse_cdf(0.10);
    let needed = outcome
        .reached
        .iter()
        .filter(|r| !r.sparse)
        .map(|r| {
            if r.relative.is_nan() {
                f64::INFINITY
            } else {
                f64::from(pilot) * (r.relative / r.asked).powi(2) * upper
            }
        })
        .fold(f64::from(pilot), f64::max);
    Ok((needed.ceil().min(f64::from(goal.max_replicas)) as u32, outcome.reached, outcome.compute_s))
}

/// One line per checked metric: `wait_mean_s  0.84% of its mean ≤ 1%  (least precise at grid point 3)`.
pub fn lines(reached: &[Reached]) -> Vec<String> {
    let width = reached.iter().map(|r| r.metric.len()).max().unwrap_or(0);
    reached
        .iter()
        .map(|r| {
            let asked = percent(r.asked);
            let verdict = if r.sparse {
                "defined in under half the replicas at every grid point: not held to it".to_string()
            } else if r.relative.is_nan() {
                format!("undefined (fewer than 2 replicas gave a value) > {asked}")
            } else if r.relative.is_infinite() {
                format!("∞ (its mean is 0 and its replicas differ) > {asked}")
            } else if r.met() {
                format!("{} ≤ {asked}", r.shown())
            } else {
                format!("{} > {asked}, would need about {:.0} replicas", r.shown(), r.needed.ceil())
            };
            format!("{:<width$}  {verdict}  (least precise at grid point {})", r.metric, r.grid_point)
        })
        .collect()
}

/// The sentence a terminal, a report and a manifest show.
pub fn sentence(goal: &Goal, reached: &[Reached], replicas: u32) -> String {
    let short: Vec<&str> = reached.iter().filter(|r| !r.met()).map(|r| r.metric.as_str()).collect();
    if short.is_empty() {
        let binding = reached
            .iter()
            .filter(|r| !r.sparse)
            .reduce(|worst, r| if less_precise(r, worst) { r } else { worst })
            .unwrap_or(&reached[0]);
        format!(
            "precision {} met with {replicas} replicas a point; the one that needed the most: {} at grid point {} ({})",
            goal.asked(),
            binding.metric,
            binding.grid_point,
            binding.shown()
        )
    } else {
        let needed = reached.iter().map(need).fold(0.0f64, f64::max);
        let about =
            if needed.is_finite() { format!(" (it would take about {})", needed.ceil()) } else { String::new() };
        format!(
            "precision {} NOT met with {replicas} replicas a point: {} fell short{about}",
            goal.asked(),
            short.join(", ")
        )
    }
}

/// The manifest's `precision` object: what was asked, what was reached where, and
/// (for a run that searched) its stages.
pub fn to_json(goal: &Goal, reached: &[Reached], replicas: u32, stages: Option<&[u32]>) -> Value {
    let metrics: Vec<Value> = reached
        .iter()
        .map(|r| {
            json!({
                "metric": r.metric,
                "asked": r.asked,
                "reached": super::report::json_number(r.relative),
                "met": r.met(),
                "grid_point": r.grid_point,
                "mean": super::report::json_number(r.mean),
                "half_width": super::report::json_number(r.half_width),
                "relative_to": if r.of_range { "range" } else { "mean" },
            })
        })
        .collect();
    let mut object = json!({
        "asked": goal.targets.iter().map(Target::text).collect::<Vec<_>>(),
        "max_replicas": goal.max_replicas,
        "replicas": replicas,
        "met": reached.iter().all(Reached::met),
        "metrics": metrics,
        "sentence": sentence(goal, reached, replicas),
    });
    if let Some(stages) = stages {
        object["stages"] = json!(stages);
    }
    object
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiny_shares_print_as_targets_that_parse_back() {
        for share in [1e-9, 3.3e-7, 1e-5, 0.01, 0.005] {
            let text = percent(share);
            let back = Target::parse(&text).unwrap_or_else(|e| panic!("{share}: {text}: {e}"));
            assert!((back.relative - share).abs() <= 1e-3 * share, "{share} -> {text} -> {}", back.relative);
        }
        assert_eq!(percent(1e-9), "1e-7%");
    }

    #[test]
    fn targets_parse_as_written_and_refuse_what_is_not_a_share() {
        assert_eq!(Target::parse("1%").unwrap(), Target { metric: None, relative: 0.01 });
        assert_eq!(Target::parse("0.02").unwrap(), Target { metric: None, relative: 0.02 });
        let named = Target::parse("p99_s = 2.5%").unwrap();
        assert_eq!(named.metric.as_deref(), Some("p99_s"));
        assert!((named.relative - 0.025).abs() < 1e-15);
        assert_eq!(named.text(), "p99_s=2.5%");
        for bad in ["0", "0%", "1", "100%", "-1%", "abc", "=1%", "p99_s=", "nan"] {
            let error = Target::parse(bad).unwrap_err();
            assert_eq!(error.exit_code(), 2, "{bad}");
            assert!(error.to_string().contains("--precision"), "{bad}: {error}");
        }
        assert_eq!(percent(0.005), "0.5%");
        assert_eq!(percent(0.0123), "1.23%");
        assert_eq!(percent(0.25), "25%");
    }

    fn reach(relative: f64, asked: f64, needed: f64) -> Reached {
        let (of_range, sparse) = (false, false);
        Reached {
            metric: "m".into(),
            grid_point: 0,
            mean: 1.0,
            half_width: relative,
            relative,
            asked,
            needed,
            of_range,
            sparse,
        }
    }

    #[test]
    fn stages_grow_to_the_estimate_within_bounds_and_stop_at_the_limit() {
        // Met: stop.
        assert_eq!(next_stage(&[reach(0.009, 0.01, 20.0)], 20, 10_000), None);
        // Needs 100: 105 (5% over).
        assert_eq!(next_stage(&[reach(0.02236, 0.01, 100.0)], 20, 10_000), Some(105));
        // Needs barely more: at least 1.1×.
        assert_eq!(next_stage(&[reach(0.0101, 0.01, 20.4)], 20, 10_000), Some(22));
        // Needs far more: at most 8×, and an infinite need grows 8× too.
        assert_eq!(next_stage(&[reach(1.0, 0.01, 200_000.0)], 20, 10_000), Some(160));
        assert_eq!(next_stage(&[reach(f64::INFINITY, 0.01, f64::INFINITY)], 20, 10_000), Some(160));
        assert_eq!(next_stage(&[reach(f64::NAN, 0.01, f64::NAN)], 20, 10_000), Some(160));
        // The limit caps a stage and ends the search.
        assert_eq!(next_stage(&[reach(0.02236, 0.01, 100.0)], 20, 50), Some(50));
        assert_eq!(next_stage(&[reach(0.02236, 0.01, 100.0)], 50, 50), None);
    }

    /// Replica `replica` of synthetic stream `stream`: a Gamma(shape, rate shape) value
    /// (mean 1, coefficient of variation 1/√shape) as a sum of exponentials.
    fn gamma_replica(stream: u64, replica: u32, shape: u32) -> f64 {
        use stampede_engine::{RngStream, StreamPurpose};
        let mut rng = RngStream::derive(stream, u64::from(replica), StreamPurpose::named("precision.coverage"));
        (0..shape).map(|_| rng.exponential(f64::from(shape))).sum()
    }

    /// Runs one synthetic stream through a stopping rule — `next(reached, run)` gives the
    /// replicas after `run`, or `None` to stop — and says whether the interval it stops
    /// with covers the true mean 1, and at how many replicas.
    fn stop_and_cover(
        stream: u64,
        shape: u32,
        asked: f64,
        first: u32,
        next: impl Fn(&Reached, u32) -> Option<u32>,
    ) -> (bool, u32) {
        let mut moments = Moments::default();
        let (mut run, mut to) = (0, first);
        loop {
            (run..to).for_each(|r| moments.push(gamma_replica(stream, r, shape)));
            run = to;
            let reached = at_point("m", false, 0, &moments.summary(), moments.count(), run, asked);
            match next(&reached, run) {
                Some(more) => to = more,
                None => return ((reached.mean - 1.0).abs() <= reached.half_width, run),
            }
        }
    }

    /// Issue 73, item 3: the interval a `--precision` run stops with is the plain
    /// Student-t interval of the replicas that decided to stop, so it could cover less
    /// than its 95% (a stop is likelier where the spread happens to come out low). Over
    /// 2,000 synthetic streams a case, the staged rule covers within [93%, 97%] — where
    /// the bias is largest, few replicas (about 56 and 23), and where the data are skewed
    /// (exponential, about 400). The harness can fail: a rule that checks after every
    /// replica from the third stops on lucky spreads and covers well under 93%.
    #[test]
    fn the_stopping_rule_keeps_its_coverage_and_a_greedy_rule_does_not() {
        const STREAMS: u64 = 2_000;
        let staged = |r: &Reached, run: u32| next_stage(std::slice::from_ref(r), run, 100_000);
        for (shape, asked) in [(35, 0.05), (35, 0.08), (1, 0.10)] {
            let (mut covered, mut replicas) = (0u64, 0u64);
            for stream in 0..STREAMS {
                let (cover, run) = stop_and_cover(stream, shape, asked, FIRST_STAGE, staged);
                covered += u64::from(cover);
                replicas += u64::from(run);
            }
            let share = covered as f64 / STREAMS as f64;
            eprintln!(
                "Gamma({shape}) at {asked}: covered {covered} of {STREAMS}, {:.1} replicas on average",
                replicas as f64 / STREAMS as f64
            );
            assert!((0.93..=0.97).contains(&share), "Gamma({shape}) at {asked}: covered {share}");
        }
        let greedy = |r: &Reached, run: u32| (!r.met()).then_some(run + 1);
        let covered: u64 = (0..STREAMS).map(|s| u64::from(stop_and_cover(s, 35, 0.12, 3, greedy).0)).sum();
        eprintln!("greedy rule: covered {covered} of {STREAMS}");
        assert!((covered as f64) < 0.93 * STREAMS as f64, "the harness would not see a greedy rule: {covered}");
    }

    #[test]
    fn relative_precision_of_degenerate_intervals() {
        assert_eq!(relative(5.0, 0.0), 0.0);
        assert_eq!(relative(0.0, 0.0), 0.0);
        assert_eq!(relative(0.0, 0.1), f64::INFINITY);
        assert!((relative(-2.0, 0.1) - 0.05).abs() < 1e-15);
        assert!(relative(1.0, f64::NAN).is_nan());
        assert!(!reach(f64::NAN, 0.01, f64::NAN).met());
        assert!(!reach(f64::INFINITY, 0.01, f64::INFINITY).met());
        assert!(reach(0.0, 0.01, 20.0).met());
    }
}
