//! Per-edge (caller service -> callee service) aggregates over many chains.
//!
//! Each [`ChainAnalysis`] carries one [`EdgeSample`] per call that reached a callee hop. An
//! [`EdgeStats`] sums them: it can be fed a chain with [`EdgeStats::add`] and un-fed with
//! [`EdgeStats::remove`] (the exact inverse), so a store that re-analyses a chain when spans
//! join it removes the old analysis and adds the new one, and removes a chain's analysis when it
//! evicts the chain. Percentiles are exact: each distribution keeps a count per distinct
//! millisecond value (budgets take few distinct values), so removal is exact too.

use std::collections::BTreeMap;

use foldhash::HashMap;
use std::sync::Arc;

use super::chain_analysis::{ChainAnalysis, EdgeSample};
use super::finding_kind::{FindingKind, KindCounts};
use super::model::{EdgeReport, Finding, SpanId, TraceId};

/// An exact distribution of millisecond values that supports removal.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Distribution {
    counts: BTreeMap<i64, u64>,
    len: u64,
}

impl Distribution {
    /// Add one value.
    pub fn add(&mut self, value: i64) {
        *self.counts.entry(value).or_insert(0) += 1;
        self.len += 1;
    }

    /// Remove one occurrence of `value` (nothing happens if it is absent).
    pub fn remove(&mut self, value: i64) {
        if let Some(n) = self.counts.get_mut(&value) {
            *n -= 1;
            self.len -= 1;
            if *n == 0 {
                self.counts.remove(&value);
            }
        }
    }

    /// How many values it holds.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether it holds no value.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The nearest-rank percentile `q` (0.0..=1.0): the smallest value with at least `q` of the
    /// values at or below it. `None` when empty.
    pub fn percentile(&self, q: f64) -> Option<i64> {
        if self.len == 0 {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.len as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (&v, &n) in &self.counts {
            seen += n;
            if seen >= rank {
                return Some(v);
            }
        }
        self.counts.keys().next_back().copied()
    }

    /// The median.
    pub fn p50(&self) -> Option<i64> {
        self.percentile(0.50)
    }

    /// The 99th percentile.
    pub fn p99(&self) -> Option<i64> {
        self.percentile(0.99)
    }

    /// The largest value.
    pub fn max(&self) -> Option<i64> {
        self.counts.keys().next_back().copied()
    }

    /// The value that at least `min_group` values lie near (within 2 % or 5 ms of each other,
    /// whichever is larger): the median of the largest such group, the larger group's on a tie.
    /// How a timeout nobody declared is read from the calls that ran into it.
    pub fn cluster(&self, min_group: u64) -> Option<i64> {
        let values: Vec<(i64, u64)> = self.counts.iter().map(|(&v, &n)| (v, n)).collect();
        let mut best: Option<(u64, usize, usize)> = None;
        let (mut end, mut in_window) = (0usize, 0u64);
        for start in 0..values.len() {
            if end < start {
                end = start;
                in_window = 0;
            }
            let band = (values[start].0.saturating_abs() / 50).max(5);
            let limit = values[start].0.saturating_add(band);
            while end < values.len() && values[end].0 <= limit {
                in_window += values[end].1;
                end += 1;
            }
            if best.is_none_or(|(n, _, _)| in_window >= n) {
                best = Some((in_window, start, end));
            }
            in_window -= values[start].1;
        }
        let (n, a, z) = best?;
        if n < min_group {
            return None;
        }
        let rank = n.div_ceil(2);
        let mut seen = 0;
        for &(v, c) in &values[a..z] {
            seen += c;
            if seen >= rank {
                return Some(v);
            }
        }
        None
    }
}

/// Unanswered calls that must end near one value before it is read as the edge's timeout.
pub const MIN_INFERRED_CALLS: u64 = 3;
/// Calls an edge needs before `timeout_oversized` is judged.
pub const MIN_OVERSIZED_CALLS: u64 = 20;
/// `timeout_oversized`: how many times the callee's p99 latency a timeout may be.
pub const OVERSIZED_FACTOR: i64 = 10;

/// A caller -> callee edge, by service names.
type EdgeKey = (Arc<str>, Arc<str>);

/// Timeouts inferred for edges over many chains, by (caller, callee): what
/// [`Chain::analyse_with`](super::Chain::analyse_with) gives calls that declare none.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EdgeTimeouts {
    by_edge: Vec<(EdgeKey, i64)>,
}

impl EdgeTimeouts {
    /// The inferred timeout of calls from `caller` to `callee`, ms.
    pub fn get(&self, caller: &str, callee: &str) -> Option<i64> {
        self.by_edge
            .iter()
            .find(|((a, b), _)| &**a == caller && &**b == callee)
            .map(|(_, t)| *t)
    }

    /// How many edges have one.
    pub fn len(&self) -> usize {
        self.by_edge.len()
    }

    /// Whether no edge has one.
    pub fn is_empty(&self) -> bool {
        self.by_edge.is_empty()
    }

    /// Whether `other` differs from this table by a new or lost edge, or a value moved by
    /// more than 5 %: worth analysing the chains again.
    pub fn differs_much_from(&self, other: &EdgeTimeouts) -> bool {
        self.by_edge.len() != other.by_edge.len()
            || self.by_edge.iter().any(|((a, b), t)| {
                other
                    .get(a, b)
                    .is_none_or(|u| (t - u).saturating_abs() * 20 > (*t).max(1))
            })
    }
}

/// Everything known about one caller -> callee edge.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EdgeAggregate {
    /// The calling service.
    pub caller: Arc<str>,
    /// The called service.
    pub callee: Arc<str>,
    /// Calls seen.
    pub calls: u64,
    /// Findings by kind.
    pub findings: KindCounts,
    /// Milliseconds wasted on this edge (`ran_after_expiry`, `orphaned_work`).
    pub wasted_ms: i64,
    /// Budgets the callee received.
    pub received: Distribution,
    /// Budgets the caller forwarded.
    pub forwarded: Distribution,
    /// The callers' CLIENT span durations.
    pub latency: Distribution,
    /// Timeouts the calls declared.
    pub declared_timeouts: Distribution,
    /// Durations of the calls that got no answer.
    pub unanswered: Distribution,
    /// The slowest call seen: its latency, trace and span (kept while it is held).
    pub slowest: Option<(i64, TraceId, SpanId)>,
}

impl EdgeAggregate {
    /// The edge's timeout and whether it was inferred: the largest declared, else the value
    /// its unanswered calls ended at (`CONVENTIONS.md` section 3).
    pub fn timeout(&self) -> Option<(i64, bool)> {
        match self.declared_timeouts.max() {
            Some(t) => Some((t, false)),
            None => self
                .unanswered
                .cluster(MIN_INFERRED_CALLS)
                .map(|t| (t, true)),
        }
    }

    /// `timeout_oversized`: the timeout is more than 10 times the p99 latency over at least 20
    /// calls, on an edge that forwards no budget (a budget is the user's own patience, never
    /// oversized). Gives the timeout and the p99.
    pub fn oversized(&self) -> Option<(i64, i64)> {
        if self.latency.len() < MIN_OVERSIZED_CALLS || !self.forwarded.is_empty() {
            return None;
        }
        let (timeout, _) = self.timeout()?;
        let p99 = self.latency.p99()?;
        (timeout > p99.max(1).saturating_mul(OVERSIZED_FACTOR)).then_some((timeout, p99))
    }
}

impl EdgeAggregate {
    /// Every finding about this edge: its calls' findings and its own (`timeout_oversized`,
    /// once), as the report counts them.
    pub fn all_findings(&self) -> KindCounts {
        let mut findings = self.findings;
        if self.oversized().is_some() {
            findings.bump(FindingKind::TimeoutOversized);
        }
        findings
    }

    /// This edge as an element of the report's `edges` array.
    pub fn to_report(&self) -> EdgeReport {
        let findings = self.all_findings();
        let timeout = self.timeout();
        EdgeReport {
            caller: self.caller.clone(),
            callee: self.callee.clone(),
            calls: self.calls,
            findings: findings.iter().map(|(k, n)| (k.as_str(), n)).collect(),
            wasted_ms: self.wasted_ms,
            timeout_ms: timeout.map(|t| t.0),
            timeout_inferred: timeout.is_some_and(|t| t.1),
            latency_p50_ms: self.latency.p50(),
            latency_p99_ms: self.latency.p99(),
        }
    }

    /// This edge's own finding, `timeout_oversized`, on its slowest call held.
    pub fn finding(&self) -> Option<Finding> {
        let (timeout, p99) = self.oversized()?;
        let (latency, trace_id, span_id) = self.slowest?;
        Some(Finding {
            kind: FindingKind::TimeoutOversized,
            severity: FindingKind::TimeoutOversized.severity(),
            trace_id,
            span_id,
            service: self.caller.clone(),
            span_name: Arc::from(format!("{} -> {}", self.caller, self.callee)),
            message: format!(
                "{} waits up to {timeout} ms for {}, whose p99 is {p99} ms over {} calls (slowest {latency} ms): a timeout that cuts nothing",
                self.caller,
                self.callee,
                self.latency.len()
            ),
            received_ms: None,
            remaining_ms: None,
            forwarded_ms: None,
            wasted_ms: None,
            linked_trace_id: None,
        })
    }
}

/// Per-edge aggregates over many chains; see the module documentation.
#[derive(Clone, Debug, Default)]
pub struct EdgeStats {
    edges: HashMap<(Arc<str>, Arc<str>), EdgeAggregate>,
}

impl EdgeStats {
    /// No edges yet.
    pub fn new() -> Self {
        EdgeStats::default()
    }

    /// Feed every edge sample of one chain analysis.
    pub fn add(&mut self, analysis: &ChainAnalysis) {
        for s in &analysis.edges {
            self.add_sample(analysis.trace_id, s);
        }
    }

    /// Un-feed a chain analysis fed before with [`add`](Self::add); edges left with no call
    /// disappear.
    pub fn remove(&mut self, analysis: &ChainAnalysis) {
        for s in &analysis.edges {
            self.remove_sample(analysis.trace_id, s);
        }
    }

    /// The timeouts inferred for edges whose calls declare none, for
    /// [`Chain::analyse_with`](super::Chain::analyse_with).
    pub fn inferred_timeouts(&self) -> EdgeTimeouts {
        let mut by_edge: Vec<(EdgeKey, i64)> = self
            .edges
            .values()
            .filter_map(|e| match e.timeout()? {
                (t, true) => Some(((e.caller.clone(), e.callee.clone()), t)),
                _ => None,
            })
            .collect();
        by_edge.sort_unstable();
        EdgeTimeouts { by_edge }
    }

    /// The edges' own findings (`timeout_oversized`), ordered by (caller, callee).
    pub fn findings(&self) -> Vec<Finding> {
        self.sorted()
            .into_iter()
            .filter_map(|e| e.finding())
            .collect()
    }

    /// Feed one sample of the chain `trace_id`.
    pub fn add_sample(&mut self, trace_id: TraceId, s: &EdgeSample) {
        let e = self
            .edges
            .entry((s.caller.clone(), s.callee.clone()))
            .or_insert_with(|| EdgeAggregate {
                caller: s.caller.clone(),
                callee: s.callee.clone(),
                ..EdgeAggregate::default()
            });
        e.calls += 1;
        if let Some(f) = &s.findings {
            for (k, n) in f.0.iter().zip(e.findings.0.iter_mut()) {
                *n += k;
            }
        }
        e.wasted_ms += s.wasted_ms;
        if let Some(v) = s.received_ms {
            e.received.add(v);
        }
        if let Some(v) = s.forwarded_ms {
            e.forwarded.add(v);
        }
        if let Some(v) = s.latency_ms {
            e.latency.add(v);
            if let Some(call) = s.call
                && e.slowest.is_none_or(|(l, _, _)| v > l)
            {
                e.slowest = Some((v, trace_id, call));
            }
        }
        if let Some(v) = s.timeout_ms {
            e.declared_timeouts.add(v);
        }
        if let Some(v) = s.unanswered_ms {
            e.unanswered.add(v);
        }
    }

    /// Un-feed one sample of the chain `trace_id` fed before.
    pub fn remove_sample(&mut self, trace_id: TraceId, s: &EdgeSample) {
        let key = (s.caller.clone(), s.callee.clone());
        let Some(e) = self.edges.get_mut(&key) else {
            return;
        };
        e.calls = e.calls.saturating_sub(1);
        if let Some(f) = &s.findings {
            for (k, n) in f.0.iter().zip(e.findings.0.iter_mut()) {
                *n = n.saturating_sub(*k);
            }
        }
        e.wasted_ms -= s.wasted_ms;
        if let Some(v) = s.received_ms {
            e.received.remove(v);
        }
        if let Some(v) = s.forwarded_ms {
            e.forwarded.remove(v);
        }
        if let Some(v) = s.latency_ms {
            e.latency.remove(v);
        }
        if let Some(v) = s.timeout_ms {
            e.declared_timeouts.remove(v);
        }
        if let Some(v) = s.unanswered_ms {
            e.unanswered.remove(v);
        }
        // The slowest call leaves with its chain; the next slowest is not known until a call
        // as slow arrives, so the edge's finding waits until then.
        if e.slowest
            .is_some_and(|(_, t, call)| t == trace_id && Some(call) == s.call)
        {
            e.slowest = None;
        }
        if e.calls == 0 {
            self.edges.remove(&key);
        }
    }

    /// One edge, if seen.
    pub fn get(&self, caller: &str, callee: &str) -> Option<&EdgeAggregate> {
        self.edges
            .values()
            .find(|e| &*e.caller == caller && &*e.callee == callee)
    }

    /// How many edges.
    pub fn len(&self) -> usize {
        self.edges.len()
    }

    /// Whether there is no edge.
    pub fn is_empty(&self) -> bool {
        self.edges.is_empty()
    }

    /// Every edge, ordered by (caller, callee).
    pub fn sorted(&self) -> Vec<&EdgeAggregate> {
        let mut v: Vec<&EdgeAggregate> = self.edges.values().collect();
        v.sort_unstable_by(|a, b| (&a.caller, &a.callee).cmp(&(&b.caller, &b.callee)));
        v
    }

    /// The report's `edges` array, ordered by (caller, callee).
    pub fn to_reports(&self) -> Vec<EdgeReport> {
        self.sorted().into_iter().map(|e| e.to_report()).collect()
    }
}
