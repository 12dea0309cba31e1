//! Thousands of seeded random operations run against the engine and against a model of the
//! tree held in memory. Every operation must give the model's result (the same errno on
//! failure); after every checkpoint and every remount the whole tree (names, inode numbers,
//! types, bytes, sizes, link counts, symlink targets) must equal the model; the final image
//! must pass fsck.f2fs and read back in Linux with the model's bytes.
//! `UF2FS_RANDOM_OPS` sets the count per seed (default 2500).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    reason = "test code: a panic is the failure report"
)]

mod common;

use std::collections::{BTreeMap, HashMap};
use uf2fs_engine::{
    Error, FileType, Fs, FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE, FALLOC_FL_ZERO_RANGE,
    RENAME_EXCHANGE, RENAME_NOREPLACE, XATTR_CREATE, XATTR_REPLACE,
};
use uf2fs_testkit::{assert_fsck_clean, kernel_f2fs, scratch, Rng};

#[derive(Clone, Debug)]
enum Kind {
    File(Vec<u8>),
    Dir(BTreeMap<Vec<u8>, u64>),
    Symlink(Vec<u8>),
}

#[derive(Clone, Debug)]
struct Node {
    kind: Kind,
    links: u32,
    parent: u64,
    xattrs: BTreeMap<Vec<u8>, Vec<u8>>,
}

/// The model: inodes by our own id, each mapped to the engine's inode number.
struct Model {
    nodes: HashMap<u64, Node>,
    ino: HashMap<u64, u32>,
    next: u64,
}

const ROOT: u64 = 0;

impl Model {
    fn dir(&self, id: u64) -> &BTreeMap<Vec<u8>, u64> {
        match &self.nodes[&id].kind {
            Kind::Dir(d) => d,
            _ => panic!("not a dir"),
        }
    }
    fn dir_mut(&mut self, id: u64) -> &mut BTreeMap<Vec<u8>, u64> {
        match &mut self.nodes.get_mut(&id).unwrap().kind {
            Kind::Dir(d) => d,
            _ => panic!("not a dir"),
        }
    }
    /// A random node whose kind passes `want` (ids in order, so a seed replays), if any.
    fn pick(&self, rng: &mut Rng, want: impl Fn(&Kind) -> bool) -> Option<u64> {
        let mut ids: Vec<u64> = self
            .nodes
            .iter()
            .filter(|(_, x)| want(&x.kind))
            .map(|(k, _)| *k)
            .collect();
        if ids.is_empty() {
            return None;
        }
        ids.sort();
        Some(ids[rng.below(ids.len() as u64) as usize])
    }

    fn dirs(&self) -> Vec<u64> {
        let mut v: Vec<u64> = self
            .nodes
            .iter()
            .filter(|(_, n)| matches!(n.kind, Kind::Dir(_)))
            .map(|(k, _)| *k)
            .collect();
        v.sort();
        v
    }
    fn is_ancestor(&self, a: u64, mut d: u64) -> bool {
        loop {
            if d == a {
                return true;
            }
            if d == ROOT {
                return false;
            }
            d = self.nodes[&d].parent;
        }
    }
    fn drop_link(&mut self, id: u64) {
        let n = self.nodes.get_mut(&id).unwrap();
        n.links -= 1;
        if n.links == 0 || matches!(n.kind, Kind::Dir(_)) {
            self.nodes.remove(&id);
            self.ino.remove(&id);
        }
    }
}

fn errno(r: Result<(), Error>) -> i32 {
    match r {
        Ok(()) => 0,
        Err(e) => e.errno(),
    }
}

fn check_tree(fs: &Fs, m: &Model, dir: u64, path: &str) {
    let ino = m.ino[&dir];
    let mut got: Vec<(Vec<u8>, u32)> = fs
        .readdir(ino)
        .unwrap()
        .into_iter()
        .map(|e| (e.name, e.ino))
        .collect();
    got.sort();
    let want: Vec<(Vec<u8>, u32)> = m
        .dir(dir)
        .iter()
        .map(|(n, id)| (n.clone(), m.ino[id]))
        .collect();
    assert_eq!(got, want, "entries of {path}");
    for (name, id) in m.dir(dir) {
        let p = format!("{path}/{}", String::from_utf8_lossy(name));
        let node = &m.nodes[id];
        let a = fs.getattr(m.ino[id]).unwrap();
        let xs: BTreeMap<Vec<u8>, Vec<u8>> = fs.xattrs(m.ino[id]).unwrap().into_iter().collect();
        assert_eq!(xs, node.xattrs, "{p}: xattrs");
        match &node.kind {
            Kind::Dir(_) => {
                assert_eq!(
                    (a.file_type, a.nlink),
                    (FileType::Directory, node.links),
                    "{p}"
                );
                check_tree(fs, m, *id, &p);
            }
            Kind::File(data) => {
                assert_eq!(
                    (a.file_type, a.size, a.nlink),
                    (FileType::Regular, data.len() as u64, node.links),
                    "{p}"
                );
                let mut buf = vec![0u8; data.len()];
                assert_eq!(fs.read(m.ino[id], 0, &mut buf).unwrap(), data.len(), "{p}");
                assert!(buf == *data, "{p}: bytes differ");
            }
            Kind::Symlink(t) => {
                assert_eq!(fs.readlink(m.ino[id]).unwrap(), *t, "{p}");
            }
        }
    }
}

/// A new inode of `mode` whose owner depends on the step: several uids and gids, so that a
/// quota image's files count more than root.
fn owned(mode: u16, step: usize) -> uf2fs_engine::NewInode {
    uf2fs_engine::NewInode {
        mode,
        uid: 1000 + (step % 7) as u32,
        gid: 100 + (step % 3) as u32,
        rdev: (0, 0),
    }
}

fn name(rng: &mut Rng) -> Vec<u8> {
    match rng.below(12) {
        0 => vec![b'L'; 200 + rng.below(56) as usize],
        1 => format!("long-{}", "x".repeat(rng.below(40) as usize)).into_bytes(),
        _ => format!("n{}", rng.below(14)).into_bytes(),
    }
}

/// The most bytes a compressed file gets in seed 4 (see the write step).
const COMPRESSED_MAX: u64 = 11_000_000;

fn run(seed: u64) -> (std::path::PathBuf, Model, usize) {
    let count: usize = std::env::var("UF2FS_RANDOM_OPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2500);
    let dir = scratch(&format!("random-{seed}"));
    let features = if seed.is_multiple_of(2) {
        0
    } else {
        uf2fs_engine::parse_features(
            "extra_attr,inode_checksum,flexible_inline_xattr,inode_crtime,sb_checksum",
        )
        .unwrap()
    };
    let img = if seed == 3 {
        // mkfs.f2fs's quota image (user, group and project quota files) with casefold on:
        // the quota files must match every change (fsck.f2fs recounts them).
        let img = dir.join("img");
        uf2fs_testkit::mkfs_f2fs(
            &img,
            768,
            &[
                "-O",
                "extra_attr,inode_checksum,quota,project_quota,casefold",
                "-C",
                "utf8",
            ],
        );
        img
    } else if seed == 4 {
        // A compressed, casefolded, quota image (issue 15's judge) whose root is
        // `chattr +c`: every file and directory made in it is compressed (zstd with checksums
        // in this mount, Linux's default lz4 after each remount), so writes, overwrites and
        // truncations go through compressed clusters while quota counts them.
        let img = dir.join("img");
        uf2fs_testkit::mkfs_f2fs(
            &img,
            768,
            &[
                "-O",
                "extra_attr,inode_checksum,quota,project_quota,casefold,compression",
                "-C",
                "utf8",
            ],
        );
        img
    } else {
        common::fresh_image(&dir, 768, features)
    };
    let compressed = seed == 4;
    let mut fs = Fs::open_rw(&img).unwrap();
    if compressed {
        let mut o = fs.options();
        o.compress.algorithm = uf2fs_engine::compress::Algorithm::Zstd;
        o.compress.log_cluster_size = 3;
        o.compress.checksum = true;
        fs.set_options(o);
        let root = fs.root_ino();
        // Compressed and casefolded (+c +F) from the root down; the model's names never
        // differ only in case.
        fs.set_fs_flags(root, fs.fs_flags(root).unwrap() | 0x4 | 0x4000_0000)
            .unwrap();
    }
    let mut m = Model {
        nodes: HashMap::new(),
        ino: HashMap::new(),
        next: 1,
    };
    m.nodes.insert(
        ROOT,
        Node {
            kind: Kind::Dir(BTreeMap::new()),
            links: 2,
            parent: ROOT,
            xattrs: BTreeMap::new(),
        },
    );
    m.ino.insert(ROOT, fs.root_ino());
    let mut rng = Rng::new(seed);
    let mut done = 0;
    for step in 0..count {
        let dirs = m.dirs();
        let d = dirs[rng.below(dirs.len() as u64) as usize];
        let dino = m.ino[&d];
        let n = name(&mut rng);
        let existing = m.dir(d).get(&n).copied();
        let op = rng.below(100);
        let what;
        let (got, want) = match op {
            0..=14 => {
                what = "create";
                let r = fs.create_node(dino, &n, owned(0o100644, step));
                let want = if existing.is_some() { 17 } else { 0 };
                if let Ok(ino) = r {
                    let id = m.next;
                    m.next += 1;
                    m.nodes.insert(
                        id,
                        Node {
                            kind: Kind::File(Vec::new()),
                            links: 1,
                            parent: d,
                            xattrs: BTreeMap::new(),
                        },
                    );
                    m.ino.insert(id, ino);
                    m.dir_mut(d).insert(n.clone(), id);
                }
                (errno(r.map(|_| ())), want)
            }
            15..=22 => {
                what = "mkdir";
                let r = fs.create_node(dino, &n, owned(0o40755, step));
                let want = if existing.is_some() { 17 } else { 0 };
                if let Ok(ino) = r {
                    let id = m.next;
                    m.next += 1;
                    m.nodes.insert(
                        id,
                        Node {
                            kind: Kind::Dir(BTreeMap::new()),
                            links: 2,
                            parent: d,
                            xattrs: BTreeMap::new(),
                        },
                    );
                    m.nodes.get_mut(&d).unwrap().links += 1;
                    m.ino.insert(id, ino);
                    m.dir_mut(d).insert(n.clone(), id);
                }
                (errno(r.map(|_| ())), want)
            }
            23..=25 => {
                what = "symlink";
                let max = if rng.below(4) == 0 { 4000 } else { 60 };
                let target = vec![b't'; 1 + rng.below(max) as usize];
                let want = if existing.is_some() { 17 } else { 0 };
                let r = fs.create_node(dino, &n, owned(0o120777, step));
                if let Ok(ino) = r {
                    fs.write(ino, 0, &target).unwrap();
                    let id = m.next;
                    m.next += 1;
                    m.nodes.insert(
                        id,
                        Node {
                            kind: Kind::Symlink(target),
                            links: 1,
                            parent: d,
                            xattrs: BTreeMap::new(),
                        },
                    );
                    m.ino.insert(id, ino);
                    m.dir_mut(d).insert(n.clone(), id);
                }
                (errno(r.map(|_| ())), want)
            }
            26..=49 => {
                what = "write";
                let Some(id) = m.pick(&mut rng, |k| matches!(k, Kind::File(_))) else {
                    continue;
                };
                let Kind::File(data) = &m.nodes[&id].kind else {
                    unreachable!()
                };
                let len = match rng.below(10) {
                    0 => 1 + rng.below(3_000_000),
                    1..=3 => 1 + rng.below(70_000),
                    _ => 1 + rng.below(5000),
                } as usize;
                let off = match rng.below(6) {
                    0 => data.len() as u64,
                    1 => rng.below(20_000_000),
                    _ => rng.below(data.len() as u64 + 1),
                };
                // fsck.f2fs 1.15, the judge, miscounts file offsets in a compressed file
                // after a hole in an indirect node (fixed upstream by "f2fs: should use inode
                // when updating file offset"; Linux writes such files too): compressed files
                // stay within the inode's and direct nodes' 2 896 blocks here.
                let (off, len) = if compressed {
                    let off = off % COMPRESSED_MAX;
                    (off, len.min((COMPRESSED_MAX - off) as usize).max(1))
                } else {
                    (off, len)
                };
                // Compressible bytes where clusters are compressed: runs of a few values.
                let bytes = if compressed {
                    let mut b = rng.bytes(len);
                    for (i, x) in b.iter_mut().enumerate() {
                        if i % 97 != 0 {
                            *x = (i / 700 % 5) as u8;
                        }
                    }
                    b
                } else {
                    rng.bytes(len)
                };
                let r = fs.write(m.ino[&id], off, &bytes).map(|_| ());
                let Kind::File(data) = &mut m.nodes.get_mut(&id).unwrap().kind else {
                    unreachable!()
                };
                let end = off as usize + len;
                if data.len() < end {
                    data.resize(end, 0);
                }
                data[off as usize..end].copy_from_slice(&bytes);
                (errno(r), 0)
            }
            50..=56 => {
                what = "truncate";
                let Some(id) = m.pick(&mut rng, |k| matches!(k, Kind::File(_))) else {
                    continue;
                };
                let Kind::File(data) = &m.nodes[&id].kind else {
                    unreachable!()
                };
                let size = if rng.below(3) == 0 {
                    rng.below(if compressed {
                        COMPRESSED_MAX
                    } else {
                        8_000_000
                    })
                } else {
                    rng.below(data.len() as u64 + 1)
                };
                let r = fs.truncate(m.ino[&id], size);
                let Kind::File(data) = &mut m.nodes.get_mut(&id).unwrap().kind else {
                    unreachable!()
                };
                data.resize(size as usize, 0);
                (errno(r), 0)
            }
            57..=60 => {
                what = "fallocate";
                let Some(id) = m.pick(&mut rng, |k| matches!(k, Kind::File(_))) else {
                    continue;
                };
                let Kind::File(data) = &m.nodes[&id].kind else {
                    unreachable!()
                };
                let off = rng.below(data.len() as u64 + 200_000);
                let len = 1 + rng.below(300_000);
                let mode = [
                    0,
                    FALLOC_FL_KEEP_SIZE,
                    FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE,
                    FALLOC_FL_ZERO_RANGE,
                    FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE,
                ][rng.below(5) as usize];
                let r = fs.fallocate(m.ino[&id], mode, off, len);
                if compressed {
                    // Refused on compressed files (EOPNOTSUPP), changing nothing.
                    (errno(r), 95)
                } else {
                    let Kind::File(data) = &mut m.nodes.get_mut(&id).unwrap().kind else {
                        unreachable!()
                    };
                    let end = (off + len) as usize;
                    if mode & FALLOC_FL_KEEP_SIZE == 0 && data.len() < end {
                        data.resize(end, 0);
                    }
                    let zeroes = mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE) != 0;
                    if zeroes && (off as usize) < data.len() {
                        let e = end.min(data.len());
                        data[off as usize..e].fill(0);
                    }
                    (errno(r), 0)
                }
            }
            61..=66 => {
                what = "unlink";
                let r = fs.unlink(dino, &n);
                let want = match existing.map(|id| &m.nodes[&id].kind) {
                    None => 2,
                    Some(Kind::Dir(_)) => 21,
                    Some(_) => 0,
                };
                if want == 0 {
                    let id = m.dir_mut(d).remove(&n).unwrap();
                    m.drop_link(id);
                }
                (errno(r), want)
            }
            67..=72 => {
                what = "rmdir";
                let r = fs.rmdir(dino, &n);
                let want = match existing.map(|id| (&m.nodes[&id].kind, id)) {
                    None => 2,
                    Some((Kind::Dir(c), _)) if !c.is_empty() => 39,
                    Some((Kind::Dir(_), _)) => 0,
                    Some(_) => 20,
                };
                if want == 0 {
                    let id = m.dir_mut(d).remove(&n).unwrap();
                    m.nodes.get_mut(&d).unwrap().links -= 1;
                    m.drop_link(id);
                }
                (errno(r), want)
            }
            73..=77 => {
                what = "link";
                let Some(id) = m.pick(&mut rng, |k| !matches!(k, Kind::Dir(_))) else {
                    continue;
                };
                let r = fs.link(m.ino[&id], dino, &n);
                let want = if existing.is_some() { 17 } else { 0 };
                if want == 0 {
                    m.nodes.get_mut(&id).unwrap().links += 1;
                    m.dir_mut(d).insert(n.clone(), id);
                }
                (errno(r), want)
            }
            78..=92 => {
                what = "rename";
                let d2 = dirs[rng.below(dirs.len() as u64) as usize];
                let n2 = name(&mut rng);
                let flags = match rng.below(8) {
                    0 => RENAME_NOREPLACE,
                    1 => RENAME_EXCHANGE,
                    _ => 0,
                };
                let r = fs.rename(dino, &n, m.ino[&d2], &n2, flags);
                let src = existing;
                let dst = m.dir(d2).get(&n2).copied();
                let want = match (src, dst) {
                    (None, _) => 2,
                    (Some(s), _)
                        if matches!(m.nodes[&s].kind, Kind::Dir(_))
                            && m.is_ancestor(s, d2)
                            && !(d == d2 && n == n2) =>
                    {
                        22
                    }
                    _ if d == d2 && n == n2 => 0,
                    (Some(_), None) if flags == RENAME_EXCHANGE => 2,
                    (Some(s), Some(t)) if s == t && flags != RENAME_EXCHANGE => 0,
                    (Some(_), Some(_)) if flags == RENAME_NOREPLACE => 17,
                    (Some(_), Some(t))
                        if flags == RENAME_EXCHANGE
                            && matches!(m.nodes[&t].kind, Kind::Dir(_))
                            && m.is_ancestor(t, d) =>
                    {
                        22
                    }
                    (Some(_), Some(_)) if flags == RENAME_EXCHANGE => 0,
                    (Some(s), Some(t)) => match (&m.nodes[&s].kind, &m.nodes[&t].kind) {
                        (Kind::Dir(_), Kind::Dir(c)) if !c.is_empty() => 39,
                        (Kind::Dir(_), Kind::Dir(_)) => 0,
                        (Kind::Dir(_), _) => 20,
                        (_, Kind::Dir(_)) => 21,
                        _ => 0,
                    },
                    (Some(_), None) => 0,
                };
                if want == 0 && !(d == d2 && n == n2) {
                    let s = src.unwrap();
                    let s_dir = matches!(m.nodes[&s].kind, Kind::Dir(_));
                    if flags == RENAME_EXCHANGE {
                        let t = dst.unwrap();
                        let t_dir = matches!(m.nodes[&t].kind, Kind::Dir(_));
                        m.dir_mut(d).insert(n.clone(), t);
                        m.dir_mut(d2).insert(n2.clone(), s);
                        if s_dir {
                            m.nodes.get_mut(&s).unwrap().parent = d2;
                        }
                        if t_dir {
                            m.nodes.get_mut(&t).unwrap().parent = d;
                        }
                        if s_dir != t_dir && d != d2 {
                            let (a, b) = if s_dir { (d2, d) } else { (d, d2) };
                            m.nodes.get_mut(&a).unwrap().links += 1;
                            m.nodes.get_mut(&b).unwrap().links -= 1;
                        }
                    } else if dst != Some(s) {
                        if let Some(t) = dst {
                            let t_dir = matches!(m.nodes[&t].kind, Kind::Dir(_));
                            if t_dir {
                                m.nodes.get_mut(&d2).unwrap().links -= 1;
                            }
                            m.drop_link(t);
                        }
                        m.dir_mut(d).remove(&n);
                        m.dir_mut(d2).insert(n2.clone(), s);
                        if s_dir {
                            m.nodes.get_mut(&s).unwrap().parent = d2;
                            if d != d2 {
                                m.nodes.get_mut(&d).unwrap().links -= 1;
                                m.nodes.get_mut(&d2).unwrap().links += 1;
                            }
                        }
                    }
                }
                (errno(r), want)
            }
            93..=94 => {
                what = "xattr";
                let mut ids: Vec<u64> = m.nodes.keys().copied().collect();
                ids.sort();
                let id = ids[rng.below(ids.len() as u64) as usize];
                let xname = format!("user.x{}", rng.below(6)).into_bytes();
                let have = m.nodes[&id].xattrs.contains_key(&xname);
                let op = rng.below(4);
                let (r, want) = if op == 0 {
                    let want = if have { 0 } else { 61 };
                    let r = fs.removexattr(m.ino[&id], &xname);
                    if want == 0 {
                        m.nodes.get_mut(&id).unwrap().xattrs.remove(&xname);
                    }
                    (r, want)
                } else {
                    let flags = [0, XATTR_CREATE, XATTR_REPLACE][(op - 1) as usize];
                    let len = if rng.below(5) == 0 {
                        900 + rng.below(1500)
                    } else {
                        rng.below(40)
                    };
                    let value = rng.bytes(len as usize);
                    let want = match (flags, have) {
                        (XATTR_CREATE, true) => 17,
                        (XATTR_REPLACE, false) => 61,
                        _ => 0,
                    };
                    let r = fs.setxattr(m.ino[&id], &xname, &value, flags);
                    // The whole list must fit in the inode and its xattr node: ENOSPC then,
                    // nothing changed.
                    if want == 0 && matches!(r, Err(Error::NoRoom(_))) {
                        (Ok(()), 0)
                    } else {
                        if want == 0 {
                            m.nodes
                                .get_mut(&id)
                                .unwrap()
                                .xattrs
                                .insert(xname.clone(), value);
                        }
                        (r, want)
                    }
                };
                (errno(r), want)
            }
            95..=96 => {
                what = "sync";
                fs.sync().unwrap();
                check_tree(&fs, &m, ROOT, "");
                (0, 0)
            }
            _ => {
                what = "remount";
                fs.unmount().unwrap();
                fs = Fs::open_rw(&img).unwrap();
                check_tree(&fs, &m, ROOT, "");
                (0, 0)
            }
        };
        assert_eq!(
            got,
            want,
            "seed {seed} step {step}: {what} {:?} in {d}",
            String::from_utf8_lossy(&n)
        );
        done += 1;
    }
    fs.unmount().unwrap();
    let fs = Fs::open(&img).unwrap();
    check_tree(&fs, &m, ROOT, "");
    assert_fsck_clean(&img);
    let report = fs.check().unwrap();
    assert!(
        report.findings.is_empty(),
        "uf2fs fsck disagrees with fsck.f2fs: {:#?}",
        report.findings
    );
    (img, m, done)
}

/// A busybox script that prints "path sha256" for every regular file, for Linux's view.
const LINUX_SUMS: &str =
    "cd /mnt && find . -type f -exec sha256sum {} + | sort -k2 > $OUT/sums.txt\n";

fn model_sums(m: &Model, dir: u64, path: &str, out: &mut Vec<(String, Vec<u8>)>) {
    for (name, id) in m.dir(dir) {
        let p = format!("{path}/{}", String::from_utf8_lossy(name));
        match &m.nodes[id].kind {
            Kind::Dir(_) => model_sums(m, *id, &p, out),
            Kind::File(d) => out.push((p, d.clone())),
            Kind::Symlink(_) => {}
        }
    }
}

fn random_ops_then_linux(seed: u64) {
    let (img, m, done) = run(seed);
    let dir = img.parent().unwrap().to_path_buf();
    let k = kernel_f2fs(&img, LINUX_SUMS, &dir.join("k"));
    assert_eq!(k.exit, 0, "{}", k.job_log);
    assert!(k.f2fs_complaints().is_empty(), "{:#?}", k.f2fs_complaints());
    let linux = String::from_utf8(std::fs::read(k.out.join("sums.txt")).unwrap()).unwrap();
    let mut files = Vec::new();
    model_sums(&m, ROOT, ".", &mut files);
    // Hard links appear once per name in both.
    assert_eq!(linux.lines().count(), files.len(), "files Linux sees");
    let by_path: HashMap<String, String> = linux
        .lines()
        .filter_map(|l| l.split_once("  "))
        .map(|(h, p)| (p.to_owned(), h.to_owned()))
        .collect();
    for (p, data) in &files {
        let mut hasher = Sha256::default();
        hasher.update(data);
        assert_eq!(
            by_path.get(p).map(String::as_str),
            Some(hasher.hex().as_str()),
            "{p}: Linux's bytes"
        );
    }
    eprintln!(
        "seed {seed}: {done} operations matched the model; {} files read back by Linux",
        files.len()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn seed_1_extra_features() {
    random_ops_then_linux(1);
}

#[test]
fn seed_2_default_features() {
    random_ops_then_linux(2);
}

#[test]
fn seed_3_quota_and_casefold_image() {
    random_ops_then_linux(3);
}

#[test]
fn seed_4_compressed_casefolded_quota_image() {
    random_ops_then_linux(4);
}

/// SHA-256, for comparing with busybox's sha256sum (no dependency for one test).
#[derive(Default)]
struct Sha256 {
    data: Vec<u8>,
}

impl Sha256 {
    fn update(&mut self, d: &[u8]) {
        self.data.extend_from_slice(d);
    }
    fn hex(&self) -> String {
        let out = std::process::Command::new("sha256sum")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .and_then(|mut c| {
                use std::io::Write;
                c.stdin.take().unwrap().write_all(&self.data)?;
                c.wait_with_output()
            })
            .unwrap();
        String::from_utf8(out.stdout)
            .unwrap()
            .split_whitespace()
            .next()
            .unwrap()
            .to_owned()
    }
}
