//! The superblock: two copies of a 3072-byte struct at byte 1024 of blocks 0 and 1.
//!
//! `RawSuperblock` is the layout; `Superblock::parse` validates one copy the way Linux 6.1
//! does at mount (magic, block and segment sizes, the contiguous chain of metadata areas,
//! section and zone counts, reserved inode numbers, the optional CRC) and derives the
//! geometry every other layer uses.
//!
//! A multi-device volume (`mkfs.f2fs -c`) lists its devices in `devs[]`: the path each had
//! when formatted (NUL-terminated within 64 bytes) and its size in segments. Block addresses
//! are global: device 0 holds `[0, segment0 + its segments)` (the superblocks and the
//! metadata, then the start of the main area), each next device the following
//! `segments × 512` blocks. `parse` checks the table and derives those ranges
//! ([`VolumeDevice`]).

use crate::casefold::Encoding;
use crate::crc::{f2fs_crc32, F2FS_SUPER_MAGIC};
use crate::{CorruptKind, FormatError, Incompatible, BLOCKS_PER_SEG, BLOCK_SIZE};
use zerocopy::little_endian::{U16, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// Byte offset of the superblock inside blocks 0 and 1.
pub const SB_OFFSET: usize = 1024;
/// Size of the superblock struct.
pub const SB_SIZE: usize = 3072;
/// Where the CRC sits when `sb_checksum` is on.
pub const SB_CHECKSUM_OFFSET: u32 = 3068;

/// Superblock feature bits.
pub mod feature {
    pub const ENCRYPT: u32 = 0x0001;
    pub const BLKZONED: u32 = 0x0002;
    pub const ATOMIC_WRITE: u32 = 0x0004;
    pub const EXTRA_ATTR: u32 = 0x0008;
    pub const PRJQUOTA: u32 = 0x0010;
    pub const INODE_CHKSUM: u32 = 0x0020;
    pub const FLEXIBLE_INLINE_XATTR: u32 = 0x0040;
    pub const QUOTA_INO: u32 = 0x0080;
    pub const INODE_CRTIME: u32 = 0x0100;
    pub const LOST_FOUND: u32 = 0x0200;
    pub const VERITY: u32 = 0x0400;
    pub const SB_CHKSUM: u32 = 0x0800;
    pub const CASEFOLD: u32 = 0x1000;
    pub const COMPRESSION: u32 = 0x2000;
    pub const RO: u32 = 0x4000;
    /// Every bit Linux 6.1 knows.
    pub const KNOWN: u32 = 0x7FFF;
    /// Features whose images uf2fs can write: the others change on-disk rules it does not
    /// keep yet (verity, zones, ro). With `encrypt` the plain part of the image
    /// is written as usual and encrypted files refuse changes that need the key.
    pub const KNOWN_WRITABLE: u32 = ENCRYPT
        | EXTRA_ATTR
        | INODE_CHKSUM
        | FLEXIBLE_INLINE_XATTR
        | INODE_CRTIME
        | LOST_FOUND
        | SB_CHKSUM
        | CASEFOLD
        | QUOTA_INO
        | PRJQUOTA
        | COMPRESSION;

    /// Names as mkfs.f2fs's `-O` spells them, in bit order.
    pub const NAMES: [(u32, &str); 15] = [
        (ENCRYPT, "encrypt"),
        (BLKZONED, "blkzoned"),
        (ATOMIC_WRITE, "atomic_write"),
        (EXTRA_ATTR, "extra_attr"),
        (PRJQUOTA, "project_quota"),
        (INODE_CHKSUM, "inode_checksum"),
        (FLEXIBLE_INLINE_XATTR, "flexible_inline_xattr"),
        (QUOTA_INO, "quota"),
        (INODE_CRTIME, "inode_crtime"),
        (LOST_FOUND, "lost_found"),
        (VERITY, "verity"),
        (SB_CHKSUM, "sb_checksum"),
        (CASEFOLD, "casefold"),
        (COMPRESSION, "compression"),
        (RO, "ro"),
    ];

    /// The names of the bits set in `bits`.
    pub fn names(bits: u32) -> Vec<&'static str> {
        NAMES
            .iter()
            .filter(|(b, _)| bits & b != 0)
            .map(|(_, n)| *n)
            .collect()
    }
}

/// Entries of the device table (`devs[]`).
pub const MAX_DEVICES: usize = 8;
/// Bytes of a device path in the table, its NUL included.
pub const DEVICE_PATH_LEN: usize = 64;

#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy)]
#[repr(C)]
pub struct RawDevice {
    pub path: [u8; 64],
    pub total_segments: U32,
}

#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone)]
#[repr(C)]
pub struct RawSuperblock {
    pub magic: U32,
    pub major_ver: U16,
    pub minor_ver: U16,
    pub log_sectorsize: U32,
    pub log_sectors_per_block: U32,
    pub log_blocksize: U32,
    pub log_blocks_per_seg: U32,
    pub segs_per_sec: U32,
    pub secs_per_zone: U32,
    pub checksum_offset: U32,
    pub block_count: U64,
    pub section_count: U32,
    pub segment_count: U32,
    pub segment_count_ckpt: U32,
    pub segment_count_sit: U32,
    pub segment_count_nat: U32,
    pub segment_count_ssa: U32,
    pub segment_count_main: U32,
    pub segment0_blkaddr: U32,
    pub cp_blkaddr: U32,
    pub sit_blkaddr: U32,
    pub nat_blkaddr: U32,
    pub ssa_blkaddr: U32,
    pub main_blkaddr: U32,
    pub root_ino: U32,
    pub node_ino: U32,
    pub meta_ino: U32,
    pub uuid: [u8; 16],
    pub volume_name: [U16; 512],
    pub extension_count: U32,
    pub extension_list: [[u8; 8]; 64],
    pub cp_payload: U32,
    pub version: [u8; 256],
    pub init_version: [u8; 256],
    pub feature: U32,
    pub encryption_level: u8,
    pub encrypt_pw_salt: [u8; 16],
    pub devs: [RawDevice; 8],
    pub qf_ino: [U32; 3],
    pub hot_ext_count: u8,
    pub s_encoding: U16,
    pub s_encoding_flags: U16,
    pub reserved: [u8; 306],
    pub crc: U32,
}

const _: () = assert!(core::mem::size_of::<RawSuperblock>() == SB_SIZE);

/// A superblock copy that passed every check, with its derived geometry.
#[derive(Clone)]
pub struct Superblock {
    raw: RawSuperblock,
    /// Which copy (0: block 0, 1: block 1) this came from.
    pub copy: u8,
    /// The device table, checked (empty on a single-device volume).
    devices: Vec<VolumeDevice>,
}

/// One device of a multi-device volume: the path it had when the volume was formatted and
/// the block addresses it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumeDevice {
    /// The path as recorded, without its NUL (bytes: a path need not be UTF-8).
    pub path: Vec<u8>,
    /// Whole segments of the volume on this device (device 0: those after segment0's
    /// offset).
    pub segments: u32,
    /// The first block address on this device.
    pub start: u64,
    /// One past the last block address on this device.
    pub end: u64,
}

impl VolumeDevice {
    /// Blocks of the volume on this device: the least size it must have.
    pub fn blocks(&self) -> u64 {
        self.end.saturating_sub(self.start)
    }

    /// The recorded path for messages (lossy where it is not UTF-8).
    pub fn path_lossy(&self) -> String {
        String::from_utf8_lossy(&self.path).into_owned()
    }
}

/// Geometry of the areas, in block addresses, all checked against each other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    pub block_count: u64,
    pub segment0: u32,
    pub cp: u32,
    pub sit: u32,
    pub nat: u32,
    pub ssa: u32,
    pub main: u32,
    /// Segments in the main area.
    pub main_segments: u32,
    pub segs_per_sec: u32,
    pub secs_per_zone: u32,
    pub sit_segments: u32,
    pub nat_segments: u32,
}

impl Layout {
    /// One past the last block of the main area.
    pub fn main_end(&self) -> u64 {
        u64::from(self.main) + u64::from(self.main_segments) * u64::from(BLOCKS_PER_SEG)
    }

    /// Whether `blkaddr` is a block of the main area.
    pub fn in_main(&self, blkaddr: u32) -> bool {
        blkaddr >= self.main && u64::from(blkaddr) < self.main_end()
    }

    /// Number of NAT blocks in one copy.
    pub fn nat_blocks(&self) -> u32 {
        self.nat_segments / 2 * BLOCKS_PER_SEG
    }

    /// Number of SIT blocks in one copy.
    pub fn sit_blocks(&self) -> u32 {
        self.sit_segments / 2 * BLOCKS_PER_SEG
    }

    /// One past the largest nid the NAT can hold.
    pub fn max_nid(&self) -> u32 {
        self.nat_blocks()
            .saturating_mul(crate::NAT_ENTRIES_PER_BLOCK as u32)
    }
}

fn field(copy: u8, field: &'static str, value: impl Into<u64>) -> CorruptKind {
    CorruptKind::SuperblockField {
        copy,
        field,
        value: value.into(),
    }
}

impl Superblock {
    /// Validates superblock copy `copy` from the 4 KiB block that holds it.
    pub fn parse(block: &[u8], copy: u8) -> Result<Superblock, FormatError> {
        let bytes = block.get(SB_OFFSET..SB_OFFSET + SB_SIZE).ok_or(field(
            copy,
            "block length",
            block.len() as u64,
        ))?;
        let raw = RawSuperblock::read_from_bytes(bytes)
            .map_err(|_| field(copy, "block length", block.len() as u64))?;
        let magic = raw.magic.get();
        if magic != F2FS_SUPER_MAGIC {
            return Err(CorruptKind::SuperblockMagic { copy, magic }.into());
        }
        let features = raw.feature.get();
        if features & feature::SB_CHKSUM != 0 {
            let off = raw.checksum_offset.get();
            if off != SB_CHECKSUM_OFFSET {
                return Err(field(copy, "checksum_offset", off).into());
            }
            let covered = bytes.get(..SB_CHECKSUM_OFFSET as usize).unwrap_or(&[]);
            if f2fs_crc32(F2FS_SUPER_MAGIC, covered) != raw.crc.get() {
                return Err(CorruptKind::SuperblockChecksum { copy }.into());
            }
        }
        if features & !feature::KNOWN != 0 {
            return Err(Incompatible::UnknownFeatures(features & !feature::KNOWN).into());
        }
        if features & feature::CASEFOLD != 0 {
            // As Linux 6.1 at mount: an encoding it has no tables for is refused.
            Encoding::from_superblock(raw.s_encoding.get(), raw.s_encoding_flags.get())?;
        }
        let mut sb = Superblock {
            raw,
            copy,
            devices: Vec::new(),
        };
        sb.check_geometry()?;
        sb.devices = sb.check_devices()?;
        Ok(sb)
    }

    fn check_geometry(&self) -> Result<(), FormatError> {
        let r = &self.raw;
        let c = self.copy;
        if r.log_blocksize.get() != 12 {
            return Err(field(c, "log_blocksize", r.log_blocksize.get()).into());
        }
        if r.log_blocks_per_seg.get() != 9 {
            return Err(field(c, "log_blocks_per_seg", r.log_blocks_per_seg.get()).into());
        }
        let lss = r.log_sectorsize.get();
        if !(9..=12).contains(&lss) {
            return Err(field(c, "log_sectorsize", lss).into());
        }
        if lss.checked_add(r.log_sectors_per_block.get()) != Some(12) {
            return Err(field(c, "log_sectors_per_block", r.log_sectors_per_block.get()).into());
        }
        let spz = r.secs_per_zone.get();
        let sps = r.segs_per_sec.get();
        if sps == 0 || sps > r.segment_count.get() {
            return Err(field(c, "segs_per_sec", sps).into());
        }
        if spz == 0 || spz > r.section_count.get() {
            return Err(field(c, "secs_per_zone", spz).into());
        }
        for (name, ino, want) in [
            ("root_ino", r.root_ino.get(), 3),
            ("node_ino", r.node_ino.get(), 1),
            ("meta_ino", r.meta_ino.get(), 2),
        ] {
            if ino != want {
                return Err(field(c, name, ino).into());
            }
        }
        let ext = u32::from(r.hot_ext_count).saturating_add(r.extension_count.get());
        if ext > 64 {
            return Err(field(c, "extension_count", ext).into());
        }
        if r.cp_payload.get() >= BLOCKS_PER_SEG {
            return Err(field(c, "cp_payload", r.cp_payload.get()).into());
        }
        // The metadata areas follow one another with no gaps, counted in segments.
        let seg = u64::from(BLOCKS_PER_SEG);
        let chain = [
            (
                "cp_blkaddr",
                r.cp_blkaddr.get(),
                r.segment0_blkaddr.get(),
                0u32,
            ),
            (
                "sit_blkaddr",
                r.sit_blkaddr.get(),
                r.cp_blkaddr.get(),
                r.segment_count_ckpt.get(),
            ),
            (
                "nat_blkaddr",
                r.nat_blkaddr.get(),
                r.sit_blkaddr.get(),
                r.segment_count_sit.get(),
            ),
            (
                "ssa_blkaddr",
                r.ssa_blkaddr.get(),
                r.nat_blkaddr.get(),
                r.segment_count_nat.get(),
            ),
            (
                "main_blkaddr",
                r.main_blkaddr.get(),
                r.ssa_blkaddr.get(),
                r.segment_count_ssa.get(),
            ),
        ];
        for (name, addr, prev, segs) in chain {
            if u64::from(addr) != u64::from(prev) + u64::from(segs) * seg {
                return Err(field(c, name, addr).into());
            }
        }
        if r.segment_count_ckpt.get() != 2 {
            return Err(field(c, "segment_count_ckpt", r.segment_count_ckpt.get()).into());
        }
        for (name, n) in [
            ("segment_count_sit", r.segment_count_sit.get()),
            ("segment_count_nat", r.segment_count_nat.get()),
        ] {
            if n == 0 || n % 2 != 0 {
                return Err(field(c, name, n).into());
            }
        }
        let main_segs = r.segment_count_main.get();
        if u64::from(main_segs) != u64::from(r.section_count.get()) * u64::from(sps) {
            return Err(field(c, "segment_count_main", main_segs).into());
        }
        let meta_segs = [
            r.segment_count_ckpt.get(),
            r.segment_count_sit.get(),
            r.segment_count_nat.get(),
            r.segment_count_ssa.get(),
        ]
        .iter()
        .map(|&v| u64::from(v))
        .sum::<u64>();
        if meta_segs + u64::from(main_segs) > u64::from(r.segment_count.get()) {
            return Err(field(c, "segment_count", r.segment_count.get()).into());
        }
        let end = u64::from(r.segment0_blkaddr.get()) + u64::from(r.segment_count.get()) * seg;
        if end > r.block_count.get() {
            return Err(field(c, "block_count", r.block_count.get()).into());
        }
        // One SIT entry per main segment, one SSA block per main segment.
        let sit_entries =
            u64::from(r.segment_count_sit.get() / 2) * seg * crate::SIT_ENTRIES_PER_BLOCK as u64;
        if u64::from(main_segs) > sit_entries {
            return Err(field(c, "segment_count_sit", r.segment_count_sit.get()).into());
        }
        // A read-only (`ro` feature) image has no SSA: nothing will ever clean it.
        let read_only_layout = r.feature.get() & feature::RO != 0;
        if !read_only_layout && u64::from(main_segs) > u64::from(r.segment_count_ssa.get()) * seg {
            return Err(field(c, "segment_count_ssa", r.segment_count_ssa.get()).into());
        }
        Ok(())
    }

    /// The device table: entries with a path from devs[0] on, none after the first empty
    /// one, each path NUL-terminated, each with segments, the segments adding up to the
    /// volume's (rounded down to whole zones, as mkfs.f2fs counts them); the ranges follow
    /// one another with no gap. mkfs.f2fs copies 64 bytes from its argument, so what follows
    /// a path's NUL may be anything and is not looked at.
    fn check_devices(&self) -> Result<Vec<VolumeDevice>, FormatError> {
        let r = &self.raw;
        let bad = |index: usize, why: String| CorruptKind::SuperblockDevice {
            copy: self.copy,
            index: index as u8,
            why,
        };
        let listed = r.devs.iter().take_while(|d| d.path[0] != 0).count();
        if let Some(i) = r.devs.iter().skip(listed).position(|d| d.path[0] != 0) {
            return Err(bad(
                listed + i,
                format!("a device listed after the empty entry {listed}"),
            )
            .into());
        }
        let seg = u64::from(BLOCKS_PER_SEG);
        let mut devices = Vec::with_capacity(listed);
        let mut next = 0u64;
        for (i, d) in r.devs.iter().take(listed).enumerate() {
            let len = d
                .path
                .iter()
                .position(|&b| b == 0)
                .ok_or_else(|| bad(i, "the path has no NUL within its 64 bytes".into()))?;
            let segments = d.total_segments.get();
            if segments == 0 {
                return Err(bad(i, "no segments".into()).into());
            }
            let start = next;
            let mut end = start + u64::from(segments) * seg;
            if i == 0 {
                end += u64::from(r.segment0_blkaddr.get());
            }
            next = end;
            devices.push(VolumeDevice {
                path: d.path.get(..len).unwrap_or(&[]).to_vec(),
                segments,
                start,
                end,
            });
        }
        if !devices.is_empty() {
            let total: u64 = devices.iter().map(|d| u64::from(d.segments)).sum();
            let per_zone = u64::from(r.segs_per_sec.get()) * u64::from(r.secs_per_zone.get());
            let whole = total / per_zone.max(1) * per_zone;
            if whole != u64::from(r.segment_count.get()) {
                return Err(bad(
                    devices.len() - 1,
                    format!(
                        "the devices' segments add up to {total}, the volume has {}",
                        r.segment_count.get()
                    ),
                )
                .into());
            }
        }
        Ok(devices)
    }

    /// The devices of a multi-device volume, in `devs[]` order (empty for one device).
    pub fn devices(&self) -> &[VolumeDevice] {
        &self.devices
    }

    pub fn raw(&self) -> &RawSuperblock {
        &self.raw
    }

    pub fn layout(&self) -> Layout {
        let r = &self.raw;
        Layout {
            block_count: r.block_count.get(),
            segment0: r.segment0_blkaddr.get(),
            cp: r.cp_blkaddr.get(),
            sit: r.sit_blkaddr.get(),
            nat: r.nat_blkaddr.get(),
            ssa: r.ssa_blkaddr.get(),
            main: r.main_blkaddr.get(),
            main_segments: r.segment_count_main.get(),
            segs_per_sec: r.segs_per_sec.get(),
            secs_per_zone: r.secs_per_zone.get(),
            sit_segments: r.segment_count_sit.get(),
            nat_segments: r.segment_count_nat.get(),
        }
    }

    pub fn features(&self) -> u32 {
        self.raw.feature.get()
    }

    pub fn has(&self, bit: u32) -> bool {
        self.features() & bit != 0
    }

    /// The filename encoding of casefolded directories: `Some` exactly when the casefold
    /// feature is on (`parse` has checked the encoding then).
    pub fn encoding(&self) -> Option<Encoding> {
        if !self.has(feature::CASEFOLD) {
            return None;
        }
        Encoding::from_superblock(self.raw.s_encoding.get(), self.raw.s_encoding_flags.get()).ok()
    }

    pub fn uuid(&self) -> [u8; 16] {
        self.raw.uuid
    }

    /// The volume label, decoded from UTF-16 up to the first NUL.
    pub fn label(&self) -> String {
        let units: Vec<u16> = self
            .raw
            .volume_name
            .iter()
            .map(|u| u.get())
            .take_while(|&u| u != 0)
            .collect();
        String::from_utf16_lossy(&units)
    }

    /// The kernel version string of the last writer, and of mkfs.
    pub fn versions(&self) -> (String, String) {
        (
            c_string(&self.raw.version),
            c_string(&self.raw.init_version),
        )
    }

    /// The quota inode numbers (user, group, project); 0 where absent.
    pub fn quota_inos(&self) -> [u32; 3] {
        self.raw.qf_ino.map(|v| v.get())
    }

    pub fn cp_payload(&self) -> u32 {
        self.raw.cp_payload.get()
    }

    /// Cold and hot file-name extensions.
    pub fn extensions(&self) -> (Vec<String>, Vec<String>) {
        let cold = self.raw.extension_count.get() as usize;
        let hot = usize::from(self.raw.hot_ext_count);
        let all: Vec<String> = self
            .raw
            .extension_list
            .iter()
            .map(|e| c_string(e))
            .collect();
        let cold_list = all.iter().take(cold).cloned().collect();
        let hot_list = all.iter().skip(cold).take(hot).cloned().collect();
        (cold_list, hot_list)
    }

    pub fn sector_size(&self) -> u32 {
        1 << self.raw.log_sectorsize.get().min(12)
    }

    pub fn block_size(&self) -> usize {
        BLOCK_SIZE
    }
}

fn c_string(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(bytes.get(..end).unwrap_or(&[])).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use zerocopy::FromZeros;

    /// A superblock with mkfs.f2fs 1.15's geometry for a 512 MiB image (FORMAT-NOTES §11).
    pub(crate) fn mkfs_512m() -> Vec<u8> {
        let mut raw = RawSuperblock::new_zeroed();
        raw.magic.set(F2FS_SUPER_MAGIC);
        raw.log_sectorsize.set(9);
        raw.log_sectors_per_block.set(3);
        raw.log_blocksize.set(12);
        raw.log_blocks_per_seg.set(9);
        raw.segs_per_sec.set(1);
        raw.secs_per_zone.set(1);
        raw.block_count.set(131072);
        raw.section_count.set(248);
        raw.segment_count.set(255);
        raw.segment_count_ckpt.set(2);
        raw.segment_count_sit.set(2);
        raw.segment_count_nat.set(2);
        raw.segment_count_ssa.set(1);
        raw.segment_count_main.set(248);
        raw.segment0_blkaddr.set(512);
        raw.cp_blkaddr.set(512);
        raw.sit_blkaddr.set(1536);
        raw.nat_blkaddr.set(2560);
        raw.ssa_blkaddr.set(3584);
        raw.main_blkaddr.set(4096);
        raw.root_ino.set(3);
        raw.node_ino.set(1);
        raw.meta_ino.set(2);
        let mut block = vec![0u8; BLOCK_SIZE];
        block[SB_OFFSET..SB_OFFSET + SB_SIZE].copy_from_slice(raw.as_bytes());
        block
    }

    #[test]
    fn mkfs_geometry_is_accepted() {
        let sb = Superblock::parse(&mkfs_512m(), 0).unwrap();
        let l = sb.layout();
        assert_eq!(l.main, 4096);
        assert_eq!(l.main_end(), 4096 + 248 * 512);
        assert_eq!(l.max_nid(), 512 * 455);
    }

    #[test]
    fn bad_magic_is_named() {
        let mut b = mkfs_512m();
        b[SB_OFFSET] ^= 1;
        assert!(matches!(
            Superblock::parse(&b, 1),
            Err(FormatError::Corrupt(CorruptKind::SuperblockMagic {
                copy: 1,
                ..
            }))
        ));
    }

    #[test]
    fn zero_segs_per_sec_is_refused_rather_than_dividing_by_zero() {
        let mut b = mkfs_512m();
        b[SB_OFFSET + 24..SB_OFFSET + 28].fill(0);
        assert_eq!(
            Superblock::parse(&b, 0).err(),
            Some(FormatError::Corrupt(CorruptKind::SuperblockField {
                copy: 0,
                field: "segs_per_sec",
                value: 0
            }))
        );
    }

    #[test]
    fn gap_in_area_chain_is_refused() {
        let mut b = mkfs_512m();
        // nat_blkaddr one block later than the SIT area ends.
        b[SB_OFFSET + 84..SB_OFFSET + 88].copy_from_slice(&2561u32.to_le_bytes());
        assert!(matches!(
            Superblock::parse(&b, 0),
            Err(FormatError::Corrupt(CorruptKind::SuperblockField {
                field: "nat_blkaddr",
                ..
            }))
        ));
    }

    #[test]
    fn checksum_is_verified_when_the_feature_is_on() {
        let mut b = mkfs_512m();
        b[SB_OFFSET + 2180..SB_OFFSET + 2184].copy_from_slice(&feature::SB_CHKSUM.to_le_bytes());
        b[SB_OFFSET + 32..SB_OFFSET + 36].copy_from_slice(&SB_CHECKSUM_OFFSET.to_le_bytes());
        let crc = f2fs_crc32(F2FS_SUPER_MAGIC, &b[SB_OFFSET..SB_OFFSET + 3068]);
        b[SB_OFFSET + 3068..SB_OFFSET + 3072].copy_from_slice(&crc.to_le_bytes());
        assert!(Superblock::parse(&b, 0).is_ok());
        b[SB_OFFSET + 200] ^= 0x40;
        assert!(matches!(
            Superblock::parse(&b, 0),
            Err(FormatError::Corrupt(CorruptKind::SuperblockChecksum {
                copy: 0
            }))
        ));
    }

    #[test]
    fn casefold_encoding_is_checked() {
        let mut b = mkfs_512m();
        b[SB_OFFSET + 2180..SB_OFFSET + 2184].copy_from_slice(&0x1000u32.to_le_bytes());
        b[SB_OFFSET + 2758..SB_OFFSET + 2760].copy_from_slice(&7u16.to_le_bytes());
        assert_eq!(
            Superblock::parse(&b, 0).err(),
            Some(FormatError::Incompatible(Incompatible::UnknownEncoding(7)))
        );
        b[SB_OFFSET + 2758..SB_OFFSET + 2760].copy_from_slice(&1u16.to_le_bytes());
        b[SB_OFFSET + 2760..SB_OFFSET + 2762].copy_from_slice(&1u16.to_le_bytes());
        let sb = Superblock::parse(&b, 0).unwrap();
        assert_eq!(sb.encoding().map(|e| e.strict), Some(true));
    }

    #[test]
    fn unknown_feature_is_incompatible() {
        let mut b = mkfs_512m();
        b[SB_OFFSET + 2180..SB_OFFSET + 2184].copy_from_slice(&0x10000u32.to_le_bytes());
        assert_eq!(
            Superblock::parse(&b, 0).err(),
            Some(FormatError::Incompatible(Incompatible::UnknownFeatures(
                0x10000
            )))
        );
    }

    /// Writes device entry `i` of the table in `b`.
    fn set_dev(b: &mut [u8], i: usize, path: &[u8], segments: u32) {
        let at = SB_OFFSET + 2201 + 68 * i;
        b[at..at + 64].fill(0);
        b[at..at + path.len()].copy_from_slice(path);
        b[at + 64..at + 68].copy_from_slice(&segments.to_le_bytes());
    }

    fn device_error(b: &[u8]) -> (u8, String) {
        match Superblock::parse(b, 0) {
            Err(FormatError::Corrupt(CorruptKind::SuperblockDevice { index, why, .. })) => {
                (index, why)
            }
            other => panic!("expected a device table error, got {:?}", other.err()),
        }
    }

    #[test]
    fn two_devices_give_consecutive_ranges() {
        let mut b = mkfs_512m();
        assert!(Superblock::parse(&b, 0).unwrap().devices().is_empty());
        // As mkfs.f2fs writes it: 64 bytes copied from the argument, garbage after the NUL.
        set_dev(&mut b, 0, b"/dev/vda\0junk", 200);
        set_dev(&mut b, 1, b"/dev/vdc", 55);
        let sb = Superblock::parse(&b, 0).unwrap();
        let d = sb.devices();
        assert_eq!(d.len(), 2);
        assert_eq!(d[0].path, b"/dev/vda");
        assert_eq!((d[0].start, d[0].end), (0, 512 + 200 * 512));
        assert_eq!((d[1].start, d[1].end), (512 + 200 * 512, 512 + 255 * 512));
        assert_eq!(d[1].blocks(), 55 * 512);
        assert_eq!(d[1].path_lossy(), "/dev/vdc");
    }

    #[test]
    fn a_path_without_nul_is_refused() {
        let mut b = mkfs_512m();
        set_dev(&mut b, 0, b"/dev/vda", 200);
        set_dev(&mut b, 1, &[b'x'; 64], 55);
        let (i, why) = device_error(&b);
        assert_eq!(i, 1);
        assert!(why.contains("no NUL"), "{why}");
    }

    #[test]
    fn a_device_after_an_empty_entry_is_refused() {
        let mut b = mkfs_512m();
        set_dev(&mut b, 0, b"/dev/vda", 200);
        set_dev(&mut b, 2, b"/dev/vdd", 55);
        let (i, why) = device_error(&b);
        assert_eq!(i, 2);
        assert!(why.contains("after the empty entry 1"), "{why}");
        // A table that starts empty lists no device at all.
        let mut b = mkfs_512m();
        set_dev(&mut b, 1, b"/dev/vdc", 55);
        assert_eq!(device_error(&b).0, 1);
    }

    #[test]
    fn device_segments_must_add_up() {
        let mut b = mkfs_512m();
        set_dev(&mut b, 0, b"/dev/vda", 200);
        set_dev(&mut b, 1, b"/dev/vdc", 54);
        let (i, why) = device_error(&b);
        assert_eq!(i, 1);
        assert!(why.contains("add up to 254, the volume has 255"), "{why}");
        set_dev(&mut b, 1, b"/dev/vdc", 0);
        assert!(device_error(&b).1.contains("no segments"));
        // Many more segments than the volume's would move the ranges past block_count.
        set_dev(&mut b, 1, b"/dev/vdc", u32::MAX);
        assert!(device_error(&b).1.contains("add up to"));
    }
}
