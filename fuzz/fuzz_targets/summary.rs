//! The current-segment summaries: summary::parse_compacted with entry counts from the input,
//! Summary::from_block on every block, and the journals of the decoded summaries.
//!
//! Input: bytes 0..6 are three LE u16 entry counts (hot, warm, cold data; masked to 0..1023
//! so that both valid counts and counts over 512 occur); the rest, cut into 4 KiB blocks
//! (at most 3, the last zero padded), is what the CP pack holds from cp_pack_start_sum on.
#![no_main]

use libfuzzer_sys::fuzz_target;
use uf2fs_format::le16;
use uf2fs_format::nat::parse_nat_journal;
use uf2fs_format::sit::parse_sit_journal;
use uf2fs_format::summary::{
    compacted_blocks, parse_compacted, Summary, ENTRIES_IN_SUM, SUM_TYPE_DATA, SUM_TYPE_NODE,
};
use uf2fs_fuzz::{layout_default, sink, to_blocks};

fn exercise(s: &Summary) {
    assert_eq!(s.entries.len(), ENTRIES_IN_SUM);
    for e in &s.entries {
        sink((e.nid.get(), e.version, e.ofs_in_node.get()));
    }
    let main = layout_default().main_segments;
    match parse_nat_journal(s.journal_count, &s.journal) {
        Ok(v) => sink(v),
        Err(e) => sink(e.to_string()),
    }
    match parse_sit_journal(s.journal_count, &s.journal, main) {
        Ok(v) => sink(v),
        Err(e) => sink(e.to_string()),
    }
}

fuzz_target!(|data: &[u8]| {
    let c = |at| usize::from(le16(data, at).unwrap_or(0) & 0x3FF);
    let counts = [c(0), c(2), c(4)];
    let blocks = to_blocks(data.get(6..).unwrap_or(&[]), 3);
    let need = compacted_blocks(counts);
    sink(need);
    match parse_compacted(&blocks, counts) {
        Ok(sums) => {
            // A successful decode never needed more blocks than compacted_blocks says.
            assert!(need <= blocks.len() || counts.iter().sum::<usize>() == 0);
            for s in &sums {
                exercise(s);
            }
        }
        Err(e) => sink(e.to_string()),
    }
    // Exactly as many blocks as the counts need, when the input has them.
    if need <= blocks.len() {
        match parse_compacted(&blocks[..need], counts) {
            Ok(sums) => sums.iter().for_each(exercise),
            Err(e) => sink(e.to_string()),
        }
    }
    for b in &blocks {
        exercise(&Summary::from_block(b));
    }
    exercise(&Summary::empty());
    sink((SUM_TYPE_DATA, SUM_TYPE_NODE));
});
