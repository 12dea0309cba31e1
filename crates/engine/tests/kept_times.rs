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

/// A time the engine stamped itself (a punched hole's) is not what the kernel showed: an
/// older flush of the times the kernel kept replaces it, while a flush older than a time a
/// caller gave is still refused. (Stop 48: the guard compared with every stored time, and an
/// fsx file ended 4 ms newer in the image than `stat` had shown.)
#[test]
fn kept_times_replace_the_engines_own_stamps() {
    let dir = scratch("kept-times-stamps");
    let img = common::fresh_image(&dir, 64, 0);
    let fs = Fs::open_rw(&img).unwrap();
    let f = fs
        .create_node(fs.root_ino(), b"f", common::node(0o100644))
        .unwrap();
    fs.write(f, 0, &[7u8; 16384]).unwrap();
    let (k1, k2) = ((1_700_000_000, 10), (1_700_000_001, 20));
    assert!(fs.set_kept_times(f, k1, k1).unwrap());
    // Punch a hole: the engine stamps its own clock, years after k1 and k2.
    fs.fallocate(f, 0x3, 4096, 4096).unwrap();
    assert!(times(&fs, f).0 > k2, "the punch did not stamp the clock");
    assert!(
        fs.set_kept_times(f, k2, k2).unwrap(),
        "the kernel's flush was refused"
    );
    assert_eq!(times(&fs, f), (k2, k2));
    // A flush older than the last one given is still overtaken.
    assert!(!fs.set_kept_times(f, k1, k1).unwrap());
    assert_eq!(times(&fs, f), (k2, k2));
    fs.final_checkpoint().unwrap();
    drop(fs);
    assert_fsck_clean(&img);
}
