//! The inode node block: attributes, the extra-attribute area (which overlays the front of
//! `i_addr`), block addresses, inline data / inline dentries / inline xattrs, and the five
//! i_nid slots. [`Inode::parse`] checks every field the way Linux 6.1 does on iget (mode,
//! extra size, inline xattr size, sizes, depth) and the inode checksum.

use crate::compress::{
    Algorithm, Compression, COMPRESS_CHKSUM, COMPRESS_LEVEL_OFFSET, MAX_LOG_CLUSTER_SIZE,
    MIN_LOG_CLUSTER_SIZE,
};
use crate::crc::f2fs_crc32;
use crate::node::{max_file_blocks, Footer, DEF_ADDRS_PER_INODE, FOOTER_OFFSET, NIDS_PER_INODE};
use crate::superblock::{feature, Superblock};
use crate::{le16, le32, le64, CorruptKind, FormatError, BLOCK_SIZE};
use zerocopy::little_endian::{U16, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// `i_inline` flags.
pub mod inline_flags {
    pub const INLINE_XATTR: u8 = 0x01;
    pub const INLINE_DATA: u8 = 0x02;
    pub const INLINE_DENTRY: u8 = 0x04;
    pub const DATA_EXIST: u8 = 0x08;
    pub const INLINE_DOTS: u8 = 0x10;
    pub const EXTRA_ATTR: u8 = 0x20;
    pub const PIN_FILE: u8 = 0x40;
    pub const COMPRESS_RELEASED: u8 = 0x80;
}

/// `i_advise` bits.
pub mod advise {
    pub const COLD: u8 = 0x01;
    pub const LOST_PINO: u8 = 0x02;
    pub const ENCRYPT: u8 = 0x04;
    pub const ENC_NAME: u8 = 0x08;
    pub const KEEP_SIZE: u8 = 0x10;
    pub const HOT: u8 = 0x20;
    pub const VERITY: u8 = 0x40;
}

/// `i_flags` bits that matter to the reader.
pub mod iflags {
    pub const COMPR: u32 = 0x0000_0004;
    /// FS_NOCOMP_FL: a directory whose new files are never compressed.
    pub const NOCOMP: u32 = 0x0000_0400;
    pub const IMMUTABLE: u32 = 0x0000_0010;
    pub const APPEND: u32 = 0x0000_0020;
    pub const NODUMP: u32 = 0x0000_0040;
    pub const NOATIME: u32 = 0x0000_0080;
    pub const INDEX: u32 = 0x0000_1000;
    pub const PROJINHERIT: u32 = 0x2000_0000;
    pub const CASEFOLD: u32 = 0x4000_0000;
}

/// Size of the whole extra-attribute area as the kernel writes it.
pub const MAX_EXTRA_ISIZE: u16 = 36;
/// Default inline xattr area in words (200 bytes).
pub const DEFAULT_INLINE_XATTR_WORDS: u16 = 50;
/// Largest inline xattr area the kernel accepts, in words.
pub const MAX_INLINE_XATTR_WORDS: u16 = 903;
/// Byte offset of i_addr[0].
pub const I_ADDR_OFFSET: usize = 360;
/// Byte offset of i_nid[0].
pub const I_NID_OFFSET: usize = 4052;
pub const MAX_NAME_LEN: usize = 255;
/// Deepest hash level of a directory.
pub const MAX_DIR_HASH_DEPTH: u32 = 63;

#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
pub struct RawExtent {
    pub fofs: U32,
    pub blk_addr: U32,
    pub len: U32,
}

/// The inode body (bytes 0..4072 of the node block).
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub struct RawInode {
    pub i_mode: U16,
    pub i_advise: u8,
    pub i_inline: u8,
    pub i_uid: U32,
    pub i_gid: U32,
    pub i_links: U32,
    pub i_size: U64,
    pub i_blocks: U64,
    pub i_atime: U64,
    pub i_ctime: U64,
    pub i_mtime: U64,
    pub i_atime_nsec: U32,
    pub i_ctime_nsec: U32,
    pub i_mtime_nsec: U32,
    pub i_generation: U32,
    pub i_current_depth: U32,
    pub i_xattr_nid: U32,
    pub i_flags: U32,
    pub i_pino: U32,
    pub i_namelen: U32,
    pub i_name: [u8; MAX_NAME_LEN],
    pub i_dir_level: u8,
    pub i_ext: RawExtent,
    pub i_addr: [U32; DEF_ADDRS_PER_INODE],
    pub i_nid: [U32; NIDS_PER_INODE],
}
const _: () = assert!(core::mem::size_of::<RawInode>() == FOOTER_OFFSET);

/// The file type bits of a mode.
pub mod mode {
    pub const S_IFMT: u16 = 0o170000;
    pub const S_IFSOCK: u16 = 0o140000;
    pub const S_IFLNK: u16 = 0o120000;
    pub const S_IFREG: u16 = 0o100000;
    pub const S_IFBLK: u16 = 0o060000;
    pub const S_IFDIR: u16 = 0o040000;
    pub const S_IFCHR: u16 = 0o020000;
    pub const S_IFIFO: u16 = 0o010000;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FileType {
    Regular,
    Directory,
    Symlink,
    CharDevice,
    BlockDevice,
    Fifo,
    Socket,
}

impl FileType {
    pub fn from_mode(m: u16) -> Option<FileType> {
        Some(match m & mode::S_IFMT {
            mode::S_IFREG => FileType::Regular,
            mode::S_IFDIR => FileType::Directory,
            mode::S_IFLNK => FileType::Symlink,
            mode::S_IFCHR => FileType::CharDevice,
            mode::S_IFBLK => FileType::BlockDevice,
            mode::S_IFIFO => FileType::Fifo,
            mode::S_IFSOCK => FileType::Socket,
            _ => return None,
        })
    }

    /// The dentry `file_type` code.
    pub fn dentry_code(self) -> u8 {
        match self {
            FileType::Regular => 1,
            FileType::Directory => 2,
            FileType::CharDevice => 3,
            FileType::BlockDevice => 4,
            FileType::Fifo => 5,
            FileType::Socket => 6,
            FileType::Symlink => 7,
        }
    }

    pub fn from_dentry_code(c: u8) -> Option<FileType> {
        Some(match c {
            1 => FileType::Regular,
            2 => FileType::Directory,
            3 => FileType::CharDevice,
            4 => FileType::BlockDevice,
            5 => FileType::Fifo,
            6 => FileType::Socket,
            7 => FileType::Symlink,
            _ => return None,
        })
    }
}

/// A timestamp: seconds since the epoch and nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Time {
    pub sec: i64,
    pub nsec: u32,
}

/// A checked inode. The node block is kept whole for address and inline-area access.
#[derive(Clone)]
pub struct Inode {
    pub ino: u32,
    pub mode: u16,
    pub file_type: FileType,
    pub advise: u8,
    pub inline: u8,
    pub uid: u32,
    pub gid: u32,
    pub links: u32,
    pub size: u64,
    /// In 4 KiB blocks, including the inode and its other node blocks.
    pub blocks: u64,
    pub atime: Time,
    pub ctime: Time,
    pub mtime: Time,
    pub crtime: Option<Time>,
    pub generation: u32,
    pub current_depth: u32,
    pub xattr_nid: u32,
    pub flags: u32,
    pub pino: u32,
    pub name: Vec<u8>,
    pub dir_level: u8,
    /// Bytes of the extra area (0 without EXTRA_ATTR).
    pub extra_isize: u16,
    /// Words of the inline xattr area at the end of i_addr.
    pub inline_xattr_words: u16,
    pub projid: Option<u32>,
    pub checksum: Option<u32>,
    /// The compression fields of a compressed regular file (None for any other inode).
    pub compression: Option<Compression>,
    pub footer: Footer,
    /// Shared, not copied: a cache that holds the node block holds it once.
    block: std::sync::Arc<[u8; BLOCK_SIZE]>,
}

fn u32_at(block: &[u8; BLOCK_SIZE], at: usize) -> u32 {
    le32(block, at).unwrap_or(0)
}

/// The inode checksum seed: CRC of the uuid from 0xFFFFFFFF.
pub fn checksum_seed(uuid: &[u8; 16]) -> u32 {
    f2fs_crc32(0xFFFF_FFFF, uuid)
}

/// Computes the inode checksum of a node block (the stored checksum word counts as zero).
pub fn compute_checksum(seed: u32, block: &[u8; BLOCK_SIZE]) -> u32 {
    let footer = Footer::of(block);
    let generation = u32_at(block, 68);
    let at = I_ADDR_OFFSET + 8;
    let mut crc = f2fs_crc32(seed, &footer.ino.to_le_bytes());
    crc = f2fs_crc32(crc, &generation.to_le_bytes());
    crc = f2fs_crc32(crc, block.get(..at).unwrap_or(&[]));
    crc = f2fs_crc32(crc, &[0u8; 4]);
    f2fs_crc32(crc, block.get(at + 4..).unwrap_or(&[]))
}

/// The compression fields, as Linux 6.1 reads them: only on a volume with the compression
/// feature, for an inode with FS_COMPR_FL and an extra area that holds them. Checked as the
/// kernel's inode sanity check does (for every file type: directories keep them for the files
/// they create); returned for regular files only by the caller.
fn parse_compression(
    block: &[u8; BLOCK_SIZE],
    ino: u32,
    sb: &Superblock,
    raw: &RawInode,
    fits: bool,
) -> Result<Option<Compression>, FormatError> {
    if !sb.has(feature::COMPRESSION) || raw.i_flags.get() & iflags::COMPR == 0 || !fits {
        return Ok(None);
    }
    let bad = |field: &'static str, value: u64| CorruptKind::InodeField { ino, field, value };
    let at = I_ADDR_OFFSET + 24;
    let compr_blocks = le64(block, at).unwrap_or(0);
    let alg = block.get(at + 8).copied().unwrap_or(0);
    let log = block.get(at + 9).copied().unwrap_or(0);
    let flag = le16(block, at + 10).unwrap_or(0);
    let algorithm = Algorithm::from_raw(alg).ok_or(bad("i_compress_algorithm", alg.into()))?;
    if compr_blocks > raw.i_blocks.get().saturating_sub(1) {
        return Err(bad("i_compr_blocks", compr_blocks).into());
    }
    if !(MIN_LOG_CLUSTER_SIZE..=MAX_LOG_CLUSTER_SIZE).contains(&log) {
        return Err(bad("i_log_cluster_size", log.into()).into());
    }
    Ok(Some(Compression {
        algorithm,
        log_cluster_size: log,
        checksum: flag & COMPRESS_CHKSUM != 0,
        level: (flag >> COMPRESS_LEVEL_OFFSET) as u8,
        compr_blocks,
        released: raw.i_inline & inline_flags::COMPRESS_RELEASED != 0,
    }))
}

impl Inode {
    /// Checks the inode in node block `block`, which the NAT says is `ino`.
    pub fn parse(
        block: &[u8; BLOCK_SIZE],
        ino: u32,
        sb: &Superblock,
    ) -> Result<Inode, FormatError> {
        Inode::parse_shared(std::sync::Arc::new(*block), ino, sb)
    }

    /// [`Inode::parse`] of a block the caller already shares (a node cache's copy): the
    /// inode keeps it without a copy.
    pub fn parse_shared(
        shared: std::sync::Arc<[u8; BLOCK_SIZE]>,
        ino: u32,
        sb: &Superblock,
    ) -> Result<Inode, FormatError> {
        let block: &[u8; BLOCK_SIZE] = &shared;
        let bad = |field: &'static str, value: u64| CorruptKind::InodeField { ino, field, value };
        let raw = RawInode::ref_from_bytes(block.get(..FOOTER_OFFSET).unwrap_or(&[]))
            .map_err(|_| bad("length", 0))?;
        let footer = Footer::of(block);
        let m = raw.i_mode.get();
        let file_type = FileType::from_mode(m).ok_or(bad("i_mode", m.into()))?;
        let inline = raw.i_inline;
        let has_extra = inline & inline_flags::EXTRA_ATTR != 0;
        let extra_isize = if has_extra {
            if !sb.has(feature::EXTRA_ATTR) {
                return Err(bad("i_inline (extra_attr without the feature)", inline.into()).into());
            }
            let e = le16(block, I_ADDR_OFFSET).unwrap_or(0);
            if !e.is_multiple_of(4) || !(4..=MAX_EXTRA_ISIZE).contains(&e) {
                return Err(bad("i_extra_isize", e.into()).into());
            }
            e
        } else {
            0
        };
        let fits = |end: u16| has_extra && extra_isize >= end;
        let inline_xattr_words = if sb.has(feature::FLEXIBLE_INLINE_XATTR) && fits(4) {
            let w = le16(block, I_ADDR_OFFSET + 2).unwrap_or(0);
            if w > MAX_INLINE_XATTR_WORDS {
                return Err(bad("i_inline_xattr_size", w.into()).into());
            }
            // The kernel refuses INLINE_XATTR with size 0; sload.f2fs 1.15 writes exactly that
            // (and lays data out as if the area were empty), so we read it as sload meant it.
            w
        } else if inline & (inline_flags::INLINE_XATTR | inline_flags::INLINE_DENTRY) != 0 {
            DEFAULT_INLINE_XATTR_WORDS
        } else {
            0
        };
        if usize::from(extra_isize / 4) + usize::from(inline_xattr_words) + 1 > DEF_ADDRS_PER_INODE
        {
            return Err(bad("i_inline_xattr_size", inline_xattr_words.into()).into());
        }
        let time = |s: &U64, ns: &U32, field| -> Result<Time, CorruptKind> {
            let nsec = ns.get();
            if nsec >= 1_000_000_000 {
                return Err(bad(field, nsec.into()));
            }
            Ok(Time {
                sec: s.get() as i64,
                nsec,
            })
        };
        let atime = time(&raw.i_atime, &raw.i_atime_nsec, "i_atime_nsec")?;
        let ctime = time(&raw.i_ctime, &raw.i_ctime_nsec, "i_ctime_nsec")?;
        let mtime = time(&raw.i_mtime, &raw.i_mtime_nsec, "i_mtime_nsec")?;
        let crtime = if sb.has(feature::INODE_CRTIME) && fits(24) {
            let sec = le64(block, I_ADDR_OFFSET + 12).unwrap_or(0);
            let nsec = u32_at(block, I_ADDR_OFFSET + 20);
            if nsec >= 1_000_000_000 {
                return Err(bad("i_crtime_nsec", nsec.into()).into());
            }
            Some(Time {
                sec: sec as i64,
                nsec,
            })
        } else {
            None
        };
        let projid =
            (sb.has(feature::PRJQUOTA) && fits(8)).then(|| u32_at(block, I_ADDR_OFFSET + 4));
        let checksum =
            (sb.has(feature::INODE_CHKSUM) && fits(12)).then(|| u32_at(block, I_ADDR_OFFSET + 8));
        if let Some(stored) = checksum {
            if compute_checksum(checksum_seed(&sb.uuid()), block) != stored {
                return Err(CorruptKind::InodeChecksum { ino }.into());
            }
        }
        let compression = parse_compression(block, ino, sb, raw, has_extra && fits(36))?
            .filter(|_| file_type == FileType::Regular);
        let namelen = raw.i_namelen.get() as usize;
        if namelen > MAX_NAME_LEN {
            return Err(bad("i_namelen", namelen as u64).into());
        }
        let inode = Inode {
            ino,
            mode: m,
            file_type,
            advise: raw.i_advise,
            inline,
            uid: raw.i_uid.get(),
            gid: raw.i_gid.get(),
            links: raw.i_links.get(),
            size: raw.i_size.get(),
            blocks: raw.i_blocks.get(),
            atime,
            ctime,
            mtime,
            crtime,
            generation: raw.i_generation.get(),
            current_depth: raw.i_current_depth.get(),
            xattr_nid: raw.i_xattr_nid.get(),
            flags: raw.i_flags.get(),
            pino: raw.i_pino.get(),
            name: raw.i_name.get(..namelen).unwrap_or(&[]).to_vec(),
            dir_level: raw.i_dir_level,
            extra_isize,
            inline_xattr_words,
            projid,
            checksum,
            compression,
            footer,
            block: shared.clone(),
        };
        inode.check_sizes()?;
        Ok(inode)
    }

    fn check_sizes(&self) -> Result<(), FormatError> {
        let bad = |field: &'static str, value: u64| CorruptKind::InodeField {
            ino: self.ino,
            field,
            value,
        };
        let max = max_file_blocks(self.addr_slots() as u64).saturating_mul(BLOCK_SIZE as u64);
        if self.size > max {
            return Err(bad("i_size", self.size).into());
        }
        if self.has_inline_data() && self.size > self.inline_capacity() as u64 {
            return Err(bad("i_size (inline)", self.size).into());
        }
        if self.file_type == FileType::Directory {
            if self.has_inline_dentry() && self.has_inline_data() {
                return Err(bad("i_inline", self.inline.into()).into());
            }
            if self.current_depth > MAX_DIR_HASH_DEPTH {
                return Err(bad("i_current_depth", self.current_depth.into()).into());
            }
            if u32::from(self.dir_level) > MAX_DIR_HASH_DEPTH {
                return Err(bad("i_dir_level", self.dir_level.into()).into());
            }
        }
        if self.file_type != FileType::Directory && self.has_inline_dentry() {
            return Err(bad(
                "i_inline (inline dentry on a non-directory)",
                self.inline.into(),
            )
            .into());
        }
        Ok(())
    }

    pub fn has_inline_data(&self) -> bool {
        self.inline & inline_flags::INLINE_DATA != 0
    }
    pub fn has_inline_dentry(&self) -> bool {
        self.inline & inline_flags::INLINE_DENTRY != 0
    }
    pub fn has_inline_xattr(&self) -> bool {
        self.inline & inline_flags::INLINE_XATTR != 0
    }
    pub fn is_encrypted(&self) -> bool {
        self.advise & advise::ENCRYPT != 0
    }
    pub fn is_compressed(&self) -> bool {
        self.flags & iflags::COMPR != 0
    }
    pub fn is_casefolded(&self) -> bool {
        self.flags & iflags::CASEFOLD != 0
    }

    fn extra_words(&self) -> usize {
        usize::from(self.extra_isize / 4)
    }

    /// Usable data address slots in the inode.
    pub fn addr_slots(&self) -> usize {
        DEF_ADDRS_PER_INODE - self.extra_words() - usize::from(self.inline_xattr_words)
    }

    /// File blocks mapped by the inode's own slots: all of [`Inode::addr_slots`], but for a
    /// compressed file only whole clusters (Linux aligns the count down to the cluster size).
    pub fn addrs_in_inode(&self) -> usize {
        match &self.compression {
            Some(c) => self.addr_slots() & !(c.cluster_blocks() as usize - 1),
            None => self.addr_slots(),
        }
    }

    /// File blocks mapped by one direct node: 1018, aligned down to the cluster size for a
    /// compressed file.
    pub fn addrs_per_dnode(&self) -> u64 {
        let n = crate::node::ADDRS_PER_BLOCK;
        match &self.compression {
            Some(c) => n & !(c.cluster_blocks() - 1),
            None => n,
        }
    }

    /// The most file blocks the inode's tree can map (Linux's `max_file_blocks` for it).
    pub fn max_blocks(&self) -> u64 {
        let (a, n) = (self.addrs_in_inode() as u64, self.addrs_per_dnode());
        let m = crate::node::NIDS_PER_BLOCK;
        a + 2 * n + 2 * n * m + n * m * m
    }

    /// Data address of file block `i` (`i < addr_slots()`).
    pub fn data_addr(&self, i: usize) -> u32 {
        if i >= self.addr_slots() {
            return 0;
        }
        u32_at(&self.block, I_ADDR_OFFSET + 4 * (self.extra_words() + i))
    }

    /// i_nid slot `i` (0..5).
    pub fn nid(&self, i: usize) -> u32 {
        if i >= NIDS_PER_INODE {
            return 0;
        }
        u32_at(&self.block, I_NID_OFFSET + 4 * i)
    }

    fn inline_start(&self) -> usize {
        I_ADDR_OFFSET + 4 * (self.extra_words() + 1)
    }

    /// Bytes available for inline data or inline dentries.
    pub fn inline_capacity(&self) -> usize {
        4 * (DEF_ADDRS_PER_INODE - self.extra_words() - usize::from(self.inline_xattr_words) - 1)
    }

    /// The inline data / inline dentry area.
    pub fn inline_area(&self) -> &[u8] {
        let s = self.inline_start();
        self.block.get(s..s + self.inline_capacity()).unwrap_or(&[])
    }

    /// The inline xattr area (empty unless INLINE_XATTR is set).
    pub fn inline_xattr_area(&self) -> &[u8] {
        if !self.has_inline_xattr() {
            return &[];
        }
        let words = usize::from(self.inline_xattr_words);
        self.block
            .get(I_NID_OFFSET - 4 * words..I_NID_OFFSET)
            .unwrap_or(&[])
    }

    /// The whole node block as read.
    pub fn block(&self) -> &[u8; BLOCK_SIZE] {
        &self.block
    }

    /// Device number of a character or block device inode, decoded as the kernel stores it
    /// (old 16-bit encoding in i_addr[extra], else the new 32-bit one in the next slot).
    pub fn rdev(&self) -> (u32, u32) {
        let old = self.data_addr(0);
        if old != 0 {
            return ((old >> 8) & 0xff, old & 0xff);
        }
        let new = self.data_addr(1);
        let major = (new & 0xfff00) >> 8;
        let minor = (new & 0xff) | ((new >> 12) & 0xfff00);
        (major, minor)
    }
}
