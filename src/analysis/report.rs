//! The headless report of `CONVENTIONS.md` section 4, written from the running totals of every
//! judged chain (section 6), and read back from its JSON so that reports merge.

use std::borrow::Cow;
use std::sync::Arc;

use foldhash::HashMap;

use super::chain::{Chain, chains_from_spans};
use super::chain_analysis::{ChainAnalysis, EdgeSample, Options};
use super::context::lost_contexts;
use super::edges::EdgeAggregate;
use super::finding_kind::{FindingKind, KindCounts, Severity, SeverityCounts};
use super::finding_list::{DEFAULT_MAX_FINDINGS, FindingList};
use super::model::{ChainOutcome, Coverage, Finding, Report, ServiceReport, Span, SpanId, Summary};
use super::totals::{HopSample, ServiceTotals, Totals};

impl Totals {
    /// The report of everything folded, listing what `list` kept. The edges' own findings are
    /// judged now from the edges' totals: `timeout_inverted` against an inferred timeout is
    /// listed on each call of the chains still `held` (each chain's edge samples and spans),
    /// and once per edge with the count for the others; they and `timeout_oversized` come
    /// after the chains' findings. `held` is walked only when some edge needs it, one chain at
    /// a time (a store unpacks each chain's samples as it goes).
    pub fn report<'a>(
        &self,
        list: &FindingList,
        held: impl IntoIterator<Item = (Cow<'a, [EdgeSample]>, &'a Chain)>,
    ) -> Report {
        let mut list = list.clone();
        let mut on_held: HashMap<(Arc<str>, Arc<str>), u64> = HashMap::default();
        let mut held_inverted = Vec::new();
        // Only edges with an inferred timeout that inverts on some call need the chains held.
        let inverting = self
            .edges
            .sorted()
            .iter()
            .any(|e| e.inverted_by_inferred().is_some());
        for (samples, chain) in inverting.then(|| held.into_iter()).into_iter().flatten() {
            let before = held_inverted.len();
            // The calls' names, looked up once a chain has an inverted call.
            let mut names: Option<HashMap<SpanId, Arc<str>>> = None;
            for sample in samples.iter() {
                let Some(e) = self.edges.of_sample(sample) else {
                    continue;
                };
                let inverted = e.inverted_by_inferred().is_some_and(|(t, _)| {
                    sample.wait_slack.is_some_and(|w| t > w.slack_ms) && sample.call.is_some()
                });
                if !inverted {
                    continue;
                }
                let names = names.get_or_insert_with(|| {
                    chain.spans().map(|s| (s.span_id, s.name.clone())).collect()
                });
                let name = sample
                    .call
                    .and_then(|id| names.get(&id).cloned())
                    .unwrap_or_else(|| Arc::from(""));
                if let Some(f) = e.inverted_call(chain.trace_id(), sample, name) {
                    *on_held
                        .entry((e.caller.clone(), e.callee.clone()))
                        .or_insert(0) += 1;
                    held_inverted.push(f);
                }
            }
            list.offer(&held_inverted[before..], u64::MAX);
        }
        let mut findings = list.listed();
        let mut by_kind = self.findings;
        let severities = self.finding_counts();
        let mut edges = Vec::with_capacity(self.edges.len());
        let mut edge_findings = Vec::new();
        for e in self.edges.sorted() {
            for (kind, n) in e.edge_findings().iter() {
                by_kind.0[kind as usize] += n;
            }
            if let Some((_, n)) = e.inverted_by_inferred() {
                let listed = on_held
                    .get(&(e.caller.clone(), e.callee.clone()))
                    .copied()
                    .unwrap_or(0);
                edge_findings.extend(e.inverted_unlisted(n.saturating_sub(listed)));
            }
            edge_findings.extend(e.finding());
            edges.push(e.to_report());
        }
        let chain_listed = findings.iter().filter(|f| f.count.is_none()).count() as u64;
        let listed_edges = findings.len() as u64 - chain_listed + edge_findings.len() as u64;
        let stood_for: u64 = findings
            .iter()
            .chain(&edge_findings)
            .filter_map(|f| f.count)
            .sum();
        findings.extend(edge_findings);
        let services = self
            .services()
            .map(|(service, t)| ServiceReport {
                service: service.clone(),
                hops: t.hops,
                work_ms: t.work_ms,
                wasted_ms: t.wasted_ms,
                held_ms: t.held_ms,
                queue_wait_p50_ms: t.queue_wait.p50(),
                queue_wait_p99_ms: t.queue_wait.p99(),
                queue_wait_ms: t.queue_wait.clone(),
            })
            .collect();
        let total = by_kind.total();
        Report {
            summary: Summary {
                traces: self.traces,
                spans: self.spans,
                hops: self.hops,
                findings: severities,
                findings_by_kind: by_kind.iter().collect(),
                findings_listed: chain_listed + listed_edges,
                findings_omitted: total.saturating_sub(chain_listed + stood_for),
                wasted_ms: self.wasted_ms,
                outcomes: self.outcomes(),
                coverage: Coverage {
                    hops_with_budget: self.hops_with_budget,
                    hops_without_budget: self.hops_without_budget(),
                    services_without_budget: self.services_without_budget(),
                },
                edge_calls_folded: self.edge_calls_folded,
                service_hops_folded: self.service_hops_folded,
            },
            findings,
            edges,
            services,
        }
    }

    /// The totals and the findings list a report was written from (the inverse of
    /// [`Totals::report`], as far as merging needs): edges' own findings are judged again
    /// when the merged report is written, so they are taken out here.
    pub fn from_report(report: &Report, max_findings: usize) -> (Totals, FindingList) {
        let s = &report.summary;
        let mut totals = Totals {
            traces: s.traces,
            spans: s.spans,
            hops: s.hops,
            wasted_ms: s.wasted_ms,
            chain_outcomes: s.outcomes,
            hops_with_budget: s.coverage.hops_with_budget,
            edge_calls_folded: s.edge_calls_folded,
            service_hops_folded: s.service_hops_folded,
            ..Totals::default()
        };
        for (&kind, &n) in &s.findings_by_kind {
            totals.findings.0[kind as usize] += n;
        }
        for service in &s.coverage.services_without_budget {
            totals.without_budget.insert(service.clone(), 1);
        }
        for edge in &report.edges {
            let e = EdgeAggregate::from_report(edge);
            for (n, own) in totals.findings.0.iter_mut().zip(e.edge_findings().0) {
                *n = n.saturating_sub(own);
            }
            // Outcomes judged from the edge's timeout are judged again from the merged one.
            let (answered, failed) = e.roots_gave_up();
            let outcomes = &mut totals.chain_outcomes;
            outcomes.shift(
                ChainOutcome::DeadlineExceeded,
                ChainOutcome::Cancelled,
                answered,
            );
            outcomes.shift(ChainOutcome::DeadlineExceeded, ChainOutcome::Error, failed);
            totals.edges.insert(e);
        }
        totals.severities = severities_of(&totals.findings);
        for svc in &report.services {
            totals.services.insert(
                svc.service.clone(),
                ServiceTotals {
                    hops: svc.hops,
                    work_ms: svc.work_ms,
                    wasted_ms: svc.wasted_ms,
                    held_ms: svc.held_ms,
                    queue_wait: svc.queue_wait_ms.clone(),
                },
            );
        }
        // The edges' findings are judged again from the merged totals.
        let chain_findings: Vec<Finding> = report
            .findings
            .iter()
            .filter(|f| f.count.is_none())
            .cloned()
            .collect();
        let mut list = FindingList::new(max_findings);
        // The order a report lists them in is all that is left of "newest": later, newer.
        for (seq, f) in chain_findings.iter().enumerate() {
            list.offer(std::slice::from_ref(f), seq as u64);
        }
        let chain_total = totals.findings.total();
        list.count_unlisted(chain_total.saturating_sub(chain_findings.len() as u64));
        (totals, list)
    }
}

/// Severity counts of findings counted by kind.
fn severities_of(kinds: &KindCounts) -> SeverityCounts {
    let mut out = SeverityCounts::default();
    for (kind, n) in kinds.iter() {
        for _ in 0..n {
            out.bump(kind.severity());
        }
    }
    out
}

impl Report {
    /// Build the report from the analyses of every chain (no hop samples: `services` stays
    /// empty). Findings are ordered by trace id, then as each chain lists them; edges by
    /// (caller, callee). A trace given twice is counted twice: give each chain's latest analysis
    /// once.
    pub fn from_analyses<'a>(analyses: impl IntoIterator<Item = &'a ChainAnalysis>) -> Report {
        let mut totals = Totals::new();
        let mut list = FindingList::new(usize::MAX);
        for (seq, a) in analyses.into_iter().enumerate() {
            totals.fold(a, &a.edges, &[]);
            list.offer(&a.findings, seq as u64);
        }
        totals.report(&list, [])
    }

    /// Group spans into chains, judge each once (with the calls that lost their context, judged
    /// across them) and fold it into the totals: the whole `check` analysis of a file, every
    /// chain held.
    pub fn from_spans(spans: impl IntoIterator<Item = Span>, options: &Options) -> Report {
        let chains = chains_from_spans(spans);
        let mut totals = Totals::new();
        let mut list = FindingList::new(DEFAULT_MAX_FINDINGS);
        let mut analyses = Vec::with_capacity(chains.len());
        // Judged across chains: a call without its request's context starts a trace of its
        // own, and the finding belongs to that trace's chain.
        let lost = lost_contexts(&chains, options);
        for (seq, chain) in chains.iter().enumerate() {
            let mut a = chain.analyse(options);
            let mut edges = std::mem::take(&mut a.edges);
            a.fold_lost_contexts(&mut edges, &lost, chain);
            a.edges = edges;
            totals.fold(&a, &a.edges, &HopSample::of(&a, chain));
            list.offer(&a.findings, seq as u64);
            analyses.push(a);
        }
        let held = analyses
            .iter()
            .map(|a| Cow::from(&a.edges[..]))
            .zip(&chains);
        totals.report(&list, held)
    }

    /// The report one instance would have written had it received everything the reports
    /// were written from: counts exact, percentiles within the sketches' error, the findings
    /// list capped again at `max_findings`.
    pub fn merge<'a>(reports: impl IntoIterator<Item = &'a Report>, max_findings: usize) -> Report {
        let mut totals = Totals::new();
        let mut list = FindingList::new(max_findings);
        for r in reports {
            let (t, l) = Totals::from_report(r, max_findings);
            totals.merge(&t);
            list.merge(&l);
        }
        totals.report(&list, [])
    }

    /// The worst severity among the findings counted, if any (listed or not).
    pub fn worst(&self) -> Option<Severity> {
        let f = &self.summary.findings;
        [
            (f.error, Severity::Error),
            (f.warning, Severity::Warning),
            (f.info, Severity::Info),
        ]
        .into_iter()
        .find(|&(n, _)| n > 0)
        .map(|(_, s)| s)
        .or_else(|| self.findings.iter().map(|f| f.severity).max())
    }

    /// Whether a finding reaches `fail_on` (the `--fail-on` rule: exit status 1).
    pub fn fails(&self, fail_on: Severity) -> bool {
        self.worst().is_some_and(|w| w >= fail_on)
    }

    /// How many findings of `kind` were counted (listed or not).
    pub fn count(&self, kind: FindingKind) -> u64 {
        self.summary
            .findings_by_kind
            .get(&kind)
            .copied()
            .unwrap_or(0)
    }
}
