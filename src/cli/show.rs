//! `stampede list` and `stampede show`: the built-ins, and a scenario resolved as TOML.

use clap::Args;
use stampede_scenario::base::typing::parse_text;
use stampede_scenario::scenario::builtin::BUILTINS;
use stampede_scenario::Result;

use super::{resolve_any, ScenarioArgs};

#[derive(Args)]
pub(super) struct ShowArgs {
    /// A built-in scenario name or a path to a .toml file.
    pub(super) scenario: String,
    #[command(flatten)]
    pub(super) scenario_args: ScenarioArgs,
}

pub(super) fn list() -> Result<()> {
    let builtins = builtins()?;
    let width = builtins.iter().map(|(name, _)| name.len()).max().unwrap_or(0);
    for (name, description) in builtins {
        println!("{name:<width$}  {description}");
    }
    Ok(())
}

/// The built-in scenarios, in `stampede list` order: (name, description).
pub fn builtins() -> Result<Vec<(String, String)>> {
    BUILTINS
        .iter()
        .map(|(name, text)| {
            let table = parse_text(text, name)?;
            let description = table.get("description").and_then(|d| d.as_str()).unwrap_or("");
            Ok((name.to_string(), description.to_string()))
        })
        .collect()
}

pub(super) fn show(args: ShowArgs) -> Result<()> {
    // Shown as written: an automatic warm-up stays "auto".
    let scenario = resolve_any(&args.scenario, &args.scenario_args)?;
    super::print_text(&scenario.to_toml());
    Ok(())
}
