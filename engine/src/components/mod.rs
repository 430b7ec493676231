//! Simulated parts a model composes that are neither the kernel nor a policy: they
//! have state of their own and answer a model's requests, but decide nothing about
//! overload. Each is tested alone.

pub mod arrivals;
pub mod distribution;
pub mod lru;
pub mod provider;
pub mod ring;
pub mod zipf;
