//! fsync by node chain survives a crash: the volume is dropped without unmount (no final
//! checkpoint), a copy of the image is mounted again, recovery replays the chain, and every
//! fsync'd file reads back; after the recovered mount's unmount, fsck.f2fs and uf2fs fsck
//! find the image clean. Also: which fsyncs take the chain and which a checkpoint.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    reason = "test code: a panic is the failure report"
)]

mod common;

use std::path::Path;
use uf2fs_engine::uf2fs_device::MemDevice;
use uf2fs_engine::{Fs, Options};
use uf2fs_testkit::{assert_fsck_clean, scratch, Rng};

fn read_all(fs: &Fs, ino: u32) -> Vec<u8> {
    let size = fs.getattr(ino).unwrap().size as usize;
    let mut buf = vec![0u8; size];
    let n = fs.read(ino, 0, &mut buf).unwrap();
    buf.truncate(n);
    buf
}

/// The image as a power cut now would leave it (the image file: every write has landed).
fn crash_copy(img: &Path) -> Vec<u8> {
    std::fs::read(img).unwrap()
}

/// Mounts a crash image read-write (recovery runs), checks `expect` (path, bytes), unmounts,
/// and judges the result with both checkers.
fn recover_and_check(crash: &Path, image: Vec<u8>, expect: &[(&[u8], Vec<u8>)]) -> Fs {
    // Read-only first: recovery in memory, nothing written.
    let ro = Fs::with_device(Box::new(MemDevice::new(image.clone(), true))).unwrap();
    for (path, bytes) in expect {
        let ino = ro.resolve(path, true).unwrap();
        let got = read_all(&ro, ino);
        assert!(
            got == *bytes,
            "read-only view of {}: {} bytes, expected {}, first difference at {:?}; {:?} {:?}",
            String::from_utf8_lossy(path),
            got.len(),
            bytes.len(),
            got.iter().zip(bytes.iter()).position(|(a, b)| a != b),
            ro.status().unwrap().recovery,
            ro.mount_notes()
        );
    }
    drop(ro);
    std::fs::write(crash, &image).unwrap();
    let fs = Fs::open_rw(crash).unwrap();
    let st = fs.status().unwrap();
    assert!(st.recovery.is_some(), "a chain was there to replay");
    for (path, bytes) in expect {
        let ino = fs
            .resolve(path, true)
            .unwrap_or_else(|e| panic!("{}: {e}", String::from_utf8_lossy(path)));
        assert!(
            read_all(&fs, ino) == *bytes,
            "{} differs after recovery",
            String::from_utf8_lossy(path)
        );
    }
    fs
}

#[test]
fn appends_overwrites_and_new_files_come_back() {
    let dir = scratch("recovery-after-fsync");
    let img = common::fresh_image(&dir, 128, 0);
    let mut rng = Rng::new(7);
    let fs = Fs::open_rw(&img).unwrap();
    let root = fs.root_ino();
    let d = fs.create_node(root, b"d", common::node(0o40755)).unwrap();
    let old = fs.create_node(d, b"old", common::node(0o100644)).unwrap();
    let base = rng.bytes(100_000);
    fs.write(old, 0, &base).unwrap();
    fs.sync().unwrap();
    // After the checkpoint: an append, an overwrite, a new file, a big new file, a new
    // inline file; each fsync'd.
    let add = rng.bytes(50_000);
    fs.write(old, base.len() as u64, &add).unwrap();
    let over = rng.bytes(9000);
    fs.write(old, 4000, &over).unwrap();
    fs.fsync(old, false).unwrap();
    let mut old_bytes = base.clone();
    old_bytes.extend_from_slice(&add);
    old_bytes[4000..13000].copy_from_slice(&over);
    let new = fs.create_node(d, b"new", common::node(0o100600)).unwrap();
    let new_bytes = rng.bytes(20_000);
    fs.write(new, 0, &new_bytes).unwrap();
    fs.fsync(new, true).unwrap();
    let big = fs.create_node(d, b"big", common::node(0o100644)).unwrap();
    let big_bytes = rng.bytes(3000 * 4096 + 17);
    fs.write(big, 0, &big_bytes).unwrap();
    fs.fsync(big, false).unwrap();
    let tiny = fs
        .create_node(root, b"tiny", common::node(0o100644))
        .unwrap();
    fs.write(tiny, 0, b"inline bytes").unwrap();
    fs.fsync(tiny, false).unwrap();
    // Written after the last fsync and never synced: may be lost, must not corrupt.
    let lost = fs
        .create_node(d, b"unsynced", common::node(0o100644))
        .unwrap();
    fs.write(lost, 0, &rng.bytes(5000)).unwrap();
    let st = fs.status().unwrap();
    assert_eq!(
        st.fsync.by_node_chain, 4,
        "four fsyncs by node chain: {:?}",
        st.fsync
    );
    assert_eq!(st.fsync.by_checkpoint, 0);
    assert_eq!(
        st.checkpoints.written, 1,
        "only the explicit sync wrote a checkpoint"
    );
    let image = crash_copy(&img);
    drop(fs);

    let expect: Vec<(&[u8], Vec<u8>)> = vec![
        (b"/d/old", old_bytes),
        (b"/d/new", new_bytes),
        (b"/d/big", big_bytes),
        (b"/tiny", b"inline bytes".to_vec()),
    ];
    let out = dir.join("crash.img");
    let fs = recover_and_check(&out, image, &expect);
    let rec = fs.status().unwrap().recovery.unwrap();
    assert_eq!(rec.inodes, 4, "{rec:?}");
    assert_eq!(
        rec.dentries, 3,
        "three new files get their entries back: {rec:?}"
    );
    // The recovered volume takes changes, and unmounts clean.
    let more = fs
        .create_node(root, b"after", common::node(0o100644))
        .unwrap();
    fs.write(more, 0, b"written after recovery").unwrap();
    fs.unmount().unwrap();
    assert_fsck_clean(&out);
    let fs = Fs::open(&out).unwrap();
    let r = fs.check().unwrap();
    assert!(r.findings.is_empty(), "uf2fs fsck: {:?}", r.findings);
    for (path, bytes) in &expect {
        let ino = fs.resolve(path, true).unwrap();
        assert!(
            read_all(&fs, ino) == *bytes,
            "{}",
            String::from_utf8_lossy(path)
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn fsyncs_that_need_a_checkpoint_take_one() {
    let dir = scratch("fsync-needs-cp");
    let img = common::fresh_image(&dir, 64, 0);
    let fs = Fs::open_rw(&img).unwrap();
    let root = fs.root_ino();
    let f = fs.create_node(root, b"f", common::node(0o100644)).unwrap();
    fs.write(f, 0, b"x").unwrap();
    fs.sync().unwrap();
    let cps = |fs: &Fs| fs.status().unwrap().checkpoints.written;
    let base = cps(&fs);
    // A directory unchanged since the last checkpoint: that checkpoint serves.
    fs.fsync(root, false).unwrap();
    assert_eq!(cps(&fs), base, "fsync of an unchanged directory");
    // A changed directory: checkpoint.
    fs.create_node(root, b"e", common::node(0o100644)).unwrap();
    fs.fsync(root, false).unwrap();
    assert_eq!(cps(&fs), base + 1, "fsync of a directory");
    // A file in a directory made since the last checkpoint: checkpoint.
    let d = fs.create_node(root, b"d", common::node(0o40755)).unwrap();
    let g = fs.create_node(d, b"g", common::node(0o100644)).unwrap();
    fs.fsync(g, false).unwrap();
    assert_eq!(cps(&fs), base + 2, "parent not in a checkpoint");
    // A renamed file: checkpoint.
    fs.rename(root, b"f", d, b"f2", 0).unwrap();
    fs.fsync(f, false).unwrap();
    assert_eq!(cps(&fs), base + 3, "rename");
    // A hard link: checkpoint.
    fs.link(f, root, b"f-link").unwrap();
    fs.fsync(f, false).unwrap();
    assert_eq!(cps(&fs), base + 4, "two links");
    // A plain write to a file in a checkpointed directory: the chain.
    fs.write(g, 0, b"data").unwrap();
    fs.fsync(g, false).unwrap();
    assert_eq!(cps(&fs), base + 4, "plain write");
    // fsync_mode=strict: a new file's fsync checkpoints.
    let mut fs = fs;
    fs.set_options(Options {
        fsync_mode: uf2fs_engine::FsyncMode::Strict,
        ..fs.options()
    });
    let h = fs.create_node(d, b"h", common::node(0o100644)).unwrap();
    fs.fsync(h, false).unwrap();
    assert_eq!(cps(&fs), base + 5, "strict mode, new file");
    // fdatasync after a change of times only writes nothing.
    fs.write(g, 0, b"more").unwrap();
    fs.fsync(g, false).unwrap();
    let chain = fs.status().unwrap().fsync.chain_blocks;
    fs.set_attr(g, None, None, Some((5, 0)), Some((6, 0)))
        .unwrap();
    fs.fsync(g, true).unwrap();
    assert_eq!(
        fs.status().unwrap().fsync.chain_blocks,
        chain,
        "fdatasync of times only"
    );
    fs.fsync(g, false).unwrap();
    assert!(
        fs.status().unwrap().fsync.chain_blocks > chain,
        "fsync writes the inode"
    );
    fs.unmount().unwrap();
    assert_fsck_clean(&img);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A crash image with one fsync'd file, and the address of the chain's first block.
fn chained_image(dir: &Path) -> (Vec<u8>, u64) {
    let img = common::fresh_image(dir, 64, 0);
    let fs = Fs::open_rw(&img).unwrap();
    let f = fs
        .create_node(fs.root_ino(), b"f", common::node(0o100644))
        .unwrap();
    fs.write(f, 0, &vec![7u8; 10_000]).unwrap();
    fs.sync().unwrap();
    fs.write(f, 10_000, &vec![8u8; 10_000]).unwrap();
    fs.fsync(f, false).unwrap();
    let image = crash_copy(&img);
    drop(fs);
    // The chain starts where the checkpoint on disk (the sync's) left the warm-node log.
    let ro = Fs::with_device(Box::new(MemDevice::new(image.clone(), true))).unwrap();
    let c = ro.checkpoint().cursegs[4];
    let start =
        u64::from(ro.superblock().layout().main) + u64::from(c.segno) * 512 + u64::from(c.blkoff);
    (image, start)
}

fn put32(image: &mut [u8], block: u64, at: usize, v: u32) {
    let o = block as usize * 4096 + at;
    image[o..o + 4].copy_from_slice(&v.to_le_bytes());
}

#[test]
fn hostile_chains_fail_cleanly() {
    let dir = scratch("hostile-chain");
    let (image, start) = chained_image(&dir);
    // The untouched image recovers (the test's premise).
    let fs = Fs::with_device_rw(Box::new(MemDevice::new(image.clone(), false))).unwrap();
    assert_eq!(fs.status().unwrap().recovery.unwrap().inodes, 1);
    drop(fs);
    // 1. The chain's block names itself as the next: a loop.
    let mut looped = image.clone();
    put32(&mut looped, start, 4092, start as u32);
    let e = Fs::with_device_rw(Box::new(MemDevice::new(looped.clone(), false)))
        .err()
        .expect("a looping chain is refused for writing");
    assert!(e.to_string().contains("roll-forward chain"), "{e}");
    let ro = Fs::with_device(Box::new(MemDevice::new(looped, true))).unwrap();
    assert!(
        ro.mount_notes().iter().any(|n| n.contains("not followed")),
        "{:?}",
        ro.mount_notes()
    );
    let f = ro.resolve(b"/f", true).unwrap();
    assert_eq!(ro.getattr(f).unwrap().size, 10_000, "the checkpoint's file");
    // 2. The inode's first block pointer names a block the checkpoint uses (the root's
    //    inode): recovery must not give one block two owners.
    let mut stolen = image.clone();
    let root_addr = {
        let fs = Fs::with_device(Box::new(MemDevice::new(image.clone(), true))).unwrap();
        let mut a = 0;
        fs.extents(f, &mut |x| {
            if x.fblk == 0 {
                a = x.addr;
            }
            Ok(())
        })
        .unwrap();
        a
    };
    // Another file's data: block 0 of `f` as the checkpoint has it, given to block 4 too.
    put32(&mut stolen, start, 360 + 4 * 4, root_addr);
    let e = Fs::with_device_rw(Box::new(MemDevice::new(stolen.clone(), false)))
        .err()
        .expect("a chain that steals a block is refused for writing");
    assert!(e.to_string().contains("already in use"), "{e}");
    let ro = Fs::with_device(Box::new(MemDevice::new(stolen, true))).unwrap();
    assert!(
        ro.mount_notes()
            .iter()
            .any(|n| n.contains("recovery failed")),
        "{:?}",
        ro.mount_notes()
    );
    // 3. A pointer outside the main area.
    let mut outside = image;
    put32(&mut outside, start, 360 + 4 * 4, 3);
    let e = Fs::with_device_rw(Box::new(MemDevice::new(outside, false)))
        .err()
        .expect("a pointer outside the main area is refused");
    assert!(e.to_string().contains("outside the main area"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}
