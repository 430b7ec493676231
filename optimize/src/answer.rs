//! What `optimize` answers: the chosen configuration with its intervals, the
//! runner-up and the paired difference to it, how sure the choice is, and what it
//! cost against the full grid — as terminal text, as JSON (`--json` and
//! `optimize.json`), as the race's table (`optimize.parquet`), and as the winner's
//! scenario file (`--show-toml`).

use std::path::Path;

use serde_json::{json, Map, Value};
use stampede_output::{ColumnSpec, ColumnType, ColumnValues, TableWriter};

use super::race::{Constraint, ConstraintEstimate, Estimate, Status, Verdict};
use super::request::Request;
use super::search::{Ending, Outcome};
use stampede_run::report::{json_number, toml_to_json};
use stampede_scenario::base::error::Result;
use stampede_scenario::base::typing::describe;
use stampede_scenario::resolved::Scenario;
use stampede_scenario::scenario::document::POINTS_KEY;

/// The race's table in the output folder.
pub const TABLE: &str = "optimize.parquet";
/// The answer in the output folder.
pub const JSON: &str = "optimize.json";

/// One candidate as the answer shows it.
#[derive(Clone, Debug)]
pub struct Shown {
    pub candidate: usize,
    pub params: Vec<(String, toml::Value)>,
    pub replicas: u32,
    pub objective: Estimate,
    /// Per constraint: its estimate and verdict.
    pub constraints: Vec<(ConstraintEstimate, Verdict)>,
}

/// A candidate's parameters as `path = value, …`.
fn params_label(params: &[(String, toml::Value)]) -> String {
    params.iter().map(|(p, v)| format!("{p} = {}", describe(v))).collect::<Vec<_>>().join(", ")
}

impl Shown {
    pub fn label(&self) -> String {
        if self.params.is_empty() {
            return format!("candidate {}", self.candidate);
        }
        params_label(&self.params)
    }

    fn to_json(&self, constraints: &[String]) -> Value {
        let params: Map<String, Value> = self.params.iter().map(|(p, v)| (p.clone(), toml_to_json(v))).collect();
        let constraints: Vec<Value> = constraints
            .iter()
            .zip(&self.constraints)
            .map(|(text, (estimate, verdict))| {
                json!({"constraint": text, "estimate": json_number(estimate.value),
                       "one_sided_bound": json_number(estimate.bound), "verdict": verdict_word(*verdict)})
            })
            .collect();
        json!({
            "candidate": self.candidate,
            "params": params,
            "replicas": self.replicas,
            "objective": estimate_json(&self.objective),
            "constraints": constraints,
        })
    }
}

fn estimate_json(e: &Estimate) -> Value {
    json!({"mean": json_number(e.mean), "ci_lo": json_number(e.lo), "ci_hi": json_number(e.hi)})
}

fn verdict_word(verdict: Verdict) -> &'static str {
    match verdict {
        Verdict::Holds => "holds",
        Verdict::Fails => "fails",
        Verdict::Open => "undecided",
    }
}

/// The answer.
#[derive(Clone, Debug)]
pub struct Answer {
    pub scenario: String,
    pub objective: String,
    pub sense: &'static str,
    pub confidence: f64,
    pub indifference: f64,
    pub indifference_given: bool,
    /// δ as asked or derived, when the budget could not resolve it and it was raised.
    pub indifference_raised_from: Option<f64>,
    /// `--max-time`, when given.
    pub max_time_s: Option<f64>,
    pub constraints: Vec<String>,
    pub ending: Ending,
    pub chosen: Option<Shown>,
    /// The runner-up, and the paired and unpaired differences chosen − runner-up.
    pub runner_up: Option<(Shown, Estimate, Estimate)>,
    /// With no feasible candidate: the closest one.
    pub closest: Option<Shown>,
    /// Labels of the candidates whose standing was still open.
    pub doubtful: Vec<String>,
    pub spent: u64,
    pub budget: u64,
    /// Candidates that ran (got at least one replica).
    pub candidates: usize,
    pub rounds: usize,
    /// What the full grid of the candidates at the chosen one's replicas would cost.
    pub full_grid: u64,
}

/// Candidate `c`'s settings: its grid point's in `scenario` (with `--across`, its
/// first of K, the across axis left out — it is not chosen, every value of it ran).
fn candidate_params(scenario: &Scenario, request: &Request, c: usize) -> Vec<(String, toml::Value)> {
    let per = request.replicas_per_candidate_replica() as u32;
    let params = scenario.grid_point(c as u32 * per).map(|p| p.params).unwrap_or_default();
    match &request.across {
        Some(across) => params.into_iter().filter(|(path, _)| *path != across.path).collect(),
        None => params,
    }
}

/// Candidate `c`'s first grid point in the folder (with `--across`, its K points follow).
pub fn candidate_grid_point(request: &Request, c: usize) -> u32 {
    c as u32 * request.replicas_per_candidate_replica() as u32
}

impl Answer {
    pub fn new(outcome: &Outcome, scenario: &Scenario, request: &Request, budget: u64) -> Answer {
        let race = &outcome.race;
        let show = |c: usize| Shown {
            candidate: c,
            params: candidate_params(scenario, request, c),
            replicas: race.replicas(c),
            objective: race.objective(c),
            constraints: (0..race.constraints.len())
                .map(|k| (race.constraint_estimate(c, k), race.entrants[c].verdicts[k]))
                .collect(),
        };
        let chosen = outcome.answer.chosen.map(show);
        let runner_up = match (outcome.answer.chosen, outcome.answer.runner_up) {
            (Some(a), Some(b)) => Some((show(b), race.paired_difference(a, b), race.unpaired_difference(a, b))),
            _ => None,
        };
        // Those that ran: a candidate made for a round the budget could not pay for is
        // not one the replicas went to (issue 71: "20 candidates" where 16 ran), nor
        // one the full grid would have run.
        let ran = (0..outcome.points.len()).filter(|&c| race.replicas(c) > 0).count();
        let full_grid =
            ran as u64 * chosen.as_ref().map_or(0, |c| c.replicas as u64) * request.replicas_per_candidate_replica();
        Answer {
            scenario: scenario.name.clone(),
            objective: request.objective.metric.clone(),
            sense: request.objective.sense.word(),
            confidence: request.confidence,
            indifference: race.settings.indifference,
            indifference_given: request.indifference.is_some(),
            indifference_raised_from: race.indifference_raised_from,
            max_time_s: request.max_time.map(|t| t.as_secs_f64()),
            constraints: request.constraints.iter().map(|c| c.text.clone()).collect(),
            ending: outcome.ending,
            chosen,
            runner_up,
            closest: outcome.answer.closest.map(show),
            doubtful: outcome.answer.doubtful.iter().map(|&c| show(c).label()).collect(),
            spent: outcome.spent,
            budget,
            candidates: ran,
            rounds: outcome.rounds.len(),
            full_grid,
        }
    }

    /// Exit 1: no candidate meets the constraints.
    pub fn infeasible(&self) -> bool {
        self.ending == Ending::Infeasible
    }

    fn ending_text(&self) -> String {
        let level = format!("{}% confidence", self.confidence * 100.0);
        match self.ending {
            Ending::Certain => format!(
                "certain at {level} and indifference δ = {}: every other candidate was eliminated, proven \
                 infeasible, or is within δ",
                short(self.indifference)
            ),
            Ending::BudgetSpent => format!(
                "NOT certain: the budget of {} replicas ran out while {} still in doubt; the choice is the best \
                 so far (raise --budget-replicas, or widen --indifference)",
                self.budget,
                match self.doubtful.len() {
                    0 => "nothing was".to_string(),
                    1 => format!("1 candidate was ({})", self.doubtful[0]),
                    n => format!("{n} candidates were"),
                }
            ),
            Ending::TimeSpent => format!(
                "NOT certain: --max-time {} s passed while {} still in doubt; the choice is the best so far, and \
                 where a search stops on time depends on the machine (raise --max-time, or widen --indifference)",
                self.max_time_s.unwrap_or(f64::NAN),
                match self.doubtful.len() {
                    0 => "nothing was".to_string(),
                    1 => format!("1 candidate was ({})", self.doubtful[0]),
                    n => format!("{n} candidates were"),
                }
            ),
            Ending::Infeasible => "no candidate meets the constraints".into(),
        }
    }

    /// The terminal's answer.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let ci = |e: &Estimate| format!("{} [{}, {}]", short(e.mean), short(e.lo), short(e.hi));
        let constraints = |shown: &Shown, out: &mut String| {
            for (text, (estimate, verdict)) in self.constraints.iter().zip(&shown.constraints) {
                out.push_str(&format!(
                    "    {text}: {} (one-sided bound {}) — {}\n",
                    short(estimate.value),
                    short(estimate.bound),
                    verdict_word(*verdict)
                ));
            }
        };
        out.push_str(&format!("optimize {}: {} {}\n", self.scenario, self.sense, self.objective));
        match (&self.chosen, &self.closest) {
            (Some(chosen), _) => {
                out.push_str(&format!("chosen: {}\n", chosen.label()));
                out.push_str(&format!(
                    "    {} = {} ({} replicas, {}% interval)\n",
                    self.objective,
                    ci(&chosen.objective),
                    chosen.replicas,
                    self.confidence * 100.0
                ));
                constraints(chosen, &mut out);
            }
            (None, Some(closest)) => {
                out.push_str(&format!("closest to feasible: {}\n", closest.label()));
                out.push_str(&format!(
                    "    {} = {} ({} replicas)\n",
                    self.objective,
                    ci(&closest.objective),
                    closest.replicas
                ));
                constraints(closest, &mut out);
            }
            (None, None) => {}
        }
        if let Some((runner, paired, unpaired)) = &self.runner_up {
            out.push_str(&format!("runner-up: {}\n", runner.label()));
            out.push_str(&format!(
                "    {} = {} ({} replicas)\n",
                self.objective,
                ci(&runner.objective),
                runner.replicas
            ));
            out.push_str(&format!(
                "    chosen − runner-up, paired on common replicas: {} (unpaired it would be {})\n",
                ci(paired),
                ci(unpaired)
            ));
        }
        out.push_str(&format!("answer: {}\n", self.ending_text()));
        out.push_str(&self.spending());
        out
    }

    /// What the search spent (against the full grid at the chosen one's replicas), and
    /// how its indifference δ was set when the command line did not give it.
    fn spending(&self) -> String {
        let mut out = String::new();
        out.push_str(&format!(
            "spent: {} replicas over {} candidates in {} round{} (budget {})",
            self.spent,
            self.candidates,
            self.rounds,
            if self.rounds == 1 { "" } else { "s" },
            self.budget
        ));
        match &self.chosen {
            // Nothing chosen: there is no "full grid at the chosen one's replicas".
            Some(chosen) if self.full_grid > 0 => out.push_str(&format!(
                "; the full grid at the chosen one's {} replicas each: {} ({:.0}% of it)\n",
                chosen.replicas,
                self.full_grid,
                100.0 * self.spent as f64 / self.full_grid as f64
            )),
            _ => out.push('\n'),
        }
        if let Some(asked) = self.indifference_raised_from {
            out.push_str(&format!(
                "δ = {} was raised from {}: with the objective's noise, the budget of {} replicas cannot resolve \
                 smaller differences (raise --budget-replicas to resolve finer)\n",
                short(self.indifference),
                short(asked),
                self.budget
            ));
        } else if !self.indifference_given {
            out.push_str(&format!(
                "δ = {} was derived (1% of the first stage's mean {}); give --indifference to set it\n",
                short(self.indifference),
                self.objective
            ));
        }
        out
    }

    /// The `--json` document (also `optimize.json`).
    pub fn to_json(&self) -> Value {
        let ending = match self.ending {
            Ending::Certain => "certain",
            Ending::BudgetSpent => "budget_spent",
            Ending::TimeSpent => "time_spent",
            Ending::Infeasible => "infeasible",
        };
        let runner_up = self.runner_up.as_ref().map(|(shown, paired, unpaired)| {
            json!({"candidate": shown.to_json(&self.constraints),
                   "paired_difference": estimate_json(paired), "unpaired_difference": estimate_json(unpaired)})
        });
        json!({
            "scenario": self.scenario,
            "objective": {"metric": self.objective, "sense": self.sense},
            "constraints": self.constraints,
            "confidence": self.confidence,
            "indifference": json_number(self.indifference),
            "indifference_given": self.indifference_given,
            "indifference_raised_from": self.indifference_raised_from.map(json_number),
            "max_time_s": self.max_time_s,
            "ending": ending,
            "why": self.ending_text(),
            "chosen": self.chosen.as_ref().map(|c| c.to_json(&self.constraints)),
            "runner_up": runner_up,
            "closest": self.closest.as_ref().map(|c| c.to_json(&self.constraints)),
            "doubtful": self.doubtful,
            "replicas_spent": self.spent,
            "budget_replicas": self.budget,
            "candidates": self.candidates,
            "rounds": self.rounds,
            "full_grid_replicas": self.full_grid,
        })
    }
}

/// A number in 4 significant digits.
fn short(value: f64) -> String {
    if !value.is_finite() {
        return "—".into();
    }
    if value == 0.0 {
        return "0".into();
    }
    let magnitude = value.abs().log10().floor() as i32;
    if !(-4..6).contains(&magnitude) {
        return format!("{value:.3e}");
    }
    let decimals = (3 - magnitude).max(0) as usize;
    format!("{value:.decimals$}")
}

/// A status as `optimize.parquet` states it, and why (a failed constraint by its text).
fn status_words(status: &Status, constraints: &[Constraint]) -> (&'static str, String) {
    match status {
        Status::Alive => ("alive", String::new()),
        Status::Eliminated { by, difference, boundary, replicas, .. } => (
            "eliminated",
            format!(
                "candidate {by} beat it by {} on {replicas} common replicas (boundary {})",
                short(*difference),
                short(*boundary)
            ),
        ),
        Status::Halved { .. } => ("eliminated", "successive halving: in the worse half by mean".into()),
        Status::Infeasible { constraint, .. } => ("infeasible", format!("{} fails", constraints[*constraint].text)),
    }
}

/// Writes `optimize.parquet` into `dir`: one row per round and candidate.
pub fn write_table(dir: &Path, outcome: &Outcome, scenario: &Scenario, request: &Request) -> Result<()> {
    let mut columns = vec![
        ColumnSpec::new("round", ColumnType::U32),
        ColumnSpec::new("phase", ColumnType::Utf8),
        ColumnSpec::new("replicas_spent", ColumnType::U64),
        ColumnSpec::new("grid_point", ColumnType::U32),
        ColumnSpec::new("candidate", ColumnType::Utf8),
        ColumnSpec::new("replicas", ColumnType::U32),
        ColumnSpec::new("objective_mean", ColumnType::F64),
        ColumnSpec::new("objective_ci_lo", ColumnType::F64),
        ColumnSpec::new("objective_ci_hi", ColumnType::F64),
    ];
    for k in 1..=request.constraints.len() {
        columns.push(ColumnSpec::new(format!("constraint_{k}_estimate"), ColumnType::F64));
        columns.push(ColumnSpec::new(format!("constraint_{k}_bound"), ColumnType::F64));
    }
    columns.push(ColumnSpec::new("state", ColumnType::Utf8));
    columns.push(ColumnSpec::new("reason", ColumnType::Utf8));
    let mut table = TableWriter::create(dir, TABLE, &columns)?;
    let labels: Vec<String> =
        (0..outcome.points.len()).map(|c| params_label(&candidate_params(scenario, request, c))).collect();
    let last = outcome.rounds.len().saturating_sub(1);
    for (r, round) in outcome.rounds.iter().enumerate() {
        let rows = &round.rows;
        let mut values = vec![
            ColumnValues::U32(vec![round.round; rows.len()]),
            ColumnValues::Utf8(vec![round.phase.clone(); rows.len()]),
            ColumnValues::U64(vec![round.spent; rows.len()]),
            ColumnValues::U32(rows.iter().map(|row| candidate_grid_point(request, row.candidate)).collect()),
            ColumnValues::Utf8(rows.iter().map(|row| labels[row.candidate].clone()).collect()),
            ColumnValues::U32(rows.iter().map(|row| row.replicas).collect()),
            ColumnValues::F64(rows.iter().map(|row| row.objective.mean).collect()),
            ColumnValues::F64(rows.iter().map(|row| row.objective.lo).collect()),
            ColumnValues::F64(rows.iter().map(|row| row.objective.hi).collect()),
        ];
        for k in 0..request.constraints.len() {
            values.push(ColumnValues::F64(rows.iter().map(|row| row.constraints[k].value).collect()));
            values.push(ColumnValues::F64(rows.iter().map(|row| row.constraints[k].bound).collect()));
        }
        let (states, reasons): (Vec<String>, Vec<String>) = rows
            .iter()
            .map(|row| {
                if r == last && outcome.answer.chosen == Some(row.candidate) {
                    return ("chosen".to_string(), String::new());
                }
                let (state, reason) = status_words(&row.status, &request.constraints);
                (state.to_string(), reason)
            })
            .unzip();
        values.push(ColumnValues::Utf8(states));
        values.push(ColumnValues::Utf8(reasons));
        table.write(values)?;
    }
    table.finish()?.commit()?;
    Ok(())
}

/// The chosen candidate as a scenario file `stampede run` reproduces: the candidates'
/// scenario with each axis held at the chosen value, its replica count, and the name
/// `NAME-chosen` (so its run does not replace the search's folder). With `--across`,
/// the across axis keeps every value: the run reproduces the candidate against each.
pub fn show_toml(scenario: &Scenario, request: &Request, candidate: usize, replicas: u32) -> String {
    let mut table: toml::Table = toml::from_str(&scenario.to_toml()).expect("a resolved scenario parses back");
    let point = candidate_grid_point(request, candidate) as usize;
    let choice = scenario.grid_combinations().map(|points| points[point].clone()).unwrap_or_default();
    let across = request.across.as_ref().map(|a| a.path.as_str());
    if let Some(toml::Value::Table(grid)) = table.get_mut("grid") {
        grid.remove(POINTS_KEY);
        for ((path, values), &i) in grid.iter_mut().zip(&choice) {
            if Some(path.as_str()) == across {
                continue;
            }
            if let toml::Value::Array(values) = values {
                let chosen = values[i as usize].clone();
                *values = vec![chosen];
            }
        }
    }
    let name: String = format!("{}-chosen", scenario.name).chars().take(100).collect();
    table.insert("name".into(), toml::Value::String(name));
    if let Some(toml::Value::Table(run)) = table.get_mut("run") {
        run.insert("replicas".into(), toml::Value::Integer(replicas.into()));
    }
    let description =
        format!("{} — the configuration `stampede optimize` chose, at its {replicas} replicas", scenario.description);
    table.insert("description".into(), toml::Value::String(description));
    table.remove("verify");
    toml::to_string(&table).expect("a table serialises")
}
