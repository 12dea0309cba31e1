//! How changes hand work to a background thread the volume may not have: a flag changes raise
//! and the thread waits for, and whether the thread runs at all (a library user may never
//! start one; then changes do the work themselves). The cleaner's checkpoints (`gc::state::
//! Pacer`) and the dirty-node budget's (`durability`) go this way. A leaf.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

#[derive(Default)]
pub(crate) struct Handoff {
    running: AtomicBool,
    asked: Mutex<bool>,
    cv: Condvar,
}

impl Handoff {
    /// Whether a background thread has started taking this work.
    pub fn running(&self) -> bool {
        self.running.load(Ordering::Relaxed)
    }

    /// The background thread has started.
    pub fn mark_running(&self) {
        self.running.store(true, Ordering::Relaxed);
    }

    /// Asks the thread for the work and wakes it.
    pub fn ask(&self) {
        *self.asked.lock().unwrap_or_else(|p| p.into_inner()) = true;
        self.cv.notify_all();
    }

    /// Whether the work was asked for since the last call.
    pub fn take(&self) -> bool {
        std::mem::take(&mut *self.asked.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Whether the work is asked for and not yet taken.
    pub fn asked(&self) -> bool {
        *self.asked.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Sleeps until the work is asked for or `timeout` passes.
    pub fn wait(&self, timeout: Duration) {
        let w = self.asked.lock().unwrap_or_else(|p| p.into_inner());
        if !*w {
            let _ = self.cv.wait_timeout_while(w, timeout, |w| !*w);
        }
    }
}

/// What a background thread sleeps on between steps (`Fs::background_gc_waiter`,
/// `Fs::checkpoint_waiter`): it wakes when a change asks it for work. Held apart from the
/// volume, so that a sleeping thread does not keep the volume alive (the daemon closes the
/// image at unmount once it holds the last reference).
pub struct Waiter(pub(crate) std::sync::Arc<Handoff>);

impl Waiter {
    /// Sleeps until a change asks for the work, or `timeout`.
    pub fn wait(&self, timeout: Duration) {
        self.0.wait(timeout);
    }
}
