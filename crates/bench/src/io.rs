//! `io`: the I/O path beside the raw file and ext4 (issue 14, seed 004).
//!
//! One invocation runs every workload on up to four targets, interleaved (workload by
//! workload, target by target, so that each comparison is taken in the same minute), with the
//! host's caches dropped (`sync; echo 3 > /proc/sys/vm/drop_caches`) before each:
//! - **raw**: a plain file (fio) or directory (tree workloads) on the host file system that
//!   holds the images: what the backing storage gives with no file system of ours between;
//! - **uf2fs**: a FUSE mount (`uf2fs mount`) of an image file, mounted afresh before each
//!   workload, so that the daemon starts cold and its peak RSS (`VmHWM`) is that workload's;
//! - **ext4**: ext4 on a loop device over an image file of the same size;
//! - **engine**: the engine in this process on its own image, no FUSE: what the FUSE
//!   transport costs is the gap between this and uf2fs. Its tree workloads are the engine's
//!   equivalents (create and write each file of the source tree; copy inside the volume; a
//!   readdir and getattr walk; unlink and rmdir), not tar and cp.
//! - **memfs** (tree workloads only; not in the default targets): an in-memory file system
//!   served through the same FUSE transport and settings as uf2fs (`memfs.rs`), started once
//!   and kept for the run: what any daemon on this transport would take for the same
//!   requests, the gap to uf2fs being the daemon's own work.
//!
//! Workloads: fio `psync` sequential read and write at 4 KiB, 128 KiB and 1 MiB over a file of
//! `--size` MiB, random 4 KiB read and write at QD1 (one thread) and QD16 (16 threads on the
//! same file: FUSE has no asynchronous buffered I/O, so concurrent threads are how a queue
//! reaches the daemon) for `--runtime` seconds; writes end with an fsync, which is counted.
//! Then a tree of `--tree-files` small files (seeded; 100 directories, sizes from a few bytes
//! to 256 KiB, most under 16 KiB): `tar -x` of it, `cp -a` of the extracted tree,
//! `find | xargs stat` over it, and `rm -rf` of both; each ends with a sync of the target
//! (`uf2fs sync` on the mount, `sync -f` elsewhere), which is counted.
//!
//! The table gives MiB/s (fio) or seconds (tree), the ratios of uf2fs to raw and to ext4,
//! and the daemon's peak RSS; the JSON has every figure and fio's own report.
#![deny(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use clap::{Args, ValueEnum};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use uf2fs_engine::{Fs, NewInode};
use uf2fs_testkit::Rng;

use crate::shell::{drop_caches, q, sh};

type Res<T> = Result<T, String>;

#[derive(Clone, Copy, PartialEq, Eq, Debug, ValueEnum)]
pub enum Target {
    Raw,
    Uf2fs,
    Ext4,
    Engine,
    Memfs,
}

impl Target {
    fn name(self) -> &'static str {
        match self {
            Target::Raw => "raw",
            Target::Uf2fs => "uf2fs",
            Target::Ext4 => "ext4",
            Target::Engine => "engine",
            Target::Memfs => "memfs",
        }
    }

    /// A FUSE mount whose requests the bench counts.
    fn counted(self) -> bool {
        matches!(self, Target::Uf2fs | Target::Memfs)
    }
}

#[derive(Args)]
pub struct IoArgs {
    /// Work directory: images, mount points, the source tree (on the host file system).
    #[arg(long, default_value = "target/bench/io")]
    dir: PathBuf,
    /// The fio file's size, in MiB.
    #[arg(long, default_value_t = 512)]
    size: u64,
    /// Seconds each random workload runs.
    #[arg(long, default_value_t = 10)]
    runtime: u64,
    /// Files in the small-file tree.
    #[arg(long, default_value_t = 10_000)]
    tree_files: usize,
    /// Targets, in the order they run for each workload.
    #[arg(long, value_delimiter = ',', default_value = "raw,uf2fs,ext4,engine")]
    targets: Vec<Target>,
    /// Workloads to run (names as in the table; default all).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Rounds: every workload runs this many times on each target, rounds interleaved; the
    /// table shows medians, the JSON every value (the backing storage here varies a lot from
    /// one minute to the next).
    #[arg(long, default_value_t = 1)]
    runs: usize,
    /// The memfs target's transport (`uring` is uf2fs's default).
    #[arg(long, value_enum, default_value = "uring")]
    memfs_transport: crate::memfs::Transport,
    /// Options for `uf2fs mount -o`.
    #[arg(long, default_value = "")]
    mount_opts: String,
    /// The uf2fs binary to measure.
    #[arg(long, default_value = "target/release/uf2fs")]
    uf2fs: PathBuf,
}

/// One fio job.
struct FioJob {
    name: &'static str,
    rw: &'static str,
    bs: u64,
    threads: u32,
    timed: bool,
}

const FIO_JOBS: [FioJob; 10] = [
    FioJob {
        name: "seq-write-1m",
        rw: "write",
        bs: 1 << 20,
        threads: 1,
        timed: false,
    },
    FioJob {
        name: "seq-read-1m",
        rw: "read",
        bs: 1 << 20,
        threads: 1,
        timed: false,
    },
    FioJob {
        name: "seq-write-128k",
        rw: "write",
        bs: 128 << 10,
        threads: 1,
        timed: false,
    },
    FioJob {
        name: "seq-read-128k",
        rw: "read",
        bs: 128 << 10,
        threads: 1,
        timed: false,
    },
    FioJob {
        name: "seq-write-4k",
        rw: "write",
        bs: 4 << 10,
        threads: 1,
        timed: false,
    },
    FioJob {
        name: "seq-read-4k",
        rw: "read",
        bs: 4 << 10,
        threads: 1,
        timed: false,
    },
    FioJob {
        name: "rand-read-4k-qd1",
        rw: "randread",
        bs: 4 << 10,
        threads: 1,
        timed: true,
    },
    FioJob {
        name: "rand-read-4k-qd16",
        rw: "randread",
        bs: 4 << 10,
        threads: 16,
        timed: true,
    },
    FioJob {
        name: "rand-write-4k-qd1",
        rw: "randwrite",
        bs: 4 << 10,
        threads: 1,
        timed: true,
    },
    FioJob {
        name: "rand-write-4k-qd16",
        rw: "randwrite",
        bs: 4 << 10,
        threads: 16,
        timed: true,
    },
];

const TREE_JOBS: [&str; 4] = ["tar-x", "cp-a", "find-stat", "rm-rf"];

/// Requests the kernel sends without making the caller wait for the reply (file and
/// directory releases, forgets, interrupts): not part of a workload's transport floor.
const NOT_WAITED: [&str; 5] = [
    "RELEASE",
    "RELEASEDIR",
    "FORGET",
    "BATCH_FORGET",
    "INTERRUPT",
];

/// Every round's measurement of one workload, by target.
type Rounds = Vec<(Target, Vec<Cell>)>;

/// One measurement.
#[derive(Clone)]
struct Cell {
    /// MiB/s for fio workloads, seconds for tree workloads.
    value: f64,
    /// The uf2fs daemon's (or, for the engine, this process's) peak RSS in KiB.
    peak_rss_kib: Option<u64>,
    /// The daemon's memory bound (`cache_size`, from its status), for uf2fs cells.
    bound_bytes: Option<u64>,
    detail: Value,
}

struct Bench<'a> {
    a: &'a IoArgs,
    dir: PathBuf,
    uf2fs: PathBuf,
    /// Where each target's files go (mount points, or the raw directory).
    roots: Vec<(Target, PathBuf)>,
    /// The engine's image.
    engine_img: PathBuf,
    /// The memfs daemon (this program, `memfs` subcommand), while it serves.
    memfs: std::sync::Mutex<Option<std::process::Child>>,
}

/// `VmHWM` of a process, in KiB.
fn peak_rss(pid: &str) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find(|l| l.starts_with("VmHWM:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// The small-file tree: 100 directories in two levels, `files` files, most under 16 KiB.
fn make_tree(src: &Path, files: usize) -> Res<(usize, u64)> {
    let mut rng = Rng::from_state(0x1234_5678_9abc_def1);
    let mut bytes = 0;
    let mut buf = vec![0u8; 256 << 10];
    for (i, b) in buf.iter_mut().enumerate() {
        *b = (i * 131 % 251) as u8;
    }
    for i in 0..files {
        let d = src.join(format!("d{:02}/e{:02}", i % 10, (i / 10) % 10));
        std::fs::create_dir_all(&d).map_err(|e| format!("{}: {e}", d.display()))?;
        let size = match rng.below(100) {
            0..=59 => rng.below(4096),
            60..=89 => 4096 + rng.below(12 << 10),
            _ => 16 << 10 | rng.below(240 << 10),
        } as usize;
        let start = rng.below(4096) as usize;
        let data = buf
            .get(start..start + size.min(buf.len() - start))
            .unwrap_or(&[]);
        std::fs::write(d.join(format!("file-{i:05}.txt")), data)
            .map_err(|e| format!("tree file: {e}"))?;
        bytes += data.len() as u64;
    }
    Ok((files, bytes))
}

impl Bench<'_> {
    fn root(&self, t: Target) -> Res<&Path> {
        self.roots
            .iter()
            .find(|(x, _)| *x == t)
            .map(|(_, p)| p.as_path())
            .ok_or_else(|| format!("no root for {}", t.name()))
    }

    fn mount_uf2fs(&self) -> Res<()> {
        let mnt = self.root(Target::Uf2fs)?;
        let mut cmd = format!(
            "{} mount {} {}",
            q(&self.uf2fs),
            q(&self.dir.join("uf2fs.img")),
            q(mnt)
        );
        if !self.a.mount_opts.is_empty() {
            cmd += &format!(" -o '{}'", self.a.mount_opts);
        }
        sh(&cmd).map(|_| ())
    }

    fn umount_uf2fs(&self) -> Res<()> {
        if !self.a.targets.contains(&Target::Uf2fs) {
            return Ok(());
        }
        let mnt = self.root(Target::Uf2fs)?;
        sh(&format!(
            "mountpoint -q {m} && {u} umount {m} || true",
            m = q(mnt),
            u = q(&self.uf2fs)
        ))
        .map(|_| ())
    }

    /// The daemon's status (`uf2fs status --json`).
    fn status(&self) -> Res<Value> {
        let out = sh(&format!(
            "{} status {} --json",
            q(&self.uf2fs),
            q(self.root(Target::Uf2fs)?)
        ))?;
        serde_json::from_str(&out).map_err(|e| format!("status JSON: {e}"))
    }

    /// The daemon's pid and its memory bound (`cache_size`), from its status.
    fn daemon(&self) -> Res<(String, Option<u64>)> {
        let v = self.status()?;
        let pid = v
            .get("pid")
            .and_then(Value::as_u64)
            .map(|p| p.to_string())
            .ok_or("no pid in uf2fs status")?;
        let bound = v
            .pointer("/memory/cache_size_bytes")
            .and_then(Value::as_u64);
        Ok((pid, bound))
    }

    /// The FUSE requests the daemon has served since mount, by kind (uf2fs: its status;
    /// memfs: its root's `user.memfs.requests`).
    fn requests(&self, t: Target) -> Res<serde_json::Map<String, Value>> {
        if t == Target::Memfs {
            let mut buf = vec![0u8; 64 << 10];
            let n = rustix::fs::getxattr(self.root(t)?, "user.memfs.requests", &mut buf[..])
                .map_err(|e| format!("memfs requests: {e}"))?;
            let v: Value = serde_json::from_slice(buf.get(..n).unwrap_or(&[]))
                .map_err(|e| format!("memfs requests JSON: {e}"))?;
            return v
                .as_object()
                .cloned()
                .ok_or_else(|| "memfs requests: not an object".to_string());
        }
        self.status()?
            .pointer("/requests/by_kind")
            .and_then(Value::as_object)
            .cloned()
            .ok_or_else(|| "no requests in uf2fs status".to_string())
    }

    /// Starts the memfs daemon on its mount point and waits (up to 10 s) for the mount.
    fn start_memfs(&self) -> Res<()> {
        let mnt = self.root(Target::Memfs)?;
        let exe = std::env::current_exe().map_err(|e| format!("this program: {e}"))?;
        let log = std::fs::File::create(self.dir.join("memfs.log"))
            .map_err(|e| format!("memfs.log: {e}"))?;
        let child = std::process::Command::new(exe)
            .arg("memfs")
            .arg(mnt)
            .arg("--transport")
            .arg(
                self.a
                    .memfs_transport
                    .to_possible_value()
                    .map_or("uring".into(), |v| v.get_name().to_string()),
            )
            .stdout(log.try_clone().map_err(|e| e.to_string())?)
            .stderr(log)
            .spawn()
            .map_err(|e| format!("starting memfs: {e}"))?;
        *self.memfs.lock().map_err(|_| "memfs lock")? = Some(child);
        for _ in 0..200 {
            if sh(&format!("mountpoint -q {}", q(mnt))).is_ok() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err(format!(
            "memfs did not mount on {} (see {})",
            mnt.display(),
            self.dir.join("memfs.log").display()
        ))
    }

    fn stop_memfs(&self) {
        let Ok(mut slot) = self.memfs.lock() else {
            return;
        };
        if let Some(mut child) = slot.take() {
            if let Ok(mnt) = self.root(Target::Memfs) {
                let _ = sh(&format!("umount {} 2>/dev/null; true", q(mnt)));
            }
            for _ in 0..100 {
                if let Ok(Some(_)) = child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// What the transport alone costs a tree workload on uf2fs: the requests it made the
    /// caller wait for (`WAITED`), each at the price of a null round trip (a getxattr of an
    /// absent name on the mount, timed right after the workload), whatever the engine does.
    fn transport_floor(
        &self,
        t: Target,
        before: &serde_json::Map<String, Value>,
        files: usize,
    ) -> Res<Value> {
        let after = self.requests(t)?;
        let count = |m: &serde_json::Map<String, Value>, k: &str| {
            m.get(k).and_then(Value::as_u64).unwrap_or(0)
        };
        let by_kind: serde_json::Map<String, Value> = after
            .keys()
            .map(|k| {
                (
                    k.clone(),
                    json!(count(&after, k).saturating_sub(count(before, k))),
                )
            })
            .filter(|(_, n)| n.as_u64() != Some(0))
            .collect();
        let total: u64 = by_kind.values().filter_map(Value::as_u64).sum();
        let waited: u64 = by_kind
            .iter()
            .filter(|(k, _)| !NOT_WAITED.contains(&k.as_str()))
            .filter_map(|(_, n)| n.as_u64())
            .sum();
        // Files the workload made or removed (both trees for rm -rf), else the tree's.
        let made = |k: &str| count(&after, k).saturating_sub(count(before, k));
        let touched = made("CREATE") + made("UNLINK");
        let files = if touched > 0 { touched as usize } else { files };
        let (rt_us, _) = crate::fuse_rt::time_calls(self.root(t)?, 4000, None)?;
        Ok(json!({
            "requests": total,
            "waited_requests": waited,
            "files": files,
            "waited_per_file": waited as f64 / files.max(1) as f64,
            "by_kind": by_kind,
            "null_round_trip_us": rt_us,
            "transport_floor_seconds": waited as f64 * rt_us / 1e6,
        }))
    }

    /// Fresh state before a measurement: the daemon remounted (cold, its peak reset), the
    /// host's caches dropped.
    fn cold(&self, t: Target) -> Res<()> {
        if t == Target::Uf2fs {
            self.umount_uf2fs()?;
            self.mount_uf2fs()?;
        }
        drop_caches()
    }

    fn sync_cmd(&self, t: Target) -> Res<String> {
        let root = self.root(t)?;
        Ok(match t {
            Target::Uf2fs => format!("{} sync {}", q(&self.uf2fs), q(root)),
            _ => format!("sync -f {}", q(root)),
        })
    }

    fn setup(&self) -> Res<()> {
        // Left mounted by an interrupted run: unmounted before the directory is removed.
        for m in ["mnt-ext4", "mnt-memfs"] {
            let _ = sh(&format!(
                "mountpoint -q {m} && umount {m}; true",
                m = q(&self.dir.join(m))
            ));
        }
        self.umount_uf2fs()?;
        let _ = std::fs::remove_dir_all(&self.dir);
        for d in ["raw", "mnt-uf2fs", "mnt-ext4", "mnt-memfs", "src"] {
            std::fs::create_dir_all(self.dir.join(d)).map_err(|e| format!("{d}: {e}"))?;
        }
        // Room for the fio file, two copies of the tree, and the cleaner's reserve.
        let mib = self.a.size + 1024 + ((self.a.tree_files as u64 * 50) >> 10);
        let wants = |t| self.a.targets.contains(&t);
        if wants(Target::Uf2fs) {
            sh(&format!(
                "{} mkfs {} --size {mib}M >/dev/null",
                q(&self.uf2fs),
                q(&self.dir.join("uf2fs.img"))
            ))?;
            self.mount_uf2fs()?;
        }
        if wants(Target::Ext4) {
            let img = self.dir.join("ext4.img");
            sh(&format!(
                "truncate -s {mib}M {i} && mkfs.ext4 -q -F {i} && mount -o loop {i} {m}",
                i = q(&img),
                m = q(&self.dir.join("mnt-ext4"))
            ))?;
        }
        if wants(Target::Memfs) {
            self.start_memfs()?;
        }
        if wants(Target::Engine) {
            sh(&format!(
                "{} mkfs {} --size {mib}M >/dev/null",
                q(&self.uf2fs),
                q(&self.engine_img)
            ))?;
        }
        Ok(())
    }

    fn teardown(&self) {
        let _ = self.umount_uf2fs();
        self.stop_memfs();
        let _ = sh(&format!(
            "mountpoint -q {m} && umount {m}; true",
            m = q(&self.dir.join("mnt-ext4"))
        ));
    }

    fn fio(&self, t: Target, job: &FioJob) -> Res<Cell> {
        let file = self.root(t)?.join("fio.dat");
        if job.rw == "write" {
            let _ = std::fs::remove_file(&file);
            if t == Target::Uf2fs {
                sh(&self.sync_cmd(t)?)?;
            }
            if t == Target::Memfs {
                // memfs's first write of a file pays for its fresh memory (a page fault per
                // 4 KiB: 0.51-0.71x the raw file at stop 46, against 0.72-0.90x over a file
                // it holds, and the same again with the data thrown away): memfs's own cost,
                // not the transport's. Its sequential writes go over a file written once
                // before, untimed.
                sh(&format!(
                    "head -c {}M /dev/zero > {}",
                    self.a.size,
                    q(&file)
                ))?;
            }
        }
        self.cold(t)?;
        let mut cmd = format!(
            "fio --name={} --filename={} --rw={} --bs={} --size={}M --ioengine=psync \
             --numjobs={} --thread --group_reporting --output-format=json",
            job.name,
            q(&file),
            job.rw,
            job.bs,
            self.a.size,
            job.threads
        );
        if job.timed {
            cmd += &format!(" --runtime={} --time_based", self.a.runtime);
        }
        if job.rw.contains("write") {
            cmd += " --end_fsync=1";
        }
        let pid = self.daemon_of(t)?;
        let started = Instant::now();
        let out = sh(&cmd)?;
        let wall = started.elapsed().as_secs_f64();
        let v: Value = serde_json::from_str(&out).map_err(|e| format!("fio JSON: {e}"))?;
        let side = if job.rw.contains("read") {
            "read"
        } else {
            "write"
        };
        let j = v.pointer("/jobs/0").ok_or("fio gave no job")?;
        let bw = j
            .pointer(&format!("/{side}/bw_bytes"))
            .and_then(Value::as_f64)
            .ok_or("fio gave no bandwidth")?;
        Ok(Cell {
            value: bw / f64::from(1 << 20),
            peak_rss_kib: pid.as_ref().and_then(|(p, _)| peak_rss(p)),
            bound_bytes: pid.as_ref().and_then(|(_, b)| *b),
            detail: json!({
                "wall_seconds": wall,
                "iops": j.pointer(&format!("/{side}/iops")),
                "clat_mean_ns": j.pointer(&format!("/{side}/clat_ns/mean")),
                "clat_p99_ns": j.pointer(&format!("/{side}/clat_ns/percentile/99.000000")),
            }),
        })
    }

    fn tree(&self, t: Target, job: &str) -> Res<Cell> {
        let root = self.root(t)?;
        let (tree, copy) = (root.join("tree"), root.join("copy"));
        let cmd = match job {
            "tar-x" => format!(
                "mkdir {d} && tar -xf {tar} -C {d}",
                d = q(&tree),
                tar = q(&self.dir.join("tree.tar"))
            ),
            "cp-a" => format!("cp -a {} {}", q(&tree), q(&copy)),
            "find-stat" => format!("find {} -print0 | xargs -0 stat > /dev/null", q(&tree)),
            "rm-rf" => format!("rm -rf {} {}", q(&tree), q(&copy)),
            other => return Err(format!("unknown tree workload {other}")),
        };
        // A round run without rm -rf (`--only`) leaves its trees: gone before the next
        // tar -x, untimed.
        if job == "tar-x" {
            sh(&format!("rm -rf {} {}", q(&tree), q(&copy)))?;
            if t == Target::Uf2fs {
                sh(&self.sync_cmd(t)?)?;
            }
        }
        self.cold(t)?;
        let pid = self.daemon_of(t)?;
        // (A daemon older than the request counts has none: its cells go without.)
        let before = if t.counted() {
            self.requests(t).ok()
        } else {
            None
        };
        let started = Instant::now();
        sh(&cmd)?;
        if job != "find-stat" {
            sh(&self.sync_cmd(t)?)?;
        }
        let secs = started.elapsed().as_secs_f64();
        let peak_rss_kib = pid.as_ref().and_then(|(p, _)| peak_rss(p));
        let detail = match before {
            Some(before) => json!({
                "command": cmd,
                "transport": self.transport_floor(t, &before, self.a.tree_files)?,
            }),
            None => json!({ "command": cmd }),
        };
        Ok(Cell {
            value: secs,
            peak_rss_kib,
            bound_bytes: pid.as_ref().and_then(|(_, b)| *b),
            detail,
        })
    }

    /// The serving daemon's pid and memory bound, for a FUSE target.
    fn daemon_of(&self, t: Target) -> Res<Option<(String, Option<u64>)>> {
        Ok(match t {
            Target::Uf2fs => Some(self.daemon()?),
            Target::Memfs => self
                .memfs
                .lock()
                .map_err(|_| "memfs lock")?
                .as_ref()
                .map(|c| (c.id().to_string(), None)),
            _ => None,
        })
    }

    fn measure(&self, t: Target, name: &str) -> Res<Cell> {
        if t == Target::Engine {
            drop_caches()?;
            reset_own_peak();
            let mut cell = engine_job(self, name)?;
            cell.peak_rss_kib = peak_rss("self");
            return Ok(cell);
        }
        match FIO_JOBS.iter().find(|j| j.name == name) {
            Some(job) => self.fio(t, job),
            None => self.tree(t, name),
        }
    }
}

/// The memory goal: every workload's peak RSS within the daemon's bound (`cache_size`).
fn memory_goal(rows: &[(String, Vec<(Target, Cell)>)]) -> Option<Value> {
    let cells: Vec<(&str, u64, u64)> = rows
        .iter()
        .filter_map(|(name, cells)| {
            let c = cells
                .iter()
                .find(|(t, _)| *t == Target::Uf2fs)
                .map(|(_, c)| c)?;
            Some((name.as_str(), c.peak_rss_kib? * 1024, c.bound_bytes?))
        })
        .collect();
    let (worst, peak, bound) = cells.iter().max_by_key(|(_, p, b)| p * 1000 / b.max(&1))?;
    let met = cells.iter().all(|(_, p, b)| p <= b);
    let mib = |b: &u64| *b as f64 / f64::from(1 << 20);
    println!(
        "goal memory: highest peak RSS {:.0} MiB ({worst}) of cache_size {:.0} MiB (want every workload within it): {}",
        mib(peak),
        mib(bound),
        if met { "met" } else { "NOT met" }
    );
    Some(
        json!({ "workload": worst, "peak_rss_bytes": peak, "cache_size_bytes": bound, "met": met }),
    )
}

/// The median round of a cell (by value), with every round's value and the highest peak RSS.
fn median_cell(mut got: Vec<Cell>) -> Cell {
    got.sort_by(|x, y| x.value.total_cmp(&y.value));
    let values: Vec<f64> = got.iter().map(|c| c.value).collect();
    let peak = got.iter().filter_map(|c| c.peak_rss_kib).max();
    let mid = got.len() / 2;
    let mut cell = got.swap_remove(mid);
    cell.peak_rss_kib = peak;
    cell.detail = json!({ "median_round": cell.detail, "values": values });
    cell
}

/// Resets this process's `VmHWM` (Linux: writing 5 to clear_refs).
fn reset_own_peak() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

fn eng<T>(r: uf2fs_engine::Result<T>, what: &str) -> Res<T> {
    r.map_err(|e| format!("engine {what}: {e}"))
}

const REG: u16 = 0o100644;
const DIR: u16 = 0o40755;

fn new_inode(mode: u16) -> NewInode {
    NewInode {
        mode,
        uid: 0,
        gid: 0,
        rdev: (0, 0),
    }
}

/// The engine's own versions of the workloads, in this process on its own image.
fn engine_job(b: &Bench, name: &str) -> Res<Cell> {
    let fs = eng(Fs::open_rw(&b.engine_img), "open")?;
    let root = fs.root_ino();
    let started = Instant::now();
    let mut detail = serde_json::Map::new();
    let value = if let Some(job) = FIO_JOBS.iter().find(|j| j.name == name) {
        let size = b.a.size << 20;
        let bytes = match job.rw {
            "write" => {
                if fs.lookup(root, b"fio.dat").is_ok() {
                    eng(fs.unlink(root, b"fio.dat"), "unlink")?;
                    eng(fs.sync(), "sync")?;
                }
                let started = Instant::now();
                let ino = eng(fs.create_node(root, b"fio.dat", new_inode(REG)), "create")?;
                let buf = vec![0x6bu8; job.bs as usize];
                let mut off = 0;
                while off < size {
                    eng(fs.write(ino, off, &buf), "write")?;
                    off += job.bs;
                }
                eng(fs.fsync(ino, false), "fsync")?;
                let secs = started.elapsed().as_secs_f64();
                eng(fs.final_checkpoint(), "checkpoint")?;
                return Ok(Cell {
                    value: size as f64 / secs / f64::from(1 << 20),
                    peak_rss_kib: None,
                    bound_bytes: None,
                    detail: json!({ "seconds": secs }),
                });
            }
            "read" => {
                let ino = eng(fs.lookup(root, b"fio.dat"), "lookup")?;
                let mut buf = vec![0u8; job.bs as usize];
                let mut off = 0;
                while off < size {
                    let n = eng(fs.read(ino, off, &mut buf), "read")?;
                    if n == 0 {
                        break;
                    }
                    off += n as u64;
                }
                off
            }
            rw => {
                let ino = eng(fs.lookup(root, b"fio.dat"), "lookup")?;
                let blocks = size / job.bs;
                let write = rw == "randwrite";
                let stop = AtomicBool::new(false);
                let done = AtomicU64::new(0);
                let failed = std::sync::Mutex::new(None::<String>);
                std::thread::scope(|s| {
                    for t in 0..job.threads {
                        let (fs, stop, done, failed) = (&fs, &stop, &done, &failed);
                        s.spawn(move || {
                            let mut rng = Rng::from_state(0x9e37_79b9_7f4a_7c15 ^ u64::from(t + 1));
                            let mut buf = vec![0x3cu8; job.bs as usize];
                            while !stop.load(Ordering::Relaxed) {
                                let off = rng.below(blocks) * job.bs;
                                let r = if write {
                                    fs.write(ino, off, &buf).map(|_| ())
                                } else {
                                    fs.read(ino, off, &mut buf).map(|_| ())
                                };
                                if let Err(e) = r {
                                    if let Ok(mut f) = failed.lock() {
                                        *f = Some(e.to_string());
                                    }
                                    stop.store(true, Ordering::Relaxed);
                                }
                                done.fetch_add(job.bs, Ordering::Relaxed);
                            }
                        });
                    }
                    std::thread::sleep(Duration::from_secs(b.a.runtime));
                    stop.store(true, Ordering::Relaxed);
                });
                if let Some(e) = failed.lock().ok().and_then(|mut f| f.take()) {
                    return Err(format!("engine {rw}: {e}"));
                }
                if write {
                    eng(fs.fsync(ino, false), "fsync")?;
                }
                done.load(Ordering::Relaxed)
            }
        };
        let secs = started.elapsed().as_secs_f64();
        detail.insert("seconds".into(), json!(secs));
        bytes as f64 / secs / f64::from(1 << 20)
    } else {
        match name {
            "tar-x" => {
                let d = eng(fs.create_node(root, b"tree", new_inode(DIR)), "mkdir")?;
                import(&fs, d, &b.dir.join("src"))?;
            }
            "cp-a" => {
                let from = eng(fs.lookup(root, b"tree"), "lookup")?;
                let d = eng(fs.create_node(root, b"copy", new_inode(DIR)), "mkdir")?;
                copy(&fs, from, d)?;
            }
            "find-stat" => {
                let d = eng(fs.lookup(root, b"tree"), "lookup")?;
                detail.insert("entries".into(), json!(walk(&fs, d)?));
            }
            "rm-rf" => {
                // As `rm -rf tree copy` does on the other targets: a tree that is not there
                // (`cp-a` was not run) is no error.
                for n in [&b"tree"[..], b"copy"] {
                    let d = match fs.lookup(root, n) {
                        Ok(d) => d,
                        Err(uf2fs_engine::Error::NotFound) => continue,
                        Err(e) => return Err(format!("engine lookup: {e}")),
                    };
                    remove(&fs, d)?;
                    eng(fs.rmdir(root, n), "rmdir")?;
                }
            }
            other => return Err(format!("unknown workload {other}")),
        }
        if name != "find-stat" {
            eng(fs.sync(), "sync")?;
        }
        started.elapsed().as_secs_f64()
    };
    eng(fs.final_checkpoint(), "checkpoint")?;
    Ok(Cell {
        value,
        peak_rss_kib: None,
        bound_bytes: None,
        detail: Value::Object(detail),
    })
}

fn children(fs: &Fs, dir: u32) -> Res<Vec<uf2fs_engine::DirEntry>> {
    Ok(eng(fs.readdir(dir), "readdir")?
        .into_iter()
        .filter(|e| e.name != b"." && e.name != b"..")
        .collect())
}

fn is_dir(fs: &Fs, ino: u32) -> Res<bool> {
    Ok(eng(fs.getattr(ino), "getattr")?.file_type == uf2fs_engine::FileType::Directory)
}

fn import(fs: &Fs, dir: u32, src: &Path) -> Res<()> {
    let mut entries: Vec<_> = std::fs::read_dir(src)
        .map_err(|e| format!("{}: {e}", src.display()))?
        .filter_map(|e| e.ok())
        .collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let name = e.file_name();
        let name = std::os::unix::ffi::OsStrExt::as_bytes(name.as_os_str()).to_vec();
        if e.file_type().map_err(|e| e.to_string())?.is_dir() {
            let d = eng(fs.create_node(dir, &name, new_inode(DIR)), "mkdir")?;
            import(fs, d, &e.path())?;
        } else {
            let data = std::fs::read(e.path()).map_err(|e| e.to_string())?;
            let f = eng(fs.create_node(dir, &name, new_inode(REG)), "create")?;
            eng(fs.write(f, 0, &data), "write")?;
        }
    }
    Ok(())
}

fn copy(fs: &Fs, from: u32, to: u32) -> Res<()> {
    for e in children(fs, from)? {
        if is_dir(fs, e.ino)? {
            let d = eng(fs.create_node(to, &e.name, new_inode(DIR)), "mkdir")?;
            copy(fs, e.ino, d)?;
        } else {
            let size = eng(fs.getattr(e.ino), "getattr")?.size;
            let mut buf = vec![0u8; usize::try_from(size).map_err(|e| e.to_string())?];
            let n = eng(fs.read(e.ino, 0, &mut buf), "read")?;
            let f = eng(fs.create_node(to, &e.name, new_inode(REG)), "create")?;
            eng(fs.write(f, 0, buf.get(..n).unwrap_or(&[])), "write")?;
        }
    }
    Ok(())
}

fn walk(fs: &Fs, dir: u32) -> Res<u64> {
    let mut n = 0;
    for e in children(fs, dir)? {
        n += 1;
        if is_dir(fs, e.ino)? {
            n += walk(fs, e.ino)?;
        }
    }
    Ok(n)
}

fn remove(fs: &Fs, dir: u32) -> Res<()> {
    for e in children(fs, dir)? {
        if is_dir(fs, e.ino)? {
            remove(fs, e.ino)?;
            eng(fs.rmdir(dir, &e.name), "rmdir")?;
        } else {
            eng(fs.unlink(dir, &e.name), "unlink")?;
        }
    }
    Ok(())
}

pub fn run(a: &IoArgs) -> Res<()> {
    if !rustix::process::geteuid().is_root() {
        return Err("run as root (drop_caches, loop devices)".into());
    }
    let dir = std::path::absolute(&a.dir).map_err(|e| e.to_string())?;
    let uf2fs = std::path::absolute(&a.uf2fs).map_err(|e| e.to_string())?;
    let roots = a
        .targets
        .iter()
        .map(|&t| {
            let p = match t {
                Target::Raw => dir.join("raw"),
                Target::Uf2fs => dir.join("mnt-uf2fs"),
                Target::Ext4 => dir.join("mnt-ext4"),
                Target::Engine => dir.join("engine"),
                Target::Memfs => dir.join("mnt-memfs"),
            };
            (t, p)
        })
        .collect();
    let b = Bench {
        a,
        engine_img: dir.join("engine.img"),
        dir,
        uf2fs,
        roots,
        memfs: std::sync::Mutex::new(None),
    };
    b.setup()?;
    let result = measure_all(&b);
    b.teardown();
    result
}

fn measure_all(b: &Bench) -> Res<()> {
    let a = b.a;
    let wants_fio = FIO_JOBS
        .iter()
        .any(|j| a.only.is_empty() || a.only.iter().any(|o| o == j.name));
    if wants_fio && sh("fio --version >/dev/null 2>&1").is_err() {
        return Err("fio not found (bash scripts/setup.sh installs it)".into());
    }
    eprintln!("io: making the {}-file tree", a.tree_files);
    let (files, bytes) = make_tree(&b.dir.join("src"), a.tree_files)?;
    sh(&format!(
        "tar -cf {} -C {} .",
        q(&b.dir.join("tree.tar")),
        q(&b.dir.join("src"))
    ))?;
    let names: Vec<&str> = FIO_JOBS
        .iter()
        .map(|j| j.name)
        .chain(TREE_JOBS)
        .filter(|n| a.only.is_empty() || a.only.iter().any(|o| o == n))
        .collect();
    // Rounds are interleaved: a fio workload runs its rounds one after another (each target
    // in turn), the tree workloads run as a sequence per round (tar -x, cp -a, find, rm -rf:
    // each needs the one before).
    let mut got: Vec<(String, Rounds)> = names
        .iter()
        .map(|n| {
            (
                n.to_string(),
                a.targets.iter().map(|&t| (t, Vec::new())).collect(),
            )
        })
        .collect();
    let mut run_one = |name: &str, round: usize| -> Res<()> {
        let Some((_, cells)) = got.iter_mut().find(|(n, _)| n == name) else {
            return Ok(());
        };
        // Every workload on every target: on memfs, which holds its files in memory, the fio
        // jobs measure what the transport alone allows, with no device behind it.
        for (t, v) in cells.iter_mut() {
            eprint!("io: {name} on {} (round {}) ... ", t.name(), round + 1);
            let cell = b.measure(*t, name)?;
            eprintln!("{:.2}", cell.value);
            v.push(cell);
        }
        Ok(())
    };
    let rounds = a.runs.max(1);
    for job in FIO_JOBS.iter().filter(|j| names.contains(&j.name)) {
        for round in 0..rounds {
            run_one(job.name, round)?;
        }
    }
    for round in 0..rounds {
        for name in TREE_JOBS.iter().filter(|n| names.contains(n)) {
            run_one(name, round)?;
        }
    }
    let rows: Vec<(String, Vec<(Target, Cell)>)> = got
        .into_iter()
        .map(|(n, cells)| {
            let cells = cells
                .into_iter()
                .filter(|(_, v)| !v.is_empty())
                .map(|(t, v)| (t, median_cell(v)))
                .collect();
            (n, cells)
        })
        .collect();
    print_and_save(b, &rows, files, bytes)
}

fn print_and_save(
    b: &Bench,
    rows: &[(String, Vec<(Target, Cell)>)],
    files: usize,
    bytes: u64,
) -> Res<()> {
    let a = b.a;
    println!(
        "I/O path: fio file {} MiB, random runs {} s, tree of {files} files ({:.0} MiB); caches dropped before each; medians of {} rounds; fio in MiB/s (higher is better), tree in seconds (lower is better)",
        a.size,
        a.runtime,
        bytes as f64 / 1048576.0,
        a.runs.max(1)
    );
    let mut head = format!("{:<20}", "workload");
    for t in &a.targets {
        head += &format!(" {:>9}", t.name());
    }
    head += &format!(
        " {:>11} {:>12} {:>12}",
        "uf2fs/raw", "uf2fs/ext4", "uf2fs RSS"
    );
    println!("{head}");
    let value = |cells: &[(Target, Cell)], t: Target| {
        cells.iter().find(|(x, _)| *x == t).map(|(_, c)| c.value)
    };
    let mut json_rows = Vec::new();
    for (name, cells) in rows {
        let is_tree = TREE_JOBS.contains(&name.as_str());
        let mut line = format!("{name:<20}");
        for t in &a.targets {
            line += &match value(cells, *t) {
                Some(v) => format!(" {v:>9.2}"),
                None => format!(" {:>9}", "-"),
            };
        }
        // Ratios in the direction of "uf2fs takes X times": throughput over throughput for
        // fio (higher better), seconds over seconds for the tree (lower better).
        let ratio = |other: Target| {
            value(cells, Target::Uf2fs)
                .zip(value(cells, other))
                .map(|(u, o)| u / o)
        };
        let fmt = |r: Option<f64>| r.map_or("-".to_string(), |r| format!("{r:.2}"));
        let rss = cells
            .iter()
            .find(|(t, _)| *t == Target::Uf2fs)
            .and_then(|(_, c)| c.peak_rss_kib);
        line += &format!(
            " {:>11} {:>12} {:>12}",
            fmt(ratio(Target::Raw)),
            fmt(ratio(Target::Ext4)),
            rss.map_or("-".into(), |k| format!("{:.0} MiB", k as f64 / 1024.0))
        );
        println!("{line}");
        json_rows.push(json!({
            "workload": name,
            "unit": if is_tree { "seconds" } else { "MiB/s" },
            "uf2fs_over_raw": ratio(Target::Raw),
            "uf2fs_over_ext4": ratio(Target::Ext4),
            "cells": cells.iter().map(|(t, c)| json!({
                "target": t.name(), "value": c.value, "peak_rss_kib": c.peak_rss_kib,
                "detail": c.detail,
            })).collect::<Vec<_>>(),
        }));
    }
    // The tree workloads' transport floor: what uf2fs would take if the engine cost nothing.
    for (name, cells) in rows {
        for (t, c) in cells {
            let Some(f) = c.detail.pointer("/median_round/transport") else {
                continue;
            };
            let num = |k: &str| f.get(k).and_then(Value::as_f64).unwrap_or(0.0);
            let floor = num("transport_floor_seconds");
            let over_ext4 = value(cells, Target::Ext4)
                .map_or("-".to_string(), |e| format!("{:.2}x ext4", floor / e));
            println!(
                "transport floor {name} ({}): {:.1} waited requests per file ({:.0} in all) x \
                 {:.1} us (a null round trip, timed after it) = {floor:.2} s, {over_ext4}",
                t.name(),
                num("waited_per_file"),
                num("requests"),
                num("null_round_trip_us"),
            );
        }
        // memfs measured: the same requests served with no engine behind them.
        if let Some(m) = value(cells, Target::Memfs) {
            let of = |t: Target, what: &str| {
                value(cells, t).map_or(String::new(), |v| format!(", {what} {:.2}x", v / m))
            };
            let ext4 = value(cells, Target::Ext4)
                .map_or(String::new(), |e| format!(" = {:.2}x ext4", m / e));
            if TREE_JOBS.contains(&name.as_str()) {
                println!(
                    "memfs {name}: {m:.2} s{ext4}{}",
                    of(Target::Uf2fs, "uf2fs is")
                );
            } else {
                // fio: throughput, and what the transport with no device allows beside the
                // raw file (sequential writes over a file memfs already holds, see `fio`).
                let raw = value(cells, Target::Raw)
                    .map_or(String::new(), |r| format!(" = {:.2}x raw", m / r));
                let over = if name.starts_with("seq-write") {
                    " (over a file it holds)"
                } else {
                    ""
                };
                println!(
                    "memfs {name}{over}: {m:.0} MiB/s{raw}{}",
                    of(Target::Uf2fs, "uf2fs does")
                );
            }
        }
    }
    // Each goal, and beside it the same ratio for memfs when it ran: the transport with no
    // engine and no device behind it. A goal memfs misses in the same run is one the
    // transport did not allow in that run (memfs still copies what it is given; a server
    // that threw writes away did no better at stop 46).
    let goal = |name: &str, other: Target, want: &str, ok: &dyn Fn(f64) -> bool| {
        let cells = rows.iter().find(|(n, _)| n == name).map(|(_, c)| c)?;
        let over = |t: Target| value(cells, t).zip(value(cells, other)).map(|(u, o)| u / o);
        let r = over(Target::Uf2fs)?;
        let met = |r: f64| if ok(r) { "met" } else { "NOT met" };
        let floor = over(Target::Memfs);
        let beside = floor.map_or(String::new(), |m| {
            format!("; the transport alone (memfs) {m:.2}: {}", met(m))
        });
        println!(
            "goal {name}: uf2fs/{} = {r:.2} (want {want}): {}{beside}",
            other.name(),
            met(r)
        );
        Some(json!({
            "workload": name, "against": other.name(), "ratio": r, "want": want,
            "met": ok(r), "memfs_ratio": floor, "memfs_met": floor.map(ok),
        }))
    };
    let goals: Vec<Value> = [
        goal("seq-read-1m", Target::Raw, ">= 0.85", &|r| r >= 0.85),
        goal("seq-write-1m", Target::Raw, ">= 0.85", &|r| r >= 0.85),
        goal("rand-read-4k-qd1", Target::Raw, ">= 0.80", &|r| r >= 0.8),
        goal("tar-x", Target::Ext4, "<= 2.0", &|r| r <= 2.0),
        goal("cp-a", Target::Ext4, "<= 2.0", &|r| r <= 2.0),
        goal("rm-rf", Target::Ext4, "<= 2.0", &|r| r <= 2.0),
    ]
    .into_iter()
    .flatten()
    .chain(memory_goal(rows))
    .collect();
    let path = b.dir.join("io.json");
    let doc = json!({
        "benchmark": "io",
        "fio_file_mib": a.size,
        "random_runtime_s": a.runtime,
        "runs": a.runs.max(1),
        "tree_files": files,
        "tree_bytes": bytes,
        "mount_opts": a.mount_opts,
        "targets": a.targets.iter().map(|t| t.name()).collect::<Vec<_>>(),
        "rows": json_rows,
        "goals": goals,
    });
    std::fs::write(
        &path,
        serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?,
    )
    .map_err(|e| format!("{}: {e}", path.display()))?;
    println!("JSON: {}", path.display());
    Ok(())
}
