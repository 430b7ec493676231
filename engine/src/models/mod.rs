//! The simulated systems. Each model is a struct implementing [`crate::sim::Model`],
//! with its own parameters struct, event enum and results struct.

pub mod buckets;
pub mod cluster;
pub mod dependency;
pub mod gateway;
pub mod mmc;
pub mod provider;
pub mod recovery;
