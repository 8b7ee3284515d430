//! The chains the tests of these families publish.

/// A server span of 49 ms named `op` in trace `trace`, without budget attributes.
pub(super) fn hop(
    trace: [u8; 16],
    id: u8,
    parent: Option<u8>,
    service: &str,
    status: deadline_budget::analysis::SpanStatus,
) -> deadline_budget::analysis::Span {
    use deadline_budget::analysis::{BudgetFacts, Span, SpanId, SpanKind, TraceId};
    Span {
        trace_id: TraceId(trace),
        span_id: SpanId([id; 8]),
        parent_span_id: parent.map(|p| SpanId([p; 8])),
        service: std::sync::Arc::from(service),
        name: std::sync::Arc::from("op"),
        kind: SpanKind::Server,
        start_unix_nano: 1_000_000,
        end_unix_nano: 50_000_000,
        status,
        budget: BudgetFacts::default(),
    }
}

/// `n` chains, each a call from its own service `svc-I` to `db`: `n` edges.
pub(super) fn edge_chains(n: u32) -> Vec<deadline_budget::analysis::Span> {
    use deadline_budget::analysis::SpanStatus::Unset;
    (0..n)
        .flat_map(|i| {
            let mut trace = [1u8; 16];
            trace[..4].copy_from_slice(&i.to_be_bytes());
            [
                hop(trace, 1, None, &format!("svc-{i}"), Unset),
                hop(trace, 2, Some(1), "db", Unset),
            ]
        })
        .collect()
}
