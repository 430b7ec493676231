//! `stampede compare`: two output folders of one scenario, metric by metric.

use std::path::PathBuf;

use clap::Args;
use stampede_scenario::Result;

use super::output_file;
use super::ExitStatus;

#[derive(Args)]
pub(super) struct CompareArgs {
    /// The baseline output folder (e.g. last night's out/mmc).
    pub(super) a: PathBuf,
    /// The output folder to compare with it.
    pub(super) b: PathBuf,
    /// The chance of any false alarm over all the tests together (Holm's correction).
    #[arg(long, default_value_t = 0.05)]
    pub(super) alpha: f64,
    /// A change must also move the mean by more than this share of A's (0.02: 2%).
    #[arg(long, value_name = "SHARE")]
    pub(super) tolerance: Option<f64>,
    /// List every metric, not only those that changed.
    #[arg(long)]
    pub(super) all: bool,
    /// Also compare latency over time: each latency window starting in [FROM, TO)
    /// seconds, every request's p50 and p99 per window (from timeseries.parquet).
    #[arg(long, value_name = "FROM,TO", value_parser = window_arg)]
    pub(super) window: Option<(f64, f64)>,
    /// Print the answer as one JSON document.
    #[arg(long)]
    pub(super) json: bool,
    /// Also write a self-contained HTML page of the differences to FILE.
    #[arg(long, value_name = "FILE")]
    pub(super) html: Option<PathBuf>,
    /// Also write JUnit XML to FILE: a testcase per (grid point, metric) tested, a
    /// failure per change.
    #[arg(long, value_name = "FILE")]
    pub(super) junit: Option<PathBuf>,
    /// Also compare an expression of metrics, computed per replica on each side
    /// (repeatable): 'useful_usd + wasted_usd', 'turns_degraded / turns_answered'
    /// (spaces around each operator).
    #[arg(long = "metric", value_name = "EXPRESSION")]
    pub(super) metrics: Vec<String>,
    /// Replace --html's or --junit's FILE even if it is not one stampede wrote.
    #[arg(long)]
    pub(super) force: bool,
}

pub(super) fn compare(args: CompareArgs) -> Result<ExitStatus> {
    if let Some(path) = &args.html {
        output_file::check(path, "--html", args.force)?;
    }
    if let Some(path) = &args.junit {
        output_file::check(path, "--junit", args.force)?;
    }
    let comparison = stampede_report::compare::compare_with(
        &args.a,
        &args.b,
        args.alpha,
        args.tolerance,
        args.window,
        &args.metrics,
    )?;
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
        super::print_json(&comparison.to_json());
    } else {
        print!("{}", comparison.render(args.all));
        if let Some(path) = &args.html {
            println!("page: {}", path.display());
        }
    }
    Ok(if comparison.changed() { ExitStatus::Changed } else { ExitStatus::Success })
}

/// `--window FROM,TO`: two numbers of seconds.
pub(super) fn window_arg(text: &str) -> std::result::Result<(f64, f64), String> {
    let parse = |part: &str| part.trim().parse::<f64>().ok();
    match text.split_once(',').map(|(from, to)| (parse(from), parse(to))) {
        Some((Some(from), Some(to))) => Ok((from, to)),
        _ => Err(format!("{text:?}: two numbers of seconds, FROM,TO (e.g. 10,55)")),
    }
}
