//! The `stampede` command line: the arguments (clap), one module per command, and the
//! exit codes — 0 success, 1 a failed claim, a significant change or no feasible
//! candidate, 2 bad input, 3 I/O or internal error. A command module parses and prints;
//! what can be unit-tested lives in the crates it calls.

mod calibrate;
mod capacity;
mod compare;
mod cost;
pub mod embed;
mod fit;
mod import;
mod map;
mod merge;
mod optimize;
mod output_file;
mod plan;
mod rare;
mod report;
mod ring;
mod run;
mod serve;
mod show;
mod verify;

use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use stampede_scenario::scenario::builtin::{load_scenario_source, scenario_dir};
use stampede_scenario::scenario::overrides::{parse_grid, parse_set};
use stampede_scenario::{Error, Overrides, Result, Scenario};

use calibrate::{calibrate, CalibrateArgs};
use capacity::{capacity, CapacityArgs};
use compare::{compare, CompareArgs};
use fit::{fit, FitArgs};
use import::{import, ImportArgs};
use map::{map_command, MapArgs};
use merge::{merge, MergeArgs};
use optimize::{optimize, OptimizeArgs};
use plan::{plan, PlanArgs};
use rare::{rare, RareArgs};
use report::{report, ReportArgs};
use run::{run, RunArgs};
use serve::{serve, ServeArgs};
use show::{list, show, ShowArgs};
use verify::{verify, VerifyArgs};

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
    /// Is the model right? Fit a scenario's unknowns (--fit) to production's metrics over
    /// time (a CSV or a Prometheus range query), driven by the observed load, and write the
    /// fidelity report: production against the simulated band, MAPE, bias, correlation;
    /// exit 1 when --max-error is exceeded. --check: the report of the scenario as it is.
    Calibrate(CalibrateArgs),
    /// The stability map: over two numeric fields (--x, --y), where a metric crosses a
    /// level (recovered_ratio = 0.5 by default), found by bisection on common random
    /// numbers; the boundary with its band, drawn in map.html and written as map.parquet.
    Map(MapArgs),
    /// The consistent-hashing explorer: a ring in a SQLite file, seven strategies, their comparison.
    Ring(ring::RingArgs),
    /// The local web app on 127.0.0.1: the LLM gateway's Learn and Sandbox pages, the ring
    /// explorer and the results browser.
    Serve(ServeArgs),
    /// Merge shard folders (from `run --shard`) into the folder a single run writes.
    Merge(MergeArgs),
    /// How many replicas a sharded run needs for --precision, estimated from a pilot
    /// run here, with the commands that run the shards and merge them.
    Plan(PlanArgs),
    /// Fit distributions to measured latencies (a CSV or Parquet column, an HdrHistogram,
    /// Prometheus buckets): each family's parameters and Kolmogorov–Smirnov distance,
    /// the TOML value of the best and of the data itself, and a page of the CDFs.
    Fit(FitArgs),
    /// A graph scenario from distributed traces (OTLP JSON, Jaeger, Zipkin, Alibaba's
    /// call graphs): services, call plans, self times, network, entry rates; what traces
    /// cannot tell is marked for you to set.
    Import(ImportArgs),
    /// The LLM gateway's capacity arithmetic (no simulation): limits per meter, the
    /// binding one, the max_tokens in-flight tax, sustainable turns/s and what each lever buys.
    Capacity(CapacityArgs),
    /// How likely is the outage? The probability of a rare event (a queue reaching 200,
    /// 1e-4 … 1e-9) by importance splitting, with its 95% interval and what plain
    /// replicas would have cost for the same precision.
    Rare(RareArgs),
}

#[derive(Args, Clone)]
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

/// How a successful command ends.
enum ExitStatus {
    Success,
    /// Exit 1: a `verify` assertion failed.
    VerificationFailed,
    /// Exit 1: `compare` found a significant change.
    Changed,
    /// Exit 1: `optimize` found no candidate that meets the constraints.
    Infeasible,
    /// Exit 1: a `calibrate` metric is over `--max-error`.
    CalibrationFailed,
}

pub fn main() -> ExitCode {
    // A closed pipe (`stampede list | head -1`) ends the process quietly, as it does
    // for other Unix tools, instead of a panic in println!.
    #[cfg(unix)]
    // SAFETY: restoring the default disposition of SIGPIPE before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = Cli::parse();
    match dispatch(cli.command) {
        Ok(status) => ExitCode::from(status.code()),
        Err(error) => {
            eprintln!("stampede: error: {error}");
            ExitCode::from(error.exit_code() as u8)
        }
    }
}

/// Runs one command to its end.
fn dispatch(command: Command) -> Result<ExitStatus> {
    match command {
        Command::Run(args) => run(args).map(|()| ExitStatus::Success),
        Command::List => list().map(|()| ExitStatus::Success),
        Command::Show(args) => show(args).map(|()| ExitStatus::Success),
        Command::Verify(args) => verify(args),
        Command::Capacity(args) => capacity(args).map(|()| ExitStatus::Success),
        Command::Report(args) => report(args).map(|()| ExitStatus::Success),
        Command::Compare(args) => compare(args),
        Command::Optimize(args) => optimize(args),
        Command::Calibrate(args) => calibrate(args),
        Command::Map(args) => map_command(args).map(|()| ExitStatus::Success),
        Command::Ring(args) => ring::run(args).map(|()| ExitStatus::Success),
        Command::Serve(args) => serve(args).map(|()| ExitStatus::Success),
        Command::Merge(args) => merge(args),
        Command::Plan(args) => plan(args).map(|()| ExitStatus::Success),
        Command::Fit(args) => fit(args).map(|()| ExitStatus::Success),
        Command::Import(args) => import(args),
        Command::Rare(args) => rare(args).map(|()| ExitStatus::Success),
    }
}

impl ExitStatus {
    /// The process's exit code: 0, or 1 for a failed claim, a change, no feasible
    /// candidate or a calibration over its bound.
    fn code(&self) -> u8 {
        match self {
            ExitStatus::Success => 0,
            ExitStatus::VerificationFailed
            | ExitStatus::Changed
            | ExitStatus::Infeasible
            | ExitStatus::CalibrationFailed => 1,
        }
    }
}

/// Prints a command's `--json` document on stdout, or hands it to the caller when the
/// command runs in process ([`embed`]).
fn print_json(document: &serde_json::Value) {
    if !embed::capture_document(document) {
        println!("{}", serde_json::to_string_pretty(document).expect("JSON serialises"));
    }
}

/// Prints a command's text (`show`'s TOML) on stdout as it is, or hands it to the
/// caller as a JSON string ([`embed`]).
fn print_text(text: &str) {
    if !embed::capture_document(&serde_json::Value::String(text.to_string())) {
        print!("{text}");
    }
}

/// Prints a warning (valid input that would likely mislead) on stderr, whatever
/// `--quiet` says — it is not progress — or hands it to the caller ([`embed`]).
fn warning(text: &str) {
    if !embed::capture_warning(text) {
        eprintln!("stampede: warning: {text}");
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
    for text in scenario.warnings() {
        warning(text);
    }
}

/// A scenario as resolved for a command that runs it as written: a warm-up of
/// `"auto"` is chosen only by `run` and `verify`, so it is refused here.
fn resolve(scenario: &str, args: &ScenarioArgs) -> Result<Scenario> {
    let resolved = resolve_any(scenario, args)?;
    if resolved.run.warmup_auto {
        return Err(Error::bad_input(
            "run.warmup_s = \"auto\": only `stampede run` and `stampede verify` choose a warm-up; they print and \
             record the one chosen — give it here in seconds (--set run.warmup_s=S)",
        ));
    }
    Ok(resolved)
}

/// A scenario as resolved, its warm-up possibly still `"auto"`.
fn resolve_any(scenario: &str, args: &ScenarioArgs) -> Result<Scenario> {
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
