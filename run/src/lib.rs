//! stampede's run: a resolved scenario (from `stampede-scenario`) executed and
//! written. The parallel replica [`runner`], [`stats`] over replicas,
//! the output folder's [`layout`], latency headline numbers ([`latency`]) and
//! latency over time ([`windows`]), the
//! [`pipeline`] that turns a resolved scenario into the output folder, and the
//! [`report`] (JSON, manifest, terminal table), and the per-call [`trace`] of one
//! replica. It names no model. [`verify`] checks a run's `[[verify]]` claims.
//!
//! Layers, bottom to top: the runner and its statistics, then the output (layout,
//! rows, partials, pipeline, report), then [`verify`]; `stampede-optimize` sits above
//! this crate and `stampede-scenario` below it.

#![forbid(unsafe_code)]

mod batches;
pub mod budget;
mod checkpoint;
pub mod fidelity;
pub mod latency;
pub mod layout;
pub mod moments;
pub mod otlp;
mod over_time;
pub mod partial;
pub mod pipeline;
pub mod plan;
pub mod precision;
pub mod rare;
pub mod report;
mod rows;
pub mod runner;
pub mod shards;
mod sparse;
pub mod staged;
pub mod stats;
pub mod summary;
pub mod trace;
pub mod warmup;
mod windows;

pub mod verify;

#[cfg(test)]
mod tests;
