//! Casefolded directories, judged by Linux 6.1 (tools/linux-f2fs) on images made with
//! `mkfs.f2fs -O casefold -C utf8[:strict]`. Names travel in hex through the static helper
//! `tests/images/casefold.c` (chattr +F, lookups, creates and listings in the guest).
//!
//! - `linux_names_found_alike`: Linux makes a casefolded directory (chattr +F) with names in
//!   mixed case, accents (precomposed), German sharp s, Greek final sigma, Turkish dotted I,
//!   a titlecase digraph, a ligature, the Angstrom sign, Hangul, a zero-width space, a letter
//!   newer than Unicode 12.1, a name that is not UTF-8, 300 more names (dentry blocks,
//!   hash buckets) and a small inline subdirectory, which inherits the flag. uf2fs lists each
//!   directory with exactly Linux's names and answers every probe (case variants, decomposed
//!   forms, ss for ß, σ for ς, i + dot for İ, near misses) as Linux's lookup does.
//! - `uf2fs_writes_linux_reads`: uf2fs sets the flag (refused on a non-empty directory and on
//!   a file), creates the same kinds of names (a case variant of an existing one: EEXIST),
//!   links, renames (a case-only rename is a no-op, as in Linux), unlinks by a case variant
//!   and fills dentry blocks; fsck.f2fs is clean; Linux answers every probe as uf2fs did,
//!   lists the same names, and refuses to create a case variant of each (EEXIST).
//! - `strict_mode_refuses_invalid_names`: with `utf8:strict`, Linux and uf2fs both refuse to
//!   create or look up invalid names (EINVAL) and agree on every answer.
//! - `hostile_casefold_images`: a casefolded directory on an image whose superblock lost the
//!   feature, an unknown encoding, and invalid names on disk (not UTF-8; 255 bytes, too long
//!   to fold) under strict mode: clear errors, no panic; Linux agrees on the strict-mode
//!   answers.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    reason = "test code: a panic is the failure report"
)]

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use uf2fs_engine::{fs_flags, Error, Fs, NewInode};
use uf2fs_testkit::{assert_fsck_clean, image_helper, kernel_f2fs_with, run, scratch};

const CASEFOLD: u32 = 0x4000_0000;

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn show(b: &[u8]) -> String {
    format!("{:?}", String::from_utf8_lossy(b))
}

/// A fresh casefold image (`-C utf8` or `utf8:strict`).
fn mkfs(dir: &Path, encoding: &str) -> PathBuf {
    let img = dir.join("img");
    fs::File::create(&img).unwrap().set_len(128 << 20).unwrap();
    run(Command::new("mkfs.f2fs")
        .args([
            "-q",
            "-f",
            "-O",
            "extra_attr,inode_checksum,sb_checksum,casefold",
            "-C",
        ])
        .arg(encoding)
        .arg(&img));
    img
}

/// Writes names as a hex file for the helper.
fn names_file(path: &Path, names: &[Vec<u8>]) {
    let text: String = names.iter().map(|n| hex(n) + "\n").collect();
    fs::write(path, text).unwrap();
}

/// "HEX answer" lines into a map.
fn answers(text: &str) -> BTreeMap<Vec<u8>, String> {
    text.lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(h, a)| (unhex(h), a.to_owned()))
        .collect()
}

/// uf2fs's answer to a lookup, spelled as the helper spells Linux's.
fn uf2fs_lookup(fs: &Fs, dir: u32, name: &[u8]) -> String {
    match fs.lookup(dir, name) {
        Ok(ino) => format!("ino {ino}"),
        Err(Error::NotFound) => "err ENOENT".into(),
        Err(Error::InvalidArgument(_)) => "err EINVAL".into(),
        Err(Error::NameTooLong) => "err ENAMETOOLONG".into(),
        Err(e) => format!("err {e}"),
    }
}

fn uf2fs_create(fs: &Fs, dir: u32, name: &[u8]) -> String {
    match fs.create_node(dir, name, file()) {
        Ok(_) => "ok".into(),
        Err(Error::Exists) => "err EEXIST".into(),
        Err(Error::InvalidArgument(_)) => "err EINVAL".into(),
        Err(e) => format!("err {e}"),
    }
}

fn file() -> NewInode {
    NewInode {
        mode: 0o100644,
        uid: 0,
        gid: 0,
        rdev: (0, 0),
    }
}

fn dir_mode() -> NewInode {
    NewInode {
        mode: 0o040755,
        ..file()
    }
}

fn names_of(fs: &Fs, dir: u32) -> Vec<Vec<u8>> {
    let mut v: Vec<Vec<u8>> = fs
        .readdir(dir)
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    v.sort();
    v
}

fn sorted_hex_lines(text: &str) -> Vec<Vec<u8>> {
    let mut v: Vec<Vec<u8>> = text.lines().filter(|l| !l.is_empty()).map(unhex).collect();
    v.sort();
    v
}

/// The names a casefolded directory gets, each with the probes that test it.
fn name_set() -> Vec<(Vec<u8>, Vec<Vec<u8>>)> {
    let s = |x: &str| x.as_bytes().to_vec();
    vec![
        (
            s("Hello.txt"),
            vec![
                s("hello.txt"),
                s("HELLO.TXT"),
                s("hELLO.tXT"),
                s("Hello.tx"),
            ],
        ),
        (
            s("Straße"),
            vec![
                s("STRASSE"),
                s("strasse"),
                s("STRAẞE"),
                s("straße"),
                s("Strase"),
            ],
        ),
        (s("ΟΔΟΣ"), vec![s("οδος"), s("οδοσ"), s("ΟΔΟΣ"), s("ΟΔΟ")]),
        (
            s("café"),
            vec![
                s("CAFÉ"),
                s("cafe\u{301}"),
                s("CAFE\u{301}"),
                s("CAFE"),
                s("cafe"),
            ],
        ),
        (
            s("İstanbul"),
            vec![
                s("i\u{307}stanbul"),
                s("I\u{307}STANBUL"),
                s("istanbul"),
                s("ıstanbul"),
                s("ISTANBUL"),
            ],
        ),
        (
            s("ǅemal"),
            vec![s("ǆemal"), s("ǄEMAL"), s("DŽemal"), s("dz\u{30C}emal")],
        ),
        (s("ﬃx"), vec![s("ffix"), s("FFIX"), s("ﬃX")]),
        (
            s("\u{212B}ngström"),
            vec![s("Ångström"), s("A\u{30A}NGSTRO\u{308}M"), s("angstrom")],
        ),
        (
            s("한국어"),
            vec![s(
                "\u{1112}\u{1161}\u{11AB}\u{1100}\u{116E}\u{11A8}\u{110B}\u{1165}",
            )],
        ),
        (
            s("zero\u{200B}width"),
            vec![s("zerowidth"), s("ZERO\u{200D}WIDTH"), s("zero width")],
        ),
        (s("ABC\u{A7C7}"), vec![s("abc\u{A7C7}"), s("abc\u{A7C8}")]),
        // A dropped (ignorable) character between combining marks ends their canonical
        // reordering in Linux too: none of these probes is found (so folding is not
        // idempotent: the casefold fuzz target found fold(fold(x)) != fold(x) here).
        (
            s("q\u{301}\u{200B}\u{316}"),
            vec![
                s("q\u{316}\u{301}"),
                s("q\u{301}\u{316}"),
                s("Q\u{301}\u{316}"),
            ],
        ),
        (
            s("p\u{CA}\u{30A}\u{206F}\u{30A}\u{31F}\u{31F}"),
            vec![
                s("pe\u{31F}\u{31F}\u{302}\u{30A}\u{30A}"),
                s("pe\u{302}\u{30A}\u{31F}\u{31F}\u{30A}"),
            ],
        ),
        (
            vec![0xff, 0xfe, b'X'],
            vec![vec![0xff, 0xfe, b'x'], vec![0xff, 0xfe, b'X']],
        ),
    ]
}

/// The many names that push a directory past its inline area and over several buckets.
fn many(prefix: &str, n: usize) -> Vec<(Vec<u8>, Vec<Vec<u8>>)> {
    (0..n)
        .map(|i| {
            let name = format!("{prefix}_{i:03}_Äö");
            let probe = name.to_uppercase();
            (name.into_bytes(), vec![probe.into_bytes()])
        })
        .collect()
}

#[test]
fn linux_names_found_alike() {
    let work = scratch("cf-linux-names");
    let img = mkfs(&work, "utf8");
    let helper = image_helper("casefold");
    let big: Vec<_> = name_set().into_iter().chain(many("Many", 300)).collect();
    let small = vec![
        (
            b"Small".to_vec(),
            vec![b"SMALL".to_vec(), b"small".to_vec()],
        ),
        (
            "Σίσυφος".as_bytes().to_vec(),
            vec!["ΣΊΣΥΦΟΣ".as_bytes().to_vec(), "σίσυφοσ".as_bytes().to_vec()],
        ),
    ];
    let created: Vec<Vec<u8>> = big.iter().map(|(n, _)| n.clone()).collect();
    let small_names: Vec<Vec<u8>> = small.iter().map(|(n, _)| n.clone()).collect();
    let probe = |set: &[(Vec<u8>, Vec<Vec<u8>>)]| -> Vec<Vec<u8>> {
        set.iter()
            .flat_map(|(n, p)| std::iter::once(n.clone()).chain(p.iter().cloned()))
            .collect()
    };
    let (big_probes, small_probes) = (probe(&big), probe(&small));
    names_file(&work.join("create.hex"), &created);
    names_file(&work.join("small.hex"), &small_names);
    names_file(&work.join("probe.hex"), &big_probes);
    names_file(&work.join("sprobe.hex"), &small_probes);
    let job = "set -e\nH=$PAYLOAD/casefold\nmkdir /mnt/cf\n$H setflag /mnt/cf > $OUT/setflag.txt\n\
        $H create /mnt/cf $PAYLOAD/create.hex > $OUT/create.txt\n\
        mkdir /mnt/cf/Sub\n$H create /mnt/cf/Sub $PAYLOAD/small.hex > $OUT/small.txt\n\
        $H getflags /mnt/cf/Sub > $OUT/subflags.txt\n\
        $H list /mnt/cf > $OUT/list.txt\n$H list /mnt/cf/Sub > $OUT/slist.txt\n\
        $H lookup /mnt/cf $PAYLOAD/probe.hex > $OUT/lookup.txt\n\
        $H lookup /mnt/cf/Sub $PAYLOAD/sprobe.hex > $OUT/slookup.txt\n";
    let payload: Vec<PathBuf> = ["create.hex", "small.hex", "probe.hex", "sprobe.hex"]
        .iter()
        .map(|f| work.join(f))
        .collect();
    let mut files: Vec<&Path> = payload.iter().map(PathBuf::as_path).collect();
    files.push(&helper);
    let k = kernel_f2fs_with(&img, job, &work, &files);
    assert_eq!(k.exit, 0, "Linux job: {}", k.job_log);
    assert!(k.f2fs_complaints().is_empty(), "{:#?}", k.f2fs_complaints());
    let read = |f: &str| fs::read_to_string(k.out.join(f)).unwrap();
    assert_eq!(read("setflag.txt").trim(), "ok");
    let subflags = u32::from_str_radix(read("subflags.txt").trim(), 16).unwrap();
    assert_ne!(
        subflags & CASEFOLD,
        0,
        "the subdirectory inherits +F in Linux"
    );
    for (f, n) in [
        ("create.txt", created.len()),
        ("small.txt", small_names.len()),
    ] {
        let a = answers(&read(f));
        assert_eq!(a.len(), n);
        assert!(
            a.values().all(|v| v == "ok"),
            "Linux refused a create: {a:?}"
        );
    }
    assert_fsck_clean(&img);

    let fs = Fs::open(&img).unwrap();
    let root = fs.root_ino();
    let cf = fs.lookup(root, b"cf").unwrap();
    let sub = fs.lookup(cf, b"SUB").unwrap();
    assert_eq!(fs.lookup(cf, b"sub").unwrap(), sub);
    assert_ne!(fs.fs_flags(sub).unwrap() & CASEFOLD, 0);
    assert_eq!(names_of(&fs, cf), sorted_hex_lines(&read("list.txt")));
    assert_eq!(names_of(&fs, sub), sorted_hex_lines(&read("slist.txt")));
    let mut wrong = Vec::new();
    let mut found = 0;
    for (dir, file) in [(cf, "lookup.txt"), (sub, "slookup.txt")] {
        for (name, linux) in answers(&read(file)) {
            let ours = uf2fs_lookup(&fs, dir, &name);
            found += usize::from(linux.starts_with("ino"));
            if ours != linux {
                wrong.push(format!("{}: Linux {linux}, uf2fs {ours}", show(&name)));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "lookups differ from Linux:\n{}",
        wrong.join("\n")
    );
    println!(
        "{} probes, {found} found by Linux, all answered alike by uf2fs",
        big_probes.len() + small_probes.len()
    );
}

#[test]
fn uf2fs_writes_linux_reads() {
    let work = scratch("cf-uf2fs-writes");
    let img = mkfs(&work, "utf8");
    let helper = image_helper("casefold");
    let set = name_set();
    let extra = many("Bulk", 250);
    let fs = Fs::open_rw(&img).unwrap();
    let root = fs.root_ino();
    let cf = fs.create_node(root, b"cf", dir_mode()).unwrap();
    let full = fs.create_node(root, b"full", dir_mode()).unwrap();
    fs.create_node(full, b"x", file()).unwrap();
    let plain = fs.create_node(root, b"plain", file()).unwrap();
    assert!(matches!(
        fs.set_fs_flags(full, CASEFOLD),
        Err(Error::NotEmpty)
    ));
    assert!(matches!(
        fs.set_fs_flags(plain, CASEFOLD),
        Err(Error::NotADirectory)
    ));
    assert!(matches!(
        fs.set_fs_flags(cf, CASEFOLD | 0x10),
        Err(Error::Unsupported(_))
    ));
    let before = fs.fs_flags(cf).unwrap();
    fs.set_fs_flags(cf, before | CASEFOLD).unwrap();
    assert_eq!(fs.fs_flags(cf).unwrap(), before | CASEFOLD);
    for (n, probes) in set.iter().chain(extra.iter()) {
        assert_eq!(uf2fs_create(&fs, cf, n), "ok", "create {}", show(n));
        for p in probes {
            let expect_exists = fs.lookup(cf, p).is_ok();
            let got = uf2fs_create(&fs, cf, p);
            if expect_exists {
                assert_eq!(got, "err EEXIST", "create of the variant {}", show(p));
            } else {
                // A near miss is a name of its own: take it away again.
                assert_eq!(got, "ok", "create {}", show(p));
                fs.unlink(cf, p).unwrap();
            }
        }
    }
    let sub = fs.create_node(cf, "Ünter".as_bytes(), dir_mode()).unwrap();
    assert_ne!(
        fs.fs_flags(sub).unwrap() & CASEFOLD,
        0,
        "a new subdirectory inherits +F"
    );
    fs.create_node(sub, "Größe".as_bytes(), file()).unwrap();
    // Link, rename, a case-only rename (a no-op, as Linux's VFS makes it), unlink by variant.
    let hello = fs.lookup(cf, b"HELLO.TXT").unwrap();
    fs.link(hello, cf, "Verknüpfung".as_bytes()).unwrap();
    assert!(matches!(
        fs.link(hello, cf, "VERKNÜPFUNG".as_bytes()),
        Err(Error::Exists)
    ));
    fs.rename(cf, "STRASSE".as_bytes(), cf, "Neue Straße".as_bytes(), 0)
        .unwrap();
    fs.rename(cf, b"hello.txt", cf, b"HELLO.TXT", 0).unwrap();
    fs.rename(cf, "ΟΔΟΣ".as_bytes(), sub, "Οδός".as_bytes(), 0)
        .unwrap();
    fs.unlink(cf, "CAFE\u{301}".as_bytes()).unwrap();
    fs.unlink(cf, b"bULK_007_\xc3\x84\xc3\xb6").unwrap();
    // The names Linux is asked about, and uf2fs's own answers to them.
    let mut probes: Vec<Vec<u8>> = Vec::new();
    for (n, p) in set.iter().chain(extra.iter()) {
        probes.push(n.clone());
        probes.extend(p.iter().cloned());
    }
    for n in [
        "verknüpfung",
        "NEUE STRASSE",
        "neue straße",
        "Straße",
        "café",
        "bulk_007_äö",
    ] {
        probes.push(n.as_bytes().to_vec());
    }
    let sub_probes: Vec<Vec<u8>> = ["GRÖSSE", "größe", "οδός", "ΟΔΌΣ", "Οδος"]
        .iter()
        .map(|s| s.as_bytes().to_vec())
        .collect();
    let ours: BTreeMap<Vec<u8>, String> = probes
        .iter()
        .map(|p| (p.clone(), uf2fs_lookup(&fs, cf, p)))
        .collect();
    let ours_sub: BTreeMap<Vec<u8>, String> = sub_probes
        .iter()
        .map(|p| (p.clone(), uf2fs_lookup(&fs, sub, p)))
        .collect();
    assert_eq!(ours[&b"HELLO.TXT".to_vec()], format!("ino {hello}"));
    assert_eq!(ours["Straße".as_bytes()], "err ENOENT");
    assert_eq!(ours["café".as_bytes()], "err ENOENT");
    let our_names = names_of(&fs, cf);
    let our_sub_names = names_of(&fs, sub);
    assert!(
        our_names.contains(&b"Hello.txt".to_vec()),
        "a case-only rename keeps the name"
    );
    fs.unmount().unwrap();
    assert_fsck_clean(&img);

    // Linux: the same answers, the same names, and a case variant of each name is EEXIST.
    let variants: Vec<Vec<u8>> = our_names
        .iter()
        .filter_map(|n| std::str::from_utf8(n).ok())
        .filter(|n| n.len() < 200)
        .map(|n| n.to_uppercase().into_bytes())
        .collect();
    names_file(&work.join("probe.hex"), &probes);
    names_file(&work.join("sprobe.hex"), &sub_probes);
    names_file(&work.join("variants.hex"), &variants);
    let job = "set -e\nH=$PAYLOAD/casefold\n\
        $H lookup /mnt/cf $PAYLOAD/probe.hex > $OUT/lookup.txt\n\
        $H lookup /mnt/cf/ünter $PAYLOAD/sprobe.hex > $OUT/slookup.txt\n\
        $H list /mnt/cf > $OUT/list.txt\n$H list /mnt/cf/ÜNTER > $OUT/slist.txt\n\
        $H create /mnt/cf $PAYLOAD/variants.hex > $OUT/variants.txt\n";
    let payload: Vec<PathBuf> = ["probe.hex", "sprobe.hex", "variants.hex"]
        .iter()
        .map(|f| work.join(f))
        .collect();
    let mut files: Vec<&Path> = payload.iter().map(PathBuf::as_path).collect();
    files.push(&helper);
    let k = kernel_f2fs_with(&img, job, &work, &files);
    assert_eq!(k.exit, 0, "Linux job: {}", k.job_log);
    assert!(k.f2fs_complaints().is_empty(), "{:#?}", k.f2fs_complaints());
    let read = |f: &str| fs::read_to_string(k.out.join(f)).unwrap();
    assert_eq!(sorted_hex_lines(&read("list.txt")), our_names);
    assert_eq!(sorted_hex_lines(&read("slist.txt")), our_sub_names);
    let mut wrong = Vec::new();
    for (file, ours) in [("lookup.txt", &ours), ("slookup.txt", &ours_sub)] {
        let linux = answers(&read(file));
        assert_eq!(linux.len(), ours.len(), "{file}");
        for (name, l) in linux {
            if ours.get(&name) != Some(&l) {
                wrong.push(format!(
                    "{}: Linux {l}, uf2fs {:?}",
                    show(&name),
                    ours.get(&name)
                ));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "Linux answers differently:\n{}",
        wrong.join("\n")
    );
    let v = answers(&read("variants.txt"));
    assert_eq!(v.len(), variants.len());
    let bad: Vec<_> = v.iter().filter(|(_, a)| *a != "err EEXIST").collect();
    assert!(
        bad.is_empty(),
        "Linux did not find these uf2fs names by a variant: {bad:?}"
    );
    assert_fsck_clean(&img);
    println!(
        "{} probes answered alike; {} names; {} case variants refused by Linux",
        probes.len() + sub_probes.len(),
        our_names.len(),
        variants.len()
    );
}

#[test]
fn strict_mode_refuses_invalid_names() {
    let work = scratch("cf-strict");
    let img = mkfs(&work, "utf8:strict");
    let helper = image_helper("casefold");
    let names: Vec<Vec<u8>> = vec![
        b"Valid".to_vec(),
        vec![0xff, b'a'],
        vec![b'a', 0xc3],
        vec![0xed, 0xa0, 0x80],
        "\u{200B}".as_bytes().to_vec(),
        vec![b'Q'; 255],
        vec![b'q'; 254],
        "Ünïcödé".as_bytes().to_vec(),
    ];
    let probes: Vec<Vec<u8>> = names
        .iter()
        .cloned()
        .chain([
            b"VALID".to_vec(),
            "ÜNÏCÖDÉ".as_bytes().to_vec(),
            vec![b'Q'; 254],
        ])
        .collect();
    names_file(&work.join("names.hex"), &names);
    names_file(&work.join("probe.hex"), &probes);
    let job = "set -e\nH=$PAYLOAD/casefold\nmkdir /mnt/cf\n$H setflag /mnt/cf > $OUT/setflag.txt\n\
        $H create /mnt/cf $PAYLOAD/names.hex > $OUT/create.txt\n\
        $H lookup /mnt/cf $PAYLOAD/probe.hex > $OUT/lookup.txt\n";
    let (n, p) = (work.join("names.hex"), work.join("probe.hex"));
    let k = kernel_f2fs_with(&img, job, &work, &[&n, &p, &helper]);
    assert_eq!(k.exit, 0, "Linux job: {}", k.job_log);
    let read = |f: &str| fs::read_to_string(k.out.join(f)).unwrap();
    assert_eq!(read("setflag.txt").trim(), "ok");
    let linux_create = answers(&read("create.txt"));
    let linux_lookup = answers(&read("lookup.txt"));
    assert_eq!(
        linux_create[&vec![0xff, b'a']],
        "err EINVAL",
        "Linux's strict mode"
    );

    let fs = Fs::open_rw(&img).unwrap();
    let root = fs.root_ino();
    let cf = fs.lookup(root, b"cf").unwrap();
    let mut wrong = Vec::new();
    for (name, l) in &linux_lookup {
        let ours = uf2fs_lookup(&fs, cf, name);
        if ours != *l {
            wrong.push(format!("lookup {}: Linux {l}, uf2fs {ours}", show(name)));
        }
    }
    // uf2fs's creates in a casefolded directory of its own give Linux's answers.
    let mine = fs.create_node(root, b"mine", dir_mode()).unwrap();
    fs.set_fs_flags(mine, CASEFOLD).unwrap();
    for (name, l) in &linux_create {
        let ours = uf2fs_create(&fs, mine, name);
        if ours != *l {
            wrong.push(format!("create {}: Linux {l}, uf2fs {ours}", show(name)));
        }
    }
    assert!(
        wrong.is_empty(),
        "strict mode differs:\n{}",
        wrong.join("\n")
    );
    fs.unmount().unwrap();
    assert_fsck_clean(&img);
}

/// Offset of the superblock copy `c`'s field at `off` (bytes into the struct).
fn sb_at(c: u64, off: u64) -> u64 {
    c * 4096 + 1024 + off
}

/// Patches a superblock field in both copies (images made here have no sb_checksum).
fn patch_sb(img: &Path, off: u64, bytes: &[u8]) {
    use std::io::{Seek, SeekFrom, Write};
    let mut f = fs::OpenOptions::new().write(true).open(img).unwrap();
    for c in 0..2 {
        f.seek(SeekFrom::Start(sb_at(c, off))).unwrap();
        f.write_all(bytes).unwrap();
    }
}

#[test]
fn hostile_casefold_images() {
    let work = scratch("cf-hostile");
    let img = work.join("img");
    fs::File::create(&img).unwrap().set_len(128 << 20).unwrap();
    run(Command::new("mkfs.f2fs")
        .args(["-q", "-f", "-O", "extra_attr,casefold", "-C", "utf8"])
        .arg(&img));
    let fs = Fs::open_rw(&img).unwrap();
    let root = fs.root_ino();
    let cf = fs.create_node(root, b"cf", dir_mode()).unwrap();
    fs.set_fs_flags(cf, CASEFOLD).unwrap();
    // A 255-byte name has no folded form in Linux (its buffer holds 254 bytes and the NUL);
    // fsck.f2fs 1.15 folds it and calls Linux's hash a mismatch, so it stays out of the
    // images fsck judges.
    for n in [
        &b"Name"[..],
        &[0xff, 0xfe][..],
        "Ärger".as_bytes(),
        &[b'L'; 255][..],
    ] {
        fs.create_node(cf, n, file()).unwrap();
    }
    assert!(
        fs.lookup(cf, &[0xff, 0xfe]).is_ok(),
        "non-strict: exact bytes"
    );
    assert!(
        fs.lookup(cf, &[b'L'; 255]).is_ok(),
        "non-strict: exact bytes"
    );
    assert!(matches!(fs.lookup(cf, &[b'l'; 255]), Err(Error::NotFound)));
    fs.unmount().unwrap();

    // Strict mode switched on afterwards: the invalid name on disk is listed but never found;
    // looking it up is EINVAL, as in Linux.
    let strict = work.join("strict.img");
    fs::copy(&img, &strict).unwrap();
    patch_sb(&strict, 2760, &1u16.to_le_bytes());
    let fs = Fs::open(&strict).unwrap();
    let cf = fs.lookup(fs.root_ino(), b"cf").unwrap();
    assert_eq!(names_of(&fs, cf).len(), 4);
    let probes: Vec<Vec<u8>> = vec![
        vec![0xff, 0xfe],
        b"NAME".to_vec(),
        "ärger".as_bytes().to_vec(),
        vec![b'L'; 255],
    ];
    let ours: BTreeMap<Vec<u8>, String> = probes
        .iter()
        .map(|p| (p.clone(), uf2fs_lookup(&fs, cf, p)))
        .collect();
    assert_eq!(ours[&vec![0xff, 0xfe]], "err EINVAL");
    drop(fs);
    let helper = image_helper("casefold");
    names_file(&work.join("probe.hex"), &probes);
    let p = work.join("probe.hex");
    let k = kernel_f2fs_with(
        &strict,
        "set -e\n$PAYLOAD/casefold lookup /mnt/cf $PAYLOAD/probe.hex > $OUT/lookup.txt\n",
        &work,
        &[&p, &helper],
    );
    assert_eq!(k.exit, 0, "Linux job: {}", k.job_log);
    let linux = answers(&fs::read_to_string(k.out.join("lookup.txt")).unwrap());
    assert_eq!(linux, ours, "strict mode over an invalid name on disk");

    // The casefold feature gone from the superblock: the flagged directory is refused by name.
    let nofeature = work.join("nofeature.img");
    fs::copy(&img, &nofeature).unwrap();
    let mut head = [0u8; 4096];
    std::io::Read::read_exact(&mut fs::File::open(&nofeature).unwrap(), &mut head).unwrap();
    let feat = u32::from_le_bytes(head[1024 + 2180..1024 + 2184].try_into().unwrap());
    patch_sb(&nofeature, 2180, &(feat & !0x1000).to_le_bytes());
    let fs = Fs::open(&nofeature).unwrap();
    let cf = fs.lookup(fs.root_ino(), b"cf").unwrap();
    let e = fs.lookup(cf, b"Name").unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("casefold"), "{msg}");
    assert_eq!(e.errno(), 95);
    assert!(fs.readdir(cf).is_ok(), "listing needs no folding");
    drop(fs);

    // An encoding Linux 6.1 does not know: the mount is refused, naming it.
    let unknown = work.join("unknown.img");
    fs::copy(&img, &unknown).unwrap();
    patch_sb(&unknown, 2758, &9u16.to_le_bytes());
    let msg = Fs::open(&unknown)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(msg.contains("encoding 9"), "{msg}");
    assert_eq!(fs_flags::INLINE_DATA, 0x1000_0000);
}
