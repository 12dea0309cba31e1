//! Quota accounting: the usage of every user, group and project kept exact in the image's
//! quota files (superblock `qf_ino`), as Linux and fsck.f2fs count it.
//!
//! Every inode is charged to its uid, gid and project id: one inode, and `(i_blocks - 1)`
//! blocks of space (every block of the file but its inode: data, node and xattr blocks).
//! The quota files themselves are not charged. A change is charged where an inode block
//! changes hands: [`Fs::commit`](crate::vol::Fs) charges the difference between the inode as
//! it was read for the edit and as it is written, and freeing an inode takes back what it
//! held. The files are loaded whole at mount ([`QuotaBook::load`]) and written before each
//! checkpoint ([`Fs::flush_quota`]), so every checkpoint's quota files match its inodes.
//!
//! Limits and grace times are kept as they are on the image; uf2fs does not enforce them.

use crate::error::{Error, Result};
use crate::state::WriteState;
use crate::vol::Fs;
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

/// The quota files of a writable mount, in memory.
pub(crate) struct QuotaBook {
    /// Quota inode numbers (user, group, project; 0 where the image has none).
    inos: [u32; 3],
    trees: Mutex<Vec<QuotaTree>>,
}

impl QuotaBook {
    /// Reads and checks every quota file the superblock names. A damaged one refuses the
    /// writable mount: its usage could not be kept exact.
    pub(crate) fn load(fs: &Fs) -> Result<Option<QuotaBook>> {
        let inos = fs.vol().sb.quota_inos();
        if inos.iter().all(|&i| i == 0) {
            return Ok(None);
        }
        let mut trees = Vec::new();
        for (kind, &ino) in inos.iter().enumerate() {
            if ino == 0 {
                continue;
            }
            let size = fs.inode(ino)?.size;
            if size > uf2fs_format::quota::MAX_FILE_BYTES as u64 {
                return Err(Error::ReadOnly(format!(
                    "quota file {ino} is {size} bytes, more than uf2fs keeps in memory"
                )));
            }
            let mut bytes = vec![0u8; size as usize];
            let n = fs.read(ino, 0, &mut bytes)?;
            bytes.truncate(n);
            trees
                .push(QuotaTree::parse(ino, kind, bytes).map_err(|e| {
                    Error::ReadOnly(format!("{e}; run fsck.f2fs -f to rebuild it"))
                })?);
        }
        Ok(Some(QuotaBook {
            inos,
            trees: Mutex::new(trees),
        }))
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

/// A quota file's inode, length and changed 4 KiB blocks.
type DirtyFile = (u32, u64, Vec<(u64, uf2fs_format::Block)>);

impl Fs {
    /// Writes the quota files' changed blocks (out of place, as any file's), before a
    /// checkpoint is prepared: the checkpoint then records them with the inodes they count.
    pub(crate) fn flush_quota(&self, ws: &mut WriteState) -> Result<()> {
        let Some(book) = self.vol().quota.as_ref() else {
            return Ok(());
        };
        let changed: Vec<DirtyFile> = {
            let mut trees = book
                .trees
                .lock()
                .map_err(|_| Error::InvalidArgument("internal lock poisoned"))?;
            trees
                .iter_mut()
                .filter(|t| t.is_dirty())
                .map(|t| (t.ino(), t.bytes().len() as u64, t.take_dirty()))
                .collect()
        };
        for (ino, len, blocks) in changed {
            let mut e = self.edit(ino)?;
            self.write_file_blocks(
                ws,
                &mut e,
                crate::space::Log::WarmData,
                false,
                blocks.iter().map(|(fb, b)| (*fb, &b[..])),
            )?;
            if e.size() < len {
                e.set_size(len);
            }
            self.commit(e)?;
        }
        Ok(())
    }

    /// Usage of `id` in the quota of `kind` (0 user, 1 group, 2 project) as this mount
    /// counts it: (bytes, inodes); `None` when the image keeps no such quota or no entry.
    pub fn quota_usage(&self, kind: usize, id: u32) -> Option<(u64, u64)> {
        self.vol().quota.as_ref()?.usage(kind, id)
    }
}
