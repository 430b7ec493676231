//! `stampede optimize`: the best configuration that meets the constraints, raced on
//! common random numbers.

use std::path::{Path, PathBuf};

use clap::Args;
use stampede_run::pipeline::{Documents, Shape, Writing};
use stampede_run::report::RunReport;
use stampede_scenario::{Error, Result, Scenario};

use super::run::{progress_bar, threads};
use super::{resolve, warn, ExitStatus, ScenarioArgs};

#[derive(Args)]
pub(super) struct OptimizeArgs {
    /// A built-in scenario name or a path to a .toml file; its grid (and --grid axes) are the candidates.
    pub(super) scenario: String,
    #[command(flatten)]
    pub(super) scenario_args: ScenarioArgs,
    /// The metric whose mean to minimize.
    #[arg(long, value_name = "METRIC")]
    pub(super) minimize: Option<String>,
    /// The metric whose mean to maximize.
    #[arg(long, value_name = "METRIC")]
    pub(super) maximize: Option<String>,
    /// A constraint every answer must meet (repeatable): 'recovery_s <= 1.5' (the mean; its
    /// one-sided interval must lie on the right side), 'p95(recovery_s) <= 2' (a percentile
    /// across replicas), 'fraction(recovery_s <= 1.5) >= 0.9'.
    #[arg(long = "require", value_name = "CONSTRAINT")]
    pub(super) requires: Vec<String>,
    /// Also require the scenario's [[verify]] claims with fixed bounds, of every candidate.
    #[arg(long)]
    pub(super) claims: bool,
    /// A continuous or integer dimension to search (repeatable): 'retry.budget_ratio=0.01..0.5:log',
    /// 'shards.servers=2..16:int', 'router.capacity_factor=1.0..2.0'.
    #[arg(long = "range", value_name = "PATH=LO..HI[:log|:int]")]
    pub(super) ranges: Vec<String>,
    /// The most replicas to spend in all (default: the candidates × run.replicas, what `run` would spend).
    #[arg(long, value_name = "N")]
    pub(super) budget_replicas: Option<u64>,
    /// Start no round after this many seconds of wall time; the answer then says the search
    /// stopped on time (where it stops depends on the machine).
    #[arg(long, value_name = "SECONDS")]
    pub(super) max_time: Option<f64>,
    /// δ: differences in the objective's mean smaller than this do not matter (default: 1% of the
    /// first stage's mean objective).
    #[arg(long, value_name = "DELTA", allow_hyphen_values = true)]
    pub(super) indifference: Option<f64>,
    /// The probability that the answer is right (within δ), and the level of constraint intervals.
    #[arg(long, value_name = "P", default_value_t = 0.95)]
    pub(super) confidence: f64,
    /// Replicas every candidate gets before any is judged.
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub(super) first_stage: u32,
    /// A grid axis to be robust against instead of choosing among its values ('faults'):
    /// every candidate runs at each of its values on the same replicas, and is judged by
    /// its worst (or, --robust mean, its mean) over them.
    #[arg(long, value_name = "AXIS")]
    pub(super) across: Option<String>,
    /// A scenario file's `[optimize] across = "faults"` is the default (this flag wins).
    /// With an across axis: 'worst' (default: the policy best in its worst case) or
    /// 'mean'; the file's `[optimize] robust` is the default.
    #[arg(long, value_name = "worst|mean")]
    pub(super) robust: Option<String>,
    /// With --range: Halton points sampled at first (default 8 × (ranges + 1)).
    #[arg(long, value_name = "N")]
    pub(super) samples: Option<usize>,
    /// With --range: rounds of local refinement around the two leaders.
    #[arg(long, value_name = "R", default_value_t = 2)]
    pub(super) refine: u32,
    /// Print the chosen configuration as a scenario file that `stampede run` reproduces
    /// (stdout; the answer goes to stderr).
    #[arg(long)]
    pub(super) show_toml: bool,
    /// Worker threads; never changes any result (default: all cores).
    #[arg(long, value_name = "T")]
    pub(super) threads: Option<usize>,
    /// Output root; results go to OUT/<scenario name>/.
    #[arg(long, value_name = "DIR", default_value = "out")]
    pub(super) out: PathBuf,
    /// Print the answer as one JSON document on stdout (also written as optimize.json).
    #[arg(long)]
    pub(super) json: bool,
    /// No progress bar and no answer on the terminal (the folder still has it).
    #[arg(long)]
    pub(super) quiet: bool,
    /// Do not write report.html into the output folder.
    #[arg(long)]
    pub(super) no_report: bool,
    /// Continue an interrupted search of the same command from its last finished round.
    #[arg(long)]
    pub(super) resume: bool,
    /// Replace OUT/<scenario name>/ even if it holds files stampede did not write.
    #[arg(long)]
    pub(super) force: bool,
}

/// `--max-time SECONDS` as a duration: a positive, finite number of seconds.
pub(super) fn max_time(seconds: f64) -> Result<std::time::Duration> {
    std::time::Duration::try_from_secs_f64(seconds)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| Error::bad_input(format!("--max-time {seconds}: a positive number of seconds")))
}

/// "40 s", "12 min", "3.5 h", "2.1 days".
pub(super) fn duration_words(seconds: f64) -> String {
    match seconds {
        s if s < 120.0 => format!("{s:.0} s"),
        s if s < 7_200.0 => format!("{:.0} min", s / 60.0),
        s if s < 172_800.0 => format!("{:.1} h", s / 3_600.0),
        s => format!("{:.1} days", s / 86_400.0),
    }
}

pub(super) fn optimize(args: OptimizeArgs) -> Result<ExitStatus> {
    use stampede_optimize::{answer, execute};
    let (scenario, request) = request(&args)?;
    request.check(&scenario)?;
    let threads = threads(args.threads)?;
    if let Some(warning) = request.budget_warning(&scenario) {
        super::warning(&warning);
    }
    if !(args.quiet || args.json) {
        say_cost(&request, &scenario, threads, args.max_time)?;
    }
    let write = |report: &RunReport, staging: &Path| -> Result<()> {
        if !args.no_report {
            stampede_report::write_as(staging, &report.output_dir)?;
        }
        Ok(())
    };
    let files = if args.no_report { vec![] } else { vec!["report.html"] };
    let disk_bytes = if args.no_report { 0.0 } else { stampede_run::budget::report_bytes(&scenario) };
    let bar = progress_bar(request.budget_for(&scenario), args.quiet || args.json || args.show_toml);
    let writing = Writing { resume: args.resume, force: args.force, shape: Shape::default() };
    let optimized = execute(
        &scenario,
        &request,
        &args.out,
        threads,
        &|| bar.inc(1),
        &Documents { files, write: &write, disk_bytes, manifest_fields: None },
        writing,
    )?;
    bar.finish_and_clear();
    let answer = &optimized.answer;
    let folder = optimized.report.output_dir.display().to_string();
    if args.show_toml {
        if !args.quiet {
            eprint!("{}", answer.render());
        }
        if let Some(chosen) = &answer.chosen {
            print!("{}", answer::show_toml(&optimized.candidates, &request, chosen.candidate, chosen.replicas));
        }
    } else if args.json {
        super::print_json(&answer.to_json());
    } else if !args.quiet {
        print!("{}", answer.render());
        println!("output: {folder}");
    }
    Ok(if answer.infeasible() { ExitStatus::Infeasible } else { ExitStatus::Success })
}

/// The scenario, with a column for each objective or requirement that is an
/// expression of metrics, and what the command line asks of the search.
fn request(args: &OptimizeArgs) -> Result<(Scenario, stampede_optimize::Request)> {
    use stampede_optimize::goal::{claims_as_constraints, parse_requirement, Objective};
    use stampede_optimize::space::Dimension;
    let scenario = resolve(&args.scenario, &args.scenario_args)?;
    warn(&scenario);
    let metrics = scenario.schema.metric_names();
    let objective = Objective::new(args.minimize.as_deref(), args.maximize.as_deref(), &metrics)?;
    let mut constraints =
        args.requires.iter().map(|text| parse_requirement(text, &metrics)).collect::<Result<Vec<_>>>()?;
    // An objective or a requirement may be an expression of metrics: a column of its own.
    let flag = if args.minimize.is_some() { "--minimize" } else { "--maximize" };
    let mut named = vec![(objective.metric.clone(), flag.to_string())];
    named.extend(constraints.iter().map(|c| (c.metric.clone(), format!("--require {:?}", c.text))));
    let scenario = scenario.with_metrics(&named)?;
    if args.claims {
        let (claims, notes) = claims_as_constraints(&scenario.verify);
        for note in notes {
            super::warning(&format!("--claims: {note}"));
        }
        if claims.is_empty() {
            return Err(Error::bad_input(format!(
                "--claims: scenario {} has no [[verify]] claim with a fixed bound to require",
                scenario.name
            )));
        }
        constraints.extend(claims);
    }
    let dimensions = args.ranges.iter().map(|text| Dimension::parse(text)).collect::<Result<Vec<_>>>()?;
    let across = across(args, &scenario)?;
    let request = stampede_optimize::Request {
        objective,
        constraints,
        dimensions,
        budget: args.budget_replicas,
        indifference: args.indifference,
        confidence: args.confidence,
        first_stage: args.first_stage,
        samples: args.samples,
        refinements: args.refine,
        max_time: args.max_time.map(max_time).transpose()?,
        across,
    };
    Ok((scenario, request))
}

/// The axis the policy must be best across (`--across`, or the scenario's
/// `[optimize] across`; the command line wins) with how (`--robust`, or the section's,
/// or the worst case). Warns when a grid's faults axis is searched like a policy.
fn across(args: &OptimizeArgs, scenario: &Scenario) -> Result<Option<stampede_optimize::across::Across>> {
    let section = scenario.optimize_section();
    let (across, named) = match (&args.across, &section.across) {
        (Some(axis), _) => (Some(axis.as_str()), "--across"),
        (None, Some(axis)) => (Some(axis.as_str()), "optimize.across ="),
        (None, None) => (None, "--across"),
    };
    let robust = match (&args.robust, across) {
        (Some(_), None) => {
            return Err(Error::bad_input("--robust: needs an axis to be robust against")
                .with_hint("add --across AXIS, or [optimize] across = \"AXIS\" to the scenario file"))
        }
        (Some(text), Some(_)) => text.as_str(),
        (None, _) => section.robust.as_deref().unwrap_or("worst"),
    };
    let robust = stampede_optimize::across::Robust::parse(robust)?;
    match across {
        Some(axis) => Ok(Some(stampede_optimize::across::Across::new(scenario, axis, robust, named)?)),
        None => {
            if scenario.grid.iter().any(|axis| axis.path == "faults") {
                super::warning(
                    "the grid's faults axis is searched like a policy: the answer picks a fault too; add --across \
                     faults for the policy best against every fault (its worst case)",
                );
            }
            Ok(None)
        }
    }
}

/// What the search may cost, said before its first round: the budget at the pace of
/// one replica of the base (measured now).
fn say_cost(
    request: &stampede_optimize::Request,
    scenario: &Scenario,
    threads: usize,
    max_time: Option<f64>,
) -> Result<()> {
    let budget = request.budget_for(scenario);
    let per_replica = stampede_run::budget::seconds_per_replica(scenario)?;
    let seconds = budget as f64 * per_replica / threads as f64;
    eprintln!(
        "stampede optimize: at most {budget} replicas (--budget-replicas); one replica of the base took {:.1} ms, so \
         at most about {} on {threads} thread{}{}",
        per_replica * 1e3,
        duration_words(seconds),
        if threads == 1 { "" } else { "s" },
        max_time.map_or(String::new(), |t| format!(" (--max-time {t} s bounds it)"))
    );
    Ok(())
}
