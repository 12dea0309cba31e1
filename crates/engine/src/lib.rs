//! The uf2fs engine: an F2FS volume on a [`BlockDevice`](uf2fs_device::BlockDevice), used
//! through [`Fs`].
//!
//! Mounting picks a valid superblock copy and the newer valid checkpoint pack, reads the
//! current-segment summaries for the NAT and SIT journals, and from then on answers lookups
//! through the NAT (journal first, then the current copy of each NAT block). Node blocks are
//! read on demand and their footers checked against what the walk expects; inodes are checked
//! by the format layer before use. The SIT is read only when asked for (`info`), so that a
//! damaged SIT does not keep files from being read.

mod check;
mod checkpoint;
mod delete;
mod dir;
mod error;
mod fallocate;
mod file;
mod fs;
mod fsync;
mod inflight;
mod mkfs;
mod mount;
mod nat;
mod node;
mod recovery;
mod rename;
mod segment;
mod sit;
mod status;
pub mod victim;
mod write;
mod xattr;
mod xattr_write;

pub use check::CheckReport;
pub use error::{Error, Result};
pub use fallocate::{FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE, FALLOC_FL_ZERO_RANGE};
pub use fs::{type_name, Attr, DirEntry, Extent, Fs, FsyncMode, Options, StatFs, WalkItem};
pub use mkfs::{mkfs, parse_features, MkfsOptions, MKFS_FEATURES};
pub use mount::{MountInfo, VolumeInfo};
pub use rename::{RENAME_EXCHANGE, RENAME_NOREPLACE};
pub use sit::SegmentUsage;
pub use status::{CheckpointStats, GcStats, IoStats, Status};
pub use uf2fs_format::geometry::Geometry;
pub use write::NewInode;
pub use xattr_write::{XATTR_CREATE, XATTR_REPLACE};

pub use uf2fs_device;
pub use uf2fs_format::inode::{FileType, Inode, Time};
pub use uf2fs_format::{CorruptKind, Incompatible};
