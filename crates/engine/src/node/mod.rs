//! Node reads: nid → NAT → block, with the footer checked against what the caller expects
//! (the nid itself, the owner inode, the node's offset in the owner's tree). A bounded cache
//! keeps recently read node blocks.
//!
//! Node writes: a changed node is kept whole in the dirty map (and read from there) until a
//! checkpoint writes it out of place into its log; no node block is ever overwritten.

pub(crate) mod nat;

use crate::error::Result;
use crate::mount::read_block;
use crate::node::nat::Nat;
use crate::space::Log;
use foldhash::{HashMap, HashSet, HashSetExt};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use uf2fs_device::{BlockDevice, IoCause};
use uf2fs_format::node::Footer;
use uf2fs_format::{Block, CorruptKind};

/// A node block being changed: shares the block it was read as (the cache's copy) until
/// the first write through it, which copies the block once into a block of its own; a
/// change then hands that same block to the dirty map and the cache, without another copy.
/// (Until stop 45 an edit copied the block out of the cache, moved it by value, and copied
/// it again into a new `Arc` when it was kept: a tenth of the daemon's request time in
/// `tar -x` was those copies.)
#[derive(Clone)]
pub(crate) struct NodeBuf(Arc<Block>);

impl NodeBuf {
    pub fn new(shared: Arc<Block>) -> NodeBuf {
        NodeBuf(shared)
    }
}

impl std::ops::Deref for NodeBuf {
    type Target = Block;
    fn deref(&self) -> &Block {
        &self.0
    }
}

/// A block built by the caller (a new inode), to be edited and kept.
impl From<Block> for NodeBuf {
    fn from(b: Block) -> NodeBuf {
        NodeBuf(Arc::new(b))
    }
}

impl From<NodeBuf> for Arc<Block> {
    fn from(b: NodeBuf) -> Arc<Block> {
        b.0
    }
}

impl std::ops::DerefMut for NodeBuf {
    fn deref_mut(&mut self) -> &mut Block {
        Arc::make_mut(&mut self.0)
    }
}

pub(crate) struct Nodes {
    cache: Mutex<Cache>,
    /// Clean node blocks kept in memory at most (`Options::cache_bytes`).
    cache_cap: usize,
    /// Moves (under the `cache` lock) whenever a node changes, so that a reader that fetched
    /// a block from the device before the change does not cache it after.
    epoch: std::sync::atomic::AtomicU64,
    /// Changed nodes and the log each goes to, written at the next checkpoint.
    dirty: Mutex<Dirty>,
    /// Dirty nodes that only the cleaner changed (a node it moved, or a direct node whose
    /// data it moved). An fsync need not write them: the blocks the last checkpoint's copy
    /// points at stay on the device until the next checkpoint, which writes these.
    gc_only: Mutex<HashSet<u32>>,
}

/// The clean node blocks, and the last [`CHANGE_LOG`] moves of the epoch with the node each
/// was for: a reader whose fetch a change overtook keeps what it read of the other nodes.
/// (Until stop 44 any change dropped everything read meanwhile, and a read-ahead racing
/// `rm -rf`'s unlinks kept nothing.)
#[derive(Default)]
struct Cache {
    blocks: HashMap<u32, Arc<Block>>,
    changes: std::collections::VecDeque<(u64, u32)>,
}

/// The dirty nodes by nid, and how many go to each node log (hot, warm, cold).
#[derive(Default)]
struct Dirty {
    map: BTreeMap<u32, (Arc<Block>, Log)>,
    by_log: [usize; 3],
}

impl Dirty {
    fn count(&mut self, log: Log, up: bool) {
        if let Some(n) = (log as usize)
            .checked_sub(3)
            .and_then(|i| self.by_log.get_mut(i))
        {
            *n = if up { *n + 1 } else { n.saturating_sub(1) };
        }
    }

    fn insert(&mut self, nid: u32, b: Arc<Block>, log: Log) {
        if let Some((_, old)) = self.map.insert(nid, (b, log)) {
            self.count(old, false);
        }
        self.count(log, true);
    }

    fn remove(&mut self, nid: u32) {
        if let Some((_, old)) = self.map.remove(&nid) {
            self.count(old, false);
        }
    }
}

/// What the reader of a node expects to find in its footer.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Expect {
    pub ino: u32,
    pub ofs: u64,
}

impl Nodes {
    pub fn new() -> Nodes {
        Nodes {
            cache: Mutex::new(Cache::default()),
            cache_cap: crate::cache::CacheCaps::default_caps().nodes,
            epoch: std::sync::atomic::AtomicU64::new(0),
            dirty: Mutex::new(Dirty::default()),
            gc_only: Mutex::new(HashSet::new()),
        }
    }

    /// Bounds the cache of clean node blocks (dirty ones are bounded by the checkpoint's
    /// dirty-node budget, not here).
    pub fn set_cache_cap(&mut self, blocks: usize) {
        self.cache_cap = blocks.max(1);
    }

    /// Keeps a changed node until the next checkpoint.
    pub fn put_dirty(&self, nid: u32, block: impl Into<Arc<Block>>, log: Log) -> Result<()> {
        if let Ok(mut g) = self.gc_only.lock() {
            g.remove(&nid);
        }
        self.keep_dirty(nid, block, log)
    }

    /// Keeps a node the cleaner changed until the next checkpoint; it counts as changed by
    /// the cleaner only if nothing else had changed it since it was last written.
    pub fn put_dirty_gc(&self, nid: u32, block: impl Into<Arc<Block>>, log: Log) -> Result<()> {
        let was_dirty = self
            .dirty
            .lock()
            .map(|d| d.map.contains_key(&nid))
            .unwrap_or(true);
        if !was_dirty {
            if let Ok(mut g) = self.gc_only.lock() {
                g.insert(nid);
            }
        }
        self.keep_dirty(nid, block, log)
    }

    /// Whether node `nid` waits for a checkpoint.
    pub fn is_dirty(&self, nid: u32) -> bool {
        self.dirty
            .lock()
            .map(|d| d.map.contains_key(&nid))
            .unwrap_or(true)
    }

    /// Whether dirty node `nid` was changed by the cleaner alone.
    pub fn is_gc_only(&self, nid: u32) -> bool {
        self.gc_only
            .lock()
            .map(|g| g.contains(&nid))
            .unwrap_or(false)
    }

    fn keep_dirty(&self, nid: u32, block: impl Into<Arc<Block>>, log: Log) -> Result<()> {
        let b = block.into();
        self.dirty
            .lock()
            .map_err(|_| crate::Error::InvalidArgument("lock poisoned"))?
            .insert(nid, b.clone(), log);
        self.cached(nid, Some(b));
        Ok(())
    }

    /// Puts (or drops) the cached copy of `nid` and moves the epoch. Every node a change
    /// dirties or a checkpoint writes passes through, so the bound holds here too (before it
    /// did, a tree of 40 000 new files kept all 40 000 inode blocks: 160 MiB against a 64 MiB
    /// `cache_size`).
    fn cached(&self, nid: u32, b: Option<Arc<Block>>) {
        if let Ok(mut c) = self.cache.lock() {
            self.cached_locked(&mut c, nid, b);
        }
    }

    /// [`Nodes::cached`] with the cache's lock held.
    fn cached_locked(&self, c: &mut Cache, nid: u32, b: Option<Arc<Block>>) {
        match b {
            Some(b) => crate::cache::insert_bounded(&mut c.blocks, self.cache_cap, nid, b),
            None => {
                c.blocks.remove(&nid);
            }
        }
        let now = self.epoch.fetch_add(1, std::sync::atomic::Ordering::AcqRel) + 1;
        if c.changes.len() >= CHANGE_LOG {
            c.changes.pop_front();
        }
        c.changes.push_back((now, nid));
    }

    /// Changes dirty node `nid` where it lies instead of in a copy, when nothing but the dirty
    /// map and the clean cache holds its block: no reader, no checkpoint's or fsync's
    /// snapshot, no parsed inode. `change` runs under the dirty map's lock, which every reader
    /// of a dirty node takes to find it, so a reader meets the block before the change or
    /// after it, never in the middle. `change` returns the log the node goes to when it
    /// changed the block, `None` when it left it as it was. The answer is whether it changed
    /// it, or `None` (nothing done) when the node is not dirty or its block is shared: the
    /// caller then edits a copy ([`NodeBuf`]).
    pub fn change_in_place(
        &self,
        nid: u32,
        change: impl FnOnce(&mut Block) -> Option<Log>,
    ) -> Option<bool> {
        let mut d = self.dirty.lock().ok()?;
        let mut c = self.cache.lock().ok()?;
        let (b, _) = d.map.get_mut(&nid)?;
        // The clean cache shares the dirty block (`keep_dirty`): it lets go for the change
        // and takes the block back after.
        let was_cached = c.blocks.remove(&nid).is_some();
        let Some(block) = Arc::get_mut(b) else {
            if was_cached {
                c.blocks.insert(nid, b.clone());
            }
            return None;
        };
        let Some(log) = change(block) else {
            if was_cached {
                c.blocks.insert(nid, b.clone());
            }
            return Some(false);
        };
        let b = b.clone();
        d.insert(nid, b.clone(), log);
        self.cached_locked(&mut c, nid, Some(b));
        drop(c);
        drop(d);
        // Changed by a writer: no longer the cleaner's alone (as `put_dirty`).
        if let Ok(mut g) = self.gc_only.lock() {
            g.remove(&nid);
        }
        Some(true)
    }

    /// Caches blocks a reader fetched from the device since `epoch`: each unless its node
    /// changed since, when the reader's copy may be older than the change; none when the log
    /// of changes no longer reaches back to `epoch`.
    fn keep_read(&self, epoch: u64, got: impl IntoIterator<Item = (u32, Arc<Block>)>) {
        let Ok(mut c) = self.cache.lock() else { return };
        let now = self.epoch.load(std::sync::atomic::Ordering::Acquire);
        let changed: HashSet<u32> = if now == epoch {
            HashSet::new()
        } else {
            // The log must hold every move after `epoch`: the first one is `epoch + 1`.
            if c.changes.front().is_none_or(|&(e, _)| e > epoch + 1) {
                return;
            }
            c.changes
                .iter()
                .rev()
                .take_while(|&&(e, _)| e > epoch)
                .map(|&(_, nid)| nid)
                .collect()
        };
        for (nid, b) in got {
            if !changed.contains(&nid) {
                crate::cache::insert_bounded(&mut c.blocks, self.cache_cap, nid, b);
            }
        }
    }

    /// The dirty nodes as they are (for the checkpoint, which writes them and then calls
    /// [`Nodes::written`]): until then readers keep finding them here, never an address the
    /// NAT already holds but whose block is not yet written.
    pub fn dirty_snapshot(&self) -> Result<BTreeMap<u32, (Arc<Block>, Log)>> {
        Ok(self
            .dirty
            .lock()
            .map_err(|_| crate::Error::InvalidArgument("lock poisoned"))?
            .map
            .clone())
    }

    /// A checkpoint sealed dirty node `nid` (`unsealed`, as its snapshot had it) into
    /// `sealed`, the block it writes: unless a change replaced it since, the dirty copy
    /// becomes the sealed one, in the dirty map and the clean cache, so that one copy is kept.
    pub fn sealed(&self, nid: u32, unsealed: &Arc<Block>, sealed: &Arc<Block>) {
        let Ok(mut d) = self.dirty.lock() else {
            return;
        };
        if let Some((cur, _)) = d.map.get_mut(&nid) {
            if Arc::ptr_eq(cur, unsealed) {
                *cur = sealed.clone();
                if let Ok(mut c) = self.cache.lock() {
                    if let Some(slot) = c.blocks.get_mut(&nid) {
                        *slot = sealed.clone();
                    }
                }
            }
        }
    }

    /// The nodes of a snapshot are on disk and in the NAT: they stop being dirty, unless a
    /// change made since the snapshot replaced or forgot one (a checkpoint's blocks land
    /// while other changes run): that node's newer state stays as it is.
    pub fn written(&self, snapshot: &BTreeMap<u32, (Arc<Block>, Log)>) {
        if let Ok(mut d) = self.dirty.lock() {
            for (nid, (b, _)) in snapshot {
                if d.map.get(nid).is_some_and(|(cur, _)| Arc::ptr_eq(cur, b)) {
                    d.remove(*nid);
                    if let Ok(mut g) = self.gc_only.lock() {
                        g.remove(nid);
                    }
                    self.cached(*nid, Some(b.clone()));
                }
            }
        }
    }

    /// The dirty nodes of inode `ino` that `keep` accepts (by nid and footer).
    pub fn dirty_of(
        &self,
        ino: u32,
        keep: impl Fn(u32, &Footer) -> bool,
    ) -> Result<BTreeMap<u32, (Arc<Block>, Log)>> {
        Ok(self
            .dirty
            .lock()
            .map_err(|_| crate::Error::InvalidArgument("lock poisoned"))?
            .map
            .iter()
            .filter(|(nid, (b, _))| {
                let f = Footer::of(b);
                f.ino == ino && keep(**nid, &f)
            })
            .map(|(nid, v)| (*nid, v.clone()))
            .collect())
    }

    /// How many nodes wait for a checkpoint.
    pub fn dirty_count(&self) -> usize {
        self.dirty.lock().map(|d| d.map.len()).unwrap_or(0)
    }

    /// How many dirty nodes go to each node log: hot, warm, cold.
    pub fn dirty_by_log(&self) -> [usize; 3] {
        self.dirty
            .lock()
            .map(|d| d.by_log)
            .unwrap_or([usize::MAX; 3])
    }

    /// A node to change: the dirty copy (with its log), the clean cached copy, or the block
    /// on disk (then cached), checked to belong to `ino` (its offset is the caller's to know).
    /// The clean cache is as current as the dirty map: every node a change dirties or a
    /// checkpoint writes passes through [`Nodes::cached`]. Until stop 36 an edit skipped it
    /// and read the device, so a random 4 KiB rewrite read its file's indirect node (and the
    /// direct node, once for its old slot and again to set it) from the image each time.
    pub fn get_for_edit(
        &self,
        dev: &dyn BlockDevice,
        nat: &Nat,
        nid: u32,
        ino: u32,
    ) -> Result<(NodeBuf, Option<Log>)> {
        self.get_shared(dev, nat, nid, ino)
            .map(|(b, log)| (NodeBuf::new(b), log))
    }

    /// [`Nodes::get_for_edit`] without the copy: for a caller that only looks (the slot a
    /// rewrite replaces, the child an indirect node names).
    pub fn get_shared(
        &self,
        dev: &dyn BlockDevice,
        nat: &Nat,
        nid: u32,
        ino: u32,
    ) -> Result<(Arc<Block>, Option<Log>)> {
        if let Some((b, log)) = self
            .dirty
            .lock()
            .ok()
            .and_then(|d| d.map.get(&nid).map(|(b, l)| (b.clone(), *l)))
        {
            return Ok((b, Some(log)));
        }
        let owned = |b: &Block, blkaddr: u32| {
            let f = Footer::of(b);
            if f.nid != nid || f.ino != ino {
                return Err(CorruptKind::NodeFooter {
                    nid,
                    blkaddr,
                    what: "ino",
                    found: f.ino,
                    expected: ino,
                });
            }
            Ok(())
        };
        let epoch = self.epoch.load(std::sync::atomic::Ordering::Acquire);
        if let Some(b) = self
            .cache
            .lock()
            .ok()
            .and_then(|c| c.blocks.get(&nid).cloned())
        {
            owned(&b, 0)?;
            return Ok((b, None));
        }
        let (b, blkaddr) = fetch(dev, nat, nid, ino)?;
        owned(&b, blkaddr)?;
        let b = Arc::new(b);
        self.keep_read(epoch, [(nid, b.clone())]);
        Ok((b, None))
    }

    /// Forgets a node that no longer exists (its dirty copy is not written).
    pub fn forget(&self, nid: u32) {
        if let Ok(mut d) = self.dirty.lock() {
            d.remove(nid);
        }
        if let Ok(mut g) = self.gc_only.lock() {
            g.remove(&nid);
        }
        self.cached(nid, None);
    }

    /// Reads the inode blocks of `nids` that are neither dirty nor cached into the clean
    /// cache, neighbours on the device in one read (a gap of up to [`PREFETCH_GAP`] blocks
    /// is read through): for a caller about to look at each of them, as READDIRPLUS does for
    /// a directory's entries, whose inodes a checkpoint wrote side by side. Until stop 40
    /// each was read alone.
    ///
    /// Best effort: a nid whose NAT entry is free or names another inode, a block whose
    /// footer does not check and a read that fails are left for the caller's own read to
    /// report; and if any node changed meanwhile (the epoch moved), nothing is kept, as
    /// [`Nodes::read`] keeps nothing then.
    pub fn prefetch_inodes(&self, dev: &dyn BlockDevice, nat: &Nat, nids: &[u32]) {
        use std::sync::atomic::Ordering::Acquire;
        let epoch = self.epoch.load(Acquire);
        let want = self.not_held(dev, nat, nids);
        if want.is_empty() {
            return;
        }
        let mut got = Vec::with_capacity(want.len());
        PREFETCH_BUF.with_borrow_mut(|buf| read_runs(dev, &want, buf, &mut got));
        self.keep_read(epoch, got);
    }

    /// (address, nid) of the inodes of `nids` neither dirty nor cached, by address: those
    /// whose NAT entry names an inode.
    fn not_held(&self, dev: &dyn BlockDevice, nat: &Nat, nids: &[u32]) -> Vec<(u32, u32)> {
        let missing: Vec<u32> = {
            let (Ok(d), Ok(c)) = (self.dirty.lock(), self.cache.lock()) else {
                return Vec::new();
            };
            nids.iter()
                .copied()
                .filter(|n| !d.map.contains_key(n) && !c.blocks.contains_key(n))
                .collect()
        };
        let mut want: Vec<(u32, u32)> = missing
            .into_iter()
            .filter_map(|nid| match nat.lookup(dev, nid) {
                Ok(Some(e)) if e.ino == nid => Some((e.block_addr, nid)),
                _ => None,
            })
            .collect();
        want.sort_unstable();
        want.dedup_by_key(|(addr, _)| *addr);
        want
    }

    /// Reads node `nid` and checks its NAT entry and footer.
    pub fn read(
        &self,
        dev: &dyn BlockDevice,
        nat: &Nat,
        nid: u32,
        expect: Expect,
    ) -> Result<Arc<Block>> {
        let epoch = self.epoch.load(std::sync::atomic::Ordering::Acquire);
        let dirty = self
            .dirty
            .lock()
            .ok()
            .and_then(|d| d.map.get(&nid).map(|(b, _)| b.clone()));
        let cached = dirty.or_else(|| {
            self.cache
                .lock()
                .ok()
                .and_then(|c| c.blocks.get(&nid).cloned())
        });
        let block = match cached {
            Some(b) => b,
            None => {
                let (b, blkaddr) = fetch(dev, nat, nid, expect.ino)?;
                let b = Arc::new(b);
                check_footer(&b, nid, blkaddr, expect)?;
                self.keep_read(epoch, [(nid, b.clone())]);
                return Ok(b);
            }
        };
        check_footer(&block, nid, 0, expect)?;
        Ok(block)
    }
}

thread_local! {
    /// The prefetch's read buffer, kept by each thread that prefetches ([`PREFETCH_RUN`]
    /// blocks, 256 KiB): allocated for each read, a buffer that large was mapped and unmapped
    /// each time, and the host's page faults on it were a sixth of the prefetch's time.
    static PREFETCH_BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The prefetch buffer each thread that lists keeps, in bytes (the daemon counts it among
/// its own buffers, outside the caches' share of `cache_size`).
pub const PREFETCH_BUFFER_BYTES: u64 = PREFETCH_RUN as u64 * uf2fs_format::BLOCK_SIZE as u64;

/// A gap between two wanted blocks that one prefetch read goes through, in blocks.
pub(crate) const PREFETCH_GAP: u32 = 8;
/// The most blocks one prefetch read takes (256 KiB).
const PREFETCH_RUN: u32 = 64;

/// Changes of nodes remembered for readers racing them (16 bytes each).
const CHANGE_LOG: usize = 4096;

/// Reads `want`'s runs into `buf` (kept by the thread) and adds the blocks whose footer
/// checks to `got`.
fn read_runs(
    dev: &dyn BlockDevice,
    want: &[(u32, u32)],
    buf: &mut Vec<u8>,
    got: &mut Vec<(u32, Arc<Block>)>,
) {
    buf.resize(PREFETCH_RUN as usize * uf2fs_format::BLOCK_SIZE, 0);
    for run in runs(want) {
        let (Some(&(first, _)), Some(&(last, _))) = (run.first(), run.last()) else {
            continue;
        };
        let n = (last - first) as usize + 1;
        let Some(buf) = buf.get_mut(..n * uf2fs_format::BLOCK_SIZE) else {
            continue;
        };
        if dev.read_blocks(first.into(), buf, IoCause::Node).is_err() {
            continue;
        }
        for &(addr, nid) in run {
            let at = (addr - first) as usize * uf2fs_format::BLOCK_SIZE;
            let Some(Ok(b)) = buf
                .get(at..at + uf2fs_format::BLOCK_SIZE)
                .map(<Block>::try_from)
            else {
                continue;
            };
            if check_footer(&b, nid, addr, Expect { ino: nid, ofs: 0 }).is_ok() {
                got.push((nid, Arc::new(b)));
            }
        }
    }
}

/// `want` (sorted by address) cut where the next block is more than [`PREFETCH_GAP`] on, or
/// would make a read longer than [`PREFETCH_RUN`].
fn runs(want: &[(u32, u32)]) -> Vec<&[(u32, u32)]> {
    let mut out = Vec::new();
    let mut start = 0;
    for i in 1..=want.len() {
        let cut = match (want.get(start), want.get(i - 1), want.get(i)) {
            (Some(&(first, _)), Some(&(prev, _)), Some(&(addr, _))) => {
                addr - prev > PREFETCH_GAP || addr - first >= PREFETCH_RUN
            }
            _ => true,
        };
        if cut {
            if let Some(r) = want.get(start..i) {
                out.push(r);
            }
            start = i;
        }
    }
    out
}

/// Reads node `nid` through the NAT, checking that it is in use and owned by `ino`; returns
/// the block and its address.
fn fetch(dev: &dyn BlockDevice, nat: &Nat, nid: u32, ino: u32) -> Result<(Block, u32)> {
    let Some(e) = nat.lookup(dev, nid)? else {
        return Err(CorruptKind::NodeFooter {
            nid,
            blkaddr: 0,
            what: "NAT entry is free for a node in use; owner",
            found: 0,
            expected: ino,
        }
        .into());
    };
    if e.ino != ino {
        return Err(CorruptKind::NodeFooter {
            nid,
            blkaddr: e.block_addr,
            what: "NAT owner ino",
            found: e.ino,
            expected: ino,
        }
        .into());
    }
    Ok((
        read_block(dev, e.block_addr.into(), IoCause::Node, "node block")?,
        e.block_addr,
    ))
}

fn check_footer(b: &Block, nid: u32, blkaddr: u32, expect: Expect) -> Result<()> {
    let f = Footer::of(b);
    let mismatch = |what, found, expected| CorruptKind::NodeFooter {
        nid,
        blkaddr,
        what,
        found,
        expected,
    };
    if f.nid != nid {
        return Err(mismatch("nid", f.nid, nid).into());
    }
    if f.ino != expect.ino {
        return Err(mismatch("ino", f.ino, expect.ino).into());
    }
    if u64::from(f.ofs()) != expect.ofs {
        return Err(mismatch("node offset", f.ofs(), expect.ofs as u32).into());
    }
    Ok(())
}

/// Log of a node: directory inodes and dnodes hot, file inodes/dnodes/xattr nodes warm,
/// indirect nodes cold (as Linux 6.1 places them).
pub(crate) fn node_log(is_dir: bool, is_dnode: bool) -> Log {
    match (is_dnode, is_dir) {
        (false, _) => Log::ColdNode,
        (true, true) => Log::HotNode,
        (true, false) => Log::WarmNode,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(mark: u8) -> Arc<Block> {
        Arc::new([mark; uf2fs_format::BLOCK_SIZE])
    }

    fn cached_mark(n: &Nodes, nid: u32) -> Option<u8> {
        n.cache.lock().unwrap().blocks.get(&nid).map(|b| b[0])
    }

    /// A read overtaken by a change keeps the nodes that did not change and never caches
    /// its older copy of the one that did.
    #[test]
    fn a_read_overtaken_by_a_change_keeps_only_the_unchanged_nodes() {
        let n = Nodes::new();
        let epoch = n.epoch.load(std::sync::atomic::Ordering::Acquire);
        n.cached(5, Some(block(2)));
        n.keep_read(epoch, [(5, block(1)), (6, block(1))]);
        assert_eq!(
            cached_mark(&n, 5),
            Some(2),
            "the older copy replaced the change"
        );
        assert_eq!(
            cached_mark(&n, 6),
            Some(1),
            "the unchanged node was dropped"
        );
        // A node removed since the read began stays removed.
        let epoch = n.epoch.load(std::sync::atomic::Ordering::Acquire);
        n.cached(6, None);
        n.keep_read(epoch, [(6, block(1))]);
        assert_eq!(cached_mark(&n, 6), None);
    }

    /// When more changes came than the log holds, nothing the read fetched is kept.
    #[test]
    fn a_read_older_than_the_change_log_keeps_nothing() {
        let n = Nodes::new();
        let epoch = n.epoch.load(std::sync::atomic::Ordering::Acquire);
        for _ in 0..CHANGE_LOG {
            n.cached(100, Some(block(3)));
        }
        n.keep_read(epoch, [(7, block(1))]);
        assert_eq!(cached_mark(&n, 7), Some(1), "the log still reaches back");
        let epoch = n.epoch.load(std::sync::atomic::Ordering::Acquire);
        for _ in 0..=CHANGE_LOG {
            n.cached(100, Some(block(3)));
        }
        n.keep_read(epoch, [(8, block(1))]);
        assert_eq!(cached_mark(&n, 8), None);
    }

    fn dirty_mark(n: &Nodes, nid: u32) -> Option<(u8, Log)> {
        n.dirty
            .lock()
            .unwrap()
            .map
            .get(&nid)
            .map(|(b, l)| (b[0], *l))
    }

    /// A dirty node nobody else holds is changed where it lies: the dirty map and the cache
    /// keep the same block, now changed, and the log the change names. A node someone holds
    /// (a reader, a checkpoint's snapshot) or a clean one is left alone, and the holder's
    /// view never moves.
    #[test]
    fn a_dirty_node_is_changed_in_place_only_when_no_one_else_holds_it() {
        let n = Nodes::new();
        n.put_dirty(9, block(1), Log::WarmNode).unwrap();
        let before = n.epoch.load(std::sync::atomic::Ordering::Acquire);
        let reader = n.dirty.lock().unwrap().map.get(&9).unwrap().0.clone();
        let mut ran = false;
        assert_eq!(
            n.change_in_place(9, |b| {
                ran = true;
                b[0] = 2;
                Some(Log::HotNode)
            }),
            None,
            "changed a block a reader holds"
        );
        assert!(!ran);
        assert_eq!(reader[0], 1);
        assert_eq!(cached_mark(&n, 9), Some(1), "the cache lost the node");
        drop(reader);
        assert_eq!(
            n.change_in_place(9, |b| {
                b[0] = 2;
                Some(Log::HotNode)
            }),
            Some(true)
        );
        assert_eq!(dirty_mark(&n, 9), Some((2, Log::HotNode)));
        assert_eq!(cached_mark(&n, 9), Some(2));
        assert_eq!(
            n.dirty_by_log(),
            [1, 0, 0],
            "the node's log count did not move"
        );
        assert!(
            n.epoch.load(std::sync::atomic::Ordering::Acquire) > before,
            "the epoch did not move"
        );
        // A change that leaves the block as it was says so and changes nothing.
        assert_eq!(n.change_in_place(9, |_| None), Some(false));
        assert_eq!(dirty_mark(&n, 9), Some((2, Log::HotNode)));
        assert_eq!(cached_mark(&n, 9), Some(2));
        // A clean node is not changed here.
        n.cached(10, Some(block(1)));
        assert_eq!(n.change_in_place(10, |_| Some(Log::WarmNode)), None);
        assert_eq!(cached_mark(&n, 10), Some(1));
    }
}
