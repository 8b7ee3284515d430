//! A chain's latest analysis as the store keeps it: what the chain list, the totals, the
//! findings list and the worst chains kept for the page read of it (its summary, findings and
//! the services whose budget is not known), and nothing else.
//!
//! A [`ChainAnalysis`] also has the waterfall rows and the edge samples (empty once held: the
//! rows are rebuilt for the chain a person opens, the samples are packed beside it) and the
//! trace id (the chain's): held as one, every chain paid ~100 bytes for three empty vectors,
//! a trace id and an `Arc`'s counts. The analysis is lent out again, without an allocation, for
//! the few steps that take a whole one (folding it into the totals, adding the calls that lost
//! their context): [`LatestAnalysis::lend`] moves its parts into one, [`LatestAnalysis::put`]
//! moves them back.

use std::sync::Arc;

use deadline_budget::analysis::{ChainAnalysis, ChainSummary, Finding, TraceId};

/// A held chain's latest analysis without its rows and edge samples. See the module
/// documentation.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LatestAnalysis {
    /// The chain at a glance.
    pub summary: ChainSummary,
    /// Every finding, as the analysis ordered them.
    pub findings: Box<[Finding]>,
    /// The services of hops whose budget is not known, sorted, once each.
    pub services_without_budget: Box<[Arc<str>]>,
}

impl LatestAnalysis {
    /// What is held of `analysis` (its rows and edge samples dropped).
    pub(super) fn of(analysis: ChainAnalysis) -> Self {
        LatestAnalysis {
            summary: analysis.summary,
            findings: analysis.findings.into_boxed_slice(),
            services_without_budget: analysis.services_without_budget.into_boxed_slice(),
        }
    }

    /// The analysis of `trace_id` with these parts moved into it (rows and edge samples empty),
    /// this one left empty until [`LatestAnalysis::put`] gives them back.
    pub(super) fn lend(&mut self, trace_id: TraceId) -> ChainAnalysis {
        ChainAnalysis {
            trace_id,
            summary: std::mem::take(&mut self.summary),
            rows: Vec::new(),
            findings: std::mem::take(&mut self.findings).into_vec(),
            edges: Vec::new(),
            services_without_budget: std::mem::take(&mut self.services_without_budget).into_vec(),
        }
    }

    /// Takes back the parts [`LatestAnalysis::lend`] moved out (perhaps changed).
    pub(super) fn put(&mut self, analysis: ChainAnalysis) {
        *self = LatestAnalysis::of(analysis);
    }

    /// The whole analysis of `trace_id` again, a copy, with these rows and edge samples.
    pub(super) fn to_analysis(
        &self,
        trace_id: TraceId,
        rows: Vec<deadline_budget::analysis::Row>,
        edges: Vec<deadline_budget::analysis::EdgeSample>,
    ) -> ChainAnalysis {
        ChainAnalysis {
            trace_id,
            summary: self.summary.clone(),
            rows,
            findings: self.findings.to_vec(),
            edges,
            services_without_budget: self.services_without_budget.to_vec(),
        }
    }
}
