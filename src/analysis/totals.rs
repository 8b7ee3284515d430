//! Every chain counted once (`CONVENTIONS.md` section 6): the running totals that judged chains
//! are folded into, and that every figure of the report, the screen and the metrics is read from.
//!
//! A chain is folded once, when it is judged ([`Totals::fold`]); a chain judged again (a span
//! arrived for it while it is still held) is taken back out with the same contribution
//! ([`Totals::unfold`], the exact inverse) and folded anew. Nothing leaves the totals when a
//! chain leaves memory. Two totals add up ([`Totals::merge`]): shards merge into the figures one
//! instance would have had. What a chain contributes is its analysis, its edge samples and its
//! hop samples; nothing here looks at spans.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::{
    Chain, ChainAnalysis, EdgeSample, EdgeStats, KindCounts, OutcomeCounts, SeverityCounts, Sketch,
};

/// One hop of a judged chain, as the per-service figures see it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HopSample {
    /// The hop's service.
    pub service: Arc<str>,
    /// Its span's duration, ms (time in service).
    pub work_ms: i64,
    /// Its dead work, ms (the analysis's, as in the chain's wasted ms).
    pub dead_ms: i64,
    /// Its queue wait, when it queued.
    pub queue_wait_ms: Option<i64>,
}

impl HopSample {
    /// The hop samples of one analysed chain: one per hop row.
    pub fn of(analysis: &ChainAnalysis, chain: &Chain) -> Vec<HopSample> {
        analysis
            .rows
            .iter()
            .filter_map(|row| {
                let span = chain.span(row.span as usize)?;
                span.kind.is_hop().then(|| HopSample {
                    service: span.service.clone(),
                    work_ms: span.duration_ms(),
                    dead_ms: i64::from(row.dead_ms),
                    queue_wait_ms: span.budget.queue_wait_ms,
                })
            })
            .collect()
    }
}

/// One service's figures over every judged chain.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServiceTotals {
    /// Hops handled.
    pub hops: u64,
    /// Time in service, ms (the hops' span durations).
    pub work_ms: i64,
    /// Dead work, ms.
    pub wasted_ms: i64,
    /// Queue waits of the hops that queued.
    pub queue_wait: Sketch,
}

impl ServiceTotals {
    /// The share (0..=1) of this service's work done for callers who had given up.
    pub fn dead_share(&self) -> f64 {
        if self.work_ms <= 0 {
            0.0
        } else {
            (self.wasted_ms as f64 / self.work_ms as f64).clamp(0.0, 1.0)
        }
    }

    fn add(&mut self, h: &HopSample) {
        self.hops += 1;
        self.work_ms += h.work_ms;
        self.wasted_ms += h.dead_ms;
        if let Some(q) = h.queue_wait_ms {
            self.queue_wait.add(q);
        }
    }

    fn remove(&mut self, h: &HopSample) {
        self.hops = self.hops.saturating_sub(1);
        self.work_ms -= h.work_ms;
        self.wasted_ms -= h.dead_ms;
        if let Some(q) = h.queue_wait_ms {
            self.queue_wait.remove(q);
        }
    }

    fn merge(&mut self, other: &ServiceTotals) {
        self.hops += other.hops;
        self.work_ms += other.work_ms;
        self.wasted_ms += other.wasted_ms;
        self.queue_wait.merge(&other.queue_wait);
    }
}

/// The running totals of every judged chain; see the module documentation.
#[derive(Clone, Debug, Default)]
pub struct Totals {
    /// Chains judged.
    pub traces: u64,
    /// Their spans.
    pub spans: u64,
    /// Their hops.
    pub hops: u64,
    /// Their findings by kind (the chains' own; the edges' are judged when a report is made).
    pub findings: KindCounts,
    /// The same by severity.
    pub severities: SeverityCounts,
    /// Their wasted ms (their hops' dead work).
    pub wasted_ms: i64,
    /// Chains by outcome.
    pub outcomes: OutcomeCounts,
    /// Hops whose budget is known.
    pub hops_with_budget: u64,
    /// For each service with hops whose budget is unknown: in how many chains.
    pub without_budget: BTreeMap<Arc<str>, u64>,
    /// Per-edge figures.
    pub edges: EdgeStats,
    /// Per-service figures.
    pub services: BTreeMap<Arc<str>, ServiceTotals>,
}

impl Totals {
    /// Empty totals.
    pub fn new() -> Self {
        Totals::default()
    }

    /// Fold one judged chain in: its analysis, its edge samples (`analysis.edges`, or held
    /// apart by the caller) and its hop samples.
    pub fn fold(&mut self, analysis: &ChainAnalysis, edges: &[EdgeSample], hops: &[HopSample]) {
        let s = &analysis.summary;
        self.traces += 1;
        self.spans += u64::from(s.spans);
        self.hops += u64::from(s.hops);
        for f in &analysis.findings {
            self.findings.bump(f.kind);
        }
        self.severities.add(s.findings);
        self.wasted_ms = self.wasted_ms.saturating_add(s.wasted_ms);
        self.outcomes.add(s.outcome);
        self.hops_with_budget += u64::from(s.hops_with_budget);
        for service in &analysis.services_without_budget {
            *self.without_budget.entry(service.clone()).or_insert(0) += 1;
        }
        for sample in edges {
            self.edges.add_sample(analysis.trace_id, sample);
        }
        for h in hops {
            self.services.entry(h.service.clone()).or_default().add(h);
        }
    }

    /// Take a chain folded before back out, with exactly what it was folded with.
    pub fn unfold(&mut self, analysis: &ChainAnalysis, edges: &[EdgeSample], hops: &[HopSample]) {
        let s = &analysis.summary;
        self.traces = self.traces.saturating_sub(1);
        self.spans = self.spans.saturating_sub(u64::from(s.spans));
        self.hops = self.hops.saturating_sub(u64::from(s.hops));
        for f in &analysis.findings {
            let n = &mut self.findings.0[f.kind as usize];
            *n = n.saturating_sub(1);
        }
        self.severities.subtract(s.findings);
        self.wasted_ms = self.wasted_ms.saturating_sub(s.wasted_ms);
        self.outcomes.remove(s.outcome);
        self.hops_with_budget = self
            .hops_with_budget
            .saturating_sub(u64::from(s.hops_with_budget));
        for service in &analysis.services_without_budget {
            if let Some(n) = self.without_budget.get_mut(service) {
                *n -= 1;
                if *n == 0 {
                    self.without_budget.remove(service);
                }
            }
        }
        for sample in edges {
            self.edges.remove_sample(analysis.trace_id, sample);
        }
        for h in hops {
            if let Some(t) = self.services.get_mut(&h.service) {
                t.remove(h);
                if t.hops == 0 {
                    self.services.remove(&h.service);
                }
            }
        }
    }

    /// Add another instance's totals: the figures one instance would have had.
    pub fn merge(&mut self, other: &Totals) {
        self.traces += other.traces;
        self.spans += other.spans;
        self.hops += other.hops;
        for (n, o) in self.findings.0.iter_mut().zip(other.findings.0) {
            *n += o;
        }
        self.severities.add(other.severities);
        self.wasted_ms = self.wasted_ms.saturating_add(other.wasted_ms);
        for outcome in super::ChainOutcome::ALL {
            for _ in 0..other.outcomes.get(outcome) {
                self.outcomes.add(outcome);
            }
        }
        self.hops_with_budget += other.hops_with_budget;
        for (service, n) in &other.without_budget {
            *self.without_budget.entry(service.clone()).or_insert(0) += n;
        }
        self.edges.merge(&other.edges);
        for (service, t) in &other.services {
            self.services.entry(service.clone()).or_default().merge(t);
        }
    }

    /// Findings by severity: the chains' own and the edges' own (judged now from the edges'
    /// totals), as a report counts them.
    pub fn finding_counts(&self) -> SeverityCounts {
        let mut counts = self.severities;
        for e in self.edges.sorted() {
            for (kind, n) in e.edge_findings().iter() {
                for _ in 0..n {
                    counts.bump(kind.severity());
                }
            }
        }
        counts
    }

    /// Hops whose budget is unknown.
    pub fn hops_without_budget(&self) -> u64 {
        self.hops.saturating_sub(self.hops_with_budget)
    }
}
