//! The durability room's own state, kept under the write lock: the last durable checkpoint and
//! the one being written (`CheckpointState`, `Pending`), and what fsync needs to know about the
//! changes since it (`FsyncState`). Defined apart from the code that uses it so that the write
//! lock's `WriteState` can hold it without the rest of the engine depending on checkpoints.

use crate::space::Log;
use foldhash::HashSet;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;
use uf2fs_format::checkpoint::{flags, RawCheckpoint};
use uf2fs_format::Block;

/// The last durable checkpoint, the one being written, and the checkpoint counters.
pub(crate) struct CheckpointState {
    /// Version and pack (1 or 2) of the last durable checkpoint.
    pub version: u64,
    pub pack: u8,
    pub head: RawCheckpoint,
    /// CRC of the last durable checkpoint block (in node footers under CRC_RECOVERY).
    pub crc: u32,
    pub mounted_at: Instant,
    /// When the last checkpoint landed (the mount, before any).
    pub last_landed: Instant,
    /// Checkpoints written since mount.
    pub written: u64,
    /// Checkpoints asked for since mount (each sync, fsync or unmount, and the budget).
    pub requests: u64,
    /// The change sequence number the last checkpoint began at: every change up to it is in
    /// that checkpoint.
    pub covered_seq: u64,
    /// The checkpoint whose blocks are being written without the write lock, if any.
    pub pending: Option<Pending>,
    /// The nodes the last checkpoint prepared wrote: what the next one will cost, about.
    pub last_nodes: u64,
    /// The longest a checkpoint's writes took (its blocks, both flushes), in microseconds.
    pub longest_io_us: u64,
    /// The running change passed the dirty-node budget: a checkpoint follows it.
    pub wanted: bool,
    /// Checkpoints for the dirty-node budget written by a change itself (the whole budget
    /// reached) and by the background thread (half of it).
    pub budget_by_a_change: u64,
    pub budget_in_background: u64,
}

impl CheckpointState {
    /// The file system's age in seconds (the checkpoint's elapsed_time, counted on).
    pub fn elapsed(&self) -> u64 {
        self.head.elapsed_time.get() + self.mounted_at.elapsed().as_secs()
    }

    /// What a node written now carries in its footer's cp_ver: the last checkpoint's version,
    /// with its CRC in the high half when that checkpoint has CRC_RECOVERY (as Linux writes
    /// it; roll-forward recovery takes only nodes whose cp_ver matches).
    pub fn footer_version(&self) -> u64 {
        chain_version(self.version, self.crc, self.head.ckpt_flags.get())
    }
}

/// The cp_ver that nodes of the roll-forward chain after a checkpoint carry.
pub(crate) fn chain_version(version: u64, crc: u32, cp_flags: u32) -> u64 {
    if cp_flags & flags::CRC_RECOVERY != 0 {
        (version & 0xFFFF_FFFF) | (u64::from(crc) << 32)
    } else {
        version
    }
}

/// What an fsync must know of the changes since the last checkpoint.
#[derive(Default)]
pub(crate) struct FsyncState {
    /// Inodes made since the last checkpoint: their directory entry is in no checkpoint, so
    /// the first fsync that writes them marks them for dentry recovery (DENT).
    pub born: HashSet<u32>,
    /// Inodes written by an fsync since the last checkpoint (their DENT mark is out).
    pub fsynced: HashSet<u32>,
    /// Inodes whose next fsync needs a checkpoint: renamed, linked or unlinked, truncated or
    /// punched, xattrs changed since the last checkpoint (what roll-forward cannot replay).
    pub needs_cp: HashSet<u32>,
    pub stats: FsyncStats,
    /// Data blocks were written since the last device flush (an fsync flushes them before
    /// its nodes, so that a replayed node never points at data that did not land).
    pub data_since_flush: bool,
    /// Inodes with a block pointer changed (a block written out of place, allocated, moved by
    /// the cleaner, freed) since the last checkpoint was prepared, and since the one before
    /// it when that one has not landed yet (`relinked_pending`). Their blocks are never
    /// rewritten in place: a crash would then show the new bytes in place beside pointers
    /// from before earlier changes, a state the file never had (or, for a block the cleaner
    /// moved, lose an fsync'd rewrite, since the cleaner's node changes wait for the
    /// checkpoint).
    pub relinked: HashSet<u32>,
    pub relinked_pending: HashSet<u32>,
}

impl FsyncState {
    /// A checkpoint covers every change so far: nothing is pending for fsync any more.
    pub fn checkpointed(&mut self) {
        self.born.clear();
        self.fsynced.clear();
        self.needs_cp.clear();
        // The flush before the checkpoint's trailing block covers every data block landed.
        self.data_since_flush = false;
        let now = std::mem::take(&mut self.relinked);
        self.relinked_pending.extend(now);
    }

    /// The checkpoint prepared last has landed: the pointers it holds are durable.
    pub fn checkpoint_landed(&mut self) {
        self.relinked_pending.clear();
    }

    /// Whether `ino`'s blocks may be rewritten in place: none of its block pointers changed
    /// since the last durable checkpoint.
    pub fn pointers_durable(&self, ino: u32) -> bool {
        !self.relinked.contains(&ino) && !self.relinked_pending.contains(&ino)
    }
}

/// A checkpoint prepared under the write lock whose blocks are (being) written without it,
/// and what becomes true once it is durable.
pub(crate) struct Pending {
    pub io: Arc<IoDone>,
    pub(crate) version: u64,
    pub(crate) pack: u8,
    pub(crate) head: RawCheckpoint,
    pub(crate) crc: u32,
    /// The change sequence number when it was prepared: every change up to it is in it.
    pub(crate) start_seq: u64,
    /// Space prefree (or reserved) when it was prepared: free once it is durable. Those
    /// emptied since stay held back until the next one.
    pub(crate) prefree: BTreeSet<u32>,
    pub(crate) reserved: BTreeSet<u32>,
    /// The dirty nodes it writes: they stay dirty (where readers find them) until it lands.
    pub(crate) nodes: BTreeMap<u32, (Arc<Block>, Log)>,
}

/// The outcome of a checkpoint's writes, for whoever waits on it.
#[derive(Default)]
pub(crate) struct IoDone {
    result: Mutex<Option<std::result::Result<(), String>>>,
    cv: Condvar,
    /// How long the writes took, in microseconds (set before `finish`).
    pub took_us: std::sync::atomic::AtomicU64,
}

impl IoDone {
    pub(crate) fn finish(&self, r: std::result::Result<(), String>) {
        let mut g = self.result.lock().unwrap_or_else(|p| p.into_inner());
        *g = Some(r);
        drop(g);
        self.cv.notify_all();
    }

    /// Waits until the writes are done; their outcome.
    pub fn wait(&self) -> std::result::Result<(), String> {
        let mut g = self.result.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some(r) = &*g {
                return r.clone();
            }
            g = self.cv.wait(g).unwrap_or_else(|p| p.into_inner());
        }
    }
}

/// How fsyncs were served since mount.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct FsyncStats {
    /// fsync and fdatasync calls (files and directories).
    pub requests: u64,
    /// Served by writing the file's direct nodes to the roll-forward chain.
    pub by_node_chain: u64,
    /// Served by a checkpoint (a directory, hard links, a rename... or fsync_mode=strict).
    pub by_checkpoint: u64,
    /// Node blocks written to the roll-forward chain.
    pub chain_blocks: u64,
    /// Checkpoint requests that a checkpoint started after them served (merging).
    pub merged: u64,
}

/// What recovery did at mount.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct RecoveryStats {
    /// Node blocks of the chain after the last checkpoint.
    pub chain_blocks: u64,
    /// Inodes whose fsync'd state was replayed.
    pub inodes: u64,
    /// Directory entries made for fsync'd new files.
    pub dentries: u64,
    /// Block pointers replayed.
    pub addresses: u64,
}
