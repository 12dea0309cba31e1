//! File block mapping: the inode's own slots, two direct nodes, two indirect nodes and one
//! double-indirect node. The walk visits only the nodes that cover the asked range, skips a
//! whole subtree when its nid is 0 (a hole), and checks every node's footer against the
//! offset the tree says it must have, so a node pointing back at an ancestor fails instead
//! of looping. Addresses are checked to be in the main area; NEW_ADDR reads as a hole.

use crate::error::Result;
use crate::node::Expect;
use crate::vol::{Extent, Vol};
use uf2fs_format::inode::Inode;
use uf2fs_format::node::{entry, ofs, NIDS_PER_BLOCK};
use uf2fs_format::{Block, CorruptKind, NEW_ADDR, NULL_ADDR};

/// The part of [start, end) that falls in the span [base, base + len), relative to base.
fn overlap(base: u64, len: u64, start: u64, end: u64) -> Option<(u64, u64)> {
    let lo = start.max(base);
    let hi = end.min(base.saturating_add(len));
    (lo < hi).then(|| (lo - base, hi - base))
}

type Visit<'a> = dyn FnMut(u64, u32) -> Result<()> + 'a;

impl Vol {
    fn check_addr(&self, inode: &Inode, fblk: u64, addr: u32) -> Result<bool> {
        if addr == NULL_ADDR || addr == NEW_ADDR {
            return Ok(false);
        }
        if !self.layout.in_main(addr) {
            return Err(CorruptKind::DataAddress {
                ino: inode.ino,
                fblk,
                blkaddr: addr,
            }
            .into());
        }
        Ok(true)
    }

    fn visit_dnode(&self, block: &Block, base: u64, lo: u64, hi: u64, f: &mut Visit) -> Result<()> {
        for i in lo..hi {
            let addr = entry(block, i);
            if addr != NULL_ADDR {
                f(base + i, addr)?;
            }
        }
        Ok(())
    }

    fn node(&self, nid: u32, ino: u32, ofs: u64) -> Result<std::sync::Arc<Block>> {
        self.nodes
            .read(&*self.dev, &self.nat, nid, Expect { ino, ofs })
    }

    /// Calls `f(file_block, block_addr)` for every written block of `inode` in [start, end),
    /// each address checked to be in the main area (NEW_ADDR skipped; COMPRESS_ADDR, which
    /// only a compressed file's reader may meet, is corruption here).
    pub(crate) fn for_each_addr(
        &self,
        inode: &Inode,
        start: u64,
        end: u64,
        f: &mut Visit,
    ) -> Result<()> {
        self.for_each_slot(inode, start, end, &mut |fblk, addr| {
            if self.check_addr(inode, fblk, addr)? {
                f(fblk, addr)?;
            }
            Ok(())
        })
    }

    /// Calls `f(file_block, slot)` for every slot of `inode` in [start, end) that is not
    /// NULL_ADDR, unchecked: NEW_ADDR and COMPRESS_ADDR included.
    pub(crate) fn for_each_slot(
        &self,
        inode: &Inode,
        start: u64,
        end: u64,
        f: &mut Visit,
    ) -> Result<()> {
        let ino = inode.ino;
        // A compressed file's inode and direct nodes hold whole clusters only (Linux aligns
        // their address counts down to the cluster size); others use every slot.
        let a = inode.addrs_in_inode() as u64;
        let n = inode.addrs_per_dnode();
        let m = NIDS_PER_BLOCK;
        if let Some((lo, hi)) = overlap(0, a, start, end) {
            for i in lo..hi {
                let addr = inode.data_addr(i as usize);
                if addr != NULL_ADDR {
                    f(i, addr)?;
                }
            }
        }
        let mut base = a;
        for slot in 0..2usize {
            if let Some((lo, hi)) = overlap(base, n, start, end) {
                let nid = inode.nid(slot);
                if nid != 0 {
                    let b = self.node(nid, ino, ofs::top(slot))?;
                    self.visit_dnode(&b, base, lo, hi, f)?;
                }
            }
            base += n;
        }
        for slot in 2..4usize {
            let span = n * m;
            if let Some((lo, hi)) = overlap(base, span, start, end) {
                let nid = inode.nid(slot);
                if nid != 0 {
                    let ind = self.node(nid, ino, ofs::top(slot))?;
                    for child in lo / n..=(hi - 1) / n {
                        let cnid = entry(&ind, child);
                        if cnid == 0 {
                            continue;
                        }
                        let cbase = base + child * n;
                        let (clo, chi) = overlap(cbase, n, base + lo, base + hi).unwrap_or((0, 0));
                        let d = self.node(cnid, ino, ofs::indirect_child(slot, child))?;
                        self.visit_dnode(&d, cbase, clo, chi, f)?;
                    }
                }
            }
            base += span;
        }
        let span = n * m * m;
        if let Some((lo, hi)) = overlap(base, span, start, end) {
            let nid = inode.nid(4);
            if nid != 0 {
                let dind = self.node(nid, ino, ofs::top(4))?;
                for j in lo / (n * m)..=(hi - 1) / (n * m) {
                    let jnid = entry(&dind, j);
                    if jnid == 0 {
                        continue;
                    }
                    let jbase = base + j * n * m;
                    let (jlo, jhi) = overlap(jbase, n * m, base + lo, base + hi).unwrap_or((0, 0));
                    let ind = self.node(jnid, ino, ofs::dind_child(j))?;
                    for k in jlo / n..=(jhi.max(1) - 1) / n {
                        let knid = entry(&ind, k);
                        if knid == 0 || jlo >= jhi {
                            continue;
                        }
                        let kbase = jbase + k * n;
                        let (klo, khi) =
                            overlap(kbase, n, jbase + jlo, jbase + jhi).unwrap_or((0, 0));
                        let d = self.node(knid, ino, ofs::dind_grandchild(j, k))?;
                        self.visit_dnode(&d, kbase, klo, khi, f)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Runs of contiguous file blocks at contiguous addresses, in file order.
    pub(crate) fn extents(
        &self,
        inode: &Inode,
        start: u64,
        end: u64,
        f: &mut dyn FnMut(Extent) -> Result<()>,
    ) -> Result<()> {
        let mut cur: Option<Extent> = None;
        self.for_each_addr(inode, start, end, &mut |fblk, addr| {
            if let Some(e) = cur.as_mut() {
                if e.fblk + e.len == fblk && u64::from(e.addr) + e.len == u64::from(addr) {
                    e.len += 1;
                    return Ok(());
                }
            }
            if let Some(e) = cur.replace(Extent { fblk, addr, len: 1 }) {
                f(e)?;
            }
            Ok(())
        })?;
        if let Some(e) = cur {
            f(e)?;
        }
        Ok(())
    }
}
