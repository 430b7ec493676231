//! Parquet tables written column-wise from plain vectors.
//!
//! Every file is zstd-compressed and cut into row groups of a fixed number of rows,
//! so a writer's memory is bounded by one row group whatever the table's length,
//! and the bytes depend only on the rows, never on how they were batched.

use std::fs::File;
use std::io::BufWriter;
use std::path::Path;
use std::sync::Arc;

use arrow_array::{
    ArrayRef, BinaryArray, BooleanArray, Float64Array, Int64Array, RecordBatch, StringArray, UInt32Array, UInt64Array,
};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::schema::types::ColumnPath;

use crate::atomic::StagedFile;
use crate::{OutputError, Result};

/// Rows per Parquet row group at most: DuckDB's own default, so a reader's threads
/// each take a group. A writer holds the group in progress (its pages compressed as
/// they fill) and about 10 KB of footer metadata per finished group until the file is
/// closed. Measured on one-second `mmc` runs (peak RSS, 2 threads): with 2,048-row
/// groups 100,000 replicas peaked at 20.8 MB and 1,000,000 at 48.4 MB (the finished
/// groups' metadata growing with the rows); with 122,880-row groups 32.6 MB and
/// 35.4 MB (+9%), flat; 65,536-row groups gave 29.6 and 33.1 MB (+12%).
pub const ROW_GROUP_ROWS: usize = 122_880;

/// Bytes per row group at most (the writer's estimate of the encoded group): a wide
/// table — hundreds of metric columns — is cut into groups of fewer rows, so the group
/// in progress stays bounded in memory whatever the width.
pub const ROW_GROUP_MAX_BYTES: usize = 16 << 20;

/// A column's type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ColumnType {
    U32,
    U64,
    I64,
    F64,
    Bool,
    Utf8,
    Binary,
}

impl ColumnType {
    fn arrow(self) -> DataType {
        match self {
            ColumnType::U32 => DataType::UInt32,
            ColumnType::U64 => DataType::UInt64,
            ColumnType::I64 => DataType::Int64,
            ColumnType::F64 => DataType::Float64,
            ColumnType::Bool => DataType::Boolean,
            ColumnType::Utf8 => DataType::Utf8,
            ColumnType::Binary => DataType::Binary,
        }
    }
}

/// A column's name and type, and whether it may hold NULL. Numbers (float64) always
/// may: an undefined value is NULL. Other columns only when made with
/// [`ColumnSpec::nullable`] (a grid-axis field a point does not set).
#[derive(Clone, Debug, PartialEq)]
pub struct ColumnSpec {
    pub name: String,
    pub kind: ColumnType,
    pub nullable: bool,
}

impl ColumnSpec {
    pub fn new(name: impl Into<String>, kind: ColumnType) -> Self {
        ColumnSpec { name: name.into(), kind, nullable: kind == ColumnType::F64 }
    }

    /// A column that may hold NULL whatever its type.
    pub fn nullable(name: impl Into<String>, kind: ColumnType) -> Self {
        ColumnSpec { name: name.into(), kind, nullable: true }
    }
}

/// The values of one column for a batch of rows. `None` is NULL (only in a column
/// whose [`ColumnSpec`] is nullable); in a float64 column NULL is NaN.
#[derive(Clone, Debug, PartialEq)]
pub enum ColumnValues {
    U32(Vec<u32>),
    U64(Vec<u64>),
    I64(Vec<Option<i64>>),
    F64(Vec<f64>),
    Bool(Vec<Option<bool>>),
    Utf8(Vec<String>),
    /// Text with NULLs (type [`ColumnType::Utf8`]); a table read back holds this for
    /// a text column only when it has a NULL.
    NullableUtf8(Vec<Option<String>>),
    Binary(Vec<Vec<u8>>),
}

/// Applies `$body` to the vector inside any [`ColumnValues`] variant.
macro_rules! each_variant {
    ($value:expr, $v:ident => $body:expr) => {
        match $value {
            ColumnValues::U32($v) => $body,
            ColumnValues::U64($v) => $body,
            ColumnValues::I64($v) => $body,
            ColumnValues::F64($v) => $body,
            ColumnValues::Bool($v) => $body,
            ColumnValues::Utf8($v) => $body,
            ColumnValues::NullableUtf8($v) => $body,
            ColumnValues::Binary($v) => $body,
        }
    };
}

/// The same variant as `$value`, holding `$body` made from the vector inside it.
macro_rules! map_variant {
    ($value:expr, $v:ident => $body:expr) => {
        match $value {
            ColumnValues::U32($v) => ColumnValues::U32($body),
            ColumnValues::U64($v) => ColumnValues::U64($body),
            ColumnValues::I64($v) => ColumnValues::I64($body),
            ColumnValues::F64($v) => ColumnValues::F64($body),
            ColumnValues::Bool($v) => ColumnValues::Bool($body),
            ColumnValues::Utf8($v) => ColumnValues::Utf8($body),
            ColumnValues::NullableUtf8($v) => ColumnValues::NullableUtf8($body),
            ColumnValues::Binary($v) => ColumnValues::Binary($body),
        }
    };
}

impl ColumnValues {
    pub fn len(&self) -> usize {
        each_variant!(self, v => v.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The values at `rows`, in that order.
    pub fn pick(&self, rows: &[usize]) -> ColumnValues {
        fn at<T: Clone>(values: &[T], rows: &[usize]) -> Vec<T> {
            rows.iter().map(|&r| values[r].clone()).collect()
        }
        map_variant!(self, v => at(v, rows))
    }

    /// Moves `other`'s values to the end of `self` (same variant).
    pub fn append(&mut self, other: ColumnValues) {
        // Text read back in row groups is nullable only in the groups that hold a NULL.
        if let (ColumnValues::Utf8(a), ColumnValues::NullableUtf8(_)) = (&mut *self, &other) {
            *self = ColumnValues::NullableUtf8(std::mem::take(a).into_iter().map(Some).collect());
        }
        let other = match other {
            ColumnValues::Utf8(b) if matches!(self, ColumnValues::NullableUtf8(_)) => {
                ColumnValues::NullableUtf8(b.into_iter().map(Some).collect())
            }
            other => other,
        };
        match (self, other) {
            (ColumnValues::U32(a), ColumnValues::U32(b)) => a.extend(b),
            (ColumnValues::U64(a), ColumnValues::U64(b)) => a.extend(b),
            (ColumnValues::I64(a), ColumnValues::I64(b)) => a.extend(b),
            (ColumnValues::F64(a), ColumnValues::F64(b)) => a.extend(b),
            (ColumnValues::Bool(a), ColumnValues::Bool(b)) => a.extend(b),
            (ColumnValues::Utf8(a), ColumnValues::Utf8(b)) => a.extend(b),
            (ColumnValues::NullableUtf8(a), ColumnValues::NullableUtf8(b)) => a.extend(b),
            (ColumnValues::Binary(a), ColumnValues::Binary(b)) => a.extend(b),
            (a, b) => panic!("appending {:?} values to a {:?} column", b.kind(), a.kind()),
        }
    }

    /// The values in chunks of `rows` (the last may be shorter), in one pass.
    fn chunks(self, rows: usize) -> Vec<ColumnValues> {
        fn split<T>(v: Vec<T>, rows: usize, wrap: fn(Vec<T>) -> ColumnValues) -> Vec<ColumnValues> {
            let mut out = Vec::with_capacity(v.len().div_ceil(rows));
            let mut values = v.into_iter();
            loop {
                let chunk: Vec<T> = values.by_ref().take(rows).collect();
                if chunk.is_empty() {
                    return out;
                }
                out.push(wrap(chunk));
            }
        }
        match self {
            ColumnValues::U32(v) => split(v, rows, ColumnValues::U32),
            ColumnValues::U64(v) => split(v, rows, ColumnValues::U64),
            ColumnValues::I64(v) => split(v, rows, ColumnValues::I64),
            ColumnValues::F64(v) => split(v, rows, ColumnValues::F64),
            ColumnValues::Bool(v) => split(v, rows, ColumnValues::Bool),
            ColumnValues::Utf8(v) => split(v, rows, ColumnValues::Utf8),
            ColumnValues::NullableUtf8(v) => split(v, rows, ColumnValues::NullableUtf8),
            ColumnValues::Binary(v) => split(v, rows, ColumnValues::Binary),
        }
    }

    /// Splits off the first `rows` values, leaving the rest in `self`.
    fn take_front(&mut self, rows: usize) -> ColumnValues {
        fn split<T>(v: &mut Vec<T>, rows: usize) -> Vec<T> {
            let tail = v.split_off(rows);
            std::mem::replace(v, tail)
        }
        map_variant!(self, v => split(v, rows))
    }

    pub fn kind(&self) -> ColumnType {
        match self {
            ColumnValues::U32(_) => ColumnType::U32,
            ColumnValues::U64(_) => ColumnType::U64,
            ColumnValues::I64(_) => ColumnType::I64,
            ColumnValues::F64(_) => ColumnType::F64,
            ColumnValues::Bool(_) => ColumnType::Bool,
            ColumnValues::Utf8(_) | ColumnValues::NullableUtf8(_) => ColumnType::Utf8,
            ColumnValues::Binary(_) => ColumnType::Binary,
        }
    }

    fn into_array(self) -> ArrayRef {
        match self {
            ColumnValues::U32(v) => Arc::new(UInt32Array::from(v)),
            ColumnValues::U64(v) => Arc::new(UInt64Array::from(v)),
            ColumnValues::I64(v) => Arc::new(Int64Array::from(v)),
            // An undefined value (NaN) is written as NULL: `IS NULL` finds it and SQL's
            // aggregates skip it, where a NaN would make `avg()` NaN.
            ColumnValues::F64(v) => {
                Arc::new(v.into_iter().map(|x| (!x.is_nan()).then_some(x)).collect::<Float64Array>())
            }
            ColumnValues::Bool(v) => Arc::new(BooleanArray::from(v)),
            ColumnValues::Utf8(v) => Arc::new(StringArray::from(v)),
            ColumnValues::NullableUtf8(v) => Arc::new(StringArray::from(v)),
            ColumnValues::Binary(v) => Arc::new(BinaryArray::from_iter_values(v)),
        }
    }
}

/// Rows handed to the Parquet writer at a time. Writes are buffered to exact
/// multiples of this (the writer's own mini-batch size, which divides
/// [`ROW_GROUP_ROWS`]), so page boundaries — and the file's bytes — never depend on
/// how the caller batched its rows: a table streamed one grid point at a time equals
/// the same table written at once.
const WRITE_BATCH_ROWS: usize = 1024;

/// Tables of more columns than this are compressed with LZ4 instead of zstd (see
/// [`TableWriter::create`]): above every built-in scenario's widest table (about 1,500
/// columns), so their files' bytes stay as they were.
pub const ZSTD_MAX_COLUMNS: usize = 2_048;

/// A Parquet file being written, staged until [`TableWriter::finish`].
pub struct TableWriter {
    staged: StagedFile,
    schema: SchemaRef,
    writer: ArrowWriter<BufWriter<File>>,
    /// Rows not yet handed to the writer (fewer than [`WRITE_BATCH_ROWS`] between calls).
    pending: Vec<ColumnValues>,
}

impl TableWriter {
    /// Starts `dir/name` with the given columns, zstd-compressed (LZ4 above
    /// [`ZSTD_MAX_COLUMNS`] columns).
    pub fn create(dir: &Path, name: &str, columns: &[ColumnSpec]) -> Result<TableWriter> {
        Self::create_with(dir, name, columns, true, false)
    }

    /// Starts a long table (see [`crate::long`]): zstd, and its text columns (the name
    /// of each row's metric or series, repeated row after row) dictionary-encoded.
    pub fn create_long(dir: &Path, name: &str, columns: &[ColumnSpec]) -> Result<TableWriter> {
        Self::create_with(dir, name, columns, true, true)
    }

    /// Starts a scratch table (a checkpoint piece, read back once): uncompressed, since
    /// creating a zstd context per column chunk costs more than it saves on wide, short
    /// tables.
    pub fn create_scratch(dir: &Path, name: &str, columns: &[ColumnSpec]) -> Result<TableWriter> {
        Self::create_with(dir, name, columns, false, false)
    }

    fn create_with(
        dir: &Path,
        name: &str,
        columns: &[ColumnSpec],
        compressed: bool,
        text_dictionary: bool,
    ) -> Result<TableWriter> {
        let fields: Vec<Field> = columns.iter().map(|c| Field::new(&c.name, c.kind.arrow(), c.nullable)).collect();
        let schema = Arc::new(Schema::new(fields));
        let (staged, file) = StagedFile::create(dir, name)?;
        let properties = WriterProperties::builder()
            .set_compression(match compressed {
                true if columns.len() <= ZSTD_MAX_COLUMNS => {
                    Compression::ZSTD(ZstdLevel::try_new(3).expect("valid level"))
                }
                // parquet's zstd codec holds a compression and a decompression context
                // per column (about 200 KB): 2 GB for the summary of a 100-service
                // graph. LZ4's block codec holds none.
                true => Compression::LZ4_RAW,
                false => Compression::UNCOMPRESSED,
            })
            .set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
            .set_max_row_group_bytes(Some(ROW_GROUP_MAX_BYTES))
            // Metric values are nearly all distinct: a dictionary would only hold up
            // to 1 MB per column in memory before falling back to plain encoding.
            .set_dictionary_enabled(false)
            // Row-group statistics only: page-level indexes stay in memory until the
            // footer is written and would grow with the number of replicas.
            .set_statistics_enabled(EnabledStatistics::Chunk)
            // Small pages are compressed as they fill, so a row group in progress is
            // held mostly compressed.
            .set_data_page_size_limit(64 * 1024)
            .set_created_by(format!("stampede {}", env!("CARGO_PKG_VERSION")));
        let properties = columns
            .iter()
            .filter(|c| text_dictionary && c.kind == ColumnType::Utf8)
            .fold(properties, |p, c| p.set_column_dictionary_enabled(ColumnPath::from(c.name.as_str()), true))
            .build();
        let writer = ArrowWriter::try_new(BufWriter::new(file), schema.clone(), Some(properties))
            .map_err(|e| OutputError::new(staged.destination(), e))?;
        Ok(TableWriter { staged, schema, writer, pending: Vec::new() })
    }

    /// Appends rows, one vector per column in schema order, all of equal length.
    pub fn write(&mut self, columns: Vec<ColumnValues>) -> Result<()> {
        assert_eq!(columns.len(), self.schema.fields().len(), "column count");
        for (values, field) in columns.iter().zip(self.schema.fields()) {
            assert_eq!(values.kind().arrow(), *field.data_type(), "column {} has the wrong type", field.name());
        }
        if self.pending.is_empty() {
            self.pending = columns;
        } else {
            self.pending.iter_mut().zip(columns).for_each(|(pending, more)| pending.append(more));
        }
        let full = self.pending.first().map_or(0, ColumnValues::len) / WRITE_BATCH_ROWS * WRITE_BATCH_ROWS;
        if full == 0 {
            return Ok(());
        }
        // Whole batches off the front in one pass (taking them one by one would move
        // the rest each time: quadratic in a long table's million rows).
        let mut chunked: Vec<std::vec::IntoIter<ColumnValues>> =
            self.pending.iter_mut().map(|c| c.take_front(full).chunks(WRITE_BATCH_ROWS).into_iter()).collect();
        for _ in 0..full / WRITE_BATCH_ROWS {
            let batch = chunked.iter_mut().map(|c| c.next().expect("one chunk per batch")).collect();
            self.write_batch(batch)?;
        }
        Ok(())
    }

    fn write_batch(&mut self, columns: Vec<ColumnValues>) -> Result<()> {
        let arrays: Vec<ArrayRef> = columns.into_iter().map(ColumnValues::into_array).collect();
        let batch = RecordBatch::try_new(self.schema.clone(), arrays)
            .map_err(|e| OutputError::new(self.staged.destination(), e))?;
        self.writer.write(&batch).map_err(|e| OutputError::new(self.staged.destination(), e))
    }

    /// Writes the footer and returns the staged file, ready to commit.
    pub fn finish(mut self) -> Result<StagedFile> {
        let rest = std::mem::take(&mut self.pending);
        if rest.first().is_some_and(|c| !c.is_empty()) {
            self.write_batch(rest)?;
        }
        let destination = self.staged.destination().to_path_buf();
        let buffered = self.writer.into_inner().map_err(|e| OutputError::new(&destination, e))?;
        let file = buffered.into_inner().map_err(|e| OutputError::new(&destination, e.error().to_string()))?;
        file.sync_all().map_err(|e| OutputError::new(&destination, e))?;
        Ok(self.staged)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batching_does_not_change_the_bytes() {
        let dir = std::env::temp_dir().join(format!("stampede-table-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let specs = [ColumnSpec::new("i", ColumnType::U32), ColumnSpec::new("x", ColumnType::F64)];
        let rows: Vec<u32> = (0..20_000).collect();
        let write = |name: &str, batch: usize| {
            let mut table = TableWriter::create(&dir, name, &specs).unwrap();
            for chunk in rows.chunks(batch) {
                let x = chunk.iter().map(|&i| i as f64 * 0.5).collect();
                table.write(vec![ColumnValues::U32(chunk.to_vec()), ColumnValues::F64(x)]).unwrap();
            }
            let path = table.finish().unwrap().commit().unwrap();
            std::fs::read(path).unwrap()
        };
        let one = write("one.parquet", 20_000);
        let many = write("many.parquet", 777);
        assert_eq!(one, many);
        assert_eq!(&one[..4], b"PAR1");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
