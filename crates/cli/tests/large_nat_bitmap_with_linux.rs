//! Images with the large NAT bitmap layout (mkfs.f2fs `-i`: checkpoint flag
//! `large_nat_bitmap`, the CRC at byte 192, the NAT then the SIT version bitmap after it,
//! running on into `cp_payload` blocks), at 512 MiB (no payload) and 300 GiB (a sparse file
//! whose bitmaps need one payload block), with Linux 6.1 as the judge, fsck.f2fs after every
//! step:
//! Linux writes first (600 files and a 24 MiB file, so that NAT and SIT blocks move and their
//! version bits flip) → uf2fs shows exactly Linux's tree → uf2fs imports a seeded tree (its
//! checkpoints flip bits too, and keep the flag and the CRC place) → Linux shows exactly
//! uf2fs's tree → Linux changes it → uf2fs shows exactly Linux's tree again.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    reason = "test code: a panic is the failure report"
)]

use std::os::unix::fs::FileExt;
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
    uf2fs(&["extract".as_ref(), img.as_os_str(), out.as_os_str()]);
    view(out, Some(FIELDS))
}

/// fsck.f2fs and `uf2fs fsck` both find the image clean.
fn assert_fsck_clean(img: &Path) {
    fsck_f2fs_clean(img);
    run(Command::new(env!("CARGO_BIN_EXE_uf2fs"))
        .arg("fsck")
        .arg(img));
}

fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

/// What the newer checkpoint pack says, read from the raw bytes: flags, checksum offset, and
/// the NAT and SIT version bitmaps at the places the large layout gives them.
struct CpView {
    flags: u32,
    checksum_offset: u32,
    nat: Vec<u8>,
    sit: Vec<u8>,
}

fn current_cp(img: &Path) -> CpView {
    let f = std::fs::File::open(img).unwrap();
    let read = |addr: u64, blocks: u64| {
        let mut b = vec![0u8; blocks as usize * 4096];
        f.read_exact_at(&mut b, addr * 4096).unwrap();
        b
    };
    let sb = read(0, 1);
    let payload = u64::from(le32(&sb, 1024 + 1664)); // cp_payload
    let cp_blkaddr = u64::from(le32(&sb, 1024 + 76));
    let packs = [
        read(cp_blkaddr, 1 + payload),
        read(cp_blkaddr + 512, 1 + payload),
    ];
    let ver = |p: &[u8]| u64::from_le_bytes(p[..8].try_into().unwrap());
    let p = if ver(&packs[1]) > ver(&packs[0]) {
        &packs[1]
    } else {
        &packs[0]
    };
    let (sit_bytes, nat_bytes) = (le32(p, 156) as usize, le32(p, 160) as usize);
    CpView {
        flags: le32(p, 132),
        checksum_offset: le32(p, 164),
        nat: p[196..196 + nat_bytes].to_vec(),
        sit: p[196 + nat_bytes..196 + nat_bytes + sit_bytes].to_vec(),
    }
}

/// The layout is still the large one, and the step moved NAT or SIT blocks, so that the
/// version bitmaps were rewritten (a block moved an even number of times, as Linux's sync and
/// unmount checkpoints may move NAT block 0, shows no change: hence "or").
fn assert_large_layout_kept(img: &Path, before: &CpView, step: &str) -> CpView {
    let now = current_cp(img);
    assert_ne!(now.flags & 0x400, 0, "{step}: large_nat_bitmap flag kept");
    assert_eq!(now.checksum_offset, 192, "{step}: the CRC stays at 192");
    assert!(
        now.nat != before.nat || now.sit != before.sit,
        "{step}: a version bitmap changed"
    );
    now
}

const LINUX_FIRST: &str = r#"
set -e
mkdir -p /mnt/linux/many /mnt/linux/d1/d2
i=0; while [ $i -lt 600 ]; do echo "linux $i" > /mnt/linux/many/f$i; i=$((i+1)); done
dd if=/dev/urandom of=/mnt/linux/big bs=4096 count=6000 2>/dev/null
ln -s ../linux/big /mnt/linux/d1/link
ln /mnt/linux/many/f7 /mnt/linux/d1/d2/hard
echo tail > /mnt/linux/d1/d2/small
sync
$PAYLOAD/treeview -f type,mode,uid,gid,size,mtime,hash,target,links,xattr,rdev /mnt | sort > $OUT/view.txt
"#;

const LINUX_CHANGES: &str = r#"
set -e
rm -rf /mnt/linux/many
echo more >> /mnt/u/sparse
mv /mnt/u/bigdir /mnt/linux/moved
i=0; while [ $i -lt 100 ]; do echo $i > /mnt/linux/d1/n$i; i=$((i+1)); done
dd if=/dev/urandom of=/mnt/linux/big2 bs=4096 count=3000 2>/dev/null
sync
$PAYLOAD/treeview -f type,mode,uid,gid,size,mtime,hash,target,links,xattr,rdev /mnt | sort > $OUT/view.txt
"#;

fn linux_run(img: &Path, job: &str, work: &Path, step: &str) -> Vec<String> {
    let k = kernel_f2fs(img, job, work);
    assert_eq!(k.exit, 0, "{step}: Linux job: {}", k.job_log);
    assert!(
        k.f2fs_complaints().is_empty(),
        "{step}: {:#?}",
        k.f2fs_complaints()
    );
    std::fs::read_to_string(k.out.join("view.txt"))
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn round_trip(name: &str, size: &str, payload: u32) {
    assert!(
        rustix::process::geteuid().is_root(),
        "this test keeps owners and makes device nodes: run it as root"
    );
    let dir = scratch(name);
    let img = dir.join("img");
    run(Command::new("truncate").args(["-s", size]).arg(&img));
    run(Command::new("mkfs.f2fs").args(["-f", "-q", "-i"]).arg(&img));
    let start = current_cp(&img);
    assert_eq!(start.checksum_offset, 192, "{name}: mkfs.f2fs -i layout");
    {
        let f = std::fs::File::open(&img).unwrap();
        let mut b = vec![0u8; 4096];
        f.read_exact_at(&mut b, 0).unwrap();
        assert_eq!(le32(&b, 1024 + 1664), payload, "{name}: cp_payload");
    }
    // 1. Linux writes; uf2fs reads exactly what Linux shows.
    let linux = linux_run(&img, LINUX_FIRST, &dir.join("k1"), name);
    assert_fsck_clean(&img);
    let after_linux = assert_large_layout_kept(&img, &start, &format!("{name}: Linux"));
    assert_same_view(
        &linux,
        &extract_view(&img, &dir.join("x1")),
        &format!("{name}: uf2fs reads what Linux wrote"),
    );
    // 2. uf2fs writes; Linux reads exactly what uf2fs shows.
    let src = dir.join("src");
    gen_tree(
        &src,
        31,
        TreeSpec {
            files: 150,
            max_file: 6_000_000,
            big_dir: 1500,
            depth: 6,
        },
    );
    add_special_files(&src);
    uf2fs(&["mkdir".as_ref(), img.as_os_str(), "/u".as_ref()]);
    uf2fs(&[
        "import".as_ref(),
        img.as_os_str(),
        src.as_os_str(),
        "/u".as_ref(),
    ]);
    assert_fsck_clean(&img);
    assert_large_layout_kept(&img, &after_linux, &format!("{name}: uf2fs import"));
    // The import as a tree of its own (hard links named inside it); the top directory's own
    // line is /u's, not the source's.
    let out = dir.join("x2u");
    uf2fs(&[
        "extract".as_ref(),
        img.as_os_str(),
        out.as_os_str(),
        "/u".as_ref(),
    ]);
    let not_top = |v: Vec<String>| -> Vec<String> {
        v.into_iter().filter(|l| !l.starts_with(".\t")).collect()
    };
    assert_same_view(
        &not_top(view(&src, Some(FIELDS))),
        &not_top(view(&out, Some(FIELDS))),
        &format!("{name}: uf2fs reads its import"),
    );
    let ours = extract_view(&img, &dir.join("x2"));
    assert_same_view(
        &ours,
        &linux_view(&img, &dir.join("k2")),
        &format!("{name}: Linux reads uf2fs's import"),
    );
    // 3. Linux changes uf2fs's tree; uf2fs reads exactly what Linux shows.
    let linux = linux_run(&img, LINUX_CHANGES, &dir.join("k3"), name);
    assert_fsck_clean(&img);
    assert_same_view(
        &linux,
        &extract_view(&img, &dir.join("x3")),
        &format!("{name}: uf2fs reads Linux's changes"),
    );
    eprintln!("{name}: {} entries through three round trips", linux.len());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn mkfs_i_512m_round_trip() {
    round_trip("large-nat-512m", "512M", 0);
}

#[test]
fn mkfs_i_300g_with_payload_round_trip() {
    round_trip("large-nat-300g", "300G", 1);
}
