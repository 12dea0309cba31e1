//! Large directories: a name is found for removal or renaming by the buckets its hash
//! selects at each level of the directory's hash table, as a lookup finds it, not by reading
//! every dentry block (which made `rm -r` of a large directory quadratic).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    reason = "test code: a panic is the failure report"
)]

mod common;

use uf2fs_engine::{Error, Fs};
use uf2fs_testkit::{assert_fsck_clean, scratch};

#[test]
fn removing_and_renaming_in_a_large_directory_read_only_the_names_buckets() {
    let dir = scratch("large-dir");
    let img = common::fresh_image(&dir, 256, 0);
    let n = 40_000;
    let name = |i: usize| format!("entry-{i:05}").into_bytes();
    {
        let fs = Fs::open_rw(&img).unwrap();
        let d = fs
            .create_node(fs.root_ino(), b"d", common::node(0o040755))
            .unwrap();
        for i in 0..n {
            fs.create_node(d, &name(i), common::node(0o100644)).unwrap();
        }
        fs.unmount().unwrap();
    }
    // A cold mount: every dentry block a change reads comes from the device.
    let fs = Fs::open_rw(&img).unwrap();
    let d = fs.lookup(fs.root_ino(), b"d").unwrap();
    let dir_blocks = fs.getattr(d).unwrap().size / 4096;
    let before = fs.status().unwrap().io.read_blocks;
    for i in [0, 23_456, n - 1] {
        fs.unlink(d, &name(i)).unwrap();
    }
    fs.rename(d, &name(1), d, b"renamed", 0).unwrap();
    let read = fs.status().unwrap().io.read_blocks - before;
    // Four changes, each reading a bucket or two per level and the nodes that map them.
    assert!(
        read * 4 < dir_blocks,
        "{read} blocks read for three removals and a rename in a directory of {dir_blocks} blocks"
    );
    for i in [0, 1, 23_456, n - 1] {
        assert!(matches!(fs.lookup(d, &name(i)), Err(Error::NotFound)));
    }
    fs.lookup(d, b"renamed").unwrap();
    fs.lookup(d, &name(2)).unwrap();
    let left = fs
        .readdir(d)
        .unwrap()
        .into_iter()
        .filter(|e| e.name != b"." && e.name != b"..")
        .count();
    assert_eq!(left, n - 3);
    fs.unmount().unwrap();
    assert_fsck_clean(&img);
}
