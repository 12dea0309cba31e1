//! The command line as a user meets it: exit status 0 / 1 / 2, one clear line on stderr for
//! an error, never a panic trace; and the redundancy F2FS carries (two superblock copies,
//! two checkpoint packs) used when one copy is damaged.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    reason = "test code: a panic is the failure report"
)]

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::process::{Command, Output};
use uf2fs_testkit::{fixture, root, scratch, view};

fn uf2fs(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_uf2fs"))
        .args(args)
        .output()
        .expect("run uf2fs")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn assert_error(o: &Output, needle: &str) {
    assert_eq!(
        o.status.code(),
        Some(1),
        "exit status; stderr: {}",
        stderr(o)
    );
    let e = stderr(o);
    assert_eq!(e.lines().count(), 1, "one line on stderr: {e}");
    assert!(e.contains(needle), "stderr {e:?} should say {needle:?}");
    assert!(!e.contains("panicked"), "{e}");
}

fn image() -> (std::path::PathBuf, String) {
    let dir = scratch("cli");
    let img = fixture("linux-default", &dir);
    let s = img.to_string_lossy().into_owned();
    (dir, s)
}

#[test]
fn bad_usage_exits_2() {
    for args in [
        &[][..],
        &["frobnicate"],
        &["ls"],
        &["info", "a", "b", "c"],
        &["ls", "--bogus", "x"],
    ] {
        let o = uf2fs(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
    }
}

#[test]
fn missing_image_is_one_line() {
    assert_error(
        &uf2fs(&["info", "/nonexistent/image"]),
        "No such file or directory",
    );
}

#[test]
fn not_an_f2fs_image_is_named() {
    let dir = scratch("cli-notf2fs");
    let p = dir.join("zeros");
    std::fs::write(&p, vec![0u8; 1 << 20]).unwrap();
    assert_error(
        &uf2fs(&["info", p.to_str().unwrap()]),
        "no valid superblock",
    );
    let short = dir.join("short");
    std::fs::write(&short, b"tiny").unwrap();
    assert_error(
        &uf2fs(&["ls", short.to_str().unwrap()]),
        "past the end of the device",
    );
}

#[test]
fn missing_paths_and_wrong_types() {
    let (_d, img) = image();
    assert_error(
        &uf2fs(&["cat", &img, "/no/such"]),
        "/no/such: no such file or directory",
    );
    assert_error(&uf2fs(&["cat", &img, "/bigdir"]), "is a directory");
    assert_error(&uf2fs(&["ls", &img, "/files/empty/x"]), "not a directory");
    let long = format!("/{}", "n".repeat(256));
    assert_error(&uf2fs(&["stat", &img, &long]), "file name too long");
}

#[test]
fn info_json_parses_and_agrees_with_text() {
    let (_d, img) = image();
    let o = uf2fs(&["info", "--json", &img]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("info --json is JSON");
    assert_eq!(v["block_size"], 4096);
    assert!(v["valid_inode_count"].as_u64().unwrap() > 6000);
    assert!(v["segment_usage"]["valid_blocks"].as_u64().unwrap() > 0);
    // The CP counts every block in use, fallocated (NEW_ADDR) ones too, which have no place in
    // the SIT; summed i_blocks of all inodes is the same count.
    let cp_valid = v["valid_block_count"].as_u64().unwrap();
    assert!(v["segment_usage"]["valid_blocks"].as_u64().unwrap() <= cp_valid);
    let fs = uf2fs_engine::Fs::open(Path::new(&img)).unwrap();
    let mut inodes = std::collections::HashSet::new();
    let mut blocks = 0;
    fs.walk(fs.root_ino(), &mut |item| {
        if let uf2fs_engine::WalkItem::Entry { ino, .. } = item {
            if inodes.insert(ino) {
                blocks += fs.inode(ino)?.blocks;
            }
        }
        Ok(true)
    })
    .unwrap();
    assert_eq!(
        blocks, cp_valid,
        "sum of i_blocks equals the CP's valid_block_count"
    );
    let text = String::from_utf8(uf2fs(&["info", &img]).stdout).unwrap();
    assert!(text.contains(&format!(
        "{:#x}",
        v["mount"]["checkpoint_version"].as_u64().unwrap()
    )));
}

#[test]
fn cat_writes_the_exact_bytes() {
    let (d, img) = image();
    let out = d.join("x");
    uf2fs_testkit::run(
        Command::new(env!("CARGO_BIN_EXE_uf2fs"))
            .args(["extract", &img])
            .arg(&out),
    );
    // Every regular file of the fixture, through cat, equals the extracted copy.
    let mut n = 0;
    for line in view(&out, Some("type")) {
        let path = line.split('\t').next().unwrap();
        if !line.contains("type=f") || path.contains('\u{fffd}') || path.starts_with("compr") {
            continue;
        }
        let o = uf2fs(&["cat", &img, &format!("/{path}")]);
        assert!(o.status.success(), "{path}: {}", stderr(&o));
        assert_eq!(o.stdout, std::fs::read(out.join(path)).unwrap(), "{path}");
        n += 1;
        if n > 300 {
            break;
        }
    }
    assert!(n > 100);
}

#[test]
fn ls_stat_show_what_linux_wrote() {
    let (_d, img) = image();
    let o = uf2fs(&["ls", &img, "/"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let names = String::from_utf8_lossy(&o.stdout);
    assert!(names.lines().any(|l| l == "bigdir"), "{names}");
    let o = uf2fs(&["ls", "-R", &img, "/"]);
    let all = String::from_utf8_lossy(&o.stdout).lines().count();
    let want = std::fs::read(root().join("tests/fixtures/linux-default.view.txt")).unwrap();
    assert_eq!(
        all + 1,
        want.split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .count(),
        "ls -R lists every entry"
    );
    let o = uf2fs(&["stat", "--json", &img, "/"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("stat --json");
    assert_eq!(v["attr"]["file_type"], "directory");
    assert_eq!(v["attr"]["ino"], 3);
}

fn corrupt_block(img: &Path, blkaddr: u64, at: usize) {
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(img)
        .unwrap();
    let mut b = [0u8; 1];
    f.seek(SeekFrom::Start(blkaddr * 4096 + at as u64)).unwrap();
    f.read_exact(&mut b).unwrap();
    f.seek(SeekFrom::Start(blkaddr * 4096 + at as u64)).unwrap();
    f.write_all(&[b[0] ^ 0x5a]).unwrap();
}

fn extract_view(img: &Path, out: &Path) -> Vec<String> {
    uf2fs_testkit::run(
        Command::new(env!("CARGO_BIN_EXE_uf2fs"))
            .arg("extract")
            .arg(img)
            .arg(out),
    );
    view(out, None)
}

#[test]
fn damaged_superblock_copy_0_reads_through_copy_1() {
    let dir = scratch("cli-sb");
    let img = fixture("linux-default", &dir);
    let want = extract_view(&img, &dir.join("a"));
    corrupt_block(&img, 0, 1024); // the magic of copy 0
    let o = uf2fs(&["info", "--json", img.to_str().unwrap()]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["mount"]["superblock_copy"], 1);
    assert_eq!(extract_view(&img, &dir.join("b")), want);
    corrupt_block(&img, 1, 1024);
    assert_error(
        &uf2fs(&["ls", img.to_str().unwrap()]),
        "no valid superblock",
    );
}

#[test]
fn damaged_newest_checkpoint_falls_back_to_the_other_pack() {
    let dir = scratch("cli-cp");
    let img = fixture("linux-default", &dir);
    let s = img.to_str().unwrap();
    let v: serde_json::Value =
        serde_json::from_slice(&uf2fs(&["info", "--json", s]).stdout).unwrap();
    let pack = v["mount"]["checkpoint_pack"].as_u64().unwrap();
    let version = v["mount"]["checkpoint_version"].as_u64().unwrap();
    let cp_addr = v["areas"][0][1].as_u64().unwrap();
    corrupt_block(&img, cp_addr + (pack - 1) * 512, 100);
    let o = uf2fs(&["info", "--json", s]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_ne!(v["mount"]["checkpoint_pack"].as_u64().unwrap(), pack);
    assert!(v["mount"]["checkpoint_version"].as_u64().unwrap() < version);
    assert!(v["mount"]["notes"][0]
        .as_str()
        .unwrap()
        .contains("bad checksum"));
    corrupt_block(&img, cp_addr + (2 - pack) * 512, 100);
    assert_error(&uf2fs(&["ls", s]), "no valid checkpoint pack");
}

/// A directory that contains itself (a corrupt image) makes `rm -r` stop with an error naming
/// the cycle, not loop.
#[test]
fn rm_r_on_a_directory_cycle_stops_with_an_error() {
    let dir = scratch("cli-cycle");
    let img = fixture("linux-default", &dir);
    let fs = uf2fs_engine::Fs::open(&img).unwrap();
    let d = fs.resolve(b"/dir200", false).unwrap();
    drop(fs);
    let mut data = std::fs::read(&img).unwrap();
    let mut patched = 0;
    for b in data.chunks_mut(4096) {
        let block: &[u8; 4096] = (&*b).try_into().unwrap();
        let slots: Vec<usize> = uf2fs_format::dentry::DentryArea::block(block)
            .iter()
            .filter_map(|e| e.ok())
            .filter(|e| e.name == b"n0")
            .map(|e| e.slot)
            .collect();
        for slot in slots {
            let at = 30 + slot * 11;
            b[at + 4..at + 8].copy_from_slice(&d.to_le_bytes());
            b[at + 10] = 2;
            patched += 1;
        }
    }
    assert_eq!(patched, 1);
    std::fs::write(&img, data).unwrap();
    let o = Command::new("timeout")
        .arg("60")
        .arg(env!("CARGO_BIN_EXE_uf2fs"))
        .args(["rm", "-r"])
        .arg(&img)
        .arg("/dir200")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("contains itself or an ancestor"),
        "{}",
        stderr(&o)
    );
}

/// A reader that went away (`uf2fs status IMAGE | head -1`) ends the command with status 1
/// and nothing on stderr, as SIGPIPE ends other tools: no "Broken pipe" line, no panic.
#[test]
fn a_closed_reader_ends_a_command_quietly() {
    let (_dir, img) = image();
    for args in [
        &["status", &img][..],
        &["status", "--json", &img],
        &["info", &img],
        &["ls", &img, "/"],
    ] {
        let (reader, writer) = std::io::pipe().unwrap();
        // The read end is gone before the command writes: its first write fails (EPIPE).
        drop(reader);
        let o = Command::new(env!("CARGO_BIN_EXE_uf2fs"))
            .args(args)
            .stdout(writer)
            .output()
            .expect("run uf2fs");
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", stderr(&o));
        assert_eq!(stderr(&o), "", "{args:?}");
    }
}
