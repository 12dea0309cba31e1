//! Compressed files that uf2fs writes, judged by Linux 6.1 and fsck.f2fs. On an image made
//! with `mkfs.f2fs -O extra_attr,compression`, uf2fs (in-process, one mount per
//! configuration: every algorithm, cluster sizes 4 KiB to 1 MiB, checksums on and off, a
//! `chattr +c` directory or compress_extension=) writes files that compress well, poorly
//! (random: plain clusters), zeros, sizes that are no multiple of the cluster, holes,
//! overwrites inside compressed clusters, appends and truncations that cut a compressed
//! cluster, each against a model of its bytes; then, through the FUSE mount, `chattr +c` on
//! a new directory, files written there with write(2) in pieces, and compress_extension=
//! for a name in the root; and the cleaner moves compressed blocks. Then:
//! - uf2fs reads every file back as the model says, and both fsck.f2fs and `uf2fs fsck` find
//!   the image clean (i_blocks, valid block counts and i_compr_blocks included);
//! - Linux (tools/linux-f2fs) shows the same tree, field for field, as `uf2fs extract`, and
//!   reports the same compression attributes (FS_IOC_GET_COMPRESS_BLOCKS, st_blocks);
//! - Linux then changes the files (overwrites, appends, truncation, a new file in the `+c`
//!   directory); fsck.f2fs finds that clean, and uf2fs shows Linux's second tree exactly.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    reason = "test code: a panic is the failure report"
)]

use std::collections::BTreeMap;
use std::process::Command;
use uf2fs_engine::compress::Algorithm;
use uf2fs_engine::{CompressOptions, Fs, NewInode};
use uf2fs_testkit::{
    assert_fsck_clean, assert_same_view, image_helper, kernel_f2fs_args, mkfs_f2fs, scratch,
    try_run, view, Mount,
};

/// Compressible text, every 4 KiB block labelled (as the Linux-side tests generate it).
fn text(name: &str, n: usize) -> Vec<u8> {
    let mut f = String::new();
    while f.len() < 4200 {
        f.push_str("The quick brown fox jumps over the lazy dog; 0123456789 ");
    }
    let mut out = Vec::with_capacity(n);
    let mut off = 0;
    while off < n {
        let b = format!("<{name} block {}>\n{f}", off / 4096);
        let k = (n - off).min(4096);
        out.extend_from_slice(&b.as_bytes()[..k]);
        off += k;
    }
    out
}

/// Incompressible bytes.
fn random(seed: u64, n: usize) -> Vec<u8> {
    uf2fs_testkit::Rng::new(seed).bytes(n)
}

/// A file and the bytes it must hold.
struct Model {
    fs_ino: u32,
    bytes: Vec<u8>,
}

fn write(fs: &Fs, m: &mut Model, off: usize, data: &[u8]) {
    fs.write(m.fs_ino, off as u64, data).unwrap();
    if m.bytes.len() < off + data.len() {
        m.bytes.resize(off + data.len(), 0);
    }
    m.bytes[off..off + data.len()].copy_from_slice(data);
}

fn truncate(fs: &Fs, m: &mut Model, size: usize) {
    fs.truncate(m.fs_ino, size as u64).unwrap();
    m.bytes.resize(size, 0);
}

fn file(fs: &Fs, dir: u32, name: &str) -> Model {
    let fs_ino = fs
        .create_node(
            dir,
            name.as_bytes(),
            NewInode {
                mode: 0o100644,
                uid: 0,
                gid: 0,
                rdev: (0, 0),
            },
        )
        .unwrap();
    Model {
        fs_ino,
        bytes: Vec::new(),
    }
}

/// The files every configuration writes, in directory `dir`, each name ending in `suffix`.
fn files(fs: &Fs, dir: u32, suffix: &str, models: &mut BTreeMap<String, Model>, tag: &str) {
    let mut put = |name: &str, m: Model| {
        models.insert(format!("{tag}/{name}{suffix}"), m);
    };
    let mut m = file(fs, dir, &format!("text{suffix}"));
    // In FUSE-sized pieces, as a mount delivers them.
    let t = text("text", 1_234_567);
    for (i, chunk) in t.chunks(128 << 10).enumerate() {
        write(fs, &mut m, i * (128 << 10), chunk);
    }
    put("text", m);

    let mut m = file(fs, dir, &format!("random{suffix}"));
    write(fs, &mut m, 0, &random(7, 300_000));
    put("random", m);

    let mut m = file(fs, dir, &format!("zeros{suffix}"));
    write(fs, &mut m, 0, &vec![0u8; 700_001]);
    put("zeros", m);

    // Overwrites inside compressed clusters: random bytes into text, text over random.
    let mut m = file(fs, dir, &format!("mixed{suffix}"));
    write(fs, &mut m, 0, &text("mixed", 600_000));
    write(fs, &mut m, 40 * 4096 + 100, &random(9, 131_072));
    write(fs, &mut m, 100 * 4096, &vec![0u8; 65_536]);
    write(fs, &mut m, 3, b"overwritten in place");
    write(fs, &mut m, 250_000, &text("again", 9_000));
    put("mixed", m);

    // Holes: a small head, data far out, then a size past it all.
    let mut m = file(fs, dir, &format!("sparse{suffix}"));
    write(fs, &mut m, 0, &text("sparse", 8192));
    write(fs, &mut m, 700 * 4096, &text("sparse_mid", 300_000));
    truncate(fs, &mut m, 5_000_000);
    put("sparse", m);

    let mut m = file(fs, dir, &format!("small{suffix}"));
    write(fs, &mut m, 0, &text("small", 5000));
    put("small", m);

    // Three blocks and nine bytes: with 16 KiB clusters the file reaches into its cluster's
    // last block, so Linux compresses it (zeros past the end of file), and so must we.
    let mut m = file(fs, dir, &format!("short_tail{suffix}"));
    write(fs, &mut m, 0, &text("short tail", 3 * 4096 + 9));
    put("short_tail", m);

    // Appends in odd sizes, then cut inside a cluster, then grown again.
    let mut m = file(fs, dir, &format!("tail{suffix}"));
    let t = text("tail", 1_048_577);
    let mut off = 0;
    for (i, len) in [1usize, 4095, 70_000, 3, 300_001]
        .iter()
        .cycle()
        .enumerate()
    {
        if off >= t.len() || i > 200 {
            break;
        }
        let end = (off + len).min(t.len());
        write(fs, &mut m, off, &t[off..end]);
        off = end;
    }
    truncate(fs, &mut m, 777_777);
    write(fs, &mut m, 900_000, b"past the cut");
    truncate(fs, &mut m, 123_456);
    write(fs, &mut m, 123_456, &text("regrown", 50_000));
    put("tail", m);
}

/// name, options, how files get compressed (`chattr`: the directory's flag; `ext`:
/// compress_extension=txt).
fn configs() -> Vec<(&'static str, CompressOptions, &'static str)> {
    let c = |algorithm, level, log_cluster_size, checksum| CompressOptions {
        algorithm,
        level,
        log_cluster_size,
        checksum,
        ..CompressOptions::default()
    };
    let mut ext = c(Algorithm::Zstd, 0, 3, false);
    ext.extensions.push("txt").unwrap();
    vec![
        ("lz4_c16k", c(Algorithm::Lz4, 0, 2, false), "chattr"),
        ("lz4hc_c32k_sum", c(Algorithm::Lz4, 9, 3, true), "chattr"),
        ("zstd_c64k_sum", c(Algorithm::Zstd, 6, 4, true), "chattr"),
        ("zstd_c1m", c(Algorithm::Zstd, 0, 8, false), "chattr"),
        ("lzo_c128k_sum", c(Algorithm::Lzo, 0, 5, true), "chattr"),
        ("lzorle_c256k", c(Algorithm::LzoRle, 0, 6, false), "chattr"),
        ("zstd_ext", ext, "ext"),
    ]
}

const JOB: &str = r#"
set -e
fail() { echo "job: FAILED: $*"; exit 1; }
mount -t f2fs /dev/vda /mnt || fail "mount"
cd /mnt
$PAYLOAD/treeview /mnt | sort > $OUT/view1.txt
for d in */; do
  for f in $d*; do echo "$f $($PAYLOAD/setcompr --blocks $f 2>/dev/null || echo -)"; done
done > $OUT/compr.txt
find . -exec stat -c '%i	%h	%b	%n' {} + | sort -t '	' -k4 > $OUT/stat.txt
# Linux changes what uf2fs wrote.
for d in lz4_c16k zstd_c64k_sum lzorle_c256k; do
  dd if=/dev/zero of=$d/text bs=4096 seek=10 count=7 conv=notrunc 2>/dev/null
  echo "appended by Linux" >> $d/mixed
  truncate -s 100000 $d/tail
  head -c 200000 $d/text > $d/linux_new
done
sync
cd /
umount /mnt
mount -t f2fs /dev/vda /mnt || fail "second mount"
$PAYLOAD/treeview /mnt | sort > $OUT/view2.txt
umount /mnt
"#;

#[test]
fn files_uf2fs_compresses_read_back_in_linux_and_pass_fsck() {
    assert!(
        rustix::process::geteuid().is_root(),
        "this test boots the kernel judge and keeps owners: run it as root"
    );
    let dir = scratch("compressed-writes");
    let img = dir.join("img");
    mkfs_f2fs(&img, 256, &["-O", "extra_attr,compression"]);
    let mut models: BTreeMap<String, Model> = BTreeMap::new();
    for (name, opts, how) in configs() {
        let mut fs = Fs::open_rw(&img).unwrap();
        let mut o = fs.options();
        o.compress = opts;
        fs.set_options(o);
        let d = fs
            .create_node(
                fs.root_ino(),
                name.as_bytes(),
                NewInode {
                    mode: 0o040755,
                    uid: 0,
                    gid: 0,
                    rdev: (0, 0),
                },
            )
            .unwrap();
        let mut mine = BTreeMap::new();
        if how == "chattr" {
            let flags = fs.fs_flags(d).unwrap();
            fs.set_fs_flags(d, flags | 0x4).unwrap();
            files(&fs, d, "", &mut mine, name);
        } else {
            files(&fs, d, ".txt", &mut mine, name);
            let mut m = file(&fs, d, "plain.dat");
            write(&fs, &mut m, 0, &text("plain", 200_000));
            mine.insert(format!("{name}/plain.dat"), m);
        }
        // Read back in this mount, then check each file's compression.
        for (path, m) in &mine {
            let mut got = vec![0u8; m.bytes.len() + 10];
            let n = fs.read(m.fs_ino, 0, &mut got).unwrap();
            assert_eq!(n, m.bytes.len(), "{path}: size");
            assert!(got[..n] == m.bytes[..], "{path}: bytes differ");
            let c = fs.compression(m.fs_ino).unwrap();
            if path.ends_with("plain.dat") {
                assert!(c.is_none(), "{path} is compressed");
                continue;
            }
            let c = c.unwrap_or_else(|| panic!("{path} is not compressed"));
            assert_eq!(
                (c.algorithm, c.log_cluster_size, c.checksum, c.level),
                (
                    opts.algorithm,
                    opts.log_cluster_size,
                    opts.checksum,
                    opts.level
                ),
                "{path}"
            );
            if path.contains("/text") {
                assert!(c.compr_blocks > 100, "{path} saved {}", c.compr_blocks);
            }
            if path.contains("/short_tail") {
                assert_eq!(
                    c.compr_blocks > 0,
                    opts.log_cluster_size == 2,
                    "{path}: a last cluster compressed exactly when the file reaches its last block"
                );
            }
            if path.contains("/random") {
                assert_eq!(c.compr_blocks, 0, "{path}: random data saved blocks");
            }
        }
        models.extend(mine);
        fs.unmount().unwrap();
        assert_fsck_clean(&img);
    }

    // The cleaner moves compressed blocks (each found through its summary and checked
    // against the slot that names it), then everything must still read back.
    let (ok, said, err) = try_run(
        Command::new(env!("CARGO_BIN_EXE_uf2fs"))
            .args(["gc", "--sections", "40"])
            .arg(&img),
    );
    assert!(ok, "uf2fs gc: {err}");
    let cleaned: u32 = said.split_whitespace().next().unwrap().parse().unwrap();
    assert!(cleaned > 0, "gc cleaned nothing: {said}");
    assert_fsck_clean(&img);

    // Through the FUSE mount (writeback cache on): `chattr +c` on a new directory, files
    // written there with write(2) in pieces, and compress_extension= for a name in the root.
    let mnt = dir.join("mnt");
    let m = Mount::new(
        std::path::Path::new(env!("CARGO_BIN_EXE_uf2fs")),
        &img,
        &mnt,
        &["compress_extension=log,compress_algorithm=zstd:3,compress_log_size=5"],
    );
    std::fs::create_dir(mnt.join("fuse_c")).unwrap();
    let (ok, _, err) = try_run(Command::new("chattr").arg("+c").arg(mnt.join("fuse_c")));
    assert!(ok, "chattr +c through the mount: {err}");
    let (ok, attrs, _) = try_run(Command::new("lsattr").arg("-d").arg(mnt.join("fuse_c")));
    assert!(
        ok && attrs.split_whitespace().next().unwrap().contains('c'),
        "{attrs}"
    );
    let mut through_fuse = Vec::new();
    for (name, bytes) in [
        ("fuse_c/text", text("fuse text", 2_000_000)),
        ("fuse_c/random", random(11, 400_000)),
        ("fuse_c/small", text("fuse small", 3000)),
        ("app.log", text("log", 500_000)),
        ("app.dat", text("dat", 100_000)),
    ] {
        let mut f = std::fs::File::create(mnt.join(name)).unwrap();
        for chunk in bytes.chunks(50_000) {
            std::io::Write::write_all(&mut f, chunk).unwrap();
        }
        f.sync_all().unwrap();
        through_fuse.push(name);
        models.insert(name.to_owned(), Model { fs_ino: 0, bytes });
    }
    through_fuse.push("fuse_c/optioned");
    // A file with data cannot become compressed (EINVAL, as in Linux).
    let (ok, _, _) = try_run(Command::new("chattr").arg("+c").arg(mnt.join("app.dat")));
    assert!(!ok, "chattr +c on a file with data");
    // F2FS's compression ioctls through the mount: fuse_c/text gives its saved blocks back
    // and refuses writes after; app.log gives them back and takes them again.
    let setcompr = image_helper("setcompr");
    let ask = |what: &str, name: &str| -> u64 {
        let (ok, out, err) = try_run(Command::new(&setcompr).arg(what).arg(mnt.join(name)));
        assert!(ok, "setcompr {what} {name}: {err}");
        out.trim().parse().unwrap()
    };
    let saved_text = ask("--blocks", "fuse_c/text");
    assert!(saved_text > 100, "fuse_c/text saved {saved_text}");
    assert_eq!(
        ask("--release", "fuse_c/text"),
        saved_text,
        "released blocks"
    );
    assert_eq!(ask("--blocks", "fuse_c/text"), 0);
    let w = std::fs::OpenOptions::new()
        .append(true)
        .open(mnt.join("fuse_c/text"));
    assert_eq!(
        w.map(|_| ()).map_err(|e| e.raw_os_error()),
        Err(Some(1)),
        "opening a released file for writing"
    );
    let (ok, _, _) = try_run(
        Command::new(&setcompr)
            .arg("--release")
            .arg(mnt.join("fuse_c/text")),
    );
    assert!(!ok, "released twice");
    let saved_log = ask("--blocks", "app.log");
    assert_eq!(ask("--release", "app.log"), saved_log);
    assert_eq!(ask("--reserve", "app.log"), saved_log, "reserved blocks");
    assert_eq!(ask("--blocks", "app.log"), saved_log);
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(mnt.join("app.log"))
        .unwrap();
    let more = text("more log", 40_000);
    std::io::Write::write_all(&mut f, &more).unwrap();
    f.sync_all().unwrap();
    drop(f);
    models
        .get_mut("app.log")
        .unwrap()
        .bytes
        .extend_from_slice(&more);
    // F2FS_IOC_SET_COMPRESS_OPTION on a new, empty file: its own algorithm (lzo-rle) and
    // cluster (256 KiB), which its writes then use.
    std::fs::File::create(mnt.join("fuse_c/optioned")).unwrap();
    let (ok, _, err) = try_run(
        Command::new(&setcompr)
            .arg(mnt.join("fuse_c/optioned"))
            .args(["3", "6"]),
    );
    assert!(ok, "SET_COMPRESS_OPTION: {err}");
    let bytes = text("optioned", 1_500_000);
    std::fs::write(mnt.join("fuse_c/optioned"), &bytes).unwrap();
    models.insert("fuse_c/optioned".into(), Model { fs_ino: 0, bytes });
    let (ok, _, _) = try_run(
        Command::new(&setcompr)
            .arg(mnt.join("fuse_c/optioned"))
            .args(["1", "2"]),
    );
    assert!(!ok, "SET_COMPRESS_OPTION on a file with blocks");
    // `uf2fs status` counts what this mount compressed, as Linux's compr_* counters do.
    let (ok, st, err) = try_run(
        Command::new(env!("CARGO_BIN_EXE_uf2fs"))
            .args(["status", "--json"])
            .arg(&mnt),
    );
    assert!(ok, "status: {err}");
    let st: serde_json::Value = serde_json::from_str(&st).unwrap();
    let c = |k: &str| st["compression"][k].as_u64().unwrap();
    assert!(
        c("clusters") > 10 && c("saved_blocks") > c("clusters"),
        "{st}"
    );
    assert_eq!(
        st["options"]["compress"]["extensions"],
        serde_json::json!(["log"])
    );
    assert!(c("new_inodes") >= 5, "{st}");
    m.umount();
    // compress_mode=user: writes store clusters plain; F2FS_IOC_COMPRESS_FILE compresses the
    // file, F2FS_IOC_DECOMPRESS_FILE stores it plain again.
    let m = Mount::new(
        std::path::Path::new(env!("CARGO_BIN_EXE_uf2fs")),
        &img,
        &mnt,
        &["compress_mode=user,compress_algorithm=lz4,compress_log_size=3"],
    );
    std::fs::create_dir(mnt.join("user_c")).unwrap();
    let (ok, _, err) = try_run(Command::new("chattr").arg("+c").arg(mnt.join("user_c")));
    assert!(ok, "chattr +c: {err}");
    for name in ["user_c/packed", "user_c/unpacked"] {
        let bytes = text(name, 700_000);
        std::fs::write(mnt.join(name), &bytes).unwrap();
        models.insert(name.to_owned(), Model { fs_ino: 0, bytes });
        assert_eq!(
            ask("--blocks", name),
            0,
            "{name}: compress_mode=user writes plain"
        );
        let (ok, _, err) = try_run(
            Command::new(&setcompr)
                .arg("--compress-file")
                .arg(mnt.join(name)),
        );
        assert!(ok, "compress {name}: {err}");
        assert!(ask("--blocks", name) > 100, "{name}: compressed on request");
    }
    let (ok, _, err) = try_run(
        Command::new(&setcompr)
            .arg("--decompress-file")
            .arg(mnt.join("user_c/unpacked")),
    );
    assert!(ok, "decompress: {err}");
    assert_eq!(
        ask("--blocks", "user_c/unpacked"),
        0,
        "decompressed on request"
    );
    m.umount();
    assert_fsck_clean(&img);
    let fs = Fs::open(&img).unwrap();
    for name in through_fuse {
        let ino = fs.resolve(format!("/{name}").as_bytes(), false).unwrap();
        let c = fs.compression(ino).unwrap();
        match name {
            "app.dat" => assert!(c.is_none(), "{name} is compressed"),
            "fuse_c/optioned" => {
                let c = c.unwrap();
                assert_eq!((c.algorithm, c.log_cluster_size), (Algorithm::LzoRle, 6));
                assert!(c.compr_blocks > 100, "{name}: {c:?}");
            }
            "fuse_c/text" => {
                let c = c.unwrap();
                assert!(c.released && c.compr_blocks == 0, "{name}: {c:?}");
            }
            _ => {
                let c = c.unwrap_or_else(|| panic!("{name} is not compressed"));
                assert_eq!(
                    (c.algorithm, c.level, c.log_cluster_size),
                    (Algorithm::Zstd, 3, 5),
                    "{name}"
                );
                if name.ends_with("text") || name.ends_with(".log") {
                    assert!(c.compr_blocks > 50, "{name} saved {}", c.compr_blocks);
                }
            }
        }
    }
    drop(fs);

    // A fresh mount reads every model back; uf2fs fsck agrees. What it reports of each file
    // (compression, st_blocks) is kept to compare with what Linux reports.
    let fs = Fs::open(&img).unwrap();
    let report = fs.check().unwrap();
    assert!(
        report.findings.is_empty(),
        "uf2fs fsck: {:#?}",
        report.findings
    );
    let mut ours_attr = BTreeMap::new();
    for (path, m) in &models {
        let ino = fs.resolve(format!("/{path}").as_bytes(), false).unwrap();
        let mut got = vec![0u8; m.bytes.len()];
        assert_eq!(fs.read(ino, 0, &mut got).unwrap(), m.bytes.len(), "{path}");
        assert!(got == m.bytes, "{path}: bytes differ after remount");
        let a = fs.getattr(ino).unwrap();
        let c = fs.compression(ino).unwrap().map(|c| c.compr_blocks);
        ours_attr.insert(path.clone(), (a.ino, a.nlink, a.blocks_512, c));
    }
    drop(fs);
    let out1 = dir.join("out1");
    let (ok, _, err) = try_run(
        Command::new(env!("CARGO_BIN_EXE_uf2fs"))
            .arg("extract")
            .arg(&img)
            .arg(&out1),
    );
    assert!(ok, "extract failed:\n{err}");
    let ours = view(&out1, None);

    // Linux reads what uf2fs wrote exactly, then changes it.
    let k = kernel_f2fs_args(
        &img,
        JOB,
        &dir,
        &[&image_helper("setcompr")],
        &["--no-mount"],
    );
    assert_eq!(k.exit, 0, "Linux job failed:\n{}\n{}", k.job_log, k.dmesg);
    assert!(
        k.f2fs_complaints().is_empty(),
        "dmesg: {:#?}",
        k.f2fs_complaints()
    );
    let lines = |p: &str| -> Vec<String> {
        String::from_utf8_lossy(&std::fs::read(k.out.join(p)).unwrap())
            .lines()
            .map(str::to_owned)
            .collect()
    };
    assert_same_view(&lines("view1.txt"), &ours, "Linux's view of uf2fs's writes");
    // Linux's compressed-block count (FS_IOC_GET_COMPRESS_BLOCKS) and st_blocks agree with
    // what uf2fs keeps.
    let mut compared = 0;
    for line in lines("compr.txt") {
        let (path, n) = line.rsplit_once(' ').unwrap();
        let ours = ours_attr
            .get(path)
            .unwrap_or_else(|| panic!("{path}: not ours"));
        match (n.parse::<u64>(), ours.3) {
            (Ok(n), Some(c)) => {
                assert_eq!(n, c, "{path}: i_compr_blocks (Linux, uf2fs)");
                compared += 1;
            }
            (Err(_), None) => {}
            (n, c) => panic!("{path}: Linux says {n:?}, uf2fs {c:?}"),
        }
    }
    assert!(compared > 40, "{compared} compressed files compared");
    let mut stats = 0;
    for line in lines("stat.txt") {
        let f: Vec<&str> = line.splitn(4, '\t').collect();
        let path = f[3].strip_prefix("./").unwrap_or(f[3]);
        let Some(ours) = ours_attr.get(path) else {
            continue;
        };
        assert_eq!(
            (ours.0, ours.1, ours.2),
            (
                f[0].parse::<u32>().unwrap(),
                f[1].parse::<u32>().unwrap(),
                f[2].parse::<u64>().unwrap()
            ),
            "ino, links, st_blocks of {path} (uf2fs, Linux)"
        );
        stats += 1;
    }
    assert_eq!(stats, models.len(), "files in Linux's stat list");

    // What Linux changed passes fsck.f2fs and reads back in uf2fs as Linux shows it.
    assert_fsck_clean(&img);
    let out2 = dir.join("out2");
    let (ok, _, err) = try_run(
        Command::new(env!("CARGO_BIN_EXE_uf2fs"))
            .arg("extract")
            .arg(&img)
            .arg(&out2),
    );
    assert!(ok, "extract failed:\n{err}");
    assert_same_view(
        &lines("view2.txt"),
        &view(&out2, None),
        "uf2fs's view after Linux",
    );
    let _ = std::fs::remove_dir_all(&dir);
}
