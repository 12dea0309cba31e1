//! The cleaner's victim index: the sections the cleaner may pick, kept ordered so that the
//! best victim under a policy is found exactly, with no search window and no scan of the
//! sections.
//!
//! This module is self-contained (std only): the cleaner feeds it from the SIT, the bench
//! crate measures it, and nothing here reads the disk.
//!
//! # What it holds
//!
//! One entry per candidate section: its [`Kind`] (data or node), its valid block count
//! (`0..=blocks_per_section`) and an age stamp `mtime` from a clock the caller supplies.
//! The clock must be finer than the checkpoint (cost-benefit ranks sections by age, and
//! every section written between two checkpoints would otherwise look equally old); the
//! number of blocks written so far is the intended clock. Larger stamps are newer.
//!
//! The index holds only sections that may be picked. Exclusion is the caller's, by
//! [`VictimIndex::remove`]: the open log sections, the section being cleaned and pinned
//! sections are taken out and put back with [`VictimIndex::set`] when they may be picked
//! again. Every update is O(log n), so this costs less than filtering at each pick would,
//! and it keeps every pick exact (a filter would need the second-best of every bucket).
//!
//! # Layout and invariants
//!
//! For each kind a *shelf* holds `blocks_per_section + 1` buckets, one per valid count;
//! a bucket is an ordered set of keys `(mtime, section)`, so its first key is its oldest
//! section (the lower section number first among equal stamps). Over the buckets of a
//! shelf sits a tournament tree: leaf `v` holds the first key of bucket `v` (or `EMPTY`),
//! each inner node the older of its two children. Hence:
//!
//! - a section is in the index iff `slots[sec]` is `Some(e)`, and then its key
//!   `(e.mtime, sec)` is in bucket `e.valid` of shelf `e.kind` and in no other bucket;
//! - `len` is the number of `Some` slots;
//! - every tree node holds the smallest key of the buckets under it and that section's
//!   valid count, the root the oldest section of the kind, and `head_mtimes[v]` is leaf
//!   `v`'s stamp as `f64` (infinity when empty); `check_invariants` checks all of this in
//!   the tests after every step.
//!
//! Memory is O(n + blocks_per_section); an update costs O(log n) for the bucket and
//! O(log blocks_per_section) for the tree.
//!
//! # Policies: the exact rules
//!
//! In every rule `age = now - mtime` (0 when the stamp is newer than `now`), `cap` is
//! `blocks_per_section`, ties go to the older section and then to the lower section
//! number. See [`Policy`] for the formulas and how they differ from the kernel's.
//!
//! - Greedy: least `valid`, plus the node penalty for node sections. The first non-empty
//!   bucket of each kind, found by descending its tree: O(log cap).
//! - Cost-benefit and age-threshold: both scores grow with age and shrink with `valid`, so
//!   within a bucket the oldest section scores highest, and the first key under a tree
//!   node, scored as if it held the node's lowest valid count, bounds every section under
//!   that node. The pick is a branch-and-bound descent that skips every subtree whose
//!   bound cannot beat the best found so far; the oldest section under each node visited
//!   is offered as a candidate on the way, which finds a good best early. Near the leaves
//!   the tree gives way to blocks of 16 buckets, each ruled out or not by one loop over
//!   its oldest stamps, best bound first. A pick never depends on n; it is O(cap) when
//!   the buckets' oldest sections all score about the same (no bound can then rule a
//!   group out: the bench's `cb-*` layouts) and looks at a few blocks otherwise.
//! - Comparisons are exact: scores are compared as `f64` first (relative error below
//!   `2^-50`; bounds from stamps rounded to `f64` carry a slack for that rounding), and
//!   as exact `u128` integers or ratios when two are within `2^-40` of each other.
//!
//! # Data first (seed 000)
//!
//! Moving a data block rewrites the node block that points at it, so cleaning data
//! sections first invalidates node blocks for free. Unless the caller says node cleaning
//! is required (free sections are short), node sections carry a penalty: greedy adds
//! `cap` to their cost, as the kernel does; cost-benefit and age-threshold rank every data
//! section before any node section (see [`PickOptions`] for why this and not a clamp).

use std::cmp::Ordering;
use std::collections::BTreeSet;
use std::fmt;

/// The largest `blocks_per_section` accepted (4 GiB sections of 4 KiB blocks). The index
/// keeps two buckets per valid count, so its fixed part is O(`blocks_per_section`); the
/// bound also keeps every score comparison within `u128` (see `Ratio`).
pub const MAX_BLOCKS_PER_SECTION: u32 = 1 << 20;

/// What a section holds: the log it was written by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    Data,
    Node,
}

/// One section's state in the index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    pub kind: Kind,
    /// Valid blocks, `0..=blocks_per_section`.
    pub valid: u32,
    /// Age stamp from the caller's clock; larger is newer.
    pub mtime: u64,
}

/// How the victim is ranked. In the formulas `u = valid / cap`, `age = now - mtime`
/// (saturating at 0), and the best section is the one with the highest score (the lowest
/// cost); ties go to the smaller `(mtime, section)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// Least cost, where cost is `valid`, plus `cap` for a node section while the node
    /// penalty applies. The kernel's greedy cost; the kernel breaks ties by its scan order
    /// (from the last victim on), we by age then section number.
    Greedy,
    /// Highest `(1 - u) / (1 + u) * age`, the LFS paper's benefit over cost, compared as
    /// exact rationals. The kernel (`get_cb_cost`) computes the same shape with `u` and
    /// `age` rounded to whole percents, its age being the stamp's place between the oldest
    /// and the newest section stamps it has seen (the newest counts as age 0); its ties,
    /// frequent after the rounding, go by scan order, and it never picks a section of
    /// score 0. Scaling the age by a constant does not change the ranking but moving its
    /// zero does: we measure from `now`, and a caller that passes the newest stamp gets
    /// the kernel's zero. A section of score 0 (full, or stamped at `now`) is returned
    /// here when nothing scores higher: which sections are worth inserting is the
    /// caller's decision.
    CostBenefit,
    /// The kernel's ATGC; see [`Atgc`].
    AgeThreshold(Atgc),
}

/// Age-threshold victim selection (the kernel's ATGC, `atgc_lookup_victim`).
///
/// Candidates are the sections with `age >= threshold`. Among them the pick maximises
/// `w * age / span + (100 - w) * (cap - valid) / cap` with `w = age_weight` (values above
/// 100 count as 100) and `span = max(1, now - oldest)`, `oldest` being the oldest stamp
/// among the sections the options allow (both kinds unless [`PickOptions::only`] says
/// otherwise); it is compared exactly, multiplied out by `span * cap`. When no section is
/// old enough the same pick is made with threshold 0.
///
/// What the kernel does differently:
/// - it considers only the oldest `max(10, 20 %)` of the candidates, the budget of its walk
///   of an mtime-ordered tree; we consider them all (the issue asks for no window);
/// - its ages are measured from the newest dirty section's stamp plus one, and normalised
///   by the spread of the dirty sections' stamps, in steps of 1/10000; ours are from
///   `now` and exact;
/// - it retries with threshold 0 only while the file system itself is younger than the
///   threshold, and otherwise picks nothing. Here the fallback is unconditional; a caller
///   that wants the strict rule checks the picked section's age (if any section passed
///   the threshold the pick did).
///
/// Ties (equal scores) go to the older section, as in the kernel, then to the lower
/// section number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Atgc {
    /// Minimum age of a candidate, in the caller's clock units.
    pub threshold: u64,
    /// Weight of age against free space, in percent (the kernel's `atgc_age_weight`).
    pub age_weight: u8,
}

impl Atgc {
    /// The kernel's default age weight (`DEF_GC_THREAD_AGE_WEIGHT`).
    pub const DEFAULT_AGE_WEIGHT: u8 = 60;

    /// A threshold with the default age weight.
    #[must_use]
    pub const fn new(threshold: u64) -> Self {
        Self {
            threshold,
            age_weight: Self::DEFAULT_AGE_WEIGHT,
        }
    }
}

/// What a pick may choose.
///
/// The node penalty applies when `data_first` is on and `node_gc_required` is off (the
/// kernel's `require_node_gc`, set when free sections run short). While it applies:
/// - [`Policy::Greedy`] adds `cap` to a node section's cost, exactly the kernel's weight
///   (seed 000). So a node section is picked only when no data section is left, except
///   in one degenerate tie: a full data section (cost `cap`) against an empty node
///   section (cost `cap + 0`), decided by age like any tie.
/// - [`Policy::CostBenefit`] and [`Policy::AgeThreshold`] pick the best data section if
///   there is one, and otherwise the best node section by the same rule. The kernel skips
///   node sections outright in these modes; we agree whenever a data section exists and
///   still return a node section when none does (`only: Some(Kind::Data)` gives the
///   kernel's rule). Ranking node sections "as if they held `valid + cap` blocks" would
///   clamp every one of them to `u = 1`, a score of 0: they would tie with each other and
///   with full data sections and be told apart by age alone, their valid counts lost.
///   For age-threshold the kinds come before the threshold: an old enough node section
///   is picked only when no data section is left, old or young.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PickOptions {
    /// Prefer data sections (seed 000).
    pub data_first: bool,
    /// Free sections are short: node sections are ranked like data ones.
    pub node_gc_required: bool,
    /// Consider only sections of this kind.
    pub only: Option<Kind>,
}

impl Default for PickOptions {
    /// Data first, node cleaning not required, both kinds.
    fn default() -> Self {
        Self {
            data_first: true,
            node_gc_required: false,
            only: None,
        }
    }
}

impl PickOptions {
    /// Whether node sections carry the data-first penalty.
    #[must_use]
    pub const fn node_penalty_applies(&self) -> bool {
        self.data_first && !self.node_gc_required
    }
}

/// An update or a construction the index refuses; the index is left unchanged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VictimError {
    /// `blocks_per_section` is 0 or above [`MAX_BLOCKS_PER_SECTION`].
    BlocksPerSection { blocks: u32 },
    /// The section number is not below the section count.
    SectionOutOfRange { sec: u32, sections: u32 },
    /// More valid blocks than a section holds.
    ValidOutOfRange { sec: u32, valid: u32, cap: u32 },
}

impl fmt::Display for VictimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::BlocksPerSection { blocks } => write!(
                f,
                "blocks per section {blocks} is not in 1..={MAX_BLOCKS_PER_SECTION}"
            ),
            Self::SectionOutOfRange { sec, sections } => {
                write!(
                    f,
                    "section {sec} is out of range (the index has {sections})"
                )
            }
            Self::ValidOutOfRange { sec, valid, cap } => write!(
                f,
                "section {sec}: {valid} valid blocks, but a section holds {cap}"
            ),
        }
    }
}

impl std::error::Error for VictimError {}

/// `(mtime, section)`: the order within a bucket, oldest first.
type Key = (u64, u32);

/// Marks an empty subtree. No real key equals it: section numbers are below the section
/// count, itself a `u32`, so never `u32::MAX`; every real key is smaller.
const EMPTY: Key = (u64::MAX, u32::MAX);

/// The index. See the module documentation for its invariants.
#[derive(Clone, Debug)]
pub struct VictimIndex {
    cap: u32,
    /// `(cap - v) / (cap + v)` for each valid count `v`, for cost-benefit's quick compare.
    benefit: Vec<f64>,
    slots: Vec<Option<Entry>>,
    data: Shelf,
    node: Shelf,
    len: usize,
}

impl VictimIndex {
    /// An empty index for sections `0..sections` of `blocks_per_section` blocks each.
    pub fn new(sections: u32, blocks_per_section: u32) -> Result<Self, VictimError> {
        if blocks_per_section == 0 || blocks_per_section > MAX_BLOCKS_PER_SECTION {
            return Err(VictimError::BlocksPerSection {
                blocks: blocks_per_section,
            });
        }
        let cap = f64::from(blocks_per_section);
        Ok(Self {
            cap: blocks_per_section,
            benefit: (0..=blocks_per_section)
                .map(|v| (cap - f64::from(v)) / (cap + f64::from(v)))
                .collect(),
            slots: vec![None; sections as usize],
            data: Shelf::new(blocks_per_section),
            node: Shelf::new(blocks_per_section),
            len: 0,
        })
    }

    /// Blocks per section (`cap` in the formulas).
    #[must_use]
    pub const fn blocks_per_section(&self) -> u32 {
        self.cap
    }

    /// The section count the index was made for.
    #[must_use]
    pub fn sections(&self) -> u32 {
        u32::try_from(self.slots.len()).unwrap_or(u32::MAX)
    }

    /// Sections in the index.
    #[must_use]
    pub const fn len(&self) -> usize {
        self.len
    }

    /// Whether no section is in the index.
    #[must_use]
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The entry of `sec`, if it is in the index.
    #[must_use]
    pub fn get(&self, sec: u32) -> Option<Entry> {
        self.slots.get(sec as usize).copied().flatten()
    }

    /// Inserts `sec`, or moves it to its new state; returns its previous entry.
    /// O(log n + log cap).
    pub fn set(
        &mut self,
        sec: u32,
        kind: Kind,
        valid: u32,
        mtime: u64,
    ) -> Result<Option<Entry>, VictimError> {
        let sections = self.sections();
        let slot = self
            .slots
            .get_mut(sec as usize)
            .ok_or(VictimError::SectionOutOfRange { sec, sections })?;
        if valid > self.cap {
            return Err(VictimError::ValidOutOfRange {
                sec,
                valid,
                cap: self.cap,
            });
        }
        let new = Entry { kind, valid, mtime };
        let old = slot.replace(new);
        match old {
            Some(o) if o == new => return Ok(old),
            Some(o) => self.shelf_mut(o.kind).remove(o.valid, (o.mtime, sec)),
            None => self.len += 1,
        }
        self.shelf_mut(kind).insert(valid, (mtime, sec));
        Ok(old)
    }

    /// Takes `sec` out of the index; returns its entry if it was in.
    pub fn remove(&mut self, sec: u32) -> Option<Entry> {
        let old = self.slots.get_mut(sec as usize)?.take()?;
        self.shelf_mut(old.kind).remove(old.valid, (old.mtime, sec));
        self.len -= 1;
        Some(old)
    }

    /// The best victim under `policy` at time `now`, or `None` when no section the
    /// options allow is in the index. Never scans the sections; see the module
    /// documentation for the cost.
    #[must_use]
    pub fn pick(&self, policy: Policy, now: u64, opts: PickOptions) -> Option<u32> {
        let data = (opts.only != Some(Kind::Node)).then_some(&self.data);
        let node = (opts.only != Some(Kind::Data)).then_some(&self.node);
        let penalty = opts.node_penalty_applies();
        match policy {
            Policy::Greedy => {
                let node_extra = if penalty { u64::from(self.cap) } else { 0 };
                [(data, 0), (node, node_extra)]
                    .into_iter()
                    .filter_map(|(shelf, extra)| {
                        let (valid, key) = shelf?.first_nonempty()?;
                        Some((u64::from(valid) + extra, key))
                    })
                    .min()
                    .map(|(_, (_, sec))| sec)
            }
            Policy::CostBenefit => {
                let rule = CostBenefit {
                    now,
                    cap: self.cap,
                    benefit: &self.benefit,
                };
                tiers(data, node, penalty)
                    .into_iter()
                    .find_map(|tier| best_of(&tier, &rule))
            }
            Policy::AgeThreshold(atgc) => {
                let oldest = [data, node]
                    .into_iter()
                    .flatten()
                    .filter_map(Shelf::oldest)
                    .min()?;
                let rule = AgeThreshold {
                    now,
                    cap: self.cap,
                    threshold: atgc.threshold,
                    weight: u128::from(atgc.age_weight.min(100)),
                    span: u128::from(now.saturating_sub(oldest.0).max(1)),
                    age_coef: f64::from(atgc.age_weight.min(100)) * f64::from(self.cap),
                    span_f: now.saturating_sub(oldest.0).max(1) as f64,
                };
                let fallback = AgeThreshold {
                    threshold: 0,
                    ..rule
                };
                tiers(data, node, penalty)
                    .into_iter()
                    .find_map(|tier| best_of(&tier, &rule).or_else(|| best_of(&tier, &fallback)))
            }
        }
    }

    fn shelf_mut(&mut self, kind: Kind) -> &mut Shelf {
        match kind {
            Kind::Data => &mut self.data,
            Kind::Node => &mut self.node,
        }
    }

    /// Panics unless every invariant of the module documentation holds (tests only).
    #[cfg(test)]
    pub(crate) fn check_invariants(&self) {
        let mut count = 0;
        for (sec, slot) in self.slots.iter().enumerate() {
            let Some(e) = slot else { continue };
            count += 1;
            let key = (e.mtime, u32::try_from(sec).unwrap_or(u32::MAX));
            for (kind, shelf) in [(Kind::Data, &self.data), (Kind::Node, &self.node)] {
                for (valid, bucket) in shelf.buckets.iter().enumerate() {
                    let here = kind == e.kind && valid == e.valid as usize;
                    assert_eq!(
                        bucket.contains(&key),
                        here,
                        "section {sec} {e:?}, bucket {kind:?}/{valid}"
                    );
                }
            }
        }
        assert_eq!(count, self.len, "len");
        let keys: usize = [&self.data, &self.node]
            .iter()
            .flat_map(|s| s.buckets.iter())
            .map(BTreeSet::len)
            .sum();
        assert_eq!(keys, self.len, "keys in buckets");
        for shelf in [&self.data, &self.node] {
            for k in 1..shelf.leaves * 2 {
                let want = if k >= shelf.leaves {
                    let valid = k - shelf.leaves;
                    match shelf.buckets.get(valid).and_then(|b| b.first().copied()) {
                        Some(key) => Head {
                            key,
                            valid: u32::try_from(valid).unwrap_or(u32::MAX),
                        },
                        None => NO_HEAD,
                    }
                } else {
                    shelf.node(2 * k).older(shelf.node(2 * k + 1))
                };
                assert_eq!(shelf.node(k), want, "tree node {k}");
            }
            for (v, m) in shelf.head_mtimes.iter().enumerate() {
                let head = shelf.node(shelf.leaves + v);
                let want = if head.is_empty() {
                    f64::INFINITY
                } else {
                    head.key.0 as f64
                };
                assert_eq!(m.to_bits(), want.to_bits(), "head stamp {v}");
            }
        }
    }
}

/// The groups of shelves a cost-benefit or age-threshold pick tries in turn: data then
/// node while the penalty applies, else both together.
fn tiers<'a>(
    data: Option<&'a Shelf>,
    node: Option<&'a Shelf>,
    penalty: bool,
) -> [[Option<&'a Shelf>; 2]; 2] {
    if penalty {
        [[data, None], [node, None]]
    } else {
        [[data, node], [None, None]]
    }
}

/// The best section of a group of shelves under `rule`.
fn best_of<R: Rule>(tier: &[Option<&Shelf>; 2], rule: &R) -> Option<u32> {
    let mut best = None;
    for shelf in tier.iter().flatten() {
        shelf.search(rule, &mut best);
    }
    best.map(|b| b.key.1)
}

/// One kind's buckets and the tournament tree over their oldest keys.
#[derive(Clone, Debug)]
struct Shelf {
    /// Bucket `v` holds the keys of the sections with `v` valid blocks.
    buckets: Vec<BTreeSet<Key>>,
    /// `tree[leaves + v]` is bucket `v`'s first key (and `v`); `tree[k]` the older of
    /// `tree[2k]` and `tree[2k + 1]`; `tree[1]` the root; `tree[0]` unused.
    tree: Vec<Head>,
    /// Leaf count: the bucket count rounded up to a power of two (padding leaves are
    /// empty forever).
    leaves: usize,
    /// `head_mtimes[v]` is leaf `v`'s stamp as `f64`, or infinity for an empty leaf: the
    /// quick bound of a block of leaves ([`Rule::block_bound`]) reads them in a row.
    head_mtimes: Vec<f64>,
}

/// A tree node: the oldest section under it and its valid count. Nodes are ordered by
/// key alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Head {
    key: Key,
    valid: u32,
}

/// The node of an empty subtree.
const NO_HEAD: Head = Head {
    key: EMPTY,
    valid: u32::MAX,
};

impl Head {
    fn is_empty(self) -> bool {
        self.key == EMPTY
    }

    fn older(self, other: Self) -> Self {
        if other.key < self.key {
            other
        } else {
            self
        }
    }
}

/// The pending nodes of a depth-first walk of a tree, each with its approximate bound.
/// Each step pops one node and pushes at most its two children, so the walk holds at
/// most one node per level plus one; a tree has at most 21 levels below its root
/// (`MAX_BLOCKS_PER_SECTION + 1` buckets round up to `2^21` leaves), so 32 slots never
/// run out.
#[derive(Default)]
struct Stack {
    items: [(usize, f64); 32],
    len: usize,
}

impl Stack {
    fn push(&mut self, k: usize, bound: f64) {
        if let Some(slot) = self.items.get_mut(self.len) {
            *slot = (k, bound);
            self.len += 1;
        }
    }

    fn pop(&mut self) -> Option<(usize, f64)> {
        self.len = self.len.checked_sub(1)?;
        self.items.get(self.len).copied()
    }
}

impl Shelf {
    fn new(cap: u32) -> Self {
        let buckets = cap as usize + 1;
        let leaves = buckets.next_power_of_two();
        Self {
            buckets: vec![BTreeSet::new(); buckets],
            tree: vec![NO_HEAD; 2 * leaves],
            leaves,
            head_mtimes: vec![f64::INFINITY; leaves],
        }
    }

    fn node(&self, k: usize) -> Head {
        self.tree.get(k).copied().unwrap_or(NO_HEAD)
    }

    fn oldest(&self) -> Option<Key> {
        let root = self.node(1);
        (!root.is_empty()).then_some(root.key)
    }

    /// Adds `key` to bucket `valid`; it becomes the bucket's head if it is older.
    fn insert(&mut self, valid: u32, key: Key) {
        let Some(bucket) = self.buckets.get_mut(valid as usize) else {
            return;
        };
        bucket.insert(key);
        if key < self.node(self.leaves + valid as usize).key {
            self.set_head(valid, key);
        }
    }

    /// Takes `key` out of bucket `valid`; the next key becomes the head if it was the head.
    fn remove(&mut self, valid: u32, key: Key) {
        let head = self.node(self.leaves + valid as usize).key;
        let Some(bucket) = self.buckets.get_mut(valid as usize) else {
            return;
        };
        bucket.remove(&key);
        if key == head {
            let next = bucket.first().copied().unwrap_or(EMPTY);
            self.set_head(valid, next);
        }
    }

    /// Makes `first` bucket `valid`'s head, and brings the tree above it up to date.
    fn set_head(&mut self, valid: u32, first: Key) {
        let mut value = if first == EMPTY {
            NO_HEAD
        } else {
            Head { key: first, valid }
        };
        if let Some(m) = self.head_mtimes.get_mut(valid as usize) {
            *m = if value.is_empty() {
                f64::INFINITY
            } else {
                first.0 as f64
            };
        }
        let mut k = self.leaves + valid as usize;
        loop {
            match self.tree.get_mut(k) {
                // An unchanged node leaves every ancestor unchanged.
                Some(slot) if *slot == value => return,
                Some(slot) => *slot = value,
                None => return,
            }
            if k <= 1 {
                return;
            }
            let sibling = self.node(k ^ 1);
            k /= 2;
            value = value.older(sibling);
        }
    }

    /// The lowest non-empty bucket and its first key.
    fn first_nonempty(&self) -> Option<(u32, Key)> {
        self.oldest()?;
        let mut k = 1;
        while k < self.leaves {
            k *= 2;
            if self.node(k).is_empty() {
                k += 1;
            }
        }
        let leaf = self.node(k);
        Some((leaf.valid, leaf.key))
    }

    /// The buckets under tree node `k` (`k >= 1`): the lowest valid count and how many.
    fn span(&self, k: usize) -> (usize, usize) {
        let depth = usize::BITS - 1 - k.leading_zeros();
        let width = self.leaves >> depth;
        ((k - (1 << depth)) * width, width)
    }

    /// Raises `best` to the best key of this shelf under `rule`, if that beats it.
    ///
    /// Branch and bound: `rule` scores never grow with the valid count or the stamp, so
    /// the buckets under node `k` score at most `rule.score(lowest valid, tree[k])`, and
    /// their keys are no smaller than `tree[k]`'s; a subtree that cannot beat `best` is
    /// skipped. The oldest section under a node is itself a candidate: each node visited
    /// offers its children's to `best`, so that a good best is found early and rules out
    /// more, and the child whose oldest section scores higher goes first. Below `GROUP`
    /// buckets the tree gives way to blocks of `BLOCK` leaves, each bounded by one cheap
    /// loop ([`Rule::block_bound`]) and taken best bound first ([`Shelf::scan_group`]).
    fn search<R: Rule>(&self, rule: &R, best: &mut Option<Best>) {
        let mut stack = Stack::default();
        if let Some((bound, _)) = self.offer(rule, 1, best) {
            stack.push(1, bound);
        }
        while let Some((k, bound)) = stack.pop() {
            let (lowest, width) = self.span(k);
            let valid = u32::try_from(lowest).unwrap_or(u32::MAX);
            if !beats(rule, best, valid, self.node(k).key, bound) {
                continue;
            }
            if width <= BLOCK {
                self.scan(lowest, width, rule, best);
                continue;
            }
            if width <= GROUP {
                self.scan_group(lowest, width, rule, best);
                continue;
            }
            let (left, right) = (2 * k, 2 * k + 1);
            match (self.offer(rule, left, best), self.offer(rule, right, best)) {
                (Some((l, lw)), Some((r, rw))) if lw >= rw => {
                    stack.push(right, r);
                    stack.push(left, l);
                }
                (Some((l, _)), Some((r, _))) => {
                    stack.push(left, l);
                    stack.push(right, r);
                }
                (Some((l, _)), None) => stack.push(left, l),
                (None, Some((r, _))) => stack.push(right, r),
                (None, None) => {}
            }
        }
    }

    /// The approximate bound of the subtree under node `k`, or `None` when it holds no
    /// candidate.
    fn bound<R: Rule>(&self, rule: &R, k: usize) -> Option<f64> {
        let head = self.node(k);
        if head.is_empty() {
            return None;
        }
        let lowest = u32::try_from(self.span(k).0).unwrap_or(u32::MAX);
        rule.approx(lowest, head.key.0)
    }

    /// Offers the oldest section under node `k` to `best`; returns the subtree's
    /// approximate bound and that section's approximate score (minus infinity when it
    /// is not a candidate), or `None` when the subtree holds no candidate.
    fn offer<R: Rule>(&self, rule: &R, k: usize, best: &mut Option<Best>) -> Option<(f64, f64)> {
        let bound = self.bound(rule, k)?;
        let head = self.node(k);
        let witness = match rule.approx(head.valid, head.key.0) {
            Some(approx) => {
                if beats(rule, best, head.valid, head.key, approx) {
                    *best = Some(Best {
                        approx,
                        key: head.key,
                        valid: head.valid,
                    });
                }
                approx
            }
            None => f64::NEG_INFINITY,
        };
        Some((bound, witness))
    }

    /// [`Shelf::search`] over the `width` buckets from `lowest` (a power of two, more
    /// than `BLOCK`, at most `GROUP`): the bound of every block of `BLOCK` buckets first,
    /// then the blocks from the highest bound down, until the next bound is below the
    /// best. Taken in the tree's order, every block could hold a better section than
    /// the blocks before it, and none could be ruled out without a scan of its leaves.
    fn scan_group<R: Rule>(&self, lowest: usize, width: usize, rule: &R, best: &mut Option<Best>) {
        let cut = best.as_ref().map_or(f64::NEG_INFINITY, Best::cut);
        let mut bounds = [f64::NEG_INFINITY; GROUP / BLOCK];
        for (i, bound) in bounds.iter_mut().take(width / BLOCK).enumerate() {
            let first = lowest + i * BLOCK;
            // The tree's bound of the block first (one step), then the block's own.
            let Some(coarse) = self.bound(rule, (self.leaves + first) / BLOCK) else {
                continue;
            };
            if coarse >= cut {
                let mtimes = self.head_mtimes.get(first..first + BLOCK).unwrap_or(&[]);
                *bound = coarse.min(rule.block_bound(first, mtimes));
            }
        }
        loop {
            let (i, bound) =
                bounds
                    .iter()
                    .copied()
                    .enumerate()
                    .fold(
                        (0, f64::NEG_INFINITY),
                        |top, (i, b)| if b > top.1 { (i, b) } else { top },
                    );
            let cut = best.as_ref().map_or(f64::NEG_INFINITY, Best::cut);
            if bound == f64::NEG_INFINITY || bound < cut {
                return;
            }
            if let Some(b) = bounds.get_mut(i) {
                *b = f64::NEG_INFINITY;
            }
            self.scan_block(lowest + i * BLOCK, BLOCK, rule, best);
        }
    }

    /// [`Shelf::search`] over the `width` buckets from `lowest` (at most `BLOCK`): the
    /// block's quick bound first.
    fn scan<R: Rule>(&self, lowest: usize, width: usize, rule: &R, best: &mut Option<Best>) {
        let cut = best.as_ref().map_or(f64::NEG_INFINITY, Best::cut);
        let mtimes = self.head_mtimes.get(lowest..lowest + width).unwrap_or(&[]);
        if rule.block_bound(lowest, mtimes) >= cut {
            self.scan_block(lowest, width, rule, best);
        }
    }

    /// The block's best head by approximate score, offered to `best` alone unless
    /// another head comes within `2^-40` of it (then each of those, exactly).
    fn scan_block<R: Rule>(&self, lowest: usize, width: usize, rule: &R, best: &mut Option<Best>) {
        let start = self.leaves + lowest;
        let Some(heads) = self.tree.get(start..start + width) else {
            return;
        };
        let candidates = (lowest..).zip(heads).filter_map(|(valid, head)| {
            let valid = u32::try_from(valid).unwrap_or(u32::MAX);
            if head.is_empty() {
                return None;
            }
            let approx = rule.approx(valid, head.key.0)?;
            Some(Best {
                approx,
                key: head.key,
                valid,
            })
        });
        let mut top: Option<Best> = None;
        let mut second = f64::NEG_INFINITY;
        for c in candidates.clone() {
            match top {
                Some(t) if c.approx <= t.approx => second = second.max(c.approx),
                _ => {
                    second = top.map_or(second, |t| t.approx);
                    top = Some(c);
                }
            }
        }
        let Some(top) = top else { return };
        if second < top.cut() {
            if beats(rule, best, top.valid, top.key, top.approx) {
                *best = Some(top);
            }
            return;
        }
        for c in candidates.filter(|c| c.approx >= top.cut()) {
            if beats(rule, best, c.valid, c.key, c.approx) {
                *best = Some(c);
            }
        }
    }
}

/// Subtrees of at most this many buckets are scanned leaf by leaf.
const BLOCK: usize = 16;

/// Subtrees of at most this many buckets are scanned block by block, best bound first.
const GROUP: usize = 128;

/// The best section found so far: its approximate score, its key and valid count (its
/// exact score is computed again in the rare comparison that needs it).
#[derive(Clone, Copy)]
struct Best {
    approx: f64,
    key: Key,
    valid: u32,
}

impl Best {
    /// Approximate scores below this are certainly below the best.
    fn cut(&self) -> f64 {
        self.approx * BELOW
    }
}

/// Relative error of [`Rule::approx`] is below `2^-50`; two approximations further apart
/// than `2^-40` are ordered like the exact scores, closer ones are compared exactly.
const BELOW: f64 = 1.0 - 1.0 / (1u64 << 40) as f64;
const ABOVE: f64 = 1.0 + 1.0 / (1u64 << 40) as f64;

/// Whether a section with `valid` blocks and `key`, whose approximate score is `approx`,
/// beats `best` (or, for a subtree's bound, whether the subtree may hold one that does).
fn beats<R: Rule>(rule: &R, best: &Option<Best>, valid: u32, key: Key, approx: f64) -> bool {
    let Some(b) = best else { return true };
    if approx < b.cut() {
        return false;
    }
    if approx > b.approx * ABOVE {
        return true;
    }
    let exact = rule.score(valid, key.0);
    match exact
        .zip(rule.score(b.valid, b.key.0))
        .map(|(s, t)| s.cmp(&t))
    {
        Some(Ordering::Greater) => true,
        Some(Ordering::Equal) => key < b.key,
        Some(Ordering::Less) | None => false,
    }
}

/// A score for the branch-and-bound search. `score(valid, mtime)` must not grow when
/// either argument grows, and `None` (not a candidate) must stay `None` when `mtime` grows.
trait Rule {
    type Score: Ord + Copy;
    /// The exact score, or `None` when the section is not a candidate.
    fn score(&self, valid: u32, mtime: u64) -> Option<Self::Score>;
    /// `score` as `f64`, within a relative `2^-50` of it (so exactly 0 when it is 0), and
    /// `None` exactly when `score` is: the cheap comparison that decides almost every step.
    fn approx(&self, valid: u32, mtime: u64) -> Option<f64>;
    /// A number no smaller than the exact score of any candidate among the buckets from
    /// `lowest` whose first stamps are `mtimes` (as `f64`, infinity when empty): one
    /// cheap loop that may rule out a whole block. Infinity when the rule has none.
    fn block_bound(&self, _lowest: usize, _mtimes: &[f64]) -> f64 {
        f64::INFINITY
    }
}

/// `(cap - valid) * age / (cap + valid)`, the cost-benefit score with `(1 - u) / (1 + u)`
/// multiplied through by `cap / cap`.
struct CostBenefit<'a> {
    now: u64,
    cap: u32,
    /// `benefit[v] = (cap - v) / (cap + v)`, rounded once.
    benefit: &'a [f64],
}

impl Rule for CostBenefit<'_> {
    type Score = Ratio;
    fn score(&self, valid: u32, mtime: u64) -> Option<Ratio> {
        let age = self.now.saturating_sub(mtime);
        Some(Ratio {
            num: u128::from(self.cap.saturating_sub(valid)) * u128::from(age),
            den: u128::from(self.cap) + u128::from(valid),
        })
    }

    // Two roundings (the table, the age) and the product's: below 2^-51.
    fn approx(&self, valid: u32, mtime: u64) -> Option<f64> {
        let age = self.now.saturating_sub(mtime) as f64;
        Some(self.benefit.get(valid as usize).copied().unwrap_or(0.0) * age)
    }

    // Ages are taken as differences of rounded stamps, off by up to 2^-52 of `now` (more
    // than the age itself when the age is small beside `now`); the bound adds 2^-48 of
    // `now` for that, and 2^-48 of the result for every rounding on the way. The fold
    // starts at 0, the score of a stamp newer than `now` and of an empty leaf (its stamp
    // is infinite), so negative products never count.
    fn block_bound(&self, lowest: usize, mtimes: &[f64]) -> f64 {
        let now = self.now as f64;
        let benefit = self.benefit.get(lowest..).unwrap_or(&[]);
        let top = benefit.iter().zip(mtimes).fold(0.0, |top, (f, m)| {
            let score = f * (now - m);
            if score > top {
                score
            } else {
                top
            }
        });
        top * (1.0 + SLACK) + now * SLACK
    }
}

/// `2^-48`: the slack of [`CostBenefit::block_bound`].
const SLACK: f64 = 1.0 / (1u64 << 48) as f64;

/// `num / den` with `den > 0`, ordered exactly by cross-multiplication: `num < 2^84`
/// and `den <= 2^21` (`cap <= 2^20`), so each product stays below `2^105`.
#[derive(Clone, Copy, Debug)]
struct Ratio {
    num: u128,
    den: u128,
}

impl Ord for Ratio {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.num * other.den).cmp(&(other.num * self.den))
    }
}

impl PartialOrd for Ratio {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Ratio {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Ratio {}

/// `w * age * cap + (100 - w) * (cap - valid) * span`, the age-threshold score multiplied
/// through by `span * cap`; each term is below `2^91`, so the sum fits.
#[derive(Clone, Copy)]
struct AgeThreshold {
    now: u64,
    cap: u32,
    threshold: u64,
    /// `0..=100`.
    weight: u128,
    /// `>= 1`.
    span: u128,
    /// `weight * cap`, exactly.
    age_coef: f64,
    /// `span`, rounded once (a `u128` conversion is a library call; this is done once
    /// per pick).
    span_f: f64,
}

impl Rule for AgeThreshold {
    type Score = u128;
    fn score(&self, valid: u32, mtime: u64) -> Option<u128> {
        let age = self.now.saturating_sub(mtime);
        if age < self.threshold {
            return None;
        }
        let cap = u128::from(self.cap);
        let free = u128::from(self.cap.saturating_sub(valid));
        Some(self.weight * u128::from(age) * cap + (100 - self.weight) * free * self.span)
    }

    // The coefficients are exact integers below 2^27; the age, the span and the two
    // products are rounded once each, the sum of two non-negative terms once more.
    fn approx(&self, valid: u32, mtime: u64) -> Option<f64> {
        let age = self.now.saturating_sub(mtime);
        if age < self.threshold {
            return None;
        }
        let free = u64::from(self.cap.saturating_sub(valid));
        let free_weight = (100 - self.weight as u64) * free;
        Some(self.age_coef * age as f64 + free_weight as f64 * self.span_f)
    }

    // As cost-benefit's: ages from rounded stamps are off by up to 2^-52 of `now`, so a
    // head counts as old enough when its age is within 2^-48 of `now` of the threshold,
    // the age term gains `age_coef` times that, and the result 2^-48 of itself.
    fn block_bound(&self, lowest: usize, mtimes: &[f64]) -> f64 {
        let now = self.now as f64;
        let span = self.span_f;
        let old_enough = self.threshold as f64 - now * SLACK;
        let free_weight = (100 - self.weight as u64) as f64;
        let cap = f64::from(self.cap);
        let top = (lowest..)
            .zip(mtimes)
            .fold(f64::NEG_INFINITY, |top, (valid, m)| {
                // Saturating, as the exact age is (an empty leaf's infinite stamp gives
                // 0 too: a score no candidate has, which only loosens the bound).
                let age = (now - m).max(0.0);
                let score = if age >= old_enough {
                    self.age_coef * age + free_weight * (cap - valid as f64) * span
                } else {
                    f64::NEG_INFINITY
                };
                if score > top {
                    score
                } else {
                    top
                }
            });
        top * (1.0 + SLACK) + self.age_coef * now * SLACK
    }
}

#[cfg(test)]
mod tests;
