//! `mkdir`, `put`, `import`: changing an image from the command line. The image is opened for
//! writing, changed, and closed with a checkpoint; on an error the last checkpoint stays the
//! valid state of the image.

use crate::{CliResult, Failure};
use std::collections::HashMap;
use std::fs;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;
use uf2fs_engine::{Error, Fs, NewInode};

/// Opens the image for changing, images in the read-only layout (`ro`) included, as
/// sload.f2fs changes them: the command-line tools build images.
pub(crate) fn open_rw(image: &Path) -> Result<Fs, Failure> {
    Fs::open_build_with(image, crate::devices())
        .map_err(|e| Failure::Msg(format!("image {}: {e}", image.display())))
}

/// Splits "/a/b/c" into ("/a/b", "c"); the root has no parent.
fn split(path: &str) -> Result<(&str, &str), Failure> {
    if !path.starts_with('/') {
        return Err(Failure::Msg(format!(
            "{path}: paths inside the image start with /"
        )));
    }
    let p = path.trim_end_matches('/');
    if p.is_empty() {
        return Err(Failure::Msg(
            "/: the root directory cannot be removed, moved or replaced".into(),
        ));
    }
    match p.rfind('/') {
        Some(i) => Ok((
            if i == 0 {
                "/"
            } else {
                p.get(..i).unwrap_or("/")
            },
            p.get(i + 1..).unwrap_or(""),
        )),
        None => Err(Failure::Msg(format!(
            "{path}: paths inside the image start with /"
        ))),
    }
}

fn dir_mode(perm: u32) -> NewInode {
    NewInode {
        mode: 0o40000 | (perm & 0o7777) as u16,
        uid: 0,
        gid: 0,
        rdev: (0, 0),
    }
}

pub fn mkdir(image: &Path, path: &str, parents: bool) -> CliResult {
    let fs = open_rw(image)?;
    let mut cur = fs.root_ino();
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    if parts.is_empty() {
        return Err(Failure::Msg(format!("{path}: exists")));
    }
    for (i, part) in parts.iter().enumerate() {
        let last = i + 1 == parts.len();
        match fs.lookup(cur, part.as_bytes()) {
            Ok(ino) if !last || parents => cur = ino,
            Ok(_) => return Err(Failure::Msg(format!("{path}: file exists"))),
            Err(Error::NotFound) if last || parents => {
                cur = fs
                    .create_node(cur, part.as_bytes(), dir_mode(0o755))
                    .map_err(|e| format!("{path}: {e}"))?;
            }
            Err(e) => return Err(Failure::Msg(format!("{path}: {e}"))),
        }
    }
    fs.unmount()
        .map_err(|e| format!("{}: {e}", image.display()))?;
    Ok(())
}

/// Copies the data of host file `src` into inode `ino`: only its data extents (holes stay
/// holes), then the size.
fn copy_file(fs: &Fs, ino: u32, src: &Path, len: u64) -> Result<(), String> {
    let mut f = fs::File::open(src).map_err(|e| e.to_string())?;
    let mut buf = vec![0u8; 1 << 20];
    let mut pos = 0u64;
    while pos < len {
        // The next data extent (SEEK_DATA), or the rest if the host cannot tell.
        let data = match rustix::fs::seek(&f, rustix::fs::SeekFrom::Data(pos)) {
            Ok(d) => d,
            Err(rustix::io::Errno::NXIO) => break,
            Err(_) => pos,
        };
        let hole = rustix::fs::seek(&f, rustix::fs::SeekFrom::Hole(data))
            .unwrap_or(len)
            .min(len);
        f.seek(SeekFrom::Start(data)).map_err(|e| e.to_string())?;
        let mut at = data;
        while at < hole {
            let want = ((hole - at) as usize).min(buf.len());
            let n = f
                .read(buf.get_mut(..want).unwrap_or(&mut []))
                .map_err(|e| e.to_string())?;
            if n == 0 {
                break;
            }
            fs.write(ino, at, buf.get(..n).unwrap_or(&[]))
                .map_err(|e| e.to_string())?;
            at += n as u64;
        }
        pos = hole.max(at);
    }
    fs.extend(ino, len).map_err(|e| e.to_string())
}

fn attrs_of(fs: &Fs, ino: u32, m: &fs::Metadata) -> Result<(), String> {
    Attrs::of(m, None).apply(fs, ino)
}

/// What an imported inode's attributes become: from the host file, or from fs_config and
/// --timestamp where they say otherwise.
#[derive(Clone, Copy)]
struct Attrs {
    perm: u16,
    uid: u32,
    gid: u32,
    atime: (i64, u32),
    mtime: (i64, u32),
}

impl Attrs {
    fn of(m: &fs::Metadata, timestamp: Option<u64>) -> Attrs {
        let (atime, mtime) = match timestamp {
            Some(t) => ((t as i64, 0), (t as i64, 0)),
            None => (
                (m.atime(), m.atime_nsec() as u32),
                (m.mtime(), m.mtime_nsec() as u32),
            ),
        };
        Attrs {
            perm: (m.mode() & 0o7777) as u16,
            uid: m.uid(),
            gid: m.gid(),
            atime,
            mtime,
        }
    }

    fn configured(mut self, e: Option<&crate::fs_config::Entry>) -> Attrs {
        if let Some(e) = e {
            self.perm = e.mode;
            self.uid = e.uid;
            self.gid = e.gid;
        }
        self
    }

    fn apply(&self, fs: &Fs, ino: u32) -> Result<(), String> {
        fs.set_attr(
            ino,
            Some(self.perm),
            Some((self.uid, self.gid)),
            Some(self.atime),
            Some(self.mtime),
        )
        .map_err(|e| e.to_string())
    }
}

pub fn put(image: &Path, host: &Path, path: &str) -> CliResult {
    let fs = open_rw(image)?;
    let m = fs::metadata(host).map_err(|e| format!("{}: {e}", host.display()))?;
    if !m.is_file() {
        return Err(Failure::Msg(format!(
            "{}: not a regular file (use import for trees)",
            host.display()
        )));
    }
    let (parent, name) = match fs.resolve(path.as_bytes(), true) {
        Ok(ino)
            if fs
                .getattr(ino)
                .map(|a| a.file_type == uf2fs_engine::FileType::Directory)
                .unwrap_or(false) =>
        {
            (
                ino,
                host.file_name()
                    .map(|n| n.as_bytes().to_vec())
                    .unwrap_or_default(),
            )
        }
        Ok(_) => return Err(Failure::Msg(format!("{path}: file exists"))),
        Err(Error::NotFound) => {
            let (dir, name) = split(path)?;
            (
                fs.resolve(dir.as_bytes(), true)
                    .map_err(|e| format!("{dir}: {e}"))?,
                name.as_bytes().to_vec(),
            )
        }
        Err(e) => return Err(Failure::Msg(format!("{path}: {e}"))),
    };
    let ino = fs
        .create_node(
            parent,
            &name,
            NewInode {
                mode: 0o100000 | (m.mode() & 0o7777) as u16,
                uid: m.uid(),
                gid: m.gid(),
                rdev: (0, 0),
            },
        )
        .map_err(|e| format!("{path}: {e}"))?;
    copy_file(&fs, ino, host, m.len()).map_err(|e| format!("{path}: {e}"))?;
    attrs_of(&fs, ino, &m).map_err(|e| format!("{path}: {e}"))?;
    fs.unmount()
        .map_err(|e| format!("{}: {e}", image.display()))?;
    Ok(())
}

/// How `uf2fs import` labels what it writes: Android's fs_config and file_contexts, the
/// mount point they are written against, and a fixed time (`uf2fs import --fs-config ...`).
#[derive(Default)]
pub struct ImportOptions {
    /// Print the device blocks written, by cause.
    pub stats: bool,
    pub fs_config: Option<crate::fs_config::FsConfig>,
    pub file_contexts: Option<crate::file_contexts::FileContexts>,
    /// Where the image will be mounted on the device (`/` or `/system`): the prefix of the
    /// paths fs_config and file_contexts name. Checked by [`check_mount_point`].
    pub mount_point: String,
    /// Every inode time written is this second, and the image's clock stands still.
    pub timestamp: Option<u64>,
    /// Compress regular files, as sload.f2fs -c does.
    pub compress: Option<ImportCompression>,
}

/// Which files `uf2fs import --compress` compresses, and how.
pub struct ImportCompression {
    /// Algorithm, level and cluster size (the extension lists in it are not used).
    pub options: uf2fs_engine::CompressOptions,
    /// Only files with these extensions (empty: every file but `except`).
    pub only: uf2fs_engine::Extensions,
    pub except: uf2fs_engine::Extensions,
    /// Give back the blocks compression saved (sload.f2fs -r).
    pub release: bool,
}

impl ImportCompression {
    /// Whether a regular file named `name` of `size` bytes is compressed: not when it fits
    /// in the inode (sload.f2fs keeps such files inline), else as the extension lists say.
    fn wants(&self, name: &[u8], size: u64, inline_max: u64) -> bool {
        if size <= inline_max {
            return false;
        }
        if self.only.iter().next().is_some() {
            self.only.matches(name)
        } else {
            !self.except.matches(name)
        }
    }
}

/// Checks a --mount-point: absolute, no empty, `.` or `..` components; returns it without a
/// trailing `/` (but `/` itself).
pub fn check_mount_point(m: &str) -> Result<String, String> {
    let trimmed = m.trim_end_matches('/');
    if !m.starts_with('/') {
        return Err(format!("--mount-point {m:?}: must start with /"));
    }
    if trimmed.is_empty() {
        return Ok("/".into());
    }
    if trimmed
        .split('/')
        .skip(1)
        .any(|c| c.is_empty() || c == "." || c == "..")
    {
        return Err(format!(
            "--mount-point {m:?}: empty, . or .. components are not allowed"
        ));
    }
    Ok(trimmed.to_owned())
}

impl ImportOptions {
    /// The path the device will see for image path `p` (absolute): the mount point joined
    /// with it; the image's root is the mount point itself.
    fn device_path(&self, p: &[u8]) -> Vec<u8> {
        let m = self.mount_point.as_bytes();
        if p == b"/" {
            m.to_vec()
        } else if m == b"/" || m.is_empty() {
            p.to_vec()
        } else {
            [m, p].concat()
        }
    }

    /// The fs_config entry of image path `p`, if the file names it.
    fn config(&self, p: &[u8]) -> Option<&crate::fs_config::Entry> {
        let cfg = self.fs_config.as_ref()?;
        let dev = self.device_path(p);
        cfg.lookup(dev.strip_prefix(b"/").unwrap_or(&dev))
    }

    /// Which host xattrs the options replace: the label when file_contexts is given, the
    /// capabilities when fs_config names the path.
    fn replaces(&self, name: &[u8], configured: bool) -> bool {
        (self.file_contexts.is_some() && name == b"security.selinux")
            || (configured && name == b"security.capability")
    }

    /// Sets `security.selinux` and `security.capability` of `ino` (image path `p`, S_IFMT
    /// `kind`) as file_contexts and fs_config say. The label is stored without a trailing
    /// NUL, as sload.f2fs stores it.
    fn label(&self, fs: &Fs, ino: u32, p: &[u8], kind: u32) -> Result<(), String> {
        if let Some(fc) = &self.file_contexts {
            if let Some(label) = fc.lookup(&self.device_path(p), kind) {
                fs.setxattr(ino, b"security.selinux", label, 0)
                    .map_err(|e| format!("security.selinux: {e}"))?;
            }
        }
        if let Some(caps) = self
            .config(p)
            .and_then(|e| crate::fs_config::vfs_cap_data(e.capabilities))
        {
            fs.setxattr(ino, b"security.capability", &caps, 0)
                .map_err(|e| format!("security.capability: {e}"))?;
        }
        Ok(())
    }
}

struct Import<'a> {
    fs: &'a Fs,
    opts: &'a ImportOptions,
    bar: Option<indicatif::ProgressBar>,
    /// Bytes of file data copied.
    data_bytes: u64,
    /// Host (dev, ino) of multiply-linked files → image ino.
    links: HashMap<(u64, u64), u32>,
    dirs: Vec<(u32, Attrs)>,
    failures: usize,
}

/// Copies the xattrs of host path `host` (not following a symlink) to `ino`, but those
/// `skip` names.
fn copy_xattrs_but(
    fs: &Fs,
    ino: u32,
    host: &Path,
    skip: &dyn Fn(&[u8]) -> bool,
) -> Result<(), String> {
    let mut names = vec![0u8; 64 * 1024];
    let n = match rustix::fs::llistxattr(host, &mut names) {
        Ok(n) => n,
        Err(rustix::io::Errno::NOTSUP) => return Ok(()),
        Err(e) => return Err(format!("listing xattrs: {e}")),
    };
    for name in names
        .get(..n)
        .unwrap_or(&[])
        .split(|&b| b == 0)
        .filter(|n| !n.is_empty() && !skip(n))
    {
        let os = std::ffi::OsStr::from_bytes(name);
        let mut value = vec![0u8; 64 * 1024];
        let len = rustix::fs::lgetxattr(host, os, &mut value)
            .map_err(|e| format!("xattr {}: {e}", String::from_utf8_lossy(name)))?;
        fs.setxattr(ino, name, value.get(..len).unwrap_or(&[]), 0)
            .map_err(|e| format!("xattr {}: {e}", String::from_utf8_lossy(name)))?;
    }
    Ok(())
}

/// `dir/name` of image paths.
fn join(dir: &[u8], name: &[u8]) -> Vec<u8> {
    if dir == b"/" {
        [b"/", name].concat()
    } else {
        [dir, b"/", name].concat()
    }
}

impl Import<'_> {
    fn entry(
        &mut self,
        parent: u32,
        name: &[u8],
        host: &Path,
        at: &[u8],
    ) -> Result<Option<u32>, String> {
        let m = fs::symlink_metadata(host).map_err(|e| e.to_string())?;
        let ft = m.file_type();
        if !ft.is_dir() && m.nlink() > 1 {
            if let Some(&ino) = self.links.get(&(m.dev(), m.ino())) {
                self.fs.link(ino, parent, name).map_err(|e| e.to_string())?;
                return Ok(None);
            }
        }
        let configured = self.opts.config(at);
        let attrs = Attrs::of(&m, self.opts.timestamp).configured(configured);
        let (kind, rdev) = if ft.is_dir() {
            (0o040000, (0, 0))
        } else if ft.is_file() {
            (0o100000, (0, 0))
        } else if ft.is_symlink() {
            (0o120000, (0, 0))
        } else if ft.is_char_device() {
            (
                0o020000,
                (rustix::fs::major(m.rdev()), rustix::fs::minor(m.rdev())),
            )
        } else if ft.is_block_device() {
            (
                0o060000,
                (rustix::fs::major(m.rdev()), rustix::fs::minor(m.rdev())),
            )
        } else if ft.is_fifo() {
            (0o010000, (0, 0))
        } else {
            (0o140000, (0, 0))
        };
        let ino = self
            .fs
            .create_node(
                parent,
                name,
                NewInode {
                    mode: kind | attrs.perm,
                    uid: attrs.uid,
                    gid: attrs.gid,
                    rdev,
                },
            )
            .map_err(|e| e.to_string())?;
        let compress = match &self.opts.compress {
            Some(c) if ft.is_file() => {
                let inline_max = self
                    .fs
                    .inode(ino)
                    .map_err(|e| e.to_string())?
                    .inline_capacity();
                Some(c).filter(|c| c.wants(name, m.len(), inline_max as u64))
            }
            _ => None,
        };
        if compress.is_some() {
            // As `chattr +c` on the new, empty file: it takes the options set at the start.
            let flags = self.fs.fs_flags(ino).map_err(|e| e.to_string())?;
            self.fs
                .set_fs_flags(ino, flags | uf2fs_engine::iflags::COMPR)
                .map_err(|e| format!("compress: {e}"))?;
        }
        if ft.is_file() {
            copy_file(self.fs, ino, host, m.len())?;
            if compress.is_some_and(|c| c.release) {
                self.fs
                    .release_compress_blocks(ino)
                    .map_err(|e| format!("release compressed blocks: {e}"))?;
            }
            self.data_bytes += m.blocks() * 512;
            if let Some(b) = &self.bar {
                b.inc(m.len());
            }
        } else if ft.is_symlink() {
            let target = fs::read_link(host).map_err(|e| e.to_string())?;
            self.fs
                .write(ino, 0, target.as_os_str().as_bytes())
                .map_err(|e| e.to_string())?;
        }
        let opts = self.opts;
        copy_xattrs_but(self.fs, ino, host, &|n| {
            opts.replaces(n, configured.is_some())
        })?;
        opts.label(self.fs, ino, at, u32::from(kind))?;
        if !ft.is_dir() && m.nlink() > 1 {
            self.links.insert((m.dev(), m.ino()), ino);
        }
        if ft.is_dir() {
            self.dirs.push((ino, attrs));
            return Ok(Some(ino));
        }
        attrs.apply(self.fs, ino)?;
        Ok(None)
    }

    /// Imports the entries of host directory `host` into image directory `parent`, whose
    /// image path is `at`, in byte order of their names (so inode numbers follow a sorted
    /// walk and the same tree gives the same image).
    fn tree(&mut self, parent: u32, host: &Path, at: &[u8]) {
        let mut names: Vec<_> = match fs::read_dir(host) {
            Ok(d) => d.filter_map(|e| e.ok()).map(|e| e.file_name()).collect(),
            Err(e) => {
                self.failures += 1;
                eprintln!("uf2fs: import: {}: {e}", host.display());
                return;
            }
        };
        names.sort();
        for n in names {
            let p = host.join(&n);
            let child = join(at, n.as_bytes());
            match self.entry(parent, n.as_bytes(), &p, &child) {
                Ok(Some(dir)) => self.tree(dir, &p, &child),
                Ok(None) => {}
                Err(e) => {
                    self.failures += 1;
                    eprintln!("uf2fs: import: {}: {e}", p.display());
                }
            }
        }
    }
}

/// Resolves directory `path` in the image, making it and its missing parents (mode 0755,
/// root:root, unless fs_config names them; labelled as file_contexts says). Returns its
/// inode and whether it was made.
fn target_dir(fs: &Fs, path: &str, opts: &ImportOptions) -> Result<(u32, bool), Failure> {
    if !path.starts_with('/') {
        return Err(Failure::Msg(format!(
            "{path}: paths inside the image start with /"
        )));
    }
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    // Checked before anything is made.
    if parts.iter().any(|p| *p == "." || *p == "..") {
        return Err(Failure::Msg(format!(
            "{path}: . and .. are not allowed in the target path"
        )));
    }
    let mut cur = fs.root_ino();
    let mut at = b"/".to_vec();
    let mut made = false;
    for part in parts {
        at = join(&at, part.as_bytes());
        made = false;
        match fs.lookup(cur, part.as_bytes()) {
            Ok(ino) => {
                if fs
                    .getattr(ino)
                    .map_err(|e| format!("{path}: {e}"))?
                    .file_type
                    != uf2fs_engine::FileType::Directory
                {
                    return Err(Failure::Msg(format!(
                        "{}: not a directory",
                        String::from_utf8_lossy(&at)
                    )));
                }
                cur = ino;
            }
            Err(Error::NotFound) => {
                let shown = String::from_utf8_lossy(&at).into_owned();
                let (perm, uid, gid) = match opts.config(&at) {
                    Some(e) => (e.mode, e.uid, e.gid),
                    None => (0o755, 0, 0),
                };
                let ino = fs
                    .create_node(
                        cur,
                        part.as_bytes(),
                        NewInode {
                            mode: 0o40000 | perm,
                            uid,
                            gid,
                            rdev: (0, 0),
                        },
                    )
                    .map_err(|e| format!("{shown}: {e}"))?;
                opts.label(fs, ino, &at, 0o040000)
                    .map_err(|e| format!("{shown}: {e}"))?;
                if let Some(t) = opts.timestamp {
                    fs.set_attr(ino, None, None, Some((t as i64, 0)), Some((t as i64, 0)))
                        .map_err(|e| format!("{shown}: {e}"))?;
                }
                cur = ino;
                made = true;
            }
            Err(e) => {
                return Err(Failure::Msg(format!(
                    "{}: {e}",
                    String::from_utf8_lossy(&at)
                )))
            }
        }
    }
    Ok((cur, made))
}

pub fn import(image: &Path, src: &Path, path: &str, opts: &ImportOptions) -> CliResult {
    let mut fs = open_rw(image)?;
    let m = fs::metadata(src).map_err(|e| format!("{}: {e}", src.display()))?;
    if !m.is_dir() {
        return Err(Failure::Msg(format!(
            "{}: not a directory (use put for one file)",
            src.display()
        )));
    }
    if let Some(t) = opts.timestamp {
        fs.set_options(uf2fs_engine::Options {
            fixed_time: Some(t),
            ..fs.options()
        });
    }
    if let Some(c) = &opts.compress {
        if !fs.superblock().has(uf2fs_engine::feature::COMPRESSION) {
            return Err(Failure::Msg(format!(
                "{}: --compress needs an image with the compression feature \
                 (uf2fs mkfs -O extra_attr,compression)",
                image.display()
            )));
        }
        // Files are chosen one by one below; the options give the algorithm and cluster.
        let mut o = fs.options();
        o.compress = uf2fs_engine::CompressOptions {
            extensions: uf2fs_engine::Extensions::default(),
            no_extensions: uf2fs_engine::Extensions::default(),
            ..c.options
        };
        fs.set_options(o);
    }
    let (top, _) = target_dir(&fs, path, opts)?;
    let at: Vec<u8> = {
        let p = path.trim_end_matches('/');
        if p.is_empty() {
            b"/".to_vec()
        } else {
            p.as_bytes().to_vec()
        }
    };
    // A progress bar by bytes when stderr is a terminal (a quick walk counts them first).
    let bar = std::io::IsTerminal::is_terminal(&std::io::stderr()).then(|| {
        fn total(p: &Path) -> u64 {
            match fs::symlink_metadata(p) {
                Ok(m) if m.is_dir() => fs::read_dir(p)
                    .map(|d| d.filter_map(|e| e.ok()).map(|e| total(&e.path())).sum())
                    .unwrap_or(0),
                Ok(m) if m.is_file() => m.len(),
                _ => 0,
            }
        }
        let b = indicatif::ProgressBar::new(total(src));
        b.set_style(
            indicatif::ProgressStyle::with_template(
                "{bar:40} {bytes}/{total_bytes} {bytes_per_sec} {elapsed}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        b
    });
    let mut imp = Import {
        fs: &fs,
        opts,
        bar,
        data_bytes: 0,
        links: HashMap::new(),
        dirs: Vec::new(),
        failures: 0,
    };
    imp.tree(top, src, &at);
    if let Some(b) = &imp.bar {
        b.finish_and_clear();
    }
    // Directories last, deepest first, so their times are not changed by their children.
    let dirs = std::mem::take(&mut imp.dirs);
    for (ino, a) in dirs.iter().rev() {
        if let Err(e) = a.apply(&fs, *ino) {
            imp.failures += 1;
            eprintln!("uf2fs: import: directory inode {ino}: {e}");
        }
    }
    if at == b"/" {
        // The root takes the source directory's attributes and xattrs (fs_config's entry for
        // the mount point, when there is one; labelled as file_contexts says).
        let configured = opts.config(b"/");
        let attrs = Attrs::of(&m, opts.timestamp).configured(configured);
        let r = copy_xattrs_but(&fs, top, src, &|n| opts.replaces(n, configured.is_some()))
            .and_then(|()| opts.label(&fs, top, b"/", 0o040000))
            .and_then(|()| attrs.apply(&fs, top));
        if let Err(e) = r {
            imp.failures += 1;
            eprintln!("uf2fs: import: {}: {e}", src.display());
        }
    } else if let Some(t) = opts.timestamp {
        // The target's time changed with its new entries: the fixed time again.
        if let Err(e) = fs.set_attr(top, None, None, Some((t as i64, 0)), Some((t as i64, 0))) {
            imp.failures += 1;
            eprintln!("uf2fs: import: {path}: {e}");
        }
    }
    let failures = imp.failures;
    let user_blocks = imp.data_bytes / 4096;
    let io = fs
        .unmount()
        .map_err(|e| format!("{}: {e}", image.display()))?;
    if opts.stats {
        let by: Vec<String> = uf2fs_engine::uf2fs_device::IoCause::ALL
            .iter()
            .zip(io.written_blocks)
            .map(|(c, b)| format!("{} {b}", c.name()))
            .collect();
        let total = io.total_written();
        println!(
            "import: {user_blocks} blocks of file data; device blocks written: {} (total {total}, {} requests, {} flushes); written per data block: {:.3}",
            by.join(", "),
            io.write_requests.iter().sum::<u64>(),
            io.flushes,
            total as f64 / user_blocks.max(1) as f64
        );
    }
    if failures > 0 {
        eprintln!("uf2fs: import: {failures} entries could not be imported");
        return Err(Failure::Quiet);
    }
    Ok(())
}

/// Removes `ino` (named `name` in `parent`) and, with `recursive`, everything below it.
fn remove_tree(fs: &Fs, parent: u32, name: &[u8], recursive: bool) -> Result<(), Error> {
    let ino = fs.lookup(parent, name)?;
    if fs.getattr(ino)?.file_type != uf2fs_engine::FileType::Directory {
        return fs.unlink(parent, name);
    }
    if !recursive {
        return Err(Error::IsADirectory);
    }
    // Depth-first with an explicit stack: (dir, its name in its parent, its parent). A
    // directory met twice means a cycle in a corrupt image: stop rather than loop.
    let mut stack = vec![(ino, name.to_vec(), parent)];
    let mut entered = std::collections::HashSet::new();
    while let Some((dir, dname, dparent)) = stack.last().cloned() {
        let entries = fs.readdir(dir)?;
        if entries.is_empty() {
            fs.rmdir(dparent, &dname)?;
            stack.pop();
            continue;
        }
        for e in entries {
            if fs.getattr(e.ino)?.file_type == uf2fs_engine::FileType::Directory {
                if !entered.insert(e.ino) {
                    return Err(uf2fs_engine::CorruptKind::DirectoryCycle {
                        ino: dir,
                        child: e.ino,
                    }
                    .into());
                }
                stack.push((e.ino, e.name, dir));
            } else {
                fs.unlink(dir, &e.name)?;
            }
        }
    }
    Ok(())
}

pub fn rm(image: &Path, path: &str, recursive: bool) -> CliResult {
    let fs = open_rw(image)?;
    let (dir, name) = split(path)?;
    if name.is_empty() {
        return Err(Failure::Msg(format!("{path}: cannot remove the root")));
    }
    let parent = fs
        .resolve(dir.as_bytes(), true)
        .map_err(|e| format!("{dir}: {e}"))?;
    remove_tree(&fs, parent, name.as_bytes(), recursive).map_err(|e| match e {
        Error::IsADirectory => format!("{path}: is a directory (use -r)"),
        e => format!("{path}: {e}"),
    })?;
    fs.unmount()
        .map_err(|e| format!("{}: {e}", image.display()))?;
    Ok(())
}

pub fn mv(image: &Path, from: &str, to: &str) -> CliResult {
    let fs = open_rw(image)?;
    let (fdir, fname) = split(from)?;
    let fparent = fs
        .resolve(fdir.as_bytes(), true)
        .map_err(|e| format!("{fdir}: {e}"))?;
    // Into a directory when the target is one, as mv does.
    let (tparent, tname) = match fs.resolve(to.as_bytes(), true) {
        Ok(ino)
            if fs
                .getattr(ino)
                .map(|a| a.file_type == uf2fs_engine::FileType::Directory)
                .unwrap_or(false) =>
        {
            (ino, fname.to_owned())
        }
        _ => {
            let (tdir, tname) = split(to)?;
            (
                fs.resolve(tdir.as_bytes(), true)
                    .map_err(|e| format!("{tdir}: {e}"))?,
                tname.to_owned(),
            )
        }
    };
    fs.rename(fparent, fname.as_bytes(), tparent, tname.as_bytes(), 0)
        .map_err(|e| format!("{from} -> {to}: {e}"))?;
    fs.unmount()
        .map_err(|e| format!("{}: {e}", image.display()))?;
    Ok(())
}

pub fn ln(image: &Path, target: &str, path: &str, symbolic: bool) -> CliResult {
    let fs = open_rw(image)?;
    let (dir, name) = split(path)?;
    let parent = fs
        .resolve(dir.as_bytes(), true)
        .map_err(|e| format!("{dir}: {e}"))?;
    if symbolic {
        if target.is_empty() || target.len() >= 4096 {
            return Err(Failure::Msg(format!(
                "{path}: a symlink target must be 1 to 4095 bytes"
            )));
        }
        let ino = fs
            .create_node(
                parent,
                name.as_bytes(),
                NewInode {
                    mode: 0o120777,
                    uid: 0,
                    gid: 0,
                    rdev: (0, 0),
                },
            )
            .map_err(|e| format!("{path}: {e}"))?;
        fs.write(ino, 0, target.as_bytes())
            .map_err(|e| format!("{path}: {e}"))?;
    } else {
        let ino = fs
            .resolve(target.as_bytes(), false)
            .map_err(|e| format!("{target}: {e}"))?;
        fs.link(ino, parent, name.as_bytes())
            .map_err(|e| format!("{path}: {e}"))?;
    }
    fs.unmount()
        .map_err(|e| format!("{}: {e}", image.display()))?;
    Ok(())
}
