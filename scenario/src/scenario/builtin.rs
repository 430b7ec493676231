//! The built-in scenarios, shipped inside the binary. Each is an ordinary scenario
//! file under `scenario/scenarios/`; `stampede show NAME` prints it resolved.

use crate::base::error::{Error, Result};
use crate::base::typing::parse_text;

/// (name, TOML text) of every built-in scenario, in `stampede list` order.
pub const BUILTINS: &[(&str, &str)] = &[
    ("baltor", include_str!("../../scenarios/baltor.toml")),
    ("retry-storm", include_str!("../../scenarios/retry-storm.toml")),
    ("bounded-load", include_str!("../../scenarios/bounded-load.toml")),
    ("policy-grid", include_str!("../../scenarios/policy-grid.toml")),
    ("dependency-slowdown", include_str!("../../scenarios/dependency-slowdown.toml")),
    ("graph-three-tier", include_str!("../../scenarios/graph-three-tier.toml")),
    ("graph-hedging", include_str!("../../scenarios/graph-hedging.toml")),
    ("graph-fanout", include_str!("../../scenarios/graph-fanout.toml")),
    ("graph-dependency", include_str!("../../scenarios/graph-dependency.toml")),
    ("graph-ejection", include_str!("../../scenarios/graph-ejection.toml")),
    ("graph-cache-flush", include_str!("../../scenarios/graph-cache-flush.toml")),
    ("graph-autoscale", include_str!("../../scenarios/graph-autoscale.toml")),
    ("graph-pool", include_str!("../../scenarios/graph-pool.toml")),
    ("graph-storm-odds", include_str!("../../scenarios/graph-storm-odds.toml")),
    ("mmc", include_str!("../../scenarios/mmc.toml")),
    ("mmc-load", include_str!("../../scenarios/mmc-load.toml")),
    ("mmck", include_str!("../../scenarios/mmck.toml")),
    ("mg1", include_str!("../../scenarios/mg1.toml")),
    ("llm-naive", include_str!("../../scenarios/llm-naive.toml")),
    ("llm-stack", include_str!("../../scenarios/llm-stack.toml")),
    ("llm-breaker", include_str!("../../scenarios/llm-breaker.toml")),
    ("llm-retries", include_str!("../../scenarios/llm-retries.toml")),
    ("llm-adaptive", include_str!("../../scenarios/llm-adaptive.toml")),
    ("llm-ladder", include_str!("../../scenarios/llm-ladder.toml")),
    ("llm-meters", include_str!("../../scenarios/llm-meters.toml")),
];

/// What `stampede run` runs without a scenario argument.
pub const DEFAULT_SCENARIO: &str = "baltor";

/// The TOML text of built-in `name`.
pub fn builtin_text(name: &str) -> Option<&'static str> {
    BUILTINS.iter().find(|(builtin, _)| *builtin == name).map(|(_, text)| *text)
}

/// Whether a scenario argument is the scenario's TOML text itself (several lines, not
/// a file's name): what the Python package passes for a string or dict of TOML.
pub(crate) fn is_scenario_text(argument: &str) -> bool {
    argument.contains('\n') && !std::path::Path::new(argument).exists()
}

/// The folder a scenario argument's relative paths are read from: the scenario
/// file's folder, the working folder for TOML text, or `None` for a built-in.
pub fn scenario_dir(argument: &str) -> Option<std::path::PathBuf> {
    if builtin_text(argument).is_some() {
        return None;
    }
    if is_scenario_text(argument) {
        return Some(std::path::PathBuf::from("."));
    }
    let parent = std::path::Path::new(argument).parent()?;
    Some(if parent.as_os_str().is_empty() { std::path::PathBuf::from(".") } else { parent.to_path_buf() })
}

/// Loads a scenario argument: a built-in name, a path to a `.toml` file, or the TOML
/// text itself ([`is_scenario_text`]).
pub fn load_scenario_source(argument: &str) -> Result<toml::Table> {
    if let Some(text) = builtin_text(argument) {
        return parse_text(text, &format!("built-in scenario {argument}"));
    }
    let path = std::path::Path::new(argument);
    if path.exists() {
        let text = std::fs::read_to_string(path)
            .map_err(|error| Error::unreadable(format!("cannot read scenario file {argument}: {error}")))?;
        return parse_text(&text, &format!("scenario file {argument}"));
    }
    if is_scenario_text(argument) {
        return parse_text(argument, "the scenario's TOML text");
    }
    let names: Vec<&str> = BUILTINS.iter().map(|(name, _)| *name).collect();
    let message =
        format!("unknown scenario {argument:?}: it is neither a built-in ({}) nor an existing file", names.join(", "));
    // A path (`my.toml`, `configs/api`) is a missing file; a bare word, a misspelt name.
    let path_like = argument.ends_with(".toml") || argument.contains(['/', '\\']);
    let error = if path_like { Error::unreadable(message) } else { Error::bad_input(message) };
    Err(error.with_hint("`stampede list` shows the built-in scenarios"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scenario_argument_may_be_its_toml_text() {
        let text = builtin_text("mmc").expect("mmc");
        assert!(is_scenario_text(text) && !is_scenario_text("mmc") && !is_scenario_text("dir/file.toml"));
        assert_eq!(load_scenario_source(text).unwrap(), load_scenario_source("mmc").unwrap());
        assert_eq!(scenario_dir(text), Some(std::path::PathBuf::from(".")));
        let error = load_scenario_source("name = \"x\"\nmodel = [").unwrap_err();
        assert!(error.message.starts_with("the scenario's TOML text is not valid TOML"), "{}", error.message);
    }
}
