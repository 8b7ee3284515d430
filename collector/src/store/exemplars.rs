//! Exemplars: for each series of `serve`'s metrics that links to a trace, the most recent
//! judged chain that raised it, and by how much (`Store::with_exemplars`, serve's store only).
//!
//! Fed as each chain is folded into the totals: a finding raises its (kind, service) series,
//! an edge sample with dead work raises its edge's wasted seconds, a call's latency its edge's
//! histogram bucket. The metrics read it on their publish (`api::metrics`), and Grafana opens
//! the trace from the exemplar. Bounded like the totals: at most [`MAX_TOTALS_KEYS`] keys of
//! each kind, the first seen.

use std::sync::Arc;

use deadline_budget::analysis::{ChainAnalysis, EdgeSample, FindingKind, MAX_TOTALS_KEYS, TraceId};
use foldhash::HashMap;

/// The edge latency histogram's upper bounds, ms (`+Inf` follows): the buckets of
/// `budget_top_edge_latency_seconds`, and so of its exemplars.
pub const LATENCY_BUCKETS_MS: [i64; 15] = [
    1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10_000, 30_000, 60_000,
];

/// The latency buckets with `+Inf`.
pub const LATENCY_BUCKETS: usize = LATENCY_BUCKETS_MS.len() + 1;

/// The chain behind a series' latest rise.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Exemplar {
    /// Its trace.
    pub trace: TraceId,
    /// What it added: findings, or ms (dead work, a call's latency).
    pub value: f64,
    /// When it was judged, Unix ns (the store's clock).
    pub judged_unix_nano: u64,
}

/// What an edge's series were last raised by.
#[derive(Clone, Debug, Default)]
pub struct EdgeExemplars {
    /// `budget_top_wasted_seconds_total`: the latest chain with dead work on the edge.
    pub wasted: Option<Exemplar>,
    /// `budget_top_edge_latency_seconds`: the latest call in each bucket.
    pub latency: [Option<Exemplar>; LATENCY_BUCKETS],
}

/// See the module doc.
#[derive(Debug, Default)]
pub struct Exemplars {
    /// By the service a finding names, then by kind.
    pub findings: HashMap<Arc<str>, [Option<Exemplar>; FindingKind::COUNT]>,
    /// By (caller, callee).
    pub edges: HashMap<(Arc<str>, Arc<str>), EdgeExemplars>,
}

/// The bucket of a latency of `ms`.
pub fn latency_bucket(ms: i64) -> usize {
    LATENCY_BUCKETS_MS.partition_point(|&bound| bound < ms)
}

impl Exemplars {
    /// A chain folded into the totals at `now` (Unix ns): its findings and its edge samples.
    pub(super) fn fold(&mut self, analysis: &ChainAnalysis, edges: &[EdgeSample], now: u64) {
        let exemplar = |value: f64| Exemplar {
            trace: analysis.trace_id,
            value,
            judged_unix_nano: now,
        };
        // Each (kind, service) once, with how many findings of it the chain has (a chain has
        // few distinct ones, however many findings).
        let mut counted: Vec<(FindingKind, &Arc<str>, f64)> = Vec::new();
        for f in &analysis.findings {
            match counted
                .iter_mut()
                .find(|(kind, service, _)| *kind == f.kind && *service == &f.service)
            {
                Some((_, _, n)) => *n += 1.0,
                None => counted.push((f.kind, &f.service, 1.0)),
            }
        }
        for (kind, service, n) in counted {
            let full = self.findings.len() >= MAX_TOTALS_KEYS;
            let slots = match self.findings.get_mut(service) {
                Some(slots) => slots,
                None if full => continue,
                None => self
                    .findings
                    .entry(service.clone())
                    .or_insert([None; FindingKind::COUNT]),
            };
            slots[kind as usize] = Some(exemplar(n));
        }
        for sample in edges {
            if sample.wasted_ms <= 0 && sample.latency_ms.is_none() {
                continue;
            }
            let key = (sample.caller.clone(), sample.callee.clone());
            let full = self.edges.len() >= MAX_TOTALS_KEYS;
            let slot = match self.edges.get_mut(&key) {
                Some(slot) => slot,
                None if full => continue,
                None => self.edges.entry(key).or_default(),
            };
            if sample.wasted_ms > 0 {
                slot.wasted = Some(exemplar(sample.wasted_ms as f64));
            }
            if let Some(ms) = sample.latency_ms {
                slot.latency[latency_bucket(ms)] = Some(exemplar(ms as f64));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_latency_falls_in_the_first_bucket_at_or_above_it() {
        assert_eq!(latency_bucket(0), 0);
        assert_eq!(latency_bucket(1), 0);
        assert_eq!(latency_bucket(2), 1);
        assert_eq!(latency_bucket(3), 2);
        assert_eq!(latency_bucket(60_000), 14);
        assert_eq!(latency_bucket(60_001), 15, "+Inf");
    }
}
