//! Compressing a cluster as the engine writes it, on arbitrary bytes, every algorithm and
//! cluster size: `compress_cluster` never panics; what it returns is whole blocks, fewer than
//! the cluster's, and decodes with `decompress_cluster` (checksum on or off) to exactly the
//! input; `None` only when the stream would not save a block.
//!
//! Input: byte 0: algorithm (bits 0..1), checksum (bit 2); byte 1: log cluster size (2..=4,
//! kept small so each run stays fast); the rest is repeated to fill the cluster (so that
//! short inputs make compressible clusters).
#![no_main]

use libfuzzer_sys::fuzz_target;
use uf2fs_format::compress::{compress_cluster, decompress_cluster, Algorithm, Compression};
use uf2fs_format::BLOCK_SIZE;

fuzz_target!(|data: &[u8]| {
    let [a, l, seed @ ..] = data else {
        return;
    };
    let Some(algorithm) = Algorithm::from_raw(a & 3) else {
        return;
    };
    let c = Compression {
        algorithm,
        log_cluster_size: 2 + l % 3,
        checksum: a & 4 != 0,
        level: 0,
        compr_blocks: 0,
        released: false,
    };
    let plain: Vec<u8> = if seed.is_empty() {
        vec![0u8; c.cluster_bytes()]
    } else {
        seed.iter()
            .copied()
            .cycle()
            .take(c.cluster_bytes())
            .collect()
    };
    let Some(packed) = compress_cluster(&c, &plain) else {
        return;
    };
    assert!(packed.len() % BLOCK_SIZE == 0, "not whole blocks");
    assert!(packed.len() < c.cluster_bytes(), "saves no block");
    let mut out = vec![0u8; c.cluster_bytes()];
    assert_eq!(decompress_cluster(&c, 1, 0, &packed, &mut out), Ok(()));
    assert!(out == plain, "the cluster decodes to other bytes");
});
