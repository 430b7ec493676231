//! What one gateway replica reports: per-class counts (calls counted from the warm-up
//! on), spend, the failure reasons, the limiter's range, and the turn totals. The
//! experiments layer turns these into metric columns by iterating the enums.

use crate::kernel::Named;
use crate::measurement::request_latencies::{EndingSlots, RequestLatencies};

use super::reason::{Reason, REASONS};

#[derive(Clone, Copy, Debug, Default, PartialEq)]
/// One call class's results (after warm-up).
pub struct ClassResults {
    /// Calls offered.
    pub offered: u64,
    /// Attempts sent, retries included.
    pub attempts: u64,
    /// Attempts after the first.
    pub retries: u64,
    /// Calls answered by their tier.
    pub served: u64,
    /// Failed calls that were served their fallback.
    pub fallbacks: u64,
    /// Calls that failed.
    pub failed: u64,
    /// Failed calls by [`Reason`].
    pub reasons: [u64; REASONS],
    /// Retries the budget refused.
    pub retries_denied_by_budget: u64,
    /// Retries not made because the backoff plus the class's expected call time did
    /// not fit the call's remaining deadline.
    pub retries_denied_by_deadline: u64,
    /// Calls whose cacheable prefix hit the prompt cache, and the input tokens cached.
    pub cache_hits: u64,
    /// Input tokens read from the prompt cache.
    pub cached_tokens: u64,
    /// Spend on calls that were answered, USD.
    pub useful_usd: f64,
    /// Spend on attempts whose answer was not used, USD.
    pub wasted_usd: f64,
    /// Output tokens reserved by the quota meters.
    pub tokens_reserved: u64,
    /// Reserved output tokens handed back unused.
    pub tokens_handed_back: u64,
    /// Times its breaker opened.
    pub breaker_trips: u64,
    /// Every refusal by the class's breaker — more than the calls it failed when a
    /// loop above it retries into the open circuit.
    pub breaker_refusals: u64,
    /// The adaptive limiter's limit at the end, lowest and highest; `None` when the
    /// client has no limiter (the naive client, or a stack without `adaptive`).
    pub limit_final: Option<u32>,
    /// The lowest limit over the run.
    pub limit_min: Option<u32>,
    /// The highest limit over the run.
    pub limit_max: Option<u32>,
    /// p95 of successful attempts' duration (sent to last token), seconds; NaN without any.
    pub attempt_p95_s: f64,
    /// p95 of every call's duration, entering the stack to its answer or its failure
    /// (what the caller waited); NaN without any.
    pub call_p95_s: f64,
}

/// Tenants with results of their own: a workload of more tenants has none (it says
/// how turns spread, not whom to bill; the trace still names every call's tenant).
pub const MAX_TENANT_RESULTS: u32 = 16;

/// One tenant's turns and spend.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct TenantResults {
    /// Turns the tenant offered.
    pub turns_offered: u64,
    /// Turns answered (in full or degraded).
    pub turns_answered: u64,
    /// Calls of the tenant's refused by a local gate.
    pub calls_refused: u64,
    /// Spend on the tenant's calls (foreground and background), USD.
    pub usd: f64,
}

impl ClassResults {
    /// Calls refused by a local gate (admission, queue, limiter, breaker, quota).
    pub fn refused_locally(&self) -> u64 {
        Reason::ALL.iter().filter(|r| r.is_local()).map(|r| self.reasons[r.index()]).sum()
    }
}

/// Scalar results of one replica.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GatewayResults {
    /// In [`super::GatewayParams::classes`] order.
    pub classes: Vec<ClassResults>,
    /// Turns offered.
    pub turns_offered: u64,
    /// Turns whose every foreground call was answered.
    pub turns_answered: u64,
    /// Turns that failed.
    pub turns_failed: u64,
    /// Answered turns with a call served its fallback (a cheaper tier, another class,
    /// a local answer): degraded answers, a subset of `turns_answered`.
    pub turns_degraded: u64,
    /// What the foreground calls of turns answered in full cost, USD.
    pub full_usd: f64,
    /// What the foreground calls of turns answered degraded cost, USD.
    pub degraded_usd: f64,
    /// What the foreground calls of failed turns cost, USD.
    pub failed_turns_usd: f64,
    /// Answered turns' latency, this replica's quantiles (p50, p95, p99), seconds,
    /// within 0.1% ([`ReplicaQuantiles`](crate::kernel::replica_quantiles::ReplicaQuantiles)).
    pub turn_quantiles_s: [f64; 3],
    /// Per tenant (tenant 0 the hot one), when the workload has tenants.
    pub tenants: Vec<TenantResults>,
    /// The measured window (horizon − warm-up), seconds.
    pub window_s: f64,
    /// Events handled, warm-up included.
    pub events: u64,
}

impl GatewayResults {
    /// Calls offered, every class.
    pub fn offered_calls(&self) -> u64 {
        self.classes.iter().map(|c| c.offered).sum()
    }
    /// Attempts sent, every class.
    pub fn attempts(&self) -> u64 {
        self.classes.iter().map(|c| c.attempts).sum()
    }
    /// Retries sent, every class.
    pub fn retries(&self) -> u64 {
        self.classes.iter().map(|c| c.retries).sum()
    }
    /// Spend on answered calls, every class, USD.
    pub fn useful_usd(&self) -> f64 {
        self.classes.iter().map(|c| c.useful_usd).sum()
    }
    /// Spend on attempts whose answer was not used, every class, USD.
    pub fn wasted_usd(&self) -> f64 {
        self.classes.iter().map(|c| c.wasted_usd).sum()
    }
    /// Turns answered in full (no call served its fallback).
    pub fn turns_full(&self) -> u64 {
        self.turns_answered - self.turns_degraded
    }
    /// Spend on every attempt, answered or not, USD.
    pub fn total_usd(&self) -> f64 {
        self.useful_usd() + self.wasted_usd()
    }
    /// Calls failed for `reason`, every class.
    pub fn reason(&self, reason: Reason) -> u64 {
        self.classes.iter().map(|c| c.reasons[reason.index()]).sum()
    }
}

/// Where turns' latencies go: the first three histograms (answered, failed, all;
/// a failed turn's latency is the time until it failed); each class with `latency`
/// has five after them, in class order (see
/// [`super::GatewayParams::latency_histograms`]).
pub(super) const TURN_HISTOGRAM: usize = 0;
pub(super) const TURN_ENDINGS: EndingSlots = EndingSlots::split(TURN_HISTOGRAM, false);

/// One class's histograms (a class with `latency`): its successful attempts' time to
/// first token and total, then its calls by ending (served, failed, all), each from
/// entering the stack to its answer or failure.
#[derive(Clone, Debug)]
pub(super) struct ClassHistograms {
    pub(super) ttft: usize,
    pub(super) total: usize,
    pub(super) calls: RequestLatencies,
}

impl ClassHistograms {
    /// Histograms per class with `latency`.
    pub(super) const LEN: usize = 5;

    pub(super) fn from(first: usize) -> Self {
        ClassHistograms {
            ttft: first,
            total: first + 1,
            calls: RequestLatencies::new(EndingSlots::split(first + 2, false)),
        }
    }
}
