//! fallocate: reserving blocks (NEW_ADDR: counted in valid_block_count and i_blocks, read as
//! zeros, written out of place later), with or without growing the size, punching holes
//! (whole blocks freed, the partial blocks at the edges zeroed), and zeroing a range (a hole
//! punched inside the size, then the whole range reserved, as Linux's F2FS leaves it). Other
//! modes are refused by name.

use crate::error::{Error, Result};
use crate::space::Log;
use crate::vol::Fs;
use std::collections::BTreeMap;
use uf2fs_format::inode::{advise, FileType};
use uf2fs_format::{BLOCK_SIZE, NEW_ADDR, NULL_ADDR};

pub const FALLOC_FL_KEEP_SIZE: u32 = 0x01;
pub const FALLOC_FL_PUNCH_HOLE: u32 = 0x02;
pub const FALLOC_FL_ZERO_RANGE: u32 = 0x10;

impl Fs {
    /// fallocate(2) on regular file `ino`.
    pub fn fallocate(&self, ino: u32, mode: u32, offset: u64, len: u64) -> Result<()> {
        if mode & !(FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE) != 0 {
            return Err(Error::Unsupported(format!("fallocate mode {mode:#x} is not supported (only allocate, KEEP_SIZE, PUNCH_HOLE and ZERO_RANGE)")));
        }
        if len == 0 {
            return Err(Error::InvalidArgument("fallocate length 0"));
        }
        // Linux refuses punching and zeroing a compressed file; reserving blocks there would
        // put NEW_ADDR slots in plain clusters, which uf2fs does not keep apart from a
        // compressed cluster's saved blocks. posix_fallocate(3) writes zeros instead.
        if self.inode_shared(ino)?.compression.is_some() {
            return Err(Error::Unsupported(
                "fallocate on a compressed file is not supported".into(),
            ));
        }
        if mode & FALLOC_FL_PUNCH_HOLE != 0 && mode & FALLOC_FL_KEEP_SIZE == 0 {
            return Err(Error::Unsupported("PUNCH_HOLE needs KEEP_SIZE".into()));
        }
        if mode & FALLOC_FL_ZERO_RANGE != 0 {
            if mode & FALLOC_FL_PUNCH_HOLE != 0 {
                return Err(Error::InvalidArgument("ZERO_RANGE with PUNCH_HOLE"));
            }
            let end = offset.checked_add(len).ok_or(Error::FileTooBig)?;
            let i = self.inode_shared(ino)?;
            if i.file_type == FileType::Regular && offset < i.size {
                // Two steps, each a whole change: a checkpoint between them sees a hole,
                // which reads as the zeros asked for.
                let inside = end.min(i.size) - offset;
                self.fallocate(
                    ino,
                    FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                    offset,
                    inside,
                )?;
            }
            return self.fallocate(ino, mode & FALLOC_FL_KEEP_SIZE, offset, len);
        }
        let end = offset.checked_add(len).ok_or(Error::FileTooBig)?;
        let i = self.inode_shared(ino)?;
        match i.file_type {
            FileType::Regular => {}
            FileType::Directory => return Err(Error::IsADirectory),
            _ => return Err(Error::InvalidArgument("not a regular file")),
        }
        self.vol().check_data_writable(&i)?;
        let max = i.max_blocks() * BLOCK_SIZE as u64;
        if end > max {
            return Err(Error::FileTooBig);
        }
        let bs = BLOCK_SIZE as u64;
        if mode & FALLOC_FL_PUNCH_HOLE != 0 {
            let size = i.size;
            let end = end.min(size);
            if offset >= end {
                return Ok(());
            }
            if i.has_inline_data() {
                let zeros = vec![0u8; (end - offset) as usize];
                self.write(ino, offset, &zeros)?;
                return Ok(());
            }
            return self.changing(4, |ws| {
                self.live(ino)?;
                let mut e = self.edit(ino)?;
                let (first_whole, last_whole) = (offset.div_ceil(bs), end / bs);
                if first_whole < last_whole {
                    self.punch(ws, &mut e, first_whole, last_whole)?;
                }
                // Partial blocks at the edges: zeroed in a new copy.
                let mut edges = BTreeMap::new();
                for fblk in [offset / bs, (end - 1) / bs] {
                    let (lo, hi) = (fblk * bs, fblk * bs + bs);
                    if offset <= lo && end >= hi {
                        continue;
                    }
                    let addr = self.block_addr(&e, fblk)?;
                    if addr == NULL_ADDR || addr == NEW_ADDR {
                        continue;
                    }
                    let mut b = self.vol().read_data_block(addr.into(), "file data")?;
                    let z0 = offset.max(lo) - lo;
                    let z1 = end.min(hi) - lo;
                    if let Some(z) = b.get_mut(z0 as usize..z1 as usize) {
                        z.fill(0);
                    }
                    edges.insert(fblk, b);
                }
                self.write_data_blocks(ws, &mut e, Log::WarmData, &edges)?;
                e.touch(true);
                self.commit(e)
            });
        }
        // Allocation. An inline file moves to blocks first (a reservation is a block).
        if i.has_inline_data() {
            let mut data = vec![0u8; i.size as usize];
            let n = self.read(ino, 0, &mut data)?;
            data.truncate(n);
            // Growing to one block past the inline area converts it; the size is put back.
            let keep = i.size;
            self.extend(ino, (i.inline_capacity() as u64 + 1).max(keep))?;
            if keep < self.inode(ino)?.size {
                self.truncate(ino, keep)?;
            }
        }
        let blocks = end.div_ceil(bs) - offset / bs;
        self.changing(blocks + blocks / 1000 + 8, |ws| {
            self.live(ino)?;
            let mut e = self.edit(ino)?;
            // A node at a time: its holes in the range are reserved in one edit.
            let (mut fblk, last) = (offset / bs, end.div_ceil(bs));
            while fblk < last {
                let (nid, index) = self.ensure_dnode(ws, &mut e, fblk)?;
                let per = if nid == e.ino {
                    e.inode.addrs_in_inode()
                } else {
                    e.inode.addrs_per_dnode() as usize
                };
                let n = (per.saturating_sub(index) as u64).clamp(1, last - fblk) as usize;
                let holes: Vec<(usize, u32)> = self
                    .addrs_in(&e, nid, index, n)?
                    .into_iter()
                    .enumerate()
                    .filter(|&(_, old)| old == NULL_ADDR)
                    .map(|(k, _)| (index + k, NEW_ADDR))
                    .collect();
                if !holes.is_empty() {
                    self.set_addrs(&mut e, nid, &holes)?;
                    ws.sync.relinked.insert(e.ino);
                    ws.counts.valid_blocks += holes.len() as u64;
                    e.add_blocks(holes.len() as i64);
                }
                fblk += n as u64;
            }
            if mode & FALLOC_FL_KEEP_SIZE == 0 {
                if e.size() < end {
                    e.set_size(end);
                }
            } else if end > e.size() {
                // Blocks reserved past the end: Linux marks the inode so.
                if let Some(a) = e.block.get_mut(2) {
                    *a |= advise::KEEP_SIZE;
                }
            }
            e.touch(true);
            self.commit(e)
        })
    }
}
