//! Explicit output files — `fit --out`, `compare --html`, `verify --junit`, `merge
//! --junit`: checked before any work starts and written atomically. An existing file
//! is replaced only when stampede wrote it (its page carries stampede's generator
//! mark, its JUnit stampede's suite name) or with `--force`; a missing folder is made
//! only inside the current folder or inside a folder that exists, never a whole new
//! tree elsewhere (`--out /nonexistent/dir/x.html` is refused, naming /nonexistent).

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

/// Whether the regular file at `path` is one stampede wrote.
fn written_by_stampede(path: &Path) -> bool {
    stampede_output::folder::carries_mark(path, MARKS)
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
        if !force && !written_by_stampede(path) {
            return Err(Error::bad_input(format!(
                "{flag} {shown}: the file exists and stampede did not write it; nothing was written"
            ))
            .with_hint("choose another file name, or pass --force to replace it"));
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
    let grandparent_exists = parent.parent().is_some_and(|g| g.as_os_str().is_empty() || g.is_dir());
    if inside_current || grandparent_exists {
        return Ok(());
    }
    let first_missing =
        parent.ancestors().take_while(|a| !a.as_os_str().is_empty() && !a.exists()).last().unwrap_or(parent);
    Err(Error::bad_input(format!(
        "{flag} {shown}: folder {} does not exist; stampede makes folders only inside the current folder or inside \
         one that exists; nothing was written",
        first_missing.display()
    ))
    .with_hint("make the folder first, or write the file inside the current folder"))
}

/// Writes `bytes` to `path` atomically (a temporary in the same folder, then a rename)
/// after [`check`]ing it again, making its folder if [`check`] allows.
pub fn write(path: &Path, flag: &str, bytes: &[u8], force: bool) -> Result<()> {
    check(path, flag, force)?;
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = path.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
    std::fs::create_dir_all(parent)
        .map_err(|e| Error::io(format!("cannot write {}: cannot create its folder: {e}", path.display())))?;
    stampede_output::StagedFile::with_contents(parent, &name, bytes)
        .and_then(|file| file.commit())
        .map(|_| ())
        .map_err(|e| Error::io(format!("cannot write {e}")))
}
