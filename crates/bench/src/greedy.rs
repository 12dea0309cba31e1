//! The greedy limit: the write amplification of exact greedy cleaning under uniform random
//! overwrites, the floor beside which gc-waf prints uf2fs's and Linux's figures.
//!
//! The model is one log of `segments` segments of `blocks` blocks, holding `utilisation`
//! of its physical blocks as live data, overwritten one block at a time at uniformly random
//! logical addresses. Writes fill one open segment; when it is full the next comes from the
//! free ones, and when none is free the closed segment with the fewest valid blocks is
//! cleaned: its valid blocks are copied to the start of it, and it becomes the open segment.
//! Under uniform random writes greedy is the best online policy (Yang, Misra and Rubenstein,
//! SIGMETRICS 2015), so no cleaner beats this on that workload; F2FS's metadata (node, NAT,
//! SIT, SSA, checkpoint blocks) comes on top.
//!
//! WAF = (user writes + blocks copied) / user writes, measured over 8x the live data after a
//! warm-up of 4x from a sequential fill. Segments are kept in buckets by valid count, so a
//! pick is a short upward scan from the lowest non-empty bucket.

use crate::buckets::Buckets;
use std::collections::VecDeque;

/// Warm-up and measured writes, as multiples of the live blocks.
const WARM_UP: u64 = 4;
const MEASURED: u64 = 8;
/// No block: a free physical slot, or a segment in no bucket.
const NONE: u32 = u32::MAX;

/// Which logical blocks the overwrites pick.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Skew {
    /// Uniform over the live blocks.
    Uniform,
    /// `share` % of the writes to the first `pct` % of the blocks, the rest to the others,
    /// uniform within each region (wload-skew's hotcold).
    HotCold { pct: u32, share: u32 },
    /// Ranks from a Zipf(`theta`) distribution, rank r at block r (wload-skew spreads the
    /// ranks over the file; one log has no notion of where a block is, so that changes
    /// nothing here).
    Zipf { theta: f64 },
}

/// The greedy WAF under uniform writes, or why there is none (no room to clean).
#[cfg(test)]
pub fn waf(segments: u32, blocks: u32, utilisation: f64) -> Result<f64, String> {
    waf_skewed(segments, blocks, utilisation, Skew::Uniform)
}

/// The WAF of exact greedy cleaning of one log (no hot/cold separation) under `skew`: the
/// single-log greedy figure the skewed workloads are judged against.
pub fn waf_skewed(segments: u32, blocks: u32, utilisation: f64, skew: Skew) -> Result<f64, String> {
    if segments < 3 || blocks == 0 || !(0.0..1.0).contains(&utilisation) {
        return Err(format!(
            "greedy: no model for {segments} segments of {blocks} blocks at {utilisation}"
        ));
    }
    let live = (utilisation * f64::from(segments) * f64::from(blocks)) as u64;
    if live == 0 || live + u64::from(blocks) >= u64::from(segments - 1) * u64::from(blocks) {
        return Err(format!(
            "greedy: {live} live blocks leave no room to clean in {segments} x {blocks}"
        ));
    }
    let mut log = Log::new(segments, blocks, live as u32);
    let mut rng = crate::splitmix::SplitMix(0x05ee_d0f6_eed1);
    let mut pick = picker(skew, live)?;
    for _ in 0..live * WARM_UP {
        log.overwrite(pick(&mut rng))?;
    }
    let (user0, moved0) = (log.user, log.moved);
    for _ in 0..live * MEASURED {
        log.overwrite(pick(&mut rng))?;
    }
    let user = (log.user - user0) as f64;
    Ok((user + (log.moved - moved0) as f64) / user)
}

/// Draws the next overwritten logical block.
type Picker = Box<dyn FnMut(&mut crate::splitmix::SplitMix) -> u32>;

/// A sampler of logical blocks in `0..live` for `skew`.
pub(crate) fn picker(skew: Skew, live: u64) -> Result<Picker, String> {
    let unit =
        |rng: &mut crate::splitmix::SplitMix| (rng.next() >> 11) as f64 / (1u64 << 53) as f64;
    Ok(match skew {
        Skew::Uniform => Box::new(move |rng| rng.below(live) as u32),
        Skew::HotCold { pct, share } => {
            if pct == 0 || pct >= 100 || share > 100 {
                return Err(format!("greedy: hot/cold {pct}% / {share}% makes no model"));
            }
            let hot = (live * u64::from(pct) / 100).clamp(1, live - 1);
            Box::new(move |rng| {
                if rng.below(100) < u64::from(share) {
                    rng.below(hot) as u32
                } else {
                    (hot + rng.below(live - hot)) as u32
                }
            })
        }
        Skew::Zipf { theta } => {
            if theta.is_nan() || theta < 0.0 {
                return Err(format!("greedy: Zipf exponent {theta}"));
            }
            let mut cdf = Vec::with_capacity(live as usize);
            let mut sum = 0.0;
            for r in 0..live {
                sum += ((r + 1) as f64).powf(-theta);
                cdf.push(sum);
            }
            for c in &mut cdf {
                *c /= sum;
            }
            Box::new(move |rng| {
                let x = unit(rng);
                cdf.partition_point(|&c| c < x).min(live as usize - 1) as u32
            })
        }
    })
}

struct Log {
    blocks: u32,
    /// Physical slot of each logical block.
    where_is: Vec<u32>,
    /// Logical block in each physical slot, or NONE.
    holds: Vec<u32>,
    /// Valid blocks per segment.
    valid: Vec<u32>,
    /// Closed segments by valid count.
    closed: Buckets,
    free: VecDeque<u32>,
    open: u32,
    next: u32,
    user: u64,
    moved: u64,
}

impl Log {
    /// A log with `live` blocks written in order from segment 0.
    fn new(segments: u32, blocks: u32, live: u32) -> Log {
        let slots = segments as usize * blocks as usize;
        let mut log = Log {
            blocks,
            where_is: vec![NONE; live as usize],
            holds: vec![NONE; slots],
            valid: vec![0; segments as usize],
            closed: Buckets::new(segments, blocks),
            free: (1..segments).collect(),
            open: 0,
            next: 0,
            user: 0,
            moved: 0,
        };
        for lba in 0..live {
            log.place(lba);
        }
        log
    }

    fn overwrite(&mut self, lba: u32) -> Result<(), String> {
        let old = self.where_is[lba as usize];
        self.holds[old as usize] = NONE;
        let seg = old / self.blocks;
        if !self.closed.contains(seg) {
            self.valid[seg as usize] -= 1;
        } else {
            self.unbucket(seg);
            self.valid[seg as usize] -= 1;
            self.bucket(seg);
        }
        if self.next == self.blocks {
            self.advance()?;
        }
        self.place(lba);
        self.user += 1;
        Ok(())
    }

    /// Writes `lba` at the open segment's next slot (which must exist).
    fn place(&mut self, lba: u32) {
        if self.next == self.blocks {
            // Only during the initial fill, which never needs cleaning.
            self.bucket(self.open);
            self.open = self.free.pop_front().unwrap_or(self.open);
            self.next = 0;
        }
        let at = self.open * self.blocks + self.next;
        self.holds[at as usize] = lba;
        self.where_is[lba as usize] = at;
        self.valid[self.open as usize] += 1;
        self.next += 1;
    }

    /// Closes the full open segment and opens another: a free one, or the greedy victim
    /// with its valid blocks copied to its start.
    fn advance(&mut self) -> Result<(), String> {
        self.bucket(self.open);
        if let Some(seg) = self.free.pop_front() {
            self.open = seg;
            self.next = 0;
            return Ok(());
        }
        let victim = match self.closed.fewest() {
            Some((seg, valid)) if valid < self.blocks => seg,
            _ => return Err("greedy: every segment is full of valid blocks".into()),
        };
        self.unbucket(victim);
        let base = victim * self.blocks;
        let survivors: Vec<u32> = (base..base + self.blocks)
            .filter_map(|p| Some(self.holds[p as usize]).filter(|&l| l != NONE))
            .collect();
        for p in base..base + self.blocks {
            self.holds[p as usize] = NONE;
        }
        self.valid[victim as usize] = 0;
        self.open = victim;
        self.next = 0;
        for lba in survivors {
            self.place(lba);
            self.moved += 1;
        }
        Ok(())
    }

    fn bucket(&mut self, seg: u32) {
        self.closed.insert(seg, self.valid[seg as usize]);
    }

    fn unbucket(&mut self, seg: u32) {
        self.closed.remove(seg, self.valid[seg as usize]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn low_utilisation_costs_little() {
        let w = waf(200, 64, 0.25).unwrap();
        assert!((1.0..1.3).contains(&w), "WAF {w}");
    }

    #[test]
    fn high_utilisation_costs_more() {
        // Uniform random writes at u = 0.8: greedy's WAF is about 3 (the analytic
        // approximation 1/(1-a) with a from a large log gives ~3.1).
        let w = waf(400, 128, 0.8).unwrap();
        assert!((2.5..3.8).contains(&w), "WAF {w}");
    }

    #[test]
    fn a_full_log_has_no_limit() {
        assert!(waf(10, 64, 0.99).is_err());
    }

    #[test]
    fn skew_costs_one_log_more_than_uniform() {
        // One log mixes hot and cold blocks, so greedy keeps copying cold data: the
        // textbook result (Rosenblum and Ousterhout) that skew hurts greedy in one log.
        let uniform = waf(400, 128, 0.8).unwrap();
        let hot_cold = waf_skewed(400, 128, 0.8, Skew::HotCold { pct: 20, share: 80 }).unwrap();
        let zipf = waf_skewed(400, 128, 0.8, Skew::Zipf { theta: 0.9 }).unwrap();
        assert!(
            hot_cold > uniform,
            "hot/cold {hot_cold} vs uniform {uniform}"
        );
        assert!(zipf > 1.0 && zipf.is_finite(), "zipf {zipf}");
        assert!(waf_skewed(400, 128, 0.8, Skew::HotCold { pct: 0, share: 80 }).is_err());
    }
}
