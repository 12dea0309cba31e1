//! The checkpoint (CP) pack: two packs, at `cp_blkaddr` and one segment later, each a CP block,
//! optional payload blocks (`cp_payload` in the superblock: where the version bitmaps go on
//! when the CP block cannot hold them), orphan blocks, the current-segment summaries, and a
//! trailing copy of the CP block.
//!
//! The CP block and its payload blocks are read as one buffer, and the bitmaps sit in it in
//! one of three ways ([`BitmapPlace`]): both after the 192-byte head, SIT first, CRC at 4092
//! (no payload); NAT after the head and SIT from the first payload block on, CRC at 4092
//! (payload, usually a SIT bitmap over 3836 bytes); or, with `LARGE_NAT_BITMAP` (mkfs.f2fs
//! `-i`), the CRC at 192 right after the head, the NAT bitmap from 196 and the SIT bitmap
//! right after it, running on into the payload blocks. The CRC covers the CP block only
//! (every byte but its own four), never the payload.
//!
//! A pack is valid when both CP blocks have a good CRC and the same version; of two valid
//! packs the later version (wrap-safe signed difference) wins and a tie goes to pack 1. The
//! engine reads the blocks; [`CpBlock::parse`] checks one CP block and
//! [`Checkpoint::assemble`] checks the pack's counts against the superblock geometry.

use crate::crc::{f2fs_crc32, F2FS_SUPER_MAGIC};
use crate::superblock::Layout;
use crate::{slice_at, CorruptKind, FormatError, BLOCKS_PER_SEG, BLOCK_SIZE};
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
/// The place of the CP CRC with `LARGE_NAT_BITMAP`: right after the head.
pub const CP_MIN_CHECKSUM_OFFSET: u32 = CP_HEAD_SIZE as u32;

/// The CRC of a CP block whose checksum sits at `off` (192..=4092): every byte of the block
/// but the four at `off`.
pub fn checkpoint_crc(block: &[u8; BLOCK_SIZE], off: usize) -> u32 {
    let crc = f2fs_crc32(F2FS_SUPER_MAGIC, block.get(..off).unwrap_or(&[]));
    match block.get(off.saturating_add(4)..) {
        Some(rest) if off < CP_CHECKSUM_OFFSET as usize => f2fs_crc32(crc, rest),
        _ => crc,
    }
}

/// Where the CRC and the two version bitmaps sit, as byte offsets into the CP block followed
/// by its `cp_payload` payload blocks (one buffer, as Linux reads it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BitmapPlace {
    pub crc_at: usize,
    pub sit_at: usize,
    pub sit_len: usize,
    pub nat_at: usize,
    pub nat_len: usize,
    /// Blocks of the buffer: the CP block and the payload blocks.
    pub blocks: usize,
}

impl BitmapPlace {
    /// The places `head` (with its flags, checksum offset and bitmap sizes) and `cp_payload`
    /// call for, checked to fit: both bitmaps inside the buffer, clear of the CRC.
    pub fn of(
        head: &RawCheckpoint,
        cp_payload: u32,
        blkaddr: u64,
    ) -> Result<BitmapPlace, CorruptKind> {
        let sit = head.sit_ver_bitmap_bytesize.get();
        let nat = head.nat_ver_bitmap_bytesize.get();
        let crc_at = head.checksum_offset.get();
        let large = head.ckpt_flags.get() & flags::LARGE_NAT_BITMAP != 0;
        let misfit = |how| CorruptKind::CheckpointBitmaps {
            blkaddr,
            sit,
            nat,
            payload: cp_payload,
            how,
        };
        if cp_payload >= BLOCKS_PER_SEG {
            return Err(misfit(" (the payload is longer than a segment)"));
        }
        let blocks = 1 + cp_payload as usize;
        let end = blocks * BLOCK_SIZE;
        let (sit_len, nat_len) = (sit as usize, nat as usize);
        // Each case: (crc_at, sit_at, nat_at, end of the NAT bitmap's room, end of the SIT's).
        let (sit_at, nat_at, nat_room, sit_room) = if large {
            // Linux 6.1 refuses the older layout with the CRC at 4092 ("deprecated layout").
            if crc_at != CP_MIN_CHECKSUM_OFFSET {
                return Err(CorruptKind::CheckpointField {
                    blkaddr,
                    field: "checksum_offset (large_nat_bitmap needs 192)",
                    value: crc_at.into(),
                });
            }
            let nat_at = CP_HEAD_SIZE + 4;
            (nat_at + nat_len, nat_at, end, end)
        } else if cp_payload > 0 {
            (BLOCK_SIZE, CP_HEAD_SIZE, crc_at as usize, end)
        } else {
            (
                CP_HEAD_SIZE,
                CP_HEAD_SIZE + sit_len,
                crc_at as usize,
                crc_at as usize,
            )
        };
        if nat_at + nat_len > nat_room {
            return Err(misfit(" (the NAT bitmap runs past its room)"));
        }
        if sit_at + sit_len > sit_room {
            return Err(misfit(" (the SIT bitmap runs past its room)"));
        }
        Ok(BitmapPlace {
            crc_at: crc_at as usize,
            sit_at,
            sit_len,
            nat_at,
            nat_len,
            blocks,
        })
    }

    /// The SIT and NAT bitmaps out of the CP block and payload blocks.
    pub fn read(
        &self,
        cp: &[u8; BLOCK_SIZE],
        payload: &[[u8; BLOCK_SIZE]],
        blkaddr: u64,
    ) -> Result<(Vec<u8>, Vec<u8>), CorruptKind> {
        let mut all = Vec::with_capacity(self.blocks * BLOCK_SIZE);
        all.extend_from_slice(cp);
        for b in payload.iter().take(self.blocks - 1) {
            all.extend_from_slice(b);
        }
        let short = || CorruptKind::Block {
            blkaddr,
            why: "checkpoint payload blocks missing",
        };
        let sit = slice_at(&all, self.sit_at, self.sit_len, short)?.to_vec();
        let nat = slice_at(&all, self.nat_at, self.nat_len, short)?.to_vec();
        Ok((sit, nat))
    }

    /// The CP block and its payload blocks for `head` with these bitmaps, the CRC in place.
    /// Returns the blocks and the CRC.
    pub fn write(
        &self,
        head: &RawCheckpoint,
        sit: &[u8],
        nat: &[u8],
    ) -> Result<(Vec<[u8; BLOCK_SIZE]>, u32), CorruptKind> {
        let wrong = |field: &'static str, value: usize| CorruptKind::CheckpointField {
            blkaddr: 0,
            field,
            value: value as u64,
        };
        if sit.len() != self.sit_len {
            return Err(wrong("sit_ver_bitmap_bytesize", sit.len()));
        }
        if nat.len() != self.nat_len {
            return Err(wrong("nat_ver_bitmap_bytesize", nat.len()));
        }
        let mut all = vec![0u8; self.blocks * BLOCK_SIZE];
        let mut put = |at: usize, bytes: &[u8]| {
            if let Some(dst) = all.get_mut(at..at + bytes.len()) {
                dst.copy_from_slice(bytes);
            }
        };
        put(0, head.as_bytes());
        put(self.sit_at, sit);
        put(self.nat_at, nat);
        let mut blocks: Vec<[u8; BLOCK_SIZE]> = all
            .chunks_exact(BLOCK_SIZE)
            .map(|c| {
                let mut b = [0u8; BLOCK_SIZE];
                b.copy_from_slice(c);
                b
            })
            .collect();
        let first = blocks
            .first_mut()
            .ok_or(wrong("cp_pack_total_block_count", 0))?;
        let crc = checkpoint_crc(first, self.crc_at);
        if let Some(dst) = first.get_mut(self.crc_at..self.crc_at + 4) {
            dst.copy_from_slice(&crc.to_le_bytes());
        }
        Ok((blocks, crc))
    }
}

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
        if checkpoint_crc(block, off) != stored {
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
        let sit_bytes = h.sit_ver_bitmap_bytesize.get();
        let nat_bytes = h.nat_ver_bitmap_bytesize.get();
        if u64::from(sit_bytes) != u64::from(layout.sit_blocks()) / 8 {
            return Err(bad("sit_ver_bitmap_bytesize", sit_bytes.into()).into());
        }
        if u64::from(nat_bytes) != u64::from(layout.nat_blocks()) / 8 {
            return Err(bad("nat_ver_bitmap_bytesize", nat_bytes.into()).into());
        }
        let cp_payload = u32::try_from(payload.len()).unwrap_or(u32::MAX);
        let place = BitmapPlace::of(h, cp_payload, pack_addr)?;
        let (sit_bitmap, nat_bitmap) = place.read(&cp.block, payload, pack_addr)?;
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
        if start_sum < 1 + cp_payload || start_sum >= total {
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
    use zerocopy::FromZeros;

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

    fn layout() -> crate::superblock::Layout {
        crate::superblock::Layout {
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
        }
    }

    /// A head as mkfs.f2fs `-i` writes it, with these bitmap sizes and payload count.
    fn large_head(sit: u32, nat: u32, payload: u32) -> RawCheckpoint {
        let mut h = RawCheckpoint::new_zeroed();
        h.checkpoint_ver.set(7);
        h.ckpt_flags
            .set(flags::UMOUNT | flags::COMPACT_SUM | flags::LARGE_NAT_BITMAP);
        h.cp_pack_total_block_count.set(6 + payload);
        h.cp_pack_start_sum.set(1 + payload);
        h.sit_ver_bitmap_bytesize.set(sit);
        h.nat_ver_bitmap_bytesize.set(nat);
        h.checksum_offset.set(CP_MIN_CHECKSUM_OFFSET);
        h
    }

    #[test]
    fn large_nat_bitmap_puts_the_crc_at_192_then_nat_then_sit() {
        let h = large_head(64, 64, 0);
        let place = BitmapPlace::of(&h, 0, 512).unwrap();
        assert_eq!(
            (place.crc_at, place.nat_at, place.sit_at, place.blocks),
            (192, 196, 260, 1)
        );
        let (sit, nat) = (vec![0x80u8; 64], vec![0x01u8; 64]);
        let (blocks, crc) = place.write(&h, &sit, &nat).unwrap();
        let b = blocks[0];
        assert_eq!(b[192..196], crc.to_le_bytes());
        assert_eq!(
            (b[196], b[259], b[260], b[323], b[324]),
            (1, 1, 0x80, 0x80, 0)
        );
        // The CRC covers the bytes after it too.
        let cp = CpBlock::parse(&b, 512).unwrap();
        let mut flipped = b;
        flipped[4000] ^= 1;
        assert!(CpBlock::parse(&flipped, 512).is_err());
        let cp = Checkpoint::assemble(cp, 1, 512, &[], &layout()).unwrap();
        assert_eq!((cp.sit_bitmap, cp.nat_bitmap), (sit, nat));
    }

    /// The sizes of mkfs.f2fs `-i` on 300 GiB: the NAT bitmap (4288 bytes) runs past the CP
    /// block and the SIT bitmap lies wholly in the payload block.
    #[test]
    fn large_nat_bitmap_runs_on_into_the_payload() {
        let h = large_head(384, 4288, 1);
        let place = BitmapPlace::of(&h, 1, 512).unwrap();
        assert_eq!((place.nat_at, place.sit_at, place.blocks), (196, 4484, 2));
        let sit: Vec<u8> = (0..384).map(|i| i as u8).collect();
        let nat: Vec<u8> = (0..4288).map(|i| (i * 7) as u8).collect();
        let (blocks, _) = place.write(&h, &sit, &nat).unwrap();
        assert_eq!(blocks.len(), 2);
        assert_eq!(blocks[1][4484 - 4096], 0);
        assert_eq!(blocks[1][4484 - 4096 + 1], 1);
        let (s, n) = place.read(&blocks[0], &blocks[1..], 512).unwrap();
        assert_eq!((s, n), (sit, nat));
        // Without its payload block the same head does not fit.
        assert!(matches!(
            BitmapPlace::of(&h, 0, 512),
            Err(CorruptKind::CheckpointBitmaps { payload: 0, .. })
        ));
    }

    #[test]
    fn hostile_large_nat_bitmap_heads_are_refused() {
        // The deprecated layout (CRC at 4092) is refused as Linux 6.1 refuses it.
        let mut h = large_head(64, 64, 0);
        h.checksum_offset.set(CP_CHECKSUM_OFFSET);
        assert!(matches!(
            BitmapPlace::of(&h, 0, 512),
            Err(CorruptKind::CheckpointField { value: 4092, .. })
        ));
        for (sit, nat, payload) in [
            (u32::MAX, 64, 0),
            (64, u32::MAX, 0),
            (u32::MAX, u32::MAX, 511),
            (3900, 1, 0),
            (4096, 4096, 1),
            (64, 64, 512),
            (64, 64, u32::MAX),
        ] {
            let h = large_head(sit, nat, payload.min(100));
            let e = BitmapPlace::of(&h, payload, 512).unwrap_err();
            assert!(
                matches!(e, CorruptKind::CheckpointBitmaps { .. }),
                "{sit} {nat} {payload}: {e}"
            );
            assert!(e.to_string().contains("do not fit"), "{e}");
        }
        // Bitmap sizes that fit the block but not the geometry, and a pack whose summaries
        // start inside the payload, are refused by `assemble`.
        let h = large_head(128, 64, 0);
        let (b, _) = BitmapPlace::of(&h, 0, 512)
            .unwrap()
            .write(&h, &[0; 128], &[0; 64])
            .unwrap();
        let cp = CpBlock::parse(&b[0], 512).unwrap();
        assert!(Checkpoint::assemble(cp, 1, 512, &[], &layout()).is_err());
        let mut h = large_head(64, 64, 1);
        h.cp_pack_start_sum.set(1);
        let (b, _) = BitmapPlace::of(&h, 1, 512)
            .unwrap()
            .write(&h, &[0; 64], &[0; 64])
            .unwrap();
        let cp = CpBlock::parse(&b[0], 512).unwrap();
        let e = Checkpoint::assemble(cp, 1, 512, &b[1..], &layout()).err();
        assert!(
            matches!(
                e,
                Some(FormatError::Corrupt(CorruptKind::CheckpointField {
                    field: "cp_pack_start_sum",
                    ..
                }))
            ),
            "{e:?}"
        );
    }

    #[test]
    fn versions_compare_wrap_safe() {
        assert!(version_after(2, 1));
        assert!(!version_after(1, 1));
        assert!(version_after(0, u64::MAX));
    }
}
