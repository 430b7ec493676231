//! Files that appear whole or not at all.
//!
//! A [`StagedFile`] is written under a hidden temporary name in its final folder
//! (same filesystem, so the final `rename` is atomic) and removed again if dropped
//! before it is committed. A [`StagedSet`] commits several files together, after all
//! of them were written: a run that fails half way leaves the previous output intact
//! and no temporary files behind.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::{OutputError, Result};

/// A file being written under a temporary name.
#[derive(Debug)]
pub struct StagedFile {
    temporary: PathBuf,
    destination: PathBuf,
    committed: bool,
}

impl StagedFile {
    /// Creates `dir/.name.tmp-PID` for writing; commits to `dir/name`.
    pub fn create(dir: &Path, name: &str) -> Result<(StagedFile, File)> {
        let temporary = dir.join(format!(".{name}.tmp-{}", std::process::id()));
        let destination = dir.join(name);
        let file = File::create(&temporary).map_err(|e| OutputError::new(&temporary, e))?;
        Ok((StagedFile { temporary, destination, committed: false }, file))
    }

    /// Writes `bytes` as a whole staged file.
    pub fn with_contents(dir: &Path, name: &str, bytes: &[u8]) -> Result<StagedFile> {
        let (staged, mut file) = Self::create(dir, name)?;
        file.write_all(bytes).and_then(|()| file.sync_all()).map_err(|e| OutputError::new(&staged.temporary, e))?;
        Ok(staged)
    }

    /// The path the file will have once committed.
    pub fn destination(&self) -> &Path {
        &self.destination
    }

    /// Renames the file into place.
    pub fn commit(mut self) -> Result<PathBuf> {
        fs::rename(&self.temporary, &self.destination).map_err(|e| OutputError::new(&self.destination, e))?;
        self.committed = true;
        Ok(self.destination.clone())
    }
}

impl Drop for StagedFile {
    fn drop(&mut self) {
        if !self.committed {
            let _ = fs::remove_file(&self.temporary);
        }
    }
}

/// Staged files committed together.
#[derive(Debug, Default)]
pub struct StagedSet {
    files: Vec<StagedFile>,
}

impl StagedSet {
    /// Adds a fully written file.
    pub fn push(&mut self, file: StagedFile) {
        self.files.push(file);
    }

    /// Where the staged file that will become `name` is being written (its temporary
    /// path), to read it back before it is committed.
    pub fn staged_path(&self, name: &str) -> Option<&Path> {
        self.files.iter().find(|f| f.destination.file_name().is_some_and(|n| n == name)).map(|f| f.temporary.as_path())
    }

    /// Renames every file into place, in the order added. Returns the final paths.
    pub fn commit(self) -> Result<Vec<PathBuf>> {
        self.files.into_iter().map(StagedFile::commit).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("stampede-atomic-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn dropped_files_leave_nothing_and_committed_files_replace_old_ones() {
        let dir = scratch("commit");
        fs::write(dir.join("a.txt"), "old").unwrap();
        let staged = StagedFile::with_contents(&dir, "a.txt", b"new").unwrap();
        assert_eq!(fs::read_to_string(dir.join("a.txt")).unwrap(), "old", "not visible before commit");
        let abandoned = StagedFile::with_contents(&dir, "b.txt", b"half").unwrap();
        drop(abandoned);
        let mut set = StagedSet::default();
        set.push(staged);
        set.commit().unwrap();
        assert_eq!(fs::read_to_string(dir.join("a.txt")).unwrap(), "new");
        let names: Vec<_> = fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, vec![std::ffi::OsString::from("a.txt")]);
        fs::remove_dir_all(dir).unwrap();
    }
}
