//! The LZO encoder on arbitrary bytes: `lzo::compress` never panics, its stream decodes with
//! our decoder to exactly the input, and a bound gives the same stream or `None` exactly when
//! the stream is longer.
//!
//! Input: byte 0: RLE (bit 0); bytes 1..3: the bound as a fraction of the stream (le16 /
//! 65535); the rest is the input.
#![no_main]

use libfuzzer_sys::fuzz_target;
use uf2fs_format::lzo::{compress, decompress};

fuzz_target!(|data: &[u8]| {
    let [k, b0, b1, src @ ..] = data else {
        return;
    };
    let rle = k & 1 != 0;
    let Some(z) = compress(src, rle, usize::MAX) else {
        panic!("an unbounded stream was refused");
    };
    let mut out = vec![0u8; src.len()];
    assert_eq!(decompress(&z, &mut out), Ok(src.len()));
    assert!(out == src, "the stream decodes to other bytes");
    let bound = z.len() * usize::from(u16::from_le_bytes([*b0, *b1])) / 65535;
    match compress(src, rle, bound) {
        Some(zb) => assert!(bound >= z.len() && zb == z),
        None => assert!(bound < z.len()),
    }
});
