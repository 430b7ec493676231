//! `stampede verify`: a run, then its `[[verify]]` claims' verdicts (terminal,
//! verify.json, JUnit); `--seeds N` sweeps seeds to measure each claim's pass rate.

use std::path::{Path, PathBuf};

use clap::Args;
use stampede_run::pipeline::{execute_with, Documents, Shape, Writing};
use stampede_run::report::RunReport;
use stampede_scenario::{Error, Result};

use super::output_file;
use super::run::{check_rank_by, execute_with_progress, resolve_for_run, summary, threads, write_report, RunArgs};
use super::{resolve, warn, ExitStatus};

#[derive(Args)]
pub(super) struct VerifyArgs {
    #[command(flatten)]
    pub(super) run: RunArgs,
    /// Also write the verdicts as JUnit XML to FILE (one test case per claim), for CI
    /// dashboards; written whether the claims pass or fail.
    #[arg(long, value_name = "FILE")]
    pub(super) junit: Option<PathBuf>,
    /// Measure the claims instead of judging one run: run them over N consecutive seeds
    /// from --seed (else run.seed) and print each claim's pass rate; exit 1 when a claim
    /// holds on fewer than 99% of them. Nothing is written.
    #[arg(long, value_name = "N")]
    pub(super) seeds: Option<u32>,
}

pub(super) fn verify(verify_args: VerifyArgs) -> Result<ExitStatus> {
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

pub(super) fn verify_claims(verify_args: &VerifyArgs) -> Result<ExitStatus> {
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
    let (scenario, mut chosen) = resolve_for_run(name, args)?;
    warn(&scenario);
    check_rank_by(&scenario, args)?;
    // Claims are checked against this run's grid and replicas before anything runs.
    let (_, skipped) = scenario.claims_that_apply("")?;
    // The claims go into the folder too (verify.json), before the report that shows them.
    let write = |report: &RunReport, staging: &Path| {
        write_json(staging, &Verdicts::new(report, skipped.clone()).to_json())?;
        write_report(report, staging, args)
    };
    let files = if args.no_report { vec!["verify.json"] } else { vec!["verify.json", "report.html"] };
    let disk_bytes = if args.no_report { 0.0 } else { stampede_run::budget::report_bytes(&scenario) };
    let documents = Documents { files, write: &write, disk_bytes, manifest_fields: None };
    let report = execute_with_progress(&scenario, args, &documents, &mut chosen)?;
    if !args.json && !args.quiet {
        println!("{}", summary(&report, args));
        for line in chosen.lines(&report) {
            println!("{line}");
        }
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
pub(super) const SEED_PASS_RATE: f64 = 0.99;

/// `verify --seeds N`: each claim's pass rate over N consecutive seeds, each a whole run
/// at the scenario's own size (in a temporary folder, removed), so a nightly that
/// rotates its seed knows how often it would go red with no change.
pub(super) fn seed_sweep(verify_args: &VerifyArgs, seeds: u32) -> Result<ExitStatus> {
    use stampede_run::verify::verdicts::{identity, Verdicts};
    let args = &verify_args.run;
    let Some(name) = args.scenario.as_deref() else {
        return Err(Error::bad_input("verify --seeds needs a scenario: stampede verify SCENARIO --seeds 200"));
    };
    check_seed_sweep(verify_args, seeds)?;
    let scenario = resolve(name, &args.scenario_args)?;
    let (claims, skipped) = scenario.claims_that_apply("")?;
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
        let claim = identity(*index, &scenario.verify[*index]);
        let (line, below) = pass_rate_line(&claim, (passed[*index], seeds), &failing_seeds[*index]);
        short += usize::from(below);
        println!("{line}");
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

/// What `verify --seeds` refuses: no seed, and what it would not write or measure.
fn check_seed_sweep(verify_args: &VerifyArgs, seeds: u32) -> Result<()> {
    let args = &verify_args.run;
    if seeds == 0 {
        return Err(Error::bad_input("--seeds 0: run the claims over at least one seed"));
    }
    if verify_args.junit.is_some() || args.shard.is_some() || args.trace.is_some() {
        return Err(Error::bad_input(
            "--seeds measures pass rates and writes nothing: leave out --junit, --shard, --trace",
        ));
    }
    if !args.precision.is_empty() {
        return Err(Error::bad_input(
            "--precision with --seeds: measure the pass rates at a fixed size (--replicas N); \
             `stampede verify SCENARIO --precision REL` says which N",
        ));
    }
    Ok(())
}

/// A claim's line of the seed sweep: SHORT below [`SEED_PASS_RATE`], its pass rate
/// (`passed` of `seeds`) and the first seeds it fails on; and whether it fell short.
fn pass_rate_line(claim: &str, (passed, seeds): (u32, u32), failing: &[u64]) -> (String, bool) {
    let rate = f64::from(passed) / f64::from(seeds);
    let below = rate < SEED_PASS_RATE;
    let mark = if below { "SHORT" } else { "ok   " };
    let seeds_shown = failing.iter().take(8).map(u64::to_string).collect::<Vec<_>>().join(", ");
    let more = if failing.len() > 8 { format!(" and {} more", failing.len() - 8) } else { String::new() };
    let line = format!(
        "{mark} {:>6.1}%  {passed}/{seeds}  {claim}{}",
        100.0 * rate,
        if failing.is_empty() { String::new() } else { format!("  (fails on seed {seeds_shown}{more})") }
    );
    (line, below)
}

/// How `verify` and `merge --verify` end: the JUnit file if asked, the verdicts (or
/// their JSON document) and the report's path, annotations on GitHub Actions, and exit
/// 1 if a claim failed.
pub(super) fn end_with_verdicts(
    verdicts: &stampede_run::verify::verdicts::Verdicts,
    junit: Option<(&Path, bool)>,
    json: bool,
    html: Option<PathBuf>,
) -> Result<ExitStatus> {
    if let Some((junit, force)) = junit {
        output_file::write(junit, "--junit", verdicts.to_junit().as_bytes(), force)?;
    }
    if json {
        super::print_json(&verdicts.to_json());
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
