//! Images with the `ro` feature (`mkfs.f2fs -O ro`, filled by `sload.f2fs`), as Android
//! builds its read-only partitions: no SSA, no spare segments, logs that share segments.
//! uf2fs reads them exactly as Linux 6.1 shows them (every treeview field, through `extract`
//! and the FUSE mount), `uf2fs fsck` and fsck.f2fs find them clean, and the mount is
//! read-only by name, as Linux's is, refusing writes with EROFS.

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
    add_special_files, assert_fsck_clean, assert_same_view, gen_tree, linux_view, mkfs_sload, run,
    scratch, try_run, untimed, view, Mount, TreeSpec,
};

const TS: &str = "1700000000";
const UUID: &str = "6a1d2f3e-0000-4000-8000-00000000a0d6";

fn uf2fs() -> Command {
    Command::new(env!("CARGO_BIN_EXE_uf2fs"))
}

fn assert_uf2fs_check_clean(img: &Path) {
    let fs = uf2fs_engine::Fs::open(img).expect("uf2fs opens the image");
    let report = fs.check().unwrap();
    assert!(
        report.findings.is_empty(),
        "uf2fs fsck of {}: {:#?}",
        img.display(),
        report.findings
    );
}

#[test]
fn ro_images_read_as_linux_shows_them() {
    assert!(
        rustix::process::geteuid().is_root(),
        "sload keeps owners and the mount runs as root: run it as root"
    );
    let dir = scratch("ro-images");
    let src = dir.join("src");
    gen_tree(
        &src,
        23,
        TreeSpec {
            files: 80,
            max_file: 600_000,
            big_dir: 300,
            depth: 4,
        },
    );
    add_special_files(&src);
    let img = dir.join("img");
    let said = mkfs_sload(&img, 256, "ro,extra_attr,inode_checksum,sb_checksum", &src);
    assert_fsck_clean(&img);

    let fs = uf2fs_engine::Fs::open(&img).expect("uf2fs opens an ro image");
    let report = fs.check().unwrap();
    assert!(
        report.findings.is_empty(),
        "uf2fs fsck: {:#?}",
        report.findings
    );
    drop(fs);

    let linux = linux_view(&img, &dir.join("k"));
    assert!(
        linux.len() > 300,
        "Linux's view has {} lines ({said})",
        linux.len()
    );
    let out = dir.join("out");
    let (ok, _, err) = try_run(
        Command::new(env!("CARGO_BIN_EXE_uf2fs"))
            .arg("extract")
            .arg(&img)
            .arg(&out),
    );
    assert!(ok, "extract: {err}");
    assert_same_view(&linux, &view(&out, None), "extract of an ro image");

    let mnt = dir.join("mnt");
    let m = Mount::new(
        std::path::Path::new(env!("CARGO_BIN_EXE_uf2fs")),
        &img,
        &mnt,
        &[],
    );
    assert_same_view(&linux, &view(&mnt, None), "FUSE mount of an ro image");
    let st = String::from_utf8(
        Command::new(env!("CARGO_BIN_EXE_uf2fs"))
            .arg("status")
            .arg(&mnt)
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    assert!(
        st.contains("read-only (the image has the ro feature"),
        "{st}"
    );
    let e = std::fs::write(mnt.join("new"), b"x").unwrap_err();
    assert_eq!(e.raw_os_error(), Some(30), "write on an ro image: {e}");
    m.umount();
    let _ = std::fs::remove_dir_all(&dir);
}

/// `uf2fs mkfs -O ro` then `uf2fs import` build a read-only image as mkfs.f2fs and
/// sload.f2fs do (Android's read-only partitions): files compressed as asked, the same inputs
/// giving the same bytes, fsck.f2fs and uf2fs fsck clean, and Linux 6.1 reads every field of
/// the tree as the source has it. The image tools change an `ro` image sload built (a tree
/// added to it reads back in Linux), the cleaner refuses such images by name, and a tree
/// larger than the image ends in ENOSPC, named, with the image still clean, after one that fills
/// all but a segment went in.
#[test]
fn ro_images_built_by_uf2fs_read_in_linux() {
    assert!(
        rustix::process::geteuid().is_root(),
        "import keeps owners: run it as root"
    );
    let dir = scratch("ro-build");
    let src = dir.join("src");
    gen_tree(
        &src,
        31,
        TreeSpec {
            files: 120,
            max_file: 900_000,
            big_dir: 200,
            depth: 4,
        },
    );
    add_special_files(&src);
    std::fs::write(src.join("text.txt"), "a compressible line\n".repeat(60_000)).unwrap();
    let build = |img: &Path| {
        let _ = std::fs::remove_file(img);
        run(uf2fs()
            .args(["mkfs", "--size", "256M", "-U", UUID, "-T", TS, "-O"])
            .arg("ro,extra_attr,inode_checksum,sb_checksum,compression")
            .arg(img));
        run(uf2fs().arg("import").arg(img).arg(&src).args([
            "/",
            "-T",
            TS,
            "--compress",
            "zstd",
            "--compress-log",
            "2",
        ]));
    };
    let (a, b) = (dir.join("a.img"), dir.join("b.img"));
    build(&a);
    std::thread::sleep(std::time::Duration::from_millis(1100));
    build(&b);
    run(Command::new("cmp").arg(&a).arg(&b));
    assert_fsck_clean(&a);
    assert_uf2fs_check_clean(&a);
    {
        let fs = uf2fs_engine::Fs::open(&a).unwrap();
        let ino = fs.resolve(b"/text.txt", false).unwrap();
        let c = fs
            .compression(ino)
            .unwrap()
            .expect("text.txt is compressed");
        assert!(c.compr_blocks > 100, "{c:?}");
    }
    let linux = untimed(linux_view(&a, &dir.join("ka")));
    assert_same_view(
        &untimed(view(&src, None)),
        &linux,
        "Linux's view of the ro import",
    );

    // An image sload.f2fs built, changed by uf2fs as sload would.
    let s = dir.join("s.img");
    mkfs_sload(&s, 256, "ro,extra_attr,inode_checksum", &src);
    let extra = dir.join("extra");
    gen_tree(
        &extra,
        32,
        TreeSpec {
            files: 40,
            max_file: 300_000,
            big_dir: 0,
            depth: 2,
        },
    );
    run(uf2fs().arg("import").arg(&s).arg(&extra).arg("/extra"));
    run(uf2fs().args(["rm", "-r"]).arg(&s).arg("/text.txt"));
    assert_fsck_clean(&s);
    assert_uf2fs_check_clean(&s);
    let out = dir.join("out");
    run(uf2fs().arg("extract").arg(&s).arg(&out));
    let ours = view(&out, None);
    assert_same_view(
        &ours,
        &linux_view(&s, &dir.join("ks")),
        "Linux's view of the change",
    );
    let added = view(&out.join("extra"), Some("type,mode,size,hash,target"));
    assert_same_view(
        &view(&extra, Some("type,mode,size,hash,target")),
        &added,
        "the tree added to an sload image",
    );
    assert!(!out.join("text.txt").exists());

    let (ok, _, err) = try_run(uf2fs().arg("gc").arg(&s));
    assert!(!ok && err.contains("read-only layout"), "gc: {err}");

    // Full: 64 MiB gives 25 main segments, 50 MiB for data.
    let small = dir.join("small.img");
    run(uf2fs()
        .args(["mkfs", "--size", "64M", "-O", "ro"])
        .arg(&small));
    let big = dir.join("big");
    std::fs::create_dir_all(&big).unwrap();
    let mut rng = uf2fs_testkit::Rng::new(5);
    let bytes: Vec<u8> = (0..45 << 17)
        .flat_map(|_| rng.next_u64().to_le_bytes())
        .collect();
    std::fs::write(big.join("45m"), &bytes).unwrap();
    run(uf2fs().arg("import").arg(&small).arg(&big).arg("/"));
    let (ok, _, err) = try_run(uf2fs().arg("import").arg(&small).arg(&big).arg("/again"));
    assert!(
        !ok && err.contains("45m: no space left on the device"),
        "a second copy: {err}"
    );
    assert_fsck_clean(&small);
    assert_uf2fs_check_clean(&small);
    let back = dir.join("back");
    run(uf2fs().arg("extract").arg(&small).arg(&back));
    assert!(
        std::fs::read(back.join("45m")).unwrap() == bytes,
        "the 45 MiB file reads back"
    );
    // What did not fit stops where the space ended, as cp's copy would.
    let partial = std::fs::read(back.join("again/45m")).unwrap();
    assert!(partial.len() < bytes.len() && bytes.starts_with(&partial));
    let _ = std::fs::remove_dir_all(&dir);
}
