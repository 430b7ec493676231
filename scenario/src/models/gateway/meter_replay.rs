//! The output meter's reservation bound, found by replaying the meter alone.
//!
//! A call reserves `max_tokens` of its tier's output bucket when it is admitted and
//! hands back what it did not write when it ends, while the bucket refills at OTPM ÷ 60
//! tokens a second the whole time, up to `output_burst_s` of refill. So reservations in
//! flight are not a semaphore on the bucket: refill repairs each one within
//! `max_tokens ÷ refill` seconds, and a hand-back that would overflow a full bucket is
//! lost. Whether an arrival finds `max_tokens` depends on the depth, the refill and when
//! the hand-backs come back: a reflected process with delayed downward jumps and no
//! closed form (a Chernoff bound on it was 10× pessimistic at a 1% refusal). So
//! `capacity` replays it: Poisson arrivals of every class on the tier at their planned
//! rates, each call's output drawn from its class, each call ending after the unloaded
//! time for that output; a call that finds too few tokens waits for refill (as the
//! stack's quota gate does, up to `gateway.limiter_longest_wait_s`) or is refused.
//!
//! Invariants: the replay is deterministic (one fixed stream, the same draws at every
//! rate: common random numbers, so the refused share rises with the rate and a
//! bisection converges), and it keeps no draws: its only allocation is the event heap
//! (the calls in flight).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use stampede_engine::kernel::time::{secs_to_nanos, Nanos};
use stampede_engine::policy::token_bucket::TokenBucket;
use stampede_engine::{RngStream, StreamPurpose};

/// The refused share a sustainable rate allows, per class.
pub const REFUSED_SHARE: f64 = 0.03;

/// Arrivals replayed per rate (the first [`UNCOUNTED`] start the meter in its steady
/// state and are not counted): about 280 refusals at the 1% mark, so the bisection's
/// answer moves by a few percent with the draws, not more.
const ARRIVALS: usize = 30_000;
const UNCOUNTED: usize = 2_000;

/// A class needs this many counted arrivals for its own refused share to decide.
const DECIDING_ARRIVALS: u64 = 500;

/// Bisection steps: the bound to 2⁻¹⁴ of the fluid bound.
const STEPS: u32 = 14;

/// One class of calls on the tier.
#[derive(Clone, Debug, PartialEq)]
pub struct Stream {
    /// Calls (attempts) per unit of the rate being bisected (per turn, or 1 per call/s).
    pub per_unit: f64,
    pub max_tokens: u64,
    pub output_mean: f64,
    pub output_sd: f64,
    /// The unloaded time to first token (s) and decode speed (tokens/s), mean jitter in.
    pub first_token_s: f64,
    pub decode_tokens_per_s: f64,
}

/// The tier's output bucket as the client meets it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Meter {
    pub otpm: u64,
    pub burst_s: f64,
    /// How long a call may wait for tokens before it is refused (0: a provider's 429).
    pub patience_s: f64,
}

impl Meter {
    fn capacity(&self) -> u64 {
        (self.otpm as f64 * self.burst_s / 60.0).floor().max(1.0) as u64
    }
}

/// The unit rate (below `fluid`) at which some class has [`REFUSED_SHARE`] of its calls
/// refused for want of output tokens, or `None` when none does even at `fluid` (the
/// fluid bounds then decide). A quick test first: a bucket holding the p99.9 of
/// reservations in flight at `fluid` as if none were ever repaired never refuses.
pub fn reservation_bound(meter: Meter, streams: &[Stream], fluid: f64) -> Option<f64> {
    let streams: Vec<&Stream> = streams.iter().filter(|s| s.per_unit > 0.0 && s.max_tokens > 0).collect();
    if streams.is_empty() || !(fluid.is_finite() && fluid > 0.0) {
        return None;
    }
    let held: f64 = streams.iter().map(|s| fluid * s.per_unit * service_s(s, s.output_mean)).sum();
    let largest = streams.iter().map(|s| s.max_tokens).max().expect("not empty") as f64;
    let calls_p999 = held + 3.1 * held.sqrt() + 1.0;
    if calls_p999 * largest <= meter.capacity() as f64 {
        return None;
    }
    if refused_share(meter, &streams, fluid) <= REFUSED_SHARE {
        return None;
    }
    let (mut low, mut high) = (0.0, fluid);
    for _ in 0..STEPS {
        let middle = (low + high) / 2.0;
        if refused_share(meter, &streams, middle) <= REFUSED_SHARE {
            low = middle;
        } else {
            high = middle;
        }
    }
    Some(low)
}

fn service_s(stream: &Stream, output: f64) -> f64 {
    stream.first_token_s + output / stream.decode_tokens_per_s
}

/// The replay's random draws: the same at every rate (one fixed stream, started
/// afresh), drawn as the replay goes rather than kept — 30,000 arrivals kept were a
/// 720 kB allocation whose release moved glibc's mmap threshold and made the next
/// replica's zeroed buffers cost a memset (+34% on a gateway replica's instructions).
struct Draws<'a> {
    streams: &'a [&'a Stream],
    rng: RngStream,
    total: f64,
    left: usize,
}

impl<'a> Draws<'a> {
    fn new(streams: &'a [&'a Stream]) -> Self {
        const PURPOSE: StreamPurpose = StreamPurpose::named("capacity.meter_replay");
        let total = streams.iter().map(|s| s.per_unit).sum();
        Draws { streams, rng: RngStream::derive(0, 0, PURPOSE), total, left: ARRIVALS }
    }
}

impl Iterator for Draws<'_> {
    /// A standard exponential gap, the class, the output tokens.
    type Item = (f64, u32, u64);

    fn next(&mut self) -> Option<Self::Item> {
        self.left = self.left.checked_sub(1)?;
        let gap = self.rng.standard_exponential();
        let mut pick = self.rng.uniform01() * self.total;
        let class = self
            .streams
            .iter()
            .position(|s| {
                pick -= s.per_unit;
                pick < 0.0
            })
            .unwrap_or(self.streams.len() - 1);
        let s = self.streams[class];
        let output = self.rng.normal(s.output_mean, s.output_sd).round().clamp(0.0, s.max_tokens as f64) as u64;
        Some((gap, class as u32, output))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    /// A call ends: hand back this many tokens.
    Ends { handed_back: u64 },
    /// A call looks for its tokens: on arriving (`first`), or again after waiting
    /// (its class, output, whether it counts, and when its patience runs out).
    Looks { class: u32, output: u64, counted: bool, gives_up: Nanos, first: bool },
}

/// The largest refused share of any class deciding it, at `rate` units a second.
fn refused_share(meter: Meter, streams: &[&Stream], rate: f64) -> f64 {
    let total: f64 = streams.iter().map(|s| s.per_unit).sum::<f64>() * rate;
    let mut bucket = TokenBucket::new(meter.capacity(), meter.otpm, secs_to_nanos(60.0));
    let patience = secs_to_nanos(meter.patience_s);
    let mut events: BinaryHeap<Reverse<(Nanos, u64, Event)>> = BinaryHeap::new();
    let mut sequence = 0u64;
    let (mut arrived, mut refused) = (vec![0u64; streams.len()], vec![0u64; streams.len()]);
    let mut clock = 0.0;
    let mut draws = Draws::new(streams).enumerate();
    let mut next_at = || {
        let (index, (gap, class, output)) = draws.next()?;
        clock += gap / total;
        Some((secs_to_nanos(clock), class, output, index >= UNCOUNTED))
    };
    let mut arrival = next_at();
    loop {
        let due = events.peek().map(|Reverse((at, ..))| *at);
        let arrives_first = match (arrival, due) {
            (None, None) => break,
            (Some((at, ..)), Some(due)) => at < due,
            (arrives, _) => arrives.is_some(),
        };
        let (now, event) = if arrives_first {
            let (at, class, output, counted) = arrival.expect("an arrival comes first");
            arrival = next_at();
            (at, Event::Looks { class, output, counted, gives_up: at.saturating_add(patience), first: true })
        } else {
            let Reverse((at, _, event)) = events.pop().expect("an event is due");
            (at, event)
        };
        match event {
            Event::Ends { handed_back } => bucket.refund(now, handed_back),
            Event::Looks { class, output, counted, gives_up, first } => {
                let stream = streams[class as usize];
                if counted && first {
                    arrived[class as usize] += 1;
                }
                match bucket.wait_time(now, stream.max_tokens) {
                    Some(0) => {
                        assert!(bucket.try_take(now, stream.max_tokens), "the tokens are there");
                        let ends = now + secs_to_nanos(service_s(stream, output as f64));
                        sequence += 1;
                        events.push(Reverse((ends, sequence, Event::Ends { handed_back: stream.max_tokens - output })));
                    }
                    Some(wait) if now.saturating_add(wait) <= gives_up => {
                        sequence += 1;
                        let again = Event::Looks { class, output, counted, gives_up, first: false };
                        events.push(Reverse((now + wait, sequence, again)));
                    }
                    _ => refused[class as usize] += counted as u64,
                }
            }
        }
    }
    let deciding = arrived.iter().zip(&refused).filter(|(a, _)| **a >= DECIDING_ARRIVALS);
    let share = deciding.map(|(a, r)| *r as f64 / *a as f64).fold(f64::NAN, f64::max);
    if share.is_nan() {
        // No class has enough calls alone: all of them together.
        refused.iter().sum::<u64>() as f64 / arrived.iter().sum::<u64>().max(1) as f64
    } else {
        share
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply() -> Stream {
        Stream {
            per_unit: 1.0,
            max_tokens: 1200,
            output_mean: 400.0,
            output_sd: 150.0,
            first_token_s: 0.96,
            decode_tokens_per_s: 60.0,
        }
    }

    /// A bucket deep enough for every reservation in flight never refuses: the fluid
    /// bound decides.
    #[test]
    fn a_deep_bucket_leaves_the_fluid_bound() {
        let meter = Meter { otpm: 36_000, burst_s: 60.0, patience_s: 2.0 };
        assert_eq!(reservation_bound(meter, &[reply()], 1.5), None);
    }

    /// The refused share rises with the rate, and the bound sits where it crosses 1%:
    /// a short bucket binds far below the fluid 1.5 calls/s, a longer one less so, and
    /// waiting for refill (the quota gate's patience) buys rate.
    #[test]
    fn shorter_buckets_and_no_patience_bind_sooner() {
        let bound = |burst_s, patience_s| {
            reservation_bound(Meter { otpm: 36_000, burst_s, patience_s }, &[reply()], 1.5).unwrap_or(1.5)
        };
        let (four, eight, eight_waiting) = (bound(4.0, 0.0), bound(8.0, 0.0), bound(8.0, 2.0));
        assert!(four < eight && eight < eight_waiting && eight_waiting < 1.5, "{four} {eight} {eight_waiting}");
        let meter = Meter { otpm: 36_000, burst_s: 8.0, patience_s: 2.0 };
        let streams = [reply()];
        let streams: Vec<&Stream> = streams.iter().collect();
        let at = |rate| refused_share(meter, &streams, rate);
        assert!(at(0.9 * eight_waiting) <= REFUSED_SHARE && at(1.1 * eight_waiting) > REFUSED_SHARE);
        assert!(at(0.2) < at(0.6) && at(0.6) < at(1.2), "{} {} {}", at(0.2), at(0.6), at(1.2));
    }
}
