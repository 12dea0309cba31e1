//! The F2FS on-disk format as Linux 6.1 and f2fs-tools 1.15 write it: pure byte layouts.
//!
//! One module per on-disk structure. Every structure is a `zerocopy` little-endian struct
//! whose size is checked at compile time, plus one validating constructor that checks magic,
//! checksums, counts and bounds before anything else may use the value. This crate does no
//! I/O and holds no state; the engine reads blocks and hands them here.
//!
//! Errors are of two kinds (the engine adds a third, I/O): [`Incompatible`] for a feature we
//! do not support, named, and [`CorruptKind`] for bytes that break a rule, with the place.

pub mod casefold;
mod casefold_tables;
pub mod checkpoint;
pub mod compress;
pub mod crc;
pub mod dentry;
pub mod error;
pub mod fscrypt;
pub mod geometry;
pub mod hash;
pub mod inode;
pub mod lzo;
pub mod nat;
pub mod node;
pub mod quota;
pub mod sit;
pub mod summary;
pub mod superblock;
pub mod xattr;

pub use error::{CorruptKind, FormatError, Incompatible};

/// Every F2FS block is 4 KiB; the kernel refuses any other `log_blocksize`.
pub const BLOCK_SIZE: usize = 4096;
/// Blocks per segment; the kernel refuses any other `log_blocks_per_seg`.
pub const BLOCKS_PER_SEG: u32 = 512;
/// NAT entries in one NAT block (9 bytes each). Here, below both `nat` and `superblock`,
/// which need it (the superblock sizes the NAT with it).
pub const NAT_ENTRIES_PER_BLOCK: usize = 455;
/// SIT entries in one SIT block (74 bytes each); below `sit` and `superblock` likewise.
pub const SIT_ENTRIES_PER_BLOCK: usize = 55;
/// One 4 KiB block.
pub type Block = [u8; BLOCK_SIZE];

/// Block address of a hole.
pub const NULL_ADDR: u32 = 0;
/// Block address of a block reserved (fallocated) but never written: reads as zeros.
pub const NEW_ADDR: u32 = 0xFFFF_FFFF;
/// First slot of a compressed cluster.
pub const COMPRESS_ADDR: u32 = 0xFFFF_FFFE;

/// Whether a data slot names a block (not a hole, NEW_ADDR or COMPRESS_ADDR). Only then may
/// the address be range-checked, read, invalidated or owned.
pub fn names_block(addr: u32) -> bool {
    addr != NULL_ADDR && addr != NEW_ADDR && addr != COMPRESS_ADDR
}

/// Reads bit `n` of an MSB-first bitmap (CP version bitmaps, SIT valid maps).
pub fn test_bit_msb(map: &[u8], n: usize) -> bool {
    map.get(n / 8).is_some_and(|b| b & (0x80 >> (n % 8)) != 0)
}

/// Reads bit `n` of an LSB-first bitmap (dentry bitmaps, nat_bits).
pub fn test_bit_lsb(map: &[u8], n: usize) -> bool {
    map.get(n / 8).is_some_and(|b| b & (1 << (n % 8)) != 0)
}

/// The first bit set in `map` (least significant bit first, as [`test_bit_lsb`]) at or after
/// `from` and before `end`, a byte at a time: a dentry area's free slots are passed over
/// eight at a time instead of one by one.
pub fn next_bit_lsb(map: &[u8], from: usize, end: usize) -> Option<usize> {
    let mut byte = from / 8;
    let mut bits = map.get(byte)? & (0xffu8 << (from % 8));
    loop {
        if bits != 0 {
            let n = byte * 8 + bits.trailing_zeros() as usize;
            return (n < end).then_some(n);
        }
        byte += 1;
        if byte * 8 >= end {
            return None;
        }
        bits = *map.get(byte)?;
    }
}

/// Copies a fixed-size array out of a slice that is known to be long enough, or fails with
/// the given corruption kind.
pub(crate) fn slice_at(
    bytes: &[u8],
    start: usize,
    len: usize,
    err: impl FnOnce() -> CorruptKind,
) -> Result<&[u8], CorruptKind> {
    start
        .checked_add(len)
        .and_then(|end| bytes.get(start..end))
        .ok_or_else(err)
}

/// Little-endian u16 at byte `at`, if the slice is long enough.
pub fn le16(b: &[u8], at: usize) -> Option<u16> {
    b.get(at..at.checked_add(2)?)?
        .try_into()
        .ok()
        .map(u16::from_le_bytes)
}

/// Little-endian u32 at byte `at`, if the slice is long enough.
pub fn le32(b: &[u8], at: usize) -> Option<u32> {
    b.get(at..at.checked_add(4)?)?
        .try_into()
        .ok()
        .map(u32::from_le_bytes)
}

/// Little-endian u64 at byte `at`, if the slice is long enough.
pub fn le64(b: &[u8], at: usize) -> Option<u64> {
    b.get(at..at.checked_add(8)?)?
        .try_into()
        .ok()
        .map(u64::from_le_bytes)
}

#[cfg(test)]
mod bit_tests {
    use super::{next_bit_lsb, test_bit_lsb};
    use proptest::prelude::*;

    proptest! {
        /// `next_bit_lsb` finds what a look at every bit from `from` on finds, for maps
        /// shorter, as long as and longer than `end` covers.
        #[test]
        fn next_bit_is_the_first_set_bit_a_scan_finds(
            map in proptest::collection::vec(any::<u8>().prop_map(|b| b & b.rotate_left(3)), 0..40),
            from in 0usize..330,
            end in 0usize..330,
        ) {
            let scan = (from..end).find(|&n| test_bit_lsb(&map, n));
            prop_assert_eq!(next_bit_lsb(&map, from, end), scan);
        }
    }
}
