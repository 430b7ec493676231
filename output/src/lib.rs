//! stampede's output: Parquet tables, serialised HdrHistograms, the JSON manifest,
//! HTML escaping, and the staging that makes every file appear atomically.
//!
//! Nothing here knows about scenarios or models; the experiments crate decides
//! which columns a table has and this crate writes them.

pub mod atomic;
pub mod folder;
pub mod hdr;
pub mod long;
pub mod markup;
pub mod read;
pub mod table;

use std::fmt;
use std::path::PathBuf;

pub use atomic::{remove_marked_parts, StagedFile, StagedSet};
pub use folder::{check_replaceable, foreign_entries, FolderLock, LockError, Replace, StagedFolder};
pub use long::{pivot, Melt};
pub use read::Table;
pub use table::{ColumnSpec, ColumnType, ColumnValues, TableWriter};

/// An output failure: which file, and why.
#[derive(Debug)]
pub struct OutputError {
    /// The file (or folder) involved.
    pub path: PathBuf,
    /// What went wrong, in words.
    pub reason: String,
    /// Whether the file system failed or something was in the way.
    pub kind: OutputErrorKind,
}

/// What kind of output failure: the caller maps it to an exit code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputErrorKind {
    /// Reading or writing failed.
    Io,
    /// The destination folder holds something stampede did not write: nothing was
    /// replaced (`--force` would replace it). The user's choice of folder is wrong, not the disk.
    Foreign,
    /// A file (or link) is where a folder goes: never replaced.
    NotAFolder,
}

impl OutputError {
    pub(crate) fn new(path: impl Into<PathBuf>, reason: impl fmt::Display) -> Self {
        OutputError { path: path.into(), reason: reason.to_string(), kind: OutputErrorKind::Io }
    }

    pub(crate) fn in_the_way(path: impl Into<PathBuf>, kind: OutputErrorKind, reason: impl fmt::Display) -> Self {
        OutputError { path: path.into(), reason: reason.to_string(), kind }
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
