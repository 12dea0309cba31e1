//! Roll-forward recovery: what fsync wrote after the last checkpoint, replayed at mount.
//!
//! **The chain.** fsync (ours or Linux's) writes a file's direct nodes into the warm-node log
//! from the position the last checkpoint recorded; each carries that checkpoint's cp_ver (with
//! its CRC in the high half under CRC_RECOVERY) and the address of the next block of the log.
//! The chain is followed from the checkpoint's position while the cp_ver matches; a block
//! from an older use of the log never matches (versions only grow, and the CRC differs). A
//! chain that comes back to a block it has visited is corrupt. Only addresses and footers are
//! kept while walking (16 bytes a block), so a hostile chain cannot take unbounded memory.
//!
//! **What is replayed**, as Linux does: the files that have an FSYNC-marked direct node in the
//! chain and either exist in the checkpoint or have an inode with the DENT mark (a new file:
//! its inode is made from the chain's copy, and its entry, by the name and parent the inode
//! records, once the chain is replayed). For each such file, its chain blocks up to its last
//! FSYNC-marked one, in chain order: an inode block gives the attributes (mode, owner, size,
//! times, flags), the inline data or inline xattrs, and the block pointers of its address
//! slots; a direct node gives the 1018 block pointers of its range (placed by its offset in
//! the tree: the nodes above it are made again if the checkpoint lacks them). A pointer to a
//! block written after the checkpoint makes that block valid with the file as its owner (in
//! the SIT and the segment's summary); a pointer it replaces is invalidated; NULL frees.
//!
//! **Nothing is overwritten before it is safe.** The segments the chain lies in are kept
//! from reuse and the logs continue after any block that recovery claims, so the chain stays
//! intact until the checkpoint that ends the recovery is durable: a crash during recovery
//! leaves the image as it was, to be recovered again. A read-only mount replays in memory
//! only (the device is never written).

use crate::durability::checkpoint::in_chain;
use crate::durability::state::RecoveryStats;
use crate::error::{Error, Result};
use crate::mount::read_block;
use crate::ns::edit::{reparse, Editing};
use crate::state::WriteState;
use crate::vol::Fs;
use foldhash::{HashMap, HashMapExt, HashSet, HashSetExt};
use uf2fs_device::{BlockDevice, IoCause};
use uf2fs_format::checkpoint::{Checkpoint, CURSEG_WARM_NODE};
use uf2fs_format::inode::{inline_flags, FileType, Inode, I_ADDR_OFFSET, I_NID_OFFSET};
use uf2fs_format::nat::NatEntry;
use uf2fs_format::node::{dnode_first_block, entry, Footer, ADDRS_PER_BLOCK, FOOTER_OFFSET};
use uf2fs_format::summary::RawSummary;
use uf2fs_format::superblock::Layout;
use uf2fs_format::{Block, CorruptKind, BLOCKS_PER_SEG, BLOCK_SIZE, NEW_ADDR, NULL_ADDR};

/// One block of the chain: where it is and its footer.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Link {
    pub addr: u32,
    pub footer: Footer,
}

fn corrupt(addr: u32, why: &'static str) -> Error {
    Error::Corrupt(CorruptKind::Recovery { blkaddr: addr, why })
}

/// The chain after checkpoint `cp`, in order (empty when nothing was fsync'd after it).
pub(crate) fn read_chain(
    dev: &dyn BlockDevice,
    layout: &Layout,
    cp: &Checkpoint,
) -> Result<Vec<Link>> {
    let Some(c) = cp.cursegs.get(CURSEG_WARM_NODE) else {
        return Ok(Vec::new());
    };
    let start = c
        .segno
        .checked_mul(BLOCKS_PER_SEG)
        .and_then(|b| b.checked_add(layout.main))
        .and_then(|b| b.checked_add(u32::from(c.blkoff)));
    let mut addr = match start {
        Some(a) => a,
        None => return Ok(Vec::new()),
    };
    let limit = u64::from(layout.main_segments) * u64::from(BLOCKS_PER_SEG);
    let mut seen = HashSet::new();
    let mut chain = Vec::new();
    while layout.in_main(addr) && u64::from(addr) < dev.block_count() {
        if !seen.insert(addr) || chain.len() as u64 >= limit {
            return Err(corrupt(
                addr,
                "the chain comes back to a block it has visited",
            ));
        }
        let b = read_block(dev, addr.into(), IoCause::Node, "roll-forward chain")?;
        let footer = Footer::of(&b);
        if !in_chain(footer.cp_ver, cp.version(), cp.crc, cp.flags()) {
            break;
        }
        chain.push(Link { addr, footer });
        addr = footer.next_blkaddr;
    }
    Ok(chain)
}

/// What recovery will do for one file.
struct Target {
    /// Index in the chain of the file's last FSYNC-marked block (the last one replayed).
    commit: usize,
    /// Index of the last inode block with the DENT mark: its name and parent get an entry.
    dent: Option<usize>,
    /// The inode is in no checkpoint: it is made from the chain's copy.
    create: bool,
}

/// How recovery finds the entry an inode records (`ci`, read from block `raw`) in `dir`, as
/// Linux 6.1's recovery does: by name in a plain directory (folded in a casefolded one);
/// in an encrypted one by the ciphertext bytes with, for the hash, the plain hash of those
/// bytes, or in an encrypted and casefolded directory (whose hash needs the key) the 4 bytes
/// the inode keeps right after the name.
fn recorded_query<'a>(
    v: &crate::vol::Vol,
    dir: &Inode,
    ci: &'a Inode,
    raw: &uf2fs_format::Block,
) -> Result<crate::ns::dir::Query<'a>> {
    if !dir.is_encrypted() {
        return v.dir_query(dir, &ci.name);
    }
    let hash = if dir.is_casefolded() {
        // i_name starts at byte 92 of the inode block.
        let at = 92 + ci.name.len();
        let bytes: [u8; 4] = raw
            .get(at..at + 4)
            .filter(|_| ci.name.len() + 4 <= uf2fs_format::inode::MAX_NAME_LEN)
            .and_then(|b| b.try_into().ok())
            .ok_or(Error::InvalidArgument(
                "no room for the hash after the recorded name",
            ))?;
        u32::from_le_bytes(bytes)
    } else {
        uf2fs_format::hash::dentry_hash(&ci.name)
    };
    Ok(crate::ns::dir::Query::Raw {
        name: &ci.name,
        hash,
    })
}

/// Whether a footer is that of a direct node (the inode itself, or a dnode).
fn is_dnode(f: &Footer) -> bool {
    let ofs = u64::from(f.ofs());
    (ofs == 0 && f.nid == f.ino) || (ofs != 0 && dnode_first_block(ofs, 0).is_some())
}

impl Fs {
    /// Replays `chain` into the writable state (memory only: the caller's checkpoint makes it
    /// durable). Notes what it skipped in `notes`.
    pub(crate) fn recover(
        &self,
        ws: &mut WriteState,
        chain: &[Link],
        notes: &mut Vec<String>,
    ) -> Result<RecoveryStats> {
        let v = self.vol();
        let dev = &*v.dev;
        let mut stats = RecoveryStats {
            chain_blocks: chain.len() as u64,
            ..Default::default()
        };
        // Keep the chain from being overwritten before the recovery checkpoint lands.
        for l in chain {
            if !ws.segs.keep_for_recovery(l.addr) {
                return Err(corrupt(l.addr, "outside the main area"));
            }
        }
        // 1. The files to replay.
        let mut order: Vec<u32> = Vec::new();
        let mut targets: HashMap<u32, Target> = HashMap::new();
        for (i, l) in chain.iter().enumerate() {
            let f = &l.footer;
            if !f.is_fsync() || !is_dnode(f) {
                continue;
            }
            let dent = f.ofs() == 0 && f.is_dent();
            if let Some(t) = targets.get_mut(&f.ino) {
                t.commit = i;
                if dent {
                    t.dent = Some(i);
                }
                continue;
            }
            let exists = match v.nat.lookup(dev, f.ino) {
                Ok(e) => e.is_some(),
                Err(_) => {
                    notes.push(format!(
                        "recovery: block {} names nid {} out of range; skipped",
                        l.addr, f.ino
                    ));
                    continue;
                }
            };
            if !exists && !dent {
                continue; // an fsync'd node of a file no checkpoint and no dentry mark makes
            }
            order.push(f.ino);
            targets.insert(
                f.ino,
                Target {
                    commit: i,
                    dent: dent.then_some(i),
                    create: !exists,
                },
            );
        }
        // 2. New inodes first, so that no node made while replaying takes their nids.
        let mut skip = Vec::new();
        for &ino in &order {
            let Some(t) = targets.get(&ino) else { continue };
            if let Some(why) = self.check_dent(chain, t, ino)? {
                notes.push(format!("recovery: inode {ino}: {why}; not recovered"));
                skip.push(ino);
                continue;
            }
            if t.create {
                let Some(l) = t.dent.and_then(|i| chain.get(i)) else {
                    continue;
                };
                let b = read_block(dev, l.addr.into(), IoCause::Node, "roll-forward inode")?;
                self.make_inode(ws, ino, &b)?;
            }
        }
        for ino in skip {
            targets.remove(&ino);
        }
        // 3. Replay, in chain order.
        for (i, l) in chain.iter().enumerate() {
            let f = &l.footer;
            let Some(t) = targets.get(&f.ino) else {
                continue;
            };
            if i > t.commit || !is_dnode(f) {
                continue;
            }
            let b = read_block(dev, l.addr.into(), IoCause::Node, "roll-forward node")?;
            let mut e = self.edit(f.ino)?;
            if e.inode.file_type != FileType::Regular {
                return Err(corrupt(
                    l.addr,
                    "fsync'd node of an inode that is not a regular file",
                ));
            }
            stats.addresses += if f.ofs() == 0 {
                self.replay_inode(ws, &mut e, &b, l.addr)?
            } else {
                self.replay_dnode(ws, &mut e, u64::from(f.ofs()), &b)?
            };
            self.commit(e)?;
        }
        // 4. Entries of new files, by the name and parent their inode records.
        for &ino in &order {
            let Some(t) = targets.get(&ino) else { continue };
            stats.inodes += 1;
            let Some(l) = t.dent.and_then(|i| chain.get(i)) else {
                continue;
            };
            let b = read_block(dev, l.addr.into(), IoCause::Node, "roll-forward inode")?;
            let ci = Inode::parse(&b, ino, &v.sb)?;
            let dir = self.inode(ci.pino)?;
            let q = recorded_query(v, &dir, &ci, &b)?;
            match v.lookup_query(&dir, &q) {
                Ok(x) if x == ino => continue,
                Ok(other) => {
                    // The name now belongs to the fsync'd file (the older file loses a link).
                    let found = self.find_entry_query(&dir, &q)?;
                    self.remove_entry(ws, ci.pino, &found)?;
                    self.drop_link(ws, other)?;
                }
                Err(Error::NotFound) => {}
                Err(e) => return Err(e),
            }
            self.add_entry_hashed(ws, ci.pino, &ci.name, q.hash(), ino, FileType::Regular)?;
            stats.dentries += 1;
        }
        ws.segs.rebuild_sections();
        Ok(stats)
    }

    /// Why a file's chain cannot be replayed (`None`: it can): a new inode must be a regular
    /// file whose recorded parent is a directory, and its recorded name must be one a
    /// directory can hold; a name taken by a directory is not given up.
    fn check_dent(&self, chain: &[Link], t: &Target, ino: u32) -> Result<Option<String>> {
        let Some(l) = t.dent.and_then(|i| chain.get(i)) else {
            return Ok(None);
        };
        let v = self.vol();
        let b = read_block(&*v.dev, l.addr.into(), IoCause::Node, "roll-forward inode")?;
        let ci = match Inode::parse(&b, ino, &v.sb) {
            Ok(i) => i,
            Err(e) => return Ok(Some(format!("its inode in the chain is bad ({e})"))),
        };
        if ci.file_type != FileType::Regular {
            return Ok(Some("not a regular file".into()));
        }
        let dir = match self.inode(ci.pino) {
            Ok(p) if p.file_type == FileType::Directory => p,
            _ => {
                return Ok(Some(format!(
                    "its recorded parent {} is not a directory",
                    ci.pino
                )))
            }
        };
        // In an encrypted directory the recorded name is ciphertext: any bytes.
        let valid = if dir.is_encrypted() {
            !ci.name.is_empty()
        } else {
            crate::ns::write::check_name(&ci.name).is_ok()
        };
        if !valid {
            return Ok(Some("its recorded name is not a valid file name".into()));
        }
        let q = match recorded_query(v, &dir, &ci, &b) {
            Ok(q) => Some(q),
            Err(e) if dir.is_encrypted() => {
                return Ok(Some(format!("its recorded name cannot be looked up ({e})")))
            }
            Err(_) => None,
        };
        if let Some(x) = q.and_then(|q| v.lookup_query(&dir, &q).ok()) {
            if x != ino
                && self
                    .inode(x)
                    .is_ok_and(|i| i.file_type == FileType::Directory)
            {
                return Ok(Some("its name belongs to a directory".into()));
            }
        }
        Ok(None)
    }

    /// Makes inode `ino`, in no checkpoint, from its copy `c` in the chain: its attributes and
    /// name, no data yet (the replay brings it), one link (the entry made at the end).
    fn make_inode(&self, ws: &mut WriteState, ino: u32, c: &Block) -> Result<()> {
        let v = self.vol();
        let ci = Inode::parse(c, ino, &v.sb)?;
        let mut b = [0u8; BLOCK_SIZE];
        let head = I_ADDR_OFFSET + usize::from(ci.extra_isize);
        if let (Some(dst), Some(src)) = (b.get_mut(..head), c.get(..head)) {
            dst.copy_from_slice(src);
        }
        let keep =
            inline_flags::INLINE_XATTR | inline_flags::EXTRA_ATTR | inline_flags::INLINE_DATA;
        if let Some(x) = b.get_mut(3) {
            *x &= keep;
        }
        let put = |b: &mut Block, at: usize, bytes: &[u8]| {
            if let Some(d) = b.get_mut(at..at + bytes.len()) {
                d.copy_from_slice(bytes);
            }
        };
        put(&mut b, 12, &1u32.to_le_bytes()); // links: the entry made at the end
        put(&mut b, 16, &0u64.to_le_bytes()); // size: the replay sets it
        put(&mut b, 24, &1u64.to_le_bytes()); // blocks: the inode alone
        put(&mut b, 76, &0u32.to_le_bytes()); // no xattr node
        if let Some(ext) = b.get_mut(348..I_ADDR_OFFSET) {
            ext.fill(0); // no extent cache
        }
        let footer_flag = Footer::of(c).flag & uf2fs_format::node::COLD_BIT;
        put(&mut b, FOOTER_OFFSET, &ino.to_le_bytes());
        put(&mut b, FOOTER_OFFSET + 4, &ino.to_le_bytes());
        put(&mut b, FOOTER_OFFSET + 8, &footer_flag.to_le_bytes());
        let inode = reparse(self, ino, &mut b)?;
        let words = usize::from(inode.inline_xattr_words);
        if inode.has_inline_xattr() && words == usize::from(ci.inline_xattr_words) {
            let r = I_NID_OFFSET - 4 * words..I_NID_OFFSET;
            if let (Some(dst), Some(src)) = (b.get_mut(r.clone()), c.get(r)) {
                dst.copy_from_slice(src);
            }
        }
        let version = v.nat.entry(&*v.dev, ino)?.version;
        v.nat.set(
            ino,
            NatEntry {
                version,
                ino,
                block_addr: NEW_ADDR,
            },
        )?;
        ws.counts.valid_nodes += 1;
        ws.counts.valid_inodes += 1;
        ws.counts.valid_blocks += 1;
        self.commit(Editing {
            ino,
            inode: reparse(self, ino, &mut b)?,
            block: b.into(),
            now: self.clock(),
            was: None,
        })
    }

    /// Replays an inode block of the chain: attributes, inline data and xattrs, and the block
    /// pointers of its address slots. Returns the pointers changed.
    fn replay_inode(
        &self,
        ws: &mut WriteState,
        e: &mut Editing,
        c: &Block,
        at: u32,
    ) -> Result<u64> {
        let ci = Inode::parse(c, e.ino, &self.vol().sb)?;
        if ci.file_type != FileType::Regular {
            return Err(corrupt(at, "fsync'd inode is not a regular file"));
        }
        // mode and advise; uid, gid; size; the three times and their nanoseconds; flags.
        for r in [0..3, 4..12, 16..24, 32..68, 80..84] {
            if let (Some(dst), Some(src)) = (e.block.get_mut(r.clone()), c.get(r)) {
                dst.copy_from_slice(src);
            }
        }
        let c_inline = ci.has_inline_data();
        match (c_inline, e.inode.has_inline_data()) {
            (true, true) => {
                let r = e.inline_range();
                let src = ci.inline_area();
                let n = src.len().min(r.len());
                if let (Some(dst), Some(src)) =
                    (e.block.get_mut(r.start..r.start + n), src.get(..n))
                {
                    dst.copy_from_slice(src);
                }
                let flags = (e.inline() & !inline_flags::DATA_EXIST)
                    | (ci.inline & inline_flags::DATA_EXIST);
                e.set_inline(flags);
            }
            (true, false) => {
                return Err(corrupt(
                    at,
                    "fsync'd inode keeps inline data, the file has blocks",
                ))
            }
            (false, true) => self.inline_to_blocks(ws, e, &[])?,
            (false, false) => {}
        }
        if ci.has_inline_xattr()
            && e.inode.has_inline_xattr()
            && ci.inline_xattr_words == e.inode.inline_xattr_words
        {
            let words = usize::from(ci.inline_xattr_words);
            let r = I_NID_OFFSET - 4 * words..I_NID_OFFSET;
            if let (Some(dst), Some(src)) = (e.block.get_mut(r.clone()), c.get(r)) {
                dst.copy_from_slice(src);
            }
        }
        e.inode = reparse(self, e.ino, &mut e.block)?;
        if c_inline {
            return Ok(0);
        }
        let mut n = 0;
        let slots = ci.addr_slots().min(e.inode.addr_slots());
        for i in 0..slots {
            n += u64::from(self.replay_addr(ws, e, i as u64, ci.data_addr(i))?);
        }
        Ok(n)
    }

    /// Replays a direct node of the chain at tree offset `ofs`: its 1018 block pointers.
    fn replay_dnode(
        &self,
        ws: &mut WriteState,
        e: &mut Editing,
        ofs: u64,
        c: &Block,
    ) -> Result<u64> {
        let Some(first) = dnode_first_block(ofs, e.inode.addr_slots() as u64) else {
            return Ok(0);
        };
        let mut n = 0;
        for k in 0..ADDRS_PER_BLOCK {
            n += u64::from(self.replay_addr(ws, e, first + k, entry(c, k))?);
        }
        Ok(n)
    }

    /// Points file block `fblk` at `dest` as the chain says. Returns whether it changed.
    fn replay_addr(
        &self,
        ws: &mut WriteState,
        e: &mut Editing,
        fblk: u64,
        dest: u32,
    ) -> Result<bool> {
        let cur = self.block_addr(e, fblk)?;
        if cur == dest {
            return Ok(false);
        }
        let v = self.vol();
        if uf2fs_format::names_block(dest) && !v.layout.in_main(dest) {
            return Err(corrupt(
                dest,
                "a replayed block pointer is outside the main area",
            ));
        }
        let (nid, index) = self.ensure_dnode(ws, e, fblk)?;
        if uf2fs_format::names_block(dest) {
            let version = v.nat.entry(&*v.dev, nid)?.version;
            let sum = RawSummary {
                nid: nid.into(),
                version,
                ofs_in_node: (index as u16).into(),
            };
            let ssa = u64::from(v.layout.ssa);
            ws.segs.claim(dest, sum, false, |segno| {
                read_block(&*v.dev, ssa + u64::from(segno), IoCause::Meta, "SSA block")
                    .map(Box::new)
            })?;
        }
        let old = self.set_addr(e, nid, index, dest)?;
        ws.sync.relinked.insert(e.ino);
        if old != NULL_ADDR && old != NEW_ADDR {
            e.drop_from_extent(old);
        }
        match (old, dest) {
            (NULL_ADDR, _) => {
                ws.counts.valid_blocks += 1;
                e.add_blocks(1);
            }
            (_, NULL_ADDR) => {
                if uf2fs_format::names_block(old) {
                    ws.segs.invalidate(old);
                }
                ws.counts.valid_blocks = ws.counts.valid_blocks.saturating_sub(1);
                e.add_blocks(-1);
            }
            (NEW_ADDR | uf2fs_format::COMPRESS_ADDR, _) => {}
            _ => {
                ws.segs.invalidate(old);
            }
        }
        Ok(true)
    }
}
