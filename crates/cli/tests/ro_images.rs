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

use std::process::Command;
use uf2fs_testkit::{
    add_special_files, assert_fsck_clean, assert_same_view, gen_tree, linux_view, mkfs_sload,
    scratch, try_run, view, Mount, TreeSpec,
};

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
