//! The `uf2fs` command: parses arguments, calls the engine, prints. Exit status 0 on success,
//! 1 on an error (one line on stderr), 2 on bad usage.

mod extract;
mod file_contexts;
mod fs_config;
mod logging;
mod mkfs;
mod mount;
mod show;
mod sparse;
mod write;
mod writeback;

use clap::{CommandFactory, Parser, Subcommand};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "uf2fs",
    version,
    about = "F2FS images without the kernel: mount, inspect, change, check and extract"
)]
struct Cli {
    /// Another device of a multi-device volume (mkfs.f2fs -c): give one --device per device
    /// the volume lists after IMAGE, in that order. Devices not named are looked for at the
    /// paths recorded in the superblock. For `mount`, -o device=PATH says the same.
    #[arg(
        long = "device",
        value_name = "PATH",
        global = true,
        action = clap::ArgAction::Append
    )]
    devices: Vec<PathBuf>,
    #[command(subcommand)]
    cmd: Cmd,
}

/// The devices named with `--device` (set once, before any command runs).
static DEVICES: std::sync::OnceLock<Vec<PathBuf>> = std::sync::OnceLock::new();

/// The other devices of a multi-device volume that the user named, in order.
pub fn devices() -> &'static [PathBuf] {
    DEVICES.get().map_or(&[], Vec::as_slice)
}

#[derive(Subcommand)]
enum Cmd {
    /// Make an F2FS file system (mkfs.f2fs 1.15's layout) on an image file or block device;
    /// with --device (once per device, as mkfs.f2fs -c), a volume spanning IMAGE and the
    /// devices, each used whole, their paths recorded as given.
    Mkfs {
        image: PathBuf,
        /// Size with K/M/G/T suffix; makes the image file when it does not exist.
        #[arg(long)]
        size: Option<String>,
        /// Overprovision percentage (default: the ratio that leaves the most space).
        #[arg(long, short = 'o')]
        overprovision: Option<f64>,
        /// Segments per section (the cleaner's unit).
        #[arg(long, short = 's', default_value_t = 1)]
        segs_per_sec: u32,
        #[arg(long, short = 'l', default_value = "")]
        label: String,
        /// Comma-separated, as mkfs.f2fs -O: extra_attr, inode_checksum, flexible_inline_xattr,
        /// inode_crtime, lost_found, sb_checksum, encrypt, verity, compression, casefold
        /// (utf8), quota, project_quota (with their quota files); ro is refused, naming why.
        #[arg(long, short = 'O', default_value = "")]
        features: String,
        /// Overwrite an image or device that holds data.
        #[arg(long, short = 'f')]
        force: bool,
        /// Write IMAGE as an Android sparse image (as img2simg would), not a raw one.
        #[arg(long)]
        sparse: bool,
        /// The large NAT bitmap layout (mkfs.f2fs -i): a NAT a fifth the usual size but not
        /// capped by the checkpoint block, its bitmap running on into checkpoint payload blocks.
        #[arg(long, short = 'i')]
        large_nat_bitmap: bool,
        /// The volume's uuid (32 hex digits, dashes allowed), as mkfs.f2fs -U; random by
        /// default. With --timestamp, the same arguments make the same bytes.
        #[arg(long, short = 'U')]
        uuid: Option<String>,
        /// Seconds since the epoch for the root's and lost+found's times, as mkfs.f2fs -T;
        /// now by default.
        #[arg(long, short = 'T')]
        timestamp: Option<u64>,
    },
    /// Mount an image or device on a directory (FUSE); returns once the mount is live.
    #[command(after_long_help = MOUNT_NOTES)]
    Mount {
        image: PathBuf,
        mountpoint: PathBuf,
        /// Comma-separated mount options: ro, allow_other, allow_root, default_permissions,
        /// background_gc=on|off|sync, checkpoint_merge, nocheckpoint_merge, mode=adaptive|lfs,
        /// fsync_mode=posix|strict|nobarrier, [no]inline_data, [no]inline_dentry,
        /// inline_xattr, log=auto|journald|syslog|file, device=PATH (another device of a
        /// multi-device volume, once per device in order), and the generic nodev, nosuid,
        /// noexec, noatime...
        #[arg(short = 'o', value_name = "OPTIONS", action = clap::ArgAction::Append)]
        options: Vec<String>,
        /// Stay in the foreground (logs to stderr unless log= names a place; Ctrl-C
        /// unmounts).
        #[arg(short = 'f', long = "foreground")]
        foreground: bool,
        #[arg(long, hide = true)]
        daemon_child: bool,
    },
    /// Unmount a uf2fs mount and wait for its final checkpoint.
    Umount { mountpoint: PathBuf },
    /// Write back what the kernel holds for a live mount (syncfs, then an fdatasync of each
    /// of its files a process holds open or mapped, found in /proc), then write a checkpoint.
    /// MOUNTPOINT may be any directory on the mount, or a bind mount of it.
    Sync { mountpoint: PathBuf },
    /// Clean sections now (the cleaner's victims, by the mount's policy), then write a
    /// checkpoint so that they are free: through the daemon of a mount, or on an image.
    Gc {
        /// A mount point, or a directory on a mount (asks its daemon), or an image (cleans it
        /// in place).
        target: PathBuf,
        /// Sections to clean at most (fewer when no section is worth cleaning).
        #[arg(long, default_value_t = 1)]
        sections: u32,
    },
    /// Usage, segments, checkpoints, cleaning and writes of a mount (live) or an image.
    Status {
        /// A mount point, or a directory on a mount (asks its daemon), or an image (reads its
        /// checkpoint).
        target: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// Make a directory inside the image.
    Mkdir {
        /// Make missing parents too, and accept an existing directory.
        #[arg(short = 'p')]
        parents: bool,
        image: PathBuf,
        path: String,
    },
    /// Copy one host file into the image at PATH (or into PATH if it is a directory).
    Put {
        image: PathBuf,
        host_file: PathBuf,
        path: String,
    },
    /// Copy a host tree into the image under PATH (default /), keeping modes, owners, times,
    /// symlinks, hard links, device nodes, fifos, sockets, xattrs and holes.
    Import {
        image: PathBuf,
        src: PathBuf,
        #[arg(default_value = "/")]
        path: String,
        /// Print the device blocks written, by cause, and per block of file data.
        #[arg(long)]
        stats: bool,
        /// Write IMAGE back as an Android sparse image (as img2simg would); IMAGE may be raw
        /// or sparse.
        #[arg(long)]
        sparse: bool,
        /// Android canned fs_config (as sload.f2fs -C): `path uid gid mode
        /// [capabilities=N]` per line; owner, group and mode of the paths it names, and
        /// their security.capability. Paths it does not name keep the source's.
        #[arg(long, short = 'C', value_name = "FILE")]
        fs_config: Option<PathBuf>,
        /// SELinux file_contexts, text form (as sload.f2fs -s): security.selinux of every
        /// imported path, matched as libselinux does.
        #[arg(long, short = 's', value_name = "FILE")]
        file_contexts: Option<PathBuf>,
        /// Where the image is mounted on the device (as sload.f2fs -t): the prefix of the
        /// paths fs_config and file_contexts name.
        #[arg(long, short = 't', default_value = "/")]
        mount_point: String,
        /// Every inode time is this many seconds since the epoch, i_generation is 0 and the
        /// image's clock stands still (as sload.f2fs -T): the same inputs give the same
        /// bytes.
        #[arg(long, short = 'T')]
        timestamp: Option<u64>,
        /// Compress regular files (as sload.f2fs -c -a ALG): lzo, lz4, zstd or lzo-rle, with
        /// an optional level (`lz4:9`, `zstd:6`). The image needs the compression feature.
        /// Files small enough to stay inline are not compressed, as with sload.f2fs.
        #[arg(long, value_name = "ALG")]
        compress: Option<String>,
        /// Blocks per cluster, as a log of 2 (as sload.f2fs -L): 2 (16 KiB) to 8 (1 MiB).
        #[arg(long, value_name = "LOG", default_value_t = 2, requires = "compress")]
        compress_log: u8,
        /// Compress only files with this extension (as sload.f2fs -i; give it once per
        /// extension).
        #[arg(long, value_name = "EXT", requires = "compress")]
        compress_only: Vec<String>,
        /// Compress every file but those with this extension (as sload.f2fs -x; once per
        /// extension).
        #[arg(
            long,
            value_name = "EXT",
            requires = "compress",
            conflicts_with = "compress_only"
        )]
        compress_except: Vec<String>,
        /// Give back the blocks compression saved (as sload.f2fs -r): the compressed files
        /// can then be read but not written, until F2FS_IOC_RESERVE_COMPRESS_BLOCKS.
        #[arg(long, requires = "compress")]
        compress_release: bool,
    },
    /// Remove a file, or with -r a directory and everything below it.
    Rm {
        #[arg(short = 'r')]
        recursive: bool,
        image: PathBuf,
        path: String,
    },
    /// Rename or move an entry (into TO when TO is a directory).
    Mv {
        image: PathBuf,
        from: String,
        to: String,
    },
    /// Make a hard link PATH to TARGET, or with -s a symbolic link holding TARGET.
    Ln {
        #[arg(short = 's')]
        symbolic: bool,
        image: PathBuf,
        target: String,
        path: String,
    },
    /// Check an image (read-only): exit 0 when clean, 1 with the findings listed.
    Fsck {
        image: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// Geometry, features, checkpoint and usage of an image.
    Info {
        image: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// List a directory (or one entry) inside the image.
    Ls {
        /// Long listing: mode, links, owner, size, mtime, name, link target.
        #[arg(short = 'l')]
        long: bool,
        /// Recursive: every entry below PATH, one path per line.
        #[arg(short = 'R')]
        recursive: bool,
        image: PathBuf,
        #[arg(default_value = "/")]
        path: String,
    },
    /// Write a file's bytes to standard output (symbolic links are followed).
    Cat { image: PathBuf, path: String },
    /// Every inode field of an entry, and its xattrs.
    Stat {
        image: PathBuf,
        path: String,
        #[arg(long)]
        json: bool,
    },
    /// Copy a tree (or one file) out of the image, keeping modes, owners, times, links,
    /// xattrs and holes. Encrypted directories come out under their no-key names; encrypted
    /// files, whose contents need a key, are left out and reported (exit status 1).
    Extract {
        image: PathBuf,
        dest: PathBuf,
        #[arg(default_value = "/")]
        path: String,
        /// Replace files that already exist at the destination.
        #[arg(long)]
        force: bool,
    },
    /// Print a completion script for SHELL (bash, zsh, fish, elvish, powershell).
    #[command(after_long_help = COMPLETION_NOTES)]
    Completions { shell: clap_complete::Shell },
    /// Write the manual pages (uf2fs.1 and one per command) into DIR; after `cargo install`,
    /// `uf2fs manpages ~/.local/share/man/man1` makes `man uf2fs` work.
    Manpages { dir: PathBuf },
}

const MOUNT_NOTES: &str = "\
Through mount(8) and /etc/fstab (the package installs /sbin/mount.fuse.uf2fs):
    mount -t fuse.uf2fs IMAGE DIR -o allow_other
    /srv/a.img  /mnt/a  fuse.uf2fs  defaults,allow_other  0  0

The helper drops what only mount(8) and fstab mean (defaults, auto, noauto, user, users, \
nofail, _netdev, x-*, comment=) and returns once the mount is live. umount DIR unmounts; \
uf2fs umount DIR also waits for the final checkpoint.

Logging: with -f, standard error. Otherwise, once the mount is live, log=auto (the default) \
sends the daemon's lines to journald when /run/systemd/journal/socket answers (journalctl \
-t uf2fs), else to syslog through /dev/log (tag uf2fs, facility daemon), else to a file \
beside the control socket in /run/uf2fs; log=journald, log=syslog or log=file picks one. \
uf2fs status DIR names it. A log file past 4 MiB is renamed NAME.log.old when a daemon \
starts; the logs of mounts that are gone are removed once a week old or beyond the newest \
256. UF2FS_LOG=debug (or any tracing filter) logs more.";

const COMPLETION_NOTES: &str = "\
For the current shell:  source <(uf2fs completions bash)

Installed for everyone (the package does this):
    uf2fs completions bash > /usr/share/bash-completion/completions/uf2fs
    uf2fs completions zsh  > /usr/share/zsh/vendor-completions/_uf2fs
    uf2fs completions fish > /usr/share/fish/vendor_completions.d/uf2fs.fish";

fn main() -> ExitCode {
    // A panic is a bug; still, the user gets one line, not a trace.
    // (A daemon whose log went to journald or syslog logs it there.)
    std::panic::set_hook(Box::new(|p| {
        if logging::on_stderr() {
            eprintln!("uf2fs: internal error (please report): {p}");
        } else {
            tracing::error!("internal error (please report): {p}");
        }
    }));
    let cli = Cli::parse();
    let _ = DEVICES.set(cli.devices.clone());
    // A mount daemon says when it serves and when its final checkpoint is written.
    logging::init(match cli.cmd {
        Cmd::Mount { .. } => "info,fuser=error",
        _ => "warn,fuser=error",
    });
    let result = match cli.cmd {
        Cmd::Mkfs {
            image,
            size,
            overprovision,
            segs_per_sec,
            label,
            features,
            force,
            sparse,
            large_nat_bitmap,
            uuid,
            timestamp,
        } => mkfs::run(mkfs::Args {
            image: &image,
            size: size.as_deref(),
            overprovision,
            segs_per_sec,
            label: &label,
            features: &features,
            force,
            sparse,
            large_nat_bitmap,
            uuid: uuid.as_deref(),
            timestamp,
        }),
        Cmd::Mkdir {
            parents,
            image,
            path,
        } => write::mkdir(&image, &path, parents),
        Cmd::Put {
            image,
            host_file,
            path,
        } => write::put(&image, &host_file, &path),
        Cmd::Import {
            image,
            src,
            path,
            stats,
            sparse,
            fs_config,
            file_contexts,
            mount_point,
            timestamp,
            compress,
            compress_log,
            compress_only,
            compress_except,
            compress_release,
        } => import_options(stats, fs_config, file_contexts, &mount_point, timestamp)
            .and_then(|mut opts| {
                opts.compress = compress
                    .map(|alg| {
                        import_compression(
                            &alg,
                            compress_log,
                            &compress_only,
                            &compress_except,
                            compress_release,
                        )
                    })
                    .transpose()?;
                Ok(opts)
            })
            .and_then(|opts| {
                if sparse {
                    sparse::import(&image, &src, &path, &opts)
                } else {
                    write::import(&image, &src, &path, &opts)
                }
            }),
        Cmd::Rm {
            recursive,
            image,
            path,
        } => write::rm(&image, &path, recursive),
        Cmd::Mv { image, from, to } => write::mv(&image, &from, &to),
        Cmd::Ln {
            symbolic,
            image,
            target,
            path,
        } => write::ln(&image, &target, &path, symbolic),
        Cmd::Mount {
            image,
            mountpoint,
            options,
            foreground,
            daemon_child,
        } => mount::mount(mount::Args {
            image: &image,
            mountpoint: &mountpoint,
            options: &options,
            foreground,
            daemon_child,
        }),
        Cmd::Umount { mountpoint } => mount::umount(&mountpoint),
        Cmd::Sync { mountpoint } => mount::sync(&mountpoint),
        Cmd::Gc { target, sections } => mount::gc(&target, sections),
        Cmd::Status { target, json } => mount::status(&target, json),
        Cmd::Fsck { image, json } => show::fsck(&image, json),
        Cmd::Info { image, json } => show::info(&image, json),
        Cmd::Ls {
            long,
            recursive,
            image,
            path,
        } => show::ls(&image, &path, long, recursive),
        Cmd::Cat { image, path } => show::cat(&image, &path),
        Cmd::Stat { image, path, json } => show::stat(&image, &path, json),
        Cmd::Extract {
            image,
            dest,
            path,
            force,
        } => extract::run(&image, &dest, &path, force),
        Cmd::Completions { shell } => {
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "uf2fs", &mut script);
            std::io::stdout().write_all(&script).map_err(out_err)
        }
        Cmd::Manpages { dir } => manpages(&dir),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Quiet) => ExitCode::from(1),
        Err(Failure::Msg(m)) => {
            let _ = writeln!(std::io::stderr(), "uf2fs: {m}");
            ExitCode::from(1)
        }
    }
}

/// Reads the Android configuration files `uf2fs import` was given.
fn import_options(
    stats: bool,
    fs_config: Option<PathBuf>,
    file_contexts: Option<PathBuf>,
    mount_point: &str,
    timestamp: Option<u64>,
) -> Result<write::ImportOptions, Failure> {
    Ok(write::ImportOptions {
        stats,
        fs_config: fs_config
            .as_deref()
            .map(fs_config::FsConfig::load)
            .transpose()?,
        file_contexts: file_contexts
            .as_deref()
            .map(file_contexts::FileContexts::load)
            .transpose()?,
        mount_point: write::check_mount_point(mount_point)?,
        timestamp,
        compress: None,
    })
}

/// `import --compress ...` as the engine's compression options (the mount options of the
/// same meaning check the values) and which files to compress.
fn import_compression(
    alg: &str,
    log: u8,
    only: &[String],
    except: &[String],
    release: bool,
) -> Result<write::ImportCompression, Failure> {
    let o = uf2fs_fuse::options::MountOptions::parse(&[format!(
        "compress_algorithm={alg},compress_log_size={log}"
    )])
    .map_err(|e| Failure::Msg(e.replace("mount option ", "--compress: ")))?;
    let mut c = write::ImportCompression {
        options: o.compress,
        only: uf2fs_engine::Extensions::default(),
        except: uf2fs_engine::Extensions::default(),
        release,
    };
    for (list, exts) in [(&mut c.only, only), (&mut c.except, except)] {
        for e in exts {
            list.push(e).map_err(Failure::Msg)?;
        }
    }
    Ok(c)
}

/// The manual pages, from the same definition as the arguments: `uf2fs.1` and `uf2fs-CMD.1`
/// for each command. Generated by the binary (not by a build script) so that the package and
/// a `cargo install` user make them the same way.
fn manpages(dir: &std::path::Path) -> CliResult {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    clap_mangen::generate_to(Cli::command(), dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    Ok(())
}

/// How a command failed: a message to print, or already reported (per-entry errors).
pub enum Failure {
    Msg(String),
    Quiet,
}

impl<E: std::fmt::Display> From<E> for Failure {
    fn from(e: E) -> Self {
        Failure::Msg(e.to_string())
    }
}

/// A failed write of a command's output. A reader that went away (`uf2fs status DIR | head
/// -3`) ends the command without a message, as SIGPIPE ends other tools (Rust ignores
/// SIGPIPE, so the write fails instead).
pub fn out_err(e: std::io::Error) -> Failure {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        Failure::Quiet
    } else {
        Failure::Msg(format!("writing output: {e}"))
    }
}

pub type CliResult = Result<(), Failure>;

/// Opens an image, with the path in the error.
pub fn open(image: &std::path::Path) -> Result<uf2fs_engine::Fs, Failure> {
    let fs = uf2fs_engine::Fs::open_with(image, devices())
        .map_err(|e| Failure::Msg(format!("{}: {e}", image.display())))?;
    for n in fs.mount_notes() {
        tracing::warn!("{}: {n}", image.display());
    }
    Ok(fs)
}

/// Resolves PATH inside the image, with the path in the error.
pub fn resolve(fs: &uf2fs_engine::Fs, path: &str, follow: bool) -> Result<u32, Failure> {
    fs.resolve(path.as_bytes(), follow)
        .map_err(|e| Failure::Msg(format!("{path}: {e}")))
}
