//! The rules of `CONVENTIONS.md` section 3, applied to one chain.
//!
//! [`Chain::analyse`] builds the tree (see [`chain`](super::chain)) and walks it twice in
//! depth-first order (parents before children). The first walk measures time from the user's
//! point of view ([`Timing`]): each hop's give-up time (the earliest moment anyone above it
//! stopped waiting), how far its own spans reach, its dead work, the dead work in each subtree,
//! its wait limit and the outcomes that standard statuses imply. The second walk writes the
//! findings, which name those numbers; then rows, edge samples and the summary are read off both.
//! Strings are formatted only for the findings' messages.
//!
//! Relationships: a hop is a SERVER/CONSUMER span; a call is a CLIENT/PRODUCER span; the hop a
//! span belongs to is its nearest hop ancestor (itself for a hop); a call's callee hop is a
//! hop directly under it. A hop directly under another service's SERVER/INTERNAL span (an
//! uninstrumented client) still forms a caller -> callee edge, that span standing for the call.
//! Retries are the calls of one hop with the same span name, when one of them carries
//! `budget.attempt > 1`.
//!
//! Choices the contract leaves open, made here:
//! - `budget_dropped` on a call needs a sign that it was a request that could carry a budget:
//!   budget attributes on the CLIENT span, or a callee hop. A database call traced by stock
//!   instrumentation has neither and is not blamed. It is also not reported when the callee hop
//!   did receive a budget (the span just failed to record `forwarded_ms`). On a hop it needs an
//!   explicit `budget.source` of `none` or `default`: a hop with no budget attributes at all says
//!   nothing about what it received.
//! - A hop's work starts after its queue wait: time in a queue is not service time, so it is
//!   never dead work. A hop that shed the request did no work and has none.
//! - A root hop, or one whose caller is not in the chain, gave up when its own span ended (its
//!   caller had the answer or hung up), or when the budget it received ran out if that came
//!   first: whoever sent a budget stops waiting when it is spent. Its spans that go on past its
//!   own end are dead work, and `orphaned_work` when they go on past the tolerance. A root hop's
//!   dead work has no edge into it: it shows in the chain's and the service's totals only.
//! - A span longer than 24 hours is a broken clock or exporter, not a request: it gets a
//!   `clock_skew` finding and none of its time counts as waste.
//! - `ran_after_expiry` for spans of a hop: the first span on each path that started after the
//!   hop's deadline (arrival + budget) is reported, with its whole duration wasted; spans under it
//!   are not reported again, nor is anything in a hop already reported for starting work expired,
//!   nor a call refused for lack of budget (the right behaviour). A retry attempt that starts late
//!   is `retry_over_budget` instead.
//! - `shed_expired`/`shed_full` come from `budget.outcome` on hops, else from a bare 503/504 (or
//!   gRPC 8/4) answered by a hop that does not relay a status one of its calls got; on a call only
//!   from `budget.outcome`, when no callee hop is in the chain to report it.
//! - `retry_over_budget` (sum rule) compares the sum of the attempts' `forwarded_ms` with what
//!   remained at the first attempt, once at least two attempts forwarded something; it is
//!   reported once per call, on the attempt that tipped the sum.
//! - `budget_reset` on a hop compares what it received with the nearest forwarded budget above
//!   it, passing through hops that record no budget at all (a proxy such as Envoy between two
//!   services): the reset is found where it shows, on the hop that received too much.
//! - A root hop whose status says it answered, while one of its own CLIENT calls was still open
//!   past its end, did not answer: its caller hung up (Node.js's http instrumentation ends the
//!   SERVER span then, with status 200). The chain's outcome is `cancelled`.
//! - `timeout_inverted` is not reported on a call that is itself a `budget_reset` (what it
//!   forwarded is its timeout: the reset says it), nor on a PRODUCER (a producer does not wait).
//! - `clock_skew` for absolute deadlines, two views, reported once per hop: `deadline_unix_ms`
//!   against arrival + budget on the hop's clock (useful when the budget came from another
//!   carrier); and, for a hop whose budget came from an absolute carrier, what it received
//!   against what its caller's CLIENT span forwarded. A receiver clock more than
//!   `absolute_deadline_tolerance_ms` behind also gives `budget_reset`: the callee really does
//!   believe it has longer than its caller waits.
//! - `ran_after_expiry` on a hop without `remaining_at_start_ms` uses budget − queue wait.

use std::cell::RefCell;
use std::sync::Arc;

use super::chain::{Chain, Link, NONE, SpanView, Tree, refill};
use super::chain_analysis::{ChainAnalysis, ChainOutcome, ChainSummary, KindSet, Options, Row};
use super::edges::{EdgeSample, EdgeTimeouts};
use super::model::{
    BudgetFacts, BudgetSource, Finding, FindingKind, Outcome, SeverityCounts, SpanKind, SpanStatus,
};

const MS: i64 = 1_000_000;
/// The most transit time (hop start − CLIENT start) allowed before a late callee counts as orphaned.
const MAX_TRANSIT_ALLOWANCE_MS: i64 = 250;
/// A span longer than this is a broken clock, not a request (`CONVENTIONS.md`: an absolute
/// deadline more than 24 h away is absurd too).
const MAX_SPAN_MS: i64 = 24 * 60 * 60 * 1000;
/// "No such time": a hop nobody above waits for, or one with no known limit.
const NEVER: i64 = i64::MAX;

/// Unix ns as a signed number (saturates past the year 2262).
fn ns(t: u64) -> i64 {
    i64::try_from(t).unwrap_or(i64::MAX)
}

/// Whole ms in a span of ns, rounded down.
fn ms(d: i64) -> i64 {
    d.div_euclid(MS)
}

fn has_budget(f: &BudgetFacts) -> bool {
    f.budget_ms().is_some() || f.source.is_some_and(BudgetSource::has_budget)
}

fn is_shed(o: Option<Outcome>) -> bool {
    matches!(o, Some(Outcome::ShedExpired | Outcome::ShedFull))
}

/// gRPC's `CANCELLED`, `DEADLINE_EXCEEDED` and `RESOURCE_EXHAUSTED`.
const GRPC_CANCELLED: i64 = 1;
const GRPC_DEADLINE_EXCEEDED: i64 = 4;
const GRPC_RESOURCE_EXHAUSTED: i64 = 8;

/// A span's answer as a status: HTTP, else gRPC (offset so the two never compare equal).
fn answer_code(f: &BudgetFacts) -> Option<i64> {
    f.http_status.or(f.rpc_status.map(|c| -1 - c))
}

/// The outcome standard statuses imply for a hop that records no `budget.outcome`
/// (`CONVENTIONS.md` section 3, "Timeouts that nobody declared").
fn status_outcome(s: &SpanView<'_>) -> Outcome {
    let f = &s.budget;
    match (f.http_status, f.rpc_status) {
        (Some(503), _) | (_, Some(GRPC_RESOURCE_EXHAUSTED)) => Outcome::ShedFull,
        (Some(504), _) | (_, Some(GRPC_DEADLINE_EXCEEDED)) => Outcome::DeadlineExceeded,
        (_, Some(GRPC_CANCELLED)) => Outcome::Cancelled,
        (Some(h), _) if h >= 500 => Outcome::Error,
        (_, Some(r)) if r != 0 => Outcome::Error,
        _ if s.status == SpanStatus::Error => Outcome::Error,
        _ => Outcome::Ok,
    }
}

/// The chain's outcome from its root hop: `budget.outcome`, else its status. A generic `error`
/// outcome gives way to the more precise answer its status carries (a gateway relaying its
/// queue's 503 records `error`: its user was shed).
fn chain_outcome(s: &SpanView<'_>) -> ChainOutcome {
    let outcome = match s.budget.outcome {
        Some(Outcome::Error) => match status_outcome(s) {
            o @ (Outcome::ShedFull | Outcome::DeadlineExceeded | Outcome::Cancelled) => o,
            _ => Outcome::Error,
        },
        Some(o) => o,
        None => status_outcome(s),
    };
    match outcome {
        Outcome::Ok => ChainOutcome::Ok,
        Outcome::ShedFull | Outcome::ShedExpired => ChainOutcome::Shed,
        Outcome::DeadlineExceeded => ChainOutcome::DeadlineExceeded,
        Outcome::Cancelled => ChainOutcome::Cancelled,
        Outcome::Error | Outcome::Refused => ChainOutcome::Error,
    }
}

/// The numbers of a finding other than its span.
#[derive(Default)]
struct Numbers {
    received: Option<i64>,
    remaining: Option<i64>,
    forwarded: Option<i64>,
    wasted: Option<i64>,
}

/// Time from the user's point of view, per span (meaningful on hops unless said otherwise).
///
/// [`Timing::measure`] reuses the vectors of the timing it is called on (see [`Scratch`]).
#[derive(Debug, Default)]
struct Timing {
    /// The hop each span belongs to (its nearest hop ancestor or itself).
    hop_of: Vec<u32>,
    /// Each hop's outcome: `budget.outcome`, else what its status implies; a hop relaying a
    /// status one of its calls got is not a shed.
    outcome: Vec<Option<Outcome>>,
    /// When each hop's work starts (arrival + queue wait), ns.
    work_start: Vec<i64>,
    /// The latest end of the hop's own spans (itself, its internal spans and its calls), ns.
    extent_end: Vec<i64>,
    /// The caller's CLIENT start to the hop's start, at most the allowance, ns.
    transit: Vec<i64>,
    /// The earliest moment anyone above the hop stopped waiting, ns ([`NEVER`]: nobody waits).
    give_up: Vec<i64>,
    /// The hop's dead work: its work after its give-up time, ms.
    dead: Vec<i64>,
    /// Per span: the dead work of every hop in its subtree (itself included), ms.
    below: Vec<i64>,
    /// Per call: it failed without an answer from its callee.
    unanswered: Vec<bool>,
    /// Spans too long to be real (see [`MAX_SPAN_MS`]).
    absurd: Vec<bool>,
    // Working space of `measure`, kept for the next chain.
    busy: Vec<bool>,
    call_answers: Vec<(u32, i64)>,
}

/// The second walk over the tree: the findings, and the edge samples. Its per-span vectors are
/// borrowed from the thread's [`Scratch`].
struct Walk<'a> {
    chain: &'a Chain,
    spans: &'a [SpanView<'a>],
    tree: &'a Tree,
    opts: &'a Options,
    timeouts: &'a EdgeTimeouts,
    t: &'a Timing,
    /// The per-span marks the walk sets (see [`Marks`]).
    m: &'a mut Marks,
    edges: Vec<EdgeSample>,
    found: Vec<(u32, Finding)>,
    // Working space of `retries` and `late_roots`, taken from the scratch and given back.
    calls: Vec<u32>,
    explained: Vec<bool>,
}

/// The walk's per-span marks, refilled for each chain (kept from one chain to the next in the
/// thread's [`Scratch`]).
#[derive(Debug, Default)]
struct Marks {
    /// Retry attempts after the first.
    is_retry: Vec<bool>,
    /// Hops reported for starting work after expiry.
    expired_hop: Vec<bool>,
    /// The call whose forwarded budget reaches each span: its own (a call that forwarded one),
    /// else its parent's, passing through hops that know nothing of budgets (a proxy).
    upstream: Vec<u32>,
    /// Per span: a `budget_reset` or `budget_dropped` on it or on its path up.
    caused_above: Vec<bool>,
    /// Per hop: the earliest moment anyone above would stop waiting, ns ([`NEVER`]: unknown).
    wait_limit: Vec<i64>,
    /// Per root hop: judged in the pass after the walk, once its own spans' findings are known
    /// (`orphaned` then reports work past the budget its caller sent).
    explains_late: Vec<bool>,
    /// Index into `edges` of each hop's incoming edge.
    edge_of: Vec<u32>,
}

impl Marks {
    /// Every mark at its "nothing known" value for a chain of `n` spans.
    fn reset(&mut self, n: usize) {
        refill(&mut self.is_retry, n, false);
        refill(&mut self.expired_hop, n, false);
        refill(&mut self.upstream, n, NONE);
        refill(&mut self.caused_above, n, false);
        refill(&mut self.wait_limit, n, NEVER);
        refill(&mut self.explains_late, n, false);
        refill(&mut self.edge_of, n, NONE);
    }
}

impl Timing {
    /// Measure the chain of `spans` (with its `tree`) into this timing.
    fn measure(&mut self, spans: &[SpanView<'_>], tree: &Tree, opts: &Options) {
        let Timing {
            hop_of,
            outcome,
            work_start,
            extent_end,
            transit,
            give_up,
            dead,
            below,
            unanswered,
            absurd,
            busy,
            call_answers,
        } = self;
        let n = spans.len();
        refill(hop_of, n, NONE);
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
        absurd.clear();
        absurd.extend(
            spans.iter().map(|s| {
                ms(ns(s.end_unix_nano).saturating_sub(ns(s.start_unix_nano))) > MAX_SPAN_MS
            }),
        );

        // How far each hop's own spans reach; whether it has any span of its own or a call.
        extent_end.clear();
        extent_end.extend(spans.iter().map(|s| ns(s.end_unix_nano)));
        refill(busy, n, false);
        for i in 0..n {
            let h = hop_of[i];
            if h == NONE || h as usize == i || absurd[i] {
                continue;
            }
            let h = h as usize;
            extent_end[h] = extent_end[h].max(ns(spans[i].end_unix_nano));
            busy[h] = true;
        }

        refill(unanswered, n, false);
        for i in 0..n {
            let s = &spans[i];
            if !s.kind.is_call() || s.budget.outcome == Some(Outcome::Refused) {
                continue;
            }
            let f = &s.budget;
            unanswered[i] = if f.http_status.is_some() {
                false
            } else if let Some(code @ (GRPC_CANCELLED | GRPC_DEADLINE_EXCEEDED)) = f.rpc_status {
                // Raised on the calling side unless the callee answered it in time.
                !tree.children(i).iter().any(|&c| {
                    let callee = &spans[c as usize];
                    callee.kind.is_hop()
                        && callee.budget.rpc_status == Some(code)
                        && ns(callee.end_unix_nano)
                            <= ns(s.end_unix_nano).saturating_add(opts.tolerance_ms * MS)
                })
            } else if f.rpc_status.is_some() {
                false
            } else {
                s.status == SpanStatus::Error
                    || f.exception_event
                    || s.error_type.is_some()
                    || matches!(
                        f.outcome,
                        Some(Outcome::DeadlineExceeded | Outcome::Cancelled)
                    )
            };
        }

        // What each hop's calls were answered, to tell a relayed status from the hop's own.
        call_answers.clear();
        call_answers.extend(
            (0..n)
                .filter(|&c| spans[c].kind.is_call() && hop_of[c] != NONE)
                .filter_map(|c| Some((hop_of[c], answer_code(&spans[c].budget)?))),
        );
        call_answers.sort_unstable();
        refill(outcome, n, None);
        for i in 0..n {
            let s = &spans[i];
            if !s.kind.is_hop() {
                continue;
            }
            outcome[i] = Some(match s.budget.outcome {
                Some(o) => o,
                None => {
                    let o = status_outcome(s);
                    let relaying = || {
                        answer_code(&s.budget).is_some_and(|code| {
                            call_answers.binary_search(&(i as u32, code)).is_ok()
                        })
                    };
                    match o {
                        Outcome::ShedFull if relaying() => Outcome::Error,
                        // Answered before any work or call started: dropped unworked.
                        Outcome::DeadlineExceeded if !busy[i] && !relaying() => {
                            Outcome::ShedExpired
                        }
                        o => o,
                    }
                }
            });
        }

        refill(work_start, n, 0i64);
        refill(transit, n, 0i64);
        refill(give_up, n, NEVER);
        for &i in &tree.order {
            let i = i as usize;
            let s = &spans[i];
            if !s.kind.is_hop() {
                continue;
            }
            let start = ns(s.start_unix_nano);
            let queue = s.budget.queue_wait_ms.unwrap_or(0).clamp(0, MAX_SPAN_MS);
            work_start[i] = start.saturating_add(queue * MS);
            let p = tree.parent[i];
            if p == NONE {
                // The root (or a hop whose caller is not here): its caller had the answer, or
                // hung up, when its span ended; and a caller that sent a budget stopped waiting
                // when that budget ran out (plus what the carrier may be off by).
                let patience = s
                    .budget
                    .received_ms
                    .filter(|_| s.budget.source.is_some_and(BudgetSource::has_budget))
                    .map_or(NEVER, |b| {
                        let slack = opts.tolerance_for(s.budget.source) - opts.tolerance_ms;
                        start.saturating_add(b.saturating_add(slack).saturating_mul(MS))
                    });
                give_up[i] = ns(s.end_unix_nano).min(patience);
                continue;
            }
            let ps = &spans[p as usize];
            if ps.kind == SpanKind::Producer {
                // A producer does not wait: the message's own deadline is all there is.
                give_up[i] = s
                    .budget
                    .budget_ms()
                    .map_or(NEVER, |b| start.saturating_add(b.saturating_mul(MS)));
                continue;
            }
            if ps.kind == SpanKind::Client {
                transit[i] =
                    (start - ns(ps.start_unix_nano)).clamp(0, MAX_TRANSIT_ALLOWANCE_MS * MS);
            }
            let stops = ps.kind.is_call() || ps.service != s.service;
            let own = if stops { ns(ps.end_unix_nano) } else { NEVER };
            let above = match hop_of[p as usize] {
                NONE => NEVER,
                h => give_up[h as usize],
            };
            give_up[i] = own.min(above);
        }

        refill(dead, n, 0i64);
        for i in 0..n {
            if !spans[i].kind.is_hop() || absurd[i] || is_shed(outcome[i]) {
                continue;
            }
            if give_up[i] == NEVER {
                continue;
            }
            // The transit allowance and the tolerance are thresholds, never subtracted from
            // what is reported.
            let over = extent_end[i].saturating_sub(give_up[i].saturating_add(transit[i]));
            if over > opts.tolerance_ms * MS {
                let counted = extent_end[i].saturating_sub(give_up[i].max(work_start[i]));
                dead[i] = ms(counted).clamp(0, MAX_SPAN_MS);
            }
        }
        below.clear();
        below.extend_from_slice(dead);
        for &i in tree.order.iter().rev() {
            let p = tree.parent[i as usize];
            if p != NONE {
                below[p as usize] = below[p as usize].saturating_add(below[i as usize]);
            }
        }
    }
}

impl Timing {
    /// Whether hop `h`'s span ended while one of its own CLIENT calls was still open (past the
    /// tolerance): a request/response hop does not answer before its call returns, unless its
    /// caller hung up.
    fn hung_up(&self, spans: &[SpanView<'_>], h: usize, opts: &Options) -> bool {
        let end = ns(spans[h].end_unix_nano).saturating_add(opts.tolerance_ms * MS);
        (0..spans.len()).any(|c| {
            self.hop_of[c] == h as u32
                && spans[c].kind == SpanKind::Client
                && !self.absurd[c]
                && ns(spans[c].end_unix_nano) > end
        })
    }

    /// Whether hop `h`'s span ended past its give-up time (beyond the tolerance): it answered
    /// after everyone above had stopped waiting.
    fn answered_after_give_up(&self, spans: &[SpanView<'_>], h: usize, opts: &Options) -> bool {
        ns(spans[h].end_unix_nano)
            > self.give_up[h].saturating_add(opts.tolerance_ms.saturating_mul(MS))
    }

    /// How much of span `i`'s own bar lies after its hop's give-up time, when that hop has dead
    /// work: what a waterfall paints as work for nobody.
    fn late(&self, spans: &[SpanView<'_>], i: usize) -> u32 {
        let h = self.hop_of[i];
        if h == NONE || self.dead[h as usize] == 0 || self.absurd[i] {
            return 0;
        }
        let s = &spans[i];
        let start = if h as usize == i {
            self.work_start[i]
        } else {
            ns(s.start_unix_nano)
        };
        let from = start.max(self.give_up[h as usize]);
        u32::try_from(ms(ns(s.end_unix_nano).saturating_sub(from)).max(0)).unwrap_or(u32::MAX)
    }
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
        s.budget
            .budget_ms()
            .map(|b| ns(s.start_unix_nano).saturating_add(b.saturating_mul(MS)))
    }

    /// What remained when call `c` was sent: `budget.remaining_ms`, else derived from its hop's
    /// deadline (then 1 ms of extra tolerance for the rounding).
    fn remaining(&self, c: usize) -> Option<(i64, i64)> {
        if let Some(r) = self.spans[c].budget.remaining_ms {
            return Some((r, 0));
        }
        let h = self.t.hop_of[c];
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

    /// The timeout of call `c`: declared, else the one inferred for its edge; and whether it
    /// was inferred. A call that forwarded a budget has no fixed timeout to infer: it waits as
    /// long as the budget it sent (which `budget_reset` judges).
    fn timeout(&self, c: usize) -> Option<(i64, bool)> {
        let s = &self.spans[c];
        if let Some(t) = s.budget.timeout_ms {
            return Some((t, false));
        }
        if s.budget.forwarded_ms.is_some() {
            return None;
        }
        let callee = self.callee(c)?;
        self.timeouts
            .get(s.service, self.spans[callee].service)
            .map(|t| (t, true))
    }

    /// "…; 1,254 ms of work below it for nobody: orders 624, inventory 630", for the dead work
    /// in the subtree of span `i` (`own` says whether hop `i`'s own dead work is counted).
    fn dead_below(&self, i: usize, own: bool) -> (i64, String) {
        let total = if own {
            self.t.below[i]
        } else {
            self.t.below[i] - self.t.dead[i]
        };
        if total <= 0 {
            return (0, String::new());
        }
        let mut by: Vec<(Arc<str>, i64)> = Vec::new();
        let mut stack: Vec<usize> = vec![i];
        // Names only: the total is known, so a huge subtree is looked at in part.
        let mut budget = 4096;
        while let Some(x) = stack.pop() {
            budget -= 1;
            if budget == 0 {
                break;
            }
            if self.spans[x].kind.is_hop() && self.t.dead[x] > 0 && (own || x != i) {
                let service = self.spans[x].service;
                match by.iter_mut().find(|(s, _)| s == service) {
                    Some((_, d)) => *d += self.t.dead[x],
                    None => by.push((service.clone(), self.t.dead[x])),
                }
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

    /// Retry groups: mark attempts after the first, and apply the sum rule.
    fn retries(&mut self) {
        let spans = self.spans;
        let hop_of = &self.t.hop_of;
        let mut calls = std::mem::take(&mut self.calls);
        calls.clear();
        calls.extend(
            (0..spans.len() as u32)
                .filter(|&i| spans[i as usize].kind.is_call() && hop_of[i as usize] != NONE),
        );
        let key = |i: u32| {
            let s = &spans[i as usize];
            (hop_of[i as usize], &**s.name, s.start_unix_nano, s.span_id)
        };
        calls.sort_unstable_by(|&a, &b| key(a).cmp(&key(b)));
        let attempt = |i: u32| spans[i as usize].budget.attempt.unwrap_or(1);
        let mut g0 = 0;
        while g0 < calls.len() {
            let (h, name) = (
                self.t.hop_of[calls[g0] as usize],
                &spans[calls[g0] as usize].name,
            );
            let mut g1 = g0 + 1;
            while g1 < calls.len()
                && self.t.hop_of[calls[g1] as usize] == h
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
                    self.m.is_retry[c as usize] = true;
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
                        received: spans[h as usize].budget.budget_ms(),
                        remaining: Some(rem0),
                        forwarded: Some(sum),
                        wasted: None,
                    };
                    self.push(c as usize, FindingKind::RetryOverBudget, message, numbers);
                    break;
                }
            }
        }
        self.calls = calls;
    }

    fn hop(&mut self, i: usize) {
        let spans = self.spans;
        let s = &spans[i];
        let f = &s.budget;
        let p = self.tree.parent[i];
        let parent = (p != NONE).then(|| &spans[p as usize]);
        let caller_call = parent.filter(|ps| ps.kind.is_call());
        let budget = f.budget_ms();
        let tol = self.opts.tolerance_for(f.source);
        let start = ns(s.start_unix_nano);
        let outcome = self.t.outcome[i];

        if self.t.absurd[i] {
            let message = format!(
                "{} ends {} h after it starts: a clock or an exporter is wrong; none of its time counts as waste",
                s.service,
                ms(ns(s.end_unix_nano).saturating_sub(start)) / 3_600_000
            );
            self.push(i, FindingKind::ClockSkew, message, Numbers::default());
        }

        match outcome {
            Some(Outcome::ShedExpired) => {
                let message = match (f.queue_wait_ms, budget) {
                    (Some(q), Some(b)) => format!(
                        "shed at dequeue: expired after {q} ms in the queue with a {b} ms budget"
                    ),
                    _ if f.outcome.is_none() => {
                        "answered 504 before any work started: dropped unworked".to_owned()
                    }
                    (None, Some(b)) if b <= 0 => {
                        "refused on arrival: its budget had already run out".to_owned()
                    }
                    _ => "shed: its budget ran out before work started".to_owned(),
                };
                let numbers = Numbers {
                    received: f.received_ms,
                    remaining: f.remaining_at_start_ms,
                    ..Numbers::default()
                };
                self.push(i, FindingKind::ShedExpired, message, numbers);
            }
            Some(Outcome::ShedFull) => {
                let message = if f.outcome.is_none() && f.http_status.is_none() {
                    "rejected with RESOURCE_EXHAUSTED: no room to take the request".to_owned()
                } else {
                    "rejected with 503: the queue was full".to_owned()
                };
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
            && !is_shed(outcome)
            && !self.t.absurd[i]
        {
            let work_start = match (f.queue_wait_ms, self.deadline(i)) {
                (Some(_), _) => self.t.work_start[i],
                (None, Some(d)) => d.max(start),
                (None, None) => start,
            };
            let wasted = ms(self.t.extent_end[i].saturating_sub(work_start)).clamp(0, MAX_SPAN_MS);
            self.m.expired_hop[i] = true;
            let message = if r < 0 {
                format!(
                    "{} started work {} ms after its deadline and worked {wasted} ms for nobody",
                    s.service,
                    r.saturating_neg()
                )
            } else {
                format!(
                    "{} started work just as its deadline passed and worked {wasted} ms for nobody",
                    s.service
                )
            };
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
            let message = if q >= b {
                format!("waited {q} ms in the queue: all of its {b} ms budget")
            } else {
                let share = i128::from(q) * 1000 / i128::from(b);
                format!(
                    "waited {q} ms in the queue: more than half ({}.{} %) of its {b} ms budget",
                    share / 10,
                    share % 10
                )
            };
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
            self.m.upstream[p as usize]
        };
        if up != NONE
            && let (Some(r), Some(fw)) = (f.received_ms, spans[up as usize].budget.forwarded_ms)
            && r > fw.saturating_add(tol)
        {
            let caller = &spans[up as usize].service;
            let (wasted, tail) = self.dead_below(i, true);
            let message = if up == p {
                format!("received {r} ms but {caller} forwarded only {fw} ms{tail}")
            } else {
                format!("received {r} ms but {caller} forwarded only {fw} ms upstream{tail}")
            };
            let numbers = Numbers {
                received: Some(r),
                forwarded: Some(fw),
                wasted: (wasted > 0).then_some(wasted),
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
            let caller_budget = if let (Some(c), Some(fw)) = (caller_call, forwarded) {
                Some(format!("{} forwarded {fw} ms", c.service))
            } else if caller_call.is_none()
                && let Some(ps) = parent
                && ps.service != s.service
                && let Some(ch) = Some(self.t.hop_of[p as usize]).filter(|&h| h != NONE)
                && has_budget(&spans[ch as usize].budget)
            {
                let caller = &spans[ch as usize];
                Some(match caller.budget.budget_ms() {
                    Some(b) => format!("its caller {} had a {b} ms budget", caller.service),
                    None => format!("its caller {} had a budget", caller.service),
                })
            } else {
                None
            };
            if let Some(why) = caller_budget {
                let (wasted, tail) = self.dead_below(i, true);
                let message = format!("{} {got} although {why}{tail}", s.service);
                let numbers = Numbers {
                    received: f.received_ms,
                    forwarded,
                    wasted: (wasted > 0).then_some(wasted),
                    ..Numbers::default()
                };
                self.push(i, FindingKind::BudgetDropped, message, numbers);
            }
        }

        self.orphaned(i);
        self.clock_skew(i, forwarded);

        // The wait limit: this hop's own deadline, the timeout of the call into it, and the
        // wait limit of the hop that made that call.
        let mut limit = self.deadline(i).unwrap_or(NEVER);
        if let Some(ps) = parent
            && ps.kind != SpanKind::Producer
        {
            if ps.kind == SpanKind::Client
                && let Some((t, _)) = self.timeout(p as usize)
            {
                limit = limit.min(ns(ps.start_unix_nano).saturating_add(t.saturating_mul(MS)));
            }
            let ch = self.t.hop_of[p as usize];
            if ch != NONE {
                limit = limit.min(self.m.wait_limit[ch as usize]);
            }
        }
        self.m.wait_limit[i] = limit;

        if let Some(ps) = parent
            && (caller_call.is_some() || ps.service != s.service)
        {
            let latency_ms = (ps.kind == SpanKind::Client).then(|| {
                ms(ns(ps.end_unix_nano).saturating_sub(ns(ps.start_unix_nano)))
                    .clamp(0, MAX_SPAN_MS)
            });
            let call = caller_call.map(|_| p as usize);
            self.m.edge_of[i] = self.edges.len() as u32;
            self.edges.push(EdgeSample {
                caller: ps.service.clone(),
                callee: s.service.clone(),
                received_ms: f.received_ms,
                forwarded_ms: forwarded,
                findings: Default::default(),
                wasted_ms: self.t.dead[i],
                latency_ms,
                timeout_ms: call.and_then(|c| spans[c].budget.timeout_ms),
                unanswered_ms: call.filter(|&c| self.t.unanswered[c]).and(latency_ms),
                call: call.map(|c| spans[c].span_id),
            });
        }
    }

    /// Root hops that worked on past the budget their caller sent, judged after the walk: not
    /// when a finding on their own spans already explains the late work (`ran_after_expiry`,
    /// a late retry), and not twice when their own spans outlived them (found in the walk).
    fn late_roots(&mut self) {
        let mut explained = std::mem::take(&mut self.explained);
        refill(&mut explained, self.spans.len(), false);
        for (at, f) in &self.found {
            let h = self.t.hop_of[*at as usize];
            if h != NONE
                && matches!(
                    f.kind,
                    FindingKind::RanAfterExpiry | FindingKind::RetryOverBudget
                )
            {
                explained[h as usize] = true;
            }
            if f.kind == FindingKind::OrphanedWork {
                explained[*at as usize] = true;
            }
        }
        for (i, &explained) in explained.iter().enumerate() {
            let s = &self.spans[i];
            if s.kind.is_hop()
                && self.tree.parent[i] == NONE
                && !explained
                && self.t.give_up[i] < ns(s.end_unix_nano)
            {
                self.m.explains_late[i] = true;
                self.orphaned(i);
            }
        }
        self.explained = explained;
    }

    /// `orphaned_work`: the hop's spans went on past the moment its caller stopped waiting.
    fn orphaned(&mut self, i: usize) {
        let spans = self.spans;
        let s = &spans[i];
        if s.kind != SpanKind::Server || is_shed(self.t.outcome[i]) || self.t.absurd[i] {
            return;
        }
        let p = self.tree.parent[i];
        let start = ns(s.start_unix_nano);
        let (stop, who) = if p == NONE {
            // The root: its caller had the answer (or hung up) when its span ended, or stopped
            // waiting when the budget it sent ran out, whichever came first. Work that started
            // after that budget ran out, or a late retry, is the finding that explains it (see
            // `Walk::late_roots`).
            let stop = self.t.give_up[i];
            if stop < ns(s.end_unix_nano) && !self.m.explains_late[i] {
                return;
            }
            (stop, None)
        } else {
            let ps = &spans[p as usize];
            let calls_it = ps.kind == SpanKind::Client
                || (matches!(ps.kind, SpanKind::Server | SpanKind::Internal)
                    && ps.service != s.service);
            if !calls_it {
                return;
            }
            (ns(ps.end_unix_nano), Some(ps.service.clone()))
        };
        let end = self.t.extent_end[i];
        if end <= stop.saturating_add(self.opts.tolerance_ms * MS + self.t.transit[i]) {
            return;
        }
        let own = ms(end - stop.max(start)).clamp(0, MAX_SPAN_MS);
        let (below, tail) = self.dead_below(i, false);
        let message = match who {
            Some(caller) => format!(
                "{} worked {own} ms after {caller} stopped waiting{tail}",
                s.service
            ),
            None if stop < ns(s.end_unix_nano) => format!(
                "{} worked {own} ms after the {} ms budget its caller sent ran out{tail}",
                s.service,
                s.budget.received_ms.unwrap_or_default()
            ),
            None => format!(
                "{} kept working {own} ms after it answered or its caller hung up{tail}",
                s.service
            ),
        };
        let forwarded = (p != NONE)
            .then(|| spans[p as usize].budget.forwarded_ms)
            .flatten();
        let numbers = Numbers {
            received: s.budget.received_ms,
            forwarded,
            wasted: Some(own.saturating_add(below)),
            ..Numbers::default()
        };
        self.push(i, FindingKind::OrphanedWork, message, numbers);
    }

    fn clock_skew(&mut self, i: usize, forwarded: Option<i64>) {
        let spans = self.spans;
        let s = &spans[i];
        let f = &s.budget;
        let p = self.tree.parent[i];
        let mut skewed = false;
        if let (Some(d), Some(b)) = (f.deadline_unix_ms, f.budget_ms()) {
            let relative = ms(ns(s.start_unix_nano)).saturating_add(b);
            let diff = d.saturating_sub(relative);
            if diff.saturating_abs() > self.opts.skew_threshold_ms {
                skewed = true;
                let side = if diff > 0 { "later" } else { "earlier" };
                let budget = if b >= 0 {
                    format!("+ {b} ms budget")
                } else {
                    format!("- {} ms (a budget already spent)", b.saturating_neg())
                };
                let message = format!(
                    "absolute deadline is {} ms {side} than arrival {budget} by the clock of {}",
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
            && f.source.is_some_and(BudgetSource::is_absolute)
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
    }

    fn call(&mut self, i: usize) {
        let spans = self.spans;
        let s = &spans[i];
        let f = &s.budget;
        let h = self.t.hop_of[i];
        let callee = self.callee(i);
        let remaining = self.remaining(i);
        let mut reset = false;

        if let (Some(fw), Some((rem, extra))) = (f.forwarded_ms, remaining)
            && fw > rem.saturating_add(self.opts.tolerance_ms + extra)
        {
            reset = true;
            let (wasted, tail) = self.dead_below(i, true);
            let message = format!("forwarded {fw} ms with only {rem} ms left{tail}");
            let numbers = Numbers {
                remaining: Some(rem),
                forwarded: Some(fw),
                wasted: (wasted > 0).then_some(wasted),
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
            let (wasted, tail) = self.dead_below(i, true);
            let message = match remaining {
                Some((rem, _)) => format!(
                    "{} had {rem} ms left but forwarded no budget on this call{tail}",
                    hop.service
                ),
                None => format!(
                    "{} had a budget but forwarded none on this call{tail}",
                    hop.service
                ),
            };
            let numbers = Numbers {
                received: hop.budget.budget_ms(),
                remaining: remaining.map(|r| r.0),
                wasted: (wasted > 0).then_some(wasted),
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

        if !reset && s.kind == SpanKind::Client && h != NONE {
            self.timeout_inverted(i, h as usize);
        }
    }

    /// `timeout_inverted`: the call could wait past the moment anyone above stops waiting.
    fn timeout_inverted(&mut self, c: usize, h: usize) {
        let spans = self.spans;
        let s = &spans[c];
        if s.budget.outcome == Some(Outcome::Refused) {
            return;
        }
        let limit = self.m.wait_limit[h];
        let Some((timeout, inferred)) = self.timeout(c) else {
            return;
        };
        if limit == NEVER {
            return;
        }
        let start = ns(s.start_unix_nano);
        let until = start.saturating_add(timeout.saturating_mul(MS));
        let tol = self.opts.tolerance_for(spans[h].budget.source) * MS;
        if until <= limit.saturating_add(tol) {
            return;
        }
        // Blame stays with the cause: below a reset or a drop, a hop that honours the budget it
        // was given is not at fault.
        if self.m.caused_above[h]
            && self
                .deadline(h)
                .is_none_or(|d| until <= d.saturating_add(tol))
        {
            return;
        }
        let left = ms(limit.saturating_sub(start));
        let kind = if inferred { "inferred" } else { "declared" };
        let callee = self
            .callee(c)
            .map(|x| format!(" for {}", spans[x].service))
            .unwrap_or_default();
        let message = if left <= 0 {
            format!(
                "{} called{callee} with a {timeout} ms timeout ({kind}) after everyone above had stopped waiting",
                spans[h].service
            )
        } else {
            format!(
                "{} would wait {timeout} ms{callee} ({kind} timeout) when everyone above stops waiting within {left} ms",
                spans[h].service
            )
        };
        let numbers = Numbers {
            received: spans[h].budget.budget_ms(),
            remaining: Some(left),
            forwarded: s.budget.forwarded_ms,
            wasted: None,
        };
        self.push(c, FindingKind::TimeoutInverted, message, numbers);
    }

    /// A span of a hop (not the hop itself) that started after the hop's deadline.
    fn late(&mut self, i: usize) {
        let spans = self.spans;
        let s = &spans[i];
        let (h, p) = (self.t.hop_of[i], self.tree.parent[i]);
        if s.kind.is_hop() || h == NONE || p == NONE || self.m.expired_hop[h as usize] {
            return;
        }
        let hop = &spans[h as usize];
        if is_shed(self.t.outcome[h as usize]) || s.budget.outcome == Some(Outcome::Refused) {
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
            received: hop.budget.budget_ms(),
            remaining: s.budget.remaining_ms.or(Some(-late)),
            forwarded: s.budget.forwarded_ms,
            wasted: None,
        };
        if self.m.is_retry[i] {
            let attempt = s
                .budget
                .attempt
                .map_or_else(|| "a retry".to_owned(), |a| format!("attempt {a}"));
            let message = format!(
                "{attempt} started {late} ms after the deadline of {}",
                hop.service
            );
            self.push(i, FindingKind::RetryOverBudget, message, numbers);
        } else if !self.t.absurd[i] {
            let wasted = ms(ns(s.end_unix_nano).saturating_sub(start)).clamp(0, MAX_SPAN_MS);
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

    /// See [`Marks::upstream`]; parents are visited first.
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
            let h = self.t.hop_of[i];
            let transparent = h != NONE && {
                let hf = &self.spans[h as usize].budget;
                hf.source.is_none() && hf.received_ms.is_none()
            };
            if !transparent {
                return NONE;
            }
        }
        self.m.upstream[p as usize]
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
            Some(self.t.hop_of[i])
                .filter(|&h| h != NONE)
                .map(|h| h as usize)
        };
        hop.map(|h| self.m.edge_of[h])
            .filter(|&e| e != NONE)
            .map(|e| e as usize)
    }
}

/// `1254` as `1,254`.
fn thousands(v: i64) -> String {
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

/// The working vectors of the analysis, kept from one chain to the next on each thread.
/// Allocated per chain, the 35 or so per-span vectors (and freeing them) were most of what
/// analysing a chain of a few spans cost.
#[derive(Debug, Default)]
struct Scratch {
    tree: Tree,
    timing: Timing,
    // `Walk`'s own per-span marks.
    marks: Marks,
    // The rows' and the summary's.
    kinds: Vec<KindSet>,
    row_of: Vec<u32>,
    hops: Vec<usize>,
    // `Walk`'s working space (given back when the walk is done).
    found: Vec<(u32, Finding)>,
    calls: Vec<u32>,
    explained: Vec<bool>,
}

/// A chain of more spans than this does not leave its working vectors to the next analysis on
/// its thread: one huge chain would otherwise pin its memory for good. At this size the
/// allocations are a small part of the analysis anyway.
const SCRATCH_KEEP_SPANS: usize = 4096;

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

impl Chain {
    /// Apply every rule of `CONVENTIONS.md` section 3 to this chain as it stands, with no
    /// inferred timeouts (see [`Chain::analyse_with`]). Pure and deterministic: the same spans
    /// give the same analysis whatever order they arrived in. Costs O(n log n) in the number of
    /// spans; call it again when spans join (a store would re-analyse chains that changed once
    /// per tick, not once per span).
    pub fn analyse(&self, options: &Options) -> ChainAnalysis {
        self.analyse_with(options, &EdgeTimeouts::default())
    }

    /// [`Chain::analyse`], with the timeouts inferred for edges over many chains
    /// ([`EdgeStats::inferred_timeouts`](super::EdgeStats::inferred_timeouts)), which
    /// `timeout_inverted` uses for calls that declare none.
    pub fn analyse_with(&self, options: &Options, timeouts: &EdgeTimeouts) -> ChainAnalysis {
        let analysed = SCRATCH.try_with(|scratch| {
            let mut scratch = scratch.try_borrow_mut().ok()?;
            let analysis = self.analyse_in(&mut scratch, options, timeouts);
            if self.len() > SCRATCH_KEEP_SPANS {
                *scratch = Scratch::default();
            }
            Some(analysis)
        });
        // No scratch (the thread is ending, or an analysis inside an analysis): a fresh one.
        analysed
            .ok()
            .flatten()
            .unwrap_or_else(|| self.analyse_in(&mut Scratch::default(), options, timeouts))
    }

    fn analyse_in(
        &self,
        scratch: &mut Scratch,
        options: &Options,
        timeouts: &EdgeTimeouts,
    ) -> ChainAnalysis {
        let Scratch {
            tree,
            timing,
            marks,
            kinds,
            row_of,
            hops,
            found,
            calls,
            explained,
        } = scratch;
        // Borrowed views, not unpacked `Span`s: see `SpanView`.
        let spans: Vec<SpanView<'_>> = (0..self.len()).map(|i| self.view(i)).collect();
        let spans = &spans[..];
        let n = spans.len();
        tree.build(self);
        let tree = &*tree;
        timing.measure(spans, tree, options);
        marks.reset(n);

        let mut walk = Walk {
            chain: self,
            spans,
            tree,
            opts: options,
            timeouts,
            t: timing,
            m: marks,
            edges: Vec::new(),
            found: std::mem::take(found),
            calls: std::mem::take(calls),
            explained: std::mem::take(explained),
        };
        // Left over if an earlier analysis on this thread panicked half-way.
        walk.found.clear();
        walk.retries();
        for &i in &tree.order {
            let i = i as usize;
            walk.m.upstream[i] = walk.upstream_of(i);
            walk.skewed_start(i);
            let before = walk.found.len();
            match spans[i].kind {
                k if k.is_hop() => walk.hop(i),
                k if k.is_call() => walk.call(i),
                _ => {}
            }
            walk.late(i);
            let p = tree.parent[i];
            walk.m.caused_above[i] = (p != NONE && walk.m.caused_above[p as usize])
                || walk.found[before..].iter().any(|(at, f)| {
                    *at as usize == i
                        && matches!(
                            f.kind,
                            FindingKind::BudgetReset | FindingKind::BudgetDropped
                        )
                });
        }

        walk.late_roots();

        // Attribute findings to edges and rows.
        refill(kinds, n, KindSet::default());
        let mut counts = SeverityCounts::default();
        let mut found_here = std::mem::take(&mut walk.found);
        for (i, f) in &found_here {
            kinds[*i as usize].insert(f.kind);
            counts.bump(f.severity);
            if let Some(e) = walk.edge_for(*i as usize) {
                walk.edges[e].findings.get_or_insert_default().bump(f.kind);
            }
        }
        found_here.sort_by(|(a, fa), (b, fb)| {
            let (sa, sb) = (&spans[*a as usize], &spans[*b as usize]);
            (sa.start_unix_nano, sa.span_id, fa.kind).cmp(&(
                sb.start_unix_nano,
                sb.span_id,
                fb.kind,
            ))
        });
        let findings: Vec<Finding> = found_here.drain(..).map(|(_, f)| f).collect();
        // The walk's working vectors back to the scratch, for the next chain.
        *found = found_here;
        *calls = std::mem::take(&mut walk.calls);
        *explained = std::mem::take(&mut walk.explained);

        let chain_start = spans.iter().map(|s| s.start_unix_nano).min().unwrap_or(0);
        let chain_end = spans
            .iter()
            .map(|s| s.end_unix_nano)
            .max()
            .unwrap_or(0)
            .max(chain_start);
        refill(row_of, n, NONE);
        for (r, &i) in tree.order.iter().enumerate() {
            row_of[i as usize] = r as u32;
        }
        let t = &walk.t;
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
                    dead_ms: u32::try_from(t.dead[i as usize]).unwrap_or(u32::MAX),
                    late_ms: t.late(spans, i as usize),
                }
            })
            .collect();

        let root = tree.order.first().map(|&i| i as usize);
        let first_hop = tree
            .order
            .iter()
            .map(|&i| i as usize)
            .find(|&i| spans[i].kind.is_hop());
        let outcome = match root {
            None => ChainOutcome::InFlight,
            Some(r) if tree.link[r] == Link::Orphan => ChainOutcome::InFlight,
            Some(r) => {
                let h = first_hop.unwrap_or(r);
                match chain_outcome(&spans[h]) {
                    // Answered "fine" while one of its own calls was still waiting for an
                    // answer: it did not answer, its caller hung up (Node.js's http
                    // instrumentation ends the span so, with status 200).
                    ChainOutcome::Ok
                        if spans[h].budget.outcome.is_none() && t.hung_up(spans, h, options) =>
                    {
                        ChainOutcome::Cancelled
                    }
                    // Answered "fine" after the budget its caller sent had run out: nobody was
                    // waiting for it any more (a WSGI server span ends when the app returns).
                    ChainOutcome::Ok
                        if spans[h].budget.outcome.is_none()
                            && tree.parent[h] == NONE
                            && t.answered_after_give_up(spans, h, options) =>
                    {
                        ChainOutcome::DeadlineExceeded
                    }
                    o => o,
                }
            }
        };
        hops.clear();
        hops.extend((0..n).filter(|&i| spans[i].kind.is_hop()));
        let mut services_without_budget: Vec<Arc<str>> = hops
            .iter()
            .filter(|&&i| !has_budget(&spans[i].budget))
            .map(|&i| spans[i].service.clone())
            .collect();
        services_without_budget.sort_unstable();
        services_without_budget.dedup();
        let summary = ChainSummary {
            root_service: root.map(|r| spans[r].service.clone()).unwrap_or_default(),
            root_name: root.map(|r| spans[r].name.clone()).unwrap_or_default(),
            start_unix_nano: chain_start,
            end_unix_nano: chain_end,
            duration_ms: ms(ns(chain_end) - ns(chain_start)),
            edge_budget_ms: first_hop.and_then(|h| spans[h].budget.budget_ms()),
            edge_budget_source: first_hop.and_then(|h| spans[h].budget.source),
            spans: n as u32,
            hops: hops.len() as u32,
            hops_with_budget: hops
                .iter()
                .filter(|&&i| has_budget(&spans[i].budget))
                .count() as u32,
            orphans: tree.link.iter().filter(|&&l| l == Link::Orphan).count() as u32,
            cycles_cut: tree.link.iter().filter(|&&l| l == Link::CycleCut).count() as u32,
            findings: counts,
            worst: findings.iter().map(|f| f.severity).max(),
            wasted_ms: hops
                .iter()
                .map(|&h| t.dead[h])
                .fold(0i64, i64::saturating_add),
            outcome,
        };

        ChainAnalysis {
            trace_id: self.trace_id(),
            summary,
            rows,
            findings,
            edges: walk.edges,
            services_without_budget,
        }
    }
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
