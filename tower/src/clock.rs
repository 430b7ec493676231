//! The real clock the policies read: monotonic nanoseconds since the stack was built.
//!
//! It reads `tokio::time::Instant`, so a test that pauses tokio's clock drives the
//! policies through exact, repeatable times. Invariant: `now()` never decreases.

use std::time::Duration;

use stampede_kernel::Nanos;
use tokio::time::Instant;

/// Monotonic nanoseconds since an epoch fixed when the clock was made.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    epoch: Instant,
}

impl Clock {
    /// A clock whose `now()` is 0 at this instant.
    pub fn new() -> Self {
        Clock { epoch: Instant::now() }
    }

    /// Nanoseconds since the epoch: the `now` every policy struct takes.
    #[inline]
    pub fn now(&self) -> Nanos {
        // 2⁶⁴ ns is 584 years: the conversion cannot overflow in a process's life.
        self.epoch.elapsed().as_nanos() as Nanos
    }
}

impl Default for Clock {
    fn default() -> Self {
        Self::new()
    }
}

/// A `Duration` as the policies' nanoseconds (saturating).
pub fn nanos(duration: Duration) -> Nanos {
    stampede_kernel::time::duration_to_nanos(duration)
}
