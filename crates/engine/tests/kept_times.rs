//! The times a FUSE kernel keeps for a file (writeback cache) and sends on their own: one
//! such SETATTR overtaken by a newer one is not stored over it, and a time set back on
//! purpose (its change time is new) is; what is stored is what a remount reads.

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

fn times(fs: &Fs, ino: u32) -> ((i64, u32), (i64, u32)) {
    let a = fs.getattr(ino).unwrap();
    ((a.mtime.sec, a.mtime.nsec), (a.ctime.sec, a.ctime.nsec))
}

#[test]
fn older_kept_times_do_not_overwrite_newer_ones() {
    let dir = scratch("kept-times");
    let img = common::fresh_image(&dir, 64, 0);
    let fs = Fs::open_rw(&img).unwrap();
    let f = fs
        .create_node(fs.root_ino(), b"f", common::node(0o100644))
        .unwrap();
    // Later than the creation stamp, as the kernel's flushes are.
    let (t1, t2, t3) = (
        (4_000_000_000, 100),
        (4_000_000_000, 200),
        (4_000_000_001, 5),
    );

    // In order: each is stored.
    assert!(fs.set_kept_times(f, t1, t1).unwrap());
    assert!(fs.set_kept_times(f, t2, t2).unwrap());
    assert_eq!(times(&fs, f), (t2, t2));

    // Overtaken (a truncation's newer times landed first): not stored.
    assert!(!fs.set_kept_times(f, t1, t1).unwrap());
    assert_eq!(times(&fs, f), (t2, t2));

    // An older modification time with a newer change time (`touch -d` in the past): stored.
    assert!(fs.set_kept_times(f, t1, t3).unwrap());
    assert_eq!(times(&fs, f), (t1, t3));

    // Equal times are stored again (a repeated flush changes nothing).
    assert!(fs.set_kept_times(f, t1, t3).unwrap());

    fs.final_checkpoint().unwrap();
    drop(fs);
    let fs = Fs::open(&img).unwrap();
    assert_eq!(times(&fs, f), (t1, t3), "after a remount");
    drop(fs);
    assert_fsck_clean(&img);
}
