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
    /// `--case LABEL`: only these `[[grid.case]]` entries (in the file's order).
    pub cases: Vec<String>,
}

/// Checks a dotted path: non-empty parts of letters, digits, `_`, `-` and `>` (a part
/// of digits indexes a list: `faults.0.factor`; a graph's edge is `edges.api->db.timeout_s`).
pub fn check_path(path: &str, flag: &str) -> Result<()> {
    let valid = !path.is_empty()
        && path.split('.').all(|part| {
            !part.is_empty() && part.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '>'))
        });
    if valid {
        Ok(())
    } else {
        Err(Error::bad_input(format!(
            "{flag} path {path:?}: expected a dotted field path such as queue.servers, faults[0].factor for \
             an entry of a list, or edges.api->db.timeout_s for a graph's edge (quoted or not)"
        )))
    }
}

/// A part written as a TOML quoted key (`edges."api->db".timeout_s`, as the scenario
/// file spells it) is the same part unquoted: the quotes are dropped when what they
/// hold is a valid part (no dot, no quote).
fn unquote_parts(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    let mut rest = path;
    while let Some(open) = rest.find('"') {
        let Some(close) = rest[open + 1..].find('"').map(|c| open + 1 + c) else { break };
        let inner = &rest[open + 1..close];
        let at_part_start = open == 0 || rest[..open].ends_with('.');
        let at_part_end = close + 1 == rest.len() || rest[close + 1..].starts_with(['.', '[']);
        if !(at_part_start && at_part_end) || inner.is_empty() || inner.contains('.') {
            break;
        }
        out.push_str(&rest[..open]);
        out.push_str(inner);
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    out
}

/// Writes list indexes in brackets as dotted parts: `faults[0].factor` → `faults.0.factor`
/// (both forms are accepted; the dotted one is what the grid and the output columns use).
pub fn normalize_path(path: &str) -> String {
    let unquoted = unquote_parts(path.trim());
    let path = unquoted.as_str();
    let mut out = String::with_capacity(path.len());
    let mut rest = path;
    while let Some(open) = rest.find('[') {
        let Some(close) = rest[open..].find(']').map(|c| open + c) else { break };
        let index = &rest[open + 1..close];
        if index.is_empty() || !index.bytes().all(|b| b.is_ascii_digit()) {
            break;
        }
        out.push_str(&rest[..open]);
        out.push('.');
        out.push_str(index);
        rest = &rest[close + 1..];
        if !rest.is_empty() && !rest.starts_with(['.', '[']) {
            out.push('.');
        }
    }
    // Whatever is left keeps its brackets, so that check_path refuses it.
    out.push_str(rest);
    out
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
    let path = normalize_path(path);
    check_path(&path, "--set")?;
    if value.trim().is_empty() {
        return Err(Error::bad_input(format!("--set {argument:?}: the value after '=' is empty")));
    }
    Ok((path, parse_cli_value(value)))
}

/// Parses `--grid PATH=V1,V2,…` or `--grid PATH=[V1, V2, …]` (a TOML array, whose
/// values may be tables: `--grid 'retry=[{policy = "naive"}, {policy = "backoff"}]'`).
pub fn parse_grid(argument: &str) -> Result<GridAxis> {
    let Some((path, values)) = argument.split_once('=') else {
        return Err(Error::bad_input(format!(
            "--grid {argument:?}: expected PATH=V1,V2,…, e.g. --grid queue.servers=2,3,4"
        )));
    };
    let path = &normalize_path(path);
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

/// The value at a normalised dotted path (`faults.0.factor`: a list entered by its
/// position) of a TOML table, if there is one — where overrides write (`merge_path`).
pub fn value_at<'a>(table: &'a toml::Table, path: &str) -> Option<&'a toml::Value> {
    let mut parts = path.split('.');
    let mut value = table.get(parts.next()?)?;
    for part in parts {
        value = match value {
            toml::Value::Table(t) => t.get(part)?,
            toml::Value::Array(a) => a.get(part.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(value)
}

/// Sets `value` at dotted `path` inside `table`, replacing a table there whole (the
/// tests' way to write a document; overrides merge, see [`merge_path`]).
#[cfg(test)]
fn set_path(table: &mut toml::Table, path: &str, value: toml::Value) -> Result<()> {
    let parts: Vec<&str> = path.split('.').collect();
    set_in_table(table, &parts, path, 0, value)
}

/// Keys of one table that say one thing different ways: setting one removes the others.
const ALTERNATIVES: &[&[&str]] = &[&["after_s", "after"]];

/// Sets `parts[depth..]` inside `table`, the value at `parts[..depth]`.
fn set_in_table(table: &mut toml::Table, parts: &[&str], path: &str, depth: usize, value: toml::Value) -> Result<()> {
    let part = parts[depth];
    if depth + 1 == parts.len() {
        // A key said another way replaces the other way (a hedge's `after_s` over its
        // `after = "p95"`: merged, both were there and the scenario was refused).
        for group in ALTERNATIVES.iter().filter(|group| group.contains(&part)) {
            group.iter().filter(|&&other| other != part).for_each(|&other| drop(table.remove(other)));
        }
        table.insert(part.to_string(), value);
        return Ok(());
    }
    let entry = table.entry(part.to_string()).or_insert_with(|| toml::Value::Table(toml::Table::new()));
    set_in_value(entry, parts, path, depth + 1, value)
}

/// Sets `parts[depth..]` inside `current`, the value at `parts[..depth]`: a section or a list.
fn set_in_value(current: &mut toml::Value, parts: &[&str], path: &str, depth: usize, value: toml::Value) -> Result<()> {
    let walked = parts[..depth].join(".");
    match current {
        toml::Value::Table(inner) => set_in_table(inner, parts, path, depth, value),
        toml::Value::Array(items) => {
            let count = items.len();
            let Ok(index) = parts[depth].parse::<usize>() else {
                return Err(Error::bad_input(format!(
                    "cannot set {path}: {walked} is a list, and {:?} is not a position in it; index it from 0, e.g. \
                     {walked}.0 or {walked}[0]",
                    parts[depth]
                )));
            };
            let Some(item) = items.get_mut(index) else {
                let has = match count {
                    0 => "is an empty list".to_string(),
                    1 => "has 1 entry (index 0)".to_string(),
                    n => format!("has {n} entries (indexes 0 to {})", n - 1),
                };
                return Err(Error::bad_input(format!("cannot set {path}: {walked} {has}")));
            };
            if depth + 1 == parts.len() {
                *item = value;
                Ok(())
            } else {
                set_in_value(item, parts, path, depth + 1, value)
            }
        }
        other => Err(Error::bad_input(format!(
            "cannot set {path}: {walked} is {}, not a section or a list",
            describe(other)
        ))),
    }
}

/// Sets `value` at dotted `path` inside `table`, creating intermediate tables (a part
/// of digits indexes an existing list: `faults.0.factor`); a table value is merged key by key into the table already
/// at `path` (recursively), so a grid axis over a section can change several of its
/// fields together: `"retry" = [{policy = "naive"}, {policy = "backoff", budget = "ratio"}]`.
/// A value whose fields belong together replaces whatever is there: a distribution
/// value (a table with `dist`: a gamma's `scv` means nothing to an `hdr`) and a load
/// profile (a table at `load` or `load.rate`: a `rate_file` replaces the old `rate`).
pub(crate) fn merge_path(table: &mut toml::Table, path: &str, value: toml::Value) -> Result<()> {
    let mut parts: Vec<String> = path.split('.').map(String::from).collect();
    merge_parts(table, &mut parts, value)
}

/// [`merge_path`] on a path already split: a table's keys are parts whole, so a key
/// with a dot in it (a call site's edge, `"api.checkout->db.read"`) stays one key.
fn merge_parts(table: &mut toml::Table, parts: &mut Vec<String>, value: toml::Value) -> Result<()> {
    match value {
        toml::Value::Table(fields) if !fields.contains_key("dist") && !is_load_profile(parts) => {
            for (key, inner) in fields {
                parts.push(key);
                merge_parts(table, parts, inner)?;
                parts.pop();
            }
            Ok(())
        }
        other => {
            let split: Vec<&str> = parts.iter().map(String::as_str).collect();
            set_in_table(table, &split, &parts.join("."), 0, other)
        }
    }
}

/// Whether `parts` lead to a load profile (`load`, `workload.1.load`) or its `rate`.
fn is_load_profile(parts: &[String]) -> bool {
    match parts {
        [.., last] if last == "load" => true,
        [.., load, last] => load == "load" && last == "rate",
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A hedge's fixed delay set over its running quantile replaces it (issue 71:
    /// `--set …hedge={after_s=0.4}` over `after = "p95"` kept both and was refused).
    #[test]
    fn a_key_said_another_way_replaces_the_other() {
        let mut doc = table("[edges.\"api->db\".hedge]\nafter = \"p95\"\nmax = 2\n");
        merge_path(&mut doc, "edges.api->db.hedge", toml::Value::Table(table("after_s = 0.4"))).unwrap();
        let hedge = &doc["edges"]["api->db"]["hedge"];
        assert_eq!(hedge.get("after"), None, "{hedge}");
        assert_eq!((hedge["after_s"].as_float(), hedge["max"].as_integer()), (Some(0.4), Some(2)));
        merge_path(&mut doc, "edges.api->db.hedge.after", toml::Value::String("p99".into())).unwrap();
        assert_eq!(doc["edges"]["api->db"]["hedge"].get("after_s"), None);
    }

    /// An edge written as the scenario file quotes it is the edge (issue 71: `--set
    /// 'edges."api->db".timeout_s=…'` was "expected a dotted field path").
    #[test]
    fn a_quoted_part_is_the_part() {
        assert_eq!(normalize_path(r#"edges."api->db".timeout_s"#), "edges.api->db.timeout_s");
        assert_eq!(normalize_path(r#"edges."client->web""#), "edges.client->web");
        assert_eq!(normalize_path(r#"faults[0]."factor""#), "faults.0.factor");
        // A quoted key holding a dot cannot be a part: it stays, and check_path refuses it.
        let dotted = normalize_path(r#"services."a.b".workers"#);
        assert!(check_path(&dotted, "--set").is_err());
    }

    fn table(text: &str) -> toml::Table {
        text.parse().unwrap()
    }

    #[test]
    fn a_merged_key_with_a_dot_stays_one_key() {
        let mut body = table("[edges.\"api.checkout->db.read\"]\ntimeout_s = 2.0\nhash_vnodes = 7");
        let patch = table("\"api.checkout->db.read\" = { timeout_s = 1.0 }");
        merge_path(&mut body, "edges", toml::Value::Table(patch)).unwrap();
        let edge = body["edges"]["api.checkout->db.read"].as_table().unwrap();
        assert_eq!(edge["timeout_s"].as_float(), Some(1.0));
        assert_eq!(edge["hash_vnodes"].as_integer(), Some(7), "the other fields are kept");
        assert_eq!(body["edges"].as_table().unwrap().len(), 1, "{body:?}");
    }

    /// A load profile given whole replaces the old one (its forms exclude each other);
    /// a section still merges.
    #[test]
    fn a_load_profile_replaces_and_a_section_merges() {
        let mut doc = table("[[workload]]\nentry = \"a.b\"\nload = { rate = [[0, 10]], bursts = [{ at_s = 1, duration_s = 1, factor = 2 }] }");
        merge_path(&mut doc, "workload.0.load", toml::Value::Table(table("rate_file = \"x.csv\""))).unwrap();
        let load = doc["workload"][0]["load"].as_table().unwrap();
        assert_eq!(load.keys().collect::<Vec<_>>(), ["rate_file"], "{load:?}");
        let mut doc = table("[load]\nrate = [[0, 10]]\nscale = 2.0");
        merge_path(
            &mut doc,
            "load.rate",
            toml::Value::Table(table("shape = \"sine\"\nmean = 5\namplitude = 1\nperiod_s = 60")),
        )
        .unwrap();
        assert_eq!(doc["load"]["rate"]["mean"].as_integer(), Some(5));
        assert_eq!(doc["load"]["scale"].as_float(), Some(2.0), "the section's other fields stay");
        merge_path(&mut doc, "load", toml::Value::Table(table("rate_file = \"y.csv\""))).unwrap();
        assert!(doc["load"].get("scale").is_none(), "the whole profile was replaced: {doc:?}");
        let mut doc = table("[retry]\npolicy = \"naive\"\nmax_attempts = 5");
        merge_path(&mut doc, "retry", toml::Value::Table(table("policy = \"backoff\""))).unwrap();
        assert_eq!(doc["retry"]["max_attempts"].as_integer(), Some(5), "a section merges");
    }

    #[test]
    fn bracket_indexes_are_written_as_dotted_parts() {
        assert_eq!(normalize_path("faults[0].factor"), "faults.0.factor");
        assert_eq!(normalize_path("faults.0.factor"), "faults.0.factor");
        assert_eq!(normalize_path("a[1][2]"), "a.1.2");
        assert_eq!(normalize_path("a[1]"), "a.1");
        assert_eq!(normalize_path("queue.servers"), "queue.servers");
        assert_eq!(parse_set("faults[1].factor=2").unwrap(), ("faults.1.factor".into(), toml::Value::Integer(2)));
        assert_eq!(parse_grid("faults[0].start_s=1,2").unwrap().path, "faults.0.start_s");
        assert!(parse_set("faults[x=1").is_err(), "an unclosed bracket is not a path");
    }

    #[test]
    fn a_part_of_digits_indexes_a_list() {
        let mut doc = table("faults = [{ kind = \"surge\", factor = 5.0 }, { kind = \"brownout\", factor = 10.0 }]");
        set_path(&mut doc, "faults.1.factor", toml::Value::Float(2.0)).unwrap();
        assert_eq!(doc["faults"][1]["factor"].as_float(), Some(2.0));
        assert_eq!(doc["faults"][0]["factor"].as_float(), Some(5.0), "the other entry is untouched");
        merge_path(&mut doc, "faults.0", toml::Value::Table(table("factor = 3.0"))).unwrap();
        assert_eq!(doc["faults"][0]["kind"].as_str(), Some("surge"), "a table merges into the entry");
        assert_eq!(doc["faults"][0]["factor"].as_float(), Some(3.0));
        set_path(&mut doc, "faults.1", toml::Value::Table(table("kind = \"outage\""))).unwrap();
        assert_eq!(doc["faults"][1].as_table().unwrap().len(), 1, "set replaces the entry");
        let error = |path: &str| set_path(&mut doc.clone(), path, toml::Value::Integer(1)).unwrap_err().message;
        assert_eq!(error("faults.2.factor"), "cannot set faults.2.factor: faults has 2 entries (indexes 0 to 1)");
        assert!(error("faults.first.factor").contains("faults is a list, and \"first\" is not a position in it"));
        assert!(error("faults.0.factor.x").contains("faults.0.factor is 3.0, not a section or a list"));
    }
}
