//! Scenario files, untyped by any model: the document (`name`, `description`,
//! `model`, `[run]`, the model's sections, `[grid]`, `[[verify]]`), the command
//! line's `--set`/`--grid` overrides, grid expansion into per-point tables, the
//! claims of `[[verify]]` (and how they follow their point: `selector.rs`), the
//! `[optimize]` and `[rare]` defaults (`optimize.rs`, `rare.rs`), and the
//! built-in scenarios. The model layer above types
//! what this layer hands it.

pub mod builtin;
pub mod claims;
pub mod document;
pub(crate) mod grid;
pub(crate) mod optimize;
pub mod overrides;
pub(crate) mod rare;
pub(crate) mod run;
pub(crate) mod selector;

pub use document::{Document, CASE_AXIS};
pub use overrides::{GridAxis, Overrides};
pub use rare::{seconds, RareSection};
pub use run::RunConfig;
