//! Where uf2fs's log lines go. A command logs to standard error; so does the mount daemon
//! until its mount is live (its parent relays that to the user). Then the daemon's lines move
//! where a system tool's go (`-o log=`): the systemd journal when its socket answers, else
//! syslog through /dev/log, else the file beside the control socket, as before packages.
//!
//! One subscriber for the whole run, its destination behind a reload handle, so the switch
//! happens once without losing a line or re-registering callsites.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::{Layered, SubscriberExt};
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{reload, EnvFilter, Layer, Registry};
use uf2fs_fuse::{Log, LogChoice};

type Sub = Layered<EnvFilter, Registry>;
/// A destination: a layer that writes events somewhere.
pub type Dest = Box<dyn Layer<Sub> + Send + Sync>;

static HANDLE: OnceLock<reload::Handle<Dest, Sub>> = OnceLock::new();
/// Set once the lines go somewhere other than standard error (the panic hook reads it).
static AWAY: AtomicBool = AtomicBool::new(false);

/// journald's native socket (fixed in `tracing-journald`).
pub const JOURNALD_SOCKET: &str = "/run/systemd/journal/socket";

/// The syslog socket: /dev/log, or `UF2FS_SYSLOG_SOCKET` (tests point it at a listener of
/// their own rather than take over the machine's /dev/log).
pub fn syslog_socket() -> PathBuf {
    std::env::var_os("UF2FS_SYSLOG_SOCKET")
        .filter(|p| !p.is_empty())
        .map_or_else(|| PathBuf::from("/dev/log"), PathBuf::from)
}

/// Installs the subscriber, writing to standard error. `UF2FS_LOG` overrides the filter.
pub fn init(default_filter: &str) {
    let filter =
        EnvFilter::try_from_env("UF2FS_LOG").unwrap_or_else(|_| EnvFilter::new(default_filter));
    let (layer, handle) = reload::Layer::new(stderr());
    let _ = HANDLE.set(handle);
    tracing_subscriber::registry()
        .with(filter)
        .with(layer)
        .init();
}

/// Whether lines still reach standard error (else a panic is logged as an event).
pub fn on_stderr() -> bool {
    !AWAY.load(Ordering::Relaxed)
}

fn stderr() -> Dest {
    tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .without_time()
        .boxed()
}

/// Picks the daemon's destination for `choice` and opens it, so that a destination that was
/// asked for by name and cannot be reached fails the mount before it starts. `file` is the
/// log file beside the control socket.
pub fn choose(choice: LogChoice, file: PathBuf) -> Result<(Log, Option<Dest>), String> {
    let journald = || {
        tracing_journald::layer()
            .map(|l| l.with_syslog_identifier("uf2fs".into()).boxed())
            .map_err(|e| format!("log=journald: {JOURNALD_SOCKET}: {e}"))
    };
    let syslog = |socket: &Path| {
        syslog_layer(socket).map_err(|e| format!("log=syslog: {}: {e}", socket.display()))
    };
    let journald_log = || Log::Journald {
        socket: PathBuf::from(JOURNALD_SOCKET),
    };
    let socket = syslog_socket();
    Ok(match choice {
        LogChoice::File => (Log::File { path: file }, None),
        LogChoice::Journald => (journald_log(), Some(journald()?)),
        LogChoice::Syslog => (
            Log::Syslog {
                socket: socket.clone(),
            },
            Some(syslog(&socket)?),
        ),
        // A socket file left without a listener (a stopped journald) is passed over.
        LogChoice::Auto => {
            if let Ok(l) = journald() {
                (journald_log(), Some(l))
            } else if let Ok(l) = syslog(&socket) {
                (Log::Syslog { socket }, Some(l))
            } else {
                (Log::File { path: file }, None)
            }
        }
    })
}

/// Moves the log to `log` (a daemon whose mount is live). Standard error goes to the log file,
/// or to /dev/null when the lines go to journald or syslog, so that nothing blocks on a
/// terminal or pipe nobody reads.
pub fn switch(log: &Log, dest: Option<Dest>) -> std::io::Result<()> {
    let err_to = match log {
        Log::Stderr => return Ok(()),
        Log::File { path } => {
            rotate_if_large(path);
            path.as_path()
        }
        Log::Journald { .. } | Log::Syslog { .. } => Path::new("/dev/null"),
    };
    let f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(err_to)?;
    rustix::stdio::dup2_stderr(&f)?;
    if let (Some(dest), Some(handle)) = (dest, HANDLE.get()) {
        handle
            .reload(dest)
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        AWAY.store(true, Ordering::Relaxed);
    }
    Ok(())
}

/// A log file grows by what each mount of its mount point writes: past this size it is
/// renamed `NAME.log.old` (replacing the one before) when a daemon starts, and begins anew.
const LOG_FILE_LIMIT: u64 = 4 << 20;

fn rotate_if_large(path: &Path) {
    if std::fs::metadata(path).is_ok_and(|m| m.len() > LOG_FILE_LIMIT) {
        let mut old = path.as_os_str().to_owned();
        old.push(".old");
        // Best effort: a log that cannot be renamed keeps growing, as before.
        let _ = std::fs::rename(path, old);
    }
}

/// Formatted events sent to syslog, one datagram each, at the event's severity. The `syslog`
/// crate writes the RFC 3164 line (`<PRI>time uf2fs[pid]: ...`) that /dev/log expects.
fn syslog_layer(socket: &Path) -> std::io::Result<Dest> {
    let formatter = syslog::Formatter3164 {
        facility: syslog::Facility::LOG_DAEMON,
        hostname: None,
        process: "uf2fs".into(),
        pid: std::process::id(),
    };
    let logger =
        syslog::unix_custom(formatter, socket).map_err(|e| std::io::Error::other(e.to_string()))?;
    Ok(tracing_subscriber::fmt::layer()
        .with_writer(Syslog(Mutex::new(logger)))
        .with_ansi(false)
        .without_time()
        .with_level(false)
        .boxed())
}

type SyslogLogger = syslog::Logger<syslog::LoggerBackend, syslog::Formatter3164>;

struct Syslog(Mutex<SyslogLogger>);

/// One event: the fmt layer writes each formatted event in one `write_all`.
struct SyslogLine<'a> {
    logger: &'a Mutex<SyslogLogger>,
    level: tracing::Level,
}

impl<'a> MakeWriter<'a> for Syslog {
    type Writer = SyslogLine<'a>;

    fn make_writer(&'a self) -> SyslogLine<'a> {
        SyslogLine {
            logger: &self.0,
            level: tracing::Level::INFO,
        }
    }

    fn make_writer_for(&'a self, meta: &tracing::Metadata<'_>) -> SyslogLine<'a> {
        SyslogLine {
            logger: &self.0,
            level: *meta.level(),
        }
    }
}

impl Write for SyslogLine<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let line = String::from_utf8_lossy(buf);
        let line = line.trim_end();
        if let Ok(mut l) = self.logger.lock() {
            // A syslog daemon that went away loses the line: there is nowhere left to say so.
            let _ = match self.level {
                tracing::Level::ERROR => l.err(line),
                tracing::Level::WARN => l.warning(line),
                tracing::Level::INFO => l.info(line),
                _ => l.debug(line),
            };
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
