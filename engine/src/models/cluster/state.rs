//! The cluster's entities and events: requests (with their timeout slot), attempts,
//! shards (servers, queue, CoDel, breaker), the Zipf key sampler, and why an attempt
//! was refused. Requests and attempts live in slabs; events carry their keys.

use std::collections::VecDeque;

use crate::kernel::rng::RngStream;
use crate::kernel::slab::SlabKey;
use crate::kernel::time::Nanos;
use crate::kernel::timer::{TimerSlot, TimerTicket};
use crate::policy::breaker::Permit;
use crate::policy::codel::CoDel;

/// Events of the cluster model (24 bytes).
#[derive(Clone, Copy, Debug)]
pub enum Event {
    /// A client request arrives.
    Arrival {
        /// The arrival stream it belongs to: a surge restarts the stream, and arrivals of an older one are ignored.
        generation: u32,
    },
    /// An attempt leaves the client (after its backoff).
    Send {
        /// The request.
        request: SlabKey,
    },
    /// A shard finished serving an attempt.
    Done {
        /// The shard.
        shard: u32,
        /// The attempt.
        attempt: SlabKey,
    },
    /// The attempt-timeout FIFO's wake-up: every timeout due now fires (see
    /// [`crate::kernel::timeout_fifo`]); a stale ticket is ignored.
    Timeouts {
        /// Tells a current wake-up from a stale one.
        ticket: TimerTicket,
    },
    /// A fault begins.
    FaultStart {
        /// Its index in the parameters' faults.
        index: u32,
    },
    /// A fault ends.
    FaultEnd {
        /// Its index in the parameters' faults.
        index: u32,
    },
    /// A closed-loop user has finished thinking.
    UserRequest,
}

#[derive(Clone, Copy, Debug)]
pub(super) struct Request {
    pub(super) key_hash: u32,
    /// Sent by a closed-loop user, who asks again after thinking.
    pub(super) closed_loop: bool,
    pub(super) arrived_at: Nanos,
    pub(super) counted: bool,
    pub(super) attempts: u32,
    pub(super) timer: TimerSlot,
    pub(super) attempt: Option<SlabKey>,
    pub(super) previous_backoff: Nanos,
}

#[derive(Clone, Copy, Debug)]
pub(super) struct Attempt {
    pub(super) request: SlabKey,
    pub(super) shard: u32,
    pub(super) service_started: Nanos,
    pub(super) abandoned: bool,
    pub(super) permit: Option<Permit>,
    pub(super) sent_at: Nanos,
}

pub(super) struct Shard {
    pub(super) queue: VecDeque<SlabKey>,
    pub(super) busy: u32,
    /// When `load_area` was last brought up to date: a shard's load integral is advanced
    /// only when its own load changes (and at the end), not on every event of the cluster.
    pub(super) load_since: Nanos,
    pub(super) slowdown: f64,
    pub(super) stalls: u32,
    /// Shard failures on now: the shard is off the ring while any is (they compose).
    pub(super) failures: u32,
    pub(super) load_area: u128,
    pub(super) codel: Option<CoDel>,
}

/// Zipf sampler by inversion over a precomputed CDF (built once per replica).
pub(super) struct KeySampler {
    pub(super) cdf: Vec<f64>,
    pub(super) keys: u64,
}

#[derive(Clone, Copy, Debug)]
pub(super) enum Refusal {
    QueueFull,
    Breaker,
    NoShard,
    CoDel,
}

impl Refusal {
    /// Its name in traces.
    pub(super) fn name(self) -> &'static str {
        match self {
            Refusal::QueueFull => "queue_full",
            Refusal::Breaker => "breaker_open",
            Refusal::NoShard => "no_shard",
            Refusal::CoDel => "codel_drop",
        }
    }
}

impl KeySampler {
    pub(super) fn new(keys: u64, s: f64) -> Self {
        if s <= 0.0 {
            return KeySampler { cdf: Vec::new(), keys };
        }
        let mut cdf = Vec::with_capacity(keys as usize);
        let mut total = 0.0;
        for rank in 1..=keys {
            total += (rank as f64).powf(-s);
            cdf.push(total);
        }
        cdf.iter_mut().for_each(|c| *c /= total);
        KeySampler { cdf, keys }
    }

    #[inline]
    pub(super) fn draw(&self, rng: &mut RngStream) -> u64 {
        if self.cdf.is_empty() {
            rng.below(self.keys)
        } else {
            let u = rng.uniform01();
            (self.cdf.partition_point(|&c| c < u) as u64).min(self.keys - 1)
        }
    }
}
