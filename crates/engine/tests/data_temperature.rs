//! Data temperature by rewrite age (`data_temp=age`, the default): a volume kept nearly full
//! under skewed rewrites (80% of the writes to 20% of the file) sends the rewrites of young
//! blocks to the hot data log, the cleaner moves a hot section's survivors to the warm log,
//! and it moves fewer blocks than with every rewrite in the warm log (`data_temp=off`).
//! Every byte reads back as last written, before and after a remount, and fsck.f2fs finds
//! the image clean (it checks each segment's SIT type against the blocks in it).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    reason = "test code: a panic is the failure report"
)]

mod common;

use uf2fs_engine::{AllocMode, DataTemp, Fs, Status};
use uf2fs_testkit::{assert_fsck_clean, scratch, Rng};

const BS: usize = 4096;

/// Fills one file to 90% of a 320 MiB volume's user space, then rewrites `passes` times its
/// size in single blocks, 80% of them in its first fifth, an fsync every 64, in `mode=lfs`
/// (only the cleaner makes room) under `temp`. Checks every block against a model, remounts,
/// checks again and runs fsck.f2fs; returns the status before the unmount and the rewrites.
fn skewed_rewrites(name: &str, temp: DataTemp, passes: u64) -> (Status, u64) {
    let dir = scratch(name);
    let img = common::fresh_image_with(&dir, 320, &Default::default());
    let mut fs = Fs::open_rw(&img).unwrap();
    let mut o = fs.options();
    o.mode = AllocMode::Lfs;
    o.data_temp = temp;
    fs.set_options(o);
    let blocks = fs.statfs().blocks_avail * 90 / 100;
    let hot = blocks / 5;
    let ino = fs
        .create_node(fs.root_ino(), b"f", common::node(0o100644))
        .unwrap();
    let mut rng = Rng::new(7);
    let mut model = rng.bytes(blocks as usize * BS);
    for (i, chunk) in model.chunks(256 * BS).enumerate() {
        fs.write(ino, (i * 256 * BS) as u64, chunk).unwrap();
    }
    fs.sync().unwrap();
    let writes = blocks * passes;
    for n in 0..writes {
        let b = if rng.below(100) < 80 {
            rng.below(hot)
        } else {
            hot + rng.below(blocks - hot)
        } as usize;
        let data = rng.bytes(BS);
        model[b * BS..(b + 1) * BS].copy_from_slice(&data);
        fs.write(ino, (b * BS) as u64, &data)
            .unwrap_or_else(|e| panic!("{name}: write {n} of {writes}: {e}"));
        if n % 64 == 63 {
            fs.fsync(ino, false).unwrap();
        }
    }
    let status = fs.status().unwrap();
    let check = |fs: &Fs| {
        let mut got = vec![0u8; model.len()];
        assert_eq!(fs.read(ino, 0, &mut got).unwrap(), model.len());
        let bad = (0..blocks as usize)
            .find(|&b| got[b * BS..(b + 1) * BS] != model[b * BS..(b + 1) * BS]);
        assert_eq!(
            bad, None,
            "{name}: block {bad:?} differs from the last write"
        );
    };
    check(&fs);
    fs.unmount().unwrap();
    assert_fsck_clean(&img);
    let fs = Fs::open(&img).unwrap();
    check(&fs);
    eprintln!(
        "{name}: {writes} rewrites, gc {:?}, segments {:?}",
        status.gc, status.segments
    );
    (status, writes)
}

#[test]
fn young_rewrites_go_to_the_hot_log_and_the_cleaner_moves_less() {
    let (age, writes) = skewed_rewrites("temp-age", DataTemp::Age, 3);
    let (off, _) = skewed_rewrites("temp-off", DataTemp::Off, 3);
    assert_eq!(age.gc.data_temp, "age");
    assert_eq!(off.gc.data_temp, "off");
    // Most rewrites hit the hot fifth, whose blocks are rewritten long before the others.
    assert!(
        age.gc.hot_rewrites > writes / 2,
        "few rewrites went hot: {:?}",
        age.gc
    );
    assert!(
        age.segments.valid_blocks_by_type[0] > 0,
        "no hot data segment holds user data: {:?}",
        age.segments
    );
    assert_eq!(off.gc.hot_rewrites, 0, "{:?}", off.gc);
    // Off, the hot data log holds only the root directory's dentry block.
    assert!(
        off.segments.valid_blocks_by_type[0] <= 1,
        "{:?}",
        off.segments
    );
    // Hot and cold blocks apart: the cleaner moves less (6% here: 113 846 against 121 018
    // blocks; 4-8% on the 2 GiB benchmark). At 192 MiB, where the open logs and the reserve
    // are a large share of 90 segments, the two tied once the checkpoint's room was counted
    // per node log.
    assert!(
        age.gc.data_blocks_moved < off.gc.data_blocks_moved,
        "age moved {} data blocks, off {}",
        age.gc.data_blocks_moved,
        off.gc.data_blocks_moved
    );
}
