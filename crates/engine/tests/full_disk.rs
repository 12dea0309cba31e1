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

/// A full disk with compressed files (zstd, 64 KiB clusters, checksums): files of
/// compressible text fill the volume until ENOSPC; then rewrites of a few bytes in each file
/// (every cluster they touch is stored again) and growing writes continue until ENOSPC too.
/// Every refusal comes before anything changes: the volume stays writable, a checkpoint
/// follows, every byte acknowledged reads back, and fsck.f2fs and uf2fs fsck are clean.
#[test]
fn enospc_is_clean_for_compressed_files() {
    let dir = scratch("full-compressed");
    let img = common::fresh_image_with(
        &dir,
        96,
        &uf2fs_engine::MkfsOptions {
            features: uf2fs_format::superblock::feature::EXTRA_ATTR
                | uf2fs_format::superblock::feature::COMPRESSION,
            ..Default::default()
        },
    );
    let mut fs = Fs::open_rw(&img).unwrap();
    let mut o = fs.options();
    o.compress = uf2fs_engine::CompressOptions {
        algorithm: uf2fs_engine::compress::Algorithm::Zstd,
        log_cluster_size: 4,
        checksum: true,
        ..Default::default()
    };
    fs.set_options(o);
    let d = fs
        .create_node(fs.root_ino(), b"c", common::node(0o040755))
        .unwrap();
    let flags = fs.fs_flags(d).unwrap();
    fs.set_fs_flags(d, flags | 0x4).unwrap();
    // Text that compresses to about a third, different in every file.
    let text = |i: usize, len: usize| -> Vec<u8> {
        let mut rng = Rng::new(i as u64 + 7);
        let words: Vec<Vec<u8>> = (0..64).map(|_| rng.bytes(6)).collect();
        let mut v = Vec::with_capacity(len);
        while v.len() < len {
            v.extend_from_slice(&words[(rng.next_u64() % 64) as usize]);
            v.push(b' ');
        }
        v.truncate(len);
        v
    };
    let len = 2 << 20;
    let mut model: Vec<(u32, Vec<u8>)> = Vec::new();
    let err = loop {
        let i = model.len();
        let ino = fs
            .create_node(d, format!("f{i}").as_bytes(), common::node(0o100644))
            .unwrap();
        let data = text(i, len);
        match fs.write(ino, 0, &data) {
            Ok(_) => model.push((ino, data)),
            Err(e) => {
                // Whatever part went in is the file's now: keep the model exact.
                let size = fs.getattr(ino).unwrap().size as usize;
                let mut got = vec![0u8; size];
                fs.read(ino, 0, &mut got).unwrap();
                assert!(got[..] == data[..size], "f{i}: the part written");
                model.push((ino, got));
                break e;
            }
        }
        assert!(i < 200, "a 96 MiB image cannot hold 400 MiB");
    };
    assert!(matches!(err, Error::NoSpace), "{err}");
    // Compressed clusters keep every slot counted as used (as in Linux, until their saved
    // blocks are released): the files fill the user's blocks, all but the room one more
    // 2 MiB write asks for (its clusters twice, as a rewrite of each may need).
    let st = fs.statfs();
    assert!(
        st.blocks_free * 100 < st.blocks * 15,
        "ENOSPC with {} of {} blocks free",
        st.blocks_free,
        st.blocks
    );
    assert!(fs.is_writable(), "the volume stays writable after ENOSPC");
    let c = fs
        .compression(model[0].0)
        .unwrap()
        .expect("f0 is compressed");
    assert!(c.compr_blocks > 100, "f0 saves blocks: {c:?}");
    // Rewrites into compressed clusters and growing writes until the space ends again.
    let mut rng = Rng::new(99);
    let mut refused = 0;
    for round in 0..400 {
        let k = (rng.next_u64() % model.len() as u64) as usize;
        let (ino, m) = &mut model[k];
        let (off, bytes) = if round % 3 == 0 {
            (m.len(), rng.bytes(70_000))
        } else {
            let off = (rng.next_u64() % m.len().max(1) as u64) as usize;
            (off, rng.bytes(100))
        };
        match fs.write(*ino, off as u64, &bytes) {
            Ok(_) => {
                if m.len() < off + bytes.len() {
                    m.resize(off + bytes.len(), 0);
                }
                m[off..off + bytes.len()].copy_from_slice(&bytes);
            }
            Err(Error::NoSpace) => refused += 1,
            Err(e) => panic!("round {round}: {e}"),
        }
    }
    assert!(refused > 0, "the rewrites never met a full volume");
    assert!(fs.is_writable(), "the volume stays writable");
    fs.sync().unwrap();
    fs.unmount().unwrap();
    assert_fsck_clean(&img);
    let fs = Fs::open(&img).unwrap();
    let report = fs.check().unwrap();
    assert!(report.findings.is_empty(), "{:#?}", report.findings);
    for (k, (ino, m)) in model.iter().enumerate() {
        let mut got = vec![0u8; m.len() + 1];
        let n = fs.read(*ino, 0, &mut got).unwrap();
        assert!(n == m.len() && got[..n] == m[..], "f{k} reads back");
    }
    eprintln!("{} files, {refused} of 400 rewrites refused", model.len());
    let _ = std::fs::remove_dir_all(&dir);
}

/// A volume whose user space is full to its last blocks (appended to until ENOSPC) still
/// takes rewrites of the blocks it holds, each made durable: a rewrite takes new blocks on
/// the device but frees as many, so it needs none of the user's space (Linux's F2FS counts
/// only new blocks against it). Every block reads back as last written, before and after a
/// remount, and fsck.f2fs is clean.
#[test]
fn rewrites_need_no_user_space_on_a_volume_full_to_its_last_blocks() {
    const BS: usize = 4096;
    let dir = scratch("full-rewrite");
    let img = common::fresh_image(&dir, 128, 0);
    let fs = Fs::open_rw(&img).unwrap();
    let ino = file(&fs, "f").unwrap();
    let mut model: Vec<Vec<u8>> = Vec::new();
    let err = loop {
        let data = content(model.len(), BS);
        match fs.write(ino, (model.len() * BS) as u64, &data) {
            Ok(_) => model.push(data),
            Err(e) => break e,
        }
        assert!(model.len() < 1 << 16, "a 128 MiB image cannot hold 256 MiB");
    };
    assert_eq!(err.errno(), 28, "{err}");
    // What an append asks for (its block and as many for nodes, and 8) no longer fits.
    let free = fs.statfs().blocks_free;
    assert!(free < 10, "appends stopped with {free} blocks free");
    let mut rng = Rng::new(77);
    for n in 0..2000 {
        let blk = rng.below(model.len() as u64) as usize;
        let data = rng.bytes(BS);
        fs.write(ino, (blk * BS) as u64, &data)
            .and_then(|_| fs.fsync(ino, false))
            .unwrap_or_else(|e| panic!("rewrite {n} of block {blk} with {free} blocks free: {e}"));
        model[blk] = data;
    }
    let check = |fs: &Fs| {
        let mut buf = vec![0u8; BS];
        for (blk, want) in model.iter().enumerate() {
            fs.read(ino, (blk * BS) as u64, &mut buf).unwrap();
            assert!(&buf == want, "block {blk}");
        }
    };
    check(&fs);
    fs.unmount().unwrap();
    assert_fsck_clean(&img);
    let fs = Fs::open(&img).unwrap();
    check(&fs);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A log's segment that loses every block while the log is still writing it is not free
/// when the log leaves it: the last checkpoint may still name blocks in it, so it waits in
/// the prefree set for the next checkpoint like any other emptied segment. (It was counted
/// free at once, and a volume that wrapped around could overwrite the blocks a crash would
/// have recovered.)
#[test]
fn a_log_segment_emptied_while_written_waits_for_the_next_checkpoint() {
    let dir = scratch("left-empty");
    let img = common::fresh_image(&dir, 128, 0);
    let fs = Fs::open_rw(&img).unwrap();
    // The warm data log's segment as mounted; new files' data goes there.
    let start = fs.checkpoint().cursegs[1];
    let room = 512 - usize::from(start.blkoff);
    // One file's blocks fill half the rest, named by a checkpoint, then another's the rest
    // of it; both are removed, and the segment has nothing valid.
    let a = file(&fs, "a").unwrap();
    fs.write(a, 0, &content(0, room / 2 * 4096)).unwrap();
    fs.sync().unwrap();
    fs.unlink(fs.root_ino(), b"a").unwrap();
    let b = file(&fs, "b").unwrap();
    fs.write(b, 0, &content(1, (room - room / 2) * 4096))
        .unwrap();
    fs.unlink(fs.root_ino(), b"b").unwrap();
    let before = fs.status().unwrap().prefree_segments;
    // The next data block takes a new segment: the emptied one is left behind.
    let c = file(&fs, "c").unwrap();
    fs.write(c, 0, &content(2, 4096)).unwrap();
    let after = fs.status().unwrap().prefree_segments;
    assert_eq!(
        after,
        before + 1,
        "the emptied log segment was not held for the checkpoint"
    );
    fs.sync().unwrap();
    assert_eq!(fs.status().unwrap().prefree_segments, 0);
    fs.unmount().unwrap();
    assert_fsck_clean(&img);
    let fs = Fs::open(&img).unwrap();
    assert_ne!(
        fs.checkpoint().cursegs[1].segno,
        start.segno,
        "the log never left"
    );
}
