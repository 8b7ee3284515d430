//! The headless report of `CONVENTIONS.md` section 4, built from chain analyses.

use super::chain::chains_from_spans;
use super::chain_analysis::{ChainAnalysis, Options};
use super::edges::EdgeStats;
use super::model::{Report, Severity, Span, Summary};

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
        for a in chains {
            summary.traces += 1;
            summary.spans += u64::from(a.summary.spans);
            summary.hops += u64::from(a.summary.hops);
            summary.findings.error += a.summary.findings.error;
            summary.findings.warning += a.summary.findings.warning;
            summary.findings.info += a.summary.findings.info;
            findings.extend(a.findings.iter().cloned());
            edges.add(a);
        }
        Report {
            summary,
            findings,
            edges: edges.to_reports(),
        }
    }

    /// Group spans into chains, analyse each, and build the report: the whole `check` analysis.
    pub fn from_spans(spans: impl IntoIterator<Item = Span>, options: &Options) -> Report {
        let analyses: Vec<ChainAnalysis> = chains_from_spans(spans)
            .iter()
            .map(|c| c.analyse(options))
            .collect();
        Report::from_analyses(&analyses)
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
