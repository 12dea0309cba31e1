//! Node blocks: inodes, direct nodes (1018 block addresses), indirect nodes (1018 nids) and
//! xattr nodes, all with a 24-byte footer at byte 4072.
//!
//! The footer names the node (nid), its owner inode, its offset in the owner's node tree
//! (`ofs`, bits 3.. of `flag`) and the marks used by roll-forward recovery. The reader checks
//! every footer against what the tree walk expects, which also makes a node that points back
//! at an ancestor fail instead of looping.

use crate::BLOCK_SIZE;
use zerocopy::little_endian::{U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

pub const FOOTER_OFFSET: usize = 4072;
/// Entries of a direct node (addresses) or indirect node (nids).
pub const ADDRS_PER_BLOCK: u64 = 1018;
pub const NIDS_PER_BLOCK: u64 = 1018;
/// Raw address slots of an inode, before the extra area and inline xattrs are taken out.
pub const DEF_ADDRS_PER_INODE: usize = 923;
/// Number of i_nid slots (direct, direct, indirect, indirect, double indirect).
pub const NIDS_PER_INODE: usize = 5;

/// Footer flag bits.
pub const COLD_BIT: u32 = 0x1;
pub const FSYNC_BIT: u32 = 0x2;
pub const DENT_BIT: u32 = 0x4;
pub const OFFSET_BIT_SHIFT: u32 = 3;
/// Node offset of an xattr node.
pub const XATTR_NODE_OFFSET: u32 = u32::MAX >> OFFSET_BIT_SHIFT;

#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct RawFooter {
    pub nid: U32,
    pub ino: U32,
    pub flag: U32,
    pub cp_ver: U64,
    pub next_blkaddr: U32,
}
const _: () = assert!(core::mem::size_of::<RawFooter>() == BLOCK_SIZE - FOOTER_OFFSET);

/// A node footer in host form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Footer {
    pub nid: u32,
    pub ino: u32,
    pub flag: u32,
    pub cp_ver: u64,
    pub next_blkaddr: u32,
}

impl Footer {
    pub fn of(block: &[u8; BLOCK_SIZE]) -> Footer {
        let raw = block
            .get(FOOTER_OFFSET..)
            .and_then(|b| RawFooter::read_from_bytes(b).ok());
        match raw {
            Some(r) => Footer {
                nid: r.nid.get(),
                ino: r.ino.get(),
                flag: r.flag.get(),
                cp_ver: r.cp_ver.get(),
                next_blkaddr: r.next_blkaddr.get(),
            },
            None => Footer {
                nid: 0,
                ino: 0,
                flag: 0,
                cp_ver: 0,
                next_blkaddr: 0,
            },
        }
    }

    /// The node's offset in its owner's node tree.
    pub fn ofs(&self) -> u32 {
        self.flag >> OFFSET_BIT_SHIFT
    }

    pub fn is_cold(&self) -> bool {
        self.flag & COLD_BIT != 0
    }
    pub fn is_fsync(&self) -> bool {
        self.flag & FSYNC_BIT != 0
    }
    pub fn is_dent(&self) -> bool {
        self.flag & DENT_BIT != 0
    }
}

/// The 1018 entries (addresses or nids) of a direct or indirect node.
pub fn entries(block: &[u8; BLOCK_SIZE]) -> impl Iterator<Item = u32> + '_ {
    block
        .chunks_exact(4)
        .take(ADDRS_PER_BLOCK as usize)
        .map(|c| crate::le32(c, 0).unwrap_or(0))
}

/// Entry `i` of a direct or indirect node (0 when out of range).
pub fn entry(block: &[u8; BLOCK_SIZE], i: u64) -> u32 {
    if i >= ADDRS_PER_BLOCK {
        return 0;
    }
    let at = i as usize * 4;
    block
        .get(at..at + 4)
        .and_then(|c| crate::le32(c, 0))
        .unwrap_or(0)
}

/// Node offsets (`ofs` in the footer) of the nodes of a file, N = 1018.
pub mod ofs {
    use super::NIDS_PER_BLOCK as N;

    /// Offset of the node in i_nid slot `slot` (0..5).
    pub fn top(slot: usize) -> u64 {
        match slot {
            0 => 1,
            1 => 2,
            2 => 3,
            3 => 4 + N,
            _ => 5 + 2 * N,
        }
    }

    /// Offset of the `child`-th direct node under the indirect node in slot 2 or 3.
    pub fn indirect_child(slot: usize, child: u64) -> u64 {
        top(slot) + 1 + child
    }

    /// Offset of the `j`-th indirect node under the double indirect node.
    pub fn dind_child(j: u64) -> u64 {
        6 + 2 * N + j * (N + 1)
    }

    /// Offset of the `k`-th direct node under the `j`-th indirect child of the double
    /// indirect node.
    pub fn dind_grandchild(j: u64, k: u64) -> u64 {
        dind_child(j) + 1 + k
    }
}

/// Whether the node at tree offset `ofs` is an indirect node (holds nids, not addresses).
pub fn is_indirect(ofs: u64) -> bool {
    let n = NIDS_PER_BLOCK;
    ofs == ofs::top(2)
        || ofs == ofs::top(3)
        || ofs == ofs::top(4)
        || (ofs >= ofs::dind_child(0) && (ofs - ofs::dind_child(0)).is_multiple_of(n + 1))
}

/// The first file block a direct node at tree offset `ofs` maps, for an inode with
/// `inode_addrs` usable address slots; `None` for the inode (0), indirect nodes, the xattr
/// node and offsets past the double-indirect tree. (Roll-forward recovery places a dnode by
/// its offset alone.)
pub fn dnode_first_block(ofs: u64, inode_addrs: u64) -> Option<u64> {
    let n = NIDS_PER_BLOCK;
    if ofs == 0 || is_indirect(ofs) {
        return None;
    }
    // Index of the direct node among all direct nodes of the tree, in file order.
    let d = if ofs < ofs::top(2) {
        ofs - 1
    } else if ofs < ofs::top(4) {
        // Under the indirect node in slot 2 (ofs 4..) or slot 3 (ofs 5 + N..).
        let slot = if ofs > ofs::top(3) { 3 } else { 2 };
        2 + (slot as u64 - 2) * n + (ofs - ofs::top(slot) - 1)
    } else {
        let rel = ofs - ofs::dind_child(0);
        let (j, k) = (rel / (n + 1), rel % (n + 1) - 1);
        if j >= n {
            return None;
        }
        2 + 2 * n + j * n + k
    };
    Some(inode_addrs + d * ADDRS_PER_BLOCK)
}

/// How many file blocks a file can address with `inode_addrs` usable slots in its inode.
pub fn max_file_blocks(inode_addrs: u64) -> u64 {
    let n = ADDRS_PER_BLOCK;
    inode_addrs + 2 * n + 2 * n * n + n * n * n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_match_what_linux_wrote() {
        assert_eq!(ofs::top(3), 1022);
        assert_eq!(ofs::indirect_child(3, 0), 1023);
        assert_eq!(ofs::top(4), 2041);
        assert_eq!(ofs::dind_child(0), 2042);
        assert_eq!(ofs::dind_grandchild(0, 0), 2043);
        assert_eq!(ofs::dind_child(1), 3061);
        assert_eq!(ofs::dind_grandchild(1, 1), 3063);
        assert_eq!(XATTR_NODE_OFFSET, 0x1FFF_FFFF);
        for (o, ind) in [
            (0, false),
            (1, false),
            (3, true),
            (4, false),
            (1022, true),
            (2041, true),
            (2042, true),
            (2043, false),
            (3061, true),
        ] {
            assert_eq!(is_indirect(o), ind, "ofs {o}");
        }
    }

    #[test]
    fn dnode_first_block_inverts_the_tree_offsets() {
        let (a, n) = (923u64, ADDRS_PER_BLOCK);
        assert_eq!(dnode_first_block(ofs::top(0), a), Some(a));
        assert_eq!(dnode_first_block(ofs::top(1), a), Some(a + n));
        assert_eq!(
            dnode_first_block(ofs::indirect_child(2, 0), a),
            Some(a + 2 * n)
        );
        assert_eq!(
            dnode_first_block(ofs::indirect_child(2, 7), a),
            Some(a + 9 * n)
        );
        assert_eq!(
            dnode_first_block(ofs::indirect_child(3, 0), a),
            Some(a + (2 + n) * n)
        );
        assert_eq!(
            dnode_first_block(ofs::dind_grandchild(0, 0), a),
            Some(a + (2 + 2 * n) * n)
        );
        assert_eq!(
            dnode_first_block(ofs::dind_grandchild(5, 3), a),
            Some(a + (2 + 2 * n + 5 * n + 3) * n)
        );
        for o in [0, ofs::top(2), ofs::top(3), ofs::top(4), ofs::dind_child(9)] {
            assert_eq!(dnode_first_block(o, a), None, "ofs {o}");
        }
        assert_eq!(dnode_first_block(u64::from(XATTR_NODE_OFFSET), a), None);
    }

    #[test]
    fn file_size_limit_matches_the_table() {
        assert_eq!(max_file_blocks(873), 1_057_053_389);
        assert_eq!(max_file_blocks(864), 1_057_053_380);
    }
}
