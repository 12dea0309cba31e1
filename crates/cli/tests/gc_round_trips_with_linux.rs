//! Round trips with Linux 6.1 on a volume kept nearly full under rewrites, so that both sides
//! clean, fill holes and rewrite in place (issue 13's edge cases):
//! 1. on an image mkfs.f2fs made, uf2fs rewrites through its mount in `mode=adaptive` (data
//!    and node holes, and in-place updates), then in `mode=lfs` (the cleaner moves data;
//!    young blocks' rewrites go to the hot data log), then `uf2fs gc`;
//!    fsck.f2fs is clean and Linux shows exactly the tree uf2fs shows;
//! 2. Linux rewrites the same files with the same program (it cleans and recycles holes its
//!    own way) and leaves the image with its logs as they are; fsck.f2fs is clean;
//! 3. uf2fs mounts what Linux left, shows exactly Linux's tree, rewrites (in place, with
//!    `ipu=force`) and cleans again; fsck.f2fs is clean and Linux shows exactly uf2fs's tree.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    reason = "test code: a panic is the failure report"
)]

use std::path::{Path, PathBuf};
use std::process::Command;
use uf2fs_testkit::{
    assert_fsck_clean, assert_same_view, kernel_f2fs_with, linux_view, run, scratch, view, wload,
    Mount,
};

const FIELDS: &str = "type,mode,uid,gid,size,mtime,hash,target,links,xattr,rdev";

/// The small files the O_SYNC rewrites hit; the big file takes the volume to this full.
const FULL_PCT: u64 = 88;
const SMALL_FILES: usize = 40;
const SMALL_KIB: usize = 64;

fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_uf2fs"))
}

fn status(mp: &Path) -> serde_json::Value {
    uf2fs_testkit::status_json(&bin(), mp)
}

fn n(v: &serde_json::Value, path: &str) -> u64 {
    v.pointer(path)
        .and_then(serde_json::Value::as_u64)
        .unwrap_or_else(|| panic!("status has no {path}: {v}"))
}

fn wl(args: &[&str]) -> String {
    run(Command::new(wload()).args(args))
}

/// The rewrites both sides run: the big file rewritten `mib` MiB in 4 KiB writes (an fsync
/// every 64), and `syncs` O_SYNC 4 KiB rewrites of the small files.
fn rewrites(root: &Path, mib: u64, syncs: u64, seed: u64) {
    let big = root.join("big");
    wl(&[
        "randwrite",
        big.to_str().unwrap(),
        &mib.to_string(),
        "4096",
        &seed.to_string(),
        "64",
    ]);
    wl(&[
        "rewrite",
        root.join("small").to_str().unwrap(),
        &syncs.to_string(),
        "4096",
        &seed.to_string(),
    ]);
}

/// uf2fs's view of the image, through a fresh read-only mount.
fn uf2fs_view(img: &Path, work: &Path) -> Vec<String> {
    let m = Mount::new(&bin(), img, &work.join("ro"), &["ro"]);
    let v = view(&m.dir, Some(FIELDS));
    m.umount();
    v
}

#[test]
fn cleaned_volumes_round_trip_with_linux() {
    let work = scratch("gc-round-trip");
    let img = work.join("img");
    std::fs::File::create(&img)
        .unwrap()
        .set_len(192 << 20)
        .unwrap();
    run(Command::new("mkfs.f2fs")
        .args(["-q", "-f", "-o", "5", "-s", "1"])
        .arg(&img));

    // 1. uf2fs: fill, rewrite in adaptive mode, then in lfs mode, then clean on request.
    let mp = work.join("mnt");
    let m = Mount::new(&bin(), &img, &mp, &[]);
    let small = mp.join("small");
    std::fs::create_dir(&small).unwrap();
    for i in 0..SMALL_FILES {
        let bytes: Vec<u8> = (0..SMALL_KIB * 1024).map(|b| (b * 7 + i) as u8).collect();
        std::fs::write(small.join(format!("f{i}")), bytes).unwrap();
    }
    let df = run(Command::new("stat").args(["-f", "-c", "%b %a %S"]).arg(&mp));
    let f: Vec<u64> = df.split_whitespace().map(|x| x.parse().unwrap()).collect();
    let (total, avail, bsize) = (f[0], f[1], f[2]);
    let big_mib = ((total * FULL_PCT / 100).saturating_sub(total - avail) * bsize) >> 20;
    wl(&[
        "fill",
        mp.join("big").to_str().unwrap(),
        &big_mib.to_string(),
    ]);
    rewrites(&mp, 2 * big_mib, 3000, 1);
    let st = status(&mp);
    assert_eq!(
        st.pointer("/gc/mode").and_then(|m| m.as_str()),
        Some("adaptive")
    );
    assert!(
        n(&st, "/gc/ssr_blocks") > 0,
        "no hole was filled: {}",
        st["gc"]
    );
    assert!(
        n(&st, "/gc/ipu_blocks") > 0,
        "no O_SYNC rewrite in place: {}",
        st["gc"]
    );
    // The node logs too (the fsync chains of the big file's rewrites): Linux and fsck.f2fs
    // below judge node segments filled hole by hole, and a warm node log left in SSR mode.
    assert!(
        n(&st, "/gc/ssr_node_blocks") > 0,
        "no node went into a hole: {}",
        st["gc"]
    );
    m.umount();
    assert_fsck_clean(&img);
    let m = Mount::new(&bin(), &img, &mp, &["mode=lfs"]);
    rewrites(&mp, big_mib, 500, 2);
    run(Command::new(bin()).args(["gc", "--sections", "4"]).arg(&mp));
    let st = status(&mp);
    assert!(
        n(&st, "/gc/data_blocks_moved") > 0,
        "the cleaner moved nothing in lfs mode: {}",
        st["gc"]
    );
    // data_temp=age (the default): rewrites of young blocks went to the hot data log, so
    // Linux and fsck.f2fs below judge user data in all three data logs.
    assert!(
        n(&st, "/gc/hot_rewrites") > 0,
        "no rewrite went to the hot data log: {}",
        st["gc"]
    );
    m.umount();
    assert_fsck_clean(&img);
    let ours = uf2fs_view(&img, &work);
    assert_same_view(
        &ours,
        &linux_view(&img, &work.join("linux-1")),
        "Linux after uf2fs cleaned",
    );

    // 2. Linux: the same rewrites, its own cleaning; its view after them.
    let job = format!(
        "set -e\n\
         $PAYLOAD/wload randwrite /mnt/big {} 4096 3 64\n\
         $PAYLOAD/wload rewrite /mnt/small 3000 4096 3\n\
         sync\n\
         $PAYLOAD/treeview -f {FIELDS} /mnt | sort > $OUT/view.txt\n",
        big_mib
    );
    let k = kernel_f2fs_with(&img, &job, &work.join("linux-2"), &[&wload()]);
    assert_eq!(k.exit, 0, "Linux's rewrites: {}", k.job_log);
    assert!(k.f2fs_complaints().is_empty(), "{:#?}", k.f2fs_complaints());
    let theirs: Vec<String> = std::fs::read_to_string(k.out.join("view.txt"))
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    assert_fsck_clean(&img);
    let info = run(Command::new(bin()).arg("info").arg(&img));
    eprintln!(
        "logs Linux left: {}",
        info.lines()
            .filter(|l| l.contains("lfs") || l.contains("ssr"))
            .collect::<Vec<_>>()
            .join(" | ")
    );

    // 3. uf2fs on what Linux left: the same tree, then rewrites and cleaning again.
    assert_same_view(
        &theirs,
        &uf2fs_view(&img, &work),
        "uf2fs after Linux cleaned",
    );
    // Every rewrite in place where the pointers are durable (Linux's own default here).
    let m = Mount::new(&bin(), &img, &mp, &["ipu=force"]);
    rewrites(&mp, big_mib, 1000, 4);
    run(Command::new(bin()).args(["gc", "--sections", "4"]).arg(&mp));
    let st = status(&mp);
    assert!(
        n(&st, "/gc/ipu_blocks") > 1000,
        "few rewrites in place: {}",
        st["gc"]
    );
    m.umount();
    assert_fsck_clean(&img);
    let ours = uf2fs_view(&img, &work);
    assert_same_view(
        &ours,
        &linux_view(&img, &work.join("linux-3")),
        "Linux after uf2fs cleaned what Linux left",
    );
}
