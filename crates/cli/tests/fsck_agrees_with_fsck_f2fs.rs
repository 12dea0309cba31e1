//! `uf2fs fsck` gives fsck.f2fs's verdict: clean on every test image (Linux-written, made by
//! mkfs.f2fs + sload.f2fs, made by uf2fs), and not clean on each planted corruption.

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
    fixture, fixtures, fsck_f2fs, gen_tree, mkfs_sload, run, scratch, try_run, TreeSpec,
};

fn ours(img: &Path) -> (bool, String) {
    let (ok, out, err) = try_run(
        Command::new(env!("CARGO_BIN_EXE_uf2fs"))
            .arg("fsck")
            .arg(img),
    );
    (ok, format!("{out}{err}"))
}

fn agree(img: &Path, want_clean: bool, what: &str) {
    let (theirs, their_report) = fsck_f2fs(img);
    let (mine, my_report) = ours(img);
    assert_eq!(
        theirs, want_clean,
        "{what}: fsck.f2fs says clean={theirs}:\n{their_report}"
    );
    assert_eq!(
        mine, want_clean,
        "{what}: uf2fs fsck says clean={mine}:\n{my_report}"
    );
}

fn patch_inode(img: &Path, ino: u32, at: usize, value: &[u8]) {
    let mut d = std::fs::read(img).unwrap();
    for b in d.chunks_mut(4096) {
        let word = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
        if word(4072) == ino && word(4076) == ino && word(4080) >> 3 == 0 {
            b[at..at + value.len()].copy_from_slice(value);
        }
    }
    std::fs::write(img, d).unwrap();
}

#[test]
fn clean_images_are_clean_for_both() {
    let dir = scratch("fsck-clean");
    for name in fixtures() {
        let img = fixture(&name, &dir);
        agree(&img, true, &name);
    }
    let src = dir.join("src");
    gen_tree(&src, 5, TreeSpec::SMALL);
    let img = dir.join("sload.img");
    mkfs_sload(&img, 256, "", &src);
    agree(&img, true, "sload");
    let ours_img = dir.join("ours.img");
    run(Command::new(env!("CARGO_BIN_EXE_uf2fs")).args([
        "mkfs",
        ours_img.to_str().unwrap(),
        "--size",
        "256M",
    ]));
    run(Command::new(env!("CARGO_BIN_EXE_uf2fs"))
        .arg("import")
        .arg(&ours_img)
        .arg(&src));
    agree(&ours_img, true, "uf2fs mkfs + import");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn planted_corruptions_are_found_by_both() {
    let dir = scratch("fsck-planted");
    type Plant = Box<dyn Fn(&Path)>;
    let cases: Vec<(&str, Plant)> = vec![
        (
            "i_links of a file changed",
            Box::new(|img: &Path| patch_inode(img, 12, 12, &5u32.to_le_bytes())),
        ),
        (
            "i_blocks of a file changed",
            Box::new(|img: &Path| patch_inode(img, 12, 24, &7u64.to_le_bytes())),
        ),
        (
            "NAT entry outside the main area",
            Box::new(|img: &Path| {
                let mut d = std::fs::read(img).unwrap();
                let nat = u32::from_le_bytes(d[1024 + 84..1024 + 88].try_into().unwrap()) as usize;
                for copy in [nat, nat + 512] {
                    let at = copy * 4096 + 12 * 9 + 5;
                    d[at..at + 4].copy_from_slice(&5u32.to_le_bytes());
                }
                std::fs::write(img, d).unwrap();
            }),
        ),
        (
            "mode of a file made a directory",
            Box::new(|img: &Path| patch_inode(img, 12, 0, &0o40755u16.to_le_bytes())),
        ),
    ];
    for (what, plant) in cases {
        let img = fixture("linux-default", &dir);
        plant(&img);
        agree(&img, false, what);
    }
    let _ = std::fs::remove_dir_all(&dir);
}
