//! The headless report of `CONVENTIONS.md` section 4, built from chain analyses.

use std::sync::Arc;

use super::chain::chains_from_spans;
use super::chain_analysis::{ChainAnalysis, Options};
use super::edges::EdgeStats;
use super::finding_kind::Severity;
use super::model::{Coverage, Report, Span, Summary};

impl Report {
    /// Build the report from the analyses of every chain. Findings are ordered by trace id, then
    /// span start, span id and kind, whatever order the analyses come in; edges by (caller,
    /// callee). A trace given twice is counted twice: give each chain's latest analysis once.
    pub fn from_analyses<'a>(analyses: impl IntoIterator<Item = &'a ChainAnalysis>) -> Report {
        let mut chains: Vec<&ChainAnalysis> = analyses.into_iter().collect();
        chains.sort_by_key(|a| a.trace_id);
        let mut summary = Summary::default();
        let mut edges = EdgeStats::new();
        let mut findings = Vec::with_capacity(chains.iter().map(|a| a.findings.len()).sum());
        let mut without: Vec<Arc<str>> = Vec::new();
        for a in chains {
            let s = &a.summary;
            summary.traces += 1;
            summary.spans += u64::from(s.spans);
            summary.hops += u64::from(s.hops);
            summary.findings.add(s.findings);
            summary.wasted_ms = summary.wasted_ms.saturating_add(s.wasted_ms);
            summary.outcomes.add(s.outcome);
            summary.coverage.hops_with_budget += u64::from(s.hops_with_budget);
            summary.coverage.hops_without_budget += u64::from(s.hops - s.hops_with_budget);
            without.extend(a.services_without_budget.iter().cloned());
            findings.extend(a.findings.iter().cloned());
            edges.add(a);
        }
        without.sort_unstable();
        without.dedup();
        summary.coverage = Coverage {
            services_without_budget: without,
            ..summary.coverage
        };
        // The edges' own findings come after the chains' (they are about many chains).
        for f in edges.findings() {
            summary.findings.bump(f.severity);
            findings.push(f);
        }
        Report {
            summary,
            findings,
            edges: edges.to_reports(),
        }
    }

    /// Group spans into chains, analyse each, and build the report: the whole `check` analysis.
    /// Chains are analysed twice when an edge's timeout can be inferred only from many chains:
    /// the second time with those timeouts, so `timeout_inverted` sees them.
    pub fn from_spans(spans: impl IntoIterator<Item = Span>, options: &Options) -> Report {
        let chains = chains_from_spans(spans);
        let mut analyses: Vec<ChainAnalysis> = chains.iter().map(|c| c.analyse(options)).collect();
        let mut edges = EdgeStats::new();
        for a in &analyses {
            edges.add(a);
        }
        let timeouts = edges.inferred_timeouts();
        if !timeouts.is_empty() {
            analyses = chains
                .iter()
                .map(|c| c.analyse_with(options, &timeouts))
                .collect();
        }
        let mut report = Report::from_analyses(&analyses);
        // Judged across chains: a call without its request's context starts a trace of its own.
        report.add_lost_contexts(&super::context::lost_contexts(&chains, options));
        report
    }

    /// The worst severity among the findings, if any.
    pub fn worst(&self) -> Option<Severity> {
        self.findings.iter().map(|f| f.severity).max()
    }

    /// Whether a finding reaches `fail_on` (the `--fail-on` rule: exit status 1).
    pub fn fails(&self, fail_on: Severity) -> bool {
        self.worst().is_some_and(|w| w >= fail_on)
    }
}
