//! Superblock::parse on the input as one 4 KiB block (padded or truncated), as copy 0 and
//! copy 1, and on the raw input (short or long slices); every accessor of an accepted copy.
//!
//! Input: bytes 0..4096 are the block. If a byte 4096 exists and its bit 0 is set, the
//! superblock CRC at byte 1024+3068 is recomputed first, so mutations get past the
//! `sb_checksum` check too.
#![no_main]

use libfuzzer_sys::fuzz_target;
use uf2fs_format::crc::{f2fs_crc32, F2FS_SUPER_MAGIC};
use uf2fs_format::superblock::{feature, Superblock, SB_CHECKSUM_OFFSET, SB_OFFSET};
use uf2fs_fuzz::{sink, to_block};

fn exercise(sb: &Superblock) {
    sink(sb.copy);
    let raw = sb.raw();
    sink(raw.magic.get());
    let l = sb.layout();
    sink(l.main_end());
    for addr in [
        0,
        l.main.wrapping_sub(1),
        l.main,
        l.main.wrapping_add(1),
        u32::MAX,
    ] {
        sink(l.in_main(addr));
    }
    sink(l.nat_blocks());
    sink(l.sit_blocks());
    sink(l.max_nid());
    let f = sb.features();
    sink(feature::names(f));
    for (bit, _) in feature::NAMES {
        sink(sb.has(bit));
    }
    sink(sb.uuid());
    sink(sb.label());
    sink(sb.versions());
    sink(sb.quota_inos());
    sink(sb.cp_payload());
    sink(sb.extensions());
    sink(sb.sector_size());
    sink(sb.block_size());
    let _ = format!("{l:?}");
}

fuzz_target!(|data: &[u8]| {
    let mut block = to_block(data);
    if data.get(4096).is_some_and(|b| b & 1 != 0) {
        let start = SB_OFFSET;
        let end = SB_OFFSET + SB_CHECKSUM_OFFSET as usize;
        let crc = f2fs_crc32(F2FS_SUPER_MAGIC, &block[start..end]);
        block[end..end + 4].copy_from_slice(&crc.to_le_bytes());
    }
    for copy in 0..2u8 {
        match Superblock::parse(&block[..], copy) {
            Ok(sb) => exercise(&sb),
            Err(e) => sink(e.to_string()),
        }
    }
    // The raw input, whatever its length.
    match Superblock::parse(data, 0) {
        Ok(sb) => exercise(&sb),
        Err(e) => sink(e.to_string()),
    }
});
