//! Compressed files: the inode's compression fields and the clusters they describe.
//!
//! A compressed regular file (FS_COMPR_FL, on a volume with the `compression` feature) is cut
//! into clusters of 2^`log_cluster_size` blocks (4 KiB to 1 MiB; Linux 6.1 accepts logs 2..8).
//! Each cluster's address slots are either
//! - plain: up to `cluster_size` data addresses, NEW_ADDR or NULL_ADDR, read as any file's;
//! - compressed: COMPRESS_ADDR in the first slot, then the addresses of `n` blocks that hold
//!   the compressed bytes, then NEW_ADDR or NULL_ADDR (NULL once the file's saved blocks were
//!   released). `1 <= n < cluster_size`, and no valid address follows the first invalid one.
//!
//! The first compressed block starts with [`RawCompressHeader`] (24 bytes: `clen`, `chksum`,
//! four reserved words); the `clen` bytes after it are one LZO1X, LZ4 block, ZSTD frame or
//! LZO-RLE stream that must decode to exactly the cluster's bytes. With the inode's checksum
//! flag, `chksum` is the F2FS CRC (seed: the F2FS magic) of those `clen` bytes.
//!
//! Linux 6.1 only logs a checksum mismatch and returns the bytes anyway; we refuse the cluster
//! with [`CorruptKind::ClusterChecksum`]: bytes that fail their own checksum are not shown.

use crate::crc::{f2fs_crc32, F2FS_SUPER_MAGIC};
use crate::{lzo, CorruptKind, BLOCK_SIZE};
use zerocopy::little_endian::U32;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// Smallest and largest `i_log_cluster_size` Linux 6.1 accepts.
pub const MIN_LOG_CLUSTER_SIZE: u8 = 2;
pub const MAX_LOG_CLUSTER_SIZE: u8 = 8;
/// Bytes of the header at the start of a compressed cluster's first block.
pub const COMPRESS_HEADER_SIZE: usize = 24;
/// `i_compress_flag` bit 0: clusters carry a checksum.
pub const COMPRESS_CHKSUM: u16 = 1;
/// `i_compress_flag` bits 8..15: the compression level (lz4hc, zstd), which readers ignore.
pub const COMPRESS_LEVEL_OFFSET: u16 = 8;

/// The header of a compressed cluster.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct RawCompressHeader {
    pub clen: U32,
    pub chksum: U32,
    pub reserved: [U32; 4],
}
const _: () = assert!(core::mem::size_of::<RawCompressHeader>() == COMPRESS_HEADER_SIZE);

/// `i_compress_algorithm`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Algorithm {
    Lzo,
    /// LZ4, and LZ4HC (a level in the flag), whose output is the same block format.
    Lz4,
    Zstd,
    LzoRle,
}

impl Algorithm {
    pub fn from_raw(v: u8) -> Option<Algorithm> {
        Some(match v {
            0 => Algorithm::Lzo,
            1 => Algorithm::Lz4,
            2 => Algorithm::Zstd,
            3 => Algorithm::LzoRle,
            _ => return None,
        })
    }

    /// The name the mount option `compress_algorithm=` uses.
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Lzo => "lzo",
            Algorithm::Lz4 => "lz4",
            Algorithm::Zstd => "zstd",
            Algorithm::LzoRle => "lzo-rle",
        }
    }
}

/// The compression fields of a compressed regular file, checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Compression {
    pub algorithm: Algorithm,
    pub log_cluster_size: u8,
    /// Clusters carry a CRC of their compressed bytes.
    pub checksum: bool,
    /// The level the writer used (0: its default); decoding does not need it.
    pub level: u8,
    /// `i_compr_blocks`: blocks the file saves by compression.
    pub compr_blocks: u64,
    /// F2FS_COMPRESS_RELEASED: the saved blocks were given back (the file is immutable).
    pub released: bool,
}

impl Compression {
    /// Blocks per cluster.
    pub fn cluster_blocks(&self) -> u64 {
        1 << self.log_cluster_size
    }

    /// Bytes per cluster.
    pub fn cluster_bytes(&self) -> usize {
        BLOCK_SIZE << self.log_cluster_size
    }
}

/// The addresses that follow COMPRESS_ADDR in a compressed cluster: how many leading ones are
/// valid block addresses (`is_valid`), checking that none comes after an invalid one and that
/// there is at least one and fewer than the cluster's blocks.
pub fn compressed_block_count(
    ino: u32,
    cluster: u64,
    rest: &[u32],
    is_valid: impl Fn(u32) -> bool,
) -> Result<usize, CorruptKind> {
    let bad = |why| CorruptKind::CompressedCluster { ino, cluster, why };
    let n = rest.iter().take_while(|&&a| is_valid(a)).count();
    if rest.iter().skip(n).any(|&a| is_valid(a)) {
        return Err(bad(
            "a block address follows a hole in a compressed cluster",
        ));
    }
    if n == 0 {
        return Err(bad("a compressed cluster has no compressed blocks"));
    }
    if rest.contains(&crate::COMPRESS_ADDR) {
        return Err(bad("COMPRESS_ADDR appears twice in a cluster"));
    }
    Ok(n)
}

/// Decodes compressed cluster `cluster` of inode `ino` from `cdata` (its compressed blocks,
/// header first, whole blocks) into `out` (exactly the cluster's bytes).
pub fn decompress_cluster(
    c: &Compression,
    ino: u32,
    cluster: u64,
    cdata: &[u8],
    out: &mut [u8],
) -> Result<(), CorruptKind> {
    let bad = |why| CorruptKind::CompressedCluster { ino, cluster, why };
    if out.len() != c.cluster_bytes() {
        return Err(bad("output is not one cluster long"));
    }
    let (header, body) = RawCompressHeader::ref_from_prefix(cdata)
        .map_err(|_| bad("compressed blocks are shorter than the header"))?;
    let clen = usize::try_from(header.clen.get()).unwrap_or(usize::MAX);
    let payload = body.get(..clen).ok_or(bad(
        "header clen is longer than the cluster's compressed blocks",
    ))?;
    if c.checksum {
        let computed = f2fs_crc32(F2FS_SUPER_MAGIC, payload);
        let stored = header.chksum.get();
        if computed != stored {
            return Err(CorruptKind::ClusterChecksum {
                ino,
                cluster,
                stored,
                computed,
            });
        }
    }
    let n = match c.algorithm {
        Algorithm::Lzo | Algorithm::LzoRle => {
            lzo::decompress(payload, out).map_err(|e| bad(e.describe()))?
        }
        Algorithm::Lz4 => lz4_flex::block::decompress_into(payload, out)
            .map_err(|_| bad("LZ4 block does not decode"))?,
        Algorithm::Zstd => zstd_decompress(payload, out, c.log_cluster_size)
            .ok_or(bad("ZSTD frame does not decode within the cluster"))?,
    };
    if n != out.len() {
        return Err(bad("cluster decodes to fewer bytes than the cluster holds"));
    }
    Ok(())
}

/// Compresses one whole cluster (`plain`, exactly the cluster's bytes) as a writer must lay
/// it out: the header (clen, the checksum when the inode asks for one), the stream, zeros to
/// the end of the last block. `None` when that would not save at least one block, as Linux
/// decides (the stream must fit in cluster_size - 1 blocks less the header): the cluster is
/// then stored plain, which every reader takes. LZO and LZO-RLE use our encoder
/// (`lzo::compress`).
pub fn compress_cluster(c: &Compression, plain: &[u8]) -> Option<Vec<u8>> {
    if plain.len() != c.cluster_bytes() {
        return None;
    }
    let room = plain.len().checked_sub(BLOCK_SIZE + COMPRESS_HEADER_SIZE)?;
    let mut out = vec![0u8; COMPRESS_HEADER_SIZE + room];
    let body = out.get_mut(COMPRESS_HEADER_SIZE..)?;
    let clen = match c.algorithm {
        // A level (`lz4:N`) is Linux's LZ4HC, through liblz4 (the `lz4` crate), which stops
        // when the output would not fit; without one, LZ4's fast encoder (lz4_flex wants room
        // for the worst case, so it encodes into its own buffer). Both write the same block
        // format, which every LZ4 decoder reads.
        Algorithm::Lz4 if c.level > 0 => {
            let mode = lz4::block::CompressionMode::HIGHCOMPRESSION(i32::from(c.level));
            lz4::block::compress_to_buffer(plain, Some(mode), false, body).ok()?
        }
        Algorithm::Lz4 => {
            let v = lz4_flex::block::compress(plain);
            body.get_mut(..v.len())?.copy_from_slice(&v);
            v.len()
        }
        Algorithm::Zstd => {
            let level = if c.level == 0 {
                ZSTD_DEFAULT_LEVEL
            } else {
                i32::from(c.level)
            };
            zstd_compress(plain, body, level)?
        }
        Algorithm::Lzo | Algorithm::LzoRle => {
            let v = lzo::compress(plain, c.algorithm == Algorithm::LzoRle, room)?;
            body.get_mut(..v.len())?.copy_from_slice(&v);
            v.len()
        }
    };
    body.get_mut(clen..)?.fill(0);
    let payload = body.get(..clen)?;
    let sum = if c.checksum {
        f2fs_crc32(F2FS_SUPER_MAGIC, payload)
    } else {
        0
    };
    let header = RawCompressHeader {
        clen: U32::new(u32::try_from(clen).ok()?),
        chksum: U32::new(sum),
        reserved: [U32::new(0); 4],
    };
    out.get_mut(..COMPRESS_HEADER_SIZE)?
        .copy_from_slice(header.as_bytes());
    out.truncate((COMPRESS_HEADER_SIZE + clen).div_ceil(BLOCK_SIZE) * BLOCK_SIZE);
    Some(out)
}

/// One ZSTD frame of `src` into `out` at `level`, with one encoder per thread, kept (making
/// one per cluster cost more than compressing a 16 KiB cluster). Linux's decoder takes frames
/// whose window is at most the cluster: with the content size known, the encoder never asks
/// for more.
fn zstd_compress(src: &[u8], out: &mut [u8], level: i32) -> Option<usize> {
    thread_local! {
        static ENCODER: std::cell::RefCell<Option<zstd::bulk::Compressor<'static>>> =
            const { std::cell::RefCell::new(None) };
    }
    ENCODER.with(|cell| {
        let mut slot = cell.try_borrow_mut().ok()?;
        if slot.is_none() {
            let mut z = zstd::bulk::Compressor::new(level).ok()?;
            z.set_parameter(zstd::zstd_safe::CParameter::ChecksumFlag(false))
                .ok()?;
            *slot = Some(z);
        }
        let z = slot.as_mut()?;
        z.set_compression_level(level).ok()?;
        let r = z.compress_to_buffer(src, out).ok();
        if r.is_none() {
            // Did not fit (the usual "store it plain"), or failed: start afresh next time.
            *slot = None;
        }
        r
    })
}

/// Linux's default ZSTD level for F2FS (`F2FS_ZSTD_DEFAULT_CLEVEL`).
pub const ZSTD_DEFAULT_LEVEL: i32 = 1;

/// One ZSTD frame into `out`. The window may not exceed the cluster, as Linux sizes its
/// decoder, so a hostile frame cannot make the decoder allocate more than that.
fn zstd_decompress(src: &[u8], out: &mut [u8], log_cluster_size: u8) -> Option<usize> {
    // One decoder per thread, kept: making one per cluster cost more than decoding a
    // 16 KiB cluster.
    thread_local! {
        static DECODER: std::cell::RefCell<Option<zstd::bulk::Decompressor<'static>>> =
            const { std::cell::RefCell::new(None) };
    }
    DECODER.with(|cell| {
        let mut slot = cell.try_borrow_mut().ok()?;
        if slot.is_none() {
            *slot = Some(zstd::bulk::Decompressor::new().ok()?);
        }
        let d = slot.as_mut()?;
        let window_log = 12 + u32::from(log_cluster_size);
        // The decoder's smallest accepted window log is 10; ours is at least 14.
        d.set_parameter(zstd::zstd_safe::DParameter::WindowLogMax(window_log))
            .ok()?;
        let r = d.decompress_to_buffer(src, out).ok();
        if r.is_none() {
            // A failed frame may leave the context mid-frame: start the next one afresh.
            *slot = None;
        }
        r
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing, reason = "test code")]
    use super::*;

    fn comp(algorithm: Algorithm, checksum: bool) -> Compression {
        Compression {
            algorithm,
            log_cluster_size: 2,
            checksum,
            level: 0,
            compr_blocks: 0,
            released: false,
        }
    }

    fn cluster_bytes() -> Vec<u8> {
        (0..4 * BLOCK_SIZE)
            .map(|i| (i / 100 % 7) as u8 + b'a')
            .collect()
    }

    /// A compressed cluster as Linux lays it out: header, payload, zeros to a block boundary.
    fn pack(payload: &[u8], checksum: bool) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        let sum = if checksum {
            f2fs_crc32(F2FS_SUPER_MAGIC, payload)
        } else {
            0
        };
        v.extend_from_slice(&sum.to_le_bytes());
        v.extend_from_slice(&[0u8; 16]);
        v.extend_from_slice(payload);
        v.resize(v.len().div_ceil(BLOCK_SIZE) * BLOCK_SIZE, 0);
        v
    }

    #[test]
    fn lz4_and_zstd_round_trip_with_checksum() {
        let plain = cluster_bytes();
        for (alg, payload) in [
            (Algorithm::Lz4, lz4_flex::block::compress(&plain)),
            (Algorithm::Zstd, zstd::bulk::compress(&plain, 3).unwrap()),
        ] {
            let c = comp(alg, true);
            let blocks = pack(&payload, true);
            let mut out = vec![0u8; c.cluster_bytes()];
            decompress_cluster(&c, 7, 3, &blocks, &mut out).unwrap();
            assert_eq!(out, plain, "{alg:?}");
        }
    }

    #[test]
    fn compress_cluster_round_trips_and_gives_up_on_noise() {
        for alg in [
            Algorithm::Lz4,
            Algorithm::Zstd,
            Algorithm::Lzo,
            Algorithm::LzoRle,
        ] {
            for log in [2u8, 4, 8] {
                let mut c = comp(alg, log % 4 == 0);
                c.log_cluster_size = log;
                let plain: Vec<u8> = (0..c.cluster_bytes())
                    .map(|i| (i / 100 % 7) as u8 + b'a')
                    .collect();
                let packed = compress_cluster(&c, &plain).expect("text compresses");
                assert!(packed.len() < plain.len() && packed.len().is_multiple_of(BLOCK_SIZE));
                let mut out = vec![0u8; c.cluster_bytes()];
                decompress_cluster(&c, 1, 0, &packed, &mut out).unwrap();
                assert_eq!(out, plain, "{alg:?} log {log}");
                let mut x = 88172645463325252u64;
                let noise: Vec<u8> = (0..c.cluster_bytes())
                    .map(|_| {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        x as u8
                    })
                    .collect();
                assert!(compress_cluster(&c, &noise).is_none(), "{alg:?} noise");
            }
        }
    }

    #[test]
    fn lz4hc_levels_compress_at_least_as_well_as_lz4() {
        let text: Vec<u8> = std::iter::repeat(
            &b"F2FS compresses clusters; LZ4HC searches harder than LZ4 for matches. "[..],
        )
        .flatten()
        .copied()
        .zip(0u32..)
        .map(|(b, i)| if i % 37 == 0 { (i % 251) as u8 } else { b })
        .take(16384)
        .collect();
        let mut c = comp(Algorithm::Lz4, true);
        let fast = compress_cluster(&c, &text).unwrap();
        for level in [3u8, 9, 12] {
            c.level = level;
            let hc = compress_cluster(&c, &text).unwrap();
            let clen = |v: &[u8]| u32::from_le_bytes([v[0], v[1], v[2], v[3]]);
            assert!(clen(&hc) <= clen(&fast), "level {level}");
            let mut out = vec![0u8; c.cluster_bytes()];
            decompress_cluster(&c, 1, 0, &hc, &mut out).unwrap();
            assert_eq!(out, text, "level {level}");
        }
    }

    #[test]
    fn checksum_mismatch_names_inode_and_cluster() {
        let plain = cluster_bytes();
        let mut blocks = pack(&lz4_flex::block::compress(&plain), true);
        blocks[30] ^= 1;
        let c = comp(Algorithm::Lz4, true);
        let mut out = vec![0u8; c.cluster_bytes()];
        let e = decompress_cluster(&c, 7, 3, &blocks, &mut out).unwrap_err();
        assert!(matches!(
            e,
            CorruptKind::ClusterChecksum {
                ino: 7,
                cluster: 3,
                ..
            }
        ));
        assert!(e.to_string().contains("inode 7, cluster 3"), "{e}");
    }

    #[test]
    fn clen_past_the_blocks_is_refused() {
        let plain = cluster_bytes();
        let mut blocks = pack(&lz4_flex::block::compress(&plain), false);
        blocks[..4].copy_from_slice(&5000u32.to_le_bytes());
        let c = comp(Algorithm::Lz4, false);
        let mut out = vec![0u8; c.cluster_bytes()];
        assert_eq!(
            decompress_cluster(&c, 1, 0, &blocks, &mut out),
            Err(CorruptKind::CompressedCluster {
                ino: 1,
                cluster: 0,
                why: "header clen is longer than the cluster's compressed blocks"
            })
        );
    }

    #[test]
    fn short_output_is_refused() {
        // a valid LZ4 block of half a cluster
        let half = &cluster_bytes()[..2 * BLOCK_SIZE];
        let blocks = pack(&lz4_flex::block::compress(half), false);
        let c = comp(Algorithm::Lz4, false);
        let mut out = vec![0u8; c.cluster_bytes()];
        assert!(decompress_cluster(&c, 1, 0, &blocks, &mut out).is_err());
    }

    #[test]
    fn zstd_window_larger_than_the_cluster_is_refused() {
        // A frame whose window is 8 MiB: refused for a 16 KiB cluster, whatever it holds.
        let mut cctx = zstd::bulk::Compressor::new(19).unwrap();
        cctx.set_parameter(zstd::zstd_safe::CParameter::WindowLog(23))
            .unwrap();
        cctx.set_parameter(zstd::zstd_safe::CParameter::ContentSizeFlag(false))
            .unwrap();
        let plain = cluster_bytes();
        let payload = cctx.compress(&plain).unwrap();
        let c = comp(Algorithm::Zstd, false);
        let mut out = vec![0u8; c.cluster_bytes()];
        let r = decompress_cluster(&c, 1, 0, &pack(&payload, false), &mut out);
        // zstd shrinks the window to the input when it knows the size; either way no
        // allocation beyond the cluster's window is allowed, and the bytes are right or refused.
        if r.is_ok() {
            assert_eq!(out, plain);
        }
    }

    #[test]
    fn cluster_layout_rules() {
        let valid = |a: u32| a != 0 && a != crate::NEW_ADDR && a != crate::COMPRESS_ADDR;
        assert_eq!(compressed_block_count(1, 0, &[10, 11, 0], valid), Ok(2));
        assert!(compressed_block_count(1, 0, &[10, 0, 11], valid).is_err());
        assert!(compressed_block_count(1, 0, &[0, 0, 0], valid).is_err());
        assert!(compressed_block_count(1, 0, &[10, crate::COMPRESS_ADDR, 0], valid).is_err());
    }
}
