//! The bound on the engine's memory: one figure (`Options::cache_bytes`, the mount's
//! `cache_size`) split between the clean caches (node blocks, NAT blocks, parsed inodes) and
//! the dirty nodes a change may leave before it asks for a checkpoint. A leaf: the rooms that
//! keep caches read their share here.

use uf2fs_format::BLOCK_SIZE;

/// The default bound: 64 MiB, for a small machine.
pub const DEFAULT_CACHE_BYTES: u64 = 64 << 20;
/// The smallest bound `cache_size` accepts.
pub const MIN_CACHE_BYTES: u64 = 4 << 20;
/// Memory one cached inode takes (its block and the parse), for the inode cache's share.
const INODE_CACHE_ENTRY_BYTES: u64 = 4608;

/// What a bound gives each cache, in entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CacheCaps {
    /// Clean node blocks: half the bound.
    pub nodes: usize,
    /// Clean NAT blocks: a quarter.
    pub nat: usize,
    /// Parsed inodes: a quarter.
    pub inodes: usize,
    /// Dirty node blocks before a checkpoint: as many blocks as the whole bound.
    pub dirty: usize,
}

impl CacheCaps {
    pub(crate) fn for_bytes(bytes: u64) -> CacheCaps {
        let bytes = bytes.max(MIN_CACHE_BYTES);
        let block = BLOCK_SIZE as u64;
        CacheCaps {
            nodes: (bytes / 2 / block) as usize,
            nat: (bytes / 4 / block) as usize,
            inodes: (bytes / 4 / INODE_CACHE_ENTRY_BYTES) as usize,
            dirty: (bytes / block) as usize,
        }
    }

    pub(crate) fn default_caps() -> CacheCaps {
        CacheCaps::for_bytes(DEFAULT_CACHE_BYTES)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_bound_keeps_the_old_sizes_and_small_ones_are_raised() {
        let d = CacheCaps::default_caps();
        assert_eq!((d.nodes, d.nat, d.dirty), (8192, 4096, 16384));
        assert_eq!(
            CacheCaps::for_bytes(1),
            CacheCaps::for_bytes(MIN_CACHE_BYTES)
        );
    }
}
