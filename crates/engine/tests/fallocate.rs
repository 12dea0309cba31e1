//! fallocate reserves a file's holes a node at a time: a range that runs from the inode's own
//! slots through both direct nodes into an indirect node's children, with written blocks in
//! the middle, reserves every hole (counted once in i_blocks and the free space), keeps what
//! was written, reads back zeros elsewhere, and leaves fsck.f2fs and uf2fs fsck clean, also
//! after the reserved blocks are written over.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    reason = "test code: a panic is the failure report"
)]

mod common;

use uf2fs_engine::Fs;
use uf2fs_testkit::{assert_fsck_clean, scratch};

#[test]
fn a_range_across_inode_direct_and_indirect_nodes() {
    let dir = scratch("fallocate-nodes");
    let img = common::fresh_image(&dir, 256, 0);
    let fs = Fs::open_rw(&img).unwrap();
    let root = fs.root_ino();
    let f = fs.create_node(root, b"f", common::node(0o100644)).unwrap();
    // Written islands: in the inode's slots, in the first direct node, in the indirect range.
    let islands = [(10u64, 3u64), (1500, 20), (3300, 5), (6000, 1)];
    for &(blk, n) in &islands {
        fs.write(
            f,
            blk * 4096,
            &vec![(blk % 251) as u8 + 1; (n * 4096) as usize],
        )
        .unwrap();
    }
    let free_before = fs.statfs().blocks_free;
    let blocks_before = fs.getattr(f).unwrap().blocks_512 / 8;
    // 7000 blocks from block 5: the inode's slots, both direct nodes, an indirect node.
    let (start, len) = (5u64, 7000u64);
    fs.fallocate(f, 0, start * 4096, len * 4096).unwrap();
    let written_inside: u64 = islands
        .iter()
        .map(|&(b, n)| n.min((start + len).saturating_sub(b)))
        .sum();
    let mut reserved = 0u64;
    fs.data_slots(f, &mut |fblk, addr| {
        if addr == uf2fs_engine::NEW_ADDR {
            assert!(
                (start..start + len).contains(&fblk),
                "block {fblk} reserved"
            );
            reserved += 1;
        }
        Ok(())
    })
    .unwrap();
    assert_eq!(
        reserved,
        len - written_inside,
        "every hole of the range reserved"
    );
    // i_blocks counts the reserved blocks and the direct nodes made for them (the range
    // needs four new ones: the second direct node and three children of the indirect node).
    let blocks_after = fs.getattr(f).unwrap().blocks_512 / 8;
    let new_nodes = blocks_after - blocks_before - reserved;
    assert!((1..=6).contains(&new_nodes), "{new_nodes} node blocks made");
    assert_eq!(fs.getattr(f).unwrap().size, (start + len) * 4096);
    assert!(free_before - fs.statfs().blocks_free >= len - written_inside);
    let mut buf = vec![0u8; 4096];
    for blk in [
        5u64, 9, 10, 12, 13, 1499, 1500, 1519, 1520, 3000, 3304, 5999, 6000, 7004,
    ] {
        fs.read(f, blk * 4096, &mut buf).unwrap();
        let want = islands
            .iter()
            .find(|&&(b, n)| blk >= b && blk < b + n)
            .map_or(0, |&(b, _)| (b % 251) as u8 + 1);
        assert!(buf.iter().all(|&x| x == want), "block {blk}: want {want}");
    }
    fs.sync().unwrap();
    drop(fs);
    assert_fsck_clean(&img);
    // The reserved blocks written over, then both fscks again.
    let fs = Fs::open_rw(&img).unwrap();
    fs.write(f, 4000 * 4096, &vec![7u8; 300 * 4096]).unwrap();
    assert_eq!(fs.getattr(f).unwrap().blocks_512 / 8, blocks_after);
    fs.unmount().unwrap();
    assert_fsck_clean(&img);
    assert!(fs_rw_check_refused(&img));
    let report = Fs::open(&img).unwrap().check().unwrap();
    assert!(report.findings.is_empty(), "{:#?}", report.findings);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `check` on a writable volume is refused (it compares with the mounted checkpoint).
fn fs_rw_check_refused(img: &std::path::Path) -> bool {
    let fs = Fs::open_rw(img).unwrap();
    let refused = matches!(fs.check(), Err(uf2fs_engine::Error::InvalidArgument(_)));
    fs.unmount().unwrap();
    refused
}
