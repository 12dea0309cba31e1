//! Writing compressed files.

use super::BS;
use crate::error::Result;
use crate::ns::edit::Editing;
use crate::space::Log;
use crate::state::WriteState;
use crate::vol::Fs;
use uf2fs_format::compress::{
    compress_cluster, Algorithm, Compression, COMPRESS_CHKSUM, COMPRESS_LEVEL_OFFSET,
};
use uf2fs_format::inode::{iflags, inline_flags, FileType, Inode};
use uf2fs_format::superblock::feature;
use uf2fs_format::{BLOCK_SIZE, COMPRESS_ADDR, NEW_ADDR, NULL_ADDR};

/// Writing compressed files, as Linux 6.1 lays them out (see `docs/design.md`, "Compressed
/// files"). A write goes cluster by cluster: what the write does not cover is read back
/// (decoded when compressed), the new bytes merged, and the cluster stored again. A cluster
/// the file reaches into the last block of is compressed (`compress_mode=fs`) when that
/// saves a block, as Linux compresses a cluster whose pages all exist:
/// COMPRESS_ADDR, the compressed blocks, then NEW_ADDR slots that keep the saved blocks
/// reserved, each counted in i_blocks and valid blocks as Linux counts them, and its saved
/// blocks (cluster size less compressed blocks) in `i_compr_blocks`. Any other cluster is
/// stored plain: only the blocks the write touched are written when the cluster was plain,
/// all of them when it was compressed. Every block of a compressed file goes to the cold data
/// log, as Linux sends it; nothing is rewritten in place.
impl Fs {
    /// Writes `data` at byte `offset` of compressed file `e` (not released), inside a change;
    /// the caller sets the size and times.
    pub(crate) fn write_compressed(
        &self,
        ws: &mut WriteState,
        e: &mut Editing,
        c: &Compression,
        offset: u64,
        data: &[u8],
    ) -> Result<()> {
        if data.is_empty() {
            return Ok(());
        }
        // Roll-forward replays plain slots only: a compressed file's fsync checkpoints.
        self.needs_checkpoint(ws, e.ino);
        let cbytes = c.cluster_blocks() * BS;
        let end = offset + data.len() as u64;
        let old_size = e.size();
        let new_size = old_size.max(end);
        let compress = !self.vol().options.compress.user_mode;
        let mut buf = Vec::new();
        for k in offset / cbytes..=(end - 1) / cbytes {
            let cstart = k * cbytes;
            let (lo, hi) = (offset.max(cstart), end.min(cstart + cbytes));
            let slots = self.cluster_slots(e, c, k)?;
            let covers = lo == cstart && hi >= (cstart + cbytes).min(new_size);
            if covers || slots.iter().all(|&a| a == NULL_ADDR) {
                buf.clear();
                buf.resize(cbytes as usize, 0);
            } else {
                self.vol().read_cluster(e.ino, c, k, &slots, &mut buf)?;
                // Bytes past the old end of file read as zeros once the file grows.
                if let Some(tail) = buf.get_mut(old_size.saturating_sub(cstart) as usize..) {
                    tail.fill(0);
                }
            }
            let src = data
                .get((lo - offset) as usize..(hi - offset) as usize)
                .unwrap_or(&[]);
            if let Some(dst) = buf.get_mut((lo - cstart) as usize..(hi - cstart) as usize) {
                dst.copy_from_slice(src);
            }
            let touched = (lo - cstart) / BS..(hi - cstart).div_ceil(BS);
            self.store_cluster(ws, e, c, k, &slots, &buf, new_size, touched, compress)?;
        }
        Ok(())
    }

    /// Cuts compressed file `e` to `size` bytes, inside a change (the caller sets the size):
    /// clusters past it are freed; a compressed cluster it cuts is decoded, its tail zeroed,
    /// and stored again by the usual rule (compressed only if the file still reaches into its
    /// last block). A plain cluster it cuts is left to the caller's block-wise truncation.
    pub(crate) fn truncate_compressed(
        &self,
        ws: &mut WriteState,
        e: &mut Editing,
        c: &Compression,
        size: u64,
    ) -> Result<()> {
        self.needs_checkpoint(ws, e.ino);
        let cb = c.cluster_blocks();
        let cbytes = cb * BS;
        let k = size / cbytes;
        if !size.is_multiple_of(cbytes) {
            let slots = self.cluster_slots(e, c, k)?;
            if slots.first() == Some(&COMPRESS_ADDR) {
                let mut buf = Vec::new();
                self.vol().read_cluster(e.ino, c, k, &slots, &mut buf)?;
                if let Some(tail) = buf.get_mut((size % cbytes) as usize..) {
                    tail.fill(0);
                }
                self.punch(ws, e, (k + 1) * cb, u64::MAX)?;
                let compress = !self.vol().options.compress.user_mode;
                return self.store_cluster(ws, e, c, k, &slots, &buf, size, 0..0, compress);
            }
        }
        Ok(())
    }

    /// The address slots of cluster `k` of the file being edited (the inode's own slots
    /// read from the block being edited).
    pub(super) fn cluster_slots(&self, e: &Editing, c: &Compression, k: u64) -> Result<Vec<u32>> {
        let cb = c.cluster_blocks();
        let first = k * cb;
        if first < e.inode.addrs_in_inode() as u64 {
            return Ok((first..first + cb)
                .map(|f| crate::ns::edit::get32(&e.block, e.addr_slot(f as usize)))
                .collect());
        }
        self.vol().cluster_slots_of(&e.inode, c, k)
    }

    /// Stores cluster `k` (whose slots were `old`) as `bytes`, the file being `size` bytes
    /// long: compressed when `compress` allows it, the file reaches into the cluster's last
    /// block and it shrinks by a block; else plain (only the blocks in `touched` written when
    /// it was plain already).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn store_cluster(
        &self,
        ws: &mut WriteState,
        e: &mut Editing,
        c: &Compression,
        k: u64,
        old: &[u32],
        bytes: &[u8],
        size: u64,
        touched: std::ops::Range<u64>,
        compress: bool,
    ) -> Result<()> {
        let cb = c.cluster_blocks();
        let first = k * cb;
        let cbytes = cb * BS;
        let inside = size.saturating_sub(k * cbytes).min(cbytes);
        let was_compressed = old.first() == Some(&COMPRESS_ADDR);
        // Linux compresses a cluster once all its pages exist: the file reaches into its last
        // block (the bytes past the end of file in that block are zeros).
        let packed = (inside + BS > cbytes && compress)
            .then(|| compress_cluster(c, bytes))
            .flatten();
        let saved_after = match packed {
            Some(cdata) => {
                let n = (cdata.len() / BLOCK_SIZE) as u64;
                if old.iter().any(|&a| a != NULL_ADDR) {
                    self.punch(ws, e, first, first + cb)?;
                }
                self.write_file_blocks(
                    ws,
                    e,
                    Log::ColdData,
                    false,
                    cdata
                        .chunks(BLOCK_SIZE)
                        .zip(first + 1..)
                        .map(|(b, f)| (f, b)),
                )?;
                // COMPRESS_ADDR, then NEW_ADDR for the saved blocks: no block behind them,
                // but reserved, so counted as blocks are.
                let (nid, index) = self.ensure_dnode(ws, e, first)?;
                let mut marks = vec![(index, COMPRESS_ADDR)];
                marks.extend((n + 1..cb).map(|i| (index + i as usize, NEW_ADDR)));
                self.set_addrs(e, nid, &marks)?;
                let reserved = cb - n;
                ws.compress.clusters += 1;
                ws.compress.written_blocks += n;
                ws.compress.saved_blocks += reserved;
                ws.counts.valid_blocks += reserved;
                e.add_blocks(reserved as i64);
                reserved
            }
            None => {
                let blocks = inside.div_ceil(BS);
                let range = if was_compressed {
                    self.punch(ws, e, first, first + cb)?;
                    0..blocks
                } else {
                    if old.iter().skip(blocks as usize).any(|&a| a != NULL_ADDR) {
                        self.punch(ws, e, first + blocks, first + cb)?;
                    }
                    touched.start..touched.end.min(blocks)
                };
                self.write_file_blocks(
                    ws,
                    e,
                    Log::ColdData,
                    false,
                    range.map(|i| {
                        let at = (i * BS) as usize;
                        (first + i, bytes.get(at..at + BLOCK_SIZE).unwrap_or(&[]))
                    }),
                )?;
                0
            }
        };
        // The old cluster's saved blocks left `i_compr_blocks` with its slots (`free_addr`).
        e.add_compr_blocks(saved_after as i64);
        Ok(())
    }
}

impl Fs {
    /// What a new inode of type `ft` named `name` in directory `pdir` takes, by Linux 6.1's
    /// rules: `Some(true)` compression, `Some(false)` FS_NOCOMP_FL, `None` neither. Nothing
    /// without the compression feature; a regular file named with a superblock hot extension
    /// or a `nocompress_extension` takes nothing, one with a `compress_extension` is
    /// compressed; any other file, and every directory, follows its directory (FS_NOCOMP_FL
    /// first, then FS_COMPR_FL).
    pub(crate) fn compress_new(
        &self,
        pdir: &Inode,
        ft: Option<FileType>,
        name: &[u8],
    ) -> Option<bool> {
        let v = self.vol();
        if !v.sb.has(feature::COMPRESSION) {
            return None;
        }
        match ft {
            Some(FileType::Directory) => {}
            Some(FileType::Regular) => {
                let o = &v.options.compress;
                let (_, hot) = v.sb.extensions();
                if hot
                    .iter()
                    .any(|h| crate::vol::extension_matches(name, h.as_bytes()))
                    || o.no_extensions.matches(name)
                {
                    return None;
                }
                if o.extensions.matches(name) {
                    return Some(true);
                }
            }
            _ => return None,
        }
        if pdir.flags & iflags::NOCOMP != 0 {
            Some(false)
        } else if pdir.flags & iflags::COMPR != 0 {
            Some(true)
        } else {
            None
        }
    }

    /// Makes the inode being edited compressed as the mount options say (Linux's
    /// `set_compress_context`): FS_COMPR_FL, the algorithm, cluster size, checksum flag and
    /// level, no inline data (a compressed file keeps its bytes in clusters).
    pub(crate) fn set_compress_context(&self, ws: &mut WriteState, e: &mut Editing) -> Result<()> {
        ws.compress.new_inodes += 1;
        let o = self.vol().options.compress;
        let at = uf2fs_format::inode::I_ADDR_OFFSET + 24;
        let level = match o.algorithm {
            Algorithm::Lz4 | Algorithm::Zstd => u16::from(o.level),
            Algorithm::Lzo | Algorithm::LzoRle => 0,
        };
        let flag = (u16::from(o.checksum) * COMPRESS_CHKSUM) | (level << COMPRESS_LEVEL_OFFSET);
        if let Some(f) = e.block.get_mut(at + 8..at + 12) {
            f.copy_from_slice(&[
                o.algorithm as u8,
                o.log_cluster_size,
                flag.to_le_bytes()[0],
                flag.to_le_bytes()[1],
            ]);
        }
        let flags = crate::ns::edit::get32(&e.block, 80);
        e.set_u32(80, flags | iflags::COMPR);
        if e.inode.file_type == FileType::Regular {
            e.set_inline(e.inline() & !(inline_flags::INLINE_DATA | inline_flags::DATA_EXIST));
        }
        e.inode = crate::ns::edit::reparse(self, e.ino, &mut e.block)?;
        Ok(())
    }
}
