//! Shared fixtures of the criterion benchmarks in `benches/benches/`.
//!
//! The hold model (Jones, 1986): keep `n` events pending; repeatedly pop the
//! earliest and push one a random increment later. It measures the pending-event set
//! alone. Increments come from a precomputed table so that both the kernel and the
//! reference loop pay exactly the same for them.

#![forbid(unsafe_code)]

use std::cmp::Ordering;

use stampede_engine::{Model, Nanos, RngStream, Scheduler, Simulation, StreamPurpose};

/// The event both hold loops carry: 16 bytes, like a typical model event.
#[derive(Clone, Copy, Debug)]
pub struct HoldEvent {
    pub entity: u32,
    pub kind: u32,
    pub payload: u64,
}

/// Exponential increments (mean 1 ms), a power-of-two table.
pub fn increments() -> Vec<Nanos> {
    let mut rng = RngStream::derive(1, 0, StreamPurpose::named("bench.hold"));
    (0..4096).map(|_| (rng.exponential(1000.0) * 1e9) as Nanos).collect()
}

/// The hold model as a kernel model.
pub struct Hold {
    pub increments: Vec<Nanos>,
    pub cursor: usize,
}

impl Model for Hold {
    type Event = HoldEvent;
    #[inline]
    fn handle(&mut self, _now: Nanos, event: HoldEvent, scheduler: &mut Scheduler<HoldEvent>) {
        self.cursor = (self.cursor + 1) & 4095;
        scheduler.after(self.increments[self.cursor], event);
    }
}

/// A kernel simulation with `pending` events in flight.
pub fn kernel_hold(pending: usize) -> Simulation<Hold> {
    let increments = increments();
    let mut simulation = Simulation::new(Hold { increments: increments.clone(), cursor: 0 }, pending);
    for i in 0..pending {
        simulation.scheduler().at(increments[i & 4095] * 4, HoldEvent { entity: i as u32, kind: 0, payload: 0 });
    }
    simulation
}

/// The reference: `std::collections::BinaryHeap` over the same event, ordered by
/// (time, sequence) reversed into a min-heap.
#[derive(Clone, Copy, Debug)]
pub struct ReferenceEntry {
    pub time: Nanos,
    pub sequence: u64,
    pub event: HoldEvent,
}

impl PartialEq for ReferenceEntry {
    fn eq(&self, other: &Self) -> bool {
        (self.time, self.sequence) == (other.time, other.sequence)
    }
}
impl Eq for ReferenceEntry {}
impl PartialOrd for ReferenceEntry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for ReferenceEntry {
    fn cmp(&self, other: &Self) -> Ordering {
        (other.time, other.sequence).cmp(&(self.time, self.sequence))
    }
}

/// The bare reference loop's state.
pub struct ReferenceHold {
    pub heap: std::collections::BinaryHeap<ReferenceEntry>,
    pub increments: Vec<Nanos>,
    pub cursor: usize,
    pub sequence: u64,
}

impl ReferenceHold {
    pub fn new(pending: usize) -> Self {
        let increments = increments();
        let mut heap = std::collections::BinaryHeap::with_capacity(pending + 1);
        for i in 0..pending {
            let event = HoldEvent { entity: i as u32, kind: 0, payload: 0 };
            heap.push(ReferenceEntry { time: increments[i & 4095] * 4, sequence: i as u64, event });
        }
        ReferenceHold { heap, increments, cursor: 0, sequence: pending as u64 }
    }

    /// One hold operation: pop the earliest, push one later.
    #[inline]
    pub fn hold(&mut self) {
        let entry = self.heap.pop().expect("pending events");
        self.cursor = (self.cursor + 1) & 4095;
        self.heap.push(ReferenceEntry {
            time: entry.time + self.increments[self.cursor],
            sequence: self.sequence,
            event: entry.event,
        });
        self.sequence += 1;
    }
}

/// 2 when `STAMPEDE_BENCH_SLOWDOWN` is set, else 1: the kernel-hold benchmarks (criterion
/// and instruction counts) do their work this many times, the deliberate slowdown that
/// the gates' own tests (`.ci/instruction-gate --self-test`, `benches/abba --self-test`)
/// must catch.
pub fn slowdown_factor() -> usize {
    if std::env::var_os("STAMPEDE_BENCH_SLOWDOWN").is_some() {
        2
    } else {
        1
    }
}
