//! Placeholder victim index (a scan), replaced by the exact index of branch h-victim.

use std::collections::BTreeMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Data,
    Node,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    Greedy,
    CostBenefit,
    AgeThreshold,
}

pub struct Pick {
    pub policy: Policy,
    pub now: u64,
    pub node_penalty: u32,
    pub only: Option<Kind>,
}

pub struct VictimIndex {
    cap: u32,
    map: BTreeMap<u32, (Kind, u32, u64)>,
}

impl VictimIndex {
    pub fn new(_sections: u32, cap: u32) -> VictimIndex {
        VictimIndex {
            cap,
            map: BTreeMap::new(),
        }
    }
    pub fn set(&mut self, sec: u32, kind: Kind, valid: u32, stamp: u64) {
        self.map.insert(sec, (kind, valid, stamp));
    }
    pub fn remove(&mut self, sec: u32) {
        self.map.remove(&sec);
    }
    pub fn len(&self) -> usize {
        self.map.len()
    }
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
    pub fn pick(&self, p: &Pick) -> Option<u32> {
        let cap = f64::from(self.cap);
        self.map
            .iter()
            .filter(|(_, (k, _, _))| p.only.is_none_or(|o| o == *k))
            .map(|(&sec, &(k, v, stamp))| {
                let v = v + if k == Kind::Node { p.node_penalty } else { 0 };
                let cost = match p.policy {
                    Policy::Greedy | Policy::AgeThreshold => f64::from(v),
                    Policy::CostBenefit => {
                        let u = (f64::from(v) / cap).min(1.0);
                        let age = p.now.saturating_sub(stamp) as f64 + 1.0;
                        -((1.0 - u) / (1.0 + u) * age)
                    }
                };
                (cost, sec)
            })
            .min_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)))
            .map(|(_, s)| s)
    }
}
