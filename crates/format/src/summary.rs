//! Segment summaries (SSA): for every block of a segment, its owner (the nid of the node that
//! points at it and the slot, or the nid itself for node blocks), plus a journal (NAT or SIT
//! entries) in the current-segment summaries kept in the CP pack.
//!
//! Two encodings in the CP pack: three normal 4 KiB summary blocks (hot, warm, cold data), or
//! the compacted form (COMPACT_SUM): the two journals, then 7-byte entries packed back to back
//! across 1 or 2 blocks.

use crate::{CorruptKind, BLOCKS_PER_SEG, BLOCK_SIZE};
use zerocopy::little_endian::{U16, U32};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

pub const ENTRIES_IN_SUM: usize = 512;
pub const SUMMARY_SIZE: usize = 7;
pub const JOURNAL_BODY: usize = 505;
/// Size of a journal: a u16 count plus the body.
pub const JOURNAL_SIZE: usize = 2 + JOURNAL_BODY;
pub const SUM_TYPE_DATA: u8 = 0;
pub const SUM_TYPE_NODE: u8 = 1;

#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug, Default)]
#[repr(C)]
pub struct RawSummary {
    pub nid: U32,
    pub version: u8,
    pub ofs_in_node: U16,
}

#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub struct RawSummaryBlock {
    pub entries: [RawSummary; ENTRIES_IN_SUM],
    pub journal_count: U16,
    pub journal: [u8; JOURNAL_BODY],
    pub entry_type: u8,
    pub check_sum: U32,
}
const _: () = assert!(core::mem::size_of::<RawSummaryBlock>() == BLOCK_SIZE);

/// A current-segment summary in host form: entries and the journal.
#[derive(Clone)]
pub struct Summary {
    pub entries: Vec<RawSummary>,
    pub journal_count: u16,
    pub journal: [u8; JOURNAL_BODY],
}

impl Summary {
    pub fn from_block(block: &[u8; BLOCK_SIZE]) -> Summary {
        // A 4 KiB block always has the summary block's size; the fallback cannot happen.
        match RawSummaryBlock::ref_from_bytes(block) {
            Ok(b) => Summary {
                entries: b.entries.to_vec(),
                journal_count: b.journal_count.get(),
                journal: b.journal,
            },
            Err(_) => Summary::empty(),
        }
    }

    pub fn empty() -> Summary {
        Summary {
            entries: vec![RawSummary::default(); ENTRIES_IN_SUM],
            journal_count: 0,
            journal: [0; JOURNAL_BODY],
        }
    }
}

/// Capacity of the compacted form: entries in block 1 (after both journals) and in later
/// blocks.
pub const COMPACT_FIRST_BLOCK: usize = (BLOCK_SIZE - 5 - 2 * JOURNAL_SIZE) / SUMMARY_SIZE;
pub const COMPACT_LATER_BLOCK: usize = (BLOCK_SIZE - 5) / SUMMARY_SIZE;

/// Decodes the compacted data summaries: returns (hot, warm, cold) summaries, the hot one
/// carrying the NAT journal and the cold one the SIT journal. `counts` are the number of
/// entries of each log (its blkoff, or 512 for an SSR log).
pub fn parse_compacted(
    blocks: &[[u8; BLOCK_SIZE]],
    counts: [usize; 3],
) -> Result<[Summary; 3], CorruptKind> {
    let bad = |why| CorruptKind::Summary {
        which: "compacted data",
        why,
    };
    let first = blocks.first().ok_or(bad("missing block"))?;
    let mut out = [Summary::empty(), Summary::empty(), Summary::empty()];
    let journal = |at: usize| -> Result<(u16, [u8; JOURNAL_BODY]), CorruptKind> {
        let count = crate::le16(first, at).ok_or(bad("journal"))?;
        let mut body = [0u8; JOURNAL_BODY];
        body.copy_from_slice(first.get(at + 2..at + JOURNAL_SIZE).ok_or(bad("journal"))?);
        Ok((count, body))
    };
    (out[0].journal_count, out[0].journal) = journal(0)?;
    (out[2].journal_count, out[2].journal) = journal(JOURNAL_SIZE)?;
    let mut block_idx = 0usize;
    let mut off = 2 * JOURNAL_SIZE;
    for (log, &count) in counts.iter().enumerate() {
        if count > BLOCKS_PER_SEG as usize {
            return Err(bad("entry count over 512"));
        }
        for i in 0..count {
            if off + SUMMARY_SIZE > BLOCK_SIZE - 5 {
                block_idx += 1;
                off = 0;
            }
            let block = blocks
                .get(block_idx)
                .ok_or(bad("entries run past the pack"))?;
            let bytes = block.get(off..off + SUMMARY_SIZE).ok_or(bad("entry"))?;
            let entry = RawSummary::read_from_bytes(bytes).map_err(|_| bad("entry"))?;
            if let Some(slot) = out.get_mut(log).and_then(|s| s.entries.get_mut(i)) {
                *slot = entry;
            }
            off += SUMMARY_SIZE;
        }
    }
    Ok(out)
}

/// How many blocks the compacted form needs for these entry counts.
pub fn compacted_blocks(counts: [usize; 3]) -> usize {
    let total: usize = counts.iter().sum();
    if total <= COMPACT_FIRST_BLOCK {
        1
    } else {
        1 + (total - COMPACT_FIRST_BLOCK).div_ceil(COMPACT_LATER_BLOCK)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compacted_capacity_matches_the_format_notes() {
        assert_eq!(COMPACT_FIRST_BLOCK, 439);
        assert_eq!(COMPACT_LATER_BLOCK, 584);
        assert_eq!(compacted_blocks([1, 0, 0]), 1);
        assert_eq!(compacted_blocks([439, 1, 0]), 2);
    }

    #[test]
    fn compacted_entries_cross_into_the_second_block() {
        let mut blocks = vec![[0u8; BLOCK_SIZE]; 2];
        // Entry 439 (hot data #439) is the first of block 2.
        blocks[1][0..4].copy_from_slice(&77u32.to_le_bytes());
        blocks[0][1014..1018].copy_from_slice(&5u32.to_le_bytes());
        let s = parse_compacted(&blocks, [440, 0, 0]).unwrap();
        assert_eq!(s[0].entries[0].nid.get(), 5);
        assert_eq!(s[0].entries[439].nid.get(), 77);
    }

    #[test]
    fn compacted_entries_past_the_pack_are_refused() {
        let blocks = vec![[0u8; BLOCK_SIZE]; 1];
        assert!(parse_compacted(&blocks, [512, 0, 0]).is_err());
    }
}
