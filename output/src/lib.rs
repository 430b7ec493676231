//! stampede's output: Parquet tables, serialised HdrHistograms, the JSON manifest,
//! and the staging that makes every file appear atomically.
//!
//! Nothing here knows about scenarios or models; the experiments crate decides
//! which columns a table has and this crate writes them.

pub mod atomic;
pub mod folder;
pub mod hdr;
pub mod read;
pub mod table;

use std::fmt;
use std::path::PathBuf;

pub use atomic::{StagedFile, StagedSet};
pub use folder::{FolderLock, LockError, StagedFolder};
pub use read::Table;
pub use table::{ColumnSpec, ColumnType, ColumnValues, TableWriter};

/// An output failure: which file, and why.
#[derive(Debug)]
pub struct OutputError {
    /// The file (or folder) involved.
    pub path: PathBuf,
    /// What went wrong, in words.
    pub reason: String,
}

impl OutputError {
    pub(crate) fn new(path: impl Into<PathBuf>, reason: impl fmt::Display) -> Self {
        OutputError { path: path.into(), reason: reason.to_string() }
    }
}

impl fmt::Display for OutputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.reason)
    }
}

impl std::error::Error for OutputError {}

/// Result alias of this crate.
pub type Result<T> = std::result::Result<T, OutputError>;

/// Free bytes on the filesystem holding `path`, where the system reports them.
pub fn free_space(path: &std::path::Path) -> Option<u64> {
    folder::free_space(path)
}
