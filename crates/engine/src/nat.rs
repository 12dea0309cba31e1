//! NAT lookups: the journal first, then the current copy of the NAT block, with a bounded
//! cache of NAT blocks. Every address handed out is checked to lie in the main area.

use crate::error::Result;
use crate::mount::read_block;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use uf2fs_device::{BlockDevice, IoCause};
use uf2fs_format::nat::{
    check_nid, entry_in_block, nat_block_addr, NatEntry, NAT_ENTRIES_PER_BLOCK,
};
use uf2fs_format::superblock::Layout;
use uf2fs_format::{Block, CorruptKind};

/// NAT blocks kept in memory at most (16 MiB).
const NAT_CACHE_BLOCKS: usize = 4096;

pub(crate) struct Nat {
    layout: Layout,
    bitmap: Vec<u8>,
    journal: HashMap<u32, NatEntry>,
    cache: Mutex<HashMap<u32, Arc<Block>>>,
}

impl Nat {
    pub fn new(layout: Layout, bitmap: Vec<u8>, journal: HashMap<u32, NatEntry>) -> Nat {
        Nat {
            layout,
            bitmap,
            journal,
            cache: Mutex::new(HashMap::new()),
        }
    }

    fn block(&self, dev: &dyn BlockDevice, index: u32) -> Result<Arc<Block>> {
        if let Some(b) = self.cache.lock().map_err(|_| poisoned())?.get(&index) {
            return Ok(b.clone());
        }
        let addr = nat_block_addr(&self.layout, &self.bitmap, index);
        let b = Arc::new(read_block(dev, addr, IoCause::Meta, "NAT block")?);
        let mut cache = self.cache.lock().map_err(|_| poisoned())?;
        if cache.len() >= NAT_CACHE_BLOCKS {
            cache.clear();
        }
        cache.insert(index, b.clone());
        Ok(b)
    }

    /// The entry of `nid`, raw (may be free).
    pub fn entry(&self, dev: &dyn BlockDevice, nid: u32) -> Result<NatEntry> {
        check_nid(&self.layout, nid)?;
        if let Some(e) = self.journal.get(&nid) {
            return Ok(*e);
        }
        let index = nid / NAT_ENTRIES_PER_BLOCK as u32;
        Ok(entry_in_block(&*self.block(dev, index)?, nid))
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
}

fn poisoned() -> crate::Error {
    crate::Error::InvalidArgument("internal lock poisoned by an earlier failure")
}
