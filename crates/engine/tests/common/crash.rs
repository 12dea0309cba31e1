//! The crash tests' shared pieces: a model of acknowledged file versions, the workload driver
//! that runs engine operations over a [`RecordingDevice`] and keeps that model, the judge of
//! what a mounted crash image shows, and [`Overlay`], a crash image that shares its base.
//!
//! Used by `crash_consistency.rs` (uf2fs recovers every crash image) and
//! `crash_images_in_linux.rs` (Linux recovers a few of the same images as uf2fs does).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    reason = "test code: a panic is the failure report"
)]

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;
use std::sync::RwLock;
use uf2fs_engine::uf2fs_device::{
    BlockDevice, CrashLog, IoCause, IoCounters, MemDevice, RecordingDevice, BLOCK_SIZE,
};
use uf2fs_engine::{mkfs, Error, FileType, Fs, MkfsOptions};

/// Size of every crash test's image.
pub const IMAGE_MIB: usize = 64;

// ---------------------------------------------------------------------------------------
// The model.

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum State {
    Absent,
    Dir,
    File {
        data: Vec<u8>,
        xattrs: BTreeMap<Vec<u8>, Vec<u8>>,
        attrs: Attrs,
    },
}

/// A file's permission bits and owner: what an fsync acknowledges with its xattrs, and an
/// fdatasync does not.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Attrs {
    pub perm: u16,
    pub uid: u32,
    pub gid: u32,
}

impl Default for Attrs {
    /// A new file's ([`file_mode`]).
    fn default() -> Attrs {
        let n = file_mode();
        Attrs {
            perm: n.mode & 0o7777,
            uid: n.uid,
            gid: n.gid,
        }
    }
}

#[derive(Clone, Debug)]
pub struct Version {
    pub state: State,
    /// Log position at which the operation that made this version began.
    pub begun: usize,
}

/// What an acknowledgement covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Covers {
    /// Presence and bytes (fdatasync).
    Data,
    /// Presence, bytes, xattrs, permission bits and owner (fsync, sync).
    All,
}

#[derive(Clone, Debug)]
pub struct Ack {
    /// Log position at which the fsync/sync returned.
    pub at: usize,
    pub version: usize,
    pub covers: Covers,
    pub by: String,
}

#[derive(Clone, Debug)]
pub struct History {
    pub versions: Vec<Version>,
    pub acks: Vec<Ack>,
}

/// A file (inode) as the workload knows it.
#[derive(Clone, Debug, Default)]
pub struct Ino {
    pub data: Vec<u8>,
    pub xattrs: BTreeMap<Vec<u8>, Vec<u8>>,
    pub attrs: Attrs,
    pub names: BTreeSet<String>,
}

#[derive(Default)]
pub struct Model {
    pub paths: BTreeMap<String, History>,
    pub files: HashMap<u32, Ino>,
    pub dirs: BTreeMap<String, u32>,
}

impl Model {
    pub fn push(&mut self, path: &str, state: State, begun: usize) {
        let h = self
            .paths
            .entry(path.to_owned())
            .or_insert_with(|| History {
                versions: vec![Version {
                    state: State::Absent,
                    begun: 0,
                }],
                acks: Vec::new(),
            });
        if h.versions.last().map(|v| &v.state) != Some(&state) {
            h.versions.push(Version { state, begun });
        }
    }

    pub fn file_state(&self, ino: u32) -> State {
        let f = &self.files[&ino];
        State::File {
            data: f.data.clone(),
            xattrs: f.xattrs.clone(),
            attrs: f.attrs,
        }
    }

    /// A new state of `ino` under each of its names.
    pub fn file_changed(&mut self, ino: u32, begun: usize) {
        let s = self.file_state(ino);
        let names: Vec<String> = self.files[&ino].names.iter().cloned().collect();
        for n in names {
            self.push(&n, s.clone(), begun);
        }
    }

    pub fn ack(&mut self, path: &str, at: usize, covers: Covers, by: &str) {
        if let Some(h) = self.paths.get_mut(path) {
            let version = h.versions.len() - 1;
            h.acks.push(Ack {
                at,
                version,
                covers,
                by: by.to_owned(),
            });
        }
    }

    /// The states of `path` that a crash at position `q` may show, for one dimension.
    pub fn allowed<'a>(
        &self,
        h: &'a History,
        q: usize,
        dim: Covers,
    ) -> (Vec<usize>, Option<&'a Ack>) {
        let ack = h
            .acks
            .iter()
            .filter(|a| a.at <= q && (dim == Covers::Data || a.covers == Covers::All))
            .max_by_key(|a| (a.version, a.at));
        let from = ack.map_or(0, |a| a.version);
        let v = (from..h.versions.len())
            .filter(|&i| i == from || h.versions[i].begun < q)
            .collect();
        (v, ack)
    }
}

pub fn parent_of(path: &str) -> Option<&str> {
    let i = path.rfind('/')?;
    (i > 0).then(|| &path[..i])
}

pub fn leaf(path: &str) -> &[u8] {
    path.rsplit('/').next().unwrap().as_bytes()
}

// ---------------------------------------------------------------------------------------
// The workload driver: each call does one engine operation and updates the model.

pub struct Run {
    pub dev: Arc<RecordingDevice>,
    pub fs: Fs,
    pub m: Model,
    pub held: Vec<u32>,
}

pub fn fresh_mem_image() -> Vec<u8> {
    let dev = MemDevice::new(vec![0u8; IMAGE_MIB << 20], false);
    mkfs(&dev, &MkfsOptions::default()).unwrap();
    dev.into_contents()
}

pub fn file_mode() -> uf2fs_engine::NewInode {
    super::node(0o100644)
}

/// An image of `IMAGE_MIB` MiB made by mkfs.f2fs with `features` (-O), in memory.
pub fn mkfs_f2fs_mem_image(features: &str) -> Vec<u8> {
    let dir = uf2fs_testkit::scratch(&format!("crash-mkfs-{}", features.replace(',', "-")));
    let img = dir.join("img");
    // casefold needs its encoding named.
    let mut args = vec!["-O", features];
    if features.contains("casefold") {
        args.extend(["-C", "utf8"]);
    }
    uf2fs_testkit::mkfs_f2fs(&img, IMAGE_MIB as u64, &args);
    let bytes = std::fs::read(&img).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    bytes
}

impl Run {
    pub fn new() -> Run {
        Run::on_image(fresh_mem_image())
    }

    /// A run on the image `bytes`.
    pub fn on_image(bytes: Vec<u8>) -> Run {
        let dev = Arc::new(RecordingDevice::new(bytes));
        let fs = Fs::with_device_rw(Box::new(dev.clone())).unwrap();
        let mut m = Model::default();
        m.dirs.insert(String::new(), fs.root_ino());
        Run {
            dev,
            fs,
            m,
            held: Vec::new(),
        }
    }

    pub fn pos(&self) -> usize {
        self.dev.position()
    }

    pub fn dir_ino(&self, path: &str) -> u32 {
        self.m.dirs[parent_of(path).unwrap_or("")]
    }

    pub fn mkdir(&mut self, path: &str) -> u32 {
        let begun = self.pos();
        let ino = self
            .fs
            .create_node(self.dir_ino(path), leaf(path), super::node(0o40755))
            .unwrap_or_else(|e| panic!("mkdir {path}: {e}"));
        self.m.dirs.insert(path.to_owned(), ino);
        self.m.push(path, State::Dir, begun);
        ino
    }

    pub fn create(&mut self, path: &str) -> u32 {
        let begun = self.pos();
        let ino = self
            .fs
            .create_node(self.dir_ino(path), leaf(path), file_mode())
            .unwrap_or_else(|e| panic!("create {path}: {e}"));
        self.m.files.insert(ino, Ino::default());
        self.claim(path, ino);
        self.m.file_changed(ino, begun);
        ino
    }

    /// Writes `data` at `off`. About every other write (those that begin at an even position
    /// of the device's log) goes from a buffer that puts the whole blocks block-aligned in memory,
    /// as the mount's io_uring payloads do, so that the engine writes them without copying
    /// (borrowed runs); the others are copied, as the /dev/fuse transport's are.
    pub fn write(&mut self, ino: u32, off: usize, data: &[u8]) {
        let begun = self.pos();
        let aligned_copy;
        let source = if begun.is_multiple_of(2) {
            aligned_copy = super::block_aligned(data, off);
            &aligned_copy.0[aligned_copy.1..aligned_copy.1 + data.len()]
        } else {
            data
        };
        assert_eq!(
            self.fs
                .write(ino, off as u64, source)
                .unwrap_or_else(|e| panic!("write ino {ino} at {off}: {e}")),
            data.len()
        );
        let f = self.m.files.get_mut(&ino).unwrap();
        if f.data.len() < off + data.len() {
            f.data.resize(off + data.len(), 0);
        }
        f.data[off..off + data.len()].copy_from_slice(data);
        self.m.file_changed(ino, begun);
    }

    pub fn append(&mut self, ino: u32, data: &[u8]) {
        let off = self.m.files[&ino].data.len();
        self.write(ino, off, data);
    }

    pub fn truncate(&mut self, ino: u32, size: usize) {
        let begun = self.pos();
        self.fs
            .truncate(ino, size as u64)
            .unwrap_or_else(|e| panic!("truncate ino {ino} to {size}: {e}"));
        self.m.files.get_mut(&ino).unwrap().data.resize(size, 0);
        self.m.file_changed(ino, begun);
    }

    pub fn setxattr(&mut self, ino: u32, name: &str, value: &[u8]) {
        let begun = self.pos();
        self.fs
            .setxattr(ino, name.as_bytes(), value, 0)
            .unwrap_or_else(|e| panic!("setxattr ino {ino} {name}: {e}"));
        let f = self.m.files.get_mut(&ino).unwrap();
        f.xattrs.insert(name.as_bytes().to_vec(), value.to_vec());
        self.m.file_changed(ino, begun);
    }

    /// Sets the permission bits and, when given, the owner of `ino` (a SETATTR).
    pub fn set_attrs(&mut self, ino: u32, perm: u16, owner: Option<(u32, u32)>) {
        let begun = self.pos();
        self.fs
            .set_attr(ino, Some(perm), owner, None, None)
            .unwrap_or_else(|e| panic!("set_attr ino {ino} {perm:o} {owner:?}: {e}"));
        let a = &mut self.m.files.get_mut(&ino).unwrap().attrs;
        a.perm = perm;
        if let Some((uid, gid)) = owner {
            (a.uid, a.gid) = (uid, gid);
        }
        self.m.file_changed(ino, begun);
    }

    pub fn removexattr(&mut self, ino: u32, name: &str) {
        let begun = self.pos();
        self.fs
            .removexattr(ino, name.as_bytes())
            .unwrap_or_else(|e| panic!("removexattr ino {ino} {name}: {e}"));
        self.m
            .files
            .get_mut(&ino)
            .unwrap()
            .xattrs
            .remove(name.as_bytes());
        self.m.file_changed(ino, begun);
    }

    pub fn link(&mut self, ino: u32, path: &str) {
        let begun = self.pos();
        self.fs
            .link(ino, self.dir_ino(path), leaf(path))
            .unwrap_or_else(|e| panic!("link ino {ino} as {path}: {e}"));
        self.claim(path, ino);
        let s = self.m.file_state(ino);
        self.m.push(path, s, begun);
    }

    /// The file named `path` loses that name (unlink, or the target of a rename).
    pub fn name_gone(&mut self, path: &str) -> Option<u32> {
        let ino = self.owner(path)?;
        let f = self.m.files.get_mut(&ino).unwrap();
        f.names.remove(path);
        if f.names.is_empty() && !self.held.contains(&ino) {
            self.m.files.remove(&ino);
        }
        Some(ino)
    }

    pub fn unlink(&mut self, path: &str) {
        let begun = self.pos();
        self.fs
            .unlink(self.dir_ino(path), leaf(path))
            .unwrap_or_else(|e| panic!("unlink {path}: {e}"));
        self.name_gone(path);
        self.m.push(path, State::Absent, begun);
    }

    /// Renames a file (never a directory) over whatever `to` names.
    pub fn rename(&mut self, from: &str, to: &str) {
        let begun = self.pos();
        self.fs
            .rename(
                self.dir_ino(from),
                leaf(from),
                self.dir_ino(to),
                leaf(to),
                0,
            )
            .unwrap_or_else(|e| panic!("rename {from} to {to}: {e}"));
        let ino = self.owner(from).expect("rename of a known file");
        if self.owner(to) == Some(ino) {
            return; // two names of one inode: rename does nothing
        }
        self.name_gone(to);
        self.m.files.get_mut(&ino).unwrap().names.remove(from);
        self.m.push(from, State::Absent, begun);
        self.claim(to, ino);
        self.m.file_changed(ino, begun);
    }

    /// The file that `path` names.
    pub fn owner(&self, path: &str) -> Option<u32> {
        self.m
            .files
            .iter()
            .find(|(_, f)| f.names.contains(path))
            .map(|(i, _)| *i)
    }

    /// `path` names `ino` from now on.
    pub fn claim(&mut self, path: &str, ino: u32) {
        self.m
            .files
            .get_mut(&ino)
            .unwrap()
            .names
            .insert(path.to_owned());
    }

    pub fn hold(&mut self, ino: u32) {
        self.fs.hold(ino).unwrap();
        self.held.push(ino);
    }

    pub fn release(&mut self, ino: u32) {
        self.fs.release(ino).unwrap();
        if let Some(i) = self.held.iter().position(|h| *h == ino) {
            self.held.remove(i);
        }
        if self.m.files.get(&ino).is_some_and(|f| f.names.is_empty()) {
            self.m.files.remove(&ino);
        }
    }

    pub fn fsync(&mut self, ino: u32, datasync: bool) {
        self.fs
            .fsync(ino, datasync)
            .unwrap_or_else(|e| panic!("fsync ino {ino}: {e}"));
        let at = self.pos();
        let by = format!(
            "{} of ino {ino} returned at {at}",
            if datasync { "fdatasync" } else { "fsync" }
        );
        let covers = if datasync { Covers::Data } else { Covers::All };
        let Some(f) = self.m.files.get(&ino) else {
            return; // an orphan: nothing to acknowledge under a name
        };
        let names = f.names.clone();
        for n in &names {
            self.m.ack(n, at, covers, &by);
            let mut p = parent_of(n);
            while let Some(d) = p {
                self.m.ack(d, at, Covers::All, &by);
                p = parent_of(d);
            }
        }
    }

    /// Records an fsync's acknowledgement without calling it: for the tests that show the
    /// judge catches a lost fsync.
    pub fn fsync_that_does_nothing(&mut self, ino: u32) {
        let at = self.pos();
        let names = self.m.files[&ino].names.clone();
        for n in &names {
            self.m
                .ack(n, at, Covers::All, "an fsync that wrote nothing");
        }
    }

    /// `count` new files `f0`, `f1`... in the root, each `size` bytes from `rng`, then a
    /// sync: the volume a rewrite workload starts from.
    pub fn fill_files(
        &mut self,
        count: usize,
        size: usize,
        rng: &mut uf2fs_testkit::Rng,
    ) -> Vec<u32> {
        let files: Vec<u32> = (0..count).map(|i| self.create(&format!("f{i}"))).collect();
        for &f in &files {
            let d = rng.bytes(size);
            self.write(f, 0, &d);
        }
        self.sync();
        files
    }

    /// `mode=adaptive` with in-place rewrites off (every rewrite takes a new block or a hole),
    /// then files of `size` bytes filling `pct`% of the space available (`fill_files`): where
    /// the hole-filling workloads start.
    pub fn fill_adaptive(
        &mut self,
        size: usize,
        pct: usize,
        rng: &mut uf2fs_testkit::Rng,
    ) -> Vec<u32> {
        self.fs.set_options(uf2fs_engine::Options {
            mode: uf2fs_engine::AllocMode::Adaptive,
            ipu: uf2fs_engine::IpuPolicy::Off,
            ..self.fs.options()
        });
        let avail = self.fs.statfs().blocks_avail as usize;
        let count = avail * 4096 * pct / 100 / size;
        self.fill_files(count, size, rng)
    }

    pub fn sync(&mut self) {
        self.fs.sync().unwrap_or_else(|e| panic!("sync: {e}"));
        let at = self.pos();
        let by = format!("sync returned at {at}");
        let paths: Vec<String> = self.m.paths.keys().cloned().collect();
        for p in paths {
            self.m.ack(&p, at, Covers::All, &by);
        }
    }

    /// The crash: the Fs goes without unmount; the log and the model are what is left.
    pub fn crash(self) -> (CrashLog, Model) {
        drop(self.fs);
        let log = self.dev.log();
        (log, self.m)
    }
}

// ---------------------------------------------------------------------------------------
// Judging one crash image.

/// What a path shows on a mounted image.
pub fn observe(fs: &Fs, path: &str) -> Result<State, String> {
    let full = format!("/{path}");
    let ino = match fs.resolve(full.as_bytes(), false) {
        Ok(i) => i,
        Err(Error::NotFound) => return Ok(State::Absent),
        Err(e) => return Err(format!("{path}: lookup fails: {e}")),
    };
    let a = fs
        .getattr(ino)
        .map_err(|e| format!("{path}: getattr of ino {ino}: {e}"))?;
    match a.file_type {
        FileType::Directory => {
            fs.readdir(ino)
                .map_err(|e| format!("{path}: readdir of ino {ino}: {e}"))?;
            Ok(State::Dir)
        }
        FileType::Regular => {
            let mut data = vec![0u8; a.size as usize];
            let n = fs
                .read(ino, 0, &mut data)
                .map_err(|e| format!("{path}: read of ino {ino}: {e}"))?;
            if n != data.len() {
                return Err(format!("{path}: read {n} of {} bytes", a.size));
            }
            let xattrs = fs
                .xattrs(ino)
                .map_err(|e| format!("{path}: xattrs of ino {ino}: {e}"))?
                .into_iter()
                .collect();
            let attrs = Attrs {
                perm: a.perm,
                uid: a.uid,
                gid: a.gid,
            };
            Ok(State::File {
                data,
                xattrs,
                attrs,
            })
        }
        t => Err(format!("{path}: ino {ino} is a {t:?}, never made")),
    }
}

pub fn fnv(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &x| {
        (h ^ u64::from(x)).wrapping_mul(0x100_0000_01b3)
    })
}

pub fn describe(s: &State) -> String {
    match s {
        State::Absent => "absent".into(),
        State::Dir => "a directory".into(),
        State::File {
            data,
            xattrs,
            attrs,
        } => format!(
            "{} bytes (hash {:016x}), mode {:o}, owner {}:{}, xattrs {:?}",
            data.len(),
            fnv(data),
            attrs.perm,
            attrs.uid,
            attrs.gid,
            xattrs
                .iter()
                .map(|(k, v)| format!("{}={}B", String::from_utf8_lossy(k), v.len()))
                .collect::<Vec<_>>()
        ),
    }
}

/// Differences of a file's bytes from a version, for the failure message.
pub fn first_difference(got: &State, want: &State) -> String {
    match (got, want) {
        (State::File { data: g, .. }, State::File { data: w, .. }) => {
            match g.iter().zip(w.iter()).position(|(a, b)| a != b) {
                Some(i) => format!(" (bytes first differ at offset {i})"),
                None if g.len() != w.len() => " (one is a prefix of the other)".into(),
                None => " (bytes equal; xattrs, mode or owner differ)".into(),
            }
        }
        _ => String::new(),
    }
}

pub fn same_dim(got: &State, want: &State, dim: Covers) -> bool {
    match (got, want, dim) {
        (State::File { data: a, .. }, State::File { data: b, .. }, Covers::Data) => a == b,
        _ => got == want,
    }
}

/// Judges what `fs` shows against the model for a crash at position `q`.
pub fn judge_tree(fs: &Fs, m: &Model, q: usize) -> Result<(), String> {
    let mut seen: BTreeMap<String, State> = BTreeMap::new();
    for (path, h) in &m.paths {
        let got = observe(fs, path)?;
        for dim in [Covers::Data, Covers::All] {
            let (allowed, ack) = m.allowed(h, q, dim);
            if allowed
                .iter()
                .any(|&i| same_dim(&got, &h.versions[i].state, dim))
            {
                continue;
            }
            let mut msg = format!("/{path} shows {}, ", describe(&got));
            match ack {
                Some(a) => {
                    let _ = write!(
                        msg,
                        "but {} acknowledged version {} ({}{})",
                        a.by,
                        a.version,
                        describe(&h.versions[a.version].state),
                        first_difference(&got, &h.versions[a.version].state)
                    );
                }
                None => {
                    let _ = write!(msg, "which no operation begun before the crash made");
                }
            }
            let _ = write!(
                msg,
                "; allowed versions {allowed:?} of {} ({})",
                h.versions.len(),
                if dim == Covers::Data {
                    "bytes"
                } else {
                    "bytes and xattrs"
                }
            );
            return Err(msg);
        }
        seen.insert(path.clone(), got);
    }
    // No name the model never made, in any directory that is there.
    let mut dirs = vec![(String::new(), fs.root_ino())];
    while let Some((dir, ino)) = dirs.pop() {
        let entries = fs
            .readdir(ino)
            .map_err(|e| format!("/{dir}: readdir: {e}"))?;
        for e in entries {
            let name = String::from_utf8_lossy(&e.name).into_owned();
            let p = if dir.is_empty() {
                name
            } else {
                format!("{dir}/{name}")
            };
            match seen.get(&p) {
                Some(State::Dir) => dirs.push((p, e.ino)),
                Some(State::File { .. }) => {}
                Some(State::Absent) | None => {
                    return Err(format!(
                        "/{p} (ino {}) is listed but was never made there, or is gone",
                        e.ino
                    ))
                }
            }
        }
    }
    Ok(())
}

/// A crash image without copying it: a shared prefix image under the blocks that differ (the
/// writes of the open epoch that landed, then whatever recovery and unmount write). Copying
/// 64 MiB per crash point would cost more than mounting and checking it.
pub struct Overlay {
    base: Arc<Vec<u8>>,
    over: RwLock<HashMap<u64, Box<[u8]>>>,
    counters: IoCounters,
}

impl Overlay {
    pub fn new(base: Arc<Vec<u8>>, landed: HashMap<u64, Box<[u8]>>) -> Overlay {
        Overlay {
            base,
            over: RwLock::new(landed),
            counters: IoCounters::default(),
        }
    }

    /// Writes the image to `path`, leaving its zero chunks as holes.
    pub fn write_sparse(&self, path: &Path) {
        const CHUNK: usize = 64 << 10;
        static ZERO: [u8; CHUNK] = [0; CHUNK];
        let f = std::fs::File::create(path).unwrap();
        f.set_len(self.base.len() as u64).unwrap();
        for (i, c) in self.base.chunks(CHUNK).enumerate() {
            if c != &ZERO[..c.len()] {
                f.write_all_at(c, (i * CHUNK) as u64).unwrap();
            }
        }
        for (b, data) in self.over.read().unwrap().iter() {
            f.write_all_at(data, b * BLOCK_SIZE as u64).unwrap();
        }
    }
}

impl BlockDevice for Overlay {
    fn block_count(&self) -> u64 {
        (self.base.len() / BLOCK_SIZE) as u64
    }
    fn read_blocks(&self, blkaddr: u64, buf: &mut [u8], _: IoCause) -> std::io::Result<()> {
        let over = self.over.read().unwrap();
        for (i, dst) in buf.chunks_exact_mut(BLOCK_SIZE).enumerate() {
            let b = blkaddr + i as u64;
            match over.get(&b) {
                Some(d) => dst.copy_from_slice(d),
                None => {
                    let at = b as usize * BLOCK_SIZE;
                    let src = self.base.get(at..at + BLOCK_SIZE).ok_or_else(|| {
                        std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "past the end")
                    })?;
                    dst.copy_from_slice(src);
                }
            }
        }
        Ok(())
    }
    fn write_blocks(&self, blkaddr: u64, buf: &[u8], _: IoCause) -> std::io::Result<()> {
        if (blkaddr as usize + buf.len() / BLOCK_SIZE) * BLOCK_SIZE > self.base.len() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "past the end",
            ));
        }
        let mut over = self.over.write().unwrap();
        for (i, src) in buf.chunks_exact(BLOCK_SIZE).enumerate() {
            over.insert(blkaddr + i as u64, src.into());
        }
        Ok(())
    }
    fn flush(&self) -> std::io::Result<()> {
        Ok(())
    }
    fn counters(&self) -> &IoCounters {
        &self.counters
    }
    fn is_read_only(&self) -> bool {
        false
    }
}
