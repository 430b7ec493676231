//! stampede's scenario layer: what a user writes and what it means. The scenario
//! document with its overrides, grid and claims; distributions and load read from
//! data; one module per model with its configuration, validation and metrics; and a
//! scenario resolved into validated grid points that the run crate executes.
//!
//! Layers, bottom to top — each module imports only from the layers below it (a
//! test, `tests/layering.rs`, fails on an upward import or a cycle between modules):
//!
//! 1. [`base`] — errors, TOML typing with field paths, enum names;
//! 2. [`inputs`] — the distribution value and the files it reads (samples, HDR, Prometheus);
//! 3. [`scenario`] — the scenario document, overrides, the grid, claims, built-ins;
//! 4. [`models`] — the model registry and one module per model;
//! 5. [`schema`] — what a run writes: the output schema and every table's columns;
//! 6. [`resolved`] — a scenario typed by its model, every grid point validated.
//!
//! Above this crate: `stampede-run` (the runner, statistics, the output folder,
//! verify) and `stampede-optimize` (the search) — Cargo keeps them above.
//!
//! Flow: [`scenario::builtin::load_scenario_source`] → [`Scenario::resolve`] → the
//! run crate's `pipeline::execute`.

#![forbid(unsafe_code)]

pub mod base;
pub mod inputs;
pub mod models;
pub mod resolved;
pub mod scenario;
pub mod schema;

pub use base::error::{Error, ErrorKind, Result};
pub use resolved::{GridPoint, Scenario};
pub use scenario::Overrides;
