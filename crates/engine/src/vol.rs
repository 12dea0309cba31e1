//! The mounted volume: what every part of the engine shares (device, superblock, layout,
//! NAT, node cache, inode cache, the write lock's state, blocks in flight), and `Fs`, the
//! handle whose methods the parts implement. Nothing here knows what a change means.

use crate::error::{Error, Result};
use crate::node::nat::Nat;
use crate::node::Nodes;
use crate::state::WriteState;
use foldhash::HashMap;
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
    /// Dirty node blocks kept before a change asks for a checkpoint (half of
    /// `Options::cache_bytes`; the clean caches share the other half).
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
    pub(crate) quota: Option<crate::ns::quota_book::QuotaBook>,
    /// A change had to clean for itself since the background cleaner last caught up: the
    /// cleaner queues for the write lock instead of yielding.
    pub(crate) gc_urgent: std::sync::atomic::AtomicBool,
    /// Changes ask the background cleaner's thread for checkpoints through it.
    pub(crate) pacer: std::sync::Arc<crate::gc::state::Pacer>,
    /// Changes past half the dirty-node budget ask the background checkpoint thread for the
    /// checkpoint through it (`durability::fsync`, `Fs::background_checkpoint_step`).
    pub(crate) budget_checkpoints: std::sync::Arc<crate::handoff::Handoff>,
    /// Data blocks linked by a change whose write has not landed yet.
    pub(crate) inflight: crate::data::Inflight,
    /// Changed dentry blocks not written yet (`ns/dentry_cache.rs`).
    pub(crate) dentries: crate::ns::dentry_cache::DentryCache,
    /// The valid block and node counts as last published (`Fs::publish_counts`): what
    /// statfs answers while a change holds the write lock, instead of waiting for it.
    pub(crate) counts_seen: CountsSeen,
}

/// Valid block and node counts readable without the write lock.
#[derive(Default)]
pub(crate) struct CountsSeen {
    /// Set once counts were published.
    pub set: std::sync::atomic::AtomicBool,
    pub blocks: std::sync::atomic::AtomicU64,
    pub nodes: std::sync::atomic::AtomicU64,
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

    /// Inode `ino`, parsed: from the inode cache, else read (and cached unless it changed
    /// meanwhile, see `inode_epoch`).
    pub(crate) fn inode(&self, ino: u32) -> Result<Arc<Inode>> {
        if let Some(i) = self.inodes.lock().ok().and_then(|c| c.get(&ino).cloned()) {
            return Ok(i);
        }
        use std::sync::atomic::Ordering;
        let epoch = self.inode_epoch.load(Ordering::Acquire);
        let expect = crate::node::Expect { ino, ofs: 0 };
        let block = self.nodes.read(&*self.dev, &self.nat, ino, expect)?;
        let inode = Arc::new(Inode::parse_shared(block, ino, &self.sb)?);
        if let Ok(mut c) = self.inodes.lock() {
            if self.inode_epoch.load(Ordering::Acquire) == epoch {
                crate::cache::insert_bounded(&mut c, self.inode_cap, ino, inode.clone());
            }
        }
        Ok(inode)
    }

    /// Reads the inodes of `nids` not cached yet together (see [`Nodes::prefetch_inodes`]).
    pub(crate) fn prefetch_inodes(&self, nids: &[u32]) {
        let missing: Vec<u32> = match self.inodes.lock() {
            Ok(c) => nids
                .iter()
                .copied()
                .filter(|n| !c.contains_key(n))
                .collect(),
            Err(_) => return,
        };
        if !missing.is_empty() {
            self.nodes.prefetch_inodes(&*self.dev, &self.nat, &missing);
        }
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
    /// Which data log a user's overwrite goes to (`data_temp`): by the old copy's age, or
    /// always the warm one.
    pub data_temp: crate::space::DataTemp,
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
    /// Whether a change short of space does one bounded step (a section's cleaning) and goes
    /// on, leaving the checkpoint that frees it to the background thread (`gc_pace`, seed
    /// 003), instead of cleaning a batch and writing that checkpoint itself. Only where a
    /// background thread runs (`Fs::background_gc_step`).
    pub gc_pace: bool,
    /// Whether large runs of user data are written to an image file or block device with
    /// O_DIRECT, past the host's page cache (`direct_writes`; see `uf2fs_device::DIRECT_MIN`).
    /// Off by default: a command writing from one thread would wait for the device at every
    /// run (`uf2fs put` of 1 GiB took 4.0-4.6 s against 2.0-3.9 s buffered); the mount, whose
    /// request threads write in parallel, turns it on.
    pub direct_writes: bool,
    /// Whether small runs of user data are held in memory and written a little later by a
    /// thread of the device layer, joined where they follow each other (`write_behind`; see
    /// `uf2fs_device::Behind`), at most a sixteenth of `cache_bytes`. Off by default (a
    /// library user's process may not want the thread); the mount turns it on.
    pub write_behind: bool,
    /// Whether the daemon cleans ahead of need (`background_gc`).
    pub background_gc: BackgroundGc,
    /// The most memory the caches take, in bytes (what the mount's `cache_size` leaves after
    /// the daemon's buffers): half, less a sixteenth, to the dirty nodes before a checkpoint,
    /// a quarter to clean node blocks, an eighth each to NAT blocks and parsed inodes, a
    /// sixteenth to data held for `write_behind`.
    pub cache_bytes: u64,
    /// A frozen clock, for reproducible images (`uf2fs import --timestamp`): every inode time
    /// a change sets is this second (nanoseconds 0), new inodes get i_generation 0 (as
    /// sload.f2fs writes them), and checkpoints do not advance the volume's age (the
    /// checkpoint's elapsed_time and the SIT's segment mtimes). `None`: the system clock.
    pub fixed_time: Option<u64>,
    /// How new files are compressed (`compress_*`; only on an image with the compression
    /// feature).
    pub compress: CompressOptions,
    /// Changed dentry blocks stay in memory until the next checkpoint (`dentry_cache`, on by
    /// default; `ns/dentry_cache.rs`), instead of each change writing its block.
    pub dentry_cache: bool,
}

/// The kernel's `compress_*` mount options: which new files are compressed and how. A new
/// regular file is compressed when its name has one of `extensions` (and none of
/// `no_extensions`, nor one of the superblock's hot extensions), or when its directory is
/// (FS_COMPR_FL, `chattr +c`); a new directory takes its parent's flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct CompressOptions {
    /// `compress_algorithm=` (Linux's default: lz4).
    #[serde(serialize_with = "algorithm_name")]
    pub algorithm: uf2fs_format::compress::Algorithm,
    /// The level after the algorithm's name (`lz4:N`, `zstd:N`; 0: the default), recorded in
    /// each new file.
    pub level: u8,
    /// `compress_log_size=` (2..8: clusters of 4 to 256 blocks; Linux's default 2).
    pub log_cluster_size: u8,
    /// `compress_chksum`: new files' clusters carry a checksum.
    pub checksum: bool,
    /// `compress_mode=user`: writes store clusters plain (only `fs`, the default, compresses
    /// as it writes).
    pub user_mode: bool,
    /// `compress_extension=` (at most 16; `*` is every name).
    pub extensions: Extensions,
    /// `nocompress_extension=`.
    pub no_extensions: Extensions,
}

fn algorithm_name<S: serde::Serializer>(
    a: &uf2fs_format::compress::Algorithm,
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_str(a.name())
}

impl Default for CompressOptions {
    fn default() -> Self {
        CompressOptions {
            algorithm: uf2fs_format::compress::Algorithm::Lz4,
            level: 0,
            log_cluster_size: uf2fs_format::compress::MIN_LOG_CLUSTER_SIZE,
            checksum: false,
            user_mode: false,
            extensions: Extensions::default(),
            no_extensions: Extensions::default(),
        }
    }
}

/// File-name extensions as the kernel keeps them for its mount options: at most 16, each of
/// 1 to 7 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Extensions {
    count: u8,
    names: [[u8; 8]; 16],
}

impl Extensions {
    /// The most extensions a list holds (the kernel's COMPRESS_EXT_NUM).
    pub const MAX: usize = 16;

    /// Adds `ext`; an error names what is wrong with it.
    pub fn push(&mut self, ext: &str) -> std::result::Result<(), String> {
        if ext.is_empty() || ext.len() > 7 || ext.contains(['/', '\0']) {
            return Err(format!("extension {ext:?} must be 1 to 7 bytes, no '/'"));
        }
        if self.iter().any(|e| e == ext.as_bytes()) {
            return Ok(());
        }
        let slot = self
            .names
            .get_mut(usize::from(self.count))
            .ok_or_else(|| format!("at most {} extensions", Self::MAX))?;
        slot.fill(0);
        if let Some(dst) = slot.get_mut(..ext.len()) {
            dst.copy_from_slice(ext.as_bytes());
        }
        self.count += 1;
        Ok(())
    }

    /// The extensions, in the order given.
    pub fn iter(&self) -> impl Iterator<Item = &[u8]> {
        self.names
            .iter()
            .take(usize::from(self.count))
            .map(|n| n.split(|&b| b == 0).next().unwrap_or(&[]))
    }

    /// Whether `name` has one of the extensions, as the kernel matches them: `*` matches
    /// every name; otherwise the name ends in `.EXT` (ASCII case ignored) with at least one
    /// byte before the dot.
    pub fn matches(&self, name: &[u8]) -> bool {
        self.iter().any(|ext| extension_matches(name, ext))
    }
}

/// Shown as the list of extensions (`["txt", "log"]`).
impl serde::Serialize for Extensions {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_seq(self.iter().map(String::from_utf8_lossy))
    }
}

/// See [`Extensions::matches`].
pub(crate) fn extension_matches(name: &[u8], ext: &[u8]) -> bool {
    if ext == b"*" {
        return true;
    }
    if ext.is_empty() || name.len() < ext.len() + 2 {
        return false;
    }
    let (stem, tail) = name.split_at(name.len() - ext.len());
    stem.last() == Some(&b'.') && tail.eq_ignore_ascii_case(ext)
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
            data_temp: crate::space::DataTemp::Age,
            fsync_mode: FsyncMode::Posix,
            checkpoint_merge: true,
            gc_policy: crate::space::Policy::CostBenefit,
            gc_node_penalty: true,
            gc_window: 0,
            gc_batch: crate::gc::state::DEFAULT_GC_BATCH,
            gc_pace: true,
            direct_writes: false,
            write_behind: false,
            background_gc: BackgroundGc::On,
            cache_bytes: crate::cache::DEFAULT_CACHE_BYTES,
            fixed_time: None,
            compress: CompressOptions::default(),
            dentry_cache: true,
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
