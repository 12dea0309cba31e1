//! Linux's controls on compressed files: releasing and reserving their saved blocks,
//! compressing or decompressing them on request, and a file's own algorithm and cluster.

use super::{BS, COMPR_BLOCKS_AT};
use crate::error::{Error, Result};
use crate::ns::edit::Editing;
use crate::state::WriteState;
use crate::vol::Fs;
use uf2fs_format::compress::{
    compressed_block_count, Algorithm, Compression, MAX_LOG_CLUSTER_SIZE, MIN_LOG_CLUSTER_SIZE,
};
use uf2fs_format::inode::inline_flags;
use uf2fs_format::{names_block, COMPRESS_ADDR, NEW_ADDR, NULL_ADDR};

/// Releasing and reserving a compressed file's saved blocks (Linux's
/// F2FS_IOC_RELEASE_COMPRESS_BLOCKS and F2FS_IOC_RESERVE_COMPRESS_BLOCKS), as Linux 6.1 leaves
/// the inode: released, every compressed cluster's NEW_ADDR slots become NULL_ADDR, those and
/// its COMPRESS_ADDR leave i_blocks and the valid block count, `i_compr_blocks` becomes 0 and
/// the inode is marked F2FS_COMPRESS_RELEASED (its data can no longer change: EPERM). Reserved
/// again, the holes after each cluster's compressed blocks become NEW_ADDR and everything is
/// counted back. Plain clusters are left alone either way.
impl Fs {
    /// Gives a compressed file's saved blocks back to the volume; returns how many. A file
    /// that saved nothing is left as it is (0).
    pub fn release_compress_blocks(&self, ino: u32) -> Result<u64> {
        let compression = self.inode(ino)?.compression;
        let c = compression.ok_or(Error::InvalidArgument("not a compressed file"))?;
        if c.released {
            return Err(Error::InvalidArgument(
                "the file's compressed blocks are already released",
            ));
        }
        self.changing(8, |ws| {
            self.live(ino)?;
            let mut e = self.edit(ino)?;
            if uf2fs_format::le64(&e.block[..], COMPR_BLOCKS_AT).unwrap_or(0) == 0 {
                return Ok(0);
            }
            let released = self.rewrite_saved_slots(ws, &mut e, &c, NEW_ADDR, NULL_ADDR)?;
            ws.counts.valid_blocks = ws.counts.valid_blocks.saturating_sub(released);
            e.add_blocks(-(released as i64));
            e.set_u64(COMPR_BLOCKS_AT, 0);
            e.set_inline(e.inline() | inline_flags::COMPRESS_RELEASED);
            e.touch(false);
            self.needs_checkpoint(ws, ino);
            self.commit(e)?;
            Ok(released)
        })
    }

    /// Takes back the saved blocks of a compressed file whose blocks were released (ENOSPC
    /// when the volume has not that many free); returns how many.
    pub fn reserve_compress_blocks(&self, ino: u32) -> Result<u64> {
        let i = self.inode(ino)?;
        let c = i
            .compression
            .ok_or(Error::InvalidArgument("not a compressed file"))?;
        if !c.released {
            return Err(Error::InvalidArgument(
                "the file's compressed blocks are not released",
            ));
        }
        // Counted first, so that the change asks for the room before it changes anything:
        // each compressed cluster takes back its COMPRESS_ADDR and the slots after its
        // compressed blocks.
        let cb = c.cluster_blocks();
        let mut need = 0u64;
        for k in 0..i.size.div_ceil(cb * BS) {
            let slots = self.vol().cluster_slots_of(&i, &c, k)?;
            if let Some((&COMPRESS_ADDR, rest)) = slots.split_first() {
                need += cb - compressed_block_count(ino, k, rest, names_block)? as u64;
            }
        }
        self.changing(need + 8, |ws| {
            self.live(ino)?;
            let mut e = self.edit(ino)?;
            let reserved = self.rewrite_saved_slots(ws, &mut e, &c, NULL_ADDR, NEW_ADDR)?;
            ws.counts.valid_blocks += reserved;
            e.add_blocks(reserved as i64);
            e.set_u64(COMPR_BLOCKS_AT, reserved);
            e.set_inline(e.inline() & !inline_flags::COMPRESS_RELEASED);
            e.touch(false);
            self.needs_checkpoint(ws, ino);
            self.commit(e)?;
            Ok(reserved)
        })
    }

    /// In every compressed cluster of `e`, turns the slots after its compressed blocks from
    /// `from` into `to`; returns the blocks that changed count: each cluster's COMPRESS_ADDR
    /// and the slots turned.
    fn rewrite_saved_slots(
        &self,
        ws: &mut WriteState,
        e: &mut Editing,
        c: &Compression,
        from: u32,
        to: u32,
    ) -> Result<u64> {
        let cb = c.cluster_blocks();
        let clusters = e.size().div_ceil(cb * BS);
        let mut saved = 0u64;
        for k in 0..clusters {
            let slots = self.cluster_slots(e, c, k)?;
            let Some((&COMPRESS_ADDR, rest)) = slots.split_first() else {
                continue;
            };
            let n = compressed_block_count(e.ino, k, rest, names_block)? as u64;
            let (nid, index) = self.ensure_dnode(ws, e, k * cb)?;
            let marks: Vec<(usize, u32)> = rest
                .iter()
                .enumerate()
                .skip(n as usize)
                .filter(|(_, &a)| a == from)
                .map(|(i, _)| (index + 1 + i, to))
                .collect();
            if !marks.is_empty() {
                self.set_addrs(e, nid, &marks)?;
            }
            // The cluster's COMPRESS_ADDR and the slots turned count (or stop counting).
            saved += 1 + marks.len() as u64;
        }
        Ok(saved)
    }
}

/// Compressing or decompressing a whole file on request (F2FS_IOC_COMPRESS_FILE and
/// F2FS_IOC_DECOMPRESS_FILE, Linux's `compress_mode=user`): every cluster is read and stored
/// again, compressed where it may be, or plain.
impl Fs {
    /// Stores every cluster of compressed file `ino` again, compressed (`compress`) by the
    /// usual rule or plain. Linux takes these requests only under `compress_mode=user`
    /// (EOPNOTSUPP otherwise), and not on a file whose saved blocks were released (EPERM).
    pub fn recompress_file(&self, ino: u32, compress: bool) -> Result<()> {
        if !self.vol().options.compress.user_mode {
            return Err(Error::Unsupported(
                "compressing or decompressing a file on request needs compress_mode=user".into(),
            ));
        }
        let i = self.inode(ino)?;
        let c = i
            .compression
            .ok_or(Error::InvalidArgument("not a compressed file"))?;
        self.vol().check_data_writable(&i)?;
        let cb = c.cluster_blocks();
        let clusters = i.size.div_ceil(cb * BS);
        // One change per cluster: each needs at most a cluster's blocks and its node.
        for k in 0..clusters {
            let now = self.inode(ino)?;
            self.vol().precheck_cluster(&now, &c, k * cb * BS)?;
            self.changing(cb + 8, |ws| {
                self.live(ino)?;
                let mut e = self.edit(ino)?;
                let slots = self.cluster_slots(&e, &c, k)?;
                let was_compressed = slots.first() == Some(&COMPRESS_ADDR);
                // Holes, and clusters already as asked, stay.
                if slots.iter().all(|&a| a == NULL_ADDR) || was_compressed == compress {
                    return Ok(());
                }
                let mut buf = Vec::new();
                self.vol().read_cluster(e.ino, &c, k, &slots, &mut buf)?;
                let size = e.size();
                self.needs_checkpoint(ws, ino);
                // Nothing "touched": a plain cluster that does not shrink is left where it
                // is, and a compressed one stored plain is written whole anyway.
                self.store_cluster(ws, &mut e, &c, k, &slots, &buf, size, 0..0, compress)?;
                self.commit(e)
            })?;
        }
        Ok(())
    }
}

/// A compressed file's own algorithm and cluster size (F2FS_IOC_GET/SET_COMPRESS_OPTION).
impl Fs {
    /// The algorithm (`i_compress_algorithm`) and log of the cluster size of compressed file
    /// `ino` (EINVAL for any other).
    pub fn compress_option(&self, ino: u32) -> Result<(u8, u8)> {
        let c = self
            .inode(ino)?
            .compression
            .ok_or(Error::InvalidArgument("not a compressed file"))?;
        Ok((c.algorithm as u8, c.log_cluster_size))
    }

    /// Sets them, as Linux 6.1 does: only on a compressed regular file without blocks yet
    /// (EFBIG otherwise), an algorithm Linux knows and a cluster log of 2 to 8 (EINVAL).
    pub fn set_compress_option(&self, ino: u32, algorithm: u8, log: u8) -> Result<()> {
        if Algorithm::from_raw(algorithm).is_none()
            || !(MIN_LOG_CLUSTER_SIZE..=MAX_LOG_CLUSTER_SIZE).contains(&log)
        {
            return Err(Error::InvalidArgument(
                "compress option: algorithm 0 to 3 and cluster log 2 to 8",
            ));
        }
        self.changing(0, |_| {
            self.live(ino)?;
            let mut e = self.edit(ino)?;
            if e.inode.compression.is_none() {
                return Err(Error::InvalidArgument("not a compressed file"));
            }
            if e.inode.blocks > 1 {
                return Err(Error::FileTooBig);
            }
            let at = COMPR_BLOCKS_AT + 8;
            if let Some(f) = e.block.get_mut(at..at + 2) {
                f.copy_from_slice(&[algorithm, log]);
            }
            e.inode = crate::ns::edit::reparse(self, e.ino, &mut e.block)?;
            self.commit(e)
        })
    }
}
