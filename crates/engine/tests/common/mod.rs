//! Setup shared by the engine's tests.

#![allow(dead_code, reason = "each test file uses the helpers it needs")]
#![allow(
    clippy::unwrap_used,
    reason = "test code: a panic is the failure report"
)]

pub mod crash;

/// A copy of `data` placed in memory so that its byte `i` sits at `phase + i` past a block
/// boundary (`phase` taken modulo 4096), as a FUSE request's payload lies when the io_uring
/// transport aligns it (phase 0): (allocation, offset of `data` in it).
pub fn block_aligned(data: &[u8], phase: usize) -> (Vec<u8>, usize) {
    let mut mem = vec![0u8; data.len() + 2 * 4096];
    let at = (4096 - mem.as_ptr() as usize % 4096) % 4096 + phase % 4096;
    mem[at..at + data.len()].copy_from_slice(data);
    (mem, at)
}

use std::path::{Path, PathBuf};
use uf2fs_engine::uf2fs_device::FileDevice;
use uf2fs_engine::{mkfs, MkfsOptions, NewInode};

/// A new image file `dir/img` of `mib` MiB made by `uf2fs mkfs` with `features`.
pub fn fresh_image(dir: &Path, mib: u64, features: u32) -> PathBuf {
    fresh_image_with(
        dir,
        mib,
        &MkfsOptions {
            features,
            ..MkfsOptions::default()
        },
    )
}

/// A new image of `mib` MiB made by `uf2fs mkfs` with `opts`.
pub fn fresh_image_with(dir: &Path, mib: u64, opts: &MkfsOptions) -> PathBuf {
    let img = dir.join("img");
    std::fs::File::create(&img)
        .unwrap()
        .set_len(mib << 20)
        .unwrap();
    mkfs(&FileDevice::open(&img, true).unwrap(), opts).unwrap();
    img
}

/// A new inode of `mode`, owned by root.
pub fn node(mode: u16) -> NewInode {
    NewInode {
        mode,
        uid: 0,
        gid: 0,
        rdev: (0, 0),
    }
}
