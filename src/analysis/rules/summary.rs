//! What is read off the timing and the findings once the rule pass is done: the waterfall's
//! rows, the chain's outcome for its user, and the chain's summary.

use std::sync::Arc;

use crate::analysis::chain::{Link, NONE, SpanView, Tree, refill};
use crate::analysis::chain_analysis::{ChainSummary, Options, RootLeft, Row};
use crate::analysis::finding_kind::{KindSet, SeverityCounts};
use crate::analysis::model::{ChainOutcome, Finding, Outcome};

use crate::analysis::clocks::Clocks;

use super::pass::PassState;
use super::timing::{Timing, callee, status_outcome};
use super::timing::{has_budget, ms, ns};

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

/// One row per span, depth-first, with the findings on it and what the timing says of it.
pub(super) fn rows(
    spans: &[SpanView<'_>],
    tree: &Tree,
    timing: &Timing,
    state: &PassState,
    clocks: &Clocks,
    kinds: &[KindSet],
    row_of: &mut Vec<u32>,
) -> Vec<Row> {
    refill(row_of, spans.len(), NONE);
    for (r, &i) in tree.order.iter().enumerate() {
        row_of[i as usize] = r as u32;
    }
    tree.order
        .iter()
        .map(|&i| {
            let i = i as usize;
            let p = tree.parent[i];
            let s = &spans[i];
            Row {
                span: i as u32,
                depth: tree.depth[i],
                parent_row: (p != NONE).then(|| row_of[p as usize]),
                link: tree.link[i],
                findings: kinds[i],
                dead_ms: u32::try_from(timing.dead[i]).unwrap_or(u32::MAX),
                late_ms: timing.late_ms(spans, i),
                waiting_ms: u32::try_from(timing.waiting[i]).unwrap_or(u32::MAX),
                held_ms: u32::try_from(timing.held[i]).unwrap_or(u32::MAX),
                retried: state.retried[i],
                awaits_callee: s.kind.is_call()
                    && s.budget.outcome != Some(Outcome::Refused)
                    && callee(spans, tree, i).is_none(),
                moved_ms: i32::try_from(clocks.shift_ms[i]).unwrap_or(0),
            }
        })
        .collect()
}

/// The chain at a glance, and the call its root left open while the callee still worked (a
/// proxy's one span: see [`RootLeft`]), by its callee hop. `hops` are the chain's hops, in
/// arrival order.
pub(super) fn summary(
    spans: &[SpanView<'_>],
    tree: &Tree,
    timing: &Timing,
    findings: &[Finding],
    counts: SeverityCounts,
    hops: &[usize],
    options: &Options,
) -> (ChainSummary, Option<(usize, RootLeft)>) {
    let chain_start = spans.iter().map(|s| s.start_unix_nano).min().unwrap_or(0);
    let chain_end = spans
        .iter()
        .map(|s| s.end_unix_nano)
        .max()
        .unwrap_or(0)
        .max(chain_start);
    let root = tree.order.first().map(|&i| i as usize);
    let first_hop = tree
        .order
        .iter()
        .map(|&i| i as usize)
        .find(|&i| spans[i].kind.is_hop());
    let t = timing;
    let mut root_left = None;
    let outcome = match root {
        None => ChainOutcome::InFlight,
        Some(r) if tree.link[r] == Link::Orphan => ChainOutcome::InFlight,
        Some(r) => {
            let h = first_hop.unwrap_or(r);
            let left = t.left_working(spans, tree, h, options);
            match chain_outcome(&spans[h]) {
                // It answered, or failed, while its callee still worked: it relayed nothing
                // (a proxy that records one span). Its caller hung up, or it failed, unless
                // the call lasted the edge's timeout, which only the edge's totals tell.
                o @ (ChainOutcome::Ok | ChainOutcome::Error) if left.is_some() => {
                    if let Some((callee, after_ms)) = left {
                        let answered = o == ChainOutcome::Ok;
                        root_left = Some((callee, RootLeft { after_ms, answered }));
                    }
                    if o == ChainOutcome::Ok {
                        ChainOutcome::Cancelled
                    } else {
                        o
                    }
                }
                // Answered "fine" while one of its own calls was still waiting for an
                // answer: it did not answer, its caller hung up (Node.js's http
                // instrumentation ends the span so, with status 200).
                ChainOutcome::Ok
                    if spans[h].budget.outcome.is_none() && t.hung_up(spans, h, options) =>
                {
                    ChainOutcome::Cancelled
                }
                // Answered "fine" after the budget it received had run out: an answer, late;
                // whether its caller still waited is not in the spans.
                ChainOutcome::Ok if Timing::late_by(spans, tree, h, options).is_some() => {
                    ChainOutcome::Late
                }
                o => o,
            }
        }
    };
    let summary = ChainSummary {
        root_service: root.map(|r| spans[r].service.clone()).unwrap_or_default(),
        root_name: root.map(|r| spans[r].name.clone()).unwrap_or_default(),
        start_unix_nano: chain_start,
        end_unix_nano: chain_end,
        duration_ms: ms(ns(chain_end) - ns(chain_start)),
        edge_budget_ms: first_hop.and_then(|h| spans[h].budget.budget_ms()),
        edge_budget_source: first_hop.and_then(|h| spans[h].budget.source),
        spans: spans.len() as u32,
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
    (summary, root_left)
}

/// The services of hops whose budget is not known (coverage), sorted, once each.
pub(super) fn services_without_budget(spans: &[SpanView<'_>], hops: &[usize]) -> Vec<Arc<str>> {
    let mut services: Vec<Arc<str>> = hops
        .iter()
        .filter(|&&i| !has_budget(&spans[i].budget))
        .map(|&i| spans[i].service.clone())
        .collect();
    services.sort_unstable();
    services.dedup();
    services
}
