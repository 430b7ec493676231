//! The simulated systems. Each model is a struct implementing [`crate::kernel::sim::Model`],
//! with its own parameters struct, event enum and results struct.

pub mod cluster;
pub mod dependency;
pub mod gateway;
pub mod graph;
pub mod mg1;
pub mod mmc;
