//! `stampede capacity`: the LLM gateway's arithmetic, no simulation.

use clap::Args;
use stampede_scenario::{Error, Result};

#[derive(Args)]
pub(super) struct CapacityArgs {
    /// A fixture TOML file (default: the shipped LLM-gateway fixture).
    #[arg(long, value_name = "FILE")]
    pub(super) fixture: Option<String>,
    /// The turns per second the product must serve.
    #[arg(long, value_name = "R", default_value_t = 1000.0)]
    pub(super) target_turns_rps: f64,
    /// Print the result as one JSON document.
    #[arg(long)]
    pub(super) json: bool,
}

pub(super) fn capacity(args: CapacityArgs) -> Result<()> {
    if !(args.target_turns_rps.is_finite() && args.target_turns_rps > 0.0) {
        return Err(Error::bad_input(format!(
            "--target-turns-rps {}: must be a positive number of turns per second",
            args.target_turns_rps
        )));
    }
    let mut fixture = stampede_scenario::models::gateway::fixture::Fixture::load(args.fixture.as_deref())?;
    fixture.read_inputs()?;
    for warning in stampede_scenario::models::gateway::capacity::warnings(&fixture) {
        super::warning(&warning);
    }
    let report = stampede_scenario::models::gateway::capacity::analyse(&fixture, args.target_turns_rps);
    if args.json {
        super::print_json(&report.to_json());
    } else {
        print!("{}", report.render());
    }
    Ok(())
}
