//! `stampede optimize`: the best configuration that meets the constraints, found by
//! spending replicas only where the ranking is in doubt.
//!
//! - [`goal`] — the objective and constraints as the user writes them;
//! - [`space`] — `--range` dimensions and the Halton design that samples them;
//! - [`race`] — common-random-number comparisons, KN elimination, constraint verdicts;
//! - [`search`] — the rounds: first stage, successive halving, refinement, the race;
//! - [`across`] — `--across AXIS`: a grid axis to be robust against, the worst (or
//!   mean) over its values per replica;
//! - [`request`] — what the user asked, checked before anything runs;
//! - [`driver`] — the search run as simulation, checkpointed by round, and the output folder;
//! - [`answer`] — what the terminal, JSON, `optimize.parquet` and `--show-toml` say;
//! - [`calibrate`] — `stampede calibrate`: the same design and refinement on common
//!   random numbers, fitting a scenario's unknowns to production's metrics over time;
//! - [`map`] — `stampede map`: where a metric crosses a level over two fields, by
//!   bisection on common random numbers (the stability map).

#![forbid(unsafe_code)]

pub mod across;
pub mod answer;
pub mod calibrate;
mod driver;
pub mod goal;
pub mod map;
mod race;
mod request;
mod search;
pub mod space;

pub use driver::{execute, Optimized};
pub use request::Request;
