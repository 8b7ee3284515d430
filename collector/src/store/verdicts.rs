//! The verdicts: what a judged chain was folded into (the running totals, the findings list,
//! the last minute's totals), and how a chain judged again is taken back out.

use std::borrow::Cow;
use std::collections::VecDeque;

use deadline_budget::analysis::{
    Chain, ChainAnalysis, Coverage, EdgeAggregate, EdgeReport, EdgeSample, FindingList, HopSample,
    OutcomeCounts, Report, SeverityCounts, Totals,
};

use super::exemplars::Exemplars;
use super::{Entry, Store};

/// A held chain's hop rows, in its analysis's row order: each hop's span position, dead work
/// and time held for nobody, ms. What its hop samples are read from once the analysis held has
/// no waterfall rows (they are ~36 bytes a span, and only the detail view and the page draw
/// them: rebuilt there, see `Store::analysis`); 12 bytes a hop instead.
#[derive(Debug, Default)]
pub(super) struct HopRows(Box<[HopRow]>);

/// One hop row as [`HopRows`] keeps it.
#[derive(Clone, Copy, Debug)]
struct HopRow {
    span: u32,
    dead_ms: u32,
    held_ms: u32,
}

impl HopRows {
    /// The hop rows of an analysis of `chain` (with its rows).
    pub(super) fn of(analysis: &ChainAnalysis, chain: &Chain) -> Self {
        HopRows(
            analysis
                .rows
                .iter()
                .filter(|row| chain.is_hop(row.span as usize))
                .map(|row| HopRow {
                    span: row.span,
                    dead_ms: row.dead_ms,
                    held_ms: row.held_ms,
                })
                .collect(),
        )
    }

    /// The hop samples, as [`HopSample::fill`] makes them from the rows, into `out` (emptied
    /// first).
    pub(super) fn fill(&self, out: &mut Vec<HopSample>, chain: &Chain) {
        out.clear();
        out.extend(
            self.0
                .iter()
                .filter_map(|r| HopSample::at(chain, r.span as usize, r.dead_ms, r.held_ms)),
        );
    }

    /// The same, as a list of their own.
    pub(super) fn samples(&self, chain: &Chain) -> Vec<HopSample> {
        let mut out = Vec::new();
        self.fill(&mut out, chain);
        out
    }
}

/// What becomes of a chain judged or analysed now: held on (its edge samples packed, its
/// vectors shrunk), leaving memory right after (evicted: neither is worth doing unless it is
/// kept for the page after all), or held until the run ends right after ([`Store::report`]:
/// its vectors are not shrunk, and its samples are not packed but made again by the few that
/// still read them, the report's inverted-timeout pass and the page's waterfalls).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Fate {
    Staying,
    Leaving,
    Final,
}

/// What a judged chain was folded with beyond its analysis and edge samples.
#[derive(Debug)]
pub(super) struct Judged {
    /// Its fold's number (the findings list's "newest").
    pub(super) fold: u64,
    /// The second of the store's clock it was judged in (its place in [`Recent`]).
    pub(super) second: u64,
    /// Its hop samples, kept apart only once a span joins the chain after its verdict (taken
    /// from the chain just before): until then the chain is as it was judged, and they are read
    /// from it again. Most judged chains never get another span.
    pub(super) hops: Option<Box<[HopSample]>>,
}

/// The seconds [`Store::recent_totals`] covers: the screen's "last minute".
pub const RECENT_SECONDS: u64 = 60;

/// The verdicts of the last [`RECENT_SECONDS`], one [`Totals`] per second of the store's clock
/// in which chains were judged: what every chain judged then contributed, held or evicted since
/// (a chain judged again is taken out of its second, if still here, and folded into the
/// current one). Bounded: at most that many seconds, each capped as the totals are.
#[derive(Debug, Default)]
pub(super) struct Recent {
    pub(super) seconds: VecDeque<(u64, Totals)>,
}

impl Recent {
    /// The totals of `second`, the newest: the seconds too old to be shown go.
    pub(super) fn at(&mut self, second: u64) -> &mut Totals {
        while self
            .seconds
            .front()
            .is_some_and(|(s, _)| s + RECENT_SECONDS <= second)
        {
            self.seconds.pop_front();
        }
        if self.seconds.back().is_none_or(|(s, _)| *s < second) {
            self.seconds.push_back((second, Totals::new()));
        }
        // A clock that went back folds into the newest second.
        &mut self
            .seconds
            .back_mut()
            .unwrap_or_else(|| unreachable!("pushed"))
            .1
    }

    pub(super) fn of(&mut self, second: u64) -> Option<&mut Totals> {
        self.seconds
            .iter_mut()
            .find(|(s, _)| *s == second)
            .map(|(_, t)| t)
    }

    /// The verdicts of the [`RECENT_SECONDS`] up to `now` (a second), merged.
    pub(super) fn merged(&self, now: u64) -> Totals {
        let mut out = Totals::new();
        for (_, t) in self
            .seconds
            .iter()
            .filter(|(s, _)| s + RECENT_SECONDS > now)
        {
            out.merge(t);
        }
        out
    }
}

/// The totals every judged chain is folded into, and the findings list beside them.
#[derive(Debug)]
pub(super) struct Verdicts {
    pub(super) totals: Totals,
    pub(super) list: FindingList,
    pub(super) folds: u64,
    /// The last minute's verdicts, when kept ([`Store::with_recent`]: the screen's).
    pub(super) recent: Option<Recent>,
    /// The second of the store's clock now ([`Store::set_clock`]).
    pub(super) second: u64,
    /// The hop samples of the chain being folded (reused: no allocation per fold).
    pub(super) hops: Vec<HopSample>,
    /// The latest chain behind each series of the metrics, when kept
    /// ([`Store::with_exemplars`]: serve's).
    pub(super) exemplars: Option<Exemplars>,
    /// The store's clock now, Unix ns ([`Store::set_clock`]).
    pub(super) now_unix_nano: u64,
}

impl Verdicts {
    /// Folds an entry's analysis (`analysis`, and `edges`, its edge samples) in, once.
    pub(super) fn fold(
        &mut self,
        entry: &mut Entry,
        analysis: &ChainAnalysis,
        edges: &[EdgeSample],
    ) {
        entry.hop_rows.fill(&mut self.hops, &entry.chain);
        self.folds += 1;
        self.totals.fold(analysis, edges, &self.hops);
        if let Some(recent) = self.recent.as_mut() {
            recent.at(self.second).fold(analysis, edges, &self.hops);
        }
        self.list.offer(&analysis.findings, self.folds);
        if let Some(exemplars) = self.exemplars.as_mut() {
            exemplars.fold(analysis, edges, self.now_unix_nano);
        }
        entry.judged = Some(Judged {
            fold: self.folds,
            second: self.second,
            hops: None,
        });
    }

    /// Takes a judged entry's contribution back out (`old`, `old_hops` and `old_edges`: what it
    /// was folded with; `chain`: the chain now, whose hop samples are the ones folded unless
    /// `judged` kept them apart).
    pub(super) fn unfold(
        &mut self,
        judged: &Judged,
        old: &ChainAnalysis,
        old_hops: &HopRows,
        old_edges: &[EdgeSample],
        chain: &Chain,
    ) {
        let hops = match &judged.hops {
            Some(kept) => kept,
            None => {
                old_hops.fill(&mut self.hops, chain);
                &self.hops[..]
            }
        };
        self.totals.unfold(old, old_edges, hops);
        if let Some(t) = self.recent.as_mut().and_then(|r| r.of(judged.second)) {
            t.unfold(old, old_edges, hops);
        }
        self.list.withdraw(&old.findings, judged.fold);
    }
}

/// What the verdicts say: the totals of every chain judged, held or evicted, and the report.
impl Store {
    /// Caller -> callee figures over every judged chain (held or not), by (caller, callee).
    pub fn edges(&self) -> Vec<&EdgeAggregate> {
        self.verdicts.totals.edges.sorted()
    }

    /// The same edges as the report's `edges` array.
    pub fn edge_reports(&self) -> Vec<EdgeReport> {
        self.verdicts.totals.edges.to_reports()
    }

    /// Findings by severity over every judged chain, and the edges' own.
    pub fn finding_counts(&self) -> SeverityCounts {
        self.verdicts.totals.finding_counts()
    }

    /// The judged chains' wasted ms (their hops' dead work).
    pub fn wasted_ms(&self) -> i64 {
        self.verdicts.totals.wasted_ms
    }

    /// The judged chains by outcome, as a report counts them.
    pub fn outcomes(&self) -> OutcomeCounts {
        self.verdicts.totals.outcomes()
    }

    /// What the analysis could see over every judged chain.
    pub fn coverage(&self) -> Coverage {
        let t = &self.verdicts.totals;
        Coverage {
            hops_with_budget: t.hops_with_budget,
            hops_without_budget: t.hops_without_budget(),
            services_without_budget: t.services_without_budget(),
        }
    }

    /// The running totals of every judged chain.
    pub fn totals(&self) -> &Totals {
        &self.verdicts.totals
    }

    /// The latest judged chain behind each series of the metrics; `None` unless the store
    /// keeps them ([`Store::with_exemplars`]).
    pub fn exemplars(&self) -> Option<&Exemplars> {
        self.verdicts.exemplars.as_ref()
    }

    /// The totals of the chains judged in the last [`RECENT_SECONDS`] of the store's clock,
    /// held or evicted since; empty unless the store keeps them ([`Store::with_recent`]).
    pub fn recent_totals(&self) -> Totals {
        self.verdicts
            .recent
            .as_ref()
            .map_or_else(Totals::new, |r| r.merged(self.verdicts.second))
    }

    /// The whole report: every chain held is judged first (the end of a run), then the report
    /// is written from the totals of every chain judged, held or evicted. Findings are in trace
    /// order, then as the analysis ordered them within a chain; the edges' own last.
    pub fn report(&mut self) -> Report {
        // The chains judged already that a span joined since are judged again first, as
        // `analyse_dirty` does; then every other chain is analysed as it is judged (many at
        // once on two threads: store/two_threads.rs), its fresh samples folded as they are and not
        // kept: the run ends (`Fate::Final`).
        let chains = &self.chains;
        self.dirty
            .retain(|id| chains.get(id).is_some_and(|e| e.judged.is_some()));
        self.analyse_dirty();
        self.judge_where(|_| true, u64::MAX, Fate::Final);
        self.report_of_judged()
    }

    /// The report of the chains judged so far, without judging the others (a report while
    /// spans still arrive).
    pub fn report_of_judged(&self) -> Report {
        // Each chain's samples unpacked as the report walks it (all at once would be ~800
        // bytes a chain held).
        let held = self
            .chains
            .values()
            .filter(|e| e.judged.is_some())
            .map(|e| (Cow::Owned(e.edge_samples(&self.options)), &e.chain));
        self.verdicts.totals.report(&self.verdicts.list, held)
    }
}
