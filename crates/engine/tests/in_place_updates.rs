//! In-place updates (`mode=adaptive`, Linux's default `ipu_policy`): a write of at most eight
//! blocks that its caller makes durable at once (`Fs::write_synced`, an O_SYNC or O_DSYNC
//! handle through the mount) rewrites the file's blocks where they are. Larger writes, plain
//! writes, holes and `mode=lfs` go out of place. Either way the bytes read back, survive a
//! crash after the fsync, and fsck.f2fs finds the image clean.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    reason = "test code: a panic is the failure report"
)]

mod common;

use uf2fs_engine::uf2fs_device::MemDevice;
use uf2fs_engine::{AllocMode, Extent, Fs, IpuPolicy, Options};
use uf2fs_testkit::{assert_fsck_clean, scratch, Rng};

const BS: usize = 4096;

fn extents(fs: &Fs, ino: u32) -> Vec<Extent> {
    let mut out = Vec::new();
    fs.extents(ino, &mut |e| {
        out.push(e);
        Ok(())
    })
    .unwrap();
    out
}

/// The device address of file block `fblk`.
fn addr_of(fs: &Fs, ino: u32, fblk: u64) -> Option<u32> {
    extents(fs, ino)
        .into_iter()
        .find(|e| (e.fblk..e.fblk + e.len).contains(&fblk))
        .map(|e| e.addr + (fblk - e.fblk) as u32)
}

fn read_all(fs: &Fs, ino: u32, len: usize) -> Vec<u8> {
    let mut got = vec![0u8; len];
    assert_eq!(fs.read(ino, 0, &mut got).unwrap(), len);
    got
}

#[test]
fn small_synchronous_rewrites_stay_where_they_are() {
    let dir = scratch("ipu-adaptive");
    let img = common::fresh_image(&dir, 128, 0);
    let fs = Fs::open_rw(&img).unwrap();
    assert_eq!(fs.options().mode, AllocMode::Adaptive, "the default mode");
    let ino = fs
        .create_node(fs.root_ino(), b"f", common::node(0o100644))
        .unwrap();
    let mut rng = Rng::new(11);
    let mut model = rng.bytes(64 * BS);
    fs.write(ino, 0, &model).unwrap();
    fs.sync().unwrap();
    let before = extents(&fs, ino);

    // One block, eight blocks, and a partial block: in place.
    for (off, len) in [(5 * BS, BS), (10 * BS, 8 * BS), (30 * BS + 100, 1000)] {
        let data = rng.bytes(len);
        model[off..off + len].copy_from_slice(&data);
        fs.write_synced(ino, off as u64, &data).unwrap();
    }
    fs.fsync(ino, false).unwrap();
    assert_eq!(extents(&fs, ino), before, "no block moved");
    let gc = fs.status().unwrap().gc;
    assert_eq!(gc.ipu_blocks, 10, "{gc:?}");

    // Nine blocks (more than Linux's min_fsync_blocks) and a plain write: out of place.
    let data = rng.bytes(9 * BS);
    model[40 * BS..49 * BS].copy_from_slice(&data);
    fs.write_synced(ino, 40 * BS as u64, &data).unwrap();
    let data = rng.bytes(BS);
    model[2 * BS..3 * BS].copy_from_slice(&data);
    let at2 = addr_of(&fs, ino, 2);
    fs.write(ino, 2 * BS as u64, &data).unwrap();
    fs.fsync(ino, false).unwrap();
    assert_ne!(addr_of(&fs, ino, 40), before_addr(&before, 40));
    assert_ne!(addr_of(&fs, ino, 2), at2);
    assert_eq!(fs.status().unwrap().gc.ipu_blocks, 10);
    assert_eq!(read_all(&fs, ino, model.len()), model);

    // A crash now (no final checkpoint): the image file as a power cut would leave it.
    let crashed = std::fs::read(&img).unwrap();
    drop(fs);
    let ro = Fs::with_device(Box::new(MemDevice::new(crashed.clone(), true))).unwrap();
    assert_eq!(
        read_all(&ro, ino, model.len()),
        model,
        "fsync'd rewrites after a crash"
    );
    drop(ro);
    let crash_img = dir.join("crashed");
    std::fs::write(&crash_img, &crashed).unwrap();
    let fs = Fs::open_rw(&crash_img).unwrap();
    assert_eq!(read_all(&fs, ino, model.len()), model, "after recovery");
    fs.unmount().unwrap();
    assert_fsck_clean(&crash_img);
}

fn before_addr(before: &[Extent], fblk: u64) -> Option<u32> {
    before
        .iter()
        .find(|e| (e.fblk..e.fblk + e.len).contains(&fblk))
        .map(|e| e.addr + (fblk - e.fblk) as u32)
}

#[test]
fn lfs_mode_and_holes_never_write_in_place() {
    let dir = scratch("ipu-lfs");
    let img = common::fresh_image(&dir, 128, 0);
    let mut fs = Fs::open_rw(&img).unwrap();
    let ino = fs
        .create_node(fs.root_ino(), b"f", common::node(0o100644))
        .unwrap();
    let mut rng = Rng::new(12);
    let mut model = rng.bytes(16 * BS);
    fs.write(ino, 0, &model).unwrap();
    fs.sync().unwrap();

    // A hole past the end is given a new block even in adaptive mode.
    let data = rng.bytes(BS);
    fs.write_synced(ino, 20 * BS as u64, &data).unwrap();
    model.resize(21 * BS, 0);
    model[20 * BS..].copy_from_slice(&data);
    assert_eq!(fs.status().unwrap().gc.ipu_blocks, 0);

    fs.set_options(Options {
        mode: AllocMode::Lfs,
        ..fs.options()
    });
    let at = addr_of(&fs, ino, 3);
    let data = rng.bytes(BS);
    model[3 * BS..4 * BS].copy_from_slice(&data);
    fs.write_synced(ino, 3 * BS as u64, &data).unwrap();
    fs.fsync(ino, false).unwrap();
    assert_ne!(addr_of(&fs, ino, 3), at, "mode=lfs moved the block");
    let gc = fs.status().unwrap().gc;
    assert_eq!((gc.ipu_blocks, gc.mode), (0, "lfs"), "{gc:?}");
    assert_eq!(read_all(&fs, ino, model.len()), model);
    fs.unmount().unwrap();
    assert_fsck_clean(&img);
}

/// `ipu=force` (Linux's default on volumes of at most 16 GiB): every rewrite of a file whose
/// block pointers are all durable stays in place; once an append changes a pointer, the
/// file's rewrites go out of place until a checkpoint has landed.
#[test]
fn forced_rewrites_wait_for_durable_pointers() {
    let dir = scratch("ipu-force");
    let img = common::fresh_image(&dir, 128, 0);
    let mut fs = Fs::open_rw(&img).unwrap();
    fs.set_options(Options {
        ipu: IpuPolicy::Force,
        ..fs.options()
    });
    let ino = fs
        .create_node(fs.root_ino(), b"f", common::node(0o100644))
        .unwrap();
    let mut rng = Rng::new(13);
    let mut model = rng.bytes(32 * BS);
    fs.write(ino, 0, &model).unwrap();
    fs.sync().unwrap();
    let before = extents(&fs, ino);
    let rewrite = |fs: &Fs, rng: &mut Rng, model: &mut Vec<u8>, fblk: usize| {
        let data = rng.bytes(BS);
        model[fblk * BS..(fblk + 1) * BS].copy_from_slice(&data);
        fs.write(ino, (fblk * BS) as u64, &data).unwrap();
    };
    for fblk in [3, 9, 3, 31] {
        rewrite(&fs, &mut rng, &mut model, fblk);
    }
    assert_eq!(extents(&fs, ino), before, "plain rewrites stayed in place");
    assert_eq!(fs.status().unwrap().gc.ipu_blocks, 4);

    // An append: a new pointer, not yet durable. The next rewrite goes out of place.
    let tail = rng.bytes(BS);
    fs.write(ino, model.len() as u64, &tail).unwrap();
    model.extend_from_slice(&tail);
    let at5 = addr_of(&fs, ino, 5);
    rewrite(&fs, &mut rng, &mut model, 5);
    assert_ne!(addr_of(&fs, ino, 5), at5, "out of place after the append");
    assert_eq!(fs.status().unwrap().gc.ipu_blocks, 4);

    // A checkpoint makes every pointer durable again: back in place.
    fs.sync().unwrap();
    let at7 = addr_of(&fs, ino, 7);
    rewrite(&fs, &mut rng, &mut model, 7);
    assert_eq!(addr_of(&fs, ino, 7), at7, "in place after the checkpoint");
    assert_eq!(fs.status().unwrap().gc.ipu_blocks, 5);
    assert_eq!(read_all(&fs, ino, model.len()), model);
    fs.unmount().unwrap();
    assert_fsck_clean(&img);
    let fs = Fs::open(&img).unwrap();
    assert_eq!(read_all(&fs, ino, model.len()), model, "after a remount");
}
