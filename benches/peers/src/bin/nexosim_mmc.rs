//! The same M/M/c as one NeXosim model: arrivals and service completions are
//! self-scheduled inputs (`#[nexosim(schedulable)]`), the waiting line a queue of
//! arrival times, on one executor thread. NeXosim is built for large benches of
//! communicating models; this measures its cost per event on the smallest one.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use nexosim::model::{schedulable, Context, Model};
use nexosim::simulation::{Mailbox, SimInit};
use nexosim::time::MonotonicTime;
use serde::{Deserialize, Serialize};
use stampede_peers::{report, Params, Rng};

// The totals, read after the run (a model's state stays inside the simulation).
static EVENTS: AtomicU64 = AtomicU64::new(0);
static WAITS: AtomicU64 = AtomicU64::new(0);
static WAITED_NS: AtomicU64 = AtomicU64::new(0);

#[derive(Serialize, Deserialize)]
pub struct Queue {
    #[serde(skip, default = "idle_rng")]
    rng: Rng,
    arrival_rate: f64,
    service_rate: f64,
    servers: usize,
    busy: usize,
    /// Arrival instants of the waiting customers, ns since the start.
    waiting: VecDeque<u64>,
    warmup_ns: u64,
}

fn idle_rng() -> Rng {
    Rng::new(0)
}

/// A delay of `seconds`, at least 1 ns: NeXosim refuses to schedule at the current
/// instant (an exponential draw below 1 ns happens about once in 6 million).
fn delay(seconds: f64) -> Duration {
    Duration::from_secs_f64(seconds).max(Duration::from_nanos(1))
}

fn ns(cx: &Context<Queue>) -> u64 {
    cx.time().duration_since(MonotonicTime::EPOCH).as_nanos() as u64
}

#[Model]
impl Queue {
    #[nexosim(schedulable)]
    async fn arrive(&mut self, _: (), cx: &Context<Self>) {
        EVENTS.fetch_add(1, Ordering::Relaxed);
        let now = ns(cx);
        let next = delay(self.rng.exponential(self.arrival_rate));
        cx.schedule_event(next, schedulable!(Self::arrive), ()).unwrap();
        if self.busy < self.servers {
            self.busy += 1;
            if now >= self.warmup_ns {
                WAITS.fetch_add(1, Ordering::Relaxed);
            }
            let service = delay(self.rng.exponential(self.service_rate));
            cx.schedule_event(service, schedulable!(Self::depart), ()).unwrap();
        } else {
            self.waiting.push_back(now);
        }
    }

    #[nexosim(schedulable)]
    async fn depart(&mut self, _: (), cx: &Context<Self>) {
        EVENTS.fetch_add(1, Ordering::Relaxed);
        let now = ns(cx);
        match self.waiting.pop_front() {
            Some(arrived) => {
                if arrived >= self.warmup_ns {
                    WAITS.fetch_add(1, Ordering::Relaxed);
                    WAITED_NS.fetch_add(now - arrived, Ordering::Relaxed);
                }
                let service = delay(self.rng.exponential(self.service_rate));
                cx.schedule_event(service, schedulable!(Self::depart), ()).unwrap();
            }
            None => self.busy -= 1,
        }
    }

    #[nexosim(init)]
    async fn init(&mut self, cx: &Context<Self>) {
        let first = delay(self.rng.exponential(self.arrival_rate));
        cx.schedule_event(first, schedulable!(Self::arrive), ()).unwrap();
    }
}

fn main() {
    let p = Params::from_args();
    let started = Instant::now();
    for replica in 0..p.replicas {
        let t0 = MonotonicTime::EPOCH;
        let model = Queue {
            rng: Rng::new(p.seed ^ replica.wrapping_mul(0xA24B_AED4_963E_E407)),
            arrival_rate: p.arrival_rate,
            service_rate: p.service_rate,
            servers: p.servers,
            busy: 0,
            waiting: VecDeque::new(),
            warmup_ns: (p.warmup_s * 1e9) as u64,
        };
        let mailbox = Mailbox::new();
        let mut simulation =
            SimInit::with_num_threads(1).add_model(model, mailbox, "queue").init(t0).expect("the bench starts");
        simulation.step_until(t0 + Duration::from_secs_f64(p.horizon_s)).expect("the simulation runs");
    }
    let (events, waits) = (EVENTS.load(Ordering::Relaxed), WAITS.load(Ordering::Relaxed));
    let waited = WAITED_NS.load(Ordering::Relaxed) as f64 / 1e9;
    report("NeXosim 1.0", events, started.elapsed().as_secs_f64(), waited / waits as f64);
}
