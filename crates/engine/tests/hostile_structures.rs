//! Hostile shapes planted in a Linux-written image, one behaviour each: a directory that
//! contains its own ancestor, a node that points back at its own inode, a NAT entry that
//! points outside the main area. Each must end in a corruption error that names the place,
//! never a loop; everything else on the image stays readable.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    reason = "test code: a panic is the failure report"
)]

use uf2fs_device::MemDevice;
use uf2fs_engine::{CorruptKind, Error, Fs, WalkItem};
use uf2fs_format::dentry::DentryArea;
use uf2fs_testkit::{fixture, scratch};

fn image() -> Vec<u8> {
    let dir = scratch("hostile");
    let img = std::fs::read(fixture("linux-default", &dir)).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    img
}

fn mount(img: &[u8]) -> Fs {
    Fs::with_device(Box::new(MemDevice::new(img.to_vec(), true))).unwrap()
}

/// Sets the inode number of entry `name` in every dentry block that has it.
fn patch_dentry(img: &mut [u8], name: &[u8], ino: u32) -> usize {
    let mut n = 0;
    for b in img.chunks_mut(4096) {
        let block: &[u8; 4096] = (&*b).try_into().unwrap();
        let slots: Vec<usize> = DentryArea::block(block)
            .iter()
            .filter_map(|e| e.ok())
            .filter(|e| e.name == name)
            .map(|e| e.slot)
            .collect();
        for slot in slots {
            let at = 30 + slot * 11 + 4;
            b[at..at + 4].copy_from_slice(&ino.to_le_bytes());
            n += 1;
        }
    }
    n
}

/// Rewrites 4 bytes at `at` in every inode block of `ino`.
fn patch_inode(img: &mut [u8], ino: u32, at: usize, value: u32) -> usize {
    let mut n = 0;
    for b in img.chunks_mut(4096) {
        let word = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
        if word(4072) == ino && word(4076) == ino && word(4080) >> 3 == 0 {
            b[at..at + 4].copy_from_slice(&value.to_le_bytes());
            n += 1;
        }
    }
    n
}

/// Walks everything; returns (entries, errors as text).
fn walk_all(fs: &Fs) -> (usize, Vec<String>) {
    let mut entries = 0;
    let mut errors = Vec::new();
    fs.walk(fs.root_ino(), &mut |item| {
        match item {
            WalkItem::Entry { .. } => entries += 1,
            WalkItem::Error { path, error } => {
                errors.push(format!("{}: {error}", String::from_utf8_lossy(path)))
            }
        }
        Ok(true)
    })
    .unwrap();
    (entries, errors)
}

#[test]
fn directory_containing_its_ancestor_is_reported_not_looped() {
    let mut img = image();
    let before = walk_all(&mount(&img)).0;
    let dir200 = mount(&img).resolve(b"/dir200", false).unwrap();
    let root = mount(&img).root_ino();
    assert_eq!(patch_dentry(&mut img, b"n0", root), 1);
    assert_eq!(patch_dentry(&mut img, b"n1", dir200), 1);
    let fs = mount(&img);
    let (entries, errors) = walk_all(&fs);
    assert_eq!(errors.len(), 2, "{errors:#?}");
    assert!(
        errors
            .iter()
            .all(|e| e.contains("contains itself or an ancestor")),
        "{errors:#?}"
    );
    assert!(
        errors.iter().any(|e| e.starts_with("dir200/n0:"))
            && errors.iter().any(|e| e.starts_with("dir200/n1:"))
    );
    assert_eq!(
        entries, before,
        "every entry is still visited once (the two names now show directories)"
    );
}

#[test]
fn node_pointing_back_at_its_inode_is_corrupt_not_a_loop() {
    let mut img = image();
    let fs = mount(&img);
    let ino = fs.resolve(b"/files/f12m", false).unwrap();
    assert!(
        fs.inode(ino).unwrap().nid(2) != 0,
        "the 12 MB file uses its indirect node"
    );
    // i_nid[2] (the indirect node) and i_nid[0] (a direct node) now name the inode itself.
    assert!(patch_inode(&mut img, ino, 4052 + 8, ino) > 0);
    assert!(patch_inode(&mut img, ino, 4052, ino) > 0);
    let fs = mount(&img);
    let mut buf = vec![0u8; 1 << 20];
    let err = fs.read(ino, 4 << 20, &mut buf).unwrap_err();
    match err {
        Error::Corrupt(CorruptKind::NodeFooter {
            nid,
            what,
            found,
            expected,
            ..
        }) => {
            assert_eq!((nid, what, found), (ino, "node offset", 0));
            assert!(expected == 1 || expected == 3);
        }
        e => panic!("expected a node footer error, got {e}"),
    }
    assert!(
        fs.read(ino, 0, &mut buf).is_ok(),
        "blocks in the inode itself still read"
    );
    let other = fs.resolve(b"/dir200/n5", false).unwrap();
    assert!(
        fs.read(other, 0, &mut buf).is_ok(),
        "other files stay readable"
    );
}

#[test]
fn nat_entry_outside_the_main_area_is_named() {
    let mut img = image();
    let fs = mount(&img);
    let ino = fs.resolve(b"/files/f12m", false).unwrap();
    let nat = fs.info().areas.iter().find(|a| a.0 == "nat").unwrap().1 as usize;
    // NAT block 0 in both copies: entry `ino` gets block address 5 (inside the superblock area).
    for copy in [nat, nat + 512] {
        let at = copy * 4096 + ino as usize * 9 + 5;
        img[at..at + 4].copy_from_slice(&5u32.to_le_bytes());
    }
    let fs = mount(&img);
    match fs.getattr(ino) {
        Err(Error::Corrupt(CorruptKind::NatAddress { nid, blkaddr })) => {
            assert_eq!((nid, blkaddr), (ino, 5))
        }
        other => panic!(
            "expected a NAT address error, got {:?}",
            other.map(|a| a.ino)
        ),
    }
    let (entries, errors) = walk_all(&fs);
    assert_eq!(errors.len(), 1, "{errors:#?}");
    assert!(
        errors[0].contains("NAT entry of nid") && errors[0].contains("outside the main area"),
        "{errors:#?}"
    );
    assert!(entries > 6000, "the rest of the tree is walked");
}
