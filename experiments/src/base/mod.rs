//! The bottom layer: the error type every layer returns, typing TOML into structs
//! with field-path messages, and parsing the engine's enum names. Knows nothing of
//! scenarios, models or runs.

pub mod checks;
pub mod error;
pub mod names;
pub mod typing;
