//! `uf2fs mount`: an F2FS image or device served as a directory through FUSE.
//!
//! [`serve`] opens the volume, mounts it with the kernel's FUSE driver (through
//! `fusermount3`), answers requests on several threads, and at the end (`fusermount3 -u`,
//! `umount`, SIGTERM, SIGINT, or `uf2fs umount`) writes the final checkpoint. While mounted, a
//! control socket answers `uf2fs status`, `uf2fs sync` and `uf2fs umount`; its path is derived
//! from the mount point, so the client finds it from the mount point alone.

mod acl;
mod ahead;
mod control;
mod ops;
pub mod options;

pub use control::{control_paths, request, request_within};
pub use options::{LogChoice, MountOptions};

use fuser::{Config, MountOption, Session, SessionACL};
use options::Access;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use uf2fs_engine::{Error, Fs};

/// Where the daemon's log lines go once the mount is live: chosen by the command that starts
/// it (the `log=` option, and what the machine has), shown by `uf2fs status`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "to", rename_all = "lowercase")]
pub enum Log {
    /// The terminal of `uf2fs mount -f`.
    Stderr,
    /// The systemd journal (identifier `uf2fs`), through its native socket.
    Journald { socket: PathBuf },
    /// The local syslog daemon (facility daemon, tag `uf2fs`).
    Syslog { socket: PathBuf },
    /// A file beside the control socket.
    File { path: PathBuf },
}

/// What the daemon says about itself in `uf2fs status`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct MountStatus {
    pub image: PathBuf,
    pub mountpoint: PathBuf,
    pub pid: u32,
    pub mount_options: MountOptions,
    /// Why the volume is read-only, when it is.
    pub read_only_reason: Option<String>,
    pub fsync_requests: u64,
    /// How requests reach the daemon: `/dev/fuse`, or io_uring queues and threads per queue.
    pub transport: String,
    /// FUSE requests served since mount, by kind: each one a round trip from the kernel.
    pub requests: Requests,
    /// Free space kept back from writers for the kernel's dirty pages (with the writeback
    /// cache), and the files whose writer was told ENOSPC or a failed writeback.
    pub write_stops: WriteStops,
    /// What the tree-walk read-ahead read (`listing_readahead`).
    pub listing_readahead: ListingReadahead,
    /// The daemon's memory against its bound.
    pub memory: Memory,
    pub log: Log,
    #[serde(flatten)]
    pub volume: uf2fs_engine::Status,
}

/// FUSE requests served since mount.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Requests {
    pub total: u64,
    /// By the kernel's name for each kind (`LOOKUP`, `WRITE`...), the kinds served at least
    /// once.
    pub by_kind: std::collections::BTreeMap<String, u64>,
    /// Microseconds the daemon spent serving each kind, from dispatch to the reply sent:
    /// what a workload's requests cost on this side of the transport.
    pub service_us_by_kind: std::collections::BTreeMap<String, u64>,
}

/// Writers stopped on the way into a full volume (see docs/design.md, "The writeback cache").
#[derive(Debug, Clone, serde::Serialize)]
pub struct WriteStops {
    /// Free bytes statfs does not count as available: what the kernel may still hold dirty.
    pub kept_back_bytes: u64,
    /// Files whose writer was (or is to be) told ENOSPC, or a failed writeback, at its next
    /// write(2), since mount.
    pub writers_stopped: u64,
}

/// Directories whose entries and inodes were read ahead of a tree walk, since mount.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ListingReadahead {
    pub on: bool,
    pub directories: u64,
    pub inodes: u64,
    /// Listings that found the read-ahead thread busy and were not followed.
    pub dropped: u64,
}

/// The daemon's memory: the bound (`cache_size`) and how it is split, and what is resident.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Memory {
    pub cache_size_bytes: u64,
    /// The daemon's own request and run buffers, code and stacks.
    pub own_bytes: u64,
    /// The engine's clean caches and dirty nodes.
    pub caches_bytes: u64,
    /// Resident now and at most since start (`VmRSS`, `VmHWM`); 0 where unknown.
    pub resident_bytes: u64,
    pub peak_resident_bytes: u64,
}

impl Memory {
    fn now(cache_size: u64, serving: usize, caches: u64) -> Memory {
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let kib = |key: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(key))
                .and_then(|rest| {
                    rest.trim()
                        .trim_end_matches("kB")
                        .trim()
                        .parse::<u64>()
                        .ok()
                })
                .unwrap_or(0)
                * 1024
        };
        Memory {
            cache_size_bytes: cache_size,
            own_bytes: options::daemon_own_bytes(serving),
            caches_bytes: caches,
            resident_bytes: kib("VmRSS:"),
            peak_resident_bytes: kib("VmHWM:"),
        }
    }
}

/// Opens the volume as the options ask. A volume that cannot be written (a feature we do not
/// write yet, a checkpoint that asks for fsck) is opened read-only, with the reason.
pub fn open_volume(image: &Path, opts: &MountOptions) -> Result<(Fs, Option<String>), String> {
    let shown = image.display();
    let devices = &opts.devices;
    if opts.read_only {
        let fs = Fs::open_with(image, devices).map_err(|e| format!("{shown}: {e}"))?;
        return Ok((fs, Some("mounted with -o ro".into())));
    }
    match Fs::open_rw_with(image, devices) {
        Ok(fs) => Ok((fs, None)),
        Err(Error::ReadOnly(why)) => {
            let fs = Fs::open_with(image, devices).map_err(|e| format!("{shown}: {e}"))?;
            Ok((fs, Some(why)))
        }
        Err(e) => Err(format!("{shown}: {e}")),
    }
}

/// Mounts `image` on `mountpoint` and serves it until unmounted. `ready` runs once the mount
/// is live (the daemon's parent is told then, and the log moves to `log`). Returns after the
/// final checkpoint.
pub fn serve(
    image: &Path,
    mountpoint: &Path,
    opts: MountOptions,
    log: Log,
    ready: impl FnOnce(&MountStatus) -> std::io::Result<()>,
) -> Result<(), String> {
    // Resolved before mounting: afterwards the path leads into the mount itself.
    let mountpoint = std::fs::canonicalize(mountpoint)
        .map_err(|e| format!("mount point {}: {e}", mountpoint.display()))?;
    if !mountpoint.is_dir() {
        return Err(format!(
            "mount point {} is not a directory",
            mountpoint.display()
        ));
    }
    let image = std::fs::canonicalize(image).map_err(|e| format!("{}: {e}", image.display()))?;
    let mut opts = opts;
    for d in &mut opts.devices {
        *d = std::fs::canonicalize(&*d).map_err(|e| format!("device {}: {e}", d.display()))?;
    }
    // The request threads that will serve (io_uring: as many per CPU queue as it takes), for
    // the part of `cache_size` the daemon's own buffers take.
    let serving = if opts.io_uring {
        fuser::io_uring_serving_threads(opts.threads).map_or(opts.threads, |n| n.max(opts.threads))
    } else {
        opts.threads
    };
    opts.check_cache_size(serving)?;
    let (mut fs, read_only_reason) = open_volume(&image, &opts)?;
    if let Some(why) = &read_only_reason {
        if !opts.read_only {
            eprintln!("uf2fs: mounting {} read-only: {why}", image.display());
        }
    }
    let read_only = read_only_reason.is_some();
    fs.set_options(uf2fs_engine::Options {
        inline_data: opts.inline_data,
        inline_dentry: opts.inline_dentry,
        mode: opts.mode,
        ipu: opts.ipu,
        data_temp: opts.data_temp,
        fsync_mode: opts.fsync_mode,
        checkpoint_merge: opts.checkpoint_merge,
        gc_policy: opts.gc_policy,
        gc_node_penalty: opts.gc_node_penalty,
        gc_window: opts.gc_window,
        gc_batch: opts.gc_batch,
        gc_pace: opts.gc_pace,
        direct_writes: opts.direct_writes,
        write_behind: opts.write_behind,
        background_gc: opts.background_gc,
        cache_bytes: opts.engine_cache_bytes(serving),
        fixed_time: None,
        compress: opts.compress,
        dentry_cache: opts.dentry_cache,
    });
    let fs = Arc::new(fs);
    let paths = control_paths(&mountpoint)?;
    let listener = control::bind(&paths.socket, &mountpoint)?;
    if let (Some(dir), Some(own)) = (
        paths.socket.parent(),
        paths.socket.file_stem().and_then(|s| s.to_str()),
    ) {
        let pruned = control::prune(dir, own, std::time::SystemTime::now());
        if pruned != control::Pruned::default() {
            // Debug: the daemon's lines still reach the user's terminal at this point.
            tracing::debug!(
                "{}: removed {} sockets nobody listened on and {} logs of mounts gone",
                dir.display(),
                pruned.sockets,
                pruned.logs
            );
        }
    }

    let mut mount_options = vec![
        MountOption::FSName(image.display().to_string()),
        MountOption::Subtype("uf2fs".into()),
        MountOption::DefaultPermissions,
    ];
    mount_options.push(if read_only {
        MountOption::RO
    } else {
        MountOption::RW
    });
    for f in &opts.flags {
        mount_options.push(match f.as_str() {
            "dev" => MountOption::Dev,
            "nodev" => MountOption::NoDev,
            "suid" => MountOption::Suid,
            "nosuid" => MountOption::NoSuid,
            "exec" => MountOption::Exec,
            "noexec" => MountOption::NoExec,
            "sync" => MountOption::Sync,
            "async" => MountOption::Async,
            "dirsync" => MountOption::DirSync,
            other => MountOption::CUSTOM(other.to_string()),
        });
    }
    // Mounted by root, device nodes and set-user-ID files work as on a kernel file system
    // unless nodev/nosuid say otherwise (fusermount3 makes FUSE mounts nodev,nosuid by
    // default, and lets only root lift that).
    if rustix::process::geteuid().is_root() {
        for (on, off, option) in [
            ("dev", "nodev", MountOption::Dev),
            ("suid", "nosuid", MountOption::Suid),
        ] {
            if !opts.flags.iter().any(|f| f == on || f == off) {
                mount_options.push(option);
            }
        }
    }
    let mut config = Config::default();
    config.mount_options = mount_options;
    config.acl = match opts.access {
        Access::Owner => SessionACL::Owner,
        Access::OwnerAndRoot => SessionACL::RootAndOwner,
        Access::All => SessionACL::All,
    };
    config.n_threads = Some(opts.threads);
    config.clone_fd = true;
    config.io_uring_yield = opts.io_uring_yield;

    let volume = ops::Volume::new(fs.clone(), opts.clone());
    let counters = volume.counters();
    let notifier_slot = volume.notifier_slot();
    let margin_slot = volume.cache_margin_slot();
    let stopped = volume.writers_stopped_counter();
    let ahead = volume.ahead_stats();
    let session = Session::new(volume, &mountpoint, &config).map_err(|e| {
        let _ = std::fs::remove_file(&paths.socket);
        format!("mounting on {}: {e}", mountpoint.display())
    })?;
    let _ = notifier_slot.set(session.notifier());
    let ring = session.io_uring();
    let requests = session.request_counts();
    widen_readahead(&mountpoint);
    if fs.is_writable() && opts.writeback_cache {
        let st = fs.statfs();
        let bs = u64::from(st.block_size);
        let margin = bound_dirty_pages(&mountpoint, st.blocks * bs);
        margin_slot.store(margin.div_ceil(bs), std::sync::atomic::Ordering::Relaxed);
    }
    let unmounter = Arc::new(control::Unmounter::new(&mountpoint));

    // The control thread and the status closure hold the volume weakly: at unmount the
    // daemon closes the image (and lets go of its lock) before it tells waiters it is done.
    let status = {
        let fs = Arc::downgrade(&fs);
        let (image, mountpoint, opts) = (image.clone(), mountpoint.clone(), opts.clone());
        let ring = ring.clone();
        let reason = read_only_reason.clone();
        let (margin, stopped) = (margin_slot.clone(), stopped.clone());
        move || -> Result<MountStatus, String> {
            Ok(MountStatus {
                image: image.clone(),
                mountpoint: mountpoint.clone(),
                pid: std::process::id(),
                mount_options: opts.clone(),
                read_only_reason: reason.clone(),
                fsync_requests: counters.load(std::sync::atomic::Ordering::Relaxed),
                transport: transport(ring.as_ref()),
                requests: {
                    // One reading of the counters: the total is their sum, whatever is
                    // served meanwhile.
                    let by_kind: std::collections::BTreeMap<String, u64> =
                        requests.snapshot().into_iter().collect();
                    Requests {
                        total: by_kind.values().sum(),
                        by_kind,
                        service_us_by_kind: requests.time_snapshot().into_iter().collect(),
                    }
                },
                write_stops: WriteStops {
                    kept_back_bytes: margin.load(std::sync::atomic::Ordering::Relaxed)
                        * uf2fs_engine::uf2fs_device::BLOCK_SIZE as u64,
                    writers_stopped: stopped.load(std::sync::atomic::Ordering::Relaxed),
                },
                listing_readahead: {
                    use std::sync::atomic::Ordering::Relaxed;
                    ListingReadahead {
                        on: opts.listing_readahead,
                        directories: ahead.directories.load(Relaxed),
                        inodes: ahead.inodes.load(Relaxed),
                        dropped: ahead.dropped.load(Relaxed),
                    }
                },
                memory: Memory::now(opts.cache_bytes, serving, opts.engine_cache_bytes(serving)),
                log: log.clone(),
                volume: fs
                    .upgrade()
                    .ok_or("the volume is being unmounted")?
                    .status()
                    .map_err(|e| e.to_string())?,
            })
        }
    };
    if fs.is_writable() && opts.background_gc != uf2fs_engine::BackgroundGc::Off {
        spawn_cleaner(Arc::downgrade(&fs));
    }
    if fs.is_writable() {
        spawn_checkpointer(
            Arc::downgrade(&fs),
            (opts.cp_interval > 0).then(|| std::time::Duration::from_secs(opts.cp_interval)),
        );
    }
    let first = status()?;
    let waiters = control::Waiters::default();
    control::spawn(
        listener,
        Arc::downgrade(&fs),
        Arc::new(status),
        unmounter.clone(),
        waiters.clone(),
    );
    control::on_signals(unmounter)?;
    ready(&first).map_err(|e| format!("telling the parent the mount is ready: {e}"))?;

    let served = session.run();
    // The kernel has let go of the mount: make everything durable.
    let mut outcome = served.map_err(|e| format!("serving {}: {e}", mountpoint.display()));
    if fs.is_writable() {
        if let Err(e) = fs.final_checkpoint() {
            outcome = Err(format!("final checkpoint of {}: {e}", image.display()));
        }
    }
    match &outcome {
        Ok(()) => tracing::info!(
            "{} unmounted, final checkpoint written",
            mountpoint.display()
        ),
        Err(e) => tracing::error!("{e}"),
    }
    let _ = std::fs::remove_file(&paths.socket);
    // Close the image before saying done, so that whoever waited can use it at once: the
    // session is gone (`run` consumed it, and its request handlers with it); any control
    // request still running lets go within a bounded wait.
    let mut fs = fs;
    for _ in 0..500 {
        match Arc::try_unwrap(fs) {
            Ok(f) => {
                drop(f);
                break;
            }
            Err(still) => {
                fs = still;
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
        }
    }
    waiters.finish(&outcome);
    outcome
}

/// How requests reach the daemon, for `uf2fs status`.
fn transport(ring: Option<&fuser::IoUringInfo>) -> String {
    match ring {
        Some(r) if r.failed() => {
            "io_uring asked for, but a queue's thread failed (see the daemon's log): \
             requests may go through /dev/fuse"
                .to_string()
        }
        Some(r) => format!(
            "io_uring, {} queues x {} threads{}",
            r.queues,
            r.threads_per_queue,
            if r.yielding {
                format!(
                    ", yielding the CPU after replies and serving small requests in \
                     SCHED_IDLE ({} lifted to SCHED_OTHER after 2 ms)",
                    r.lifted()
                )
            } else {
                String::new()
            }
        ),
        None => "/dev/fuse".to_string(),
    }
}

/// The background cleaner (`background_gc=on|sync`): steps while there is work, naps when
/// there is none or a change holds the write lock; ends with the volume.
fn spawn_cleaner(fs: std::sync::Weak<uf2fs_engine::Fs>) {
    let spawned = std::thread::Builder::new()
        .name("uf2fs-gc".into())
        .spawn(move || loop {
            let Some(fs) = fs.upgrade() else {
                return;
            };
            let worked = match fs.background_gc_step() {
                Ok(w) => w,
                Err(e) => {
                    tracing::error!("background cleaner stopped: {e}");
                    return;
                }
            };
            // A change that asks for a checkpoint wakes it at once. The volume is let go of
            // while sleeping: at unmount the daemon waits to hold its last reference.
            let waiter = fs.background_gc_waiter();
            drop(fs);
            waiter.wait(std::time::Duration::from_millis(if worked {
                1
            } else {
                50
            }));
        });
    if let Err(e) = spawned {
        tracing::error!("background cleaner not started: {e}");
    }
}

/// The background checkpoint thread: the checkpoint a change asks for when the dirty nodes
/// pass half their budget, written while changes go on (the change's caller does not wait for
/// it), and the periodic one (`cp_interval`, unless 0): once a second, a checkpoint if changes
/// nobody synced are older than the interval (never waiting for the lock).
fn spawn_checkpointer(
    fs: std::sync::Weak<uf2fs_engine::Fs>,
    interval: Option<std::time::Duration>,
) {
    let nap = interval.map_or(std::time::Duration::from_secs(1), |i| {
        i.min(std::time::Duration::from_secs(1))
    });
    let spawned = std::thread::Builder::new()
        .name("uf2fs-cp".into())
        .spawn(move || loop {
            let Some(fs) = fs.upgrade() else {
                return;
            };
            if let Err(e) = fs.background_checkpoint_step(interval) {
                tracing::error!("background checkpoints stopped: {e}");
                return;
            }
            // The volume is let go of while sleeping: at unmount the daemon waits to hold
            // its last reference.
            let waiter = fs.checkpoint_waiter();
            drop(fs);
            waiter.wait(nap);
        });
    if let Err(e) = spawned {
        tracing::error!("periodic checkpoint not started: {e}");
    }
}

/// The readahead window the kernel uses on the mount, in KiB: four of the biggest reads the
/// daemon takes (`MAX_IO`), so that a sequential reader costs one request per MiB and the
/// kernel keeps several in flight (fio, 1 GiB read at 1 MiB, caches dropped, four alternated
/// rounds: 670-1354 MiB/s with one, 1457-1554 with four; eight and sixteen did no better).
const READAHEAD_KB: u64 = 4096;

/// A FUSE mount starts with the kernel's default 128 KiB readahead window, whatever
/// `max_readahead` the daemon offers: a sequential reader then sends eight requests per MiB.
/// Root may widen it (the mount's `read_ahead_kb` in sysfs); other users keep the default.
/// The mount's device number comes from /proc/self/mountinfo: a `stat` of the mount point
/// would ask this daemon, which does not serve requests yet.
fn widen_readahead(mountpoint: &std::path::Path) {
    let Some(dev) = mount_device(mountpoint) else {
        tracing::debug!("no mountinfo line for {}", mountpoint.display());
        return;
    };
    let knob = format!("/sys/class/bdi/{dev}/read_ahead_kb");
    let now: u64 = std::fs::read_to_string(&knob)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0);
    if now < READAHEAD_KB {
        if let Err(e) = std::fs::write(&knob, READAHEAD_KB.to_string()) {
            tracing::debug!("keeping the kernel's readahead ({knob}: {e})");
        }
    }
}

/// The most the kernel may hold dirty for a mount (see `bound_dirty_pages`).
const DIRTY_BOUND_MAX: u64 = 64 << 20;

/// Sets what the kernel may hold dirty for the mount (its writeback cache) and returns the
/// bytes of free space to keep back for it (`Volume::cache_margin`). The bound is the mount
/// bdi's `max_bytes` (a strict limit: the kernel throttles writers past it): a 32nd of the
/// volume's user space, at least 1 MiB and at most 64 MiB. The kernel's own default is 1% of
/// its dirty threshold (47 MiB on a 24 GiB machine), whatever the volume: too much for a
/// small one, whose margin would be a large part of it, and on a large one it throttles
/// sequential writers (fio, 1 GiB of 1 MiB writes on a 2.5 GB volume, four alternated rounds:
/// 1029-1191 MiB/s with a 64th, 38 MiB, against 1166-1228 with 64 MiB; 128 and 256 MiB, set by
/// hand, gained nothing more). The margin is the bound, a quarter more and 4 MiB: what a
/// writer dirties before the kernel throttles it goes past the bound by about that (measured
/// with `dd` until ENOSPC, then fsync: on a 62 MiB volume, whose bound is 1.9 MiB, a margin of
/// 4 MiB lost pages in 4 runs of 12 and 6 MiB in none; on a 400 MiB one, bound 12.5 MiB,
/// 14 MiB lost none in 6). Where the kernel has no `max_bytes` (before 6.2) or refuses the
/// change, its bound is kept (48 MiB assumed when it cannot be read).
fn bound_dirty_pages(mountpoint: &std::path::Path, user_bytes: u64) -> u64 {
    const ASSUMED: u64 = 48 << 20;
    let knob = mount_device(mountpoint).map(|dev| format!("/sys/class/bdi/{dev}/max_bytes"));
    let now = knob
        .as_ref()
        .and_then(|k| std::fs::read_to_string(k).ok())
        .and_then(|s| s.trim().parse::<u64>().ok());
    let want = (user_bytes / 32).clamp(1 << 20, DIRTY_BOUND_MAX);
    let bound = match (now, &knob) {
        (Some(now), Some(knob)) if want != now => match std::fs::write(knob, want.to_string()) {
            Ok(()) => want,
            Err(e) => {
                tracing::debug!("keeping the kernel's dirty bound ({knob}: {e})");
                now
            }
        },
        (Some(now), _) => now,
        (None, _) => ASSUMED,
    };
    bound + bound / 4 + (4 << 20)
}

/// "major:minor" of the mount at `mountpoint` (the last one mounted there).
fn mount_device(mountpoint: &std::path::Path) -> Option<String> {
    mount_info(mountpoint).map(|m| m.device)
}

/// What /proc/self/mountinfo says of the newest mount at a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountInfo {
    /// The mount's ID (`mnt_id` in /proc/PID/fdinfo names it too).
    pub id: u64,
    /// The mount's device number, `major:minor`.
    pub device: String,
    /// The file system's own options (`user_id=0,group_id=0,allow_other`, ...).
    pub super_options: String,
}

/// Every mount /proc/self/mountinfo lists, in its order, with where each is mounted; none
/// when it cannot be read.
fn mounts() -> Vec<(MountInfo, String)> {
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .filter_map(parse_mountinfo_line)
        .collect()
}

/// The newest mount at `mountpoint` (given as the kernel spells it: absolute, no symlinks),
/// read from /proc/self/mountinfo without touching the mount itself.
fn mount_info(mountpoint: &std::path::Path) -> Option<MountInfo> {
    let want = mountpoint.to_str()?;
    mounts()
        .into_iter()
        .rev()
        .find_map(|(m, at)| (at == want).then_some(m))
}

/// The mount whose ID is `id` (as /proc/PID/fdinfo gives a descriptor's mount).
pub fn mount_info_by_id(id: u64) -> Option<MountInfo> {
    mounts()
        .into_iter()
        .find_map(|(m, _)| (m.id == id).then_some(m))
}

/// One line of mountinfo: the mount, and where it is mounted.
fn parse_mountinfo_line(line: &str) -> Option<(MountInfo, String)> {
    let mut f = line.split(' ');
    let id = f.next()?.parse().ok()?;
    let device = f.nth(1)?;
    let _root = f.next()?;
    let at = f.next()?;
    // mountinfo escapes space, tab, newline and backslash as octal.
    let at = at
        .replace("\\040", " ")
        .replace("\\011", "\t")
        .replace("\\012", "\n")
        .replace("\\134", "\\");
    // Optional fields end at a lone "-"; then the type, the source and the options.
    let mut rest = f.skip_while(|x| *x != "-").skip(1);
    let _fstype = rest.next()?;
    let _source = rest.next()?;
    let super_options = rest.next().unwrap_or("").to_string();
    Some((
        MountInfo {
            id,
            device: device.to_string(),
            super_options,
        },
        at,
    ))
}

/// The IDs of every mount of device `device` (`major:minor`): a mount and its bind mounts.
pub fn mount_ids_of(device: &str) -> Vec<u64> {
    mounts()
        .into_iter()
        .filter_map(|(m, _)| (m.device == device).then_some(m.id))
        .collect()
}

/// Where file system `device` (`major:minor`) is mounted: the mount and its bind mounts, as
/// mountinfo spells them.
pub fn mount_points_of(device: &str) -> Vec<std::path::PathBuf> {
    mounts()
        .into_iter()
        .filter_map(|(m, at)| (m.device == device).then(|| at.into()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_lines_give_the_device_and_the_file_system_options() {
        let line =
            "612 29 0:88 / /tmp/a\\040b rw,nosuid,relatime shared:310 master:4 - fuse.uf2fs \
                    /img rw,user_id=0,group_id=0,default_permissions,allow_other";
        assert_eq!(
            parse_mountinfo_line(line),
            Some((
                MountInfo {
                    id: 612,
                    device: "0:88".into(),
                    super_options: "rw,user_id=0,group_id=0,default_permissions,allow_other".into(),
                },
                "/tmp/a b".into()
            ))
        );
        let no_optional = "36 35 98:0 / /mnt rw - ext4 /dev/vda rw";
        assert_eq!(
            parse_mountinfo_line(no_optional).map(|(m, at)| (m.super_options, at)),
            Some(("rw".into(), "/mnt".into()))
        );
        assert_eq!(parse_mountinfo_line("36 35"), None);
        assert_eq!(
            parse_mountinfo_line("x 35 98:0 / /mnt rw - ext4 /dev/vda rw"),
            None
        );
    }
}
