//! stampede's experiments layer: scenario files and policy grids, the models'
//! configurations, the parallel replica runner, statistics over replicas, and the
//! pipeline that turns a run into the output folder.
//!
//! Layers, bottom to top — each module imports only from the layers below it (a
//! test, [`layering`], fails on an upward import or a cycle between modules):
//!
//! 1. [`base`] — errors, TOML typing with field paths, enum names;
//! 2. [`inputs`] — the distribution value and the files it reads (samples, HDR, Prometheus);
//! 3. [`scenario`] — the scenario document, overrides, the grid, claims, built-ins;
//! 4. [`models`] — the model registry and one module per model;
//! 5. [`resolved`] — a scenario typed by its model, every grid point validated;
//! 6. [`run`] — runner, statistics, output layout, pipeline, report;
//! 7. [`verify`] — checking `[[verify]]` claims against a run;
//! 8. [`optimize`] — searching a grid and ranges for the best configuration that meets constraints.
//!
//! Flow: [`scenario::builtin::load_scenario_source`] → [`Scenario::resolve`] →
//! [`run::pipeline::execute`] (which calls [`run::runner::run_grid`]) →
//! [`run::report::RunReport`] → [`verify::check`].

pub mod base;
pub mod inputs;
pub mod models;
pub mod optimize;
pub mod resolved;
pub mod run;
pub mod scenario;
pub mod verify;

#[cfg(test)]
mod layering;
#[cfg(test)]
mod tests;

pub use base::error::{Error, ErrorKind, Result};
pub use resolved::{GridPoint, Scenario};
pub use scenario::Overrides;
