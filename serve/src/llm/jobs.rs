//! Runs are keyed by a channel (the page and the browser tab that asked): starting
//! a run on a channel cancels the one still going there, so a page whose knobs
//! moved again never waits behind a result it no longer wants.
//!
//! And runs are admitted through [`Slots`]: at most `--jobs N` simulations at once,
//! a short queue behind them, and past that a refusal with a time to retry after (503
//! with `Retry-After`). Only simulations take a slot: pages, ring operations and
//! state are never queued behind them.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, LazyLock, Mutex};
use std::time::Duration;

static RUNNING: LazyLock<Mutex<HashMap<String, Arc<AtomicBool>>>> = LazyLock::new(Default::default);

/// The cancel flag of a run that has begun; it leaves the registry when dropped.
pub struct Job {
    channel: String,
    pub cancel: Arc<AtomicBool>,
}

/// Begins a run on `channel`, cancelling the one running there.
pub fn begin(channel: &str) -> Job {
    begin_with(channel, Arc::new(AtomicBool::new(false)))
}

/// Like [`begin`], with a flag made beforehand (the request's [`CancelOnDrop`]).
pub fn begin_with(channel: &str, cancel: Arc<AtomicBool>) -> Job {
    let mut running = RUNNING.lock().expect("no job panicked holding the registry");
    if let Some(previous) = running.insert(channel.to_string(), cancel.clone()) {
        previous.store(true, Ordering::Relaxed);
    }
    Job { channel: channel.to_string(), cancel }
}

impl Drop for Job {
    fn drop(&mut self) {
        let mut running = RUNNING.lock().expect("no job panicked holding the registry");
        if running.get(&self.channel).is_some_and(|flag| Arc::ptr_eq(flag, &self.cancel)) {
            running.remove(&self.channel);
        }
    }
}

/// Sets its flag when dropped: held by a request's handler, whose future the server
/// drops when the client disconnects, so that the run stops at its next replica.
pub struct CancelOnDrop(pub Arc<AtomicBool>);

impl CancelOnDrop {
    pub fn new() -> CancelOnDrop {
        CancelOnDrop(Arc::new(AtomicBool::new(false)))
    }
}

impl Default for CancelOnDrop {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// The simulations running and waiting. Invariant: `running ≤ running_max` and
/// `waiting ≤ waiting_max` (asserted on every change).
#[derive(Debug)]
pub struct Slots {
    running_max: usize,
    waiting_max: usize,
    state: Mutex<SlotState>,
    freed: Condvar,
}

#[derive(Debug, Default)]
struct SlotState {
    running: usize,
    waiting: usize,
}

/// A running simulation's slot, freed when dropped.
#[derive(Debug)]
pub struct Permit<'a> {
    slots: &'a Slots,
}

/// Why a simulation was not admitted.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    /// Every slot is taken and the queue is full: retry after this many seconds.
    Busy { retry_after_s: u64 },
    /// Its run was cancelled while it waited.
    Cancelled,
}

/// How long a refused request is told to wait before retrying.
const RETRY_AFTER_S: u64 = 2;

impl Slots {
    /// `running_max` simulations at once (at least 1), `waiting_max` queued behind them.
    pub fn new(running_max: usize, waiting_max: usize) -> Slots {
        Slots { running_max: running_max.max(1), waiting_max, state: Mutex::default(), freed: Condvar::new() }
    }

    /// The running and queued counts, for `/api/jobs` and tests.
    pub fn counts(&self) -> (usize, usize) {
        let state = self.state.lock().expect("no job panicked holding the slots");
        (state.running, state.waiting)
    }

    /// Takes a slot, waiting in the queue (blocking; call it off the async workers) if
    /// every slot is taken; refuses at once when the queue is full too, and gives up
    /// waiting when `cancel` is set.
    pub fn admit(&self, cancel: &AtomicBool) -> Result<Permit<'_>, Refused> {
        let mut state = self.state.lock().expect("no job panicked holding the slots");
        if state.running >= self.running_max {
            if state.waiting >= self.waiting_max {
                return Err(Refused::Busy { retry_after_s: RETRY_AFTER_S });
            }
            state.waiting += 1;
            debug_assert!(state.waiting <= self.waiting_max);
            while state.running >= self.running_max {
                if cancel.load(Ordering::Relaxed) {
                    state.waiting -= 1;
                    return Err(Refused::Cancelled);
                }
                state = self.freed.wait_timeout(state, Duration::from_millis(50)).expect("no job panicked").0;
            }
            state.waiting -= 1;
        }
        state.running += 1;
        debug_assert!(state.running <= self.running_max);
        Ok(Permit { slots: self })
    }
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        let mut state = self.slots.state.lock().expect("no job panicked holding the slots");
        debug_assert!(state.running > 0);
        state.running -= 1;
        self.slots.freed.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_run_n_queue_some_and_refuse_the_rest() {
        let slots = Slots::new(2, 1);
        let never = AtomicBool::new(false);
        let (a, b) = (slots.admit(&never).unwrap(), slots.admit(&never).unwrap());
        std::thread::scope(|scope| {
            let queued = scope.spawn(|| slots.admit(&never).map(|_| ()));
            while slots.counts() != (2, 1) {
                std::thread::yield_now();
            }
            assert_eq!(slots.admit(&never).unwrap_err(), Refused::Busy { retry_after_s: RETRY_AFTER_S });
            drop(a);
            assert_eq!(queued.join().unwrap(), Ok(()), "the queued run gets the freed slot");
        });
        drop(b);
        assert_eq!(slots.counts(), (0, 0));
        // A queued run whose flag is set leaves the queue.
        let full = Slots::new(1, 1);
        let _running = full.admit(&never).unwrap();
        let cancelled = AtomicBool::new(true);
        assert_eq!(full.admit(&cancelled).unwrap_err(), Refused::Cancelled);
        assert_eq!(full.counts(), (1, 0));
    }

    #[test]
    fn a_new_run_cancels_the_last_on_its_channel_only() {
        let first = begin("test-a");
        let other = begin("test-b");
        let second = begin("test-a");
        assert!(first.cancel.load(Ordering::Relaxed));
        assert!(!second.cancel.load(Ordering::Relaxed) && !other.cancel.load(Ordering::Relaxed));
        drop(first); // a cancelled job leaving does not unregister its successor
        let third = begin("test-a");
        assert!(second.cancel.load(Ordering::Relaxed) && !third.cancel.load(Ordering::Relaxed));
    }
}
