//! fsync and checkpoint requests.
//!
//! **fsync by node chain** (the kernel's roll-forward format). A regular file's data blocks
//! are already written (out of place) when `write` returns; what is not on disk is the dirty
//! direct nodes (the inode and its direct nodes) that point at them. fsync writes those to the
//! warm-node log, right where the last checkpoint left it, so that they form the chain that
//! roll-forward recovery walks (`recovery.rs`, and Linux at mount): each carries the last
//! checkpoint's cp_ver (with its CRC under CRC_RECOVERY) and the address of the next block of
//! the log. The file's direct nodes go first and its inode last; only the inode carries the
//! FSYNC mark (and DENT when the file's directory entry is in no checkpoint yet), so the inode
//! is the commit record of the fsync: recovery replays a file's chain blocks up to its last
//! FSYNC-marked block, and a torn fsync (some nodes landed, not its inode) replays nothing of
//! itself. Linux's recovery replays every chain block of a file it lists, so it reads our
//! chains the same way.
//!
//! In `fsync_mode=posix` the device cache is flushed before the nodes when data went out since
//! the last flush (so that a replayed node never points at data that did not land: Linux does
//! not order these and can show garbage in an unacknowledged range after a power cut), and
//! after them. `nobarrier` issues no flush; `strict` also checkpoints for a file whose entry
//! is in no checkpoint.
//!
//! **A checkpoint instead**, where recovery could not rebuild the file's place in the tree
//! from the chain (the kernel's rules, see `checkpoint_reason`): not a regular file, hard
//! links, a rename, link or unlink since the last checkpoint, freed blocks (truncate, punch),
//! xattr changes, a directory that is itself not in a checkpoint, or not enough room.
//!
//! **Merging** (`checkpoint_merge`, on by default): a request is served by any checkpoint
//! that began after the changes it needs. A checkpoint is prepared under the write lock and
//! written without it; requests made meanwhile wait for it to land (without the lock), and
//! those it covers are done; the first of the others to get the lock prepares the next, which
//! serves the rest. So at most one checkpoint is in flight and one being gathered, whatever
//! the number of callers, and changes run while a checkpoint is written.

use crate::data::{land, write_runs};
use crate::durability::checkpoint::write_nodes;
use crate::error::{Error, Result};
use crate::space::Log;
use crate::state::WriteState;
use crate::vol::{Fs, FsyncMode};
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use uf2fs_device::IoCause;
use uf2fs_format::inode::inline_flags;
use uf2fs_format::inode::{FileType, I_ADDR_OFFSET};
use uf2fs_format::node::XATTR_NODE_OFFSET;
use uf2fs_format::node::{is_indirect, Footer, DENT_BIT, FOOTER_OFFSET, FSYNC_BIT};
use uf2fs_format::Block;

/// Blocks kept free beyond a chain's own, so that recovery and its checkpoint fit.
const CHAIN_RESERVE: u64 = 2048;

impl Fs {
    /// Makes `ino` durable: its data and what reaches it. `datasync` (fdatasync) may skip an
    /// inode whose only change is its times. See the module comment and docs/design.md.
    pub fn fsync(&self, ino: u32, datasync: bool) -> Result<()> {
        {
            // A chain written now belongs to the checkpoint being written, if one is: settle it.
            let mut ws = self.ws_settled()?;
            ws.sync.stats.requests += 1;
            // A chain writes some of the dirty nodes (counted in the room every change
            // leaves) and may open a section of the warm-node log: room for that first, so
            // that a stream of fsyncs never eats the room the cleaner needs. Short of it, a
            // checkpoint serves instead.
            let bps = u64::from(ws.segs.blocks_per_section());
            let room = match self.make_room_waiting(&mut ws, bps) {
                Ok(()) => true,
                Err(Error::NoSpace) => false,
                Err(e) => return Err(e),
            };
            let reason = if room {
                self.checkpoint_reason(&ws, ino)?
            } else {
                Some("too little room to keep a roll-forward chain")
            };
            match reason {
                None => {
                    let r = self.fsync_chain(&mut ws, ino, datasync);
                    if let Err(e) = &r {
                        if matches!(e, Error::Io { .. } | Error::Corrupt(_) | Error::NoSpace) {
                            ws.failed = Some(format!("fsync: {e}"));
                        }
                    }
                    return r;
                }
                Some(why) => {
                    tracing::debug!("fsync of inode {ino} writes a checkpoint: {why}");
                    ws.sync.stats.by_checkpoint += 1;
                }
            }
        }
        self.request_checkpoint(Some(ino))
    }

    /// A checkpoint that holds every change made so far (`ino`: every change to that inode,
    /// which for a directory includes its entries). With merging on, one that began after
    /// those changes serves: the one that just ended, or the next, which the first waiter to
    /// get the write lock writes for all. With it off, every request writes its own.
    pub(crate) fn request_checkpoint(&self, ino: Option<u32>) -> Result<()> {
        let vol = self.vol();
        let need = match ino {
            Some(ino) => vol
                .last_change
                .lock()
                .map_err(|_| Error::InvalidArgument("internal lock poisoned"))?
                .get(&ino)
                .copied()
                .unwrap_or(0),
            None => vol.change_seq.load(Ordering::SeqCst),
        };
        let mut ws = self.ws_settled()?;
        ws.cp.requests += 1;
        if vol.options.checkpoint_merge && ws.cp.written > 0 && ws.cp.covered_seq >= need {
            ws.sync.stats.merged += 1;
            return Ok(());
        }
        // Prepared under the lock, written without it: changes and reads go on meanwhile,
        // and requests made meanwhile that this checkpoint covers are served by it.
        let writes = self.prepare_checkpoint(&mut ws, false)?;
        drop(ws);
        self.write_prepared(writes)
    }

    /// Writes a checkpoint if something changed since the last one began and that one is at
    /// least `interval` old (the kernel's `cp_interval`: what a crash can lose that nobody
    /// fsync'd stays bounded in time). Returns whether it wrote one. Never waits for the write
    /// lock: a busy volume is checked again on the next call.
    pub fn checkpoint_if_due(&self, interval: std::time::Duration) -> Result<bool> {
        let vol = self.vol();
        let Some(lock) = vol.write.as_ref() else {
            return Ok(false);
        };
        let ws = match lock.try_lock() {
            Ok(ws) => ws,
            Err(std::sync::TryLockError::WouldBlock) => return Ok(false),
            Err(std::sync::TryLockError::Poisoned(_)) => {
                return Err(Error::InvalidArgument("internal lock poisoned"))
            }
        };
        let changed = vol.change_seq.load(Ordering::SeqCst) > ws.cp.covered_seq;
        let due = ws.cp.last_landed.elapsed() >= interval;
        if ws.failed.is_some() || ws.cp.pending.is_some() || !changed || !due {
            return Ok(false);
        }
        drop(ws);
        self.request_checkpoint(None)?;
        Ok(true)
    }

    /// One step of the background checkpoint thread: the checkpoint a change asked for when
    /// the dirty nodes passed half their budget (if they still do: a sync may have written
    /// one since), else the periodic one when `interval` is given and due. Returns whether
    /// it wrote one. Once a thread steps, changes leave the budget's checkpoints to it and
    /// write one themselves only at the whole budget (`maybe_checkpoint`).
    pub fn background_checkpoint_step(
        &self,
        interval: Option<std::time::Duration>,
    ) -> Result<bool> {
        let vol = self.vol();
        if vol.write.is_none() {
            return Ok(false);
        }
        vol.budget_checkpoints.mark_running();
        if vol.budget_checkpoints.take() && vol.nodes.dirty_count() > vol.dirty_budget / 2 {
            self.request_checkpoint(None)?;
            self.ws()?.cp.budget_in_background += 1;
            return Ok(true);
        }
        match interval {
            Some(interval) => self.checkpoint_if_due(interval),
            None => Ok(false),
        }
    }

    /// What the background checkpoint thread sleeps on between steps.
    pub fn checkpoint_waiter(&self) -> crate::Waiter {
        crate::Waiter(self.vol().budget_checkpoints.clone())
    }

    /// Why an fsync of `ino` must write a checkpoint; `None` when the node chain will do.
    fn checkpoint_reason(&self, ws: &WriteState, ino: u32) -> Result<Option<&'static str>> {
        let i = self.inode(ino)?;
        let v = self.vol();
        Ok(if i.file_type != FileType::Regular {
            Some("not a regular file")
        } else if i.links != 1 {
            Some("not exactly one link")
        } else if ws.sync.needs_cp.contains(&ino) {
            Some("renamed, linked, truncated or xattrs changed since the last checkpoint")
        } else if ws.sync.born.contains(&i.pino) || i.pino == 0 {
            Some("its directory is not in a checkpoint")
        } else if v.options.fsync_mode == FsyncMode::Strict && ws.sync.born.contains(&ino) {
            Some("fsync_mode=strict and its entry is not in a checkpoint")
        } else if ws.segs.writable_blocks() < v.nodes.dirty_count() as u64 * 2 + CHAIN_RESERVE {
            Some("too little room to keep a roll-forward chain")
        } else {
            None
        })
    }

    /// Writes the file's dirty direct nodes and its inode (last, marked) to the chain.
    fn fsync_chain(&self, ws: &mut WriteState, ino: u32, datasync: bool) -> Result<()> {
        let v = self.vol();
        let barrier = v.options.fsync_mode != FsyncMode::Nobarrier;
        // The file's data written by changes that have let the write lock go may still be
        // on its way to the device: the flush below must come after it.
        land(&*v.dev, &v.inflight, &mut ws.deferred)?;
        // Direct nodes only the cleaner changed stay for the next checkpoint: what the last
        // checkpoint's copies point at is still on the device until then.
        let mut dnodes = v.nodes.dirty_of(ino, |nid, f| {
            nid != ino
                && !is_indirect(u64::from(f.ofs()))
                && f.ofs() != XATTR_NODE_OFFSET
                && !v.nodes.is_gc_only(nid)
        })?;
        let mut inode = v.nodes.dirty_of(ino, |nid, f| nid == ino && f.ofs() == 0)?;
        if dnodes.is_empty() {
            let times_only = match inode.get(&ino) {
                Some((b, _)) => datasync && self.only_times_differ(ino, b)?,
                None => true,
            };
            if times_only {
                // Nothing a read of the data needs is dirty: the data blocks only need to land.
                if barrier && ws.sync.data_since_flush {
                    v.dev.flush().map_err(|e| Error::io("flush for fsync", e))?;
                    ws.sync.data_since_flush = false;
                }
                ws.sync.stats.by_node_chain += 1;
                return Ok(());
            }
        }
        if inode.is_empty() {
            // The inode is the fsync's commit record: written even when unchanged.
            let b = v
                .nodes
                .read(&*v.dev, &v.nat, ino, crate::node::Expect { ino, ofs: 0 })?;
            inode.insert(ino, (b, Log::WarmNode));
        }
        // The chain is the warm-node log, whatever log a node would go to at a checkpoint.
        for (_, log) in dnodes.values_mut().chain(inode.values_mut()) {
            *log = Log::WarmNode;
        }
        if barrier && ws.sync.data_since_flush {
            v.dev
                .flush()
                .map_err(|e| Error::io("flush of data before the fsync's nodes", e))?;
            ws.sync.data_since_flush = false;
        }
        let dent = if ws.sync.born.contains(&ino) && !ws.sync.fsynced.contains(&ino) {
            DENT_BIT
        } else {
            0
        };
        let ver = ws.cp.footer_version();
        let mut writes: BTreeMap<u32, Block> = BTreeMap::new();
        let mut keep = |addr, _, _, b: Block, _| {
            writes.insert(addr, b);
        };
        write_nodes(v, ws, dnodes.clone(), ver, |_, _| 0, &mut keep)?;
        let marks = |_: u32, _: &Block| FSYNC_BIT | dent;
        write_nodes(v, ws, inode.clone(), ver, marks, &mut keep)?;
        write_runs(&*v.dev, &writes, IoCause::Node)?;
        v.nodes.written(&dnodes);
        v.nodes.written(&inode);
        if barrier {
            v.dev
                .flush()
                .map_err(|e| Error::io("flush after the fsync's nodes", e))?;
        }
        ws.sync.fsynced.insert(ino);
        ws.sync.stats.by_node_chain += 1;
        ws.sync.stats.chain_blocks += writes.len() as u64;
        Ok(())
    }

    /// Whether the dirty inode block `b` differs from the one on disk only in its times (and
    /// so in its checksum): then fdatasync need not write it.
    fn only_times_differ(&self, ino: u32, b: &Arc<Block>) -> Result<bool> {
        let v = self.vol();
        // A new inode (NEW_ADDR) has no copy on disk to compare with.
        let e = v.nat.entry(&*v.dev, ino)?;
        if e.is_free() || !v.layout.in_main(e.block_addr) {
            return Ok(false);
        }
        let old = crate::mount::read_block(&*v.dev, e.block_addr.into(), IoCause::Node, "inode")?;
        let masked = |blk: &Block| -> Vec<u8> {
            let mut c = blk.to_vec();
            // atime, ctime, mtime and their nanoseconds; the footer; the inode checksum, which
            // exists only in the extra area (else those bytes are an address slot).
            let sum = if blk
                .get(3)
                .is_some_and(|i| i & inline_flags::EXTRA_ATTR != 0)
            {
                I_ADDR_OFFSET + 8..I_ADDR_OFFSET + 12
            } else {
                0..0
            };
            for r in [32..68, sum, FOOTER_OFFSET..c.len()] {
                if let Some(s) = c.get_mut(r) {
                    s.fill(0);
                }
            }
            c
        };
        let f = Footer::of(&old);
        Ok(f.nid == ino && masked(&old) == masked(b))
    }
}
