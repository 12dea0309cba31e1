//! The dentry name hash (TEA over 16-byte chunks of the name), as F2FS stores it in every
//! directory entry and uses to pick a hash bucket. '.' and '..' hash to 0. All 32 bits are
//! kept (the "collision bit" mask in the C code is a no-op on a 32-bit value).

const DELTA: u32 = 0x9E37_79B9;

fn tea_transform(buf: &mut [u32; 4], key: &[u32; 4]) {
    let (mut b0, mut b1) = (buf[0], buf[1]);
    let mut sum: u32 = 0;
    for _ in 0..16 {
        sum = sum.wrapping_add(DELTA);
        b0 = b0.wrapping_add(
            (b1 << 4).wrapping_add(key[0]) ^ b1.wrapping_add(sum) ^ (b1 >> 5).wrapping_add(key[1]),
        );
        b1 = b1.wrapping_add(
            (b0 << 4).wrapping_add(key[2]) ^ b0.wrapping_add(sum) ^ (b0 >> 5).wrapping_add(key[3]),
        );
    }
    buf[0] = buf[0].wrapping_add(b0);
    buf[1] = buf[1].wrapping_add(b1);
}

/// Packs the first (at most) 16 bytes of `rest` into four words, each word starting as the
/// padding pattern (the remaining length in every byte) with the bytes shifted in.
fn chunk_words(rest: &[u8]) -> [u32; 4] {
    // The C code truncates the remaining length to 32 bits; names are at most 255 bytes.
    let len = rest.len() as u32;
    let pad = len | (len << 8) | (len << 16) | (len << 24);
    let mut words = [pad; 4];
    let mut val = pad;
    let mut wi = 0;
    for (i, &b) in rest.iter().take(16).enumerate() {
        if i % 4 == 0 {
            val = pad;
        }
        val = u32::from(b).wrapping_add(val << 8);
        if i % 4 == 3 {
            if let Some(w) = words.get_mut(wi) {
                *w = val;
            }
            wi += 1;
            val = pad;
        }
    }
    if !rest.len().min(16).is_multiple_of(4) {
        if let Some(w) = words.get_mut(wi) {
            *w = val;
        }
    }
    words
}

/// The F2FS hash of a directory entry name.
pub fn dentry_hash(name: &[u8]) -> u32 {
    if name == b"." || name == b".." {
        return 0;
    }
    let mut buf: [u32; 4] = [0x6745_2301, 0xEFCD_AB89, 0x98BA_DCFE, 0x1032_5476];
    let mut rest = name;
    loop {
        let key = chunk_words(rest);
        tea_transform(&mut buf, &key);
        if rest.len() <= 16 {
            break;
        }
        rest = rest.get(16..).unwrap_or(&[]);
    }
    buf[0]
}

#[cfg(test)]
mod tests {
    use super::dentry_hash;

    #[test]
    fn hash_matches_names_seen_on_real_images() {
        assert_eq!(dentry_hash(b"lost+found"), 0x2DBF_9E80);
        assert_eq!(dentry_hash(b"small.txt"), 0xB5D8_2C3F);
        assert_eq!(dentry_hash(b"a"), 0x6D0E_A4C1);
        assert_eq!(dentry_hash(b"file_with_long_name_0000"), 0x6AF8_0B6D);
        assert_eq!(dentry_hash(b"link"), 0x803C_D15A);
        assert_eq!(dentry_hash(b"f1"), 0xFEF5_5BB8);
        assert_eq!(dentry_hash(b"sub"), 0x8A5E_726C);
        assert_eq!(dentry_hash(b"newf"), 0x230F_5C78);
    }

    #[test]
    fn dots_hash_to_zero() {
        assert_eq!(dentry_hash(b"."), 0);
        assert_eq!(dentry_hash(b".."), 0);
    }
}
