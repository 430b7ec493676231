//! `stampede merge`: shard folders into the folder one run writes; `--verify` checks
//! the claims a merge can check. `rare` shards go to `rare::merge`.

use std::path::{Path, PathBuf};

use clap::Args;
use stampede_run::pipeline::{Documents, ReplicaRows, Shape, Writing};
use stampede_run::precision::{self, Goal, Target};
use stampede_run::report::RunReport;
use stampede_run::shards::{execute_merge, shard_folders, Shards};
use stampede_scenario::scenario::claims::Skipped;
use stampede_scenario::Result;

use super::output_file;
use super::run::{parse_partition_by, parse_replica_rows};
use super::verify::end_with_verdicts;
use super::ExitStatus;

#[derive(Args)]
pub(super) struct MergeArgs {
    /// Shard folders (out/NAME/shards/shard=K), or the folder holding them (out/NAME/shards).
    #[arg(required = true)]
    pub(super) shards: Vec<PathBuf>,
    /// Output root; the merged run goes to OUT/<scenario name>/.
    #[arg(long, value_name = "DIR")]
    pub(super) out: PathBuf,
    /// Do not write report.html.
    #[arg(long)]
    pub(super) no_report: bool,
    /// Print nothing but errors.
    #[arg(long)]
    pub(super) quiet: bool,
    /// Replace OUT/<scenario name>/ (and --junit's FILE) even if it holds files
    /// stampede did not write.
    #[arg(long)]
    pub(super) force: bool,
    /// Merge a shard whose manifest lost its file checksums (its tables then go
    /// unchecked; a damaged byte would change the results silently).
    #[arg(long)]
    pub(super) allow_unchecked: bool,
    /// Which per-replica rows to write: all, none, or sample:N (replicas 0..N of each
    /// grid point); by default the rows the shards kept. The summary, histograms and
    /// series are exact either way.
    #[arg(long, value_name = "all|none|sample:N", value_parser = parse_replica_rows)]
    pub(super) replica_rows: Option<ReplicaRows>,
    /// `grid_point`: write replica rows and series as hive-partitioned files,
    /// replicas/grid_point=K/part-0.parquet and timeseries/grid_point=K/part-0.parquet.
    #[arg(long, value_name = "grid_point", value_parser = parse_partition_by)]
    pub(super) partition_by: Option<bool>,
    /// Check the scenario's [[verify]] claims on the merged run, as `stampede verify`
    /// does on one machine: verify.json in the folder, the verdicts printed, exit 1 if
    /// one fails. Claims over replicas (quantiles, fractions) need the shards' rows
    /// (`run --shard … --replica-rows all`).
    #[arg(long)]
    pub(super) verify: bool,
    /// With --verify: also write the verdicts as JUnit XML to FILE.
    #[arg(long, value_name = "FILE", requires = "verify")]
    pub(super) junit: Option<PathBuf>,
    /// Print the merged run's summary as one JSON document on stdout, as `run --json`
    /// does (with --verify: the claims with their verdicts, as `verify --json`).
    #[arg(long)]
    pub(super) json: bool,
    /// Say whether the merged run reached this precision (as `run --precision` asks it:
    /// REL or METRIC=REL, repeatable; what `stampede plan` planned for); recorded in the
    /// manifest and the report. A merge that falls short says so and still succeeds.
    #[arg(long, value_name = "REL|METRIC=REL", allow_hyphen_values = true)]
    pub(super) precision: Vec<String>,
}

pub(super) fn merge(args: MergeArgs) -> Result<ExitStatus> {
    use stampede_run::verify::verdicts::{write_json, Verdicts};
    let dirs = shard_folders(&args.shards)?;
    if dirs.iter().any(|dir| super::rare::is_rare_shard(dir)) {
        // `rare` shards: estimates to combine, not replicas.
        if args.verify || !args.precision.is_empty() || args.partition_by.is_some() || args.replica_rows.is_some() {
            return Err(stampede_scenario::Error::bad_input(
                "merge: --verify, --precision, --partition-by and --replica-rows are for `run` shards; these are \
                 `rare` shards",
            ));
        }
        super::rare::merge(&dirs, &args.out, args.force, args.json, args.quiet)?;
        return Ok(ExitStatus::Success);
    }
    let started = std::time::Instant::now();
    let shards = Shards::read(&dirs, args.allow_unchecked)?;
    let goal = if args.precision.is_empty() {
        None
    } else {
        let targets = args.precision.iter().map(|t| Target::parse(t)).collect::<Result<Vec<_>>>()?;
        Some(Goal::new(&shards.scenario, &targets, shards.scenario.run.replicas.max(2))?)
    };
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
    let disk_bytes = if no_report { 0.0 } else { stampede_run::budget::report_bytes(&shards.scenario) };
    let fields = |report: &RunReport| match &goal {
        Some(goal) => {
            let reached = precision::reached_in(goal, report);
            vec![("precision", precision::to_json(goal, &reached, report.scenario.run.replicas, None))]
        }
        None => Vec::new(),
    };
    let documents = Documents { files, write: &write, disk_bytes, manifest_fields: Some(&fields) };
    let shape = Shape {
        replica_rows: args.replica_rows.unwrap_or(shards.kept),
        partition_by_point: args.partition_by.unwrap_or(false),
    };
    let report =
        execute_merge(&shards, &args.out, Some(&documents), Writing { resume: false, force: args.force, shape })?;
    if !args.quiet && !args.json {
        say_merged(&report, dirs.len(), started, goal.as_ref(), !no_report && skipped.is_none());
    }
    let Some(skipped) = skipped else {
        if args.json {
            super::print_json(&report.to_json());
        }
        return Ok(ExitStatus::Success);
    };
    let html = (!no_report).then(|| report.output_dir.join("report.html"));
    end_with_verdicts(&Verdicts::new(&report, skipped), args.junit.as_deref().map(|j| (j, args.force)), args.json, html)
}

/// What the merge did and cost ("Sizing a big sweep" in the README reads these), the
/// precision reached when one was asked, and where the report is (`report`: say it).
fn say_merged(report: &RunReport, shards: usize, started: std::time::Instant, goal: Option<&Goal>, report_line: bool) {
    println!("merged {shards} shards into {}", report.output_dir.display());
    let seconds = started.elapsed().as_secs_f64();
    let peak = stampede_run::budget::peak_rss_bytes()
        .map_or(String::new(), |bytes| format!(", peak memory {:.1} MiB", bytes as f64 / (1024.0 * 1024.0)));
    println!("merge took {seconds:.2} s ({:.1} ms per shard){peak}", seconds * 1e3 / shards as f64);
    if let Some(goal) = goal {
        let reached = precision::reached_in(goal, report);
        println!("{}", precision::sentence(goal, &reached, report.scenario.run.replicas));
        for line in precision::lines(&reached) {
            println!("  {line}");
        }
    }
    if report_line {
        println!("report: {}", report.output_dir.join("report.html").display());
    }
}

/// `merge --verify`: the claims the merged run can check (see
/// [`Shards::claims_a_merge_can_check`]), after checking that `--junit` may be written.
fn claims_a_merge_can_check(shards: &Shards, junit: Option<&Path>, force: bool) -> Result<Vec<Skipped>> {
    if let Some(junit) = junit {
        output_file::check(junit, "--junit", force)?;
    }
    shards.claims_a_merge_can_check()
}
