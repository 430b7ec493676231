//! Which build of stampede wrote an output: the program version and, when it was
//! built from a git checkout, the commit (recorded at build time by `build.rs`, so a
//! run never calls git). `manifest.json` and `verify.json` carry both.

/// The program version (`stampede --version`).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The full hash of the commit this binary was built from, or `None` when it was not
/// built inside a git checkout.
pub fn commit() -> Option<&'static str> {
    Some(env!("STAMPEDE_GIT_COMMIT")).filter(|hash| !hash.is_empty())
}

std::thread_local! {
    /// The command line of a command run in-process (`stampede.run` from Python), set
    /// for the command's thread by [`with_command_line`].
    static EMBEDDED: std::cell::RefCell<Option<Vec<String>>> = const { std::cell::RefCell::new(None) };
}

/// The command line a manifest records as how to run it again: the process's own,
/// or — for a command run in-process, as Python's `stampede.run` does — the `stampede`
/// command line it stands for (the Python process's was `python notebook.py …`).
pub fn command_line() -> Vec<String> {
    EMBEDDED.with(|line| line.borrow().clone()).unwrap_or_else(|| std::env::args().collect())
}

/// Runs `f` with `line` as the [`command_line`] of this thread's outputs.
pub fn with_command_line<T>(line: Vec<String>, f: impl FnOnce() -> T) -> T {
    let outer = EMBEDDED.with(|slot| slot.replace(Some(line)));
    let result = f();
    EMBEDDED.with(|slot| *slot.borrow_mut() = outer);
    result
}

#[cfg(test)]
mod tests {
    /// An in-process command's outputs record the command line it stands for; the
    /// process's own otherwise, and again after it.
    #[test]
    fn an_embedded_command_records_its_own_command_line() {
        let line = vec!["stampede".to_string(), "run".to_string(), "mmc".to_string()];
        let inside = super::with_command_line(line.clone(), super::command_line);
        assert_eq!(inside, line);
        assert_eq!(super::command_line(), std::env::args().collect::<Vec<_>>());
    }

    /// This crate is built from the project's own checkout in development and CI, so
    /// the hash is there, and it is a full 40-digit hex commit.
    #[test]
    fn the_commit_is_a_full_hash_when_built_from_a_checkout() {
        let inside_checkout = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../.git").exists();
        match super::commit() {
            Some(hash) => assert!(hash.len() == 40 && hash.chars().all(|c| c.is_ascii_hexdigit()), "{hash}"),
            None => assert!(!inside_checkout, "built inside a checkout, but no commit was recorded"),
        }
    }
}
