//! A full disk: writes are refused with ENOSPC before anything changes, every earlier write
//! stays intact, the image passes fsck.f2fs, and space freed by deleting comes back after
//! the next checkpoint (without a cleaner, only whole emptied segments come back).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    reason = "test code: a panic is the failure report"
)]

mod common;

use uf2fs_engine::{Error, Fs};
use uf2fs_testkit::{assert_fsck_clean, kernel_f2fs, scratch, Rng};

fn file(fs: &Fs, name: &str) -> Result<u32, Error> {
    fs.create_node(fs.root_ino(), name.as_bytes(), common::node(0o100644))
}

fn content(i: usize, len: usize) -> Vec<u8> {
    Rng::new(i as u64 + 1).bytes(len)
}

#[test]
fn enospc_is_clean_and_space_comes_back() {
    let dir = scratch("full");
    let img = common::fresh_image(&dir, 128, 0);
    let fs = Fs::open_rw(&img).unwrap();
    let len = 1 << 20;
    let mut written = Vec::new();
    let err = loop {
        let i = written.len();
        let ino = match file(&fs, &format!("f{i}")) {
            Ok(ino) => ino,
            Err(e) => break e,
        };
        match fs.write(ino, 0, &content(i, len)) {
            Ok(_) => written.push(i),
            Err(e) => {
                fs.unlink(fs.root_ino(), format!("f{i}").as_bytes())
                    .unwrap();
                break e;
            }
        }
        assert!(i < 1000, "a 128 MiB image cannot hold 1000 MiB");
    };
    assert!(matches!(err, Error::NoSpace), "{err}");
    assert_eq!(err.errno(), 28);
    assert!(written.len() > 40, "only {} MiB fitted", written.len());
    // Refused cleanly: the volume still works and checkpoints.
    fs.sync().unwrap();
    fs.unmount().unwrap();
    assert_fsck_clean(&img);
    let fs = Fs::open_rw(&img).unwrap();
    for &i in &written {
        let ino = fs
            .lookup(fs.root_ino(), format!("f{i}").as_bytes())
            .unwrap();
        let mut buf = vec![0u8; len];
        fs.read(ino, 0, &mut buf).unwrap();
        assert!(buf == content(i, len), "f{i} intact");
    }
    // Free half; after a checkpoint the emptied segments are free again.
    for &i in written.iter().step_by(2) {
        fs.unlink(fs.root_ino(), format!("f{i}").as_bytes())
            .unwrap();
    }
    fs.sync().unwrap();
    let mut again = 0;
    for k in 0..written.len() / 4 {
        let ino = file(&fs, &format!("g{k}")).unwrap();
        fs.write(ino, 0, &content(1000 + k, len)).unwrap();
        again += 1;
    }
    fs.unmount().unwrap();
    assert_fsck_clean(&img);
    let k = kernel_f2fs(
        &img,
        "cd /mnt && ls | wc -l > $OUT/n.txt && cat g0 > /dev/null\n",
        &dir.join("k"),
    );
    assert_eq!(k.exit, 0, "{}", k.job_log);
    assert!(k.f2fs_complaints().is_empty(), "{:#?}", k.f2fs_complaints());
    let n: usize = std::fs::read_to_string(k.out.join("n.txt"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(n, written.len() - written.len().div_ceil(2) + again);
    eprintln!(
        "{} MiB fitted, ENOSPC clean, {again} MiB written again after freeing half",
        written.len()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Space emptied by deletes and overwrites comes back without the caller asking for a
/// checkpoint: a change that finds too few free segments writes one first. Six times the
/// volume's size goes through a 128 MiB image here, 24 MiB live at most, with no sync. The
/// space check once counted the rest of the six logs' segments as room for any log, so the
/// warm data log ran out of free segments with ~2500 "writable" blocks left in the others:
/// ENOSPC half-way through a write, the volume read-only (fstests generic/074, 133, 208).
#[test]
fn writing_past_the_volume_size_reclaims_emptied_segments() {
    let dir = scratch("full-cycle");
    let img = common::fresh_image(&dir, 128, 0);
    let fs = Fs::open_rw(&img).unwrap();
    let len = 24 << 20;
    for i in 0..32 {
        let ino = file(&fs, "f").unwrap();
        for (k, chunk) in content(i, len).chunks(1 << 20).enumerate() {
            fs.write(ino, (k << 20) as u64, chunk).unwrap_or_else(|e| {
                let s = fs.status().unwrap();
                panic!(
                    "round {i}, MiB {k}: {e}; {:?} prefree {} checkpoints {}/{} {:?}",
                    s.segments,
                    s.prefree_segments,
                    s.checkpoints.requested,
                    s.checkpoints.written,
                    s.usage
                )
            });
        }
        // and once over in place (in 1 MiB writes, as FUSE sends them)
        for (k, chunk) in content(i + 100, len).chunks(1 << 20).enumerate() {
            fs.write(ino, (k << 20) as u64, chunk)
                .unwrap_or_else(|e| panic!("round {i}, overwrite MiB {k}: {e}"));
        }
        fs.unlink(fs.root_ino(), b"f").unwrap();
    }
    fs.unmount().unwrap();
    assert_fsck_clean(&img);
    let _ = std::fs::remove_dir_all(&dir);
}
