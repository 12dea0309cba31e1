//! The block device under the engine: runs of 4 KiB blocks read and written by block address,
//! a flush barrier, and counters.
//!
//! Counters, by cause, in blocks (and requests): every read and write names why it happens, so
//! that `uf2fs status` and the benchmarks can say where the I/O went:
//! - `UserData`: file contents a user read or wrote;
//! - `Node`: inode, direct, indirect and xattr node blocks;
//! - `Meta`: superblock, NAT, SIT, SSA blocks;
//! - `GcData`: data blocks the cleaner moved;
//! - `GcNode`: node blocks written because of the cleaner (nodes it moved, and direct nodes
//!   rewritten only because data they point at moved);
//! - `Checkpoint`: checkpoint packs (CP blocks, summaries, orphan blocks, nat_bits).
//!
//! Backends: [`FileDevice`] (an image file or block device), [`SparseDevice`] (an Android
//! sparse image, read-only; see `sparse.rs`), [`MemDevice`] (memory) and [`RecordingDevice`]
//! (memory, logging every write and flush for crash tests; see `recording.rs`).
//! [`JoinedDevice`] joins several devices end to end by block address (a multi-device volume;
//! see `joined.rs`).
//! [`Behind`] holds small runs of user data and writes them from a thread of its own
//! (see `behind.rs`).
//! [`open_image`] picks between the first two by the file's first bytes.
//!
//! This layer knows nothing about F2FS.

mod ahead;
mod behind;
mod holes;
mod joined;
mod recording;
mod sparse;

pub use behind::{Behind, WriteBehind};
pub use joined::{JoinedDevice, Part};

pub use recording::{CrashLog, Epoch, Event, RecordingDevice, Replay};
pub use sparse::{
    is_sparse, write_sparse, ChunkProblem, SparseDevice, SparseError, SPARSE_MAGIC,
    SPARSE_READ_ONLY,
};

use std::fs::{File, OpenOptions};
use std::io::{self, Seek, SeekFrom};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

pub const BLOCK_SIZE: usize = 4096;

/// The smallest run of user data a [`FileDevice`] writes with O_DIRECT. The daemon's 1 MiB
/// runs written this way skip a copy into the host's page cache: fio's sequential 1 MiB
/// writes through the mount went from a median of 696 to 790 MiB/s (docs/design.md). Small
/// runs stay buffered: a direct write waits for the device, a buffered one only for a copy.
/// A caller that knows someone waits for a write ([`BlockDevice::write_blocks_buffered`])
/// keeps it buffered whatever its size.
pub const DIRECT_MIN: usize = 64 * 1024;

/// Why an I/O happens; each has its own counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoCause {
    UserData,
    Node,
    Meta,
    GcData,
    GcNode,
    Checkpoint,
}

impl IoCause {
    pub const ALL: [IoCause; 6] = [
        IoCause::UserData,
        IoCause::Node,
        IoCause::Meta,
        IoCause::GcData,
        IoCause::GcNode,
        IoCause::Checkpoint,
    ];

    pub fn name(self) -> &'static str {
        match self {
            IoCause::UserData => "data",
            IoCause::Node => "node",
            IoCause::Meta => "meta",
            IoCause::GcData => "gc_data",
            IoCause::GcNode => "gc_node",
            IoCause::Checkpoint => "checkpoint",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Blocks and requests per cause, read and written, plus flushes.
#[derive(Default, Debug)]
pub struct IoCounters {
    read_blocks: [AtomicU64; 6],
    read_requests: [AtomicU64; 6],
    written_blocks: [AtomicU64; 6],
    write_requests: [AtomicU64; 6],
    flushes: AtomicU64,
}

/// A copy of the counters at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IoSnapshot {
    pub read_blocks: [u64; 6],
    pub read_requests: [u64; 6],
    pub written_blocks: [u64; 6],
    pub write_requests: [u64; 6],
    pub flushes: u64,
}

impl IoSnapshot {
    pub fn total_written(&self) -> u64 {
        self.written_blocks.iter().sum()
    }
    pub fn total_read(&self) -> u64 {
        self.read_blocks.iter().sum()
    }
}

fn add(slot: Option<&AtomicU64>, n: u64) {
    if let Some(c) = slot {
        c.fetch_add(n, Ordering::Relaxed);
    }
}

impl IoCounters {
    pub fn record_read(&self, cause: IoCause, blocks: u64) {
        add(self.read_blocks.get(cause.index()), blocks);
        add(self.read_requests.get(cause.index()), 1);
    }

    pub fn record_write(&self, cause: IoCause, blocks: u64) {
        add(self.written_blocks.get(cause.index()), blocks);
        add(self.write_requests.get(cause.index()), 1);
    }

    pub fn record_flush(&self) {
        self.flushes.fetch_add(1, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> IoSnapshot {
        let load = |a: &[AtomicU64; 6]| a.each_ref().map(|c| c.load(Ordering::Relaxed));
        IoSnapshot {
            read_blocks: load(&self.read_blocks),
            read_requests: load(&self.read_requests),
            written_blocks: load(&self.written_blocks),
            write_requests: load(&self.write_requests),
            flushes: self.flushes.load(Ordering::Relaxed),
        }
    }
}

/// A device of 4 KiB blocks. Buffers are whole blocks; `blkaddr` counts from the device start.
pub trait BlockDevice: Send + Sync {
    /// Whole blocks on the device.
    fn block_count(&self) -> u64;
    fn read_blocks(&self, blkaddr: u64, buf: &mut [u8], cause: IoCause) -> io::Result<()>;
    fn write_blocks(&self, blkaddr: u64, buf: &[u8], cause: IoCause) -> io::Result<()>;
    /// [`BlockDevice::write_blocks`], never past the host's page cache (no O_DIRECT): for a
    /// write somebody is waiting for, which a buffered write returns sooner from.
    fn write_blocks_buffered(&self, blkaddr: u64, buf: &[u8], cause: IoCause) -> io::Result<()> {
        self.write_blocks(blkaddr, buf, cause)
    }
    /// Writes `bufs` one after another from `blkaddr` on, as one request where the device
    /// can (each piece whole blocks): runs held apart in memory that follow each other on
    /// the device. By default, one [`BlockDevice::write_blocks`] per piece.
    fn write_blocks_vectored(
        &self,
        blkaddr: u64,
        bufs: &[&[u8]],
        cause: IoCause,
    ) -> io::Result<()> {
        let mut at = blkaddr;
        for b in bufs {
            self.write_blocks(at, b, cause)?;
            at += (b.len() / BLOCK_SIZE) as u64;
        }
        Ok(())
    }
    /// Makes every completed write durable.
    fn flush(&self) -> io::Result<()>;
    fn counters(&self) -> &IoCounters;
    fn is_read_only(&self) -> bool;
    /// Whether large runs of user data may bypass the host's page cache (O_DIRECT), where the
    /// backend can; the others ignore it. Off until asked for.
    fn set_direct_writes(&self, _on: bool) {}
    /// How direct writes stand (`uf2fs status`).
    fn direct_writes_state(&self) -> DirectWrites {
        DirectWrites::default()
    }
    /// Holds small runs of user data, at most `bytes` of them, and writes them a little
    /// later, joined where they follow each other (0: every write goes to the device at
    /// once). Only a [`Behind`] does; the others ignore it.
    fn set_write_behind(&self, _bytes: u64) {}
    /// How write-behind stands (`uf2fs status`).
    fn write_behind_state(&self) -> WriteBehind {
        WriteBehind::default()
    }
}

/// How a device's direct writes stand.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DirectWrites {
    /// The backend can write with O_DIRECT (the host took the open).
    pub available: bool,
    /// Asked for (`set_direct_writes`).
    pub on: bool,
    /// The host refused a direct write; buffered since.
    pub refused: bool,
    /// Runs written with O_DIRECT.
    pub runs: u64,
}

/// A shared device: a test keeps one handle to look at the image while the engine owns the
/// other.
impl<T: BlockDevice + ?Sized> BlockDevice for std::sync::Arc<T> {
    fn block_count(&self) -> u64 {
        (**self).block_count()
    }
    fn read_blocks(&self, blkaddr: u64, buf: &mut [u8], cause: IoCause) -> io::Result<()> {
        (**self).read_blocks(blkaddr, buf, cause)
    }
    fn write_blocks(&self, blkaddr: u64, buf: &[u8], cause: IoCause) -> io::Result<()> {
        (**self).write_blocks(blkaddr, buf, cause)
    }
    fn write_blocks_buffered(&self, blkaddr: u64, buf: &[u8], cause: IoCause) -> io::Result<()> {
        (**self).write_blocks_buffered(blkaddr, buf, cause)
    }
    fn write_blocks_vectored(
        &self,
        blkaddr: u64,
        bufs: &[&[u8]],
        cause: IoCause,
    ) -> io::Result<()> {
        (**self).write_blocks_vectored(blkaddr, bufs, cause)
    }
    fn flush(&self) -> io::Result<()> {
        (**self).flush()
    }
    fn counters(&self) -> &IoCounters {
        (**self).counters()
    }
    fn is_read_only(&self) -> bool {
        (**self).is_read_only()
    }
    fn set_direct_writes(&self, on: bool) {
        (**self).set_direct_writes(on)
    }
    fn direct_writes_state(&self) -> DirectWrites {
        (**self).direct_writes_state()
    }
    fn set_write_behind(&self, bytes: u64) {
        (**self).set_write_behind(bytes)
    }
    fn write_behind_state(&self) -> WriteBehind {
        (**self).write_behind_state()
    }
}

/// Opens the image at `path`: a [`SparseDevice`] when it starts with the sparse magic (which
/// cannot be opened for writing: the error says so), else a [`FileDevice`].
pub fn open_image(path: &Path, writable: bool) -> io::Result<Box<dyn BlockDevice>> {
    if is_sparse(path)? {
        if writable {
            return Err(io::Error::new(
                io::ErrorKind::ReadOnlyFilesystem,
                SPARSE_READ_ONLY,
            ));
        }
        return Ok(Box::new(SparseDevice::open(path)?));
    }
    Ok(Box::new(FileDevice::open(path, writable)?))
}

/// Takes a shared (read-only) or exclusive lock on an open image, without waiting: a busy
/// image is an error.
pub(crate) fn lock(file: &File, writable: bool) -> io::Result<()> {
    // One writer or any number of readers: a second read-write open (a second mount of
    // the same image) would corrupt it. The lock is advisory and goes with the file.
    let locked = if writable {
        file.try_lock()
    } else {
        file.try_lock_shared()
    };
    if let Err(e) = locked {
        return Err(match e {
            std::fs::TryLockError::WouldBlock => io::Error::new(
                io::ErrorKind::ResourceBusy,
                if writable {
                    "the image is in use (mounted or opened by another uf2fs process)"
                } else {
                    "the image is opened for writing by another uf2fs process (mounted?)"
                },
            ),
            std::fs::TryLockError::Error(e) => e,
        });
    }
    Ok(())
}

/// A regular file or a block device.
pub struct FileDevice {
    file: File,
    /// The same file opened with O_DIRECT (when the host allows it), for large runs of user
    /// data: written from the daemon's buffer straight to the device, without a copy into the
    /// host's page cache (see [`DIRECT_MIN`]).
    direct: Option<File>,
    /// Whether `direct` is used: off until asked for (`set_direct_writes`).
    direct_on: std::sync::atomic::AtomicBool,
    /// The host refused a direct write as unaligned (EINVAL): buffered for good.
    direct_refused: std::sync::atomic::AtomicBool,
    /// Writes made with O_DIRECT.
    direct_done: AtomicU64,
    /// The image file's holes, allocated ahead of user data writes (see `holes.rs`); None for
    /// a block device and a read-only image.
    holes: Option<holes::Holes>,
    blocks: u64,
    read_only: bool,
    counters: IoCounters,
    /// Sequential streams of user data, read ahead of (see `ahead.rs`).
    ahead: ahead::Ahead,
}

impl FileDevice {
    /// Opens `path` read-only or read-write, taking a shared (read-only) or exclusive lock on
    /// it, without waiting: a busy image is an error. The size of a block device is found by seeking
    /// to its end; a tail shorter than a block is not used.
    pub fn open(path: &Path, writable: bool) -> io::Result<FileDevice> {
        let mut file = OpenOptions::new().read(true).write(writable).open(path)?;
        let meta = file.metadata()?;
        if meta.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "is a directory",
            ));
        }
        lock(&file, writable)?;
        let direct = if writable {
            use std::os::unix::fs::OpenOptionsExt;
            OpenOptions::new()
                .write(true)
                .custom_flags(rustix::fs::OFlags::DIRECT.bits() as i32)
                .open(path)
                .ok()
        } else {
            None
        };
        let len = if meta.is_file() {
            meta.len()
        } else {
            file.seek(SeekFrom::End(0))?
        };
        let ahead = ahead::Ahead::new(path, std::os::fd::AsRawFd::as_raw_fd(&file));
        let holes = (meta.is_file() && writable).then(|| holes::Holes::new(len));
        Ok(FileDevice {
            file,
            direct_on: std::sync::atomic::AtomicBool::new(false),
            direct_refused: std::sync::atomic::AtomicBool::new(false),
            direct,
            direct_done: AtomicU64::new(0),
            holes,
            blocks: len / BLOCK_SIZE as u64,
            read_only: !writable,
            counters: IoCounters::default(),
            ahead,
        })
    }

    /// Writes `bufs` (whole blocks each) one after another from block `blkaddr`, in one
    /// request, with O_DIRECT if `may_direct` and the whole is a large run of user data in
    /// block-aligned pieces and direct writes are on. Node, metadata and cleaner writes, and
    /// small runs, go through the page cache: the cleaner writes under the write lock, where
    /// a buffered write returns sooner. A direct write lands before it returns and drops the
    /// host's cached pages of its range, so buffered reads after it see it; the flush before
    /// each checkpoint covers both kinds.
    fn write_pieces(
        &self,
        blkaddr: u64,
        bufs: &[&[u8]],
        cause: IoCause,
        may_direct: bool,
    ) -> io::Result<()> {
        if self.read_only {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                "device opened read-only",
            ));
        }
        if bufs.iter().any(|b| !b.len().is_multiple_of(BLOCK_SIZE)) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "buffer is not whole blocks",
            ));
        }
        let len: usize = bufs.iter().map(|b| b.len()).sum();
        let n = self.check_run(blkaddr, len)?;
        let at = blkaddr * BLOCK_SIZE as u64;
        let direct = self.direct.as_ref().filter(|_| {
            may_direct
                && cause == IoCause::UserData
                && len >= DIRECT_MIN
                && bufs
                    .iter()
                    .all(|b| (b.as_ptr() as usize).is_multiple_of(BLOCK_SIZE))
                && self.direct_on.load(Ordering::Relaxed)
                && !self.direct_refused.load(Ordering::Relaxed)
        });
        let file = direct.unwrap_or(&self.file);
        if cause == IoCause::UserData {
            if let Some(h) = &self.holes {
                h.fill(file, at, len as u64);
            }
        }
        match write_all_pieces(file, bufs, at) {
            Ok(()) => {}
            // The host wants another alignment (a device of larger logical blocks): buffered
            // from now on.
            Err(e)
                if direct.is_some()
                    && e.raw_os_error() == Some(rustix::io::Errno::INVAL.raw_os_error()) =>
            {
                self.direct_refused.store(true, Ordering::Relaxed);
                return self.write_pieces(blkaddr, bufs, cause, false);
            }
            Err(e) => return Err(e),
        }
        if direct.is_some() {
            self.direct_done.fetch_add(1, Ordering::Relaxed);
        }
        self.counters.record_write(cause, n);
        Ok(())
    }

    fn check_run(&self, blkaddr: u64, len: usize) -> io::Result<u64> {
        run_blocks(
            blkaddr,
            len,
            self.blocks,
            "the device",
            ": image truncated?",
        )
    }
}

/// The blocks in a run of `len` bytes at `blkaddr` on something of `end` blocks (`place`
/// names it in the error, `hint` follows): whole blocks only, none past the end.
pub(crate) fn run_blocks(
    blkaddr: u64,
    len: usize,
    end: u64,
    place: &str,
    hint: &str,
) -> io::Result<u64> {
    if !len.is_multiple_of(BLOCK_SIZE) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "buffer is not whole blocks",
        ));
    }
    let n = (len / BLOCK_SIZE) as u64;
    if blkaddr.checked_add(n).is_none_or(|e| e > end) {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!(
                "blocks {blkaddr}..{} are past the end of {place} ({end} blocks){hint}",
                blkaddr.saturating_add(n)
            ),
        ));
    }
    Ok(n)
}

/// Writes `bufs` one after another at byte `at` of `file`: one `pwrite` for a single piece,
/// else `pwritev`s until all is written (a short write goes on where it stopped).
fn write_all_pieces(file: &File, bufs: &[&[u8]], at: u64) -> io::Result<()> {
    if let [one] = bufs {
        return file.write_all_at(one, at);
    }
    let len: usize = bufs.iter().map(|b| b.len()).sum();
    let mut done = 0usize;
    while done < len {
        let mut skip = done;
        let rest: Vec<io::IoSlice<'_>> = bufs
            .iter()
            .filter_map(|b| {
                let piece = b.get(skip.min(b.len())..).filter(|p| !p.is_empty());
                skip = skip.saturating_sub(b.len());
                piece.map(io::IoSlice::new)
            })
            .collect();
        match rustix::io::pwritev(file, &rest, at + done as u64) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::WriteZero,
                    "failed to write whole buffer",
                ))
            }
            Ok(k) => done += k,
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

impl BlockDevice for FileDevice {
    fn block_count(&self) -> u64 {
        self.blocks
    }

    fn read_blocks(&self, blkaddr: u64, buf: &mut [u8], cause: IoCause) -> io::Result<()> {
        let n = self.check_run(blkaddr, buf.len())?;
        let at = blkaddr * BLOCK_SIZE as u64;
        if cause == IoCause::UserData {
            self.ahead.read(at, buf.len() as u64);
        }
        self.file.read_exact_at(buf, at)?;
        self.counters.record_read(cause, n);
        Ok(())
    }

    fn write_blocks(&self, blkaddr: u64, buf: &[u8], cause: IoCause) -> io::Result<()> {
        self.write_pieces(blkaddr, &[buf], cause, true)
    }

    fn write_blocks_buffered(&self, blkaddr: u64, buf: &[u8], cause: IoCause) -> io::Result<()> {
        self.write_pieces(blkaddr, &[buf], cause, false)
    }

    fn write_blocks_vectored(
        &self,
        blkaddr: u64,
        bufs: &[&[u8]],
        cause: IoCause,
    ) -> io::Result<()> {
        if bufs.is_empty() {
            return Ok(());
        }
        self.write_pieces(blkaddr, bufs, cause, true)
    }

    fn set_direct_writes(&self, on: bool) {
        self.direct_on.store(on, Ordering::Relaxed);
    }

    fn direct_writes_state(&self) -> DirectWrites {
        DirectWrites {
            available: self.direct.is_some(),
            on: self.direct_on.load(Ordering::Relaxed),
            refused: self.direct_refused.load(Ordering::Relaxed),
            runs: self.direct_done.load(Ordering::Relaxed),
        }
    }

    fn flush(&self) -> io::Result<()> {
        if !self.read_only {
            self.file.sync_data()?;
        }
        self.counters.record_flush();
        Ok(())
    }

    fn counters(&self) -> &IoCounters {
        &self.counters
    }

    fn is_read_only(&self) -> bool {
        self.read_only
    }
}

/// A read-only device seen through an in-memory layer that takes writes: what a read-only
/// mount uses to replay the roll-forward chain without writing the device (the engine's
/// recovery writes a few blocks, directory entries of recovered files, to places the last
/// checkpoint does not use). Blocks written are kept until the overlay is dropped.
pub struct OverlayDevice {
    base: Box<dyn BlockDevice>,
    written: std::sync::RwLock<std::collections::HashMap<u64, Box<[u8; BLOCK_SIZE]>>>,
    counters: IoCounters,
}

impl OverlayDevice {
    pub fn new(base: Box<dyn BlockDevice>) -> OverlayDevice {
        OverlayDevice {
            base,
            written: std::sync::RwLock::new(std::collections::HashMap::new()),
            counters: IoCounters::default(),
        }
    }

    /// Blocks held in memory.
    pub fn overlay_blocks(&self) -> usize {
        self.written.read().map(|w| w.len()).unwrap_or(0)
    }
}

impl BlockDevice for OverlayDevice {
    fn block_count(&self) -> u64 {
        self.base.block_count()
    }

    fn read_blocks(&self, blkaddr: u64, buf: &mut [u8], cause: IoCause) -> io::Result<()> {
        self.base.read_blocks(blkaddr, buf, cause)?;
        let w = self.written.read().map_err(|_| poisoned())?;
        if !w.is_empty() {
            for (i, chunk) in buf.chunks_mut(BLOCK_SIZE).enumerate() {
                if let Some(src) = w
                    .get(&(blkaddr + i as u64))
                    .and_then(|b| b.get(..chunk.len()))
                {
                    chunk.copy_from_slice(src);
                }
            }
        }
        self.counters
            .record_read(cause, (buf.len() / BLOCK_SIZE) as u64);
        Ok(())
    }

    fn write_blocks(&self, blkaddr: u64, buf: &[u8], cause: IoCause) -> io::Result<()> {
        let end = blkaddr.checked_add((buf.len() / BLOCK_SIZE) as u64);
        if !buf.len().is_multiple_of(BLOCK_SIZE) || end.is_none_or(|e| e > self.block_count()) {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("blocks at {blkaddr} are past the end of the device"),
            ));
        }
        let mut w = self.written.write().map_err(|_| poisoned())?;
        for (i, chunk) in buf.chunks_exact(BLOCK_SIZE).enumerate() {
            let mut b = Box::new([0u8; BLOCK_SIZE]);
            b.copy_from_slice(chunk);
            w.insert(blkaddr + i as u64, b);
        }
        self.counters
            .record_write(cause, (buf.len() / BLOCK_SIZE) as u64);
        Ok(())
    }

    fn flush(&self) -> io::Result<()> {
        Ok(())
    }

    fn counters(&self) -> &IoCounters {
        &self.counters
    }

    fn is_read_only(&self) -> bool {
        false
    }
}

/// A device in memory: for tests, fuzzing and crash experiments.
pub struct MemDevice {
    data: std::sync::RwLock<Vec<u8>>,
    counters: IoCounters,
    read_only: bool,
}

impl MemDevice {
    /// A device holding `data` (its length rounded down to whole blocks).
    pub fn new(mut data: Vec<u8>, read_only: bool) -> MemDevice {
        data.truncate(data.len() / BLOCK_SIZE * BLOCK_SIZE);
        MemDevice {
            data: std::sync::RwLock::new(data),
            counters: IoCounters::default(),
            read_only,
        }
    }

    /// A copy of the whole device.
    pub fn contents(&self) -> Vec<u8> {
        self.data.read().map(|d| d.clone()).unwrap_or_default()
    }

    /// The whole device, without copying it.
    pub fn into_contents(self) -> Vec<u8> {
        self.data.into_inner().unwrap_or_else(|e| e.into_inner())
    }
}

/// The byte range of `len` bytes at block `blkaddr` in a device of `have` bytes: whole
/// blocks, inside the device (shared by the in-memory devices).
pub(crate) fn block_range(
    blkaddr: u64,
    len: usize,
    have: usize,
) -> io::Result<std::ops::Range<usize>> {
    let start = usize::try_from(blkaddr)
        .ok()
        .and_then(|b| b.checked_mul(BLOCK_SIZE));
    match start.and_then(|s| s.checked_add(len).map(|e| s..e)) {
        Some(r) if r.end <= have && len.is_multiple_of(BLOCK_SIZE) => Ok(r),
        _ => Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!(
                "blocks at {blkaddr} are past the end of the device ({} blocks)",
                have / BLOCK_SIZE
            ),
        )),
    }
}

fn poisoned() -> io::Error {
    io::Error::other("memory device lock poisoned")
}

impl BlockDevice for MemDevice {
    fn block_count(&self) -> u64 {
        self.data
            .read()
            .map(|d| (d.len() / BLOCK_SIZE) as u64)
            .unwrap_or(0)
    }

    fn read_blocks(&self, blkaddr: u64, buf: &mut [u8], cause: IoCause) -> io::Result<()> {
        let d = self.data.read().map_err(|_| poisoned())?;
        let r = block_range(blkaddr, buf.len(), d.len())?;
        buf.copy_from_slice(d.get(r).unwrap_or(&[]));
        self.counters
            .record_read(cause, (buf.len() / BLOCK_SIZE) as u64);
        Ok(())
    }

    fn write_blocks(&self, blkaddr: u64, buf: &[u8], cause: IoCause) -> io::Result<()> {
        if self.read_only {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                "device opened read-only",
            ));
        }
        let mut d = self.data.write().map_err(|_| poisoned())?;
        let r = block_range(blkaddr, buf.len(), d.len())?;
        if let Some(dst) = d.get_mut(r) {
            dst.copy_from_slice(buf);
        }
        self.counters
            .record_write(cause, (buf.len() / BLOCK_SIZE) as u64);
        Ok(())
    }

    fn flush(&self) -> io::Result<()> {
        self.counters.record_flush();
        Ok(())
    }

    fn counters(&self) -> &IoCounters {
        &self.counters
    }

    fn is_read_only(&self) -> bool {
        self.read_only
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_writer_or_many_readers() {
        let p = std::env::temp_dir().join(format!("uf2fs-lock-{}", std::process::id()));
        std::fs::write(&p, vec![0u8; 4 * BLOCK_SIZE]).unwrap();
        let busy = |r: io::Result<FileDevice>| matches!(r, Err(e) if e.kind() == io::ErrorKind::ResourceBusy);
        let r1 = FileDevice::open(&p, false).unwrap();
        let r2 = FileDevice::open(&p, false).unwrap();
        assert!(busy(FileDevice::open(&p, true)), "a writer while read");
        drop((r1, r2));
        let w = FileDevice::open(&p, true).unwrap();
        assert!(busy(FileDevice::open(&p, true)), "a second writer");
        assert!(busy(FileDevice::open(&p, false)), "a reader while written");
        drop(w);
        FileDevice::open(&p, true).unwrap();
        let _ = std::fs::remove_file(&p);
    }

    /// A buffered write of user data into a hole of a sparse image allocates the piece
    /// around it first (the host then has no block to reserve under the write); a write of
    /// metadata does not, and neither changes the image's size.
    #[test]
    fn user_data_written_into_a_hole_finds_its_piece_allocated() {
        use std::os::unix::fs::MetadataExt;
        let p = std::env::temp_dir().join(format!("uf2fs-holes-dev-{}", std::process::id()));
        let f = std::fs::File::create(&p).unwrap();
        let len = 256u64 << 20;
        f.set_len(len).unwrap();
        drop(f);
        let allocated = || std::fs::metadata(&p).unwrap().blocks() * 512;
        let d = FileDevice::open(&p, true).unwrap();
        let block = vec![7u8; BLOCK_SIZE];
        d.write_blocks(100 << 8, &block, IoCause::Meta).unwrap();
        let meta = allocated();
        assert!(meta < 1 << 20, "metadata preallocated {meta} bytes");
        d.write_blocks_buffered(20 << 8, &block, IoCause::UserData)
            .unwrap();
        let data = allocated() - meta;
        assert!(
            (8 << 20..=64 << 20).contains(&data),
            "a block of user data took {data} bytes"
        );
        assert_eq!(std::fs::metadata(&p).unwrap().len(), len);
        let mut back = vec![0u8; BLOCK_SIZE];
        d.read_blocks(20 << 8, &mut back, IoCause::UserData)
            .unwrap();
        assert_eq!(back, block);
        drop(d);
        let _ = std::fs::remove_file(&p);
    }

    /// A run in a block-aligned buffer, filled with `byte`.
    fn aligned(blocks: usize, byte: u8) -> (Vec<u8>, usize) {
        let v = vec![byte; (blocks + 1) * BLOCK_SIZE];
        let start = (BLOCK_SIZE - v.as_ptr() as usize % BLOCK_SIZE) % BLOCK_SIZE;
        (v, start)
    }

    /// A zeroed image file of `blocks` blocks in the temporary directory, opened read-write
    /// with direct writes asked for; its path, to remove.
    fn temp_device(name: &str, blocks: usize) -> (FileDevice, std::path::PathBuf) {
        let p = std::env::temp_dir().join(format!("uf2fs-{name}-{}", std::process::id()));
        std::fs::write(&p, vec![0u8; blocks * BLOCK_SIZE]).unwrap();
        let d = FileDevice::open(&p, true).unwrap();
        d.set_direct_writes(true);
        (d, p)
    }

    /// Pieces held apart in memory go down as one request, direct when the whole is a large
    /// run in aligned pieces, buffered otherwise, and read back in place.
    #[test]
    fn pieces_written_as_one_request_read_back_in_place() {
        let n = DIRECT_MIN / BLOCK_SIZE;
        let (d, p) = temp_device("pieces", 8 * n);
        let direct = d.direct.is_some();
        let (a, sa) = aligned(n, 7);
        let (b, sb) = aligned(n / 2, 8);
        let pieces = [&a[sa..sa + n * BLOCK_SIZE], &b[sb..sb + n / 2 * BLOCK_SIZE]];
        d.write_blocks_vectored(3, &pieces, IoCause::UserData)
            .unwrap();
        assert_eq!(d.direct_writes_state().runs, u64::from(direct));
        // Small and unaligned pieces: buffered.
        d.write_blocks_vectored(
            2 * n as u64,
            &[&[1u8; BLOCK_SIZE], &[2u8; 2 * BLOCK_SIZE]],
            IoCause::UserData,
        )
        .unwrap();
        assert_eq!(d.direct_writes_state().runs, u64::from(direct));
        assert_eq!(
            d.counters().snapshot().write_requests[0],
            2,
            "one request each"
        );
        let mut all = vec![0u8; 8 * n * BLOCK_SIZE];
        d.read_blocks(0, &mut all, IoCause::UserData).unwrap();
        let at = |blk: usize| all[blk * BLOCK_SIZE];
        assert_eq!(
            (
                at(2),
                at(3),
                at(3 + n - 1),
                at(3 + n),
                at(3 + n + n / 2 - 1)
            ),
            (0, 7, 7, 8, 8)
        );
        assert_eq!(
            (at(2 * n), at(2 * n + 1), at(2 * n + 2), at(2 * n + 3)),
            (1, 2, 2, 0)
        );
        assert!(d
            .write_blocks_vectored(0, &[&[0u8; 100]], IoCause::UserData)
            .is_err());
        drop(d);
        let _ = std::fs::remove_file(&p);
    }

    /// Large user-data runs go past the page cache, everything else through it, and every
    /// read sees the last write of each block whichever way each went: the engine reuses an
    /// address written one way for a run written the other.
    #[test]
    fn direct_and_buffered_writes_of_the_same_blocks_read_back_in_order() {
        // Runs of `n` blocks are the smallest that go direct.
        let n = DIRECT_MIN / BLOCK_SIZE;
        let (d, p) = temp_device("direct", 4 * n);
        assert!(
            d.direct.is_some(),
            "{}: the host refused O_DIRECT; this test needs a file system that takes it",
            p.display()
        );
        let read = |at: u64| {
            let mut b = vec![0u8; BLOCK_SIZE];
            d.read_blocks(at, &mut b, IoCause::UserData).unwrap();
            b
        };
        // A buffered block, read into the page cache, then a direct run over it.
        d.write_blocks(5, &[1u8; BLOCK_SIZE], IoCause::UserData)
            .unwrap();
        assert_eq!(read(5), vec![1u8; BLOCK_SIZE]);
        let (run, s) = aligned(2 * n, 2);
        d.write_blocks(0, &run[s..s + 2 * n * BLOCK_SIZE], IoCause::UserData)
            .unwrap();
        assert_eq!(d.direct_writes_state().runs, 1);
        assert_eq!(read(5), vec![2u8; BLOCK_SIZE]);
        // Buffered again over part of it, still in the page cache (not flushed).
        d.write_blocks(6, &[3u8; BLOCK_SIZE], IoCause::UserData)
            .unwrap();
        assert_eq!(read(6), vec![3u8; BLOCK_SIZE]);
        // A direct run over that dirty cached block: the run wins.
        let (run, s) = aligned(n, 4);
        d.write_blocks(4, &run[s..s + n * BLOCK_SIZE], IoCause::UserData)
            .unwrap();
        assert_eq!(d.direct_writes_state().runs, 2);
        assert_eq!(read(6), vec![4u8; BLOCK_SIZE]);
        // Not direct: small runs, other causes, unaligned buffers, runs asked to stay
        // buffered, or turned off.
        let (run, s) = aligned(n, 5);
        d.write_blocks_buffered(2 * n as u64, &run[s..s + n * BLOCK_SIZE], IoCause::UserData)
            .unwrap();
        d.write_blocks(
            2 * n as u64,
            &run[s..s + (n - 1) * BLOCK_SIZE],
            IoCause::UserData,
        )
        .unwrap();
        d.write_blocks(2 * n as u64, &run[s..s + n * BLOCK_SIZE], IoCause::GcData)
            .unwrap();
        let (run, s) = aligned(n + 1, 6);
        let off = s + 512;
        d.write_blocks(
            2 * n as u64,
            &run[off..off + n * BLOCK_SIZE],
            IoCause::UserData,
        )
        .unwrap();
        d.set_direct_writes(false);
        d.write_blocks(3 * n as u64, &run[s..s + n * BLOCK_SIZE], IoCause::UserData)
            .unwrap();
        assert_eq!(d.direct_writes_state().runs, 2);
        assert_eq!(read(2 * n as u64), vec![6u8; BLOCK_SIZE]);
        assert_eq!(read(4 * n as u64 - 1), vec![6u8; BLOCK_SIZE]);
        d.flush().unwrap();
        drop(d);
        let bytes = std::fs::read(&p).unwrap();
        for (blk, want) in [
            (0, 2u8),
            (3, 2),
            (4, 4),
            (6, 4),
            (n + 3, 4),
            (n + 4, 2),
            (2 * n - 1, 2),
            (2 * n, 6),
        ] {
            assert_eq!(bytes[blk * BLOCK_SIZE], want, "block {blk}");
        }
        std::fs::remove_file(&p).unwrap();
    }

    #[test]
    fn reads_past_the_end_name_the_blocks() {
        let dir = std::env::temp_dir().join(format!("uf2fs-dev-{}", std::process::id()));
        std::fs::write(&dir, vec![7u8; 3 * BLOCK_SIZE + 100]).unwrap();
        let d = FileDevice::open(&dir, false).unwrap();
        assert_eq!(d.block_count(), 3);
        let mut b = vec![0u8; BLOCK_SIZE];
        d.read_blocks(2, &mut b, IoCause::Meta).unwrap();
        assert_eq!(b[0], 7);
        let e = d.read_blocks(3, &mut b, IoCause::Meta).unwrap_err();
        assert!(e.to_string().contains("past the end"), "{e}");
        assert!(d.write_blocks(0, &b, IoCause::Meta).is_err());
        assert_eq!(d.counters().snapshot().read_blocks[2], 1);
        std::fs::remove_file(&dir).unwrap();
    }
}
