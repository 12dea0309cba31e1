//! Inode::parse of one node block, with the linux-extra superblock (extra_attr,
//! inode_checksum, flexible_inline_xattr, inode_crtime) and with linux-default's, then every
//! accessor of an accepted inode; the inline xattr area through xattr::parse and the inline
//! area through the inline dentry reader; the footer and the node-entry helpers.
//!
//! Input: bytes 0..4096 are the node block (zero padded). The inode number is the footer's
//! nid. If a byte 4096 exists and its bit 0 is set, the inode checksum (for linux-extra's
//! uuid) is recomputed before the linux-extra parse, so mutations get past it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use uf2fs_format::dentry::DentryArea;
use uf2fs_format::hash::dentry_hash;
use uf2fs_format::inode::{checksum_seed, compute_checksum, FileType, Inode, I_ADDR_OFFSET};
use uf2fs_format::node::{self, max_file_blocks, Footer, ADDRS_PER_BLOCK};
use uf2fs_format::superblock::Superblock;
use uf2fs_format::{xattr, BLOCK_SIZE};
use uf2fs_fuzz::{sb_default, sb_extra, sink, to_block};

fn exercise(i: &Inode) {
    sink((
        i.ino, i.mode, i.advise, i.inline, i.uid, i.gid, i.links, i.size, i.blocks,
    ));
    sink((
        i.atime,
        i.ctime,
        i.mtime,
        i.crtime,
        i.generation,
        i.current_depth,
    ));
    sink((
        i.xattr_nid,
        i.flags,
        i.pino,
        &i.name,
        i.dir_level,
        i.extra_isize,
    ));
    sink((i.inline_xattr_words, i.projid, i.checksum, i.footer));
    let t = i.file_type;
    assert_eq!(FileType::from_mode(i.mode), Some(t));
    assert_eq!(FileType::from_dentry_code(t.dentry_code()), Some(t));
    sink((
        i.has_inline_data(),
        i.has_inline_dentry(),
        i.has_inline_xattr(),
    ));
    sink((i.is_encrypted(), i.is_compressed(), i.is_casefolded()));
    sink((i.addrs_in_inode(), i.addrs_per_dnode(), i.max_blocks()));

    let slots = i.addr_slots();
    assert!(slots >= 1 && slots <= node::DEF_ADDRS_PER_INODE);
    for s in 0..slots {
        sink(i.data_addr(s));
    }
    assert_eq!(i.data_addr(slots), 0);
    assert_eq!(i.data_addr(usize::MAX), 0);
    for n in 0..node::NIDS_PER_INODE {
        sink(i.nid(n));
    }
    assert_eq!(i.nid(node::NIDS_PER_INODE), 0);
    sink(max_file_blocks(slots as u64));

    let cap = i.inline_capacity();
    let area = i.inline_area();
    assert_eq!(area.len(), cap, "inline area shorter than its capacity");
    // The inline area as inline dentries (what the engine does for inline directories).
    for e in DentryArea::inline(area).iter() {
        if let Ok(e) = e {
            sink(dentry_hash(e.name));
        }
    }
    let xa = i.inline_xattr_area();
    assert_eq!(
        xa.len(),
        if i.has_inline_xattr() {
            4 * usize::from(i.inline_xattr_words)
        } else {
            0
        }
    );
    match xattr::parse(xa, i.ino) {
        Ok(list) => {
            for x in list {
                sink(x.full_name());
                sink(x.user_value(i.ino).map_err(|e| e.to_string()));
            }
        }
        Err(e) => sink(e.to_string()),
    }
    sink(i.rdev());
    sink(i.block()[0]);
}

fn parse(block: &[u8; BLOCK_SIZE], ino: u32, sb: &Superblock) {
    match Inode::parse(block, ino, sb) {
        Ok(i) => exercise(&i),
        Err(e) => sink(e.to_string()),
    }
}

fuzz_target!(|data: &[u8]| {
    let mut block = to_block(data);
    let footer = Footer::of(&block);
    sink((
        footer.ofs(),
        footer.is_cold(),
        footer.is_fsync(),
        footer.is_dent(),
    ));
    let ino = footer.nid;

    // The block as a direct or indirect node, too.
    sink(node::entries(&block).fold(0u32, |a, e| a ^ e));
    for k in [0, 1, ADDRS_PER_BLOCK - 1, ADDRS_PER_BLOCK, u64::MAX] {
        sink(node::entry(&block, k));
    }

    parse(&block, ino, sb_default());
    if data.get(BLOCK_SIZE).is_some_and(|b| b & 1 != 0) {
        let sb = sb_extra();
        let sum = compute_checksum(checksum_seed(&sb.uuid()), &block);
        block[I_ADDR_OFFSET + 8..I_ADDR_OFFSET + 12].copy_from_slice(&sum.to_le_bytes());
    }
    parse(&block, ino, sb_extra());
});
