//! How a request ended, as its client saw it: answered in full, answered by a
//! fallback, or failed. Models record every ended request under its ending
//! ([`super::request_latencies`]); the latency windows count them by ending.

/// How a request ended, as its client saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ending {
    /// Answered in full.
    Ok,
    /// Answered, but by a fallback (here or below).
    Degraded,
    /// Failed: the client got an error, a refusal, or gave up waiting.
    Failed,
}

impl Ending {
    /// The index of this ending in a per-ending array `[ok, degraded, failed]`.
    pub const fn index(self) -> usize {
        match self {
            Ending::Ok => 0,
            Ending::Degraded => 1,
            Ending::Failed => 2,
        }
    }
}
