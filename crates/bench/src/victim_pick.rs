//! `victim-pick`: the cost of a pick from the cleaner's victim index
//! (`uf2fs_engine::victim`), and of an update, from 10^3 to 10^6 sections.
//!
//! Each index is filled with every section: a quarter node sections, valid counts uniform
//! in `1..cap`, stamps uniform over a clock of `sections * cap` blocks written. Then, with
//! data-first options, the mean time of a pick under each policy (the time `now` moving on
//! by one per pick, so no two consecutive picks ask the same question), of an update (a
//! random section to a random state stamped at `now`: what invalidating a block or
//! closing a section does), and of an update followed by a cost-benefit pick (the index
//! changing under the picks, as it does under a cleaner).
//!
//! The `cb-*` layouts are cost-benefit's hard cases: the oldest sections of the buckets
//! all score about the same (`cb-flat`), or each a little more (`cb-rising`) or less
//! (`cb-falling`) than the one of the bucket below. No bound on a group of buckets can
//! then rule the group out, so the search must look at every bucket: they bound a
//! cost-benefit pick from above for a given `cap`, whatever the number of sections.
//!
//! The goal (issue: victim index): a pick in at most 1 µs, flat from 10^3 to 10^6.

use serde_json::json;
use std::hint::black_box;
use std::path::Path;
use uf2fs_engine::victim::{Atgc, Kind, PickOptions, Policy, VictimIndex};

use crate::splitmix::SplitMix as Rng;

/// A section kind as the layouts draw them: a quarter node sections.
fn kind(rng: &mut Rng) -> Kind {
    if rng.below(4) == 0 {
        Kind::Node
    } else {
        Kind::Data
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Layout {
    /// Kinds, valid counts and stamps drawn uniformly.
    Random,
    /// Cost-benefit's hard cases: the oldest section of bucket `v` scores about
    /// `clock + slope * v` (all data; every other section younger than every head).
    Heads { slope: i64 },
}

/// The hard layouts: every head scoring the same, a little more than the head below it,
/// a little less.
const HARD: [Layout; 3] = [
    Layout::Heads { slope: 0 },
    Layout::Heads { slope: 64 },
    Layout::Heads { slope: -64 },
];

impl Layout {
    fn name(self) -> &'static str {
        match self {
            Self::Random => "random",
            Self::Heads { slope: 0 } => "cb-flat",
            Self::Heads { slope } if slope > 0 => "cb-rising",
            Self::Heads { .. } => "cb-falling",
        }
    }
}

/// A full index of `sections` sections and the clock it was filled up to.
fn fill(
    sections: u32,
    cap: u32,
    layout: Layout,
    rng: &mut Rng,
) -> Result<(VictimIndex, u64), String> {
    let mut ix = VictimIndex::new(sections, cap).map_err(|e| e.to_string())?;
    let clock = u64::from(sections) * u64::from(cap);
    // The hard layouts' `now`: more than any head's age.
    let late = (clock + 64 * u64::from(cap)) * 2 * u64::from(cap);
    for sec in 0..sections {
        let (kind, valid, mtime) = match layout {
            Layout::Random => (
                kind(rng),
                1 + rng.below(u64::from(cap) - 1) as u32,
                rng.below(clock),
            ),
            Layout::Heads { slope } => {
                // Sections 0..cap-1 are the bucket heads, one per valid count in 1..cap:
                // head v has age (clock + slope v) (cap + v) / (cap - v), so it scores
                // about clock + slope v (clock > 64 cap, as sections > cap).
                let v = 1 + sec % (cap - 1);
                let age = if sec < cap - 1 {
                    let score = clock.saturating_add_signed(slope * i64::from(v));
                    let a = u128::from(score) * u128::from(cap + v) / u128::from(cap - v);
                    u64::try_from(a).unwrap_or(u64::MAX)
                } else {
                    rng.below(clock / 8)
                };
                (Kind::Data, v, late - age)
            }
        };
        ix.set(sec, kind, valid, mtime).map_err(|e| e.to_string())?;
    }
    let now = match layout {
        Layout::Random => clock,
        Layout::Heads { .. } => late,
    };
    Ok((ix, now))
}

/// This thread's time on a CPU, in nanoseconds: on a shared machine, the wall clock also
/// counts the time other programs had the CPU.
fn cpu_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    let secs = u64::try_from(t.tv_sec).unwrap_or(0);
    let nanos = u64::try_from(t.tv_nsec).unwrap_or(0);
    secs * 1_000_000_000 + nanos
}

/// A stopwatch of this thread's CPU time.
struct Stopwatch(u64);

impl Stopwatch {
    fn start() -> Self {
        Self(cpu_ns())
    }

    /// Mean nanoseconds per operation over `ops` operations.
    fn per_op(&self, ops: u64) -> f64 {
        cpu_ns().saturating_sub(self.0) as f64 / ops.max(1) as f64
    }
}

/// Mean nanoseconds of `pick` over `iters` picks, `now` moving on by one each time and
/// back every 1024 picks (over a million picks the cb-* layouts' near ties at
/// 10^3 sections, whose ages are about 5 * 10^5, would drift apart).
fn time_picks(ix: &VictimIndex, policy: Policy, now: u64, iters: u64) -> f64 {
    let opts = PickOptions::default();
    let watch = Stopwatch::start();
    for i in 0..iters {
        black_box(ix.pick(black_box(policy), black_box(now + i % 1024), opts));
    }
    watch.per_op(iters)
}

/// Mean nanoseconds of an update (and of an update and a pick, when `policy` is given).
fn time_updates(
    ix: &mut VictimIndex,
    cap: u32,
    now: &mut u64,
    iters: u64,
    policy: Option<Policy>,
    rng: &mut Rng,
) -> f64 {
    let sections = u64::from(ix.sections());
    let opts = PickOptions::default();
    let watch = Stopwatch::start();
    for _ in 0..iters {
        let sec = rng.below(sections) as u32;
        let kind = kind(rng);
        let valid = 1 + rng.below(u64::from(cap) - 1) as u32;
        *now += 1;
        let _ = black_box(ix.set(sec, kind, valid, *now));
        if let Some(p) = policy {
            black_box(ix.pick(p, *now, opts));
        }
    }
    watch.per_op(iters)
}

/// Runs the benchmark, prints the table and writes the JSON to `json`.
pub fn victim_pick(sizes: &[u32], cap: u32, iters: u64, json: &Path) -> Result<(), String> {
    if cap < 2 {
        return Err("--cap must be at least 2".into());
    }
    let mut rows = Vec::new();
    println!(
        "victim-pick: cap {cap} blocks per section, data first; mean ns of CPU time per operation over {iters} operations"
    );
    println!(
        "{:>9} {:<12} {:>8} {:>13} {:>14} {:>8} {:>16}",
        "sections",
        "layout",
        "greedy",
        "cost-benefit",
        "age-threshold",
        "update",
        "update + cb pick"
    );
    for &sections in sizes {
        for layout in std::iter::once(Layout::Random).chain(HARD) {
            if layout != Layout::Random && sections < cap {
                continue;
            }
            let mut rng = Rng(u64::from(sections) ^ 0x5eed);
            let (mut ix, mut now) = fill(sections, cap, layout, &mut rng)?;
            // ATGC: a threshold a quarter of the clock, so about three quarters of the
            // random layout's sections are old enough.
            let atgc = Policy::AgeThreshold(Atgc::new(now / 4));
            let greedy = time_picks(&ix, Policy::Greedy, now, iters);
            let cb = time_picks(&ix, Policy::CostBenefit, now, iters);
            let at = time_picks(&ix, atgc, now, iters);
            let update = time_updates(&mut ix, cap, &mut now, iters, None, &mut rng);
            // Random updates undo the hard layouts: measured on the random one only.
            let mixed = (layout == Layout::Random).then(|| {
                time_updates(
                    &mut ix,
                    cap,
                    &mut now,
                    iters,
                    Some(Policy::CostBenefit),
                    &mut rng,
                )
            });
            let mixed_text = mixed.map_or_else(|| "-".to_string(), |m| format!("{m:.0}"));
            println!(
                "{sections:>9} {:<12} {greedy:>8.0} {cb:>13.0} {at:>14.0} {update:>8.0} {mixed_text:>16}",
                layout.name()
            );
            rows.push(json!({
                "sections": sections,
                "layout": layout.name(),
                "ns_per_pick": { "greedy": greedy, "cost_benefit": cb, "age_threshold": at },
                "ns_per_update": update,
                "ns_per_update_and_cost_benefit_pick": mixed,
            }));
        }
    }
    let doc = json!({
        "benchmark": "victim-pick",
        "blocks_per_section": cap,
        "iterations": iters,
        "clock": "thread CPU time",
        "options": "data first, node GC not required, both kinds",
        "rows": rows,
    });
    if let Some(dir) = json.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let text = serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?;
    std::fs::write(json, text).map_err(|e| format!("{}: {e}", json.display()))?;
    println!("JSON: {}", json.display());
    Ok(())
}
