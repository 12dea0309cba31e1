//! Golden blocks: the superblock, both checkpoint blocks, the root inode and a dentry block of
//! an image Linux 6.1 wrote (tests/fixtures/linux-extra: extra_attr, inode_checksum,
//! flexible_inline_xattr, inode_crtime, lost_found, sb_checksum), parsed and checked against
//! the values Linux left there; then one field changed at a time, each giving its one error.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    reason = "test code: a panic is the failure report"
)]

use std::io::Read;
use std::sync::OnceLock;
use uf2fs_format::checkpoint::{flags, Checkpoint, CpBlock};
use uf2fs_format::dentry::DentryArea;
use uf2fs_format::hash::dentry_hash;
use uf2fs_format::inode::{FileType, Inode};
use uf2fs_format::superblock::{feature, Superblock, SB_OFFSET};
use uf2fs_format::{CorruptKind, FormatError, BLOCK_SIZE};

fn image() -> &'static [u8] {
    static IMG: OnceLock<Vec<u8>> = OnceLock::new();
    IMG.get_or_init(|| {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/fixtures/linux-extra.img.gz"
        );
        let mut v = Vec::new();
        flate2::read::GzDecoder::new(std::fs::File::open(path).unwrap())
            .read_to_end(&mut v)
            .unwrap();
        v
    })
}

fn block(addr: u64) -> [u8; BLOCK_SIZE] {
    let at = addr as usize * BLOCK_SIZE;
    image()[at..at + BLOCK_SIZE].try_into().unwrap()
}

fn sb() -> Superblock {
    Superblock::parse(&block(0), 0).unwrap()
}

#[test]
fn superblock_as_linux_left_it() {
    let sb = sb();
    assert_eq!(sb.features(), 0xB68);
    assert!(sb.has(feature::SB_CHKSUM) && sb.has(feature::INODE_CHKSUM));
    let l = sb.layout();
    assert_eq!((l.cp, l.main, l.block_count), (512, 4096, 65536));
    assert_eq!(
        Superblock::parse(&block(1), 1).unwrap().layout(),
        l,
        "both copies agree"
    );
}

#[test]
fn superblock_field_changes_are_each_named() {
    let cases: [(usize, u32, &str); 4] = [
        (16, 13, "log_blocksize"),
        (24, 0, "segs_per_sec"),
        (96, 4, "root_ino"),
        (84, 2561, "nat_blkaddr"),
    ];
    for (off, value, want) in cases {
        let mut b = block(0);
        b[SB_OFFSET + off..SB_OFFSET + off + 4].copy_from_slice(&value.to_le_bytes());
        // With sb_checksum on, the CRC catches any change first.
        assert_eq!(
            Superblock::parse(&b, 0).err(),
            Some(FormatError::Corrupt(CorruptKind::SuperblockChecksum {
                copy: 0
            })),
            "{want}"
        );
        // Without the feature bit the field check itself must name the field.
        let f = u32::from_le_bytes(b[SB_OFFSET + 2180..SB_OFFSET + 2184].try_into().unwrap())
            & !feature::SB_CHKSUM;
        b[SB_OFFSET + 2180..SB_OFFSET + 2184].copy_from_slice(&f.to_le_bytes());
        match Superblock::parse(&b, 0) {
            Err(FormatError::Corrupt(CorruptKind::SuperblockField { field, .. })) => {
                assert_eq!(field, want)
            }
            other => panic!("{want}: {:?}", other.map(|_| ())),
        }
    }
}

#[test]
fn checkpoint_packs_as_linux_left_them() {
    let l = sb().layout();
    let p1 = CpBlock::parse(&block(512), 512).unwrap();
    let p2 = CpBlock::parse(&block(1024), 1024).unwrap();
    assert_eq!(
        p1.version(),
        p2.version() + 1,
        "Linux alternates packs, version + 1"
    );
    let total = p1.total_blocks(512).unwrap();
    let tail = CpBlock::parse(&block(512 + u64::from(total) - 1), 0).unwrap();
    assert_eq!(
        tail.version(),
        p1.version(),
        "trailing copy carries the same version"
    );
    let cp = Checkpoint::assemble(p1, 1, 512, &[], &l).unwrap();
    assert!(cp.has_flag(flags::UMOUNT) && cp.has_flag(flags::CRC_RECOVERY));
    assert_eq!(cp.head.valid_inode_count.get(), 6319);
    assert!(cp.cursegs.iter().all(|c| c.segno < l.main_segments));
}

#[test]
fn checkpoint_changes_are_caught() {
    let mut b = block(512);
    b[8] ^= 1; // user_block_count
    assert_eq!(
        CpBlock::parse(&b, 512).err(),
        Some(CorruptKind::CheckpointChecksum { blkaddr: 512 })
    );
    let mut b = block(512);
    b[164..168].copy_from_slice(&100u32.to_le_bytes()); // checksum_offset below the head
    assert!(matches!(
        CpBlock::parse(&b, 512),
        Err(CorruptKind::CheckpointField {
            field: "checksum_offset",
            ..
        })
    ));
}

#[test]
fn root_inode_and_its_checksum() {
    let sb = sb();
    // The root is the first node of the hot node log at mkfs time; Linux may have moved it,
    // so find the live copy through its footer and the highest cp_ver.
    let root = (4096..65536u64)
        .map(block)
        .filter(|b| {
            u32::from_le_bytes(b[4072..4076].try_into().unwrap()) == 3
                && u32::from_le_bytes(b[4076..4080].try_into().unwrap()) == 3
        })
        .max_by_key(|b| u64::from_le_bytes(b[4084..4092].try_into().unwrap()))
        .unwrap();
    let i = Inode::parse(&root, 3, &sb).unwrap();
    assert_eq!(i.file_type, FileType::Directory);
    assert_eq!(i.extra_isize, 24, "mkfs's root keeps the tools' extra size");
    assert!(i.checksum.is_some() && i.crtime.is_some());
    let mut bad = root;
    bad[16] ^= 1; // i_size
    assert_eq!(
        Inode::parse(&bad, 3, &sb).err(),
        Some(FormatError::Corrupt(CorruptKind::InodeChecksum { ino: 3 }))
    );
}

#[test]
fn dentry_blocks_hash_every_name_as_linux_did() {
    let mut names = 0;
    for addr in 4096..65536u64 {
        let b = block(addr);
        // A dentry block of bigdir: '.'/'..' or many entries whose stored hash matches ours.
        let entries: Vec<_> = DentryArea::block(&b)
            .iter()
            .filter_map(|e| e.ok())
            .collect();
        if entries.len() < 10 || entries.iter().any(|e| e.ino == 0 || e.ino > 100_000) {
            continue;
        }
        let matching = entries
            .iter()
            .filter(|e| e.hash == dentry_hash(e.name))
            .count();
        if matching == entries.len() {
            names += matching;
        }
    }
    assert!(
        names > 6000,
        "names in dentry blocks whose hash we reproduce: {names}"
    );
}
