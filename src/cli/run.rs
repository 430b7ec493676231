//! `stampede run`: a scenario's grid × replicas into the output folder (or one shard
//! of it), with a progress bar, the summary table and the report.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use stampede_run::pipeline::{execute_with, Documents, ReplicaRows, Shape, Writing};
use stampede_run::plan::{Plan, Shard};
use stampede_run::report::RunReport;
use stampede_run::shards::execute_shard;
use stampede_run::summary::SummaryOptions;
use stampede_scenario::scenario::builtin::DEFAULT_SCENARIO;
use stampede_scenario::{Error, Result, Scenario};

use stampede_run::precision::{self, Goal, Outcome, StageEvent, Target};
use stampede_run::warmup::Choice;

use super::{resolve, resolve_any, warn, ScenarioArgs};

#[derive(Args)]
pub(super) struct RunArgs {
    /// A built-in scenario name or a path to a .toml file (default: the showcase).
    pub(super) scenario: Option<String>,
    #[command(flatten)]
    pub(super) scenario_args: ScenarioArgs,
    /// Worker threads; never changes any result (default: all cores).
    #[arg(long, value_name = "T")]
    pub(super) threads: Option<usize>,
    /// Output root; results go to OUT/<scenario name>/.
    #[arg(long, value_name = "DIR", default_value = "out")]
    pub(super) out: PathBuf,
    /// Print the run's summary as one JSON document on stdout.
    #[arg(long)]
    pub(super) json: bool,
    /// No progress bar and no table.
    #[arg(long)]
    pub(super) quiet: bool,
    /// Show every metric in the summary table, not only the headline ones.
    #[arg(long)]
    pub(super) all_metrics: bool,
    /// When the grid is too wide for the terminal, show its best and worst points by this metric.
    #[arg(long, value_name = "METRIC")]
    pub(super) rank_by: Option<String>,
    /// Do not write report.html into the output folder.
    #[arg(long)]
    pub(super) no_report: bool,
    /// Finish an interrupted run of the same command: only the work its checkpoint lacks
    /// (without a checkpoint, says so and runs from the start).
    #[arg(long)]
    pub(super) resume: bool,
    /// Replace OUT/<scenario name>/ even if it holds files stampede did not write (by
    /// default only a folder stampede wrote is replaced; anything else is refused).
    #[arg(long)]
    pub(super) force: bool,
    /// Which per-replica rows to write: all (default), none, or sample:N (replicas 0..N
    /// of each grid point). The summary, histograms and series are exact either way.
    /// With --shard, the rows the shard keeps: its merge writes these or fewer.
    #[arg(long, value_name = "all|none|sample:N", default_value = "all", value_parser = parse_replica_rows)]
    pub(super) replica_rows: ReplicaRows,
    /// `grid_point`: write replica rows and series as hive-partitioned files,
    /// replicas/grid_point=K/part-0.parquet and timeseries/grid_point=K/part-0.parquet.
    #[arg(long, value_name = "grid_point", value_parser = parse_partition_by)]
    pub(super) partition_by: Option<bool>,
    /// Run shard K of N (0-based) and write OUT/NAME/shards/shard=K/ for `stampede merge`;
    /// `auto` reads SLURM_ARRAY_TASK_ID/COUNT/MIN or JOB_COMPLETION_INDEX (run only).
    #[arg(long, value_name = "K/N|auto")]
    pub(super) shard: Option<String>,
    /// Also write trace.parquet: every call, attempt and wait of replica R of each grid
    /// point (gateway, cluster and dependency models).
    #[arg(long, value_name = "R")]
    pub(super) trace: Option<u32>,
    /// What --trace writes: `parquet` (trace.parquet, the default), `otlp`
    /// (trace.otlp.json: OpenTelemetry spans as OTLP JSON lines, for Jaeger or Tempo) or
    /// `both`.
    #[arg(long, value_name = "parquet|otlp|both", default_value = "parquet", value_parser = ["parquet", "otlp", "both"])]
    pub(super) trace_format: String,
    /// Show these metrics in the summary table, in this order, instead of the headline
    /// ones (repeatable): a metric's name, or an expression of metrics computed per
    /// replica and written as a column of its own: 'usd_per_day', 'useful_usd + wasted_usd'.
    #[arg(long = "metric", value_name = "METRIC")]
    pub(super) metrics: Vec<String>,
    /// Choose the replicas: run them in stages until every headline metric's 95%
    /// half-width is at most REL of its |mean| at every grid point (`1%` or `0.01`), or
    /// METRIC=REL for one metric (repeatable; a metric named gets its own, a bare REL the
    /// headline ones); then the run with that many replicas, equal to a plain run with
    /// --replicas N. Replaces run.replicas; the manifest and report record what was asked
    /// and reached.
    #[arg(long, value_name = "REL|METRIC=REL", allow_hyphen_values = true)]
    pub(super) precision: Vec<String>,
    /// With --precision: the most replicas a grid point may get (default 100000); a run
    /// that stops there says which metrics fell short.
    #[arg(long, value_name = "N", requires = "precision")]
    pub(super) max_replicas: Option<u32>,
    /// Simulated seconds discarded at the start of each replica (run.warmup_s), or
    /// `auto`: chosen by MSER-5 on a time series of a pilot (run.warmup_series, else the
    /// model's first), recorded in the manifest and the report.
    #[arg(long, value_name = "SECONDS|auto")]
    pub(super) warmup: Option<String>,
}

/// What `run` and `verify` chose or were asked to choose: the warm-up (`warmup_s =
/// "auto"`, chosen before the run) and the replicas (`--precision`, chosen by the run
/// itself, in stages), each with how.
#[derive(Default)]
pub(super) struct Chosen {
    pub(super) warmup: Option<Choice>,
    pub(super) precision: Option<PrecisionAsked>,
    /// Where the staged search stopped, once the run is done.
    pub(super) outcome: Option<Outcome>,
}

/// `--precision`, resolved: the goal, and how to resolve the scenario again with the
/// replicas the search chooses.
pub(super) struct PrecisionAsked {
    goal: Goal,
    targets: Vec<Target>,
    name: String,
    scenario_args: ScenarioArgs,
}

impl PrecisionAsked {
    /// The scenario as the run resolved it, with `replicas` replicas.
    fn with_replicas(&self, replicas: u32, args: &RunArgs) -> Result<Scenario> {
        let scenario_args = ScenarioArgs { replicas: Some(replicas), ..self.scenario_args.clone() };
        precision::with_target_metrics(with_metrics(resolve(&self.name, &scenario_args)?, args)?, &self.targets)
    }
}

impl Chosen {
    /// The lines the terminal shows after the summary, from the finished run.
    pub(super) fn lines(&self, report: &RunReport) -> Vec<String> {
        let mut lines = Vec::new();
        if let Some(warmup) = &self.warmup {
            lines.push(warmup.sentence());
        }
        if let (Some(asked), Some(outcome)) = (&self.precision, &self.outcome) {
            let reached = precision::reached_in(&asked.goal, report);
            let stages = outcome.stages.iter().map(u32::to_string).collect::<Vec<_>>().join(" → ");
            lines.push(format!(
                "{}; stages {stages} (each replica run once)",
                precision::sentence(&asked.goal, &reached, report.scenario.run.replicas)
            ));
        }
        lines
    }

    /// The manifest's `warmup` and `precision` objects (`stages`: the search's, in order).
    fn manifest_fields(&self, report: &RunReport, stages: &[u32]) -> Vec<(&'static str, serde_json::Value)> {
        let mut fields = Vec::new();
        if let Some(warmup) = &self.warmup {
            fields.push(("warmup", warmup.to_json()));
        }
        if let Some(asked) = &self.precision {
            let reached = precision::reached_in(&asked.goal, report);
            let replicas = report.scenario.run.replicas;
            fields.push(("precision", precision::to_json(&asked.goal, &reached, replicas, Some(stages))));
        }
        fields
    }
}

/// The scenario a run or verify executes: as resolved, then — with `warmup_s = "auto"`
/// — with the warm-up a pilot chose (the pilot runs here, its choice on stderr); with
/// `--precision`, what [`execute_with_progress`] needs to choose the replicas.
pub(super) fn resolve_for_run(name: &str, args: &RunArgs) -> Result<(Scenario, Chosen)> {
    let mut scenario_args = args.scenario_args.clone();
    if let Some(warmup) = &args.warmup {
        let value = match warmup.as_str() {
            "auto" => toml::Value::String("auto".into()),
            seconds => toml::Value::Float(
                seconds
                    .parse()
                    .map_err(|_| Error::bad_input(format!("--warmup {seconds:?}: a number of seconds or auto")))?,
            ),
        };
        scenario_args.sets.push(format!("run.warmup_s={value}"));
    }
    let mut scenario = with_metrics(resolve_any(name, &scenario_args)?, args)?;
    let mut chosen = Chosen::default();
    if !args.precision.is_empty() {
        if let Some(replicas) = args.scenario_args.replicas {
            return Err(Error::bad_input(format!(
                "--replicas {replicas} with --precision: --precision chooses the replicas; cap them with --max-replicas"
            )));
        }
        if args.shard.is_some() {
            return Err(Error::bad_input(
                "--precision with --shard: a shard cannot tell whether the whole run is precise; \
                 `stampede plan SCENARIO --precision REL --shards N` estimates the replicas from a pilot, \
                 and `stampede merge --precision REL` says whether the merged run met it",
            ));
        }
        if let Some(replica) = args.trace {
            return Err(Error::bad_input(format!(
                "--trace {replica} with --precision: trace a run of a fixed size (--replicas N); --precision says which N"
            )));
        }
        if args.resume {
            super::warning(
                "--resume with --precision: the staged search keeps no checkpoint, so it starts over from its first \
                 stage",
            );
        }
    }
    if scenario.run.warmup_auto {
        stampede_run::warmup::check(&scenario)?;
        let bar = progress_bar(0, args.quiet);
        bar.inc_length(u64::from(stampede_run::warmup::PILOT_REPLICAS) * u64::from(scenario.point_count()));
        let choice = stampede_run::warmup::choose(&scenario, threads(args.threads)?, &|| bar.inc(1))?;
        bar.finish_and_clear();
        if !args.quiet && !args.json {
            eprintln!("{}", choice.sentence());
        }
        if let Some(warning) = choice.warning() {
            super::warning(&warning);
        }
        scenario_args.sets.push(format!("run.warmup_s={}", toml::Value::Float(choice.chosen_s)));
        scenario = with_metrics(resolve(name, &scenario_args)?, args)?;
        chosen.warmup = Some(choice);
    }
    if args.precision.is_empty() {
        return Ok((scenario, chosen));
    }
    let targets = args.precision.iter().map(|t| Target::parse(t)).collect::<Result<Vec<_>>>()?;
    let scenario = precision::with_target_metrics(scenario, &targets)?;
    let goal = Goal::new(&scenario, &targets, args.max_replicas.unwrap_or(precision::DEFAULT_MAX_REPLICAS))?;
    chosen.precision = Some(PrecisionAsked { goal, targets, name: name.to_string(), scenario_args });
    Ok((scenario, chosen))
}

pub(super) fn run(args: RunArgs) -> Result<()> {
    let name = args.scenario.as_deref().unwrap_or(DEFAULT_SCENARIO);
    let (scenario, mut chosen) = resolve_for_run(name, &args)?;
    warn(&scenario);
    check_rank_by(&scenario, &args)?;
    if let Some(shard) = &args.shard {
        if args.trace.is_some() {
            return Err(Error::bad_input(
                "--trace with --shard: trace a whole run (the trace is one replica; no shard needs it)",
            ));
        }
        if args.partition_by.unwrap_or(false) {
            return Err(Error::bad_input(
                "--partition-by with --shard: give it to `stampede merge`, which writes the merged folder (a shard's rows are one file)",
            ));
        }
        return run_shard(&scenario, shard, &args);
    }
    if let Some(replica) = args.trace {
        stampede_run::trace::check(&scenario, replica)?;
    }
    let (parquet, otlp) = (args.trace_format != "otlp", args.trace_format != "parquet");
    if args.trace.is_none() && args.trace_format != "parquet" {
        return Err(Error::bad_input("--trace-format without --trace R: say which replica to trace"));
    }
    let write = |report: &RunReport, staging: &Path| {
        if let Some(replica) = args.trace {
            if parquet {
                stampede_run::trace::write(staging, &scenario, replica)?;
            }
            if otlp {
                stampede_run::otlp::write(staging, &scenario, replica)?;
            }
        }
        write_report(report, staging, &args)
    };
    let (files, disk_bytes) = documents_written(&scenario, &args, (parquet, otlp))?;
    let documents = Documents { files, write: &write, disk_bytes, manifest_fields: None };
    let report = execute_with_progress(&scenario, &args, &documents, &mut chosen)?;
    let html = (!args.no_report).then(|| report.output_dir.join("report.html"));
    // In process, the table the terminal would show goes with the document.
    super::embed::capture_summary(|| {
        let lines: String = chosen.lines(&report).iter().map(|line| format!("{line}\n")).collect();
        format!("{}{lines}", summary(&report, &args))
    });
    if args.json {
        super::print_json(&report.to_json());
    } else if !args.quiet {
        print!("{}", summary(&report, &args));
        for line in chosen.lines(&report) {
            println!("{line}");
        }
        if let Some(html) = html {
            println!("report: {}", html.display());
        }
    }
    Ok(())
}

/// The files a run writes beside its tables (the report, a trace as Parquet and/or
/// OTLP JSON) and the bytes they are estimated to take.
fn documents_written(
    scenario: &Scenario,
    args: &RunArgs,
    (parquet, otlp): (bool, bool),
) -> Result<(Vec<&'static str>, f64)> {
    let mut files = if args.no_report { vec![] } else { vec!["report.html"] };
    let mut disk_bytes = if args.no_report { 0.0 } else { stampede_run::budget::report_bytes(scenario) };
    if let Some(replica) = args.trace {
        let bytes = stampede_run::trace::estimate_bytes(scenario, replica)?;
        if parquet {
            files.push(stampede_run::trace::FILE);
            disk_bytes += bytes;
        }
        if otlp {
            // A span in OTLP JSON is about four times its Parquet row before compression.
            files.push(stampede_run::otlp::FILE);
            disk_bytes += 4.0 * bytes;
        }
    }
    Ok((files, disk_bytes))
}

/// `run --shard`: one shard's folder.
/// `--shard K/N`, or `auto` from the scheduler's environment (said on stderr).
pub(super) fn shard_of(text: &str, quiet: bool) -> Result<Shard> {
    if text != "auto" {
        return Shard::parse(text);
    }
    let (shard, how) = Shard::from_env(|name| std::env::var(name).ok())?;
    if !quiet {
        eprintln!("stampede: --shard auto: shard {} of {} (from {how})", shard.index, shard.count);
    }
    Ok(shard)
}

pub(super) fn run_shard(scenario: &Scenario, text: &str, args: &RunArgs) -> Result<()> {
    let shard = shard_of(text, args.quiet)?;
    let threads = threads(args.threads)?;
    let plan = Plan::new(scenario.point_count(), scenario.run.replicas, Some(shard));
    let bar = progress_bar(plan.task_count(), args.quiet);
    let dir = execute_shard(scenario, shard, &args.out, threads, &|| bar.inc(1), writing(args))?;
    bar.finish_and_clear();
    if args.json {
        super::print_json(&serde_json::json!({
            "shard": { "index": shard.index, "count": shard.count },
            "tasks": plan.task_count(),
            "folder": dir.display().to_string(),
        }));
    } else if !args.quiet {
        println!("wrote shard {} of {} ({} tasks): {}", shard.index, shard.count, plan.task_count(), dir.display());
    }
    Ok(())
}

/// Writes report.html into the run's staging folder unless `--no-report`.
pub(super) fn write_report(report: &RunReport, staging: &Path, args: &RunArgs) -> Result<()> {
    if !args.no_report {
        stampede_report::write_as(staging, &report.output_dir)?;
    }
    Ok(())
}

/// The scenario with `--metric`'s expressions as columns of their own; each plain
/// name checked against the model's metrics.
pub(super) fn with_metrics(scenario: Scenario, args: &RunArgs) -> Result<Scenario> {
    let named: Vec<(String, String)> =
        args.metrics.iter().map(|text| (text.clone(), format!("--metric {text:?}"))).collect();
    let scenario = scenario.with_metrics(&named)?;
    let names = scenario.schema.metric_names();
    for text in &args.metrics {
        let normalised = stampede_scenario::models::expression::normalise(text);
        if !names.contains(&normalised.as_str()) {
            let near: Vec<&str> = names.iter().copied().filter(|n| n.contains(normalised.as_str())).take(8).collect();
            return Err(Error::bad_input(format!(
                "--metric {text:?}: not a metric of model {}{}",
                scenario.model.name(),
                if near.is_empty() { String::new() } else { format!("; did you mean {}?", near.join(", ")) }
            )));
        }
    }
    Ok(scenario)
}

/// `--rank-by` names a metric of the scenario's model.
pub(super) fn check_rank_by(scenario: &Scenario, args: &RunArgs) -> Result<()> {
    let Some(name) = &args.rank_by else { return Ok(()) };
    let metrics = scenario.model.metrics();
    if metrics.iter().any(|m| m.name == name.as_str()) {
        return Ok(());
    }
    let names: Vec<&str> = metrics.iter().map(|m| m.name).collect();
    Err(Error::bad_input(format!(
        "--rank-by {name:?}: not a metric of model {}; its metrics: {}",
        scenario.model.name(),
        names.join(", ")
    )))
}

/// The terminal summary, fitted to the terminal; bold only on a terminal without `NO_COLOR`.
pub(super) fn summary(report: &RunReport, args: &RunArgs) -> String {
    // In process, the table is a value (a notebook's text): no colour, the default width.
    let terminal = std::io::stdout().is_terminal() && !super::embed::active();
    let width = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.parse().ok())
        .or_else(|| terminal.then(|| console::Term::stdout().size().1 as usize))
        .unwrap_or(120);
    let colour = terminal && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let options = SummaryOptions {
        all_metrics: args.all_metrics,
        rank_by: args.rank_by.clone(),
        width,
        colour,
        rows: args.metrics.iter().map(|m| stampede_scenario::models::expression::normalise(m)).collect(),
    };
    stampede_run::summary::render(report, &options)
}

pub(super) fn writing(args: &RunArgs) -> Writing {
    let shape = Shape { replica_rows: args.replica_rows, partition_by_point: args.partition_by.unwrap_or(false) };
    Writing { resume: args.resume, force: args.force, shape }
}

pub(super) fn parse_replica_rows(text: &str) -> std::result::Result<ReplicaRows, String> {
    ReplicaRows::parse(text).map_err(|e| e.message)
}

pub(super) fn parse_partition_by(text: &str) -> std::result::Result<bool, String> {
    match text {
        "grid_point" => Ok(true),
        "none" => Ok(false),
        other => Err(format!("{other:?}: the only partition is grid_point (or none)")),
    }
}

/// Runs `scenario` into its folder with a progress bar; with `--precision`, in stages
/// until the precision is met (`staged`), the stages on stderr. The manifest records
/// what was `chosen` (`warmup`, `precision`); `chosen.outcome` is where the search stopped.
pub(super) fn execute_with_progress(
    scenario: &Scenario,
    args: &RunArgs,
    documents: &Documents,
    chosen: &mut Chosen,
) -> Result<RunReport> {
    let threads = threads(args.threads)?;
    let stages = std::cell::RefCell::new(Vec::new());
    let fields = |report: &RunReport| chosen.manifest_fields(report, &stages.borrow());
    let documents = Documents {
        files: documents.files.clone(),
        write: documents.write,
        disk_bytes: documents.disk_bytes,
        manifest_fields: Some(&fields),
    };
    let Some(asked) = &chosen.precision else {
        let total = scenario.grid_points()?.len() as u64 * scenario.run.replicas as u64;
        let bar = progress_bar(total, args.quiet);
        let report = execute_with(scenario, &args.out, threads, &|| bar.inc(1), Some(&documents), writing(args))?;
        bar.finish_and_clear();
        return Ok(report);
    };
    let talk = !args.quiet && !args.json;
    let bar = progress_bar(0, args.quiet);
    let mut tell = |event: StageEvent| match event {
        StageEvent::Starting { from, to } => {
            bar.inc_length(u64::from(to - from) * u64::from(scenario.point_count()));
        }
        StageEvent::Finished { replicas, reached } => {
            stages.borrow_mut().push(replicas);
            if talk {
                bar.suspend(|| {
                    let short = reached.iter().filter(|r| !r.met()).count();
                    let state = if short == 0 { "met".to_string() } else { format!("{short} metric(s) short") };
                    eprintln!("precision {}: {replicas} replicas a point: {state}", asked.goal.asked());
                });
            }
        }
    };
    let with_replicas = |replicas: u32| asked.with_replicas(replicas, args);
    let (report, outcome) = stampede_run::staged::execute_precise(
        scenario,
        &asked.goal,
        &with_replicas,
        &args.out,
        threads,
        &|| bar.inc(1),
        &mut tell,
        Some(&documents),
        writing(args),
    )?;
    bar.finish_and_clear();
    if talk {
        for line in precision::lines(&outcome.reached) {
            eprintln!("  {line}");
        }
    }
    chosen.outcome = Some(outcome);
    Ok(report)
}

/// `--threads`: at least one; by default every core.
pub(super) fn threads(requested: Option<usize>) -> Result<usize> {
    Ok(match requested {
        Some(0) => return Err(Error::bad_input("--threads 0: must be at least 1")),
        Some(threads) => threads,
        None => std::thread::available_parallelism().map_or(1, usize::from),
    })
}

/// A progress bar on a terminal, hidden otherwise; in process, one the caller polls
/// ([`super::embed`]), whatever `quiet` says.
pub(super) fn progress_bar(total: u64, quiet: bool) -> ProgressBar {
    if let Some(bar) = super::embed::progress_bar(total) {
        return bar;
    }
    if !quiet && std::io::stderr().is_terminal() {
        let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
        bar.set_style(
            ProgressStyle::with_template(
                "{spinner} [{elapsed_precise}] {wide_bar} {pos}/{len} replicas  {per_sec}  ETA {eta}",
            )
            .expect("valid template"),
        );
        bar
    } else {
        ProgressBar::hidden()
    }
}
