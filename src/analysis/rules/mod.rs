//! The rules of `CONVENTIONS.md` section 3, applied to one chain.
//!
//! [`Chain::analyse`] builds the tree (see [`chain`](super::chain)) and walks it twice in
//! depth-first order (parents before children). The first walk measures time from the user's
//! point of view ([`timing`]): each hop's give-up time (the earliest moment anyone above it
//! stopped waiting), how far its own spans reach, its dead work, the dead work in each subtree,
//! its wait limit and the outcomes that standard statuses imply. The second walk, the rule pass
//! ([`pass`]), visits each span once and applies the rules to it, which write the findings and
//! name those numbers; then rows, edge samples and the summary are read off both ([`summary`]).
//! Strings are formatted only for the findings' messages.
//!
//! Each family of rules is one file, each rule's check beside its message: [`reset_drop`]
//! (`budget_reset`, `budget_dropped`), [`expiry`] (`ran_after_expiry`, `orphaned_work`),
//! [`queue`] (`shed_expired`, `shed_full`, `queue_pressure`), [`retry`] (`retry_over_budget`,
//! `retry_amplified`), [`skew`] (`clock_skew`) and [`timeouts`] (`timeout_inverted`;
//! `timeout_oversized` is judged per edge, in [`edges`](super::edges)). A new rule is a method in
//! its family's file, called from [`pass`] where its span kind is judged.
//!
//! Who is whose (a hop, a call, its callee, a retry) and every choice the contract leaves open
//! that these rules make are in `docs/CONVENTIONS.md`, section 8, "The rules' own choices".

use std::cell::RefCell;

use crate::analysis::chain::{Chain, SpanView, Tree, refill};
use crate::analysis::chain_analysis::{ChainAnalysis, Options};
use crate::analysis::clocks::Clocks;
use crate::analysis::edges::EdgeTimeouts;
use crate::analysis::finding_kind::{KindSet, SeverityCounts};
use crate::analysis::model::Finding;

mod dead_work;
mod expiry;
mod late_answer;
mod pass;
mod queue;
mod reset_drop;
mod retry;
mod skew;
mod summary;
mod timeouts;
mod timing;

pub(crate) use pass::thousands;

use pass::{PassState, RulePass};
use timing::Timing;

/// The working vectors of the analysis, kept from one chain to the next on each thread.
/// Allocated per chain, the 35 or so per-span vectors (and freeing them) were most of what
/// analysing a chain of a few spans cost.
#[derive(Debug, Default)]
struct Scratch {
    tree: Tree,
    clocks: Clocks,
    timing: Timing,
    // The rule pass's own per-span state.
    state: PassState,
    // The rows' and the summary's.
    kinds: Vec<KindSet>,
    row_of: Vec<u32>,
    hops: Vec<usize>,
    // The rule pass's working space (given back when the pass is done).
    found: Vec<(u32, Finding)>,
    calls: Vec<u32>,
    // The spans' views: empty between analyses, kept for its allocation (see `recycle`).
    views: Vec<SpanView<'static>>,
}

/// The same vector, emptied, for views of another lifetime: its allocation is kept (collecting
/// a vector's own iterator into elements of the same size reuses its buffer), so the analysis
/// of each chain does not allocate its spans' views anew.
fn recycle<'b>(mut views: Vec<SpanView<'_>>) -> Vec<SpanView<'b>> {
    views.clear();
    views.into_iter().map(|_| unreachable!("emptied")).collect()
}

/// A chain of more spans than this does not leave its working vectors to the next analysis on
/// its thread: one huge chain would otherwise pin its memory for good. At this size the
/// allocations are a small part of the analysis anyway.
const SCRATCH_KEEP_SPANS: usize = 4096;

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

impl Chain {
    /// Apply every rule of `CONVENTIONS.md` section 3 to this chain as it stands, with no
    /// inferred timeouts (see [`Chain::analyse_with`]). Pure and deterministic: the same spans
    /// give the same analysis whatever order they arrived in. Costs O(n log n) in the number of
    /// spans; call it again when spans join (a store would re-analyse chains that changed once
    /// per tick, not once per span).
    pub fn analyse(&self, options: &Options) -> ChainAnalysis {
        self.analyse_with(options, &EdgeTimeouts::default())
    }

    /// [`Chain::analyse`], with the timeouts inferred for edges over many chains
    /// ([`EdgeStats::inferred_timeouts`](super::EdgeStats::inferred_timeouts)), which
    /// `timeout_inverted` uses for calls that declare none.
    pub fn analyse_with(&self, options: &Options, timeouts: &EdgeTimeouts) -> ChainAnalysis {
        let analysed = SCRATCH.try_with(|scratch| {
            let mut scratch = scratch.try_borrow_mut().ok()?;
            let analysis = self.analyse_in(&mut scratch, options, timeouts);
            if self.len() > SCRATCH_KEEP_SPANS {
                *scratch = Scratch::default();
            }
            Some(analysis)
        });
        // No scratch (the thread is ending, or an analysis inside an analysis): a fresh one.
        analysed
            .ok()
            .flatten()
            .unwrap_or_else(|| self.analyse_in(&mut Scratch::default(), options, timeouts))
    }
}

impl Chain {
    fn analyse_in(
        &self,
        scratch: &mut Scratch,
        options: &Options,
        timeouts: &EdgeTimeouts,
    ) -> ChainAnalysis {
        let Scratch {
            tree,
            clocks,
            timing,
            state,
            kinds,
            row_of,
            hops,
            found,
            calls,
            views,
        } = scratch;
        // Borrowed views, not unpacked `Span`s: see `SpanView`.
        let mut viewed: Vec<SpanView<'_>> = recycle(std::mem::take(views));
        viewed.extend((0..self.len()).map(|i| self.view(i)));
        tree.build(self);
        let tree = &*tree;
        // Every rule below reads the corrected times.
        clocks.correct(&mut viewed, tree, options);
        let clocks = &*clocks;
        let spans = &viewed[..];
        let n = spans.len();
        timing.measure(spans, tree, options, timeouts);
        state.reset(n);

        let mut pass = RulePass {
            chain: self,
            spans,
            tree,
            opts: options,
            timeouts,
            timing,
            clocks,
            state,
            edges: Vec::new(),
            found: std::mem::take(found),
            calls: std::mem::take(calls),
        };
        pass.run();

        // Attribute findings to edges and rows.
        refill(kinds, n, KindSet::default());
        let mut counts = SeverityCounts::default();
        let mut found_here = std::mem::take(&mut pass.found);
        for (i, f) in &found_here {
            kinds[*i as usize].insert(f.kind);
            counts.bump(f.severity);
            if let Some(e) = pass.edge_for(*i as usize) {
                pass.edges[e].findings.get_or_insert_default().bump(f.kind);
            }
        }
        found_here.sort_by(|(a, fa), (b, fb)| {
            let (sa, sb) = (&spans[*a as usize], &spans[*b as usize]);
            (sa.start_unix_nano, sa.span_id, fa.kind).cmp(&(
                sb.start_unix_nano,
                sb.span_id,
                fb.kind,
            ))
        });
        let findings: Vec<Finding> = found_here.drain(..).map(|(_, f)| f).collect();
        // The pass's working vectors back to the scratch, for the next chain.
        *found = found_here;
        *calls = std::mem::take(&mut pass.calls);
        let mut edges = std::mem::take(&mut pass.edges);
        let state = &*pass.state;

        let rows = summary::rows(spans, tree, timing, state, clocks, kinds, row_of);
        hops.clear();
        hops.extend((0..n).filter(|&i| spans[i].kind.is_hop()));
        let (summary, root_left) =
            summary::summary(spans, tree, timing, &findings, counts, hops, options);
        if let Some((callee, left)) = root_left
            && let Some(e) = edges.get_mut(state.edge_of[callee] as usize)
        {
            e.root_left = Some(left);
        }
        let services_without_budget = summary::services_without_budget(spans, hops);
        *views = recycle(viewed);
        ChainAnalysis {
            trace_id: self.trace_id(),
            summary,
            rows,
            findings,
            edges,
            services_without_budget,
        }
    }
}

#[cfg(test)]
mod recycle_tests {
    use super::*;

    #[test]
    fn recycling_the_views_keeps_their_allocation() {
        let views: Vec<SpanView<'_>> = Vec::with_capacity(64);
        let again: Vec<SpanView<'static>> = recycle(views);
        assert!(again.is_empty());
        assert!(again.capacity() >= 64);
    }
}
