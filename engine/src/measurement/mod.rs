//! What the models are measured with and checked against: closed-form queueing
//! theory, per-bucket time integrals, and recovery detection on a series.
//! Nothing here schedules events.

pub mod buckets;
pub mod recovery;
pub mod theory;
