//! Android sparse images: one that `img2simg` made from a Linux-written fixture reads (info,
//! ls, cat, stat, extract, a read-only mount) exactly as its raw image does; writing commands
//! refuse it by name; hostile headers give one clear error each; and what `mkfs --sparse`,
//! `import --sparse` and the writer make is byte for byte what `img2simg` makes of the same
//! raw image, which `simg2img` turns back into that raw image.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    reason = "test code: a panic is the failure report"
)]

use std::path::{Path, PathBuf};
use std::process::Command;
use uf2fs_engine::uf2fs_device::write_sparse;
use uf2fs_testkit::{
    assert_fsck_clean, assert_same_view, fixture, gen_tree, mkfs_sload, run, scratch, try_run,
    view, Mount, TreeSpec,
};

const FIELDS: &str = "type,mode,uid,gid,size,mtime,hash,target,links,xattr,rdev";

fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_uf2fs"))
}

fn uf2fs(args: &[&str], img: &Path) -> String {
    // The image goes where each command wants it: after the command name.
    let (cmd, rest) = args.split_first().unwrap();
    run(Command::new(bin()).arg(cmd).arg(img).args(rest))
}

fn img2simg(raw: &Path, out: &Path) {
    run(Command::new("img2simg").arg(raw).arg(out));
}

fn simg2img(sparse: &Path, out: &Path) {
    run(Command::new("simg2img").arg(sparse).arg(out));
}

fn extract_view(img: &Path, out: &Path) -> Vec<String> {
    run(Command::new(bin()).arg("extract").arg(img).arg(out));
    view(out, Some(FIELDS))
}

/// Our writer's output for the raw image at `raw`.
fn ours(raw: &Path, out: &Path) {
    let f = std::fs::File::open(raw).unwrap();
    let len = f.metadata().unwrap().len();
    write_sparse(
        std::io::BufReader::new(f),
        len,
        std::fs::File::create(out).unwrap(),
    )
    .unwrap();
}

fn same_bytes(a: &Path, b: &Path) {
    let (x, y) = (std::fs::read(a).unwrap(), std::fs::read(b).unwrap());
    assert!(
        x == y,
        "{} ({} bytes) and {} ({} bytes) differ",
        a.display(),
        x.len(),
        b.display(),
        y.len()
    );
}

#[test]
fn a_sparse_fixture_reads_as_its_raw_image() {
    let dir = scratch("sparse-read");
    let raw = fixture("linux-default", &dir);
    let simg = dir.join("default.simg");
    img2simg(&raw, &simg);
    assert_same_view(
        &extract_view(&raw, &dir.join("raw-out")),
        &extract_view(&simg, &dir.join("sparse-out")),
        "extract of the sparse image",
    );
    for args in [
        &["ls", "-R"][..],
        &["ls", "-l", "/files/f40k"],
        &["cat", "/files/f40k"],
        &["stat", "/files/f40k"],
        &["fsck"],
    ] {
        let cmd = |img: &Path| {
            let (first, rest) = args.split_first().unwrap();
            let mut c = Command::new(bin());
            c.arg(first);
            let (flags, paths): (Vec<&str>, Vec<&str>) =
                rest.iter().partition(|a| a.starts_with('-'));
            // fsck names the image: the rest must be the same.
            run(c.args(flags).arg(img).args(paths)).replace(img.to_str().unwrap(), "IMG")
        };
        assert_eq!(cmd(&raw), cmd(&simg), "{args:?}");
    }
    let info = uf2fs(&["info"], &simg);
    assert!(info.contains("uuid"), "{info}");
    // The writer, on an image Linux wrote, is img2simg byte for byte.
    let mine = dir.join("mine.simg");
    ours(&raw, &mine);
    same_bytes(&mine, &simg);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_sparse_image_mounts_read_only_and_reads_the_same() {
    let dir = scratch("sparse-mount");
    let raw = fixture("linux-default", &dir);
    let simg = dir.join("default.simg");
    img2simg(&raw, &simg);
    let before = std::fs::read(&simg).unwrap();
    let want = extract_view(&raw, &dir.join("raw-out"));
    let mnt = dir.join("mnt");
    std::fs::create_dir_all(&mnt).unwrap();
    let out = Command::new(bin())
        .arg("mount")
        .arg(&simg)
        .arg(&mnt)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    // Taken over by `Mount` so that a failed assertion still unmounts.
    let st = run(Command::new(bin()).arg("status").arg("--json").arg(&mnt));
    let v: serde_json::Value = serde_json::from_str(&st).unwrap();
    let m = MountGuard(mnt.clone());
    assert!(
        said.contains("read-only") && said.contains("sparse images are read-only here"),
        "{said}"
    );
    assert!(
        v["read_only_reason"]
            .as_str()
            .is_some_and(|r| r.contains("sparse")),
        "{st}"
    );
    assert_same_view(&want, &view(&mnt, Some(FIELDS)), "the mounted sparse image");
    let e = std::fs::write(mnt.join("new"), b"x").unwrap_err();
    assert_eq!(e.raw_os_error(), Some(30), "write: {e}");
    run(Command::new(bin()).arg("umount").arg(&mnt));
    std::mem::forget(m);
    assert!(
        std::fs::read(&simg).unwrap() == before,
        "the mount changed the image"
    );
    // The testkit's mount works on it as on any image.
    let m = Mount::new(&bin(), &simg, &mnt, &[]);
    assert!(std::fs::read_dir(&m.dir).unwrap().count() > 0);
    m.umount();
    let _ = std::fs::remove_dir_all(&dir);
}

/// Detaches a mount left behind by a failed assertion.
struct MountGuard(PathBuf);

impl Drop for MountGuard {
    fn drop(&mut self) {
        let _ = Command::new("fusermount3").arg("-uz").arg(&self.0).status();
    }
}

#[test]
fn writing_commands_refuse_sparse_images() {
    let dir = scratch("sparse-refuse");
    let simg = dir.join("a.simg");
    run(Command::new(bin())
        .arg("mkfs")
        .arg(&simg)
        .args(["--size", "64M", "--sparse"]));
    let host = dir.join("host");
    std::fs::write(&host, b"hello").unwrap();
    let before = std::fs::read(&simg).unwrap();
    let s = |p: &Path| p.to_str().unwrap().to_owned();
    for args in [
        vec!["put".into(), s(&simg), s(&host), "/h".into()],
        vec!["mkdir".into(), s(&simg), "/d".into()],
        vec!["rm".into(), s(&simg), "/x".into()],
        vec!["mv".into(), s(&simg), "/a".into(), "/b".into()],
        vec!["ln".into(), "-s".into(), s(&simg), "t".into(), "/l".into()],
        vec!["import".into(), s(&simg), s(&dir.join("host"))],
        vec!["gc".into(), s(&simg)],
    ] {
        let (ok, _, err) = try_run(Command::new(bin()).args(&args));
        assert!(!ok, "{args:?} succeeded");
        assert!(
            err.contains("sparse images are read-only here") && err.contains("--sparse"),
            "{args:?}: {err}"
        );
        assert!(!err.contains("internal error"), "{err}");
    }
    assert!(
        std::fs::read(&simg).unwrap() == before,
        "a refused command changed the image"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A sparse file by hand (block size 4096): chunks as (type, blocks, body).
fn sparse(total_blks: u32, total_chunks: u32, chunks: &[(u16, u32, Vec<u8>)]) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend(0xed26_ff3a_u32.to_le_bytes());
    v.extend(1u16.to_le_bytes());
    v.extend(0u16.to_le_bytes());
    v.extend(28u16.to_le_bytes());
    v.extend(12u16.to_le_bytes());
    v.extend(4096u32.to_le_bytes());
    v.extend(total_blks.to_le_bytes());
    v.extend(total_chunks.to_le_bytes());
    v.extend(0u32.to_le_bytes());
    for (t, blocks, body) in chunks {
        v.extend(t.to_le_bytes());
        v.extend(0u16.to_le_bytes());
        v.extend(blocks.to_le_bytes());
        v.extend((12 + body.len() as u32).to_le_bytes());
        v.extend(body);
    }
    v
}

#[test]
fn hostile_sparse_headers_give_clear_errors() {
    let dir = scratch("sparse-hostile");
    let raw_chunk = (0xcac1u16, 2u32, vec![7u8; 8192]);
    let one = std::slice::from_ref(&raw_chunk);
    let mut version2 = sparse(2, 1, one);
    version2[4] = 2;
    let mut truncated = sparse(2, 1, one);
    truncated.truncate(5000);
    let crc_bad = sparse(
        2,
        2,
        &[
            raw_chunk.clone(),
            (0xcac4, 0, 0x1234_5678u32.to_le_bytes().to_vec()),
        ],
    );
    for (name, bytes, says) in [
        ("version", version2, "sparse format version 2.0"),
        (
            "truncated",
            truncated,
            "chunk 0 at byte 28: its 8204 bytes go past the end of the file (5000 bytes)",
        ),
        (
            "huge-count",
            sparse(2, u32::MAX, one),
            "too short for 4294967295 chunk headers",
        ),
        (
            "too-few-blocks",
            sparse(3, 1, one),
            "the chunks cover 2 blocks, the header says 3",
        ),
        (
            "too-many-blocks",
            sparse(1, 1, one),
            "chunk 0 at byte 28: its 2 blocks end past the 1 blocks",
        ),
        (
            "raw-size",
            sparse(3, 1, &[(0xcac1, 3, vec![7u8; 8192])]),
            "RAW chunk of 3 blocks should take 12300 bytes, its header says 8204",
        ),
        (
            "bad-type",
            sparse(2, 1, &[(0xcac9, 2, vec![])]),
            "chunk 0 at byte 28: unknown chunk type 0xcac9",
        ),
        (
            "crc",
            crc_bad,
            "chunk 1 at byte 8232: CRC32 0x12345678 does not match the data before it",
        ),
    ] {
        let img = dir.join(name);
        std::fs::write(&img, bytes).unwrap();
        for cmd in ["info", "ls"] {
            let (ok, _, err) = try_run(Command::new(bin()).arg(cmd).arg(&img));
            assert!(!ok, "{name}: {cmd} succeeded");
            assert!(err.contains(says), "{name}: {cmd}: {err}");
            assert!(!err.contains("internal error"), "{name}: {err}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `ours` is what img2simg makes of the raw image it stands for, and that raw image is a clean
/// F2FS image.
fn is_img2simg_of_its_raw(ours: &Path, dir: &Path) -> PathBuf {
    let raw = dir.join(format!(
        "{}.raw",
        ours.file_name().unwrap().to_str().unwrap()
    ));
    simg2img(ours, &raw);
    let again = dir.join("again.simg");
    img2simg(&raw, &again);
    same_bytes(ours, &again);
    assert_fsck_clean(&raw);
    raw
}

#[test]
fn sparse_output_is_img2simg_byte_for_byte() {
    let dir = scratch("sparse-write");
    // A fresh mkfs (default layout).
    let fresh = dir.join("fresh.simg");
    run(Command::new(bin())
        .arg("mkfs")
        .arg(&fresh)
        .args(["--size", "256M", "--sparse"]));
    is_img2simg_of_its_raw(&fresh, &dir);
    assert!(
        !dir.join("fresh.simg.uf2fs-raw").exists(),
        "the raw stage is left"
    );

    // Files imported into a raw image, written back sparse; then more imported into the
    // sparse image itself.
    let src = dir.join("src");
    gen_tree(
        &src,
        7,
        TreeSpec {
            files: 60,
            max_file: 3_000_000,
            big_dir: 300,
            depth: 4,
        },
    );
    let img = dir.join("imported.img");
    run(Command::new(bin())
        .arg("mkfs")
        .arg(&img)
        .args(["--size", "256M"]));
    run(Command::new(bin())
        .arg("import")
        .arg(&img)
        .arg(&src)
        .arg("--sparse"));
    let raw = is_img2simg_of_its_raw(&img, &dir);
    let want = view(&src, Some("type,mode,size,hash,target,links"));
    let out = dir.join("out");
    run(Command::new(bin()).arg("extract").arg(&img).arg(&out));
    assert_same_view(
        &want,
        &view(&out, Some("type,mode,size,hash,target,links")),
        "extract",
    );
    std::fs::create_dir_all(dir.join("more/sub")).unwrap();
    std::fs::write(dir.join("more/sub/f"), b"second import").unwrap();
    run(Command::new(bin())
        .arg("import")
        .arg(&img)
        .arg(dir.join("more"))
        .arg("/")
        .arg("--sparse"));
    is_img2simg_of_its_raw(&img, &dir);
    assert_eq!(uf2fs(&["cat", "/sub/f"], &img), "second import");
    let _ = std::fs::remove_file(raw);

    // mkfs.f2fs + sload.f2fs: the writer is img2simg byte for byte, and simg2img gives back
    // the raw image exactly.
    let loaded = dir.join("sload.img");
    mkfs_sload(&loaded, 256, "", &src);
    let mine = dir.join("sload.simg");
    ours(&loaded, &mine);
    let theirs = dir.join("sload-img2simg.simg");
    img2simg(&loaded, &theirs);
    same_bytes(&mine, &theirs);
    let back = dir.join("sload.back");
    simg2img(&mine, &back);
    same_bytes(&back, &loaded);
    let _ = std::fs::remove_dir_all(&dir);
}
