//! The cleaner: picks a victim section from the space room's victim index and moves its valid
//! blocks out, so that the section empties, becomes prefree, and is free once the next
//! checkpoint lands.
//!
//! - **Data blocks** are read in runs, written to the cold data log (what the cleaner moves
//!   has outlived its neighbours: it is colder than what users write), and only then linked:
//!   the slot `(nid, ofs_in_node)` the segment summary names is checked to point at the old
//!   block (NAT entry in use, same version as the summary, same address in the node), then
//!   pointed at the new one. A summary that disagrees with its node is counted and skipped,
//!   never followed into another file; the section then stays out of the index until one of
//!   its blocks changes.
//! - **Node blocks** are moved by marking the node dirty: the next checkpoint writes it out of
//!   place, which empties the old block.
//! - Nodes the cleaner changed and nothing else did are written by the next checkpoint, not by
//!   an fsync (`Nodes::put_dirty_gc`): until that checkpoint lands, the blocks the last one
//!   points at are still on the device (a prefree section is not reused before it), so a crash
//!   at any point of a pass loses nothing.
//!
//! Victims (seed 000, data first): a node section weighs one section's worth of blocks more
//! than its valid count, unless free sections run short (`require_node_gc`), when node
//! sections are cleaned as any other until enough sections are free again.
//!
//! Who cleans: a change short of space cleans one section at a time (`Fs::changing`); the
//! daemon's background thread cleans ahead (`Fs::background_gc_step`); `uf2fs gc` on request.

pub(crate) mod state;

pub use state::GcStats;

use crate::data::write_runs;
use crate::error::{Error, Result};
use crate::ns::edit::{fix_checksum, get32, Editing};
use crate::space::{Log, Policy, VictimKind};
use crate::state::WriteState;
use crate::vol::Fs;
use foldhash::{HashMap, HashMapExt};
use std::collections::BTreeMap;
use uf2fs_device::IoCause;
use uf2fs_format::inode::FileType;
use uf2fs_format::node::{entry, is_indirect, Footer};
use uf2fs_format::summary::RawSummary;
use uf2fs_format::{Block, BLOCKS_PER_SEG, BLOCK_SIZE};

/// Who asked for a cleaning pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Caller {
    /// A change that is short of space waits for it.
    Foreground,
    /// The background thread, ahead of need.
    Background,
    /// `uf2fs gc` or the API's `Fs::gc`.
    Request,
}

/// What a pass over one section did.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Cleaned {
    pub section: u32,
    pub moved: u64,
}

/// A valid data block of the victim and the slot that owns it.
struct Owned {
    addr: u32,
    sum: RawSummary,
    ino: u32,
}

/// Free space is counted in whole free sections, and a log that fills its section takes a
/// new one whole. So room is reckoned in sections: a checkpoint may open a section in each of
/// the three node logs (`cp_room`), the cleaner one in the cold data log, a change one in its
/// own log.
fn cp_room(bps: u64) -> u64 {
    3 * bps
}

/// Free blocks the next checkpoint may take (`ckpt` below): what each node log's dirty nodes
/// need beyond the room left in its current segment, in whole sections (a log that fills its
/// section takes a new one whole). Each log's count carries `NODE_SLACK` more, for the nodes a
/// change or a cleaning pass adds between two checks (a change counts its own nodes among its
/// blocks as well). Never more than the dirty nodes plus a section per node log (`cp_room`),
/// the bound before the logs were counted apart. On a job that rewrites one file, only the
/// warm node log has dirty nodes: one section, or none while its segment has room for them,
/// instead of the dirty nodes plus three.
fn ckpt_need(v: &crate::vol::Vol, ws: &WriteState, bps: u64) -> u64 {
    let logs = [Log::HotNode, Log::WarmNode, Log::ColdNode];
    let exact = v
        .nodes
        .dirty_by_log()
        .iter()
        .zip(logs)
        .fold(0u64, |sum, (&n, log)| {
            let beyond = (n as u64 + NODE_SLACK).saturating_sub(ws.segs.log_room(log));
            sum.saturating_add(beyond.div_ceil(bps).saturating_mul(bps))
        });
    exact.min((v.nodes.dirty_count() as u64).saturating_add(cp_room(bps)))
}

/// Nodes a log may gain between two space checks beyond what the changes count
/// (`ckpt_need`). Until stop 33 it was a whole section for every volume; measured on seed
/// 000's 2 GiB jobs, the section held back cost 0.5% of the device writes.
const NODE_SLACK: u64 = 32;

/// What prefree space stands in for in a change's reserve: the half batch kept so that the
/// cleaner can clean several sections before the checkpoint that frees them
/// (`change_reserve`). Once sections cleaned earlier wait for that checkpoint, it frees them
/// by itself, and the reserve is whole again after it. Counted in whole sections
/// (`Space::freeable_blocks`), never more than the half batch.
fn prefree_credit(ws: &WriteState, bps: u64) -> u64 {
    let half = bps * (batch(ws.segs.section_count()) / 2);
    ws.segs.freeable_blocks().min(half)
}

/// What cleaning may spend, given `writable` free blocks and what the next checkpoint takes
/// (`ckpt_need`): a victim's copies (its valid blocks, in a cold-log section that may be
/// new) and the nodes they newly dirty must leave room for the checkpoint that frees it.
/// `clean_one` counts both exactly before it moves anything.
fn clean_budget(writable: u64, ckpt: u64, bps: u64) -> u64 {
    writable.saturating_sub(ckpt + bps)
}

pub use state::DEFAULT_GC_BATCH;

/// The batch while data fills holes instead (`mode=adaptive` short of free sections): the
/// holes serve the rewrites, so cleaning ahead of them only moves blocks for nothing.
const SLACK_BATCH: u64 = 2;

/// How a change meets a volume short of room.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pace {
    /// Waits until there is room: cleaning and checkpoints under the write lock (fsync, whose
    /// chain must fit now, and every change when no background thread runs).
    Wait,
    /// Does at most one bounded step (one section's cleaning, none if it waited for the lock
    /// behind someone else's) and goes on, leaving the checkpoint that frees what it cleaned
    /// to the background thread; waits only when below the floor.
    Step { contended: bool },
}

/// What `make_room` found.
pub(crate) enum Room {
    /// The change may go ahead.
    Ready,
    /// Below the floor while a checkpoint is being written: wait for it without the lock,
    /// settle it, and ask again.
    Await(std::sync::Arc<crate::durability::state::IoDone>),
    /// Below the floor with cleaned sections waiting for a checkpoint nobody has begun: this
    /// one, prepared; write it without the lock, and ask again.
    Checkpoint(Box<crate::durability::checkpoint::CheckpointWrites>),
}

/// Paced changes start their step this far above their floor, in blocks: the sections cleaned
/// before one checkpoint come out of this band, and the writes made while it is written out
/// of its last section. A wider band holds more space free (the other sections fuller, more
/// to move); a narrower one means more checkpoints, each rewriting the nodes the moves
/// dirtied. So the band grows with what a checkpoint costs: `PACE_BLOCKS_PER_NODE` blocks per
/// node the last checkpoint wrote, at least `PACE_SECTIONS` sections. Measured on seed 003's
/// job before the checkpoint's room was counted per node log (docs/design.md, "Paced
/// writers"): 512 MiB (about 90 nodes a checkpoint) wants 5 sections (WAF 2.249; 10 gave
/// 2.374), 2 GiB (about 440) wants 10 (5.148; 5 gave 5.803). Since the floor sinks by the
/// prefree credit once a step's cleaning has begun (`prefree_credit`, stop 33), a step goes
/// three sections deeper on 2 GiB: nine blocks per node then cleans about as many sections
/// per checkpoint as twelve did, with less held free (docs/design.md, "Less held free").
fn pace_band(bps: u64, last_nodes: u64) -> u64 {
    (PACE_SECTIONS * bps).max(last_nodes * PACE_BLOCKS_PER_NODE)
}

const PACE_SECTIONS: u64 = 5;
const PACE_BLOCKS_PER_NODE: u64 = 9;

impl Fs {
    /// Makes room for a change of `blocks` new blocks, under the write lock: free segments
    /// for them, for every dirty node (the next checkpoint writes them) and for the reserve.
    /// What is short is found by writing a checkpoint (segments emptied since the last one
    /// become free) and by cleaning sections, one at a time; `NoSpace` when neither helps.
    pub(crate) fn make_room(&self, ws: &mut WriteState, blocks: u64, pace: Pace) -> Result<Room> {
        let v = self.vol();
        let bps = u64::from(ws.segs.blocks_per_section());
        // The read-only layout is never cleaned and writes two logs: what a change needs is
        // counted in whole sections per log, after what each log's segment has left.
        if ws.segs.is_read_only_layout() {
            let dirty = || v.nodes.dirty_count() as u64;
            if read_only_room(ws, blocks, dirty()).is_err()
                && ws.segs.prefree_segments() > 0
                && read_only_room(ws, 0, dirty()).is_ok()
            {
                // Segments emptied by removals are free once a checkpoint lands.
                self.checkpoint_for_space(ws)?;
            }
            return read_only_room(ws, blocks, dirty()).map(|()| Room::Ready);
        }
        let temp = v.options.data_temp;
        let reserve = change_reserve(bps, ws.segs.section_count(), temp)
            - log_room_credit(ws, blocks, bps, temp);
        if let Pace::Step { contended } = pace {
            if let Some(room) = self.pace(ws, blocks, reserve, contended)? {
                return Ok(room);
            }
        }
        let started = std::time::Instant::now();
        let mut waited = false;
        // Each round cleans a section or writes a checkpoint; a checkpoint that frees nothing
        // twice in a row ends it.
        let mut fruitless = 0;
        let mut rounds = 0u64;
        let mut sections = 0u64;
        let max_rounds = 4 * u64::from(ws.segs.section_count()) + 16;
        // The reserve's checkpoint part is counted per node log (`ckpt_need`).
        let rest = reserve.saturating_sub(cp_room(bps));
        let r = loop {
            let dirty = v.nodes.dirty_count() as u64;
            let ckpt = ckpt_need(v, ws, bps);
            let writable = ws.segs.writable_blocks();
            let full_rest = rest;
            let rest = rest.saturating_sub(prefree_credit(ws, bps));
            // In `mode=adaptive` with free sections short, data fills holes: what the holes
            // take now (or once the next checkpoint frees the held ones) needs no free segment.
            let slack = ws.segs.slack_room(writable);
            let (usable, held) = slack.unwrap_or((0, 0));
            let from_free = |holes: u64| {
                if slack.is_some() && holes >= blocks {
                    0
                } else {
                    blocks
                }
            };
            if from_free(usable) + ckpt + rest <= writable {
                break Ok(Room::Ready);
            }
            rounds += 1;
            if rounds > max_rounds || fruitless >= 2 {
                tracing::warn!("no space for {blocks} blocks after {rounds} rounds ({fruitless} fruitless checkpoints): {writable} writable, {dirty} dirty nodes");
                break Err(Error::NoSpace);
            }
            waited = true;
            v.gc_urgent
                .store(true, std::sync::atomic::Ordering::Relaxed);
            let prefree = ws.segs.prefree_segments() * u64::from(BLOCKS_PER_SEG);
            // Prefree segments become free by a checkpoint, and so do node sections the
            // cleaner marked (their nodes move when it writes them).
            let releases_holes = held > 0 && from_free(usable) > 0;
            let can_checkpoint =
                (prefree > 0 || ws.cp.pending.is_some() || ws.gc.nodes_moving || releases_holes)
                    && ckpt <= writable;
            // Cleaning a section writes its valid blocks and dirties nodes, which the
            // checkpoint after it writes (`clean_one` counts both for the victim it picks).
            let budget = clean_budget(writable, ckpt, bps);
            let room_to_clean = budget > 0;
            // Where holes take the rewrites (adaptive mode, free sections short), cleaning
            // ahead would move what the holes make unnecessary: the small batch.
            let batch_sections = if slack.is_some() {
                SLACK_BATCH
            } else {
                u64::from(v.options.gc_batch)
            };
            // Counted from the whole reserve: the prefree credit lets a change pass, it does
            // not end a batch sooner.
            let enough = writable + prefree
                >= from_free(usable + held) + ckpt + full_rest + batch_sections * bps;
            // Clean while the checkpoint after would not yet give enough back (one checkpoint,
            // and one rewrite of the nodes the moves dirtied, for several sections).
            if !enough && room_to_clean {
                if let Some(c) = self.clean_one(ws, Caller::Foreground, budget)? {
                    sections += 1;
                    tracing::debug!(
                        "foreground cleaning: section {} ({} blocks moved)",
                        c.section,
                        c.moved
                    );
                    continue;
                }
            }
            if can_checkpoint {
                let moved_nodes = ws.gc.nodes_moving;
                let freed = self.checkpoint_for_space(ws)?;
                let holes_after = ws
                    .segs
                    .slack_room(ws.segs.writable_blocks())
                    .map_or(0, |(u, _)| u);
                fruitless = if freed == 0 && !moved_nodes && holes_after <= usable {
                    fruitless + 1
                } else {
                    0
                };
                continue;
            }
            // A checkpoint being written without the lock has taken its nodes' room, and they
            // count as dirty until it lands: a paced change waits for it (without the lock)
            // and looks again. In adaptive mode short of free sections `pace` leaves every
            // change to this path, which until stop 35 gave up here instead: ENOSPC for every
            // change while the background thread's checkpoint was written, on a volume 40% full
            // (`uf2fs-bench io`, `tar -x` after random 4 KiB writes had spread a file over nearly
            // every segment).
            if let (Pace::Step { .. }, Some(p)) = (pace, &ws.cp.pending) {
                break Ok(Room::Await(p.io.clone()));
            }
            tracing::warn!("no space for {blocks} blocks: {writable} writable, {dirty} dirty nodes, {prefree} prefree, {} victims", ws.segs.candidates());
            break Err(Error::NoSpace);
        };
        if waited {
            let us = started.elapsed().as_micros() as u64;
            let st = &mut ws.gc.stats;
            st.worst_wait_us = st.worst_wait_us.max(us);
            st.full_waits += 1;
            st.most_sections_one_wait = st.most_sections_one_wait.max(sections);
        }
        r
    }

    /// `make_room` for a caller that must have the room now, under the lock it holds.
    pub(crate) fn make_room_waiting(&self, ws: &mut WriteState, blocks: u64) -> Result<()> {
        match self.make_room(ws, blocks, Pace::Wait)? {
            Room::Ready => Ok(()),
            // Only paced changes are sent to wait for a checkpoint.
            Room::Await(_) | Room::Checkpoint(_) => Err(Error::NoSpace),
        }
    }

    /// A paced change's step (seed 003: a writer never waits for a whole cleaning pass).
    /// The floor is one section below the change's reserve; nothing to do while free space
    /// is `pace_band` above it. Below that: while a checkpoint is being written, go
    /// on down to the floor, else wait for it without the lock (`Room::Await`); otherwise
    /// clean one section (none if this change already waited for the lock behind someone
    /// else's work) with its copies kept a section above the floor, and ask the background
    /// thread for the checkpoint once what was cleaned is a batch or no more fits. Below the
    /// floor with something to free, the checkpoint is prepared here and written without the
    /// lock (`Room::Checkpoint`). `None` sends the change to the waiting path (`Pace::Wait`).
    fn pace(
        &self,
        ws: &mut WriteState,
        blocks: u64,
        reserve: u64,
        contended: bool,
    ) -> Result<Option<Room>> {
        let v = self.vol();
        if !v.options.gc_pace || !v.pacer.running() {
            return Ok(None);
        }
        let bps = u64::from(ws.segs.blocks_per_section());
        let prefree_blocks =
            |ws: &WriteState| ws.segs.prefree_segments() * u64::from(BLOCKS_PER_SEG);
        // The change's need with the whole reserve; the floor takes the prefree credit off it.
        let full_need =
            |ws: &WriteState| blocks + ckpt_need(v, ws, bps) + reserve.saturating_sub(cp_room(bps));
        let writable = ws.segs.writable_blocks();
        // Adaptive mode short of free sections fills holes instead: the waiting path knows how.
        if ws.segs.slack_room(writable).is_some() {
            return Ok(None);
        }
        // The floor is a section into the change's reserve: the writes made while a
        // checkpoint is written may take it, and what is left still lets the waiting path
        // clean a section whose moves dirty as many nodes again (right after a checkpoint
        // every node is clean) before the next checkpoint.
        let floor = |ws: &WriteState| {
            full_need(ws)
                .saturating_sub(prefree_credit(ws, bps))
                .saturating_sub(bps)
        };
        // The band starts above the floor as it is with nothing prefree: the credit lets a
        // step's cleaning go deeper, not begin later, and a batch (`enough`) counts from the
        // same top. Measured from the credited floor, the top sank with every section
        // cleaned, and at 8 GiB, where the half batch is 15 sections, a batch ended after a
        // few sections: seed 000 (a) wrote 7.83 blocks per user block against 7.50 before the
        // credit, and 7.19 with the top kept (docs/design.md, "Less held free").
        let band = pace_band(bps, ws.cp.last_nodes);
        // In adaptive mode the logs take holes below the slack threshold, and what the holes
        // take needs no cleaning: no paced step above it. Seed 001's job (each O_SYNC rewrite
        // writes one inode) otherwise stepped above it: each node section cleaned made the
        // next checkpoint, and so the band, larger, and 126 509 node blocks moved while the
        // node logs took 902 holes (docs/design.md, "Node logs fill holes too").
        let hole_line = ws.segs.slack_below().unwrap_or(u64::MAX);
        let start = |ws: &WriteState| (full_need(ws).saturating_sub(bps) + band).min(hole_line);
        if writable >= start(ws) {
            return Ok(Some(Room::Ready));
        }
        if let Some(p) = &ws.cp.pending {
            return Ok(Some(if writable >= floor(ws) {
                Room::Ready
            } else {
                Room::Await(p.io.clone())
            }));
        }
        v.pacer.stepped();
        let batch = u64::from(v.options.gc_batch) * bps;
        let enough =
            |ws: &WriteState| ws.segs.writable_blocks() + prefree_blocks(ws) >= start(ws) + batch;
        // Copies and the nodes they dirty stay above the floor, with a section to spare
        // for the writes made while the checkpoint is written.
        let budget = |ws: &WriteState| ws.segs.writable_blocks().saturating_sub(floor(ws) + bps);
        let mut cleaned = None;
        let tried = !contended && !enough(ws) && budget(ws) > 0;
        if tried {
            // The wait itself is counted by the caller (`room_for`), lock and all.
            cleaned = self.clean_one(ws, Caller::Foreground, budget(ws))?;
            let st = &mut ws.gc.stats;
            if cleaned.is_some() {
                st.paced_steps += 1;
                st.most_sections_one_wait = st.most_sections_one_wait.max(1);
            }
        }
        let freeable = prefree_blocks(ws) > 0 || ws.gc.nodes_moving;
        let writable = ws.segs.writable_blocks();
        if writable >= floor(ws) {
            // Not after a step skipped for the lock: the checkpoint waits for a batch.
            let nothing_to_clean = tried && cleaned.is_none();
            if freeable && (nothing_to_clean || enough(ws) || budget(ws) < bps) {
                v.pacer.want_checkpoint();
            }
            return Ok(Some(Room::Ready));
        }
        // Below the floor, the background thread behind: write the checkpoint here, without
        // the lock, rather than clean more under it.
        if freeable && ckpt_need(v, ws, bps) <= writable {
            return self
                .prepare_space_checkpoint(ws)
                .map(|w| Some(Room::Checkpoint(Box::new(w))));
        }
        Ok(None)
    }

    /// Writes the checkpoint that turns prefree segments free; the segments it freed.
    fn checkpoint_for_space(&self, ws: &mut WriteState) -> Result<u64> {
        let before = ws.segs.prefree_segments();
        count_space_checkpoint(ws);
        self.checkpoint_now(ws, false)?;
        Ok(before.saturating_sub(ws.segs.prefree_segments()))
    }

    /// Prepares, under the lock, a checkpoint that turns prefree segments free; the caller
    /// writes it without the lock (`write_prepared`).
    fn prepare_space_checkpoint(
        &self,
        ws: &mut WriteState,
    ) -> Result<crate::durability::checkpoint::CheckpointWrites> {
        count_space_checkpoint(ws);
        self.prepare_checkpoint(ws, false)
    }

    /// Cleans one section: picks the victim, moves its valid blocks. `None` when no section
    /// is worth cleaning, or when the best one's copies and the nodes they newly dirty would
    /// not fit in `budget` blocks.
    pub(crate) fn clean_one(
        &self,
        ws: &mut WriteState,
        caller: Caller,
        budget: u64,
    ) -> Result<Option<Cleaned>> {
        let v = self.vol();
        if ws.segs.is_read_only_layout() {
            // No SSA to find the owners by: nothing is cleaned.
            return Ok(None);
        }
        // A checkpoint being written still owns its nodes' new addresses: let it land first.
        crate::durability::checkpoint::settle(v, ws)?;
        let opts = v.options;
        // Free sections, beyond what a change keeps back, at or below which node sections
        // lose their penalty (the seed's `require_node_gc`); they regain it at twice as many.
        let bps = u64::from(ws.segs.blocks_per_section());
        let free_secs = ws.segs.writable_blocks() / bps;
        let kept = change_reserve(bps, ws.segs.section_count(), v.options.data_temp) / bps;
        if free_secs <= kept + u64::from(NODE_GC_SECTIONS) {
            ws.gc.require_node_gc = true;
        } else if free_secs >= kept + u64::from(2 * NODE_GC_SECTIONS) {
            ws.gc.require_node_gc = false;
        }
        let started = std::time::Instant::now();
        let data_first = opts.gc_node_penalty && !ws.gc.require_node_gc;
        let picked = match opts.gc_window {
            0 => ws.segs.victim(opts.gc_policy, data_first, None),
            n => ws.segs.victim_in_window(opts.gc_policy, data_first, n),
        };
        let Some((sec, kind)) = picked else {
            return Ok(None);
        };
        if u64::from(ws.segs.section_valid(sec)) > budget {
            return Ok(None);
        }
        let mut budget = budget;
        let mut moved = 0u64;
        let mut whole = true;
        for segno in ws.segs.section_segments(sec) {
            let offs = ws.segs.valid_offsets(segno);
            if offs.is_empty() {
                continue;
            }
            let sums = ws.segs.summary_of(segno, |s| v.read_ssa(s))?;
            let r = match kind {
                VictimKind::Data => self.move_data(ws, segno, &offs, &sums, &mut budget)?,
                VictimKind::Node => self.move_nodes(ws, segno, &offs, &sums, &mut budget)?,
            };
            match r {
                Some(n) => moved += n,
                None if moved == 0 => return Ok(None),
                None => {
                    // Out of room part-way through a section of several segments: what
                    // moved stays moved; the rest waits for the next pass.
                    whole = false;
                    break;
                }
            }
        }
        let st = &mut ws.gc.stats;
        st.longest_section_us = st
            .longest_section_us
            .max(started.elapsed().as_micros() as u64);
        match caller {
            Caller::Foreground => st.foreground_runs += 1,
            Caller::Background => st.background_runs += 1,
            Caller::Request => st.requested_runs += 1,
        }
        match kind {
            VictimKind::Data => st.data_victims += 1,
            VictimKind::Node => st.node_victims += 1,
        }
        if whole && ws.segs.section_valid(sec) > 0 {
            // Data left behind could not be moved (stale summaries); node blocks leave only
            // when the next checkpoint writes their nodes elsewhere. Either way, do not pick
            // the section again until one of its blocks changes.
            ws.segs.set_unmovable(sec);
        }
        if kind == VictimKind::Node {
            ws.gc.nodes_moving = true;
        }
        Ok(Some(Cleaned {
            section: sec,
            moved,
        }))
    }

    /// Moves the valid data blocks at `offs` of segment `segno` to the cold data log, if the
    /// copies and the nodes they newly dirty fit in `budget` (which they then use up);
    /// `None`, with nothing changed, if not.
    fn move_data(
        &self,
        ws: &mut WriteState,
        segno: u32,
        offs: &[usize],
        sums: &[RawSummary],
        budget: &mut u64,
    ) -> Result<Option<u64>> {
        let v = self.vol();
        let dev = &*v.dev;
        let base = ws.segs.seg_start(segno);
        // 1. The owners, checked.
        let mut editing: HashMap<u32, Editing> = HashMap::new();
        let mut owned: Vec<Owned> = Vec::new();
        for &off in offs {
            let addr = base + off as u32;
            let Some(sum) = sums.get(off).copied() else {
                continue;
            };
            match self.owner_of(&mut editing, addr, &sum)? {
                Some(ino) => owned.push(Owned { addr, sum, ino }),
                None => {
                    ws.gc.stats.stale_summaries += 1;
                    tracing::warn!(
                        "cleaner: block {addr} (segment {segno}) is valid but its summary (nid {}, offset {}) does not point at it; left in place",
                        sum.nid.get(),
                        sum.ofs_in_node.get()
                    );
                }
            }
        }
        if owned.is_empty() {
            return Ok(Some(0));
        }
        let nodes: std::collections::BTreeSet<u32> = owned
            .iter()
            .map(|o| o.sum.nid.get())
            .filter(|&nid| !v.nodes.is_dirty(nid))
            .collect();
        let need = owned.len() as u64 + nodes.len() as u64;
        if need > *budget {
            return Ok(None);
        }
        *budget -= need;
        // 2. Read in runs, write to the cold data log, before anything points at the copies.
        let mut old = vec![0u8; BLOCKS_PER_SEG as usize * BLOCK_SIZE];
        let lo = owned.iter().map(|o| o.addr).min().unwrap_or(base);
        let hi = owned.iter().map(|o| o.addr).max().unwrap_or(base);
        let span = (hi - lo + 1) as usize;
        if let Some(buf) = old.get_mut(..span * BLOCK_SIZE) {
            v.read_data(u64::from(lo), buf, "data block the cleaner moves")?;
        }
        let mut copies: BTreeMap<u32, Block> = BTreeMap::new();
        let mut moves: Vec<(Owned, u32)> = Vec::with_capacity(owned.len());
        // A hot section's blocks outlived the hot log: to the warm one (`data_temp=age`).
        let dest = if v.options.data_temp == crate::space::DataTemp::Age
            && ws.segs.seg_log(segno) == Some(Log::HotData)
        {
            Log::WarmData
        } else {
            Log::ColdData
        };
        for o in owned {
            let at = (o.addr - lo) as usize * BLOCK_SIZE;
            let mut b = [0u8; BLOCK_SIZE];
            if let Some(src) = old.get(at..at + BLOCK_SIZE) {
                b.copy_from_slice(src);
            }
            let new = ws.segs.alloc(dest, o.sum, &mut |s| v.read_ssa(s))?;
            copies.insert(new, b);
            moves.push((o, new));
        }
        write_runs(dev, &copies, IoCause::GcData)?;
        ws.sync.data_since_flush = true;
        // 3. Link the copies; the old blocks go.
        let mut inodes_changed: Vec<u32> = Vec::new();
        for (o, new) in &moves {
            let nid = o.sum.nid.get();
            let ofs = usize::from(o.sum.ofs_in_node.get());
            let Some(e) = editing.get_mut(&o.ino) else {
                continue;
            };
            ws.sync.relinked.insert(o.ino);
            // The inode's extent hint must not name the old block any more: a changed hint
            // is one more reason to write the inode.
            if e.drop_from_extent(o.addr) && !inodes_changed.contains(&o.ino) {
                inodes_changed.push(o.ino);
            }
            if nid == o.ino {
                let at = e.addr_slot(ofs);
                e.set_u32(at, *new);
                if !inodes_changed.contains(&o.ino) {
                    inodes_changed.push(o.ino);
                }
            } else {
                let is_dir = e.inode.file_type == FileType::Directory;
                let (mut b, log) = self.node_for_edit(nid, o.ino, is_dir)?;
                if let Some(slot) = b.get_mut(ofs * 4..ofs * 4 + 4) {
                    slot.copy_from_slice(&new.to_le_bytes());
                }
                v.nodes.put_dirty_gc(nid, b, log)?;
            }
            ws.segs.invalidate(o.addr);
        }
        for ino in inodes_changed {
            if let Some(mut e) = editing.remove(&ino) {
                fix_checksum(self, &mut e.block);
                let log = if e.inode.file_type == FileType::Directory {
                    Log::HotNode
                } else {
                    Log::WarmNode
                };
                v.nodes.put_dirty_gc(ino, e.block, log)?;
                v.forget_inode(ino);
            }
        }
        let n = moves.len() as u64;
        ws.gc.stats.data_blocks_moved += n;
        Ok(Some(n))
    }

    /// The inode owning data block `addr` if the slot its summary names points at it (the
    /// inode is opened for editing in `editing`); `None` for a stale summary.
    fn owner_of(
        &self,
        editing: &mut HashMap<u32, Editing>,
        addr: u32,
        sum: &RawSummary,
    ) -> Result<Option<u32>> {
        let v = self.vol();
        let nid = sum.nid.get();
        let ofs = usize::from(sum.ofs_in_node.get());
        // A node made since the last checkpoint has no address yet (NEW_ADDR): it lives in
        // the dirty map, and its data is as movable as any (the files a fill made after its
        // last checkpoint were once all counted stale here).
        let Ok(ne) = v.nat.entry(&*v.dev, nid) else {
            return Ok(None);
        };
        let placed = v.layout.in_main(ne.block_addr)
            || (ne.block_addr == uf2fs_format::NEW_ADDR && v.nodes.is_dirty(nid));
        if !placed || ne.version != sum.version {
            return Ok(None);
        }
        let ino = ne.ino;
        if let std::collections::hash_map::Entry::Vacant(slot) = editing.entry(ino) {
            match self.edit(ino) {
                Ok(e) => {
                    slot.insert(e);
                }
                Err(Error::Corrupt(_)) => return Ok(None),
                Err(e) => return Err(e),
            }
        }
        let Some(e) = editing.get(&ino) else {
            return Ok(None);
        };
        let cur = if nid == ino {
            if ofs >= e.inode.addr_slots() {
                return Ok(None);
            }
            get32(&e.block, e.addr_slot(ofs))
        } else {
            let is_dir = e.inode.file_type == FileType::Directory;
            let Ok((b, _)) = self.node_for_edit(nid, ino, is_dir) else {
                return Ok(None);
            };
            let f = Footer::of(&b);
            if is_indirect(u64::from(f.ofs())) || ofs as u64 >= uf2fs_format::node::ADDRS_PER_BLOCK
            {
                return Ok(None);
            }
            entry(&b, ofs as u64)
        };
        Ok((cur == addr).then_some(ino))
    }

    /// Marks the live nodes among the valid blocks of node segment `segno` dirty, so that the
    /// next checkpoint moves them, if they fit in `budget`; `None` if not.
    fn move_nodes(
        &self,
        ws: &mut WriteState,
        segno: u32,
        offs: &[usize],
        sums: &[RawSummary],
        budget: &mut u64,
    ) -> Result<Option<u64>> {
        let v = self.vol();
        let dev = &*v.dev;
        let base = ws.segs.seg_start(segno);
        let log = ws.segs.seg_log(segno).unwrap_or(Log::WarmNode);
        if offs.len() as u64 > *budget {
            return Ok(None);
        }
        *budget -= offs.len() as u64;
        let mut moved = 0;
        for &off in offs {
            let addr = base + off as u32;
            let nid = sums.get(off).map(|s| s.nid.get()).unwrap_or(0);
            let live = match v.nat.lookup(dev, nid) {
                Ok(Some(ne)) if ne.block_addr == addr => Some(ne),
                _ => None,
            };
            let Some(ne) = live else {
                ws.gc.stats.stale_summaries += 1;
                tracing::warn!(
                    "cleaner: node block {addr} (segment {segno}) is valid but nid {nid} is not there; left in place"
                );
                continue;
            };
            let (b, dirty_log) = match v.nodes.get_for_edit(dev, &v.nat, nid, ne.ino) {
                Ok(r) => r,
                Err(Error::Corrupt(e)) => {
                    // A node whose footer disagrees with its NAT entry: not ours to move.
                    ws.gc.stats.stale_summaries += 1;
                    tracing::warn!("cleaner: node block {addr} (nid {nid}) left in place: {e}");
                    continue;
                }
                Err(e) => return Err(e),
            };
            if dirty_log.is_some() {
                // Already changed: the next checkpoint moves it anyway.
                continue;
            }
            v.nodes.put_dirty_gc(nid, b, log)?;
            moved += 1;
        }
        ws.gc.stats.node_blocks_moved += moved;
        Ok(Some(moved))
    }

    /// One step of the background cleaner: cleans a section, or writes the checkpoint that
    /// frees what was cleaned, when free space is below the high-water mark (`batch`
    /// sections beyond a change's reserve). It yields to requests (takes the write lock only
    /// if no change holds it) unless changes have had to clean for themselves since it last
    /// caught up: then it queues for the lock like them. Returns whether it did anything.
    pub fn background_gc_step(&self) -> Result<bool> {
        let v = self.vol();
        let Some(lock) = v.write.as_ref() else {
            return Ok(false);
        };
        if v.options.background_gc == crate::vol::BackgroundGc::Off {
            return Ok(false);
        }
        v.pacer.mark_running();
        if v.pacer.take_wanted() {
            // Changes cleaned and go on; the checkpoint that frees it is this thread's. The
            // device's cache is flushed first, with no lock held: the checkpoint's own
            // flushes then have only what was written since (on a loop device the host
            // writes back what the image file holds dirty; 170 ms was seen otherwise).
            v.dev
                .flush()
                .map_err(|e| Error::io("flush before a checkpoint", e))?;
            let ws = lock
                .lock()
                .map_err(|_| Error::InvalidArgument("internal lock poisoned"))?;
            return self.checkpoint_without_lock(ws);
        }
        let urgent = &v.gc_urgent;
        let mut ws = match lock.try_lock() {
            Ok(ws) => ws,
            Err(std::sync::TryLockError::WouldBlock)
                if urgent.load(std::sync::atomic::Ordering::Relaxed) =>
            {
                lock.lock()
                    .map_err(|_| Error::InvalidArgument("internal lock poisoned"))?
            }
            Err(std::sync::TryLockError::WouldBlock) => return Ok(false),
            Err(std::sync::TryLockError::Poisoned(_)) => {
                return Err(Error::InvalidArgument("internal lock poisoned"))
            }
        };
        if ws.failed.is_some() || ws.cp.pending.is_some() {
            return Ok(false);
        }
        let bps = u64::from(ws.segs.blocks_per_section());
        let sections = ws.segs.section_count();
        // The change reserve with its checkpoint part counted per node log (`ckpt_need`).
        let ckpt = ckpt_need(v, &ws, bps);
        let temp = v.options.data_temp;
        let reserve = change_reserve(bps, sections, temp) - cp_room(bps) + ckpt
            - prefree_credit(&ws, bps)
            - log_room_credit(&ws, 1, bps, temp);
        let high = reserve + bps * batch(sections);
        let writable = ws.segs.writable_blocks();
        let prefree = ws.segs.prefree_segments() * u64::from(BLOCKS_PER_SEG);
        let after_checkpoint = writable + prefree;
        let budget = clean_budget(writable, ckpt, bps);
        // With holes enough for a batch of rewrites (`mode=adaptive`), data needs no cleaning:
        // clean only if the node logs are short of free sections.
        let holes_enough = ws
            .segs
            .slack_room(writable)
            .is_some_and(|(usable, held)| usable + held >= bps * batch(sections));
        let low = if holes_enough { reserve } else { high };
        let cleaned = if after_checkpoint < low {
            self.clean_one(&mut ws, Caller::Background, budget)
        } else {
            urgent.store(false, std::sync::atomic::Ordering::Relaxed);
            Ok(None)
        };
        // Prefree segments are worth a checkpoint only while free space is within a batch of
        // the high-water mark. With more free, the next checkpoint for any other reason frees
        // them: `rm -rf` of a 10 000-file tree on a roomy volume wrote 79 checkpoints (158
        // flushes, each taking the write lock) for segments nobody needed.
        let short = writable < high + bps * batch(sections);
        let r = if !matches!(cleaned, Ok(None)) {
            cleaned.map(|c| c.is_some())
        } else if ws.gc.nodes_moving
            || (short
                && (prefree >= bps * batch(sections)
                    || (prefree > 0 && !v.pacer.stepping(std::time::Duration::from_secs(1)))))
        {
            // Enough cleaned ahead, or no room to clean more before what was cleaned is free.
            // While changes step, they ask for the checkpoint once theirs make a batch. The
            // next step writes it, after a flush without the lock.
            drop(ws);
            v.pacer.want_checkpoint();
            return Ok(true);
        } else {
            Ok(false)
        };
        if let Err(e) = &r {
            if matches!(e, Error::Io { .. } | Error::Corrupt(_) | Error::NoSpace) {
                ws.failed = Some(format!("cleaner: {e}"));
            }
        }
        r
    }

    /// The checkpoint that turns what was cleaned free, prepared under the write lock (`ws`)
    /// and written without it, so that changes go on meanwhile. Whether it wrote one.
    fn checkpoint_without_lock(
        &self,
        mut ws: std::sync::MutexGuard<'_, WriteState>,
    ) -> Result<bool> {
        let bps = u64::from(ws.segs.blocks_per_section());
        let freeable = ws.segs.prefree_segments() > 0 || ws.gc.nodes_moving;
        if ws.failed.is_some()
            || ws.cp.pending.is_some()
            || !freeable
            || ckpt_need(self.vol(), &ws, bps) > ws.segs.writable_blocks()
        {
            return Ok(false);
        }
        let writes = self.prepare_space_checkpoint(&mut ws)?;
        drop(ws);
        self.write_prepared(writes)?;
        Ok(true)
    }

    /// What the background thread sleeps on between steps: it wakes when a change asks it
    /// for a checkpoint. Held apart from the volume, so that a sleeping thread does not keep
    /// the volume alive (the daemon closes the image at unmount once it holds the last
    /// reference).
    pub fn background_gc_waiter(&self) -> crate::Waiter {
        crate::Waiter(self.vol().pacer.handoff())
    }

    /// Cleans up to `sections` sections now (or until no victim is left), then writes a
    /// checkpoint so that what was cleaned is free. Returns the sections cleaned.
    pub fn gc(&self, sections: u32) -> Result<u32> {
        let v = self.vol();
        let mut done = 0;
        if self.ws()?.segs.is_read_only_layout() {
            return Err(Error::Unsupported(
                "the image has the read-only layout (ro feature): it has no SSA and is never \
                 cleaned"
                    .into(),
            ));
        }
        while done < sections {
            let mut ws = self.ws_settled()?;
            let bps = u64::from(ws.segs.blocks_per_section());
            let budget = clean_budget(ws.segs.writable_blocks(), ckpt_need(v, &ws, bps), bps);
            let r = self.clean_one(&mut ws, Caller::Request, budget);
            match r {
                Ok(Some(_)) => done += 1,
                Ok(None) => break,
                Err(e) => {
                    if matches!(e, Error::Io { .. } | Error::Corrupt(_)) {
                        ws.failed = Some(format!("cleaner: {e}"));
                    }
                    return Err(e);
                }
            }
        }
        self.sync()?;
        Ok(done)
    }
}

/// A checkpoint written to turn prefree segments free, in the counters.
fn count_space_checkpoint(ws: &mut WriteState) {
    ws.cp.requests += 1;
    ws.gc.stats.checkpoints_for_space += 1;
}

/// Room for a change of `blocks` blocks in the read-only layout, which nothing cleans: the
/// hot data log takes them (nodes the change dirties are counted there too, to be safe), the
/// hot node log takes the `dirty` nodes the next checkpoint writes and a few of the change's
/// own; each log needs whole sections for what its segment cannot hold.
fn read_only_room(ws: &WriteState, blocks: u64, dirty: u64) -> Result<()> {
    let bps = u64::from(ws.segs.blocks_per_section()).max(1);
    let data = blocks.saturating_sub(ws.segs.log_room(Log::HotData));
    let nodes = (dirty + 8).saturating_sub(ws.segs.log_room(Log::HotNode));
    let sections = data.div_ceil(bps) + nodes.div_ceil(bps);
    if sections * bps <= ws.segs.writable_blocks() {
        Ok(())
    } else {
        Err(Error::NoSpace)
    }
}

/// Sections the background cleaner cleans ahead before the checkpoint that frees them: at
/// least four, one per 128 sections. Each checkpoint after cleaning rewrites the direct
/// nodes the moves touched (up to every direct node of the files moved), so more sections
/// per checkpoint cost fewer node writes each; but every section held free raises the
/// utilisation of the others, and so what each cleaning moves. On the 2 GiB seed 000 run
/// (docs/design.md) one per 128 gave WAF 6.29, one per 64 6.34, one per 32 6.52.
fn batch(sections: u32) -> u64 {
    u64::from(sections / 128).max(4)
}

/// What a change leaves free beyond its own blocks and the dirty nodes: room for the
/// checkpoint's node logs, a section for its own log and the cold log's, and for half a
/// batch of cleaning (near full, a checkpoint after a single cleaned section writes more
/// nodes than the section frees: the cleaner must be able to clean several first). With
/// `data_temp=age` a change's data may go to two logs (hot and warm), each of which may need
/// a new section: one more. The space checks let prefree sections stand in for the half batch
/// (`prefree_credit`), and the room left in the hot and warm logs' segments for their
/// sections (`log_room_credit`).
fn change_reserve(bps: u64, sections: u32, temp: crate::space::DataTemp) -> u64 {
    let logs = match temp {
        crate::space::DataTemp::Age => 3,
        crate::space::DataTemp::Off => 2,
    };
    cp_room(bps) + bps * (logs + batch(sections) / 2)
}

/// What the room left in the data logs' segments stands in for in a change's reserve: the
/// section `change_reserve` keeps for each log a change's data may go to (dentry blocks to the
/// hot log, file data to the warm one, and under `data_temp=age` rewrites to either) is not
/// needed while both logs have room for all of the change's blocks; one of them short
/// takes back one section. (The cold log's section, for the cleaner's copies, stays.)
fn log_room_credit(ws: &WriteState, blocks: u64, bps: u64, temp: crate::space::DataTemp) -> u64 {
    let own: u64 = match temp {
        crate::space::DataTemp::Age => 2,
        crate::space::DataTemp::Off => 1,
    };
    let short = [Log::HotData, Log::WarmData]
        .into_iter()
        .filter(|&log| ws.segs.log_room(log) < blocks.max(1))
        .count() as u64;
    bps * own.saturating_sub(short)
}

/// Free blocks below which data logs fill the holes of used data segments in
/// `mode=adaptive`: a little above the background cleaner's high-water mark, so that holes
/// serve rewrites before the cleaner has to move anything for them.
pub(crate) fn slack_threshold(bps: u64, sections: u32, temp: crate::space::DataTemp) -> u64 {
    change_reserve(bps, sections, temp) + bps * (batch(sections) + 4)
}

/// Free sections beyond the change reserve at or below which node sections lose their
/// penalty (the seed's `require_node_gc`); they regain it at twice as many.
pub(crate) const NODE_GC_SECTIONS: u32 = 4;

impl Policy {
    /// The policies, by the name `-o gc_policy=` takes.
    pub fn parse(s: &str) -> Option<Policy> {
        [Policy::Greedy, Policy::CostBenefit, Policy::AgeThreshold]
            .into_iter()
            .find(|p| p.name() == s)
    }
}
