//! What one gateway replica reports: per-class counts (calls counted from the warm-up
//! on), spend, the failure reasons, the limiter's range, and the turn totals. The
//! experiments layer turns these into metric columns by iterating the enums.

use crate::kernel::Named;

use super::params::CLASSES;
use super::reason::{Reason, REASONS};

#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ClassResults {
    pub offered: u64,
    pub attempts: u64,
    pub retries: u64,
    pub served: u64,
    /// Failed calls that were served their fallback.
    pub fallbacks: u64,
    pub failed: u64,
    /// Failed calls by [`Reason`].
    pub reasons: [u64; REASONS],
    pub retries_denied_by_budget: u64,
    /// Retries not made because the backoff plus the class's expected call time did
    /// not fit the call's remaining deadline.
    pub retries_denied_by_deadline: u64,
    /// Calls whose cacheable prefix hit the prompt cache, and the input tokens cached.
    pub cache_hits: u64,
    pub cached_tokens: u64,
    pub useful_usd: f64,
    pub wasted_usd: f64,
    pub tokens_reserved: u64,
    pub tokens_handed_back: u64,
    pub breaker_trips: u64,
    /// Every refusal by the class's breaker — more than the calls it failed when a
    /// loop above it retries into the open circuit.
    pub breaker_refusals: u64,
    /// The adaptive limiter's limit at the end, lowest and highest; `None` when the
    /// client has no limiter (the naive client, or a stack without `adaptive`).
    pub limit_final: Option<u32>,
    pub limit_min: Option<u32>,
    pub limit_max: Option<u32>,
    /// p95 of successful attempts' duration (sent to last token), seconds; NaN without any.
    pub attempt_p95_s: f64,
    /// p95 of every call's duration, entering the stack to its answer or its failure
    /// (what the caller waited); NaN without any.
    pub call_p95_s: f64,
}

impl ClassResults {
    /// Calls refused by a local gate (admission, queue, limiter, breaker, quota).
    pub fn refused_locally(&self) -> u64 {
        Reason::ALL.iter().filter(|r| r.is_local()).map(|r| self.reasons[r.index()]).sum()
    }
}

/// Scalar results of one replica.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GatewayResults {
    pub classes: [ClassResults; CLASSES],
    pub turns_offered: u64,
    pub turns_answered: u64,
    pub turns_failed: u64,
    pub window_s: f64,
    pub events: u64,
}

impl GatewayResults {
    pub fn offered_calls(&self) -> u64 {
        self.classes.iter().map(|c| c.offered).sum()
    }
    pub fn attempts(&self) -> u64 {
        self.classes.iter().map(|c| c.attempts).sum()
    }
    pub fn retries(&self) -> u64 {
        self.classes.iter().map(|c| c.retries).sum()
    }
    pub fn useful_usd(&self) -> f64 {
        self.classes.iter().map(|c| c.useful_usd).sum()
    }
    pub fn wasted_usd(&self) -> f64 {
        self.classes.iter().map(|c| c.wasted_usd).sum()
    }
    pub fn reason(&self, reason: Reason) -> u64 {
        self.classes.iter().map(|c| c.reasons[reason.index()]).sum()
    }
}

/// Where answered turns' latencies go in [`LATENCY_NAMES`].
pub(super) const TURN_HISTOGRAM: usize = 0;

/// The latency histograms a replica records, in this order.
pub const LATENCY_NAMES: [&str; 11] = [
    "turn_s",
    "guard_ttft_s",
    "guard_total_s",
    "rewrite_ttft_s",
    "rewrite_total_s",
    "answer_ttft_s",
    "answer_total_s",
    "think_ttft_s",
    "think_total_s",
    "title_ttft_s",
    "title_total_s",
];

/// The latency histogram of class `class`'s time to first token (or whole response)
/// and of its total, as indexes into [`LATENCY_NAMES`]; answer_fallback has none.
pub(super) fn class_histograms(class: usize) -> Option<(usize, usize)> {
    (class < super::params::ANSWER_FALLBACK).then_some((1 + 2 * class, 2 + 2 * class))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::gateway::params::CLASS_NAMES;

    #[test]
    fn latency_names_follow_the_classes() {
        assert_eq!(LATENCY_NAMES[0], "turn_s");
        for (class, name) in CLASS_NAMES.iter().enumerate() {
            if let Some((ttft, total)) = class_histograms(class) {
                assert_eq!(LATENCY_NAMES[ttft], format!("{name}_ttft_s"));
                assert_eq!(LATENCY_NAMES[total], format!("{name}_total_s"));
            }
        }
    }
}
