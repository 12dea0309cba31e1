//! uf2fs: requests served by a session, counted by opcode (`Session::request_counts`), so
//! that a daemon can show how many round trips a workload cost it and of which kind, and how
//! long it took over them (from dispatch to the handler's return, the reply sent).

use std::sync::atomic::{AtomicU64, Ordering};

/// Opcodes from this one up are counted together (as "OPCODE_64_AND_ABOVE").
const TRACKED: usize = 64;

/// Requests dispatched so far, by opcode.
#[derive(Debug)]
pub struct RequestCounts {
    by_op: [AtomicU64; TRACKED + 1],
    ns_by_op: [AtomicU64; TRACKED + 1],
}

impl Default for RequestCounts {
    fn default() -> Self {
        RequestCounts {
            by_op: std::array::from_fn(|_| AtomicU64::new(0)),
            ns_by_op: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

impl RequestCounts {
    pub(crate) fn note(&self, opcode: u32) {
        let at = (opcode as usize).min(TRACKED);
        if let Some(c) = self.by_op.get(at) {
            c.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub(crate) fn served(&self, opcode: u32, took: std::time::Duration) {
        let at = (opcode as usize).min(TRACKED);
        if let Some(c) = self.ns_by_op.get(at) {
            c.fetch_add(took.as_nanos() as u64, Ordering::Relaxed);
        }
    }

    /// Microseconds spent serving each kind of request served at least once, by opcode
    /// (named as in `snapshot`).
    pub fn time_snapshot(&self) -> Vec<(String, u64)> {
        served_at_least_once(&self.ns_by_op, 1000)
    }

    /// Every kind of request served at least once, with its count, by opcode: the kernel's
    /// name without `FUSE_`, or `OPCODE_<n>` for one this list does not name.
    pub fn snapshot(&self) -> Vec<(String, u64)> {
        served_at_least_once(&self.by_op, 1)
    }
}

/// The non-zero figures of a per-opcode table, named, each divided by `unit`.
fn served_at_least_once(by_op: &[AtomicU64], unit: u64) -> Vec<(String, u64)> {
    by_op
        .iter()
        .enumerate()
        .filter_map(|(op, c)| {
            let n = c.load(Ordering::Relaxed);
            (n > 0).then(|| (name(op as u32), n / unit))
        })
        .collect()
}

/// The kernel's name for an opcode, without its `FUSE_` prefix.
fn name(opcode: u32) -> String {
    let known = match opcode {
        1 => "LOOKUP",
        2 => "FORGET",
        3 => "GETATTR",
        4 => "SETATTR",
        5 => "READLINK",
        6 => "SYMLINK",
        8 => "MKNOD",
        9 => "MKDIR",
        10 => "UNLINK",
        11 => "RMDIR",
        12 => "RENAME",
        13 => "LINK",
        14 => "OPEN",
        15 => "READ",
        16 => "WRITE",
        17 => "STATFS",
        18 => "RELEASE",
        20 => "FSYNC",
        21 => "SETXATTR",
        22 => "GETXATTR",
        23 => "LISTXATTR",
        24 => "REMOVEXATTR",
        25 => "FLUSH",
        26 => "INIT",
        27 => "OPENDIR",
        28 => "READDIR",
        29 => "RELEASEDIR",
        30 => "FSYNCDIR",
        31 => "GETLK",
        32 => "SETLK",
        33 => "SETLKW",
        34 => "ACCESS",
        35 => "CREATE",
        36 => "INTERRUPT",
        37 => "BMAP",
        38 => "DESTROY",
        39 => "IOCTL",
        40 => "POLL",
        41 => "NOTIFY_REPLY",
        42 => "BATCH_FORGET",
        43 => "FALLOCATE",
        44 => "READDIRPLUS",
        45 => "RENAME2",
        46 => "LSEEK",
        47 => "COPY_FILE_RANGE",
        48 => "SETUPMAPPING",
        49 => "REMOVEMAPPING",
        50 => "SYNCFS",
        51 => "TMPFILE",
        52 => "STATX",
        n if n as usize >= TRACKED => "OPCODE_64_AND_ABOVE",
        n => return format!("OPCODE_{n}"),
    };
    known.to_string()
}
