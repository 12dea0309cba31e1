//! `uf2fs mkfs` writes what mkfs.f2fs 1.15 writes: the same superblock, checkpoint head,
//! compacted summaries and SIT/NAT journals, node summaries, NAT block 0, root and
//! lost+found inodes and dentry blocks, byte for byte, but for what is random or the clock's
//! (uuid, checkpoint version, times, version strings, and the checksums over them). Every
//! image passes fsck.f2fs and reads back (empty root, lost+found) through uf2fs.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    reason = "test code: a panic is the failure report"
)]

use std::process::Command;
use uf2fs_format::superblock::Superblock;
use uf2fs_testkit::{assert_fsck_clean, run, scratch};

/// One block of an image file (read on demand: the images can be large sparse files).
fn blk(img: &std::fs::File, addr: u64) -> Vec<u8> {
    use std::os::unix::fs::FileExt;
    let mut b = vec![0u8; 4096];
    img.read_exact_at(&mut b, addr * 4096).unwrap();
    b
}

/// Zeroes byte ranges (masked fields) in a copy of a block.
fn masked(b: &[u8], ranges: &[(usize, usize)]) -> Vec<u8> {
    let mut v = b.to_vec();
    for &(s, e) in ranges {
        v[s..e].fill(0);
    }
    v
}

fn compare(mib: u64, segs_per_sec: u32, features: &str) {
    compare_with(mib, segs_per_sec, features, false, &[]);
}

/// `compare`; with `large`, both are made with the large NAT bitmap layout (`-i`);
/// `theirs_too` are more arguments for mkfs.f2fs only.
fn compare_with(mib: u64, segs_per_sec: u32, features: &str, large: bool, theirs_too: &[&str]) {
    let dir = scratch("mkfs-cmp");
    let (ours, theirs) = (dir.join("ours.img"), dir.join("theirs.img"));
    let mut args = vec![
        "mkfs".to_string(),
        ours.to_str().unwrap().into(),
        "--size".into(),
        format!("{mib}M"),
        "-s".into(),
        segs_per_sec.to_string(),
    ];
    let mut mk = Command::new("mkfs.f2fs");
    mk.args(["-f", "-q", "-t", "0", "-s", &segs_per_sec.to_string()]);
    if !features.is_empty() {
        args.extend(["-O".into(), features.into()]);
        mk.args(["-O", features]);
    }
    if large {
        args.push("-i".into());
        mk.arg("-i");
    }
    run(Command::new(env!("CARGO_BIN_EXE_uf2fs")).args(&args));
    std::fs::File::create(&theirs)
        .unwrap()
        .set_len(mib << 20)
        .unwrap();
    run(mk.args(theirs_too).arg(&theirs));
    assert_fsck_clean(&ours);
    let (a, b) = (
        std::fs::File::open(&ours).unwrap(),
        std::fs::File::open(&theirs).unwrap(),
    );
    let what = format!("{mib} MiB -s {segs_per_sec} -O {features:?} large NAT bitmap {large}");
    // Superblock: uuid 108..124, version strings 1668..2180, crc 3068.
    let sb_mask = [
        (1024 + 108, 1024 + 124),
        (1024 + 1668, 1024 + 2180),
        (1024 + 3068, 1024 + 3072),
    ];
    assert_eq!(
        masked(&blk(&a, 0), &sb_mask),
        masked(&blk(&b, 0), &sb_mask),
        "{what}: superblock"
    );
    assert_eq!(blk(&a, 0), blk(&a, 1), "{what}: both superblock copies");
    let sb = Superblock::parse(&blk(&a, 0), 0).unwrap();
    let l = sb.layout();
    let aligned = ((mib << 20).saturating_sub(u64::from(l.segment0) * 4096) / (2 << 20))
        .is_multiple_of(u64::from(segs_per_sec));
    // CP head: version 0..8, and (when the size is not whole sections) the free and user
    // counts mkfs.f2fs gets wrong; CRC at 4092 (192 with the large NAT bitmap).
    let crc_at = if large { 192 } else { 4092 };
    let mut cp_mask = vec![(0, 8), (crc_at, crc_at + 4)];
    if !aligned {
        cp_mask.extend([(8, 16), (32, 36)]);
    }
    let cp = u64::from(l.cp);
    assert_eq!(
        masked(&blk(&a, cp), &cp_mask),
        masked(&blk(&b, cp), &cp_mask),
        "{what}: checkpoint block"
    );
    let total = u32::from_le_bytes(blk(&a, cp)[136..140].try_into().unwrap()) as u64;
    for i in 1..total - 1 {
        assert_eq!(
            blk(&a, cp + i),
            blk(&b, cp + i),
            "{what}: checkpoint pack block {i}"
        );
    }
    assert_eq!(
        masked(&blk(&a, cp + total - 1), &cp_mask),
        masked(&blk(&b, cp + total - 1), &cp_mask),
        "{what}: trailing CP"
    );
    assert_eq!(
        masked(&blk(&a, cp + 512), &cp_mask),
        masked(&blk(&b, cp + 512), &cp_mask),
        "{what}: pack 2"
    );
    // nat_bits: header (version | crc << 32) differs, the bits not.
    assert_eq!(
        blk(&a, cp + 511)[8..],
        blk(&b, cp + 511)[8..],
        "{what}: nat_bits"
    );
    assert_eq!(
        blk(&a, u64::from(l.nat)),
        blk(&b, u64::from(l.nat)),
        "{what}: NAT block 0"
    );
    // Root (and lost+found) inodes: times 32..56, crtime and checksum in the extra area.
    let main = u64::from(l.main);
    let hot_node =
        main + u64::from(u32::from_le_bytes(blk(&a, cp)[36..40].try_into().unwrap())) * 512;
    let hot_data =
        main + u64::from(u32::from_le_bytes(blk(&a, cp)[84..88].try_into().unwrap())) * 512;
    let inode_mask = [(32, 56), (360 + 8, 360 + 24)];
    let n = if features.contains("lost_found") {
        2
    } else {
        1
    };
    // Quota files (an inode and two data blocks each): user and group, and project.
    let quotas = features
        .split(',')
        .map(|f| match f {
            "quota" => 2,
            "project_quota" => 1,
            _ => 0,
        })
        .sum::<u64>();
    let blkoff = |at: usize| {
        u64::from(u16::from_le_bytes(
            blk(&a, cp)[at..at + 2].try_into().unwrap(),
        ))
    };
    assert_eq!(blkoff(68), n + quotas, "{what}: hot node blocks");
    assert_eq!(blkoff(116), n + 2 * quotas, "{what}: hot data blocks");
    for i in 0..n + quotas {
        assert_eq!(
            masked(&blk(&a, hot_node + i), &inode_mask),
            masked(&blk(&b, hot_node + i), &inode_mask),
            "{what}: inode {i}"
        );
    }
    for i in 0..n + 2 * quotas {
        assert_eq!(
            blk(&a, hot_data + i),
            blk(&b, hot_data + i),
            "{what}: dentry or quota block {i}"
        );
    }
    let out =
        run(Command::new(env!("CARGO_BIN_EXE_uf2fs")).args(["ls", ours.to_str().unwrap(), "/"]));
    assert_eq!(
        out,
        if n == 2 { "lost+found\n" } else { "" },
        "{what}: root listing"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

const EXTRA: &str =
    "extra_attr,inode_checksum,flexible_inline_xattr,inode_crtime,lost_found,sb_checksum";

#[test]
fn default_features_several_sizes() {
    for mib in [64, 256, 512, 1000, 2048] {
        compare(mib, 1, "");
    }
}

#[test]
fn extra_features_and_sections() {
    compare(512, 1, EXTRA);
    compare(300, 4, EXTRA);
    compare(1024, 8, "lost_found");
    compare(200, 2, "extra_attr,inode_crtime");
}

/// mkfs.f2fs `-i`: the CRC at 192, the NAT bitmap from 196, a NAT a fifth the usual size;
/// at 300 GiB (a sparse file) the bitmaps need one payload block.
#[test]
fn large_nat_bitmap_several_sizes() {
    compare_with(64, 1, "", true, &[]);
    compare_with(1000, 2, EXTRA, true, &[]);
    compare_with(300 << 10, 1, "", true, &[]);
    let dir = scratch("mkfs-large-payload");
    let img = dir.join("x.img");
    run(Command::new(env!("CARGO_BIN_EXE_uf2fs")).args([
        "mkfs",
        img.to_str().unwrap(),
        "--size",
        "300G",
        "-i",
    ]));
    let f = std::fs::File::open(&img).unwrap();
    let sb = Superblock::parse(&blk(&f, 0), 0).unwrap();
    assert_eq!(sb.cp_payload(), 1, "300 GiB -i has a payload block");
    let cp = blk(&f, 512);
    let flags = u32::from_le_bytes(cp[132..136].try_into().unwrap());
    assert_ne!(flags & 0x400, 0, "large_nat_bitmap flag");
    assert_eq!(u32::from_le_bytes(cp[164..168].try_into().unwrap()), 192);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn every_feature_mkfs_f2fs_takes_and_uf2fs_makes() {
    compare(256, 1, "encrypt");
    compare(256, 1, "verity");
    compare(256, 1, "extra_attr,compression");
    compare(256, 2, &format!("{EXTRA},compression,encrypt,verity"));
    // mkfs.f2fs -O casefold alone writes encoding 0, which Linux will not mount: uf2fs
    // writes what -C utf8 adds.
    compare_with(256, 1, "casefold", false, &["-C", "utf8"]);
    compare_with(256, 1, &format!("{EXTRA},casefold"), false, &["-C", "utf8"]);
    // Quota: the user and group quota files (and the project one), their inodes after the
    // root's and before lost+found's.
    compare(256, 1, "quota");
    compare(256, 1, "extra_attr,quota,lost_found");
    compare(300, 2, &format!("{EXTRA},project_quota"));
    compare_with(
        256,
        1,
        &format!("{EXTRA},quota,project_quota,compression,casefold"),
        false,
        &["-C", "utf8"],
    );
}

/// The read-only layout (`-O ro`, Android's read-only partitions): segment 0 right after
/// the superblocks, no SSA, no reserve, hot node at main segment 0 and hot data at 1.
#[test]
fn read_only_layout() {
    compare(64, 1, "ro");
    compare(1000, 1, "ro,lost_found");
    compare(300, 2, &format!("ro,{EXTRA}"));
    compare(256, 4, "ro,extra_attr,compression");
    compare_with(
        256,
        1,
        "ro,extra_attr,quota,project_quota,casefold",
        false,
        &["-C", "utf8"],
    );
}

#[test]
fn refuses_to_overwrite_data_and_unknown_features() {
    let dir = scratch("mkfs-refuse");
    let img = dir.join("x.img");
    std::fs::write(&img, vec![7u8; 64 << 20]).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_uf2fs"))
        .args(["mkfs", img.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("is not empty: use --force"));
    assert_eq!(
        std::fs::read(&img).unwrap()[..4096],
        [7u8; 4096],
        "nothing written"
    );
    for (args, msg) in [
        (
            vec!["--size", "64M", "-O", "compression"],
            "compression need extra_attr",
        ),
        (
            vec!["--size", "64M", "-O", "project_quota"],
            "project_quota need extra_attr",
        ),
        (
            vec!["--size", "64M", "-O", "blkzoned"],
            "feature blkzoned: mkfs.f2fs 1.15 does not take it",
        ),
        (vec!["--size", "64M", "-O", "bogus"], "unknown feature"),
        (
            vec!["--size", "64M", "-O", "inode_checksum"],
            "need extra_attr",
        ),
        (vec!["--size", "8M"], "too small"),
        (vec!["--size", "64Q"], "unknown suffix"),
    ] {
        let new = dir.join("new.img");
        let _ = std::fs::remove_file(&new);
        let mut a = vec!["mkfs", new.to_str().unwrap()];
        a.extend(args);
        let o = Command::new(env!("CARGO_BIN_EXE_uf2fs"))
            .args(&a)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(1), "{a:?}");
        assert!(
            String::from_utf8_lossy(&o.stderr).contains(msg),
            "{a:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    let o = Command::new(env!("CARGO_BIN_EXE_uf2fs"))
        .args(["mkfs", dir.join("none.img").to_str().unwrap()])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&o.stderr).contains("give --size"));
    let _ = std::fs::remove_dir_all(&dir);
}
