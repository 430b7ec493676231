//! The service graph (`model = "graph"`): the user's own topology of services,
//! endpoints and calls, run by one monomorphised model that interprets it as data.
//!
//! A **service** has identical instances, each with `workers` and a bounded queue
//! (FIFO, LIFO or CoDel) and optional server-side protection (a concurrency limiter,
//! a priority shedder, a token-bucket rate limit). An **endpoint** does local work and
//! then its steps: more work, or a group of calls that waits for all, a quorum, or the
//! first success. A call goes along an **edge** (caller → callee service), which holds
//! the client policy: network delay, per-attempt timeout, deadline propagation,
//! retries with backoff and a budget, a breaker, hedging, load balancing, fallback.
//! **Workloads** send requests to entry endpoints; **faults** slow, delay, break or
//! crash instances and partition edges.
//!
//! Each service, instance, edge and workload keeps its state in flat arrays (see
//! `entities.rs`, built by `setup.rs`).
//! A request is a tree of calls, attempts and jobs in slabs (see `state.rs`); names
//! were resolved to indices before the replica starts, so nothing looks up a string
//! or allocates per event once the slabs and queues have grown.
//!
//! Every failed or degraded entry request keeps its root [`Cause`]: a job whose calls
//! failed answers with the deciding call's cause, so the entry learns which service
//! failed, and how, however many hops below — and which service caused it (its
//! culprit: what the failing resource was waiting on, see `culprit.rs`); a slow
//! answer learns which service caused most of its time the same way.
//!
//! Invariants (asserted): busy ≤ workers per instance; every level the time
//! integrals read equals the sum over its instances; a job's children are cancelled
//! or done before it is removed; a call waits on exactly `outstanding` attempts.

mod autoscale;
mod cache;
mod client;
mod culprit;
mod entities;
mod fixture;
mod health;
mod model;
pub mod observe;
pub mod params;
mod pool;
pub mod results;
mod server;
mod setup;
mod state;
#[cfg(test)]
mod tests;
mod trace;

pub use fixture::Mechanism;
pub use model::Graph;
pub use params::{
    Alternative, Autoscale, Balance, CacheParams, CallSite, Cause, EdgeParams, EndpointParams, Failure, FailureSet,
    FaultKind, FaultTarget, GraphFault, GraphParams, Refusal, ScaleMetric, ServiceParams, Step, Wait, WorkloadArrivals,
    WorkloadParams,
};
pub use results::{CacheResults, EdgeResults, EntryResults, GraphResults, GraphSeries, ServiceResults};
pub use state::Event;
pub use trace::TraceNames;
