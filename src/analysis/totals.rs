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
    Chain, ChainAnalysis, ChainOutcome, EdgeAggregate, EdgeSample, EdgeStats, KindCounts,
    OutcomeCounts, SeverityCounts, Sketch,
};

/// The most edges, and the most services, the totals keep apart (`CONVENTIONS.md` section 6,
/// as section 7's `--max-series`): past it, a new edge is counted on the edge `other -> other`
/// and a new service as `other`, so that 100,000 distinct service names keep memory bounded.
/// A constant, not a flag: [`Totals::with_max_keys`] sets another for tests.
pub const MAX_TOTALS_KEYS: usize = 10_000;

/// The name the totals count edges and services past [`MAX_TOTALS_KEYS`] under.
pub const OTHER: &str = "other";

/// One hop of a judged chain, as the per-service figures see it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HopSample {
    /// The hop's service.
    pub service: Arc<str>,
    /// Its span's duration, ms (time in service).
    pub work_ms: i64,
    /// Its dead work, ms (the analysis's, as in the chain's wasted ms).
    pub dead_ms: i64,
    /// Its time held for nobody, ms: its wait past its give-up on callee hops of the chain,
    /// whose dead work counts that instant (never in `dead_ms` twice).
    pub held_ms: i64,
    /// Its queue wait, when it queued.
    pub queue_wait_ms: Option<i64>,
}

impl HopSample {
    /// The hop samples of one analysed chain: one per hop row.
    pub fn of(analysis: &ChainAnalysis, chain: &Chain) -> Vec<HopSample> {
        let mut out = Vec::new();
        Self::fill(&mut out, analysis, chain);
        out
    }

    /// The same into `out`, emptied first (a buffer reused from chain to chain). Reads the
    /// chain's spans as views: unpacking each (two reference counts up and down, every fact)
    /// was most of what folding a chain cost.
    pub fn fill(out: &mut Vec<HopSample>, analysis: &ChainAnalysis, chain: &Chain) {
        out.clear();
        out.extend(
            analysis
                .rows
                .iter()
                .filter_map(|row| Self::at(chain, row.span as usize, row.dead_ms, row.held_ms)),
        );
    }

    /// The hop sample of the span at `at` in `chain`, with `dead_ms` of dead work and
    /// `held_ms` held for nobody (its row's); `None` when that span is not a hop. Reads the
    /// span as a view (no unpacking).
    pub fn at(chain: &Chain, at: usize, dead_ms: u32, held_ms: u32) -> Option<HopSample> {
        if !chain.is_hop(at) {
            return None;
        }
        let span = chain.view(at);
        Some(HopSample {
            service: span.service.clone(),
            work_ms: span.duration_ms(),
            dead_ms: i64::from(dead_ms),
            held_ms: i64::from(held_ms),
            queue_wait_ms: span.budget.queue_wait_ms,
        })
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
    /// Time its hops held requests for nobody, waiting on callee hops past their give-up, ms.
    pub held_ms: i64,
    /// Queue waits of the hops that queued.
    pub queue_wait: Sketch,
}

impl ServiceTotals {
    /// The share (0..=1) of this service's work done for callers who had given up.
    pub fn dead_share(&self) -> f64 {
        self.share(self.wasted_ms)
    }

    /// The share (0..=1) of this service's time spent holding requests for nobody: waiting on
    /// its calls after everyone above had stopped waiting (its callees' dead work, not its own).
    pub fn held_share(&self) -> f64 {
        self.share(self.held_ms)
    }

    /// `ms` as a share (0..=1) of this service's time in service.
    fn share(&self, ms: i64) -> f64 {
        if self.work_ms <= 0 {
            0.0
        } else {
            (ms as f64 / self.work_ms as f64).clamp(0.0, 1.0)
        }
    }

    fn add(&mut self, h: &HopSample) {
        self.hops += 1;
        self.work_ms += h.work_ms;
        self.wasted_ms += h.dead_ms;
        self.held_ms += h.held_ms;
        if let Some(q) = h.queue_wait_ms {
            self.queue_wait.add(q);
        }
    }

    fn remove(&mut self, h: &HopSample) {
        self.hops = self.hops.saturating_sub(1);
        self.work_ms -= h.work_ms;
        self.wasted_ms -= h.dead_ms;
        self.held_ms -= h.held_ms;
        if let Some(q) = h.queue_wait_ms {
            self.queue_wait.remove(q);
        }
    }

    fn merge(&mut self, other: &ServiceTotals) {
        self.hops += other.hops;
        self.work_ms += other.work_ms;
        self.wasted_ms += other.wasted_ms;
        self.held_ms += other.held_ms;
        self.queue_wait.merge(&other.queue_wait);
    }
}

/// The running totals of every judged chain; see the module documentation.
#[derive(Clone, Debug)]
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
    /// Chains by the outcome each was judged with; [`Totals::outcomes`] gives them as a report
    /// counts them.
    pub chain_outcomes: OutcomeCounts,
    /// Hops whose budget is known.
    pub hops_with_budget: u64,
    /// For each service with hops whose budget is unknown: in how many chains.
    pub without_budget: BTreeMap<Arc<str>, u64>,
    /// Per-edge figures.
    pub edges: EdgeStats,
    /// Per-service figures.
    pub services: BTreeMap<Arc<str>, ServiceTotals>,
    /// Calls counted on the edge `other -> other` because [`MAX_TOTALS_KEYS`] edges were
    /// kept apart already.
    pub edge_calls_folded: u64,
    /// Hops counted on the service `other` for the same reason.
    pub service_hops_folded: u64,
    /// The earliest start and the latest end of the chains judged, Unix ns: the time the
    /// rates (λ) are over. A chain taken out leaves them (they still hold every chain).
    pub traffic: Option<(u64, u64)>,
    /// Edges and services kept apart at most ([`MAX_TOTALS_KEYS`]).
    pub(super) max_keys: usize,
    /// The chains' own findings by the service each names (past [`MAX_TOTALS_KEYS`]
    /// services, `other`), by kind: the metrics' `budget_top_findings_total{kind,severity,service}`.
    pub findings_by_service: BTreeMap<Arc<str>, KindCounts>,
}

impl Default for Totals {
    fn default() -> Self {
        Totals {
            traces: 0,
            spans: 0,
            hops: 0,
            findings: KindCounts::default(),
            severities: SeverityCounts::default(),
            wasted_ms: 0,
            chain_outcomes: OutcomeCounts::default(),
            hops_with_budget: 0,
            without_budget: BTreeMap::new(),
            edges: EdgeStats::default(),
            services: BTreeMap::new(),
            edge_calls_folded: 0,
            service_hops_folded: 0,
            traffic: None,
            max_keys: MAX_TOTALS_KEYS,
            findings_by_service: BTreeMap::new(),
        }
    }
}

impl Totals {
    /// Empty totals.
    pub fn new() -> Self {
        Totals::default()
    }

    /// The same totals keeping at most `max` edges and `max` services apart (at least 1);
    /// the rest are counted as `other`.
    pub fn with_max_keys(mut self, max: usize) -> Self {
        self.max_keys = max.max(1);
        self
    }

    /// The name a service is counted under: its own while fewer than the cap are kept (or it
    /// is kept already), else [`OTHER`].
    fn service_key<V>(map: &BTreeMap<Arc<str>, V>, max: usize, service: &Arc<str>) -> Arc<str> {
        if map.len() < max || map.contains_key(service) {
            service.clone()
        } else {
            Arc::from(OTHER)
        }
    }

    /// The sample as the totals count it: on its own edge while fewer than the cap are kept
    /// (or it is kept already), else on `other -> other`.
    fn edge_sample<'a>(&self, sample: &'a EdgeSample) -> std::borrow::Cow<'a, EdgeSample> {
        if self.edges.len() < self.max_keys || self.edges.of_sample(sample).is_some() {
            std::borrow::Cow::Borrowed(sample)
        } else {
            std::borrow::Cow::Owned(EdgeSample {
                caller: Arc::from(OTHER),
                callee: Arc::from(OTHER),
                ..sample.clone()
            })
        }
    }

    fn widen(&mut self, span: Option<(u64, u64)>) {
        let Some((from, to)) = span.filter(|(from, to)| from <= to) else {
            return;
        };
        self.traffic = Some(match self.traffic {
            Some((a, b)) => (a.min(from), b.max(to)),
            None => (from, to),
        });
    }

    /// How long the judged chains' traffic lasted, ns (0 when none was judged).
    pub fn traffic_ns(&self) -> u64 {
        self.traffic.map_or(0, |(from, to)| to - from)
    }

    /// Whether a name is counted as `other` (past the cap).
    fn is_other(caller: &str, callee: &str) -> bool {
        caller == OTHER && callee == OTHER
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
            let key = Self::service_key(&self.findings_by_service, self.max_keys, &f.service);
            self.findings_by_service
                .entry(key)
                .or_default()
                .bump(f.kind);
        }
        self.severities.add(s.findings);
        self.wasted_ms = self.wasted_ms.saturating_add(s.wasted_ms);
        self.chain_outcomes.add(s.outcome);
        self.hops_with_budget += u64::from(s.hops_with_budget);
        self.widen(Some((s.start_unix_nano, s.end_unix_nano)));
        for service in &analysis.services_without_budget {
            let key = Self::service_key(&self.without_budget, self.max_keys, service);
            *self.without_budget.entry(key).or_insert(0) += 1;
        }
        for sample in edges {
            let counted = self.edge_sample(sample);
            if Self::is_other(&counted.caller, &counted.callee)
                && !Self::is_other(&sample.caller, &sample.callee)
            {
                self.edge_calls_folded += 1;
            }
            self.edges.add_sample(analysis.trace_id, &counted);
        }
        for h in hops {
            let key = Self::service_key(&self.services, self.max_keys, &h.service);
            if &*key == OTHER && &*h.service != OTHER {
                self.service_hops_folded += 1;
            }
            self.services.entry(key).or_default().add(h);
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
            let key = if self.findings_by_service.contains_key(&f.service) {
                f.service.clone()
            } else {
                Arc::from(OTHER)
            };
            let keep = self.findings_by_service.len() >= self.max_keys;
            if let Some(counts) = self.findings_by_service.get_mut(&key) {
                let n = &mut counts.0[f.kind as usize];
                *n = n.saturating_sub(1);
                if counts.total() == 0 && !keep {
                    self.findings_by_service.remove(&key);
                }
            }
        }
        self.severities.subtract(s.findings);
        self.wasted_ms = self.wasted_ms.saturating_sub(s.wasted_ms);
        self.chain_outcomes.remove(s.outcome);
        self.hops_with_budget = self
            .hops_with_budget
            .saturating_sub(u64::from(s.hops_with_budget));
        // A name past the cap was counted as `other`; one kept apart stays kept while the
        // totals are full (emptied, not removed), so that it is taken out of where it went.
        let full = |len: usize| len >= self.max_keys;
        for service in &analysis.services_without_budget {
            let key = if self.without_budget.contains_key(service) {
                service.clone()
            } else {
                Arc::from(OTHER)
            };
            let keep = full(self.without_budget.len());
            if let Some(n) = self.without_budget.get_mut(&key) {
                *n = n.saturating_sub(1);
                if *n == 0 && !keep {
                    self.without_budget.remove(&key);
                }
            }
        }
        for sample in edges {
            let own = self.edges.of_sample(sample).is_some();
            let keep = full(self.edges.len());
            if own {
                self.edges.remove_sample(analysis.trace_id, sample);
                if keep && self.edges.of_sample(sample).is_none() {
                    self.edges.insert(EdgeAggregate {
                        caller: sample.caller.clone(),
                        callee: sample.callee.clone(),
                        ..EdgeAggregate::default()
                    });
                }
            } else {
                let counted = EdgeSample {
                    caller: Arc::from(OTHER),
                    callee: Arc::from(OTHER),
                    ..sample.clone()
                };
                self.edges.remove_sample(analysis.trace_id, &counted);
                self.edge_calls_folded = self.edge_calls_folded.saturating_sub(1);
            }
        }
        for h in hops {
            let key = if self.services.contains_key(&h.service) {
                h.service.clone()
            } else {
                self.service_hops_folded = self.service_hops_folded.saturating_sub(1);
                Arc::from(OTHER)
            };
            let keep = full(self.services.len());
            if let Some(t) = self.services.get_mut(&key) {
                t.remove(h);
                if t.hops == 0 && !keep {
                    self.services.remove(&key);
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
        for (service, counts) in &other.findings_by_service {
            let key = Self::service_key(&self.findings_by_service, self.max_keys, service);
            let mine = self.findings_by_service.entry(key).or_default();
            for (n, o) in mine.0.iter_mut().zip(counts.0) {
                *n += o;
            }
        }
        self.severities.add(other.severities);
        self.wasted_ms = self.wasted_ms.saturating_add(other.wasted_ms);
        for outcome in ChainOutcome::ALL {
            for _ in 0..other.chain_outcomes.get(outcome) {
                self.chain_outcomes.add(outcome);
            }
        }
        self.hops_with_budget += other.hops_with_budget;
        for (service, n) in &other.without_budget {
            let key = Self::service_key(&self.without_budget, self.max_keys, service);
            *self.without_budget.entry(key).or_insert(0) += n;
        }
        self.edge_calls_folded += other.edge_calls_folded;
        self.service_hops_folded += other.service_hops_folded;
        self.widen(other.traffic);
        for e in other.edges.sorted() {
            let kept =
                self.edges.len() < self.max_keys || self.edges.contains(&e.caller, &e.callee);
            if kept {
                self.edges.insert(e.clone());
            } else {
                if !Self::is_other(&e.caller, &e.callee) {
                    // `other`'s own calls are in `other.edge_calls_folded` already.
                    self.edge_calls_folded += e.calls;
                }
                self.edges.insert(EdgeAggregate {
                    caller: Arc::from(OTHER),
                    callee: Arc::from(OTHER),
                    ..e.clone()
                });
            }
        }
        for (service, t) in &other.services {
            let key = Self::service_key(&self.services, self.max_keys, service);
            if &*key == OTHER && &**service != OTHER {
                self.service_hops_folded += t.hops;
            }
            self.services.entry(key).or_default().merge(t);
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

    /// Chains by outcome, as a report counts them: a chain whose root left its call open (a
    /// proxy's one span) for exactly the edge's timeout gave up on its callee, and is
    /// `deadline_exceeded` rather than the `cancelled` or `error` it was judged with; judged
    /// now from the edges' totals, like their own findings.
    pub fn outcomes(&self) -> OutcomeCounts {
        let mut outcomes = self.chain_outcomes;
        for e in self.edges.sorted() {
            let (answered, failed) = e.roots_gave_up();
            outcomes.shift(
                ChainOutcome::Cancelled,
                ChainOutcome::DeadlineExceeded,
                answered,
            );
            outcomes.shift(ChainOutcome::Error, ChainOutcome::DeadlineExceeded, failed);
        }
        outcomes
    }

    /// The services with hops whose budget is unknown, by name.
    pub fn services_without_budget(&self) -> Vec<Arc<str>> {
        self.without_budget
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(s, _)| s.clone())
            .collect()
    }

    /// Every service with hops, by name.
    pub fn services(&self) -> impl Iterator<Item = (&Arc<str>, &ServiceTotals)> {
        self.services.iter().filter(|(_, t)| t.hops > 0)
    }

    /// Hops whose budget is unknown.
    pub fn hops_without_budget(&self) -> u64 {
        self.hops.saturating_sub(self.hops_with_budget)
    }
}
