//! Images that Linux 6.1 wrote (tests/fixtures, made by tests/images/make-kernel-images.sh
//! through tools/linux-f2fs): `uf2fs extract` must give the tree Linux showed,
//! field for field (type, mode, owner, size, mtime in ns, bytes, symlink target, hard-link
//! group, xattrs, device numbers), and for every path uf2fs must report the inode number, link
//! count and st_blocks Linux reported. Files Linux compressed must be refused by name.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    reason = "test code: a panic is the failure report"
)]

use std::collections::HashSet;
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

/// Paths of the files Linux stored compressed in this fixture.
fn compressed(name: &str) -> HashSet<String> {
    read_fixture(name, "compressed.txt")
        .lines()
        .filter_map(|l| l.split('\t').next())
        .map(str::to_owned)
        .collect()
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
    let refused = compressed(name);
    if refused.is_empty() {
        assert!(ok, "{name}: extract failed:\n{err}");
    } else {
        assert!(!ok, "{name}: compressed files cannot have been extracted");
        for p in &refused {
            let line = format!(
                "{}/{p}: not supported: compressed files are not supported yet",
                out.display()
            );
            assert!(
                err.lines().any(|l| l.contains(&line)),
                "{name}: no error for {p} in:\n{err}"
            );
        }
        let errors = err
            .lines()
            .filter(|l| l.contains("extract: ") && !l.contains("entries could not"))
            .count();
        assert_eq!(
            errors,
            refused.len(),
            "{name}: errors other than the compressed files:\n{err}"
        );
    }
    let keep = |l: &String| !refused.contains(path_of(l));
    let want: Vec<String> = read_fixture(name, "view.txt")
        .lines()
        .map(str::to_owned)
        .filter(keep)
        .collect();
    assert!(
        want.len() > 1000,
        "{name}: the fixture view is missing ({} lines)",
        want.len()
    );
    let got: Vec<String> = view(&out, None).into_iter().filter(keep).collect();
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
fn linux_compression_refused_by_name_rest_intact() {
    check("linux-compress");
}
