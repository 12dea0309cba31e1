//! The F2FS checksum: CRC-32 (reflected polynomial 0xEDB88320) with a caller-chosen initial
//! register and no final inversion. Seeds: 0xF2F52010 (the magic) for the superblock and
//! checkpoint blocks; for inodes, the CRC of the volume uuid with seed 0xFFFFFFFF.
//!
//! `crc32fast` computes the standard CRC-32, which inverts the register on the way in and out;
//! inverting the seed and the result turns it into F2FS's raw register form.

/// CRC seed for the superblock and checkpoint blocks (the F2FS magic).
pub const F2FS_SUPER_MAGIC: u32 = 0xF2F5_2010;

/// F2FS CRC of `data` starting from register `seed`.
pub fn f2fs_crc32(seed: u32, data: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new_with_initial(!seed);
    h.update(data);
    !h.finalize()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc_matches_reference_vectors() {
        assert_eq!(f2fs_crc32(F2FS_SUPER_MAGIC, b"123456789"), 0x1657_A0C3);
        assert_eq!(f2fs_crc32(0xFFFF_FFFF, b"123456789"), 0x340B_C6D9);
    }

    #[test]
    fn crc_chains_like_one_pass() {
        let a = f2fs_crc32(7, b"12345");
        assert_eq!(f2fs_crc32(a, b"6789"), f2fs_crc32(7, b"123456789"));
    }
}
