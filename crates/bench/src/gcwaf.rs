//! `gc-waf`: the cleaner's write amplification, uf2fs beside Linux 6.1 beside exact greedy.
//!
//! One invocation runs each chosen workload on up to three sides and prints one table:
//! - **uf2fs**: the FUSE mount (`uf2fs mount /dev/loopN DIR -o mode=...`) over a loop
//!   device, so that the device's own counter (`/sys/block/loopN/stat`, field 7: 512-byte
//!   sectors written) is exact; `uf2fs status --json` is kept at every snapshot (blocks
//!   written by cause, GC counters) and the last one, taken before the unmount, goes into the
//!   JSON whole.
//! - **Linux 6.1**: `tools/linux-f2fs` on an image formatted with the same
//!   `mkfs.f2fs` arguments, running the same job script (only the snapshot function differs:
//!   `sync` and `/sys/block/vda/stat` plus the debugfs status there, `uf2fs sync` and the loop
//!   device's stat here). Block counts only: the VM's clock is emulated. Linux runs are slow
//!   (a 2 GiB job takes ~10 minutes), so results are kept as baselines in
//!   `crates/bench/baselines/linux-6.1-*.json` with the command that made them, and reused
//!   when the parameters match (`--linux cached`, the default when one exists).
//! - **greedy**: [`crate::greedy`], exact greedy cleaning of one log under
//!   uniform random overwrites at the image's main-area segment count and live-data fraction:
//!   the floor no online cleaner beats on that workload (metadata comes on top).
//!
//! The job is a shell script (busybox `sh` in the guest, `sh` on the host). Every step runs in
//! the background under one deadline for the whole job (`--timeout`): a step still running at
//! the deadline is frozen (SIGSTOP), its bytes written so far are read from `/proc/PID/io`
//! (`wchar`), a snapshot is taken, and it is killed; the row then says "did not finish in T"
//! and its figures cover what was done. This is how Linux 6.1's O_DIRECT collapse in mode=lfs
//! (a foreground GC call for nearly every write) is reported. After each step the job takes a
//! snapshot `post_STEP` (after a sync); the measured phase runs from the snapshot before the
//! `measure` step to the one after it, so WAF = device sectors written between them * 512 /
//! the user bytes the step wrote.
#![deny(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use crate::greedy::Skew;
use clap::{Args, ValueEnum};
use serde_json::{json, Map, Value};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

/// Our workload generators, built static for both sides: the plain modes and the skewed ones.
const WLOAD_C: &str = include_str!("../wload.c");
const WLOAD_SKEW_C: &str = include_str!("../wload-skew.c");
/// Changes when wload-skew.c changes what it writes (part of a baseline's parameters).
const WLOAD_SKEW_VERSION: u32 = 1;
/// F2FS block size; every workload writes whole blocks.
const BLOCK: u64 = 4096;
/// Seconds the VM gets beyond the job's own deadline (boot, a slow final sync, unmount).
const VM_MARGIN_SECS: u64 = 1200;

type Res<T> = Result<T, String>;

#[derive(Clone, Copy, PartialEq, Eq, Debug, ValueEnum)]
pub enum Workload {
    /// Seed 000 (a): O_DIRECT 4 KiB random overwrites, mode=lfs (fsync only at the end).
    Seed000a,
    /// Seed 000 (b): buffered 4 KiB random overwrites, fsync every --sync-every, mode=lfs.
    Seed000b,
    /// Seed 000 (c): as (b) in mode=adaptive.
    Seed000c,
    /// (b) with --hot-share % of the writes to the first --hot-pct % of the file.
    Hotcold,
    /// (b) with Zipf(--theta) block popularity.
    Zipf,
    /// Seed 001: fill the image with small files to ENOSPC, then O_SYNC 4 KiB rewrites at
    /// random offsets of random files (default mount mode, adaptive).
    Seed001,
    /// Seed 003: (a) with a per-second maximum-latency log (uf2fs only: the VM's clock is
    /// emulated).
    Seed003,
}

impl Workload {
    fn name(self) -> &'static str {
        match self {
            Workload::Seed000a => "seed000a",
            Workload::Seed000b => "seed000b",
            Workload::Seed000c => "seed000c",
            Workload::Hotcold => "hotcold",
            Workload::Zipf => "zipf",
            Workload::Seed001 => "seed001",
            Workload::Seed003 => "seed003",
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug, ValueEnum)]
pub enum LinuxMode {
    /// Boot Linux 6.1 under qemu and run the job (slow: minutes to tens of minutes).
    Run,
    /// Print the saved baseline with the same parameters (none: the row says so).
    Cached,
    /// No Linux row.
    Skip,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug, ValueEnum)]
pub enum OursMode {
    Run,
    Skip,
}

#[derive(Args)]
pub struct GcWafArgs {
    /// Workloads to run, in order.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "seed000a,seed000b,seed000c,hotcold,zipf,seed001,seed003"
    )]
    workloads: Vec<Workload>,
    /// Image size for the seed 000, hot/cold, zipf and seed 003 workloads (truncate -s).
    #[arg(long, default_value = "2G")]
    size: String,
    /// mkfs.f2fs -o (overprovision %) for those workloads.
    #[arg(long, default_value = "3.89")]
    ovp: String,
    /// The file's size, in % of the free space statfs shows on the fresh mount (`f_bfree`: uf2fs
    /// keeps part of it back from writers under the writeback cache, which df's available
    /// column leaves out; Linux's F2FS counts all of it available).
    #[arg(long, default_value_t = 96)]
    fill_pct: u32,
    /// Warm-up overwrites, in multiples of the file's size (not measured).
    #[arg(long, default_value_t = 1.0)]
    warm: f64,
    /// Measured overwrites, in multiples of the file's size.
    #[arg(long, default_value_t = 2.0)]
    measure: f64,
    /// fsync every this many writes in the buffered workloads (b, c, hot/cold, zipf).
    #[arg(long, default_value_t = 64)]
    sync_every: u32,
    /// Hot/cold: the hot region, % of the file's blocks.
    #[arg(long, default_value_t = 20)]
    hot_pct: u32,
    /// Hot/cold: % of the writes that go to the hot region.
    #[arg(long, default_value_t = 80)]
    hot_share: u32,
    /// Zipf exponent.
    #[arg(long, default_value_t = 0.9)]
    theta: f64,
    /// Run hot/cold and Zipf as seed 000 (a) runs its writes: O_DIRECT, no fsync, so that
    /// the total is comparable with the single-log greedy model, which has no fsync chains.
    #[arg(long)]
    skew_direct: bool,
    /// Seed 001: image size.
    #[arg(long, default_value = "1G")]
    small_size: String,
    /// Seed 001: mkfs.f2fs -o (default: mkfs.f2fs's own choice).
    #[arg(long)]
    small_ovp: Option<String>,
    /// Seed 001: size of each small file, KiB.
    #[arg(long, default_value_t = 32)]
    small_kib: u32,
    /// Seed 001: number of O_SYNC 4 KiB rewrites.
    #[arg(long, default_value_t = 100_000)]
    rewrites: u64,
    /// Deadline for each job (seconds, from the job's start; each side has its own).
    #[arg(long, default_value_t = 900)]
    timeout: u64,
    /// The Linux side: run, cached (a saved baseline) or skip. Default: cached when a
    /// baseline with the same parameters exists, else run.
    #[arg(long)]
    linux: Option<LinuxMode>,
    /// The uf2fs side: run or skip.
    #[arg(long, value_enum, default_value_t = OursMode::Run)]
    ours: OursMode,
    /// Extra uf2fs mount options (appended to mode=...).
    #[arg(long, default_value = "")]
    uf2fs_opts: String,
    /// Extra Linux mount options (appended to mode=...; part of the baseline's parameters).
    #[arg(long, default_value = "")]
    linux_opts: String,
    /// Save each Linux result run now as a baseline (in --baselines).
    #[arg(long)]
    save_baselines: bool,
    /// Where Linux baselines are kept.
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/baselines"))]
    baselines: PathBuf,
    /// Work directory (images, job scripts, each side's raw output).
    #[arg(long, default_value = "target/bench/gc-waf")]
    dir: PathBuf,
    /// JSON report.
    #[arg(long, default_value = "target/bench/gc-waf/gc-waf.json")]
    json: PathBuf,
    /// The uf2fs binary.
    #[arg(long, default_value = "target/release/uf2fs")]
    uf2fs: PathBuf,
    /// The repository's judges (linux-f2fs is run from there).
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tools"))]
    tools: PathBuf,
}

/// One workload, fully determined: what to format, how to mount, what the job does.
struct Spec {
    workload: Workload,
    /// Image size, as truncate -s takes it.
    size: String,
    /// mkfs.f2fs arguments after -f -q.
    mkfs: Vec<String>,
    /// F2FS mount mode (lfs or adaptive).
    mode: &'static str,
    /// The job's commands, the same on both sides.
    body: String,
    /// Steps in order; the last is the measured one.
    steps: Vec<&'static str>,
    /// Everything that decides Linux's result: a baseline is reused only for equal params.
    params: Value,
    /// Baseline file name: linux-6.1-{slug}.json.
    slug: String,
    /// Whether the greedy limit (uniform random overwrites of one file) applies.
    greedy: bool,
    /// Whether the Linux side applies (seed 003 measures latency: not in an emulated VM).
    linux: bool,
}

fn pct(x: f64) -> u64 {
    (x * 100.0).round().max(0.0) as u64
}

fn specs(a: &GcWafArgs) -> Vec<Spec> {
    a.workloads.iter().map(|&w| spec(a, w)).collect()
}

/// The job's first line: `avail`, the fresh mount's free MiB as statfs counts them (`f_bfree`,
/// rounded up as df rounds), the same on uf2fs and on Linux (see `fill_pct`).
const FREE_MIB: &str =
    "avail=$(stat -f -c '%f %S' $MNT | awk '{print int(($1 * $2 + 1048575) / 1048576)}')";

fn spec(a: &GcWafArgs, w: Workload) -> Spec {
    let (warm, meas) = (pct(a.warm), pct(a.measure));
    let bs = BLOCK;
    if w == Workload::Seed001 {
        let mut mkfs = vec!["-s".to_string(), "1".into()];
        if let Some(o) = &a.small_ovp {
            mkfs.splice(0..0, ["-o".to_string(), o.clone()]);
        }
        let body = format!(
            "{FREE_MIB}\n\
             echo \"$avail 0\" > $OUT/sizes.txt\n\
             snap start\n\
             step fill $PAYLOAD/wload smallfiles $MNT/d {kib}\n\
             step measure $PAYLOAD/wload rewrite $MNT/d {n} {bs} 11\n",
            kib = a.small_kib,
            n = a.rewrites,
        );
        let ovp = a.small_ovp.clone().unwrap_or_else(|| "auto".into());
        return Spec {
            workload: w,
            size: a.small_size.clone(),
            mkfs,
            mode: "adaptive",
            body,
            steps: vec!["fill", "measure"],
            params: json!({
                "workload": w.name(), "size": a.small_size, "mkfs": format!("-o {ovp} -s 1"),
                "mode": "adaptive", "linux_opts": a.linux_opts, "file_kib": a.small_kib,
                "rewrites": a.rewrites, "bs": bs, "generator": "wload smallfiles + rewrite",
            }),
            slug: format!(
                "seed001-{}-o{ovp}-k{}-n{}",
                a.small_size, a.small_kib, a.rewrites
            ),
            greedy: false,
            linux: true,
        };
    }
    let mode = if w == Workload::Seed000c {
        "adaptive"
    } else {
        "lfs"
    };
    let skewed = matches!(w, Workload::Hotcold | Workload::Zipf);
    let direct = matches!(w, Workload::Seed000a | Workload::Seed003) || (skewed && a.skew_direct);
    let sync = if direct { 0 } else { a.sync_every };
    let mut env = String::from("env");
    if direct {
        env.push_str(" WLOAD_DIRECT=1");
    }
    let writer = |seed: u32, total: &str| match w {
        Workload::Hotcold => format!(
            "$PAYLOAD/wload-skew hotcold $MNT/f {total} {bs} {seed} {sync} {} {}",
            a.hot_pct, a.hot_share
        ),
        Workload::Zipf => format!(
            "$PAYLOAD/wload-skew zipf $MNT/f {total} {bs} {seed} {sync} {}",
            a.theta
        ),
        _ => format!("$PAYLOAD/wload randwrite $MNT/f {total} {bs} {seed} {sync}"),
    };
    let latlog = if w == Workload::Seed003 {
        " WLOAD_LATLOG=$OUT/lat_measure.csv"
    } else {
        ""
    };
    let body = format!(
        "{FREE_MIB}\n\
         fill=$((avail * {fill} / 100))\n\
         echo \"$avail $fill\" > $OUT/sizes.txt\n\
         snap start\n\
         step fill $PAYLOAD/wload fill $MNT/f $fill\n\
         step warm {env} {}\n\
         step measure {env}{latlog} {}\n",
        writer(5, &format!("$((fill * {warm} / 100))")),
        writer(7, &format!("$((fill * {meas} / 100))")),
        fill = a.fill_pct,
    );
    let generator = match w {
        Workload::Hotcold => format!(
            "wload-skew v{WLOAD_SKEW_VERSION} hotcold {}% of writes to {}%",
            a.hot_share, a.hot_pct
        ),
        Workload::Zipf => format!("wload-skew v{WLOAD_SKEW_VERSION} zipf {}", a.theta),
        _ => "wload randwrite".into(),
    };
    let skew = match w {
        Workload::Hotcold => format!("-h{}s{}", a.hot_pct, a.hot_share),
        Workload::Zipf => format!("-z{}", a.theta),
        _ => String::new(),
    };
    let skew = if skewed && direct {
        skew + "-direct"
    } else {
        skew
    };
    Spec {
        workload: w,
        size: a.size.clone(),
        mkfs: vec!["-o".into(), a.ovp.clone(), "-s".into(), "1".into()],
        mode,
        body,
        steps: vec!["fill", "warm", "measure"],
        params: json!({
            "workload": w.name(), "size": a.size, "mkfs": format!("-o {} -s 1", a.ovp),
            "mode": mode, "linux_opts": a.linux_opts, "fill_pct": a.fill_pct,
            "warm_pct": warm, "measure_pct": meas, "bs": bs, "sync_every": sync,
            "direct": direct, "generator": generator,
        }),
        slug: format!(
            "{}-{}-o{}-f{}{skew}-w{warm}m{meas}-y{sync}",
            w.name(),
            a.size,
            a.ovp,
            a.fill_pct
        ),
        greedy: true,
        linux: w != Workload::Seed003,
    }
}

// ---------------------------------------------------------------------------------------
// The job script.

/// The part of the job both sides share: a deadline, and `step NAME CMD...`, which runs CMD
/// in the background, samples its /proc/PID/io every $POLL seconds (1 in the guest, where a
/// fork costs, 0.2 on the host), stops it at the deadline, and
/// takes the snapshot `post_NAME` after it. A failed or stopped step skips the rest.
const STEP_SH: &str = r#"T0=$(date +%s)
DEADLINE=$((T0 + TIMEOUT))
STOP=
io_sample() { cat /proc/$1/io > $OUT/io.tmp 2>/dev/null && [ -s $OUT/io.tmp ] && mv $OUT/io.tmp $OUT/io_$2.txt; }
progress() {
  echo "progress $1: $(( $(date +%s) - T0 )) s, $(grep '^wchar' $OUT/io_$1.txt 2>/dev/null), sectors written $(awk '{print $7}' $STAT)$(gcline)"
}
step() {
  name=$1; shift
  if [ -n "$STOP" ]; then echo skipped > $OUT/rc_$name; return 0; fi
  echo "step $name: $*"
  date +%s > $OUT/t0_$name
  ( "$@" > $OUT/out_$name.txt 2> $OUT/err_$name.txt &
    echo $! > $OUT/pid_$name.tmp; mv $OUT/pid_$name.tmp $OUT/pid_$name
    wait $!; echo $? > $OUT/rc_$name.tmp; mv $OUT/rc_$name.tmp $OUT/rc_$name ) &
  while [ ! -e $OUT/pid_$name ]; do sleep 0.1; done
  pid=$(cat $OUT/pid_$name); last=$(date +%s)
  while [ ! -e $OUT/rc_$name ]; do
    io_sample $pid $name
    now=$(date +%s)
    if [ $now -ge $DEADLINE ]; then
      kill -STOP $pid 2>/dev/null; io_sample $pid $name
      echo "step $name: stopped at the deadline, $TIMEOUT s after the job began"
      date +%s > $OUT/t1_$name
      snap post_$name
      kill -KILL $pid 2>/dev/null
      while [ ! -e $OUT/rc_$name ]; do sleep 0.2; done
      wait
      echo timeout > $OUT/rc_$name; STOP=1
      progress $name
      return 0
    fi
    if [ $((now - last)) -ge 30 ]; then progress $name; last=$now; fi
    sleep $POLL
  done
  wait
  date +%s > $OUT/t1_$name
  snap post_$name
  rc=$(cat $OUT/rc_$name); [ "$rc" = 0 ] || STOP=1
  echo "step $name: exit $rc: $(cat $OUT/out_$name.txt) $(head -c 300 $OUT/err_$name.txt)"
}
"#;

/// Linux's snapshot: sync, the virtio disk's stat, the debugfs status.
const LINUX_SH: &str = r#"STAT=/sys/block/vda/stat
POLL=1
uname -r > $OUT/uname.txt
snap() { sync; cat $STAT > $OUT/stat_$1.txt; cat /sys/kernel/debug/f2fs/status > $OUT/f2fs_$1.txt 2>/dev/null; }
gcline() { printf ', %s' "$(grep -E '^(GC calls|Try to move)' /sys/kernel/debug/f2fs/status | tr '\n' ' ')"; }
"#;

/// uf2fs's snapshot: a checkpoint (sync(1) does not reach a FUSE daemon), the loop device's
/// stat, `uf2fs status --json` (each under a 10-minute limit: a hung daemon must not hang
/// the benchmark).
fn ours_prelude(uf2fs: &Path, mnt: &Path, out: &Path, payload: &Path, loopdev: &str) -> String {
    let name = loopdev.trim_start_matches("/dev/");
    format!(
        "UF2FS={}\nMNT={}\nOUT={}\nPAYLOAD={}\nSTAT=/sys/block/{name}/stat\nPOLL=0.2\n\
         snap() {{ timeout 600 \"$UF2FS\" sync \"$MNT\" 2> $OUT/snap_$1.err; cat $STAT > $OUT/stat_$1.txt; timeout 600 \"$UF2FS\" status \"$MNT\" --json > $OUT/status_$1.json 2>> $OUT/snap_$1.err; }}\n\
         gcline() {{ :; }}\n",
        shq(&uf2fs.display().to_string()),
        shq(&mnt.display().to_string()),
        shq(&out.display().to_string()),
        shq(&payload.display().to_string()),
    )
}

fn job_script(side_prelude: &str, timeout: u64, spec: &Spec) -> String {
    format!(
        "# uf2fs-bench gc-waf: {} (generated; the body after the snapshot function is the same on both sides)\nTIMEOUT={timeout}\n{side_prelude}{STEP_SH}\n{}",
        spec.workload.name(),
        spec.body
    )
}

fn shq(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+=:,@".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

// ---------------------------------------------------------------------------------------
// Running things.

fn output(c: &mut Command) -> Res<String> {
    let what = format!("{c:?}");
    let o = c
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{what}: {e}"))?;
    if !o.status.success() {
        return Err(format!(
            "{what}: {}: {}",
            o.status,
            String::from_utf8_lossy(&o.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&o.stdout).into_owned())
}

fn read(p: &Path) -> Option<String> {
    std::fs::read_to_string(p).ok()
}

fn write(p: &Path, s: &str) -> Res<()> {
    std::fs::write(p, s).map_err(|e| format!("write {}: {e}", p.display()))
}

fn fresh_dir(p: &Path) -> Res<()> {
    if p.exists() {
        std::fs::remove_dir_all(p).map_err(|e| format!("remove {}: {e}", p.display()))?;
    }
    std::fs::create_dir_all(p).map_err(|e| format!("create {}: {e}", p.display()))
}

/// A sparse image file of `size`, formatted by mkfs.f2fs with `mkfs` (device or file).
fn mkfs(target: &Path, mkfs_args: &[String]) -> Res<()> {
    output(
        Command::new("mkfs.f2fs")
            .args(["-f", "-q"])
            .args(mkfs_args)
            .arg(target),
    )
    .map(|_| ())
}

fn truncate(img: &Path, size: &str) -> Res<()> {
    let _ = std::fs::remove_file(img);
    output(Command::new("truncate").args(["-s", size]).arg(img)).map(|_| ())
}

/// Builds the static workload generators, for the guest and the host.
fn build_tools(dir: &Path) -> Res<PathBuf> {
    let payload = dir.join("payload");
    std::fs::create_dir_all(&payload).map_err(|e| format!("{}: {e}", payload.display()))?;
    let wload_c = dir.join("wload.c");
    write(&wload_c, WLOAD_C)?;
    let skew_c = dir.join("wload-skew.c");
    write(&skew_c, WLOAD_SKEW_C)?;
    output(
        Command::new("gcc")
            .args(["-O2", "-static", "-o"])
            .arg(payload.join("wload"))
            .arg(&wload_c),
    )?;
    output(
        Command::new("gcc")
            .args(["-O2", "-static", "-o"])
            .arg(payload.join("wload-skew"))
            .arg(&skew_c)
            .arg("-lm"),
    )?;
    Ok(payload)
}

/// The main area's segment count of a fresh image made with the spec's mkfs arguments.
fn main_segments(a: &GcWafArgs, dir: &Path, spec: &Spec) -> Res<u64> {
    let img = dir.join("geometry.img");
    truncate(&img, &spec.size)?;
    mkfs(&img, &spec.mkfs)?;
    let info = output(Command::new(&a.uf2fs).arg("info").arg(&img).arg("--json"))?;
    let _ = std::fs::remove_file(&img);
    let v: Value = serde_json::from_str(&info).map_err(|e| format!("uf2fs info: {e}"))?;
    v.get("segment_count_main")
        .and_then(Value::as_u64)
        .ok_or_else(|| "uf2fs info: no segment_count_main".into())
}

fn is_mounted(mnt: &Path) -> bool {
    let Ok(canon) = mnt.canonicalize() else {
        return false;
    };
    let target = canon.display().to_string();
    read(Path::new("/proc/self/mounts"))
        .map(|m| {
            m.lines()
                .any(|l| l.split(' ').nth(1) == Some(target.as_str()))
        })
        .unwrap_or(false)
}

/// A loop device and a uf2fs mount on it, both undone when dropped (also on an error).
struct LoopMount {
    uf2fs: PathBuf,
    dev: Option<String>,
    mnt: Option<PathBuf>,
}

impl LoopMount {
    fn unmount(&mut self) -> Res<()> {
        if let Some(m) = self.mnt.take() {
            if is_mounted(&m) {
                let r = output(Command::new(&self.uf2fs).arg("umount").arg(&m));
                if is_mounted(&m) {
                    let _ = Command::new("fusermount3")
                        .arg("-u")
                        .arg("-z")
                        .arg(&m)
                        .status();
                }
                r?;
            }
        }
        Ok(())
    }
}

impl Drop for LoopMount {
    fn drop(&mut self) {
        let _ = self.unmount();
        if let Some(d) = self.dev.take() {
            let _ = Command::new("losetup").arg("-d").arg(&d).status();
        }
    }
}

/// Detaches loop devices left on `img` by an interrupted earlier run.
fn detach_stale(img: &Path) {
    if let Ok(list) = output(Command::new("losetup").arg("-j").arg(img)) {
        for dev in list.lines().filter_map(|l| l.split(':').next()) {
            let _ = Command::new("losetup").arg("-d").arg(dev).status();
        }
    }
}

fn run_ours(a: &GcWafArgs, spec: &Spec, wdir: &Path, payload: &Path) -> Res<Value> {
    let side = wdir.join("uf2fs");
    let (img, mnt, out) = (side.join("image.img"), side.join("mnt"), side.join("out"));
    if is_mounted(&mnt) {
        let _ = output(Command::new(&a.uf2fs).arg("umount").arg(&mnt));
    }
    detach_stale(&img);
    fresh_dir(&side)?;
    std::fs::create_dir_all(&mnt).map_err(|e| format!("{}: {e}", mnt.display()))?;
    std::fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    truncate(&img, &spec.size)?;
    let mut lm = LoopMount {
        uf2fs: a.uf2fs.clone(),
        dev: None,
        mnt: None,
    };
    let dev = output(Command::new("losetup").args(["-f", "--show"]).arg(&img))?
        .trim()
        .to_string();
    lm.dev = Some(dev.clone());
    mkfs(Path::new(&dev), &spec.mkfs)?;
    let mut opts = format!("mode={}", spec.mode);
    if !a.uf2fs_opts.is_empty() {
        opts = format!("{opts},{}", a.uf2fs_opts);
    }
    output(
        Command::new(&a.uf2fs)
            .arg("mount")
            .arg(&dev)
            .arg(&mnt)
            .args(["-o", &opts]),
    )?;
    lm.mnt = Some(mnt.clone());
    let (abs_mnt, abs_out, abs_payload) = (abs(&mnt)?, abs(&out)?, abs(payload)?);
    let prelude = ours_prelude(&abs(&a.uf2fs)?, &abs_mnt, &abs_out, &abs_payload, &dev);
    let job = side.join("job.sh");
    write(&job, &job_script(&prelude, a.timeout, spec))?;
    eprintln!(
        "gc-waf: {} on uf2fs ({dev}, -o {opts}, mkfs.f2fs {})",
        spec.workload.name(),
        spec.mkfs.join(" ")
    );
    let t = Instant::now();
    let log = std::fs::File::create(side.join("job.log")).map_err(|e| e.to_string())?;
    let log2 = log.try_clone().map_err(|e| e.to_string())?;
    let st = Command::new("sh")
        .arg(abs(&job)?)
        .current_dir(&mnt)
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log2)
        .status()
        .map_err(|e| format!("sh {}: {e}", job.display()))?;
    let wall = t.elapsed().as_secs_f64();
    // The engine's counters before the unmount (the last snapshot's are the same but for
    // what the status request itself costs: nothing).
    let status: Value = output(Command::new(&a.uf2fs).arg("status").arg(&mnt).arg("--json"))
        .ok()
        .and_then(|s| serde_json::from_str(&s).ok())
        .unwrap_or(Value::Null);
    let umount = lm.unmount();
    let after = read(Path::new(&format!(
        "/sys/block/{}/stat",
        dev.trim_start_matches("/dev/")
    )));
    drop(lm);
    let mut v = collect(spec, &out, Side::Ours, a.timeout);
    if let Value::Object(m) = &mut v {
        m.insert("wall_seconds".into(), json!(wall));
        m.insert("job_exit".into(), json!(st.code()));
        m.insert("status_before_unmount".into(), status);
        m.insert(
            "unmount".into(),
            json!(match &umount {
                Ok(()) => "ok".to_string(),
                Err(e) => format!("failed: {e}"),
            }),
        );
        m.insert(
            "mount".into(),
            json!({"device": dev, "options": opts, "mkfs": spec.mkfs.join(" "), "size": spec.size}),
        );
        if let (Some(after), Some(end)) = (
            after.as_deref().and_then(sectors_written),
            last_snapshot_sectors(&out, spec),
        ) {
            m.insert(
                "unmount_device_blocks".into(),
                json!(after.saturating_sub(end) / 8),
            );
        }
    }
    Ok(v)
}

fn abs(p: &Path) -> Res<PathBuf> {
    std::path::absolute(p).map_err(|e| format!("{}: {e}", p.display()))
}

fn run_linux(a: &GcWafArgs, spec: &Spec, wdir: &Path, payload: &Path) -> Res<Value> {
    let side = wdir.join("linux");
    fresh_dir(&side)?;
    let img = side.join("image.img");
    truncate(&img, &spec.size)?;
    mkfs(&img, &spec.mkfs)?;
    let job = side.join("job.sh");
    write(&job, &job_script(LINUX_SH, a.timeout, spec))?;
    let mut opts = format!("mode={}", spec.mode);
    if !a.linux_opts.is_empty() {
        opts = format!("{opts},{}", a.linux_opts);
    }
    let kout = side.join("k");
    let vm_timeout = a.timeout + VM_MARGIN_SECS;
    eprintln!(
        "gc-waf: {} on Linux (linux-f2fs, -o {opts}, mkfs.f2fs {}; job deadline {} s, VM {} s)",
        spec.workload.name(),
        spec.mkfs.join(" "),
        a.timeout,
        vm_timeout
    );
    let t = Instant::now();
    let o = Command::new(a.tools.join("linux-f2fs"))
        .arg("--out")
        .arg(&kout)
        .args(["--mount-opts", &opts, "--timeout", &vm_timeout.to_string()])
        .arg("--payload")
        .arg(payload)
        .arg(&img)
        .arg(&job)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("linux-f2fs: {e}"))?;
    let host_secs = t.elapsed().as_secs_f64();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let _ = std::fs::write(side.join("linux-f2fs.log"), &said);
    let files = kout.join("files");
    let mut v = if kout.join("exit_code").exists() {
        collect(spec, &files, Side::Linux, a.timeout)
    } else {
        // The VM itself ran out of time: only the console has anything.
        let console = read(&kout.join("console.log")).unwrap_or_default();
        let last = console
            .lines()
            .rev()
            .find(|l| l.contains("progress ") || l.starts_with("step "))
            .unwrap_or("")
            .to_string();
        json!({
            "side": "linux",
            "status": format!("did not finish: the VM reached its {vm_timeout} s limit"),
            "finished": false,
            "last_console_line": last,
        })
    };
    if let Value::Object(m) = &mut v {
        // The key keeps the harness's earlier name: the saved baselines use it.
        m.insert("kernel_f2fs".into(), json!(said.trim()));
        m.insert("host_seconds".into(), json!(host_secs));
        m.insert(
            "mount".into(),
            json!({"options": opts, "mkfs": spec.mkfs.join(" "), "size": spec.size}),
        );
        if let Some(s) = read(&kout.join("f2fs_status.txt")) {
            m.insert("f2fs_status_final".into(), json!(s));
            m.insert("gc_final".into(), linux_counters(&s));
        }
        let complaints: Vec<String> = read(&kout.join("dmesg.txt"))
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains("F2FS-fs"))
            .filter(|l| {
                let l = l.to_ascii_lowercase();
                ["error", "inconsistent", "corrupt", "fsck"]
                    .iter()
                    .any(|w| l.contains(w))
            })
            .map(str::to_string)
            .collect();
        m.insert("dmesg_f2fs_complaints".into(), json!(complaints));
        if let Some(k) = read(&files.join("uname.txt")) {
            m.insert("kernel".into(), json!(k.trim()));
        }
    }
    Ok(v)
}

// ---------------------------------------------------------------------------------------
// Reading what a job left.

#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    Ours,
    Linux,
}

/// Field 7 of a /sys/block/X/stat line: 512-byte sectors written.
fn sectors_written(stat: &str) -> Option<u64> {
    stat.split_whitespace().nth(6).and_then(|f| f.parse().ok())
}

/// `key=value` from wload's summary line.
fn summary_field(line: &str, key: &str) -> Option<f64> {
    line.split_whitespace()
        .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
        .and_then(|v| v.parse().ok())
}

/// The first number after `prefix` on the line that starts with it (after trimming).
fn number_after(text: &str, prefix: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let rest = l.trim_start().strip_prefix(prefix)?;
        rest.trim_start_matches([' ', ':'])
            .split(|c: char| !c.is_ascii_digit())
            .next()?
            .parse()
            .ok()
    })
}

/// GC and checkpoint counters from Linux's debugfs status.
fn linux_counters(s: &str) -> Value {
    json!({
        "gc_calls": number_after(s, "GC calls"),
        "gc_data_segments": number_after(s, "- data segments"),
        "gc_node_segments": number_after(s, "- node segments"),
        "gc_blocks_moved": number_after(s, "Try to move"),
        "gc_data_blocks_moved": number_after(s, "- data blocks"),
        "gc_node_blocks_moved": number_after(s, "- node blocks"),
        "cp_calls": number_after(s, "CP calls"),
        "ipu_blocks": number_after(s, "IPU:"),
        "ssr_blocks": number_after(s, "SSR:"),
        "lfs_blocks": number_after(s, "LFS:"),
    })
}

/// The same counters from `uf2fs status --json` (where they exist: the data/node split of
/// blocks moved comes with the cleaner), plus blocks written by cause.
fn ours_counters(v: &Value) -> Value {
    let n = |p: &str| v.pointer(p).and_then(Value::as_u64);
    json!({
        "gc_calls": n("/gc/runs"),
        "gc_sections_freed": n("/gc/sections_freed"),
        "gc_blocks_moved": n("/gc/blocks_moved"),
        "gc_data_blocks_moved": n("/gc/data_blocks_moved"),
        "gc_node_blocks_moved": n("/gc/node_blocks_moved"),
        "cp_calls": n("/checkpoints/written"),
        "written_blocks": v.pointer("/io/written_blocks").cloned().unwrap_or(Value::Null),
    })
}

/// Counters at a snapshot, per side.
fn counters_at(out: &Path, side: Side, snap: &str) -> Option<Value> {
    match side {
        Side::Linux => read(&out.join(format!("f2fs_{snap}.txt"))).map(|s| linux_counters(&s)),
        Side::Ours => read(&out.join(format!("status_{snap}.json")))
            .and_then(|s| serde_json::from_str::<Value>(&s).ok())
            .map(|v| ours_counters(&v)),
    }
}

/// `b - a` for every number in two counter objects (nested one level for written_blocks).
fn delta(a: &Value, b: &Value) -> Value {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => Value::Object(
            y.iter()
                .map(|(k, vb)| {
                    let va = x.get(k).unwrap_or(&Value::Null);
                    (k.clone(), delta(va, vb))
                })
                .collect(),
        ),
        (Value::Number(x), Value::Number(y)) => match (x.as_u64(), y.as_u64()) {
            (Some(x), Some(y)) => json!(y.saturating_sub(x)),
            _ => Value::Null,
        },
        _ => Value::Null,
    }
}

fn snap_name(spec: &Spec, i: usize) -> String {
    match i.checked_sub(1).and_then(|j| spec.steps.get(j)) {
        None => "start".into(),
        Some(prev) => format!("post_{prev}"),
    }
}

fn last_snapshot_sectors(out: &Path, spec: &Spec) -> Option<u64> {
    (0..=spec.steps.len())
        .rev()
        .find_map(|i| read(&out.join(format!("stat_{}.txt", snap_name(spec, i)))))
        .as_deref()
        .and_then(sectors_written)
}

/// What one step did: exit, bytes written (wload's summary, or /proc/PID/io's wchar when it
/// was stopped or failed), and the device and counters between its two snapshots.
fn step_result(spec: &Spec, out: &Path, side: Side, i: usize, name: &str) -> Value {
    let rc = read(&out.join(format!("rc_{name}")))
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|| "not run".into());
    let summary = read(&out.join(format!("out_{name}.txt"))).unwrap_or_default();
    let line = summary.lines().find(|l| l.contains("bytes=")).unwrap_or("");
    let err = read(&out.join(format!("err_{name}.txt"))).unwrap_or_default();
    let wchar = read(&out.join(format!("io_{name}.txt"))).and_then(|s| number_after(&s, "wchar"));
    let summary_bytes = summary_field(line, "bytes").map(|b| b as u64);
    // A finished step's own count; otherwise what the kernel saw it write (up to one $POLL
    // old for a step that failed on its own; exact for one stopped at the deadline).
    let (bytes, bytes_from) = match summary_bytes {
        Some(b) => (Some(b), "summary"),
        None => (wchar, "wchar"),
    };
    let pre = snap_name(spec, i);
    let post = format!("post_{name}");
    let stat = |s: &str| {
        read(&out.join(format!("stat_{s}.txt")))
            .as_deref()
            .and_then(sectors_written)
    };
    let device_blocks = match (stat(&pre), stat(&post)) {
        (Some(a), Some(b)) => Some(b.saturating_sub(a) / 8),
        _ => None,
    };
    let counters = match (counters_at(out, side, &pre), counters_at(out, side, &post)) {
        (Some(a), Some(b)) => delta(&a, &b),
        _ => Value::Null,
    };
    let user_blocks = bytes.map(|b| b / BLOCK);
    let waf = match (device_blocks, user_blocks) {
        (Some(d), Some(u)) if u > 0 => Some(d as f64 / u as f64),
        _ => None,
    };
    let t =
        |s: &str| read(&out.join(format!("{s}_{name}"))).and_then(|x| x.trim().parse::<u64>().ok());
    json!({
        "rc": rc,
        "summary": line,
        "stderr": err.trim(),
        "bytes": bytes,
        "bytes_from": if bytes.is_some() { bytes_from } else { "none" },
        "secs": summary_field(line, "secs"),
        "job_clock_secs": match (t("t0"), t("t1")) { (Some(a), Some(b)) => Some(b.saturating_sub(a)), _ => None },
        "max_lat_us": summary_field(line, "max_lat_us"),
        "user_blocks": user_blocks,
        "device_blocks": device_blocks,
        "waf": waf,
        "counters": counters,
        "snapshots": [pre, post],
    })
}

fn step_label(name: &str) -> &str {
    match name {
        "warm" => "warm-up",
        "measure" => "measured phase",
        other => other,
    }
}

/// The side's result: every step, the verdict, and the measured phase (or, when the run
/// stopped earlier, the step it stopped in, marked partial).
fn collect(spec: &Spec, out: &Path, side: Side, timeout: u64) -> Value {
    let mut steps = Map::new();
    let mut verdict: Option<(String, String)> = None; // (status, step)
    for (i, name) in spec.steps.iter().enumerate() {
        let r = step_result(spec, out, side, i, name);
        if verdict.is_none() {
            let rc = r.get("rc").and_then(Value::as_str).unwrap_or("");
            let err = r.get("stderr").and_then(Value::as_str).unwrap_or("");
            let label = step_label(name);
            verdict = match rc {
                "0" => None,
                "timeout" => Some((
                    format!("did not finish in {timeout} s ({label})"),
                    name.to_string(),
                )),
                _ if err.contains("No space left on device") => {
                    Some((format!("ENOSPC in {label}"), name.to_string()))
                }
                "not run" => Some((format!("{label} did not run"), name.to_string())),
                _ => Some((
                    format!(
                        "error in {label} (exit {rc}): {}",
                        err.lines().next().unwrap_or("")
                    ),
                    name.to_string(),
                )),
            };
        }
        steps.insert(name.to_string(), r);
    }
    let (status, phase_step) = match &verdict {
        None => ("ok".to_string(), "measure".to_string()),
        Some((s, step)) => (s.clone(), step.clone()),
    };
    let phase = steps.get(&phase_step).cloned().unwrap_or(Value::Null);
    let sizes = read(&out.join("sizes.txt")).unwrap_or_default();
    let mut it = sizes.split_whitespace().map(|x| x.parse::<u64>().ok());
    let (avail, fill) = (it.next().flatten(), it.next().flatten());
    let mut v = json!({
        "side": match side { Side::Ours => "uf2fs", Side::Linux => "linux" },
        "status": status,
        "finished": verdict.is_none(),
        "avail_mib": avail,
        "fill_mib": fill.filter(|&f| f > 0),
        "steps": steps,
        "phase": { "step": phase_step, "partial": verdict.is_some(), "result": phase },
    });
    if spec.workload == Workload::Seed003 {
        if let (Some(lat), Value::Object(m)) = (read(&out.join("lat_measure.csv")), &mut v) {
            m.insert("latency".into(), latency(&lat));
        }
    }
    v
}

/// Seed 003's view: the per-second maxima of wload's latency log.
fn latency(csv: &str) -> Value {
    let mut maxima: Vec<u64> = Vec::new();
    let mut idle_seconds = 0u64;
    for l in csv.lines() {
        let mut f = l.split(',');
        let (_, m, ops) = (f.next(), f.next(), f.next());
        if let Some(m) = m.and_then(|m| m.trim().parse::<u64>().ok()) {
            maxima.push(m);
        }
        if ops.and_then(|o| o.trim().parse::<u64>().ok()) == Some(0) {
            idle_seconds += 1;
        }
    }
    let mut sorted = maxima.clone();
    sorted.sort_unstable();
    let median = sorted.get(sorted.len() / 2).copied();
    json!({
        "seconds": maxima.len(),
        "worst_second_max_us": sorted.last().copied(),
        "median_second_max_us": median,
        "seconds_without_a_completed_write": idle_seconds,
        "seconds_with_max_over_1s": maxima.iter().filter(|&&m| m > 1_000_000).count(),
    })
}

// ---------------------------------------------------------------------------------------
// Baselines.

fn find_baseline(dir: &Path, spec: &Spec, timeout: u64) -> Option<(PathBuf, Value)> {
    let entries = std::fs::read_dir(dir).ok()?;
    let mut best: Option<(PathBuf, Value)> = None;
    for e in entries.flatten() {
        let p = e.path();
        if p.extension().and_then(|x| x.to_str()) != Some("json") {
            continue;
        }
        let Some(v) = read(&p).and_then(|s| serde_json::from_str::<Value>(&s).ok()) else {
            continue;
        };
        if v.get("params") != Some(&spec.params) {
            continue;
        }
        // A run that did not finish in T says nothing about a longer deadline.
        let finished = v.pointer("/result/finished").and_then(Value::as_bool) == Some(true);
        let t = v.get("timeout_s").and_then(Value::as_u64).unwrap_or(0);
        if !finished && t < timeout {
            continue;
        }
        let date = |x: &Value| {
            x.get("date")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        if best.as_ref().is_none_or(|(_, b)| date(&v) > date(b)) {
            best = Some((p, v));
        }
    }
    best
}

fn command_line() -> String {
    std::env::args()
        .map(|a| shq(&a))
        .collect::<Vec<_>>()
        .join(" ")
}

fn save_baseline(a: &GcWafArgs, spec: &Spec, result: &Value) -> Res<PathBuf> {
    std::fs::create_dir_all(&a.baselines).map_err(|e| format!("{}: {e}", a.baselines.display()))?;
    let date = output(Command::new("date").args(["-u", "+%Y-%m-%dT%H:%M:%SZ"]))
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    let path = a.baselines.join(format!("linux-6.1-{}.json", spec.slug));
    let v = json!({
        "what": "Linux 6.1 (linux-f2fs, qemu TCG) on the gc-waf job; block counts exact, times emulated",
        "command": command_line(),
        "date": date,
        "timeout_s": a.timeout,
        "params": spec.params,
        "job": spec.body,
        "result": result,
    });
    let text = serde_json::to_string_pretty(&v).map_err(|e| e.to_string())?;
    write(&path, &format!("{text}\n"))?;
    Ok(path)
}

// ---------------------------------------------------------------------------------------
// The report.

fn f(v: &Value, p: &str) -> Option<f64> {
    v.pointer(p).and_then(Value::as_f64)
}
fn u(v: &Value, p: &str) -> Option<u64> {
    v.pointer(p).and_then(Value::as_u64)
}
fn opt<T: std::fmt::Display>(x: Option<T>) -> String {
    x.map_or_else(|| "-".into(), |x| x.to_string())
}

fn row_line(workload: &str, side: &str, v: &Value) -> String {
    let ph = "/phase/result";
    let partial = v.pointer("/phase/partial").and_then(Value::as_bool) == Some(true);
    let mark = if partial { "*" } else { "" };
    let waf = f(v, &format!("{ph}/waf")).map(|w| format!("{w:.2}{mark}"));
    let moved_total = u(v, &format!("{ph}/counters/gc_blocks_moved"));
    let moved_data = u(v, &format!("{ph}/counters/gc_data_blocks_moved"));
    let moved_node = u(v, &format!("{ph}/counters/gc_node_blocks_moved"));
    let user = u(v, &format!("{ph}/user_blocks"));
    let moved = match (moved_data, moved_node, moved_total) {
        (Some(d), Some(n), _) => format!("{d}/{n}"),
        (_, _, Some(t)) => format!("{t}/-"),
        _ => "-".into(),
    };
    let node_per_user = match (moved_node, user) {
        (Some(n), Some(us)) if us > 0 => format!("{:.2}", n as f64 / us as f64),
        _ => "-".into(),
    };
    let time = if side == "uf2fs" {
        f(v, &format!("{ph}/secs"))
            .map(|s| format!("{s:.1}"))
            .or_else(|| u(v, &format!("{ph}/job_clock_secs")).map(|s| format!("{s}{mark}")))
    } else {
        None
    };
    let fill = u(v, "/fill_mib");
    let status = v.get("status").and_then(Value::as_str).unwrap_or("-");
    let mut s = String::new();
    let _ = write!(
        s,
        "{workload:<9} {side:<13} {fill:>8} {user:>10} {dev:>10} {waf:>8} {moved:>17} {npu:>9} {calls:>9} {time:>8}  {status}",
        fill = opt(fill),
        user = opt(user),
        dev = opt(u(v, &format!("{ph}/device_blocks"))),
        waf = waf.unwrap_or_else(|| "-".into()),
        npu = node_per_user,
        calls = opt(u(v, &format!("{ph}/counters/gc_calls"))),
        time = time.unwrap_or_else(|| "-".into()),
    );
    if let Some(l) = v.get("latency") {
        let _ = write!(
            s,
            "; worst per-second max latency {} ms over {} s",
            opt(u(l, "/worst_second_max_us").map(|x| x / 1000)),
            opt(u(l, "/seconds"))
        );
    }
    s
}

fn finished(v: &&Value) -> bool {
    v.get("finished").and_then(Value::as_bool) == Some(true)
}

/// The cleaner's targets, set when the cleaner was planned: WAF at most half of Linux's on the same
/// job, and GC moving no more than 1.05x the blocks exact greedy moves (greedy moves WAF - 1
/// blocks per user block). Only when uf2fs finished the job.
/// The issue's targets for one workload: WAF <= 0.5x Linux's and GC moves <= 1.05x greedy's;
/// for the skewed ones (`skewed`), also WAF at least 30% below single-log greedy's.
fn verdict(
    ours: Option<&Value>,
    linux: Option<&Value>,
    greedy: Option<&Value>,
    skewed: bool,
) -> Option<Value> {
    let ours = ours.filter(finished)?;
    let waf = f(ours, "/phase/result/waf")?;
    let user = u(ours, "/phase/result/user_blocks").filter(|&u| u > 0)?;
    // Linux reports one count; uf2fs's status splits it into data and node blocks.
    let moved = u(ours, "/phase/result/counters/gc_blocks_moved")
        .or_else(|| {
            let d = u(ours, "/phase/result/counters/gc_data_blocks_moved")?;
            let n = u(ours, "/phase/result/counters/gc_node_blocks_moved").unwrap_or(0);
            Some(d + n)
        })
        .map(|m| m as f64 / user as f64);
    let linux_waf = linux
        .filter(finished)
        .and_then(|v| f(v, "/phase/result/waf"));
    let greedy_waf = greedy.and_then(|g| f(g, "/waf"));
    let greedy_moved = greedy_waf.map(|w| w - 1.0);
    let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    };
    Some(json!({
        "waf": waf,
        "linux_waf": linux_waf,
        "waf_over_linux": ratio(Some(waf), linux_waf),
        "target_waf_over_linux": 0.5,
        "gc_moved_per_user_block": moved,
        "greedy_moved_per_user_block": greedy_moved,
        "moved_over_greedy": ratio(moved, greedy_moved),
        "target_moved_over_greedy": 1.05,
        "waf_over_greedy": if skewed { ratio(Some(waf), greedy_waf) } else { None },
        "target_waf_over_greedy": if skewed { Some(0.70) } else { None },
    }))
}

fn verdict_line(workload: &str, v: &Value) -> String {
    let r = |p: &str| f(v, p).map_or_else(|| "-".to_string(), |x| format!("{x:.2}"));
    let skewed = if v.pointer("/waf_over_greedy").is_some_and(|x| !x.is_null()) {
        format!(
            "; uf2fs WAF / single-log greedy WAF = {} (target <= 0.70)",
            r("/waf_over_greedy")
        )
    } else {
        String::new()
    };
    format!(
        "{workload:<9} {:<13} uf2fs WAF / Linux WAF = {} (target <= 0.50); GC moved per user block {} vs greedy {}: {}x (target <= 1.05x){skewed}",
        "targets",
        r("/waf_over_linux"),
        r("/gc_moved_per_user_block"),
        r("/greedy_moved_per_user_block"),
        r("/moved_over_greedy"),
    )
}

pub fn run(a: &GcWafArgs) -> Res<()> {
    std::fs::create_dir_all(&a.dir).map_err(|e| format!("{}: {e}", a.dir.display()))?;
    let payload = build_tools(&a.dir)?;
    let mut rows = Vec::new();
    let mut lines = Vec::new();
    for spec in specs(a) {
        let wname = spec.workload.name();
        let wdir = a.dir.join(wname);
        std::fs::create_dir_all(&wdir).map_err(|e| format!("{}: {e}", wdir.display()))?;
        let segments = main_segments(a, &a.dir, &spec)?;
        let ours = match a.ours {
            OursMode::Skip => None,
            OursMode::Run => Some(run_ours(a, &spec, &wdir, &payload).unwrap_or_else(|e| {
                json!({"side": "uf2fs", "status": format!("harness error: {e}"), "finished": false})
            })),
        };
        if let Some(v) = &ours {
            lines.push(row_line(wname, "uf2fs", v));
            eprintln!("{}", row_line(wname, "uf2fs", v));
        }
        let cached = find_baseline(&a.baselines, &spec, a.timeout);
        let mode = match a.linux {
            _ if !spec.linux => LinuxMode::Skip,
            Some(m) => m,
            None if cached.is_some() => LinuxMode::Cached,
            None => LinuxMode::Run,
        };
        let linux = match mode {
            LinuxMode::Skip => None,
            LinuxMode::Cached => Some(match &cached {
                Some((p, b)) => {
                    let mut r = b.get("result").cloned().unwrap_or(Value::Null);
                    if let Value::Object(m) = &mut r {
                        m.insert("baseline".into(), json!(p.display().to_string()));
                        m.insert(
                            "baseline_command".into(),
                            b.get("command").cloned().unwrap_or(Value::Null),
                        );
                        m.insert(
                            "baseline_date".into(),
                            b.get("date").cloned().unwrap_or(Value::Null),
                        );
                    }
                    r
                }
                None => {
                    json!({"side": "linux", "status": "no baseline with these parameters (--linux run makes one)", "finished": false})
                }
            }),
            LinuxMode::Run => {
                let r = run_linux(a, &spec, &wdir, &payload).unwrap_or_else(|e| {
                    json!({"side": "linux", "status": format!("harness error: {e}"), "finished": false})
                });
                if a.save_baselines
                    && !r
                        .get("status")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .starts_with("harness error")
                {
                    match save_baseline(a, &spec, &r) {
                        Ok(p) => eprintln!("gc-waf: baseline saved: {}", p.display()),
                        Err(e) => eprintln!("gc-waf: baseline not saved: {e}"),
                    }
                }
                Some(r)
            }
        };
        let linux_label = match mode {
            LinuxMode::Cached if cached.is_some() => "linux (saved)",
            _ => "linux",
        };
        if let Some(v) = &linux {
            lines.push(row_line(wname, linux_label, v));
            eprintln!("{}", row_line(wname, linux_label, v));
        }
        // The greedy limit at the live-data fraction the sides used.
        let fill = [&ours, &linux]
            .iter()
            .find_map(|s| s.as_ref().and_then(|v| u(v, "/fill_mib")));
        let greedy = match (spec.greedy, fill) {
            (true, Some(fill)) if segments > 0 => {
                let util = (fill * 256) as f64 / (segments * 512) as f64;
                let skew = match spec.workload {
                    Workload::Hotcold => Skew::HotCold {
                        pct: a.hot_pct,
                        share: a.hot_share,
                    },
                    Workload::Zipf => Skew::Zipf { theta: a.theta },
                    _ => Skew::Uniform,
                };
                let w = u32::try_from(segments)
                    .map_err(|_| format!("{segments} segments"))
                    .and_then(|s| crate::greedy::waf_skewed(s, 512, util, skew));
                lines.push(format!(
                    "{wname:<9} {:<13} {fill:>8} {:>10} {:>10} {:>8} {:>17} {:>9} {:>9} {:>8}  greedy {segments} x 512 at u {util:.4}{}",
                    "greedy", "-", "-",
                    w.as_ref().map(|w| format!("{w:.2}")).unwrap_or_else(|_| "-".into()),
                    "-", "-", "-", "-",
                    match spec.workload {
                        Workload::Seed000c => " (uniform, one log; adaptive mode may write in place)",
                        Workload::Hotcold | Workload::Zipf => " (one log, the same skew)",
                        _ => "",
                    },
                ));
                Some(
                    json!({"segments": segments, "blocks_per_segment": 512, "utilisation": util,
                    "skew": format!("{skew:?}"), "waf": w.as_ref().ok(), "error": w.as_ref().err()}),
                )
            }
            _ => None,
        };
        // What the format lets an idealised cleaner reach on the uniform lfs jobs (floor.rs).
        let floor = match (spec.workload, fill) {
            (Workload::Seed000a | Workload::Seed000b, Some(fill)) if segments > 0 => {
                let job = crate::floor::Job {
                    segments: u32::try_from(segments)
                        .map_err(|_| format!("{segments} segments"))?,
                    blocks: 512,
                    live: u32::try_from(fill * 256).map_err(|_| format!("{fill} MiB"))?,
                    fsync_every: if spec.workload == Workload::Seed000b {
                        a.sync_every
                    } else {
                        0
                    },
                    idle_logs: 3,
                    warm_up: 2,
                    measured: 4,
                };
                let f = crate::floor::floor(&job).map(|(best, _)| best);
                lines.push(format!(
                    "{wname:<9} {:<13} {fill:>8} {:>10} {:>10} {:>8} {:>17} {:>9} {:>9} {:>8}  {}",
                    "format floor", "-", "-",
                    f.as_ref().map(|f| format!("{:.2}", f.waf)).unwrap_or_else(|_| "-".into()),
                    f.as_ref().map(|f| format!("{:.2}/-", f.moved)).unwrap_or_else(|_| "-".into()),
                    f.as_ref().map(|f| format!("{:.3}", f.nodes)).unwrap_or_else(|_| "-".into()),
                    "-", "-",
                    match &f {
                        Ok(f) => format!(
                            "a model (uf2fs-bench floor): greedy victims, prefree until a checkpoint, its nodes and metadata; best cleaner {}",
                            f.cleaner.name()
                        ),
                        Err(e) => e.clone(),
                    },
                ));
                Some(match f {
                    Ok(f) => json!({"waf": f.waf, "moved": f.moved, "nodes": f.nodes,
                        "meta": f.meta, "cleaner": f.cleaner.name(), "error": null}),
                    Err(e) => json!({"waf": null, "error": e}),
                })
            }
            _ => None,
        };
        let skewed = matches!(spec.workload, Workload::Hotcold | Workload::Zipf);
        let verdict = verdict(ours.as_ref(), linux.as_ref(), greedy.as_ref(), skewed);
        if let Some(v) = &verdict {
            lines.push(verdict_line(wname, v));
        }
        rows.push(json!({
            "workload": wname,
            "params": spec.params,
            "main_segments": segments,
            "uf2fs": ours,
            "linux": linux,
            "linux_mode": format!("{mode:?}").to_lowercase(),
            "greedy": greedy,
            "format_floor": floor,
            "verdict": verdict,
        }));
    }
    println!(
        "gc-waf: {} KiB random overwrites; WAF = device blocks written / user blocks written over the measured phase",
        BLOCK / 1024
    );
    println!(
        "(* = partial: the run stopped in that step, figures cover it up to the stop; GC moved = data/node blocks; time = uf2fs's measured phase, seconds)"
    );
    println!(
        "{:<9} {:<13} {:>8} {:>10} {:>10} {:>8} {:>17} {:>9} {:>9} {:>8}  status",
        "workload",
        "side",
        "file MiB",
        "user blk",
        "dev blk",
        "WAF",
        "GC moved d/n",
        "node/user",
        "GC calls",
        "time s"
    );
    for l in &lines {
        println!("{l}");
    }
    let report = json!({
        "benchmark": "gc-waf",
        "command": command_line(),
        "timeout_s": a.timeout,
        "rows": rows,
    });
    if let Some(p) = a.json.parent() {
        std::fs::create_dir_all(p).map_err(|e| format!("{}: {e}", p.display()))?;
    }
    let text = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
    write(&a.json, &format!("{text}\n"))?;
    println!("JSON: {}", a.json.display());
    Ok(())
}
