//! What a search command (`map`, `calibrate`) will cost, checked before its first
//! replica: the replicas it plans against the resource guard's
//! [`MAX_COMMAND_REPLICAS`], the memory of one round against what is free (the same
//! estimate `run` refuses by), and, unless quiet, the expected time at the pace of one
//! replica measured now — as `optimize` prints it.

use std::path::Path;

use stampede_scenario::base::limits::MAX_COMMAND_REPLICAS;
use stampede_scenario::{Error, Result, Scenario};

/// The replicas a search plans: a bound it keeps (`map`'s rounds are fixed by its
/// tolerance), or what it is expected to run (`calibrate`'s search stops when it stops
/// gaining, and its profiles walk as far as the discrepancy says).
#[derive(Clone, Copy, Debug)]
pub(super) enum Planned {
    AtMost(u64),
    About(u64),
}

/// Refuses `planned` replicas of `scenario` above the guard or beyond memory, naming
/// `drivers` (the flags that set the count); prints the estimate unless `quiet`.
pub(super) fn check(
    command: &str,
    scenario: &Scenario,
    planned: Planned,
    drivers: &str,
    threads: usize,
    out_root: &Path,
    quiet: bool,
) -> Result<()> {
    let (count, words) = match planned {
        Planned::AtMost(count) => (count, "at most"),
        Planned::About(count) => (count, "about"),
    };
    if count > MAX_COMMAND_REPLICAS {
        return Err(Error::bad_input(format!(
            "{command}: would run {words} {count} replicas ({drivers}); at most {MAX_COMMAND_REPLICAS} are allowed; \
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
        let seconds = count as f64 * per_replica / threads as f64;
        let more = match planned {
            Planned::AtMost(_) => "",
            Planned::About(_) => " (more if the search keeps gaining or a profile walks far)",
        };
        eprintln!(
            "stampede {command}: {words} {count} replicas{more}; one replica took {:.1} ms, so about {} on \
             {threads} thread{}",
            per_replica * 1e3,
            super::optimize::duration_words(seconds),
            if threads == 1 { "" } else { "s" },
        );
    }
    Ok(())
}
