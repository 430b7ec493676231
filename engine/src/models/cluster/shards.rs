//! The shards' side: a service time per attempt (faults may slow a shard), servers
//! taking attempts from the queue (FIFO, LIFO or CoDel, dropping abandoned work if
//! asked), and an attempt's completion reaching its client — or nobody.

use super::model::Cluster;
use super::params::{QueueDiscipline, ServiceTime};
use super::state::{Event, Refusal};
use crate::kernel::sim::Scheduler;
use crate::kernel::slab::SlabKey;
use crate::kernel::time::round_to_nanos;
use crate::kernel::time::Nanos;
use crate::measurement::ending::Ending;
use crate::policy::classify::Outcome;

impl Cluster<'_> {
    pub(super) fn service_time(&mut self, shard: u32) -> Nanos {
        let base = match &self.p.service {
            ServiceTime::Exponential { mean } => self.service_rng.standard_exponential() * *mean as f64,
            ServiceTime::Lognormal { median, sigma } => *median as f64 * self.service_rng.lognormal(0.0, *sigma),
            ServiceTime::Constant { value } => *value as f64,
            ServiceTime::Distribution(distribution) => {
                distribution.sample_s(&mut self.service_rng) * crate::kernel::time::NANOS_PER_SEC as f64
            }
        };
        round_to_nanos(base * self.shards[shard as usize].slowdown * self.spike_factor)
    }

    pub(super) fn start(&mut self, now: Nanos, shard: u32, attempt: SlabKey, scheduler: &mut Scheduler<Event>) {
        self.touch(shard, now);
        self.shards[shard as usize].busy += 1;
        self.busy_servers += 1;
        self.attempts.get_mut(attempt).expect("live attempt").service_started = now;
        let service = self.service_time(shard);
        scheduler.after(service, Event::Done { shard, attempt });
    }

    /// Starts waiting attempts on free servers of `shard`.
    pub(super) fn drain_queue(&mut self, now: Nanos, shard: u32, scheduler: &mut Scheduler<Event>) {
        loop {
            let s = &mut self.shards[shard as usize];
            if s.busy >= self.p.servers || s.stalls > 0 {
                return;
            }
            if s.queue.is_empty() {
                return;
            }
            self.touch(shard, now);
            let s = &mut self.shards[shard as usize];
            let next =
                if self.p.discipline == QueueDiscipline::Lifo { s.queue.pop_back() } else { s.queue.pop_front() };
            let Some(attempt) = next else { return };
            self.queued -= 1;
            let (abandoned, sent_at) = self.attempts.get(attempt).map_or((true, now), |a| (a.abandoned, a.sent_at));
            let queue_empty_after = self.shards[shard as usize].queue.is_empty();
            let codel_drop = self.shards[shard as usize]
                .codel
                .as_mut()
                .is_some_and(|codel| codel.should_drop(now, now - sent_at, queue_empty_after));
            if codel_drop || (abandoned && self.p.drop_abandoned) {
                let dropped = self.attempts.remove(attempt);
                self.in_flight -= 1;
                self.router.release(shard);
                if let Some(dropped) = dropped.filter(|a| codel_drop && !a.abandoned) {
                    // The server answers an error at once: the client may retry.
                    if let Some(permit) = dropped.permit {
                        self.breakers[shard as usize].record(now, permit, Outcome::Overloaded, now - dropped.sent_at);
                    }
                    self.attempt_failed(now, dropped.request, Refusal::CoDel, scheduler);
                }
                continue;
            }
            self.start(now, shard, attempt, scheduler);
        }
    }

    pub(super) fn done(&mut self, now: Nanos, shard: u32, attempt_key: SlabKey, scheduler: &mut Scheduler<Event>) {
        let Some(attempt) = self.attempts.remove(attempt_key) else { return };
        self.touch(shard, now);
        self.shards[shard as usize].busy -= 1;
        self.busy_servers -= 1;
        self.in_flight -= 1;
        self.router.release(shard);
        let service = now - attempt.service_started;
        let shard_up = self.ring.is_healthy(shard);
        if attempt.abandoned || !shard_up {
            if self.counted(now) {
                self.wasted_ns += service as u128;
            }
        } else if let Some(request) = self.requests.remove(attempt.request) {
            let mut request = request;
            request.timer.cancel();
            if let Some(permit) = attempt.permit {
                self.breakers[shard as usize].record(now, permit, Outcome::Success, now - attempt.sent_at);
            }
            self.p.budget.on_outcome(now, true);
            if let Some(tracer) = self.tracer.as_deref_mut() {
                tracer.attempt_ended(attempt.request, now, None, "200");
                tracer.call_ended(attempt.request, now, "served");
            }
            if request.counted {
                self.results.successes += 1;
                self.endings.record(self.latencies, now, Ending::Ok, now - request.arrived_at);
            }
            self.request_ended(request.closed_loop, scheduler);
            let bucket = self.bucket_of(now);
            if let Some(b) = self.series.successes.get_mut(bucket) {
                *b += 1;
            }
        }
        self.drain_queue(now, shard, scheduler);
        self.check(shard);
    }
}
