//! Setting and removing xattrs. The whole list is re-encoded: the first bytes go to the
//! inode's inline xattr area (when it has one), the rest to the xattr node, which is made
//! when first needed and freed when the list fits inline again.

use crate::error::{Error, Result};
use crate::fs::Fs;
use crate::segment::Log;
use uf2fs_format::node::{FOOTER_OFFSET, XATTR_NODE_OFFSET};
use uf2fs_format::xattr::{acl_from_xattr, encode, index, split_name, Xattr, XATTR_NODE_DATA};
use uf2fs_format::BLOCK_SIZE;

/// setxattr flags.
pub const XATTR_CREATE: u32 = 1;
pub const XATTR_REPLACE: u32 = 2;

impl Fs {
    /// Sets xattr `name` of `ino` to `value` (flags: XATTR_CREATE, XATTR_REPLACE).
    pub fn setxattr(&self, ino: u32, name: &[u8], value: &[u8], flags: u32) -> Result<()> {
        self.change_xattr(ino, name, Some(value), flags)
    }

    /// Removes xattr `name` of `ino`.
    pub fn removexattr(&self, ino: u32, name: &[u8]) -> Result<()> {
        self.change_xattr(ino, name, None, 0)
    }

    fn change_xattr(&self, ino: u32, name: &[u8], value: Option<&[u8]>, flags: u32) -> Result<()> {
        let (idx, stored) = split_name(name).ok_or(Error::Unsupported(format!(
            "xattr namespace of {:?} is not supported",
            String::from_utf8_lossy(name)
        )))?;
        if stored.len() > 255 {
            return Err(Error::NameTooLong);
        }
        let value = match value {
            Some(v) if idx == index::POSIX_ACL_ACCESS || idx == index::POSIX_ACL_DEFAULT => {
                Some(acl_from_xattr(v).ok_or(Error::InvalidArgument("not a valid POSIX ACL"))?)
            }
            Some(v) if v.len() > 65535 => return Err(Error::NoRoom("xattr value too large")),
            Some(v) => Some(v.to_vec()),
            None => None,
        };
        self.changing(2, |ws| {
            let mut e = self.edit(ino)?;
            let mut list: Vec<Xattr> = self.vol().xattrs(&e.inode)?;
            let at = list.iter().position(|x| x.index == idx && x.name == stored);
            match (at, &value) {
                (Some(_), Some(_)) if flags & XATTR_CREATE != 0 => return Err(Error::Exists),
                (None, Some(_)) if flags & XATTR_REPLACE != 0 => return Err(Error::NoAttribute),
                (None, None) => return Err(Error::NoAttribute),
                (Some(i), Some(v)) => {
                    if let Some(x) = list.get_mut(i) {
                        x.value = v.clone();
                    }
                }
                (None, Some(v)) => list.push(Xattr {
                    index: idx,
                    name: stored.clone(),
                    value: v.clone(),
                }),
                (Some(i), None) => {
                    list.remove(i);
                }
            }
            let bytes = if list.is_empty() {
                Vec::new()
            } else {
                encode(&list)
            };
            let inline = e.inode.inline_xattr_area().len();
            // Four zero bytes must follow the last entry.
            if bytes.len() + 4 > inline + XATTR_NODE_DATA {
                return Err(Error::NoRoom(
                    "the xattrs do not fit in the inode and its xattr node",
                ));
            }
            let r = uf2fs_format::inode::I_NID_OFFSET - inline..uf2fs_format::inode::I_NID_OFFSET;
            if let Some(area) = e.block.get_mut(r) {
                area.fill(0);
                let n = bytes.len().min(area.len());
                if let (Some(d), Some(s)) = (area.get_mut(..n), bytes.get(..n)) {
                    d.copy_from_slice(s);
                }
            }
            let rest = bytes.get(inline.min(bytes.len())..).unwrap_or(&[]);
            let needs_node = !rest.is_empty() || (bytes.len() + 4 > inline && !bytes.is_empty());
            let xnid = e.inode.xattr_nid;
            let is_dir = e.inode.file_type == uf2fs_format::inode::FileType::Directory;
            // Linux: a directory's xattr node is hot (not cold), a file's warm.
            let log = if is_dir { Log::HotNode } else { Log::WarmNode };
            if needs_node {
                let nid = if xnid != 0 {
                    xnid
                } else {
                    self.new_node(ws, &mut e, u64::from(XATTR_NODE_OFFSET), is_dir, true)?
                };
                let mut b = [0u8; BLOCK_SIZE];
                if xnid != 0 {
                    let (old, _) = self.node_for_edit(nid, ino, is_dir)?;
                    if let Some(f) = b.get_mut(FOOTER_OFFSET..) {
                        f.copy_from_slice(old.get(FOOTER_OFFSET..).unwrap_or(&[0; 24]));
                    }
                } else {
                    let (fresh, _) = self.node_for_edit(nid, ino, is_dir)?;
                    b = fresh;
                }
                if let Some(d) = b.get_mut(..rest.len()) {
                    d.copy_from_slice(rest);
                }
                self.vol().nodes.put_dirty(nid, b, log)?;
                e.set_u32(76, nid);
            } else if xnid != 0 {
                self.free_node_of(ws, &mut e, xnid)?;
                e.set_u32(76, 0);
            }
            e.inode = crate::write::reparse(self, ino, &mut e.block)?;
            e.touch(false);
            self.commit(e)
        })
    }
}
