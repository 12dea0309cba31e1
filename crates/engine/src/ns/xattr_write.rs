//! Setting and removing xattrs. The whole list is re-encoded: the first bytes go to the
//! inode's inline xattr area (when it has one), the rest to the xattr node, which is made
//! when first needed and freed when the list fits inline again.

use crate::error::{Error, Result};
use crate::space::Log;
use crate::vol::Fs;
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
        let x = prepare(name, value)?;
        self.changing(2, |ws| {
            self.live(ino)?;
            self.apply_xattr(ws, ino, &x, flags)
        })
    }

    /// Sets or removes one xattr of `ino` inside a running change.
    pub(crate) fn apply_xattr(
        &self,
        ws: &mut crate::state::WriteState,
        ino: u32,
        x: &XattrChange,
        flags: u32,
    ) -> Result<()> {
        let (idx, stored, value, acl_mode) = (x.index, &x.name, &x.value, x.acl_mode);
        self.needs_checkpoint(ws, ino);
        let mut e = self.edit(ino)?;
        let mut list: Vec<Xattr> = self.vol().xattrs(&e.inode)?;
        let at = list
            .iter()
            .position(|x| x.index == idx && x.name == *stored);
        if let Some((bits, minimal)) = acl_mode {
            let mode = (e.inode.mode & !0o777) | bits;
            crate::ns::edit::put(&mut e.block[..], 0, &mode.to_le_bytes()); // i_mode
            e.inode.mode = mode;
            if minimal && at.is_none() {
                e.touch(false);
                return self.commit(e);
            }
        }
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
                b = *fresh;
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
        e.inode = crate::ns::edit::reparse(self, ino, &mut e.block)?;
        e.touch(false);
        self.commit(e)
    }
}

/// The mode permission bits an access ACL (in the generic xattr form) stands for, and whether
/// it holds nothing but them (owner, group and other entries only). `None`: not an ACL.
fn acl_mode_bits(v: &[u8]) -> Option<(u16, bool)> {
    const USER_OBJ: u16 = 0x01;
    const GROUP_OBJ: u16 = 0x04;
    const MASK: u16 = 0x10;
    const OTHER: u16 = 0x20;
    let (head, rest) = (v.get(..4)?, v.get(4..)?);
    if u32::from_le_bytes(head.try_into().ok()?) != 2 || rest.len() % 8 != 0 {
        return None;
    }
    let (mut user, mut group, mut mask, mut other) = (None, None, None, None);
    let mut minimal = true;
    for e in rest.chunks_exact(8) {
        let tag = u16::from_le_bytes([*e.first()?, *e.get(1)?]);
        let perm = u16::from_le_bytes([*e.get(2)?, *e.get(3)?]) & 7;
        match tag {
            USER_OBJ => user = Some(perm),
            GROUP_OBJ => group = Some(perm),
            MASK => mask = Some(perm),
            OTHER => other = Some(perm),
            _ => minimal = false,
        }
    }
    let group_bits = mask.or(group)?;
    minimal &= mask.is_none();
    Some(((user? << 6) | (group_bits << 3) | other?, minimal))
}

/// An xattr change checked and decoded, ready to apply to an inode.
pub(crate) struct XattrChange {
    index: u8,
    name: Vec<u8>,
    /// The value to store; `None` removes (or, for an ACL that the mode says in full, stores
    /// nothing).
    value: Option<Vec<u8>>,
    /// For an access ACL: the mode bits it stands for, and whether it says nothing more.
    acl_mode: Option<(u16, bool)>,
}

/// The bytes xattrs being set take in the inode's xattr space (inline area and xattr node).
pub(crate) fn encoded_len(changes: &[XattrChange]) -> usize {
    let list: Vec<Xattr> = changes
        .iter()
        .filter_map(|c| {
            Some(Xattr {
                index: c.index,
                name: c.name.clone(),
                value: c.value.clone()?,
            })
        })
        .collect();
    if list.is_empty() {
        0
    } else {
        encode(&list).len()
    }
}

/// Checks an xattr change (namespace, name and value sizes, ACL form) before any lock is taken.
pub(crate) fn prepare(name: &[u8], value: Option<&[u8]>) -> Result<XattrChange> {
    let (idx, stored) = split_name(name).ok_or_else(|| {
        Error::Unsupported(format!(
            "xattr namespace of {:?} is not supported",
            String::from_utf8_lossy(name)
        ))
    })?;
    if stored.len() > 255 {
        return Err(Error::NameTooLong);
    }
    // An access ACL also sets the mode's permission bits; one that says no more than the
    // mode is not stored at all (as Linux does: `cp -a` sets modes this way).
    let acl_mode = match value {
        Some(v) if idx == index::POSIX_ACL_ACCESS => acl_mode_bits(v),
        _ => None,
    };
    let value = match value {
        Some(_) if acl_mode.is_some_and(|(_, minimal)| minimal) => None,
        Some(v) if idx == index::POSIX_ACL_ACCESS || idx == index::POSIX_ACL_DEFAULT => {
            Some(acl_from_xattr(v).ok_or(Error::InvalidArgument("not a valid POSIX ACL"))?)
        }
        Some(v) if v.len() > 65535 => return Err(Error::NoRoom("xattr value too large")),
        Some(v) => Some(v.to_vec()),
        None => None,
    };
    Ok(XattrChange {
        index: idx,
        name: stored,
        value,
        acl_mode,
    })
}
