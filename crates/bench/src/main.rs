//! `uf2fs-bench`: benchmarks that print a table and write JSON. Times are medians of several
//! runs taken side by side in one process, and quoted as ratios: these machines are noisy.
//!
//! `extract`: a ~1 GiB tree of mixed files (seeded: empty, tiny inline, around the inline
//! limit, 4-64 KiB, up to 1 MiB, just past the inode's own slots, and large files up to
//! 40 MB, plus a 2000-entry directory) is loaded into a fresh image with mkfs.f2fs and
//! sload.f2fs; then `uf2fs extract` of the whole image is timed against `cat` of the image
//! file (the raw read of the bytes) and `cp -a` of the source tree (the same files read and
//! written by the host file system).
//!
//! `gc-waf`: the cleaner's write amplification under random overwrites (seed 000, skewed
//! variants), seed 001's small-file rewrites and seed 003's latency log, on uf2fs over a loop
//! device, on Linux 6.1 (tools/linux-f2fs, or its saved baselines) and at the exact-greedy limit
//! (`gcwaf.rs`).
//!
//! `checkpoint-merge`: seed 002's experiment on a uf2fs FUSE mount, scaled to this machine:
//! thread A does 1000 × (touch a file in dir1; fsync dir1) (a directory fsync asks for a
//! checkpoint), while thread B streams 128 KiB writes and thread(s) C loop (touch a file in
//! dir2; fsync dir2). Two workloads: `seed`, the commit's own loops (`touch test_dir1/file`:
//! the same file each time, so after the first round the directory itself does not change),
//! and `new-files`, where every touch makes a new file (every fsync has a new entry to make
//! durable). A's time and the checkpoints written, with `checkpoint_merge` and with
//! `nocheckpoint_merge`, alternated in one run.
//!
//! `io`: the I/O path (issue 14): fio and small-file tree workloads on the raw backing file,
//! a uf2fs FUSE mount, ext4 on a loop device and the engine in-process, in one run (`io.rs`).
//!
//! `compress`: reading Linux-written compressed images against the same tree uncompressed
//! (`compress.rs`).
//!
//! `victim-pick`: the cleaner's victim index (`uf2fs_engine::victim`): the mean time of a
//! pick under each policy and of an update, from 10^3 to 10^6 sections (see
//! `victim_pick.rs`).

mod buckets;
mod compress;
mod fuse_rt;
mod greedy;
mod io;
mod memfs;
mod shell;
mod splitmix;
mod victim_pick;

use clap::{Parser, Subcommand};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;
use uf2fs_testkit::{gen_tree, mkfs_sload, run, TreeSpec};

mod floor;
mod gcwaf;

#[derive(Parser)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// extract vs cat vs cp -a on a ~1 GiB image of mixed files.
    Extract {
        /// Work directory (the tree, the image and the copies go here).
        #[arg(long, default_value = "target/bench/extract")]
        dir: PathBuf,
        /// Runs per measurement (the median is reported).
        #[arg(long, default_value_t = 3)]
        runs: usize,
        /// The uf2fs binary to measure.
        #[arg(long, default_value = "target/release/uf2fs")]
        uf2fs: PathBuf,
    },
    /// uf2fs mkfs + import vs mkfs.f2fs + sload.f2fs of the same ~1 GiB tree.
    Import {
        #[arg(long, default_value = "target/bench/import")]
        dir: PathBuf,
        #[arg(long, default_value_t = 3)]
        runs: usize,
        #[arg(long, default_value = "target/release/uf2fs")]
        uf2fs: PathBuf,
    },
    /// Seed 002: A's 1000 (touch; fsync dir) beside a streaming writer and competing
    /// checkpoint requests, with checkpoint merging on and off.
    CheckpointMerge {
        #[arg(long, default_value = "target/bench/checkpoint-merge")]
        dir: PathBuf,
        /// Rounds of thread A (touch a file; fsync its directory).
        #[arg(long, default_value_t = 1000)]
        ops: usize,
        /// Threads doing what thread C does (touch; fsync dir2), each in its own directory.
        #[arg(long, default_value_t = 1)]
        competitors: usize,
        /// Runs per mode and workload (alternated on, off, on, off...; medians reported).
        #[arg(long, default_value_t = 3)]
        runs: usize,
        /// Workloads: `seed` (the same file touched each round, as in the commit) and/or
        /// `new-files` (a new file each round).
        #[arg(long, value_delimiter = ',', default_value = "seed,new-files")]
        workloads: Vec<String>,
        #[arg(long, default_value = "target/release/uf2fs")]
        uf2fs: PathBuf,
    },
    /// Victim index: mean time of a pick (greedy, cost-benefit, age-threshold) and of an
    /// update, for each section count.
    VictimPick {
        /// Where the JSON goes.
        #[arg(long, default_value = "target/bench/victim-pick.json")]
        json: PathBuf,
        /// Section counts to measure.
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "1000,10000,100000,1000000"
        )]
        sections: Vec<u32>,
        /// Blocks per section.
        #[arg(long, default_value_t = 512)]
        cap: u32,
        /// Operations timed per measurement.
        #[arg(long, default_value_t = 1_000_000)]
        iters: u64,
    },
    /// The cleaner's write amplification: uf2fs (FUSE over a loop device) beside Linux 6.1
    /// (tools/linux-f2fs or a saved baseline) beside exact greedy (greedy.rs), same workloads.
    GcWaf(Box<gcwaf::GcWafArgs>),
    /// The format's floor: the least write amplification any cleaner reaches on F2FS's
    /// format in `mode=lfs` on gc-waf's jobs (a model: prefree until a checkpoint, the
    /// checkpoint's nodes and metadata counted), beside the greedy limit.
    Floor(Box<floor::FloorArgs>),
    /// The I/O path: fio and small-file tree workloads on the raw file, a uf2fs FUSE mount,
    /// ext4 on a loop device and the engine in-process, side by side (issue 14).
    Io(Box<io::IoArgs>),
    /// What one FUSE round trip costs over /dev/fuse and io_uring (with and without the
    /// serving threads yielding their CPU), free, pinned and against busy loops (issue 14).
    FuseRt(Box<fuse_rt::FuseRtArgs>),
    /// Reading compressed images (Linux-written, every algorithm) against the same tree
    /// uncompressed: extract and FUSE reads, with the space Linux saved (issue 15).
    Compress(Box<compress::CompressArgs>),
    /// Serves an in-memory file system on MOUNTPOINT through uf2fs's FUSE transport and
    /// settings until it is unmounted: the `io` bench's `memfs` target, the transport's floor
    /// for the tree workloads (issue 14). Its data is lost at unmount.
    Memfs {
        mountpoint: PathBuf,
        /// Request threads (uf2fs's default).
        #[arg(long, default_value_t = 4)]
        threads: usize,
        #[arg(long, value_enum, default_value = "uring")]
        transport: memfs::Transport,
        /// Microseconds of CPU each request spends before its answer (a busy wait): how
        /// the transport's cost moves with a daemon's work per request.
        #[arg(long, default_value_t = 0)]
        work_us: u64,
    },
    /// fuse-rt's other process: echoes each byte of stdin to stdout until EOF (a round trip
    /// between two processes with no FUSE in it).
    #[command(hide = true)]
    PipeEcho {
        /// The CPU to run on.
        #[arg(long)]
        pin: Option<usize>,
    },
}

fn median_secs(runs: usize, mut f: impl FnMut()) -> f64 {
    let mut t: Vec<f64> = (0..runs)
        .map(|_| {
            let s = Instant::now();
            f();
            s.elapsed().as_secs_f64()
        })
        .collect();
    t.sort_by(f64::total_cmp);
    t[t.len() / 2]
}

fn shell(cmd: &str) {
    run(Command::new("sh").arg("-c").arg(cmd));
}

fn du_bytes(p: &Path) -> u64 {
    run(Command::new("du").args(["-sb"]).arg(p))
        .split_whitespace()
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

fn extract(dir: &Path, runs: usize, uf2fs: &Path) {
    let src = dir.join("src");
    let img = dir.join("image.img");
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).expect("work dir");
    eprintln!("bench: generating the tree");
    let stats = gen_tree(
        &src,
        42,
        TreeSpec {
            files: 370,
            max_file: 40_000_000,
            big_dir: 2000,
            depth: 10,
        },
    );
    eprintln!(
        "bench: {} entries, {} bytes; mkfs + sload",
        stats.entries, stats.bytes
    );
    mkfs_sload(&img, 1536, "", &src);
    let image_bytes = std::fs::metadata(&img).map(|m| m.len()).unwrap_or(0);
    let (s, i, u) = (
        src.display().to_string(),
        img.display().to_string(),
        uf2fs.display().to_string(),
    );
    let out = dir.join("out").display().to_string();
    let cp_out = dir.join("cp").display().to_string();
    // One pass of each first, so every measurement runs with the page cache equally warm.
    shell(&format!("cat '{i}' > /dev/null; rm -rf '{out}'; '{u}' extract '{i}' '{out}'; rm -rf '{cp_out}'; cp -a '{s}' '{cp_out}'"));
    let verify = run(Command::new("diff").args(["-r", "--no-dereference", &s, &out]));
    assert!(
        verify.is_empty(),
        "the extracted tree differs from the source"
    );
    let t_cat = median_secs(runs, || shell(&format!("cat '{i}' > /dev/null")));
    let t_extract = median_secs(runs, || {
        shell(&format!("rm -rf '{out}' && '{u}' extract '{i}' '{out}'"))
    });
    let t_cp = median_secs(runs, || {
        shell(&format!("rm -rf '{cp_out}' && cp -a '{s}' '{cp_out}'"))
    });
    let data = du_bytes(&src);
    let mib = |b: u64, t: f64| b as f64 / t / (1 << 20) as f64;
    println!("extract benchmark: {} entries, {:.0} MiB of file data, image {:.0} MiB, median of {runs} runs", stats.entries, stats.bytes as f64 / 1048576.0, image_bytes as f64 / 1048576.0);
    println!(
        "{:<34} {:>9} {:>12} {:>10}",
        "what", "seconds", "MiB/s", "ratio"
    );
    println!(
        "{:<34} {:>9.3} {:>12.0} {:>10}",
        "cat IMAGE > /dev/null (raw read)",
        t_cat,
        mib(image_bytes, t_cat),
        "1.00"
    );
    println!(
        "{:<34} {:>9.3} {:>12.0} {:>10.2}",
        "uf2fs extract IMAGE DEST",
        t_extract,
        mib(stats.bytes, t_extract),
        t_extract / t_cat
    );
    println!(
        "{:<34} {:>9.3} {:>12.0} {:>10.2}",
        "cp -a SRC DEST (host fs)",
        t_cp,
        mib(stats.bytes, t_cp),
        t_cp / t_cat
    );
    println!(
        "uf2fs extract / cat = {:.2}; uf2fs extract / cp -a = {:.2}",
        t_extract / t_cat,
        t_extract / t_cp
    );
    let json = serde_json::json!({
        "benchmark": "extract",
        "entries": stats.entries,
        "file_bytes": stats.bytes,
        "image_bytes": image_bytes,
        "du_bytes": data,
        "runs": runs,
        "seconds": { "cat_image": t_cat, "uf2fs_extract": t_extract, "cp_a": t_cp },
        "ratio_extract_over_cat": t_extract / t_cat,
        "ratio_extract_over_cp": t_extract / t_cp,
    });
    let path = dir.join("extract.json");
    std::fs::write(
        &path,
        serde_json::to_string_pretty(&json).unwrap_or_default(),
    )
    .expect("write JSON");
    println!("JSON: {}", path.display());
}

fn import(dir: &Path, runs: usize, uf2fs: &Path) {
    let src = dir.join("src");
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).expect("work dir");
    eprintln!("bench: generating the tree");
    let stats = gen_tree(
        &src,
        43,
        TreeSpec {
            files: 370,
            max_file: 40_000_000,
            big_dir: 2000,
            depth: 10,
        },
    );
    let (s, u) = (src.display().to_string(), uf2fs.display().to_string());
    let a = dir.join("sload.img").display().to_string();
    let b = dir.join("uf2fs.img").display().to_string();
    let size = "1536M";
    let prepare_sload =
        format!("rm -f '{a}' && truncate -s {size} '{a}' && mkfs.f2fs -f -q -t 0 '{a}'");
    let prepare_ours = format!("rm -f '{b}' && '{u}' mkfs '{b}' --size {size} > /dev/null");
    // Warm the page cache on the source once.
    shell(&format!("find '{s}' -type f -exec cat {{}} + > /dev/null"));
    let mut t_sload = Vec::new();
    let mut t_ours = Vec::new();
    let mut stat_line = String::new();
    for _ in 0..runs {
        shell(&prepare_sload);
        let t = Instant::now();
        // sload.f2fs exits 1 after its closing fsck pass repairs what it wrote; the time counts.
        let _ = Command::new("sload.f2fs").args(["-f", &s, &a]).output();
        t_sload.push(t.elapsed().as_secs_f64());
        shell(&prepare_ours);
        let t = Instant::now();
        stat_line = run(Command::new(&u).args(["import", "--stats", &b, &s]));
        t_ours.push(t.elapsed().as_secs_f64());
    }
    let med = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (ts, tu) = (med(&mut t_sload), med(&mut t_ours));
    let verify = run(Command::new(&u)
        .args(["extract", &b])
        .arg(dir.join("check")));
    assert!(verify.is_empty());
    let diff = run(Command::new("diff")
        .args(["-r", "--no-dereference", &s])
        .arg(dir.join("check")));
    assert!(diff.is_empty(), "the imported tree differs from the source");
    let waf: f64 = stat_line
        .rsplit(' ')
        .next()
        .and_then(|w| w.trim().parse().ok())
        .unwrap_or(f64::NAN);
    println!(
        "import benchmark: {} entries, {:.0} MiB of file data, image {size}, median of {runs} runs",
        stats.entries,
        stats.bytes as f64 / 1048576.0
    );
    println!("{:<40} {:>9} {:>10}", "what", "seconds", "ratio");
    println!(
        "{:<40} {:>9.3} {:>10}",
        "sload.f2fs -f SRC IMAGE", ts, "1.00"
    );
    println!(
        "{:<40} {:>9.3} {:>10.2}",
        "uf2fs import IMAGE SRC",
        tu,
        tu / ts
    );
    println!("uf2fs: {}", stat_line.trim());
    let json = serde_json::json!({
        "benchmark": "import",
        "entries": stats.entries,
        "file_bytes": stats.bytes,
        "runs": runs,
        "seconds": { "sload": ts, "uf2fs_import": tu },
        "ratio_import_over_sload": tu / ts,
        "device_blocks_written_per_data_block": waf,
        "uf2fs_stats": stat_line.trim(),
    });
    let path = dir.join("import.json");
    std::fs::write(
        &path,
        serde_json::to_string_pretty(&json).unwrap_or_default(),
    )
    .expect("write JSON");
    println!("JSON: {}", path.display());
}

/// What touch(1) does: create the file if it is missing, set its times to now.
fn touch(path: &Path) -> std::io::Result<()> {
    let f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    let now = std::time::SystemTime::now();
    f.set_times(
        std::fs::FileTimes::new()
            .set_accessed(now)
            .set_modified(now),
    )
}

/// What one run of seed 002's experiment measured.
#[derive(Clone)]
struct MergeRun {
    /// A's seconds for its rounds.
    secs: f64,
    /// B's write rate while A ran (MiB/s): whether checkpoints stall a writer that never syncs.
    b_mib_s: f64,
    /// C's rounds per second while A ran (all C threads).
    c_rounds_s: f64,
    /// The mount's status afterwards.
    status: serde_json::Value,
}

/// One run of seed 002's experiment on a fresh image mounted with `opt`.
fn merge_run(
    dir: &Path,
    uf2fs: &Path,
    opt: &str,
    ops: usize,
    competitors: usize,
    new_files: bool,
) -> MergeRun {
    use std::fs::{self, File, OpenOptions};
    use std::io::{Seek, SeekFrom, Write};
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let b_bytes = AtomicU64::new(0);
    let c_rounds = AtomicU64::new(0);
    let img = dir.join("img");
    let mnt = dir.join("mnt");
    let _ = fs::remove_file(&img);
    fs::create_dir_all(&mnt).expect("mount point");
    run(Command::new(uf2fs)
        .arg("mkfs")
        .arg(&img)
        .args(["--size", "2G"]));
    run(Command::new(uf2fs)
        .arg("mount")
        .arg(&img)
        .arg(&mnt)
        .args(["-o", opt]));
    let stop = AtomicBool::new(false);
    let dir1 = mnt.join("dir1");
    fs::create_dir(&dir1).expect("dir1");
    let cdirs: Vec<PathBuf> = (0..competitors)
        .map(|i| mnt.join(format!("dir2-{i}")))
        .collect();
    for d in &cdirs {
        fs::create_dir(d).expect("dir2");
    }
    let secs = std::thread::scope(|s| {
        // B: 128 KiB writes, over and over a 256 MiB file (no fsync).
        s.spawn(|| {
            let mut f = OpenOptions::new()
                .create(true)
                .truncate(true)
                .write(true)
                .open(mnt.join("stream"))
                .expect("stream file");
            let buf = vec![0x5au8; 128 << 10];
            let mut off = 0u64;
            while !stop.load(Ordering::Relaxed) {
                f.write_all(&buf).expect("stream write");
                b_bytes.fetch_add(buf.len() as u64, Ordering::Relaxed);
                off += buf.len() as u64;
                if off >= 256 << 20 {
                    off = 0;
                    f.seek(SeekFrom::Start(0)).expect("seek");
                }
            }
        });
        // C: touch a file in its directory, fsync the directory, until A is done.
        for d in &cdirs {
            let (stop, c_rounds) = (&stop, &c_rounds);
            s.spawn(move || {
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    touch(&d.join(if new_files {
                        format!("f{n}")
                    } else {
                        "file".into()
                    }))
                    .expect("touch in dir2");
                    File::open(d)
                        .and_then(|h| h.sync_all())
                        .expect("fsync dir2");
                    c_rounds.fetch_add(1, Ordering::Relaxed);
                    n += 1;
                }
            });
        }
        // A: the measured thread.
        let t = Instant::now();
        let (b0, c0) = (
            b_bytes.load(Ordering::Relaxed),
            c_rounds.load(Ordering::Relaxed),
        );
        for i in 0..ops {
            touch(&dir1.join(if new_files {
                format!("f{i}")
            } else {
                "file".into()
            }))
            .expect("touch in dir1");
            File::open(&dir1)
                .and_then(|h| h.sync_all())
                .expect("fsync dir1");
        }
        let secs = t.elapsed().as_secs_f64();
        let b = b_bytes.load(Ordering::Relaxed) - b0;
        let c = c_rounds.load(Ordering::Relaxed) - c0;
        stop.store(true, Ordering::Relaxed);
        (secs, b, c)
    });
    let (secs, b, c) = secs;
    let out = run(Command::new(uf2fs).arg("status").arg(&mnt).arg("--json"));
    let status: serde_json::Value = serde_json::from_str(&out).expect("status JSON");
    run(Command::new(uf2fs).arg("umount").arg(&mnt));
    MergeRun {
        secs,
        b_mib_s: b as f64 / f64::from(1 << 20) / secs.max(1e-9),
        c_rounds_s: c as f64 / secs.max(1e-9),
        status,
    }
}

fn checkpoint_merge(
    dir: &Path,
    ops: usize,
    competitors: usize,
    runs: usize,
    workloads: &[String],
    uf2fs: &Path,
) {
    std::fs::create_dir_all(dir).expect("work dir");
    let modes = ["checkpoint_merge", "nocheckpoint_merge"];
    let n = |v: &serde_json::Value, p: &str| {
        v.pointer(p)
            .and_then(serde_json::Value::as_u64)
            .unwrap_or(0)
    };
    let mut table = Vec::new();
    let mut ratios = serde_json::Map::new();
    for w in workloads {
        let new_files = match w.as_str() {
            "seed" => false,
            "new-files" => true,
            other => panic!("unknown workload {other:?}: seed or new-files"),
        };
        let mut results: Vec<Vec<MergeRun>> = vec![Vec::new(), Vec::new()];
        for r in 0..runs {
            for (m, opt) in modes.iter().enumerate() {
                let one = merge_run(dir, uf2fs, opt, ops, competitors, new_files);
                eprintln!(
                    "{w} run {r} {opt}: A took {:.2} s, B wrote {:.1} MiB/s, C {:.0} rounds/s",
                    one.secs, one.b_mib_s, one.c_rounds_s
                );
                results[m].push(one);
            }
        }
        let median = |v: &mut Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        let mut rows = Vec::new();
        for (m, opt) in modes.iter().enumerate() {
            let mut by_time = results[m].clone();
            by_time.sort_by(|a, b| a.secs.total_cmp(&b.secs));
            let MergeRun {
                secs, status: st, ..
            } = &by_time[by_time.len() / 2];
            let b_mib_s = median(&mut results[m].iter().map(|r| r.b_mib_s).collect());
            let c_rounds_s = median(&mut results[m].iter().map(|r| r.c_rounds_s).collect());
            let (req, written, merged, fsyncs) = (
                n(st, "/checkpoints/requested"),
                n(st, "/checkpoints/written"),
                n(st, "/checkpoints/merged"),
                n(st, "/fsync_requests"),
            );
            rows.push(serde_json::json!({
                "workload": w, "mode": opt, "a_seconds": secs,
                "all_a_seconds": results[m].iter().map(|r| r.secs).collect::<Vec<_>>(),
                "b_mib_per_s": b_mib_s, "c_rounds_per_s": c_rounds_s,
                "checkpoints_requested": req, "checkpoints_written": written, "merged": merged,
                "fsync_requests": fsyncs,
                "fsyncs_per_checkpoint": fsyncs as f64 / written.max(1) as f64,
            }));
        }
        let ratio = rows[0]["a_seconds"].as_f64().unwrap_or(0.0)
            / rows[1]["a_seconds"].as_f64().unwrap_or(1.0);
        ratios.insert(w.clone(), serde_json::json!(ratio));
        table.extend(rows);
    }
    println!(
        "seed 002 on a uf2fs FUSE mount: A = {ops} x (touch dir1/FILE; fsync dir1), B = 128 KiB writes, {competitors} x C = (touch dir2/FILE; fsync dir2); medians of {runs}; B and C rates while A ran"
    );
    println!("  seed: FILE is the same file each round (the commit's loops); new-files: a new file each round");
    println!(
        "{:<10} {:<20} {:>8} {:>9} {:>9} {:>12} {:>11} {:>8} {:>15} {:>14}",
        "workload",
        "mode",
        "A (s)",
        "B MiB/s",
        "C /s",
        "cp requests",
        "cp written",
        "merged",
        "fsync requests",
        "fsyncs per cp"
    );
    for r in &table {
        println!(
            "{:<10} {:<20} {:>8.2} {:>9.1} {:>9.0} {:>12} {:>11} {:>8} {:>15} {:>14.2}",
            r["workload"].as_str().unwrap_or(""),
            r["mode"].as_str().unwrap_or(""),
            r["a_seconds"].as_f64().unwrap_or(0.0),
            r["b_mib_per_s"].as_f64().unwrap_or(0.0),
            r["c_rounds_per_s"].as_f64().unwrap_or(0.0),
            r["checkpoints_requested"].as_u64().unwrap_or(0),
            r["checkpoints_written"].as_u64().unwrap_or(0),
            r["merged"].as_u64().unwrap_or(0),
            r["fsync_requests"].as_u64().unwrap_or(0),
            r["fsyncs_per_checkpoint"].as_f64().unwrap_or(0.0),
        );
    }
    for (w, ratio) in &ratios {
        println!(
            "{w}: A's time, merged / unmerged: {:.2} (goal <= 0.60)",
            ratio.as_f64().unwrap_or(0.0)
        );
    }
    let path = dir.join("checkpoint-merge.json");
    std::fs::write(
        &path,
        serde_json::to_string_pretty(&serde_json::json!({
            "ops": ops, "competitors": competitors, "runs": runs, "rows": table,
            "merged_over_unmerged": ratios,
        }))
        .expect("JSON"),
    )
    .expect("write JSON");
    println!("JSON: {}", path.display());
}

fn main() {
    match Cli::parse().cmd {
        Cmd::Extract { dir, runs, uf2fs } => extract(&dir, runs, &uf2fs),
        Cmd::Import { dir, runs, uf2fs } => import(&dir, runs, &uf2fs),
        Cmd::CheckpointMerge {
            dir,
            ops,
            competitors,
            runs,
            workloads,
            uf2fs,
        } => checkpoint_merge(&dir, ops, competitors, runs, &workloads, &uf2fs),
        Cmd::VictimPick {
            json,
            sections,
            cap,
            iters,
        } => {
            if let Err(e) = victim_pick::victim_pick(&sections, cap, iters, &json) {
                eprintln!("victim-pick: {e}");
                std::process::exit(1);
            }
        }
        Cmd::Floor(args) => {
            if let Err(e) = floor::report(&args) {
                eprintln!("floor: {e}");
                std::process::exit(1);
            }
        }
        Cmd::Io(args) => {
            if let Err(e) = io::run(&args) {
                eprintln!("io: {e}");
                std::process::exit(1);
            }
        }
        Cmd::PipeEcho { pin } => {
            if let Err(e) = fuse_rt::pipe_echo(pin) {
                eprintln!("pipe-echo: {e}");
                std::process::exit(1);
            }
        }
        Cmd::FuseRt(args) => {
            if let Err(e) = fuse_rt::run(&args) {
                eprintln!("fuse-rt: {e}");
                std::process::exit(1);
            }
        }
        Cmd::Memfs {
            mountpoint,
            threads,
            transport,
            work_us,
        } => {
            let work = std::time::Duration::from_micros(work_us);
            if let Err(e) = memfs::serve(&mountpoint, threads, transport, work) {
                eprintln!("memfs: {e}");
                std::process::exit(1);
            }
        }
        Cmd::Compress(args) => {
            if let Err(e) = compress::run(&args) {
                eprintln!("compress: {e}");
                std::process::exit(1);
            }
        }
        Cmd::GcWaf(args) => {
            if let Err(e) = gcwaf::run(&args) {
                eprintln!("gc-waf: {e}");
                std::process::exit(1);
            }
        }
    }
}
