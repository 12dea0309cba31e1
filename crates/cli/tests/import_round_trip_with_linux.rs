//! Round trips between uf2fs and Linux 6.1 on one image, fsck.f2fs after every step:
//! uf2fs mkfs + import of a seeded tree (with a sparse file, a fifo, a device node, hard
//! links, long symlinks, a 2000-entry directory) → uf2fs extract and Linux both show exactly
//! the source tree → Linux changes it (creates, appends, renames, deletes, xattrs) → uf2fs
//! shows exactly Linux's tree → uf2fs adds another tree → Linux shows both, unchanged.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    reason = "test code: a panic is the failure report"
)]

use std::path::Path;
use std::process::Command;
use uf2fs_testkit::{
    add_special_files, assert_fsck_clean as fsck_f2fs_clean, assert_same_view, gen_tree,
    kernel_f2fs, linux_view, run, scratch, view, TreeSpec,
};

/// Every treeview field.
const FIELDS: &str = "type,mode,uid,gid,size,mtime,hash,target,links,xattr,rdev";

fn uf2fs(args: &[&std::ffi::OsStr]) -> String {
    run(Command::new(env!("CARGO_BIN_EXE_uf2fs")).args(args))
}

fn extract_view(img: &Path, out: &Path) -> Vec<String> {
    let _ = std::fs::remove_dir_all(out);
    uf2fs(&[("extract").as_ref(), img.as_os_str(), out.as_os_str()]);
    view(out, Some(FIELDS))
}

/// fsck.f2fs and `uf2fs fsck` both find the image clean.
fn assert_fsck_clean(img: &Path) {
    fsck_f2fs_clean(img);
    run(Command::new(env!("CARGO_BIN_EXE_uf2fs"))
        .arg("fsck")
        .arg(img));
}

fn lines(p: &Path) -> Vec<String> {
    String::from_utf8_lossy(&std::fs::read(p).unwrap())
        .lines()
        .map(str::to_owned)
        .collect()
}

fn source_tree(dir: &Path, seed: u64) -> std::path::PathBuf {
    let src = dir.join(format!("src{seed}"));
    gen_tree(
        &src,
        seed,
        TreeSpec {
            files: 150,
            max_file: 6_000_000,
            big_dir: 2000,
            depth: 8,
        },
    );
    add_special_files(&src);
    src
}

const LINUX_CHANGES: &str = r#"
set -e
echo from-linux > /mnt/linux-new
dd if=/dev/urandom of=/mnt/linux-big bs=4096 count=700 2>/dev/null
cat /mnt/linux-new >> /mnt/sparse
mkdir /mnt/linux-dir && mv /mnt/bigdir /mnt/linux-dir/moved
rm -f /mnt/empty-dir/../fifo
i=0; while [ $i -lt 50 ]; do echo $i > /mnt/linux-dir/f$i; i=$((i+1)); done
sync
$PAYLOAD/treeview -f type,mode,uid,gid,size,mtime,hash,target,links,xattr,rdev /mnt | sort > $OUT/view.txt
"#;

fn round_trip(name: &str, mkfs_args: &[&str]) {
    let dir = scratch(name);
    let img = dir.join("img");
    let mut a: Vec<&std::ffi::OsStr> = vec![
        "mkfs".as_ref(),
        img.as_os_str(),
        "--size".as_ref(),
        "512M".as_ref(),
    ];
    a.extend(mkfs_args.iter().map(std::ffi::OsStr::new));
    uf2fs(&a);
    // 1. uf2fs writes.
    let src = source_tree(&dir, 21);
    uf2fs(&["import".as_ref(), img.as_os_str(), src.as_os_str()]);
    assert_fsck_clean(&img);
    let want = view(&src, Some(FIELDS));
    let ours = extract_view(&img, &dir.join("x1"));
    // mkfs's lost+found (with that feature) is in the image, not in the source.
    let no_lpf: Vec<String> = ours
        .iter()
        .filter(|l| !l.starts_with("lost+found\t"))
        .cloned()
        .collect();
    assert_same_view(&want, &no_lpf, &format!("{name}: uf2fs reads its import"));
    // 2. Linux reads what uf2fs wrote, then changes it.
    assert_same_view(
        &ours,
        &linux_view(&img, &dir.join("k1")),
        &format!("{name}: Linux reads the import"),
    );
    let k = kernel_f2fs(&img, LINUX_CHANGES, &dir.join("k2"));
    assert_eq!(k.exit, 0, "{name}: Linux change job: {}", k.job_log);
    assert!(
        k.f2fs_complaints().is_empty(),
        "{name}: {:#?}",
        k.f2fs_complaints()
    );
    assert_fsck_clean(&img);
    let linux = lines(&k.out.join("view.txt"));
    assert_same_view(
        &linux,
        &extract_view(&img, &dir.join("x2")),
        &format!("{name}: uf2fs reads Linux's changes"),
    );
    // 3. uf2fs changes the image Linux wrote; Linux reads it all. First through the mount:
    // a third of the 2000-entry directory removed, some names renamed in place and some
    // made, all between two checkpoints (the changed dentry blocks held in memory until
    // the unmount's checkpoint writes them).
    let mp = dir.join("mnt");
    let m = uf2fs_testkit::Mount::new(env!("CARGO_BIN_EXE_uf2fs").as_ref(), &img, &mp, &[]);
    let big = mp.join("linux-dir/moved");
    let mut names: Vec<_> = std::fs::read_dir(&big)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    names.sort();
    assert!(
        names.len() >= 2000,
        "{} names in the big directory",
        names.len()
    );
    for (i, n) in names.iter().enumerate() {
        match i % 3 {
            0 => std::fs::remove_file(big.join(n)).unwrap(),
            1 if i % 7 == 1 => {
                std::fs::rename(big.join(n), big.join(format!("renamed-{i}"))).unwrap();
            }
            _ => {}
        }
    }
    for i in 0..100 {
        std::fs::write(big.join(format!("made-after-{i}")), format!("{i}\n")).unwrap();
    }
    let held = run(Command::new(env!("CARGO_BIN_EXE_uf2fs"))
        .args(["status", "--json"])
        .arg(&mp));
    let held: serde_json::Value = serde_json::from_str(&held).unwrap();
    assert!(
        held["dentry_cache"]["kept"].as_u64().unwrap() > 500,
        "{name}: {}",
        held["dentry_cache"]
    );
    m.umount();
    assert_fsck_clean(&img);
    let more = dir.join("more");
    gen_tree(
        &more,
        22,
        TreeSpec {
            files: 40,
            max_file: 2_000_000,
            big_dir: 300,
            depth: 3,
        },
    );
    uf2fs(&[
        "mkdir".as_ref(),
        "-p".as_ref(),
        img.as_os_str(),
        "/again/deeper".as_ref(),
    ]);
    uf2fs(&[
        "import".as_ref(),
        img.as_os_str(),
        more.as_os_str(),
        "/again/deeper".as_ref(),
    ]);
    uf2fs(&[
        "put".as_ref(),
        img.as_os_str(),
        src.join("sparse").as_os_str(),
        "/again/sparse-copy".as_ref(),
    ]);
    assert_fsck_clean(&img);
    let ours = extract_view(&img, &dir.join("x3"));
    assert_same_view(
        &ours,
        &linux_view(&img, &dir.join("k3")),
        &format!("{name}: Linux reads uf2fs's second change"),
    );
    assert_fsck_clean(&img);
    eprintln!("{name}: {} entries through three round trips", ours.len());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn default_features() {
    round_trip("rt-default", &[]);
}

#[test]
fn extra_features() {
    round_trip(
        "rt-extra",
        &[
            "-O",
            "extra_attr,inode_checksum,flexible_inline_xattr,inode_crtime,lost_found,sb_checksum",
        ],
    );
}
