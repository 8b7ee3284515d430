//! What is published to the families: the receivers' and the forwarding's counters, fresh on
//! each scrape, and the judged chains' totals, from the loop that owns the store. The figures
//! are absolute totals: each series is raised to its figure and never lowered (a chain judged
//! again can take a count back: the series then waits until the totals pass it again).

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

use deadline_budget::analysis::{ChainOutcome, FindingKind, Totals};

use super::Metrics;
use super::bound::bounded;
use super::counters::{Traced, raise, raise_each, raise_traced};
use super::exemplars::latest;
use super::histogram::HistogramValues;
use super::labels::{
    BudgetLabel, EdgeLabels, FamilyLabel, FindingLabels, Labels, OutcomeLabel, ReasonLabel,
    ResultLabel, TimeoutLabels,
};
use super::lock;
use crate::ingest::IngestCounts;
use crate::store::exemplars::Exemplars;

impl Metrics {
    /// The receivers' counters (cheap: a scrape always reads them fresh).
    pub fn publish_ingest(&self, ingest: &IngestCounts) {
        let result = |result| ResultLabel { result };
        let spans = [
            ("accepted", ingest.spans_accepted),
            ("refused", ingest.spans_refused),
            ("rejected", ingest.spans_rejected),
        ];
        raise_each(&self.spans, result, spans);
        let requests = [
            ("accepted", ingest.requests_accepted),
            ("refused", ingest.requests_refused),
            ("rejected", ingest.requests_rejected),
            ("unauthenticated", ingest.requests_unauthenticated),
        ];
        raise_each(&self.requests, result, requests);
    }

    /// The forwarding's counters (cheap: a scrape reads them fresh, as the receivers').
    pub fn publish_forward(&self, forward: &crate::forward::ForwardCounts) {
        let spans = [
            ("sent", forward.spans.sent),
            ("retried", forward.spans.retried),
            ("dropped", forward.spans.dropped),
            ("failed", forward.spans.failed),
        ];
        raise_each(
            &self.forwarded_spans,
            |result| ResultLabel { result },
            spans,
        );
        let chains = [
            ("finding", forward.chains.finding),
            ("sample", forward.chains.sample),
        ];
        raise_each(
            &self.forwarded_chains,
            |reason| ReasonLabel { reason },
            chains,
        );
    }

    /// The judged chains' totals (and the chains behind their latest rises, when the store
    /// keeps them), unless an encoding of them is running (then `false`: try again later; the
    /// loop that owns the store must not wait for an encoding).
    pub fn try_publish_totals(&self, totals: &Totals, exemplars: Option<&Exemplars>) -> bool {
        let _busy = match self.totals_busy.try_lock() {
            Ok(guard) => guard,
            Err(std::sync::TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return false,
        };
        self.record_totals(totals, exemplars);
        true
    }

    fn record_totals(&self, totals: &Totals, exemplars: Option<&Exemplars>) {
        let outcomes = totals.outcomes();
        raise_each(
            &self.chains,
            |outcome| OutcomeLabel { outcome },
            ChainOutcome::ALL.map(|outcome| (outcome.as_str(), outcomes.get(outcome))),
        );
        let hops = [
            ("known", totals.hops_with_budget),
            ("unknown", totals.hops_without_budget()),
        ];
        raise_each(&self.hops, |budget| BudgetLabel { budget }, hops);
        self.publish_findings(totals, exemplars);
        let edges = totals.edges.sorted();
        let edge = |caller: &str, callee: &str| EdgeLabels {
            caller: caller.to_owned(),
            callee: callee.to_owned(),
        };
        let traced = |e: &deadline_budget::analysis::EdgeAggregate| {
            exemplars.and_then(|x| x.edges.get(&(e.caller.clone(), e.callee.clone())))
        };
        let overflow = bounded(
            &self.admitted_wasted,
            edges.iter().map(|e| {
                let figure = Traced {
                    value: e.wasted_ms.max(0) as f64 / 1000.0,
                    exemplar: traced(e).and_then(|x| x.wasted),
                };
                (edge(&e.caller, &e.callee), figure)
            }),
            |labels, figure| raise_traced(&self.wasted.get_or_create(labels).0, &figure),
        );
        self.overflowed("budget_top_wasted_seconds_total", overflow);
        let overflow = bounded(
            &self.admitted_calls,
            edges.iter().map(|e| (edge(&e.caller, &e.callee), e.calls)),
            |labels, value| raise(&self.edge_calls.get_or_create(labels), value),
        );
        self.overflowed("budget_top_edge_calls_total", overflow);
        let overflow = bounded(
            &self.admitted_latency,
            edges.iter().map(|e| {
                let figure = Traced {
                    value: HistogramValues::of(&e.latency),
                    exemplar: None,
                };
                (
                    edge(&e.caller, &e.callee),
                    (figure, traced(e).map(|x| x.latency)),
                )
            }),
            |labels, (figure, buckets)| {
                self.latency.get_or_create(labels).raise(&figure.value);
                if let Some(buckets) = buckets {
                    let mut kept = lock(&self.latency_exemplars);
                    let slots = match kept.get_mut(labels) {
                        Some(slots) => slots,
                        None => kept.entry(labels.clone()).or_default(),
                    };
                    for (slot, new) in slots.iter_mut().zip(buckets) {
                        *slot = latest(*slot, new);
                    }
                }
            },
        );
        self.overflowed("budget_top_edge_latency_seconds", overflow);
        self.publish_timeouts(totals);
        self.version.fetch_add(1, Ordering::Relaxed);
        self.published.notify_one();
    }

    fn publish_findings(&self, totals: &Totals, exemplars: Option<&Exemplars>) {
        // The chains' own findings by the service each names, and the edges' own (judged from
        // their totals now), which name the caller.
        let mut counts: BTreeMap<(FindingKind, &str), u64> = BTreeMap::new();
        for (service, kinds) in &totals.findings_by_service {
            for (kind, n) in kinds.iter() {
                *counts.entry((kind, service)).or_default() += n;
            }
        }
        let edges = totals.edges.sorted();
        for e in &edges {
            for (kind, n) in e.edge_findings().iter() {
                *counts.entry((kind, &e.caller)).or_default() += n;
            }
        }
        let overflow = bounded(
            &self.admitted_findings,
            counts.into_iter().map(|((kind, service), n)| {
                let labels = FindingLabels {
                    kind: kind.as_str().to_owned(),
                    severity: kind.severity().as_str().to_owned(),
                    service: service.to_owned(),
                };
                let exemplar = exemplars
                    .and_then(|x| x.findings.get(service))
                    .and_then(|slots| slots[kind as usize]);
                (labels, Traced { value: n, exemplar })
            }),
            |labels, figure| raise_traced(&self.findings.get_or_create(labels), &figure),
        );
        self.overflowed("budget_top_findings_total", overflow);
    }

    fn publish_timeouts(&self, totals: &Totals) {
        let mut now: BTreeMap<TimeoutLabels, f64> = BTreeMap::new();
        let mut admitted = lock(&self.admitted_timeouts);
        let mut overflow = 0;
        for e in totals.edges.sorted() {
            let Some((ms, inferred)) = e.timeout() else {
                continue;
            };
            let labels = TimeoutLabels {
                caller: e.caller.to_string(),
                callee: e.callee.to_string(),
                inferred: inferred.to_string(),
            };
            let seconds = ms as f64 / 1000.0;
            let labels = admitted.place(labels).unwrap_or_else(|| {
                overflow += 1;
                TimeoutLabels::other()
            });
            // `other` shows the longest timeout among the sets it holds.
            let slot = now.entry(labels).or_insert(0.0);
            *slot = slot.max(seconds);
        }
        // A gauge: an edge whose timeout went from inferred to declared (or away) loses its
        // old series.
        let gone: Vec<TimeoutLabels> = admitted
            .sets
            .iter()
            .filter(|l| !now.contains_key(*l))
            .cloned()
            .collect();
        for labels in gone {
            self.timeouts.remove(&labels);
            admitted.sets.remove(&labels);
        }
        drop(admitted);
        for (labels, seconds) in &now {
            self.timeouts.get_or_create(labels).set(*seconds);
        }
        self.overflowed("budget_top_edge_timeout_seconds", overflow);
    }

    fn overflowed(&self, family: &'static str, sets: u64) {
        raise(&self.overflow.get_or_create(&FamilyLabel { family }), sets);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::metrics::test_chains::hop;

    #[test]
    fn counters_only_grow() {
        let metrics = Metrics::new(2);
        let mut ingest = IngestCounts {
            spans_accepted: 10,
            ..IngestCounts::default()
        };
        metrics.publish_ingest(&ingest);
        ingest.spans_accepted = 7;
        metrics.publish_ingest(&ingest);
        let (text, _) = metrics.encode(false);
        assert!(
            text.contains("budget_top_spans_total{result=\"accepted\"} 10\n"),
            "{text}"
        );
    }

    /// A chain judged again moves its outcome: the totals take the old one back, the counter
    /// keeps it (a counter never goes down) and counts the new one.
    #[test]
    fn a_chain_judged_again_never_lowers_a_counter() {
        use deadline_budget::analysis::SpanStatus;
        let hop = |id, parent, service, status| hop([1; 16], id, parent, service, status);
        let mut store = crate::store::Store::new(100);
        store.insert_spans([hop(2, Some(1), "orders", SpanStatus::Unset)]);
        store.judge_all();
        let metrics = Metrics::new(10);
        assert!(metrics.try_publish_totals(store.totals(), store.exemplars()));
        let before = store.totals().outcomes();
        // The root arrives, answering with an error: judged again.
        store.insert_spans([hop(1, None, "frontend", SpanStatus::Error)]);
        store.analyse_dirty();
        let after = store.totals().outcomes();
        assert_eq!(store.counters().chains_rejudged, 1);
        assert_ne!(before, after);
        assert!(metrics.try_publish_totals(store.totals(), store.exemplars()));
        let (text, _) = metrics.encode(false);
        let samples: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("budget_top_chains_total{"))
            .collect();
        for outcome in ChainOutcome::ALL {
            let value = (before.get(outcome)).max(after.get(outcome));
            let line = format!(
                "budget_top_chains_total{{outcome=\"{}\"}} {value}",
                outcome.as_str()
            );
            assert!(samples.contains(&line.as_str()), "{line} in {samples:?}");
        }
    }
}
