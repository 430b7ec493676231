//! stampede's engine: the policies, the components and measurements models share,
//! and the models, on top of the kernel (the `stampede-kernel` crate, re-exported
//! as [`kernel`]).
//!
//! Layers, each using only the ones before it:
//!
//! * [`kernel`] — time, the event queue, the simulation loop, slabs, timers and
//!   tickets, random streams, histograms (its own crate: it knows no model and no policy);
//! * [`policy`] — the resilience policy library: plain structs taking `now` and an RNG
//!   (the `stampede-policy` crate, re-exported, which production middleware builds
//!   without the models);
//! * [`components`] — simulated parts that several models may compose (the hash ring,
//!   an LLM provider tier);
//! * [`measurement`] — closed-form theory and the time-series measurements models report;
//! * [`models`] — the simulated systems.
//!
//! Start with [`kernel::sim`] and [`models::mmc`] (the smallest complete model).

#![warn(missing_docs)]

pub use stampede_kernel as kernel;
pub use stampede_kernel::named_enum;

pub mod components;
pub mod measurement;
pub mod models;
pub use stampede_policy as policy;
/// Test support (a counting allocator); only with the `test-util` feature, so no
/// production build carries it.
#[cfg(feature = "test-util")]
pub mod testing;

pub use kernel::histogram::LatencyHistogram;
pub use kernel::rng::{RngStream, StreamPurpose};
pub use kernel::sim::{Model, Scheduler, Simulation};
pub use kernel::slab::{Slab, SlabKey};
pub use kernel::time::{nanos_to_secs, secs_to_nanos, Nanos, NANOS_PER_SEC};
pub use kernel::timer::{Ticket, TicketStamp, TimerSlot, TimerTicket};
