//! The rules of `CONVENTIONS.md` section 3, applied to one chain.
//!
//! [`Chain::analyse`] builds the tree (see [`chain`](super::chain)), walks it once in
//! depth-first order (parents before children, so each span can look at the hop it belongs to),
//! and writes findings, waterfall rows and edge samples. Strings are formatted only for the
//! findings' messages.
//!
//! Relationships: a hop is a SERVER/CONSUMER span; a call is a CLIENT/PRODUCER span; the hop a
//! span belongs to is its nearest hop ancestor (itself for a hop); a call's callee hop is a
//! hop directly under it. A hop directly under another service's SERVER/INTERNAL span (an
//! uninstrumented client) still forms a caller -> callee edge. Retries are the calls of one hop
//! with the same span name, when one of them carries `budget.attempt > 1`.
//!
//! Choices the contract leaves open, made here:
//! - `budget_dropped` on a call needs a sign that it was a request that could carry a budget:
//!   budget attributes on the CLIENT span, or a callee hop. A database call traced by stock
//!   instrumentation has neither and is not blamed. It is also not reported when the callee hop
//!   did receive a budget (the span just failed to record `forwarded_ms`). On a hop it needs an
//!   explicit `budget.source` of `none` or `default`: a hop with no budget attributes at all says
//!   nothing about what it received.
//! - `orphaned_work` compares a SERVER hop with its CLIENT span (or, with no CLIENT span, with the
//!   other service's span it hangs under). A CONSUMER is never orphaned: a PRODUCER does not wait.
//!   The request's transit time (hop start − CLIENT start, at most 250 ms) is allowed on top of
//!   the tolerance: a callee's deadline starts at arrival. A hop that shed the request did no work.
//! - `ran_after_expiry` for spans of a hop: the first span on each path that started after the
//!   hop's deadline (arrival + budget) is reported, with its whole duration wasted; spans under it
//!   are not reported again, nor is anything in a hop already reported for starting work expired,
//!   nor a call refused for lack of budget (the right behaviour). A retry attempt that starts late
//!   is `retry_over_budget` instead.
//! - `shed_expired`/`shed_full` come from `budget.outcome` on hops; on a call only when no callee
//!   hop is in the chain to report it. Bare 503/504 statuses are not read as sheds (ambiguous).
//! - `retry_over_budget` (sum rule) compares the sum of the attempts' `forwarded_ms` with what
//!   remained at the first attempt, once at least two attempts forwarded something; it is
//!   reported once per call, on the attempt that tipped the sum.
//! - `budget_reset` on a hop compares what it received with the nearest forwarded budget above
//!   it, passing through hops that record no budget at all (a proxy such as Envoy between two
//!   services): the reset is found where it shows, on the hop that received too much.
//! - `clock_skew` for absolute deadlines, two views, reported once per hop: `deadline_unix_ms`
//!   against arrival + budget on the hop's clock (useful when the budget came from another
//!   carrier); and, for a hop whose `budget.source` is `x-request-deadline`, what it received
//!   against what its caller's CLIENT span forwarded. A receiver clock more than
//!   `absolute_deadline_tolerance_ms` behind also gives `budget_reset`: the callee really does
//!   believe it has longer than its caller waits.
//! - `ran_after_expiry` on a hop without `remaining_at_start_ms` uses budget − queue wait.

use super::chain::{Chain, Link, NONE, Tree};
use super::chain_analysis::{ChainAnalysis, ChainSummary, KindSet, Options, Row};
use super::edges::EdgeSample;
use super::model::{
    BudgetFacts, BudgetSource, Finding, FindingKind, Outcome, SeverityCounts, Span, SpanKind,
};

const MS: i64 = 1_000_000;
/// The most transit time (hop start − CLIENT start) allowed before a late callee counts as orphaned.
const MAX_TRANSIT_ALLOWANCE_MS: i64 = 250;

/// Unix ns as a signed number (saturates past the year 2262).
fn ns(t: u64) -> i64 {
    i64::try_from(t).unwrap_or(i64::MAX)
}

/// Whole ms in a span of ns, rounded down.
fn ms(d: i64) -> i64 {
    d.div_euclid(MS)
}

/// The budget a hop worked to: what it received, else its own default.
fn budget_of(f: &BudgetFacts) -> Option<i64> {
    f.received_ms.or(match f.source {
        Some(BudgetSource::Default) => f.default_ms,
        _ => None,
    })
}

fn has_budget(f: &BudgetFacts) -> bool {
    budget_of(f).is_some() || f.source.is_some_and(BudgetSource::has_budget)
}

fn is_shed(o: Option<Outcome>) -> bool {
    matches!(o, Some(Outcome::ShedExpired | Outcome::ShedFull))
}

/// The numbers of a finding other than its span.
#[derive(Default)]
struct Numbers {
    received: Option<i64>,
    remaining: Option<i64>,
    forwarded: Option<i64>,
    wasted: Option<i64>,
}

struct Walk<'a> {
    chain: &'a Chain,
    spans: &'a [Span],
    tree: &'a Tree,
    opts: &'a Options,
    /// The hop each span belongs to (its nearest hop ancestor or itself).
    hop_of: Vec<u32>,
    /// Retry attempts after the first.
    is_retry: Vec<bool>,
    /// Hops reported for starting work after expiry.
    expired_hop: Vec<bool>,
    /// The call whose forwarded budget reaches each span: its own (a call that forwarded one),
    /// else its parent's, passing through hops that know nothing of budgets (a proxy).
    upstream: Vec<u32>,
    /// Index into `edges` of each hop's incoming edge.
    edge_of: Vec<u32>,
    edges: Vec<EdgeSample>,
    found: Vec<(u32, Finding)>,
}

impl Walk<'_> {
    fn push(&mut self, i: usize, kind: FindingKind, message: String, n: Numbers) {
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
            },
        ));
    }

    /// The deadline of hop `h` in Unix ns (arrival + budget), if it had a budget.
    fn deadline(&self, h: usize) -> Option<i64> {
        let s = &self.spans[h];
        budget_of(&s.budget).map(|b| ns(s.start_unix_nano).saturating_add(b.saturating_mul(MS)))
    }

    /// What remained when call `c` was sent: `budget.remaining_ms`, else derived from its hop's
    /// deadline (then 1 ms of extra tolerance for the rounding).
    fn remaining(&self, c: usize) -> Option<(i64, i64)> {
        if let Some(r) = self.spans[c].budget.remaining_ms {
            return Some((r, 0));
        }
        let h = self.hop_of[c];
        if h == NONE {
            return None;
        }
        let d = self.deadline(h as usize)?;
        Some((ms(d.saturating_sub(ns(self.spans[c].start_unix_nano))), 1))
    }

    fn callee(&self, c: usize) -> Option<usize> {
        self.tree
            .children(c)
            .iter()
            .map(|&x| x as usize)
            .find(|&x| self.spans[x].kind.is_hop())
    }

    /// Retry groups: mark attempts after the first, and apply the sum rule.
    fn retries(&mut self) {
        let spans = self.spans;
        let mut calls: Vec<u32> = (0..spans.len() as u32)
            .filter(|&i| spans[i as usize].kind.is_call() && self.hop_of[i as usize] != NONE)
            .collect();
        let key = |i: u32| {
            let s = &spans[i as usize];
            (
                self.hop_of[i as usize],
                &*s.name,
                s.start_unix_nano,
                s.span_id,
            )
        };
        calls.sort_unstable_by(|&a, &b| key(a).cmp(&key(b)));
        let attempt = |i: u32| spans[i as usize].budget.attempt.unwrap_or(1);
        let mut g0 = 0;
        while g0 < calls.len() {
            let (h, name) = (
                self.hop_of[calls[g0] as usize],
                &spans[calls[g0] as usize].name,
            );
            let mut g1 = g0 + 1;
            while g1 < calls.len()
                && self.hop_of[calls[g1] as usize] == h
                && spans[calls[g1] as usize].name == *name
            {
                g1 += 1;
            }
            let group = &calls[g0..g1];
            g0 = g1;
            if !group.iter().any(|&c| attempt(c) > 1) {
                continue;
            }
            for (k, &c) in group.iter().enumerate() {
                if k > 0 || attempt(c) > 1 {
                    self.is_retry[c as usize] = true;
                }
            }
            let Some((rem0, extra)) = self.remaining(group[0] as usize) else {
                continue;
            };
            let tol = self.opts.tolerance_ms + extra;
            let (mut sum, mut counted) = (0i64, 0usize);
            for &c in group {
                let Some(fw) = spans[c as usize].budget.forwarded_ms else {
                    continue;
                };
                sum = sum.saturating_add(fw);
                counted += 1;
                if counted >= 2 && sum > rem0.saturating_add(tol) {
                    let message = format!(
                        "{counted} attempts forwarded {sum} ms in total with only {rem0} ms left at the first"
                    );
                    let numbers = Numbers {
                        received: budget_of(&spans[h as usize].budget),
                        remaining: Some(rem0),
                        forwarded: Some(sum),
                        wasted: None,
                    };
                    self.push(c as usize, FindingKind::RetryOverBudget, message, numbers);
                    break;
                }
            }
        }
    }

    fn hop(&mut self, i: usize) {
        let spans = self.spans;
        let s = &spans[i];
        let f = &s.budget;
        let p = self.tree.parent[i];
        let parent = (p != NONE).then(|| &spans[p as usize]);
        let caller_call = parent.filter(|ps| ps.kind.is_call());
        let budget = budget_of(f);
        let tol = self.opts.tolerance_for(f.source);
        let (start, end) = (ns(s.start_unix_nano), ns(s.end_unix_nano));

        match f.outcome {
            Some(Outcome::ShedExpired) => {
                let message = match (f.queue_wait_ms, budget) {
                    (Some(q), Some(b)) => format!(
                        "shed at dequeue: expired after {q} ms in the queue with a {b} ms budget"
                    ),
                    _ => "shed at dequeue: expired before work started".to_owned(),
                };
                let numbers = Numbers {
                    received: f.received_ms,
                    remaining: f.remaining_at_start_ms,
                    ..Numbers::default()
                };
                self.push(i, FindingKind::ShedExpired, message, numbers);
            }
            Some(Outcome::ShedFull) => {
                let message = "rejected with 503: the queue was full".to_owned();
                let numbers = Numbers {
                    received: f.received_ms,
                    ..Numbers::default()
                };
                self.push(i, FindingKind::ShedFull, message, numbers);
            }
            _ => {}
        }

        // Without `remaining_at_start_ms`, a queue wait that used up the budget says the same.
        let at_start = f.remaining_at_start_ms.or_else(|| {
            let (q, b) = (f.queue_wait_ms?, budget?);
            Some(b.saturating_sub(q))
        });
        if let Some(r) = at_start
            && r <= 0
            && !is_shed(f.outcome)
        {
            let work_start = match (f.queue_wait_ms, self.deadline(i)) {
                (Some(q), _) => start.saturating_add(q.saturating_mul(MS)),
                (None, Some(d)) => d.max(start),
                (None, None) => start,
            };
            let wasted = ms(end.saturating_sub(work_start)).max(0);
            self.expired_hop[i] = true;
            let message = format!(
                "{} started work with {r} ms left and worked {wasted} ms after its deadline",
                s.service
            );
            let numbers = Numbers {
                received: f.received_ms,
                remaining: Some(r),
                wasted: Some(wasted),
                ..Numbers::default()
            };
            self.push(i, FindingKind::RanAfterExpiry, message, numbers);
        }

        if let (Some(q), Some(b)) = (f.queue_wait_ms, budget)
            && b > 0
            && q.saturating_mul(2) > b
        {
            let message =
                format!("waited {q} ms in the queue, more than half of its {b} ms budget");
            let numbers = Numbers {
                received: Some(b),
                remaining: f.remaining_at_start_ms,
                ..Numbers::default()
            };
            self.push(i, FindingKind::QueuePressure, message, numbers);
        }

        let forwarded = caller_call.and_then(|c| c.budget.forwarded_ms);
        let up = if p == NONE {
            NONE
        } else {
            self.upstream[p as usize]
        };
        if up != NONE
            && let (Some(r), Some(fw)) = (f.received_ms, spans[up as usize].budget.forwarded_ms)
            && r > fw.saturating_add(tol)
        {
            let caller = &spans[up as usize].service;
            let message = if up == p {
                format!("received {r} ms but {caller} forwarded only {fw} ms")
            } else {
                format!("received {r} ms but {caller} forwarded only {fw} ms upstream")
            };
            let numbers = Numbers {
                received: Some(r),
                forwarded: Some(fw),
                ..Numbers::default()
            };
            self.push(i, FindingKind::BudgetReset, message, numbers);
        }

        if matches!(f.source, Some(BudgetSource::None | BudgetSource::Default)) {
            let got = match (f.source, f.default_ms) {
                (Some(BudgetSource::Default), Some(d)) => {
                    format!("fell back to its own default of {d} ms")
                }
                (Some(BudgetSource::Default), None) => "fell back to its own default".to_owned(),
                _ => "received no budget".to_owned(),
            };
            if let (Some(c), Some(fw)) = (caller_call, forwarded) {
                let message = format!(
                    "{} {got} although {} forwarded {fw} ms",
                    s.service, c.service
                );
                let numbers = Numbers {
                    received: f.received_ms,
                    forwarded: Some(fw),
                    ..Numbers::default()
                };
                self.push(i, FindingKind::BudgetDropped, message, numbers);
            } else if caller_call.is_none()
                && let Some(ps) = parent
                && ps.service != s.service
                && let Some(ch) = Some(self.hop_of[p as usize]).filter(|&h| h != NONE)
                && has_budget(&spans[ch as usize].budget)
            {
                let caller = &spans[ch as usize];
                let message = match budget_of(&caller.budget) {
                    Some(b) => format!(
                        "{} {got} although its caller {} had a {b} ms budget",
                        s.service, caller.service
                    ),
                    None => format!(
                        "{} {got} although its caller {} had a budget",
                        s.service, caller.service
                    ),
                };
                let numbers = Numbers {
                    received: f.received_ms,
                    ..Numbers::default()
                };
                self.push(i, FindingKind::BudgetDropped, message, numbers);
            }
        }

        if s.kind == SpanKind::Server
            && let Some(ps) = parent
            && (ps.kind == SpanKind::Client
                || (matches!(ps.kind, SpanKind::Server | SpanKind::Internal)
                    && ps.service != s.service))
        {
            let stop = ns(ps.end_unix_nano);
            // The callee's clock starts when the request arrives, so a callee that used exactly
            // the budget it received ends up to the request's transit time after its caller
            // stopped waiting: that much is not orphaned work.
            let transit = if ps.kind == SpanKind::Client {
                (start - ns(ps.start_unix_nano)).clamp(0, MAX_TRANSIT_ALLOWANCE_MS * MS)
            } else {
                0
            };
            let shed = matches!(f.outcome, Some(Outcome::ShedExpired | Outcome::ShedFull));
            if !shed && end > stop.saturating_add(self.opts.tolerance_ms * MS + transit) {
                let wasted = ms(end - stop.max(start)).max(0);
                let message = format!(
                    "{} worked {wasted} ms after {} stopped waiting",
                    s.service, ps.service
                );
                let numbers = Numbers {
                    received: f.received_ms,
                    forwarded,
                    wasted: Some(wasted),
                    ..Numbers::default()
                };
                self.push(i, FindingKind::OrphanedWork, message, numbers);
            }
        }

        let mut skewed = false;
        if let (Some(d), Some(b)) = (f.deadline_unix_ms, budget) {
            let relative = ms(start).saturating_add(b);
            let diff = d.saturating_sub(relative);
            if diff.saturating_abs() > self.opts.skew_threshold_ms {
                skewed = true;
                let side = if diff > 0 { "later" } else { "earlier" };
                let message = format!(
                    "absolute deadline is {} ms {side} than arrival + {b} ms budget by the clock of {}",
                    diff.saturating_abs(),
                    s.service
                );
                let numbers = Numbers {
                    received: f.received_ms,
                    ..Numbers::default()
                };
                self.push(i, FindingKind::ClockSkew, message, numbers);
            }
        }
        if !skewed
            && f.source == Some(BudgetSource::XRequestDeadline)
            && let (Some(r), Some(fw)) = (f.received_ms, forwarded)
        {
            // The caller meant `fw` ms; an absolute deadline read on another clock gave `r`.
            let diff = r.saturating_sub(fw);
            if diff.saturating_abs() > self.opts.skew_threshold_ms {
                let caller = &spans[p as usize].service;
                let message = format!(
                    "received {r} ms from an absolute deadline but {caller} meant {fw} ms: the clocks differ by about {} ms",
                    diff.saturating_abs()
                );
                let numbers = Numbers {
                    received: Some(r),
                    forwarded: Some(fw),
                    ..Numbers::default()
                };
                self.push(i, FindingKind::ClockSkew, message, numbers);
            }
        }

        if let Some(ps) = parent
            && (caller_call.is_some() || ps.service != s.service)
        {
            self.edge_of[i] = self.edges.len() as u32;
            self.edges.push(EdgeSample {
                caller: ps.service.clone(),
                callee: s.service.clone(),
                received_ms: f.received_ms,
                forwarded_ms: forwarded,
                findings: Default::default(),
                wasted_ms: 0,
            });
        }
    }

    fn call(&mut self, i: usize) {
        let spans = self.spans;
        let s = &spans[i];
        let f = &s.budget;
        let h = self.hop_of[i];
        let callee = self.callee(i);
        let remaining = self.remaining(i);

        if let (Some(fw), Some((rem, extra))) = (f.forwarded_ms, remaining)
            && fw > rem.saturating_add(self.opts.tolerance_ms + extra)
        {
            let message = format!("forwarded {fw} ms with only {rem} ms left");
            let numbers = Numbers {
                remaining: Some(rem),
                forwarded: Some(fw),
                ..Numbers::default()
            };
            self.push(i, FindingKind::BudgetReset, message, numbers);
        }

        let carries = f.remaining_ms.is_some() || f.timeout_ms.is_some() || callee.is_some();
        if f.forwarded_ms.is_none()
            && f.outcome != Some(Outcome::Refused)
            && carries
            && h != NONE
            && has_budget(&spans[h as usize].budget)
            && callee.is_none_or(|x| spans[x].budget.received_ms.is_none())
        {
            let hop = &spans[h as usize];
            let message = match remaining {
                Some((rem, _)) => format!(
                    "{} had {rem} ms left but forwarded no budget on this call",
                    hop.service
                ),
                None => format!(
                    "{} had a budget but forwarded none on this call",
                    hop.service
                ),
            };
            let numbers = Numbers {
                received: budget_of(&hop.budget),
                remaining: remaining.map(|r| r.0),
                ..Numbers::default()
            };
            self.push(i, FindingKind::BudgetDropped, message, numbers);
        }

        if callee.is_none() {
            let shed = match f.outcome {
                Some(Outcome::ShedExpired) => Some((
                    FindingKind::ShedExpired,
                    "the callee shed this call: it expired in its queue",
                )),
                Some(Outcome::ShedFull) => Some((
                    FindingKind::ShedFull,
                    "the callee rejected this call with 503: its queue was full",
                )),
                _ => None,
            };
            if let Some((kind, text)) = shed {
                let numbers = Numbers {
                    remaining: f.remaining_ms,
                    forwarded: f.forwarded_ms,
                    ..Numbers::default()
                };
                self.push(i, kind, text.to_owned(), numbers);
            }
        }
    }

    /// A span of a hop (not the hop itself) that started after the hop's deadline.
    fn late(&mut self, i: usize) {
        let spans = self.spans;
        let s = &spans[i];
        let (h, p) = (self.hop_of[i], self.tree.parent[i]);
        if s.kind.is_hop() || h == NONE || p == NONE || self.expired_hop[h as usize] {
            return;
        }
        let hop = &spans[h as usize];
        if is_shed(hop.budget.outcome) || s.budget.outcome == Some(Outcome::Refused) {
            return;
        }
        let Some(deadline) = self.deadline(h as usize) else {
            return;
        };
        let limit = deadline.saturating_add(self.opts.tolerance_for(hop.budget.source) * MS);
        let start = ns(s.start_unix_nano);
        if start <= limit || ns(spans[p as usize].start_unix_nano) > limit {
            return;
        }
        let late = ms(start.saturating_sub(deadline));
        let numbers = Numbers {
            received: budget_of(&hop.budget),
            remaining: s.budget.remaining_ms.or(Some(-late)),
            forwarded: s.budget.forwarded_ms,
            wasted: None,
        };
        if self.is_retry[i] {
            let attempt = s
                .budget
                .attempt
                .map_or_else(|| "a retry".to_owned(), |a| format!("attempt {a}"));
            let message = format!(
                "{attempt} started {late} ms after the deadline of {}",
                hop.service
            );
            self.push(i, FindingKind::RetryOverBudget, message, numbers);
        } else {
            let wasted = ms(ns(s.end_unix_nano).saturating_sub(start)).max(0);
            let message = format!(
                "{} started \"{}\" {late} ms after its deadline and worked {wasted} ms for nobody",
                hop.service, s.name
            );
            let numbers = Numbers {
                wasted: Some(wasted),
                ..numbers
            };
            self.push(i, FindingKind::RanAfterExpiry, message, numbers);
        }
    }

    /// See [`Walk::upstream`]; parents are visited first.
    fn upstream_of(&self, i: usize) -> u32 {
        let s = &self.spans[i];
        let p = self.tree.parent[i];
        if s.kind.is_call() && s.budget.forwarded_ms.is_some() {
            return i as u32;
        }
        if p == NONE {
            return NONE;
        }
        if s.kind.is_call() {
            let h = self.hop_of[i];
            let transparent = h != NONE && {
                let hf = &self.spans[h as usize].budget;
                hf.source.is_none() && hf.received_ms.is_none()
            };
            if !transparent {
                return NONE;
            }
        }
        self.upstream[p as usize]
    }

    /// A span that starts before its parent: the two clocks disagree.
    fn skewed_start(&mut self, i: usize) {
        let p = self.tree.parent[i];
        if p == NONE {
            return;
        }
        let (s, ps) = (&self.spans[i], &self.spans[p as usize]);
        let ahead = ns(ps.start_unix_nano).saturating_sub(ns(s.start_unix_nano));
        if ahead > self.opts.parent_start_tolerance_ms.saturating_mul(MS) {
            let message = format!(
                "{} starts {} ms before its parent in {}: the clocks disagree",
                s.service,
                ms(ahead),
                ps.service
            );
            self.push(i, FindingKind::ClockSkew, message, Numbers::default());
        }
    }

    /// The edge a finding on span `i` counts against, if any.
    fn edge_for(&self, i: usize) -> Option<usize> {
        let s = &self.spans[i];
        let hop = if s.kind.is_hop() {
            Some(i)
        } else if s.kind.is_call() {
            self.callee(i)
        } else {
            Some(self.hop_of[i])
                .filter(|&h| h != NONE)
                .map(|h| h as usize)
        };
        hop.map(|h| self.edge_of[h])
            .filter(|&e| e != NONE)
            .map(|e| e as usize)
    }
}

impl Chain {
    /// Apply every rule of `CONVENTIONS.md` section 3 to this chain as it stands. Pure and
    /// deterministic: the same spans give the same analysis whatever order they arrived in.
    /// Costs O(n log n) in the number of spans; call it again when spans join (a store would
    /// re-analyse chains that changed once per tick, not once per span).
    pub fn analyse(&self, options: &Options) -> ChainAnalysis {
        let spans: Vec<Span> = self.spans().collect();
        let spans = &spans[..];
        let n = spans.len();
        let tree = Tree::build(self);

        let mut hop_of = vec![NONE; n];
        for &i in &tree.order {
            let i = i as usize;
            hop_of[i] = if spans[i].kind.is_hop() {
                i as u32
            } else if tree.parent[i] != NONE {
                hop_of[tree.parent[i] as usize]
            } else {
                NONE
            };
        }

        let mut walk = Walk {
            chain: self,
            spans,
            tree: &tree,
            opts: options,
            hop_of,
            is_retry: vec![false; n],
            expired_hop: vec![false; n],
            upstream: vec![NONE; n],
            edge_of: vec![NONE; n],
            edges: Vec::new(),
            found: Vec::new(),
        };
        walk.retries();
        for &i in &tree.order {
            let i = i as usize;
            walk.upstream[i] = walk.upstream_of(i);
            walk.skewed_start(i);
            match spans[i].kind {
                k if k.is_hop() => walk.hop(i),
                k if k.is_call() => walk.call(i),
                _ => {}
            }
            walk.late(i);
        }

        // Attribute findings to edges and rows.
        let mut kinds = vec![KindSet::default(); n];
        let mut counts = SeverityCounts::default();
        let mut wasted_total = 0i64;
        let found = std::mem::take(&mut walk.found);
        for (i, f) in &found {
            kinds[*i as usize].insert(f.kind);
            match f.severity {
                super::Severity::Error => counts.error += 1,
                super::Severity::Warning => counts.warning += 1,
                super::Severity::Info => counts.info += 1,
            }
            let wasted = f.wasted_ms.unwrap_or(0);
            wasted_total = wasted_total.saturating_add(wasted);
            if let Some(e) = walk.edge_for(*i as usize) {
                let sample = &mut walk.edges[e];
                sample.findings.get_or_insert_default().bump(f.kind);
                sample.wasted_ms = sample.wasted_ms.saturating_add(wasted);
            }
        }
        let mut found = found;
        found.sort_by(|(a, fa), (b, fb)| {
            let (sa, sb) = (&spans[*a as usize], &spans[*b as usize]);
            (sa.start_unix_nano, sa.span_id, fa.kind).cmp(&(
                sb.start_unix_nano,
                sb.span_id,
                fb.kind,
            ))
        });
        let findings: Vec<Finding> = found.into_iter().map(|(_, f)| f).collect();

        let chain_start = spans.iter().map(|s| s.start_unix_nano).min().unwrap_or(0);
        let chain_end = spans
            .iter()
            .map(|s| s.end_unix_nano)
            .max()
            .unwrap_or(0)
            .max(chain_start);
        let mut row_of = vec![NONE; n];
        for (r, &i) in tree.order.iter().enumerate() {
            row_of[i as usize] = r as u32;
        }
        let rows: Vec<Row> = tree
            .order
            .iter()
            .map(|&i| {
                let p = tree.parent[i as usize];
                Row {
                    span: i,
                    depth: tree.depth[i as usize],
                    parent_row: (p != NONE).then(|| row_of[p as usize]),
                    link: tree.link[i as usize],
                    findings: kinds[i as usize],
                }
            })
            .collect();

        let root = tree.order.first().map(|&i| &spans[i as usize]);
        let first_hop = tree
            .order
            .iter()
            .map(|&i| &spans[i as usize])
            .find(|s| s.kind.is_hop());
        let summary = ChainSummary {
            root_service: root.map(|s| s.service.clone()).unwrap_or_default(),
            root_name: root.map(|s| s.name.clone()).unwrap_or_default(),
            start_unix_nano: chain_start,
            end_unix_nano: chain_end,
            duration_ms: ms(ns(chain_end) - ns(chain_start)),
            edge_budget_ms: first_hop.and_then(|s| budget_of(&s.budget)),
            edge_budget_source: first_hop.and_then(|s| s.budget.source),
            spans: n as u32,
            hops: spans.iter().filter(|s| s.kind.is_hop()).count() as u32,
            orphans: tree.link.iter().filter(|&&l| l == Link::Orphan).count() as u32,
            cycles_cut: tree.link.iter().filter(|&&l| l == Link::CycleCut).count() as u32,
            findings: counts,
            worst: findings.iter().map(|f| f.severity).max(),
            wasted_ms: wasted_total,
        };

        ChainAnalysis {
            trace_id: self.trace_id(),
            summary,
            rows,
            findings,
            edges: walk.edges,
        }
    }
}
