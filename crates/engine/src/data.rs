//! Data writes in flight. A change allocates its data blocks, links them into the file and
//! invalidates what they replace under the write lock; the blocks themselves are written after
//! the lock is let go, so that writers of different files (and a writer and everyone else)
//! overlap their device I/O. Until a block lands, readers take it from here; a checkpoint or an
//! fsync, which must not make a pointer durable before the block it points to, first waits until
//! nothing is in flight. See "Requests and locking" in docs/design.md.
//!
//! Also here: writing blocks as runs of contiguous addresses, one device request each.

use crate::error::{Error, Result};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use uf2fs_device::{BlockDevice, IoCause};
use uf2fs_format::{Block, BLOCK_SIZE};

/// One change's data blocks, as runs of contiguous addresses: each run is one device write,
/// and its bytes are the only copy the daemon makes of what a writer gave it.
pub(crate) type Batch = Arc<Runs>;

/// Blocks at runs of contiguous addresses, each run's bytes in one buffer.
#[derive(Default)]
pub(crate) struct Runs {
    runs: Vec<(u32, RunBuf)>,
    /// Blocks still expected: a new run's buffer is made that big at once.
    expect: usize,
}

/// The most bytes one run holds (one device request).
const MAX_RUN: usize = 1 << 20;

/// Full-size run buffers kept for the next change once a batch has landed: a fresh MiB per
/// large write cost the daemon page faults and the kernel's zeroing of every page (16% of
/// its time writing 1 MiB requests). At most this many are kept (16 MiB).
const POOLED_RUNS: usize = 16;

static RUN_POOL: Mutex<Vec<RunBuf>> = Mutex::new(Vec::new());

/// One run's bytes, starting at a block-aligned address in memory, so that the device may
/// write it with O_DIRECT straight from here (`uf2fs_device::FileDevice`). The allocation is
/// a block larger than the room and the run starts at its first aligned byte: the allocation
/// never moves (it is never grown in place, only replaced), so the start stays aligned.
struct RunBuf {
    mem: Vec<u8>,
    start: usize,
    room: usize,
    len: usize,
}

impl RunBuf {
    /// An empty run with room for `room` bytes (whole blocks); aligned only when it can hold
    /// a run the device may write direct (a run that grows past that moves to a new buffer).
    fn new(room: usize) -> RunBuf {
        let pad = if room >= uf2fs_device::DIRECT_MIN {
            BLOCK_SIZE
        } else {
            0
        };
        let mem = vec![0u8; room + pad];
        let start = (BLOCK_SIZE - mem.as_ptr() as usize % BLOCK_SIZE) % BLOCK_SIZE;
        RunBuf {
            start: start.min(pad),
            mem,
            room,
            len: 0,
        }
    }

    fn room(&self) -> usize {
        self.room
    }

    fn bytes(&self) -> &[u8] {
        self.mem
            .get(self.start..self.start + self.len)
            .unwrap_or(&[])
    }

    /// Appends one block (`data`, padded with zeros to a block), into a larger buffer when
    /// this one is full.
    fn push_block(&mut self, data: &[u8]) {
        if self.len + BLOCK_SIZE > self.room() {
            let mut bigger = RunBuf::new((self.room() * 2).clamp(BLOCK_SIZE, MAX_RUN));
            if let Some(to) = bigger.mem.get_mut(bigger.start..bigger.start + self.len) {
                to.copy_from_slice(self.bytes());
            }
            bigger.len = self.len;
            *self = bigger;
        }
        let at = self.start + self.len;
        let n = data.len().min(BLOCK_SIZE);
        if let Some(to) = self.mem.get_mut(at..at + BLOCK_SIZE) {
            let (head, tail) = to.split_at_mut(n);
            head.copy_from_slice(data.get(..n).unwrap_or(&[]));
            tail.fill(0);
        }
        self.len += BLOCK_SIZE;
    }
}

/// An empty run buffer for `want` bytes: a pooled one when `want` is a full run.
fn run_buffer(want: usize) -> RunBuf {
    if want == MAX_RUN {
        if let Some(b) = RUN_POOL.lock().ok().and_then(|mut p| p.pop()) {
            return b;
        }
    }
    RunBuf::new(want)
}

impl Drop for Runs {
    fn drop(&mut self) {
        let Ok(mut pool) = RUN_POOL.lock() else {
            return;
        };
        for (_, mut run) in self.runs.drain(..) {
            if pool.len() >= POOLED_RUNS {
                break;
            }
            if run.room() == MAX_RUN {
                run.len = 0;
                pool.push(run);
            }
        }
    }
}

impl Runs {
    /// Runs for about `blocks` blocks.
    pub fn with_capacity(blocks: usize) -> Runs {
        Runs {
            runs: Vec::new(),
            expect: blocks,
        }
    }

    /// The runs of blocks held by address.
    pub fn of(writes: &BTreeMap<u32, Block>) -> Runs {
        let mut runs = Runs::with_capacity(writes.len());
        for (addr, b) in writes {
            runs.push(*addr, b);
        }
        runs
    }

    /// Appends `data` (at most one block; a shorter one is padded with zeros) at `addr`,
    /// extending the last run when `addr` follows it.
    pub fn push(&mut self, addr: u32, data: &[u8]) {
        let fits = |(start, run): &&mut (u32, RunBuf)| {
            run.len < MAX_RUN
                && u64::from(*start) + (run.len / BLOCK_SIZE) as u64 == u64::from(addr)
        };
        let run = match self.runs.last_mut().filter(fits) {
            Some((_, run)) => run,
            None => {
                let want = self.expect.clamp(1, MAX_RUN / BLOCK_SIZE) * BLOCK_SIZE;
                self.runs.push((addr, run_buffer(want)));
                match self.runs.last_mut() {
                    Some((_, run)) => run,
                    None => return,
                }
            }
        };
        self.expect = self.expect.saturating_sub(1);
        run.push_block(data);
    }

    /// Every address held.
    pub fn addrs(&self) -> impl Iterator<Item = u32> + '_ {
        self.runs
            .iter()
            .flat_map(|(start, run)| (0..(run.len / BLOCK_SIZE) as u32).map(move |i| start + i))
    }

    /// The block at `addr`, if held.
    pub fn block(&self, addr: u32) -> Option<&[u8]> {
        let i = self
            .runs
            .partition_point(|(start, _)| *start <= addr)
            .checked_sub(1)?;
        let (start, run) = self.runs.get(i)?;
        let at = (addr - start) as usize * BLOCK_SIZE;
        run.bytes().get(at..at + BLOCK_SIZE)
    }

    /// Writes every run, one request each.
    pub fn write(&self, dev: &dyn BlockDevice, cause: IoCause) -> Result<()> {
        for (start, run) in &self.runs {
            dev.write_blocks(u64::from(*start), run.bytes(), cause)
                .map_err(|e| Error::io(format!("blocks at {start}"), e))?;
        }
        Ok(())
    }
}

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
        for addr in batch.addrs() {
            s.by_addr.insert(addr, Arc::clone(batch));
        }
    }

    /// `batch` landed on the device (or failed with `error`): readers go to the device again.
    pub fn done(&self, batch: &Batch, error: Option<String>) {
        let mut s = self.lock();
        for addr in batch.addrs() {
            if s.by_addr.get(&addr).is_some_and(|b| Arc::ptr_eq(b, batch)) {
                s.by_addr.remove(&addr);
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
                let b = s.by_addr.get(&a)?.block(a)?;
                Some((i, b.try_into().ok()?))
            })
            .collect()
    }

    /// Whether a write of block `addr` is in flight.
    pub fn holds(&self, addr: u32) -> bool {
        self.lock().by_addr.contains_key(&addr)
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

/// Writes batches of data blocks made by a change and lets readers go to the device for them
/// again. A failure is also kept in `inflight`, where the next change or checkpoint finds it
/// and stops: the image keeps its last checkpoint.
pub(crate) fn write_batches(
    dev: &dyn BlockDevice,
    inflight: &Inflight,
    batches: &[Batch],
    cause: IoCause,
) -> Result<()> {
    let mut first = Ok(());
    for b in batches {
        let r = b.write(dev, cause);
        let err = r.as_ref().err().map(|e| format!("data write: {e}"));
        inflight.done(b, err);
        if first.is_ok() {
            first = r;
        }
    }
    first
}

/// Writes `deferred` (the running change's data blocks) and waits for every change's to
/// land: nothing may make durable a pointer to a block that is not on the device yet.
pub(crate) fn land(
    dev: &dyn BlockDevice,
    inflight: &Inflight,
    deferred: &mut Vec<Batch>,
) -> Result<()> {
    let mine = std::mem::take(deferred);
    write_batches(dev, inflight, &mine, IoCause::UserData)?;
    match inflight.wait_all() {
        Some(why) => Err(Error::ReadOnly(format!(
            "a data write failed ({why}); the image keeps its last checkpoint"
        ))),
        None => Ok(()),
    }
}

/// Writes blocks in runs of contiguous addresses, one request each.
pub(crate) fn write_runs(
    dev: &dyn BlockDevice,
    writes: &BTreeMap<u32, Block>,
    cause: IoCause,
) -> Result<()> {
    Runs::of(writes).write(dev, cause)
}
