//! `uf2fs gc`: cleaning on request, on an image and through a mount's daemon. What it cleans
//! is free afterwards (the segment usage says so), every remaining file reads back the same,
//! and fsck.f2fs finds the image clean.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    reason = "test code: a panic is the failure report"
)]

use std::path::Path;
use std::process::{Command, Output};
use uf2fs_testkit::{assert_fsck_clean, scratch, Mount, Rng};

fn uf2fs(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_uf2fs"))
        .args(args)
        .output()
        .expect("run uf2fs")
}

fn ok(o: Output) -> String {
    assert!(
        o.status.success(),
        "exit {:?}: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn json(img: &str) -> serde_json::Value {
    serde_json::from_str(&ok(uf2fs(&["status", img, "--json"]))).unwrap()
}

/// An image where every segment holds live and dead blocks: 300 files of 96 KiB put in
/// turn, then every other one removed.
fn fragmented(dir: &Path) -> (String, Vec<(String, Vec<u8>)>) {
    let img = dir.join("img").to_string_lossy().into_owned();
    ok(uf2fs(&["mkfs", &img, "--size", "256M"]));
    let mut rng = Rng::new(3);
    let mut kept = Vec::new();
    let src = dir.join("src");
    for i in 0..300 {
        let data = rng.bytes(96 * 1024);
        std::fs::write(&src, &data).unwrap();
        let path = format!("/f{i}");
        ok(uf2fs(&["put", &img, src.to_str().unwrap(), &path]));
        if i % 2 == 0 {
            kept.push((path, data));
        }
    }
    for i in (1..300).step_by(2) {
        ok(uf2fs(&["rm", &img, &format!("/f{i}")]));
    }
    (img, kept)
}

fn dirty_segments(img: &str) -> u64 {
    json(img)["segments"]["dirty_segments"].as_u64().unwrap()
}

fn check_files(img: &str, kept: &[(String, Vec<u8>)]) {
    for (path, data) in kept {
        let got = uf2fs(&["cat", img, path]);
        assert!(got.status.success(), "cat {path}");
        assert!(got.stdout == *data, "{path} differs after cleaning");
    }
}

#[test]
fn gc_on_an_image_frees_what_it_cleans() {
    let dir = scratch("gc-image");
    let (img, kept) = fragmented(&dir);
    let before = dirty_segments(&img);
    assert!(before >= 8, "the set-up left only {before} dirty segments");
    let out = ok(uf2fs(&["gc", &img, "--sections", "4"]));
    assert_eq!(out.trim(), "4 sections cleaned");
    let after = dirty_segments(&img);
    assert!(
        after < before,
        "cleaning 4 sections left {after} dirty segments of {before}"
    );
    check_files(&img, &kept);
    assert_fsck_clean(Path::new(&img));
    // No victim left worth cleaning is not an error: it says how many it did.
    let out = ok(uf2fs(&["gc", &img, "--sections", "100000"]));
    assert!(out.trim().ends_with("sections cleaned"), "{out}");
    check_files(&img, &kept);
    assert_fsck_clean(Path::new(&img));
}

#[test]
fn gc_through_a_mount_counts_its_runs() {
    let dir = scratch("gc-mount");
    let (img, kept) = fragmented(&dir);
    let mnt = dir.join("mnt");
    std::fs::create_dir_all(&mnt).unwrap();
    let m = Mount::new(
        Path::new(env!("CARGO_BIN_EXE_uf2fs")),
        Path::new(&img),
        &mnt,
        &["background_gc=off"],
    );
    let mp = mnt.to_str().unwrap();
    let out = ok(uf2fs(&["gc", mp, "--sections", "3"]));
    assert_eq!(out.trim(), "3 sections cleaned");
    let st: serde_json::Value =
        serde_json::from_str(&ok(uf2fs(&["status", mp, "--json"]))).unwrap();
    assert_eq!(st["gc"]["requested_runs"], 3, "{st}");
    assert!(st["gc"]["data_blocks_moved"].as_u64().unwrap() > 0);
    for (path, data) in &kept {
        let got = std::fs::read(mnt.join(path.trim_start_matches('/'))).unwrap();
        assert!(
            got == *data,
            "{path} differs after cleaning through the mount"
        );
    }
    m.umount();
    check_files(&img, &kept);
    assert_fsck_clean(Path::new(&img));
}
