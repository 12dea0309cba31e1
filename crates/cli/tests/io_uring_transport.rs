//! FUSE over io_uring (vendor/fuser/src/uring.rs): with the kernel's offer on, the daemon
//! serves one queue per CPU, and everything a program does reaches the image exactly as over
//! /dev/fuse. Requests are sent from each CPU in turn so that every queue carries some, with
//! payloads from nothing to 1 MiB (the largest a queue's buffer takes) and errors; the image
//! is then read with nothing mounted and judged by fsck.f2fs. `noio_uring` keeps /dev/fuse.
//!
//! The kernel offers io_uring only when the `fuse` module's `enable_uring` parameter is on
//! (scripts/setup.sh turns it on where the kernel has it). On a kernel without the parameter
//! (before Linux 6.14) the io_uring test says so and checks only that /dev/fuse is used.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    reason = "test code: a panic is the failure report"
)]

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use uf2fs_testkit::{assert_fsck_clean, run, scratch, uf2fs_cat, Mount, Rng};

const ENABLE: &str = "/sys/module/fuse/parameters/enable_uring";

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

fn transport(mnt: &Path) -> String {
    let st = run(Command::new(bin()).arg("status").arg("--json").arg(mnt));
    let v: serde_json::Value = serde_json::from_str(&st).unwrap();
    v["transport"].as_str().unwrap().to_string()
}

fn cat(img: &Path, path: &str) -> Vec<u8> {
    uf2fs_cat(&bin(), img, path)
}

fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Runs `f` on a thread pinned to `cpu`, so that its requests go to that CPU's queue.
fn on_cpu<T: Send>(cpu: usize, f: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut set = rustix::thread::CpuSet::new();
            set.set(cpu);
            rustix::thread::sched_setaffinity(None, &set).unwrap();
            f()
        })
        .join()
        .unwrap()
    })
}

/// Files of 0 bytes to 3 MiB written with one write(2) each (the largest arrive as 1 MiB
/// requests), a directory of many names (readdir replies fill their buffers), renames,
/// xattrs and the errors of missing names, each from every CPU in turn; what the mount shows
/// and what the image holds afterwards are the model.
fn workload(mnt: &Path) -> Vec<(String, Vec<u8>)> {
    let mut rng = Rng::new(7);
    let mut files = Vec::new();
    let sizes = [0usize, 1, 4095, 4096, 65_537, 1 << 20, (3 << 20) + 123];
    for cpu in 0..cpus() {
        let dir = mnt.join(format!("cpu{cpu}"));
        let written = on_cpu(cpu, || {
            std::fs::create_dir(&dir).unwrap();
            let mut written = Vec::new();
            for (i, &size) in sizes.iter().enumerate() {
                let data = rng.bytes(size);
                let name = format!("cpu{cpu}/f{i}");
                std::fs::write(mnt.join(&name), &data).unwrap();
                assert_eq!(std::fs::read(mnt.join(&name)).unwrap(), data, "{name}");
                written.push((name, data));
            }
            for n in 0..300 {
                std::fs::write(
                    dir.join(format!("small-{n:04}-{}", "x".repeat(n % 200))),
                    b"s",
                )
                .unwrap();
            }
            let listed = std::fs::read_dir(&dir).unwrap().count();
            assert_eq!(
                listed,
                sizes.len() + 300,
                "entries listed in {}",
                dir.display()
            );
            std::fs::rename(dir.join("f1"), dir.join("renamed")).unwrap();
            let (_, data) = written.remove(1);
            written.push((format!("cpu{cpu}/renamed"), data));
            rustix::fs::setxattr(
                dir.join("renamed").as_path(),
                "user.cpu",
                cpu.to_string().as_bytes(),
                rustix::fs::XattrFlags::empty(),
            )
            .unwrap();
            let mut value = [0u8; 16];
            let n = rustix::fs::getxattr(dir.join("renamed").as_path(), "user.cpu", &mut value)
                .unwrap();
            assert_eq!(&value[..n], cpu.to_string().as_bytes());
            let missing = std::fs::metadata(dir.join("no-such-name")).unwrap_err();
            assert_eq!(
                missing.raw_os_error(),
                Some(libc_enoent()),
                "a missing name"
            );
            assert_eq!(
                std::fs::metadata(mnt.join(&written[0].0)).unwrap().size(),
                0
            );
            written
        });
        files.extend(written);
    }
    files
}

fn libc_enoent() -> i32 {
    rustix::io::Errno::NOENT.raw_os_error()
}

fn check_image(img: &Path, files: &[(String, Vec<u8>)]) {
    for (name, data) in files {
        assert!(cat(img, name) == *data, "{name} as the image holds it");
    }
    assert_fsck_clean(img);
}

#[test]
fn requests_from_every_cpu_travel_through_the_io_uring_queues() {
    if !Path::new(ENABLE).exists() {
        eprintln!("this kernel has no FUSE over io_uring ({ENABLE} is missing): not tested");
        return;
    }
    // The offer is the kernel's, for every FUSE daemon that asks; turning it on is what
    // scripts/setup.sh does on a machine that runs these tests.
    std::fs::write(ENABLE, "Y").unwrap();
    let dir = scratch("io-uring");
    let img = dir.join("img");
    mkfs(&img, "256M");
    let mnt = dir.join("mnt");
    let m = Mount::new(&bin(), &img, &mnt, &[]);
    let t = transport(&mnt);
    assert!(
        t.starts_with(&format!("io_uring, {} queues", cpus())),
        "transport: {t}"
    );
    let files = workload(&mnt);
    m.umount();
    check_image(&img, &files);

    // The image mounts again (the ring's teardown left nothing behind) and reads the same.
    let m = Mount::new(&bin(), &img, &mnt, &[]);
    for (name, data) in &files {
        assert!(std::fs::read(mnt.join(name)).unwrap() == *data, "{name}");
    }
    m.umount();
}

#[test]
fn noio_uring_keeps_dev_fuse() {
    let dir = scratch("no-io-uring");
    let img = dir.join("img");
    mkfs(&img, "256M");
    let mnt = dir.join("mnt");
    let m = Mount::new(&bin(), &img, &mnt, &["noio_uring"]);
    assert_eq!(transport(&mnt), "/dev/fuse");
    let files = workload(&mnt);
    m.umount();
    check_image(&img, &files);
}

/// A READ the engine refuses (a block pointer beyond the device, written into the file's
/// direct node) answers EIO for the range it covers, the same way on both transports: the
/// reply's data goes straight into the queue's buffer over io_uring, and the error must take
/// that path too. The file's other blocks and other files still read, and the thread that
/// answered the error serves on.
#[test]
fn a_read_the_image_cannot_serve_fails_alone_on_either_transport() {
    let dir = scratch("read-error");
    let img = dir.join("img");
    mkfs(&img, "64M");
    let mnt = dir.join("mnt");
    // 1100 blocks: past what the inode holds, so the tail lies behind a direct node.
    let big: Vec<u8> = (0..1100 * 4096u32)
        .map(|i| (i / 4096 + i % 251) as u8)
        .collect();
    let small = b"small file, unharmed\n".repeat(300);
    let m = Mount::new(&bin(), &img, &mnt, &[]);
    std::fs::write(mnt.join("big"), &big).unwrap();
    std::fs::write(mnt.join("small"), &small).unwrap();
    m.umount();

    let stat = run(Command::new(bin())
        .args(["stat", "--json"])
        .arg(&img)
        .arg("/big"));
    let stat: serde_json::Value = serde_json::from_str(&stat).unwrap();
    let ino = u32::try_from(stat["attr"]["ino"].as_u64().unwrap()).unwrap();
    // Every copy of the file's direct node (footer: nid at 4072, ino at 4076, the nid not
    // the inode's) now points its first slot past the end of the device.
    let mut bytes = std::fs::read(&img).unwrap();
    let mut damaged = 0;
    for block in bytes.chunks_exact_mut(4096) {
        let word = |b: &[u8], at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
        if word(block, 4076) == ino && word(block, 4072) != ino && word(block, 0) != 0 {
            block[0..4].copy_from_slice(&0xffff_ff00u32.to_le_bytes());
            damaged += 1;
        }
    }
    assert!(damaged > 0, "the file's direct node was not found");
    std::fs::write(&img, &bytes).unwrap();

    for opts in [&["ro"][..], &["ro", "noio_uring"][..]] {
        let m = Mount::new(&bin(), &img, &mnt, opts);
        let e = std::fs::read(mnt.join("big")).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(5), "{opts:?}: the damaged file: {e}");
        // The first MiB lies in blocks the inode names, away from the damage.
        let f = std::fs::File::open(mnt.join("big")).unwrap();
        let mut head = vec![0u8; 1 << 20];
        std::os::unix::fs::FileExt::read_exact_at(&f, &mut head, 0).unwrap();
        assert!(head == big[..1 << 20], "{opts:?}: the file's first MiB");
        for _ in 0..3 {
            assert_eq!(std::fs::read(mnt.join("small")).unwrap(), small, "{opts:?}");
            let e = std::fs::read(mnt.join("big")).unwrap_err();
            assert_eq!(e.raw_os_error(), Some(5), "{opts:?}: again: {e}");
        }
        drop(f);
        m.umount();
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// With the yield, serving threads stay in SCHED_IDLE between small requests; beside busy
/// programs on every CPU such a thread gets a sliver of its CPU, and the guard must put one
/// that has served a request for 2 ms back in SCHED_OTHER (status counts it), so that
/// requests still finish in their normal share of the CPU. Every file must read back.
#[test]
fn a_request_kept_off_its_cpu_by_busy_programs_is_lifted_out_of_sched_idle() {
    if !Path::new(ENABLE).exists() {
        eprintln!("this kernel has no FUSE over io_uring ({ENABLE} is missing): not tested");
        return;
    }
    std::fs::write(ENABLE, "Y").unwrap();
    let dir = scratch("io-uring-guard");
    let img = dir.join("img");
    mkfs(&img, "256M");
    let mnt = dir.join("mnt");
    let m = Mount::new(&bin(), &img, &mnt, &[]);
    let status = || run(Command::new(bin()).arg("status").arg(&mnt));
    let lifted = |text: &str| -> u64 {
        let at = text
            .find(" lifted to SCHED_OTHER")
            .unwrap_or_else(|| panic!("no lift count in the status:\n{text}"));
        let head = &text[..at];
        head[head.rfind('(').unwrap() + 1..].parse().unwrap()
    };
    let before = lifted(&status());
    // Two busy loops on every CPU, at the normal priority.
    let stop = std::sync::atomic::AtomicBool::new(false);
    let started = std::time::Instant::now();
    let mut slowest = std::time::Duration::ZERO;
    std::thread::scope(|s| {
        for cpu in 0..cpus() * 2 {
            let stop = &stop;
            s.spawn(move || {
                let mut set = rustix::thread::CpuSet::new();
                set.set(cpu % cpus());
                rustix::thread::sched_setaffinity(None, &set).unwrap();
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            });
        }
        slowest = on_cpu(0, || {
            let mut slowest = std::time::Duration::ZERO;
            for i in 0..300 {
                let t = std::time::Instant::now();
                let p = mnt.join(format!("f{i}"));
                std::fs::write(&p, format!("file {i}")).unwrap();
                std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o640))
                    .unwrap();
                if i % 10 == 0 {
                    // A directory's fsync writes a checkpoint: a request of some length.
                    std::fs::File::open(&mnt).unwrap().sync_all().unwrap();
                }
                slowest = slowest.max(t.elapsed());
            }
            slowest
        });
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    let took = started.elapsed();
    let after = lifted(&status());
    assert!(
        after > before,
        "no request was lifted out of SCHED_IDLE beside busy loops ({before} before, {after} \
         after; 300 files in {took:?}, slowest {slowest:?})"
    );
    assert!(
        took < std::time::Duration::from_secs(60),
        "300 files took {took:?} beside busy loops"
    );
    for i in 0..300 {
        assert_eq!(
            std::fs::read_to_string(mnt.join(format!("f{i}"))).unwrap(),
            format!("file {i}")
        );
    }
    m.umount();
    check_image(&img, &[]);
}
