//! Tests of the victim index: named cases worked out by hand, and property tests that
//! compare every pick with a brute-force scan of a plain `Vec` model.

use super::*;
use proptest::prelude::*;

const DATA: Kind = Kind::Data;
const NODE: Kind = Kind::Node;

/// No penalty, both kinds.
const PLAIN: PickOptions = PickOptions {
    data_first: false,
    node_gc_required: false,
    only: None,
};

/// Data first, node cleaning not required: the penalty applies.
const DATA_FIRST: PickOptions = PickOptions {
    data_first: true,
    node_gc_required: false,
    only: None,
};

fn index(sections: u32, cap: u32, entries: &[(u32, Kind, u32, u64)]) -> VictimIndex {
    let mut ix = VictimIndex::new(sections, cap).unwrap();
    for &(sec, kind, valid, mtime) in entries {
        ix.set(sec, kind, valid, mtime).unwrap();
    }
    ix.check_invariants();
    ix
}

fn all_policies() -> [Policy; 4] {
    [
        Policy::Greedy,
        Policy::CostBenefit,
        Policy::AgeThreshold(Atgc::new(0)),
        Policy::AgeThreshold(Atgc::new(1000)),
    ]
}

// ---- construction and updates ----

#[test]
fn new_refuses_zero_and_oversized_sections() {
    assert_eq!(
        VictimIndex::new(10, 0).unwrap_err(),
        VictimError::BlocksPerSection { blocks: 0 }
    );
    assert_eq!(
        VictimIndex::new(10, MAX_BLOCKS_PER_SECTION + 1).unwrap_err(),
        VictimError::BlocksPerSection {
            blocks: MAX_BLOCKS_PER_SECTION + 1
        }
    );
    let ix = VictimIndex::new(10, MAX_BLOCKS_PER_SECTION).unwrap();
    assert_eq!(ix.blocks_per_section(), MAX_BLOCKS_PER_SECTION);
    assert_eq!(ix.sections(), 10);
}

#[test]
fn empty_index_picks_nothing() {
    let mut ix = VictimIndex::new(100, 512).unwrap();
    assert!(ix.is_empty());
    for policy in all_policies() {
        assert_eq!(ix.pick(policy, 50, DATA_FIRST), None, "{policy:?}");
    }
    ix.set(7, DATA, 3, 1).unwrap();
    ix.remove(7);
    ix.check_invariants();
    for policy in all_policies() {
        assert_eq!(ix.pick(policy, 50, PLAIN), None, "{policy:?} after remove");
    }
}

#[test]
fn zero_sections_refuse_every_set() {
    let mut ix = VictimIndex::new(0, 512).unwrap();
    assert_eq!(
        ix.set(0, DATA, 1, 1),
        Err(VictimError::SectionOutOfRange {
            sec: 0,
            sections: 0
        })
    );
    assert_eq!(ix.pick(Policy::Greedy, 0, PLAIN), None);
}

#[test]
fn set_refuses_out_of_range_and_leaves_the_index_unchanged() {
    let mut ix = index(4, 512, &[(1, DATA, 10, 5)]);
    assert_eq!(
        ix.set(4, DATA, 1, 1),
        Err(VictimError::SectionOutOfRange {
            sec: 4,
            sections: 4
        })
    );
    assert_eq!(
        ix.set(1, NODE, 513, 9),
        Err(VictimError::ValidOutOfRange {
            sec: 1,
            valid: 513,
            cap: 512
        })
    );
    ix.check_invariants();
    assert_eq!(
        ix.get(1),
        Some(Entry {
            kind: DATA,
            valid: 10,
            mtime: 5
        })
    );
    assert_eq!(ix.len(), 1);
}

#[test]
fn set_moves_a_section_and_returns_its_previous_entry() {
    let mut ix = index(4, 512, &[(2, DATA, 100, 5), (3, DATA, 50, 6)]);
    assert_eq!(ix.pick(Policy::Greedy, 10, PLAIN), Some(3));
    // Section 2 loses blocks: it moves to a lower bucket and becomes the greedy victim.
    let prev = ix.set(2, DATA, 20, 7).unwrap();
    assert_eq!(
        prev,
        Some(Entry {
            kind: DATA,
            valid: 100,
            mtime: 5
        })
    );
    ix.check_invariants();
    assert_eq!(ix.len(), 2);
    assert_eq!(ix.pick(Policy::Greedy, 10, PLAIN), Some(2));
    // Setting the same state again changes nothing.
    assert_eq!(ix.set(2, DATA, 20, 7).unwrap(), ix.get(2));
    ix.check_invariants();
    // Removing returns the entry; removing again returns nothing.
    assert_eq!(ix.remove(2).map(|e| e.valid), Some(20));
    assert_eq!(ix.remove(2), None);
    assert_eq!(ix.remove(99), None);
    ix.check_invariants();
    assert_eq!(ix.len(), 1);
    assert_eq!(ix.pick(Policy::Greedy, 10, PLAIN), Some(3));
}

// ---- greedy ----

#[test]
fn greedy_picks_fewest_valid_then_oldest_then_lowest_section() {
    let ix = index(
        10,
        512,
        &[
            (0, DATA, 40, 1),
            (1, DATA, 30, 9),
            (2, NODE, 30, 4),
            (3, DATA, 30, 4),
            (4, DATA, 31, 0),
        ],
    );
    // 30 valid: sections 1, 2, 3; stamps 9, 4, 4: sections 2 and 3 tie, 2 is lower.
    assert_eq!(ix.pick(Policy::Greedy, 100, PLAIN), Some(2));
}

#[test]
fn greedy_data_first_adds_a_section_of_cost_to_node_sections() {
    let ix = index(4, 512, &[(0, DATA, 500, 10), (1, NODE, 1, 0)]);
    // Node cost 1 + 512 against data cost 500.
    assert_eq!(ix.pick(Policy::Greedy, 100, DATA_FIRST), Some(0));
    // No penalty when node cleaning is required, or data-first is off.
    let required = PickOptions {
        node_gc_required: true,
        ..DATA_FIRST
    };
    assert_eq!(ix.pick(Policy::Greedy, 100, required), Some(1));
    assert_eq!(ix.pick(Policy::Greedy, 100, PLAIN), Some(1));
    // Node sections are still picked when no data section is left.
    let only_nodes = index(4, 512, &[(1, NODE, 300, 0), (2, NODE, 200, 5)]);
    assert_eq!(only_nodes.pick(Policy::Greedy, 100, DATA_FIRST), Some(2));
}

#[test]
fn greedy_data_first_full_data_ties_with_empty_node_by_age() {
    // Cost 512 both (512 + 0 for the node section): the older one wins.
    let ix = index(4, 512, &[(0, DATA, 512, 7), (1, NODE, 0, 3)]);
    assert_eq!(ix.pick(Policy::Greedy, 100, DATA_FIRST), Some(1));
    let ix = index(4, 512, &[(0, DATA, 512, 3), (1, NODE, 0, 7)]);
    assert_eq!(ix.pick(Policy::Greedy, 100, DATA_FIRST), Some(0));
}

// ---- cost-benefit ----

#[test]
fn cost_benefit_prefers_an_old_half_full_section_to_a_young_nearly_empty_one() {
    // Section 0: 51 of 512 valid, age 10: 461/563 * 10 = 8.19.
    // Section 1: 256 of 512 valid, age 30: 256/768 * 30 = 10.
    let ix = index(2, 512, &[(0, DATA, 51, 90), (1, DATA, 256, 70)]);
    assert_eq!(ix.pick(Policy::CostBenefit, 100, PLAIN), Some(1));
    // At age 24 section 1 scores 8 and loses.
    let ix = index(2, 512, &[(0, DATA, 51, 90), (1, DATA, 256, 76)]);
    assert_eq!(ix.pick(Policy::CostBenefit, 100, PLAIN), Some(0));
    // Greedy ignores age.
    assert_eq!(ix.pick(Policy::Greedy, 100, PLAIN), Some(0));
}

#[test]
fn cost_benefit_exact_ties_go_to_the_older_section_then_the_lower_number() {
    // 512/512 * 3 = 3 and 384/640 * 5 = 3: an exact tie; section 1 is older.
    let ix = index(4, 512, &[(0, DATA, 0, 97), (1, DATA, 128, 95)]);
    assert_eq!(ix.pick(Policy::CostBenefit, 100, PLAIN), Some(1));
    // Same score and same stamp: the lower section number.
    let ix = index(4, 512, &[(3, DATA, 128, 95), (2, NODE, 128, 95)]);
    assert_eq!(ix.pick(Policy::CostBenefit, 100, PLAIN), Some(2));
}

#[test]
fn near_ties_beyond_f64_precision_are_compared_exactly() {
    // Section 0: no valid block, age x = 2^60. Section 1: v valid blocks and an age that
    // brings its score within a few units of section 0's, on either side: the two scores
    // agree to far more digits than an f64 holds, so the quick comparison cannot decide,
    // and the rounding of the benefit table goes up for some v and down for others.
    let cap = 512u32;
    let x: u64 = 1 << 60;
    let now: u64 = 1 << 62;
    let atgc = Policy::AgeThreshold(Atgc::new(0));
    let mut checked = 0;
    for v in 1..64u32 {
        // Cost-benefit: (cap - v) / (cap + v) * y = x.
        let cb_age = u128::from(x) * u128::from(cap + v) / u128::from(cap - v);
        // Age-threshold (weight 60, span = y as section 1 is the older): 60 * cap * x +
        // 40 * cap * span = 60 * cap * y + 40 * (cap - v) * span, so
        // y = 60 * cap * x / (60 * cap - 40 * v), rounded.
        let at_age =
            60 * u128::from(cap) * u128::from(x) / (60 * u128::from(cap) - 40 * u128::from(v));
        for (policy, age) in [(Policy::CostBenefit, cb_age), (atgc, at_age)] {
            for d in -3i64..=3 {
                let y = u64::try_from(age).unwrap().checked_add_signed(d).unwrap();
                let entries = [(0, DATA, 0, now - x), (1, DATA, v, now - y)];
                let ix = index(2, cap, &entries);
                let model: Vec<Option<Entry>> = (0..2).map(|s| ix.get(s)).collect();
                assert_eq!(
                    ix.pick(policy, now, PLAIN),
                    brute(&model, cap, policy, now, PLAIN),
                    "{policy:?} v {v} d {d}"
                );
                checked += 1;
            }
        }
    }
    assert_eq!(checked, 63 * 2 * 7);
}

#[test]
fn cost_benefit_block_bound_allows_for_rounded_stamps() {
    // At 2^62 an f64 holds stamps to the nearest 512 or 1024: both sections' stamps round
    // to `now`. Section 1 (16 valid blocks, the second block of leaves, age 200) scores
    // 496/528 * 200 = 188, section 0 (no valid block, age 10) scores 10: the block of
    // section 1 must not be ruled out by its rounded ages of 0.
    let now: u64 = 1 << 62;
    let ix = index(2, 512, &[(0, DATA, 0, now - 10), (1, DATA, 16, now - 200)]);
    assert_eq!(ix.pick(Policy::CostBenefit, now, PLAIN), Some(1));
}

#[test]
fn cost_benefit_all_full_sections_pick_the_oldest() {
    // Every score is 0 (u = 1): the oldest, then the lowest number.
    for cap in [512, 2048] {
        let ix = index(
            8,
            cap,
            &[
                (5, DATA, cap, 30),
                (6, NODE, cap, 20),
                (2, DATA, cap, 20),
                (7, DATA, cap, 40),
            ],
        );
        assert_eq!(ix.pick(Policy::CostBenefit, 100, PLAIN), Some(2), "{cap}");
        assert_eq!(ix.pick(Policy::Greedy, 100, PLAIN), Some(2), "{cap}");
        assert_eq!(
            ix.pick(Policy::AgeThreshold(Atgc::new(10)), 100, PLAIN),
            Some(2),
            "{cap}"
        );
    }
}

#[test]
fn cost_benefit_stamps_newer_than_now_count_as_age_zero() {
    // Both ages saturate to 0: every score is 0, the older stamp wins.
    let ix = index(2, 512, &[(0, DATA, 1, 60), (1, DATA, 400, 55)]);
    assert_eq!(ix.pick(Policy::CostBenefit, 50, PLAIN), Some(1));
}

#[test]
fn cost_benefit_data_first_ranks_node_sections_by_their_own_score() {
    // A young data section beats an old node section while the penalty applies.
    let ix = index(4, 512, &[(0, DATA, 500, 99), (1, NODE, 1, 0)]);
    assert_eq!(ix.pick(Policy::CostBenefit, 100, DATA_FIRST), Some(0));
    assert_eq!(ix.pick(Policy::CostBenefit, 100, PLAIN), Some(1));
    // With only node sections the better score wins, not merely the older section, as
    // clamping both to u = 1 would have it: 502/522 * 100 = 96 against 112/912 * 120 = 15.
    // Section 2 is the older one.
    let ix = index(4, 512, &[(1, NODE, 10, 20), (2, NODE, 400, 0)]);
    assert_eq!(ix.pick(Policy::CostBenefit, 120, DATA_FIRST), Some(1));
}

// ---- age-threshold ----

#[test]
fn age_threshold_picks_among_old_sections_only() {
    // Section 0 is nearly empty but young; sections 1 and 2 are old enough.
    let ix = index(
        4,
        512,
        &[(0, DATA, 1, 950), (1, DATA, 300, 100), (2, DATA, 200, 400)],
    );
    let atgc = Atgc::new(500);
    // span = 1000 - 100 = 900. Section 1: 60 * 900 * 512 + 40 * 212 * 900;
    // section 2: 60 * 600 * 512 + 40 * 312 * 900. 1: 27648000 + 7632000 = 35280000;
    // 2: 18432000 + 11232000 = 29664000.
    assert_eq!(ix.pick(Policy::AgeThreshold(atgc), 1000, PLAIN), Some(1));
    // Weight 0: the fewest valid blocks among the old ones.
    let free_only = Atgc {
        threshold: 500,
        age_weight: 0,
    };
    assert_eq!(
        ix.pick(Policy::AgeThreshold(free_only), 1000, PLAIN),
        Some(2)
    );
    // Without a threshold the young, nearly empty section wins on free space at weight 0.
    let no_threshold = Atgc {
        threshold: 0,
        age_weight: 0,
    };
    assert_eq!(
        ix.pick(Policy::AgeThreshold(no_threshold), 1000, PLAIN),
        Some(0)
    );
    // Weight 100, and anything above it: the oldest.
    for age_weight in [100, 255] {
        let age_only = Atgc {
            threshold: 500,
            age_weight,
        };
        assert_eq!(
            ix.pick(Policy::AgeThreshold(age_only), 1000, PLAIN),
            Some(1)
        );
    }
}

#[test]
fn age_threshold_falls_back_to_every_section_when_none_is_old_enough() {
    // Nothing is 500 old: the same rule over all sections. span = 1000 - 900 = 100;
    // section 0: 60 * 80 * 512 + 40 * 511 * 100 = 4501600;
    // section 1: 60 * 100 * 512 + 40 * 212 * 100 = 3920000.
    let ix = index(4, 512, &[(0, DATA, 1, 920), (1, DATA, 300, 900)]);
    let atgc = Atgc::new(500);
    assert_eq!(ix.pick(Policy::AgeThreshold(atgc), 1000, PLAIN), Some(0));
    // Section 0 ten units younger: 60 * 70 * 512 + 2044000 = 4194400, still ahead; at
    // age 60 (3888400) section 1 wins.
    let ix = index(4, 512, &[(0, DATA, 1, 940), (1, DATA, 300, 900)]);
    assert_eq!(ix.pick(Policy::AgeThreshold(atgc), 1000, PLAIN), Some(1));
}

#[test]
fn age_threshold_data_first_puts_kind_before_threshold() {
    // The node section is old; the data section is young: data still comes first.
    let ix = index(4, 512, &[(0, DATA, 100, 990), (1, NODE, 10, 0)]);
    let atgc = Policy::AgeThreshold(Atgc::new(500));
    assert_eq!(ix.pick(atgc, 1000, DATA_FIRST), Some(0));
    assert_eq!(ix.pick(atgc, 1000, PLAIN), Some(1));
}

// ---- kind filter ----

#[test]
fn only_one_kind_ignores_the_other() {
    let ix = index(4, 512, &[(0, DATA, 100, 5), (1, NODE, 10, 5)]);
    let data_only = PickOptions {
        only: Some(DATA),
        ..PLAIN
    };
    let node_only = PickOptions {
        only: Some(NODE),
        ..DATA_FIRST
    };
    for policy in all_policies() {
        assert_eq!(ix.pick(policy, 100, data_only), Some(0), "{policy:?}");
        assert_eq!(ix.pick(policy, 100, node_only), Some(1), "{policy:?}");
    }
    let nodes = index(4, 512, &[(1, NODE, 10, 5)]);
    for policy in all_policies() {
        assert_eq!(nodes.pick(policy, 100, data_only), None, "{policy:?}");
    }
}

// ---- large sections ----

/// Fills `cap + 1` sections, one per valid count (so every bucket of one kind is used),
/// with stamps from a fixed generator, and checks every policy against the brute force.
fn dense_fill_agrees_with_brute_force(cap: u32) {
    let sections = 2 * (cap + 1);
    let mut ix = VictimIndex::new(sections, cap).unwrap();
    let mut model = vec![None; sections as usize];
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for sec in 0..sections {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let kind = if sec % 3 == 0 { NODE } else { DATA };
        let valid = sec % (cap + 1);
        let mtime = x % 10_000;
        ix.set(sec, kind, valid, mtime).unwrap();
        model[sec as usize] = Some(Entry { kind, valid, mtime });
    }
    ix.check_invariants();
    for now in [0, 5_000, 10_000, 1 << 40] {
        for policy in all_policies() {
            for opts in all_options() {
                assert_eq!(
                    ix.pick(policy, now, opts),
                    brute(&model, cap, policy, now, opts),
                    "cap {cap} now {now} {policy:?} {opts:?}"
                );
            }
        }
    }
}

#[test]
fn cap_512_dense_fill_agrees_with_brute_force() {
    dense_fill_agrees_with_brute_force(512);
}

#[test]
fn cap_2048_dense_fill_agrees_with_brute_force() {
    dense_fill_agrees_with_brute_force(2048);
}

#[test]
fn largest_section_and_stamp_compare_without_overflow() {
    // The widest values: cap 2^20, ages near 2^64.
    let cap = MAX_BLOCKS_PER_SECTION;
    let ix = index(
        3,
        cap,
        &[(0, DATA, 1, 0), (1, DATA, cap - 1, 1), (2, NODE, 0, 2)],
    );
    let now = u64::MAX;
    for policy in all_policies() {
        for opts in all_options() {
            let model = [ix.get(0), ix.get(1), ix.get(2)];
            assert_eq!(
                ix.pick(policy, now, opts),
                brute(&model, cap, policy, now, opts),
                "{policy:?} {opts:?}"
            );
        }
    }
    assert_eq!(ix.pick(Policy::CostBenefit, now, PLAIN), Some(2));
}

// ---- the brute-force model ----

fn all_options() -> Vec<PickOptions> {
    let mut v = Vec::new();
    for data_first in [false, true] {
        for node_gc_required in [false, true] {
            for only in [None, Some(DATA), Some(NODE)] {
                v.push(PickOptions {
                    data_first,
                    node_gc_required,
                    only,
                });
            }
        }
    }
    v
}

/// The pick, by scanning every section: the rules of the module documentation restated
/// as directly as possible.
fn brute(
    model: &[Option<Entry>],
    cap: u32,
    policy: Policy,
    now: u64,
    opts: PickOptions,
) -> Option<u32> {
    let allowed: Vec<(u32, Entry)> = model
        .iter()
        .enumerate()
        .filter_map(|(s, e)| Some((s as u32, (*e)?)))
        .filter(|(_, e)| opts.only.is_none_or(|k| k == e.kind))
        .collect();
    let penalty = opts.data_first && !opts.node_gc_required;
    let age = |e: &Entry| now.saturating_sub(e.mtime);
    let tiers: Vec<Vec<(u32, Entry)>> = if penalty {
        vec![
            allowed
                .iter()
                .copied()
                .filter(|(_, e)| e.kind == DATA)
                .collect(),
            allowed
                .iter()
                .copied()
                .filter(|(_, e)| e.kind == NODE)
                .collect(),
        ]
    } else {
        vec![allowed.clone()]
    };
    match policy {
        Policy::Greedy => allowed
            .iter()
            .min_by_key(|(s, e)| {
                let extra = if penalty && e.kind == NODE { cap } else { 0 };
                (u64::from(e.valid) + u64::from(extra), e.mtime, *s)
            })
            .map(|(s, _)| *s),
        Policy::CostBenefit => {
            // a/b, compared as a1 * b2 against a2 * b1.
            let score = |e: &Entry| {
                (
                    u128::from(cap - e.valid) * u128::from(age(e)),
                    u128::from(cap + e.valid),
                )
            };
            tiers.iter().find_map(|tier| {
                tier.iter()
                    .copied()
                    .reduce(|best, c| {
                        let ((a1, b1), (a2, b2)) = (score(&c.1), score(&best.1));
                        let (l, r) = (a1 * b2, a2 * b1);
                        if l > r || (l == r && (c.1.mtime, c.0) < (best.1.mtime, best.0)) {
                            c
                        } else {
                            best
                        }
                    })
                    .map(|(s, _)| s)
            })
        }
        Policy::AgeThreshold(atgc) => {
            let oldest = allowed.iter().map(|(_, e)| e.mtime).min()?;
            let span = u128::from(now.saturating_sub(oldest).max(1));
            let w = u128::from(atgc.age_weight.min(100));
            let score = |e: &Entry| {
                w * u128::from(age(e)) * u128::from(cap)
                    + (100 - w) * u128::from(cap - e.valid) * span
            };
            let best_over = |tier: &[(u32, Entry)], threshold: u64| {
                tier.iter()
                    .filter(|(_, e)| age(e) >= threshold)
                    .max_by(|x, y| {
                        score(&x.1)
                            .cmp(&score(&y.1))
                            .then((y.1.mtime, y.0).cmp(&(x.1.mtime, x.0)))
                    })
                    .map(|(s, _)| *s)
            };
            tiers
                .iter()
                .find_map(|tier| best_over(tier, atgc.threshold).or_else(|| best_over(tier, 0)))
        }
    }
}

// ---- property tests ----

#[derive(Clone, Debug)]
enum Op {
    Set {
        sec: u32,
        node: bool,
        valid: u32,
        mtime: u64,
    },
    Remove(u32),
    Pick {
        now: u64,
        threshold: u64,
        age_weight: u8,
    },
}

/// Operations on an index of `sections` sections of `cap` blocks: section numbers and
/// valid counts reach one past the end (to test the refusals), and stamps are drawn from
/// `base..base + stamps` so that ties are common. Pick times are `base + late` plus a
/// little: with `late` far beyond the stamps, ages differ by less than an `f64` can tell
/// apart; with `base` large, stamps do.
fn ops(
    sections: u32,
    cap: u32,
    base: u64,
    stamps: u64,
    late: u64,
) -> impl Strategy<Value = Vec<Op>> {
    let valid = prop_oneof![
        4 => 0..=cap + 1,
        1 => Just(0),
        1 => Just(cap),
        1 => (cap.saturating_sub(2))..=cap,
    ];
    let op = prop_oneof![
        6 => (0..=sections, any::<bool>(), valid, base..base + stamps).prop_map(|(sec, node, valid, mtime)| {
            Op::Set { sec, node, valid, mtime }
        }),
        2 => (0..=sections).prop_map(Op::Remove),
        3 => (
            base + late..base + late + stamps + stamps / 4,
            prop_oneof![0..stamps, late.saturating_sub(stamps)..late + stamps],
            prop_oneof![Just(60u8), 0..=120u8],
        )
            .prop_map(|(now, threshold, age_weight)| Op::Pick { now, threshold, age_weight }),
    ];
    proptest::collection::vec(op, 1..160)
}

fn run(sections: u32, cap: u32, ops: &[Op]) -> Result<(), TestCaseError> {
    let mut ix = VictimIndex::new(sections, cap).unwrap();
    let mut model: Vec<Option<Entry>> = vec![None; sections as usize];
    for op in ops {
        match *op {
            Op::Set {
                sec,
                node,
                valid,
                mtime,
            } => {
                let kind = if node { NODE } else { DATA };
                let got = ix.set(sec, kind, valid, mtime);
                if sec >= sections {
                    prop_assert_eq!(got, Err(VictimError::SectionOutOfRange { sec, sections }));
                } else if valid > cap {
                    prop_assert_eq!(got, Err(VictimError::ValidOutOfRange { sec, valid, cap }));
                } else {
                    let slot = &mut model[sec as usize];
                    prop_assert_eq!(got, Ok(*slot));
                    *slot = Some(Entry { kind, valid, mtime });
                }
            }
            Op::Remove(sec) => {
                let want = model.get_mut(sec as usize).and_then(Option::take);
                prop_assert_eq!(ix.remove(sec), want);
            }
            Op::Pick {
                now,
                threshold,
                age_weight,
            } => {
                let atgc = Atgc {
                    threshold,
                    age_weight,
                };
                for policy in [
                    Policy::Greedy,
                    Policy::CostBenefit,
                    Policy::AgeThreshold(atgc),
                ] {
                    for opts in all_options() {
                        prop_assert_eq!(
                            ix.pick(policy, now, opts),
                            brute(&model, cap, policy, now, opts),
                            "{:?} now {} {:?}",
                            policy,
                            now,
                            opts
                        );
                    }
                }
            }
        }
        ix.check_invariants();
        prop_assert_eq!(ix.len(), model.iter().flatten().count());
        for (sec, want) in model.iter().enumerate() {
            prop_assert_eq!(ix.get(sec as u32), *want);
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Small sections: many sections share a valid count, so ties within and across
    /// buckets are common.
    #[test]
    fn picks_match_brute_force_small_sections(
        (sections, cap, ops) in (1u32..40, prop_oneof![Just(1u32), Just(2), Just(3), Just(7), Just(16)])
            .prop_flat_map(|(s, c)| (Just(s), Just(c), ops(s, c, 0, 24, 0)))
    ) {
        run(sections, cap, &ops)?;
    }

    /// Real section sizes: deep trees, sparse buckets.
    #[test]
    fn picks_match_brute_force_real_sections(
        (sections, cap, ops) in (1u32..64, prop_oneof![Just(512u32), Just(2048), Just(1000)])
            .prop_flat_map(|(s, c)| (Just(s), Just(c), ops(s, c, 0, 1_000, 0)))
    ) {
        run(sections, cap, &ops)?;
    }

    /// Ages near 2^60 that differ by less than an `f64`'s precision: every such
    /// comparison falls through to the exact one.
    #[test]
    fn picks_match_brute_force_beyond_f64_precision(
        (sections, cap, ops) in (1u32..48, prop_oneof![Just(3u32), Just(512), Just(2048)])
            .prop_flat_map(|(s, c)| (Just(s), Just(c), ops(s, c, 0, 1_000, 1 << 60)))
    ) {
        run(sections, cap, &ops)?;
    }

    /// Stamps near 2^62, where an `f64` rounds them to multiples of 1024: small ages
    /// vanish in the rounding.
    #[test]
    fn picks_match_brute_force_with_stamps_beyond_f64_precision(
        (sections, cap, ops) in (1u32..48, prop_oneof![Just(3u32), Just(512), Just(2048)])
            .prop_flat_map(|(s, c)| (Just(s), Just(c), ops(s, c, 1 << 62, 5_000, 0)))
    ) {
        run(sections, cap, &ops)?;
    }
}
