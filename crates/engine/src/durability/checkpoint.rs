//! Writing a checkpoint.
//!
//! 1. Every dirty node goes out of place into its log (footer: the new checkpoint's version and
//!    the next block of the log; inode checksum recomputed), its NAT entry moves, its old
//!    block is invalidated. Summaries of segments closed since the last checkpoint go to the
//!    SSA. Nothing the last checkpoint reaches is touched.
//! 2. NAT: the changed entries become the NAT journal if they fit, else their blocks are
//!    written to the other copy and the version bitmap flips. SIT likewise: changed entries go
//!    to the SIT journal (6 at most) or their whole blocks to the other copy.
//! 3. The pack goes to the slot not used by the last checkpoint, version + 1: CP block,
//!    payload (rest of a large SIT bitmap), orphan blocks, data summaries (compacted when
//!    they fit in two blocks), node summaries (unmount), then a flush, then the trailing copy
//!    of the CP block, then a flush. Until that last block lands, the previous pack is the
//!    valid one, so a crash anywhere leaves the previous checkpoint intact.
//! 4. Only then do prefree segments become free and freed nids reusable.
//!
//! Steps 1 to 3 are decided under the write lock (`prepare`: addresses, NAT and SIT changes,
//! every block's bytes); the blocks are written after it is let go (`CheckpointWrites::run`),
//! and step 4 is applied by whoever next holds the lock (`settle`). Meanwhile changes go on:
//! readers keep finding the checkpoint's nodes in the dirty map and its NAT blocks pinned in
//! memory; what changes free is held back until the next checkpoint; and everything that
//! needs this checkpoint durable (an fsync's chain, a checkpoint request, the next
//! checkpoint) settles it first. See "Requests and locking" in docs/design.md.
//!
//! nat_bits are never written; the flag is cleared (FORMAT-NOTES: the simplest correct choice).

use crate::data::land;
use crate::durability::state::{chain_version, IoDone, Pending};
use crate::error::{Error, Result};
use crate::space::Log;
use crate::state::WriteState;
use crate::vol::Vol;
use std::collections::BTreeMap;
use std::sync::Arc;
use uf2fs_device::IoCause;
use uf2fs_format::checkpoint::{flags, BitmapPlace, ORPHANS_PER_BLOCK};
use uf2fs_format::inode::{checksum_seed, compute_checksum, inline_flags, I_ADDR_OFFSET};
use uf2fs_format::nat::{NatEntry, NAT_JOURNAL_ENTRIES};
use uf2fs_format::nat::{RawNatEntry, RawNatJournal, RawNatJournalEntry};
use uf2fs_format::node::{Footer, DENT_BIT, FOOTER_OFFSET, FSYNC_BIT};
use uf2fs_format::sit::{RawSitEntry, RawSitJournal, RawSitJournalEntry, SIT_JOURNAL_ENTRIES};
use uf2fs_format::summary::{compacted_blocks, RawSummary, JOURNAL_SIZE, SUM_TYPE_NODE};
use uf2fs_format::superblock::feature;
use uf2fs_format::{Block, BLOCKS_PER_SEG, BLOCK_SIZE};
use zerocopy::{FromBytes, IntoBytes};

/// What a checkpoint writes, in order: everything but the pack's trailing block, a flush,
/// that block, a flush.
pub(crate) struct CheckpointWrites {
    io: Arc<IoDone>,
    /// The sealed nodes, by run of contiguous addresses: the same blocks the dirty map holds
    /// until the checkpoint lands, so the checkpoint makes no copy of them.
    nodes: Vec<NodeRun>,
    body: Vec<(u64, Vec<u8>, IoCause, &'static str)>,
    trailing: (u64, Block),
}

/// Sealed node blocks at contiguous addresses from `start`, and what writes them.
struct NodeRun {
    start: u32,
    blocks: Vec<Arc<Block>>,
    cause: IoCause,
}

impl NodeRun {
    /// The address just past the run.
    fn next(&self) -> u64 {
        u64::from(self.start) + self.blocks.len() as u64
    }

    /// Writes the run through `staging`, at most a MiB per request.
    fn write(&self, dev: &dyn uf2fs_device::BlockDevice, staging: &mut Vec<u8>) -> Result<()> {
        const PER_REQUEST: usize = (1 << 20) / BLOCK_SIZE;
        for (i, chunk) in self.blocks.chunks(PER_REQUEST).enumerate() {
            staging.clear();
            for b in chunk {
                staging.extend_from_slice(&b[..]);
            }
            let at = u64::from(self.start) + (i * PER_REQUEST) as u64;
            dev.write_blocks(at, staging, self.cause)
                .map_err(|e| Error::io(format!("node blocks at block {at}"), e))?;
        }
        Ok(())
    }
}

fn put(b: &mut [u8], at: usize, bytes: &[u8]) {
    if let Some(dst) = b.get_mut(at..at + bytes.len()) {
        dst.copy_from_slice(bytes);
    }
}

fn summaries_bytes(sum: &[RawSummary], n: usize) -> Vec<u8> {
    sum.iter()
        .take(n)
        .flat_map(|s| s.as_bytes().to_vec())
        .collect()
}

/// Whether a node footer's cp_ver belongs to the chain after the checkpoint (the kernel's
/// rule: under NOCRC_RECOVERY only the low 32 bits count).
pub(crate) fn in_chain(footer_ver: u64, version: u64, crc: u32, cp_flags: u32) -> bool {
    if cp_flags & flags::NOCRC_RECOVERY != 0 {
        return (footer_ver << 32) == (version << 32);
    }
    footer_ver == chain_version(version, crc, cp_flags)
}

/// Sets a node block's footer for a write at `addr` in a log whose next block is `next`:
/// cp_ver, next_blkaddr, the FSYNC/DENT marks (`marks`, replacing any old ones), and the
/// inode checksum when the volume keeps them.
pub(crate) fn seal_node(vol: &Vol, b: &mut Block, nid: u32, cp_ver: u64, next: u32, marks: u32) {
    put(b, FOOTER_OFFSET + 12, &cp_ver.to_le_bytes());
    put(b, FOOTER_OFFSET + 20, &next.to_le_bytes());
    let f = Footer::of(b);
    let flag = (f.flag & !(FSYNC_BIT | DENT_BIT)) | marks;
    put(b, FOOTER_OFFSET + 8, &flag.to_le_bytes());
    let is_inode = f.ofs() == 0 && f.ino == nid;
    let extra = b.get(3).is_some_and(|i| i & inline_flags::EXTRA_ATTR != 0);
    let isize = uf2fs_format::le16(b, I_ADDR_OFFSET).unwrap_or(0);
    if is_inode && vol.sb.has(feature::INODE_CHKSUM) && extra && isize >= 12 {
        let crc = compute_checksum(checksum_seed(&vol.sb.uuid()), b);
        put(b, I_ADDR_OFFSET + 8, &crc.to_le_bytes());
    }
}

/// Writes the dirty nodes, NAT, SIT and a checkpoint pack, holding the write lock throughout.
/// `umount` marks the pack as written at a clean unmount (with node summaries).
pub(crate) fn write_checkpoint(vol: &Vol, ws: &mut WriteState, umount: bool) -> Result<()> {
    let writes = prepare(vol, ws, umount)?;
    let (io, r) = writes.run(vol);
    let s = settle_this(vol, ws, &io);
    r.and(s)
}

/// Step 1 to 3 of a checkpoint under the write lock: the last one settled, every data block
/// landed, every block of this one decided. The caller writes them (`CheckpointWrites::run`)
/// and then settles (`settle_this`); until then this checkpoint is `ws.cp.pending`.
pub(crate) fn prepare(vol: &Vol, ws: &mut WriteState, umount: bool) -> Result<CheckpointWrites> {
    settle(vol, ws)?;
    if let Some(why) = &ws.failed {
        return Err(Error::ReadOnly(format!(
            "no checkpoint after a failed change ({why}); the image keeps its last checkpoint"
        )));
    }
    let r = land(&*vol.dev, &vol.inflight, &mut ws.deferred).and_then(|()| build(vol, ws, umount));
    if let Err(e) = &r {
        ws.failed = Some(format!("checkpoint: {e}"));
    }
    r
}

/// Waits for the pending checkpoint's writes, if any, and applies step 4 (or, if they
/// failed, stops the volume).
pub(crate) fn settle(vol: &Vol, ws: &mut WriteState) -> Result<()> {
    let Some(p) = ws.cp.pending.take() else {
        return Ok(());
    };
    if let Err(why) = p.io.wait() {
        ws.failed = Some(format!("checkpoint: {why}"));
        return Err(Error::ReadOnly(format!(
            "a checkpoint failed ({why}); the image keeps the one before"
        )));
    }
    ws.cp.version = p.version;
    ws.cp.longest_io_us = ws
        .cp
        .longest_io_us
        .max(p.io.took_us.load(std::sync::atomic::Ordering::Relaxed));
    ws.cp.pack = p.pack;
    ws.cp.head = p.head;
    ws.cp.crc = p.crc;
    let freed = ws.segs.checkpoint_landed(&p.prefree, &p.reserved);
    ws.sync.checkpoint_landed();
    ws.cp.last_landed = std::time::Instant::now();
    ws.gc.stats.sections_freed += freed / u64::from(vol.layout.segs_per_sec.max(1));
    ws.cp.covered_seq = p.start_seq;
    ws.cp.written += 1;
    vol.nodes.written(&p.nodes);
    vol.nat.checkpoint_done()
}

/// Settles the checkpoint whose writes `io` reports, if no one has yet; its outcome.
pub(crate) fn settle_this(vol: &Vol, ws: &mut WriteState, io: &Arc<IoDone>) -> Result<()> {
    if ws
        .cp
        .pending
        .as_ref()
        .is_some_and(|p| Arc::ptr_eq(&p.io, io))
    {
        return settle(vol, ws);
    }
    io.wait().map_err(|why| {
        Error::ReadOnly(format!(
            "a checkpoint failed ({why}); the image keeps the one before"
        ))
    })
}

impl CheckpointWrites {
    /// Writes the checkpoint's blocks (no lock needed) and reports the outcome to whoever
    /// waits for it.
    pub fn run(self, vol: &Vol) -> (Arc<IoDone>, Result<()>) {
        let dev = &*vol.dev;
        let started = std::time::Instant::now();
        let io = |what: String| move |e: std::io::Error| Error::io(what, e);
        let r = (|| {
            let mut staging = Vec::new();
            for run in &self.nodes {
                run.write(dev, &mut staging)?;
            }
            drop(staging);
            for (addr, bytes, cause, what) in &self.body {
                dev.write_blocks(*addr, bytes, *cause)
                    .map_err(io(format!("{what} at block {addr}")))?;
            }
            // One flush makes data, nodes, SSA, NAT, SIT and the pack durable together: none
            // of it is reachable before the trailing block lands (nodes and data are out of
            // place, NAT and SIT blocks go to their other copies, the pack to the slot not in
            // use).
            dev.flush()
                .map_err(io("flush before the checkpoint's last block".into()))?;
            let (at, b) = &self.trailing;
            dev.write_blocks(*at, b, IoCause::Checkpoint)
                .map_err(io("checkpoint pack trailing block".into()))?;
            dev.flush().map_err(io("flush after the checkpoint".into()))
        })();
        self.io.took_us.store(
            started.elapsed().as_micros() as u64,
            std::sync::atomic::Ordering::Relaxed,
        );
        self.io
            .finish(r.as_ref().map(|_| ()).map_err(|e| e.to_string()));
        (self.io, r)
    }
}

fn build(vol: &Vol, ws: &mut WriteState, umount: bool) -> Result<CheckpointWrites> {
    let start_seq = vol.change_seq.load(std::sync::atomic::Ordering::SeqCst);
    let mut body: Vec<(u64, Vec<u8>, IoCause, &'static str)> = Vec::new();
    // A frozen clock (reproducible images) keeps the volume's age where the last checkpoint
    // left it, so the same changes give the same checkpoint and SIT bytes.
    if vol.options.fixed_time.is_none() {
        ws.segs.set_clock(ws.cp.elapsed());
    }
    // 1. Nodes, out of place.
    let dirty = vol.nodes.dirty_snapshot()?;
    ws.cp.last_nodes = dirty.len() as u64;
    // These nodes belong to the checkpoint being written: their cp_ver is its (plain)
    // version, which never matches the chain rule of the last one. So if this checkpoint
    // does not land, they end the roll-forward chain instead of extending it (Linux would
    // replay chain nodes of an fsync'd file even without the FSYNC mark).
    // Each node is sealed into a block that at once replaces its dirty copy (readers find
    // the sealed one until the checkpoint lands; the unsealed one is let go) and that the
    // checkpoint writes from there: the dirty nodes are the only copy a checkpoint holds (a
    // map of sealed copies beside their runs once made a checkpoint of a full dirty budget
    // hold three, then two). Nodes only the cleaner changed are counted as its writes.
    let mut sealed: BTreeMap<u32, (Arc<Block>, Log)> = BTreeMap::new();
    let mut nodes: Vec<NodeRun> = Vec::new();
    // The open run of each (cleaner's, log) pair: a log's blocks are contiguous.
    let mut open: Vec<(bool, Log, usize)> = Vec::new();
    write_nodes(
        vol,
        ws,
        dirty,
        ws.cp.version.wrapping_add(1),
        |_, _| 0,
        |addr, nid, log, b, unsealed| {
            let gc = vol.nodes.is_gc_only(nid);
            let b = Arc::new(b);
            vol.nodes.sealed(nid, &unsealed, &b);
            drop(unsealed);
            sealed.insert(nid, (b.clone(), log));
            let cause = if gc { IoCause::GcNode } else { IoCause::Node };
            let run = open
                .iter()
                .find(|(g, l, _)| *g == gc && *l == log)
                .map(|(_, _, i)| *i)
                .filter(|i| nodes.get(*i).is_some_and(|r| r.next() == u64::from(addr)));
            match run.and_then(|i| nodes.get_mut(i)) {
                Some(r) => r.blocks.push(b),
                None => {
                    open.retain(|(g, l, _)| !(*g == gc && *l == log));
                    open.push((gc, log, nodes.len()));
                    nodes.push(NodeRun {
                        start: addr,
                        blocks: vec![b],
                        cause,
                    });
                }
            }
        },
    )?;
    ws.segs.roll_full()?;
    let ssa = u64::from(vol.layout.ssa);
    for (segno, blk) in ws.segs.take_summaries() {
        body.push((
            ssa + u64::from(segno),
            blk.to_vec(),
            IoCause::Meta,
            "SSA block",
        ));
    }
    // 2. NAT and SIT.
    let (nat_journal, nat_bitmap, nat_blocks) = vol.nat.flush_for_checkpoint(&*vol.dev)?;
    for (addr, b) in nat_blocks {
        body.push((addr, b.to_vec(), IoCause::Checkpoint, "NAT block"));
    }
    let (sit_journal, sit_blocks) = ws.segs.sit_changes();
    for (addr, b) in sit_blocks {
        body.push((addr, b.to_vec(), IoCause::Checkpoint, "SIT block"));
    }
    // 3. The pack.
    let version = ws.cp.version + 1;
    let mut h = ws.cp.head.clone();
    h.checkpoint_ver.set(version);
    h.valid_block_count.set(ws.counts.valid_blocks);
    h.free_segment_count.set(ws.segs.free_count());
    h.valid_node_count.set(ws.counts.valid_nodes);
    h.valid_inode_count.set(ws.counts.valid_inodes);
    h.elapsed_time.set(ws.segs.clock());
    let mut alloc = [0u8; 16];
    for (i, c) in ws.segs.logs().iter().enumerate() {
        let (seg, off) = if i < 3 {
            (&mut h.cur_data_segno, &mut h.cur_data_blkoff)
        } else {
            (&mut h.cur_node_segno, &mut h.cur_node_blkoff)
        };
        if let (Some(s), Some(o)) = (seg.get_mut(i % 3), off.get_mut(i % 3)) {
            s.set(c.segno);
            o.set(c.next);
        }
        if let Some(a) = alloc.get_mut(i) {
            *a = c.alloc_type;
        }
    }
    h.alloc_type = alloc;
    let counts: Vec<usize> = ws
        .segs
        .logs()
        .iter()
        .take(3)
        .map(|c| {
            if c.alloc_type == 1 {
                BLOCKS_PER_SEG as usize
            } else {
                usize::from(c.next)
            }
        })
        .collect();
    let counts = [
        counts.first().copied().unwrap_or(0),
        counts.get(1).copied().unwrap_or(0),
        counts.get(2).copied().unwrap_or(0),
    ];
    let compact = compacted_blocks(counts) <= 2;
    let data_sums = if compact {
        compacted(ws, counts, &nat_journal, &sit_journal)
    } else {
        normal_data(ws, &nat_journal, &sit_journal)
    };
    let orphan_blocks = ws.orphans.list.len().div_ceil(ORPHANS_PER_BLOCK);
    let payload = vol.sb.cp_payload() as usize;
    let node_sums = if umount { 3 } else { 0 };
    let total = 1 + payload + orphan_blocks + data_sums.len() + node_sums + 1;
    let mut fl = h.ckpt_flags.get()
        & !(flags::UMOUNT
            | flags::COMPACT_SUM
            | flags::ORPHAN_PRESENT
            | flags::NAT_BITS
            | flags::FASTBOOT
            | flags::NOCRC_RECOVERY);
    // Node footers written after this checkpoint carry its CRC (as Linux 6.1 does).
    fl |= flags::CRC_RECOVERY;
    if umount {
        fl |= flags::UMOUNT;
    }
    if compact {
        fl |= flags::COMPACT_SUM;
    }
    if orphan_blocks > 0 {
        fl |= flags::ORPHAN_PRESENT;
    }
    h.ckpt_flags.set(fl);
    h.cp_pack_total_block_count.set(total as u32);
    h.cp_pack_start_sum
        .set((1 + payload + orphan_blocks) as u32);
    // CP block and payload blocks: head, CRC and bitmaps where the mounted layout has them
    // (normal, SIT bitmap in the payload, or large NAT bitmap); the flag and the checksum
    // offset come along in the head.
    let place = BitmapPlace::of(&h, payload as u32, u64::from(vol.layout.cp))?;
    let (mut cp_blocks, crc) = place.write(&h, ws.segs.sit_bitmap(), &nat_bitmap)?;
    let payload_blocks = cp_blocks.split_off(1.min(cp_blocks.len()));
    let cpb: Block = cp_blocks.first().copied().unwrap_or([0u8; BLOCK_SIZE]);
    let pack = if ws.cp.pack == 1 { 2 } else { 1 };
    let start = u64::from(vol.layout.cp)
        + if pack == 2 {
            u64::from(BLOCKS_PER_SEG)
        } else {
            0
        };
    let mut blocks: Vec<Block> = vec![cpb];
    blocks.extend(payload_blocks);
    for (i, chunk) in ws.orphans.list.chunks(ORPHANS_PER_BLOCK).enumerate() {
        let mut b = [0u8; BLOCK_SIZE];
        for (k, ino) in chunk.iter().enumerate() {
            put(&mut b, k * 4, &ino.to_le_bytes());
        }
        put(&mut b, 4084, &((i + 1) as u16).to_le_bytes());
        put(&mut b, 4086, &(orphan_blocks as u16).to_le_bytes());
        put(&mut b, 4088, &(chunk.len() as u32).to_le_bytes());
        blocks.push(b);
    }
    blocks.extend(data_sums);
    if umount {
        for c in ws.segs.logs().iter().skip(3) {
            let mut b = [0u8; BLOCK_SIZE];
            put(&mut b, 0, &summaries_bytes(&c.sum, 512));
            b[BLOCK_SIZE - 5] = SUM_TYPE_NODE;
            blocks.push(b);
        }
    }
    let bytes: Vec<u8> = blocks.iter().flat_map(|b| b.iter().copied()).collect();
    body.push((start, bytes, IoCause::Checkpoint, "checkpoint pack"));
    // What step 4 makes true once the pack is durable, and what no longer waits for it: the
    // changes made so far are in this checkpoint (none runs while it is prepared).
    if let Ok(mut l) = vol.last_change.lock() {
        l.clear();
    }
    ws.sync.checkpointed();
    // The nodes the cleaner marked are among those this checkpoint writes.
    ws.gc.nodes_moving = false;
    // Blocks freed so far are reusable by slack space recycling once this pack is durable.
    ws.segs.checkpoint_prepared();
    let io = Arc::new(IoDone::default());
    ws.cp.pending = Some(Pending {
        io: io.clone(),
        version,
        pack,
        head: h,
        crc,
        start_seq,
        prefree: ws.segs.prefree_set().clone(),
        reserved: ws.segs.reserved_set().clone(),
        nodes: sealed,
    });
    Ok(CheckpointWrites {
        io,
        nodes,
        body,
        trailing: (start + total as u64 - 1, cpb),
    })
}

/// Gives each node of `nodes` a new block in its log (footer sealed with `cp_ver`, its
/// successor in the log and the marks `marks(nid, block)` returns), moves its NAT entry there
/// and invalidates its old block. Each sealed block is handed to `sink(address, nid, log,
/// sealed, unsealed)`, which keeps it for writing (the unsealed block is the one `nodes` held).
pub(crate) fn write_nodes(
    vol: &Vol,
    ws: &mut WriteState,
    nodes: impl IntoIterator<Item = (u32, (Arc<Block>, Log))>,
    cp_ver: u64,
    mut marks: impl FnMut(u32, &Block) -> u32,
    mut sink: impl FnMut(u32, u32, Log, Block, Arc<Block>),
) -> Result<()> {
    let dev = &*vol.dev;
    for (nid, (block, log)) in nodes {
        let log = &log;
        let old = vol.nat.entry(dev, nid)?;
        if old.block_addr != 0 {
            ws.segs.invalidate(old.block_addr);
        }
        let sum = RawSummary {
            nid: nid.into(),
            ..Default::default()
        };
        let addr = ws.segs.alloc(*log, sum, &mut |s| vol.read_ssa(s))?;
        let next = ws.segs.next_addr(*log, &mut |s| vol.read_ssa(s))?;
        let mut b: Block = *block;
        let m = marks(nid, &b);
        seal_node(vol, &mut b, nid, cp_ver, next, m);
        let f = Footer::of(&b);
        vol.nat.set(
            nid,
            NatEntry {
                version: old.version,
                ino: f.ino,
                block_addr: addr,
            },
        )?;
        sink(addr, nid, *log, b, block);
    }
    Ok(())
}

/// A summary block's journal (`which` 0: NAT, else SIT): a count, then the entries, laid out
/// through the format's journal structs.
fn journal_bytes(
    nat: &[(u32, NatEntry)],
    sit: &[(u32, RawSitEntry)],
    which: u8,
) -> [u8; JOURNAL_SIZE] {
    let mut j = [0u8; JOURNAL_SIZE];
    let (count, body) = j.split_at_mut(2);
    if which == 0 {
        count.copy_from_slice(&(nat.len().min(NAT_JOURNAL_ENTRIES) as u16).to_le_bytes());
        if let Ok(raw) = RawNatJournal::mut_from_bytes(body) {
            for (slot, (nid, e)) in raw.entries.iter_mut().zip(nat) {
                *slot = RawNatJournalEntry {
                    nid: (*nid).into(),
                    entry: RawNatEntry {
                        version: e.version,
                        ino: e.ino.into(),
                        block_addr: e.block_addr.into(),
                    },
                };
            }
        }
    } else {
        count.copy_from_slice(&(sit.len().min(SIT_JOURNAL_ENTRIES) as u16).to_le_bytes());
        if let Ok(raw) = RawSitJournal::mut_from_bytes(body) {
            for (slot, (segno, e)) in raw.entries.iter_mut().zip(sit) {
                *slot = RawSitJournalEntry {
                    segno: (*segno).into(),
                    entry: *e,
                };
            }
        }
    }
    j
}

/// The compacted data summaries: NAT journal, SIT journal, then entries back to back.
fn compacted(
    ws: &WriteState,
    counts: [usize; 3],
    nat: &[(u32, NatEntry)],
    sit: &[(u32, RawSitEntry)],
) -> Vec<Block> {
    let mut out = vec![[0u8; BLOCK_SIZE]];
    if let Some(first) = out.first_mut() {
        put(first, 0, &journal_bytes(nat, sit, 0));
        put(first, JOURNAL_SIZE, &journal_bytes(nat, sit, 1));
    }
    let mut blk = 0usize;
    let mut off = 2 * JOURNAL_SIZE;
    for (c, n) in ws.segs.logs().iter().zip(counts) {
        for s in c.sum.iter().take(n) {
            if off + 7 > BLOCK_SIZE - 5 {
                out.push([0u8; BLOCK_SIZE]);
                blk += 1;
                off = 0;
            }
            if let Some(b) = out.get_mut(blk) {
                put(b, off, s.as_bytes());
            }
            off += 7;
        }
    }
    out
}

/// Three normal data summary blocks: hot (with the NAT journal), warm, cold (SIT journal).
fn normal_data(ws: &WriteState, nat: &[(u32, NatEntry)], sit: &[(u32, RawSitEntry)]) -> Vec<Block> {
    ws.segs
        .logs()
        .iter()
        .take(3)
        .enumerate()
        .map(|(i, c)| {
            let mut b = [0u8; BLOCK_SIZE];
            put(&mut b, 0, &summaries_bytes(&c.sum, 512));
            if i == 0 {
                put(&mut b, 3584, &journal_bytes(nat, sit, 0));
            } else if i == 2 {
                put(&mut b, 3584, &journal_bytes(nat, sit, 1));
            }
            b
        })
        .collect()
}
