//! The sharded cluster: open-loop clients send keyed requests through a
//! consistent-hash router (optionally with bounded loads) to M shards, each a pool of
//! servers with a bounded queue; clients time out, retry by policy, and may be held
//! back by a retry budget and a breaker per shard. Faults (traffic surge, shard
//! brownout or stall, shard failure, cluster-wide latency spike) open and close
//! during the run.
//!
//! Metastability lives here: a server keeps working on an attempt whose client has
//! already given up (unless `drop_abandoned`), so after a fault the cluster can stay
//! busy with wasted work while retries keep the queues full.
//!
//! Entities: requests and attempts live in slabs; a request's timeout is a
//! `TimerSlot` (lazy cancellation) whose ticket waits in one `TimeoutFifo` (every
//! attempt timeout has the same length), so the heap holds one wake-up for all of
//! them instead of an event per attempt. Time series of queue depth, in-flight attempts,
//! attempts and successes are kept per bucket as exact integers, so replicas can be
//! summed in any order.
//!
//! Invariants (asserted): busy ≤ servers on every shard; queue ≤ capacity; the
//! router's load equals attempts routed and not yet finished.
//!
//! **The code**: [`params`] (what a replica is given), [`results`] (what it
//! reports), `state` (entities and events), `model` (the [`Cluster`] struct, event
//! dispatch, integrals, results), `client` (requests, routing, timeouts, retries),
//! `shards` (service, queues, completions) and `faults`.

mod client;
mod faults;
mod model;
pub mod params;
pub mod results;
mod shards;
mod state;

#[cfg(test)]
mod tests;

pub use model::Cluster;
pub use params::{ClusterParams, Fault, FaultKind, QueueDiscipline, RetryPolicy, ServiceTime};
pub use results::{recovery_time, ClusterResults, ClusterSeries, HOPS_TRACKED};
pub use state::Event;
