//! `stampede rare`: the probability of a rare event (1e-4 … 1e-9) by importance
//! splitting, per grid point with a 95% interval, printed and written as
//! `OUT/NAME-rare/` (estimates.parquet, stages.parquet, rare.json, manifest.json).
//! The method is `stampede_engine::kernel::splitting`; the runs and the interval are
//! `stampede_run::rare`.

use std::path::{Path, PathBuf};

mod shards;

use clap::Args;
use stampede_engine::kernel::splitting::Splittable;
use stampede_engine::kernel::time::secs_to_nanos;
use stampede_output::table::{ColumnSpec, ColumnType, ColumnValues, TableWriter};
use stampede_output::{Replace, StagedFile, StagedSet};
use stampede_run::rare::{estimate, Levels, RareEstimate, RareRequest};
use stampede_scenario::scenario::{seconds, RareSection};
use stampede_scenario::{Error, GridPoint, Result};

use stampede_run::plan::Shard;

use super::run::{progress_bar, threads};
use super::{resolve, warn, warning, ScenarioArgs};

#[derive(Args)]
pub(super) struct RareArgs {
    /// A built-in scenario name or a path to a .toml file.
    pub(super) scenario: String,
    #[command(flatten)]
    pub(super) scenario_args: ScenarioArgs,
    /// The rare event, QUANTITY OP NUMBER over the model's state (`in_system >= 40`,
    /// `api.queue_depth >= 200`), counted when it holds after some event; or judged on
    /// the finished run: METRIC OP NUMBER (`recovered == false`) or
    /// `window(SECONDS, STAT) OP NUMBER` (`window(60, p99_all_s) > 2`) (default: the
    /// scenario's `[rare] event`).
    #[arg(long, value_name = "EXPR")]
    pub(super) event: Option<String>,
    /// The event must happen by then: seconds, or a number with s, m, h or d
    /// (default: the scenario's `[rare] within`, else its run.horizon_s).
    #[arg(long, value_name = "T")]
    pub(super) within: Option<String>,
    /// Also give the probability per this period (`1d`): 1 − (1 − p)^(period / within),
    /// the chance of at least one event in the period's windows, each taken to start
    /// afresh (default: the scenario's `[rare] per`).
    #[arg(long, value_name = "PERIOD")]
    pub(super) per: Option<String>,
    /// The state quantity that rises toward the event (default: the event's own, when
    /// the event is QUANTITY >= N or > N; the model's end score, such as a graph's
    /// attempts_in_flight, for an event judged at the end).
    #[arg(long, value_name = "QUANTITY")]
    pub(super) score: Option<String>,
    /// A trajectory ends when this holds, without the event (`in_system == 0`: the
    /// event must happen before the queue empties).
    #[arg(long, value_name = "EXPR")]
    pub(super) until: Option<String>,
    /// The score's levels: `auto` (a pilot places them, each reached by about a fifth
    /// of the trajectories before it) or increasing numbers L1,L2,….
    #[arg(long, value_name = "auto|L1,L2,...", default_value = "auto")]
    pub(super) levels: String,
    /// Stop once the standard error is at most this share of the estimate (10% or 0.1).
    #[arg(long, value_name = "SHARE", default_value = "10%")]
    pub(super) relative_error: String,
    /// Trajectories per stage of a splitting run.
    #[arg(long, value_name = "N", default_value_t = 100)]
    pub(super) trajectories: u32,
    /// Independent splitting runs before the relative error is first looked at.
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub(super) min_runs: u32,
    /// The budget: at most this many splitting runs a grid point.
    #[arg(long, value_name = "N", default_value_t = 2000)]
    pub(super) max_runs: u32,
    /// The budget in events (replays included) a grid point may spend: the runs stop
    /// short of --relative-error when it is spent (1e9, 5G; default 5G, a few minutes
    /// a core on a graph).
    #[arg(long, value_name = "EVENTS", default_value = "5G")]
    pub(super) max_events: String,
    /// Exactly this many splitting runs a grid point, whatever the relative error
    /// (needed with --shard, whose shards split them).
    #[arg(long, value_name = "N")]
    pub(super) runs: Option<u32>,
    /// Run shard K of N (0-based, or auto from SLURM_ARRAY_TASK_ID or
    /// JOB_COMPLETION_INDEX) of the --runs runs and write OUT/NAME-rare/shards/shard=K/
    /// for `stampede merge`, which gives the estimate one process would have.
    #[arg(long, value_name = "K/N|auto")]
    pub(super) shard: Option<String>,
    /// Worker threads (default: all cores).
    #[arg(long, value_name = "T")]
    pub(super) threads: Option<usize>,
    /// Output root; the estimate goes to OUT/<scenario name>-rare/.
    #[arg(long, value_name = "DIR", default_value = "out")]
    pub(super) out: PathBuf,
    /// Replace OUT/<scenario name>-rare/ even if it holds files stampede did not write.
    #[arg(long)]
    pub(super) force: bool,
    /// Print the estimates as one JSON document on stdout (rare.json).
    #[arg(long)]
    pub(super) json: bool,
    /// No progress and no table.
    #[arg(long)]
    pub(super) quiet: bool,
}

/// `--relative-error`: `10%` or `0.1`.
fn share(text: &str) -> Result<f64> {
    let trimmed = text.trim();
    let value = match trimmed.strip_suffix('%') {
        Some(percent) => percent.trim().parse::<f64>().map(|v| v / 100.0),
        None => trimmed.parse::<f64>(),
    };
    value
        .ok()
        .filter(|v| *v > 0.0 && *v < 1.0)
        .ok_or_else(|| Error::bad_input(format!("--relative-error {text:?}: a share between 0 and 1, as 10% or 0.1")))
}

/// `--max-events`: a count, as `1e9`, `5000000` or with K, M or G.
fn events(text: &str) -> Result<u64> {
    let trimmed = text.trim();
    let (number, scale) = match trimmed.char_indices().last() {
        Some((at, unit @ ('K' | 'k' | 'M' | 'G'))) => (
            &trimmed[..at],
            match unit {
                'M' => 1e6,
                'G' => 1e9,
                _ => 1e3,
            },
        ),
        _ => (trimmed, 1.0),
    };
    number
        .trim()
        .parse::<f64>()
        .ok()
        .map(|value| value * scale)
        .filter(|value| value.is_finite() && *value >= 1.0 && *value < 1.8e19)
        .map(|value| value as u64)
        .ok_or_else(|| {
            Error::bad_input(format!("--max-events {text:?}: a positive count of events, as 1e9, 5000000 or 5G"))
        })
}

/// `--levels`.
fn levels(text: &str) -> Result<Levels> {
    if text.trim() == "auto" {
        return Ok(Levels::Auto { target: 0.2, max_levels: 100 });
    }
    let values: Vec<f64> = text
        .split(',')
        .map(|v| v.trim().parse::<f64>().ok().filter(|v| v.is_finite()))
        .collect::<Option<_>>()
        .ok_or_else(|| Error::bad_input(format!("--levels {text:?}: auto, or increasing numbers L1,L2,…")))?;
    if !values.windows(2).all(|pair| pair[0] < pair[1]) {
        return Err(Error::bad_input(format!("--levels {text:?}: the levels must increase")));
    }
    Ok(Levels::Fixed(values))
}

/// The request the arguments make, checked before anything runs.
fn request(args: &RareArgs, horizon_s: f64, master_seed: u64, shard: Option<Shard>) -> Result<RareRequest> {
    if args.scenario_args.replicas.is_some() {
        return Err(Error::bad_input(
            "--replicas: rare runs independent splitting runs, not replicas; bound them with --max-runs",
        ));
    }
    if args.trajectories < 2 {
        return Err(Error::bad_input(format!("--trajectories {}: at least 2", args.trajectories)));
    }
    let (min_runs, max_runs) = match args.runs {
        Some(runs) if runs < 2 => {
            return Err(Error::bad_input(format!("--runs {runs}: at least 2 (an interval needs two runs)")))
        }
        Some(runs) => (runs, runs),
        None if shard.is_some() => {
            return Err(Error::bad_input(
                "--shard needs --runs N: shards split a fixed number of runs (a relative error cannot be watched \
                 across machines)",
            ))
        }
        None => (args.min_runs, args.max_runs),
    };
    if let (Some(shard), Some(runs)) = (shard, args.runs) {
        if runs < shard.count {
            return Err(Error::bad_input(format!(
                "--runs {runs} over {} shards: every shard needs a run; give at least {} runs",
                shard.count, shard.count
            )));
        }
    }
    if min_runs < 2 || min_runs > max_runs {
        return Err(Error::bad_input(format!(
            "--min-runs {} and --max-runs {}: at least 2 runs, and no more first runs than the budget",
            args.min_runs, args.max_runs
        )));
    }
    Ok(RareRequest {
        horizon: secs_to_nanos(horizon_s),
        trajectories: args.trajectories,
        levels: levels(&args.levels)?,
        relative_error: share(&args.relative_error)?,
        min_runs,
        max_runs,
        max_events: events(&args.max_events)?,
        master_seed,
        shard,
    })
}

/// One grid point's answer.
struct PointEstimate {
    label: String,
    found: RareEstimate,
    warnings: Vec<String>,
}

/// The question: the command line's flags, else the scenario's `[rare]` section.
struct Question {
    event: String,
    score: Option<String>,
    until: Option<String>,
    /// `(text, seconds)` of `--per`.
    per: Option<(String, f64)>,
    /// Whether the event came from the file (its errors then name `rare.event`).
    event_from_file: bool,
}

fn question(args: &RareArgs, section: &RareSection, within_s: f64) -> Result<Question> {
    let event = match (&args.event, &section.event) {
        (Some(event), _) => event.clone(),
        (None, Some(event)) => event.clone(),
        (None, None) => return Err(Error::bad_input(
            "--event: required, QUANTITY OP NUMBER (e.g. 'api.queue_depth >= 200'); the scenario has no [rare] event",
        )),
    };
    let per = match (&args.per, &section.per) {
        (Some(text), _) => Some((text.clone(), seconds("--per", text)?)),
        (None, Some(text)) => Some((text.clone(), seconds("rare.per", text)?)),
        (None, None) => None,
    };
    if let Some((text, period)) = &per {
        if *period < within_s {
            return Err(Error::bad_input(format!(
                "--per {text:?}: shorter than the window ({within_s} s); a probability per period counts whole windows"
            )));
        }
    }
    Ok(Question {
        event_from_file: args.event.is_none(),
        event,
        score: args.score.clone().or_else(|| section.score.clone()),
        until: args.until.clone().or_else(|| section.until.clone()),
        per,
    })
}

pub(in crate::cli) use shards::{is_rare_shard, merge};

pub(super) fn rare(args: RareArgs) -> Result<()> {
    let mut scenario_args = args.scenario_args.clone();
    // A trajectory is watched from time zero: a warm-up means nothing to `rare`, and
    // one longer than a short window would refuse it.
    scenario_args.sets.push("run.warmup_s=0".to_string());
    if let Some(within) = &args.within {
        scenario_args.sets.push(format!("run.horizon_s={}", seconds("--within", within)?));
    }
    let mut scenario = resolve(&args.scenario, &scenario_args)?;
    if let (None, Some(within)) = (&args.within, &scenario.rare_section().within) {
        scenario_args.sets.push(format!("run.horizon_s={}", seconds("rare.within", within)?));
        scenario = resolve(&args.scenario, &scenario_args)?;
    }
    warn(&scenario);
    let question = question(&args, scenario.rare_section(), scenario.run.horizon_s)?;
    let shard = args.shard.as_deref().map(|text| super::run::shard_of(text, args.quiet)).transpose()?;
    let request = request(&args, scenario.run.horizon_s, scenario.run.seed, shard)?;
    let points = scenario.grid_points()?;
    // Every point's probe is parsed (and the model asked) before anything runs.
    let models =
        points.iter().map(|point| splittable(point, &question, scenario.run.seed)).collect::<Result<Vec<_>>>()?;
    let name = format!("{}-rare", scenario.name);
    let replace = stampede_run::pipeline::Writing { force: args.force, ..Default::default() }.replace();
    let written = match shard {
        Some(shard) => shards::folder(&args.out, &name, shard),
        None => args.out.join(&name),
    };
    stampede_output::folder::check_replaceable(&written, replace)?;
    let threads = threads(args.threads)?;
    let bar = progress_bar(0, args.quiet || args.json);
    let started = std::time::Instant::now();
    let mut estimates = Vec::with_capacity(points.len());
    for (point, model) in points.iter().zip(&models) {
        let found = estimate(&**model, &request, threads, &|| {
            bar.inc_length(1);
            bar.inc(1);
        })?;
        let warnings = diagnose(&found, &request);
        estimates.push(PointEstimate { label: label(&point.params), found, warnings });
    }
    bar.finish_and_clear();
    let answer = Answer {
        scenario: scenario.name.clone(),
        condition: describe_condition(&question, scenario.run.horizon_s),
        per: question.per.as_ref().map(|(text, period)| Per::new(text, *period, scenario.run.horizon_s)),
        request,
        estimates,
    };
    let seconds = started.elapsed().as_secs_f64();
    let show = Show { json: args.json, quiet: args.quiet };
    match shard {
        Some(shard) => shards::write(&args.out, &name, shard, &answer, replace, show, seconds),
        None => finish(&answer, &args.out, replace, show, seconds),
    }
}

/// Grid point `point`'s model, split along the question's probe: refused for a model
/// with no state quantities to observe, and a probe's error names the scenario field
/// when the event came from the file.
fn splittable(point: &GridPoint, question: &Question, seed: u64) -> Result<Box<dyn Splittable>> {
    if point.model.quantities().is_empty() {
        return Err(Error::bad_input(format!(
            "model '{}' has no state quantities `rare` can observe yet; the models that have: mmc and graph",
            point.model.name()
        )));
    }
    let probe = (point.model)
        .probe(&point.run, &question.event, question.score.as_deref(), question.until.as_deref())
        .map_err(|mut error| {
            if question.event_from_file {
                error.message = error.message.replacen("--event", "scenario field rare.event", 1);
            }
            error
        })?;
    Ok(point.model.splittable(&point.run, seed, probe).expect("a model with quantities splits"))
}

/// A question's answer at every grid point, and what it was asked with.
struct Answer {
    scenario: String,
    condition: String,
    per: Option<Per>,
    request: RareRequest,
    estimates: Vec<PointEstimate>,
}

/// What to print: `--json`, `--quiet`.
#[derive(Clone, Copy)]
struct Show {
    json: bool,
    quiet: bool,
}

/// Prints the answer and its warnings and writes `OUT/NAME-rare/`.
fn finish(answer: &Answer, out: &Path, replace: Replace, show: Show, seconds: f64) -> Result<()> {
    let Answer { scenario, condition, per, request, estimates } = answer;
    let lines = describe(scenario, condition, estimates, request, per.as_ref(), seconds);
    let document = to_json(scenario, condition, estimates, request, per.as_ref());
    for point in estimates {
        for text in &point.warnings {
            warning(&format!(
                "{}{text}",
                if estimates.len() > 1 { format!("{}: ", point.label) } else { String::new() }
            ));
        }
    }
    let dir = write_folder(out, &format!("{scenario}-rare"), estimates, &document, per.as_ref(), replace)?;
    if show.json {
        super::print_json(&document);
    } else if !show.quiet {
        for line in &lines {
            println!("{line}");
        }
        println!("wrote {} (estimates.parquet, stages.parquet, rare.json, report.html)", dir.display());
    }
    Ok(())
}

/// `retry.policy = "naive", queue.servers = 2` (or `base` for the scenario as written).
fn label(params: &[(String, toml::Value)]) -> String {
    if params.is_empty() {
        return "base".to_string();
    }
    params
        .iter()
        .map(|(path, value)| format!("{path} = {}", stampede_scenario::base::typing::describe(value)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `P(in_system >= 21 within 100000 s, until in_system == 0)`.
fn describe_condition(question: &Question, horizon_s: f64) -> String {
    let until = question.until.as_deref().map(|u| format!(", before {}", u.trim())).unwrap_or_default();
    format!("P({} within {} s{until})", question.event.trim(), stampede_report::chart::short(horizon_s))
}

/// `--per`: the probability of at least one event in a period of `windows` windows,
/// 1 − (1 − p)^windows — exact if each window starts afresh and independently (as
/// every trajectory starts at time zero), an approximation of a system that runs on.
struct Per {
    text: String,
    windows: f64,
}

impl Per {
    fn new(text: &str, period_s: f64, within_s: f64) -> Per {
        debug_assert!(period_s >= within_s);
        Per { text: text.trim().to_string(), windows: period_s / within_s }
    }

    /// p per window → p per period: increasing, so an interval maps end to end.
    fn of(&self, p: f64) -> f64 {
        stampede_run::rare::at_least_once(p, self.windows)
    }
}

/// What a user must know before trusting an estimate: the report's warnings.
fn diagnose(found: &RareEstimate, request: &RareRequest) -> Vec<String> {
    let mut warnings = Vec::new();
    if let Some(stalled) = found.pilot.as_ref().and_then(|pilot| pilot.stalled_at) {
        warnings.push(format!(
            "the pilot's score never rose above {stalled}: the score may not lead to the event (choose another with --score), \
             or the event cannot happen by the horizon"
        ));
    }
    if found.hits() == 0 {
        let deepest = found.runs.iter().map(|run| run.stages.len()).max().unwrap_or(0);
        warnings.push(format!(
            "the event was never reached in {} runs (the deepest stage reached: {deepest} of {}): the estimate 0 says only that \
             the probability is too small for this effort — raise --trajectories or --max-runs",
            found.runs.len(),
            found.levels.len() + 1
        ));
    } else if found.largest_run_share() > 0.5 {
        warnings.push(format!(
            "one run carries {:.0}% of the estimate: the interval rests on few runs — raise --trajectories or lower \
             --relative-error",
            found.largest_run_share() * 100.0
        ));
    }
    if found.relative_error > request.relative_error && found.hits() > 0 {
        let budget = if found.budget_spent {
            format!("--max-events {}", request.max_events)
        } else {
            format!("--max-runs {}", request.max_runs)
        };
        warnings.push(format!(
            "relative error {:.1}% is above the target {:.1}%: the budget of {budget} was spent",
            found.relative_error * 100.0,
            request.relative_error * 100.0,
        ));
    }
    warnings
}

fn scientific(value: f64) -> String {
    if value == 0.0 {
        "0".to_string()
    } else {
        format!("{value:.3e}")
    }
}

/// The terminal's lines.
fn describe(
    scenario: &str,
    condition: &str,
    estimates: &[PointEstimate],
    request: &RareRequest,
    per: Option<&Per>,
    seconds: f64,
) -> Vec<String> {
    let mut lines = vec![format!(
        "{}: {condition}, by importance splitting ({} trajectories a stage, runs until {:.0}% relative error)",
        scenario,
        request.trajectories,
        request.relative_error * 100.0
    )];
    for (index, point) in estimates.iter().enumerate() {
        let found = &point.found;
        let prefix = if estimates.len() > 1 { format!("#{index} {}: ", point.label) } else { String::new() };
        lines.push(format!(
            "  {prefix}{} [{}, {}] (95%; relative error {:.1}%, {} runs over {} levels, {} hits)",
            scientific(found.probability),
            scientific(found.low),
            scientific(found.high),
            found.relative_error * 100.0,
            found.runs.len(),
            found.levels.len(),
            found.hits()
        ));
        if let Some(per) = per {
            lines.push(format!(
                "    per {}: {} [{}, {}] ({:.0} windows, each from a fresh start)",
                per.text,
                scientific(per.of(found.probability)),
                scientific(per.of(found.low)),
                scientific(per.of(found.high)),
                per.windows
            ));
        }
        let needed = found.plain_events_needed();
        if needed.is_finite() {
            lines.push(format!(
                "    cost: {} events; plain replicas would need {:.2e} events for this relative error ({:.0}× more)",
                found.events,
                needed,
                found.speedup()
            ));
        } else {
            lines.push(format!("    cost: {} events", found.events));
        }
    }
    lines.push(format!("{seconds:.1} s"));
    lines
}

/// rare.json: the question and each point's answer.
fn to_json(
    scenario: &str,
    condition: &str,
    estimates: &[PointEstimate],
    request: &RareRequest,
    per: Option<&Per>,
) -> serde_json::Value {
    let finite = |v: f64| if v.is_finite() { serde_json::json!(v) } else { serde_json::Value::Null };
    serde_json::json!({
        "scenario": scenario,
        "question": condition,
        "seed": request.master_seed.to_string(),
        "trajectories": request.trajectories,
        "target_relative_error": request.relative_error,
        "per": per.map(|per| per.text.clone()),
        "points": estimates.iter().enumerate().map(|(index, point)| {
            let found = &point.found;
            let per_period = per.map(|per| serde_json::json!({
                "probability": per.of(found.probability),
                "ci_lo": per.of(found.low),
                "ci_hi": per.of(found.high),
                "windows": per.windows,
            }));
            serde_json::json!({
                "grid_point": index,
                "label": point.label,
                "probability": found.probability,
                "ci_lo": found.low,
                "ci_hi": found.high,
                "relative_error": finite(found.relative_error),
                "runs": found.runs.len(),
                "levels": found.levels,
                "hits": found.hits(),
                "events": found.events,
                "plain_events_needed": finite(found.plain_events_needed()),
                "speedup": finite(found.speedup()),
                "pilot_estimate": found.pilot.as_ref().map(|pilot| pilot.estimate),
                "per_period": per_period,
                "ladder": found.ladder().into_iter().map(|(level, reach)| serde_json::json!({
                    "level": level,
                    "reach_probability": reach,
                })).collect::<Vec<_>>(),
                "warnings": point.warnings,
            })
        }).collect::<Vec<_>>(),
    })
}

/// estimates.parquet: one row a grid point.
fn write_estimates(dir: &Path, estimates: &[PointEstimate], per: Option<&Per>) -> Result<StagedFile> {
    let mut columns = vec![
        ColumnSpec::new("grid_point", ColumnType::U32),
        ColumnSpec::new("label", ColumnType::Utf8),
        ColumnSpec::new("probability", ColumnType::F64),
        ColumnSpec::new("ci_lo", ColumnType::F64),
        ColumnSpec::new("ci_hi", ColumnType::F64),
        ColumnSpec::new("relative_error", ColumnType::F64),
        ColumnSpec::new("runs", ColumnType::U32),
        ColumnSpec::new("levels", ColumnType::U32),
        ColumnSpec::new("hits", ColumnType::U64),
        ColumnSpec::new("events", ColumnType::U64),
        ColumnSpec::new("plain_events_needed", ColumnType::F64),
    ];
    if per.is_some() {
        for name in ["per_period_probability", "per_period_ci_lo", "per_period_ci_hi"] {
            columns.push(ColumnSpec::new(name, ColumnType::F64));
        }
    }
    let mut table = TableWriter::create(dir, "estimates.parquet", &columns)?;
    let all = |f: &dyn Fn(&RareEstimate) -> f64| estimates.iter().map(|p| f(&p.found)).collect::<Vec<f64>>();
    let mut values = vec![
        ColumnValues::U32((0..estimates.len() as u32).collect()),
        ColumnValues::Utf8(estimates.iter().map(|p| p.label.clone()).collect()),
        ColumnValues::F64(all(&|f| f.probability)),
        ColumnValues::F64(all(&|f| f.low)),
        ColumnValues::F64(all(&|f| f.high)),
        ColumnValues::F64(all(&|f| f.relative_error)),
        ColumnValues::U32(estimates.iter().map(|p| p.found.runs.len() as u32).collect()),
        ColumnValues::U32(estimates.iter().map(|p| p.found.levels.len() as u32).collect()),
        ColumnValues::U64(estimates.iter().map(|p| p.found.hits()).collect()),
        ColumnValues::U64(estimates.iter().map(|p| p.found.events).collect()),
        ColumnValues::F64(all(&|f| f.plain_events_needed())),
    ];
    if let Some(per) = per {
        values.push(ColumnValues::F64(all(&|f| per.of(f.probability))));
        values.push(ColumnValues::F64(all(&|f| per.of(f.low))));
        values.push(ColumnValues::F64(all(&|f| per.of(f.high))));
    }
    table.write(values)?;
    Ok(table.finish()?)
}

/// stages.parquet: one row per (grid point, run, stage): the level, trajectories,
/// hits, crossings, the weight wₖ the run gave the stage and the events it spent.
fn write_stages(dir: &Path, estimates: &[PointEstimate]) -> Result<StagedFile> {
    let columns = [
        ColumnSpec::new("grid_point", ColumnType::U32),
        ColumnSpec::new("run", ColumnType::U32),
        ColumnSpec::new("stage", ColumnType::U32),
        ColumnSpec::new("level", ColumnType::F64),
        ColumnSpec::new("trajectories", ColumnType::U32),
        ColumnSpec::new("hits", ColumnType::U32),
        ColumnSpec::new("crossed", ColumnType::U32),
        ColumnSpec::new("conditional_probability", ColumnType::F64),
        ColumnSpec::new("weight", ColumnType::F64),
        ColumnSpec::new("events", ColumnType::U64),
        ColumnSpec::new("run_estimate", ColumnType::F64),
    ];
    let mut table = TableWriter::create(dir, "stages.parquet", &columns)?;
    let rows: Vec<_> = estimates
        .iter()
        .enumerate()
        .flat_map(|(point, p)| {
            p.found.runs.iter().enumerate().flat_map(move |(run, record)| {
                record
                    .stages
                    .iter()
                    .enumerate()
                    .map(move |(stage, s)| (point as u32, run as u32, stage as u32, *s, record.estimate))
            })
        })
        .collect();
    table.write(vec![
        ColumnValues::U32(rows.iter().map(|r| r.0).collect()),
        ColumnValues::U32(rows.iter().map(|r| r.1).collect()),
        ColumnValues::U32(rows.iter().map(|r| r.2).collect()),
        ColumnValues::F64(rows.iter().map(|r| r.3.level).collect()),
        ColumnValues::U32(rows.iter().map(|r| r.3.trajectories).collect()),
        ColumnValues::U32(rows.iter().map(|r| r.3.hits).collect()),
        ColumnValues::U32(rows.iter().map(|r| r.3.crossed).collect()),
        ColumnValues::F64(rows.iter().map(|r| f64::from(r.3.crossed) / f64::from(r.3.trajectories)).collect()),
        ColumnValues::F64(rows.iter().map(|r| r.3.weight).collect()),
        ColumnValues::U64(rows.iter().map(|r| r.3.events).collect()),
        ColumnValues::F64(rows.iter().map(|r| r.4).collect()),
    ])?;
    Ok(table.finish()?)
}

/// Writes `out/name/` atomically: the tables, rare.json and a manifest listing them.
fn write_folder(
    out: &Path,
    name: &str,
    estimates: &[PointEstimate],
    document: &serde_json::Value,
    per: Option<&Per>,
    replace: Replace,
) -> Result<PathBuf> {
    let folder = stampede_run::pipeline::begin_folder(out, name, replace)?;
    let dir = folder.path().to_path_buf();
    let mut staged = StagedSet::default();
    staged.push(write_estimates(&dir, estimates, per)?);
    staged.push(write_stages(&dir, estimates)?);
    let json = serde_json::to_vec_pretty(document).expect("JSON serialises");
    staged.push(StagedFile::with_contents(&dir, "rare.json", &json)?);
    let page = stampede_report::rare_page::render(document);
    staged.push(StagedFile::with_contents(&dir, "report.html", page.as_bytes())?);
    let manifest = serde_json::json!({
        "tool": "stampede",
        "kind": "rare",
        "version": stampede_scenario::base::provenance::VERSION,
        "scenario": document["scenario"],
        "command_line": stampede_scenario::base::provenance::command_line(),
        "files": ["estimates.parquet", "stages.parquet", "rare.json", "report.html"],
        "estimates": document["points"],
    });
    let manifest = serde_json::to_vec_pretty(&manifest).expect("JSON serialises");
    staged.push(StagedFile::with_contents(&dir, "manifest.json", &manifest)?);
    staged.commit()?;
    Ok(folder.commit()?)
}
