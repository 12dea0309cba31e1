//! Open-unlinked files: a held inode survives its last unlink as an orphan (readable, and
//! recorded by every checkpoint) until its last release frees it. After a crash with an
//! orphan recorded, Linux's mount and uf2fs's writable mount both free it; fsck.f2fs is
//! clean in every case.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    reason = "test code: a panic is the failure report"
)]

mod common;

use uf2fs_engine::{Error, Fs};
use uf2fs_testkit::{assert_fsck_clean, kernel_f2fs, scratch};

fn setup(dir: &std::path::Path) -> (std::path::PathBuf, u32, u64) {
    let img = common::fresh_image(dir, 128, 0);
    let fs = Fs::open_rw(&img).unwrap();
    let free0 = fs.statfs().blocks_free;
    let f = fs
        .create_node(fs.root_ino(), b"open-file", common::node(0o100644))
        .unwrap();
    fs.write(f, 0, &vec![9u8; 3 << 20]).unwrap();
    fs.sync().unwrap();
    fs.hold(f).unwrap();
    fs.unlink(fs.root_ino(), b"open-file").unwrap();
    assert!(matches!(
        fs.lookup(fs.root_ino(), b"open-file"),
        Err(Error::NotFound)
    ));
    let mut buf = vec![0u8; 4096];
    assert_eq!(
        fs.read(f, 1 << 20, &mut buf).unwrap(),
        4096,
        "an orphan still reads"
    );
    assert_eq!(buf[0], 9);
    fs.sync().unwrap();
    // The image as a second reader sees it now (a copy: the live mount holds the lock).
    let copy = uf2fs_engine::uf2fs_device::MemDevice::new(std::fs::read(&img).unwrap(), true);
    assert_eq!(
        Fs::with_device(Box::new(copy))
            .unwrap()
            .info()
            .mount
            .orphan_inodes,
        1,
        "the checkpoint records the orphan"
    );
    // A crash: the Fs goes without release or unmount.
    drop(fs);
    (img, f, free0)
}

#[test]
fn release_frees_the_orphan() {
    let dir = scratch("orphan-release");
    let img = common::fresh_image(&dir, 128, 0);
    let fs = Fs::open_rw(&img).unwrap();
    let free0 = fs.statfs().blocks_free;
    let f = fs
        .create_node(fs.root_ino(), b"x", common::node(0o100644))
        .unwrap();
    fs.write(f, 0, &vec![1u8; 1 << 20]).unwrap();
    fs.hold(f).unwrap();
    fs.unlink(fs.root_ino(), b"x").unwrap();
    fs.release(f).unwrap();
    assert!(
        fs.inode(f).is_err() || fs.read(f, 0, &mut [0u8; 1]).is_err(),
        "freed"
    );
    assert_eq!(fs.statfs().blocks_free, free0, "its blocks are free again");
    fs.unmount().unwrap();
    assert_eq!(Fs::open(&img).unwrap().info().mount.orphan_inodes, 0);
    assert_fsck_clean(&img);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn linux_frees_an_orphan_left_by_a_crash() {
    let dir = scratch("orphan-linux");
    let (img, _, _) = setup(&dir);
    let k = kernel_f2fs(&img, "ls /mnt > $OUT/ls.txt\n", &dir.join("k"));
    assert_eq!(k.exit, 0, "{}", k.job_log);
    assert!(k.f2fs_complaints().is_empty(), "{:#?}", k.f2fs_complaints());
    assert_fsck_clean(&img);
    let fs = Fs::open(&img).unwrap();
    assert_eq!(fs.info().mount.orphan_inodes, 0);
    assert!(fs.readdir(fs.root_ino()).unwrap().is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn uf2fs_frees_an_orphan_left_by_a_crash() {
    let dir = scratch("orphan-uf2fs");
    let (img, f, before) = setup(&dir);
    let fs = Fs::open_rw(&img).unwrap();
    assert!(fs.inode(f).is_err(), "the orphan is gone after mount");
    assert_eq!(
        fs.statfs().blocks_free,
        before,
        "its data, nodes and inode are free again"
    );
    fs.unmount().unwrap();
    assert_eq!(Fs::open(&img).unwrap().info().mount.orphan_inodes, 0);
    assert_fsck_clean(&img);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A node id the kernel still holds after another process unlinked the file while nobody had
/// it open (fstests generic/089 and 241: an atime update after a read whose file a rename
/// replaced meanwhile; an open of a lock file just unlinked). Every request on it is
/// NotFound, before anything changes: the volume does not fail (it did, as "corrupt image:
/// NAT entry is free for a node in use", and went read-only, losing every change since its
/// last checkpoint), and the image stays clean.
#[test]
fn requests_on_a_freed_inode_are_not_found_and_the_volume_goes_on() {
    let dir = scratch("orphan-freed");
    let img = common::fresh_image(&dir, 128, 0);
    let fs = Fs::open_rw(&img).unwrap();
    let root = fs.root_ino();
    let f = fs
        .create_node(root, b"gone", common::node(0o100644))
        .unwrap();
    fs.write(f, 0, b"data").unwrap();
    fs.unlink(root, b"gone").unwrap();
    let nf = |r: Result<(), Error>, what: &str| {
        assert!(matches!(r, Err(Error::NotFound)), "{what}: {r:?}");
    };
    nf(fs.hold(f), "hold (open)");
    nf(fs.set_atime(f, (1, 0)), "set_atime");
    nf(fs.set_attr(f, Some(0o600), None, None, None), "set_attr");
    nf(fs.write(f, 0, b"more").map(|_| ()), "write");
    nf(fs.truncate(f, 0), "truncate");
    nf(fs.fallocate(f, 0, 0, 8192), "fallocate");
    nf(fs.setxattr(f, b"user.a", b"1", 0), "setxattr");
    nf(fs.link(f, root, b"again"), "link");
    // Still writable: a new file, a checkpoint, a clean image.
    let g = fs
        .create_node(root, b"after", common::node(0o100644))
        .unwrap();
    fs.write(g, 0, b"ok").unwrap();
    fs.sync().unwrap();
    fs.unmount().unwrap();
    assert_fsck_clean(&img);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A FUSE kernel sends RELEASE without waiting for it: a program that wrote a file, closed
/// it and removed it can ask for its space again before the daemon has freed it (fstests
/// generic/371). A change that finds the user's space short while orphans are held waits
/// for their release, briefly, instead of failing with ENOSPC at once; with nothing held it
/// fails at once.
#[test]
fn a_change_short_of_space_waits_for_an_orphan_being_released() {
    let dir = scratch("orphan-release-wait");
    let img = common::fresh_image(&dir, 128, 0);
    let fs = Fs::open_rw(&img).unwrap();
    let room = fs.statfs().blocks_avail * 4096;
    let big = (room * 3 / 5) & !4095;
    let a = fs
        .create_node(fs.root_ino(), b"a", common::node(0o100644))
        .unwrap();
    for (i, chunk) in vec![1u8; big as usize].chunks(1 << 20).enumerate() {
        fs.write(a, (i << 20) as u64, chunk).unwrap();
    }
    fs.hold(a).unwrap();
    fs.unlink(fs.root_ino(), b"a").unwrap();
    let b = fs
        .create_node(fs.root_ino(), b"b", common::node(0o100644))
        .unwrap();
    // Both files do not fit at once: with `a` held, `b`'s space comes only from its release,
    // and the wait for it is bounded.
    let asked = std::time::Instant::now();
    assert!(matches!(fs.fallocate(b, 0, 0, big), Err(Error::NoSpace)));
    assert!(asked.elapsed() < std::time::Duration::from_secs(5));
    std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(std::time::Duration::from_millis(20));
            fs.release(a).unwrap();
        });
        fs.fallocate(b, 0, 0, big)
            .expect("the fallocate waits for the orphan's release and then fits");
    });
    assert_eq!(fs.inode(b).unwrap().size, big);
    fs.unmount().unwrap();
    assert_fsck_clean(&img);
    let _ = std::fs::remove_dir_all(&dir);
}
