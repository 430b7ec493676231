//! Every output table's columns — names and types, in order — computed once per
//! scenario from its [`OutputSchema`] and its grid: `summary.parquet` (the grid point,
//! each axis and each leaf of a table-valued axis, each metric's mean, sd, interval and
//! count), `replicas.parquet`, `histograms.parquet`, `timeseries.parquet`, the model's
//! count histogram and the partial folders' `partials.parquet`.

use stampede_output::{ColumnSpec, ColumnType, Melt};

use super::OutputSchema;
use crate::models::{CountHistogramDef, MetricKind, TimedLatency};
use crate::scenario::{GridAxis, CASE_AXIS};

/// The quantiles `histograms.parquet` reports per latency, as (column, q).
pub const QUANTILES: &[(&str, f64)] = &[("p50_s", 0.5), ("p90_s", 0.9), ("p99_s", 0.99), ("p999_s", 0.999)];

/// The quantiles latency over time reports per window, as (column label, q).
pub const WINDOW_QUANTILES: [(&str, f64); 2] = [("p50", 0.5), ("p99", 0.99)];

/// Every table a run writes, its columns in order.
#[derive(Clone, Debug)]
pub struct TableColumns {
    /// `summary.parquet`: its key columns, then each metric's mean, sd, interval and
    /// count — or, written long ([`TableColumns::long`]), the key columns alone (see
    /// [`TableColumns::summary_wide`]).
    pub summary: Vec<ColumnSpec>,
    /// Each grid axis's column type in the summary, in axis order.
    pub axis_types: Vec<ColumnType>,
    /// The leaf columns of table-valued axes, in the summary after the axes.
    pub leaves: Vec<LeafColumn>,
    /// `replicas.parquet` (a run's, a shard's, a checkpoint piece's: the same): its
    /// key columns, then one per metric — or, written long, the key columns alone.
    pub replicas: Vec<ColumnSpec>,
    /// `histograms.parquet`.
    pub histograms: Vec<ColumnSpec>,
    /// `timeseries.parquet`.
    pub timeseries: Vec<ColumnSpec>,
    /// How many columns say which grid point a row is of (`grid_point`, the axes, the
    /// leaves): the first columns of the summary and of the time series.
    pub grid_width: usize,
    /// The model's count histogram file (`hops.parquet`), if it writes one.
    pub counts: Option<(CountHistogramDef, [ColumnSpec; 4])>,
    /// A partial folder's `partials.parquet`.
    pub partials: Vec<ColumnSpec>,
    /// How `summary`, `replicas` and `timeseries` are written long, when the scenario
    /// is too wide for one column per metric (see [`LONG_ABOVE_METRICS`]).
    pub long: Option<LongTables>,
}

/// A scenario with more metrics than this, or more time-series columns than
/// [`LONG_ABOVE_SERIES_COLUMNS`], writes its summary, replicas and time series long
/// (one row per metric or series; see `stampede_output::long`): a 1,000-service graph
/// has ~46,000 metrics, and a Parquet file of 230,000 columns is gigabytes to write
/// and useless to SQL. The built-in scenarios have at most ~400 metrics.
pub const LONG_ABOVE_METRICS: usize = 1_000;
/// See [`LONG_ABOVE_METRICS`]: the built-ins' widest time series has ~1,100 columns.
pub(crate) const LONG_ABOVE_SERIES_COLUMNS: usize = 3_000;

/// The melts of a long scenario's three wide tables.
#[derive(Clone, Debug)]
pub struct LongTables {
    /// `summary.parquet`: (grid point, axes, replicas, metric, mean, sd, ci_lo, ci_hi, n).
    pub summary: Melt,
    /// `replicas.parquet`: (grid point, replica, seed, metric, value).
    pub replicas: Melt,
    /// `timeseries.parquet`: (grid point, axes, bucket, t_s, series, value).
    pub timeseries: Melt,
    /// The same two in hive partitions (`--partition-by grid_point`: the grid point
    /// is in the path, not in the file).
    pub replicas_partitioned: Melt,
    pub timeseries_partitioned: Melt,
}

impl LongTables {
    /// The melts of `columns`' tables: the summary's and the replicas' built from the
    /// metrics' names alone (`columns` holds only their key columns: their wide
    /// columns are never built), the time series' from its wide columns.
    fn of(columns: &TableColumns, schema: &OutputSchema) -> LongTables {
        let summary_values: Vec<ColumnSpec> = ["mean", "sd", "ci_lo", "ci_hi"]
            .map(|name| ColumnSpec::new(name, ColumnType::F64))
            .into_iter()
            .chain([ColumnSpec::new("n", ColumnType::U32)])
            .collect();
        let metrics: std::sync::Arc<[String]> = schema.metrics.iter().map(|m| m.name.to_string()).collect();
        let value = || vec![ColumnSpec::new("value", ColumnType::F64)];
        LongTables {
            summary: Melt::of_groups(columns.summary.clone(), "metric", summary_values, metrics.clone()),
            // (grid point, replica, seed) and (grid point, axes, bucket, t_s); a
            // partition's file leaves the grid point out.
            replicas: Melt::of_groups(columns.replicas.clone(), "metric", value(), metrics.clone()),
            timeseries: Self::one_value(&columns.timeseries, columns.grid_width + 2, "series"),
            replicas_partitioned: Melt::of_groups(columns.replicas[1..].to_vec(), "metric", value(), metrics),
            timeseries_partitioned: Self::one_value(&columns.timeseries[1..], columns.grid_width + 1, "series"),
        }
    }

    /// The melt of a table of `keys` key columns and then one `value` per name.
    fn one_value(columns: &[ColumnSpec], keys: usize, name_column: &'static str) -> Melt {
        Melt::new(columns, keys, name_column, vec![ColumnSpec::new("value", ColumnType::F64)])
    }
}

impl TableColumns {
    /// The columns a run of `schema` over `grid` writes.
    pub fn of(grid: &[GridAxis], schema: &OutputSchema) -> TableColumns {
        let leaves = leaf_columns(grid);
        let grid_width = grid_columns(grid, &leaves).len();
        let timeseries = timeseries_columns(grid, &leaves, schema);
        let long = schema.metrics.len() > LONG_ABOVE_METRICS || timeseries.len() > LONG_ABOVE_SERIES_COLUMNS;
        let mut columns = TableColumns {
            summary: summary_columns(grid, &leaves, schema, !long),
            timeseries,
            axis_types: grid.iter().map(axis_column_type).collect(),
            leaves,
            replicas: replica_columns(schema, !long),
            histograms: histogram_columns(),
            grid_width,
            counts: schema.count_histogram.map(|def| (def, count_columns(def))),
            partials: partial_columns(),
            long: None,
        };
        if long {
            columns.long = Some(LongTables::of(&columns, schema));
        }
        columns
    }

    /// `summary.parquet`'s columns as a wide table has them: [`TableColumns::summary`],
    /// or, for a scenario written long, the wide table its long rows pivot back to.
    pub fn summary_wide(&self) -> Vec<ColumnSpec> {
        self.long.as_ref().map_or_else(|| self.summary.clone(), |long| long.summary.wide_columns())
    }
}

/// A metric's column type in `replicas.parquet`.
fn metric_column_type(kind: MetricKind) -> ColumnType {
    match kind {
        MetricKind::Real => ColumnType::F64,
        MetricKind::Count => ColumnType::U64,
    }
}

/// `replicas.parquet`'s key columns, then (`wide`) one per metric.
fn replica_columns(schema: &OutputSchema, wide: bool) -> Vec<ColumnSpec> {
    let mut columns = vec![
        ColumnSpec::new("grid_point", ColumnType::U32),
        ColumnSpec::new("replica", ColumnType::U32),
        ColumnSpec::new("seed", ColumnType::U64),
    ];
    if wide {
        columns.extend(schema.metrics.iter().map(|m| ColumnSpec::new(m.name, metric_column_type(m.kind))));
    }
    columns
}

/// A partial folder's rows of per-point state: what (`item`), over how many replicas,
/// and the bytes.
fn partial_columns() -> Vec<ColumnSpec> {
    vec![
        ColumnSpec::new("grid_point", ColumnType::U32),
        ColumnSpec::new("item", ColumnType::Utf8),
        ColumnSpec::new("replicas", ColumnType::U64),
        ColumnSpec::new("extra", ColumnType::U64),
        ColumnSpec::new("data", ColumnType::Binary),
    ]
}

/// A timed request kind's `timeseries.parquet` columns: per quantile of the requests
/// answered in full and of every request (`_all`), its value and interval; the
/// requests that ended per second; the share of each ending.
///
/// The quantiles are `K.window_p99_s`, not `K.p99_s`: the summary's metric `K.p99_s`
/// is each replica's p99 over the measured window, averaged, and its `K.p99_s_ci_lo`
/// the interval of that mean; a window's quantile is pooled over replicas with a
/// sectioning interval. One name for both made a join of the two tables pair
/// different figures under one name.
pub fn timed_column_names(timed: &TimedLatency) -> Vec<String> {
    let mut names = Vec::new();
    for counted in ["", "_all"] {
        for (label, _) in WINDOW_QUANTILES {
            for suffix in ["", "_ci_lo", "_ci_hi"] {
                names.push(format!("{}.window_{label}{counted}_s{suffix}", timed.name));
            }
        }
    }
    names.push(format!("{}.ended_rps", timed.name));
    for ending in ["ok", "degraded", "failed"].into_iter().filter(|e| timed.degraded || *e != "degraded") {
        names.push(format!("{}.{ending}_share", timed.name));
    }
    names
}

fn histogram_columns() -> Vec<ColumnSpec> {
    let mut columns = vec![
        ColumnSpec::new("grid_point", ColumnType::U32),
        ColumnSpec::new("metric", ColumnType::Utf8),
        ColumnSpec::new("count", ColumnType::U64),
        ColumnSpec::new("batches", ColumnType::U32),
    ];
    for (name, _) in QUANTILES {
        columns.push(ColumnSpec::new(*name, ColumnType::F64));
        columns.push(ColumnSpec::new(format!("{name}_ci_lo"), ColumnType::F64));
        columns.push(ColumnSpec::new(format!("{name}_ci_hi"), ColumnType::F64));
    }
    columns.push(ColumnSpec::new("max_s", ColumnType::F64));
    columns.push(ColumnSpec::new("hdr", ColumnType::Binary));
    columns
}

fn count_columns(def: CountHistogramDef) -> [ColumnSpec; 4] {
    [
        ColumnSpec::new("grid_point", ColumnType::U32),
        ColumnSpec::new(def.column, ColumnType::U32),
        ColumnSpec::new("count", ColumnType::U64),
        ColumnSpec::new("share", ColumnType::F64),
    ]
}

/// An axis's column in `summary.parquet`: its dotted path, but the case axis's is
/// `case_label` (`case` is an SQL keyword: `SELECT case FROM …` does not parse).
pub(crate) fn axis_column_name(axis: &GridAxis) -> &str {
    if axis.path == CASE_AXIS {
        "case_label"
    } else {
        &axis.path
    }
}

/// How a grid axis is typed in `summary.parquet`: integers stay integers, numbers
/// become floats, booleans stay booleans, anything else is its TOML text.
pub(crate) fn axis_column_type(axis: &GridAxis) -> ColumnType {
    use toml::Value::{Boolean, Float, Integer};
    if axis.values.iter().all(|v| matches!(v, Integer(_))) {
        ColumnType::I64
    } else if axis.values.iter().all(|v| matches!(v, Integer(_) | Float(_))) {
        ColumnType::F64
    } else if axis.values.iter().all(|v| matches!(v, Boolean(_))) {
        ColumnType::Bool
    } else {
        ColumnType::Utf8
    }
}

/// A column per leaf of a table-valued axis (`retry.policy`, `retry.budget`, …) or
/// of a case (`stack.client`, …), beside the axis's own column, so that DuckDB can
/// filter on one field without matching TOML text. Typed by the values given (int64,
/// float64, bool, else text). A point that does not set the leaf has NULL there, and
/// when some point leaves it unset a second column, `<leaf>_used`, holds the value
/// every point ran with (the default where unset), read from its resolved sections.
#[derive(Clone, Debug, PartialEq)]
pub struct LeafColumn {
    /// The column's name: the axis path and the leaf's (`retry.policy`).
    pub name: String,
    /// Its type, from the values given.
    pub kind: ColumnType,
    /// The grid axis it belongs to.
    pub axis: usize,
    /// The leaf's dotted path inside the axis value.
    pub path: Vec<String>,
    /// Some point leaves it unset: a `<name>_used` column follows.
    pub with_used: bool,
}

impl LeafColumn {
    /// The `<name>_used` column's name.
    pub(crate) fn used_name(&self) -> String {
        format!("{}_used", self.name)
    }

    fn specs(&self) -> Vec<ColumnSpec> {
        let mut specs = vec![ColumnSpec::nullable(&self.name, self.kind)];
        if self.with_used {
            specs.push(ColumnSpec::nullable(self.used_name(), self.kind));
        }
        specs
    }
}

/// Every leaf of a table, as dotted paths (a `label` at the top is the case's name);
/// a list of tables is entered by position (`faults.0.kind`, `faults.0.start_s`).
fn leaves(table: &toml::Table, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    for (key, value) in table {
        if prefix.is_empty() && key == "label" {
            continue;
        }
        prefix.push(key.clone());
        leaves_of(value, prefix, out);
        prefix.pop();
    }
}

fn leaves_of(value: &toml::Value, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    match value {
        toml::Value::Table(inner) => leaves(inner, prefix, out),
        toml::Value::Array(items) if !items.is_empty() && items.iter().all(toml::Value::is_table) => {
            for (i, item) in items.iter().enumerate() {
                prefix.push(i.to_string());
                leaves_of(item, prefix, out);
                prefix.pop();
            }
        }
        _ => {
            if !out.contains(prefix) {
                out.push(prefix.clone());
            }
        }
    }
}

/// The value at `path` inside `value` (tables by key, arrays by position).
pub fn leaf_value<'v>(value: &'v toml::Value, path: &[String]) -> Option<&'v toml::Value> {
    path.iter().try_fold(value, |v, key| match v {
        toml::Value::Array(items) => items.get(key.parse::<usize>().ok()?),
        _ => v.as_table()?.get(key),
    })
}

fn leaf_columns(grid: &[GridAxis]) -> Vec<LeafColumn> {
    let mut taken: Vec<String> = grid.iter().map(|a| a.path.clone()).collect();
    let mut columns = Vec::new();
    for (axis_index, axis) in grid.iter().enumerate() {
        let mut paths = Vec::new();
        for value in &axis.values {
            match value {
                toml::Value::Table(table) => leaves(table, &mut Vec::new(), &mut paths),
                toml::Value::Array(items) if !items.is_empty() && items.iter().all(toml::Value::is_table) => {
                    leaves_of(value, &mut Vec::new(), &mut paths)
                }
                _ => {}
            }
        }
        for path in paths {
            let name =
                if axis.path == CASE_AXIS { path.join(".") } else { format!("{}.{}", axis.path, path.join(".")) };
            if taken.contains(&name) {
                continue;
            }
            let values: Vec<Option<&toml::Value>> = axis.values.iter().map(|v| leaf_value(v, &path)).collect();
            let numeric = values.iter().all(|v| v.is_none_or(|v| v.is_integer() || v.is_float()));
            let integers = values.iter().all(|v| v.is_none_or(toml::Value::is_integer));
            let booleans = values.iter().all(|v| v.is_none_or(toml::Value::is_bool));
            let kind = match (integers, numeric, booleans) {
                (true, ..) => ColumnType::I64,
                (false, true, _) => ColumnType::F64,
                (.., true) => ColumnType::Bool,
                _ => ColumnType::Utf8,
            };
            let with_used = values.iter().any(Option::is_none);
            taken.push(name.clone());
            if with_used {
                taken.push(format!("{name}_used"));
            }
            columns.push(LeafColumn { name, kind, axis: axis_index, path, with_used });
        }
    }
    columns
}

/// The columns that say which grid point a row is of: `grid_point`, each axis's
/// value and the leaves of table-valued axes. The summary and the time series both
/// start with them, so a time series filters on `case_label` or `"retry.policy"`
/// without a join.
fn grid_columns(grid: &[GridAxis], leaves: &[LeafColumn]) -> Vec<ColumnSpec> {
    let mut columns = vec![ColumnSpec::new("grid_point", ColumnType::U32)];
    columns.extend(grid.iter().map(|axis| ColumnSpec::new(axis_column_name(axis), axis_column_type(axis))));
    columns.extend(leaves.iter().flat_map(LeafColumn::specs));
    columns
}

/// `summary.parquet`'s key columns, then (`wide`) each metric's five.
fn summary_columns(grid: &[GridAxis], leaves: &[LeafColumn], schema: &OutputSchema, wide: bool) -> Vec<ColumnSpec> {
    let mut columns = grid_columns(grid, leaves);
    columns.push(ColumnSpec::new("replicas", ColumnType::U32));
    for metric in schema.metrics.iter().filter(|_| wide) {
        for suffix in ["mean", "sd", "ci_lo", "ci_hi"] {
            columns.push(ColumnSpec::new(format!("{}_{suffix}", metric.name), ColumnType::F64));
        }
        // The replicas whose value is defined (the mean and interval are over these).
        columns.push(ColumnSpec::new(format!("{}_n", metric.name), ColumnType::U32));
    }
    columns
}

fn timeseries_columns(grid: &[GridAxis], leaves: &[LeafColumn], schema: &OutputSchema) -> Vec<ColumnSpec> {
    let mut columns = grid_columns(grid, leaves);
    columns.push(ColumnSpec::new("bucket", ColumnType::U32));
    columns.push(ColumnSpec::new("t_s", ColumnType::F64));
    for def in schema.series {
        for suffix in ["mean", "ci_lo", "ci_hi"] {
            columns.push(ColumnSpec::new(format!("{}_{suffix}", def.name), ColumnType::F64));
        }
    }
    if !schema.timed.is_empty() {
        columns.push(ColumnSpec::new("latency_window_t_s", ColumnType::F64));
    }
    for name in schema.timed.iter().flat_map(timed_column_names) {
        columns.push(ColumnSpec::new(name, ColumnType::F64));
    }
    columns
}

#[cfg(test)]
mod tests {
    use super::*;

    fn axis(path: &str, values: &str) -> GridAxis {
        let table: toml::Table = format!("v = {values}").parse().unwrap();
        GridAxis { path: path.into(), values: table["v"].as_array().unwrap().clone() }
    }

    /// The summary's grid columns: an axis typed by its values, the case axis renamed,
    /// and a column per leaf of a table-valued axis with a `_used` twin where some
    /// point leaves it unset.
    #[test]
    fn axes_and_their_leaves_become_typed_columns() {
        let grid = [
            axis("queue.servers", "[2, 3]"),
            axis("arrival.rate", "[1, 2.5]"),
            axis("retry", "[{ policy = \"naive\" }, { policy = \"backoff\", budget = \"ratio\" }]"),
            axis(CASE_AXIS, "[{ label = \"a\", flag = true }, { label = \"b\", flag = false }]"),
        ];
        let types: Vec<ColumnType> = grid.iter().map(axis_column_type).collect();
        assert_eq!(types, [ColumnType::I64, ColumnType::F64, ColumnType::Utf8, ColumnType::Utf8]);
        assert_eq!(axis_column_name(&grid[3]), "case_label");
        let leaves = leaf_columns(&grid);
        let described: Vec<(&str, ColumnType, bool)> =
            leaves.iter().map(|l| (l.name.as_str(), l.kind, l.with_used)).collect();
        assert_eq!(
            described,
            [
                ("retry.policy", ColumnType::Utf8, false),
                ("retry.budget", ColumnType::Utf8, true),
                ("flag", ColumnType::Bool, false)
            ]
        );
        let value = &grid[2].values[1];
        assert_eq!(leaf_value(value, &["budget".to_string()]).and_then(toml::Value::as_str), Some("ratio"));
    }
}
