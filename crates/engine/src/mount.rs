//! Mount: superblock copy, checkpoint pack, current-segment summaries (journals), orphans.
//!
//! Superblock: copy 0 (block 0) if valid, else copy 1. Checkpoint: each pack is read as an
//! [`Unchecked`] pair of CP blocks; a pack is valid when both blocks pass their CRC and carry
//! one version; the later of two valid packs wins, pack 1 on a tie. Only then are the payload
//! and summary blocks read and checked against the geometry.

use crate::error::{Error, Result};
use foldhash::HashMap;
use uf2fs_device::{BlockDevice, IoCause};
use uf2fs_format::checkpoint::{self, flags, version_after, Checkpoint, CpBlock};
use uf2fs_format::nat::{parse_nat_journal, NatEntry};
use uf2fs_format::sit::{parse_sit_journal, SitEntry};
use uf2fs_format::summary::{compacted_blocks, parse_compacted, Summary};
use uf2fs_format::superblock::Superblock;
use uf2fs_format::{Block, CorruptKind, FormatError, BLOCKS_PER_SEG, BLOCK_SIZE};

pub(crate) fn read_block(
    dev: &dyn BlockDevice,
    addr: u64,
    cause: IoCause,
    what: &str,
) -> Result<Block> {
    let mut b = [0u8; BLOCK_SIZE];
    dev.read_blocks(addr, &mut b, cause)
        .map_err(|e| Error::io(format!("{what} at block {addr}"), e))?;
    Ok(b)
}

/// The state read at mount.
pub(crate) struct Mounted {
    pub sb: Superblock,
    pub cp: Checkpoint,
    pub nat_journal: HashMap<u32, NatEntry>,
    pub sit_journal: Vec<(u32, SitEntry)>,
    pub orphans: Vec<u32>,
    /// Why the other superblock copy or checkpoint pack was not used, if it was not.
    pub notes: Vec<String>,
    /// Summaries of the six current segments (node ones empty unless the pack has them).
    pub summaries: [Summary; 6],
    /// Whether the pack carried node summaries.
    pub has_node_summaries: bool,
}

pub(crate) fn read_superblock(dev: &dyn BlockDevice) -> Result<(Superblock, Vec<String>)> {
    let mut errs = Vec::new();
    for copy in 0..2u8 {
        let block = read_block(dev, u64::from(copy), IoCause::Meta, "superblock")?;
        match Superblock::parse(&block, copy) {
            Ok(sb) => {
                let notes = errs
                    .iter()
                    .map(|e: &FormatError| format!("superblock 0 not used: {e}"))
                    .collect();
                return Ok((sb, notes));
            }
            Err(FormatError::Incompatible(i)) => return Err(Error::Incompatible(i)),
            Err(e) => errs.push(e),
        }
    }
    let kind = |e: Option<&FormatError>| match e {
        Some(FormatError::Corrupt(c)) => Box::new(c.clone()),
        _ => Box::new(CorruptKind::Block {
            blkaddr: 0,
            why: "unreadable",
        }),
    };
    Err(CorruptKind::NoSuperblock {
        first: kind(errs.first()),
        second: kind(errs.get(1)),
    }
    .into())
}

/// A pack whose two CP blocks were read and matched, nothing else checked yet.
struct Unchecked {
    cp: CpBlock,
    addr: u64,
    pack: u8,
}

fn read_pack(
    dev: &dyn BlockDevice,
    addr: u64,
    pack: u8,
) -> Result<std::result::Result<Unchecked, CorruptKind>> {
    let head = read_block(dev, addr, IoCause::Checkpoint, "checkpoint")?;
    let cp = match CpBlock::parse(&head, addr) {
        Ok(cp) => cp,
        Err(e) => return Ok(Err(e)),
    };
    let total = match cp.total_blocks(addr) {
        Ok(t) => t,
        Err(e) => return Ok(Err(e)),
    };
    let tail_addr = addr + u64::from(total) - 1;
    let tail = read_block(dev, tail_addr, IoCause::Checkpoint, "checkpoint")?;
    let tail = match CpBlock::parse(&tail, tail_addr) {
        Ok(t) => t,
        Err(e) => return Ok(Err(e)),
    };
    if tail.version() != cp.version() {
        return Ok(Err(CorruptKind::CheckpointVersionMismatch {
            blkaddr: addr,
            header: cp.version(),
            trailing: tail.version(),
        }));
    }
    Ok(Ok(Unchecked { cp, addr, pack }))
}

pub(crate) fn mount(dev: &dyn BlockDevice) -> Result<Mounted> {
    let (sb, mut notes) = read_superblock(dev)?;
    let layout = sb.layout();
    // A multi-device volume's block_count counts every device whole, tails that hold no
    // segment too; what must be there is the devices' ranges.
    let want = sb.devices().last().map_or(layout.block_count, |d| d.end);
    if want > dev.block_count() {
        notes.push(if sb.devices().len() > 1 {
            format!(
                "the volume spans {} devices ({want} blocks) but only {} blocks are open: reads past them will fail",
                sb.devices().len(),
                dev.block_count()
            )
        } else {
            format!(
                "the superblock says {} blocks but the device has {}: the image is truncated, reads past its end will fail",
                layout.block_count,
                dev.block_count()
            )
        });
        tracing::warn!("{}", notes.last().map(String::as_str).unwrap_or(""));
    }
    let p1 = read_pack(dev, u64::from(layout.cp), 1)?;
    let p2 = read_pack(dev, u64::from(layout.cp) + u64::from(BLOCKS_PER_SEG), 2)?;
    let chosen = match (p1, p2) {
        (Ok(a), Ok(b)) => {
            if version_after(b.cp.version(), a.cp.version()) {
                b
            } else {
                a
            }
        }
        (Ok(a), Err(e)) => {
            notes.push(format!("checkpoint pack 2 not valid: {e}"));
            a
        }
        (Err(e), Ok(b)) => {
            notes.push(format!("checkpoint pack 1 not valid: {e}"));
            b
        }
        (Err(a), Err(b)) => {
            return Err(CorruptKind::NoCheckpoint {
                first: Box::new(a),
                second: Box::new(b),
            }
            .into())
        }
    };
    let payload_n = sb.cp_payload();
    let mut payload = Vec::new();
    for i in 1..=u64::from(payload_n) {
        payload.push(read_block(
            dev,
            chosen.addr + i,
            IoCause::Checkpoint,
            "checkpoint payload",
        )?);
    }
    let cp = Checkpoint::assemble(chosen.cp, chosen.pack, chosen.addr, &payload, &layout)?;
    let total = u64::from(cp.head.cp_pack_total_block_count.get());
    let orphan_blocks = cp.orphan_blocks(payload_n);
    let mut orphans = Vec::new();
    for i in 0..u64::from(orphan_blocks) {
        let at = cp.pack_addr + 1 + u64::from(payload_n) + i;
        let b = read_block(dev, at, IoCause::Checkpoint, "orphan block")?;
        orphans.extend(checkpoint::orphan_inos(&b, at)?);
    }
    let start = cp.pack_addr + u64::from(cp.head.cp_pack_start_sum.get());
    let last = cp.pack_addr + total - 1; // the trailing CP block
    let (data, n) = read_data_summaries(dev, &cp, start, last)?;
    let nat_journal = parse_nat_journal(data[0].journal_count, &data[0].journal)?
        .into_iter()
        .collect::<HashMap<_, _>>();
    let sit_journal = parse_sit_journal(
        data[2].journal_count,
        &data[2].journal,
        layout.main_segments,
    )?;
    let has_node_summaries = cp.has_flag(flags::UMOUNT) || cp.has_flag(flags::FASTBOOT);
    let mut node = [Summary::empty(), Summary::empty(), Summary::empty()];
    if has_node_summaries {
        let at = start + n;
        if at + 3 > last {
            return Err(CorruptKind::Summary {
                which: "node summaries in the checkpoint pack",
                why: "run into the trailing CP block",
            }
            .into());
        }
        for (i, s) in node.iter_mut().enumerate() {
            *s = Summary::from_block(&read_block(
                dev,
                at + i as u64,
                IoCause::Checkpoint,
                "node summary",
            )?);
        }
    }
    let [d0, d1, d2] = data;
    let [n0, n1, n2] = node;
    let summaries = [d0, d1, d2, n0, n1, n2];
    Ok(Mounted {
        sb,
        cp,
        nat_journal,
        sit_journal,
        orphans,
        notes,
        summaries,
        has_node_summaries,
    })
}

/// Reads the hot/warm/cold data summaries from the CP pack (compacted or normal).
fn read_data_summaries(
    dev: &dyn BlockDevice,
    cp: &Checkpoint,
    start: u64,
    end: u64,
) -> Result<([Summary; 3], u64)> {
    let bad = |why| {
        Error::Corrupt(CorruptKind::Summary {
            which: "data summaries in the checkpoint pack",
            why,
        })
    };
    if cp.has_flag(flags::COMPACT_SUM) {
        let mut counts = [0usize; 3];
        for (count, c) in counts.iter_mut().zip(&cp.cursegs) {
            *count = if c.alloc_type == 1 {
                BLOCKS_PER_SEG as usize
            } else {
                usize::from(c.blkoff)
            };
        }
        let n = compacted_blocks(counts) as u64;
        if start + n > end {
            return Err(bad("compacted summaries run into the trailing CP block"));
        }
        let blocks = (0..n)
            .map(|i| read_block(dev, start + i, IoCause::Checkpoint, "compacted summary"))
            .collect::<Result<Vec<_>>>()?;
        Ok((parse_compacted(&blocks, counts)?, n))
    } else {
        if start + 3 > end {
            return Err(bad("summary blocks run into the trailing CP block"));
        }
        let mut out = [Summary::empty(), Summary::empty(), Summary::empty()];
        for (i, s) in out.iter_mut().enumerate() {
            *s = Summary::from_block(&read_block(
                dev,
                start + i as u64,
                IoCause::Checkpoint,
                "summary",
            )?);
        }
        Ok((out, 3))
    }
}

/// What `uf2fs info` shows about the mount itself.
#[derive(Debug, Clone, serde::Serialize)]
pub struct MountInfo {
    pub superblock_copy: u8,
    pub checkpoint_pack: u8,
    pub checkpoint_version: u64,
    pub checkpoint_flags: Vec<&'static str>,
    pub orphan_inodes: usize,
    pub notes: Vec<String>,
}

/// One device of a multi-device volume, as the superblock lists it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct DeviceInfo {
    /// The path recorded when the volume was formatted.
    pub recorded_path: String,
    pub segments: u32,
    /// The block addresses it holds: `[start, end)`.
    pub start: u64,
    pub end: u64,
}

/// Geometry, features and usage of a volume.
#[derive(Debug, Clone, serde::Serialize)]
pub struct VolumeInfo {
    /// The devices of a multi-device volume (empty for one device).
    pub devices: Vec<DeviceInfo>,
    pub label: String,
    pub uuid: String,
    pub version: String,
    pub init_version: String,
    pub features: Vec<&'static str>,
    pub sector_size: u32,
    pub block_size: u32,
    pub block_count: u64,
    pub segment_count_main: u32,
    pub segs_per_sec: u32,
    pub secs_per_zone: u32,
    pub areas: Vec<(&'static str, u32, u32)>,
    pub user_block_count: u64,
    pub valid_block_count: u64,
    pub free_segment_count: u32,
    pub reserved_segment_count: u32,
    pub overprov_segment_count: u32,
    pub valid_node_count: u32,
    pub valid_inode_count: u32,
    pub next_free_nid: u32,
    pub max_nid: u32,
    pub elapsed_time: u64,
    pub current_segments: Vec<(&'static str, u32, u16, &'static str)>,
    pub mount: MountInfo,
}
