//! The practical lower bound on cost per event: an M/M/c as a bare loop — a binary
//! heap of (time, sequence) keys, xoshiro256++, an exponential draw and a running
//! mean of the wait. No statistics beyond it, no histograms, no policies.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::time::Instant;

use stampede_peers::{report, Params, Rng};

const ARRIVAL: u8 = 0;
const DEPARTURE: u8 = 1;

fn main() {
    let p = Params::from_args();
    let (horizon, warmup) = ((p.horizon_s * 1e9) as u64, (p.warmup_s * 1e9) as u64);
    let started = Instant::now();
    let (mut events, mut waits, mut waited) = (0u64, 0u64, 0.0f64);
    for replica in 0..p.replicas {
        let mut rng = Rng::new(p.seed ^ replica.wrapping_mul(0xA24B_AED4_963E_E407));
        let mut heap: BinaryHeap<Reverse<(u64, u64, u8)>> = BinaryHeap::new();
        let mut queue: VecDeque<u64> = VecDeque::new();
        let (mut busy, mut sequence) = (0usize, 0u64);
        let ns = |s: f64| (s * 1e9) as u64;
        heap.push(Reverse((ns(rng.exponential(p.arrival_rate)), sequence, ARRIVAL)));
        while let Some(Reverse((now, _, kind))) = heap.pop() {
            if now > horizon {
                break;
            }
            events += 1;
            sequence += 1;
            if kind == ARRIVAL {
                heap.push(Reverse((now + ns(rng.exponential(p.arrival_rate)), sequence, ARRIVAL)));
                if busy < p.servers {
                    busy += 1;
                    if now >= warmup {
                        waits += 1;
                    }
                    heap.push(Reverse((now + ns(rng.exponential(p.service_rate)), sequence, DEPARTURE)));
                } else {
                    queue.push_back(now);
                }
            } else if let Some(arrived) = queue.pop_front() {
                if arrived >= warmup {
                    waits += 1;
                    waited += (now - arrived) as f64 / 1e9;
                }
                heap.push(Reverse((now + ns(rng.exponential(p.service_rate)), sequence, DEPARTURE)));
            } else {
                busy -= 1;
            }
        }
    }
    report("minimal Rust loop", events, started.elapsed().as_secs_f64(), waited / waits as f64);
}
