//! Impossible requests give the errno Linux gives and change nothing: the tree and the image
//! are as before (fsck.f2fs clean, the same listing after remount).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    reason = "test code: a panic is the failure report"
)]

mod common;
use common::node;

use uf2fs_engine::{Fs, RENAME_EXCHANGE, RENAME_NOREPLACE};
use uf2fs_testkit::{assert_fsck_clean, scratch};

fn listing(fs: &Fs, ino: u32, out: &mut Vec<String>, path: &str) {
    let mut v = fs.readdir(ino).unwrap();
    v.sort_by(|a, b| a.name.cmp(&b.name));
    for e in v {
        let a = fs.getattr(e.ino).unwrap();
        let p = format!("{path}/{}", String::from_utf8_lossy(&e.name));
        out.push(format!(
            "{p} {} {:?} {} {}",
            e.ino, a.file_type, a.size, a.nlink
        ));
        if a.file_type == uf2fs_engine::FileType::Directory {
            listing(fs, e.ino, out, &p);
        }
    }
}

#[test]
fn impossible_requests_give_the_kernels_errno_and_change_nothing() {
    let dir = scratch("bad");
    let img = common::fresh_image(&dir, 128, 0);
    let fs = Fs::open_rw(&img).unwrap();
    let root = fs.root_ino();
    let d = fs.create_node(root, b"d", node(0o40755)).unwrap();
    let sub = fs.create_node(d, b"sub", node(0o40755)).unwrap();
    let f = fs.create_node(d, b"f", node(0o100644)).unwrap();
    fs.write(f, 0, b"data").unwrap();
    fs.sync().unwrap();
    let mut before = Vec::new();
    listing(&fs, root, &mut before, "");
    let cases: Vec<(&str, i32, Result<(), uf2fs_engine::Error>)> = vec![
        (
            "name of 256 bytes",
            36,
            fs.create_node(d, &[b'x'; 256], node(0o100644)).map(|_| ()),
        ),
        (
            "'/' in a name",
            22,
            fs.create_node(d, b"a/b", node(0o100644)).map(|_| ()),
        ),
        (
            "NUL in a name",
            22,
            fs.create_node(d, b"a\0b", node(0o100644)).map(|_| ()),
        ),
        (
            "'..' as a new name",
            22,
            fs.create_node(d, b"..", node(0o40755)).map(|_| ()),
        ),
        (
            "existing name",
            17,
            fs.create_node(d, b"f", node(0o100644)).map(|_| ()),
        ),
        (
            "create in a file",
            20,
            fs.create_node(f, b"x", node(0o100644)).map(|_| ()),
        ),
        (
            "directory into its own subtree",
            22,
            fs.rename(root, b"d", sub, b"d2", 0),
        ),
        (
            "directory into itself",
            22,
            fs.rename(root, b"d", d, b"x", 0),
        ),
        ("link to a directory", 1, fs.link(sub, root, b"l")),
        ("rmdir of a non-empty directory", 39, fs.rmdir(root, b"d")),
        ("rmdir of a file", 20, fs.rmdir(d, b"f")),
        ("unlink of a directory", 21, fs.unlink(root, b"d")),
        ("unlink of nothing", 2, fs.unlink(root, b"nothing")),
        ("rename over a non-empty directory", 39, {
            let _ = fs.create_node(root, b"e", node(0o40755)).unwrap();
            let r = fs.rename(root, b"e", root, b"d", 0);
            fs.rmdir(root, b"e").unwrap();
            r
        }),
        (
            "rename a file over a directory",
            21,
            fs.rename(d, b"f", root, b"d", 0),
        ),
        (
            "rename a directory over a file",
            20,
            fs.rename(d, b"sub", d, b"f", 0),
        ),
        (
            "RENAME_NOREPLACE onto an existing name",
            17,
            fs.rename(d, b"f", d, b"sub", RENAME_NOREPLACE),
        ),
        (
            "RENAME_EXCHANGE with nothing",
            2,
            fs.rename(d, b"f", d, b"nothing", RENAME_EXCHANGE),
        ),
        (
            "both rename flags",
            22,
            fs.rename(d, b"f", d, b"g", RENAME_EXCHANGE | RENAME_NOREPLACE),
        ),
        (
            "write past the largest file",
            27,
            fs.write(f, 5 << 40, b"x").map(|_| ()),
        ),
        ("write to a directory", 21, fs.write(d, 0, b"x").map(|_| ())),
        ("truncate a directory", 21, fs.truncate(d, 0)),
    ];
    for (what, errno, r) in cases {
        match r {
            Ok(()) => panic!("{what}: succeeded"),
            Err(e) => assert_eq!(e.errno(), errno, "{what}: {e}"),
        }
    }
    let mut after = Vec::new();
    listing(&fs, root, &mut after, "");
    assert_eq!(before, after, "nothing changed");
    fs.unmount().unwrap();
    assert_fsck_clean(&img);
    let fs = Fs::open(&img).unwrap();
    let mut remounted = Vec::new();
    listing(&fs, root, &mut remounted, "");
    assert_eq!(before, remounted);
    let _ = std::fs::remove_dir_all(&dir);
}
