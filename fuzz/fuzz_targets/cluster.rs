//! decompress_cluster on arbitrary compressed blocks, for every algorithm, cluster size and
//! checksum setting: a clear error or exactly one cluster of bytes, never a panic, and never
//! more memory than the cluster (ZSTD's window is capped at it).
//!
//! Input: byte 0: algorithm (bits 0..1), checksum (bit 2), log cluster size 2..8 (bits 3..5,
//! taken mod 7 plus 2); the rest is the cluster's compressed blocks, header first.
#![no_main]

use libfuzzer_sys::fuzz_target;
use uf2fs_format::compress::{decompress_cluster, Algorithm, Compression};
use uf2fs_fuzz::sink;

fuzz_target!(|data: &[u8]| {
    let Some((&k, cdata)) = data.split_first() else {
        return;
    };
    let Some(algorithm) = Algorithm::from_raw(k & 3) else {
        return;
    };
    let c = Compression {
        algorithm,
        log_cluster_size: 2 + (k >> 3) % 7,
        checksum: k & 4 != 0,
        level: 0,
        compr_blocks: 0,
        released: false,
    };
    let mut out = vec![0u8; c.cluster_bytes()];
    match decompress_cluster(&c, 11, 0, cdata, &mut out) {
        Ok(()) => sink(out.iter().fold(0u8, |a, b| a ^ b)),
        Err(e) => sink(e.to_string()),
    }
});
