//! The second walk, the rule pass: each span once, parents before children, judged by the
//! rules of its kind (a hop's, a call's, and those every span of a hop answers to). The rules
//! themselves live in their families' files; this file holds what they share: the pass and its
//! per-span state, how a finding is written, and the edge samples.

use std::sync::Arc;

use crate::analysis::chain::{Chain, NONE, SpanView, Tree, refill};
use crate::analysis::chain_analysis::{EdgeSample, Options, WaitSlack};
use crate::analysis::clocks::Clocks;
use crate::analysis::edges::EdgeTimeouts;
use crate::analysis::finding_kind::FindingKind;
use crate::analysis::model::{Finding, Outcome, SpanKind};

use super::timing::{self, Timing};
use super::timing::{MAX_SPAN_MS, MS, NEVER, ms, ns};

/// The numbers of a finding other than its span.
#[derive(Default)]
pub(super) struct Numbers {
    pub(super) received: Option<i64>,
    pub(super) remaining: Option<i64>,
    pub(super) forwarded: Option<i64>,
    pub(super) wasted: Option<i64>,
}

/// The rule pass over the tree: the findings, and the edge samples. Its per-span vectors are
/// borrowed from the thread's scratch.
pub(super) struct RulePass<'a> {
    pub(super) chain: &'a Chain,
    pub(super) spans: &'a [SpanView<'a>],
    pub(super) tree: &'a Tree,
    pub(super) opts: &'a Options,
    pub(super) timeouts: &'a EdgeTimeouts,
    pub(super) timing: &'a Timing,
    /// The clock corrections applied to `spans`.
    pub(super) clocks: &'a Clocks,
    /// What the pass has learned of each span so far (see [`PassState`]).
    pub(super) state: &'a mut PassState,
    pub(super) edges: Vec<EdgeSample>,
    pub(super) found: Vec<(u32, Finding)>,
    // Working space of `retries`, taken from the scratch and given back.
    pub(super) calls: Vec<u32>,
}

/// What the pass has learned of each span so far, read by the spans judged after it; refilled
/// for each chain (kept from one chain to the next in the thread's scratch).
#[derive(Debug, Default)]
pub(super) struct PassState {
    /// Retry attempts after the first.
    pub(super) is_retry: Vec<bool>,
    /// Calls of a retried call, every attempt (the first too): what a waterfall labels with
    /// its attempt ([`Row::retried`](crate::analysis::Row::retried)).
    pub(super) retried: Vec<bool>,
    /// Hops reported for starting work after expiry.
    pub(super) expired_hop: Vec<bool>,
    /// The call whose forwarded budget reaches each span: its own (a call that forwarded one),
    /// else its parent's, passing through hops that know nothing of budgets (a proxy).
    pub(super) upstream: Vec<u32>,
    /// Per span: a `budget_reset` or `budget_dropped` on it or on its path up.
    pub(super) caused_above: Vec<bool>,
    /// Index into `edges` of each hop's incoming edge, and of each untraced call's own.
    pub(super) edge_of: Vec<u32>,
    /// Per call that declares no timeout: its slack to its hop's wait limit (`timeouts`), for
    /// the edge sample of the hop it leads into.
    pub(super) wait_slack: Vec<Option<WaitSlack>>,
}

impl PassState {
    /// Every mark at its "nothing known" value for a chain of `n` spans.
    pub(super) fn reset(&mut self, n: usize) {
        refill(&mut self.is_retry, n, false);
        refill(&mut self.retried, n, false);
        refill(&mut self.expired_hop, n, false);
        refill(&mut self.upstream, n, NONE);
        refill(&mut self.caused_above, n, false);
        refill(&mut self.edge_of, n, NONE);
        refill(&mut self.wait_slack, n, None);
    }
}

impl RulePass<'_> {
    /// Judge every span, parents first, then the root hops that needed the whole chain.
    pub(super) fn run(&mut self) {
        let (spans, tree) = (self.spans, self.tree);
        // Left over if an earlier analysis on this thread panicked half-way.
        self.found.clear();
        self.retries();
        for &i in &tree.order {
            let i = i as usize;
            self.state.upstream[i] = self.upstream_of(i);
            self.skewed_start(i);
            let before = self.found.len();
            match spans[i].kind {
                k if k.is_hop() => self.hop(i),
                k if k.is_call() => self.call(i),
                _ => {}
            }
            self.started_after_deadline(i);
            let p = tree.parent[i];
            self.state.caused_above[i] = (p != NONE && self.state.caused_above[p as usize])
                || self.found[before..].iter().any(|(at, f)| {
                    *at as usize == i
                        && matches!(
                            f.kind,
                            FindingKind::BudgetReset | FindingKind::BudgetDropped
                        )
                });
        }
    }

    /// The rules a hop answers to, in the order their findings are written.
    fn hop(&mut self, i: usize) {
        self.absurd_span(i);
        self.shed_hop(i);
        self.hop_ran_after_expiry(i);
        self.queue_pressure(i);
        self.received_reset(i);
        self.received_dropped(i);
        self.orphaned(i);
        self.late_answer(i);
        self.clock_skew(i);
        self.edge_sample(i);
    }

    /// The rules a call answers to.
    fn call(&mut self, i: usize) {
        let reset = self.forwarded_reset(i);
        self.forwarded_dropped(i);
        self.shed_call(i);
        let h = self.timing.hop_of[i];
        if self.spans[i].kind == SpanKind::Client && h != NONE {
            if !reset {
                self.timeout_inverted(i, h as usize);
            }
            self.untraced_sample(i, h as usize);
        }
    }

    pub(super) fn push(&mut self, i: usize, kind: FindingKind, message: String, n: Numbers) {
        let s = &self.spans[i];
        self.found.push((
            i as u32,
            Finding {
                kind,
                severity: kind.severity(),
                trace_id: self.chain.trace_id(),
                span_id: s.span_id,
                service: s.service.clone(),
                span_name: s.name.clone(),
                message,
                received_ms: n.received,
                remaining_ms: n.remaining,
                forwarded_ms: n.forwarded,
                wasted_ms: n.wasted,
                linked_trace_id: None,
                count: None,
            },
        ));
    }

    /// The deadline of hop `h` in Unix ns (arrival + budget), if it had a budget.
    pub(super) fn deadline(&self, h: usize) -> Option<i64> {
        timing::deadline(&self.spans[h])
    }

    /// What remained when call `c` was sent: `budget.remaining_ms`, else derived from its hop's
    /// deadline (then 1 ms of extra tolerance for the rounding).
    pub(super) fn remaining(&self, c: usize) -> Option<(i64, i64)> {
        if let Some(r) = self.spans[c].budget.remaining_ms {
            return Some((r, 0));
        }
        let h = self.timing.hop_of[c];
        if h == NONE {
            return None;
        }
        let d = self.deadline(h as usize)?;
        Some((ms(d.saturating_sub(ns(self.spans[c].start_unix_nano))), 1))
    }

    /// The callee hop of call `c`.
    pub(super) fn callee(&self, c: usize) -> Option<usize> {
        timing::callee(self.spans, self.tree, c)
    }

    /// The timeout of call `c` and whether it was inferred (see [`timing::call_timeout`]).
    pub(super) fn timeout(&self, c: usize) -> Option<(i64, bool)> {
        timing::call_timeout(self.spans, self.tree, self.timeouts, c)
    }

    /// The caller's CLIENT/PRODUCER span directly above hop `i`, if it hangs under one.
    pub(super) fn caller_call(&self, i: usize) -> Option<&SpanView<'_>> {
        let p = self.tree.parent[i];
        (p != NONE)
            .then(|| &self.spans[p as usize])
            .filter(|ps| ps.kind.is_call())
    }

    /// What the call into hop `i` forwarded, when a call of the chain leads into it.
    pub(super) fn forwarded_into(&self, i: usize) -> Option<i64> {
        self.caller_call(i).and_then(|c| c.budget.forwarded_ms)
    }

    /// "…; 1,254 ms of work below it for nobody: orders 624, inventory 630", for the dead work
    /// in the subtree of span `i`: each hop's own work, and each wait on an untraced callee
    /// under the callee's name (`own` says whether hop `i`'s own work is counted).
    pub(super) fn dead_below(&self, i: usize, own: bool) -> (i64, String) {
        let t = self.timing;
        let total = if own {
            t.below[i]
        } else {
            t.below[i] - t.own_dead[i]
        };
        if total <= 0 {
            return (0, String::new());
        }
        let mut by: Vec<(Arc<str>, i64)> = Vec::new();
        let mut add = |name: &Arc<str>, d: i64| match by.iter_mut().find(|(s, _)| s == name) {
            Some((_, n)) => *n += d,
            None => by.push((name.clone(), d)),
        };
        let mut stack: Vec<usize> = vec![i];
        // Names only: the total is known, so a huge subtree is looked at in part.
        let mut budget = 4096;
        while let Some(x) = stack.pop() {
            budget -= 1;
            if budget == 0 {
                break;
            }
            let s = &self.spans[x];
            if s.kind.is_hop() && t.own_dead[x] > 0 && (own || x != i) {
                add(s.service, t.own_dead[x]);
            }
            if s.kind.is_call() && t.waited[x] > 0 {
                add(&self.untraced_callee(x), t.waited[x]);
            }
            stack.extend(self.tree.children(x).iter().rev().map(|&c| c as usize));
        }
        const NAMED: usize = 4;
        let mut parts: Vec<String> = by
            .iter()
            .take(NAMED)
            .map(|(s, d)| format!("{s} {}", thousands(*d)))
            .collect();
        if by.len() > NAMED {
            parts.push(format!("{} more", by.len() - NAMED));
        }
        (
            total,
            format!(
                "; {} ms of work below it for nobody: {}",
                thousands(total),
                parts.join(", ")
            ),
        )
    }

    /// The name of the callee of CLIENT call `c` when no hop of it is in the chain: what the
    /// span names (`peer.service`, `server.address`, `db.system`...), else the span's name.
    pub(super) fn untraced_callee(&self, c: usize) -> Arc<str> {
        let s = &self.spans[c];
        s.callee_name.unwrap_or(s.name).clone()
    }

    /// The edge sample of hop `i`, when another service (or a call) leads into it.
    fn edge_sample(&mut self, i: usize) {
        let spans = self.spans;
        let s = &spans[i];
        let p = self.tree.parent[i];
        if p == NONE {
            return;
        }
        let ps = &spans[p as usize];
        let is_call = ps.kind.is_call();
        if !is_call && ps.service != s.service {
            // A proxy's one span (or an uninstrumented client's) stands for the call.
        } else if !is_call {
            return;
        }
        let t = self.timing;
        let caller = t.hop_of[p as usize];
        let call = is_call.then_some(p as usize);
        let (latency_ms, unanswered, call_end, wait_slack) = match call {
            Some(c) => {
                let latency = (ps.kind == SpanKind::Client).then(|| span_ms(ps));
                (
                    latency,
                    t.unanswered[c],
                    ns(ps.end_unix_nano),
                    self.state.wait_slack[c],
                )
            }
            None => {
                // From the callee's start (an uninstrumented client's span: its own start)
                // until the callee was done or the proxy's span ended.
                let end = ns(ps.end_unix_nano).min(t.extent_end[i]);
                let start = if ps.kind == SpanKind::Internal {
                    ns(ps.start_unix_nano)
                } else {
                    ns(s.start_unix_nano)
                };
                let slack = Some(caller)
                    .filter(|&h| h != NONE)
                    .and_then(|h| self.slack_from(start, h as usize));
                let latency = ms(end.saturating_sub(start)).clamp(0, MAX_SPAN_MS);
                (Some(latency), t.unanswered[i], end, slack)
            }
        };
        self.state.edge_of[i] = self.edges.len() as u32;
        let sample = EdgeSample {
            caller: ps.service.clone(),
            callee: s.service.clone(),
            received_ms: s.budget.received_ms,
            forwarded_ms: self.forwarded_into(i),
            findings: Default::default(),
            wasted_ms: t.own_dead[i],
            latency_ms,
            timeout_ms: call.and_then(|c| spans[c].budget.timeout_ms),
            unanswered_ms: latency_ms.filter(|_| unanswered),
            call: call.map(|c| spans[c].span_id),
            wait_slack,
            attempt: call.and_then(|c| spans[c].budget.attempt),
            caller_budget_ms: self.caller_budget(caller),
            untraced: false,
            answered_for_nobody: latency_ms.is_some()
                && !unanswered
                && self.after_give_up(caller, call_end),
            root_left: None,
            remaining_ms: call.and_then(|c| self.remaining(c)).map(|(r, _)| r),
        };
        self.edges.push(sample);
    }

    /// The edge sample of CLIENT call `c` of hop `h` when no hop of its callee is in the chain:
    /// an edge to the untraced callee the call names, carrying the hop's wait on it.
    pub(super) fn untraced_sample(&mut self, c: usize, h: usize) {
        let spans = self.spans;
        let s = &spans[c];
        if s.kind != SpanKind::Client
            || s.budget.outcome == Some(Outcome::Refused)
            || self.timing.absurd[c]
            || self.callee(c).is_some()
        {
            return;
        }
        let t = self.timing;
        let latency = span_ms(s);
        let unanswered = t.unanswered[c];
        self.state.edge_of[c] = self.edges.len() as u32;
        let sample = EdgeSample {
            caller: spans[h].service.clone(),
            callee: self.untraced_callee(c),
            received_ms: None,
            forwarded_ms: s.budget.forwarded_ms,
            findings: Default::default(),
            wasted_ms: t.waited[c],
            latency_ms: Some(latency),
            timeout_ms: s.budget.timeout_ms,
            unanswered_ms: unanswered.then_some(latency),
            call: Some(s.span_id),
            wait_slack: self.state.wait_slack[c],
            attempt: s.budget.attempt,
            caller_budget_ms: self.caller_budget(h as u32),
            untraced: true,
            answered_for_nobody: !unanswered && self.after_give_up(h as u32, ns(s.end_unix_nano)),
            root_left: None,
            remaining_ms: self.remaining(c).map(|(r, _)| r),
        };
        self.edges.push(sample);
    }

    /// The budget of calling hop `h` (what it received, else its default).
    fn caller_budget(&self, h: u32) -> Option<i64> {
        Some(h)
            .filter(|&h| h != NONE)
            .and_then(|h| self.spans[h as usize].budget.budget_ms())
    }

    /// Whether a call of hop `h` that ended at `end` (ns) was answered after `h`'s give-up.
    fn after_give_up(&self, h: u32, end: i64) -> bool {
        h != NONE && {
            let give_up = self.timing.give_up[h as usize];
            give_up != NEVER && end > give_up.saturating_add(self.opts.tolerance_ms * MS)
        }
    }

    /// The edge a finding on span `i` counts against, if any.
    pub(super) fn edge_for(&self, i: usize) -> Option<usize> {
        let s = &self.spans[i];
        let hop = if s.kind.is_hop() {
            Some(i)
        } else if s.kind.is_call() {
            // Its callee's edge; an untraced callee's is the call's own.
            Some(self.callee(i).unwrap_or(i))
        } else {
            Some(self.timing.hop_of[i])
                .filter(|&h| h != NONE)
                .map(|h| h as usize)
        };
        hop.map(|h| self.state.edge_of[h])
            .filter(|&e| e != NONE)
            .map(|e| e as usize)
    }
}

/// A span's duration in whole ms, within a span's possible length.
fn span_ms(s: &SpanView<'_>) -> i64 {
    ms(ns(s.end_unix_nano).saturating_sub(ns(s.start_unix_nano))).clamp(0, MAX_SPAN_MS)
}

/// `1254` as `1,254`.
pub(crate) fn thousands(v: i64) -> String {
    let digits = v.unsigned_abs().to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3 + 1);
    if v < 0 {
        out.push('-');
    }
    for (k, c) in digits.chars().enumerate() {
        if k > 0 && (digits.len() - k).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::thousands;

    #[test]
    fn thousands_groups_digits() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(624), "624");
        assert_eq!(thousands(1254), "1,254");
        assert_eq!(thousands(-1_000_000), "-1,000,000");
    }
}
