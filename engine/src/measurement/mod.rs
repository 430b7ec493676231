//! What the models are measured with and checked against: closed-form queueing
//! theory, per-bucket time integrals, latencies by how requests ended and over
//! time, recovery detection on a series, and per-request traces of one replica.
//! Nothing here schedules events.

pub mod buckets;
pub mod ending;
pub mod latency_windows;
pub mod level_series;
pub mod recovery;
pub mod request_latencies;
pub mod sparse_counts;
pub mod theory;
pub mod trace;

// The small log histogram and the running quantile read from it are the policies'
// (the hedge's delay, the adaptive timeout): they live in `stampede-policy`, and the
// models (a graph entry's per-replica quantiles) use them from here.
pub use stampede_policy::{log_histogram, running_quantile};
