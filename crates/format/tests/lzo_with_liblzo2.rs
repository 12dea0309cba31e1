//! liblzo2 judges our LZO1X encoder: every plain stream `lzo::compress` makes from the test
//! corpus decodes with liblzo2's `lzo1x_decompress_safe` (the reference decoder, as strict as
//! Linux's) to exactly the input. And the other way: our decoder reads what liblzo2's
//! `lzo1x_1_compress` makes, and our streams are no more than a little larger than its.
//!
//! Needs gcc and liblzo2-dev (scripts/setup.sh installs them); fails, not skips, without them.
//! LZO-RLE has no decoder outside the kernel: Linux judges it through files uf2fs writes.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    reason = "test code: a panic is the failure report"
)]

mod lzo_corpus;

use lzo_corpus::{cases, text};
use std::path::PathBuf;
use std::process::Command;
use uf2fs_format::lzo::{compress, decompress};

/// tests/lzo_judge.c, built against liblzo2 once per test binary.
fn judge() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/lzo_judge.c");
            let bin = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
                .join(format!("lzo_judge.{}", std::process::id()));
            let out = Command::new("gcc")
                .args(["-O2", "-Wall", "-o"])
                .arg(&bin)
                .arg(&src)
                .arg("-llzo2")
                .output()
                .expect("run gcc");
            assert!(
                out.status.success(),
                "building the liblzo2 judge failed (apt-get install liblzo2-dev): {}",
                String::from_utf8_lossy(&out.stderr)
            );
            bin
        })
        .clone()
}

/// Runs the judge over `(op, input, output room)` records; returns (code, output) per record.
fn ask(records: &[(u8, &[u8], usize)]) -> Vec<(i32, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let tag = format!("{}.{:?}", std::process::id(), std::thread::current().id());
    let (qpath, apath) = (
        dir.join(format!("lzo-q.{tag}")),
        dir.join(format!("lzo-a.{tag}")),
    );
    let mut q = Vec::new();
    for (op, input, room) in records {
        q.extend(u32::from(*op).to_le_bytes());
        q.extend(u32::try_from(input.len()).unwrap().to_le_bytes());
        q.extend(u32::try_from(*room).unwrap().to_le_bytes());
        q.extend(*input);
    }
    std::fs::write(&qpath, &q).unwrap();
    let st = Command::new(judge())
        .arg(&qpath)
        .arg(&apath)
        .status()
        .unwrap();
    assert!(st.success(), "lzo_judge: {st}");
    let a = std::fs::read(&apath).unwrap();
    let _ = std::fs::remove_file(&qpath);
    let _ = std::fs::remove_file(&apath);
    let mut answers = Vec::new();
    let mut at = 0;
    while at < a.len() {
        let rc = i32::from_le_bytes(a[at..at + 4].try_into().unwrap());
        let len = u32::from_le_bytes(a[at + 4..at + 8].try_into().unwrap()) as usize;
        answers.push((rc, a[at + 8..at + 8 + len].to_vec()));
        at += 8 + len;
    }
    assert_eq!(answers.len(), records.len());
    answers
}

#[test]
fn liblzo2_decodes_every_plain_stream_we_make() {
    let cases = cases();
    let streams: Vec<Vec<u8>> = cases
        .iter()
        .map(|(_, src)| compress(src, false, usize::MAX).unwrap())
        .collect();
    let records: Vec<(u8, &[u8], usize)> = cases
        .iter()
        .zip(&streams)
        .map(|((_, src), z)| (b'd', z.as_slice(), src.len()))
        .collect();
    let answers = ask(&records);
    let mut checked = 0;
    for ((name, src), (rc, out)) in cases.iter().zip(&answers) {
        assert_eq!(*rc, 0, "{name}: lzo1x_decompress_safe said {rc}");
        assert!(out == src, "{name}: liblzo2 decoded other bytes");
        checked += 1;
    }
    assert!(checked > 500, "{checked} streams");
}

#[test]
fn liblzo2_refuses_a_damaged_stream_of_ours() {
    // The judge can say no: a stream cut short, and one decoded into too little room.
    let t = text();
    let src = &t[..16384];
    let z = compress(src, false, usize::MAX).unwrap();
    let answers = ask(&[
        (b'd', &z[..z.len() - 1], src.len()),
        (b'd', &z, src.len() - 1),
    ]);
    assert_eq!(answers[0].0, -4, "LZO_E_INPUT_OVERRUN");
    assert_eq!(answers[1].0, -5, "LZO_E_OUTPUT_OVERRUN");
}

#[test]
fn we_decode_liblzo2_and_compress_about_as_well() {
    // Text in 16 KiB clusters, as F2FS compresses it by default.
    let t = text();
    let chunks: Vec<&[u8]> = t.chunks(16384).collect();
    let records: Vec<(u8, &[u8], usize)> = chunks
        .iter()
        .map(|c| (b'c', *c, c.len() + c.len() / 16 + 64 + 3))
        .collect();
    let (mut theirs, mut ours) = (0usize, 0usize);
    for (c, (rc, z)) in chunks.iter().zip(ask(&records)) {
        assert_eq!(rc, 0);
        let mut out = vec![0u8; c.len()];
        assert_eq!(decompress(&z, &mut out), Ok(c.len()));
        assert!(out == *c);
        theirs += z.len();
        ours += compress(c, false, usize::MAX).unwrap().len();
    }
    let (r_theirs, r_ours) = (theirs as f64 / t.len() as f64, ours as f64 / t.len() as f64);
    eprintln!("text: liblzo2 lzo1x_1 {r_theirs:.3}, ours {r_ours:.3}");
    assert!(
        r_ours < r_theirs * 1.05,
        "ours {r_ours:.3} vs liblzo2 {r_theirs:.3}"
    );
}
