//! POSIX ACLs as the kernel hands them to a FUSE daemon that asked for `FUSE_POSIX_ACL`: the
//! kernel enforces them and caches them, but leaves three jobs to the daemon, done here on the
//! generic xattr form (`system.posix_acl_*`: a little-endian u32 version 2, then 8-byte
//! entries `tag: u16, perm: u16, id: u32`):
//! - a new inode in a directory with a default ACL gets that ACL, its permissions cut down to
//!   the requested mode, instead of the umask ([`inherit`]); a new directory also keeps the
//!   default ACL;
//! - `chmod` rewrites the owner, group-class (the mask when there is one) and other entries of
//!   an access ACL ([`chmod`]);
//! - the mode bits follow a new access ACL (the engine's setxattr does that).

const VERSION: u32 = 2;
const USER_OBJ: u16 = 0x01;
const USER: u16 = 0x02;
const GROUP_OBJ: u16 = 0x04;
const GROUP: u16 = 0x08;
const MASK: u16 = 0x10;
const OTHER: u16 = 0x20;

pub const ACCESS: &[u8] = b"system.posix_acl_access";
pub const DEFAULT: &[u8] = b"system.posix_acl_default";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    tag: u16,
    perm: u16,
    id: u32,
}

/// A parsed ACL; `None` if `v` is not a well-formed generic ACL.
fn parse(v: &[u8]) -> Option<Vec<Entry>> {
    let (head, rest) = v.split_at_checked(4)?;
    if u32::from_le_bytes(head.try_into().ok()?) != VERSION || rest.len() % 8 != 0 {
        return None;
    }
    rest.chunks_exact(8)
        .map(|e| {
            Some(Entry {
                tag: u16::from_le_bytes(e.get(0..2)?.try_into().ok()?),
                perm: u16::from_le_bytes(e.get(2..4)?.try_into().ok()?),
                id: u32::from_le_bytes(e.get(4..8)?.try_into().ok()?),
            })
        })
        .collect()
}

fn encode(acl: &[Entry]) -> Vec<u8> {
    let mut v = VERSION.to_le_bytes().to_vec();
    for e in acl {
        v.extend_from_slice(&e.tag.to_le_bytes());
        v.extend_from_slice(&e.perm.to_le_bytes());
        v.extend_from_slice(&e.id.to_le_bytes());
    }
    v
}

/// What a new inode gets from its parent's default ACL.
#[derive(Debug, PartialEq, Eq)]
pub struct Inherited {
    /// Type and permission bits.
    pub mode: u32,
    /// The access ACL to store (`None` when the mode says it all).
    pub access: Option<Vec<u8>>,
    /// The default ACL to store (directories only).
    pub default: Option<Vec<u8>>,
}

/// What a new inode created with `mode` (type and permission bits, no umask applied) gets
/// from its parent's default ACL `default`. `None`: the default ACL is not well formed (then
/// the umask applies, as if there were none).
pub fn inherit(default: &[u8], mode: u32) -> Option<Inherited> {
    let mut acl = parse(default)?;
    let mut bits = 0u32;
    let mut extended = false;
    let has_mask = acl.iter().any(|e| e.tag == MASK);
    for e in acl.iter_mut() {
        let m = u16::try_from(mode & 0o777).unwrap_or(0);
        match e.tag {
            USER_OBJ => {
                e.perm &= (m >> 6) & 7;
                bits |= u32::from(e.perm) << 6;
            }
            OTHER => {
                e.perm &= m & 7;
                bits |= u32::from(e.perm);
            }
            MASK => {
                e.perm &= (m >> 3) & 7;
                bits |= u32::from(e.perm) << 3;
                extended = true;
            }
            GROUP_OBJ if !has_mask => {
                e.perm &= (m >> 3) & 7;
                bits |= u32::from(e.perm) << 3;
            }
            USER | GROUP => extended = true,
            _ => {}
        }
    }
    if !acl.iter().any(|e| e.tag == USER_OBJ)
        || !acl.iter().any(|e| e.tag == GROUP_OBJ)
        || !acl.iter().any(|e| e.tag == OTHER)
    {
        return None;
    }
    let new_mode = (mode & !0o777) | bits;
    // A mask or a named entry says more than the mode can: the ACL is stored.
    let access = extended.then(|| encode(&acl));
    let is_dir = mode & 0o170000 == 0o040000;
    Some(Inherited {
        mode: new_mode,
        access,
        default: is_dir.then(|| default.to_vec()),
    })
}

/// The access ACL `acl` after a chmod to `mode`: the owner, other, and mask (else owning
/// group) entries take the mode's bits. `None`: not a well-formed ACL.
pub fn chmod(acl: &[u8], mode: u32) -> Option<Vec<u8>> {
    let mut acl = parse(acl)?;
    let has_mask = acl.iter().any(|e| e.tag == MASK);
    let m = u16::try_from(mode & 0o777).ok()?;
    for e in acl.iter_mut() {
        match e.tag {
            USER_OBJ => e.perm = (m >> 6) & 7,
            OTHER => e.perm = m & 7,
            MASK => e.perm = (m >> 3) & 7,
            GROUP_OBJ if !has_mask => e.perm = (m >> 3) & 7,
            _ => {}
        }
    }
    Some(encode(&acl))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    fn acl(entries: &[(u16, u16, u32)]) -> Vec<u8> {
        encode(
            &entries
                .iter()
                .map(|&(tag, perm, id)| Entry { tag, perm, id })
                .collect::<Vec<_>>(),
        )
    }

    #[test]
    fn a_minimal_default_acl_gives_the_mode_and_no_access_acl() {
        // setfacl -d --set u::rwx,g::rwx,o::- on the parent; mkdir with 0777.
        let d = acl(&[(USER_OBJ, 7, 0), (GROUP_OBJ, 7, 0), (OTHER, 0, 0)]);
        let want = Inherited {
            mode: 0o040770,
            access: None,
            default: Some(d.clone()),
        };
        assert_eq!(inherit(&d, 0o040777).unwrap(), want);
        // A file gets no default ACL, and the requested mode cuts the ACL down.
        let want = Inherited {
            mode: 0o100640,
            access: None,
            default: None,
        };
        assert_eq!(inherit(&d, 0o100644).unwrap(), want);
    }

    #[test]
    fn named_entries_are_kept_and_the_mask_takes_the_group_bits() {
        let d = acl(&[
            (USER_OBJ, 7, 0),
            (USER, 7, 101),
            (GROUP_OBJ, 5, 0),
            (MASK, 7, 0),
            (OTHER, 5, 0),
        ]);
        let i = inherit(&d, 0o040777).unwrap();
        assert_eq!(i.mode, 0o040775);
        assert_eq!(i.access, Some(d.clone()));
        let i = inherit(&d, 0o100640).unwrap();
        assert_eq!(i.mode, 0o100640);
        let want = acl(&[
            (USER_OBJ, 6, 0),
            (USER, 7, 101),
            (GROUP_OBJ, 5, 0),
            (MASK, 4, 0),
            (OTHER, 0, 0),
        ]);
        assert_eq!(i.access, Some(want));
    }

    #[test]
    fn chmod_moves_the_mask_not_the_owning_group() {
        let a = acl(&[
            (USER_OBJ, 7, 0),
            (USER, 7, 101),
            (GROUP_OBJ, 5, 0),
            (MASK, 7, 0),
            (OTHER, 5, 0),
        ]);
        let want = acl(&[
            (USER_OBJ, 6, 0),
            (USER, 7, 101),
            (GROUP_OBJ, 5, 0),
            (MASK, 0, 0),
            (OTHER, 4, 0),
        ]);
        assert_eq!(chmod(&a, 0o604).unwrap(), want);
    }

    #[test]
    fn malformed_acls_are_refused() {
        assert_eq!(inherit(&[1, 0, 0, 0], 0o100644), None);
        assert_eq!(inherit(&acl(&[(USER_OBJ, 7, 0)]), 0o100644), None);
        assert_eq!(chmod(&[2, 0, 0, 0, 1], 0o644), None);
    }
}
