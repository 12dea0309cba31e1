//! Data writes in flight. A change allocates its data blocks, links them into the file and
//! invalidates what they replace under the write lock; the blocks themselves are written after
//! the lock is let go, so that writers of different files (and a writer and everyone else)
//! overlap their device I/O. Until a block lands, readers take it from here; a checkpoint or an
//! fsync, which must not make a pointer durable before the block it points to, first waits until
//! nothing is in flight. See "Requests and locking" in docs/design.md.
//!
//! Also here: writing blocks as runs of contiguous addresses, one device request each.

use crate::error::{Error, Result};
use foldhash::HashMap;
use std::collections::BTreeMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use uf2fs_device::{BlockDevice, IoCause};
use uf2fs_format::{Block, BLOCK_SIZE};

/// One change's data blocks, as runs of contiguous addresses: each run is one device write,
/// and its bytes are the only copy the daemon makes of what a writer gave it, or none at all
/// (a run left in the writer's block-aligned buffer, [`Runs::push_borrowed`]).
pub(crate) type Batch = Arc<Runs>;

/// Blocks at runs of contiguous addresses, each run's bytes in one buffer, or still in the
/// writer's own buffer (a borrowed run: see [`Run::Borrowed`]).
#[derive(Default)]
pub(crate) struct Runs {
    runs: Vec<(u32, Run)>,
    /// Blocks still expected: a new run's buffer is made that big at once.
    expect: usize,
    /// Written through the host's page cache whatever the runs' size (a small file's one
    /// write, which its writer is likely waiting for: [`SMALL_FILE_WRITE`]).
    pub(crate) buffered: bool,
}

/// A write of a file from its first block and of fewer bytes than this is taken for a small
/// file written whole (`tar -x`, `cp`): its runs go through the host's page cache even where
/// large runs go past it (`direct_writes`). Its writer usually waits for it (a program that
/// sets the file's times or owner after writing makes the kernel write the pages first), and a
/// buffered write returns after a copy where a direct one waits for the device. A stream's
/// later writes, and writes of this size or more, may still go direct.
pub(crate) const SMALL_FILE_WRITE: usize = 512 * 1024;

/// The most bytes one run holds (one device request).
const MAX_RUN: usize = 1 << 20;

/// Full-size run buffers kept for the next change once a batch has landed: a fresh MiB per
/// large write cost the daemon page faults and the kernel's zeroing of every page (16% of
/// its time writing 1 MiB requests). At most this many are kept (16 MiB).
const POOLED_RUNS: usize = 16;

static RUN_POOL: Mutex<Vec<RunBuf>> = Mutex::new(Vec::new());

/// One-block run buffers kept for the next change: a small file's last, partial block is
/// copied into one (a zeroed allocation each time was as dear as the copy). At most this many.
const POOLED_BLOCKS: usize = 64;

static BLOCK_POOL: Mutex<Vec<RunBuf>> = Mutex::new(Vec::new());

/// One run of a batch: its bytes copied here, or left in the buffer the change was made from.
enum Run {
    Copied(RunBuf),
    /// `blocks` whole blocks at byte `at` of the change's source (the writer's buffer, which
    /// outlives the change: [`Fs::changing_from`](crate::vol::Fs::changing_from)). Its bytes
    /// are nowhere else: readers of these addresses wait until the run lands
    /// ([`Inflight::copies`]), and only the change's own thread, which holds the source, can
    /// write it ([`write_batches`] with the source).
    Borrowed {
        at: usize,
        blocks: usize,
    },
}

impl Run {
    fn blocks(&self) -> usize {
        match self {
            Run::Copied(b) => b.len / BLOCK_SIZE,
            Run::Borrowed { blocks, .. } => *blocks,
        }
    }
}

/// A block held in a batch.
pub(crate) enum Held<'a> {
    Bytes(&'a [u8]),
    /// In the writer's buffer: readable once the run has landed.
    Borrowed,
}

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
    let pool = match want {
        MAX_RUN => &RUN_POOL,
        BLOCK_SIZE => &BLOCK_POOL,
        _ => return RunBuf::new(want),
    };
    match pool.lock().ok().and_then(|mut p| p.pop()) {
        Some(b) => b,
        None => RunBuf::new(want),
    }
}

impl Drop for Runs {
    fn drop(&mut self) {
        for (_, run) in self.runs.drain(..) {
            let Run::Copied(mut run) = run else {
                continue;
            };
            let (pool, most) = match run.room() {
                MAX_RUN => (&RUN_POOL, POOLED_RUNS),
                BLOCK_SIZE => (&BLOCK_POOL, POOLED_BLOCKS),
                _ => continue,
            };
            if let Ok(mut pool) = pool.lock() {
                if pool.len() < most {
                    run.len = 0;
                    pool.push(run);
                }
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
            buffered: false,
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

    /// Whether `addr` follows the last run, and that run can grow.
    fn extends(&self, addr: u32) -> Option<&(u32, Run)> {
        self.runs.last().filter(|(start, run)| {
            run.blocks() < MAX_RUN / BLOCK_SIZE
                && u64::from(*start) + run.blocks() as u64 == u64::from(addr)
        })
    }

    /// Appends `data` (at most one block; a shorter one is padded with zeros) at `addr`,
    /// extending the last run when `addr` follows it.
    pub fn push(&mut self, addr: u32, data: &[u8]) {
        let grow = matches!(self.extends(addr), Some((_, Run::Copied(_))));
        if !grow {
            let want = self.expect.clamp(1, MAX_RUN / BLOCK_SIZE) * BLOCK_SIZE;
            self.runs.push((addr, Run::Copied(run_buffer(want))));
        }
        self.expect = self.expect.saturating_sub(1);
        if let Some((_, Run::Copied(run))) = self.runs.last_mut() {
            run.push_block(data);
        }
    }

    /// Appends the whole block at byte `at` of the change's source at `addr`, without copying
    /// it: the run is written from the source by the change's own thread ([`write_batches`]).
    pub fn push_borrowed(&mut self, addr: u32, at: usize) {
        self.expect = self.expect.saturating_sub(1);
        // The last run grows if it is borrowed and `at` follows it in the source too.
        let grow = matches!(self.extends(addr),
            Some((_, Run::Borrowed { at: first, blocks })) if first + blocks * BLOCK_SIZE == at);
        match self.runs.last_mut() {
            Some((_, Run::Borrowed { blocks, .. })) if grow => *blocks += 1,
            _ => self.runs.push((addr, Run::Borrowed { at, blocks: 1 })),
        }
    }

    /// Every address held.
    pub fn addrs(&self) -> impl Iterator<Item = u32> + '_ {
        self.runs
            .iter()
            .flat_map(|(start, run)| (0..run.blocks() as u32).map(move |i| start + i))
    }

    /// The block at `addr`, if held. The runs are in the order they were made, not by
    /// address (a change's blocks may go to two logs, `data_temp=age`, alternating), so they
    /// are searched in turn: a change holds a few runs.
    pub fn block(&self, addr: u32) -> Option<Held<'_>> {
        let (start, run) = self
            .runs
            .iter()
            .find(|(start, run)| addr >= *start && u64::from(addr - start) < run.blocks() as u64)?;
        let k = (addr - start) as usize;
        Some(match run {
            Run::Copied(b) => Held::Bytes(b.bytes().get(k * BLOCK_SIZE..(k + 1) * BLOCK_SIZE)?),
            Run::Borrowed { .. } => Held::Borrowed,
        })
    }

    /// Writes every run, one request each; borrowed runs from `source`, the buffer the
    /// change was made from (an error without it: no other copy of those bytes exists).
    pub fn write(&self, dev: &dyn BlockDevice, cause: IoCause, source: &[u8]) -> Result<()> {
        for (start, run) in &self.runs {
            let bytes = match run {
                Run::Copied(b) => b.bytes(),
                Run::Borrowed { at, blocks } => {
                    source.get(*at..*at + blocks * BLOCK_SIZE).ok_or_else(|| {
                        let why = "internal: the writer's buffer is not at hand";
                        Error::io(format!("blocks at {start}"), std::io::Error::other(why))
                    })?
                }
            };
            let at = u64::from(*start);
            if self.buffered {
                dev.write_blocks_buffered(at, bytes, cause)
            } else {
                dev.write_blocks(at, bytes, cause)
            }
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
    /// finds it; the caller reads the device, then lays these over what it read. A block
    /// still in its writer's buffer is waited for: its writer's thread writes it without
    /// any lock the caller may hold, and then it is on the device.
    pub fn copies(&self, addr: u64, n: usize) -> Vec<(usize, Block)> {
        let mut s = self.lock();
        'look: loop {
            if s.by_addr.is_empty() {
                return Vec::new();
            }
            let mut found = Vec::new();
            for i in 0..n {
                let Ok(a) = u32::try_from(addr + i as u64) else {
                    continue;
                };
                match s.by_addr.get(&a).and_then(|b| b.block(a)) {
                    Some(Held::Bytes(b)) => {
                        if let Ok(b) = b.try_into() {
                            found.push((i, b));
                        }
                    }
                    Some(Held::Borrowed) => {
                        s = self.landed.wait(s).unwrap_or_else(|p| p.into_inner());
                        continue 'look;
                    }
                    None => {}
                }
            }
            return found;
        }
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
/// again; borrowed runs come from `source`, the buffer the change was made from. A failure is
/// also kept in `inflight`, where the next change or checkpoint finds it and stops: the image
/// keeps its last checkpoint.
pub(crate) fn write_batches(
    dev: &dyn BlockDevice,
    inflight: &Inflight,
    batches: &[Batch],
    cause: IoCause,
    source: &[u8],
) -> Result<()> {
    let mut first = Ok(());
    for b in batches {
        let r = b.write(dev, cause, source);
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
    // A change's borrowed runs are written by the change itself before anything it does
    // can land its batches (`Fs::changing_from`), so none is left here.
    let mine = std::mem::take(deferred);
    write_batches(dev, inflight, &mine, IoCause::UserData, &[])?;
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
    Runs::of(writes).write(dev, cause, &[])
}
