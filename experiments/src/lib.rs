//! stampede's experiments layer: scenario files and policy grids, the parallel
//! replica runner, statistics over replicas, and the pipeline that turns a run
//! into the output folder.
//!
//! Flow: [`builtin::load_scenario_source`] → [`scenario::Scenario::resolve`] →
//! [`pipeline::execute`] (which calls [`runner::run_grid`]) → [`report::RunReport`].

pub mod builtin;
pub mod capacity;
pub mod cluster_config;
pub mod dependency_config;
pub mod error;
pub mod gateway_config;
pub mod llm_fixture;
pub mod models;
pub mod pipeline;
pub mod report;
pub mod runner;
pub mod scenario;
pub mod stats;
pub mod verify;

pub use error::{Error, ErrorKind, Result};
pub use scenario::{Overrides, Scenario};
