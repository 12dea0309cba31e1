//! Setup shared by the engine's tests.

#![allow(dead_code, reason = "each test file uses the helpers it needs")]
#![allow(
    clippy::unwrap_used,
    reason = "test code: a panic is the failure report"
)]

pub mod crash;

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
