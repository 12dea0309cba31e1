//! `extract`: copies a tree out of the image, keeping what a file system can keep: bytes, holes
//! (only written runs are written; the size is set last), modes, owners, times in ns, symlink
//! targets, hard-link groups, device numbers, fifos, sockets and xattrs.
//!
//! Order per entry: create, xattrs, owner (chown clears setuid bits, so before chmod; and
//! file capabilities, so security.capability comes after it), mode, times. Directories get their mode and times after their children, deepest first, so that
//! writing the children does not change the times and a read-only directory can be filled.
//! An entry that cannot be read or made is reported on its own line; the others go on, and
//! the exit status is 1.
//!
//! Encrypted directories (no key is ever given) come out under the no-key names Linux shows,
//! with their symlinks pointing at the no-key targets; an encrypted regular file is not made
//! at all (an empty file would pass for its contents): it is reported as encrypted, naming
//! the key it needs, and counted apart in the closing summary.

use crate::{open, resolve, CliResult, Failure};
use indicatif::{ProgressBar, ProgressStyle};
use rustix::fs::{
    makedev, mknodat, AtFlags, FileType as RFileType, Mode, Timespec, Timestamps, CWD,
};
use std::collections::HashMap;
use std::ffi::OsStr;
use std::fs::{self, OpenOptions};
use std::io::IsTerminal;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use uf2fs_engine::{Attr, Error, FileType, Fs, WalkItem};

/// Bytes read from the image per request (a run longer than this is read in pieces).
const CHUNK_BLOCKS: u64 = 256;

struct Extractor<'a> {
    fs: &'a Fs,
    force: bool,
    as_root: bool,
    /// First extracted path of each multiply-linked inode.
    links: HashMap<u32, PathBuf>,
    /// Directories whose mode and times are set at the end.
    dirs: Vec<(PathBuf, Attr)>,
    failures: usize,
    /// Of the failures, encrypted regular files (their contents need the key).
    encrypted: usize,
    bar: Option<ProgressBar>,
    /// Bytes of file data copied so far (for the progress bar).
    copied: u64,
    buf: Vec<u8>,
}

fn ts(t: uf2fs_engine::Time) -> Timespec {
    Timespec {
        tv_sec: t.sec,
        tv_nsec: i64::from(t.nsec),
    }
}

impl Extractor<'_> {
    fn fail(&mut self, path: &Path, what: impl std::fmt::Display) {
        self.failures += 1;
        let line = format!("uf2fs: extract: {}: {what}", path.display());
        match &self.bar {
            Some(b) => b.println(line),
            None => eprintln!("{line}"),
        }
    }

    fn entry(&mut self, dest: &Path, ino: u32, a: &Attr) -> Result<(), String> {
        let linked = a.file_type != FileType::Directory && a.nlink > 1;
        if linked {
            if let Some(first) = self.links.get(&ino) {
                self.remove_existing(dest)?;
                return fs::hard_link(first, dest)
                    .map_err(|e| format!("hard link to {}: {e}", first.display()));
            }
        }
        if a.file_type == FileType::Regular
            && self.fs.is_encrypted(ino).map_err(|e| e.to_string())?
        {
            // Nothing is made for it: an empty file would pass for its contents.
            self.encrypted += 1;
            return Err(self
                .fs
                .read(ino, 0, &mut [])
                .err()
                .map(|e| e.to_string())
                .unwrap_or_else(|| "encrypted and no key was given".into()));
        }
        match a.file_type {
            FileType::Directory => match fs::create_dir(dest) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && dest.is_dir() => {}
                Err(e) => return Err(format!("mkdir: {e}")),
            },
            FileType::Regular => self.file(dest, ino, a)?,
            FileType::Symlink => {
                let target = self.fs.readlink(ino).map_err(|e| e.to_string())?;
                self.remove_existing(dest)?;
                std::os::unix::fs::symlink(OsStr::from_bytes(&target), dest)
                    .map_err(|e| format!("symlink: {e}"))?;
            }
            FileType::CharDevice | FileType::BlockDevice | FileType::Fifo | FileType::Socket => {
                let (kind, dev) = match a.file_type {
                    FileType::CharDevice => {
                        (RFileType::CharacterDevice, makedev(a.rdev.0, a.rdev.1))
                    }
                    FileType::BlockDevice => (RFileType::BlockDevice, makedev(a.rdev.0, a.rdev.1)),
                    FileType::Fifo => (RFileType::Fifo, 0),
                    _ => (RFileType::Socket, 0),
                };
                self.remove_existing(dest)?;
                mknodat(CWD, dest, kind, Mode::from_raw_mode(0o600), dev)
                    .map_err(|e| format!("mknod: {e}"))?;
            }
        }
        if linked {
            // Recorded once made, so that later names of an inode that failed fail alike.
            self.links.insert(ino, dest.to_path_buf());
        }
        self.attributes(dest, ino, a)
    }

    fn remove_existing(&self, dest: &Path) -> Result<(), String> {
        if fs::symlink_metadata(dest).is_ok() {
            if !self.force {
                return Err("already exists (use --force to replace)".into());
            }
            fs::remove_file(dest).map_err(|e| format!("remove: {e}"))?;
        }
        Ok(())
    }

    fn file(&mut self, dest: &Path, ino: u32, a: &Attr) -> Result<(), String> {
        self.remove_existing(dest)?;
        let out = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(dest)
            .map_err(|e| format!("create: {e}"))?;
        let fs = self.fs;
        if fs.is_inline(ino).map_err(|e| e.to_string())? {
            let mut data = vec![0u8; a.size as usize];
            let n = fs.read(ino, 0, &mut data).map_err(|e| e.to_string())?;
            out.write_all_at(data.get(..n).unwrap_or(&[]), 0)
                .map_err(|e| format!("write: {e}"))?;
        } else if fs.compression(ino).map_err(|e| e.to_string())?.is_some() {
            // Compressed: the bytes come decoded through read; all-zero chunks are left as
            // holes, so that sparse compressed files stay sparse.
            let mut off = 0u64;
            self.buf.resize((CHUNK_BLOCKS * 4096) as usize, 0);
            while off < a.size {
                let n = fs
                    .read(ino, off, &mut self.buf)
                    .map_err(|e| e.to_string())?;
                if n == 0 {
                    break;
                }
                let got = self.buf.get(..n).unwrap_or(&[]);
                if got.iter().any(|&b| b != 0) {
                    out.write_all_at(got, off)
                        .map_err(|e| format!("write: {e}"))?;
                }
                self.copied += n as u64;
                if let Some(b) = &self.bar {
                    b.set_message(indicatif::HumanBytes(self.copied).to_string());
                }
                off += n as u64;
            }
        } else {
            let buf = &mut self.buf;
            let bar = &self.bar;
            let copied = &mut self.copied;
            let mut write_err = None;
            fs.extents(ino, &mut |e| {
                let mut done = 0;
                while done < e.len {
                    let n = (e.len - done).min(CHUNK_BLOCKS);
                    buf.resize((n * 4096) as usize, 0);
                    fs.read_blocks(u64::from(e.addr) + done, buf)?;
                    // The last block may run past i_size; set_len below cuts it.
                    if let Err(err) = out.write_all_at(buf, (e.fblk + done) * 4096) {
                        write_err = Some(err);
                        return Err(Error::InvalidArgument("write failed"));
                    }
                    *copied += n * 4096;
                    if let Some(b) = bar {
                        b.set_message(indicatif::HumanBytes(*copied).to_string());
                    }
                    done += n;
                }
                Ok(())
            })
            .map_err(|e| match write_err.take() {
                Some(w) => format!("write: {w}"),
                None => e.to_string(),
            })?;
        }
        out.set_len(a.size).map_err(|e| format!("set size: {e}"))?;
        Ok(())
    }

    fn attributes(&mut self, dest: &Path, ino: u32, a: &Attr) -> Result<(), String> {
        let xattrs = self.fs.xattrs(ino).map_err(|e| format!("xattrs: {e}"))?;
        let set = |name: &[u8], value: &[u8]| {
            rustix::fs::lsetxattr(
                dest,
                OsStr::from_bytes(name),
                value,
                rustix::fs::XattrFlags::empty(),
            )
            .map_err(|e| format!("set xattr {}: {e}", String::from_utf8_lossy(name)))
        };
        // The kernel drops security.capability on chown: it is set after the owner.
        let is_caps = |name: &[u8]| name == b"security.capability";
        for (name, value) in xattrs.iter().filter(|(n, _)| !is_caps(n)) {
            set(name, value)?;
        }
        if self.as_root {
            std::os::unix::fs::lchown(dest, Some(a.uid), Some(a.gid))
                .map_err(|e| format!("chown: {e}"))?;
        }
        for (name, value) in xattrs.iter().filter(|(n, _)| is_caps(n)) {
            set(name, value)?;
        }
        if a.file_type == FileType::Directory {
            self.dirs.push((dest.to_path_buf(), a.clone()));
            return Ok(());
        }
        self.finish(dest, a)
    }

    /// Mode (not on symlinks, which have none of their own) and times.
    fn finish(&self, dest: &Path, a: &Attr) -> Result<(), String> {
        if a.file_type != FileType::Symlink {
            fs::set_permissions(dest, fs::Permissions::from_mode(u32::from(a.perm)))
                .map_err(|e| format!("chmod: {e}"))?;
        }
        let times = Timestamps {
            last_access: ts(a.atime),
            last_modification: ts(a.mtime),
        };
        rustix::fs::utimensat(CWD, dest, &times, AtFlags::SYMLINK_NOFOLLOW)
            .map_err(|e| format!("set times: {e}"))
    }
}

pub fn run(image: &Path, dest: &Path, path: &str, force: bool) -> CliResult {
    let fs = open(image)?;
    let ino = resolve(&fs, path, false)?;
    let top = fs.getattr(ino).map_err(|e| format!("{path}: {e}"))?;
    // A single non-directory goes to DEST, or into DEST if that is a directory.
    let dest = if top.file_type != FileType::Directory && dest.is_dir() {
        let name = Path::new(path)
            .file_name()
            .map(|n| n.to_owned())
            .unwrap_or_default();
        dest.join(name)
    } else {
        dest.to_path_buf()
    };
    // Counts entries against the checkpoint's inode count (exact for a whole image, an upper
    // bound for a subtree); the message shows the bytes copied.
    let bar = std::io::stderr().is_terminal().then(|| {
        let b = ProgressBar::new(u64::from(fs.info().valid_inode_count));
        b.set_style(
            ProgressStyle::with_template("{bar:40} {pos}/{len} files, {msg} {elapsed}")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        b
    });
    let mut x = Extractor {
        fs: &fs,
        force,
        as_root: rustix::process::geteuid().is_root(),
        links: HashMap::new(),
        dirs: Vec::new(),
        failures: 0,
        encrypted: 0,
        bar,
        copied: 0,
        buf: Vec::new(),
    };
    if !x.as_root {
        eprintln!(
            "uf2fs: extract: not running as root: owners are not kept, device nodes cannot be made"
        );
    }
    fs.walk(ino, &mut |item| {
        match item {
            WalkItem::Entry {
                path: rel,
                ino,
                attr,
            } => {
                if let Some(b) = &x.bar {
                    b.inc(1);
                }
                let target = if rel.is_empty() {
                    dest.clone()
                } else {
                    dest.join(OsStr::from_bytes(rel))
                };
                if let Err(e) = x.entry(&target, ino, attr) {
                    x.fail(&target, e);
                    return Ok(false);
                }
            }
            WalkItem::Error { path: rel, error } => {
                let target = dest.join(OsStr::from_bytes(rel));
                x.fail(&target, error);
            }
        }
        Ok(true)
    })
    .map_err(|e| format!("{path}: {e}"))?;
    let dirs = std::mem::take(&mut x.dirs);
    for (d, a) in dirs.iter().rev() {
        if let Err(e) = x.finish(d, a) {
            x.fail(d, e);
        }
    }
    if let Some(b) = &x.bar {
        b.finish_and_clear();
    }
    if x.failures > 0 {
        let why = if x.encrypted > 0 {
            format!(
                " ({} of them encrypted files, whose contents need a key that was not given)",
                x.encrypted
            )
        } else {
            String::new()
        };
        eprintln!(
            "uf2fs: extract: {} entries could not be extracted{why}",
            x.failures
        );
        return Err(Failure::Quiet);
    }
    Ok(())
}
