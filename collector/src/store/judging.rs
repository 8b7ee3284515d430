//! Analysing and judging: a chain a span joined analysed again (what the screen shows of it,
//! and a judged chain's contribution replaced in the totals), and a chain judged once it has
//! been quiet for `--settle`, when it is evicted, or at a report (`CONVENTIONS.md` section 6),
//! with its calls that lost their context judged across the chains held. A chain judged for
//! the first time is handed on with its spans as received when the store keeps them.

use deadline_budget::analysis::{
    ChainAnalysis, EdgeSample, LostContext, Options, TraceId, lost_contexts,
};

use super::received::Holding;
use super::samples::EdgeSamples;
use super::two_threads::ANALYSED_AT_ONCE;
use super::verdicts::{Fate, HopRows, Verdicts};
use super::{Entry, LatestAnalysis, Store, StoreCounters};

impl Store {
    /// Analyses one entry now (what the screen shows of it); a judged chain is judged again:
    /// its old contribution taken out of the totals, the new one folded in. Returns the fresh
    /// edge samples, held packed too unless the chain is [`Fate::Leaving`].
    pub(super) fn analyse_entry(
        entry: &mut Entry,
        options: &Options,
        counters: &mut StoreCounters,
        verdicts: &mut Verdicts,
        fate: Fate,
    ) -> Vec<EdgeSample> {
        Self::take_analysis(entry, None, options, counters, verdicts, fate)
    }

    /// [`Store::analyse_entry`] with the chain's analysis when it was made already (on another
    /// thread: it is a function of the chain alone).
    pub(super) fn take_analysis(
        entry: &mut Entry,
        made: Option<ChainAnalysis>,
        options: &Options,
        counters: &mut StoreCounters,
        verdicts: &mut Verdicts,
        fate: Fate,
    ) -> Vec<EdgeSample> {
        entry.dirty = false;
        if fate == Fate::Staying {
            entry.chain.shrink_to_fit();
        }
        entry.attributes.shrink();
        let held = entry.attributes.bytes_held();
        counters.attribute_bytes =
            counters.attribute_bytes + held as u64 - entry.attribute_bytes as u64;
        entry.attribute_bytes = held;
        let mut fresh = made.unwrap_or_else(|| entry.chain.analyse(options));
        let mut edges = std::mem::take(&mut fresh.edges);
        if !entry.lost.is_empty() {
            fresh.fold_lost_contexts(&mut edges, &entry.lost, &entry.chain);
        }
        let old_hops = std::mem::replace(&mut entry.hop_rows, HopRows::of(&fresh, &entry.chain));
        // The rows are rebuilt for the few chains a person opens ([`Store::analysis`]).
        fresh.rows = Vec::new();
        let trace_id = entry.chain.trace_id();
        let old = entry.analysis.as_mut().map(|held| held.lend(trace_id));
        // The old samples name services by positions of spans that are still there with the
        // same service (see `insert_span`).
        let old_edges =
            (old.is_some() && entry.judged.is_some()).then(|| entry.edge_samples(options));
        entry.samples = match fate {
            Fate::Staying => Some(EdgeSamples::pack(&edges, &entry.chain)),
            Fate::Leaving => Some(EdgeSamples::default()),
            Fate::Final => None,
        };
        if let Some(judged) = entry.judged.take() {
            if let (Some(old), Some(old_edges)) = (&old, old_edges) {
                verdicts.unfold(&judged, old, &old_hops, &old_edges, &entry.chain);
            }
            counters.chains_rejudged += 1;
            verdicts.fold(entry, &fresh, &edges);
        }
        // Into the old one's place when there is one: no allocation.
        match entry.analysis.as_mut() {
            Some(held) => held.put(fresh),
            None => entry.analysis = Some(Box::new(LatestAnalysis::of(fresh))),
        }
        edges
    }

    /// Judges one entry that is not judged yet: analysed first if a span joined it since, and
    /// with its calls that lost their context among `lost` (judged across the chains held).
    /// Returns the samples folded when it was analysed now (held packed unless it is leaving).
    pub(super) fn judge_entry(
        entry: &mut Entry,
        made: Option<ChainAnalysis>,
        options: &Options,
        counters: &mut StoreCounters,
        verdicts: &mut Verdicts,
        lost: &[LostContext],
        fate: Fate,
    ) -> Option<Vec<EdgeSample>> {
        if entry.judged.is_some() {
            return None;
        }
        let analysed = entry.dirty || entry.analysis.is_none();
        let mut edges = if analysed {
            Self::take_analysis(entry, made, options, counters, verdicts, fate)
        } else {
            entry.edge_samples(options)
        };
        let trace_id = entry.chain.trace_id();
        let mine: Vec<LostContext> = lost
            .iter()
            .filter(|l| l.finding.trace_id == trace_id)
            .cloned()
            .collect();
        let Some(held) = entry.analysis.as_mut() else {
            return analysed.then_some(edges);
        };
        let mut analysis = held.lend(trace_id);
        if !mine.is_empty() {
            analysis.fold_lost_contexts(&mut edges, &mine, &entry.chain);
            entry.lost = mine;
            match fate {
                // Made again with the lost contexts just kept, should anything ask.
                Fate::Final => entry.samples = None,
                _ if !analysed || fate == Fate::Staying => {
                    entry.samples = Some(EdgeSamples::pack(&edges, &entry.chain));
                }
                _ => {}
            }
        }
        verdicts.fold(entry, &analysis, &edges);
        if let Some(held) = entry.analysis.as_mut() {
            held.put(analysis);
        }
        analysed.then_some(edges)
    }

    /// A chain judged just now, with its spans as received, for [`Store::take_handoffs`] (when
    /// the store keeps them): handed on once, at its first verdict.
    pub(super) fn hand_on(entry: &mut Entry, holding: Option<&mut Holding>) {
        let (Some(holding), Some(held)) = (holding, entry.analysis.as_deref()) else {
            return;
        };
        if entry.judged.is_none() {
            return;
        }
        let verdict = || {
            let mut kinds = deadline_budget::analysis::KindSet::default();
            for finding in &held.findings {
                kinds.insert(finding.kind);
            }
            (kinds, held.summary.wasted_ms)
        };
        let trace_id = entry.chain.trace_id();
        holding.judged(trace_id, &mut entry.received, held.summary.worst, verdict);
    }

    /// Analyses every chain a span joined since the last call; returns how many.
    pub fn analyse_dirty(&mut self) -> usize {
        self.analyse_dirty_within(None)
    }

    /// As [`Store::analyse_dirty`], but stops once `budget` has passed (checked every few
    /// chains), leaving the rest, oldest first, for the next call: the screen's loop analyses a
    /// burst a slice per frame instead of holding up the keys for one long pass.
    pub fn analyse_dirty_for(&mut self, budget: std::time::Duration) -> usize {
        self.analyse_dirty_within(Some(std::time::Instant::now() + budget))
    }

    pub(super) fn analyse_dirty_within(&mut self, deadline: Option<std::time::Instant>) -> usize {
        if self.two_threads && deadline.is_none() && self.dirty.len() >= 2 * ANALYSED_AT_ONCE {
            return self.analyse_dirty_on_two_threads();
        }
        let dirty = std::mem::take(&mut self.dirty);
        let mut analysed: usize = 0;
        let mut rest = dirty.into_iter();
        for trace_id in rest.by_ref() {
            let Some(entry) = self.chains.get_mut(&trace_id) else {
                continue; // evicted since
            };
            if entry.dirty {
                Self::analyse_entry(
                    entry,
                    &self.options,
                    &mut self.counters,
                    &mut self.verdicts,
                    Fate::Staying,
                );
                analysed += 1;
            }
            if analysed.is_multiple_of(32)
                && deadline.is_some_and(|d| std::time::Instant::now() >= d)
            {
                break;
            }
        }
        // What is left keeps its place ahead of chains that turn dirty later.
        let mut left: Vec<TraceId> = rest.collect();
        if !left.is_empty() {
            left.append(&mut self.dirty);
            self.dirty = left;
        }
        analysed
    }

    /// Judges every chain that has been quiet for `--settle` by the store's clock
    /// ([`Store::set_clock`]); returns how many. Looks at most ten times a settle period.
    pub fn judge_settled(&mut self) -> usize {
        let now = self.clock_unix_nano;
        if now
            < self
                .settled_at_unix_nano
                .saturating_add(self.settle_ns / 10)
        {
            return 0;
        }
        self.settled_at_unix_nano = now;
        let settle = self.settle_ns;
        // A chain that arrived less than `settle` ago cannot be quiet for that long yet.
        let arrived_before = now.saturating_sub(settle).saturating_add(1);
        self.judge_where(
            |e| e.last_span_unix_nano.saturating_add(settle) <= now,
            arrived_before,
            Fate::Staying,
        )
    }

    /// Judges every chain held that is not judged yet (the end of a run, or a report).
    pub fn judge_all(&mut self) -> usize {
        self.judge_where(|_| true, u64::MAX, Fate::Staying)
    }

    /// Judges the chains `due` says are, looking at the unjudged ones in arrival order up to
    /// the first that arrived at or after `arrived_before` (none after it can be due): a
    /// listening store's tick then looks at the chains of the last `settle`, not at every one.
    pub(super) fn judge_where(
        &mut self,
        due: impl Fn(&Entry) -> bool,
        arrived_before: u64,
        fate: Fate,
    ) -> usize {
        let mut now: Vec<TraceId> = Vec::new();
        // Of them, those a span joined since their last analysis (counted as they are found:
        // a second walk of the map was a cache miss a chain).
        let mut to_analyse = 0;
        let mut any_root_call = false;
        // Chains looked at and kept for later are moved to the front, in their order.
        let (mut kept, mut looked) = (0, 0);
        while let Some(&trace_id) = self.unjudged.get(looked) {
            if let Some(entry) = self.chains.get(&trace_id)
                && entry.judged.is_none()
            {
                if entry.arrived_unix_nano >= arrived_before {
                    break;
                }
                if due(entry) {
                    any_root_call |= entry.chain.roots_in_a_call();
                    to_analyse += usize::from(entry.dirty);
                    now.push(trace_id);
                } else {
                    self.unjudged[kept] = trace_id;
                    kept += 1;
                }
            }
            // Else evicted (and judged) or judged since: it leaves the queue.
            looked += 1;
        }
        self.unjudged.drain(kept..looked);
        // Calls that lost their context, judged across every chain held: one pass for all the
        // chains judged now, and only when one of them is rooted in a call.
        let lost = if any_root_call {
            lost_contexts(self.chains.values().map(|e| &e.chain), &self.options)
        } else {
            Vec::new()
        };
        // Many to analyse first (the end of a run, a report): their analyses made on two
        // threads, a slice at a time, each folded with its fresh samples as it is taken in
        // (not packed, then unpacked again to be folded).
        let two_threads = self.two_threads && to_analyse >= 2 * ANALYSED_AT_ONCE;
        let slice = if two_threads {
            ANALYSED_AT_ONCE
        } else {
            now.len().max(1)
        };
        for ids in now.chunks(slice) {
            let made = if two_threads {
                self.analyses_on_two_threads(ids)
            } else {
                Vec::new()
            };
            let mut made = made.into_iter();
            for trace_id in ids {
                let made = made.next().flatten();
                if let Some(entry) = self.chains.get_mut(trace_id) {
                    Self::judge_entry(
                        entry,
                        made,
                        &self.options,
                        &mut self.counters,
                        &mut self.verdicts,
                        &lost,
                        fate,
                    );
                    Self::hand_on(entry, self.holding.as_deref_mut());
                }
            }
        }
        now.len()
    }
}
