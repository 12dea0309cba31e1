//! `-o` options of `uf2fs mount`: the FUSE ones, the generic mount flags that mount(8) hands
//! to helpers, and the F2FS ones with the kernel's meaning and defaults. Anything else is
//! refused by name, so that a typo does not silently mount with defaults.

use serde::Serialize;

use uf2fs_engine::compress::{Algorithm, MAX_LOG_CLUSTER_SIZE, MIN_LOG_CLUSTER_SIZE};
pub use uf2fs_engine::{
    AllocMode, BackgroundGc, CompressOptions, DataTemp, FsyncMode, GcPolicy, IpuPolicy,
};

/// When reads update a file's access time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Atime {
    /// Never.
    Noatime,
    /// When the access time is not after the last change, or is a day old (Linux's default).
    Relatime,
    /// On every read.
    Strictatime,
}

/// Where the daemon's log goes once the mount is live (`log=`; the daemon, not the kernel,
/// reads it). Before that, and always with `-f` unless a destination is named, messages go to
/// the standard error of the command that mounted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LogChoice {
    /// journald if its socket answers, else syslog if /dev/log does, else the file.
    Auto,
    Journald,
    Syslog,
    /// The file beside the control socket (`uf2fs status` names it).
    File,
}

/// Who besides the mounting user may use the mount.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Access {
    Owner,
    OwnerAndRoot,
    All,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MountOptions {
    pub read_only: bool,
    pub access: Access,
    /// The kernel checks permissions from the mode bits (always on; accepted for clarity).
    pub default_permissions: bool,
    pub background_gc: BackgroundGc,
    /// How the cleaner picks victims (`gc_policy=greedy|cost-benefit|age-threshold`).
    pub gc_policy: GcPolicy,
    /// Node sections weigh one section more as victims unless free sections run short
    /// (`gc_node_penalty=on|off`; seed 000's data-first selection).
    pub gc_node_penalty: bool,
    /// Victims found by a window over this many candidate sections instead of the exact
    /// index (`gc_window=N`, 0 = exact; to compare with the kernel's windowed search).
    pub gc_window: u32,
    /// Sections a change short of space cleans beyond its need before one checkpoint frees
    /// them all (`gc_batch=N`, 1 to 64; default 8): fewer shorten each wait for space.
    pub gc_batch: u32,
    /// A write short of space cleans one section and goes on, the checkpoint that frees it
    /// written by the background thread (`gc_pace=on|off`, seed 003; default on).
    pub gc_pace: bool,
    /// Large runs of file data go to the image with O_DIRECT, past the host's page cache
    /// (`direct_writes=on|off`; default on).
    pub direct_writes: bool,
    /// Small runs of file data are held in memory and written a little later, joined where
    /// they follow each other (`write_behind=on|off`; default on; at most a sixteenth of
    /// `cache_size`).
    pub write_behind: bool,
    /// While a directory is listed, a thread reads the entries and inodes of the directories
    /// a tree walk lists next (`listing_readahead=on|off`; default on).
    pub listing_readahead: bool,
    pub checkpoint_merge: bool,
    /// Changed dentry blocks stay in memory until the next checkpoint
    /// (`dentry_cache`/`nodentry_cache`; default on).
    pub dentry_cache: bool,
    pub mode: AllocMode,
    /// Which rewrites go in place in adaptive mode (`ipu=fsync|force|off`).
    pub ipu: IpuPolicy,
    /// Which data log a user's overwrite goes to (`data_temp=age|off`): by its old copy's
    /// age (hot or warm), or always the warm one.
    pub data_temp: DataTemp,
    /// Seconds after which changes nobody synced get a checkpoint (`cp_interval=N`, the
    /// kernel's sysfs knob of that name; 0: only when asked or when the caches fill).
    pub cp_interval: u64,
    pub fsync_mode: FsyncMode,
    pub inline_data: bool,
    pub inline_dentry: bool,
    pub inline_xattr: bool,
    pub atime: Atime,
    pub log: LogChoice,
    /// The bound on the daemon's memory, in bytes (`cache_size=SIZE`, e.g. 64M): its own
    /// buffers ([`daemon_own_bytes`]) and, in what is left, the engine's caches and dirty nodes.
    pub cache_bytes: u64,
    /// Whether `cache_size` was given (a default too small for the request threads is
    /// raised; a given one is refused).
    pub cache_size_given: bool,
    /// Request-handling threads (`threads=N`, 1 to 64). Reads run in parallel; changes take
    /// the engine's write lock.
    pub threads: usize,
    /// Asynchronous requests (readahead, writeback) the kernel keeps in flight
    /// (`max_background=N`, 1 to 1024; the kernel's own default is 12).
    pub max_background: u16,
    /// The kernel's writeback cache (`writeback_cache`, the default, or
    /// `nowriteback_cache`): buffered writes gather in the kernel's page cache and reach the
    /// daemon in large runs at writeback, close, fsync and sync, instead of one request per
    /// write(2). Off, every write is a request and errors such as ENOSPC come from write(2)
    /// itself rather than from close or fsync (docs/design.md, "The writeback cache").
    pub writeback_cache: bool,
    /// FUSE over io_uring (`io_uring`, the default, or `noio_uring`): when the kernel offers
    /// it (Linux 6.14+, `fuse` module parameter `enable_uring` on), requests come through one
    /// queue per CPU served by threads on that CPU instead of through /dev/fuse
    /// (docs/design.md, "FUSE over io_uring"). Without the kernel's offer, /dev/fuse as before.
    pub io_uring: bool,
    /// With io_uring: serving threads wait in SCHED_IDLE after each reply, so that the caller
    /// they wake stays on its CPU and its next request lands on the same queue
    /// (`io_uring_yield`, the default, or `noio_uring_yield`; docs/design.md).
    pub io_uring_yield: bool,
    /// Generic flags passed on to the kernel's mount (nodev, nosuid, noexec, noatime...).
    pub flags: Vec<String>,
    /// The other devices of a multi-device volume, in the volume's order after the image
    /// (`device=PATH`, once per device); those not named are looked for at the paths the
    /// superblock recorded.
    pub devices: Vec<std::path::PathBuf>,
    /// How new files are compressed on an image with the compression feature
    /// (`compress_algorithm=`, `compress_log_size=`, `compress_extension=`,
    /// `nocompress_extension=`, `compress_chksum`, `compress_mode=`), as in Linux.
    pub compress: CompressOptions,
}

impl Default for MountOptions {
    /// Linux 6.1's defaults for F2FS.
    fn default() -> Self {
        MountOptions {
            read_only: false,
            access: Access::Owner,
            default_permissions: true,
            background_gc: BackgroundGc::On,
            gc_policy: GcPolicy::CostBenefit,
            gc_node_penalty: true,
            gc_window: 0,
            gc_batch: uf2fs_engine::DEFAULT_GC_BATCH,
            gc_pace: true,
            direct_writes: true,
            write_behind: true,
            listing_readahead: true,
            checkpoint_merge: true,
            dentry_cache: true,
            mode: AllocMode::Adaptive,
            ipu: IpuPolicy::Fsync,
            data_temp: DataTemp::Age,
            cp_interval: DEFAULT_CP_INTERVAL,
            fsync_mode: FsyncMode::Posix,
            inline_data: true,
            inline_dentry: true,
            inline_xattr: true,
            atime: Atime::Relatime,
            log: LogChoice::Auto,
            cache_bytes: uf2fs_engine::DEFAULT_CACHE_BYTES,
            cache_size_given: false,
            threads: DEFAULT_THREADS,
            max_background: DEFAULT_MAX_BACKGROUND,
            writeback_cache: true,
            io_uring: true,
            io_uring_yield: true,
            flags: Vec::new(),
            devices: Vec::new(),
            compress: CompressOptions::default(),
        }
    }
}

/// Generic mount flags accepted and handed to the kernel as they are.
const GENERIC: &[&str] = &[
    "dev",
    "nodev",
    "suid",
    "nosuid",
    "exec",
    "noexec",
    "atime",
    "noatime",
    "relatime",
    "norelatime",
    "strictatime",
    "nodiratime",
    "diratime",
    "sync",
    "async",
    "dirsync",
];

/// Options mount(8) passes to every helper that mean nothing to a FUSE file system.
const IGNORED: &[&str] = &[
    "defaults", "auto", "noauto", "user", "nouser", "users", "_netdev", "nofail",
];

impl MountOptions {
    /// Parses option lists as given to `-o` (each comma-separated; later ones win).
    pub fn parse<S: AsRef<str>>(lists: &[S]) -> Result<MountOptions, String> {
        let mut o = MountOptions::default();
        for list in lists {
            for opt in list.as_ref().split(',').filter(|s| !s.is_empty()) {
                o.apply(opt)?;
            }
        }
        o.check_cache_size(o.threads)?;
        Ok(o)
    }

    /// Checks `cache_size` against the daemon's own buffers for `serving` request threads.
    /// With more threads than the default's, a default `cache_size` grows by their buffers
    /// (the caches keep their default share); a size the user gave is never changed.
    pub fn check_cache_size(&mut self, serving: usize) -> Result<(), String> {
        if !self.cache_size_given {
            let caches = uf2fs_engine::DEFAULT_CACHE_BYTES - daemon_own_bytes(DEFAULT_THREADS);
            self.cache_bytes =
                uf2fs_engine::DEFAULT_CACHE_BYTES.max(daemon_own_bytes(serving) + caches);
            return Ok(());
        }
        let least = daemon_own_bytes(serving) + uf2fs_engine::MIN_CACHE_BYTES;
        if self.cache_bytes >= least {
            return Ok(());
        }
        Err(format!(
            "cache_size={}M is too small (at least {}M with {serving} request threads: {}M \
             for the daemon's request buffers, {}M for the caches)",
            self.cache_bytes >> 20,
            least.div_ceil(1 << 20),
            daemon_own_bytes(serving) >> 20,
            uf2fs_engine::MIN_CACHE_BYTES >> 20
        ))
    }

    /// What `cache_size` leaves the engine (its caches and dirty nodes) once the daemon's own
    /// buffers for `serving` request threads are counted.
    pub fn engine_cache_bytes(&self, serving: usize) -> u64 {
        self.cache_bytes
            .saturating_sub(daemon_own_bytes(serving))
            .max(uf2fs_engine::MIN_CACHE_BYTES)
    }

    fn apply(&mut self, opt: &str) -> Result<(), String> {
        let (key, value) = match opt.split_once('=') {
            Some((k, v)) => (k, Some(v)),
            None => (opt, None),
        };
        let bad_value = |v: &str, allowed: &str| {
            Err(format!(
                "bad value '{v}' for mount option {key} (allowed: {allowed})"
            ))
        };
        match (key, value) {
            ("ro", None) => self.read_only = true,
            ("rw", None) => self.read_only = false,
            ("allow_other", None) => self.access = Access::All,
            ("allow_root", None) => self.access = Access::OwnerAndRoot,
            ("default_permissions", None) => self.default_permissions = true,
            ("background_gc", Some(v)) => {
                self.background_gc = match v {
                    "on" => BackgroundGc::On,
                    "off" => BackgroundGc::Off,
                    "sync" => BackgroundGc::Sync,
                    _ => return bad_value(v, "on, off, sync"),
                }
            }
            ("gc_policy", Some(v)) => {
                self.gc_policy = match GcPolicy::parse(v) {
                    Some(p) => p,
                    None => return bad_value(v, "greedy, cost-benefit, age-threshold"),
                }
            }
            ("gc_node_penalty", Some(v)) => {
                self.gc_node_penalty = match v {
                    "on" => true,
                    "off" => false,
                    _ => return bad_value(v, "on, off"),
                }
            }
            ("log", Some(v)) => {
                self.log = match v {
                    "auto" => LogChoice::Auto,
                    "journald" => LogChoice::Journald,
                    "syslog" => LogChoice::Syslog,
                    "file" => LogChoice::File,
                    _ => return bad_value(v, "auto, journald, syslog, file"),
                }
            }
            ("cache_size", Some(v)) => {
                self.cache_size_given = true;
                self.cache_bytes = match parse_size(v) {
                    Some(b) => b,
                    None => return bad_value(v, "a size such as 64M, 256M or 1G"),
                }
            }
            ("ipu", Some(v)) => {
                self.ipu = match v {
                    "fsync" => IpuPolicy::Fsync,
                    "force" => IpuPolicy::Force,
                    "off" => IpuPolicy::Off,
                    _ => return bad_value(v, "fsync, force, off"),
                }
            }
            ("data_temp", Some(v)) => {
                self.data_temp = match v {
                    "age" => DataTemp::Age,
                    "off" => DataTemp::Off,
                    _ => return bad_value(v, "age, off"),
                }
            }
            ("cp_interval", Some(v)) => {
                self.cp_interval = match v.parse::<u64>() {
                    Ok(n) if n <= 86_400 => n,
                    _ => return bad_value(v, "seconds from 0 (never) to 86400"),
                }
            }
            ("gc_batch", Some(v)) => {
                self.gc_batch = match v.parse::<u32>() {
                    Ok(n) if (1..=64).contains(&n) => n,
                    _ => return bad_value(v, "a number of sections from 1 to 64"),
                }
            }
            ("gc_pace", Some(v)) => {
                self.gc_pace = match v {
                    "on" => true,
                    "off" => false,
                    _ => return bad_value(v, "on, off"),
                }
            }
            ("direct_writes", Some(v)) => {
                self.direct_writes = match v {
                    "on" => true,
                    "off" => false,
                    _ => return bad_value(v, "on, off"),
                }
            }
            ("write_behind", Some(v)) => {
                self.write_behind = match v {
                    "on" => true,
                    "off" => false,
                    _ => return bad_value(v, "on, off"),
                }
            }
            ("listing_readahead", Some(v)) => {
                self.listing_readahead = match v {
                    "on" => true,
                    "off" => false,
                    _ => return bad_value(v, "on, off"),
                }
            }
            ("gc_window", Some(v)) => {
                self.gc_window = match v.parse::<u32>() {
                    Ok(n) => n,
                    _ => return bad_value(v, "a number of sections (0: the exact index)"),
                }
            }
            ("threads", Some(v)) => {
                self.threads = match v.parse::<usize>() {
                    Ok(n) if (1..=64).contains(&n) => n,
                    _ => return bad_value(v, "a number of threads from 1 to 64"),
                }
            }
            ("max_background", Some(v)) => {
                self.max_background = match v.parse::<u16>() {
                    Ok(n) if (1..=1024).contains(&n) => n,
                    _ => return bad_value(v, "a number of requests from 1 to 1024"),
                }
            }
            ("device", Some("")) => {
                return Err("mount option device needs a value (device=PATH)".into())
            }
            ("device", Some(v)) => self.devices.push(v.into()),
            ("compress_algorithm", Some(v)) => {
                let (name, level) = match v.split_once(':') {
                    Some((n, l)) => (n, Some(l)),
                    None => (v, None),
                };
                let (algorithm, levels) = match name {
                    "lzo" => (Algorithm::Lzo, None),
                    "lz4" => (Algorithm::Lz4, Some(3..=16u8)),
                    "zstd" => (Algorithm::Zstd, Some(1..=22u8)),
                    "lzo-rle" => (Algorithm::LzoRle, None),
                    _ => return bad_value(v, "lzo, lz4, lz4:3..16, zstd, zstd:1..22, lzo-rle"),
                };
                let level = match (level, levels) {
                    (None, _) => 0,
                    (Some(l), Some(r)) => match l.parse::<u8>() {
                        Ok(n) if r.contains(&n) => n,
                        _ => return bad_value(v, "lz4:3..16, zstd:1..22"),
                    },
                    (Some(_), None) => return bad_value(v, "a level only for lz4 and zstd"),
                };
                self.compress.algorithm = algorithm;
                self.compress.level = level;
            }
            ("compress_log_size", Some(v)) => {
                self.compress.log_cluster_size = match v.parse::<u8>() {
                    Ok(n) if (MIN_LOG_CLUSTER_SIZE..=MAX_LOG_CLUSTER_SIZE).contains(&n) => n,
                    _ => return bad_value(v, "2 to 8 (clusters of 4 to 256 blocks)"),
                }
            }
            ("compress_extension", Some(v)) => self
                .compress
                .extensions
                .push(v)
                .map_err(|e| format!("mount option compress_extension: {e}"))?,
            ("nocompress_extension", Some(v)) => self
                .compress
                .no_extensions
                .push(v)
                .map_err(|e| format!("mount option nocompress_extension: {e}"))?,
            ("compress_mode", Some(v)) => {
                self.compress.user_mode = match v {
                    "fs" => false,
                    "user" => true,
                    _ => return bad_value(v, "fs, user"),
                }
            }
            ("compress_chksum", None) => self.compress.checksum = true,
            // Linux's cache of compressed pages; nothing on disk depends on it.
            ("compress_cache", None) => {}
            ("checkpoint_merge", None) => self.checkpoint_merge = true,
            ("nocheckpoint_merge", None) => self.checkpoint_merge = false,
            ("dentry_cache", None) => self.dentry_cache = true,
            ("nodentry_cache", None) => self.dentry_cache = false,
            ("writeback_cache", None) => self.writeback_cache = true,
            ("nowriteback_cache", None) => self.writeback_cache = false,
            ("io_uring", None) => self.io_uring = true,
            ("noio_uring", None) => self.io_uring = false,
            ("io_uring_yield", None) => self.io_uring_yield = true,
            ("noio_uring_yield", None) => self.io_uring_yield = false,
            ("mode", Some(v)) => {
                self.mode = match v {
                    "adaptive" => AllocMode::Adaptive,
                    "lfs" => AllocMode::Lfs,
                    _ => return bad_value(v, "adaptive, lfs"),
                }
            }
            ("fsync_mode", Some(v)) => {
                self.fsync_mode = match v {
                    "posix" => FsyncMode::Posix,
                    "strict" => FsyncMode::Strict,
                    "nobarrier" => FsyncMode::Nobarrier,
                    _ => return bad_value(v, "posix, strict, nobarrier"),
                }
            }
            ("inline_data", None) => self.inline_data = true,
            ("noinline_data", None) => self.inline_data = false,
            ("inline_dentry", None) => self.inline_dentry = true,
            ("noinline_dentry", None) => self.inline_dentry = false,
            ("inline_xattr", None) => self.inline_xattr = true,
            ("noinline_xattr", None) => {
                return Err("mount option noinline_xattr is not supported yet \
                            (new inodes always get an inline xattr area)"
                    .into())
            }
            ("noatime", None) => self.atime = Atime::Noatime,
            ("relatime" | "atime", None) => self.atime = Atime::Relatime,
            ("strictatime" | "norelatime", None) => self.atime = Atime::Strictatime,
            ("nodiratime" | "diratime" | "lazytime" | "nolazytime", None) => {}
            (k, None) if GENERIC.contains(&k) => self.flags.push(k.to_string()),
            (k, None) if IGNORED.contains(&k) => {}
            (
                "ro"
                | "rw"
                | "allow_other"
                | "allow_root"
                | "default_permissions"
                | "checkpoint_merge"
                | "nocheckpoint_merge"
                | "dentry_cache"
                | "nodentry_cache"
                | "writeback_cache"
                | "nowriteback_cache"
                | "io_uring"
                | "noio_uring"
                | "io_uring_yield"
                | "noio_uring_yield"
                | "inline_data"
                | "noinline_data"
                | "inline_dentry"
                | "noinline_dentry"
                | "inline_xattr"
                | "compress_chksum"
                | "compress_cache",
                Some(_),
            ) => return Err(format!("mount option {key} takes no value")),
            (
                "background_gc"
                | "mode"
                | "fsync_mode"
                | "gc_policy"
                | "gc_node_penalty"
                | "log"
                | "cache_size"
                | "threads"
                | "max_background"
                | "gc_window"
                | "gc_batch"
                | "gc_pace"
                | "direct_writes"
                | "write_behind"
                | "listing_readahead"
                | "ipu"
                | "data_temp"
                | "cp_interval"
                | "device"
                | "compress_algorithm"
                | "compress_log_size"
                | "compress_extension"
                | "nocompress_extension"
                | "compress_mode",
                None,
            ) => return Err(format!("mount option {key} needs a value ({key}=...)")),
            _ => return Err(format!("unknown mount option '{opt}'")),
        }
        Ok(())
    }
}

/// Linux's `cp_interval` default: a checkpoint at most a minute after an unsynced change.
pub const DEFAULT_CP_INTERVAL: u64 = 60;

/// Request-handling threads unless `threads=` says otherwise (see docs/design.md, "The I/O
/// path", for the measurements behind it).
pub const DEFAULT_THREADS: usize = 4;

/// Asynchronous requests in flight unless `max_background=` says otherwise.
pub const DEFAULT_MAX_BACKGROUND: u16 = 12;

/// A size with an optional K, M or G suffix (powers of 1024); plain digits are bytes.
fn parse_size(v: &str) -> Option<u64> {
    let (digits, shift) = match v.as_bytes().last()? {
        b'k' | b'K' => (&v[..v.len() - 1], 10),
        b'm' | b'M' => (&v[..v.len() - 1], 20),
        b'g' | b'G' => (&v[..v.len() - 1], 30),
        _ => (v, 0),
    };
    digits.parse::<u64>().ok()?.checked_mul(1 << shift)
}

/// What the daemon keeps for itself out of `cache_size` with `serving` request threads: its
/// code and stacks and the pool of 1 MiB run buffers that large writes reuse (16 MiB with
/// both), and per thread a 1 MiB buffer for requests (or an io_uring entry's payload), one
/// for READ replies and the 256 KiB a READDIRPLUS reads its entries' inodes into (the
/// engine's prefetch buffer, kept by each thread that lists). Measured: a fresh daemon is
/// 6-7 MiB resident, and a 1 GiB sequential write with four threads peaked at 20-23 MiB
/// (docs/design.md, "The daemon's memory").
pub fn daemon_own_bytes(serving: usize) -> u64 {
    (16 << 20) + serving as u64 * ((2 << 20) + uf2fs_engine::PREFETCH_BUFFER_BYTES)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    #[test]
    fn compress_options_parse_as_linux_spells_them() {
        let o = MountOptions::parse(&[
            "compress_algorithm=zstd:7,compress_log_size=5,compress_extension=txt,\
             compress_extension=*,nocompress_extension=jpg,compress_chksum,compress_mode=user,\
             compress_cache",
        ])
        .unwrap();
        let c = o.compress;
        assert_eq!(
            (c.algorithm, c.level, c.log_cluster_size),
            (Algorithm::Zstd, 7, 5)
        );
        assert!(c.checksum && c.user_mode);
        assert!(c.extensions.matches(b"a.TXT") && c.extensions.matches(b"x"));
        assert!(c.no_extensions.matches(b"p.jpg") && !c.no_extensions.matches(b".jpg"));
        let d = MountOptions::parse::<&str>(&[]).unwrap().compress;
        assert_eq!(
            (d.algorithm, d.level, d.log_cluster_size),
            (Algorithm::Lz4, 0, 2)
        );
        for bad in [
            "compress_algorithm=lz5",
            "compress_algorithm=lzo:3",
            "compress_algorithm=zstd:23",
            "compress_algorithm=lz4:2",
            "compress_log_size=9",
            "compress_log_size=1",
            "compress_extension=toolongext",
            "compress_mode=auto",
            "compress_chksum=1",
            "compress_algorithm",
        ] {
            assert!(MountOptions::parse(&[bad]).is_err(), "{bad} accepted");
        }
        let many: Vec<String> = (0..17)
            .map(|i| format!("compress_extension=e{i}"))
            .collect();
        assert!(
            MountOptions::parse(&many).is_err(),
            "17 extensions accepted"
        );
    }

    #[test]
    fn defaults_are_the_kernels() {
        let o = MountOptions::parse::<&str>(&[]).unwrap();
        assert!(o.checkpoint_merge && o.inline_data && o.inline_dentry && !o.read_only);
        assert!(o.dentry_cache);
        assert_eq!(o.background_gc, BackgroundGc::On);
        assert_eq!(o.mode, AllocMode::Adaptive);
        assert_eq!(o.fsync_mode, FsyncMode::Posix);
    }

    #[test]
    fn data_temp_is_age_unless_turned_off() {
        let d = MountOptions::parse::<&str>(&[]).unwrap();
        assert_eq!(d.data_temp, DataTemp::Age);
        let o = MountOptions::parse(&["data_temp=off"]).unwrap();
        assert_eq!(o.data_temp, DataTemp::Off);
        for bad in ["data_temp=hot", "data_temp"] {
            assert!(MountOptions::parse(&[bad]).is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn options_parse_and_later_ones_win() {
        let o = MountOptions::parse(&[
            "ro,allow_other,nocheckpoint_merge,nodentry_cache",
            "fsync_mode=strict,mode=lfs,noinline_data,noatime,rw,defaults,log=syslog",
        ])
        .unwrap();
        assert!(!o.read_only && !o.checkpoint_merge && !o.inline_data && !o.dentry_cache);
        assert_eq!(o.access, Access::All);
        assert_eq!(o.fsync_mode, FsyncMode::Strict);
        assert_eq!(o.mode, AllocMode::Lfs);
        assert_eq!(o.atime, Atime::Noatime);
        assert_eq!(o.log, LogChoice::Syslog);
        assert!(o.flags.is_empty());
    }

    #[test]
    fn bad_options_are_refused_by_name() {
        for (opt, says) in [
            ("discard_all", "unknown mount option 'discard_all'"),
            (
                "fsync_mode=fast",
                "bad value 'fast' for mount option fsync_mode",
            ),
            ("mode", "needs a value"),
            ("ro=1", "takes no value"),
            ("log=console", "bad value 'console' for mount option log"),
            ("noinline_xattr", "not supported yet"),
            ("device", "needs a value"),
            ("device=", "needs a value"),
        ] {
            let e = MountOptions::parse(&[opt]).unwrap_err();
            assert!(e.contains(says), "{opt}: {e}");
        }
    }

    #[test]
    fn devices_are_kept_in_order() {
        let o = MountOptions::parse(&["device=/dev/b,ro", "device=/srv/c.img"]).unwrap();
        assert_eq!(
            o.devices,
            vec![
                std::path::PathBuf::from("/dev/b"),
                std::path::PathBuf::from("/srv/c.img")
            ]
        );
        assert!(o.read_only);
    }

    #[test]
    fn cache_size_takes_a_size_and_refuses_too_little() {
        assert_eq!(
            MountOptions::parse::<&str>(&[]).unwrap().cache_bytes,
            uf2fs_engine::DEFAULT_CACHE_BYTES
        );
        for (v, bytes) in [
            ("48M", 48u64 << 20),
            ("1g", 1 << 30),
            ("33554432", 32 << 20),
        ] {
            let o = MountOptions::parse(&[format!("cache_size={v}")]).unwrap();
            assert_eq!(o.cache_bytes, bytes, "{v}");
            // The engine gets what the daemon's own buffers leave.
            assert_eq!(o.engine_cache_bytes(4), bytes - daemon_own_bytes(4), "{v}");
        }
        let e = MountOptions::parse(&["cache_size=16M"]).unwrap_err();
        assert!(e.contains("too small") && e.contains("at least 29M"), "{e}");
        // More threads, more buffers: the least grows with them, in either order.
        assert!(MountOptions::parse(&["cache_size=29M"]).is_ok());
        let e = MountOptions::parse(&["cache_size=29M,threads=8"]).unwrap_err();
        assert!(e.contains("8 request threads"), "{e}");
        assert!(MountOptions::parse(&["threads=8", "cache_size=38M"]).is_ok());
        // A default grows by the buffers of more threads, keeping the caches' share; a size
        // the user gave is refused instead.
        let mut o = MountOptions::parse(&["threads=64"]).unwrap();
        let caches = uf2fs_engine::DEFAULT_CACHE_BYTES - daemon_own_bytes(DEFAULT_THREADS);
        assert_eq!(o.engine_cache_bytes(64), caches);
        assert!(o.check_cache_size(64).is_ok());
        let mut given = MountOptions::parse(&["cache_size=64M"]).unwrap();
        assert!(given.check_cache_size(64).is_err());
        let e = MountOptions::parse(&["cache_size=lots"]).unwrap_err();
        assert!(e.contains("cache_size"), "{e}");
        let e = MountOptions::parse(&["cache_size"]).unwrap_err();
        assert!(e.contains("needs a value"), "{e}");
    }

    #[test]
    fn write_behind_is_on_unless_turned_off() {
        assert!(MountOptions::parse::<&str>(&[]).unwrap().write_behind);
        assert!(
            !MountOptions::parse(&["write_behind=off"])
                .unwrap()
                .write_behind
        );
        for bad in ["write_behind=yes", "write_behind"] {
            assert!(MountOptions::parse(&[bad]).is_err(), "{bad}");
        }
    }

    #[test]
    fn listing_readahead_is_on_unless_turned_off() {
        assert!(MountOptions::parse::<&str>(&[]).unwrap().listing_readahead);
        assert!(
            !MountOptions::parse(&["listing_readahead=off"])
                .unwrap()
                .listing_readahead
        );
        assert!(MountOptions::parse(&["listing_readahead=1"]).is_err());
    }

    #[test]
    fn direct_writes_are_on_unless_turned_off() {
        assert!(MountOptions::parse::<&str>(&[]).unwrap().direct_writes);
        assert!(
            !MountOptions::parse(&["direct_writes=off"])
                .unwrap()
                .direct_writes
        );
        for bad in ["direct_writes=yes", "direct_writes"] {
            assert!(MountOptions::parse(&[bad]).is_err(), "{bad}");
        }
    }

    #[test]
    fn gc_pace_is_on_unless_turned_off() {
        assert!(MountOptions::parse::<&str>(&[]).unwrap().gc_pace);
        assert!(!MountOptions::parse(&["gc_pace=off"]).unwrap().gc_pace);
        for bad in ["gc_pace=maybe", "gc_pace"] {
            assert!(MountOptions::parse(&[bad]).is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn max_background_takes_a_count_from_1_to_1024() {
        assert_eq!(MountOptions::parse::<&str>(&[]).unwrap().max_background, 12);
        assert_eq!(
            MountOptions::parse(&["max_background=64"])
                .unwrap()
                .max_background,
            64
        );
        for bad in [
            "max_background=0",
            "max_background=1025",
            "max_background=x",
        ] {
            let e = MountOptions::parse(&[bad]).unwrap_err();
            assert!(e.contains("max_background"), "{bad}: {e}");
        }
        assert!(MountOptions::parse(&["max_background"])
            .unwrap_err()
            .contains("needs a value"));
    }

    #[test]
    fn threads_take_a_count_from_1_to_64() {
        assert_eq!(
            MountOptions::parse::<&str>(&[]).unwrap().threads,
            DEFAULT_THREADS
        );
        assert_eq!(MountOptions::parse(&["threads=8"]).unwrap().threads, 8);
        for bad in ["threads=0", "threads=65", "threads=many"] {
            let e = MountOptions::parse(&[bad]).unwrap_err();
            assert!(e.contains("threads"), "{bad}: {e}");
        }
    }
}
