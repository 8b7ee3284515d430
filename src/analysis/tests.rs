//! Unit tests of the analysis: chain assembly, each finding rule, edges and the report.

use std::sync::Arc;

use super::*;

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

fn analyse(spans: impl IntoIterator<Item = Span>) -> ChainAnalysis {
    let mut chain = Chain::new(trace());
    for s in spans {
        chain.insert(s);
    }
    chain.analyse(&Options::default())
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
                     "findings": { "error": 1, "warning": 0, "info": 0 } },
        "findings": [ { "kind": "budget_reset", "severity": "error",
                        "trace_id": "07070707070707070707070707070707",
                        "span_id": "0000000000000002",
                        "service": "orders", "span_name": "GET inventory",
                        "message": "forwarded 3000 ms with only 700 ms left",
                        "received_ms": null, "remaining_ms": 700, "forwarded_ms": 3000,
                        "wasted_ms": null } ],
        "edges": [ { "caller": "orders", "callee": "inventory", "calls": 1,
                     "findings": { "budget_reset": 1 } } ]
    });
    assert_eq!(json, expected);
    assert!(report.fails(Severity::Error));
    let _ = kinds(&analyse([]));
}
