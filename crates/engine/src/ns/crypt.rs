//! Encrypted files and directories without their key, as Linux 6.1 serves them then: names
//! listed in their no-key form, symlink targets likewise, sizes and attributes as stored,
//! contents and changes inside refused with ENOKEY naming the key that would be needed.
//! The byte rules live in `uf2fs_format::fscrypt`; this room reads what they need (the
//! encryption context xattr, a symlink's stored target). A later issue that takes a key
//! decrypts here: the context gives the modes, flags, key and nonce.

use crate::error::{Error, Result};
use crate::vol::{Fs, Vol};
use std::sync::Arc;
use uf2fs_format::fscrypt::{self, Context};
use uf2fs_format::inode::{FileType, Inode};
use uf2fs_format::xattr::index;
use uf2fs_format::{CorruptKind, BLOCK_SIZE};

impl Vol {
    /// The checked encryption context of `inode` (`None`: not encrypted). An encrypted
    /// inode without one, or with one Linux would not parse, is corrupt.
    pub(crate) fn encryption_context(&self, inode: &Inode) -> Result<Option<Context>> {
        if !inode.is_encrypted() {
            return Ok(None);
        }
        let xs = self.xattrs(inode)?;
        let x = xs
            .iter()
            .find(|x| x.index == index::ENCRYPTION && x.name == b"c")
            .ok_or(CorruptKind::EncryptionContext {
                ino: inode.ino,
                why: fscrypt::ContextError::Empty,
            })?;
        Context::parse(&x.value).map(Some).map_err(|why| {
            CorruptKind::EncryptionContext {
                ino: inode.ino,
                why,
            }
            .into()
        })
    }

    /// The error for wanting what only the key opens: it names the key when the context says
    /// which.
    pub(crate) fn no_key(&self, inode: &Inode) -> Error {
        let key = match self.encryption_context(inode) {
            Ok(Some(c)) => c.key.to_string(),
            Ok(None) => "key of an unencrypted inode".into(),
            Err(e) => format!("key its encryption context would name, but {e}"),
        };
        Error::NoKey {
            ino: inode.ino,
            key,
        }
    }

    /// Refuses changing the data of `inode` when it is encrypted (ENOKEY) or compressed with
    /// its saved blocks released (EPERM, as Linux answers until F2FS_IOC_RESERVE_COMPRESS_BLOCKS
    /// takes them back, which uf2fs does not offer yet).
    pub(crate) fn check_data_writable(&self, inode: &Inode) -> Result<()> {
        if inode.is_encrypted() {
            return Err(self.no_key(inode));
        }
        if inode.compression.is_some_and(|c| c.released) {
            return Err(Error::NotPermitted(
                "the compressed file's saved blocks were released: it cannot be written",
            ));
        }
        Ok(())
    }

    /// Refuses a change of `dir`'s entries when it is encrypted (no new name can be
    /// encrypted without the key).
    pub(crate) fn refuse_encrypted_dir(&self, dir: &Inode) -> Result<()> {
        if dir.is_encrypted() {
            return Err(self.no_key(dir));
        }
        Ok(())
    }
}

impl Fs {
    /// The encryption context of `ino` (`None` when it is not encrypted): which policy
    /// version, modes, flags and master key its contents and names are encrypted with.
    pub fn encryption(&self, ino: u32) -> Result<Option<Context>> {
        let i = self.inode(ino)?;
        self.vol().encryption_context(&i)
    }

    /// Whether `ino` may be opened: an encrypted regular file needs its key (Linux's open
    /// answers ENOKEY without it; directories and symlinks open).
    pub fn check_open(&self, ino: u32) -> Result<()> {
        let i = self.inode(ino)?;
        if i.file_type == FileType::Regular && i.is_encrypted() {
            return Err(self.vol().no_key(&i));
        }
        Ok(())
    }

    /// Whether `ino` may be opened for writing: as [`Fs::check_open`], and its data must be
    /// writable (a compressed file whose saved blocks were released is not: EPERM). Linux
    /// answers that at write(2); a FUSE mount with the writeback cache would learn it only at
    /// writeback, so the open says it.
    pub fn check_open_write(&self, ino: u32) -> Result<()> {
        self.check_open(ino)?;
        let i = self.inode(ino)?;
        if i.file_type == FileType::Regular {
            self.vol().check_data_writable(&i)?;
        }
        Ok(())
    }

    /// Whether `ino` is encrypted (its contents cannot be read without the key).
    pub fn is_encrypted(&self, ino: u32) -> Result<bool> {
        Ok(self.inode(ino)?.is_encrypted())
    }

    /// The target Linux shows for an encrypted symlink without its key: the no-key form of
    /// its stored ciphertext.
    pub(crate) fn nokey_symlink(&self, i: &Arc<Inode>) -> Result<Vec<u8>> {
        if i.file_type != FileType::Symlink || i.size > BLOCK_SIZE as u64 {
            return Err(CorruptKind::InodeField {
                ino: i.ino,
                field: "i_size (symlink)",
                value: i.size,
            }
            .into());
        }
        let mut data = vec![0u8; i.size as usize];
        let n = self.read_inode(i, 0, &mut data)?;
        data.truncate(n);
        fscrypt::symlink_nokey_target(&data)
            .map_err(|why| CorruptKind::EncryptedSymlink { ino: i.ino, why }.into())
    }

    /// The name an entry of encrypted directory `dir` is listed by.
    pub(crate) fn nokey_entry_name(
        &self,
        dir: u32,
        child: u32,
        disk: &[u8],
        hash: u32,
    ) -> Result<Vec<u8>> {
        fscrypt::nokey_name(disk, hash, 0).map_err(|why| {
            CorruptKind::EncryptedName {
                ino: dir,
                child,
                why,
            }
            .into()
        })
    }
}
