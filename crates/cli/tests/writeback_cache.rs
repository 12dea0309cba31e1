//! The kernel's writeback cache on a uf2fs mount (on by default): buffered writes gather in
//! the kernel's page cache and reach the daemon in runs. Each thing the daemon must get right
//! for that is checked here through the real mount: pages read back through a write-only
//! handle, appends, sizes and times the kernel keeps between flushes, `uf2fs sync` reaching
//! pages nobody flushed, the kernel's last flush of an unlinked file, a full volume, and the
//! option that turns the cache off.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    reason = "test code: a panic is the failure report"
)]

use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use uf2fs_testkit::{assert_fsck_clean, run, scratch, uf2fs_cat, Mount, Rng};

fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_uf2fs"))
}

fn mkfs(img: &Path, size: &str) {
    run(Command::new(bin())
        .arg("mkfs")
        .arg(img)
        .arg("--size")
        .arg(size));
}

fn status(mnt: &Path) -> serde_json::Value {
    uf2fs_testkit::status_json(&bin(), mnt)
}

/// The file as the image holds it, read by `uf2fs cat` with nothing mounted.
fn cat(img: &Path, path: &str) -> Vec<u8> {
    uf2fs_cat(&bin(), img, path)
}

fn put(model: &mut Vec<u8>, off: usize, data: &[u8]) {
    if model.len() < off + data.len() {
        model.resize(off + data.len(), 0);
    }
    model[off..off + data.len()].copy_from_slice(data);
}

/// Small writes at scattered offsets, a partial-page overwrite through a write-only handle
/// (the kernel must read the rest of that page, through that handle), and appends from two
/// handles: the mount, and the image after unmounting, hold exactly the model's bytes; the
/// size the kernel shows while pages are still dirty is the model's.
#[test]
fn buffered_writes_read_back_through_every_path() {
    let dir = scratch("wb-every-path");
    let img = dir.join("img");
    mkfs(&img, "128M");
    let mnt = dir.join("mnt");
    let m = Mount::new(&bin(), &img, &mnt, &[]);
    assert_eq!(
        status(&mnt).pointer("/mount_options/writeback_cache"),
        Some(&serde_json::Value::Bool(true)),
        "the writeback cache is on by default"
    );

    let mut rng = Rng::new(41);
    let mut model = Vec::new();
    let f = mnt.join("scattered");
    {
        let mut h = std::fs::File::create(&f).unwrap();
        for _ in 0..600 {
            let off = rng.below(3 << 20) as usize;
            let len = 1 + rng.below(9000) as usize;
            let data = rng.bytes(len);
            h.seek(SeekFrom::Start(off as u64)).unwrap();
            h.write_all(&data).unwrap();
            put(&mut model, off, &data);
        }
        // Still open, pages dirty in the kernel: the size it shows is the writes'.
        assert_eq!(std::fs::metadata(&f).unwrap().len(), model.len() as u64);
    }
    // Written once and dropped from the kernel's cache, then a 100-byte overwrite in the
    // middle of a page through a handle that cannot read.
    run(Command::new("sh")
        .arg("-c")
        .arg("echo 3 > /proc/sys/vm/drop_caches"));
    {
        let mut h = std::fs::OpenOptions::new().write(true).open(&f).unwrap();
        let data = rng.bytes(100);
        h.seek(SeekFrom::Start(8192 + 1000)).unwrap();
        h.write_all(&data).unwrap();
        put(&mut model, 8192 + 1000, &data);
    }
    // Two appenders, interleaved.
    let g = mnt.join("appended");
    let mut gmodel = Vec::new();
    {
        let open = || {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&g)
                .unwrap()
        };
        let (mut a, mut b) = (open(), open());
        for i in 0..200 {
            let len = 1 + rng.below(5000) as usize;
            let data = rng.bytes(len);
            if i % 2 == 0 { &mut a } else { &mut b }
                .write_all(&data)
                .unwrap();
            gmodel.extend_from_slice(&data);
        }
    }
    assert!(
        std::fs::read(&f).unwrap() == model,
        "scattered, through the mount"
    );
    assert!(
        std::fs::read(&g).unwrap() == gmodel,
        "appended, through the mount"
    );
    m.umount();
    assert!(cat(&img, "/scattered") == model, "scattered, in the image");
    assert!(cat(&img, "/appended") == gmodel, "appended, in the image");
    assert_fsck_clean(&img);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The kernel keeps a written file's times until it flushes them: what `stat` shows through
/// the mount (mtime and ctime) is what the image holds afterwards, and a time set explicitly
/// after the writes is not overwritten by the flush.
#[test]
fn times_the_kernel_keeps_are_the_ones_the_image_gets() {
    let dir = scratch("wb-times");
    let img = dir.join("img");
    mkfs(&img, "64M");
    let mnt = dir.join("mnt");
    let m = Mount::new(&bin(), &img, &mnt, &[]);
    let (a, b) = (mnt.join("a"), mnt.join("b"));
    {
        let mut h = std::fs::File::create(&a).unwrap();
        for _ in 0..50 {
            h.write_all(&[7u8; 3000]).unwrap();
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }
    let seen = std::fs::metadata(&a).unwrap();
    {
        let mut h = std::fs::File::create(&b).unwrap();
        h.write_all(&[9u8; 70_000]).unwrap();
        // Explicit times while the writes may still sit in the kernel.
        run(Command::new("touch")
            .arg("-m")
            .arg("-d")
            .arg("@1000000000.5")
            .arg(&b));
        h.write_all(&[]).unwrap();
    }
    m.umount();
    let m = Mount::new(&bin(), &img, &mnt, &[]);
    let after = std::fs::metadata(&a).unwrap();
    assert_eq!(
        (after.mtime(), after.mtime_nsec(), after.len()),
        (seen.mtime(), seen.mtime_nsec(), seen.len()),
        "a's mtime and size after a remount"
    );
    // The change time too (fstests generic/003 found it moved: the daemon stamped its own
    // clock when the kernel handed its times over).
    assert_eq!(
        (after.ctime(), after.ctime_nsec()),
        (seen.ctime(), seen.ctime_nsec()),
        "a's ctime after a remount"
    );
    let bm = std::fs::metadata(&b).unwrap();
    assert_eq!(
        (bm.mtime(), bm.mtime_nsec()),
        (1_000_000_000, 500_000_000),
        "b's explicit mtime"
    );
    m.umount();
    assert_fsck_clean(&img);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `uf2fs sync` first has the kernel write back what it holds for the mount: writes to files
/// still open, never flushed nor fsync'd, survive a SIGKILL of the daemon right after it.
/// `syncfs` alone starts those writes but does not wait for them; with many files and one
/// request in the background at a time (`max_background=1`), some are still queued when it
/// returns. And a file written, closed and unlinked (the kernel flushes its times after the
/// daemon freed it) leaves no error behind for the next sync.
#[test]
fn uf2fs_sync_reaches_pages_nobody_flushed() {
    const WRITERS: usize = 12;
    let dir = scratch("wb-sync");
    let img = dir.join("img");
    mkfs(&img, "128M");
    let mnt = dir.join("mnt");
    let m = Mount::new(&bin(), &img, &mnt, &["cp_interval=0", "max_background=1"]);
    let gone = mnt.join("gone");
    std::fs::write(&gone, vec![1u8; 1 << 20]).unwrap();
    std::fs::remove_file(&gone).unwrap();
    // Each writer is a shell whose standard output is its file: it writes with a builtin and
    // starts nothing that inherits the descriptor, because every close of a copy of it (a
    // redirection's dup, a child's exit, this process's own copy) makes the kernel write the
    // file back. It waits for a line on stdin until this process has let go of its copy.
    // Small enough that the kernel keeps it until asked.
    let mut rng = Rng::new(5);
    let mut writers = Vec::new();
    for w in 0..WRITERS {
        let data: Vec<u8> = (0..20_000 + 4096 * w)
            .map(|_| b'a' + rng.below(26) as u8)
            .collect();
        let path = mnt.join(format!("open{w}"));
        let mut writer = Command::new("sh")
            .arg("-c")
            .arg(r#"read go; printf '%s' "$1"; exec sleep 600"#)
            .arg("sh")
            .arg(std::str::from_utf8(&data).unwrap())
            .stdin(std::process::Stdio::piped())
            .stdout(std::fs::File::create(&path).unwrap())
            .spawn()
            .unwrap();
        writer.stdin.take().unwrap().write_all(b"go\n").unwrap();
        writers.push((writer, path, data));
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    for (_, path, data) in &writers {
        while std::fs::metadata(path).unwrap().len() < data.len() as u64 {
            assert!(
                std::time::Instant::now() < deadline,
                "the writer of {} did not write",
                path.display()
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
    let before = status(&mnt)["io"]["written_blocks"]["data"]
        .as_u64()
        .unwrap();
    run(Command::new(bin()).arg("sync").arg(&mnt));
    let after = status(&mnt)["io"]["written_blocks"]["data"]
        .as_u64()
        .unwrap();
    m.umount_with(|d, pid| {
        run(Command::new("kill").args(["-KILL", &pid.to_string()]));
        let _ = Command::new("fusermount3").arg("-uz").arg(d).status();
    });
    // Nothing reached the daemon before the sync asked for it (else this test proves
    // nothing about the sync).
    let blocks: usize = writers.iter().map(|(_, _, d)| d.len().div_ceil(4096)).sum();
    assert!(
        after >= before + blocks as u64,
        "data blocks written: {before} before the sync, {after} after; the files have {blocks}"
    );
    for (mut writer, path, data) in writers {
        let _ = writer.kill();
        let _ = writer.wait();
        let name = format!("/{}", path.file_name().unwrap().to_str().unwrap());
        let got = cat(&img, &name);
        assert!(
            got == data,
            "{name} after SIGKILL: {} bytes, {} written",
            got.len(),
            data.len()
        );
    }
    assert_fsck_clean(&img);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A buffered writer that fills the volume learns it at the latest from fsync (the pages
/// were accepted into the kernel's cache first): ENOSPC, never success; the image stays
/// clean, and once the file is gone the space is usable again.
#[test]
fn a_full_volume_fails_the_fsync_with_enospc() {
    let dir = scratch("wb-full");
    let img = dir.join("img");
    mkfs(&img, "64M");
    let mnt = dir.join("mnt");
    let m = Mount::new(&bin(), &img, &mnt, &[]);
    let f = mnt.join("big");
    let outcome = (|| -> std::io::Result<()> {
        let mut h = std::fs::File::create(&f)?;
        let chunk = vec![0x5au8; 1 << 20];
        for _ in 0..100 {
            h.write_all(&chunk)?;
        }
        h.sync_all()
    })();
    let err = outcome.expect_err("100 MiB fit in a 64 MiB volume");
    assert_eq!(err.raw_os_error(), Some(libc_enospc()), "{err}");
    std::fs::remove_file(&f).unwrap();
    std::fs::write(mnt.join("small"), vec![3u8; 1 << 20]).unwrap();
    let mut back = Vec::new();
    std::fs::File::open(mnt.join("small"))
        .unwrap()
        .read_to_end(&mut back)
        .unwrap();
    assert_eq!(back, vec![3u8; 1 << 20]);
    m.umount();
    assert_fsck_clean(&img);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A writer that keeps writing into a full volume (`dd if=/dev/zero of=F`, fstests
/// generic/015) is stopped by write(2) itself with ENOSPC, and nothing it was told was
/// written is lost: the kernel takes each write into its page cache, so the daemon keeps
/// back free space for what the kernel may hold dirty (statfs does not count it as
/// available), and a cached write that reaches into it is stored and answered with ENOSPC at
/// the writer's next write(2). Before, such a writer ran on for ever (the kernel dropped each
/// page that found no room and took the next). Overwrites of the full file still work.
#[test]
fn a_writer_that_fills_the_volume_is_stopped_by_write() {
    let dir = scratch("wb-fill");
    let img = dir.join("img");
    mkfs(&img, "128M");
    let mnt = dir.join("mnt");
    let m = Mount::new(&bin(), &img, &mnt, &[]);
    let f = mnt.join("fill");
    let mut h = std::fs::File::create(&f).unwrap();
    let chunk = vec![0xa5u8; 1 << 20];
    let mut written = 0u64;
    // Four times the volume: a writer never stopped would reach it.
    let err = loop {
        match h.write(&chunk) {
            Ok(n) => written += n as u64,
            Err(e) => break e,
        }
        assert!(
            written < 512 << 20,
            "write(2) accepted {written} bytes into a 128 MiB volume"
        );
    };
    assert_eq!(err.raw_os_error(), Some(libc_enospc()), "{err}");
    assert!(written > 32 << 20, "stopped after only {written} bytes");
    // Every byte write(2) accepted reached the volume: fsync has nothing to report.
    h.sync_all().expect("fsync after the writer was stopped");
    drop(h);
    // The status shows what was kept back and that a writer was stopped.
    let st = status(&mnt);
    let kept = st
        .pointer("/write_stops/kept_back_bytes")
        .and_then(|v| v.as_u64());
    assert!(kept.is_some_and(|k| k >= 1 << 20), "{st}");
    let stopped = st
        .pointer("/write_stops/writers_stopped")
        .and_then(|v| v.as_u64());
    assert!(stopped.is_some_and(|n| n >= 1), "{st}");
    // The full file can be rewritten (no new space taken).
    {
        let mut h = std::fs::OpenOptions::new().write(true).open(&f).unwrap();
        for _ in 0..(written >> 20) {
            h.write_all(&chunk).unwrap();
        }
        h.sync_all().expect("rewriting the full file");
    }
    m.umount();
    let back = cat(&img, "/fill");
    assert_eq!(
        back.len() as u64,
        written,
        "the file's size after a remount"
    );
    assert!(
        back.iter().all(|&b| b == 0xa5),
        "the file's bytes after a remount"
    );
    let m = Mount::new(&bin(), &img, &mnt, &[]);
    std::fs::remove_file(&f).unwrap();
    std::fs::write(mnt.join("after"), vec![7u8; 4 << 20]).unwrap();
    assert_eq!(
        std::fs::read(mnt.join("after")).unwrap(),
        vec![7u8; 4 << 20]
    );
    m.umount();
    assert_fsck_clean(&img);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A writer of small files that fills the volume (`cp -r`, `tar -x`, seed 001's fill) closes
/// each file before the margin could stop it at write(2): it is stopped at create instead,
/// once free space is inside the margin, and every file it made reads back whole after a
/// remount. Before, it went on creating files into the margin; the pages of the last ones
/// found no room at writeback and those files came back empty, so a later rewrite of them on
/// the full volume failed with ENOSPC.
#[test]
fn a_writer_of_small_files_is_stopped_at_create_with_every_file_whole() {
    let dir = scratch("wb-small");
    let img = dir.join("img");
    mkfs(&img, "64M");
    let mnt = dir.join("mnt");
    let m = Mount::new(&bin(), &img, &mnt, &[]);
    let d = mnt.join("d");
    std::fs::create_dir(&d).unwrap();
    let body = |i: u32| vec![(i % 251) as u8 + 1; 32 << 10];
    let mut made = 0u32;
    let err = loop {
        let p = d.join(format!("f{made}"));
        let mut h = match std::fs::File::create(&p) {
            Ok(h) => h,
            Err(e) => break e,
        };
        h.write_all(&body(made)).unwrap();
        drop(h);
        made += 1;
        assert!(
            made < 8192,
            "made {made} files of 32 KiB in a 64 MiB volume"
        );
    };
    assert_eq!(err.raw_os_error(), Some(libc_enospc()), "{err}");
    // 16 MiB of user space, 5.2 MiB of it kept back: about 300 files of 32 KiB and an inode.
    assert!(made > 250, "stopped after only {made} files");
    // A file the volume holds can still be rewritten.
    std::fs::OpenOptions::new()
        .write(true)
        .open(d.join("f0"))
        .and_then(|mut h| {
            h.write_all(&body(0))?;
            h.sync_all()
        })
        .expect("rewriting a file of the full volume");
    m.umount();
    let m = Mount::new(&bin(), &img, &mnt, &[]);
    for i in 0..made {
        let back = std::fs::read(d.join(format!("f{i}"))).unwrap();
        assert!(back == body(i), "f{i} read back {} bytes", back.len());
    }
    m.umount();
    assert_fsck_clean(&img);
    let _ = std::fs::remove_dir_all(&dir);
}

fn libc_enospc() -> i32 {
    28
}

/// `-o nowriteback_cache` turns the cache off (each write(2) a request, as before): shown
/// in the status, and the bytes are the same.
#[test]
fn the_cache_can_be_turned_off() {
    let dir = scratch("wb-off");
    let img = dir.join("img");
    mkfs(&img, "64M");
    let mnt = dir.join("mnt");
    let m = Mount::new(&bin(), &img, &mnt, &["nowriteback_cache"]);
    assert_eq!(
        status(&mnt).pointer("/mount_options/writeback_cache"),
        Some(&serde_json::Value::Bool(false))
    );
    let data = Rng::new(9).bytes(300_000);
    {
        let mut h = std::fs::File::create(mnt.join("f")).unwrap();
        for c in data.chunks(1000) {
            h.write_all(c).unwrap();
        }
    }
    m.umount();
    assert!(cat(&img, "/f") == data);
    assert_fsck_clean(&img);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A file read entirely from the kernel's page cache (its pages were filled by the writes)
/// still gets its access time, as relatime says: the kernel sends no READ, so the daemon
/// counts an open for reading as the access (fstests generic/003 caught the time standing
/// still). Under `noatime` it stands still.
#[test]
fn reads_from_the_page_cache_move_the_access_time() {
    let dir = scratch("wb-atime");
    let img = dir.join("img");
    mkfs(&img, "64M");
    let mnt = dir.join("mnt");
    for (opts, moves) in [(&[][..], true), (&["noatime"][..], false)] {
        let m = Mount::new(&bin(), &img, &mnt, opts);
        let f = mnt.join("f");
        std::fs::write(&f, b"aaa").unwrap();
        let before = std::fs::metadata(&f).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert_eq!(std::fs::read(&f).unwrap(), b"aaa");
        // Right after, as `stat -c %x` asks (statx for the times only: attributes the
        // kernel still holds would do, unless the daemon says they are stale).
        let after = statx_times(&f);
        let before = (before.atime(), before.atime_nsec());
        assert_eq!(
            after > before,
            moves,
            "atime before {before:?}, after {after:?}, mounted with {opts:?}"
        );
        std::fs::remove_file(&f).unwrap();
        m.umount();
    }
    assert_fsck_clean(&img);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The access time as `stat -c %x` gets it: `stat` asking for the times only.
fn statx_times(f: &Path) -> (i64, i64) {
    // "%X %x": "1795482753 2026-11-24 01:10:52.123456789 +0000".
    let out = run(Command::new("stat").arg("-c").arg("%X %x").arg(f));
    let secs: i64 = out.split_whitespace().next().unwrap().parse().unwrap();
    let frac = out.split('.').nth(1).unwrap();
    let nsec: i64 = frac.split_whitespace().next().unwrap().parse().unwrap();
    (secs, nsec)
}
