//! Reading a table this crate wrote back into plain vectors: the report reads an
//! output folder through here, so nothing above this crate touches Arrow types.
//!
//! Only the column types [`crate::TableWriter`] writes are understood; anything else
//! (a file from another tool) is an error naming the column and its type.

use std::fs::File;
use std::path::Path;

use arrow_array::{
    Array, BinaryArray, BooleanArray, Float64Array, Int64Array, RecordBatch, StringArray, UInt32Array, UInt64Array,
};
use arrow_schema::DataType;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use crate::table::ColumnValues;
use crate::{OutputError, Result};

/// A whole table in memory: its columns in file order.
#[derive(Clone, Debug, PartialEq)]
pub struct Table {
    pub columns: Vec<(String, ColumnValues)>,
    /// Where it was read from, for error messages.
    pub path: std::path::PathBuf,
}

impl Table {
    /// Reads `path` (a Parquet file written by [`crate::TableWriter`]).
    pub fn read(path: &Path) -> Result<Table> {
        let file = File::open(path).map_err(|e| OutputError::new(path, e))?;
        let reader = ParquetRecordBatchReaderBuilder::try_new(file)
            .and_then(|builder| builder.build())
            .map_err(|e| OutputError::new(path, format!("not a readable Parquet file: {e}")))?;
        let mut all: Option<Table> = None;
        for batch in reader {
            let batch = batch.map_err(|e| OutputError::new(path, e))?;
            let more = Table { columns: batch_columns(path, &batch)?, path: path.to_path_buf() };
            Table::extend(&mut all, more);
        }
        Ok(all.unwrap_or(Table { columns: Vec::new(), path: path.to_path_buf() }))
    }

    /// Rows `rows` of `path` (a file [`crate::TableWriter`] wrote), only the columns
    /// named in `columns` (all when empty), in file order. Only the row groups that hold
    /// them are read.
    pub fn read_rows(path: &Path, columns: &[&str], rows: std::ops::Range<usize>) -> Result<Table> {
        let mut all: Option<Table> = None;
        Table::stream_rows(path, columns, rows, 8192, &|error| error, &mut |batch| {
            Table::extend(&mut all, batch);
            Ok(())
        })?;
        Ok(all.expect("stream_rows hands on at least one batch"))
    }

    /// `more`'s rows after `all`'s (the same columns), or `more` itself when `all` is empty.
    fn extend(all: &mut Option<Table>, more: Table) {
        match all {
            None => *all = Some(more),
            Some(all) => {
                for ((_, column), (_, rows)) in all.columns.iter_mut().zip(more.columns) {
                    column.append(rows);
                }
            }
        }
    }

    /// [`Self::read_rows`] in batches of at most `batch` rows, each handed to `each` as
    /// it is decoded (at least one, empty for an empty range): a merge reads a shard's
    /// slice of a grid point in memory that grows with neither the file nor the slice.
    /// `each` may fail with the caller's own error; a read failure becomes one by `error`.
    pub fn stream_rows<E>(
        path: &Path,
        columns: &[&str],
        rows: std::ops::Range<usize>,
        batch: usize,
        error: &dyn Fn(OutputError) -> E,
        each: &mut dyn FnMut(Table) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        use parquet::arrow::arrow_reader::{RowSelection, RowSelector};
        use parquet::arrow::ProjectionMask;
        let file = File::open(path).map_err(|e| error(OutputError::new(path, e)))?;
        let builder = ParquetRecordBatchReaderBuilder::try_new(file)
            .map_err(|e| error(OutputError::new(path, format!("not a readable Parquet file: {e}"))))?;
        let total = builder.metadata().file_metadata().num_rows() as usize;
        if rows.end > total {
            return Err(error(OutputError::new(path, format!("rows {rows:?} asked of a table of {total}"))));
        }
        // The row groups overlapping `rows`, and where the first of them starts.
        let (mut groups, mut start, mut first_start) = (Vec::new(), 0usize, None);
        for (index, group) in builder.metadata().row_groups().iter().enumerate() {
            let end = start + group.num_rows() as usize;
            if end > rows.start && start < rows.end {
                first_start.get_or_insert(start);
                groups.push(index);
            }
            start = end;
        }
        let fields: Vec<String> = builder.schema().fields().iter().map(|f| f.name().clone()).collect();
        let mut indices = Vec::new();
        for name in columns {
            let index = fields.iter().position(|f| f == name).ok_or_else(|| {
                error(OutputError::new(path, format!("no column {name:?}; its columns: {}", fields.join(", "))))
            })?;
            indices.push(index);
        }
        let mask = if columns.is_empty() {
            ProjectionMask::all()
        } else {
            ProjectionMask::roots(builder.parquet_schema(), indices.iter().copied())
        };
        // The projection keeps the file's order.
        indices.sort_unstable();
        let chosen: Vec<usize> = if columns.is_empty() { (0..fields.len()).collect() } else { indices };
        let schema = builder.schema().clone();
        let skip = rows.start - first_start.unwrap_or(rows.start);
        let selection = RowSelection::from(vec![RowSelector::skip(skip), RowSelector::select(rows.len())]);
        let reader = builder
            .with_row_groups(groups)
            .with_projection(mask)
            .with_row_selection(selection)
            .with_batch_size(batch.max(1))
            .build()
            .map_err(|e| error(OutputError::new(path, format!("cannot read it: {e}"))))?;
        let mut read = 0;
        for batch in reader {
            let batch = batch.map_err(|e| error(OutputError::new(path, e)))?;
            read += batch.num_rows();
            each(Table { columns: batch_columns(path, &batch).map_err(error)?, path: path.to_path_buf() })?;
        }
        if read != rows.len() {
            return Err(error(OutputError::new(path, format!("rows {rows:?}: read {read} of them"))));
        }
        if rows.is_empty() {
            // No batch at all: the chosen columns, empty.
            let projected = schema.project(&chosen).map_err(|e| error(OutputError::new(path, e)))?;
            let empty = RecordBatch::new_empty(std::sync::Arc::new(projected));
            each(Table { columns: batch_columns(path, &empty).map_err(error)?, path: path.to_path_buf() })?;
        }
        Ok(())
    }

    /// The rows of `path` whose text column `column` passes `keep`, read a block at a
    /// time: a report of a big graph draws a few of the millions of rows of its long
    /// time series, and holds those alone.
    pub fn read_where(path: &Path, column: &str, keep: &dyn Fn(&str) -> bool) -> Result<Table> {
        let mut all: Option<Table> = None;
        let rows = 0..Table::row_count(path)?;
        Table::stream_rows(path, &[], rows, 65_536, &|error| error, &mut |batch| {
            let kept: Vec<usize> = match batch.column(column)? {
                ColumnValues::Utf8(names) => (0..names.len()).filter(|&r| keep(&names[r])).collect(),
                other => {
                    return Err(OutputError::new(path, format!("column {column:?} is {:?}, not text", other.kind())))
                }
            };
            let columns = batch.columns.iter().map(|(name, values)| (name.clone(), values.pick(&kept)));
            Table::extend(&mut all, Table { columns: columns.collect(), path: path.to_path_buf() });
            Ok(())
        })?;
        Ok(all.expect("stream_rows hands on at least one batch"))
    }

    /// Rows in the file at `path`, from its footer.
    pub fn row_count(path: &Path) -> Result<usize> {
        let file = File::open(path).map_err(|e| OutputError::new(path, e))?;
        let builder = ParquetRecordBatchReaderBuilder::try_new(file)
            .map_err(|e| OutputError::new(path, format!("not a readable Parquet file: {e}")))?;
        Ok(builder.metadata().file_metadata().num_rows() as usize)
    }

    /// Rows in the table.
    pub fn rows(&self) -> usize {
        self.columns.first().map_or(0, |(_, c)| c.len())
    }

    /// Whether the table has a column called `name`.
    pub fn has(&self, name: &str) -> bool {
        self.columns.iter().any(|(n, _)| n == name)
    }

    /// The columns' names, in the file's order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.columns.iter().map(|(n, _)| n.as_str())
    }

    /// The column called `name`.
    pub fn column(&self, name: &str) -> Result<&ColumnValues> {
        self.columns
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, c)| c)
            .ok_or_else(|| OutputError::new(&self.path, format!("no column {name:?}")))
    }

    /// Each column's position by name: for a caller reading many columns of a wide
    /// table (a scan per name is quadratic in 230,000 columns).
    pub fn positions(&self) -> std::collections::HashMap<&str, usize> {
        self.columns.iter().enumerate().map(|(i, (name, _))| (name.as_str(), i)).collect()
    }

    /// The numeric column at `position` (see [`Self::positions`]) as `f64`.
    pub fn numbers_at(&self, position: usize) -> Result<Vec<f64>> {
        let (name, column) = &self.columns[position];
        Self::as_numbers(name, column, &self.path)
    }

    /// A numeric column as `f64` (integers converted; counts this large are exact).
    pub fn numbers(&self, name: &str) -> Result<Vec<f64>> {
        Self::as_numbers(name, self.column(name)?, &self.path)
    }

    fn as_numbers(name: &str, column: &ColumnValues, path: &Path) -> Result<Vec<f64>> {
        Ok(match column {
            ColumnValues::U32(v) => v.iter().map(|&x| x as f64).collect(),
            ColumnValues::U64(v) => v.iter().map(|&x| x as f64).collect(),
            ColumnValues::I64(v) => v.iter().map(|x| x.map_or(f64::NAN, |x| x as f64)).collect(),
            ColumnValues::F64(v) => v.clone(),
            other => {
                return Err(OutputError::new(path, format!("column {name:?} is {:?}, not a number", other.kind())))
            }
        })
    }

    /// A text column.
    pub fn strings(&self, name: &str) -> Result<&[String]> {
        match self.column(name)? {
            ColumnValues::Utf8(v) => Ok(v),
            other => Err(OutputError::new(&self.path, format!("column {name:?} is {:?}, not text", other.kind()))),
        }
    }

    /// A binary column.
    pub fn binaries(&self, name: &str) -> Result<&[Vec<u8>]> {
        match self.column(name)? {
            ColumnValues::Binary(v) => Ok(v),
            other => Err(OutputError::new(&self.path, format!("column {name:?} is {:?}, not binary", other.kind()))),
        }
    }
}

/// Table `name` of an output folder whose manifest lists `files`: `NAME.parquet`, or
/// its hive partitions `NAME/grid_point=K/part-0.parquet` (`--partition-by
/// grid_point`) read in grid-point order with the `grid_point` column put back first;
/// `None` when the folder has neither (`--replica-rows none`, or a model without series).
pub fn read_output_table(dir: &Path, name: &str, files: &[String]) -> Result<Option<Table>> {
    read_output_table_with(dir, name, files, &|path| Table::read(path))
}

/// [`read_output_table`] keeping only the rows whose text column `column` passes
/// `keep` (see [`Table::read_where`]).
pub fn read_output_table_where(
    dir: &Path,
    name: &str,
    files: &[String],
    column: &str,
    keep: &dyn Fn(&str) -> bool,
) -> Result<Option<Table>> {
    read_output_table_with(dir, name, files, &|path| Table::read_where(path, column, keep))
}

fn read_output_table_with(
    dir: &Path,
    name: &str,
    files: &[String],
    read: &dyn Fn(&Path) -> Result<Table>,
) -> Result<Option<Table>> {
    let whole = format!("{name}.parquet");
    if files.contains(&whole) {
        return read(&dir.join(whole)).map(Some);
    }
    let prefix = format!("{name}/grid_point=");
    let mut parts: Vec<(u32, &String)> =
        files.iter().filter_map(|f| f.strip_prefix(&prefix)?.split_once('/')?.0.parse().ok().map(|k| (k, f))).collect();
    if parts.is_empty() {
        return Ok(None);
    }
    parts.sort();
    let mut all: Option<Table> = None;
    for (point, file) in parts {
        let mut table = read(&dir.join(file))?;
        let rows = table.rows();
        table.columns.insert(0, ("grid_point".to_string(), ColumnValues::U32(vec![point; rows])));
        Table::extend(&mut all, table);
    }
    Ok(all.map(|table| Table { path: dir.join(name), ..table }))
}

/// One numeric column of any Parquet file (written by pandas, DuckDB, Spark, …): every
/// integer and float width, as `f64`, in row order. A missing column is an error that
/// lists the columns there are; a null is an error naming its row (1-based).
pub fn number_column(path: &Path, name: &str) -> Result<Vec<f64>> {
    let file = File::open(path).map_err(|e| OutputError::new(path, e))?;
    number_column_from(file, path, name, u64::MAX)
}

/// [`number_column`] of a file already in memory (`path` names it in errors), its
/// column refused if it would decompress to more than `limit` bytes.
pub fn number_column_of(bytes: std::sync::Arc<[u8]>, path: &Path, name: &str, limit: u64) -> Result<Vec<f64>> {
    number_column_from(bytes::Bytes::from_owner(bytes), path, name, limit)
}

/// One text column of any Parquet file, row for row (plain, large or dictionary-encoded
/// strings, as pandas writes a `category`), from a file in memory; a null is an error
/// naming its row. Refused if it would decompress to more than `limit` bytes.
pub fn string_column_of(bytes: std::sync::Arc<[u8]>, path: &Path, name: &str, limit: u64) -> Result<Vec<String>> {
    use arrow_array::cast::AsArray;
    let reader = column_reader(bytes::Bytes::from_owner(bytes), path, name, limit)?;
    let mut out = Vec::new();
    for_each_array(reader, path, name, |array| {
        match array.data_type() {
            DataType::Utf8 => out.extend(array.as_string::<i32>().iter().map(|s| s.unwrap_or("").to_string())),
            DataType::LargeUtf8 => out.extend(array.as_string::<i64>().iter().map(|s| s.unwrap_or("").to_string())),
            DataType::Utf8View => out.extend(array.as_string_view().iter().map(|s| s.unwrap_or("").to_string())),
            DataType::Dictionary(_, value) if matches!(**value, DataType::Utf8 | DataType::LargeUtf8) => {
                let dictionary = array.as_any_dictionary();
                let values = dictionary.values();
                let text = |i: usize| match value.as_ref() {
                    DataType::Utf8 => values.as_string::<i32>().value(i).to_string(),
                    _ => values.as_string::<i64>().value(i).to_string(),
                };
                out.extend(dictionary.normalized_keys().into_iter().map(text));
            }
            other => {
                return Err(OutputError::new(path, format!("column {name:?} has type {other}, not text")));
            }
        }
        Ok(out.len())
    })?;
    Ok(out)
}

/// Hands each batch's one column to `each` (which returns the rows read so far), after
/// refusing a null, named by its row (1-based).
fn for_each_array(
    reader: parquet::arrow::arrow_reader::ParquetRecordBatchReader,
    path: &Path,
    name: &str,
    mut each: impl FnMut(&arrow_array::ArrayRef) -> Result<usize>,
) -> Result<()> {
    let mut rows = 0;
    let mut reader = reader;
    loop {
        // The parquet crate can panic on a damaged page (a dictionary-encoded page
        // without its dictionary, found by the input fuzzing): a refusal, not a crash.
        let next = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| reader.next()));
        let batch = match next {
            Ok(None) => break,
            Ok(Some(batch)) => batch.map_err(|e| OutputError::new(path, e))?,
            Err(_) => return Err(OutputError::new(path, "a damaged Parquet file: a page of it cannot be decoded")),
        };
        let array = batch.column(0);
        if let Some(row) = (0..array.len()).find(|&i| array.is_null(i)) {
            return Err(OutputError::new(path, format!("column {name:?} row {} is null", rows + row + 1)));
        }
        rows = each(array)?;
    }
    Ok(())
}

/// A reader of column `name` alone, after checking that the column's pages declare at
/// most `limit` bytes once decompressed (a tiny file cannot make the reader allocate
/// gigabytes).
fn column_reader<R: parquet::file::reader::ChunkReader + 'static>(
    source: R,
    path: &Path,
    name: &str,
    limit: u64,
) -> Result<parquet::arrow::arrow_reader::ParquetRecordBatchReader> {
    use parquet::arrow::ProjectionMask;
    let builder = ParquetRecordBatchReaderBuilder::try_new(source)
        .map_err(|e| OutputError::new(path, format!("not a readable Parquet file: {e}")))?;
    let fields: Vec<String> = builder.schema().fields().iter().map(|f| f.name().clone()).collect();
    let Some(index) = fields.iter().position(|f| f == name) else {
        return Err(OutputError::new(path, format!("no column {name:?}; its columns: {}", fields.join(", "))));
    };
    let leaves: Vec<usize> = (0..builder.parquet_schema().num_columns())
        .filter(|&leaf| builder.parquet_schema().get_column_root_idx(leaf) == index)
        .collect();
    let declared: u64 = builder
        .metadata()
        .row_groups()
        .iter()
        .flat_map(|group| leaves.iter().map(move |&leaf| group.column(leaf).uncompressed_size().max(0) as u64))
        .fold(0u64, u64::saturating_add);
    if declared > limit {
        return Err(OutputError::new(
            path,
            format!("column {name:?} declares {declared} bytes uncompressed; inputs may be at most {limit} bytes"),
        ));
    }
    let mask = ProjectionMask::roots(builder.parquet_schema(), [index]);
    builder.with_projection(mask).build().map_err(|e| OutputError::new(path, format!("cannot read it: {e}")))
}

fn number_column_from<R: parquet::file::reader::ChunkReader + 'static>(
    source: R,
    path: &Path,
    name: &str,
    limit: u64,
) -> Result<Vec<f64>> {
    use arrow_array::cast::AsArray;
    use arrow_array::types::{
        Float32Type, Float64Type, Int16Type, Int32Type, Int64Type, Int8Type, UInt16Type, UInt32Type, UInt64Type,
        UInt8Type,
    };
    let reader = column_reader(source, path, name, limit)?;
    let mut out = Vec::new();
    for_each_array(reader, path, name, |array| {
        macro_rules! extend {
            ($type:ty) => {
                out.extend(array.as_primitive::<$type>().values().iter().map(|&v| v as f64))
            };
        }
        match array.data_type() {
            DataType::Float64 => extend!(Float64Type),
            DataType::Float32 => extend!(Float32Type),
            DataType::Int64 => extend!(Int64Type),
            DataType::Int32 => extend!(Int32Type),
            DataType::Int16 => extend!(Int16Type),
            DataType::Int8 => extend!(Int8Type),
            DataType::UInt64 => extend!(UInt64Type),
            DataType::UInt32 => extend!(UInt32Type),
            DataType::UInt16 => extend!(UInt16Type),
            DataType::UInt8 => extend!(UInt8Type),
            other => {
                return Err(OutputError::new(path, format!("column {name:?} has type {other}, not a number")));
            }
        }
        Ok(out.len())
    })?;
    Ok(out)
}

fn batch_columns(path: &Path, batch: &RecordBatch) -> Result<Vec<(String, ColumnValues)>> {
    let schema = batch.schema();
    let mut out = Vec::with_capacity(batch.num_columns());
    for (field, array) in schema.fields().iter().zip(batch.columns()) {
        fn values<A: Array + 'static>(array: &dyn Array) -> &A {
            array.as_any().downcast_ref::<A>().expect("the array matches its declared type")
        }
        let array = array.as_ref();
        let column = match field.data_type() {
            DataType::UInt32 => ColumnValues::U32(values::<UInt32Array>(array).values().to_vec()),
            DataType::UInt64 => ColumnValues::U64(values::<UInt64Array>(array).values().to_vec()),
            DataType::Int64 => ColumnValues::I64(values::<Int64Array>(array).iter().collect()),
            DataType::Float64 => {
                ColumnValues::F64(values::<Float64Array>(array).iter().map(|v| v.unwrap_or(f64::NAN)).collect())
            }
            DataType::Boolean => ColumnValues::Bool(values::<BooleanArray>(array).iter().collect()),
            DataType::Utf8 if array.null_count() > 0 => {
                ColumnValues::NullableUtf8(values::<StringArray>(array).iter().map(|s| s.map(str::to_string)).collect())
            }
            DataType::Utf8 => {
                ColumnValues::Utf8(values::<StringArray>(array).iter().map(|s| s.unwrap_or("").to_string()).collect())
            }
            DataType::Binary => {
                ColumnValues::Binary(values::<BinaryArray>(array).iter().map(|b| b.unwrap_or(&[]).to_vec()).collect())
            }
            other => {
                return Err(OutputError::new(
                    path,
                    format!("column {:?} has type {other}, which stampede never writes", field.name()),
                ))
            }
        };
        out.push((field.name().clone(), column));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::{ColumnSpec, ColumnType, TableWriter};

    /// An undefined value (NaN) is written as NULL — the Parquet column holds a null,
    /// not a NaN — and a table reads it back as NaN; the one-column reader of input
    /// samples refuses it, naming the row (a sample with a hole is not a sample).
    #[test]
    fn nan_is_written_as_null_and_read_back_as_nan() {
        let dir = std::env::temp_dir().join(format!("stampede-null-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut writer = TableWriter::create(&dir, "n.parquet", &[ColumnSpec::new("x", ColumnType::F64)]).unwrap();
        writer.write(vec![ColumnValues::F64(vec![1.5, f64::NAN, f64::INFINITY])]).unwrap();
        let path = writer.finish().unwrap().commit().unwrap();
        let file = File::open(&path).unwrap();
        let batch = ParquetRecordBatchReaderBuilder::try_new(file).unwrap().build().unwrap().next().unwrap().unwrap();
        assert_eq!(batch.column(0).null_count(), 1, "the NaN is a null in the file");
        let x = Table::read(&path).unwrap().numbers("x").unwrap();
        assert!(x[0] == 1.5 && x[1].is_nan() && x[2] == f64::INFINITY, "{x:?}");
        let bytes: std::sync::Arc<[u8]> = std::fs::read(&path).unwrap().into();
        let refused = number_column_of(bytes, &path, "x", u64::MAX).unwrap_err();
        assert!(refused.reason.contains("row 2 is null"), "{refused:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn reads_back_what_the_writer_wrote_across_row_groups() {
        let dir = std::env::temp_dir().join(format!("stampede-read-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let specs = [
            ColumnSpec::new("i", ColumnType::U32),
            ColumnSpec::new("x", ColumnType::F64),
            ColumnSpec::new("name", ColumnType::Utf8),
            ColumnSpec::new("blob", ColumnType::Binary),
        ];
        let mut writer = TableWriter::create(&dir, "t.parquet", &specs).unwrap();
        let n = crate::table::ROW_GROUP_ROWS + 7;
        let i: Vec<u32> = (0..n as u32).collect();
        let x: Vec<f64> = i.iter().map(|&v| v as f64 * 0.5).collect();
        let name: Vec<String> = i.iter().map(|v| format!("n{v}")).collect();
        let blob: Vec<Vec<u8>> = i.iter().map(|&v| vec![v as u8; 3]).collect();
        writer
            .write(vec![
                ColumnValues::U32(i.clone()),
                ColumnValues::F64(x.clone()),
                ColumnValues::Utf8(name.clone()),
                ColumnValues::Binary(blob.clone()),
            ])
            .unwrap();
        let path = writer.finish().unwrap().commit().unwrap();
        let table = Table::read(&path).unwrap();
        assert_eq!(table.rows(), n);
        assert_eq!(table.numbers("i").unwrap(), i.iter().map(|&v| v as f64).collect::<Vec<_>>());
        assert_eq!(table.numbers("x").unwrap(), x);
        assert_eq!(table.strings("name").unwrap(), name.as_slice());
        assert_eq!(table.binaries("blob").unwrap(), blob.as_slice());
        assert!(table.numbers("name").unwrap_err().reason.contains("not a number"));
        assert!(table.column("missing").unwrap_err().reason.contains("no column \"missing\""));
        // Any range, across the row-group boundary, of some columns.
        assert_eq!(Table::row_count(&path).unwrap(), n);
        for range in [0..0, 0..1, 5..2_050, crate::table::ROW_GROUP_ROWS..n, n - 1..n] {
            let part = Table::read_rows(&path, &["x", "blob"], range.clone()).unwrap();
            assert_eq!(part.columns.len(), 2);
            assert_eq!(part.numbers("x").unwrap(), x[range.clone()], "{range:?}");
            assert_eq!(part.binaries("blob").unwrap(), &blob[range]);
        }
        assert!(Table::read_rows(&path, &[], 0..n + 1).is_err(), "past the end");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_number_column_of_any_width_reads_as_f64_and_a_missing_one_lists_the_others() {
        let dir = std::env::temp_dir().join(format!("stampede-column-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let specs = [ColumnSpec::new("count", ColumnType::U64), ColumnSpec::new("latency_s", ColumnType::F64)];
        let mut writer = TableWriter::create(&dir, "c.parquet", &specs).unwrap();
        writer.write(vec![ColumnValues::U64(vec![1, 2, 3]), ColumnValues::F64(vec![0.5, 0.25, 0.125])]).unwrap();
        let path = writer.finish().unwrap().commit().unwrap();
        assert_eq!(number_column(&path, "latency_s").unwrap(), [0.5, 0.25, 0.125]);
        assert_eq!(number_column(&path, "count").unwrap(), [1.0, 2.0, 3.0]);
        let error = number_column(&path, "p99").unwrap_err();
        assert!(error.reason.contains("no column \"p99\"; its columns: count, latency_s"), "{error}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_file_that_is_not_parquet_is_an_error_naming_it() {
        let path = std::env::temp_dir().join(format!("stampede-notparquet-{}", std::process::id()));
        std::fs::write(&path, b"hello").unwrap();
        let error = Table::read(&path).unwrap_err();
        assert!(error.reason.contains("not a readable Parquet file"), "{error}");
        std::fs::remove_file(&path).unwrap();
    }
}
