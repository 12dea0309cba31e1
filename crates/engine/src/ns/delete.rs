//! Taking things away: directory entries, inodes whose last link goes, file blocks past a
//! new size. A freed block is invalidated in the SIT (its segment is reused only after the
//! next checkpoint); a freed node's NAT entry is cleared with its version bumped and its nid
//! held back until the next checkpoint; a dirty copy of a freed node is dropped.

use crate::error::{Error, Result};
use crate::state::WriteState;
use crate::vol::Fs;
use std::ops::ControlFlow;
use uf2fs_format::dentry::{
    inline_geometry, slots_for, DENTRY_BITMAP_SIZE, DENTRY_RESERVED, NR_DENTRY_IN_BLOCK,
};
use uf2fs_format::inode::{FileType, Inode};
use uf2fs_format::node::{entry, ADDRS_PER_BLOCK};
use uf2fs_format::{Block, BLOCK_SIZE, COMPRESS_ADDR, NEW_ADDR, NULL_ADDR};

const N: u64 = ADDRS_PER_BLOCK;

pub(crate) use crate::ns::dir::Found;

impl Fs {
    /// Finds `name` in directory `dir` with its place (in a casefolded directory, the entry
    /// whose name folds alike; in an encrypted one, the entry a no-key name stands for; `len`
    /// is the length of the name on disk).
    pub(crate) fn find_entry(&self, dir: &Inode, name: &[u8]) -> Result<Found> {
        let q = self.vol().dir_query(dir, name)?;
        self.find_entry_query(dir, &q)
    }

    /// Finds the entry `q` asks for in directory `dir`, with its place.
    pub(crate) fn find_entry_query(
        &self,
        dir: &Inode,
        q: &crate::ns::dir::Query<'_>,
    ) -> Result<Found> {
        self.vol().find_query(dir, q)
    }

    /// Changes the dentry area of directory `dir_ino` that holds an entry: the inline area
    /// (`fblk` None) or the dentry block at `fblk`, read, changed by `f` (given the area and
    /// where its entry array starts), and written out of place; a block left with no entry
    /// becomes a hole, as Linux does.
    pub(crate) fn change_entry_area(
        &self,
        ws: &mut WriteState,
        dir_ino: u32,
        fblk: Option<u64>,
        f: impl FnOnce(&mut [u8], usize),
    ) -> Result<()> {
        let mut p = self.edit(dir_ino)?;
        match fblk {
            None => {
                let r = p.inline_range();
                let (_, bitmap, reserved) = inline_geometry(r.len());
                if let Some(area) = p.block.get_mut(r) {
                    f(area, bitmap + reserved);
                }
            }
            Some(fblk) => {
                let old = self.block_addr(&p, fblk)?;
                let mut b = self.vol().dentry_block(dir_ino, fblk, old)?;
                // A copy (the cache's block may be in a reader's hands), changed and put back.
                f(
                    &mut std::sync::Arc::make_mut(&mut b)[..],
                    DENTRY_BITMAP_SIZE + DENTRY_RESERVED,
                );
                let empty = (0..NR_DENTRY_IN_BLOCK)
                    .all(|s| b.get(s / 8).is_some_and(|x| x & (1 << (s % 8)) == 0));
                if empty {
                    self.punch(ws, &mut p, fblk, fblk + 1)?;
                } else {
                    self.put_dentry_block(ws, &mut p, fblk, old, b)?;
                }
            }
        }
        p.touch(true);
        self.commit(p)
    }

    /// Clears an entry's bitmap bits (the bitmap starts both kinds of area).
    pub(crate) fn remove_entry(&self, ws: &mut WriteState, dir_ino: u32, f: &Found) -> Result<()> {
        self.change_entry_area(ws, dir_ino, f.fblk, |bitmap, _| {
            for s in f.slot..f.slot + slots_for(f.len) {
                if let Some(b) = bitmap.get_mut(s / 8) {
                    *b &= !(1 << (s % 8));
                }
            }
        })
    }

    /// Removes the name `name` of a non-directory from `parent`; the inode goes with its last
    /// link.
    pub fn unlink(&self, parent: u32, name: &[u8]) -> Result<()> {
        self.changing(4, |ws| {
            let dir = self.inode(parent)?;
            if dir.file_type != FileType::Directory {
                return Err(Error::NotADirectory);
            }
            let f = self.find_entry(&dir, name)?;
            let target = self.inode(f.ino)?;
            if target.file_type == FileType::Directory {
                return Err(Error::IsADirectory);
            }
            self.remove_entry(ws, parent, &f)?;
            self.drop_link(ws, f.ino)
        })
    }

    /// Removes the empty directory `name` from `parent`.
    pub fn rmdir(&self, parent: u32, name: &[u8]) -> Result<()> {
        self.changing(4, |ws| {
            let dir = self.inode(parent)?;
            if dir.file_type != FileType::Directory {
                return Err(Error::NotADirectory);
            }
            if name == b"." {
                return Err(Error::InvalidArgument("cannot remove '.'"));
            }
            if name == b".." {
                return Err(Error::NotEmpty);
            }
            let f = self.find_entry(&dir, name)?;
            let target = self.inode(f.ino)?;
            if target.file_type != FileType::Directory {
                return Err(Error::NotADirectory);
            }
            if !self.readdir(f.ino)?.is_empty() {
                return Err(Error::NotEmpty);
            }
            self.remove_entry(ws, parent, &f)?;
            self.adjust_links(parent, -1)?;
            self.drop_dir(ws, f.ino)
        })
    }

    /// Keeps `ino` alive while it is open: unlinking its last name makes it an orphan
    /// (recorded at checkpoints) until the matching [`Fs::release`].
    pub fn hold(&self, ino: u32) -> Result<()> {
        let mut ws = self.ws()?;
        // Checked under the lock: once held, an unlink leaves an orphan instead of freeing it.
        self.live(ino)?;
        *ws.orphans.held.entry(ino).or_insert(0) += 1;
        Ok(())
    }

    /// Drops one hold of `ino`; an orphan whose last hold goes is freed.
    pub fn release(&self, ino: u32) -> Result<()> {
        self.changing(0, |ws| {
            let left = match ws.orphans.held.get_mut(&ino) {
                Some(n) => {
                    *n -= 1;
                    *n
                }
                None => {
                    return Err(Error::InvalidArgument(
                        "release of an inode that is not held",
                    ))
                }
            };
            if left == 0 {
                ws.orphans.held.remove(&ino);
                if let Some(i) = ws.orphans.list.iter().position(|&o| o == ino) {
                    ws.orphans.list.remove(i);
                    self.free_inode(ws, ino)?;
                }
            }
            Ok(())
        })
    }

    /// Frees the orphans a checkpoint recorded (at a writable mount).
    pub(crate) fn remove_orphans(&self, orphans: &[u32]) -> Result<()> {
        self.changing(0, |ws| {
            for &ino in orphans {
                let i = self.inode(ino)?;
                if i.links != 0 {
                    return Err(uf2fs_format::CorruptKind::InodeField {
                        ino,
                        field: "i_links of an orphan",
                        value: i.links.into(),
                    }
                    .into());
                }
                self.free_inode(ws, ino)?;
            }
            Ok(())
        })
    }

    /// One link fewer; the inode is freed with its last one (or orphaned while held).
    pub(crate) fn drop_link(&self, ws: &mut WriteState, ino: u32) -> Result<()> {
        self.needs_checkpoint(ws, ino);
        let mut e = self.edit(ino)?;
        let links = e.links().saturating_sub(1);
        if links == 0 && ws.orphans.held.contains_key(&ino) {
            e.set_links(0);
            e.touch(false);
            ws.orphans.list.push(ino);
            return self.commit(e);
        }
        if links == 0 {
            return self.free_edited(ws, e);
        }
        e.set_links(links);
        e.touch(false);
        self.commit(e)
    }

    /// An empty directory loses its name: it is freed, or, while open, kept with no links
    /// as an orphan until its last release (as Linux keeps it, so that fstat still works).
    pub(crate) fn drop_dir(&self, ws: &mut WriteState, ino: u32) -> Result<()> {
        if !ws.orphans.held.contains_key(&ino) {
            return self.free_inode(ws, ino);
        }
        let mut e = self.edit(ino)?;
        e.set_links(0);
        e.touch(false);
        ws.orphans.list.push(ino);
        self.commit(e)
    }

    /// Frees an inode: its data, its node tree, its xattr node, and the inode itself.
    pub(crate) fn free_inode(&self, ws: &mut WriteState, ino: u32) -> Result<()> {
        let e = self.edit(ino)?;
        self.free_edited(ws, e)
    }

    /// [`Fs::free_inode`] of an inode the caller is editing (its changes are let go).
    fn free_edited(&self, ws: &mut WriteState, mut e: crate::ns::edit::Editing) -> Result<()> {
        let ino = e.ino;
        if !e.inode.has_inline_data()
            && !e.inode.has_inline_dentry()
            && matches!(
                e.inode.file_type,
                FileType::Regular | FileType::Directory | FileType::Symlink
            )
            && !self.free_inode_slots(ws, &e)
        {
            self.punch(ws, &mut e, 0, u64::MAX)?;
        }
        if e.inode.xattr_nid != 0 {
            self.free_node(ws, e.inode.xattr_nid)?;
        }
        self.free_node(ws, ino)?;
        self.vol().forget_inode(ino);
        self.charge_quota(ino, e.was, None)?;
        ws.counts.valid_inodes = ws.counts.valid_inodes.saturating_sub(1);
        Ok(())
    }

    /// Frees the data blocks of a file being freed whose blocks are all in its inode's own
    /// slots (a small uncompressed regular file: no node under it), reading the slots only:
    /// the inode block goes with the file, so clearing its slots, its block count and its
    /// extent hint, as [`Fs::punch`] does, would copy and edit a block nobody keeps. Returns
    /// false, having done nothing, for any other file, which `punch` then frees.
    fn free_inode_slots(&self, ws: &mut WriteState, e: &crate::ns::edit::Editing) -> bool {
        let i = &e.inode;
        if i.file_type != FileType::Regular
            || i.compression.is_some()
            || (0..5).any(|slot| e.nid_slot(slot) != 0)
        {
            return false;
        }
        // What `punch` notes of any file it frees blocks of.
        self.needs_checkpoint(ws, e.ino);
        ws.sync.relinked.insert(e.ino);
        let slots = crate::ns::edit::set_slots(&e.block, e.addr_slot(0), 0..i.addrs_in_inode());
        let mut counted = 0u64;
        // NEW_ADDR, reserved by fallocate, is counted but has no block behind it.
        let blocks = slots
            .inspect(|_| counted += 1)
            .filter_map(|(_, addr)| (addr != NEW_ADDR).then_some(addr));
        ws.segs.invalidate_all(blocks);
        ws.counts.valid_blocks = ws.counts.valid_blocks.saturating_sub(counted);
        true
    }

    /// Frees node `nid` of the inode being edited (one block fewer in its i_blocks).
    pub(crate) fn free_node_of(
        &self,
        ws: &mut WriteState,
        e: &mut crate::ns::edit::Editing,
        nid: u32,
    ) -> Result<()> {
        self.free_node(ws, nid)?;
        e.add_blocks(-1);
        Ok(())
    }

    /// Frees node `nid`: its block, its NAT entry, its dirty copy.
    fn free_node(&self, ws: &mut WriteState, nid: u32) -> Result<()> {
        let v = self.vol();
        let e = v.nat.entry(&*v.dev, nid)?;
        if e.block_addr != NULL_ADDR && e.block_addr != NEW_ADDR {
            ws.segs.invalidate(e.block_addr);
        }
        v.nat.free(&*v.dev, nid)?;
        v.nodes.forget(nid);
        ws.counts.valid_nodes = ws.counts.valid_nodes.saturating_sub(1);
        ws.counts.valid_blocks = ws.counts.valid_blocks.saturating_sub(1);
        Ok(())
    }

    /// Frees one data slot. NEW_ADDR and COMPRESS_ADDR name no block: nothing to invalidate,
    /// but each counts in valid_block_count and i_blocks, as Linux counts them, except the
    /// COMPRESS_ADDR of a file whose saved blocks were released (Linux gave that one back
    /// with them).
    pub(crate) fn free_addr(
        &self,
        ws: &mut WriteState,
        e: &mut crate::ns::edit::Editing,
        addr: u32,
    ) {
        if addr == NULL_ADDR {
            return;
        }
        let released = e.inode.compression.is_some_and(|c| c.released);
        if addr == COMPRESS_ADDR && released {
            return;
        }
        // In a compressed file the COMPRESS_ADDR and NEW_ADDR slots of a cluster are the
        // blocks it saves (`i_compr_blocks`).
        let reserved = addr == COMPRESS_ADDR || addr == NEW_ADDR;
        if reserved && e.inode.compression.is_some() && !released {
            e.add_compr_blocks(-1);
        }
        if !reserved {
            ws.segs.invalidate(addr);
            e.drop_from_extent(addr);
        }
        ws.counts.valid_blocks = ws.counts.valid_blocks.saturating_sub(1);
        e.add_blocks(-1);
    }

    /// Frees the data blocks of file blocks [start, end) and every node left with nothing
    /// under it (a node is freed only when its whole range is inside [start, end)).
    pub(crate) fn punch(
        &self,
        ws: &mut WriteState,
        e: &mut crate::ns::edit::Editing,
        start: u64,
        end: u64,
    ) -> Result<()> {
        // Roll-forward cannot replay freed nodes: the next fsync of this file checkpoints.
        self.needs_checkpoint(ws, e.ino);
        ws.sync.relinked.insert(e.ino);
        if e.inode.file_type == FileType::Directory {
            // Held copies of freed dentry blocks must never be written back.
            self.vol().dentries.forget(e.ino, start, end);
        }
        // A compressed file's inode and direct nodes map whole clusters only.
        let a = e.inode.addrs_in_inode() as u64;
        let n = e.inode.addrs_per_dnode();
        // Most slots of a small file's inode are empty: only the others are freed and
        // cleared (freeing a 16 KiB file walked all 923 slots).
        let first = e.addr_slot(0);
        let range = start.min(a) as usize..end.min(a) as usize;
        let set: Vec<(usize, u32)> = crate::ns::edit::set_slots(&e.block, first, range).collect();
        for (i, addr) in set {
            self.free_addr(ws, e, addr);
            e.set_u32(first + 4 * i, NULL_ADDR);
        }
        let mut base = a;
        // Spans of the five i_nid slots and how deep each goes.
        let spans = [
            (0usize, n, 0u32),
            (1, n, 0),
            (2, n * N, 1),
            (3, n * N, 1),
            (4, n * N * N, 2),
        ];
        for (slot, span, depth) in spans {
            if end > base && start < base + span {
                let nid = e.nid_slot(slot);
                if nid != 0
                    && self
                        .punch_node(ws, e, nid, depth, base, start, end)?
                        .is_break()
                {
                    e.set_nid_slot(slot, 0);
                    e.inode = crate::ns::edit::reparse(self, e.ino, &mut e.block)?;
                }
            }
            base += span;
        }
        Ok(())
    }

    /// Punches [start, end) under node `nid` covering file blocks from `base`; returns
    /// `Break` when the node itself was freed.
    #[allow(clippy::too_many_arguments)]
    fn punch_node(
        &self,
        ws: &mut WriteState,
        e: &mut crate::ns::edit::Editing,
        nid: u32,
        depth: u32,
        base: u64,
        start: u64,
        end: u64,
    ) -> Result<ControlFlow<()>> {
        // A direct node holds `n` addresses (fewer than N for a compressed file); an
        // indirect one N children, each covering n * N^(depth - 1) file blocks.
        let n = e.inode.addrs_per_dnode();
        let (entries, span_per_entry) = if depth == 0 {
            (n, 1)
        } else {
            (N, n * N.pow(depth - 1))
        };
        let whole = start <= base && end >= base.saturating_add(entries * span_per_entry);
        let (mut b, log) =
            self.node_for_edit(nid, e.ino, e.inode.file_type == FileType::Directory)?;
        let mut changed = false;
        for k in 0..entries {
            let lo = base + k * span_per_entry;
            let hi = lo + span_per_entry;
            if hi <= start || lo >= end {
                continue;
            }
            let v = entry(&b, k);
            if v == 0 {
                continue;
            }
            if depth == 0 {
                self.free_addr(ws, e, v);
                put32(&mut b, k, 0);
                changed = true;
            } else if self
                .punch_node(ws, e, v, depth - 1, lo, start, end)?
                .is_break()
            {
                put32(&mut b, k, 0);
                changed = true;
            }
        }
        if whole {
            self.free_node(ws, nid)?;
            e.add_blocks(-1);
            return Ok(ControlFlow::Break(()));
        }
        if changed {
            self.vol().nodes.put_dirty(nid, b, log)?;
        }
        Ok(ControlFlow::Continue(()))
    }

    /// Sets the size of regular file `ino`: blocks past it are freed, the tail of the last
    /// block is zeroed; growing makes a hole.
    pub fn truncate(&self, ino: u32, size: u64) -> Result<()> {
        let cur = self.inode_shared(ino)?;
        if cur.file_type != FileType::Regular {
            return Err(if cur.file_type == FileType::Directory {
                Error::IsADirectory
            } else {
                Error::InvalidArgument("not a regular file")
            });
        }
        self.vol().check_data_writable(&cur)?;
        if size >= cur.size {
            return self.extend(ino, size);
        }
        // A compressed cluster the new size cuts is checked before the change, and stored
        // again whole within it.
        let mut need = 4;
        if let Some(c) = cur.compression {
            self.vol().precheck_cluster(&cur, &c, size)?;
            need += 2 * c.cluster_blocks();
        }
        self.changing(need, |ws| {
            self.live(ino)?;
            let mut e = self.edit(ino)?;
            if e.inode.has_inline_data() {
                let r = e.inline_range();
                if let Some(tail) = e.block.get_mut(r.start + size as usize..r.end) {
                    tail.fill(0);
                }
            } else {
                if let Some(c) = e.inode.compression {
                    self.truncate_compressed(ws, &mut e, &c, size)?;
                }
                let bs = BLOCK_SIZE as u64;
                let keep = size.div_ceil(bs);
                self.punch(ws, &mut e, keep, u64::MAX)?;
                if !size.is_multiple_of(bs) {
                    let last = size / bs;
                    let addr = self.block_addr(&e, last)?;
                    if addr != NULL_ADDR && addr != NEW_ADDR {
                        let mut b: Block = self.vol().read_data_block(addr.into(), "file data")?;
                        if let Some(t) = b.get_mut((size % bs) as usize..) {
                            t.fill(0);
                        }
                        self.write_data_blocks(
                            ws,
                            &mut e,
                            crate::space::Log::WarmData,
                            &std::collections::BTreeMap::from([(last, b)]),
                        )?;
                    }
                }
            }
            e.set_size(size);
            e.touch(true);
            self.commit(e)
        })
    }
}

fn put32(b: &mut Block, k: u64, v: u32) {
    let at = k as usize * 4;
    if let Some(dst) = b.get_mut(at..at + 4) {
        dst.copy_from_slice(&v.to_le_bytes());
    }
}
