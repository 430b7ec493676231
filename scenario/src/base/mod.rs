//! The bottom layer: the error type every layer returns, typing TOML into structs
//! with field-path messages, parsing the engine's enum names, and the build's
//! provenance (version, commit), and the resource guard's table of limits (`limits`).
//! Knows nothing of scenarios, models or runs.

pub(crate) mod checks;
pub mod error;
pub mod limits;
pub(crate) mod names;
pub mod numbers;
pub mod provenance;
pub mod suggest;
pub mod typing;
