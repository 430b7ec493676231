//! stampede's discrete-event kernel: simulated time in integer nanoseconds, a binary
//! heap of small events, the [`Simulation`] loop over a statically dispatched
//! [`Model`], generational slabs for entity state, cancellable timers and shared
//! tickets, named random streams, and latency histograms (pooled, and a replica's own
//! for its quantiles).
//!
//! It is its own crate so that the compiler enforces the layering: the kernel knows
//! no model and no policy. Nothing here does I/O, spawns threads or reads a clock.
//!
//! Invariants kept here: the clock never goes backwards; events at the same
//! nanosecond pop in push order; a random stream depends only on (master seed,
//! replica, purpose); nothing allocates per event once queues and slabs reached
//! their working size.

#![warn(missing_docs)]

pub mod event_queue;
pub mod float;
pub mod histogram;
pub mod names;
pub mod replica_quantiles;
pub mod rng;
pub mod sim;
pub mod slab;
pub mod splitting;
pub mod time;
pub mod timeout_fifo;
pub mod timer;
pub mod ziggurat;

pub use histogram::LatencyHistogram;
pub use names::Named;
pub use replica_quantiles::ReplicaQuantiles;
pub use rng::{RngStream, StreamPurpose};
pub use sim::{Model, Scheduler, Simulation};
pub use slab::{Slab, SlabKey};
pub use time::{nanos_to_secs, secs_to_nanos, Nanos, NANOS_PER_SEC};
pub use timeout_fifo::{TimeoutFifo, WakeUp};
pub use timer::{Ticket, TicketStamp, TimerSlot, TimerTicket};
