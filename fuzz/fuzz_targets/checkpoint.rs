//! CpBlock::parse on one CP block, then Checkpoint::assemble against the geometry of the
//! linux-default superblock, with payload blocks from the rest of the input; every accessor
//! of the result, and the orphan and compacted-summary helpers on the payload blocks.
//!
//! Input: byte 0 is a control byte (bit 0: recompute the CP CRC at the block's own
//! checksum_offset before parsing, so mutations get past the CRC; bit 1: treat the block as
//! pack 2 instead of pack 1); bytes 1..4097 are the CP block (zero padded); the rest, cut
//! into 4 KiB blocks (at most 8), is the payload.
#![no_main]

use libfuzzer_sys::fuzz_target;
use uf2fs_format::checkpoint::{
    flags, orphan_inos, version_after, Checkpoint, CpBlock, CP_CHECKSUM_OFFSET, CP_HEAD_SIZE,
};
use uf2fs_format::crc::{f2fs_crc32, F2FS_SUPER_MAGIC};
use uf2fs_format::nat::nat_block_addr;
use uf2fs_format::sit::sit_block_addr;
use uf2fs_format::summary::compacted_blocks;
use uf2fs_format::{le32, BLOCKS_PER_SEG, BLOCK_SIZE};
use uf2fs_fuzz::{layout_default, sb_default, sink, to_block, to_blocks};

/// Byte offset of `checksum_offset` in the CP head.
const CHECKSUM_OFFSET_FIELD: usize = 164;

fn fix_crc(block: &mut [u8; BLOCK_SIZE]) {
    let Some(off) = le32(&block[..], CHECKSUM_OFFSET_FIELD) else {
        return;
    };
    if !(CP_HEAD_SIZE as u32..=CP_CHECKSUM_OFFSET).contains(&off) {
        return;
    }
    let off = off as usize;
    let mut crc = f2fs_crc32(F2FS_SUPER_MAGIC, &block[..off]);
    if off < CP_CHECKSUM_OFFSET as usize {
        crc = f2fs_crc32(crc, &block[off + 4..]);
    }
    block[off..off + 4].copy_from_slice(&crc.to_le_bytes());
}

fn exercise(cp: &Checkpoint, payload: &[[u8; BLOCK_SIZE]]) {
    let layout = layout_default();
    sink(cp.version());
    let f = cp.flags();
    sink(flags::names(f));
    for (bit, _) in flags::NAMES {
        sink(cp.has_flag(bit));
    }
    for n in [
        0,
        1,
        2,
        sb_default().cp_payload(),
        payload.len() as u32,
        u32::MAX,
    ] {
        sink(cp.orphan_blocks(n));
    }
    sink(cp.node_cp_ver());
    sink(cp.pack);
    sink(cp.pack_addr);
    sink(cp.crc);
    sink(format!("{:?}", cp.head));
    for c in &cp.cursegs {
        sink(format!("{c:?}"));
    }
    // The counts the engine derives from the data logs for the compacted summaries.
    let counts = [0, 1, 2].map(|i| {
        let c = cp.cursegs[i];
        if c.alloc_type == 1 {
            BLOCKS_PER_SEG as usize
        } else {
            usize::from(c.blkoff)
        }
    });
    sink(compacted_blocks(counts));
    // Where the version bitmaps send every NAT and SIT block.
    for i in 0..layout.nat_blocks() {
        sink(nat_block_addr(&layout, &cp.nat_bitmap, i));
    }
    for i in 0..layout.sit_blocks() {
        sink(sit_block_addr(&layout, &cp.sit_bitmap, i));
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&control, rest)) = data.split_first() else {
        return;
    };
    let mut block = to_block(rest);
    if control & 1 != 0 {
        fix_crc(&mut block);
    }
    let layout = layout_default();
    let pack: u8 = if control & 2 != 0 { 2 } else { 1 };
    let addr = u64::from(layout.cp) + u64::from(pack - 1) * u64::from(BLOCKS_PER_SEG);
    let payload = to_blocks(rest.get(BLOCK_SIZE..).unwrap_or(&[]), 8);

    for (i, b) in payload.iter().enumerate() {
        match orphan_inos(b, addr + 1 + i as u64) {
            Ok(v) => sink(v),
            Err(e) => sink(e.to_string()),
        }
    }

    let cp = match CpBlock::parse(&block, addr) {
        Ok(cp) => cp,
        Err(e) => {
            sink(e.to_string());
            return;
        }
    };
    sink(cp.version());
    sink(cp.crc());
    match cp.total_blocks(addr) {
        Ok(t) => sink(t),
        Err(e) => sink(e.to_string()),
    }
    sink(version_after(cp.version(), 1));
    sink(version_after(1, cp.version()));
    sink(version_after(
        cp.version(),
        cp.version().wrapping_add(1 << 63),
    ));

    // Without payload (the normal layout) and with it (SIT bitmap in the payload).
    for p in [&payload[..0], &payload[..]] {
        match Checkpoint::assemble(cp.clone(), pack, addr, p, &layout) {
            Ok(c) => exercise(&c, p),
            Err(e) => sink(e.to_string()),
        }
    }
});
