//! stampede's engine: the allocation-light discrete-event kernel, named random
//! streams, latency histograms, closed-form theory, and the models.
//!
//! Start with [`sim`] (the kernel) and [`models::mmc`] (the smallest complete model).

pub mod event_queue;
pub mod histogram;
pub mod models;
pub mod policy;
pub mod ring;
pub mod rng;
pub mod sim;
pub mod slab;
pub mod testing;
pub mod theory;
pub mod time;
pub mod timer;

pub use histogram::LatencyHistogram;
pub use rng::{RngStream, StreamPurpose};
pub use sim::{Model, Scheduler, Simulation};
pub use slab::{Slab, SlabKey};
pub use time::{nanos_to_secs, secs_to_nanos, Nanos, NANOS_PER_SEC};
pub use timer::{TimerSlot, TimerTicket};
