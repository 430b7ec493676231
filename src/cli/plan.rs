//! `stampede plan`: how many replicas a sharded run needs for `--precision`, estimated
//! from a pilot on this machine, and the commands that run and merge it.

use clap::Args;
use serde_json::json;
use stampede_report::page::shell_word;
use stampede_run::precision::{self, Goal, Target};
use stampede_scenario::{Error, Result};

use super::run::threads;
use super::{resolve, warn, ScenarioArgs};

#[derive(Args)]
pub(super) struct PlanArgs {
    /// A built-in scenario name or a path to a .toml file.
    pub(super) scenario: String,
    #[command(flatten)]
    pub(super) scenario_args: ScenarioArgs,
    /// The precision the merged run must reach: REL for every headline metric (`1%`), or
    /// METRIC=REL for one (repeatable), as `run --precision`.
    #[arg(long, value_name = "REL|METRIC=REL", required = true, allow_hyphen_values = true)]
    pub(super) precision: Vec<String>,
    /// Shards the run is split into (the printed commands run shard K of N).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub(super) shards: u32,
    /// Replicas a point the pilot runs (at least 2; 20 by default).
    #[arg(long, value_name = "N", default_value_t = precision::FIRST_STAGE)]
    pub(super) pilot: u32,
    /// The most replicas a point may get (default 100000).
    #[arg(long, value_name = "N")]
    pub(super) max_replicas: Option<u32>,
    /// Output root the printed commands write to.
    #[arg(long, value_name = "DIR", default_value = "out")]
    pub(super) out: std::path::PathBuf,
    /// Worker threads for the pilot.
    #[arg(long, value_name = "T")]
    pub(super) threads: Option<usize>,
    /// Print the plan as one JSON document on stdout.
    #[arg(long)]
    pub(super) json: bool,
}

pub(super) fn plan(args: PlanArgs) -> Result<()> {
    check_sizes(&args)?;
    let targets = args.precision.iter().map(|t| Target::parse(t)).collect::<Result<Vec<_>>>()?;
    let scenario = precision::with_target_metrics(resolve(&args.scenario, &args.scenario_args)?, &targets)?;
    warn(&scenario);
    let max = args.max_replicas.unwrap_or(precision::DEFAULT_MAX_REPLICAS);
    let goal = Goal::new(&scenario, &targets, max)?;
    if args.pilot > max {
        return Err(Error::bad_input(format!("--pilot {}: above --max-replicas {max}", args.pilot)));
    }
    let threads = threads(args.threads)?;
    let points = scenario.point_count();
    let (replicas, reached, pilot_s) = precision::estimate(&scenario, &goal, args.pilot, threads, &|| {})?;
    let per_replica_s = pilot_s / f64::from(args.pilot * points);
    let total_s = per_replica_s * f64::from(replicas) * f64::from(points);
    let shard_s = total_s / f64::from(args.shards);
    let words = scenario_words(&args);
    let out = shell_word(&args.out.display().to_string());
    let run = format!("stampede run {} --replicas {replicas} --shard K/{} --out {out}", words.join(" "), args.shards);
    let asked: Vec<String> = targets.iter().map(|t| format!("--precision {}", shell_word(&t.text()))).collect();
    let merge = format!("stampede merge {out}/{}/shards --out merged {}", shell_word(&scenario.name), asked.join(" "));
    let capped = replicas >= max && reached.iter().any(|r| !r.met());
    if args.json {
        let document = json!({
            "scenario": scenario.name,
            "asked": goal.asked(),
            "pilot": args.pilot,
            "replicas": replicas,
            "capped_at_max_replicas": capped,
            "grid_points": points,
            "shards": args.shards,
            "compute_s": total_s,
            "compute_s_per_shard": shard_s,
            "run": run,
            "merge": merge,
            "pilot_reached": precision::to_json(&goal, &reached, args.pilot, None),
        });
        super::print_json(&document);
        return Ok(());
    }
    println!(
        "pilot: {} replicas a point × {points} grid point(s), {:.1} s of one core; at the pilot:",
        args.pilot, pilot_s
    );
    for line in precision::lines(&reached) {
        println!("  {line}");
    }
    println!(
        "estimate: {replicas} replicas a point for precision {} (enough if the spread is at the pilot's 90% upper bound){}",
        goal.asked(),
        if capped { format!("; capped at --max-replicas {max}, so it will fall short") } else { String::new() }
    );
    println!(
        "cost: about {} of one core in all, {} a shard with {} shard(s)",
        duration(total_s),
        duration(shard_s),
        args.shards
    );
    println!("run each shard (K = 0..{}; in a job array, --shard auto):", args.shards - 1);
    println!("  {run}");
    println!("then merge, which says whether the precision was met:");
    println!("  {merge}");
    Ok(())
}

/// The sizes a plan takes: 1 to 100,000 shards, a pilot of at least 2 replicas a
/// point, and no `--replicas` (the plan chooses them).
fn check_sizes(args: &PlanArgs) -> Result<()> {
    if args.shards == 0 || args.shards > 100_000 {
        return Err(Error::bad_input(format!("--shards {}: from 1 to 100000", args.shards)));
    }
    if args.pilot < 2 {
        return Err(Error::bad_input(format!("--pilot {}: an interval needs at least 2 replicas a point", args.pilot)));
    }
    if let Some(replicas) = args.scenario_args.replicas {
        return Err(Error::bad_input(format!(
            "--replicas {replicas} with plan: the plan chooses the replicas; the pilot's size is --pilot"
        )));
    }
    Ok(())
}

/// The scenario as this plan read it, in shell words: its file or name, then each
/// `--set`, `--grid`, `--case` and `--seed` given.
fn scenario_words(args: &PlanArgs) -> Vec<String> {
    let given = &args.scenario_args;
    let mut words = vec![shell_word(&args.scenario)];
    for (flag, values) in [("--set", &given.sets), ("--grid", &given.grids), ("--case", &given.cases)] {
        for value in values {
            words.extend([flag.to_string(), shell_word(value)]);
        }
    }
    if let Some(seed) = given.seed {
        words.extend(["--seed".to_string(), seed.to_string()]);
    }
    words
}

/// `42 s`, `3.5 min`, `2.1 h`.
fn duration(seconds: f64) -> String {
    if seconds < 120.0 {
        format!("{seconds:.0} s")
    } else if seconds < 7200.0 {
        format!("{:.1} min", seconds / 60.0)
    } else {
        format!("{:.1} h", seconds / 3600.0)
    }
}
