//! Command-line changes to a scenario: `--set PATH=VALUE` (later wins) and
//! `--grid PATH=V1,V2,…` (replaces the file's axis of that path, or adds one), and
//! setting or merging a value at a dotted path inside a table.

use crate::base::error::{Error, Result};
use crate::base::typing::describe;

/// One axis of a policy grid: a dotted field path and the values it takes.
#[derive(Clone, Debug, PartialEq)]
pub struct GridAxis {
    pub path: String,
    pub values: Vec<toml::Value>,
}

/// Command-line changes to a scenario.
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    /// `--set PATH=VALUE`, in order (later wins).
    pub sets: Vec<(String, toml::Value)>,
    /// `--grid PATH=V1,V2,…`: replaces the file's axis of the same path, or adds one.
    pub grids: Vec<GridAxis>,
}

/// Checks a dotted path: non-empty parts of letters, digits, `_` and `-`.
pub(crate) fn check_path(path: &str, flag: &str) -> Result<()> {
    let valid = !path.is_empty()
        && path
            .split('.')
            .all(|part| !part.is_empty() && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'));
    if valid {
        Ok(())
    } else {
        Err(Error::bad_input(format!("{flag} path {path:?}: expected a dotted field path such as queue.servers")))
    }
}

/// Parses a command-line value as TOML (`3`, `1.5`, `true`, `"x"`, `[1, 2]`); a bare
/// word that is not TOML is taken as a string (`fifo`).
pub fn parse_cli_value(text: &str) -> toml::Value {
    let text = text.trim();
    match format!("v = {text}").parse::<toml::Table>() {
        Ok(mut table) => table.remove("v").expect("parsed key"),
        Err(_) => toml::Value::String(text.to_string()),
    }
}

/// Parses `--set PATH=VALUE`.
pub fn parse_set(argument: &str) -> Result<(String, toml::Value)> {
    let Some((path, value)) = argument.split_once('=') else {
        return Err(Error::bad_input(format!("--set {argument:?}: expected PATH=VALUE, e.g. --set queue.servers=3")));
    };
    let path = path.trim();
    check_path(path, "--set")?;
    if value.trim().is_empty() {
        return Err(Error::bad_input(format!("--set {argument:?}: the value after '=' is empty")));
    }
    Ok((path.to_string(), parse_cli_value(value)))
}

/// Parses `--grid PATH=V1,V2,…` or `--grid PATH=[V1, V2, …]` (a TOML array, whose
/// values may be tables: `--grid 'retry=[{policy = "naive"}, {policy = "backoff"}]'`).
pub fn parse_grid(argument: &str) -> Result<GridAxis> {
    let Some((path, values)) = argument.split_once('=') else {
        return Err(Error::bad_input(format!(
            "--grid {argument:?}: expected PATH=V1,V2,…, e.g. --grid queue.servers=2,3,4"
        )));
    };
    let path = path.trim();
    check_path(path, "--grid")?;
    if values.trim_start().starts_with('[') {
        // A TOML array: its values may be tables or lists, which contain commas.
        return match parse_cli_value(values) {
            toml::Value::Array(values) if !values.is_empty() => Ok(GridAxis { path: path.to_string(), values }),
            toml::Value::Array(_) => Err(Error::bad_input(format!("--grid {argument:?}: the list of values is empty"))),
            _ => Err(Error::bad_input(format!(
                "--grid {argument:?}: the value starts with '[' but is not a TOML array, \
                 e.g. --grid 'retry=[{{policy = \"naive\"}}, {{policy = \"backoff\"}}]'"
            ))),
        };
    }
    let parts: Vec<&str> = values.split(',').map(str::trim).collect();
    if parts.iter().any(|part| part.is_empty()) {
        return Err(Error::bad_input(format!("--grid {argument:?}: every value between commas must be non-empty")));
    }
    Ok(GridAxis { path: path.to_string(), values: parts.into_iter().map(parse_cli_value).collect() })
}

/// Sets `value` at dotted `path` inside `table`, creating intermediate tables.
pub(crate) fn set_path(table: &mut toml::Table, path: &str, value: toml::Value) -> Result<()> {
    let mut parts: Vec<&str> = path.split('.').collect();
    let last = parts.pop().expect("paths are non-empty");
    let mut current = table;
    let mut walked = String::new();
    for part in parts {
        if !walked.is_empty() {
            walked.push('.');
        }
        walked.push_str(part);
        let entry = current.entry(part.to_string()).or_insert_with(|| toml::Value::Table(toml::Table::new()));
        current = match entry {
            toml::Value::Table(inner) => inner,
            other => {
                return Err(Error::bad_input(format!(
                    "cannot set {path}: {walked} is {}, not a section",
                    describe(other)
                )))
            }
        };
    }
    current.insert(last.to_string(), value);
    Ok(())
}

/// Like [`set_path`], but a table value is merged key by key into the table already
/// at `path` (recursively), so a grid axis over a section can change several of its
/// fields together: `"retry" = [{policy = "naive"}, {policy = "backoff", budget = "ratio"}]`.
pub(crate) fn merge_path(table: &mut toml::Table, path: &str, value: toml::Value) -> Result<()> {
    match value {
        toml::Value::Table(fields) => {
            for (key, inner) in fields {
                merge_path(table, &format!("{path}.{key}"), inner)?;
            }
            Ok(())
        }
        other => set_path(table, path, other),
    }
}
