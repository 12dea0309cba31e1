//! Segment state for writing: every main segment's SIT entry in memory, the six current
//! segments ("logs") with their summaries, and block allocation.
//!
//! Allocation is log-structured: a log appends at its next free block; a full segment's
//! summary is queued for its SSA block and the log moves to the next free segment of its
//! section, or to a free section. A block that stops being used is cleared in the SIT; a
//! segment left with no valid block becomes *prefree* and is handed out again only after the
//! next checkpoint, since the last durable checkpoint may still point into it.
//!
//! In `mode=adaptive`, a log short of a segment while free sections run short takes the holes
//! of a used segment of its kind (data or node) instead (slack space recycling, `slack.rs`),
//! skipping every block a durable checkpoint or fsync chain may still name. A log the image
//! left in SSR mode continues the same way in `mode=adaptive`, and is closed at its first
//! allocation in `mode=lfs`.

use crate::error::{Error, Result};

mod sections;
pub(crate) mod sit;
pub(crate) mod slack;
mod temp;

pub use sections::Policy;
use sections::Sections;
pub(crate) use sections::VictimKind;
use slack::Slack;
use std::collections::BTreeSet;
pub use temp::DataTemp;
use temp::Temperature;
use uf2fs_format::checkpoint::Checkpoint;
use uf2fs_format::sit::{
    sit_block_addr, RawSitBlock, RawSitEntry, SitEntry, SIT_ENTRIES_PER_BLOCK, SIT_JOURNAL_ENTRIES,
    SIT_TYPE_SHIFT,
};
use uf2fs_format::summary::{
    RawSummary, RawSummaryBlock, ENTRIES_IN_SUM, SUM_TYPE_DATA, SUM_TYPE_NODE,
};
use uf2fs_format::superblock::Layout;
use uf2fs_format::{Block, BLOCKS_PER_SEG, BLOCK_SIZE};
use zerocopy::FromBytes;

/// The logs, in curseg type order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Log {
    HotData = 0,
    WarmData = 1,
    ColdData = 2,
    HotNode = 3,
    WarmNode = 4,
    ColdNode = 5,
}

impl Log {
    pub const ALL: [Log; 6] = [
        Log::HotData,
        Log::WarmData,
        Log::ColdData,
        Log::HotNode,
        Log::WarmNode,
        Log::ColdNode,
    ];

    pub fn is_node(self) -> bool {
        self as usize >= 3
    }
}

/// The kind of segment a log writes.
fn kind_of(log: Log) -> VictimKind {
    kind_of_type(log as u8)
}

/// The kind of a segment whose SIT type (the log that wrote it) is `seg_type`.
fn kind_of_type(seg_type: u8) -> VictimKind {
    if seg_type >= Log::HotNode as u8 {
        VictimKind::Node
    } else {
        VictimKind::Data
    }
}

impl Curseg {
    /// Whether the next allocation needs another segment: this one is full, or it is an SSR
    /// log left by the image that we do not fill.
    fn needs_segment(&self) -> bool {
        (self.alloc_type != 0 && !self.holes) || usize::from(self.next) >= ENTRIES_IN_SUM
    }
}

/// What a checkpoint writes of the SIT: journal entries, or whole blocks by address.
pub(crate) type SitChanges = (Vec<(u32, RawSitEntry)>, Vec<(u64, Box<Block>)>);

/// One current segment.
#[derive(Clone)]
pub(crate) struct Curseg {
    pub segno: u32,
    /// Next block offset to write.
    pub next: u16,
    /// 0 LFS, 1 SSR.
    pub alloc_type: u8,
    /// An SSR log we fill hole by hole (`next` is a usable hole, or 512). An SSR log the image
    /// left is not, until `mode=adaptive` takes it over; until then its first allocation
    /// closes it.
    pub holes: bool,
    pub sum: Vec<RawSummary>,
}

/// Reads main segment `segno`'s block of the SSA from the device.
pub(crate) type ReadSsa<'a> = &'a mut dyn FnMut(u32) -> Result<Block>;

pub(crate) struct Space {
    layout: Layout,
    entries: Vec<SitEntry>,
    /// SIT entries changed since the last checkpoint (or in the journal at mount).
    dirty: BTreeSet<u32>,
    /// Emptied since the last checkpoint: free only after the next one.
    prefree: BTreeSet<u32>,
    cursegs: Vec<Curseg>,
    /// Summary blocks of segments closed since the last checkpoint, to write to the SSA.
    closed: Vec<(u32, Box<Block>)>,
    /// Segment age clock (the filesystem's own seconds), for SIT mtime.
    now: u64,
    /// Main segments with no valid block (free, prefree or an empty log), kept as blocks
    /// come and go so that the space check before every change costs nothing.
    empty: u32,
    /// Space that hold the roll-forward chain being recovered: not handed out before the
    /// recovery's checkpoint is durable (cleared with `prefree`).
    reserved: BTreeSet<u32>,
    /// SSA blocks of segments that are not logs, changed by recovery; written at the next
    /// checkpoint.
    patched: std::collections::BTreeMap<u32, Box<Block>>,
    /// Which copy (0/1 bit per SIT block) holds each SIT block as of the last checkpoint.
    sit_bitmap: Vec<u8>,
    /// Sections (the cleaner's unit): valid blocks, age, and the victim index.
    sections: Sections,
    /// Sections with blocks the cleaner could not move, kept out of the victim index until
    /// a block of theirs changes.
    unmovable: BTreeSet<u32>,
    /// Holes data logs may fill in `mode=adaptive`, and the blocks no one may overwrite yet.
    slack: Slack,
    /// Where a windowed victim search (`gc_window`) starts next.
    window_cursor: u32,
    /// The read-only layout (`ro` feature, an image being built): data goes to the hot data
    /// log and nodes to the hot node log, the other four logs stay where they are, and no
    /// summary is kept for an SSA, since the layout has none.
    read_only: bool,
    /// Rewrite ages seen, for `data_temp=age`.
    temp: Temperature,
}

fn bit(map: &[u8; 64], off: usize) -> bool {
    map.get(off / 8)
        .is_some_and(|b| b & (0x80 >> (off % 8)) != 0)
}

impl Space {
    /// Segment state from the SIT (journal applied) and the checkpoint's logs and summaries.
    pub fn new(
        layout: Layout,
        entries: Vec<SitEntry>,
        journal: &[u32],
        cp: &Checkpoint,
        sums: [Vec<RawSummary>; 6],
    ) -> Result<Space> {
        let cursegs = cp
            .cursegs
            .iter()
            .zip(sums)
            .map(|(c, sum)| Curseg {
                segno: c.segno,
                next: c.blkoff,
                alloc_type: c.alloc_type,
                holes: false,
                sum,
            })
            .collect();
        let empty = entries
            .iter()
            .take(layout.main_segments as usize)
            .filter(|e| e.valid_blocks == 0)
            .count() as u32;
        let mut space = Space {
            empty,
            layout,
            entries,
            dirty: journal.iter().copied().collect(),
            prefree: BTreeSet::new(),
            cursegs,
            closed: Vec::new(),
            now: cp.head.elapsed_time.get(),
            reserved: BTreeSet::new(),
            patched: std::collections::BTreeMap::new(),
            sit_bitmap: cp.sit_bitmap.clone(),
            sections: Sections::new(layout.main_segments, layout.segs_per_sec.max(1))?,
            unmovable: BTreeSet::new(),
            slack: Slack::new(layout.main_segments)?,
            window_cursor: 0,
            read_only: false,
            temp: Temperature::new(0),
        };
        space.rebuild_sections();
        space.temp = Temperature::new(space.sections.clock());
        Ok(space)
    }

    /// Makes `addr` a valid block owned by `sum` (recovery of a block written after the last
    /// checkpoint). In a log's current segment the entry goes to the log's summary and the log
    /// continues after it; elsewhere it goes to the segment's SSA block (`ssa` reads it when
    /// it is not patched yet), written at the next checkpoint. The block must not be in use
    /// and must lie in a segment of the right kind (data or node).
    pub fn claim(
        &mut self,
        addr: u32,
        sum: RawSummary,
        node: bool,
        ssa: impl FnOnce(u32) -> Result<Box<Block>>,
    ) -> Result<()> {
        let corrupt = |why: &'static str| {
            Error::Corrupt(uf2fs_format::CorruptKind::Recovery { blkaddr: addr, why })
        };
        let (segno, off) = self
            .seg_of(addr)
            .ok_or_else(|| corrupt("address outside the main area"))?;
        if self.is_valid(addr) {
            return Err(corrupt("block already in use"));
        }
        if let Some(c) = self.cursegs.iter_mut().find(|c| c.segno == segno) {
            if let Some(s) = c.sum.get_mut(off) {
                *s = sum;
            }
            c.next = c.next.max(off as u16 + 1);
        } else {
            let seg_type = self
                .entries
                .get(segno as usize)
                .map(|e| (e.valid_blocks, e.seg_type));
            match seg_type {
                Some((0, _)) => {
                    if let Some(e) = self.entries.get_mut(segno as usize) {
                        e.seg_type = if node { Log::WarmNode } else { Log::WarmData } as u8;
                    }
                }
                Some((_, t)) if (t >= 3) != node => {
                    return Err(corrupt("block in a segment of the other kind (data/node)"))
                }
                _ => {}
            }
            if let std::collections::btree_map::Entry::Vacant(e) = self.patched.entry(segno) {
                e.insert(ssa(segno)?);
            }
            if let Some(raw) = self
                .patched
                .get_mut(&segno)
                .and_then(|b| RawSummaryBlock::mut_from_bytes(&mut b[..]).ok())
            {
                if let Some(e) = raw.entries.get_mut(off) {
                    *e = sum;
                }
                raw.entry_type = if node { SUM_TYPE_NODE } else { SUM_TYPE_DATA };
            }
        }
        self.validate(addr);
        Ok(())
    }

    /// Writes in the read-only layout from now on (see `read_only`).
    pub fn use_read_only_layout(&mut self) {
        self.read_only = true;
        self.slack.set(false, 0);
    }

    /// Whether this is the read-only layout: two logs, no SSA, nothing to clean with.
    pub fn is_read_only_layout(&self) -> bool {
        self.read_only
    }

    /// Blocks left in the current segment of the log that writes for `log`.
    pub fn log_room(&self, log: Log) -> u64 {
        self.cursegs
            .get(self.route(log) as usize)
            .filter(|c| c.alloc_type == 0)
            .map_or(0, |c| {
                ENTRIES_IN_SUM.saturating_sub(usize::from(c.next)) as u64
            })
    }

    /// The log that writes for `log`: itself, or in the read-only layout the hot log of its
    /// kind.
    fn route(&self, log: Log) -> Log {
        match (self.read_only, log.is_node()) {
            (false, _) => log,
            (true, true) => Log::HotNode,
            (true, false) => Log::HotData,
        }
    }

    /// The first block of main segment `segno`.
    pub fn seg_start(&self, segno: u32) -> u32 {
        self.layout.main + segno * BLOCKS_PER_SEG
    }

    /// The address the next block of `log` will get, opening a new segment now if the log's
    /// segment is full, so that a node can name its successor (`next_blkaddr`, the chain
    /// roll-forward recovery follows). In hole-filling mode that is the next usable hole, in
    /// this segment or in the next one the log takes.
    pub fn next_addr(&mut self, log: Log, read_ssa: ReadSsa) -> Result<u32> {
        let log = self.route(log);
        let i = log as usize;
        if self.cursegs.get(i).is_none_or(Curseg::needs_segment) {
            self.new_segment(log, Some(read_ssa))?;
        }
        let c = self
            .cursegs
            .get(i)
            .ok_or(Error::InvalidArgument("no such log"))?;
        Ok(self.seg_start(c.segno) + u32::from(c.next))
    }

    /// The data log a user's block goes to under `data_temp=age` (`temp.rs`): a first write
    /// (`old` none) to the warm log; an overwrite to the hot one if its old copy is young,
    /// else to the warm one.
    pub fn user_data_log(&mut self, old: Option<u32>) -> Log {
        let clock = self.sections.clock();
        self.temp.tick(clock, self.sections.valid_total());
        let Some((segno, _)) = old.and_then(|a| self.seg_of(a)) else {
            return Log::WarmData;
        };
        if self.seg_log(segno) == Some(Log::ColdData) {
            self.temp.old();
            return Log::WarmData;
        }
        let sps = self.layout.segs_per_sec.max(1);
        match self.sections.stamp(segno / sps) {
            Some(stamp) if self.temp.is_hot(stamp, clock) => Log::HotData,
            _ => Log::WarmData,
        }
    }

    /// Overwrites sent to the hot and to the warm log by `data_temp=age`, and the age limit
    /// last used (allocation clock blocks).
    pub fn temperature_counts(&self) -> (u64, u64, u64) {
        (self.temp.hot, self.temp.warm, self.temp.limit())
    }

    /// Whether `addr` is a valid (in use) block of the main area.
    pub fn is_valid(&self, addr: u32) -> bool {
        self.seg_of(addr).is_some_and(|(segno, off)| {
            self.entries
                .get(segno as usize)
                .is_some_and(|e| bit(&e.valid_map, off))
        })
    }

    fn seg_of(&self, addr: u32) -> Option<(u32, usize)> {
        let rel = addr.checked_sub(self.layout.main)?;
        let segno = rel / BLOCKS_PER_SEG;
        (segno < self.layout.main_segments).then_some((segno, (rel % BLOCKS_PER_SEG) as usize))
    }

    fn is_curseg(&self, segno: u32) -> bool {
        self.cursegs.iter().any(|c| c.segno == segno)
    }

    fn is_free(&self, segno: u32) -> bool {
        self.entries
            .get(segno as usize)
            .is_some_and(|e| e.valid_blocks == 0)
            && !self.prefree.contains(&segno)
            && !self.reserved.contains(&segno)
            && !self.is_curseg(segno)
    }

    /// Free segments as a checkpoint counts them: no valid block and not a log.
    pub fn free_count(&self) -> u32 {
        (0..self.layout.main_segments)
            .filter(|&s| {
                self.entries
                    .get(s as usize)
                    .is_some_and(|e| e.valid_blocks == 0)
                    && !self.is_curseg(s)
            })
            .count() as u32
    }

    /// Blocks that can surely still be written: those of the free segments (prefree ones are
    /// not free before the next checkpoint). The rest of each log's current segment is not
    /// counted: it serves that log only, and the log that runs out (say warm data, taking a
    /// big write) needs a free segment however much room the five others have left.
    pub fn writable_blocks(&self) -> u64 {
        // Empty segments that are not free: prefree ones, and logs with nothing valid yet.
        // (Once per segment: in the read-only layout four logs name the same one.)
        let empty_logs = self
            .cursegs
            .iter()
            .enumerate()
            .filter(|&(i, c)| {
                let first = !self.cursegs.iter().take(i).any(|d| d.segno == c.segno);
                first
                    && !self.prefree.contains(&c.segno)
                    && self
                        .entries
                        .get(c.segno as usize)
                        .is_some_and(|e| e.valid_blocks == 0)
            })
            .count();
        let reserved = self
            .reserved
            .iter()
            .filter(|&&s| self.is_free_but_reserved(s))
            .count();
        let free = u64::from(self.empty)
            .saturating_sub(self.prefree.len() as u64)
            .saturating_sub(empty_logs as u64)
            .saturating_sub(reserved as u64);
        debug_assert_eq!(
            free,
            (0..self.layout.main_segments)
                .filter(|&s| self.is_free(s))
                .count() as u64
        );
        let sps = self.layout.segs_per_sec.max(1);
        if sps == 1 {
            return free * u64::from(BLOCKS_PER_SEG);
        }
        // A log moves to a wholly free section when its own runs out, and what is left of
        // a log's section serves that log only: count the free sections. (A scan over
        // sections: cheap at the section counts that multi-segment sections give.)
        let whole = (0..self.sections.count())
            .filter(|&sec| (sec * sps..(sec + 1) * sps).all(|s| self.is_free(s)))
            .count() as u64;
        whole * u64::from(sps) * u64::from(BLOCKS_PER_SEG)
    }

    fn is_free_but_reserved(&self, segno: u32) -> bool {
        self.entries
            .get(segno as usize)
            .is_some_and(|e| e.valid_blocks == 0)
            && !self.prefree.contains(&segno)
            && !self.is_curseg(segno)
    }

    /// Marks block `addr` in use (for allocation and for recovery).
    pub fn validate(&mut self, addr: u32) {
        if let Some((segno, off)) = self.seg_of(addr) {
            if let Some(e) = self.entries.get_mut(segno as usize) {
                if !bit(&e.valid_map, off) {
                    if let Some(b) = e.valid_map.get_mut(off / 8) {
                        *b |= 0x80 >> (off % 8);
                    }
                    if e.valid_blocks == 0 {
                        self.empty -= 1;
                    }
                    e.valid_blocks += 1;
                    e.mtime = self.now;
                    let sec = segno / self.layout.segs_per_sec.max(1);
                    self.sections.added(sec);
                    self.unmovable.remove(&sec);
                    self.refresh(sec);
                    self.offer_holes(segno);
                } else {
                    e.mtime = self.now;
                }
                self.dirty.insert(segno);
            }
        }
    }

    /// The block at `addr` is no longer used. Returns whether it was valid.
    pub fn invalidate(&mut self, addr: u32) -> bool {
        let Some((segno, off)) = self.seg_of(addr) else {
            return false;
        };
        let was = self.clear_block(segno, off);
        if was {
            self.settle_segment(segno);
        }
        was
    }

    /// [`Space::invalidate`] of every block of `addrs`: what each block needs is done for each,
    /// and what its segment needs (the dirty set, the victim index, the holes offered to the
    /// logs, which only read how the segment stands) once after the last of a run of blocks
    /// in the same segment. A freed file's blocks are mostly one run: a block at a time, the
    /// segment's part was most of the work (about 900 instructions a block).
    pub fn invalidate_all(&mut self, addrs: impl IntoIterator<Item = u32>) {
        let mut pending: Option<u32> = None;
        for addr in addrs {
            let Some((segno, off)) = self.seg_of(addr) else {
                continue;
            };
            if let Some(p) = pending.filter(|&p| p != segno) {
                self.settle_segment(p);
                pending = None;
            }
            if self.clear_block(segno, off) {
                pending = Some(segno);
            }
        }
        if let Some(p) = pending {
            self.settle_segment(p);
        }
    }

    /// Block `off` of segment `segno` is no longer valid: its bit, the segment's and the
    /// section's counts, the emptied count, the slack held until the next checkpoint. Returns
    /// whether it was valid; the segment's own state is `settle_segment`'s.
    fn clear_block(&mut self, segno: u32, off: usize) -> bool {
        let Some(e) = self.entries.get_mut(segno as usize) else {
            return false;
        };
        if !bit(&e.valid_map, off) {
            return false;
        }
        if let Some(b) = e.valid_map.get_mut(off / 8) {
            *b &= !(0x80 >> (off % 8));
        }
        e.valid_blocks -= 1;
        e.mtime = self.now;
        if e.valid_blocks == 0 {
            self.empty += 1;
        }
        let sec = segno / self.layout.segs_per_sec.max(1);
        self.sections.removed(sec);
        self.slack.hold(segno, off);
        true
    }

    /// After blocks of `segno` were cleared (`clear_block`): the segment goes in the dirty
    /// set, prefree if it is empty and no log's, its section back into the victim index as it
    /// now stands, its holes offered or withdrawn.
    fn settle_segment(&mut self, segno: u32) {
        let sec = segno / self.layout.segs_per_sec.max(1);
        self.unmovable.remove(&sec);
        self.dirty.insert(segno);
        self.refresh(sec);
        let empty = self
            .entries
            .get(segno as usize)
            .is_some_and(|e| e.valid_blocks == 0);
        if empty && !self.is_curseg(segno) {
            self.prefree.insert(segno);
        }
        self.offer_holes(segno);
    }

    /// Allocates the next block of `log` for the owner `sum`. A log that needs a new segment
    /// while free ones run short takes one with holes of its kind in `mode=adaptive`;
    /// `read_ssa` gives that segment's summary when no newer one is in memory.
    pub fn alloc(&mut self, log: Log, sum: RawSummary, read_ssa: ReadSsa) -> Result<u32> {
        let log = self.route(log);
        let i = log as usize;
        if self.cursegs.get(i).is_none_or(Curseg::needs_segment) {
            self.new_segment(log, Some(read_ssa))?;
        }
        let main = self.layout.main;
        let c = self
            .cursegs
            .get_mut(i)
            .ok_or(Error::InvalidArgument("no such log"))?;
        let off = usize::from(c.next);
        if let Some(s) = c.sum.get_mut(off) {
            *s = sum;
        }
        c.next += 1;
        let (segno, holes) = (c.segno, c.holes);
        let addr = main + segno * BLOCKS_PER_SEG + off as u32;
        self.validate(addr);
        if holes {
            self.slack.taken.block(kind_of(log));
            let next = self.next_hole(segno, off + 1);
            if let Some(c) = self.cursegs.get_mut(i) {
                c.next = next;
            }
        }
        Ok(addr)
    }

    /// The first block of `segno` from `from` on that is neither valid nor held; 512 if none.
    fn next_hole(&self, segno: u32, from: usize) -> u16 {
        let Some(e) = self.entries.get(segno as usize) else {
            return ENTRIES_IN_SUM as u16;
        };
        (from..ENTRIES_IN_SUM)
            .find(|&o| !bit(&e.valid_map, o) && !self.slack.is_held(segno, o))
            .unwrap_or(ENTRIES_IN_SUM) as u16
    }

    /// Offers segment `segno`'s usable holes to the logs of its kind, or withdraws them, as it
    /// now stands: a segment in use that is no log's, not prefree and not held by recovery.
    fn offer_holes(&mut self, segno: u32) {
        if !self.slack.is_on() {
            return;
        }
        let Some(e) = self.entries.get(segno as usize) else {
            return;
        };
        let kind = kind_of_type(e.seg_type);
        // Not a section the cleaner is emptying either: its nodes wait for the checkpoint
        // that moves them (`set_unmovable`), and that checkpoint should free it.
        let sps = self.layout.segs_per_sec.max(1);
        let usable = e.valid_blocks > 0
            && !self.is_curseg(segno)
            && !self.prefree.contains(&segno)
            && !self.reserved.contains(&segno)
            && !self.unmovable.contains(&(segno / sps));
        let occupied = usable.then(|| self.slack.occupied(segno, &e.valid_map));
        self.slack.offer(segno, kind, occupied);
    }

    /// Lets logs fill holes (`mode=adaptive`) when fewer than `below` blocks are free, or not
    /// (`mode=lfs`). A log the image left in SSR mode is taken over (adaptive) or closed at its
    /// first allocation (lfs); a node log's summary then covers every valid block of its
    /// segment (the mount reads them from the nodes' footers).
    pub fn set_slack(&mut self, on: bool, below: u64) {
        let on = on && !self.read_only;
        self.slack.set(on, below);
        for i in 0..self.cursegs.len() {
            let Some(c) = self.cursegs.get(i) else {
                continue;
            };
            if c.alloc_type == 1 {
                let (segno, from) = (c.segno, usize::from(c.next));
                let next = self.next_hole(segno, from);
                if let Some(c) = self.cursegs.get_mut(i) {
                    c.holes = on;
                    if on {
                        c.next = next;
                    }
                }
            }
        }
        if on {
            for segno in 0..self.layout.main_segments {
                self.offer_holes(segno);
            }
        }
    }

    /// A checkpoint is being prepared: blocks freed until now may be reused once it lands.
    pub fn checkpoint_prepared(&mut self) {
        self.slack.checkpoint_prepared();
    }

    /// Holes data logs may fill now (`mode=adaptive` while free sections run short), and
    /// blocks freed since the last checkpoint that become such holes when the next lands.
    pub fn slack_room(&self, writable: u64) -> Option<(u64, u64)> {
        self.slack
            .wanted(writable)
            .then(|| (self.slack.usable(), self.slack.held()))
    }

    /// The free blocks below which logs take holes (`mode=adaptive`), if they may.
    pub fn slack_below(&self) -> Option<u64> {
        self.slack.below()
    }

    /// Segments logs took for their holes, and blocks written into holes, data and node.
    pub fn slack_counts(&self) -> slack::Counts {
        self.slack.taken
    }

    /// Moves every full log to a new segment: a checkpoint may not record a log at offset
    /// 512 (the kernel and fsck.f2fs reject such a pack).
    pub fn roll_full(&mut self) -> Result<()> {
        for log in Log::ALL {
            if self.route(log) != log {
                continue;
            }
            if self.cursegs.get(log as usize).is_some_and(|c| {
                (c.alloc_type == 0 || c.holes) && usize::from(c.next) >= ENTRIES_IN_SUM
            }) {
                self.new_segment(log, None)?;
            }
        }
        Ok(())
    }

    /// Closes the log's segment (its summary goes to the SSA) and opens a free one, or, given
    /// `read_ssa` while free segments run short in `mode=adaptive`, the used segment of the
    /// log's kind with the most usable holes.
    fn new_segment(&mut self, log: Log, read_ssa: Option<ReadSsa>) -> Result<()> {
        let Some(old) = self.cursegs.get(log as usize).cloned() else {
            return Err(Error::InvalidArgument("no such log"));
        };
        self.close(log, &old);
        let sps = self.layout.segs_per_sec.max(1);
        if let Some(read_ssa) = read_ssa {
            if self.slack.is_on() && self.slack.wanted(self.writable_blocks()) {
                while let Some(segno) = self.slack.pick(kind_of(log)) {
                    if self.take_holes(log, segno, &mut *read_ssa)? {
                        self.left(old.segno);
                        return Ok(());
                    }
                }
            }
        }
        // The rest of this section first, then the next wholly free section.
        let next_in_section = old.segno + 1;
        let segno = if next_in_section % sps != 0 && self.is_free(next_in_section) {
            next_in_section
        } else {
            self.free_section_from(old.segno / sps + 1)
                .ok_or(Error::NoSpace)?
        };
        self.open(log, segno);
        self.left(old.segno);
        Ok(())
    }

    /// Queues the summary of `log`'s segment `old` for the SSA: the log is leaving it.
    fn close(&mut self, log: Log, old: &Curseg) {
        if self.read_only {
            return;
        }
        let mut blk = Box::new([0u8; BLOCK_SIZE]);
        if let Ok(raw) = RawSummaryBlock::mut_from_bytes(&mut blk[..]) {
            for (e, s) in raw.entries.iter_mut().zip(&old.sum) {
                *e = *s;
            }
            raw.entry_type = if log.is_node() {
                SUM_TYPE_NODE
            } else {
                SUM_TYPE_DATA
            };
        }
        self.closed.push((old.segno, blk));
    }

    /// The first segment of the first wholly free section from section `start` on (wrapping).
    fn free_section_from(&self, start: u32) -> Option<u32> {
        let sps = self.layout.segs_per_sec.max(1);
        let sections = self.layout.main_segments / sps;
        (0..sections)
            .map(|k| (start + k) % sections)
            .find(|&sec| (0..sps).all(|j| self.is_free(sec * sps + j)))
            .map(|sec| sec * sps)
    }

    /// Makes free segment `segno` `log`'s, written from its first block.
    fn open(&mut self, log: Log, segno: u32) {
        if let Some(e) = self.entries.get_mut(segno as usize) {
            e.seg_type = log as u8;
            e.mtime = self.now;
        }
        self.dirty.insert(segno);
        if let Some(c) = self.cursegs.get_mut(log as usize) {
            *c = Curseg {
                segno,
                next: 0,
                alloc_type: 0,
                holes: false,
                sum: vec![RawSummary::default(); ENTRIES_IN_SUM],
            };
        }
        let sps = self.layout.segs_per_sec.max(1);
        self.refresh(segno / sps);
        self.offer_holes(segno);
    }

    /// A log has left segment `segno`: it is an ordinary segment now, a victim if it holds
    /// valid blocks, else prefree. (A log's segment that lost its last valid block stayed
    /// out of the prefree set; the last checkpoint may still name blocks in it, so it is
    /// free only after the next one.)
    fn left(&mut self, segno: u32) {
        if self.is_curseg(segno) {
            return;
        }
        let empty = self
            .entries
            .get(segno as usize)
            .is_some_and(|e| e.valid_blocks == 0);
        if empty && !self.reserved.contains(&segno) {
            self.prefree.insert(segno);
        }
        let sps = self.layout.segs_per_sec.max(1);
        self.refresh(segno / sps);
        self.offer_holes(segno);
    }

    /// Makes used segment `segno` log `log`'s (of the same kind), in SSR mode: its summary
    /// (with the entries of the blocks still valid) is the log's, and the log writes its
    /// usable holes.
    /// False, with the segment withdrawn, if it has no usable hole after all (never expected:
    /// the index and the maps change together).
    fn take_holes(&mut self, log: Log, segno: u32, read_ssa: ReadSsa) -> Result<bool> {
        let next = self.next_hole(segno, 0);
        if usize::from(next) >= ENTRIES_IN_SUM {
            tracing::warn!("segment {segno} was offered for its holes but has none");
            self.slack.offer(segno, kind_of(log), None);
            return Ok(false);
        }
        let sum = self.summary_of(segno, read_ssa)?;
        if sum.len() != ENTRIES_IN_SUM {
            return Err(Error::Corrupt(uf2fs_format::CorruptKind::Summary {
                which: "segment summary of a segment with holes",
                why: "not one entry per block",
            }));
        }
        if let Some(e) = self.entries.get_mut(segno as usize) {
            e.seg_type = log as u8;
        }
        self.dirty.insert(segno);
        if let Some(c) = self.cursegs.get_mut(log as usize) {
            *c = Curseg {
                segno,
                next,
                alloc_type: 1,
                holes: true,
                sum,
            };
        }
        self.slack.taken.segment(kind_of(log));
        let sps = self.layout.segs_per_sec.max(1);
        self.refresh(segno / sps);
        self.offer_holes(segno);
        Ok(true)
    }

    /// Recomputes every section's valid blocks and candidacy (at mount, after recovery).
    pub fn rebuild_sections(&mut self) {
        let sps = self.layout.segs_per_sec.max(1);
        // Older SIT mtimes first: their stamps come before every block written from now on.
        let mut order: Vec<(u64, u32)> = (0..self.sections.count())
            .map(|sec| {
                let m = (0..sps)
                    .filter_map(|j| self.entries.get((sec * sps + j) as usize))
                    .map(|e| e.mtime)
                    .max()
                    .unwrap_or(0);
                (m, sec)
            })
            .collect();
        order.sort_unstable();
        for (rank, (_, sec)) in order.into_iter().enumerate() {
            let valid: u32 = (0..sps)
                .filter_map(|j| self.entries.get((sec * sps + j) as usize))
                .map(|e| u32::from(e.valid_blocks))
                .sum();
            self.sections.load(sec, valid, rank as u64);
        }
        for sec in 0..self.sections.count() {
            self.refresh(sec);
        }
    }

    /// Puts section `sec` in the victim index or takes it out, as it now stands.
    fn refresh(&mut self, sec: u32) {
        let valid = self.sections.valid(sec);
        let segs = self.section_segments(sec);
        let held = self.cursegs.iter().any(|c| segs.contains(&c.segno))
            || self.reserved.range(segs.clone()).next().is_some()
            || self.unmovable.contains(&sec);
        let kind = if held || valid == 0 || valid >= self.sections.blocks_per_section() {
            None
        } else {
            // A section holds one kind; its first segment in use says which.
            segs.filter_map(|s| self.entries.get(s as usize))
                .find(|e| e.valid_blocks > 0)
                .map(|e| kind_of_type(e.seg_type))
        };
        self.sections.set_candidate(sec, kind);
    }

    /// The best section to clean under `policy` (with `data_first`, node sections after data
    /// ones), if any is a candidate; with its kind.
    pub fn victim(
        &mut self,
        policy: Policy,
        data_first: bool,
        only: Option<VictimKind>,
    ) -> Option<(u32, VictimKind)> {
        let sec = self.sections.pick(policy, data_first, only)?;
        Some((sec, self.sections.kind(sec)?))
    }

    /// The best of the next `window` candidate sections from where the last search stopped,
    /// as the kernel searches (`max_victim_search`): for comparing its windows with the
    /// exact index (`gc_window`). Scans up to every section to find that many.
    pub fn victim_in_window(
        &mut self,
        policy: Policy,
        data_first: bool,
        window: u32,
    ) -> Option<(u32, VictimKind)> {
        let n = self.sections.count();
        let mut best: Option<(f64, u32, VictimKind)> = None;
        let (mut seen, mut sec) = (0, self.window_cursor % n.max(1));
        for _ in 0..n {
            if seen >= window {
                break;
            }
            if let Some(kind) = self.sections.kind(sec) {
                seen += 1;
                let cost = self
                    .sections
                    .cost(sec, policy, data_first && kind == VictimKind::Node);
                if best.is_none_or(|(c, _, _)| cost < c) {
                    best = Some((cost, sec, kind));
                }
            }
            sec = (sec + 1) % n;
        }
        self.window_cursor = sec;
        best.map(|(_, sec, kind)| (sec, kind))
    }

    /// Keeps `sec` out of the victim index until one of its blocks changes: the cleaner met
    /// blocks in it that it cannot move (a summary that disagrees with its owner).
    pub fn set_unmovable(&mut self, sec: u32) {
        self.unmovable.insert(sec);
        self.refresh(sec);
        for segno in self.section_segments(sec) {
            self.offer_holes(segno);
        }
    }

    /// Segments of section `sec`.
    pub fn section_segments(&self, sec: u32) -> std::ops::Range<u32> {
        let sps = self.layout.segs_per_sec.max(1);
        sec * sps..(sec + 1) * sps
    }

    /// Valid blocks of section `sec`.
    pub fn section_valid(&self, sec: u32) -> u32 {
        self.sections.valid(sec)
    }

    /// Blocks per section.
    pub fn blocks_per_section(&self) -> u32 {
        self.sections.blocks_per_section()
    }

    /// Sections in the victim index.
    pub fn candidates(&mut self) -> usize {
        self.sections.candidates()
    }

    /// Offsets of the valid blocks of main segment `segno`.
    pub fn valid_offsets(&self, segno: u32) -> Vec<usize> {
        self.entries
            .get(segno as usize)
            .map(|e| {
                (0..BLOCKS_PER_SEG as usize)
                    .filter(|&o| bit(&e.valid_map, o))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The summary entries of main segment `segno` as they stand now: a log's own, else the
    /// block queued for the SSA (closed since the last checkpoint, or patched by recovery),
    /// else the SSA block on the device (`read_ssa`).
    pub fn summary_of(
        &self,
        segno: u32,
        read_ssa: impl FnOnce(u32) -> Result<Block>,
    ) -> Result<Vec<RawSummary>> {
        if let Some(c) = self.cursegs.iter().find(|c| c.segno == segno) {
            return Ok(c.sum.clone());
        }
        let queued = self.patched.get(&segno).or_else(|| {
            self.closed
                .iter()
                .rev()
                .find(|(s, _)| *s == segno)
                .map(|(_, b)| b)
        });
        let block: Block = match queued {
            Some(b) => **b,
            None => read_ssa(segno)?,
        };
        Ok(uf2fs_format::summary::Summary::from_block(&block).entries)
    }

    /// Segments emptied since the last checkpoint (free once the next one lands).
    pub fn prefree_segments(&self) -> u64 {
        self.prefree.len() as u64
    }

    /// Blocks of the whole sections the next checkpoint turns free: every segment of each
    /// prefree (or already free), at least one prefree. With one segment per section, those
    /// of every prefree segment; a prefree segment beside one still in use frees no section.
    pub fn freeable_blocks(&self) -> u64 {
        let sps = self.layout.segs_per_sec.max(1);
        let per_section = u64::from(sps) * u64::from(BLOCKS_PER_SEG);
        if sps == 1 {
            return self.prefree.len() as u64 * per_section;
        }
        let mut sections = 0u64;
        let mut last = None;
        // The set is ordered: a section's prefree segments come together.
        for &segno in &self.prefree {
            let sec = segno / sps;
            if last == Some(sec) {
                continue;
            }
            last = Some(sec);
            if self
                .section_segments(sec)
                .all(|s| self.prefree.contains(&s) || self.is_free(s))
            {
                sections += 1;
            }
        }
        sections * per_section
    }

    /// The log a main segment's blocks were written by (its SIT type).
    pub fn seg_log(&self, segno: u32) -> Option<Log> {
        Some(match self.entries.get(segno as usize)?.seg_type {
            0 => Log::HotData,
            1 => Log::WarmData,
            2 => Log::ColdData,
            3 => Log::HotNode,
            4 => Log::WarmNode,
            _ => Log::ColdNode,
        })
    }

    /// Sections in the main area.
    pub fn section_count(&self) -> u32 {
        self.sections.count()
    }

    /// Segments recovery held are free to use again (its checkpoint landed).
    pub fn release_reserved(&mut self, done: &BTreeSet<u32>) {
        self.reserved.retain(|s| !done.contains(s));
        let sps = self.layout.segs_per_sec.max(1);
        let secs: BTreeSet<u32> = done.iter().map(|s| s / sps).collect();
        for sec in secs {
            self.refresh(sec);
        }
        for &segno in done {
            self.offer_holes(segno);
        }
    }

    /// The SIT changes a checkpoint records: the journal entries if the entries that differ
    /// from the SIT blocks fit there (6; they stay "changed", since each checkpoint's journal
    /// must carry them all until they reach a block), else nothing for the journal and every
    /// SIT block holding a changed entry, bound for its other copy (whose bit in the SIT
    /// bitmap flips); those entries are then no longer changed.
    pub fn sit_changes(&mut self) -> SitChanges {
        if self.dirty.len() <= SIT_JOURNAL_ENTRIES {
            let journal = self
                .dirty
                .iter()
                .map(|&s| (s, self.raw_sit_entry(s)))
                .collect();
            return (journal, Vec::new());
        }
        let dirty = std::mem::take(&mut self.dirty);
        let per = SIT_ENTRIES_PER_BLOCK as u32;
        let indexes: BTreeSet<u32> = dirty.iter().map(|s| s / per).collect();
        let mut blocks = Vec::with_capacity(indexes.len());
        for index in indexes {
            let mut b = Box::new([0u8; BLOCK_SIZE]);
            if let Ok(raw) = RawSitBlock::mut_from_bytes(&mut b[..]) {
                for (k, slot) in raw.entries.iter_mut().enumerate() {
                    let segno = index * per + k as u32;
                    if segno < self.layout.main_segments {
                        *slot = self.raw_sit_entry(segno);
                    }
                }
            }
            if let Some(v) = self.sit_bitmap.get_mut(index as usize / 8) {
                *v ^= 0x80 >> (index % 8);
            }
            blocks.push((sit_block_addr(&self.layout, &self.sit_bitmap, index), b));
        }
        (Vec::new(), blocks)
    }

    /// Main segment `segno`'s SIT entry as the format lays it out.
    fn raw_sit_entry(&self, segno: u32) -> RawSitEntry {
        let e = self.entries.get(segno as usize);
        RawSitEntry {
            vblocks: e
                .map(|e| (u16::from(e.seg_type) << SIT_TYPE_SHIFT) | e.valid_blocks)
                .unwrap_or(0)
                .into(),
            valid_map: e.map(|e| e.valid_map).unwrap_or([0; 64]),
            mtime: e.map(|e| e.mtime).unwrap_or(0).into(),
        }
    }

    /// The summary blocks queued for the SSA (segments closed since the last checkpoint,
    /// and those recovery changed), taken for the checkpoint to write.
    pub fn take_summaries(&mut self) -> Vec<(u32, Box<Block>)> {
        let mut out = std::mem::take(&mut self.closed);
        out.extend(std::mem::take(&mut self.patched));
        out
    }

    /// The six logs, in curseg order.
    pub fn logs(&self) -> &[Curseg] {
        &self.cursegs
    }

    /// Which copy of each SIT block is current (the checkpoint's SIT bitmap).
    pub fn sit_bitmap(&self) -> &[u8] {
        &self.sit_bitmap
    }

    /// The file system's age clock in seconds (SIT mtimes, the checkpoint's elapsed time).
    pub fn clock(&self) -> u64 {
        self.now
    }

    pub fn set_clock(&mut self, now: u64) {
        self.now = now;
    }

    /// Segments emptied since the last checkpoint.
    pub fn prefree_set(&self) -> &BTreeSet<u32> {
        &self.prefree
    }

    /// Segments recovery holds until its checkpoint lands.
    pub fn reserved_set(&self) -> &BTreeSet<u32> {
        &self.reserved
    }

    /// A checkpoint landed: the segments that were prefree (and those recovery held) when it
    /// was prepared are free now. Returns how many prefree segments that freed.
    pub fn checkpoint_landed(&mut self, prefree: &BTreeSet<u32>, reserved: &BTreeSet<u32>) -> u64 {
        let before = self.prefree.len();
        self.prefree.retain(|s| !prefree.contains(s));
        self.release_reserved(reserved);
        for segno in self.slack.checkpoint_landed() {
            self.offer_holes(segno);
        }
        (before - self.prefree.len()) as u64
    }

    /// Keeps block `addr` of a roll-forward chain from being overwritten before recovery's
    /// checkpoint lands: a log's segment continues after it, any other segment is held.
    /// False if `addr` is not in the main area.
    pub fn keep_for_recovery(&mut self, addr: u32) -> bool {
        let Some((segno, off)) = self.seg_of(addr) else {
            return false;
        };
        if let Some(c) = self.cursegs.iter_mut().find(|c| c.segno == segno) {
            c.next = c.next.max(off as u16 + 1);
        } else {
            self.reserved.insert(segno);
        }
        true
    }

    /// Segment usage summed from the SIT entries in memory.
    pub fn usage(&self) -> sit::SegmentUsage {
        sit::usage(&self.entries)
    }
}
