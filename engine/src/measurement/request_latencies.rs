//! Where a request kind's latencies go by how it ended ([`Ending`], [`EndingSlots`]): a model records every request that ended
//! — answered in full, degraded (a fallback answered), or failed — and the latency of
//! a failed one is the time until its client learned it failed (a timeout, a deadline,
//! a refusal, an error), so that "p99 of all requests" counts the requests that did
//! not succeed instead of leaving them out.
//!
//! A request kind's histograms sit consecutively in the model's histogram slice:
//! `ok`, then `degraded` (for kinds that can degrade), then `failed`, then `all`.
//! A kind laid out [`EndingSlots::ok_only`] keeps the one `ok` histogram (tests and
//! benches that read successes only).
//!
//! Invariants: a kind that cannot degrade never records a degraded ending (asserted
//! in debug builds); `all` counts exactly the sum of the others (by construction:
//! every record goes to its ending's histogram and to `all`; tested per model in
//! `tests/cli/tail.rs`).

use crate::kernel::histogram::LatencyHistogram;
use crate::kernel::time::Nanos;

use super::ending::Ending;
use super::latency_windows::{LatencyWindows, WindowCounts};

/// Where one request kind's histograms sit in a model's histogram slice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EndingSlots {
    first: usize,
    degraded: bool,
    split: bool,
}

impl EndingSlots {
    /// `ok`, (`degraded`,) `failed`, `all` from index `first` on.
    pub const fn split(first: usize, degraded: bool) -> Self {
        EndingSlots { first, degraded, split: true }
    }

    /// One histogram at `first`: successes only.
    pub const fn ok_only(first: usize) -> Self {
        EndingSlots { first, degraded: false, split: false }
    }

    /// The slots for a slice of `len` histograms from `first`: split when the slice
    /// holds the whole layout, successes only when it holds one.
    pub fn for_len(first: usize, len: usize, degraded: bool) -> Self {
        let split = Self::split(first, degraded);
        if len >= first + split.count() {
            split
        } else {
            assert_eq!(len, first + 1, "a request kind has its ok histogram, or all of its endings'");
            Self::ok_only(first)
        }
    }

    /// Histograms this kind takes.
    pub const fn count(&self) -> usize {
        if self.split {
            3 + self.degraded as usize
        } else {
            1
        }
    }

    /// The next free index after this kind's histograms.
    pub const fn end(&self) -> usize {
        self.first + self.count()
    }

    /// Records one ended request's latency under its ending and under `all`.
    #[inline]
    pub fn record(&self, histograms: &mut [LatencyHistogram], ending: Ending, latency: Nanos) {
        if !self.split {
            if ending == Ending::Ok {
                histograms[self.first].record(latency);
            }
            return;
        }
        debug_assert!(self.degraded || ending != Ending::Degraded, "this request kind cannot degrade");
        let slot = match ending {
            Ending::Ok => 0,
            Ending::Degraded => 1,
            Ending::Failed => 1 + self.degraded as usize,
        };
        histograms[self.first + slot].record(latency);
        histograms[self.end() - 1].record(latency);
    }
}

/// One request kind's latencies as a model records them: its histograms by ending
/// and, when on, its windows over time.
#[derive(Clone, Debug)]
pub struct RequestLatencies {
    /// Where this kind's histograms sit in the model's slice.
    pub slots: EndingSlots,
    windows: LatencyWindows,
}

impl RequestLatencies {
    /// A recorder for the kind at `slots`, without windows.
    pub fn new(slots: EndingSlots) -> Self {
        RequestLatencies { slots, windows: LatencyWindows::off() }
    }

    /// Turns on latency over time, in windows of `window` ns up to `horizon`.
    pub fn keep_windows(&mut self, window: Nanos, horizon: Nanos) {
        self.windows = LatencyWindows::new(window, horizon);
    }

    /// Records a request that ended at `now` after `latency`.
    #[inline]
    pub fn record(&mut self, histograms: &mut [LatencyHistogram], now: Nanos, ending: Ending, latency: Nanos) {
        self.slots.record(histograms, ending, latency);
        self.windows.record(now, ending, latency);
    }

    /// The windows' counters, leaving them empty (none when off).
    pub fn take_windows(&mut self) -> WindowCounts {
        std::mem::take(&mut self.windows).into_counts()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_ending_goes_to_its_own_histogram_and_to_all() {
        let mut histograms: Vec<LatencyHistogram> = (0..5).map(|_| LatencyHistogram::new()).collect();
        let slots = EndingSlots::split(1, true);
        assert_eq!((slots.count(), slots.end()), (4, 5));
        slots.record(&mut histograms, Ending::Ok, 10);
        slots.record(&mut histograms, Ending::Degraded, 20);
        slots.record(&mut histograms, Ending::Failed, 30);
        slots.record(&mut histograms, Ending::Failed, 40);
        let counts: Vec<u64> = histograms.iter().map(LatencyHistogram::count).collect();
        assert_eq!(counts, [0, 1, 1, 2, 4]);

        let mut two: Vec<LatencyHistogram> = (0..3).map(|_| LatencyHistogram::new()).collect();
        let slots = EndingSlots::for_len(0, 3, false);
        slots.record(&mut two, Ending::Failed, 5);
        slots.record(&mut two, Ending::Ok, 6);
        assert_eq!(two.iter().map(LatencyHistogram::count).collect::<Vec<_>>(), [1, 1, 2]);

        let mut one = [LatencyHistogram::new()];
        let slots = EndingSlots::for_len(0, 1, false);
        slots.record(&mut one, Ending::Failed, 5);
        slots.record(&mut one, Ending::Ok, 6);
        assert_eq!(one[0].count(), 1);
    }
}
