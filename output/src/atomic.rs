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

/// Removes `dir`, a folder of parts each of which counts as finished while it holds
/// `marker` (a checkpoint's `piece-*/piece.json`, an optimizer's `round-*/round.json`):
/// every part's marker goes first, then the rest. `remove_dir_all` alone deletes in
/// directory order, so a process killed while removing could leave a marker beside
/// deleted data — a part that looks finished and is not; this way a killed removal
/// leaves only unmarked parts, which a resume runs again.
pub fn remove_marked_parts(dir: &Path, marker: &str) -> std::io::Result<()> {
    for entry in fs::read_dir(dir)? {
        let path = entry?.path().join(marker);
        if path.is_file() {
            fs::remove_file(&path)?;
        }
    }
    let own = dir.join(marker);
    if own.is_file() {
        fs::remove_file(&own)?;
    }
    fs::remove_dir_all(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_of_marked_parts_loses_its_markers_first() {
        let dir = scratch("marked");
        for part in ["piece-0", "piece-1"] {
            fs::create_dir_all(dir.join(part)).unwrap();
            fs::write(dir.join(part).join("data.parquet"), "rows").unwrap();
            fs::write(dir.join(part).join("piece.json"), "{}").unwrap();
        }
        fs::write(dir.join("checkpoint.json"), "{}").unwrap();
        remove_marked_parts(&dir, "piece.json").unwrap();
        assert!(!dir.exists());
        // A part being removed is never a finished part: its marker is gone before its data.
        let part = scratch("marked-one");
        fs::write(part.join("round.json"), "{}").unwrap();
        fs::write(part.join("replicas.parquet"), "rows").unwrap();
        remove_marked_parts(&part, "round.json").unwrap();
        assert!(!part.exists());
    }

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
