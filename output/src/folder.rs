//! An output folder that appears whole or not at all.
//!
//! A run writes every file into a hidden staging folder beside its destination
//! (`OUT/.NAME.staging-PID`, same filesystem) and, once all are complete, swaps it
//! in with one atomic rename: on Linux `renameat2(RENAME_EXCHANGE)` exchanges the new
//! folder with the previous one, which is then deleted; without a previous folder a
//! plain `rename` moves it in. A reader therefore sees the previous run or the new
//! one, never a mix, and nothing of the previous run survives beside the new files.
//!
//! A run replaces only what stampede wrote ([`foreign_entries`]): a destination that
//! holds anything else — a user's folder that happens to have the run's name, or a
//! user's file dropped into an earlier output folder — is refused, before the run
//! starts and again at the swap, unless the caller passes [`Replace::Anything`]
//! (`--force`). A file where the folder goes is never replaced.
//!
//! For the run's whole duration it holds an advisory lock (`flock`) on
//! `OUT/.NAME.lock`, so a second run into the same folder is refused with the other
//! run's process id. Holding the lock also makes cleaning safe: staging folders left by
//! runs that were killed (SIGKILL, power loss) are removed when the next run starts.
//! The lock file is removed when the lock is released (a killed run leaves it; the
//! next run reuses it). Removing it while locked keeps the lock exclusive: a process
//! that locked the file just before it was unlinked sees that the path no longer names
//! the file it holds, and tries again with a new one.

use std::fs::{self, File, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

use crate::{OutputError, OutputErrorKind, Result};

/// The exclusive right to write `OUT/NAME`, released (and its file removed) when dropped.
#[derive(Debug)]
pub struct FolderLock {
    // Closed (unlocked) after `Drop::drop` has removed its name: fields drop after it.
    _file: File,
    path: PathBuf,
}

/// What a run may replace at its destination.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Replace {
    /// Only nothing, an empty folder or a folder stampede wrote (the default).
    OnlyStampedeOutput,
    /// Any folder, whatever it holds (`--force`). A file is still never replaced.
    Anything,
}

/// Files an output folder may hold beside those its manifest lists: the manifest
/// itself and the documents written after a run (`stampede report`, `verify`).
const DOCUMENTS: [&str; 3] = ["manifest.json", "report.html", "verify.json"];

/// The most entries an error message names; the rest are counted.
const NAMED_AT_MOST: usize = 8;

/// What in folder `dir` stampede did not write, as paths relative to `dir` (a folder
/// as `name/`), sorted; empty when replacing `dir` loses nothing of anyone else's.
///
/// Stampede's are: the files the folder's `manifest.json` (`"tool": "stampede"`)
/// lists, the manifest, `report.html` and `verify.json`, the temporary files of those
/// being written, and a `shards/` folder holding only shard folders that pass the same
/// rule with their lock, checkpoint and staging entries. A folder without a stampede
/// manifest may hold only `shards/` (what `run --shard` creates).
/// Whether the regular file at `path` carries one of `marks` within its first 4 KB:
/// how stampede knows a page or JUnit file it wrote (`--force` aside, only those are
/// replaced).
pub fn carries_mark(path: &Path, marks: &[&str]) -> bool {
    use std::io::Read;
    let mut head = Vec::with_capacity(4096);
    let read = fs::File::open(path).and_then(|file| file.take(4096).read_to_end(&mut head));
    let text = String::from_utf8_lossy(&head);
    read.is_ok() && marks.iter().any(|mark| text.contains(mark))
}

/// A `verify --junit` file written into the folder: stampede's own suite, by its first
/// bytes (so the next run may replace the folder).
fn is_stampede_junit(path: &Path) -> bool {
    carries_mark(path, &["<testsuites name=\"stampede verify"])
}

pub fn foreign_entries(dir: &Path) -> std::io::Result<Vec<String>> {
    let mut foreign = Vec::new();
    collect_foreign(dir, "", &mut foreign)?;
    foreign.sort();
    Ok(foreign)
}

fn collect_foreign(dir: &Path, prefix: &str, foreign: &mut Vec<String>) -> std::io::Result<()> {
    let listed = stampede_manifest_files(dir);
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let kind = entry.file_type()?;
        let ours = match &listed {
            Some(files) if kind.is_file() => {
                files.contains(&name)
                    || DOCUMENTS.contains(&name.as_str())
                    || is_temporary_of(&name, files.iter().map(String::as_str).chain(DOCUMENTS))
                    || is_stampede_junit(&entry.path())
            }
            Some(files) if kind.is_dir() && PARTITIONED.contains(&name.as_str()) => {
                collect_foreign_partitions(&entry.path(), &format!("{prefix}{name}/"), &name, files, foreign)?;
                true
            }
            _ if kind.is_dir() && name == "shards" => {
                collect_foreign_shards(&entry.path(), &format!("{prefix}shards/"), foreign)?;
                true
            }
            _ => false,
        };
        if !ours {
            foreign.push(format!("{prefix}{name}{}", if kind.is_dir() { "/" } else { "" }));
        }
    }
    Ok(())
}

/// A `shards/` folder: `shard=K/` folders (each an output folder by the same rule)
/// and their hidden lock files, checkpoints and staging folders.
fn collect_foreign_shards(dir: &Path, prefix: &str, foreign: &mut Vec<String>) -> std::io::Result<()> {
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let kind = entry.file_type()?;
        let bookkeeping = name.strip_prefix(".shard=").is_some_and(|rest| {
            let index = rest.split('.').next().unwrap_or("");
            let what = &rest[index.len()..];
            index.parse::<u64>().is_ok()
                && ((kind.is_file() && what == ".lock")
                    || (kind.is_dir() && (what == ".checkpoint" || what.starts_with(".staging-"))))
        });
        if bookkeeping {
            continue;
        }
        if kind.is_dir() && name.strip_prefix("shard=").is_some_and(|k| k.parse::<u64>().is_ok()) {
            collect_foreign(&entry.path(), &format!("{prefix}{name}/"), foreign)?;
        } else {
            foreign.push(format!("{prefix}{name}{}", if kind.is_dir() { "/" } else { "" }));
        }
    }
    Ok(())
}

/// The files `dir/manifest.json` lists, if it is a stampede manifest.
fn stampede_manifest_files(dir: &Path) -> Option<Vec<String>> {
    let text = fs::read(dir.join("manifest.json")).ok()?;
    let manifest: serde_json::Value = serde_json::from_slice(&text).ok()?;
    if manifest.get("tool")?.as_str()? != "stampede" {
        return None;
    }
    let files = manifest.get("files")?.as_array()?;
    // A listed name is a plain file name: a manifest cannot vouch for anything outside its folder.
    Some(
        files
            .iter()
            .filter_map(serde_json::Value::as_str)
            .filter(|f| is_partition_file(f) || (!f.is_empty() && !f.contains(['/', '\\']) && *f != "." && *f != ".."))
            .map(str::to_string)
            .collect(),
    )
}

/// The tables a run may split by grid point (`--partition-by grid_point`).
const PARTITIONED: [&str; 2] = ["replicas", "timeseries"];

/// `replicas/grid_point=K/part-0.parquet` (or `timeseries/…`): a hive partition's file,
/// the one kind of listed name with a folder in it.
fn is_partition_file(name: &str) -> bool {
    let mut parts = name.split('/');
    let (Some(table), Some(folder), Some(file), None) = (parts.next(), parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    let point = folder.strip_prefix("grid_point=");
    PARTITIONED.contains(&table)
        && point.is_some_and(|k| !k.is_empty() && k.bytes().all(|b| b.is_ascii_digit()))
        && file == "part-0.parquet"
}

/// A partitioned table's folder: `grid_point=K/` folders holding only the listed
/// `part-0.parquet` (or its temporary file).
fn collect_foreign_partitions(
    dir: &Path,
    prefix: &str,
    table: &str,
    listed: &[String],
    foreign: &mut Vec<String>,
) -> std::io::Result<()> {
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if !entry.file_type()?.is_dir() || !name.starts_with("grid_point=") {
            foreign.push(format!("{prefix}{name}"));
            continue;
        }
        for inner in fs::read_dir(entry.path())? {
            let inner = inner?;
            let file = inner.file_name().to_string_lossy().into_owned();
            let full = format!("{table}/{name}/{file}");
            let ours = inner.file_type()?.is_file()
                && (listed.contains(&full)
                    || (is_temporary_of(&file, std::iter::once("part-0.parquet"))
                        && listed.contains(&format!("{table}/{name}/part-0.parquet"))));
            if !ours {
                foreign.push(format!("{prefix}{name}/{file}"));
            }
        }
    }
    Ok(())
}

/// `.NAME.tmp-PID`: a [`crate::StagedFile`] of one of `names` that a killed process left.
fn is_temporary_of<'a>(file: &str, mut names: impl Iterator<Item = &'a str>) -> bool {
    let Some(rest) = file.strip_prefix('.') else { return false };
    let Some((name, pid)) = rest.rsplit_once(".tmp-") else { return false };
    pid.parse::<u32>().is_ok() && names.any(|n| n == name)
}

/// Refuses `destination` unless `replace` allows what it holds; `Ok` when it is absent.
/// [`StagedFolder::begin`] checks this again; a command that works long before it
/// writes (optimize) calls it first so that a refusal costs nothing.
pub fn check_replaceable(destination: &Path, replace: Replace) -> Result<()> {
    let meta = match fs::symlink_metadata(destination) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(OutputError::new(destination, e)),
    };
    if !meta.is_dir() {
        let what = if meta.file_type().is_symlink() { "a symbolic link" } else { "a file" };
        return Err(OutputError::in_the_way(
            destination,
            OutputErrorKind::NotAFolder,
            format!("is {what}, not a folder; stampede never replaces a file with its output, and nothing was written"),
        ));
    }
    if replace == Replace::Anything {
        return Ok(());
    }
    let foreign = foreign_entries(destination).map_err(|e| OutputError::new(destination, e))?;
    if foreign.is_empty() {
        return Ok(());
    }
    let mut named = foreign.iter().take(NAMED_AT_MOST).cloned().collect::<Vec<_>>().join(", ");
    if foreign.len() > NAMED_AT_MOST {
        named.push_str(&format!(" and {} more", foreign.len() - NAMED_AT_MOST));
    }
    let whose = if stampede_manifest_files(destination).is_some() {
        "is an earlier stampede output folder, but it also holds"
    } else {
        "is not a stampede output folder (it has no stampede manifest.json); it holds"
    };
    Err(OutputError::in_the_way(
        destination,
        OutputErrorKind::Foreign,
        format!("{whose} {named}, which stampede did not write and would delete; nothing was written"),
    ))
}

/// A run's output folder while it is being written.
#[derive(Debug)]
pub struct StagedFolder {
    staging: PathBuf,
    destination: PathBuf,
    replace: Replace,
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
        if let Ok(meta) = fs::metadata(root) {
            if !meta.is_dir() {
                return Err(LockError::Io(OutputError::in_the_way(
                    root,
                    OutputErrorKind::NotAFolder,
                    "is a file, not a folder; the output root (--out) must be a folder or not exist yet",
                )));
            }
        }
        fs::create_dir_all(root).map_err(|e| LockError::Io(OutputError::new(root, e)))?;
        let path = root.join(format!(".{name}.lock"));
        loop {
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
            if !still_named(&file, &path) {
                // Its holder removed it while we waited to lock it: lock a fresh one.
                continue;
            }
            // Who holds it, for the message a second run prints.
            let _ = file.set_len(0).and_then(|()| file.rewind()).and_then(|()| write!(file, "{}", std::process::id()));
            return Ok(FolderLock { _file: file, path });
        }
    }
}

impl Drop for FolderLock {
    fn drop(&mut self) {
        // Unlinked while still locked; `file` closes (unlocks) after this returns.
        let _ = fs::remove_file(&self.path);
    }
}

/// Whether `path` still names the open `file` (same device and inode).
#[cfg(unix)]
fn still_named(file: &File, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (file.metadata(), fs::metadata(path)) {
        (Ok(held), Ok(named)) => held.dev() == named.dev() && held.ino() == named.ino(),
        _ => false,
    }
}

#[cfg(not(unix))]
fn still_named(_file: &File, path: &Path) -> bool {
    path.exists()
}

impl StagedFolder {
    /// Starts writing `root/NAME` under `lock`: refuses a destination that `replace`
    /// does not allow replacing (an error of kind `Foreign` or `NotAFolder`, before anything is
    /// written), removes what killed runs left behind and creates a fresh staging folder.
    pub fn begin(root: &Path, name: &str, lock: FolderLock, replace: Replace) -> Result<StagedFolder> {
        let destination = root.join(name);
        check_replaceable(&destination, replace)?;
        remove_stale(root, name);
        let staging = root.join(format!(".{name}.staging-{}", std::process::id()));
        let _ = fs::remove_dir_all(&staging);
        fs::create_dir(&staging).map_err(|e| OutputError::new(&staging, e))?;
        Ok(StagedFolder { staging, destination, replace, committed: false, _lock: lock })
    }

    /// Where the files are written until [`Self::commit`].
    pub fn path(&self) -> &Path {
        &self.staging
    }

    /// The folder the files will be in.
    pub fn destination(&self) -> &Path {
        &self.destination
    }

    /// Swaps the staging folder in, atomically, and deletes the previous output —
    /// checking again that it is still only stampede's (something may have been put
    /// there while the run went on).
    pub fn commit(mut self) -> Result<PathBuf> {
        let destination = self.destination.clone();
        check_replaceable(&destination, self.replace)?;
        match fs::symlink_metadata(&destination) {
            Err(_) => fs::rename(&self.staging, &destination).map_err(|e| OutputError::new(&destination, e))?,
            Ok(meta) if !meta.is_dir() => {
                return Err(OutputError::in_the_way(
                    &destination,
                    OutputErrorKind::NotAFolder,
                    "is not a folder; nothing was replaced",
                ));
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

/// Removes `root/.NAME.KIND-PID` scratch folders (`KIND` e.g. `precision`) whose
/// process is gone: a killed `--precision` run's stages, which no lock covers (the
/// search runs before the output's lock is taken), so a live process's are kept.
pub fn remove_dead_scratch(root: &Path, name: &str, kind: &str) {
    let prefix = format!(".{name}.{kind}-");
    let Ok(entries) = fs::read_dir(root) else { return };
    for entry in entries.flatten() {
        let file_name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = file_name.strip_prefix(&prefix).and_then(|p| p.parse::<u32>().ok()) else { continue };
        if pid != std::process::id() && !process_alive(pid) {
            let _ = fs::remove_dir_all(entry.path());
        }
    }
}

/// Whether process `pid` exists (signal 0 checks without sending anything).
#[cfg(unix)]
fn process_alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else { return false };
    // SAFETY: kill with signal 0 sends nothing; it only reports whether the pid exists.
    let status = unsafe { libc::kill(pid, 0) };
    status == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

#[cfg(not(unix))]
fn process_alive(_pid: u32) -> bool {
    true
}

/// Free bytes on the filesystem holding `path` (`statvfs`).
#[cfg(unix)]
pub(crate) fn free_space(path: &Path) -> Option<u64> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let path = CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: `statvfs` is a plain C struct of integers, for which all zeros is a value.
    let mut stats: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `path` is a valid NUL-terminated string that outlives the call, and
    // `stats` a live struct that statvfs only writes.
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

    fn begin(root: &Path, replace: Replace) -> Result<StagedFolder> {
        StagedFolder::begin(root, "run", FolderLock::acquire(root, "run").unwrap(), replace)
    }

    /// A folder as `run` leaves it: a stampede manifest listing `files`, and those files.
    fn stampede_folder(dir: &Path, files: &[&str]) {
        fs::create_dir_all(dir).unwrap();
        let mut listed: Vec<&str> = files.to_vec();
        listed.push("manifest.json");
        let manifest = serde_json::json!({"tool": "stampede", "files": listed});
        fs::write(dir.join("manifest.json"), manifest.to_string()).unwrap();
        for file in files {
            fs::write(dir.join(file), "old").unwrap();
        }
    }

    #[test]
    fn a_commit_replaces_the_whole_folder_and_leaves_nothing_else() {
        let root = scratch("commit");
        stampede_folder(&root.join("run"), &["old-only.txt", "both.txt", "report.html"]);
        let staged = begin(&root, Replace::OnlyStampedeOutput).unwrap();
        fs::write(staged.path().join("both.txt"), "new").unwrap();
        assert_eq!(fs::read_to_string(root.join("run/both.txt")).unwrap(), "old", "not visible before commit");
        staged.commit().unwrap();
        assert_eq!(names(&root.join("run")), ["both.txt"], "nothing of the previous run survives");
        assert_eq!(fs::read_to_string(root.join("run/both.txt")).unwrap(), "new");
        assert_eq!(names(&root), ["run"], "the lock file goes with the lock");
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
        let other = FolderLock::acquire(&root, "other").expect("locks are per folder");
        let staged = StagedFolder::begin(&root, "run", lock, Replace::OnlyStampedeOutput).unwrap();
        fs::write(staged.path().join("half.parquet"), "half").unwrap();
        drop(staged);
        assert_eq!(names(&root), [".other.lock"]);
        drop(other);
        assert!(names(&root).is_empty(), "{:?}", names(&root));
        assert!(FolderLock::acquire(&root, "run").is_ok(), "dropping releases the lock");
        fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn a_lock_file_removed_by_its_holder_is_not_shared() {
        let root = scratch("relock");
        let path = root.join(".run.lock");
        let first = FolderLock::acquire(&root, "run").unwrap();
        // A second process opened the file before the first removed it...
        let late = File::options().read(true).write(true).open(&path).unwrap();
        drop(first);
        // ...and locks the now nameless file: the path no longer names it.
        late.try_lock().unwrap();
        assert!(!still_named(&late, &path));
        let second = FolderLock::acquire(&root, "run").unwrap();
        assert!(still_named(&second._file, &path));
        assert!(matches!(FolderLock::acquire(&root, "run"), Err(LockError::Busy(_))));
        drop((late, second));
        fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn a_killed_runs_staging_is_removed_by_the_next_run() {
        let root = scratch("stale");
        fs::create_dir(root.join(".run.staging-999999")).unwrap();
        fs::write(root.join(".run.staging-999999/replicas.parquet"), "litter").unwrap();
        begin(&root, Replace::OnlyStampedeOutput).unwrap().commit().unwrap();
        assert_eq!(names(&root), ["run"]);
        fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn a_file_in_the_way_is_refused_before_anything_is_written_and_stays() {
        let root = scratch("file");
        fs::write(root.join("run"), "not a folder").unwrap();
        for replace in [Replace::OnlyStampedeOutput, Replace::Anything] {
            let error = begin(&root, replace).unwrap_err();
            assert_eq!(error.kind, OutputErrorKind::NotAFolder);
            assert!(error.reason.contains("is a file, not a folder"), "{}", error.reason);
        }
        assert_eq!(fs::read_to_string(root.join("run")).unwrap(), "not a folder");
        assert_eq!(names(&root), ["run"]);
        let error = FolderLock::acquire(&root.join("run"), "x").unwrap_err();
        assert!(
            matches!(error, LockError::Io(e) if e.kind == OutputErrorKind::NotAFolder && e.reason.contains("not a folder"))
        );
        fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn a_users_folder_is_refused_and_kept_whole() {
        let root = scratch("user");
        fs::create_dir_all(root.join("run/deep")).unwrap();
        fs::write(root.join("run/main.rs"), "fn main() {}").unwrap();
        fs::write(root.join("run/deep/y.txt"), "y").unwrap();
        let error = begin(&root, Replace::OnlyStampedeOutput).unwrap_err();
        assert_eq!(error.kind, OutputErrorKind::Foreign);
        assert!(error.reason.contains("not a stampede output folder"), "{}", error.reason);
        assert!(error.reason.contains("deep/, main.rs"), "{}", error.reason);
        assert_eq!(fs::read_to_string(root.join("run/deep/y.txt")).unwrap(), "y");
        assert_eq!(names(&root), ["run"], "no staging folder, no lock left");
        fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn a_user_file_inside_an_earlier_output_folder_is_refused() {
        let root = scratch("inside");
        stampede_folder(&root.join("run"), &["replicas.parquet"]);
        fs::write(root.join("run/notes.md"), "mine").unwrap();
        fs::create_dir(root.join("run/report.html.d")).unwrap();
        let error = begin(&root, Replace::OnlyStampedeOutput).unwrap_err();
        assert!(error.reason.contains("earlier stampede output folder"), "{}", error.reason);
        assert!(error.reason.contains("notes.md, report.html.d/"), "{}", error.reason);
        // Something put there while the run went on is caught at the swap.
        fs::remove_file(root.join("run/notes.md")).unwrap();
        fs::remove_dir(root.join("run/report.html.d")).unwrap();
        let staged = begin(&root, Replace::OnlyStampedeOutput).unwrap();
        fs::write(root.join("run/late.txt"), "mine").unwrap();
        let error = staged.commit().unwrap_err();
        assert_eq!(error.kind, OutputErrorKind::Foreign);
        assert!(error.reason.contains("late.txt"), "{}", error.reason);
        assert_eq!(names(&root.join("run")), ["late.txt", "manifest.json", "replicas.parquet"]);
        assert_eq!(names(&root), ["run"], "the refused run's staging is gone");
        fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn force_replaces_any_folder() {
        let root = scratch("force");
        fs::create_dir_all(root.join("run/deep")).unwrap();
        fs::write(root.join("run/deep/y.txt"), "y").unwrap();
        let staged = begin(&root, Replace::Anything).unwrap();
        fs::write(staged.path().join("manifest.json"), "{}").unwrap();
        staged.commit().unwrap();
        assert_eq!(names(&root.join("run")), ["manifest.json"]);
        fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn what_counts_as_stampedes() {
        let root = scratch("rule");
        let dir = root.join("run");
        fs::create_dir(&dir).unwrap();
        assert!(foreign_entries(&dir).unwrap().is_empty(), "an empty folder holds nothing to lose");
        // What `run --shard` leaves: shards/shard=K/ with its own manifest, and bookkeeping.
        stampede_folder(&dir.join("shards/shard=0"), &["replicas.parquet", "partials.parquet"]);
        fs::create_dir(dir.join("shards/.shard=1.checkpoint")).unwrap();
        fs::write(dir.join("shards/.shard=1.lock"), "1").unwrap();
        assert!(foreign_entries(&dir).unwrap().is_empty());
        fs::write(dir.join("shards/shard=0/mine.csv"), "x").unwrap();
        fs::write(dir.join("shards/.shard=x.lock"), "x").unwrap();
        assert_eq!(foreign_entries(&dir).unwrap(), ["shards/.shard=x.lock", "shards/shard=0/mine.csv"]);
        fs::remove_file(dir.join("shards/shard=0/mine.csv")).unwrap();
        fs::remove_file(dir.join("shards/.shard=x.lock")).unwrap();
        // A run's folder, the documents written after it, a killed report's temporary.
        stampede_folder(&dir, &["summary.parquet"]);
        fs::write(dir.join("verify.json"), "{}").unwrap();
        fs::write(dir.join(".report.html.tmp-42"), "half").unwrap();
        assert!(foreign_entries(&dir).unwrap().is_empty());
        // A manifest cannot vouch for a path outside its folder, nor another tool's.
        fs::write(dir.join("manifest.json"), r#"{"tool": "stampede", "files": ["../x", "other"]}"#).unwrap();
        fs::write(dir.join("other"), "").unwrap();
        assert_eq!(foreign_entries(&dir).unwrap(), ["summary.parquet"]);
        fs::write(dir.join("manifest.json"), r#"{"tool": "other", "files": ["summary.parquet", "other"]}"#).unwrap();
        assert_eq!(
            foreign_entries(&dir).unwrap(),
            [".report.html.tmp-42", "manifest.json", "other", "summary.parquet", "verify.json"]
        );
        fs::remove_dir_all(root).unwrap();
    }
}
