//! The findings list of a report, bounded (`--max-findings`, `CONVENTIONS.md` section 6): the
//! counts stay exact in the totals; the list keeps, per kind, the findings that explain the most
//! dead work, then the newest. A chain judged again takes its findings back out exactly.

use std::cmp::Reverse;
use std::collections::BTreeMap;

use super::{Finding, FindingKind, TraceId};

/// The default for `--max-findings`.
pub const DEFAULT_MAX_FINDINGS: usize = 10_000;

/// Where a finding ranks within its kind: most dead work first, then the newest (the latest
/// fold), then by trace and its place in its chain's list (unique: lists read back from
/// several reports may reuse a fold number).
type Rank = (Reverse<i64>, Reverse<u64>, TraceId, u32);

/// The bounded findings list; see the module documentation.
#[derive(Clone, Debug)]
pub struct FindingList {
    max: usize,
    by_kind: Vec<BTreeMap<Rank, Finding>>,
    /// Findings offered and not taken back: listed + omitted.
    offered: u64,
}

impl Default for FindingList {
    fn default() -> Self {
        FindingList::new(DEFAULT_MAX_FINDINGS)
    }
}

impl FindingList {
    /// An empty list that keeps at most `max` findings.
    pub fn new(max: usize) -> Self {
        FindingList {
            max,
            by_kind: vec![BTreeMap::new(); FindingKind::COUNT],
            offered: 0,
        }
    }

    fn rank(f: &Finding, seq: u64, place: usize) -> Rank {
        (
            Reverse(f.wasted_ms.unwrap_or(0)),
            Reverse(seq),
            f.trace_id,
            u32::try_from(place).unwrap_or(u32::MAX),
        )
    }

    /// Offer the findings of one chain folded as the `seq`-th fold (a number that grows with
    /// each fold). Each kind keeps at most `max` (the report picks among kinds).
    pub fn offer(&mut self, findings: &[Finding], seq: u64) {
        for (place, f) in findings.iter().enumerate() {
            self.offered += 1;
            let kept = &mut self.by_kind[f.kind as usize];
            kept.insert(Self::rank(f, seq, place), f.clone());
            if kept.len() > self.max {
                kept.pop_last();
            }
        }
    }

    /// Take back the findings of a chain offered with [`offer`](Self::offer) as fold `seq`.
    pub fn withdraw(&mut self, findings: &[Finding], seq: u64) {
        for (place, f) in findings.iter().enumerate() {
            self.offered = self.offered.saturating_sub(1);
            self.by_kind[f.kind as usize].remove(&Self::rank(f, seq, place));
        }
    }

    /// Add another list's findings (as if offered here), keeping the bound.
    pub fn merge(&mut self, other: &FindingList) {
        self.offered += other.offered;
        for (kept, theirs) in self.by_kind.iter_mut().zip(&other.by_kind) {
            for (rank, f) in theirs {
                kept.insert(*rank, f.clone());
                if kept.len() > self.max {
                    kept.pop_last();
                }
            }
        }
    }

    /// Count `n` findings that were offered elsewhere and not kept (a report read back lists
    /// only some of its findings).
    pub fn count_unlisted(&mut self, n: u64) {
        self.offered += n;
    }

    /// Findings offered and not taken back.
    pub fn offered(&self) -> u64 {
        self.offered
    }

    /// The list a report shows: at most `max` findings, taken from every kind in turn (each
    /// kind's best first), so no kind is crowded out; ordered by trace id, then as each chain
    /// listed them.
    pub fn listed(&self) -> Vec<Finding> {
        let mut iters: Vec<_> = self.by_kind.iter().map(|m| m.iter().peekable()).collect();
        let mut picked: Vec<(&Rank, &Finding)> = Vec::new();
        'fill: while picked.len() < self.max {
            let mut any = false;
            for it in &mut iters {
                if let Some(next) = it.next() {
                    picked.push(next);
                    any = true;
                    if picked.len() == self.max {
                        break 'fill;
                    }
                }
            }
            if !any {
                break;
            }
        }
        picked.sort_by(|(ra, a), (rb, b)| {
            (a.trace_id, Reverse(ra.1), ra.3).cmp(&(b.trace_id, Reverse(rb.1), rb.3))
        });
        picked.into_iter().map(|(_, f)| f.clone()).collect()
    }
}
