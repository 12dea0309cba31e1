//! Closed segments kept by valid count, for the models' exact greedy pick (greedy.rs,
//! floor.rs): the segment with the fewest valid blocks is found by a short upward scan from
//! the lowest bucket that may hold one, and a segment moves between buckets in O(1).

const NONE: u32 = u32::MAX;

pub struct Buckets {
    /// Segments by valid count.
    by_valid: Vec<Vec<u32>>,
    /// Each segment's index in its bucket, or NONE when it is in none.
    slot: Vec<u32>,
    /// The lowest bucket that may be non-empty.
    lowest: usize,
}

impl Buckets {
    /// Room for `segments` segments of up to `blocks` valid blocks each.
    pub fn new(segments: u32, blocks: u32) -> Buckets {
        Buckets {
            by_valid: vec![Vec::new(); blocks as usize + 1],
            slot: vec![NONE; segments as usize],
            lowest: 0,
        }
    }

    pub fn contains(&self, seg: u32) -> bool {
        self.slot[seg as usize] != NONE
    }

    /// Files `seg`, which holds `valid` blocks.
    pub fn insert(&mut self, seg: u32, valid: u32) {
        let v = valid as usize;
        self.slot[seg as usize] = self.by_valid[v].len() as u32;
        self.by_valid[v].push(seg);
        self.lowest = self.lowest.min(v);
    }

    /// Takes `seg` out; `valid` is the count it was filed under.
    pub fn remove(&mut self, seg: u32, valid: u32) {
        let v = valid as usize;
        let i = self.slot[seg as usize] as usize;
        self.by_valid[v].swap_remove(i);
        if let Some(&moved) = self.by_valid[v].get(i) {
            self.slot[moved as usize] = i as u32;
        }
        self.slot[seg as usize] = NONE;
    }

    /// A segment with the fewest valid blocks, and that count; none if every bucket is empty.
    pub fn fewest(&mut self) -> Option<(u32, u32)> {
        while self.by_valid.get(self.lowest)?.is_empty() {
            self.lowest += 1;
        }
        let seg = *self.by_valid[self.lowest].first()?;
        Some((seg, self.lowest as u32))
    }

    /// The valid blocks of the `n` segments with the fewest (fewer if fewer are filed).
    pub fn fewest_sum(&self, n: u32) -> u64 {
        let (mut left, mut sum) = (n as usize, 0u64);
        for (valid, segs) in self.by_valid.iter().enumerate().skip(self.lowest) {
            let take = left.min(segs.len());
            sum += (take * valid) as u64;
            left -= take;
            if left == 0 {
                break;
            }
        }
        sum
    }
}
