//! Regression tests for corruptions the mutation test found, one behaviour each.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    reason = "test code: a panic is the failure report"
)]

use uf2fs_device::MemDevice;
use uf2fs_engine::{FileType, Fs, WalkItem};
use uf2fs_testkit::{fixture, scratch};

/// Rewrites, in every copy of node `ino`'s inode block found in the image, 8 bytes at `at`.
fn patch_inode(img: &mut [u8], ino: u32, at: usize, value: u64) -> usize {
    let mut n = 0;
    for b in img.chunks_mut(4096) {
        let word = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
        if word(4072) == ino && word(4076) == ino && word(4080) >> 3 == 0 {
            b[at..at + 8].copy_from_slice(&value.to_le_bytes());
            n += 1;
        }
    }
    n
}

/// Found by the mutation test: st_blocks of an inline file or inline directory added the
/// inline bytes to (i_blocks - 1) * 8 without saturating, and overflowed on a huge i_blocks.
#[test]
fn huge_i_blocks_on_inline_inode_does_not_overflow() {
    let dir = scratch("huge-iblocks");
    let mut img = std::fs::read(fixture("linux-default", &dir)).unwrap();
    let fs = Fs::with_device(Box::new(MemDevice::new(img.clone(), true))).unwrap();
    let mut inline = Vec::new();
    fs.walk(fs.root_ino(), &mut |item| {
        if let WalkItem::Entry { ino, attr, .. } = item {
            let i = fs.inode(ino)?;
            if (attr.file_type == FileType::Regular && i.has_inline_data() && attr.size > 0)
                || i.has_inline_dentry()
            {
                inline.push(ino);
            }
        }
        Ok(true)
    })
    .unwrap();
    assert!(
        inline.len() > 2,
        "the fixture has inline files and directories"
    );
    for &ino in inline.iter().take(20) {
        assert!(patch_inode(&mut img, ino, 24, u64::MAX) > 0);
    }
    let fs = Fs::with_device(Box::new(MemDevice::new(img, true))).unwrap();
    for &ino in inline.iter().take(20) {
        let a = fs.getattr(ino).unwrap();
        assert_eq!(a.blocks_512, u64::MAX, "saturates instead of wrapping");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
