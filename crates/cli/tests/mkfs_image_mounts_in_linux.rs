//! Linux 6.1 (tools/linux-f2fs) mounts what `uf2fs mkfs` made, with no F2FS
//! complaint in dmesg, writes a tree into it and unmounts; fsck.f2fs finds the result clean,
//! and `uf2fs extract` gives exactly the tree Linux showed.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    reason = "test code: a panic is the failure report"
)]

use std::process::Command;
use uf2fs_testkit::{assert_fsck_clean, assert_same_view, kernel_f2fs, run, scratch, view};

const JOB: &str = r#"
set -e
mkdir -p d/sub/deep e
echo hello > d/hello.txt
dd if=/dev/urandom of=d/big bs=4096 count=3000 2>/dev/null
dd if=/dev/urandom of=d/mid bs=1000 count=41 2>/dev/null
dd if=/dev/urandom of=d/sparse bs=4096 count=1 seek=300000 2>/dev/null
ln -s hello.txt d/link
ln d/hello.txt e/hard
i=0; while [ $i -lt 300 ]; do echo $i > e/file_$i; i=$((i+1)); done
mknod d/null c 1 3; mkfifo d/fifo
$PAYLOAD/treeview --setxattr d/hello.txt user.note 6869
chown 1000:1000 d/mid; chmod 640 d/mid
rm e/file_7 e/file_8
sync
$PAYLOAD/treeview /mnt | sort > $OUT/view.txt
"#;

fn mkfs_write_in_linux_read_back(name: &str, size: &str, args: &[&str]) {
    let dir = scratch(name);
    let img = dir.join("img");
    let mut a = vec!["mkfs", img.to_str().unwrap(), "--size", size];
    a.extend_from_slice(args);
    run(Command::new(env!("CARGO_BIN_EXE_uf2fs")).args(&a));
    let k = kernel_f2fs(&img, JOB, &dir);
    assert_eq!(
        k.exit, 0,
        "{name}: Linux job failed (90: mount refused):\n{}\n{}",
        k.job_log, k.dmesg
    );
    assert!(
        k.f2fs_complaints().is_empty(),
        "{name}: dmesg: {:#?}",
        k.f2fs_complaints()
    );
    assert_fsck_clean(&img);
    let want: Vec<String> =
        String::from_utf8_lossy(&std::fs::read(k.out.join("view.txt")).unwrap())
            .lines()
            .map(str::to_owned)
            .collect();
    assert!(
        want.len() > 300,
        "{name}: Linux's view has {} lines",
        want.len()
    );
    let out = dir.join("out");
    run(Command::new(env!("CARGO_BIN_EXE_uf2fs"))
        .arg("extract")
        .arg(&img)
        .arg(&out));
    assert_same_view(&want, &view(&out, None), name);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn default_features() {
    mkfs_write_in_linux_read_back("mkfs-linux-default", "128M", &[]);
}

#[test]
fn extra_features_and_four_segment_sections() {
    mkfs_write_in_linux_read_back(
        "mkfs-linux-extra",
        // 4-segment sections reserve far more: at 128 MiB only 6 MiB would be left for data.
        "512M",
        &[
            "-s",
            "4",
            "-O",
            "extra_attr,inode_checksum,flexible_inline_xattr,inode_crtime,lost_found,sb_checksum",
        ],
    );
}

/// Quota files from `uf2fs mkfs` (user, group and project): Linux turns quota on at mount,
/// charges the job's files (one of them chowned), and fsck.f2fs recounts the quota files.
#[test]
fn quota_files() {
    mkfs_write_in_linux_read_back(
        "mkfs-linux-quota",
        "256M",
        &[
            "-O",
            "extra_attr,inode_checksum,lost_found,quota,project_quota",
        ],
    );
}
