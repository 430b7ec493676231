//! The Output chapter's "Column types" table, checked column by column against the
//! files runs write: every column of every table is documented, none documented is
//! missing, each has the documented type, and a column documented as never NULL has
//! no NULL (issue 45).

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::Value;
use stampede_output::{ColumnType, ColumnValues, Table};

use crate::common::{book, stampede, stderr};

/// One row of the documented table.
#[derive(Debug)]
struct Documented {
    file: String,
    /// The names in the columns cell (outside parentheses): fixed names or families.
    names: Vec<String>,
    /// The type cell as written.
    kind: String,
    never_null: bool,
}

fn backticked(text: &str) -> Vec<String> {
    text.split('`').skip(1).step_by(2).map(str::to_string).collect()
}

/// Text outside parentheses (the columns cell's asides name values, not columns).
fn outside_parentheses(text: &str) -> String {
    let mut depth = 0usize;
    text.chars()
        .filter(|&c| {
            match c {
                '(' => depth += 1,
                ')' => depth = depth.saturating_sub(1),
                _ => return depth == 0,
            }
            false
        })
        .collect()
}

fn documented_table() -> Vec<Documented> {
    let text = book();
    let start = text.find("**Column types.**").expect("the Output chapter has a Column types table");
    let rows: Vec<Documented> = text[start..]
        .lines()
        .skip_while(|line| !line.starts_with("| file |"))
        .skip(2)
        .take_while(|line| line.starts_with('|'))
        .map(|line| {
            let cells: Vec<&str> = line.trim_matches('|').split(" | ").map(str::trim).collect();
            assert_eq!(cells.len(), 4, "a Column types row has four cells: {line}");
            Documented {
                file: backticked(cells[0]).remove(0),
                names: backticked(&outside_parentheses(cells[1])),
                kind: cells[2].to_string(),
                never_null: cells[3] == "never",
            }
        })
        .collect();
    assert!(rows.len() > 20, "the table was read: {rows:?}");
    rows
}

fn type_name(kind: ColumnType) -> &'static str {
    match kind {
        ColumnType::U32 => "u32",
        ColumnType::U64 => "u64",
        ColumnType::I64 => "int64",
        ColumnType::F64 => "float64",
        ColumnType::Bool => "bool",
        ColumnType::Utf8 => "text",
        ColumnType::Binary => "binary",
    }
}

fn has_null(values: &ColumnValues) -> bool {
    match values {
        ColumnValues::F64(v) => v.iter().any(|x| x.is_nan()),
        ColumnValues::I64(v) => v.iter().any(Option::is_none),
        ColumnValues::Bool(v) => v.iter().any(Option::is_none),
        ColumnValues::NullableUtf8(v) => v.iter().any(Option::is_none),
        _ => false,
    }
}

/// The type a list of TOML values (as JSON) gets as a column.
fn values_type(values: &[Option<&Value>]) -> &'static str {
    let given: Vec<&Value> = values.iter().flatten().copied().collect();
    // JSON has no infinity: the manifest writes TOML's `inf` as text.
    let number = |v: &&Value| v.is_number() || matches!(v.as_str(), Some("inf" | "-inf" | "nan"));
    if given.iter().all(|v| v.is_i64() || v.is_u64()) {
        "int64"
    } else if given.iter().all(number) {
        "float64"
    } else if given.iter().all(|v| v.is_boolean()) {
        "bool"
    } else {
        "text"
    }
}

/// What a run's folder says about its families: metrics, series, request kinds kept
/// over time and grid axes.
struct Families {
    metrics: Vec<String>,
    series: Vec<String>,
    timed: Vec<String>,
    /// Each axis's column name and its values.
    axes: Vec<(String, Vec<Value>)>,
}

impl Families {
    fn of(dir: &Path) -> Families {
        let manifest: Value = serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
        let names = |key: &str| -> Vec<String> {
            manifest[key].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_string()).collect()
        };
        let axes = manifest["grid"]
            .as_array()
            .unwrap()
            .iter()
            .map(|axis| {
                let path = axis["path"].as_str().unwrap();
                let column = if path == "case" { "case_label".to_string() } else { path.to_string() };
                let values = axis["values"].as_array().unwrap().clone();
                // A case axis's column holds the case's label.
                let values = if path == "case" { values.iter().map(|v| v["label"].clone()).collect() } else { values };
                (column, values)
            })
            .collect();
        Families { metrics: names("metrics"), series: names("series"), timed: names("latency_over_time"), axes }
    }

    /// The documented name (fixed or a family) that `column` of `file` is, and the
    /// type it must have (`None`: the row's own type cell decides).
    fn classify(&self, file: &str, column: &str, raw_grid: &[Value]) -> (String, Option<&'static str>) {
        let family = |prefix: &str, suffixes: &[&str], members: &[String]| {
            suffixes.iter().find_map(|suffix| {
                let stem = column.strip_suffix(suffix)?;
                members.iter().any(|m| m == stem).then(|| format!("{prefix}{suffix}"))
            })
        };
        match file {
            "summary.parquet" => {
                if let Some((_, values)) = self.axes.iter().find(|(name, _)| name == column) {
                    let given: Vec<Option<&Value>> = values.iter().map(Some).collect();
                    return ("AXIS".into(), Some(values_type(&given)));
                }
                if let Some(name) = family("M", &["_mean", "_sd", "_ci_lo", "_ci_hi", "_n"], &self.metrics) {
                    return (name, None);
                }
                if column == "grid_point" || column == "replicas" {
                    return (column.into(), None);
                }
                // A field of a table-valued axis (or of a case): typed by the values given.
                let (field, family) = match column.strip_suffix("_used") {
                    Some(field) => (field, "AXIS.FIELD_used"),
                    None => (column, "AXIS.FIELD"),
                };
                let kind = field_type(raw_grid, field)
                    .unwrap_or_else(|| panic!("summary column {column:?} is no axis, field, metric or fixed column"));
                (family.into(), Some(kind))
            }
            "timeseries.parquet" => {
                if let Some(name) = family("S", &["_mean", "_ci_lo", "_ci_hi"], &self.series) {
                    return (name, None);
                }
                // A request kind's latency over time: `K.window_p99_all_s_ci_lo`, `K.failed_share`, …
                let timed = self.timed.iter().find_map(|kind| column.strip_prefix(&format!("{kind}.")));
                match timed {
                    Some(rest) => (format!("K.{rest}"), None),
                    None if ["grid_point", "bucket", "t_s", "latency_window_t_s"].contains(&column) => {
                        (column.into(), None)
                    }
                    // The grid point's axes and fields, as in the summary.
                    None => self.classify("summary.parquet", column, raw_grid),
                }
            }
            "replicas.parquet" if self.metrics.iter().any(|m| m == column) => ("M".into(), None),
            _ => (column.into(), None),
        }
    }
}

/// The type of field `field` (dotted, with its axis's path in front unless the axis is
/// the case axis) over every value of its axis; `None` when no axis has it.
fn field_type(grid: &[Value], field: &str) -> Option<&'static str> {
    for axis in grid {
        let path = axis["path"].as_str().unwrap();
        let inner = if path == "case" { Some(field) } else { field.strip_prefix(&format!("{path}.")) };
        let Some(inner) = inner else { continue };
        let values: Vec<Option<&Value>> = axis["values"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| {
                inner.split('.').try_fold(v, |v, key| match v {
                    Value::Array(items) => items.get(key.parse::<usize>().ok()?),
                    _ => v.get(key),
                })
            })
            .collect();
        if values.iter().any(Option::is_some) {
            return Some(values_type(&values));
        }
    }
    None
}

/// The types a row's type cell allows for a column of its family.
fn allowed(row: &Documented, inferred: Option<&'static str>) -> Vec<&'static str> {
    let plain = ["u32", "u64", "int64", "float64", "bool", "text", "binary"];
    if let Some(kind) = plain.iter().find(|k| row.kind == **k) {
        return vec![kind];
    }
    if row.kind.starts_with("u64 for a count") {
        return vec!["u64", "float64"];
    }
    // "its values' type…", "as `AXIS`", "as `AXIS.FIELD`": the values decide.
    vec![inferred.unwrap_or_else(|| panic!("row {row:?} needs the values' type"))]
}

fn check_folder(dir: &Path, rows: &[Documented], seen: &mut BTreeSet<(String, String)>) {
    let families = Families::of(dir);
    let manifest: Value = serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    let raw_grid = manifest["grid"].as_array().unwrap().clone();
    for row in rows.iter().map(|r| r.file.as_str()).collect::<BTreeSet<_>>() {
        let path = dir.join(row);
        if !path.exists() {
            continue;
        }
        let table = Table::read(&path).unwrap();
        for column in table.names() {
            let (name, inferred) = families.classify(row, column, &raw_grid);
            let documented = rows
                .iter()
                .find(|r| r.file == row && r.names.contains(&name))
                .unwrap_or_else(|| panic!("{row}: column {column:?} ({name}) is not in the Column types table"));
            let values = table.column(column).unwrap();
            let actual = type_name(values.kind());
            let allowed = allowed(documented, inferred);
            assert!(allowed.contains(&actual), "{row}: {column:?} is {actual}, documented {:?}", documented.kind);
            if documented.never_null {
                assert!(!has_null(values), "{row}: {column:?} is documented never NULL but holds one");
            }
            seen.insert((row.to_string(), name));
        }
    }
}

#[test]
fn every_column_is_as_the_output_chapter_says() {
    let rows = documented_table();
    let out = tempfile::tempdir().unwrap();
    let out_dir = out.path().to_str().unwrap();
    let runs: [&[&str]; 5] = [
        // The cluster: summary with a table-valued axis (text, bool and `_used`
        // fields), replicas, histograms, series, and a trace.
        &["run", "baltor", "--replicas", "2", "--trace", "0", "--no-report", "--quiet", "--out", out_dir],
        // The hops table.
        &["run", "bounded-load", "--replicas", "2", "--no-report", "--quiet", "--out", out_dir],
        // An integer axis.
        &["run", "mmc", "--replicas", "2", "--no-report", "--quiet", "--out", out_dir],
        // A case axis (`case_label`) with its fields, and a gateway trace.
        &["run", "llm-retries", "--replicas", "2", "--trace", "0", "--no-report", "--quiet", "--out", out_dir],
        // Requests that can end degraded (a fallback): `K.degraded_share`.
        &["run", "dependency-slowdown", "--replicas", "2", "--no-report", "--quiet", "--out", out_dir],
    ];
    let mut seen = BTreeSet::new();
    for args in runs {
        let output = stampede(args);
        assert!(output.status.success(), "{args:?}: {}", stderr(&output));
        check_folder(&out.path().join(args[1]), &rows, &mut seen);
    }
    // Every documented name was met in some file.
    for row in &rows {
        for name in &row.names {
            assert!(
                seen.contains(&(row.file.clone(), name.clone())),
                "{} {name:?} is documented but no run wrote it (seen: {seen:?})",
                row.file
            );
        }
    }
    // The summary's NULL rule: a field a point does not set is NULL, its `_used` is not.
    let summary = Table::read(&out.path().join("baltor/summary.parquet")).unwrap();
    assert_eq!(summary.column("retry.breaker.enabled").unwrap(), &ColumnValues::Bool(vec![None, None, Some(true)]));
    assert_eq!(
        summary.column("retry.breaker.enabled_used").unwrap(),
        &ColumnValues::Bool(vec![Some(false), Some(false), Some(true)])
    );
}
