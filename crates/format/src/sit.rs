//! The segment information table: per main-area segment, its type (which log), valid-block
//! count, valid-block bitmap (MSB-first) and age.
//!
//! The SIT area is two contiguous halves (copy 0, then copy 1); SIT block `b` lives at
//! `sit_blkaddr + b`, plus half the area if bit `b` of the CP's SIT version bitmap is set.
//! Entries in the SIT journal (in the cold-data current-segment summary) override the blocks.

use crate::superblock::Layout;
use crate::{test_bit_msb, CorruptKind, BLOCKS_PER_SEG, BLOCK_SIZE};
use zerocopy::little_endian::{U16, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

pub use crate::SIT_ENTRIES_PER_BLOCK;
pub const SIT_JOURNAL_ENTRIES: usize = 6;
pub const SIT_VBLOCKS_MASK: u16 = 0x3FF;
pub const SIT_TYPE_SHIFT: u16 = 10;

#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy)]
#[repr(C)]
pub struct RawSitEntry {
    pub vblocks: U16,
    pub valid_map: [u8; 64],
    pub mtime: U64,
}

#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub struct RawSitBlock {
    pub entries: [RawSitEntry; SIT_ENTRIES_PER_BLOCK],
    pub pad: [u8; 26],
}
const _: () = assert!(core::mem::size_of::<RawSitBlock>() == BLOCK_SIZE);

/// A checked SIT entry.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct SitEntry {
    pub seg_type: u8,
    pub valid_blocks: u16,
    pub valid_map: [u8; 64],
    pub mtime: u64,
}

impl SitEntry {
    /// Validates: the type is one of the six logs, the count is at most 512 and equals the
    /// number of bits set in the map.
    pub fn parse(raw: &RawSitEntry, segno: u32) -> Result<SitEntry, CorruptKind> {
        let v = raw.vblocks.get();
        let valid_blocks = v & SIT_VBLOCKS_MASK;
        let seg_type = (v >> SIT_TYPE_SHIFT) as u8;
        if u32::from(valid_blocks) > BLOCKS_PER_SEG {
            return Err(CorruptKind::SitEntry {
                segno,
                why: "valid block count over 512",
            });
        }
        if seg_type > 5 {
            return Err(CorruptKind::SitEntry {
                segno,
                why: "segment type over 5",
            });
        }
        let bits: u32 = raw.valid_map.iter().map(|b| b.count_ones()).sum();
        if bits != u32::from(valid_blocks) {
            return Err(CorruptKind::SitEntry {
                segno,
                why: "valid count differs from bitmap",
            });
        }
        Ok(SitEntry {
            seg_type,
            valid_blocks,
            valid_map: raw.valid_map,
            mtime: raw.mtime.get(),
        })
    }

    pub fn is_valid(&self, blkoff: usize) -> bool {
        test_bit_msb(&self.valid_map, blkoff)
    }
}

/// Block address of the current copy of SIT block `index`.
pub fn sit_block_addr(layout: &Layout, sit_bitmap: &[u8], index: u32) -> u64 {
    let mut addr = u64::from(layout.sit) + u64::from(index);
    if test_bit_msb(sit_bitmap, index as usize) {
        addr += u64::from(layout.sit_segments / 2) * u64::from(BLOCKS_PER_SEG);
    }
    addr
}

/// The raw entries of a SIT block.
pub fn entries(block: &[u8; BLOCK_SIZE]) -> Option<&[RawSitEntry; SIT_ENTRIES_PER_BLOCK]> {
    RawSitBlock::ref_from_bytes(block).ok().map(|b| &b.entries)
}

#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy)]
#[repr(C)]
pub struct RawSitJournalEntry {
    pub segno: U32,
    pub entry: RawSitEntry,
}

#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub struct RawSitJournal {
    pub entries: [RawSitJournalEntry; SIT_JOURNAL_ENTRIES],
    pub reserved: [u8; 37],
}
const _: () = assert!(core::mem::size_of::<RawSitJournal>() == crate::summary::JOURNAL_BODY);

/// Decodes `count` SIT journal entries, each checked.
pub fn parse_sit_journal(
    count: u16,
    body: &[u8],
    main_segments: u32,
) -> Result<Vec<(u32, SitEntry)>, CorruptKind> {
    if usize::from(count) > SIT_JOURNAL_ENTRIES {
        return Err(CorruptKind::SitJournalCount(count));
    }
    let j = RawSitJournal::ref_from_bytes(body).map_err(|_| CorruptKind::SitJournalCount(count))?;
    j.entries
        .iter()
        .take(count.into())
        .map(|e| {
            let segno = e.segno.get();
            if segno >= main_segments {
                return Err(CorruptKind::SitEntry {
                    segno,
                    why: "journal segment out of range",
                });
            }
            Ok((segno, SitEntry::parse(&e.entry, segno)?))
        })
        .collect()
}
