//! `Fs`: the engine's API. Inode numbers are F2FS nids. Every method takes `&self`: caches sit
//! behind their own locks and device reads are positional, so readers run concurrently.

use crate::durability::state::{CheckpointState, FsyncState};
use crate::error::{Error, Result};
use crate::mount::{mount, read_block, MountInfo, VolumeInfo};
use crate::node::nat::Nat;
use crate::node::Nodes;
use crate::space::sit::{read_sit, usage, SegmentUsage};
use crate::space::Space;
use crate::state::{Counts, Orphans, WriteState};
use crate::vol::{Extent, Fs, Options, Vol};
use foldhash::{HashMap, HashMapExt, HashSet, HashSetExt};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use uf2fs_device::{BlockDevice, IoCause, IoSnapshot};
use uf2fs_format::checkpoint::{flags, Checkpoint, CURSEG_NAMES};
use uf2fs_format::inode::{FileType, Inode, Time};
use uf2fs_format::nat::NAT_ENTRIES_PER_BLOCK;
use uf2fs_format::sit::SitEntry;
use uf2fs_format::superblock::{feature, Superblock};
use uf2fs_format::xattr::Xattr;
use uf2fs_format::{CorruptKind, BLOCK_SIZE};

/// Symbolic links followed while resolving one path, as Linux allows.
const MAX_SYMLINK_FOLLOWS: u32 = 40;

/// Attributes of an inode as `stat` shows them.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Attr {
    pub ino: u32,
    #[serde(serialize_with = "ser_type")]
    pub file_type: FileType,
    /// Permission bits (and setuid/setgid/sticky), without the type.
    pub perm: u16,
    pub nlink: u32,
    pub uid: u32,
    pub gid: u32,
    pub size: u64,
    /// 512-byte sectors, as stat reports them.
    pub blocks_512: u64,
    #[serde(serialize_with = "ser_time")]
    pub atime: Time,
    #[serde(serialize_with = "ser_time")]
    pub mtime: Time,
    #[serde(serialize_with = "ser_time")]
    pub ctime: Time,
    #[serde(serialize_with = "ser_opt_time")]
    pub crtime: Option<Time>,
    pub rdev: (u32, u32),
    pub flags: u32,
    pub generation: u32,
}

fn ser_type<S: serde::Serializer>(t: &FileType, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_str(type_name(*t))
}
fn ser_time<S: serde::Serializer>(t: &Time, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_str(&format!("{}.{:09}", t.sec, t.nsec))
}
fn ser_opt_time<S: serde::Serializer>(
    t: &Option<Time>,
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    match t {
        Some(t) => ser_time(t, s),
        None => s.serialize_none(),
    }
}

/// st_blocks as Linux reports it: node and data blocks but the inode, in 512-byte sectors,
/// plus the bytes kept inline (a regular file's inline data, an inline directory's dentries),
/// so that a non-empty inline file does not look empty to `du`.
fn st_blocks(i: &Inode) -> u64 {
    let mut b = i.blocks.saturating_sub(1).saturating_mul(8);
    if (i.file_type == FileType::Regular && i.has_inline_data()) || i.has_inline_dentry() {
        b = b.saturating_add(i.size.div_ceil(512));
    }
    b
}

/// The name of a file type, as `stat` prints it.
pub fn type_name(t: FileType) -> &'static str {
    match t {
        FileType::Regular => "regular file",
        FileType::Directory => "directory",
        FileType::Symlink => "symbolic link",
        FileType::CharDevice => "character special file",
        FileType::BlockDevice => "block special file",
        FileType::Fifo => "fifo",
        FileType::Socket => "socket",
    }
}

/// One directory entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    pub name: Vec<u8>,
    pub ino: u32,
    /// The type the entry claims (`None`: unknown code; ask the inode).
    pub file_type: Option<FileType>,
}

/// File system statistics, as statfs reports them.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct StatFs {
    pub block_size: u32,
    pub blocks: u64,
    pub blocks_free: u64,
    pub blocks_avail: u64,
    pub files: u64,
    pub files_free: u64,
    pub name_max: u32,
}

/// What a walk hands its visitor.
pub enum WalkItem<'a> {
    Entry {
        path: &'a [u8],
        ino: u32,
        attr: &'a Attr,
    },
    /// An entry (or a directory's listing) that could not be read; the walk goes on.
    Error { path: &'a [u8], error: Error },
}

impl Fs {
    /// Opens the image file or block device at `path`, read-only (an Android sparse image
    /// too). A multi-device volume's other devices are looked for where its superblock
    /// recorded them.
    pub fn open(path: &Path) -> Result<Fs> {
        Fs::open_with(path, &[])
    }

    /// [`Fs::open`] with the other devices of a multi-device volume named, in `devs[]` order
    /// after `path` (those not named are looked for at their recorded paths).
    pub fn open_with(path: &Path, devices: &[PathBuf]) -> Result<Fs> {
        Fs::with_device(crate::devices::open_volume(path, devices, false)?)
    }

    /// Mounts the volume on `dev`, read-only.
    pub fn with_device(dev: Box<dyn BlockDevice>) -> Result<Fs> {
        Fs::mount_on(dev, false)
    }

    /// Opens the image at `path` read-only as its last checkpoint has it, without replaying
    /// what was fsync'd after it (what a checker judges: the chain is not yet part of the
    /// checkpoint's structures; see [`Fs::roll_forward_blocks`]).
    pub fn open_at_checkpoint(path: &Path) -> Result<Fs> {
        Fs::open_at_checkpoint_with(path, &[])
    }

    /// [`Fs::open_at_checkpoint`] with the other devices named (see [`Fs::open_with`]).
    pub fn open_at_checkpoint_with(path: &Path, devices: &[PathBuf]) -> Result<Fs> {
        let dev = crate::devices::open_volume(path, devices, false)?;
        Fs::mount_with(dev, false, false)
    }

    /// Node blocks written by fsync after the mounted checkpoint (the roll-forward chain).
    pub fn roll_forward_blocks(&self) -> Result<usize> {
        Ok(
            crate::durability::recovery::read_chain(
                &*self.vol.dev,
                &self.vol.layout,
                &self.vol.cp,
            )?
            .len(),
        )
    }

    /// Opens the image file or block device at `path` for reading and writing.
    /// A sparse image is refused with [`Error::ReadOnly`] (a mount then falls back to
    /// read-only).
    pub fn open_rw(path: &Path) -> Result<Fs> {
        Fs::open_rw_with(path, &[])
    }

    /// [`Fs::open_rw`] with the other devices named (see [`Fs::open_with`]).
    pub fn open_rw_with(path: &Path, devices: &[PathBuf]) -> Result<Fs> {
        Fs::mount_on(crate::devices::open_volume(path, devices, true)?, true)
    }

    /// Opens an image for building, as sload.f2fs does: like [`Fs::open_rw_with`], and an
    /// image with the `ro` feature is taken too, written in its own layout (the hot data
    /// and hot node logs only, no SSA) and never cleaned, since the layout keeps nothing to
    /// clean with. For the command-line tools; a mount of such an image stays read-only, as
    /// Linux's does.
    pub fn open_build_with(path: &Path, devices: &[PathBuf]) -> Result<Fs> {
        Fs::mount_full(
            crate::devices::open_volume(path, devices, true)?,
            true,
            true,
            true,
        )
    }

    /// Mounts the volume on `dev` for reading and writing.
    pub fn with_device_rw(dev: Box<dyn BlockDevice>) -> Result<Fs> {
        Fs::mount_on(dev, true)
    }

    fn mount_on(dev: Box<dyn BlockDevice>, writable: bool) -> Result<Fs> {
        Fs::mount_with(dev, writable, true)
    }

    /// Mounts; `recover` replays the roll-forward chain (a writable mount always does; a
    /// read-only one does it in memory, or, when that fails, shows the last checkpoint).
    fn mount_with(dev: Box<dyn BlockDevice>, writable: bool, recover: bool) -> Result<Fs> {
        Fs::mount_full(dev, writable, recover, false)
    }

    /// [`Fs::mount_with`]; `build` takes images in the read-only layout for writing.
    fn mount_full(
        dev: Box<dyn BlockDevice>,
        writable: bool,
        recover: bool,
        build: bool,
    ) -> Result<Fs> {
        if writable && dev.is_read_only() {
            return Err(Error::ReadOnly("the device is opened read-only".into()));
        }
        // Off until the options turn it on (`write_behind`).
        let dev: Box<dyn BlockDevice> = if writable {
            Box::new(uf2fs_device::Behind::new(dev))
        } else {
            dev
        };
        let m = mount(&*dev)?;
        let layout = m.sb.layout();
        let mut notes = Vec::new();
        // The read-only layout has no roll-forward chain: nothing fsyncs there, and its warm
        // node log is a name for segment 0.
        let read_only_layout = m.sb.has(uf2fs_format::superblock::feature::RO);
        let chain = match crate::durability::recovery::read_chain(&*dev, &layout, &m.cp) {
            _ if read_only_layout => Vec::new(),
            Ok(c) if recover => c,
            Ok(_) => Vec::new(),
            Err(e) if writable => return Err(e),
            Err(e) => {
                notes.push(format!("roll-forward chain not followed: {e}"));
                Vec::new()
            }
        };
        let mut dev = dev;
        let write = if writable {
            Some(Mutex::new(Fs::write_state(&*dev, &m, build)?))
        } else if !chain.is_empty() {
            match Fs::write_state(&*dev, &m, false) {
                Ok(ws) => {
                    // Replayed in memory: the few blocks recovery writes stay in an overlay.
                    dev = Box::new(uf2fs_device::OverlayDevice::new(dev));
                    Some(Mutex::new(ws))
                }
                Err(e) => {
                    notes.push(format!(
                        "{} node blocks fsync'd after the last checkpoint are not shown: {e}",
                        chain.len()
                    ));
                    None
                }
            }
        } else {
            None
        };
        let orphans = if writable {
            m.orphans.clone()
        } else {
            Vec::new()
        };
        let nat = Nat::new(layout, m.cp.nat_bitmap.clone(), m.nat_journal);
        let replay = write.is_some() && !chain.is_empty();
        let vol = Vol {
            dev,
            layout,
            nat,
            nodes: Nodes::new(),
            inodes: Mutex::new(HashMap::new()),
            inode_cap: crate::cache::CacheCaps::default_caps().inodes,
            dirty_budget: crate::cache::CacheCaps::default_caps().dirty,
            inode_epoch: std::sync::atomic::AtomicU64::new(0),
            sit_journal: m.sit_journal,
            orphans: m.orphans,
            notes: m.notes,
            sb: m.sb,
            cp: m.cp,
            write,
            options: Options::default(),
            change_seq: std::sync::atomic::AtomicU64::new(0),
            last_change: Mutex::new(HashMap::new()),
            recovery: None,
            quota: None,
            inflight: Default::default(),
            dentries: crate::ns::dentry_cache::DentryCache::new(
                crate::cache::CacheCaps::default_caps().dentries,
            ),
            gc_urgent: Default::default(),
            pacer: Default::default(),
            budget_checkpoints: Default::default(),
            counts_seen: Default::default(),
            cur_summaries: m
                .summaries
                .iter()
                .enumerate()
                .map(|(i, s)| (i < 3 || m.has_node_summaries).then(|| s.entries.clone()))
                .collect(),
        };
        let mut fs = Fs { vol };
        fs.vol.notes.append(&mut notes);
        if writable {
            // Before orphans are freed and the chain replayed: both change what is charged.
            fs.vol.quota = fs.load_quota()?;
        }
        if !orphans.is_empty() {
            // Files unlinked while open when the last checkpoint was written: free them now,
            // as Linux does at mount (before the chain is replayed, as Linux does too).
            fs.remove_orphans(&orphans)?;
        }
        if replay {
            let mut notes = Vec::new();
            let r = match fs.ws() {
                Ok(mut ws) => fs.recover(&mut ws, &chain, &mut notes),
                Err(e) => Err(e),
            };
            match r {
                Ok(stats) => {
                    notes.push(format!(
                        "roll-forward recovery: {} chain blocks, {} files, {} entries, {} block pointers",
                        stats.chain_blocks, stats.inodes, stats.dentries, stats.addresses
                    ));
                    fs.vol.recovery = Some(stats);
                }
                Err(e) if writable => return Err(e),
                Err(e) => {
                    // Half a replay in memory is worse than none: show the checkpoint.
                    let dev = std::mem::replace(
                        &mut fs.vol.dev,
                        Box::new(uf2fs_device::MemDevice::new(Vec::new(), true)),
                    );
                    let mut fs = Fs::mount_with(dev, false, false)?;
                    fs.vol.notes.push(format!(
                        "roll-forward recovery failed ({e}); showing the last checkpoint"
                    ));
                    return Ok(fs);
                }
            }
            fs.vol.notes.append(&mut notes);
        }
        if writable && (replay || !orphans.is_empty()) {
            let mut ws = fs.ws()?;
            ws.cp.requests += 1;
            fs.checkpoint_now(&mut ws, false)?;
        }
        fs.apply_alloc_mode();
        if !writable {
            fs.vol.write = None;
        }
        Ok(fs)
    }

    /// What writing needs beyond reading: the whole SIT, the logs and their summaries.
    /// `build`: an image in the read-only layout is taken (see [`Fs::open_build_with`]).
    fn write_state(
        dev: &dyn BlockDevice,
        m: &crate::mount::Mounted,
        build: bool,
    ) -> Result<WriteState> {
        use uf2fs_format::superblock::feature;
        let layout = m.sb.layout();
        let read_only_layout = m.sb.has(feature::RO);
        let features = m.sb.features() & !feature::KNOWN_WRITABLE & !feature::RO;
        if read_only_layout && !build {
            return Err(Error::ReadOnly(
                "the image has the ro feature (made for reading only: no SSA, no spare \
                 segments; Linux mounts it read-only too; uf2fs put, import and the other \
                 image tools can still change it)"
                    .into(),
            ));
        }
        if features != 0 {
            return Err(Error::ReadOnly(format!(
                "writing images with {} is not supported yet",
                uf2fs_format::superblock::feature::names(features).join(", ")
            )));
        }
        let cpf = m.cp.flags();
        if cpf
            & (flags::ERROR
                | flags::FSCK
                | flags::RESIZEFS
                | flags::DISABLED
                | flags::QUOTA_NEED_FSCK)
            != 0
        {
            return Err(Error::ReadOnly(format!(
                "the checkpoint asks for fsck first ({})",
                flags::names(cpf).join(",")
            )));
        }
        let sit = read_sit(dev, &layout, &m.cp.sit_bitmap, &m.sit_journal)?;
        let journal: Vec<u32> = m.sit_journal.iter().map(|(s, _)| *s).collect();
        let mut sums: [Vec<uf2fs_format::summary::RawSummary>; 6] = Default::default();
        for (i, s) in m.summaries.iter().enumerate() {
            if let Some(dst) = sums.get_mut(i) {
                *dst = s.entries.clone();
            }
        }
        if !m.has_node_summaries {
            // Rebuild the node logs' summaries from the footers of the blocks written so far:
            // those before `blkoff`, or in a log filling holes (SSR) every valid block of its
            // segment, since the log's summary becomes the segment's when the log leaves it.
            for (i, c) in m.cp.cursegs.iter().enumerate().skip(3) {
                let base = u64::from(layout.main)
                    + u64::from(c.segno) * u64::from(uf2fs_format::BLOCKS_PER_SEG);
                let entry = sit.get(c.segno as usize);
                let written = |off: usize| {
                    if c.alloc_type == 0 {
                        off < usize::from(c.blkoff)
                    } else {
                        entry.is_some_and(|e| e.is_valid(off))
                    }
                };
                for off in (0..uf2fs_format::BLOCKS_PER_SEG as usize).filter(|&o| written(o)) {
                    let b = read_block(dev, base + off as u64, IoCause::Node, "node block")?;
                    let nid = uf2fs_format::node::Footer::of(&b).nid;
                    if let Some(e) = sums.get_mut(i).and_then(|v| v.get_mut(off)) {
                        e.nid.set(nid);
                    }
                }
            }
        }
        let h = &m.cp.head;
        let mut segs = Space::new(layout, sit, &journal, &m.cp, sums)?;
        if read_only_layout {
            segs.use_read_only_layout();
        }
        Ok(WriteState {
            segs,
            cp: CheckpointState {
                version: m.cp.version(),
                pack: m.cp.pack,
                head: h.clone(),
                crc: m.cp.crc,
                mounted_at: std::time::Instant::now(),
                last_landed: std::time::Instant::now(),
                written: 0,
                requests: 0,
                covered_seq: 0,
                pending: None,
                last_nodes: 0,
                longest_io_us: 0,
                wanted: false,
                budget_by_a_change: 0,
                budget_in_background: 0,
            },
            sync: FsyncState::default(),
            compress: Default::default(),
            orphans: Orphans::default(),
            counts: Counts {
                valid_blocks: h.valid_block_count.get(),
                valid_nodes: h.valid_node_count.get(),
                valid_inodes: h.valid_inode_count.get(),
            },
            gc: Default::default(),
            failed: None,
            deferred: Vec::new(),
            given_times: Default::default(),
        })
    }

    /// Writes a checkpoint: everything changed so far becomes durable.
    pub fn sync(&self) -> Result<()> {
        self.request_checkpoint(None)
    }

    /// Writes the checkpoint of a clean unmount (UMOUNT, with node summaries): for a caller
    /// that shares the volume and ends its use (the FUSE daemon after the kernel let go).
    /// Later changes are still possible; the next checkpoint is a normal one again.
    pub fn final_checkpoint(&self) -> Result<()> {
        let mut ws = self.ws()?;
        ws.cp.requests += 1;
        self.checkpoint_now(&mut ws, true)
    }

    /// Writes the final checkpoint and closes the volume; returns the device's I/O counters.
    pub fn unmount(self) -> Result<IoSnapshot> {
        if self.vol.write.is_some() {
            self.final_checkpoint()?;
        }
        Ok(self.vol.dev.counters().snapshot())
    }

    /// Sets how new files are laid out from now on.
    pub fn set_options(&mut self, options: Options) {
        self.vol.options = options;
        let caps = options.cache_caps();
        self.vol.nodes.set_cache_cap(caps.nodes);
        self.vol.nat.set_cache_cap(caps.nat);
        self.vol.inode_cap = caps.inodes;
        self.vol.dirty_budget = caps.dirty;
        self.vol.dentries.set_cap(caps.dentries);
        self.vol.dev.set_direct_writes(options.direct_writes);
        self.vol.dev.set_write_behind(if options.write_behind {
            caps.write_behind
        } else {
            0
        });
        self.apply_alloc_mode();
    }

    /// Lets data logs fill holes or not, as `mode` says (from mount on: the blocks no one may
    /// overwrite are tracked in either mode).
    fn apply_alloc_mode(&mut self) {
        let adaptive = self.vol.options.mode == crate::vol::AllocMode::Adaptive;
        if let Some(Ok(ws)) = self.vol.write.as_mut().map(|w| w.get_mut()) {
            let below = crate::gc::slack_threshold(
                u64::from(ws.segs.blocks_per_section()),
                ws.segs.section_count(),
                self.vol.options.data_temp,
            );
            ws.segs.set_slack(adaptive, below);
        }
    }

    pub fn options(&self) -> Options {
        self.vol.options
    }

    /// Whether changes are allowed (a writable mount that has not failed).
    pub fn is_writable(&self) -> bool {
        self.vol.write.is_some()
    }

    /// Checkpoints written since mount.
    pub fn checkpoints_written(&self) -> u64 {
        self.ws().map(|w| w.cp.written).unwrap_or(0)
    }

    pub(crate) fn vol(&self) -> &Vol {
        &self.vol
    }

    pub fn root_ino(&self) -> u32 {
        self.vol.sb.raw().root_ino.get()
    }

    pub fn superblock(&self) -> &Superblock {
        &self.vol.sb
    }

    pub fn checkpoint(&self) -> &Checkpoint {
        &self.vol.cp
    }

    /// Notes from mount: a superblock copy or checkpoint pack that was not used, and why.
    pub fn mount_notes(&self) -> &[String] {
        &self.vol.notes
    }

    pub fn device_counters(&self) -> IoSnapshot {
        self.vol.dev.counters().snapshot()
    }

    /// The checked inode `ino`.
    pub fn inode(&self, ino: u32) -> Result<Arc<Inode>> {
        self.vol.inode(ino)
    }

    pub fn getattr(&self, ino: u32) -> Result<Attr> {
        let i = self.inode(ino)?;
        let special = matches!(i.file_type, FileType::CharDevice | FileType::BlockDevice);
        // An encrypted symlink's size is the length of the target it shows, as in Linux.
        let size = if i.file_type == FileType::Symlink && i.is_encrypted() {
            self.nokey_symlink(&i)?.len() as u64
        } else {
            i.size
        };
        Ok(Attr {
            ino,
            file_type: i.file_type,
            perm: i.mode & 0o7777,
            nlink: i.links,
            uid: i.uid,
            gid: i.gid,
            size,
            blocks_512: st_blocks(&i),
            atime: i.atime,
            mtime: i.mtime,
            ctime: i.ctime,
            crtime: i.crtime,
            rdev: if special { i.rdev() } else { (0, 0) },
            flags: i.flags,
            generation: i.generation,
        })
    }

    /// A read for a caller racing changes (the FUSE daemon; not for use under the write
    /// lock). Reads take no lock, so what `read` follows may be freed under it by a change
    /// (an inode unlinked, an xattr node removed): that fails as corrupt (a free NAT entry, a
    /// node of another owner). Such a failure is read again with changes held off; if `ino`
    /// is given and is no inode any more, it is `NotFound`; what still fails is damage.
    fn reread<T>(&self, ino: Option<u32>, read: impl Fn() -> Result<T>) -> Result<T> {
        match read() {
            Err(Error::Corrupt(_)) if self.vol.write.is_some() => {
                let _changes_wait = self.vol.write.as_ref().and_then(|w| w.lock().ok());
                if let Some(ino) = ino {
                    if !self.is_inode(ino)? {
                        return Err(Error::NotFound);
                    }
                }
                read()
            }
            r => r,
        }
    }

    /// `getattr` for a caller racing changes (see [`Fs::reread`]): an inode freed by an
    /// unlink just before its read is `NotFound`.
    pub fn getattr_shared(&self, ino: u32) -> Result<Attr> {
        self.reread(Some(ino), || self.getattr(ino))
    }

    /// Readies the inodes `nids` for the `getattr`s that follow, reading those not cached
    /// together (neighbours on the device in one read): a READDIRPLUS reply's entries. Best
    /// effort: what cannot be read now is left for those `getattr`s to report.
    pub fn prefetch_inodes(&self, nids: &[u32]) {
        self.vol.prefetch_inodes(nids);
    }

    /// [`Fs::inode`] for a caller racing changes, as [`Fs::getattr_shared`].
    pub(crate) fn inode_shared(&self, ino: u32) -> Result<Arc<Inode>> {
        self.reread(Some(ino), || self.inode(ino))
    }

    /// `lookup` and `getattr` of what it finds, for a caller racing changes (see
    /// [`Fs::reread`]): a name unlinked meanwhile is `NotFound`, and an entry naming a free
    /// inode is still corruption.
    pub fn lookup_attr_shared(&self, parent: u32, name: &[u8]) -> Result<(u32, Attr)> {
        self.reread(None, || {
            let ino = self.lookup(parent, name)?;
            Ok((ino, self.getattr(ino)?))
        })
    }

    /// The inode number of `name` in directory `parent`.
    pub fn lookup(&self, parent: u32, name: &[u8]) -> Result<u32> {
        let dir = self.inode(parent)?;
        self.vol.lookup(&dir, name)
    }

    /// The entries of directory `ino`, without '.' and '..', in on-disk order; those of an
    /// encrypted directory by their no-key names, as Linux lists them without the key.
    pub fn readdir(&self, ino: u32) -> Result<Vec<DirEntry>> {
        let dir = self.inode(ino)?;
        let encrypted = dir.is_encrypted();
        let mut out = Vec::new();
        self.vol.for_each_dentry(&dir, &mut |e| {
            if e.name != b"." && e.name != b".." {
                out.push(DirEntry {
                    name: if encrypted {
                        self.nokey_entry_name(ino, e.ino, e.name, e.hash)?
                    } else {
                        e.name.to_vec()
                    },
                    ino: e.ino,
                    file_type: e.file_type,
                });
            }
            Ok(ControlFlow::Continue(()))
        })?;
        Ok(out)
    }

    /// The entries of directory `ino` at position `from` and after, "." and ".." left out,
    /// in order, each given to `f` with its position; `f` ends the walk with `Break`. An
    /// entry's position is its dentry block times 214 plus its slot (an inline directory's are
    /// its slots), which it keeps while it exists: Linux's F2FS gives readdir the same
    /// positions, so a reader that resumes or seeks back to one sees every entry that stayed,
    /// once, without the directory being read whole.
    pub fn readdir_from(
        &self,
        ino: u32,
        from: u64,
        f: &mut dyn FnMut(u64, DirEntry) -> ControlFlow<()>,
    ) -> Result<()> {
        const PER_BLOCK: u64 = uf2fs_format::dentry::NR_DENTRY_IN_BLOCK as u64;
        let dir = self.inode(ino)?;
        let encrypted = dir.is_encrypted();
        self.vol
            .for_each_dentry_from(&dir, from / PER_BLOCK, &mut |block, e| {
                let pos = block.saturating_mul(PER_BLOCK) + e.slot as u64;
                if pos < from || e.name == b"." || e.name == b".." {
                    return Ok(ControlFlow::Continue(()));
                }
                let name = if encrypted {
                    self.nokey_entry_name(ino, e.ino, e.name, e.hash)?
                } else {
                    e.name.to_vec()
                };
                let entry = DirEntry {
                    name,
                    ino: e.ino,
                    file_type: e.file_type,
                };
                Ok(f(pos, entry))
            })
    }

    fn data_inode(&self, ino: u32) -> Result<Arc<Inode>> {
        let i = self.inode(ino)?;
        if i.file_type == FileType::Directory {
            return Err(Error::IsADirectory);
        }
        if i.is_encrypted() {
            return Err(self.vol.no_key(&i));
        }
        Ok(i)
    }

    /// Reads up to `buf.len()` bytes at `offset`; returns the count (0 at or past the end).
    /// An encrypted file's contents need its key: [`Error::NoKey`].
    pub fn read(&self, ino: u32, offset: u64, buf: &mut [u8]) -> Result<usize> {
        let i = self.data_inode(ino)?;
        self.read_inode(&i, offset, buf)
    }

    /// `read` of the bytes as stored (ciphertext, for an encrypted inode).
    pub(crate) fn read_inode(&self, i: &Arc<Inode>, offset: u64, buf: &mut [u8]) -> Result<usize> {
        let ino = i.ino;
        if offset >= i.size {
            return Ok(0);
        }
        let n = (buf.len() as u64).min(i.size - offset) as usize;
        let out = buf.get_mut(..n).unwrap_or(&mut []);
        if i.has_inline_data() {
            let src = i.inline_area().get(offset as usize..offset as usize + n);
            out.copy_from_slice(src.ok_or(CorruptKind::InodeField {
                ino,
                field: "i_size (inline)",
                value: i.size,
            })?);
            return Ok(n);
        }
        if let Some(c) = &i.compression {
            self.vol.read_compressed(i, c, offset, out)?;
            return Ok(n);
        }
        let bs = BLOCK_SIZE as u64;
        let end = offset + n as u64;
        let (first, last) = (offset / bs, end.div_ceil(bs));
        // Whole blocks of a run go straight into `out` when the request starts on a block
        // boundary (the kernel's page-cache reads always do); the rest through `tmp`. Holes
        // (the gaps between runs) are zeroed as they are passed.
        let aligned = offset.is_multiple_of(bs);
        let mut tmp = Vec::new();
        let mut zeroed_to = offset;
        let what = || format!("data of inode {ino}");
        self.vol.extents(i, first, last, &mut |e| {
            let run_start = e.fblk * bs;
            let run_end = run_start + e.len * bs;
            let (lo, hi) = (run_start.max(offset), run_end.min(end));
            if lo >= hi {
                return Ok(());
            }
            if let Some(gap) = out.get_mut((zeroed_to - offset) as usize..(lo - offset) as usize) {
                gap.fill(0);
            }
            zeroed_to = hi;
            let mut lo = lo;
            if aligned {
                // [lo, whole) is whole blocks: read in place.
                let whole = lo + (hi - lo) / bs * bs;
                if lo < whole {
                    let addr = u64::from(e.addr) + (lo - run_start) / bs;
                    if let Some(dst) =
                        out.get_mut((lo - offset) as usize..(whole - offset) as usize)
                    {
                        self.vol.read_data(addr, dst, &what())?;
                    }
                    lo = whole;
                }
                if lo >= hi {
                    return Ok(());
                }
            }
            // A part of a block at either end: through a buffer of the blocks it touches.
            let (b0, b1) = ((lo - run_start) / bs, (hi - run_start).div_ceil(bs));
            tmp.resize(((b1 - b0) * bs) as usize, 0);
            self.vol
                .read_data(u64::from(e.addr) + b0, &mut tmp, &what())?;
            let base = run_start + b0 * bs;
            let src = tmp.get((lo - base) as usize..(hi - base) as usize);
            let dst = out.get_mut((lo - offset) as usize..(hi - offset) as usize);
            if let (Some(s), Some(d)) = (src, dst) {
                d.copy_from_slice(s);
            }
            Ok(())
        })?;
        if let Some(gap) = out.get_mut((zeroed_to - offset) as usize..) {
            gap.fill(0);
        }
        Ok(n)
    }

    /// The written runs of a regular file or symlink, in file order (holes are gaps between
    /// runs). Inline files have none, and compressed files' blocks are not their bytes: read
    /// both with [`Fs::read`] (see [`Fs::is_compressed`]).
    pub fn extents(&self, ino: u32, f: &mut dyn FnMut(Extent) -> Result<()>) -> Result<()> {
        let i = self.data_inode(ino)?;
        if i.has_inline_data() {
            return Ok(());
        }
        if i.compression.is_some() {
            return Err(Error::InvalidArgument(
                "a compressed file has no extents: read it with Fs::read",
            ));
        }
        let blocks = i.size.div_ceil(BLOCK_SIZE as u64);
        self.vol.extents(&i, 0, blocks, f)
    }

    /// `lseek` with SEEK_DATA (`hole == false`) or SEEK_HOLE: the first byte at or after
    /// `offset` that is data (or a hole). Blocks fallocated but never written (NEW_ADDR) are
    /// holes, as Linux reports them; the end of the file counts as a hole.
    pub fn seek(&self, ino: u32, offset: u64, hole: bool) -> Result<u64> {
        let i = self.data_inode(ino)?;
        if offset >= i.size {
            return Err(Error::PastEnd);
        }
        if i.has_inline_data() {
            return Ok(if hole { i.size } else { offset });
        }
        if i.compression.is_some() {
            return self
                .vol
                .seek_compressed(&i, offset, hole)?
                .ok_or(Error::PastEnd);
        }
        let bs = BLOCK_SIZE as u64;
        let blocks = i.size.div_ceil(bs);
        // Runs come in file order; stop at the first that answers.
        let mut pos = offset;
        let mut found = None;
        let mut visit = |e: Extent| -> Result<()> {
            let (start, end) = (e.fblk * bs, (e.fblk + e.len) * bs);
            if found.is_some() || end <= pos {
                return Ok(());
            }
            if hole {
                if start > pos {
                    found = Some(pos);
                } else {
                    pos = end;
                }
            } else {
                found = Some(start.max(pos));
            }
            Ok(())
        };
        self.vol.extents(&i, offset / bs, blocks, &mut visit)?;
        match (found, hole) {
            (Some(p), _) => Ok(p.min(i.size)),
            (None, true) => Ok(pos.min(i.size)),
            (None, false) => Err(Error::PastEnd),
        }
    }

    /// Every address slot of `ino` in file order that is not NULL_ADDR, as stored: block
    /// addresses, NEW_ADDR and COMPRESS_ADDR alike (for tools and tests that look at layout).
    pub fn data_slots(&self, ino: u32, f: &mut dyn FnMut(u64, u32) -> Result<()>) -> Result<()> {
        let i = self.inode(ino)?;
        if i.has_inline_data() || i.has_inline_dentry() {
            return Ok(());
        }
        let blocks = i.size.div_ceil(BLOCK_SIZE as u64);
        self.vol.for_each_slot(&i, 0, blocks, f)
    }

    /// The compression of regular file `ino` (None: not compressed).
    pub fn compression(&self, ino: u32) -> Result<Option<uf2fs_format::compress::Compression>> {
        Ok(self.inode(ino)?.compression)
    }

    /// Whether the data of `ino` is stored inline in its inode.
    pub fn is_inline(&self, ino: u32) -> Result<bool> {
        Ok(self.inode(ino)?.has_inline_data())
    }

    /// Reads `buf.len() / 4096` blocks of file data at block address `addr`.
    pub fn read_blocks(&self, addr: u64, buf: &mut [u8]) -> Result<()> {
        let end = addr + (buf.len() / BLOCK_SIZE) as u64;
        if addr < u64::from(self.vol.layout.main) || end > self.vol.layout.main_end() {
            return Err(Error::InvalidArgument("block range outside the main area"));
        }
        self.vol.read_data(addr, buf, "data")
    }

    /// The target of symlink `ino`; of an encrypted one, the no-key form Linux shows.
    pub fn readlink(&self, ino: u32) -> Result<Vec<u8>> {
        let i = self.inode(ino)?;
        if i.file_type != FileType::Symlink {
            return Err(Error::NotASymlink);
        }
        if i.is_encrypted() {
            return self.nokey_symlink(&i);
        }
        if i.size > BLOCK_SIZE as u64 {
            return Err(CorruptKind::InodeField {
                ino,
                field: "i_size (symlink)",
                value: i.size,
            }
            .into());
        }
        let mut buf = vec![0u8; i.size as usize];
        let n = self.read(ino, 0, &mut buf)?;
        buf.truncate(n);
        Ok(buf)
    }

    /// Every user-visible xattr (full name, value as getxattr returns it), in stored order.
    pub fn xattrs(&self, ino: u32) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        // A change (removexattr, a smaller setxattr) may free the xattr node the inode we
        // read names before we read the node: read both again with changes held off.
        let raw: Vec<Xattr> = self.reread(None, || self.vol.xattrs(&*self.inode(ino)?))?;
        let mut out = Vec::new();
        for x in raw {
            if let Some(name) = x.full_name() {
                out.push((name, x.user_value(ino)?));
            }
        }
        Ok(out)
    }

    pub fn listxattr(&self, ino: u32) -> Result<Vec<Vec<u8>>> {
        Ok(self.xattrs(ino)?.into_iter().map(|(n, _)| n).collect())
    }

    pub fn getxattr(&self, ino: u32, name: &[u8]) -> Result<Vec<u8>> {
        self.xattrs(ino)?
            .into_iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v)
            .ok_or(Error::NoAttribute)
    }

    /// Publishes the valid counts for `statfs` to read without the write lock.
    pub(crate) fn publish_counts(&self, ws: &WriteState) {
        use std::sync::atomic::Ordering::Relaxed;
        let seen = &self.vol.counts_seen;
        seen.blocks.store(ws.counts.valid_blocks, Relaxed);
        seen.nodes.store(u64::from(ws.counts.valid_nodes), Relaxed);
        seen.set.store(true, std::sync::atomic::Ordering::Release);
    }

    /// File system statistics: the live counts of a writable mount, else the checkpoint's.
    /// While a change holds the write lock, the counts as of the last change that let it go:
    /// the daemon asks before and after every write from the kernel's page cache, and
    /// waiting for the lock there cost random 4 KiB writes 2-10% (docs/design.md).
    pub fn statfs(&self) -> StatFs {
        use std::sync::atomic::Ordering::{Acquire, Relaxed};
        let h = &self.vol.cp.head;
        let live = self.vol.write.as_ref().and_then(|w| match w.try_lock() {
            Ok(ws) => {
                self.publish_counts(&ws);
                Some((ws.counts.valid_blocks, u64::from(ws.counts.valid_nodes)))
            }
            Err(std::sync::TryLockError::WouldBlock) if self.vol.counts_seen.set.load(Acquire) => {
                let seen = &self.vol.counts_seen;
                Some((seen.blocks.load(Relaxed), seen.nodes.load(Relaxed)))
            }
            Err(std::sync::TryLockError::WouldBlock) => w
                .lock()
                .ok()
                .map(|ws| (ws.counts.valid_blocks, u64::from(ws.counts.valid_nodes))),
            Err(std::sync::TryLockError::Poisoned(_)) => None,
        });
        let (valid, nodes) = match live {
            Some(c) => c,
            None => (
                h.valid_block_count.get(),
                u64::from(h.valid_node_count.get()),
            ),
        };
        let user = h.user_block_count.get();
        let free = user.saturating_sub(valid);
        let max_nid = u64::from(self.vol.layout.max_nid());
        StatFs {
            block_size: BLOCK_SIZE as u32,
            blocks: user,
            blocks_free: free,
            blocks_avail: free,
            files: max_nid.saturating_sub(3),
            files_free: max_nid.saturating_sub(3).saturating_sub(nodes).min(free),
            name_max: 255,
        }
    }

    /// Resolves an absolute path inside the volume ("/" is the root). Symbolic links in the
    /// middle are followed; the last component is followed only if `follow` is set.
    pub fn resolve(&self, path: &[u8], follow: bool) -> Result<u32> {
        let mut follows = 0;
        self.resolve_from(&[self.root_ino()], path, follow, &mut follows)
    }

    fn resolve_from(
        &self,
        start: &[u32],
        path: &[u8],
        follow: bool,
        follows: &mut u32,
    ) -> Result<u32> {
        let root = self.root_ino();
        let mut stack: Vec<u32> = if path.first() == Some(&b'/') {
            vec![root]
        } else {
            start.to_vec()
        };
        let parts: Vec<&[u8]> = path
            .split(|&b| b == b'/')
            .filter(|p| !p.is_empty() && *p != b".")
            .collect();
        for (k, part) in parts.iter().enumerate() {
            let cur = *stack.last().unwrap_or(&root);
            if *part == b".." {
                if stack.len() > 1 {
                    stack.pop();
                }
                continue;
            }
            let ino = self.lookup(cur, part)?;
            let last = k + 1 == parts.len();
            let inode = self.inode(ino)?;
            if inode.file_type == FileType::Symlink && (!last || follow) {
                *follows += 1;
                if *follows > MAX_SYMLINK_FOLLOWS {
                    return Err(Error::SymlinkLoop);
                }
                let target = self.readlink(ino)?;
                let ino = self.resolve_from(&stack, &target, true, follows)?;
                stack.push(ino);
            } else {
                stack.push(ino);
            }
        }
        Ok(*stack.last().unwrap_or(&root))
    }

    /// Walks the tree below `ino` depth-first, parents before children, directories in
    /// on-disk order. A directory reached a second time is reported as a cycle and not
    /// entered again. The visitor returns whether to enter a directory. The walk keeps its own
    /// stack, so a hostile image's deep nesting costs memory, not the thread's stack.
    pub fn walk(
        &self,
        ino: u32,
        visit: &mut dyn FnMut(WalkItem<'_>) -> Result<bool>,
    ) -> Result<()> {
        let mut seen = HashSet::new();
        let mut path = Vec::new();
        // Each open directory: the length of its path, and the entries still to visit.
        let mut stack: Vec<(usize, std::vec::IntoIter<DirEntry>)> = Vec::new();
        let attr = self.getattr(ino)?;
        self.visit_one(ino, &attr, &mut path, &mut seen, &mut stack, visit)?;
        while let Some((base, entries)) = stack.last_mut() {
            let base = *base;
            let Some(e) = entries.next() else {
                stack.pop();
                continue;
            };
            path.truncate(base);
            if !path.is_empty() {
                path.push(b'/');
            }
            path.extend_from_slice(&e.name);
            match self.getattr(e.ino) {
                Ok(a) => self.visit_one(e.ino, &a, &mut path, &mut seen, &mut stack, visit)?,
                Err(error) => {
                    visit(WalkItem::Error { path: &path, error })?;
                }
            }
        }
        Ok(())
    }

    fn visit_one(
        &self,
        ino: u32,
        attr: &Attr,
        path: &mut Vec<u8>,
        seen: &mut HashSet<u32>,
        stack: &mut Vec<(usize, std::vec::IntoIter<DirEntry>)>,
        visit: &mut dyn FnMut(WalkItem<'_>) -> Result<bool>,
    ) -> Result<()> {
        let enter = visit(WalkItem::Entry { path, ino, attr })?;
        if attr.file_type != FileType::Directory || !enter {
            return Ok(());
        }
        if !seen.insert(ino) {
            let error = CorruptKind::DirectoryCycle { ino, child: ino }.into();
            visit(WalkItem::Error { path, error })?;
            return Ok(());
        }
        match self.readdir(ino) {
            Ok(entries) => stack.push((path.len(), entries.into_iter())),
            Err(error) => {
                visit(WalkItem::Error { path, error })?;
            }
        }
        Ok(())
    }

    /// The SIT entries of every main segment (read now, the journal applied).
    pub(crate) fn sit_entries(&self) -> Result<Vec<SitEntry>> {
        read_sit(
            &*self.vol.dev,
            &self.vol.layout,
            &self.vol.cp.sit_bitmap,
            &self.vol.sit_journal,
        )
    }

    /// The orphan inodes the mounted checkpoint lists.
    pub(crate) fn checkpoint_orphans(&self) -> Result<Vec<u32>> {
        Ok(self.vol.orphans.clone())
    }

    /// Per-segment usage from the SIT (read now, not cached).
    pub fn segment_usage(&self) -> Result<SegmentUsage> {
        let sit = read_sit(
            &*self.vol.dev,
            &self.vol.layout,
            &self.vol.cp.sit_bitmap,
            &self.vol.sit_journal,
        )?;
        Ok(usage(&sit))
    }

    /// Geometry, features, checkpoint and usage.
    pub fn info(&self) -> VolumeInfo {
        let sb = &self.vol.sb;
        let cp = &self.vol.cp;
        let h = &cp.head;
        let l = &self.vol.layout;
        let (version, init_version) = sb.versions();
        let uuid = sb
            .uuid()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>();
        let seg = uf2fs_format::BLOCKS_PER_SEG;
        VolumeInfo {
            devices: sb
                .devices()
                .iter()
                .map(|d| crate::mount::DeviceInfo {
                    recorded_path: d.path_lossy(),
                    segments: d.segments,
                    start: d.start,
                    end: d.end,
                })
                .collect(),
            label: sb.label(),
            uuid,
            version,
            init_version,
            features: feature::names(sb.features()),
            sector_size: sb.sector_size(),
            block_size: BLOCK_SIZE as u32,
            block_count: l.block_count,
            segment_count_main: l.main_segments,
            segs_per_sec: l.segs_per_sec,
            secs_per_zone: l.secs_per_zone,
            areas: vec![
                ("checkpoint", l.cp, 2 * seg),
                ("sit", l.sit, l.sit_segments * seg),
                ("nat", l.nat, l.nat_segments * seg),
                ("ssa", l.ssa, l.main.saturating_sub(l.ssa)),
                ("main", l.main, l.main_segments * seg),
            ],
            user_block_count: h.user_block_count.get(),
            valid_block_count: h.valid_block_count.get(),
            free_segment_count: h.free_segment_count.get(),
            reserved_segment_count: h.rsvd_segment_count.get(),
            overprov_segment_count: h.overprov_segment_count.get(),
            valid_node_count: h.valid_node_count.get(),
            valid_inode_count: h.valid_inode_count.get(),
            next_free_nid: h.next_free_nid.get(),
            max_nid: l.nat_blocks() * NAT_ENTRIES_PER_BLOCK as u32,
            elapsed_time: h.elapsed_time.get(),
            current_segments: cp
                .cursegs
                .iter()
                .zip(CURSEG_NAMES)
                .map(|(c, n)| {
                    (
                        n,
                        c.segno,
                        c.blkoff,
                        if c.alloc_type == 1 { "ssr" } else { "lfs" },
                    )
                })
                .collect(),
            mount: MountInfo {
                superblock_copy: sb.copy,
                checkpoint_pack: cp.pack,
                checkpoint_version: cp.version(),
                checkpoint_flags: flags::names(cp.flags()),
                orphan_inodes: self.vol.orphans.len(),
                notes: self.vol.notes.clone(),
            },
        }
    }
}
