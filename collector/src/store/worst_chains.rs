//! The chains kept whole past their eviction for the HTML page: a few per finding kind, the
//! worst, within a share of `--max-spans`.

use deadline_budget::analysis::{FindingKind, TraceId};

use super::{Entry, Store, WORST_CHAINS_PER_KIND, WORST_CHAINS_SHARE};

/// The chains kept whole past their eviction for the HTML page: per finding kind, at most
/// [`WORST_CHAINS_PER_KIND`], the ones whose findings of the kind explain the most dead work
/// (then the chain's own); all of them together within a quarter of `--max-spans`.
#[derive(Debug)]
pub(super) struct WorstChains {
    /// Per kind: (its findings' largest wasted ms, the chain's wasted ms, the chain).
    pub(super) per_kind: Vec<Vec<(i64, i64, TraceId)>>,
}

impl Default for WorstChains {
    fn default() -> Self {
        WorstChains {
            per_kind: vec![Vec::new(); FindingKind::COUNT],
        }
    }
}

impl WorstChains {
    /// The chains kept, each once.
    pub(super) fn chains(&self) -> Vec<TraceId> {
        let mut all: Vec<TraceId> = self.per_kind.iter().flatten().map(|p| p.2).collect();
        all.sort_unstable();
        all.dedup();
        all
    }
}

impl Store {
    /// Keeps a chain being evicted for each of its finding kinds it is among the worst of,
    /// within [`WORST_CHAINS_SHARE`] of the bound; returns the chains kept before that no kind
    /// keeps any longer (to be let go).
    pub(super) fn keep_if_worst(&mut self, trace_id: TraceId, entry: &mut Entry) -> Vec<TraceId> {
        let Some(analysis) = entry.analysis.as_ref() else {
            return Vec::new();
        };
        if analysis.findings.is_empty() {
            return Vec::new();
        }
        let chain_wasted = analysis.summary.wasted_ms;
        let mut worst = [None::<i64>; FindingKind::COUNT];
        for f in &analysis.findings {
            let w = f.wasted_ms.unwrap_or(0);
            let slot = &mut worst[f.kind as usize];
            *slot = Some(slot.map_or(w, |v| v.max(w)));
        }
        // The kinds it is among the worst of, and the chain each would displace.
        let mut wins: Vec<(usize, Option<usize>)> = Vec::new();
        for (kind, w) in worst.iter().enumerate() {
            let Some(w) = *w else { continue };
            let kept = &self.worst.per_kind[kind];
            if kept.len() < WORST_CHAINS_PER_KIND {
                wins.push((kind, None));
                continue;
            }
            let least = kept
                .iter()
                .enumerate()
                .min_by_key(|(_, p)| (p.0, p.1))
                .filter(|(_, p)| (p.0, p.1) < (w, chain_wasted));
            if let Some((i, _)) = least {
                wins.push((kind, Some(i)));
            }
        }
        if wins.is_empty() {
            return Vec::new();
        }
        let kept_spans: usize = self
            .worst
            .chains()
            .iter()
            .filter_map(|id| self.chains.get(id))
            .map(|e| e.chain.len())
            .sum();
        if kept_spans + entry.chain.len() > self.max_spans / WORST_CHAINS_SHARE {
            return Vec::new();
        }
        let mut released = Vec::new();
        for (kind, displaced) in wins {
            let Some(w) = worst[kind] else { continue };
            let kept = &mut self.worst.per_kind[kind];
            if let Some(i) = displaced {
                let (_, _, gone) = kept.swap_remove(i);
                if let Some(e) = self.chains.get_mut(&gone) {
                    e.worst_of_kinds = e.worst_of_kinds.saturating_sub(1);
                    if e.worst_of_kinds == 0 {
                        released.push(gone);
                    }
                }
            }
            kept.push((w, chain_wasted, trace_id));
            entry.worst_of_kinds += 1;
        }
        released
    }

    /// The chains kept whole past their eviction for the page (a few per finding kind).
    pub fn worst_chains(&self) -> Vec<TraceId> {
        self.worst.chains()
    }
}
