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
//! a point is on. Once a row's boundary is found, each edge of its band is bisected the
//! same way (between the nearest sure evaluation and the nearest unsure one, to the
//! tolerance), in the same rounds as the other rows. The cost is stated against the
//! full grid of the same resolution.

use serde_json::{json, Value};
use stampede_run::runner::{run_ranges, PointResult, ReplicaRecord, Sinks};
use stampede_run::stats::Summary;
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
    /// The most replicas the map can run: every row of every grid point its two ends,
    /// every bisection round of its boundary and of its band's two edges, at
    /// `replicas` an evaluation.
    pub fn planned_replicas(&self, scenario: &Scenario) -> u64 {
        let rows = scenario.point_count() as u64 * u64::from(self.ys);
        rows * (2 + 3 * u64::from(Self::rounds_for(self.tolerance))) * u64::from(self.replicas)
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
    /// The boundary's bracket is narrow, or the row does not cross.
    done: bool,
    /// Every evaluation of the row: (u, ci_lo, ci_hi).
    seen: Vec<(f64, f64, f64)>,
    /// The band's two edges being bisected, once the boundary is found; `None` once
    /// narrow, or where no evaluation on that side is sure (the band reaches the end).
    edges: [Option<Edge>; 2],
}

impl Bracket {
    fn new(grid: u32, y: f64) -> Bracket {
        Bracket { grid, y, low: None, high: None, done: false, seen: Vec::new(), edges: [None, None] }
    }

    /// This round's evaluations of row `row` as (row, u, purpose): the ends first,
    /// then the open bracket's midpoint; once the boundary is found, its band's
    /// edges' midpoints.
    fn asks(&self, row: usize, asked: &mut Vec<(usize, f64, Purpose)>) {
        if self.done {
            for (k, edge) in self.edges.iter().enumerate() {
                if let Some(edge) = edge {
                    asked.push((row, edge.midpoint(), Purpose::BandEdge(k)));
                }
            }
            return;
        }
        match (self.low, self.high) {
            (None, _) | (_, None) => asked.extend([(row, 0.0, Purpose::Boundary), (row, 1.0, Purpose::Boundary)]),
            (Some((lo, _)), Some((hi, _))) => asked.push((row, (lo + hi) / 2.0, Purpose::Boundary)),
        }
    }

    /// Takes in round `round`'s evaluation at `u`, made for `purpose`.
    fn record(&mut self, u: f64, summary: &Summary, purpose: Purpose, round: u32, request: &MapRequest) {
        self.seen.push((u, summary.ci_lo, summary.ci_hi));
        if let Purpose::BandEdge(k) = purpose {
            let edge = self.edges[k].as_mut().expect("an edge asked is open");
            edge.record(u, summary.ci_lo, summary.ci_hi, request.level);
            if edge.narrow(&request.x, request.tolerance) {
                self.edges[k] = None;
            }
            return;
        }
        let mean = summary.mean;
        if round == 0 {
            if u == 0.0 {
                self.low = Some((u, mean));
            } else {
                self.high = Some((u, mean));
            }
            return;
        }
        let (lo, hi) = (self.low.expect("ends ran"), self.high.expect("ends ran"));
        debug_assert!(lo.0 < u && u < hi.0, "a midpoint lies inside its bracket");
        if Side::of(mean, request.level) == Side::of(lo.1, request.level) {
            self.low = Some((u, mean));
        } else {
            self.high = Some((u, mean));
        }
    }

    /// After a round: done once the bracket is narrow or the row does not cross; a
    /// row that crosses then bisects its band's edges.
    fn close_round(&mut self, request: &MapRequest) {
        let (lo, hi) = (self.low.expect("ends ran"), self.high.expect("ends ran"));
        let crosses =
            !lo.1.is_nan() && !hi.1.is_nan() && Side::of(lo.1, request.level) != Side::of(hi.1, request.level);
        let narrow = match request.x.scale {
            Scale::Integer => request.x.value(hi.0) - request.x.value(lo.0) <= 1.0,
            _ => hi.0 - lo.0 <= request.tolerance,
        };
        self.done = !crosses || narrow;
        if crosses && narrow {
            let low_side = Side::of(lo.1, request.level);
            self.edges = Edge::of_row(&self.seen, lo.0, hi.0, low_side, request.level)
                .map(|edge| edge.filter(|e| !e.narrow(&request.x, request.tolerance)));
        }
    }

    /// Where the finished row crosses the level, with its band from the row's
    /// evaluations (`mine`).
    fn crossing(&self, mine: &[&Evaluation], request: &MapRequest) -> Crossing {
        let (lo, hi) = (self.low.expect("ends ran"), self.high.expect("ends ran"));
        if lo.1.is_nan() || hi.1.is_nan() {
            return Crossing::Undefined;
        }
        let low_side = Side::of(lo.1, request.level);
        if low_side == Side::of(hi.1, request.level) {
            return Crossing::Never { side: low_side };
        }
        // Linear between the two ends; an end refused as overloaded (±∞) has no value
        // to interpolate with: the bracket's middle.
        let t = if lo.1.is_finite() && hi.1.is_finite() {
            ((request.level - lo.1) / (hi.1 - lo.1)).clamp(0.0, 1.0)
        } else {
            0.5
        };
        let x = request.x.unrounded(lo.0 + t * (hi.0 - lo.0));
        let sure = |e: &Evaluation, side: Side| Edge::sure_of(side, e.ci_lo, e.ci_hi, request.level);
        let other = if low_side == Side::Above { Side::Below } else { Side::Above };
        let band_lo = mine.iter().filter(|e| e.x <= x && sure(e, low_side)).map(|e| e.x).fold(request.x.low, f64::max);
        let band_hi = mine.iter().filter(|e| e.x >= x && sure(e, other)).map(|e| e.x).fold(request.x.high, f64::min);
        Crossing::Boundary { x, band: (band_lo, band_hi), low_side }
    }
}

/// One edge of a boundary's band, bisected like the boundary: between `sure` (the
/// nearest evaluation whose 95% interval lies wholly on `side` of the level) and
/// `unsure` (the nearest one closer to the boundary whose interval does not).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Edge {
    side: Side,
    sure: f64,
    unsure: f64,
}

impl Edge {
    /// Whether an interval lies wholly on `side` of `level`.
    fn sure_of(side: Side, ci_lo: f64, ci_hi: f64, level: f64) -> bool {
        match side {
            Side::Above => ci_lo >= level,
            Side::Below => ci_hi < level,
        }
    }

    /// The edges of a row whose boundary lies between `lo` and `hi` (unit points, `lo`
    /// on `low_side`), from what the row has seen.
    fn of_row(seen: &[(f64, f64, f64)], lo: f64, hi: f64, low_side: Side, level: f64) -> [Option<Edge>; 2] {
        let other = if low_side == Side::Above { Side::Below } else { Side::Above };
        let sure = |side: Side| move |&&(_, ci_lo, ci_hi): &&(f64, f64, f64)| Edge::sure_of(side, ci_lo, ci_hi, level);
        let below = seen.iter().filter(|p| p.0 <= lo).filter(sure(low_side)).map(|p| p.0).reduce(f64::max);
        let above = seen.iter().filter(|p| p.0 >= hi).filter(sure(other)).map(|p| p.0).reduce(f64::min);
        let low_edge = below.map(|sure| Edge {
            side: low_side,
            sure,
            unsure: seen.iter().map(|p| p.0).filter(|&u| u > sure).fold(hi, f64::min),
        });
        let high_edge = above.map(|sure| Edge {
            side: other,
            sure,
            unsure: seen.iter().map(|p| p.0).filter(|&u| u < sure).fold(lo, f64::max),
        });
        [low_edge, high_edge]
    }

    /// Narrow enough to stop: as the boundary's bracket (`tolerance` of the unit
    /// interval, or adjacent integers).
    fn narrow(&self, x: &Dimension, tolerance: f64) -> bool {
        match x.scale {
            Scale::Integer => (x.value(self.sure) - x.value(self.unsure)).abs() <= 1.0,
            _ => (self.sure - self.unsure).abs() <= tolerance,
        }
    }

    fn midpoint(&self) -> f64 {
        (self.sure + self.unsure) / 2.0
    }

    /// Moves the sure or the unsure end to `u`, by what its interval says.
    fn record(&mut self, u: f64, ci_lo: f64, ci_hi: f64, level: f64) {
        if Edge::sure_of(self.side, ci_lo, ci_hi, level) {
            self.sure = u;
        } else {
            self.unsure = u;
        }
    }
}

/// What a round's evaluation of a row is for.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Purpose {
    /// An end of the row, or the boundary's bracket's midpoint.
    Boundary,
    /// The midpoint of the band's low (0) or high (1) edge.
    BandEdge(usize),
}

/// Each row's result: where it crosses the level, how many points it ran, whether
/// its metric moved one way.
fn rows(brackets: &[Bracket], evaluations: &[Evaluation], request: &MapRequest) -> Vec<Row> {
    brackets
        .iter()
        .enumerate()
        .map(|(row, bracket)| {
            let mine: Vec<&Evaluation> = evaluations.iter().filter(|e| e.row == row).collect();
            Row {
                grid: bracket.grid,
                y: bracket.y,
                crossing: bracket.crossing(&mine, request),
                evaluations: mine.len() as u32,
                monotone: monotone(&mine),
            }
        })
        .collect()
}

impl Evaluation {
    /// Row `row`'s point at `x` in `round`: its summary, and why the model refused it.
    fn of(
        bracket: &Bracket,
        (row, x): (usize, f64),
        summary: &Summary,
        (round, refused): (u32, Option<String>),
    ) -> Self {
        Evaluation {
            grid: bracket.grid,
            row,
            y: bracket.y,
            x,
            mean: summary.mean,
            ci_lo: summary.ci_lo,
            ci_hi: summary.ci_hi,
            round,
            refused,
        }
    }
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
    let mut brackets: Vec<Bracket> =
        (0..base_points).flat_map(|grid| ys.iter().map(move |&y| Bracket::new(grid, y))).collect();
    let mut evaluations: Vec<Evaluation> = Vec::new();
    let mut round = 0u32;
    loop {
        let mut asked: Vec<(usize, f64, Purpose)> = Vec::new();
        for (row, bracket) in brackets.iter().enumerate() {
            bracket.asks(row, &mut asked);
        }
        if asked.is_empty() {
            break;
        }
        round_starts(round, asked.len());
        let points: Vec<Point> = asked
            .iter()
            .map(|&(row, u, _)| Point {
                grid: brackets[row].grid,
                unit: vec![u],
                values: vec![request.x.value(u), brackets[row].y],
            })
            .collect();
        let summaries = run_round(scenario, &mut candidates, &points, column, request, threads, progress)?;
        for (&(row, u, purpose), (summary, refusal)) in asked.iter().zip(summaries) {
            let bracket = &mut brackets[row];
            evaluations.push(Evaluation::of(bracket, (row, request.x.value(u)), &summary, (round, refusal)));
            bracket.record(u, &summary, purpose, round, request);
        }
        for bracket in brackets.iter_mut().filter(|b| !b.done) {
            bracket.close_round(request);
        }
        round += 1;
    }
    let rows = rows(&brackets, &evaluations, request);
    if let Some(first) = evaluations.first().filter(|_| evaluations.iter().all(|e| e.refused.is_some())) {
        return Err(Error::bad_input(format!(
            "map: the model refuses every point it tried as overloaded, so there is nothing to map; for one: {}",
            first.refused.as_deref().unwrap_or_default()
        ))
        .with_hint("narrow --x or --y to where the model has a steady state, or bound its queue"));
    }
    Ok(StabilityMap {
        request: request.clone(),
        direction: scenario.schema.metrics[column].direction,
        labels: point_labels(scenario),
        rows,
        evaluations,
        rounds: round,
    })
}

/// A round's `points` run: each one's summary of the mapped metric (`column`) and why
/// the model refused it, if it did. A point the model refuses as overloaded (no
/// steady state, or past the event budget) is not run: it is beyond the level, on
/// the side a growing load takes the metric to (±∞).
fn run_round(
    scenario: &Scenario,
    candidates: &mut Candidates,
    points: &[Point],
    column: usize,
    request: &MapRequest,
    threads: usize,
    progress: &(dyn Fn() + Sync),
) -> Result<Vec<(Summary, Option<String>)>> {
    let (batch, refused) = resolve_round(candidates, points)?;
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
    let beyond =
        if scenario.schema.metrics[column].direction == Direction::Higher { f64::NEG_INFINITY } else { f64::INFINITY };
    let mut ran = means.into_iter();
    Ok(refused
        .into_iter()
        .map(|refusal| {
            let summary = match &refusal {
                None => ran.next().flatten().expect("every point of a round that is not refused is run"),
                Some(_) => Summary { mean: beyond, sd: f64::NAN, ci_lo: beyond, ci_hi: beyond },
            };
            (summary, refusal)
        })
        .collect())
}

/// Each base grid point's label: its parameters, or the scenario's name without a grid.
fn point_labels(scenario: &Scenario) -> Vec<String> {
    (0..scenario.point_count())
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
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(x: f64, mean: f64, half: f64) -> Evaluation {
        Evaluation { grid: 0, row: 0, y: 1.0, x, mean, ci_lo: mean - half, ci_hi: mean + half, round: 0, refused: None }
    }

    /// Issue 73, item 4: a band's edge is bisected between the nearest sure evaluation
    /// and the nearest unsure one, on each side, to the tolerance; a side with no sure
    /// evaluation leaves the band open to the range's end.
    #[test]
    fn a_bands_edges_are_bisected_between_sure_and_unsure() {
        let level = 0.5;
        // (u, ci_lo, ci_hi): sure below at 0 and 0.25, unsure at 0.375 and 0.4375
        // (the boundary's bracket 0.4375..0.5), sure above at 0.5 and 1.
        let seen = [(0.0, 0.1, 0.2), (1.0, 0.8, 0.9), (0.5, 0.55, 0.7), (0.25, 0.3, 0.45), (0.375, 0.4, 0.52)];
        let seen = [&seen[..], &[(0.4375, 0.45, 0.56)]].concat();
        let [low, high] = Edge::of_row(&seen, 0.4375, 0.5, Side::Below, level);
        let mut low = low.expect("a sure point below");
        assert_eq!(low, Edge { side: Side::Below, sure: 0.25, unsure: 0.375 });
        assert_eq!(high, Some(Edge { side: Side::Above, sure: 0.5, unsure: 0.4375 }));
        let x = Dimension::parse("x=0..64").unwrap();
        assert!(!low.narrow(&x, 1.0 / 64.0));
        assert_eq!(low.midpoint(), 0.3125);
        low.record(0.3125, 0.35, 0.49, level); // sure below: the edge moves out to it
        assert_eq!(low, Edge { side: Side::Below, sure: 0.3125, unsure: 0.375 });
        low.record(0.34375, 0.38, 0.51, level); // straddles: the unsure end moves in
        assert_eq!(low, Edge { side: Side::Below, sure: 0.3125, unsure: 0.34375 });
        assert!(!low.narrow(&x, 1.0 / 64.0) && low.narrow(&x, 1.0 / 32.0));
        // An integer x stops at adjacent values.
        let workers = Dimension::parse("w=1..9:int").unwrap();
        let adjacent = Edge { side: Side::Below, sure: workers.unit(3.0), unsure: workers.unit(4.0) };
        assert!(adjacent.narrow(&workers, 1e-6));
        // Nothing sure above: the band is open to the range's end.
        let unsure_above = [(0.0, 0.1, 0.2), (1.0, 0.45, 0.9), (0.5, 0.4, 0.7)];
        assert_eq!(Edge::of_row(&unsure_above, 0.0, 0.5, Side::Below, level)[1], None);
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
