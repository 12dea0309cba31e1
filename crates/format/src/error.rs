//! Error kinds of the format layer: what is corrupt and where, or which feature we lack.

use std::fmt;

/// A feature or layout that uf2fs does not support (yet), named so the user knows which.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Incompatible {
    #[error("unknown superblock feature bits {0:#x}")]
    UnknownFeatures(u32),
    #[error("unknown filename encoding {0} in the superblock (Linux 6.1 knows only 1, utf8-12.1)")]
    UnknownEncoding(u16),
    #[error("directory {ino} is casefolded but the image has no casefold feature")]
    CasefoldWithoutFeature { ino: u32 },
    #[error("{0}")]
    Other(&'static str),
}

/// The structure a corruption was found in and where it is. Every variant names a place
/// (block address, segment, nid, inode) so that a log line can be acted upon.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CorruptKind {
    #[error("superblock {copy}: bad magic {magic:#x}")]
    SuperblockMagic { copy: u8, magic: u32 },
    #[error("superblock {copy}: bad checksum")]
    SuperblockChecksum { copy: u8 },
    #[error("superblock {copy}: field {field} has impossible value {value}")]
    SuperblockField {
        copy: u8,
        field: &'static str,
        value: u64,
    },
    /// An entry of the multi-device table (`devs[index]`) that cannot describe a device.
    #[error("superblock {copy}: device table entry {index}: {why}")]
    SuperblockDevice { copy: u8, index: u8, why: String },
    #[error("no valid superblock (copy 0: {first}; copy 1: {second})")]
    NoSuperblock {
        first: Box<CorruptKind>,
        second: Box<CorruptKind>,
    },
    #[error("checkpoint block at {blkaddr}: bad checksum")]
    CheckpointChecksum { blkaddr: u64 },
    #[error("checkpoint block at {blkaddr}: field {field} has impossible value {value}")]
    CheckpointField {
        blkaddr: u64,
        field: &'static str,
        value: u64,
    },
    #[error(
        "checkpoint block at {blkaddr}: version bitmaps of {sit} (SIT) and {nat} (NAT) bytes do not fit the CP block and {payload} payload block(s){how}"
    )]
    CheckpointBitmaps {
        blkaddr: u64,
        sit: u32,
        nat: u32,
        payload: u32,
        how: &'static str,
    },
    #[error(
        "checkpoint pack at {blkaddr}: trailing copy has version {trailing:#x}, header {header:#x}"
    )]
    CheckpointVersionMismatch {
        blkaddr: u64,
        header: u64,
        trailing: u64,
    },
    #[error("no valid checkpoint pack (pack 1: {first}; pack 2: {second})")]
    NoCheckpoint {
        first: Box<CorruptKind>,
        second: Box<CorruptKind>,
    },
    #[error("NAT entry of nid {nid}: block address {blkaddr} is outside the main area")]
    NatAddress { nid: u32, blkaddr: u32 },
    #[error("nid {nid} is out of range (max {max})")]
    NidRange { nid: u32, max: u32 },
    #[error("NAT journal: {0} entries")]
    NatJournalCount(u16),
    #[error("SIT journal: {0} entries")]
    SitJournalCount(u16),
    #[error("SIT entry of segment {segno}: {why}")]
    SitEntry { segno: u32, why: &'static str },
    #[error("summary of current segment {which}: {why}")]
    Summary {
        which: &'static str,
        why: &'static str,
    },
    #[error("node block {blkaddr} (nid {nid}): footer says {what} {found}, expected {expected}")]
    NodeFooter {
        nid: u32,
        blkaddr: u32,
        what: &'static str,
        found: u32,
        expected: u32,
    },
    #[error("inode {ino}: field {field} has impossible value {value}")]
    InodeField {
        ino: u32,
        field: &'static str,
        value: u64,
    },
    #[error("inode {ino}: bad inode checksum")]
    InodeChecksum { ino: u32 },
    #[error("inode {ino}: block address {blkaddr} at file block {fblk} is outside the main area")]
    DataAddress { ino: u32, fblk: u64, blkaddr: u32 },
    #[error("directory {ino}, block {block}: {why} at slot {slot}")]
    Dentry {
        ino: u32,
        block: u64,
        slot: usize,
        why: &'static str,
    },
    #[error("encrypted directory {ino}: entry for inode {child}: {why}")]
    EncryptedName {
        ino: u32,
        child: u32,
        why: crate::fscrypt::NameError,
    },
    #[error("encrypted inode {ino}: {why}")]
    EncryptionContext {
        ino: u32,
        why: crate::fscrypt::ContextError,
    },
    #[error("encrypted symlink {ino}: {why}")]
    EncryptedSymlink {
        ino: u32,
        why: crate::fscrypt::SymlinkError,
    },
    #[error("directory {ino} contains itself or an ancestor (through entry ino {child})")]
    DirectoryCycle { ino: u32, child: u32 },
    #[error("inode {ino}: xattrs: {why}")]
    Xattr { ino: u32, why: &'static str },
    #[error("inode {ino}, cluster {cluster}: {why}")]
    CompressedCluster {
        ino: u32,
        cluster: u64,
        why: &'static str,
    },
    #[error(
        "inode {ino}, cluster {cluster}: checksum of the compressed data is {computed:#x}, the cluster says {stored:#x}"
    )]
    ClusterChecksum {
        ino: u32,
        cluster: u64,
        stored: u32,
        computed: u32,
    },
    #[error("block {blkaddr}: {why}")]
    Block { blkaddr: u64, why: &'static str },
    #[error("quota file (inode {ino}): {why}")]
    QuotaFile { ino: u32, why: String },
    #[error("roll-forward chain, block {blkaddr}: {why}")]
    Recovery { blkaddr: u32, why: &'static str },
}

/// Either kind; what the format layer's constructors return.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FormatError {
    Corrupt(CorruptKind),
    Incompatible(Incompatible),
}

impl fmt::Display for FormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FormatError::Corrupt(c) => write!(f, "corrupt image: {c}"),
            FormatError::Incompatible(i) => write!(f, "not supported: {i}"),
        }
    }
}

impl std::error::Error for FormatError {}

impl From<CorruptKind> for FormatError {
    fn from(c: CorruptKind) -> Self {
        FormatError::Corrupt(c)
    }
}

impl From<Incompatible> for FormatError {
    fn from(i: Incompatible) -> Self {
        FormatError::Incompatible(i)
    }
}
