//! Every acknowledged fsync survives a crash, across the two implementations (DESIGN.md,
//! invariant 2):
//! - (a) files written through `uf2fs mount` and fsync'd, then the daemon killed with SIGKILL
//!   (no unmount, no final checkpoint): Linux 6.1 mounts the image and every fsync'd file reads
//!   back with the right sha256, dmesg has no F2FS complaint, fsck.f2fs finds the image clean
//!   after Linux's unmount;
//! - (b) files fsync'd by Linux, then `F2FS_IOC_SHUTDOWN` with no sync (no checkpoint: the
//!   kernel's roll-forward state, its warm-node chain of FSYNC/DENT-marked nodes): `uf2fs mount`
//!   recovers exactly what Linux's own recovery of the same image gives, with the right sha256,
//!   accepts writes, and leaves an image that fsck.f2fs finds clean and Linux reads the same;
//! - the fixture `linux-fsync-crash` (the crash image of (b), kept for engine tests that replay
//!   recovery without qemu) is still a crash state that Linux recovers.
//!
//! The same kinds of change on both sides (`tests/images/fsync-crash-job.sh` in the guest,
//! [`make_changes`] through the mount): a checkpointed base, then a new file in a new directory,
//! a rename, a new file in that directory, an append, a two-block overwrite, a new 12 MiB file
//! (inode, two direct nodes, an indirect node and its first direct node) and a new inline file,
//! each followed by an fsync of that file only.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    reason = "test code: a panic is the failure report"
)]

use std::fs;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use uf2fs_testkit::{
    assert_fsck_clean, assert_same_view, fixture, image_helper, kernel_f2fs_with, linux_view, run,
    scratch, try_run, view, KernelRun, Mount,
};

/// Every treeview field.
const FIELDS: &str = "type,mode,uid,gid,size,mtime,hash,target,links,xattr,rdev";

/// The guest side of the crash: `tests/images/fsync-crash-job.sh`.
const CRASH_JOB: &str = include_str!("../../../tests/images/fsync-crash-job.sh");

/// What the fsync'd files must be after recovery, in the guest: `sha256sum -c` of the list
/// made before the crash, the sorted list of regular files (to compare with the expected
/// list), and Linux's view.
const CHECK_JOB: &str = r#"
set -e
sha256sum -c $PAYLOAD/sha256.txt
find . -type f | sed 's|^\./||' | sort > $OUT/files.txt
$PAYLOAD/treeview -f type,mode,uid,gid,size,mtime,hash,target,links,xattr,rdev /mnt | sort > $OUT/view.txt
"#;

/// Regular files after the crash and recovery, on both sides: the checkpointed base that was
/// left alone, and every fsync'd file (`old/rename-me` was renamed to `renamed.txt`).
const FILES_AFTER: [&str; 8] = [
    "newdir/first.txt",
    "newdir/second.txt",
    "old/append.txt",
    "old/big.bin",
    "old/overwrite.bin",
    "old/tiny.txt",
    "old/untouched",
    "renamed.txt",
];

/// The fsync'd files (all of [`FILES_AFTER`] but the untouched one).
const FSYNCED: [&str; 7] = [
    "newdir/first.txt",
    "newdir/second.txt",
    "old/append.txt",
    "old/big.bin",
    "old/overwrite.bin",
    "old/tiny.txt",
    "renamed.txt",
];

fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_uf2fs"))
}

fn uf2fs(args: &[&std::ffi::OsStr]) -> String {
    run(Command::new(bin()).args(args))
}

/// `uf2fs info IMAGE --json`.
fn info(img: &Path) -> serde_json::Value {
    serde_json::from_str(&uf2fs(&[
        "info".as_ref(),
        img.as_os_str(),
        "--json".as_ref(),
    ]))
    .expect("info json")
}

/// The current checkpoint's flags by name (`umount`, `crc_recovery`...), from
/// `uf2fs info --json`.
fn cp_flags(img: &Path) -> Vec<String> {
    let v = info(img);
    v.pointer("/mount/checkpoint_flags")
        .and_then(serde_json::Value::as_array)
        .unwrap_or_else(|| panic!("no /mount/checkpoint_flags in uf2fs info --json:\n{v:#}"))
        .iter()
        .map(|f| f.as_str().expect("flag name").to_owned())
        .collect()
}

/// Whether the current checkpoint is a clean unmount's (CP_UMOUNT_FLAG).
fn clean_unmount(img: &Path) -> bool {
    cp_flags(img).iter().any(|f| f == "umount")
}

/// Parses `sha256sum` output (`HASH  PATH` lines) into sorted (path, hash) pairs.
fn parse_sums(text: &str) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let (hash, path) = l
                .split_once("  ")
                .unwrap_or_else(|| panic!("not a sha256sum line: {l:?}"));
            (path.to_owned(), hash.to_owned())
        })
        .collect();
    v.sort();
    v
}

/// sha256 of `files` under `dir`, by the host's sha256sum (the same format as the guest's).
fn sha256s(dir: &Path, files: &[&str]) -> Vec<(String, String)> {
    parse_sums(&run(Command::new("sha256sum").current_dir(dir).args(files)))
}

/// Sorted relative paths of the regular files under `dir`.
fn regular_files(dir: &Path) -> Vec<String> {
    fn walk(base: &Path, d: &Path, out: &mut Vec<String>) {
        for e in fs::read_dir(d).unwrap() {
            let e = e.unwrap();
            let t = e.file_type().unwrap();
            if t.is_dir() {
                walk(base, &e.path(), out);
            } else if t.is_file() {
                out.push(
                    e.path()
                        .strip_prefix(base)
                        .unwrap()
                        .to_string_lossy()
                        .into_owned(),
                );
            }
        }
    }
    let mut v = Vec::new();
    walk(dir, dir, &mut v);
    v.sort();
    v
}

/// A treeview view with the mtime of directories blanked: a directory that roll-forward adds
/// an entry to gets the time of the recovery (Linux 6.1 does this), not a time from before the
/// crash, so only files' mtimes can be compared across a recovery.
fn without_dir_mtimes(view: &[String]) -> Vec<String> {
    view.iter()
        .map(|l| {
            if !l.contains("\ttype=d\t") {
                return l.clone();
            }
            l.split('\t')
                .map(|f| {
                    if f.starts_with("mtime=") {
                        "mtime=(dir)"
                    } else {
                        f
                    }
                })
                .collect::<Vec<_>>()
                .join("\t")
        })
        .collect()
}

fn lines(p: &Path) -> Vec<String> {
    fs::read_to_string(p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Asserts a kernel run ended well and F2FS said nothing bad.
fn assert_kernel_ok(k: &KernelRun, what: &str) {
    assert_eq!(k.exit, 0, "{what}: the guest job failed:\n{}", k.job_log);
    assert!(
        k.f2fs_complaints().is_empty(),
        "{what}: F2FS complained in dmesg:\n{:#?}",
        k.f2fs_complaints()
    );
}

/// The lines of Linux's roll-forward in dmesg (`recover_inode`, `recover_dentry`,
/// `recover_data`).
fn recovery_lines(k: &KernelRun) -> Vec<&str> {
    k.dmesg
        .lines()
        .filter(|l| l.contains("F2FS-fs") && l.contains("recover_"))
        .collect()
}

/// Linux mounts `img` (recovering what it finds), checks the fsync'd files against `sums`
/// with sha256sum in the guest and returns the run, the regular files it sees and its view.
fn linux_check(
    img: &Path,
    sums: &[(String, String)],
    work: &Path,
) -> (KernelRun, Vec<String>, Vec<String>) {
    fs::create_dir_all(work).unwrap();
    let list = work.join("sha256.txt");
    let text: String = sums.iter().map(|(p, h)| format!("{h}  {p}\n")).collect();
    fs::write(&list, text).unwrap();
    let k = kernel_f2fs_with(img, CHECK_JOB, work, &[&list]);
    assert_kernel_ok(
        &k,
        "Linux mounts the crash image and checks the fsync'd files",
    );
    let files = lines(&k.out.join("files.txt"));
    let view = lines(&k.out.join("view.txt"));
    (k, files, view)
}

/// Deterministic, compressible bytes; every 4 KiB block starts with its own label (as the
/// guest job's `gen`), so a block in the wrong place shows.
fn gen(name: &str, n: usize) -> Vec<u8> {
    let mut filler = Vec::new();
    while filler.len() < 4200 {
        filler.extend_from_slice(
            b"The quick brown fox jumps over the lazy dog; 0123456789 ~!@#$%^&*() ",
        );
    }
    let mut out = Vec::with_capacity(n);
    let mut block = 0;
    while out.len() < n {
        let mut b = format!("<{name} block {block}>\n").into_bytes();
        b.extend_from_slice(&filler);
        let k = (n - out.len()).min(4096);
        out.extend_from_slice(&b[..k]);
        block += 1;
    }
    out
}

/// Writes `bytes` to a new file and fsyncs it (and nothing else).
fn create_fsynced(path: &Path, bytes: &[u8]) {
    let mut f = fs::File::create(path).unwrap();
    f.write_all(bytes).unwrap();
    f.sync_all().unwrap();
}

/// Through the mount at `mnt`: the checkpointed base (`uf2fs sync`), then the changes, each
/// fsync'd, in the order of the guest job.
fn make_changes(mnt: &Path) {
    fs::create_dir(mnt.join("old")).unwrap();
    fs::write(mnt.join("old/append.txt"), gen("append", 10000)).unwrap();
    fs::write(mnt.join("old/overwrite.bin"), gen("overwrite", 262_144)).unwrap();
    fs::write(mnt.join("old/rename-me"), gen("renamed", 5000)).unwrap();
    fs::write(mnt.join("old/untouched"), gen("untouched", 3000)).unwrap();
    uf2fs(&["sync".as_ref(), mnt.as_os_str()]);

    fs::create_dir(mnt.join("newdir")).unwrap();
    create_fsynced(&mnt.join("newdir/first.txt"), &gen("new-in-new-dir", 7000));
    fs::rename(mnt.join("old/rename-me"), mnt.join("renamed.txt")).unwrap();
    fs::File::open(mnt.join("renamed.txt"))
        .unwrap()
        .sync_all()
        .unwrap();
    create_fsynced(
        &mnt.join("newdir/second.txt"),
        &gen("second-in-new-dir", 20000),
    );
    let mut f = fs::OpenOptions::new()
        .append(true)
        .open(mnt.join("old/append.txt"))
        .unwrap();
    f.write_all(&gen("appended", 5000)).unwrap();
    f.sync_all().unwrap();
    let f = fs::OpenOptions::new()
        .write(true)
        .open(mnt.join("old/overwrite.bin"))
        .unwrap();
    f.write_all_at(&gen("overwritten", 8192), 10 * 4096)
        .unwrap();
    f.sync_all().unwrap();
    create_fsynced(&mnt.join("old/big.bin"), &gen("big", 12_583_035));
    create_fsynced(&mnt.join("old/tiny.txt"), &gen("tiny", 100));
}

/// Linux writes and fsyncs the files, then shuts F2FS down without a sync: the image is left
/// in Linux's roll-forward state. Returns the sha256 list the guest made before the shutdown.
fn linux_crash(img: &Path, work: &Path) -> Vec<(String, String)> {
    let k = kernel_f2fs_with(img, CRASH_JOB, work, &[&image_helper("shutdown")]);
    assert_kernel_ok(&k, "Linux fsync job");
    let sums = parse_sums(&fs::read_to_string(k.out.join("sha256.txt")).unwrap());
    let names: Vec<&str> = sums.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(names, FSYNCED, "the guest's sha256 list");
    // The job fsyncs a new file in a new directory (Linux checkpoints for it), then files that
    // go to the warm-node chain only: the crash image must not be a clean unmount, or this test
    // would not test recovery at all.
    assert!(
        !clean_unmount(img),
        "the crash image's checkpoint has UMOUNT ({:?}): the shutdown did sync",
        cp_flags(img)
    );
    sums
}

#[test]
fn uf2fs_fsync_then_kill_recovers_in_linux() {
    let dir = scratch("recovery-kill");
    let img = dir.join("img");
    uf2fs(&[
        "mkfs".as_ref(),
        img.as_os_str(),
        "--size".as_ref(),
        "128M".as_ref(),
    ]);
    let mnt = dir.join("mnt");
    // No periodic checkpoint: the crash must leave the fsyncs in the roll-forward chain,
    // however long this takes on a loaded machine.
    let m = Mount::new(&bin(), &img, &mnt, &["cp_interval=0"]);
    make_changes(&mnt);
    let sums = sha256s(&mnt, &FSYNCED);
    assert_eq!(regular_files(&mnt), FILES_AFTER, "files in the live mount");
    let live = without_dir_mtimes(&view(&mnt, Some(FIELDS)));
    // The crash: the daemon dies at once (no unmount, no final checkpoint), and the dead FUSE
    // mount is detached.
    m.umount_with(|d, pid| {
        run(Command::new("kill").args(["-KILL", &pid.to_string()]));
        let _ = Command::new("fusermount3").arg("-uz").arg(d).status();
        // SIGKILL is delivered asynchronously: the image's lock goes only when the process
        // has exited (a zombie holds no files). Wait for that, bounded.
        let gone = || {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .map(|s| s.split_whitespace().nth(2) == Some("Z"))
                .unwrap_or(true)
        };
        let t = std::time::Instant::now();
        while !gone() {
            assert!(
                t.elapsed().as_secs() < 30,
                "the killed daemon {pid} did not exit"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    });
    // The image's lock goes with the last reference to the daemon's open file; wait (bounded)
    // until a reader may open it, and name any process that still has it open.
    let t = std::time::Instant::now();
    loop {
        let (ok, _, err) = try_run(Command::new(bin()).arg("info").arg(&img));
        if ok {
            break;
        }
        if t.elapsed().as_secs() >= 30 {
            let holders: Vec<String> = fs::read_dir("/proc")
                .into_iter()
                .flatten()
                .flatten()
                .filter_map(|p| {
                    let fds = fs::read_dir(p.path().join("fd")).ok()?;
                    let has = fds
                        .flatten()
                        .any(|fd| fs::read_link(fd.path()).is_ok_and(|l| l == img));
                    has.then(|| {
                        fs::read_to_string(p.path().join("cmdline"))
                            .unwrap_or_default()
                            .replace('\0', " ")
                    })
                })
                .collect();
            panic!(
                "the image stays locked after the daemon was killed: {err}; open in {holders:?}"
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    eprintln!("image free {} ms after the kill", t.elapsed().as_millis());
    // fsync writes node chains: the checkpoint on disk is the one the kernel's rules called
    // for (the new directory's first file, the rename), and the other five fsyncs are only in
    // the chain, which Linux must replay.
    eprintln!("after SIGKILL: checkpoint flags {:?}", cp_flags(&img));
    assert!(
        !clean_unmount(&img),
        "the crash image has a clean unmount's checkpoint: nothing was left to recover"
    );

    let (k, files, linux) = linux_check(&img, &sums, &dir.join("k"));
    eprintln!(
        "Linux rolled forward {} lines:\n{}",
        recovery_lines(&k).len(),
        recovery_lines(&k).join("\n")
    );
    assert_eq!(files, FILES_AFTER, "the regular files Linux sees");
    let inodes = recovery_lines(&k)
        .iter()
        .filter(|l| l.contains("recover_inode"))
        .count();
    assert_eq!(
        inodes, 5,
        "Linux replays the five files fsync'd by node chain"
    );
    assert_same_view(
        &live,
        &without_dir_mtimes(&linux),
        "Linux's view of the crash image against uf2fs's live view before the kill",
    );
    assert_fsck_clean(&img);
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn linux_fsync_then_shutdown_recovers_in_uf2fs() {
    let dir = scratch("recovery-shutdown");
    let img = dir.join("img");
    fs::File::create(&img).unwrap().set_len(128 << 20).unwrap();
    run(Command::new("mkfs.f2fs").args(["-f", "-q"]).arg(&img));
    let sums = linux_crash(&img, &dir.join("k-crash"));

    // What Linux itself recovers from this crash image: the reference.
    let reference = dir.join("reference.img");
    fs::copy(&img, &reference).unwrap();
    let (k, files, linux_recovered) = linux_check(&reference, &sums, &dir.join("k-ref"));
    assert!(
        !recovery_lines(&k).is_empty(),
        "Linux did not roll forward its own crash image:\n{}",
        k.dmesg
    );
    assert_eq!(files, FILES_AFTER, "the regular files Linux recovers");

    // uf2fs recovers the crash image at mount, read-write.
    let mnt = dir.join("mnt");
    let m = Mount::new(&bin(), &img, &mnt, &[]);
    let st = run(Command::new(bin()).arg("status").arg("--json").arg(&mnt));
    let st: serde_json::Value = serde_json::from_str(&st).unwrap();
    assert!(
        st.pointer("/read_only_reason").is_none_or(|r| r.is_null()),
        "uf2fs mounted the crash image read-only: {st:#}"
    );
    assert_eq!(regular_files(&mnt), FILES_AFTER, "the files uf2fs recovers");
    assert_eq!(sha256s(&mnt, &FSYNCED), sums, "the fsync'd files in uf2fs");
    assert!(
        !mnt.join("old/rename-me").exists(),
        "the renamed file is back under its old name"
    );
    assert_same_view(
        &without_dir_mtimes(&linux_recovered),
        &without_dir_mtimes(&view(&mnt, Some(FIELDS))),
        "uf2fs's recovery against Linux's recovery of the same crash image",
    );
    // A recovered volume takes writes like any other.
    create_fsynced(&mnt.join("newdir/after-recovery"), &gen("after", 50_000));
    fs::rename(mnt.join("old/tiny.txt"), mnt.join("tiny-moved.txt")).unwrap();
    let live = view(&mnt, Some(FIELDS));
    m.umount();
    assert_fsck_clean(&img);
    uf2fs(&["fsck".as_ref(), img.as_os_str()]);
    assert!(
        clean_unmount(&img),
        "uf2fs's unmount left no UMOUNT checkpoint: {:?}",
        cp_flags(&img)
    );
    assert_same_view(
        &live,
        &linux_view(&img, &dir.join("k-after")),
        "Linux's view of uf2fs's recovered image",
    );
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn linux_fsync_crash_fixture_is_a_crash_state_linux_recovers() {
    let dir = scratch("recovery-fixture");
    let img = fixture("linux-fsync-crash", &dir);
    assert!(
        !clean_unmount(&img),
        "the fixture's checkpoint has UMOUNT ({:?}): it is no crash image",
        cp_flags(&img)
    );
    let sums = parse_sums(
        &fs::read_to_string(
            uf2fs_testkit::root().join("tests/fixtures/linux-fsync-crash.sha256.txt"),
        )
        .unwrap(),
    );
    let names: Vec<&str> = sums.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(names, FSYNCED, "the fixture's sha256 list");
    let (k, files, _) = linux_check(&img, &sums, &dir.join("k"));
    let rec = recovery_lines(&k);
    // Five files went to the warm-node chain (the two others were checkpointed by Linux's own
    // fsync rules); each has a recover_inode line.
    let inodes = rec.iter().filter(|l| l.contains("recover_inode")).count();
    assert_eq!(
        inodes,
        5,
        "Linux's roll-forward of the fixture:\n{}",
        rec.join("\n")
    );
    assert_eq!(files, FILES_AFTER, "the regular files Linux recovers");
    assert_fsck_clean(&img);
    let _ = fs::remove_dir_all(&dir);
}
