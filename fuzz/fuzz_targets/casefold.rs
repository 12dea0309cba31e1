//! Casefolded names from arbitrary bytes, in normal and strict mode: folding, the dentry hash
//! over the folded name, and matching a name against itself and against a second name, never
//! panic; a name always matches itself; folding is idempotent.
//!
//! Input: byte 0 bit 0: strict mode; then two names split at the first 0 byte.
#![no_main]

use libfuzzer_sys::fuzz_target;
use uf2fs_format::casefold::{fold, DirName, Encoding};
use uf2fs_fuzz::sink;

fuzz_target!(|data: &[u8]| {
    let Some((&k, rest)) = data.split_first() else {
        return;
    };
    let Ok(enc) = Encoding::from_superblock(1, u16::from(k & 1)) else {
        return;
    };
    let (a, b) = match rest.iter().position(|&c| c == 0) {
        Some(i) => (&rest[..i], &rest[i + 1..]),
        None => (rest, &rest[..0]),
    };
    if let Some(f) = fold(a) {
        assert_eq!(
            fold(&f).as_deref(),
            Some(f.as_slice()),
            "folding twice changes {a:?}"
        );
    }
    match DirName::new(a, Some(&enc)) {
        Ok(n) => {
            sink(n.hash());
            sink(n.name());
            assert!(n.matches(a, Some(&enc)), "{a:?} does not match itself");
            sink(n.matches(b, Some(&enc)));
        }
        Err(e) => sink(e),
    }
    if let Ok(n) = DirName::new(a, None) {
        sink(n.hash());
    }
});
