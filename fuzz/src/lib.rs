//! Helpers shared by the fuzz targets: the real fixture images, loaded lazily and once.

use std::io::Read;
use std::path::PathBuf;
use std::sync::OnceLock;
use uf2fs_format::superblock::{Layout, Superblock};
use uf2fs_format::BLOCK_SIZE;

/// Path of a gzipped fixture image in tests/fixtures.
pub fn fixture_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures")
        .join(format!("{name}.img.gz"))
}

/// The first `len` bytes of a fixture image (decompressing only that much).
pub fn fixture_prefix(name: &str, len: usize) -> Vec<u8> {
    let path = fixture_path(name);
    let file =
        std::fs::File::open(&path).unwrap_or_else(|e| panic!("fixture {}: {e}", path.display()));
    let mut out = vec![0u8; len];
    flate2::read::GzDecoder::new(file)
        .read_exact(&mut out)
        .unwrap_or_else(|e| panic!("fixture {}: {e}", path.display()));
    out
}

/// A whole fixture image, decompressed.
pub fn fixture_full(name: &str) -> Vec<u8> {
    let path = fixture_path(name);
    let file =
        std::fs::File::open(&path).unwrap_or_else(|e| panic!("fixture {}: {e}", path.display()));
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(file)
        .read_to_end(&mut out)
        .unwrap_or_else(|e| panic!("fixture {}: {e}", path.display()));
    out
}

fn load_sb(name: &str) -> Superblock {
    let block0 = fixture_prefix(name, BLOCK_SIZE);
    Superblock::parse(&block0, 0).unwrap_or_else(|e| panic!("fixture {name} superblock: {e}"))
}

/// The superblock of linux-default (no extra inode attributes).
pub fn sb_default() -> &'static Superblock {
    static SB: OnceLock<Superblock> = OnceLock::new();
    SB.get_or_init(|| load_sb("linux-default"))
}

/// The superblock of linux-extra (extra_attr, inode_checksum, flexible_inline_xattr,
/// inode_crtime, sb_checksum).
pub fn sb_extra() -> &'static Superblock {
    static SB: OnceLock<Superblock> = OnceLock::new();
    SB.get_or_init(|| load_sb("linux-extra"))
}

/// The layout of linux-default.
pub fn layout_default() -> Layout {
    sb_default().layout()
}

/// `data` copied into one 4 KiB block, zero padded or truncated.
pub fn to_block(data: &[u8]) -> Box<[u8; BLOCK_SIZE]> {
    let mut b = Box::new([0u8; BLOCK_SIZE]);
    let n = data.len().min(BLOCK_SIZE);
    b[..n].copy_from_slice(&data[..n]);
    b
}

/// `data` cut into 4 KiB blocks (the last one zero padded), at most `max` of them.
pub fn to_blocks(data: &[u8], max: usize) -> Vec<[u8; BLOCK_SIZE]> {
    data.chunks(BLOCK_SIZE)
        .take(max)
        .map(|c| {
            let mut b = [0u8; BLOCK_SIZE];
            b[..c.len()].copy_from_slice(c);
            b
        })
        .collect()
}

/// Consumes a value so the optimiser cannot drop the computation.
#[inline]
pub fn sink<T>(v: T) {
    std::hint::black_box(v);
}
