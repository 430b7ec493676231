//! An output folder that appears whole or not at all.
//!
//! A run writes every file into a hidden staging folder beside its destination
//! (`OUT/.NAME.staging-PID`, same filesystem) and, once all are complete, swaps it
//! in with one atomic rename: on Linux `renameat2(RENAME_EXCHANGE)` exchanges the new
//! folder with the previous one, which is then deleted; without a previous folder a
//! plain `rename` moves it in. A reader therefore sees the previous run or the new
//! one, never a mix, and nothing of the previous run survives beside the new files.
//!
//! For the run's whole duration it holds an advisory lock (`flock`) on
//! `OUT/.NAME.lock`, so a second run into the same folder is refused with the other
//! run's process id. Holding the lock also makes cleaning safe: staging folders left by
//! runs that were killed (SIGKILL, power loss) are removed when the next run starts.

use std::fs::{self, File, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

use crate::{OutputError, Result};

/// The exclusive right to write `OUT/NAME`, released when dropped.
#[derive(Debug)]
pub struct FolderLock {
    _file: File,
}

/// A run's output folder while it is being written.
#[derive(Debug)]
pub struct StagedFolder {
    staging: PathBuf,
    destination: PathBuf,
    committed: bool,
    // Dropped after the staging folder is removed (fields drop in order).
    _lock: FolderLock,
}

/// Why a folder could not be locked.
#[derive(Debug)]
pub enum LockError {
    /// Another process holds it; its process id, if it wrote one.
    Busy(Option<u32>),
    Io(OutputError),
}

impl FolderLock {
    /// Locks `root/NAME`, creating `root` if needed; refuses at once if another
    /// process holds the lock.
    pub fn acquire(root: &Path, name: &str) -> std::result::Result<FolderLock, LockError> {
        fs::create_dir_all(root).map_err(|e| LockError::Io(OutputError::new(root, e)))?;
        let path = root.join(format!(".{name}.lock"));
        let mut file = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| LockError::Io(OutputError::new(&path, e)))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let mut text = String::new();
                let _ = file.read_to_string(&mut text);
                return Err(LockError::Busy(text.trim().parse().ok()));
            }
            Err(TryLockError::Error(e)) => return Err(LockError::Io(OutputError::new(&path, e))),
        }
        // Who holds it, for the message a second run prints.
        let _ = file.set_len(0).and_then(|()| file.rewind()).and_then(|()| write!(file, "{}", std::process::id()));
        Ok(FolderLock { _file: file })
    }
}

impl StagedFolder {
    /// Starts writing `root/NAME` under `lock`: removes what killed runs left behind
    /// and creates a fresh staging folder.
    pub fn begin(root: &Path, name: &str, lock: FolderLock) -> Result<StagedFolder> {
        remove_stale(root, name);
        let staging = root.join(format!(".{name}.staging-{}", std::process::id()));
        let _ = fs::remove_dir_all(&staging);
        fs::create_dir(&staging).map_err(|e| OutputError::new(&staging, e))?;
        Ok(StagedFolder { staging, destination: root.join(name), committed: false, _lock: lock })
    }

    /// Where the files are written until [`Self::commit`].
    pub fn path(&self) -> &Path {
        &self.staging
    }

    /// The folder the files will be in.
    pub fn destination(&self) -> &Path {
        &self.destination
    }

    /// Swaps the staging folder in, atomically, and deletes the previous output.
    pub fn commit(mut self) -> Result<PathBuf> {
        let destination = self.destination.clone();
        match fs::symlink_metadata(&destination) {
            Err(_) => fs::rename(&self.staging, &destination).map_err(|e| OutputError::new(&destination, e))?,
            Ok(meta) if !meta.is_dir() => {
                return Err(OutputError::new(&destination, "exists and is not a folder; nothing was replaced"));
            }
            Ok(_) => {
                exchange(&self.staging, &destination).map_err(|e| OutputError::new(&destination, e))?;
                // The staging path now holds the previous run's files.
                let _ = fs::remove_dir_all(&self.staging);
            }
        }
        self.committed = true;
        Ok(destination)
    }
}

impl Drop for StagedFolder {
    fn drop(&mut self) {
        if !self.committed {
            let _ = fs::remove_dir_all(&self.staging);
        }
    }
}

/// Removes `root/.NAME.staging-*` folders: under the lock, none belongs to a live run.
fn remove_stale(root: &Path, name: &str) {
    let prefix = format!(".{name}.staging-");
    let Ok(entries) = fs::read_dir(root) else { return };
    for entry in entries.flatten() {
        if entry.file_name().to_string_lossy().starts_with(&prefix) {
            let _ = fs::remove_dir_all(entry.path());
        }
    }
}

/// Free bytes on the filesystem holding `path` (`statvfs`).
#[cfg(unix)]
pub(crate) fn free_space(path: &Path) -> Option<u64> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let path = CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: `stats` is a plain C struct that statvfs fills; `path` is a valid
    // NUL-terminated string that outlives the call.
    let mut stats: libc::statvfs = unsafe { std::mem::zeroed() };
    let status = unsafe { libc::statvfs(path.as_ptr(), &mut stats) };
    (status == 0).then(|| stats.f_bavail as u64 * stats.f_frsize as u64)
}

#[cfg(not(unix))]
pub(crate) fn free_space(_path: &Path) -> Option<u64> {
    None
}

/// Exchanges two folders atomically.
#[cfg(target_os = "linux")]
fn exchange(a: &Path, b: &Path) -> std::io::Result<()> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let a = CString::new(a.as_os_str().as_bytes()).map_err(std::io::Error::other)?;
    let b = CString::new(b.as_os_str().as_bytes()).map_err(std::io::Error::other)?;
    // SAFETY: both paths are valid NUL-terminated strings that outlive the call;
    // renameat2 reads them and touches no other memory.
    let status =
        unsafe { libc::renameat2(libc::AT_FDCWD, a.as_ptr(), libc::AT_FDCWD, b.as_ptr(), libc::RENAME_EXCHANGE) };
    if status == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Without an atomic exchange: move the previous folder aside, then the new one in.
/// A reader may briefly find no folder, but never a mix.
#[cfg(not(target_os = "linux"))]
fn exchange(staging: &Path, destination: &Path) -> std::io::Result<()> {
    let aside = staging.with_extension("previous");
    fs::rename(destination, &aside)?;
    if let Err(e) = fs::rename(staging, destination) {
        let _ = fs::rename(&aside, destination);
        return Err(e);
    }
    fs::rename(&aside, staging)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("stampede-folder-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> =
            fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        names
    }

    #[test]
    fn a_commit_replaces_the_whole_folder_and_leaves_nothing_else() {
        let root = scratch("commit");
        fs::create_dir(root.join("run")).unwrap();
        fs::write(root.join("run/old-only.txt"), "old").unwrap();
        fs::write(root.join("run/both.txt"), "old").unwrap();
        let staged = StagedFolder::begin(&root, "run", FolderLock::acquire(&root, "run").unwrap()).unwrap();
        fs::write(staged.path().join("both.txt"), "new").unwrap();
        assert_eq!(fs::read_to_string(root.join("run/both.txt")).unwrap(), "old", "not visible before commit");
        staged.commit().unwrap();
        assert_eq!(names(&root.join("run")), ["both.txt"], "nothing of the previous run survives");
        assert_eq!(fs::read_to_string(root.join("run/both.txt")).unwrap(), "new");
        assert_eq!(names(&root), [".run.lock", "run"]);
        fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn a_second_writer_is_refused_and_a_dropped_run_leaves_nothing() {
        let root = scratch("lock");
        let lock = FolderLock::acquire(&root, "run").unwrap();
        match FolderLock::acquire(&root, "run") {
            Err(LockError::Busy(pid)) => assert_eq!(pid, Some(std::process::id())),
            other => panic!("expected a busy lock, got {other:?}"),
        }
        assert!(FolderLock::acquire(&root, "other").is_ok(), "locks are per folder");
        let staged = StagedFolder::begin(&root, "run", lock).unwrap();
        fs::write(staged.path().join("half.parquet"), "half").unwrap();
        drop(staged);
        assert_eq!(names(&root), [".other.lock", ".run.lock"]);
        assert!(FolderLock::acquire(&root, "run").is_ok(), "dropping releases the lock");
        fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn a_killed_runs_staging_is_removed_by_the_next_run() {
        let root = scratch("stale");
        fs::create_dir(root.join(".run.staging-999999")).unwrap();
        fs::write(root.join(".run.staging-999999/replicas.parquet"), "litter").unwrap();
        let staged = StagedFolder::begin(&root, "run", FolderLock::acquire(&root, "run").unwrap()).unwrap();
        staged.commit().unwrap();
        assert_eq!(names(&root), [".run.lock", "run"]);
        fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn a_file_in_the_way_is_an_error_and_stays() {
        let root = scratch("file");
        fs::write(root.join("run"), "not a folder").unwrap();
        let staged = StagedFolder::begin(&root, "run", FolderLock::acquire(&root, "run").unwrap()).unwrap();
        assert!(staged.commit().unwrap_err().reason.contains("not a folder"));
        assert_eq!(fs::read_to_string(root.join("run")).unwrap(), "not a folder");
        assert_eq!(names(&root), [".run.lock", "run"]);
        fs::remove_dir_all(root).unwrap();
    }
}
