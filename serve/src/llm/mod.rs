//! The LLM gateway, interactive: what the Learn and Sandbox pages run. Both build a
//! `gateway` scenario (TOML text, so that what ran is what the page exports), run
//! it on the server off the request thread, and answer JSON.
//!
//! * [`jobs`] — one run at a time per browser tab: a new run cancels the last;
//! * [`learn`] — the ten one-mechanism experiments: knobs → scenario, and the
//!   closed forms their figures are checked against;
//! * [`sandbox`] — the whole gateway: the page's configuration ↔ scenario TOML;
//! * [`figures`] — runs and shapes results: per-replica figures from traces with
//!   95% intervals (Learn), the run's own summaries (Sandbox, equal to `stampede run`
//!   of the same TOML), one replica's trace for the timeline.

pub mod figures;
pub mod jobs;
pub mod learn;
pub mod sandbox;

/// Why a run did not answer.
#[derive(Debug)]
pub enum RunError {
    /// The configuration is wrong (400, the message names the field).
    BadInput(String),
    /// A newer run from the same tab replaced it.
    Cancelled,
    /// Every simulation slot is taken and the queue is full (503, `Retry-After`).
    Busy { retry_after_s: u64 },
    /// Something failed on the server (500).
    Failed(String),
}

impl From<stampede_scenario::Error> for RunError {
    fn from(error: stampede_scenario::Error) -> Self {
        match error.kind {
            stampede_scenario::ErrorKind::BadInput => RunError::BadInput(error.to_string()),
            _ => RunError::Failed(error.to_string()),
        }
    }
}

impl From<jobs::Refused> for RunError {
    fn from(refused: jobs::Refused) -> Self {
        match refused {
            jobs::Refused::Busy { retry_after_s } => RunError::Busy { retry_after_s },
            jobs::Refused::Cancelled => RunError::Cancelled,
        }
    }
}
