//! Casefolded directories through `uf2fs mount`: `chattr +F` (FS_IOC_SETFLAGS, by the static
//! helper `tests/images/casefold.c`) works on an empty directory of a casefold image and is
//! refused as Linux 6.1 refuses it (ENOTEMPTY on a non-empty directory, EOPNOTSUPP without
//! the feature); names created through the mount are found by their case variants there, a
//! variant cannot be created beside them (EEXIST), fsck.f2fs finds the image clean and Linux
//! answers every lookup as the mount did.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    reason = "test code: a panic is the failure report"
)]

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use uf2fs_testkit::{assert_fsck_clean, image_helper, kernel_f2fs_with, run, scratch, Mount};

fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_uf2fs"))
}

fn mkfs(img: &Path, casefold: bool) {
    fs::File::create(img).unwrap().set_len(128 << 20).unwrap();
    let mut c = Command::new("mkfs.f2fs");
    c.args(["-q", "-f"]);
    if casefold {
        c.args(["-O", "extra_attr,casefold", "-C", "utf8"]);
    }
    run(c.arg(img));
}

fn helper(args: &[&std::ffi::OsStr]) -> String {
    run(Command::new(image_helper("casefold")).args(args))
        .trim()
        .to_owned()
}

fn hexes(names: &[&str]) -> String {
    names
        .iter()
        .map(|n| n.bytes().map(|b| format!("{b:02x}")).collect::<String>() + "\n")
        .collect()
}

/// "HEX ino N" lines reduced to "HEX found" / "HEX err E" (inode numbers differ between a
/// FUSE mount and Linux only in how they are shown, not in what they find).
fn found_or_not(text: &str) -> Vec<String> {
    text.lines()
        .map(|l| match l.split_once(" ino ") {
            Some((h, _)) => format!("{h} found"),
            None => l.to_owned(),
        })
        .collect()
}

#[test]
fn chattr_f_and_case_insensitive_names_through_the_mount() {
    let work = scratch("cf-mount");
    let img = work.join("img");
    mkfs(&img, true);
    let mnt = work.join("mnt");
    let m = Mount::new(&bin(), &img, &mnt, &[]);
    let cf = mnt.join("cf");
    let full = mnt.join("full");
    fs::create_dir(&cf).unwrap();
    fs::create_dir(&full).unwrap();
    fs::write(full.join("x"), b"x").unwrap();
    assert_eq!(helper(&["setflag".as_ref(), full.as_os_str()]), "ENOTEMPTY");
    assert_eq!(helper(&["setflag".as_ref(), cf.as_os_str()]), "ok");
    let flags = u32::from_str_radix(&helper(&["getflags".as_ref(), cf.as_os_str()]), 16).unwrap();
    assert_ne!(flags & 0x4000_0000, 0, "GETFLAGS shows +F: {flags:#x}");

    let names = ["Hello.txt", "Straße", "ΟΔΟΣ", "café", "İstanbul"];
    let list = work.join("names.hex");
    fs::write(&list, hexes(&names)).unwrap();
    let made = helper(&["create".as_ref(), cf.as_os_str(), list.as_os_str()]);
    assert!(made.lines().all(|l| l.ends_with(" ok")), "{made}");
    fs::create_dir(cf.join("Sub")).unwrap();
    let variants = [
        "HELLO.TXT",
        "strasse",
        "οδος",
        "CAFE\u{301}",
        "i\u{307}stanbul",
        "istanbul",
        "SUB",
    ];
    let vlist = work.join("variants.hex");
    fs::write(&vlist, hexes(&variants)).unwrap();
    let ours = found_or_not(&helper(&[
        "lookup".as_ref(),
        cf.as_os_str(),
        vlist.as_os_str(),
    ]));
    let missing: Vec<_> = ours.iter().filter(|l| !l.ends_with(" found")).collect();
    assert_eq!(
        missing.len(),
        1,
        "only 'istanbul' is another name: {ours:?}"
    );
    let again = helper(&["create".as_ref(), cf.as_os_str(), vlist.as_os_str()]);
    assert_eq!(
        again.lines().filter(|l| l.ends_with(" err EEXIST")).count(),
        6,
        "{again}"
    );
    // The near miss was created above: take it away again.
    fs::remove_file(cf.join("istanbul")).unwrap();
    m.umount();
    assert_fsck_clean(&img);

    let k = kernel_f2fs_with(
        &img,
        "set -e\n$PAYLOAD/casefold lookup /mnt/cf $PAYLOAD/variants.hex > $OUT/lookup.txt\n",
        &work,
        &[&vlist, &image_helper("casefold")],
    );
    assert_eq!(k.exit, 0, "Linux job: {}", k.job_log);
    assert!(k.f2fs_complaints().is_empty(), "{:#?}", k.f2fs_complaints());
    let linux = found_or_not(&fs::read_to_string(k.out.join("lookup.txt")).unwrap());
    assert_eq!(linux, ours, "Linux finds what the mount found");

    // Without the casefold feature, +F is EOPNOTSUPP, as in Linux.
    let plain = work.join("plain.img");
    mkfs(&plain, false);
    let mnt2 = work.join("mnt2");
    let m = Mount::new(&bin(), &plain, &mnt2, &[]);
    let d = mnt2.join("d");
    fs::create_dir(&d).unwrap();
    assert_eq!(helper(&["setflag".as_ref(), d.as_os_str()]), "EOPNOTSUPP");
    m.umount();
    assert_fsck_clean(&plain);
}
