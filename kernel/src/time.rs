//! Simulated time.
//!
//! Every instant and duration inside a replica is an integer count of nanoseconds
//! since the replica started. Integers keep results exact and portable: the same
//! seed gives the same event order on every machine, and accumulators of
//! time-weighted quantities (queue length × dwell time) add up without rounding.
//! Floating-point seconds appear only at the edges: in scenario files and in output.

/// Nanoseconds of simulated time. A `u64` spans 584 years.
pub type Nanos = u64;

/// Nanoseconds in one second.
pub const NANOS_PER_SEC: u64 = 1_000_000_000;

/// Converts seconds (as written in a scenario) to nanoseconds, rounding to the nearest.
///
/// Panics in debug builds on a negative, NaN or out-of-range value; callers validate
/// user input before it reaches the engine.
pub fn secs_to_nanos(seconds: f64) -> Nanos {
    debug_assert!(seconds.is_finite() && (0.0..1.8e10).contains(&seconds), "seconds out of range: {seconds}");
    (seconds * NANOS_PER_SEC as f64).round() as Nanos
}

/// Converts nanoseconds to seconds for reporting.
pub fn nanos_to_secs(nanos: Nanos) -> f64 {
    nanos as f64 / NANOS_PER_SEC as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_rounds_to_nearest() {
        assert_eq!(secs_to_nanos(1.5), 1_500_000_000);
        assert_eq!(secs_to_nanos(1e-9 * 0.6), 1);
        assert_eq!(secs_to_nanos(0.0), 0);
        assert_eq!(nanos_to_secs(2_500_000_000), 2.5);
    }
}
