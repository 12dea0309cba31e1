//! Corrupt and hostile images: thousands of seeded mutations of real images (made by
//! mkfs.f2fs + sload.f2fs, and by Linux, encrypted directories included) are mounted and
//! walked whole, every file read,
//! every xattr listed, every name looked up again. Each must end in data or a clean error:
//! never a panic, a hang or an unbounded allocation. Mutations: random bytes in blocks that
//! hold something, interesting 32-bit values at aligned offsets, whole blocks zeroed, and
//! the image cut short. `UF2FS_MUTATIONS` sets the count per image (default 1500).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    reason = "test code: a panic is the failure report"
)]

use std::collections::HashMap;
use std::io;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::{Duration, Instant};
use uf2fs_device::{BlockDevice, IoCause, IoCounters, BLOCK_SIZE};
use uf2fs_engine::{Error, FileType, Fs, WalkItem};
use uf2fs_testkit::{
    fixture, gen_tree, image_helper, kernel_f2fs_args, mkfs_sload, scratch, Rng, TreeSpec,
};

/// The original image plus a few patched blocks, and a length that may be cut short.
struct Patched {
    base: Arc<Vec<u8>>,
    patches: HashMap<u64, Box<[u8; BLOCK_SIZE]>>,
    blocks: u64,
    counters: IoCounters,
}

impl BlockDevice for Patched {
    fn block_count(&self) -> u64 {
        self.blocks
    }
    fn read_blocks(&self, blkaddr: u64, buf: &mut [u8], _: IoCause) -> io::Result<()> {
        let n = (buf.len() / BLOCK_SIZE) as u64;
        if blkaddr.checked_add(n).is_none_or(|e| e > self.blocks) {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "past the end"));
        }
        for (i, chunk) in buf.chunks_mut(BLOCK_SIZE).enumerate() {
            let b = blkaddr + i as u64;
            match self.patches.get(&b) {
                Some(p) => chunk.copy_from_slice(&p[..]),
                None => {
                    let at = b as usize * BLOCK_SIZE;
                    chunk.copy_from_slice(&self.base[at..at + BLOCK_SIZE]);
                }
            }
        }
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

/// Reads everything the image offers, bounded per file; returns the entries seen and the
/// errors met.
fn exercise(fs: &Fs) -> (usize, usize) {
    let _ = fs.info();
    let _ = fs.segment_usage();
    let _ = fs.statfs();
    let mut buf = vec![0u8; 64 * 1024];
    let mut seen = 0;
    let mut errors = 0;
    let walked = fs.walk(fs.root_ino(), &mut |item| {
        let WalkItem::Entry { ino, attr, .. } = item else {
            errors += 1;
            return Ok(true);
        };
        seen += 1;
        errors += usize::from(fs.xattrs(ino).is_err());
        match attr.file_type {
            FileType::Regular => {
                let mut off = 0u64;
                while off < attr.size.min(1 << 20) {
                    match fs.read(ino, off, &mut buf) {
                        Ok(0) => break,
                        // An encrypted file: its contents need the key (not damage).
                        Err(Error::NoKey { .. }) => break,
                        Err(_) => {
                            errors += 1;
                            break;
                        }
                        Ok(n) => off += n as u64,
                    }
                }
                let _ = fs.extents(ino, &mut |_| Ok(()));
            }
            FileType::Symlink => {
                let _ = fs.readlink(ino);
            }
            FileType::Directory => {
                if let Ok(entries) = fs.readdir(ino) {
                    for e in entries.iter().take(40) {
                        let _ = fs.lookup(ino, &e.name);
                    }
                }
            }
            _ => {}
        }
        Ok(true)
    });
    errors += usize::from(walked.is_err());
    let _ = fs.resolve(b"/no/such/path", true);
    (seen, errors)
}

/// Blocks that hold something, in three classes: metadata (before the main area), node blocks
/// (footer nid and ino non-zero and plausible), and the rest (data). Mutations pick a class
/// first, so metadata and nodes are hit as often as the far more numerous data blocks.
fn classes(img: &[u8]) -> [Vec<u64>; 3] {
    let main = u32::from_le_bytes(img[1024 + 92..1024 + 96].try_into().unwrap()) as u64;
    let mut c: [Vec<u64>; 3] = Default::default();
    for (i, b) in img.chunks(BLOCK_SIZE).enumerate() {
        if b.iter().all(|&x| x == 0) {
            continue;
        }
        let word = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
        let class = if (i as u64) < main {
            0
        } else if word(4072) != 0 && word(4076) != 0 && word(4076) <= word(4072) {
            1
        } else {
            2
        };
        c[class].push(i as u64);
    }
    c
}

const INTERESTING: [u32; 10] = [
    0,
    1,
    2,
    3,
    0xFF,
    0x1FF,
    0x200,
    0x7FFF_FFFF,
    0xFFFF_FFFE,
    0xFFFF_FFFF,
];

fn mutate(base: &Arc<Vec<u8>>, classes: &[Vec<u64>; 3], rng: &mut Rng) -> Patched {
    let total = (base.len() / BLOCK_SIZE) as u64;
    let mut dev = Patched {
        base: base.clone(),
        patches: HashMap::new(),
        blocks: total,
        counters: IoCounters::default(),
    };
    let block_of = |dev: &mut Patched, b: u64| -> Box<[u8; BLOCK_SIZE]> {
        dev.patches.remove(&b).unwrap_or_else(|| {
            let at = b as usize * BLOCK_SIZE;
            Box::new(base[at..at + BLOCK_SIZE].try_into().unwrap())
        })
    };
    let rounds = 1 + rng.below(4);
    for _ in 0..rounds {
        let used = &classes[rng.below(3) as usize];
        let b = used[rng.below(used.len() as u64) as usize];
        let mut blk = block_of(&mut dev, b);
        match rng.below(10) {
            0..=4 => {
                for _ in 0..1 + rng.below(8) {
                    let at = rng.below(BLOCK_SIZE as u64) as usize;
                    blk[at] = rng.next_u64() as u8;
                }
            }
            5..=7 => {
                let at = rng.below(BLOCK_SIZE as u64 / 4) as usize * 4;
                let v = if rng.below(2) == 0 {
                    INTERESTING[rng.below(10) as usize]
                } else {
                    rng.next_u64() as u32
                };
                blk[at..at + 4].copy_from_slice(&v.to_le_bytes());
            }
            8 => blk.fill(0),
            _ => dev.blocks = 2 + rng.below(total - 2),
        }
        dev.patches.insert(b, blk);
    }
    dev
}

fn run_mutations(name: &str, img: Vec<u8>, seed: u64) {
    let count: u64 = std::env::var("UF2FS_MUTATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1500);
    let base = Arc::new(img);
    let classes = classes(&base);
    assert!(
        classes.iter().all(|c| !c.is_empty()),
        "{name}: metadata, node and data blocks found"
    );
    let clean = Fs::with_device(Box::new(mutate_none(&base))).expect("the unmutated image mounts");
    let (entries, errors) = exercise(&clean);
    assert_eq!(errors, 0, "{name}: the original image reads without errors");
    assert!(
        entries > 100,
        "{name}: the original image walks ({entries} entries)"
    );
    let mut rng = Rng::new(seed);
    let (mut mounted, mut refused, mut with_errors, mut slowest) =
        (0u64, 0u64, 0u64, Duration::ZERO);
    let mut failures = Vec::new();
    for i in 0..count {
        let dev = mutate(&base, &classes, &mut rng);
        let started = Instant::now();
        let r = catch_unwind(AssertUnwindSafe(|| match Fs::with_device(Box::new(dev)) {
            Ok(fs) => exercise(&fs).1 > 0,
            Err(e) => {
                assert!(!e.to_string().is_empty());
                refused += 1;
                true
            }
        }));
        let took = started.elapsed();
        slowest = slowest.max(took);
        match r {
            Ok(had_errors) => {
                mounted += 1;
                with_errors += u64::from(had_errors);
            }
            Err(_) => failures.push(format!("mutation {i} (seed {seed}) panicked")),
        }
        if took > Duration::from_secs(20) {
            failures.push(format!("mutation {i} (seed {seed}) took {took:?}"));
        }
    }
    let mounted = mounted - refused;
    eprintln!(
        "{name}: {count} mutations: {refused} refused at mount, {mounted} mounted and walked ({} of them met an error in the walk), slowest {slowest:?}",
        with_errors - refused
    );
    assert!(failures.is_empty(), "{name}: {failures:#?}");
}

fn mutate_none(base: &Arc<Vec<u8>>) -> Patched {
    Patched {
        base: base.clone(),
        patches: HashMap::new(),
        blocks: (base.len() / BLOCK_SIZE) as u64,
        counters: IoCounters::default(),
    }
}

#[test]
fn mutated_sload_image() {
    let dir = scratch("mutate-sload");
    let src = dir.join("src");
    gen_tree(
        &src,
        11,
        TreeSpec {
            files: 60,
            max_file: 5_000_000,
            big_dir: 600,
            depth: 8,
        },
    );
    let img = dir.join("img");
    mkfs_sload(&img, 128, "", &src);
    run_mutations("sload default", std::fs::read(&img).unwrap(), 1001);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn mutated_linux_image() {
    let dir = scratch("mutate-linux");
    let img = fixture("linux-default", &dir);
    run_mutations("linux-default", std::fs::read(&img).unwrap(), 2002);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn mutated_linux_image_with_extra_features() {
    let dir = scratch("mutate-linux-extra");
    let img = fixture("linux-extra", &dir);
    run_mutations("linux-extra", std::fs::read(&img).unwrap(), 3003);
    let _ = std::fs::remove_dir_all(&dir);
}

/// An image where Linux made encrypted directories (v2 and v1 policies, names of every
/// no-key form, symlinks, 150 names in one directory), then unmounted: the key is gone.
#[test]
fn mutated_encrypted_image() {
    let dir = scratch("mutate-encrypted");
    let img = dir.join("img");
    std::fs::File::create(&img)
        .unwrap()
        .set_len(64 << 20)
        .unwrap();
    uf2fs_testkit::run(
        std::process::Command::new("mkfs.f2fs")
            .args(["-f", "-q", "-O", "extra_attr,inode_checksum,encrypt"])
            .arg(&img),
    );
    let job = r#"
set -e
P=$PAYLOAD/fscrypt
mkdir -p /tmp/m; mount -t f2fs /dev/vda /tmp/m; cd /tmp/m
mkdir e2 e1
$P setup e2 v2 16 > /dev/null
$P setup e1 v1 4 > /dev/null
name() { printf "$1%.0s" $(seq $2); }
for d in e2 e1; do
  for n in a:1 b:16 c:100 d:149 e:200 f:255; do echo $n > $d/$(name ${n%:*} ${n#*:}); done
  mkdir $d/sub; ln -s $(name T 300) $d/sub/link; ln -s x $d/short
  i=0; while [ $i -lt 60 ]; do touch $d/sub/file$i; i=$((i+1)); done
done
cd /; umount /tmp/m
"#;
    let k = kernel_f2fs_args(
        &img,
        job,
        &dir.join("linux"),
        &[&image_helper("fscrypt")],
        &["--no-mount"],
    );
    assert_eq!(k.exit, 0, "{}", k.job_log);
    run_mutations("linux-encrypted", std::fs::read(&img).unwrap(), 4004);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A mkfs.f2fs `-i` image (large NAT bitmap layout) loaded by sload.f2fs.
fn large_nat_bitmap_image(dir: &std::path::Path) -> Vec<u8> {
    let src = dir.join("src");
    gen_tree(
        &src,
        44,
        TreeSpec {
            files: 60,
            max_file: 3_000_000,
            big_dir: 600,
            depth: 6,
        },
    );
    let img = dir.join("img");
    std::fs::File::create(&img)
        .unwrap()
        .set_len(128 << 20)
        .unwrap();
    uf2fs_testkit::run(
        std::process::Command::new("mkfs.f2fs")
            .args(["-f", "-q", "-i"])
            .arg(&img),
    );
    let _ = uf2fs_testkit::try_run(
        std::process::Command::new("sload.f2fs")
            .arg("-f")
            .arg(&src)
            .arg(&img),
    );
    std::fs::read(&img).unwrap()
}

#[test]
fn mutated_large_nat_bitmap_image() {
    let dir = scratch("mutate-large-nat");
    let img = large_nat_bitmap_image(&dir);
    run_mutations("mkfs -i + sload", img, 4004);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Rewrites every CP block (head and trailing copy of both packs) with `edit`, the CRC
/// recomputed where the edited head says it goes.
fn edit_checkpoints(img: &mut [u8], edit: impl Fn(&mut [u8])) {
    use uf2fs_format::checkpoint::checkpoint_crc;
    for pack in [512usize, 1024] {
        let total = u32::from_le_bytes(
            img[pack * BLOCK_SIZE + 136..pack * BLOCK_SIZE + 140]
                .try_into()
                .unwrap(),
        ) as usize;
        for at in [pack, pack + total - 1] {
            let b = &mut img[at * BLOCK_SIZE..(at + 1) * BLOCK_SIZE];
            edit(b);
            let off = u32::from_le_bytes(b[164..168].try_into().unwrap()) as usize;
            let block: &[u8; BLOCK_SIZE] = (&*b).try_into().unwrap();
            let crc = checkpoint_crc(block, off.min(4092));
            b[off.min(4092)..off.min(4092) + 4].copy_from_slice(&crc.to_le_bytes());
        }
    }
}

/// Hostile checkpoints with the large NAT bitmap flag: bitmap sizes or payload counts that do
/// not fit, the deprecated CRC place. Each is refused at mount with a clear message.
#[test]
fn large_nat_bitmap_checkpoints_that_do_not_fit_are_refused() {
    let dir = scratch("large-nat-hostile");
    let good = large_nat_bitmap_image(&dir);
    let set32 = |b: &mut [u8], at: usize, v: u32| b[at..at + 4].copy_from_slice(&v.to_le_bytes());
    type Edit = Box<dyn Fn(&mut Vec<u8>)>;
    let cases: Vec<(&str, Edit, &str)> = vec![
        (
            "NAT bitmap larger than the NAT area",
            Box::new(move |img| edit_checkpoints(img, |b| set32(b, 160, 5000))),
            "nat_ver_bitmap_bytesize",
        ),
        (
            "SIT bitmap of u32::MAX bytes",
            Box::new(move |img| edit_checkpoints(img, |b| set32(b, 156, u32::MAX))),
            "sit_ver_bitmap_bytesize",
        ),
        (
            "CRC at 4092 with the flag (the deprecated layout)",
            Box::new(move |img| edit_checkpoints(img, |b| set32(b, 164, 4092))),
            "checksum_offset",
        ),
        (
            "summaries said to start inside the payload",
            Box::new(move |img| set32(&mut img[1024..], 1664, 3)),
            "cp_pack_start_sum",
        ),
        (
            "payload longer than a segment",
            Box::new(move |img| set32(&mut img[1024..], 1664, 600)),
            "cp_payload",
        ),
    ];
    for (what, edit, expect) in cases {
        let mut img = good.clone();
        edit(&mut img);
        // Both superblock copies hold the same edit (block 1 is the second copy).
        let (first, rest) = img.split_at_mut(BLOCK_SIZE);
        rest[..BLOCK_SIZE].copy_from_slice(first);
        let base = Arc::new(img);
        let r = catch_unwind(AssertUnwindSafe(|| {
            Fs::with_device(Box::new(mutate_none(&base))).map(|_| ())
        }));
        let err = match r {
            Ok(Err(e)) => e.to_string(),
            Ok(Ok(())) => panic!("{what}: mounted"),
            Err(_) => panic!("{what}: panicked"),
        };
        assert!(err.contains(expect), "{what}: {err}");
        eprintln!("{what}: {err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
