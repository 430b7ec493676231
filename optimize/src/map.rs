//! `stampede map`: the stability map — over two numeric fields (a fault's factor ×
//! its duration, load × retry budget, timeout × attempts), where a metric crosses a
//! level (`recovered_ratio` = 0.5 by default: half the replicas recover).
//!
//! For each of `ys` values of y (evenly spread over its range, on its scale) and each
//! of the scenario's own grid points, the x where the metric's mean crosses the level
//! is found by bisection in x's unit interval: both ends first, then the midpoint of
//! every open bracket, all (grid point, y) rows of a round run together as one grid,
//! every evaluation on the same replicas `0..R` (common random numbers: neighbouring x
//! values differ by the field, not by the draws). A row whose ends lie on one side has
//! no boundary in the range, which is said, not an error. Bisection assumes the metric
//! moves one way in x, as a stability boundary does; a row that is not monotone shows
//! it in its evaluations, which are all kept.
//!
//! The boundary is the linear interpolation of the mean between the last bracket's ends.
//! Its band is bounded by the nearest evaluations on each side whose 95% interval lies
//! wholly on their side of the level: between them the replicas cannot tell which side
//! a point is on. The cost is stated against the full grid of the same resolution.

use serde_json::{json, Value};
use stampede_run::runner::{run_ranges, PointResult, ReplicaRecord, Sinks};
use stampede_scenario::base::error::{Error, Result};
use stampede_scenario::models::metrics::Direction;
use stampede_scenario::resolved::{GridPoint, Scenario};

use super::driver::Candidates;
use super::search::Point;
use super::space::{Dimension, Scale};

/// What the user asked.
#[derive(Clone, Debug)]
pub struct MapRequest {
    pub x: Dimension,
    pub y: Dimension,
    /// Values of y (rows of the map), ends included.
    pub ys: u32,
    pub metric: String,
    pub level: f64,
    /// Bisection stops when a bracket is at most this share of x's range (in its unit interval).
    pub tolerance: f64,
    pub replicas: u32,
}

/// The finest bracket a map bisects to, as a share of x's range: about 2⁻²⁰, twenty
/// rounds. A finer one is below what any replica count resolves, and under 1e-16 the
/// bracket stops shrinking at all (the midpoint of two adjacent floats is one of them).
pub const MIN_TOLERANCE: f64 = 1e-6;

impl MapRequest {
    /// The most replicas the map can run: every row of every grid point its two ends
    /// and every bisection round, at `replicas` an evaluation.
    pub fn planned_replicas(&self, scenario: &Scenario) -> u64 {
        let rows = scenario.point_count() as u64 * u64::from(self.ys);
        rows * (2 + u64::from(Self::rounds_for(self.tolerance))) * u64::from(self.replicas)
    }

    /// The bisection rounds after the ends that narrow a bracket to `tolerance`: the
    /// most any row runs (a row stops earlier when its ends do not cross).
    pub fn rounds_for(tolerance: f64) -> u32 {
        (1.0 / tolerance).log2().ceil().max(0.0) as u32
    }

    /// Checks the request against `scenario` before anything runs: the metric exists,
    /// the level is a number, both paths are numbers the scenario can take and no grid
    /// axis; returns the metric's column.
    pub fn check(&self, scenario: &Scenario) -> Result<usize> {
        let names = scenario.schema.metric_names();
        let column = scenario.schema.metric_index(&self.metric).ok_or_else(|| {
            Error::bad_input(format!(
                "--metric {}: not a metric of model {}{}",
                self.metric,
                scenario.model.name(),
                stampede_scenario::base::suggest::did_you_mean(
                    &self.metric,
                    &names,
                    "metrics",
                    "a run's manifest.json"
                )
            ))
        })?;
        if !self.level.is_finite() {
            return Err(Error::bad_input(format!("--level {}: must be a number", self.level)));
        }
        if !(MIN_TOLERANCE..0.5).contains(&self.tolerance) {
            return Err(Error::bad_input(format!(
                "--tolerance {}: a share of the x range from {MIN_TOLERANCE:e} to below 0.5 (e.g. 0.015625, 1/64); \
                 {MIN_TOLERANCE:e} already takes {} bisection rounds",
                self.tolerance,
                Self::rounds_for(MIN_TOLERANCE)
            )));
        }
        if !(2..=1000).contains(&self.ys) {
            return Err(Error::bad_input(format!("--ys {}: from 2 to 1000 rows", self.ys)));
        }
        if self.x.path == self.y.path {
            return Err(Error::bad_input(format!("--x and --y are both {}: map two different fields", self.x.path)));
        }
        let source: toml::Table = toml::from_str(&scenario.to_toml())
            .map_err(|e| Error::bad_input(format!("the resolved scenario does not parse back: {e}")))?;
        for (flag, dimension) in [("--x", &self.x), ("--y", &self.y)] {
            let overlaps = |axis: &str| {
                axis == dimension.path
                    || dimension.path.starts_with(&format!("{axis}."))
                    || axis.starts_with(&format!("{}.", dimension.path))
            };
            if scenario.grid.iter().any(|axis| overlaps(&axis.path)) {
                return Err(Error::bad_input(format!(
                    "{flag} {}: the scenario's grid sets it (or the table holding it); map it, or keep it as the grid's values, not both",
                    dimension.path
                )));
            }
            match stampede_scenario::scenario::overrides::value_at(&source, &dimension.path) {
                Some(toml::Value::Float(_)) | None => {}
                Some(toml::Value::Integer(_)) if dimension.scale == Scale::Integer => {}
                Some(toml::Value::Integer(value)) if dimension.scale != Scale::Integer => {
                    return Err(Error::bad_input(format!(
                        "{flag} {}: the field is an integer ({value}); map it as one: {flag} '{}={}..{}:int'",
                        dimension.path, dimension.path, dimension.low, dimension.high
                    )));
                }
                Some(other) => {
                    return Err(Error::bad_input(format!(
                        "{flag} {}: not a number (the scenario has {}); a map needs two numeric fields",
                        dimension.path,
                        stampede_scenario::base::typing::describe(other)
                    )));
                }
            }
        }
        Ok(column)
    }
}

/// Which side of the level a value is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    Above,
    Below,
}

impl Side {
    fn of(mean: f64, level: f64) -> Side {
        if mean >= level {
            Side::Above
        } else {
            Side::Below
        }
    }

    pub fn word(self) -> &'static str {
        match self {
            Side::Above => "above",
            Side::Below => "below",
        }
    }
}

/// One simulated (grid point, y, x): the metric's mean and 95% interval over the replicas.
#[derive(Clone, Debug, PartialEq)]
pub struct Evaluation {
    pub grid: u32,
    pub row: usize,
    pub y: f64,
    pub x: f64,
    pub mean: f64,
    pub ci_lo: f64,
    pub ci_hi: f64,
    /// The bisection round it ran in (0: the ends).
    pub round: u32,
    /// The model refused the point as overloaded (why): not run, its mean ±∞ on the
    /// side a growing load takes the metric (beyond any level).
    pub refused: Option<String>,
}

/// Where a row crosses the level, or which side it stays on.
#[derive(Clone, Debug, PartialEq)]
pub enum Crossing {
    Boundary {
        x: f64,
        band: (f64, f64),
        /// The side of the level at x's low end (the other side is past the boundary).
        low_side: Side,
    },
    Never {
        side: Side,
    },
    /// The metric is undefined at an end (no replica gave a value).
    Undefined,
}

/// One row of the map: a base grid point at one y.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub grid: u32,
    pub y: f64,
    pub crossing: Crossing,
    pub evaluations: u32,
    /// No two of its evaluations say the metric rises in x and two others that it
    /// falls, each beyond their intervals (see [`monotone`]): where it does, the
    /// bisection's boundary may be one of several.
    pub monotone: bool,
}

/// The finished map.
#[derive(Clone, Debug)]
pub struct StabilityMap {
    pub request: MapRequest,
    pub direction: Direction,
    /// Each base grid point's label (its parameters).
    pub labels: Vec<String>,
    pub rows: Vec<Row>,
    pub evaluations: Vec<Evaluation>,
    pub rounds: u32,
}

impl StabilityMap {
    /// Evaluations the full grid of this resolution would need: every x at the
    /// tolerance's spacing (or every integer) for every row.
    pub fn full_grid_evaluations(&self) -> u64 {
        let per_row = match self.request.x.scale {
            Scale::Integer => (self.request.x.high - self.request.x.low) as u64 + 1,
            _ => (1.0 / self.request.tolerance).ceil() as u64 + 1,
        };
        per_row * self.rows.len() as u64
    }

    /// The evaluations the model refused as overloaded (not run; beyond the level).
    pub fn refused(&self) -> impl Iterator<Item = &Evaluation> {
        self.evaluations.iter().filter(|e| e.refused.is_some())
    }

    /// Which side of the level is better, if the metric has a direction.
    pub fn good_side(&self) -> Option<Side> {
        match self.direction {
            Direction::Higher => Some(Side::Above),
            Direction::Lower => Some(Side::Below),
            Direction::Neither => None,
        }
    }

    /// How a side is named: `recovers`/`stays stuck` for a metric with a direction
    /// (`recovered_ratio`), else `above 0.5`/`below 0.5`.
    pub fn side_name(&self, side: Side) -> String {
        let level = self.request.level;
        match self.good_side() {
            Some(good) if good == side => {
                format!("{} {} {level} (better)", self.request.metric, if side == Side::Above { "≥" } else { "<" })
            }
            Some(_) => {
                format!("{} {} {level} (worse)", self.request.metric, if side == Side::Above { "≥" } else { "<" })
            }
            None => format!("{} {} {level}", self.request.metric, if side == Side::Above { "≥" } else { "<" }),
        }
    }

    /// The `--json` document (and `map.json`).
    pub fn to_json(&self) -> Value {
        let number = stampede_run::report::json_number;
        let rows: Vec<Value> = self
            .rows
            .iter()
            .map(|row| {
                let mut object = json!({
                    "grid_point": row.grid,
                    "label": self.labels[row.grid as usize],
                    "y": row.y,
                    "evaluations": row.evaluations,
                    "monotone": row.monotone,
                });
                match &row.crossing {
                    Crossing::Boundary { x, band, low_side } => {
                        object["crossed"] = json!(true);
                        object["boundary_x"] = number(*x);
                        object["band"] = json!([number(band.0), number(band.1)]);
                        object["below_boundary"] = json!(low_side.word());
                    }
                    Crossing::Never { side } => {
                        object["crossed"] = json!(false);
                        object["side"] = json!(side.word());
                    }
                    Crossing::Undefined => {
                        object["crossed"] = json!(false);
                        object["side"] = json!("undefined");
                    }
                }
                object
            })
            .collect();
        let evaluations: Vec<Value> = self
            .evaluations
            .iter()
            .map(|e| {
                let mut object = json!({"grid_point": e.grid, "y": e.y, "x": e.x, "round": e.round,
                       "mean": number(e.mean), "ci_lo": number(e.ci_lo), "ci_hi": number(e.ci_hi)});
                if let Some(why) = &e.refused {
                    object["refused"] = json!(why);
                }
                object
            })
            .collect();
        json!({
            "x": {"path": self.request.x.path, "low": self.request.x.low, "high": self.request.x.high},
            "y": {"path": self.request.y.path, "low": self.request.y.low, "high": self.request.y.high},
            "metric": self.request.metric,
            "level": self.request.level,
            "tolerance": self.request.tolerance,
            "replicas": self.request.replicas,
            "rounds": self.rounds,
            "evaluations_run": self.evaluations.iter().filter(|e| e.refused.is_none()).count(),
            "evaluations_refused": self.refused().count(),
            "full_grid_evaluations": self.full_grid_evaluations(),
            "rows": rows,
            "evaluations": evaluations,
        })
    }
}

/// A round's points resolved: the scenario of those that run (`None` when none does)
/// and, for each of `points`, why the model refuses it as overloaded (`None`: it
/// runs). Resolved as one batch; only when that is refused for an overload is each
/// point resolved alone, and the rest again as one. Any other refusal is an error of
/// the map.
fn resolve_round(candidates: &mut Candidates, points: &[Point]) -> Result<(Option<Scenario>, Vec<Option<String>>)> {
    match candidates.scenario(points) {
        Ok(batch) => return Ok((Some(batch), vec![None; points.len()])),
        Err(error) if !error.overloaded => return Err(error),
        Err(_) => {}
    }
    let refused = points
        .iter()
        .map(|point| match candidates.scenario(std::slice::from_ref(point)) {
            Ok(_) => Ok(None),
            Err(error) if error.overloaded => Ok(Some(error.message)),
            Err(error) => Err(error),
        })
        .collect::<Result<Vec<_>>>()?;
    let run: Vec<Point> = points.iter().zip(&refused).filter(|(_, r)| r.is_none()).map(|(p, _)| p.clone()).collect();
    let batch = if run.is_empty() { None } else { Some(candidates.scenario(&run)?) };
    Ok((batch, refused))
}

/// Whether a row's evaluations are consistent with a metric that moves one way in x:
/// false when one pair (in x order) rises and another falls, each surely (the later
/// one's 95% interval wholly above, or below, the earlier one's). Bisection assumes one
/// crossing; a row that is not monotone may cross the level more than once.
pub fn monotone(evaluations: &[&Evaluation]) -> bool {
    let mut sorted: Vec<&&Evaluation> = evaluations.iter().filter(|e| !e.mean.is_nan()).collect();
    sorted.sort_by(|a, b| a.x.total_cmp(&b.x));
    let (mut rises, mut falls) = (false, false);
    for (i, a) in sorted.iter().enumerate() {
        for b in &sorted[i + 1..] {
            rises |= b.ci_lo > a.ci_hi;
            falls |= b.ci_hi < a.ci_lo;
        }
    }
    !(rises && falls)
}

/// A row's bisection state.
struct Bracket {
    grid: u32,
    y: f64,
    /// (u, mean) at each end; None until the ends ran.
    low: Option<(f64, f64)>,
    high: Option<(f64, f64)>,
    done: bool,
}

/// Draws the map of `scenario` (resolved, `request` checked) on `threads` threads;
/// `round_starts` is told each round's number and how many evaluations it runs.
pub fn map(
    scenario: &Scenario,
    request: &MapRequest,
    threads: usize,
    progress: &(dyn Fn() + Sync),
    round_starts: &mut dyn FnMut(u32, usize),
) -> Result<StabilityMap> {
    let column = request.check(scenario)?;
    let dimensions = [request.x.clone(), request.y.clone()];
    let mut candidates = Candidates::new(scenario, &dimensions)?.without_claims();
    let base_points = scenario.point_count();
    let mut ys: Vec<f64> = (0..request.ys).map(|j| request.y.value(f64::from(j) / f64::from(request.ys - 1))).collect();
    ys.dedup(); // an integer y has fewer values than rows asked
    let mut brackets: Vec<Bracket> = (0..base_points)
        .flat_map(|grid| ys.iter().map(move |&y| Bracket { grid, y, low: None, high: None, done: false }))
        .collect();
    let mut evaluations: Vec<Evaluation> = Vec::new();
    let mut round = 0u32;
    loop {
        // This round's (row, u): the ends first, then each open bracket's midpoint.
        let mut asked: Vec<(usize, f64)> = Vec::new();
        for (row, bracket) in brackets.iter().enumerate().filter(|(_, b)| !b.done) {
            match (bracket.low, bracket.high) {
                (None, _) | (_, None) => asked.extend([(row, 0.0), (row, 1.0)]),
                (Some((lo, _)), Some((hi, _))) => asked.push((row, (lo + hi) / 2.0)),
            }
        }
        if asked.is_empty() {
            break;
        }
        round_starts(round, asked.len());
        let points: Vec<Point> = asked
            .iter()
            .map(|&(row, u)| Point {
                grid: brackets[row].grid,
                unit: vec![u],
                values: vec![request.x.value(u), brackets[row].y],
            })
            .collect();
        // A point the model refuses as overloaded (no steady state, or past the event
        // budget) is not run: it is beyond the level, on the side a growing load takes
        // the metric to.
        let (batch, refused) = resolve_round(&mut candidates, &points)?;
        let run = refused.iter().filter(|r| r.is_none()).count();
        let mut means = vec![None; run];
        if let Some(batch) = batch {
            let mut records = |_: &[ReplicaRecord]| Ok(());
            let mut fold = |point: &GridPoint, result: PointResult| {
                means[point.index as usize] = Some(result.summaries[column]);
                Ok(())
            };
            let ranges = vec![0..request.replicas; run];
            run_ranges(&batch, &ranges, threads, progress, Sinks { records: &mut records, point: &mut fold })?;
        }
        let mut ran = means.into_iter();
        let beyond = if scenario.schema.metrics[column].direction == Direction::Higher {
            f64::NEG_INFINITY
        } else {
            f64::INFINITY
        };
        for (&(row, u), refusal) in asked.iter().zip(refused) {
            let summary = match &refusal {
                None => ran.next().flatten().expect("every point of a round that is not refused is run"),
                Some(_) => stampede_run::stats::Summary { mean: beyond, sd: f64::NAN, ci_lo: beyond, ci_hi: beyond },
            };
            let bracket = &mut brackets[row];
            evaluations.push(Evaluation {
                grid: bracket.grid,
                row,
                y: bracket.y,
                x: request.x.value(u),
                mean: summary.mean,
                ci_lo: summary.ci_lo,
                ci_hi: summary.ci_hi,
                round,
                refused: refusal,
            });
            let mean = summary.mean;
            if round == 0 {
                if u == 0.0 {
                    bracket.low = Some((u, mean));
                } else {
                    bracket.high = Some((u, mean));
                }
                continue;
            }
            let (lo, hi) = (bracket.low.expect("ends ran"), bracket.high.expect("ends ran"));
            debug_assert!(lo.0 < u && u < hi.0, "a midpoint lies inside its bracket");
            if Side::of(mean, request.level) == Side::of(lo.1, request.level) {
                bracket.low = Some((u, mean));
            } else {
                bracket.high = Some((u, mean));
            }
        }
        for bracket in brackets.iter_mut().filter(|b| !b.done) {
            let (lo, hi) = (bracket.low.expect("ends ran"), bracket.high.expect("ends ran"));
            let crosses =
                !lo.1.is_nan() && !hi.1.is_nan() && Side::of(lo.1, request.level) != Side::of(hi.1, request.level);
            let narrow = match request.x.scale {
                Scale::Integer => request.x.value(hi.0) - request.x.value(lo.0) <= 1.0,
                _ => hi.0 - lo.0 <= request.tolerance,
            };
            bracket.done = !crosses || narrow;
        }
        round += 1;
    }
    let rows = brackets
        .iter()
        .enumerate()
        .map(|(row, bracket)| {
            let mine: Vec<&Evaluation> = evaluations.iter().filter(|e| e.row == row).collect();
            let (lo, hi) = (bracket.low.expect("ends ran"), bracket.high.expect("ends ran"));
            let crossing = if lo.1.is_nan() || hi.1.is_nan() {
                Crossing::Undefined
            } else if Side::of(lo.1, request.level) == Side::of(hi.1, request.level) {
                Crossing::Never { side: Side::of(lo.1, request.level) }
            } else {
                // Linear between the two ends; an end refused as overloaded (±∞) has
                // no value to interpolate with: the bracket's middle.
                let t = if lo.1.is_finite() && hi.1.is_finite() {
                    ((request.level - lo.1) / (hi.1 - lo.1)).clamp(0.0, 1.0)
                } else {
                    0.5
                };
                let x = request.x.unrounded(lo.0 + t * (hi.0 - lo.0));
                let low_side = Side::of(lo.1, request.level);
                let sure = |e: &Evaluation, side: Side| match side {
                    Side::Above => e.ci_lo >= request.level,
                    Side::Below => e.ci_hi < request.level,
                };
                let other = if low_side == Side::Above { Side::Below } else { Side::Above };
                let band_lo =
                    mine.iter().filter(|e| e.x <= x && sure(e, low_side)).map(|e| e.x).fold(request.x.low, f64::max);
                let band_hi =
                    mine.iter().filter(|e| e.x >= x && sure(e, other)).map(|e| e.x).fold(request.x.high, f64::min);
                Crossing::Boundary { x, band: (band_lo, band_hi), low_side }
            };
            Row {
                grid: bracket.grid,
                y: bracket.y,
                crossing,
                evaluations: mine.len() as u32,
                monotone: monotone(&mine),
            }
        })
        .collect();
    if let Some(first) = evaluations.first().filter(|_| evaluations.iter().all(|e| e.refused.is_some())) {
        return Err(Error::bad_input(format!(
            "map: the model refuses every point it tried as overloaded, so there is nothing to map; for one: {}",
            first.refused.as_deref().unwrap_or_default()
        ))
        .with_hint("narrow --x or --y to where the model has a steady state, or bound its queue"));
    }
    let labels = (0..base_points)
        .map(|p| {
            let params = scenario.grid_point(p).map(|g| g.params).unwrap_or_default();
            if params.is_empty() {
                scenario.name.clone()
            } else {
                params
                    .iter()
                    .map(|(k, v)| format!("{k} = {}", stampede_scenario::base::typing::describe(v)))
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        })
        .collect();
    Ok(StabilityMap {
        request: request.clone(),
        direction: scenario.schema.metrics[column].direction,
        labels,
        rows,
        evaluations,
        rounds: round,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(x: f64, mean: f64, half: f64) -> Evaluation {
        Evaluation { grid: 0, row: 0, y: 1.0, x, mean, ci_lo: mean - half, ci_hi: mean + half, round: 0, refused: None }
    }

    /// Issue 73, item 4: a row that surely rises and surely falls is flagged; noise
    /// within the intervals, a plateau and a refused (+∞) end are not.
    #[test]
    fn a_row_that_rises_and_falls_beyond_its_intervals_is_not_monotone() {
        let check = |points: &[Evaluation]| monotone(&points.iter().collect::<Vec<_>>());
        assert!(check(&[at(1.0, 0.1, 0.01), at(2.0, 0.2, 0.01), at(3.0, 0.5, 0.01)]));
        assert!(check(&[at(1.0, 0.1, 0.05), at(2.0, 0.12, 0.05), at(3.0, 0.09, 0.05), at(4.0, 0.6, 0.05)]), "noise");
        assert!(check(&[at(1.0, 0.1, 0.01), at(2.0, f64::INFINITY, 0.0)]), "a refused end is beyond, not a fall");
        assert!(!check(&[at(1.0, 0.1, 0.01), at(2.0, 0.5, 0.01), at(3.0, 0.1, 0.01)]), "up then down");
        assert!(!check(&[at(3.0, 0.1, 0.01), at(1.0, 0.1, 0.01), at(2.0, 0.5, 0.01)]), "in x order, not run order");
    }
}
