//! Writing small runs of user data behind their writers ([`Behind`]).
//!
//! A small file's data goes to the device while its writer waits: `tar -x` makes the kernel
//! write each file's pages before it sets the file's times, and a `pwrite` of 16 KiB into the
//! host's page cache cost the daemon about 6 us of the 11 its WRITE took. Here such a run is
//! copied into memory and the call returns; a thread of its own writes the held runs a little
//! later, those that follow each other on the device joined into one request (a log puts a
//! stream of small files' blocks side by side). Held runs are bounded (`set_write_behind`):
//! past the bound the writer that crossed it writes them all itself.
//!
//! What keeps this invisible to the layers above:
//! - a read sees the held runs laid over what the device returns;
//! - a write that is not held (a node, metadata, a large run) and meets a held or
//!   being-written run first has every held run written, so the device never sees an older
//!   run land after a newer write of the same blocks; a held write over held blocks replaces
//!   them;
//! - [`BlockDevice::flush`] writes every held run before it makes the device durable, so
//!   whatever a checkpoint or an fsync orders behind a flush finds the data on the device;
//! - a failed write is kept and returned by every later flush: a checkpoint does not seal
//!   pointers to blocks that never landed.

use crate::{BlockDevice, DirectWrites, IoCause, IoCounters, BLOCK_SIZE, DIRECT_MIN};
use std::collections::BTreeMap;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

/// The writing thread starts writing once this much is held...
const WAKE_BYTES: usize = 256 << 10;
/// ...or once a held run has waited this long.
const WAKE_AFTER: Duration = Duration::from_millis(2);
/// The most blocks of held runs that follow each other on the device written as one request
/// (a `pwritev` of their blocks; at most the kernel's 1 024 pieces): on this project's virtual
/// disk a 4 MiB O_DIRECT write went at 1.8-1.9 GB/s where 1 MiB ones went at 1.3-1.8.
const MAX_JOIN_BLOCKS: usize = 1024;

/// How write-behind stands (`uf2fs status`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteBehind {
    /// The most bytes held at once; 0: off.
    pub limit: u64,
    /// Bytes held now.
    pub held: u64,
    /// Writes held instead of written at once.
    pub deferred: u64,
    /// Requests the held runs went to the device in.
    pub written_runs: u64,
    /// Times a writer found the bound reached and wrote the held runs itself.
    pub writer_drains: u64,
    /// Times a write that is not held met held blocks and had them written first.
    pub overlap_drains: u64,
}

/// A [`BlockDevice`] that holds small runs of user data and writes them from a thread of its
/// own (see the module's text). Off (every call goes straight through) until
/// [`BlockDevice::set_write_behind`] gives it a bound.
pub struct Behind {
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

struct Shared {
    dev: Box<dyn BlockDevice>,
    state: Mutex<State>,
    /// Wakes the writing thread.
    wake: Condvar,
    /// Held by whoever writes held runs: runs go to the device in the order they were held.
    draining: Mutex<()>,
    /// The bound, in bytes; 0: off.
    limit: AtomicUsize,
    /// How long the thread lets held runs gather before it writes them ([`WAKE_AFTER`]).
    gather: Duration,
    /// Runs held or being written: readers and writers skip the state's lock while it is 0.
    present: AtomicUsize,
    stop: AtomicBool,
    deferred: AtomicU64,
    written_runs: AtomicU64,
    writer_drains: AtomicU64,
    overlap_drains: AtomicU64,
}

#[derive(Default)]
struct State {
    /// Held runs by first block; they never overlap.
    held: BTreeMap<u64, Arc<Run>>,
    held_bytes: usize,
    /// Runs taken by the writer and not yet on the device (older than any held run).
    writing: BTreeMap<u64, Arc<Run>>,
    /// Their bytes: held and being-written bytes together stay within the bound.
    writing_bytes: usize,
    /// The first write that failed: every later flush returns it.
    failed: Option<(io::ErrorKind, String)>,
    /// Blocks of written runs, for new ones: a fresh one costs a page fault (a quarter of
    /// what holding a small file's data took). Kept while they and the blocks held or being
    /// written stay within the bound.
    spare: Vec<Box<Page>>,
}

/// One held block, aligned for O_DIRECT. Held data is kept a block at a time, so that what
/// is held is what the bound counts whatever the runs' sizes (a buffer per run with room to
/// grow took 256 KiB for each scattered 4 KiB write), and a run grows without copies.
#[repr(C, align(4096))]
struct Page([u8; BLOCK_SIZE]);

/// Held blocks at consecutive addresses.
#[derive(Default)]
struct Run {
    pages: Vec<Box<Page>>,
}

impl Run {
    fn blocks(&self) -> u64 {
        self.pages.len() as u64
    }
}

impl State {
    /// The first failed write, as an error for the caller.
    fn failure(&self) -> Option<io::Error> {
        self.failed
            .as_ref()
            .map(|(kind, why)| io::Error::new(*kind, why.clone()))
    }

    /// A block holding `data` (one block's bytes), from the spare ones when there are.
    fn page(&mut self, data: &[u8]) -> Box<Page> {
        let mut p = self
            .spare
            .pop()
            .unwrap_or_else(|| Box::new(Page([0; BLOCK_SIZE])));
        if let Some(d) = p.0.get_mut(..data.len()) {
            d.copy_from_slice(data);
        }
        p
    }

    /// Keeps `pages` for new runs while the bound (`limit` bytes) has room for them beside
    /// the blocks held and being written.
    fn recycle(&mut self, pages: Vec<Box<Page>>, limit: usize) {
        let most = (limit / BLOCK_SIZE)
            .saturating_sub((self.held_bytes + self.writing_bytes) / BLOCK_SIZE);
        for p in pages {
            if self.spare.len() >= most {
                break;
            }
            self.spare.push(p);
        }
    }
}

/// The runs of `map` that overlap blocks `a..a + n`, with their first blocks.
fn overlapping(map: &BTreeMap<u64, Arc<Run>>, a: u64, n: u64) -> Vec<(u64, Arc<Run>)> {
    let mut found: Vec<(u64, Arc<Run>)> = map
        .range(a..a + n)
        .map(|(s, r)| (*s, Arc::clone(r)))
        .collect();
    if let Some((s, r)) = map.range(..a).next_back() {
        if s + r.blocks() > a {
            found.insert(0, (*s, Arc::clone(r)));
        }
    }
    found
}

impl Behind {
    /// `dev` behind a write-behind layer that is off until given a bound.
    pub fn new(dev: Box<dyn BlockDevice>) -> Behind {
        Behind::gathering(dev, WAKE_AFTER)
    }

    fn gathering(dev: Box<dyn BlockDevice>, gather: Duration) -> Behind {
        Behind {
            shared: Arc::new(Shared {
                dev,
                state: Mutex::default(),
                wake: Condvar::new(),
                draining: Mutex::new(()),
                limit: AtomicUsize::new(0),
                gather,
                present: AtomicUsize::new(0),
                stop: AtomicBool::new(false),
                deferred: AtomicU64::new(0),
                written_runs: AtomicU64::new(0),
                writer_drains: AtomicU64::new(0),
                overlap_drains: AtomicU64::new(0),
            }),
            thread: Mutex::new(None),
        }
    }

    /// Holds a write of user data while write-behind is on and the run is whole blocks on
    /// the device and at most half the bound; None: it is to be written now.
    fn try_hold(&self, blkaddr: u64, buf: &[u8], cause: IoCause) -> Option<io::Result<()>> {
        let sh = &self.shared;
        let limit = sh.limit.load(Ordering::Relaxed);
        let holdable = cause == IoCause::UserData
            && limit > 0
            && !buf.is_empty()
            && buf.len() <= limit / 2
            && buf.len().is_multiple_of(BLOCK_SIZE)
            && blkaddr
                .checked_add((buf.len() / BLOCK_SIZE) as u64)
                .is_some_and(|end| end <= sh.dev.block_count());
        holdable.then(|| sh.hold(blkaddr, buf))
    }

    /// Before `buf` is written at `blkaddr` without being held (see [`Shared::settle`]).
    fn settle(&self, blkaddr: u64, buf: &[u8]) {
        if buf.len().is_multiple_of(BLOCK_SIZE) {
            self.shared.settle(blkaddr, (buf.len() / BLOCK_SIZE) as u64);
        }
    }

    /// Starts the writing thread if it is not running; without it (it could not be
    /// started) the layer stays off.
    fn start(&self) -> bool {
        let mut t = self.thread.lock().unwrap_or_else(|p| p.into_inner());
        if t.is_some() {
            return true;
        }
        let shared = Arc::clone(&self.shared);
        match std::thread::Builder::new()
            .name("uf2fs-wb".into())
            .spawn(move || shared.run())
        {
            Ok(h) => {
                *t = Some(h);
                true
            }
            Err(_) => false,
        }
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Only maps and counts behind it: a panic elsewhere leaves them usable.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The writing thread: once a run is held, gives others the time to join it (or less,
    /// once enough is held), then writes them all.
    fn run(&self) {
        let stopped = || self.stop.load(Ordering::Acquire);
        loop {
            let s = self.lock();
            let s = self
                .wake
                .wait_while(s, |s| s.held.is_empty() && !stopped())
                .unwrap_or_else(|p| p.into_inner());
            let (s, _) = self
                .wake
                .wait_timeout_while(s, self.gather, |s| s.held_bytes < WAKE_BYTES && !stopped())
                .unwrap_or_else(|p| p.into_inner());
            drop(s);
            if stopped() {
                return;
            }
            self.drain();
        }
    }

    /// Writes every held run, in the order held, those that follow each other on the device
    /// joined into one request; returns once they are on the device (or failed: the failure
    /// is kept).
    fn drain(&self) {
        let _turn = self.draining.lock().unwrap_or_else(|p| p.into_inner());
        let runs = {
            let mut s = self.lock();
            if s.held.is_empty() {
                return;
            }
            s.writing_bytes = std::mem::take(&mut s.held_bytes);
            let taken = std::mem::take(&mut s.held);
            s.writing = taken.clone();
            taken
        };
        let mut failed = None;
        let mut group: Vec<&[u8]> = Vec::new();
        let (mut first, mut next) = (0u64, 0u64);
        let mut put = |first: u64, group: &mut Vec<&[u8]>| {
            if failed.is_none() && !group.is_empty() {
                match self
                    .dev
                    .write_blocks_vectored(first, group, IoCause::UserData)
                {
                    Ok(()) => {
                        self.written_runs.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => {
                        failed = Some((e.kind(), format!("held data at block {first}: {e}")));
                    }
                }
            }
            group.clear();
        };
        for (start, run) in &runs {
            for (i, page) in run.pages.iter().enumerate() {
                let at = start + i as u64;
                if group.is_empty() || at != next || group.len() >= MAX_JOIN_BLOCKS {
                    put(first, &mut group);
                    first = at;
                }
                group.push(&page.0);
                next = at + 1;
            }
        }
        put(first, &mut group);
        let mut s = self.lock();
        s.writing.clear();
        s.writing_bytes = 0;
        self.present.fetch_sub(runs.len(), Ordering::AcqRel);
        if let (Some(f), None) = (failed, &s.failed) {
            s.failed = Some(f);
        }
        // A reader may still hold a run for a moment; its blocks are let go.
        let limit = self.limit.load(Ordering::Relaxed);
        for run in runs.into_values() {
            if let Ok(r) = Arc::try_unwrap(run) {
                s.recycle(r.pages, limit);
            }
        }
    }

    /// Holds `buf` for blocks `a..`, replacing whatever held run covered them; the writer
    /// that brings what is held and being written to the bound lands it all. After a failed
    /// write nothing more is held: the failure is returned.
    fn hold(&self, a: u64, buf: &[u8]) -> io::Result<()> {
        let n = (buf.len() / BLOCK_SIZE) as u64;
        let limit = self.limit.load(Ordering::Relaxed);
        let mut s = self.lock();
        if let Some(e) = s.failure() {
            return Err(e);
        }
        let first = s.held.is_empty();
        for (start, old) in overlapping(&s.held, a, n) {
            s.held.remove(&start);
            s.held_bytes -= old.pages.len() * BLOCK_SIZE;
            let mut kept = 0;
            for (from, to, at) in [
                (0, a.saturating_sub(start), start),
                ((a + n).saturating_sub(start), old.blocks(), a + n),
            ] {
                if from < to {
                    let mut part = Run::default();
                    for p in old.pages.get(from as usize..to as usize).unwrap_or(&[]) {
                        let copy = s.page(&p.0);
                        part.pages.push(copy);
                    }
                    s.held_bytes += part.pages.len() * BLOCK_SIZE;
                    s.held.insert(at, Arc::new(part));
                    kept += 1;
                }
            }
            // Added before taken away: a reader never sees 0 while runs are held.
            self.present.fetch_add(kept, Ordering::AcqRel);
            self.present.fetch_sub(1, Ordering::AcqRel);
            if let Ok(r) = Arc::try_unwrap(old) {
                s.recycle(r.pages, limit);
            }
        }
        let pages: Vec<Box<Page>> = buf.chunks(BLOCK_SIZE).map(|b| s.page(b)).collect();
        // Appended to the run it follows when no reader holds that run and the run stays
        // within one request's length.
        let before = s.held.range(..a).next_back().map(|(k, r)| (*k, r.blocks()));
        let mut pages = Some(pages);
        if let Some((k, len)) = before {
            if k + len == a && len as usize + n as usize <= MAX_JOIN_BLOCKS {
                if let Some(r) = s.held.get_mut(&k).and_then(Arc::get_mut) {
                    r.pages.extend(pages.take().unwrap_or_default());
                }
            }
        }
        if let Some(pages) = pages {
            s.held.insert(a, Arc::new(Run { pages }));
            self.present.fetch_add(1, Ordering::AcqRel);
        }
        s.held_bytes += buf.len();
        self.deferred.fetch_add(1, Ordering::Relaxed);
        let over = s.held_bytes + s.writing_bytes >= limit;
        // The thread sleeps until something is held, then until enough is.
        let wake = first || s.held_bytes >= WAKE_BYTES;
        drop(s);
        if over {
            self.writer_drains.fetch_add(1, Ordering::Relaxed);
            self.drain();
        } else if wake {
            self.wake.notify_one();
        }
        Ok(())
    }

    /// Before a write of blocks `a..a + n` that is not held: held or being-written runs it
    /// meets go to the device first.
    fn settle(&self, a: u64, n: u64) {
        if self.present.load(Ordering::Acquire) == 0 {
            return;
        }
        let meets = {
            let s = self.lock();
            !overlapping(&s.held, a, n).is_empty() || !overlapping(&s.writing, a, n).is_empty()
        };
        if meets {
            self.overlap_drains.fetch_add(1, Ordering::Relaxed);
            // A run being written is finished by its writer, who holds the turn.
            self.drain();
        }
    }
}

impl Drop for Behind {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        self.shared.wake.notify_all();
        if let Some(t) = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = t.join();
        }
        // Whatever is still held (a flush writes it; only a volume dropped without one, which
        // made nothing durable since, leaves any).
        self.shared.drain();
    }
}

impl BlockDevice for Behind {
    fn block_count(&self) -> u64 {
        self.shared.dev.block_count()
    }

    fn read_blocks(&self, blkaddr: u64, buf: &mut [u8], cause: IoCause) -> io::Result<()> {
        let sh = &self.shared;
        if sh.present.load(Ordering::Acquire) == 0 {
            return sh.dev.read_blocks(blkaddr, buf, cause);
        }
        let n = (buf.len() / BLOCK_SIZE) as u64;
        // Taken before the device is read: a run that lands meanwhile is laid over what the
        // device then holds anyway. Runs being written are older than held ones.
        let over = {
            let s = sh.lock();
            let mut v = overlapping(&s.writing, blkaddr, n);
            v.extend(overlapping(&s.held, blkaddr, n));
            v
        };
        sh.dev.read_blocks(blkaddr, buf, cause)?;
        for (start, run) in over {
            let from = blkaddr.max(start);
            let to = (blkaddr + n).min(start + run.blocks());
            for at in from..to {
                let page = run.pages.get((at - start) as usize);
                let dst = buf.get_mut(
                    (at - blkaddr) as usize * BLOCK_SIZE..(at - blkaddr + 1) as usize * BLOCK_SIZE,
                );
                if let (Some(p), Some(dst)) = (page, dst) {
                    dst.copy_from_slice(&p.0);
                }
            }
        }
        Ok(())
    }

    fn write_blocks(&self, blkaddr: u64, buf: &[u8], cause: IoCause) -> io::Result<()> {
        // Small runs of user data are held; a large one goes to the device at once (with
        // O_DIRECT where the device does that): holding 1 MiB writes, joined into requests of
        // up to 4 MiB, did not make a stream faster (docs/design.md, stop 43).
        if buf.len() < DIRECT_MIN {
            if let Some(held) = self.try_hold(blkaddr, buf, cause) {
                return held;
            }
        }
        self.settle(blkaddr, buf);
        self.shared.dev.write_blocks(blkaddr, buf, cause)
    }

    fn write_blocks_buffered(&self, blkaddr: u64, buf: &[u8], cause: IoCause) -> io::Result<()> {
        if let Some(held) = self.try_hold(blkaddr, buf, cause) {
            return held;
        }
        self.settle(blkaddr, buf);
        self.shared.dev.write_blocks_buffered(blkaddr, buf, cause)
    }

    fn flush(&self) -> io::Result<()> {
        let sh = &self.shared;
        sh.drain();
        if let Some(e) = sh.lock().failure() {
            return Err(e);
        }
        sh.dev.flush()
    }

    fn counters(&self) -> &IoCounters {
        self.shared.dev.counters()
    }

    fn is_read_only(&self) -> bool {
        self.shared.dev.is_read_only()
    }

    fn set_direct_writes(&self, on: bool) {
        self.shared.dev.set_direct_writes(on)
    }

    fn direct_writes_state(&self) -> DirectWrites {
        self.shared.dev.direct_writes_state()
    }

    fn set_write_behind(&self, bytes: u64) {
        let sh = &self.shared;
        let bytes = usize::try_from(bytes).unwrap_or(usize::MAX);
        if bytes == 0 {
            sh.limit.store(0, Ordering::Relaxed);
            sh.drain();
            return;
        }
        // Without its thread the layer stays off: held runs would wait for a flush.
        let on = !sh.dev.is_read_only() && self.start();
        sh.limit
            .store(if on { bytes } else { 0 }, Ordering::Relaxed);
    }

    fn write_behind_state(&self) -> WriteBehind {
        let sh = &self.shared;
        WriteBehind {
            limit: sh.limit.load(Ordering::Relaxed) as u64,
            held: {
                let s = sh.lock();
                (s.held_bytes + s.writing_bytes) as u64
            },
            deferred: sh.deferred.load(Ordering::Relaxed),
            written_runs: sh.written_runs.load(Ordering::Relaxed),
            writer_drains: sh.writer_drains.load(Ordering::Relaxed),
            overlap_drains: sh.overlap_drains.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MemDevice;
    use proptest::prelude::*;

    const BLOCKS: u64 = 64;

    fn layer(limit: u64) -> (Arc<MemDevice>, Behind) {
        let mem = Arc::new(MemDevice::new(vec![0; BLOCKS as usize * BLOCK_SIZE], false));
        let b = Behind::new(Box::new(Arc::clone(&mem)));
        b.set_write_behind(limit);
        (mem, b)
    }

    fn fill(blocks: u64, byte: u8) -> Vec<u8> {
        vec![byte; blocks as usize * BLOCK_SIZE]
    }

    #[derive(Debug, Clone)]
    enum Op {
        /// Small user data: held.
        Held(u64, u64, u8),
        /// A node block: written at once.
        Node(u64, u8),
        /// User data of DIRECT_MIN or more: written at once.
        Large(u64, u8),
        Read(u64, u64),
        Flush,
    }

    fn op() -> impl Strategy<Value = Op> {
        let large = (DIRECT_MIN / BLOCK_SIZE) as u64;
        prop_oneof![
            4 => (0..BLOCKS - 4, 1..4u64, any::<u8>()).prop_map(|(a, n, b)| Op::Held(a, n, b)),
            1 => (0..BLOCKS, any::<u8>()).prop_map(|(a, b)| Op::Node(a, b)),
            1 => (0..BLOCKS - large, any::<u8>()).prop_map(|(a, b)| Op::Large(a, b)),
            3 => (0..BLOCKS - 8, 1..8u64).prop_map(|(a, n)| Op::Read(a, n)),
            1 => Just(Op::Flush),
        ]
    }

    proptest! {
        /// Whatever is held, written past it, replaced or flushed, reads see the newest
        /// write of every block; after a flush the device itself holds it; and the bound on
        /// held bytes holds after every call.
        #[test]
        fn reads_and_the_device_agree_with_the_order_of_writes(ops in proptest::collection::vec(op(), 1..80), limit_blocks in 2..40u64) {
            let limit = limit_blocks * BLOCK_SIZE as u64;
            let (mem, b) = layer(limit);
            let mut model = vec![0u8; BLOCKS as usize * BLOCK_SIZE];
            let large = (DIRECT_MIN / BLOCK_SIZE) as u64;
            for op in ops {
                let mut put = |a: u64, n: u64, byte: u8| {
                    model[a as usize * BLOCK_SIZE..(a + n) as usize * BLOCK_SIZE].fill(byte);
                };
                match op {
                    Op::Held(a, n, byte) => {
                        b.write_blocks_buffered(a, &fill(n, byte), IoCause::UserData).unwrap();
                        put(a, n, byte);
                    }
                    Op::Node(a, byte) => {
                        b.write_blocks(a, &fill(1, byte), IoCause::Node).unwrap();
                        put(a, 1, byte);
                    }
                    Op::Large(a, byte) => {
                        b.write_blocks(a, &fill(large, byte), IoCause::UserData).unwrap();
                        put(a, large, byte);
                    }
                    Op::Read(a, n) => {
                        let mut got = fill(n, 0xee);
                        b.read_blocks(a, &mut got, IoCause::UserData).unwrap();
                        let want = &model[a as usize * BLOCK_SIZE..(a + n) as usize * BLOCK_SIZE];
                        prop_assert!(got == want, "read of {n} blocks at {a}");
                    }
                    Op::Flush => {
                        b.flush().unwrap();
                        prop_assert!(mem.contents() == model, "device after a flush");
                    }
                }
                prop_assert!(b.write_behind_state().held <= limit);
            }
            b.flush().unwrap();
            prop_assert!(mem.contents() == model);
        }
    }

    #[test]
    fn a_held_run_reaches_the_device_without_a_flush() {
        let (mem, b) = layer(1 << 20);
        b.write_blocks_buffered(5, &fill(2, 3), IoCause::UserData)
            .unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while b.write_behind_state().held > 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        let st = b.write_behind_state();
        assert_eq!((st.held, st.deferred, st.written_runs), (0, 1, 1), "{st:?}");
        assert!(mem.contents()[5 * BLOCK_SIZE..7 * BLOCK_SIZE]
            .iter()
            .all(|&x| x == 3));
    }

    #[test]
    fn runs_that_follow_each_other_go_down_as_one_request() {
        let mem = Arc::new(MemDevice::new(vec![0; BLOCKS as usize * BLOCK_SIZE], false));
        let b = Behind::gathering(Box::new(Arc::clone(&mem)), Duration::from_secs(600));
        b.set_write_behind(1 << 20);
        // Eight small files' blocks, side by side in a log, and one elsewhere.
        for i in 0..8u64 {
            b.write_blocks_buffered(8 + i * 2, &fill(2, i as u8 + 1), IoCause::UserData)
                .unwrap();
        }
        b.write_blocks_buffered(40, &fill(1, 9), IoCause::UserData)
            .unwrap();
        assert_eq!(
            mem.counters().snapshot().total_written(),
            0,
            "held, not written"
        );
        b.flush().unwrap();
        let st = b.write_behind_state();
        assert_eq!((st.deferred, st.written_runs), (9, 2), "{st:?}");
        let c = mem.contents();
        for i in 0..8usize {
            let at = (8 + i * 2) * BLOCK_SIZE;
            assert!(c[at..at + 2 * BLOCK_SIZE].iter().all(|&x| x == i as u8 + 1));
        }
        assert_eq!(c[40 * BLOCK_SIZE], 9);
    }

    /// Scattered one-block writes (slack-space recycling fills holes across the volume) take
    /// a block of memory each, and held, being-written and spare blocks stay within the bound.
    #[test]
    fn scattered_blocks_stay_within_the_bound() {
        let mem = Arc::new(MemDevice::new(vec![0; 4096 * BLOCK_SIZE], false));
        let b = Behind::new(Box::new(Arc::clone(&mem)));
        let limit = 16 * BLOCK_SIZE;
        b.set_write_behind(limit as u64);
        for i in 0..2000u64 {
            b.write_blocks(i * 2 % 4096, &fill(1, i as u8), IoCause::UserData)
                .unwrap();
            let s = b.shared.lock();
            let total = s.held_bytes + s.writing_bytes + s.spare.len() * BLOCK_SIZE;
            assert!(total <= limit + BLOCK_SIZE, "{total} bytes after write {i}");
        }
        b.flush().unwrap();
        assert!(b.shared.lock().spare.len() * BLOCK_SIZE <= limit);
        let c = mem.contents();
        assert_eq!(c[1999 * 2 * BLOCK_SIZE], (1999 % 256) as u8);
    }

    #[test]
    fn off_until_given_a_bound_and_off_again_at_zero() {
        let (mem, b) = layer(0);
        b.write_blocks_buffered(3, &fill(1, 7), IoCause::UserData)
            .unwrap();
        assert_eq!(b.write_behind_state().deferred, 0);
        assert_eq!(mem.contents()[3 * BLOCK_SIZE], 7);
        b.set_write_behind(1 << 20);
        b.write_blocks(4, &fill(1, 8), IoCause::UserData).unwrap();
        assert_eq!(b.write_behind_state().deferred, 1);
        b.set_write_behind(0);
        assert_eq!(
            mem.contents()[4 * BLOCK_SIZE],
            8,
            "turning it off writes what is held"
        );
    }

    /// A device whose writes fail once asked to.
    struct Failing {
        mem: MemDevice,
        fail: AtomicBool,
    }

    impl BlockDevice for Failing {
        fn block_count(&self) -> u64 {
            self.mem.block_count()
        }
        fn read_blocks(&self, a: u64, buf: &mut [u8], c: IoCause) -> io::Result<()> {
            self.mem.read_blocks(a, buf, c)
        }
        fn write_blocks(&self, a: u64, buf: &[u8], c: IoCause) -> io::Result<()> {
            if self.fail.load(Ordering::Relaxed) {
                return Err(io::Error::other("injected"));
            }
            self.mem.write_blocks(a, buf, c)
        }
        fn flush(&self) -> io::Result<()> {
            self.mem.flush()
        }
        fn counters(&self) -> &IoCounters {
            self.mem.counters()
        }
        fn is_read_only(&self) -> bool {
            false
        }
    }

    #[test]
    fn a_held_run_that_fails_to_land_fails_every_later_flush() {
        let dev = Arc::new(Failing {
            mem: MemDevice::new(vec![0; 16 * BLOCK_SIZE], false),
            fail: AtomicBool::new(true),
        });
        let b = Behind::new(Box::new(Arc::clone(&dev)));
        b.set_write_behind(1 << 20);
        b.write_blocks_buffered(2, &fill(1, 9), IoCause::UserData)
            .unwrap();
        let e = b.flush().unwrap_err();
        assert!(e.to_string().contains("held data at block 2"), "{e}");
        dev.fail.store(false, Ordering::Relaxed);
        assert!(b.flush().is_err(), "still failed");
        assert!(b
            .write_blocks_buffered(3, &fill(1, 9), IoCause::UserData)
            .is_err());
    }
}
