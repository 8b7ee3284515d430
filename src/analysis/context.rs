//! Calls that lost their context (`CONVENTIONS.md` section 3): judged across chains, since a
//! call made without its request's context starts a trace of its own.
//!
//! [`lost_contexts`] reads every chain held once: the traces whose root is a CLIENT or PRODUCER
//! span of a service S, and the SERVER/CONSUMER spans of S that made no call of their own. A root
//! call whose interval lies inside such a hop of another trace (the hop ending within `tol` +
//! 50 ms after the call) is a call that lost its context: `context_lost` on it, naming the callee
//! and, when exactly one hop of S encloses it, that hop's trace (`linked_trace_id`). A root call
//! that no request of S encloses (a cron, a client application) is not flagged.
//!
//! [`ChainAnalysis::fold_lost_contexts`] folds them into the analysis of the chain whose root is
//! the call, before it is counted (`CONVENTIONS.md` section 6): the finding, its severity, its
//! edge's count, and coverage (the callee hop of such a call could not know any budget).

use std::sync::Arc;

use super::chain::Chain;
use super::chain_analysis::{ChainAnalysis, EdgeSample, Options};
use super::finding_kind::FindingKind;
use super::model::{BudgetSource, Finding, Span, SpanId, TraceId};

const MS: u64 = 1_000_000;
/// How long after the call the enclosing hop may end: it answered once the call returned.
const ANSWER_MS: u64 = 50;

/// One call that lost its context, with what the report needs besides the finding.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LostContext {
    /// The `context_lost` finding, on the call.
    pub finding: Finding,
    /// The service of the hop the call reached, when it is in the call's trace.
    pub callee: Option<Arc<str>>,
    /// Whether that hop was counted as knowing its budget (its own default, say): coverage
    /// counts it as a hop whose budget could not be known instead.
    pub callee_counted_with_budget: bool,
}

/// A hop that made no call of its own: (service, end, start, trace).
type Quiet = (Arc<str>, u64, u64, TraceId);

/// Every call of `chains` that lost its context (see the module's doc), in trace order.
pub fn lost_contexts<'a>(
    chains: impl IntoIterator<Item = &'a Chain>,
    options: &Options,
) -> Vec<LostContext> {
    let chains: Vec<&Chain> = chains.into_iter().collect();
    // (root call, its callee hop) of every chain: most sets have none, and cost one scan.
    let mut roots: Vec<(Span, Option<Span>)> = Vec::new();
    for chain in &chains {
        let here: Vec<Span> = chain
            .spans()
            .filter(|s| s.kind.is_call() && s.parent_span_id.is_none())
            .collect();
        if here.is_empty() {
            continue;
        }
        // The earliest hop under each span (whatever order the spans arrived in).
        let mut callees: std::collections::HashMap<SpanId, Span> = Default::default();
        for c in chain.spans().filter(|c| c.kind.is_hop()) {
            let Some(p) = c.parent_span_id else { continue };
            let entry = callees.entry(p).or_insert_with(|| c.clone());
            if (c.start_unix_nano, c.span_id) < (entry.start_unix_nano, entry.span_id) {
                *entry = c;
            }
        }
        for s in here {
            let callee = callees.remove(&s.span_id);
            roots.push((s, callee));
        }
    }
    if roots.is_empty() {
        return Vec::new();
    }
    let mut services: Vec<Arc<str>> = roots.iter().map(|(s, _)| s.service.clone()).collect();
    services.sort_unstable();
    services.dedup();
    let wanted = |service: &Arc<str>| services.binary_search(service).is_ok();

    // The hops of those services that made no call of their own.
    let mut quiet: Vec<Quiet> = Vec::new();
    for chain in &chains {
        if !chain.spans().any(|s| s.kind.is_hop() && wanted(&s.service)) {
            continue;
        }
        let spans: Vec<Span> = chain.spans().collect();
        let index: std::collections::HashMap<SpanId, usize> = spans
            .iter()
            .enumerate()
            .map(|(i, s)| (s.span_id, i))
            .collect();
        // A hop is busy when a call's nearest hop ancestor is it.
        let mut busy = vec![false; spans.len()];
        for s in spans.iter().filter(|s| s.kind.is_call()) {
            let mut at = s.parent_span_id.and_then(|p| index.get(&p).copied());
            let mut steps = 0;
            while let Some(i) = at {
                if spans[i].kind.is_hop() {
                    busy[i] = true;
                    break;
                }
                steps += 1;
                if steps > spans.len() {
                    break;
                }
                at = spans[i].parent_span_id.and_then(|p| index.get(&p).copied());
            }
        }
        for (i, s) in spans.iter().enumerate() {
            if s.kind.is_hop() && !busy[i] && wanted(&s.service) {
                quiet.push((
                    s.service.clone(),
                    s.end_unix_nano,
                    s.start_unix_nano,
                    s.trace_id,
                ));
            }
        }
    }
    quiet.sort_unstable();
    roots.sort_by_key(|(s, _)| (s.trace_id, s.start_unix_nano, s.span_id));

    let tol = u64::try_from(options.tolerance_ms).unwrap_or(0) * MS;
    let mut out = Vec::new();
    for (call, callee) in roots {
        // Hops of the same service ending from the call's end (less the tolerance) to
        // `tol` + 50 ms after it, and starting before it.
        let lo = call.end_unix_nano.saturating_sub(tol);
        let hi = call.end_unix_nano.saturating_add(tol + ANSWER_MS * MS);
        let from = quiet.partition_point(|q| (&*q.0, q.1) < (&*call.service, lo));
        let mut matches = quiet[from..]
            .iter()
            .take_while(|q| *q.0 == *call.service && q.1 <= hi)
            .filter(|q| q.2 <= call.start_unix_nano.saturating_add(tol) && q.3 != call.trace_id);
        let Some(first) = matches.next() else {
            continue;
        };
        let linked = match matches.next() {
            None => Some(first.3),
            Some(_) => None,
        };
        let callee_name: Arc<str> = callee
            .as_ref()
            .map_or_else(|| call.name.clone(), |c| c.service.clone());
        let message = format!(
            "{} called {callee_name} outside its request's trace: no deadline, no cancellation and no trace reached {callee_name} (Go: pass r.Context() on)",
            call.service
        );
        let kind = FindingKind::ContextLost;
        out.push(LostContext {
            finding: Finding {
                kind,
                severity: kind.severity(),
                trace_id: call.trace_id,
                span_id: call.span_id,
                service: call.service.clone(),
                span_name: call.name.clone(),
                message,
                received_ms: None,
                remaining_ms: None,
                forwarded_ms: call.budget.forwarded_ms,
                wasted_ms: None,
                linked_trace_id: linked,
                count: None,
            },
            callee_counted_with_budget: callee.as_ref().is_some_and(|c| {
                c.budget.budget_ms().is_some()
                    || c.budget.source.is_some_and(BudgetSource::has_budget)
            }),
            callee: callee.map(|c| c.service),
        });
    }
    out
}

impl ChainAnalysis {
    /// Fold the calls of this chain that lost their context (found by [`lost_contexts`] over
    /// the chains held when this one is judged) into its analysis: the findings, their rows'
    /// marks, the severity counts, the count on the edge of each call (in `edges`, this
    /// chain's edge samples), and coverage (the callee hop of such a call is a hop whose budget
    /// could not be known). Calls of other chains in `lost` are skipped.
    pub fn fold_lost_contexts(
        &mut self,
        edges: &mut [EdgeSample],
        lost: &[LostContext],
        chain: &Chain,
    ) {
        for l in lost.iter().filter(|l| l.finding.trace_id == self.trace_id) {
            let f = &l.finding;
            if self
                .findings
                .iter()
                .any(|g| g.kind == f.kind && g.span_id == f.span_id)
            {
                continue;
            }
            self.summary.findings.bump(f.severity);
            self.findings.push(f.clone());
            for row in &mut self.rows {
                if chain
                    .span(row.span as usize)
                    .is_some_and(|s| s.span_id == f.span_id)
                {
                    row.findings.insert(f.kind);
                }
            }
            if let Some(sample) = edges.iter_mut().find(|e| e.call == Some(f.span_id)) {
                sample
                    .findings
                    .get_or_insert_with(Default::default)
                    .bump(f.kind);
            }
            if let Some(callee) = &l.callee
                && l.callee_counted_with_budget
                && self.summary.hops_with_budget > 0
            {
                self.summary.hops_with_budget -= 1;
                if let Err(at) = self.services_without_budget.binary_search(callee) {
                    self.services_without_budget.insert(at, callee.clone());
                }
            }
        }
        self.summary.worst = self.findings.iter().map(|f| f.severity).max();
    }
}
