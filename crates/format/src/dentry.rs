//! Directory entries: the 4 KiB dentry block (214 slots) and the inline dentry area of an
//! inode (slot count from the area's size). Both are a bitmap (LSB-first), an array of 11-byte
//! entries and an array of 8-byte name slots; a name of L bytes takes ceil(L/8) slots and its
//! entry sits in the first.

use crate::inode::{FileType, MAX_NAME_LEN};
use crate::BLOCK_SIZE;
use crate::{le16, le32, next_bit_lsb, test_bit_lsb};

pub const NR_DENTRY_IN_BLOCK: usize = 214;
pub const DENTRY_BITMAP_SIZE: usize = 27;
pub const DENTRY_RESERVED: usize = 3;
pub const DIR_ENTRY_SIZE: usize = 11;
pub const SLOT_LEN: usize = 8;

/// Slots a name of `len` bytes occupies.
pub fn slots_for(len: usize) -> usize {
    len.div_ceil(SLOT_LEN)
}

/// Geometry of an inline dentry area of `size` bytes: (slots, bitmap bytes, reserved bytes).
pub fn inline_geometry(size: usize) -> (usize, usize, usize) {
    let n = size * 8 / ((DIR_ENTRY_SIZE + SLOT_LEN) * 8 + 1);
    let bitmap = n.div_ceil(8);
    let reserved = size - (DIR_ENTRY_SIZE + SLOT_LEN) * n - bitmap;
    (n, bitmap, reserved)
}

/// One used entry of a dentry area.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry<'a> {
    pub slot: usize,
    pub hash: u32,
    pub ino: u32,
    pub name: &'a [u8],
    /// `None` for a type code the kernel does not know (it reports DT_UNKNOWN).
    pub file_type: Option<FileType>,
}

/// Why an entry could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DentryError {
    pub slot: usize,
    pub why: &'static str,
}

/// A dentry area: a whole dentry block or an inode's inline area.
#[derive(Clone, Copy)]
pub struct DentryArea<'a> {
    bitmap: &'a [u8],
    entries: &'a [u8],
    names: &'a [u8],
    slots: usize,
}

impl<'a> DentryArea<'a> {
    pub fn block(b: &'a [u8; BLOCK_SIZE]) -> DentryArea<'a> {
        let n = NR_DENTRY_IN_BLOCK;
        let e0 = DENTRY_BITMAP_SIZE + DENTRY_RESERVED;
        let n0 = e0 + n * DIR_ENTRY_SIZE;
        DentryArea {
            bitmap: b.get(..DENTRY_BITMAP_SIZE).unwrap_or(&[]),
            entries: b.get(e0..n0).unwrap_or(&[]),
            names: b.get(n0..n0 + n * SLOT_LEN).unwrap_or(&[]),
            slots: n,
        }
    }

    pub fn inline(area: &'a [u8]) -> DentryArea<'a> {
        let (n, bitmap, reserved) = inline_geometry(area.len());
        let e0 = bitmap + reserved;
        let n0 = e0 + n * DIR_ENTRY_SIZE;
        DentryArea {
            bitmap: area.get(..bitmap).unwrap_or(&[]),
            entries: area.get(e0..n0).unwrap_or(&[]),
            names: area.get(n0..n0 + n * SLOT_LEN).unwrap_or(&[]),
            slots: n,
        }
    }

    pub fn slots(&self) -> usize {
        self.slots
    }

    pub fn is_used(&self, slot: usize) -> bool {
        slot < self.slots && test_bit_lsb(self.bitmap, slot)
    }

    fn raw_entry(&self, slot: usize) -> Option<(u32, u32, u16, u8)> {
        let at = slot * DIR_ENTRY_SIZE;
        let e = self.entries.get(at..at + DIR_ENTRY_SIZE)?;
        Some((le32(e, 0)?, le32(e, 4)?, le16(e, 8)?, *e.get(10)?))
    }

    /// The entries in slot order. An entry with name length 0 is skipped, as the kernel does;
    /// a name that runs past the last slot or over 255 bytes is an error.
    pub fn iter(&self) -> DentryIter<'a> {
        DentryIter {
            area: *self,
            slot: 0,
            hash: None,
        }
    }

    /// [`DentryArea::iter`] for a lookup: only the entries whose stored hash is `hash`. The
    /// others are checked as far as passing over them needs (their name's length and slots)
    /// and not handed out, so a lookup in a full area does not look at their names.
    pub fn iter_hash(&self, hash: u32) -> DentryIter<'a> {
        DentryIter {
            area: *self,
            slot: 0,
            hash: Some(hash),
        }
    }
}

pub struct DentryIter<'a> {
    area: DentryArea<'a>,
    slot: usize,
    /// Only entries with this hash ([`DentryArea::iter_hash`]).
    hash: Option<u32>,
}

impl<'a> Iterator for DentryIter<'a> {
    type Item = Result<DirEntry<'a>, DentryError>;

    fn next(&mut self) -> Option<Self::Item> {
        let a = self.area;
        while let Some(slot) = next_bit_lsb(a.bitmap, self.slot, a.slots) {
            let Some((hash, ino, name_len, code)) = a.raw_entry(slot) else {
                self.slot = a.slots;
                return Some(Err(DentryError {
                    slot,
                    why: "entry outside the area",
                }));
            };
            let len = usize::from(name_len);
            if len == 0 {
                self.slot = slot + 1;
                continue;
            }
            let nslots = slots_for(len);
            if len > MAX_NAME_LEN || slot + nslots > a.slots {
                self.slot = a.slots;
                return Some(Err(DentryError {
                    slot,
                    why: "name runs past the last slot",
                }));
            }
            let start = slot * SLOT_LEN;
            let Some(name) = a.names.get(start..start + len) else {
                self.slot = a.slots;
                return Some(Err(DentryError {
                    slot,
                    why: "name outside the area",
                }));
            };
            self.slot = slot + nslots;
            if self.hash.is_some_and(|h| h != hash) {
                continue;
            }
            return Some(Ok(DirEntry {
                slot,
                hash,
                ino,
                name,
                file_type: FileType::from_dentry_code(code),
            }));
        }
        self.slot = a.slots;
        None
    }
}

/// Hash buckets at `level` of a directory with `dir_level`.
pub fn buckets_at(level: u32, dir_level: u8) -> u64 {
    let l = level.saturating_add(u32::from(dir_level));
    if l < 31 {
        1u64 << l
    } else {
        1u64 << 30
    }
}

/// Blocks per bucket at `level`.
pub fn blocks_per_bucket(level: u32) -> u64 {
    if level < 31 {
        2
    } else {
        4
    }
}

/// First block (index in the directory's data) of `bucket` at `level`.
pub fn bucket_block(level: u32, dir_level: u8, bucket: u64) -> u64 {
    let before: u64 = (0..level)
        .map(|l| buckets_at(l, dir_level) * blocks_per_bucket(l))
        .sum();
    before + bucket * blocks_per_bucket(level)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_geometry_matches_linux() {
        assert_eq!(inline_geometry(3452), (180, 23, 9));
        assert_eq!(inline_geometry(3488), (182, 23, 7));
        assert_eq!(inline_geometry(3688), (192, 24, 16));
    }

    #[test]
    fn levels_start_where_the_kernel_puts_them() {
        assert_eq!(bucket_block(1, 0, 0), 2);
        assert_eq!(bucket_block(2, 0, 0), 6);
        assert_eq!(bucket_block(3, 0, 0), 14);
        assert_eq!(bucket_block(4, 0, 1), 32);
    }

    fn block_with(slot: usize, name: &[u8], name_len: u16) -> [u8; BLOCK_SIZE] {
        let mut b = [0u8; BLOCK_SIZE];
        b[slot / 8] |= 1 << (slot % 8);
        let e = 30 + slot * 11;
        b[e + 4..e + 8].copy_from_slice(&7u32.to_le_bytes());
        b[e + 8..e + 10].copy_from_slice(&name_len.to_le_bytes());
        b[e + 10] = 1;
        let n = 2384 + slot * 8;
        let len = name.len().min(BLOCK_SIZE - n);
        b[n..n + len].copy_from_slice(&name[..len]);
        b
    }

    #[test]
    fn long_name_spans_slots() {
        let name = [b'x'; 20];
        let b = block_with(3, &name, 20);
        let all: Vec<_> = DentryArea::block(&b).iter().collect();
        assert_eq!(all.len(), 1);
        let e = all[0].as_ref().unwrap();
        assert_eq!((e.slot, e.ino, e.name), (3, 7, &name[..]));
    }

    #[test]
    fn name_past_last_slot_is_an_error_not_a_panic() {
        let b = block_with(213, b"abcdefghij", 10);
        let all: Vec<_> = DentryArea::block(&b).iter().collect();
        assert_eq!(
            all,
            vec![Err(DentryError {
                slot: 213,
                why: "name runs past the last slot"
            })]
        );
    }

    #[test]
    fn zero_length_name_is_skipped_like_the_kernel() {
        let b = block_with(5, b"", 0);
        assert_eq!(DentryArea::block(&b).iter().count(), 0);
    }
}
