//! The bottom layer: the error type every layer returns, typing TOML into structs
//! with field-path messages, parsing the engine's enum names, and the build's
//! provenance (version, commit). Knows nothing of scenarios, models or runs.

pub mod checks;
pub mod error;
pub mod names;
pub mod provenance;
pub mod typing;
