//! Names in casefolded directories: the superblock's encoding, the folded form of a name, and
//! the name rules Linux 6.1 applies in a directory with the casefold inode flag.
//!
//! The folded form ("nfdicf") is, character by character: Default_Ignorable_Code_Point
//! characters dropped, Hangul syllables split into jamo, the full case folding (CaseFolding
//! status C and F) or else the canonical decomposition applied, both recursively; then
//! combining marks put in canonical order, where a dropped character ends a run of marks as a
//! starter would. Code points unassigned in Unicode 12.1 (the version of Linux's tables) pass
//! through unchanged with combining class 0. A name that is not UTF-8, folds to nothing, or
//! folds to 255 bytes or more has no folded form ("invalid"), as in the kernel.
//!
//! Decompositions and combining classes come from `unicode-normalization`, case folding from
//! `caseless`; both carry newer Unicode data than 12.1, which Unicode's stability policy keeps
//! equal on every code point 12.1 assigned. See docs/design.md, "Casefolded directories".

use crate::casefold_tables::UNASSIGNED_12_1;
use crate::hash::dentry_hash;
use crate::Incompatible;
use caseless::Caseless;

/// `s_encoding` of UTF-8 with Unicode 12.1 tables (mkfs.f2fs `-C utf8`), the only one Linux
/// 6.1 knows.
pub const ENC_UTF8_12_1: u16 = 1;
/// `s_encoding_flags` bit: refuse names that are not valid UTF-8 (mkfs.f2fs `-C utf8:strict`).
pub const ENC_STRICT_MODE_FL: u16 = 0x1;

/// Longest folded name the kernel keeps (its buffer is 255 bytes with the terminating NUL).
const MAX_FOLDED_LEN: usize = 254;

/// The encoding of a volume with the casefold feature.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Encoding {
    /// Strict mode: names without a folded form are refused (EINVAL) in casefolded
    /// directories, and such entries on disk never match.
    pub strict: bool,
    /// The raw `s_encoding_flags`.
    pub flags: u16,
}

impl Encoding {
    /// The encoding the superblock names, as Linux 6.1 checks it at mount: an unknown
    /// `s_encoding` is refused. Flags other than strict mode are kept and ignored, as there.
    pub fn from_superblock(encoding: u16, flags: u16) -> Result<Self, Incompatible> {
        if encoding != ENC_UTF8_12_1 {
            return Err(Incompatible::UnknownEncoding(encoding));
        }
        Ok(Encoding {
            strict: flags & ENC_STRICT_MODE_FL != 0,
            flags,
        })
    }

    /// "utf8-12.1.0", with "+strict" in strict mode.
    pub fn describe(&self) -> String {
        format!("utf8-12.1.0{}", if self.strict { "+strict" } else { "" })
    }
}

/// How a name is looked for, compared and hashed in a directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DirName<'a> {
    /// A plain directory (or '.'/'..', or a name without a folded form in a non-strict
    /// casefolded one): exact bytes, hash of the bytes.
    Exact(&'a [u8]),
    /// A name in a casefolded directory with its folded form; the hash is over the fold.
    Folded { name: &'a [u8], folded: Vec<u8> },
}

/// A name without a folded form in a strict casefolded directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InvalidName;

impl<'a> DirName<'a> {
    /// Prepares `name` for a directory: casefolded (with the volume's encoding) or not.
    /// In strict mode a name without a folded form is refused, as Linux answers EINVAL.
    pub fn new(name: &'a [u8], casefolded: Option<&Encoding>) -> Result<DirName<'a>, InvalidName> {
        let Some(enc) = casefolded else {
            return Ok(DirName::Exact(name));
        };
        if name == b"." || name == b".." {
            return Ok(DirName::Exact(name));
        }
        match fold(name) {
            Some(folded) => Ok(DirName::Folded { name, folded }),
            None if enc.strict => Err(InvalidName),
            None => Ok(DirName::Exact(name)),
        }
    }

    /// The name as given.
    pub fn name(&self) -> &'a [u8] {
        match self {
            DirName::Exact(n) | DirName::Folded { name: n, .. } => n,
        }
    }

    /// The dentry hash stored with the name and used to pick its buckets.
    pub fn hash(&self) -> u32 {
        match self {
            DirName::Exact(n) => dentry_hash(n),
            DirName::Folded { folded, .. } => dentry_hash(folded),
        }
    }

    /// Whether an entry named `entry` on disk is this name. For a folded name, the entry is
    /// folded and compared; an entry without a folded form matches the fold byte for byte in
    /// non-strict mode and never in strict mode (the kernel's rule).
    pub fn matches(&self, entry: &[u8], enc: Option<&Encoding>) -> bool {
        match self {
            DirName::Exact(n) => *n == entry,
            DirName::Folded { folded, .. } => match fold(entry) {
                Some(f) => f == *folded,
                None => !enc.is_some_and(|e| e.strict) && entry == folded.as_slice(),
            },
        }
    }
}

/// Whether `c` is a Default_Ignorable_Code_Point in Unicode 12.1 (DerivedCoreProperties).
fn default_ignorable(c: u32) -> bool {
    matches!(
        c,
        0x00AD
            | 0x034F
            | 0x061C
            | 0x115F..=0x1160
            | 0x17B4..=0x17B5
            | 0x180B..=0x180E
            | 0x200B..=0x200F
            | 0x202A..=0x202E
            | 0x2060..=0x206F
            | 0x3164
            | 0xFE00..=0xFE0F
            | 0xFEFF
            | 0xFFA0
            | 0xFFF0..=0xFFF8
            | 0x1BCA0..=0x1BCA3
            | 0x1D173..=0x1D17A
            | 0xE0000..=0xE0FFF
    )
}

/// Whether Unicode 12.1 leaves `c` unassigned.
fn unassigned(c: u32) -> bool {
    UNASSIGNED_12_1
        .binary_search_by(|&(lo, hi)| {
            if hi < c {
                std::cmp::Ordering::Less
            } else if lo > c {
                std::cmp::Ordering::Greater
            } else {
                std::cmp::Ordering::Equal
            }
        })
        .is_ok()
}

/// One piece of the folded sequence: a character with its combining class, or the mark a
/// dropped (ignorable) character leaves, which ends a run of combining marks.
#[derive(Clone, Copy)]
enum Piece {
    Char(char, u8),
    Stop,
}

fn ccc(c: char) -> u8 {
    if unassigned(u32::from(c)) {
        0
    } else {
        unicode_normalization::char::canonical_combining_class(c)
    }
}

/// Appends the folded form of one character (depth bounds the recursion; Unicode's data
/// needs three levels at most).
fn fold_char(c: char, out: &mut Vec<Piece>, depth: u8) {
    let cp = u32::from(c);
    if depth > 8 || unassigned(cp) {
        out.push(Piece::Char(c, 0));
        return;
    }
    if default_ignorable(cp) {
        out.push(Piece::Stop);
        return;
    }
    if (0xAC00..=0xD7A3).contains(&cp) {
        // Hangul syllables: algorithmic decomposition into jamo (which do not fold).
        let s = cp - 0xAC00;
        let (l, v, t) = (0x1100 + s / 588, 0x1161 + (s % 588) / 28, s % 28);
        for j in [Some(l), Some(v), (t != 0).then_some(0x11A7 + t)]
            .into_iter()
            .flatten()
        {
            if let Some(j) = char::from_u32(j) {
                out.push(Piece::Char(j, 0));
            }
        }
        return;
    }
    let folded: Vec<char> = std::iter::once(c).default_case_fold().collect();
    if folded.as_slice() != [c] {
        for f in folded {
            fold_char(f, out, depth + 1);
        }
        return;
    }
    let mut parts = Vec::new();
    unicode_normalization::char::decompose_canonical(c, |d| parts.push(d));
    if parts.as_slice() != [c] {
        for d in parts {
            fold_char(d, out, depth + 1);
        }
        return;
    }
    out.push(Piece::Char(c, ccc(c)));
}

/// The folded form of `name` as Linux 6.1's utf8-12.1 casefolding gives it, or `None` when
/// the name has none (not UTF-8, folds to nothing, or folds to more than 254 bytes). A NUL
/// ends the name, as it ends the kernel's walk.
pub fn fold(name: &[u8]) -> Option<Vec<u8>> {
    let name = name.split(|&b| b == 0).next().unwrap_or(&[]);
    let s = std::str::from_utf8(name).ok()?;
    let mut pieces = Vec::with_capacity(s.len());
    for c in s.chars() {
        fold_char(c, &mut pieces, 0);
    }
    // Canonical ordering: a stable sort by class of each run of non-zero classes.
    let mut out = String::with_capacity(s.len());
    let mut run: Vec<(char, u8)> = Vec::new();
    let flush = |run: &mut Vec<(char, u8)>, out: &mut String| {
        run.sort_by_key(|&(_, k)| k);
        out.extend(run.drain(..).map(|(c, _)| c));
    };
    for p in pieces {
        match p {
            Piece::Char(c, k) if k != 0 => run.push((c, k)),
            Piece::Char(c, _) => {
                flush(&mut run, &mut out);
                out.push(c);
            }
            Piece::Stop => flush(&mut run, &mut out),
        }
    }
    flush(&mut run, &mut out);
    if out.is_empty() || out.len() > MAX_FOLDED_LEN {
        return None;
    }
    Some(out.into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(s: &str) -> String {
        String::from_utf8(fold(s.as_bytes()).unwrap_or_default()).unwrap_or_default()
    }

    #[test]
    fn folds_case_accents_and_special_letters() {
        assert_eq!(f("ABC"), "abc");
        assert_eq!(f("Straße"), "strasse");
        assert_eq!(f("STRASSE"), "strasse");
        assert_eq!(f("ẞ"), "ss");
        // é precomposed and decomposed fold alike, to e + U+0301.
        assert_eq!(f("\u{e9}"), "e\u{301}");
        assert_eq!(f("E\u{301}"), "e\u{301}");
        // Final sigma folds to sigma.
        assert_eq!(f("ΟΔΟΣ"), f("οδος"));
        assert_eq!(f("οδος"), "οδοσ");
        // Dotted capital I: full folding gives i + combining dot above.
        assert_eq!(f("\u{130}"), "i\u{307}");
        assert_eq!(f("ı"), "ı");
        // Hangul syllable into jamo.
        assert_eq!(f("\u{AC01}"), "\u{1100}\u{1161}\u{11A8}");
        // Ligature ﬃ folds to three letters.
        assert_eq!(f("\u{FB03}"), "ffi");
    }

    #[test]
    fn ignorables_drop_and_end_a_run_of_marks() {
        assert_eq!(f("a\u{200B}b"), "ab");
        assert_eq!(f("a\u{AD}"), "a");
        // U+0316 (class 220) sorts before U+0301 (230) in one run, not across a ZWSP.
        assert_eq!(f("a\u{301}\u{316}"), "a\u{316}\u{301}");
        assert_eq!(f("a\u{301}\u{200B}\u{316}"), "a\u{301}\u{316}");
    }

    #[test]
    fn newer_than_12_1_passes_through() {
        // U+A7C7 LATIN CAPITAL LETTER D WITH SHORT STROKE OVERLAY: Unicode 13.
        assert_eq!(f("\u{A7C7}"), "\u{A7C7}");
        // U+10570 VITHKUQI CAPITAL LETTER A: Unicode 14.
        assert_eq!(f("\u{10570}"), "\u{10570}");
        // U+A7C4 (Unicode 12.0) does fold.
        assert_eq!(f("\u{A7C4}"), "\u{A794}");
    }

    #[test]
    fn names_without_a_folded_form() {
        assert_eq!(fold(b"\xff"), None);
        assert_eq!(fold(b"a\xc3"), None);
        assert_eq!(fold(b"\xed\xa0\x80"), None); // a surrogate
        assert_eq!(fold("\u{200B}".as_bytes()), None); // folds to nothing
                                                       // The kernel's buffer holds 254 folded bytes and the NUL.
        assert_eq!(fold("a".repeat(254).as_bytes()).map(|v| v.len()), Some(254));
        assert_eq!(fold("A".repeat(255).as_bytes()), None);
        assert_eq!(fold(format!("{}a", "ß".repeat(127)).as_bytes()), None);
    }

    #[test]
    fn strict_and_plain_matching() {
        let plain = Encoding::from_superblock(1, 0).unwrap_or(Encoding {
            strict: false,
            flags: 0,
        });
        let strict = Encoding {
            strict: true,
            flags: 1,
        };
        let n = DirName::new(b"Foo", Some(&plain)).unwrap_or(DirName::Exact(b""));
        assert!(n.matches(b"FOO", Some(&plain)));
        assert!(!n.matches(b"FOX", Some(&plain)));
        assert_eq!(n.hash(), dentry_hash(b"foo"));
        assert_eq!(DirName::new(b"\xff", Some(&strict)), Err(InvalidName));
        let bad = DirName::new(b"\xff", Some(&plain)).unwrap_or(DirName::Exact(b""));
        assert_eq!(bad, DirName::Exact(b"\xff"));
        assert!(Encoding::from_superblock(2, 0).is_err());
    }
}
