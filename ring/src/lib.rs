//! The consistent-hashing explorer (seed 003, and beyond it): seven placement
//! strategies ([`strategy`]), a ring and its operations written once over any key
//! store ([`explorer`], [`store`]), the SQLite journal that is its source of truth
//! ([`journal`]), what `status` reports ([`status`]) and the strategy comparison
//! ([`compare`]).

#![forbid(unsafe_code)]

pub mod compare;
pub mod explorer;
pub mod hash;
#[cfg(feature = "journal")]
pub mod journal;
pub mod status;
pub mod store;
pub mod strategy;

#[cfg(all(test, feature = "journal"))]
mod tests;

pub use explorer::{Explorer, Node, Op};
#[cfg(feature = "journal")]
pub use journal::{Journal, JournalError};
pub use strategy::{Settings, Strategy};
