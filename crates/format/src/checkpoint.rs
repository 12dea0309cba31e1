//! The checkpoint (CP) pack: two packs, at `cp_blkaddr` and one segment later, each a CP block,
//! optional payload blocks (the rest of a large SIT version bitmap), orphan blocks, the
//! current-segment summaries, and a trailing copy of the CP block.
//!
//! A pack is valid when both CP blocks have a good CRC and the same version; of two valid
//! packs the later version (wrap-safe signed difference) wins and a tie goes to pack 1. The
//! engine reads the blocks; [`CpBlock::parse`] checks one CP block and
//! [`Checkpoint::assemble`] checks the pack's counts against the superblock geometry.

use crate::crc::{f2fs_crc32, F2FS_SUPER_MAGIC};
use crate::superblock::Layout;
use crate::{slice_at, CorruptKind, FormatError, Incompatible, BLOCKS_PER_SEG, BLOCK_SIZE};
use zerocopy::little_endian::{U16, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// Checkpoint flag bits (`ckpt_flags`).
pub mod flags {
    pub const UMOUNT: u32 = 0x0001;
    pub const ORPHAN_PRESENT: u32 = 0x0002;
    pub const COMPACT_SUM: u32 = 0x0004;
    pub const ERROR: u32 = 0x0008;
    pub const FSCK: u32 = 0x0010;
    pub const FASTBOOT: u32 = 0x0020;
    pub const CRC_RECOVERY: u32 = 0x0040;
    pub const NAT_BITS: u32 = 0x0080;
    pub const TRIMMED: u32 = 0x0100;
    pub const NOCRC_RECOVERY: u32 = 0x0200;
    pub const LARGE_NAT_BITMAP: u32 = 0x0400;
    pub const QUOTA_NEED_FSCK: u32 = 0x0800;
    pub const DISABLED: u32 = 0x1000;
    pub const DISABLED_QUICK: u32 = 0x2000;
    pub const RESIZEFS: u32 = 0x4000;

    pub const NAMES: [(u32, &str); 15] = [
        (UMOUNT, "umount"),
        (ORPHAN_PRESENT, "orphan_present"),
        (COMPACT_SUM, "compact_sum"),
        (ERROR, "error"),
        (FSCK, "fsck"),
        (FASTBOOT, "fastboot"),
        (CRC_RECOVERY, "crc_recovery"),
        (NAT_BITS, "nat_bits"),
        (TRIMMED, "trimmed"),
        (NOCRC_RECOVERY, "nocrc_recovery"),
        (LARGE_NAT_BITMAP, "large_nat_bitmap"),
        (QUOTA_NEED_FSCK, "quota_need_fsck"),
        (DISABLED, "disabled"),
        (DISABLED_QUICK, "disabled_quick"),
        (RESIZEFS, "resizefs"),
    ];

    pub fn names(bits: u32) -> Vec<&'static str> {
        NAMES
            .iter()
            .filter(|(b, _)| bits & b != 0)
            .map(|(_, n)| *n)
            .collect()
    }
}

/// Indexes of the six current segments ("logs") as the CP and alloc_type order them.
pub const CURSEG_HOT_DATA: usize = 0;
pub const CURSEG_WARM_DATA: usize = 1;
pub const CURSEG_COLD_DATA: usize = 2;
pub const CURSEG_HOT_NODE: usize = 3;
pub const CURSEG_WARM_NODE: usize = 4;
pub const CURSEG_COLD_NODE: usize = 5;
/// Names of the six logs, in curseg type order.
pub const CURSEG_NAMES: [&str; 6] = [
    "hot data",
    "warm data",
    "cold data",
    "hot node",
    "warm node",
    "cold node",
];

/// Orphan inode numbers per orphan block.
pub const ORPHANS_PER_BLOCK: usize = 1020;

/// The fixed 192-byte head of a CP block.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Debug)]
#[repr(C)]
pub struct RawCheckpoint {
    pub checkpoint_ver: U64,
    pub user_block_count: U64,
    pub valid_block_count: U64,
    pub rsvd_segment_count: U32,
    pub overprov_segment_count: U32,
    pub free_segment_count: U32,
    pub cur_node_segno: [U32; 8],
    pub cur_node_blkoff: [U16; 8],
    pub cur_data_segno: [U32; 8],
    pub cur_data_blkoff: [U16; 8],
    pub ckpt_flags: U32,
    pub cp_pack_total_block_count: U32,
    pub cp_pack_start_sum: U32,
    pub valid_node_count: U32,
    pub valid_inode_count: U32,
    pub next_free_nid: U32,
    pub sit_ver_bitmap_bytesize: U32,
    pub nat_ver_bitmap_bytesize: U32,
    pub checksum_offset: U32,
    pub elapsed_time: U64,
    pub alloc_type: [u8; 16],
}

pub const CP_HEAD_SIZE: usize = 192;
const _: () = assert!(core::mem::size_of::<RawCheckpoint>() == CP_HEAD_SIZE);

/// The usual place of the CP CRC.
pub const CP_CHECKSUM_OFFSET: u32 = 4092;

/// One CP block whose CRC is good: the head plus the whole block (for the bitmaps).
#[derive(Clone)]
pub struct CpBlock {
    pub head: RawCheckpoint,
    pub block: Box<[u8; BLOCK_SIZE]>,
}

impl CpBlock {
    /// Checks the CRC of the CP block read at `blkaddr`.
    pub fn parse(block: &[u8; BLOCK_SIZE], blkaddr: u64) -> Result<CpBlock, CorruptKind> {
        let head = RawCheckpoint::read_from_prefix(block)
            .map(|(h, _)| h)
            .map_err(|_| CorruptKind::CheckpointField {
                blkaddr,
                field: "length",
                value: 0,
            })?;
        let off = head.checksum_offset.get();
        if !(CP_HEAD_SIZE as u32..=CP_CHECKSUM_OFFSET).contains(&off) {
            return Err(CorruptKind::CheckpointField {
                blkaddr,
                field: "checksum_offset",
                value: off.into(),
            });
        }
        let off = off as usize;
        let stored = slice_at(block, off, 4, || CorruptKind::CheckpointChecksum {
            blkaddr,
        })?;
        let stored = u32::from_le_bytes(stored.try_into().unwrap_or([0; 4]));
        let mut crc = f2fs_crc32(F2FS_SUPER_MAGIC, block.get(..off).unwrap_or(&[]));
        if off < CP_CHECKSUM_OFFSET as usize {
            crc = f2fs_crc32(crc, block.get(off + 4..).unwrap_or(&[]));
        }
        if crc != stored {
            return Err(CorruptKind::CheckpointChecksum { blkaddr });
        }
        Ok(CpBlock {
            head,
            block: Box::new(*block),
        })
    }

    pub fn version(&self) -> u64 {
        self.head.checkpoint_ver.get()
    }

    pub fn crc(&self) -> u32 {
        let off = self.head.checksum_offset.get() as usize;
        self.block
            .get(off..off + 4)
            .and_then(|b| b.try_into().ok())
            .map(u32::from_le_bytes)
            .unwrap_or(0)
    }

    /// The number of blocks in the pack, checked to be within one segment.
    pub fn total_blocks(&self, blkaddr: u64) -> Result<u32, CorruptKind> {
        let total = self.head.cp_pack_total_block_count.get();
        if total <= 2 || total > BLOCKS_PER_SEG {
            return Err(CorruptKind::CheckpointField {
                blkaddr,
                field: "cp_pack_total_block_count",
                value: total.into(),
            });
        }
        Ok(total)
    }
}

/// Whether version `a` is later than `b` (wrap-safe, as the kernel compares).
pub fn version_after(a: u64, b: u64) -> bool {
    (a.wrapping_sub(b) as i64) > 0
}

/// One current segment as the CP records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CursegInfo {
    pub segno: u32,
    /// Next free block offset in the segment.
    pub blkoff: u16,
    /// 0 LFS, 1 SSR.
    pub alloc_type: u8,
}

/// A validated checkpoint: the pack that the mount uses.
#[derive(Clone)]
pub struct Checkpoint {
    pub head: RawCheckpoint,
    /// Which pack (1 or 2).
    pub pack: u8,
    /// Block address of the pack's first block.
    pub pack_addr: u64,
    /// CRC of the CP block (used in node footers under CRC_RECOVERY and in nat_bits).
    pub crc: u32,
    pub sit_bitmap: Vec<u8>,
    pub nat_bitmap: Vec<u8>,
    pub cursegs: [CursegInfo; 6],
}

impl Checkpoint {
    /// Checks a CP block (whose trailing copy the engine has already matched) and the payload
    /// blocks against the geometry, and extracts the version bitmaps.
    pub fn assemble(
        cp: CpBlock,
        pack: u8,
        pack_addr: u64,
        payload: &[[u8; BLOCK_SIZE]],
        layout: &Layout,
    ) -> Result<Checkpoint, FormatError> {
        let h = &cp.head;
        let bad = |field: &'static str, value: u64| CorruptKind::CheckpointField {
            blkaddr: pack_addr,
            field,
            value,
        };
        let flags = h.ckpt_flags.get();
        if flags & flags::LARGE_NAT_BITMAP != 0 {
            return Err(Incompatible::LargeNatBitmap.into());
        }
        let sit_bytes = h.sit_ver_bitmap_bytesize.get();
        let nat_bytes = h.nat_ver_bitmap_bytesize.get();
        if u64::from(sit_bytes) != u64::from(layout.sit_blocks()) / 8 {
            return Err(bad("sit_ver_bitmap_bytesize", sit_bytes.into()).into());
        }
        if u64::from(nat_bytes) != u64::from(layout.nat_blocks()) / 8 {
            return Err(bad("nat_ver_bitmap_bytesize", nat_bytes.into()).into());
        }
        // Normal layout: both bitmaps after the head, SIT first; with a payload the NAT bitmap
        // stays in the CP block and the SIT bitmap moves to the payload blocks.
        let (sit_bitmap, nat_bitmap) = if payload.is_empty() {
            let sit = slice_at(&cp.block[..], CP_HEAD_SIZE, sit_bytes as usize, || {
                bad("sit_ver_bitmap_bytesize", sit_bytes.into())
            })?;
            let nat_start = CP_HEAD_SIZE + sit_bytes as usize;
            let nat = slice_at(&cp.block[..], nat_start, nat_bytes as usize, || {
                bad("nat_ver_bitmap_bytesize", nat_bytes.into())
            })?;
            if nat_start + nat_bytes as usize > h.checksum_offset.get() as usize {
                return Err(bad("nat_ver_bitmap_bytesize", nat_bytes.into()).into());
            }
            (sit.to_vec(), nat.to_vec())
        } else {
            let nat = slice_at(&cp.block[..], CP_HEAD_SIZE, nat_bytes as usize, || {
                bad("nat_ver_bitmap_bytesize", nat_bytes.into())
            })?;
            let all: Vec<u8> = payload.iter().flat_map(|b| b.iter().copied()).collect();
            let sit = slice_at(&all, 0, sit_bytes as usize, || {
                bad("sit_ver_bitmap_bytesize", sit_bytes.into())
            })?;
            (sit.to_vec(), nat.to_vec())
        };
        let mut cursegs = [CursegInfo {
            segno: 0,
            blkoff: 0,
            alloc_type: 0,
        }; 6];
        let segnos = h
            .cur_data_segno
            .iter()
            .take(3)
            .chain(h.cur_node_segno.iter().take(3));
        let blkoffs = h
            .cur_data_blkoff
            .iter()
            .take(3)
            .chain(h.cur_node_blkoff.iter().take(3));
        let logs = cursegs
            .iter_mut()
            .zip(segnos.zip(blkoffs))
            .zip(CURSEG_FIELD.iter().zip(h.alloc_type));
        for ((c, (segno, blkoff)), (field, alloc_type)) in logs {
            let (segno, blkoff) = (segno.get(), blkoff.get());
            if segno >= layout.main_segments {
                return Err(bad(field, segno.into()).into());
            }
            if u32::from(blkoff) > BLOCKS_PER_SEG {
                return Err(bad("cur_blkoff", blkoff.into()).into());
            }
            if alloc_type > 1 {
                return Err(bad("alloc_type", alloc_type.into()).into());
            }
            *c = CursegInfo {
                segno,
                blkoff,
                alloc_type,
            };
        }
        let main_segs = u64::from(layout.main_segments);
        if u64::from(h.free_segment_count.get()) > main_segs {
            return Err(bad("free_segment_count", h.free_segment_count.get().into()).into());
        }
        let main_blocks = main_segs * u64::from(BLOCKS_PER_SEG);
        if h.user_block_count.get() > main_blocks {
            return Err(bad("user_block_count", h.user_block_count.get()).into());
        }
        if h.valid_block_count.get() > h.user_block_count.get() {
            return Err(bad("valid_block_count", h.valid_block_count.get()).into());
        }
        if h.next_free_nid.get() > layout.max_nid() {
            return Err(bad("next_free_nid", h.next_free_nid.get().into()).into());
        }
        let start_sum = h.cp_pack_start_sum.get();
        let total = h.cp_pack_total_block_count.get();
        if start_sum < 1 || start_sum >= total {
            return Err(bad("cp_pack_start_sum", start_sum.into()).into());
        }
        Ok(Checkpoint {
            crc: cp.crc(),
            head: cp.head,
            pack,
            pack_addr,
            sit_bitmap,
            nat_bitmap,
            cursegs,
        })
    }

    pub fn version(&self) -> u64 {
        self.head.checkpoint_ver.get()
    }

    pub fn flags(&self) -> u32 {
        self.head.ckpt_flags.get()
    }

    pub fn has_flag(&self, f: u32) -> bool {
        self.flags() & f != 0
    }

    /// Number of orphan blocks that follow the payload.
    pub fn orphan_blocks(&self, cp_payload: u32) -> u32 {
        if !self.has_flag(flags::ORPHAN_PRESENT) {
            return 0;
        }
        self.head
            .cp_pack_start_sum
            .get()
            .saturating_sub(cp_payload.saturating_add(1))
    }

    /// The `cp_ver` value a node written under this checkpoint carries in its footer.
    pub fn node_cp_ver(&self) -> u64 {
        if self.has_flag(flags::CRC_RECOVERY) {
            self.version() | (u64::from(self.crc) << 32)
        } else {
            self.version()
        }
    }
}

const CURSEG_FIELD: [&str; 6] = [
    "cur_data_segno[0]",
    "cur_data_segno[1]",
    "cur_data_segno[2]",
    "cur_node_segno[0]",
    "cur_node_segno[1]",
    "cur_node_segno[2]",
];

/// An orphan block: inode numbers of files unlinked while open at the checkpoint.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone)]
#[repr(C)]
pub struct RawOrphanBlock {
    pub ino: [U32; ORPHANS_PER_BLOCK],
    pub reserved: U32,
    pub blk_addr: U16,
    pub blk_count: U16,
    pub entry_count: U32,
    pub check_sum: U32,
}
const _: () = assert!(core::mem::size_of::<RawOrphanBlock>() == BLOCK_SIZE);

/// The inode numbers listed in an orphan block, bounded by its entry count.
pub fn orphan_inos(block: &[u8; BLOCK_SIZE], blkaddr: u64) -> Result<Vec<u32>, CorruptKind> {
    let raw = RawOrphanBlock::ref_from_bytes(block).map_err(|_| CorruptKind::Block {
        blkaddr,
        why: "orphan block length",
    })?;
    let n = raw.entry_count.get() as usize;
    if n > ORPHANS_PER_BLOCK {
        return Err(CorruptKind::Block {
            blkaddr,
            why: "orphan entry_count over 1020",
        });
    }
    Ok(raw.ino.iter().take(n).map(|v| v.get()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cp_block(ver: u64) -> [u8; BLOCK_SIZE] {
        let mut b = [0u8; BLOCK_SIZE];
        b[0..8].copy_from_slice(&ver.to_le_bytes());
        b[136..140].copy_from_slice(&6u32.to_le_bytes());
        b[164..168].copy_from_slice(&CP_CHECKSUM_OFFSET.to_le_bytes());
        let crc = f2fs_crc32(F2FS_SUPER_MAGIC, &b[..4092]);
        b[4092..].copy_from_slice(&crc.to_le_bytes());
        b
    }

    #[test]
    fn good_crc_is_accepted_and_flipped_bit_is_not() {
        let mut b = cp_block(5);
        assert_eq!(CpBlock::parse(&b, 512).unwrap().version(), 5);
        b[100] ^= 1;
        assert_eq!(
            CpBlock::parse(&b, 512).err(),
            Some(CorruptKind::CheckpointChecksum { blkaddr: 512 })
        );
    }

    #[test]
    fn checksum_offset_outside_block_is_refused_rather_than_read_out_of_bounds() {
        let mut b = cp_block(5);
        b[164..168].copy_from_slice(&5000u32.to_le_bytes());
        assert!(matches!(
            CpBlock::parse(&b, 512),
            Err(CorruptKind::CheckpointField {
                field: "checksum_offset",
                ..
            })
        ));
    }

    /// Found by the `checkpoint` fuzz target: `1 + cp_payload` overflowed for a payload count
    /// no superblock check had bounded.
    #[test]
    fn orphan_block_count_with_huge_payload_does_not_overflow() {
        let mut b = cp_block(5);
        b[132..136].copy_from_slice(&flags::ORPHAN_PRESENT.to_le_bytes());
        b[140..144].copy_from_slice(&3u32.to_le_bytes());
        let crc = f2fs_crc32(F2FS_SUPER_MAGIC, &b[..4092]);
        b[4092..].copy_from_slice(&crc.to_le_bytes());
        let cp = CpBlock::parse(&b, 512).unwrap();
        let layout = crate::superblock::Layout {
            block_count: 1 << 20,
            segment0: 512,
            cp: 512,
            sit: 1536,
            nat: 2560,
            ssa: 3584,
            main: 4096,
            main_segments: 248,
            segs_per_sec: 1,
            secs_per_zone: 1,
            sit_segments: 2,
            nat_segments: 2,
        };
        let mut b2 = *cp.block;
        b2[156..160].copy_from_slice(&64u32.to_le_bytes());
        b2[160..164].copy_from_slice(&64u32.to_le_bytes());
        let crc = f2fs_crc32(F2FS_SUPER_MAGIC, &b2[..4092]);
        b2[4092..].copy_from_slice(&crc.to_le_bytes());
        let cp =
            Checkpoint::assemble(CpBlock::parse(&b2, 512).unwrap(), 1, 512, &[], &layout).unwrap();
        assert_eq!(cp.orphan_blocks(u32::MAX), 0);
        assert_eq!(cp.orphan_blocks(0), 2);
    }

    #[test]
    fn versions_compare_wrap_safe() {
        assert!(version_after(2, 1));
        assert!(!version_after(1, 1));
        assert!(version_after(0, u64::MAX));
    }
}
