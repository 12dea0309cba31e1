//! The LZO1X / LZO-RLE encoder (`lzo::compress`) round-trips through our decoder on every
//! shape of input, finds the matches it should at every distance limit, and keeps its bound.
//! liblzo2 judges the plain streams in `lzo_with_liblzo2.rs`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    reason = "test code: a panic is the failure report"
)]

mod lzo_corpus;

use lzo_corpus::{cases, noise, repeat_at, text, DISTANCES, LENGTHS};
use proptest::prelude::*;
use uf2fs_format::lzo::{compress, decompress};

/// Compresses without a bound and decodes into a buffer of exactly the input's size.
fn round_trip(name: &str, src: &[u8], rle: bool) -> Vec<u8> {
    let z = compress(src, rle, usize::MAX).unwrap_or_else(|| panic!("{name}: no stream"));
    assert_eq!(
        z.first() == Some(&17) && z.len() >= 5,
        rle,
        "{name}: RLE prefix"
    );
    assert_eq!(z[z.len() - 3..], [0x11, 0, 0], "{name}: end marker");
    let mut out = vec![0xA5u8; src.len()];
    assert_eq!(
        decompress(&z, &mut out),
        Ok(src.len()),
        "{name} (rle {rle})"
    );
    assert!(out == src, "{name} (rle {rle}): decoded bytes differ");
    z
}

#[test]
fn every_corpus_case_round_trips_plain_and_rle() {
    let cases = cases();
    assert!(cases.len() > 500);
    for (name, src) in &cases {
        round_trip(name, src, false);
        round_trip(name, src, true);
    }
}

#[test]
fn repeats_are_found_at_every_distance_the_stream_allows() {
    for rle in [false, true] {
        let max = if rle { 49150 } else { 49151 };
        for &d in DISTANCES {
            for &l in LENGTHS.iter().filter(|&&l| l >= 33) {
                let src = repeat_at(d, l, 0x55, 5);
                let z = round_trip("repeat", &src, rle);
                // The same input with noise in place of the repeat (which starts 5 + d in).
                let mut base = src.clone();
                base[5 + d..5 + d + l].copy_from_slice(&noise(l, 99));
                let zb = round_trip("no repeat", &base, rle);
                // Found, the repeat costs a few bytes; missed, it costs its length.
                let found = z.len() + l / 2 < zb.len();
                assert_eq!(
                    found,
                    d <= max,
                    "dist {d} len {l} rle {rle}: {} bytes",
                    z.len()
                );
            }
        }
    }
}

#[test]
fn zero_runs_take_the_rle_instruction() {
    // 1 MiB of zeros: a literal, then 2051-byte zero runs of 4 bytes each.
    let zeros = vec![0u8; 1 << 20];
    let z = round_trip("1 MiB zeros", &zeros, true);
    assert!(
        z.len() < 2 + 2 + (1 << 20) / 2051 * 4 + 16,
        "{} bytes",
        z.len()
    );
    // Plain LZO1X: one match at distance 1 whose length takes a byte per 255.
    let p = round_trip("1 MiB zeros", &zeros, false);
    assert!(p.len() < (1 << 20) / 255 + 16, "{} bytes", p.len());
    // A 4 KiB block of zeros between noise: the two RLE runs (2051 + 2045) and nothing else.
    let mut src = noise(100, 1);
    src.resize(100 + 4096, 0);
    src.extend(noise(100, 2));
    let z = round_trip("block of zeros", &src, true);
    // Prefix, 100 literals (plus up to 3 zeros the search stepped over), two runs, 100
    // literals with a 2-byte count, the end marker.
    let least = 2 + 1 + 100 + 4 + 4 + 2 + 100 + 3;
    assert!((least..=least + 3).contains(&z.len()), "{} bytes", z.len());
}

#[test]
fn text_compresses_like_lzo1x_1() {
    let t = text();
    let mut total = 0;
    for c in t.chunks(16384) {
        total += round_trip("text", c, false).len();
    }
    let ratio = total as f64 / t.len() as f64;
    // liblzo2's lzo1x_1 gives about 0.5 on this text (see lzo_with_liblzo2.rs).
    assert!(ratio < 0.6, "text compresses to {ratio:.3}");
}

#[test]
fn bound_refuses_exactly_the_streams_that_do_not_fit() {
    for (name, src) in cases().iter().step_by(7) {
        for rle in [false, true] {
            let full = compress(src, rle, usize::MAX).unwrap();
            assert_eq!(
                compress(src, rle, full.len()).as_ref(),
                Some(&full),
                "{name}"
            );
            assert_eq!(compress(src, rle, full.len() - 1), None, "{name}");
            assert_eq!(compress(src, rle, full.len() / 2), None, "{name}");
        }
    }
}

/// Inputs built from pieces: noise, zero runs, copies of earlier bytes at any distance.
#[derive(Debug, Clone)]
enum Piece {
    Noise(Vec<u8>),
    Zeros(usize),
    Copy { back: usize, len: usize },
}

fn piece() -> impl Strategy<Value = Piece> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..40).prop_map(Piece::Noise),
        (0usize..3000).prop_map(Piece::Zeros),
        (1usize..60_000, 1usize..600).prop_map(|(back, len)| Piece::Copy { back, len }),
    ]
}

fn build(pieces: &[Piece]) -> Vec<u8> {
    let mut s: Vec<u8> = Vec::new();
    for p in pieces {
        match p {
            Piece::Noise(b) => s.extend(b),
            Piece::Zeros(n) => s.resize(s.len() + n, 0),
            Piece::Copy { back, len } => {
                if s.is_empty() {
                    continue;
                }
                let back = (*back).min(s.len());
                for _ in 0..*len {
                    s.push(s[s.len() - back]);
                }
            }
        }
    }
    s
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn structured_inputs_round_trip(pieces in prop::collection::vec(piece(), 0..60), rle: bool,
                                    cut in 0usize..100) {
        let src = build(&pieces);
        let full = round_trip("proptest", &src, rle);
        // Any bound: the stream, exactly when it fits.
        let bound = full.len() * cut / 99;
        let got = compress(&src, rle, bound);
        prop_assert_eq!(got.is_some(), bound >= full.len());
        if let Some(z) = got {
            prop_assert_eq!(z, full);
        }
    }

    #[test]
    fn arbitrary_bytes_round_trip(src in prop::collection::vec(any::<u8>(), 0..5000), rle: bool) {
        round_trip("proptest bytes", &src, rle);
    }
}

/// Ratio and speed on /usr/include in 16 KiB clusters (F2FS's default), plain and RLE, with
/// the decoder's speed beside. Run by hand:
/// `cargo test --release -p uf2fs-format --test lzo_encoder -- --ignored --nocapture`.
#[test]
#[ignore = "a measurement, run by hand in release"]
fn measure_usr_include() {
    fn walk(dir: &std::path::Path, out: &mut Vec<u8>) {
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        let mut paths: Vec<_> = rd.filter_map(|e| e.ok()).map(|e| e.path()).collect();
        paths.sort();
        for p in paths {
            let Ok(md) = std::fs::symlink_metadata(&p) else {
                continue;
            };
            if md.is_dir() {
                walk(&p, out);
            } else if md.is_file() {
                out.extend(std::fs::read(&p).unwrap_or_default());
            }
        }
    }
    let mut all = Vec::new();
    walk(std::path::Path::new("/usr/include"), &mut all);
    let mib = all.len() as f64 / (1 << 20) as f64;
    // Each mode twice: the first pass also warms the allocator and caches.
    for rle in [false, true, false, true] {
        let t = std::time::Instant::now();
        let streams: Vec<Vec<u8>> = all
            .chunks(16384)
            .map(|c| compress(c, rle, usize::MAX).unwrap())
            .collect();
        let enc = t.elapsed().as_secs_f64();
        let total: usize = streams.iter().map(Vec::len).sum();
        let t = std::time::Instant::now();
        let mut out = vec![0u8; 16384];
        for (c, z) in all.chunks(16384).zip(&streams) {
            assert_eq!(decompress(z, &mut out), Ok(c.len()));
        }
        let dec = t.elapsed().as_secs_f64();
        eprintln!(
            "/usr/include {mib:.1} MiB, rle {rle}: ratio {:.3}, compress {:.0} MiB/s, decompress {:.0} MiB/s",
            total as f64 / all.len() as f64,
            mib / enc,
            mib / dec
        );
    }
}
