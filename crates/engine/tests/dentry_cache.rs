//! Changed dentry blocks are held in memory until the next checkpoint (`ns/dentry_cache.rs`):
//! names made and removed between two checkpoints rewrite a directory's blocks once, what is
//! held is what readers see, freed blocks are never written back, and what a checkpoint
//! records is whole.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    reason = "test code: a panic is the failure report"
)]

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use uf2fs_engine::{Error, Fs, Options};
use uf2fs_testkit::{assert_fsck_clean, scratch};

fn name(i: usize) -> Vec<u8> {
    format!("a-longer-file-name-{i:05}").into_bytes()
}

fn data_blocks_written(fs: &Fs) -> u64 {
    fs.status().unwrap().io.written_blocks["data"]
}

fn names_in(fs: &Fs, d: u32) -> usize {
    fs.readdir(d).unwrap().len()
}

#[test]
fn names_made_and_removed_between_checkpoints_write_each_dentry_block_once() {
    let dir = scratch("dentry-cache-once");
    let img = common::fresh_image(&dir, 256, 0);
    let n = 2_000;
    let (mut with, mut without) = (0, 0);
    for cache in [true, false] {
        let mut fs = Fs::open_rw(&img).unwrap();
        fs.set_options(Options {
            dentry_cache: cache,
            ..fs.options()
        });
        let sub = if cache { &b"with"[..] } else { b"without" };
        let d = fs
            .create_node(fs.root_ino(), sub, common::node(0o040755))
            .unwrap();
        // Past the inline area first, so that every change below rewrites a block.
        for i in 0..300 {
            fs.create_node(d, &name(i), common::node(0o100644)).unwrap();
        }
        fs.sync().unwrap();
        let before = data_blocks_written(&fs);
        for i in 300..n {
            fs.create_node(d, &name(i), common::node(0o100644)).unwrap();
        }
        for i in (0..n).step_by(2) {
            fs.unlink(d, &name(i)).unwrap();
        }
        // Everything is seen before any of it is written.
        assert_eq!(names_in(&fs, d), n / 2);
        assert!(matches!(fs.lookup(d, &name(0)), Err(Error::NotFound)));
        fs.lookup(d, &name(n - 1)).unwrap();
        fs.sync().unwrap();
        let written = data_blocks_written(&fs) - before;
        let blocks = fs.getattr(d).unwrap().size / 4096;
        if cache {
            with = written;
            let s = fs.status().unwrap().dentry_cache;
            assert!(s.kept >= (n - 300 + n / 2) as u64 - blocks, "{s:?}");
            assert_eq!(s.held, 0, "a checkpoint writes every held block");
            // Each block of the directory at most once, plus the new ones.
            assert!(written <= 2 * blocks, "{written} blocks for {blocks}");
        } else {
            without = written;
            assert_eq!(fs.status().unwrap().dentry_cache.kept, 0);
        }
        fs.unmount().unwrap();
    }
    assert!(
        with * 20 < without,
        "dentry blocks written: {with} with the cache, {without} without"
    );
    assert_fsck_clean(&img);
    let fs = Fs::open_rw(&img).unwrap();
    for sub in [&b"with"[..], b"without"] {
        let d = fs.lookup(fs.root_ino(), sub).unwrap();
        assert_eq!(names_in(&fs, d), n / 2);
        for i in [1, 777, n - 1] {
            fs.lookup(d, &name(i)).unwrap();
        }
        assert!(matches!(fs.lookup(d, &name(2)), Err(Error::NotFound)));
    }
}

#[test]
fn a_small_cache_writes_what_it_holds_past_its_share() {
    let dir = scratch("dentry-cache-cap");
    let img = common::fresh_image(&dir, 256, 0);
    let mut fs = Fs::open_rw(&img).unwrap();
    // The smallest bound: 4 MiB, a 64th of it for dentry blocks (16 blocks).
    fs.set_options(Options {
        cache_bytes: uf2fs_engine::MIN_CACHE_BYTES,
        ..fs.options()
    });
    let dirs: Vec<u32> = (0..40)
        .map(|k| {
            let d = fs
                .create_node(
                    fs.root_ino(),
                    format!("d{k}").as_bytes(),
                    common::node(0o040755),
                )
                .unwrap();
            for i in 0..250 {
                fs.create_node(d, &name(i), common::node(0o100644)).unwrap();
            }
            d
        })
        .collect();
    for &d in &dirs {
        fs.unlink(d, &name(249)).unwrap();
        let held = fs.status().unwrap().dentry_cache.held;
        assert!(held <= 16, "{held} blocks held past a share of 16");
    }
    let s = fs.status().unwrap().dentry_cache;
    assert!(s.flushed > 0 && s.kept > 0, "{s:?}");
    fs.unmount().unwrap();
    assert_fsck_clean(&img);
    let fs = Fs::open_rw(&img).unwrap();
    for &d in &dirs {
        assert_eq!(names_in(&fs, d), 249);
    }
}

#[test]
fn a_directory_removed_while_its_blocks_are_held_leaves_nothing_to_write() {
    let dir = scratch("dentry-cache-rmdir");
    let img = common::fresh_image(&dir, 256, 0);
    let fs = Fs::open_rw(&img).unwrap();
    let root = fs.root_ino();
    let d = fs
        .create_node(root, b"gone", common::node(0o040755))
        .unwrap();
    for i in 0..600 {
        fs.create_node(d, &name(i), common::node(0o100644)).unwrap();
    }
    fs.sync().unwrap();
    // Every block rewritten (held), then emptied: the empty ones are freed as they go.
    for i in 0..600 {
        fs.unlink(d, &name(i)).unwrap();
    }
    assert!(fs.status().unwrap().dentry_cache.held > 0);
    fs.rmdir(root, b"gone").unwrap();
    // A new directory, likely on the freed inode's number, gets none of the old blocks.
    let e = fs
        .create_node(root, b"new", common::node(0o040755))
        .unwrap();
    for i in 0..300 {
        fs.create_node(e, &name(i), common::node(0o100644)).unwrap();
    }
    fs.sync().unwrap();
    assert_eq!(fs.status().unwrap().dentry_cache.held, 0);
    assert_eq!(names_in(&fs, e), 300);
    fs.unmount().unwrap();
    assert_fsck_clean(&img);
}

#[test]
fn readers_racing_flushes_see_every_name_made_before_they_looked() {
    let dir = scratch("dentry-cache-race");
    let img = common::fresh_image(&dir, 256, 0);
    let fs = Fs::open_rw(&img).unwrap();
    let d = fs
        .create_node(fs.root_ino(), b"d", common::node(0o040755))
        .unwrap();
    for i in 0..400 {
        fs.create_node(d, &name(i), common::node(0o100644)).unwrap();
    }
    fs.sync().unwrap();
    // Names are made one by one (each held in a dentry block), `made` counting those whose
    // change returned; a checkpoint every few names flushes the held blocks to new addresses.
    let made = AtomicUsize::new(400);
    let stop = AtomicBool::new(false);
    let total = 3_000;
    std::thread::scope(|s| {
        let (fs, made, stop) = (&fs, &made, &stop);
        s.spawn(move || {
            for i in 400..total {
                fs.create_node(d, &name(i), common::node(0o100644)).unwrap();
                made.store(i + 1, Ordering::SeqCst);
                if i.is_multiple_of(7) {
                    fs.sync().unwrap();
                }
            }
            stop.store(true, Ordering::SeqCst);
        });
        for _ in 0..2 {
            s.spawn(move || {
                let mut k = 0usize;
                while !stop.load(Ordering::SeqCst) {
                    let upto = made.load(Ordering::SeqCst);
                    // The newest name and an older one, both made before this looked.
                    for i in [upto - 1, k % upto] {
                        match fs.lookup(d, &name(i)) {
                            Ok(_) => {}
                            Err(e) => panic!("name {i} of {upto} made: {e}"),
                        }
                    }
                    if k.is_multiple_of(50) {
                        let seen = names_in(fs, d);
                        assert!(seen >= upto, "readdir saw {seen} of {upto} names made");
                    }
                    k += 1;
                }
            });
        }
    });
    assert_eq!(names_in(&fs, d), total);
    fs.unmount().unwrap();
    assert_fsck_clean(&img);
}
