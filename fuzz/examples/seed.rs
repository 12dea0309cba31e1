//! Writes seed corpora for the fuzz targets from the real fixture images into
//! fuzz/corpus/<target>/. Run through `fuzz/seed.sh` (or
//! `cargo run --release --example seed` in fuzz/). The format parsers locate the blocks:
//! superblock copies, checkpoint packs, the current NAT and SIT blocks, the CP pack's
//! summary blocks, inode and xattr node blocks (found by scanning the main area for node
//! footers), dentry blocks and inline dentry areas of directories.

use std::collections::{BTreeMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};
use uf2fs_format::checkpoint::{version_after, Checkpoint, CpBlock};
use uf2fs_format::inode::{Inode, I_ADDR_OFFSET};
use uf2fs_format::nat::{nat_block_addr, NAT_ENTRIES_PER_BLOCK};
use uf2fs_format::node::{Footer, XATTR_NODE_OFFSET};
use uf2fs_format::sit::sit_block_addr;
use uf2fs_format::superblock::Superblock;
use uf2fs_format::{le16, BLOCKS_PER_SEG, BLOCK_SIZE};
use uf2fs_fuzz::fixture_full;

const IMAGES: [&str; 4] = [
    "linux-default",
    "linux-extra",
    "linux-quota",
    "linux-compress",
];

struct Img<'a> {
    name: &'a str,
    data: Vec<u8>,
}

impl Img<'_> {
    fn block(&self, addr: u64) -> &[u8; BLOCK_SIZE] {
        let s = addr as usize * BLOCK_SIZE;
        self.data[s..s + BLOCK_SIZE].try_into().expect("block")
    }
}

struct Out {
    dir: PathBuf,
    n: usize,
}

impl Out {
    fn put(&mut self, target: &str, name: &str, bytes: &[u8]) {
        let d = self.dir.join(target);
        fs::create_dir_all(&d).expect("mkdir");
        fs::write(d.join(format!("seed-{name}")), bytes).expect("write seed");
        self.n += 1;
    }
}

fn checkpoint(img: &Img, sb: &Superblock) -> (Checkpoint, CpBlock) {
    let l = sb.layout();
    let mut best: Option<(CpBlock, u64, u8)> = None;
    for pack in 1..=2u8 {
        let addr = u64::from(l.cp) + u64::from(pack - 1) * u64::from(BLOCKS_PER_SEG);
        if let Ok(cp) = CpBlock::parse(img.block(addr), addr) {
            let later = best
                .as_ref()
                .is_none_or(|(b, _, _)| version_after(cp.version(), b.version()));
            if later {
                best = Some((cp, addr, pack));
            }
        }
    }
    let (cp, addr, pack) = best.expect("a valid checkpoint pack");
    let payload: Vec<[u8; BLOCK_SIZE]> = (1..=u64::from(sb.cp_payload()))
        .map(|i| *img.block(addr + i))
        .collect();
    let c = Checkpoint::assemble(cp.clone(), pack, addr, &payload, &l).expect("assemble");
    (c, cp)
}

fn seed_image(img: &Img, out: &mut Out) {
    let name = img.name;
    let b0 = img.block(0);
    let sb = Superblock::parse(b0, 0).expect("superblock");
    let l = sb.layout();

    // superblock: both copies; a CRC-fixing variant.
    out.put("superblock", &format!("{name}-copy0"), b0);
    out.put("superblock", &format!("{name}-copy1"), img.block(1));
    let mut fix = b0.to_vec();
    fix.push(1);
    out.put("superblock", &format!("{name}-copy0-fixcrc"), &fix);

    // checkpoint: control byte, CP block, then the blocks that follow it in the pack.
    let (cp, _) = checkpoint(img, &sb);
    for pack in 1..=2u8 {
        let addr = u64::from(l.cp) + u64::from(pack - 1) * u64::from(BLOCKS_PER_SEG);
        let control = if pack == 2 { 2 } else { 0 };
        let mut s = vec![control];
        s.extend_from_slice(img.block(addr));
        out.put("checkpoint", &format!("{name}-pack{pack}"), &s);
        s[0] |= 1;
        s.extend_from_slice(img.block(addr + 1));
        s.extend_from_slice(img.block(addr + 2));
        out.put(
            "checkpoint",
            &format!("{name}-pack{pack}-payload-fixcrc"),
            &s,
        );
    }

    // summary: entry counts of the three data logs, then the blocks from cp_pack_start_sum.
    let start = cp.pack_addr + u64::from(cp.head.cp_pack_start_sum.get());
    let mut s = Vec::new();
    for c in &cp.cursegs[..3] {
        let n: u16 = if c.alloc_type == 1 { 512 } else { c.blkoff };
        s.extend_from_slice(&n.to_le_bytes());
    }
    for i in 0..3 {
        s.extend_from_slice(img.block(start + i));
    }
    out.put("summary", &format!("{name}-cp-summaries"), &s);

    // nat_sit: header (NAT count, SIT count, nid, main segments), then a block.
    let sum0 = img.block(start);
    let header = |nid: u32| {
        let mut h = Vec::new();
        h.extend_from_slice(&le16(sum0, 0).unwrap_or(0).to_le_bytes());
        h.extend_from_slice(&le16(sum0, 507).unwrap_or(0).to_le_bytes());
        h.extend_from_slice(&nid.to_le_bytes());
        h.extend_from_slice(&l.main_segments.to_le_bytes());
        h
    };
    let mut s = header(3);
    s.extend_from_slice(sum0);
    out.put("nat_sit", &format!("{name}-compact-summary"), &s);
    let nat_addr = nat_block_addr(&l, &cp.nat_bitmap, 3 / NAT_ENTRIES_PER_BLOCK as u32);
    let mut s = header(3);
    s.extend_from_slice(img.block(nat_addr));
    out.put("nat_sit", &format!("{name}-nat-block0"), &s);
    for i in 0..2u32 {
        let a = sit_block_addr(&l, &cp.sit_bitmap, i);
        let mut s = header(i);
        s.extend_from_slice(img.block(a));
        out.put("nat_sit", &format!("{name}-sit-block{i}"), &s);
    }

    // Node blocks: scan the main area for footers.
    let mut inodes: BTreeMap<u32, (u64, Inode)> = BTreeMap::new();
    let mut xnodes: Vec<(u32, u64)> = Vec::new();
    let end = (l.main_end()).min((img.data.len() / BLOCK_SIZE) as u64);
    for addr in u64::from(l.main)..end {
        let b = img.block(addr);
        let f = Footer::of(b);
        if f.nid == 0 {
            continue;
        }
        if f.nid == f.ino && f.ofs() == 0 {
            if let Ok(i) = Inode::parse(b, f.nid, &sb) {
                inodes.insert(f.nid, (addr, i));
            }
        } else if f.ofs() == XATTR_NODE_OFFSET {
            xnodes.push((f.ino, addr));
        }
    }
    // One inode seed per distinct shape (type, inline flags, extra size, size class).
    let mut shapes = HashSet::new();
    for (ino, (addr, i)) in &inodes {
        let size_class = 64 - i.size.leading_zeros();
        let shape = (
            i.file_type,
            i.inline,
            i.extra_isize,
            size_class,
            i.xattr_nid != 0,
        );
        if !shapes.insert(shape) {
            continue;
        }
        let mut s = img.block(*addr).to_vec();
        if i.checksum.is_some() {
            s.push(1);
        }
        out.put("inode", &format!("{name}-ino{ino}"), &s);
        // Inline dentries and inline xattrs.
        if i.has_inline_dentry() {
            out.put(
                "dentry",
                &format!("{name}-inline-ino{ino}"),
                i.inline_area(),
            );
        }
        if i.has_inline_xattr() && i.xattr_nid == 0 && i.inline_xattr_area().iter().any(|&b| b != 0)
        {
            out.put(
                "xattr",
                &format!("{name}-inline-ino{ino}"),
                i.inline_xattr_area(),
            );
        }
    }
    // Dentry blocks of directories kept in blocks.
    let mut dblocks = 0;
    for (ino, (_, i)) in &inodes {
        if i.file_type != uf2fs_format::inode::FileType::Directory || i.has_inline_dentry() {
            continue;
        }
        for slot in 0..i.addr_slots().min(4) {
            let a = i.data_addr(slot);
            if l.in_main(a) && dblocks < 8 {
                out.put(
                    "dentry",
                    &format!("{name}-ino{ino}-blk{slot}"),
                    img.block(a.into()),
                );
                dblocks += 1;
            }
        }
    }
    // Xattr buffers: the owner's inline area followed by the xattr node's data.
    for (owner, addr) in xnodes.iter().take(6) {
        let mut s = inodes
            .get(owner)
            .map(|(_, i)| i.inline_xattr_area().to_vec())
            .unwrap_or_default();
        s.extend_from_slice(&img.block(*addr)[..uf2fs_format::xattr::XATTR_NODE_DATA]);
        out.put("xattr", &format!("{name}-node-ino{owner}"), &s);
    }

    // image: patches of 5 bytes (LE u32 offset, value) in the metadata of linux-default.
    if name == "linux-default" {
        let patch = |list: &[(u64, u8)]| {
            let mut v = Vec::new();
            for &(off, val) in list {
                v.extend_from_slice(&(off as u32).to_le_bytes());
                v.push(val);
            }
            v
        };
        let bs = BLOCK_SIZE as u64;
        let same = |off: u64| img.data[off as usize];
        out.put("image", "empty", &[]);
        // A no-op patch (same byte) and real changes in the superblock.
        out.put("image", "sb-noop", &patch(&[(1024, same(1024))]));
        out.put("image", "sb0-magic", &patch(&[(1024, 0)]));
        // cp_payload is at byte 1664 of the superblock.
        out.put("image", "sb0-cp-payload", &patch(&[(1024 + 1664, 1)]));
        out.put(
            "image",
            "sb0-both-copies",
            &patch(&[(1024, 0), (bs + 1024, 0)]),
        );
        let cp_addr = cp.pack_addr * bs;
        out.put(
            "image",
            "cp-flags",
            &patch(&[(cp_addr + 132, same(cp_addr + 132) ^ 4)]),
        );
        out.put("image", "cp-ver", &patch(&[(cp_addr, same(cp_addr) ^ 1)]));
        let nat = nat_addr * bs + 3 * 9 + 1; // nid 3's ino field
        out.put("image", "nat-root", &patch(&[(nat, same(nat) ^ 1)]));
        let sit = sit_block_addr(&l, &cp.sit_bitmap, 0) * bs;
        out.put("image", "sit-entry0", &patch(&[(sit, same(sit) ^ 1)]));
        if let Some((raddr, _)) = inodes.get(&3) {
            let r = raddr * bs;
            out.put("image", "root-mode", &patch(&[(r, same(r) ^ 0x40)]));
            out.put("image", "root-inline", &patch(&[(r + 3, same(r + 3) ^ 4)]));
            let first = r + I_ADDR_OFFSET as u64 + 4;
            out.put(
                "image",
                "root-dentry-bitmap",
                &patch(&[(first, same(first) ^ 0xff)]),
            );
        }
    }
}

fn main() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    let mut out = Out { dir, n: 0 };
    for name in IMAGES {
        let img = Img {
            name,
            data: fixture_full(name),
        };
        seed_image(&img, &mut out);
        eprintln!("{name}: done");
    }
    // Hand-made inputs the images lack: POSIX ACLs in F2FS's form, inside an xattr list.
    let mut acl = 1u32.to_le_bytes().to_vec();
    for (tag, perm) in [(1u16, 6u16), (4, 4), (0x10, 4), (0x20, 4)] {
        acl.extend_from_slice(&tag.to_le_bytes());
        acl.extend_from_slice(&perm.to_le_bytes());
    }
    for (tag, id) in [(2u16, 1000u32), (8, 5)] {
        acl.extend_from_slice(&tag.to_le_bytes());
        acl.extend_from_slice(&6u16.to_le_bytes());
        acl.extend_from_slice(&id.to_le_bytes());
    }
    out.put("xattr", "acl-value", &acl);
    let mut list = 0xF2F5_2011u32.to_le_bytes().to_vec();
    list.resize(24, 0);
    for (idx, name) in [(2u8, &b""[..]), (3, b""), (1, b"user_attr")] {
        let value: &[u8] = if idx == 1 { b"value" } else { &acl };
        let start = list.len();
        list.push(idx);
        list.push(name.len() as u8);
        list.extend_from_slice(&(value.len() as u16).to_le_bytes());
        list.extend_from_slice(name);
        list.extend_from_slice(value);
        while (list.len() - start) % 4 != 0 {
            list.push(0);
        }
    }
    list.extend_from_slice(&[0; 4]);
    out.put("xattr", "acl-list", &list);
    seed_quota(&mut out);
    seed_clusters(&mut out);
    eprintln!("{} seeds in {}", out.n, out.dir.display());
}

/// The quota files of the linux-quota fixture, as the `quota` target takes them (type byte,
/// two ids, the file).
fn seed_quota(out: &mut Out) {
    use uf2fs_engine::uf2fs_device::MemDevice;
    let dev = MemDevice::new(fixture_full("linux-quota"), true);
    let fs = uf2fs_engine::Fs::with_device(Box::new(dev)).expect("linux-quota mounts");
    for (kind, ino) in fs.superblock().quota_inos().into_iter().enumerate() {
        if ino == 0 {
            continue;
        }
        let size = fs.inode(ino).expect("quota inode").size as usize;
        let mut file = vec![0u8; size];
        let n = fs.read(ino, 0, &mut file).expect("quota file reads");
        file.truncate(n);
        let mut input = vec![kind as u8];
        input.extend_from_slice(&0u32.to_le_bytes());
        input.extend_from_slice(&70_000u32.to_le_bytes());
        input.extend_from_slice(&file);
        out.put("quota", &format!("linux-quota-{kind}"), &input);
    }
}

/// Valid compressed clusters (LZ4 and ZSTD, with and without the checksum) for the `cluster`
/// target: byte 0 the settings, then the header and the compressed bytes.
fn seed_clusters(out: &mut Out) {
    let mut plain = Vec::new();
    let mut i = 0u32;
    while plain.len() < 4 * BLOCK_SIZE {
        plain.extend_from_slice(format!("line {i} of a compressible cluster\n").as_bytes());
        i += 1;
    }
    plain.truncate(4 * BLOCK_SIZE);
    for (alg, body) in [
        (1u8, lz4_flex::block::compress(&plain)),
        (2u8, zstd::bulk::compress(&plain, 3).expect("zstd")),
    ] {
        for checksum in [false, true] {
            let crc = uf2fs_format::crc::f2fs_crc32(uf2fs_format::crc::F2FS_SUPER_MAGIC, &body);
            let mut input = vec![alg | if checksum { 4 } else { 0 }];
            input.extend_from_slice(&(body.len() as u32).to_le_bytes());
            input.extend_from_slice(&(if checksum { crc } else { 0 }).to_le_bytes());
            input.extend_from_slice(&[0u8; 16]);
            input.extend_from_slice(&body);
            out.put(
                "cluster",
                &format!("alg{alg}-crc{}", u8::from(checksum)),
                &input,
            );
        }
    }
}
