//! The control socket of a live mount, and its client.
//!
//! One line in, answers out: `status` (a JSON line), `sync` (a checkpoint), `unmount` (the
//! answer comes when the daemon has written its final checkpoint and is about to exit, so a
//! caller can run fsck right after). The socket lives in a per-user runtime directory under a
//! name derived from the mount point's canonical path.

use crate::MountStatus;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, SystemTime};
use uf2fs_engine::Fs;

pub struct ControlPaths {
    pub socket: PathBuf,
    pub log: PathBuf,
}

/// The runtime directory of this user: /run/uf2fs for root, else $XDG_RUNTIME_DIR/uf2fs or
/// /tmp/uf2fs-UID, made private to the user.
fn runtime_dir() -> Result<PathBuf, String> {
    let uid = rustix::process::getuid();
    let dir = if uid.is_root() {
        PathBuf::from("/run/uf2fs")
    } else if let Some(x) = std::env::var_os("XDG_RUNTIME_DIR").filter(|x| !x.is_empty()) {
        PathBuf::from(x).join("uf2fs")
    } else {
        PathBuf::from(format!("/tmp/uf2fs-{}", uid.as_raw()))
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .map_err(|e| format!("runtime directory {}: {e}", dir.display()))?;
    Ok(dir)
}

/// The control socket and log file of the mount at `mountpoint` (a canonical path).
pub fn control_paths(mountpoint: &Path) -> Result<ControlPaths, String> {
    // FNV-1a of the path: short, stable, and the same in the daemon and the client.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in mountpoint.as_os_str().as_bytes() {
        h = (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
    }
    let dir = runtime_dir()?;
    Ok(ControlPaths {
        socket: dir.join(format!("{h:016x}.sock")),
        log: dir.join(format!("{h:016x}.log")),
    })
}

/// Binds the socket; one left by a daemon that died is replaced, a live one refuses.
pub(crate) fn bind(socket: &Path, mountpoint: &Path) -> Result<UnixListener, String> {
    if socket.exists() {
        if listening(socket) == Some(true) {
            return Err(format!(
                "{} is already served by a uf2fs daemon",
                mountpoint.display()
            ));
        }
        let _ = std::fs::remove_file(socket);
    }
    let l = UnixListener::bind(socket)
        .map_err(|e| format!("control socket {}: {e}", socket.display()))?;
    let _ = std::fs::set_permissions(socket, std::fs::Permissions::from_mode(0o600));
    Ok(l)
}

/// The log of a mount that is gone is kept this long after its last line...
const LOG_KEPT_FOR: Duration = Duration::from_secs(7 * 24 * 3600);
/// ...and only among this many such logs, the newest.
const LOGS_KEPT: usize = 256;

/// What `prune` removed.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Pruned {
    pub sockets: usize,
    pub logs: usize,
}

/// Clears what mounts that are gone left in the runtime directory `dir`: each mount point
/// ever mounted leaves a log there (kept on purpose: a dead daemon's last lines stay
/// readable), and a daemon that was killed leaves its socket. Removed: sockets nobody listens
/// on, and the logs (with their rotated copies) of mounts without a live socket once their
/// last line is `LOG_KEPT_FOR` old or they are beyond the newest `LOGS_KEPT`. The files of the
/// mount named `own` (the caller's socket stem) and of every live mount stay. Best effort:
/// what cannot be read or removed is left as it is.
pub(crate) fn prune(dir: &Path, own: &str, now: SystemTime) -> Pruned {
    use std::collections::BTreeMap;
    let mut done = Pruned::default();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return done;
    };
    // stem -> (socket, logs with their modification times)
    type Files = (Option<PathBuf>, Vec<(PathBuf, SystemTime)>);
    let mut by_stem: BTreeMap<String, Files> = BTreeMap::new();
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let (stem, is_socket) = if let Some(st) = name.strip_suffix(".sock") {
            (st, true)
        } else if let Some(st) = name
            .strip_suffix(".log")
            .or_else(|| name.strip_suffix(".log.old"))
        {
            (st, false)
        } else {
            continue;
        };
        // Only our own names: sixteen hex digits.
        if stem == own || stem.len() != 16 || !stem.bytes().all(|b| b.is_ascii_hexdigit()) {
            continue;
        }
        let entry = by_stem.entry(stem.to_string()).or_default();
        if is_socket {
            entry.0 = Some(e.path());
        } else if let Ok(m) = e.metadata().and_then(|m| m.modified()) {
            entry.1.push((e.path(), m));
        }
    }
    let mut gone: Vec<(PathBuf, SystemTime)> = Vec::new();
    for (socket, logs) in by_stem.into_values() {
        if let Some(socket) = socket {
            if listening(&socket) != Some(false) {
                continue;
            }
            if std::fs::remove_file(&socket).is_ok() {
                done.sockets += 1;
            }
        }
        gone.extend(logs);
    }
    gone.sort_by_key(|g| std::cmp::Reverse(g.1));
    for (i, (path, modified)) in gone.into_iter().enumerate() {
        let old = now.duration_since(modified).unwrap_or_default() > LOG_KEPT_FOR;
        if (old || i >= LOGS_KEPT) && std::fs::remove_file(&path).is_ok() {
            done.logs += 1;
        }
    }
    done
}

/// Whether a daemon listens on the socket file at `path`: yes if a connect is taken or its
/// queue is full (alive but busy), no if it is refused or the file is gone, unknown (`None`)
/// on any other error. Never waits: the connect does not block.
fn listening(path: &Path) -> Option<bool> {
    use rustix::io::Errno;
    use rustix::net::{AddressFamily, SocketAddrUnix, SocketFlags, SocketType};
    let addr = SocketAddrUnix::new(path).ok()?;
    let fd = rustix::net::socket_with(
        AddressFamily::UNIX,
        SocketType::STREAM,
        SocketFlags::NONBLOCK | SocketFlags::CLOEXEC,
        None,
    )
    .ok()?;
    match rustix::net::connect(&fd, &addr) {
        Ok(()) | Err(Errno::AGAIN | Errno::INPROGRESS) => Some(true),
        Err(Errno::CONNREFUSED | Errno::NOENT) => Some(false),
        Err(_) => None,
    }
}

/// Callers of `unmount`, answered when the daemon is done.
#[derive(Clone, Default)]
pub(crate) struct Waiters(Arc<Mutex<Vec<UnixStream>>>);

impl Waiters {
    fn add(&self, s: UnixStream) {
        if let Ok(mut v) = self.0.lock() {
            v.push(s);
        }
    }

    pub(crate) fn finish(&self, outcome: &Result<(), String>) {
        let line = match outcome {
            Ok(()) => "done\n".to_string(),
            Err(e) => format!("error: {e}\n"),
        };
        if let Ok(mut v) = self.0.lock() {
            for mut s in v.drain(..) {
                let _ = s.write_all(line.as_bytes());
            }
        }
    }
}

type StatusFn = dyn Fn() -> Result<MountStatus, String> + Send + Sync;

pub(crate) fn spawn(
    listener: UnixListener,
    fs: Weak<Fs>,
    status: Arc<StatusFn>,
    unmounter: Arc<Unmounter>,
    waiters: Waiters,
) {
    let _ = std::thread::Builder::new()
        .name("uf2fs-control".into())
        .spawn(move || {
            for conn in listener.incoming().flatten() {
                let (fs, status, unmounter, waiters) = (
                    fs.clone(),
                    status.clone(),
                    unmounter.clone(),
                    waiters.clone(),
                );
                // One thread per caller: a slow status (a big SIT) holds up no one else.
                let _ = std::thread::Builder::new()
                    .name("uf2fs-control-conn".into())
                    .spawn(move || answer(conn, &fs, &*status, &unmounter, &waiters));
            }
        });
}

fn answer(
    conn: UnixStream,
    fs: &Weak<Fs>,
    status: &StatusFn,
    unmounter: &Unmounter,
    waiters: &Waiters,
) {
    let mut line = String::new();
    let Ok(mut w) = conn.try_clone() else { return };
    // Requests are one short word: a caller cannot make the daemon buffer more than this.
    if BufReader::new(std::io::Read::take(&conn, 64))
        .read_line(&mut line)
        .is_err()
    {
        return;
    }
    let reply = match line.trim() {
        "status" => {
            match status().and_then(|s| serde_json::to_string(&s).map_err(|e| e.to_string())) {
                Ok(j) => j,
                Err(e) => format!("error: {e}"),
            }
        }
        "sync" => match fs.upgrade().map(|fs| fs.sync()) {
            Some(Ok(())) => "ok".into(),
            Some(Err(e)) => format!("error: {e}"),
            None => "error: the volume is being unmounted".into(),
        },
        gc if gc.starts_with("gc ") => {
            let n = gc.trim_start_matches("gc ").trim().parse::<u32>();
            match (n, fs.upgrade()) {
                (Err(_), _) => "error: gc takes a section count".into(),
                (Ok(n), Some(fs)) => match fs.gc(n) {
                    Ok(done) => format!("ok {done}"),
                    Err(e) => format!("error: {e}"),
                },
                (_, None) => "error: the volume is being unmounted".into(),
            }
        }
        "unmount" => {
            waiters.add(conn);
            if let Err(e) = unmount(unmounter) {
                let _ = writeln!(w, "error: {e}");
            }
            return;
        }
        other => format!("error: unknown request '{other}'"),
    };
    let _ = writeln!(w, "{reply}");
}

fn unmount(unmounter: &Unmounter) -> Result<(), String> {
    unmounter.unmount()
}

/// Ends the mount, which ends the FUSE session (and so the daemon, after its final
/// checkpoint). Our own rather than fuser's `SessionUnmounter`, which forgets the mount on
/// its first attempt: after a refused unmount (a busy mount point), every later request would
/// do nothing and its caller would wait forever.
pub(crate) struct Unmounter {
    mountpoint: std::path::PathBuf,
}

impl Unmounter {
    pub(crate) fn new(mountpoint: &Path) -> Unmounter {
        Unmounter {
            mountpoint: mountpoint.to_path_buf(),
        }
    }

    /// umount(2) when we may (root), else `fusermount3 -u`, as fuser does; never lazy, so a
    /// busy mount point is refused with a message and can be asked again.
    pub(crate) fn unmount(&self) -> Result<(), String> {
        use rustix::io::Errno;
        let mp = self.mountpoint.display();
        // The kernel keeps the mount busy until the daemon has answered the RELEASE of every
        // file closed (it sends them in the background): a program that closed its last file
        // and asks at once meets EBUSY for a moment. Asked again for up to 150 ms: longer,
        // and a refused unmount (a process really in the mount) could still happen after its
        // caller was told "busy", once that process left.
        let mut tries = 0;
        let tried = loop {
            match rustix::mount::unmount(&self.mountpoint, rustix::mount::UnmountFlags::empty()) {
                Err(Errno::BUSY) if tries < 15 => {
                    tries += 1;
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                r => break r,
            }
        };
        match tried {
            Ok(()) => Ok(()),
            Err(Errno::BUSY) => Err(format!(
                "{mp} is busy (a process has a file open or its working directory there); \
                 close them and unmount again"
            )),
            Err(Errno::PERM) => {
                let out = std::process::Command::new("fusermount3")
                    .arg("-u")
                    .arg("--")
                    .arg(&self.mountpoint)
                    .output()
                    .map_err(|e| format!("running fusermount3 -u {mp}: {e}"))?;
                if out.status.success() {
                    Ok(())
                } else {
                    Err(format!(
                        "fusermount3 -u {mp}: {}",
                        String::from_utf8_lossy(&out.stderr).trim()
                    ))
                }
            }
            Err(e) => Err(format!("unmounting {mp}: {e}")),
        }
    }
}

/// SIGTERM and SIGINT unmount (and so end the session with a final checkpoint); SIGHUP is
/// ignored, as a daemon has no terminal.
pub(crate) fn on_signals(unmounter: Arc<Unmounter>) -> Result<(), String> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGTERM, SIGINT, SIGHUP])
        .map_err(|e| format!("signal handlers: {e}"))?;
    std::thread::Builder::new()
        .name("uf2fs-signals".into())
        .spawn(move || {
            for sig in signals.forever() {
                if sig == SIGHUP {
                    continue;
                }
                tracing::info!("signal {sig}: unmounting");
                if let Err(e) = unmount(&unmounter) {
                    tracing::error!("{e}");
                }
            }
        })
        .map_err(|e| format!("signal thread: {e}"))?;
    Ok(())
}

/// Sends `cmd` to the daemon serving `mountpoint`; returns its answer (for `unmount`, after
/// the daemon has finished).
pub fn request(mountpoint: &Path, cmd: &str) -> Result<String, String> {
    let mp =
        std::fs::canonicalize(mountpoint).map_err(|e| format!("{}: {e}", mountpoint.display()))?;
    let paths = control_paths(&mp)?;
    let mut s = UnixStream::connect(&paths.socket).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            format!("{} is not a uf2fs mount point", mp.display())
        } else {
            format!(
                "no uf2fs daemon answers for {} ({}: {e})",
                mp.display(),
                paths.socket.display()
            )
        }
    })?;
    writeln!(s, "{cmd}").map_err(|e| format!("control socket: {e}"))?;
    let mut out = String::new();
    BufReader::new(s)
        .read_line(&mut out)
        .map_err(|e| format!("control socket: {e}"))?;
    let out = out.trim_end().to_string();
    if out.is_empty() {
        return Err(format!(
            "the daemon for {} closed without answering",
            mp.display()
        ));
    }
    match out.strip_prefix("error: ") {
        Some(e) => Err(e.to_string()),
        None => Ok(out),
    }
}

/// [`request`] for any path on a mount: its mount point, a directory under it, or a bind
/// mount of it. A daemon listens for the mount point it was started on; any other path is
/// taken to the mount it is on (its mount ID, from `statx`) and to every place mountinfo
/// shows that file system mounted, and the first of those a daemon listens for answers.
pub fn request_within(path: &Path, cmd: &str) -> Result<String, String> {
    let at = std::fs::canonicalize(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if control_paths(&at)?.socket.exists() {
        return request(&at, cmd);
    }
    let not_ours = || {
        format!(
            "{} is not on a uf2fs mount (no uf2fs daemon serves it or the mount it is on)",
            at.display()
        )
    };
    let st = rustix::fs::statx(
        rustix::fs::CWD,
        &at,
        rustix::fs::AtFlags::empty(),
        rustix::fs::StatxFlags::MNT_ID,
    )
    .map_err(|e| format!("{}: {e}", at.display()))?;
    if st.stx_mask & rustix::fs::StatxFlags::MNT_ID.bits() == 0 {
        return Err(not_ours());
    }
    let info = crate::mount_info_by_id(st.stx_mnt_id).ok_or_else(not_ours)?;
    for mp in crate::mount_points_of(&info.device) {
        if control_paths(&mp)?.socket.exists() {
            return request(&mp, cmd);
        }
    }
    Err(not_ours())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn touch(path: &Path, age_days: u64, now: SystemTime) {
        let f = std::fs::File::create(path).unwrap();
        f.set_modified(now - Duration::from_secs(age_days * 24 * 3600))
            .unwrap();
    }

    #[test]
    fn bind_refuses_a_live_socket_and_replaces_a_dead_one() {
        let dir = std::env::temp_dir().join(format!("uf2fs-bind-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let (live, dead) = (dir.join("live.sock"), dir.join("dead.sock"));
        let first = bind(&live, Path::new("/mnt/a")).unwrap();
        let e = bind(&live, Path::new("/mnt/a")).unwrap_err();
        assert!(e.contains("already served"), "{e}");
        drop(UnixListener::bind(&dead).unwrap());
        let second = bind(&dead, Path::new("/mnt/b")).unwrap();
        assert_eq!(listening(&dead), Some(true));
        drop((first, second));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn prune_removes_what_gone_mounts_left_and_keeps_live_ones() {
        let dir = std::env::temp_dir().join(format!("uf2fs-prune-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let now = SystemTime::now();
        let stem = |i: u32| format!("{i:016x}");
        // A live mount with an old log: its socket answers, so both stay.
        let live = UnixListener::bind(dir.join(format!("{}.sock", stem(1)))).unwrap();
        touch(&dir.join(format!("{}.log", stem(1))), 30, now);
        // A killed daemon: its socket is dead (removed), its recent log stays.
        drop(UnixListener::bind(dir.join(format!("{}.sock", stem(2)))).unwrap());
        touch(&dir.join(format!("{}.log", stem(2))), 1, now);
        // A live daemon too busy to accept: its queue full, a connect would block. Kept,
        // without waiting.
        let busy = UnixListener::bind(dir.join(format!("{}.sock", stem(5)))).unwrap();
        let mut queued = Vec::new();
        for _ in 0..10_000 {
            use rustix::net::{AddressFamily, SocketAddrUnix, SocketFlags, SocketType};
            let fd = rustix::net::socket_with(
                AddressFamily::UNIX,
                SocketType::STREAM,
                SocketFlags::NONBLOCK,
                None,
            )
            .unwrap();
            let addr = SocketAddrUnix::new(dir.join(format!("{}.sock", stem(5)))).unwrap();
            if rustix::net::connect(&fd, &addr).is_err() {
                break;
            }
            queued.push(fd);
        }
        assert_eq!(
            listening(&dir.join(format!("{}.sock", stem(5)))),
            Some(true)
        );
        // An old log and its rotated copy of a mount long gone: removed.
        touch(&dir.join(format!("{}.log", stem(3))), 8, now);
        touch(&dir.join(format!("{}.log.old", stem(3))), 20, now);
        // The caller's own old log, and files that are not ours: left alone.
        touch(&dir.join(format!("{}.log", stem(4))), 30, now);
        touch(&dir.join("notes.log"), 30, now);
        let p = prune(&dir, &stem(4), now);
        let exists = |n: String| dir.join(n).exists();
        assert!(exists(format!("{}.sock", stem(1))) && exists(format!("{}.log", stem(1))));
        assert!(!exists(format!("{}.sock", stem(2))) && exists(format!("{}.log", stem(2))));
        assert!(!exists(format!("{}.log", stem(3))) && !exists(format!("{}.log.old", stem(3))));
        assert!(exists(format!("{}.log", stem(4))) && exists("notes.log".into()));
        assert!(
            exists(format!("{}.sock", stem(5))),
            "a busy daemon's socket was removed"
        );
        assert_eq!(
            p,
            Pruned {
                sockets: 1,
                logs: 2
            }
        );
        // More recent logs of gone mounts than are kept (older than stem 2's): the oldest go.
        let bulk = LOGS_KEPT as u32 + 3;
        for i in 0..bulk {
            touch(&dir.join(format!("{}.log", stem(100 + i))), 2, now);
        }
        let p = prune(&dir, &stem(4), now);
        let kept = (0..bulk)
            .filter(|i| exists(format!("{}.log", stem(100 + i))))
            .count();
        assert!(exists(format!("{}.log", stem(2))));
        assert_eq!(kept + 1, LOGS_KEPT, "{p:?}");
        assert_eq!(
            p,
            Pruned {
                sockets: 0,
                logs: 4
            }
        );
        drop((live, busy, queued));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
