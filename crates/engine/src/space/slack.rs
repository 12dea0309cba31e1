//! Slack space recycling (SSR, `mode=adaptive`): when free sections run short, a log that
//! needs a new segment takes the holes of a used segment of its kind (data or node) instead of
//! a free one, as Linux does, so that rewrites fill the space earlier rewrites freed without
//! the cleaner moving anything. A node log's holes carry the fsync chain like any of its
//! blocks: each node names the next hole (`Space::next_addr`), and roll-forward recovery
//! follows those addresses.
//!
//! A hole may be written only if nothing durable can still point at it. A block freed since
//! the last checkpoint was prepared may be named by that checkpoint, or by the roll-forward
//! chain of an fsync made since (which names addresses no checkpoint knows), so every block
//! invalidated is *held* until a checkpoint prepared after its invalidation has landed. Two
//! generations do that: `held_new` (invalidated since the last checkpoint was prepared) and
//! `held_old` (invalidated before the pending checkpoint was prepared, released when it
//! lands). This is stricter than the kernel, which reuses a block written and freed between
//! two checkpoints; that block may be in an fsync chain, and a crash would replay the chain's
//! pointer into whatever SSR wrote there.
//!
//! The segments whose holes may be used are kept in a [`VictimIndex`] keyed by their
//! *occupied* blocks (valid or held), data and node segments apart, so that the one with the
//! most usable holes is found exactly and without a scan, and `usable` counts every usable
//! hole the data segments hold, for the room check before a change. (Node holes are not
//! counted there: a checkpoint's nodes are still reckoned in free sections, so the room check
//! stays what it was, and the holes only spare the free sections it keeps.)

use crate::victim::{Kind, PickOptions, Policy, VictimIndex};
use foldhash::{HashMap, HashMapExt};
use uf2fs_format::BLOCKS_PER_SEG;

/// A segment's 512-bit block map, as in its SIT entry.
pub(crate) type Map = [u8; 64];

pub(crate) struct Slack {
    /// Data logs may take holes (`mode=adaptive`).
    on: bool,
    /// Free blocks below which they do.
    below: u64,
    held_new: HashMap<u32, Map>,
    held_old: HashMap<u32, Map>,
    /// Blocks held in both generations.
    held: u64,
    /// Segments with usable holes, keyed by occupied blocks, by kind (only while `on`).
    index: VictimIndex,
    /// Usable holes in the indexed data segments.
    usable: u64,
    /// Segments a log took for their holes, and blocks written into holes, data and node.
    pub taken: Counts,
}

/// Segments taken for their holes and blocks written there, by kind.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Counts {
    pub data_segments: u64,
    pub data_blocks: u64,
    pub node_segments: u64,
    pub node_blocks: u64,
}

impl Counts {
    pub fn segment(&mut self, kind: Kind) {
        match kind {
            Kind::Data => self.data_segments += 1,
            Kind::Node => self.node_segments += 1,
        }
    }

    pub fn block(&mut self, kind: Kind) {
        match kind {
            Kind::Data => self.data_blocks += 1,
            Kind::Node => self.node_blocks += 1,
        }
    }
}

fn test(map: &Map, off: usize) -> bool {
    map.get(off / 8)
        .is_some_and(|b| b & (0x80 >> (off % 8)) != 0)
}

impl Slack {
    pub fn new(main_segments: u32) -> crate::error::Result<Slack> {
        Ok(Slack {
            on: false,
            below: 0,
            held_new: HashMap::new(),
            held_old: HashMap::new(),
            held: 0,
            index: VictimIndex::new(main_segments, BLOCKS_PER_SEG)
                .map_err(|e| crate::error::Error::Unsupported(format!("slack space index: {e}")))?,
            usable: 0,
            taken: Counts::default(),
        })
    }

    pub fn is_on(&self) -> bool {
        self.on
    }

    /// Turns hole filling on (below `below` free blocks) or off. The caller re-offers every
    /// segment afterwards (`offer`); off, the index is emptied here.
    pub fn set(&mut self, on: bool, below: u64) {
        self.on = on;
        self.below = below;
        if !on {
            for seg in 0..self.index.sections() {
                self.offer(seg, Kind::Data, None);
            }
        }
    }

    /// The free blocks below which logs take holes, while hole filling is on.
    pub fn below(&self) -> Option<u64> {
        self.on.then_some(self.below)
    }

    /// Whether a log short of a segment should take holes, with `writable` free blocks.
    pub fn wanted(&self, writable: u64) -> bool {
        self.on && writable < self.below
    }

    /// Block `off` of `segno` was invalidated: held until a checkpoint prepared from now on
    /// has landed.
    pub fn hold(&mut self, segno: u32, off: usize) {
        let m = self.held_new.entry(segno).or_insert([0; 64]);
        if let Some(b) = m.get_mut(off / 8) {
            let bit = 0x80 >> (off % 8);
            if *b & bit == 0 {
                *b |= bit;
                self.held += 1;
            }
        }
    }

    /// Whether block `off` of `segno` is held.
    pub fn is_held(&self, segno: u32, off: usize) -> bool {
        [&self.held_new, &self.held_old]
            .into_iter()
            .any(|g| g.get(&segno).is_some_and(|m| test(m, off)))
    }

    /// How many blocks of `segno` are valid in `valid` or held.
    pub fn occupied(&self, segno: u32, valid: &Map) -> u32 {
        // Counted a word at a time: every block a change frees asks (stop 42).
        const NONE: Map = [0; 64];
        let new = self.held_new.get(&segno).unwrap_or(&NONE);
        let old = self.held_old.get(&segno).unwrap_or(&NONE);
        let word = |c: &[u8]| u64::from_ne_bytes(c.try_into().unwrap_or([0; 8]));
        valid
            .chunks_exact(8)
            .zip(new.chunks_exact(8))
            .zip(old.chunks_exact(8))
            .map(|((v, n), o)| (word(v) | word(n) | word(o)).count_ones())
            .sum()
    }

    /// A checkpoint is being prepared: what is held now is released when it lands.
    pub fn checkpoint_prepared(&mut self) {
        for (seg, m) in std::mem::take(&mut self.held_new) {
            let old = self.held_old.entry(seg).or_insert([0; 64]);
            for (o, n) in old.iter_mut().zip(m) {
                *o |= n;
            }
        }
    }

    /// The checkpoint prepared last has landed: its held blocks are free to reuse. Returns
    /// the segments whose occupancy fell.
    pub fn checkpoint_landed(&mut self) -> Vec<u32> {
        let old = std::mem::take(&mut self.held_old);
        let released: u64 = old
            .values()
            .map(|m| m.iter().map(|b| u64::from(b.count_ones())).sum::<u64>())
            .sum();
        self.held = self.held.saturating_sub(released);
        old.into_keys().collect()
    }

    /// Offers `segno`, a segment of `kind`, for hole filling with `occupied` blocks, or
    /// withdraws it (`None`).
    pub fn offer(&mut self, segno: u32, kind: Kind, occupied: Option<u32>) {
        let occupied = occupied.filter(|&o| self.on && o < BLOCKS_PER_SEG);
        let before = self.index.get(segno).map(|e| (e.kind, e.valid));
        if before == occupied.map(|o| (kind, o)) {
            return;
        }
        if let Some((Kind::Data, o)) = before {
            self.usable -= u64::from(BLOCKS_PER_SEG - o);
        }
        match occupied {
            Some(o) if self.index.set(segno, kind, o, 0).is_ok() => {
                if kind == Kind::Data {
                    self.usable += u64::from(BLOCKS_PER_SEG - o);
                }
            }
            _ => {
                self.index.remove(segno);
            }
        }
    }

    /// The segment of `kind` with the most usable holes.
    pub fn pick(&self, kind: Kind) -> Option<u32> {
        let opts = PickOptions {
            data_first: false,
            node_gc_required: false,
            only: Some(kind),
        };
        self.index.pick(Policy::Greedy, 0, opts)
    }

    /// Usable holes in data segments a data log may take (the logs' own excluded).
    pub fn usable(&self) -> u64 {
        self.usable
    }

    /// Blocks held until the next checkpoint lands.
    pub fn held(&self) -> u64 {
        self.held
    }
}
