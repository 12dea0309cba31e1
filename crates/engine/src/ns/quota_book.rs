//! The quota book: what each inode is charged ([`Charge`]) and the quota files in memory
//! ([`QuotaBook`]), apart from the code that writes them (`ns/quota.rs`) so that the volume
//! can hold the book without depending on the namespace.

use crate::error::{Error, Result};
use std::sync::Mutex;
use uf2fs_format::inode::I_ADDR_OFFSET;
use uf2fs_format::quota::{inode_space, QuotaTree};

/// What an inode is charged: its ids (user, group, project) and space in bytes; and one
/// inode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Charge {
    ids: [u32; 3],
    space: u64,
}

impl Charge {
    /// The charge of inode block `b`; `projid` says whether the inode has a project id field
    /// (a property of its layout, which edits do not change).
    pub(crate) fn of_block(b: &[u8], has_projid: bool) -> Charge {
        let word = |at: usize| {
            b.get(at..at + 4)
                .and_then(|s| <[u8; 4]>::try_from(s).ok())
                .map_or(0, u32::from_le_bytes)
        };
        let blocks = uf2fs_format::le64(b, 24).unwrap_or(1);
        Charge {
            ids: [
                word(4),
                word(8),
                if has_projid {
                    word(I_ADDR_OFFSET + 4)
                } else {
                    0
                },
            ],
            space: inode_space(blocks),
        }
    }
}

/// A quota file's inode, length and changed 4 KiB blocks.
pub(crate) type DirtyFile = (u32, u64, Vec<(u64, uf2fs_format::Block)>);

/// The quota files of a writable mount, in memory.
pub(crate) struct QuotaBook {
    /// Quota inode numbers (user, group, project; 0 where the image has none).
    inos: [u32; 3],
    trees: Mutex<Vec<QuotaTree>>,
}

impl QuotaBook {
    /// The book of quota files `trees` (already checked); `inos` as the superblock names them.
    pub(crate) fn new(inos: [u32; 3], trees: Vec<QuotaTree>) -> QuotaBook {
        QuotaBook {
            inos,
            trees: Mutex::new(trees),
        }
    }

    /// The changed 4 KiB blocks of every quota file (inode, file length, blocks), taken.
    pub(crate) fn take_dirty(&self) -> Result<Vec<DirtyFile>> {
        let mut trees = self
            .trees
            .lock()
            .map_err(|_| Error::InvalidArgument("internal lock poisoned"))?;
        Ok(trees
            .iter_mut()
            .filter(|t| t.is_dirty())
            .map(|t| (t.ino(), t.bytes().len() as u64, t.take_dirty()))
            .collect())
    }

    /// Whether `ino` is a quota file (never charged).
    pub(crate) fn is_quota_file(&self, ino: u32) -> bool {
        ino != 0 && self.inos.contains(&ino)
    }

    /// Moves an inode's charge from `was` to `now` (`None`: no inode).
    pub(crate) fn charge(&self, was: Option<Charge>, now: Option<Charge>) -> Result<()> {
        if was == now {
            return Ok(());
        }
        let mut trees = self
            .trees
            .lock()
            .map_err(|_| Error::InvalidArgument("internal lock poisoned"))?;
        for t in trees.iter_mut() {
            let k = t.kind();
            for (c, sign) in [(was, -1i64), (now, 1i64)] {
                if let Some(c) = c {
                    let id = c.ids.get(k).copied().unwrap_or(0);
                    let space = i64::try_from(c.space).unwrap_or(i64::MAX);
                    t.add_usage(id, sign * space, sign)
                        .map_err(Error::Corrupt)?;
                }
            }
        }
        Ok(())
    }

    /// Usage of `id` in the quota of `kind` (0 user, 1 group, 2 project): (bytes, inodes).
    pub(crate) fn usage(&self, kind: usize, id: u32) -> Option<(u64, u64)> {
        let trees = self.trees.lock().ok()?;
        let t = trees.iter().find(|t| t.kind() == kind)?;
        t.get(id).map(|d| (d.space.get(), d.inodes.get()))
    }
}
