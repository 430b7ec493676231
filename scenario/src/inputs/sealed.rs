//! Inputs sealed at their first read: every file a scenario names (a distribution's
//! samples or histogram, a rate file, an arrival trace, a gateway fixture) is read
//! once per process, whole, hashed (SHA-256 of exactly the bytes used) and kept. Every
//! later read of the same path — another grid point, another checkpoint piece, the
//! manifest — gets the kept bytes, so a file edited while a run is under way cannot
//! mix two versions into one result, and the hash the manifest records is the hash of
//! what the run used.
//!
//! Invariants:
//! - a path is read from disk at most once per process; [`read`] hands out the same
//!   [`Sealed`] every time after that (or the one [`seed`] put there: `merge` seeds the
//!   store with the contents the shards recorded, so it never re-reads the files);
//! - only regular files are opened (a FIFO, device, socket or directory is refused
//!   before it is opened for reading), and no read allocates more than the file's
//!   size, itself at most [`max_input_bytes`];
//! - once [`refuse_all_files`] is called (the web app does, at start), no file is read
//!   at all: every [`read`] is refused before it touches the file system.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use sha2::{Digest, Sha256};

use crate::base::error::{Error, Result};

/// One input file as the run uses it.
#[derive(Debug)]
pub struct Sealed {
    /// Where it was read from (absolute).
    pub path: PathBuf,
    pub bytes: Arc<[u8]>,
    /// Lower-case hex SHA-256 of `bytes`.
    pub sha256: String,
}

impl Sealed {
    /// The bytes as UTF-8 text without a leading byte-order mark (spreadsheets write
    /// one), or `None` when they are not UTF-8.
    pub fn text(&self) -> Option<&str> {
        let text = std::str::from_utf8(&self.bytes).ok()?;
        Some(text.strip_prefix('\u{feff}').unwrap_or(text))
    }
}

/// The largest input read, by default: inputs are held whole in memory for the
/// process's life (1 GiB; `STAMPEDE_MAX_INPUT_BYTES` sets another limit).
pub(crate) const DEFAULT_MAX_INPUT_BYTES: u64 = 1 << 30;

/// The largest input this process reads: [`DEFAULT_MAX_INPUT_BYTES`] unless
/// `STAMPEDE_MAX_INPUT_BYTES` says otherwise.
pub(crate) fn max_input_bytes() -> u64 {
    std::env::var("STAMPEDE_MAX_INPUT_BYTES")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|n| *n > 0)
        .unwrap_or(DEFAULT_MAX_INPUT_BYTES)
}

fn store() -> &'static Mutex<BTreeMap<PathBuf, Arc<Sealed>>> {
    static STORE: OnceLock<Mutex<BTreeMap<PathBuf, Arc<Sealed>>>> = OnceLock::new();
    STORE.get_or_init(Default::default)
}

static REFUSAL: OnceLock<String> = OnceLock::new();

/// From now on this process reads no input file: every [`read`] is refused with
/// `why` (the web app calls this at start: a request may not make the server read a
/// file it names).
pub fn refuse_all_files(why: &str) {
    let _ = REFUSAL.set(why.to_string());
}

/// The hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// A digest as lower-case hex, the form every hash stampede records takes.
pub fn hex(digest: &[u8]) -> String {
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

fn key(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

fn refuse(path: &Path, what: impl std::fmt::Display) -> Error {
    Error::bad_input(format!("{}: {what}", path.display()))
}

/// A file that is missing or cannot be read (see [`Error::unreadable`]).
fn unreadable(path: &Path, error: std::io::Error) -> Error {
    Error::unreadable(format!("{}: cannot read it: {error}", path.display()))
}

/// The file at `path`, read (the first time) or as first read (every later time).
/// Once [`refuse_all_files`] was called, only what was [`seed`]ed is there; anything
/// else is refused before the file system is asked about it.
pub fn read(path: &Path) -> Result<Arc<Sealed>> {
    let key = key(path);
    // Held while reading: two threads asking for one file get one read.
    let mut store = store().lock().expect("the input store's lock");
    if let Some(sealed) = store.get(&key) {
        return Ok(Arc::clone(sealed));
    }
    if let Some(why) = REFUSAL.get() {
        return Err(refuse(path, why));
    }
    let bytes = read_regular_file(path, max_input_bytes())?;
    let sealed = Arc::new(Sealed { path: key.clone(), sha256: sha256_hex(&bytes), bytes: bytes.into() });
    store.insert(key, Arc::clone(&sealed));
    Ok(sealed)
}

/// The input at `path` if this process has sealed it (never reads it).
pub fn lookup(path: &Path) -> Option<Arc<Sealed>> {
    store().lock().expect("the input store's lock").get(&key(path)).cloned()
}

/// Puts `bytes` in the store as the content of `path` (a merge: the contents the
/// shards recorded), unless the path is sealed already. Returns the entry now kept.
pub fn seed(path: &Path, bytes: Vec<u8>) -> Arc<Sealed> {
    let key = key(path);
    let mut store = store().lock().expect("the input store's lock");
    let entry = store
        .entry(key.clone())
        .or_insert_with(|| Arc::new(Sealed { path: key, sha256: sha256_hex(&bytes), bytes: bytes.into() }));
    Arc::clone(entry)
}

/// Removes what [`seed`] put at `path` (the web app, when a request's uploaded fixture
/// is no longer needed).
pub fn forget(path: &Path) {
    store().lock().expect("the input store's lock").remove(&key(path));
}

/// What kind of thing a non-regular file is, for the refusal.
fn kind_of(file_type: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if file_type.is_dir() {
        "a folder"
    } else if file_type.is_fifo() {
        "a FIFO (named pipe)"
    } else if file_type.is_char_device() || file_type.is_block_device() {
        "a device"
    } else if file_type.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

/// The whole of the regular file at `path`, at most `limit` bytes: anything else is
/// refused before a byte is read, and the buffer never grows past the size the file
/// had when opened (a file that grows while read is refused).
pub(crate) fn read_regular_file(path: &Path, limit: u64) -> Result<Vec<u8>> {
    let metadata = std::fs::metadata(path).map_err(|e| unreadable(path, e))?;
    if !metadata.is_file() {
        return Err(refuse(path, format!("{}; an input must be a regular file", kind_of(metadata.file_type()))));
    }
    let too_big = |size: u64| {
        refuse(
            path,
            format!(
                "{size} bytes; inputs are read whole and may be at most {limit} bytes (set STAMPEDE_MAX_INPUT_BYTES to \
                 allow more)"
            ),
        )
    };
    if metadata.len() > limit {
        return Err(too_big(metadata.len()));
    }
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    {
        // Never blocks on open, should the path have been swapped for a FIFO since.
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NONBLOCK);
    }
    let file = options.open(path).map_err(|e| unreadable(path, e))?;
    let opened = file.metadata().map_err(|e| unreadable(path, e))?;
    if !opened.is_file() {
        return Err(refuse(path, format!("{}; an input must be a regular file", kind_of(opened.file_type()))));
    }
    let size = opened.len();
    if size > limit {
        return Err(too_big(size));
    }
    let mut bytes = Vec::with_capacity(size as usize);
    file.take(size + 1).read_to_end(&mut bytes).map_err(|e| unreadable(path, e))?;
    if bytes.len() as u64 != size {
        return Err(refuse(
            path,
            "the file changed size while it was read; read it again when it is not being written",
        ));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_read_once_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lat.csv");
        std::fs::write(&path, "0.1\n0.2\n").unwrap();
        let first = read(&path).unwrap();
        std::fs::write(&path, "9\n9\n9\n").unwrap();
        let again = read(&path).unwrap();
        assert_eq!(&*again.bytes, b"0.1\n0.2\n", "the kept bytes, not the edited file");
        assert_eq!(again.sha256, first.sha256);
        assert_eq!(first.sha256, sha256_hex(b"0.1\n0.2\n"));
        // The same file named another way (relative to the current folder) is one entry.
        assert!(lookup(&path).is_some());
    }

    #[test]
    fn only_regular_files_within_the_limit_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let error = read_regular_file(dir.path(), 1 << 20).unwrap_err().to_string();
        assert!(error.contains("a folder; an input must be a regular file"), "{error}");
        let started = std::time::Instant::now();
        let error = read_regular_file(Path::new("/dev/zero"), 1 << 20).unwrap_err().to_string();
        assert!(error.contains("a device"), "{error}");
        let fifo = dir.path().join("pipe");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status().map(|s| s.success()).unwrap_or(false);
        if made {
            let error = read_regular_file(&fifo, 1 << 20).unwrap_err().to_string();
            assert!(error.contains("a FIFO"), "{error}");
        }
        assert!(started.elapsed().as_secs() < 5, "refused without reading");
        let big = dir.path().join("big");
        std::fs::write(&big, vec![b'1'; 4096]).unwrap();
        let error = read_regular_file(&big, 4095).unwrap_err().to_string();
        assert!(error.contains("4096 bytes") && error.contains("at most 4095"), "{error}");
        assert_eq!(read_regular_file(&big, 4096).unwrap().len(), 4096);
    }

    #[test]
    fn a_seeded_path_is_never_read() {
        let path = Path::new("/nonexistent/stampede/seeded.csv");
        seed(path, b"1\n2\n".to_vec());
        assert_eq!(&*read(path).unwrap().bytes, b"1\n2\n");
    }
}
