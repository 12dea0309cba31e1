//! `Editing`: an inode being changed, as the copy of its node block that the change edits and
//! commits, with accessors for the fields changes touch and the checksum kept valid.

use crate::error::Result;
use crate::vol::Fs;
use std::time::{SystemTime, UNIX_EPOCH};
use uf2fs_format::inode::{inline_flags, Inode, I_ADDR_OFFSET, I_NID_OFFSET};
use uf2fs_format::superblock::feature;
use uf2fs_format::Block;

pub(crate) fn put(b: &mut [u8], at: usize, bytes: &[u8]) {
    if let Some(dst) = b.get_mut(at..at + bytes.len()) {
        dst.copy_from_slice(bytes);
    }
}

pub(crate) fn get32(b: &Block, at: usize) -> u32 {
    uf2fs_format::le32(b, at).unwrap_or(0)
}

/// The slots `range` of the array of 32-bit slots at byte `first` of `b` that are not 0
/// (NULL_ADDR), with their index, in order. Eight slots at a time are passed over while all
/// are 0: a small file uses a few of its inode's 923 address slots, and looking at each one
/// was most of freeing it.
pub(crate) fn set_slots(
    b: &Block,
    first: usize,
    range: std::ops::Range<usize>,
) -> impl Iterator<Item = (usize, u32)> + '_ {
    const RUN: usize = 8;
    let mut i = range.start;
    let end = range.end;
    std::iter::from_fn(move || {
        while i < end {
            let at = first + 4 * i;
            if i + RUN <= end {
                let wide = b
                    .get(at..at + 4 * RUN)
                    .and_then(|w| <[u8; 32]>::try_from(w).ok())
                    .map(u128_pair_is_zero);
                if wide == Some(true) {
                    i += RUN;
                    continue;
                }
            }
            let k = i;
            i += 1;
            match get32(b, at) {
                0 => continue,
                v => return Some((k, v)),
            }
        }
        None
    })
}

/// Whether 32 bytes are all 0, compared as two 128-bit words.
fn u128_pair_is_zero(w: [u8; 32]) -> bool {
    let (lo, hi) = w.split_at(16);
    let word = |h: &[u8]| <[u8; 16]>::try_from(h).map_or(1, u128::from_ne_bytes);
    word(lo) | word(hi) == 0
}

/// Recomputes the inode checksum (when the feature and the extra size have one), so that a
/// changed inode block is always valid as it stands.
pub(crate) fn fix_checksum(fs: &Fs, b: &mut Block) {
    let sb = &fs.vol().sb;
    let extra = b.get(3).is_some_and(|i| i & inline_flags::EXTRA_ATTR != 0);
    let isize = uf2fs_format::le16(b, I_ADDR_OFFSET).unwrap_or(0);
    if sb.has(feature::INODE_CHKSUM) && extra && isize >= 12 {
        let crc = uf2fs_format::inode::compute_checksum(
            uf2fs_format::inode::checksum_seed(&sb.uuid()),
            b,
        );
        put(b, I_ADDR_OFFSET + 8, &crc.to_le_bytes());
    }
}

/// Parses the inode block being edited (its checksum made valid first).
pub(crate) fn reparse(fs: &Fs, ino: u32, b: &mut Block) -> Result<Inode> {
    fix_checksum(fs, b);
    Ok(Inode::parse(b, ino, &fs.vol().sb)?)
}

impl Fs {
    /// The time a change stamps on inodes: the frozen clock of [`crate::Options::fixed_time`]
    /// when set, else the system's.
    pub(crate) fn clock(&self) -> (u64, u32) {
        match self.vol().options.fixed_time {
            Some(t) => (t, 0),
            None => now(),
        }
    }
}

/// The wall clock as the kernel stamps inodes: its coarse real-time clock (advanced at each
/// timer tick, a few milliseconds), which Linux's `current_time()` reads for F2FS and for
/// every FUSE inode whose times the kernel keeps (the writeback cache). Reading the fine clock
/// here mixed two clocks in one file system: a file the daemon created could show a later
/// change time than one the kernel stamped after it (fstests generic/423 caught it).
pub fn now() -> (u64, u32) {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        let t = rustix::time::clock_gettime(rustix::time::ClockId::RealtimeCoarse);
        if let (Ok(s), Ok(ns)) = (u64::try_from(t.tv_sec), u32::try_from(t.tv_nsec)) {
            return (s, ns);
        }
    }
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    (d.as_secs(), d.subsec_nanos())
}

/// An inode being changed: its node block and what the parsed inode says about its layout.
pub(crate) struct Editing {
    pub ino: u32,
    pub block: crate::node::NodeBuf,
    pub inode: Inode,
    /// The time [`Editing::touch`] stamps (the file system's clock when the edit began).
    pub now: (u64, u32),
    /// What the inode was charged in quota when the edit began (`None`: a new inode, or an
    /// image that keeps no quota).
    pub was: Option<crate::ns::quota_book::Charge>,
}

impl Editing {
    pub(crate) fn extra_words(&self) -> usize {
        usize::from(self.inode.extra_isize / 4)
    }
    pub(crate) fn set_u32(&mut self, at: usize, v: u32) {
        put(&mut self.block[..], at, &v.to_le_bytes());
    }
    pub(crate) fn set_u64(&mut self, at: usize, v: u64) {
        put(&mut self.block[..], at, &v.to_le_bytes());
    }
    pub(crate) fn size(&self) -> u64 {
        uf2fs_format::le64(&self.block[..], 16).unwrap_or(0)
    }
    pub(crate) fn set_size(&mut self, v: u64) {
        self.set_u64(16, v);
    }
    pub(crate) fn add_blocks(&mut self, n: i64) {
        let b = uf2fs_format::le64(&self.block[..], 24).unwrap_or(0);
        self.set_u64(24, b.saturating_add_signed(n));
    }
    /// Adds `n` to `i_compr_blocks` (the blocks a compressed file saves; never below 0).
    pub(crate) fn add_compr_blocks(&mut self, n: i64) {
        let at = I_ADDR_OFFSET + 24;
        let b = uf2fs_format::le64(&self.block[..], at).unwrap_or(0);
        self.set_u64(at, b.saturating_add_signed(n));
    }
    pub(crate) fn links(&self) -> u32 {
        get32(&self.block, 12)
    }
    pub(crate) fn set_links(&mut self, v: u32) {
        self.set_u32(12, v);
    }
    pub(crate) fn inline(&self) -> u8 {
        self.block.get(3).copied().unwrap_or(0)
    }
    pub(crate) fn set_inline(&mut self, v: u8) {
        if let Some(b) = self.block.get_mut(3) {
            *b = v;
        }
    }
    pub(crate) fn touch(&mut self, mtime: bool) {
        let (s, ns) = self.now;
        self.set_u64(40, s);
        self.set_u32(60, ns);
        if mtime {
            self.set_u64(48, s);
            self.set_u32(64, ns);
        }
    }
    /// Byte range of the inline data / dentry area.
    pub(crate) fn inline_range(&self) -> std::ops::Range<usize> {
        let start = I_ADDR_OFFSET + 4 * (self.extra_words() + 1);
        start..start + self.inode.inline_capacity()
    }
    pub(crate) fn addr_slot(&self, i: usize) -> usize {
        I_ADDR_OFFSET + 4 * (self.extra_words() + i)
    }
    pub(crate) fn nid_slot(&self, slot: usize) -> u32 {
        get32(&self.block, I_NID_OFFSET + 4 * slot)
    }
    pub(crate) fn set_nid_slot(&mut self, slot: usize, nid: u32) {
        self.set_u32(I_NID_OFFSET + 4 * slot, nid);
    }
    /// Keeps the inode's largest-extent hint (`i_ext`: file blocks `fofs..fofs+len` at
    /// `blk_addr..`, which Linux loads into its extent cache and reads through without
    /// looking at the nodes) true when the file block stored at `old` moves or goes: the
    /// extent keeps the longer of its two sides of that block. Returns whether it changed.
    /// uf2fs never grows the hint; Linux rebuilds it as it writes.
    pub(crate) fn drop_from_extent(&mut self, old: u32) -> bool {
        use zerocopy::FromBytes;
        let Some(raw) = self
            .block
            .get_mut(..uf2fs_format::node::FOOTER_OFFSET)
            .and_then(|b| uf2fs_format::inode::RawInode::mut_from_bytes(b).ok())
        else {
            return false;
        };
        let x = &mut raw.i_ext;
        let (fofs, blk, len) = (x.fofs.get(), x.blk_addr.get(), x.len.get());
        let Some(k) = old.checked_sub(blk).filter(|&k| k < len) else {
            return false;
        };
        let right = len - k - 1;
        let (fofs, blk, len) = if k >= right {
            (fofs, blk, k)
        } else {
            (fofs.wrapping_add(k + 1), blk + k + 1, right)
        };
        let (fofs, blk) = if len == 0 { (0, 0) } else { (fofs, blk) };
        x.fofs.set(fofs);
        x.blk_addr.set(blk);
        x.len.set(len);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use uf2fs_format::BLOCK_SIZE;

    /// `set_slots` finds exactly the non-zero slots of the range, whatever their place among
    /// the runs of eight it passes over, against a plain look at every slot.
    #[test]
    fn set_slots_finds_every_set_slot_and_no_other() {
        let mut rng = uf2fs_testkit::Rng::from_state(0x5eed_5107);
        for round in 0..200 {
            let mut b: Block = [0u8; BLOCK_SIZE];
            let first = (rng.below(64) * 4) as usize;
            let slots = (BLOCK_SIZE - first) / 4;
            // From none set to many, clustered at the start (a small file) or anywhere.
            let set = rng.below(if round % 2 == 0 { 12 } else { slots as u64 }) as usize;
            for _ in 0..set {
                let k = if round % 3 == 0 {
                    rng.below(16) as usize
                } else {
                    rng.below(slots as u64) as usize
                };
                let v = 1 + rng.below(u64::from(u32::MAX - 1)) as u32;
                put(&mut b, first + 4 * k, &v.to_le_bytes());
            }
            let lo = rng.below(slots as u64) as usize;
            let hi = lo + rng.below((slots - lo) as u64 + 1) as usize;
            let want: Vec<(usize, u32)> = (lo..hi)
                .map(|k| (k, get32(&b, first + 4 * k)))
                .filter(|&(_, v)| v != 0)
                .collect();
            let got: Vec<(usize, u32)> = set_slots(&b, first, lo..hi).collect();
            assert_eq!(got, want, "round {round}: first {first}, slots {lo}..{hi}");
        }
    }
}
