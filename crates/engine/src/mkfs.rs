//! mkfs: a fresh F2FS volume with mkfs.f2fs 1.15's layout (see `uf2fs_format::geometry`) and
//! its first contents: the root directory, lost+found when asked, NAT block 0, the SIT and NAT
//! journals, the first checkpoint pack (unmount, compacted summaries, nat_bits) and an empty
//! second pack (version 0), then both superblock copies.
//!
//! A multi-device volume ([`mkfs_devices`], as `mkfs.f2fs -c`): the first device holds the
//! superblocks, the metadata and the start of the main area, each next one the following
//! whole segments; the superblock's device table records each device's path and segments.
//!
//! Order: the old superblocks are erased first and the new ones written last, after a flush,
//! so a device whose mkfs was interrupted holds no superblock that points at half-written
//! metadata. The block at the warm-node log's start is zeroed so that nothing stale can pass
//! for a roll-forward chain.

use crate::error::{Error, Result};
use std::time::{SystemTime, UNIX_EPOCH};
use uf2fs_device::{BlockDevice, IoCause};
use uf2fs_format::checkpoint::{
    flags, BitmapPlace, RawCheckpoint, CP_CHECKSUM_OFFSET, CP_MIN_CHECKSUM_OFFSET,
};
use uf2fs_format::crc::{f2fs_crc32, F2FS_SUPER_MAGIC};
use uf2fs_format::geometry::{plan, Geometry, GeometryOptions};
use uf2fs_format::hash::dentry_hash;
use uf2fs_format::inode::{checksum_seed, compute_checksum, iflags, inline_flags, I_ADDR_OFFSET};
use uf2fs_format::nat::RawNatEntry;
use uf2fs_format::node::FOOTER_OFFSET;
use uf2fs_format::summary::{JOURNAL_SIZE, SUM_TYPE_NODE};
use uf2fs_format::superblock::{
    feature, RawSuperblock, DEVICE_PATH_LEN, MAX_DEVICES, SB_CHECKSUM_OFFSET, SB_OFFSET,
};
use uf2fs_format::{Block, BLOCKS_PER_SEG, BLOCK_SIZE};
use zerocopy::{FromZeros, IntoBytes};

/// Features `uf2fs mkfs` can make; others are refused by name. encrypt, verity and
/// compression are superblock bits only at mkfs time (compression also sizes the extra
/// inode area); casefold also sets the filename encoding (see [`superblock`]).
pub const MKFS_FEATURES: u32 = feature::EXTRA_ATTR
    | feature::INODE_CHKSUM
    | feature::FLEXIBLE_INLINE_XATTR
    | feature::INODE_CRTIME
    | feature::LOST_FOUND
    | feature::SB_CHKSUM
    | feature::ENCRYPT
    | feature::VERITY
    | feature::COMPRESSION
    | feature::CASEFOLD
    | feature::QUOTA_INO
    | feature::PRJQUOTA
    | feature::RO;

/// Features that live in the extra inode area.
const NEED_EXTRA_ATTR: u32 = feature::INODE_CHKSUM
    | feature::FLEXIBLE_INLINE_XATTR
    | feature::INODE_CRTIME
    | feature::PRJQUOTA
    | feature::COMPRESSION;

/// mkfs.f2fs's default file-name extensions: cold (media and archives) then hot.
const COLD_EXTENSIONS: [&str; 36] = [
    "mp", "wm", "og", "jp", "avi", "m4v", "m4p", "mkv", "mov", "webm", "wav", "m4a", "3gp", "opus",
    "flac", "gif", "png", "svg", "webp", "jar", "deb", "iso", "gz", "xz", "zst", "pdf", "pyc",
    "ttc", "ttf", "exe", "apk", "cnt", "exo", "odex", "vdex", "so",
];
const HOT_EXTENSIONS: [&str; 4] = ["db", "vmdk", "vdi", "qcow2"];

/// What the user chooses.
#[derive(Debug, Clone)]
pub struct MkfsOptions {
    /// Bytes of the device to use (the whole device when `None`).
    pub size: Option<u64>,
    pub overprovision: Option<f64>,
    pub segs_per_sec: u32,
    pub label: String,
    /// Feature bits (see [`MKFS_FEATURES`]).
    pub features: u32,
    /// Fixed uuid and time, for reproducible images; random and now otherwise.
    pub uuid: Option<[u8; 16]>,
    pub time: Option<u64>,
    pub root_uid: u32,
    pub root_gid: u32,
    /// The large NAT bitmap layout of mkfs.f2fs `-i` (see `uf2fs_format::geometry`).
    pub large_nat_bitmap: bool,
}

impl Default for MkfsOptions {
    fn default() -> Self {
        MkfsOptions {
            size: None,
            overprovision: None,
            segs_per_sec: 1,
            label: String::new(),
            features: 0,
            uuid: None,
            time: None,
            root_uid: 0,
            root_gid: 0,
            large_nat_bitmap: false,
        }
    }
}

/// Parses a comma-separated feature list as mkfs.f2fs's `-O` spells it.
pub fn parse_features(list: &str) -> Result<u32> {
    let mut bits = 0;
    for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let bit = feature::NAMES
            .iter()
            .find(|(_, n)| *n == name)
            .map(|(b, _)| *b);
        match bit {
            Some(b) if b & MKFS_FEATURES != 0 => bits |= b,
            // blkzoned, atomic_write: bits mkfs.f2fs sets itself or never.
            Some(_) => {
                return Err(Error::Unsupported(format!(
                    "feature {name}: mkfs.f2fs 1.15 does not take it with -O"
                )));
            }
            None => return Err(Error::Unsupported(format!("unknown feature {name:?}"))),
        }
    }
    if bits & NEED_EXTRA_ATTR != 0 && bits & feature::EXTRA_ATTR == 0 {
        return Err(Error::Unsupported(format!(
            "{} need extra_attr",
            feature::names(bits & NEED_EXTRA_ATTR).join(", ")
        )));
    }
    Ok(bits)
}

fn random_bytes<const N: usize>() -> [u8; N] {
    let mut b = [0u8; N];
    // Fall back to the clock if /dev/urandom is not there (the uuid must only differ).
    if std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut b))
        .is_err()
    {
        let t = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        for (i, x) in b.iter_mut().enumerate() {
            *x = (t >> ((i % 16) * 8)) as u8 ^ i as u8;
        }
    }
    b
}

/// Bytes of the extra inode area mkfs gives its inodes: the smallest covering the features.
fn extra_isize(features: u32) -> u16 {
    if features & feature::COMPRESSION != 0 {
        36
    } else if features & feature::INODE_CRTIME != 0 {
        24
    } else if features & feature::INODE_CHKSUM != 0 {
        12
    } else if features & feature::PRJQUOTA != 0 {
        8
    } else {
        4
    }
}

fn put(b: &mut [u8], at: usize, bytes: &[u8]) {
    if let Some(dst) = b.get_mut(at..at + bytes.len()) {
        dst.copy_from_slice(bytes);
    }
}

struct Writer<'a> {
    dev: &'a dyn BlockDevice,
}

impl Writer<'_> {
    fn block(&self, addr: u64, b: &Block, cause: IoCause) -> Result<()> {
        self.dev
            .write_blocks(addr, b, cause)
            .map_err(|e| Error::io(format!("mkfs: block {addr}"), e))
    }

    fn zero(&self, addr: u64, blocks: u64) -> Result<()> {
        let chunk = vec![0u8; 256 * BLOCK_SIZE];
        let mut done = 0;
        while done < blocks {
            let n = (blocks - done).min(256);
            let buf = chunk.get(..n as usize * BLOCK_SIZE).unwrap_or(&[]);
            self.dev
                .write_blocks(addr + done, buf, IoCause::Meta)
                .map_err(|e| {
                    Error::io(
                        format!("mkfs: zeroing blocks {}..{}", addr + done, addr + done + n),
                        e,
                    )
                })?;
            done += n;
        }
        Ok(())
    }
}

/// A directory inode as mkfs writes the root and lost+found.
#[allow(clippy::too_many_arguments)]
fn dir_inode(
    o: &MkfsOptions,
    nid: u32,
    mode: u16,
    links: u32,
    pino: u32,
    name: &[u8],
    data_addr: u32,
    next_blkaddr: u32,
    time: u64,
    seed: u32,
) -> Block {
    let mut b = [0u8; BLOCK_SIZE];
    put(&mut b, 0, &mode.to_le_bytes());
    put(&mut b, 4, &o.root_uid.to_le_bytes());
    put(&mut b, 8, &o.root_gid.to_le_bytes());
    put(&mut b, 12, &links.to_le_bytes());
    put(&mut b, 16, &(BLOCK_SIZE as u64).to_le_bytes());
    put(&mut b, 24, &2u64.to_le_bytes());
    for at in [32, 40, 48] {
        put(&mut b, at, &time.to_le_bytes());
    }
    put(&mut b, 72, &1u32.to_le_bytes()); // i_current_depth
    put(&mut b, 84, &pino.to_le_bytes());
    put(&mut b, 88, &(name.len() as u32).to_le_bytes());
    put(&mut b, 92, name);
    let mut extra_words = 0;
    if o.features & feature::EXTRA_ATTR != 0 {
        let isize = extra_isize(o.features);
        b[3] = inline_flags::EXTRA_ATTR;
        put(&mut b, I_ADDR_OFFSET, &isize.to_le_bytes());
        if o.features & feature::INODE_CRTIME != 0 {
            put(&mut b, I_ADDR_OFFSET + 12, &time.to_le_bytes());
        }
        extra_words = usize::from(isize / 4);
    }
    put(
        &mut b,
        I_ADDR_OFFSET + 4 * extra_words,
        &data_addr.to_le_bytes(),
    );
    put(&mut b, FOOTER_OFFSET, &nid.to_le_bytes());
    put(&mut b, FOOTER_OFFSET + 4, &nid.to_le_bytes());
    put(&mut b, FOOTER_OFFSET + 12, &1u64.to_le_bytes()); // cp_ver of mkfs's nodes
    put(&mut b, FOOTER_OFFSET + 20, &next_blkaddr.to_le_bytes());
    if o.features & feature::INODE_CHKSUM != 0 {
        let crc = compute_checksum(seed, &b);
        put(&mut b, I_ADDR_OFFSET + 8, &crc.to_le_bytes());
    }
    b
}

/// The quota files mkfs makes, by type (0 user, 1 group, 2 project): `quota` asks for the
/// user and group files, `project_quota` for the project file (as mkfs.f2fs 1.15 does).
fn quota_kinds(features: u32) -> Vec<usize> {
    let mut kinds = Vec::new();
    if features & feature::QUOTA_INO != 0 {
        kinds.extend([0, 1]);
    }
    if features & feature::PRJQUOTA != 0 {
        kinds.push(2);
    }
    kinds
}

/// A quota file's inode as mkfs.f2fs writes it: a regular file of 6 KiB (two data blocks from
/// `data`), owned like the root, immutable.
fn quota_inode(
    o: &MkfsOptions,
    nid: u32,
    data: u32,
    next_blkaddr: u32,
    time: u64,
    seed: u32,
) -> Block {
    let mut b = dir_inode(o, nid, 0o100600, 1, 0, b"", data, next_blkaddr, time, seed);
    put(&mut b, 16, &6144u64.to_le_bytes());
    put(&mut b, 24, &3u64.to_le_bytes());
    put(&mut b, 72, &0u32.to_le_bytes()); // i_current_depth: not a directory
    put(&mut b, 80, &iflags::IMMUTABLE.to_le_bytes()); // mkfs.f2fs 1.15: immutable only
    let extra_words = if o.features & feature::EXTRA_ATTR != 0 {
        usize::from(extra_isize(o.features) / 4)
    } else {
        0
    };
    put(
        &mut b,
        I_ADDR_OFFSET + 4 * (extra_words + 1),
        &(data + 1).to_le_bytes(),
    );
    if o.features & feature::INODE_CHKSUM != 0 {
        put(&mut b, I_ADDR_OFFSET + 8, &0u32.to_le_bytes());
        let crc = compute_checksum(seed, &b);
        put(&mut b, I_ADDR_OFFSET + 8, &crc.to_le_bytes());
    }
    b
}

/// A new quota file of type `kind` as mkfs.f2fs writes it: six quota blocks (header and info
/// with a week's grace, the tree path of id 0 through blocks 1 to 4, data block 5) whose one
/// entry charges `id` (the root's) with `dirs` inodes and a dentry block each.
fn default_quota_file(kind: usize, id: u32, dirs: u32) -> Vec<u8> {
    use uf2fs_format::quota::{RawDataHeader, RawDquot, RawQuotaHeader, MAGICS, QBLOCK, VERSION};
    const WEEK: u32 = 7 * 24 * 60 * 60;
    let mut f = vec![0u8; 2 * BLOCK_SIZE];
    let mut h = RawQuotaHeader::new_zeroed();
    h.magic.set(MAGICS.get(kind).copied().unwrap_or(0));
    h.version.set(VERSION);
    h.block_grace.set(WEEK);
    h.inode_grace.set(WEEK);
    h.blocks.set(6);
    h.free_entry.set(5);
    put(&mut f, 0, h.as_bytes());
    for level in 1..5u32 {
        put(&mut f, level as usize * QBLOCK, &(level + 1).to_le_bytes());
    }
    let mut dh = RawDataHeader::new_zeroed();
    dh.entries.set(1);
    put(&mut f, 5 * QBLOCK, dh.as_bytes());
    let mut d = RawDquot::new_zeroed();
    d.id.set(id);
    d.inodes.set(u64::from(dirs));
    d.space.set(u64::from(dirs) * BLOCK_SIZE as u64);
    put(&mut f, 5 * QBLOCK + 16, d.as_bytes());
    f
}

/// A dentry block with '.', '..' and the given entries (name, ino), each a directory.
fn dentry_block(me: u32, parent: u32, entries: &[(&[u8], u32)]) -> Block {
    let mut b = [0u8; BLOCK_SIZE];
    let mut slot = 0usize;
    let mut add = |b: &mut Block, name: &[u8], ino: u32, hash: u32| {
        let e = 30 + slot * 11;
        put(b, e, &hash.to_le_bytes());
        put(b, e + 4, &ino.to_le_bytes());
        put(b, e + 8, &(name.len() as u16).to_le_bytes());
        put(b, e + 10, &[2]); // directory
        put(b, 2384 + slot * 8, name);
        for s in slot..slot + name.len().div_ceil(8) {
            if let Some(byte) = b.get_mut(s / 8) {
                *byte |= 1 << (s % 8);
            }
        }
        slot += name.len().div_ceil(8);
    };
    add(&mut b, b".", me, 0);
    add(&mut b, b"..", parent, 0);
    for (name, ino) in entries {
        add(&mut b, name, *ino, dentry_hash(name));
    }
    b
}

fn sit_journal_entry(b: &mut [u8], at: usize, segno: u32, seg_type: u16, valid: u16) {
    put(b, at, &segno.to_le_bytes());
    put(b, at + 4, &((seg_type << 10) | valid).to_le_bytes());
    for i in 0..usize::from(valid) {
        if let Some(byte) = b.get_mut(at + 6 + i / 8) {
            *byte |= 0x80 >> (i % 8);
        }
    }
}

/// One device of a multi-device volume to make: the path to record in the superblock (as
/// mkfs.f2fs records its arguments), its size, and the device itself.
pub struct MkfsDevice {
    pub path: Vec<u8>,
    pub bytes: u64,
    pub device: Box<dyn BlockDevice>,
}

/// A device table entry to write: recorded path and segments.
type DevEntry = (Vec<u8>, u32);

/// Formats `dev`. Returns the layout made.
pub fn mkfs(dev: &dyn BlockDevice, o: &MkfsOptions) -> Result<Geometry> {
    let device_bytes = dev.block_count() * BLOCK_SIZE as u64;
    let bytes = o.size.unwrap_or(device_bytes);
    if bytes > device_bytes {
        return Err(Error::Unsupported(format!(
            "size {bytes} is larger than the device ({device_bytes} bytes)"
        )));
    }
    make(dev, o, bytes, None)
}

/// Formats a volume over `devices` in order, as `mkfs.f2fs -c` does: each device is used
/// whole, the first for at least one segment after the superblocks' zone. The segments of
/// the devices add up to the volume's exactly: where mkfs.f2fs rounds the volume down to
/// whole zones and leaves the table's sum larger (which Linux 6.1 refuses to mount), the last
/// device is recorded with that many segments fewer.
pub fn mkfs_devices(devices: Vec<MkfsDevice>, o: &MkfsOptions) -> Result<Geometry> {
    let unsupported = |why: String| Err(Error::Unsupported(why));
    if devices.len() < 2 || devices.len() > MAX_DEVICES {
        return unsupported(format!(
            "a multi-device volume has 2 to {MAX_DEVICES} devices, not {}",
            devices.len()
        ));
    }
    if o.size.is_some() {
        return unsupported(
            "a size cannot be given for a multi-device volume: each device is used whole".into(),
        );
    }
    if o.features & feature::RO != 0 {
        return unsupported(
            "the read-only layout (-O ro) on more than one device is not supported".into(),
        );
    }
    let seg_bytes = BLOCK_SIZE as u64 * u64::from(BLOCKS_PER_SEG);
    let mut table: Vec<DevEntry> = Vec::with_capacity(devices.len());
    let mut plan_bytes = 0u64;
    for (i, d) in devices.iter().enumerate() {
        if d.path.is_empty() || d.path.len() >= DEVICE_PATH_LEN || d.path.contains(&0) {
            return unsupported(format!(
                "device {i}: its path must be 1 to {} bytes long to be recorded in the superblock: {}",
                DEVICE_PATH_LEN - 1,
                String::from_utf8_lossy(&d.path)
            ));
        }
        // Device 0's segments are counted after segment0 (known once planned); the others'
        // whole segments add to what is planned as if they were part of device 0.
        let segs = if i == 0 { 0 } else { d.bytes / seg_bytes };
        if i > 0 && segs == 0 {
            return unsupported(format!(
                "device {i} ({}) is smaller than one segment (2 MiB)",
                String::from_utf8_lossy(&d.path)
            ));
        }
        plan_bytes = plan_bytes.saturating_add(if i == 0 { d.bytes } else { segs * seg_bytes });
        table.push((d.path.clone(), u32::try_from(segs).unwrap_or(u32::MAX)));
    }
    let first_bytes = devices.first().map_or(0, |d| d.bytes);
    let mut g =
        plan(&geometry_options(o, plan_bytes)).map_err(|e| Error::Unsupported(e.to_string()))?;
    let segment0_bytes = u64::from(g.segment0_blkaddr) * BLOCK_SIZE as u64;
    let first_segs = first_bytes.saturating_sub(segment0_bytes) / seg_bytes;
    if first_segs == 0 {
        return unsupported(
            "device 0 must hold at least one segment (2 MiB) after its first zone".into(),
        );
    }
    if let Some(t) = table.first_mut() {
        t.1 = u32::try_from(first_segs).unwrap_or(u32::MAX);
    }
    let total: u64 = table.iter().map(|t| u64::from(t.1)).sum();
    let cut = total.saturating_sub(u64::from(g.segment_count));
    if let Some(last) = table.last_mut() {
        let cut = u32::try_from(cut).unwrap_or(u32::MAX);
        if cut >= last.1 {
            return unsupported("the last device is too small for a whole zone".into());
        }
        last.1 -= cut;
    }
    // As mkfs.f2fs: every device's sectors, the tails that hold no segment too.
    g.block_count = devices.iter().map(|d| d.bytes / 512).sum::<u64>() / 8;
    let mut parts = Vec::with_capacity(devices.len());
    for (i, (d, t)) in devices.into_iter().zip(&table).enumerate() {
        let mut blocks = u64::from(t.1) * u64::from(BLOCKS_PER_SEG);
        if i == 0 {
            blocks += u64::from(g.segment0_blkaddr);
        }
        parts.push(uf2fs_device::Part {
            name: format!("device {i} ({})", String::from_utf8_lossy(&d.path)),
            device: d.device,
            blocks,
        });
    }
    let joined =
        uf2fs_device::JoinedDevice::new(parts).map_err(|e| Error::Device(e.to_string()))?;
    make_planned(&joined, o, g, Some(&table))
}

fn geometry_options(o: &MkfsOptions, bytes: u64) -> GeometryOptions {
    GeometryOptions {
        device_bytes: bytes,
        sector_size: 512,
        segs_per_sec: o.segs_per_sec,
        secs_per_zone: 1,
        overprovision: o.overprovision,
        large_nat_bitmap: o.large_nat_bitmap,
        read_only: o.features & feature::RO != 0,
    }
}

fn make(
    dev: &dyn BlockDevice,
    o: &MkfsOptions,
    bytes: u64,
    devs: Option<&[DevEntry]>,
) -> Result<Geometry> {
    let g = plan(&geometry_options(o, bytes)).map_err(|e| Error::Unsupported(e.to_string()))?;
    make_planned(dev, o, g, devs)
}

fn make_planned(
    dev: &dyn BlockDevice,
    o: &MkfsOptions,
    mut g: Geometry,
    devs: Option<&[DevEntry]>,
) -> Result<Geometry> {
    let features = o.features;
    if features & !MKFS_FEATURES != 0 {
        return Err(Error::Unsupported(format!(
            "uf2fs mkfs cannot make features {:?} yet",
            feature::names(features & !MKFS_FEATURES)
        )));
    }
    let label: Vec<u16> = o.label.encode_utf16().collect();
    if label.len() > 512 {
        return Err(Error::Unsupported(
            "the label is longer than 512 UTF-16 units".into(),
        ));
    }
    // mkfs.f2fs 1.15 counts free segments (and user blocks) over every whole segment of the
    // device, including those past the last whole section that the main area does not have;
    // fsck.f2fs then rejects its image. We count the main area's segments only.
    let read_only = features & feature::RO != 0;
    let logs = uf2fs_format::geometry::logs_in_use(read_only);
    let free_segments = g
        .segment_count_main
        .checked_sub(logs)
        .ok_or_else(|| Error::Unsupported("the device is too small".into()))?;
    let user_segments = g
        .segment_count_main
        .checked_sub(g.overprov_segments)
        .filter(|&n| n > 0)
        .ok_or_else(|| {
            Error::Unsupported("the device is too small for this overprovision".into())
        })?;
    let w = Writer { dev };
    let time = o.time.unwrap_or_else(|| {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0)
    });
    let uuid = o.uuid.unwrap_or_else(random_bytes::<16>);
    let seed = checksum_seed(&uuid);
    let seg = u64::from(BLOCKS_PER_SEG);
    let main = u64::from(g.main_blkaddr);
    let seg_addr = |segno: u32| main + u64::from(segno) * seg;
    let [hot_data, warm_data, cold_data, hot_node, warm_node, cold_node] = g.cursegs;
    let lpf = features & feature::LOST_FOUND != 0;
    let n_lpf = u32::from(lpf);
    // Quota files (user and group; project too with project_quota): nids after the root,
    // before lost+found; each an inode in the hot node log and two data blocks.
    let quota_kinds = quota_kinds(features);
    let nq = quota_kinds.len() as u32;
    let quota_nid = |i: u32| 4 + i;
    let lpf_nid = 4 + nq;

    // 1. No old superblock survives an interrupted mkfs.
    w.zero(0, 2)?;
    dev.flush().map_err(|e| Error::io("mkfs: flush", e))?;
    // 2. SIT copy 0 and the first copy of every NAT segment pair start out empty.
    w.zero(
        u64::from(g.sit_blkaddr),
        u64::from(g.segment_count_sit / 2) * seg,
    )?;
    for pair in 0..u64::from(g.segment_count_nat / 2) {
        w.zero(u64::from(g.nat_blkaddr) + pair * 2 * seg, seg)?;
    }
    // 3. Root and lost+found inodes, their dentry blocks; nothing stale at the warm node log.
    let root_addr = seg_addr(hot_node) as u32;
    let root_data = seg_addr(hot_data) as u32;
    let root_entries: Vec<(&[u8], u32)> = if lpf {
        vec![(b"lost+found".as_slice(), lpf_nid)]
    } else {
        vec![]
    };
    let root = dir_inode(
        o,
        3,
        0o40755,
        2 + n_lpf,
        0,
        b"",
        root_data,
        root_addr + 1,
        time,
        seed,
    );
    w.block(u64::from(root_addr), &root, IoCause::Node)?;
    w.block(
        u64::from(root_data),
        &dentry_block(3, 3, &root_entries),
        IoCause::UserData,
    )?;
    for (i, &kind) in quota_kinds.iter().enumerate() {
        let i = i as u32;
        let node = root_addr + 1 + i;
        let data = root_data + 1 + 2 * i;
        // mkfs.f2fs 1.15 gives the footer's next block as if every type before this one
        // had its file (the project file alone says root + 4): kept for equal bytes; it is
        // only a hint, outside any roll-forward chain.
        let next = root_addr + 2 + kind as u32;
        let inode = quota_inode(o, quota_nid(i), data, next, time, seed);
        w.block(u64::from(node), &inode, IoCause::Node)?;
        let ids = [o.root_uid, o.root_gid, 0];
        let file = default_quota_file(kind, ids.get(kind).copied().unwrap_or(0), 1 + n_lpf);
        for (k, half) in file.chunks(BLOCK_SIZE).enumerate() {
            let mut b = [0u8; BLOCK_SIZE];
            put(&mut b, 0, half);
            w.block(u64::from(data) + k as u64, &b, IoCause::UserData)?;
        }
    }
    if lpf {
        let (node, data) = (root_addr + 1 + nq, root_data + 1 + 2 * nq);
        let lpf_inode = dir_inode(
            o,
            lpf_nid,
            0o40700,
            2,
            3,
            b"lost+found",
            data,
            node + 1,
            time,
            seed,
        );
        w.block(u64::from(node), &lpf_inode, IoCause::Node)?;
        w.block(
            u64::from(data),
            &dentry_block(lpf_nid, 3, &[]),
            IoCause::UserData,
        )?;
    }
    if !read_only {
        // (In the read-only layout the warm node log names segment 0, the root's.)
        w.zero(seg_addr(warm_node), 1)?;
    }
    // 4. NAT block 0: the node and meta inodes (address 1: "in use"), the root and the quota
    // files (mkfs.f2fs 1.15 puts lost+found in the NAT journal only).
    let mut nat = [0u8; BLOCK_SIZE];
    let quota_nat = (0..nq).map(|i| (quota_nid(i), root_addr + 1 + i));
    for (nid, addr) in [(1u32, 1u32), (2, 1), (3, root_addr)]
        .into_iter()
        .chain(quota_nat)
    {
        let mut e = RawNatEntry::new_zeroed();
        e.ino.set(nid);
        e.block_addr.set(addr);
        put(&mut nat, nid as usize * 9, e.as_bytes());
    }
    w.block(u64::from(g.nat_blkaddr), &nat, IoCause::Meta)?;
    // 5. Checkpoint pack 1.
    // Random, unless the uuid is fixed (a reproducible image): then drawn from the uuid.
    let version_seed = match o.uuid {
        Some(u) => f2fs_crc32(F2FS_SUPER_MAGIC, &u).to_le_bytes(),
        None => random_bytes::<4>(),
    };
    let version = u64::from(u32::from_le_bytes(version_seed) >> 1 | 1);
    let nat_bits_bytes = u64::from(g.segment_count_nat) / 2 * seg / 8;
    let nat_bits_blocks = (8 + 2 * nat_bits_bytes).div_ceil(BLOCK_SIZE as u64);
    let total = 6 + g.cp_payload;
    let mut cp = RawCheckpoint::new_zeroed();
    cp.checkpoint_ver.set(version);
    cp.user_block_count.set(u64::from(user_segments) * seg);
    cp.valid_block_count
        .set(2 + 3 * u64::from(nq) + 2 * u64::from(n_lpf));
    cp.rsvd_segment_count.set(g.reserved_segments);
    cp.overprov_segment_count.set(g.overprov_segments);
    cp.free_segment_count.set(free_segments);
    // Logs 0..3 of each kind are in use; the other five slots are "none".
    let none = u32::MAX;
    let data = [hot_data, warm_data, cold_data, none, none, none, none, none];
    let node = [hot_node, warm_node, cold_node, none, none, none, none, none];
    for (slot, v) in cp.cur_data_segno.iter_mut().zip(data) {
        slot.set(v);
    }
    for (slot, v) in cp.cur_node_segno.iter_mut().zip(node) {
        slot.set(v);
    }
    let (hot_nodes, hot_data_blocks) = ((1 + nq + n_lpf) as u16, (1 + 2 * nq + n_lpf) as u16);
    cp.cur_node_blkoff[0].set(hot_nodes);
    cp.cur_data_blkoff[0].set(hot_data_blocks);
    let mut cp_flags = flags::UMOUNT | flags::COMPACT_SUM;
    if u64::from(total) <= seg - nat_bits_blocks {
        cp_flags |= flags::NAT_BITS;
    }
    if o.large_nat_bitmap {
        cp_flags |= flags::LARGE_NAT_BITMAP;
    }
    cp.ckpt_flags.set(cp_flags);
    cp.cp_pack_total_block_count.set(total);
    cp.cp_pack_start_sum.set(1 + g.cp_payload);
    cp.valid_node_count.set(1 + nq + n_lpf);
    cp.valid_inode_count.set(1 + nq + n_lpf);
    cp.next_free_nid.set(4 + nq + n_lpf);
    let sit_bitmap_bytes = u64::from(g.segment_count_sit) / 2 * seg / 8;
    cp.sit_ver_bitmap_bytesize.set(sit_bitmap_bytes as u32);
    cp.nat_ver_bitmap_bytesize.set(nat_bits_bytes as u32);
    cp.checksum_offset.set(if o.large_nat_bitmap {
        CP_MIN_CHECKSUM_OFFSET
    } else {
        CP_CHECKSUM_OFFSET
    });
    // The CP block with both bitmaps zero (each area's first copy is current); the payload
    // blocks, zero as well, are written apart.
    let (sit_zero, nat_zero) = (
        vec![0u8; sit_bitmap_bytes as usize],
        vec![0u8; nat_bits_bytes as usize],
    );
    let place = BitmapPlace::of(&cp, g.cp_payload, u64::from(g.segment0_blkaddr))?;
    let cp_block = |cp: &RawCheckpoint| -> Result<(Block, u32)> {
        let (blocks, crc) = place.write(cp, &sit_zero, &nat_zero)?;
        let first = blocks.first().copied().unwrap_or([0u8; BLOCK_SIZE]);
        Ok((first, crc))
    };
    let (cp1, crc1) = cp_block(&cp)?;
    let pack1 = u64::from(g.segment0_blkaddr);
    w.block(pack1, &cp1, IoCause::Checkpoint)?;
    w.zero(pack1 + 1, u64::from(g.cp_payload))?;
    // Compacted data summaries: NAT journal, SIT journal, then the hot data entries.
    let mut sum = [0u8; BLOCK_SIZE];
    put(&mut sum, 0, &hot_nodes.to_le_bytes());
    let mut nat_j = vec![(3u32, root_addr)];
    for i in 0..nq {
        nat_j.push((quota_nid(i), root_addr + 1 + i));
    }
    if lpf {
        nat_j.push((lpf_nid, root_addr + 1 + nq));
    }
    for (i, (nid, addr)) in nat_j.iter().enumerate() {
        let at = 2 + i * 13;
        put(&mut sum, at, &nid.to_le_bytes());
        put(&mut sum, at + 5, &nid.to_le_bytes());
        put(&mut sum, at + 9, &addr.to_le_bytes());
    }
    let sj = JOURNAL_SIZE;
    let mut sit = vec![(hot_node, 3u16, hot_nodes)];
    if read_only {
        sit.push((hot_data, 0, hot_data_blocks));
    } else {
        sit.extend([
            (warm_node, 4, 0),
            (g.cursegs[5], 5, 0),
            (hot_data, 0, hot_data_blocks),
            (g.cursegs[1], 1, 0),
            (g.cursegs[2], 2, 0),
        ]);
    }
    put(&mut sum, sj, &(sit.len() as u16).to_le_bytes());
    for (i, (segno, t, valid)) in sit.iter().enumerate() {
        sit_journal_entry(&mut sum, sj + 2 + i * 78, *segno, *t, *valid);
    }
    // Hot data's summary entries (nid, version, ofs_in_node), 7 bytes each, in block order.
    let entries = 2 * JOURNAL_SIZE;
    let mut owners = vec![(3u32, 0u16)];
    for i in 0..nq {
        owners.extend([(quota_nid(i), 0), (quota_nid(i), 1)]);
    }
    if lpf {
        owners.push((lpf_nid, 0));
    }
    for (k, (nid, ofs)) in owners.iter().enumerate() {
        put(&mut sum, entries + 7 * k, &nid.to_le_bytes());
        put(&mut sum, entries + 7 * k + 5, &ofs.to_le_bytes());
    }
    let start_sum = pack1 + 1 + u64::from(g.cp_payload);
    w.block(start_sum, &sum, IoCause::Checkpoint)?;
    // Node summaries (an unmount checkpoint carries them): hot node has the root (and lpf).
    let mut node_sum = [0u8; BLOCK_SIZE];
    node_sum[BLOCK_SIZE - 5] = SUM_TYPE_NODE;
    let mut hot_sum = node_sum;
    let hot_nids = std::iter::once(3u32)
        .chain((0..nq).map(quota_nid))
        .chain(lpf.then_some(lpf_nid));
    for (k, nid) in hot_nids.enumerate() {
        put(&mut hot_sum, 7 * k, &nid.to_le_bytes());
    }
    w.block(start_sum + 1, &hot_sum, IoCause::Checkpoint)?;
    w.block(start_sum + 2, &node_sum, IoCause::Checkpoint)?;
    w.block(start_sum + 3, &node_sum, IoCause::Checkpoint)?;
    w.block(pack1 + u64::from(total) - 1, &cp1, IoCause::Checkpoint)?;
    if cp_flags & flags::NAT_BITS != 0 {
        // Header (this CP's version and CRC), full bits (none), empty bits (all but block 0).
        let mut bits = vec![0u8; (nat_bits_blocks as usize) * BLOCK_SIZE];
        put(
            &mut bits,
            0,
            &(version | (u64::from(crc1) << 32)).to_le_bytes(),
        );
        let empty = 8 + nat_bits_bytes as usize;
        if let Some(e) = bits.get_mut(empty..empty + nat_bits_bytes as usize) {
            e.fill(0xFF);
            if let Some(first) = e.first_mut() {
                *first &= !1;
            }
        }
        let at = pack1 + seg - nat_bits_blocks;
        dev.write_blocks(at, &bits, IoCause::Checkpoint)
            .map_err(|e| Error::io("mkfs: nat_bits", e))?;
    }
    // 6. Pack 2: version 0, so that pack 1 is the one mounted.
    cp.checkpoint_ver.set(0);
    let (cp2, _) = cp_block(&cp)?;
    let pack2 = pack1 + seg;
    w.block(pack2, &cp2, IoCause::Checkpoint)?;
    w.zero(pack2 + 1, u64::from(g.cp_payload))?;
    w.block(pack2 + u64::from(total) - 1, &cp2, IoCause::Checkpoint)?;
    dev.flush().map_err(|e| Error::io("mkfs: flush", e))?;
    // 7. The superblocks, last.
    let sb = superblock(&g, o, &uuid, &label, devs.unwrap_or(&[]));
    let mut b = [0u8; BLOCK_SIZE];
    put(&mut b, SB_OFFSET, sb.as_bytes());
    w.block(0, &b, IoCause::Meta)?;
    w.block(1, &b, IoCause::Meta)?;
    dev.flush().map_err(|e| Error::io("mkfs: flush", e))?;
    g.free_segments = free_segments;
    g.user_block_count = u64::from(user_segments) * seg;
    Ok(g)
}

fn superblock(
    g: &Geometry,
    o: &MkfsOptions,
    uuid: &[u8; 16],
    label: &[u16],
    devs: &[DevEntry],
) -> RawSuperblock {
    let mut sb = RawSuperblock::new_zeroed();
    sb.magic.set(F2FS_SUPER_MAGIC);
    // The tools' version fields: the on-disk format is that of f2fs-tools 1.15.
    sb.major_ver.set(1);
    sb.minor_ver.set(15);
    sb.log_sectorsize.set(g.log_sectorsize);
    sb.log_sectors_per_block.set(g.log_sectors_per_block);
    sb.log_blocksize.set(12);
    sb.log_blocks_per_seg.set(9);
    sb.segs_per_sec.set(g.segs_per_sec);
    sb.secs_per_zone.set(g.secs_per_zone);
    sb.block_count.set(g.block_count);
    sb.section_count.set(g.section_count);
    sb.segment_count.set(g.segment_count);
    sb.segment_count_ckpt.set(g.segment_count_ckpt);
    sb.segment_count_sit.set(g.segment_count_sit);
    sb.segment_count_nat.set(g.segment_count_nat);
    sb.segment_count_ssa.set(g.segment_count_ssa);
    sb.segment_count_main.set(g.segment_count_main);
    sb.segment0_blkaddr.set(g.segment0_blkaddr);
    sb.cp_blkaddr.set(g.segment0_blkaddr);
    sb.sit_blkaddr.set(g.sit_blkaddr);
    sb.nat_blkaddr.set(g.nat_blkaddr);
    sb.ssa_blkaddr.set(g.ssa_blkaddr);
    sb.main_blkaddr.set(g.main_blkaddr);
    sb.root_ino.set(3);
    // Quota files take the nids after the root, in type order.
    for (i, kind) in quota_kinds(o.features).into_iter().enumerate() {
        if let Some(slot) = sb.qf_ino.get_mut(kind) {
            slot.set(4 + i as u32);
        }
    }
    sb.node_ino.set(1);
    sb.meta_ino.set(2);
    sb.uuid = *uuid;
    for (dst, u) in sb.volume_name.iter_mut().zip(label) {
        dst.set(*u);
    }
    for (dst, ext) in sb
        .extension_list
        .iter_mut()
        .zip(COLD_EXTENSIONS.iter().chain(HOT_EXTENSIONS.iter()))
    {
        put(dst, 0, ext.as_bytes());
    }
    sb.extension_count.set(COLD_EXTENSIONS.len() as u32);
    sb.hot_ext_count = HOT_EXTENSIONS.len() as u8;
    sb.cp_payload.set(g.cp_payload);
    let version = format!("uf2fs {}", env!("CARGO_PKG_VERSION"));
    put(&mut sb.version, 0, version.as_bytes());
    put(&mut sb.init_version, 0, version.as_bytes());
    // mkfs.f2fs 1.15 marks a volume with project quota as keeping quota files too.
    let quota = if o.features & feature::PRJQUOTA != 0 {
        feature::QUOTA_INO
    } else {
        0
    };
    sb.feature.set(o.features | quota);
    for (dst, (path, segments)) in sb.devs.iter_mut().zip(devs) {
        put(&mut dst.path, 0, path);
        dst.total_segments.set(*segments);
    }
    // mkfs.f2fs -O casefold without -C leaves the encoding 0, which Linux refuses to mount;
    // uf2fs writes what `-C utf8` writes: utf8-12.1, no flags.
    if o.features & feature::CASEFOLD != 0 {
        sb.s_encoding.set(1);
        sb.s_encoding_flags.set(0);
    }
    if o.features & feature::SB_CHKSUM != 0 {
        sb.checksum_offset.set(SB_CHECKSUM_OFFSET);
        let crc = f2fs_crc32(
            F2FS_SUPER_MAGIC,
            sb.as_bytes()
                .get(..SB_CHECKSUM_OFFSET as usize)
                .unwrap_or(&[]),
        );
        sb.crc.set(crc);
    }
    sb
}
