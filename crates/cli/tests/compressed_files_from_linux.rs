//! Compressed files that Linux 6.1 wrote, read back by uf2fs. One boot of the kernel
//! (tools/linux-f2fs) on an image made with `mkfs.f2fs -O extra_attr,compression` mounts it
//! once per configuration below (every algorithm, lz4hc and zstd levels, cluster sizes 4 KiB
//! to 1 MiB, compress_chksum on and off, a `chattr +c` directory or compress_extension=) and
//! writes, in each, files that compress well, poorly (random: plain clusters), zeros (LZO-RLE's
//! zero runs), a mix, sizes that are no multiple of the cluster, holes, and in one of them a
//! file whose saved blocks were released. The guest records treeview's view and stat's
//! (inode, links, st_blocks). Then uf2fs must show the same tree, field for field, through
//! `uf2fs extract` and through its FUSE mount, report the same st_blocks, and both fsck.f2fs
//! and `uf2fs fsck` must find the image clean.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    reason = "test code: a panic is the failure report"
)]

use std::process::Command;
use uf2fs_engine::Fs;
use uf2fs_format::compress::Algorithm;
use uf2fs_testkit::{
    assert_fsck_clean, assert_same_view, image_helper, kernel_f2fs_args, run, scratch, try_run,
    view, Mount,
};

/// name, mount options, how files get compressed (`chattr`: the directory's flag; `ext`:
/// compress_extension=txt, so only *.txt files are compressed).
const CONFIGS: [(&str, &str, &str); 8] = [
    (
        "lz4_c4k",
        "compress_algorithm=lz4,compress_log_size=2",
        "chattr",
    ),
    (
        "lz4hc_c32k_sum",
        "compress_algorithm=lz4:9,compress_log_size=3,compress_chksum",
        "chattr",
    ),
    (
        "zstd_c64k_sum",
        "compress_algorithm=zstd:6,compress_log_size=4,compress_chksum",
        "chattr",
    ),
    (
        "lzo_c128k_sum",
        "compress_algorithm=lzo,compress_log_size=5,compress_chksum",
        "chattr",
    ),
    (
        "lzorle_c256k",
        "compress_algorithm=lzo-rle,compress_log_size=6",
        "chattr",
    ),
    (
        "lzorle_c16k_sum",
        "compress_algorithm=lzo-rle,compress_log_size=2,compress_chksum",
        "chattr",
    ),
    (
        "zstd_ext",
        "compress_algorithm=zstd,compress_log_size=3,compress_extension=txt",
        "ext",
    ),
    (
        "lz4_c1m_sum",
        "compress_algorithm=lz4,compress_log_size=8,compress_chksum",
        "chattr",
    ),
];

const JOB_HEAD: &str = r#"
set -e
fail() { echo "job: FAILED: $*"; exit 1; }
# gen NAME NBYTES: compressible text, every 4 KiB block labelled
gen() {
  awk -v name="$1" -v n="$2" 'BEGIN {
    f = ""; while (length(f) < 4200) f = f "The quick brown fox jumps over the lazy dog; 0123456789 "
    for (off = 0; off < n; off += 4096) {
      b = sprintf("<%s block %d>\n", name, off / 4096) f
      k = n - off; if (k > 4096) k = 4096
      printf "%s", substr(b, 1, k)
    }
  }'
}
# files DIR SUFFIX: the set of files every configuration writes
files() {
  gen "$1/text" 1234567 > "$1/text$2"
  head -c 300000 /dev/urandom > "$1/random$2"
  head -c 700001 /dev/zero > "$1/zeros$2"
  gen "$1/mixed" 600000 > "$1/mixed$2"
  head -c 131072 /dev/urandom | dd of="$1/mixed$2" bs=4096 seek=40 conv=notrunc 2>/dev/null
  head -c 65536 /dev/zero | dd of="$1/mixed$2" bs=4096 seek=100 conv=notrunc 2>/dev/null
  gen "$1/sparse" 8192 > "$1/sparse$2"
  gen "$1/sparse_mid" 300000 | dd of="$1/sparse$2" bs=4096 seek=700 conv=notrunc 2>/dev/null
  truncate -s 5000000 "$1/sparse$2"
  gen "$1/small" 5000 > "$1/small$2"
  gen "$1/tail" 1048577 > "$1/tail$2"
}
config() {
  name=$1; opts=$2; how=$3
  mount -t f2fs -o "$opts" /dev/vda /mnt || fail "mount -o $opts"
  mkdir /mnt/$name
  if [ $how = chattr ]; then
    $PAYLOAD/setcompr /mnt/$name || fail "setcompr $name"
    files /mnt/$name ""
  else
    files /mnt/$name .txt
    gen plain 200000 > /mnt/$name/plain.dat
  fi
  sync
  umount /mnt
}
"#;

const JOB_TAIL: &str = r#"
mount -t f2fs -o compress_algorithm=lz4,compress_log_size=2 /dev/vda /mnt || fail "mount for release"
mkdir /mnt/released
$PAYLOAD/setcompr /mnt/released
gen released 400000 > /mnt/released/file
gen kept 400000 > /mnt/released/kept
sync
echo "released: $($PAYLOAD/setcompr --release /mnt/released/file) blocks"
umount /mnt
mount -t f2fs /dev/vda /mnt || fail "final mount"
cd /mnt
for d in */; do
  for f in $d*; do echo "$f $($PAYLOAD/setcompr --blocks $f 2>/dev/null || echo -)"; done
done
$PAYLOAD/treeview /mnt | sort > $OUT/view.txt
find . -exec stat -c '%i	%h	%b	%n' {} + | sort -t '	' -k4 > $OUT/stat.txt
cat /sys/kernel/debug/f2fs/status > $OUT/status.txt 2>/dev/null || true
cd /
umount /mnt
"#;

fn lines(p: &std::path::Path) -> Vec<String> {
    String::from_utf8_lossy(&std::fs::read(p).unwrap())
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn linux_compressed_files_read_back_field_for_field() {
    assert!(
        rustix::process::geteuid().is_root(),
        "this test mounts and keeps owners: run it as root"
    );
    let dir = scratch("compressed-from-linux");
    let img = dir.join("img");
    run(Command::new("truncate").args(["-s", "192M"]).arg(&img));
    run(Command::new("mkfs.f2fs")
        .args(["-f", "-q", "-O", "extra_attr,compression"])
        .arg(&img));
    let mut job = JOB_HEAD.to_owned();
    for (name, opts, how) in CONFIGS {
        job.push_str(&format!("config {name} {opts} {how}\n"));
    }
    job.push_str(JOB_TAIL);
    let k = kernel_f2fs_args(
        &img,
        &job,
        &dir,
        &[&image_helper("setcompr")],
        &["--no-mount"],
    );
    assert_eq!(k.exit, 0, "Linux job failed:\n{}\n{}", k.job_log, k.dmesg);
    assert!(
        k.f2fs_complaints().is_empty(),
        "dmesg: {:#?}",
        k.f2fs_complaints()
    );
    eprintln!("{}", k.job_log);
    assert_fsck_clean(&img);
    let want = lines(&k.out.join("view.txt"));
    assert!(want.len() > 60, "Linux's view has {} lines", want.len());

    // The files are what the configurations asked for.
    let fs = Fs::open(&img).expect("open");
    let report = fs.check().expect("uf2fs fsck");
    assert!(
        report.findings.is_empty(),
        "uf2fs fsck: {:#?}",
        report.findings
    );
    let comp = |path: &str| {
        let ino = fs.resolve(path.as_bytes(), false).unwrap();
        fs.compression(ino).unwrap()
    };
    let want_alg = [
        ("lz4_c4k", Algorithm::Lz4, 2, false),
        ("lz4hc_c32k_sum", Algorithm::Lz4, 3, true),
        ("zstd_c64k_sum", Algorithm::Zstd, 4, true),
        ("lzo_c128k_sum", Algorithm::Lzo, 5, true),
        ("lzorle_c256k", Algorithm::LzoRle, 6, false),
        ("lzorle_c16k_sum", Algorithm::LzoRle, 2, true),
        ("lz4_c1m_sum", Algorithm::Lz4, 8, true),
    ];
    for (d, alg, log, sum) in want_alg {
        let c = comp(&format!("/{d}/text")).unwrap_or_else(|| panic!("{d}/text not compressed"));
        assert_eq!(
            (c.algorithm, c.log_cluster_size, c.checksum),
            (alg, log, sum),
            "{d}/text"
        );
        assert!(c.compr_blocks > 0, "{d}/text saved no blocks");
        if alg == Algorithm::Lz4 && d.contains("hc") {
            assert_eq!(c.level, 9, "{d}: lz4hc level");
        }
    }
    assert_eq!(comp("/zstd_c64k_sum/text").unwrap().level, 6, "zstd level");
    assert!(comp("/zstd_ext/text.txt").is_some(), "compress_extension");
    assert!(
        comp("/zstd_ext/plain.dat").is_none(),
        "plain.dat is not compressed"
    );
    let released = comp("/released/file").expect("released file is compressed");
    assert!(released.released, "released flag");
    assert!(!comp("/released/kept").unwrap().released);

    // extract shows Linux's tree.
    let out = dir.join("out");
    let (ok, _, err) = try_run(
        Command::new(env!("CARGO_BIN_EXE_uf2fs"))
            .arg("extract")
            .arg(&img)
            .arg(&out),
    );
    assert!(ok, "extract failed:\n{err}");
    assert_same_view(&want, &view(&out, None), "extract");

    // st_blocks, inode numbers and link counts as Linux's stat printed them.
    let mut checked = 0;
    for line in lines(&k.out.join("stat.txt")) {
        let f: Vec<&str> = line.splitn(4, '\t').collect();
        let path = f[3].strip_prefix('.').unwrap();
        let ino = fs.resolve(path.as_bytes(), false).unwrap();
        let a = fs.getattr(ino).unwrap();
        assert_eq!(
            (a.ino, a.nlink, a.blocks_512),
            (
                f[0].parse::<u32>().unwrap(),
                f[1].parse::<u32>().unwrap(),
                f[2].parse::<u64>().unwrap()
            ),
            "ino, links, st_blocks of {path}"
        );
        checked += 1;
    }
    assert!(checked > 60, "stat list has {checked} lines");
    drop(fs);

    // The FUSE mount shows it too, SEEK_DATA/SEEK_HOLE included (treeview's hash uses
    // them). A file whose saved blocks were released refuses writes (EPERM, as in Linux);
    // the others take them (compressed_writes_with_linux judges those writes).
    let mnt = dir.join("mnt");
    let m = Mount::new(
        std::path::Path::new(env!("CARGO_BIN_EXE_uf2fs")),
        &img,
        &mnt,
        &[],
    );
    assert_same_view(&want, &view(&mnt, None), "FUSE mount");
    let w = std::fs::OpenOptions::new()
        .append(true)
        .open(mnt.join("released/file"))
        .and_then(|mut f| std::io::Write::write_all(&mut f, b"more").and_then(|()| f.sync_all()));
    assert_eq!(
        w.map_err(|e| e.raw_os_error()),
        Err(Some(1)),
        "writing a file whose compressed blocks were released"
    );
    m.umount();
    // cat through the CLI equals the extracted bytes
    let cat = Command::new(env!("CARGO_BIN_EXE_uf2fs"))
        .arg("cat")
        .arg(&img)
        .arg("/lzo_c128k_sum/mixed")
        .output()
        .unwrap();
    assert!(cat.status.success());
    assert_eq!(
        cat.stdout,
        std::fs::read(out.join("lzo_c128k_sum/mixed")).unwrap()
    );
    let _ = std::fs::remove_dir_all(&dir);
}
