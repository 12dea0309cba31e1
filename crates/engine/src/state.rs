//! What the write lock guards: the state of every part that changes with the image, each
//! owned by its part: space (segments, logs, SIT), durability (checkpoints, fsync), orphans;
//! plus the volume's block and node counts, the running change's data blocks and the
//! volume's failure mark.

use crate::durability::state::{CheckpointState, FsyncState};
use crate::space::Space;
use foldhash::HashMap;

/// The writable side of a mounted volume: everything a checkpoint records.
pub(crate) struct WriteState {
    pub segs: Space,
    pub cp: CheckpointState,
    pub sync: FsyncState,
    pub orphans: Orphans,
    pub counts: Counts,
    pub gc: crate::gc::state::GcState,
    /// What compressed writes did since the mount (Linux's `compr_*` counters).
    pub compress: CompressStats,
    /// Set when a change failed half-way: the in-memory state may not be consistent, so no
    /// further change or checkpoint is made; the image stays at its last checkpoint.
    pub failed: Option<String>,
    /// Data blocks of the running change, linked but not yet written (see `data.rs`).
    pub deferred: Vec<crate::data::Batch>,
    /// The modification and change times a caller last gave each inode (a FUSE kernel that
    /// keeps a regular file's times sends them with its SETATTRs), for the few thousand
    /// inodes changed last: a flush of kept times older in both than these was overtaken on
    /// its way (`Fs::set_kept_times`). Times the engine stamped itself are not here.
    pub given_times: HashMap<u32, GivenTimes>,
}

/// A modification and a change time a caller gave, as `(seconds, nanoseconds)`.
pub(crate) type GivenTimes = (Option<(i64, u32)>, Option<(i64, u32)>);

/// How many inodes' given times are kept (a record matters only while a flush sent before
/// it may still be on its way).
pub(crate) const GIVEN_TIMES: usize = 4096;

/// Compressed writes since the mount, counted as Linux's sysfs `compr_written_block`,
/// `compr_saved_block` and `compr_new_inode` count them.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct CompressStats {
    /// Clusters stored compressed.
    pub clusters: u64,
    /// Blocks those clusters took (compressed data).
    pub written_blocks: u64,
    /// Blocks they saved (cluster size less compressed blocks).
    pub saved_blocks: u64,
    /// Inodes made compressed (new files and directories, `chattr +c`).
    pub new_inodes: u64,
}

/// The checkpoint's counters of what is in use.
pub(crate) struct Counts {
    /// Valid blocks, data and node (the checkpoint's valid_block_count).
    pub valid_blocks: u64,
    pub valid_nodes: u32,
    pub valid_inodes: u32,
}

/// Inodes unlinked while open: held until released, then freed; listed in each checkpoint.
#[derive(Default)]
pub(crate) struct Orphans {
    /// Orphan inodes (no link left, still open), in the order they became orphans.
    pub list: Vec<u32>,
    /// Inodes held open (counts), whose last unlink makes them orphans instead of freeing.
    pub held: HashMap<u32, u32>,
}
