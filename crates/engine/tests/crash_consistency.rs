//! Crash consistency: every acknowledged fsync, fdatasync and sync survives a power cut at any
//! moment, and every crash leaves an image that mounts, recovers and checks clean.
//!
//! Each workload runs on a fresh 64 MiB image (made by `uf2fs mkfs` in memory) over a
//! [`RecordingDevice`], which logs every block written and every flush. The workload keeps a
//! model: for each path, its history of versions (absent, a directory, or a file's bytes and
//! xattrs), each stamped with the log position at which the operation that made it began; and
//! for each fsync/fdatasync/sync that returned, the position at which it returned and the
//! versions it acknowledged. Then, for crash points taken from the log (see the
//! `recording` module of `uf2fs-device` for the media model):
//! - every write boundary (the in-order prefix image, at the latest position with that many
//!   writes, so an fsync that flushed and returned there counts), sampled when there are
//!   many (below);
//! - for each flush epoch with two writes or more, some images where a seeded random subset of
//!   the epoch's writes landed (every subset when there are few), crashing just before the
//!   flush that closes the epoch;
//!
//! the crash image is (a) mounted read-write (`Fs::with_device_rw`; roll-forward recovery
//! happens here), which must succeed, and what it shows is judged; (b) unmounted, which writes
//! a checkpoint, then mounted read-only: `Fs::check` must find nothing, fsck.f2fs (through
//! `tools/f2fs-verdict`) must be clean, and what it shows is judged again. Judging
//! (c): every tracked path shows the version its last acknowledgement before the crash point
//! named, or a later version whose operation began before the crash point; with no
//! acknowledgement, any version begun before it. fdatasync acknowledges bytes, not xattrs.
//! Every file must read in full without error, every directory list without error, and no
//! directory may hold a name the model never gave it.
//!
//! What an fsync acknowledges here: the file's bytes and xattrs under every name it has (F2FS
//! checkpoints when a file has more than one link or was renamed, and recovers the name of a
//! new file), and the directories on the way to them. Not the absence of a name it lost (an
//! unlink or a rename away): POSIX asks an fsync of the directory for that, and a name that
//! comes back must still agree with the link count, which both checkers verify. A sync
//! acknowledges every path.
//!
//! Budget (2 cores, `cargo nextest`): by default at most `DEFAULT_POINTS` write boundaries per
//! workload (every boundary next to a flush or a change of request, then a seeded sample of
//! the rest), `DEFAULT_REORDERS` reorderings per flush epoch, and fsck.f2fs on every
//! `DEFAULT_FSCK_EVERY`-th judged image. `UF2FS_CRASH_SAMPLES=full` tries every write
//! boundary, 32 reorderings per epoch and runs fsck.f2fs on every image (minutes per
//! workload); `UF2FS_CRASH_SAMPLES=N` sets the boundary budget to N. `UF2FS_CRASH_SEED`
//! changes the seed of the samples and reorderings. Each workload prints what it tried.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    reason = "test code: a panic is the failure report"
)]

mod common;

use common::crash::{judge_tree, Model, Overlay, Run};
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use uf2fs_engine::uf2fs_device::{BlockDevice, CrashLog, Event, IoCause, RecordingDevice};
use uf2fs_engine::{AllocMode, BackgroundGc, Fs, IpuPolicy, Options};
use uf2fs_testkit::{fsck_f2fs, scratch, Rng};

const DEFAULT_POINTS: usize = 200;
const DEFAULT_REORDERS: usize = 3;
const DEFAULT_FSCK_EVERY: usize = 1;

// ---------------------------------------------------------------------------------------
// Judging one crash image (the model, the workload driver, `judge_tree` and `Overlay` are in
// `common/crash.rs`).

/// Mounts, recovers, unmounts and checks one crash image; the reason on failure.
/// `fsck_runs` counts the fsck.f2fs runs (none when an earlier judgement fails).
fn judge(
    dev: Overlay,
    m: &Model,
    q: usize,
    fsck_at: Option<&Path>,
    fsck_runs: &mut usize,
) -> Result<(), String> {
    let dev = Arc::new(dev);
    let fs = Fs::with_device_rw(Box::new(dev.clone()))
        .map_err(|e| format!("the read-write mount is refused: {e}"))?;
    judge_tree(&fs, m, q).map_err(|e| format!("after recovery: {e}"))?;
    fs.unmount()
        .map_err(|e| format!("unmount after recovery fails: {e}"))?;
    let fs = Fs::with_device(Box::new(dev.clone()))
        .map_err(|e| format!("mount after recovery and unmount fails: {e}"))?;
    let r = fs
        .check()
        .map_err(|e| format!("check after unmount fails: {e}"))?;
    if !r.findings.is_empty() {
        return Err(format!(
            "uf2fs fsck after recovery and unmount: {}",
            r.findings
                .iter()
                .take(8)
                .cloned()
                .collect::<Vec<_>>()
                .join("; ")
        ));
    }
    judge_tree(&fs, m, q).map_err(|e| format!("after recovery and unmount: {e}"))?;
    drop(fs);
    if let Some(path) = fsck_at {
        dev.write_sparse(path);
        *fsck_runs += 1;
        let (clean, report) = fsck_f2fs(path);
        if !clean {
            return Err(format!("fsck.f2fs after recovery and unmount:\n{report}"));
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Choosing crash points and running them.

struct Budget {
    points: usize,
    reorders: usize,
    fsck_every: usize,
    seed: u64,
}

fn budget() -> Budget {
    let seed = std::env::var("UF2FS_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed);
    match std::env::var("UF2FS_CRASH_SAMPLES").ok().as_deref() {
        Some("full") => Budget {
            points: usize::MAX,
            reorders: 32,
            fsck_every: 1,
            seed,
        },
        Some(n) => Budget {
            points: n.parse().expect("UF2FS_CRASH_SAMPLES: full or a number"),
            reorders: DEFAULT_REORDERS,
            fsck_every: DEFAULT_FSCK_EVERY,
            seed,
        },
        None => Budget {
            points: DEFAULT_POINTS,
            reorders: DEFAULT_REORDERS,
            fsck_every: DEFAULT_FSCK_EVERY,
            seed,
        },
    }
}

/// The write boundaries to try: all when they fit the budget; else every boundary that is not
/// inside a run of consecutive blocks (the start and end of each request, and next to each
/// flush) and a seeded sample of the rest.
fn choose_points(log: &CrashLog, b: &Budget) -> (Vec<usize>, usize) {
    let all = log.write_boundaries();
    if all.len() <= b.points {
        return (all.clone(), all.len());
    }
    let ev = log.events();
    let addr = |i: usize| match ev.get(i) {
        Some(Event::Write { blkaddr, .. }) => Some(*blkaddr),
        _ => None,
    };
    // Boundary p (an event position) sits between event p-1 and event p.
    let inside_run =
        |p: usize| p > 0 && matches!((addr(p - 1), addr(p)), (Some(a), Some(c)) if c == a + 1);
    let (structural, rest): (Vec<usize>, Vec<usize>) = all.iter().partition(|&&p| !inside_run(p));
    let mut rng = Rng::new(b.seed);
    let sample = |mut from: Vec<usize>, n: usize, rng: &mut Rng| {
        let mut out = Vec::new();
        while out.len() < n && !from.is_empty() {
            let i = rng.below(from.len() as u64) as usize;
            out.push(from.swap_remove(i));
        }
        out
    };
    let mut keep = if structural.len() >= b.points {
        sample(structural, b.points, &mut rng)
    } else {
        let n = b.points - structural.len();
        let mut k = structural;
        k.extend(sample(rest, n, &mut rng));
        k
    };
    keep.sort_unstable();
    keep.dedup();
    (keep, all.len())
}

#[derive(Default)]
struct Tally {
    points: usize,
    boundaries: usize,
    reorders: usize,
    epochs: usize,
    fsck: usize,
    failures: Vec<String>,
}

/// Crashes the workload's log at the chosen points, judges each image and fails on any
/// failure.
fn sweep(name: &str, run: Run) {
    let (log, m) = run.crash();
    let t = sweep_log(name, &log, &m, &budget());
    assert!(
        t.failures.is_empty(),
        "{name}: {} crash images fail:\n{}",
        t.failures.len(),
        t.failures.join("\n")
    );
}

/// Crashes `log` at the chosen points and judges each image against `m`.
fn sweep_log(name: &str, log: &CrashLog, m: &Model, b: &Budget) -> Tally {
    let started = std::time::Instant::now();
    let dir = scratch(&format!("crash-{name}"));
    // fsck.f2fs reads a file: in memory when /dev/shm is there, else under target/.
    let shm = Path::new("/dev/shm");
    let fsck_img = if shm.is_dir() {
        shm.join(format!("uf2fs-crash-{name}-{}.img", std::process::id()))
    } else {
        dir.join("img")
    };
    let mut t = Tally::default();
    let mut judged = 0usize;
    let mut judge_one = |t: &mut Tally, image: Overlay, q: usize, what: String| {
        let fsck = judged.is_multiple_of(b.fsck_every);
        judged += 1;
        if let Err(e) = judge(image, m, q, fsck.then_some(fsck_img.as_path()), &mut t.fsck) {
            if t.failures.len() < 20 {
                t.failures.push(format!("{what}: {e}"));
            } else if t.failures.len() == 20 {
                t.failures.push("(more failures not shown)".into());
            }
        }
    };
    // Prefix images.
    let (points, boundaries) = choose_points(log, b);
    t.boundaries = boundaries;
    let mut image = Arc::new(log.base().to_vec());
    let mut at = 0;
    for &p in &points {
        log.land(Arc::make_mut(&mut image).as_mut_slice(), at, p, &|_| true);
        at = p;
        let k = log.writes_before(p);
        t.points += 1;
        judge_one(
            &mut t,
            Overlay::new(image.clone(), HashMap::new()),
            p,
            format!("crash after write {k} of {} (event {p})", boundaries - 1),
        );
    }
    // Reorderings within flush epochs, crashing just before the closing flush.
    let mut rng = Rng::new(b.seed ^ 0xa5a5);
    let mut image = Arc::new(log.base().to_vec());
    let mut at = 0;
    for ep in log.epochs() {
        let n = ep.writes.len();
        if n < 2 || b.reorders == 0 {
            continue;
        }
        t.epochs += 1;
        log.land(
            Arc::make_mut(&mut image).as_mut_slice(),
            at,
            ep.start,
            &|_| true,
        );
        at = ep.start;
        // Subsets as bit masks over the epoch's writes; those that are in-order prefixes are
        // prefix images already.
        let masks: Vec<Vec<bool>> = if n < 6 && (1usize << n) <= b.reorders + n + 1 {
            (0..1u64 << n)
                .map(|x| (0..n).map(|i| x >> i & 1 == 1).collect())
                .collect()
        } else {
            (0..b.reorders)
                .map(|_| (0..n).map(|_| rng.next_u64() & 1 == 1).collect())
                .collect()
        };
        for mask in masks {
            let is_prefix = mask.windows(2).all(|w| w[0] || !w[1]);
            if is_prefix {
                continue;
            }
            let mut over = HashMap::new();
            let mut lost = Vec::new();
            for (&i, &l) in ep.writes.iter().zip(&mask) {
                match (&log.events()[i], l) {
                    (Event::Write { blkaddr, block }, true) => {
                        over.insert(*blkaddr, block.clone());
                    }
                    _ => lost.push(i),
                }
            }
            t.reorders += 1;
            let lost_s = if lost.len() > 12 {
                format!("{} writes", lost.len())
            } else {
                format!("{lost:?}")
            };
            judge_one(
                &mut t,
                Overlay::new(image.clone(), over),
                ep.end,
                format!(
                    "crash before the flush at event {} with the epoch's writes at events {lost_s} lost (of {n})",
                    ep.end
                ),
            );
        }
    }
    println!(
        "{name}: {} writes, {} flushes; crash points tried {} of {} write boundaries; \
         reorderings tried {} in {} epochs; fsck.f2fs runs {}; failures {}; {:.1} s",
        log.write_count(),
        log.flush_count(),
        t.points,
        t.boundaries,
        t.reorders,
        t.epochs,
        t.fsck,
        t.failures.len(),
        started.elapsed().as_secs_f64()
    );
    let _ = std::fs::remove_file(&fsck_img);
    let _ = std::fs::remove_dir_all(&dir);
    t
}

// ---------------------------------------------------------------------------------------
// Workloads.

fn bytes(rng: &mut Rng, n: usize) -> Vec<u8> {
    rng.bytes(n)
}

#[test]
fn appends_with_fsync() {
    let mut r = Run::new();
    let mut rng = Rng::new(1);
    let f = r.create("log");
    let other = r.create("other");
    for i in 0..10 {
        let n = [100, 3000, 4096, 9000, 1][i % 5];
        let d = bytes(&mut rng, n);
        r.append(f, &d);
        r.fsync(f, false);
        if i % 3 == 0 {
            let d = bytes(&mut rng, 700);
            r.append(other, &d); // never synced: any version begun before the crash
        }
    }
    sweep("appends_with_fsync", r);
}

#[test]
fn overwrites_with_fdatasync() {
    let mut r = Run::new();
    let mut rng = Rng::new(2);
    let f = r.create("data");
    let d = bytes(&mut rng, 40_000);
    r.write(f, 0, &d);
    r.sync();
    for i in 0..10 {
        let len = 1 + rng.below(9000) as usize;
        let off = rng.below(if i % 4 == 3 {
            48_000
        } else {
            40_000 - len as u64
        }) as usize;
        let d = bytes(&mut rng, len);
        r.write(f, off, &d);
        r.fsync(f, true);
    }
    sweep("overwrites_with_fdatasync", r);
}

#[test]
fn create_and_fsync_in_new_directory() {
    let mut r = Run::new();
    let mut rng = Rng::new(3);
    for i in 0..4 {
        let dir = format!("d{i}");
        r.mkdir(&dir);
        let f = r.create(&format!("{dir}/f"));
        let d = bytes(&mut rng, [10, 5000, 3500, 12_000][i]);
        r.write(f, 0, &d);
        r.fsync(f, false);
    }
    r.mkdir("d0/sub");
    r.mkdir("d0/sub/deeper");
    let f = r.create("d0/sub/deeper/g");
    let d = bytes(&mut rng, 2000);
    r.write(f, 0, &d);
    r.fsync(f, false);
    sweep("create_and_fsync_in_new_directory", r);
}

#[test]
fn a_large_directory_changed_between_checkpoints() {
    // Past the inline area, so that every change below rewrites a dentry block, which stays
    // in memory until a checkpoint (`ns/dentry_cache.rs`): a crash before it loses those
    // changes, except the entries of fsync'd new files, which recovery adds from their inodes
    // into the blocks as the last checkpoint left them.
    let mut r = Run::new();
    let mut rng = Rng::new(12);
    r.mkdir("big");
    let name = |i: usize| format!("big/a-longer-name-for-the-entry-{i:04}");
    for i in 0..240 {
        r.create(&name(i));
    }
    r.sync();
    for i in (0..240).step_by(3) {
        r.unlink(&name(i));
    }
    for i in (1..240).step_by(9) {
        r.rename(&name(i), &format!("big/renamed-{i}"));
    }
    for i in 240..250 {
        let f = r.create(&name(i));
        let d = bytes(&mut rng, 700);
        r.write(f, 0, &d);
        if i % 3 == 0 {
            r.fsync(f, false);
        }
    }
    r.sync();
    for i in (2..240).step_by(5).filter(|i| i % 3 != 0 && i % 9 != 1) {
        r.unlink(&name(i));
    }
    let f = r.create(&name(250));
    let d = bytes(&mut rng, 5000);
    r.write(f, 0, &d);
    r.fsync(f, false);
    sweep("a_large_directory_changed_between_checkpoints", r);
}

#[test]
fn rename_over_existing_and_fsync() {
    let mut r = Run::new();
    let mut rng = Rng::new(4);
    r.mkdir("etc");
    let t = r.create("etc/config");
    let d = bytes(&mut rng, 6000);
    r.write(t, 0, &d);
    r.sync();
    for i in 0..4 {
        // The write-new-then-rename pattern, with and without an fsync before the rename.
        let tmp = format!("etc/config.tmp{i}");
        let n = r.create(&tmp);
        let d = bytes(&mut rng, [300, 7000, 4096, 20_000][i]);
        r.write(n, 0, &d);
        if i % 2 == 0 {
            r.fsync(n, false);
        }
        r.rename(&tmp, "etc/config");
        r.fsync(n, false);
    }
    // Across directories, over a file there.
    let a = r.create("moved");
    let d = bytes(&mut rng, 900);
    r.write(a, 0, &d);
    r.rename("moved", "etc/config");
    r.fsync(a, false);
    sweep("rename_over_existing_and_fsync", r);
}

#[test]
fn unlink_held_file_then_crash() {
    let mut r = Run::new();
    let mut rng = Rng::new(5);
    let f = r.create("open");
    let d = bytes(&mut rng, 3 * 4096 + 100);
    r.write(f, 0, &d);
    let g = r.create("open2");
    let d = bytes(&mut rng, 50_000);
    r.write(g, 0, &d);
    r.sync();
    r.hold(f);
    r.hold(g);
    r.unlink("open");
    r.unlink("open2");
    let d = bytes(&mut rng, 8192);
    r.write(f, 4096, &d); // the orphan is still written to
    r.fsync(f, false);
    let h = r.create("other");
    let d = bytes(&mut rng, 5000);
    r.write(h, 0, &d);
    r.fsync(h, false);
    r.release(g); // freed now; `f` stays open at the crash
    let d = bytes(&mut rng, 3000);
    r.append(h, &d);
    r.fsync(h, false);
    sweep("unlink_held_file_then_crash", r);
}

#[test]
fn hard_links_and_fsync() {
    let mut r = Run::new();
    let mut rng = Rng::new(6);
    let a = r.create("a");
    let d = bytes(&mut rng, 5000);
    r.write(a, 0, &d);
    r.fsync(a, false);
    r.link(a, "b");
    r.fsync(a, false);
    r.mkdir("d");
    r.link(a, "d/c");
    let d = bytes(&mut rng, 700);
    r.write(a, 100, &d);
    r.fsync(a, false);
    r.unlink("a");
    r.fsync(a, false);
    let d = bytes(&mut rng, 9000);
    r.append(a, &d);
    r.fsync(a, true);
    r.unlink("b");
    r.fsync(a, false);
    sweep("hard_links_and_fsync", r);
}

#[test]
fn large_writes_across_direct_nodes_and_fsync() {
    let mut r = Run::new();
    let mut rng = Rng::new(7);
    let f = r.create("big");
    // 2300 blocks: the inode's addresses and two direct nodes are not enough (923 + 1018).
    // Written in requests of 512 blocks (a change reserves its blocks first), then one fsync.
    let d = bytes(&mut rng, 2300 * 4096 + 123);
    for c in d.chunks(512 * 4096).enumerate() {
        r.write(f, c.0 * 512 * 4096, c.1);
    }
    r.fsync(f, false);
    // Overwrites across the inode / first direct node and the direct node boundaries.
    for (blk, n) in [(860, 100), (1890, 80), (2250, 60)] {
        let d = bytes(&mut rng, n * 4096);
        r.write(f, blk * 4096, &d);
        r.fsync(f, true);
    }
    r.truncate(f, 1500 * 4096 + 7);
    r.fsync(f, false);
    sweep("large_writes_across_direct_nodes_and_fsync", r);
}

#[test]
fn xattr_changes_and_fsync() {
    let mut r = Run::new();
    let mut rng = Rng::new(8);
    let f = r.create("x");
    let d = bytes(&mut rng, 1000);
    r.write(f, 0, &d);
    r.setxattr(f, "user.small", b"v1");
    r.fsync(f, false);
    r.setxattr(f, "user.small", b"version two");
    let big = bytes(&mut rng, 1500);
    r.setxattr(f, "user.big", &big); // past the inline area: an xattr node
    r.fsync(f, false);
    let big2 = bytes(&mut rng, 2500);
    r.setxattr(f, "user.big2", &big2);
    r.removexattr(f, "user.small");
    r.fsync(f, false);
    r.removexattr(f, "user.big");
    r.removexattr(f, "user.big2"); // back to inline: the xattr node goes
    r.fsync(f, false);
    let g = r.create("y");
    r.setxattr(g, "user.a", b"1");
    r.fsync(g, true); // fdatasync: the xattr is not acknowledged, the file is
    sweep("xattr_changes_and_fsync", r);
}

/// Permission bits and owners changed between writes, fsyncs, an fdatasync and a sync. A
/// change to an inode that is dirty and held by no one else is made in its block rather than
/// in a copy (`Nodes::change_in_place`); one to an inode a checkpoint just wrote takes a copy.
/// Either way an fsync acknowledges the mode and owner with the bytes (roll-forward recovery
/// restores them from the fsynced inode), an fdatasync only the bytes.
#[test]
fn attribute_changes_and_fsync() {
    let mut r = Run::new();
    let mut rng = Rng::new(9);
    let f = r.create("a");
    r.write(f, 0, &bytes(&mut rng, 3000));
    r.set_attrs(f, 0o600, Some((1000, 1000)));
    r.set_attrs(f, 0o640, None);
    r.fsync(f, false);
    r.set_attrs(f, 0o755, None);
    r.write(f, 3000, &bytes(&mut rng, 5000));
    r.set_attrs(f, 0o750, Some((1001, 100)));
    r.fsync(f, true); // fdatasync: the bytes are acknowledged, not the mode and owner
    let g = r.create("b");
    r.set_attrs(g, 0o604, None);
    r.fsync(g, false);
    r.set_attrs(f, 0o700, Some((0, 0)));
    r.sync();
    // Clean after the checkpoint: the first change copies the block, the next is in place.
    r.set_attrs(g, 0o6755, Some((7, 8)));
    r.set_attrs(g, 0o644, None);
    r.append(g, &bytes(&mut rng, 700));
    r.fsync(g, false);
    r.set_attrs(f, 0o711, None);
    r.fsync(f, false);
    sweep("attribute_changes_and_fsync", r);
}

#[test]
fn random_mix() {
    random_mix_on("random_mix", Run::new());
}

/// The same mix with small data runs held and written behind (`write_behind`, the mount's
/// default): the device sees them later, joined, from another thread, and every flush writes
/// what is held first.
#[test]
fn random_mix_written_behind() {
    let mut r = Run::new();
    let mut o = r.fs.options();
    o.write_behind = true;
    r.fs.set_options(o);
    random_mix_on("random_mix_written_behind", r);
}

/// The same mix on mkfs.f2fs's quota image: after every crash and recovery, fsck.f2fs
/// recounts the user, group and project quota files against the inodes.
#[test]
fn random_mix_on_a_quota_image() {
    let image = common::crash::mkfs_f2fs_mem_image("extra_attr,inode_checksum,quota,project_quota");
    random_mix_on("random_mix_quota", Run::on_image(image));
}

/// The same mix on a compressed, casefolded, quota image whose root is `chattr +c` (zstd,
/// 32 KiB clusters,
/// checksums), with bytes that compress: every file is compressed, so writes, overwrites and
/// truncations rewrite compressed clusters, and every fsync of a compressed file checkpoints.
/// After each crash, fsck.f2fs checks i_compr_blocks, i_blocks and the valid block counts.
#[test]
fn random_mix_on_a_compressed_image() {
    let image = common::crash::mkfs_f2fs_mem_image(
        "extra_attr,inode_checksum,quota,project_quota,casefold,compression",
    );
    let mut r = Run::on_image(image);
    let mut o = r.fs.options();
    o.compress.algorithm = uf2fs_engine::compress::Algorithm::Zstd;
    o.compress.log_cluster_size = 3;
    o.compress.checksum = true;
    r.fs.set_options(o);
    let root = r.fs.root_ino();
    // Compressed and casefolded (+c +F) from the root down.
    r.fs.set_fs_flags(root, r.fs.fs_flags(root).unwrap() | 0x4 | 0x4000_0000)
        .unwrap();
    r.fs.sync().unwrap();
    random_mix_with("random_mix_compressed", r, |rng, n| {
        let mut b = rng.bytes(n);
        for (i, x) in b.iter_mut().enumerate() {
            if i % 61 != 0 {
                *x = (i / 900 % 4) as u8 + b'a';
            }
        }
        b
    });
}

fn random_mix_on(name: &str, r: Run) {
    random_mix_with(name, r, bytes);
}

fn random_mix_with(name: &str, mut r: Run, bytes: fn(&mut Rng, usize) -> Vec<u8>) {
    let mut rng = Rng::new(9);
    r.mkdir("d");
    let mut names: Vec<String> = Vec::new();
    let mut count = 0;
    for step in 0..60 {
        let files: Vec<u32> = {
            let mut v: Vec<u32> =
                r.m.files
                    .iter()
                    .filter(|(_, f)| !f.names.is_empty())
                    .map(|(i, _)| *i)
                    .collect();
            v.sort_unstable();
            v
        };
        let pick = |rng: &mut Rng, v: &[u32]| v[rng.below(v.len() as u64) as usize];
        let op = if files.is_empty() { 0 } else { rng.below(12) };
        match op {
            0 | 1 => {
                count += 1;
                let p = format!("{}f{count}", if rng.below(2) == 0 { "" } else { "d/" });
                r.create(&p);
                names.push(p);
            }
            2 | 3 => {
                let f = pick(&mut rng, &files);
                let max = if rng.below(6) == 0 { 40_000 } else { 6000 };
                let len = 1 + rng.below(max) as usize;
                let off = rng.below(r.m.files[&f].data.len() as u64 + 1) as usize;
                let d = bytes(&mut rng, len);
                r.write(f, off, &d);
            }
            4 => {
                let f = pick(&mut rng, &files);
                let n = 1 + rng.below(1200) as usize;
                let v = bytes(&mut rng, n);
                r.setxattr(f, &format!("user.k{}", rng.below(3)), &v);
            }
            5 => {
                let f = pick(&mut rng, &files);
                let from = r.m.files[&f].names.iter().next().unwrap().clone();
                let to = if rng.below(2) == 0 && !names.is_empty() {
                    names[rng.below(names.len() as u64) as usize].clone()
                } else {
                    count += 1;
                    format!("d/r{count}")
                };
                if from != to {
                    r.rename(&from, &to);
                    names.push(to);
                }
            }
            6 => {
                let f = pick(&mut rng, &files);
                count += 1;
                let p = format!("l{count}");
                r.link(f, &p);
                names.push(p);
            }
            7 => {
                let f = pick(&mut rng, &files);
                let p = r.m.files[&f].names.iter().next().unwrap().clone();
                if rng.below(3) == 0 && !r.held.contains(&f) {
                    r.hold(f);
                }
                r.unlink(&p);
            }
            8 if !r.held.is_empty() => {
                let f = r.held[0];
                r.release(f);
            }
            9 => {
                let f = pick(&mut rng, &files);
                let size = rng.below(r.m.files[&f].data.len() as u64 + 1) as usize;
                r.truncate(f, size);
            }
            10 if step % 7 == 0 => r.sync(),
            _ => {
                let f = pick(&mut rng, &files);
                r.fsync(f, rng.below(3) == 0);
            }
        }
    }
    if r.fs.options().write_behind {
        let w = r.fs.status().unwrap().io.write_behind;
        assert!(
            w.deferred > 0 && w.written_runs > 0,
            "{name}: nothing was held: {w:?}"
        );
    }
    sweep(name, r);
}

// ---------------------------------------------------------------------------------------
// The judge can fail: two broken runs it must catch.

/// The cleaner at work: small files fill most of the volume, then whole files are
/// rewritten at random (an fsync of each every few rewrites, a sync now and then), so that
/// sections are cleaned while fsync chains and checkpoints come and go. A crash anywhere
/// in a cleaning pass must lose nothing acknowledged.
#[test]
fn rewrites_under_the_cleaner_with_fsync() {
    let mut r = Run::new();
    // Log-structured only: every rewrite goes to a log's end and the cleaner makes room.
    r.fs.set_options(Options {
        mode: AllocMode::Lfs,
        ..r.fs.options()
    });
    let mut rng = Rng::new(11);
    let files = files_filling(&mut r, &mut rng, 85);
    let rewrites = rewrite_at_random(&mut r, &mut rng, &files, |r, i| {
        if i % 500 == 499 {
            r.sync();
        }
    });
    let gc = r.fs.status().unwrap().gc;
    assert!(
        gc.data_blocks_moved > 0 && gc.checkpoints_for_space > 0,
        "the workload did not make the cleaner work: {gc:?}"
    );
    let count = files.len();
    eprintln!("rewrites_under_the_cleaner_with_fsync: {count} files, {rewrites} rewrites, {gc:?}");
    sweep("rewrites_under_the_cleaner_with_fsync", r);
}

/// The size of each file of the cleaner workloads.
const FILE: usize = 16 * 4096;

/// Files of `FILE` bytes written until they fill `pct` percent of the available space, then a
/// sync; their inodes.
fn files_filling(r: &mut Run, rng: &mut Rng, pct: usize) -> Vec<u32> {
    let avail = r.fs.statfs().blocks_avail as usize;
    let count = avail * 4096 * pct / 100 / FILE;
    let files: Vec<u32> = (0..count).map(|i| r.create(&format!("f{i}"))).collect();
    for &f in &files {
        let d = bytes(rng, FILE);
        r.write(f, 0, &d);
    }
    r.sync();
    files
}

/// Rewrites whole files picked at random, four times as many rewrites as files, an fsync
/// (every other one an fdatasync) after each eighth; `each` runs after every rewrite with its
/// number. Returns the number of rewrites.
fn rewrite_at_random(
    r: &mut Run,
    rng: &mut Rng,
    files: &[u32],
    mut each: impl FnMut(&mut Run, usize),
) -> usize {
    let rewrites = files.len() * 4;
    for i in 0..rewrites {
        let f = files[rng.below(files.len() as u64) as usize];
        let d = bytes(rng, FILE);
        r.write(f, 0, &d);
        if i % 8 == 7 {
            r.fsync(f, i % 16 == 15);
        }
        each(r, i);
    }
    rewrites
}

/// Paced writers (`gc_pace`, seed 003) with the background cleaner beside them, as the daemon
/// runs them, here interleaved in one thread so that the log is the same every run: once the
/// background step has run, a write short of space cleans one section and asks that step
/// for the checkpoint that frees it, or writes one itself without the lock below the floor.
/// Crash points fall inside such a step, between a step and the background checkpoint, and
/// inside that checkpoint (flushed first, prepared under the lock, written without it).
#[test]
fn paced_rewrites_beside_the_background_cleaner() {
    let mut r = Run::new();
    r.fs.set_options(Options {
        mode: AllocMode::Lfs,
        gc_pace: true,
        background_gc: BackgroundGc::On,
        ..r.fs.options()
    });
    let mut rng = Rng::new(13);
    let files = files_filling(&mut r, &mut rng, 88);
    // The background thread's first step marks it running: writes pace from then on.
    r.fs.background_gc_step().unwrap();
    // It wakes when a write asks for its checkpoint, and now and then: every third rewrite.
    let rewrites = rewrite_at_random(&mut r, &mut rng, &files, |r, i| {
        if i % 3 == 2 {
            r.fs.background_gc_step().unwrap();
        }
    });
    let gc = r.fs.status().unwrap().gc;
    assert!(
        gc.paced_steps > 0 && gc.checkpoints_for_space > 0 && gc.data_blocks_moved > 0,
        "the writes did not pace: {gc:?}"
    );
    let count = files.len();
    eprintln!(
        "paced_rewrites_beside_the_background_cleaner: {count} files, {rewrites} rewrites, {gc:?}"
    );
    sweep("paced_rewrites_beside_the_background_cleaner", r);
}

/// `mode=adaptive` near full: single blocks rewritten at random leave holes, which later
/// rewrites fill (slack space recycling) while fsyncs write their chains and checkpoints come
/// and go; a crash anywhere must show every acknowledged version, and never a block that a
/// durable checkpoint or chain still named overwritten by a later rewrite.
#[test]
fn rewrites_into_holes_with_fsync() {
    let mut r = Run::new();
    let mut rng = Rng::new(12);
    const FILE: usize = 16 * 4096;
    let files = r.fill_adaptive(FILE, 88, &mut rng);
    let count = files.len();
    let rewrites = count * 14;
    for i in 0..rewrites {
        let k = rng.below(count as u64) as usize;
        let at = rng.below(16) as usize * 4096;
        let b = bytes(&mut rng, 4096);
        r.write(files[k], at, &b);
        if i % 24 == 23 {
            r.fsync(files[k], i % 48 == 47);
        }
        if i % 700 == 699 {
            r.sync();
        }
    }
    let gc = r.fs.status().unwrap().gc;
    assert!(gc.ssr_blocks > 0, "the workload did not fill holes: {gc:?}");
    eprintln!("rewrites_into_holes_with_fsync: {count} files, {rewrites} rewrites, {gc:?}");
    sweep("rewrites_into_holes_with_fsync", r);
}

/// Seed 001's shape in `mode=adaptive` near full: every rewrite is fsync'd, so each writes
/// its file's inode to the roll-forward chain, and with free sections short the warm node
/// log fills the holes earlier chains left in node segments: the chain runs from hole to
/// hole, each node naming the next. A crash anywhere must replay every acknowledged fsync,
/// and never follow the chain into a hole whose old node a durable checkpoint still names.
#[test]
fn synchronous_rewrites_through_node_holes() {
    let mut r = Run::new();
    let mut rng = Rng::new(21);
    const FILE: usize = 4 * 4096;
    // Each file takes an inode block beside its four data blocks: about 80% full.
    let files = r.fill_adaptive(FILE, 64, &mut rng);
    let count = files.len();
    let rewrites = count * 4;
    for i in 0..rewrites {
        let k = rng.below(count as u64) as usize;
        let at = rng.below(4) as usize * 4096;
        let b = bytes(&mut rng, 4096);
        r.write(files[k], at, &b);
        r.fsync(files[k], i % 2 == 1);
        if i % 1500 == 1499 {
            r.sync();
        }
    }
    let gc = r.fs.status().unwrap().gc;
    assert!(
        gc.ssr_node_blocks > 0,
        "the node log filled no holes: {gc:?}"
    );
    eprintln!(
        "synchronous_rewrites_through_node_holes: {count} files, {rewrites} rewrites, {gc:?}"
    );
    sweep("synchronous_rewrites_through_node_holes", r);
}

/// `ipu=force` (Linux's default on small volumes): a file whose pointers are all durable has
/// its blocks rewritten in place; one with a pointer changed since (an append, a truncate)
/// goes out of place until a checkpoint lands. Rewrites in place land unordered until a
/// flush, so each write here is fsync'd before the next (what such a mount promises): a
/// crash anywhere must show every acknowledged version, including rewrites in place of
/// blocks whose pointers the cleaner or an append changed.
#[test]
fn overwrites_in_place_with_fsync() {
    let mut r = Run::new();
    r.fs.set_options(Options {
        mode: AllocMode::Adaptive,
        ipu: IpuPolicy::Force,
        ..r.fs.options()
    });
    let mut rng = Rng::new(13);
    const FILE: usize = 8 * 4096;
    let files: Vec<u32> = (0..12).map(|i| r.create(&format!("f{i}"))).collect();
    for &f in &files {
        let d = bytes(&mut rng, FILE);
        r.write(f, 0, &d);
    }
    r.sync();
    let mut size = vec![FILE; files.len()];
    for i in 0..240 {
        let k = rng.below(files.len() as u64) as usize;
        match i % 40 {
            // Now and then an append (a new pointer) or a truncate, and a checkpoint.
            17 => {
                let d = bytes(&mut rng, 4096);
                r.write(files[k], size[k], &d);
                size[k] += 4096;
            }
            29 => {
                size[k] = size[k].saturating_sub(4096).max(4096);
                r.truncate(files[k], size[k]);
            }
            39 => r.sync(),
            _ => {
                let at = rng.below((size[k] / 4096) as u64) as usize * 4096;
                let len = 1 + rng.below(4096) as usize;
                let d = bytes(&mut rng, len);
                r.write(files[k], at, &d);
            }
        }
        r.fsync(files[k], i % 2 == 1);
    }
    let gc = r.fs.status().unwrap().gc;
    assert!(gc.ipu_blocks > 100, "few rewrites went in place: {gc:?}");
    eprintln!("overwrites_in_place_with_fsync: {gc:?}");
    sweep("overwrites_in_place_with_fsync", r);
}

#[test]
fn the_judge_catches_an_fsync_that_wrote_nothing() {
    let mut r = Run::new();
    let f = r.create("a");
    r.sync();
    r.write(f, 0, b"acknowledged but never written");
    r.fsync_that_does_nothing(f);
    let g = r.create("b");
    r.fsync(g, false); // a real one afterwards: the crash points before it must fail
    let (log, m) = r.crash();
    let t = sweep_log(
        "the_judge_catches_an_fsync_that_wrote_nothing",
        &log,
        &m,
        &budget(),
    );
    assert!(
        t.failures
            .iter()
            .any(|f| f.contains("/a shows 0 bytes") && f.contains("an fsync that wrote nothing")),
        "the lost fsync went unnoticed: {:#?}",
        t.failures
    );
}

#[test]
fn the_judge_catches_a_device_that_ignores_flushes() {
    let mut r = Run::new();
    let mut rng = Rng::new(10);
    let f = r.create("log");
    for _ in 0..4 {
        let d = bytes(&mut rng, 5000);
        r.append(f, &d);
        r.fsync(f, false);
    }
    let (log, m) = r.crash();
    // The same writes with every flush dropped: one epoch, whose writes land in any subset.
    let dev = RecordingDevice::new(log.base().to_vec());
    for e in log.events() {
        if let Event::Write { blkaddr, block } = e {
            dev.write_blocks(*blkaddr, block, IoCause::Meta).unwrap();
        }
    }
    let unflushed = dev.into_log();
    // Positions in the new log count writes only; the acks' positions must follow.
    let mut m = m;
    for h in m.paths.values_mut() {
        for a in &mut h.acks {
            a.at = log.writes_before(a.at);
        }
    }
    let b = Budget {
        points: 0,
        reorders: 8,
        fsck_every: usize::MAX,
        seed: 1,
    };
    let t = sweep_log(
        "the_judge_catches_a_device_that_ignores_flushes",
        &unflushed,
        &m,
        &b,
    );
    assert!(
        t.reorders > 0 && !t.failures.is_empty(),
        "no reordering of an unflushed log failed ({} tried)",
        t.reorders
    );
    println!("what the judge said: {:#?}", t.failures);
}
