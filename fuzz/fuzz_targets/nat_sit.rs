//! The NAT and SIT decoders: the two journals (parse_nat_journal, parse_sit_journal), the
//! entries of a SIT block (sit::entries + SitEntry::parse), the entries of a NAT block
//! (nat::entry_in_block), and the helpers that take a nid or a bitmap.
//!
//! Input: bytes 0..2 NAT journal count, 2..4 SIT journal count, 4..8 a nid, 8..12 a number
//! of main segments (all LE); the rest is one 4 KiB block (zero padded). The journals are
//! decoded from the block twice: with the header's counts at offsets 0 and 505, and as a
//! compacted summary block carries them (u16 count + 505-byte body at 0 and at 507).
#![no_main]

use libfuzzer_sys::fuzz_target;
use uf2fs_format::nat::{
    check_nid, entry_in_block, nat_block_addr, parse_nat_journal, NAT_ENTRIES_PER_BLOCK,
};
use uf2fs_format::sit::{entries, parse_sit_journal, sit_block_addr, SitEntry};
use uf2fs_format::summary::{JOURNAL_BODY, JOURNAL_SIZE};
use uf2fs_format::{le16, le32, BLOCKS_PER_SEG};
use uf2fs_fuzz::{layout_default, sink, to_block};

fn journals(nat_count: u16, nat_body: &[u8], sit_count: u16, sit_body: &[u8], main_segs: u32) {
    match parse_nat_journal(nat_count, nat_body) {
        Ok(v) => {
            for (nid, e) in v {
                sink((nid, e.is_free(), e.version, e.ino, e.block_addr));
            }
        }
        Err(e) => sink(e.to_string()),
    }
    match parse_sit_journal(sit_count, sit_body, main_segs) {
        Ok(v) => {
            for (segno, e) in v {
                sink(segno);
                exercise_sit(&e);
            }
        }
        Err(e) => sink(e.to_string()),
    }
}

fn exercise_sit(e: &SitEntry) {
    sink((e.seg_type, e.valid_blocks, e.mtime));
    let set = (0..BLOCKS_PER_SEG as usize)
        .filter(|&i| e.is_valid(i))
        .count();
    assert_eq!(
        set,
        usize::from(e.valid_blocks),
        "SitEntry::parse let a bad count through"
    );
    sink(e.is_valid(usize::MAX));
}

fuzz_target!(|data: &[u8]| {
    let h = |at| le16(data, at).unwrap_or(0);
    let (nat_count, sit_count) = (h(0), h(2));
    let nid = le32(data, 4).unwrap_or(0);
    let main_segs = le32(data, 8).unwrap_or(0);
    let block = to_block(data.get(12..).unwrap_or(&[]));
    let layout = layout_default();

    // Journals with the header's counts.
    let body_a = &block[..JOURNAL_BODY];
    let body_b = &block[JOURNAL_BODY..2 * JOURNAL_BODY];
    journals(nat_count, body_a, sit_count, body_b, main_segs);
    journals(nat_count, body_a, sit_count, body_b, layout.main_segments);
    // Wrong-sized bodies are refused, not read past.
    journals(
        nat_count,
        &block[..JOURNAL_BODY - 1],
        sit_count,
        &block[..0],
        main_segs,
    );
    // Journals where a compacted summary block keeps them.
    let c0 = le16(&block[..], 0).unwrap_or(0);
    let c1 = le16(&block[..], JOURNAL_SIZE).unwrap_or(0);
    journals(
        c0,
        &block[2..JOURNAL_SIZE],
        c1,
        &block[JOURNAL_SIZE + 2..2 * JOURNAL_SIZE],
        layout.main_segments,
    );

    // The block as a SIT block.
    if let Some(raw) = entries(&block) {
        for (i, r) in raw.iter().enumerate() {
            match SitEntry::parse(r, i as u32) {
                Ok(e) => exercise_sit(&e),
                Err(e) => sink(e.to_string()),
            }
        }
    }
    // The block as a NAT block.
    for n in 0..NAT_ENTRIES_PER_BLOCK as u32 {
        let e = entry_in_block(&block, n);
        sink((e.is_free(), e.version, e.ino, e.block_addr));
    }
    sink(entry_in_block(&block, nid));
    for n in [nid, nid.wrapping_add(1), 0, 1, layout.max_nid(), u32::MAX] {
        sink(check_nid(&layout, n).is_ok());
    }
    // The block as a version bitmap.
    for i in [0, 1, nid % 4096, nid, u32::MAX] {
        sink(nat_block_addr(&layout, &block[..], i));
        sink(sit_block_addr(&layout, &block[..], i));
    }
});
