//! What a search command (`map`, `calibrate`) will cost, checked before its first
//! replica: the replicas it plans against the resource guard's
//! [`MAX_COMMAND_REPLICAS`], the memory of one round against what is free (the same
//! estimate `run` refuses by), and, unless quiet, the expected time at the pace of one
//! replica measured now — as `optimize` prints it.

use std::path::Path;

use stampede_scenario::base::limits::MAX_COMMAND_REPLICAS;
use stampede_scenario::{Error, Result, Scenario};

/// Refuses `planned` replicas of `scenario` above the guard or beyond memory, naming
/// `drivers` (the flags that set the count); prints the estimate unless `quiet`.
pub(super) fn check(
    command: &str,
    scenario: &Scenario,
    planned: u64,
    drivers: &str,
    threads: usize,
    out_root: &Path,
    quiet: bool,
) -> Result<()> {
    if planned > MAX_COMMAND_REPLICAS {
        return Err(Error::bad_input(format!(
            "{command}: would run up to {planned} replicas ({drivers}); at most {MAX_COMMAND_REPLICAS} are allowed; \
             nothing was run"
        ))
        .with_hint(format!("lower {drivers}")));
    }
    // One round holds about as much as a run of the base scenario: memory, not disk,
    // is what a search can run out of (it writes one small folder at the end).
    let mut estimate = stampede_run::budget::estimate(scenario, threads);
    estimate.disk_bytes = 0.0;
    stampede_run::budget::check(estimate, out_root)?;
    if !quiet {
        let per_replica = stampede_run::budget::seconds_per_replica(scenario)?;
        let seconds = planned as f64 * per_replica / threads as f64;
        eprintln!(
            "stampede {command}: at most {planned} replicas; one replica took {:.1} ms, so at most about {} on \
             {threads} thread{}",
            per_replica * 1e3,
            super::optimize::duration_words(seconds),
            if threads == 1 { "" } else { "s" },
        );
    }
    Ok(())
}
