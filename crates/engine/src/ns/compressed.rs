//! Reading compressed files (see `uf2fs_format::compress` for the cluster layout).
//!
//! A read is cut at cluster boundaries. A plain cluster reads block by block like any file
//! (holes and NEW_ADDR as zeros); a compressed one is read whole (its compressed blocks, at
//! most cluster_size - 1 of them, wherever they are), checked (layout, header, checksum,
//! exact decoded length) and decoded into one cluster-sized buffer, from which the asked part
//! is copied. Every failure names the inode and the cluster; nothing is returned for a cluster
//! that did not decode. Memory per read: the slots of the clusters it touches, one cluster's
//! compressed blocks and one decoded cluster (1 MiB at most each).
//!
//! SEEK_DATA and SEEK_HOLE follow Linux 6.1 on compressed files: a slot holding a block
//! address is data, a NULL_ADDR slot is a hole, and COMPRESS_ADDR and NEW_ADDR slots are
//! neither (SEEK_DATA skips them, SEEK_HOLE does not stop at them).

use crate::error::{Error, Result};
use crate::ns::edit::Editing;
use crate::space::Log;
use crate::state::WriteState;
use crate::vol::Fs;
use crate::vol::Vol;
use uf2fs_format::compress::{compress_cluster, Algorithm, COMPRESS_CHKSUM, COMPRESS_LEVEL_OFFSET};
use uf2fs_format::compress::{compressed_block_count, decompress_cluster, Compression};
use uf2fs_format::compress::{MAX_LOG_CLUSTER_SIZE, MIN_LOG_CLUSTER_SIZE};
use uf2fs_format::inode::Inode;
use uf2fs_format::inode::{iflags, inline_flags, FileType};
use uf2fs_format::superblock::feature;
use uf2fs_format::{names_block, CorruptKind, BLOCK_SIZE, COMPRESS_ADDR, NEW_ADDR, NULL_ADDR};

const BS: u64 = BLOCK_SIZE as u64;

impl Vol {
    /// Fills `out` with the bytes of compressed file `inode` from `offset` on (the caller has
    /// cut `out` at i_size).
    pub(crate) fn read_compressed(
        &self,
        inode: &Inode,
        c: &Compression,
        offset: u64,
        out: &mut [u8],
    ) -> Result<()> {
        if out.is_empty() {
            return Ok(());
        }
        let ino = inode.ino;
        let cb = c.cluster_blocks();
        let cbytes = cb * BS;
        let end = offset + out.len() as u64;
        let (first, last) = (offset / cbytes, (end - 1) / cbytes);
        let base = first * cb;
        let nslots = usize::try_from((last + 1 - first) * cb).unwrap_or(0);
        let mut slots = vec![NULL_ADDR; nslots];
        self.for_each_slot(inode, base, base + nslots as u64, &mut |fblk, addr| {
            if let Some(s) = slots.get_mut((fblk - base) as usize) {
                *s = addr;
            }
            Ok(())
        })?;
        let mut cluster_buf = Vec::new();
        let mut cdata = Vec::new();
        for (k, cs) in (first..=last).zip(slots.chunks(cb as usize)) {
            let cstart = k * cbytes;
            let (lo, hi) = (cstart.max(offset), (cstart + cbytes).min(end));
            let dst = out
                .get_mut((lo - offset) as usize..(hi - offset) as usize)
                .unwrap_or(&mut []);
            let (head, rest) = cs.split_first().unwrap_or((&NULL_ADDR, &[]));
            if *head == COMPRESS_ADDR {
                self.decode_cluster(ino, c, k, rest, &mut cdata, &mut cluster_buf)?;
                let src = cluster_buf
                    .get((lo - cstart) as usize..(hi - cstart) as usize)
                    .unwrap_or(&[]);
                dst.copy_from_slice(src);
            } else {
                self.read_plain_cluster(ino, k, cs, cstart, lo, dst)?;
            }
        }
        Ok(())
    }

    /// Decodes compressed cluster `k` of inode `ino` (`rest`: its slots after COMPRESS_ADDR)
    /// into `out` (resized to the cluster), its compressed blocks read into `cdata`.
    fn decode_cluster(
        &self,
        ino: u32,
        c: &Compression,
        k: u64,
        rest: &[u32],
        cdata: &mut Vec<u8>,
        out: &mut Vec<u8>,
    ) -> Result<()> {
        let cb = c.cluster_blocks();
        let n = compressed_block_count(ino, k, rest, names_block)?;
        cdata.resize(n * BLOCK_SIZE, 0);
        for (i, &addr) in rest.iter().take(n).enumerate() {
            let fblk = k * cb + 1 + i as u64;
            self.check_data_addr(ino, fblk, addr)?;
            let b = cdata
                .get_mut(i * BLOCK_SIZE..(i + 1) * BLOCK_SIZE)
                .unwrap_or(&mut []);
            self.read_data(
                u64::from(addr),
                b,
                &format!("compressed data of inode {ino}"),
            )?;
        }
        out.resize(c.cluster_bytes(), 0);
        Ok(decompress_cluster(c, ino, k, cdata, out)?)
    }

    /// The whole of cluster `k` of inode `ino` (slots `cs`) into `out` (resized to the
    /// cluster): decoded when compressed, else block by block with holes as zeros.
    pub(crate) fn read_cluster(
        &self,
        ino: u32,
        c: &Compression,
        k: u64,
        cs: &[u32],
        out: &mut Vec<u8>,
    ) -> Result<()> {
        match cs.split_first() {
            Some((&COMPRESS_ADDR, rest)) => {
                let mut cdata = Vec::new();
                self.decode_cluster(ino, c, k, rest, &mut cdata, out)
            }
            _ => {
                out.clear();
                out.resize(c.cluster_bytes(), 0);
                let cstart = k * c.cluster_blocks() * BS;
                self.read_plain_cluster(ino, k, cs, cstart, cstart, out)
            }
        }
    }

    /// The bytes [lo, lo + dst.len()) of plain cluster `k` (slots `cs`, starting at byte
    /// `cstart` of the file).
    fn read_plain_cluster(
        &self,
        ino: u32,
        k: u64,
        cs: &[u32],
        cstart: u64,
        lo: u64,
        dst: &mut [u8],
    ) -> Result<()> {
        let hi = lo + dst.len() as u64;
        let mut pos = lo;
        let mut tmp = [0u8; BLOCK_SIZE];
        while pos < hi {
            let i = (pos - cstart) / BS;
            let bend = (cstart + (i + 1) * BS).min(hi);
            let part = dst
                .get_mut((pos - lo) as usize..(bend - lo) as usize)
                .unwrap_or(&mut []);
            let addr = cs.get(i as usize).copied().unwrap_or(NULL_ADDR);
            if addr == COMPRESS_ADDR {
                return Err(CorruptKind::CompressedCluster {
                    ino,
                    cluster: k,
                    why: "COMPRESS_ADDR is not in the cluster's first slot",
                }
                .into());
            }
            if names_block(addr) {
                let fblk = cstart / BS + i;
                self.check_data_addr(ino, fblk, addr)?;
                self.read_data(u64::from(addr), &mut tmp, &format!("data of inode {ino}"))?;
                let at = ((pos - cstart) % BS) as usize;
                part.copy_from_slice(tmp.get(at..at + part.len()).unwrap_or(&[]));
            } else {
                part.fill(0);
            }
            pos = bend;
        }
        Ok(())
    }

    fn check_data_addr(&self, ino: u32, fblk: u64, addr: u32) -> Result<()> {
        if !self.layout.in_main(addr) {
            return Err(CorruptKind::DataAddress {
                ino,
                fblk,
                blkaddr: addr,
            }
            .into());
        }
        Ok(())
    }

    /// SEEK_DATA (`hole == false`) or SEEK_HOLE from `offset` in compressed file `inode`, as
    /// Linux 6.1 answers (see the module's comment); None: no data at or after `offset`.
    pub(crate) fn seek_compressed(
        &self,
        inode: &Inode,
        offset: u64,
        hole: bool,
    ) -> Result<Option<u64>> {
        let blocks = inode.size.div_ceil(BS);
        let mut expect = offset / BS;
        let mut found: Option<u64> = None;
        self.for_each_slot(inode, offset / BS, blocks, &mut |fblk, addr| {
            if found.is_some() {
                return Ok(());
            }
            if hole {
                if fblk > expect {
                    found = Some(expect);
                } else {
                    expect = fblk + 1;
                }
            } else if names_block(addr) {
                found = Some(fblk);
            }
            Ok(())
        })?;
        let at = |b: u64| (b * BS).max(offset).min(inode.size);
        Ok(match (found, hole) {
            (Some(b), _) => Some(at(b)),
            (None, true) => Some(at(expect)),
            (None, false) => None,
        })
    }
}

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
            let compress = !self.vol().options.compress.user_mode;
            self.store_cluster(ws, e, c, k, &slots, &buf, new_size, touched, compress)?;
        }
        Ok(())
    }

    /// Cuts compressed file `e` to `size` bytes, inside a change (the caller sets the size):
    /// clusters past it are freed; a compressed cluster it cuts is decoded and stored again
    /// plain, its tail zeroed (a cluster the file no longer covers whole is never compressed).
    /// A plain cluster it cuts is left to the caller's block-wise truncation.
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
    fn cluster_slots(&self, e: &Editing, c: &Compression, k: u64) -> Result<Vec<u32>> {
        let cb = c.cluster_blocks();
        let first = k * cb;
        let mut slots = vec![NULL_ADDR; cb as usize];
        if first < e.inode.addrs_in_inode() as u64 {
            for (i, s) in slots.iter_mut().enumerate() {
                *s = crate::ns::edit::get32(&e.block, e.addr_slot(first as usize + i));
            }
            return Ok(slots);
        }
        self.vol()
            .for_each_slot(&e.inode, first, first + cb, &mut |fblk, addr| {
                if let Some(s) = slots.get_mut((fblk - first) as usize) {
                    *s = addr;
                }
                Ok(())
            })?;
        Ok(slots)
    }

    /// Stores cluster `k` (whose slots were `old`) as `bytes`, the file being `size` bytes
    /// long (`compress`: whether it may be compressed at all): compressed when the file reaches into its last block and it shrinks by a block,
    /// else plain
    /// (only the blocks in `touched` written when it was plain already).
    #[allow(clippy::too_many_arguments)]
    fn store_cluster(
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
    pub(crate) fn set_compress_context(&self, e: &mut Editing) -> Result<()> {
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
            if uf2fs_format::le64(&e.block, COMPR_BLOCKS_AT).unwrap_or(0) == 0 {
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
        // Counted first, so that the change asks for the room before it changes anything.
        let cb = c.cluster_blocks();
        let mut need = 0u64;
        let mut cluster: Option<(u64, u64)> = None; // (cluster, valid blocks) of a compressed one
        let mut count = |cl: Option<(u64, u64)>| {
            if let Some((_, n)) = cl {
                need += cb - n;
            }
        };
        self.data_slots(ino, &mut |fblk, addr| {
            let k = fblk / cb;
            if cluster.is_some_and(|(ck, _)| ck != k) {
                count(cluster.take());
            }
            if addr == COMPRESS_ADDR && fblk % cb == 0 {
                cluster = Some((k, 0));
            } else if names_block(addr) {
                if let Some((ck, n)) = cluster.as_mut() {
                    if *ck == k {
                        *n += 1;
                    }
                }
            }
            Ok(())
        })?;
        count(cluster.take());
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

/// Where `i_compr_blocks` sits in the inode block (the extra area's fourth field).
const COMPR_BLOCKS_AT: usize = uf2fs_format::inode::I_ADDR_OFFSET + 24;

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
