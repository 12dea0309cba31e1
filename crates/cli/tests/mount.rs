//! `uf2fs mount` end to end: a tree copied in through the real FUSE mount reads back the same
//! live, after a remount, in `uf2fs extract`, and in Linux; every way of unmounting leaves an
//! image that fsck.f2fs finds clean; a second mount, bad options and unwritable images are
//! refused or served read-only as documented.

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
    add_special_files, assert_fsck_clean, assert_same_view, fixture, gen_tree, linux_view, run,
    scratch, try_run, view, Mount, TreeSpec,
};

const FIELDS: &str = "type,mode,uid,gid,size,mtime,hash,target,links,xattr,rdev";

fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_uf2fs"))
}

fn uf2fs(args: &[&std::ffi::OsStr]) -> String {
    run(Command::new(bin()).args(args))
}

fn mkfs(img: &Path, size: &str) {
    uf2fs(&[
        "mkfs".as_ref(),
        img.as_os_str(),
        "--size".as_ref(),
        size.as_ref(),
    ]);
}

fn fsck_both(img: &Path) {
    assert_fsck_clean(img);
    uf2fs(&["fsck".as_ref(), img.as_os_str()]);
}

#[test]
fn tree_copied_in_reads_back_live_after_remount_and_in_linux() {
    let dir = scratch("mount-tree");
    let img = dir.join("img");
    mkfs(&img, "768M");
    let src = dir.join("src");
    let st = gen_tree(
        &src,
        41,
        TreeSpec {
            files: 200,
            max_file: 8_000_000,
            big_dir: 2500,
            depth: 8,
        },
    );
    // What gen_tree does not make: a sparse file, a fifo, a device node, xattrs.
    add_special_files(&src);
    rustix::fs::setxattr(
        src.join("sparse").as_path(),
        "user.note",
        b"kept through FUSE",
        rustix::fs::XattrFlags::empty(),
    )
    .unwrap();
    let want = view(&src, Some(FIELDS));
    let mnt = dir.join("mnt");
    let m = Mount::new(&bin(), &img, &mnt, &[]);
    run(Command::new("cp").arg("-a").arg(&src).arg(mnt.join("copy")));
    assert_same_view(&want, &view(&mnt.join("copy"), Some(FIELDS)), "live mount");
    m.umount();
    fsck_both(&img);

    let m = Mount::new(&bin(), &img, &mnt, &[]);
    assert_same_view(
        &want,
        &view(&mnt.join("copy"), Some(FIELDS)),
        "after remount",
    );
    // Change it through the mount: rename, delete, append, new hard link.
    std::fs::rename(mnt.join("copy/bigdir"), mnt.join("moved-bigdir")).unwrap();
    std::fs::remove_dir_all(mnt.join("copy/level0/level1")).unwrap();
    std::fs::write(mnt.join("copy/new-file"), vec![7u8; 100_000]).unwrap();
    std::fs::hard_link(mnt.join("copy/new-file"), mnt.join("new-link")).unwrap();
    let live = view(&mnt, Some(FIELDS));
    m.umount();
    fsck_both(&img);

    let x = dir.join("x");
    uf2fs(&["extract".as_ref(), img.as_os_str(), x.as_os_str()]);
    assert_same_view(
        &live,
        &view(&x, Some(FIELDS)),
        "uf2fs extract after the changes",
    );
    let linux = linux_view(&img, &dir.join("k"));
    assert_same_view(&live, &linux, "Linux reads the mount's image");
    eprintln!(
        "{} entries, {} bytes copied in and read back four ways",
        st.entries, st.bytes
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Unmounts the mount at the path, served by the daemon of the pid.
type Unmounter = Box<dyn Fn(&Path, u32)>;

#[test]
fn every_way_of_unmounting_leaves_a_clean_image() {
    let dir = scratch("mount-umount");
    let img = dir.join("img");
    mkfs(&img, "256M");
    let mnt = dir.join("mnt");
    let ways: [(&str, Unmounter); 4] = [
        (
            "fusermount3 -u",
            Box::new(|d: &Path, _| {
                run(Command::new("fusermount3").arg("-u").arg(d));
            }),
        ),
        (
            "umount",
            Box::new(|d: &Path, _| {
                run(Command::new("umount").arg(d));
            }),
        ),
        (
            "SIGTERM",
            Box::new(|_: &Path, pid| {
                run(Command::new("kill").args(["-TERM", &pid.to_string()]));
            }),
        ),
        (
            "SIGINT",
            Box::new(|_: &Path, pid| {
                run(Command::new("kill").args(["-INT", &pid.to_string()]));
            }),
        ),
    ];
    for (i, (name, how)) in ways.into_iter().enumerate() {
        let m = Mount::new(&bin(), &img, &mnt, &[]);
        let data: Vec<u8> = (0..300_000u32).map(|x| (x * 7 + i as u32) as u8).collect();
        std::fs::write(mnt.join(format!("file-{i}")), &data).unwrap();
        std::fs::create_dir(mnt.join(format!("dir-{i}"))).unwrap();
        m.umount_with(|d, pid| how(d, pid));
        let (clean, report) = uf2fs_testkit::fsck_f2fs(&img);
        assert!(clean, "after {name}: {report}");
        let got = Command::new(bin())
            .arg("cat")
            .arg(&img)
            .arg(format!("/file-{i}"))
            .output()
            .unwrap();
        assert!(
            got.status.success(),
            "after {name}: {}",
            String::from_utf8_lossy(&got.stderr)
        );
        assert!(got.stdout == data, "after {name}: file-{i} differs");
    }
    fsck_both(&img);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn second_mount_and_bad_options_are_refused() {
    let dir = scratch("mount-refuse");
    let img = dir.join("img");
    mkfs(&img, "128M");
    let m = Mount::new(&bin(), &img, &dir.join("a"), &[]);
    std::fs::create_dir_all(dir.join("b")).unwrap();
    let (ok, _, err) = try_run(
        Command::new(bin())
            .arg("mount")
            .arg(&img)
            .arg(dir.join("b")),
    );
    assert!(!ok && err.contains("in use"), "second mount: {err}");
    // Writers that open the image directly are refused too while it is mounted.
    let (ok, _, err) =
        try_run(Command::new(bin()).args(["mkdir".as_ref(), img.as_os_str(), "/x".as_ref()]));
    assert!(!ok && err.contains("in use"), "mkdir while mounted: {err}");
    m.umount();

    for (opt, says) in [
        ("nosuchopt", "unknown mount option 'nosuchopt'"),
        (
            "fsync_mode=sometimes",
            "bad value 'sometimes' for mount option fsync_mode",
        ),
    ] {
        let (ok, _, err) = try_run(
            Command::new(bin())
                .arg("mount")
                .arg(&img)
                .arg(dir.join("b"))
                .args(["-o", opt]),
        );
        assert!(!ok && err.contains(says), "-o {opt}: {err}");
    }
    let (ok, _, err) = try_run(
        Command::new(bin())
            .arg("mount")
            .arg(dir.join("missing"))
            .arg(dir.join("b")),
    );
    assert!(!ok && err.contains("missing"), "missing image: {err}");
    fsck_both(&img);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn read_only_mounts_write_nothing() {
    let dir = scratch("mount-ro");
    let mnt = dir.join("mnt");
    std::fs::create_dir_all(&mnt).unwrap();
    // An image with a feature we do not write (compression) is served read-only, by name;
    // a writable image with -o ro is too.
    let compressed = fixture("linux-compress", &dir);
    let plain = dir.join("plain");
    mkfs(&plain, "128M");
    for (img, opts, says) in [
        (&compressed, vec![], "compression"),
        (&plain, vec!["-o", "ro"], ""),
    ] {
        let before = std::fs::read(img).unwrap();
        // Detaches the mount if an assertion below fails before `uf2fs umount`.
        struct Detach<'a>(&'a Path);
        impl Drop for Detach<'_> {
            fn drop(&mut self) {
                let _ = Command::new("fusermount3").arg("-uz").arg(self.0).status();
            }
        }
        let _detach = Detach(&mnt);
        let out = Command::new(bin())
            .arg("mount")
            .arg(img)
            .arg(&mnt)
            .args(&opts)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(said.contains(says), "{said}");
        if !says.is_empty() {
            assert!(said.contains("read-only"), "{said}");
        }
        let st = run(Command::new(bin()).arg("status").arg(&mnt));
        assert!(st.contains("mode:         read-only"), "{st}");
        let e = std::fs::write(mnt.join("new"), b"x").unwrap_err();
        assert_eq!(
            e.raw_os_error(),
            Some(30),
            "write on a read-only mount: {e}"
        );
        if !says.is_empty() {
            assert!(
                std::fs::read_dir(&mnt).unwrap().count() > 0,
                "the fixture's files"
            );
        }
        run(Command::new(bin()).arg("umount").arg(&mnt));
        assert!(
            std::fs::read(img).unwrap() == before,
            "a read-only mount changed {}",
            img.display()
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
