//! What one FUSE round trip costs, by transport (issue 14): a program asks the mount for an
//! xattr the file does not have (a GETXATTR the kernel never caches, answered ENODATA by the
//! daemon with no disk I/O), many times, and the mean and 99th-percentile time per call are
//! taken. Transports: /dev/fuse (`noio_uring`), io_uring (`noio_uring_yield`), io_uring with
//! the serving threads yielding their CPU after each reply (the default); the host file
//! system as the floor. Scenarios: the program free on an idle machine, pinned to one CPU,
//! against two busy-looping programs per CPU, and against one on its own CPU. Transports
//! alternate within each scenario, each on a fresh mount.
//!
//! Beside them, two floors with no FUSE in them: the host file system's getxattr (a system
//! call), and a byte sent to another process over a pipe and sent back (`2 processes`, the
//! other process pinned as the program is): two context switches between two address
//! spaces, the least any request answered by another process can cost on this machine.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Instant;

use clap::Args;
use serde_json::json;

use crate::shell::{q, sh};

type Res<T> = Result<T, String>;

#[derive(Args)]
pub struct FuseRtArgs {
    /// Work directory: the image and the mount point.
    #[arg(long, default_value = "target/bench/fuse-rt")]
    dir: PathBuf,
    /// Calls timed per measurement (a quarter of them under busy loops).
    #[arg(long, default_value_t = 20_000)]
    calls: usize,
    /// Rounds; the table shows the median round's mean, the JSON every round.
    #[arg(long, default_value_t = 2)]
    runs: usize,
    /// The uf2fs binary to measure.
    #[arg(long, default_value = "target/release/uf2fs")]
    uf2fs: PathBuf,
}

const TRANSPORTS: [(&str, &str); 3] = [
    ("/dev/fuse", "noio_uring"),
    ("io_uring", "noio_uring_yield"),
    ("io_uring+yield", ""),
];

struct Scenario {
    name: &'static str,
    /// The CPU the program is pinned to, if any.
    pin: Option<usize>,
    /// CPUs that get a busy loop each (repeat a CPU for more).
    hogs: &'static [usize],
}

const SCENARIOS: [Scenario; 4] = [
    Scenario {
        name: "free, idle machine",
        pin: None,
        hogs: &[],
    },
    Scenario {
        name: "pinned to CPU 0",
        pin: Some(0),
        hogs: &[],
    },
    Scenario {
        name: "free, 2 busy loops per CPU",
        pin: None,
        hogs: &[0, 0, 1, 1],
    },
    Scenario {
        name: "pinned, busy loop on its CPU",
        pin: Some(0),
        hogs: &[0],
    },
];

/// Times `calls` getxattr calls on `file` from a thread pinned as asked: (mean, p99) in µs.
pub(crate) fn time_calls(file: &Path, calls: usize, pin: Option<usize>) -> Res<(f64, f64)> {
    let file = file.to_path_buf();
    let mut buf = [0u8; 64];
    timed_on_thread(calls, pin, move || {
        match rustix::fs::getxattr(&file, "user.uf2fs-bench-absent", &mut buf[..]) {
            Err(rustix::io::Errno::NODATA) => Ok(()),
            other => Err(format!("getxattr: expected ENODATA, got {other:?}")),
        }
    })
}

/// Runs `call` `calls` times on a thread of its own, pinned as asked, and times each:
/// (mean, p99) in µs. The first failing call ends it with its error.
fn timed_on_thread(
    calls: usize,
    pin: Option<usize>,
    mut call: impl FnMut() -> Res<()> + Send + 'static,
) -> Res<(f64, f64)> {
    let run = move || -> Res<(f64, f64)> {
        if let Some(cpu) = pin {
            pin_to(cpu)?;
        }
        let mut lat = Vec::with_capacity(calls);
        for _ in 0..calls {
            let t = Instant::now();
            call()?;
            lat.push(t.elapsed().as_secs_f64() * 1e6);
        }
        Ok(mean_p99(lat))
    };
    std::thread::spawn(run)
        .join()
        .map_err(|_| "timing thread panicked".to_string())?
}

/// The mean and the 99th percentile of latencies in µs.
fn mean_p99(mut lat: Vec<f64>) -> (f64, f64) {
    lat.sort_by(f64::total_cmp);
    let n = lat.len();
    let mean = lat.iter().sum::<f64>() / n.max(1) as f64;
    let p99 = lat.get(n * 99 / 100).copied().unwrap_or(0.0);
    (mean, p99)
}

/// Pins the calling thread to `cpu`.
fn pin_to(cpu: usize) -> Res<()> {
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu);
    rustix::thread::sched_setaffinity(None, &set).map_err(|e| format!("pin: {e}"))
}

/// The `pipe-echo` process: each byte read from stdin is written back to stdout.
pub fn pipe_echo(pin: Option<usize>) -> Res<()> {
    use std::io::{Read, Write};
    if let Some(cpu) = pin {
        pin_to(cpu)?;
    }
    let (mut inp, mut out) = (std::io::stdin().lock(), std::io::stdout().lock());
    let mut b = [0u8; 1];
    loop {
        match inp.read(&mut b) {
            Ok(0) => return Ok(()),
            Ok(_) => {
                out.write_all(&b).map_err(|e| format!("stdout: {e}"))?;
                out.flush().map_err(|e| format!("stdout: {e}"))?;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("stdin: {e}")),
        }
    }
}

/// Times `calls` one-byte round trips to a `pipe-echo` process, both pinned as asked:
/// (mean, p99) in µs.
fn time_pipe_round_trips(calls: usize, pin: Option<usize>) -> Res<(f64, f64)> {
    use std::io::{Read, Write};
    use std::process::Stdio;
    let exe = std::env::current_exe().map_err(|e| format!("this program: {e}"))?;
    let mut cmd = Command::new(exe);
    cmd.arg("pipe-echo");
    if let Some(cpu) = pin {
        cmd.args(["--pin", &cpu.to_string()]);
    }
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("pipe-echo: {e}"))?;
    let (Some(mut to), Some(mut from)) = (child.stdin.take(), child.stdout.take()) else {
        let _ = child.kill();
        let _ = child.wait();
        return Err("pipe-echo: no pipes".into());
    };
    let mut b = [7u8; 1];
    let got = timed_on_thread(calls, pin, move || {
        to.write_all(&b).map_err(|e| format!("to pipe-echo: {e}"))?;
        from.read_exact(&mut b)
            .map_err(|e| format!("from pipe-echo: {e}"))
    });
    // The timing thread has dropped the child's stdin: it sees EOF and ends.
    let _ = child.wait();
    got
}

/// One transport's measurements in a scenario: every round's (mean, p99) in µs, and the
/// transport as the daemon reported it.
struct Column {
    label: String,
    rounds: Vec<(f64, f64)>,
    transport: String,
}

impl Column {
    fn new(label: &str, transport: &str) -> Column {
        Column {
            label: label.to_string(),
            rounds: Vec::new(),
            transport: transport.to_string(),
        }
    }
}

struct Hogs(Vec<Child>);

impl Hogs {
    fn start(cpus: &[usize]) -> Res<Hogs> {
        let mut v = Vec::new();
        for cpu in cpus {
            let c = Command::new("taskset")
                .args(["-c", &cpu.to_string(), "sh", "-c", "while :; do :; done"])
                .spawn()
                .map_err(|e| format!("taskset: {e}"))?;
            v.push(c);
        }
        Ok(Hogs(v))
    }
}

impl Drop for Hogs {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

pub fn run(a: &FuseRtArgs) -> Res<()> {
    std::fs::create_dir_all(&a.dir).map_err(|e| format!("{}: {e}", a.dir.display()))?;
    let img = a.dir.join("rt.img");
    let mnt = a.dir.join("mnt");
    let host = a.dir.join("host-file");
    std::fs::create_dir_all(&mnt).map_err(|e| e.to_string())?;
    std::fs::write(&host, b"x").map_err(|e| e.to_string())?;
    let u = q(&a.uf2fs);
    sh(&format!(
        "mountpoint -q {m} && {u} umount {m}; true",
        m = q(&mnt)
    ))?;
    // The bench's own image from an earlier run is remade.
    sh(&format!(
        "{u} mkfs {} --size 256M --force >/dev/null",
        q(&img)
    ))?;
    let uring = std::fs::read_to_string("/sys/module/fuse/parameters/enable_uring")
        .unwrap_or_default()
        .trim()
        .to_string();
    println!(
        "FUSE round trip: getxattr of an absent xattr, {} calls per cell ({} under busy loops), \
         median of {} rounds; fuse.enable_uring={}",
        a.calls,
        a.calls / 4,
        a.runs,
        if uring.is_empty() { "absent" } else { &uring }
    );
    let mut rows = Vec::new();
    for sc in &SCENARIOS {
        let calls = if sc.hogs.is_empty() {
            a.calls
        } else {
            a.calls / 4
        };
        let mut cells: Vec<Column> = TRANSPORTS
            .iter()
            .map(|(l, _)| Column::new(l, ""))
            .chain(std::iter::once(Column::new("host fs", "-")))
            .chain(std::iter::once(Column::new("2 processes", "-")))
            .collect();
        for _ in 0..a.runs {
            for (i, (_, opts)) in TRANSPORTS.iter().enumerate() {
                let mut cmd = format!("{u} mount {} {}", q(&img), q(&mnt));
                if !opts.is_empty() {
                    cmd += &format!(" -o {opts}");
                }
                sh(&cmd)?;
                let st: serde_json::Value =
                    serde_json::from_str(&sh(&format!("{u} status --json {}", q(&mnt)))?)
                        .map_err(|e| format!("status: {e}"))?;
                let file = mnt.join("f");
                std::fs::write(&file, b"x").map_err(|e| e.to_string())?;
                let got = {
                    let _hogs = Hogs::start(sc.hogs)?;
                    time_calls(&file, calls, sc.pin)
                };
                sh(&format!("{u} umount {}", q(&mnt)))?;
                let got = got?;
                if let Some(c) = cells.get_mut(i) {
                    c.rounds.push(got);
                    c.transport = st["transport"].as_str().unwrap_or("?").to_string();
                }
            }
            let _hogs = Hogs::start(sc.hogs)?;
            let got = time_calls(&host, calls, sc.pin)?;
            if let Some(c) = cells.get_mut(TRANSPORTS.len()) {
                c.rounds.push(got);
            }
            let got = time_pipe_round_trips(calls, sc.pin)?;
            if let Some(c) = cells.get_mut(TRANSPORTS.len() + 1) {
                c.rounds.push(got);
            }
        }
        for Column {
            label,
            rounds,
            transport,
        } in cells
        {
            let mut means: Vec<f64> = rounds.iter().map(|r| r.0).collect();
            means.sort_by(f64::total_cmp);
            let median = means.get(means.len() / 2).copied().unwrap_or(0.0);
            let p99 = rounds.iter().find(|r| r.0 == median).map_or(0.0, |r| r.1);
            rows.push(json!({
                "scenario": sc.name,
                "transport": label,
                "daemon_transport": transport,
                "mean_us": median,
                "p99_us": p99,
                "rounds": rounds.iter().map(|r| json!({"mean_us": r.0, "p99_us": r.1})).collect::<Vec<_>>(),
            }));
        }
    }
    println!(
        "{:<30} {:<16} {:>9} {:>9}",
        "scenario", "transport", "mean us", "p99 us"
    );
    for r in &rows {
        println!(
            "{:<30} {:<16} {:>9.1} {:>9.1}",
            r["scenario"].as_str().unwrap_or(""),
            r["transport"].as_str().unwrap_or(""),
            r["mean_us"].as_f64().unwrap_or(0.0),
            r["p99_us"].as_f64().unwrap_or(0.0)
        );
    }
    let out = a.dir.join("fuse-rt.json");
    std::fs::write(
        &out,
        serde_json::to_string_pretty(&json!({ "rows": rows })).map_err(|e| e.to_string())?,
    )
    .map_err(|e| format!("{}: {e}", out.display()))?;
    println!("JSON: {}", out.display());
    Ok(())
}
