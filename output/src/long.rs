//! Wide tables written long, and read back wide.
//!
//! A wide table has a few leading *key* columns (the grid point, a replica, a bucket)
//! and then groups of value columns, one group per name (a metric's mean, sd,
//! interval and count; a replica's value of a metric; a series' value in a bucket).
//! At a thousand services that is tens of thousands of columns, which Parquet
//! writers and readers hold per column (buffers, statistics, footers) and SQL cannot
//! aggregate over. Written long, the same numbers are rows `(keys…, name, values…)`:
//! a handful of columns whatever the size, and `GROUP BY` works.
//!
//! A [`Melt`] turns the wide rows a table's writer already builds into long ones, so
//! nothing upstream changes; [`pivot`] turns a long table read back into the wide one
//! it was melted from, so every reader of wide tables (the report, `compare`) works on
//! either.
//!
//! Invariants: melting then pivoting gives back the wide table's columns, in order,
//! with its values (numbers as `f64`: a count column comes back as floats, exact below
//! 2^53); long rows come row by row of the wide table, its groups in column order.

use crate::read::Table;
use crate::table::{ColumnSpec, ColumnType, ColumnValues};

/// How one wide table is written long.
#[derive(Clone, Debug)]
pub struct Melt {
    /// The leading key columns, kept in every long row.
    keys: Vec<ColumnSpec>,
    /// The long table's column that names each row's group (`metric`, `series`).
    name_column: &'static str,
    /// Each group's value columns in the long table, by suffix (`mean`, `sd`, …, or
    /// `value`); a one-value group's wide column is its name alone.
    values: Vec<ColumnSpec>,
    /// The groups' names, in the wide table's column order (shared: a scenario's
    /// summary and replica melts name the same metrics).
    names: std::sync::Arc<[String]>,
}

impl Melt {
    /// The melt of `wide`: its first `keys` columns kept; the rest in groups of
    /// `values.len()` columns named `{name}_{suffix}` (or `{name}` for one value),
    /// where the suffixes are `values`' names.
    ///
    /// Panics if the wide columns do not follow that pattern (a programming error:
    /// the column lists are built from the same schema).
    pub fn new(wide: &[ColumnSpec], keys: usize, name_column: &'static str, values: Vec<ColumnSpec>) -> Melt {
        let width = values.len();
        assert!(width > 0 && (wide.len() - keys).is_multiple_of(width), "whole groups of {width} columns");
        let names = wide[keys..]
            .chunks(width)
            .map(|group| match width {
                1 => group[0].name.clone(),
                _ => {
                    let suffix = format!("_{}", values[0].name);
                    let name = group[0].name.strip_suffix(&suffix).expect("a group starts with its first value");
                    for (column, value) in group.iter().zip(&values) {
                        debug_assert_eq!(column.name, wide_name(name, &value.name, false));
                    }
                    name.to_string()
                }
            })
            .collect();
        Melt { keys: wide[..keys].to_vec(), name_column, values, names }
    }

    /// The melt of a wide table that is never built: `keys`, then one group of
    /// `values` per name in `names` (its columns `{name}_{suffix}`, or `{name}` for
    /// one value). A table of 300,000 metrics' five columns would be 1.5 million
    /// column names held for nothing when the table is only ever written long.
    pub fn of_groups(
        keys: Vec<ColumnSpec>,
        name_column: &'static str,
        values: Vec<ColumnSpec>,
        names: std::sync::Arc<[String]>,
    ) -> Melt {
        assert!(!values.is_empty(), "a group has a value");
        Melt { keys, name_column, values, names }
    }

    /// The wide table's columns this melt stands for, in order (built on demand).
    pub fn wide_columns(&self) -> Vec<ColumnSpec> {
        let mut columns = self.keys.clone();
        let single = self.values.len() == 1;
        for name in self.names.iter() {
            columns.extend(self.values.iter().map(|v| ColumnSpec::new(wide_name(name, &v.name, single), v.kind)));
        }
        columns
    }

    /// The long table's columns: the keys, the name, the values.
    pub fn columns(&self) -> Vec<ColumnSpec> {
        let mut columns = self.keys.clone();
        columns.push(ColumnSpec::new(self.name_column, ColumnType::Utf8));
        columns.extend(self.values.iter().cloned());
        columns
    }

    /// The long rows of `wide` (its columns, all of one length): per wide row, one
    /// row per group.
    pub fn rows(&self, wide: Vec<ColumnValues>) -> Vec<ColumnValues> {
        let rows = wide.first().map_or(0, ColumnValues::len);
        self.rows_of(&wide, 0..rows)
    }

    /// The long rows of wide rows `range`.
    fn rows_of(&self, wide: &[ColumnValues], range: std::ops::Range<usize>) -> Vec<ColumnValues> {
        let (keys, width) = (self.keys.len(), self.values.len());
        assert_eq!(wide.len(), keys + width * self.names.len(), "the wide columns the melt was made for");
        let groups = self.names.len();
        let mut long: Vec<ColumnValues> =
            wide[..keys].iter().map(|key| repeat_each(key, range.clone(), groups)).collect();
        long.push(ColumnValues::Utf8(range.clone().flat_map(|_| self.names.iter().cloned()).collect()));
        for (position, value) in self.values.iter().enumerate() {
            let columns: Vec<&ColumnValues> = (0..groups).map(|g| &wide[keys + g * width + position]).collect();
            long.push(gather(&columns, range.clone(), value.kind));
        }
        long
    }
}

impl Melt {
    /// The long rows of `wide` in blocks of at most [`BLOCK_ROWS`] (whole wide rows at a
    /// time; a wide row with more groups is a block of its own), so a point of a
    /// thousand services' series — over a million long rows — is never held long at
    /// once.
    pub fn blocks(&self, wide: Vec<ColumnValues>) -> impl Iterator<Item = Vec<ColumnValues>> + '_ {
        let per_block = (BLOCK_ROWS / self.names.len().max(1)).max(1);
        let rows = wide.first().map_or(0, ColumnValues::len);
        (0..rows).step_by(per_block).map(move |start| self.rows_of(&wide, start..(start + per_block).min(rows)))
    }
}

/// Long rows melted at a time, at most (see [`Melt::blocks`]).
pub const BLOCK_ROWS: usize = 65_536;

/// Each value of `column` in `rows`, `times` times in a row.
fn repeat_each(column: &ColumnValues, rows: std::ops::Range<usize>, times: usize) -> ColumnValues {
    fn repeat<T: Clone>(values: &[T], times: usize) -> Vec<T> {
        values.iter().flat_map(|v| std::iter::repeat_n(v.clone(), times)).collect()
    }
    match column {
        ColumnValues::U32(v) => ColumnValues::U32(repeat(&v[rows], times)),
        ColumnValues::U64(v) => ColumnValues::U64(repeat(&v[rows], times)),
        ColumnValues::I64(v) => ColumnValues::I64(repeat(&v[rows], times)),
        ColumnValues::F64(v) => ColumnValues::F64(repeat(&v[rows], times)),
        ColumnValues::Bool(v) => ColumnValues::Bool(repeat(&v[rows], times)),
        ColumnValues::Utf8(v) => ColumnValues::Utf8(repeat(&v[rows], times)),
        ColumnValues::NullableUtf8(v) => ColumnValues::NullableUtf8(repeat(&v[rows], times)),
        ColumnValues::Binary(v) => ColumnValues::Binary(repeat(&v[rows], times)),
    }
}

/// Row by row (of `rows`), the value of each of `columns` in turn, as `kind` (`F64` takes any
/// number; `U32` only `U32`).
fn gather(columns: &[&ColumnValues], rows: std::ops::Range<usize>, kind: ColumnType) -> ColumnValues {
    match kind {
        ColumnType::F64 => {
            ColumnValues::F64(rows.flat_map(|row| columns.iter().map(move |column| number_at(column, row))).collect())
        }
        ColumnType::U32 => ColumnValues::U32(
            rows.flat_map(|row| {
                columns.iter().map(move |column| match column {
                    ColumnValues::U32(v) => v[row],
                    other => panic!("a {:?} column in a U32 group", other.kind()),
                })
            })
            .collect(),
        ),
        other => panic!("long value columns are F64 or U32, not {other:?}"),
    }
}

/// Value `row` of a numeric column as `f64`.
fn number_at(column: &ColumnValues, row: usize) -> f64 {
    match column {
        ColumnValues::F64(v) => v[row],
        ColumnValues::U64(v) => v[row] as f64,
        ColumnValues::U32(v) => v[row] as f64,
        ColumnValues::I64(v) => v[row].map_or(f64::NAN, |x| x as f64),
        other => panic!("a {:?} column among numbers", other.kind()),
    }
}

/// A group's wide column for one of its values: `{group}_{value}`, or the group's name
/// alone when it has one value (`single`).
fn wide_name(group: &str, value: &str, single: bool) -> String {
    if single {
        group.to_string()
    } else {
        format!("{group}_{value}")
    }
}

/// The wide table `long` was melted from: the columns before `name_column` are the
/// keys, the ones after it the values. Rows that share their keys become one wide row,
/// in order of first appearance; groups come in order of first appearance. A group
/// missing from a row reads NaN (0 for a `U32` value).
pub fn pivot(long: &Table, name_column: &str) -> crate::Result<Table> {
    let Some(keys) = long.columns.iter().position(|(name, _)| name == name_column) else {
        return Err(crate::OutputError::new(&long.path, format!("not a long table: no {name_column:?} column")));
    };
    let (key_columns, rest) = long.columns.split_at(keys);
    let ((_, names), values) = rest.split_first().expect("the name column is there");
    let ColumnValues::Utf8(names) = names else {
        return Err(crate::OutputError::new(&long.path, "not a long table: its name column is not text"));
    };
    let single = values.len() == 1;
    // The wide rows: where each long row goes.
    let mut row_of_keys: Vec<usize> = Vec::with_capacity(names.len());
    let mut first_rows: Vec<usize> = Vec::new();
    let mut group_index: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    let mut groups: Vec<&str> = Vec::new();
    let same_keys = |a: usize, b: usize| key_columns.iter().all(|(_, column)| equal_at(column, a, b));
    for (row, name) in names.iter().enumerate() {
        // Long rows of one wide row are adjacent: compare with the current one only.
        match first_rows.last() {
            Some(&first) if same_keys(first, row) => {}
            _ => first_rows.push(row),
        }
        row_of_keys.push(first_rows.len() - 1);
        let next = groups.len();
        if *group_index.entry(name.as_str()).or_insert(next) == next {
            groups.push(name.as_str());
        }
    }
    let wide_rows = first_rows.len();
    let mut columns: Vec<(String, ColumnValues)> =
        key_columns.iter().map(|(name, column)| (name.clone(), column.pick(&first_rows))).collect();
    for (value_name, value) in values {
        let mut by_group: Vec<ColumnValues> = groups
            .iter()
            .map(|_| match value {
                ColumnValues::U32(_) => ColumnValues::U32(vec![0; wide_rows]),
                _ => ColumnValues::F64(vec![f64::NAN; wide_rows]),
            })
            .collect();
        for row in 0..names.len() {
            let group = group_index[names[row].as_str()];
            match (&mut by_group[group], value) {
                (ColumnValues::U32(out), ColumnValues::U32(v)) => out[row_of_keys[row]] = v[row],
                (ColumnValues::F64(out), other) => out[row_of_keys[row]] = number_at(other, row),
                _ => unreachable!("made to match"),
            }
        }
        for (group, column) in groups.iter().zip(by_group) {
            let name = wide_name(group, value_name, single);
            columns.push((name, column));
        }
    }
    if !single {
        // Wide order: each group's values together.
        let width = values.len();
        let tail = columns.split_off(keys);
        let mut by_value: Vec<std::vec::IntoIter<(String, ColumnValues)>> = Vec::new();
        let mut tail = tail.into_iter();
        for _ in 0..width {
            by_value.push(tail.by_ref().take(groups.len()).collect::<Vec<_>>().into_iter());
        }
        for _ in 0..groups.len() {
            for values in &mut by_value {
                columns.push(values.next().expect("one per group"));
            }
        }
    }
    Ok(Table { columns, path: long.path.clone() })
}

/// Whether rows `a` and `b` of `column` hold the same value.
fn equal_at(column: &ColumnValues, a: usize, b: usize) -> bool {
    match column {
        ColumnValues::U32(v) => v[a] == v[b],
        ColumnValues::U64(v) => v[a] == v[b],
        ColumnValues::I64(v) => v[a] == v[b],
        ColumnValues::F64(v) => v[a].to_bits() == v[b].to_bits(),
        ColumnValues::Bool(v) => v[a] == v[b],
        ColumnValues::Utf8(v) => v[a] == v[b],
        ColumnValues::NullableUtf8(v) => v[a] == v[b],
        ColumnValues::Binary(v) => v[a] == v[b],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str, kind: ColumnType) -> ColumnSpec {
        ColumnSpec::new(name, kind)
    }

    /// A summary-like table (two keys, groups of mean/n) melts to one row per point and
    /// metric, and pivots back to the same columns and values.
    #[test]
    fn a_melted_table_pivots_back_to_itself() {
        let wide_specs = vec![
            spec("grid_point", ColumnType::U32),
            spec("case_label", ColumnType::Utf8),
            spec("a.x_mean", ColumnType::F64),
            spec("a.x_n", ColumnType::U32),
            spec("b_mean", ColumnType::F64),
            spec("b_n", ColumnType::U32),
        ];
        let melt = Melt::new(&wide_specs, 2, "metric", vec![spec("mean", ColumnType::F64), spec("n", ColumnType::U32)]);
        let names: Vec<String> = melt.columns().iter().map(|c| c.name.clone()).collect();
        assert_eq!(names, ["grid_point", "case_label", "metric", "mean", "n"]);
        let wide = vec![
            ColumnValues::U32(vec![0, 1]),
            ColumnValues::Utf8(vec!["p".into(), "q".into()]),
            ColumnValues::F64(vec![1.5, f64::NAN]),
            ColumnValues::U32(vec![3, 0]),
            ColumnValues::F64(vec![2.5, 4.0]),
            ColumnValues::U32(vec![3, 3]),
        ];
        let long = melt.rows(wide.clone());
        assert_eq!(long[0], ColumnValues::U32(vec![0, 0, 1, 1]));
        assert_eq!(long[2], ColumnValues::Utf8(["a.x", "b", "a.x", "b"].map(String::from).to_vec()));
        assert_eq!(long[4], ColumnValues::U32(vec![3, 3, 0, 3]));
        let table = Table { columns: names.into_iter().zip(long).collect(), path: "t".into() };
        let back = pivot(&table, "metric").unwrap();
        let back_names: Vec<&str> = back.names().collect();
        assert_eq!(back_names, wide_specs.iter().map(|c| c.name.as_str()).collect::<Vec<_>>());
        for ((_, got), want) in back.columns.iter().zip(&wide) {
            match (got, want) {
                (ColumnValues::F64(g), ColumnValues::F64(w)) => {
                    assert!(g.iter().zip(w).all(|(a, b)| a.to_bits() == b.to_bits()), "{g:?} vs {w:?}")
                }
                _ => assert_eq!(got, want),
            }
        }
    }

    /// One-value groups (a replica's metrics, counts among them) melt to `value` as
    /// floats and pivot back under their own names.
    #[test]
    fn one_value_groups_keep_their_names_and_counts_become_floats() {
        let wide_specs =
            vec![spec("replica", ColumnType::U32), spec("ok", ColumnType::U64), spec("p99_s", ColumnType::F64)];
        let melt = Melt::new(&wide_specs, 1, "metric", vec![spec("value", ColumnType::F64)]);
        let long =
            melt.rows(vec![ColumnValues::U32(vec![7]), ColumnValues::U64(vec![12]), ColumnValues::F64(vec![0.25])]);
        assert_eq!(long[2], ColumnValues::F64(vec![12.0, 0.25]));
        let names = ["replica", "metric", "value"].map(String::from);
        let back =
            pivot(&Table { columns: names.into_iter().zip(long).collect(), path: "t".into() }, "metric").unwrap();
        assert_eq!(back.names().collect::<Vec<_>>(), ["replica", "ok", "p99_s"]);
        assert_eq!(back.numbers("ok").unwrap(), [12.0]);
    }

    /// Melting block by block gives the same rows as melting at once, in order.
    #[test]
    fn blocks_are_the_rows_in_order() {
        let groups = 3 * BLOCK_ROWS / 2;
        let mut wide_specs = vec![spec("bucket", ColumnType::U32)];
        wide_specs.extend((0..groups).map(|g| spec(&format!("s{g}"), ColumnType::F64)));
        let melt = Melt::new(&wide_specs, 1, "series", vec![spec("value", ColumnType::F64)]);
        let mut wide = vec![ColumnValues::U32(vec![0, 1, 2])];
        wide.extend((0..groups).map(|g| ColumnValues::F64(vec![g as f64, -(g as f64), 0.5])));
        let mut blocked: Option<Vec<ColumnValues>> = None;
        let mut blocks = 0;
        for block in melt.blocks(wide.clone()) {
            blocks += 1;
            match &mut blocked {
                None => blocked = Some(block),
                Some(all) => all.iter_mut().zip(block).for_each(|(a, b)| a.append(b)),
            }
        }
        assert_eq!(blocks, 3, "one wide row of more groups than a block is a block of its own");
        assert_eq!(blocked.unwrap(), melt.rows(wide));
    }

    /// A table that is not long is an error, not a panic.
    #[test]
    fn a_wide_table_is_not_pivoted() {
        let table = Table { columns: vec![("grid_point".into(), ColumnValues::U32(vec![0]))], path: "t".into() };
        assert!(pivot(&table, "metric").unwrap_err().to_string().contains("no \"metric\" column"));
        let table = Table {
            columns: vec![
                ("grid_point".into(), ColumnValues::U32(vec![0])),
                ("metric".into(), ColumnValues::F64(vec![1.0])),
            ],
            path: "t".into(),
        };
        assert!(pivot(&table, "metric").unwrap_err().to_string().contains("not text"));
    }
}
