//! `uf2fs-bench memfs`, the io bench's transport floor: it must be a file system the tree
//! workloads really run on (else its times would be of errors), over each transport it
//! offers: a tree extracted with tar reads back byte for byte with its modes and times, a
//! copy with `cp -a` equals it, a file unlinked while open still reads and writes through its
//! descriptor, `rm -rf` empties it, and the requests it reports count what was done.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    reason = "test code: a panic is the failure report"
)]

use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::{Child, Command};
use std::time::Duration;
use uf2fs_testkit::{run, scratch};

struct Served {
    child: Child,
    mnt: std::path::PathBuf,
}

impl Served {
    fn start(mnt: &Path, transport: &str) -> Served {
        std::fs::create_dir_all(mnt).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_uf2fs-bench"))
            .args(["memfs", "--transport", transport])
            .arg(mnt)
            .spawn()
            .unwrap();
        let mut served = Served {
            child,
            mnt: mnt.to_path_buf(),
        };
        for _ in 0..200 {
            if Command::new("mountpoint")
                .arg("-q")
                .arg(mnt)
                .status()
                .unwrap()
                .success()
            {
                return served;
            }
            if let Some(st) = served.child.try_wait().unwrap() {
                panic!("memfs exited before mounting: {st}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("memfs did not mount on {}", mnt.display());
    }

    fn requests(&self) -> serde_json::Map<String, serde_json::Value> {
        let mut buf = vec![0u8; 64 << 10];
        let n = rustix::fs::getxattr(&self.mnt, "user.memfs.requests", &mut buf[..]).unwrap();
        serde_json::from_slice::<serde_json::Value>(&buf[..n])
            .unwrap()
            .as_object()
            .unwrap()
            .clone()
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.mnt).status();
        for _ in 0..100 {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A small tree: nested directories, files from empty to 300 KiB, modes, a symlink, a
/// hard link, old times.
fn make_tree(src: &Path) {
    for (i, size) in [0usize, 1, 4095, 4096, 70_000, 300_000].iter().enumerate() {
        let d = src.join(format!("d{}/e{}", i % 2, i % 3));
        std::fs::create_dir_all(&d).unwrap();
        let data: Vec<u8> = (0..*size).map(|k| (k * 7 + i) as u8).collect();
        let f = d.join(format!("f{i}"));
        std::fs::write(&f, &data).unwrap();
        run(Command::new("chmod").arg(format!("6{}4", i % 8)).arg(&f));
        run(Command::new("touch")
            .args(["-d", &format!("2001-02-0{} 03:04:05", i + 1)])
            .arg(&f));
    }
    std::os::unix::fs::symlink("d0/e0/f0", src.join("link")).unwrap();
    std::fs::hard_link(src.join("d1/e1/f1"), src.join("hard")).unwrap();
}

fn check(transport: &str) {
    let dir = scratch(&format!("memfs-{transport}"));
    let (src, mnt) = (dir.join("src"), dir.join("mnt"));
    make_tree(&src);
    run(Command::new("tar")
        .arg("-cf")
        .arg(dir.join("tree.tar"))
        .arg("-C")
        .arg(&src)
        .arg("."));
    let served = Served::start(&mnt, transport);
    let tree = mnt.join("tree");
    std::fs::create_dir(&tree).unwrap();
    run(Command::new("tar")
        .arg("-xf")
        .arg(dir.join("tree.tar"))
        .arg("-C")
        .arg(&tree));
    run(Command::new("sync").arg("-f").arg(&mnt));
    // Bytes, modes, times, links: as extracted on the host.
    run(Command::new("diff").arg("-r").arg(&src).arg(&tree));
    let listing = |root: &Path| {
        // Files with their times (tar restores them; a directory's or a link's depends on
        // the archive format's precision), everything with its mode and target.
        run(Command::new("find")
            .args(["(", "-type", "f", "-printf", "%p %M %n %s %T+\n", ")"])
            .args(["-o", "-printf", "%p %M %l\n"])
            .current_dir(root))
        .lines()
        .map(str::to_string)
        .collect::<std::collections::BTreeSet<_>>()
    };
    assert_eq!(
        listing(&src),
        listing(&tree),
        "the extracted tree differs from its source"
    );
    assert_eq!(
        std::fs::metadata(tree.join("hard")).unwrap().ino(),
        std::fs::metadata(tree.join("d1/e1/f1")).unwrap().ino()
    );

    // cp -a within the mount.
    let copy = mnt.join("copy");
    run(Command::new("cp").arg("-a").arg(&tree).arg(&copy));
    run(Command::new("diff").arg("-r").arg(&tree).arg(&copy));
    assert_eq!(listing(&tree), listing(&copy), "the copy differs");

    // A file unlinked while open lives on through its descriptor.
    let p = mnt.join("open-unlinked");
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .open(&p)
        .unwrap();
    f.write_all(b"before").unwrap();
    std::fs::remove_file(&p).unwrap();
    f.write_all(b" and after").unwrap();
    f.sync_all().unwrap();
    let mut back = String::new();
    f.seek(SeekFrom::Start(0)).unwrap();
    f.read_to_string(&mut back).unwrap();
    assert_eq!(back, "before and after");
    drop(f);
    assert!(!p.exists());

    let counts = served.requests();
    let n = |k: &str| {
        counts
            .get(k)
            .and_then(serde_json::Value::as_u64)
            .unwrap_or(0)
    };
    // 6 files made by tar, 6 by cp (the hard link is a LINK), 1 more above.
    assert!(
        n("CREATE") >= 13,
        "CREATE counted {}: {counts:?}",
        n("CREATE")
    );
    assert!(n("MKDIR") >= 10, "MKDIR counted {}: {counts:?}", n("MKDIR"));

    run(Command::new("rm").arg("-rf").arg(&tree).arg(&copy));
    run(Command::new("sync").arg("-f").arg(&mnt));
    assert_eq!(std::fs::read_dir(&mnt).unwrap().count(), 0);
    // Eight names in each tree (six files, a symlink, a hard link), and the open file's.
    let unlinks = served.requests()["UNLINK"].as_u64().unwrap();
    assert_eq!(unlinks, 17, "UNLINK counted {unlinks}");
    drop(served);
    assert!(
        !Command::new("mountpoint")
            .arg("-q")
            .arg(&mnt)
            .status()
            .unwrap()
            .success(),
        "memfs still mounted"
    );
}

#[test]
fn memfs_runs_the_tree_workloads_over_io_uring() {
    check("uring");
}

#[test]
fn memfs_runs_the_tree_workloads_over_dev_fuse() {
    check("dev");
}
