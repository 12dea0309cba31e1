//! Corrupt compressed clusters must give a clear error that names the inode and the cluster,
//! never a panic, and, where the cluster carries a checksum, never wrong bytes.
//!
//! The clusters are Linux's (the linux-compress fixture: LZ4, ZSTD, LZO and LZO-RLE files).
//! For the checksum cases, one file's inode gets the checksum flag and every one of its
//! clusters the CRC Linux would have written, so the same real clusters serve both ways.
//! Then single fields are broken (header clen: huge, past the blocks, zero, one short; the
//! stored checksum) and random bytes are flipped, and the cluster is read through the engine.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    reason = "test code: a panic is the failure report"
)]

use std::path::Path;
use uf2fs_engine::Fs;
use uf2fs_format::crc::{f2fs_crc32, F2FS_SUPER_MAGIC};
use uf2fs_format::{BLOCK_SIZE, COMPRESS_ADDR};
use uf2fs_testkit::{assert_fsck_clean, fixture, scratch, Rng};

const BS: usize = BLOCK_SIZE;

struct Cluster {
    index: u64,
    /// Addresses of the compressed blocks, header first.
    blocks: Vec<u32>,
}

struct File {
    ino: u32,
    cluster_bytes: u64,
    size: u64,
    clusters: Vec<Cluster>,
}

fn file(fs: &Fs, path: &str) -> File {
    let ino = fs.resolve(path.as_bytes(), false).unwrap();
    let c = fs.compression(ino).unwrap().expect("compressed");
    let cb = c.cluster_blocks();
    let mut slots = Vec::new();
    fs.data_slots(ino, &mut |fblk, a| {
        slots.push((fblk, a));
        Ok(())
    })
    .unwrap();
    let mut clusters: Vec<Cluster> = Vec::new();
    for (fblk, a) in slots {
        if a == COMPRESS_ADDR {
            clusters.push(Cluster {
                index: fblk / cb,
                blocks: Vec::new(),
            });
        } else if let Some(cl) = clusters.last_mut() {
            if fblk / cb == cl.index && uf2fs_format::names_block(a) {
                cl.blocks.push(a);
            }
        }
    }
    assert!(clusters.len() >= 3, "{path}: too few compressed clusters");
    File {
        ino,
        cluster_bytes: c.cluster_bytes() as u64,
        size: fs.getattr(ino).unwrap().size,
        clusters,
    }
}

/// The image on disk and a copy of it in memory: changes go to both, only where they are.
struct Image<'a> {
    path: &'a Path,
    bytes: Vec<u8>,
}

impl Image<'_> {
    fn set(&mut self, at: usize, new: &[u8]) {
        use std::os::unix::fs::FileExt;
        self.bytes[at..at + new.len()].copy_from_slice(new);
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(self.path)
            .unwrap();
        f.write_all_at(new, at as u64).unwrap();
    }

    /// Reads cluster `k` of `f` with `new` at byte `at`, then puts the old bytes back.
    fn read_with(&mut self, at: usize, new: &[u8], f: &File, k: u64) -> Result<Vec<u8>, String> {
        let old = self.bytes[at..at + new.len()].to_vec();
        self.set(at, new);
        let r = read_cluster(self.path, f, k);
        self.set(at, &old);
        r
    }
}

/// Reads cluster `k` of `f` from the image at `img`.
fn read_cluster(img: &Path, f: &File, k: u64) -> Result<Vec<u8>, String> {
    let fs = Fs::open(img).map_err(|e| format!("open: {e}"))?;
    let off = k * f.cluster_bytes;
    let mut buf = vec![0u8; f.cluster_bytes.min(f.size - off) as usize];
    let n = fs.read(f.ino, off, &mut buf).map_err(|e| e.to_string())?;
    buf.truncate(n);
    Ok(buf)
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

/// Sets the checksum bit of inode `ino` (every on-disk copy of its node block) and writes
/// the CRC of every compressed cluster of `f` into its header, as Linux would have.
fn add_checksums(img: &mut Image, f: &File) {
    let ino = f.ino;
    let inodes: Vec<usize> = img
        .bytes
        .chunks(BS)
        .enumerate()
        .filter(|(_, b)| {
            u32_at(b, 4072) == ino && u32_at(b, 4076) == ino && u32_at(b, 4080) >> 3 == 0
        })
        .map(|(i, _)| i)
        .collect();
    for i in inodes {
        let at = i * BS + 360 + 34; // i_compress_flag
        let v = img.bytes[at] | 1;
        img.set(at, &[v]);
    }
    for cl in &f.clusters {
        let h = cl.blocks[0] as usize * BS;
        let data: Vec<u8> = cl
            .blocks
            .iter()
            .flat_map(|&a| img.bytes[a as usize * BS..(a as usize + 1) * BS].to_vec())
            .collect();
        let clen = u32_at(&data, 0) as usize;
        let sum = f2fs_crc32(F2FS_SUPER_MAGIC, &data[24..24 + clen]);
        img.set(h + 4, &sum.to_le_bytes());
    }
}

fn names_cluster(e: &str, f: &File, k: u64) -> bool {
    e.contains(&format!("inode {}, cluster {k}", f.ino))
}

#[test]
fn corrupt_clusters_are_refused_by_name_never_misread() {
    let dir = scratch("corrupt-compressed");
    let path = fixture("linux-compress", &dir);
    let fs = Fs::open(&path).unwrap();
    let files: Vec<(&str, File)> = [
        "/compr/lz4_c16",
        "/compr/zstd_c8",
        "/compr/lzo_c4",
        "/compr/lzorle_c4",
    ]
    .into_iter()
    .map(|p| (p, file(&fs, p)))
    .collect();
    drop(fs);
    let mut img = Image {
        path: &path,
        bytes: std::fs::read(&path).unwrap(),
    };
    let mut rng = Rng::new(15);
    let mut checked = 0;
    for (name, f) in &files {
        let picks = [0, f.clusters.len() / 2, f.clusters.len() - 1];
        let mut wants = Vec::new();
        // Without checksums.
        for &p in &picks {
            let cl = &f.clusters[p];
            let k = cl.index;
            let want = read_cluster(&path, f, k).unwrap();
            let h = cl.blocks[0] as usize * BS;
            let room = cl.blocks.len() * BS - 24;
            // Header clen broken.
            for bad in [u32::MAX, room as u32 + 1, 0] {
                let e = img
                    .read_with(h, &bad.to_le_bytes(), f, k)
                    .expect_err("clen");
                assert!(
                    names_cluster(&e, f, k),
                    "{name} cluster {k}, clen {bad}: {e}"
                );
                checked += 1;
            }
            // Random damage: an error naming the cluster, or bytes; never a panic.
            for _ in 0..25 {
                let blk = cl.blocks[rng.below(cl.blocks.len() as u64) as usize] as usize;
                let at = blk * BS + rng.below(BS as u64) as usize;
                let v = img.bytes[at] ^ (1 + rng.below(255) as u8);
                if let Err(e) = img.read_with(at, &[v], f, k) {
                    assert!(names_cluster(&e, f, k), "{name} cluster {k}: {e}");
                }
                checked += 1;
            }
            wants.push(want);
        }
        // With checksums: the clusters read right; damage to clen, the stored checksum or the
        // compressed bytes is refused; damage to the padding after them changes nothing.
        add_checksums(&mut img, f);
        for (&p, want) in picks.iter().zip(&wants) {
            let cl = &f.clusters[p];
            let k = cl.index;
            assert_eq!(&read_cluster(&path, f, k).unwrap(), want, "{name} {k}");
            let h = cl.blocks[0] as usize * BS;
            let clen = u32_at(&img.bytes, h) as usize;
            let room = cl.blocks.len() * BS - 24;
            let v = img.bytes[h + 4] ^ 0x10;
            let e = img
                .read_with(h + 4, &[v], f, k)
                .expect_err("checksum field");
            assert!(e.contains("checksum") && names_cluster(&e, f, k), "{e}");
            let e = img
                .read_with(h, &(clen as u32 - 1).to_le_bytes(), f, k)
                .expect_err("clen - 1");
            assert!(names_cluster(&e, f, k), "{e}");
            for _ in 0..25 {
                let i = 24 + rng.below(room as u64) as usize;
                let at = cl.blocks[i / BS] as usize * BS + i % BS;
                let v = img.bytes[at] ^ (1 + rng.below(255) as u8);
                let r = img.read_with(at, &[v], f, k);
                if i < 24 + clen {
                    let e = r.expect_err("damaged compressed bytes with a checksum");
                    assert!(e.contains("checksum") && names_cluster(&e, f, k), "{e}");
                } else {
                    assert_eq!(&r.unwrap(), want, "{name} {k}: padding damage");
                }
                checked += 1;
            }
            // The file's other clusters still read while this one is broken.
            let other = f.clusters[(p + 1) % f.clusters.len()].index;
            let good = read_cluster(&path, f, other).unwrap();
            let h2 = img.bytes[h..h + 4].to_vec();
            img.set(h, &u32::MAX.to_le_bytes());
            assert_eq!(read_cluster(&path, f, other).unwrap(), good);
            img.set(h, &h2);
        }
    }
    eprintln!("{checked} damaged clusters read");

    // Impossible compression fields in the inode are refused by name, as Linux's inode
    // sanity check refuses them.
    let f = &files[0].1;
    let copies: Vec<usize> = img
        .bytes
        .chunks(BS)
        .enumerate()
        .filter(|(_, b)| {
            u32_at(b, 4072) == f.ino && u32_at(b, 4076) == f.ino && u32_at(b, 4080) >> 3 == 0
        })
        .map(|(i, _)| i * BS)
        .collect();
    for (at, value, field) in [
        (32, 4u8, "i_compress_algorithm"),
        (33, 1, "i_log_cluster_size"),
        (33, 9, "i_log_cluster_size"),
    ] {
        let old: Vec<u8> = copies.iter().map(|&c| img.bytes[c + 360 + at]).collect();
        for &c in &copies {
            img.set(c + 360 + at, &[value]);
        }
        let e = read_cluster(&path, f, 0).expect_err(field);
        assert!(
            e.contains(field) && e.contains(&format!("inode {}", f.ino)),
            "{e}"
        );
        for (&c, &o) in copies.iter().zip(&old) {
            img.set(c + 360 + at, &[o]);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A write that must merge with a damaged cluster fails by itself, naming the inode and the
/// cluster, before anything changes: the volume stays writable, other clusters of the same
/// file and other files take writes, and fsck.f2fs finds the result clean.
#[test]
fn a_write_into_a_damaged_cluster_fails_alone() {
    let dir = scratch("corrupt-compressed-write");
    let path = fixture("linux-compress", &dir);
    let fs = Fs::open(&path).unwrap();
    let f = file(&fs, "/compr/lz4_c16");
    drop(fs);
    let mut img = Image {
        path: &path,
        bytes: std::fs::read(&path).unwrap(),
    };
    let bad = &f.clusters[f.clusters.len() / 2];
    img.set(bad.blocks[0] as usize * BS, &u32::MAX.to_le_bytes());
    let good = &f.clusters[0];

    let fs = Fs::open_rw(&path).unwrap();
    let at = bad.index * f.cluster_bytes + 100;
    let e = fs
        .write(f.ino, at, b"into the damaged cluster")
        .unwrap_err();
    assert!(names_cluster(&e.to_string(), &f, bad.index), "{e}");
    let e = fs.truncate(f.ino, at).unwrap_err();
    assert!(names_cluster(&e.to_string(), &f, bad.index), "{e}");
    // The volume takes writes still: another cluster of the file, and a new file.
    let at = good.index * f.cluster_bytes + 100;
    fs.write(f.ino, at, b"into a sound cluster").unwrap();
    let n = fs
        .create_node(
            fs.root_ino(),
            b"after",
            uf2fs_engine::NewInode {
                mode: 0o100644,
                uid: 0,
                gid: 0,
                rdev: (0, 0),
            },
        )
        .unwrap();
    fs.write(n, 0, &vec![7u8; 50_000]).unwrap();
    fs.unmount().unwrap();
    assert_fsck_clean(&path);
    let fs = Fs::open(&path).unwrap();
    let mut got = vec![0u8; 20];
    fs.read(f.ino, at, &mut got).unwrap();
    assert_eq!(&got, b"into a sound cluster");
    let _ = std::fs::remove_dir_all(&dir);
}
