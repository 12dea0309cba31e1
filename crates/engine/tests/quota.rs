//! Quota images (`mkfs.f2fs -O quota` and `project_quota`) are writable and their quota files
//! stay exact: fsck.f2fs recounts every uid's, gid's and project's usage from the inodes and
//! fails on any difference (tools/f2fs-verdict fails on quota findings), after uf2fs changes
//! of every kind, after a crash replayed by roll-forward recovery, and after Linux wrote to
//! what uf2fs left (and uf2fs to what Linux left).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    reason = "test code: a panic is the failure report"
)]

mod common;

use std::path::{Path, PathBuf};
use uf2fs_engine::{Fs, NewInode};
use uf2fs_testkit::{assert_fsck_clean, fsck_f2fs, kernel_f2fs, mkfs_f2fs, scratch};

/// A quota image from mkfs.f2fs itself (user, group and project quota files).
fn quota_image(dir: &Path, mib: u64) -> PathBuf {
    let img = dir.join("img");
    mkfs_f2fs(
        &img,
        mib,
        &["-O", "extra_attr,quota,project_quota,inode_checksum"],
    );
    assert_fsck_clean(&img);
    img
}

fn owned(mode: u16, uid: u32, gid: u32) -> NewInode {
    NewInode {
        mode,
        uid,
        gid,
        rdev: (0, 0),
    }
}

/// Changes that move usage every way: creates by several owners, writes that add data and
/// node blocks (a file past the inode's own slots), holes, chown and chgrp, truncation,
/// xattrs big enough for an xattr node, hard links, renames over a file, unlinks, rmdir,
/// and a file unlinked while open.
fn churn(fs: &Fs) {
    let root = fs.root_ino();
    let d = fs
        .create_node(root, b"home", owned(0o40755, 1000, 1000))
        .unwrap();
    let mut files = Vec::new();
    for (i, (uid, gid)) in [(1000, 1000), (1001, 100), (0, 0), (70000, 5), (1000, 100)]
        .into_iter()
        .enumerate()
    {
        let name = format!("f{i}");
        let f = fs
            .create_node(d, name.as_bytes(), owned(0o100644, uid, gid))
            .unwrap();
        // 3 MiB: beyond the inode's slots, so direct nodes are charged too.
        fs.write(f, 0, &vec![i as u8 + 1; 3 << 20]).unwrap();
        fs.write(f, 9 << 20, b"tail past a hole").unwrap();
        files.push(f);
    }
    let small = fs
        .create_node(d, b"inline", owned(0o100600, 1001, 1001))
        .unwrap();
    fs.write(small, 0, b"inline bytes").unwrap();
    fs.set_attr(files[0], None, Some((1002, 1002)), None, None)
        .unwrap();
    fs.truncate(files[1], 5000).unwrap();
    fs.setxattr(files[2], b"user.big", &vec![7u8; 3000], 0)
        .unwrap();
    fs.link(files[3], root, b"hardlink").unwrap();
    let doomed = fs
        .create_node(d, b"doomed", owned(0o100644, 1003, 1003))
        .unwrap();
    fs.write(doomed, 0, &vec![1u8; 1 << 20]).unwrap();
    fs.rename(d, b"f4", d, b"doomed", 0).unwrap();
    fs.unlink(root, b"hardlink").unwrap();
    let sub = fs
        .create_node(d, b"sub", owned(0o40700, 1004, 1004))
        .unwrap();
    fs.create_node(sub, b"x", owned(0o100644, 1004, 1004))
        .unwrap();
    fs.unlink(sub, b"x").unwrap();
    fs.rmdir(d, b"sub").unwrap();
    let held = fs
        .create_node(d, b"held", owned(0o100644, 1005, 1005))
        .unwrap();
    fs.write(held, 0, &vec![3u8; 200_000]).unwrap();
    fs.hold(held).unwrap();
    fs.unlink(d, b"held").unwrap();
    fs.sync().unwrap();
    fs.release(held).unwrap();
}

#[test]
fn usage_stays_exact_through_every_kind_of_change() {
    let dir = scratch("quota-churn");
    let img = quota_image(&dir, 256);
    let fs = Fs::open_rw(&img).unwrap();
    churn(&fs);
    // What this mount counts is what fsck.f2fs counts (below); spot-check one owner.
    let (space, inodes) = fs
        .quota_usage(0, 1002)
        .expect("uid 1002 was charged by chown");
    assert_eq!(inodes, 1);
    assert!(space > 3 << 20, "3 MiB and its nodes: {space}");
    assert_eq!(
        fs.quota_usage(0, 1005).map(|u| u.1),
        Some(0),
        "the orphan went"
    );
    fs.unmount().unwrap();
    assert_fsck_clean(&img);
    // Again on what this left: a second mount picks the files up where they are.
    let fs = Fs::open_rw(&img).unwrap();
    let f = fs
        .create_node(fs.root_ino(), b"again", owned(0o100644, 4242, 4242))
        .unwrap();
    fs.write(f, 0, &vec![5u8; 70_000]).unwrap();
    fs.unmount().unwrap();
    assert_fsck_clean(&img);
}

#[test]
fn many_owners_grow_the_quota_tree() {
    // Enough ids to fill several data blocks and new tree paths in every level.
    let dir = scratch("quota-many");
    let img = quota_image(&dir, 128);
    let fs = Fs::open_rw(&img).unwrap();
    let root = fs.root_ino();
    for i in 0..300u32 {
        let uid = i * 104_729 % 4_000_000 + i;
        let f = fs
            .create_node(
                root,
                format!("o{i}").as_bytes(),
                owned(0o100644, uid, uid / 7),
            )
            .unwrap();
        if i % 3 == 0 {
            fs.write(f, 0, &vec![1u8; 8192]).unwrap();
        }
    }
    fs.unmount().unwrap();
    assert_fsck_clean(&img);
}

#[test]
fn a_wrong_count_is_what_fsck_sees() {
    // The judge can fail: one usage figure in the user quota file changed on the device
    // after a clean run must make fsck.f2fs complain.
    let dir = scratch("quota-judge");
    let img = quota_image(&dir, 128);
    let fs = Fs::open_rw(&img).unwrap();
    let f = fs
        .create_node(fs.root_ino(), b"f", owned(0o100644, 1000, 1000))
        .unwrap();
    fs.write(f, 0, &vec![1u8; 100_000]).unwrap();
    fs.unmount().unwrap();
    assert_fsck_clean(&img);
    let mut bytes = std::fs::read(&img).unwrap();
    let ro = Fs::with_device(Box::new(uf2fs_engine::uf2fs_device::MemDevice::new(
        bytes.clone(),
        true,
    )))
    .unwrap();
    let qino = ro.superblock().quota_inos()[0];
    let size = ro.inode(qino).unwrap().size as usize;
    let mut q = vec![0u8; size];
    ro.read(qino, 0, &mut q).unwrap();
    // uid 1000's entry: in a data block (1 KiB quota blocks, 16-byte header, 72-byte entries).
    let at = (2..size / 1024)
        .flat_map(|b| (0..14).map(move |k| b * 1024 + 16 + k * 72))
        .find(|&at| {
            at + 72 <= size
                && u32::from_le_bytes(q[at..at + 4].try_into().unwrap()) == 1000
                && u64::from_le_bytes(q[at + 24..at + 32].try_into().unwrap()) == 1
        })
        .expect("uid 1000 has an entry");
    let mut addr = None;
    ro.extents(qino, &mut |e| {
        let fb = (at / 4096) as u64;
        if (e.fblk..e.fblk + e.len).contains(&fb) {
            addr = Some(u64::from(e.addr) + fb - e.fblk);
        }
        Ok(())
    })
    .unwrap();
    drop(ro);
    let space_at = addr.unwrap() as usize * 4096 + at % 4096 + 48;
    let space = u64::from_le_bytes(bytes[space_at..space_at + 8].try_into().unwrap());
    assert_eq!(space, 25 * 4096, "100 000 bytes: 25 data blocks");
    bytes[space_at..space_at + 8].copy_from_slice(&(space + 4096).to_le_bytes());
    std::fs::write(&img, &bytes).unwrap();
    let (clean, out) = fsck_f2fs(&img);
    assert!(
        !clean,
        "fsck.f2fs must see the quota no longer adds up:\n{out}"
    );
}

#[test]
fn a_damaged_quota_file_refuses_the_writable_mount_with_the_reason() {
    let dir = scratch("quota-damaged");
    let img = quota_image(&dir, 64);
    let mut bytes = std::fs::read(&img).unwrap();
    let ro = Fs::with_device(Box::new(uf2fs_engine::uf2fs_device::MemDevice::new(
        bytes.clone(),
        true,
    )))
    .unwrap();
    let qino = ro.superblock().quota_inos()[1];
    let mut first = None;
    ro.extents(qino, &mut |e| {
        if e.fblk == 0 {
            first = Some(u64::from(e.addr));
        }
        Ok(())
    })
    .unwrap();
    drop(ro);
    let at = first.expect("the group quota file has a first block") as usize * 4096;
    // The root tree block (quota block 1) names a block past the file's end.
    bytes[at + 1024..at + 1028].copy_from_slice(&999u32.to_le_bytes());
    std::fs::write(&img, &bytes).unwrap();
    let err = match Fs::open_rw(&img) {
        Ok(_) => panic!("a damaged quota file must refuse the writable mount"),
        Err(e) => e.to_string(),
    };
    assert!(
        err.contains(&format!("quota file (inode {qino})")) && err.contains("fsck.f2fs"),
        "{err}"
    );
    // Reading still works.
    let fs = Fs::open(&img).unwrap();
    assert!(fs.readdir(fs.root_ino()).is_ok());
}

#[test]
fn a_crash_after_fsync_recovers_exact_usage() {
    let dir = scratch("quota-crash");
    let img = quota_image(&dir, 128);
    let fs = Fs::open_rw(&img).unwrap();
    let root = fs.root_ino();
    let keep = fs
        .create_node(root, b"keep", owned(0o100644, 1000, 10))
        .unwrap();
    fs.write(keep, 0, &vec![1u8; 100_000]).unwrap();
    fs.sync().unwrap();
    // After the checkpoint: new files, more data, all fsync'd and then a crash.
    fs.write(keep, 100_000, &vec![2u8; 2 << 20]).unwrap();
    fs.fsync(keep, false).unwrap();
    let new = fs
        .create_node(root, b"new", owned(0o100644, 1001, 11))
        .unwrap();
    fs.write(new, 0, &vec![3u8; 300_000]).unwrap();
    fs.fsync(new, false).unwrap();
    drop(fs); // the crash: no checkpoint
    let fs = Fs::open_rw(&img).unwrap();
    let new = fs
        .lookup(root, b"new")
        .expect("the fsync'd file was recovered");
    assert_eq!(fs.inode(new).unwrap().size, 300_000);
    assert_eq!(fs.inode(keep).unwrap().size, 100_000 + (2 << 20));
    fs.unmount().unwrap();
    assert_fsck_clean(&img);
}

#[test]
fn round_trips_with_linux_keep_quota_exact() {
    let dir = scratch("quota-linux");
    let img = quota_image(&dir, 256);
    let fs = Fs::open_rw(&img).unwrap();
    churn(&fs);
    fs.unmount().unwrap();
    assert_fsck_clean(&img);
    // Linux charges its own changes on top of what uf2fs wrote (its quota is on by default
    // on a quota image), as several owners.
    let job = r#"
set -e
cd $MNT
mkdir -p linux
for u in 1000 1002 3000; do
  dd if=/dev/zero of=linux/by$u bs=4096 count=300 2>/dev/null
  chown $u:$u linux/by$u
done
rm -f home/f0
echo more >> home/f2
truncate -s 0 home/f3
sync
"#;
    let run = kernel_f2fs(&img, job, &dir.join("linux1"));
    assert_eq!(run.exit, 0, "{}", run.job_log);
    assert_eq!(run.f2fs_complaints(), Vec::<String>::new());
    assert_fsck_clean(&img);
    // uf2fs again on what Linux left, then Linux reads it (and its quota code checks the
    // files at mount).
    let fs = Fs::open_rw(&img).unwrap();
    let root = fs.root_ino();
    let l = fs.lookup(root, b"linux").unwrap();
    let by = fs.lookup(l, b"by3000").unwrap();
    fs.set_attr(by, None, Some((3001, 3001)), None, None)
        .unwrap();
    fs.write(by, 4 << 20, b"grown by uf2fs").unwrap();
    fs.unlink(l, b"by1000").unwrap();
    fs.unmount().unwrap();
    assert_fsck_clean(&img);
    let run = kernel_f2fs(
        &img,
        "set -e; cd $MNT; ls -ln linux; cat linux/by3000 >/dev/null; touch linux/z; sync",
        &dir.join("linux2"),
    );
    assert_eq!(run.exit, 0, "{}", run.job_log);
    assert_eq!(run.f2fs_complaints(), Vec::<String>::new());
    assert_fsck_clean(&img);
}
