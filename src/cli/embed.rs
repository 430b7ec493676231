//! The command line, in process: what the Python package (`python/`) calls.
//!
//! A command's arguments go through the same parser and the same code as the
//! `stampede` binary's, so its errors are the CLI's words and the folders it writes are
//! the CLI's bytes. What the binary would print is handed back instead: the `--json`
//! document, the warnings and the exit status ([`Finished`]), or the error with its
//! exit code ([`Failure`]). Progress is a counter the caller polls ([`Progress`]), and
//! setting the `cancel` flag stops every grid the command runs — replicas, pilots,
//! stages, rounds ([`stampede_run::runner::cancellable_scope`]) — after which the
//! command fails as the binary's would if killed: its output folder never appears.
//!
//! Invariant: the capture is per thread and per call; a command run by [`command`]
//! never writes to stdout (the caller asks for `--json` or `--quiet`), and a command
//! run by the binary never sees a capture.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use clap::Parser;
use indicatif::ProgressBar;

pub use super::show::builtins;
use super::{dispatch, Cli};

/// What a command gave back when it ran to its end.
#[derive(Debug)]
pub struct Finished {
    /// Its exit code: 0, or 1 for a failed claim, a significant change, no feasible
    /// candidate or a calibration over its bound (not an error: the documents say why).
    pub exit_code: u8,
    /// The documents it would have printed with `--json`, in order.
    pub documents: Vec<serde_json::Value>,
    /// The warnings it would have printed on stderr, without the `stampede: warning: ` prefix.
    pub warnings: Vec<String>,
    /// `run`'s summary table as the terminal shows it without `--json` (no colour).
    pub summary: Option<String>,
}

/// Why a command did not finish: the binary's `stampede: error: …` message (without
/// that prefix) and exit code — 2 for bad input, 3 for I/O — and whether it stopped
/// because `cancel` was set.
#[derive(Debug)]
pub struct Failure {
    pub message: String,
    pub exit_code: u8,
    pub cancelled: bool,
    /// The input named a file that is missing or cannot be read.
    pub unreadable: bool,
}

/// How far the running command is: its current progress bar's position and length
/// (replicas, or a command's own unit), polled from another thread.
#[derive(Clone, Default)]
pub struct Progress(Arc<Mutex<Option<ProgressBar>>>);

impl Progress {
    /// (done, total) of the command's current bar; (0, 0) before it has one.
    pub fn position(&self) -> (u64, u64) {
        let bar = self.0.lock().expect("not poisoned");
        bar.as_ref().map_or((0, 0), |bar| (bar.position(), bar.length().unwrap_or(0)))
    }
}

/// The capture of the command running on this thread.
struct Capture {
    documents: Vec<serde_json::Value>,
    warnings: Vec<String>,
    summary: Option<String>,
    progress: Progress,
}

thread_local! {
    static CAPTURE: RefCell<Option<Capture>> = const { RefCell::new(None) };
}

/// Runs `stampede ARGS…` (`args` without the program's name) on this thread and
/// returns what it would have printed; `cancel` stops it, `progress` shows how far it is.
pub fn command(args: &[String], cancel: Arc<AtomicBool>, progress: Progress) -> Result<Finished, Failure> {
    let parsed = Cli::try_parse_from(std::iter::once("stampede").chain(args.iter().map(String::as_str)));
    let cli = parsed.map_err(|error| Failure {
        // clap's words, as the binary prints them, without its "error: " (the caller's
        // exception says that) and without the usage lines meant for a terminal.
        message: clap_message(&error.render().to_string()),
        exit_code: 2,
        cancelled: false,
        unreadable: false,
    })?;
    let capture = Capture { documents: Vec::new(), warnings: Vec::new(), summary: None, progress };
    let outer = CAPTURE.with(|slot| slot.replace(Some(capture)));
    debug_assert!(outer.is_none(), "one command at a time on a thread");
    // Its outputs record the `stampede` command line it stands for, not the Python
    // process's (`python notebook.py`), as how to run it again.
    let line: Vec<String> = std::iter::once("stampede".to_string()).chain(args.iter().cloned()).collect();
    let outcome = stampede_scenario::base::provenance::with_command_line(line, || {
        stampede_run::runner::cancellable_scope(cancel.clone(), || dispatch(cli.command))
    });
    let capture = CAPTURE.with(|slot| slot.replace(outer)).expect("captured");
    match outcome {
        Ok(status) => {
            let Capture { documents, warnings, summary, .. } = capture;
            Ok(Finished { exit_code: status.code(), documents, warnings, summary })
        }
        Err(error) => Err(Failure {
            message: error.to_string(),
            exit_code: error.exit_code() as u8,
            cancelled: cancel.load(Ordering::Relaxed),
            unreadable: error.unreadable,
        }),
    }
}

/// clap's rendered error without its `error: ` prefix and the usage/help lines.
fn clap_message(rendered: &str) -> String {
    let text = rendered.trim_start_matches("error: ");
    let end = text.find("\n\nUsage:").unwrap_or(text.len());
    text[..end].trim_end().to_string()
}

/// Whether a command is running in process on this thread.
pub(super) fn active() -> bool {
    CAPTURE.with(|slot| slot.borrow().is_some())
}

/// Runs `take` on this thread's capture, if a command runs in process here: whether
/// it did (the caller prints otherwise).
fn captured(take: impl FnOnce(&mut Capture)) -> bool {
    CAPTURE.with(|slot| slot.borrow_mut().as_mut().map(take).is_some())
}

/// Takes `document` when a command runs in process (true), instead of printing it.
pub(super) fn capture_document(document: &serde_json::Value) -> bool {
    captured(|capture| capture.documents.push(document.clone()))
}

/// Takes a warning when a command runs in process (true), instead of printing it.
pub(super) fn capture_warning(text: &str) -> bool {
    captured(|capture| capture.warnings.push(text.to_string()))
}

/// Takes `run`'s summary table when a command runs in process (made only then).
pub(super) fn capture_summary(table: impl FnOnce() -> String) {
    captured(|capture| capture.summary = Some(table()));
}

/// In process, a hidden bar of `total` that the caller's [`Progress`] reads.
pub(super) fn progress_bar(total: u64) -> Option<ProgressBar> {
    CAPTURE.with(|slot| {
        let slot = slot.borrow();
        let capture = slot.as_ref()?;
        let bar = ProgressBar::hidden();
        bar.set_length(total);
        *capture.progress.0.lock().expect("not poisoned") = Some(bar.clone());
        Some(bar)
    })
}
