//! The `stampede` command: parses arguments, then hands over to the experiments
//! crate. Exit codes: 0 success, 2 bad input, 3 I/O or internal error.

mod output_file;
mod ring_cli;

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use stampede_run::pipeline::{execute_with, Documents, ReplicaRows, Shape, Writing};
use stampede_run::plan::{Plan, Shard};
use stampede_run::report::RunReport;
use stampede_run::shards::{execute_merge, execute_shard, Shards};
use stampede_run::summary::SummaryOptions;
use stampede_scenario::base::typing::parse_text;
use stampede_scenario::scenario::builtin::{load_scenario_source, scenario_dir, BUILTINS, DEFAULT_SCENARIO};
use stampede_scenario::scenario::claims::Skipped;
use stampede_scenario::scenario::overrides::{parse_grid, parse_set};
use stampede_scenario::{Error, Overrides, Result, Scenario};

#[derive(Parser)]
#[command(name = "stampede", version, about = "Monte Carlo engine for overload and resilience policies")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a scenario's policy grid × replicas and write the output folder.
    Run(RunArgs),
    /// List the built-in scenarios.
    List,
    /// Print a scenario, resolved, as a complete TOML file that `run` accepts.
    Show(ShowArgs),
    /// Run a scenario and check its [[verify]] assertions; exit 1 if one fails.
    #[command(mut_arg("json", |arg| arg.help(
        "Print the claims with their verdicts as one JSON document on stdout (the verify.json document)"
    )))]
    Verify(VerifyArgs),
    /// Write DIR/report.html: a self-contained HTML report of an output folder (tables,
    /// time series, latency, the grid's shape, claims), readable offline.
    Report(ReportArgs),
    /// Compare two output folders of one scenario (e.g. last night's and tonight's): what
    /// changed significantly, metric by metric, with Holm's correction; exit 1 if anything did.
    Compare(CompareArgs),
    /// Find the best configuration that meets constraints: race the grid's points (and
    /// --range samples) on common random numbers, spending replicas only where the
    /// ranking is in doubt (Kim–Nelson elimination); exit 1 if nothing is feasible.
    Optimize(OptimizeArgs),
    /// The consistent-hashing explorer: a ring in a SQLite file, seven strategies, their comparison.
    Ring(ring_cli::RingArgs),
    /// The local web app on 127.0.0.1: the LLM gateway's Learn and Sandbox pages, the ring
    /// explorer and the results browser.
    Serve(ServeArgs),
    /// Merge shard folders (from `run --shard`) into the folder a single run writes.
    Merge(MergeArgs),
    /// Fit distributions to measured latencies (a CSV or Parquet column, an HdrHistogram,
    /// Prometheus buckets): each family's parameters and Kolmogorov–Smirnov distance,
    /// the TOML value of the best and of the data itself, and a page of the CDFs.
    Fit(FitArgs),
    /// The LLM gateway's capacity arithmetic (no simulation): limits per meter, the
    /// binding one, the max_tokens in-flight tax, sustainable turns/s and what each lever buys.
    Capacity(CapacityArgs),
}

#[derive(Args)]
struct CapacityArgs {
    /// A fixture TOML file (default: the shipped LLM-gateway fixture).
    #[arg(long, value_name = "FILE")]
    fixture: Option<String>,
    /// The turns per second the product must serve.
    #[arg(long, value_name = "R", default_value_t = 1000.0)]
    target_turns_rps: f64,
    /// Print the result as one JSON document.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct MergeArgs {
    /// Shard folders (out/NAME/shards/shard=K), or the folder holding them (out/NAME/shards).
    #[arg(required = true)]
    shards: Vec<PathBuf>,
    /// Output root; the merged run goes to OUT/<scenario name>/.
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// Do not write report.html.
    #[arg(long)]
    no_report: bool,
    /// Print nothing but errors.
    #[arg(long)]
    quiet: bool,
    /// Replace OUT/<scenario name>/ (and --junit's FILE) even if it holds files
    /// stampede did not write.
    #[arg(long)]
    force: bool,
    /// Which per-replica rows to write: all, none, or sample:N (replicas 0..N of each
    /// grid point); by default the rows the shards kept. The summary, histograms and
    /// series are exact either way.
    #[arg(long, value_name = "all|none|sample:N", value_parser = parse_replica_rows)]
    replica_rows: Option<ReplicaRows>,
    /// `grid_point`: write replica rows and series as hive-partitioned files,
    /// replicas/grid_point=K/part-0.parquet and timeseries/grid_point=K/part-0.parquet.
    #[arg(long, value_name = "grid_point", value_parser = parse_partition_by)]
    partition_by: Option<bool>,
    /// Check the scenario's [[verify]] claims on the merged run, as `stampede verify`
    /// does on one machine: verify.json in the folder, the verdicts printed, exit 1 if
    /// one fails. Claims over replicas (quantiles, fractions) need the shards' rows
    /// (`run --shard … --replica-rows all`).
    #[arg(long)]
    verify: bool,
    /// With --verify: also write the verdicts as JUnit XML to FILE.
    #[arg(long, value_name = "FILE", requires = "verify")]
    junit: Option<PathBuf>,
    /// Print the merged run's summary as one JSON document on stdout, as `run --json`
    /// does (with --verify: the claims with their verdicts, as `verify --json`).
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct ServeArgs {
    /// The port (0: any free port).
    #[arg(long, value_name = "P", default_value_t = 8350)]
    port: u16,
    /// The address to listen on. Anything but loopback lets other machines change the
    /// ring file: a warning says so.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1")]
    bind: std::net::IpAddr,
    /// Open the app in the default browser.
    #[arg(long)]
    open: bool,
    /// The ring's SQLite file (the same as `stampede ring --db`).
    #[arg(long, value_name = "FILE", default_value = "stampede-ring.sqlite")]
    db: PathBuf,
    /// Where the results page finds output folders (`stampede run --out`).
    #[arg(long, value_name = "DIR", default_value = "out")]
    results: PathBuf,
    /// Also answer requests for this host name (repeatable), for a deliberate reverse
    /// proxy: NAME matches at any port, NAME:PORT at that port. Only 127.0.0.1, localhost
    /// and [::1] at the server's port are answered otherwise (defeats DNS rebinding).
    #[arg(long = "allow-host", value_name = "NAME")]
    allow_hosts: Vec<String>,
    /// The most replicas one Sandbox run may ask for.
    #[arg(long, value_name = "N", default_value_t = stampede_serve::Caps::default().replicas)]
    max_replicas: u32,
    /// The most simulated seconds (warm-up included) a Sandbox replica may ask for.
    #[arg(long, value_name = "S", default_value_t = stampede_serve::Caps::default().sim_seconds)]
    max_sim_seconds: f64,
    /// The most turns one Sandbox run may simulate in all (replicas × seconds × turns/s).
    #[arg(long, value_name = "N", default_value_t = stampede_serve::Caps::default().turns)]
    max_turns: f64,
    /// Simulations (Learn and Sandbox runs) that run at once; a short queue of as many
    /// waits behind them, and past that a request gets 503 with Retry-After
    /// (default: the machine's cores).
    #[arg(long, value_name = "N")]
    jobs: Option<usize>,
    /// The most keys one ring request may generate.
    #[arg(long, value_name = "N", default_value_t = stampede_serve::Caps::default().keys)]
    max_keys: u64,
}

#[derive(Args)]
struct ReportArgs {
    /// An output folder written by `stampede run` or `verify` (e.g. out/baltor).
    dir: PathBuf,
}

#[derive(Args)]
struct CompareArgs {
    /// The baseline output folder (e.g. last night's out/mmc).
    a: PathBuf,
    /// The output folder to compare with it.
    b: PathBuf,
    /// The chance of any false alarm over all the tests together (Holm's correction).
    #[arg(long, default_value_t = 0.05)]
    alpha: f64,
    /// A change must also move the mean by more than this share of A's (0.02: 2%).
    #[arg(long, value_name = "SHARE")]
    tolerance: Option<f64>,
    /// List every metric, not only those that changed.
    #[arg(long)]
    all: bool,
    /// Also compare latency over time: each latency window starting in [FROM, TO)
    /// seconds, every request's p50 and p99 per window (from timeseries.parquet).
    #[arg(long, value_name = "FROM,TO", value_parser = window_arg)]
    window: Option<(f64, f64)>,
    /// Print the answer as one JSON document.
    #[arg(long)]
    json: bool,
    /// Also write a self-contained HTML page of the differences to FILE.
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
    /// Also write JUnit XML to FILE: a testcase per (grid point, metric) tested, a
    /// failure per change.
    #[arg(long, value_name = "FILE")]
    junit: Option<PathBuf>,
    /// Replace --html's or --junit's FILE even if it is not one stampede wrote.
    #[arg(long)]
    force: bool,
}

#[derive(Args)]
struct ScenarioArgs {
    /// Override one scenario field: --set queue.servers=3 (repeatable, later wins). A table
    /// merges into its section (--set 'retry={policy="backoff"}'); a path that is a grid axis
    /// replaces the axis with this one value.
    #[arg(long = "set", value_name = "PATH=VALUE")]
    sets: Vec<String>,
    /// Add or replace a grid axis: --grid queue.servers=2,3,4, or a TOML array whose values may
    /// be tables: --grid 'retry=[{policy="naive"}, {policy="backoff"}]' (repeatable; axes multiply).
    #[arg(long = "grid", value_name = "PATH=V1,V2,...")]
    grids: Vec<String>,
    /// Only the [[grid.case]] entries with this label (repeatable; kept in the file's order).
    /// Claims follow their points: a claim about a case left out is skipped, saying so.
    #[arg(long = "case", value_name = "LABEL")]
    cases: Vec<String>,
    /// Replicas per grid point (default: the scenario's run.replicas).
    #[arg(long, value_name = "N")]
    replicas: Option<u32>,
    /// Master seed, an unsigned 64-bit integer (default: the scenario's run.seed).
    #[arg(long, value_name = "S", allow_hyphen_values = true, value_parser = parse_seed)]
    seed: Option<u64>,
}

#[derive(Args)]
struct RunArgs {
    /// A built-in scenario name or a path to a .toml file (default: the showcase).
    scenario: Option<String>,
    #[command(flatten)]
    scenario_args: ScenarioArgs,
    /// Worker threads; never changes any result (default: all cores).
    #[arg(long, value_name = "T")]
    threads: Option<usize>,
    /// Output root; results go to OUT/<scenario name>/.
    #[arg(long, value_name = "DIR", default_value = "out")]
    out: PathBuf,
    /// Print the run's summary as one JSON document on stdout.
    #[arg(long)]
    json: bool,
    /// No progress bar and no table.
    #[arg(long)]
    quiet: bool,
    /// Show every metric in the summary table, not only the headline ones.
    #[arg(long)]
    all_metrics: bool,
    /// When the grid is too wide for the terminal, show its best and worst points by this metric.
    #[arg(long, value_name = "METRIC")]
    rank_by: Option<String>,
    /// Do not write report.html into the output folder.
    #[arg(long)]
    no_report: bool,
    /// Finish an interrupted run of the same command: only the work its checkpoint lacks
    /// (without a checkpoint, says so and runs from the start).
    #[arg(long)]
    resume: bool,
    /// Replace OUT/<scenario name>/ even if it holds files stampede did not write (by
    /// default only a folder stampede wrote is replaced; anything else is refused).
    #[arg(long)]
    force: bool,
    /// Which per-replica rows to write: all (default), none, or sample:N (replicas 0..N
    /// of each grid point). The summary, histograms and series are exact either way.
    /// With --shard, the rows the shard keeps: its merge writes these or fewer.
    #[arg(long, value_name = "all|none|sample:N", default_value = "all", value_parser = parse_replica_rows)]
    replica_rows: ReplicaRows,
    /// `grid_point`: write replica rows and series as hive-partitioned files,
    /// replicas/grid_point=K/part-0.parquet and timeseries/grid_point=K/part-0.parquet.
    #[arg(long, value_name = "grid_point", value_parser = parse_partition_by)]
    partition_by: Option<bool>,
    /// Run shard K of N (0-based) and write OUT/NAME/shards/shard=K/ for `stampede merge`;
    /// `auto` reads SLURM_ARRAY_TASK_ID/COUNT/MIN or JOB_COMPLETION_INDEX (run only).
    #[arg(long, value_name = "K/N|auto")]
    shard: Option<String>,
    /// Also write trace.parquet: every call, attempt and wait of replica R of each grid
    /// point (gateway, cluster and dependency models).
    #[arg(long, value_name = "R")]
    trace: Option<u32>,
}

#[derive(Args)]
struct OptimizeArgs {
    /// A built-in scenario name or a path to a .toml file; its grid (and --grid axes) are the candidates.
    scenario: String,
    #[command(flatten)]
    scenario_args: ScenarioArgs,
    /// The metric whose mean to minimize.
    #[arg(long, value_name = "METRIC")]
    minimize: Option<String>,
    /// The metric whose mean to maximize.
    #[arg(long, value_name = "METRIC")]
    maximize: Option<String>,
    /// A constraint every answer must meet (repeatable): 'recovery_s <= 1.5' (the mean; its
    /// one-sided interval must lie on the right side), 'p95(recovery_s) <= 2' (a percentile
    /// across replicas), 'fraction(recovery_s <= 1.5) >= 0.9'.
    #[arg(long = "require", value_name = "CONSTRAINT")]
    requires: Vec<String>,
    /// Also require the scenario's [[verify]] claims with fixed bounds, of every candidate.
    #[arg(long)]
    claims: bool,
    /// A continuous or integer dimension to search (repeatable): 'retry.budget_ratio=0.01..0.5:log',
    /// 'shards.servers=2..16:int', 'router.capacity_factor=1.0..2.0'.
    #[arg(long = "range", value_name = "PATH=LO..HI[:log|:int]")]
    ranges: Vec<String>,
    /// The most replicas to spend in all (default: the candidates × run.replicas, what `run` would spend).
    #[arg(long, value_name = "N")]
    budget_replicas: Option<u64>,
    /// Start no round after this many seconds of wall time; the answer then says the search
    /// stopped on time (where it stops depends on the machine).
    #[arg(long, value_name = "SECONDS")]
    max_time: Option<f64>,
    /// δ: differences in the objective's mean smaller than this do not matter (default: 1% of the
    /// first stage's mean objective).
    #[arg(long, value_name = "DELTA", allow_hyphen_values = true)]
    indifference: Option<f64>,
    /// The probability that the answer is right (within δ), and the level of constraint intervals.
    #[arg(long, value_name = "P", default_value_t = 0.95)]
    confidence: f64,
    /// Replicas every candidate gets before any is judged.
    #[arg(long, value_name = "N", default_value_t = 20)]
    first_stage: u32,
    /// With --range: Halton points sampled at first (default 8 × (ranges + 1)).
    #[arg(long, value_name = "N")]
    samples: Option<usize>,
    /// With --range: rounds of local refinement around the two leaders.
    #[arg(long, value_name = "R", default_value_t = 2)]
    refine: u32,
    /// Print the chosen configuration as a scenario file that `stampede run` reproduces
    /// (stdout; the answer goes to stderr).
    #[arg(long)]
    show_toml: bool,
    /// Worker threads; never changes any result (default: all cores).
    #[arg(long, value_name = "T")]
    threads: Option<usize>,
    /// Output root; results go to OUT/<scenario name>/.
    #[arg(long, value_name = "DIR", default_value = "out")]
    out: PathBuf,
    /// Print the answer as one JSON document on stdout (also written as optimize.json).
    #[arg(long)]
    json: bool,
    /// No progress bar and no answer on the terminal (the folder still has it).
    #[arg(long)]
    quiet: bool,
    /// Do not write report.html into the output folder.
    #[arg(long)]
    no_report: bool,
    /// Continue an interrupted search of the same command from its last finished round.
    #[arg(long)]
    resume: bool,
    /// Replace OUT/<scenario name>/ even if it holds files stampede did not write.
    #[arg(long)]
    force: bool,
}

#[derive(Args)]
struct FitArgs {
    /// The data: .csv or .parquet (a sample), .hdr/.hlog (an HdrHistogram), or a
    /// Prometheus exposition or API answer (with --metric).
    file: String,
    /// The column of a Parquet file, or of a CSV with a header row.
    #[arg(long, value_name = "NAME")]
    column: Option<String>,
    /// An HdrHistogram's unit: ns, us, ms or s.
    #[arg(long, value_name = "UNIT")]
    unit: Option<String>,
    /// A Prometheus histogram's metric name (without _bucket).
    #[arg(long, value_name = "NAME")]
    metric: Option<String>,
    /// A Prometheus label the series must have (repeatable): --label route=/checkout.
    #[arg(long = "label", value_name = "NAME=VALUE")]
    labels: Vec<String>,
    /// Above a Prometheus histogram's last finite bucket: cap (default) or exponential.
    #[arg(long, value_name = "cap|exponential")]
    tail: Option<String>,
    /// Print the result as one JSON document.
    #[arg(long)]
    json: bool,
    /// Where the page of CDFs goes (default: out/fit-<file stem>.html).
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Replace the page even if the file there is not one stampede wrote.
    #[arg(long)]
    force: bool,
}

#[derive(Args)]
struct VerifyArgs {
    #[command(flatten)]
    run: RunArgs,
    /// Also write the verdicts as JUnit XML to FILE (one test case per claim), for CI
    /// dashboards; written whether the claims pass or fail.
    #[arg(long, value_name = "FILE")]
    junit: Option<PathBuf>,
    /// Measure the claims instead of judging one run: run them over N consecutive seeds
    /// from --seed (else run.seed) and print each claim's pass rate; exit 1 when a claim
    /// holds on fewer than 99% of them. Nothing is written.
    #[arg(long, value_name = "N")]
    seeds: Option<u32>,
}

#[derive(Args)]
struct ShowArgs {
    /// A built-in scenario name or a path to a .toml file.
    scenario: String,
    #[command(flatten)]
    scenario_args: ScenarioArgs,
}

/// How a successful command ends.
enum ExitStatus {
    Success,
    /// Exit 1: a `verify` assertion failed.
    VerificationFailed,
    /// Exit 1: `compare` found a significant change.
    Changed,
    /// Exit 1: `optimize` found no candidate that meets the constraints.
    Infeasible,
}

fn main() -> ExitCode {
    // A closed pipe (`stampede list | head -1`) ends the process quietly, as it does
    // for other Unix tools, instead of a panic in println!.
    #[cfg(unix)]
    // SAFETY: restoring the default disposition of SIGPIPE before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = Cli::parse();
    let outcome = match cli.command {
        Command::Run(args) => run(args).map(|()| ExitStatus::Success),
        Command::List => list().map(|()| ExitStatus::Success),
        Command::Show(args) => show(args).map(|()| ExitStatus::Success),
        Command::Verify(args) => verify(args),
        Command::Capacity(args) => capacity(args).map(|()| ExitStatus::Success),
        Command::Report(args) => report(args).map(|()| ExitStatus::Success),
        Command::Compare(args) => compare(args),
        Command::Optimize(args) => optimize(args),
        Command::Ring(args) => ring_cli::run(args).map(|()| ExitStatus::Success),
        Command::Serve(args) => serve(args).map(|()| ExitStatus::Success),
        Command::Merge(args) => merge(args),
        Command::Fit(args) => fit(args).map(|()| ExitStatus::Success),
    };
    match outcome {
        Ok(ExitStatus::Success) => ExitCode::SUCCESS,
        Ok(ExitStatus::VerificationFailed | ExitStatus::Changed | ExitStatus::Infeasible) => ExitCode::from(1),
        Err(error) => {
            eprintln!("stampede: error: {error}");
            ExitCode::from(error.exit_code() as u8)
        }
    }
}

/// `--seed`: says that seeds are unsigned, rather than clap's tip to write `-- -1`
/// (which would make -1 the scenario).
fn parse_seed(text: &str) -> std::result::Result<u64, String> {
    text.trim()
        .parse::<u64>()
        .map_err(|_| format!("seeds are unsigned 64-bit integers, 0 to {}; {text:?} is not one", u64::MAX))
}

/// Prints the scenario's warnings (valid input that would likely mislead) to stderr,
/// whatever `--quiet` says: they are not progress.
fn warn(scenario: &Scenario) {
    for warning in scenario.warnings() {
        eprintln!("stampede: warning: {warning}");
    }
}

fn resolve(scenario: &str, args: &ScenarioArgs) -> Result<Scenario> {
    let source = load_scenario_source(scenario)?;
    let mut overrides = Overrides::default();
    for set in &args.sets {
        overrides.sets.push(parse_set(set)?);
    }
    if args.replicas == Some(0) {
        return Err(Error::bad_input(
            "--replicas 0: must be at least 1 (a run setting: the replicas of every grid point)",
        ));
    }
    if let Some(replicas) = args.replicas {
        overrides.sets.push(("run.replicas".into(), toml::Value::Integer(replicas.into())));
    }
    if let Some(seed) = args.seed {
        let value = i64::try_from(seed).map_or_else(|_| toml::Value::String(seed.to_string()), toml::Value::Integer);
        overrides.sets.push(("run.seed".into(), value));
    }
    for grid in &args.grids {
        overrides.grids.push(parse_grid(grid)?);
    }
    overrides.cases = args.cases.clone();
    match scenario_dir(scenario) {
        Some(dir) => Scenario::resolve_in(source, &overrides, &dir),
        None => Scenario::resolve(source, &overrides),
    }
}

fn run(args: RunArgs) -> Result<()> {
    let name = args.scenario.as_deref().unwrap_or(DEFAULT_SCENARIO);
    let scenario = resolve(name, &args.scenario_args)?;
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
    let write = |report: &RunReport, staging: &Path| {
        if let Some(replica) = args.trace {
            stampede_run::trace::write(staging, &scenario, replica)?;
        }
        write_report(report, staging, &args)
    };
    let mut files = if args.no_report { vec![] } else { vec!["report.html"] };
    let mut disk_bytes = if args.no_report { 0.0 } else { report_bytes(&scenario) };
    if let Some(replica) = args.trace {
        files.push(stampede_run::trace::FILE);
        disk_bytes += stampede_run::trace::estimate_bytes(&scenario, replica)?;
    }
    let documents = Documents { files, write: &write, disk_bytes };
    let report = execute_with_progress(&scenario, &args, &documents)?;
    let html = (!args.no_report).then(|| report.output_dir.join("report.html"));
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report.to_json()).expect("JSON serialises"));
    } else if !args.quiet {
        print!("{}", summary(&report, &args));
        if let Some(html) = html {
            println!("report: {}", html.display());
        }
    }
    Ok(())
}

/// `run --shard`: one shard's folder.
fn run_shard(scenario: &Scenario, text: &str, args: &RunArgs) -> Result<()> {
    let shard = if text == "auto" {
        let (shard, how) = Shard::from_env(|name| std::env::var(name).ok())?;
        if !args.quiet {
            eprintln!("stampede: --shard auto: shard {} of {} (from {how})", shard.index, shard.count);
        }
        shard
    } else {
        Shard::parse(text)?
    };
    let threads = threads(args.threads)?;
    let plan = Plan::new(scenario.point_count(), scenario.run.replicas, Some(shard));
    let bar = progress_bar(plan.task_count(), args.quiet);
    let dir = execute_shard(scenario, shard, &args.out, threads, &|| bar.inc(1), writing(args))?;
    bar.finish_and_clear();
    if !args.quiet {
        println!("wrote shard {} of {} ({} tasks): {}", shard.index, shard.count, plan.task_count(), dir.display());
    }
    Ok(())
}

/// `stampede fit FILE`: the data, each candidate, the best value and the page.
fn fit(args: FitArgs) -> Result<()> {
    use stampede_scenario::inputs::DistributionSpec;
    let lower = args.file.to_ascii_lowercase();
    let mut labels = std::collections::BTreeMap::new();
    for label in &args.labels {
        let (name, value) = label.split_once('=').ok_or_else(|| {
            Error::bad_input(format!("--label {label:?}: write NAME=VALUE, e.g. --label route=/checkout"))
        })?;
        labels.insert(name.to_string(), value.to_string());
    }
    let spec = if args.metric.is_some() {
        DistributionSpec {
            dist: "prometheus".into(),
            file: Some(args.file.clone()),
            metric: args.metric.clone(),
            labels: (!labels.is_empty()).then_some(labels),
            tail: args.tail.clone(),
            ..DistributionSpec::default()
        }
    } else if [".hdr", ".hlog", ".hgrm", ".hdrz"].iter().any(|e| lower.ends_with(e)) || args.unit.is_some() {
        let unit = args.unit.clone().ok_or_else(|| {
            Error::bad_input(format!(
                "{}: an HdrHistogram needs --unit (ns, us, ms or s): the unit its values were recorded in",
                args.file
            ))
        })?;
        DistributionSpec {
            dist: "hdr".into(),
            file: Some(args.file.clone()),
            unit: Some(unit),
            ..DistributionSpec::default()
        }
    } else {
        DistributionSpec {
            dist: "empirical".into(),
            file: Some(args.file.clone()),
            column: args.column.clone(),
            ..DistributionSpec::default()
        }
    };
    if spec.dist != "prometheus" && (args.tail.is_some() || !args.labels.is_empty()) {
        return Err(Error::bad_input("--tail and --label are for a Prometheus histogram: give --metric too"));
    }
    let stem =
        Path::new(&args.file).file_stem().map(|s| s.to_string_lossy().to_string()).unwrap_or_else(|| "data".into());
    let page = args.out.clone().unwrap_or_else(|| PathBuf::from("out").join(format!("fit-{stem}.html")));
    output_file::check(&page, "--out", args.force)?;
    let (table, count) = spec.data("fit")?;
    let report = stampede_scenario::inputs::fit::fit(&table, count);
    let source = spec.inline_toml();
    output_file::write(&page, "--out", stampede_report::fit_page::render(&source, &report).as_bytes(), args.force)?;
    let page_text = page.display().to_string();
    if args.json {
        let json = report.to_json(&args.file, &source, &page_text);
        println!("{}", serde_json::to_string_pretty(&json).expect("JSON serialises"));
    } else {
        print!("{}", report.render(&args.file, &source, &page_text));
    }
    Ok(())
}

fn merge(args: MergeArgs) -> Result<ExitStatus> {
    use stampede_run::verify::verdicts::{write_json, Verdicts};
    // A folder holding shard=K folders stands for all of them.
    let mut dirs = Vec::new();
    for dir in &args.shards {
        if !dir.join("manifest.json").exists() && dir.is_dir() {
            let mut inside: Vec<PathBuf> = std::fs::read_dir(dir)
                .map_err(|e| Error::bad_input(format!("{}: {e}", dir.display())))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("shard=")))
                .collect();
            inside.sort();
            if inside.is_empty() {
                return Err(Error::bad_input(format!(
                    "merge: {}: not a shard folder, and it holds none (shard=K folders, from `stampede run --shard`)",
                    dir.display()
                )));
            }
            dirs.extend(inside);
        } else {
            dirs.push(dir.clone());
        }
    }
    let started = std::time::Instant::now();
    let shards = Shards::read(&dirs)?;
    let skipped =
        if args.verify { Some(claims_a_merge_can_check(&shards, args.junit.as_deref(), args.force)?) } else { None };
    let no_report = args.no_report;
    let write = |report: &RunReport, staging: &Path| {
        // The verdicts go into the folder before the report that shows them.
        if let Some(skipped) = &skipped {
            write_json(staging, &Verdicts::new(report, skipped.clone()).to_json())?;
        }
        if !no_report {
            stampede_report::write_as(staging, &report.output_dir)?;
        }
        Ok(())
    };
    let mut files = if skipped.is_some() { vec!["verify.json"] } else { vec![] };
    if !no_report {
        files.push("report.html");
    }
    let disk_bytes = if no_report { 0.0 } else { report_bytes(&shards.scenario) };
    let documents = Documents { files, write: &write, disk_bytes };
    let shape = Shape {
        replica_rows: args.replica_rows.unwrap_or(shards.kept),
        partition_by_point: args.partition_by.unwrap_or(false),
    };
    let report =
        execute_merge(&shards, &args.out, Some(&documents), Writing { resume: false, force: args.force, shape })?;
    if !args.quiet && !args.json {
        println!("merged {} shards into {}", dirs.len(), report.output_dir.display());
        // What the merge cost: "Sizing a big sweep" in the README reads these.
        let seconds = started.elapsed().as_secs_f64();
        let peak = stampede_run::budget::peak_rss_bytes()
            .map_or(String::new(), |bytes| format!(", peak memory {:.1} MiB", bytes as f64 / (1024.0 * 1024.0)));
        println!("merge took {seconds:.2} s ({:.1} ms per shard){peak}", seconds * 1e3 / dirs.len() as f64);
        if !no_report && skipped.is_none() {
            println!("report: {}", report.output_dir.join("report.html").display());
        }
    }
    let Some(skipped) = skipped else {
        if args.json {
            println!("{}", serde_json::to_string_pretty(&report.to_json()).expect("JSON serialises"));
        }
        return Ok(ExitStatus::Success);
    };
    let html = (!no_report).then(|| report.output_dir.join("report.html"));
    end_with_verdicts(&Verdicts::new(&report, skipped), args.junit.as_deref().map(|j| (j, args.force)), args.json, html)
}

/// `merge --verify`: the claims the merged run can check, refused before anything is
/// written when there are none, or when one reads every replica's value and the shards
/// did not keep every row (a verdict over some replicas would not be the run's).
fn claims_a_merge_can_check(shards: &Shards, junit: Option<&Path>, force: bool) -> Result<Vec<Skipped>> {
    if let Some(junit) = junit {
        output_file::check(junit, "--junit", force)?;
    }
    let (claims, skipped) = claims_that_apply(&shards.scenario, "merge --verify: ")?;
    if shards.kept != ReplicaRows::All {
        let over_replicas: Vec<String> = claims
            .iter()
            .filter(|(_, claim)| claim.statistic.reads_replicas())
            .map(|(index, claim)| format!("verify[{index}] ({} of {})", claim.statistic.name(), claim.metric))
            .collect();
        if !over_replicas.is_empty() {
            return Err(Error::bad_input(format!(
                "merge --verify: {} read every replica's value, and the shards were run with --replica-rows {}; \
                 run them with --replica-rows all (the merge can still write fewer with its own --replica-rows)",
                over_replicas.join(", "),
                shards.kept.name()
            )));
        }
    }
    Ok(skipped)
}

/// Writes report.html into the run's staging folder unless `--no-report`.
fn write_report(report: &RunReport, staging: &Path, args: &RunArgs) -> Result<()> {
    if !args.no_report {
        stampede_report::write_as(staging, &report.output_dir)?;
    }
    Ok(())
}

fn serve(args: ServeArgs) -> Result<()> {
    if !args.bind.is_loopback() {
        eprintln!(
            "stampede: warning: serving on {}: anyone who can reach this machine can read and change {}; requests \
             are answered for the loopback names, the bound address and --allow-host NAMEs only (add the name \
             others use to reach it)",
            args.bind,
            args.db.display()
        );
    }
    if args.jobs == Some(0) {
        return Err(Error::bad_input("--jobs 0: at least one simulation must be able to run"));
    }
    let options = stampede_serve::Options {
        db: args.db.clone(),
        results: args.results.clone(),
        allow_hosts: args.allow_hosts.clone(),
        caps: stampede_serve::Caps {
            replicas: args.max_replicas,
            sim_seconds: args.max_sim_seconds,
            turns: args.max_turns,
            keys: args.max_keys,
        },
        jobs: {
            let running = args.jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()));
            stampede_serve::llm::jobs::Slots::new(running, running)
        },
    };
    let address = std::net::SocketAddr::new(args.bind, args.port);
    stampede_serve::serve(options, address, |bound| {
        // A wildcard address is not a name a browser may use (nor one the server answers to).
        let shown = if bound.ip().is_unspecified() {
            std::net::SocketAddr::new(std::net::Ipv4Addr::LOCALHOST.into(), bound.port())
        } else {
            bound
        };
        let url = format!("http://{shown}/");
        println!(
            "stampede serve: {url} (ring file {}, results from {}); Ctrl-C stops",
            args.db.display(),
            args.results.display()
        );
        if args.open {
            // Best effort: a machine without a desktop just has the URL above.
            let _ = std::process::Command::new("xdg-open").arg(&url).spawn();
        }
    })
    .map_err(|e| Error::io(format!("cannot serve on {address}: {e}")))
}

fn report(args: ReportArgs) -> Result<()> {
    let path = stampede_report::write(&args.dir)?;
    println!("{}", path.display());
    Ok(())
}

fn compare(args: CompareArgs) -> Result<ExitStatus> {
    if let Some(path) = &args.html {
        output_file::check(path, "--html", args.force)?;
    }
    if let Some(path) = &args.junit {
        output_file::check(path, "--junit", args.force)?;
    }
    let comparison = stampede_report::compare::compare(&args.a, &args.b, args.alpha, args.tolerance, args.window)?;
    if let Some(path) = &args.html {
        output_file::write(path, "--html", comparison.html().as_bytes(), args.force)?;
    }
    if let Some(path) = &args.junit {
        output_file::write(path, "--junit", comparison.to_junit().as_bytes(), args.force)?;
    }
    if std::env::var_os("GITHUB_ACTIONS").is_some_and(|v| v == "true") {
        print!("{}", comparison.github_annotations());
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&comparison.to_json()).expect("JSON serialises"));
    } else {
        print!("{}", comparison.render(args.all));
        if let Some(path) = &args.html {
            println!("page: {}", path.display());
        }
    }
    Ok(if comparison.changed() { ExitStatus::Changed } else { ExitStatus::Success })
}

/// `--window FROM,TO`: two numbers of seconds.
fn window_arg(text: &str) -> std::result::Result<(f64, f64), String> {
    let parse = |part: &str| part.trim().parse::<f64>().ok();
    match text.split_once(',').map(|(from, to)| (parse(from), parse(to))) {
        Some((Some(from), Some(to))) => Ok((from, to)),
        _ => Err(format!("{text:?}: two numbers of seconds, FROM,TO (e.g. 10,55)")),
    }
}

/// `--max-time SECONDS` as a duration: a positive, finite number of seconds.
fn max_time(seconds: f64) -> Result<std::time::Duration> {
    std::time::Duration::try_from_secs_f64(seconds)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| Error::bad_input(format!("--max-time {seconds}: a positive number of seconds")))
}

/// "40 s", "12 min", "3.5 h", "2.1 days".
fn duration_words(seconds: f64) -> String {
    match seconds {
        s if s < 120.0 => format!("{s:.0} s"),
        s if s < 7_200.0 => format!("{:.0} min", s / 60.0),
        s if s < 172_800.0 => format!("{:.1} h", s / 3_600.0),
        s => format!("{:.1} days", s / 86_400.0),
    }
}

/// The HTML report's size, estimated before the run for the free-space check.
fn report_bytes(scenario: &Scenario) -> f64 {
    stampede_run::budget::report_bytes(scenario)
}

fn optimize(args: OptimizeArgs) -> Result<ExitStatus> {
    use stampede_optimize::goal::{claims_as_constraints, parse_requirement, Objective};
    use stampede_optimize::space::Dimension;
    use stampede_optimize::{answer, execute, Request};
    let scenario = resolve(&args.scenario, &args.scenario_args)?;
    warn(&scenario);
    let metrics = scenario.schema.metric_names();
    let objective = Objective::new(args.minimize.as_deref(), args.maximize.as_deref(), &metrics)?;
    let mut constraints =
        args.requires.iter().map(|text| parse_requirement(text, &metrics)).collect::<Result<Vec<_>>>()?;
    if args.claims {
        let (claims, notes) = claims_as_constraints(&scenario.verify);
        for note in notes {
            eprintln!("stampede: warning: --claims: {note}");
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
    let request = Request {
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
    };
    request.check(&scenario)?;
    let threads = threads(args.threads)?;
    if let Some(warning) = request.budget_warning(&scenario) {
        eprintln!("stampede: warning: {warning}");
    }
    if !(args.quiet || args.json) {
        // What the search may cost, before its first round: the budget at the pace of
        // one replica of the base (measured now).
        let budget = request.budget_for(&scenario);
        let per_replica = stampede_run::budget::seconds_per_replica(&scenario)?;
        let seconds = budget as f64 * per_replica / threads as f64;
        eprintln!(
            "stampede optimize: at most {budget} replicas (--budget-replicas); one replica of the base took {:.1} ms, \
             so at most about {} on {threads} thread{}{}",
            per_replica * 1e3,
            duration_words(seconds),
            if threads == 1 { "" } else { "s" },
            args.max_time.map_or(String::new(), |t| format!(" (--max-time {t} s bounds it)"))
        );
    }
    let write = |report: &RunReport, staging: &Path| -> Result<()> {
        if !args.no_report {
            stampede_report::write_as(staging, &report.output_dir)?;
        }
        Ok(())
    };
    let files = if args.no_report { vec![] } else { vec!["report.html"] };
    let disk_bytes = if args.no_report { 0.0 } else { report_bytes(&scenario) };
    let bar = progress_bar(request.budget_for(&scenario), args.quiet || args.json || args.show_toml);
    let writing = Writing { resume: args.resume, force: args.force, shape: Shape::default() };
    let optimized = execute(
        &scenario,
        &request,
        &args.out,
        threads,
        &|| bar.inc(1),
        &Documents { files, write: &write, disk_bytes },
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
            print!("{}", answer::show_toml(&optimized.candidates, chosen.candidate, chosen.replicas));
        }
    } else if args.json {
        println!("{}", serde_json::to_string_pretty(&answer.to_json()).expect("JSON serialises"));
    } else if !args.quiet {
        print!("{}", answer.render());
        println!("output: {folder}");
    }
    Ok(if answer.infeasible() { ExitStatus::Infeasible } else { ExitStatus::Success })
}

fn verify(verify_args: VerifyArgs) -> Result<ExitStatus> {
    if let Some(seeds) = verify_args.seeds {
        return seed_sweep(&verify_args, seeds);
    }
    let result = verify_claims(&verify_args);
    // A scenario that cannot run still answers the CI: an errored JUnit testcase and an
    // `::error` line, so the test report is not green while the job fails.
    if let (Err(error), Some(junit)) = (&result, &verify_args.junit) {
        if error.exit_code() == 2 && output_file::check(junit, "--junit", verify_args.run.force).is_ok() {
            use stampede_run::verify::verdicts::{annotation_error, junit_error};
            let name = verify_args.run.scenario.as_deref().unwrap_or("?");
            let message = error.to_string();
            let _ = output_file::write(junit, "--junit", junit_error(name, &message).as_bytes(), verify_args.run.force);
            if std::env::var_os("GITHUB_ACTIONS").is_some_and(|v| v == "true") {
                print!("{}", annotation_error(name, &message));
            }
        }
    }
    result
}

fn verify_claims(verify_args: &VerifyArgs) -> Result<ExitStatus> {
    use stampede_run::verify::verdicts::{write_json, Verdicts};
    let args = &verify_args.run;
    let Some(name) = args.scenario.as_deref() else {
        return Err(Error::bad_input("verify needs a scenario: stampede verify SCENARIO"));
    };
    if args.trace.is_some() {
        return Err(Error::bad_input("--trace belongs to `stampede run`: verify checks claims, it writes no trace"));
    }
    if let Some(shard) = &args.shard {
        return Err(Error::bad_input(format!(
            "--shard {shard} with verify: a claim is about the whole run, which no shard holds; run the shards \
             with `stampede run {name} --shard K/N`, then `stampede merge --verify` checks the claims on the merged run"
        )));
    }
    if let Some(junit) = &verify_args.junit {
        output_file::check(junit, "--junit", args.force)?;
    }
    let scenario = resolve(name, &args.scenario_args)?;
    warn(&scenario);
    check_rank_by(&scenario, args)?;
    // Claims are checked against this run's grid and replicas before anything runs.
    let (_, skipped) = claims_that_apply(&scenario, "")?;
    // The claims go into the folder too (verify.json), before the report that shows them.
    let write = |report: &RunReport, staging: &Path| {
        write_json(staging, &Verdicts::new(report, skipped.clone()).to_json())?;
        write_report(report, staging, args)
    };
    let files = if args.no_report { vec!["verify.json"] } else { vec!["verify.json", "report.html"] };
    let disk_bytes = if args.no_report { 0.0 } else { report_bytes(&scenario) };
    let report = execute_with_progress(&scenario, args, &Documents { files, write: &write, disk_bytes })?;
    if !args.json && !args.quiet {
        println!("{}", summary(&report, args));
    }
    let html = (!args.no_report).then(|| report.output_dir.join("report.html"));
    end_with_verdicts(
        &Verdicts::new(&report, skipped),
        verify_args.junit.as_deref().map(|j| (j, args.force)),
        args.json,
        html,
    )
}

/// Claims hold on at least this share of seeds, or `verify --seeds` exits 1.
const SEED_PASS_RATE: f64 = 0.99;

/// `verify --seeds N`: each claim's pass rate over N consecutive seeds, each a whole run
/// at the scenario's own size (in a temporary folder, removed), so a nightly that
/// rotates its seed knows how often it would go red with no change.
fn seed_sweep(verify_args: &VerifyArgs, seeds: u32) -> Result<ExitStatus> {
    use stampede_run::verify::verdicts::{identity, Verdicts};
    let args = &verify_args.run;
    let Some(name) = args.scenario.as_deref() else {
        return Err(Error::bad_input("verify --seeds needs a scenario: stampede verify SCENARIO --seeds 200"));
    };
    if seeds == 0 {
        return Err(Error::bad_input("--seeds 0: run the claims over at least one seed"));
    }
    if verify_args.junit.is_some() || args.shard.is_some() || args.trace.is_some() {
        return Err(Error::bad_input(
            "--seeds measures pass rates and writes nothing: leave out --junit, --shard, --trace",
        ));
    }
    let scenario = resolve(name, &args.scenario_args)?;
    let (claims, skipped) = claims_that_apply(&scenario, "")?;
    let threads = threads(args.threads)?;
    let base = scenario.run.seed;
    let scratch = std::env::temp_dir().join(format!("stampede-seeds-{}", std::process::id()));
    let mut passed = vec![0u32; scenario.verify.len()];
    let mut failing_seeds: Vec<Vec<u64>> = vec![Vec::new(); scenario.verify.len()];
    for k in 0..u64::from(seeds) {
        let mut seeded = scenario.clone();
        seeded.run.seed = base.wrapping_add(k);
        let writing = Writing { resume: false, force: true, shape: Shape::default() };
        let report = execute_with(&seeded, &scratch, threads, &|| {}, None, writing);
        let _ = std::fs::remove_dir_all(&scratch);
        let report = report?;
        let verdicts = Verdicts::new(&report, skipped.clone());
        for check in &verdicts.checks {
            if check.passed {
                passed[check.claim] += 1;
            } else {
                failing_seeds[check.claim].push(seeded.run.seed);
            }
        }
        if !args.quiet {
            let failed = verdicts.checks.iter().filter(|c| !c.passed).count();
            eprintln!("seed {}: {} passed, {failed} failed", seeded.run.seed, verdicts.checks.len() - failed);
        }
    }
    println!(
        "{}: each claim's pass rate over {seeds} seed(s) {base}..{}, {} replicas a point",
        scenario.name,
        base.wrapping_add(u64::from(seeds) - 1),
        scenario.run.replicas
    );
    let mut short = 0;
    for (index, _) in &claims {
        let rate = f64::from(passed[*index]) / f64::from(seeds);
        let mark = if rate < SEED_PASS_RATE { "SHORT" } else { "ok   " };
        short += usize::from(rate < SEED_PASS_RATE);
        let failing = &failing_seeds[*index];
        let seeds_shown = failing.iter().take(8).map(u64::to_string).collect::<Vec<_>>().join(", ");
        let more = if failing.len() > 8 { format!(" and {} more", failing.len() - 8) } else { String::new() };
        println!(
            "{mark} {:>6.1}%  {}/{seeds}  {}{}",
            100.0 * rate,
            passed[*index],
            identity(*index, &scenario.verify[*index]),
            if failing.is_empty() { String::new() } else { format!("  (fails on seed {seeds_shown}{more})") }
        );
    }
    for s in &skipped {
        println!("skip              {}: {}", identity(s.index, &scenario.verify[s.index]), s.why);
    }
    if short > 0 {
        println!("{short} claim(s) hold on fewer than {:.0}% of seeds", 100.0 * SEED_PASS_RATE);
        Ok(ExitStatus::VerificationFailed)
    } else {
        println!("every claim holds on at least {:.0}% of seeds", 100.0 * SEED_PASS_RATE);
        Ok(ExitStatus::Success)
    }
}

/// The claims of `scenario` that this run can check (numbered) and the ones it skips,
/// refused when it declares none or none applies; `command` prefixes the message.
fn claims_that_apply<'s>(
    scenario: &'s Scenario,
    command: &str,
) -> Result<(Vec<stampede_scenario::resolved::NumberedClaim<'s>>, Vec<Skipped>)> {
    let name = &scenario.name;
    if scenario.verify.is_empty() {
        return Err(Error::bad_input(format!("{command}scenario {name} declares no [[verify]] assertions")));
    }
    let (claims, skipped) = scenario.claims_to_check()?;
    if claims.is_empty() {
        return Err(Error::bad_input(format!(
            "{command}none of the {} [[verify]] claims of {name} applies to this run: {}",
            skipped.len(),
            skipped.iter().map(|s| format!("verify[{}]: {}", s.index, s.why)).collect::<Vec<_>>().join("; ")
        )));
    }
    Ok((claims, skipped))
}

/// How `verify` and `merge --verify` end: the JUnit file if asked, the verdicts (or
/// their JSON document) and the report's path, annotations on GitHub Actions, and exit
/// 1 if a claim failed.
fn end_with_verdicts(
    verdicts: &stampede_run::verify::verdicts::Verdicts,
    junit: Option<(&Path, bool)>,
    json: bool,
    html: Option<PathBuf>,
) -> Result<ExitStatus> {
    if let Some((junit, force)) = junit {
        output_file::write(junit, "--junit", verdicts.to_junit().as_bytes(), force)?;
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&verdicts.to_json()).expect("JSON serialises"));
    } else {
        print!("{}", verdicts.render());
        if let Some(html) = html {
            println!("report: {}", html.display());
        }
    }
    // On GitHub Actions, failed claims also become annotations on the workflow run.
    if std::env::var_os("GITHUB_ACTIONS").is_some_and(|v| v == "true") {
        print!("{}", verdicts.github_annotations());
    }
    Ok(if verdicts.all_passed() { ExitStatus::Success } else { ExitStatus::VerificationFailed })
}

/// `--rank-by` names a metric of the scenario's model.
fn check_rank_by(scenario: &Scenario, args: &RunArgs) -> Result<()> {
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
fn summary(report: &RunReport, args: &RunArgs) -> String {
    let terminal = std::io::stdout().is_terminal();
    let width = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.parse().ok())
        .or_else(|| terminal.then(|| console::Term::stdout().size().1 as usize))
        .unwrap_or(120);
    let colour = terminal && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let options = SummaryOptions { all_metrics: args.all_metrics, rank_by: args.rank_by.clone(), width, colour };
    stampede_run::summary::render(report, &options)
}

fn writing(args: &RunArgs) -> Writing {
    let shape = Shape { replica_rows: args.replica_rows, partition_by_point: args.partition_by.unwrap_or(false) };
    Writing { resume: args.resume, force: args.force, shape }
}

fn parse_replica_rows(text: &str) -> std::result::Result<ReplicaRows, String> {
    ReplicaRows::parse(text).map_err(|e| e.message)
}

fn parse_partition_by(text: &str) -> std::result::Result<bool, String> {
    match text {
        "grid_point" => Ok(true),
        "none" => Ok(false),
        other => Err(format!("{other:?}: the only partition is grid_point (or none)")),
    }
}

fn execute_with_progress(scenario: &Scenario, args: &RunArgs, documents: &Documents) -> Result<RunReport> {
    let threads = threads(args.threads)?;
    let total = scenario.grid_points()?.len() as u64 * scenario.run.replicas as u64;
    let bar = progress_bar(total, args.quiet);
    let report = execute_with(scenario, &args.out, threads, &|| bar.inc(1), Some(documents), writing(args))?;
    bar.finish_and_clear();
    Ok(report)
}

/// `--threads`: at least one; by default every core.
fn threads(requested: Option<usize>) -> Result<usize> {
    Ok(match requested {
        Some(0) => return Err(Error::bad_input("--threads 0: must be at least 1")),
        Some(threads) => threads,
        None => std::thread::available_parallelism().map_or(1, usize::from),
    })
}

/// A progress bar on a terminal, hidden otherwise.
fn progress_bar(total: u64, quiet: bool) -> ProgressBar {
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

fn capacity(args: CapacityArgs) -> Result<()> {
    if !(args.target_turns_rps.is_finite() && args.target_turns_rps > 0.0) {
        return Err(Error::bad_input(format!(
            "--target-turns-rps {}: must be a positive number of turns per second",
            args.target_turns_rps
        )));
    }
    let mut fixture = stampede_scenario::models::gateway::fixture::Fixture::load(args.fixture.as_deref())?;
    fixture.read_inputs()?;
    let report = stampede_scenario::models::gateway::capacity::analyse(&fixture, args.target_turns_rps);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report.to_json()).expect("JSON serialises"));
    } else {
        print!("{}", report.render());
    }
    Ok(())
}

fn list() -> Result<()> {
    let width = BUILTINS.iter().map(|(name, _)| name.len()).max().unwrap_or(0);
    for (name, text) in BUILTINS {
        let table = parse_text(text, name)?;
        let description = table.get("description").and_then(|d| d.as_str()).unwrap_or("");
        println!("{name:<width$}  {description}");
    }
    Ok(())
}

fn show(args: ShowArgs) -> Result<()> {
    let scenario = resolve(&args.scenario, &args.scenario_args)?;
    print!("{}", scenario.to_toml());
    Ok(())
}
