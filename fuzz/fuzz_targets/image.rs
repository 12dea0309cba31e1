//! Whole-image fuzzing: linux-default with up to 64 bytes patched, mounted and walked.
//!
//! Input: a list of patches, 5 bytes each: a LE u32 byte offset (taken modulo the image
//! length) and the new byte value; at most 64 are used, a trailing partial patch is ignored.
//! The image is decompressed once; each run serves the patched blocks from a small overlay
//! and every other block from the shared copy, so no run copies 256 MiB.
//!
//! If the patched image mounts: info(), statfs(), segment_usage(), then a walk from the root
//! that reads every regular file (up to 256 KiB, plus its extents), every symlink target, the
//! xattrs of every entry, and for every directory its listing and a lookup of up to 20 of its
//! names (each checked to find the inode the listing gave).
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::collections::HashMap;
use std::io;
use std::sync::OnceLock;
use uf2fs_device::{BlockDevice, IoCause, IoCounters, BLOCK_SIZE};
use uf2fs_engine::{Error, FileType, Fs, WalkItem};
use uf2fs_fuzz::{fixture_full, sink};

const MAX_PATCHES: usize = 64;
const MAX_FILE_READ: u64 = 256 * 1024;
const MAX_LOOKUPS: usize = 20;
const MAX_EXTENTS: usize = 4096;

fn base() -> &'static [u8] {
    static IMG: OnceLock<Vec<u8>> = OnceLock::new();
    IMG.get_or_init(|| {
        let mut v = fixture_full("linux-default");
        v.truncate(v.len() / BLOCK_SIZE * BLOCK_SIZE);
        v
    })
}

/// A read-only device: the shared image with a few blocks replaced.
struct Overlay {
    base: &'static [u8],
    patched: HashMap<u64, Box<[u8; BLOCK_SIZE]>>,
    counters: IoCounters,
}

impl Overlay {
    fn new(patches: &[u8]) -> Overlay {
        let base = base();
        let mut patched: HashMap<u64, Box<[u8; BLOCK_SIZE]>> = HashMap::new();
        for p in patches.chunks_exact(5).take(MAX_PATCHES) {
            let off = u32::from_le_bytes([p[0], p[1], p[2], p[3]]) as usize % base.len();
            let blk = (off / BLOCK_SIZE) as u64;
            let b = patched.entry(blk).or_insert_with(|| {
                let start = blk as usize * BLOCK_SIZE;
                let mut b = Box::new([0u8; BLOCK_SIZE]);
                b.copy_from_slice(&base[start..start + BLOCK_SIZE]);
                b
            });
            b[off % BLOCK_SIZE] = p[4];
        }
        Overlay {
            base,
            patched,
            counters: IoCounters::default(),
        }
    }
}

impl BlockDevice for Overlay {
    fn block_count(&self) -> u64 {
        (self.base.len() / BLOCK_SIZE) as u64
    }

    fn read_blocks(&self, blkaddr: u64, buf: &mut [u8], cause: IoCause) -> io::Result<()> {
        let n = (buf.len() / BLOCK_SIZE) as u64;
        if buf.len() % BLOCK_SIZE != 0
            || blkaddr
                .checked_add(n)
                .is_none_or(|e| e > self.block_count())
        {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "past the end"));
        }
        for (i, dst) in buf.chunks_exact_mut(BLOCK_SIZE).enumerate() {
            let blk = blkaddr + i as u64;
            match self.patched.get(&blk) {
                Some(b) => dst.copy_from_slice(&b[..]),
                None => {
                    let s = blk as usize * BLOCK_SIZE;
                    dst.copy_from_slice(&self.base[s..s + BLOCK_SIZE]);
                }
            }
        }
        self.counters.record_read(cause, n);
        Ok(())
    }

    fn write_blocks(&self, _: u64, _: &[u8], _: IoCause) -> io::Result<()> {
        Err(io::Error::new(io::ErrorKind::PermissionDenied, "read-only"))
    }

    fn flush(&self) -> io::Result<()> {
        Ok(())
    }

    fn counters(&self) -> &IoCounters {
        &self.counters
    }

    fn is_read_only(&self) -> bool {
        true
    }
}

fn read_file(fs: &Fs, ino: u32, size: u64) {
    let mut buf = vec![0u8; 64 * 1024];
    let mut off = 0u64;
    while off < MAX_FILE_READ {
        match fs.read(ino, off, &mut buf) {
            Ok(0) => break,
            Ok(n) => {
                assert!(n <= buf.len());
                assert!(off + n as u64 <= size, "read past i_size");
                off += n as u64;
            }
            Err(e) => {
                sink(e.to_string());
                break;
            }
        }
    }
    let mut count = 0usize;
    let r = fs.extents(ino, &mut |e| {
        sink(e);
        count += 1;
        if count >= MAX_EXTENTS {
            return Err(Error::InvalidArgument("enough extents"));
        }
        Ok(())
    });
    if let Err(e) = r {
        sink(e.to_string());
    }
    sink(fs.is_inline(ino).map_err(|e| e.to_string()));
}

fn visit_dir(fs: &Fs, ino: u32) {
    match fs.readdir(ino) {
        Ok(entries) => {
            for e in entries.iter().take(MAX_LOOKUPS) {
                match fs.lookup(ino, &e.name) {
                    Ok(found) => sink(found == e.ino),
                    Err(err) => sink(err.to_string()),
                }
            }
        }
        Err(e) => sink(e.to_string()),
    }
    sink(
        fs.lookup(ino, b"no such name in this directory")
            .map_err(|e| e.to_string()),
    );
}

fuzz_target!(|data: &[u8]| {
    let dev = Overlay::new(data);
    let fs = match Fs::with_device(Box::new(dev)) {
        Ok(fs) => fs,
        Err(e) => {
            sink(e.to_string());
            sink(e.errno());
            return;
        }
    };
    sink(fs.info());
    sink(fs.statfs());
    sink(fs.mount_notes().len());
    sink(fs.superblock().label());
    sink(fs.checkpoint().version());
    match fs.segment_usage() {
        Ok(u) => sink(u),
        Err(e) => sink(e.to_string()),
    }
    let root = fs.root_ino();
    let mut entries = 0usize;
    let r = fs.walk(root, &mut |item| {
        entries += 1;
        match item {
            WalkItem::Entry { path, ino, attr } => {
                sink(path.len());
                match attr.file_type {
                    FileType::Regular => read_file(&fs, ino, attr.size),
                    FileType::Symlink => {
                        sink(fs.readlink(ino).map_err(|e| e.to_string()));
                    }
                    FileType::Directory => visit_dir(&fs, ino),
                    _ => {}
                }
                sink(fs.xattrs(ino).map_err(|e| e.to_string()));
            }
            WalkItem::Error { path, error } => {
                sink((path.len(), error.to_string()));
            }
        }
        Ok(true)
    });
    if let Err(e) = r {
        sink(e.to_string());
    }
    sink(entries);
    for p in [
        &b"/links/short"[..],
        b"/deep/l1/l2/l3",
        b"/files/../xattr/big",
        b"/nope",
    ] {
        sink(fs.resolve(p, true).map_err(|e| e.to_string()));
    }
    sink(fs.device_counters());
});
