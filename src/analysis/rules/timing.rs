//! The first walk: time from the user's point of view (`CONVENTIONS.md` section 3, "The user's
//! point of view" and "Definitions these rules rely on"). For each hop: when its work starts,
//! how far its own spans reach, the transit from its caller, its give-up time, its dead work
//! (and the dead work in each subtree), its wait limit, and the outcome its status implies.
//! The rule pass reads these numbers; it never changes them.

use crate::analysis::cause::{Cause, failure_cause};
use crate::analysis::chain::{Link, NONE, SpanView, Tree, refill};
use crate::analysis::chain_analysis::Options;
use crate::analysis::edges::EdgeTimeouts;
use crate::analysis::model::{BudgetFacts, BudgetSource, Outcome, SpanKind, SpanStatus};

/// Nanoseconds in a millisecond.
pub(super) const MS: i64 = 1_000_000;
/// A span longer than this is a broken clock, not a request (`CONVENTIONS.md`: an absolute
/// deadline more than 24 h away is absurd too).
pub(super) const MAX_SPAN_MS: i64 = 24 * 60 * 60 * 1000;
/// "No such time": a hop nobody above waits for, or one with no known limit.
pub(super) const NEVER: i64 = i64::MAX;
/// The most transit time (hop start − CLIENT start) allowed before a late callee counts as orphaned.
const MAX_TRANSIT_ALLOWANCE_MS: i64 = 250;

/// Unix ns as a signed number (saturates past the year 2262).
pub(super) fn ns(t: u64) -> i64 {
    i64::try_from(t).unwrap_or(i64::MAX)
}

/// Whole ms in a span of ns, rounded down.
pub(super) fn ms(d: i64) -> i64 {
    d.div_euclid(MS)
}

/// Whether a hop knew a budget: received, defaulted, or read from a captured carrier.
pub(super) fn has_budget(f: &BudgetFacts) -> bool {
    f.budget_ms().is_some() || f.source.is_some_and(BudgetSource::has_budget)
}

/// Whether an outcome is a shed (expired in the queue, or turned away with the queue full).
pub(super) fn is_shed(o: Option<Outcome>) -> bool {
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
pub(super) fn status_outcome(s: &SpanView<'_>) -> Outcome {
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

/// The deadline of hop `s` in Unix ns (arrival + budget), if it had a budget.
pub(super) fn deadline(s: &SpanView<'_>) -> Option<i64> {
    s.budget
        .budget_ms()
        .map(|b| ns(s.start_unix_nano).saturating_add(b.saturating_mul(MS)))
}

/// The callee hop of call `c`: a hop directly under it.
pub(super) fn callee(spans: &[SpanView<'_>], tree: &Tree, c: usize) -> Option<usize> {
    tree.children(c)
        .iter()
        .map(|&x| x as usize)
        .find(|&x| spans[x].kind.is_hop())
}

/// The timeout of call `c`: declared, else the one inferred for its edge; and whether it
/// was inferred. A call that forwarded a budget has no fixed timeout to infer: it waits as
/// long as the budget it sent (which `budget_reset` judges).
pub(super) fn call_timeout(
    spans: &[SpanView<'_>],
    tree: &Tree,
    timeouts: &EdgeTimeouts,
    c: usize,
) -> Option<(i64, bool)> {
    let s = &spans[c];
    if let Some(t) = s.budget.timeout_ms {
        return Some((t, false));
    }
    if s.budget.forwarded_ms.is_some() {
        return None;
    }
    let callee = callee(spans, tree, c)?;
    timeouts
        .get(s.service, spans[callee].service)
        .map(|t| (t, true))
}

/// Time from the user's point of view, per span (meaningful on hops unless said otherwise).
///
/// [`Timing::measure`] reuses the vectors of the timing it is called on (see [`Scratch`]).
#[derive(Debug, Default)]
pub(super) struct Timing {
    /// The hop each span belongs to (its nearest hop ancestor or itself).
    pub(super) hop_of: Vec<u32>,
    /// Each hop's outcome: `budget.outcome`, else what its status implies; a hop relaying a
    /// status one of its calls got is not a shed.
    pub(super) outcome: Vec<Option<Outcome>>,
    /// When each hop's work starts (arrival + queue wait), ns.
    pub(super) work_start: Vec<i64>,
    /// The latest end of the hop's own work (itself and its internal spans, not its calls), ns.
    pub(super) extent_end: Vec<i64>,
    /// The caller's CLIENT start to the hop's start, at most the allowance, ns.
    pub(super) transit: Vec<i64>,
    /// The earliest moment anyone above the hop stopped waiting, ns ([`NEVER`]: nobody waits).
    pub(super) give_up: Vec<i64>,
    /// Whether each hop hangs directly under a span of another service that is not a call (a
    /// proxy that records one span, or an uninstrumented client): that span stands for the call.
    pub(super) proxied: Vec<bool>,
    /// The hop's dead work, ms: its time past its give-up less its waits on calls whose callee
    /// hop is in the chain, its waits on untraced callees included (see `dead_work`).
    pub(super) dead: Vec<i64>,
    /// The part of a hop's dead work that is its own work (not waiting on a call), ms.
    pub(super) own_dead: Vec<i64>,
    /// Per hop: its time past its give-up spent waiting on its calls, ms (drawn as waiting).
    pub(super) waiting: Vec<i64>,
    /// Per hop: the part of `waiting` spent on calls whose callee hop is in the chain, ms: the
    /// request held for nobody, while what it waited for is the callee's dead work.
    pub(super) held: Vec<i64>,
    /// Per CLIENT call with no callee hop in the chain: its hop's wait on it past the hop's
    /// give-up, ms: dead work counted on the call's own edge.
    pub(super) waited: Vec<i64>,
    /// Per span: the dead work of every hop in its subtree (itself included), ms.
    pub(super) below: Vec<i64>,
    /// Per call: it failed without an answer from its callee. Per proxied hop: its caller's
    /// span ended while it still worked (the call it stands for got no answer).
    pub(super) unanswered: Vec<bool>,
    /// Spans too long to be real (see [`MAX_SPAN_MS`]).
    pub(super) absurd: Vec<bool>,
    /// Per hop: the earliest moment anyone above would stop waiting, ns ([`NEVER`]: unknown):
    /// its own deadline, the timeout of the call into it, and the wait limit of the hop that
    /// made that call (`timeout_inverted` compares calls with it).
    pub(super) wait_limit: Vec<i64>,
    // Working space of `measure`, kept for the next chain.
    busy: Vec<bool>,
    call_answers: Vec<(u32, i64)>,
    pub(super) waits: Vec<(u32, i64, i64, u32)>,
    pub(super) calls_below: Vec<bool>,
    pub(super) intervals: [Vec<(i64, i64)>; 3],
}

impl Timing {
    /// Measure the chain of `spans` (with its `tree`) into this timing.
    pub(super) fn measure(
        &mut self,
        spans: &[SpanView<'_>],
        tree: &Tree,
        opts: &Options,
        timeouts: &EdgeTimeouts,
    ) {
        let Timing {
            hop_of,
            outcome,
            work_start,
            extent_end,
            transit,
            give_up,
            proxied,
            dead: _,
            own_dead: _,
            waiting: _,
            held: _,
            waited: _,
            below: _,
            unanswered,
            absurd,
            wait_limit,
            busy,
            call_answers,
            waits: _,
            calls_below: _,
            intervals: _,
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

        // How far each hop's own work reaches (its span and its internal spans: a call still
        // open is waiting, and what it waits for is counted in the callee); whether it has any
        // span of its own or a call.
        extent_end.clear();
        extent_end.extend(spans.iter().map(|s| ns(s.end_unix_nano)));
        refill(busy, n, false);
        for i in 0..n {
            let h = hop_of[i];
            if h == NONE || h as usize == i || absurd[i] {
                continue;
            }
            let h = h as usize;
            busy[h] = true;
            if !spans[i].kind.is_call() {
                extent_end[h] = extent_end[h].max(ns(spans[i].end_unix_nano));
            }
        }
        // A callee hop that started under a hop (a proxy's one span) is work or a call of it.
        refill(proxied, n, false);
        for i in 0..n {
            let p = tree.parent[i];
            if !spans[i].kind.is_hop() || p == NONE || hop_of[p as usize] == NONE {
                continue;
            }
            busy[hop_of[p as usize] as usize] = true;
            let ps = &spans[p as usize];
            proxied[i] = !ps.kind.is_call() && ps.service != spans[i].service;
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
                // No response status: a client timeout or abort, whatever names it (requests'
                // `ReadTimeout`, undici's code, Go's `context.deadlineExceededError` or
                // `*url.Error`: any `error.type`), or a status ERROR, or an exception event;
                // unless its words name another cause (a refused connection, a constraint).
                let failed =
                    s.status == SpanStatus::Error || f.exception_event || s.error_type.is_some();
                let cause = failure_cause(s.error_type.map(|e| &**e), f.other_cause);
                matches!(
                    f.outcome,
                    Some(Outcome::DeadlineExceeded | Outcome::Cancelled)
                ) || (failed && cause != Some(Cause::Other))
            };
        }
        // The call a proxy's one span stands for got no answer when its callee outlived it.
        for i in 0..n {
            if proxied[i] {
                let p = tree.parent[i] as usize;
                unanswered[i] = extent_end[i]
                    > ns(spans[p].end_unix_nano).saturating_add(opts.tolerance_ms * MS);
            }
        }

        // What each hop's calls were answered, to tell a relayed status from the hop's own (a
        // proxy's one span: what its callee hop answered).
        call_answers.clear();
        call_answers.extend(
            (0..n)
                .filter(|&c| spans[c].kind.is_call() && hop_of[c] != NONE)
                .filter_map(|c| Some((hop_of[c], answer_code(&spans[c].budget)?))),
        );
        call_answers.extend((0..n).filter(|&i| proxied[i]).filter_map(|i| {
            let caller = hop_of[tree.parent[i] as usize];
            Some((caller, answer_code(&spans[i].budget)?))
        }));
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
                // hung up, when its span ended. The budget it received does not move this:
                // whether its caller still waited is not in the spans (`late_answer` says it).
                give_up[i] = ns(s.end_unix_nano);
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

        // The wait limit: this hop's own deadline, the timeout of the call into it, and the
        // wait limit of the hop that made that call.
        refill(wait_limit, n, NEVER);
        for &i in &tree.order {
            let i = i as usize;
            if !spans[i].kind.is_hop() {
                continue;
            }
            let mut limit = deadline(&spans[i]).unwrap_or(NEVER);
            let p = tree.parent[i];
            if p != NONE && spans[p as usize].kind != SpanKind::Producer {
                let ps = &spans[p as usize];
                if ps.kind == SpanKind::Client
                    && let Some((t, _)) = call_timeout(spans, tree, timeouts, p as usize)
                {
                    limit = limit.min(ns(ps.start_unix_nano).saturating_add(t.saturating_mul(MS)));
                }
                let ch = hop_of[p as usize];
                if ch != NONE {
                    limit = limit.min(wait_limit[ch as usize]);
                }
            }
            wait_limit[i] = limit;
        }
        self.measure_dead(spans, tree, opts);
    }
}

impl Timing {
    /// Whether hop `h`'s span ended while one of its own CLIENT calls was still open (past the
    /// tolerance): a request/response hop does not answer before its call returns, unless its
    /// caller hung up.
    pub(super) fn hung_up(&self, spans: &[SpanView<'_>], h: usize, opts: &Options) -> bool {
        let end = ns(spans[h].end_unix_nano).saturating_add(opts.tolerance_ms * MS);
        (0..spans.len()).any(|c| {
            self.hop_of[c] == h as u32
                && spans[c].kind == SpanKind::Client
                && !self.absurd[c]
                && ns(spans[c].end_unix_nano) > end
        })
    }

    /// The callee hop directly under hop `h`'s spans (a proxy's one span standing for the call)
    /// that was still working when `h`'s span ended, the latest to start if several; and how
    /// long that call had lasted then, ms.
    pub(super) fn left_working(
        &self,
        spans: &[SpanView<'_>],
        tree: &Tree,
        h: usize,
        opts: &Options,
    ) -> Option<(usize, i64)> {
        let end = ns(spans[h].end_unix_nano);
        let callee = (0..spans.len())
            .filter(|&i| {
                self.proxied[i]
                    && self.hop_of[tree.parent[i] as usize] == h as u32
                    && self.extent_end[i] > end.saturating_add(opts.tolerance_ms * MS)
            })
            .max_by_key(|&i| (spans[i].start_unix_nano, i))?;
        let p = &spans[tree.parent[callee] as usize];
        let start = if p.kind == SpanKind::Internal {
            p.start_unix_nano
        } else {
            spans[callee].start_unix_nano
        };
        Some((
            callee,
            ms(end.saturating_sub(ns(start))).clamp(0, MAX_SPAN_MS),
        ))
    }

    /// By how many ms root hop `h` answered after the budget it received ran out, when that is
    /// past the tolerance, whatever its status (`late_answer` and the `late` outcome ask it of answers).
    pub(super) fn late_by(
        spans: &[SpanView<'_>],
        tree: &Tree,
        h: usize,
        opts: &Options,
    ) -> Option<i64> {
        let s = &spans[h];
        if !s.kind.is_hop() || tree.parent[h] != NONE || tree.link[h] != Link::Root {
            return None;
        }
        let b = s
            .budget
            .received_ms
            .filter(|_| s.budget.source.is_none_or(BudgetSource::has_budget))?;
        let ran_out = ns(s.start_unix_nano).saturating_add(b.saturating_mul(MS));
        let late = ns(s.end_unix_nano).saturating_sub(ran_out);
        (late > opts.tolerance_for(s.budget.source).saturating_mul(MS)).then(|| ms(late))
    }
}
