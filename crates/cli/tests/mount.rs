//! `uf2fs mount` end to end: a tree copied in through the real FUSE mount reads back the same
//! live, after a remount, in `uf2fs extract`, and in Linux; every way of unmounting leaves an
//! image that fsck.f2fs finds clean; a second mount, bad options and unwritable images are
//! refused or served read-only as documented.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    reason = "test code: a panic is the failure report"
)]

use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use uf2fs_testkit::{
    add_special_files, assert_fsck_clean, assert_same_view, gen_tree, linux_view, run, scratch,
    try_run, view, Mount, TreeSpec,
};

const FIELDS: &str = "type,mode,uid,gid,size,mtime,hash,target,links,xattr,rdev";

fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_uf2fs"))
}

fn uf2fs(args: &[&std::ffi::OsStr]) -> String {
    run(Command::new(bin()).args(args))
}

fn status(mnt: &Path) -> serde_json::Value {
    uf2fs_testkit::status_json(&bin(), mnt)
}

/// Runs `sh -c WHAT sh FILE` as nobody (uid and gid 65534, no other groups).
fn as_nobody(what: &str, f: &Path) {
    run(Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "sh",
            "-c",
        ])
        .arg(what)
        .arg("sh")
        .arg(f));
}

fn mkfs(img: &Path, size: &str) {
    uf2fs(&[
        "mkfs".as_ref(),
        img.as_os_str(),
        "--size".as_ref(),
        size.as_ref(),
    ]);
}

fn fsck_both(img: &Path) {
    assert_fsck_clean(img);
    uf2fs(&["fsck".as_ref(), img.as_os_str()]);
}

#[test]
fn tree_copied_in_reads_back_live_after_remount_and_in_linux() {
    let dir = scratch("mount-tree");
    let img = dir.join("img");
    mkfs(&img, "768M");
    let src = dir.join("src");
    let st = gen_tree(
        &src,
        41,
        TreeSpec {
            files: 200,
            max_file: 8_000_000,
            big_dir: 2500,
            depth: 8,
        },
    );
    // What gen_tree does not make: a sparse file, a fifo, a device node, xattrs.
    add_special_files(&src);
    rustix::fs::setxattr(
        src.join("sparse").as_path(),
        "user.note",
        b"kept through FUSE",
        rustix::fs::XattrFlags::empty(),
    )
    .unwrap();
    let want = view(&src, Some(FIELDS));
    let mnt = dir.join("mnt");
    let m = Mount::new(&bin(), &img, &mnt, &[]);
    run(Command::new("cp").arg("-a").arg(&src).arg(mnt.join("copy")));
    assert_same_view(&want, &view(&mnt.join("copy"), Some(FIELDS)), "live mount");
    m.umount();
    fsck_both(&img);

    let m = Mount::new(&bin(), &img, &mnt, &[]);
    assert_same_view(
        &want,
        &view(&mnt.join("copy"), Some(FIELDS)),
        "after remount",
    );
    // Change it through the mount: rename, delete, append, new hard link.
    std::fs::rename(mnt.join("copy/bigdir"), mnt.join("moved-bigdir")).unwrap();
    std::fs::remove_dir_all(mnt.join("copy/level0/level1")).unwrap();
    std::fs::write(mnt.join("copy/new-file"), vec![7u8; 100_000]).unwrap();
    std::fs::hard_link(mnt.join("copy/new-file"), mnt.join("new-link")).unwrap();
    let live = view(&mnt, Some(FIELDS));
    m.umount();
    fsck_both(&img);

    let x = dir.join("x");
    uf2fs(&["extract".as_ref(), img.as_os_str(), x.as_os_str()]);
    assert_same_view(
        &live,
        &view(&x, Some(FIELDS)),
        "uf2fs extract after the changes",
    );
    let linux = linux_view(&img, &dir.join("k"));
    assert_same_view(&live, &linux, "Linux reads the mount's image");
    eprintln!(
        "{} entries, {} bytes copied in and read back four ways",
        st.entries, st.bytes
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Unmounts the mount at the path, served by the daemon of the pid.
type Unmounter = Box<dyn Fn(&Path, u32)>;

#[test]
fn every_way_of_unmounting_leaves_a_clean_image() {
    let dir = scratch("mount-umount");
    let img = dir.join("img");
    mkfs(&img, "256M");
    let mnt = dir.join("mnt");
    let ways: [(&str, Unmounter); 4] = [
        (
            "fusermount3 -u",
            Box::new(|d: &Path, _| {
                run(Command::new("fusermount3").arg("-u").arg(d));
            }),
        ),
        (
            "umount",
            Box::new(|d: &Path, _| {
                run(Command::new("umount").arg(d));
            }),
        ),
        (
            "SIGTERM",
            Box::new(|_: &Path, pid| {
                run(Command::new("kill").args(["-TERM", &pid.to_string()]));
            }),
        ),
        (
            "SIGINT",
            Box::new(|_: &Path, pid| {
                run(Command::new("kill").args(["-INT", &pid.to_string()]));
            }),
        ),
    ];
    for (i, (name, how)) in ways.into_iter().enumerate() {
        let m = Mount::new(&bin(), &img, &mnt, &[]);
        let data: Vec<u8> = (0..300_000u32).map(|x| (x * 7 + i as u32) as u8).collect();
        std::fs::write(mnt.join(format!("file-{i}")), &data).unwrap();
        std::fs::create_dir(mnt.join(format!("dir-{i}"))).unwrap();
        m.umount_with(|d, pid| how(d, pid));
        let (clean, report) = uf2fs_testkit::fsck_f2fs(&img);
        assert!(clean, "after {name}: {report}");
        let got = Command::new(bin())
            .arg("cat")
            .arg(&img)
            .arg(format!("/file-{i}"))
            .output()
            .unwrap();
        assert!(
            got.status.success(),
            "after {name}: {}",
            String::from_utf8_lossy(&got.stderr)
        );
        assert!(got.stdout == data, "after {name}: file-{i} differs");
    }
    fsck_both(&img);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Changes nobody synced reach a checkpoint within `cp_interval` seconds (Linux's knob, 60 by
/// default): killed with SIGKILL after that, the daemon leaves an image that has them, and
/// fsck.f2fs finds it clean.
#[test]
fn unsynced_changes_survive_a_kill_after_the_checkpoint_interval() {
    let dir = scratch("mount-cp-interval");
    let img = dir.join("img");
    mkfs(&img, "128M");
    let mnt = dir.join("mnt");
    let m = Mount::new(&bin(), &img, &mnt, &["cp_interval=1"]);
    let data: Vec<u8> = (0..200_000u32).map(|x| (x * 13) as u8).collect();
    std::fs::write(mnt.join("kept"), &data).unwrap();
    std::fs::create_dir(mnt.join("dir")).unwrap();
    // No fsync, no sync: only the periodic checkpoint can make these durable.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let st = status(&mnt);
        if st.pointer("/checkpoints/written").and_then(|w| w.as_u64()) > Some(0) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no checkpoint within 30 s with cp_interval=1: {st}"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    m.umount_with(|d, pid| {
        run(Command::new("kill").args(["-KILL", &pid.to_string()]));
        let _ = Command::new("fusermount3").arg("-uz").arg(d).status();
    });
    let (clean, report) = uf2fs_testkit::fsck_f2fs(&img);
    assert!(clean, "{report}");
    let got = Command::new(bin())
        .arg("cat")
        .arg(&img)
        .arg("/kept")
        .output()
        .unwrap();
    assert!(
        got.status.success() && got.stdout == data,
        "the unsynced file after SIGKILL: {}",
        String::from_utf8_lossy(&got.stderr)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A busy mount point (a process has its working directory there) is not unmounted: `uf2fs
/// umount` and SIGTERM are refused with a message, the mount keeps serving, and once the
/// process is gone `uf2fs umount` works. (fuser's own unmounter forgot the mount after a
/// refused first attempt, and every later `uf2fs umount` waited forever.)
#[test]
fn a_busy_mount_refuses_to_unmount_and_can_be_unmounted_later() {
    let dir = scratch("mount-busy");
    let img = dir.join("img");
    mkfs(&img, "256M");
    let mnt = dir.join("mnt");
    let m = Mount::new(&bin(), &img, &mnt, &[]);
    std::fs::write(mnt.join("f"), b"still here").unwrap();
    let mut holder = Command::new("sleep")
        .arg("120")
        .current_dir(&mnt)
        .spawn()
        .unwrap();
    let umount = || {
        Command::new("timeout")
            .arg("60")
            .arg(bin())
            .arg("umount")
            .arg(&mnt)
            .output()
            .unwrap()
    };
    for attempt in 0..2 {
        let out = umount();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.code() == Some(1) && err.contains("busy"),
            "attempt {attempt}: uf2fs umount of a busy mount: {:?} {err}",
            out.status
        );
    }
    run(Command::new("kill").args(["-TERM", &m.pid.to_string()]));
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(std::fs::read(mnt.join("f")).unwrap(), b"still here");
    holder.kill().unwrap();
    holder.wait().unwrap();
    m.umount();
    fsck_both(&img);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn second_mount_and_bad_options_are_refused() {
    let dir = scratch("mount-refuse");
    let img = dir.join("img");
    mkfs(&img, "128M");
    let m = Mount::new(&bin(), &img, &dir.join("a"), &[]);
    std::fs::create_dir_all(dir.join("b")).unwrap();
    let (ok, _, err) = try_run(
        Command::new(bin())
            .arg("mount")
            .arg(&img)
            .arg(dir.join("b")),
    );
    assert!(!ok && err.contains("in use"), "second mount: {err}");
    // Writers that open the image directly are refused too while it is mounted.
    let (ok, _, err) =
        try_run(Command::new(bin()).args(["mkdir".as_ref(), img.as_os_str(), "/x".as_ref()]));
    assert!(!ok && err.contains("in use"), "mkdir while mounted: {err}");
    m.umount();

    for (opt, says) in [
        ("nosuchopt", "unknown mount option 'nosuchopt'"),
        (
            "fsync_mode=sometimes",
            "bad value 'sometimes' for mount option fsync_mode",
        ),
        // cache_size bounds the whole daemon: too little for its own buffers is refused.
        (
            "cache_size=16M",
            "cache_size=16M is too small (at least 29M",
        ),
    ] {
        let (ok, _, err) = try_run(
            Command::new(bin())
                .arg("mount")
                .arg(&img)
                .arg(dir.join("b"))
                .args(["-o", opt]),
        );
        assert!(!ok && err.contains(says), "-o {opt}: {err}");
    }
    let (ok, _, err) = try_run(
        Command::new(bin())
            .arg("mount")
            .arg(dir.join("missing"))
            .arg(dir.join("b")),
    );
    assert!(!ok && err.contains("missing"), "missing image: {err}");
    fsck_both(&img);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `cache_size` is the daemon's memory bound: `uf2fs status` shows it split between the
/// daemon's request buffers and the caches, and what is resident, which stays within it
/// through a tree of files written, synced and read back (the benchmark's tree workloads
/// measure the peaks: `uf2fs-bench io`).
#[test]
fn the_status_shows_the_memory_bound_and_the_daemon_stays_within_it() {
    let dir = scratch("mount-memory");
    let img = dir.join("img");
    mkfs(&img, "256M");
    let mnt = dir.join("m");
    let m = Mount::new(&bin(), &img, &mnt, &["cache_size=40M"]);
    for d in 0..10 {
        let sub = mnt.join(format!("d{d}"));
        std::fs::create_dir(&sub).unwrap();
        for f in 0..500 {
            std::fs::write(sub.join(format!("f{f}")), vec![d as u8; 3000 + f]).unwrap();
        }
    }
    uf2fs(&["sync".as_ref(), mnt.as_os_str()]);
    for d in 0..10 {
        for f in 0..500 {
            let got = std::fs::read(mnt.join(format!("d{d}/f{f}"))).unwrap();
            assert_eq!(got, vec![d as u8; 3000 + f], "d{d}/f{f}");
        }
    }
    let st = status(&mnt);
    let n = |p: &str| st.pointer(p).and_then(|v| v.as_u64()).unwrap_or(0);
    assert_eq!(n("/memory/cache_size_bytes"), 40 << 20, "{st}");
    assert_eq!(
        n("/memory/own_bytes") + n("/memory/caches_bytes"),
        40 << 20,
        "{st}"
    );
    assert!(n("/memory/caches_bytes") >= 4 << 20, "{st}");
    let (rss, peak) = (
        n("/memory/resident_bytes"),
        n("/memory/peak_resident_bytes"),
    );
    assert!(rss > 0 && rss <= peak, "{st}");
    assert!(
        peak <= 40 << 20,
        "peak resident {peak} above cache_size: {st}"
    );
    let text = uf2fs(&["status".as_ref(), mnt.as_os_str()]);
    assert!(
        text.lines()
            .any(|l| l.starts_with("memory:") && l.contains("of cache_size 40 MiB")),
        "{text}"
    );
    m.umount();
    fsck_both(&img);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `sync`, `status` and `gc` reach the daemon from any directory on the mount and through a
/// bind mount of it (the daemon listens for the mount point it was started on); a directory
/// on no uf2fs mount is refused by name.
#[test]
fn the_commands_for_a_live_mount_work_from_any_directory_on_it() {
    let dir = scratch("mount-within");
    let img = dir.join("img");
    mkfs(&img, "128M");
    let mnt = dir.join("m");
    let m = Mount::new(&bin(), &img, &mnt, &[]);
    let sub = mnt.join("a/b");
    std::fs::create_dir_all(&sub).unwrap();
    std::fs::write(sub.join("f"), b"kept").unwrap();
    let written =
        |st: &serde_json::Value| st.pointer("/checkpoints/written").and_then(|v| v.as_u64());
    let st = status(&mnt);
    let before = written(&st).expect("checkpoints written");
    let from_sub = status(&sub);
    assert_eq!(from_sub["pid"], st["pid"], "{from_sub}");

    uf2fs(&["sync".as_ref(), sub.as_os_str()]);
    let after = written(&status(&mnt)).unwrap();
    assert!(
        after > before,
        "sync through a subdirectory wrote no checkpoint: {before} -> {after}"
    );
    let out = uf2fs(&["gc".as_ref(), sub.as_os_str()]);
    assert!(out.contains("sections cleaned"), "{out}");

    let bind = dir.join("bind");
    std::fs::create_dir(&bind).unwrap();
    run(Command::new("mount").arg("--bind").arg(&mnt).arg(&bind));
    let through_bind = status(&bind.join("a"));
    run(Command::new("umount").arg(&bind));
    assert_eq!(through_bind["pid"], st["pid"], "{through_bind}");

    let (ok, _, err) = try_run(Command::new(bin()).arg("status").arg(&dir));
    assert!(!ok && err.contains("is not on a uf2fs mount"), "{err}");
    m.umount();
    fsck_both(&img);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The status counts the FUSE requests served, by kind: a new file is one CREATE, a new
/// directory one MKDIR, and the total is the sum of the kinds.
#[test]
fn the_status_counts_the_requests_served_by_kind() {
    let dir = scratch("mount-requests");
    let img = dir.join("img");
    mkfs(&img, "128M");
    let mnt = dir.join("m");
    let m = Mount::new(&bin(), &img, &mnt, &[]);
    let kind = |st: &serde_json::Value, k: &str| {
        st.pointer(&format!("/requests/by_kind/{k}"))
            .and_then(|v| v.as_u64())
            .unwrap_or(0)
    };
    let before = status(&mnt);
    std::fs::create_dir(mnt.join("d")).unwrap();
    for f in 0..7 {
        std::fs::write(mnt.join(format!("d/f{f}")), [f as u8; 100]).unwrap();
    }
    uf2fs(&["sync".as_ref(), mnt.as_os_str()]);
    let after = status(&mnt);
    assert_eq!(
        kind(&after, "CREATE") - kind(&before, "CREATE"),
        7,
        "{after}"
    );
    assert_eq!(kind(&after, "MKDIR") - kind(&before, "MKDIR"), 1, "{after}");
    assert!(kind(&after, "WRITE") >= 7, "{after}");
    let kinds = after
        .pointer("/requests/by_kind")
        .and_then(|v| v.as_object())
        .unwrap();
    let sum: u64 = kinds.values().filter_map(|v| v.as_u64()).sum();
    assert_eq!(
        after.pointer("/requests/total").and_then(|v| v.as_u64()),
        Some(sum),
        "{after}"
    );
    let text = uf2fs(&["status".as_ref(), mnt.as_os_str()]);
    assert!(
        text.lines()
            .any(|l| l.starts_with("requests:") && l.contains("CREATE 7")),
        "{text}"
    );
    m.umount();
    fsck_both(&img);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A tree of many new files leaves the daemon within `cache_size`, however many there are:
/// each new inode passes through the node cache (dirtied, then written by a checkpoint), and
/// once only reads made room in it, so that 40 000 new files kept 160 MiB of inode blocks
/// against a 64 MiB bound. 15 000 files here are 60 MiB of inode blocks against 40 MiB.
/// The dirty-node budget's checkpoints are the background thread's: the creates that passed
/// half the budget went on without writing one.
#[test]
fn many_new_files_keep_the_daemon_within_cache_size() {
    let dir = scratch("mount-memory-many");
    let img = dir.join("img");
    mkfs(&img, "512M");
    let mnt = dir.join("m");
    let m = Mount::new(&bin(), &img, &mnt, &["cache_size=40M"]);
    for d in 0..15 {
        let sub = mnt.join(format!("d{d}"));
        std::fs::create_dir(&sub).unwrap();
        for f in 0..1000 {
            std::fs::write(sub.join(format!("f{f}")), format!("{d}/{f}")).unwrap();
        }
    }
    uf2fs(&["sync".as_ref(), mnt.as_os_str()]);
    let st = status(&mnt);
    let peak = st
        .pointer("/memory/peak_resident_bytes")
        .and_then(|v| v.as_u64())
        .unwrap();
    assert!(
        peak <= 40 << 20,
        "15 000 new files took the daemon to {peak} bytes resident, above cache_size 40 MiB: {st}"
    );
    let background = st
        .pointer("/checkpoints/budget_in_background")
        .and_then(|v| v.as_u64())
        .unwrap();
    assert!(
        background >= 2,
        "the dirty-node budget's checkpoints were not written in the background: {st}"
    );
    // Every file reads back (from the device for most: the cache let them go).
    for d in (0..15).step_by(7) {
        for f in (0..1000).step_by(97) {
            let got = std::fs::read_to_string(mnt.join(format!("d{d}/f{f}"))).unwrap();
            assert_eq!(got, format!("{d}/{f}"));
        }
    }
    m.umount();
    fsck_both(&img);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Large writes go to the image with O_DIRECT where the host file system takes it (status
/// says so and counts the runs), small files written whole do not, every byte reads back
/// after a remount, and `direct_writes=off` writes the same files through the host's page
/// cache.
/// Small files' data is held by the daemon and written behind their writers, joined into
/// fewer requests; reads served while it may still be held, a rewrite over held blocks, a
/// removal and an fsync all see the newest bytes, and the image is whole after unmount.
#[test]
fn small_files_are_written_behind_their_writers_and_read_back() {
    use std::io::Write;
    use std::os::unix::fs::FileExt;
    let dir = scratch("mount-write-behind");
    let img = dir.join("img");
    mkfs(&img, "256M");
    let mnt = dir.join("m");
    let m = Mount::new(&bin(), &img, &mnt, &[]);
    let content = |i: usize, len: usize| -> Vec<u8> {
        (0..len)
            .map(|k| (k / 4096 + i * 31 + k % 7) as u8)
            .collect()
    };
    let len_of = |i: usize| 4096 * (1 + i % 5) + i % 3 * 100;
    for i in 0..300 {
        let mut f = std::fs::File::create(mnt.join(format!("f{i}"))).unwrap();
        f.write_all(&content(i, len_of(i))).unwrap();
        if i % 50 == 0 {
            f.sync_all().unwrap();
        }
    }
    // A rewrite of some files' middles, soon after they were written.
    for i in (0..300).step_by(7) {
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(mnt.join(format!("f{i}")))
            .unwrap();
        f.write_all_at(&[0xa5; 100], 50).unwrap();
    }
    for i in (0..300).step_by(11) {
        std::fs::remove_file(mnt.join(format!("f{i}"))).unwrap();
    }
    let want = |i: usize| {
        let mut v = content(i, len_of(i));
        if i.is_multiple_of(7) {
            v[50..150].fill(0xa5);
        }
        v
    };
    // The kernel's copies let go of, so that the daemon serves the reads.
    let check = |when: &str| {
        for i in (0..300).filter(|i| i % 11 != 0) {
            let p = mnt.join(format!("f{i}"));
            let f = std::fs::File::open(&p).unwrap();
            f.sync_all().ok();
            rustix::fs::fadvise(&f, 0, None, rustix::fs::Advice::DontNeed).unwrap();
            assert!(
                std::fs::read(&p).unwrap() == want(i),
                "{when}: f{i} differs"
            );
        }
    };
    check("mounted");
    let st = status(&mnt);
    let n = |k: &str| {
        st.pointer(&format!("/io/write_behind/{k}"))
            .and_then(|v| v.as_u64())
            .unwrap_or(0)
    };
    assert!(n("limit_bytes") > 0, "write-behind is on by default: {st}");
    assert!(n("deferred") >= 300, "the files' data was held: {st}");
    assert!(
        n("written_runs") < n("deferred"),
        "held runs that follow each other go down together: {st}"
    );
    let text = uf2fs(&["status".as_ref(), mnt.as_os_str()]);
    assert!(
        text.lines()
            .any(|l| l.starts_with("write-behind:") && l.contains("small writes held")),
        "{text}"
    );
    m.umount();
    fsck_both(&img);
    let m = Mount::new(&bin(), &img, &mnt, &["write_behind=off"]);
    check("remounted");
    let st = status(&mnt);
    assert_eq!(
        st.pointer("/io/write_behind/limit_bytes")
            .and_then(|v| v.as_u64()),
        Some(0),
        "write_behind=off: {st}"
    );
    m.umount();
}

#[test]
fn large_writes_go_past_the_host_page_cache_and_read_back() {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let dir = scratch("mount-direct");
    // Whether this host's file system takes O_DIRECT at all, asked directly.
    let probe = dir.join("probe");
    std::fs::write(&probe, [0u8; 4096]).unwrap();
    let host_takes_it = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(rustix::fs::OFlags::DIRECT.bits() as i32)
        .open(&probe)
        .is_ok();
    let data: Vec<u8> = (0..24u32 << 20).map(|i| (i * 7 + i / 4096) as u8).collect();
    // Write-behind off: it would hold the small files' runs and write them later, direct.
    for (opts, want) in [
        (
            &["write_behind=off"][..],
            if host_takes_it { "on" } else { "not available" },
        ),
        (
            &["direct_writes=off", "write_behind=off"][..],
            if host_takes_it {
                "off"
            } else {
                "not available"
            },
        ),
    ] {
        let img = dir.join("img");
        let _ = std::fs::remove_file(&img);
        mkfs(&img, "256M");
        let allocated = || {
            use std::os::unix::fs::MetadataExt;
            std::fs::metadata(&img).unwrap().blocks() * 512
        };
        let before = allocated();
        let mnt = dir.join("m");
        let m = Mount::new(&bin(), &img, &mnt, opts);
        // Small files written whole stay buffered: their writers wait for them.
        for i in 0..8 {
            let mut f = std::fs::File::create(mnt.join(format!("small{i}"))).unwrap();
            f.write_all(&data[..200 << 10]).unwrap();
            f.sync_all().unwrap();
        }
        let st = status(&mnt);
        assert_eq!(
            st.pointer("/io/direct_write_runs").and_then(|v| v.as_u64()),
            Some(0),
            "{opts:?}: small files went past the page cache: {st}"
        );
        let mut f = std::fs::File::create(mnt.join("big")).unwrap();
        for chunk in data.chunks(1 << 20) {
            f.write_all(chunk).unwrap();
        }
        f.sync_all().unwrap();
        drop(f);
        // Direct writes allocate the image's holes ahead of them, a piece at a time: the
        // sparse image grows by what was written and a little more, never wholesale.
        let grown = allocated() - before;
        assert!(
            (24 << 20..96 << 20).contains(&grown),
            "{opts:?}: the image grew by {grown} bytes for 24 MiB written"
        );
        let st = status(&mnt);
        let runs = st.pointer("/io/direct_write_runs").and_then(|v| v.as_u64());
        assert_eq!(
            st.pointer("/io/direct_writes").and_then(|v| v.as_str()),
            Some(want),
            "{opts:?}: {st}"
        );
        if want == "on" {
            assert!(runs.unwrap_or(0) >= 8, "{opts:?}: {st}");
        } else {
            assert_eq!(runs, Some(0), "{opts:?}: {st}");
        }
        let text = uf2fs(&["status".as_ref(), mnt.as_os_str()]);
        assert!(
            text.lines()
                .any(|l| l.starts_with("direct:") && l.contains(want)),
            "{text}"
        );
        m.umount();
        fsck_both(&img);
        let m = Mount::new(&bin(), &img, &mnt, &[]);
        assert!(
            std::fs::read(mnt.join("big")).unwrap() == data,
            "{opts:?}: bytes differ"
        );
        for i in 0..8 {
            assert!(
                std::fs::read(mnt.join(format!("small{i}"))).unwrap() == data[..200 << 10],
                "{opts:?}: small{i} differs"
            );
        }
        m.umount();
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The names `Dir` reads from here to the end, each with the offset after it.
fn read_rest(dir: &mut rustix::fs::Dir) -> Vec<(String, i64)> {
    let mut out = Vec::new();
    while let Some(e) = dir.read() {
        let e = e.unwrap();
        out.push((e.file_name().to_string_lossy().into_owned(), e.offset()));
    }
    out
}

/// A directory is read by position (each entry's dentry block and slot, the cookies Linux's
/// F2FS gives readdir), not copied whole at opendir: a reader that goes on after names were
/// removed and added meets every name that stayed exactly once and none that was removed
/// before it got there; seeking back to an offset it was given reads on from the same
/// place; and holding many handles open on a large directory costs the daemon no memory per
/// handle (it held a copy of the listing for each before).
#[test]
fn directories_are_read_by_position_through_changes_seeks_and_many_handles() {
    use rustix::fs::{Dir, Mode, OFlags};
    use std::collections::{BTreeSet, HashMap};
    let dir = scratch("mount-readdir");
    let img = dir.join("img");
    mkfs(&img, "256M");
    let mnt = dir.join("m");
    let m = Mount::new(&bin(), &img, &mnt, &[]);
    let big = mnt.join("big");
    std::fs::create_dir(&big).unwrap();
    let names: Vec<String> = (0..3000)
        .map(|i| format!("entry-{i:05}-{}", "x".repeat(24)))
        .collect();
    for n in &names {
        std::fs::write(big.join(n), b"").unwrap();
    }
    let open = || {
        let fd = rustix::fs::open(&big, OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty()).unwrap();
        Dir::new(fd).unwrap()
    };

    // The order a reader meets the names in (by position: it stays while they exist).
    let order: Vec<String> = read_rest(&mut open())
        .into_iter()
        .map(|(n, _)| n)
        .filter(|n| n != "." && n != "..")
        .collect();
    assert_eq!(
        order.iter().collect::<BTreeSet<_>>(),
        names.iter().collect::<BTreeSet<_>>()
    );
    // Read a third, then change names well past what the reader has reached (and past what
    // a reader buffers ahead), then read on.
    let mut d = open();
    let mut first = Vec::new();
    while first.len() < 1000 {
        let e = d.read().unwrap().unwrap();
        first.push((e.file_name().to_string_lossy().into_owned(), e.offset()));
    }
    let removed: BTreeSet<&str> = order[2000..2200].iter().map(String::as_str).collect();
    for n in &removed {
        std::fs::remove_file(big.join(n)).unwrap();
    }
    for i in 0..200 {
        std::fs::write(big.join(format!("late-{i:03}")), b"").unwrap();
    }
    let rest = read_rest(&mut d);
    let mut count: HashMap<&str, usize> = HashMap::new();
    for (n, _) in first.iter().chain(&rest) {
        *count.entry(n.as_str()).or_default() += 1;
    }
    for n in names.iter().map(String::as_str).chain([".", ".."]) {
        let want = usize::from(!removed.contains(n));
        assert_eq!(count.get(n).copied().unwrap_or(0), want, "{n}");
    }
    assert!(count.values().all(|&c| c == 1), "a name came twice");

    // Seeking back to an offset the reader was given reads on from the same place: the names
    // that were there the first time come again, in the same order (late ones may join).
    let (_, back) = first[499];
    d.seek(back).unwrap();
    let again = read_rest(&mut d);
    let old: BTreeSet<&str> = names.iter().map(String::as_str).collect();
    let keep = |v: &[(String, i64)]| -> Vec<String> {
        v.iter()
            .filter(|(n, _)| old.contains(n.as_str()) && !removed.contains(n.as_str()))
            .map(|(n, _)| n.clone())
            .collect()
    };
    let mut first_time = keep(&first[500..]);
    first_time.extend(keep(&rest));
    assert_eq!(keep(&again), first_time);

    // Many handles on the directory, each past its first entries: no listing per handle.
    let resident = || {
        let st = status(&mnt);
        st.pointer("/memory/resident_bytes")
            .and_then(|v| v.as_u64())
            .unwrap()
    };
    let before = resident();
    let mut handles: Vec<Dir> = Vec::new();
    for _ in 0..300 {
        let mut h = open();
        for _ in 0..3 {
            h.read().unwrap().unwrap();
        }
        handles.push(h);
    }
    let grown = resident().saturating_sub(before);
    assert!(
        grown < 16 << 20,
        "300 open handles on a 3 000-entry directory grew the daemon by {grown} bytes"
    );
    drop(handles);
    drop(d);
    m.umount();
    fsck_both(&img);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn read_only_mounts_write_nothing() {
    let dir = scratch("mount-ro");
    let mnt = dir.join("mnt");
    std::fs::create_dir_all(&mnt).unwrap();
    // An image with a feature we do not write (verity) is served read-only, by name; a
    // writable image with -o ro is too.
    let verity = dir.join("verity");
    uf2fs_testkit::mkfs_f2fs(&verity, 128, &["-O", "extra_attr,verity,lost_found"]);
    let plain = dir.join("plain");
    mkfs(&plain, "128M");
    for (img, opts, says) in [(&verity, vec![], "verity"), (&plain, vec!["-o", "ro"], "")] {
        let before = std::fs::read(img).unwrap();
        // Detaches the mount if an assertion below fails before `uf2fs umount`.
        struct Detach<'a>(&'a Path);
        impl Drop for Detach<'_> {
            fn drop(&mut self) {
                let _ = Command::new("fusermount3").arg("-uz").arg(self.0).status();
            }
        }
        let _detach = Detach(&mnt);
        let out = Command::new(bin())
            .arg("mount")
            .arg(img)
            .arg(&mnt)
            .args(&opts)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(said.contains(says), "{said}");
        if !says.is_empty() {
            assert!(said.contains("read-only"), "{said}");
        }
        let st = run(Command::new(bin()).arg("status").arg(&mnt));
        assert!(st.contains("mode:         read-only"), "{st}");
        let e = std::fs::write(mnt.join("new"), b"x").unwrap_err();
        assert_eq!(
            e.raw_os_error(),
            Some(30),
            "write on a read-only mount: {e}"
        );
        if !says.is_empty() {
            assert!(std::fs::read_dir(&mnt).unwrap().count() > 0, "lost+found");
        }
        run(Command::new(bin()).arg("umount").arg(&mnt));
        assert!(
            std::fs::read(img).unwrap() == before,
            "a read-only mount changed {}",
            img.display()
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A POSIX ACL in the generic xattr form: version 2, then (tag, perm, id) entries; the id of
/// an entry that names no one (all but user 2 and group 8) reads back as u32::MAX.
fn acl(entries: &[(u16, u16, u32)]) -> Vec<u8> {
    let mut v = 2u32.to_le_bytes().to_vec();
    for &(tag, perm, id) in entries {
        let id = if tag == 2 || tag == 8 { id } else { u32::MAX };
        v.extend_from_slice(&tag.to_le_bytes());
        v.extend_from_slice(&perm.to_le_bytes());
        v.extend_from_slice(&id.to_le_bytes());
    }
    v
}

fn getxattr(path: &Path, name: &str) -> Vec<u8> {
    let mut buf = vec![0u8; 4096];
    let n = rustix::fs::getxattr(path, name, &mut buf)
        .unwrap_or_else(|e| panic!("getxattr {name} of {}: {e}", path.display()));
    buf.truncate(n);
    buf
}

fn mode_of(path: &Path) -> u32 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).unwrap().mode()
}

#[test]
fn default_acls_are_inherited_instead_of_the_umask_and_chmod_moves_the_acl() {
    // Tags: user_obj 1, user 2, group_obj 4, mask 0x10, other 0x20 (fstests generic/099,
    // 319, 444: Linux's file systems do this; FUSE leaves it to the daemon).
    let dir = scratch("mount-acl");
    let img = dir.join("img");
    mkfs(&img, "128M");
    let m = Mount::new(&bin(), &img, &dir.join("mnt"), &[]);
    let d = m.dir.join("d");
    std::fs::create_dir(&d).unwrap();
    let default = acl(&[
        (1, 7, 0),
        (2, 7, 101),
        (4, 5, 0),
        (0x10, 7, 0),
        (0x20, 0, 0),
    ]);
    rustix::fs::setxattr(
        d.as_path(),
        "system.posix_acl_default",
        &default,
        rustix::fs::XattrFlags::empty(),
    )
    .unwrap();
    // Under a umask of 022 a plain mkdir 0777 gives 0755; the default ACL replaces the umask.
    let old = rustix::process::umask(rustix::fs::Mode::from_raw_mode(0o022));
    let sub = d.join("sub");
    std::fs::DirBuilder::new().mode(0o777).create(&sub).unwrap();
    let f = d.join("f");
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o666)
        .open(&f)
        .unwrap();
    rustix::process::umask(old);
    assert_eq!(mode_of(&sub) & 0o7777, 0o770, "directory mode from the ACL");
    assert_eq!(getxattr(&sub, "system.posix_acl_access"), default);
    assert_eq!(getxattr(&sub, "system.posix_acl_default"), default);
    assert_eq!(mode_of(&f) & 0o7777, 0o660, "file mode from the ACL");
    let file_acl = acl(&[
        (1, 6, 0),
        (2, 7, 101),
        (4, 5, 0),
        (0x10, 6, 0),
        (0x20, 0, 0),
    ]);
    assert_eq!(getxattr(&f, "system.posix_acl_access"), file_acl);
    // chmod changes the owner, mask and other entries, not the named user or owning group.
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o604)).unwrap();
    let chmodded = acl(&[
        (1, 6, 0),
        (2, 7, 101),
        (4, 5, 0),
        (0x10, 0, 0),
        (0x20, 4, 0),
    ]);
    assert_eq!(getxattr(&f, "system.posix_acl_access"), chmodded);
    m.umount();
    fsck_both(&img);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_directory_removed_while_open_lives_until_closed() {
    use std::os::unix::fs::MetadataExt;
    // fstests generic/035: fstat of an open directory that rmdir or a rename replaced.
    let dir = scratch("mount-open-dir");
    let img = dir.join("img");
    mkfs(&img, "128M");
    let m = Mount::new(&bin(), &img, &dir.join("mnt"), &[]);
    let (a, b, c) = (m.dir.join("a"), m.dir.join("b"), m.dir.join("c"));
    for p in [&a, &b, &c] {
        std::fs::create_dir(p).unwrap();
    }
    let open_b = std::fs::File::open(&b).unwrap();
    let open_c = std::fs::File::open(&c).unwrap();
    std::fs::rename(&a, &b).unwrap();
    std::fs::remove_dir(&c).unwrap();
    assert_eq!(open_b.metadata().unwrap().nlink(), 0, "replaced by rename");
    assert_eq!(open_c.metadata().unwrap().nlink(), 0, "removed by rmdir");
    // A checkpoint while they are open records them as orphans.
    run(Command::new(bin()).arg("sync").arg(&m.dir));
    drop((open_b, open_c));
    assert_eq!(std::fs::read_dir(&m.dir).unwrap().count(), 1, "only b");
    m.umount();
    fsck_both(&img);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn device_nodes_work_when_root_mounts() {
    // fstests generic/184, 306: FUSE mounts are nodev,nosuid unless root asks otherwise.
    if !rustix::process::geteuid().is_root() {
        eprintln!("skipped: needs root (mknod, and only root may mount with dev)");
        return;
    }
    let dir = scratch("mount-dev");
    let img = dir.join("img");
    mkfs(&img, "128M");
    let m = Mount::new(&bin(), &img, &dir.join("mnt"), &[]);
    run(Command::new("mknod")
        .arg(m.dir.join("null"))
        .args(["c", "1", "3"]));
    std::fs::write(m.dir.join("null"), b"into /dev/null").unwrap();
    assert_eq!(std::fs::read(m.dir.join("null")).unwrap(), b"");
    m.umount();
    let m = Mount::new(&bin(), &img, &dir.join("mnt"), &["nodev"]);
    let e = std::fs::write(m.dir.join("null"), b"x").unwrap_err();
    assert_eq!(e.raw_os_error(), Some(13), "nodev: {e}");
    m.umount();
    fsck_both(&img);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A small C program (built with gcc once) for file handles: `fh encode PATH FILE` stores
/// PATH's handle in FILE; `fh open MOUNT FILE` opens it with open_by_handle_at and prints
/// "ok" or the errno.
fn file_handle_tool() -> PathBuf {
    let dir = uf2fs_testkit::root().join("target/testkit");
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join(format!("fh.{}.c", std::process::id()));
    std::fs::write(
        &src,
        r#"#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
int main(int argc, char **argv) {
    char buf[sizeof(struct file_handle) + MAX_HANDLE_SZ];
    struct file_handle *h = (struct file_handle *)buf;
    if (argc != 4) return 2;
    if (strcmp(argv[1], "encode") == 0) {
        int mnt_id;
        h->handle_bytes = MAX_HANDLE_SZ;
        if (name_to_handle_at(AT_FDCWD, argv[2], h, &mnt_id, 0) < 0) { perror("encode"); return 1; }
        FILE *f = fopen(argv[3], "w");
        if (!f || fwrite(buf, 1, sizeof(buf), f) != sizeof(buf) || fclose(f)) return 1;
        return 0;
    }
    FILE *f = fopen(argv[3], "r");
    if (!f || fread(buf, 1, sizeof(buf), f) != sizeof(buf)) return 1;
    int mfd = open(argv[2], O_RDONLY | O_DIRECTORY);
    if (mfd < 0) return 1;
    int fd = open_by_handle_at(mfd, h, O_RDONLY);
    if (fd < 0) printf("errno %d\n", errno); else printf("ok\n");
    return 0;
}
"#,
    )
    .unwrap();
    let bin = dir.join(format!("fh.{}", std::process::id()));
    run(Command::new("gcc").arg("-O2").arg("-o").arg(&bin).arg(&src));
    let _ = std::fs::remove_file(&src);
    bin
}

#[test]
fn file_handles_open_after_a_remount_and_go_stale_with_their_inode() {
    // fstests generic/426, 467, 477: handles outlive the kernel's inode cache (here: a
    // remount), a directory's handle reconnects to the root, a removed file's is stale.
    if !rustix::process::geteuid().is_root() {
        eprintln!("skipped: open_by_handle_at needs CAP_DAC_READ_SEARCH");
        return;
    }
    let dir = scratch("mount-handles");
    let img = dir.join("img");
    mkfs(&img, "128M");
    let fh = file_handle_tool();
    let mnt = dir.join("mnt");
    let m = Mount::new(&bin(), &img, &mnt, &[]);
    std::fs::create_dir_all(mnt.join("d/e")).unwrap();
    std::fs::write(mnt.join("d/e/kept"), b"k").unwrap();
    std::fs::write(mnt.join("d/gone"), b"g").unwrap();
    let handles = ["d", "d/e", "d/e/kept", "d/gone"].map(|p| {
        let h = dir.join(format!("{}.fh", p.replace('/', "_")));
        run(Command::new(&fh).arg("encode").arg(mnt.join(p)).arg(&h));
        h
    });
    std::fs::remove_file(mnt.join("d/gone")).unwrap();
    m.umount();
    let m = Mount::new(&bin(), &img, &mnt, &[]);
    let open = |h: &Path| run(Command::new(&fh).arg("open").arg(&mnt).arg(h));
    for h in &handles[..3] {
        assert_eq!(open(h).trim(), "ok", "{}", h.display());
    }
    assert_eq!(
        open(&handles[3]).trim(),
        "errno 116",
        "ESTALE for a removed file"
    );
    m.umount();
    let _ = std::fs::remove_file(&fh);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn rename_whiteout_leaves_a_whiteout_behind() {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    // fstests generic/078 (overlayfs's RENAME_WHITEOUT); the kernel asks CAP_MKNOD for it.
    if !rustix::process::geteuid().is_root() {
        eprintln!("skipped: RENAME_WHITEOUT needs CAP_MKNOD");
        return;
    }
    let dir = scratch("mount-whiteout");
    let img = dir.join("img");
    mkfs(&img, "128M");
    let m = Mount::new(&bin(), &img, &dir.join("mnt"), &[]);
    std::fs::write(m.dir.join("a"), b"moved").unwrap();
    rustix::fs::renameat_with(
        rustix::fs::CWD,
        m.dir.join("a").as_path(),
        rustix::fs::CWD,
        m.dir.join("b").as_path(),
        rustix::fs::RenameFlags::WHITEOUT,
    )
    .unwrap();
    assert_eq!(std::fs::read(m.dir.join("b")).unwrap(), b"moved");
    let w = std::fs::symlink_metadata(m.dir.join("a")).unwrap();
    assert!(w.file_type().is_char_device(), "{w:?}");
    assert_eq!(w.rdev(), 0, "a whiteout is device 0:0");
    m.umount();
    fsck_both(&img);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_write_by_someone_outside_the_group_drops_set_group_id() {
    use std::os::unix::fs::MetadataExt;
    // fstests generic/683, 684: Linux's rule, also for a file that is not group-executable.
    if !rustix::process::geteuid().is_root() {
        eprintln!("skipped: needs root to write as another user");
        return;
    }
    let dir = scratch("mount-sgid");
    let img = dir.join("img");
    mkfs(&img, "128M");
    let m = Mount::new(&bin(), &img, &dir.join("mnt"), &["allow_other"]);
    std::fs::set_permissions(&m.dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    for (mode, want, what) in [
        (0o2666, 0o666, "printf x >> \"$1\""),
        (0o6766, 0o766, "truncate -s 1 \"$1\""),
        (0o2676, 0o676, "printf x >> \"$1\""),
    ] {
        let f = m.dir.join(format!("f{mode:o}"));
        std::fs::write(&f, b"").unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(mode)).unwrap();
        as_nobody(what, &f);
        let got = std::fs::metadata(&f).unwrap().mode() & 0o7777;
        assert_eq!(got, want, "{mode:o} after {what}: {got:o}");
    }
    // The owner's group keeps it: root writing changes nothing.
    let f = m.dir.join("root");
    std::fs::write(&f, b"").unwrap();
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o2666)).unwrap();
    std::fs::write(&f, b"x").unwrap();
    assert_eq!(std::fs::metadata(&f).unwrap().mode() & 0o7777, 0o2666);
    m.umount();
    fsck_both(&img);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The names in directory `d` with their sizes, by name.
fn listed_sizes(d: &Path) -> Vec<(String, u64)> {
    let mut sizes: Vec<(String, u64)> = std::fs::read_dir(d)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().into_string().unwrap(),
                e.metadata().unwrap().len(),
            )
        })
        .collect();
    sizes.sort();
    sizes
}

/// A directory listed with attributes (READDIRPLUS) has its entries' inodes read together:
/// a checkpoint wrote them side by side, and a reply's worth goes in one device read rather
/// than one read per entry (`uf2fs status`: node reads by cause).
#[test]
fn a_listing_with_attributes_reads_its_entries_inodes_together() {
    let dir = scratch("mount-listing");
    let img = dir.join("img");
    mkfs(&img, "256M");
    let mnt = dir.join("mnt");
    let m = Mount::new(&bin(), &img, &mnt, &[]);
    std::fs::create_dir(mnt.join("d")).unwrap();
    const FILES: usize = 400;
    for i in 0..FILES {
        std::fs::write(mnt.join(format!("d/file-{i:05}.txt")), vec![b'x'; i + 1]).unwrap();
    }
    m.umount();
    let m = Mount::new(&bin(), &img, &mnt, &[]);
    let node_reads = |st: &serde_json::Value| {
        st.pointer("/io/read_requests/node")
            .and_then(|v| v.as_u64())
            .unwrap_or_else(|| panic!("no node read count in {st}"))
    };
    let before = node_reads(&status(&mnt));
    let sizes = listed_sizes(&mnt.join("d"));
    let want: Vec<(String, u64)> = (0..FILES)
        .map(|i| (format!("file-{i:05}.txt"), i as u64 + 1))
        .collect();
    assert_eq!(sizes, want, "the listing and its sizes");
    let reads = node_reads(&status(&mnt)) - before;
    assert!(
        reads <= (FILES / 8) as u64,
        "{reads} node reads to list {FILES} entries with their attributes"
    );
    m.umount();
    fsck_both(&img);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A tree walk (each directory listed with attributes, its subdirectories in the order it
/// gave them) has the next directories' entries and inodes read ahead while it lists one
/// (`listing_readahead`): the guesses follow the walk, and what it lists is what is there,
/// with read-ahead and without, before `rm -rf` removes it all and leaves a clean image.
#[test]
fn a_tree_walk_is_read_ahead_and_lists_what_is_there() {
    const DIRS: usize = 12;
    const FILES: usize = 40;
    let dir = scratch("mount-walk-ahead");
    let img = dir.join("img");
    mkfs(&img, "256M");
    let mnt = dir.join("mnt");
    let m = Mount::new(&bin(), &img, &mnt, &[]);
    for d in 0..DIRS {
        let sub = mnt.join(format!("tree/d{d:02}"));
        std::fs::create_dir_all(sub.join("inner")).unwrap();
        for f in 0..FILES {
            std::fs::write(sub.join(format!("f{f:03}")), vec![b'w'; d * 100 + f + 1]).unwrap();
        }
    }
    m.umount();
    // Depth first, in listing order, as find and rm -rf go.
    fn walk(d: &Path, out: &mut Vec<(String, u64)>) {
        let mut subdirs = Vec::new();
        for e in std::fs::read_dir(d).unwrap() {
            let e = e.unwrap();
            let meta = e.metadata().unwrap();
            let name = e.path().display().to_string();
            out.push((name, if meta.is_dir() { 0 } else { meta.len() }));
            if meta.is_dir() {
                subdirs.push(e.path());
            }
        }
        for s in subdirs {
            walk(&s, out);
        }
    }
    let mut want: Vec<(String, u64)> = Vec::new();
    for d in 0..DIRS {
        let sub = mnt.join(format!("tree/d{d:02}"));
        want.push((sub.display().to_string(), 0));
        want.push((sub.join("inner").display().to_string(), 0));
        for f in 0..FILES {
            let name = sub.join(format!("f{f:03}")).display().to_string();
            want.push((name, (d * 100 + f + 1) as u64));
        }
    }
    want.sort();
    for opts in [&["listing_readahead=off"][..], &[][..]] {
        let m = Mount::new(&bin(), &img, &mnt, opts);
        let mut seen = Vec::new();
        walk(&mnt.join("tree"), &mut seen);
        seen.sort();
        assert_eq!(seen, want, "the walk with {opts:?}");
        let st = status(&mnt);
        let n = |k: &str| {
            st.pointer(&format!("/listing_readahead/{k}"))
                .and_then(|v| v.as_u64())
        };
        if opts.is_empty() {
            // Every directory but the first is guessed before the walk lists it: the inner
            // ones and the next sibling of each.
            assert!(
                n("directories").unwrap() >= (2 * DIRS - 2) as u64,
                "read ahead: {}",
                st["listing_readahead"]
            );
            assert!(n("inodes").unwrap() >= ((DIRS - 1) * FILES) as u64);
            std::fs::remove_dir_all(mnt.join("tree")).unwrap();
        } else {
            assert_eq!(n("directories"), Some(0), "{}", st["listing_readahead"]);
        }
        m.umount();
    }
    fsck_both(&img);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Listings with attributes while another thread removes most of the directory (its dentry
/// blocks emptied and punched as it goes): each one holds every entry that stays, with its
/// size, and never a name twice. (A reply whose entries all went between the listing and
/// their stats would end the directory early; `readdirplus` lists on past them. That window
/// is a few microseconds: this test does not reach it reliably.)
#[test]
fn listings_with_attributes_under_removals_keep_every_entry_that_stays() {
    let dir = scratch("mount-listing-churn");
    let img = dir.join("img");
    mkfs(&img, "256M");
    let mnt = dir.join("mnt");
    let m = Mount::new(&bin(), &img, &mnt, &[]);
    let d = mnt.join("d");
    std::fs::create_dir(&d).unwrap();
    const FILES: usize = 3000;
    let stays = |i: usize| i % 50 == 7;
    for i in 0..FILES {
        std::fs::write(d.join(format!("f{i:05}")), vec![b'y'; i % 97 + 1]).unwrap();
    }
    m.umount();
    let m = Mount::new(&bin(), &img, &mnt, &[]);
    let remover = {
        let d = d.clone();
        std::thread::spawn(move || {
            // Removed in runs of neighbouring names, in an order of its own.
            for k in 0..FILES {
                let i = (k * 7919) % FILES;
                if !stays(i) {
                    std::fs::remove_file(d.join(format!("f{i:05}"))).unwrap();
                }
            }
        })
    };
    let want: Vec<(String, u64)> = (0..FILES)
        .filter(|&i| stays(i))
        .map(|i| (format!("f{i:05}"), (i % 97 + 1) as u64))
        .collect();
    let mut listings = 0;
    while !remover.is_finished() || listings < 3 {
        let mut seen: Vec<(String, u64)> = Vec::new();
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let name = e.file_name().into_string().unwrap();
            // A name listed just before its removal may be gone by its stat.
            if let Ok(md) = e.metadata() {
                seen.push((name, md.len()));
            } else {
                seen.push((name, u64::MAX));
            }
        }
        let mut names: Vec<&String> = seen.iter().map(|(n, _)| n).collect();
        names.sort();
        let listed = names.len();
        names.dedup();
        assert_eq!(names.len(), listed, "listing {listings}: a name came twice");
        for w in &want {
            assert!(
                seen.contains(w),
                "listing {listings}: {w:?} is missing ({} entries listed)",
                seen.len()
            );
        }
        listings += 1;
    }
    remover.join().unwrap();
    assert_eq!(listed_sizes(&d), want, "after the removals");
    m.umount();
    fsck_both(&img);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A directory holding one inode that cannot be read (its node block names another node) is
/// still listed whole through the mount, where READDIRPLUS hands out attributes with the
/// names: the damaged entry is there, a stat of it fails with EIO, and its neighbours read.
#[test]
fn a_damaged_inode_is_listed_and_only_its_own_stat_fails() {
    let dir = scratch("mount-damaged");
    let img = dir.join("img");
    mkfs(&img, "64M");
    let s = img.as_os_str();
    uf2fs(&["mkdir".as_ref(), s, "/d".as_ref()]);
    for name in ["a", "b", "c"] {
        let host = dir.join(name);
        std::fs::write(&host, format!("contents of {name}\n")).unwrap();
        uf2fs(&[
            "put".as_ref(),
            s,
            host.as_os_str(),
            format!("/d/{name}").as_ref(),
        ]);
    }
    let stat: serde_json::Value = serde_json::from_str(&uf2fs(&[
        "stat".as_ref(),
        "--json".as_ref(),
        s,
        "/d/b".as_ref(),
    ]))
    .unwrap();
    let ino = u32::try_from(stat["attr"]["ino"].as_u64().unwrap()).unwrap();
    // Every copy of b's inode block (footer: nid at 4072, ino at 4076) now names another nid.
    let mut bytes = std::fs::read(&img).unwrap();
    let mut damaged = 0;
    for block in bytes.chunks_exact_mut(4096) {
        let word = |b: &[u8], at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
        if word(block, 4072) == ino && word(block, 4076) == ino {
            block[4072..4076].copy_from_slice(&(ino + 1000).to_le_bytes());
            damaged += 1;
        }
    }
    assert!(damaged > 0, "b's inode block was not found");
    std::fs::write(&img, &bytes).unwrap();

    let m = Mount::new(&bin(), &img, &dir.join("mnt"), &["ro"]);
    let d = m.dir.join("d");
    let mut names: Vec<String> = std::fs::read_dir(&d)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["a", "b", "c"],
        "the listing of a directory with a damaged entry"
    );
    let e = std::fs::metadata(d.join("b")).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(5), "stat of the damaged inode: {e}");
    for name in ["a", "c"] {
        assert_eq!(
            std::fs::read_to_string(d.join(name)).unwrap(),
            format!("contents of {name}\n")
        );
    }
    m.umount();
    let _ = std::fs::remove_dir_all(&dir);
}

/// copy_file_range copies what the source holds and no more, whatever length is asked (`cp`
/// asks for far more than a small file holds): the rest of a file from an offset, nothing
/// from its end or past it, and a source written through the page cache just before.
#[test]
fn copy_file_range_copies_up_to_the_source_end() {
    let dir = scratch("mount-copy-range");
    let img = dir.join("img");
    mkfs(&img, "64M");
    let m = Mount::new(&bin(), &img, &dir.join("mnt"), &[]);
    let data: Vec<u8> = (0..20_000u32).map(|i| (i % 241) as u8).collect();
    let (src_path, dst_path) = (m.dir.join("src"), m.dir.join("dst"));
    std::fs::write(&src_path, &data).unwrap();
    let src = std::fs::File::open(&src_path).unwrap();
    let dst = std::fs::File::create(&dst_path).unwrap();
    let copy = |from: u64, to: u64, len: usize| {
        let (mut so, mut doff) = (from, to);
        rustix::fs::copy_file_range(&src, Some(&mut so), &dst, Some(&mut doff), len).unwrap()
    };
    assert_eq!(copy(0, 0, 1 << 30), data.len(), "a whole small file");
    assert_eq!(
        copy(15_000, 20_000, 1 << 30),
        5_000,
        "the rest from an offset"
    );
    assert_eq!(copy(20_000, 0, 1 << 30), 0, "from the end");
    assert_eq!(copy(90_000, 0, 4096), 0, "from past the end");
    drop((src, dst));
    let mut want = data.clone();
    want.extend_from_slice(&data[15_000..]);
    assert_eq!(std::fs::read(&dst_path).unwrap(), want);
    m.umount();
    fsck_both(&img);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Files keep the kernel's page cache across opens (`FOPEN_KEEP_CACHE`): a read after a
/// reopen must still see every change made through the mount since, whatever made it.
#[test]
fn reads_after_a_reopen_see_every_change_made_through_the_mount() {
    use std::io::{Read, Seek, SeekFrom, Write};
    use std::os::unix::fs::FileExt;
    let dir = scratch("mount-keep-cache");
    let img = dir.join("img");
    mkfs(&img, "64M");
    let m = Mount::new(&bin(), &img, &dir.join("mnt"), &[]);
    let f = m.dir.join("f");
    let read_all = || {
        let mut v = Vec::new();
        std::fs::File::open(&f)
            .unwrap()
            .read_to_end(&mut v)
            .unwrap();
        v
    };
    let mut want: Vec<u8> = (0..3 * 65536u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(&f, &want).unwrap();
    assert_eq!(read_all(), want, "first read (fills the cache)");

    // An overwrite through another descriptor.
    let w = std::fs::OpenOptions::new().write(true).open(&f).unwrap();
    w.write_all_at(b"overwritten", 70000).unwrap();
    want[70000..70011].copy_from_slice(b"overwritten");
    drop(w);
    assert_eq!(read_all(), want, "after an overwrite");

    // A punched hole.
    let w = std::fs::OpenOptions::new().write(true).open(&f).unwrap();
    rustix::fs::fallocate(
        &w,
        rustix::fs::FallocateFlags::PUNCH_HOLE | rustix::fs::FallocateFlags::KEEP_SIZE,
        4096,
        8192,
    )
    .unwrap();
    want[4096..12288].fill(0);
    drop(w);
    assert_eq!(read_all(), want, "after a punched hole");

    // copy_file_range from another file into the middle.
    let g = m.dir.join("g");
    std::fs::write(&g, vec![0xeeu8; 5000]).unwrap();
    let src = std::fs::File::open(&g).unwrap();
    let dst = std::fs::OpenOptions::new().write(true).open(&f).unwrap();
    let (mut so, mut doff) = (0u64, 100_000u64);
    let n = rustix::fs::copy_file_range(&src, Some(&mut so), &dst, Some(&mut doff), 5000).unwrap();
    assert_eq!(n, 5000);
    want[100_000..105_000].fill(0xee);
    drop((src, dst));
    assert_eq!(read_all(), want, "after copy_file_range");

    // Truncation down and up again, and an append.
    let mut w = std::fs::OpenOptions::new().write(true).open(&f).unwrap();
    w.set_len(50_000).unwrap();
    w.set_len(60_000).unwrap();
    want.truncate(50_000);
    want.resize(60_000, 0);
    w.seek(SeekFrom::End(0)).unwrap();
    w.write_all(b"tail").unwrap();
    want.extend_from_slice(b"tail");
    drop(w);
    assert_eq!(read_all(), want, "after truncate and append");

    // A rename over it: the name now reads the other file.
    std::fs::rename(&g, &f).unwrap();
    assert_eq!(read_all(), vec![0xeeu8; 5000], "after a rename over it");
    m.umount();
    fsck_both(&img);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Mounted by root, the kernel reads ahead 4 MiB on the mount (a sequential reader keeps
/// four 1 MiB requests in flight instead of eight of 128 KiB one at a time), also at a mount
/// point whose name /proc/self/mountinfo escapes; and it holds at most a 32nd of the user
/// space dirty, at most 64 MiB (the mount bdi's `max_bytes`, raised above the kernel's own
/// default on a large volume), with that bound, a quarter more and 4 MiB kept back from
/// statfs.
#[test]
fn root_mounts_read_ahead_four_mib_and_bound_dirty_pages() {
    let dir = scratch("mount-readahead");
    let bdi = |m: &Mount, knob: &str| -> u64 {
        let at = m.dir.canonicalize().unwrap();
        let want = at.to_str().unwrap().replace(' ', "\\040");
        let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
        let dev = info
            .lines()
            .rev()
            .filter(|l| l.split(' ').nth(4) == Some(want.as_str()))
            .find_map(|l| l.split(' ').nth(2))
            .unwrap_or_else(|| panic!("no mountinfo line for {want}:\n{info}"))
            .to_string();
        let v = std::fs::read_to_string(format!("/sys/class/bdi/{dev}/{knob}")).unwrap();
        v.trim().parse().unwrap()
    };
    let img = dir.join("img");
    mkfs(&img, "64M");
    let m = Mount::new(&bin(), &img, &dir.join("mount point"), &[]);
    assert_eq!(bdi(&m, "read_ahead_kb"), 4096);
    // A small volume: a 32nd of its user space is less than the floor, 1 MiB (the kernel
    // rounds what it is given).
    let small = bdi(&m, "max_bytes");
    assert!(
        small.abs_diff(1 << 20) <= (1 << 20) / 100,
        "max_bytes {small} on a 64 MiB volume"
    );
    m.umount();
    fsck_both(&img);
    let big = dir.join("big");
    mkfs(&big, "4G");
    let m = Mount::new(&bin(), &big, &dir.join("big mount"), &[]);
    let bound = bdi(&m, "max_bytes");
    assert!(
        bound.abs_diff(64 << 20) <= (64 << 20) / 100,
        "max_bytes {bound} on a 4 GiB volume"
    );
    let kept = status(&m.dir)
        .pointer("/write_stops/kept_back_bytes")
        .and_then(|v| v.as_u64());
    assert_eq!(kept, Some((64 << 20) + (16 << 20) + (4 << 20)));
    m.umount();
    fsck_both(&big);
    let _ = std::fs::remove_dir_all(&dir);
}

/// With `FUSE_HANDLE_KILLPRIV_V2` the daemon removes what Linux removes when a file changes:
/// set-user-ID and (on a group-executable file) set-group-ID on a write, truncate or
/// fallocate by a caller without CAP_FSETID, both on a chown by anyone, and the file
/// capability (`security.capability`) on any of them, root's included.
#[test]
fn changing_a_file_removes_set_id_bits_and_capabilities_as_linux_does() {
    use std::io::Write;
    use std::os::unix::fs::MetadataExt;
    if !rustix::process::geteuid().is_root() {
        eprintln!("skipped: needs root to write as another user");
        return;
    }
    let dir = scratch("mount-killpriv");
    let img = dir.join("img");
    mkfs(&img, "128M");
    let m = Mount::new(&bin(), &img, &dir.join("mnt"), &["allow_other"]);
    std::fs::set_permissions(&m.dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let mode = |f: &Path| std::fs::metadata(f).unwrap().mode() & 0o7777;
    // (starting mode, what nobody does, the mode after)
    for (start, what, want) in [
        (0o6777, "printf x >> \"$1\"", 0o777),
        (0o6767, "printf x >> \"$1\"", 0o2767),
        (0o6777, "truncate -s 1 \"$1\"", 0o777),
        (0o6777, "fallocate -l 8192 \"$1\"", 0o777),
    ] {
        let f = m
            .dir
            .join(format!("f{start:o}-{}", what.split(' ').next().unwrap()));
        std::fs::write(&f, b"").unwrap();
        // nobody's group: set-group-ID without group-execute stays (the other case, a
        // writer outside the group, is the test above).
        std::os::unix::fs::chown(&f, None, Some(65534)).unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(start)).unwrap();
        as_nobody(what, &f);
        assert_eq!(mode(&f), want, "{start:o} after {what}: {:o}", mode(&f));
    }
    // Root keeps the bits when it writes (it holds CAP_FSETID) but not the capability.
    let cap = [
        1u8, 0, 0, 2, 0, 0x20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    ];
    let f = m.dir.join("root-write");
    std::fs::write(&f, b"").unwrap();
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o6755)).unwrap();
    rustix::fs::setxattr(
        &f,
        "security.capability",
        &cap,
        rustix::fs::XattrFlags::empty(),
    )
    .unwrap();
    std::fs::OpenOptions::new()
        .append(true)
        .open(&f)
        .unwrap()
        .write_all(b"x")
        .unwrap();
    assert_eq!(mode(&f), 0o6755, "root's write keeps set-user/group-ID");
    let mut buf = [0u8; 64];
    let e = rustix::fs::getxattr(&f, "security.capability", &mut buf).unwrap_err();
    assert_eq!(
        e,
        rustix::io::Errno::NODATA,
        "the capability goes on a write"
    );
    // A chown takes both bits (group-executable) and the capability, also from root.
    rustix::fs::setxattr(
        &f,
        "security.capability",
        &cap,
        rustix::fs::XattrFlags::empty(),
    )
    .unwrap();
    std::os::unix::fs::chown(&f, Some(65534), None).unwrap();
    assert_eq!(mode(&f), 0o755, "chown takes set-user-ID and set-group-ID");
    let e = rustix::fs::getxattr(&f, "security.capability", &mut buf).unwrap_err();
    assert_eq!(
        e,
        rustix::io::Errno::NODATA,
        "the capability goes on a chown"
    );
    m.umount();
    fsck_both(&img);
    let _ = std::fs::remove_dir_all(&dir);
}
