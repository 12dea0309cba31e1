//! Data writes in flight. A change allocates its data blocks, links them into the file and
//! invalidates what they replace under the write lock; the blocks themselves are written after
//! the lock is let go, so that writers of different files (and a writer and everyone else)
//! overlap their device I/O. Until a block lands, readers take it from here; a checkpoint or an
//! fsync, which must not make a pointer durable before the block it points to, first waits until
//! nothing is in flight. See "Requests and locking" in docs/design.md.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use uf2fs_format::Block;

/// One change's data blocks by address.
pub(crate) type Batch = Arc<BTreeMap<u32, Block>>;

#[derive(Default)]
pub(crate) struct Inflight {
    state: Mutex<State>,
    landed: Condvar,
}

#[derive(Default)]
struct State {
    by_addr: HashMap<u32, Batch>,
    /// The first write that failed: the volume must not checkpoint what points at it.
    failure: Option<String>,
}

impl Inflight {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding this lock leaves only plain maps behind: keep going.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Makes `batch` visible to readers; called under the write lock, before any pointer to
    /// its blocks can be seen.
    pub fn add(&self, batch: &Batch) {
        let mut s = self.lock();
        for addr in batch.keys() {
            s.by_addr.insert(*addr, Arc::clone(batch));
        }
    }

    /// `batch` landed on the device (or failed with `error`): readers go to the device again.
    pub fn done(&self, batch: &Batch, error: Option<String>) {
        let mut s = self.lock();
        for addr in batch.keys() {
            if s.by_addr.get(addr).is_some_and(|b| Arc::ptr_eq(b, batch)) {
                s.by_addr.remove(addr);
            }
        }
        if let (Some(e), None) = (error, &s.failure) {
            s.failure = Some(e);
        }
        drop(s);
        self.landed.notify_all();
    }

    /// Copies of the blocks among `n` from `addr` on that are still in flight, by index. A
    /// block not returned had landed when this looked, so a device read made after this call
    /// finds it; the caller reads the device, then lays these over what it read.
    pub fn copies(&self, addr: u64, n: usize) -> Vec<(usize, Block)> {
        let s = self.lock();
        if s.by_addr.is_empty() {
            return Vec::new();
        }
        (0..n)
            .filter_map(|i| {
                let a = u32::try_from(addr + i as u64).ok()?;
                let b = s.by_addr.get(&a)?.get(&a)?;
                Some((i, *b))
            })
            .collect()
    }

    /// Waits until every batch has landed; returns the first write failure, if any.
    pub fn wait_all(&self) -> Option<String> {
        let mut s = self.lock();
        while !s.by_addr.is_empty() {
            s = self.landed.wait(s).unwrap_or_else(|p| p.into_inner());
        }
        s.failure.clone()
    }

    /// The first write failure, if one happened.
    pub fn failure(&self) -> Option<String> {
        self.lock().failure.clone()
    }
}
