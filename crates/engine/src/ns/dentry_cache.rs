//! Changed dentry blocks kept in memory until the next checkpoint, as Linux keeps a
//! directory's dirty pages: a create or an unlink rewrites one dentry block, and written out of
//! place at once that cost a block allocation, a device write and an invalidation per name
//! (`rm -rf` of 10 000 files wrote 10 000 dentry blocks, half of an unlink's time). A block
//! that already has an address on the device is kept here instead and rewritten once, when a
//! checkpoint is prepared (the only place a directory's blocks become durable: fsync of a
//! directory is a checkpoint, and roll-forward recovery rebuilds a file's entry from its
//! inode, never from dentry blocks) or when more than the cache's share is held. A block
//! that is a hole goes to the device at once, as before: it is new, and rare.
//!
//! Readers take no lock, and a flush moves a block to a new address: a reader that fetched
//! the directory's inode before the flush and looked here after it would read the old
//! address. So a flush moves the generation before it lets blocks go, and readers fetch the
//! inode after reading the generation and go again over what they read when it moved
//! (`Vol::dir_blocks`). This file is the store alone, a leaf; the readers, and the changes
//! that fill and flush it, are in `ns/dir.rs`.

use foldhash::HashMap;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use uf2fs_format::{Block, COMPRESS_ADDR, NEW_ADDR, NULL_ADDR};

/// Dentry blocks changed since they were last written, by (directory, file block).
#[derive(Default)]
pub(crate) struct DentryCache {
    /// Shared with readers, who look without a copy (`Vol::dir_blocks`); a change replaces
    /// a block whole, never writes into one a reader may hold.
    blocks: Mutex<HashMap<(u32, u64), Arc<Block>>>,
    /// Moves before a flush lets blocks go (see the module comment).
    generation: AtomicU64,
    /// The most blocks held before a change writes them all (`CacheCaps::dentries`).
    cap: AtomicUsize,
    /// Block rewrites kept here instead of written, and blocks written by flushes.
    kept: AtomicU64,
    flushed: AtomicU64,
}

/// What the cache has done since mount (`uf2fs status`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct DentryCacheStats {
    /// Dentry block rewrites kept in memory instead of written at once.
    pub kept: u64,
    /// Dentry blocks written when the cache was flushed.
    pub flushed: u64,
    /// Blocks held now.
    pub held: u64,
}

impl DentryCache {
    fn lock(&self) -> MutexGuard<'_, HashMap<(u32, u64), Arc<Block>>> {
        // Only plain blocks behind this lock: a panic elsewhere leaves it usable.
        self.blocks.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn new(cap: usize) -> DentryCache {
        let c = DentryCache::default();
        c.set_cap(cap);
        c
    }

    pub(crate) fn set_cap(&self, blocks: usize) {
        self.cap.store(blocks.max(1), Ordering::Relaxed);
    }

    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether more blocks are held than the cache's share.
    pub(crate) fn over_cap(&self) -> bool {
        self.len() > self.cap.load(Ordering::Relaxed)
    }

    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    /// The held copy of block `fblk` of directory `ino`.
    pub(crate) fn get(&self, ino: u32, fblk: u64) -> Option<Arc<Block>> {
        self.lock().get(&(ino, fblk)).cloned()
    }

    pub(crate) fn put(&self, ino: u32, fblk: u64, b: Arc<Block>) {
        self.lock().insert((ino, fblk), b);
        self.kept.fetch_add(1, Ordering::Relaxed);
    }

    /// Lets go of the held blocks of `ino` in `start..end` (the blocks were freed).
    pub(crate) fn forget(&self, ino: u32, start: u64, end: u64) {
        let mut m = self.lock();
        if !m.is_empty() {
            m.retain(|(i, f), _| *i != ino || *f < start || *f >= end);
        }
    }

    /// Copies of every held block, by directory and file block.
    pub(crate) fn snapshot(&self) -> BTreeMap<u32, BTreeMap<u64, Block>> {
        let mut by_dir: BTreeMap<u32, BTreeMap<u64, Block>> = BTreeMap::new();
        for ((ino, fblk), b) in self.lock().iter() {
            by_dir.entry(*ino).or_default().insert(*fblk, **b);
        }
        by_dir
    }

    /// Lets go of blocks a flush wrote (their new addresses linked already), moving the
    /// generation first so that readers who looked before go again.
    pub(crate) fn written(&self, blocks: &BTreeMap<u32, BTreeMap<u64, Block>>) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        let mut m = self.lock();
        let mut n = 0;
        for (ino, of_dir) in blocks {
            for fblk in of_dir.keys() {
                m.remove(&(*ino, *fblk));
                n += 1;
            }
        }
        drop(m);
        self.flushed.fetch_add(n, Ordering::Relaxed);
    }

    pub(crate) fn stats(&self) -> DentryCacheStats {
        DentryCacheStats {
            kept: self.kept.load(Ordering::Relaxed),
            flushed: self.flushed.load(Ordering::Relaxed),
            held: self.len() as u64,
        }
    }
}

/// Whether a block pointer names a block on the device.
pub(crate) fn on_device(addr: u32) -> bool {
    !matches!(addr, NULL_ADDR | NEW_ADDR | COMPRESS_ADDR)
}
