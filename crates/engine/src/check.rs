//! `fsck`, check-only: every invariant of the project's DESIGN.md that the image can show.
//! Everything reachable is walked (the tree from the root, orphans, quota inodes): every node
//! read checks its NAT entry and footer, every inode its fields and checksum. On top of that:
//! names are where their hash puts them, '.' and '..' point right, link counts and i_blocks
//! are exact, no block has two owners, the SIT's maps and counts equal the reachable blocks,
//! the SSA names each block's owner (for the current segments, the checkpoint pack's summaries), no NAT entry is in use without being reachable, and the checkpoint's counters
//! (valid blocks, nodes, inodes, free segments) are right.

use crate::error::Result;
use crate::mount::read_block;
use crate::node::Expect;
use crate::vol::Fs;
use foldhash::{HashMap, HashMapExt, HashSet, HashSetExt};
use std::collections::BTreeMap;
use uf2fs_device::IoCause;
use uf2fs_format::inode::{FileType, Inode};
use uf2fs_format::nat::{entry_in_block, nat_block_addr, NAT_ENTRIES_PER_BLOCK};
use uf2fs_format::node::{entry, ofs, XATTR_NODE_OFFSET};
use uf2fs_format::summary::RawSummary;
use uf2fs_format::{BLOCKS_PER_SEG, COMPRESS_ADDR, NEW_ADDR, NULL_ADDR};

/// What the check found.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct CheckReport {
    pub findings: Vec<String>,
    pub inodes: u64,
    pub nodes: u64,
    pub blocks: u64,
    pub directories: u64,
    pub names: u64,
}

/// Owner of a block: a node (`slot` None) or a data slot of a node.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Owner {
    nid: u32,
    slot: Option<u16>,
}

struct Walk<'a> {
    fs: &'a Fs,
    r: CheckReport,
    owners: HashMap<u32, Owner>,
    reserved: u64,
    nids: HashSet<u32>,
    links: HashMap<u32, u32>,
    /// The walked file's compression: None for a plain file, else whether its saved blocks
    /// were released.
    compressed: Option<bool>,
}

impl Walk<'_> {
    /// A COMPRESS_ADDR slot of inode `ino`: no block, but counted in i_blocks and the
    /// checkpoint's valid blocks as Linux counts it (not once the file's blocks were
    /// released).
    fn compress_slot(&mut self, ino: u32, place: &str) {
        match self.compressed {
            None => self.finding(format!(
                "inode {ino}: {place} holds COMPRESS_ADDR but the file is not compressed"
            )),
            Some(true) => {}
            Some(false) => {
                self.reserved += 1;
                self.r.blocks += 1;
            }
        }
    }

    fn finding(&mut self, s: String) {
        if self.r.findings.len() < 10_000 {
            self.r.findings.push(s);
        }
    }

    fn own(&mut self, addr: u32, o: Owner) {
        if addr == NEW_ADDR {
            self.reserved += 1;
            return;
        }
        if let Some(prev) = self.owners.insert(addr, o) {
            self.finding(format!(
                "block {addr} is used by nid {} and by nid {}",
                prev.nid, o.nid
            ));
        }
    }

    fn node_addr(&mut self, nid: u32) -> Option<u32> {
        match self.fs.vol().nat.lookup(&*self.fs.vol().dev, nid) {
            Ok(Some(e)) => Some(e.block_addr),
            Ok(None) => {
                self.finding(format!("nid {nid} is in use but free in the NAT"));
                None
            }
            Err(e) => {
                self.finding(format!("nid {nid}: {e}"));
                None
            }
        }
    }

    /// Walks one node tree level: returns the node blocks counted (0 or more).
    fn node(&mut self, ino: u32, nid: u32, ofs: u64, depth: u32) -> u64 {
        if !self.nids.insert(nid) {
            self.finding(format!("nid {nid} is reached twice (inode {ino})"));
            return 0;
        }
        let Some(addr) = self.node_addr(nid) else {
            return 0;
        };
        self.own(addr, Owner { nid, slot: None });
        let v = self.fs.vol();
        let b = match v.nodes.read(&*v.dev, &v.nat, nid, Expect { ino, ofs }) {
            Ok(b) => b,
            Err(e) => {
                self.finding(format!("inode {ino}: {e}"));
                return 1;
            }
        };
        let mut count = 1;
        for k in 0..1018u64 {
            let x = entry(&b, k);
            if x == NULL_ADDR {
                continue;
            }
            if depth == 0 {
                if x == COMPRESS_ADDR {
                    self.compress_slot(ino, &format!("dnode {nid} slot {k}"));
                    continue;
                }
                if x != NEW_ADDR && !v.layout.in_main(x) {
                    self.finding(format!("inode {ino}: dnode {nid} slot {k} points at block {x} outside the main area"));
                    continue;
                }
                self.own(
                    x,
                    Owner {
                        nid,
                        slot: Some(k as u16),
                    },
                );
                self.r.blocks += 1;
            } else {
                let child_ofs = child_ofs(ofs, k);
                count += self.node(ino, x, child_ofs, depth - 1);
            }
        }
        count
    }

    fn inode(&mut self, ino: u32) -> Option<Inode> {
        if !self.nids.insert(ino) {
            return None;
        }
        let addr = self.node_addr(ino)?;
        self.own(
            addr,
            Owner {
                nid: ino,
                slot: None,
            },
        );
        let i = match self.fs.inode(ino) {
            Ok(i) => (*i).clone(),
            Err(e) => {
                self.finding(format!("inode {ino}: {e}"));
                return None;
            }
        };
        self.r.inodes += 1;
        // r.blocks counts every data slot in use, NEW_ADDR ones too, as i_blocks does.
        let blocks_before = self.r.blocks;
        self.compressed = i.compression.map(|c| c.released);
        let mut nodes = 0u64;
        if !i.has_inline_data()
            && !i.has_inline_dentry()
            && matches!(
                i.file_type,
                FileType::Regular | FileType::Directory | FileType::Symlink
            )
        {
            for s in 0..i.addr_slots() {
                let a = i.data_addr(s);
                if a == NULL_ADDR {
                    continue;
                }
                if a == COMPRESS_ADDR {
                    self.compress_slot(ino, &format!("slot {s}"));
                    continue;
                }
                if a != NEW_ADDR && !self.fs.vol().layout.in_main(a) {
                    self.finding(format!(
                        "inode {ino}: slot {s} points at block {a} outside the main area"
                    ));
                    continue;
                }
                self.own(
                    a,
                    Owner {
                        nid: ino,
                        slot: Some(s as u16),
                    },
                );
                self.r.blocks += 1;
            }
            for (slot, depth) in [(0usize, 0u32), (1, 0), (2, 1), (3, 1), (4, 2)] {
                let nid = i.nid(slot);
                if nid != 0 {
                    nodes += self.node(ino, nid, ofs::top(slot), depth);
                }
            }
        }
        if i.xattr_nid != 0 && self.nids.insert(i.xattr_nid) {
            if let Some(a) = self.node_addr(i.xattr_nid) {
                self.own(
                    a,
                    Owner {
                        nid: i.xattr_nid,
                        slot: None,
                    },
                );
                let v = self.fs.vol();
                if let Err(e) = v.nodes.read(
                    &*v.dev,
                    &v.nat,
                    i.xattr_nid,
                    Expect {
                        ino,
                        ofs: u64::from(XATTR_NODE_OFFSET),
                    },
                ) {
                    self.finding(format!("inode {ino}: xattr node: {e}"));
                }
            }
            nodes += 1;
        }
        if let Err(e) = self.fs.xattrs(ino) {
            self.finding(format!("inode {ino}: {e}"));
        }
        self.r.nodes += 1 + nodes;
        let counted = 1 + nodes + (self.r.blocks - blocks_before);
        if i.blocks != counted {
            self.finding(format!(
                "inode {ino}: i_blocks {} but {counted} blocks found",
                i.blocks
            ));
        }
        Some(i)
    }
}

fn child_ofs(parent: u64, k: u64) -> u64 {
    if parent == ofs::top(2) {
        ofs::indirect_child(2, k)
    } else if parent == ofs::top(3) {
        ofs::indirect_child(3, k)
    } else if parent == ofs::top(4) {
        ofs::dind_child(k)
    } else {
        // A child of the j-th indirect node under the double indirect one.
        let j = (parent - ofs::dind_child(0)) / 1019;
        ofs::dind_grandchild(j, k)
    }
}

impl Fs {
    /// The on-disk names (not '.' and '..') and inode numbers of `dir`; unreadable parts are
    /// left out (the listing reports them).
    fn raw_entries(&self, dir: &Inode) -> Vec<(Vec<u8>, u32)> {
        let mut out = Vec::new();
        let _unreadable = self.vol().for_each_dentry(dir, &mut |e| {
            if e.name != b"." && e.name != b".." {
                out.push((e.name.to_vec(), e.ino));
            }
            Ok(std::ops::ControlFlow::Continue(()))
        });
        out
    }

    /// Checks the image; the report lists what is wrong (nothing for a clean image). The walk
    /// compares the tree with the SIT and SSA of the mounted checkpoint, so it needs a volume
    /// opened read-only: on a writable one, changes made since the mount would show as
    /// findings.
    pub fn check(&self) -> Result<CheckReport> {
        if self.is_writable() {
            return Err(crate::Error::InvalidArgument(
                "check needs the volume opened read-only (Fs::open): it compares the tree with \
                 the checkpoint it was mounted from",
            ));
        }
        let mut w = Walk {
            fs: self,
            r: CheckReport::default(),
            owners: HashMap::new(),
            reserved: 0,
            nids: HashSet::new(),
            links: HashMap::new(),
            compressed: None,
        };
        let root = self.root_ino();
        let mut subdirs: HashMap<u32, u32> = HashMap::new();
        let mut stack = vec![(root, root)];
        let mut seen_dirs = HashSet::new();
        w.inode(root);
        while let Some((dir, parent)) = stack.pop() {
            if !seen_dirs.insert(dir) {
                w.finding(format!("directory {dir} is reached twice"));
                continue;
            }
            w.r.directories += 1;
            let entries = match self.readdir(dir) {
                Ok(e) => e,
                Err(e) => {
                    w.finding(format!("directory {dir}: {e}"));
                    continue;
                }
            };
            for (name, want) in [(&b"."[..], dir), (&b".."[..], parent)] {
                match self.lookup(dir, name) {
                    Ok(got) if got == want => {}
                    Ok(got) => w.finding(format!(
                        "directory {dir}: {:?} points at {got}, not {want}",
                        String::from_utf8_lossy(name)
                    )),
                    Err(e) => w.finding(format!(
                        "directory {dir}: {:?}: {e}",
                        String::from_utf8_lossy(name)
                    )),
                }
            }
            // A no-key lookup trusts the stored hash; in an encrypted directory that is not
            // casefolded the hash is the plain hash of the ciphertext, so check that too
            // (casefolded ones hold a keyed hash only the key can check).
            if let Ok(d) = self.inode(dir) {
                if d.is_encrypted() && !d.is_casefolded() {
                    for (name, ino) in self.raw_entries(&d) {
                        let q = crate::ns::dir::Query::Raw {
                            name: &name,
                            hash: uf2fs_format::hash::dentry_hash(&name),
                        };
                        match self.vol().lookup_query(&d, &q) {
                            Ok(got) if got == ino => {}
                            other => w.finding(format!(
                                "directory {dir}: the entry of inode {ino} is not found by the hash of its encrypted name ({other:?})"
                            )),
                        }
                    }
                }
            }
            for e in entries {
                w.r.names += 1;
                match self.lookup(dir, &e.name) {
                    Ok(got) if got == e.ino => {}
                    other => w.finding(format!(
                        "directory {dir}: name {:?} is not found by its hash ({other:?})",
                        String::from_utf8_lossy(&e.name)
                    )),
                }
                *w.links.entry(e.ino).or_insert(0) += 1;
                let first = !w.nids.contains(&e.ino);
                let i = if first {
                    w.inode(e.ino)
                } else {
                    self.inode(e.ino).ok().map(|i| (*i).clone())
                };
                let Some(i) = i else { continue };
                if let Some(t) = e.file_type {
                    if t != i.file_type {
                        w.finding(format!(
                            "directory {dir}: name {:?} says {t:?}, inode {} is {:?}",
                            String::from_utf8_lossy(&e.name),
                            e.ino,
                            i.file_type
                        ));
                    }
                }
                if i.file_type == FileType::Directory {
                    *subdirs.entry(dir).or_insert(0) += 1;
                    stack.push((e.ino, dir));
                }
            }
        }
        // Link counts.
        let orphans: Vec<u32> = self.checkpoint_orphans()?;
        for &o in &orphans {
            w.inode(o);
        }
        for q in self.superblock().quota_inos() {
            if q != 0 {
                w.inode(q);
            }
        }
        let mut inos: Vec<u32> = w.nids.iter().copied().collect();
        inos.sort();
        for ino in inos {
            let Ok(i) = self.inode(ino) else { continue };
            if i.footer.ino != ino || i.footer.ofs() != 0 {
                continue; // not an inode (a node of one)
            }
            let names = w.links.get(&ino).copied().unwrap_or(0);
            let want = if i.file_type == FileType::Directory {
                2 + subdirs.get(&ino).copied().unwrap_or(0)
            } else if orphans.contains(&ino) || self.superblock().quota_inos().contains(&ino) {
                i.links
            } else {
                names
            };
            if i.links != want {
                w.finding(format!(
                    "inode {ino}: i_links {} but {want} expected",
                    i.links
                ));
            }
        }
        // SIT against the reachable blocks.
        let layout = self.vol().layout;
        let mut per_seg: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
        for &addr in w.owners.keys() {
            per_seg
                .entry((addr - layout.main) / BLOCKS_PER_SEG)
                .or_default()
                .push((addr - layout.main) % BLOCKS_PER_SEG);
        }
        let sit = self.sit_entries()?;
        let cursegs: HashSet<u32> = self.checkpoint().cursegs.iter().map(|c| c.segno).collect();
        let no_ssa = self.vol().sb.has(uf2fs_format::superblock::feature::RO);
        let mut free = 0u32;
        for (segno, e) in sit.iter().enumerate() {
            let segno = segno as u32;
            let offs = per_seg.get(&segno).cloned().unwrap_or_default();
            if e.valid_blocks == 0 && !cursegs.contains(&segno) {
                free += 1;
            }
            if usize::from(e.valid_blocks) != offs.len() {
                w.finding(format!(
                    "segment {segno}: SIT counts {} valid blocks, {} are reachable",
                    e.valid_blocks,
                    offs.len()
                ));
            }
            for off in &offs {
                if !e.is_valid(*off as usize) {
                    w.finding(format!(
                        "block {} is reachable but not valid in the SIT",
                        layout.main + segno * BLOCKS_PER_SEG + off
                    ));
                }
            }
            // SSA owners: the SSA block, or for a current segment the pack's summary.
            let cur = self
                .checkpoint()
                .cursegs
                .iter()
                .position(|c| c.segno == segno);
            let entries: Option<Vec<RawSummary>> = match cur {
                // A read-only (`ro` feature) image has no SSA, and its logs share segments.
                _ if offs.is_empty() || no_ssa => None,
                Some(i) => self.vol().cur_summaries.get(i).cloned().flatten(),
                None => {
                    let ssa = read_block(
                        &*self.vol().dev,
                        u64::from(layout.ssa) + u64::from(segno),
                        IoCause::Meta,
                        "SSA block",
                    )?;
                    Some(uf2fs_format::summary::Summary::from_block(&ssa).entries)
                }
            };
            if let Some(sum_entries) = entries {
                for off in offs {
                    let addr = layout.main + segno * BLOCKS_PER_SEG + off;
                    let Some(&o) = w.owners.get(&addr) else {
                        continue;
                    };
                    let s: RawSummary = sum_entries.get(off as usize).copied().unwrap_or_default();
                    let ok = s.nid.get() == o.nid
                        && o.slot.is_none_or(|slot| s.ofs_in_node.get() == slot);
                    if !ok {
                        w.finding(format!(
                            "block {addr}: SSA says nid {} slot {}, the owner is nid {} slot {:?}",
                            s.nid.get(),
                            s.ofs_in_node.get(),
                            o.nid,
                            o.slot
                        ));
                    }
                }
            }
        }
        // NAT entries in use that nothing reaches.
        for nid in self.nat_in_use()? {
            if nid > 2 && !w.nids.contains(&nid) {
                w.finding(format!("nid {nid} is in use in the NAT but not reachable"));
            }
        }
        // Checkpoint counters.
        let h = &self.checkpoint().head;
        let blocks = w.owners.len() as u64 + w.reserved;
        let checks = [
            ("valid_block_count", h.valid_block_count.get(), blocks),
            (
                "valid_node_count",
                u64::from(h.valid_node_count.get()),
                w.r.nodes,
            ),
            (
                "valid_inode_count",
                u64::from(h.valid_inode_count.get()),
                w.r.inodes,
            ),
            (
                "free_segment_count",
                u64::from(h.free_segment_count.get()),
                u64::from(free),
            ),
        ];
        for (name, cp, found) in checks {
            if cp != found {
                w.finding(format!("checkpoint {name} is {cp}, {found} found"));
            }
        }
        Ok(w.r)
    }

    /// Every nid whose effective NAT entry is in use.
    fn nat_in_use(&self) -> Result<Vec<u32>> {
        let v = self.vol();
        let mut out = Vec::new();
        for index in 0..v.layout.nat_blocks() {
            let addr = nat_block_addr(&v.layout, &v.cp.nat_bitmap, index);
            let b = read_block(&*v.dev, addr, IoCause::Meta, "NAT block")?;
            for k in 0..NAT_ENTRIES_PER_BLOCK as u32 {
                let nid = index * NAT_ENTRIES_PER_BLOCK as u32 + k;
                if nid == 0 {
                    continue;
                }
                let e = v
                    .nat
                    .entry(&*v.dev, nid)
                    .unwrap_or_else(|_| entry_in_block(&b, nid));
                if !e.is_free() {
                    out.push(nid);
                }
            }
        }
        Ok(out)
    }
}
