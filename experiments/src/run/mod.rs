//! The run machinery: the parallel replica [`runner`], [`stats`] over replicas,
//! the output folder's [`layout`], latency headline numbers ([`latency`]) and
//! latency over time ([`windows`]), the
//! [`pipeline`] that turns a resolved scenario into the output folder, and the
//! [`report`] (JSON, manifest, terminal table), and the per-call [`trace`] of one
//! replica. It names no model.

pub mod batches;
pub mod budget;
pub mod checkpoint;
pub mod latency;
pub mod layout;
pub mod moments;
pub mod over_time;
pub mod partial;
pub mod pipeline;
pub mod plan;
pub mod report;
pub mod rows;
pub mod runner;
pub mod shards;
pub mod sparse;
pub mod stats;
pub mod summary;
pub mod trace;
pub mod windows;
