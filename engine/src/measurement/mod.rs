//! What the models are measured with and checked against: closed-form queueing
//! theory, per-bucket time integrals, latencies by how requests ended and over
//! time, recovery detection on a series, and per-request traces of one replica.
//! Nothing here schedules events.

pub mod buckets;
pub mod ending;
pub mod latency_windows;
pub mod level_series;
pub mod log_histogram;
pub mod recovery;
pub mod request_latencies;
pub mod running_quantile;
pub mod sparse_counts;
pub mod theory;
pub mod trace;
