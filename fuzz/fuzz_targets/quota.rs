//! QuotaTree::parse of an arbitrary quota file (each of the three types), then, on a file it
//! accepts, usage added for ids taken from the input (new ones inserted into the tree): the
//! result must parse again and give back exactly what was added, and the dirty blocks must
//! stay within the file.
//!
//! Input: byte 0 picks the type (mod 3); bytes 1..9 are two ids; the rest is the file.
#![no_main]

use libfuzzer_sys::fuzz_target;
use uf2fs_format::quota::QuotaTree;
use uf2fs_fuzz::sink;

fuzz_target!(|data: &[u8]| {
    let Some((&kind, rest)) = data.split_first() else {
        return;
    };
    let kind = usize::from(kind % 3);
    let (ids, file) = rest.split_at(rest.len().min(8));
    let word = |i: usize| {
        ids.get(i * 4..i * 4 + 4)
            .and_then(|b| <[u8; 4]>::try_from(b).ok())
            .map_or(0, u32::from_le_bytes)
    };
    let Ok(mut t) = QuotaTree::parse(7, kind, file.to_vec()) else {
        return;
    };
    let before: Vec<_> = t
        .entries()
        .map(|(id, d)| (id, d.space.get(), d.inodes.get()))
        .collect();
    sink(&before);
    let (a, b) = (word(0), word(1));
    let space = |id: u32| t.get(id).map_or(0, |d| d.space.get());
    let (sa, sb) = (space(a), space(b));
    if t.add_usage(a, 4096, 1).is_err() || t.add_usage(b, 8192, 2).is_err() {
        return;
    }
    let len = t.bytes().len();
    for (fb, _) in t.take_dirty() {
        assert!((fb as usize) * 4096 < len, "dirty block past the file");
    }
    let again = QuotaTree::parse(7, kind, t.bytes().to_vec()).expect("what we wrote parses");
    let got = |id: u32| again.get(id).map(|d| d.space.get());
    if a == b {
        assert_eq!(got(a), Some(sa + 4096 + 8192));
    } else {
        assert_eq!(got(a), Some(sa + 4096));
        assert_eq!(got(b), Some(sb + 8192));
    }
    for (id, _, _) in before {
        assert!(again.get(id).is_some(), "id {id} lost");
    }
});
