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
//! `retry_amplified`),
//! [`skew`] (`clock_skew`) and [`timeouts`] (`timeout_inverted`; `timeout_oversized` is judged
//! per edge, in [`edges`](super::edges)). A new rule is a method in its family's file, called
//! from [`pass`] where its span kind is judged.
//!
//! Relationships: a hop is a SERVER/CONSUMER span; a call is a CLIENT/PRODUCER span; the hop a
//! span belongs to is its nearest hop ancestor (itself for a hop); a call's callee hop is a
//! hop directly under it. A hop directly under another service's SERVER/INTERNAL span (an
//! uninstrumented client) still forms a caller -> callee edge, that span standing for the call.
//! Retries are the calls of one hop with the same span name, when one of them carries
//! `budget.attempt > 1`.
//!
//! Choices the contract leaves open, made here:
//! - `budget_dropped` on a call needs a sign that it was a request that could carry a budget:
//!   budget attributes on the CLIENT span, or a callee hop. A database call traced by stock
//!   instrumentation has neither and is not blamed. It is also not reported when the callee hop
//!   did receive a budget (the span just failed to record `forwarded_ms`). On a hop it needs an
//!   explicit `budget.source` of `none` or `default`: a hop with no budget attributes at all says
//!   nothing about what it received.
//! - A hop's work starts after its queue wait: time in a queue is not service time, so it is
//!   never dead work. A hop that shed the request did no work and has none.
//! - A root hop, or one whose caller is not in the chain, gave up when its own span ended (its
//!   caller had the answer or hung up); the budget it received does not move that, since
//!   whether its caller still waited is not in the spans. Its spans that go on past its own end
//!   are dead work, and `orphaned_work` when they go on past the tolerance. A root hop's dead
//!   work has no edge into it: it shows in the chain's and the service's totals only. A root
//!   (`Link::Root`) that answered after its received budget ran out is `late_answer`
//!   ([`late_answer`]), and its chain `late` when the answer was not a failure.
//! - A span longer than 24 hours is a broken clock or exporter, not a request: it gets a
//!   `clock_skew` finding and none of its time counts as waste.
//! - `ran_after_expiry` for spans of a hop: the first span on each path that started after the
//!   hop's deadline (arrival + budget) is reported, with its whole duration wasted; spans under it
//!   are not reported again, nor is anything in a hop already reported for starting work expired,
//!   nor a call refused for lack of budget (the right behaviour). A retry attempt that starts late
//!   is `retry_over_budget` instead.
//! - `shed_expired`/`shed_full` come from `budget.outcome` on hops, else from a bare 503/504 (or
//!   gRPC 8/4) answered by a hop that does not relay a status one of its calls got; on a call only
//!   from `budget.outcome`, when no callee hop is in the chain to report it.
//! - `retry_over_budget` (sum rule) compares the sum of the attempts' `forwarded_ms` with what
//!   remained at the first attempt, once at least two attempts forwarded something; it is
//!   reported once per call, on the attempt that tipped the sum.
//! - `retry_amplified` counts layers, not hops: the retried calls of one caller service with one
//!   span name into one callee, under a layer above it when an attempt of that one layer reached
//!   every hop that made them. It is reported once per chain and layer, on the call that went
//!   past the largest retry group of the chain, when the layer made more calls than that group;
//!   one layer's retries, however many hops make them, never are.
//! - `budget_reset` on a hop compares what it received with the nearest forwarded budget above
//!   it, passing through hops that record no budget at all (a proxy such as Envoy between two
//!   services): the reset is found where it shows, on the hop that received too much.
//! - A root hop whose status says it answered, while one of its own CLIENT calls was still open
//!   past its end, did not answer: its caller hung up (Node.js's http instrumentation ends the
//!   SERVER span then, with status 200). The chain's outcome is `cancelled`.
//! - `timeout_inverted` is not reported on a call that is itself a `budget_reset` (what it
//!   forwarded is its timeout: the reset says it), nor on a PRODUCER (a producer does not wait).
//! - `clock_skew` for absolute deadlines, two views, reported once per hop: `deadline_unix_ms`
//!   against arrival + budget on the hop's clock (useful when the budget came from another
//!   carrier); and, for a hop whose budget came from an absolute carrier, what it received
//!   against what its caller's CLIENT span forwarded. A receiver clock behind by more than the
//!   tolerance (the same 5 ms plus rounding as every carrier) also gives `budget_reset`: the
//!   callee really does believe it has longer than its caller waits.
//! - `ran_after_expiry` on a hop without `remaining_at_start_ms` uses budget − queue wait.

use std::cell::RefCell;

use crate::analysis::chain::{Chain, SpanView, Tree, refill};
use crate::analysis::chain_analysis::{ChainAnalysis, Options};
use crate::analysis::clocks::Clocks;
use crate::analysis::edges::EdgeTimeouts;
use crate::analysis::finding_kind::{KindSet, SeverityCounts};
use crate::analysis::model::Finding;

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
        let edges = std::mem::take(&mut pass.edges);
        let state = &*pass.state;

        let rows = summary::rows(spans, tree, timing, state, clocks, kinds, row_of);
        hops.clear();
        hops.extend((0..n).filter(|&i| spans[i].kind.is_hop()));
        let summary = summary::summary(spans, tree, timing, &findings, counts, hops, options);
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
