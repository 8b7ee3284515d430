//! Unit tests of the analysis: chain assembly, each finding rule, edges and the report.

use std::sync::Arc;

use super::*;

mod advice;
mod clocks;
mod context;
mod point_of_view;
mod properties;
mod rules;
mod totals;
mod waste;

/// A Unix time in ms where every test chain starts.
const T0: u64 = 1_764_430_000_000;

fn trace() -> TraceId {
    TraceId([7; 16])
}

fn sid(n: u64) -> SpanId {
    SpanId(n.to_be_bytes())
}

/// A span of the test trace; times in ms after `T0`.
fn span(id: u64, parent: Option<u64>, service: &str, kind: SpanKind, start: u64, end: u64) -> Span {
    Span {
        trace_id: trace(),
        span_id: sid(id),
        parent_span_id: parent.map(sid),
        service: Arc::from(service),
        name: Arc::from(format!("{service} {id}")),
        kind,
        start_unix_nano: (T0 + start) * 1_000_000,
        end_unix_nano: (T0 + end) * 1_000_000,
        status: SpanStatus::Unset,
        budget: BudgetFacts::default(),
    }
}

/// A chain's analysis with the spans of its rows beside it (the rows name spans by their
/// position in arrival order): equal when the analyses are equal whatever order the spans came in.
#[derive(Debug)]
struct Analysed {
    analysis: ChainAnalysis,
    /// The span of each row, in row order.
    row_spans: Vec<Span>,
}

impl std::ops::Deref for Analysed {
    type Target = ChainAnalysis;
    fn deref(&self) -> &ChainAnalysis {
        &self.analysis
    }
}

impl PartialEq for Analysed {
    fn eq(&self, other: &Self) -> bool {
        let rows = |a: &ChainAnalysis| -> Vec<Row> {
            a.rows.iter().map(|r| Row { span: 0, ..*r }).collect()
        };
        let (a, b) = (&self.analysis, &other.analysis);
        self.row_spans == other.row_spans
            && rows(a) == rows(b)
            && (a.trace_id, &a.summary, &a.findings, &a.edges)
                == (b.trace_id, &b.summary, &b.findings, &b.edges)
    }
}

fn analyse(spans: impl IntoIterator<Item = Span>) -> Analysed {
    let mut chain = Chain::new(trace());
    for s in spans {
        chain.insert(s);
    }
    let analysis = chain.analyse(&Options::default());
    let row_spans = analysis
        .rows
        .iter()
        .map(|r| chain.span(r.span as usize).unwrap())
        .collect();
    Analysed {
        analysis,
        row_spans,
    }
}

fn kinds(a: &ChainAnalysis) -> Vec<(FindingKind, SpanId)> {
    a.findings.iter().map(|f| (f.kind, f.span_id)).collect()
}

/// Each hop's dead work, by service, as the rows carry it.
fn dead_by_service(a: &Analysed) -> Vec<(String, u32)> {
    a.rows
        .iter()
        .zip(&a.row_spans)
        .filter(|(r, s)| s.kind.is_hop() && r.dead_ms > 0)
        .map(|(r, s)| (s.service.to_string(), r.dead_ms))
        .collect()
}

#[test]
fn report_serialises_to_the_contract_shape() {
    let mut hop = span(1, None, "orders", SpanKind::Server, 0, 100);
    hop.budget.received_ms = Some(800);
    hop.budget.source = Some(BudgetSource::XBudgetMs);
    let mut call = span(2, Some(1), "orders", SpanKind::Client, 10, 90);
    call.name = Arc::from("GET inventory");
    call.budget.remaining_ms = Some(700);
    call.budget.forwarded_ms = Some(3000);
    let mut callee = span(3, Some(2), "inventory", SpanKind::Server, 11, 89);
    callee.budget.received_ms = Some(3000);
    callee.budget.source = Some(BudgetSource::XBudgetMs);
    let report = Report::from_spans([hop, call, callee], &Options::default());
    let json = serde_json::to_value(&report).unwrap();
    let expected = serde_json::json!({
        "summary": { "traces": 1, "spans": 3, "hops": 2,
                     "findings": { "error": 1, "warning": 0, "info": 0 },
                     "findings_by_kind": { "budget_reset": 1 },
                     "findings_listed": 1, "findings_omitted": 0,
                     "wasted_ms": 0,
                     "outcomes": { "in_flight": 0, "ok": 1, "late": 0, "deadline_exceeded": 0, "shed": 0,
                                   "cancelled": 0, "error": 0 },
                     "coverage": { "hops_with_budget": 2, "hops_without_budget": 0,
                                   "services_without_budget": [] },
                     "edge_calls_folded": 0, "service_hops_folded": 0 },
        "findings": [ { "kind": "budget_reset", "severity": "error",
                        "trace_id": "07070707070707070707070707070707",
                        "span_id": "0000000000000002",
                        "service": "orders", "span_name": "GET inventory",
                        "message": "forwarded 3000 ms with only 700 ms left",
                        "received_ms": null, "remaining_ms": 700, "forwarded_ms": 3000,
                        "wasted_ms": null } ],
        "edges": [ { "caller": "orders", "callee": "inventory", "untraced": false, "calls": 1,
                     "findings": { "budget_reset": 1 }, "wasted_ms": 0,
                     "timeout_ms": null, "timeout_inferred": false,
                     "latency_p50_ms": 80, "latency_p99_ms": 80,
                     "advice": {
                         "timeout_ms": null, "p999_ms": null, "capped_by_budget_ms": null,
                         "budget_flows": true, "current_timeout_ms": null,
                         "current_timeout_inferred": false, "calls": 1, "calls_needed": 99,
                         "would_cut": 0, "would_cut_share": 0.0, "retry": null,
                         "sentence": "orders → inventory: no timeout, 1 answered call(s): advice after 99 more" },
                     "totals": {
                         "latency_ms": { "min": 80, "max": 80, "buckets": [[80, 1]] },
                         "received_ms": { "min": 3000, "max": 3000, "buckets": [[3007, 1]] },
                         "forwarded_ms": { "min": 3000, "max": 3000, "buckets": [[3007, 1]] },
                         "declared_timeouts_ms": [], "unanswered_ms": [], "wait_slack_ms": [],
                         "slowest": [80, "07070707070707070707070707070707", "0000000000000002"],
                         "attempts": [],
                         "caller_budget_ms": { "min": 800, "max": 800, "buckets": [[803, 1]] },
                         "untraced_calls": 0, "answered_for_nobody_ms": [],
                         "root_left_ms": [], "root_left_failed_ms": [],
                         "remaining_ms": { "min": 700, "max": 700, "buckets": [[703, 1]] } } } ],
        "services": [
            { "service": "inventory", "hops": 1, "work_ms": 78, "wasted_ms": 0, "held_ms": 0,
              "queue_wait_p50_ms": null, "queue_wait_p99_ms": null,
              "queue_wait_ms": { "min": null, "max": null, "buckets": [] } },
            { "service": "orders", "hops": 1, "work_ms": 100, "wasted_ms": 0, "held_ms": 0,
              "queue_wait_p50_ms": null, "queue_wait_p99_ms": null,
              "queue_wait_ms": { "min": null, "max": null, "buckets": [] } } ]
    });
    assert_eq!(json, expected);
    assert!(report.fails(Severity::Error));
}

/// A hop that received `received` ms through `x-budget-ms` (or no budget: source `none`).
fn hop(
    id: u64,
    parent: Option<u64>,
    service: &str,
    start: u64,
    end: u64,
    received: Option<i64>,
) -> Span {
    let mut s = span(id, parent, service, SpanKind::Server, start, end);
    s.budget.received_ms = received;
    s.budget.source = Some(if received.is_some() {
        BudgetSource::XBudgetMs
    } else {
        BudgetSource::None
    });
    s.budget.remaining_at_start_ms = received;
    s.budget.outcome = Some(Outcome::Ok);
    s
}

/// A call sent with `remaining` ms left that forwarded `forwarded` ms.
fn call(
    id: u64,
    parent: u64,
    service: &str,
    start: u64,
    end: u64,
    remaining: i64,
    forwarded: Option<i64>,
) -> Span {
    let mut s = span(id, Some(parent), service, SpanKind::Client, start, end);
    s.budget.remaining_ms = Some(remaining);
    s.budget.forwarded_ms = forwarded;
    s.budget.timeout_ms = Some(forwarded.unwrap_or(remaining));
    s
}

/// frontend (1000 ms) -> orders (forwards 950) -> inventory (forwards 800) and payments (400),
/// everything within its budget: the right behaviour.
fn healthy() -> Vec<Span> {
    vec![
        hop(1, None, "frontend", 0, 300, Some(1000)),
        call(2, 1, "frontend", 20, 290, 980, Some(950)),
        hop(3, Some(2), "orders", 21, 289, Some(950)),
        call(4, 3, "orders", 30, 120, 941, Some(800)),
        hop(5, Some(4), "inventory", 31, 119, Some(800)),
        call(6, 3, "orders", 130, 280, 841, Some(400)),
        hop(7, Some(6), "payments", 131, 279, Some(400)),
        span(8, Some(7), "payments", SpanKind::Internal, 140, 270),
    ]
}

#[test]
fn correct_propagation_gives_no_finding() {
    let a = analyse(healthy());
    assert_eq!(kinds(&a), vec![]);
    assert_eq!(a.summary.worst, None);
    assert_eq!(a.summary.hops, 4);
    assert_eq!(a.summary.edge_budget_ms, Some(1000));
    assert_eq!(&*a.summary.root_service, "frontend");
    assert_eq!(a.summary.duration_ms, 300);
    let order: Vec<u64> = a
        .row_spans
        .iter()
        .map(|s| u64::from_be_bytes(s.span_id.0))
        .collect();
    assert_eq!(order, vec![1, 2, 3, 4, 5, 6, 7, 8]);
    let depths: Vec<u32> = a.rows.iter().map(|r| r.depth).collect();
    assert_eq!(depths, vec![0, 1, 2, 3, 4, 3, 4, 5]);
    let edges: Vec<(&str, &str)> = a.edges.iter().map(|e| (&*e.caller, &*e.callee)).collect();
    assert_eq!(
        edges,
        vec![
            ("frontend", "orders"),
            ("orders", "inventory"),
            ("orders", "payments")
        ]
    );
}

#[test]
fn parent_arriving_after_child_gives_the_same_analysis() {
    let in_order = analyse(healthy());
    let mut reversed = healthy();
    reversed.reverse();
    assert_eq!(analyse(reversed.clone()), in_order);
    // And a chain with findings, in a scrambled order.
    let mut broken = healthy();
    broken[3].budget.forwarded_ms = Some(5000);
    broken[4].budget.received_ms = Some(5000);
    let a = analyse(broken.clone());
    broken.swap(0, 7);
    broken.swap(2, 5);
    assert_eq!(analyse(broken), a);
    assert_eq!(kinds(&a), vec![(FindingKind::BudgetReset, sid(4))]);
}

#[test]
fn a_span_listed_twice_counts_once_and_the_copy_kept_does_not_depend_on_arrival_order() {
    let mut chain = Chain::new(trace());
    for s in healthy() {
        assert_eq!(chain.insert(s), Inserted::New);
    }
    // A copy that ends later (the finished span after a partial one) wins, in either order.
    let mut again = healthy()[3].clone();
    again.budget.forwarded_ms = Some(5000);
    again.end_unix_nano += 1;
    assert_eq!(chain.insert(again.clone()), Inserted::Conflicting);
    assert_eq!(chain.insert(healthy()[3].clone()), Inserted::Conflicting);
    assert_eq!(chain.get(sid(4)).as_ref(), Some(&again));
    assert_eq!(chain.insert(healthy()[0].clone()), Inserted::Replaced);
    assert_eq!(chain.len(), 8);
    let a = chain.analyse(&Options::default());
    assert_eq!(a.summary.spans, 8);
    assert_eq!(a.rows.len(), 8);
    assert_eq!(kinds(&a), vec![(FindingKind::BudgetReset, sid(4))]);
    // Same end, same facts, other contents: still one winner whatever the order.
    let mut other = healthy()[3].clone();
    other.budget.forwarded_ms = Some(7);
    for (first, second) in [(&healthy()[3], &other), (&other, &healthy()[3])] {
        let mut chain = Chain::new(trace());
        assert_eq!(chain.insert(first.clone()), Inserted::New);
        assert_eq!(chain.insert(second.clone()), Inserted::Conflicting);
        let mut reverse = Chain::new(trace());
        reverse.insert(second.clone());
        reverse.insert(first.clone());
        assert_eq!(chain.get(sid(4)), reverse.get(sid(4)));
    }
    let mut other = healthy()[0].clone();
    other.trace_id = TraceId([1; 16]);
    assert_eq!(chain.insert(other), Inserted::OtherTrace);
    assert_eq!(chain.len(), 8);
}

#[test]
fn duplicates_and_parents_are_found_in_small_and_large_chains_alike() {
    // Small chains are scanned, large ones get a map: both must find every id.
    for n in [5u64, 32, 33, 200] {
        let mut chain = Chain::new(trace());
        let spans: Vec<Span> = (1..=n)
            .map(|i| {
                let parent = (i > 1).then(|| i - 1);
                span(
                    i,
                    parent,
                    "svc",
                    SpanKind::Internal,
                    i * 1_000_000,
                    10_000_000_000,
                )
            })
            .collect();
        for s in spans.iter().rev() {
            assert_eq!(chain.insert(s.clone()), Inserted::New, "n={n}");
        }
        for s in &spans {
            assert_eq!(chain.insert(s.clone()), Inserted::Replaced, "n={n}");
            assert_eq!(chain.get(s.span_id).as_ref(), Some(s), "n={n}");
        }
        assert_eq!(chain.len() as u64, n);
        assert_eq!(chain.missing_parents(), 0, "n={n}");
        assert!(chain.get(sid(n + 1)).is_none());
        let a = chain.analyse(&Options::default());
        assert_eq!(
            u64::from(a.rows.last().map_or(0, |r| r.depth)),
            n - 1,
            "n={n}: one line"
        );
    }
}

#[test]
fn a_child_with_a_missing_parent_is_the_root_of_its_own_subtree() {
    let spans: Vec<Span> = healthy()
        .into_iter()
        .filter(|s| s.span_id != sid(2))
        .collect();
    let mut chain = Chain::new(trace());
    for s in spans {
        chain.insert(s);
    }
    assert_eq!(chain.missing_parents(), 1);
    let a = chain.analyse(&Options::default());
    assert_eq!(a.summary.orphans, 1);
    assert_eq!(a.rows.len(), 7);
    let orders = a
        .rows
        .iter()
        .find(|r| chain.span(r.span as usize).unwrap().span_id == sid(3))
        .unwrap();
    assert_eq!(
        (orders.link, orders.depth, orders.parent_row),
        (Link::Orphan, 0, None)
    );
    // Without its caller's span, nothing is blamed on orders.
    assert_eq!(kinds(&a), vec![]);
}

#[test]
fn a_self_parent_is_cut_and_analysed() {
    let mut s = hop(1, Some(1), "orders", 0, 100, Some(500));
    s.budget.remaining_at_start_ms = Some(500);
    let a = analyse([s, span(2, Some(1), "orders", SpanKind::Internal, 10, 20)]);
    assert_eq!(a.summary.cycles_cut, 1);
    assert_eq!(a.rows[0].link, Link::CycleCut);
    assert_eq!(a.rows[1].depth, 1);
}

#[test]
fn a_parent_cycle_is_cut_at_its_earliest_member_whatever_the_arrival_order() {
    let spans = vec![
        span(1, Some(3), "a", SpanKind::Server, 0, 100),
        span(2, Some(1), "b", SpanKind::Server, 10, 90),
        span(3, Some(2), "c", SpanKind::Server, 20, 80),
    ];
    let a = analyse(spans.clone());
    let mut rev = spans;
    rev.reverse();
    assert_eq!(analyse(rev), a);
    assert_eq!(a.summary.cycles_cut, 1);
    let ids: Vec<(SpanId, Link, u32)> = a
        .rows
        .iter()
        .zip(&a.row_spans)
        .map(|(r, s)| (s.span_id, r.link, r.depth))
        .collect();
    assert_eq!(
        ids,
        vec![
            (sid(1), Link::CycleCut, 0),
            (sid(2), Link::Child, 1),
            (sid(3), Link::Child, 2)
        ]
    );
}

/// A chain `hops` hops deep: each hop calls the next, forwarding 1 ms less each time.
fn deep(hops: u64) -> Vec<Span> {
    let budget = 1_000_000i64;
    let mut spans = Vec::with_capacity(hops as usize * 2);
    for k in 0..hops {
        let (h, c) = (2 * k + 1, 2 * k + 2);
        let parent = (k > 0).then(|| 2 * k);
        let received = budget - k as i64;
        spans.push(hop(
            h,
            parent,
            if k % 2 == 0 { "a" } else { "b" },
            k,
            10 * hops - k,
            Some(received),
        ));
        if k + 1 < hops {
            spans.push(call(
                c,
                h,
                if k % 2 == 0 { "a" } else { "b" },
                k,
                10 * hops - k - 1,
                received,
                Some(received - 1),
            ));
        }
    }
    spans
}

#[test]
fn a_chain_10_000_hops_deep_is_walked_without_recursion() {
    let a = analyse(deep(10_000));
    assert_eq!(a.summary.hops, 10_000);
    assert_eq!(a.rows.last().unwrap().depth, 19_998);
    assert_eq!(kinds(&a), vec![]);
    assert_eq!(a.edges.len(), 9_999);
}

#[test]
fn a_chain_100_000_hops_deep_in_reverse_order_and_a_100_000_long_cycle_do_not_hang() {
    let mut spans = deep(100_000);
    spans.reverse();
    let a = analyse(spans);
    assert_eq!(a.rows.len(), 199_999);
    assert_eq!(a.rows.last().unwrap().depth, 199_998);
    assert_eq!(a.summary.findings, SeverityCounts::default());

    let n = 100_000u64;
    let cycle = (1..=n).map(|i| {
        span(
            i,
            Some(if i == 1 { n } else { i - 1 }),
            "x",
            SpanKind::Internal,
            i,
            i + 1,
        )
    });
    let a = analyse(cycle);
    assert_eq!(a.summary.cycles_cut, 1);
    assert_eq!(a.rows.len(), n as usize);
    assert_eq!(a.rows.last().unwrap().depth, n as u32 - 1);
}

fn only(a: &ChainAnalysis) -> &Finding {
    assert_eq!(a.findings.len(), 1, "{:#?}", a.findings);
    &a.findings[0]
}

#[test]
fn edge_stats_add_and_remove_are_inverse_and_percentiles_are_exact() {
    let healthy_a = analyse(healthy());
    let mut broken = healthy();
    broken[4].budget.received_ms = Some(5000);
    let broken_a = analyse(broken);

    let mut stats = EdgeStats::new();
    stats.add(&healthy_a);
    let after_one = stats.to_reports();
    stats.add(&broken_a);
    let inv = stats.get("orders", "inventory").unwrap();
    assert_eq!(
        (inv.calls, inv.findings.get(FindingKind::BudgetReset)),
        (2, 1)
    );
    // Within the sketch's 1 %; the largest value exactly.
    let p50 = inv.received.p50().unwrap();
    assert!((800..=808).contains(&p50), "p50 {p50}");
    assert_eq!(inv.received.p99(), Some(5000));
    assert_eq!(
        (inv.forwarded.p50(), inv.forwarded.p99()),
        (Some(800), Some(800))
    );
    assert_eq!(
        inv.to_report().findings.get(&FindingKind::BudgetReset),
        Some(&1)
    );

    // The store re-analyses a chain: take the old analysis out, put the new one in. (The
    // slowest call held leaves with its chain: the edge's own finding waits for the next.)
    stats.remove(&broken_a);
    let without_slowest = |mut reports: Vec<EdgeReport>| {
        for r in &mut reports {
            r.totals.slowest = None;
        }
        reports
    };
    assert_eq!(
        without_slowest(stats.to_reports()),
        without_slowest(after_one)
    );
    stats.remove(&healthy_a);
    assert!(stats.is_empty());

    let mut d = Distribution::default();
    for v in 1..=100 {
        d.add(v);
    }
    assert_eq!(
        (d.p50(), d.p99(), d.percentile(1.0), d.len()),
        (Some(50), Some(99), Some(100), 100)
    );
    d.remove(100);
    d.remove(7777);
    assert_eq!((d.percentile(1.0), d.len()), (Some(99), 99));
}

#[test]
fn report_orders_findings_and_edges_whatever_the_input_order() {
    let mut spans = Vec::new();
    for t in [3u8, 1, 2] {
        let mut chain = healthy();
        chain[3].budget.forwarded_ms = Some(5000);
        chain[6].end_unix_nano = (T0 + 400) * 1_000_000;
        for s in &mut chain {
            s.trace_id = TraceId([t; 16]);
        }
        spans.extend(chain);
    }
    let report = Report::from_spans(spans.clone(), &Options::default());
    spans.reverse();
    assert_eq!(Report::from_spans(spans, &Options::default()), report);
    let order: Vec<(u8, SpanId, FindingKind)> = report
        .findings
        .iter()
        .map(|f| (f.trace_id.0[0], f.span_id, f.kind))
        .collect();
    assert_eq!(
        order,
        [1u8, 2, 3]
            .iter()
            .flat_map(|&t| [
                (t, sid(4), FindingKind::BudgetReset),
                (t, sid(7), FindingKind::OrphanedWork)
            ])
            .collect::<Vec<_>>()
    );
    assert_eq!(
        report.summary,
        Summary {
            traces: 3,
            spans: 24,
            hops: 12,
            findings: SeverityCounts {
                error: 6,
                warning: 0,
                info: 0
            },
            findings_by_kind: [
                (FindingKind::BudgetReset, 3),
                (FindingKind::OrphanedWork, 3)
            ]
            .into_iter()
            .collect(),
            findings_listed: 6,
            findings_omitted: 0,
            wasted_ms: report.summary.wasted_ms,
            outcomes: OutcomeCounts {
                ok: 3,
                ..OutcomeCounts::default()
            },
            coverage: Coverage {
                hops_with_budget: 12,
                hops_without_budget: 0,
                services_without_budget: vec![],
            },
            edge_calls_folded: 0,
            service_hops_folded: 0,
        }
    );
    assert!(report.summary.wasted_ms > 0);
    let edges: Vec<(&str, &str, u64)> = report
        .edges
        .iter()
        .map(|e| (&*e.caller, &*e.callee, e.calls))
        .collect();
    assert_eq!(
        edges,
        vec![
            ("frontend", "orders", 3),
            ("orders", "inventory", 3),
            ("orders", "payments", 3)
        ]
    );
    assert!(report.fails(Severity::Error));
    assert!(!Report::from_spans(healthy(), &Options::default()).fails(Severity::Info));
}

/// `span` as a clock `ms` behind records it (negative: ahead).
fn behind(span: &mut Span, ms: i64) {
    let by = ms * 1_000_000;
    span.start_unix_nano = span.start_unix_nano.saturating_add_signed(-by);
    span.end_unix_nano = span.end_unix_nano.saturating_add_signed(-by);
}
