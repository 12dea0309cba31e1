//! rename, with the kernel's rules: replacing a file, or an empty directory by a directory;
//! RENAME_NOREPLACE (fail if the target exists) and RENAME_EXCHANGE (swap two entries);
//! a directory may not move into its own subtree; a directory that changes parent has its
//! '..' entry and both parents' link counts updated; the moved inode's i_pino and i_name
//! follow (roll-forward recovery reads them).

use crate::error::{Error, Result};
use crate::ns::delete::Found;
use crate::vol::Fs;
use uf2fs_format::dentry::DIR_ENTRY_SIZE;
use uf2fs_format::inode::{FileType, MAX_NAME_LEN};

/// rename flags (as renameat2 spells them).
pub const RENAME_NOREPLACE: u32 = 1;
pub const RENAME_EXCHANGE: u32 = 2;

impl Fs {
    /// Points an existing entry at another inode (and type).
    fn retarget(
        &self,
        ws: &mut crate::state::WriteState,
        dir: u32,
        f: &Found,
        ino: u32,
        ft: FileType,
    ) -> Result<()> {
        self.change_entry_area(ws, dir, f.fblk, |area, e0| {
            let at = e0 + f.slot * DIR_ENTRY_SIZE;
            if let Some(d) = area.get_mut(at + 4..at + 8) {
                d.copy_from_slice(&ino.to_le_bytes());
            }
            if let Some(t) = area.get_mut(at + 10) {
                *t = ft.dentry_code();
            }
        })
    }

    /// Whether `ancestor` is `dir` or one of its ancestors (following '..').
    fn is_ancestor(&self, ancestor: u32, mut dir: u32) -> Result<bool> {
        let root = self.root_ino();
        for _ in 0..100_000 {
            if dir == ancestor {
                return Ok(true);
            }
            if dir == root {
                return Ok(false);
            }
            dir = self.lookup(dir, b"..")?;
        }
        Err(uf2fs_format::CorruptKind::DirectoryCycle {
            ino: dir,
            child: ancestor,
        }
        .into())
    }

    fn moved_inode(&self, ino: u32, new_parent: u32, new_name: &[u8]) -> Result<()> {
        let mut e = self.edit(ino)?;
        e.set_u32(84, new_parent);
        e.set_u32(88, new_name.len() as u32);
        if let Some(n) = e.block.get_mut(92..92 + MAX_NAME_LEN) {
            n.fill(0);
            if let Some(d) = n.get_mut(..new_name.len()) {
                d.copy_from_slice(new_name);
            }
        }
        e.touch(false);
        self.commit(e)
    }

    /// Renames `old_parent/old_name` to `new_parent/new_name`.
    pub fn rename(
        &self,
        old_parent: u32,
        old_name: &[u8],
        new_parent: u32,
        new_name: &[u8],
        flags: u32,
    ) -> Result<()> {
        self.check_rename(old_name, new_name, flags)?;
        self.changing(8, |ws| {
            self.rename_in(ws, old_parent, old_name, new_parent, new_name, flags)
        })
    }

    /// Renames like [`Fs::rename`] and leaves a whiteout (a 0:0 character device made with
    /// `whiteout`'s owner and mode) in the old place, in one change (RENAME_WHITEOUT, which
    /// overlayfs uses: it must never see the old name gone without its whiteout).
    pub fn rename_whiteout(
        &self,
        old_parent: u32,
        old_name: &[u8],
        new_parent: u32,
        new_name: &[u8],
        flags: u32,
        whiteout: crate::ns::write::NewInode,
    ) -> Result<()> {
        if flags & RENAME_EXCHANGE != 0 {
            return Err(Error::InvalidArgument("a whiteout rename cannot exchange"));
        }
        self.check_rename(old_name, new_name, flags)?;
        self.changing(16, |ws| {
            self.rename_in(ws, old_parent, old_name, new_parent, new_name, flags)?;
            match self.lookup(old_parent, old_name) {
                // Renamed onto itself: nothing moved, no whiteout.
                Ok(_) => Ok(()),
                Err(Error::NotFound) => self
                    .make_inode_in(ws, old_parent, old_name, whiteout, &[])
                    .map(|_| ()),
                Err(e) => Err(e),
            }
        })
    }

    fn check_rename(&self, old_name: &[u8], new_name: &[u8], flags: u32) -> Result<()> {
        if flags & !(RENAME_NOREPLACE | RENAME_EXCHANGE) != 0
            || flags == RENAME_NOREPLACE | RENAME_EXCHANGE
        {
            return Err(Error::InvalidArgument(
                "unknown or conflicting rename flags",
            ));
        }
        crate::ns::write::check_name(new_name)?;
        if old_name == b"." || old_name == b".." {
            return Err(Error::InvalidArgument("cannot rename '.' or '..'"));
        }
        Ok(())
    }

    fn rename_in(
        &self,
        ws: &mut crate::state::WriteState,
        old_parent: u32,
        old_name: &[u8],
        new_parent: u32,
        new_name: &[u8],
        flags: u32,
    ) -> Result<()> {
        let (od, nd) = (self.inode(old_parent)?, self.inode(new_parent)?);
        if od.file_type != FileType::Directory || nd.file_type != FileType::Directory {
            return Err(Error::NotADirectory);
        }
        let src = self.find_entry(&od, old_name)?;
        // Linux needs the keys of both directories when either is encrypted (ENOKEY).
        self.vol().refuse_encrypted_dir(&od)?;
        self.vol().refuse_encrypted_dir(&nd)?;
        // Recovery finds a file's entry by the name and parent in its inode: a renamed
        // file's next fsync checkpoints (as the kernel's lost-pino rule does).
        self.needs_checkpoint(ws, src.ino);
        let sattr = self.inode(src.ino)?;
        let target = match self.find_entry(&nd, new_name) {
            Ok(t) => Some(t),
            Err(Error::NotFound) => None,
            Err(e) => return Err(e),
        };
        if old_parent == new_parent && old_name == new_name {
            return Ok(());
        }
        if target.as_ref().is_some_and(|t| t.ino == src.ino) && flags & RENAME_EXCHANGE == 0 {
            return Ok(()); // two names of one inode: nothing to do, as POSIX says
        }
        if sattr.file_type == FileType::Directory && self.is_ancestor(src.ino, new_parent)? {
            return Err(Error::InvalidArgument(
                "cannot move a directory into itself",
            ));
        }
        if flags & RENAME_EXCHANGE != 0 {
            let t = target.ok_or(Error::NotFound)?;
            self.needs_checkpoint(ws, t.ino);
            let tattr = self.inode(t.ino)?;
            if tattr.file_type == FileType::Directory && self.is_ancestor(t.ino, old_parent)? {
                return Err(Error::InvalidArgument(
                    "cannot move a directory into itself",
                ));
            }
            self.retarget(ws, old_parent, &src, t.ino, tattr.file_type)?;
            let nd = self.inode(new_parent)?;
            let t2 = self.find_entry(&nd, new_name)?;
            self.retarget(ws, new_parent, &t2, src.ino, sattr.file_type)?;
            if old_parent != new_parent {
                let (sd, td) = (
                    sattr.file_type == FileType::Directory,
                    tattr.file_type == FileType::Directory,
                );
                if sd {
                    self.set_dotdot(ws, src.ino, new_parent)?;
                }
                if td {
                    self.set_dotdot(ws, t.ino, old_parent)?;
                }
                if sd != td {
                    let d = if sd { 1 } else { -1 };
                    self.adjust_links(new_parent, d)?;
                    self.adjust_links(old_parent, -d)?;
                }
            }
            self.moved_inode(src.ino, new_parent, new_name)?;
            return self.moved_inode(t.ino, old_parent, old_name);
        }
        let is_dir = sattr.file_type == FileType::Directory;
        match target {
            Some(t) => {
                if flags & RENAME_NOREPLACE != 0 {
                    return Err(Error::Exists);
                }
                let tattr = self.inode(t.ino)?;
                let tdir = tattr.file_type == FileType::Directory;
                if is_dir && !tdir {
                    return Err(Error::NotADirectory);
                }
                if !is_dir && tdir {
                    return Err(Error::IsADirectory);
                }
                if tdir && !self.readdir(t.ino)?.is_empty() {
                    return Err(Error::NotEmpty);
                }
                self.retarget(ws, new_parent, &t, src.ino, sattr.file_type)?;
                if tdir {
                    self.drop_dir(ws, t.ino)?;
                    // The replaced directory's link from the new parent goes with it.
                    self.adjust_links(new_parent, -1)?;
                } else {
                    self.drop_link(ws, t.ino)?;
                }
            }
            None => self.add_entry(ws, new_parent, new_name, src.ino, sattr.file_type)?,
        }
        // The old entry goes (found again: adding may have moved blocks of the same dir).
        let od = self.inode(old_parent)?;
        let src_now = self.find_entry(&od, old_name)?;
        self.remove_entry(ws, old_parent, &src_now)?;
        if is_dir && old_parent != new_parent {
            self.set_dotdot(ws, src.ino, new_parent)?;
            self.adjust_links(old_parent, -1)?;
            self.adjust_links(new_parent, 1)?;
        }
        self.moved_inode(src.ino, new_parent, new_name)
    }

    /// Points directory `dir`'s '..' at `parent`.
    fn set_dotdot(&self, ws: &mut crate::state::WriteState, dir: u32, parent: u32) -> Result<()> {
        let d = self.inode(dir)?;
        let f = self.find_entry(&d, b"..")?;
        self.retarget(ws, dir, &f, parent, FileType::Directory)
    }
}
