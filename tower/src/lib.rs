//! `stampede-tower`: tower middleware that runs the simulator's own policy structs, so
//! what `stampede run` simulated is what ships.
//!
//! Each layer holds one of `stampede_policy`'s structs — the
//! [`CircuitBreaker`](stampede_policy::breaker::CircuitBreaker), the
//! [`ConcurrencyLimiter`](stampede_policy::limiter::ConcurrencyLimiter) (fixed
//! and every adaptive kind), the
//! [`PriorityShedder`](stampede_policy::shedder::PriorityShedder), the
//! [`TokenBucket`](stampede_policy::token_bucket::TokenBucket), and for
//! retries the [`Backoff`](stampede_policy::backoff::Backoff), the
//! [`RetryClassifier`](stampede_policy::classify::RetryClassifier) and the
//! five [`RetryBudget`](stampede_policy::retry_budget::RetryBudget)s, the
//! [`Bulkhead`](stampede_policy::bulkhead::Bulkhead), the
//! [`QuotaMeter`](stampede_policy::quota::QuotaMeter), the
//! [`HedgePolicy`](stampede_policy::hedge::HedgePolicy) and the
//! [`AdmissionController`](stampede_policy::admission::AdmissionController) — and
//! feeds it a real clock ([`Clock`]: monotonic nanoseconds since the layer was built,
//! read from tokio so tests can pause it) and a seeded random stream. Nothing is
//! re-implemented: the decisions are the simulated ones, and the mapping from a live
//! response to what a policy learns ([`outcome`]) is the simulator's.
//!
//! ```no_run
//! use std::time::Duration;
//! use stampede_policy::backoff::Backoff;
//! use stampede_policy::breaker::BreakerConfig;
//! use stampede_policy::classify::RetryClassifier;
//! use stampede_policy::limiter::LimiterKind;
//! use stampede_policy::retry_budget::{RatioBudget, RetryBudget};
//! use stampede_tower::{circuit_breaker, concurrency_limit, retry, RetryConfig};
//! use tower_layer::Stack;
//!
//! let retries = retry(
//!     RetryConfig {
//!         max_attempts: 3,
//!         backoff: Backoff::FullJitter { base: 50_000_000, cap: 1_000_000_000 },
//!         classifier: RetryClassifier::default(),
//!         deadline: Some(Duration::from_secs(2)),
//!     },
//!     RetryBudget::Ratio(RatioBudget::new(0.1, 10.0, 10.0)),
//!     7,
//! );
//! // Outermost first: retries around the breaker around the limit.
//! let stack = Stack::new(
//!     concurrency_limit(LimiterKind::Fixed { limit: 64 }, None, 7),
//!     Stack::new(circuit_breaker(BreakerConfig::default()), retries),
//! );
//! # let _ = stack;
//! ```
//!
//! Shared state: each layer's policy sits behind one mutex ([`shared`]), held for one
//! decision; why not per-core shards is written there.

#![warn(missing_docs)]

pub mod admission;
pub mod bulkhead;
pub mod clock;
pub mod error;
pub mod events;
pub mod fallback;
pub mod gate;
pub mod gates;
#[cfg(feature = "scenario")]
pub mod gateway;
pub mod hedge;
pub mod outcome;
pub mod quota;
pub mod retry;
pub mod retry_after;
#[cfg(feature = "scenario")]
pub mod scenario;
pub mod shared;
pub mod sse;
pub mod steps;
pub mod stream;
mod stream_end;
pub mod timeout;

pub use admission::{
    admission, applicant_with, AdmissionConfig, AdmissionLayer, AdmissionState, Admitted, Applicant, ApplicantOf,
    Class, FromExtensions, Tenant, TimeLeft,
};
pub use bulkhead::{bulkhead, BulkheadLayer, BulkheadService};
pub use clock::Clock;
pub use error::Rejected;
pub use fallback::{fallback, Fallback, FallbackCounts, FallbackLayer};
pub use gate::{AllCritical, CriticalityOf, FromExtension, Gate, GateFuture, GateLayer, Gated};
pub use gates::{circuit_breaker, concurrency_limit, priority_shedder, rate_limit};
#[cfg(feature = "scenario")]
pub use gateway::{gateway_from_scenario, ClassApplicant, ClassService, ClassStack, GatewayStacks};
pub use hedge::{hedge, Hedge, HedgeCounts, HedgeLayer, HedgeState};
pub use outcome::{classify_with, Classified, Classify, ErrorsFail, HttpStatus};
pub use quota::{
    quota_meter, quota_over, quota_store, Quota, QuotaGuard, QuotaLayer, QuotaStore, StreamTokens, Tokens, TokensWith,
};
pub use retry::{backoff, retry, Retry, RetryConfig, RetryCounts, RetryLayer};
pub use retry_after::retry_after;
#[cfg(feature = "scenario")]
pub use scenario::{
    from_cluster_scenario, from_scenario, from_scenario_point, service_from_scenario, EdgeStack, ServiceStack,
};
pub use shared::Shared;
pub use stream::{
    provider_stream_error, stream_timeouts, ErrorEvent, StreamError, StreamTimeout, StreamTimeoutLayer, StreamTimeouts,
    TimedBody,
};
pub use timeout::{timeout, Timeout, TimeoutLayer};

/// The error every layer returns: the service's own, or a [`Rejected`].
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A policy's random stream: the simulator's xoshiro stream derived from `seed` and the
/// layer's purpose, as a replica's are from its master seed.
pub(crate) fn stream(seed: u64, purpose: &'static str) -> stampede_kernel::RngStream {
    stampede_kernel::RngStream::derive(seed, 0, stampede_kernel::StreamPurpose::named(purpose))
}
