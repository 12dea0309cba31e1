//! A volume on two devices (`mkfs.f2fs -c`), with Linux 6.1 as the judge and fsck.f2fs after
//! every step:
//! Linux writes (a file larger than what is left of the first device's main area after its
//! log start, so that it spans both devices, and many small files) → uf2fs shows exactly
//! Linux's tree → uf2fs imports a seeded tree (naming the second device with --device),
//! cleans sections with `uf2fs gc`, and writes a file through its FUSE mount (`-o device=`),
//! each step landing blocks on the second device → Linux shows exactly uf2fs's tree.
//!
//! Linux, fsck.f2fs and uf2fs (by default) open the other devices at the paths the superblock
//! recorded when mkfs.f2fs made the volume. The volume is made in a short directory under
//! /tmp with its two images there; the guest makes the same paths as symbolic links to its
//! disks (the first image is /dev/vda, the second /dev/vdc), so the recorded paths are right
//! on both sides.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    reason = "test code: a panic is the failure report"
)]

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;
use uf2fs_testkit::{
    assert_fsck_clean as fsck_f2fs_clean, assert_same_view, gen_tree, kernel_f2fs_args, run,
    try_run, view, Mount, TreeSpec,
};

/// Every treeview field.
const FIELDS: &str = "type,mode,uid,gid,size,mtime,hash,target,links,xattr,rdev";

fn uf2fs(args: &[&OsStr]) -> String {
    run(Command::new(env!("CARGO_BIN_EXE_uf2fs")).args(args))
}

/// A fresh directory with a short path: the recorded device paths must fit in 63 bytes.
fn short_dir(name: &str) -> PathBuf {
    let d = PathBuf::from(format!("/tmp/multidev-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Two sparse image files of `mib_a` and `mib_b` MiB made into one volume by mkfs.f2fs -c,
/// with the paths given as absolute ones (so they are recorded as such).
fn make_volume(dir: &Path, mib_a: u64, mib_b: u64, features: &str) -> (PathBuf, PathBuf) {
    let (a, b) = (dir.join("a.img"), dir.join("b.img"));
    for (p, mib) in [(&a, mib_a), (&b, mib_b)] {
        let f = std::fs::File::create(p).unwrap();
        f.set_len(mib << 20).unwrap();
    }
    let mut mk = Command::new("mkfs.f2fs");
    mk.args(["-f", "-q"]);
    if !features.is_empty() {
        mk.args(["-O", features]);
    }
    run(mk.arg("-c").arg(&b).arg(&a));
    (a, b)
}

fn extract_view(img: &Path, out: &Path) -> Vec<String> {
    let _ = std::fs::remove_dir_all(out);
    uf2fs(&["extract".as_ref(), img.as_os_str(), out.as_os_str()]);
    view(out, Some(FIELDS))
}

/// fsck.f2fs (which opens device 1 at its recorded path, and wants device 0 named by its
/// recorded path too) and `uf2fs fsck` both find the volume clean.
fn assert_fsck_clean(a: &Path) {
    fsck_f2fs_clean(a);
    run(Command::new(env!("CARGO_BIN_EXE_uf2fs")).arg("fsck").arg(a));
}

/// Data blocks of the file at `path` on device 0 and on device 1, through the engine.
fn blocks_per_device(a: &Path, path: &str) -> (u64, u64) {
    let fs = uf2fs_engine::Fs::open(a).unwrap();
    let boundary = fs.superblock().devices()[1].start;
    let ino = fs.resolve(path.as_bytes(), false).unwrap();
    let (mut first, mut second) = (0u64, 0u64);
    fs.extents(ino, &mut |e| {
        for i in 0..e.len {
            if u64::from(e.addr) + i < boundary {
                first += 1;
            } else {
                second += 1;
            }
        }
        Ok(())
    })
    .unwrap();
    (first, second)
}

/// Data blocks of every regular file below `dir` (each inode once) on device 1.
fn blocks_on_second_device(a: &Path, dir: &str) -> u64 {
    let fs = uf2fs_engine::Fs::open(a).unwrap();
    let boundary = fs.superblock().devices()[1].start;
    let out = uf2fs(&["ls".as_ref(), "-R".as_ref(), a.as_os_str(), dir.as_ref()]);
    let mut seen = std::collections::HashSet::new();
    let mut n = 0;
    for line in out.lines() {
        let Ok(ino) = fs.resolve(format!("{dir}/{line}").as_bytes(), false) else {
            continue;
        };
        if !seen.insert(ino) {
            continue;
        }
        if fs.getattr(ino).unwrap().file_type != uf2fs_format::inode::FileType::Regular {
            continue;
        }
        let _ = fs.extents(ino, &mut |e| {
            for i in 0..e.len {
                if u64::from(e.addr) + i >= boundary {
                    n += 1;
                }
            }
            Ok(())
        });
    }
    n
}

/// The job prologue: the recorded paths as links to the guest's disks, then the mount.
fn guest_mount(a: &Path, b: &Path) -> String {
    format!(
        "set -e\nmkdir -p {dir}\nln -sf /dev/vda {a}\nln -sf /dev/vdc {b}\nmount -t f2fs /dev/vda /mnt\ncd /mnt\n",
        dir = a.parent().unwrap().display(),
        a = a.display(),
        b = b.display()
    )
}

const VIEW_AND_UNMOUNT: &str = "sync
$PAYLOAD/treeview -f type,mode,uid,gid,size,mtime,hash,target,links,xattr,rdev /mnt | sort > $OUT/view.txt
cd /
umount /mnt
";

/// Runs `job` (after [`guest_mount`]) under Linux with both disks; returns its view.
fn linux_run(a: &Path, b: &Path, job: &str, work: &Path, step: &str) -> Vec<String> {
    let script = format!("{}{job}{VIEW_AND_UNMOUNT}", guest_mount(a, b));
    let k = kernel_f2fs_args(
        a,
        &script,
        work,
        &[],
        &["--no-mount", "--extra-image", b.to_str().unwrap()],
    );
    assert_eq!(k.exit, 0, "{step}: Linux job: {}\n{}", k.job_log, k.dmesg);
    assert!(
        k.dmesg.contains("Mount Device [ 1]"),
        "{step}: Linux mounted both devices:\n{}",
        k.dmesg
    );
    assert!(
        k.f2fs_complaints().is_empty(),
        "{step}: {:#?}",
        k.f2fs_complaints()
    );
    std::fs::read_to_string(k.out.join("view.txt"))
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

const LINUX_FIRST: &str = r#"
mkdir -p linux/many linux/d1/d2
i=0; while [ $i -lt 300 ]; do echo "linux $i" > linux/many/f$i; i=$((i+1)); done
dd if=/dev/urandom of=linux/big bs=1M count=40 2>/dev/null
ln -s ../big linux/d1/link
ln linux/many/f7 linux/d1/d2/hard
echo tail > linux/d1/d2/small
"#;

#[test]
fn two_device_volume_round_trips_with_linux() {
    assert!(
        rustix::process::geteuid().is_root(),
        "this test keeps owners: run it as root"
    );
    let dir = short_dir("rt");
    // Device 0: 79 segments (7 of metadata, then main segments 0..71); device 1: 64.
    let (a, b) = make_volume(&dir, 160, 128, "extra_attr,inode_checksum,sb_checksum");
    let work = dir.join("work");

    // 1. Linux writes; its 40 MiB file (from warm data segment 67 on) spans both devices; uf2fs reads what Linux shows.
    let linux = linux_run(&a, &b, LINUX_FIRST, &work.join("k1"), "Linux writes");
    assert_fsck_clean(&a);
    let (on0, on1) = blocks_per_device(&a, "/linux/big");
    assert_eq!(on0 + on1, 10_240, "the whole file is mapped");
    assert!(
        on0 > 0 && on1 > 0,
        "Linux's big file spans both devices ({on0} + {on1} blocks)"
    );
    assert_same_view(
        &linux,
        &extract_view(&a, &dir.join("x1")),
        "uf2fs reads what Linux wrote on two devices",
    );

    // 2. uf2fs writes: an import naming the second device, a cleaning pass, a FUSE mount.
    let src = dir.join("src");
    gen_tree(
        &src,
        15,
        TreeSpec {
            files: 120,
            max_file: 5_000_000,
            big_dir: 800,
            depth: 5,
        },
    );
    uf2fs(&[
        "import".as_ref(),
        "--device".as_ref(),
        b.as_os_str(),
        a.as_os_str(),
        src.as_os_str(),
        "/u".as_ref(),
    ]);
    assert_fsck_clean(&a);
    let imported = blocks_on_second_device(&a, "/u");
    assert!(imported > 0, "uf2fs's import put data blocks on device 1");
    let removed = run(Command::new(env!("CARGO_BIN_EXE_uf2fs"))
        .args(["rm", "-r"])
        .arg(&a)
        .arg("/linux/many"));
    assert!(removed.is_empty(), "{removed}");
    let cleaned = uf2fs(&[
        "gc".as_ref(),
        a.as_os_str(),
        "--sections".as_ref(),
        "4".as_ref(),
    ]);
    let sections: u32 = cleaned
        .strip_suffix(" sections cleaned\n")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("uf2fs gc said {cleaned:?}"));
    assert!(sections > 0, "uf2fs gc cleaned a section");
    assert_fsck_clean(&a);

    let mnt = dir.join("mnt");
    let device_opt = format!("device={}", b.display());
    let m = Mount::new(
        Path::new(env!("CARGO_BIN_EXE_uf2fs")),
        &a,
        &mnt,
        &[device_opt.as_str()],
    );
    let data: Vec<u8> = (0..24u32 << 20).map(|i| (i % 251) as u8).collect();
    std::fs::create_dir(mnt.join("fuse")).unwrap();
    {
        // Written and synced explicitly: an error at writeback is not lost in a drop.
        use std::io::Write;
        let mut f = std::fs::File::create(mnt.join("fuse/written")).unwrap();
        f.write_all(&data).unwrap();
        f.sync_all().unwrap();
    }
    m.umount();
    assert_fsck_clean(&a);
    let (f0, f1) = blocks_per_device(&a, "/fuse/written");
    assert_eq!(f0 + f1, 6_144);
    assert!(
        f1 > 0,
        "the mount put data on device 1 ({f0} + {f1} blocks)"
    );
    let fs = uf2fs_engine::Fs::open(&a).unwrap();
    let ino = fs.resolve(b"/fuse/written", false).unwrap();
    let mut back = vec![0u8; data.len()];
    assert_eq!(fs.read(ino, 0, &mut back).unwrap(), data.len());
    assert!(back == data, "the mount's file reads back");
    drop(fs);

    // 3. Linux reads exactly what uf2fs shows.
    let ours = extract_view(&a, &dir.join("x2"));
    assert_same_view(
        &ours,
        &linux_run(&a, &b, "", &work.join("k2"), "Linux reads"),
        "Linux reads uf2fs's writes on two devices",
    );
    eprintln!(
        "{} entries; Linux's big file {on0}+{on1} blocks; import {imported} blocks on device 1; {sections} sections cleaned; mount file {f0}+{f1}",
        ours.len()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// What uf2fs says when a device is missing, short, one too many, or its table is damaged.
#[test]
fn missing_short_and_bad_devices_give_clear_errors() {
    let dir = short_dir("errors");
    let (a, b) = make_volume(&dir, 64, 32, "");
    let bin = env!("CARGO_BIN_EXE_uf2fs");
    // What a failing command said (fsck reports on stdout).
    let fails = |args: &[&OsStr]| -> String {
        let (ok, out, err) = try_run(Command::new(bin).args(args));
        assert!(!ok, "{args:?} succeeded: {out}");
        out + &err
    };
    // The recorded paths are there: no --device needed.
    uf2fs(&["ls".as_ref(), a.as_os_str(), "/".as_ref()]);

    // Missing: the recorded path is named, and how to give another.
    let moved = dir.join("moved.img");
    std::fs::rename(&b, &moved).unwrap();
    for args in [
        vec!["ls".as_ref(), a.as_os_str(), "/".as_ref()],
        vec!["fsck".as_ref(), a.as_os_str()],
        vec!["mkdir".as_ref(), a.as_os_str(), "/d".as_ref()],
    ] {
        let out_or_err = fails(&args);
        assert!(
            out_or_err.contains(&format!("recorded in the superblock as {}", b.display())),
            "{out_or_err}"
        );
        assert!(out_or_err.contains("--device PATH"), "{out_or_err}");
    }
    // Named where it is now, it works; the mount's option too.
    uf2fs(&[
        "mkdir".as_ref(),
        "--device".as_ref(),
        moved.as_os_str(),
        a.as_os_str(),
        "/d".as_ref(),
    ]);
    let mnt = dir.join("mnt");
    std::fs::create_dir_all(&mnt).unwrap();
    let err = fails(&["mount".as_ref(), a.as_os_str(), mnt.as_os_str()]);
    assert!(err.contains("is not there"), "{err}");
    let m = Mount::new(
        Path::new(bin),
        &a,
        &mnt,
        &[&format!("device={}", moved.display())],
    );
    assert!(mnt.join("d").is_dir());
    m.umount();
    // The global --device reaches the daemon too; both ways at once are refused.
    uf2fs(&[
        "mount".as_ref(),
        "--device".as_ref(),
        moved.as_os_str(),
        a.as_os_str(),
        mnt.as_os_str(),
    ]);
    std::fs::write(mnt.join("d/f"), b"through --device").unwrap();
    let st = uf2fs(&["status".as_ref(), "--json".as_ref(), mnt.as_os_str()]);
    let pid = serde_json::from_str::<serde_json::Value>(&st).unwrap()["pid"]
        .as_u64()
        .unwrap();
    uf2fs(&["umount".as_ref(), mnt.as_os_str()]);
    // The daemon lets go of the images when it exits.
    let stat = PathBuf::from(format!("/proc/{pid}/stat"));
    for _ in 0..6000 {
        let s = std::fs::read_to_string(&stat).unwrap_or_default();
        if s.is_empty() || s.contains(") Z ") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert_eq!(
        uf2fs(&[
            "cat".as_ref(),
            "--device".as_ref(),
            moved.as_os_str(),
            a.as_os_str(),
            "/d/f".as_ref(),
        ]),
        "through --device"
    );
    let both = format!("device={}", moved.display());
    let err = fails(&[
        "mount".as_ref(),
        "--device".as_ref(),
        moved.as_os_str(),
        "-o".as_ref(),
        both.as_ref(),
        a.as_os_str(),
        mnt.as_os_str(),
    ]);
    assert!(err.contains("not both"), "{err}");

    // Short: the device and both sizes are named.
    let short = dir.join("short.img");
    std::fs::copy(&moved, &short).unwrap();
    std::fs::File::options()
        .write(true)
        .open(&short)
        .unwrap()
        .set_len(20 << 20)
        .unwrap();
    let err = fails(&[
        "ls".as_ref(),
        "--device".as_ref(),
        short.as_os_str(),
        a.as_os_str(),
    ]);
    assert!(
        err.contains(&format!("device 1 ({}) has 5120 blocks", short.display())),
        "{err}"
    );
    assert!(err.contains("keeps 8192 blocks"), "{err}");

    // One device too many.
    let err = fails(&[
        "ls".as_ref(),
        "--device".as_ref(),
        moved.as_os_str(),
        "--device".as_ref(),
        short.as_os_str(),
        a.as_os_str(),
    ]);
    assert!(
        err.contains("a volume of 2 devices, but 2 more were named"),
        "{err}"
    );

    // Damaged tables, in both superblock copies (no sb_checksum on this volume).
    std::fs::rename(&moved, &b).unwrap();
    let pristine = std::fs::read(&a).unwrap();
    let patched = |edit: &dyn Fn(&mut [u8])| {
        let mut img = pristine.clone();
        for copy in 0..2 {
            edit(&mut img[copy * 4096 + 1024..copy * 4096 + 4096]);
        }
        std::fs::write(&a, &img).unwrap();
        fails(&["ls".as_ref(), a.as_os_str()])
    };
    let dev = |i: usize| 2201 + 68 * i;
    let err = patched(&|sb| sb[dev(1) + 64..dev(1) + 68].copy_from_slice(&15u32.to_le_bytes()));
    assert!(
        err.contains("device table entry 1: the devices' segments add up to 46, the volume has 47"),
        "{err}"
    );
    let err = patched(&|sb| sb[dev(1)..dev(1) + 64].fill(b'x'));
    assert!(
        err.contains("device table entry 1: the path has no NUL"),
        "{err}"
    );
    let err = patched(&|sb| {
        let entry: Vec<u8> = sb[dev(1)..dev(2)].to_vec();
        sb[dev(3)..dev(4)].copy_from_slice(&entry);
        sb[dev(1)] = 0;
    });
    assert!(
        err.contains("device table entry 3: a device listed after the empty entry 1"),
        "{err}"
    );
    std::fs::write(&a, &pristine).unwrap();
    uf2fs(&["ls".as_ref(), a.as_os_str()]);

    // uf2fs mkfs --device: no --size, no data overwritten without -f, paths that fit.
    let mkfs = |more: &[&OsStr]| {
        let mut args: Vec<&OsStr> = vec!["mkfs".as_ref(), a.as_os_str()];
        args.extend_from_slice(more);
        fails(&args)
    };
    let err = mkfs(&[
        "-f".as_ref(),
        "--device".as_ref(),
        b.as_os_str(),
        "--size".as_ref(),
        "64M".as_ref(),
    ]);
    assert!(err.contains("--size and --sparse cannot be given"), "{err}");
    let err = mkfs(&["--device".as_ref(), b.as_os_str()]);
    assert!(err.contains("is not empty: use --force"), "{err}");
    let long = dir.join("l".repeat(60));
    std::fs::File::create(&long)
        .unwrap()
        .set_len(8 << 20)
        .unwrap();
    let err = mkfs(&["-f".as_ref(), "--device".as_ref(), long.as_os_str()]);
    assert!(err.contains("to be recorded in the superblock"), "{err}");
    assert!(
        std::fs::read(&a).unwrap() == pristine,
        "refused mkfs runs leave the volume alone"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `uf2fs mkfs IMAGE --device B` makes the superblock mkfs.f2fs -c makes (but for the uuid,
/// version strings and checksum; the device table parsed equal, since mkfs.f2fs leaves bytes
/// of its arguments after each path's NUL), fsck.f2fs finds it clean, and Linux mounts it,
/// writes, and shows what uf2fs then reads. With two segments per section and an odd sum of
/// segments, mkfs.f2fs rounds the volume down but not the table, and Linux 6.1 refuses its
/// volume ("Segment count mismatch"); uf2fs records the last device one segment shorter,
/// and Linux mounts that.
#[test]
fn uf2fs_mkfs_makes_two_device_volumes_that_linux_mounts() {
    let dir = short_dir("mkfs");
    let features = "extra_attr,inode_checksum,sb_checksum";
    let (a, b) = make_volume(&dir, 160, 128, features);
    let block0 = |p: &Path| std::fs::read(p).unwrap()[..4096].to_vec();
    let theirs = block0(&a);
    uf2fs(&[
        "mkfs".as_ref(),
        "-f".as_ref(),
        "-O".as_ref(),
        features.as_ref(),
        a.as_os_str(),
        "--device".as_ref(),
        b.as_os_str(),
    ]);
    let ours = block0(&a);
    let parse = |b: &[u8]| {
        uf2fs_format::superblock::Superblock::parse(b, 0)
            .unwrap()
            .devices()
            .to_vec()
    };
    assert_eq!(parse(&ours), parse(&theirs), "the device tables");
    assert_eq!(parse(&ours).len(), 2);
    let masked = |b: &[u8]| {
        let mut v = b.to_vec();
        for (s, e) in [(108, 124), (1668, 2180), (2201, 2745), (3068, 3072)] {
            v[1024 + s..1024 + e].fill(0);
        }
        v
    };
    assert!(
        masked(&ours) == masked(&theirs),
        "uf2fs mkfs --device writes mkfs.f2fs -c's superblock"
    );
    assert_fsck_clean(&a);
    let job = "mkdir d\ndd if=/dev/urandom of=d/big bs=1M count=30 2>/dev/null\necho hi > d/x\n";
    let linux = linux_run(&a, &b, job, &dir.join("k1"), "Linux on uf2fs's volume");
    assert_fsck_clean(&a);
    assert_same_view(
        &linux,
        &extract_view(&a, &dir.join("x1")),
        "uf2fs reads what Linux wrote on the volume uf2fs made",
    );

    // Two segments per section, 78 + 65 segments: the volume has 142.
    std::fs::File::options()
        .write(true)
        .open(&b)
        .unwrap()
        .set_len(130 << 20)
        .unwrap();
    run(Command::new("mkfs.f2fs")
        .args(["-f", "-q", "-s", "2", "-c"])
        .arg(&b)
        .arg(&a));
    let k = kernel_f2fs_args(
        &a,
        &format!("{}echo mounted\n", guest_mount(&a, &b)),
        &dir.join("k2"),
        &[],
        &["--no-mount", "--extra-image", b.to_str().unwrap()],
    );
    assert_ne!(
        k.exit, 0,
        "Linux 6.1 mounted mkfs.f2fs's odd volume:\n{}",
        k.job_log
    );
    assert!(
        k.dmesg.contains("mismatch with total segments"),
        "{}",
        k.dmesg
    );
    // uf2fs still reads it, as fsck.f2fs does.
    uf2fs(&["ls".as_ref(), a.as_os_str()]);
    uf2fs(&[
        "mkfs".as_ref(),
        "-f".as_ref(),
        "-s".as_ref(),
        "2".as_ref(),
        a.as_os_str(),
        "--device".as_ref(),
        b.as_os_str(),
    ]);
    let devs = parse(&block0(&a));
    assert_eq!(
        devs.iter().map(|d| d.segments).collect::<Vec<_>>(),
        [78, 64]
    );
    assert_fsck_clean(&a);
    let linux = linux_run(&a, &b, "echo odd > f\n", &dir.join("k3"), "Linux, -s 2");
    assert_same_view(
        &linux,
        &extract_view(&a, &dir.join("x3")),
        "uf2fs reads Linux's write on the -s 2 volume uf2fs made",
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Three devices (mkfs.f2fs -c twice): uf2fs imports a tree whose data runs from device 1
/// into device 2, fsck.f2fs finds the volume clean, and uf2fs and Linux (disks /dev/vda,
/// /dev/vdc, /dev/vdd) read back exactly the source tree.
#[test]
fn three_device_volume_takes_an_import_linux_reads() {
    assert!(
        rustix::process::geteuid().is_root(),
        "this test keeps owners: run it as root"
    );
    let dir = short_dir("three");
    let paths: Vec<PathBuf> = ["a.img", "b.img", "c.img"]
        .iter()
        .map(|n| dir.join(n))
        .collect();
    for (p, mib) in paths.iter().zip([64u64, 32, 32]) {
        std::fs::File::create(p)
            .unwrap()
            .set_len(mib << 20)
            .unwrap();
    }
    run(Command::new("mkfs.f2fs")
        .args(["-f", "-q", "-c"])
        .arg(&paths[1])
        .arg("-c")
        .arg(&paths[2])
        .arg(&paths[0]));
    let a = &paths[0];
    let fs = uf2fs_engine::Fs::open(a).unwrap();
    let ranges: Vec<(u64, u64)> = fs
        .superblock()
        .devices()
        .iter()
        .map(|d| (d.start, d.end))
        .collect();
    drop(fs);
    assert_eq!(ranges, [(0, 16384), (16384, 24576), (24576, 32768)]);
    let src = dir.join("src");
    gen_tree(
        &src,
        33,
        TreeSpec {
            files: 40,
            max_file: 1_000_000,
            big_dir: 200,
            depth: 4,
        },
    );
    std::fs::write(
        src.join("big"),
        (0..40u32 << 20)
            .map(|i| (i % 253) as u8)
            .collect::<Vec<u8>>(),
    )
    .unwrap();
    uf2fs(&["import".as_ref(), a.as_os_str(), src.as_os_str()]);
    assert_fsck_clean(a);
    // Data blocks of every file, by device.
    let fs = uf2fs_engine::Fs::open(a).unwrap();
    let mut per_device = [0u64; 3];
    let listing = uf2fs(&["ls".as_ref(), "-R".as_ref(), a.as_os_str()]);
    let mut seen = std::collections::HashSet::new();
    for line in listing.lines() {
        let ino = fs.resolve(format!("/{line}").as_bytes(), false).unwrap();
        if !seen.insert(ino)
            || fs.getattr(ino).unwrap().file_type != uf2fs_format::inode::FileType::Regular
        {
            continue;
        }
        fs.extents(ino, &mut |e| {
            for i in 0..e.len {
                let addr = u64::from(e.addr) + i;
                let d = ranges
                    .iter()
                    .position(|r| r.0 <= addr && addr < r.1)
                    .unwrap();
                per_device[d] += 1;
            }
            Ok(())
        })
        .unwrap();
    }
    drop(fs);
    // The warm data log starts on device 1 (main segment 27 of 56) and runs on into device 2;
    // device 0 holds the metadata, the nodes and the directories' blocks.
    assert!(
        per_device[1] > 0 && per_device[2] > 0,
        "the import put file data on devices 1 and 2: {per_device:?}"
    );
    let top = |v: Vec<String>| -> Vec<String> {
        v.into_iter().filter(|l| !l.starts_with(".\t")).collect()
    };
    let ours = top(extract_view(a, &dir.join("x")));
    assert_same_view(
        &top(view(&src, Some(FIELDS))),
        &ours,
        "uf2fs reads its import",
    );
    let job = format!(
        "set -e\nmkdir -p {d}\nln -s /dev/vda {a}\nln -s /dev/vdc {b}\nln -s /dev/vdd {c}\nmount -t f2fs /dev/vda /mnt\n{VIEW_AND_UNMOUNT}",
        d = dir.display(),
        a = paths[0].display(),
        b = paths[1].display(),
        c = paths[2].display()
    );
    let k = kernel_f2fs_args(
        a,
        &job,
        &dir.join("k"),
        &[],
        &[
            "--no-mount",
            "--extra-image",
            paths[1].to_str().unwrap(),
            "--extra-image",
            paths[2].to_str().unwrap(),
        ],
    );
    assert_eq!(k.exit, 0, "Linux job: {}\n{}", k.job_log, k.dmesg);
    assert!(k.dmesg.contains("Mount Device [ 2]"), "{}", k.dmesg);
    assert!(k.f2fs_complaints().is_empty(), "{:#?}", k.f2fs_complaints());
    let linux: Vec<String> = std::fs::read_to_string(k.out.join("view.txt"))
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    assert_same_view(
        &ours,
        &top(linux),
        "Linux reads uf2fs's import on three devices",
    );
    eprintln!("data blocks per device: {per_device:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
