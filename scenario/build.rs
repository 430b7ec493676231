//! Build-time provenance: the git commit this crate was built from, so that
//! `manifest.json` and `verify.json` can name it without running git at run time.
//!
//! Sets `STAMPEDE_GIT_COMMIT` to HEAD's full hash when built inside a git checkout
//! (empty otherwise: a crate tarball, or no git installed). Cargo reruns this script
//! when HEAD moves (a commit, a checkout) and never otherwise.

use std::path::{Path, PathBuf};
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let output = Command::new("git").args(args).current_dir(env!("CARGO_MANIFEST_DIR")).output().ok()?;
    let text = String::from_utf8(output.stdout).ok()?;
    (output.status.success() && !text.trim().is_empty()).then(|| text.trim().to_string())
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let commit = git(&["rev-parse", "--verify", "HEAD"]).unwrap_or_default();
    if !commit.is_empty() {
        // The files whose change means HEAD moved: HEAD itself (a checkout), the branch
        // it names (a commit), and packed-refs (a branch packed by `git gc`).
        let absolute = |path: String| {
            let path = PathBuf::from(path);
            if path.is_absolute() {
                path
            } else {
                Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
            }
        };
        let git_dir = git(&["rev-parse", "--git-dir"]).map(absolute);
        let common_dir = git(&["rev-parse", "--git-common-dir"]).map(absolute);
        let branch = git(&["symbolic-ref", "-q", "HEAD"]);
        let mut watched = Vec::new();
        if let Some(dir) = &git_dir {
            watched.push(dir.join("HEAD"));
        }
        if let Some(dir) = &common_dir {
            if let Some(branch) = &branch {
                watched.push(dir.join(branch));
            }
            watched.push(dir.join("packed-refs"));
        }
        // A path that does not exist would make cargo rerun the script on every build.
        for path in watched.into_iter().filter(|p| p.exists()) {
            println!("cargo:rerun-if-changed={}", path.display());
        }
    }
    println!("cargo:rustc-env=STAMPEDE_GIT_COMMIT={commit}");
}
