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

#[cfg(test)]
mod tests {
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
