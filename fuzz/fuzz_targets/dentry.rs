//! The dentry readers: DentryArea::block on the input as one 4 KiB dentry block (zero padded)
//! and DentryArea::inline on the raw input slice (any length), each iterated to the end; the
//! name hash of every entry; the inline geometry and the hash-bucket helpers.
#![no_main]

use libfuzzer_sys::fuzz_target;
use uf2fs_format::dentry::{
    blocks_per_bucket, bucket_block, buckets_at, inline_geometry, slots_for, DentryArea,
    DIR_ENTRY_SIZE, SLOT_LEN,
};
use uf2fs_format::hash::dentry_hash;
use uf2fs_format::inode::{FileType, MAX_DIR_HASH_DEPTH, MAX_NAME_LEN};
use uf2fs_fuzz::{sink, to_block};

fn walk(area: DentryArea<'_>) {
    let n = area.slots();
    for s in 0..=n {
        sink(area.is_used(s));
    }
    assert!(!area.is_used(n));
    let mut last = None;
    let mut count = 0usize;
    for e in area.iter() {
        count += 1;
        assert!(
            count <= n + 1,
            "dentry iterator yields more items than slots"
        );
        match e {
            Ok(e) => {
                assert!(e.slot < n);
                assert!(!e.name.is_empty() && e.name.len() <= MAX_NAME_LEN);
                assert!(e.slot + slots_for(e.name.len()) <= n);
                if let Some(prev) = last {
                    assert!(e.slot > prev, "dentry iterator went backwards");
                }
                last = Some(e.slot);
                sink((e.hash, e.ino, e.file_type.map(FileType::dentry_code)));
                sink(dentry_hash(e.name) == e.hash);
            }
            Err(err) => {
                sink((err.slot, err.why));
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let block = to_block(data);
    walk(DentryArea::block(&block));
    walk(DentryArea::inline(data));

    let (n, bitmap, reserved) = inline_geometry(data.len());
    assert!(n * (DIR_ENTRY_SIZE + SLOT_LEN) + bitmap + reserved == data.len());

    // Bucket helpers with the parameters a directory inode can carry.
    let level = u32::from(data.first().copied().unwrap_or(0)) % (MAX_DIR_HASH_DEPTH + 1);
    let dir_level = data.get(1).copied().unwrap_or(0) % (MAX_DIR_HASH_DEPTH as u8 + 1);
    let buckets = buckets_at(level, dir_level);
    sink(blocks_per_bucket(level));
    sink(bucket_block(level, dir_level, 0));
    sink(bucket_block(level, dir_level, buckets - 1));
    sink(dentry_hash(data));
});
