//! Sections, the cleaner's unit: how many valid blocks each holds, how old its data is, and
//! which ones are victims the cleaner may pick.
//!
//! A section is a candidate when it holds some valid blocks but is not full, none of its
//! segments is a log's current segment, and recovery does not hold it. Candidates live in the
//! victim index (`crate::victim`), which finds the best one under each policy without a scan.
//!
//! Age is counted on an allocation clock (blocks allocated since mount), finer than the SIT's
//! seconds: a section's age stamp is the clock when a block was last written into it.
//! Sections found in use at mount get stamps below every new one, in the order of their SIT
//! mtimes, so that cost-benefit still sees the oldest data as oldest.

use crate::victim::{Atgc, Kind, PickOptions, VictimIndex};

/// How the cleaner chooses its victim (`-o gc_policy=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Policy {
    /// The fewest valid blocks.
    Greedy,
    /// The most free space gained per block moved, weighted by age (LFS's cost-benefit).
    CostBenefit,
    /// Among sections older than a threshold, the fewest valid blocks (the kernel's ATGC).
    AgeThreshold,
}

impl Policy {
    pub fn name(self) -> &'static str {
        match self {
            Policy::Greedy => "greedy",
            Policy::CostBenefit => "cost-benefit",
            Policy::AgeThreshold => "age-threshold",
        }
    }
}

/// Whether a victim holds data or node blocks.
pub(crate) type VictimKind = Kind;

pub(crate) struct Sections {
    valid: Vec<u32>,
    stamp: Vec<u64>,
    clock: u64,
    /// Valid blocks in all sections.
    total: u64,
    index: VictimIndex,
    /// Index moves not made yet, by section: its candidacy as last asked (`Some(None)`: out).
    /// A section's state moves with every block written into it or invalidated (`rm -rf`
    /// moves the same few sections tens of thousands of times, and each move was a tenth of
    /// an unlink's work), while the index is read only when a victim is picked: so a move is
    /// noted here, and each section's last one is made when the index is next read
    /// ([`Sections::settle`]). What is read is what eager moves would have left.
    pending: Vec<Option<Option<Kind>>>,
    /// The sections with a pending move, each once.
    queued: Vec<u32>,
    blocks_per_section: u32,
}

impl Sections {
    pub fn new(main_segments: u32, segs_per_sec: u32) -> crate::error::Result<Sections> {
        let n = main_segments / segs_per_sec.max(1);
        let cap = segs_per_sec.max(1) * uf2fs_format::BLOCKS_PER_SEG;
        Ok(Sections {
            valid: vec![0; n as usize],
            stamp: vec![0; n as usize],
            clock: 0,
            total: 0,
            index: VictimIndex::new(n, cap).map_err(|e| {
                crate::error::Error::Unsupported(format!("sections of this size: {e}"))
            })?,
            pending: vec![None; n as usize],
            queued: Vec::new(),
            blocks_per_section: cap,
        })
    }

    pub fn count(&self) -> u32 {
        self.valid.len() as u32
    }

    pub fn blocks_per_section(&self) -> u32 {
        self.blocks_per_section
    }

    pub fn valid(&self, sec: u32) -> u32 {
        self.valid.get(sec as usize).copied().unwrap_or(0)
    }

    /// Sets what mount found: valid blocks and an age stamp (the caller orders them).
    pub fn load(&mut self, sec: u32, valid: u32, stamp: u64) {
        if let Some(v) = self.valid.get_mut(sec as usize) {
            self.total = self.total.saturating_sub(u64::from(*v)) + u64::from(valid);
            *v = valid;
        }
        if let Some(s) = self.stamp.get_mut(sec as usize) {
            *s = stamp;
        }
        self.clock = self.clock.max(stamp + 1);
    }

    /// A block of `sec` became valid (written now): it counts, and the section's age
    /// stamp is the clock's, which then moves on.
    pub fn added(&mut self, sec: u32) {
        if let Some(v) = self.valid.get_mut(sec as usize) {
            *v += 1;
            self.total += 1;
        }
        if let Some(s) = self.stamp.get_mut(sec as usize) {
            *s = self.clock;
        }
        self.clock += 1;
    }

    /// Section `sec`'s age stamp: the allocation clock when a block was last written into it.
    pub fn stamp(&self, sec: u32) -> Option<u64> {
        self.stamp.get(sec as usize).copied()
    }

    /// Valid blocks in all sections.
    pub fn valid_total(&self) -> u64 {
        self.total
    }

    /// The allocation clock: blocks written since mount, above the stamps mount gave.
    pub fn clock(&self) -> u64 {
        self.clock
    }

    pub fn removed(&mut self, sec: u32) {
        if let Some(v) = self.valid.get_mut(sec as usize) {
            if *v > 0 {
                *v -= 1;
                self.total -= 1;
            }
        }
    }

    /// Puts `sec` in the victim index as `kind`, or takes it out (`None`), when the index is
    /// next read (see `pending`).
    pub fn set_candidate(&mut self, sec: u32, kind: Option<Kind>) {
        if let Some(p) = self.pending.get_mut(sec as usize) {
            if p.is_none() {
                self.queued.push(sec);
            }
            *p = Some(kind);
        }
    }

    /// Makes the index moves still pending, with each section's count and stamp as they are
    /// now (every change to those asked for a move after it).
    fn settle(&mut self) {
        for sec in std::mem::take(&mut self.queued) {
            if let Some(kind) = self.pending.get_mut(sec as usize).and_then(Option::take) {
                self.index_now(sec, kind);
            }
        }
    }

    fn index_now(&mut self, sec: u32, kind: Option<Kind>) {
        match kind {
            Some(k) => {
                let (v, s) = (self.valid(sec), self.stamp.get(sec as usize).copied());
                // Out of range only for a section or count the index was not made for, which
                // the callers' own bounds rule out: the section then just is not a candidate.
                if self.index.set(sec, k, v, s.unwrap_or(0)).is_err() {
                    self.index.remove(sec);
                }
            }
            None => {
                self.index.remove(sec);
            }
        }
    }

    /// The kind section `sec` is indexed as, if it is a candidate.
    pub fn kind(&mut self, sec: u32) -> Option<Kind> {
        self.settle();
        self.index.get(sec).map(|e| e.kind)
    }

    pub fn candidates(&mut self) -> usize {
        self.settle();
        self.index.len()
    }

    /// What cleaning `sec` costs under `policy` as a windowed search ranks it (lower is
    /// better): greedy, its valid blocks; cost-benefit and age-threshold, LFS's
    /// benefit-to-cost ratio `(1 - u) * age / (1 + u)`, negated. `penalised` adds a whole
    /// section's worth (seed 000's node penalty).
    pub fn cost(&self, sec: u32, policy: Policy, penalised: bool) -> f64 {
        let cap = f64::from(self.blocks_per_section);
        let valid = f64::from(self.valid(sec)) + if penalised { cap } else { 0.0 };
        match policy {
            Policy::Greedy => valid,
            Policy::CostBenefit | Policy::AgeThreshold => {
                let age = self
                    .clock
                    .saturating_sub(self.stamp.get(sec as usize).copied().unwrap_or(0))
                    as f64;
                let u = valid / cap;
                -((1.0 - u) * age / (1.0 + u))
            }
        }
    }

    /// The best victim under `policy`; with `data_first`, node sections come after data
    /// ones (greedy: they weigh one section more).
    pub fn pick(&mut self, policy: Policy, data_first: bool, only: Option<Kind>) -> Option<u32> {
        self.settle();
        let policy = match policy {
            Policy::Greedy => crate::victim::Policy::Greedy,
            Policy::CostBenefit => crate::victim::Policy::CostBenefit,
            // Old enough: written before the last tenth of what the clock has counted
            // (the kernel's default threshold is 7 days of a volume's life).
            Policy::AgeThreshold => crate::victim::Policy::AgeThreshold(Atgc::new(self.clock / 10)),
        };
        let opts = PickOptions {
            data_first,
            node_gc_required: false,
            only,
        };
        self.index.pick(policy, self.clock, opts)
    }
}
