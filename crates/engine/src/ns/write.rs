//! Changing the tree: new inodes, directory entries, file data. Every change edits a copy of
//! a node block and leaves it dirty (written at the next checkpoint); data blocks are written
//! at once, out of place, into their log, and the block they replace is invalidated.
//!
//! New inodes get what Linux 6.1 gives them: extra size 36 (with extra_attr), an inline xattr
//! area of 50 words, inline data for regular files and symlinks, inline dentries (with '.'
//! and '..') for directories. A directory whose inline area is full is converted to one
//! dentry block at level 0; a block directory grows by hash level. Writes that outgrow the
//! inline area move the inline bytes to block 0 first.
//!
//! All changes run under the write-state lock, one at a time (see docs/design.md, Locking).

use crate::error::{Error, Result};
use crate::node::node_log;
use crate::node::Expect;
use crate::ns::edit::{fix_checksum, get32, now, put, reparse, Editing};
use crate::ns::quota_book::Charge;
use crate::space::Log;
use crate::state::WriteState;
use crate::vol::Fs;
use std::collections::BTreeMap;
use uf2fs_format::dentry::{
    blocks_per_bucket, bucket_block, buckets_at, inline_geometry, slots_for, DIR_ENTRY_SIZE,
    NR_DENTRY_IN_BLOCK, SLOT_LEN,
};
use uf2fs_format::inode::{
    iflags, inline_flags, FileType, Inode, I_ADDR_OFFSET, I_NID_OFFSET, MAX_DIR_HASH_DEPTH,
    MAX_NAME_LEN,
};
use uf2fs_format::node::{entry, is_indirect, ofs, COLD_BIT, FOOTER_OFFSET, OFFSET_BIT_SHIFT};
use uf2fs_format::summary::RawSummary;
use uf2fs_format::superblock::feature;
use uf2fs_format::{Block, BLOCK_SIZE, NEW_ADDR, NULL_ADDR};

/// Attributes a new inode starts with.
#[derive(Debug, Clone, Copy)]
pub struct NewInode {
    pub mode: u16,
    pub uid: u32,
    pub gid: u32,
    pub rdev: (u32, u32),
}

impl Fs {
    /// Under the write lock, before anything changes: `ino`, a node id the kernel holds, may
    /// have been freed since it was looked up (unlinked or renamed over by another process
    /// while not open). That is `NotFound` (ENOENT) for this request, not a corrupt image
    /// that fails the volume.
    pub(crate) fn live(&self, ino: u32) -> Result<()> {
        if self.is_inode(ino)? {
            Ok(())
        } else {
            Err(Error::NotFound)
        }
    }

    pub(crate) fn edit(&self, ino: u32) -> Result<Editing> {
        let shared = self.vol().nodes.read(
            &*self.vol().dev,
            &self.vol().nat,
            ino,
            Expect { ino, ofs: 0 },
        )?;
        // The parse shares the cached block; the edit's first write makes its own copy.
        let block = crate::node::NodeBuf::new(shared.clone());
        let inode = Inode::parse_shared(shared, ino, &self.vol().sb)?;
        // Only an image that keeps quota needs the inode's charge.
        let was = self
            .vol()
            .quota
            .is_some()
            .then(|| Charge::of_block(&block[..], inode.projid.is_some()));
        Ok(Editing {
            ino,
            block,
            inode,
            now: self.clock(),
            was,
        })
    }

    /// Marks `ino` changed in a way roll-forward cannot replay (a rename, link or unlink, freed
    /// nodes, xattrs): its next fsync writes a checkpoint, and this change counts as one to
    /// `ino` for merging, even when its inode block is not edited.
    pub(crate) fn needs_checkpoint(&self, ws: &mut WriteState, ino: u32) {
        ws.sync.needs_cp.insert(ino);
        self.note_change(ino);
    }

    /// Records that `ino` changed in the change now running (see `Vol::last_change`).
    pub(crate) fn note_change(&self, ino: u32) {
        let seq = self
            .vol()
            .change_seq
            .load(std::sync::atomic::Ordering::SeqCst);
        if let Ok(mut l) = self.vol().last_change.lock() {
            l.insert(ino, seq);
        }
    }

    pub(crate) fn commit(&self, mut e: Editing) -> Result<()> {
        fix_checksum(self, &mut e.block);
        let log = if e.inode.file_type == FileType::Directory {
            Log::HotNode
        } else {
            Log::WarmNode
        };
        if self.vol().quota.is_some() {
            let now = Charge::of_block(&e.block[..], e.inode.projid.is_some());
            self.charge_quota(e.ino, e.was, Some(now))?;
        }
        // The new block first, then the cache entry goes: a reader that fetched the old block
        // before this point finds the epoch moved and does not cache what it read.
        let r = self.vol().nodes.put_dirty(e.ino, e.block, log);
        self.vol().forget_inode(e.ino);
        self.note_change(e.ino);
        r
    }

    /// Adds `delta` to the link count of `ino`.
    pub(crate) fn adjust_links(&self, ino: u32, delta: i32) -> Result<()> {
        let mut e = self.edit(ino)?;
        e.set_links(e.links().saturating_add_signed(delta));
        self.commit(e)
    }

    /// The dirty-node budget. Past half of it, with no checkpoint being written, the change
    /// asks the background checkpoint thread for one and goes on; past all of it (no such
    /// thread, or one that fell behind) the change itself writes the checkpoint once it is
    /// complete (`changing`). Either way the dirty nodes stay within the memory bound.
    fn maybe_checkpoint(&self, ws: &mut WriteState) -> Result<()> {
        let v = self.vol();
        let dirty = v.nodes.dirty_count();
        if dirty > v.dirty_budget {
            ws.cp.wanted = true;
        } else if dirty > v.dirty_budget / 2
            && ws.cp.pending.is_none()
            && v.budget_checkpoints.running()
            && !v.budget_checkpoints.asked()
        {
            v.budget_checkpoints.ask();
        }
        Ok(())
    }

    /// A new inode block with Linux's defaults.
    /// `flags` is the new `i_flags` (what the inode inherits from its directory).
    fn new_inode_block(
        &self,
        nid: u32,
        parent: u32,
        name: &[u8],
        a: NewInode,
        flags: u32,
    ) -> Result<Editing> {
        let sb = &self.vol().sb;
        let ft = FileType::from_mode(a.mode)
            .ok_or(Error::InvalidArgument("unknown file type in mode"))?;
        let mut b = [0u8; BLOCK_SIZE];
        let (s, ns) = self.clock();
        put(&mut b, 0, &a.mode.to_le_bytes());
        put(&mut b, 4, &a.uid.to_le_bytes());
        put(&mut b, 8, &a.gid.to_le_bytes());
        put(
            &mut b,
            12,
            &(if ft == FileType::Directory { 2u32 } else { 1 }).to_le_bytes(),
        );
        put(&mut b, 24, &1u64.to_le_bytes());
        for at in [32, 40, 48] {
            put(&mut b, at, &s.to_le_bytes());
        }
        for at in [56, 60, 64] {
            put(&mut b, at, &ns.to_le_bytes());
        }
        // A frozen clock makes reproducible images: i_generation 0 then, as sload.f2fs.
        let generation = if self.vol().options.fixed_time.is_some() {
            0
        } else {
            rand_u32()
        };
        put(&mut b, 68, &generation.to_le_bytes());
        put(&mut b, 80, &flags.to_le_bytes());
        put(&mut b, 84, &parent.to_le_bytes());
        put(&mut b, 88, &(name.len() as u32).to_le_bytes());
        put(&mut b, 92, name);
        let mut inline = inline_flags::INLINE_XATTR;
        let mut extra_words = 0usize;
        if sb.has(feature::EXTRA_ATTR) {
            inline |= inline_flags::EXTRA_ATTR;
            put(&mut b, I_ADDR_OFFSET, &36u16.to_le_bytes());
            if sb.has(feature::FLEXIBLE_INLINE_XATTR) {
                put(&mut b, I_ADDR_OFFSET + 2, &50u16.to_le_bytes());
            }
            if sb.has(feature::INODE_CRTIME) {
                put(&mut b, I_ADDR_OFFSET + 12, &s.to_le_bytes());
                put(&mut b, I_ADDR_OFFSET + 20, &ns.to_le_bytes());
            }
            extra_words = 9;
        }
        match ft {
            FileType::Regular | FileType::Symlink if self.vol().options.inline_data => {
                inline |= inline_flags::INLINE_DATA;
            }
            FileType::Regular | FileType::Symlink => {}
            FileType::Directory => {
                inline |= inline_flags::INLINE_DENTRY;
                put(&mut b, 72, &1u32.to_le_bytes());
            }
            FileType::CharDevice | FileType::BlockDevice => {
                let (maj, min) = a.rdev;
                let slot = I_ADDR_OFFSET + 4 * extra_words;
                if maj < 256 && min < 256 {
                    put(&mut b, slot, &((maj << 8) | min).to_le_bytes());
                } else {
                    let new = (min & 0xff) | (maj << 8) | ((min & !0xff) << 12);
                    put(&mut b, slot + 4, &new.to_le_bytes());
                }
            }
            FileType::Fifo | FileType::Socket => {}
        }
        b[3] = inline;
        put(&mut b, FOOTER_OFFSET, &nid.to_le_bytes());
        put(&mut b, FOOTER_OFFSET + 4, &nid.to_le_bytes());
        let cold = if ft == FileType::Directory {
            0
        } else {
            COLD_BIT
        };
        put(&mut b, FOOTER_OFFSET + 8, &cold.to_le_bytes());
        let inode = reparse(self, nid, &mut b)?;
        let mut e = Editing {
            ino: nid,
            block: b.into(),
            inode,
            now: (s, ns),
            was: None,
        };
        if ft == FileType::Directory {
            // Inline '.' and '..' in slots 0 and 1; i_size is the inline area.
            let r = e.inline_range();
            let size = r.len() as u64;
            if let Some(area) = e.block.get_mut(r) {
                insert_into_area(area, true, b".", nid, 0, FileType::Directory);
                insert_into_area(area, true, b"..", parent, 0, FileType::Directory);
            }
            e.set_size(size);
        }
        Ok(e)
    }

    /// Makes a new inode named `name` in directory `parent`.
    pub fn create_node(&self, parent: u32, name: &[u8], a: NewInode) -> Result<u32> {
        self.create_node_with_xattrs(parent, name, a, &[])
    }

    /// Makes a new inode with xattrs (such as the ACLs it inherits from its directory) in one
    /// change: no checkpoint and no crash sees it without them.
    pub fn create_node_with_xattrs(
        &self,
        parent: u32,
        name: &[u8],
        a: NewInode,
        xattrs: &[(&[u8], &[u8])],
    ) -> Result<u32> {
        check_name(name)?;
        let xattrs = xattrs
            .iter()
            .map(|(n, v)| crate::ns::xattr_write::prepare(n, Some(v)))
            .collect::<Result<Vec<_>>>()?;
        // Checked before anything changes (the inline area is not counted: conservative).
        if crate::ns::xattr_write::encoded_len(&xattrs) + 4 > uf2fs_format::xattr::XATTR_NODE_DATA {
            return Err(Error::NoRoom(
                "the new inode's xattrs do not fit in an xattr node",
            ));
        }
        self.changing(8 + 2 * xattrs.len() as u64, |ws| {
            let nid = self.make_inode_in(ws, parent, name, a, &xattrs)?;
            self.maybe_checkpoint(ws)?;
            Ok(nid)
        })
    }

    /// The body of a create, inside a running change.
    pub(crate) fn make_inode_in(
        &self,
        ws: &mut WriteState,
        parent: u32,
        name: &[u8],
        a: NewInode,
        xattrs: &[crate::ns::xattr_write::XattrChange],
    ) -> Result<u32> {
        check_name(name)?;
        let pdir = self.inode(parent)?;
        if pdir.file_type != FileType::Directory {
            return Err(Error::NotADirectory);
        }
        match self.lookup(parent, name) {
            Ok(_) => return Err(Error::Exists),
            Err(Error::NotFound) => {}
            Err(e) => return Err(e),
        }
        // No name can be made in an encrypted directory without its key (Linux: ENOKEY).
        self.vol().refuse_encrypted_dir(&pdir)?;
        // A new directory inherits its parent's casefold flag (Linux masks it off the other
        // file types).
        let new_ft = FileType::from_mode(a.mode);
        let mut flags = if new_ft == Some(FileType::Directory) {
            pdir.flags & iflags::CASEFOLD
        } else {
            0
        };
        // Project quota: a directory marked PROJINHERIT passes its project id (and the mark,
        // to directories and regular files) to what is made in it, as Linux does.
        let inherit_project = self.vol().sb.has(feature::PRJQUOTA)
            && pdir.flags & iflags::PROJINHERIT != 0
            && pdir.projid.is_some();
        if inherit_project && matches!(new_ft, Some(FileType::Directory | FileType::Regular)) {
            flags |= iflags::PROJINHERIT;
        }
        let compress = self.compress_new(&pdir, new_ft, name);
        if compress == Some(false) {
            flags |= iflags::NOCOMP;
        }
        let nid = self.vol().nat.alloc(&*self.vol().dev)?;
        let mut e = self.new_inode_block(nid, parent, name, a, flags)?;
        if compress == Some(true) {
            self.set_compress_context(ws, &mut e)?;
        }
        if let (true, Some(projid), Some(_)) = (inherit_project, pdir.projid, e.inode.projid) {
            e.set_u32(I_ADDR_OFFSET + 4, projid);
        }
        let ft = e.inode.file_type;
        self.vol().nat.set(
            nid,
            uf2fs_format::nat::NatEntry {
                version: self.vol().nat.entry(&*self.vol().dev, nid)?.version,
                ino: nid,
                block_addr: NEW_ADDR,
            },
        )?;
        ws.counts.valid_nodes += 1;
        ws.counts.valid_inodes += 1;
        ws.counts.valid_blocks += 1;
        ws.sync.born.insert(nid);
        self.commit(e)?;
        if ft == FileType::Directory && !self.vol().options.inline_dentry {
            // noinline_dentry: the new directory's '.' and '..' go to dentry block 0.
            let mut d = self.edit(nid)?;
            self.convert_inline_dir(ws, &mut d)?;
            self.commit(d)?;
        }
        self.add_entry(ws, parent, name, nid, ft)?;
        if ft == FileType::Directory {
            self.adjust_links(parent, 1)?;
        }
        for x in xattrs {
            self.apply_xattr(ws, nid, x, crate::ns::xattr_write::XATTR_CREATE)?;
        }
        Ok(nid)
    }

    /// Adds a hard link `name` in `parent` to the existing non-directory `ino`.
    pub fn link(&self, ino: u32, parent: u32, name: &[u8]) -> Result<()> {
        check_name(name)?;
        self.changing(4, |ws| {
            self.live(ino)?;
            let target = self.inode(ino)?;
            if target.file_type == FileType::Directory {
                return Err(Error::NotPermitted(
                    "hard links to directories are not allowed",
                ));
            }
            match self.lookup(parent, name) {
                Ok(_) => return Err(Error::Exists),
                Err(Error::NotFound) => {}
                Err(e) => return Err(e),
            }
            self.vol().refuse_encrypted_dir(&*self.inode(parent)?)?;
            self.add_entry(ws, parent, name, ino, target.file_type)?;
            self.needs_checkpoint(ws, ino);
            let mut t = self.edit(ino)?;
            t.set_links(t.links() + 1);
            t.touch(false);
            self.commit(t)
        })
    }

    /// Sets owner, permission bits and times of `ino` (times as (seconds, nanoseconds)).
    pub fn set_attr(
        &self,
        ino: u32,
        perm: Option<u16>,
        owner: Option<(u32, u32)>,
        atime: Option<(i64, u32)>,
        mtime: Option<(i64, u32)>,
    ) -> Result<()> {
        self.set_attr_at(ino, perm, owner, atime, mtime, None)
    }

    /// [`Fs::set_attr`], with the change time given instead of taken from the clock: a FUSE
    /// kernel with the writeback cache keeps a file's times while it writes pages, and hands
    /// over the change time it stamped (so that a remount shows what `stat` showed).
    pub fn set_attr_at(
        &self,
        ino: u32,
        perm: Option<u16>,
        owner: Option<(u32, u32)>,
        atime: Option<(i64, u32)>,
        mtime: Option<(i64, u32)>,
        ctime: Option<(i64, u32)>,
    ) -> Result<()> {
        let times = Times {
            atime,
            mtime,
            ctime,
        };
        self.change_attrs(ino, perm, owner, times, false)
            .map(|_| ())
    }

    /// Stores the modification and change times a FUSE kernel kept for `ino` (writeback
    /// cache) and now sends on their own, unless both are older than the last ones a caller
    /// gave `ino` (a SETATTR with a change time, or an earlier flush): such a SETATTR was
    /// overtaken by a newer one. The kernel sends a file's kept times from its writeback (not
    /// under the file's lock) while a truncation or a `touch` of the same file may send newer
    /// ones; served by two threads, the older could land last and the image keep it while
    /// `stat` showed the newer (the clean-clone CI run's `posix_judges` saw an fsx file's
    /// mtime 4.7 ms older after the unmount). A time set back on purpose (`touch -d`) comes
    /// with a new change time, so it is stored. Times the engine stamped itself (a
    /// fallocate's) do not count: the kernel did not show them, and its flush replaces them
    /// (stop 48). Returns whether the times were stored.
    pub fn set_kept_times(&self, ino: u32, mtime: (i64, u32), ctime: (i64, u32)) -> Result<bool> {
        let times = Times {
            atime: None,
            mtime: Some(mtime),
            ctime: Some(ctime),
        };
        self.change_attrs(ino, None, None, times, true)
    }

    /// [`Fs::set_attr_at`] and [`Fs::set_kept_times`]: with `unless_overtaken`, nothing is
    /// stored when both the given modification and change times are older than the last
    /// ones given for the inode (`WriteState::given_times`; returns false then).
    fn change_attrs(
        &self,
        ino: u32,
        perm: Option<u16>,
        owner: Option<(u32, u32)>,
        t: Times,
        unless_overtaken: bool,
    ) -> Result<bool> {
        // An inode freed already is answered without the write lock and the room check: a
        // kernel with the writeback cache sends the times of every file it unlinks (in
        // `rm -rf`, one SETATTR per file, after its UNLINK).
        self.live(ino)?;
        self.changing(0, |ws| {
            self.live(ino)?;
            // Only times a caller gave count against a kept flush: the engine's own stamps
            // (a fallocate's, say) are not what the kernel showed, and its older flush wins
            // over them as it did before the guard (stop 48: fsx's file then read 4 ms newer
            // from the image than `stat` had shown).
            let overtaken = |&(m, c): &crate::state::GivenTimes| m > t.mtime && c > t.ctime;
            if unless_overtaken && ws.given_times.get(&ino).is_some_and(overtaken) {
                return Ok(false);
            }
            if t.ctime.is_some() {
                crate::cache::insert_bounded(
                    &mut ws.given_times,
                    crate::state::GIVEN_TIMES,
                    ino,
                    (t.mtime, t.ctime),
                );
            }
            let now = self.clock();
            let change = |b: &mut Block| attr_bytes(b, perm, owner, now, &t);
            if self.change_inode_in_place(ino, change) {
                return Ok(true);
            }
            let mut e = self.edit(ino)?;
            change(&mut e.block);
            self.commit(e)?;
            Ok(true)
        })
    }

    /// `change` made in dirty inode `ino`'s block itself rather than in a copy of it
    /// ([`Nodes::change_in_place`](crate::node::Nodes)), with what [`Fs::commit`] does after
    /// an edit: the checksum, the node's log, the parsed inode let go, the change noted.
    /// False, nothing done, when it cannot be: the inode is not dirty, someone holds its
    /// block, or the image keeps quota (whose charge follows an owner change in `commit`). In `tar -x` each file's three SETATTRs (times, owner, mode)
    /// find their inode dirty and alone: each copied its 4 KiB block before (stop 48).
    fn change_inode_in_place(&self, ino: u32, change: impl FnOnce(&mut Block)) -> bool {
        let v = self.vol();
        if v.quota.is_some() {
            return false;
        }
        // The parsed inode shares the block.
        v.forget_inode(ino);
        let changed = v.nodes.change_in_place(ino, |b| {
            change(b);
            fix_checksum(self, b);
            let mode = uf2fs_format::le16(&b[..], 0).unwrap_or(0);
            Some(if FileType::from_mode(mode) == Some(FileType::Directory) {
                Log::HotNode
            } else {
                Log::WarmNode
            })
        }) == Some(true);
        if changed {
            // After the change too: a reader that parsed the block before it must not keep
            // what it parsed.
            v.forget_inode(ino);
            self.note_change(ino);
        }
        changed
    }

    /// The inode flags as FS_IOC_GETFLAGS reports them (Linux 6.1's f2fs: the gettable
    /// `i_flags` bits, which share the FS_*_FL values, plus FS_INLINE_DATA_FL for an inode
    /// with inline data or dentries).
    pub fn fs_flags(&self, ino: u32) -> Result<u32> {
        let i = self.inode(ino)?;
        let mut f = i.flags & fs_flags::GETTABLE;
        if i.has_inline_data() || i.has_inline_dentry() {
            f |= fs_flags::INLINE_DATA;
        }
        Ok(f)
    }

    /// Sets inode flags as FS_IOC_SETFLAGS asks, with Linux 6.1's rules for what uf2fs can
    /// change today:
    /// - the casefold flag, on a directory (ENOTDIR otherwise) that is empty (ENOTEMPTY), of
    ///   an image with the casefold feature (EOPNOTSUPP);
    /// - the compression flag (`chattr +c`) on a directory or an empty regular file (EINVAL
    ///   otherwise), which then takes the mount's compression options; off again only while
    ///   a regular file has no blocks; and the no-compression flag; both need the compression
    ///   feature (EOPNOTSUPP), and not together (EINVAL).
    ///
    /// Bits Linux does not report are refused (EOPNOTSUPP); reported but unsettable ones are
    /// ignored, as there; a change to any other settable flag is refused as not supported yet.
    pub fn set_fs_flags(&self, ino: u32, flags: u32) -> Result<()> {
        if flags & !fs_flags::GETTABLE_IN != 0 {
            return Err(Error::Unsupported(format!(
                "inode flags {:#x} are not settable",
                flags & !fs_flags::GETTABLE_IN
            )));
        }
        self.changing(0, |ws| {
            self.live(ino)?;
            let i = self.inode(ino)?;
            let changed = (i.flags ^ flags) & fs_flags::SETTABLE;
            if changed == 0 {
                return Ok(());
            }
            // Linux's VFS asks fscrypt first: casefolding an encrypted directory needs its key
            // (the dirhash key is derived from it).
            if i.is_encrypted() && flags & !i.flags & iflags::CASEFOLD != 0 {
                return Err(self.vol().no_key(&i));
            }
            let compression = iflags::COMPR | iflags::NOCOMP;
            if changed & !(iflags::CASEFOLD | compression) != 0 {
                return Err(Error::Unsupported(format!(
                    "changing inode flags {:#x} is not supported yet (only casefold, compression \
                     and no-compression)",
                    changed & !(iflags::CASEFOLD | compression)
                )));
            }
            if changed & iflags::CASEFOLD != 0 {
                if !self.vol().sb.has(feature::CASEFOLD) {
                    return Err(Error::Unsupported(
                        "the image has no casefold feature (mkfs.f2fs -O casefold -C utf8)".into(),
                    ));
                }
                if i.file_type != FileType::Directory {
                    return Err(Error::NotADirectory);
                }
                if !self.readdir(ino)?.is_empty() {
                    return Err(Error::NotEmpty);
                }
            }
            if changed & compression != 0 {
                if !self.vol().sb.has(feature::COMPRESSION) {
                    return Err(Error::Unsupported(
                        "the image has no compression feature (mkfs.f2fs -O extra_attr,compression)"
                            .into(),
                    ));
                }
                if flags & compression == compression {
                    return Err(Error::InvalidArgument(
                        "the compression and no-compression flags together",
                    ));
                }
            }
            let mut e = self.edit(ino)?;
            e.set_u32(
                80,
                i.flags ^ (changed & (iflags::CASEFOLD | iflags::NOCOMP)),
            );
            if changed & iflags::COMPR != 0 {
                let regular = i.file_type == FileType::Regular;
                if flags & iflags::COMPR != 0 {
                    if !regular && i.file_type != FileType::Directory {
                        return Err(Error::InvalidArgument(
                            "only directories and regular files can be compressed",
                        ));
                    }
                    if regular && i.size > 0 {
                        return Err(Error::InvalidArgument(
                            "a file with data cannot be made compressed (only an empty one)",
                        ));
                    }
                    self.set_compress_context(ws, &mut e)?;
                } else {
                    if regular && i.blocks > 1 {
                        return Err(Error::InvalidArgument(
                            "a compressed file with blocks cannot be made plain",
                        ));
                    }
                    let now = get32(&e.block, 80);
                    e.set_u32(80, now & !iflags::COMPR);
                }
            }
            e.touch(false);
            self.commit(e)
        })
    }

    /// Sets the access time of `ino` alone (a read under relatime): the change time stays.
    pub fn set_atime(&self, ino: u32, (s, ns): (i64, u32)) -> Result<()> {
        self.changing(0, |_| {
            self.live(ino)?;
            let mut e = self.edit(ino)?;
            e.set_u64(32, s as u64);
            e.set_u32(56, ns);
            self.commit(e)
        })
    }

    pub(crate) fn add_entry(
        &self,
        ws: &mut WriteState,
        parent: u32,
        name: &[u8],
        ino: u32,
        ft: FileType,
    ) -> Result<()> {
        let hash = self.vol().dir_name(&*self.inode(parent)?, name)?.0.hash();
        self.add_entry_hashed(ws, parent, name, hash, ino, ft)
    }

    /// `add_entry` with the hash given (recovery's entries in encrypted directories, whose
    /// hash comes from the inode's record, not from the name).
    pub(crate) fn add_entry_hashed(
        &self,
        ws: &mut WriteState,
        parent: u32,
        name: &[u8],
        hash: u32,
        ino: u32,
        ft: FileType,
    ) -> Result<()> {
        let mut p = self.edit(parent)?;
        if p.inode.has_inline_dentry() {
            let r = p.inline_range();
            let done = p
                .block
                .get_mut(r)
                .is_some_and(|area| insert_into_area(area, true, name, ino, hash, ft));
            if done {
                p.touch(true);
                return self.commit(p);
            }
            self.convert_inline_dir(ws, &mut p)?;
        }
        // Level by level, the first block of the name's bucket with room.
        for level in 0..MAX_DIR_HASH_DEPTH {
            if level >= p.inode.current_depth {
                p.set_u32(72, level + 1);
                p.inode.current_depth = level + 1;
            }
            let nbucket = buckets_at(level, p.inode.dir_level);
            let first = bucket_block(level, p.inode.dir_level, u64::from(hash) % nbucket);
            for fblk in first..first + blocks_per_bucket(level) {
                let old = self.block_addr(&p, fblk)?;
                let mut b = if old == NULL_ADDR || old == NEW_ADDR {
                    std::sync::Arc::new([0u8; BLOCK_SIZE])
                } else {
                    self.vol().dentry_block(parent, fblk, old)?
                };
                // A copy (the cache's block may be in a reader's hands), changed and put back.
                let area = std::sync::Arc::make_mut(&mut b);
                if insert_into_area(area, false, name, ino, hash, ft) {
                    self.put_dentry_block(ws, &mut p, fblk, old, b)?;
                    let end = (fblk + 1) * BLOCK_SIZE as u64;
                    if p.size() < end {
                        p.set_size(end);
                    }
                    p.touch(true);
                    return self.commit(p);
                }
            }
        }
        Err(Error::NoSpace)
    }

    /// Moves an inline directory's entries into a dentry block (same slots) at level 0.
    fn convert_inline_dir(&self, ws: &mut WriteState, p: &mut Editing) -> Result<()> {
        let r = p.inline_range();
        let area = p
            .block
            .get(r.clone())
            .map(<[u8]>::to_vec)
            .unwrap_or_default();
        let (n, bitmap, reserved) = inline_geometry(area.len());
        let mut b = [0u8; BLOCK_SIZE];
        put(&mut b, 0, area.get(..bitmap).unwrap_or(&[]));
        let e0 = bitmap + reserved;
        put(
            &mut b,
            30,
            area.get(e0..e0 + n * DIR_ENTRY_SIZE).unwrap_or(&[]),
        );
        let n0 = e0 + n * DIR_ENTRY_SIZE;
        put(
            &mut b,
            30 + NR_DENTRY_IN_BLOCK * DIR_ENTRY_SIZE,
            area.get(n0..n0 + n * SLOT_LEN).unwrap_or(&[]),
        );
        if let Some(a) = p.block.get_mut(r) {
            a.fill(0);
        }
        p.set_inline(p.inline() & !inline_flags::INLINE_DENTRY);
        p.inode = reparse(self, p.ino, &mut p.block)?;
        p.set_u32(72, 1);
        p.inode.current_depth = 1;
        p.set_size(BLOCK_SIZE as u64);
        self.write_data_blocks(ws, p, Log::HotData, &BTreeMap::from([(0u64, b)]))
    }

    /// The address of file block `fblk` of the inode being edited (0 for a hole). The
    /// inode's own slots are read from the block being edited; `e.inode` is re-parsed whenever
    /// an i_nid changes, so the walk below it sees the current nodes.
    pub(crate) fn block_addr(&self, e: &Editing, fblk: u64) -> Result<u32> {
        if fblk < e.inode.addrs_in_inode() as u64 {
            return Ok(get32(&e.block, e.addr_slot(fblk as usize)));
        }
        let mut found = NULL_ADDR;
        self.vol()
            .for_each_addr(&e.inode, fblk, fblk + 1, &mut |_, a| {
                found = a;
                Ok(())
            })?;
        Ok(found)
    }

    /// Writes whole blocks at file blocks, out of place in `log`: each gets a new address in
    /// its dnode (made when missing), the old one is invalidated, the data is written.
    pub(crate) fn write_data_blocks(
        &self,
        ws: &mut WriteState,
        e: &mut Editing,
        log: Log,
        blocks: &BTreeMap<u64, Block>,
    ) -> Result<()> {
        self.write_file_blocks(ws, e, log, false, blocks.iter().map(|(f, b)| (*f, &b[..])))
    }

    /// [`Fs::write_data_blocks`] from borrowed blocks, in file order (a block shorter than
    /// BLOCK_SIZE is padded with zeros). The bytes are copied once, into the runs the device
    /// writes; the slots are set one node at a time.
    pub(crate) fn write_file_blocks<'a>(
        &self,
        ws: &mut WriteState,
        e: &mut Editing,
        log: Log,
        in_place: bool,
        blocks: impl IntoIterator<Item = (u64, &'a [u8])>,
    ) -> Result<()> {
        let blocks = blocks.into_iter().map(|(f, b)| (f, Piece::Bytes(b)));
        self.write_file_blocks_from(ws, e, log, in_place, &[], blocks)
    }

    /// [`Fs::write_file_blocks`] where a block may be the whole block at a byte offset of
    /// `source`, the buffer of a change made with [`Fs::changing_from`]. One that lies
    /// block-aligned in memory there is not copied: its run is written from `source` (with
    /// O_DIRECT where the device does that), by the change before it returns.
    fn write_file_blocks_from<'a>(
        &self,
        ws: &mut WriteState,
        e: &mut Editing,
        log: Log,
        in_place: bool,
        source: &[u8],
        blocks: impl IntoIterator<Item = (u64, Piece<'a>)>,
    ) -> Result<()> {
        // A block's bytes, and its offset in `source` if it can be written from there.
        let resolve = |piece: Piece<'a>| match piece {
            Piece::Bytes(data) => (data, None),
            Piece::Source(at) => match source.get(at..at + BLOCK_SIZE) {
                Some(data) if (source.as_ptr() as usize + at).is_multiple_of(BLOCK_SIZE) => {
                    (data, Some(at))
                }
                data => (data.unwrap_or(&[]), None),
            },
        };
        let mut blocks = blocks.into_iter().peekable();
        let count = blocks.size_hint().0;
        let mut runs = crate::data::Runs::with_capacity(count);
        // A small file written whole stays out of O_DIRECT (an iterator that does not know
        // its length counts as small: buffered is only slower, never wrong).
        runs.buffered = matches!(blocks.peek(), Some((0, _)))
            && count * BLOCK_SIZE < crate::data::SMALL_FILE_WRITE;
        // (nid, [(slot, new address)]) in the order the nodes come.
        let mut links: Vec<(u32, Vec<(usize, u32)>)> = Vec::new();
        // The previous block's (file block, node, slot, node version): the next file block
        // is usually the next slot of the same node, found without walking the tree again.
        let mut prev: Option<(u64, u32, usize, u8)> = None;
        // `data_temp=age`: a regular file's overwrite goes to the hot or the warm log by its
        // old copy's age (`space/temp.rs`); the node last read for that, by nid.
        let by_age = log == Log::WarmData
            && e.inode.file_type == FileType::Regular
            && self.vol().options.data_temp == crate::space::DataTemp::Age;
        let mut old_node: Option<(u32, std::sync::Arc<Block>)> = None;
        let push = |runs: &mut crate::data::Runs, addr: u32, data: &[u8], at| match at {
            Some(at) => runs.push_borrowed(addr, at),
            None => runs.push(addr, data),
        };
        for (fblk, piece) in blocks {
            let (data, at) = resolve(piece);
            if in_place {
                // A block on the device that no write in flight is about to replace is
                // rewritten where it is; its node does not change.
                let old = self.block_addr(e, fblk)?;
                if old != NULL_ADDR
                    && old != NEW_ADDR
                    && ws.segs.is_valid(old)
                    && !self.vol().inflight.holds(old)
                {
                    push(&mut runs, old, data, at);
                    ws.gc.stats.ipu_blocks += 1;
                    continue;
                }
            }
            let next_slot = prev.and_then(|(f, nid, index, version)| {
                let slots = if nid == e.ino {
                    e.inode.addrs_in_inode()
                } else {
                    e.inode.addrs_per_dnode() as usize
                };
                (f + 1 == fblk && index + 1 < slots).then_some((nid, index + 1, version))
            });
            let (nid, index, version) = match next_slot {
                Some(found) => found,
                None => {
                    let (nid, index) = self.ensure_dnode(ws, e, fblk)?;
                    let version = self
                        .vol()
                        .nat
                        .entry(&*self.vol().dev, nid)
                        .map(|n| n.version)
                        .unwrap_or(0);
                    (nid, index, version)
                }
            };
            prev = Some((fblk, nid, index, version));
            let log = if by_age {
                let old = match self.slot_value(e, nid, index, &mut old_node)? {
                    NULL_ADDR | NEW_ADDR => None,
                    old => Some(old),
                };
                ws.segs.user_data_log(old)
            } else {
                log
            };
            let sum = RawSummary {
                nid: nid.into(),
                version,
                ofs_in_node: (index as u16).into(),
            };
            let addr = ws.segs.alloc(log, sum, &mut |s| self.vol().read_ssa(s))?;
            push(&mut runs, addr, data, at);
            match links.last_mut() {
                Some((n, slots)) if *n == nid => slots.push((index, addr)),
                _ => links.push((nid, vec![(index, addr)])),
            }
        }
        ws.sync.data_since_flush = true;
        if !links.is_empty() {
            ws.sync.relinked.insert(e.ino);
        }
        // Readers find the blocks in memory from now on; the change's caller writes them
        // once the write lock is let go (`changing`), or a checkpoint does first. This comes
        // before the blocks are linked: `set_addr` on a dnode puts it in the node cache at
        // once, where a reader (who takes no write lock) may walk it, and an address it finds
        // there must be in flight or landed, never an unwritten block read from the device.
        let batch = std::sync::Arc::new(runs);
        self.vol().inflight.add(&batch);
        ws.deferred.push(batch);
        for (nid, slots) in links {
            for old in self.set_addrs(e, nid, &slots)? {
                if old == NULL_ADDR || old == NEW_ADDR {
                    if old == NULL_ADDR {
                        ws.counts.valid_blocks += 1;
                        e.add_blocks(1);
                    }
                } else {
                    ws.segs.invalidate(old);
                    e.drop_from_extent(old);
                }
            }
        }
        Ok(())
    }

    /// Slot `index` of node `nid` (the inode itself, or a dnode) as it stands; `node` keeps
    /// the last dnode read, so a run of slots in one node reads it once.
    fn slot_value(
        &self,
        e: &Editing,
        nid: u32,
        index: usize,
        node: &mut Option<(u32, std::sync::Arc<Block>)>,
    ) -> Result<u32> {
        if nid == e.ino {
            return Ok(get32(&e.block, e.addr_slot(index)));
        }
        let b = match node {
            Some((n, b)) if *n == nid => b,
            _ => {
                let v = self.vol();
                let (b, _) = v.nodes.get_shared(&*v.dev, &v.nat, nid, e.ino)?;
                &mut node.insert((nid, b)).1
            }
        };
        Ok(get32(b, index * 4))
    }

    /// Sets slots of node `nid` (the inode itself, or a dnode) to new addresses, the node
    /// read and put back once; returns the old values, in order.
    pub(crate) fn set_addrs(
        &self,
        e: &mut Editing,
        nid: u32,
        slots: &[(usize, u32)],
    ) -> Result<Vec<u32>> {
        if nid == e.ino {
            return Ok(slots
                .iter()
                .map(|&(index, addr)| {
                    let at = e.addr_slot(index);
                    let old = get32(&e.block, at);
                    e.set_u32(at, addr);
                    old
                })
                .collect());
        }
        let (mut b, log) =
            self.node_for_edit(nid, e.ino, e.inode.file_type == FileType::Directory)?;
        let olds = slots
            .iter()
            .map(|&(index, addr)| {
                let at = index * 4;
                let old = get32(&b, at);
                put(&mut b[..], at, &addr.to_le_bytes());
                old
            })
            .collect();
        self.vol().nodes.put_dirty(nid, b, log)?;
        Ok(olds)
    }

    /// The values of `n` slots of node `nid` (the inode itself, or a dnode) from `index` on,
    /// the node read once.
    pub(crate) fn addrs_in(
        &self,
        e: &Editing,
        nid: u32,
        index: usize,
        n: usize,
    ) -> Result<Vec<u32>> {
        if nid == e.ino {
            return Ok((index..index + n)
                .map(|i| get32(&e.block, e.addr_slot(i)))
                .collect());
        }
        let (b, _) = self.node_for_edit(nid, e.ino, e.inode.file_type == FileType::Directory)?;
        Ok((index..index + n)
            .map(|i| uf2fs_format::node::entry(&b, i as u64))
            .collect())
    }

    /// Sets slot `index` of node `nid` (the inode itself, or a dnode) to `addr`; returns the
    /// old value.
    pub(crate) fn set_addr(
        &self,
        e: &mut Editing,
        nid: u32,
        index: usize,
        addr: u32,
    ) -> Result<u32> {
        if nid == e.ino {
            let at = e.addr_slot(index);
            let old = get32(&e.block, at);
            e.set_u32(at, addr);
            return Ok(old);
        }
        let (mut b, log) =
            self.node_for_edit(nid, e.ino, e.inode.file_type == FileType::Directory)?;
        let at = index * 4;
        let old = get32(&b, at);
        put(&mut b[..], at, &addr.to_le_bytes());
        self.vol().nodes.put_dirty(nid, b, log)?;
        Ok(old)
    }

    pub(crate) fn node_for_edit(
        &self,
        nid: u32,
        ino: u32,
        is_dir: bool,
    ) -> Result<(crate::node::NodeBuf, Log)> {
        let v = self.vol();
        let (b, log) = v.nodes.get_for_edit(&*v.dev, &v.nat, nid, ino)?;
        let ofs = u64::from(uf2fs_format::node::Footer::of(&b).ofs());
        Ok((
            b,
            log.unwrap_or_else(|| node_log(is_dir, !is_indirect(ofs))),
        ))
    }

    /// The dnode (or the inode) that holds file block `fblk`, made with its indirect parents
    /// when missing. Returns (its nid, the slot index in it).
    pub(crate) fn ensure_dnode(
        &self,
        ws: &mut WriteState,
        e: &mut Editing,
        fblk: u64,
    ) -> Result<(u32, usize)> {
        // A compressed file's inode and direct nodes map whole clusters only (see
        // `Inode::addrs_in_inode`); indirect nodes always hold NIDS_PER_BLOCK children.
        let a = e.inode.addrs_in_inode() as u64;
        let n = e.inode.addrs_per_dnode();
        let m = uf2fs_format::node::NIDS_PER_BLOCK;
        if fblk < a {
            return Ok((e.ino, fblk as usize));
        }
        let mut rel = fblk - a;
        let is_dir = e.inode.file_type == FileType::Directory;
        if rel < 2 * n {
            let slot = (rel / n) as usize;
            let nid = self.ensure_child_of_inode(ws, e, slot, ofs::top(slot), is_dir, true)?;
            return Ok((nid, (rel % n) as usize));
        }
        rel -= 2 * n;
        for slot in 2..4 {
            if rel < n * m {
                let ind = self.ensure_child_of_inode(ws, e, slot, ofs::top(slot), is_dir, false)?;
                let child = rel / n;
                let d = self.ensure_child_of_node(
                    ws,
                    e,
                    ind,
                    child,
                    ofs::indirect_child(slot, child),
                    is_dir,
                    true,
                )?;
                return Ok((d, (rel % n) as usize));
            }
            rel -= n * m;
        }
        if rel >= n * m * m {
            return Err(Error::FileTooBig);
        }
        let dind = self.ensure_child_of_inode(ws, e, 4, ofs::top(4), is_dir, false)?;
        let j = rel / (n * m);
        let ind = self.ensure_child_of_node(ws, e, dind, j, ofs::dind_child(j), is_dir, false)?;
        let k = (rel / n) % m;
        let d =
            self.ensure_child_of_node(ws, e, ind, k, ofs::dind_grandchild(j, k), is_dir, true)?;
        Ok((d, (rel % n) as usize))
    }

    pub(crate) fn new_node(
        &self,
        ws: &mut WriteState,
        e: &mut Editing,
        ofs: u64,
        is_dir: bool,
        dnode: bool,
    ) -> Result<u32> {
        let v = self.vol();
        let nid = v.nat.alloc(&*v.dev)?;
        let mut b = [0u8; BLOCK_SIZE];
        put(&mut b, FOOTER_OFFSET, &nid.to_le_bytes());
        put(&mut b, FOOTER_OFFSET + 4, &e.ino.to_le_bytes());
        let flag = ((ofs as u32) << OFFSET_BIT_SHIFT) | if is_dir { 0 } else { COLD_BIT };
        put(&mut b, FOOTER_OFFSET + 8, &flag.to_le_bytes());
        let version = v.nat.entry(&*v.dev, nid)?.version;
        v.nat.set(
            nid,
            uf2fs_format::nat::NatEntry {
                version,
                ino: e.ino,
                block_addr: NEW_ADDR,
            },
        )?;
        v.nodes.put_dirty(nid, b, node_log(is_dir, dnode))?;
        ws.counts.valid_nodes += 1;
        ws.counts.valid_blocks += 1;
        e.add_blocks(1);
        Ok(nid)
    }

    fn ensure_child_of_inode(
        &self,
        ws: &mut WriteState,
        e: &mut Editing,
        slot: usize,
        ofs: u64,
        is_dir: bool,
        dnode: bool,
    ) -> Result<u32> {
        let at = I_NID_OFFSET + 4 * slot;
        let nid = get32(&e.block, at);
        if nid != 0 {
            return Ok(nid);
        }
        let nid = self.new_node(ws, e, ofs, is_dir, dnode)?;
        e.set_u32(at, nid);
        e.inode = reparse(self, e.ino, &mut e.block)?;
        Ok(nid)
    }

    #[allow(clippy::too_many_arguments)]
    fn ensure_child_of_node(
        &self,
        ws: &mut WriteState,
        e: &mut Editing,
        parent: u32,
        index: u64,
        ofs: u64,
        is_dir: bool,
        dnode: bool,
    ) -> Result<u32> {
        let v = self.vol();
        let (shared, _) = v.nodes.get_shared(&*v.dev, &v.nat, parent, e.ino)?;
        let nid = entry(&shared, index);
        if nid != 0 {
            return Ok(nid);
        }
        drop(shared);
        let (mut pb, plog) = self.node_for_edit(parent, e.ino, is_dir)?;
        let nid = self.new_node(ws, e, ofs, is_dir, dnode)?;
        put(&mut pb[..], index as usize * 4, &nid.to_le_bytes());
        self.vol().nodes.put_dirty(parent, pb, plog)?;
        Ok(nid)
    }

    /// Turns the inline file being edited into a block file: the inline area is cleared
    /// (it becomes address slots) and `data`, its old bytes, becomes block 0.
    pub(crate) fn inline_to_blocks(
        &self,
        ws: &mut WriteState,
        e: &mut Editing,
        data: &[u8],
    ) -> Result<()> {
        let r = e.inline_range();
        if let Some(a) = e.block.get_mut(r) {
            a.fill(0);
        }
        e.set_inline(e.inline() & !(inline_flags::INLINE_DATA | inline_flags::DATA_EXIST));
        e.inode = reparse(self, e.ino, &mut e.block)?;
        if data.is_empty() {
            return Ok(());
        }
        let mut b0 = [0u8; BLOCK_SIZE];
        put(&mut b0, 0, data);
        self.write_data_blocks(ws, e, Log::WarmData, &BTreeMap::from([(0u64, b0)]))
    }

    /// Grows regular file `ino` to `size` bytes (the new range is a hole); never shrinks it.
    pub fn extend(&self, ino: u32, size: u64) -> Result<()> {
        let first = {
            let i = self.inode(ino)?;
            if i.file_type != FileType::Regular {
                return Err(Error::InvalidArgument("not a regular file"));
            }
            self.vol().check_data_writable(&i)?;
            let mut v = vec![
                0u8;
                if i.has_inline_data() {
                    i.size as usize
                } else {
                    0
                }
            ];
            let n = if v.is_empty() {
                0
            } else {
                self.read(ino, 0, &mut v)?
            };
            v.truncate(n);
            v
        };
        self.changing(8, |ws| {
            self.live(ino)?;
            let mut e = self.edit(ino)?;
            let max = e.inode.max_blocks() * BLOCK_SIZE as u64;
            if size > max {
                return Err(Error::FileTooBig);
            }
            if size <= e.size() {
                return Ok(());
            }
            if e.inode.has_inline_data() && size > e.inline_range().len() as u64 {
                // A hole past the inline area needs the block layout: move the bytes out first.
                self.inline_to_blocks(ws, &mut e, &first)?;
            }
            e.set_size(size);
            e.touch(true);
            self.commit(e)
        })
    }

    /// Writes `data` at byte `offset` of regular file (or new symlink) `ino`.
    pub fn write(&self, ino: u32, offset: u64, data: &[u8]) -> Result<usize> {
        self.write_how(ino, offset, data, false, true)
    }

    /// Writes as [`Fs::write`] (or [`Fs::write_synced`] when `synced`) does, leaving the
    /// inode's modification and change times as they are: for a caller whose own cache keeps
    /// them and hands them over itself (a FUSE kernel with the writeback cache sends the
    /// times it stamped at write(2) in a setattr of its own, and may send the pages after
    /// it; stamping the daemon's clock here made an fsync'd file's mtime differ from the one
    /// `stat` had shown).
    pub fn write_cached(&self, ino: u32, offset: u64, data: &[u8], synced: bool) -> Result<usize> {
        self.write_how(ino, offset, data, synced, false)
    }

    /// Writes as [`Fs::write`] does, for a caller that makes the write durable at once (a
    /// handle opened `O_SYNC` or `O_DSYNC`, whose fsync follows): in `mode=adaptive` with
    /// `ipu=fsync` (the default), a write of at most [`MIN_FSYNC_BLOCKS`] blocks then
    /// rewrites the file's blocks in place, as Linux's `F2FS_IPU_FSYNC` does: no node
    /// changes, and nothing for the cleaner. A crash during such a write can leave its blocks
    /// part old, part new.
    pub fn write_synced(&self, ino: u32, offset: u64, data: &[u8]) -> Result<usize> {
        self.write_how(ino, offset, data, true, true)
    }

    fn write_how(
        &self,
        ino: u32,
        offset: u64,
        data: &[u8],
        synced: bool,
        stamp: bool,
    ) -> Result<usize> {
        let in_place = self.in_place_rule(synced, (data.len() as u64).div_ceil(BLOCK_SIZE as u64));
        // Blocks the change may need: the data and as many again for nodes.
        let mut need = (data.len() as u64).div_ceil(BLOCK_SIZE as u64) * 2 + 8;
        // A compressed file's edge clusters are merged with: checked before the change; and
        // every cluster the write touches is stored again whole. (An inode that does not
        // read here is left to the change, whose `live` check answers for a freed one.)
        if let Ok(i) = self.inode(ino) {
            if let (Some(c), false) = (i.compression, data.is_empty()) {
                let end = offset.saturating_add(data.len() as u64 - 1);
                self.vol().precheck_cluster(&i, &c, offset)?;
                self.vol().precheck_cluster(&i, &c, end)?;
                let cbytes = c.cluster_bytes() as u64;
                let clusters = end / cbytes - offset / cbytes + 1;
                need = need.max(clusters * c.cluster_blocks() * 2 + 8);
            }
        }
        // What counts against the user's space: nothing when every block written is one the
        // file has (a rewrite frees as many as it takes), else the whole estimate.
        let fresh = || -> Result<u64> {
            let Ok(i) = self.inode(ino) else {
                return Ok(need);
            };
            if data.is_empty() || i.compression.is_some() || i.has_inline_data() {
                return Ok(need);
            }
            let first = offset / BLOCK_SIZE as u64;
            let end = offset
                .saturating_add(data.len() as u64)
                .div_ceil(BLOCK_SIZE as u64);
            let mut mapped = 0u64;
            self.vol().for_each_slot(&i, first, end, &mut |_, _| {
                mapped += 1;
                Ok(())
            })?;
            Ok(if mapped == end - first { 0 } else { need })
        };
        self.changing_counted(need, &fresh, data, |ws| {
            self.live(ino)?;
            let mut e = self.edit(ino)?;
            match e.inode.file_type {
                FileType::Regular | FileType::Symlink => {}
                FileType::Directory => return Err(Error::IsADirectory),
                _ => return Err(Error::InvalidArgument("not a regular file")),
            }
            self.vol().check_data_writable(&e.inode)?;
            let in_place = in_place && ws.sync.pointers_durable(ino);
            let end = offset
                .checked_add(data.len() as u64)
                .ok_or(Error::FileTooBig)?;
            let max = e.inode.max_blocks() * BLOCK_SIZE as u64;
            if end > max {
                return Err(Error::FileTooBig);
            }
            if data.is_empty() {
                return Ok(0);
            }
            if let Some(c) = e.inode.compression {
                self.write_compressed(ws, &mut e, &c, offset, data)?;
            } else if e.inode.has_inline_data() {
                let r = e.inline_range();
                if end <= r.len() as u64 {
                    put(&mut e.block[..], r.start + offset as usize, data);
                    e.set_inline(e.inline() | inline_flags::DATA_EXIST);
                    if e.size() < end {
                        e.set_size(end);
                    }
                    if stamp {
                        e.touch(true);
                    }
                    self.commit(e)?;
                    return Ok(data.len());
                }
                // Move the inline bytes out: they become block 0.
                let old_size = e.size() as usize;
                let old: Vec<u8> = e
                    .block
                    .get(r.start..r.start + old_size.min(r.len()))
                    .map(<[u8]>::to_vec)
                    .unwrap_or_default();
                self.inline_to_blocks(ws, &mut e, &old)?;
                self.write_plain_blocks(ws, &mut e, offset, data, in_place)?;
            } else {
                self.write_plain_blocks(ws, &mut e, offset, data, in_place)?;
            }
            if e.size() < end {
                e.set_size(end);
            }
            if stamp {
                e.touch(true);
            }
            self.commit(e)?;
            self.maybe_checkpoint(ws)?;
            Ok(data.len())
        })
    }
}

impl Fs {
    /// Writes `data` at byte `offset` of the block file being edited, out of place (or in
    /// place when `in_place` allows): whole blocks are borrowed from `data`, the partial
    /// first and last ones read and merged, in runs of at most 256 blocks.
    fn write_plain_blocks(
        &self,
        ws: &mut WriteState,
        e: &mut Editing,
        offset: u64,
        data: &[u8],
        in_place: bool,
    ) -> Result<()> {
        let end = offset + data.len() as u64;
        // Whole blocks, the partial first and last ones read and merged.
        let bs = BLOCK_SIZE as u64;
        let mut done = 0usize;
        let mut fblk = offset / bs;
        while done < data.len() {
            let chunk_end = (fblk + 256).min(end.div_ceil(bs));
            // Whole blocks are borrowed from `data`; the partial first and last ones
            // are merged with what the file holds there. A partial block that starts the
            // block and has nothing of the file after it (a file's new last block, the usual
            // case) is taken as it is: the run pads it with zeros, without a merged copy.
            let mut edges: Vec<(u64, Edge<'_>)> = Vec::new();
            for fb in [fblk, chunk_end - 1] {
                let bstart = fb * bs;
                let (lo, hi) = (offset.max(bstart), end.min(bstart + bs));
                let partial = lo > bstart || hi < bstart + bs;
                if !partial || edges.iter().any(|(f, _)| *f == fb) {
                    continue;
                }
                let src = data
                    .get((lo - offset) as usize..(hi - offset) as usize)
                    .unwrap_or(&[]);
                let old = self.block_addr(e, fb)?;
                let kept = old != NULL_ADDR && old != NEW_ADDR && bstart < e.size();
                if lo == bstart && !kept {
                    edges.push((fb, Edge::Short(src)));
                    continue;
                }
                let mut b = [0u8; BLOCK_SIZE];
                if kept {
                    b = self.vol().read_data_block(old.into(), "file data")?;
                }
                put(&mut b, (lo - bstart) as usize, src);
                edges.push((fb, Edge::Merged(Box::new(b))));
            }
            let blocks = (fblk..chunk_end).map(|fb| {
                let bstart = fb * bs;
                match edges.iter().find(|(f, _)| *f == fb) {
                    Some((_, Edge::Merged(b))) => (fb, Piece::Bytes(&b[..])),
                    Some((_, Edge::Short(s))) => (fb, Piece::Bytes(s)),
                    None => (fb, Piece::Source((bstart - offset) as usize)),
                }
            });
            let log = Log::WarmData;
            self.write_file_blocks_from(ws, e, log, in_place, data, blocks)?;
            done = (chunk_end * bs).min(end).saturating_sub(offset) as usize;
            fblk = chunk_end;
        }
        Ok(())
    }
}

impl Fs {
    /// Whether a write of `blocks` blocks (`synced`: its caller makes it durable at once)
    /// rewrites the blocks its file already has in place, by `mode` and `ipu`.
    fn in_place_rule(&self, synced: bool, blocks: u64) -> bool {
        use crate::vol::{AllocMode, IpuPolicy};
        let o = &self.vol().options;
        match (o.mode, o.ipu) {
            (AllocMode::Lfs, _) | (_, IpuPolicy::Off) => false,
            (AllocMode::Adaptive, IpuPolicy::Force) => true,
            (AllocMode::Adaptive, IpuPolicy::Fsync) => synced && blocks <= MIN_FSYNC_BLOCKS,
        }
    }
}

/// Access, modification and change times to store, as (seconds, nanoseconds); `None` keeps
/// the inode's (the change time then moves to now).
struct Times {
    atime: Option<(i64, u32)>,
    mtime: Option<(i64, u32)>,
    ctime: Option<(i64, u32)>,
}

/// The bytes of an attribute change in inode block `b` (`Fs::change_attrs`): the permission
/// bits, the owner, the change time `now`, and the times of `t`.
fn attr_bytes(
    b: &mut Block,
    perm: Option<u16>,
    owner: Option<(u32, u32)>,
    now: (u64, u32),
    t: &Times,
) {
    if let Some(p) = perm {
        let mode = uf2fs_format::le16(&b[..], 0).unwrap_or(0);
        put(
            &mut b[..],
            0,
            &((mode & 0o170000) | (p & 0o7777)).to_le_bytes(),
        );
    }
    if let Some((u, g)) = owner {
        put(&mut b[..], 4, &u.to_le_bytes());
        put(&mut b[..], 8, &g.to_le_bytes());
    }
    let mut stamp = |s_at: usize, ns_at: usize, (s, ns): (u64, u32)| {
        put(&mut b[..], s_at, &s.to_le_bytes());
        put(&mut b[..], ns_at, &ns.to_le_bytes());
    };
    stamp(40, 60, now);
    if let Some((s, ns)) = t.atime {
        stamp(32, 56, (s as u64, ns));
    }
    if let Some((s, ns)) = t.mtime {
        stamp(48, 64, (s as u64, ns));
    }
    if let Some((s, ns)) = t.ctime {
        stamp(40, 60, (s as u64, ns));
    }
}

/// A partial first or last block of a write ([`Fs::write_plain_blocks`]): merged with what the
/// file holds there, or the writer's bytes alone (padded with zeros when the run takes them).
enum Edge<'a> {
    Merged(Box<Block>),
    Short(&'a [u8]),
}

/// A block [`Fs::write_file_blocks_from`] writes: bytes of the caller's (a block, or a shorter
/// piece padded with zeros), or the whole block at a byte offset of the change's source.
enum Piece<'a> {
    Bytes(&'a [u8]),
    Source(usize),
}

/// The most blocks a synchronous write rewrites in place (`mode=adaptive`): Linux's default
/// `min_fsync_blocks`, below which an fsync's dirty pages are written in place.
pub const MIN_FSYNC_BLOCKS: u64 = 8;

/// FS_IOC_GETFLAGS / FS_IOC_SETFLAGS bits as Linux 6.1's f2fs maps them.
pub mod fs_flags {
    /// `i_flags` bits reported (sync, immutable, append, nodump, noatime, compr, nocomp,
    /// index, dirsync, projinherit, casefold).
    pub const GETTABLE: u32 = 0x0000_0008
        | 0x0000_0010
        | 0x0000_0020
        | 0x0000_0040
        | 0x0000_0080
        | 0x0000_0004
        | 0x0000_0400
        | 0x0000_1000
        | 0x0001_0000
        | 0x2000_0000
        | 0x4000_0000;
    /// FS_INLINE_DATA_FL.
    pub const INLINE_DATA: u32 = 0x1000_0000;
    /// What SETFLAGS accepts without EOPNOTSUPP: the reported bits plus the derived ones
    /// Linux reports (encrypt, inline data, nocow, verity).
    pub const GETTABLE_IN: u32 = GETTABLE | 0x0000_0800 | INLINE_DATA | 0x0080_0000 | 0x0010_0000;
    /// The bits SETFLAGS may change.
    pub const SETTABLE: u32 = GETTABLE & !0x0000_1000;
}

/// A random i_generation for a new inode. std's `RandomState` takes its keys from the OS once
/// per thread and varies them for each new one: random enough here, and no file is opened
/// under the write lock for every create (/dev/urandom was, once per inode).
fn rand_u32() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(now().1);
    h.finish() as u32
}

/// A name a directory can hold: 1..=255 bytes, no '/' or NUL, not '.' or '..'.
pub(crate) fn check_name(name: &[u8]) -> Result<()> {
    if name.len() > MAX_NAME_LEN {
        return Err(Error::NameTooLong);
    }
    if name.is_empty() || name == b"." || name == b".." || name.contains(&b'/') || name.contains(&0)
    {
        return Err(Error::InvalidArgument(
            "a name must be 1 to 255 bytes, without '/' or NUL, and not '.' or '..'",
        ));
    }
    Ok(())
}

/// Puts an entry into the first run of free slots long enough; false when there is none.
fn insert_into_area(
    area: &mut [u8],
    inline: bool,
    name: &[u8],
    ino: u32,
    hash: u32,
    ft: FileType,
) -> bool {
    let (n, bitmap, e0) = if inline {
        let (n, bitmap, reserved) = inline_geometry(area.len());
        (n, bitmap, bitmap + reserved)
    } else {
        (NR_DENTRY_IN_BLOCK, 27, 30)
    };
    let need = slots_for(name.len());
    let used = |area: &[u8], s: usize| area.get(s / 8).is_some_and(|b| b & (1 << (s % 8)) != 0);
    let mut start = 0;
    while start + need <= n {
        match (start..start + need).find(|&s| used(area, s)) {
            Some(busy) => start = busy + 1,
            None => {
                let e = e0 + start * DIR_ENTRY_SIZE;
                put(area, e, &hash.to_le_bytes());
                put(area, e + 4, &ino.to_le_bytes());
                put(area, e + 8, &(name.len() as u16).to_le_bytes());
                put(area, e + 10, &[ft.dentry_code()]);
                let names = e0 + n * DIR_ENTRY_SIZE;
                put(area, names + start * SLOT_LEN, name);
                for s in start..start + need {
                    if let Some(b) = area.get_mut(s / 8) {
                        *b |= 1 << (s % 8);
                    }
                }
                let _ = bitmap;
                return true;
            }
        }
    }
    false
}
