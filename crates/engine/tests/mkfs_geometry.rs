//! The layout `uf2fs_format::geometry::plan` computes equals, field by field, the superblock
//! and checkpoint that Debian's mkfs.f2fs 1.15 writes, over sizes from the smallest it
//! accepts to terabytes, section sizes 1-8 and explicit overprovision ratios; where mkfs.f2fs
//! refuses a size, so does the plan.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    reason = "test code: a panic is the failure report"
)]

use std::process::Command;
use uf2fs_format::checkpoint::CpBlock;
use uf2fs_format::geometry::{plan, GeometryError, GeometryOptions};
use uf2fs_format::superblock::Superblock;
use uf2fs_testkit::{scratch, try_run};

fn check(dir: &std::path::Path, mib: u64, segs_per_sec: u32, ovp: Option<f64>) -> bool {
    let img = dir.join(format!("g-{mib}-{segs_per_sec}-{ovp:?}.img"));
    std::fs::File::create(&img)
        .unwrap()
        .set_len(mib << 20)
        .unwrap();
    let mut mk = Command::new("mkfs.f2fs");
    mk.args(["-f", "-q", "-t", "0", "-s", &segs_per_sec.to_string()]);
    if let Some(o) = ovp {
        mk.args(["-o", &o.to_string()]);
    }
    let (ok, _, _) = try_run(mk.arg(&img));
    let opts = GeometryOptions {
        device_bytes: mib << 20,
        sector_size: 512,
        segs_per_sec,
        secs_per_zone: 1,
        overprovision: ovp,
        large_nat_bitmap: false,
        read_only: false,
    };
    let ours = plan(&opts);
    if !ok {
        assert!(
            matches!(ours, Err(GeometryError::TooSmall(_))),
            "{mib} MiB -s {segs_per_sec}: mkfs.f2fs refuses, we planned {ours:?}"
        );
        std::fs::remove_file(&img).unwrap();
        return false;
    }
    let g = ours.unwrap_or_else(|e| {
        panic!("{mib} MiB -s {segs_per_sec}: mkfs.f2fs made it, we refuse: {e}")
    });
    let mut head = vec![0u8; 4096 * 2];
    use std::io::Read;
    std::fs::File::open(&img)
        .unwrap()
        .read_exact(&mut head)
        .unwrap();
    let sb = Superblock::parse(&head[..4096], 0).unwrap();
    let r = sb.raw();
    let what = format!("{mib} MiB -s {segs_per_sec} -o {ovp:?}");
    let fields = [
        ("block_count", r.block_count.get(), g.block_count),
        (
            "segment0",
            r.segment0_blkaddr.get().into(),
            g.segment0_blkaddr.into(),
        ),
        (
            "segment_count",
            r.segment_count.get().into(),
            g.segment_count.into(),
        ),
        (
            "sit segs",
            r.segment_count_sit.get().into(),
            g.segment_count_sit.into(),
        ),
        (
            "nat segs",
            r.segment_count_nat.get().into(),
            g.segment_count_nat.into(),
        ),
        (
            "ssa segs",
            r.segment_count_ssa.get().into(),
            g.segment_count_ssa.into(),
        ),
        (
            "main segs",
            r.segment_count_main.get().into(),
            g.segment_count_main.into(),
        ),
        (
            "sections",
            r.section_count.get().into(),
            g.section_count.into(),
        ),
        (
            "main_blkaddr",
            r.main_blkaddr.get().into(),
            g.main_blkaddr.into(),
        ),
        ("cp_payload", r.cp_payload.get().into(), g.cp_payload.into()),
    ];
    for (name, theirs, mine) in fields {
        assert_eq!(theirs, mine, "{what}: {name}");
    }
    let cp_addr = u64::from(r.cp_blkaddr.get());
    let mut f = std::fs::File::open(&img).unwrap();
    use std::io::{Seek, SeekFrom};
    f.seek(SeekFrom::Start(cp_addr * 4096)).unwrap();
    let mut cpb = [0u8; 4096];
    f.read_exact(&mut cpb).unwrap();
    let cp = CpBlock::parse(&cpb, cp_addr).unwrap().head;
    assert_eq!(
        cp.rsvd_segment_count.get(),
        g.reserved_segments,
        "{what}: reserved"
    );
    assert_eq!(
        cp.overprov_segment_count.get(),
        g.overprov_segments,
        "{what}: overprov"
    );
    assert_eq!(cp.free_segment_count.get(), g.free_segments, "{what}: free");
    assert_eq!(
        cp.user_block_count.get(),
        g.user_block_count,
        "{what}: user blocks"
    );
    let theirs: Vec<u32> = (0..3)
        .map(|i| cp.cur_data_segno[i].get())
        .chain((0..3).map(|i| cp.cur_node_segno[i].get()))
        .collect();
    assert_eq!(theirs, g.cursegs.to_vec(), "{what}: current segments");
    std::fs::remove_file(&img).unwrap();
    true
}

#[test]
fn plan_equals_mkfs_f2fs() {
    let dir = scratch("geometry");
    let mut made = 0;
    let mut refused = 0;
    let sizes = [
        1,
        16,
        30,
        38,
        40,
        50,
        64,
        100,
        129,
        200,
        256,
        300,
        500,
        512,
        513,
        700,
        1024,
        1500,
        2048,
        3000,
        5000,
        8192,
        20_000,
        64 << 10,
        4 << 20,
        12 << 20,
    ];
    for mib in sizes {
        for s in [1, 2, 4, 8] {
            if check(&dir, mib, s, None) {
                made += 1;
            } else {
                refused += 1;
            }
        }
    }
    for (mib, o) in [(512, 5.0), (1024, 3.89), (2048, 1.5), (300, 20.0)] {
        assert!(check(&dir, mib, 1, Some(o)));
        made += 1;
    }
    eprintln!("{made} layouts equal mkfs.f2fs's, {refused} sizes refused by both");
    assert!(made > 60 && refused > 4);
    let _ = std::fs::remove_dir_all(&dir);
}
