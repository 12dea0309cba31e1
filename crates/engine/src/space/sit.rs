//! SIT reading (for `info` and checks): every main segment's entry from the current copy of
//! its SIT block, overlaid by the SIT journal, summed by segment type.

use crate::error::Result;
use crate::mount::read_block;
use uf2fs_device::{BlockDevice, IoCause};
use uf2fs_format::sit::{entries, sit_block_addr, SitEntry, SIT_ENTRIES_PER_BLOCK};
use uf2fs_format::superblock::Layout;
use uf2fs_format::{CorruptKind, BLOCKS_PER_SEG};

/// Segment usage summed from the SIT.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct SegmentUsage {
    /// Valid blocks per segment type (hot/warm/cold data, hot/warm/cold node).
    pub valid_blocks_by_type: [u64; 6],
    pub segments_by_type: [u32; 6],
    pub free_segments: u32,
    pub full_segments: u32,
    /// Space with some but not all blocks valid (GC candidates).
    pub dirty_segments: u32,
    pub valid_blocks: u64,
}

pub(crate) fn read_sit(
    dev: &dyn BlockDevice,
    layout: &Layout,
    bitmap: &[u8],
    journal: &[(u32, SitEntry)],
) -> Result<Vec<SitEntry>> {
    let n = layout.main_segments as usize;
    // Grown as blocks are read (no capacity from the on-disk count).
    let mut out = Vec::new();
    let per = SIT_ENTRIES_PER_BLOCK;
    for index in 0..n.div_ceil(per) {
        let addr = sit_block_addr(layout, bitmap, index as u32);
        let block = read_block(dev, addr, IoCause::Meta, "SIT block")?;
        let raw = entries(&block).ok_or(CorruptKind::Block {
            blkaddr: addr,
            why: "SIT block length",
        })?;
        for (i, r) in raw.iter().enumerate().take(n - index * per) {
            out.push(SitEntry::parse(r, (index * per + i) as u32)?);
        }
    }
    for (segno, e) in journal {
        if let Some(slot) = out.get_mut(*segno as usize) {
            *slot = *e;
        }
    }
    Ok(out)
}

pub(crate) fn usage(sit: &[SitEntry]) -> SegmentUsage {
    let mut u = SegmentUsage::default();
    for e in sit {
        let v = u64::from(e.valid_blocks);
        u.valid_blocks += v;
        if v == 0 {
            u.free_segments += 1;
            continue;
        }
        if let Some(t) = u.valid_blocks_by_type.get_mut(usize::from(e.seg_type)) {
            *t += v;
        }
        if let Some(t) = u.segments_by_type.get_mut(usize::from(e.seg_type)) {
            *t += 1;
        }
        if v == u64::from(BLOCKS_PER_SEG) {
            u.full_segments += 1;
        } else {
            u.dirty_segments += 1;
        }
    }
    u
}
