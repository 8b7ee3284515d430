//! Clocks that disagree (`CONVENTIONS.md` section 3): a hop whose clock is measurably off is
//! moved onto its caller's clock before the timing rules run, so a wrong clock neither hides
//! dead work nor invents it.
//!
//! [`Clocks::correct`] walks the tree parents first and measures each hop against the call that
//! reached it (already corrected): from an absolute deadline (what it believed it received,
//! minus what its caller forwarded, is its clock's error, within the transit), or, without one,
//! from its span starting before that call (it is at least that far behind: it is moved to the
//! call's start plus the edge's median transit). Only a measurement that `clock_skew` reports
//! moves anything (past 1 s for a deadline, past the parent-start tolerance for a start). The
//! hop's own spans (its internal spans and its calls) move with it; the hops below are measured
//! again against the corrected times. The spans are changed in place; the shifts stay for the
//! findings and the rows.
//!
//! An absolute deadline measures the span clock only when that clock read it: a hop whose
//! recorded deadline (`deadline_unix_ms`) disagrees with its own arrival + budget read the
//! deadline on another clock than the one that timed its spans, and is not moved by it.

use std::sync::Arc;

use super::chain::{NONE, SpanView, Tree, refill};
use super::chain_analysis::Options;
use super::model::{BudgetSource, SpanKind};

const MS: i64 = 1_000_000;
/// The most transit a sample may give the median (as the transit allowance).
const MAX_TRANSIT_MS: i64 = 250;
/// A span longer than this is a broken clock, not a request: never moved, never measured from.
const MAX_SPAN_MS: i64 = 24 * 60 * 60 * 1000;

/// How a hop's clock error was measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Evidence {
    /// From an absolute deadline: the hop believed `received` ms where its caller forwarded
    /// `forwarded` ms; its clock is off by the difference (positive: behind).
    Deadline {
        /// What the hop read.
        received: i64,
        /// What its caller meant.
        forwarded: i64,
    },
    /// It started `ahead_ms` before its caller's call: its clock is at least that far behind.
    StartedBefore {
        /// How far before, in whole ms (rounded up).
        ahead_ms: i64,
    },
}

/// The corrections of one chain; reused from one chain to the next.
#[derive(Debug, Default)]
pub(crate) struct Clocks {
    /// Per span: the ms added to its start and end (its hop's correction; 0 when not moved).
    pub shift_ms: Vec<i64>,
    /// Per hop that was moved: how its clock error was measured.
    pub evidence: Vec<Option<Evidence>>,
    hop_of: Vec<u32>,
}

fn ns(t: u64) -> i64 {
    i64::try_from(t).unwrap_or(i64::MAX)
}

fn absurd(s: &SpanView<'_>) -> bool {
    ns(s.end_unix_nano).saturating_sub(ns(s.start_unix_nano)) / MS > MAX_SPAN_MS
}

impl Clocks {
    /// Measure and correct the clocks of `spans` (in place), for the chain's `tree`.
    pub fn correct(&mut self, spans: &mut [SpanView<'_>], tree: &Tree, opts: &Options) {
        let n = spans.len();
        refill(&mut self.shift_ms, n, 0);
        refill(&mut self.evidence, n, None);
        refill(&mut self.hop_of, n, NONE);
        let start_tol = opts.parent_start_tolerance_ms.saturating_mul(MS);
        // Transit samples are needed only when a hop starts before its call (rare): taken from
        // the raw times, before anything moves.
        let started_before = (0..n).any(|i| {
            let p = tree.parent[i];
            p != NONE
                && spans[i].kind.is_hop()
                && spans[p as usize].kind.is_call()
                && ns(spans[i].start_unix_nano).saturating_add(start_tol)
                    < ns(spans[p as usize].start_unix_nano)
        });
        let transits = if started_before {
            transit_samples(spans, tree)
        } else {
            Vec::new()
        };

        for &i in &tree.order {
            let i = i as usize;
            let p = tree.parent[i];
            if spans[i].kind.is_hop() {
                self.hop_of[i] = i as u32;
                if p != NONE && spans[p as usize].kind.is_call() && !absurd(&spans[i]) {
                    let (hop, call) = (&spans[i], &spans[p as usize]);
                    if let Some((shift, evidence)) = measure(hop, call, opts, &transits) {
                        self.shift_ms[i] = shift;
                        self.evidence[i] = Some(evidence);
                    }
                }
            } else if p != NONE {
                self.hop_of[i] = self.hop_of[p as usize];
                if self.hop_of[i] != NONE {
                    self.shift_ms[i] = self.shift_ms[self.hop_of[i] as usize];
                }
            }
            let shift = self.shift_ms[i].saturating_mul(MS);
            if shift != 0 {
                let s = &mut spans[i];
                s.start_unix_nano = s.start_unix_nano.saturating_add_signed(shift);
                s.end_unix_nano = s.end_unix_nano.saturating_add_signed(shift);
            }
        }
    }
}

/// The clock error of `hop` against the `call` that reached it (already on its own caller's
/// clock): the ms to add to the hop's times, and how it was measured.
fn measure(
    hop: &SpanView<'_>,
    call: &SpanView<'_>,
    opts: &Options,
    transits: &[(Arc<str>, Arc<str>, i64)],
) -> Option<(i64, Evidence)> {
    let f = &hop.budget;
    let start = ns(hop.start_unix_nano);
    if f.source.is_some_and(BudgetSource::is_absolute)
        && let (Some(received), Some(forwarded)) = (f.received_ms, call.budget.forwarded_ms)
    {
        let diff = received.saturating_sub(forwarded);
        // The clock that read the deadline timed the spans too, when the deadline it recorded
        // agrees with its own arrival + budget.
        let same_clock = f.deadline_unix_ms.is_none_or(|d| {
            d.saturating_sub((start / MS).saturating_add(received))
                .saturating_abs()
                <= opts.skew_threshold_ms
        });
        if diff.saturating_abs() > opts.skew_threshold_ms && same_clock {
            return Some((
                diff,
                Evidence::Deadline {
                    received,
                    forwarded,
                },
            ));
        }
    }
    let ahead = ns(call.start_unix_nano).saturating_sub(start);
    if ahead > opts.parent_start_tolerance_ms.saturating_mul(MS) && !absurd(call) {
        let transit = median_transit(transits, call.service, hop.service);
        let shift = ahead.saturating_add(transit.saturating_mul(MS));
        let up = |v: i64| v.saturating_add(MS - 1).div_euclid(MS);
        return Some((
            up(shift),
            Evidence::StartedBefore {
                ahead_ms: up(ahead),
            },
        ));
    }
    None
}

/// The transit (hop start − call start, at most the allowance) of every hop that starts after
/// its call, by (caller, callee) service, sorted.
fn transit_samples(spans: &[SpanView<'_>], tree: &Tree) -> Vec<(Arc<str>, Arc<str>, i64)> {
    let mut out: Vec<(Arc<str>, Arc<str>, i64)> = (0..spans.len())
        .filter_map(|i| {
            let p = tree.parent[i];
            if p == NONE || !spans[i].kind.is_hop() || spans[p as usize].kind != SpanKind::Client {
                return None;
            }
            let (hop, call) = (&spans[i], &spans[p as usize]);
            let transit = ns(hop.start_unix_nano).saturating_sub(ns(call.start_unix_nano));
            (transit >= 0).then(|| {
                (
                    call.service.clone(),
                    hop.service.clone(),
                    (transit / MS).min(MAX_TRANSIT_MS),
                )
            })
        })
        .collect();
    out.sort_unstable();
    out
}

/// The median transit of the edge `caller` → `callee` in `samples`, 0 when it has none.
fn median_transit(samples: &[(Arc<str>, Arc<str>, i64)], caller: &str, callee: &str) -> i64 {
    fn key(s: &(Arc<str>, Arc<str>, i64)) -> (&str, &str) {
        (&s.0, &s.1)
    }
    let from = samples.partition_point(|s| key(s) < (caller, callee));
    let to = samples.partition_point(|s| key(s) <= (caller, callee));
    if from == to {
        return 0;
    }
    samples[from + (to - from) / 2].2
}
