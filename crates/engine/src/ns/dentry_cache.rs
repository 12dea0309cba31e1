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
//! (`Vol::dir_blocks`).

use crate::error::Result;
use crate::ns::edit::Editing;
use crate::space::Log;
use crate::state::WriteState;
use crate::vol::{Fs, Vol};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};
use uf2fs_format::inode::{FileType, Inode};
use uf2fs_format::{Block, COMPRESS_ADDR, NEW_ADDR, NULL_ADDR};

/// Dentry blocks changed since they were last written, by (directory, file block).
#[derive(Default)]
pub(crate) struct DentryCache {
    blocks: Mutex<HashMap<(u32, u64), Box<Block>>>,
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
    fn lock(&self) -> MutexGuard<'_, HashMap<(u32, u64), Box<Block>>> {
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
    pub(crate) fn get(&self, ino: u32, fblk: u64) -> Option<Block> {
        self.lock().get(&(ino, fblk)).map(|b| **b)
    }

    fn put(&self, ino: u32, fblk: u64, b: Block) {
        self.lock().insert((ino, fblk), Box::new(b));
        self.kept.fetch_add(1, Ordering::Relaxed);
    }

    /// Lets go of the held blocks of `ino` in `start..end` (the blocks were freed).
    pub(crate) fn forget(&self, ino: u32, start: u64, end: u64) {
        let mut m = self.lock();
        if !m.is_empty() {
            m.retain(|(i, f), _| *i != ino || *f < start || *f >= end);
        }
    }

    pub(crate) fn stats(&self) -> DentryCacheStats {
        DentryCacheStats {
            kept: self.kept.load(Ordering::Relaxed),
            flushed: self.flushed.load(Ordering::Relaxed),
            held: self.len() as u64,
        }
    }
}

/// Blocks of a directory as a reader sees them ([`Vol::dir_blocks`]).
pub(crate) struct DirBlocks {
    /// The directory's inode they were read through.
    pub dir: std::sync::Arc<Inode>,
    /// (file block, contents), holes left out.
    pub blocks: Vec<(u64, Block)>,
}

/// Whether a block pointer names a block on the device.
fn on_device(addr: u32) -> bool {
    !matches!(addr, NULL_ADDR | NEW_ADDR | COMPRESS_ADDR)
}

impl Vol {
    /// Dentry block `fblk` of directory `ino`, stored at `addr`: the held copy if there is
    /// one. For a caller under the write lock; readers go through [`Vol::dir_blocks`].
    pub(crate) fn dentry_block(&self, ino: u32, fblk: u64, addr: u32) -> Result<Block> {
        match self.dentries.get(ino, fblk) {
            Some(b) => Ok(b),
            None => self.read_data_block(addr.into(), "dentry block"),
        }
    }

    /// The blocks of `dir` from `start` to `end` that have addresses (holes left out), as a
    /// reader without the write lock must see them: a flush that ran meanwhile is detected by
    /// the cache's generation and the blocks are read again, from the directory's inode as it
    /// is now.
    pub(crate) fn dir_blocks(&self, dir: &Inode, start: u64, end: u64) -> Result<DirBlocks> {
        loop {
            let generation = self.dentries.generation();
            // Fetched after the generation: an inode from before a flush that let blocks go
            // is never paired with the cache as it is after it.
            let dir = self.inode(dir.ino)?;
            let mut addrs = Vec::new();
            self.for_each_addr(&dir, start, end, &mut |fblk, addr| {
                addrs.push((fblk, addr));
                Ok(())
            })?;
            let mut blocks = Vec::with_capacity(addrs.len());
            for (fblk, addr) in addrs {
                blocks.push((fblk, self.dentry_block(dir.ino, fblk, addr)?));
            }
            if self.dentries.generation() == generation {
                return Ok(DirBlocks { dir, blocks });
            }
        }
    }
}

impl Fs {
    /// Stores the changed dentry block `fblk` of the directory being edited: held in memory
    /// when it replaces a block on the device, written out of place now when it fills a hole.
    pub(crate) fn put_dentry_block(
        &self,
        ws: &mut WriteState,
        p: &mut Editing,
        fblk: u64,
        b: Block,
    ) -> Result<()> {
        if self.vol().options.dentry_cache && on_device(self.block_addr(p, fblk)?) {
            self.vol().dentries.put(p.ino, fblk, b);
            return Ok(());
        }
        self.write_data_blocks(ws, p, Log::HotData, &BTreeMap::from([(fblk, b)]))
    }

    /// Writes every held dentry block out of place (into the running change's batches, which
    /// land before any checkpoint), then lets them go. Under the write lock.
    pub(crate) fn flush_dentry_blocks(&self, ws: &mut WriteState) -> Result<()> {
        let v = self.vol();
        let mut by_dir: BTreeMap<u32, BTreeMap<u64, Block>> = BTreeMap::new();
        for ((ino, fblk), b) in v.dentries.lock().iter() {
            by_dir.entry(*ino).or_default().insert(*fblk, **b);
        }
        if by_dir.is_empty() {
            return Ok(());
        }
        let mut written = 0;
        for (ino, blocks) in &by_dir {
            let mut p = self.edit(*ino)?;
            if p.inode.file_type != FileType::Directory || p.inode.has_inline_dentry() {
                // Blocks are let go whenever a directory's blocks are freed (`punch`): one
                // held for what is no directory with blocks now is a bug, not the volume's.
                return Err(crate::error::Error::InvalidArgument(
                    "internal: a held dentry block of an inode that has no dentry blocks",
                ));
            }
            self.write_data_blocks(ws, &mut p, Log::HotData, blocks)?;
            self.commit(p)?;
            written += blocks.len() as u64;
        }
        // The new addresses are in the nodes (and the blocks in flight, readable): readers
        // that looked here before this point go again (`Vol::dir_blocks`).
        v.dentries.generation.fetch_add(1, Ordering::SeqCst);
        let mut m = v.dentries.lock();
        for (ino, blocks) in &by_dir {
            for fblk in blocks.keys() {
                m.remove(&(*ino, *fblk));
            }
        }
        drop(m);
        v.dentries.flushed.fetch_add(written, Ordering::Relaxed);
        Ok(())
    }
}
