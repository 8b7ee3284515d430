//! Per-edge (caller service -> callee service) aggregates over many chains.
//!
//! Each [`ChainAnalysis`] carries one [`EdgeSample`] per call that reached a callee hop. An
//! [`EdgeStats`] sums them: it can be fed a chain with [`EdgeStats::add`] and un-fed with
//! [`EdgeStats::remove`] (the exact inverse), so a store that re-analyses a chain when spans
//! join it removes the old analysis and adds the new one, and removes a chain's analysis when it
//! evicts the chain. Percentiles are exact: each distribution keeps a count per distinct
//! millisecond value (budgets take few distinct values), so removal is exact too.

use foldhash::HashMap;
use std::sync::Arc;

use super::chain_analysis::{ChainAnalysis, EdgeSample};
use super::distribution::Distribution;
use super::finding_kind::{FindingKind, KindCounts};
use super::model::{EdgeReport, EdgeTotals, Finding, SpanId, TraceId};
use super::sketch::Sketch;

/// Unanswered calls that must end near one value before it is read as the edge's timeout.
pub const MIN_INFERRED_CALLS: u64 = 3;
/// Calls an edge needs before `timeout_oversized` is judged.
pub const MIN_OVERSIZED_CALLS: u64 = 20;
/// `timeout_oversized`: how many times the callee's p99 latency a timeout may be.
pub const OVERSIZED_FACTOR: i64 = 10;

/// The slower of two calls; on a tie, the one with the smaller trace and span id, so that the
/// edge names the same call whatever order its calls were counted in (or shards merged in).
fn slower(
    a: Option<(i64, TraceId, SpanId)>,
    b: Option<(i64, TraceId, SpanId)>,
) -> Option<(i64, TraceId, SpanId)> {
    match (a, b) {
        (Some(x), Some(y)) => Some(
            if (y.0, std::cmp::Reverse((y.1, y.2))) > (x.0, std::cmp::Reverse((x.1, x.2))) {
                y
            } else {
                x
            },
        ),
        (x, None) => x,
        (None, y) => y,
    }
}

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
    /// The dead work this edge explains, ms (its samples' `wasted_ms`).
    pub wasted_ms: i64,
    /// Budgets the callee received.
    pub received: Sketch,
    /// Budgets the caller forwarded.
    pub forwarded: Sketch,
    /// The callers' CLIENT span durations.
    pub latency: Sketch,
    /// Timeouts the calls declared.
    pub declared_timeouts: Distribution,
    /// Durations of the calls that got no answer.
    pub unanswered: Distribution,
    /// The wait slacks of the calls that declare no timeout (each call's longest timeout that
    /// would not reach past its hop's wait limit): what an inferred timeout is judged against.
    pub wait_slack: Distribution,
    /// The slowest call seen: its latency, trace and span (kept while it is held).
    pub slowest: Option<(i64, TraceId, SpanId)>,
    /// The calls' attempt numbers (`budget.attempt`): the edge retries when one is above 1.
    pub attempts: Distribution,
    /// The calling hops' budgets: what the advice's retry check fits the attempts into, and
    /// caps its timeout with.
    pub caller_budget: Sketch,
    /// Calls whose callee sent no spans.
    pub untraced_calls: u64,
    /// Durations of the calls answered after their caller's give-up (left out of the advice).
    pub answered_for_nobody: Distribution,
    /// Durations of the calls a root left open while its callee worked, the root answering.
    pub root_left: Distribution,
    /// The same, the root failing.
    pub root_left_failed: Distribution,
    /// What remained of the calling hops' deadlines when the calls were sent: beside the
    /// budget forwarded, what a reset forwarded more than.
    pub remaining: Sketch,
}

impl EdgeAggregate {
    /// Whether the callee sends no spans: every call of the edge reached nothing traced.
    pub fn untraced(&self) -> bool {
        self.calls > 0 && self.untraced_calls == self.calls
    }

    /// The chains whose root left this edge's call open at the edge's timeout (it gave up on
    /// its callee: `deadline_exceeded`): how many were counted `cancelled` (the root said it
    /// answered) and how many `error` (it failed), as [`RootLeft`](super::RootLeft) says.
    pub fn roots_gave_up(&self) -> (u64, u64) {
        let Some((t, _)) = self.timeout() else {
            return (0, 0);
        };
        let band = (t.saturating_abs() / 50).max(5);
        let near = |d: &Distribution| {
            d.values()
                .filter(|(v, _)| (v - t).saturating_abs() <= band)
                .map(|(_, n)| n)
                .sum::<u64>()
        };
        (near(&self.root_left), near(&self.root_left_failed))
    }

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
    /// The edge's own findings' counts, judged from its totals: `timeout_oversized`.
    pub fn edge_findings(&self) -> KindCounts {
        let mut counts = KindCounts::default();
        if self.oversized().is_some() {
            counts.bump(FindingKind::TimeoutOversized);
        }
        if let Some((_, n)) = self.inverted_by_inferred() {
            counts.0[FindingKind::TimeoutInverted as usize] += n;
        }
        counts
    }

    /// `timeout_inverted` against the edge's inferred timeout, judged from every call's wait
    /// slack: the timeout, and how many calls it reaches past their hop's wait limit on.
    pub fn inverted_by_inferred(&self) -> Option<(i64, u64)> {
        let (timeout, true) = self.timeout()? else {
            return None;
        };
        let n = self.wait_slack.count_below(timeout);
        (n > 0).then_some((timeout, n))
    }

    /// The `timeout_inverted` finding of one call of this edge in a chain still held, against
    /// the edge's inferred timeout, when it reaches past the call's wait limit. `call_name` is
    /// the call's span name.
    pub fn inverted_call(
        &self,
        trace_id: TraceId,
        sample: &EdgeSample,
        call_name: Arc<str>,
    ) -> Option<Finding> {
        let (timeout, _) = self.inverted_by_inferred()?;
        let slack = sample.wait_slack?;
        let span_id = sample.call?;
        if timeout <= slack.slack_ms {
            return None;
        }
        let (caller, callee) = (&self.caller, &self.callee);
        let left = slack.left_ms;
        let message = if left <= 0 {
            format!(
                "{caller} called for {callee} with a {timeout} ms timeout (inferred) after everyone above had stopped waiting"
            )
        } else {
            format!(
                "{caller} would wait {timeout} ms for {callee} (inferred timeout) when everyone above stops waiting within {left} ms"
            )
        };
        Some(Finding {
            kind: FindingKind::TimeoutInverted,
            severity: FindingKind::TimeoutInverted.severity(),
            trace_id,
            span_id,
            service: caller.clone(),
            span_name: call_name,
            message,
            received_ms: slack.hop_budget_ms,
            remaining_ms: Some(left),
            forwarded_ms: None,
            wasted_ms: None,
            linked_trace_id: None,
            // Judged from the edge's totals: one of the edge's count.
            count: Some(1),
        })
    }

    /// Every finding about this edge: its calls' findings and its own (judged from its totals:
    /// `timeout_oversized`, `timeout_inverted` against an inferred timeout), as the report
    /// counts them.
    pub fn all_findings(&self) -> KindCounts {
        let mut findings = self.findings;
        for (n, e) in findings.0.iter_mut().zip(self.edge_findings().0) {
            *n += e;
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
            untraced: self.untraced(),
            calls: self.calls,
            findings: findings.iter().collect(),
            wasted_ms: self.wasted_ms,
            timeout_ms: timeout.map(|t| t.0),
            timeout_inferred: timeout.is_some_and(|t| t.1),
            latency_p50_ms: self.latency.p50(),
            latency_p99_ms: self.latency.p99(),
            advice: self.advice(),
            totals: EdgeTotals {
                latency_ms: self.latency.clone(),
                received_ms: self.received.clone(),
                forwarded_ms: self.forwarded.clone(),
                declared_timeouts_ms: self.declared_timeouts.clone(),
                unanswered_ms: self.unanswered.clone(),
                wait_slack_ms: self.wait_slack.clone(),
                slowest: self.slowest,
                attempts: self.attempts.clone(),
                caller_budget_ms: self.caller_budget.clone(),
                untraced_calls: self.untraced_calls,
                answered_for_nobody_ms: self.answered_for_nobody.clone(),
                root_left_ms: self.root_left.clone(),
                root_left_failed_ms: self.root_left_failed.clone(),
                remaining_ms: self.remaining.clone(),
            },
        }
    }

    /// An edge read back from a report: the inverse of [`to_report`](Self::to_report) (the
    /// edge's own findings, judged again from the same totals, are taken out of its counts).
    pub fn from_report(edge: &EdgeReport) -> EdgeAggregate {
        let t = &edge.totals;
        let mut e = EdgeAggregate {
            caller: edge.caller.clone(),
            callee: edge.callee.clone(),
            calls: edge.calls,
            findings: KindCounts::default(),
            wasted_ms: edge.wasted_ms,
            received: t.received_ms.clone(),
            forwarded: t.forwarded_ms.clone(),
            latency: t.latency_ms.clone(),
            declared_timeouts: t.declared_timeouts_ms.clone(),
            unanswered: t.unanswered_ms.clone(),
            wait_slack: t.wait_slack_ms.clone(),
            slowest: t.slowest,
            attempts: t.attempts.clone(),
            caller_budget: t.caller_budget_ms.clone(),
            untraced_calls: t.untraced_calls,
            answered_for_nobody: t.answered_for_nobody_ms.clone(),
            root_left: t.root_left_ms.clone(),
            root_left_failed: t.root_left_failed_ms.clone(),
            remaining: t.remaining_ms.clone(),
        };
        for (&kind, &n) in &edge.findings {
            e.findings.0[kind as usize] += n;
        }
        let own = e.edge_findings();
        for (n, own) in e.findings.0.iter_mut().zip(own.0) {
            *n = n.saturating_sub(own);
        }
        e
    }

    /// The calls of this edge judged `timeout_inverted` against its inferred timeout that no
    /// listed finding names (their chains are no longer held): one finding that names the edge
    /// and the count, with no span (`count` = `calls`). `None` when `calls` is 0.
    pub fn inverted_unlisted(&self, calls: u64) -> Option<Finding> {
        let (timeout, _) = self.inverted_by_inferred()?;
        (calls > 0).then(|| Finding {
            kind: FindingKind::TimeoutInverted,
            severity: FindingKind::TimeoutInverted.severity(),
            trace_id: TraceId::default(),
            span_id: SpanId::default(),
            service: self.caller.clone(),
            span_name: Arc::from(format!("{} -> {}", self.caller, self.callee)),
            message: format!(
                "{} would wait {timeout} ms for {} (inferred timeout) past when everyone above stops waiting, on {calls} call(s) whose chains are not held (judged from the edge's totals)",
                self.caller, self.callee
            ),
            received_ms: None,
            remaining_ms: None,
            forwarded_ms: None,
            wasted_ms: None,
            linked_trace_id: None,
            count: Some(calls),
        })
    }

    /// This edge's own finding, `timeout_oversized`, on its slowest call.
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
            count: Some(1),
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
            if let Some(call) = s.call {
                e.slowest = slower(e.slowest, Some((v, trace_id, call)));
            }
        }
        if let Some(v) = s.timeout_ms {
            e.declared_timeouts.add(v);
        }
        if let Some(v) = s.unanswered_ms {
            e.unanswered.add(v);
        }
        if let Some(w) = s.wait_slack {
            e.wait_slack.add(w.slack_ms);
        }
        if let Some(a) = s.attempt {
            e.attempts.add(a);
        }
        if let Some(b) = s.caller_budget_ms {
            e.caller_budget.add(b);
        }
        e.untraced_calls += u64::from(s.untraced);
        if let Some(v) = s.latency_ms.filter(|_| s.answered_for_nobody) {
            e.answered_for_nobody.add(v);
        }
        if let Some(left) = s.root_left {
            match left.answered {
                true => e.root_left.add(left.after_ms),
                false => e.root_left_failed.add(left.after_ms),
            }
        }
        if let Some(r) = s.remaining_ms {
            e.remaining.add(r);
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
        if let Some(w) = s.wait_slack {
            e.wait_slack.remove(w.slack_ms);
        }
        if let Some(a) = s.attempt {
            e.attempts.remove(a);
        }
        if let Some(b) = s.caller_budget_ms {
            e.caller_budget.remove(b);
        }
        e.untraced_calls = e.untraced_calls.saturating_sub(u64::from(s.untraced));
        if let Some(v) = s.latency_ms.filter(|_| s.answered_for_nobody) {
            e.answered_for_nobody.remove(v);
        }
        if let Some(left) = s.root_left {
            match left.answered {
                true => e.root_left.remove(left.after_ms),
                false => e.root_left_failed.remove(left.after_ms),
            }
        }
        if let Some(r) = s.remaining_ms {
            e.remaining.remove(r);
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

    /// The edge a sample counts on, if seen.
    pub fn of_sample(&self, s: &EdgeSample) -> Option<&EdgeAggregate> {
        self.edges.get(&(s.caller.clone(), s.callee.clone()))
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

    /// Whether the edge `caller -> callee` is kept (perhaps emptied: see [`Totals`]).
    ///
    /// [`Totals`]: super::Totals
    pub fn contains(&self, caller: &Arc<str>, callee: &Arc<str>) -> bool {
        self.edges.contains_key(&(caller.clone(), callee.clone()))
    }

    /// Every edge with a call, ordered by (caller, callee).
    pub fn sorted(&self) -> Vec<&EdgeAggregate> {
        let mut v: Vec<&EdgeAggregate> = self.edges.values().filter(|e| e.calls > 0).collect();
        v.sort_unstable_by(|a, b| (&a.caller, &a.callee).cmp(&(&b.caller, &b.callee)));
        v
    }

    /// The report's `edges` array, ordered by (caller, callee).
    pub fn to_reports(&self) -> Vec<EdgeReport> {
        self.sorted().into_iter().map(|e| e.to_report()).collect()
    }
}

impl EdgeAggregate {
    /// Add another instance's figures for the same edge.
    pub fn merge(&mut self, other: &EdgeAggregate) {
        self.calls += other.calls;
        for (n, o) in self.findings.0.iter_mut().zip(other.findings.0) {
            *n += o;
        }
        self.wasted_ms += other.wasted_ms;
        self.received.merge(&other.received);
        self.forwarded.merge(&other.forwarded);
        self.latency.merge(&other.latency);
        self.declared_timeouts.merge(&other.declared_timeouts);
        self.unanswered.merge(&other.unanswered);
        self.wait_slack.merge(&other.wait_slack);
        self.attempts.merge(&other.attempts);
        self.caller_budget.merge(&other.caller_budget);
        self.untraced_calls += other.untraced_calls;
        self.answered_for_nobody.merge(&other.answered_for_nobody);
        self.root_left.merge(&other.root_left);
        self.root_left_failed.merge(&other.root_left_failed);
        self.remaining.merge(&other.remaining);
        self.slowest = slower(self.slowest, other.slowest);
    }
}

impl EdgeStats {
    /// Put in an edge read back from a report (added to the edge when it is there already).
    pub fn insert(&mut self, edge: EdgeAggregate) {
        match self
            .edges
            .get_mut(&(edge.caller.clone(), edge.callee.clone()))
        {
            Some(e) => e.merge(&edge),
            None => {
                self.edges
                    .insert((edge.caller.clone(), edge.callee.clone()), edge);
            }
        }
    }

    /// Add another instance's edges: the edges one instance would have had.
    pub fn merge(&mut self, other: &EdgeStats) {
        for (key, theirs) in &other.edges {
            self.edges
                .entry(key.clone())
                .or_insert_with(|| EdgeAggregate {
                    caller: theirs.caller.clone(),
                    callee: theirs.callee.clone(),
                    ..EdgeAggregate::default()
                })
                .merge(theirs);
        }
    }
}
