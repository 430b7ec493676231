//! CoDel (RFC 8289), the controlled-delay queue discipline, as a dequeue-time
//! decision: given the sojourn time of the item about to be served, drop it or not.
//!
//! When sojourn times stay above `target` for a whole `interval`, CoDel enters a
//! dropping state and drops at dequeue with spacing `interval/√count`, which grows
//! denser until the standing queue is gone; it leaves the state as soon as a sojourn
//! falls below the target (or the queue empties). Used by the bulkhead and by the
//! cluster model's shard queues.

use crate::kernel::time::Nanos;

/// CoDel's parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CoDelConfig {
    /// The standing queue delay CoDel tolerates.
    pub target: Nanos,
    /// How long the delay must stay above the target before dropping starts.
    pub interval: Nanos,
}

/// CoDel's state for one queue.
#[derive(Clone, Copy, Debug)]
pub struct CoDel {
    config: CoDelConfig,
    first_above_time: Nanos,
    drop_next: Nanos,
    count: u32,
    last_count: u32,
    dropping: bool,
}

impl CoDel {
    /// CoDel with `config`, not dropping.
    pub fn new(config: CoDelConfig) -> Self {
        assert!(config.interval > 0, "CoDel interval must be positive");
        CoDel { config, first_above_time: 0, drop_next: 0, count: 0, last_count: 0, dropping: false }
    }

    /// RFC 8289's dequeue logic for the item leaving the queue now after `sojourn`;
    /// `queue_empty_after` says whether anything else is waiting. True = drop it.
    #[inline]
    pub fn should_drop(&mut self, now: Nanos, sojourn: Nanos, queue_empty_after: bool) -> bool {
        let CoDelConfig { target, interval } = self.config;
        let control_law = |t: Nanos, count: u32| t + (interval as f64 / (count.max(1) as f64).sqrt()) as Nanos;
        let ok_to_drop = if sojourn < target || queue_empty_after {
            self.first_above_time = 0;
            false
        } else if self.first_above_time == 0 {
            self.first_above_time = now + interval;
            false
        } else {
            now >= self.first_above_time
        };
        if self.dropping {
            if !ok_to_drop {
                self.dropping = false;
                false
            } else if now >= self.drop_next {
                self.count += 1;
                self.drop_next = control_law(self.drop_next, self.count);
                true
            } else {
                false
            }
        } else if ok_to_drop {
            self.dropping = true;
            let delta = self.count.saturating_sub(self.last_count);
            self.count = if delta > 1 && now.saturating_sub(self.drop_next) < 16 * interval { delta } else { 1 };
            self.drop_next = control_law(now, self.count);
            self.last_count = self.count;
            true
        } else {
            false
        }
    }
}
