//! Faults opening and closing: a surge changes the arrival rate, a brownout or stall
//! slows one shard, a shard failure takes it off the ring (its queue fails), a
//! latency spike slows every shard.

use super::model::Cluster;
use super::params::FaultKind;
use super::state::{Event, Refusal};
use crate::components::arrivals::ArrivalProcess;
use crate::kernel::sim::Scheduler;
use crate::kernel::time::Nanos;

impl Cluster<'_> {
    pub(super) fn fault(&mut self, now: Nanos, index: u32, starting: bool, scheduler: &mut Scheduler<Event>) {
        let fault = self.p.faults[index as usize];
        match fault.kind {
            FaultKind::Surge { multiplier } => {
                self.rate_factor = if starting { self.rate_factor * multiplier } else { self.rate_factor / multiplier };
                // Poisson arrivals are memoryless: redraw the next one at the new rate. A
                // replayed trace keeps its instants (a surge does not change a recording).
                if !matches!(self.p.load, Some(ArrivalProcess::Trace(..))) {
                    self.arrival_generation = self.arrival_generation.wrapping_add(1);
                    let next = self.interarrival(now);
                    scheduler.after(next, Event::Arrival { generation: self.arrival_generation });
                }
            }
            FaultKind::Brownout { shard, slowdown } => {
                let s = &mut self.shards[shard as usize];
                if slowdown.is_infinite() {
                    if starting {
                        s.stalls += 1;
                    } else {
                        s.stalls -= 1;
                    }
                } else {
                    s.slowdown = if starting { s.slowdown * slowdown } else { s.slowdown / slowdown };
                }
                if !starting {
                    self.drain_queue(now, shard, scheduler);
                }
            }
            FaultKind::ShardFailure { shard } => {
                // Failures compose: the shard is off the ring while any is on, and a
                // second failure finds its queue already failed.
                let failures = &mut self.shards[shard as usize].failures;
                let first = starting && *failures == 0;
                if starting {
                    *failures += 1;
                } else {
                    debug_assert!(*failures > 0, "a failure ends that started");
                    *failures -= 1;
                }
                self.ring.set_healthy(shard, *failures == 0);
                if first {
                    self.touch(shard, now);
                    // Queued attempts are lost; their clients see a refusal and may retry elsewhere.
                    while let Some(attempt_key) = self.shards[shard as usize].queue.pop_front() {
                        self.queued -= 1;
                        self.in_flight -= 1;
                        self.router.release(shard);
                        if let Some(attempt) = self.attempts.remove(attempt_key) {
                            if !attempt.abandoned {
                                self.attempt_failed(now, attempt.request, Refusal::NoShard, scheduler);
                            }
                        }
                    }
                }
            }
            FaultKind::LatencySpike { factor } => {
                self.spike_factor = if starting { self.spike_factor * factor } else { self.spike_factor / factor };
            }
        }
    }
}
