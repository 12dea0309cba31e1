//! Quota accounting: the usage of every user, group and project kept exact in the image's
//! quota files (superblock `qf_ino`), as Linux and fsck.f2fs count it.
//!
//! Every inode is charged to its uid, gid and project id: one inode, and `(i_blocks - 1)`
//! blocks of space (every block of the file but its inode: data, node and xattr blocks).
//! The quota files themselves are not charged. A change is charged where an inode block
//! changes hands: [`Fs::commit`](crate::vol::Fs) charges the difference between the inode as
//! it was read for the edit and as it is written, and freeing an inode takes back what it
//! held. The files are loaded whole at mount ([`Fs::load_quota`]) and written before each
//! checkpoint ([`Fs::flush_quota`]), so every checkpoint's quota files match its inodes.
//!
//! Limits and grace times are kept as they are on the image; uf2fs does not enforce them.

use crate::error::{Error, Result};
use crate::ns::quota_book::{Charge, QuotaBook};
use crate::state::WriteState;
use crate::vol::Fs;
use uf2fs_format::quota::QuotaTree;

impl Fs {
    /// Reads and checks every quota file the superblock names. A damaged one refuses the
    /// writable mount: its usage could not be kept exact.
    pub(crate) fn load_quota(&self) -> Result<Option<QuotaBook>> {
        let inos = self.vol().sb.quota_inos();
        if inos.iter().all(|&i| i == 0) {
            return Ok(None);
        }
        let mut trees = Vec::new();
        for (kind, &ino) in inos.iter().enumerate() {
            if ino == 0 {
                continue;
            }
            let size = self.inode(ino)?.size;
            if size > uf2fs_format::quota::MAX_FILE_BYTES as u64 {
                return Err(Error::ReadOnly(format!(
                    "quota file {ino} is {size} bytes, more than uf2fs keeps in memory"
                )));
            }
            let mut bytes = vec![0u8; size as usize];
            let n = self.read(ino, 0, &mut bytes)?;
            bytes.truncate(n);
            trees
                .push(QuotaTree::parse(ino, kind, bytes).map_err(|e| {
                    Error::ReadOnly(format!("{e}; run fsck.f2fs -f to rebuild it"))
                })?);
        }
        Ok(Some(QuotaBook::new(inos, trees)))
    }

    /// Writes the quota files' changed blocks (out of place, as any file's), before a
    /// checkpoint is prepared: the checkpoint then records them with the inodes they count.
    pub(crate) fn flush_quota(&self, ws: &mut WriteState) -> Result<()> {
        let Some(book) = self.vol().quota.as_ref() else {
            return Ok(());
        };
        let changed = book.take_dirty()?;
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

    /// Moves inode `ino`'s quota charge from `was` to `now` (`None`: no inode), on an image
    /// that keeps quota; the quota files themselves are never charged.
    pub(crate) fn charge_quota(
        &self,
        ino: u32,
        was: Option<Charge>,
        now: Option<Charge>,
    ) -> Result<()> {
        match self.vol().quota.as_ref() {
            Some(book) if !book.is_quota_file(ino) => book.charge(was, now),
            _ => Ok(()),
        }
    }

    /// Usage of `id` in the quota of `kind` (0 user, 1 group, 2 project) as this mount
    /// counts it: (bytes, inodes); `None` when the image keeps no such quota or no entry.
    pub fn quota_usage(&self, kind: usize, id: u32) -> Option<(u64, u64)> {
        self.vol().quota.as_ref()?.usage(kind, id)
    }
}
