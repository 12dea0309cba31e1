//! The cleaner: a volume kept nearly full under constant rewrites keeps working (no ENOSPC
//! while the user's data fits), every byte reads back as last written, before and after a
//! remount, and fsck.f2fs finds the image clean.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    reason = "test code: a panic is the failure report"
)]

mod common;

use std::path::{Path, PathBuf};
use uf2fs_engine::{AllocMode, Fs, GcStats, IpuPolicy, MkfsOptions, Options};
use uf2fs_testkit::{assert_fsck_clean, scratch, Rng};

const BS: usize = 4096;

fn image(dir: &Path, mib: u64, ovp: Option<f64>, segs_per_sec: u32) -> PathBuf {
    common::fresh_image_with(
        dir,
        mib,
        &MkfsOptions {
            overprovision: ovp,
            segs_per_sec,
            ..MkfsOptions::default()
        },
    )
}

/// Fills one file to `pct`% of the user space, then overwrites random blocks `passes` times
/// the file's size (an fsync every `fsync_every` writes, 0 for none) in `mode=lfs`, where
/// only the cleaner makes room, checking every block against a model at the end and after a
/// remount.
fn rewrite_nearly_full(
    name: &str,
    mib: u64,
    ovp: Option<f64>,
    segs_per_sec: u32,
    pct: u64,
    passes: u64,
    fsync_every: u64,
) {
    let (gc, _) = rewrite_in_mode(
        name,
        lfs,
        mib,
        ovp,
        segs_per_sec,
        pct,
        passes,
        fsync_every,
        false,
    );
    assert!(
        gc.data_blocks_moved > 0 && gc.sections_freed > 0,
        "the cleaner never ran: {gc:?}"
    );
}

fn lfs(o: &mut Options) {
    o.mode = AllocMode::Lfs;
}

/// Adaptive mode with no in-place rewrites, so that every rewrite goes to a hole (the
/// default, `ipu=fsync`, would do the same here: no write is synchronous).
fn adaptive(o: &mut Options) {
    o.mode = AllocMode::Adaptive;
    o.ipu = IpuPolicy::Off;
}

/// The rewrites of `rewrite_nearly_full` with the options `set` gives, with the background
/// cleaner's thread running beside the writer if `background` (as the daemon runs it); the
/// cleaner's counters and the user blocks written.
#[allow(
    clippy::too_many_arguments,
    reason = "one test shape, its knobs named at each call"
)]
fn rewrite_in_mode(
    name: &str,
    set: fn(&mut Options),
    mib: u64,
    ovp: Option<f64>,
    segs_per_sec: u32,
    pct: u64,
    passes: u64,
    fsync_every: u64,
    background: bool,
) -> (GcStats, u64) {
    let dir = scratch(name);
    let img = image(&dir, mib, ovp, segs_per_sec);
    let mut fs = Fs::open_rw(&img).unwrap();
    let mut o = fs.options();
    set(&mut o);
    fs.set_options(o);
    let fs = std::sync::Arc::new(fs);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let cleaner = background.then(|| {
        let (fs, stop) = (fs.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let worked = fs.background_gc_step().unwrap();
                fs.background_gc_waiter()
                    .wait(std::time::Duration::from_millis(if worked {
                        1
                    } else {
                        20
                    }));
            }
        })
    });
    let st = fs.statfs();
    let blocks = st.blocks_avail * pct / 100;
    let ino = fs
        .create_node(fs.root_ino(), b"f", common::node(0o100644))
        .unwrap();
    let mut rng = Rng::new(7);
    let mut model = rng.bytes(blocks as usize * BS);
    for (i, chunk) in model.chunks(256 * BS).enumerate() {
        fs.write(ino, (i * 256 * BS) as u64, chunk).unwrap();
    }
    fs.sync().unwrap();
    let writes = blocks * passes;
    for n in 0..writes {
        let b = rng.below(blocks) as usize;
        let data = rng.bytes(BS);
        model[b * BS..(b + 1) * BS].copy_from_slice(&data);
        if let Err(e) = fs.write(ino, (b * BS) as u64, &data) {
            let s = fs.status().unwrap();
            panic!(
                "write {n} of {writes} (file {blocks} blocks of {} user blocks): {e}\n{}",
                st.blocks,
                serde_json::to_string_pretty(&s).unwrap()
            );
        }
        if fsync_every > 0 && n % fsync_every == fsync_every - 1 {
            fs.fsync(ino, false).unwrap();
        }
    }
    let status = fs.status().unwrap();
    let gc = &status.gc;
    let check = |fs: &Fs| {
        let mut got = vec![0u8; model.len()];
        assert_eq!(fs.read(ino, 0, &mut got).unwrap(), model.len());
        let bad = (0..blocks as usize)
            .find(|&b| got[b * BS..(b + 1) * BS] != model[b * BS..(b + 1) * BS]);
        assert_eq!(bad, None, "block {bad:?} differs from the last write");
    };
    check(&fs);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    if let Some(t) = cleaner {
        t.join().unwrap();
    }
    let Ok(fs) = std::sync::Arc::try_unwrap(fs) else {
        panic!("the volume is still shared")
    };
    fs.unmount().unwrap();
    assert_fsck_clean(&img);
    let fs = Fs::open(&img).unwrap();
    check(&fs);
    eprintln!(
        "{name}: {writes} writes, gc {:?}, device blocks by cause {:?}",
        gc, status.io.written_blocks
    );
    (status.gc, writes)
}

/// `mode=adaptive` (the default): with free sections short, rewrites go into the holes
/// earlier rewrites left, so the cleaner has next to nothing to move, and every byte still
/// reads back, before and after a remount, with fsck.f2fs clean.
#[test]
fn adaptive_rewrites_fill_holes_instead_of_moving_data() {
    let (gc, writes) = rewrite_in_mode("gc-adaptive", adaptive, 192, None, 1, 95, 2, 64, false);
    assert_eq!(gc.mode, "adaptive");
    assert!(
        gc.ssr_segments > 0 && gc.ssr_blocks > writes / 2,
        "rewrites did not go into holes: {gc:?}"
    );
    // In mode=lfs the same run moves about one block per rewrite (the test above).
    assert!(
        gc.data_blocks_moved < writes / 10,
        "the cleaner moved {} blocks for {writes} rewrites: {gc:?}",
        gc.data_blocks_moved
    );
}

/// The same in sections of four segments, where holes are taken a segment at a time: the
/// holes take a large share of the rewrites, and the cleaner moves a fraction of what `mode=lfs`
/// moves (about one block per rewrite). How large a share depends on how long free sections
/// stay short, which the space checks' reserve decides: 49% of the rewrites at stop 33, 59%
/// before the reserve shrank (prefree credit, the checkpoint's room counted from the logs'),
/// when the cleaner moved 7 020 blocks instead of 5 046.
#[test]
fn adaptive_rewrites_in_multi_segment_sections() {
    let (gc, writes) = rewrite_in_mode("gc-adaptive-sec", adaptive, 320, None, 4, 90, 2, 0, false);
    assert!(gc.ssr_blocks > writes * 2 / 5, "{gc:?}");
    assert!(gc.data_blocks_moved < writes / 6, "{gc:?}");
}

#[test]
fn random_overwrites_of_a_nearly_full_volume_never_run_out_of_space() {
    rewrite_nearly_full("gc-nofsync", 192, None, 1, 95, 3, 0);
}

#[test]
fn random_overwrites_with_fsync_keep_every_byte() {
    rewrite_nearly_full("gc-fsync", 192, None, 1, 95, 2, 64);
}

#[test]
fn sections_of_several_segments_are_cleaned_whole() {
    rewrite_nearly_full("gc-sections", 320, None, 4, 90, 2, 0);
}

#[test]
fn the_benchmark_geometry_runs_at_ninety_percent() {
    // 512 MiB at 5% overprovision, one file at 90% of the user space (the quick run of
    // scripts/bench-gc.sh).
    rewrite_nearly_full("gc-512", 512, Some(5.0), 1, 90, 2, 0);
}

/// Seed 003: with the background thread running beside the writer (as the daemon runs it), a
/// write short of space cleans at most one section and goes on, and the checkpoints that free
/// what was cleaned are written without the write lock; with `gc_pace=off` a write cleans a
/// batch and writes that checkpoint itself, under the lock. Every byte reads back either way,
/// fsck.f2fs is clean, and pacing costs no ENOSPC.
#[test]
fn paced_writers_clean_one_section_at_a_time() {
    fn paced(o: &mut Options) {
        lfs(o);
        o.gc_pace = true;
    }
    fn unpaced(o: &mut Options) {
        lfs(o);
        o.gc_pace = false;
    }
    let (gc, _) = rewrite_in_mode("gc-paced", paced, 256, None, 1, 92, 2, 0, true);
    assert!(gc.paced_steps > 0, "no write stepped: {gc:?}");
    assert_eq!(gc.most_sections_one_wait, 1, "{gc:?}");
    assert_eq!(
        gc.full_waits, 0,
        "writes cleaned until there was room: {gc:?}"
    );
    let (gc, _) = rewrite_in_mode("gc-unpaced", unpaced, 256, None, 1, 92, 2, 0, true);
    assert_eq!(gc.paced_steps, 0, "{gc:?}");
    assert!(gc.full_waits > 0 && gc.most_sections_one_wait > 1, "{gc:?}");
}

/// A summary that names another file's node for a block: the cleaner checks the owner, leaves
/// the block where it is, counts it, and never writes into the other file.
#[test]
fn a_summary_that_disagrees_with_its_node_is_skipped() {
    use std::io::{Read, Seek, SeekFrom, Write};
    let dir = scratch("gc-stale");
    let img = image(&dir, 192, None, 1);
    let (victim_addr, a_bytes, b_bytes, b_ino) = {
        let fs = Fs::open_rw(&img).unwrap();
        let root = fs.root_ino();
        let a = fs.create_node(root, b"a", common::node(0o100644)).unwrap();
        let b = fs.create_node(root, b"b", common::node(0o100644)).unwrap();
        let mut rng = Rng::new(9);
        let a_bytes = rng.bytes(64 * BS);
        let b_bytes = rng.bytes(64 * BS);
        fs.write(a, 0, &a_bytes).unwrap();
        fs.write(b, 0, &b_bytes).unwrap();
        // Half of a's blocks go: its segment becomes a victim worth cleaning, once a third
        // file moves the log on to another segment.
        fs.truncate(a, 32 * BS as u64).unwrap();
        let c = fs.create_node(root, b"c", common::node(0o100644)).unwrap();
        fs.write(c, 0, &rng.bytes(600 * BS)).unwrap();
        let mut first = None;
        fs.extents(a, &mut |e| {
            first.get_or_insert(e.addr);
            Ok(())
        })
        .unwrap();
        fs.unmount().unwrap();
        (first.unwrap(), a_bytes, b_bytes, b)
    };
    // Point the summary of a's first block at b's inode, offset 0.
    let l = Fs::open(&img).unwrap().superblock().layout();
    let segno = (victim_addr - l.main) / 512;
    let off = (victim_addr - l.main) % 512;
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&img)
        .unwrap();
    let at = u64::from(l.ssa + segno) * BS as u64 + u64::from(off) * 7;
    let mut e = [0u8; 7];
    f.seek(SeekFrom::Start(at)).unwrap();
    f.read_exact(&mut e).unwrap();
    e[..4].copy_from_slice(&b_ino.to_le_bytes());
    e[5..7].copy_from_slice(&0u16.to_le_bytes());
    f.seek(SeekFrom::Start(at)).unwrap();
    f.write_all(&e).unwrap();
    drop(f);
    let fs = Fs::open_rw(&img).unwrap();
    let cleaned = fs.gc(1000).unwrap();
    assert!(cleaned >= 1, "nothing was cleaned");
    let gc = fs.status().unwrap().gc;
    assert!(
        gc.stale_summaries >= 1,
        "the stale summary was not noticed: {gc:?}"
    );
    let root = fs.root_ino();
    let (a, b) = (
        fs.lookup(root, b"a").unwrap(),
        fs.lookup(root, b"b").unwrap(),
    );
    let mut got = vec![0u8; 64 * BS];
    assert_eq!(fs.read(b, 0, &mut got).unwrap(), 64 * BS);
    assert!(got == b_bytes, "b changed");
    assert_eq!(fs.read(a, 0, &mut got).unwrap(), 32 * BS);
    assert!(got[..32 * BS] == a_bytes[..32 * BS], "a changed");
    fs.unmount().unwrap();
}

/// Seed 001's shape: small files fill the volume until ENOSPC, then synchronous 4 KiB
/// rewrites at random places of random files. Every rewrite must find room (the user's data
/// still fits): fsync chains take room through the same check as changes, so a stream of
/// them never eats what the cleaner needs.
#[test]
fn synchronous_rewrites_of_a_volume_filled_to_enospc_keep_working() {
    let gc = rewrite_small_files("gc-seed001", |_| {}, 20_000);
    assert!(gc.data_blocks_moved > 0, "{gc:?}");
}

/// Seed 001's job in `mode=adaptive`: each synchronous rewrite's fsync writes its file's
/// nodes, and with free sections short the node logs fill the holes those writes leave in
/// node segments, as Linux's do, instead of taking free sections that the cleaner must then
/// make by moving the nodes still valid. In `mode=lfs` the cleaner moves them.
#[test]
fn node_logs_fill_holes_under_synchronous_rewrites() {
    let lfs = rewrite_small_files("gc-node-holes-lfs", lfs, 20_000);
    let holes = rewrite_small_files("gc-node-holes", adaptive, 20_000);
    assert_eq!(lfs.ssr_node_blocks, 0, "{lfs:?}");
    assert!(
        holes.ssr_node_segments > 0 && holes.ssr_node_blocks > 5_000,
        "the node logs took no holes: {holes:?}"
    );
    assert!(
        holes.node_blocks_moved * 3 < lfs.node_blocks_moved,
        "moved {} node blocks, {} in lfs mode",
        holes.node_blocks_moved,
        lfs.node_blocks_moved
    );
}

/// A node log filling holes when the volume stops without an unmount (no node summaries in
/// the checkpoint pack): the next mount rebuilds the log's summary from the footers of every
/// valid node of its segment, so that when the log leaves the segment, the summary it writes
/// names each node still there (fsck.f2fs checks every node against its summary entry).
#[test]
fn a_node_log_in_holes_goes_on_after_a_stop_without_unmount() {
    let dir = scratch("gc-node-holes-crash");
    let img = image(&dir, 192, None, 1);
    let open = || {
        let mut fs = Fs::open_rw(&img).unwrap();
        let mut o = fs.options();
        adaptive(&mut o);
        fs.set_options(o);
        fs
    };
    let fs = open();
    let root = fs.root_ino();
    let mut rng = Rng::new(9);
    let mut files = Vec::new();
    loop {
        let name = format!("f{}", files.len());
        let made = fs
            .create_node(root, name.as_bytes(), common::node(0o100644))
            .and_then(|ino| fs.write(ino, 0, &rng.bytes(8 * BS)).map(|_| ino));
        match made {
            Ok(ino) => files.push(ino),
            Err(e) => {
                assert_eq!(e.errno(), 28, "{e}");
                break;
            }
        }
    }
    fs.sync().unwrap();
    let rewrite = |fs: &Fs, rng: &mut Rng, n: usize| {
        for _ in 0..n {
            let ino = files[rng.below(files.len() as u64) as usize];
            fs.write(ino, rng.below(8) * BS as u64, &rng.bytes(BS))
                .unwrap();
            fs.fsync(ino, false).unwrap();
        }
    };
    // Rewrites, a sync, and a stop without unmount, until that sync left the warm node log
    // filling holes.
    let mut fs = Some(fs);
    let mut stops = 0;
    loop {
        let live = fs.take().unwrap_or_else(open);
        rewrite(&live, &mut rng, 500);
        live.sync().unwrap();
        drop(live);
        stops += 1;
        let warm_node = Fs::open(&img).unwrap().info().current_segments[4];
        if warm_node.3 == "ssr" {
            break;
        }
        assert!(
            stops < 40,
            "the warm node log never filled holes: {warm_node:?}"
        );
    }
    // Mounted again (the summary rebuilt from the footers), the log fills the rest of its
    // segment's holes and leaves it.
    let fs = open();
    rewrite(&fs, &mut rng, 3000);
    let gc = fs.status().unwrap().gc;
    assert!(gc.ssr_node_segments > 1, "{gc:?}");
    fs.unmount().unwrap();
    assert_fsck_clean(&img);
}

/// Fills a 192 MiB volume with 32 KiB files until ENOSPC, then rewrites a random block of a
/// random file and fsyncs it, `rewrites` times, with the options `set` gives; checks every
/// file against a model after a remount, with fsck.f2fs clean, and that the cleaner found no
/// summary stale. The cleaner's counters.
fn rewrite_small_files(name: &str, set: fn(&mut Options), rewrites: u64) -> GcStats {
    let dir = scratch(name);
    let img = image(&dir, 192, None, 1);
    let mut fs = Fs::open_rw(&img).unwrap();
    let mut o = fs.options();
    set(&mut o);
    fs.set_options(o);
    let root = fs.root_ino();
    let mut rng = Rng::new(5);
    const FILE: usize = 8 * BS;
    let mut files = Vec::new();
    loop {
        let name = format!("f{}", files.len());
        let ino = match fs.create_node(root, name.as_bytes(), common::node(0o100644)) {
            Ok(ino) => ino,
            Err(e) => {
                assert_eq!(e.errno(), 28, "{e}");
                break;
            }
        };
        match fs.write(ino, 0, &rng.bytes(FILE)) {
            Ok(_) => files.push((ino, rng.bytes(0))),
            Err(e) => {
                assert_eq!(e.errno(), 28, "{e}");
                break;
            }
        }
    }
    assert!(files.len() > 1000, "only {} files fitted", files.len());
    let mut model: std::collections::HashMap<u32, Vec<u8>> = std::collections::HashMap::new();
    for &(ino, _) in &files {
        let mut b = vec![0u8; FILE];
        assert_eq!(fs.read(ino, 0, &mut b).unwrap(), FILE);
        model.insert(ino, b);
    }
    for n in 0..rewrites {
        let (ino, _) = files[rng.below(files.len() as u64) as usize];
        let blk = rng.below(8) as usize;
        let data = rng.bytes(BS);
        if let Err(e) = fs
            .write(ino, (blk * BS) as u64, &data)
            .and_then(|_| fs.fsync(ino, false))
        {
            panic!(
                "rewrite {n} of {rewrites}: {e}\n{:?}",
                fs.status().unwrap().gc
            );
        }
        model.get_mut(&ino).unwrap()[blk * BS..(blk + 1) * BS].copy_from_slice(&data);
    }
    let gc = fs.status().unwrap().gc;
    eprintln!(
        "{name}: {} files, {rewrites} rewrites, gc {gc:?}",
        files.len()
    );
    // Every summary here is true, those of files no checkpoint has written yet included.
    assert_eq!(gc.stale_summaries, 0, "{gc:?}");
    fs.unmount().unwrap();
    assert_fsck_clean(&img);
    let fs = Fs::open(&img).unwrap();
    for (ino, want) in &model {
        let mut b = vec![0u8; FILE];
        assert_eq!(fs.read(*ino, 0, &mut b).unwrap(), FILE);
        assert!(b == *want, "inode {ino} differs from its last rewrite");
    }
    gc
}

/// Victims from a window of 20 candidate sections (`gc_window`, the kernel's way) instead of
/// the exact index: slower to find good victims, but just as correct.
#[test]
fn a_windowed_victim_search_keeps_every_byte() {
    let (gc, writes) = rewrite_in_mode(
        "gc-window",
        |o| {
            o.mode = AllocMode::Lfs;
            o.gc_window = 20;
        },
        192,
        None,
        1,
        95,
        2,
        64,
        false,
    );
    assert!(gc.data_blocks_moved > writes / 4, "{gc:?}");
}

/// On a volume with plenty of free space, segments emptied by removals wait for the next
/// checkpoint taken for another reason: the background thread does not write one for them
/// (a `rm -rf` of a 10 000-file tree once cost 79 checkpoints). Near full it still does:
/// the nearly-full tests above run with the thread and would stall without it.
#[test]
fn removals_on_a_roomy_volume_cost_no_background_checkpoint() {
    let dir = scratch("gc-roomy-removals");
    let img = image(&dir, 256, None, 1);
    let fs = Fs::open_rw(&img).unwrap();
    let root = fs.root_ino();
    let mut rng = Rng::new(11);
    // Four 4 MiB files, each filling whole segments of the warm log.
    for i in 0..4u8 {
        let ino = fs
            .create_node(root, &[b'f', b'0' + i], common::node(0o100644))
            .unwrap();
        fs.write(ino, 0, &rng.bytes(1024 * BS)).unwrap();
    }
    fs.sync().unwrap();
    for i in 0..4u8 {
        fs.unlink(root, &[b'f', b'0' + i]).unwrap();
    }
    let before = fs.status().unwrap();
    assert!(
        before.prefree_segments > 0,
        "nothing became prefree: {before:?}"
    );
    for _ in 0..20 {
        fs.background_gc_step().unwrap();
    }
    let after = fs.status().unwrap();
    assert_eq!(
        after.checkpoints.written, before.checkpoints.written,
        "the background thread wrote a checkpoint with {} free segments",
        after.segments.free_segments
    );
    assert_eq!(after.prefree_segments, before.prefree_segments);
    // The next checkpoint (here a sync) frees them, and the volume is whole.
    fs.sync().unwrap();
    assert_eq!(fs.status().unwrap().prefree_segments, 0);
    drop(fs);
    assert_fsck_clean(&img);
}
