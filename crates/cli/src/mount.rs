//! `uf2fs mount`, `umount`, `sync` and `status`.
//!
//! Without `-f`, `mount` starts itself again as the daemon (in a new session, stdin from
//! /dev/null) and waits until the child says the mount is live, or relays why it failed; a
//! fork of a running Rust program is not safe, a fresh process is. The daemon's later log lines
//! go where `-o log=` says (journald, syslog or the file beside the control socket; see
//! `logging`), and `uf2fs status` shows where.

use crate::{logging, CliResult, Failure};
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use uf2fs_fuse::{request, request_within, Log, LogChoice, MountOptions, MountStatus};

pub struct Args<'a> {
    pub image: &'a Path,
    pub mountpoint: &'a Path,
    pub options: &'a [String],
    pub foreground: bool,
    pub daemon_child: bool,
}

pub fn mount(a: Args<'_>) -> CliResult {
    // Options are checked here too, so a typo fails before anything starts.
    let mut opts = MountOptions::parse(a.options)?;
    if !crate::devices().is_empty() {
        if !opts.devices.is_empty() {
            return Err(Failure::Msg(
                "name the other devices with --device or with -o device=, not both".into(),
            ));
        }
        opts.devices = crate::devices().to_vec();
    }
    if a.daemon_child {
        let _ = rustix::process::setsid();
        let (log, dest) = logging::choose(opts.log, log_file(a.mountpoint)?)?;
        return uf2fs_fuse::serve(a.image, a.mountpoint, opts, log, |st| detach(st, dest))
            .map_err(Failure::Msg);
    }
    if a.foreground {
        // The terminal, unless a destination is named.
        let (log, dest) = match opts.log {
            LogChoice::Auto => (Log::Stderr, None),
            choice => logging::choose(choice, log_file(a.mountpoint)?)?,
        };
        return uf2fs_fuse::serve(a.image, a.mountpoint, opts, log, |st| {
            logging::switch(&st.log, dest)?;
            eprintln!(
                "uf2fs: serving {}; Ctrl-C or fusermount3 -u unmounts",
                serving(st)
            );
            Ok(())
        })
        .map_err(Failure::Msg);
    }
    let exe = std::env::current_exe().map_err(|e| format!("finding the uf2fs binary: {e}"))?;
    let mut cmd = Command::new(exe);
    cmd.arg("mount").arg(a.image).arg(a.mountpoint);
    for o in a.options {
        cmd.arg("-o").arg(o);
    }
    for d in crate::devices() {
        cmd.arg("--device").arg(d);
    }
    cmd.arg("--foreground").arg("--daemon-child");
    cmd.env("GLIBC_TUNABLES", daemon_tunables());
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("starting the daemon: {e}"))?;
    let mut line = String::new();
    if let Some(out) = child.stdout.take() {
        let _ = BufReader::new(out).read_line(&mut line);
    }
    // The child's stderr reaches us until it is live (then it goes to the log file).
    let mut said = String::new();
    if let Some(mut err) = child.stderr.take() {
        let _ = err.read_to_string(&mut said);
    }
    let _ = std::io::stderr().write_all(said.as_bytes());
    if line.trim() == "ready" {
        return Ok(());
    }
    let status = child
        .wait()
        .map_err(|e| format!("waiting for the daemon: {e}"))?;
    if said.is_empty() {
        return Err(Failure::Msg(format!(
            "the daemon exited ({status}) before mounting"
        )));
    }
    Err(Failure::Quiet)
}

/// The log file beside the control socket of the mount at `mountpoint`.
fn log_file(mountpoint: &Path) -> Result<PathBuf, Failure> {
    let mp = std::fs::canonicalize(mountpoint)
        .map_err(|e| format!("mount point {}: {e}", mountpoint.display()))?;
    Ok(uf2fs_fuse::control_paths(&mp)?.log)
}

/// In the daemon, once the mount is live: later messages go to the chosen log, the parent is
/// told (one line on stdout), and stdout is let go.
fn detach(st: &MountStatus, dest: Option<logging::Dest>) -> std::io::Result<()> {
    logging::switch(&st.log, dest)?;
    let mut out = std::io::stdout();
    out.write_all(b"ready\n")?;
    out.flush()?;
    let null = std::fs::OpenOptions::new().write(true).open("/dev/null")?;
    rustix::stdio::dup2_stdout(&null)?;
    tracing::info!("serving {}, pid {}", serving(st), st.pid);
    Ok(())
}

/// "IMAGE on MOUNTPOINT (read-write)": what a live mount serves, for its first log line.
fn serving(st: &MountStatus) -> String {
    format!(
        "{} on {} ({})",
        st.image.display(),
        st.mountpoint.display(),
        if st.volume.writable {
            "read-write"
        } else {
            "read-only"
        }
    )
}

pub fn umount(mountpoint: &Path) -> CliResult {
    request(mountpoint, "unmount").map_err(Failure::Msg)?;
    Ok(())
}

pub fn sync(mountpoint: &Path) -> CliResult {
    // First what the kernel holds for the mount (the writeback cache's dirty pages and
    // times), so that the checkpoint the daemon writes next covers every write made so far:
    // syncfs starts every write-back but does not wait for the data (`writeback`).
    let dir = std::fs::File::open(mountpoint)
        .map_err(|e| Failure::Msg(format!("{}: {e}", mountpoint.display())))?;
    rustix::fs::syncfs(&dir)
        .map_err(|e| Failure::Msg(format!("syncing {}: {e}", mountpoint.display())))?;
    let (target, info) = crate::writeback::target_of(&dir)
        .map_err(|e| Failure::Msg(format!("syncing {}: {e}", mountpoint.display())))?;
    let waited = crate::writeback::wait_for_held_files(&target)
        .map_err(|e| Failure::Msg(format!("syncing {}: {e}", mountpoint.display())))?;
    tracing::debug!("{} files held open or mapped written back", waited.files);
    let others_may_write = info.super_options.split(',').any(|o| o == "allow_other");
    if waited.unreadable > 0 && others_may_write {
        eprintln!(
            "uf2fs sync: the open files of {} processes could not be looked at (another \
             user's; run as root): what they wrote that the kernel still holds may miss \
             this checkpoint",
            waited.unreadable
        );
    }
    request_within(mountpoint, "sync").map_err(Failure::Msg)?;
    Ok(())
}

pub fn gc(target: &Path, sections: u32) -> CliResult {
    let done = if target.is_dir() {
        let answer = request_within(target, &format!("gc {sections}")).map_err(Failure::Msg)?;
        answer
            .strip_prefix("ok ")
            .and_then(|n| n.trim().parse::<u32>().ok())
            .ok_or_else(|| Failure::Msg(format!("the daemon's answer: {answer}")))?
    } else {
        let fs = crate::write::open_rw(target)?;
        let done = fs.gc(sections)?;
        fs.unmount()?;
        done
    };
    println!("{done} sections cleaned");
    Ok(())
}

pub fn status(target: &Path, json: bool) -> CliResult {
    let v: Value = if target.is_dir() {
        let answer = request_within(target, "status").map_err(Failure::Msg)?;
        serde_json::from_str(&answer).map_err(|e| format!("the daemon's answer: {e}"))?
    } else {
        let fs = crate::open(target)?;
        let mut v = serde_json::to_value(fs.status()?)?;
        if let Value::Object(m) = &mut v {
            m.insert("image".into(), Value::from(target.display().to_string()));
        }
        v
    };
    let mut out = std::io::stdout().lock();
    if json {
        writeln!(out, "{}", serde_json::to_string_pretty(&v)?).map_err(crate::out_err)?;
        return Ok(());
    }
    print_status(&mut out, &v).map_err(crate::out_err)
}

fn print_status(out: &mut impl Write, v: &Value) -> std::io::Result<()> {
    let n = |p: &str| v.pointer(p).and_then(Value::as_u64).unwrap_or(0);
    let s = |p: &str| {
        v.pointer(p)
            .and_then(Value::as_str)
            .unwrap_or("-")
            .to_string()
    };
    let bs = n("/usage/block_size").max(1);
    let mib = |blocks: u64| blocks * bs / (1 << 20);
    writeln!(out, "image:        {}", s("/image"))?;
    if v.get("mountpoint").is_some() {
        writeln!(
            out,
            "mounted on:   {} (pid {})",
            s("/mountpoint"),
            n("/pid")
        )?;
        let log = match (s("/log/to").as_str(), v.pointer("/log")) {
            ("file", _) => s("/log/path"),
            ("journald", _) => format!("journald ({}; journalctl -t uf2fs)", s("/log/socket")),
            ("syslog", _) => format!("syslog ({}; tag uf2fs)", s("/log/socket")),
            ("stderr", _) => "standard error (foreground)".into(),
            (_, Some(other)) => other.to_string(),
            (_, None) => "-".into(),
        };
        writeln!(out, "log:          {log}")?;
    }
    let mode = if v.pointer("/writable").and_then(Value::as_bool) == Some(true) {
        "read-write".to_string()
    } else {
        match v.pointer("/read_only_reason").and_then(Value::as_str) {
            Some(r) => format!("read-only ({r})"),
            None => "read-only".into(),
        }
    };
    writeln!(out, "mode:         {mode}")?;
    let (total, free) = (n("/usage/blocks"), n("/usage/blocks_free"));
    writeln!(
        out,
        "usage:        {} MiB used of {} MiB ({} MiB free); {} inodes free",
        mib(total.saturating_sub(free)),
        mib(total),
        mib(free),
        n("/usage/files_free")
    )?;
    writeln!(
        out,
        "segments:     {} free, {} dirty (partly valid), {} full, {} prefree",
        n("/segments/free_segments"),
        n("/segments/dirty_segments"),
        n("/segments/full_segments"),
        n("/prefree_segments")
    )?;
    writeln!(
        out,
        "checkpoints:  {} written for {} requested since mount (mounted from version {}, {})",
        n("/checkpoints/written"),
        n("/checkpoints/requested"),
        n("/mounted_checkpoint"),
        if v.pointer("/mounted_clean").and_then(Value::as_bool) == Some(true) {
            "clean"
        } else {
            "not cleanly unmounted"
        }
    )?;
    writeln!(
        out,
        "              for the dirty-node budget: {} in the background, {} by a change its \
         caller waited for",
        n("/checkpoints/budget_in_background"),
        n("/checkpoints/budget_by_a_change"),
    )?;
    writeln!(
        out,
        "              {} requests served by a checkpoint begun after them (merged)",
        n("/checkpoints/merged")
    )?;
    if let Some(t) = v.get("transport").and_then(Value::as_str) {
        writeln!(out, "transport:    {t}")?;
    }
    if let Some(kinds) = v.pointer("/requests/by_kind").and_then(Value::as_object) {
        // The most frequent kinds first: what the workload cost in round trips.
        let mut kinds: Vec<(&String, u64)> = kinds
            .iter()
            .map(|(k, n)| (k, n.as_u64().unwrap_or(0)))
            .collect();
        kinds.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        let shown: Vec<String> = kinds.iter().map(|(k, n)| format!("{k} {n}")).collect();
        writeln!(
            out,
            "requests:     {} served since mount ({})",
            n("/requests/total"),
            shown.join(", ")
        )?;
        // Where the daemon's own time went: the kinds it spent the most on, per request.
        if let Some(us) = v
            .pointer("/requests/service_us_by_kind")
            .and_then(Value::as_object)
        {
            let mut spent: Vec<(&String, u64, u64)> = kinds
                .iter()
                .filter_map(|(k, n)| Some((*k, us.get(*k)?.as_u64()?, *n)))
                .collect();
            spent.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
            let shown: Vec<String> = spent
                .iter()
                .take(6)
                .map(|(k, t, n)| {
                    format!(
                        "{k} {:.0} ms ({:.1} us each)",
                        *t as f64 / 1000.0,
                        *t as f64 / (*n).max(1) as f64
                    )
                })
                .collect();
            writeln!(out, "              served in: {}", shown.join(", "))?;
        }
    }
    if v.get("memory").is_some() {
        let mib = |p: &str| n(&format!("/memory/{p}")) as f64 / f64::from(1 << 20);
        writeln!(
            out,
            "memory:       {:.1} MiB resident (peak {:.1}) of cache_size {:.0} MiB \
             ({:.0} for request buffers, {:.0} for caches and dirty nodes)",
            mib("resident_bytes"),
            mib("peak_resident_bytes"),
            mib("cache_size_bytes"),
            mib("own_bytes"),
            mib("caches_bytes")
        )?;
    }
    if v.get("write_stops").is_some() {
        writeln!(
            out,
            "full volume:  {:.1} MiB kept back for the kernel's dirty pages; {} writers told ENOSPC (or a failed writeback) at write(2)",
            n("/write_stops/kept_back_bytes") as f64 / f64::from(1 << 20),
            n("/write_stops/writers_stopped")
        )?;
    }
    if v.pointer("/listing_readahead/on") == Some(&Value::Bool(true)) {
        writeln!(
            out,
            "read-ahead:   {} directories and {} inodes read ahead of tree walks; {} listings not followed (busy)",
            n("/listing_readahead/directories"),
            n("/listing_readahead/inodes"),
            n("/listing_readahead/dropped")
        )?;
    }
    if v.pointer("/dentry_cache/kept").is_some() {
        writeln!(
            out,
            "dentry cache: {} block rewrites kept in memory, {} blocks written by flushes, {} held now",
            n("/dentry_cache/kept"),
            n("/dentry_cache/flushed"),
            n("/dentry_cache/held")
        )?;
    }
    if v.get("fsync_requests").is_some() {
        writeln!(
            out,
            "fsync:        {} requests: {} by node chain ({} node blocks), {} by checkpoint",
            n("/fsync_requests"),
            n("/fsync/by_node_chain"),
            n("/fsync/chain_blocks"),
            n("/fsync/by_checkpoint")
        )?;
    }
    if v.pointer("/recovery/chain_blocks").is_some() {
        writeln!(
            out,
            "recovery:     {} chain blocks replayed at mount: {} files, {} entries, {} block pointers",
            n("/recovery/chain_blocks"),
            n("/recovery/inodes"),
            n("/recovery/dentries"),
            n("/recovery/addresses")
        )?;
    }
    if v.pointer("/compression").is_some_and(|c| !c.is_null()) {
        writeln!(
            out,
            "compression:  {} clusters compressed into {} blocks, {} blocks saved; {} inodes made compressed",
            n("/compression/clusters"),
            n("/compression/written_blocks"),
            n("/compression/saved_blocks"),
            n("/compression/new_inodes")
        )?;
    }
    writeln!(
        out,
        "gc:           policy {}: {} sections cleaned ({} foreground, {} background, {} requested; {} data, {} node victims), {} freed",
        v.pointer("/gc/policy")
            .and_then(Value::as_str)
            .filter(|p| !p.is_empty())
            .unwrap_or("-"),
        n("/gc/foreground_runs") + n("/gc/background_runs") + n("/gc/requested_runs"),
        n("/gc/foreground_runs"),
        n("/gc/background_runs"),
        n("/gc/requested_runs"),
        n("/gc/data_victims"),
        n("/gc/node_victims"),
        n("/gc/sections_freed")
    )?;
    writeln!(
        out,
        "              moved {} data and {} node blocks; {} checkpoints for space; {} stale summaries skipped; longest wait for space {} ms, longest section {} ms",
        n("/gc/data_blocks_moved"),
        n("/gc/node_blocks_moved"),
        n("/gc/checkpoints_for_space"),
        n("/gc/stale_summaries"),
        n("/gc/worst_wait_us") / 1000,
        n("/gc/longest_section_us") / 1000
    )?;
    writeln!(
        out,
        "              writers short of space: {} cleaned one section and went on, {} waited for a checkpoint being written, {} cleaned until there was room (at most {} sections at once)",
        n("/gc/paced_steps"),
        n("/gc/waits_for_checkpoint"),
        n("/gc/full_waits"),
        n("/gc/most_sections_one_wait")
    )?;
    if v.pointer("/gc/mode")
        .and_then(Value::as_str)
        .is_some_and(|m| !m.is_empty())
    {
        writeln!(
            out,
            "allocation:   mode {}, ipu {}: {} blocks into the holes of {} used data segments, {} nodes into {} node segments, {} rewritten in place",
            v.pointer("/gc/mode").and_then(Value::as_str).unwrap_or("-"),
            v.pointer("/gc/ipu").and_then(Value::as_str).unwrap_or("-"),
            n("/gc/ssr_blocks"),
            n("/gc/ssr_segments"),
            n("/gc/ssr_node_blocks"),
            n("/gc/ssr_node_segments"),
            n("/gc/ipu_blocks")
        )?;
        writeln!(
            out,
            "              data_temp {}: {} overwrites to the hot data log, {} to the warm one (hot below an age of {} blocks)",
            v.pointer("/gc/data_temp").and_then(Value::as_str).unwrap_or("-"),
            n("/gc/hot_rewrites"),
            n("/gc/warm_rewrites"),
            n("/gc/hot_age_limit")
        )?;
    }
    let (mut total, mut causes) = (0, Vec::new());
    if let Some(Value::Object(m)) = v.pointer("/io/written_blocks") {
        for (cause, c) in m {
            let c = c.as_u64().unwrap_or(0);
            total += c;
            causes.push(format!("{cause} {c}"));
        }
    }
    writeln!(
        out,
        "written:      {total} blocks since mount ({})",
        causes.join(", ")
    )?;
    match v.pointer("/io/write_amplification").and_then(Value::as_f64) {
        Some(w) => writeln!(out, "write amp.:   {w:.3} device blocks per data block")?,
        None => writeln!(out, "write amp.:   - (no file data written since mount)")?,
    }
    if let Some(d) = v.pointer("/io/direct_writes").and_then(Value::as_str) {
        writeln!(
            out,
            "direct:       {d}; {} runs of file data written past the host's page cache",
            v.pointer("/io/direct_write_runs")
                .and_then(Value::as_u64)
                .unwrap_or(0)
        )?;
    }
    if let Some(w) = v.pointer("/io/write_behind") {
        let n = |k: &str| w.get(k).and_then(Value::as_u64).unwrap_or(0);
        if n("limit_bytes") == 0 {
            writeln!(out, "write-behind: off")?;
        } else {
            writeln!(
                out,
                "write-behind: {} small writes held (at most {:.1} MiB, {:.1} KiB now), written \
                 in {} requests; {} times by a writer at the bound, {} before a write over them",
                n("deferred"),
                n("limit_bytes") as f64 / (1 << 20) as f64,
                n("held_bytes") as f64 / 1024.0,
                n("written_runs"),
                n("writer_drains"),
                n("overlap_drains")
            )?;
        }
    }
    Ok(())
}

/// glibc's allocator settings for the daemon: allocations of 32 KiB and more (request and
/// reply buffers, a write's runs of blocks, up to a MiB each) get their own mappings, given
/// back when freed, and the heap is trimmed past 128 KiB free at its top. With the defaults,
/// whose mmap threshold rises to 32 MiB once such buffers are freed, they came from the heap
/// and stayed: `cp -a` of a 10 000-file tree left the daemon at 131 MB resident with 8 MiB of
/// caches, 52 MB with these, and a 1 MiB-block `dd` ran no slower (docs/design.md, "The I/O
/// path"). One arena for every thread: with glibc's default of one per thread, 4 KiB node
/// blocks freed by one thread and allocated by another left each arena fragmented, and the
/// same tree's `tar -x` peaked at 109 MB resident against 66 MB with one. Set through the
/// environment of the daemon we start (the code forbids `unsafe`, which `mallopt` needs);
/// tunables the user already set are kept and win.
fn daemon_tunables() -> String {
    const OURS: [&str; 3] = [
        "glibc.malloc.mmap_threshold=32768",
        "glibc.malloc.trim_threshold=131072",
        "glibc.malloc.arena_max=1",
    ];
    let theirs = std::env::var("GLIBC_TUNABLES").unwrap_or_default();
    let mut all: Vec<&str> = OURS
        .iter()
        .copied()
        .filter(|o| {
            let key = o.split('=').next().unwrap_or(o);
            !theirs.split(':').any(|t| t.split('=').next() == Some(key))
        })
        .collect();
    all.extend(theirs.split(':').filter(|t| !t.is_empty()));
    all.join(":")
}
