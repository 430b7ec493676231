//! Explicit output files — `fit --out`, `compare --html`, `verify --junit`, `merge
//! --junit`, `import --out`, `calibrate --write`: checked before any work starts and
//! written atomically. An existing file is replaced only when stampede wrote it (its
//! page carries stampede's generator mark, its JUnit stampede's suite name) or with
//! `--force`; a missing folder is made only inside the current folder or one level
//! inside a folder that exists, never at the file system's root (`--junit
//! /nonexistent/j.xml` is refused, naming /nonexistent) nor a new tree.
//!
//! **Edits are sacred.** A scenario stampede writes for the user to edit (`import`,
//! `calibrate --write`) ends with a seal: the SHA-256 of everything above it. A re-run
//! replaces the file only while the seal still matches; an edited file (or one whose
//! seal was removed) is refused, and `--force` first keeps it as `FILE.bak` (`.bak.1`,
//! … when that exists), so nothing the user wrote is ever lost.

use std::path::{Component, Path};

use stampede_scenario::Error;

type Result<T> = std::result::Result<T, Error>;

/// What marks a file as one stampede wrote, within its first 4 KB.
const MARKS: &[&str] = &[
    "<meta name=\"generator\" content=\"stampede",
    "<testsuites name=\"stampede verify",
    "<testsuites name=\"stampede compare",
    "# Imported by `stampede import`",
    stampede_optimize::calibrate::report::TOML_MARK,
];

/// The marks of files written for the user to edit: sealed, so an edit is seen.
const EDITABLE_MARKS: &[&str] = &["# Imported by `stampede import`", stampede_optimize::calibrate::report::TOML_MARK];

/// The last line of a sealed file, before the hex digest of the bytes above it.
const SEAL: &str =
    "# stampede seal (SHA-256 of the lines above; a re-run replaces this file only while they are unchanged): ";

/// Whether the regular file at `path` is one stampede wrote and, if it was written to
/// be edited, one nobody has changed since.
fn written_by_stampede(path: &Path) -> Written {
    if !stampede_output::folder::carries_mark(path, MARKS) {
        return Written::NotByStampede;
    }
    if !stampede_output::folder::carries_mark(path, EDITABLE_MARKS) {
        return Written::Unchanged;
    }
    match std::fs::read(path) {
        Ok(bytes) if seal_holds(&bytes) => Written::Unchanged,
        _ => Written::Edited,
    }
}

/// What [`written_by_stampede`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Written {
    NotByStampede,
    Edited,
    Unchanged,
}

/// `bytes` with the seal line that [`seal_holds`] checks appended.
pub fn sealed(bytes: &[u8]) -> Vec<u8> {
    let mut out = bytes.to_vec();
    if !out.is_empty() && !out.ends_with(b"\n") {
        out.push(b'\n');
    }
    let digest = stampede_scenario::inputs::sealed::sha256_hex(&out);
    out.extend_from_slice(format!("{SEAL}{digest}\n").as_bytes());
    out
}

/// Whether `bytes` end with a seal matching what is above it.
fn seal_holds(bytes: &[u8]) -> bool {
    let body = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    let start = body.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let (above, last) = body.split_at(start);
    std::str::from_utf8(last)
        .ok()
        .and_then(|line| line.strip_prefix(SEAL))
        .is_some_and(|digest| digest == stampede_scenario::inputs::sealed::sha256_hex(above))
}

/// A free backup name beside `path`: `FILE.bak`, else `FILE.bak.1`, `FILE.bak.2`, …
pub fn backup_name(path: &Path) -> std::path::PathBuf {
    let name = path.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
    let candidate = |n: u32| {
        let suffix = if n == 0 { ".bak".to_string() } else { format!(".bak.{n}") };
        path.with_file_name(format!("{name}{suffix}"))
    };
    (0..).map(candidate).find(|p| std::fs::symlink_metadata(p).is_err()).expect("a free name")
}

/// Refuses `path` (given as `flag`) unless writing it can lose nothing: not a folder
/// or device, not a file someone else wrote (unless `force`), and its folder exists or
/// may be made.
pub fn check(path: &Path, flag: &str, force: bool) -> Result<()> {
    let shown = path.display();
    if let Ok(metadata) = std::fs::symlink_metadata(path) {
        if metadata.is_dir() {
            return Err(Error::bad_input(format!("{flag} {shown}: is a folder; give a file name")));
        }
        if !metadata.is_file() {
            return Err(Error::bad_input(format!(
                "{flag} {shown}: is not a regular file (a device, pipe, socket or link); give a file name"
            )));
        }
        match written_by_stampede(path) {
            _ if force => {}
            Written::Unchanged => {}
            Written::NotByStampede => {
                return Err(Error::bad_input(format!(
                    "{flag} {shown}: the file exists and stampede did not write it; nothing was written"
                ))
                .with_hint("choose another file name, or pass --force to replace it (the file is kept as FILE.bak)"));
            }
            Written::Edited => {
                return Err(Error::bad_input(format!(
                    "{flag} {shown}: the file was edited since stampede wrote it (its seal, the last line, no longer \
                     matches); nothing was written"
                ))
                .with_hint(
                    "choose another file name, or pass --force to replace it (your edits are kept as FILE.bak)",
                ));
            }
        }
    }
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if parent.is_dir() {
        return Ok(());
    }
    if parent.exists() {
        return Err(Error::bad_input(format!("{flag} {shown}: {} is not a folder", parent.display())));
    }
    let inside_current = path.is_relative() && path.components().all(|c| matches!(c, Component::Normal(_)));
    // One new folder inside an existing one, but never at the file system's root.
    let grandparent_exists =
        parent.parent().is_some_and(|g| g.as_os_str().is_empty() || (g.is_dir() && g.parent().is_some()));
    if inside_current || grandparent_exists {
        return Ok(());
    }
    let first_missing =
        parent.ancestors().take_while(|a| !a.as_os_str().is_empty() && !a.exists()).last().unwrap_or(parent);
    Err(Error::bad_input(format!(
        "{flag} {shown}: folder {} does not exist; stampede makes folders only inside the current folder or one \
         level inside a folder that exists (not the file system's root); nothing was written",
        first_missing.display()
    ))
    .with_hint("make the folder first, or write the file inside the current folder"))
}

/// Writes `bytes` to `path` atomically (a temporary in the same folder, then a rename)
/// after [`check`]ing it again, making its folder if [`check`] allows. A file replaced
/// only because of `force` (someone else's, or edited) is first kept as `FILE.bak`.
pub fn write(path: &Path, flag: &str, bytes: &[u8], force: bool) -> Result<()> {
    check(path, flag, force)?;
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if path.is_file() && written_by_stampede(path) != Written::Unchanged {
        let backup = backup_name(path);
        std::fs::copy(path, &backup).map_err(|e| {
            Error::io(format!("cannot keep {} as {} before replacing it: {e}", path.display(), backup.display()))
        })?;
        super::warning(&format!("{flag} {}: kept the file it replaces as {}", path.display(), backup.display()));
    }
    let name = path.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
    std::fs::create_dir_all(parent)
        .map_err(|e| Error::io(format!("cannot write {}: cannot create its folder: {e}", path.display())))?;
    stampede_output::StagedFile::with_contents(parent, &name, bytes)
        .and_then(|file| file.commit())
        .map(|_| ())
        .map_err(|e| Error::io(format!("cannot write {e}")))
}
