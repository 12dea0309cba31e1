//! Quota files: the Linux "vfsv1" quota tree that F2FS keeps in hidden regular files (the
//! superblock's `qf_ino`, one file each for users, groups and projects).
//!
//! The file is a run of 1 KiB quota blocks (not F2FS blocks):
//!
//! ```text
//! block 0   header (magic per type, version 1) and info (grace times, flags, the file's
//!           block count, the first free block, the first data block with a free entry)
//! block 1   root of a radix tree four levels deep: each tree block holds 256 le32 block
//!           numbers, indexed by one byte of the id (most significant first); the fourth
//!           level names the data block that holds the id's entry
//! data      a 16-byte header (next/previous block in the list of blocks with free entries,
//!           entry count) and 14 entries of 72 bytes: id, limits, usage, grace deadlines
//! ```
//!
//! An all-zero entry is free; an entry that would be all zero (id 0, nothing used, no
//! limits) carries `itime = 1` instead. [`QuotaTree`] holds a whole file in memory, finds
//! every id's entry through the tree (checking every block number against the file), adds
//! usage, and inserts entries for new ids the way the kernel's quota tree does, so that
//! fsck.f2fs and Linux read the result as their own.

use crate::CorruptKind;
use std::collections::{BTreeMap, BTreeSet};
use zerocopy::little_endian::{U16, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// Quota types in `qf_ino` order.
pub const USER: usize = 0;
pub const GROUP: usize = 1;
pub const PROJECT: usize = 2;
/// The magic of each type's file (`dqh_magic`).
pub const MAGICS: [u32; 3] = [0xd9c0_1f11, 0xd9c0_1927, 0xd9c0_3f14];
/// The only tree format version F2FS uses.
pub const VERSION: u32 = 1;
/// Size of a quota block.
pub const QBLOCK: usize = 1024;
/// The tree's root block and depth.
const ROOT: u32 = 1;
const DEPTH: usize = 4;
/// Entries in one data block.
pub const ENTRIES_PER_BLOCK: usize = (QBLOCK - DATA_HEADER) / ENTRY;
const ENTRY: usize = core::mem::size_of::<RawDquot>();
const DATA_HEADER: usize = core::mem::size_of::<RawDataHeader>();
/// The largest quota file we load (a million ids fit in about 75 MiB).
pub const MAX_FILE_BYTES: usize = 256 << 20;

/// Block 0: `v2_disk_dqheader` then `v2_disk_dqinfo`.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug, Default)]
#[repr(C)]
pub struct RawQuotaHeader {
    pub magic: U32,
    pub version: U32,
    pub block_grace: U32,
    pub inode_grace: U32,
    pub flags: U32,
    pub blocks: U32,
    pub free_blk: U32,
    pub free_entry: U32,
}
const _: () = assert!(core::mem::size_of::<RawQuotaHeader>() == 32);

/// The header of a data block (`qt_disk_dqdbheader`); free blocks use `next_free` only.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug, Default)]
#[repr(C)]
pub struct RawDataHeader {
    pub next_free: U32,
    pub prev_free: U32,
    pub entries: U16,
    pub pad1: U16,
    pub pad2: U32,
}
const _: () = assert!(core::mem::size_of::<RawDataHeader>() == 16);

/// One id's entry (`v2r1_disk_dqblk`). Space is in bytes, limits in 1 KiB quota blocks.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug, Default)]
#[repr(C)]
pub struct RawDquot {
    pub id: U32,
    pub pad: U32,
    pub inode_hard: U64,
    pub inode_soft: U64,
    pub inodes: U64,
    pub space_hard: U64,
    pub space_soft: U64,
    pub space: U64,
    pub space_deadline: U64,
    pub inode_deadline: U64,
}
const _: () = assert!(core::mem::size_of::<RawDquot>() == 72);
const _: () = assert!(ENTRIES_PER_BLOCK == 14);

/// A quota file in memory, its ids indexed.
#[derive(Debug, Clone)]
pub struct QuotaTree {
    ino: u32,
    kind: usize,
    bytes: Vec<u8>,
    /// Byte offset of each id's entry.
    entries: BTreeMap<u32, usize>,
    /// F2FS blocks (4 KiB) of the file changed since [`QuotaTree::take_dirty`].
    dirty: BTreeSet<u64>,
}

impl QuotaTree {
    /// Reads the quota file `bytes` (inode `ino`) of type `kind` (`USER`, `GROUP`,
    /// `PROJECT`): header, info, every tree block reachable from the root (each at most once)
    /// and every id's entry, all checked against the file's block count.
    pub fn parse(ino: u32, kind: usize, bytes: Vec<u8>) -> Result<QuotaTree, CorruptKind> {
        let bad = |why: String| CorruptKind::QuotaFile { ino, why };
        let magic = *MAGICS
            .get(kind)
            .ok_or_else(|| bad(format!("no quota type {kind}")))?;
        if bytes.len() > MAX_FILE_BYTES {
            return Err(bad(format!(
                "{} bytes, more than the {MAX_FILE_BYTES} uf2fs loads",
                bytes.len()
            )));
        }
        let (h, _) = RawQuotaHeader::read_from_prefix(&bytes)
            .map_err(|_| bad(format!("{} bytes: no room for the header", bytes.len())))?;
        if h.magic.get() != magic {
            return Err(bad(format!(
                "magic {:#x}, not {magic:#x} (type {kind})",
                h.magic.get()
            )));
        }
        if h.version.get() != VERSION {
            return Err(bad(format!("format version {}, not 1", h.version.get())));
        }
        let blocks = h.blocks.get();
        let have = bytes.len().div_ceil(QBLOCK);
        if (blocks as usize) > have || blocks <= ROOT {
            return Err(bad(format!(
                "info says {blocks} quota blocks, the file holds {have}"
            )));
        }
        for (name, v) in [
            ("free block", h.free_blk),
            ("free entry block", h.free_entry),
        ] {
            if v.get() >= blocks {
                return Err(bad(format!(
                    "{name} {} is past the {blocks} blocks",
                    v.get()
                )));
            }
        }
        let mut t = QuotaTree {
            ino,
            kind,
            bytes,
            entries: BTreeMap::new(),
            dirty: BTreeSet::new(),
        };
        // The file's length in whole quota blocks, so that every block named is in `bytes`.
        let whole = (blocks as usize) * QBLOCK;
        if t.bytes.len() < whole {
            t.bytes.resize(whole, 0);
        }
        let mut seen_tree = BTreeSet::new();
        t.walk(ROOT, 0, 0, blocks, &mut seen_tree)?;
        Ok(t)
    }

    fn walk(
        &mut self,
        blk: u32,
        depth: usize,
        prefix: u32,
        blocks: u32,
        seen: &mut BTreeSet<u32>,
    ) -> Result<(), CorruptKind> {
        let ino = self.ino;
        let bad = |why: String| CorruptKind::QuotaFile { ino, why };
        if !seen.insert(blk) {
            return Err(bad(format!("tree block {blk} is reached twice")));
        }
        for i in 0..256u32 {
            let r = self.word(blk as usize * QBLOCK + 4 * i as usize);
            if r == 0 {
                continue;
            }
            if r <= ROOT || r >= blocks {
                return Err(bad(format!(
                    "tree block {blk} names block {r}, outside 2..{blocks}"
                )));
            }
            let id = (prefix << 8) | i;
            if depth + 1 < DEPTH {
                self.walk(r, depth + 1, id, blocks, seen)?;
            } else {
                if seen.contains(&r) {
                    return Err(bad(format!("block {r} is both a tree and a data block")));
                }
                let at = self
                    .find_in_data(r, id)
                    .ok_or_else(|| bad(format!("no entry for id {id} in data block {r}")))?;
                self.entries.insert(id, at);
            }
        }
        Ok(())
    }

    fn word(&self, at: usize) -> u32 {
        self.bytes
            .get(at..at + 4)
            .and_then(|b| <[u8; 4]>::try_from(b).ok())
            .map_or(0, u32::from_le_bytes)
    }

    fn set_word(&mut self, at: usize, v: u32) {
        self.put(at, &v.to_le_bytes());
    }

    fn put(&mut self, at: usize, b: &[u8]) {
        if let Some(dst) = self.bytes.get_mut(at..at + b.len()) {
            dst.copy_from_slice(b);
            self.dirty.insert((at / crate::BLOCK_SIZE) as u64);
            self.dirty
                .insert(((at + b.len() - 1) / crate::BLOCK_SIZE) as u64);
        }
    }

    fn entry_at(&self, at: usize) -> RawDquot {
        self.bytes
            .get(at..at + ENTRY)
            .and_then(|b| RawDquot::read_from_bytes(b).ok())
            .unwrap_or_default()
    }

    fn is_free(&self, at: usize) -> bool {
        self.bytes
            .get(at..at + ENTRY)
            .is_none_or(|b| b.iter().all(|&x| x == 0))
    }

    /// The byte offset of `id`'s entry in data block `blk`.
    fn find_in_data(&self, blk: u32, id: u32) -> Option<usize> {
        let base = blk as usize * QBLOCK + DATA_HEADER;
        (0..ENTRIES_PER_BLOCK)
            .map(|i| base + i * ENTRY)
            .find(|&at| !self.is_free(at) && self.entry_at(at).id.get() == id)
    }

    fn header(&self) -> RawQuotaHeader {
        RawQuotaHeader::read_from_prefix(&self.bytes)
            .map(|(h, _)| h)
            .unwrap_or_default()
    }

    fn set_header(&mut self, h: RawQuotaHeader) {
        self.put(0, h.as_bytes());
    }

    fn data_header(&self, blk: u32) -> RawDataHeader {
        self.bytes
            .get(blk as usize * QBLOCK..)
            .and_then(|b| RawDataHeader::read_from_prefix(b).ok())
            .map(|(h, _)| h)
            .unwrap_or_default()
    }

    fn set_data_header(&mut self, blk: u32, h: RawDataHeader) {
        self.put(blk as usize * QBLOCK, h.as_bytes());
    }

    pub fn ino(&self) -> u32 {
        self.ino
    }

    pub fn kind(&self) -> usize {
        self.kind
    }

    /// The file's bytes (whole quota blocks).
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The ids with an entry, and their entries.
    pub fn entries(&self) -> impl Iterator<Item = (u32, RawDquot)> + '_ {
        self.entries
            .iter()
            .map(|(&id, &at)| (id, self.entry_at(at)))
    }

    /// `id`'s entry, if it has one.
    pub fn get(&self, id: u32) -> Option<RawDquot> {
        self.entries.get(&id).map(|&at| self.entry_at(at))
    }

    /// Adds `space` bytes and `inodes` inodes (either may be negative) to `id`'s usage,
    /// making an entry for `id` if it has none. Usage never goes below zero.
    pub fn add_usage(&mut self, id: u32, space: i64, inodes: i64) -> Result<(), CorruptKind> {
        let at = match self.entries.get(&id) {
            Some(&at) => at,
            None => self.insert(id)?,
        };
        let mut d = self.entry_at(at);
        d.space.set(d.space.get().saturating_add_signed(space));
        d.inodes.set(d.inodes.get().saturating_add_signed(inodes));
        self.store(at, d);
        Ok(())
    }

    /// Writes entry `d` at `at`; an entry that would read as free is marked used.
    fn store(&mut self, at: usize, mut d: RawDquot) {
        if d.as_bytes().iter().all(|&b| b == 0) {
            d.inode_deadline.set(1);
        }
        self.put(at, d.as_bytes());
    }

    /// A block for the tree or for data: the first of the free list, else a new one at the
    /// end of the file. Zeroed.
    fn new_block(&mut self) -> Result<u32, CorruptKind> {
        let mut h = self.header();
        let blk = match h.free_blk.get() {
            0 => {
                let blk = h.blocks.get();
                let end = (blk as usize + 1) * QBLOCK;
                if end > MAX_FILE_BYTES {
                    return Err(CorruptKind::QuotaFile {
                        ino: self.ino,
                        why: format!("would grow past the {MAX_FILE_BYTES} bytes uf2fs keeps"),
                    });
                }
                h.blocks.set(blk + 1);
                if self.bytes.len() < end {
                    self.bytes.resize(end, 0);
                }
                blk
            }
            free => {
                let next = self.data_header(free).next_free.get();
                if next != 0 && (next <= ROOT || next >= h.blocks.get()) {
                    return Err(CorruptKind::QuotaFile {
                        ino: self.ino,
                        why: format!("free block {free} links to block {next}"),
                    });
                }
                h.free_blk.set(next);
                free
            }
        };
        self.set_header(h);
        self.put(blk as usize * QBLOCK, &[0u8; QBLOCK]);
        Ok(blk)
    }

    /// Makes an entry for `id` (which has none): a free slot in the first data block of the
    /// free-entry list, or a new data block put at the head of that list; then the tree path
    /// to it, with new tree blocks where the path has none. Returns the entry's offset.
    fn insert(&mut self, id: u32) -> Result<usize, CorruptKind> {
        let ino = self.ino;
        let bad = |why: String| CorruptKind::QuotaFile { ino, why };
        // The tree path first (it may take blocks), down to the fourth level's slot.
        let mut blk = ROOT;
        for depth in 0..DEPTH - 1 {
            let slot = blk as usize * QBLOCK + 4 * tree_index(id, depth);
            let next = self.word(slot);
            blk = if next == 0 {
                let n = self.new_block()?;
                self.set_word(slot, n);
                n
            } else {
                next
            };
        }
        let leaf_slot = blk as usize * QBLOCK + 4 * tree_index(id, DEPTH - 1);
        if self.word(leaf_slot) != 0 {
            return Err(bad(format!("id {id} has a tree path but no entry")));
        }
        // A data block with room.
        let mut h = self.header();
        let data = match h.free_entry.get() {
            0 => {
                let d = self.new_block()?;
                h = self.header();
                h.free_entry.set(d);
                self.set_header(h);
                d
            }
            d => d,
        };
        let base = data as usize * QBLOCK + DATA_HEADER;
        let at = (0..ENTRIES_PER_BLOCK)
            .map(|i| base + i * ENTRY)
            .find(|&at| self.is_free(at))
            .ok_or_else(|| {
                bad(format!(
                    "data block {data} is on the free-entry list but full"
                ))
            })?;
        let mut dh = self.data_header(data);
        let count = dh.entries.get() + 1;
        dh.entries.set(count);
        if usize::from(count) >= ENTRIES_PER_BLOCK {
            // Full: off the free-entry list (it is the list's head).
            let next = dh.next_free.get();
            dh.next_free.set(0);
            dh.prev_free.set(0);
            let mut h = self.header();
            h.free_entry.set(next);
            self.set_header(h);
            if next != 0 {
                let mut nh = self.data_header(next);
                nh.prev_free.set(0);
                self.set_data_header(next, nh);
            }
        }
        self.set_data_header(data, dh);
        let mut d = RawDquot::default();
        d.id.set(id);
        self.store(at, d);
        self.set_word(leaf_slot, data);
        self.entries.insert(id, at);
        Ok(at)
    }

    /// The 4 KiB blocks of the file changed since the last call, with their bytes (the last
    /// one zero-padded), in order.
    pub fn take_dirty(&mut self) -> Vec<(u64, [u8; crate::BLOCK_SIZE])> {
        let dirty = std::mem::take(&mut self.dirty);
        dirty
            .into_iter()
            .map(|fb| {
                let mut b = [0u8; crate::BLOCK_SIZE];
                let start = fb as usize * crate::BLOCK_SIZE;
                if let Some(src) = self.bytes.get(start..) {
                    let n = src.len().min(crate::BLOCK_SIZE);
                    if let (Some(d), Some(s)) = (b.get_mut(..n), src.get(..n)) {
                        d.copy_from_slice(s);
                    }
                }
                (fb, b)
            })
            .collect()
    }

    /// Whether anything changed since the last [`QuotaTree::take_dirty`].
    pub fn is_dirty(&self) -> bool {
        !self.dirty.is_empty()
    }
}

/// The tree slot of `id` at `depth` (0 is the root): one byte of the id, the most
/// significant first.
fn tree_index(id: u32, depth: usize) -> usize {
    ((id >> (8 * (DEPTH - 1 - depth))) & 0xff) as usize
}

/// What an inode counts in quota: the kernel charges every block of a file but its inode
/// (data, node and xattr blocks; `i_blocks` counts them all with the inode) and one inode.
pub fn inode_space(i_blocks: u64) -> u64 {
    i_blocks.saturating_sub(1) * crate::BLOCK_SIZE as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file as mkfs.f2fs makes it: header, a root path for id 0, one data block.
    fn fresh(kind: usize) -> QuotaTree {
        let mut bytes = vec![0u8; 2 * QBLOCK];
        let mut h = RawQuotaHeader::default();
        h.magic.set(MAGICS[kind]);
        h.version.set(VERSION);
        h.blocks.set(2);
        bytes[..32].copy_from_slice(h.as_bytes());
        QuotaTree::parse(9, kind, bytes).unwrap()
    }

    #[test]
    fn inserted_ids_are_found_again_after_a_reparse() {
        let mut t = fresh(USER);
        let ids: Vec<u32> = (0..100)
            .map(|i| i * 7919 + (i << 20))
            .chain([u32::MAX])
            .collect();
        for (n, &id) in ids.iter().enumerate() {
            t.add_usage(id, 4096 * n as i64, 1).unwrap();
        }
        t.add_usage(5, 0, 0).unwrap();
        let mut zero = fresh(PROJECT);
        zero.add_usage(0, 0, 0).unwrap();
        let zero = QuotaTree::parse(9, PROJECT, zero.bytes().to_vec()).unwrap();
        // id 0 with nothing used: an entry that would read as free is marked used.
        assert_eq!(zero.get(0).unwrap().inode_deadline.get(), 1);
        let again = QuotaTree::parse(9, USER, t.bytes().to_vec()).unwrap();
        for (n, &id) in ids.iter().enumerate() {
            let d = again.get(id).unwrap();
            assert_eq!(d.space.get(), 4096 * n as u64, "id {id}");
            assert_eq!(d.inodes.get(), 1);
        }
        assert_eq!(again.get(5).unwrap().space.get(), 0);
        assert_eq!(again.entries().count(), ids.len() + 1);
        // 14 entries per data block: the blocks fill before new ones are taken.
        let h = again.header();
        assert!(h.blocks.get() < 3 * 102 + 10, "{} blocks", h.blocks.get());
    }

    #[test]
    fn usage_goes_down_and_never_below_zero() {
        let mut t = fresh(GROUP);
        t.add_usage(1000, 8192, 2).unwrap();
        t.add_usage(1000, -4096, -1).unwrap();
        assert_eq!(t.get(1000).unwrap().space.get(), 4096);
        t.add_usage(1000, -10_000, -5).unwrap();
        assert_eq!(t.get(1000).unwrap().space.get(), 0);
        assert_eq!(t.get(1000).unwrap().inodes.get(), 0);
    }

    #[test]
    fn hostile_files_are_refused_with_the_reason() {
        let t = fresh(USER);
        let good = t.bytes().to_vec();
        // Wrong type's magic.
        assert!(QuotaTree::parse(9, GROUP, good.clone()).is_err());
        // A tree block naming a block past the end.
        let mut b = good.clone();
        b[QBLOCK..QBLOCK + 4].copy_from_slice(&77u32.to_le_bytes());
        let e = QuotaTree::parse(9, USER, b).unwrap_err().to_string();
        assert!(e.contains("outside"), "{e}");
        // A tree block naming itself (a cycle).
        let mut t2 = fresh(USER);
        t2.add_usage(3, 1, 1).unwrap();
        let mut b = t2.bytes().to_vec();
        let first = u32::from_le_bytes(b[QBLOCK..QBLOCK + 4].try_into().unwrap()) as usize;
        b[first * QBLOCK..first * QBLOCK + 4].copy_from_slice(&(first as u32).to_le_bytes());
        assert!(QuotaTree::parse(9, USER, b).is_err());
        // Info claiming more blocks than the file has.
        let mut b = good.clone();
        b[20..24].copy_from_slice(&1000u32.to_le_bytes());
        assert!(QuotaTree::parse(9, USER, b).is_err());
        // Too short for a header.
        assert!(QuotaTree::parse(9, USER, vec![0; 10]).is_err());
    }
}
