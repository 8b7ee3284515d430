//! Unit tests of the analysis: chain assembly, each finding rule, edges and the report.

use std::sync::Arc;

use super::*;

mod point_of_view;

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
                     "wasted_ms": 0,
                     "outcomes": { "in_flight": 0, "ok": 1, "deadline_exceeded": 0, "shed": 0,
                                   "cancelled": 0, "error": 0 },
                     "coverage": { "hops_with_budget": 2, "hops_without_budget": 0,
                                   "services_without_budget": [] } },
        "findings": [ { "kind": "budget_reset", "severity": "error",
                        "trace_id": "07070707070707070707070707070707",
                        "span_id": "0000000000000002",
                        "service": "orders", "span_name": "GET inventory",
                        "message": "forwarded 3000 ms with only 700 ms left",
                        "received_ms": null, "remaining_ms": 700, "forwarded_ms": 3000,
                        "wasted_ms": null } ],
        "edges": [ { "caller": "orders", "callee": "inventory", "calls": 1,
                     "findings": { "budget_reset": 1 }, "wasted_ms": 0,
                     "timeout_ms": null, "timeout_inferred": false,
                     "latency_p50_ms": 80, "latency_p99_ms": 80 } ]
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
fn budget_reset_when_a_call_forwards_more_than_remained() {
    let mut spans = healthy();
    spans[3].budget.forwarded_ms = Some(947); // remaining 941 + 5 < 947
    spans[4].budget.received_ms = Some(947);
    let a = analyse(spans.clone());
    let f = only(&a);
    assert_eq!(
        (f.kind, f.span_id, f.severity),
        (FindingKind::BudgetReset, sid(4), Severity::Error)
    );
    assert_eq!(
        (f.remaining_ms, f.forwarded_ms, f.received_ms),
        (Some(941), Some(947), None)
    );
    assert_eq!(f.message, "forwarded 947 ms with only 941 ms left");
    // Within tolerance: nothing.
    spans[3].budget.forwarded_ms = Some(946);
    spans[4].budget.received_ms = Some(946);
    assert_eq!(kinds(&analyse(spans)), vec![]);
}

#[test]
fn budget_reset_when_a_hop_received_more_than_its_caller_forwarded() {
    let mut spans = healthy();
    spans[4].budget.received_ms = Some(5000); // a proxy reset it
    let a = analyse(spans.clone());
    let f = only(&a);
    assert_eq!((f.kind, f.span_id), (FindingKind::BudgetReset, sid(5)));
    assert_eq!((f.received_ms, f.forwarded_ms), (Some(5000), Some(800)));
    assert_eq!(
        f.message,
        "received 5000 ms but orders forwarded only 800 ms"
    );
    assert_eq!(a.edges[1].count(FindingKind::BudgetReset), 1);

    // grpc-timeout: 1 ms of rounding on top of the 5.
    spans[4].budget.source = Some(BudgetSource::GrpcTimeout);
    spans[4].budget.received_ms = Some(806);
    assert_eq!(kinds(&analyse(spans.clone())), vec![]);
    spans[4].budget.received_ms = Some(807);
    assert_eq!(
        kinds(&analyse(spans.clone())),
        vec![(FindingKind::BudgetReset, sid(5))]
    );
    // x-request-deadline: differences up to the skew threshold are the clocks' fault (and past
    // it, clock_skew says so too).
    spans[4].budget.source = Some(BudgetSource::XRequestDeadline);
    spans[4].budget.received_ms = Some(1800);
    assert_eq!(kinds(&analyse(spans.clone())), vec![]);
    spans[4].budget.received_ms = Some(1805);
    assert_eq!(
        kinds(&analyse(spans.clone())),
        vec![(FindingKind::ClockSkew, sid(5))]
    );
    spans[4].budget.received_ms = Some(1806);
    assert_eq!(
        kinds(&analyse(spans)),
        vec![
            (FindingKind::BudgetReset, sid(5)),
            (FindingKind::ClockSkew, sid(5))
        ]
    );
}

#[test]
fn budget_dropped_when_a_hop_with_a_budget_calls_without_forwarding() {
    let mut spans = healthy();
    spans[5].budget.forwarded_ms = None;
    spans[6] = hop(7, Some(6), "payments", 131, 279, None);
    let a = analyse(spans.clone());
    let f = only(&a);
    assert_eq!((f.kind, f.span_id), (FindingKind::BudgetDropped, sid(6)));
    assert_eq!(
        (f.received_ms, f.remaining_ms, f.forwarded_ms),
        (Some(950), Some(841), None)
    );
    assert_eq!(
        f.message,
        "orders had 841 ms left but forwarded no budget on this call"
    );
    assert_eq!(a.edges[2].count(FindingKind::BudgetDropped), 1);

    // A call refused for lack of budget is the right behaviour.
    spans[5].budget.outcome = Some(Outcome::Refused);
    spans.truncate(6);
    assert_eq!(kinds(&analyse(spans.clone())), vec![]);
    // A database call traced by stock instrumentation (no budget attributes, no callee hop).
    spans[5] = span(6, Some(3), "orders", SpanKind::Client, 130, 280);
    assert_eq!(kinds(&analyse(spans)), vec![]);
}

#[test]
fn budget_dropped_when_a_hop_lost_the_budget_its_caller_forwarded() {
    let mut spans = healthy();
    spans[6] = hop(7, Some(6), "payments", 131, 279, None);
    let a = analyse(spans.clone());
    let f = only(&a);
    assert_eq!((f.kind, f.span_id), (FindingKind::BudgetDropped, sid(7)));
    assert_eq!(
        f.message,
        "payments received no budget although orders forwarded 400 ms"
    );
    assert_eq!(f.forwarded_ms, Some(400));

    spans[6].budget.source = Some(BudgetSource::Default);
    spans[6].budget.default_ms = Some(30_000);
    let a = analyse(spans.clone());
    assert_eq!(
        only(&a).message,
        "payments fell back to its own default of 30000 ms although orders forwarded 400 ms"
    );

    // No CLIENT span (an uninstrumented client): the caller hop had a budget.
    spans[6] = hop(7, Some(3), "payments", 131, 279, None);
    spans.remove(5);
    let a = analyse(spans);
    let f = only(&a);
    assert_eq!((f.kind, f.span_id), (FindingKind::BudgetDropped, sid(7)));
    assert_eq!(
        f.message,
        "payments received no budget although its caller orders had a 950 ms budget"
    );
    assert_eq!(
        a.edges.last().map(|e| (&*e.caller, &*e.callee)),
        Some(("orders", "payments"))
    );
}

#[test]
fn ran_after_expiry_when_work_started_with_no_budget_left() {
    let mut s = hop(1, None, "inventory", 0, 500, Some(250));
    s.budget.queue_wait_ms = Some(300);
    s.budget.remaining_at_start_ms = Some(-50);
    let a = analyse([s.clone()]);
    let kinds_found = kinds(&a);
    assert_eq!(
        kinds_found,
        vec![
            (FindingKind::RanAfterExpiry, sid(1)),
            (FindingKind::QueuePressure, sid(1))
        ]
    );
    let f = &a.findings[0];
    assert_eq!(
        (f.remaining_ms, f.wasted_ms, f.received_ms),
        (Some(-50), Some(200), Some(250))
    );
    assert_eq!(
        f.message,
        "inventory started work 50 ms after its deadline and worked 200 ms for nobody"
    );
    assert_eq!(a.summary.wasted_ms, 200);

    // Shed at dequeue instead: the right behaviour, no waste.
    s.budget.outcome = Some(Outcome::ShedExpired);
    s.end_unix_nano = (T0 + 300) * 1_000_000;
    let a = analyse([s]);
    assert_eq!(
        kinds(&a),
        vec![
            (FindingKind::ShedExpired, sid(1)),
            (FindingKind::QueuePressure, sid(1))
        ]
    );
    assert_eq!(a.findings[0].severity, Severity::Info);
    assert_eq!(
        a.findings[0].message,
        "shed at dequeue: expired after 300 ms in the queue with a 250 ms budget"
    );
    assert_eq!(a.summary.wasted_ms, 0);
}

#[test]
fn ran_after_expiry_when_a_span_of_the_hop_started_after_its_deadline() {
    let spans = vec![
        hop(1, None, "payments", 0, 400, Some(100)),
        span(2, Some(1), "payments", SpanKind::Internal, 10, 60),
        span(3, Some(1), "payments", SpanKind::Internal, 150, 250),
        span(4, Some(3), "payments", SpanKind::Internal, 160, 200),
        {
            let mut refused = call(5, 1, "payments", 300, 300, -200, None);
            refused.budget.outcome = Some(Outcome::Refused);
            refused
        },
    ];
    let a = analyse(spans);
    let f = only(&a);
    assert_eq!(
        (f.kind, f.span_id, f.wasted_ms),
        (FindingKind::RanAfterExpiry, sid(3), Some(100))
    );
    assert_eq!(
        f.message,
        "payments started \"payments 3\" 50 ms after its deadline and worked 100 ms for nobody"
    );
    assert_eq!(
        a.rows[2].findings.iter().collect::<Vec<_>>(),
        vec![FindingKind::RanAfterExpiry]
    );
    assert_eq!(a.rows[2].worst(), Some(Severity::Error));
}

#[test]
fn orphaned_work_from_timing_alone() {
    let mut client = span(2, Some(1), "orders", SpanKind::Client, 10, 100);
    client.name = Arc::from("GET inventory");
    let spans = vec![
        span(1, None, "orders", SpanKind::Server, 0, 110),
        client,
        span(3, Some(2), "inventory", SpanKind::Server, 12, 380),
    ];
    let a = analyse(spans.clone());
    let f = only(&a);
    assert_eq!(
        (f.kind, f.span_id, f.wasted_ms),
        (FindingKind::OrphanedWork, sid(3), Some(280))
    );
    assert_eq!(
        f.message,
        "inventory worked 280 ms after orders stopped waiting"
    );
    assert_eq!((a.summary.wasted_ms, a.edges[0].wasted_ms), (280, 280));

    // Ending within tolerance of the caller giving up is fine.
    let mut ok = spans.clone();
    ok[2].end_unix_nano = (T0 + 105) * 1_000_000;
    assert_eq!(kinds(&analyse(ok)), vec![]);
    // A consumer of a message outlives its producer by design.
    let mut queue = spans;
    queue[1].kind = SpanKind::Producer;
    queue[2].kind = SpanKind::Consumer;
    assert_eq!(kinds(&analyse(queue)), vec![]);
}

#[test]
fn orphaned_work_allows_the_request_transit_time() {
    // The request took 30 ms to reach inventory; inventory used exactly the budget it got, so
    // it ends 30 ms after orders stopped waiting: not orphaned work.
    let spans = |callee_end: u64| {
        vec![
            span(1, None, "orders", SpanKind::Server, 0, 110),
            span(2, Some(1), "orders", SpanKind::Client, 10, 100),
            span(3, Some(2), "inventory", SpanKind::Server, 40, callee_end),
        ]
    };
    assert_eq!(kinds(&analyse(spans(130))), vec![]);
    assert_eq!(kinds(&analyse(spans(135))), vec![]);
    // Past transit + tolerance it is orphaned, and the waste is the whole overlap.
    let a = analyse(spans(136));
    let f = only(&a);
    assert_eq!(
        (f.kind, f.span_id, f.wasted_ms),
        (FindingKind::OrphanedWork, sid(3), Some(36))
    );
    // A hop that shed the request did no work for anybody.
    let mut shed = spans(400);
    shed[2].budget.outcome = Some(Outcome::ShedExpired);
    assert_eq!(
        kinds(&analyse(shed)),
        vec![(FindingKind::ShedExpired, sid(3))]
    );
}

#[test]
fn shed_full_and_shed_expired_are_info() {
    let mut full = hop(3, Some(2), "inventory", 11, 12, Some(800));
    full.budget.outcome = Some(Outcome::ShedFull);
    let spans = vec![
        hop(1, None, "orders", 0, 100, Some(900)),
        call(2, 1, "orders", 10, 13, 890, Some(800)),
        full,
    ];
    let a = analyse(spans.clone());
    let f = only(&a);
    assert_eq!(
        (f.kind, f.severity, f.span_id),
        (FindingKind::ShedFull, Severity::Info, sid(3))
    );
    assert!(!a.has_at_least(Severity::Warning));

    // The callee's span is missing: the call's outcome tells.
    let mut call_only = spans;
    call_only.pop();
    call_only[1].budget.outcome = Some(Outcome::ShedExpired);
    let a = analyse(call_only);
    assert_eq!(kinds(&a), vec![(FindingKind::ShedExpired, sid(2))]);
}

#[test]
fn queue_pressure_when_waiting_more_than_half_the_budget() {
    let mut s = hop(1, None, "inventory", 0, 700, Some(1000));
    s.budget.queue_wait_ms = Some(501);
    s.budget.remaining_at_start_ms = Some(499);
    let a = analyse([s.clone()]);
    let f = only(&a);
    assert_eq!(
        (f.kind, f.severity, f.received_ms),
        (FindingKind::QueuePressure, Severity::Warning, Some(1000))
    );
    assert_eq!(
        f.message,
        "waited 501 ms in the queue: more than half (50.1 %) of its 1000 ms budget"
    );
    s.budget.queue_wait_ms = Some(500);
    assert_eq!(kinds(&analyse([s])), vec![]);
}

fn attempt(id: u64, start: u64, end: u64, n: i64, remaining: i64, forwarded: i64) -> Span {
    let mut s = call(id, 1, "orders", start, end, remaining, Some(forwarded));
    s.name = Arc::from("GET inventory");
    s.budget.attempt = Some(n);
    s
}

#[test]
fn retry_over_budget_when_attempts_together_forward_more_than_remained() {
    // Each attempt alone is within budget, but the first failed fast and the second got the
    // whole budget again.
    let spans = vec![
        hop(1, None, "orders", 0, 1100, Some(1000)),
        attempt(2, 0, 10, 1, 1000, 1000),
        attempt(3, 10, 990, 2, 990, 990),
    ];
    let a = analyse(spans);
    let f = only(&a);
    assert_eq!((f.kind, f.span_id), (FindingKind::RetryOverBudget, sid(3)));
    assert_eq!((f.remaining_ms, f.forwarded_ms), (Some(1000), Some(1990)));
    assert_eq!(
        f.message,
        "2 attempts forwarded 1990 ms in total with only 1000 ms left at the first"
    );
}

#[test]
fn retry_over_budget_when_an_attempt_starts_after_the_deadline() {
    let spans = vec![
        hop(1, None, "orders", 0, 1200, Some(1000)),
        attempt(2, 0, 300, 1, 1000, 300),
        attempt(3, 300, 600, 2, 700, 300),
        attempt(4, 1010, 1100, 3, -10, 300),
    ];
    let a = analyse(spans);
    let found = kinds(&a);
    // The late attempt; its forwarding more than remained is also a reset.
    assert_eq!(
        found,
        vec![
            (FindingKind::BudgetReset, sid(4)),
            (FindingKind::RetryOverBudget, sid(4))
        ]
    );
    assert_eq!(
        a.findings[1].message,
        "attempt 3 started 10 ms after the deadline of orders"
    );
}

#[test]
fn retries_that_share_the_budget_are_fine() {
    let spans = vec![
        hop(1, None, "orders", 0, 1000, Some(1000)),
        attempt(2, 0, 300, 1, 1000, 300),
        attempt(3, 300, 600, 2, 700, 300),
        attempt(4, 600, 900, 3, 400, 300),
    ];
    assert_eq!(kinds(&analyse(spans)), vec![]);
}

#[test]
fn clock_skew_when_a_child_starts_before_its_parent() {
    let mut spans = healthy();
    // inventory's clock is 40 ms behind.
    spans[4].start_unix_nano = (T0 - 9) * 1_000_000;
    spans[4].end_unix_nano = (T0 + 79) * 1_000_000;
    let a = analyse(spans.clone());
    let f = only(&a);
    assert_eq!(
        (f.kind, f.span_id, f.severity),
        (FindingKind::ClockSkew, sid(5), Severity::Warning)
    );
    assert_eq!(
        f.message,
        "inventory starts 39 ms before its parent in orders: the clocks disagree"
    );
    // One millisecond is within tolerance.
    spans[4].start_unix_nano = (T0 + 29) * 1_000_000;
    assert_eq!(kinds(&analyse(spans)), vec![]);
}

#[test]
fn clock_skew_when_an_absolute_deadline_disagrees_with_the_relative_budget() {
    let mut spans = healthy();
    spans[4].budget.deadline_unix_ms = Some(T0 as i64 + 31 + 800 + 1500);
    let a = analyse(spans.clone());
    let f = only(&a);
    assert_eq!((f.kind, f.span_id), (FindingKind::ClockSkew, sid(5)));
    assert_eq!(
        f.message,
        "absolute deadline is 1500 ms later than arrival + 800 ms budget by the clock of inventory"
    );
    spans[4].budget.deadline_unix_ms = Some(T0 as i64 + 31 + 800 - 900);
    assert_eq!(kinds(&analyse(spans)), vec![]);
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
    assert_eq!(
        (inv.received.p50(), inv.received.p99()),
        (Some(800), Some(5000))
    );
    assert_eq!(
        (inv.forwarded.p50(), inv.forwarded.p99()),
        (Some(800), Some(800))
    );
    assert_eq!(inv.to_report().findings.get("budget_reset"), Some(&1));

    // The store re-analyses a chain: take the old analysis out, put the new one in.
    stats.remove(&broken_a);
    assert_eq!(stats.to_reports(), after_one);
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

mod properties {
    use proptest::prelude::*;

    use super::*;

    fn any_facts() -> impl Strategy<Value = BudgetFacts> {
        let n = || {
            prop_oneof![
                Just(None),
                (-2_000i64..5_000).prop_map(Some),
                prop_oneof![Just(i64::MIN), Just(i64::MAX), Just(0)].prop_map(Some)
            ]
        };
        let source = prop::option::of(prop::sample::select(vec![
            BudgetSource::XBudgetMs,
            BudgetSource::GrpcTimeout,
            BudgetSource::XRequestDeadline,
            BudgetSource::Default,
            BudgetSource::Invalid,
            BudgetSource::None,
        ]));
        let outcome = prop::option::of(prop::sample::select(vec![
            Outcome::Ok,
            Outcome::ShedFull,
            Outcome::ShedExpired,
            Outcome::Refused,
            Outcome::Error,
        ]));
        let error_type = prop::option::of(prop::sample::select(vec!["timeout", "503"]));
        (
            (n(), n(), n(), n(), n()),
            (n(), n(), n(), n()),
            (n(), n(), n(), error_type),
            source,
            outcome,
        )
            .prop_map(
                |(
                    (received, default, queue, at_start, remaining),
                    (forwarded, timeout, attempt, deadline),
                    (sla, http, rpc, error_type),
                    source,
                    outcome,
                )| {
                    BudgetFacts {
                        received_ms: received,
                        source,
                        default_ms: default,
                        queue_wait_ms: queue,
                        remaining_at_start_ms: at_start,
                        outcome,
                        remaining_ms: remaining,
                        forwarded_ms: forwarded,
                        timeout_ms: timeout,
                        attempt,
                        deadline_unix_ms: deadline,
                        sla_ms: sla,
                        http_status: http,
                        rpc_status: rpc,
                        error_type: error_type.map(Arc::from),
                        exception_event: false,
                    }
                },
            )
    }

    fn any_span() -> impl Strategy<Value = Span> {
        let kind = prop::sample::select(vec![
            SpanKind::Internal,
            SpanKind::Server,
            SpanKind::Client,
            SpanKind::Producer,
            SpanKind::Consumer,
        ]);
        let time = prop_oneof![0u64..2_000_000_000, Just(0), Just(u64::MAX)];
        (
            0u64..24,
            prop::option::of(0u64..28),
            prop::sample::select(vec!["a", "b", "c"]),
            kind,
            time.clone(),
            time,
            any_facts(),
        )
            .prop_map(|(id, parent, service, kind, start, end, budget)| Span {
                trace_id: trace(),
                span_id: sid(id),
                parent_span_id: parent.map(sid),
                service: Arc::from(service),
                name: Arc::from(if id % 2 == 0 { "GET x" } else { "work" }),
                kind,
                start_unix_nano: start,
                end_unix_nano: end,
                status: SpanStatus::Unset,
                budget,
            })
    }

    proptest! {
        #[test]
        fn a_chain_gives_back_exactly_the_spans_it_was_given(
            spans in prop::collection::vec(any_span(), 0..60),
        ) {
            // Packed storage, replacement of duplicates (with more or fewer facts than the copy
            // they replace) and the compaction that follows must all be invisible.
            let mut chain = Chain::new(trace());
            let mut expected: Vec<Span> = Vec::new();
            // The copy a chain keeps of a span id (Inserted::Conflicting): the one that ends
            // later, then the one with more facts, then the greater by its contents.
            let rank = |s: &Span| {
                let b = &s.budget;
                let facts = [
                    b.received_ms, b.default_ms, b.queue_wait_ms, b.remaining_at_start_ms,
                    b.remaining_ms, b.forwarded_ms, b.timeout_ms, b.sla_ms, b.attempt,
                    b.deadline_unix_ms, b.http_status, b.rpc_status,
                ]
                .iter()
                .flatten()
                .count()
                    + usize::from(b.source.is_some())
                    + usize::from(b.outcome.is_some())
                    + usize::from(b.error_type.is_some());
                (s.end_unix_nano, facts)
            };
            for s in spans {
                chain.insert(s.clone());
                match expected.iter_mut().find(|e| e.span_id == s.span_id) {
                    Some(e) => {
                        let new_wins = match rank(&s).cmp(&rank(e)) {
                            std::cmp::Ordering::Equal => format!("{s:?}") > format!("{e:?}"),
                            order => order == std::cmp::Ordering::Greater,
                        };
                        if new_wins {
                            *e = s;
                        }
                    }
                    None => expected.push(s),
                }
            }
            prop_assert_eq!(chain.spans().collect::<Vec<_>>(), expected.clone());
            for e in &expected {
                prop_assert_eq!(chain.get(e.span_id), Some(e.clone()));
            }
            chain.shrink_to_fit();
            prop_assert_eq!(chain.spans().collect::<Vec<_>>(), expected);
        }

        #[test]
        fn arbitrary_spans_never_panic_and_every_span_gets_one_row(
            spans in prop::collection::vec(any_span(), 0..40),
        ) {
            let mut chain = Chain::new(trace());
            for s in spans {
                chain.insert(s);
            }
            let a = chain.analyse(&Options::default());
            prop_assert_eq!(a.rows.len(), chain.len());
            let mut ids: Vec<SpanId> = a.rows.iter().map(|r| chain.span(r.span as usize).unwrap().span_id).collect();
            ids.sort();
            ids.dedup();
            prop_assert_eq!(ids.len(), chain.len());
            for (r, row) in a.rows.iter().enumerate() {
                if let Some(p) = row.parent_row {
                    prop_assert!((p as usize) < r);
                    prop_assert_eq!(a.rows[p as usize].depth + 1, row.depth);
                }
            }
            let mut stats = EdgeStats::new();
            stats.add(&a);
            stats.remove(&a);
            prop_assert!(stats.is_empty());
            let report = Report::from_analyses([&a]);
            prop_assert!(serde_json::to_string(&report).is_ok());
        }

        #[test]
        fn arrival_order_does_not_change_the_analysis(
            spans in prop::collection::vec(any_span(), 0..30),
        ) {
            let mut unique: Vec<Span> = Vec::new();
            for s in spans {
                if !unique.iter().any(|u| u.span_id == s.span_id) {
                    unique.push(s);
                }
            }
            let forward = analyse(unique.clone());
            unique.reverse();
            prop_assert_eq!(analyse(unique), forward);
        }

        #[test]
        fn correct_propagation_in_any_shape_gives_no_finding(
            picks in prop::collection::vec((any::<prop::sample::Index>(), 0u64..3, any::<bool>()), 0..40),
        ) {
            let spans = well_behaved(&picks);
            let a = analyse(spans);
            prop_assert_eq!(&a.findings, &vec![]);
        }
    }

    /// A tree of hops where every call forwards a little less than remained and every callee
    /// finishes inside its caller's wait: each pick adds a call (and its callee hop, unless the
    /// call is refused for lack of budget) under an earlier hop.
    fn well_behaved(picks: &[(prop::sample::Index, u64, bool)]) -> Vec<Span> {
        // (span id, depth, received budget) of each hop.
        // The edge received as much as it takes: 1000 ms.
        let mut hops = vec![(1u64, 0u64, 1000i64)];
        let mut spans = vec![hop(1, None, "s0", 0, 1000, Some(1000))];
        let mut next = 2;
        for (pick, service, refuse) in picks {
            let (parent, depth, received) = hops[pick.index(hops.len())];
            let (start, end) = (2 * depth + 1, 1000 - 2 * depth - 1);
            let remaining = received - start as i64 + 2 * depth as i64;
            let name = format!("call s{service}");
            let (c, h) = (next, next + 1);
            next += 2;
            if remaining <= 10 || *refuse && remaining < 50 {
                let mut refused = call(c, parent, "caller", start, start, remaining, None);
                refused.name = Arc::from(name);
                refused.budget.outcome = Some(Outcome::Refused);
                spans.push(refused);
                continue;
            }
            let forwarded = remaining - 10;
            let mut out = call(c, parent, "caller", start, end, remaining, Some(forwarded));
            out.name = Arc::from(name);
            spans.push(out);
            let service = format!("s{service}");
            spans.push(hop(
                h,
                Some(c),
                &service,
                start + 1,
                end - 1,
                Some(forwarded),
            ));
            hops.push((h, depth + 1, forwarded));
        }
        // Callers are named after the hop that makes the call.
        let names: std::collections::HashMap<SpanId, Arc<str>> = spans
            .iter()
            .filter(|s| s.kind.is_hop())
            .map(|s| (s.span_id, s.service.clone()))
            .collect();
        for s in &mut spans {
            if s.kind.is_call() {
                s.service = names[&s.parent_span_id.unwrap()].clone();
            }
        }
        spans
    }
}

#[test]
fn clock_skew_when_an_absolute_deadline_gives_the_callee_another_budget() {
    let mut spans = healthy();
    // inventory's clock is 2 s behind orders': the absolute deadline reads as 2 s more.
    spans[4].budget.source = Some(BudgetSource::XRequestDeadline);
    spans[4].budget.received_ms = Some(2795);
    let a = analyse(spans.clone());
    assert_eq!(
        kinds(&a),
        vec![
            (FindingKind::BudgetReset, sid(5)),
            (FindingKind::ClockSkew, sid(5))
        ]
    );
    assert_eq!(
        a.findings[1].message,
        "received 2795 ms from an absolute deadline but orders meant 800 ms: the clocks differ by about 1995 ms"
    );
    // 2 s ahead: the callee believes it has nothing left; no reset, still skew.
    spans[4].budget.received_ms = Some(-1200);
    assert_eq!(
        kinds(&analyse(spans.clone())),
        vec![(FindingKind::ClockSkew, sid(5))]
    );
    // Within a second: nothing.
    spans[4].budget.received_ms = Some(790);
    assert_eq!(kinds(&analyse(spans)), vec![]);
}

#[test]
fn ran_after_expiry_from_a_queue_wait_that_used_up_the_budget() {
    let mut s = span(1, None, "inventory", SpanKind::Consumer, 0, 450);
    s.budget.received_ms = Some(200);
    s.budget.source = Some(BudgetSource::XBudgetMs);
    s.budget.queue_wait_ms = Some(250);
    let a = analyse([s]);
    assert_eq!(
        kinds(&a),
        vec![
            (FindingKind::RanAfterExpiry, sid(1)),
            (FindingKind::QueuePressure, sid(1))
        ]
    );
    assert_eq!(
        (a.findings[0].remaining_ms, a.findings[0].wasted_ms),
        (Some(-50), Some(200))
    );
}

#[test]
fn an_edge_with_its_own_default_a_short_queue_and_an_uninstrumented_client_is_fine() {
    let mut edge = hop(1, None, "frontend", 0, 300, None);
    edge.budget.source = Some(BudgetSource::Default);
    edge.budget.default_ms = Some(2000);
    edge.budget.remaining_at_start_ms = Some(1990);
    edge.budget.queue_wait_ms = Some(10);
    // orders is called by a client that writes no span, yet the budget arrived by grpc-timeout.
    let mut orders = hop(2, Some(1), "orders", 20, 280, Some(1900));
    orders.budget.source = Some(BudgetSource::GrpcTimeout);
    let a = analyse([edge, orders]);
    assert_eq!(kinds(&a), vec![]);
    assert_eq!(a.summary.edge_budget_ms, Some(2000));
    assert_eq!(a.summary.edge_budget_source, Some(BudgetSource::Default));
    assert_eq!(
        a.edges,
        vec![EdgeSample {
            caller: Arc::from("frontend"),
            callee: Arc::from("orders"),
            received_ms: Some(1900),
            forwarded_ms: None,
            findings: None,
            wasted_ms: 0,
            latency_ms: None,
            timeout_ms: None,
            unanswered_ms: None,
            call: None,
        }]
    );
}

#[test]
fn a_service_without_budget_attributes_is_not_blamed_for_what_it_does_not_say() {
    // Stock OpenTelemetry spans only: no budget.* anywhere, and everything on time.
    let spans = vec![
        span(1, None, "frontend", SpanKind::Server, 0, 100),
        span(2, Some(1), "frontend", SpanKind::Client, 10, 90),
        span(3, Some(2), "orders", SpanKind::Server, 11, 89),
        span(4, Some(3), "orders", SpanKind::Client, 20, 80),
    ];
    let a = analyse(spans);
    assert_eq!(kinds(&a), vec![]);
    assert_eq!(a.summary.edge_budget_ms, None);
    assert_eq!(a.edges.len(), 1);
}

#[test]
fn clock_skew_when_the_collector_decoded_the_absolute_deadline_itself() {
    // As the collector decodes a captured `x-request-deadline`: received = deadline - arrival,
    // so the hop's own view agrees with itself; the caller's forwarded budget does not.
    let mut spans = healthy();
    let arrival = T0 as i64 + 31;
    spans[4].budget.source = Some(BudgetSource::XRequestDeadline);
    spans[4].budget.deadline_unix_ms = Some(arrival + 2800);
    spans[4].budget.received_ms = Some(2800);
    let a = analyse(spans);
    assert_eq!(
        kinds(&a),
        vec![
            (FindingKind::BudgetReset, sid(5)),
            (FindingKind::ClockSkew, sid(5))
        ]
    );
    assert!(
        a.findings[1]
            .message
            .contains("the clocks differ by about 2000 ms")
    );
}

/// orders -> a proxy that records spans but no budget -> inventory.
fn through_proxy(received: i64) -> Vec<Span> {
    let mut inventory = hop(5, Some(4), "inventory", 13, 88, Some(received));
    inventory.budget.source = Some(BudgetSource::XEnvoyExpectedRqTimeoutMs);
    vec![
        hop(1, None, "orders", 0, 100, Some(800)),
        call(2, 1, "orders", 10, 90, 790, Some(700)),
        span(3, Some(2), "envoy", SpanKind::Server, 11, 89),
        span(4, Some(3), "envoy", SpanKind::Client, 12, 89),
        inventory,
    ]
}

#[test]
fn budget_reset_by_a_proxy_in_between_is_found_on_the_hop_that_received_too_much() {
    let a = analyse(through_proxy(15_000));
    let f = only(&a);
    assert_eq!((f.kind, f.span_id), (FindingKind::BudgetReset, sid(5)));
    assert_eq!(
        f.message,
        "received 15000 ms but orders forwarded only 700 ms upstream"
    );
    assert_eq!((f.received_ms, f.forwarded_ms), (Some(15_000), Some(700)));
    let edges: Vec<(&str, &str, u64)> = a
        .edges
        .iter()
        .map(|e| (&*e.caller, &*e.callee, e.count(FindingKind::BudgetReset)))
        .collect();
    assert_eq!(
        edges,
        vec![("orders", "envoy", 0), ("envoy", "inventory", 1)]
    );
    // A proxy that passes the budget on is invisible.
    assert_eq!(kinds(&analyse(through_proxy(690))), vec![]);
}
