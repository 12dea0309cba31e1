//! NAT lookups and changes. Reads go to the journal map first (the entries the checkpoint's
//! NAT journal held, plus every entry changed since), then to the current copy of the NAT
//! block, through a bounded cache. Every address handed out is checked to lie in the main
//! area.
//!
//! Writing: a changed entry goes into the journal map. At a checkpoint the map is written as
//! the NAT journal when it fits (38 entries); otherwise every NAT block it touches is written
//! whole to its other copy, the version bitmap bit flips, and the map empties (the kernel's
//! rule). Free nids are found by scanning NAT blocks from the start, lazily; a nid freed
//! since the last checkpoint is not reused before the next one.

use crate::error::{Error, Result};
use crate::mount::read_block;
use foldhash::{HashMap, HashMapExt};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};
use uf2fs_device::{BlockDevice, IoCause};
use uf2fs_format::nat::{
    check_nid, entry_in_block, nat_block_addr, NatEntry, RawNatEntry, NAT_ENTRIES_PER_BLOCK,
    NAT_JOURNAL_ENTRIES,
};
use uf2fs_format::superblock::Layout;
use uf2fs_format::{Block, CorruptKind};
use zerocopy::{FromZeros, IntoBytes};

const PER_BLOCK: u32 = NAT_ENTRIES_PER_BLOCK as u32;

struct Inner {
    bitmap: Vec<u8>,
    /// Entries changed since the NAT blocks were last written (a hash map: every node
    /// lookup asks it first; a checkpoint sorts what it writes).
    journal: HashMap<u32, NatEntry>,
    cache: HashMap<u32, Arc<Block>>,
    /// Nids known to be free and not yet handed out.
    free: BTreeSet<u32>,
    /// Nids freed since the last checkpoint began.
    freed: BTreeSet<u32>,
    /// Nids freed before the checkpoint being written: reusable once it is durable.
    freeing: BTreeSet<u32>,
    /// NAT blocks the checkpoint being written puts in their other copy, until it is durable:
    /// a reader must not go to the device for them before they land.
    pinned: HashMap<u32, Arc<Block>>,
    /// Next NAT block the free-nid scan reads.
    scan_next: u32,
}

/// NAT journal entries, as a checkpoint writes them.
pub(crate) type NatJournal = Vec<(u32, NatEntry)>;

/// Whole NAT blocks a checkpoint writes: (address, block).
pub(crate) type NatBlocks = Vec<(u64, Block)>;

pub(crate) struct Nat {
    layout: Layout,
    inner: Mutex<Inner>,
    /// Clean NAT blocks kept in memory at most (`Options::cache_bytes`).
    cache_cap: usize,
}

fn poisoned() -> Error {
    Error::InvalidArgument("internal lock poisoned by an earlier failure")
}

impl Nat {
    /// Bounds the cache of clean NAT blocks (pinned ones are not counted: a checkpoint
    /// holds them until it lands).
    pub fn set_cache_cap(&mut self, blocks: usize) {
        self.cache_cap = blocks.max(1);
    }

    pub fn new(layout: Layout, bitmap: Vec<u8>, journal: HashMap<u32, NatEntry>) -> Nat {
        let inner = Inner {
            bitmap,
            journal,
            cache: HashMap::new(),
            free: BTreeSet::new(),
            freed: BTreeSet::new(),
            freeing: BTreeSet::new(),
            pinned: HashMap::new(),
            scan_next: 0,
        };
        Nat {
            layout,
            inner: Mutex::new(inner),
            cache_cap: crate::cache::CacheCaps::default_caps().nat,
        }
    }

    fn lock(&self) -> Result<MutexGuard<'_, Inner>> {
        self.inner.lock().map_err(|_| poisoned())
    }

    fn block(&self, inner: &mut Inner, dev: &dyn BlockDevice, index: u32) -> Result<Arc<Block>> {
        if let Some(b) = inner.pinned.get(&index).or_else(|| inner.cache.get(&index)) {
            return Ok(b.clone());
        }
        let addr = nat_block_addr(&self.layout, &inner.bitmap, index);
        let b = Arc::new(read_block(dev, addr, IoCause::Meta, "NAT block")?);
        crate::cache::insert_bounded(&mut inner.cache, self.cache_cap, index, b.clone());
        Ok(b)
    }

    fn entry_locked(&self, inner: &mut Inner, dev: &dyn BlockDevice, nid: u32) -> Result<NatEntry> {
        check_nid(&self.layout, nid)?;
        if let Some(e) = inner.journal.get(&nid) {
            return Ok(*e);
        }
        Ok(entry_in_block(
            &*self.block(inner, dev, nid / PER_BLOCK)?,
            nid,
        ))
    }

    /// The entry of `nid`, raw (may be free).
    pub fn entry(&self, dev: &dyn BlockDevice, nid: u32) -> Result<NatEntry> {
        let mut inner = self.lock()?;
        self.entry_locked(&mut inner, dev, nid)
    }

    /// The block address of node `nid`, checked; `None` if the nid is free.
    pub fn lookup(&self, dev: &dyn BlockDevice, nid: u32) -> Result<Option<NatEntry>> {
        let e = self.entry(dev, nid)?;
        if e.is_free() {
            return Ok(None);
        }
        if !self.layout.in_main(e.block_addr) {
            return Err(CorruptKind::NatAddress {
                nid,
                blkaddr: e.block_addr,
            }
            .into());
        }
        Ok(Some(e))
    }

    /// Records a new entry for `nid`.
    pub fn set(&self, nid: u32, e: NatEntry) -> Result<()> {
        check_nid(&self.layout, nid)?;
        self.lock()?.journal.insert(nid, e);
        Ok(())
    }

    /// Frees `nid` (its version bumps, as the kernel does); reusable after the next checkpoint.
    pub fn free(&self, dev: &dyn BlockDevice, nid: u32) -> Result<()> {
        let mut inner = self.lock()?;
        let old = self.entry_locked(&mut inner, dev, nid)?;
        inner.journal.insert(
            nid,
            NatEntry {
                version: old.version.wrapping_add(1),
                ino: nid,
                block_addr: 0,
            },
        );
        inner.freed.insert(nid);
        Ok(())
    }

    /// A free nid, taken (the caller sets its entry before the next checkpoint).
    pub fn alloc(&self, dev: &dyn BlockDevice) -> Result<u32> {
        let mut inner = self.lock()?;
        let max_block = self.layout.nat_blocks();
        loop {
            if let Some(nid) = inner.free.pop_first() {
                // Still free? (The journal may have taken it since the scan.)
                if self.entry_locked(&mut inner, dev, nid)?.is_free() && !inner.held_back(nid) {
                    return Ok(nid);
                }
                continue;
            }
            if inner.scan_next >= max_block {
                return Err(Error::NoSpace);
            }
            let index = inner.scan_next;
            inner.scan_next += 1;
            let block = self.block(&mut inner, dev, index)?;
            for k in 0..PER_BLOCK {
                let nid = index * PER_BLOCK + k;
                // nid 0 is never used; 1 and 2 are the node and meta inodes.
                if nid < 3 {
                    continue;
                }
                let e = match inner.journal.get(&nid) {
                    Some(e) => *e,
                    None => entry_in_block(&block, nid),
                };
                if e.is_free() && !inner.held_back(nid) {
                    inner.free.insert(nid);
                }
            }
        }
    }

    /// At a checkpoint: if the journal map does not fit the NAT journal, every NAT block it
    /// touches is made whole for its other copy, whose bitmap bit flips, and returned to be
    /// written (address, block); those blocks are pinned in memory until
    /// [`Nat::checkpoint_done`]. Returns the entries for the journal, the (new) version bitmap
    /// and the blocks. Nids freed so far become reusable only at `checkpoint_done`.
    pub fn flush_for_checkpoint(
        &self,
        dev: &dyn BlockDevice,
    ) -> Result<(NatJournal, Vec<u8>, NatBlocks)> {
        let mut inner = self.lock()?;
        let freed = std::mem::take(&mut inner.freed);
        inner.freeing.extend(freed);
        let mut writes = Vec::new();
        if inner.journal.len() > NAT_JOURNAL_ENTRIES {
            let mut by_block: BTreeMap<u32, Vec<(u32, NatEntry)>> = BTreeMap::new();
            for (nid, e) in &inner.journal {
                by_block
                    .entry(nid / PER_BLOCK)
                    .or_default()
                    .push((*nid, *e));
            }
            for (index, entries) in by_block {
                let mut b = *self.block(&mut inner, dev, index)?;
                for (nid, e) in entries {
                    let mut raw = RawNatEntry::new_zeroed();
                    raw.version = e.version;
                    raw.ino.set(e.ino);
                    raw.block_addr.set(e.block_addr);
                    let at = (nid % PER_BLOCK) as usize * 9;
                    if let Some(dst) = b.get_mut(at..at + 9) {
                        dst.copy_from_slice(raw.as_bytes());
                    }
                }
                let byte = index as usize / 8;
                let mask = 0x80u8 >> (index % 8);
                if let Some(v) = inner.bitmap.get_mut(byte) {
                    *v ^= mask;
                }
                let addr = nat_block_addr(&self.layout, &inner.bitmap, index);
                let b = Arc::new(b);
                inner.pinned.insert(index, b.clone());
                crate::cache::insert_bounded(&mut inner.cache, self.cache_cap, index, b.clone());
                writes.push((addr, *b));
            }
            inner.journal.clear();
        }
        let mut journal: NatJournal = inner.journal.iter().map(|(k, v)| (*k, *v)).collect();
        journal.sort_unstable_by_key(|(nid, _)| *nid);
        Ok((journal, inner.bitmap.clone(), writes))
    }

    /// After a checkpoint is durable: nids freed before it began may be handed out again, and
    /// the NAT blocks it wrote may be read from the device.
    pub fn checkpoint_done(&self) -> Result<()> {
        let mut inner = self.lock()?;
        let freeing = std::mem::take(&mut inner.freeing);
        inner.free.extend(freeing);
        inner.pinned.clear();
        Ok(())
    }
}

impl Inner {
    /// Freed since the last durable checkpoint: not to be handed out yet.
    fn held_back(&self, nid: u32) -> bool {
        self.freed.contains(&nid) || self.freeing.contains(&nid)
    }
}
