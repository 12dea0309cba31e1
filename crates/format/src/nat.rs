//! The node address table: nid → (owner inode, block address, version).
//!
//! The NAT area holds pairs of segments; for NAT block `b` copy 0 is at
//! `nat_blkaddr + (b / 512) * 1024 + b % 512` and copy 1 one segment later. The CP's NAT
//! version bitmap (MSB-first) says which copy is current. Entries in the NAT journal (in the
//! hot-data current-segment summary) override the blocks.

use crate::superblock::Layout;
use crate::{test_bit_msb, CorruptKind, BLOCKS_PER_SEG, BLOCK_SIZE, NULL_ADDR};
use zerocopy::little_endian::U32;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

pub use crate::NAT_ENTRIES_PER_BLOCK;
/// Entries of the NAT journal.
pub const NAT_JOURNAL_ENTRIES: usize = 38;

#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug, Default)]
#[repr(C)]
pub struct RawNatEntry {
    pub version: u8,
    pub ino: U32,
    pub block_addr: U32,
}

#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub struct RawNatBlock {
    pub entries: [RawNatEntry; NAT_ENTRIES_PER_BLOCK],
    pub pad: u8,
}
const _: () = assert!(core::mem::size_of::<RawNatBlock>() == BLOCK_SIZE);

/// A NAT entry in host form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NatEntry {
    pub version: u8,
    pub ino: u32,
    pub block_addr: u32,
}

impl From<&RawNatEntry> for NatEntry {
    fn from(r: &RawNatEntry) -> Self {
        NatEntry {
            version: r.version,
            ino: r.ino.get(),
            block_addr: r.block_addr.get(),
        }
    }
}

impl NatEntry {
    pub fn is_free(&self) -> bool {
        self.block_addr == NULL_ADDR
    }
}

/// Block address of the current copy of NAT block `index`.
pub fn nat_block_addr(layout: &Layout, nat_bitmap: &[u8], index: u32) -> u64 {
    let seg = u64::from(BLOCKS_PER_SEG);
    let i = u64::from(index);
    let mut addr = u64::from(layout.nat) + (i / seg) * 2 * seg + i % seg;
    if test_bit_msb(nat_bitmap, index as usize) {
        addr += seg;
    }
    addr
}

/// The entry of `nid` in a NAT block.
pub fn entry_in_block(block: &[u8; BLOCK_SIZE], nid: u32) -> NatEntry {
    RawNatBlock::ref_from_bytes(block)
        .ok()
        .and_then(|b| b.entries.get(nid as usize % NAT_ENTRIES_PER_BLOCK))
        .map(NatEntry::from)
        .unwrap_or_default()
}

/// Checks that `nid` can have a NAT entry at all.
pub fn check_nid(layout: &Layout, nid: u32) -> Result<(), CorruptKind> {
    let max = layout.max_nid();
    if nid == 0 || nid >= max {
        return Err(CorruptKind::NidRange { nid, max });
    }
    Ok(())
}

/// One NAT journal entry: a nid and its entry.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy)]
#[repr(C)]
pub struct RawNatJournalEntry {
    pub nid: U32,
    pub entry: RawNatEntry,
}

#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub struct RawNatJournal {
    pub entries: [RawNatJournalEntry; NAT_JOURNAL_ENTRIES],
    pub reserved: [u8; 11],
}
const _: () = assert!(core::mem::size_of::<RawNatJournal>() == crate::summary::JOURNAL_BODY);

/// Decodes `count` NAT journal entries from a journal body.
pub fn parse_nat_journal(count: u16, body: &[u8]) -> Result<Vec<(u32, NatEntry)>, CorruptKind> {
    if usize::from(count) > NAT_JOURNAL_ENTRIES {
        return Err(CorruptKind::NatJournalCount(count));
    }
    let j = RawNatJournal::ref_from_bytes(body).map_err(|_| CorruptKind::NatJournalCount(count))?;
    Ok(j.entries
        .iter()
        .take(count.into())
        .map(|e| (e.nid.get(), NatEntry::from(&e.entry)))
        .collect())
}
