//! fscrypt on F2FS, as Linux 6.1 keeps it and shows it without the key: the encryption
//! context (xattr index 9, name "c"), the names an encrypted directory lists when no key is
//! present ("no-key names"), and the stored form of an encrypted symlink's target.
//!
//! This is the one place that knows how encrypted names look; a later decryption with a
//! supplied key plugs in here (the context carries the modes, flags, key identity and the
//! per-file nonce it needs).
//!
//! **Context** (`fscrypt_context`, 28 bytes for v1, 40 for v2):
//!
//! ```text
//! v1: 0 version=1 | 1 contents mode | 2 names mode | 3 flags | 4 key descriptor[8] | 12 nonce[16]
//! v2: 0 version=2 | 1 contents mode | 2 names mode | 3 flags | 4 reserved[4]=0
//!     | 8 key identifier[16] | 24 nonce[16]
//! ```
//!
//! **No-key name.** An on-disk name is ciphertext of at least 16 bytes (names are padded
//! before encryption; '.' and '..' are stored plain). Without the key Linux shows it as the
//! unpadded base64url (RFC 4648 alphabet `A-Za-z0-9-_`, no '=') of a byte string made of the
//! directory hash as two little-endian u32 words (F2FS gives the dentry's stored hash and 0),
//! then the ciphertext when it is at most 149 bytes, or else its first 149 bytes followed by
//! the SHA-256 of the rest (189 bytes in all, 252 characters). A lookup decodes the name:
//! a full ciphertext is compared byte for byte, an abbreviated one by its prefix and digest;
//! in both cases only entries whose stored hash equals the decoded one are looked at.
//!
//! **Symlink target.** The data of an encrypted symlink is `{len u16, ciphertext[len]}`;
//! without the key Linux shows the no-key form of the ciphertext with a hash of 0, 0.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use sha2::{Digest, Sha256};

/// Ciphertext names are never shorter (`FSCRYPT_FNAME_MIN_MSG_LEN`); a shorter one is
/// corruption (Linux's readdir fails with EUCLEAN).
pub const MIN_CIPHERTEXT_NAME: usize = 16;
/// Ciphertext bytes a no-key name carries whole.
pub const NOKEY_BYTES: usize = 149;
/// Bytes of the longest decoded no-key name: hash words, 149 bytes, SHA-256.
pub const NOKEY_NAME_MAX: usize = 8 + NOKEY_BYTES + 32;
/// Characters of the longest encoded no-key name (252, within NAME_MAX).
pub const NOKEY_NAME_MAX_ENCODED: usize = (NOKEY_NAME_MAX * 4).div_ceil(3);

/// Encryption modes by number (`FSCRYPT_MODE_*`).
pub fn mode_name(mode: u8) -> &'static str {
    match mode {
        1 => "AES-256-XTS",
        2 => "AES-256-GCM",
        3 => "AES-256-CBC",
        4 => "AES-256-CTS",
        5 => "AES-128-CBC",
        6 => "AES-128-CTS",
        7 => "SM4-XTS",
        8 => "SM4-CTS",
        9 => "Adiantum",
        10 => "AES-256-HCTR2",
        _ => "unknown",
    }
}

/// Policy flags Linux 6.1 defines: padding (2 bits), DIRECT_KEY, IV_INO_LBLK_64,
/// IV_INO_LBLK_32.
pub const KNOWN_FLAGS: u8 = 0x1F;

/// Which master key a file needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyRef {
    /// A v1 policy: the 8-byte key descriptor.
    Descriptor([u8; 8]),
    /// A v2 policy: the 16-byte key identifier (a hash of the key itself).
    Identifier([u8; 16]),
}

impl std::fmt::Display for KeyRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (what, bytes): (&str, &[u8]) = match self {
            KeyRef::Descriptor(d) => ("v1 key descriptor", d),
            KeyRef::Identifier(i) => ("v2 key identifier", i),
        };
        write!(f, "{what} ")?;
        for b in bytes {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

/// A checked encryption context.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Context {
    pub contents_mode: u8,
    pub filenames_mode: u8,
    pub flags: u8,
    pub key: KeyRef,
    pub nonce: [u8; 16],
}

/// Why a context was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ContextError {
    #[error("empty encryption context")]
    Empty,
    #[error("unknown encryption context version {0}")]
    Version(u8),
    #[error("encryption context of {len} bytes (version {version} has {want})")]
    Size {
        version: u8,
        len: usize,
        want: usize,
    },
    #[error("encryption context has unknown flags {0:#x}")]
    Flags(u8),
    #[error("v2 encryption context has nonzero reserved bytes")]
    Reserved,
}

fn array<const N: usize>(b: &[u8], at: usize) -> [u8; N] {
    let mut out = [0u8; N];
    if let Some(src) = b.get(at..at + N) {
        out.copy_from_slice(src);
    }
    out
}

impl Context {
    /// Checks and reads the value of the "c" xattr of index 9. Modes are kept as numbers
    /// (a later decryption refuses the ones it lacks); sizes, version, flags and reserved
    /// bytes are checked as Linux's `fscrypt_policy_from_context` does.
    pub fn parse(b: &[u8]) -> Result<Context, ContextError> {
        let version = *b.first().ok_or(ContextError::Empty)?;
        let want = match version {
            1 => 28,
            2 => 40,
            v => return Err(ContextError::Version(v)),
        };
        if b.len() != want {
            return Err(ContextError::Size {
                version,
                len: b.len(),
                want,
            });
        }
        let head: [u8; 4] = array(b, 0);
        let [_, contents_mode, filenames_mode, flags] = head;
        if flags & !KNOWN_FLAGS != 0 {
            return Err(ContextError::Flags(flags));
        }
        let (key, nonce_at) = if version == 1 {
            (KeyRef::Descriptor(array(b, 4)), 12)
        } else {
            if array::<4>(b, 4) != [0; 4] {
                return Err(ContextError::Reserved);
            }
            (KeyRef::Identifier(array(b, 8)), 24)
        };
        Ok(Context {
            contents_mode,
            filenames_mode,
            flags,
            key,
            nonce: array(b, nonce_at),
        })
    }

    pub fn version(&self) -> u8 {
        match self.key {
            KeyRef::Descriptor(_) => 1,
            KeyRef::Identifier(_) => 2,
        }
    }

    /// Name padding in bytes (4, 8, 16 or 32).
    pub fn padding(&self) -> usize {
        4 << (self.flags & 3)
    }
}

/// Why an on-disk encrypted name has no no-key form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    #[error("encrypted name of {0} bytes is shorter than 16")]
    TooShort(usize),
}

fn is_dot_or_dotdot(name: &[u8]) -> bool {
    name == b"." || name == b".."
}

/// The name Linux 6.1 lists for the on-disk (ciphertext) name `disk` of an encrypted
/// directory without its key; `hash` is the dentry's stored hash (and the minor hash is 0
/// on F2FS). '.' and '..' are shown as they are. There is no upper bound here: a dentry
/// holds at most 255 bytes, but a symlink's ciphertext runs up to a block.
pub fn nokey_name(disk: &[u8], hash: u32, minor_hash: u32) -> Result<Vec<u8>, NameError> {
    if is_dot_or_dotdot(disk) {
        return Ok(disk.to_vec());
    }
    if disk.len() < MIN_CIPHERTEXT_NAME {
        return Err(NameError::TooShort(disk.len()));
    }
    let mut raw = Vec::with_capacity(NOKEY_NAME_MAX);
    raw.extend_from_slice(&hash.to_le_bytes());
    raw.extend_from_slice(&minor_hash.to_le_bytes());
    match (disk.get(..NOKEY_BYTES), disk.get(NOKEY_BYTES..)) {
        (Some(head), Some(rest)) if !rest.is_empty() => {
            raw.extend_from_slice(head);
            raw.extend_from_slice(&Sha256::digest(rest));
        }
        _ => raw.extend_from_slice(disk),
    }
    Ok(URL_SAFE_NO_PAD.encode(raw).into_bytes())
}

/// What a no-key name stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoKeyTarget {
    /// The whole ciphertext (at most 149 bytes).
    Full(Vec<u8>),
    /// The first 149 bytes of a longer ciphertext and the SHA-256 of the rest.
    Abbreviated {
        head: [u8; NOKEY_BYTES],
        digest: [u8; 32],
    },
}

/// A decoded no-key name: the hash to look in and what to compare.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoKeyName {
    pub hash: u32,
    pub minor_hash: u32,
    pub target: NoKeyTarget,
}

/// Decodes base64url as Linux's decoder does: no padding, no other characters, unused
/// trailing bits zero. The `base64` crate's URL_SAFE_NO_PAD engine agrees but for one case:
/// a length of 4k+1 whose last character carries only zero bits ('A'), which Linux accepts
/// as if that character were absent and the crate refuses.
fn base64url_decode(s: &[u8]) -> Option<Vec<u8>> {
    let s = match s.split_last() {
        Some((b'A', rest)) if s.len() % 4 == 1 => rest,
        _ => s,
    };
    URL_SAFE_NO_PAD.decode(s).ok()
}

impl NoKeyName {
    /// Decodes `name` as a lookup in an encrypted directory without its key does. `None`
    /// when it cannot be a no-key name (Linux answers ENOENT then): too long, not base64url,
    /// or a decoded size that is neither 9..=157 bytes nor exactly 189.
    pub fn decode(name: &[u8]) -> Option<NoKeyName> {
        if name.len() > NOKEY_NAME_MAX_ENCODED {
            return None;
        }
        let raw = base64url_decode(name)?;
        let n = raw.len();
        if n < 9 || (n > 8 + NOKEY_BYTES && n != NOKEY_NAME_MAX) {
            return None;
        }
        let hash = u32::from_le_bytes(array(&raw, 0));
        let minor_hash = u32::from_le_bytes(array(&raw, 4));
        let target = if n == NOKEY_NAME_MAX {
            NoKeyTarget::Abbreviated {
                head: array(&raw, 8),
                digest: array(&raw, 8 + NOKEY_BYTES),
            }
        } else {
            NoKeyTarget::Full(raw.get(8..).unwrap_or(&[]).to_vec())
        };
        Some(NoKeyName {
            hash,
            minor_hash,
            target,
        })
    }

    /// Whether on-disk name `disk` is the one this no-key name stands for (the caller
    /// compares stored hashes).
    pub fn matches(&self, disk: &[u8]) -> bool {
        match &self.target {
            NoKeyTarget::Full(c) => c.as_slice() == disk,
            NoKeyTarget::Abbreviated { head, digest } => match disk.split_at_checked(NOKEY_BYTES) {
                Some((h, rest)) if !rest.is_empty() && h == head.as_slice() => {
                    Sha256::digest(rest).as_slice() == digest.as_slice()
                }
                _ => false,
            },
        }
    }
}

/// Why an encrypted symlink's stored target cannot be shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SymlinkError {
    #[error("encrypted symlink data of {0} bytes is too short")]
    Short(usize),
    #[error("encrypted symlink target length {len} exceeds the {avail} bytes stored")]
    Length { len: usize, avail: usize },
    #[error("encrypted symlink target: {0}")]
    Name(NameError),
}

/// The target Linux 6.1 shows for an encrypted symlink without its key, from its stored
/// data (`i_size` bytes): `{len u16, ciphertext}`, then the no-key form of the ciphertext
/// with hash 0, 0. Linux checks the length against the block, not `i_size`; we require the
/// ciphertext to be inside `i_size`, which every writer keeps.
pub fn symlink_nokey_target(data: &[u8]) -> Result<Vec<u8>, SymlinkError> {
    if data.len() < 3 {
        return Err(SymlinkError::Short(data.len()));
    }
    let len = usize::from(u16::from_le_bytes(array(data, 0)));
    let avail = data.len() - 2;
    let cipher = data
        .get(2..2 + len)
        .filter(|_| len > 0)
        .ok_or(SymlinkError::Length { len, avail })?;
    nokey_name(cipher, 0, 0).map_err(SymlinkError::Name)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing, reason = "tests")]
    use super::*;

    #[test]
    fn short_names_carry_the_whole_ciphertext() {
        let c: Vec<u8> = (0u8..16).collect();
        let n = nokey_name(&c, 0x1234_5678, 0).unwrap();
        // 8 + 16 = 24 bytes -> 32 characters, no padding.
        assert_eq!(n.len(), 32);
        assert_eq!(&n[..12], b"eFY0EgAAAAAA");
        let d = NoKeyName::decode(&n).unwrap();
        assert_eq!(d.hash, 0x1234_5678);
        assert_eq!(d.minor_hash, 0);
        assert_eq!(d.target, NoKeyTarget::Full(c.clone()));
        assert!(d.matches(&c));
        assert!(!d.matches(&c[..15]));
    }

    #[test]
    fn long_names_are_abbreviated_with_sha256() {
        let c: Vec<u8> = (0..255u32).map(|i| (i * 7) as u8).collect();
        let n = nokey_name(&c, 7, 0).unwrap();
        assert_eq!(n.len(), NOKEY_NAME_MAX_ENCODED);
        assert_eq!(NOKEY_NAME_MAX_ENCODED, 252);
        let d = NoKeyName::decode(&n).unwrap();
        assert!(matches!(d.target, NoKeyTarget::Abbreviated { .. }));
        assert!(d.matches(&c));
        let mut other = c.clone();
        other[200] ^= 1;
        assert!(!d.matches(&other));
        assert!(!d.matches(&c[..NOKEY_BYTES]));
        // 149 bytes exactly stay whole; 150 are abbreviated.
        assert_eq!(
            nokey_name(&c[..149], 0, 0).unwrap().len(),
            (157 * 4usize).div_ceil(3)
        );
        assert_eq!(nokey_name(&c[..150], 0, 0).unwrap().len(), 252);
    }

    #[test]
    fn dots_pass_and_short_names_are_refused() {
        assert_eq!(nokey_name(b".", 0, 0).unwrap(), b".");
        assert_eq!(nokey_name(b"..", 0, 0).unwrap(), b"..");
        assert_eq!(nokey_name(b"abc", 0, 0), Err(NameError::TooShort(3)));
        // Symlink targets run past 255 bytes; they are abbreviated like long names.
        assert_eq!(nokey_name(&[0; 4000], 0, 0).unwrap().len(), 252);
    }

    #[test]
    fn decode_refuses_what_linux_refuses() {
        assert!(NoKeyName::decode(b"").is_none());
        assert!(NoKeyName::decode(b"AAAAAAAAAAA").is_none()); // 8 bytes: no ciphertext
        assert!(NoKeyName::decode(b"AAAAAAAAAAAA").is_some()); // 9 bytes
        assert!(NoKeyName::decode(b"AAAAAAAAAAA=").is_none());
        assert!(NoKeyName::decode(b"AAAAAAAAAA/A").is_none());
        assert!(NoKeyName::decode(b"AAAAAAAAAAAB").is_some());
        assert!(NoKeyName::decode(b"AAAAAAAAAAB").is_none()); // nonzero trailing bits
        assert!(NoKeyName::decode(&[b'A'; 253]).is_none()); // too long
                                                            // 158..=188 decoded bytes: neither whole nor abbreviated.
        assert!(NoKeyName::decode(&URL_SAFE_NO_PAD.encode([0u8; 170]).into_bytes()).is_none());
        // Linux's decoder takes a lone trailing 'A' as no bits.
        let n = nokey_name(&[9; 16], 3, 0).unwrap();
        assert_eq!(n.len(), 32);
        let mut alias = n.clone();
        alias.push(b'A');
        assert_eq!(NoKeyName::decode(&alias), NoKeyName::decode(&n));
        alias.pop();
        alias.push(b'B');
        assert!(NoKeyName::decode(&alias).is_none());
    }

    #[test]
    fn arbitrary_bytes_never_panic() {
        // A small LCG: every length 0..=300 with a few contents each, decoded as a lookup
        // name, as a symlink's data, as a context, and as an on-disk name.
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for len in 0..=300usize {
            for _ in 0..8 {
                let b: Vec<u8> = (0..len)
                    .map(|_| {
                        x = x
                            .wrapping_mul(6364136223846793005)
                            .wrapping_add(1442695040888963407);
                        let v = (x >> 33) as u8;
                        // Half the time from the base64url alphabet, so decoding gets far.
                        if x & 1 == 0 {
                            b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
                                [usize::from(v % 64)]
                        } else {
                            v
                        }
                    })
                    .collect();
                if let Some(n) = NoKeyName::decode(&b) {
                    let _ = n.matches(&b);
                }
                let _ = symlink_nokey_target(&b);
                let _ = Context::parse(&b);
                if let Ok(n) = nokey_name(&b, 1, 2) {
                    let d = NoKeyName::decode(&n).unwrap();
                    assert!(d.matches(&b) || b == b"." || b == b"..");
                }
            }
        }
    }

    #[test]
    fn contexts() {
        let mut v2 = vec![2, 1, 4, 2, 0, 0, 0, 0];
        v2.extend(1..=16u8);
        v2.extend([0xAA; 16]);
        let c = Context::parse(&v2).unwrap();
        assert_eq!(c.version(), 2);
        assert_eq!((c.contents_mode, c.filenames_mode, c.padding()), (1, 4, 16));
        assert_eq!(
            c.key.to_string(),
            "v2 key identifier 0102030405060708090a0b0c0d0e0f10"
        );
        let mut bad = v2.clone();
        bad[5] = 1;
        assert_eq!(Context::parse(&bad), Err(ContextError::Reserved));
        bad = v2.clone();
        bad[3] = 0x20;
        assert_eq!(Context::parse(&bad), Err(ContextError::Flags(0x20)));
        assert!(matches!(
            Context::parse(&v2[..39]),
            Err(ContextError::Size { .. })
        ));
        let mut v1 = vec![1, 1, 4, 0];
        v1.extend([0x11; 8]);
        v1.extend([0; 16]);
        let c = Context::parse(&v1).unwrap();
        assert_eq!(c.key.to_string(), "v1 key descriptor 1111111111111111");
        assert_eq!(Context::parse(&[3]), Err(ContextError::Version(3)));
        assert_eq!(Context::parse(&[]), Err(ContextError::Empty));
    }

    #[test]
    fn symlinks() {
        let mut d = vec![16, 0];
        d.extend([5u8; 16]);
        assert_eq!(
            symlink_nokey_target(&d).unwrap(),
            nokey_name(&[5; 16], 0, 0).unwrap()
        );
        assert_eq!(
            symlink_nokey_target(&[40, 0, 1, 2]),
            Err(SymlinkError::Length { len: 40, avail: 2 })
        );
        assert_eq!(
            symlink_nokey_target(&[0, 0, 1]),
            Err(SymlinkError::Length { len: 0, avail: 1 })
        );
        assert_eq!(
            symlink_nokey_target(&[3, 0, 1, 2, 3]),
            Err(SymlinkError::Name(NameError::TooShort(3)))
        );
        assert_eq!(symlink_nokey_target(&[1]), Err(SymlinkError::Short(1)));
    }
}
