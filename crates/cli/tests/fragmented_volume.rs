//! A volume whose free space is all holes: random 4 KiB rewrites in adaptive mode have spread
//! one file over nearly every segment, so that data fills holes and only the checkpoint's
//! nodes need free sections. Many small files made through the mount then keep the
//! background thread's checkpoints coming while changes wait for room; none of them may fail
//! with ENOSPC on a volume 40% full (until stop 35 a change that met a checkpoint being
//! written gave up: `tar -x` failed after `uf2fs-bench io`'s random writes).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    reason = "test code: a panic is the failure report"
)]

use std::os::unix::fs::FileExt;
use std::path::Path;
use std::process::Command;
use uf2fs_testkit::{assert_fsck_clean, run, scratch, Mount, Rng};

fn bin() -> &'static Path {
    env!("CARGO_BIN_EXE_uf2fs").as_ref()
}

fn status(of: &Path) -> serde_json::Value {
    let s = run(Command::new(bin()).args(["status", "--json"]).arg(of));
    serde_json::from_str(&s).unwrap()
}

#[test]
fn small_files_on_a_volume_whose_free_space_is_holes_never_meet_enospc() {
    let dir = scratch("fragmented");
    let img = dir.join("img");
    run(Command::new(bin())
        .arg("mkfs")
        .arg(&img)
        .args(["--size", "2048M"]));
    // A 512 MiB file, then random 4 KiB rewrites of it through the mount.
    {
        let m = Mount::new(bin(), &img, &dir.join("mnt"), &[]);
        let f = std::fs::File::create(m.dir.join("big")).unwrap();
        let mib = vec![0x5au8; 1 << 20];
        for i in 0..512u64 {
            f.write_all_at(&mib, i << 20).unwrap();
        }
        f.sync_all().unwrap();
        // Four writers for 20 s, as the benchmark's fio jobs (several GiB of rewrites: the
        // kernel's dirty bound sends most of them down as single blocks).
        let stop = std::time::Instant::now() + std::time::Duration::from_secs(20);
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let f = &f;
                s.spawn(move || {
                    let mut rng = Rng::new(35 + t);
                    let block = [0xa5u8; 4096];
                    while std::time::Instant::now() < stop {
                        for _ in 0..256 {
                            f.write_all_at(&block, rng.below(131_072) * 4096).unwrap();
                        }
                    }
                });
            }
        });
        f.sync_all().unwrap();
        drop(f);
        m.umount();
    }
    let free = status(&img)["segments"]["free_segments"].as_u64().unwrap();
    assert!(
        free < 100,
        "{free} free segments: the volume is not fragmented enough"
    );
    let m = Mount::new(bin(), &img, &dir.join("mnt"), &[]);
    let tree = m.dir.join("tree");
    let mut rng = Rng::new(36);
    for d in 0..100 {
        let sub = tree.join(format!("d{d:03}"));
        std::fs::create_dir_all(&sub).unwrap();
        for k in 0..100 {
            let len = 1 + rng.below(12_000) as usize;
            let path = sub.join(format!("file-with-a-longer-name-{k:03}.txt"));
            if let Err(e) = std::fs::write(&path, vec![b'x'; len]) {
                let s = status(&m.dir);
                panic!(
                    "{}: {e}\nsegments {}\ngc {}",
                    path.display(),
                    s["segments"],
                    s["gc"]
                );
            }
        }
    }
    let s = status(&m.dir);
    m.umount();
    assert_fsck_clean(&img);
    eprintln!("segments after: {}; gc: {}", s["segments"], s["gc"]);
    let _ = std::fs::remove_dir_all(&dir);
}
