//! The marks of one waterfall row, decided once from the analysis: where the bar starts and ends,
//! a hop's deadline, queue wait and shed point (`⊘`), a call's forwarded budget (and where what
//! remained ran out, for a `budget_reset`), a dropped budget (`✕`), a refusal (`⊘`), where the
//! work done for nobody starts (and a hop's waiting for nobody before it), and the numbers
//! column's text. The screen draws them in cells
//! (`screen::views::waterfall`), the page in SVG (`report::html::waterfall`); neither decides
//! a mark itself, so the two pictures of a chain cannot disagree. (Each writes its own label:
//! the screen indents it and puts a retried call's [`RowMarks::attempt`] first, the page
//! indents with CSS.)
//!
//! Every decision reads the analysis: the row's findings, its `late_ms`, the span's budget facts
//! as the analysis read them. Times are ms after the chain's start.

use std::borrow::Borrow;

use deadline_budget::analysis::{
    BudgetSource, ChainAnalysis, Finding, FindingKind, Outcome, Row, Severity, Span,
};

use super::format::ms_digits;

/// What a row stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowKind {
    /// A service handling the request: its budget, queue wait and work.
    Hop,
    /// A call to the next service: the call and the budget it forwarded.
    Call,
    /// A span of the hop's own (its work, a database query).
    Internal,
}

/// How the numbers column reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tone {
    /// A figure.
    Plain,
    /// No budget to show, or a refusal.
    Dim,
    /// A broken budget: forwarded more than remained, or none.
    Late,
}

/// Where and why a hop was shed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shed {
    /// Where the `⊘` goes: as it left the queue, or at once when the queue was full.
    pub at: i64,
    /// Turned away because the queue was full (else: its deadline passed while it waited).
    pub full: bool,
}

/// The budget a call forwarded, on the time axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Forwarded {
    /// Where the forwarded budget ends.
    pub until: i64,
    /// A `budget_reset`'s `│`: where what remained ran out; the budget past it did not exist.
    pub remaining_until: Option<i64>,
}

/// One waterfall row's marks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RowMarks {
    /// Hop, call, or a span of the hop's own.
    pub kind: RowKind,
    /// Where the bar starts.
    pub start: i64,
    /// Where it ends (never before it starts).
    pub end: i64,
    /// The worst severity of the row's findings.
    pub worst: Option<Severity>,
    /// A call that is one attempt of a retried call (the analysis's `Row::retried`): its
    /// `budget.attempt`, which the label writes before the name (`#2`).
    pub attempt: Option<i64>,
    /// A hop's deadline: its start plus the budget it received (or its own default).
    pub deadline: Option<i64>,
    /// A hop's queue wait, within its bar (0 when it did not queue).
    pub queue_ms: i64,
    /// A hop that was shed: no work is drawn.
    pub shed: Option<Shed>,
    /// A call's forwarded budget, when it forwarded one.
    pub forwarded: Option<Forwarded>,
    /// A call that forwarded no budget (`budget_dropped`): `✕` at its start.
    pub dropped: bool,
    /// A call refused before it was sent (no budget left): `⊘` at its start.
    pub refused: bool,
    /// Where the part of the bar done for nobody starts (its last `late_ms`), when there is one.
    pub late_from: Option<i64>,
    /// A hop's waiting on its calls past its give-up: drawn from here to where its work for
    /// nobody starts (or its end), when it waited (what it waited for is counted in the
    /// callee, or on the call's own edge).
    pub waiting_from: Option<i64>,
    numbers: Numbers,
}

/// What the numbers column is made of.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Numbers {
    source: Option<BudgetSource>,
    budget_ms: Option<i64>,
    queue_wait_ms: Option<i64>,
    forwarded_ms: Option<i64>,
    /// A `budget_reset`: what it forwarded and what remained, as the finding says.
    reset: Option<(Option<i64>, Option<i64>)>,
}

impl RowMarks {
    /// The marks of `row`, whose span is `span`, in the chain `analysis`.
    pub fn of(analysis: &ChainAnalysis, row: &Row, span: &Span) -> RowMarks {
        let reset = analysis
            .findings_on(span.span_id)
            .find(|f| f.kind == FindingKind::BudgetReset);
        let start = analysis.summary.offset_ms(span);
        RowMarks::with_reset(row, span, reset, start)
    }

    fn with_reset(row: &Row, span: &Span, reset: Option<&Finding>, start: i64) -> RowMarks {
        let b = &span.budget;
        let (s, e) = (start, start + span.duration_ms().max(0));
        let kind = if span.kind.is_hop() {
            RowKind::Hop
        } else if span.kind.is_call() {
            RowKind::Call
        } else {
            RowKind::Internal
        };
        let hop = kind == RowKind::Hop;
        let call = kind == RowKind::Call;
        let queue_ms = if hop {
            b.queue_wait_ms.unwrap_or(0).clamp(0, e - s)
        } else {
            0
        };
        let shed = if !hop {
            None
        } else if row.findings.contains(FindingKind::ShedExpired) {
            // Dropped as it left the queue: marked there, and no work drawn.
            Some(Shed {
                at: s + queue_ms,
                full: false,
            })
        } else if row.findings.contains(FindingKind::ShedFull) {
            Some(Shed { at: s, full: true })
        } else {
            None
        };
        let forwarded = b.forwarded_ms.filter(|_| call).map(|f| Forwarded {
            until: s.saturating_add(f),
            remaining_until: reset.and_then(|r| r.remaining_ms).map(|r| s + r),
        });
        RowMarks {
            kind,
            start: s,
            end: e,
            worst: row.worst(),
            attempt: b.attempt.filter(|_| call && row.retried),
            deadline: b.budget_ms().filter(|_| hop).map(|v| s.saturating_add(v)),
            queue_ms,
            shed,
            forwarded,
            dropped: call && row.findings.contains(FindingKind::BudgetDropped),
            refused: call && b.outcome == Some(Outcome::Refused),
            late_from: (row.late_ms > 0).then(|| e - i64::from(row.late_ms).min(e - s)),
            waiting_from: (hop && row.waiting_ms > 0).then(|| {
                let work = (e - i64::from(row.late_ms)).max(s);
                work - i64::from(row.waiting_ms).min(work - s)
            }),
            numbers: Numbers {
                source: b.source,
                budget_ms: b.budget_ms(),
                queue_wait_ms: b.queue_wait_ms,
                forwarded_ms: b.forwarded_ms,
                reset: reset.map(|f| (f.forwarded_ms, f.remaining_ms)),
            },
        }
    }

    /// The numbers column: a hop's budget (`rcv 938`, `own 500`, `none`) and, when `wide`, its
    /// carrier and queue wait (`rcv 938 grpc q120`); a call's forwarded budget (`fwd 300`,
    /// `fwd 3000>938` for a reset, `fwd ✕ none` for a drop, `refused`).
    pub fn numbers(&self, wide: bool) -> (String, Tone) {
        let n = &self.numbers;
        match self.kind {
            RowKind::Hop => {
                let (text, tone) = match (n.source, n.budget_ms) {
                    (Some(src), _) if !src.has_budget() => (src.as_str().to_string(), Tone::Dim),
                    (Some(BudgetSource::Default), Some(v)) => {
                        (format!("own {}", ms_digits(v)), Tone::Plain)
                    }
                    (source, Some(v)) => {
                        // The carrier, when it is not our own header.
                        let via = match source.map(BudgetSource::tag) {
                            Some(tag) if wide && !tag.is_empty() => format!(" {tag}"),
                            _ => String::new(),
                        };
                        (format!("rcv {}{via}", ms_digits(v)), Tone::Plain)
                    }
                    (_, None) => ("none".to_string(), Tone::Dim),
                };
                match n.queue_wait_ms {
                    Some(q) if wide && q > 0 => (format!("{text} q{}", ms_digits(q)), tone),
                    _ => (text, tone),
                }
            }
            RowKind::Call => match (n.reset, n.forwarded_ms) {
                _ if self.refused => ("refused".to_string(), Tone::Dim),
                (Some((forwarded, remaining)), _) => (
                    format!(
                        "fwd {}>{}",
                        forwarded.map(ms_digits).unwrap_or_default(),
                        remaining.map(ms_digits).unwrap_or_default()
                    ),
                    Tone::Late,
                ),
                (None, Some(f)) => (format!("fwd {}", ms_digits(f)), Tone::Plain),
                (None, None) if self.dropped => ("fwd ✕ none".to_string(), Tone::Late),
                (None, None) => (String::new(), Tone::Plain),
            },
            RowKind::Internal => (String::new(), Tone::Plain),
        }
    }
}

/// A chain's time axis: how far it reaches, and the original caller's deadline (`┊`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChainScale {
    /// The axis's end: the chain, and every deadline and forwarded budget, but at most four
    /// times the chain (a huge reset would squeeze the real work into a sliver).
    pub horizon_ms: i64,
    /// The first hop's deadline that is known: the original caller's.
    pub edge_deadline: Option<i64>,
}

impl ChainScale {
    /// The scale of `analysis`, whose rows' spans are `spans` (in row order).
    pub fn of<S: Borrow<Span>>(
        analysis: &ChainAnalysis,
        spans: impl IntoIterator<Item = S>,
    ) -> Self {
        let dur = analysis.summary.duration_ms.max(1);
        let mut far = dur;
        let mut edge_deadline = None;
        for s in spans {
            let s = s.borrow();
            let start = analysis.summary.offset_ms(s);
            if s.kind.is_hop()
                && let Some(b) = s.budget.budget_ms()
            {
                far = far.max(start.saturating_add(b));
                edge_deadline = edge_deadline.or(Some(start + b));
            }
            if s.kind.is_call()
                && let Some(f) = s.budget.forwarded_ms
            {
                far = far.max(start.saturating_add(f));
            }
        }
        ChainScale {
            horizon_ms: far.min(dur.saturating_mul(4)).max(1),
            edge_deadline,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use deadline_budget::analysis::{
        BudgetFacts, Chain, Options, SpanId, SpanKind, SpanStatus, TraceId,
    };

    use super::*;

    const MS: u64 = 1_000_000;
    const T0: u64 = 1_764_374_400_000 * MS;

    fn span(id: u64, parent: Option<u64>, kind: SpanKind, ms: (u64, u64)) -> Span {
        Span {
            trace_id: TraceId([7; 16]),
            span_id: SpanId(id.to_be_bytes()),
            parent_span_id: parent.map(|p| SpanId(p.to_be_bytes())),
            service: Arc::from(if id < 3 { "orders" } else { "inventory" }),
            name: Arc::from("work"),
            kind,
            start_unix_nano: T0 + ms.0 * MS,
            end_unix_nano: T0 + ms.1 * MS,
            status: SpanStatus::Unset,
            budget: BudgetFacts::default(),
        }
    }

    /// orders receives 1000 ms and forwards 3000 ms with 100 ms left (a reset); inventory
    /// receives 3000 ms over gRPC, queues 50 ms and works on after orders gave up.
    fn reset_chain() -> (ChainAnalysis, Chain) {
        let mut hop = span(1, None, SpanKind::Server, (0, 1000));
        hop.budget.source = Some(BudgetSource::XBudgetMs);
        hop.budget.received_ms = Some(1000);
        let mut call = span(2, Some(1), SpanKind::Client, (900, 1000));
        call.budget.remaining_ms = Some(100);
        call.budget.forwarded_ms = Some(3000);
        let mut callee = span(3, Some(2), SpanKind::Server, (910, 1600));
        callee.budget.source = Some(BudgetSource::GrpcTimeout);
        callee.budget.received_ms = Some(3000);
        callee.budget.queue_wait_ms = Some(50);
        let mut chain = Chain::new(TraceId([7; 16]));
        for s in [hop, call, callee] {
            chain.insert(s);
        }
        (chain.analyse(&Options::default()), chain)
    }

    /// The marks of the row of span `id`.
    fn marks_of(a: &ChainAnalysis, chain: &Chain, id: u64) -> RowMarks {
        a.rows
            .iter()
            .find_map(|row| {
                let span = chain.span(row.span as usize)?;
                (span.span_id == SpanId(id.to_be_bytes())).then(|| RowMarks::of(a, row, &span))
            })
            .expect("the span's row")
    }

    #[test]
    fn a_reset_call_is_marked_where_what_remained_ran_out() {
        let (a, chain) = reset_chain();
        let call = marks_of(&a, &chain, 2);
        assert_eq!(call.kind, RowKind::Call);
        assert_eq!(
            call.forwarded,
            Some(Forwarded {
                until: 900 + 3000,
                remaining_until: Some(900 + 100),
            })
        );
        assert!(!call.dropped && !call.refused);
        assert_eq!(call.attempt, None, "called once: no attempt in its label");
        assert_eq!(call.numbers(true), ("fwd 3000>100".to_string(), Tone::Late));
        assert_eq!(call.numbers(false), call.numbers(true));
    }

    #[test]
    fn a_hops_figures_name_the_carrier_and_the_queue_only_when_wide() {
        let (a, chain) = reset_chain();
        let callee = marks_of(&a, &chain, 3);
        assert_eq!(callee.kind, RowKind::Hop);
        assert_eq!((callee.start, callee.end), (910, 1600));
        assert_eq!(callee.deadline, Some(910 + 3000));
        assert_eq!(callee.queue_ms, 50);
        assert_eq!(callee.shed, None);
        assert_eq!(
            callee.numbers(true),
            ("rcv 3000 grpc q50".to_string(), Tone::Plain)
        );
        assert_eq!(callee.numbers(false), ("rcv 3000".to_string(), Tone::Plain));
        // Work past the moment orders stopped waiting (its deadline, 1000) is the analysis's
        // late work.
        assert_eq!(callee.late_from, Some(1000));
        let spans = a.rows.iter().filter_map(|r| chain.span(r.span as usize));
        let scale = ChainScale::of(&a, spans);
        assert_eq!(scale.edge_deadline, Some(1000));
        // The farthest mark: inventory's deadline (within four times the chain).
        assert_eq!(scale.horizon_ms, 910 + 3000);
    }
}
