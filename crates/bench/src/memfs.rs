//! `memfs`: the FUSE transport's floor for the tree workloads, and its ceiling for fio's
//! (no device behind it) (issue 14).
//!
//! An in-memory file system served through the same vendored fuser as `uf2fs mount`: FUSE
//! over io_uring with the yield, the same INIT flags (writeback cache, KILLPRIV_V2,
//! readdirplus, parallel directory operations, POSIX ACLs left to the kernel), the same
//! `max_write`, readahead, background limits and attribute lifetimes. Each request does the
//! least a file system can: a hash map of inodes under one mutex, no image, no checkpoint.
//! What `tar -x` or `rm -rf` takes on it is what the kernel and the transport take for the
//! same requests; the gap between it and uf2fs is the daemon's own.
//!
//! It is a measuring instrument, not a file system to keep data in: everything is lost at
//! unmount, and it refuses to hold more than `MAX_BYTES` of file data (ENOSPC).
//!
//! The requests it has served are read back through the root's `user.memfs.requests`
//! xattr (a JSON object by kind, as `uf2fs status --json` gives them).

use fuser::{
    Config, CopyFileRangeFlags, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags,
    Generation, INodeNo, InitFlags, KernelConfig, LockOwner, MountOption, OpenFlags, RenameFlags,
    ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyDirectoryPlus, ReplyEmpty, ReplyEntry,
    ReplyOpen, ReplyStatfs, ReplyWrite, ReplyXattr, Request, Session, SessionACL, TimeOrNow,
    WriteFlags,
};
use std::collections::{BTreeMap, HashMap};
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, SystemTime};

/// The attribute and entry lifetime uf2fs gives (`crates/fuse/src/ops.rs`).
const TTL: Duration = Duration::from_secs(1);
/// uf2fs's `max_write` and readahead.
const MAX_IO: u32 = 1 << 20;
/// uf2fs's default `max_background`.
const MAX_BACKGROUND: u16 = 64;
/// File data held at most (the tree workloads need about 200 MiB for two copies).
const MAX_BYTES: u64 = 4 << 30;
/// The root's xattr that reports the requests served.
const REQUESTS_XATTR: &[u8] = b"user.memfs.requests";
const ROOT: u64 = 1;

struct Inode {
    attr: FileAttr,
    data: Vec<u8>,
    /// A directory's entries (names to inode numbers).
    entries: BTreeMap<OsString, u64>,
    xattrs: BTreeMap<OsString, Vec<u8>>,
    /// The kernel's references (entries it was given, less what it forgot): an inode whose
    /// last name goes lives on until they are gone, as its pages and times may still come.
    lookups: u64,
}

#[derive(Default)]
struct Tree {
    inodes: HashMap<u64, Inode>,
    bytes: u64,
}

/// Which FUSE transport memfs serves through.
#[derive(Clone, Copy, PartialEq, Eq, Debug, clap::ValueEnum)]
pub enum Transport {
    /// FUSE over io_uring, the serving threads yielding after replies (uf2fs's default).
    Uring,
    /// FUSE over io_uring without the yield (`noio_uring_yield`).
    UringNoYield,
    /// /dev/fuse (`noio_uring`).
    Dev,
}

pub struct MemFs {
    transport: Transport,
    tree: Mutex<Tree>,
    next_ino: AtomicU64,
    counts: Arc<OnceLock<Arc<fuser::RequestCounts>>>,
    /// CPU time each request spends before its answer (`--work-us`): a daemon that does
    /// this much per request, for how the transport's cost depends on it.
    work: Duration,
}

/// The time as the kernel stamps inodes: its coarse real-time clock. (With a finer clock
/// the kernel's own stamp at the next write(2) always differs, and the inode's times go
/// dirty and cost a SETATTR at writeback that uf2fs, stamping as the kernel does, is not
/// sent.)
fn now() -> SystemTime {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::RealtimeCoarse);
    let secs = u64::try_from(t.tv_sec).unwrap_or(0);
    let nanos = u32::try_from(t.tv_nsec).unwrap_or(0);
    SystemTime::UNIX_EPOCH + Duration::new(secs, nanos)
}

fn new_attr(ino: u64, kind: FileType, perm: u16, uid: u32, gid: u32) -> FileAttr {
    let now = now();
    FileAttr {
        ino: INodeNo(ino),
        size: 0,
        blocks: 0,
        atime: now,
        mtime: now,
        ctime: now,
        crtime: now,
        kind,
        perm,
        nlink: if kind == FileType::Directory { 2 } else { 1 },
        uid,
        gid,
        rdev: 0,
        blksize: 4096,
        flags: 0,
    }
}

fn kind_of(mode: u32) -> Result<FileType, Errno> {
    Ok(match mode & 0o170000 {
        0o100000 => FileType::RegularFile,
        0o040000 => FileType::Directory,
        0o120000 => FileType::Symlink,
        0o020000 => FileType::CharDevice,
        0o060000 => FileType::BlockDevice,
        0o010000 => FileType::NamedPipe,
        0o140000 => FileType::Socket,
        _ => return Err(Errno::EINVAL),
    })
}

fn set_size(attr: &mut FileAttr, size: u64) {
    attr.size = size;
    attr.blocks = size.div_ceil(512);
}

impl Tree {
    fn get(&self, ino: u64) -> Result<&Inode, Errno> {
        self.inodes.get(&ino).ok_or(Errno::ENOENT)
    }
    fn get_mut(&mut self, ino: u64) -> Result<&mut Inode, Errno> {
        self.inodes.get_mut(&ino).ok_or(Errno::ENOENT)
    }
    fn dir(&self, ino: u64) -> Result<&Inode, Errno> {
        let d = self.get(ino)?;
        if d.attr.kind != FileType::Directory {
            return Err(Errno::ENOTDIR);
        }
        Ok(d)
    }
    /// A directory's entries after `offset`, each with its own offset (the one a reader
    /// resumes after): "." and ".." at 1 and 2 (both naming the directory itself: memfs
    /// keeps no parent), then the names in order.
    fn entries_from(&self, dir: u64, offset: u64) -> Result<Vec<(u64, u64, OsString)>, Errno> {
        let d = self.dir(dir)?;
        let dots = [(dir, OsString::from(".")), (dir, OsString::from(".."))];
        let names = d.entries.iter().map(|(n, i)| (*i, n.clone()));
        Ok(dots
            .into_iter()
            .chain(names)
            .zip(1u64..)
            .skip_while(|(_, next)| *next <= offset)
            .map(|((ino, name), next)| (next, ino, name))
            .collect())
    }

    fn child(&self, parent: u64, name: &OsStr) -> Result<u64, Errno> {
        self.dir(parent)?
            .entries
            .get(name)
            .copied()
            .ok_or(Errno::ENOENT)
    }
    fn touch_dir(&mut self, dir: u64) {
        if let Some(d) = self.inodes.get_mut(&dir) {
            let now = now();
            d.attr.mtime = now;
            d.attr.ctime = now;
        }
    }
    /// One name less for `ino` (a directory's only one).
    fn drop_link(&mut self, ino: u64) {
        if let Some(i) = self.inodes.get_mut(&ino) {
            i.attr.nlink = if i.attr.kind == FileType::Directory {
                0
            } else {
                i.attr.nlink.saturating_sub(1)
            };
            i.attr.ctime = now();
        }
        self.reap(ino);
    }

    /// An entry handed to the kernel: one more reference.
    fn looked_up(&mut self, ino: u64) -> Result<FileAttr, Errno> {
        let i = self.get_mut(ino)?;
        i.lookups += 1;
        Ok(i.attr)
    }

    /// Drops an inode with no name and no kernel reference left.
    fn reap(&mut self, ino: u64) {
        let gone = self
            .inodes
            .get(&ino)
            .is_some_and(|i| ino != ROOT && i.lookups == 0 && i.attr.nlink == 0);
        if gone {
            if let Some(i) = self.inodes.remove(&ino) {
                self.bytes -= i.data.len() as u64;
            }
        }
    }
    /// Resizes a file's data within `MAX_BYTES`.
    fn resize(&mut self, ino: u64, size: u64) -> Result<(), Errno> {
        let old = self.get(ino)?.data.len() as u64;
        if size > old && self.bytes + (size - old) > MAX_BYTES {
            return Err(Errno::ENOSPC);
        }
        let len = usize::try_from(size).map_err(|_| Errno::EFBIG)?;
        let i = self.get_mut(ino)?;
        i.data.resize(len, 0);
        set_size(&mut i.attr, size);
        self.bytes = self.bytes - old + size;
        Ok(())
    }

    /// Writes `bytes` at byte `offset` of file `ino`, growing it to hold them; its inode,
    /// for the times.
    fn write_at(&mut self, ino: u64, offset: u64, bytes: &[u8]) -> Result<&mut Inode, Errno> {
        let end = offset.checked_add(bytes.len() as u64).ok_or(Errno::EFBIG)?;
        if end > self.get(ino)?.data.len() as u64 {
            self.resize(ino, end)?;
        }
        let at = usize::try_from(offset).map_err(|_| Errno::EFBIG)?;
        let i = self.get_mut(ino)?;
        if let Some(dst) = i.data.get_mut(at..at + bytes.len()) {
            dst.copy_from_slice(bytes);
        }
        Ok(i)
    }
}

impl MemFs {
    fn new(transport: Transport, work: Duration) -> MemFs {
        let mut tree = Tree::default();
        let root = new_attr(ROOT, FileType::Directory, 0o755, 0, 0);
        tree.inodes.insert(
            ROOT,
            Inode {
                attr: root,
                data: Vec::new(),
                entries: BTreeMap::new(),
                xattrs: BTreeMap::new(),
                lookups: 1,
            },
        );
        MemFs {
            transport,
            work,
            tree: Mutex::new(tree),
            next_ino: AtomicU64::new(ROOT + 1),
            counts: Arc::new(OnceLock::new()),
        }
    }

    /// The tree, for one request (each takes it once), after the request's `work`.
    fn lock(&self) -> MutexGuard<'_, Tree> {
        if !self.work.is_zero() {
            let start = std::time::Instant::now();
            while start.elapsed() < self.work {
                std::hint::spin_loop();
            }
        }
        self.tree.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A new inode named `name` in `parent`, owned by the caller (the group of a set-group-ID
    /// directory), its mode under the umask (DONT_MASK leaves that to us).
    fn make(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        target: Option<&[u8]>,
    ) -> Result<FileAttr, Errno> {
        let kind = kind_of(mode)?;
        let mut t = self.lock();
        let p = t.dir(parent.0)?;
        if p.entries.contains_key(name) {
            return Err(Errno::EEXIST);
        }
        let gid = if p.attr.perm & 0o2000 != 0 {
            p.attr.gid
        } else {
            req.gid()
        };
        let ino = self.next_ino.fetch_add(1, Ordering::Relaxed);
        let mut attr = new_attr(ino, kind, (mode & !umask & 0o7777) as u16, req.uid(), gid);
        let data = target.map(<[u8]>::to_vec).unwrap_or_default();
        set_size(&mut attr, data.len() as u64);
        t.bytes += data.len() as u64;
        t.inodes.insert(
            ino,
            Inode {
                attr,
                data,
                entries: BTreeMap::new(),
                xattrs: BTreeMap::new(),
                lookups: 1,
            },
        );
        let p = t.get_mut(parent.0)?;
        p.entries.insert(name.to_owned(), ino);
        if kind == FileType::Directory {
            p.attr.nlink += 1;
        }
        t.touch_dir(parent.0);
        Ok(attr)
    }

    fn remove(&self, parent: INodeNo, name: &OsStr, dir: bool) -> Result<(), Errno> {
        let mut t = self.lock();
        let ino = t.child(parent.0, name)?;
        let i = t.get(ino)?;
        match (dir, i.attr.kind == FileType::Directory) {
            (true, false) => return Err(Errno::ENOTDIR),
            (false, true) => return Err(Errno::EISDIR),
            (true, true) if !i.entries.is_empty() => return Err(Errno::ENOTEMPTY),
            _ => {}
        }
        let p = t.get_mut(parent.0)?;
        p.entries.remove(name);
        if dir {
            p.attr.nlink -= 1;
        }
        t.touch_dir(parent.0);
        t.drop_link(ino);
        Ok(())
    }

    fn xattr_reply(reply: ReplyXattr, size: u32, v: &[u8]) {
        if size == 0 {
            reply.size(v.len() as u32);
        } else if v.len() > size as usize {
            reply.error(Errno::ERANGE);
        } else {
            reply.data(v);
        }
    }

    fn requests_json(&self) -> Vec<u8> {
        let by_kind: serde_json::Map<String, serde_json::Value> = self
            .counts
            .get()
            .map(|c| c.snapshot())
            .unwrap_or_default()
            .into_iter()
            .map(|(k, n)| (k, n.into()))
            .collect();
        serde_json::Value::Object(by_kind).to_string().into_bytes()
    }
}

const ACL_ACCESS: &[u8] = b"system.posix_acl_access";

/// The permission bits an access ACL (the kernel's xattr form: a 4-byte version 2, then
/// 8-byte entries of tag, permissions and id) gives a file, and whether it says more than
/// the bits can (named users or groups).
fn acl_mode(v: &[u8]) -> Option<(u16, bool)> {
    let (head, entries) = v.split_at_checked(4)?;
    if head != [2, 0, 0, 0] || entries.len() % 8 != 0 {
        return None;
    }
    let (mut user, mut group, mut mask, mut other) = (None, None, None, None);
    let mut extended = false;
    for e in entries.chunks_exact(8) {
        let tag = u16::from_le_bytes([*e.first()?, *e.get(1)?]);
        let perm = u16::from_le_bytes([*e.get(2)?, *e.get(3)?]) & 7;
        match tag {
            0x01 => user = Some(perm),
            0x04 => group = Some(perm),
            0x10 => mask = Some(perm),
            0x20 => other = Some(perm),
            0x02 | 0x08 => extended = true,
            _ => return None,
        }
    }
    let group = mask.or(group)?;
    Some((user? << 6 | group << 3 | other?, extended || mask.is_some()))
}

fn done(reply: ReplyEmpty, r: Result<(), Errno>) {
    match r {
        Ok(()) => reply.ok(),
        Err(e) => reply.error(e),
    }
}

fn written(reply: ReplyWrite, r: Result<u32, Errno>) {
    match r {
        Ok(n) => reply.written(n),
        Err(e) => reply.error(e),
    }
}

fn entry(reply: ReplyEntry, r: Result<FileAttr, Errno>) {
    match r {
        Ok(a) => reply.entry(&TTL, &a, Generation(0)),
        Err(e) => reply.error(e),
    }
}

impl Filesystem for MemFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        let _ = config.set_max_write(MAX_IO);
        let _ = config.set_max_readahead(MAX_IO);
        let _ = config.set_max_background(MAX_BACKGROUND);
        let _ = config.set_congestion_threshold(MAX_BACKGROUND / 4 * 3);
        for flag in [
            InitFlags::FUSE_POSIX_ACL,
            InitFlags::FUSE_DONT_MASK,
            InitFlags::FUSE_DO_READDIRPLUS,
            InitFlags::FUSE_READDIRPLUS_AUTO,
            InitFlags::FUSE_PARALLEL_DIROPS,
            InitFlags::FUSE_CACHE_SYMLINKS,
            InitFlags::FUSE_HANDLE_KILLPRIV_V2,
            InitFlags::FUSE_WRITEBACK_CACHE,
        ] {
            if config.add_capabilities(flag).is_err() {
                eprintln!("memfs: the kernel does not offer {flag:?}");
            }
        }
        if self.transport != Transport::Dev
            && config
                .add_capabilities(InitFlags::FUSE_OVER_IO_URING)
                .is_err()
        {
            eprintln!("memfs: the kernel does not offer FUSE_OVER_IO_URING");
        }
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let mut t = self.lock();
        let r = t.child(parent.0, name).and_then(|ino| t.looked_up(ino));
        entry(reply, r)
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        let mut t = self.lock();
        if let Some(i) = t.inodes.get_mut(&ino.0) {
            i.lookups = i.lookups.saturating_sub(nlookup);
        }
        t.reap(ino.0);
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.lock().get(ino.0) {
            Ok(i) => reply.attr(&TTL, &i.attr),
            Err(e) => reply.error(e),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
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
        let mut t = self.lock();
        let run = |t: &mut Tree| -> Result<FileAttr, Errno> {
            if let Some(size) = size {
                t.resize(ino.0, size)?;
            }
            let now = now();
            let when = |x: TimeOrNow| match x {
                TimeOrNow::SpecificTime(s) => s,
                TimeOrNow::Now => now,
            };
            let a = &mut t.get_mut(ino.0)?.attr;
            if let Some(m) = mode {
                a.perm = (m & 0o7777) as u16;
            }
            if let Some(u) = uid {
                a.uid = u;
            }
            if let Some(g) = gid {
                a.gid = g;
            }
            if let Some(x) = atime {
                a.atime = when(x);
            }
            if let Some(x) = mtime {
                a.mtime = when(x);
            }
            a.ctime = ctime.unwrap_or(now);
            Ok(*a)
        };
        match run(&mut t) {
            Ok(a) => reply.attr(&TTL, &a),
            Err(e) => reply.error(e),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        match self.lock().get(ino.0) {
            Ok(i) => reply.data(&i.data),
            Err(e) => reply.error(e),
        }
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        _rdev: u32,
        reply: ReplyEntry,
    ) {
        entry(reply, self.make(req, parent, name, mode, umask, None))
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
        let mode = (mode & 0o7777) | 0o040000;
        entry(reply, self.make(req, parent, name, mode, umask, None))
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        done(reply, self.remove(parent, name, false))
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        done(reply, self.remove(parent, name, true))
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
        entry(
            reply,
            self.make(req, parent, link_name, 0o120777, 0, Some(target)),
        )
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        if !flags.is_empty() {
            return reply.error(Errno::EINVAL);
        }
        let mut t = self.lock();
        let run = |t: &mut Tree| -> Result<(), Errno> {
            let ino = t.child(parent.0, name)?;
            let is_dir = t.get(ino)?.attr.kind == FileType::Directory;
            t.dir(newparent.0)?;
            if let Ok(old) = t.child(newparent.0, newname) {
                if old == ino {
                    return Ok(());
                }
                let o = t.get(old)?;
                match (is_dir, o.attr.kind == FileType::Directory) {
                    (true, false) => return Err(Errno::ENOTDIR),
                    (false, true) => return Err(Errno::EISDIR),
                    (true, true) if !o.entries.is_empty() => return Err(Errno::ENOTEMPTY),
                    _ => {}
                }
                if is_dir {
                    t.get_mut(newparent.0)?.attr.nlink -= 1;
                }
                t.drop_link(old);
            }
            t.get_mut(parent.0)?.entries.remove(name);
            t.get_mut(newparent.0)?
                .entries
                .insert(newname.to_owned(), ino);
            if is_dir && parent != newparent {
                t.get_mut(parent.0)?.attr.nlink -= 1;
                t.get_mut(newparent.0)?.attr.nlink += 1;
            }
            t.touch_dir(parent.0);
            t.touch_dir(newparent.0);
            t.get_mut(ino)?.attr.ctime = now();
            Ok(())
        };
        done(reply, run(&mut t))
    }

    fn link(
        &self,
        _req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let mut t = self.lock();
        let run = |t: &mut Tree| -> Result<FileAttr, Errno> {
            if t.dir(newparent.0)?.entries.contains_key(newname) {
                return Err(Errno::EEXIST);
            }
            if t.get(ino.0)?.attr.kind == FileType::Directory {
                return Err(Errno::EPERM);
            }
            t.get_mut(newparent.0)?
                .entries
                .insert(newname.to_owned(), ino.0);
            t.touch_dir(newparent.0);
            let a = &mut t.get_mut(ino.0)?.attr;
            a.nlink += 1;
            a.ctime = now();
            t.looked_up(ino.0)
        };
        entry(reply, run(&mut t))
    }

    fn open(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        match self.lock().get(ino.0) {
            Ok(_) => reply.opened(FileHandle(0), FopenFlags::FOPEN_KEEP_CACHE),
            Err(e) => reply.error(e),
        }
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
        let t = self.lock();
        match t.get(ino.0) {
            Ok(i) => {
                let from = usize::try_from(offset)
                    .unwrap_or(usize::MAX)
                    .min(i.data.len());
                let to = from.saturating_add(size as usize).min(i.data.len());
                reply.data(i.data.get(from..to).unwrap_or(&[]));
            }
            Err(e) => reply.error(e),
        }
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let mut t = self.lock();
        let run = |t: &mut Tree| -> Result<u32, Errno> {
            let i = t.write_at(ino.0, offset, data)?;
            // A write from the kernel's page cache leaves the times to the kernel.
            if !write_flags.contains(WriteFlags::FUSE_WRITE_CACHE) {
                let now = now();
                i.attr.mtime = now;
                i.attr.ctime = now;
            }
            Ok(data.len() as u32)
        };
        written(reply, run(&mut t))
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        // As uf2fs: nothing to flush, and the kernel stops sending flushes.
        reply.error(Errno::ENOSYS);
    }

    fn fsync(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        match self.lock().dir(ino.0) {
            Ok(_) => reply.opened(FileHandle(0), FopenFlags::empty()),
            Err(e) => reply.error(e),
        }
    }

    /// Entries at offsets 1 (".") and 2 (".."), then the names in order from 3.
    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let t = self.lock();
        let entries = match t.entries_from(ino.0, offset) {
            Ok(e) => e,
            Err(e) => return reply.error(e),
        };
        for (next, child, name) in entries {
            let kind = t.get(child).map_or(FileType::RegularFile, |c| c.attr.kind);
            if reply.add(INodeNo(child), next, kind, name) {
                break;
            }
        }
        reply.ok();
    }

    fn readdirplus(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectoryPlus,
    ) {
        let mut t = self.lock();
        let entries = match t.entries_from(ino.0, offset) {
            Ok(e) => e,
            Err(e) => return reply.error(e),
        };
        for (next, child, name) in entries {
            let Ok(c) = t.get(child) else { continue };
            if reply.add(INodeNo(child), next, &name, &TTL, &c.attr, Generation(0)) {
                break;
            }
            // The kernel takes a reference for every entry but "." and "..".
            if next > 2 {
                let _ = t.looked_up(child);
            }
        }
        reply.ok();
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let t = self.lock();
        let (blocks, used) = (MAX_BYTES / 4096, t.bytes / 4096);
        reply.statfs(
            blocks,
            blocks - used,
            blocks - used,
            1 << 24,
            (1 << 24) - t.inodes.len() as u64,
            4096,
            255,
            4096,
        );
    }

    fn setxattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        name: &OsStr,
        value: &[u8],
        _flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        let mut t = self.lock();
        let r = t.get_mut(ino.0).and_then(|i| {
            // POSIX_ACL leaves the mode to us: an access ACL sets it, and one the mode
            // says all of is not kept.
            if name.as_bytes() == ACL_ACCESS {
                let (perm, extended) = acl_mode(value).ok_or(Errno::EINVAL)?;
                i.attr.perm = (i.attr.perm & !0o777) | perm;
                i.attr.ctime = now();
                if !extended {
                    i.xattrs.remove(name);
                    return Ok(());
                }
            }
            i.xattrs.insert(name.to_owned(), value.to_vec());
            Ok(())
        });
        done(reply, r)
    }

    fn getxattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        if ino.0 == ROOT && name.as_bytes() == REQUESTS_XATTR {
            return Self::xattr_reply(reply, size, &self.requests_json());
        }
        let t = self.lock();
        match t.get(ino.0).map(|i| i.xattrs.get(name)) {
            Ok(Some(v)) => Self::xattr_reply(reply, size, v),
            Ok(None) => reply.error(Errno::ENODATA),
            Err(e) => reply.error(e),
        }
    }

    fn listxattr(&self, _req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        let t = self.lock();
        match t.get(ino.0) {
            Ok(i) => {
                let mut all = Vec::new();
                for n in i.xattrs.keys() {
                    all.extend_from_slice(n.as_bytes());
                    all.push(0);
                }
                Self::xattr_reply(reply, size, &all)
            }
            Err(e) => reply.error(e),
        }
    }

    fn removexattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let mut t = self.lock();
        let r = t
            .get_mut(ino.0)
            .and_then(|i| i.xattrs.remove(name).map(|_| ()).ok_or(Errno::ENODATA));
        done(reply, r)
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        match self.make(req, parent, name, mode, umask, None) {
            Ok(a) => reply.created(
                &TTL,
                &a,
                Generation(0),
                FileHandle(0),
                FopenFlags::FOPEN_KEEP_CACHE,
            ),
            Err(e) => reply.error(e),
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
        let mut t = self.lock();
        let run = |t: &mut Tree| -> Result<u32, Errno> {
            let src = &t.get(ino_in.0)?.data;
            let from = usize::try_from(offset_in)
                .unwrap_or(usize::MAX)
                .min(src.len());
            let want = usize::try_from(len.min(u64::from(u32::MAX) & !0xfff)).unwrap_or(0);
            let chunk = src
                .get(from..from.saturating_add(want).min(src.len()))
                .unwrap_or(&[])
                .to_vec();
            let dst = t.write_at(ino_out.0, offset_out, &chunk)?;
            let now = now();
            dst.attr.mtime = now;
            dst.attr.ctime = now;
            Ok(chunk.len() as u32)
        };
        written(reply, run(&mut t))
    }
}

/// Serves a memfs on `mountpoint` until it is unmounted, with `threads` request threads and
/// the transport settings of `uf2fs mount` (its defaults with `Transport::Uring`).
pub fn serve(
    mountpoint: &Path,
    threads: usize,
    transport: Transport,
    work: Duration,
) -> Result<(), String> {
    let fs = MemFs::new(transport, work);
    let counts = fs.counts.clone();
    let mut config = Config::default();
    config.mount_options = vec![
        MountOption::FSName("memfs".into()),
        MountOption::Subtype("memfs".into()),
        MountOption::DefaultPermissions,
        MountOption::RW,
        MountOption::Dev,
        MountOption::Suid,
    ];
    config.acl = SessionACL::All;
    config.n_threads = Some(threads);
    config.clone_fd = true;
    config.io_uring_yield = transport == Transport::Uring;
    let session = Session::new(fs, mountpoint, &config)
        .map_err(|e| format!("mounting memfs on {}: {e}", mountpoint.display()))?;
    let _ = counts.set(session.request_counts());
    session.run().map_err(|e| format!("memfs: {e}"))
}
