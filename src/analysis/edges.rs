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

use super::chain_analysis::ChainAnalysis;
use super::model::{EdgeReport, FindingKind};

/// Counts per [`FindingKind`], indexed by `kind as usize` (the order of [`FindingKind::ALL`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KindCounts(pub [u64; 9]);

impl KindCounts {
    /// The count for one kind.
    pub fn get(&self, kind: FindingKind) -> u64 {
        self.0[kind as usize]
    }
    /// Add one finding of `kind`.
    pub fn bump(&mut self, kind: FindingKind) {
        self.0[kind as usize] += 1;
    }
    /// The total over all kinds.
    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }
    /// The kinds with a non-zero count, in contract order.
    pub fn iter(&self) -> impl Iterator<Item = (FindingKind, u64)> + '_ {
        FindingKind::ALL
            .iter()
            .map(|&k| (k, self.get(k)))
            .filter(|&(_, n)| n > 0)
    }
}

/// One call seen on an edge in one chain: the callee hop and the call (CLIENT span) that led to
/// it, if any. A SERVER span directly under another service's SERVER/INTERNAL span (an
/// uninstrumented client) also makes a sample, with no `forwarded_ms`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EdgeSample {
    /// The calling service (the service of the callee hop's parent span).
    pub caller: Arc<str>,
    /// The called service.
    pub callee: Arc<str>,
    /// The budget the callee hop received (`budget.received_ms`).
    pub received_ms: Option<i64>,
    /// The budget the call forwarded (`budget.forwarded_ms` on the CLIENT span).
    pub forwarded_ms: Option<i64>,
    /// Findings on this call and this callee hop (and the spans inside that hop); `None` when
    /// there are none (most calls: 8 bytes instead of 72 in every sample a store holds).
    pub findings: Option<Box<KindCounts>>,
    /// Milliseconds wasted by those findings.
    pub wasted_ms: i64,
}

impl EdgeSample {
    /// How many findings of `kind` are on this call.
    pub fn count(&self, kind: FindingKind) -> u64 {
        self.findings.as_ref().map_or(0, |f| f.get(kind))
    }
}

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
}

impl EdgeAggregate {
    /// This edge as an element of the report's `edges` array.
    pub fn to_report(&self) -> EdgeReport {
        EdgeReport {
            caller: self.caller.clone(),
            callee: self.callee.clone(),
            calls: self.calls,
            findings: self.findings.iter().map(|(k, n)| (k.as_str(), n)).collect(),
        }
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
            self.add_sample(s);
        }
    }

    /// Un-feed a chain analysis fed before with [`add`](Self::add); edges left with no call
    /// disappear.
    pub fn remove(&mut self, analysis: &ChainAnalysis) {
        for s in &analysis.edges {
            self.remove_sample(s);
        }
    }

    /// Feed one sample.
    pub fn add_sample(&mut self, s: &EdgeSample) {
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
    }

    /// Un-feed one sample fed before.
    pub fn remove_sample(&mut self, s: &EdgeSample) {
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
