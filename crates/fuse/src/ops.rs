//! The FUSE operations, each a thin translation to the engine's [`Fs`] API.
//!
//! Node ids are F2FS nids, except that FUSE's root id (1) stands for the volume's root inode
//! (nid 3 on every image mkfs writes); `stat` shows the real nid. Several kernel requests are
//! served at once: reads share the engine without locks, and changes serialise on the engine's
//! write lock (docs/design.md, "The mount").

use foldhash::{HashMap, HashMapExt};
use fuser::{
    AccessFlags, CopyFileRangeFlags, Errno, FileAttr, FileHandle, FileType as FuseType, Filesystem,
    FopenFlags, Generation, INodeNo, InitFlags, KernelConfig, LockOwner, Notifier, OpenFlags,
    RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyDirectoryPlus, ReplyEmpty,
    ReplyEntry, ReplyLseek, ReplyOpen, ReplyStatfs, ReplyWrite, ReplyXattr, Request, TimeOrNow,
    WriteFlags,
};
use std::ffi::OsStr;
use std::ops::ControlFlow;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use uf2fs_engine::{Attr, Error, FileType, Fs, NewInode, Time};

use crate::acl;
use crate::options::{Atime, MountOptions};

/// How long the kernel may trust an answer. Only this daemon changes the volume (the image is
/// locked), and every change goes through it, so the kernel's copy stays right.
const TTL: Duration = Duration::from_secs(1);

/// When a change takes set-user-ID and set-group-ID away (see `Volume::strip_privileges`).
#[derive(Clone, Copy)]
enum KillSetId {
    Always,
    Never,
    /// Unless the caller holds CAP_FSETID (read from /proc, only for a file that has a bit).
    UnlessCallerHoldsFsetid,
}

/// The access-mode bits of open flags, and write-only among them.
fn libc_accmode() -> i32 {
    rustix::fs::OFlags::ACCMODE.bits() as i32
}
fn libc_rdonly() -> i32 {
    rustix::fs::OFlags::RDONLY.bits() as i32
}
fn libc_wronly() -> i32 {
    rustix::fs::OFlags::WRONLY.bits() as i32
}

/// The xattr of a file capability, removed when the file changes (see `strip_privileges`).
const CAPABILITY: &[u8] = b"security.capability";

/// Largest write the kernel may send in one request, and its readahead.
const MAX_IO: u32 = 1 << 20;

/// File and directory handles: bit 0 says the open holds the inode (kept alive, an orphan,
/// if its last name goes while it is open).
const HELD: u64 = 1;
/// File handles, bit 1: opened O_SYNC or O_DSYNC, counted in `Volume::sync_opens` until
/// release (only with the writeback cache, whose writes do not carry the opener's flags).
const SYNC_OPEN: u64 = 2;

/// Takes one directory entry for a READDIR reply: (offset after it, name, nid, type); true
/// when the reply is full and the entry was not taken.
type AddEntry<'a> = dyn FnMut(u64, &[u8], u32, FuseType) -> bool + 'a;

pub struct Volume {
    pub fs: Arc<Fs>,
    pub opts: MountOptions,
    next_handle: AtomicU64,
    /// fsync and fsyncdir requests served.
    fsyncs: Arc<AtomicU64>,
    /// Tells the kernel when the daemon changed what it caches (set once the session runs).
    notifier: Arc<OnceLock<Notifier>>,
    /// The kernel granted `FUSE_HANDLE_KILLPRIV_V2`: set-user-ID, set-group-ID and file
    /// capabilities are the daemon's to remove on write, truncate and chown.
    killpriv: AtomicBool,
    /// The kernel granted `FUSE_WRITEBACK_CACHE` (asked for unless `nowriteback_cache`).
    writeback: AtomicBool,
    /// Open O_SYNC/O_DSYNC handles by nid, with the writeback cache: its writes come from the
    /// page cache with no opener's flags, so a file with such a handle open has its writes
    /// treated as synchronous (an fsync follows each), as they were without the cache.
    sync_opens: Mutex<HashMap<u32, u32>>,
    /// Errors for writers, by nid, not yet reported: a write from the page cache that failed,
    /// or one that reached into the margin kept back (`cache_margin`). The next GETATTR made
    /// for an open handle of the file (the kernel makes one at write(2) once its attributes
    /// are stale) answers the error once, so that a writer filling a full volume stops (see
    /// docs/design.md, "The writeback cache").
    pending_errors: Mutex<HashMap<u32, Errno>>,
    /// With the writeback cache: free blocks kept back from writers (`statfs` does not count
    /// them as available), at least what the kernel may hold dirty for this mount. A cached
    /// write that leaves fewer free is stored, and its writer is told ENOSPC at its next
    /// write(2) (as for a failed writeback), so that the pages the kernel already took still
    /// find room. Set at mount (`cache_margin_slot`); 0 until then.
    cache_margin: Arc<AtomicU64>,
    /// Files marked to tell their writer an error at its next write(2) (`mark_writer`),
    /// since mount.
    writers_stopped: Arc<AtomicU64>,
    /// Reads ahead of a tree walk (`listing_readahead`).
    ahead: crate::ahead::ListingAhead,
}

impl Volume {
    pub fn new(fs: Arc<Fs>, opts: MountOptions) -> Volume {
        let ahead = crate::ahead::ListingAhead::start(&fs, opts.listing_readahead);
        Volume {
            ahead,
            fs,
            opts,
            next_handle: AtomicU64::new(2),
            fsyncs: Arc::new(AtomicU64::new(0)),
            notifier: Arc::new(OnceLock::new()),
            killpriv: AtomicBool::new(false),
            writeback: AtomicBool::new(false),
            sync_opens: Mutex::new(HashMap::new()),
            pending_errors: Mutex::new(HashMap::new()),
            cache_margin: Arc::new(AtomicU64::new(0)),
            writers_stopped: Arc::new(AtomicU64::new(0)),
        }
    }

    /// What the tree-walk read-ahead did, since mount.
    pub fn ahead_stats(&self) -> Arc<crate::ahead::AheadStats> {
        self.ahead.stats()
    }

    /// Files marked to tell their writer an error at its next write(2), since mount.
    pub fn writers_stopped_counter(&self) -> Arc<AtomicU64> {
        self.writers_stopped.clone()
    }

    /// Where the mount sets the free blocks kept back for the kernel's dirty pages.
    pub fn cache_margin_slot(&self) -> Arc<AtomicU64> {
        self.cache_margin.clone()
    }

    /// The blocks kept back from writers now: the margin, with the writeback cache on.
    fn kept_back(&self) -> u64 {
        if self.writeback.load(Ordering::Relaxed) {
            self.cache_margin.load(Ordering::Relaxed)
        } else {
            0
        }
    }

    /// ENOSPC for a new inode while free space is inside the margin kept back for the
    /// kernel's dirty pages (what statfs shows as available is nothing then). A writer of
    /// small files closes each before the margin can stop it at write(2) (`mark_writer`):
    /// refused at create, it stops with everything it wrote stored, instead of filling the
    /// margin with files whose pages then find no room at writeback and come back empty.
    fn room_for_new_inode(&self) -> Result<(), Errno> {
        let margin = self.kept_back();
        if margin > 0 && self.avail_after_releases(self.fs.statfs().blocks_avail, margin) < margin {
            return Err(Errno::ENOSPC);
        }
        Ok(())
    }

    /// What statfs shows available (`avail` as just read) once the orphans held now (files
    /// unlinked while open) are released, waiting for that at most the engine's
    /// `ORPHAN_RELEASE_WAIT` (`Fs::await_orphan_releases`), or at once with none held or
    /// `margin` available.
    fn avail_after_releases(&self, avail: u64, margin: u64) -> u64 {
        let mut avail = avail;
        if avail >= margin {
            return avail;
        }
        let asked = std::time::Instant::now();
        // An error here is a failed volume, which the write itself reports.
        let _ = self.fs.await_orphan_releases(asked, || {
            avail = self.fs.statfs().blocks_avail;
            Ok(avail >= margin)
        });
        avail
    }

    /// A write from the page cache failed with `e` (the kernel has already dropped its
    /// pages and reports the error at fsync or close), or was stored into the margin kept
    /// back (`cache_margin`): either way write(2) would go on filling the cache. Kept for the
    /// file's next GETATTR through a handle, and the kernel is told its attributes are
    /// stale so that the writer's next write(2) asks at once.
    fn mark_writer(&self, ino: INodeNo, nid: u32, e: Errno) {
        if let Ok(mut m) = self.pending_errors.lock() {
            if m.insert(nid, e).is_some() {
                return;
            }
        }
        self.writers_stopped.fetch_add(1, Ordering::Relaxed);
        if let Some(n) = self.notifier.get() {
            if let Err(err) = n.inval_inode(ino, -1, 0) {
                tracing::debug!("invalidating the attributes of {nid}: {err}");
            }
        }
    }

    /// How long the kernel may keep `nid`'s attributes (and, in an entry, the name): not at
    /// all while an error waits to be reported to its writer, or a reply (the kernel's
    /// SETATTR of the times after each writeback, a `stat`, a lookup or `ls -l` of its
    /// directory) would make them fresh again and the writer's write(2) would not ask.
    fn attr_ttl(&self, nid: u32) -> Duration {
        match self.pending_errors.lock() {
            Ok(m) if m.contains_key(&nid) => Duration::ZERO,
            _ => TTL,
        }
    }

    /// The error for `nid`'s writer not yet reported, taken (reported once).
    fn take_pending_error(&self, nid: u32) -> Option<Errno> {
        self.pending_errors.lock().ok()?.remove(&nid)
    }

    /// The F2FS ioctls that change what a file may do (release, reserve, compress on
    /// request, set its options) are for its owner or root (EPERM otherwise).
    fn owner_or_root(&self, req: &Request, nid: u32) -> Result<(), Errno> {
        let a = self.fs.getattr_shared(nid).map_err(errno)?;
        if req.uid() != 0 && req.uid() != a.uid {
            return Err(Errno::EPERM);
        }
        Ok(())
    }

    /// With the writeback cache, counts an O_SYNC/O_DSYNC open of `nid`; the handle bit to
    /// keep (`SYNC_OPEN`, or 0 when nothing was counted).
    fn note_sync_open(&self, nid: u32, open_flags: i32) -> u64 {
        let dsync = rustix::fs::OFlags::DSYNC.bits() as i32;
        if open_flags & dsync == 0 || !self.writeback.load(Ordering::Relaxed) {
            return 0;
        }
        match self.sync_opens.lock() {
            Ok(mut m) => {
                *m.entry(nid).or_insert(0) += 1;
                SYNC_OPEN
            }
            Err(_) => 0,
        }
    }

    fn forget_sync_open(&self, nid: u32) {
        if let Ok(mut m) = self.sync_opens.lock() {
            if let Some(n) = m.get_mut(&nid) {
                *n -= 1;
                if *n == 0 {
                    m.remove(&nid);
                }
            }
        }
    }

    fn has_sync_open(&self, nid: u32) -> bool {
        self.sync_opens
            .lock()
            .map(|m| m.contains_key(&nid))
            .unwrap_or(false)
    }

    /// Where the session's notifier goes once the session exists.
    pub fn notifier_slot(&self) -> Arc<OnceLock<Notifier>> {
        self.notifier.clone()
    }

    /// After a change to a file's contents (write, truncate, fallocate) or owner made by
    /// `req`, what Linux takes away, in one pass over the inode:
    /// - when `outsider`: set-group-ID if the caller is neither root nor in the file's group,
    ///   whether or not the file is group-executable (Linux's rule for its own file systems;
    ///   FUSE's kernel side drops it only on a group-executable file);
    /// - with `FUSE_HANDLE_KILLPRIV_V2`, which leaves these to us: the file capability
    ///   (`security.capability`) always, and set-user-ID and, on a group-executable file,
    ///   set-group-ID as `kill` says. Directories keep theirs.
    ///
    /// The kernel is told that the mode it caches is stale (attributes only: no page is
    /// touched); a setattr's reply carries the new one anyway.
    fn strip_privileges(
        &self,
        req: &Request,
        ino: INodeNo,
        nid: u32,
        outsider: bool,
        kill: KillSetId,
    ) {
        let Ok(a) = self.fs.getattr(nid) else { return };
        let mut perm = a.perm;
        if outsider
            && req.uid() != 0
            && a.file_type == FileType::Regular
            && a.perm & 0o2010 == 0o2000
            && !Self::in_group(req, a.gid)
        {
            perm &= !0o2000;
        }
        if self.killpriv.load(Ordering::Relaxed) && a.file_type != FileType::Directory {
            if self.fs.getxattr(nid, CAPABILITY).is_ok() {
                if let Err(e) = self.fs.removexattr(nid, CAPABILITY) {
                    tracing::debug!("removing the file capability of {nid}: {e}");
                }
            }
            let kill = match kill {
                KillSetId::Always => true,
                KillSetId::Never => false,
                KillSetId::UnlessCallerHoldsFsetid => {
                    perm & 0o6000 != 0 && !Self::holds_fsetid(req)
                }
            };
            if kill {
                perm &= !0o4000;
                if perm & 0o010 != 0 {
                    perm &= !0o2000;
                }
            }
        }
        if perm == a.perm {
            return;
        }
        match self.fs.set_attr(nid, Some(perm), None, None, None) {
            Ok(()) => {
                if let Some(n) = self.notifier.get() {
                    if let Err(e) = n.inval_inode(ino, -1, 0) {
                        tracing::debug!("invalidating the attributes of {nid}: {e}");
                    }
                }
            }
            Err(e) => tracing::debug!("removing set-user/group-ID of {nid}: {e}"),
        }
    }

    /// The value after `key` (such as `Groups:` or `CapEff:`) in the caller's
    /// /proc/PID/status: what FUSE does not pass (supplementary groups, capabilities).
    fn caller_status(req: &Request, key: &str) -> Option<String> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", req.pid())).ok()?;
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .map(str::to_owned)
    }

    /// Whether the caller of `req` holds CAP_FSETID (bit 4 of `CapEff`), which lets it change
    /// a file without losing set-user-ID and set-group-ID. A caller we cannot look up is
    /// taken not to hold it: the bits go, as for any unprivileged writer.
    fn holds_fsetid(req: &Request) -> bool {
        const CAP_FSETID: u32 = 4;
        Self::caller_status(req, "CapEff:")
            .and_then(|c| u64::from_str_radix(c.trim(), 16).ok())
            .is_some_and(|caps| caps & (1 << CAP_FSETID) != 0)
    }

    /// The count of fsync requests, readable while the session runs.
    pub fn counters(&self) -> Arc<AtomicU64> {
        self.fsyncs.clone()
    }

    fn nid(&self, ino: INodeNo) -> u32 {
        if ino.0 == 1 {
            self.fs.root_ino()
        } else {
            u32::try_from(ino.0).unwrap_or(u32::MAX)
        }
    }

    fn attr(&self, nid: u32) -> Result<FileAttr, Errno> {
        self.fs
            .getattr_shared(nid)
            .map(|a| to_fuse_attr(&a))
            .map_err(errno)
    }

    fn entry(&self, nid: u32, reply: ReplyEntry) {
        match self.fs.getattr_shared(nid) {
            Ok(a) => reply.entry(
                &self.attr_ttl(nid),
                &to_fuse_attr(&a),
                Generation(a.generation.into()),
            ),
            Err(e) => reply.error(errno(e)),
        }
    }

    /// Makes `name` in `parent` for the caller of `req`. Owner and group: the caller's,
    /// except that a set-group-ID directory passes on its group (and, to new directories, the
    /// bit itself), as Linux does.
    fn make(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        rdev: u32,
    ) -> Result<u32, Errno> {
        self.room_for_new_inode()?;
        let parent = self.nid(parent);
        let (a, acls) = self.new_inode(req, parent, mode, umask, rdev)?;
        // The inherited ACLs are made with the inode, in the same change.
        let acls: Vec<(&[u8], &[u8])> = acls
            .iter()
            .flat_map(|(access, default)| {
                [(acl::ACCESS, access), (acl::DEFAULT, default)]
                    .into_iter()
                    .filter_map(|(k, v)| Some((k, v.as_deref()?)))
            })
            .collect();
        self.fs
            .create_node_with_xattrs(parent, name.as_bytes(), a, &acls)
            .map_err(errno)
    }

    /// Owner, mode and device of a new inode in `parent` (a nid), and the access and default
    /// ACLs it inherits.
    #[allow(clippy::type_complexity, reason = "a private helper's two results")]
    fn new_inode(
        &self,
        req: &Request,
        parent: u32,
        mode: u32,
        umask: u32,
        rdev: u32,
    ) -> Result<(NewInode, Option<(Option<Vec<u8>>, Option<Vec<u8>>)>), Errno> {
        let p = self.fs.getattr(parent).map_err(errno)?;
        // The kernel leaves the umask to us (FUSE_DONT_MASK): a default ACL of the parent
        // replaces it, as on Linux's file systems. Symbolic links get no ACL.
        let inherited = match self.fs.getxattr(parent, acl::DEFAULT) {
            Ok(d) if mode & 0o170000 != 0o120000 => acl::inherit(&d, mode),
            _ => None,
        };
        let (mut mode, acls) = match inherited {
            Some(i) => (i.mode, Some((i.access, i.default))),
            None => (mode & !(umask & 0o777), None),
        };
        let mut gid = req.gid();
        if p.perm & 0o2000 != 0 {
            gid = p.gid;
            if mode & 0o170000 == 0o040000 {
                mode |= 0o2000;
            }
        }
        let a = NewInode {
            mode: u16::try_from(mode & 0o177777).map_err(|_| Errno::EINVAL)?,
            uid: req.uid(),
            gid,
            rdev: (
                (rdev >> 8) & 0xfff,
                (rdev & 0xff) | ((rdev >> 12) & 0xfff00),
            ),
        };
        Ok((a, acls))
    }

    /// Whether the caller of `req` belongs to group `gid` (its own or a supplementary one,
    /// read from /proc since FUSE passes only the first), or is root, which may act as if.
    fn in_group(req: &Request, gid: u32) -> bool {
        if req.uid() == 0 || req.gid() == gid {
            return true;
        }
        Self::caller_status(req, "Groups:")
            .is_some_and(|g| g.split_whitespace().any(|x| x.parse() == Ok(gid)))
    }

    /// Walks directory `nid` from READDIR offset `offset` on, giving `add(next offset, name,
    /// nid, type)` each entry until it returns true (the reply is full). Offsets: 0 is ".",
    /// 1 "..", and an entry at position p (its dentry block times 214 plus its slot, as the
    /// engine numbers them and Linux's F2FS gives readdir) is followed by offset p + 3. So a
    /// directory is never read whole into memory, a reader resumes or seeks back to an offset
    /// and finds every entry that stayed there, once, and a rewind reads it as it is now.
    /// Errors only if nothing was given: a damaged block further on is the next call's error.
    fn list(&self, nid: u32, offset: u64, add: &mut AddEntry<'_>) -> Result<(), Errno> {
        if offset == 0 && add(1, b".", nid, FuseType::Directory) {
            return Ok(());
        }
        if offset <= 1 {
            let parent = self.fs.lookup(nid, b"..").unwrap_or(nid);
            if add(2, b"..", parent, FuseType::Directory) {
                return Ok(());
            }
        }
        let mut given = offset <= 1;
        let r = self
            .fs
            .readdir_from(nid, offset.saturating_sub(2), &mut |pos, e| {
                let t = match e.file_type {
                    Some(t) => t,
                    None => self
                        .fs
                        .getattr(e.ino)
                        .map(|a| a.file_type)
                        .unwrap_or(FileType::Regular),
                };
                if add(pos.saturating_add(3), &e.name, e.ino, fuse_type(t)) {
                    return ControlFlow::Break(());
                }
                given = true;
                ControlFlow::Continue(())
            });
        match r {
            Err(e) if !given => Err(errno(e)),
            _ => Ok(()),
        }
    }

    /// A read of `nid`: its access time moves as the atime policy says (the kernel's rules;
    /// the change goes out with the next checkpoint, like any inode change).
    fn accessed(&self, ino: INodeNo, nid: u32) {
        if !self.fs.is_writable() || self.opts.atime == Atime::Noatime {
            return;
        }
        let Ok(a) = self.fs.getattr(nid) else { return };
        let now = from_time(TimeOrNow::Now);
        let at = (a.atime.sec, a.atime.nsec);
        let due = match self.opts.atime {
            Atime::Strictatime => true,
            _ => {
                at <= (a.mtime.sec, a.mtime.nsec)
                    || at <= (a.ctime.sec, a.ctime.nsec)
                    || now.0.saturating_sub(a.atime.sec) >= 24 * 3600
            }
        };
        if due {
            match self.fs.set_atime(nid, now) {
                // The kernel may hold the old attributes for their lifetime; a `stat` right
                // after the read must show the new time (attributes only: no page is touched).
                Ok(()) => {
                    if let Some(n) = self.notifier.get() {
                        if let Err(e) = n.inval_inode(ino, -1, 0) {
                            tracing::debug!("invalidating the attributes of {nid}: {e}");
                        }
                    }
                }
                Err(e) => tracing::debug!("atime of {nid}: {e}"),
            }
        }
    }

    fn durable(&self, nid: u32, datasync: bool) -> Result<(), Errno> {
        self.fsyncs.fetch_add(1, Ordering::Relaxed);
        if !self.fs.is_writable() || self.opts.read_only {
            return Ok(());
        }
        self.fs.fsync(nid, datasync).map_err(errno)
    }
}

/// The errno for an engine error; failures of the image itself are logged with what failed.
pub fn errno(e: Error) -> Errno {
    if matches!(e, Error::Io { .. } | Error::Corrupt(_)) {
        tracing::error!("{e}");
    }
    Errno::from_i32(e.errno())
}

fn to_time(t: Time) -> SystemTime {
    let d = Duration::new(t.sec.unsigned_abs(), t.nsec.min(999_999_999));
    if t.sec >= 0 {
        UNIX_EPOCH.checked_add(d).unwrap_or(UNIX_EPOCH)
    } else {
        UNIX_EPOCH.checked_sub(d).unwrap_or(UNIX_EPOCH)
    }
}

fn from_time(t: TimeOrNow) -> (i64, u32) {
    let t = match t {
        TimeOrNow::SpecificTime(t) => t,
        // The clock the engine and the kernel stamp with (the coarse real-time clock).
        TimeOrNow::Now => {
            let (secs, ns) = uf2fs_engine::wall_clock();
            return (secs as i64, ns);
        }
    };
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => (d.as_secs() as i64, d.subsec_nanos()),
        Err(e) => {
            let d = e.duration();
            if d.subsec_nanos() == 0 {
                (-(d.as_secs() as i64), 0)
            } else {
                (-(d.as_secs() as i64) - 1, 1_000_000_000 - d.subsec_nanos())
            }
        }
    }
}

fn fuse_type(t: FileType) -> FuseType {
    match t {
        FileType::Regular => FuseType::RegularFile,
        FileType::Directory => FuseType::Directory,
        FileType::Symlink => FuseType::Symlink,
        FileType::CharDevice => FuseType::CharDevice,
        FileType::BlockDevice => FuseType::BlockDevice,
        FileType::Fifo => FuseType::NamedPipe,
        FileType::Socket => FuseType::Socket,
    }
}

fn to_fuse_attr(a: &Attr) -> FileAttr {
    let (major, minor) = a.rdev;
    FileAttr {
        ino: INodeNo(a.ino.into()),
        size: a.size,
        blocks: a.blocks_512,
        atime: to_time(a.atime),
        mtime: to_time(a.mtime),
        ctime: to_time(a.ctime),
        crtime: a.crtime.map(to_time).unwrap_or(UNIX_EPOCH),
        kind: fuse_type(a.file_type),
        perm: a.perm,
        nlink: a.nlink,
        uid: a.uid,
        gid: a.gid,
        rdev: (minor & 0xff) | (major << 8) | ((minor & !0xff) << 12),
        blksize: 4096,
        flags: 0,
    }
}

/// Attributes for an entry whose inode cannot be read: its number and type, nothing else
/// (given with a zero lifetime, so nothing is decided on them).
fn unreadable_attr(nid: u32, kind: FuseType) -> FileAttr {
    FileAttr {
        ino: INodeNo(nid.into()),
        size: 0,
        blocks: 0,
        atime: UNIX_EPOCH,
        mtime: UNIX_EPOCH,
        ctime: UNIX_EPOCH,
        crtime: UNIX_EPOCH,
        kind,
        perm: 0,
        nlink: 1,
        uid: 0,
        gid: 0,
        rdev: 0,
        blksize: 4096,
        flags: 0,
    }
}

impl Filesystem for Volume {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        // Both are upper bounds the kernel may lower; what it grants is what it uses.
        let _ = config.set_max_write(MAX_IO);
        let _ = config.set_max_readahead(MAX_IO);
        // The kernel starts throttling writers at three quarters of the asynchronous requests.
        let bg = self.opts.max_background;
        let _ = config.set_max_background(bg);
        let _ = config.set_congestion_threshold((bg / 4 * 3).max(1));
        // POSIX_ACL: the kernel enforces ACLs and caches them, and leaves to us what the
        // acl module does; DONT_MASK: the umask comes to us unapplied, since a default ACL
        // replaces it; EXPORT_SUPPORT: file handles (NFS export, open_by_handle_at) outlive
        // the kernel's inode cache, through lookups of "." and "..". PARALLEL_DIROPS: lookups
        // and readdirs of one directory may run at once (the engine reads without the write
        // lock; changes still come one per directory from the kernel). CACHE_SYMLINKS: a
        // symlink's target stays in the kernel's cache (a target never changes; only this
        // daemon writes the volume). Each only if offered.
        for flag in [
            InitFlags::FUSE_POSIX_ACL,
            InitFlags::FUSE_DONT_MASK,
            InitFlags::FUSE_EXPORT_SUPPORT,
            InitFlags::FUSE_DO_READDIRPLUS,
            InitFlags::FUSE_READDIRPLUS_AUTO,
            InitFlags::FUSE_PARALLEL_DIROPS,
            InitFlags::FUSE_CACHE_SYMLINKS,
        ] {
            if config.add_capabilities(flag).is_err() {
                tracing::info!("the kernel does not offer {flag:?}");
            }
        }
        // KILLPRIV_V2: the kernel stops asking for `security.capability` before every write
        // (it marks the mount SB_NOSEC) and stops refreshing the mode before a chown; we
        // remove what Linux removes ourselves (`strip_privileges`).
        if config
            .add_capabilities(InitFlags::FUSE_HANDLE_KILLPRIV_V2)
            .is_ok()
        {
            self.killpriv.store(true, Ordering::Relaxed);
        } else {
            tracing::info!("the kernel does not offer FUSE_HANDLE_KILLPRIV_V2");
        }
        // OVER_IO_URING: requests come through per-CPU io_uring queues (vendor/fuser's
        // uring.rs); offered only when the `fuse` module's `enable_uring` is on.
        if self.opts.io_uring
            && config
                .add_capabilities(InitFlags::FUSE_OVER_IO_URING)
                .is_err()
        {
            tracing::info!("the kernel does not offer FUSE_OVER_IO_URING (fuse.enable_uring off)");
        }
        // WRITEBACK_CACHE: the kernel keeps written pages, size and times and sends them in
        // runs (docs/design.md, "The writeback cache", for what the daemon does about it).
        if self.opts.writeback_cache && !self.opts.read_only {
            if config
                .add_capabilities(InitFlags::FUSE_WRITEBACK_CACHE)
                .is_ok()
            {
                self.writeback.store(true, Ordering::Relaxed);
            } else {
                tracing::info!("the kernel does not offer FUSE_WRITEBACK_CACHE");
            }
        }
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let parent = self.nid(parent);
        if name.as_bytes() == b"." {
            // The kernel asks this of a file handle's node id whose inode it no longer caches
            // (any type, not only directories): a nid that is no inode any more is stale.
            return match self.fs.is_inode(parent) {
                Ok(true) => self.entry(parent, reply),
                Ok(false) => reply.error(Errno::ESTALE),
                Err(e) => reply.error(errno(e)),
            };
        }
        // Looked up and read together: a name unlinked while we read it is ENOENT, not EIO.
        match self.fs.lookup_attr_shared(parent, name.as_bytes()) {
            Ok((nid, a)) if name.as_bytes() == b".." && nid == self.fs.root_ino() => {
                // Asked only when the kernel reconnects a decoded directory handle to the
                // root: it must meet the root under FUSE's root id, not as a second inode.
                // (The reply's node id is its st_ino: the root shows 1 until its next
                // getattr, within TTL.)
                let mut attr = to_fuse_attr(&a);
                attr.ino = INodeNo(1);
                reply.entry(&TTL, &attr, Generation(a.generation.into()));
            }
            Ok((nid, a)) => reply.entry(
                &self.attr_ttl(nid),
                &to_fuse_attr(&a),
                Generation(a.generation.into()),
            ),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, fh: Option<FileHandle>, reply: ReplyAttr) {
        let nid = self.nid(ino);
        // Through a handle: the kernel's write(2) (also a read past the end or a seek to it)
        // refreshing stale attributes. An error kept for the file's writer is reported here,
        // once.
        if fh.is_some() {
            if let Some(e) = self.take_pending_error(nid) {
                reply.error(e);
                return;
            }
        }
        match self.attr(nid) {
            Ok(a) => reply.attr(&self.attr_ttl(nid), &a),
            Err(e) => reply.error(e),
        }
    }

    fn setattr(
        &self,
        req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let nid = self.nid(ino);
        let run = || -> Result<FileAttr, Errno> {
            if let Some(size) = size {
                self.fs.truncate(nid, size).map_err(errno)?;
            }
            let owner = match (uid, gid) {
                (None, None) => None,
                (u, g) => {
                    let cur = self.fs.getattr(nid).map_err(errno)?;
                    Some((u.unwrap_or(cur.uid), g.unwrap_or(cur.gid)))
                }
            };
            let perm = mode.map(|m| (m & 0o7777) as u16);
            // The kernel's own flush of the times it keeps (writeback cache): modification
            // and change time and nothing else. One overtaken by a newer SETATTR of the same
            // file is not stored (`Fs::set_kept_times`).
            let kept = match (mtime, ctime) {
                (Some(m), Some(c))
                    if size.is_none() && owner.is_none() && perm.is_none() && atime.is_none() =>
                {
                    Some((from_time(m), from_time(TimeOrNow::SpecificTime(c))))
                }
                _ => None,
            };
            if let Some((m, c)) = kept {
                self.fs.set_kept_times(nid, m, c).map_err(errno)?;
            } else if perm.is_some() || owner.is_some() || atime.is_some() || mtime.is_some() {
                // A change time comes only from a kernel that keeps a regular file's times
                // (the writeback cache): it is the one it showed, so it is the one kept.
                let ctime = ctime.map(|t| from_time(TimeOrNow::SpecificTime(t)));
                self.fs
                    .set_attr_at(
                        nid,
                        perm,
                        owner,
                        atime.map(from_time),
                        mtime.map(from_time),
                        ctime,
                    )
                    .map_err(errno)?;
            }
            if let Some(m) = mode {
                // A chmod moves the access ACL's owner, group-class and other entries too.
                if let Some(a) = self
                    .fs
                    .getxattr(nid, acl::ACCESS)
                    .ok()
                    .and_then(|a| acl::chmod(&a, m))
                {
                    self.fs.setxattr(nid, acl::ACCESS, &a, 0).map_err(errno)?;
                }
            }
            if size.is_some() || uid.is_some() || gid.is_some() {
                // A change of owner takes set-user-ID (and group-executable set-group-ID)
                // from anyone, root included, as chown(2) does on Linux; for a truncation
                // the kernel leaves it to us to judge the caller (fuser 0.18 does not pass
                // FATTR_KILL_SUIDGID).
                let kill = if uid.is_some() || gid.is_some() {
                    KillSetId::Always
                } else {
                    KillSetId::UnlessCallerHoldsFsetid
                };
                self.strip_privileges(req, ino, nid, size.is_some(), kill);
            }
            self.attr(nid)
        };
        match run() {
            Ok(a) => reply.attr(&self.attr_ttl(nid), &a),
            // The kernel sends a change time only for a regular file under the writeback
            // cache, and sends the times it kept (with nothing else) when it lets go of an
            // inode, also after its last name was unlinked and the daemon freed it. Linux
            // would update the orphan's times; there is nothing left to update, and an error
            // here would be kept by the kernel as a writeback error that a later syncfs(2)
            // of the whole mount reports.
            Err(Errno::ENOENT)
                if ctime.is_some()
                    && size.is_none()
                    && mode.is_none()
                    && uid.is_none()
                    && gid.is_none() =>
            {
                let mut a = unreadable_attr(nid, FuseType::RegularFile);
                a.nlink = 0;
                reply.attr(&Duration::ZERO, &a)
            }
            Err(e) => reply.error(e),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        match self.fs.readlink(self.nid(ino)) {
            Ok(t) => reply.data(&t),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        match self.make(req, parent, name, mode, umask, rdev) {
            Ok(nid) => self.entry(nid, reply),
            Err(e) => reply.error(e),
        }
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        match self.make(req, parent, name, (mode & 0o7777) | 0o040000, umask, 0) {
            Ok(nid) => self.entry(nid, reply),
            Err(e) => reply.error(e),
        }
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        done(
            reply,
            self.fs
                .unlink(self.nid(parent), name.as_bytes())
                .map_err(errno),
        )
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        done(
            reply,
            self.fs
                .rmdir(self.nid(parent), name.as_bytes())
                .map_err(errno),
        )
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let target = target.as_os_str().as_bytes();
        if target.is_empty() {
            return reply.error(Errno::ENOENT);
        }
        if let Err(e) = self.room_for_new_inode() {
            return reply.error(e);
        }
        if target.len() >= 4096 {
            return reply.error(Errno::ENAMETOOLONG);
        }
        let made = self
            .make(req, parent, link_name, 0o120777, 0, 0)
            .and_then(|nid| {
                match self.fs.write(nid, 0, target) {
                    Ok(_) => Ok(nid),
                    Err(e) => {
                        // Do not leave an empty link behind.
                        let _ = self.fs.unlink(self.nid(parent), link_name.as_bytes());
                        Err(errno(e))
                    }
                }
            });
        match made {
            Ok(nid) => self.entry(nid, reply),
            Err(e) => reply.error(e),
        }
    }

    fn rename(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        // RENAME_WHITEOUT (overlayfs's; the kernel has checked CAP_MKNOD and refused it with
        // EXCHANGE): the rename, then a whiteout (a 0:0 character device) in the old place.
        let whiteout = flags.contains(RenameFlags::RENAME_WHITEOUT);
        let run = || -> Result<(), Errno> {
            let (from, to) = (self.nid(parent), self.nid(newparent));
            let rest = (flags - RenameFlags::RENAME_WHITEOUT).bits();
            if whiteout {
                // Owner and group as for any new inode in `parent`; a whiteout takes no ACL.
                let (w, _) = self.new_inode(req, from, 0o020000, 0, 0)?;
                self.fs
                    .rename_whiteout(from, name.as_bytes(), to, newname.as_bytes(), rest, w)
                    .map_err(errno)
            } else {
                self.fs
                    .rename(from, name.as_bytes(), to, newname.as_bytes(), rest)
                    .map_err(errno)
            }
        };
        done(reply, run());
    }

    fn link(
        &self,
        _req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let nid = self.nid(ino);
        match self.fs.link(nid, self.nid(newparent), newname.as_bytes()) {
            Ok(()) => self.entry(nid, reply),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let nid = self.nid(ino);
        // An inode unlinked (and freed) by another process since the kernel looked it up is
        // ENOENT, as the getattr of such an inode is.
        if let Err(e) = self.fs.getattr_shared(nid) {
            return reply.error(errno(e));
        }
        // An encrypted file opens only with its key, which we never have (ENOKEY, as Linux).
        let check = if flags.0 & libc_accmode() == libc_rdonly() {
            self.fs.check_open(nid)
        } else {
            self.fs.check_open_write(nid)
        };
        if let Err(e) = check {
            return reply.error(errno(e));
        }
        // An error not yet reported through a handle belongs to the handles open before
        // (the kernel also returns a failed writeback from their fsync and close); a new
        // handle starts without it.
        let _ = self.take_pending_error(nid);
        // Hold the inode so that an unlink while open keeps it (an orphan) until release.
        let held = self.fs.is_writable()
            && match self.fs.hold(nid) {
                Ok(()) => true,
                Err(Error::NotFound) => return reply.error(Errno::ENOENT),
                Err(_) => false,
            };
        // Every change to a file's bytes comes through this mount, where the kernel keeps
        // its page cache in step (write-through writes fill it, truncate, fallocate and
        // copy_file_range drop what they change); the cleaner moves blocks without changing
        // bytes. So an unchanged file keeps its cached pages across opens.
        let sync = self.note_sync_open(nid, flags.0);
        // Reads served from the kernel's page cache (kept across opens, and filled by the
        // writeback cache's writes) never reach the daemon, and the kernel leaves a FUSE
        // file's access time to it: an open for reading counts as the access, under the
        // same atime rules as a READ.
        if flags.0 & libc_accmode() != libc_wronly() {
            self.accessed(ino, nid);
        }
        reply.opened(
            FileHandle(if held { HELD } else { 0 } | sync),
            FopenFlags::FOPEN_KEEP_CACHE,
        );
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        // The data goes straight into the buffer the kernel reads the reply from (through an
        // io_uring queue) or into one the request thread keeps: `Fs::read` writes every byte
        // it reports (data, or zeros for holes).
        let want = size.min(MAX_IO * 16) as usize;
        let nid = self.nid(ino);
        let mut read = false;
        reply.fill(want, |buf| {
            let n = self.fs.read(nid, offset, buf).map_err(errno)?;
            read = true;
            Ok(n)
        });
        if read {
            self.accessed(ino, nid);
        }
    }

    fn write(
        &self,
        req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        write_flags: WriteFlags,
        flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let nid = self.nid(ino);
        // From the kernel's page cache (writeback cache): the request carries the flusher's
        // credentials and no opener's flags.
        let cached = write_flags.contains(WriteFlags::FUSE_WRITE_CACHE);
        // A handle opened O_SYNC or O_DSYNC: the kernel sends an FSYNC right after, so the
        // engine may rewrite a small write in place (mode=adaptive).
        let dsync = rustix::fs::OFlags::DSYNC.bits() as i32;
        let synced = if cached {
            self.has_sync_open(nid)
        } else {
            flags.0 & dsync != 0
        };
        // A write from the page cache leaves the times to the kernel, which stamped them at
        // write(2) and sends them itself (see docs/design.md, "The writeback cache").
        // Free space before a write from the page cache, when a margin is kept back.
        let margin = if cached { self.kept_back() } else { 0 };
        let avail_before = (margin > 0).then(|| self.fs.statfs().blocks_avail);
        let written = if cached {
            self.fs.write_cached(nid, offset, data, synced)
        } else if synced {
            self.fs.write_synced(nid, offset, data)
        } else {
            self.fs.write(nid, offset, data)
        };
        match written {
            Ok(n) => {
                // The kernel judged the writer (CAP_FSETID) and says so in the flags.
                let kill = if write_flags.contains(WriteFlags::FUSE_WRITE_KILL_SUIDGID) {
                    KillSetId::Always
                } else {
                    KillSetId::Never
                };
                // The set-group-ID rule for writers outside the group needs the writer, which
                // a write from the page cache does not name; the kernel has judged the writer
                // at write(2) and sent the write through when a bit had to go.
                self.strip_privileges(req, ino, nid, !cached, kill);
                // A write that took free space and left less than the margin kept back for
                // the kernel's dirty pages: stored, and the writer stops at its next
                // write(2), before the pages it would still give find no room. (Overwrites
                // take no space: a volume filled past the margin some other way can still
                // be rewritten.)
                if let Some(before) = avail_before {
                    let after = self.fs.statfs().blocks_avail;
                    if after < before && self.avail_after_releases(after, margin) < margin {
                        self.mark_writer(ino, nid, Errno::ENOSPC);
                    }
                }
                reply.written(n as u32);
            }
            Err(e) => {
                let e = errno(e);
                if cached {
                    self.mark_writer(ino, nid, e);
                }
                reply.error(e);
            }
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        // Writes reach the engine as they come (no cache in the daemon): nothing to flush.
        // ENOSYS tells the kernel so once, and it sends no more flushes (one request less
        // per close).
        reply.error(Errno::ENOSYS);
    }

    fn release(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        if fh.0 & SYNC_OPEN != 0 {
            self.forget_sync_open(self.nid(ino));
        }
        if fh.0 & HELD != 0 {
            if let Err(e) = self.fs.release(self.nid(ino)) {
                return reply.error(errno(e));
            }
        }
        reply.ok();
    }

    fn fsync(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        done(reply, self.durable(self.nid(ino), datasync))
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let nid = self.nid(ino);
        // A directory that cannot be listed (not a directory, damage in its first block, no
        // key for its names) is refused here, as when its listing was taken at opendir.
        if let Err(e) = self.list(nid, 2, &mut |_, _, _, _| true) {
            return reply.error(e);
        }
        // Held like an open file: removed while open, it lives on (an orphan, as fstat on it
        // must work) until releasedir.
        let held = self.fs.is_writable() && self.fs.hold(nid).is_ok();
        let h = self.next_handle.fetch_add(2, Ordering::Relaxed) | u64::from(held);
        reply.opened(FileHandle(h), FopenFlags::empty());
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let r = self.list(self.nid(ino), offset, &mut |next, name, nid, t| {
            reply.add(INodeNo(nid.into()), next, t, OsStr::from_bytes(name))
        });
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    /// READDIR and a LOOKUP of every entry in one request: `ls -l`, `find | xargs stat` and
    /// `rm -rf` then find names and attributes in the kernel's caches instead of asking for
    /// each. The kernel counts a lookup for each entry but "." and "..", as for LOOKUP.
    fn readdirplus(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectoryPlus,
    ) {
        // The entries that fit first, then their inodes read together (a checkpoint wrote a
        // directory's new inodes side by side: one device read instead of one per entry),
        // then the reply. An entry takes 152 bytes and its name rounded up to 8; what is
        // listed but does not fit after all is listed again by the next request.
        if offset == 0 {
            self.ahead.listed(self.nid(ino));
        }
        let mut offset = offset;
        loop {
            let mut room = reply.room();
            let mut entries: Vec<(u64, Vec<u8>, u32, FuseType)> = Vec::new();
            let listed = self.list(self.nid(ino), offset, &mut |next, name, nid, kind| {
                let size = 152 + name.len().next_multiple_of(8);
                if size > room {
                    return true;
                }
                room -= size;
                entries.push((next, name.to_vec(), nid, kind));
                false
            });
            if let Err(e) = listed {
                return reply.error(e);
            }
            let Some(last) = entries.last().map(|e| e.0) else {
                // The end of the directory.
                return reply.ok();
            };
            let nids: Vec<u32> = entries.iter().map(|e| e.2).collect();
            self.fs.prefetch_inodes(&nids);
            let mut added = false;
            for (next, name, nid, kind) in entries {
                let (fattr, generation, ttl) = match self.fs.getattr_shared(nid) {
                    Ok(a) => (to_fuse_attr(&a), a.generation, self.attr_ttl(nid)),
                    // Gone since its entry was read (unlinked by someone else): as a later
                    // readdir would, leave it out.
                    Err(uf2fs_engine::Error::NotFound) => continue,
                    // An inode that cannot be read (damage) is still listed, as READDIR lists
                    // it, with attributes that expire at once: a stat of it asks again and
                    // gets the error. One bad inode must not hide its whole directory.
                    Err(_) => (unreadable_attr(nid, kind), 0, Duration::ZERO),
                };
                // "." and ".." carry the same numbers as in READDIR (the kernel does not look
                // them up; it may read a directory with either request, and a reader that
                // seeks back must see the same entries: fstests generic/257).
                if reply.add(
                    fattr.ino,
                    next,
                    OsStr::from_bytes(&name),
                    &ttl,
                    &fattr,
                    Generation(generation.into()),
                ) {
                    // (Not reached: the entries were sized to the room.)
                    return reply.ok();
                }
                added = true;
            }
            if added {
                return reply.ok();
            }
            // Every entry listed went meanwhile: an empty reply would end the directory, so
            // the listing goes on past them.
            offset = last;
        }
    }

    fn releasedir(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        if fh.0 & HELD != 0 {
            if let Err(e) = self.fs.release(self.nid(ino)) {
                return reply.error(errno(e));
            }
        }
        reply.ok();
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        done(reply, self.durable(self.nid(ino), datasync))
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let s = self.fs.statfs();
        reply.statfs(
            s.blocks,
            s.blocks_free,
            // What is kept back for the kernel's dirty pages is free but not available, as
            // a kernel file system's blocks reserved for root are.
            s.blocks_avail.saturating_sub(self.kept_back()),
            s.files,
            s.files_free,
            s.block_size,
            s.name_max,
            s.block_size,
        );
    }

    fn setxattr(
        &self,
        req: &Request,
        ino: INodeNo,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        position: u32,
        reply: ReplyEmpty,
    ) {
        if position != 0 {
            return reply.error(Errno::EINVAL);
        }
        let nid = self.nid(ino);
        let run = || -> Result<(), Errno> {
            self.fs
                .setxattr(nid, name.as_bytes(), value, flags as u32)
                .map_err(errno)?;
            if name.as_bytes() == acl::ACCESS {
                // Setting an access ACL changes the mode: like chmod, it drops set-group-ID
                // when the caller is not in the file's group (the kernel says so only
                // through FUSE_SETXATTR_EXT, which fuser cannot parse, so we decide).
                let a = self.fs.getattr(nid).map_err(errno)?;
                if a.perm & 0o2000 != 0 && !Self::in_group(req, a.gid) {
                    self.fs
                        .set_attr(nid, Some(a.perm & !0o2000), None, None, None)
                        .map_err(errno)?;
                }
            }
            Ok(())
        };
        done(reply, run())
    }

    fn getxattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        match self.fs.getxattr(self.nid(ino), name.as_bytes()) {
            Ok(v) => sized(reply, size, &v),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn listxattr(&self, _req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        match self.fs.listxattr(self.nid(ino)) {
            Ok(names) => {
                let mut all = Vec::new();
                for n in names {
                    all.extend_from_slice(&n);
                    all.push(0);
                }
                sized(reply, size, &all);
            }
            Err(e) => reply.error(errno(e)),
        }
    }

    fn removexattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        done(
            reply,
            self.fs
                .removexattr(self.nid(ino), name.as_bytes())
                .map_err(errno),
        )
    }

    fn access(&self, _req: &Request, ino: INodeNo, _mask: AccessFlags, reply: ReplyEmpty) {
        // The kernel checks the mode bits itself (default_permissions); only existence is ours.
        match self.fs.getattr(self.nid(ino)) {
            Ok(_) => reply.ok(),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let made = self
            .make(req, parent, name, mode, umask, 0)
            .and_then(|nid| {
                let a = self.fs.getattr(nid).map_err(errno)?;
                Ok((nid, a))
            });
        match made {
            Ok((nid, a)) => {
                // A new inode may reuse the nid of one marked for its writer.
                let _ = self.take_pending_error(nid);
                let held = self.fs.hold(nid).is_ok();
                let sync = self.note_sync_open(nid, flags);
                reply.created(
                    &TTL,
                    &to_fuse_attr(&a),
                    Generation(a.generation.into()),
                    FileHandle(if held { HELD } else { 0 } | sync),
                    FopenFlags::FOPEN_KEEP_CACHE,
                );
            }
            Err(e) => reply.error(e),
        }
    }

    fn ioctl(
        &self,
        req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _flags: fuser::IoctlFlags,
        cmd: u32,
        in_data: &[u8],
        out_size: u32,
        reply: fuser::ReplyIoctl,
    ) {
        // FS_IOC_GETFLAGS and FS_IOC_SETFLAGS (the long and the 32-bit spellings), and
        // FS_IOC_FSGETXATTR. The kernel sends them from its fileattr calls (flags as a 4-byte
        // int) after checking ownership.
        const GETFLAGS: [u32; 2] = [0x8008_6601, 0x8004_6601];
        const SETFLAGS: [u32; 2] = [0x4008_6602, 0x4004_6602];
        const FSGETXATTR: u32 = 0x801C_581F;
        // FS_*_FL → FS_XFLAG_*: sync, immutable, append, nodump, noatime, projinherit.
        const XFLAGS: [(u32, u32); 6] = [
            (0x08, 0x20),
            (0x10, 0x08),
            (0x20, 0x10),
            (0x40, 0x80),
            (0x80, 0x40),
            (0x2000_0000, 0x200),
        ];
        let nid = self.nid(ino);
        if GETFLAGS.contains(&cmd) {
            match self.fs.fs_flags(nid) {
                Ok(f) => {
                    let bytes = u64::from(f).to_le_bytes();
                    let n = (out_size as usize).min(bytes.len());
                    reply.ioctl(0, bytes.get(..n).unwrap_or(&[]));
                }
                Err(e) => reply.error(errno(e)),
            }
            return;
        }
        if cmd == FSGETXATTR {
            // struct fsxattr (28 bytes): the xflags that mirror the inode flags; extent size
            // hints, extent count and project id 0. Newer kernels ask this before a SETFLAGS.
            match self.fs.fs_flags(nid) {
                Ok(f) => {
                    let mut x = [0u8; 28];
                    let xflags = XFLAGS
                        .iter()
                        .filter(|(fl, _)| f & fl != 0)
                        .fold(0u32, |a, (_, xf)| a | xf);
                    if let Some(w) = x.get_mut(..4) {
                        w.copy_from_slice(&xflags.to_le_bytes());
                    }
                    let n = (out_size as usize).min(x.len());
                    reply.ioctl(0, x.get(..n).unwrap_or(&[]));
                }
                Err(e) => reply.error(errno(e)),
            }
            return;
        }
        if SETFLAGS.contains(&cmd) {
            let Some(word) = in_data.get(..4).and_then(|b| <[u8; 4]>::try_from(b).ok()) else {
                reply.error(Errno::EINVAL);
                return;
            };
            match self.fs.set_fs_flags(nid, u32::from_le_bytes(word)) {
                Ok(()) => reply.ioctl(0, &[]),
                Err(e) => reply.error(errno(e)),
            }
            return;
        }
        // F2FS's compression ioctls (each hands back a u64): the blocks compression saves,
        // and releasing or reserving them again. Release and reserve change what the file may
        // do, so only its owner (or root) may ask, where Linux asks for no more than an open
        // file.
        const GET_COMPRESS_BLOCKS: u32 = 0x8008_F511;
        const RELEASE_COMPRESS_BLOCKS: u32 = 0x8008_F512;
        const RESERVE_COMPRESS_BLOCKS: u32 = 0x8008_F513;
        if matches!(
            cmd,
            GET_COMPRESS_BLOCKS | RELEASE_COMPRESS_BLOCKS | RESERVE_COMPRESS_BLOCKS
        ) {
            let r = match cmd {
                GET_COMPRESS_BLOCKS => match self.fs.compression(nid) {
                    Ok(Some(c)) => Ok(c.compr_blocks),
                    Ok(None) => Err(Errno::EINVAL),
                    Err(e) => Err(errno(e)),
                },
                _ => self.owner_or_root(req, nid).and_then(|()| {
                    if cmd == RELEASE_COMPRESS_BLOCKS {
                        self.fs.release_compress_blocks(nid).map_err(errno)
                    } else {
                        self.fs.reserve_compress_blocks(nid).map_err(errno)
                    }
                }),
            };
            match r {
                Ok(n) => {
                    let bytes = n.to_le_bytes();
                    let k = (out_size as usize).min(bytes.len());
                    reply.ioctl(0, bytes.get(..k).unwrap_or(&[]));
                }
                Err(e) => reply.error(e),
            }
            return;
        }
        // F2FS_IOC_GET_COMPRESS_OPTION and F2FS_IOC_SET_COMPRESS_OPTION: struct
        // f2fs_comp_option, the algorithm and the cluster log, one byte each.
        const GET_COMPRESS_OPTION: u32 = 0x8002_F515;
        const SET_COMPRESS_OPTION: u32 = 0x4002_F516;
        if cmd == GET_COMPRESS_OPTION {
            match self.fs.compress_option(nid) {
                Ok((alg, log)) => reply.ioctl(0, &[alg, log]),
                Err(e) => reply.error(errno(e)),
            }
            return;
        }
        if cmd == SET_COMPRESS_OPTION {
            let r = match (in_data.first(), in_data.get(1)) {
                (Some(&alg), Some(&log)) => self
                    .owner_or_root(req, nid)
                    .and_then(|()| self.fs.set_compress_option(nid, alg, log).map_err(errno)),
                _ => Err(Errno::EINVAL),
            };
            match r {
                Ok(()) => reply.ioctl(0, &[]),
                Err(e) => reply.error(e),
            }
            return;
        }
        // F2FS_IOC_DECOMPRESS_FILE and F2FS_IOC_COMPRESS_FILE (no data either way), under
        // compress_mode=user; owner or root only, where Linux wants a file open for writing
        // (the daemon does not learn how the file was opened).
        const DECOMPRESS_FILE: u32 = 0x0000_F517;
        const COMPRESS_FILE: u32 = 0x0000_F518;
        if matches!(cmd, DECOMPRESS_FILE | COMPRESS_FILE) {
            let r = self.owner_or_root(req, nid).and_then(|()| {
                self.fs
                    .recompress_file(nid, cmd == COMPRESS_FILE)
                    .map_err(errno)
            });
            match r {
                Ok(()) => reply.ioctl(0, &[]),
                Err(e) => reply.error(e),
            }
            return;
        }
        // No other F2FS ioctls yet (shutdown, GC, defragment...); isatty() and friends ask too.
        reply.error(Errno::ENOTTY);
    }

    fn fallocate(
        &self,
        req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        let nid = self.nid(ino);
        let r = self
            .fs
            .fallocate(nid, mode as u32, offset, length)
            .map_err(errno);
        if r.is_ok() {
            self.strip_privileges(req, ino, nid, true, KillSetId::UnlessCallerHoldsFsetid);
        }
        done(reply, r)
    }

    fn lseek(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: i64,
        whence: i32,
        reply: ReplyLseek,
    ) {
        const SEEK_DATA: i32 = 3;
        const SEEK_HOLE: i32 = 4;
        let Ok(off) = u64::try_from(offset) else {
            return reply.error(Errno::ENXIO);
        };
        let hole = match whence {
            SEEK_DATA => false,
            SEEK_HOLE => true,
            _ => return reply.error(Errno::EINVAL),
        };
        match self.fs.seek(self.nid(ino), off, hole) {
            Ok(p) => reply.offset(p as i64),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn copy_file_range(
        &self,
        _req: &Request,
        ino_in: INodeNo,
        _fh_in: FileHandle,
        offset_in: u64,
        ino_out: INodeNo,
        _fh_out: FileHandle,
        offset_out: u64,
        len: u64,
        _flags: CopyFileRangeFlags,
        reply: ReplyWrite,
    ) {
        // Copied here in 1 MiB steps: the data does not travel through the kernel twice. The
        // kernel has written the source's dirty pages in the range first, so its size here is
        // current, and what lies past it is not copied: the buffer is as large as the copy
        // (`cp` asks for far more than a small file holds, and a zeroed MiB per request cost
        // a mapping, its page faults and an unmapping, half of a 16 KiB file's copy).
        let (src, dst) = (self.nid(ino_in), self.nid(ino_out));
        let size = match self.fs.getattr(src) {
            Ok(a) => a.size,
            Err(e) => return reply.error(errno(e)),
        };
        let total = len
            .min(size.saturating_sub(offset_in))
            .min(u64::from(u32::MAX) & !0xfff);
        let mut buf = vec![0u8; total.min(MAX_IO.into()) as usize];
        let mut done = 0u64;
        while done < total {
            let want = (total - done).min(MAX_IO.into()) as usize;
            let chunk = buf.get_mut(..want).unwrap_or(&mut []);
            let n = match self.fs.read(src, offset_in + done, chunk) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) => return reply.error(errno(e)),
            };
            if let Err(e) = self
                .fs
                .write(dst, offset_out + done, chunk.get(..n).unwrap_or(&[]))
            {
                if done == 0 {
                    return reply.error(errno(e));
                }
                break;
            }
            done += n as u64;
        }
        reply.written(done as u32);
    }
}

/// Answers a request that returns nothing but success or an errno.
fn done(reply: ReplyEmpty, r: Result<(), Errno>) {
    match r {
        Ok(()) => reply.ok(),
        Err(e) => reply.error(e),
    }
}

/// Answers a size probe (size 0) with the length, a short buffer with ERANGE.
fn sized(reply: ReplyXattr, size: u32, v: &[u8]) {
    if size == 0 {
        reply.size(v.len() as u32);
    } else if v.len() > size as usize {
        reply.error(Errno::ERANGE);
    } else {
        reply.data(v);
    }
}
