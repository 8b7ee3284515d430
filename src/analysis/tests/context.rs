//! Calls that lost their context (`CONVENTIONS.md` section 3): judged across chains.

use super::*;

fn in_trace(t: u8, mut s: Span) -> Span {
    s.trace_id = TraceId([t; 16]);
    s
}

/// Go's classic mistake: the edge's handler (trace `t`, 0..300) calls pricing with
/// `context.Background()`: the call is the root of a trace of its own (`t + 100`), and pricing's
/// hop hangs under it. `end` is when the edge's span ends.
fn background(t: u8, end: u64) -> Vec<Span> {
    vec![
        in_trace(t, span(1, None, "edge", SpanKind::Server, 0, end)),
        in_trace(t + 100, span(2, None, "edge", SpanKind::Client, 10, 290)),
        in_trace(
            t + 100,
            span(3, Some(2), "pricing", SpanKind::Server, 12, 285),
        ),
    ]
}

fn lost(spans: Vec<Span>) -> Vec<LostContext> {
    let chains = chains_from_spans(spans);
    lost_contexts(&chains, &Options::default())
}

#[test]
fn a_root_call_inside_a_request_of_its_service_that_made_no_call_lost_its_context() {
    let found = lost(background(1, 300));
    assert_eq!(found.len(), 1);
    let f = &found[0].finding;
    assert_eq!(
        (f.kind, f.severity, f.trace_id, f.span_id),
        (
            FindingKind::ContextLost,
            Severity::Warning,
            TraceId([101; 16]),
            sid(2)
        )
    );
    assert_eq!(
        f.message,
        "edge called pricing outside its request's trace: no deadline, no cancellation and no trace reached pricing (Go: pass r.Context() on)"
    );
    assert_eq!(f.linked_trace_id, Some(TraceId([1; 16])));
    assert_eq!(found[0].callee.as_deref(), Some("pricing"));
    let json = serde_json::to_value(f).unwrap();
    assert_eq!(json["linked_trace_id"], "01010101010101010101010101010101");
    // Other findings carry no such key.
    let other = serde_json::to_value(&analyse(healthy_reset()).findings[0]).unwrap();
    assert!(other.get("linked_trace_id").is_none(), "{other}");

    // The hop may end up to tol + 50 ms after the call (it answered once the call returned).
    assert_eq!(lost(background(1, 345)).len(), 1);
    assert_eq!(lost(background(1, 346)).len(), 0);
}

fn healthy_reset() -> Vec<Span> {
    vec![
        hop(1, None, "orders", 0, 100, Some(800)),
        call(2, 1, "orders", 10, 90, 700, Some(3000)),
    ]
}

#[test]
fn a_call_that_passed_its_context_on_a_cron_and_a_busy_request_are_not_flagged() {
    // r.Context(): one trace, the call under the edge's hop.
    let mut passed = background(1, 300);
    passed[1] = in_trace(1, span(2, Some(1), "edge", SpanKind::Client, 10, 290));
    passed[2].trace_id = TraceId([1; 16]);
    assert!(lost(passed).is_empty());
    // A cron: a root call that no request of its service encloses.
    let cron = background(1, 300)[1..].to_vec();
    assert!(lost(cron).is_empty());
    // The enclosing request made a call of its own: that call, not this one, is its work.
    let mut busy = background(1, 300);
    busy.push(in_trace(
        1,
        span(4, Some(1), "edge", SpanKind::Client, 5, 8),
    ));
    assert!(lost(busy).is_empty());
    // Another service's request does not enclose it.
    let mut other = background(1, 300);
    other[0].service = Arc::from("gateway");
    assert!(lost(other).is_empty());
}

#[test]
fn two_requests_that_could_have_made_the_call_give_no_linked_trace() {
    let mut spans = background(1, 300);
    spans.push(in_trace(2, span(9, None, "edge", SpanKind::Server, 5, 310)));
    let found = lost(spans);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].finding.linked_trace_id, None);
}

#[test]
fn the_report_counts_lost_contexts_per_edge_and_in_coverage() {
    let mut spans = background(1, 300);
    spans.extend(background(2, 300));
    // pricing fell back to a default of its own: counted as knowing a budget by its chain, but
    // no budget of the request reached it.
    spans[2].budget.source = Some(BudgetSource::Default);
    spans[2].budget.default_ms = Some(1000);
    let report = Report::from_spans(spans, &Options::default());
    let lost: Vec<_> = report
        .findings
        .iter()
        .filter(|f| f.kind == FindingKind::ContextLost)
        .collect();
    assert_eq!(lost.len(), 2);
    assert_eq!(report.summary.findings.warning, 2);
    let edge = report
        .edges
        .iter()
        .find(|e| &*e.caller == "edge" && &*e.callee == "pricing")
        .unwrap();
    assert_eq!(edge.findings.get(&FindingKind::ContextLost), Some(&2));
    // Four hops (two edge, two pricing), none with a budget the request sent.
    let c = &report.summary.coverage;
    assert_eq!((c.hops_with_budget, c.hops_without_budget), (0, 4));
    assert_eq!(
        c.services_without_budget,
        vec![Arc::from("edge"), Arc::from("pricing")]
    );
}

/// Whether a chain is rooted in a call is kept as spans join (the store asks it of every chain
/// it judges): a parentless call makes it so, and a copy of that call that names its parent
/// (the winner: it carries more) makes it not so again.
#[test]
fn a_chain_knows_it_is_rooted_in_a_call_as_its_spans_join_and_are_replaced() {
    let mut chain = Chain::new(TraceId([101; 16]));
    let spans = background(1, 300);
    chain.insert(spans[2].clone());
    assert!(!chain.roots_in_a_call(), "a server span with a parent");
    chain.insert(spans[1].clone());
    assert!(chain.roots_in_a_call(), "the parentless call");
    chain.insert(spans[1].clone());
    assert!(chain.roots_in_a_call(), "the same copy again");
    let mut adopted = spans[1].clone();
    adopted.parent_span_id = Some(sid(9));
    adopted.end_unix_nano += 1;
    assert_eq!(chain.insert(adopted), Inserted::Conflicting);
    assert!(!chain.roots_in_a_call(), "the copy that won has a parent");
    let mut orphan = spans[1].clone();
    orphan.end_unix_nano += 2;
    chain.insert(orphan);
    assert!(chain.roots_in_a_call(), "and the one after it has none");
}
