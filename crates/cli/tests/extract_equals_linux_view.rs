//! Images that Linux 6.1 wrote (tests/fixtures, made by tests/images/make-kernel-images.sh
//! through tools/linux-f2fs): `uf2fs extract` must give the tree Linux showed,
//! field for field (type, mode, owner, size, mtime in ns, bytes, symlink target, hard-link
//! group, xattrs, device numbers), and for every path uf2fs must report the inode number, link
//! count and st_blocks Linux reported. Files Linux compressed (linux-compress: every
//! algorithm, plain clusters between compressed ones, holes, a partial last cluster) are
//! read as Linux showed them: same treeview hash and the sha256 Linux recorded.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    reason = "test code: a panic is the failure report"
)]

use std::process::Command;
use uf2fs_engine::Fs;
use uf2fs_testkit::{
    assert_fsck_clean, assert_same_view, fixture, fixtures, root, scratch, try_run, view,
};

fn read_fixture(name: &str, ext: &str) -> String {
    // Names may be any bytes but '/' and NUL; compare them as treeview prints them, lossily.
    let bytes = std::fs::read(root().join("tests/fixtures").join(format!("{name}.{ext}")))
        .unwrap_or_default();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// sha256 of a file, through sha256sum.
fn sha256_of(p: &std::path::Path) -> String {
    let o = Command::new("sha256sum")
        .arg(p)
        .output()
        .expect("sha256sum");
    String::from_utf8_lossy(&o.stdout)
        .split_whitespace()
        .next()
        .unwrap_or("")
        .to_owned()
}

fn path_of(line: &str) -> &str {
    line.split('\t').next().unwrap_or("")
}

fn check(name: &str) {
    assert!(
        rustix::process::geteuid().is_root(),
        "this test keeps owners and makes device nodes: run it as root"
    );
    let dir = scratch(name);
    let img = fixture(name, &dir);
    assert_fsck_clean(&img);
    let out = dir.join("out");
    let (ok, _, err) = try_run(
        Command::new(env!("CARGO_BIN_EXE_uf2fs"))
            .arg("extract")
            .arg(&img)
            .arg(&out),
    );
    assert!(ok, "{name}: extract failed:\n{err}");
    for line in read_fixture(name, "compressed.txt").lines() {
        let path = path_of(line);
        let want = line
            .split('\t')
            .find_map(|f| f.strip_prefix("sha256="))
            .expect("sha256 column");
        let got = sha256_of(&out.join(path));
        assert_eq!(
            got, want,
            "{name}: {path}: bytes differ from Linux's ({line})"
        );
    }
    let want: Vec<String> = read_fixture(name, "view.txt")
        .lines()
        .map(str::to_owned)
        .collect();
    assert!(
        want.len() > 1000,
        "{name}: the fixture view is missing ({} lines)",
        want.len()
    );
    let got: Vec<String> = view(&out, None);
    assert_same_view(&want, &got, name);

    // Inode numbers, link counts and st_blocks, as Linux's stat printed them.
    let fs = Fs::open(&img).expect("open fixture");
    let mut checked = 0;
    for line in read_fixture(name, "stat.txt").lines() {
        let f: Vec<&str> = line.splitn(4, '\t').collect();
        let [ino, links, blocks, path] = f[..] else {
            panic!("{name}: bad stat line {line}")
        };
        let path = path.strip_prefix('.').unwrap_or(path);
        if path.contains('\u{fffd}') {
            continue; // a name that is not UTF-8 cannot be spelled from the lossy list
        }
        let got_ino = fs
            .resolve(path.as_bytes(), false)
            .unwrap_or_else(|e| panic!("{name}: {path}: {e}"));
        let a = fs.getattr(got_ino).expect("getattr");
        let want = (
            ino.parse::<u32>().unwrap(),
            links.parse::<u32>().unwrap(),
            blocks.parse::<u64>().unwrap(),
        );
        assert_eq!(
            (a.ino, a.nlink, a.blocks_512),
            want,
            "{name}: ino, links, st_blocks of {path:?}"
        );
        checked += 1;
    }
    assert!(checked > 1000, "{name}: the fixture's stat list is missing");
    eprintln!(
        "{name}: {} entries compared with Linux's view, {checked} inode numbers / links / blocks",
        got.len()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn every_fixture_is_covered() {
    let names = fixtures();
    for want in [
        "linux-default",
        "linux-extra",
        "linux-quota",
        "linux-compress",
    ] {
        assert!(
            names.iter().any(|n| n == want),
            "fixture {want} missing from tests/fixtures"
        );
    }
}

#[test]
fn linux_default() {
    check("linux-default");
}

#[test]
fn linux_extra_features() {
    check("linux-extra");
}

#[test]
fn linux_quota() {
    check("linux-quota");
}

#[test]
fn linux_compressed_files_read_as_linux_shows_them() {
    check("linux-compress");
}
