//! The mounted volume: what every part of the engine shares (device, superblock, layout,
//! NAT, node cache, inode cache, the write lock's state, blocks in flight), and `Fs`, the
//! handle whose methods the parts implement. Nothing here knows what a change means.

use crate::error::{Error, Result};
use crate::node::nat::Nat;
use crate::node::Nodes;
use crate::state::WriteState;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use uf2fs_device::{BlockDevice, IoCause};
use uf2fs_format::checkpoint::Checkpoint;
use uf2fs_format::inode::Inode;
use uf2fs_format::sit::SitEntry;
use uf2fs_format::superblock::{Layout, Superblock};
use uf2fs_format::{Block, BLOCK_SIZE};

/// The mounted volume's state, shared by the modules that implement `Fs`.
pub(crate) struct Vol {
    pub dev: Box<dyn BlockDevice>,
    pub sb: Superblock,
    pub layout: Layout,
    pub cp: Checkpoint,
    pub nat: Nat,
    pub nodes: Nodes,
    pub(crate) inodes: Mutex<HashMap<u32, Arc<Inode>>>,
    /// Parsed inodes kept at most (from `Options::cache_bytes`).
    pub(crate) inode_cap: usize,
    /// Dirty node blocks kept before a change asks for a checkpoint (as many blocks as
    /// `Options::cache_bytes` holds: the clean caches and the dirty nodes each stay within
    /// that bound).
    pub(crate) dirty_budget: usize,
    /// Moves (under the `inodes` lock) whenever an inode changes, so that a reader that
    /// fetched a block before the change does not cache it after.
    pub(crate) inode_epoch: std::sync::atomic::AtomicU64,
    pub(crate) sit_journal: Vec<(u32, SitEntry)>,
    pub(crate) orphans: Vec<u32>,
    pub(crate) notes: Vec<String>,
    /// Summaries of the six current segments as the mounted pack has them (node ones only
    /// when the pack carries them).
    pub(crate) cur_summaries: Vec<Option<Vec<uf2fs_format::summary::RawSummary>>>,
    /// The writable state; `None` for a read-only mount.
    pub(crate) write: Option<Mutex<WriteState>>,
    pub(crate) options: Options,
    /// Changes made since mount (each `changing` call is one), and the last change to each
    /// inode since the last checkpoint began: a checkpoint request is served by any
    /// checkpoint that began after the last change it must cover (merging).
    pub(crate) change_seq: std::sync::atomic::AtomicU64,
    pub(crate) last_change: Mutex<HashMap<u32, u64>>,
    /// What roll-forward recovery did at mount, if there was a chain to replay.
    pub(crate) recovery: Option<crate::durability::state::RecoveryStats>,
    /// The quota files of a writable mount of an image that keeps quota.
    pub(crate) quota: Option<crate::ns::quota::QuotaBook>,
    /// A change had to clean for itself since the background cleaner last caught up: the
    /// cleaner queues for the write lock instead of yielding.
    pub(crate) gc_urgent: std::sync::atomic::AtomicBool,
    /// Data blocks linked by a change whose write has not landed yet.
    pub(crate) inflight: crate::data::Inflight,
}

impl Vol {
    /// Reads data (file or dentry) blocks from `addr` on into `buf`, taking blocks whose
    /// write is still in flight from memory. `what` names them in an I/O error.
    pub(crate) fn read_data(&self, addr: u64, buf: &mut [u8], what: &str) -> Result<()> {
        let n = buf.len() / BLOCK_SIZE;
        let copies = self.inflight.copies(addr, n);
        if copies.len() < n {
            self.dev
                .read_blocks(addr, buf, IoCause::UserData)
                .map_err(|e| Error::io(format!("{what} at block {addr}"), e))?;
        }
        for (i, b) in copies {
            if let Some(dst) = buf.get_mut(i * BLOCK_SIZE..(i + 1) * BLOCK_SIZE) {
                dst.copy_from_slice(&b);
            }
        }
        Ok(())
    }

    /// One data block at `addr` (see [`Vol::read_data`]).
    pub(crate) fn read_data_block(&self, addr: u64, what: &str) -> Result<Block> {
        let mut b = [0u8; BLOCK_SIZE];
        self.read_data(addr, &mut b, what)?;
        Ok(b)
    }

    /// Main segment `segno`'s block of the SSA, from the device.
    pub(crate) fn read_ssa(&self, segno: u32) -> Result<Block> {
        crate::mount::read_block(
            &*self.dev,
            u64::from(self.layout.ssa) + u64::from(segno),
            IoCause::Meta,
            "SSA block",
        )
    }

    /// Drops the cached parse of `ino` after a change to it (see `inode_epoch`).
    pub(crate) fn forget_inode(&self, ino: u32) {
        if let Ok(mut c) = self.inodes.lock() {
            c.remove(&ino);
            self.inode_epoch
                .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        }
    }
}

/// Choices a mount makes about how new files are laid out (the kernel's mount options of the
/// same names). They change nothing already on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Options {
    /// New regular files and symlinks keep small contents in the inode (`inline_data`).
    pub inline_data: bool,
    /// New directories keep their first entries in the inode (`inline_dentry`).
    pub inline_dentry: bool,
    /// Where data goes when free sections run short (`mode`).
    pub mode: AllocMode,
    /// Which rewrites go in place in `mode=adaptive` (`ipu`).
    pub ipu: IpuPolicy,
    /// How fsync makes a file durable (`fsync_mode`).
    pub fsync_mode: FsyncMode,
    /// Concurrent checkpoint requests share one checkpoint (`checkpoint_merge`).
    pub checkpoint_merge: bool,
    /// How the cleaner picks its victims (`gc_policy`).
    pub gc_policy: crate::space::Policy,
    /// Node sections weigh one section more as victims unless free sections run short
    /// (`gc_node_penalty`, seed 000's data-first selection).
    pub gc_node_penalty: bool,
    /// 0: victims come from the exact index. N: from a window over the next N candidate
    /// sections, as the kernel searches (`max_victim_search`), for comparing the two.
    pub gc_window: u32,
    /// Sections a change short of space cleans beyond its need before the checkpoint that
    /// frees them (`gc_batch`): more amortise that checkpoint's node writes over more
    /// sections (lower write amplification), fewer keep each wait shorter.
    pub gc_batch: u32,
    /// Whether the daemon cleans ahead of need (`background_gc`).
    pub background_gc: BackgroundGc,
    /// The most memory the clean caches (node and NAT blocks, parsed inodes) take, in bytes
    /// (`cache_size`): half to node blocks, a quarter each to NAT blocks and inodes.
    pub cache_bytes: u64,
    /// A frozen clock, for reproducible images (`uf2fs import --timestamp`): every inode time
    /// a change sets is this second (nanoseconds 0), new inodes get i_generation 0 (as
    /// sload.f2fs writes them), and checkpoints do not advance the volume's age (the
    /// checkpoint's elapsed_time and the SIT's segment mtimes). `None`: the system clock.
    pub fixed_time: Option<u64>,
}

/// The kernel's `mode`: whether data may be written anywhere but at a log's end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum AllocMode {
    /// As Linux's default: when free sections run short, data logs fill the holes of used
    /// data segments (slack space recycling), and a small write that its caller makes
    /// durable at once (an `O_SYNC`/`O_DSYNC` handle) rewrites its blocks in place.
    Adaptive,
    /// Log-structured only: every block goes to a log's end, and the cleaner makes room.
    Lfs,
}

/// Which rewrites of blocks already on the device go in place in `mode=adaptive` (the
/// kernel's `ipu_policy`, which sysfs sets there; ours is the `ipu=` mount option). Never a
/// block whose file has a pointer changed since the last durable checkpoint
/// (`FsyncState::relinked`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum IpuPolicy {
    /// Writes of at most [`crate::ns::write::MIN_FSYNC_BLOCKS`] blocks whose caller makes
    /// them durable at once (an O_SYNC or O_DSYNC handle): the kernel's `F2FS_IPU_FSYNC`,
    /// its default on volumes over 16 GiB. Every other write goes out of place, so a crash
    /// shows each file as it was at some point after its last fsync.
    Fsync,
    /// Every rewrite: the kernel's `F2FS_IPU_FORCE`, its default on volumes of at most
    /// 16 GiB of main area (`SMALL_VOLUME_SEGMENTS`). Nodes are written only for appends and
    /// the like, but rewrites not yet fsync'd land unordered: after a crash a file may show
    /// some of them and not others, as on Linux.
    Force,
    /// None: every block goes out of place (slack space recycling still fills holes).
    Off,
}

/// The kernel's `background_gc`: whether a thread cleans ahead of need.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BackgroundGc {
    /// Cleans when the volume is idle or free space falls below its low-water mark.
    On,
    /// Never: only changes short of space (and `uf2fs gc`) clean.
    Off,
    /// As `on` (the kernel's `sync` cleans synchronously in its thread; ours always does).
    Sync,
}

/// The kernel's `fsync_mode`: what an fsync writes and whether it flushes the device cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FsyncMode {
    /// The file's data and direct nodes, marked for roll-forward, then a cache flush; a
    /// checkpoint only where recovery could not rebuild the file's place in the tree.
    Posix,
    /// As posix, but a file whose directory entry is not yet in a checkpoint gets one.
    Strict,
    /// As posix, without the cache flush.
    Nobarrier,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            inline_data: true,
            inline_dentry: true,
            mode: AllocMode::Adaptive,
            ipu: IpuPolicy::Fsync,
            fsync_mode: FsyncMode::Posix,
            checkpoint_merge: true,
            gc_policy: crate::space::Policy::CostBenefit,
            gc_node_penalty: true,
            gc_window: 0,
            gc_batch: crate::gc::DEFAULT_GC_BATCH,
            background_gc: BackgroundGc::On,
            cache_bytes: crate::cache::DEFAULT_CACHE_BYTES,
            fixed_time: None,
        }
    }
}

impl Options {
    /// What `cache_bytes` gives each cache.
    pub(crate) fn cache_caps(&self) -> crate::cache::CacheCaps {
        crate::cache::CacheCaps::for_bytes(self.cache_bytes)
    }
}

/// A run of `len` file blocks from file block `fblk` stored at `addr..addr+len`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extent {
    pub fblk: u64,
    pub addr: u32,
    pub len: u64,
}

/// A read-only F2FS volume.
pub struct Fs {
    pub(crate) vol: Vol,
}
