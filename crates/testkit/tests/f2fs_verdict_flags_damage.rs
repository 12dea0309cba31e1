//! `tools/f2fs-verdict` must tell a sound image from a damaged one, since every test that
//! calls `assert_fsck_clean` trusts it: a fresh mkfs.f2fs image and a Linux-written fixture
//! are clean (whatever info lines fsck.f2fs 1.15 prints for them, such as the second
//! checkpoint pack being copied to its mirror position), and one flipped field makes them
//! not clean: a dentry naming a node that does not exist, and a checkpoint pack whose CRC no
//! longer matches.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    reason = "test code: a panic is the failure report"
)]

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::process::Command;
use uf2fs_testkit::{fixture, fsck_f2fs, run, scratch};

const BLOCK: u64 = 4096;

fn write_at(img: &Path, offset: u64, bytes: &[u8]) {
    let f = OpenOptions::new().write(true).open(img).unwrap();
    f.write_all_at(bytes, offset).unwrap();
}

fn read_u32(img: &Path, offset: u64) -> u32 {
    let f = std::fs::File::open(img).unwrap();
    let mut b = [0u8; 4];
    f.read_exact_at(&mut b, offset).unwrap();
    u32::from_le_bytes(b)
}

/// The first data block of the root directory (inode 3), as dump.f2fs prints it.
fn root_dentry_block(img: &Path) -> u64 {
    let out = run(Command::new("dump.f2fs").args(["-i", "3"]).arg(img));
    let line = out
        .lines()
        .find(|l| l.starts_with("i_addr[0x0]"))
        .unwrap_or_else(|| panic!("dump.f2fs shows no i_addr[0x0] for the root:\n{out}"));
    // i_addr[0x0]                 		[0x    1604 : 5636]
    let decimal = line
        .rsplit(':')
        .next()
        .unwrap()
        .trim()
        .trim_end_matches(']');
    decimal.parse().unwrap()
}

#[test]
fn a_fresh_mkfs_image_is_clean() {
    let dir = scratch("verdict-fresh");
    let img = dir.join("fresh.img");
    std::fs::File::create(&img)
        .unwrap()
        .set_len(64 << 20)
        .unwrap();
    run(Command::new("mkfs.f2fs").args(["-f", "-q"]).arg(&img));
    let (clean, report) = fsck_f2fs(&img);
    assert!(clean, "{report}");
}

#[test]
fn a_dentry_pointing_nowhere_is_not_clean() {
    let dir = scratch("verdict-dentry");
    let img = fixture("linux-default", &dir);
    let (clean, report) = fsck_f2fs(&img);
    assert!(clean, "the fixture itself: {report}");
    // A dentry block: 27 bytes of bitmap, 3 reserved, then 11-byte entries (hash, ino,
    // name length, type). Slots 0 and 1 are "." and ".."; slot 2's ino becomes 0x7777.
    let block = root_dentry_block(&img);
    write_at(&img, block * BLOCK + 30 + 2 * 11 + 4, &[0x77, 0x77, 0, 0]);
    let (clean, report) = fsck_f2fs(&img);
    assert!(
        !clean,
        "a bogus ino in the root directory passed:\n{report}"
    );
    assert!(report.contains("[ASSERT]"), "{report}");
}

#[test]
fn a_checkpoint_with_a_bad_crc_is_not_clean() {
    let dir = scratch("verdict-cp");
    let img = fixture("linux-default", &dir);
    // cp_blkaddr: the superblock (at byte 1024) holds it at offset 76.
    let cp = u64::from(read_u32(&img, 1024 + 76));
    write_at(&img, cp * BLOCK + 100, &[0x55]);
    let (clean, report) = fsck_f2fs(&img);
    assert!(!clean, "a checkpoint pack with a bad CRC passed:\n{report}");
    assert!(report.contains("Invalid CP CRC"), "{report}");
}
