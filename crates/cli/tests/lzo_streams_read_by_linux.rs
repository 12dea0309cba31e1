//! Linux 6.1 reads the LZO and LZO-RLE streams our encoder (`uf2fs_format::lzo::compress`)
//! makes. Linux writes compressed files with `compress_algorithm=lzo` and `lzo-rle` (16 KiB
//! and 256 KiB clusters, with and without checksums): real text, and a mix of text, noise and
//! zero runs of every length around the RLE instruction's limits. On the host every
//! compressed cluster is then found, decoded, encoded again by us and written back in place
//! of Linux's stream (same blocks; new `clen`, new checksum where the file has them). A second
//! boot of Linux reads every file: each must hash as the original, with no F2FS complaint.
//! One cluster of a canary file gets a stream one byte short, and Linux must refuse it: the
//! judge can say no. (The engine does not write compressed files yet; this judges the codec.)

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    reason = "test code: a panic is the failure report"
)]

use std::path::Path;
use std::process::Command;
use uf2fs_format::crc::{f2fs_crc32, F2FS_SUPER_MAGIC};
use uf2fs_format::lzo;
use uf2fs_testkit::{assert_fsck_clean, image_helper, kernel_f2fs, kernel_f2fs_args, run, scratch};

const CONFIGS: [(&str, &str); 4] = [
    (
        "lzo_c16k_sum",
        "compress_algorithm=lzo,compress_log_size=2,compress_chksum",
    ),
    (
        "lzorle_c16k_sum",
        "compress_algorithm=lzo-rle,compress_log_size=2,compress_chksum",
    ),
    ("lzo_c256k", "compress_algorithm=lzo,compress_log_size=6"),
    (
        "lzorle_c256k",
        "compress_algorithm=lzo-rle,compress_log_size=6",
    ),
];

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// The format crate's sources and the design document: real text.
fn text() -> Vec<u8> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut names: Vec<_> = std::fs::read_dir(root.join("crates/format/src"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    names.sort();
    names.push(root.join("docs/design.md"));
    names
        .iter()
        .flat_map(|n| std::fs::read(n).unwrap())
        .collect()
}

/// Text pieces, noise and zero runs (1..9000 bytes, many at the RLE limits 4 and 2051).
fn mixed(text: &[u8], len: usize) -> Vec<u8> {
    const ZEROS: [usize; 16] = [
        1, 3, 4, 5, 7, 8, 11, 100, 2050, 2051, 2052, 2055, 4095, 4096, 5000, 9000,
    ];
    let mut r = Rng(0x5eed);
    let mut s = Vec::with_capacity(len + 10_000);
    while s.len() < len {
        let n = 1 + r.below(3000);
        let at = r.below(text.len() - n);
        s.extend(&text[at..at + n]);
        s.resize(s.len() + ZEROS[r.below(ZEROS.len())], 0);
        for _ in 0..r.below(200) {
            s.push(r.next() as u8);
        }
    }
    s.truncate(len);
    s
}

/// What the host did to the image.
#[derive(Default, Debug)]
struct Rewrite {
    /// Clusters whose stream we replaced, by (RLE, cluster bytes).
    replaced: std::collections::BTreeMap<(bool, usize), usize>,
    /// Of those, how many of our streams differ from Linux's.
    differ: usize,
    /// Clusters where our stream would not fit Linux's blocks (left as Linux wrote them).
    kept: usize,
    checksummed: usize,
    /// RLE clusters holding a run of 256 zeros or more, so our stream has the zero-run form.
    rle_with_zero_runs: usize,
    canary: bool,
}

/// Finds every LZO cluster in `img` (a 24-byte header whose `clen` bytes decode to exactly 16
/// or 256 KiB), and writes our stream of the same bytes in its place.
fn rewrite_clusters(img: &mut [u8]) -> Rewrite {
    let mut w = Rewrite::default();
    let mut out = vec![0u8; 256 << 10];
    for b in 0..img.len() / 4096 {
        let at = b * 4096;
        let clen = u32::from_le_bytes(img[at..at + 4].try_into().unwrap()) as usize;
        if !(3..=256 << 10).contains(&clen) || img[at + 8..at + 24].iter().any(|&x| x != 0) {
            continue;
        }
        let Some(old) = img.get(at + 24..at + 24 + clen) else {
            continue;
        };
        let Ok(n) = lzo::decompress(old, &mut out) else {
            continue;
        };
        if n != 16 << 10 && n != 256 << 10 {
            continue;
        }
        let rle = old.len() >= 5 && old[0] == 17 && old[1] != 0;
        let stored = u32::from_le_bytes(img[at + 4..at + 8].try_into().unwrap());
        let checksummed = stored != 0 && stored == f2fs_crc32(F2FS_SUPER_MAGIC, old);
        let blocks = (24 + clen).div_ceil(4096);
        let room = blocks * 4096 - 24;
        let Some(mut z) = lzo::compress(&out[..n], rle, room) else {
            w.kept += 1;
            continue;
        };
        let differs = z != old;
        // The canary: its first cluster loses its stream's last byte.
        let canary = out.starts_with(b"CANARY") && !checksummed && !w.canary;
        if canary {
            z.pop();
            w.canary = true;
        }
        img[at..at + 4].copy_from_slice(&(z.len() as u32).to_le_bytes());
        if checksummed {
            img[at + 4..at + 8].copy_from_slice(&f2fs_crc32(F2FS_SUPER_MAGIC, &z).to_le_bytes());
            w.checksummed += 1;
        }
        img[at + 24..at + 24 + z.len()].copy_from_slice(&z);
        img[at + 24 + z.len()..at + blocks * 4096].fill(0);
        *w.replaced.entry((rle, n)).or_default() += 1;
        if rle && out[..n].windows(256).any(|r| r.iter().all(|&x| x == 0)) {
            w.rle_with_zero_runs += 1;
        }
        w.differ += usize::from(differs);
    }
    w
}

#[test]
fn linux_reads_our_lzo_and_lzo_rle_streams() {
    let dir = scratch("lzo-streams-linux");
    let img = dir.join("img");
    let text = text();
    assert!(text.len() > 300_000);
    let files = [
        ("text.bin", text.clone()),
        ("mixed.bin", mixed(&text, 1_500_000)),
        // Two whole 256 KiB clusters (a partial last cluster stays plain).
        (
            "canary.bin",
            b"CANARY"
                .iter()
                .chain(text.iter().cycle())
                .copied()
                .take(600_000)
                .collect(),
        ),
    ];
    let data = dir.join("data");
    std::fs::create_dir_all(&data).unwrap();
    let mut payload = vec![image_helper("setcompr")];
    for (name, bytes) in &files {
        std::fs::write(data.join(name), bytes).unwrap();
        payload.push(data.join(name));
    }
    run(Command::new("truncate").args(["-s", "128M"]).arg(&img));
    run(Command::new("mkfs.f2fs")
        .args(["-f", "-q", "-O", "extra_attr,compression"])
        .arg(&img));

    // Linux writes the files, each configuration in its own compressed directory.
    let mut job = String::from("set -e\n");
    for (name, opts) in CONFIGS {
        job.push_str(&format!(
            "mount -t f2fs -o {opts} /dev/vda /mnt\nmkdir /mnt/{name}\n\
             $PAYLOAD/setcompr /mnt/{name}\n\
             cp $PAYLOAD/text.bin $PAYLOAD/mixed.bin /mnt/{name}/\n"
        ));
        if name == "lzorle_c256k" {
            job.push_str(&format!("cp $PAYLOAD/canary.bin /mnt/{name}/\n"));
        }
        job.push_str(&format!(
            "sync\necho \"{name}: $($PAYLOAD/setcompr --blocks /mnt/{name}/text.bin) blocks saved\"\numount /mnt\n"
        ));
    }
    let paths: Vec<&Path> = payload.iter().map(|p| p.as_path()).collect();
    let k = kernel_f2fs_args(&img, &job, &dir.join("boot1"), &paths, &["--no-mount"]);
    assert_eq!(k.exit, 0, "Linux job failed:\n{}\n{}", k.job_log, k.dmesg);
    assert!(k.f2fs_complaints().is_empty(), "{:#?}", k.f2fs_complaints());
    eprintln!("{}", k.job_log);

    // Our streams in place of Linux's.
    let mut bytes = std::fs::read(&img).unwrap();
    let w = rewrite_clusters(&mut bytes);
    std::fs::write(&img, &bytes).unwrap();
    eprintln!("{w:?}");
    for key in [
        (false, 16 << 10),
        (true, 16 << 10),
        (false, 256 << 10),
        (true, 256 << 10),
    ] {
        let n = w.replaced.get(&key).copied().unwrap_or(0);
        assert!(n >= 4, "only {n} clusters (rle, size) {key:?} replaced");
    }
    let total: usize = w.replaced.values().sum();
    assert!(
        w.differ * 10 >= total * 9,
        "{w:?}: our streams should not be Linux's bytes"
    );
    assert!(
        w.kept * 10 <= total,
        "{w:?}: too many of our streams did not fit"
    );
    assert!(
        w.checksummed >= 8 && w.canary && w.rle_with_zero_runs >= 8,
        "{w:?}"
    );
    assert_fsck_clean(&img);

    // Linux reads every file back; the canary fails.
    let mut job = String::from("set -e\n");
    for (name, _) in CONFIGS {
        job.push_str(&format!(
            "sha256sum {name}/text.bin {name}/mixed.bin >> $OUT/sums.txt\n"
        ));
    }
    job.push_str(
        "if cat lzorle_c256k/canary.bin > /dev/null 2>&1; then echo 'canary read'; exit 1; fi\n",
    );
    let k = kernel_f2fs(&img, &job, &dir.join("boot2"));
    assert_eq!(k.exit, 0, "Linux job failed:\n{}\n{}", k.job_log, k.dmesg);
    let sums = std::fs::read_to_string(k.out.join("sums.txt")).unwrap();
    let host = run(Command::new("sha256sum")
        .arg("text.bin")
        .arg("mixed.bin")
        .current_dir(&data));
    let want: std::collections::HashMap<&str, &str> = host
        .lines()
        .map(|l| {
            let (h, n) = l.split_once("  ").unwrap();
            (n, h)
        })
        .collect();
    let mut checked = 0;
    for line in sums.lines() {
        let (h, path) = line.split_once("  ").unwrap();
        let name = path.rsplit('/').next().unwrap();
        assert_eq!(Some(&h), want.get(name), "{path} as Linux read it");
        checked += 1;
    }
    assert_eq!(checked, 2 * CONFIGS.len(), "{sums}");
    let complaints: Vec<String> = k
        .f2fs_complaints()
        .into_iter()
        .filter(|l| !l.to_lowercase().contains("decompress"))
        .collect();
    assert!(complaints.is_empty(), "{complaints:#?}");
    let _ = std::fs::remove_dir_all(&dir);
}
