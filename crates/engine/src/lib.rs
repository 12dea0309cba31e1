//! The uf2fs engine: an F2FS volume on a [`BlockDevice`](uf2fs_device::BlockDevice), used
//! through [`Fs`].
//!
//! Mounting picks a valid superblock copy and the newer valid checkpoint pack, reads the
//! current-segment summaries for the NAT and SIT journals, and from then on answers lookups
//! through the NAT (journal first, then the current copy of each NAT block). Node blocks are
//! read on demand and their footers checked against what the walk expects; inodes are checked
//! by the format layer before use. The SIT is read only when asked for (`info`), so that a
//! damaged SIT does not keep files from being read.

mod cache;
mod change;
mod check;
mod data;
mod devices;
mod durability;
mod error;
mod fs;
mod gc;
mod handoff;
mod mkfs;
mod mount;
mod node;
mod ns;
pub mod space;
mod state;
mod status;
pub mod victim;
mod vol;

pub use cache::{DEFAULT_CACHE_BYTES, MIN_CACHE_BYTES};
pub use change::ORPHAN_RELEASE_WAIT;
pub use check::CheckReport;
pub use error::{Error, Result};
pub use fs::{type_name, Attr, DirEntry, StatFs, WalkItem};
pub use gc::{GcStats, DEFAULT_GC_BATCH};
pub use handoff::Waiter;
pub use mkfs::{mkfs, mkfs_devices, parse_features, MkfsDevice, MkfsOptions, MKFS_FEATURES};
pub use mount::{DeviceInfo, MountInfo, VolumeInfo};
pub use node::PREFETCH_BUFFER_BYTES;
pub use ns::dentry_cache::DentryCacheStats;
pub use ns::edit::now as wall_clock;
pub use ns::fallocate::{FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE, FALLOC_FL_ZERO_RANGE};
pub use ns::rename::{RENAME_EXCHANGE, RENAME_NOREPLACE};
pub use ns::write::{fs_flags, NewInode};
pub use ns::xattr_write::{XATTR_CREATE, XATTR_REPLACE};
pub use space::sit::SegmentUsage;
pub use space::DataTemp;
pub use space::Policy as GcPolicy;
pub use state::CompressStats;
pub use status::{CheckpointStats, IoStats, Status, WriteBehindStats};
pub use uf2fs_format::geometry::Geometry;
pub use vol::{
    AllocMode, BackgroundGc, CompressOptions, Extensions, Extent, Fs, FsyncMode, IpuPolicy, Options,
};

pub use uf2fs_device;
pub use uf2fs_format::compress;
pub use uf2fs_format::fscrypt;
pub use uf2fs_format::inode::iflags;
pub use uf2fs_format::inode::{FileType, Inode, Time};
pub use uf2fs_format::superblock::feature;
pub use uf2fs_format::{CorruptKind, Incompatible};
pub use uf2fs_format::{COMPRESS_ADDR, NEW_ADDR, NULL_ADDR};
