//! Hostile encrypted directories: inodes that claim encryption (i_advise bit 0x04) over names,
//! targets and xattrs that are not what fscrypt writes. Each gives a clear error naming the
//! inode and what is wrong, never a panic, and the rest of the image reads on; `uf2fs fsck`
//! finds a stored hash that is not the hash of the encrypted name.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    reason = "test code: a panic is the failure report"
)]

mod common;

use uf2fs_engine::uf2fs_device::MemDevice;
use uf2fs_engine::{CorruptKind, Error, Fs, WalkItem};
use uf2fs_testkit::scratch;

/// Sets i_advise bit 0x04 (encrypted) in every copy of inode `ino` in the image (uf2fs mkfs
/// without inode_checksum, so no checksum to fix).
fn mark_encrypted(img: &mut [u8], ino: u32) -> usize {
    let mut n = 0;
    for b in img.chunks_mut(4096) {
        let word = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
        if word(4072) == ino && word(4076) == ino && word(4080) >> 3 == 0 {
            b[2] |= 0x04;
            n += 1;
        }
    }
    n
}

#[test]
fn hostile_encrypted_names_targets_and_contexts() {
    let dir = scratch("hostile-encrypted");
    let img = common::fresh_image(&dir, 64, 0);
    let (short_dir, garbage_dir, link, file, plain, garbage_names) = {
        let fs = Fs::open_rw(&img).unwrap();
        let root = fs.root_ino();
        // A directory whose names are shorter than any ciphertext (16 bytes).
        let short_dir = fs
            .create_node(root, b"short", common::node(0o040755))
            .unwrap();
        fs.create_node(short_dir, b"a", common::node(0o100644))
            .unwrap();
        // A directory whose names are arbitrary bytes of ciphertext lengths, one past the
        // no-key abbreviation (150 bytes) and one at the limit (255).
        let garbage_dir = fs
            .create_node(root, b"garbage", common::node(0o040755))
            .unwrap();
        let mut names = Vec::new();
        for (k, len) in [16usize, 17, 149, 150, 255].into_iter().enumerate() {
            let name: Vec<u8> = (0..len)
                .map(|i| ((i * 31 + k * 7) % 251) as u8 + 1)
                .map(|b| if b == b'/' { 0xFE } else { b })
                .collect();
            fs.create_node(garbage_dir, &name, common::node(0o100644))
                .unwrap();
            names.push(name);
        }
        // A symlink whose stored "target" is plain text, not {len, ciphertext}.
        let link = fs
            .create_node(root, b"link", common::node(0o120777))
            .unwrap();
        fs.write(link, 0, b"abc").unwrap();
        // A file marked encrypted without any encryption context.
        let file = fs
            .create_node(root, b"file", common::node(0o100644))
            .unwrap();
        fs.write(file, 0, b"secret?").unwrap();
        let plain = fs
            .create_node(root, b"plain", common::node(0o100644))
            .unwrap();
        fs.write(plain, 0, b"plain bytes").unwrap();
        fs.unmount().unwrap();
        (short_dir, garbage_dir, link, file, plain, names)
    };
    let mut bytes = std::fs::read(&img).unwrap();
    for ino in [short_dir, garbage_dir, link, file] {
        assert!(mark_encrypted(&mut bytes, ino) > 0, "inode {ino} patched");
    }
    // uf2fs fsck: the stored hashes of the garbage directory are the plain hashes of its
    // "ciphertext" names, as Linux writes them; one changed hash is found.
    let fs = Fs::with_device(Box::new(MemDevice::new(bytes.clone(), true))).unwrap();
    let clean = fs.check().unwrap().findings;
    assert!(
        !clean
            .iter()
            .any(|f| f.contains("hash of its encrypted name")),
        "{clean:?}"
    );
    let h = uf2fs_format::hash::dentry_hash(&garbage_names[2]).to_le_bytes();
    let mut flipped = 0;
    for b in bytes.chunks_mut(4096) {
        let word = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
        if word(4072) == garbage_dir && word(4076) == garbage_dir && word(4080) >> 3 == 0 {
            if let Some(at) = b.windows(4).position(|w| w == h) {
                b[at] ^= 0x55;
                flipped += 1;
            }
        }
    }
    assert!(flipped > 0, "the inline entry's hash was changed");
    let fs = Fs::with_device(Box::new(MemDevice::new(bytes.clone(), true))).unwrap();
    let findings = fs.check().unwrap().findings;
    assert!(
        findings
            .iter()
            .any(|f| f.contains("hash of its encrypted name")),
        "{findings:?}"
    );
    // Its no-key name carries the stored hash: it is still listed and found.
    let listed = fs.readdir(garbage_dir).unwrap();
    assert!(listed
        .iter()
        .all(|e| fs.lookup(garbage_dir, &e.name).unwrap() == e.ino));

    // Names shorter than 16 bytes: Linux's readdir fails (EUCLEAN); ours names the entry.
    match fs.readdir(short_dir) {
        Err(Error::Corrupt(CorruptKind::EncryptedName { ino, .. })) => assert_eq!(ino, short_dir),
        other => panic!("short encrypted name: {other:?}"),
    }
    // A plain name is no no-key name: not found, not a panic.
    assert!(matches!(fs.lookup(short_dir, b"a"), Err(Error::NotFound)));
    // Arbitrary ciphertext lists, and each listed name finds its entry again.
    let entries = fs.readdir(garbage_dir).unwrap();
    assert_eq!(entries.len(), 5);
    for e in &entries {
        assert!(e.name.len() <= 252, "{}", e.name.len());
        assert_eq!(fs.lookup(garbage_dir, &e.name).unwrap(), e.ino);
        // Off by one character, it finds nothing.
        let mut wrong = e.name.clone();
        wrong[20] = if wrong[20] == b'A' { b'B' } else { b'A' };
        assert!(matches!(
            fs.lookup(garbage_dir, &wrong),
            Err(Error::NotFound)
        ));
    }
    assert_eq!(
        entries.iter().filter(|e| e.name.len() == 252).count(),
        2,
        "150 and 255 bytes are abbreviated"
    );
    // Names that cannot be no-key names: too long, not base64url, too short.
    for bad in [&[b'A'; 253][..], b"not/base64!", b"AAAA", &[0xFF; 40]] {
        assert!(matches!(
            fs.lookup(garbage_dir, bad),
            Err(Error::NotFound) | Err(Error::NameTooLong)
        ));
    }
    // The symlink's stored length is nonsense.
    for r in [fs.readlink(link).map(|_| ()), fs.getattr(link).map(|_| ())] {
        match r {
            Err(Error::Corrupt(CorruptKind::EncryptedSymlink { ino, .. })) => {
                assert_eq!(ino, link)
            }
            other => panic!("hostile encrypted symlink: {other:?}"),
        }
    }
    // No context: the contents still need a key, and the error says the context is missing.
    let err = fs.read(file, 0, &mut [0u8; 8]).unwrap_err();
    assert_eq!(err.errno(), 126, "{err}");
    assert!(
        err.to_string().contains("empty encryption context"),
        "{err}"
    );
    assert!(matches!(
        fs.encryption(file),
        Err(Error::Corrupt(CorruptKind::EncryptionContext { .. }))
    ));
    // Everything else reads on, and a walk reports the bad parts without stopping.
    let mut buf = [0u8; 11];
    assert_eq!(fs.read(plain, 0, &mut buf).unwrap(), 11);
    assert_eq!(&buf, b"plain bytes");
    let mut errors = 0;
    let mut entries = 0;
    fs.walk(fs.root_ino(), &mut |item| {
        match item {
            WalkItem::Entry { .. } => entries += 1,
            WalkItem::Error { .. } => errors += 1,
        }
        Ok(true)
    })
    .unwrap();
    assert_eq!(errors, 2, "the short-named directory and the symlink");
    assert_eq!(
        entries,
        1 + 4 + 5,
        "root, its 4 readable entries, 5 garbage names"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
