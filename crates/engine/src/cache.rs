//! The bound on the engine's memory: one figure (`Options::cache_bytes`; the mount gives it
//! what its `cache_size` leaves after the daemon's own buffers) split between the clean caches
//! (node blocks, NAT blocks, parsed inodes) and the dirty nodes a change may leave before it
//! asks for a checkpoint, so that together they stay within it. A checkpoint writes the dirty
//! nodes from the dirty map itself and keeps no copy of them. A leaf: the rooms that keep
//! caches read their share here.

use foldhash::HashMap;
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
    /// Clean node blocks: a quarter of the bound.
    pub nodes: usize,
    /// Clean NAT blocks: an eighth.
    pub nat: usize,
    /// Parsed inodes: an eighth.
    pub inodes: usize,
    /// Dirty node blocks before a checkpoint: half, less a sixteenth.
    pub dirty: usize,
    /// Small runs of user data held before they are written (`write_behind`; the device's
    /// `Behind`), in bytes: a sixteenth.
    pub write_behind: u64,
    /// Changed dentry blocks held before a change writes them (`ns/dentry_cache.rs`): a
    /// 64th, taken from the clean node blocks' quarter.
    pub dentries: usize,
}

impl CacheCaps {
    pub(crate) fn for_bytes(bytes: u64) -> CacheCaps {
        let bytes = bytes.max(MIN_CACHE_BYTES);
        let block = BLOCK_SIZE as u64;
        CacheCaps {
            nodes: ((bytes / 4 - bytes / 64) / block) as usize,
            nat: (bytes / 8 / block) as usize,
            inodes: (bytes / 8 / INODE_CACHE_ENTRY_BYTES) as usize,
            dirty: ((bytes / 2 - bytes / 16) / block) as usize,
            write_behind: bytes / 16 / block * block,
            dentries: (bytes / 64 / block) as usize,
        }
    }

    pub(crate) fn default_caps() -> CacheCaps {
        CacheCaps::for_bytes(DEFAULT_CACHE_BYTES)
    }
}

/// Inserts into a clean cache of at most `cap` entries: a new key first makes room in a full
/// cache by dropping about a quarter of its entries, those that come first in the map's
/// (hash-scattered) order, which is random replacement; a key already there is replaced in
/// place. Dropping everything, as the caches once did, threw away the working set of every
/// walk larger than the cache (an `rm -rf` of 10 000 files read each inode twice).
/// Amortised, four entries visited per insert. Every insert into a bounded cache comes here:
/// one path that skipped it (nodes dirtied or written by a checkpoint) once let the node
/// cache keep every new inode.
pub(crate) fn insert_bounded<K: std::hash::Hash + Eq, V>(
    map: &mut HashMap<K, V>,
    cap: usize,
    key: K,
    value: V,
) {
    if map.len() >= cap && !map.contains_key(&key) {
        let drop = (map.len() / 4).max(1);
        let mut seen = 0;
        map.retain(|_, _| {
            seen += 1;
            seen > drop
        });
    }
    map.insert(key, value);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shares_add_up_to_the_bound_and_small_ones_are_raised() {
        let d = CacheCaps::default_caps();
        assert_eq!(
            (d.nodes, d.nat, d.dirty, d.dentries),
            (3840, 2048, 7168, 256)
        );
        assert_eq!(d.write_behind, 4 << 20);
        let block = BLOCK_SIZE as u64;
        let total = (d.nodes + d.nat + d.dirty + d.dentries) as u64 * block
            + d.inodes as u64 * INODE_CACHE_ENTRY_BYTES
            + d.write_behind;
        assert!(total <= DEFAULT_CACHE_BYTES, "{total}");
        assert!(total > DEFAULT_CACHE_BYTES - block * 2, "{total}");
        assert_eq!(
            CacheCaps::for_bytes(1),
            CacheCaps::for_bytes(MIN_CACHE_BYTES)
        );
    }

    #[test]
    fn a_full_cache_keeps_three_quarters_and_stays_bounded() {
        let mut m = HashMap::default();
        for k in 0..10_000u32 {
            insert_bounded(&mut m, 1000, k, k);
            assert!(m.len() <= 1000);
        }
        // Right after making room it held 750 and has filled up again since.
        assert!(m.len() > 750, "{}", m.len());
        // The last entries inserted since the last eviction are all there.
        assert!(m.contains_key(&9_999));
    }
}
