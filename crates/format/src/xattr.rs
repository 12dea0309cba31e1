//! Extended attributes: a 24-byte header (magic 0xF2F52011) and a list of entries
//! `{index u8, name_len u8, value_size u16, name, value}` padded to 4 bytes, ended by a zero
//! word. The list lives in one logical buffer: the inode's inline xattr area followed by the
//! 4072 data bytes of the xattr node; entries may straddle the boundary.
//!
//! Names are stored without their namespace prefix (the index says which). POSIX ACLs are kept
//! in F2FS's own compact form; [`acl_to_xattr`] turns them into the form `getxattr` returns.

use crate::{le16, le32, CorruptKind};

pub const XATTR_MAGIC: u32 = 0xF2F5_2011;
pub const XATTR_HEADER_SIZE: usize = 24;
/// Data bytes of an xattr node.
pub const XATTR_NODE_DATA: usize = 4072;

pub mod index {
    pub const USER: u8 = 1;
    pub const POSIX_ACL_ACCESS: u8 = 2;
    pub const POSIX_ACL_DEFAULT: u8 = 3;
    pub const TRUSTED: u8 = 4;
    pub const LUSTRE: u8 = 5;
    pub const SECURITY: u8 = 6;
    pub const ADVISE: u8 = 7;
    pub const ENCRYPTION: u8 = 9;
    pub const VERITY: u8 = 11;
}

/// One stored xattr.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Xattr {
    pub index: u8,
    pub name: Vec<u8>,
    pub value: Vec<u8>,
}

impl Xattr {
    /// The name as user space sees it (prefix + name), or `None` for an internal entry
    /// (encryption context, verity descriptor, unknown index) that is not listed.
    pub fn full_name(&self) -> Option<Vec<u8>> {
        let prefix: &[u8] = match self.index {
            index::USER => b"user.",
            index::TRUSTED => b"trusted.",
            index::SECURITY => b"security.",
            index::LUSTRE => b"lustre.",
            index::POSIX_ACL_ACCESS => return Some(b"system.posix_acl_access".to_vec()),
            index::POSIX_ACL_DEFAULT => return Some(b"system.posix_acl_default".to_vec()),
            _ => return None,
        };
        let mut n = prefix.to_vec();
        n.extend_from_slice(&self.name);
        Some(n)
    }

    /// The value as user space sees it (ACLs converted to the generic form).
    pub fn user_value(&self, ino: u32) -> Result<Vec<u8>, CorruptKind> {
        match self.index {
            index::POSIX_ACL_ACCESS | index::POSIX_ACL_DEFAULT => acl_to_xattr(&self.value, ino),
            _ => Ok(self.value.clone()),
        }
    }
}

/// Splits a user-space name into (index, stored name), or `None` for a namespace F2FS does
/// not store.
pub fn split_name(full: &[u8]) -> Option<(u8, Vec<u8>)> {
    if full == b"system.posix_acl_access" {
        return Some((index::POSIX_ACL_ACCESS, Vec::new()));
    }
    if full == b"system.posix_acl_default" {
        return Some((index::POSIX_ACL_DEFAULT, Vec::new()));
    }
    for (prefix, idx) in [
        (&b"user."[..], index::USER),
        (b"trusted.", index::TRUSTED),
        (b"security.", index::SECURITY),
    ] {
        if let Some(rest) = full.strip_prefix(prefix) {
            if rest.is_empty() {
                return None;
            }
            return Some((idx, rest.to_vec()));
        }
    }
    None
}

/// Encodes entries (header first, each entry padded to 4 bytes; the caller leaves the
/// terminating zero word).
pub fn encode(entries: &[Xattr]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&XATTR_MAGIC.to_le_bytes());
    out.extend_from_slice(&1u32.to_le_bytes());
    out.extend_from_slice(&[0u8; 16]);
    for e in entries {
        let start = out.len();
        out.push(e.index);
        out.push(e.name.len() as u8);
        out.extend_from_slice(&(e.value.len() as u16).to_le_bytes());
        out.extend_from_slice(&e.name);
        out.extend_from_slice(&e.value);
        let len = out.len() - start;
        out.resize(start + ((len + 3) & !3), 0);
    }
    out
}

/// Converts a POSIX ACL from the generic xattr form (version 2, 8-byte entries) to F2FS's
/// compact form; `None` if it is not a valid ACL.
pub fn acl_from_xattr(value: &[u8]) -> Option<Vec<u8>> {
    if le32(value, 0)? != POSIX_ACL_XATTR_VERSION || !(value.len() - 4).is_multiple_of(8) {
        return None;
    }
    let mut out = F2FS_ACL_VERSION.to_le_bytes().to_vec();
    for e in value.get(4..)?.chunks_exact(8) {
        let tag = le16(e, 0)?;
        out.extend_from_slice(e.get(..4)?);
        match tag {
            ACL_USER_OBJ | ACL_GROUP_OBJ | ACL_MASK | ACL_OTHER => {}
            ACL_USER | ACL_GROUP => out.extend_from_slice(e.get(4..8)?),
            _ => return None,
        }
    }
    Some(out)
}

/// Parses the logical xattr buffer of inode `ino`.
pub fn parse(buf: &[u8], ino: u32) -> Result<Vec<Xattr>, CorruptKind> {
    let bad = |why| CorruptKind::Xattr { ino, why };
    if buf.len() < XATTR_HEADER_SIZE {
        return Ok(Vec::new());
    }
    let magic = le32(buf, 0).unwrap_or(0);
    if magic != XATTR_MAGIC && magic != 0 {
        return Err(bad("bad header magic"));
    }
    let mut out = Vec::new();
    let mut at = XATTR_HEADER_SIZE;
    loop {
        let Some(head) = buf.get(at..at + 4) else {
            // The kernel keeps a terminating word; a list that runs to the very end is corrupt.
            if at < buf.len() {
                return Err(bad("entry list runs past the end"));
            }
            break;
        };
        if head == [0, 0, 0, 0] {
            break;
        }
        let (idx, name_len) = (
            head.first().copied().unwrap_or(0),
            head.get(1).copied().unwrap_or(0),
        );
        let name_len = usize::from(name_len);
        let value_size = usize::from(le16(head, 2).unwrap_or(0));
        let size = (4 + name_len + value_size + 3) & !3;
        let entry = buf
            .get(at..at + size)
            .ok_or(bad("entry runs past the end"))?;
        out.push(Xattr {
            index: idx,
            name: entry.get(4..4 + name_len).unwrap_or(&[]).to_vec(),
            value: entry
                .get(4 + name_len..4 + name_len + value_size)
                .unwrap_or(&[])
                .to_vec(),
        });
        at += size;
    }
    Ok(out)
}

const ACL_USER_OBJ: u16 = 0x01;
const ACL_USER: u16 = 0x02;
const ACL_GROUP_OBJ: u16 = 0x04;
const ACL_GROUP: u16 = 0x08;
const ACL_MASK: u16 = 0x10;
const ACL_OTHER: u16 = 0x20;
const F2FS_ACL_VERSION: u32 = 1;
const POSIX_ACL_XATTR_VERSION: u32 = 2;
const ACL_UNDEFINED_ID: u32 = u32::MAX;

/// Converts an F2FS ACL value (short entries for the owner/group/mask/other, long ones with an
/// id for named users and groups) to the generic xattr form user space expects.
pub fn acl_to_xattr(value: &[u8], ino: u32) -> Result<Vec<u8>, CorruptKind> {
    let bad = |why| CorruptKind::Xattr { ino, why };
    if le32(value, 0).ok_or(bad("ACL shorter than its header"))? != F2FS_ACL_VERSION {
        return Err(bad("ACL version is not 1"));
    }
    let mut out = POSIX_ACL_XATTR_VERSION.to_le_bytes().to_vec();
    let mut at = 4;
    while at < value.len() {
        let tag = le16(value, at).ok_or(bad("truncated ACL entry"))?;
        let perm = le16(value, at + 2).ok_or(bad("truncated ACL entry"))?;
        let id = match tag {
            ACL_USER_OBJ | ACL_GROUP_OBJ | ACL_MASK | ACL_OTHER => {
                at += 4;
                ACL_UNDEFINED_ID
            }
            ACL_USER | ACL_GROUP => {
                let id = le32(value, at + 4).ok_or(bad("truncated ACL entry"))?;
                at += 8;
                id
            }
            _ => return Err(bad("unknown ACL tag")),
        };
        out.extend_from_slice(&tag.to_le_bytes());
        out.extend_from_slice(&perm.to_le_bytes());
        out.extend_from_slice(&id.to_le_bytes());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_as_linux_wrote_them() {
        let mut buf = vec![0u8; 64];
        buf[..4].copy_from_slice(&XATTR_MAGIC.to_le_bytes());
        buf[4] = 1;
        let e = [1u8, 5, 2, 0, b's', b'm', b'a', b'l', b'l', b'h', b'i', 0];
        buf[24..36].copy_from_slice(&e);
        let x = parse(&buf, 9).unwrap();
        assert_eq!(x.len(), 1);
        assert_eq!(x[0].full_name().unwrap(), b"user.small");
        assert_eq!(x[0].value, b"hi");
    }

    #[test]
    fn entry_past_the_end_is_corrupt() {
        let mut buf = vec![0u8; 32];
        buf[..4].copy_from_slice(&XATTR_MAGIC.to_le_bytes());
        buf[24..28].copy_from_slice(&[1, 4, 100, 0]);
        assert_eq!(
            parse(&buf, 9),
            Err(CorruptKind::Xattr {
                ino: 9,
                why: "entry runs past the end"
            })
        );
    }

    #[test]
    fn acl_seen_on_linux_converts_to_generic_form() {
        let f2fs: Vec<u8> = [
            &1u32.to_le_bytes()[..],
            &[1, 0, 6, 0],
            &[2, 0, 4, 0],
            &1000u32.to_le_bytes(),
            &[4, 0, 4, 0],
            &[0x10, 0, 4, 0],
            &[0x20, 0, 4, 0],
        ]
        .concat();
        let g = acl_to_xattr(&f2fs, 1).unwrap();
        assert_eq!(g.len(), 4 + 5 * 8);
        assert_eq!(&g[..4], &2u32.to_le_bytes());
        assert_eq!(&g[4..12], &[1, 0, 6, 0, 0xff, 0xff, 0xff, 0xff]);
        assert_eq!(&g[12..20], &[2, 0, 4, 0, 0xe8, 3, 0, 0]);
    }
}
