//! Reading compressed files.
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

use super::BS;
use crate::error::Result;
use crate::vol::Vol;
use uf2fs_format::compress::{compressed_block_count, decompress_cluster, Compression};
use uf2fs_format::inode::Inode;
use uf2fs_format::{names_block, CorruptKind, BLOCK_SIZE, COMPRESS_ADDR, NULL_ADDR};

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
        // The compressed blocks of every compressed cluster the read touches, read first, in
        // runs of adjacent addresses (clusters written together lie together): one device
        // read for a whole request where a block at a time took one per block.
        let mut spans = Vec::with_capacity(slots.len() / cb as usize + 1);
        let mut addrs: Vec<u32> = Vec::new();
        for (k, cs) in (first..=last).zip(slots.chunks(cb as usize)) {
            match cs.split_first() {
                Some((&COMPRESS_ADDR, rest)) => {
                    let n = compressed_block_count(ino, k, rest, names_block)?;
                    for (i, &addr) in rest.iter().take(n).enumerate() {
                        self.check_data_addr(ino, k * cb + 1 + i as u64, addr)?;
                    }
                    spans.push(Some((addrs.len(), n)));
                    addrs.extend(rest.iter().take(n));
                }
                _ => spans.push(None),
            }
        }
        let mut cdata = vec![0u8; addrs.len() * BLOCK_SIZE];
        self.read_runs(
            &addrs,
            &mut cdata,
            &format!("compressed data of inode {ino}"),
        )?;
        let mut cluster_buf = vec![0u8; c.cluster_bytes()];
        for ((k, cs), span) in (first..=last).zip(slots.chunks(cb as usize)).zip(spans) {
            let cstart = k * cbytes;
            let (lo, hi) = (cstart.max(offset), (cstart + cbytes).min(end));
            let dst = out
                .get_mut((lo - offset) as usize..(hi - offset) as usize)
                .unwrap_or(&mut []);
            if let Some((at, n)) = span {
                let blocks = cdata
                    .get(at * BLOCK_SIZE..(at + n) * BLOCK_SIZE)
                    .unwrap_or(&[]);
                decompress_cluster(c, ino, k, blocks, &mut cluster_buf)?;
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

    /// Reads the blocks at `addrs` into `buf` (one block each, in order), one device read
    /// per run of adjacent addresses.
    fn read_runs(&self, addrs: &[u32], buf: &mut [u8], what: &str) -> Result<()> {
        let mut i = 0;
        while i < addrs.len() {
            let start = addrs.get(i).copied().unwrap_or(0);
            let mut j = i + 1;
            while addrs
                .get(j)
                .is_some_and(|&a| u64::from(a) == u64::from(start) + (j - i) as u64)
            {
                j += 1;
            }
            let dst = buf
                .get_mut(i * BLOCK_SIZE..j * BLOCK_SIZE)
                .unwrap_or(&mut []);
            self.read_data(u64::from(start), dst, what)?;
            i = j;
        }
        Ok(())
    }

    /// The address slots of cluster `k` of compressed file `inode`, as stored.
    pub(crate) fn cluster_slots_of(
        &self,
        inode: &Inode,
        c: &Compression,
        k: u64,
    ) -> Result<Vec<u32>> {
        let cb = c.cluster_blocks();
        let first = k * cb;
        let mut slots = vec![NULL_ADDR; cb as usize];
        self.for_each_slot(inode, first, first + cb, &mut |fblk, addr| {
            if let Some(s) = slots.get_mut((fblk - first) as usize) {
                *s = addr;
            }
            Ok(())
        })?;
        Ok(slots)
    }

    /// Reads, and so checks, the cluster of compressed file `inode` that holds byte `pos`,
    /// if the file reaches it. A change that merges with a cluster calls this first: damage
    /// found inside a change stops the whole volume (its state may be half-changed), found
    /// here it fails only the request, with the error naming the inode and the cluster.
    pub(crate) fn precheck_cluster(&self, inode: &Inode, c: &Compression, pos: u64) -> Result<()> {
        let cbytes = c.cluster_bytes() as u64;
        let cstart = pos / cbytes * cbytes;
        if cstart >= inode.size {
            return Ok(());
        }
        let mut buf = vec![0u8; (inode.size - cstart).min(cbytes) as usize];
        self.read_compressed(inode, c, cstart, &mut buf)
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
        let addrs = rest.get(..n).unwrap_or(&[]);
        for (i, &addr) in addrs.iter().enumerate() {
            self.check_data_addr(ino, k * cb + 1 + i as u64, addr)?;
        }
        self.read_runs(addrs, cdata, &format!("compressed data of inode {ino}"))?;
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
