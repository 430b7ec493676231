//! Runs are keyed by a channel (the page and the browser tab that asked): starting
//! a run on a channel cancels the one still going there, so a page whose knobs
//! moved again never waits behind a result it no longer wants.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock, Mutex};

static RUNNING: LazyLock<Mutex<HashMap<String, Arc<AtomicBool>>>> = LazyLock::new(Default::default);

/// The cancel flag of a run that has begun; it leaves the registry when dropped.
pub struct Job {
    channel: String,
    pub cancel: Arc<AtomicBool>,
}

/// Begins a run on `channel`, cancelling the one running there.
pub fn begin(channel: &str) -> Job {
    let cancel = Arc::new(AtomicBool::new(false));
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

#[cfg(test)]
mod tests {
    use super::*;

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
