//! Writing far into a file: blocks in the inode, both direct nodes, both indirect trees and
//! the double-indirect tree (at 9 and 12 GiB, as Linux's fixture has them); holes between
//! stay holes (a few blocks allocated), the bytes read back in uf2fs and in Linux, truncating
//! frees the nodes again, and both fsck.f2fs and uf2fs fsck are clean.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    reason = "test code: a panic is the failure report"
)]

mod common;

use uf2fs_engine::Fs;
use uf2fs_testkit::{assert_fsck_clean, kernel_f2fs, scratch};

const GIB: u64 = 1 << 30;
const AT: [u64; 7] = [
    0,
    3_600_000,
    8_000_000,
    100 * 1024 * 1024,
    5 * GIB,
    9 * GIB,
    12 * GIB,
];

#[test]
fn writes_through_every_node_level() {
    let dir = scratch("huge");
    let img = common::fresh_image(&dir, 256, 0);
    let fs = Fs::open_rw(&img).unwrap();
    let f = fs
        .create_node(fs.root_ino(), b"huge", common::node(0o100644))
        .unwrap();
    for (i, &off) in AT.iter().enumerate() {
        fs.write(f, off, format!("marker-{i}").as_bytes()).unwrap();
    }
    let keep = fs
        .create_node(fs.root_ino(), b"cut", common::node(0o100644))
        .unwrap();
    for &off in &AT {
        fs.write(keep, off, b"x").unwrap();
    }
    fs.truncate(keep, 4096).unwrap();
    fs.unmount().unwrap();
    assert_fsck_clean(&img);
    let fs = Fs::open(&img).unwrap();
    let r = fs.check().unwrap();
    assert!(r.findings.is_empty(), "{:#?}", r.findings);
    let a = fs.getattr(f).unwrap();
    assert_eq!(a.size, 12 * GIB + 8);
    assert!(
        a.blocks_512 < 200,
        "holes stay holes ({} sectors)",
        a.blocks_512
    );
    for (i, &off) in AT.iter().enumerate() {
        let mut buf = [0u8; 8];
        fs.read(f, off, &mut buf).unwrap();
        assert_eq!(&buf, format!("marker-{i}").as_bytes());
    }
    assert_eq!(
        fs.getattr(keep).unwrap().blocks_512,
        8,
        "truncation freed every node"
    );
    let job = "cd /mnt; for o in 0 3600000 8000000 104857600 5368709120 9663676416 12884901888; do dd if=huge bs=1 skip=$o count=8 2>/dev/null; echo; done > $OUT/markers.txt; stat -c %s huge >> $OUT/markers.txt\n";
    let k = kernel_f2fs(&img, job, &dir.join("k"));
    assert_eq!(k.exit, 0, "{}", k.job_log);
    assert!(k.f2fs_complaints().is_empty(), "{:#?}", k.f2fs_complaints());
    let got = std::fs::read_to_string(k.out.join("markers.txt")).unwrap();
    let want: String = (0..AT.len())
        .map(|i| format!("marker-{i}\n"))
        .collect::<String>()
        + &format!("{}\n", 12 * GIB + 8);
    assert_eq!(got, want, "Linux reads every marker");
    let _ = std::fs::remove_dir_all(&dir);
}
